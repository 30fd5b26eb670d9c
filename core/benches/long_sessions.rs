//! Long sessions (issue 18, phase 2): what one turn costs as a session grows to 10, 100 and 1,000
//! messages, without a session store (`Agent::run_messages` with the history) and with one (SQLite in a
//! temp dir; PostgreSQL when `AMBIT_BENCH_POSTGRES_URL` names a server).
//!
//! A turn is one `Sessions::run` (or `run_messages`) against an in-process model that answers at once, so
//! nothing is serialized for a wire and the figures are the framework's own: the lease, reading the live
//! window, building the request, the loop, appending what the turn added and letting go. Each figure is
//! the median over one turn on each of `SESSIONS` sessions of that length: process CPU per turn (the
//! runtime is current-thread; SQLite's worker threads are in the process, PostgreSQL's server is not),
//! wall time per turn, the bytes of the conversation the model was handed (what a wire would serialize,
//! growing with the session by design; measured on an untimed warm-up turn, since serializing the body
//! is the wire's cost and the goal leaves it out), and the bytes the store appended (constant when the
//! append is O(new messages)). The sessions' window is set far above what they hold, so no compaction
//! runs in a timed turn. `1000 ÷ 10` is the 1,000-message turn's CPU over the 10-message turn's (goal ≤ 2).
//! One compacted session of 1,000 messages whose live window is 10 shows a turn reads the window only.
//! With a store, two turns per session: the first this process runs of it (the window read from the
//! store, as a new process resuming the session would) and the next (the window the process keeps,
//! plus what was appended since).
//!
//!   cargo bench -p ambit-sdk --bench long_sessions
//!   AMBIT_BENCH_POSTGRES_URL=postgres://… cargo bench -p ambit-sdk --bench long_sessions

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ambit::model::{Message, ModelRequest, ModelResponse, StopReason, Usage};
use ambit::session::{Item, SessionConfig, Sessions};
use ambit::{Agent, Model, ModelError};
use async_trait::async_trait;
use sqlx::Connection;

const SIZES: [usize; 3] = [10, 100, 1000];
const SESSIONS: usize = 25;

/// Answers at once; while `measure` is set (on a turn outside the timed ones), remembers the size of the
/// conversation it was handed as JSON (serializing it is a wire's cost, not the framework's).
struct Answers {
    handed: Arc<AtomicUsize>,
    measure: Arc<AtomicBool>,
}

#[async_trait]
impl Model for Answers {
    fn name(&self) -> &str {
        "bench"
    }
    async fn respond(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        if self.measure.load(Ordering::Relaxed) {
            let bytes = serde_json::to_vec(&request.messages).map(|b| b.len()).unwrap_or(0);
            self.handed.store(bytes, Ordering::Relaxed);
        }
        Ok(ModelResponse {
            id: "r".into(),
            text: Some("Noted; the figures are in the sheet you shared.".into()),
            tool_calls: vec![],
            stop: StopReason::End,
            usage: Usage::default(),
        })
    }
}

/// The process's CPU time so far (all its threads).
fn cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Message `i` of a long conversation: questions and answers of a realistic length.
fn message(i: usize) -> Message {
    if i.is_multiple_of(2) {
        Message::user(format!(
            "Question {i}: which of the open purchase orders for the Hamburg warehouse still have no tracking \
             number, and who was the last person to chase them?"
        ))
    } else {
        Message::Assistant {
            content: Some(format!(
                "Answer {i}: three orders (PO-4411, PO-4417, PO-4420) have no tracking number yet; Mara chased \
                 PO-4411 on Monday and the supplier promised a number by Thursday. The other two were never \
                 chased."
            )),
            tool_calls: Vec::new(),
        }
    }
}

fn history(n: usize) -> Vec<Message> {
    (0..n).map(message).collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

#[derive(Default)]
struct Row {
    cpu_us: f64,
    wall_us: f64,
    handed: usize,
    appended: usize,
}

async fn fresh_postgres(admin: &str) -> String {
    let mut c = sqlx::PgConnection::connect(admin).await.expect("connect to PostgreSQL");
    let db = format!("ambit_bench_long_sessions_{}", std::process::id());
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {db}"))).execute(&mut c).await.unwrap();
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {db}"))).execute(&mut c).await.unwrap();
    format!("{}/{db}", admin.rsplit_once('/').unwrap().0)
}

/// The bytes of the entries stored for `session_id` (their JSON bodies).
async fn stored_bytes(url: &str, session_id: &str) -> usize {
    let sql = "SELECT CAST(COALESCE(SUM(LENGTH(body)), 0) AS BIGINT) FROM ambit_session_entries WHERE session_id = $1";
    let n: i64 = if url.starts_with("sqlite://") {
        let mut c = sqlx::SqliteConnection::connect(url).await.unwrap();
        sqlx::query_scalar(sql).bind(session_id).fetch_one(&mut c).await.unwrap()
    } else {
        let mut c = sqlx::PgConnection::connect(url).await.unwrap();
        sqlx::query_scalar(sql).bind(session_id).fetch_one(&mut c).await.unwrap()
    };
    n as usize
}

/// The agent, the bytes its model was last handed, and the switch that measures them.
fn agent() -> (Agent, Arc<AtomicUsize>, Arc<AtomicBool>) {
    let (handed, measure) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(true)));
    let model = Answers { handed: handed.clone(), measure: measure.clone() };
    (Agent::builder().model(model).build().unwrap(), handed, measure)
}

/// One turn on each of `SESSIONS` histories of `n` messages, without a store.
async fn without_store(n: usize) -> Row {
    let (agent, handed, measure) = agent();
    for _ in 0..3 {
        let mut h = history(n);
        h.push(Message::user("And the Bremen ones?"));
        agent.run_messages(h).await.unwrap();
        measure.store(false, Ordering::Relaxed);
    }
    let (mut cpus, mut walls) = (Vec::new(), Vec::new());
    for _ in 0..SESSIONS {
        let mut h = history(n);
        h.push(Message::user("And the Bremen ones?"));
        let (c0, w0) = (cpu(), Instant::now());
        agent.run_messages(h).await.unwrap();
        cpus.push((cpu() - c0).as_secs_f64() * 1e6);
        walls.push(w0.elapsed().as_secs_f64() * 1e6);
    }
    Row { cpu_us: median(cpus), wall_us: median(walls), handed: handed.load(Ordering::Relaxed), appended: 0 }
}

/// A session of `n` messages in the store (`compacted`: a compaction keeps only its last 10 live).
async fn seeded(sessions: &Sessions, n: usize, compacted: bool) -> String {
    let id = sessions.create().await.unwrap();
    let items: Vec<Item> = history(n).into_iter().map(|message| Item::Message { message }).collect();
    for chunk in items.chunks(250) {
        sessions.store().append(&id, chunk, 1).await.unwrap();
    }
    if compacted {
        let keep_from = (n as i64) - 9;
        let marks =
            [Item::Boundary { keep_from }, Item::Summary { text: "What was said before: orders chased.".into() }];
        sessions.store().append(&id, &marks, 2).await.unwrap();
    }
    id
}

/// One turn on each of `SESSIONS` stored sessions of `n` messages: the first this process runs of each
/// (`cold`: the live window read from the store, as a new process resuming it would) and the next one
/// (`warm`: the conversation going on, the window this process keeps plus what was appended since).
async fn with_store(url: &str, n: usize, compacted: bool) -> (Row, Row) {
    let (agent, handed, measure) = agent();
    // A window no session here fills: no compaction runs inside the timed turns.
    let config = SessionConfig { context_window: Some(100_000_000), ..SessionConfig::default() };
    let sessions = Sessions::open(url).await.unwrap().with_config(config).unwrap();
    let mut ids = Vec::new();
    for _ in 0..SESSIONS + 3 {
        ids.push(seeded(&sessions, n, compacted).await);
    }
    for id in &ids[SESSIONS..] {
        sessions.run(&agent, id, "And the Bremen ones?").await.unwrap();
        measure.store(false, Ordering::Relaxed);
    }
    let mut rows = Vec::new();
    for _pass in ["cold", "warm"] {
        let before = stored_bytes(url, &ids[0]).await;
        let (mut cpus, mut walls) = (Vec::new(), Vec::new());
        for id in &ids[..SESSIONS] {
            let (c0, w0) = (cpu(), Instant::now());
            sessions.run(&agent, id, "And the Bremen ones?").await.unwrap();
            cpus.push((cpu() - c0).as_secs_f64() * 1e6);
            walls.push(w0.elapsed().as_secs_f64() * 1e6);
        }
        let appended = stored_bytes(url, &ids[0]).await - before;
        rows.push(Row {
            cpu_us: median(cpus),
            wall_us: median(walls),
            handed: handed.load(Ordering::Relaxed),
            appended,
        });
    }
    let warm = rows.pop().unwrap_or_default();
    (rows.pop().unwrap_or_default(), warm)
}

fn print(label: &str, rows: &[(String, Row)]) {
    println!("\n{label}");
    println!("| messages | CPU per turn | wall per turn | conversation handed to the model | appended to the store |");
    println!("|---|---|---|---|---|");
    for (n, r) in rows {
        println!("| {n} | {:.0} µs | {:.0} µs | {} B | {} B |", r.cpu_us, r.wall_us, r.handed, r.appended);
    }
    if let (Some((_, first)), Some((_, last))) = (rows.first(), rows.iter().find(|(n, _)| n == "1000")) {
        println!("1000 ÷ 10 CPU per turn: {:.2} (goal ≤ 2)", last.cpu_us / first.cpu_us);
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument is not used.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        println!(
            "Long sessions: one turn, median over {SESSIONS} sessions per size; load average {}",
            load.split_whitespace().next().unwrap_or("?")
        );
        let mut rows = Vec::new();
        for n in SIZES {
            rows.push((n.to_string(), without_store(n).await));
        }
        print("Without a store (`Agent::run_messages` with the history)", &rows);

        let dir = tempfile::tempdir().unwrap();
        let mut stores = vec![("SQLite".to_string(), format!("sqlite://{}", dir.path().join("s.db").display()))];
        if let Ok(admin) = std::env::var("AMBIT_BENCH_POSTGRES_URL") {
            stores.push(("PostgreSQL".to_string(), fresh_postgres(&admin).await));
        }
        for (name, url) in &stores {
            let (mut cold, mut warm) = (Vec::new(), Vec::new());
            for n in SIZES {
                let (c, w) = with_store(url, n, false).await;
                cold.push((n.to_string(), c));
                warm.push((n.to_string(), w));
            }
            let (c, w) = with_store(url, 1000, true).await;
            cold.push(("1000, compacted to 10 live".to_string(), c));
            warm.push(("1000, compacted to 10 live".to_string(), w));
            print(&format!("{name} session store, the conversation going on (`Sessions::run`, the next turn)"), &warm);
            print(&format!("{name} session store, the first turn this process runs of it (a resume)"), &cold);
        }
    });
}
