//! Durable runs (SPEC §8b) on both stores, with real processes (tests/support/durable_child.rs):
//! resumes racing in 8 processes run the approved tool once; a resume killed with SIGKILL at a random
//! point never runs the tool twice and never loses the approval; a call killed after its effect is not
//! re-run unless the tool is idempotent; two runs on one session, across processes or tasks, are one
//! at a time, and a dead owner's session is taken over with its interrupted call reported.
//!
//! AMBIT_DURABLE_TRIALS (default 20) sets the racing trials per store and AMBIT_DURABLE_KILLS (default
//! 25) the kills per store; `bash scripts/durable-full.sh` runs the issue's full counts (200 and 250).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ambit::ApprovalDecision;
use ambit::ledger::ManualClock;
use ambit::session::{Item, SessionError, Sessions};
use ambit_test_provider::Provider;
use serde_json::{Value, json};

#[path = "support/durable_agent.rs"]
mod durable_agent;
use durable_agent::agent;

#[path = "support/durable_worker.rs"]
mod durable_worker;
use durable_worker::{Worker, effects_of, provider};

#[path = "support/session_stores.rs"]
mod session_stores;
use session_stores::{Store, stores};

fn count(var: &str, default: usize) -> usize {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// The model asks for `send_email {to: sid}` (the run parks on it), then answers.
fn park_then_answer(extra_answers: usize) -> Value {
    let mut ex =
        vec![json!({"respond": {"tool_calls": [{"id": "a", "name": "send_email", "arguments": {"to": "SID"}}]}})];
    for _ in 0..=extra_answers {
        ex.push(json!({"respond": {"content": "Sent."}}));
    }
    Value::Array(ex)
}

/// A fresh session parked on `send_email {to: sid}`; the provider serving it (and its answer).
async fn parked(sessions: &Sessions, effects: &str, extra_answers: usize) -> (String, Provider) {
    let sid = sessions.create().await.unwrap();
    let script = park_then_answer(extra_answers).to_string().replace("SID", &sid);
    let p = provider(serde_json::from_str(&script).unwrap()).await;
    let err = sessions.run(&agent(&p.base_url(), effects, false, false), &sid, "mail ops").await.unwrap_err();
    assert_eq!(err.code(), "awaiting_approval", "{err}");
    (sid, p)
}

/// The side effects for `sid` so far.
/// The log's messages, each as JSON text: a message twice in the log shows as a repeat.
async fn log_messages(sessions: &Sessions, sid: &str) -> Vec<String> {
    sessions
        .entries(sid)
        .await
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.item {
            Item::Message { message } => Some(serde_json::to_string(&message).unwrap()),
            _ => None,
        })
        .collect()
}

fn tool_results(messages: &[String], call: &str) -> Vec<Value> {
    messages
        .iter()
        .map(|m| serde_json::from_str::<Value>(m).unwrap())
        .filter(|m| m["role"] == "tool" && m["call_id"] == call)
        .collect()
}

/// The same store read an hour later: every lease a dead process held has run out.
async fn an_hour_later(url: &str) -> Sessions {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    Sessions::open(url).await.unwrap().with_clock(Arc::new(ManualClock::new(now + 3_600_000)))
}

/// Races `workers` on `trials` parked sessions; (trials, double executions, lost approvals).
async fn race(store: &Store, dir: &std::path::Path, trials: usize, flags: &[&str]) -> (usize, usize, usize) {
    let effects = dir.join(format!("effects-{}-{}", store.name, flags.len())).display().to_string();
    let sessions = Sessions::open(&store.url).await.unwrap();
    let mut workers: Vec<Worker> = (0..8).map(|_| Worker::start(&store.url, &effects, flags)).collect();
    let (mut doubles, mut lost) = (0, 0);
    for trial in 0..trials {
        let (sid, p) = parked(&sessions, &effects, 0).await;
        for w in &mut workers {
            w.send(&format!("resume {sid} {}", p.base_url()));
        }
        let answers: Vec<String> = workers.iter_mut().map(Worker::answer).collect();
        let ran = effects_of(&effects, &sid);
        doubles += usize::from(ran > 1);
        lost += usize::from(ran == 0);
        if !flags.is_empty() {
            if ran > 1 {
                return (trial + 1, doubles, lost);
            }
            continue;
        }
        let won = answers.iter().filter(|a| *a == "ok").count();
        let refused = answers.iter().filter(|a| *a == "session_not_parked").count();
        assert_eq!((won, refused), (1, 7), "{}: trial {trial}: {answers:?}", store.name);
        let messages = log_messages(&sessions, &sid).await;
        let mut unique = messages.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), messages.len(), "{}: a message twice in the log: {messages:#?}", store.name);
        assert_eq!(messages.len(), 4, "{}: {messages:#?}", store.name);
        assert_eq!(tool_results(&messages, "a")[0]["content"], format!("sent to {sid}"));
        let (served, mismatches) = p.report();
        assert!(mismatches.is_empty() && served == 2, "{}: {served} requests, {mismatches:?}", store.name);
        assert_eq!(sessions.store().state(&sid).await.unwrap().state, "idle");
    }
    (trials, doubles, lost)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resumes_racing_in_eight_processes_run_the_approved_tool_once() {
    let dir = tempfile::tempdir().unwrap();
    let trials = count("AMBIT_DURABLE_TRIALS", 20);
    for store in stores().await {
        let started = Instant::now();
        let (trials, doubles, lost) = race(&store, dir.path(), trials, &[]).await;
        eprintln!(
            "durable race, {}: 8 processes x {trials} trials: {doubles} double executions, {lost} lost approvals ({:.1} s)",
            store.name,
            started.elapsed().as_secs_f64()
        );
        assert_eq!((doubles, lost), (0, 0), "{}", store.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_control_without_the_claim_the_race_runs_the_tool_twice() {
    // The same race with the compare-and-set and the call journal off: the test sees the double
    // execution the guards prevent.
    let dir = tempfile::tempdir().unwrap();
    for store in stores().await {
        let (trials, doubles, _) = race(&store, dir.path(), 20, &["--unguarded"]).await;
        eprintln!("durable race unguarded, {}: a double execution within {trials} trials", store.name);
        assert!(doubles > 0, "{}: no double execution in {trials} unguarded trials", store.name);
    }
}

/// A small deterministic generator for the kill points (the seed is printed).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, below: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % below
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_killed_at_random_points_never_runs_twice_and_never_loses_the_approval() {
    let dir = tempfile::tempdir().unwrap();
    let kills = count("AMBIT_DURABLE_KILLS", 25);
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    let mut rng = Lcg(seed);
    eprintln!("durable kills: seed {seed}");
    for store in stores().await {
        let effects = dir.path().join(format!("kill-{}", store.name)).display().to_string();
        let sessions = Sessions::open(&store.url).await.unwrap();
        let later = an_hour_later(&store.url).await;
        let (mut doubles, mut lost, mut before_effect, mut unknown, mut finished) = (0, 0, 0, 0, 0);
        // Kills that landed after the tool's effect and before its result was recorded: the case the
        // journal exists for. The kills go on (bounded) until at least one has landed there, or 8 times
        // the count.
        let (mut between, mut tried) = (0, 0);
        let started = Instant::now();
        while tried < kills || (between == 0 && tried < kills * 8) {
            tried += 1;
            // Two answers: the child's continuation may have been served before the kill.
            let (sid, p) = parked(&sessions, &effects, 1).await;
            let mut w = Worker::start(&store.url, &effects, &[]);
            w.send(&format!("resume {sid} {}", p.base_url()));
            std::thread::sleep(Duration::from_micros(rng.next(40_000)));
            w.kill();
            let ran_by_child = effects_of(&effects, &sid);
            // Recovery, as the host would: resume; a session the child finished is not parked.
            let recovering = agent(&p.base_url(), &effects, false, false);
            match later.resume(&recovering, &sid, ApprovalDecision::Approve).await {
                Ok(_) => {}
                Err(SessionError::NotParked(_)) => finished += 1,
                Err(e) => panic!("{}: recovery failed: {e}", store.name),
            }
            let ran = effects_of(&effects, &sid);
            before_effect += usize::from(ran_by_child == 0);
            let messages = log_messages(&sessions, &sid).await;
            let results = tool_results(&messages, "a");
            let mut unique = messages.clone();
            unique.sort();
            unique.dedup();
            doubles += usize::from(ran > 1);
            // Lost: the approved call has no result in the log, or the session still waits on it.
            let state = sessions.store().state(&sid).await.unwrap();
            lost += usize::from(results.len() != 1 || state.parked.is_some());
            assert!(ran <= 1, "{}: the tool ran {ran} times", store.name);
            assert_eq!(unique.len(), messages.len(), "{}: a message twice in the log: {messages:#?}", store.name);
            assert_eq!(results.len(), 1, "{}: {messages:#?}", store.name);
            let content = results[0]["content"].as_str().unwrap();
            if ran == 0 {
                // Never ran: the result cannot claim it did.
                assert!(!content.starts_with("sent"), "{}: {content}", store.name);
            }
            unknown += usize::from(content.contains("its outcome is unknown"));
            between += usize::from(ran_by_child == 1 && content.contains("its outcome is unknown"));
            assert!(state.parked.is_none(), "{}: still parked: {state:?}", store.name);
            assert!(sessions.pending(&sid).await.unwrap().is_none());
        }
        eprintln!(
            "durable kills, {}: {tried} resumes killed with SIGKILL ({before_effect} before the tool's effect, {unknown} \
             told its outcome is unknown, {between} of them between the effect and its recorded result, {finished} \
             after the resume's run ended): {doubles} double executions, {lost} lost approvals ({:.1} s)",
            store.name,
            started.elapsed().as_secs_f64()
        );
        assert_eq!((doubles, lost), (0, 0));
        // Where a random kill lands depends on the machine's load, so how many landed between the effect
        // and its recorded result is reported, not asserted: that case is made certain by the next test,
        // which kills the child while it blocks inside the tool with the effect on disk.
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_killed_after_its_effect_is_not_run_again_unless_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    for store in stores().await {
        for idempotent in [false, true] {
            let effects = dir.path().join(format!("once-{}-{idempotent}", store.name)).display().to_string();
            let sessions = Sessions::open(&store.url).await.unwrap();
            let (sid, p) = parked(&sessions, &effects, 0).await;
            let flags: &[&str] = if idempotent { &["--block", "--idempotent"] } else { &["--block"] };
            let mut w = Worker::start(&store.url, &effects, flags);
            w.send(&format!("resume {sid} {}", p.base_url()));
            // The child blocks inside the tool once the effect is on disk: kill it there.
            let deadline = Instant::now() + Duration::from_secs(60);
            while effects_of(&effects, &sid) == 0 {
                assert!(Instant::now() < deadline, "the child never ran the tool");
                std::thread::sleep(Duration::from_millis(10));
            }
            w.kill();
            // The claimed approval is not lost with the process: it is still what the session waits on.
            assert_eq!(sessions.pending(&sid).await.unwrap().map(|r| r.tool), Some("send_email".to_string()));
            let later = an_hour_later(&store.url).await;
            later
                .resume(&agent(&p.base_url(), &effects, false, idempotent), &sid, ApprovalDecision::Approve)
                .await
                .unwrap();
            let results = tool_results(&log_messages(&sessions, &sid).await, "a");
            let content = results[0]["content"].as_str().unwrap().to_string();
            if idempotent {
                assert_eq!(effects_of(&effects, &sid), 2, "{}: an idempotent call is run again", store.name);
                assert_eq!(content, format!("sent to {sid}"));
            } else {
                assert_eq!(effects_of(&effects, &sid), 1, "{}: run again: {content}", store.name);
                assert!(content.contains("its outcome is unknown") && content.contains("not run again"), "{content}");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runs_across_processes_are_one_at_a_time_and_a_dead_owner_is_taken_over() {
    let dir = tempfile::tempdir().unwrap();
    for store in stores().await {
        let effects = dir.path().join(format!("busy-{}", store.name)).display().to_string();
        let sessions = Sessions::open(&store.url).await.unwrap();
        let sid = sessions.create().await.unwrap();
        let p = provider(json!([
            {"respond": {"tool_calls": [{"id": "h", "name": "hold", "arguments": {"to": sid}}]}},
            {"expect": {"messages_tail": [{"role": "user", "content": {"$contains": [
                "A previous run in this session was interrupted", "- hold {\"to\":"]}},
                {"role": "user", "content": "status?"}]},
             "respond": {"content": "Carrying on."}}
        ]))
        .await;
        let mut w = Worker::start(&store.url, &effects, &[]);
        w.send(&format!("run {sid} {}", p.base_url()));
        let held = format!("held:{sid}");
        let deadline = Instant::now() + Duration::from_secs(60);
        while effects_of(&effects, &held) == 0 {
            assert!(Instant::now() < deadline, "the child never started its run");
            std::thread::sleep(Duration::from_millis(10));
        }
        // The child's run holds the session (its heartbeat keeps the 30 s lease): a second run is refused.
        let a = agent(&p.base_url(), &effects, false, false);
        let err = sessions.run(&a, &sid, "me too").await.unwrap_err();
        assert_eq!(err.code(), "session_busy", "{}: {err}", store.name);
        assert!(matches!(err, SessionError::Busy(_)));
        assert_eq!(sessions.store().state(&sid).await.unwrap().state, "running");
        w.kill();
        // The owner died: once its lease runs out, the next run takes over and is told what the dead
        // run started and never finished; the held call is not run again.
        let result = an_hour_later(&store.url).await.run(&a, &sid, "status?").await.unwrap();
        assert_eq!(result.output, "Carrying on.");
        assert_eq!(effects_of(&effects, &held), 1);
        let (served, mismatches) = p.report();
        assert!(mismatches.is_empty() && served == 2, "{}: {mismatches:?}", store.name);
        let log = log_messages(&sessions, &sid).await;
        assert!(log[0].contains("interrupted"), "{}: {log:#?}", store.name);
        assert_eq!(sessions.store().state(&sid).await.unwrap().state, "idle");
    }
}

/// A tool `wait` that says when a call has entered it (`entered`) and returns once `gate` is notified.
fn waiting_tool() -> (impl ambit::Tool, Arc<tokio::sync::Notify>, Arc<tokio::sync::Notify>) {
    let gate = Arc::new(tokio::sync::Notify::new());
    let entered = Arc::new(tokio::sync::Notify::new());
    let (g, e) = (gate.clone(), entered.clone());
    let wait = ambit::tool_fn("wait", "Wait.", json!({"type": "object", "properties": {}}), move |_: Value| {
        let (g, e) = (g.clone(), e.clone());
        async move {
            e.notify_one();
            g.notified().await;
            Ok::<_, String>("done".to_string())
        }
    });
    (wait, entered, gate)
}

/// An agent with `tool` on the provider `p`, and its run on "one" in `sid`, started in a task.
type Running = tokio::task::JoinHandle<Result<ambit::RunResult, SessionError>>;
fn run_in_the_background(
    sessions: &Sessions,
    sid: &str,
    p: &Provider,
    tool: impl ambit::Tool + 'static,
) -> (ambit::Agent, Running) {
    let a = ambit::Agent::builder()
        .model(ambit::OpenAiChat::new("m").base_url(p.base_url()).max_retries(0))
        .tool(tool)
        .build()
        .unwrap();
    let (s, agent, sid) = (sessions.clone(), a.clone(), sid.to_string());
    (a, tokio::spawn(async move { s.run(&agent, &sid, "one").await }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_runs_in_one_process_are_one_at_a_time() {
    // A run blocked in a tool holds the session; a second run on it is refused at once, then allowed
    // once the first has ended.
    for store in stores().await {
        let sessions = Sessions::open(&store.url).await.unwrap();
        let sid = sessions.create().await.unwrap();
        let (wait, entered, gate) = waiting_tool();
        let p = provider(json!([
            {"respond": {"tool_calls": [{"id": "w", "name": "wait", "arguments": {}}]}},
            {"respond": {"content": "first"}},
            {"respond": {"content": "second"}}
        ]))
        .await;
        let (a, first) = run_in_the_background(&sessions, &sid, &p, wait);
        entered.notified().await;
        let err = sessions.run(&a, &sid, "two").await.unwrap_err();
        assert_eq!(err.code(), "session_busy", "{}: {err}", store.name);
        gate.notify_one();
        assert_eq!(first.await.unwrap().unwrap().output, "first");
        assert_eq!(sessions.run(&a, &sid, "two").await.unwrap().output, "second");
        // Nothing of the refused run reached the log.
        let log = log_messages(&sessions, &sid).await;
        assert_eq!(log.len(), 6, "{}: {log:#?}", store.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_asked_to_wait_for_a_busy_session_waits_within_its_bound() {
    // SPEC §8b: a second run is refused or waits, as asked (busy_wait_ms). Bounded: refused once the
    // bound is spent, saying so; unbounded enough: it takes the session once the first run lets it go.
    use ambit::session::SessionConfig;
    for store in stores().await {
        let sessions = Sessions::open(&store.url).await.unwrap();
        let sid = sessions.create().await.unwrap();
        let (wait, entered, gate) = waiting_tool();
        let p = provider(json!([
            {"respond": {"tool_calls": [{"id": "w", "name": "wait", "arguments": {}}]}},
            {"respond": {"content": "first"}},
            {"respond": {"content": "second"}}
        ]))
        .await;
        let waiting = |ms| {
            let url = store.url.clone();
            async move {
                let config = SessionConfig { busy_wait_ms: Some(ms), ..SessionConfig::default() };
                Sessions::open(&url).await.unwrap().with_config(config).unwrap()
            }
        };
        let (a, first) = run_in_the_background(&sessions, &sid, &p, wait);
        entered.notified().await;
        // The first run is blocked in its tool until the gate opens: a 300 ms wait runs out.
        let started = Instant::now();
        let err = waiting(300).await.run(&a, &sid, "two").await.unwrap_err();
        assert_eq!(err.code(), "session_busy", "{}: {err}", store.name);
        assert!(err.to_string().contains("waited") && started.elapsed() >= Duration::from_millis(300), "{err}");
        // Negative control: not asked to wait, it is refused at once, and says nothing of waiting.
        let err = sessions.run(&a, &sid, "two").await.unwrap_err();
        assert!(err.code() == "session_busy" && !err.to_string().contains("waited"), "{err}");
        // A run that may wait a minute gets the session once the first run ends.
        let patient = waiting(60_000).await;
        let (agent, id) = (a.clone(), sid.clone());
        let second = tokio::spawn(async move { patient.run(&agent, &id, "two").await });
        gate.notify_one();
        assert_eq!(first.await.unwrap().unwrap().output, "first");
        assert_eq!(second.await.unwrap().unwrap().output, "second", "{}", store.name);
        // The bound is checked: more than an hour is refused, naming the setting.
        let too_long = SessionConfig { busy_wait_ms: Some(3_600_001), ..SessionConfig::default() };
        let err = Sessions::open(&store.url).await.unwrap().with_config(too_long).unwrap_err();
        assert!(err.code() == "invalid_argument" && err.to_string().contains("busy_wait_ms"), "{err}");
        let short = SessionConfig { lease_ms: Some(1), ..SessionConfig::default() };
        let err = Sessions::open(&store.url).await.unwrap().with_config(short).unwrap_err();
        assert!(err.code() == "invalid_argument" && err.to_string().contains("lease_ms"), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_state_round_trips_park_and_resume_field_by_field() {
    // SPEC §8b: turns, budget spent, checklist, scratchpad and loaded deferred tools are one value
    // the park keeps and the resume restores. The run parks, is resumed by another store handle and
    // another agent (as another process would), parks again, and the two kept states are compared;
    // then the checklist still gates the end of the run and the turn limit still counts.
    for store in stores().await {
        let p = provider(json!([
            {"respond": {"tool_calls": [
                {"id": "l", "name": "tool_load", "arguments": {"name": ["lookup"]}},
                {"id": "k", "name": "checklist_add", "arguments": {"items": ["mail ops and report"]}},
                {"id": "w", "name": "scratchpad_write", "arguments": {"name": "notes", "content": "alpha is 7431"}}
            ], "usage": {"input_tokens": 100, "output_tokens": 10}}},
            {"respond": {"tool_calls": [{"id": "a", "name": "send_email", "arguments": {"to": "ops"}}],
             "usage": {"input_tokens": 200, "output_tokens": 20}}},
            // Resumed: the scratchpad entry is read back, and another approval parks the run again.
            {"respond": {"tool_calls": [
                {"id": "r", "name": "scratchpad_read", "arguments": {"name": "notes"}},
                {"id": "b", "name": "send_email", "arguments": {"to": "second"}}
            ], "usage": {"input_tokens": 300, "output_tokens": 30}}},
            // Resumed again: the model would end its turn, but the checklist item is still open.
            {"respond": {"content": "Done.", "usage": {"input_tokens": 1, "output_tokens": 1}}},
            {"respond": {"content": "Done, really.", "usage": {"input_tokens": 1, "output_tokens": 1}}}
        ]))
        .await;
        let agent = |answer: ApprovalDecision| {
            let send = ambit::tool_fn(
                "send_email",
                "Send the drafted email.",
                json!({"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}),
                |_: Value| async { Ok::<_, String>("sent".to_string()) },
            )
            .level(ambit::Level::Read)
            .requires_approval();
            let lookup = ambit::tool_fn(
                "lookup",
                "Looks a key up.",
                json!({"type": "object", "properties": {"key": {"type": "string"}}}),
                |_: Value| async { Ok::<_, String>("7431".to_string()) },
            )
            .level(ambit::Level::Read);
            let handler = ambit::permission::approval::FnApproval(move |_| {
                let a = answer.clone();
                async move { a }
            });
            let deferral = ambit::deferral::DeferralConfig {
                setting: ambit::deferral::Deferral::Deferred,
                strategy: ambit::deferral::LoadStrategy::Append,
                deferrable_tools: ["lookup".to_string()].into(),
            };
            ambit::Agent::builder()
                .model(ambit::OpenAiChat::new("m").base_url(p.base_url()).max_retries(0))
                .tool(send)
                .tool(lookup)
                .checklist(true)
                .checklist_nudge_cap(1)
                .scratchpad(true)
                .deferral(deferral)
                .max_turns(6)
                .policy(ambit::Policy::level(ambit::Level::Read).approvals(handler))
                .build()
                .unwrap()
        };
        let here = Sessions::open(&store.url).await.unwrap();
        let sid = here.create().await.unwrap();
        let kept = |sessions: Sessions, sid: String| async move {
            let state = sessions.store().state(&sid).await.unwrap();
            assert_eq!(state.state, "awaiting_approval");
            serde_json::from_value::<ambit::session::RunSnapshot>(state.parked.unwrap()["run"].clone()).unwrap()
        };
        let err = here.run(&agent(ApprovalDecision::Later), &sid, "mail ops").await.unwrap_err();
        assert_eq!(err.code(), "awaiting_approval", "{}: {err}", store.name);
        let first = kept(here.clone(), sid.clone()).await;
        assert_eq!(first.turns, 2, "{}", store.name);
        assert_eq!((first.usage.requests, first.usage.input_tokens, first.usage.output_tokens), (2, 300, 30));
        assert_eq!(first.scratchpad.get("notes").map(String::as_str), Some("alpha is 7431"));
        assert_eq!(first.loaded_tools, ["lookup"]);
        assert_eq!(first.checklist.open().len(), 1);
        // Resumed elsewhere; it parks again on the second email, one turn later.
        let there = Sessions::open(&store.url).await.unwrap();
        let err = there.resume(&agent(ApprovalDecision::Later), &sid, ApprovalDecision::Approve).await.unwrap_err();
        assert_eq!(err.code(), "awaiting_approval", "{}: {err}", store.name);
        let second = kept(there.clone(), sid.clone()).await;
        let mut expected = first.clone();
        expected.turns = 3;
        expected.usage.add(&ambit::Usage { requests: 1, input_tokens: 300, output_tokens: 30, ..Default::default() });
        assert_eq!(second, expected, "{}: the state after resume is the state before park, one turn on", store.name);
        // The resumed run's request carried the loaded tool, and read the scratchpad entry back.
        let state: Value = reqwest::get(format!("{}/__ambit/state", p.base_url().trim_end_matches("/v1")))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let third = &state["requests"][2]["body"];
        let tools: Vec<&str> =
            third["tools"].as_array().unwrap().iter().filter_map(|t| t["function"]["name"].as_str()).collect();
        assert!(tools.contains(&"lookup"), "{}: {tools:?}", store.name);
        let log = tool_results(&log_messages(&there, &sid).await, "r");
        assert!(log.is_empty(), "the parked round is not in the log yet");
        // Resumed once more: the open item still gates the end (one nudge), and the turns go on.
        let done = here.resume(&agent(ApprovalDecision::Later), &sid, ApprovalDecision::Approve).await.unwrap();
        assert_eq!(done.output, "Done, really.", "{}", store.name);
        assert_eq!(done.turns, 5, "{}: turns count across parks", store.name);
        assert_eq!(done.open_items.len(), 1, "{}", store.name);
        assert_eq!(done.usage.requests, 5, "{}", store.name);
        let read = tool_results(&log_messages(&here, &sid).await, "r");
        assert_eq!(read[0]["content"], "alpha is 7431", "{}", store.name);
        let (served, mismatches) = p.report();
        assert!(mismatches.is_empty() && served == 5, "{}: {served} {mismatches:?}", store.name);
    }
}

/// The lease expiry the store holds for `sid` (milliseconds), read with plain SQL.
async fn lease_expires(url: &str, sid: &str) -> Option<i64> {
    use sqlx::Connection;
    let sql = if url.starts_with("sqlite") {
        "SELECT lease_expires FROM ambit_sessions WHERE session_id = ?"
    } else {
        "SELECT lease_expires FROM ambit_sessions WHERE session_id = $1"
    };
    if url.starts_with("sqlite") {
        let mut c = sqlx::SqliteConnection::connect(url).await.unwrap();
        sqlx::query_scalar(sql).bind(sid).fetch_one(&mut c).await.unwrap()
    } else {
        let mut c = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::query_scalar(sql).bind(sid).fetch_one(&mut c).await.unwrap()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_runs_heartbeat_keeps_its_session_past_the_lease_length() {
    // The lease is 300 ms, written by the store's clock; the run is blocked in a tool while the heartbeat
    // renews it several lease lengths on (polled on the stored expiry, bounded). A second run is still
    // refused: a live run is never taken over, however long it runs. (A client's clock does not move a
    // lease any more: a_live_run_on_a_machine_with_a_slow_clock_is_not_taken_over in durable_attack.rs.)
    for store in stores().await {
        let sessions = Sessions::open(&store.url).await.unwrap().with_lease(Duration::from_millis(300)).unwrap();
        let sid = sessions.create().await.unwrap();
        let (wait, entered, gate) = waiting_tool();
        let p = provider(json!([
            {"respond": {"tool_calls": [{"id": "w", "name": "wait", "arguments": {}}]}},
            {"respond": {"content": "first"}}
        ]))
        .await;
        let (a, first) = run_in_the_background(&sessions, &sid, &p, wait);
        entered.notified().await;
        let taken = lease_expires(&store.url, &sid).await.unwrap();
        // Wait (bounded) for heartbeats to carry the lease three lease lengths past where it stood.
        let deadline = Instant::now() + Duration::from_secs(60);
        while lease_expires(&store.url, &sid).await.unwrap_or(0) <= taken + 900 {
            assert!(Instant::now() < deadline, "{}: no heartbeat renewed the lease", store.name);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let err = sessions.run(&a, &sid, "two").await.unwrap_err();
        assert_eq!(err.code(), "session_busy", "{}: {err}", store.name);
        gate.notify_one();
        assert_eq!(first.await.unwrap().unwrap().output, "first", "{}", store.name);
        // Ended, the run let the session go.
        assert_eq!(lease_expires(&store.url, &sid).await, None, "{}", store.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_subagent_tree_and_outstanding_tasks_round_trip_park_and_resume() {
    // SPEC §8b: the sub-agent tree (each sub-agent's spawn terms, what it holds, its conversation) and
    // the background tasks still outstanding are part of the one run-state value. The run spawns a
    // sub-agent, starts a background task and parks; another store handle and another agent (as another
    // process would) resume it, list and follow up the sub-agent, and park again: the two kept states
    // differ only by what the resumed turn did.
    for store in stores().await {
        let p = provider(json!([
            {"respond": {"tool_calls": [{"id": "s", "name": "agent_spawn", "arguments": {"prompt": "Where is the report?", "permission": "read"}}]}},
            {"expect": {"messages_count": 1}, "respond": {"content": "In /srv/report."}},
            {"respond": {"tool_calls": [
                {"id": "h", "name": "hold", "arguments": {"to": "x", "background": true}},
                {"id": "a", "name": "send_email", "arguments": {"to": "ops"}}
            ]}},
            {"respond": {"tool_calls": [
                {"id": "l", "name": "agent_list", "arguments": {}},
                {"id": "t", "name": "task_list", "arguments": {}},
                {"id": "f", "name": "agent_followup", "arguments": {"id": "4cf40c4e8395", "prompt": "And the draft?"}},
                {"id": "b", "name": "send_email", "arguments": {"to": "second"}}
            ]}},
            {"expect": {"messages_count": 3}, "respond": {"content": "In /srv/draft."}},
            {"respond": {"content": "Done."}}
        ]))
        .await;
        let agent = || {
            let send = ambit::tool_fn(
                "send_email",
                "Send the drafted email.",
                json!({"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}),
                |_: Value| async { Ok::<_, String>("sent".to_string()) },
            )
            .level(ambit::Level::Read)
            .requires_approval();
            let hold = ambit::tool_fn(
                "hold",
                "Hold on.",
                json!({"type": "object", "properties": {"to": {"type": "string"}}}),
                |_: Value| async {
                    std::future::pending::<()>().await;
                    Ok::<_, String>(String::new())
                },
            )
            .level(ambit::Level::Read);
            let later = ambit::permission::approval::FnApproval(|_| async { ApprovalDecision::Later });
            ambit::Agent::builder()
                .model(ambit::OpenAiChat::new("m").base_url(p.base_url()).max_retries(0))
                .tool(send)
                .tool(hold)
                .subagents(ambit::SubagentConfig::default())
                .background(true)
                .policy(ambit::Policy::level(ambit::Level::Read).approvals(later))
                .build()
                .unwrap()
        };
        let kept = |sessions: Sessions, sid: String| async move {
            let state = sessions.store().state(&sid).await.unwrap();
            assert_eq!(state.state, "awaiting_approval");
            serde_json::from_value::<ambit::session::RunSnapshot>(state.parked.unwrap()["run"].clone()).unwrap()
        };
        let here = Sessions::open(&store.url).await.unwrap();
        let sid = here.create().await.unwrap();
        let err = here.run(&agent(), &sid, "Find the report and mail ops.").await.unwrap_err();
        assert_eq!(err.code(), "awaiting_approval", "{}: {err}", store.name);
        let first = kept(here.clone(), sid.clone()).await;
        assert_eq!(first.subagents_spawned, 1, "{}", store.name);
        let [sub] = first.subagents.as_slice() else { panic!("{}: {:?}", store.name, first.subagents) };
        assert_eq!(sub.id, "4cf40c4e8395");
        assert_eq!(sub.terms.permission, Some(ambit::Level::Read));
        assert_eq!((sub.messages.len(), sub.turns), (2, 1), "{}", store.name);
        assert_eq!(first.tasks, [ambit::session::OutstandingTask { task_id: "task_1".into(), name: "hold".into() }]);

        let there = Sessions::open(&store.url).await.unwrap();
        let err = there.resume(&agent(), &sid, ApprovalDecision::Approve).await.unwrap_err();
        assert_eq!(err.code(), "awaiting_approval", "{}: {err}", store.name);
        let second = kept(there.clone(), sid.clone()).await;
        // Field by field: only the turn, the usage and the followed-up sub-agent's conversation moved.
        let mut expected = first.clone();
        expected.turns = second.turns;
        expected.usage = second.usage;
        expected.subagents[0].messages = second.subagents[0].messages.clone();
        expected.subagents[0].turns = 2;
        expected.subagents[0].last_active = second.subagents[0].last_active.clone();
        assert_eq!(second, expected, "{}", store.name);
        assert_eq!(second.subagents[0].messages.len(), 4, "{}", store.name);
        // The resumed run knew the sub-agent and the task (agent_list, task_list, agent_followup).
        let done = here.resume(&agent(), &sid, ApprovalDecision::Approve).await.unwrap();
        assert_eq!(done.output, "Done.", "{}", store.name);
        let messages = log_messages(&here, &sid).await;
        let listed = &tool_results(&messages, "l")[0]["content"];
        assert!(listed.as_str().unwrap().starts_with("4cf40c4e8395\t"), "{}: {listed}", store.name);
        let tasks = &tool_results(&messages, "t")[0]["content"];
        assert!(tasks.as_str().unwrap().starts_with("task_1 (hold): started before this run parked"), "{tasks}");
        let followed = &tool_results(&messages, "f")[0];
        assert_eq!(followed["is_error"], false, "{}: {followed}", store.name);
        assert!(followed["content"].as_str().unwrap().ends_with("In /srv/draft."), "{followed}");
        let (served, mismatches) = p.report();
        assert!(mismatches.is_empty() && served == 6, "{}: {served} {mismatches:?}", store.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subagents_are_child_sessions_that_a_later_run_elsewhere_finds() {
    // SPEC §8b: sub-agents are child sessions in the store (parent, spawn terms, title). A run spawns a
    // sub-agent; a later run through another store handle and another agent (as after a restart, or in
    // another process) lists it (agent_list, session_list), reads its conversation by its id
    // (conversation_read), follows it up on that conversation, and deletes it.
    for store in stores().await {
        let p = provider(json!([
            {"respond": {"tool_calls": [{"id": "s", "name": "agent_spawn", "arguments": {"prompt": "Where is the report?\nLook in /srv.", "permission": "read"}}]}},
            {"expect": {"messages_count": 1}, "respond": {"content": "In /srv/report."}},
            {"respond": {"content": "Found it."}},
            {"respond": {"tool_calls": [
                {"id": "l", "name": "agent_list", "arguments": {}},
                {"id": "sl", "name": "session_list", "arguments": {}},
                {"id": "r", "name": "conversation_read", "arguments": {"id": "4cf4", "start": 2}},
                {"id": "x", "name": "conversation_read", "arguments": {"id": "ffff", "start": 1}},
                {"id": "q", "name": "session_search", "arguments": {"query": "Report"}},
                {"id": "q0", "name": "session_search", "arguments": {"query": "zebra"}},
                {"id": "f", "name": "agent_followup", "arguments": {"id": "4cf40c4e8395", "prompt": "And the draft?"}}
            ]}},
            // The sub-agent searches "its" conversation: its own, never its parent's.
            {"expect": {"messages_count": 3}, "respond": {"tool_calls": [{"id": "cs", "name": "conversation_search", "arguments": {"query": "report"}}]}},
            {"respond": {"content": "In /srv/draft."}},
            {"respond": {"content": "Done."}},
            {"respond": {"tool_calls": [{"id": "d", "name": "agent_delete", "arguments": {"id": "4cf40c4e8395"}}]}},
            {"respond": {"tool_calls": [{"id": "l2", "name": "session_list", "arguments": {}}]}},
            {"respond": {"content": "Deleted."}}
        ]))
        .await;
        let agent = || {
            ambit::Agent::builder()
                .model(ambit::OpenAiChat::new("m").base_url(p.base_url()).max_retries(0))
                .tools(ambit::session::tools())
                .subagents(ambit::SubagentConfig::default())
                .policy(ambit::Policy::level(ambit::Level::Read))
                .build()
                .unwrap()
        };
        let here = Sessions::open(&store.url).await.unwrap();
        let sid = here.create().await.unwrap();
        assert_eq!(here.run(&agent(), &sid, "Find the report.").await.unwrap().output, "Found it.");
        let kept = here.store().children(&sid).await.unwrap();
        let [child] = kept.as_slice() else { panic!("{}: {kept:?}", store.name) };
        assert_eq!((child.agent_id.as_str(), child.title.as_str()), ("4cf40c4e8395", "Where is the report?"));
        assert_eq!(child.spawn["terms"]["permission"], "read", "{}: {}", store.name, child.spawn);
        assert_eq!(here.entries(&child.session_id).await.unwrap().len(), 2, "{}", store.name);

        let there = Sessions::open(&store.url).await.unwrap();
        assert_eq!(there.run(&agent(), &sid, "And the draft?").await.unwrap().output, "Done.", "{}", store.name);
        let messages = log_messages(&there, &sid).await;
        let result = |id: &str| tool_results(&messages, id)[0]["content"].as_str().unwrap().to_string();
        assert!(result("l").starts_with("4cf40c4e8395\t"), "{}: {}", store.name, result("l"));
        let listed = result("sl");
        assert!(listed.contains("\nthis session\t") || listed.contains("4cf40c4e8395\t"), "{listed}");
        assert!(listed.contains("\tthis session\tWhere is the report?"), "{}: {listed}", store.name);
        assert!(listed.ends_with(&format!("This session: {sid}")), "{listed}");
        assert_eq!(result("r"), "#2 assistant:\nIn /srv/report.", "{}", store.name);
        assert!(result("x").contains("'ffff' is not a sub-agent of this session"), "{}", result("x"));
        assert!(result("f").ends_with("In /srv/draft."), "{}: {}", store.name, result("f"));
        // session_search: the sub-agent whose title holds the word first, then this session by its line.
        let rows: Vec<String> = result("q").lines().map(str::to_string).collect();
        assert_eq!(rows.len(), 2, "{}: {rows:?}", store.name);
        assert!(rows[0].starts_with("4cf40c4e8395\t") && rows[0].contains("\tWhere is the report?\t"), "{rows:?}");
        assert!(rows[1].starts_with(&format!("{sid}\t")) && rows[1].ends_with("\tFind the report."), "{rows:?}");
        assert_eq!(result("q0"), "No session in reach matches 'zebra'.");
        // The follow-up grew the child session's log; the sub-agent's search read its own log only.
        assert_eq!(there.entries(&child.session_id).await.unwrap().len(), 6, "{}", store.name);
        let own = log_messages(&there, &child.session_id).await;
        let searched = tool_results(&own, "cs")[0]["content"].as_str().unwrap().to_string();
        assert!(searched.contains("Where is the report?") && !searched.contains("Find the report."), "{searched}");

        let third = Sessions::open(&store.url).await.unwrap();
        assert_eq!(third.run(&agent(), &sid, "Delete it.").await.unwrap().output, "Deleted.");
        assert!(third.store().children(&sid).await.unwrap().is_empty(), "{}", store.name);
        let messages = log_messages(&third, &sid).await;
        let listed = tool_results(&messages, "l2")[0]["content"].as_str().unwrap().to_string();
        assert!(!listed.contains("4cf40c4e8395"), "{}: {listed}", store.name);
        let (served, mismatches) = p.report();
        assert!(mismatches.is_empty() && served == 10, "{}: {served} {mismatches:?}", store.name);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subagents_tool_calls_are_journalled_like_its_parents() {
    // A sub-agent's call is recorded as started before it runs, under the sub-agent's id and turn: a run
    // dropped while the sub-agent's tool runs leaves it started, and the run that takes the session over
    // tells the model it was interrupted (without the journal the note names no call).
    for store in stores().await {
        let sessions = Sessions::open(&store.url).await.unwrap();
        let sid = sessions.create().await.unwrap();
        let (wait, entered, _gate) = waiting_tool();
        let p = provider(json!([
            {"respond": {"tool_calls": [{"id": "s", "name": "agent_spawn", "arguments": {"prompt": "Wait for it."}}]}},
            {"respond": {"tool_calls": [{"id": "w", "name": "wait", "arguments": {"why": "sub"}}]}},
            {"expect": {"messages_tail": [
                {"role": "user", "content": {"$contains": ["interrupted", "\n- wait {\"why\":\"sub\"}"]}},
                {"role": "user", "content": "again"}
            ]}, "respond": {"content": "ok"}}
        ]))
        .await;
        let agent = ambit::Agent::builder()
            .model(ambit::OpenAiChat::new("m").base_url(p.base_url()).max_retries(0))
            .tool(wait)
            .subagents(ambit::SubagentConfig::default())
            .build()
            .unwrap();
        let (s, a, id) = (sessions.clone(), agent.clone(), sid.clone());
        let first = tokio::spawn(async move { s.run(&a, &id, "go").await });
        let inside = tokio::time::timeout(Duration::from_secs(60), entered.notified()).await;
        assert!(inside.is_ok(), "{}: the sub-agent's tool never ran: {:?}", store.name, p.report());
        // The host gives up on the run while the sub-agent's tool runs (its lease is let go).
        first.abort();
        let _ = first.await;
        let again = sessions.run(&agent, &sid, "again").await.unwrap();
        assert_eq!(again.output, "ok", "{}", store.name);
        let (served, mismatches) = p.report();
        assert!(mismatches.is_empty() && served == 3, "{}: {served} {mismatches:?}", store.name);
    }
}

/// Seed 000: at `unrestricted` (the live level) `conversation_read` and `conversation_search` reach any
/// session of the store by its full id, as `session_list` shows them there; an id of no session is
/// refused naming it. The negative control: the same calls at `read` are refused like any id that is not
/// a sub-agent, whether or not the session exists.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_unrestricted_the_conversation_tools_read_other_root_sessions() {
    for store in stores().await {
        let sessions = Sessions::open(&store.url).await.unwrap();
        let other = sessions.create().await.unwrap();
        let p = provider(json!([{"respond": {"content": "The deploy key is in vault/ops."}}])).await;
        let plain = ambit::Agent::builder()
            .model(ambit::OpenAiChat::new("m").base_url(p.base_url()).max_retries(0))
            .build()
            .unwrap();
        sessions.run(&plain, &other, "Where is the deploy key?").await.unwrap();
        for (level, reads) in [(ambit::Level::Unrestricted, true), (ambit::Level::Read, false)] {
            let sid = sessions.create().await.unwrap();
            let p = provider(json!([
                {"respond": {"tool_calls": [
                    {"id": "r", "name": "conversation_read", "arguments": {"id": other, "start": 2}},
                    {"id": "s", "name": "conversation_search", "arguments": {"id": other, "query": "VAULT"}},
                    {"id": "n", "name": "conversation_read", "arguments": {"id": "no-such-session", "start": 1}}
                ]}},
                {"respond": {"content": "Read."}}
            ]))
            .await;
            let agent = ambit::Agent::builder()
                .model(ambit::OpenAiChat::new("m").base_url(p.base_url()).max_retries(0))
                .tools(ambit::session::tools())
                .policy(ambit::Policy::level(level))
                .build()
                .unwrap();
            assert_eq!(sessions.run(&agent, &sid, "Read the other session.").await.unwrap().output, "Read.");
            let messages = log_messages(&sessions, &sid).await;
            let result = |id: &str| tool_results(&messages, id)[0]["content"].as_str().unwrap().to_string();
            let (r, s, n) = (result("r"), result("s"), result("n"));
            if reads {
                assert_eq!(r, "#2 assistant:\nThe deploy key is in vault/ops.", "{}", store.name);
                assert!(s.contains("vault/ops") && s.starts_with("#2 assistant"), "{}: {s}", store.name);
                assert!(n.contains("there is no session 'no-such-session'"), "{}: {n}", store.name);
            } else {
                for got in [&r, &s] {
                    assert!(got.contains(&format!("'{other}' is not a sub-agent of this session")), "{got}");
                }
                assert!(n.contains("'no-such-session' is not a sub-agent of this session"), "{n}");
            }
        }
    }
}

/// A steer to a sub-agent that has finished is stored in its child session at once (its inbox), not
/// only when it next runs or its parent parks: a tool of the same run reads the store after the steer
/// and finds the message. (Negative control: without the store write the inbox read there is empty.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steer_to_a_finished_subagent_is_stored_at_once() {
    for store in stores().await {
        let sessions = Sessions::open(&store.url).await.unwrap();
        let sid = sessions.create().await.unwrap();
        let p = provider(json!([
            {"respond": {"tool_calls": [{"id": "s", "name": "agent_spawn", "arguments": {"prompt": "Where is the report?\nLook in /srv.", "permission": "read"}}]}},
            {"respond": {"content": "In /srv/report."}},
            {"respond": {"tool_calls": [{"id": "t", "name": "agent_steer", "arguments": {"id": "4cf40c4e8395", "message": "Check /srv/archive too."}}]}},
            {"respond": {"tool_calls": [{"id": "p", "name": "peek", "arguments": {}}]}},
            {"respond": {"content": "Done."}}
        ]))
        .await;
        let (store_view, root) = (sessions.clone(), sid.clone());
        let peek = ambit::tool_fn(
            "peek",
            "Reads the stored inbox of the sub-agent.",
            json!({"type": "object", "properties": {}}),
            move |_: Value| {
                let (store_view, root) = (store_view.clone(), root.clone());
                async move {
                    let kept = store_view.store().children(&root).await.map_err(|e| e.to_string())?;
                    Ok::<_, String>(kept.first().map(|c| c.spawn["inbox"].to_string()).unwrap_or_default())
                }
            },
        )
        .level(ambit::Level::Read);
        let agent = ambit::Agent::builder()
            .model(ambit::OpenAiChat::new("m").base_url(p.base_url()).max_retries(0))
            .tool(peek)
            .subagents(ambit::SubagentConfig::default())
            .policy(ambit::Policy::level(ambit::Level::Read))
            .build()
            .unwrap();
        assert_eq!(sessions.run(&agent, &sid, "Find the report.").await.unwrap().output, "Done.", "{}", store.name);
        let messages = log_messages(&sessions, &sid).await;
        let steer = tool_results(&messages, "t")[0]["content"].as_str().unwrap().to_string();
        assert!(steer.contains("at the start of its next follow-up"), "{}: {steer}", store.name);
        let peeked = tool_results(&messages, "p")[0]["content"].as_str().unwrap().to_string();
        assert!(peeked.contains("Check /srv/archive too."), "{}: the stored inbox: {peeked}", store.name);
    }
}

/// A settle (a run's last write: its entries appended, its state set, its lease let go) writes only while
/// its caller holds the session's lease, on both stores (PostgreSQL settles in one call of
/// `ambit_session_settle`, SQLite in a transaction of its own): another owner's settle, or a second one
/// after the lease was let go, is refused with `session_busy` and writes nothing; a session that does
/// not exist is `NotFound`. The negative control is the holder's own settle, which writes.
#[tokio::test]
async fn a_settle_writes_only_under_its_own_lease() {
    use ambit::model::Message;
    use ambit::session::SessionState;
    for store in stores().await {
        let sessions = Sessions::open(&store.url).await.unwrap();
        let s = sessions.store();
        let now = 1_000;
        assert!(s.create_taken("settled", Some("t"), "owner-a", now, 60_000).await.unwrap(), "{}", store.name);
        let items = |text: &str| {
            vec![
                Item::Message { message: Message::user(format!("{text} 1")) },
                Item::Message { message: Message::user(format!("{text} 2")) },
            ]
        };
        let idle = SessionState { state: "idle".into(), parked: None };
        let other = s.settle("settled", "owner-b", &items("b"), &idle, now).await;
        assert!(matches!(other, Err(SessionError::Busy(_))), "{}: another owner's settle: {other:?}", store.name);
        assert!(sessions.entries("settled").await.unwrap().is_empty(), "{}: nothing written", store.name);
        // The holder's settle writes (the control): entries numbered from 1, the lease let go.
        let running = SessionState { state: "running".into(), parked: None };
        assert_eq!(s.settle("settled", "owner-a", &items("a"), &running, now).await.unwrap(), vec![1, 2]);
        assert_eq!(s.settle("settled", "owner-a", &[], &running, now).await.unwrap(), Vec::<i64>::new());
        assert_eq!(
            s.settle("settled", "owner-a", &items("c"), &idle, now).await.unwrap(),
            vec![3, 4],
            "{}",
            store.name
        );
        let entries = sessions.entries("settled").await.unwrap();
        assert_eq!(entries.iter().map(|e| e.index).collect::<Vec<_>>(), vec![1, 2, 3, 4], "{}", store.name);
        assert_eq!(s.state("settled").await.unwrap().state, "idle", "{}", store.name);
        let again = s.settle("settled", "owner-a", &items("d"), &idle, now).await;
        assert!(
            matches!(again, Err(SessionError::Busy(_))),
            "{}: a settle after the lease went: {again:?}",
            store.name
        );
        assert_eq!(sessions.entries("settled").await.unwrap().len(), 4, "{}: nothing more written", store.name);
        let missing = s.settle("no-such-session", "owner-a", &items("e"), &idle, now).await;
        assert!(matches!(missing, Err(SessionError::NotFound(_))), "{}: {missing:?}", store.name);
    }
}
