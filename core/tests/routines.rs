//! Routines on both stores (SPEC §13), through the public API: definitions and their revisions, every
//! validation error by field, and the runner in one process (runs as session runs, outcomes, one run at
//! a time, catch-up, parked runs holding no slot, the agent tools read-only). The multi-process
//! guarantees are in routines_multiprocess.rs.

#[path = "support/routine_agent.rs"]
mod routine_agent;
#[path = "support/session_stores.rs"]
mod session_stores;

use std::sync::Arc;
use std::time::Duration;

use ambit::ledger::{Clock, ManualClock};
use ambit::routine::{
    ActiveWindow, OutcomeStatus, RoutineError, RoutineEvent, RoutineOptions, RoutinePatch, RoutineSpec, Routines,
    RunState, Runner,
};
use ambit::session::Sessions;
use serde_json::json;

const T0: i64 = 1_780_000_000_000; // 2026-05-28, a Thursday

async fn open(url: &str, clock: &ManualClock) -> (Routines, Sessions) {
    let options = RoutineOptions { clock: Arc::new(clock.clone()), max_connections: 4 };
    let routines = Routines::open_with(url, options).await.unwrap();
    let sessions = Sessions::open(url).await.unwrap();
    (routines, sessions)
}

fn runner(routines: &Routines, sessions: &Sessions, clock: &ManualClock) -> Runner {
    let clock: Arc<dyn Clock> = Arc::new(clock.clone());
    Runner::builder(routines.clone(), sessions.clone())
        .agent("tester", move |ctx| routine_agent::agent(ctx, clock.clone()))
        .lease(Duration::from_secs(300))
        .build()
        .unwrap()
}

#[tokio::test]
async fn definitions_have_revisions_credited_to_actors_and_updates_reschedule_only_timing() {
    for s in session_stores::stores().await {
        let clock = ManualClock::new(T0);
        let (routines, _) = open(&s.url, &clock).await;
        let mut spec = RoutineSpec::every("tester", "report=success", 1800);
        spec.title = Some("Chase POs".into());
        spec.daily_cap = Some(10);
        spec.model = Some("gpt-small".into());
        let r = routines.create(spec, "alice").await.unwrap();
        assert_eq!((r.revision, r.next_slot, r.spec.parallel(), r.spec.catch_up), (1, Some(T0), 1, 1), "{}", s.name);

        // Rewording leaves the next slot where it was.
        clock.set(T0 + 60_000);
        let patch = RoutinePatch { instructions: Some("report=nothing_to_do".into()), ..RoutinePatch::default() };
        let r2 = routines.update(&r.id, &patch, "bob").await.unwrap();
        assert_eq!((r2.revision, r2.next_slot), (2, Some(T0)), "{}", s.name);
        // null clears the title, a limit, the model; only the fields passed change.
        let r3 = routines
            .update_json(&r.id, &json!({"title": null, "daily_cap": null, "model": null}), "bob")
            .await
            .unwrap();
        assert_eq!((r3.spec.title.clone(), r3.spec.daily_cap, r3.spec.model.clone()), (None, None, None));
        assert_eq!(r3.spec.instructions, "report=nothing_to_do");
        assert_eq!(r3.next_slot, Some(T0));
        // A schedule change reschedules from now.
        clock.set(T0 + 120_000);
        let r4 = routines.update_json(&r.id, &json!({"interval_seconds": 600}), "carol").await.unwrap();
        assert_eq!(r4.next_slot, Some(T0 + 120_000), "{}", s.name);
        // Pausing clears the next slot; resuming reschedules.
        let r5 = routines.update_json(&r.id, &json!({"enabled": false}), "carol").await.unwrap();
        assert_eq!(r5.next_slot, None);
        clock.set(T0 + 180_000);
        let r6 = routines.update_json(&r.id, &json!({"enabled": true}), "carol").await.unwrap();
        assert_eq!(r6.next_slot, Some(T0 + 180_000));
        // A window change reschedules: outside the window, to when it opens.
        let window = json!({"weekdays": ["sat"], "start": "10:00", "end": "11:00", "timezone": "UTC"});
        let r7 = routines.update_json(&r.id, &json!({"active_window": window}), "dave").await.unwrap();
        assert_eq!(r7.next_slot, Some(1_780_135_200_000), "Saturday 2026-05-30 10:00 UTC");
        // A cron schedule replaces the interval.
        let r8 = routines
            .update_json(
                &r.id,
                &json!({"cron_expression": "0 9 * * 1-5", "timezone": "Europe/Paris", "active_window": null}),
                "dave",
            )
            .await
            .unwrap();
        assert_eq!((r8.spec.interval_seconds, r8.spec.cron_expression.as_deref()), (None, Some("0 9 * * 1-5")));
        assert_eq!(r8.next_slot, Some(1_780_038_000_000), "Friday 2026-05-29 09:00 Paris");

        // The agent never changes.
        let e = routines.update_json(&r.id, &json!({"agent": "other"}), "dave").await.unwrap_err();
        assert_eq!(e.field(), Some("agent"), "{e}");

        let got = routines.get(&r.id).await.unwrap();
        let actors: Vec<(i64, &str)> = got.revisions.iter().map(|v| (v.revision, v.actor.as_str())).collect();
        assert_eq!(
            actors,
            [(1, "alice"), (2, "bob"), (3, "bob"), (4, "carol"), (5, "carol"), (6, "carol"), (7, "dave"), (8, "dave")]
        );
        assert_eq!(got.revisions[0].definition.instructions, "report=success", "what it was told is recoverable");
        assert_eq!(got.routine.revision, 8);

        let other = routines.create(RoutineSpec::every("someone-else", "x", 60), "alice").await.unwrap();
        assert_eq!(routines.list(Some("tester")).await.unwrap().len(), 1);
        assert_eq!(routines.list(None).await.unwrap().len(), 2);

        // Delete: the routine goes, its revisions stay (with the deletion credited).
        routines.delete(&r.id, "erin").await.unwrap();
        assert!(matches!(routines.get(&r.id).await, Err(RoutineError::NotFound(_))));
        let revisions = routines.revisions(&r.id).await.unwrap();
        assert_eq!(revisions.last().map(|v| (v.change.as_str(), v.actor.as_str())), Some(("delete", "erin")));
        assert!(matches!(routines.delete(&r.id, "erin").await, Err(RoutineError::NotFound(_))));
        assert!(matches!(routines.update(&r.id, &RoutinePatch::default(), "x").await, Err(RoutineError::NotFound(_))));
        // An id that existed is not reused.
        let e = routines.create_with_id(&r.id, RoutineSpec::every("tester", "x", 60), "alice").await.unwrap_err();
        assert_eq!(e.field(), Some("id"));
        routines.delete(&other.id, "alice").await.unwrap();
    }
}

#[tokio::test]
async fn every_validation_error_names_its_field() {
    let clock = ManualClock::new(T0);
    let stores = session_stores::stores().await;
    let (routines, _) = open(&stores[0].url, &clock).await;
    let base = json!({"agent": "tester", "instructions": "go", "interval_seconds": 60});
    let with = |extra: serde_json::Value| {
        let mut v = base.clone();
        for (k, x) in extra.as_object().unwrap() {
            if x.is_null() && k == "interval_seconds" {
                v.as_object_mut().unwrap().remove(k);
            } else {
                v[k] = x.clone();
            }
        }
        v
    };
    let window = |start: &str, end: &str, tz: &str, days: serde_json::Value| json!({"weekdays": days, "start": start, "end": end, "timezone": tz});
    let cases = [
        (with(json!({"cron_expression": "61 * * * *", "interval_seconds": null})), "cron_expression"),
        (with(json!({"cron_expression": "0 9 * *", "interval_seconds": null})), "cron_expression"),
        (
            with(json!({"cron_expression": "0 9 * * *", "timezone": "Mars/Olympus", "interval_seconds": null})),
            "timezone",
        ),
        (with(json!({"interval_seconds": 0})), "interval_seconds"),
        (with(json!({"interval_seconds": -5})), "interval_seconds"),
        (with(json!({"interval_seconds": "60"})), "interval_seconds"),
        (with(json!({"cron_expression": "0 9 * * *"})), "interval_seconds"),
        (with(json!({"interval_seconds": null})), "interval_seconds"),
        (with(json!({"timezone": "UTC"})), "timezone"),
        (with(json!({"active_window": window("17:00", "09:00", "UTC", json!(["mon"]))})), "active_window"),
        (with(json!({"active_window": window("09:00", "09:00", "UTC", json!(["mon"]))})), "active_window"),
        (with(json!({"active_window": window("09:00", "17:00", "Nowhere/Land", json!(["mon"]))})), "active_window"),
        (with(json!({"active_window": window("09:00", "17:00", "UTC", json!(["funday"]))})), "active_window"),
        (with(json!({"active_window": window("09:00", "17:00", "UTC", json!([]))})), "active_window"),
        (with(json!({"active_window": window("9am", "17:00", "UTC", json!(["mon"]))})), "active_window"),
        (with(json!({"daily_cap": -1})), "daily_cap"),
        (with(json!({"parallel_limit": 0})), "parallel_limit"),
        (with(json!({"catch_up": 0})), "catch_up"),
        (with(json!({"instructions": "  "})), "instructions"),
        (with(json!({"agent": ""})), "agent"),
        (with(json!({"agent": "a\nb"})), "agent"),
        (with(json!({"model": ""})), "model"),
        (with(json!({"enabled": "yes"})), "enabled"),
        (with(json!({"colour": "red"})), "colour"),
        (json!({"instructions": "go", "interval_seconds": 60}), "agent"),
        (json!("not an object"), "routine"),
    ];
    for (definition, field) in cases {
        let e = routines.create_json(&definition, "alice").await.unwrap_err();
        assert_eq!(e.field(), Some(field), "{definition}: {e}");
        assert_eq!(e.code(), "invalid_argument");
    }
    assert!(routines.list(None).await.unwrap().is_empty(), "nothing was written");
    // An update is validated the same way, and writes nothing when refused.
    let r = routines.create_json(&base, "alice").await.unwrap();
    for (patch, field) in [
        (json!({"cron_expression": "* * 31 2 *"}), "cron_expression"),
        (json!({"daily_cap": -3}), "daily_cap"),
        (json!({"timezone": "Europe/Paris"}), "timezone"),
        (json!({"instructions": null}), "instructions"),
        (json!({"interval_seconds": 10, "cron_expression": "* * * * *"}), "interval_seconds"),
        (json!({"nope": 1}), "nope"),
    ] {
        let e = routines.update_json(&r.id, &patch, "bob").await.unwrap_err();
        assert_eq!(e.field(), Some(field), "{patch}: {e}");
    }
    assert_eq!(routines.get(&r.id).await.unwrap().revisions.len(), 1);
    let e = routines.create_json(&base, "").await.unwrap_err();
    assert_eq!(e.field(), Some("actor"));
}

fn window_spec() -> ActiveWindow {
    ActiveWindow { weekdays: vec!["sat".into()], start: "10:00".into(), end: "11:00".into(), timezone: "UTC".into() }
}

#[tokio::test]
async fn a_tick_starts_due_runs_as_session_runs_with_their_records_and_events() {
    for s in session_stores::stores().await {
        let clock = ManualClock::new(T0);
        let (routines, sessions) = open(&s.url, &clock).await;
        let reports = routines.create(RoutineSpec::every("tester", "report=nothing_to_do", 60), "alice").await.unwrap();
        let silent = routines.create(RoutineSpec::every("tester", "no report here", 60), "alice").await.unwrap();
        let windowed =
            RoutineSpec { active_window: Some(window_spec()), ..RoutineSpec::every("tester", "report=success", 60) };
        let windowed = routines.create(windowed, "alice").await.unwrap();
        let foreign = routines.create(RoutineSpec::every("not-mine", "report=success", 60), "alice").await.unwrap();
        let runner = runner(&routines, &sessions, &clock);
        let mut events = runner.subscribe();

        // A new interval routine fires on the next tick; one outside its window does not.
        let tick = runner.tick(T0).await.unwrap();
        assert_eq!(tick.started.len(), 2, "{}", s.name);
        runner.wait_idle().await;
        let run = &routines.runs(Some(&reports.id), 10).await.unwrap()[0];
        assert_eq!(
            (run.state, run.outcome, run.slot_at, run.revision),
            (RunState::Finished, Some(OutcomeStatus::NothingToDo), Some(T0), 1)
        );
        assert_eq!(run.summary.as_deref(), Some("The run ended with nothing_to_do."));
        assert_eq!((run.tool_calls, run.input_tokens, run.output_tokens), (Some(1), 200, 20));
        assert_eq!((run.started_at, run.ended_at), (T0, Some(T0)));
        // The run is an ordinary session run: its conversation is in the session store.
        let entries = sessions.entries(&run.session_id).await.unwrap();
        assert!(entries.len() >= 3, "{}: {entries:?}", s.name);
        let quiet = &routines.runs(Some(&silent.id), 10).await.unwrap()[0];
        assert_eq!(quiet.outcome, Some(OutcomeStatus::Unknown), "a run that never reports is unknown");
        assert!(routines.runs(Some(&windowed.id), 10).await.unwrap().is_empty());
        assert!(routines.runs(Some(&foreign.id), 10).await.unwrap().is_empty(), "no factory: left to other runners");

        // The same instant again: nothing new; a minute later: the next slots.
        assert!(runner.tick(T0).await.unwrap().started.is_empty());
        clock.set(T0 + 60_000);
        assert_eq!(runner.tick(T0 + 60_000).await.unwrap().started.len(), 2);
        runner.wait_idle().await;

        let mut kinds = Vec::new();
        while let Ok(e) = events.try_recv() {
            kinds.push(match e {
                RoutineEvent::RunStarted { .. } => "started",
                RoutineEvent::RunFinished { .. } => "finished",
                RoutineEvent::RunParked { .. } => "parked",
                RoutineEvent::RunLost { .. } => "lost",
                RoutineEvent::SlotSkipped { .. } => "skipped",
                RoutineEvent::DrainStarted { .. } => "drain started",
                RoutineEvent::DrainStopped { .. } => "drain stopped",
            });
        }
        assert_eq!(kinds.iter().filter(|k| **k == "started").count(), 4, "{kinds:?}");
        assert_eq!(kinds.iter().filter(|k| **k == "finished").count(), 4, "{kinds:?}");
    }
}

#[tokio::test]
async fn one_run_at_a_time_then_one_catch_up_run_for_the_slots_missed() {
    for s in session_stores::stores().await {
        let clock = ManualClock::new(T0);
        let (routines, sessions) = open(&s.url, &clock).await;
        // Each run works ten minutes of the clock; slots every minute.
        let r = routines.create(RoutineSpec::every("tester", "work=600000 report=success", 60), "alice").await.unwrap();
        let runner = runner(&routines, &sessions, &clock);
        assert_eq!(runner.tick(T0).await.unwrap().started.len(), 1);
        for m in 1..10 {
            clock.set(T0 + m * 60_000);
            let tick = runner.tick(T0 + m * 60_000).await.unwrap();
            assert!(tick.started.is_empty(), "{}: minute {m}: the routine's run is still in progress", s.name);
        }
        clock.set(T0 + 10 * 60_000);
        runner.wait_idle().await;
        // Ten slots came due meanwhile: one runs (catch-up 1), nine are skipped as missed.
        let tick = runner.tick(T0 + 10 * 60_000).await.unwrap();
        assert_eq!(tick.started.len(), 1);
        assert_eq!(tick.started[0].slot_at, Some(T0 + 10 * 60_000));
        assert_eq!(tick.skipped.len(), 1);
        assert_eq!(
            (tick.skipped[0].first_slot, tick.skipped[0].last_slot, tick.skipped[0].slots),
            (T0 + 60_000, T0 + 9 * 60_000, 9)
        );
        assert_eq!(tick.skipped[0].reason, "missed");
        clock.set(T0 + 20 * 60_000);
        runner.wait_idle().await;
        assert_eq!(routines.skipped(Some(&r.id)).await.unwrap().len(), 1);
        let runs = routines.runs(Some(&r.id), 10).await.unwrap();
        assert_eq!(runs.len(), 2);
        assert!(runs.iter().all(|x| x.outcome == Some(OutcomeStatus::Success)));
    }
}

#[tokio::test]
async fn a_parked_run_holds_no_slot() {
    for s in session_stores::stores().await {
        let clock = ManualClock::new(T0);
        let (routines, sessions) = open(&s.url, &clock).await;
        let r = routines.create(RoutineSpec::every("tester", "park report=success", 60), "alice").await.unwrap();
        let runner = runner(&routines, &sessions, &clock);
        let mut events = runner.subscribe();
        runner.tick(T0).await.unwrap();
        runner.wait_idle().await;
        let first = &routines.runs(Some(&r.id), 10).await.unwrap()[0];
        assert_eq!(first.state, RunState::Parked, "{}", s.name);
        assert!(sessions.pending(&first.session_id).await.unwrap().is_some(), "the session waits on a person");
        clock.set(T0 + 60_000);
        let tick = runner.tick(T0 + 60_000).await.unwrap();
        assert_eq!(tick.started.len(), 1, "{}: the next slot runs while the first run waits", s.name);
        runner.wait_idle().await;
        let mut parked = 0;
        while let Ok(e) = events.try_recv() {
            parked += matches!(e, RoutineEvent::RunParked { .. }) as usize;
        }
        assert_eq!(parked, 2);
    }
}

#[tokio::test]
async fn the_agent_reads_its_routines_and_outcomes_and_cannot_report_a_bad_outcome() {
    for s in session_stores::stores().await {
        let clock = ManualClock::new(T0);
        let (routines, sessions) = open(&s.url, &clock).await;
        let done = routines.create(RoutineSpec::every("tester", "report=success", 3600), "alice").await.unwrap();
        let runner = runner(&routines, &sessions, &clock);
        runner.tick(T0).await.unwrap();
        runner.wait_idle().await;
        let asks = routines
            .create(
                RoutineSpec::every("tester", "ask=list_my_routines ask=list_my_outcomes report=bogus", 3600),
                "alice",
            )
            .await
            .unwrap();
        clock.set(T0 + 1000);
        runner.tick(T0 + 1000).await.unwrap();
        runner.wait_idle().await;
        let run = &routines.runs(Some(&asks.id), 1).await.unwrap()[0];
        let entries = sessions.entries(&run.session_id).await.unwrap();
        let text = serde_json::to_string(&entries).unwrap();
        assert!(text.contains(&done.id) && text.contains("The run ended with success."), "{}: {text}", s.name);
        assert!(text.contains("argument 'status' must be one of"), "a bad status is refused by name: {text}");
        assert_eq!(run.outcome, Some(OutcomeStatus::Unknown));
        // The tools offered are read-only: no tool of a run writes a definition.
        let ctx_tools = ambit::routine::tools::specs();
        let names: Vec<&str> = ctx_tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["report_outcome", "list_my_routines", "list_my_outcomes"]);
        assert_eq!(routines.get(&done.id).await.unwrap().routine.revision, 1);
    }
}

#[tokio::test]
async fn deleting_a_routine_lets_its_run_in_progress_finish_and_then_drops_its_history() {
    for s in session_stores::stores().await {
        let clock = ManualClock::new(T0);
        let (routines, sessions) = open(&s.url, &clock).await;
        let r = routines.create(RoutineSpec::every("tester", "work=1000 report=success", 60), "alice").await.unwrap();
        let runner = runner(&routines, &sessions, &clock);
        let started = runner.tick(T0).await.unwrap().started;
        routines.delete(&r.id, "alice").await.unwrap();
        assert_eq!(routines.run(&started[0].id).await.unwrap().map(|x| x.state), Some(RunState::Running));
        clock.set(T0 + 1000);
        runner.wait_idle().await;
        assert_eq!(routines.run(&started[0].id).await.unwrap(), None, "{}", s.name);
        let entries = sessions.entries(&started[0].session_id).await.unwrap();
        assert!(!entries.is_empty(), "the run finished in its session");
        assert!(runner.tick(T0 + 120_000).await.unwrap().started.is_empty());
    }
}

#[tokio::test]
async fn drain_runs_are_capped_by_the_parallel_limit_and_the_daily_cap_and_parked_runs_use_no_slot() {
    for s in session_stores::stores().await {
        let clock = ManualClock::new(T0);
        let (routines, _) = open(&s.url, &clock).await;
        // Its window (Saturdays) is closed at T0, a Thursday: a drain is not held by it.
        let spec = RoutineSpec {
            parallel_limit: Some(3),
            daily_cap: Some(5),
            active_window: Some(window_spec()),
            ..RoutineSpec::every("tester", "x", 3600)
        };
        let r = routines.create(spec, "alice").await.unwrap();
        let store = routines.store();
        let first = store.claim_drain(&r.id, 10, "me", T0 + 60_000, T0).await.unwrap();
        assert_eq!(first.len(), 3, "{}: the parallel limit", s.name);
        assert!(first.iter().all(|(run, _)| run.kind == "drain" && run.slot_at.is_none()));
        assert!(store.claim_drain(&r.id, 10, "me", T0 + 60_000, T0).await.unwrap().is_empty(), "three in progress");
        // A parked run does not use a parallel slot.
        let usage = ambit::routine::store::RunUsage::default();
        store.finish(&first[0].0.id, "me", RunState::Parked, &usage, T0).await.unwrap();
        assert_eq!(store.claim_drain(&r.id, 10, "me", T0 + 60_000, T0).await.unwrap().len(), 1);
        // Five started today: the daily cap allows no more, whatever is free.
        for (run, _) in &first[1..] {
            store.finish(&run.id, "me", RunState::Finished, &usage, T0).await.unwrap();
        }
        assert_eq!(store.claim_drain(&r.id, 10, "me", T0 + 60_000, T0).await.unwrap().len(), 1, "{}", s.name);
        assert!(store.claim_drain(&r.id, 10, "me", T0 + 60_000, T0).await.unwrap().is_empty(), "the daily cap");
        // The next day, the cap starts again (two still in progress of the parallel three).
        let next_day = T0 + 24 * 3_600_000;
        assert_eq!(store.claim_drain(&r.id, 10, "me", next_day + 60_000, next_day).await.unwrap().len(), 1);
    }
}

#[tokio::test]
async fn a_backlog_report_starts_a_drain_that_works_the_queue_and_stops_by_the_ledger_rules() {
    for s in session_stores::stores().await {
        let clock = ManualClock::new(T0);
        let (routines, sessions) = open(&s.url, &clock).await;
        let ledger_options = ambit::ledger::LedgerOptions { clock: Arc::new(clock.clone()), ..Default::default() };
        let ledger = ambit::ledger::Ledger::open_with(&s.url, ledger_options).await.unwrap();
        let mut spec = RoutineSpec::every("tester", "claim=2 backlog=10/2 report=success", 3600);
        spec.parallel_limit = Some(3);
        let r = routines.create(spec, "alice").await.unwrap();
        let clock_arc: Arc<dyn Clock> = Arc::new(clock.clone());
        let runner = Runner::builder(routines.clone(), sessions.clone())
            .agent("tester", move |ctx| routine_agent::agent(ctx, clock_arc.clone()))
            .ledger(ledger.clone())
            .build()
            .unwrap();
        let mut events = runner.subscribe();
        assert_eq!(runner.tick(T0).await.unwrap().started.len(), 1);
        runner.wait_idle().await;
        let runs = routines.runs(Some(&r.id), 100).await.unwrap();
        let drains = runs.iter().filter(|x| x.kind == "drain").count();
        assert!(drains >= 2, "{}: the report started extra runs: {runs:?}", s.name);
        assert!(runs.len() <= 12, "{}: the drain stopped: {}", s.name, runs.len());
        assert!(runs.iter().all(|x| x.state == RunState::Finished));
        // Every subject of the queue was claimed once, across the runs.
        let entries = ledger
            .list(&ambit::ledger::ListQuery {
                scope: Some(r.id.clone()),
                state: ambit::ledger::ListFilter::All,
                routine_id: None,
            })
            .await
            .unwrap();
        assert_eq!(entries.len(), 10, "{}", s.name);
        let (mut started, mut stopped) = (0, Vec::new());
        while let Ok(e) = events.try_recv() {
            match e {
                RoutineEvent::DrainStarted { runs, .. } => started += runs,
                RoutineEvent::DrainStopped { reason, .. } => stopped.push(reason),
                _ => {}
            }
        }
        assert_eq!(started as usize, drains);
        assert!(
            stopped.iter().any(|r| r == "nothing_workable" || r == "queue_empty"),
            "{}: the drain stopped by a ledger rule: {stopped:?}",
            s.name
        );
    }
}

#[tokio::test]
async fn a_busy_runner_claims_no_more_than_its_room_and_leaves_the_rest_due() {
    let stores = session_stores::stores().await;
    let clock = ManualClock::new(T0);
    let (routines, sessions) = open(&stores[0].url, &clock).await;
    for _ in 0..3 {
        routines.create(RoutineSpec::every("tester", "work=60000 report=success", 3600), "alice").await.unwrap();
    }
    let agent_clock: Arc<dyn Clock> = Arc::new(clock.clone());
    let runner = Runner::builder(routines.clone(), sessions)
        .agent("tester", move |ctx| routine_agent::agent(ctx, agent_clock.clone()))
        .max_in_flight(2)
        .build()
        .unwrap();
    assert_eq!(runner.tick(T0).await.unwrap().started.len(), 2);
    assert!(runner.tick(T0).await.unwrap().started.is_empty(), "no room: the third stays due for another runner");
    clock.set(T0 + 60_000);
    runner.wait_idle().await;
    assert_eq!(runner.tick(T0 + 60_000).await.unwrap().started.len(), 1);
    clock.set(T0 + 120_000);
    runner.wait_idle().await;
    assert_eq!(routines.runs(None, 10).await.unwrap().len(), 3);
}

/// The model of the person's side of a resume: it answers at once.
struct Answers;

#[async_trait::async_trait]
impl ambit::Model for Answers {
    fn name(&self) -> &str {
        "answers"
    }
    async fn respond(&self, _: &ambit::model::ModelRequest) -> Result<ambit::model::ModelResponse, ambit::ModelError> {
        Ok(ambit::model::ModelResponse {
            id: "r".into(),
            text: Some("Went ahead.".into()),
            tool_calls: vec![],
            stop: ambit::model::StopReason::End,
            usage: ambit::model::Usage::default(),
        })
    }
}

#[tokio::test]
async fn a_parked_run_resumed_through_sessions_is_finished_by_the_next_tick() {
    for s in session_stores::stores().await {
        let clock = ManualClock::new(T0);
        let (routines, sessions) = open(&s.url, &clock).await;
        let r = routines.create(RoutineSpec::every("tester", "park report=success", 3600), "alice").await.unwrap();
        let runner = runner(&routines, &sessions, &clock);
        runner.tick(T0).await.unwrap();
        runner.wait_idle().await;
        let parked = routines.runs(Some(&r.id), 10).await.unwrap().remove(0);
        assert_eq!(parked.state, RunState::Parked, "{}", s.name);
        // The control: while the session waits on the person, a tick leaves the record parked.
        let tick = runner.tick(T0 + 1).await.unwrap();
        assert!(tick.resumed.is_empty(), "{}: a run still waiting is not finished", s.name);
        assert_eq!(routines.run(&parked.id).await.unwrap().map(|x| x.state), Some(RunState::Parked));

        // The person answers through the session API, from another store handle (another process).
        let other = Sessions::open(&s.url).await.unwrap();
        let person = ambit::Agent::builder()
            .model(Answers)
            .tools(ambit::tools::builtin::by_name("escalate_to_human"))
            .build()
            .unwrap();
        let resumed = other.resume(&person, &parked.session_id, ambit::ApprovalDecision::Approve).await.unwrap();
        assert_eq!(resumed.output, "Went ahead.");
        let mut events = runner.subscribe();
        // A parked run is looked at once a second at most: a second on, it is seen ended.
        clock.set(T0 + 2_000);
        let tick = runner.tick(T0 + 2_000).await.unwrap();
        assert_eq!(tick.resumed.iter().map(|x| x.id.as_str()).collect::<Vec<_>>(), [parked.id.as_str()], "{}", s.name);
        let record = routines.run(&parked.id).await.unwrap().unwrap();
        assert_eq!(
            (record.state, record.outcome, record.ended_at),
            (RunState::Finished, Some(OutcomeStatus::Unknown), Some(T0 + 2_000))
        );
        assert!(matches!(events.try_recv(), Ok(RoutineEvent::RunFinished { run }) if run.id == parked.id));
        // Once: the next tick has nothing more to say about it.
        assert!(runner.tick(T0 + 4_000).await.unwrap().resumed.is_empty());
    }
}

#[tokio::test]
async fn slots_outside_the_window_and_while_disabled_are_readable_skips() {
    for s in session_stores::stores().await {
        let clock = ManualClock::new(T0);
        let (routines, sessions) = open(&s.url, &clock).await;
        // Every half hour, Saturdays 10:00-10:45 UTC: slots at 10:00 and 10:30, then next Saturday.
        let window = ActiveWindow {
            weekdays: vec!["sat".into()],
            start: "10:00".into(),
            end: "10:45".into(),
            timezone: "UTC".into(),
        };
        let spec = RoutineSpec { active_window: Some(window), ..RoutineSpec::every("tester", "report=success", 1800) };
        let r = routines.create(spec, "alice").await.unwrap();
        const SAT_10: i64 = 1_780_135_200_000;
        assert_eq!(r.next_slot, Some(SAT_10));
        let runner = runner(&routines, &sessions, &clock);
        let mut events = runner.subscribe();
        clock.set(SAT_10);
        let first = runner.tick(SAT_10).await.unwrap();
        assert_eq!((first.started.len(), first.skipped.len()), (1, 0), "{}: 10:00 runs; no gap yet", s.name);
        runner.wait_idle().await;
        clock.set(SAT_10 + 1_800_000);
        let second = runner.tick(SAT_10 + 1_800_000).await.unwrap();
        runner.wait_idle().await;
        assert_eq!(second.started.len(), 1, "{}", s.name);
        // Claiming 10:30 moves the next slot to next Saturday: the half hours between are the window's.
        let week = 7 * 24 * 3_600_000;
        assert_eq!(routines.get(&r.id).await.unwrap().routine.next_slot, Some(SAT_10 + week));
        assert_eq!(second.skipped.len(), 1, "{}: {:?}", s.name, second.skipped);
        let k = &second.skipped[0];
        assert_eq!(
            (k.reason.as_str(), k.first_slot, k.last_slot, k.slots),
            ("window", SAT_10 + 3_600_000, SAT_10 + week - 1_800_000, 7 * 48 - 2),
            "{}",
            s.name
        );
        let mut skipped_events = 0;
        while let Ok(e) = events.try_recv() {
            if let RoutineEvent::SlotSkipped { skipped } = e {
                assert_eq!(skipped.reason, "window");
                skipped_events += 1;
            }
        }
        assert_eq!(skipped_events, 1, "{}: the host hears of it", s.name);

        // Disabled for five minutes: the slots it would have had are a `disabled` skip once it is back.
        let every_minute = routines.create(RoutineSpec::every("tester", "report=success", 60), "alice").await.unwrap();
        let paused_at = clock.now_ms();
        routines.update_json(&every_minute.id, &json!({"enabled": false}), "bob").await.unwrap();
        clock.set(paused_at + 5 * 60_000 - 1);
        routines.update_json(&every_minute.id, &json!({"title": "reworded while paused"}), "bob").await.unwrap();
        assert!(routines.skipped(Some(&every_minute.id)).await.unwrap().is_empty(), "{}: nothing yet", s.name);
        routines.update_json(&every_minute.id, &json!({"enabled": true}), "carol").await.unwrap();
        let skips = routines.skipped(Some(&every_minute.id)).await.unwrap();
        assert_eq!(skips.len(), 1, "{}", s.name);
        assert_eq!(
            (skips[0].reason.as_str(), skips[0].first_slot, skips[0].slots),
            ("disabled", paused_at, 5),
            "{}: counted from the pause, not from the rewording",
            s.name
        );
    }
}
