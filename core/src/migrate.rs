//! The schema migrations of every store (the ledger, sessions, memory): embedded in the crate, applied
//! on open, each once and in order, in one transaction that holds the database's write lock, so two
//! processes opening one database at once apply them one after the other. Each store keeps its own
//! record table (`ambit_<store>_migrations`) and its own numbering.

use sqlx::AssertSqlSafe;

/// One migration: (version, name, SQL).
pub(crate) type Migration = (i64, &'static str, &'static str);

/// Which migrations a store has and where it records the applied ones.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Plan {
    /// The record table, e.g. `ambit_ledger_migrations`: a constant of the crate, never input, so the
    /// statements that name it are safe to build with `format!`.
    pub table: &'static str,
    /// The key of the PostgreSQL advisory lock that serializes concurrent opens.
    pub pg_lock: i64,
    pub sqlite: &'static [Migration],
    pub postgres: &'static [Migration],
}

macro_rules! runner {
    ($name:ident, $pool:ty, $begin:literal, $lock:literal, $list:ident) => {
        /// Applies the plan's migrations that this database has not recorded; the error text names the
        /// migration that failed.
        pub(crate) async fn $name(pool: &$pool, plan: &Plan, now: i64) -> Result<(), String> {
            let e = |e: sqlx::Error| e.to_string();
            let mut tx = pool.begin_with($begin).await.map_err(e)?;
            if !$lock.is_empty() {
                sqlx::query($lock).bind(plan.pg_lock).execute(&mut *tx).await.map_err(e)?;
            }
            let table = plan.table;
            sqlx::query(AssertSqlSafe(format!(
                "CREATE TABLE IF NOT EXISTS {table} (
                    version BIGINT NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)"
            )))
            .execute(&mut *tx)
            .await
            .map_err(e)?;
            for &(version, name, sql) in plan.$list {
                let done: Option<i64> =
                    sqlx::query_scalar(AssertSqlSafe(format!("SELECT version FROM {table} WHERE version = $1")))
                        .bind(version)
                        .fetch_optional(&mut *tx)
                        .await
                        .map_err(e)?;
                if done.is_none() {
                    sqlx::raw_sql(sql)
                        .execute(&mut *tx)
                        .await
                        .map_err(|e| format!("migration {version} ({name}): {e}"))?;
                    sqlx::query(AssertSqlSafe(format!(
                        "INSERT INTO {table} (version, name, applied_at) VALUES ($1, $2, $3)"
                    )))
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
    };
}

runner!(sqlite, sqlx::SqlitePool, "BEGIN IMMEDIATE", "", sqlite);
runner!(postgres, sqlx::PgPool, "BEGIN", "SELECT pg_advisory_xact_lock($1)", postgres);

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &[Migration] = &[(1, "one", "CREATE TABLE t1 (x INTEGER)"), (2, "two", "CREATE TABLE t2 (x INTEGER)")];
    const BAD: &[Migration] = &[
        (1, "one", "CREATE TABLE t1 (x INTEGER)"),
        (2, "two", "CREATE TABLE t2 (x INTEGER)"),
        (3, "broken", "CREATE TABLE t3 (x INTEGER); THIS IS NOT SQL"),
    ];

    fn plan(sqlite: &'static [Migration]) -> Plan {
        Plan { table: "ambit_test_migrations", pg_lock: 1, sqlite, postgres: &[] }
    }

    async fn recorded(pool: &sqlx::SqlitePool) -> Vec<i64> {
        sqlx::query_scalar("SELECT version FROM ambit_test_migrations ORDER BY version").fetch_all(pool).await.unwrap()
    }

    #[tokio::test]
    async fn each_migration_applies_once_and_a_failing_one_names_itself_and_applies_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("m.db").display());
        let pool = sqlx::SqlitePool::connect(&url).await.unwrap();
        sqlite(&pool, &plan(GOOD), 1).await.unwrap();
        // Again: nothing is applied twice (CREATE TABLE t1 would fail if it were).
        sqlite(&pool, &plan(GOOD), 2).await.unwrap();
        assert_eq!(recorded(&pool).await, vec![1, 2]);
        let err = sqlite(&pool, &plan(BAD), 3).await.unwrap_err();
        assert!(err.starts_with("migration 3 (broken): "), "{err}");
        // The whole open is one transaction: the broken migration's first statement is not kept either.
        assert_eq!(recorded(&pool).await, vec![1, 2]);
        let t3: Option<String> =
            sqlx::query_scalar("SELECT name FROM sqlite_master WHERE name = 't3'").fetch_optional(&pool).await.unwrap();
        assert_eq!(t3, None);
    }
}
