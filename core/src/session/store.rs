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
    /// The log from where its live window starts (the last compaction's first kept entry; the whole log
    /// when it was never compacted), with the number of compactions before: what a run reads, in time
    /// that grows with the live window, not with the log.
    async fn live(&self, session_id: &str) -> Result<Live, SessionError>;
    /// The entries after number `after`, in order (an unknown session has none).
    async fn entries_after(&self, session_id: &str, after: i64) -> Result<Vec<Entry>, SessionError>;
    /// The session's state row.
    async fn state(&self, session_id: &str) -> Result<SessionState, SessionError>;
    /// Writes the session's state row.
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
    /// Creates a root session already taken by `owner` for a run (its lease `lease_ms` past the store's
    /// clock) and titled, in one statement: what `create` then `take` then `title` do for a session that
    /// does not exist yet. False (nothing written) when the session exists: the caller takes it as usual.
    async fn create_taken(
        &self,
        session_id: &str,
        title: Option<&str>,
        owner: &str,
        now: i64,
        lease_ms: i64,
    ) -> Result<bool, SessionError>;
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
    /// Keeps a sub-agent's session: created under its parent if new, its spawn record replaced, and the
    /// messages of `messages` past those the log holds appended (its conversation only grows).
    async fn keep_child(
        &self,
        child: &ChildSession,
        messages: &[crate::model::Message],
        now: i64,
    ) -> Result<(), SessionError>;
    /// The sub-agent sessions of `parent_id` not deleted, oldest first.
    async fn children(&self, parent_id: &str) -> Result<Vec<ChildSession>, SessionError>;
    /// How many sub-agent sessions `parent_id` ever had, deleted ones included.
    async fn spawned(&self, parent_id: &str) -> Result<u64, SessionError>;
    /// Marks a sub-agent's session (and the sessions below it) deleted.
    async fn delete_child(&self, session_id: &str, now: i64) -> Result<(), SessionError>;
    /// Gives a session its title, unless it has one.
    async fn title(&self, session_id: &str, title: &str) -> Result<(), SessionError>;
    /// The `limit` most recently updated root sessions, and whether there were more.
    async fn recent_roots(&self, limit: usize) -> Result<(Vec<SessionRow>, bool), SessionError>;
    /// Records a new background task of tool `name`, running, its heartbeat by the store's clock; its id
    /// (`task_N`, N counting from 1 in the session).
    async fn task_started(&self, session_id: &str, name: &str, now: i64) -> Result<String, SessionError>;
    /// Renews the heartbeat of running tasks (id, latest note), by the store's clock.
    async fn task_beat(
        &self,
        session_id: &str,
        running: &[(String, Option<String>)],
        now: i64,
    ) -> Result<(), SessionError>;
    /// Records how a task ended (its status, result and latest note) and, in the same transaction, appends
    /// `item` (its result as a turn of the session) when one is given. A task read `lost` meanwhile still
    /// takes its result. False when the task is not in the store.
    async fn task_landed(
        &self,
        session_id: &str,
        task: &TaskSnapshot,
        item: Option<&Item>,
        now: i64,
    ) -> Result<bool, SessionError>;
    /// A task as the store has it. One still `running` whose heartbeat is older than `window_ms` by the
    /// store's clock ran in a process that died: it is marked `lost` here, and `item_if_lost` gives the
    /// turn appended to the session, in the same transaction.
    async fn task(
        &self,
        session_id: &str,
        task_id: &str,
        window_ms: i64,
        item_if_lost: &(dyn for<'n> Fn(&'n str) -> Item + Send + Sync),
        now: i64,
    ) -> Result<Option<TaskSnapshot>, SessionError>;
}

/// A sub-agent's session as its parent keeps it (SPEC §8b: sub-agents are child sessions).
#[derive(Debug, Clone, PartialEq)]
pub struct ChildSession {
    /// The child's session id.
    pub session_id: String,
    /// The session (root or sub-agent) that spawned it.
    pub parent_id: String,
    /// Its id among its siblings, as the agent tools take it.
    pub agent_id: String,
    /// Its title (the spawn's prompt, clipped).
    pub title: String,
    /// What a follow-up replays: its spawn terms, holdings and counts (JSON).
    pub spawn: Value,
    /// When it was last written, ms since the epoch.
    pub updated_at: i64,
}

/// A root session as `session_list` shows it at `unrestricted`.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRow {
    /// The session's id.
    pub session_id: String,
    /// Its title, once it has one.
    pub title: Option<String>,
    /// When it was last written, ms since the epoch.
    pub updated_at: i64,
}

/// A session's background task as the store has it (`task_result`).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TaskSnapshot {
    /// The session the task belongs to.
    pub session_id: String,
    /// The task's id.
    pub task_id: String,
    /// The tool the task runs.
    pub name: String,
    /// `running`, `finished`, `failed`, `cancelled` or `lost`.
    pub status: crate::agent::background::TaskStatus,
    /// The latest progress note.
    pub note: Option<String>,
    /// The result text, once it landed.
    pub result: Option<String>,
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
    /// The background tasks of the session a takeover found `running` with a heartbeat older than the
    /// lease length (their process died with the run's), now `lost`: `(task id, tool name)`.
    pub lost_tasks: Vec<(String, String)>,
}

/// A call recorded as started.
#[derive(Debug, Clone, PartialEq)]
pub struct StartedCall {
    /// The call's key in the session's journal.
    pub key: String,
    /// The tool's name.
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

/// A session's log from where its live window starts ([`SessionStore::live`]).
#[derive(Debug, Clone, Default)]
pub struct Live {
    /// The entries from the last compaction's first kept entry on (the whole log when never compacted).
    pub entries: Vec<Entry>,
    /// The compactions the session has had.
    pub compactions: usize,
}

impl Live {
    /// The window with the entries appended after it: a compaction among them moves its start.
    pub fn add(&mut self, added: Vec<Entry>) {
        self.compactions += added.iter().filter(|e| matches!(e.item, Item::Boundary { .. })).count();
        self.entries.extend(added);
        let last = self.entries.iter().rev().find_map(|e| match e.item {
            Item::Boundary { keep_from } => Some(keep_from.min(e.index)),
            _ => None,
        });
        if let Some(from) = last {
            self.entries.retain(|e| e.index >= from);
        }
    }
}

/// The sessions' schema migrations, applied on open by the crate's one migration runner.
const MIGRATIONS: crate::migrate::Plan = crate::migrate::Plan {
    table: "ambit_session_migrations",
    pg_lock: 7411002,
    sqlite: &[
        (1, "sessions", include_str!("../../migrations/sqlite/sessions_0001.sql")),
        (2, "durable runs", include_str!("../../migrations/sqlite/sessions_0002.sql")),
        (3, "session tasks", include_str!("../../migrations/sqlite/sessions_0003.sql")),
        (4, "child sessions", include_str!("../../migrations/sqlite/sessions_0004.sql")),
        (5, "live window", include_str!("../../migrations/sqlite/sessions_0005.sql")),
    ],
    postgres: &[
        (1, "sessions", include_str!("../../migrations/postgres/sessions_0001.sql")),
        (2, "durable runs", include_str!("../../migrations/postgres/sessions_0002.sql")),
        (3, "session tasks", include_str!("../../migrations/postgres/sessions_0003.sql")),
        (4, "child sessions", include_str!("../../migrations/postgres/sessions_0004.sql")),
        (5, "live window", include_str!("../../migrations/postgres/sessions_0005.sql")),
        (6, "settle in one call", include_str!("../../migrations/postgres/sessions_0006.sql")),
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
            /// Entries from rows of `idx, kind, body`.
            fn entries_of(rows: &[<$db as sqlx::Database>::Row]) -> Result<Vec<Entry>, SessionError> {
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

            /// The entries a `SELECT idx, kind, body … WHERE session_id = $1 [AND … $2] ORDER BY idx` reads.
            async fn select_entries(
                &self,
                sql: &'static str,
                session_id: &str,
                at: Option<i64>,
            ) -> Result<Vec<Entry>, SessionError> {
                let mut query = sqlx::query(sql).bind(session_id);
                if let Some(at) = at {
                    query = query.bind(at);
                }
                let rows = query.fetch_all(&self.pool).await.map_err(store_err)?;
                Self::entries_of(&rows)
            }

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
                let out = Self::insert_entries(tx, session_id, items, now).await?;
                sqlx::query("UPDATE ambit_sessions SET updated_at = $1 WHERE session_id = $2")
                    .bind(now)
                    .bind(session_id)
                    .execute(&mut **tx)
                    .await
                    .map_err(store_err)?;
                Ok(out)
            }

            /// Numbers `items` after the log's last entry and inserts them, inside a transaction that
            /// holds the session's row (the caller writes its `updated_at`).
            async fn insert_entries(
                tx: &mut sqlx::Transaction<'_, $db>,
                session_id: &str,
                items: &[Item],
                now: i64,
            ) -> Result<Vec<i64>, SessionError> {
                if items.is_empty() {
                    return Ok(Vec::new());
                }
                let last: i64 = sqlx::query_scalar(
                    "SELECT CAST(COALESCE(MAX(idx), 0) AS BIGINT) FROM ambit_session_entries WHERE session_id = $1",
                )
                .bind(session_id)
                .fetch_one(&mut **tx)
                .await
                .map_err(store_err)?;
                let out: Vec<i64> = (0..items.len()).map(|i| last + 1 + i as i64).collect();
                // One multi-row INSERT per 500 entries (3 parameters each, well under either store's
                // limit), not one statement per entry.
                for (n, chunk) in items.chunks(500).enumerate() {
                    let mut sql =
                        String::from("INSERT INTO ambit_session_entries (session_id, idx, kind, body, created_at) VALUES ");
                    for i in 0..chunk.len() {
                        let p = 3 + 3 * i;
                        if i > 0 {
                            sql.push_str(", ");
                        }
                        sql.push_str(&format!("($1, ${p}, ${}, ${}, $2)", p + 1, p + 2));
                    }
                    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(session_id).bind(now);
                    for (i, item) in chunk.iter().enumerate() {
                        query = query.bind(out[n * 500 + i]).bind(item.kind()).bind(item.body().to_string());
                    }
                    query.execute(&mut **tx).await.map_err(store_err)?;
                }
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
                let sql = "SELECT idx, kind, body FROM ambit_session_entries WHERE session_id = $1 ORDER BY idx";
                self.select_entries(sql, session_id, None).await
            }

            async fn entries_after(&self, session_id: &str, after: i64) -> Result<Vec<Entry>, SessionError> {
                let sql = "SELECT idx, kind, body FROM ambit_session_entries WHERE session_id = $1 AND idx > $2 \
                           ORDER BY idx";
                self.select_entries(sql, session_id, Some(after)).await
            }

            async fn live(&self, session_id: &str) -> Result<Live, SessionError> {
                // The boundaries first (from their own index), then the entries from the last one's first
                // kept entry on. The log is only appended to: a compaction appended between the two reads
                // is in the second, and the window is taken from the last boundary that one holds.
                let sql = "SELECT idx, kind, body FROM ambit_session_entries WHERE session_id = $1 AND kind = 'boundary' \
                           ORDER BY idx";
                let boundaries = self.select_entries(sql, session_id, None).await?;
                let from = match boundaries.last() {
                    Some(Entry { item: Item::Boundary { keep_from }, index }) => (*keep_from).min(*index),
                    _ => 0,
                };
                let sql = "SELECT idx, kind, body FROM ambit_session_entries WHERE session_id = $1 AND idx >= $2 \
                           ORDER BY idx";
                let entries = self.select_entries(sql, session_id, Some(from)).await?;
                let compactions = boundaries.iter().filter(|b| b.index < from).count()
                    + entries.iter().filter(|e| matches!(e.item, Item::Boundary { .. })).count();
                Ok(Live { entries, compactions })
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
                let (mut interrupted, mut lost_tasks) = (Vec::new(), Vec::new());
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
                    // The background tasks whose process stopped renewing them (the rule `task` applies, by
                    // the store's clock, which their heartbeats are written by): lost, and named in the
                    // takeover note.
                    let stale = clock.saturating_sub(lease_ms);
                    let rows = sqlx::query(
                        "SELECT task_id, name FROM ambit_session_tasks \
                         WHERE session_id = $1 AND status = 'running' AND heartbeat_at < $2 ORDER BY seq",
                    )
                    .bind(session_id)
                    .bind(stale)
                    .fetch_all(&mut *tx)
                    .await
                    .map_err(store_err)?;
                    for r in &rows {
                        lost_tasks.push((r.try_get(0).map_err(store_err)?, r.try_get(1).map_err(store_err)?));
                    }
                    sqlx::query(
                        "UPDATE ambit_session_tasks SET status = 'lost', updated_at = $1 \
                         WHERE session_id = $2 AND status = 'running' AND heartbeat_at < $3",
                    )
                    .bind(now)
                    .bind(session_id)
                    .bind(stale)
                    .execute(&mut *tx)
                    .await
                    .map_err(store_err)?;
                }
                tx.commit().await.map_err(store_err)?;
                let parked = parked.map(|p| serde_json::from_str(&p)).transpose();
                let parked = parked.map_err(|e| SessionError::Store(e.to_string()))?;
                Ok(Taken { parked, interrupted, taken_over: taking_over, lost_tasks })
            }

            async fn create_taken(
                &self,
                session_id: &str,
                title: Option<&str>,
                owner: &str,
                now: i64,
                lease_ms: i64,
            ) -> Result<bool, SessionError> {
                let sql = format!(
                    "INSERT INTO ambit_sessions \
                     (session_id, created_at, updated_at, title, state, lease_owner, lease_expires) \
                     VALUES ($1, $2, $3, $4, 'running', $5, {} + $6) ON CONFLICT (session_id) DO NOTHING",
                    Self::CLOCK_SQL
                );
                let done = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(session_id)
                    .bind(now)
                    .bind(now)
                    .bind(title)
                    .bind(owner)
                    .bind(lease_ms)
                    .execute(&self.pool)
                    .await
                    .map_err(store_err)?;
                Ok(done.rows_affected() > 0)
            }

            async fn renew(
                &self,
                session_id: &str,
                owner: &str,
                _now: i64,
                lease_ms: i64,
            ) -> Result<bool, SessionError> {
                // One statement, committed by itself: an owner paused between the write and its commit
                // would hold the row, and every new owner waiting for it, for as long as it stays paused.
                let sql = format!(
                    "UPDATE ambit_sessions SET lease_expires = {} + $1 \
                     WHERE session_id = $2 AND lease_owner = $3 AND state = 'running'",
                    Self::CLOCK_SQL
                );
                let done = sqlx::query(sqlx::AssertSqlSafe(sql))
                    .bind(lease_ms)
                    .bind(session_id)
                    .bind(owner)
                    .execute(&self.pool)
                    .await
                    .map_err(store_err)?;
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
                if let Some(indexes) = self.settle_in_one_call(session_id, owner, items, state, now).await? {
                    return Ok(indexes);
                }
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
                // The row is held (above); the UPDATE below writes its `updated_at`.
                let indexes = Self::insert_entries(&mut tx, session_id, items, now).await?;
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

            async fn keep_child(
                &self,
                child: &ChildSession,
                messages: &[crate::model::Message],
                now: i64,
            ) -> Result<(), SessionError> {
                let mut tx = self.begin_write().await?;
                sqlx::query(
                    "INSERT INTO ambit_sessions (session_id, parent_id, created_at, updated_at, title, agent_id, spawn) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7) \
                     ON CONFLICT (session_id) DO UPDATE SET spawn = $8, updated_at = $9",
                )
                .bind(&child.session_id)
                .bind(&child.parent_id)
                .bind(now)
                .bind(now)
                .bind(&child.title)
                .bind(&child.agent_id)
                .bind(child.spawn.to_string())
                .bind(child.spawn.to_string())
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(store_err)?;
                let held: i64 = sqlx::query_scalar(
                    "SELECT CAST(COUNT(*) AS BIGINT) FROM ambit_session_entries WHERE session_id = $1 AND kind = 'message'",
                )
                .bind(&child.session_id)
                .fetch_one(&mut *tx)
                .await
                .map_err(store_err)?;
                let items: Vec<Item> = messages
                    .iter()
                    .skip(usize::try_from(held).unwrap_or(0))
                    .map(|m| Item::Message { message: m.clone() })
                    .collect();
                Self::append_in(&mut tx, &child.session_id, &items, now).await?;
                tx.commit().await.map_err(store_err)?;
                Ok(())
            }

            async fn children(&self, parent_id: &str) -> Result<Vec<ChildSession>, SessionError> {
                let rows = sqlx::query(
                    "SELECT session_id, agent_id, title, spawn, updated_at FROM ambit_sessions \
                     WHERE parent_id = $1 AND state <> 'deleted' AND agent_id IS NOT NULL ORDER BY created_at, session_id",
                )
                .bind(parent_id)
                .fetch_all(&self.pool)
                .await
                .map_err(store_err)?;
                rows.iter()
                    .map(|r| {
                        let spawn: Option<String> = r.try_get(3).map_err(store_err)?;
                        let spawn = serde_json::from_str(spawn.as_deref().unwrap_or("null"))
                            .map_err(|e| SessionError::Store(e.to_string()))?;
                        Ok(ChildSession {
                            session_id: r.try_get(0).map_err(store_err)?,
                            parent_id: parent_id.to_string(),
                            agent_id: r.try_get::<Option<String>, _>(1).map_err(store_err)?.unwrap_or_default(),
                            title: r.try_get::<Option<String>, _>(2).map_err(store_err)?.unwrap_or_default(),
                            spawn,
                            updated_at: r.try_get(4).map_err(store_err)?,
                        })
                    })
                    .collect()
            }

            async fn spawned(&self, parent_id: &str) -> Result<u64, SessionError> {
                let n: i64 = sqlx::query_scalar(
                    "SELECT CAST(COUNT(*) AS BIGINT) FROM ambit_sessions WHERE parent_id = $1 AND agent_id IS NOT NULL",
                )
                .bind(parent_id)
                .fetch_one(&self.pool)
                .await
                .map_err(store_err)?;
                Ok(u64::try_from(n).unwrap_or(0))
            }

            async fn delete_child(&self, session_id: &str, now: i64) -> Result<(), SessionError> {
                let mut tx = self.begin_write().await?;
                let mut pending = vec![session_id.to_string()];
                while let Some(id) = pending.pop() {
                    sqlx::query("UPDATE ambit_sessions SET state = 'deleted', updated_at = $1 WHERE session_id = $2")
                        .bind(now)
                        .bind(&id)
                        .execute(&mut *tx)
                        .await
                        .map_err(store_err)?;
                    let below: Vec<String> =
                        sqlx::query_scalar("SELECT session_id FROM ambit_sessions WHERE parent_id = $1 AND state <> 'deleted'")
                            .bind(&id)
                            .fetch_all(&mut *tx)
                            .await
                            .map_err(store_err)?;
                    pending.extend(below);
                }
                tx.commit().await.map_err(store_err)?;
                Ok(())
            }

            async fn title(&self, session_id: &str, title: &str) -> Result<(), SessionError> {
                sqlx::query("UPDATE ambit_sessions SET title = $1 WHERE session_id = $2 AND title IS NULL")
                    .bind(title)
                    .bind(session_id)
                    .execute(&self.pool)
                    .await
                    .map_err(store_err)?;
                Ok(())
            }

            async fn recent_roots(&self, limit: usize) -> Result<(Vec<SessionRow>, bool), SessionError> {
                let rows = sqlx::query(
                    "SELECT session_id, title, updated_at FROM ambit_sessions WHERE parent_id IS NULL \
                     ORDER BY updated_at DESC, session_id LIMIT $1",
                )
                .bind(i64::try_from(limit).unwrap_or(i64::MAX).saturating_add(1))
                .fetch_all(&self.pool)
                .await
                .map_err(store_err)?;
                let more = rows.len() > limit;
                let rows = rows
                    .iter()
                    .take(limit)
                    .map(|r| {
                        Ok(SessionRow {
                            session_id: r.try_get(0).map_err(store_err)?,
                            title: r.try_get(1).map_err(store_err)?,
                            updated_at: r.try_get(2).map_err(store_err)?,
                        })
                    })
                    .collect::<Result<Vec<_>, SessionError>>()?;
                Ok((rows, more))
            }

            async fn task_started(&self, session_id: &str, name: &str, now: i64) -> Result<String, SessionError> {
                let mut tx = self.begin_write().await?;
                let exists: Option<String> =
                    sqlx::query_scalar(concat!("SELECT session_id FROM ambit_sessions WHERE session_id = $1", $lock))
                        .bind(session_id)
                        .fetch_optional(&mut *tx)
                        .await
                        .map_err(store_err)?;
                if exists.is_none() {
                    return Err(SessionError::NotFound(session_id.to_string()));
                }
                let seq: i64 = sqlx::query_scalar(
                    "SELECT CAST(COALESCE(MAX(seq), 0) + 1 AS BIGINT) FROM ambit_session_tasks WHERE session_id = $1",
                )
                .bind(session_id)
                .fetch_one(&mut *tx)
                .await
                .map_err(store_err)?;
                let clock = Self::store_clock(&mut tx).await?;
                let task_id = format!("task_{seq}");
                sqlx::query(
                    "INSERT INTO ambit_session_tasks \
                     (session_id, task_id, seq, name, status, heartbeat_at, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, 'running', $5, $6, $7)",
                )
                .bind(session_id)
                .bind(&task_id)
                .bind(seq)
                .bind(name)
                .bind(clock)
                .bind(now)
                .bind(now)
                .execute(&mut *tx)
                .await
                .map_err(store_err)?;
                tx.commit().await.map_err(store_err)?;
                Ok(task_id)
            }

            async fn task_beat(
                &self,
                session_id: &str,
                running: &[(String, Option<String>)],
                now: i64,
            ) -> Result<(), SessionError> {
                let mut tx = self.begin_write().await?;
                // The session's row first, as `take` holds it before the task rows it updates.
                sqlx::query(concat!("SELECT 1 FROM ambit_sessions WHERE session_id = $1", $lock))
                    .bind(session_id)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(store_err)?;
                let clock = Self::store_clock(&mut tx).await?;
                for (task_id, note) in running {
                    sqlx::query(
                        "UPDATE ambit_session_tasks SET heartbeat_at = $1, note = COALESCE($2, note), updated_at = $3 \
                         WHERE session_id = $4 AND task_id = $5 AND status = 'running'",
                    )
                    .bind(clock)
                    .bind(note.as_deref())
                    .bind(now)
                    .bind(session_id)
                    .bind(task_id)
                    .execute(&mut *tx)
                    .await
                    .map_err(store_err)?;
                }
                tx.commit().await.map_err(store_err)?;
                Ok(())
            }

            async fn task_landed(
                &self,
                session_id: &str,
                task: &TaskSnapshot,
                item: Option<&Item>,
                now: i64,
            ) -> Result<bool, SessionError> {
                let mut tx = self.begin_write().await?;
                // The session's row first, as `take` and `append` hold it: transactions that hold the
                // same rows in one order never deadlock (a task landing while a new owner takes over).
                sqlx::query(concat!("SELECT 1 FROM ambit_sessions WHERE session_id = $1", $lock))
                    .bind(session_id)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(store_err)?;
                let done = sqlx::query(
                    "UPDATE ambit_session_tasks SET status = $1, result = $2, note = COALESCE($3, note), \
                     updated_at = $4 WHERE session_id = $5 AND task_id = $6 AND status IN ('running', 'lost')",
                )
                .bind(task.status.as_str())
                .bind(task.result.as_deref())
                .bind(task.note.as_deref())
                .bind(now)
                .bind(session_id)
                .bind(&task.task_id)
                .execute(&mut *tx)
                .await
                .map_err(store_err)?;
                let landed = done.rows_affected() > 0;
                if landed && let Some(item) = item {
                    Self::append_in(&mut tx, session_id, std::slice::from_ref(item), now).await?;
                }
                tx.commit().await.map_err(store_err)?;
                Ok(landed)
            }

            async fn task(
                &self,
                session_id: &str,
                task_id: &str,
                window_ms: i64,
                item_if_lost: &(dyn for<'n> Fn(&'n str) -> Item + Send + Sync),
                now: i64,
            ) -> Result<Option<TaskSnapshot>, SessionError> {
                let mut tx = self.begin_write().await?;
                // The session's row first, as `take` and `append` hold it: transactions that hold the
                // same rows in one order never deadlock (a task landing while a new owner takes over).
                sqlx::query(concat!("SELECT 1 FROM ambit_sessions WHERE session_id = $1", $lock))
                    .bind(session_id)
                    .fetch_optional(&mut *tx)
                    .await
                    .map_err(store_err)?;
                let clock = Self::store_clock(&mut tx).await?;
                let lost = sqlx::query(
                    "UPDATE ambit_session_tasks SET status = 'lost', updated_at = $1 \
                     WHERE session_id = $2 AND task_id = $3 AND status = 'running' AND heartbeat_at < $4",
                )
                .bind(now)
                .bind(session_id)
                .bind(task_id)
                .bind(clock.saturating_sub(window_ms))
                .execute(&mut *tx)
                .await
                .map_err(store_err)?;
                let row = sqlx::query(
                    "SELECT name, status, note, result FROM ambit_session_tasks WHERE session_id = $1 AND task_id = $2",
                )
                .bind(session_id)
                .bind(task_id)
                .fetch_optional(&mut *tx)
                .await
                .map_err(store_err)?;
                let Some(row) = row else { return Ok(None) };
                let name: String = row.try_get(0).map_err(store_err)?;
                let status: String = row.try_get(1).map_err(store_err)?;
                let status = crate::agent::background::TaskStatus::parse(&status)
                    .ok_or_else(|| SessionError::Store(format!("task {task_id} has an unknown status '{status}'")))?;
                if lost.rows_affected() > 0 {
                    Self::append_in(&mut tx, session_id, &[item_if_lost(&name)], now).await?;
                }
                let snapshot = TaskSnapshot {
                    session_id: session_id.to_string(),
                    task_id: task_id.to_string(),
                    name,
                    status,
                    note: row.try_get(2).map_err(store_err)?,
                    result: row.try_get(3).map_err(store_err)?,
                };
                tx.commit().await.map_err(store_err)?;
                Ok(Some(snapshot))
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
    /// Opens (creating if missing) the SQLite file at `path` and applies the migrations.
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
    /// The store's clock in SQL, ms since the epoch: one host, the local clock (SQLite reads the same
    /// system clock as [`super::now_ms`]).
    const CLOCK_SQL: &'static str = "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)";

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

impl SqliteSessions {
    /// SQLite has no round trips to save: `None`, and `settle` writes in its own transaction.
    async fn settle_in_one_call(
        &self,
        _session_id: &str,
        _owner: &str,
        _items: &[Item],
        _state: &SessionState,
        _now: i64,
    ) -> Result<Option<Vec<i64>>, SessionError> {
        Ok(None)
    }
}

/// Sessions in a PostgreSQL database.
#[derive(Debug, Clone)]
pub struct PgSessions {
    pool: PgPool,
    /// What a write transaction begins with ([`PG_BEGIN_BOUNDED`] unless the URL sets the bound).
    begin: &'static str,
}

/// A write transaction's first statement, with the idle bound for it alone: the server ends a
/// transaction of the session store left idle for 30 s (`idle_in_transaction_session_timeout`). The
/// store's transactions send their statements back to back; an idle one is a process paused or cut off
/// mid-transaction (SIGSTOP, a frozen VM, a lost network), and the session row it holds would otherwise
/// keep every new owner out for as long as the pause lasts. `SET LOCAL` asks connection poolers (such as
/// PgBouncer) for no startup parameter, and shares `BEGIN`'s round trip. A URL that sets the parameter
/// itself (`?options[idle_in_transaction_session_timeout]=…`) keeps its own value.
const PG_BEGIN_BOUNDED: &str = "BEGIN; SET LOCAL idle_in_transaction_session_timeout = 30000";

impl PgSessions {
    /// Connects to the PostgreSQL server at `url` and applies the migrations.
    pub async fn open(url: &str, now: i64) -> Result<PgSessions, SessionError> {
        let connect = PgConnectOptions::from_str(url)
            .map_err(|e| SessionError::InvalidArgument(format!("bad PostgreSQL URL: {e}")))?;
        let begin = match connect.get_options() {
            Some(o) if o.contains("idle_in_transaction_session_timeout") => "BEGIN",
            _ => PG_BEGIN_BOUNDED,
        };
        let pool = PgPoolOptions::new().max_connections(4).connect_with(connect).await.map_err(store_err)?;
        crate::migrate::postgres(&pool, &MIGRATIONS, now).await.map_err(SessionError::Store)?;
        Ok(PgSessions { pool, begin })
    }
}

impl PgSessions {
    /// The store's clock in SQL: the server's, in ms since the epoch.
    const CLOCK_SQL: &'static str = "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)";

    /// The store's clock: the server's, in ms since the epoch.
    async fn store_clock(tx: &mut sqlx::Transaction<'_, sqlx::Postgres>) -> Result<i64, SessionError> {
        sqlx::query_scalar("SELECT CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)")
            .fetch_one(&mut **tx)
            .await
            .map_err(store_err)
    }

    /// A transaction that may write.
    async fn begin_write(&self) -> Result<sqlx::Transaction<'_, sqlx::Postgres>, SessionError> {
        self.pool.begin_with(self.begin).await.map_err(store_err)
    }
}

session_store_impl!(PgSessions, sqlx::Postgres, " FOR UPDATE");

impl PgSessions {
    /// `settle` as one call of `ambit_session_settle` (migration `sessions_0006.sql`): the same steps in
    /// one transaction, in one round trip instead of six.
    async fn settle_in_one_call(
        &self,
        session_id: &str,
        owner: &str,
        items: &[Item],
        state: &SessionState,
        now: i64,
    ) -> Result<Option<Vec<i64>>, SessionError> {
        let kinds: Vec<String> = items.iter().map(|i| i.kind().to_string()).collect();
        let bodies: Vec<String> = items.iter().map(|i| i.body().to_string()).collect();
        let keep = state.state == "running";
        let parked = state.parked.as_ref().map(|p| p.to_string());
        let row = sqlx::query("SELECT outcome, first_idx FROM ambit_session_settle($1, $2, $3, $4, $5, $6, $7, $8)")
            .bind(session_id)
            .bind(owner)
            .bind(kinds)
            .bind(bodies)
            .bind(&state.state)
            .bind(parked)
            .bind(now)
            .bind(keep)
            .fetch_one(&self.pool)
            .await
            .map_err(store_err)?;
        let outcome: String = row.try_get(0).map_err(store_err)?;
        let first: i64 = row.try_get(1).map_err(store_err)?;
        match outcome.as_str() {
            "ok" => Ok(Some((0..items.len()).map(|i| first + i as i64).collect())),
            "not_found" => Err(SessionError::NotFound(session_id.to_string())),
            "lost" => Err(lost_lease(session_id)),
            other => Err(SessionError::Store(format!("ambit_session_settle answered '{other}'"))),
        }
    }
}

/// An owner paused inside a transaction on PostgreSQL (SIGSTOP, a frozen VM, a lost network), holding
/// its session's row: the next owner waits only until the server ends the paused connection
/// (`idle_in_transaction_session_timeout`, set for each of the store's write
/// transactions, [`PG_BEGIN_BOUNDED`]), never for as long as the pause lasts.
#[cfg(test)]
mod paused_owner_tests {
    use super::*;
    use sqlx::Connection;

    /// A fresh database on the server of `AMBIT_TEST_POSTGRES_URL` (scripts/test.sh starts one).
    async fn fresh_database(name: &str) -> String {
        let admin = std::env::var("AMBIT_TEST_POSTGRES_URL")
            .expect("AMBIT_TEST_POSTGRES_URL is not set: run `bash scripts/test.sh`");
        let db = format!("ambit_paused_{name}_{}", std::process::id());
        let mut c = sqlx::PgConnection::connect(&admin).await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!("DROP DATABASE IF EXISTS {db}"))).execute(&mut c).await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {db}"))).execute(&mut c).await.unwrap();
        let base = admin.rsplit_once('/').map(|(b, _)| b.to_string()).unwrap();
        format!("{base}/{db}")
    }

    /// Owner "a" holds session `s` with a lease that already ran out, and is paused inside one of the
    /// store's write transactions (begun with `a_begin`), holding the session's row. Owner "b" then tries
    /// to take the session over, waiting at most `b_lock_timeout_ms` for the row. Returns b's answer and
    /// whether a's commit failed on waking.
    async fn a_paused_owner(
        a_begin: &'static str,
        b_lock_timeout_ms: u64,
        name: &str,
    ) -> (Result<Taken, SessionError>, bool) {
        let url = fresh_database(name).await;
        let mut a = PgSessions::open(&url, 0).await.unwrap();
        a.begin = a_begin;
        assert!(a.create_taken("s", None, "a", 0, -60_000).await.unwrap());
        let mut paused = a.begin_write().await.unwrap();
        sqlx::query("SELECT 1 FROM ambit_sessions WHERE session_id = 's' FOR UPDATE")
            .execute(&mut *paused)
            .await
            .unwrap();
        let b = PgSessions::open(&format!("{url}?options[lock_timeout]={b_lock_timeout_ms}"), 0).await.unwrap();
        let taken = b.take("s", "b", Take::Run, super::super::now_ms(), 30_000).await;
        let a_cut_off = paused.commit().await.is_err();
        (taken, a_cut_off)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_next_owner_takes_over_once_the_server_cuts_the_paused_owner_off() {
        // The store's own begin with a bound of 1 s instead of 30; b would give up after a minute, so a
        // paused owner that is never cut off fails the test instead of hanging it.
        let begin = "BEGIN; SET LOCAL idle_in_transaction_session_timeout = 1000";
        let (taken, a_cut_off) = a_paused_owner(begin, 60_000, "attack").await;
        let taken = taken.expect("b takes the session over");
        assert!(taken.taken_over, "b took over from a");
        assert!(a_cut_off, "a's transaction was ended by the server while it was paused");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn control_without_the_bound_a_paused_owner_keeps_the_next_owner_out() {
        // Without the bound a holds the row for as long as it stays paused, so b's wait (2 s) always
        // runs out, however loaded the machine.
        let (taken, _) = a_paused_owner("BEGIN", 2_000, "control").await;
        let err = taken.expect_err("b cannot take the row a holds");
        assert!(err.to_string().contains("lock timeout"), "{err}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_write_transaction_has_the_bound_unless_the_url_names_its_own() {
        let url = fresh_database("default").await;
        let shown = |store: PgSessions| async move {
            let mut tx = store.begin_write().await.unwrap();
            let v: String =
                sqlx::query_scalar("SHOW idle_in_transaction_session_timeout").fetch_one(&mut *tx).await.unwrap();
            v
        };
        let default = PgSessions::open(&url, 0).await.unwrap();
        assert_eq!(shown(default).await, "30s");
        let own =
            PgSessions::open(&format!("{url}?options[idle_in_transaction_session_timeout]=5000"), 0).await.unwrap();
        assert_eq!(shown(own).await, "5s");
    }

    /// A task landing while another transaction holds its session's row (a new owner taking over) waits
    /// for the session's row before it holds the task's: `take` holds them in that order, so the two
    /// never deadlock. Checked by the order itself, while the landing waits: the task's row is free.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_landing_task_takes_the_session_row_before_the_task_row() {
        let url = fresh_database("order").await;
        let store = std::sync::Arc::new(PgSessions::open(&url, 0).await.unwrap());
        assert!(store.create_taken("s", None, "a", 0, 30_000).await.unwrap());
        let task_id = store.task_started("s", "fetch", 0).await.unwrap();
        // Another transaction holds the session's row (what `take` holds first).
        let mut holder = sqlx::PgConnection::connect(&url).await.unwrap();
        sqlx::query("BEGIN").execute(&mut holder).await.unwrap();
        sqlx::query("SELECT 1 FROM ambit_sessions WHERE session_id = 's' FOR UPDATE")
            .execute(&mut holder)
            .await
            .unwrap();
        let landing = {
            let (store, task_id) = (store.clone(), task_id.clone());
            tokio::spawn(async move {
                let task = TaskSnapshot {
                    session_id: "s".into(),
                    task_id,
                    name: "fetch".into(),
                    status: crate::agent::background::TaskStatus::Finished,
                    note: None,
                    result: Some("done".into()),
                };
                let item = Item::Message { message: crate::Message::user("[background task fetch] done") };
                store.task_landed("s", &task, Some(&item), 1).await
            })
        };
        // Wait (bounded by a count) until the landing is blocked on a lock.
        let mut probe = sqlx::PgConnection::connect(&url).await.unwrap();
        let mut waiting = 0i64;
        for _ in 0..10_000 {
            waiting = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'",
            )
            .fetch_one(&mut probe)
            .await
            .unwrap();
            if waiting > 0 {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(waiting, 1, "the landing never waited on the held session row");
        // The task's row is free while the landing waits: it holds nothing `take` would wait for.
        sqlx::query("BEGIN").execute(&mut probe).await.unwrap();
        let free = sqlx::query("SELECT 1 FROM ambit_session_tasks WHERE task_id = $1 FOR UPDATE NOWAIT")
            .bind(&task_id)
            .execute(&mut probe)
            .await;
        sqlx::query("ROLLBACK").execute(&mut probe).await.unwrap();
        sqlx::query("COMMIT").execute(&mut holder).await.unwrap();
        assert!(landing.await.unwrap().unwrap(), "the task landed once the row was let go");
        assert!(free.is_ok(), "the landing held the task's row while it waited for the session's: {free:?}");
    }
}
