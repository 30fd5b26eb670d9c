//! Sub-agents against the loopback provider, for what a scenario file cannot order: spawns that can
//! only finish together (so they ran in parallel), a message steered into a running sub-agent, a second
//! follow-up while one runs, and a follow-up after the parent narrowed. Host tools here wait on each
//! other, never on time; the one timeout is a guard that turns a hang into a failure.

use std::sync::Arc;
use std::time::Duration;

use ambit::agent::subagent::SubagentConfig;
use ambit::{Agent, Level, OpenAiChat, Policy, Scope, tool_fn};
use ambit_test_provider::{Provider, Script};
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
            "Error: tool 'agent_followup' failed: the follow-up was refused: readable directory '{}' is outside your reach",
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
