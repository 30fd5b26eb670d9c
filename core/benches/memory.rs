//! Recall over 100,000 memories of one agent, p50 and p99, on SQLite and PostgreSQL (goal: p50 under
//! 5 ms, p99 under 20 ms). The store is created by `Memory::open`, seeded through SQL in a few large
//! transactions from a deterministic generator over the words of tests/memory/, and opened again: the
//! rows are unindexed, as a store written before the index was, and opening indexes them (timed); the
//! 62 questions of tests/memory/queries.tsv are then recalled through
//! the public API (`Memory::recall`, limit 10) round after round, and the baseline (no query) too; then
//! writes on the full store: 200 memories remembered, updated in place and forgotten, each timed.
//! PostgreSQL is measured when `AMBIT_BENCH_POSTGRES_URL` (or `AMBIT_TEST_POSTGRES_URL`) names a server.
//! `AMBIT_BENCH_MEMORIES` changes the count, `AMBIT_BENCH_ROUNDS` the rounds of questions (for a profile);
//! `AMBIT_BENCH_VACUUM` vacuums the PostgreSQL store after it is indexed, before the measurement.

use std::time::{Duration, Instant};

use ambit::memory::{Memory, Recall, Remember, Target};

const MEMORIES: [&str; 3] = [
    include_str!("../../tests/memory/memories_a.tsv"),
    include_str!("../../tests/memory/memories_b.tsv"),
    include_str!("../../tests/memory/memories_c.tsv"),
];
const QUERIES: &str = include_str!("../../tests/memory/queries.tsv");
const ROUNDS: usize = 2;
/// How many memories the write measurement remembers, then updates, then forgets.
const WRITES: usize = 200;

/// A deterministic generator (xorshift).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a>(&mut self, words: &'a [&'a str]) -> &'a str {
        words[(self.next() % words.len() as u64) as usize]
    }
}

/// Rows of synthetic memories: (title, body, tags, salience).
fn rows(n: usize) -> Vec<(String, String, String, i64)> {
    let text: String = MEMORIES.concat();
    let words: Vec<&str> = text.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 2).collect();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    (0..n)
        .map(|_| {
            let title: Vec<&str> = (0..3).map(|_| rng.pick(&words)).collect();
            let body: Vec<&str> = (0..25).map(|_| rng.pick(&words)).collect();
            let tags: Vec<String> = (0..2).map(|_| rng.pick(&words).to_lowercase()).collect();
            (title.join(" "), body.join(" "), tags.join(" "), 1 + (rng.next() % 10) as i64)
        })
        .collect()
}

const INSERT: &str = "INSERT INTO ambit_memories (agent, kind, title, body, tags, tags_text, salience, pinned, created_at, updated_at) \
                      VALUES ('bench', 'fact', $1, $2, $3, $4, $5, 0, 0, 0)";

async fn seed_sqlite(url: &str, n: usize) {
    use sqlx::Connection;
    let mut c = sqlx::SqliteConnection::connect(url).await.expect("connect");
    let mut tx = c.begin().await.expect("begin");
    for (title, body, tags, salience) in rows(n) {
        sqlx::query(INSERT)
            .bind(title)
            .bind(body)
            .bind(format!("|{}|", tags.replace(' ', "|")))
            .bind(tags)
            .bind(salience)
            .execute(&mut *tx)
            .await
            .expect("insert");
    }
    tx.commit().await.expect("commit");
}

async fn seed_postgres(url: &str, n: usize) {
    use sqlx::Connection;
    let mut c = sqlx::PgConnection::connect(url).await.expect("connect");
    for chunk in rows(n).chunks(5_000) {
        let mut tx = c.begin().await.expect("begin");
        for (title, body, tags, salience) in chunk {
            sqlx::query(INSERT)
                .bind(title)
                .bind(body)
                .bind(format!("|{}|", tags.replace(' ', "|")))
                .bind(tags)
                .bind(salience)
                .execute(&mut *tx)
                .await
                .expect("insert");
        }
        tx.commit().await.expect("commit");
    }
    sqlx::query("ANALYZE ambit_memories").execute(&mut c).await.expect("analyze");
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

async fn measure(name: &str, memory: &Memory) {
    let queries: Vec<&str> = QUERIES.lines().filter_map(|l| l.split('\t').next()).filter(|q| !q.is_empty()).collect();
    // One warm-up round.
    for q in &queries {
        memory.recall("bench", &Recall::query(*q)).await.expect("recall");
    }
    let mut times = Vec::new();
    let mut slowest: Vec<(Duration, &str)> = Vec::new();
    let rounds = std::env::var("AMBIT_BENCH_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(ROUNDS);
    for _ in 0..rounds {
        for q in &queries {
            let start = Instant::now();
            let hits = memory.recall("bench", &Recall::query(*q)).await.expect("recall");
            let took = start.elapsed();
            times.push(took);
            slowest.push((took, q));
            std::hint::black_box(hits);
        }
    }
    times.sort();
    slowest.sort_by_key(|s| std::cmp::Reverse(s.0));
    let mut baseline = Vec::new();
    for _ in 0..100 {
        let start = Instant::now();
        std::hint::black_box(memory.recall("bench", &Recall::baseline()).await.expect("baseline"));
        baseline.push(start.elapsed());
    }
    baseline.sort();
    // Writes on the full store: new memories (their words drawn as the seeded ones were), then updates of
    // them in place (new words), then forgets; each its own transaction through the public API.
    let mut writes: [Vec<Duration>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    let fresh = rows(WRITES * 2);
    for (i, (title, body, tags, salience)) in fresh.iter().take(WRITES).enumerate() {
        let m = Remember::new(body.clone())
            .title(title.clone())
            .tags(tags.split(' '))
            .salience(*salience)
            .key(format!("w{i}"));
        let start = Instant::now();
        memory.remember("bench", m).await.expect("remember");
        writes[0].push(start.elapsed());
    }
    for (i, (title, body, _, _)) in fresh.iter().skip(WRITES).enumerate() {
        let m = Remember::new(body.clone()).title(title.clone()).key(format!("w{i}"));
        let start = Instant::now();
        memory.remember("bench", m).await.expect("update");
        writes[1].push(start.elapsed());
    }
    for i in 0..WRITES {
        let start = Instant::now();
        memory.forget("bench", &Target::Key(format!("w{i}"))).await.expect("forget");
        writes[2].push(start.elapsed());
    }
    for w in writes.iter_mut() {
        w.sort();
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "memory writes {name}: remember p50 {:.2} ms, p99 {:.2} ms; update p50 {:.2} ms, p99 {:.2} ms; forget p50 {:.2} ms, p99 {:.2} ms",
        ms(percentile(&writes[0], 0.5)),
        ms(percentile(&writes[0], 0.99)),
        ms(percentile(&writes[1], 0.5)),
        ms(percentile(&writes[1], 0.99)),
        ms(percentile(&writes[2], 0.5)),
        ms(percentile(&writes[2], 0.99)),
    );
    println!(
        "memory recall {name}: {} queries, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; baseline p50 {:.2} ms, p99 {:.2} ms",
        times.len(),
        percentile(&times, 0.5).as_secs_f64() * 1e3,
        percentile(&times, 0.99).as_secs_f64() * 1e3,
        times[times.len() - 1].as_secs_f64() * 1e3,
        percentile(&baseline, 0.5).as_secs_f64() * 1e3,
        percentile(&baseline, 0.99).as_secs_f64() * 1e3,
    );
    let slow: Vec<String> = slowest.iter().take(4).map(|(d, q)| format!("{:.2} ms {q:?}", ms(*d))).collect();
    println!("memory recall {name}: slowest {}", slow.join("; "));
}

async fn fresh_postgres(admin: &str) -> String {
    use sqlx::Connection;
    let name = format!("ambit_bench_memory_{}", std::process::id());
    let mut c = sqlx::PgConnection::connect(admin).await.expect("connect to PostgreSQL");
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {name}"))).execute(&mut c).await.expect("drop");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut c).await.expect("create");
    let base = admin.rsplit_once('/').map(|(b, _)| b.to_string()).expect("a database URL");
    format!("{base}/{name}")
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs it with a small count as a smoke test.
    let bench = std::env::args().any(|a| a == "--bench");
    let n: usize = std::env::var("AMBIT_BENCH_MEMORIES").ok().and_then(|v| v.parse().ok()).unwrap_or(if bench {
        100_000
    } else {
        1_000
    });
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = format!("sqlite://{}", dir.path().join("memory.db").display());
        Memory::open(&url).await.expect("create");
        let start = Instant::now();
        seed_sqlite(&url, n).await;
        println!("seeded {n} memories on sqlite in {:.1} s", start.elapsed().as_secs_f64());
        let start = Instant::now();
        let memory = Memory::open(&url).await.expect("open");
        println!("indexed them on open in {:.1} s", start.elapsed().as_secs_f64());
        measure(&format!("sqlite, {n} memories"), &memory).await;

        let pg = std::env::var("AMBIT_BENCH_POSTGRES_URL").or_else(|_| std::env::var("AMBIT_TEST_POSTGRES_URL"));
        match pg {
            Ok(admin) => {
                let url = fresh_postgres(&admin).await;
                Memory::open(&url).await.expect("create");
                let start = Instant::now();
                seed_postgres(&url, n).await;
                println!("seeded {n} memories on postgres in {:.1} s", start.elapsed().as_secs_f64());
                let start = Instant::now();
                let memory = Memory::open(&url).await.expect("open");
                println!("indexed them on open in {:.1} s", start.elapsed().as_secs_f64());
                if std::env::var_os("AMBIT_BENCH_VACUUM").is_some() {
                    // Settles the freshly indexed tables first, so autovacuum does not run during the
                    // measurement (to tell its share of the tail from the machine's).
                    use sqlx::Connection;
                    let mut c = sqlx::PgConnection::connect(&url).await.expect("connect");
                    sqlx::query("VACUUM ANALYZE").execute(&mut c).await.expect("vacuum");
                    println!("vacuumed");
                }
                measure(&format!("postgres, {n} memories"), &memory).await;
            }
            Err(_) => {
                println!("memory recall postgres: skipped (no AMBIT_BENCH_POSTGRES_URL or AMBIT_TEST_POSTGRES_URL)")
            }
        }
    });
}
