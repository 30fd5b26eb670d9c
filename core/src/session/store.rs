//! The session stores: SQLite (one file, WAL) by default, PostgreSQL by URL, both through sqlx with
//! their migrations applied on open. Appending is the only write to the log: an append takes the
//! session's row lock and numbers its entries after the last one.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{PgPool, Row, SqlitePool};

use super::durable::{Take, admit};
use super::rules::{Entry, Item};
use super::{SessionError, SessionState};
use serde_json::Value;

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
    /// Takes the session for a run, in one transaction. Leases are written by the store's clock
    /// (PostgreSQL's server clock; the local clock for SQLite, one host): a client whose clock is off
    /// neither shortens nor lengthens them. `now` is the caller's [`crate::ledger::Clock`]: only how far
    /// it is from the system clock counts, moving the moment liveness is judged at (tests jump past a
    /// lease with it). Refused refused with [`SessionError::Busy`] while
    /// another owner's lease is live, or [`SessionError::NotParked`] for a resume of a session with no
    /// approval waiting (the rules: [`admit`]). A session whose owner's lease expired is taken over;
    /// a run taking over marks the calls that owner started and never finished `interrupted` and
    /// returns them.
    async fn take(
        &self,
        session_id: &str,
        owner: &str,
        take: Take,
        now: i64,
        lease_ms: i64,
    ) -> Result<Taken, SessionError>;
    /// Extends `owner`'s lease to `lease_ms` past the store's clock; false when it no longer holds it.
    async fn renew(&self, session_id: &str, owner: &str, now: i64, lease_ms: i64) -> Result<bool, SessionError>;
    /// Appends `items` and sets the state in one transaction, only while `owner` holds the lease
    /// ([`SessionError::Busy`] when it lost it). A state other than `running` lets the lease go.
    async fn settle(
        &self,
        session_id: &str,
        owner: &str,
        items: &[Item],
        state: &SessionState,
        now: i64,
    ) -> Result<Vec<i64>, SessionError>;
    /// Ends `owner`'s lease at once, the state left as it is: a run dropped mid-way is taken over by
    /// the next one without waiting for the lease to run out.
    async fn let_go(&self, session_id: &str, owner: &str) -> Result<(), SessionError>;
    /// Records a tool call as started before it runs, only while `owner` holds a lease on the session that
    /// has not run out by the store's clock (checked in the same transaction; [`SessionError::Busy`] when it
    /// does not, and the call must not run). `None` when it was not recorded before; else what was: a call
    /// started (perhaps by a run that died) or finished, with its outcome.
    async fn call_started(
        &self,
        session_id: &str,
        owner: &str,
        key: &str,
        name: &str,
        arguments: &str,
        now: i64,
    ) -> Result<Option<CallRecord>, SessionError>;
    /// What the journal holds for a call, without recording anything.
    async fn call(&self, session_id: &str, key: &str) -> Result<Option<CallRecord>, SessionError>;
    /// Records a call's outcome (JSON) once it ran.
    async fn call_finished(&self, session_id: &str, key: &str, outcome: &Value, now: i64) -> Result<(), SessionError>;
}

/// What taking a session found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Taken {
    /// The parked state a resume claimed.
    pub parked: Option<Value>,
    /// The calls of a dead owner's run that were started and never finished, now `interrupted`.
    pub interrupted: Vec<StartedCall>,
    /// Whether the session was taken over from an owner whose lease ran out.
    pub taken_over: bool,
}

/// A call recorded as started.
#[derive(Debug, Clone, PartialEq)]
pub struct StartedCall {
    pub key: String,
    pub name: String,
    /// The arguments as the tool got them (JSON text).
    pub arguments: String,
}

/// A call as recorded before.
#[derive(Debug, Clone, PartialEq)]
pub enum CallRecord {
    /// Started (or interrupted), with no outcome recorded: it may or may not have had its effect.
    Started,
    /// Finished, with its outcome.
    Finished(Value),
}

fn call_record(state: &str, outcome: Option<String>) -> Result<CallRecord, SessionError> {
    match (state, outcome) {
        ("finished", Some(o)) => {
            Ok(CallRecord::Finished(serde_json::from_str(&o).map_err(|e| SessionError::Store(e.to_string()))?))
        }
        _ => Ok(CallRecord::Started),
    }
}

/// The moment a lease's liveness is judged at: the store's clock, moved by how far the caller's clock
/// (`now`) is from the system clock (0 but in tests that jump time).
fn judged_at(store_clock: i64, now: i64) -> i64 {
    store_clock.saturating_add(now.saturating_sub(super::now_ms()))
}

fn lost_lease(session_id: &str) -> SessionError {
    SessionError::Busy(format!(
        "session '{session_id}' was taken over by another run: this run's lease ran out (its heartbeat stopped)"
    ))
}

/// The sessions' schema migrations, applied on open by the crate's one migration runner.
const MIGRATIONS: crate::migrate::Plan = crate::migrate::Plan {
    table: "ambit_session_migrations",
    pg_lock: 7411002,
    sqlite: &[
        (1, "sessions", include_str!("../../migrations/sqlite/sessions_0001.sql")),
        (2, "durable runs", include_str!("../../migrations/sqlite/sessions_0002.sql")),
    ],
    postgres: &[
        (1, "sessions", include_str!("../../migrations/postgres/sessions_0001.sql")),
        (2, "durable runs", include_str!("../../migrations/postgres/sessions_0002.sql")),
    ],
};

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

/// A store's [`SessionStore`] impl, one text for both stores (`$db` the sqlx database): the same SQL
/// (`$N` placeholders, which SQLite takes too) in transactions from the store's `begin_write`; `$lock` is
/// what a SELECT appends to hold the session's row (PostgreSQL's `FOR UPDATE`; SQLite's write
/// transaction holds the whole database already).
macro_rules! session_store_impl {
    ($store:ty, $db:ty, $lock:literal) => {
        impl $store {
            /// What the journal holds for a call.
            async fn call_in(
                tx: &mut sqlx::Transaction<'_, $db>,
                session_id: &str,
                key: &str,
            ) -> Result<Option<CallRecord>, SessionError> {
                let row = sqlx::query(
                    "SELECT state, outcome FROM ambit_session_calls WHERE session_id = $1 AND call_key = $2",
                )
                .bind(session_id)
                .bind(key)
                .fetch_optional(&mut **tx)
                .await
                .map_err(store_err)?;
                let Some(row) = row else { return Ok(None) };
                let state: String = row.try_get(0).map_err(store_err)?;
                call_record(&state, row.try_get(1).map_err(store_err)?).map(Some)
            }

            /// Appends inside a transaction that holds the session's row.
            async fn append_in(
                tx: &mut sqlx::Transaction<'_, $db>,
                session_id: &str,
                items: &[Item],
                now: i64,
            ) -> Result<Vec<i64>, SessionError> {
                let exists: Option<String> =
                    sqlx::query_scalar(concat!("SELECT session_id FROM ambit_sessions WHERE session_id = $1", $lock))
                        .bind(session_id)
                        .fetch_optional(&mut **tx)
                        .await
                        .map_err(store_err)?;
                if exists.is_none() {
                    return Err(SessionError::NotFound(session_id.to_string()));
                }
                let last: i64 = sqlx::query_scalar(
                    "SELECT CAST(COALESCE(MAX(idx), 0) AS BIGINT) FROM ambit_session_entries WHERE session_id = $1",
                )
                .bind(session_id)
                .fetch_one(&mut **tx)
                .await
                .map_err(store_err)?;
                let mut out = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    let idx = last + 1 + i as i64;
                    sqlx::query(
                        "INSERT INTO ambit_session_entries (session_id, idx, kind, body, created_at) \
                         VALUES ($1, $2, $3, $4, $5)",
                    )
                    .bind(session_id)
                    .bind(idx)
                    .bind(item.kind())
                    .bind(item.body().to_string())
                    .bind(now)
                    .execute(&mut **tx)
                    .await
                    .map_err(store_err)?;
                    out.push(idx);
                }
                sqlx::query("UPDATE ambit_sessions SET updated_at = $1 WHERE session_id = $2")
                    .bind(now)
                    .bind(session_id)
                    .execute(&mut **tx)
                    .await
                    .map_err(store_err)?;
                Ok(out)
            }
        }

        #[async_trait]
        impl SessionStore for $store {
            async fn create(&self, session_id: &str, parent_id: Option<&str>, now: i64) -> Result<(), SessionError> {
                sqlx::query(
                    "INSERT INTO ambit_sessions (session_id, parent_id, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4) \
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
                let mut tx = self.begin_write().await?;
                let out = Self::append_in(&mut tx, session_id, items, now).await?;
                tx.commit().await.map_err(store_err)?;
                Ok(out)
            }

            async fn entries(&self, session_id: &str) -> Result<Vec<Entry>, SessionError> {
                let rows =
                    sqlx::query("SELECT idx, kind, body FROM ambit_session_entries WHERE session_id = $1 ORDER BY idx")
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
                let done = sqlx::query(
                    "UPDATE ambit_sessions SET state = $1, parked = $2, updated_at = $3 WHERE session_id = $4",
                )
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

            async fn take(
                &self,
                session_id: &str,
                owner: &str,
                take: Take,
                now: i64,
                lease_ms: i64,
            ) -> Result<Taken, SessionError> {
                let mut tx = self.begin_write().await?;
                let row = sqlx::query(concat!(
                    "SELECT state, parked, lease_owner, lease_expires FROM ambit_sessions WHERE session_id = $1",
                    $lock
                ))
                .bind(session_id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(store_err)?
                .ok_or_else(|| SessionError::NotFound(session_id.to_string()))?;
                let state: String = row.try_get(0).map_err(store_err)?;
                let parked: Option<String> = row.try_get(1).map_err(store_err)?;
                let holder: Option<String> = row.try_get(2).map_err(store_err)?;
                let expires: Option<i64> = row.try_get(3).map_err(store_err)?;
                let clock = Self::store_clock(&mut tx).await?;
                let judged = judged_at(clock, now);
                let taking_over =
                    admit(session_id, take, &state, parked.is_some(), holder.as_deref(), expires, judged)?;
                sqlx::query(
                    "UPDATE ambit_sessions SET state = 'running', lease_owner = $1, lease_expires = $2, \
                     updated_at = $3 \
                     WHERE session_id = $4",
                )
                .bind(owner)
                .bind(clock.saturating_add(lease_ms))
                .bind(now)
                .bind(session_id)
                .execute(&mut *tx)
                .await
                .map_err(store_err)?;
                let mut interrupted = Vec::new();
                if taking_over && take == Take::Run {
                    let rows = sqlx::query(
                        "SELECT call_key, name, arguments FROM ambit_session_calls \
                         WHERE session_id = $1 AND state = 'started' \
                         ORDER BY started_at, call_key",
                    )
                    .bind(session_id)
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(store_err)?;
                    for r in &rows {
                        interrupted.push(StartedCall {
                            key: r.try_get(0).map_err(store_err)?,
                            name: r.try_get(1).map_err(store_err)?,
                            arguments: r.try_get(2).map_err(store_err)?,
                        });
                    }
                    sqlx::query(
                        "UPDATE ambit_session_calls SET state = 'interrupted' \
                         WHERE session_id = $1 AND state = 'started'",
                    )
                    .bind(session_id)
                    .execute(&mut *tx)
                    .await
                    .map_err(store_err)?;
                }
                tx.commit().await.map_err(store_err)?;
                let parked = parked.map(|p| serde_json::from_str(&p)).transpose();
                let parked = parked.map_err(|e| SessionError::Store(e.to_string()))?;
                Ok(Taken { parked, interrupted, taken_over: taking_over })
            }

            async fn renew(
                &self,
                session_id: &str,
                owner: &str,
                _now: i64,
                lease_ms: i64,
            ) -> Result<bool, SessionError> {
                let mut tx = self.begin_write().await?;
                let clock = Self::store_clock(&mut tx).await?;
                let done = sqlx::query(
                    "UPDATE ambit_sessions SET lease_expires = $1 \
                     WHERE session_id = $2 AND lease_owner = $3 AND state = 'running'",
                )
                .bind(clock.saturating_add(lease_ms))
                .bind(session_id)
                .bind(owner)
                .execute(&mut *tx)
                .await
                .map_err(store_err)?;
                tx.commit().await.map_err(store_err)?;
                Ok(done.rows_affected() > 0)
            }

            async fn settle(
                &self,
                session_id: &str,
                owner: &str,
                items: &[Item],
                state: &SessionState,
                now: i64,
            ) -> Result<Vec<i64>, SessionError> {
                let mut tx = self.begin_write().await?;
                let holder: Option<Option<String>> =
                    sqlx::query_scalar(concat!("SELECT lease_owner FROM ambit_sessions WHERE session_id = $1", $lock))
                        .bind(session_id)
                        .fetch_optional(&mut *tx)
                        .await
                        .map_err(store_err)?;
                match holder {
                    None => return Err(SessionError::NotFound(session_id.to_string())),
                    Some(h) if h.as_deref() != Some(owner) => return Err(lost_lease(session_id)),
                    Some(_) => {}
                }
                let indexes = Self::append_in(&mut tx, session_id, items, now).await?;
                let keep = state.state == "running";
                let parked = state.parked.as_ref().map(|p| p.to_string());
                sqlx::query(
                    "UPDATE ambit_sessions SET state = $1, parked = $2, updated_at = $3, \
                     lease_owner = CASE WHEN $4 THEN lease_owner END, \
                     lease_expires = CASE WHEN $5 THEN lease_expires END \
                     WHERE session_id = $6",
                )
                .bind(&state.state)
                .bind(parked)
                .bind(now)
                .bind(keep)
                .bind(keep)
                .bind(session_id)
                .execute(&mut *tx)
                .await
                .map_err(store_err)?;
                tx.commit().await.map_err(store_err)?;
                Ok(indexes)
            }

            async fn let_go(&self, session_id: &str, owner: &str) -> Result<(), SessionError> {
                sqlx::query("UPDATE ambit_sessions SET lease_expires = 0 WHERE session_id = $1 AND lease_owner = $2")
                    .bind(session_id)
                    .bind(owner)
                    .execute(&self.pool)
                    .await
                    .map_err(store_err)?;
                Ok(())
            }

            async fn call_started(
                &self,
                session_id: &str,
                owner: &str,
                key: &str,
                name: &str,
                arguments: &str,
                now: i64,
            ) -> Result<Option<CallRecord>, SessionError> {
                let mut tx = self.begin_write().await?;
                let row = sqlx::query(concat!(
                    "SELECT lease_owner, lease_expires FROM ambit_sessions WHERE session_id = $1",
                    $lock
                ))
                .bind(session_id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(store_err)?
                .ok_or_else(|| SessionError::NotFound(session_id.to_string()))?;
                let holder: Option<String> = row.try_get(0).map_err(store_err)?;
                let expires: Option<i64> = row.try_get(1).map_err(store_err)?;
                // The caller's own lease, by the store's clock alone (a caller's clock never extends it).
                let clock = Self::store_clock(&mut tx).await?;
                if holder.as_deref() != Some(owner) || !expires.is_some_and(|e| e > clock) {
                    return Err(lost_lease(session_id));
                }
                let done = sqlx::query(
                    "INSERT INTO ambit_session_calls (session_id, call_key, name, arguments, state, started_at) \
                     VALUES ($1, $2, $3, $4, 'started', $5) ON CONFLICT (session_id, call_key) DO NOTHING",
                )
                .bind(session_id)
                .bind(key)
                .bind(name)
                .bind(arguments)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(store_err)?;
                let record =
                    if done.rows_affected() > 0 { None } else { Self::call_in(&mut tx, session_id, key).await? };
                tx.commit().await.map_err(store_err)?;
                Ok(record)
            }

            async fn call(&self, session_id: &str, key: &str) -> Result<Option<CallRecord>, SessionError> {
                let mut tx = self.begin_write().await?;
                let record = Self::call_in(&mut tx, session_id, key).await?;
                tx.commit().await.map_err(store_err)?;
                Ok(record)
            }

            async fn call_finished(
                &self,
                session_id: &str,
                key: &str,
                outcome: &Value,
                now: i64,
            ) -> Result<(), SessionError> {
                sqlx::query(
                    "UPDATE ambit_session_calls SET state = 'finished', outcome = $1, finished_at = $2 \
                     WHERE session_id = $3 AND call_key = $4",
                )
                .bind(outcome.to_string())
                .bind(now)
                .bind(session_id)
                .bind(key)
                .execute(&self.pool)
                .await
                .map_err(store_err)?;
                Ok(())
            }
        }
    };
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
        crate::migrate::sqlite(&pool, &MIGRATIONS, now).await.map_err(SessionError::Store)?;
        Ok(SqliteSessions { pool })
    }
}

impl SqliteSessions {
    /// The store's clock: one host, the local clock.
    async fn store_clock(_tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>) -> Result<i64, SessionError> {
        Ok(super::now_ms())
    }

    /// A transaction that may write: SQLite's `BEGIN IMMEDIATE` takes the write lock at once.
    async fn begin_write(&self) -> Result<sqlx::Transaction<'_, sqlx::Sqlite>, SessionError> {
        self.pool.begin_with("BEGIN IMMEDIATE").await.map_err(store_err)
    }
}

session_store_impl!(SqliteSessions, sqlx::Sqlite, "");

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
        crate::migrate::postgres(&pool, &MIGRATIONS, now).await.map_err(SessionError::Store)?;
        Ok(PgSessions { pool })
    }
}

impl PgSessions {
    /// The store's clock: the server's, in ms since the epoch.
    async fn store_clock(tx: &mut sqlx::Transaction<'_, sqlx::Postgres>) -> Result<i64, SessionError> {
        sqlx::query_scalar("SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)")
            .fetch_one(&mut **tx)
            .await
            .map_err(store_err)
    }

    /// A transaction that may write.
    async fn begin_write(&self) -> Result<sqlx::Transaction<'_, sqlx::Postgres>, SessionError> {
        self.pool.begin().await.map_err(store_err)
    }
}

session_store_impl!(PgSessions, sqlx::Postgres, " FOR UPDATE");
