//! Attacks on a routine run's lease (SPEC §13: never two runs of one routine at once, no slot run
//! twice), on both stores: a runner on a machine whose clock is off, and a runner paused past its lease.

use std::sync::Arc;
use std::time::Duration;

use ambit::ledger::{Clock, ManualClock, SystemClock};
use ambit::routine::{RoutineOptions, RoutineSpec, Routines, RunState, Runner};
use ambit::session::{Item, Sessions};

#[path = "support/routine_agent.rs"]
mod routine_agent;
#[path = "support/session_stores.rs"]
mod session_stores;

const T0: i64 = 1_780_000_000_000; // 2026-05-28, a Thursday

/// The wall clock of a machine whose clock runs `ahead_ms` ahead of the others' (or behind, negative).
struct OffWallClock {
    ahead_ms: i64,
    wall: bool,
}

impl Clock for OffWallClock {
    fn now_ms(&self) -> i64 {
        SystemClock.now_ms() + self.ahead_ms
    }
    fn is_wall_clock(&self) -> bool {
        self.wall
    }
}

async fn open(url: &str, clock: Arc<dyn Clock>) -> Routines {
    Routines::open_with(url, RoutineOptions { clock, max_connections: 4 }).await.unwrap()
}

fn runner(routines: &Routines, sessions: &Sessions, clock: Arc<dyn Clock>, lease: Duration) -> Runner {
    Runner::builder(routines.clone(), sessions.clone())
        .agent("tester", move |ctx| routine_agent::agent(ctx, clock.clone()))
        .lease(lease)
        .build()
        .unwrap()
}

/// Runner B's machine clock is 70 s fast (past A's 60 s lease). Run by the store's clock, B finds A's
/// live run neither lost nor its routine due again. Control inside: the same 70 s given to B as a clock
/// the host moves (not the wall clock), which the runner takes as the store's time: B marks A's run lost
/// and starts the routine's next slot beside it, so the checks can fail. (The runs are still in flight
/// when the test ends: dropping the runtime under them must not hang, which it did once.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_whose_clock_is_fast_neither_fires_early_nor_finds_a_live_run_lost() {
    for s in session_stores::stores().await {
        for (wall, control) in [(true, false), (false, true)] {
            let a_clock: Arc<dyn Clock> = Arc::new(SystemClock);
            let b_clock: Arc<dyn Clock> = Arc::new(OffWallClock { ahead_ms: 70_000, wall });
            let a_routines = open(&s.url, a_clock.clone()).await;
            let b_routines = open(&s.url, b_clock.clone()).await;
            let sessions = Sessions::open(&s.url).await.unwrap();
            let r = a_routines
                .create(RoutineSpec::every("tester", "work=600000 report=success", 60), "alice")
                .await
                .unwrap();
            let a = runner(&a_routines, &sessions, a_clock, Duration::from_secs(60));
            let b = runner(&b_routines, &sessions, b_clock, Duration::from_secs(60));
            assert_eq!(a.tick_now().await.unwrap().started.len(), 1, "{}", s.name);
            let report = b.tick_now().await.unwrap();
            let (lost, started) = (report.lost.len(), report.started.len());
            eprintln!(
                "{} (B's clock {}): B marked {lost} lost, started {started}",
                s.name,
                if wall { "wall" } else { "moved" }
            );
            if control {
                // (The wall-clock pass's run, still running, is found lost too.)
                assert!(lost >= 1 && started >= 1, "{}: control: the checks see an overlap", s.name);
            } else {
                assert_eq!((lost, started), (0, 0), "{}: a 70 s fast clock overlapped a live run", s.name);
                let runs = a_routines.runs(Some(&r.id), 10).await.unwrap();
                assert!(runs.iter().all(|x| x.state == RunState::Running), "{}: {runs:?}", s.name);
            }
            a_routines.delete(&r.id, "alice").await.unwrap();
        }
    }
}

/// Runner A is paused past its lease (here: another runner judges at a time past it, the heartbeat
/// renewing to A's own time): B marks A's run lost and starts the routine's next slot. When A's heartbeat
/// next runs, it finds its run lost and stops it: A's run does not go on beside B's, and its tool never
/// returns into its session. (Without the check, A's run ran on: `wait_idle` would time out.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_marked_lost_while_its_runner_was_paused_stops() {
    for s in session_stores::stores().await {
        let clock = ManualClock::new(T0);
        let shared: Arc<dyn Clock> = Arc::new(clock.clone());
        let routines = open(&s.url, shared.clone()).await;
        let sessions = Sessions::open(&s.url).await.unwrap();
        let r = routines.create(RoutineSpec::every("tester", "work=600000 report=success", 60), "alice").await.unwrap();
        let a = runner(&routines, &sessions, shared.clone(), Duration::from_millis(300));
        let b = runner(&routines, &sessions, shared.clone(), Duration::from_secs(300));
        let first = a.tick(T0).await.unwrap().started;
        assert_eq!(first.len(), 1, "{}", s.name);
        // Until A's run is inside its work (its `sim_work` call waits on the clock): bounded.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while routine_agent::waiting_for(T0 + 600_000) == 0 {
            assert!(std::time::Instant::now() < deadline, "{}: A's run never reached its work", s.name);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // B judges at T0 + 60 s: A's lease (renewed to T0 + 0.3 s) ran out.
        let report = b.tick(T0 + 60_000).await.unwrap();
        assert_eq!(report.lost.len(), 1, "{}: A's run is lost", s.name);
        assert_eq!(report.started.len(), 1, "{}: B starts the next slot", s.name);
        // A's heartbeat (every 100 ms) finds the run lost and stops it.
        let stopped = tokio::time::timeout(Duration::from_secs(120), a.wait_idle()).await;
        assert!(stopped.is_ok(), "{}: A's lost run went on running", s.name);
        // The work A's run was doing would now return; its session never gets the result.
        clock.set(T0 + 20 * 60_000);
        b.wait_idle().await;
        let entries = sessions.entries(&first[0].session_id).await.unwrap();
        let results = entries
            .iter()
            .filter(|e| matches!(&e.item, Item::Message { message } if serde_json::to_value(message).unwrap()["role"] == "tool"))
            .count();
        assert_eq!(results, 0, "{}: A's run went on after it was lost", s.name);
        let runs = routines.runs(Some(&r.id), 10).await.unwrap();
        let lost = runs.iter().filter(|x| x.state == RunState::Lost).count();
        assert_eq!(lost, 1, "{}: {runs:?}", s.name);
    }
}

/// A runner on the wall clock, ticked at a routine's creation time, starts its first run: the store's
/// clock is read to correct for a machine whose clock is off, and a difference of a few ms (the round
/// trip) is not a skew that makes the slot a few ms early.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wall_clock_runner_ticked_at_the_creation_time_starts_the_first_run() {
    for s in session_stores::stores().await {
        let clock: Arc<dyn Clock> = Arc::new(SystemClock);
        let routines = open(&s.url, clock.clone()).await;
        let sessions = Sessions::open(&s.url).await.unwrap();
        let a = runner(&routines, &sessions, clock, Duration::from_secs(60));
        for i in 0..20 {
            let r = routines.create(RoutineSpec::every("tester", "report=success", 3600), "alice").await.unwrap();
            let started = a.tick(r.created_at).await.unwrap().started;
            assert_eq!(started.len(), 1, "{} ({i}): the first slot did not start", s.name);
            a.wait_idle().await;
        }
    }
}

/// A machine whose clock is 10 min fast creates an interval routine and reschedules another: their next
/// slots are by the store's clock (due now), not 10 min later, so the first run is not delayed by the
/// machine's error. Control inside: the same 10 min given as a clock the host moves (taken as the store's
/// time) puts the slots 10 min ahead, so the check can fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routine_created_on_a_machine_whose_clock_is_fast_is_due_by_the_stores_clock() {
    for s in session_stores::stores().await {
        for wall in [true, false] {
            let clock: Arc<dyn Clock> = Arc::new(OffWallClock { ahead_ms: 600_000, wall });
            let routines = open(&s.url, clock).await;
            let before = SystemClock.now_ms();
            let created = routines.create(RoutineSpec::every("tester", "report=success", 60), "alice").await.unwrap();
            let paused = routines
                .create(RoutineSpec { enabled: false, ..RoutineSpec::every("tester", "report=success", 60) }, "alice")
                .await
                .unwrap();
            let resumed = routines
                .update(
                    &paused.id,
                    &ambit::routine::RoutinePatch { enabled: Some(true), ..Default::default() },
                    "alice",
                )
                .await
                .unwrap();
            let after = SystemClock.now_ms();
            for (what, slot) in [("created", created.next_slot.unwrap()), ("resumed", resumed.next_slot.unwrap())] {
                let ahead = slot - after;
                eprintln!("{} ({}): the {what} routine's next slot is {ahead} ms past the store's now", s.name, wall);
                if wall {
                    assert!(
                        slot >= before - 1_000 && slot <= after + 1_000,
                        "{}: the {what} routine's next slot is {ahead} ms ahead of the store's clock",
                        s.name
                    );
                } else {
                    assert!(ahead >= 599_000, "{}: control: a moved clock's time is the store's ({ahead} ms)", s.name);
                }
            }
        }
    }
}

/// A machine's wall clock that a test can step (an NTP step, a VM's clock set after a pause), and that can
/// also run on by `jump_ms` at every reading (so that reading the store's clock looks too slow to say
/// anything about the skew).
struct SteppedClock {
    offset_ms: std::sync::atomic::AtomicI64,
    jump_ms: i64,
    wall: bool,
}

impl Clock for SteppedClock {
    fn now_ms(&self) -> i64 {
        let offset = self.offset_ms.fetch_add(self.jump_ms, std::sync::atomic::Ordering::SeqCst);
        SystemClock.now_ms() + offset
    }
    fn is_wall_clock(&self) -> bool {
        self.wall
    }
}

/// One live run of a fresh routine by runner A (system clock, 60 s lease), and runner B over the same
/// stores with `b_clock`.
async fn live_run_and_b(url: &str, b_clock: Arc<dyn Clock>) -> (Routines, String, Runner, Runner) {
    let a_clock: Arc<dyn Clock> = Arc::new(SystemClock);
    let a_routines = open(url, a_clock.clone()).await;
    let sessions = Sessions::open(url).await.unwrap();
    let r = a_routines.create(RoutineSpec::every("tester", "work=600000 report=success", 60), "alice").await.unwrap();
    let a = runner(&a_routines, &sessions, a_clock, Duration::from_secs(60));
    assert_eq!(a.tick_now().await.unwrap().started.len(), 1);
    let b_routines = open(url, b_clock.clone()).await;
    let b = runner(&b_routines, &sessions, b_clock, Duration::from_secs(60));
    (a_routines, r.id, a, b)
}

/// Runner B reads the store's clock at most once a second, but a step of its machine's clock between two
/// ticks (here 5 min ahead, right after a reading) is seen at the next tick and read again: B neither finds
/// A's live run lost nor fires its routine early. Control inside: the same step on a clock the host moves
/// (taken as the store's time) makes B mark A's run lost and start the next slot, so the checks can fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_whose_clock_steps_between_ticks_reads_the_stores_clock_again() {
    for s in session_stores::stores().await {
        for wall in [true, false] {
            let b_clock = Arc::new(SteppedClock { offset_ms: 0.into(), jump_ms: 0, wall });
            let (routines, id, _a, b) = live_run_and_b(&s.url, b_clock.clone()).await;
            let first = b.tick_now().await.unwrap();
            assert_eq!((first.lost.len(), first.started.len()), (0, 0), "{}", s.name);
            b_clock.offset_ms.store(300_000, std::sync::atomic::Ordering::SeqCst);
            let report = b.tick_now().await.unwrap();
            let (lost, started) = (report.lost.len(), report.started.len());
            eprintln!("{} ({}): after the step B marked {lost} lost, started {started}", s.name, wall);
            if wall {
                assert_eq!((lost, started), (0, 0), "{}: a stepped clock overlapped a live run", s.name);
                let runs = routines.runs(Some(&id), 10).await.unwrap();
                assert!(runs.iter().all(|x| x.state == RunState::Running), "{}: {runs:?}", s.name);
            } else {
                assert!(lost >= 1 && started >= 1, "{}: control: the checks see an overlap", s.name);
            }
        }
    }
}

/// Runner B's machine is 70 s fast and every reading of the store's clock looks too slow to measure the
/// skew by (B's clock runs on 1.5 s between the readings around it). B has never had a good reading, so
/// its ticks fail, naming the store's clock, and judge nothing: A's live run is not found lost and no slot
/// starts early. Control inside: the same clock as one the host moves (no reading needed) overlaps.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_that_cannot_read_the_stores_clock_judges_no_lease() {
    for s in session_stores::stores().await {
        for wall in [true, false] {
            let b_clock = Arc::new(SteppedClock { offset_ms: 70_000.into(), jump_ms: 1_500, wall });
            let (routines, id, _a, b) = live_run_and_b(&s.url, b_clock).await;
            let tick = b.tick_now().await;
            if wall {
                let err = tick.expect_err("a tick with no reading of the store's clock judged leases");
                assert!(err.to_string().contains("store's clock"), "{}: {err}", s.name);
                let runs = routines.runs(Some(&id), 10).await.unwrap();
                assert!(runs.len() == 1 && runs[0].state == RunState::Running, "{}: {runs:?}", s.name);
            } else {
                let report = tick.unwrap();
                assert!(!report.lost.is_empty() && !report.started.is_empty(), "{}: control: {report:?}", s.name);
            }
        }
    }
}
