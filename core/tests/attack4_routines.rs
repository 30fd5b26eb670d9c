//! Outside attack on routines (SPEC §13, issue 15), through the public API on both stores: hostile
//! definitions (cron strings, windows, sizes) and what a routine's run reaches with its read-only tools.
//!
//! Tests named `hole_*` FAIL on the code as attacked: each shows a hole (its doc comment says which and
//! what the fix should make true). Tests named `held_*` pin a guarantee the attack could not break.

#[path = "support/routine_agent.rs"]
mod routine_agent;
#[path = "support/session_stores.rs"]
mod session_stores;

use std::sync::Arc;

use std::time::Duration;

use ambit::ledger::{Clock, ManualClock};
use ambit::routine::{RoutineOptions, RoutineSpec, Routines, RunState, Runner};
use ambit::session::Sessions;
use serde_json::{Value, json};

const T0: i64 = 1_780_000_000_000; // 2026-05-28, a Thursday

async fn open(url: &str, clock: &ManualClock) -> Routines {
    let options = RoutineOptions { clock: Arc::new(clock.clone()), max_connections: 4 };
    Routines::open_with(url, options).await.unwrap()
}

/// HOLE (severity: medium — a panic in the core, which crosses into Python/Node/Swift as a crash or a
/// PanicException instead of the typed `cron_expression` error). A cron step that overflows `u32` when
/// added to the range's start (`1/4294967295`: 1 + 4294967295) panics in `parse_field` (`v += step`)
/// in a debug build; in a release build it wraps to 0 and silently sets minute 0, a slot nobody asked
/// for. The step must be refused (or the walk stop) with a typed error naming `cron_expression`.
#[tokio::test]
async fn a_cron_step_past_the_fields_range_is_a_typed_error_not_a_panic() {
    for expr in ["1/4294967295 * * * *", "0 5/4294967295 * * *", "0 0 1 2/4294967295 *"] {
        let spec = RoutineSpec::cron("tester", "x", expr, "UTC");
        let outcome = std::panic::catch_unwind(|| spec.validate().map(|_| ()));
        match outcome {
            Err(_) => panic!("HOLE: validating cron '{expr}' panicked instead of returning a typed error"),
            Ok(Ok(())) => panic!("HOLE: cron '{expr}' was accepted (a step past the field's range wraps)"),
            Ok(Err(e)) => assert_eq!(e.field(), Some("cron_expression"), "{expr}: {e}"),
        }
    }
}

/// HOLE (severity: medium). A cron schedule that never fires is refused ("31 February": typed
/// `cron_expression` error), but the same dead schedule made by a window is accepted silently: a
/// Monday-only cron inside a Saturday-only window never fires, and `create` returns a routine with no
/// next slot and no error, after walking nine years of matches through the time-zone rules
/// (schedule.rs `next_cron`, bounded only by SEARCH_DAYS). With `* * * * mon` (every Monday minute,
/// 674,000 matches) that walk took ~400 s per `create` in a debug build on the loaded machine (808 s
/// for the two stores), on the async runtime's thread: one definition call stalls a worker for
/// minutes. This test uses `0 9 * * mon` (one match a week) so it stays fast; the definition should
/// be refused naming `active_window`, as 31 February is, and the walk bounded in matches, not days.
#[tokio::test]
async fn a_cron_that_never_fires_inside_its_window_is_refused_naming_active_window() {
    for s in session_stores::stores().await {
        let clock = ManualClock::new(T0);
        let routines = open(&s.url, &clock).await;
        let spec = RoutineSpec::from_json(&json!({
            "agent": "tester", "instructions": "x", "cron_expression": "0 9 * * mon", "timezone": "UTC",
            "active_window": {"weekdays": ["sat"], "start": "09:00", "end": "17:00", "timezone": "UTC"}
        }))
        .unwrap();
        let started = std::time::Instant::now();
        let created = routines.create(spec, "alice").await;
        eprintln!("{}: create took {:?}: {:?}", s.name, started.elapsed(), created.as_ref().map(|r| r.next_slot));
        match created {
            Ok(r) => panic!("HOLE ({}): a schedule that never fires was accepted: next_slot {:?}", s.name, r.next_slot),
            Err(e) => assert_eq!(e.field(), Some("active_window"), "{}: {e}", s.name),
        }
        // Negative control: the same cron in a Monday window is accepted, with a next slot.
        let fires = RoutineSpec::from_json(&json!({
            "agent": "tester", "instructions": "x", "cron_expression": "0 9 * * mon", "timezone": "UTC",
            "active_window": {"weekdays": ["mon"], "start": "09:00", "end": "17:00", "timezone": "UTC"}
        }))
        .unwrap();
        let created = routines.create(fires, "alice").await.unwrap();
        assert!(created.next_slot.is_some(), "{}: control: no next slot", s.name);
    }
}

/// The same rule on update: a window or cron changed so that the schedule never fires is refused naming
/// the field, whether the routine stays enabled or is paused by the same update, and nothing is stored
/// (the revision and the next slot stay). Control: a window that still fires is taken and reschedules.
#[tokio::test]
async fn an_update_to_a_schedule_that_never_fires_is_refused_and_changes_nothing() {
    for s in session_stores::stores().await {
        let clock = ManualClock::new(T0);
        let routines = open(&s.url, &clock).await;
        let spec = RoutineSpec::from_json(&json!({
            "agent": "tester", "instructions": "x", "cron_expression": "0 9 * * mon", "timezone": "UTC"
        }))
        .unwrap();
        let created = routines.create(spec, "alice").await.unwrap();
        let saturday = json!({"weekdays": ["sat"], "start": "09:00", "end": "17:00", "timezone": "UTC"});
        for patch in [json!({"active_window": saturday}), json!({"active_window": saturday, "enabled": false})] {
            let err = routines.update_json(&created.id, &patch, "bob").await.unwrap_err();
            assert_eq!(err.field(), Some("active_window"), "{}: {patch}: {err}", s.name);
        }
        let err =
            routines.update_json(&created.id, &json!({"cron_expression": "0 0 31 2 *"}), "bob").await.unwrap_err();
        assert_eq!(err.field(), Some("cron_expression"), "{}: {err}", s.name);
        let kept = routines.get(&created.id).await.unwrap().routine;
        assert_eq!((kept.revision, kept.next_slot), (1, created.next_slot), "{}: a refused update changed it", s.name);
        // Control: a Monday window fires, so the update is taken.
        let monday =
            json!({"active_window": {"weekdays": ["mon"], "start": "08:00", "end": "17:00", "timezone": "UTC"}});
        let updated = routines.update_json(&created.id, &monday, "bob").await.unwrap();
        assert_eq!(updated.revision, 2, "{}", s.name);
        assert!(updated.next_slot.is_some(), "{}: control: no next slot", s.name);
    }
}

/// HOLE (severity: medium — an unbounded answer to the model, the kind the knowledge/skills lists were
/// capped for last stop). `list_my_routines` has no limit: every routine of the agent, each with its
/// instructions (up to 64 KiB each), and with `include_runs` five runs each. 60 routines of 60 KiB
/// make a single tool result of ~3.6 MB. `list_my_outcomes` is capped at 50; this list should be too
/// (a most-routines bound and a byte cap with a count of the rest).
#[tokio::test]
async fn list_my_routines_is_bounded_and_says_how_many_it_left_out() {
    for s in session_stores::stores().await {
        let clock = ManualClock::new(T0);
        let routines = open(&s.url, &clock).await;
        let long = "chase the oldest purchase orders without tracking. ".repeat(60 * 1024 / 52);
        for _ in 0..60 {
            routines.create(RoutineSpec::every("tester", long.clone(), 3600), "alice").await.unwrap();
        }
        let tools = ambit::routine::tools::routine_tools(routines.clone(), "tester", "run-x");
        let list = tools.iter().find(|t| t.spec().name == "list_my_routines").unwrap();
        let answer = list.call(json!({"include_runs": true})).await.unwrap();
        let bytes = answer.to_string().len();
        let listed = answer["routines"].as_array().map_or(0, Vec::len);
        eprintln!("{}: list_my_routines answered {bytes} bytes, {listed} routines", s.name);
        assert!(bytes <= 256 * 1024, "HOLE ({}): list_my_routines answered {bytes} bytes ({listed} routines)", s.name);
        // It says what it cut: the listed and the omitted make all 60.
        assert_eq!(listed as u64 + answer["omitted"].as_u64().unwrap_or(0), 60, "{}: the cut is not counted", s.name);
        assert!(listed >= 1, "{}: nothing listed", s.name);
    }
}

/// HELD: a run's read-only tools see only its own agent's routines and outcomes: a `routine_id` of
/// another agent's routine gives nothing, and `report_outcome` writes only the run it was made for
/// (an unknown run id is an error, not a write elsewhere).
#[tokio::test]
async fn held_a_runs_tools_reach_only_its_own_agents_routines() {
    for s in session_stores::stores().await {
        let clock = ManualClock::new(T0);
        let routines = open(&s.url, &clock).await;
        let mine = routines.create(RoutineSpec::every("tester", "mine", 3600), "alice").await.unwrap();
        let theirs =
            routines.create(RoutineSpec::every("payroll", "secret payroll work", 3600), "alice").await.unwrap();
        let tools = ambit::routine::tools::routine_tools(routines.clone(), "tester", "run-x");
        let call = |name: &str, args: Value| {
            let t = tools.iter().find(|t| t.spec().name == name).unwrap().clone();
            async move { t.call(args).await }
        };
        let listed = call("list_my_routines", json!({"include_runs": true})).await.unwrap().to_string();
        assert!(listed.contains(&mine.id) && !listed.contains(&theirs.id), "{}: {listed}", s.name);
        assert!(!listed.contains("secret payroll"), "{}: {listed}", s.name);
        let other = call("list_my_outcomes", json!({"routine_id": theirs.id, "limit": 50})).await.unwrap();
        assert_eq!(other, json!({"outcomes": []}), "{}", s.name);
        let wrote = call("report_outcome", json!({"status": "success", "summary": "Did it."})).await;
        assert!(wrote.is_err(), "{}: a report for a run that does not exist was accepted: {wrote:?}", s.name);
        // Negative control: the other agent's own tools do see its routine.
        let theirs_tools = ambit::routine::tools::routine_tools(routines.clone(), "payroll", "run-y");
        let t = theirs_tools.iter().find(|t| t.spec().name == "list_my_routines").unwrap();
        assert!(t.call(json!({})).await.unwrap().to_string().contains(&theirs.id), "{}", s.name);
    }
}

/// HELD: hostile definition text is refused by field, never stored: a NUL in the instructions, a line
/// break in the agent name, a time zone that is a path, an interval that overflows milliseconds.
#[tokio::test]
async fn held_hostile_definition_text_is_refused_by_field() {
    let cases = [
        (json!({"agent": "tester", "instructions": "a\u{0}b", "interval_seconds": 60}), "instructions"),
        (json!({"agent": "tes\nter", "instructions": "x", "interval_seconds": 60}), "agent"),
        (json!({"agent": "tester", "instructions": "x", "interval_seconds": i64::MAX}), "interval_seconds"),
        (
            json!({"agent": "tester", "instructions": "x", "cron_expression": "0 9 * * *", "timezone": "../../../etc/passwd"}),
            "timezone",
        ),
        (
            json!({"agent": "tester", "instructions": "x", "cron_expression": "0 9 * * *", "timezone": "/usr/share/zoneinfo/UTC"}),
            "timezone",
        ),
        (
            json!({"agent": "tester", "instructions": "x", "cron_expression": "0 9 30 2 *", "timezone": "UTC"}),
            "cron_expression",
        ),
        (
            json!({"agent": "tester", "instructions": "x", "cron_expression": "٥ 9 * * *", "timezone": "UTC"}),
            "cron_expression",
        ),
        (json!({"agent": "tester", "instructions": "x", "interval_seconds": 60, "daily_cap": -1}), "daily_cap"),
    ];
    for (def, field) in cases {
        let err = RoutineSpec::from_json(&def).and_then(|s| s.validate().map(|_| s));
        match err {
            Ok(_) => panic!("accepted: {def}"),
            Err(e) => assert_eq!(e.field(), Some(field), "{def}: {e}"),
        }
    }
}

fn runner_with(routines: &Routines, sessions: &Sessions, clock: &ManualClock, lease: Duration) -> Option<Runner> {
    let clock: Arc<dyn Clock> = Arc::new(clock.clone());
    Runner::builder(routines.clone(), sessions.clone())
        .agent("tester", move |ctx| routine_agent::agent(ctx, clock.clone()))
        .lease(lease)
        .build()
        .ok()
}

/// HOLE (severity: high for what it breaks — "never two runs of one routine at once", "no slot run
/// twice" — medium for how it is reached: a host setting). `RunnerBuilder::lease` takes any
/// `Duration` of at least 3 ms, and the runner keeps it as `lease.as_millis() as i64` (runner.rs):
/// a lease of 2^63 ms or more wraps negative, so the claim is written already expired. Runner A
/// (huge lease) starts a 10-minute run; a minute later runner B (default lease) finds A's live run's
/// lease run out: it marks the run `lost` and starts the next slot beside it — two runs of one
/// routine at once, with A alive. The lease must be bounded (typed error naming `lease`) or saturate.
/// Negative control inside: with a 300 s lease, B starts nothing and nothing is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_runner_lease_is_refused_so_no_second_runner_overlaps_a_live_run() {
    let mut holes = Vec::new();
    for (lease, attacked) in [(Duration::from_secs(300), false), (Duration::from_millis(u64::MAX), true)] {
        for s in session_stores::stores().await {
            let clock = ManualClock::new(T0);
            let routines = open(&s.url, &clock).await;
            let sessions = Sessions::open(&s.url).await.unwrap();
            let r =
                routines.create(RoutineSpec::every("tester", "work=600000 report=success", 60), "alice").await.unwrap();
            let Some(a) = runner_with(&routines, &sessions, &clock, lease) else {
                assert!(attacked, "{}: the control's runner was refused", s.name);
                continue; // refusing the lease is a fix
            };
            let b = runner_with(&routines, &sessions, &clock, Duration::from_secs(300)).unwrap();
            assert_eq!(a.tick(T0).await.unwrap().started.len(), 1, "{}", s.name);
            clock.set(T0 + 60_000);
            let second = b.tick(T0 + 60_000).await.unwrap().started.len();
            let runs = routines.runs(Some(&r.id), 10).await.unwrap();
            let lost = runs.iter().filter(|x| x.state == RunState::Lost).count();
            clock.set(T0 + 20 * 60_000);
            a.wait_idle().await;
            b.wait_idle().await;
            eprintln!("{} lease {lease:?}: second runner started {second}, lost {lost}", s.name);
            if (second, lost) != (0, 0) {
                assert!(attacked, "{}: control: second {second}, lost {lost}", s.name);
                holes.push(format!(
                    "{}: {second} run(s) started beside a live one, {lost} live run(s) marked lost",
                    s.name
                ));
            }
        }
    }
    assert!(holes.is_empty(), "HOLE: lease u64::MAX ms: {holes:?}");
}

/// HOLE (severity: low — host API, but the two stores disagree). `Routines::runs(routine, limit)`
/// passes a negative limit to SQL: SQLite reads `LIMIT -1` as "no limit" (every run record), PostgreSQL
/// fails with a `routine_store` error carrying the SQL message. It should be `invalid_argument` naming
/// `limit` on both.
#[tokio::test]
async fn a_negative_runs_limit_is_refused_naming_limit_on_both_stores() {
    for s in session_stores::stores().await {
        let clock = ManualClock::new(T0);
        let routines = open(&s.url, &clock).await;
        let got = routines.runs(None, -1).await;
        match got {
            Err(e) => assert_eq!(e.field(), Some("limit"), "HOLE ({}): {} {e}", s.name, e.code()),
            Ok(v) => panic!(
                "HOLE ({}): runs(None, -1) was accepted ({} records): SQLite reads LIMIT -1 as no limit",
                s.name,
                v.len()
            ),
        }
    }
}

/// HOLE (severity: low). `poll_interval(0)` is accepted (the lease is checked, the poll is not), and
/// `run_forever` then ticks in a loop with `sleep(0)`: one runner hammering a shared PostgreSQL with
/// claims as fast as it can. From Python `Runner(..., poll=0)` reaches it. It should be refused (a
/// typed error naming `poll`) or floored.
#[tokio::test]
async fn a_zero_poll_interval_is_refused_naming_poll() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("r.db").display());
    let clock = ManualClock::new(T0);
    let routines = open(&url, &clock).await;
    let sessions = Sessions::open(&url).await.unwrap();
    let built = Runner::builder(routines, sessions).poll_interval(Duration::ZERO).build();
    match built {
        Ok(_) => panic!("HOLE: a runner polling every 0 s was built"),
        Err(e) => assert_eq!(e.field(), Some("poll"), "{e}"),
    }
}

/// HOLE (severity: medium — the whole tick fails, so every other routine due in it is starved; the
/// trigger is narrow in real time, common under an injected clock). A schedule change reschedules an
/// interval routine from "now" (its first slot is now itself). Made in the millisecond its last slot
/// ran, the new chain starts on that same slot; the claim then hits the unique slot key, and the
/// error fails the claim transaction of the whole batch: `tick` returns `routine_store` "UNIQUE
/// constraint failed: ambit_routine_runs.slot_key", and another routine due in the same tick does not
/// start. It recovers only when the routine's next slot supersedes the stale one (here a tick one
/// interval later: for a daily routine, a day of failed ticks). Seen on SQLite and PostgreSQL.
/// No slot ran twice (the unique key held). A slot already run must be skipped, not fail the batch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reschedule_onto_a_slot_already_run_skips_it_and_the_tick_goes_on() {
    let mut holes = Vec::new();
    for s in session_stores::stores().await {
        let clock = ManualClock::new(T0);
        let routines = open(&s.url, &clock).await;
        let sessions = Sessions::open(&s.url).await.unwrap();
        let r = routines.create(RoutineSpec::every("tester", "report=success", 60), "alice").await.unwrap();
        let runner = runner_with(&routines, &sessions, &clock, Duration::from_secs(300)).unwrap();
        assert_eq!(runner.tick(T0).await.unwrap().started.len(), 1, "{}", s.name);
        runner.wait_idle().await;
        let patch = ambit::routine::RoutinePatch { interval_seconds: Some(120), ..Default::default() };
        let moved = routines.update(&r.id, &patch, "bob").await.unwrap();
        let other = routines.create(RoutineSpec::every("tester", "report=success", 60), "alice").await.unwrap();
        eprintln!("{}: rescheduled next_slot {:?} (T0 {T0})", s.name, moved.next_slot);
        let tick = runner.tick(T0).await;
        runner.wait_idle().await;
        let runs = routines.runs(Some(&r.id), 10).await.unwrap();
        let others = routines.runs(Some(&other.id), 10).await.unwrap();
        eprintln!(
            "{}: tick {:?}; runs of r {}, of the other {}",
            s.name,
            tick.as_ref().map(|t| t.started.len()),
            runs.len(),
            others.len()
        );
        // The blocked routine is not stuck either: its next slot runs.
        clock.set(T0 + 120_000);
        let later = runner.tick(T0 + 120_000).await;
        runner.wait_idle().await;
        let runs_later = routines.runs(Some(&r.id), 10).await.unwrap();
        let others_later = routines.runs(Some(&other.id), 10).await.unwrap();
        eprintln!(
            "{}: a tick later: {:?}; runs of r {}, of the other {}",
            s.name,
            later.as_ref().map(|t| t.started.len()),
            runs_later.len(),
            others_later.len()
        );
        assert_eq!(runs.iter().filter(|x| x.slot_at == Some(T0)).count(), 1, "{}: slot T0 ran twice", s.name);
        if let Err(err) = &tick {
            holes.push(format!("{}: the tick failed: {err}", s.name));
        }
        if others.len() != 1 {
            holes.push(format!("{}: the other routine due in the same tick did not start", s.name));
        }
        if later.is_err() || runs_later.len() != 2 {
            holes.push(format!("{}: a tick later still stuck: {:?}, {} runs", s.name, later.err(), runs_later.len()));
        }
    }
    assert!(holes.is_empty(), "HOLE: {holes:#?}");
}
