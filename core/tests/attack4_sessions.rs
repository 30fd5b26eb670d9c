//! Outside attack on durable runs (SPEC §8b, issue 13), through the public API on both stores: the
//! lease a host configures, the call journal under a hostile model server, and what a run below
//! `unrestricted` (or a sub-agent) can read of other sessions with the session tools.
//!
//! Tests named `hole_*` FAIL on the code as attacked: each shows a hole (its doc comment says which and
//! what the fix should make true). Tests named `held_*` pin a guarantee the attack could not break; each
//! carries its negative control.

use std::time::{Duration, Instant};

use ambit::session::{Item, SessionConfig, Sessions};
use ambit::{Agent, Level, OpenAiChat, Policy, tool_fn};
use serde_json::{Value, json};

#[path = "support/durable_agent.rs"]
mod durable_agent;

#[path = "support/durable_worker.rs"]
mod durable_worker;
use durable_worker::{effects_of, provider};

#[path = "support/session_stores.rs"]
mod session_stores;
use session_stores::stores;

/// Waits (bounded, on a real condition) until `line` is among the effects.
async fn wait_for(effects: &str, line: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while effects_of(effects, line) == 0 {
        assert!(Instant::now() < deadline, "never saw '{line}'");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn log_messages(sessions: &Sessions, sid: &str) -> Vec<Value> {
    sessions
        .entries(sid)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.item {
            Item::Message { message } => Some(serde_json::to_value(&message).unwrap()),
            _ => None,
        })
        .collect()
}

/// The tool results of `messages`, in order, as (call id, content).
fn results(messages: &[Value]) -> Vec<(String, String)> {
    messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["call_id"].as_str().unwrap_or_default().to_string(),
                m["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Run 1 holds the session (inside the `gate` tool) while a second handle, opened as `second`, runs
/// the same session: Ok(()) when the second run was refused `session_busy`, Err(what happened) else.
async fn second_run_while_first_holds(
    url: &str,
    dir: &std::path::Path,
    first_lease: Option<u64>,
) -> Result<(), String> {
    let effects = dir.join(format!("effects-{}", first_lease.unwrap_or(0))).display().to_string();
    let p = provider(json!([
        {"respond": {"tool_calls": [{"id": "g", "name": "gate", "arguments": {"to": "one"}}]}},
        {"respond": {"content": "first done"}},
        {"respond": {"content": "second done"}}
    ]))
    .await;
    let agent = durable_agent::agent(&p.base_url(), &effects, false, false);
    let config = SessionConfig { lease_ms: first_lease, ..SessionConfig::default() };
    let first = Sessions::open(url).await.unwrap().with_config(config).map_err(|e| format!("config refused: {e}"))?;
    let sid = first.create().await.unwrap();
    let (s, a, id) = (first.clone(), agent.clone(), sid.clone());
    let run1 = tokio::spawn(async move { s.run(&a, &id, "go").await });
    // Until the first run is inside its tool (or it ended without getting there), bounded.
    let deadline = Instant::now() + Duration::from_secs(60);
    while effects_of(&effects, "entered:one") == 0 {
        if run1.is_finished() {
            let ended = run1.await.map(|r| r.map(|r| r.output).map_err(|e| format!("{} {e}", e.code())));
            return Err(format!("the first run never reached its tool: it ended {ended:?}"));
        }
        assert!(Instant::now() < deadline, "the first run never reached its tool");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Another process's handle, with the default lease.
    let second = Sessions::open(url).await.unwrap();
    let outcome = second.run(&agent, &sid, "meanwhile").await;
    std::fs::write(format!("{effects}.gate"), "").unwrap();
    let _ = tokio::time::timeout(Duration::from_secs(60), run1).await;
    match outcome {
        Err(e) if e.code() == "session_busy" => Ok(()),
        Err(e) => Err(format!("the second run failed otherwise: {} {e}", e.code())),
        Ok(r) => Err(format!("the second run ran while the first held the session: {:?}", r.output)),
    }
}

/// HOLE (severity: medium — a host setting accepted, then every run of the store fails with a false
/// error). `lease_ms` is a `u64` accepted without an upper bound, then cast `as i64` (durable.rs
/// `Lease::take`; the same cast in `task_result`'s lost window): any lease of 2^63 ms or more becomes
/// negative and the lease is written already expired. Observed: the run is stopped before its first
/// tool with `session_busy` "was taken over by another run: this run's lease ran out" — no other run
/// exists. (The fencing keeps it from turning into two runs at once here; the routine runner's lease
/// has the same cast and there it does: attack4_routines::a_huge_runner_lease_is_refused...)
/// From Python/Node the value arrives through `lease_ms`/`leaseMs`. The lease must be bounded (typed
/// `invalid_argument` naming lease_ms) or saturate, never wrap. Negative control inside: with the
/// default lease the first run reaches its tool and the second run is refused `session_busy`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_lease_is_refused_naming_lease_ms_so_no_run_takes_a_live_session() {
    for store in stores().await {
        let dir = tempfile::tempdir().unwrap();
        // Negative control: the default lease keeps the second run out.
        let control = second_run_while_first_holds(&store.url, dir.path(), None).await;
        assert_eq!(control, Ok(()), "{}: control", store.name);
        for lease in [1u64 << 63, u64::MAX] {
            let attacked = second_run_while_first_holds(&store.url, dir.path(), Some(lease)).await;
            // Refusing the setting at open is a fix too.
            if let Err(why) = &attacked {
                assert!(why.starts_with("config refused"), "HOLE ({}): lease_ms {lease}: {why}", store.name);
            }
        }
    }
}

/// An agent with the session tools and `tag {to}`, whose result names its argument ("tagged x") and
/// which appends `tag:x` to `effects`.
fn tagging_agent(base_url: &str, effects: &str, level: Level) -> Agent {
    let file = effects.to_string();
    let tag = tool_fn(
        "tag",
        "Tag someone.",
        json!({"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}),
        move |v: Value| {
            let file = file.clone();
            async move {
                let to = v["to"].as_str().unwrap_or_default().to_string();
                let mut f =
                    std::fs::OpenOptions::new().create(true).append(true).open(&file).map_err(|e| e.to_string())?;
                std::io::Write::write_all(&mut f, format!("tag:{to}\n").as_bytes()).map_err(|e| e.to_string())?;
                Ok::<_, String>(format!("tagged {to}"))
            }
        },
    )
    .level(Level::Read);
    Agent::builder()
        .model(OpenAiChat::new("m").base_url(base_url).max_retries(0))
        .tools(ambit::session::tools())
        .tool(tag)
        .subagents(ambit::SubagentConfig::default())
        .policy(Policy::level(level))
        .build()
        .unwrap()
}

/// One session run where the model's one turn calls `tag x` and `tag y` under the ids given; the
/// (effects, tool results) it left.
async fn two_calls(url: &str, dir: &std::path::Path, ids: [&str; 2]) -> (Vec<String>, Vec<(String, String)>) {
    let effects = dir.join(format!("tags-{}-{}", ids[0], ids[1])).display().to_string();
    let p = provider(json!([
        {"respond": {"tool_calls": [
            {"id": ids[0], "name": "tag", "arguments": {"to": "x"}},
            {"id": ids[1], "name": "tag", "arguments": {"to": "y"}}
        ]}},
        {"respond": {"content": "ok"}}
    ]))
    .await;
    let sessions = Sessions::open(url).await.unwrap();
    let sid = sessions.create().await.unwrap();
    let out = sessions.run(&tagging_agent(&p.base_url(), &effects, Level::Read), &sid, "tag both").await;
    assert!(out.is_ok(), "{out:?}");
    let mut done: Vec<String> =
        std::fs::read_to_string(&effects).unwrap_or_default().lines().map(str::to_string).collect();
    done.sort();
    (done, results(&log_messages(&sessions, &sid).await))
}

/// HOLE (severity: medium — the closing note lists it as untested; confirmed). A hostile (or buggy)
/// model server that gives two tool calls of one turn the same id makes them share one journal key
/// (`run/turn/call id`, durable.rs `key_of`): the second call is never run, and the model is handed
/// the FIRST call's recorded result as the second's ("tagged x" for `tag y`), or, when the two run at
/// once, told that a call which never ran was "interrupted, outcome unknown". Either way the model is
/// told something false about a side effect. Duplicate ids in one turn must be refused by name, or
/// the journal key must tell the calls apart (e.g. by position). Negative control inside: distinct ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_calls_sharing_an_id_in_one_turn_are_both_refused_by_id() {
    for store in stores().await {
        let dir = tempfile::tempdir().unwrap();
        let (done, got) = two_calls(&store.url, dir.path(), ["a", "b"]).await;
        assert_eq!(done, ["tag:x", "tag:y"], "{}: control", store.name);
        assert_eq!(got, [("a".into(), "tagged x".into()), ("b".into(), "tagged y".into())], "{}: control", store.name);

        let (done, got) = two_calls(&store.url, dir.path(), ["a", "a"]).await;
        let contents: Vec<&str> = got.iter().map(|(_, c)| c.as_str()).collect();
        let truthful = done == ["tag:x", "tag:y"] && contents == ["tagged x", "tagged y"];
        let refused = done.is_empty() && contents.iter().all(|c| c.contains("id"));
        assert!(
            truthful || refused,
            "HOLE ({}): duplicate call ids: tools ran {done:?}, the model was told {contents:?}",
            store.name
        );
    }
}

/// HELD: a run below `unrestricted` cannot read another root session's conversation (by its id in
/// `conversation_read` / `conversation_search`) nor find it (`session_search`, `session_list`).
/// Negative control: the same search at `unrestricted` finds it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_a_run_below_unrestricted_cannot_read_or_find_another_root_session() {
    for store in stores().await {
        let dir = tempfile::tempdir().unwrap();
        let effects = dir.path().join("e").display().to_string();
        let sessions = Sessions::open(&store.url).await.unwrap();
        let secret = sessions.create().await.unwrap();
        let p = provider(json!([{"respond": {"content": "Noted."}}])).await;
        let a = tagging_agent(&p.base_url(), &effects, Level::Read);
        sessions.run(&a, &secret, "The zebra vault code is 7431.").await.unwrap();
        let prefix = &secret[..secret.len().min(6)];

        let p = provider(json!([
            {"respond": {"tool_calls": [
                {"id": "r", "name": "conversation_read", "arguments": {"id": secret, "start": 1, "limit": 20}},
                {"id": "rp", "name": "conversation_read", "arguments": {"id": prefix, "start": 1}},
                {"id": "s", "name": "conversation_search", "arguments": {"id": secret, "query": "zebra"}},
                {"id": "ss", "name": "session_search", "arguments": {"query": "zebra vault", "include_children": true, "limit": 100}},
                {"id": "l", "name": "session_list", "arguments": {}}
            ]}},
            {"respond": {"content": "done"}},
            {"respond": {"tool_calls": [{"id": "u", "name": "session_search", "arguments": {"query": "zebra vault"}}]}},
            {"respond": {"content": "done"}}
        ]))
        .await;
        let mine = sessions.create().await.unwrap();
        sessions.run(&tagging_agent(&p.base_url(), &effects, Level::Read), &mine, "look around").await.unwrap();
        let got = results(&log_messages(&sessions, &mine).await);
        assert_eq!(got.len(), 5, "{}: {got:?}", store.name);
        for (id, content) in &got {
            // The refusals of r and s echo the id the model gave; nothing else may name the session.
            let echoed = id == "r" || id == "s";
            assert!(!content.contains("7431"), "{}: {id} leaked: {content}", store.name);
            assert!(echoed || !content.contains(&secret), "{}: {id} named the other session: {content}", store.name);
        }
        // The refusal is the same as for an id that does not exist (SPEC: no probing which sessions exist).
        let refusal = |given: &str| format!("'{given}' is not a sub-agent of this session");
        assert!(got[0].1.contains(&refusal(&secret)) && got[1].1.contains(&refusal(prefix)), "{}: {got:?}", store.name);
        // Negative control: at unrestricted the store's root sessions are in reach.
        let other = sessions.create().await.unwrap();
        sessions.run(&tagging_agent(&p.base_url(), &effects, Level::Unrestricted), &other, "look").await.unwrap();
        let got = results(&log_messages(&sessions, &other).await);
        assert!(got[0].1.contains(&secret) && got[0].1.contains("7431"), "{}: control: {got:?}", store.name);
    }
}

/// HELD: a sub-agent cannot read or find its sibling's conversation (nor its parent's): the second
/// sub-agent asks for the first by its id (sub-agent ids are the same in every session:
/// sha256("root/N")), searches for its secret, and lists sessions. Negative control: the parent reads
/// the first sub-agent by that id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_a_sub_agent_cannot_reach_its_sibling_or_its_parent() {
    for store in stores().await {
        let dir = tempfile::tempdir().unwrap();
        let effects = dir.path().join("e").display().to_string();
        let first = "4cf40c4e8395";
        let p = provider(json!([
            {"respond": {"tool_calls": [{"id": "s1", "name": "agent_spawn", "arguments": {"prompt": "Keep this: the zebra vault code is 7431.", "permission": "read"}}]}},
            {"respond": {"content": "Kept."}},
            {"respond": {"tool_calls": [{"id": "s2", "name": "agent_spawn", "arguments": {"prompt": "Look around.", "permission": "read"}}]}},
            {"respond": {"tool_calls": [
                {"id": "r", "name": "conversation_read", "arguments": {"id": first, "start": 1}},
                {"id": "s", "name": "conversation_search", "arguments": {"id": first, "query": "zebra"}},
                {"id": "ss", "name": "session_search", "arguments": {"query": "zebra vault", "include_children": true}},
                {"id": "own", "name": "conversation_search", "arguments": {"query": "zebra"}},
                {"id": "l", "name": "session_list", "arguments": {}}
            ]}},
            {"respond": {"content": "Nothing."}},
            {"respond": {"tool_calls": [{"id": "pr", "name": "conversation_read", "arguments": {"id": first, "start": 1}}]}},
            {"respond": {"content": "done"}}
        ]))
        .await;
        let sessions = Sessions::open(&store.url).await.unwrap();
        let sid = sessions.create().await.unwrap();
        let out = sessions
            .run(&tagging_agent(&p.base_url(), &effects, Level::Read), &sid, "Parent secret: heron 5512.")
            .await;
        assert!(out.is_ok(), "{}: {out:?} {:?}", store.name, p.report());
        let children = sessions.store().children(&sid).await.unwrap();
        assert_eq!(children.len(), 2, "{}: {children:?}", store.name);
        assert_eq!(children[0].agent_id, first, "{}", store.name);
        let second = results(&log_messages(&sessions, &children[1].session_id).await);
        assert_eq!(second.len(), 5, "{}: {second:?}", store.name);
        for (id, content) in &second {
            assert!(!content.contains("7431") && !content.contains("5512"), "{}: {id} leaked: {content}", store.name);
        }
        // Negative control: the parent reaches its sub-agent by that id.
        let parent = results(&log_messages(&sessions, &sid).await);
        let read = parent.iter().find(|(id, _)| id == "pr").unwrap();
        assert!(read.1.contains("7431"), "{}: control: {parent:?}", store.name);
    }
}

/// HELD: the level that decides what `session_search` / `session_list` reach is the sub-agent's own
/// (SPEC: "the level is the live one"): a sub-agent spawned at `read` by a parent at `unrestricted`
/// sees only itself, not the store's root sessions. Negative control: a sub-agent spawned at
/// `unrestricted` finds the other root session's text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_a_read_sub_agent_of_an_unrestricted_parent_does_not_see_the_store() {
    for store in stores().await {
        let dir = tempfile::tempdir().unwrap();
        let effects = dir.path().join("e").display().to_string();
        let sessions = Sessions::open(&store.url).await.unwrap();
        let secret = sessions.create().await.unwrap();
        let p = provider(json!([{"respond": {"content": "Noted."}}])).await;
        sessions
            .run(&tagging_agent(&p.base_url(), &effects, Level::Read), &secret, "The zebra vault code is 7431.")
            .await
            .unwrap();
        for (level, sees) in [("read", false), ("unrestricted", true)] {
            let p = provider(json!([
                {"respond": {"tool_calls": [{"id": "s", "name": "agent_spawn", "arguments": {"prompt": "Look around.", "permission": level}}]}},
                {"respond": {"tool_calls": [
                    {"id": "ss", "name": "session_search", "arguments": {"query": "zebra vault"}},
                    {"id": "l", "name": "session_list", "arguments": {}}
                ]}},
                {"respond": {"content": "Nothing."}},
                {"respond": {"content": "done"}}
            ]))
            .await;
            let sid = sessions.create().await.unwrap();
            let out = sessions.run(&tagging_agent(&p.base_url(), &effects, Level::Unrestricted), &sid, "go").await;
            assert!(out.is_ok(), "{}: {out:?} {:?}", store.name, p.report());
            let children = sessions.store().children(&sid).await.unwrap();
            let [child] = children.as_slice() else { panic!("{}: {children:?}", store.name) };
            let got = results(&log_messages(&sessions, &child.session_id).await);
            assert_eq!(got.len(), 2, "{}: {got:?}", store.name);
            let found = got.iter().any(|(_, c)| c.contains("7431") || c.contains(&secret));
            assert_eq!(found, sees, "{} ({level}): {got:?}", store.name);
        }
    }
}

/// Whether every assistant message that calls tools is followed at once by a tool result for each of
/// its calls (what the OpenAI and Anthropic wires require); the first violation otherwise.
fn tool_results_follow_their_calls(messages: &[Value]) -> Result<(), String> {
    for (i, m) in messages.iter().enumerate() {
        let Some(calls) = m["tool_calls"].as_array().filter(|c| !c.is_empty()) else { continue };
        for (k, call) in calls.iter().enumerate() {
            let next = messages.get(i + 1 + k);
            let ok = next.is_some_and(|n| n["role"] == "tool" && n["call_id"] == call["id"]);
            if !ok {
                return Err(format!(
                    "message #{} calls {} but message #{} is {:?}",
                    i + 1,
                    call["id"],
                    i + 2 + k,
                    next
                ));
            }
        }
    }
    Ok(())
}

/// HELD (tried as a hole: it would leave the session unusable on a real provider). A run starts a
/// background task, then parks on an approval; the task lands (delivered) while the session is
/// parked, and its result is appended as a user turn. Had it gone between the assistant message whose
/// call waits for its approval and that call's result, the OpenAI and Anthropic wires would refuse the
/// conversation (HTTP 400). It does not: after the resume every tool result directly follows its call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_a_task_landing_while_parked_keeps_each_tool_result_after_its_call() {
    for store in stores().await {
        let dir = tempfile::tempdir().unwrap();
        let effects = dir.path().join("effects").display().to_string();
        let p = provider(json!([
            {"respond": {"tool_calls": [{"id": "g", "name": "gate", "arguments": {"to": "bg", "background": true}}]}},
            {"respond": {"tool_calls": [{"id": "a", "name": "send_email", "arguments": {"to": "ops"}}]}},
            {"respond": {"content": "Sent."}},
            {"respond": {"content": "Again."}}
        ]))
        .await;
        let agent = durable_agent::agent_with(&p.base_url(), &effects, false, false, false, true);
        let sessions = Sessions::open(&store.url).await.unwrap();
        let mut deliveries = sessions.deliveries();
        let sid = sessions.create().await.unwrap();
        let err = sessions.run(&agent, &sid, "mail ops").await.unwrap_err();
        assert_eq!(err.code(), "awaiting_approval", "{}: {err}", store.name);
        // The task lands while the session is parked.
        wait_for(&effects, "entered:bg").await;
        std::fs::write(format!("{effects}.gate"), "").unwrap();
        let landed = tokio::time::timeout(Duration::from_secs(60), deliveries.next()).await;
        eprintln!("{}: delivery: {landed:?}", store.name);
        let out = sessions.resume(&agent, &sid, ambit::ApprovalDecision::Approve).await;
        eprintln!("{}: resume: {:?}", store.name, out.as_ref().map(|r| r.output.clone()));
        let messages = log_messages(&sessions, &sid).await;
        let order = tool_results_follow_their_calls(&messages);
        assert!(order.is_ok(), "HOLE ({}): {}\n{:#?}", store.name, order.unwrap_err(), messages);
    }
}
