//! Issue 21, an outside reader's attacks on a named agent's reach: while delegated, the callee's own
//! approval handler and level overrides must not let it do what its caller would refuse. Each attack
//! runs a real delegation (the caller's model calls `agent_delegate`, the callee's calls a host tool
//! above the caller's level) and counts the tool's effects; each has a control that runs the same callee
//! on its own, where its handler or override does let the tool run.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ambit::test_model::Reply;
use ambit::{Agent, ApprovalDecision, ApprovalRequest, Level, NamedAgent, Policy, TestModel, tool_fn};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
struct NoArgs {}

/// A host tool that needs `workspace`: each call is one effect.
fn launch(count: Arc<AtomicUsize>) -> impl ambit::Tool {
    tool_fn("launch", "Launches.", json!({"type": "object", "properties": {}}), move |_: NoArgs| {
        let count = count.clone();
        async move {
            count.fetch_add(1, Ordering::SeqCst);
            Ok::<_, String>("launched")
        }
    })
    .level(Level::Workspace)
}

/// An approval handler that answers `answer` and keeps the tools it was asked about.
fn handler(
    answer: ApprovalDecision,
    asked: Arc<Mutex<Vec<String>>>,
) -> ambit::permission::approval::FnApproval<
    impl Fn(ApprovalRequest) -> std::future::Ready<ApprovalDecision> + Send + Sync,
> {
    ambit::permission::approval::FnApproval(move |r: ApprovalRequest| {
        asked.lock().unwrap().push(r.tool.clone());
        std::future::ready(answer.clone())
    })
}

/// The callee: at `unrestricted` (the caller's level bounds it), calling `launch` once, under `policy`.
fn callee(policy: Policy, count: &Arc<AtomicUsize>) -> Agent {
    Agent::builder()
        .model(TestModel::new([Reply::tool_call("launch", json!({})), Reply::text("done")]))
        .tool(launch(count.clone()))
        .policy(policy)
        .build()
        .unwrap()
}

/// The caller at `read`, delegating once to `ops`.
fn caller(policy: Policy, ops: Agent) -> Agent {
    Agent::builder()
        .model(TestModel::new([
            Reply::tool_call("agent_delegate", json!({"agent": "ops", "prompt": "Launch."})),
            Reply::text("ok"),
        ]))
        .named_agent("ops", NamedAgent::new(ops, "Launches things."))
        .policy(policy)
        .build()
        .unwrap()
}

fn asked() -> Arc<Mutex<Vec<String>>> {
    Arc::new(Mutex::new(Vec::new()))
}

#[tokio::test]
async fn a_callees_own_handler_cannot_approve_what_the_caller_would_refuse() {
    let (count, own) = (Arc::new(AtomicUsize::new(0)), asked());
    let permissive = || Policy::level(Level::Read).approvals(handler(ApprovalDecision::Approve, own.clone()));
    // The caller holds `read` and no handler: it would refuse `launch` outright.
    let r = caller(Policy::level(Level::Read), callee(permissive(), &count)).run("Go.").await.unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 0, "the callee launched: {}", r.tool_calls[0].result);
    assert!(own.lock().unwrap().is_empty(), "the callee's own handler was asked");
    // Control: on its own, the callee's handler approves and the tool runs.
    callee(permissive(), &count).run("Go.").await.unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 1);
    assert_eq!(*own.lock().unwrap(), ["launch"]);
}

#[tokio::test]
async fn the_callers_handler_decides_every_approval_a_delegated_callee_needs() {
    let (count, own, theirs) = (Arc::new(AtomicUsize::new(0)), asked(), asked());
    let permissive = || Policy::level(Level::Read).approvals(handler(ApprovalDecision::Approve, own.clone()));
    let denying =
        Policy::level(Level::Read).approvals(handler(ApprovalDecision::Deny { reason: "no".into() }, theirs.clone()));
    let r = caller(denying, callee(permissive(), &count)).run("Go.").await.unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 0, "the callee launched: {}", r.tool_calls[0].result);
    assert_eq!(*theirs.lock().unwrap(), ["launch"], "the caller's handler was not asked");
    // Control: the caller's handler approving lets it run (its own handler approved too, first).
    let approving = Policy::level(Level::Read).approvals(handler(ApprovalDecision::Approve, theirs.clone()));
    caller(approving, callee(permissive(), &count)).run("Go.").await.unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 1);
    assert_eq!(*theirs.lock().unwrap(), ["launch", "launch"]);
    // The callee's own handler may still narrow: its denial stands whatever the caller would say.
    let strict = Policy::level(Level::Read).approvals(handler(ApprovalDecision::Deny { reason: "mine".into() }, own));
    let approving = Policy::level(Level::Read).approvals(handler(ApprovalDecision::Approve, theirs.clone()));
    caller(approving, callee(strict, &count)).run("Go.").await.unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_callees_level_override_never_lowers_a_tool_below_what_the_caller_requires() {
    let count = Arc::new(AtomicUsize::new(0));
    // The callee lowers `launch` to `read`: at read it would run unasked.
    let lowered = || Policy::level(Level::Read).override_level("launch", Level::Read);
    let r = caller(Policy::level(Level::Read), callee(lowered(), &count)).run("Go.").await.unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 0, "the callee launched: {}", r.tool_calls[0].result);
    // A caller that lowers it too lets it run: the higher of the two levels holds.
    let both = Policy::level(Level::Read).override_level("launch", Level::Read);
    caller(both, callee(lowered(), &count)).run("Go.").await.unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 1);
    // Control: on its own, the callee's override lets the tool run at read.
    callee(lowered(), &count).run("Go.").await.unwrap();
    assert_eq!(count.load(Ordering::SeqCst), 2);
}

/// The last message's text, when it is a tool result or a user message.
fn last_text(r: &ambit::test_model::TestRequest) -> (&'static str, String) {
    match r.messages.last() {
        Some(ambit::Message::Tool { content, .. }) => ("tool", content.clone()),
        Some(ambit::Message::User { content, .. }) => ("user", content.clone()),
        _ => ("", String::new()),
    }
}

/// Issue 21: a delegated run cannot steer a still-running sub-agent that an earlier, wider run of the
/// same agent spawned (it would act on its original grant: here, `launch` at `workspace` for a caller at
/// `read`). The callee's own run spawns a child that holds in a tool; while it holds, a caller at `read`
/// delegates to the callee, whose model steers the child to launch. Without the fix the steer was
/// accepted and the child launched once released (the count below was 1).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delegated_run_cannot_steer_a_child_of_an_earlier_wider_run() {
    let count = Arc::new(AtomicUsize::new(0));
    let (entered, release) = (Arc::new(tokio::sync::Notify::new()), Arc::new(tokio::sync::Notify::new()));
    let (e, rel) = (entered.clone(), release.clone());
    let hold = tool_fn("hold", "Waits.", json!({"type": "object", "properties": {}}), move |_: NoArgs| {
        let (e, rel) = (e.clone(), rel.clone());
        async move {
            e.notify_one();
            rel.notified().await;
            Ok::<_, String>("released")
        }
    })
    .level(Level::Read);
    // One model for the callee's own run, its child and the delegated run, answering by the conversation.
    let model = ambit::FunctionModel::new(|r| {
        let first = match r.messages.first() {
            Some(ambit::Message::User { content, .. }) => content.clone(),
            _ => String::new(),
        };
        let (kind, text) = last_text(r);
        let steered = r
            .messages
            .iter()
            .any(|m| matches!(m, ambit::Message::User { content, .. } if content.contains("Also launch")));
        Ok(match (first.as_str(), kind) {
            ("Spawn.", "user") => {
                Reply::tool_call("agent_spawn", json!({"prompt": "Work.", "allow_tools": ["hold", "launch"]}))
            }
            ("Spawn.", _) => Reply::text("spawned one"),
            ("Work.", "user") if steered => Reply::tool_call("launch", json!({})),
            ("Work.", "user") => Reply::tool_call("hold", json!({})),
            ("Work.", _) => Reply::text("worked"),
            ("Launch.", "user") => Reply::tool_call("agent_list", json!({}))
                .with_tool_call("agent_steer", json!({"id": "4cf40c4e8395", "message": "Also launch."})),
            // The delegated run reports what its steer got.
            ("Launch.", _) => Reply::text(text),
            _ => Reply::text("?"),
        })
    });
    let scope = ambit::Scope::new(std::env::temp_dir(), Vec::<&str>::new(), Vec::<&str>::new(), false).unwrap();
    let ops = Agent::builder()
        .model(model)
        .tool(hold)
        .tool(launch(count.clone()))
        .subagents(ambit::SubagentConfig::default())
        .policy(Policy::level(Level::Workspace).scope(scope.clone()))
        .build()
        .unwrap();
    let own_run = tokio::spawn({
        let ops = ops.clone();
        async move { ops.run("Spawn.").await }
    });
    entered.notified().await;
    let r = caller(Policy::level(Level::Read).scope(scope), ops).run("Go.").await.unwrap();
    let report = &r.tool_calls[0].result;
    release.notify_one();
    let own = own_run.await.unwrap().unwrap();
    assert_eq!(own.output, "spawned one");
    assert_eq!(count.load(Ordering::SeqCst), 0, "the earlier run's child launched for the delegated run: {report}");
    assert!(report.contains("'4cf40c4e8395' is not a sub-agent of this session"), "{report}");
}
