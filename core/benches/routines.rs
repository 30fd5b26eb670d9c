//! Routines: slots fired per second and pickup lag (slot due → run started) with 10,000 routines, on
//! PostgreSQL with 1, 2 and 4 runners and on SQLite with 1 (SPEC §13), each run an ordinary session run
//! of a scripted agent that answers at once. Twice: all due at once (the rate is the runners' ceiling),
//! and due at a steady 1,000 a second (the lag says whether the runners keep up with that). Beside it,
//! the store's own limit: the same slot claims with no run started. `scripts/bench-routines.sh` starts
//! PostgreSQL for it; `AMBIT_BENCH_ROUTINES` sets how many routines (default 10,000),
//! `AMBIT_BENCH_ROUTINES_PACE` the steady pace (default 1,000 a second), `AMBIT_BENCH_ROUTINES_ONLY` the rows
//! (`postgres:4,sqlite:1`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ambit::ledger::{Clock, ManualClock, SystemClock};
use ambit::model::{ModelRequest, ModelResponse, StopReason, Usage};
use ambit::routine::store::ClaimSlots;
use ambit::routine::{RoutineOptions, RoutineSpec, Routines, Runner};
use ambit::session::Sessions;
use ambit::{Agent, Model, ModelError};
use async_trait::async_trait;
use sqlx::Connection;

struct Answers;

#[async_trait]
impl Model for Answers {
    fn name(&self) -> &str {
        "bench"
    }
    async fn respond(&self, _: &ModelRequest) -> Result<ModelResponse, ModelError> {
        Ok(ModelResponse {
            id: "r".into(),
            text: Some("ok".into()),
            tool_calls: vec![],
            stop: StopReason::End,
            usage: Usage::default(),
        })
    }
}

/// The system clock moved by a fixed offset: the runners' time.
struct Offset(i64);

impl Clock for Offset {
    fn now_ms(&self) -> i64 {
        SystemClock.now_ms() + self.0
    }
}

fn now() -> i64 {
    SystemClock.now_ms()
}

async fn fresh_postgres(admin: &str, name: &str) -> String {
    let mut c = sqlx::PgConnection::connect(admin).await.expect("connect to PostgreSQL");
    let db = format!("ambit_bench_routines_{name}_{}", std::process::id());
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {db}"))).execute(&mut c).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {db}"))).execute(&mut c).await.unwrap();
    format!("{}/{db}", admin.rsplit_once('/').unwrap().0)
}

/// Creates `n` routines whose first slot is `due`, or, with `pace` (slots per second), spread from `due`
/// on at that pace (in steps of 32).
async fn seed(url: &str, n: usize, due: i64, pace: Option<usize>) -> Routines {
    let clock = ManualClock::new(due);
    let routines =
        Routines::open_with(url, RoutineOptions { clock: Arc::new(clock.clone()), max_connections: 8 }).await.unwrap();
    let mut pending = Vec::new();
    for i in 0..n {
        if let Some(pace) = pace
            && i % 32 == 0
        {
            clock.set(due + (i as i64) * 1000 / pace as i64);
        }
        let r = routines.clone();
        pending.push(tokio::spawn(async move {
            r.create_with_id(&format!("r{i:05}"), RoutineSpec::every("bench", "go", 3600), "bench").await.unwrap();
        }));
        if pending.len() == 32 {
            for p in pending.drain(..) {
                p.await.unwrap();
            }
        }
    }
    for p in pending {
        p.await.unwrap();
    }
    routines
}

fn percentile(sorted: &[i64], p: f64) -> i64 {
    sorted.get(((sorted.len() as f64 - 1.0) * p).round() as usize).copied().unwrap_or(0)
}

/// Runners tick on the system clock until every routine has fired; slots/s and lag from the records.
/// With `pace`, the slots come due at that many a second (the lag then says whether the runners keep up
/// with it); without, all at once (the rate is then how fast the runners can go).
async fn fire(url: &str, runners: usize, n: usize, pace: Option<usize>) -> (f64, i64, i64) {
    // The routines come due an hour ahead; the runners' clock starts there once they are seeded and
    // runs at the real pace, so the lag is the real time from due to started.
    let due = now() + 3_600_000;
    let routines = seed(url, n, due, pace).await;
    let mut handles = Vec::new();
    let mut all = Vec::new();
    let offset = due - now();
    // Each runner its own stores, as a runner process has; AMBIT_BENCH_ROUTINES_SHARED=1 gives them one
    // session store (as the benchmark did before 2026-12-06).
    let shared = match std::env::var("AMBIT_BENCH_ROUTINES_SHARED").as_deref() {
        Ok("1") => Some(Sessions::open(url).await.unwrap()),
        _ => None,
    };
    for i in 0..runners {
        let options = RoutineOptions { clock: Arc::new(Offset(offset)), max_connections: 8 };
        let own = Routines::open_with(url, options).await.unwrap();
        let sessions = match &shared {
            Some(s) => s.clone(),
            None => Sessions::open(url).await.unwrap(),
        };
        let runner = Runner::builder(own, sessions)
            .id(format!("bench-{i}"))
            .agent("bench", |_| Agent::builder().model(Answers).build())
            .batch(256)
            .build()
            .unwrap();
        all.push(runner);
    }
    let started = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let t0 = Instant::now();
    for runner in &all {
        let (runner, started) = (runner.clone(), started.clone());
        handles.push(tokio::spawn(async move {
            while started.load(std::sync::atomic::Ordering::SeqCst) < n {
                let r = runner.tick(now() + offset).await.unwrap();
                started.fetch_add(r.started.len(), std::sync::atomic::Ordering::SeqCst);
                if r.started.is_empty() {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    let elapsed = t0.elapsed().as_secs_f64();
    for r in &all {
        r.wait_idle().await;
    }
    let runs = routines.runs(None, i64::MAX).await.unwrap();
    assert_eq!(runs.len(), n, "every slot fired once");
    let mut lags: Vec<i64> = runs.iter().map(|r| r.started_at - r.slot_at.unwrap_or(r.started_at)).collect();
    lags.sort_unstable();
    (n as f64 / elapsed, percentile(&lags, 0.5), percentile(&lags, 0.99))
}

/// The store's own limit: `runners` claimers take every slot with no run started.
async fn claims_only(url: &str, runners: usize, n: usize) -> f64 {
    let due = now();
    let routines = seed(url, n, due, None).await;
    let claimed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let t0 = Instant::now();
    let mut handles = Vec::new();
    for i in 0..runners {
        let own = Routines::open(url).await.unwrap();
        let claimed = claimed.clone();
        handles.push(tokio::spawn(async move {
            let req = ClaimSlots {
                now: due + 1,
                runner: format!("claimer-{i}"),
                lease_until: due + 60_000,
                agents: vec!["bench".into()],
                limit: 256,
                broken: false,
            };
            while claimed.load(std::sync::atomic::Ordering::SeqCst) < n {
                let got = own.store().claim(&req).await.unwrap().runs.len();
                claimed.fetch_add(got, std::sync::atomic::Ordering::SeqCst);
            }
        }));
    }
    for h in handles {
        h.await.unwrap();
    }
    drop(routines);
    n as f64 / t0.elapsed().as_secs_f64()
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let n: usize = std::env::var("AMBIT_BENCH_ROUTINES").ok().and_then(|v| v.parse().ok()).unwrap_or(10_000);
    let admin = std::env::var("AMBIT_BENCH_POSTGRES_URL").ok();
    let dir = tempfile::tempdir().unwrap();
    let mut configs: Vec<(String, usize)> = Vec::new();
    if admin.is_some() {
        configs.extend([1, 2, 4].map(|k| ("postgres".to_string(), k)));
    } else {
        eprintln!("AMBIT_BENCH_POSTGRES_URL is not set: SQLite only (scripts/bench-routines.sh starts PostgreSQL)");
    }
    configs.push(("sqlite".into(), 1));
    // AMBIT_BENCH_ROUTINES_ONLY=postgres:4,sqlite:1 runs only those rows (a profile of one row).
    if let Ok(only) = std::env::var("AMBIT_BENCH_ROUTINES_ONLY") {
        let keep: Vec<&str> = only.split(',').map(str::trim).collect();
        configs.retain(|(store, runners)| keep.contains(&format!("{store}:{runners}").as_str()));
    }
    let pace: usize = std::env::var("AMBIT_BENCH_ROUTINES_PACE").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000);
    println!("routines: {n}; each run a session run of an agent that answers at once");
    println!("burst: all {n} due at once; paced: due {pace} a second");
    println!(
        "{:<10} {:>7} {:>12} {:>10} {:>10} {:>12} {:>12} {:>16}",
        "store", "runners", "slots/s", "lag p50", "lag p99", "paced p50", "paced p99", "claims-only/s"
    );
    for (i, (store, runners)) in configs.iter().enumerate() {
        let url = |tag: &str| match store.as_str() {
            "postgres" => admin.clone().unwrap(),
            _ => format!("sqlite://{}", dir.path().join(format!("{i}-{tag}.db")).display()),
        };
        let (fire_url, paced_url, claim_url) = if store == "postgres" {
            let a = admin.as_deref().unwrap_or_default();
            (
                fresh_postgres(a, &format!("f{i}")).await,
                fresh_postgres(a, &format!("p{i}")).await,
                fresh_postgres(a, &format!("c{i}")).await,
            )
        } else {
            (url("fire"), url("paced"), url("claim"))
        };
        let (rate, p50, p99) = fire(&fire_url, *runners, n, None).await;
        let (_, paced50, paced99) = fire(&paced_url, *runners, n, Some(pace)).await;
        let limit = claims_only(&claim_url, *runners, n).await;
        println!(
            "{store:<10} {runners:>7} {rate:>12.0} {p50:>8}ms {p99:>8}ms {paced50:>10}ms {paced99:>10}ms {limit:>16.0}"
        );
    }
}
