//! Claims per second and records per second through the ledger API against the raw SQL run on the
//! same store in the same run, with 1 and 8 clients, durable mode (SQLite synchronous=FULL,
//! PostgreSQL synchronous_commit=on). PostgreSQL is benchmarked when `AMBIT_BENCH_POSTGRES_URL` (or
//! `AMBIT_TEST_POSTGRES_URL`) names a server; `bash scripts/bench-ledger.sh` starts one.
//!
//! Before criterion's groups, each store and client count runs the API's claims and the raw SQL's
//! interleaved in short rounds and prints the median ratio (`interleaved_claims`): the figure issue 18's
//! goal is about (>= 90 % of raw SQL).
//!
//! "Raw" is the least SQL that does the same job in one transaction: a conditional upsert that takes
//! the lease plus the grant's log row (claim); the row update plus the log update (record).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use ambit::ledger::{ClaimRequest, Ledger, Outcome, Record};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use sqlx::{PgPool, SqlitePool};

static SEQ: AtomicU64 = AtomicU64::new(0);

fn key(prefix: &str) -> String {
    format!("{prefix}-{}", SEQ.fetch_add(1, Ordering::Relaxed))
}

#[derive(Clone)]
enum Raw {
    Sqlite(SqlitePool),
    Pg(PgPool),
}

const RAW_CLAIM: &str = "INSERT INTO ambit_ledger_items (scope, subject_key, attempts, claim_token, lease_until, lease_run_id, \
         last_grant_reason, last_attempt_at) VALUES ('raw', $1, 1, 1, $2, 'bench', 'fresh', $3) \
     ON CONFLICT (scope, subject_key) DO UPDATE SET attempts = ambit_ledger_items.attempts + 1, \
         claim_token = ambit_ledger_items.claim_token + 1, lease_until = excluded.lease_until \
     WHERE ambit_ledger_items.lease_until IS NULL OR ambit_ledger_items.lease_until <= $3 RETURNING claim_token";
const RAW_LOG: &str = "INSERT INTO ambit_ledger_attempts (scope, subject_key, token, run_id, grant_reason, granted_at, lease_until) \
     VALUES ('raw', $1, $2, 'bench', 'fresh', $3, $4)";
const RAW_RECORD: &str = "UPDATE ambit_ledger_items SET misses = misses + 1, lease_until = NULL, lease_run_id = NULL, \
     eligible_at = $2, last_outcome = 'empty' WHERE scope = 'raw' AND subject_key = $1 AND claim_token = $3";
const RAW_RECORD_LOG: &str = "UPDATE ambit_ledger_attempts SET outcome = 'empty', finished_at = $2 \
     WHERE scope = 'raw' AND subject_key = $1 AND token = $3";

fn now() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

impl Raw {
    async fn claim(&self, key: &str) -> i64 {
        let now = now();
        match self {
            Raw::Sqlite(p) => {
                let mut tx = p.begin_with("BEGIN IMMEDIATE").await.unwrap();
                let token: i64 = sqlx::query_scalar(RAW_CLAIM)
                    .bind(key)
                    .bind(now + 3_600_000)
                    .bind(now)
                    .fetch_one(&mut *tx)
                    .await
                    .unwrap();
                sqlx::query(RAW_LOG)
                    .bind(key)
                    .bind(token)
                    .bind(now)
                    .bind(now + 3_600_000)
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                tx.commit().await.unwrap();
                token
            }
            Raw::Pg(p) => {
                let mut tx = p.begin().await.unwrap();
                let token: i64 = sqlx::query_scalar(RAW_CLAIM)
                    .bind(key)
                    .bind(now + 3_600_000)
                    .bind(now)
                    .fetch_one(&mut *tx)
                    .await
                    .unwrap();
                sqlx::query(RAW_LOG)
                    .bind(key)
                    .bind(token)
                    .bind(now)
                    .bind(now + 3_600_000)
                    .execute(&mut *tx)
                    .await
                    .unwrap();
                tx.commit().await.unwrap();
                token
            }
        }
    }

    async fn record(&self, key: &str, token: i64) {
        let now = now();
        match self {
            Raw::Sqlite(p) => {
                let mut tx = p.begin_with("BEGIN IMMEDIATE").await.unwrap();
                sqlx::query(RAW_RECORD).bind(key).bind(now + 21_600_000).bind(token).execute(&mut *tx).await.unwrap();
                sqlx::query(RAW_RECORD_LOG).bind(key).bind(now).bind(token).execute(&mut *tx).await.unwrap();
                tx.commit().await.unwrap();
            }
            Raw::Pg(p) => {
                let mut tx = p.begin().await.unwrap();
                sqlx::query(RAW_RECORD).bind(key).bind(now + 21_600_000).bind(token).execute(&mut *tx).await.unwrap();
                sqlx::query(RAW_RECORD_LOG).bind(key).bind(now).bind(token).execute(&mut *tx).await.unwrap();
                tx.commit().await.unwrap();
            }
        }
    }
}

async fn api_claim(l: &Ledger, key: String) -> i64 {
    let r = l.claim(ClaimRequest::new("api", [key], 1).run_id("bench")).await.unwrap();
    r.candidates[0].token().expect("a fresh subject is granted")
}

/// Runs `iters` operations spread over `clients` concurrent clients; returns the wall time.
async fn spread<F, Fut>(iters: u64, clients: u64, op: F) -> Duration
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let start = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let op = op.clone();
            let n = iters / clients + u64::from(c < iters % clients);
            tokio::spawn(async move {
                for _ in 0..n {
                    op().await;
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    start.elapsed()
}

/// Runs `op` from `clients` concurrent clients until `dur` has passed; returns operations per second.
async fn rate_for<F, Fut>(dur: Duration, clients: u64, op: F) -> f64
where
    F: Fn() -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let start = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|_| {
            let op = op.clone();
            tokio::spawn(async move {
                let mut n = 0u64;
                while start.elapsed() < dur {
                    op().await;
                    n += 1;
                }
                n
            })
        })
        .collect();
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    total as f64 / start.elapsed().as_secs_f64()
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().next().unwrap_or("?").to_string())
        .unwrap_or_default()
}

/// The claim rate through the API and the raw SQL's, interleaved (API, raw, API, raw, ...) in rounds of
/// `AMBIT_BENCH_LEDGER_ROUND_MS` (1,000) each, `AMBIT_BENCH_LEDGER_ROUNDS` (5) rounds: on a shared machine
/// the ratio of neighbouring rounds is steadier than criterion's figures taken minutes apart. Prints each
/// round and the median ratio.
fn interleaved_claims(rt: &tokio::runtime::Runtime, ledger: &Ledger, raw: &Raw, name: &str, clients: u64) {
    let env = |k: &str, d: u64| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let rounds = env("AMBIT_BENCH_LEDGER_ROUNDS", 5);
    let dur = Duration::from_millis(env("AMBIT_BENCH_LEDGER_ROUND_MS", 1000));
    let mut ratios = Vec::new();
    for round in 0..rounds {
        let l = ledger.clone();
        let api = rt.block_on(rate_for(dur, clients, move || {
            let l = l.clone();
            async move {
                api_claim(&l, key("ia")).await;
            }
        }));
        let r = raw.clone();
        let raw_rate = rt.block_on(rate_for(dur, clients, move || {
            let r = r.clone();
            async move {
                r.claim(&key("ir")).await;
            }
        }));
        ratios.push(api / raw_rate);
        eprintln!(
            "ledger/{name}/claim/{clients}_clients interleaved round {}: api {api:.0}/s raw {raw_rate:.0}/s ratio {:.3} load {}",
            round + 1,
            api / raw_rate,
            load_average()
        );
    }
    ratios.sort_by(f64::total_cmp);
    if let Some(m) = ratios.get(ratios.len() / 2) {
        eprintln!("ledger/{name}/claim/{clients}_clients interleaved: median api/raw {m:.3} over {rounds} rounds");
    }
}

fn bench_store(c: &mut Criterion, rt: &tokio::runtime::Runtime, name: &str, url: &str) {
    let ledger = rt.block_on(Ledger::open(url)).unwrap();
    let raw = rt.block_on(async {
        if url.starts_with("sqlite://") {
            let opts = url.parse::<sqlx::sqlite::SqliteConnectOptions>().unwrap();
            let opts = opts
                .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
                .synchronous(sqlx::sqlite::SqliteSynchronous::Full)
                .busy_timeout(Duration::from_secs(30));
            Raw::Sqlite(sqlx::sqlite::SqlitePoolOptions::new().max_connections(8).connect_with(opts).await.unwrap())
        } else {
            Raw::Pg(sqlx::postgres::PgPoolOptions::new().max_connections(8).connect(url).await.unwrap())
        }
    });
    for clients in [1u64, 8] {
        interleaved_claims(rt, &ledger, &raw, name, clients);
        let mut g = c.benchmark_group(format!("ledger/{name}/claim/{clients}_clients"));
        g.throughput(Throughput::Elements(1)).sample_size(10).measurement_time(Duration::from_secs(8));
        g.bench_function("api", |b| {
            b.iter_custom(|iters| {
                let l = ledger.clone();
                rt.block_on(spread(iters, clients, move || {
                    let l = l.clone();
                    async move {
                        api_claim(&l, key("a")).await;
                    }
                }))
            })
        });
        g.bench_function("raw_sql", |b| {
            b.iter_custom(|iters| {
                let raw = raw.clone();
                rt.block_on(spread(iters, clients, move || {
                    let raw = raw.clone();
                    async move {
                        raw.claim(&key("r")).await;
                    }
                }))
            })
        });
        g.finish();

        let mut g = c.benchmark_group(format!("ledger/{name}/record/{clients}_clients"));
        g.throughput(Throughput::Elements(1)).sample_size(10).measurement_time(Duration::from_secs(8));
        g.bench_function("api", |b| {
            b.iter_custom(|iters| {
                // Claimed beforehand, outside the measurement.
                let keys: Vec<(String, i64)> = rt.block_on(async {
                    let mut v = Vec::new();
                    for _ in 0..iters {
                        let k = key("ar");
                        let t = api_claim(&ledger, k.clone()).await;
                        v.push((k, t));
                    }
                    v
                });
                let queue = Arc::new(std::sync::Mutex::new(keys));
                let l = ledger.clone();
                rt.block_on(spread(iters, clients, move || {
                    let (l, queue) = (l.clone(), queue.clone());
                    async move {
                        let (k, t) = queue.lock().unwrap().pop().unwrap();
                        l.record("api", None, vec![Record::new(k, Outcome::Empty, Some(t))]).await.unwrap();
                    }
                }))
            })
        });
        g.bench_function("raw_sql", |b| {
            b.iter_custom(|iters| {
                let keys: Vec<(String, i64)> = rt.block_on(async {
                    let mut v = Vec::new();
                    for _ in 0..iters {
                        let k = key("rr");
                        let t = raw.claim(&k).await;
                        v.push((k, t));
                    }
                    v
                });
                let queue = Arc::new(std::sync::Mutex::new(keys));
                let raw = raw.clone();
                rt.block_on(spread(iters, clients, move || {
                    let (raw, queue) = (raw.clone(), queue.clone());
                    async move {
                        let (k, t) = queue.lock().unwrap().pop().unwrap();
                        raw.record(&k, t).await;
                    }
                }))
            })
        });
        g.finish();
    }
}

fn ledger_benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let sqlite_url = format!("sqlite://{}", dir.path().join("bench.db").display());
    bench_store(c, &rt, "sqlite_full", &sqlite_url);
    match std::env::var("AMBIT_BENCH_POSTGRES_URL").or_else(|_| std::env::var("AMBIT_TEST_POSTGRES_URL")) {
        Ok(url) => bench_store(c, &rt, "postgres_durable", &url),
        Err(_) => eprintln!("ledger bench: no PostgreSQL URL (AMBIT_BENCH_POSTGRES_URL); run scripts/bench-ledger.sh"),
    }
}

criterion_group!(benches, ledger_benches);
criterion_main!(benches);
