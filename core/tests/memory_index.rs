//! The memory index (core/src/memory/index.rs) on SQLite and PostgreSQL: a store written by the schema
//! before the index (migration 1 only, its rows written as that version wrote them) is upgraded on open
//! and every old memory is found, updated and forgotten through the index; so is a store written with the
//! postings index before the blocks (fixtures/memory_v2_*.sql); the ranked recall returns with a small
//! limit exactly the head of the order a large limit gives, with filters too.

#[path = "ledger_support/mod.rs"]
mod ledger_support;

use std::sync::Arc;

use ambit::memory::{ManualClock, Memory, MemoryKind, MemoryOptions, Recall, Remember, Target};
use ledger_support::{T0, TestStore, postgres_store, sqlite_store};
use sqlx::Connection;

const OLD_SQLITE: &str = include_str!("../migrations/sqlite/memory_0001.sql");
const OLD_POSTGRES: &str = include_str!("../migrations/postgres/memory_0001.sql");

async fn open(s: &TestStore) -> Memory {
    Memory::open_with(&s.url, MemoryOptions { clock: Arc::new(ManualClock::new(T0)), ..MemoryOptions::default() })
        .await
        .unwrap_or_else(|e| panic!("{}: open failed: {e}", s.name))
}

const RECORD: &str = "CREATE TABLE ambit_memory_migrations (
    version BIGINT NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL);
    INSERT INTO ambit_memory_migrations VALUES (1, 'memory', 0);";
const OLD_ROW: &str = "INSERT INTO ambit_memories (agent, mkey, kind, title, body, tags, tags_text, salience, pinned, \
                       created_at, updated_at) VALUES ($1, $2, 'fact', $3, $4, '|ops|', 'ops', 5, 0, 0, 0)";
const OLD: [(&str, &str, &str, &str); 3] = [
    ("a", "vpn", "VPN", "The VPN configuration lives in ops/vpn and rotates monthly."),
    ("a", "deploy", "Deploys", "Production deploys happen on Tuesdays after the standup."),
    ("b", "vpn", "VPN", "Agent b keeps its own VPN notes."),
];

/// Writes a store as the schema before the index did: migration 1 only, rows by its triggers.
async fn old_store(s: &TestStore) {
    if s.is_sqlite() {
        let mut c = sqlx::SqliteConnection::connect(&format!("{}?mode=rwc", s.url)).await.unwrap();
        sqlx::raw_sql(OLD_SQLITE).execute(&mut c).await.unwrap();
        sqlx::raw_sql(RECORD).execute(&mut c).await.unwrap();
        for (agent, key, title, body) in OLD {
            sqlx::query(OLD_ROW).bind(agent).bind(key).bind(title).bind(body).execute(&mut c).await.unwrap();
        }
    } else {
        let mut c = sqlx::PgConnection::connect(&s.url).await.unwrap();
        sqlx::raw_sql(OLD_POSTGRES).execute(&mut c).await.unwrap();
        sqlx::raw_sql(RECORD).execute(&mut c).await.unwrap();
        for (agent, key, title, body) in OLD {
            sqlx::query(OLD_ROW).bind(agent).bind(key).bind(title).bind(body).execute(&mut c).await.unwrap();
        }
    }
}

fn keys(ms: &[ambit::memory::MemoryRecord]) -> Vec<String> {
    ms.iter().map(|m| m.key.clone().unwrap_or_default()).collect()
}

#[tokio::test]
async fn a_store_written_before_the_index_is_upgraded_on_open() {
    for s in [sqlite_store().await, postgres_store().await] {
        old_store(&s).await;
        let mem = open(&s).await;
        // Every old memory is found, in its own namespace only.
        assert_eq!(keys(&mem.recall("a", &Recall::query("vpn configuration")).await.unwrap()), ["vpn"], "{}", s.name);
        assert_eq!(keys(&mem.recall("a", &Recall::query("deploying")).await.unwrap()), ["deploy"], "{}", s.name);
        assert_eq!(keys(&mem.recall("b", &Recall::query("vpn")).await.unwrap()), ["vpn"], "{}", s.name);
        // A second open finds nothing left to index and changes nothing.
        let again = open(&s).await;
        assert_eq!(keys(&again.recall("a", &Recall::query("vpn")).await.unwrap()), ["vpn"], "{}", s.name);
        // An old memory updated in place is found by its new words only; a forgotten one is gone.
        mem.remember("a", Remember::new("The VPN moved to the wireguard host.").key("vpn")).await.unwrap();
        assert!(mem.recall("a", &Recall::query("monthly")).await.unwrap().is_empty(), "{}", s.name);
        assert_eq!(keys(&mem.recall("a", &Recall::query("wireguard")).await.unwrap()), ["vpn"], "{}", s.name);
        assert!(mem.forget("a", &Target::Key("deploy".into())).await.unwrap());
        assert!(mem.recall("a", &Recall::query("tuesday deploys")).await.unwrap().is_empty(), "{}", s.name);
    }
}

const V2_SQLITE: &str = include_str!("fixtures/memory_v2_sqlite.sql");
const V2_POSTGRES: &str = include_str!("fixtures/memory_v2_postgres.sql");

/// Loads a store written by ambit before the blocks (migrations 1 and 2, memories remembered, one
/// updated, one forgotten through the API; see the fixtures' heads), and says whether it has blocks.
async fn v2_store(s: &TestStore) {
    if s.is_sqlite() {
        let mut c = sqlx::SqliteConnection::connect(&format!("{}?mode=rwc", s.url)).await.unwrap();
        sqlx::raw_sql(V2_SQLITE).execute(&mut c).await.unwrap();
    } else {
        let mut c = sqlx::PgConnection::connect(&s.url).await.unwrap();
        sqlx::raw_sql(V2_POSTGRES).execute(&mut c).await.unwrap();
    }
}

/// The number of block rows of a store, `None` when it has no blocks table.
async fn blocks(s: &TestStore) -> Option<i64> {
    let sql = "SELECT count(*) FROM ambit_memory_blocks";
    if s.is_sqlite() {
        let mut c = sqlx::SqliteConnection::connect(&s.url).await.unwrap();
        sqlx::query_scalar(sql).fetch_one(&mut c).await.ok()
    } else {
        let mut c = sqlx::PgConnection::connect(&s.url).await.unwrap();
        sqlx::query_scalar(sql).fetch_one(&mut c).await.ok()
    }
}

#[tokio::test]
async fn a_store_written_with_the_postings_index_is_carried_to_the_blocks_on_open() {
    for s in [sqlite_store().await, postgres_store().await] {
        v2_store(&s).await;
        // Negative control: the store as written has no blocks.
        assert_eq!(blocks(&s).await, None, "{}", s.name);
        let mem = open(&s).await;
        assert!(blocks(&s).await.is_some_and(|n| n > 0), "{}: opening re-indexed the memories into blocks", s.name);
        assert_eq!(keys(&mem.recall("a", &Recall::query("vpn configuration")).await.unwrap()), ["vpn"], "{}", s.name);
        assert_eq!(keys(&mem.recall("b", &Recall::query("vpn")).await.unwrap()), ["vpn"], "{}", s.name);
        assert_eq!(keys(&mem.recall("a", &Recall::query("hourly")).await.unwrap()), ["backup"], "{}", s.name);
        assert_eq!(
            keys(&mem.recall("a", &Recall::query("deploys")).await.unwrap()),
            ["freeze", "deploy"],
            "{}",
            s.name
        );
        // The memory forgotten before the upgrade stays forgotten.
        assert!(mem.recall("a", &Recall::query("refund invoices")).await.unwrap().is_empty(), "{}", s.name);
        // Writes after the upgrade keep the blocks: an update is found by its new words only.
        mem.remember("a", Remember::new("Production deploys happen on Thursdays now.").key("deploy")).await.unwrap();
        assert_eq!(keys(&mem.recall("a", &Recall::query("thursdays")).await.unwrap()), ["deploy"], "{}", s.name);
        assert!(mem.recall("a", &Recall::query("tuesdays standup")).await.unwrap().is_empty(), "{}", s.name);
        assert!(mem.forget("a", &Target::Key("vpn".into())).await.unwrap());
        assert!(mem.recall("a", &Recall::query("vpn")).await.unwrap().is_empty(), "{}", s.name);
        assert_eq!(keys(&mem.recall("b", &Recall::query("vpn")).await.unwrap()), ["vpn"], "{}", s.name);
        // A second open indexes nothing again.
        let again = open(&s).await;
        assert_eq!(keys(&again.recall("a", &Recall::query("hourly")).await.unwrap()), ["backup"], "{}", s.name);
    }
}

/// Moves the store's next memory id to `next` (so the memories written after it fall in another block
/// of every term's list).
async fn skip_ids(s: &TestStore, next: i64) {
    if s.is_sqlite() {
        let mut c = sqlx::SqliteConnection::connect(&s.url).await.unwrap();
        sqlx::query("UPDATE sqlite_sequence SET seq = $1 WHERE name = 'ambit_memories'")
            .bind(next - 1)
            .execute(&mut c)
            .await
            .unwrap();
    } else {
        let mut c = sqlx::PgConnection::connect(&s.url).await.unwrap();
        sqlx::query("SELECT setval(pg_get_serial_sequence('ambit_memories', 'id'), $1)")
            .bind(next - 1)
            .execute(&mut c)
            .await
            .unwrap();
    }
}

/// A deterministic generator (xorshift).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

const WORDS: &[&str] = &[
    "deploy",
    "release",
    "invoice",
    "refund",
    "vpn",
    "rotation",
    "schedule",
    "backup",
    "database",
    "customer",
    "approval",
    "tuesday",
    "incident",
    "kubernetes",
    "billing",
    "quota",
    "latency",
    "cache",
    "token",
    "audit",
];

/// The rounds lose nothing: a recall with a smaller limit checks fewer of the best memories against the
/// filters and must return exactly the first memories of the order a recall with limit 50 gives, with a
/// filter too, on both stores alike; the memories span two blocks of each term's list.
#[tokio::test]
async fn the_early_stop_returns_exactly_the_full_order_with_and_without_filters() {
    let mut orders = Vec::new();
    for s in [sqlite_store().await, postgres_store().await] {
        let mem = open(&s).await;
        let mut rng = Rng(0x2545_F491_4F6C_DD1D);
        for i in 0..400 {
            if i == 200 {
                // The second half straddles the next block boundary (4,096).
                skip_ids(&s, 4_000).await;
            }
            let pick = |rng: &mut Rng, n: usize| -> String {
                (0..n).map(|_| WORDS[(rng.next() % WORDS.len() as u64) as usize]).collect::<Vec<_>>().join(" ")
            };
            let title = pick(&mut rng, 2);
            let length = 3 + (rng.next() % 40) as usize;
            let body = pick(&mut rng, length);
            let kind = if i % 3 == 0 { MemoryKind::Lesson } else { MemoryKind::Fact };
            let m = Remember::new(body)
                .title(title)
                .kind(kind)
                .salience(1 + (rng.next() % 10) as i64)
                .tags([WORDS[i % WORDS.len()]]);
            mem.remember("a", m).await.unwrap();
        }
        let mut per_store = Vec::new();
        for q in ["deploy release tuesday", "refund invoice approval billing", "vpn", "cache latency quota token"] {
            for kind in [None, Some(MemoryKind::Lesson)] {
                let recall = |limit| {
                    let r = Recall::query(q).limit(limit);
                    match kind {
                        Some(k) => r.kind(k),
                        None => r,
                    }
                };
                let full: Vec<i64> = mem.recall("a", &recall(50)).await.unwrap().iter().map(|m| m.id).collect();
                assert_eq!(full.len(), 50, "{}: {q}", s.name);
                for k in [1, 3, 10, 25] {
                    let top: Vec<i64> = mem.recall("a", &recall(k)).await.unwrap().iter().map(|m| m.id).collect();
                    assert_eq!(top, full[..k], "{}: {q} {kind:?} limit {k}", s.name);
                }
                per_store.push(full);
            }
        }
        orders.push(per_store);
    }
    assert_eq!(orders[0], orders[1], "both stores rank alike");
}

#[tokio::test]
async fn a_long_run_of_ties_is_ordered_by_the_tiebreak_with_and_without_a_filter() {
    for s in [sqlite_store().await, postgres_store().await] {
        let mem = open(&s).await;
        // Thirty memories the query matches equally, told apart only by the tiebreak. A small limit checks
        // the whole run at once for the tiebreak's fields alone (more than the check reads whole); a limit
        // of 30 reads them whole: both give the baseline's order.
        for i in 0..30i64 {
            let kind = if i % 2 == 0 { MemoryKind::Lesson } else { MemoryKind::Fact };
            let m = Remember::new("rotate the signing keys")
                .title("Key rotation")
                .salience(1 + (i * 7) % 10)
                .pinned(i % 11 == 4)
                .kind(kind);
            mem.remember("a", m).await.unwrap();
        }
        let ids = |ms: Vec<ambit::memory::MemoryRecord>| ms.iter().map(|m| m.id).collect::<Vec<_>>();
        for kind in [None, Some(MemoryKind::Lesson)] {
            let with = |r: Recall| match kind {
                Some(k) => r.kind(k),
                None => r,
            };
            let baseline = ids(mem.recall("a", &with(Recall::baseline().limit(30))).await.unwrap());
            assert_eq!(baseline.len(), if kind.is_some() { 15 } else { 30 }, "{}", s.name);
            let mut by_id = baseline.clone();
            by_id.sort_unstable_by(|a, b| b.cmp(a));
            assert_ne!(baseline, by_id, "{}: the control, the tiebreak is not the id order alone", s.name);
            for k in [1, 2, 3, baseline.len()] {
                let q = ids(mem.recall("a", &with(Recall::query("signing key rotation").limit(k))).await.unwrap());
                assert_eq!(q, baseline[..k], "{}: {kind:?} limit {k}", s.name);
            }
        }
    }
}
