//! Attacks on the durable-run guarantees (SPEC §8b, issue 13 items 1 and 2), each on both stores with
//! real processes (tests/support/durable_child.rs): what a crash, a paused process, a skewed clock or a
//! cancelled run does to the lease and the call journal. Each test asserts the guarantee; each failed
//! on the first lease and journal (a hole an outside attack found) and passes since the fixes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use ambit::ApprovalDecision;
use ambit::ledger::ManualClock;
use ambit::session::{Item, SessionError, Sessions};
use serde_json::{Value, json};

#[path = "support/durable_agent.rs"]
mod durable_agent;
use durable_agent::agent;

#[path = "support/durable_worker.rs"]
mod durable_worker;
use durable_worker::{Worker, effects_of, provider};

#[path = "support/session_stores.rs"]
mod session_stores;
use session_stores::stores;

/// Waits (bounded) until `line` is among the effects.
fn wait_for(effects: &str, line: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while effects_of(effects, line) == 0 {
        assert!(Instant::now() < deadline, "never saw '{line}'");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Stops the worker (SIGSTOP) at a moment it holds no lock on the store. A process paused inside a write
/// (its lease's heartbeat) keeps every other writer out: on SQLite the new owner's run fails with
/// "database is locked", a different attack from the paused owner these tests make. Stopped inside
/// one, the worker is let go and stopped again (bounded by a count, not a time).
async fn pause_outside_a_write(w: &Worker, url: &str) {
    for _ in 0..1000 {
        w.signal("-STOP");
        if !holds_a_lock(url).await {
            return;
        }
        w.signal("-CONT");
        tokio::task::yield_now().await;
    }
    panic!("the worker held a lock on the store each of 1,000 times it was stopped");
}

/// Whether another connection holds a lock on the store: on SQLite an exclusive transaction cannot
/// start at once; on PostgreSQL another client of the database is inside a statement or a transaction.
async fn holds_a_lock(url: &str) -> bool {
    use sqlx::Connection;
    if url.starts_with("sqlite:") {
        let options = url.parse::<sqlx::sqlite::SqliteConnectOptions>().unwrap().busy_timeout(Duration::ZERO);
        let mut c = sqlx::SqliteConnection::connect_with(&options).await.unwrap();
        let held = sqlx::query("BEGIN EXCLUSIVE").execute(&mut c).await.is_err();
        if !held {
            sqlx::query("ROLLBACK").execute(&mut c).await.unwrap();
        }
        held
    } else {
        let mut c = sqlx::PgConnection::connect(url).await.unwrap();
        let busy: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() \
             AND backend_type = 'client backend' AND state <> 'idle'",
        )
        .fetch_one(&mut c)
        .await
        .unwrap();
        busy > 0
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

async fn an_hour_later(url: &str) -> Sessions {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    Sessions::open(url).await.unwrap().with_clock(Arc::new(ManualClock::new(now + 3_600_000)))
}

/// Runs `sid` with `a` until the session is no longer busy (a lease running out in real time), bounded.
async fn run_once_free(sessions: &Sessions, a: &ambit::Agent, sid: &str) -> ambit::RunResult {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match sessions.run(a, sid, "new").await {
            Ok(r) => return r,
            Err(SessionError::Busy(_)) if Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("the run after the lease ran out failed: {e}"),
        }
    }
}

/// Hole: a resume that a crash interrupted after the tool's effect, answered again with "deny", tells
/// the model the call was denied, though the email went out. The journal is only consulted on the path
/// that runs the tool (gate::answered), so a deny (or a refused revise) skips it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deny_after_a_crash_past_the_effect_does_not_claim_the_call_was_denied() {
    let dir = tempfile::tempdir().unwrap();
    let mut holes: Vec<String> = Vec::new();
    for store in stores().await {
        let effects = dir.path().join(format!("deny-{}", store.name)).display().to_string();
        let sessions = Sessions::open(&store.url).await.unwrap();
        let sid = sessions.create().await.unwrap();
        let p = provider(json!([
            {"respond": {"tool_calls": [{"id": "a", "name": "send_email", "arguments": {"to": sid}}]}},
            {"respond": {"content": "Noted."}}
        ]))
        .await;
        let err = sessions.run(&agent(&p.base_url(), &effects, false, false), &sid, "mail").await.unwrap_err();
        assert_eq!(err.code(), "awaiting_approval");
        // The first answer, "approve", from a process killed after the effect and before the result.
        let mut w = Worker::start(&store.url, &effects, &["--block"]);
        w.send(&format!("resume {sid} {}", p.base_url()));
        wait_for(&effects, &sid);
        w.kill();
        // The host answers again, now "deny" (another operator, or a changed mind).
        let later = an_hour_later(&store.url).await;
        let deny = ApprovalDecision::Deny { reason: "not this one".into() };
        later.resume(&agent(&p.base_url(), &effects, false, false), &sid, deny).await.unwrap();
        let log = log_messages(&sessions, &sid).await;
        let result = log.iter().find(|m| m["role"] == "tool" && m["call_id"] == "a").unwrap();
        let content = result["content"].as_str().unwrap();
        eprintln!("{}: effects {}, the model was told: {content}", store.name, effects_of(&effects, &sid));
        assert_eq!(effects_of(&effects, &sid), 1);
        if content.contains("was denied") {
            holes.push(format!(
                "{}: the email was sent, yet the model is told the call was denied: {content}",
                store.name
            ));
        }
    }
    assert!(holes.is_empty(), "{holes:#?}");
}

/// Hole (fencing): a run paused (SIGSTOP) past its lease is taken over; resumed (SIGCONT), it goes on
/// running tools with side effects although it no longer holds the session. Only its final append is
/// fenced (settle checks the owner); call_started does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_owner_taken_over_runs_no_more_tools_when_it_wakes() {
    let dir = tempfile::tempdir().unwrap();
    let mut holes: Vec<String> = Vec::new();
    for store in stores().await {
        let effects = dir.path().join(format!("fence-{}", store.name)).display().to_string();
        let sessions = Sessions::open(&store.url).await.unwrap();
        let sid = sessions.create().await.unwrap();
        let old = provider(json!([
            {"respond": {"tool_calls": [{"id": "g", "name": "gate", "arguments": {"to": sid}}]}},
            {"respond": {"tool_calls": [{"id": "r", "name": "record", "arguments": {"to": sid}}]}},
            {"respond": {"content": "old done"}}
        ]))
        .await;
        let mut w = Worker::start(&store.url, &effects, &["--lease-ms", "1500"]);
        w.send(&format!("run {sid} {}", old.base_url()));
        wait_for(&effects, &format!("entered:{sid}"));
        pause_outside_a_write(&w, &store.url).await;
        // The owner is alive but paused: its lease runs out in real time and a new run takes over.
        let new = provider(json!([{"respond": {"content": "new done"}}])).await;
        let a = agent(&new.base_url(), &effects, false, false);
        assert_eq!(run_once_free(&sessions, &a, &sid).await.output, "new done");
        // The old owner wakes up.
        std::fs::write(format!("{effects}.gate"), "").unwrap();
        w.signal("-CONT");
        let answer = w.answer();
        let (served, _) = old.report();
        let recorded = effects_of(&effects, &format!("rec:{sid}"));
        eprintln!(
            "{}: the old owner answered {answer}; after the takeover it made {} model requests and ran `record` {recorded} times",
            store.name,
            served - 1
        );
        assert_eq!(answer, "session_busy", "{}", store.name);
        if recorded != 0 {
            holes.push(format!(
                "{}: the taken-over owner ran `record` {recorded} times after it lost its lease",
                store.name
            ));
        }
        std::fs::remove_file(format!("{effects}.gate")).unwrap();
    }
    assert!(holes.is_empty(), "{holes:#?}");
}

/// Hole (clock skew): the lease expiry is computed from each client's clock, never the store's. A
/// worker on a machine whose clock is 31 s behind writes leases that everyone else reads as expired:
/// its live run (heartbeat running) is taken over at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_run_on_a_machine_with_a_slow_clock_is_not_taken_over() {
    let dir = tempfile::tempdir().unwrap();
    let mut holes: Vec<String> = Vec::new();
    for store in stores().await {
        let effects = dir.path().join(format!("skew-{}", store.name)).display().to_string();
        let sessions = Sessions::open(&store.url).await.unwrap();
        let sid = sessions.create().await.unwrap();
        let old = provider(json!([
            {"respond": {"tool_calls": [{"id": "g", "name": "gate", "arguments": {"to": sid}}]}},
            {"respond": {"content": "old done"}}
        ]))
        .await;
        let mut w = Worker::start(&store.url, &effects, &["--clock-ahead-ms", "-31000"]);
        w.send(&format!("run {sid} {}", old.base_url()));
        wait_for(&effects, &format!("entered:{sid}"));
        // The worker is alive, its heartbeat renews its 30 s lease.
        let new = provider(json!([{"respond": {"content": "new done"}}])).await;
        let a = agent(&new.base_url(), &effects, false, false);
        let outcome = sessions.run(&a, &sid, "me too").await;
        let code = match &outcome {
            Ok(r) => format!("ok ({})", r.output),
            Err(e) => e.code().to_string(),
        };
        eprintln!("{}: a second run while the slow-clock worker runs: {code}", store.name);
        std::fs::write(format!("{effects}.gate"), "").unwrap();
        let _ = w.answer();
        std::fs::remove_file(format!("{effects}.gate")).unwrap();
        if code != "session_busy" {
            holes.push(format!("{}: a live run was taken over because of a 31 s clock skew: {code}", store.name));
        }
    }
    assert!(holes.is_empty(), "{holes:#?}");
}

/// Hole: a host that gives up on a run (drops its future, e.g. a timeout) and exits normally leaves the
/// lease held: the let-go is a task spawned on a runtime that is shutting down. The next process is
/// refused with session_busy until the 30 s lease runs out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cancelled_before_a_normal_exit_lets_its_session_go() {
    let dir = tempfile::tempdir().unwrap();
    let mut holes: Vec<String> = Vec::new();
    for store in stores().await {
        let effects = dir.path().join(format!("cancel-{}", store.name)).display().to_string();
        let sessions = Sessions::open(&store.url).await.unwrap();
        let sid = sessions.create().await.unwrap();
        let old = provider(json!([
            {"respond": {"tool_calls": [{"id": "g", "name": "gate", "arguments": {"to": sid}}]}},
        ]))
        .await;
        let mut w = Worker::start(&store.url, &effects, &[]);
        w.send(&format!("runcancel {sid} {}", old.base_url()));
        assert_eq!(w.answer(), "cancelled");
        let status = w.child.wait().unwrap();
        assert!(status.success(), "the child exited normally: {status}");
        let new = provider(json!([{"respond": {"content": "new done"}}])).await;
        let a = agent(&new.base_url(), &effects, false, false);
        let outcome = sessions.run(&a, &sid, "again").await;
        let code = match &outcome {
            Ok(_) => "ok".to_string(),
            Err(e) => e.code().to_string(),
        };
        let state = sessions.store().state(&sid).await.unwrap();
        eprintln!("{}: the run after a cancelled run and a normal exit: {code} (state {})", store.name, state.state);
        if outcome.is_ok() {
            let log = log_messages(&sessions, &sid).await;
            eprintln!("{}: the model was told: {}", store.name, log[0]["content"]);
        }
        if code != "ok" {
            holes.push(format!("{}: the session stays busy after a cancelled run: {code}", store.name));
        }
    }
    assert!(holes.is_empty(), "{holes:#?}");
}

/// What the model is told after a run is cancelled in a live process (not a crash): the next run takes
/// over and its first message says the previous run's "process stopped". Records the exact text; the
/// assertion is that the next run is not refused (the let-go is spawned, so this races it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cancelled_in_a_live_process_is_not_refused_next() {
    cancelled_then_run(20).await;
}

/// The same on a single-threaded runtime, where a dropped lease cannot be let go before the drop returns:
/// its release is spawned, and the next take of the session in the process waits for it.
#[tokio::test(flavor = "current_thread")]
async fn a_run_cancelled_on_a_single_threaded_runtime_is_not_refused_next() {
    cancelled_then_run(5).await;
}

/// Cancels `trials` runs once their `gate` call started, each followed at once by another run of the
/// same session: none is refused.
async fn cancelled_then_run(trials: usize) {
    let dir = tempfile::tempdir().unwrap();
    let mut holes: Vec<String> = Vec::new();
    for store in stores().await {
        let effects = dir.path().join(format!("abort-{}", store.name)).display().to_string();
        let sessions = Sessions::open(&store.url).await.unwrap();
        let mut busy = 0;
        let mut told = String::new();
        for _ in 0..trials {
            let sid = sessions.create().await.unwrap();
            let old = provider(json!([
                {"respond": {"tool_calls": [{"id": "g", "name": "gate", "arguments": {"to": sid}}]}},
            ]))
            .await;
            let a = agent(&old.base_url(), &effects, false, false);
            let (s, a2, sid2) = (sessions.clone(), a.clone(), sid.clone());
            let handle = tokio::spawn(async move { s.run(&a2, &sid2, "go").await });
            let entered = format!("entered:{sid}");
            let deadline = Instant::now() + Duration::from_secs(60);
            while effects_of(&effects, &entered) == 0 {
                assert!(Instant::now() < deadline);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            handle.abort();
            let _ = handle.await;
            let new = provider(json!([{"respond": {"content": "new done"}}])).await;
            match sessions.run(&agent(&new.base_url(), &effects, false, false), &sid, "again").await {
                Ok(_) => told = log_messages(&sessions, &sid).await[0]["content"].as_str().unwrap_or("").to_string(),
                Err(SessionError::Busy(_)) => busy += 1,
                Err(e) => panic!("{e}"),
            }
        }
        eprintln!(
            "{}: {busy} of {trials} runs refused right after a cancelled run; the model was told: {told}",
            store.name
        );
        if busy != 0 {
            holes.push(format!("{}: {busy} of {trials} runs refused right after a cancelled run", store.name));
        }
    }
    assert!(holes.is_empty(), "{holes:#?}");
}

/// Hole (fencing of the log): a run that asked for a compaction (`context_compact`) appends its messages
/// and the summary at the next round boundary with a plain append that does not check the lease. A
/// paused owner taken over wakes and writes its turns, and a summary, after the new owner's run:
/// the interleaving the lease exists to prevent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_owner_taken_over_appends_nothing_to_the_log_when_it_wakes() {
    let dir = tempfile::tempdir().unwrap();
    let mut holes: Vec<String> = Vec::new();
    for store in stores().await {
        let effects = dir.path().join(format!("fencelog-{}", store.name)).display().to_string();
        let sessions = Sessions::open(&store.url).await.unwrap();
        let sid = sessions.create().await.unwrap();
        let old = provider(json!([
            {"respond": {"tool_calls": [
                {"id": "g", "name": "gate", "arguments": {"to": sid}},
                {"id": "k", "name": "context_compact", "arguments": {"keep_recent": false}}]}},
            {"respond": {"content": "SUMMARY-BY-THE-OLD-OWNER"}},
            {"respond": {"content": "old done"}},
            {"respond": {"content": "old done"}}
        ]))
        .await;
        let mut w = Worker::start(&store.url, &effects, &["--lease-ms", "1500", "--session-tools"]);
        w.send(&format!("run {sid} {}", old.base_url()));
        wait_for(&effects, &format!("entered:{sid}"));
        pause_outside_a_write(&w, &store.url).await;
        let new = provider(json!([{"respond": {"content": "new done"}}])).await;
        let a = agent(&new.base_url(), &effects, false, false);
        assert_eq!(run_once_free(&sessions, &a, &sid).await.output, "new done");
        let before = sessions.entries(&sid).await.unwrap().len();
        std::fs::write(format!("{effects}.gate"), "").unwrap();
        w.signal("-CONT");
        let answer = w.answer();
        let entries = sessions.entries(&sid).await.unwrap();
        let after: Vec<String> = entries.iter().skip(before).map(|e| serde_json::to_string(&e.item).unwrap()).collect();
        eprintln!(
            "{}: the old owner answered {answer}; it added {} entries after the takeover: {after:#?}",
            store.name,
            after.len()
        );
        if !after.is_empty() {
            holes.push(format!(
                "{}: the taken-over owner appended {} entries after it lost its lease (answer {answer})",
                store.name,
                after.len()
            ));
        }
        std::fs::remove_file(format!("{effects}.gate")).unwrap();
    }
    assert!(holes.is_empty(), "{holes:#?}");
}

fn boom() -> impl ambit::Tool {
    ambit::tool_fn("boom", "Panics.", json!({"type": "object", "properties": {}}), |_: Value| async {
        if std::hint::black_box(true) {
            panic!("the tool panics");
        }
        Ok::<_, String>(String::new())
    })
}

/// Held: a run that fails (the provider errors) or whose tool panics lets its session go: the next run
/// is not refused and is not told of an interruption.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_or_panicked_run_lets_its_session_go() {
    for store in stores().await {
        let sessions = Sessions::open(&store.url).await.unwrap();
        // An empty script: the provider answers the first request with an error.
        let failing = provider(json!([])).await;
        let panicking =
            provider(json!([{"respond": {"tool_calls": [{"id": "b", "name": "boom", "arguments": {}}]}}])).await;
        for (what, p) in [("a provider error", &failing), ("a panicking tool", &panicking)] {
            let sid = sessions.create().await.unwrap();
            let a = ambit::Agent::builder()
                .model(ambit::OpenAiChat::new("m").base_url(p.base_url()).max_retries(0))
                .tool(boom())
                .build()
                .unwrap();
            let first = sessions.run(&a, &sid, "one").await;
            eprintln!(
                "{}: {what}: the run ended {:?}",
                store.name,
                first.as_ref().map(|r| r.output.clone()).map_err(|e| e.code())
            );
            let state = sessions.store().state(&sid).await.unwrap();
            assert_eq!(state.state, "idle", "{}: {what}: {state:?}", store.name);
            let next = provider(json!([{"respond": {"content": "fine"}}])).await;
            let b = ambit::Agent::builder()
                .model(ambit::OpenAiChat::new("m").base_url(next.base_url()).max_retries(0))
                .build()
                .unwrap();
            assert_eq!(sessions.run(&b, &sid, "two").await.unwrap().output, "fine", "{}: {what}", store.name);
            let log = log_messages(&sessions, &sid).await;
            assert!(!log.iter().any(|m| m.to_string().contains("interrupted")), "{}: {what}: {log:#?}", store.name);
        }
    }
}
