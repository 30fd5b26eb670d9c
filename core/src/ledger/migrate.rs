//! The schema migrations, embedded in the crate and applied on open, each once, in order.

use super::error::LedgerError;

/// (version, name, SQL) for SQLite.
pub const SQLITE: &[(i64, &str, &str)] = &[
    (1, "work_ledger", include_str!("../../migrations/sqlite/0001_work_ledger.sql")),
    (2, "claim_secrets", include_str!("../../migrations/sqlite/0002_claim_secrets.sql")),
];
/// (version, name, SQL) for PostgreSQL.
pub const POSTGRES: &[(i64, &str, &str)] = &[
    (1, "work_ledger", include_str!("../../migrations/postgres/0001_work_ledger.sql")),
    (2, "claim_secrets", include_str!("../../migrations/postgres/0002_claim_secrets.sql")),
];

const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS ambit_ledger_migrations (
    version BIGINT NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)";

pub async fn sqlite(pool: &sqlx::SqlitePool, now: i64) -> Result<(), LedgerError> {
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    sqlx::query(CREATE_TABLE).execute(&mut *tx).await?;
    for &(version, name, sql) in SQLITE {
        let done: Option<i64> = sqlx::query_scalar("SELECT version FROM ambit_ledger_migrations WHERE version = ?")
            .bind(version)
            .fetch_optional(&mut *tx)
            .await?;
        if done.is_none() {
            sqlx::raw_sql(sql)
                .execute(&mut *tx)
                .await
                .map_err(|e| LedgerError::Store(format!("migration {version} ({name}): {e}")))?;
            sqlx::query("INSERT INTO ambit_ledger_migrations (version, name, applied_at) VALUES (?, ?, ?)")
                .bind(version)
                .bind(name)
                .bind(now)
                .execute(&mut *tx)
                .await?;
        }
    }
    tx.commit().await?;
    Ok(())
}

pub async fn postgres(pool: &sqlx::PgPool, now: i64) -> Result<(), LedgerError> {
    let mut tx = pool.begin().await?;
    // Two processes opening the same database at once apply the migrations one after the other.
    sqlx::query("SELECT pg_advisory_xact_lock(7411001)").execute(&mut *tx).await?;
    sqlx::query(CREATE_TABLE).execute(&mut *tx).await?;
    for &(version, name, sql) in POSTGRES {
        let done: Option<i64> = sqlx::query_scalar("SELECT version FROM ambit_ledger_migrations WHERE version = $1")
            .bind(version)
            .fetch_optional(&mut *tx)
            .await?;
        if done.is_none() {
            sqlx::raw_sql(sql)
                .execute(&mut *tx)
                .await
                .map_err(|e| LedgerError::Store(format!("migration {version} ({name}): {e}")))?;
            sqlx::query("INSERT INTO ambit_ledger_migrations (version, name, applied_at) VALUES ($1, $2, $3)")
                .bind(version)
                .bind(name)
                .bind(now)
                .execute(&mut *tx)
                .await?;
        }
    }
    tx.commit().await?;
    Ok(())
}
