//! Shared by the ledger tests: a fresh SQLite file and a fresh PostgreSQL database per test, and a
//! checksum of a scope's rows. PostgreSQL comes from `AMBIT_TEST_POSTGRES_URL`, which scripts/test.sh
//! always sets (it starts a server); without it the PostgreSQL half of every test fails.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use ambit::ledger::{Clock, Ledger, LedgerOptions};
use sqlx::{Connection, Row};

pub const T0: i64 = 1_750_000_000_000;
pub const HOUR: i64 = 3_600_000;

/// One store to run a test on.
pub struct TestStore {
    pub name: &'static str,
    pub url: String,
    _dir: Option<tempfile::TempDir>,
}

impl TestStore {
    pub async fn open(&self, clock: Arc<dyn Clock>) -> Ledger {
        Ledger::open_with(&self.url, LedgerOptions { clock, ..LedgerOptions::default() })
            .await
            .unwrap_or_else(|e| panic!("{}: open failed: {e}", self.name))
    }

    pub fn is_sqlite(&self) -> bool {
        self.url.starts_with("sqlite://")
    }

    /// A digest of every row of `scope` in the ledger's tables, plus the routine pins and reports.
    pub async fn checksum(&self, scope: &str) -> String {
        let items = "SELECT scope || '|' || subject_key || '|' || COALESCE(routine_id, '-') || '|' || attempts || '|' || misses \
            || '|' || claim_token || '|' || COALESCE(CAST(lease_until AS TEXT), '-') || '|' || COALESCE(lease_run_id, '-') \
            || '|' || COALESCE(CAST(eligible_at AS TEXT), '-') || '|' || COALESCE(fingerprint, '-') || '|' || COALESCE(last_outcome, '-') \
            || '|' || COALESCE(last_grant_reason, '-') || '|' || COALESCE(CAST(last_attempt_at AS TEXT), '-') \
            FROM ambit_ledger_items WHERE scope = $1 ORDER BY subject_key";
        let attempts = "SELECT subject_key || '|' || token || '|' || COALESCE(run_id, '-') || '|' || grant_reason || '|' || granted_at \
            || '|' || lease_until || '|' || COALESCE(outcome, '-') || '|' || COALESCE(CAST(finished_at AS TEXT), '-') \
            FROM ambit_ledger_attempts WHERE scope = $1 ORDER BY subject_key, token";
        let pins = "SELECT routine_id || '|' || scope FROM ambit_ledger_routines WHERE scope = $1 ORDER BY routine_id";
        let mut out = String::new();
        for sql in [items, attempts, pins] {
            let rows: Vec<String> = if self.is_sqlite() {
                let mut c = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
                let rows = sqlx::query(sql).bind(scope).fetch_all(&mut c).await.unwrap();
                rows.iter().map(|r| r.get::<String, _>(0)).collect()
            } else {
                let mut c = sqlx::PgConnection::connect(&self.url).await.unwrap();
                let rows = sqlx::query(sql).bind(scope).fetch_all(&mut c).await.unwrap();
                rows.iter().map(|r| r.get::<String, _>(0)).collect()
            };
            out.push_str(&rows.join("\n"));
            out.push_str("\n--\n");
        }
        out
    }
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// The PostgreSQL server the test script started. Missing means the suite was not started by
/// scripts/test.sh (or the variable was not passed on): the test fails rather than skipping.
pub fn postgres_url() -> String {
    std::env::var("AMBIT_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!(
            "AMBIT_TEST_POSTGRES_URL is not set: the ledger tests run on PostgreSQL too. Run `bash scripts/test.sh`, \
             or start a server with `bash scripts/postgres.sh start DIR` and export the URL it prints."
        )
    })
}

pub async fn sqlite_store() -> TestStore {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("ledger.db").display());
    TestStore { name: "sqlite", url, _dir: Some(dir) }
}

/// A new database on the test server, so each test starts from an empty schema.
pub async fn postgres_store() -> TestStore {
    let admin = postgres_url();
    let name = format!(
        "ambit_t_{}_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos()
    );
    let mut c = sqlx::PgConnection::connect(&admin).await.expect("connect to the test PostgreSQL server");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&mut c).await.unwrap();
    let base = admin.rsplit_once('/').map(|(b, _)| b.to_string()).unwrap();
    TestStore { name: "postgres", url: format!("{base}/{name}"), _dir: None }
}

/// Both stores, fresh.
pub async fn stores() -> Vec<TestStore> {
    vec![sqlite_store().await, postgres_store().await]
}
