//! The two session stores the session tests run on: SQLite in a temp dir, and a fresh database on the
//! PostgreSQL server of `AMBIT_TEST_POSTGRES_URL` (started by scripts/test.sh; a test fails without it
//! rather than skipping).

use std::sync::atomic::{AtomicU32, Ordering};

use sqlx::Connection;

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// One store: its name (`sqlite`, `postgres`) and URL; the temp dir lives as long as it.
pub struct Store {
    pub name: &'static str,
    pub url: String,
    _dir: Option<tempfile::TempDir>,
}

/// A fresh SQLite store and a fresh PostgreSQL database.
pub async fn stores() -> Vec<Store> {
    let dir = tempfile::tempdir().unwrap();
    let sqlite =
        Store { name: "sqlite", url: format!("sqlite://{}", dir.path().join("s.db").display()), _dir: Some(dir) };
    let admin = std::env::var("AMBIT_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        panic!(
            "AMBIT_TEST_POSTGRES_URL is not set: the session tests run on PostgreSQL too. Run `bash scripts/test.sh`."
        )
    });
    let db = format!("ambit_s_{}_{}", std::process::id(), COUNTER.fetch_add(1, Ordering::SeqCst));
    let mut c = sqlx::PgConnection::connect(&admin).await.expect("connect to the test PostgreSQL server");
    sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {db}"))).execute(&mut c).await.unwrap();
    let base = admin.rsplit_once('/').map(|(b, _)| b.to_string()).unwrap();
    vec![sqlite, Store { name: "postgres", url: format!("{base}/{db}"), _dir: None }]
}
