//! Sub-agents against the loopback provider, for what a scenario file cannot order: spawns that can
//! only finish together (so they ran in parallel), a message steered into a running sub-agent, a second
//! follow-up while one runs, a follow-up after the parent narrowed, an interrupting steer that cuts a
//! request in flight, sub-agent tokens in the parent's usage and budget, and the parent's MCP servers
//! narrowed for a sub-agent. Host tools here wait on each other (or on the provider having received a
//! request), never on time; the timeouts are guards that turn a hang into a failure.

mod mcp_support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ambit::agent::subagent::SubagentConfig;
use ambit::deferral::{Deferral, DeferralConfig};
use ambit::mcp::McpServer;
use ambit::model::TextSink;
use ambit::{
    Agent, Budget, Error, Level, Message, Model, ModelError, ModelRequest, ModelResponse, OpenAiChat, Policy, Scope,
    StopReason, ToolCall, Usage, tool_fn,
};
use ambit_test_provider::{Provider, Script};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

const GUARD: Duration = Duration::from_secs(60);
const A1: &str = "4cf40c4e8395";
const A2: &str = "4332622cf633";

#[derive(Deserialize)]
struct NoArgs {}

async fn provider(exchanges: Value) -> Provider {
    let script: Script = serde_json::from_value(json!({"name": "subagents", "exchanges": exchanges})).unwrap();
    Provider::start(script).await.unwrap()
}

fn calls(list: Value) -> Value {
    json!({"tool_calls": list})
}

fn text(t: &str) -> Value {
    json!({"content": t})
}

fn tmp_scope() -> Scope {
    Scope::new("/tmp", Vec::<&str>::new(), Vec::<&str>::new(), false).unwrap()
}

async fn run(agent: &Agent, input: &str) -> ambit::RunResult {
    tokio::time::timeout(GUARD, agent.run(input)).await.expect("the run hung").expect("the run failed")
}

fn check(p: &Provider, exchanges: usize) {
    let (served, mismatches) = p.report();
    assert!(mismatches.is_empty(), "{mismatches:?}");
    assert_eq!(served, exchanges);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn spawns_of_one_turn_run_in_parallel() {
    // Each sub-agent calls `meet`, which returns only once both have called it.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let b = barrier.clone();
    let meet = tool_fn("meet", "Wait for the other helper.", json!({"type": "object"}), move |_: NoArgs| {
        let b = b.clone();
        async move {
            b.wait().await;
            Ok::<_, String>("met")
        }
    })
    .level(Level::Read);
    let child = [
        json!({"expect": {"messages_count": 1}, "respond": calls(json!([{"id": "m", "name": "meet", "arguments": {}}]))}),
    ];
    let p = provider(json!([
        {"respond": calls(json!([
            {"id": "a", "name": "agent_spawn", "arguments": {"prompt": "go", "allow_tools": ["meet"]}},
            {"id": "b", "name": "agent_spawn", "arguments": {"prompt": "go", "allow_tools": ["meet"]}}
        ]))},
        child[0], child[0],
        {"expect": {"messages_count": 3}, "respond": text("done")},
        {"expect": {"messages_count": 3}, "respond": text("done")},
        {"expect": {"messages_count": 4}, "respond": text("both met")}
    ]))
    .await;
    let agent = Agent::builder()
        .model(OpenAiChat::new("m").base_url(p.base_url()).max_retries(0))
        .tool(meet)
        .policy(Policy::level(Level::Workspace).scope(tmp_scope()))
        .subagents(SubagentConfig::default())
        .build()
        .unwrap();
    let r = run(&agent, "two helpers").await;
    assert_eq!(r.output, "both met");
    assert!(r.tool_calls[0].result.starts_with(&format!("Agent: {A1}\n")), "{}", r.tool_calls[0].result);
    assert!(r.tool_calls[1].result.starts_with(&format!("Agent: {A2}\n")), "{}", r.tool_calls[1].result);
    check(&p, 6);
}

/// A host tool pair: `hold` waits until `release` has been called.
fn hold_and_release() -> (impl ambit::Tool, impl ambit::Tool) {
    let gate = Arc::new(tokio::sync::Notify::new());
    let g = gate.clone();
    let hold = tool_fn("hold", "Wait for the release.", json!({"type": "object"}), move |_: NoArgs| {
        let g = g.clone();
        async move {
            g.notified().await;
            Ok::<_, String>("released")
        }
    })
    .level(Level::Read);
    let release = tool_fn("release", "Release the holder.", json!({"type": "object"}), move |_: NoArgs| {
        let g = gate.clone();
        async move {
            g.notify_one();
            Ok::<_, String>("ok")
        }
    })
    .level(Level::Read);
    (hold, release)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_sub_agent_reads_a_steer_at_its_next_round_boundary_and_a_second_follow_up_is_refused() {
    let (hold, release) = hold_and_release();
    let p = provider(json!([
        // The parent spawns, steers and releases in one turn: the sub-agent is held in its tool call.
        {"respond": calls(json!([
            {"id": "s", "name": "agent_spawn", "arguments": {"prompt": "work", "allow_tools": ["hold"]}},
            {"id": "t", "name": "agent_steer", "arguments": {"id": A1, "message": "Also count to three."}},
            {"id": "r", "name": "release", "arguments": {}}
        ]))},
        {"expect": {"messages_count": 1}, "respond": calls(json!([{"id": "h", "name": "hold", "arguments": {}}]))},
        // After that round's tool result, the steered message.
        {"expect": {"messages_count": 4, "messages_tail": [{"role": "tool", "content": "released"}, {"role": "user"}]},
         "respond": text("1, 2, 3")},
        // Two follow-ups in one turn while the first holds: the second is refused.
        {"expect": {"messages_count": 5}, "respond": calls(json!([
            {"id": "f1", "name": "agent_followup", "arguments": {"id": A1, "prompt": "again"}},
            {"id": "f2", "name": "agent_followup", "arguments": {"id": A1, "prompt": "and again"}},
            {"id": "r2", "name": "release", "arguments": {}}
        ]))},
        {"expect": {"messages_count": 6, "messages_tail": [{"role": "user", "content": "again"}]},
         "respond": calls(json!([{"id": "h2", "name": "hold", "arguments": {}}]))},
        {"expect": {"messages_count": 8}, "respond": text("again done")},
        {"expect": {"messages_count": 9}, "respond": text("finished")}
    ]))
    .await;
    let agent = Agent::builder()
        .model(OpenAiChat::new("m").base_url(p.base_url()).max_retries(0))
        .tool(hold)
        .tool(release)
        .policy(Policy::level(Level::Workspace).scope(tmp_scope()))
        .subagents(SubagentConfig::default())
        .max_turns(5)
        .build()
        .unwrap();
    let r = run(&agent, "go").await;
    assert_eq!(r.output, "finished");
    assert!(r.tool_calls[0].result.ends_with("\n\n1, 2, 3"), "{}", r.tool_calls[0].result);
    assert_eq!(
        r.tool_calls[1].result,
        format!("Message left for sub-agent {A1}; it reads it at its next round boundary.")
    );
    assert!(r.tool_calls[3].result.ends_with("\n\nagain done"), "{}", r.tool_calls[3].result);
    assert_eq!(
        r.tool_calls[4].result,
        format!(
            "Error: tool 'agent_followup' failed: sub-agent {A1} is still running: reach it with agent_steer, or follow up once it has finished"
        )
    );
    check(&p, 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_is_re_admitted_against_the_parent_as_it_is_now() {
    let base = std::env::temp_dir().join(format!("ambit-subagents-{}", std::process::id()));
    std::fs::create_dir_all(base.join("work/out")).unwrap();
    std::fs::create_dir_all(base.join("docs")).unwrap();
    let base = std::fs::canonicalize(base).unwrap();
    let wide = Scope::new(base.join("work"), Vec::<&str>::new(), [base.join("docs")], true).unwrap();
    let p = provider(json!([
        {"respond": calls(json!([
            {"id": "a", "name": "agent_spawn", "arguments": {"prompt": "plain"}},
            {"id": "b", "name": "agent_spawn", "arguments": {"prompt": "scoped", "working_directory": "out",
                                                              "additional_readable_directories": [base.join("docs")]}}
        ]))},
        {"respond": text("ok")}, {"respond": text("ok")},
        {"respond": text("spawned")},
        // Run 2, under a narrower policy: read only, and the docs directory no longer held.
        {"respond": calls(json!([
            {"id": "c", "name": "agent_followup", "arguments": {"id": A1, "prompt": "again"}},
            {"id": "d", "name": "agent_followup", "arguments": {"id": A2, "prompt": "again"}}
        ]))},
        {"expect": {"messages_count": 3}, "respond": text("still here")},
        {"respond": text("done")}
    ]))
    .await;
    let agent = Agent::builder()
        .model(OpenAiChat::new("m").base_url(p.base_url()).max_retries(0))
        .policy(Policy::level(Level::Workspace).scope(wide))
        .subagents(SubagentConfig::default())
        .build()
        .unwrap();
    let r = run(&agent, "spawn two").await;
    let work = base.join("work");
    assert!(
        r.tool_calls[0]
            .result
            .starts_with(&format!("Agent: {A1}\nPermission: workspace\nWorking directory: {}\n", work.display()))
    );
    assert!(
        r.tool_calls[1]
            .result
            .contains(&format!("Additional readable directories:\n  {}\n", base.join("docs").display()))
    );
    let narrow = Scope::new(&work, Vec::<&str>::new(), Vec::<&str>::new(), true).unwrap();
    let now = agent.with_policy(Policy::level(Level::Read).scope(narrow)).unwrap();
    let r = run(&now, "follow up").await;
    assert_eq!(
        r.tool_calls[0].result,
        format!(
            "Agent: {A1}\nPermission: read\nWorking directory: {}\nAdditional readable directories: none\n\nstill here",
            work.display()
        ),
        "the level the parent dropped to narrows the follow-up"
    );
    assert_eq!(
        r.tool_calls[1].result,
        format!(
            "Error: tool 'agent_followup' failed: the follow-up was refused: additional_readable_directories '{}' is outside your reach",
            base.join("docs").display()
        ),
        "a directory the parent can no longer grant refuses the follow-up"
    );
    check(&p, 7);
}

#[tokio::test]
async fn max_depth_zero_removes_the_agent_tools_and_one_keeps_them_from_sub_agents() {
    let none = Agent::builder()
        .model(OpenAiChat::new("m"))
        .subagents(SubagentConfig { max_depth: 0, ..Default::default() })
        .build()
        .unwrap();
    assert!(none.tools().get("agent_spawn").is_none() && none.tools().get("agent_list").is_none());
    let blocked = Agent::builder()
        .model(OpenAiChat::new("m"))
        .policy(Policy::level(Level::Read).block_tools(["agent_spawn"]))
        .subagents(SubagentConfig::default())
        .build()
        .unwrap();
    assert!(blocked.tools().get("agent_list").is_none(), "blocking agent_spawn removes all five");
    let some = Agent::builder().model(OpenAiChat::new("m")).subagents(SubagentConfig::default()).build().unwrap();
    let names: Vec<String> = some.list_tools().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["agent_spawn", "agent_list", "agent_followup", "agent_steer", "agent_delete"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agent_spawns_its_own_and_lists_only_its_direct_children() {
    let grandchild = "53b83fb251f4";
    let p = provider(json!([
        {"respond": calls(json!([{"id": "a", "name": "agent_spawn", "arguments": {"prompt": "delegate", "permission": "read"}}]))},
        // The sub-agent, at read, spawns its own; asking for workspace there is refused by name.
        {"expect": {"tool_names": ["agent_spawn", "agent_list", "agent_followup", "agent_steer", "agent_delete"]},
         "respond": calls(json!([
            {"id": "b", "name": "agent_spawn", "arguments": {"prompt": "deeper"}},
            {"id": "c", "name": "agent_spawn", "arguments": {"prompt": "wider", "permission": "workspace"}}
         ]))},
        {"expect": {"messages_count": 1}, "respond": text("deep")},
        {"expect": {"messages_tail": [
            {"role": "tool", "content": format!("Agent: {grandchild}\nPermission: read\nWorking directory: /tmp\nAdditional readable directories: anywhere\n\ndeep")},
            {"role": "tool", "content": "Error: tool 'agent_spawn' failed: the sub-agent was not started: permission 'workspace' is above your own level 'read'"}
         ]},
         "respond": calls(json!([{"id": "d", "name": "agent_list", "arguments": {}}]))},
        {"respond": text("delegated")},
        {"respond": calls(json!([{"id": "e", "name": "agent_list", "arguments": {}}]))},
        {"respond": text("done")}
    ]))
    .await;
    let agent = Agent::builder()
        .model(OpenAiChat::new("m").base_url(p.base_url()).max_retries(0))
        .policy(Policy::level(Level::Workspace).scope(tmp_scope()))
        .subagents(SubagentConfig::default())
        .build()
        .unwrap();
    let r = run(&agent, "go").await;
    let report = &r.tool_calls[0].result;
    assert!(report.starts_with(&format!("Agent: {A1}\nPermission: read\n")), "{report}");
    let list = &r.tool_calls[1].result;
    let cols: Vec<&str> = list.split('\t').collect();
    assert_eq!(cols[0], A1, "{list}");
    assert_eq!(cols[1], "/tmp");
    assert_eq!(cols[2], "turns=3");
    assert!(cols[3].starts_with("last_active=20") && cols[3].ends_with('Z'), "{list}");
    check(&p, 7);
}

/// `respond` with a usage of `input` and `output` tokens.
fn used(mut respond: Value, input: u64, output: u64) -> Value {
    respond["usage"] = json!({"input_tokens": input, "output_tokens": output});
    respond
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agents_tokens_count_towards_its_parents_usage() {
    let p = provider(json!([
        {"respond": used(calls(json!([{"id": "a", "name": "agent_spawn", "arguments": {"prompt": "one"}}])), 10, 1)},
        {"expect": {"messages_count": 1}, "respond": used(text("first"), 100, 10)},
        {"respond": used(calls(json!([{"id": "b", "name": "agent_followup", "arguments": {"id": A1, "prompt": "again"}}])), 20, 2)},
        {"expect": {"messages_count": 3}, "respond": used(text("second"), 200, 20)},
        {"respond": used(text("done"), 30, 3)}
    ]))
    .await;
    let agent = Agent::builder()
        .model(OpenAiChat::new("m").base_url(p.base_url()).max_retries(0))
        .policy(Policy::level(Level::Workspace).scope(tmp_scope()))
        .subagents(SubagentConfig::default())
        .build()
        .unwrap();
    let r = run(&agent, "go").await;
    assert_eq!(r.output, "done");
    assert!(r.tool_calls[1].result.ends_with("\n\nsecond"), "{}", r.tool_calls[1].result);
    assert_eq!(r.turns, 3, "the parent's own requests");
    assert_eq!(
        (r.usage.requests, r.usage.input_tokens, r.usage.output_tokens),
        (5, 360, 36),
        "the spawn's and the follow-up's tokens are the parent's too"
    );
    check(&p, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_budget_covers_the_sub_agents_it_ran() {
    let exchanges = || {
        json!([
            {"respond": used(calls(json!([{"id": "a", "name": "agent_spawn", "arguments": {"prompt": "one"}}])), 10, 1)},
            {"expect": {"messages_count": 1}, "respond": used(text("first"), 100, 10)},
            {"respond": used(text("done"), 20, 2)}
        ])
    };
    let agent = |p: &Provider, max_tokens: u64| {
        Agent::builder()
            .model(OpenAiChat::new("m").base_url(p.base_url()).max_retries(0))
            .policy(Policy::level(Level::Workspace).scope(tmp_scope()))
            .subagents(SubagentConfig::default())
            .budget(Budget { max_tokens: Some(max_tokens), max_cost: None })
            .build()
            .unwrap()
    };
    // 11 + 110 fit in 125; the parent's next 22 do not: 143 spent, 33 of them its own.
    let p = provider(exchanges()).await;
    let e = tokio::time::timeout(GUARD, agent(&p, 125).run("go")).await.expect("the run hung").unwrap_err();
    match e {
        Error::Budget { budget, spent, usage, .. } => {
            assert_eq!((budget.as_str(), spent, usage.requests), ("tokens", 143.0, 3));
        }
        other => panic!("expected the budget error, got {other}"),
    }
    check(&p, 3);
    // 115: the sub-agent is given what is left (104) and stops past it; its 110 tokens stop the parent
    // when its round ends.
    let p = provider(exchanges()).await;
    let e = tokio::time::timeout(GUARD, agent(&p, 115).run("go")).await.expect("the run hung").unwrap_err();
    match e {
        Error::Budget { spent, usage, .. } => assert_eq!((spent, usage.requests), (121.0, 2)),
        other => panic!("expected the budget error, got {other}"),
    }
    check(&p, 2);
}

/// A host tool that returns once the provider has received `n` requests.
fn wait_for_requests(p: Arc<Provider>, n: usize) -> impl ambit::Tool {
    tool_fn("wait_inflight", "Wait for the helper's request.", json!({"type": "object"}), move |_: NoArgs| {
        let p = p.clone();
        async move {
            while p.report().0 < n {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Ok::<_, String>("in flight")
        }
    })
    .level(Level::Read)
}

const STEER: &str = "Change course: answer in French.";
const CUT: &str = "it reads it now: the reply it is writing is cut (a tool it is running finishes first).";

/// The parent's first turn: wait until the sub-agent's first request is in flight, then steer it with
/// interrupt. With `max_concurrency(2)` the steer starts only once the wait has returned.
fn spawn_and_interrupt() -> Value {
    calls(json!([
        {"id": "w", "name": "wait_inflight", "arguments": {}},
        {"id": "s", "name": "agent_spawn", "arguments": {"prompt": "work"}},
        {"id": "t", "name": "agent_steer", "arguments": {"id": A1, "message": STEER, "interrupt": true}}
    ]))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupting_steer_drops_the_reply_in_flight_and_the_request_goes_again_with_the_message() {
    let p = Arc::new(
        provider(json!([
            {"respond": spawn_and_interrupt()},
            // Held far longer than the test takes: only the steer ends it.
            {"expect": {"messages_count": 1}, "delay_ms": 30000, "respond": text("stale reply")},
            // Not streamed: nothing of the dropped reply is kept; the message follows the prompt.
            {"expect": {"messages_count": 2, "messages_tail": [
                {"role": "user", "content": "work"},
                {"role": "user", "content": {"$contains": STEER}}
             ]}, "respond": text("Bonjour")},
            {"expect": {"messages_count": 5}, "respond": text("done")}
        ]))
        .await,
    );
    let agent = Agent::builder()
        .model(OpenAiChat::new("m").base_url(p.base_url()).max_retries(0))
        .tool(wait_for_requests(p.clone(), 2))
        .policy(Policy::level(Level::Workspace).scope(tmp_scope()))
        .subagents(SubagentConfig::default())
        .max_concurrency(2)
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    let r = run(&agent, "go").await;
    assert!(started.elapsed() < Duration::from_secs(25), "the request in flight was not cut");
    assert_eq!(r.output, "done");
    assert!(r.tool_calls[1].result.ends_with("\n\nBonjour"), "{}", r.tool_calls[1].result);
    assert_eq!(r.tool_calls[2].result, format!("Message left for sub-agent {A1}; {CUT}"));
    check(&p, 4);
}

/// A model in the test's process: the parent spawns and steers; the sub-agent's first request (its
/// prompt is "work") hangs until it is dropped, streaming the start of an answer first when `stream`.
struct Staged {
    stream: bool,
    inflight: Arc<tokio::sync::Notify>,
    seen: Arc<Mutex<Vec<ModelRequest>>>,
    parent_turns: AtomicUsize,
}

fn first_user(r: &ModelRequest) -> &str {
    match r.messages.first() {
        Some(Message::User { content, .. }) => content,
        _ => "",
    }
}

fn steered(r: &ModelRequest) -> bool {
    r.messages.iter().any(|m| matches!(m, Message::User { content, .. } if content.contains(STEER)))
}

fn answer(text: Option<&str>, tool_calls: Vec<ToolCall>) -> ModelResponse {
    let stop = if tool_calls.is_empty() { StopReason::End } else { StopReason::ToolCalls };
    ModelResponse { id: "r".into(), text: text.map(str::to_string), tool_calls, stop, usage: Usage::default() }
}

impl Staged {
    /// The hung first request of the sub-agent.
    async fn hang(&self, request: &ModelRequest, partial: Option<&TextSink<'_>>) -> Result<ModelResponse, ModelError> {
        self.seen.lock().unwrap().push(request.clone());
        if let Some(sink) = partial {
            sink("Once upon a ti");
        }
        self.inflight.notify_one();
        std::future::pending().await
    }
}

#[async_trait]
impl Model for Staged {
    fn name(&self) -> &str {
        "staged"
    }

    async fn respond(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        if first_user(request) == "work" {
            if !steered(request) {
                return self.hang(request, None).await;
            }
            self.seen.lock().unwrap().push(request.clone());
            return Ok(answer(Some("steered"), Vec::new()));
        }
        self.seen.lock().unwrap().push(request.clone());
        let call = |id: &str, name: &str, args: Value| ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: args.to_string(),
            from_text: false,
        };
        Ok(match self.parent_turns.fetch_add(1, Ordering::SeqCst) {
            0 => answer(
                None,
                vec![
                    call("w", "wait_inflight", json!({})),
                    call("s", "agent_spawn", json!({"prompt": "work"})),
                    call("t", "agent_steer", json!({"id": A1, "message": STEER, "interrupt": true})),
                ],
            ),
            _ => answer(Some("done"), Vec::new()),
        })
    }

    async fn respond_streaming(
        &self,
        request: &ModelRequest,
        sink: &TextSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        if self.stream && first_user(request) == "work" && !steered(request) {
            return self.hang(request, Some(sink)).await;
        }
        let response = self.respond(request).await?;
        if let Some(t) = response.text.as_deref() {
            sink(t);
        }
        Ok(response)
    }
}

async fn interrupt_in_process(stream: bool) -> Vec<Message> {
    let inflight = Arc::new(tokio::sync::Notify::new());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let model = Staged { stream, inflight: inflight.clone(), seen: seen.clone(), parent_turns: AtomicUsize::new(0) };
    let wait =
        tool_fn("wait_inflight", "Wait for the helper's request.", json!({"type": "object"}), move |_: NoArgs| {
            let inflight = inflight.clone();
            async move {
                inflight.notified().await;
                Ok::<_, String>("in flight")
            }
        })
        .level(Level::Read);
    let agent = Agent::builder()
        .model(model)
        .tool(wait)
        .policy(Policy::level(Level::Workspace).scope(tmp_scope()))
        .subagents(SubagentConfig::default())
        .max_concurrency(2)
        .build()
        .unwrap();
    let r = run(&agent, "go").await;
    assert_eq!(r.output, "done");
    assert!(r.tool_calls[1].result.ends_with("\n\nsteered"), "{}", r.tool_calls[1].result);
    assert_eq!(r.tool_calls[2].result, format!("Message left for sub-agent {A1}; {CUT}"));
    let seen = seen.lock().unwrap();
    let child: Vec<&ModelRequest> = seen.iter().filter(|r| first_user(r) == "work").collect();
    assert_eq!(child.len(), 2, "the cut request, then the one that goes again");
    assert_eq!(child[0].messages.len(), 1);
    child[1].messages.clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupting_steer_keeps_what_a_streamed_reply_had_written() {
    let messages = interrupt_in_process(true).await;
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert_eq!(messages[0], Message::user("work"));
    assert_eq!(messages[1], Message::Assistant { content: Some("Once upon a ti".into()), tool_calls: Vec::new() });
    assert!(matches!(&messages[2], Message::User { content, .. } if content.ends_with(STEER)), "{messages:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupting_steer_drops_a_reply_that_is_not_streamed_whole() {
    let messages = interrupt_in_process(false).await;
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(matches!(&messages[1], Message::User { content, .. } if content.ends_with(STEER)), "{messages:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_agent_sees_its_parents_mcp_tools_narrowed_by_its_server_lists() {
    use mcp_support::{call, names, scripted};
    let dir = mcp_support::servers_dir();
    let python = mcp_support::installed(&dir, "venv/bin/python");
    let script = mcp_support::repo_root().join("tests/mcp/dynamic_server.py").display().to_string();
    let server = |name: &str| McpServer::stdio(name, [python.clone(), script.clone()]);
    let (model, seen) = scripted(vec![
        call("p1", "agent_spawn", json!({"prompt": "one", "allow_servers": ["dyn"]})),
        call("a1", "mcp__dyn__enable_extra", json!({})),
        mcp_support::text("a done"),
        call("p2", "agent_spawn", json!({"prompt": "two", "deny_servers": ["dyn"]})),
        call("b1", "mcp__dyn__enable_extra", json!({})),
        mcp_support::text("b done"),
        call("p3", "agent_spawn", json!({"prompt": "three"})),
        mcp_support::text("c done"),
        mcp_support::text("done"),
    ]);
    let agent = Agent::builder()
        .model(model)
        .mcp(server("dyn"))
        .mcp(server("other"))
        .deferral(DeferralConfig { setting: Deferral::Eager, ..Default::default() })
        .subagents(SubagentConfig::default())
        .build()
        .unwrap();
    let r = tokio::time::timeout(GUARD, agent.run("go")).await.expect("the run hung").expect("the run failed");
    assert_eq!(r.output, "done");
    for c in &r.tool_calls {
        assert!(!c.is_error && !c.result.contains("Warning:"), "{}: {}", c.name, c.result);
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 9);
    let has = |i: usize, n: &str| names(&seen[i]).iter().any(|x| x == n);
    let any_of = |i: usize, prefix: &str| names(&seen[i]).iter().any(|x| x.starts_with(prefix));
    // The resource and prompt meta-tools: mcp_<verb>, not mcp__<server>__<tool>.
    let meta = |i: usize| names(&seen[i]).iter().any(|x| x.starts_with("mcp_") && !x.starts_with("mcp__"));
    // The parent has both servers and the meta-tools.
    assert!(has(0, "mcp__dyn__enable_extra") && has(0, "mcp__other__enable_extra") && has(0, "mcp_list_all"));
    // allow_servers ["dyn"]: dyn's tools only; the meta-tools, which reach any server, are withheld.
    assert!(has(1, "mcp__dyn__enable_extra"), "{:?}", names(&seen[1]));
    assert!(!any_of(1, "mcp__other__") && !meta(1), "{:?}", names(&seen[1]));
    // Its call went through the parent's connection, and the tool it added is the parent's too. (Whether
    // the sub-agent's own next request already has it depends on when rmcp handles the server's
    // list_changed, which the MCP layer only yields for: under load it can come a request later.)
    let a = &seen[2].messages;
    assert!(
        matches!(a.last(), Some(Message::Tool { content, is_error: false, .. }) if content.starts_with("extra_tool added")),
        "{a:?}"
    );
    assert!(has(3, "mcp__dyn__extra_tool"), "{:?}", names(&seen[3]));
    // deny_servers ["dyn"]: the other server only, and a call to dyn finds nothing.
    assert!(has(4, "mcp__other__enable_extra") && !any_of(4, "mcp__dyn__") && !meta(4), "{:?}", names(&seen[4]));
    assert!(
        matches!(seen[5].messages.last(), Some(Message::Tool { content, is_error: true, .. })
            if content == "Error: there is no tool named 'mcp__dyn__enable_extra'"),
        "{:?}",
        seen[5].messages.last()
    );
    // No server lists: everything the parent has.
    for n in ["mcp__dyn__enable_extra", "mcp__dyn__extra_tool", "mcp__other__enable_extra", "mcp_list_all"] {
        assert!(has(7, n), "{n}: {:?}", names(&seen[7]));
    }
}

/// A sub-agent spawned on a profile keeps it after a restart: the profile is in the spawn's terms, kept
/// with the child session, so a new agent on a new store handle follows it up on the profile's model
/// (the provider checks the model name of every request). The negative control: the same follow-up
/// expected on the parent's model fails.
#[tokio::test]
async fn a_profile_survives_a_restart_in_the_child_sessions_terms() {
    for (follow_up_model, ok) in [("gpt-4.1-nano", true), ("gpt-4.1", false)] {
        let p = provider(json!([
            {"expect": {"model": "gpt-4.1"},
             "respond": calls(json!([{"id": "s", "name": "agent_spawn", "arguments": {"prompt": "Look.", "profile": "fast"}}]))},
            {"expect": {"model": "gpt-4.1-nano"}, "respond": text("Looked.")},
            {"expect": {"model": "gpt-4.1"}, "respond": text("Spawned.")},
            {"expect": {"model": "gpt-4.1"},
             "respond": calls(json!([{"id": "f", "name": "agent_followup", "arguments": {"id": A1, "prompt": "Again."}}]))},
            {"expect": {"model": follow_up_model}, "respond": text("Looked again.")},
            {"expect": {"model": "gpt-4.1"}, "respond": text("Done.")},
        ]))
        .await;
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("s.db").display());
        let base = p.base_url();
        let build = || {
            Agent::builder()
                .model(OpenAiChat::new("gpt-4.1").base_url(base.clone()).api_key("k").max_retries(0))
                .profile(
                    "fast",
                    Arc::new(OpenAiChat::new("gpt-4.1-nano").base_url(base.clone()).api_key("k").max_retries(0)),
                )
                .subagents(SubagentConfig::default())
                .policy(Policy { level: Level::Workspace, scope: Some(tmp_scope()), ..Policy::default() })
                .build()
                .unwrap()
        };
        let id = {
            let sessions = ambit::session::Sessions::open(&url).await.unwrap();
            let id = sessions.create().await.unwrap();
            let first = sessions.run(&build(), &id, "Spawn one.").await.unwrap();
            assert!(first.tool_calls[0].result.contains("Profile: fast"), "{}", first.tool_calls[0].result);
            id
        };
        // A new process: a new store handle and a new agent.
        let sessions = ambit::session::Sessions::open(&url).await.unwrap();
        let second = tokio::time::timeout(GUARD, sessions.run(&build(), &id, "Follow it up.")).await.expect("hung");
        match (ok, second) {
            (true, Ok(r)) => {
                assert_eq!(r.output, "Done.");
                assert!(r.tool_calls[0].result.ends_with("Looked again."), "{}", r.tool_calls[0].result);
                check(&p, 6);
            }
            (false, r) => {
                let failed = r.is_err() || r.as_ref().is_ok_and(|r| r.tool_calls[0].is_error);
                assert!(failed, "the negative control passed: {r:?}");
            }
            (true, Err(e)) => panic!("{e}"),
        }
    }
}
