//! Routines across processes (SPEC §13): runner processes (tests/support/routine_runner_child.rs) share
//! one store — 4 on PostgreSQL, 2 on one SQLite file — through simulated days of routines (intervals,
//! cron across the New York DST change, windows, daily caps, long runs, parked runs, a 6-hour outage with
//! every runner down), while runners are killed with SIGKILL at random and restarted. By default 20
//! routines over 2 days; `AMBIT_ROUTINES_WEEK=full` (scripts/routines-full.sh) runs 200 over a week. The
//! clock is the test's: each tick hands every runner the same time, so days run in seconds and no check
//! depends on timing; the last tick is taken with the store at rest (see `settle`).
//!
//! The checks, read from the store at the end:
//! - every slot of every routine's chain before its next slot is accounted for exactly once: started by
//!   one run, or skipped (catch-up, daily cap), never both, never twice; and a routine whose next slot is
//!   due at the end has a run in progress holding it;
//! - no two runs of one routine were in progress at once;
//! - every run whose runner was killed is marked `lost` (none is left `running`), and only those;
//! - a parked run held no slot.
//!
//! The negative control runs the same scenario with a deliberately broken slot claim (read the due
//! routines with no lock, write with no unique slot key) and the same checks must catch it.

#[path = "support/session_stores.rs"]
mod session_stores;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;

use ambit::ledger::ManualClock;
use ambit::routine::{ActiveWindow, RoutineOptions, RoutineSpec, Routines, RunRecord, RunState};

const MINUTE: i64 = 60_000;
const HOUR: i64 = 60 * MINUTE;
/// 2026-03-08 00:00 UTC, a Sunday: New York springs forward at 07:00 UTC (02:00 local does not exist).
const DST_DAY: i64 = 1_772_928_000_000;
/// The runners' lease (the child's): 30 minutes of the simulated clock.
const LEASE: i64 = 30 * MINUTE;
const STEP: i64 = 10 * MINUTE;

struct Gen(u64);
impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A runner process.
struct Worker {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    id: String,
    in_flight: usize,
}

impl Worker {
    fn start(url: &str, id: &str, broken: bool) -> Worker {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_ambit-routine-runner-child"));
        cmd.arg(url).arg(id).stdin(Stdio::piped()).stdout(Stdio::piped());
        if broken {
            cmd.arg("--broken");
        }
        let mut child = cmd.spawn().expect("start a runner process");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready", "the runner process did not start");
        Worker { child, stdin, stdout, id: id.to_string(), in_flight: 0 }
    }
    fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").unwrap();
        self.stdin.flush().unwrap();
    }
    fn answer(&mut self) -> Vec<i64> {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let mut words = line.split_whitespace();
        assert_eq!(words.next(), Some("ok"), "runner {}: {line}", self.id);
        words.filter_map(|w| w.parse().ok()).collect()
    }
    fn kill(mut self) {
        self.child.kill().unwrap(); // SIGKILL
        self.child.wait().unwrap();
    }
}

/// Sends `command T` to every live runner at once, then reads every answer.
fn all(workers: &mut [Option<Worker>], command: &str, t: i64) -> (i64, i64) {
    for w in workers.iter_mut().flatten() {
        w.send(&format!("{command} {t}"));
    }
    let (mut started, mut lost) = (0, 0);
    for w in workers.iter_mut().flatten() {
        let a = w.answer();
        if command == "tick" {
            started += a[0];
            lost += a[1];
            w.in_flight = a[3] as usize;
        }
    }
    (started, lost)
}

/// Sends `settle T` to every live runner: each answers once every run it has in flight has ended or
/// waits for the clock to move past T.
fn settle(workers: &mut [Option<Worker>], t: i64) {
    for w in workers.iter_mut().flatten() {
        w.send(&format!("settle {t}"));
    }
    for w in workers.iter_mut().flatten() {
        w.answer();
    }
}

/// The 200 routines: what each is, by a seeded draw.
fn routines_spec(n: usize, g: &mut Gen) -> Vec<RoutineSpec> {
    let paris_hours = ActiveWindow {
        weekdays: ["mon", "tue", "wed", "thu", "fri"].iter().map(|d| d.to_string()).collect(),
        start: "09:00".into(),
        end: "17:00".into(),
        timezone: "Europe/Paris".into(),
    };
    let report = ["report=success", "report=nothing_to_do", "report=failure", "silent"];
    (0..n)
        .map(|i| {
            let say = report[g.below(4) as usize];
            match i % 10 {
                0..=2 => RoutineSpec::every("tester", say, [10_800, 21_600, 43_200, 86_400][g.below(4) as usize]),
                // A run longer than the interval: one at a time, then catch-up.
                3 => RoutineSpec::every("tester", format!("work={} {say}", 150 * MINUTE), 7200),
                // 02:30 New York does not exist on 2026-03-08.
                4 => RoutineSpec::cron("tester", say, "30 2 * * *", "America/New_York"),
                5 => RoutineSpec::cron(
                    "tester",
                    say,
                    ["0 */6 * * *", "15 9 * * 1-5", "*/45 1-3 * * *"][g.below(3) as usize],
                    "America/New_York",
                ),
                6 => {
                    RoutineSpec { active_window: Some(paris_hours.clone()), ..RoutineSpec::every("tester", say, 7200) }
                }
                7 => RoutineSpec { daily_cap: Some(3), ..RoutineSpec::every("tester", say, 14_400) },
                8 => RoutineSpec {
                    catch_up: 2,
                    ..RoutineSpec::every("tester", format!("work={} {say}", 500 * MINUTE), 14_400)
                },
                _ => RoutineSpec::every("tester", "park", 21_600),
            }
        })
        .collect()
}

/// What the checks found wrong.
#[derive(Debug, Default)]
struct Violations {
    slot_run_twice: Vec<(String, i64)>,
    slot_unaccounted: Vec<(String, i64)>,
    slot_both_run_and_skipped: Vec<(String, i64)>,
    run_off_chain: Vec<(String, i64)>,
    overlapping_runs: Vec<(String, String)>,
    left_running: Vec<String>,
    lost_not_killed: Vec<String>,
    parked_blocked: Vec<String>,
    due_but_idle: Vec<String>,
}

impl Violations {
    fn any(&self) -> bool {
        !(self.slot_run_twice.is_empty()
            && self.slot_unaccounted.is_empty()
            && self.slot_both_run_and_skipped.is_empty()
            && self.run_off_chain.is_empty()
            && self.overlapping_runs.is_empty()
            && self.left_running.is_empty()
            && self.lost_not_killed.is_empty()
            && self.parked_blocked.is_empty()
            && self.due_but_idle.is_empty())
    }
}

/// The checks, over the store's records.
async fn check(routines: &Routines, end: i64, killed: &HashSet<String>) -> (Violations, BTreeMap<&'static str, i64>) {
    let mut v = Violations::default();
    let mut figures: BTreeMap<&'static str, i64> = BTreeMap::new();
    let all_runs = routines.runs(None, i64::MAX).await.unwrap();
    let skipped = routines.skipped(None).await.unwrap();
    let mut runs_of: HashMap<String, Vec<RunRecord>> = HashMap::new();
    for r in all_runs {
        runs_of.entry(r.routine_id.clone()).or_default().push(r);
    }
    for routine in routines.list(None).await.unwrap() {
        let timing = routine.spec.timing().unwrap();
        // The slots before the routine's next slot have all been dealt with: those are checked.
        let horizon = routine.next_slot.map_or(end, |n| n - 1).min(end);
        let mut chain = Vec::new();
        let mut s = timing.first_slot(routine.created_at);
        while let Some(x) = s.filter(|x| *x <= horizon) {
            chain.push(x);
            s = timing.next_slot(x);
        }
        let chain_set: HashSet<i64> = chain.iter().copied().collect();
        let runs = runs_of.remove(&routine.id).unwrap_or_default();
        let mut run_slots: HashMap<i64, usize> = HashMap::new();
        for r in &runs {
            let slot = r.slot_at.unwrap_or(i64::MIN);
            *run_slots.entry(slot).or_default() += 1;
            if !chain_set.contains(&slot) {
                v.run_off_chain.push((routine.id.clone(), slot));
            }
            match r.state {
                // Only the runners alive at the end may still hold runs; a killed runner's are lost.
                RunState::Running if killed.contains(&r.runner) => v.left_running.push(r.id.clone()),
                RunState::Lost if !killed.contains(&r.runner) => v.lost_not_killed.push(r.id.clone()),
                _ => {}
            }
            *figures
                .entry(match r.state {
                    RunState::Running => "runs running",
                    RunState::Parked => "runs parked",
                    RunState::Finished => "runs finished",
                    RunState::Lost => "runs lost",
                })
                .or_default() += 1;
        }
        for (slot, n) in &run_slots {
            if *n > 1 {
                v.slot_run_twice.push((routine.id.clone(), *slot));
            }
        }
        // The skipped slots, expanded over the chain.
        let mut skipped_slots: HashMap<i64, usize> = HashMap::new();
        for k in skipped.iter().filter(|k| k.routine_id == routine.id) {
            if k.reason == "window" {
                // Slots of the cadence the window took out of the chain: none of them is a slot.
                assert!(
                    !chain.iter().any(|x| *x >= k.first_slot && *x <= k.last_slot),
                    "a window skip holds no slot of the chain: {k:?}"
                );
                *figures.entry("slots outside the window").or_default() += k.slots;
                continue;
            }
            let inside: Vec<i64> = chain.iter().copied().filter(|x| *x >= k.first_slot && *x <= k.last_slot).collect();
            assert_eq!(inside.len() as i64, k.slots, "a skip range is a run of the chain: {k:?}");
            for x in inside {
                *skipped_slots.entry(x).or_default() += 1;
            }
            *figures.entry("slots skipped").or_default() += k.slots;
        }
        let before = v.slot_unaccounted.len();
        for slot in &chain {
            match (run_slots.get(slot).copied().unwrap_or(0), skipped_slots.get(slot).copied().unwrap_or(0)) {
                (0, 0) => v.slot_unaccounted.push((routine.id.clone(), *slot)),
                (r, k) if r > 0 && k > 0 => v.slot_both_run_and_skipped.push((routine.id.clone(), *slot)),
                (0, k) if k > 1 => v.slot_run_twice.push((routine.id.clone(), *slot)),
                _ => {}
            }
        }
        // Liveness: a routine still due at the end has a run in progress holding it.
        if routine.next_slot.is_some_and(|n| n <= end) && !runs.iter().any(|r| r.state == RunState::Running) {
            v.due_but_idle.push(routine.id.clone());
            let mut rs: Vec<String> = runs
                .iter()
                .map(|r| format!("{:?} {:?} {}-{:?} {}", r.slot_at, r.state, r.started_at, r.ended_at, r.runner))
                .collect();
            rs.sort();
            eprintln!("DUE_BUT_IDLE {} next={:?} end={end} runs={rs:?}", routine.id, routine.next_slot);
        }
        if v.slot_unaccounted.len() > before {
            let mut rs: Vec<String> = runs
                .iter()
                .map(|r| format!("{:?} {:?} {}-{:?} {}", r.slot_at, r.state, r.started_at, r.ended_at, r.runner))
                .collect();
            rs.sort();
            let ks: Vec<_> = skipped.iter().filter(|k| k.routine_id == routine.id).collect();
            eprintln!(
                "UNACCOUNTED {} {:?} next={:?}\n chain={chain:?}\n runs={rs:?}\n skips={ks:?}",
                routine.id, routine.spec, routine.next_slot
            );
        }
        *figures.entry("slots due").or_default() += chain.len() as i64;
        // Never two runs of the routine in progress at once (a parked run holds no slot).
        let mut held: Vec<&RunRecord> = runs.iter().filter(|r| r.state != RunState::Parked).collect();
        held.sort_by_key(|r| (r.started_at, r.id.clone()));
        for pair in held.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if b.started_at < a.ended_at.unwrap_or(i64::MAX) {
                v.overlapping_runs.push((a.id.clone(), b.id.clone()));
            }
        }
        // A parked run holds no slot: a later run of the routine started while an earlier one was parked.
        if routine.spec.instructions == "park" && runs.iter().filter(|r| r.state == RunState::Parked).count() < 2 {
            v.parked_blocked.push(routine.id.clone());
        }
    }
    (v, figures)
}

/// The simulated week (or `days`): creates `n` routines, runs `runners` processes, kills and restarts
/// them, then checks.
async fn scenario(
    url: &str,
    runners: usize,
    n: usize,
    days: i64,
    broken: bool,
    seed: u64,
) -> (Violations, BTreeMap<&'static str, i64>) {
    // The run starts up to three days before the DST change (the full week: Thursday 03-05), and the
    // outage falls on the day of the change.
    let start = DST_DAY - (days / 2).min(3) * 24 * HOUR;
    let clock = ManualClock::new(start);
    let routines =
        Routines::open_with(url, RoutineOptions { clock: Arc::new(clock.clone()), max_connections: 2 }).await.unwrap();
    let mut g = Gen(seed);
    for spec in routines_spec(n, &mut g) {
        routines.create(spec, "scheduler-test").await.unwrap();
    }
    // Open the session store's schema once, before several processes race to migrate it.
    ambit::session::Sessions::open(url).await.unwrap();
    let mut incarnation = 0;
    let mut fresh_id = |slot: usize| {
        incarnation += 1;
        format!("runner-{slot}-{incarnation}")
    };
    let mut workers: Vec<Option<Worker>> =
        (0..runners).map(|i| Some(Worker::start(url, &fresh_id(i), broken))).collect();
    let mut killed: HashSet<String> = HashSet::new();
    let mut down_until: Vec<i64> = vec![0; runners];
    let end = start + days * 24 * HOUR;
    // After the end, every runner up and ticking (no more kills) until past every dead runner's lease:
    // their runs are marked lost by then. A live runner is never silent longer than its lease.
    let last = end + LEASE + STEP;
    let outage = (DST_DAY + 5 * HOUR, DST_DAY + 11 * HOUR);
    let mut t = start;
    let mut kills = 0;
    let began = std::time::Instant::now();
    while t <= last {
        if (t - start) % (24 * HOUR) == 0 {
            eprintln!("day {} at {:?}", (t - start) / (24 * HOUR), began.elapsed());
        }
        if t >= outage.0 && t < outage.1 && t <= end {
            // Every runner down: nobody ticks for six hours.
            for w in workers.iter_mut() {
                if let Some(w) = w.take() {
                    killed.insert(w.id.clone());
                    w.kill();
                    kills += 1;
                }
            }
            t += STEP;
            continue;
        }
        for (i, w) in workers.iter_mut().enumerate() {
            if w.is_none() && (t >= down_until[i] || t > end) {
                *w = Some(Worker::start(url, &fresh_id(i), broken));
            }
        }
        all(&mut workers, "tick", t);
        // Now and then, kill a runner with runs in flight; it comes back a little later.
        if t <= end && g.below(12) == 0 {
            let busy: Vec<usize> =
                (0..runners).filter(|i| workers[*i].as_ref().is_some_and(|w| w.in_flight > 0)).collect();
            if let Some(&i) = busy.get(g.below(busy.len().max(1) as u64) as usize) {
                let w = workers[i].take().unwrap();
                killed.insert(w.id.clone());
                w.kill();
                kills += 1;
                down_until[i] = t + (1 + g.below(6) as i64) * STEP;
            }
        }
        t += STEP;
    }
    // The runs of the last tick end in the background, after it claimed: one that ended after the claim
    // read it as running leaves its routine due for the next tick. So the week ends at rest: every
    // runner settles (each run in flight has ended or waits for the clock to move), then ticks again at
    // the same time, until a tick starts nothing and marks nothing lost. A routine still due after that
    // was passed over by a claim with nothing in motion: a liveness violation.
    let last = t - STEP;
    let mut rounds = 0;
    loop {
        settle(&mut workers, last);
        let (started, lost) = all(&mut workers, "tick", last);
        if started == 0 && lost == 0 {
            break;
        }
        rounds += 1;
        assert!(rounds < 100, "the store never came to rest: {started} runs started, {lost} lost at the last tick");
    }
    // Every runner stops; its runs in flight stay `running` (they are the live runners' own).
    for w in workers.into_iter().flatten() {
        w.kill();
    }
    let (v, mut figures) = check(&routines, last, &killed).await;
    figures.insert("runner kills", kills);
    (v, figures)
}

/// How big the simulated stretch is: by default 20 routines over 2 days (the DST change and the outage
/// included; seconds of wall time); `AMBIT_ROUTINES_WEEK=full` (scripts/routines-full.sh) runs the
/// whole week of 200 routines.
struct Size {
    routines: usize,
    days: i64,
}

impl Size {
    fn from_env() -> Size {
        match std::env::var("AMBIT_ROUTINES_WEEK").as_deref() {
            Ok("full") => Size { routines: 200, days: 7 },
            _ => Size { routines: 20, days: 2 },
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_week_on_one_store_with_runners_killed_at_random_runs_every_slot_once() {
    let size = Size::from_env();
    let stores = session_stores::stores().await;
    for s in stores.iter().filter(|s| std::env::var("ONLY").map_or(true, |o| o == s.name)) {
        let runners = if s.name == "postgres" { 4 } else { 2 };
        let (v, figures) = scenario(&s.url, runners, size.routines, size.days, false, 0x5EED).await;
        eprintln!("{} with {runners} runner processes: {figures:?}", s.name);
        assert!(!v.any(), "{}: {v:#?}", s.name);
        assert!(figures.get("runs lost").copied().unwrap_or(0) > 0, "{}: kills hit runs in flight", s.name);
        assert!(figures.get("slots skipped").copied().unwrap_or(0) > 0, "{}: the outage made catch-up skip", s.name);
        assert!(figures.get("runs parked").copied().unwrap_or(0) > 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_control_a_broken_slot_claim_is_caught_by_the_same_checks() {
    let stores = session_stores::stores().await;
    for s in &stores {
        let runners = if s.name == "postgres" { 4 } else { 2 };
        let (v, figures) = scenario(&s.url, runners, 20, 1, true, 0xBAD).await;
        eprintln!(
            "{} broken: {figures:?}; caught: {} slots run twice, {} overlapping runs",
            s.name,
            v.slot_run_twice.len(),
            v.overlapping_runs.len()
        );
        assert!(
            !v.slot_run_twice.is_empty() || !v.overlapping_runs.is_empty(),
            "{}: the broken claim went unseen: {v:#?}",
            s.name
        );
    }
}
