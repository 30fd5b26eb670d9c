//! The schema migrations, embedded in the crate and applied on open, each once, in order. The runner
//! is shared: the ledger's migrations and the routines' (`crate::routine`) each keep their own table of
//! applied versions.

use sqlx::AssertSqlSafe;

use super::error::LedgerError;

/// A migration: (version, name, SQL).
pub(crate) type Migration = (i64, &'static str, &'static str);

/// (version, name, SQL) for SQLite.
pub const SQLITE: &[Migration] = &[
    (1, "work_ledger", include_str!("../../migrations/sqlite/0001_work_ledger.sql")),
    (2, "claim_secrets", include_str!("../../migrations/sqlite/0002_claim_secrets.sql")),
];
/// (version, name, SQL) for PostgreSQL.
pub const POSTGRES: &[Migration] = &[
    (1, "work_ledger", include_str!("../../migrations/postgres/0001_work_ledger.sql")),
    (2, "claim_secrets", include_str!("../../migrations/postgres/0002_claim_secrets.sql")),
];

pub async fn sqlite(pool: &sqlx::SqlitePool, now: i64) -> Result<(), LedgerError> {
    apply_sqlite(pool, "ambit_ledger_migrations", SQLITE, now).await.map_err(LedgerError::Store)
}

pub async fn postgres(pool: &sqlx::PgPool, now: i64) -> Result<(), LedgerError> {
    apply_postgres(pool, "ambit_ledger_migrations", 7411001, POSTGRES, now).await.map_err(LedgerError::Store)
}

fn create_table(table: &str) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (
    version BIGINT NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)"
    )
}

/// Applies the `migrations` not yet recorded in `table`, in one IMMEDIATE transaction.
pub(crate) async fn apply_sqlite(
    pool: &sqlx::SqlitePool,
    table: &'static str,
    migrations: &[Migration],
    now: i64,
) -> Result<(), String> {
    let e = |e: sqlx::Error| e.to_string();
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.map_err(e)?;
    sqlx::query(AssertSqlSafe(create_table(table))).execute(&mut *tx).await.map_err(e)?;
    for &(version, name, sql) in migrations {
        let done: Option<i64> =
            sqlx::query_scalar(AssertSqlSafe(format!("SELECT version FROM {table} WHERE version = ?")))
                .bind(version)
                .fetch_optional(&mut *tx)
                .await
                .map_err(e)?;
        if done.is_none() {
            sqlx::raw_sql(sql).execute(&mut *tx).await.map_err(|e| format!("migration {version} ({name}): {e}"))?;
            sqlx::query(AssertSqlSafe(format!("INSERT INTO {table} (version, name, applied_at) VALUES (?, ?, ?)")))
                .bind(version)
                .bind(name)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(e)?;
        }
    }
    tx.commit().await.map_err(e)
}

/// Applies the `migrations` not yet recorded in `table`, in one transaction holding the advisory lock
/// `lock_key`: two processes opening the same database at once apply them one after the other.
pub(crate) async fn apply_postgres(
    pool: &sqlx::PgPool,
    table: &'static str,
    lock_key: i64,
    migrations: &[Migration],
    now: i64,
) -> Result<(), String> {
    let e = |e: sqlx::Error| e.to_string();
    let mut tx = pool.begin().await.map_err(e)?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(lock_key).execute(&mut *tx).await.map_err(e)?;
    sqlx::query(AssertSqlSafe(create_table(table))).execute(&mut *tx).await.map_err(e)?;
    for &(version, name, sql) in migrations {
        let done: Option<i64> =
            sqlx::query_scalar(AssertSqlSafe(format!("SELECT version FROM {table} WHERE version = $1")))
                .bind(version)
                .fetch_optional(&mut *tx)
                .await
                .map_err(e)?;
        if done.is_none() {
            sqlx::raw_sql(sql).execute(&mut *tx).await.map_err(|e| format!("migration {version} ({name}): {e}"))?;
            sqlx::query(AssertSqlSafe(format!("INSERT INTO {table} (version, name, applied_at) VALUES ($1, $2, $3)")))
                .bind(version)
                .bind(name)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(e)?;
        }
    }
    tx.commit().await.map_err(e)
}
