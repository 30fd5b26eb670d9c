//! The session stores: SQLite (one file, WAL) by default, PostgreSQL by URL, both through sqlx with
//! their migrations applied on open. Appending is the only write to the log: an append takes the
//! session's row lock and numbers its entries after the last one.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{PgPool, Row, SqlitePool};

use super::rules::{Entry, Item};
use super::{SessionError, SessionState};

/// Where sessions live. Implemented for SQLite and PostgreSQL.
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Creates a session; one that exists already is left as it is.
    async fn create(&self, session_id: &str, parent_id: Option<&str>, now: i64) -> Result<(), SessionError>;
    /// Appends entries in order; returns their indexes.
    async fn append(&self, session_id: &str, items: &[Item], now: i64) -> Result<Vec<i64>, SessionError>;
    /// The whole log, in order.
    async fn entries(&self, session_id: &str) -> Result<Vec<Entry>, SessionError>;
    async fn state(&self, session_id: &str) -> Result<SessionState, SessionError>;
    async fn set_state(&self, session_id: &str, state: &SessionState, now: i64) -> Result<(), SessionError>;
}

/// (version, name, SQL), applied in order, each once.
const SQLITE: &[(i64, &str, &str)] = &[(1, "sessions", include_str!("../../migrations/sqlite/sessions_0001.sql"))];
const POSTGRES: &[(i64, &str, &str)] = &[(1, "sessions", include_str!("../../migrations/postgres/sessions_0001.sql"))];
const MIGRATIONS_TABLE: &str = "CREATE TABLE IF NOT EXISTS ambit_session_migrations (
    version BIGINT NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)";

fn store_err(e: sqlx::Error) -> SessionError {
    SessionError::Store(e.to_string())
}

fn entry(kind: &str, body: &str, index: i64) -> Result<Entry, SessionError> {
    Ok(Entry { index, item: Item::from_stored(kind, body).map_err(SessionError::Store)? })
}

fn state_of(state: String, parked: Option<String>) -> Result<SessionState, SessionError> {
    let parked =
        parked.map(|p| serde_json::from_str(&p)).transpose().map_err(|e| SessionError::Store(e.to_string()))?;
    Ok(SessionState { state, parked })
}

/// Sessions in one SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteSessions {
    pool: SqlitePool,
}

impl SqliteSessions {
    pub async fn open(path: &str, now: i64) -> Result<SqliteSessions, SessionError> {
        if path.is_empty() {
            return Err(SessionError::InvalidArgument("sqlite:// needs a file path".into()));
        }
        let connect = SqliteConnectOptions::from_str("sqlite://")
            .map_err(|e| SessionError::InvalidArgument(e.to_string()))?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(Duration::from_secs(30));
        let pool = SqlitePoolOptions::new().max_connections(4).connect_with(connect).await.map_err(store_err)?;
        let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.map_err(store_err)?;
        sqlx::query(MIGRATIONS_TABLE).execute(&mut *tx).await.map_err(store_err)?;
        for &(version, name, sql) in SQLITE {
            let done: Option<i64> =
                sqlx::query_scalar("SELECT version FROM ambit_session_migrations WHERE version = ?")
                    .bind(version)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(store_err)?;
            if done.is_none() {
                sqlx::raw_sql(sql)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| SessionError::Store(format!("migration {version} ({name}): {e}")))?;
                sqlx::query("INSERT INTO ambit_session_migrations (version, name, applied_at) VALUES (?, ?, ?)")
                    .bind(version)
                    .bind(name)
                    .bind(now)
                    .execute(&mut *tx)
                    .await
                    .map_err(store_err)?;
            }
        }
        tx.commit().await.map_err(store_err)?;
        Ok(SqliteSessions { pool })
    }
}

#[async_trait]
impl SessionStore for SqliteSessions {
    async fn create(&self, session_id: &str, parent_id: Option<&str>, now: i64) -> Result<(), SessionError> {
        sqlx::query(
            "INSERT INTO ambit_sessions (session_id, parent_id, created_at, updated_at) VALUES (?, ?, ?, ?) \
             ON CONFLICT (session_id) DO NOTHING",
        )
        .bind(session_id)
        .bind(parent_id)
        .bind(now)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(store_err)?;
        Ok(())
    }

    async fn append(&self, session_id: &str, items: &[Item], now: i64) -> Result<Vec<i64>, SessionError> {
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await.map_err(store_err)?;
        let exists: Option<String> = sqlx::query_scalar("SELECT session_id FROM ambit_sessions WHERE session_id = ?")
            .bind(session_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(store_err)?;
        if exists.is_none() {
            return Err(SessionError::NotFound(session_id.to_string()));
        }
        let last: i64 =
            sqlx::query_scalar("SELECT COALESCE(MAX(idx), 0) FROM ambit_session_entries WHERE session_id = ?")
                .bind(session_id)
                .fetch_one(&mut *tx)
                .await
                .map_err(store_err)?;
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let idx = last + 1 + i as i64;
            sqlx::query(
                "INSERT INTO ambit_session_entries (session_id, idx, kind, body, created_at) VALUES (?, ?, ?, ?, ?)",
            )
            .bind(session_id)
            .bind(idx)
            .bind(item.kind())
            .bind(item.body().to_string())
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(store_err)?;
            out.push(idx);
        }
        sqlx::query("UPDATE ambit_sessions SET updated_at = ? WHERE session_id = ?")
            .bind(now)
            .bind(session_id)
            .execute(&mut *tx)
            .await
            .map_err(store_err)?;
        tx.commit().await.map_err(store_err)?;
        Ok(out)
    }

    async fn entries(&self, session_id: &str) -> Result<Vec<Entry>, SessionError> {
        let rows = sqlx::query("SELECT idx, kind, body FROM ambit_session_entries WHERE session_id = ? ORDER BY idx")
            .bind(session_id)
            .fetch_all(&self.pool)
            .await
            .map_err(store_err)?;
        rows.iter()
            .map(|r| {
                entry(
                    &r.try_get::<String, _>(1).map_err(store_err)?,
                    &r.try_get::<String, _>(2).map_err(store_err)?,
                    r.try_get(0).map_err(store_err)?,
                )
            })
            .collect()
    }

    async fn state(&self, session_id: &str) -> Result<SessionState, SessionError> {
        let row = sqlx::query("SELECT state, parked FROM ambit_sessions WHERE session_id = ?")
            .bind(session_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(store_err)?
            .ok_or_else(|| SessionError::NotFound(session_id.to_string()))?;
        state_of(row.try_get(0).map_err(store_err)?, row.try_get(1).map_err(store_err)?)
    }

    async fn set_state(&self, session_id: &str, state: &SessionState, now: i64) -> Result<(), SessionError> {
        let parked = state.parked.as_ref().map(|p| p.to_string());
        let done = sqlx::query("UPDATE ambit_sessions SET state = ?, parked = ?, updated_at = ? WHERE session_id = ?")
            .bind(&state.state)
            .bind(parked)
            .bind(now)
            .bind(session_id)
            .execute(&self.pool)
            .await
            .map_err(store_err)?;
        if done.rows_affected() == 0 {
            return Err(SessionError::NotFound(session_id.to_string()));
        }
        Ok(())
    }
}

/// Sessions in a PostgreSQL database.
#[derive(Debug, Clone)]
pub struct PgSessions {
    pool: PgPool,
}

impl PgSessions {
    pub async fn open(url: &str, now: i64) -> Result<PgSessions, SessionError> {
        let connect = PgConnectOptions::from_str(url)
            .map_err(|e| SessionError::InvalidArgument(format!("bad PostgreSQL URL: {e}")))?;
        let pool = PgPoolOptions::new().max_connections(4).connect_with(connect).await.map_err(store_err)?;
        let mut tx = pool.begin().await.map_err(store_err)?;
        // Two processes opening the same database at once apply the migrations one after the other.
        sqlx::query("SELECT pg_advisory_xact_lock(7411002)").execute(&mut *tx).await.map_err(store_err)?;
        sqlx::query(MIGRATIONS_TABLE).execute(&mut *tx).await.map_err(store_err)?;
        for &(version, name, sql) in POSTGRES {
            let done: Option<i64> =
                sqlx::query_scalar("SELECT version FROM ambit_session_migrations WHERE version = $1")
                    .bind(version)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(store_err)?;
            if done.is_none() {
                sqlx::raw_sql(sql)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| SessionError::Store(format!("migration {version} ({name}): {e}")))?;
                sqlx::query("INSERT INTO ambit_session_migrations (version, name, applied_at) VALUES ($1, $2, $3)")
                    .bind(version)
                    .bind(name)
                    .bind(now)
                    .execute(&mut *tx)
                    .await
                    .map_err(store_err)?;
            }
        }
        tx.commit().await.map_err(store_err)?;
        Ok(PgSessions { pool })
    }
}

#[async_trait]
impl SessionStore for PgSessions {
    async fn create(&self, session_id: &str, parent_id: Option<&str>, now: i64) -> Result<(), SessionError> {
        sqlx::query(
            "INSERT INTO ambit_sessions (session_id, parent_id, created_at, updated_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (session_id) DO NOTHING",
        )
        .bind(session_id)
        .bind(parent_id)
        .bind(now)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(store_err)?;
        Ok(())
    }

    async fn append(&self, session_id: &str, items: &[Item], now: i64) -> Result<Vec<i64>, SessionError> {
        let mut tx = self.pool.begin().await.map_err(store_err)?;
        let exists: Option<String> =
            sqlx::query_scalar("SELECT session_id FROM ambit_sessions WHERE session_id = $1 FOR UPDATE")
                .bind(session_id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(store_err)?;
        if exists.is_none() {
            return Err(SessionError::NotFound(session_id.to_string()));
        }
        let last: i64 =
            sqlx::query_scalar("SELECT COALESCE(MAX(idx), 0)::BIGINT FROM ambit_session_entries WHERE session_id = $1")
                .bind(session_id)
                .fetch_one(&mut *tx)
                .await
                .map_err(store_err)?;
        let mut out = Vec::new();
        for (i, item) in items.iter().enumerate() {
            let idx = last + 1 + i as i64;
            sqlx::query(
                "INSERT INTO ambit_session_entries (session_id, idx, kind, body, created_at) VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(session_id)
            .bind(idx)
            .bind(item.kind())
            .bind(item.body().to_string())
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(store_err)?;
            out.push(idx);
        }
        sqlx::query("UPDATE ambit_sessions SET updated_at = $1 WHERE session_id = $2")
            .bind(now)
            .bind(session_id)
            .execute(&mut *tx)
            .await
            .map_err(store_err)?;
        tx.commit().await.map_err(store_err)?;
        Ok(out)
    }

    async fn entries(&self, session_id: &str) -> Result<Vec<Entry>, SessionError> {
        let rows = sqlx::query("SELECT idx, kind, body FROM ambit_session_entries WHERE session_id = $1 ORDER BY idx")
            .bind(session_id)
            .fetch_all(&self.pool)
            .await
            .map_err(store_err)?;
        rows.iter()
            .map(|r| {
                entry(
                    &r.try_get::<String, _>(1).map_err(store_err)?,
                    &r.try_get::<String, _>(2).map_err(store_err)?,
                    r.try_get(0).map_err(store_err)?,
                )
            })
            .collect()
    }

    async fn state(&self, session_id: &str) -> Result<SessionState, SessionError> {
        let row = sqlx::query("SELECT state, parked FROM ambit_sessions WHERE session_id = $1")
            .bind(session_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(store_err)?
            .ok_or_else(|| SessionError::NotFound(session_id.to_string()))?;
        state_of(row.try_get(0).map_err(store_err)?, row.try_get(1).map_err(store_err)?)
    }

    async fn set_state(&self, session_id: &str, state: &SessionState, now: i64) -> Result<(), SessionError> {
        let parked = state.parked.as_ref().map(|p| p.to_string());
        let done =
            sqlx::query("UPDATE ambit_sessions SET state = $1, parked = $2, updated_at = $3 WHERE session_id = $4")
                .bind(&state.state)
                .bind(parked)
                .bind(now)
                .bind(session_id)
                .execute(&self.pool)
                .await
                .map_err(store_err)?;
        if done.rows_affected() == 0 {
            return Err(SessionError::NotFound(session_id.to_string()));
        }
        Ok(())
    }
}
