//! The SQLite store, the embedded default: one file, WAL, every write transaction begun IMMEDIATE (a
//! deferred transaction that reads and then writes fails with SQLITE_BUSY under load, and the busy
//! timeout does not help), `synchronous=FULL` unless the fast mode is asked for. SQLite has one writer
//! at a time: this process's write transactions queue on an in-process lock (FIFO) before BEGIN
//! IMMEDIATE, so a writer starts the moment the one before it commits instead of sleeping in SQLite's
//! busy handler (1, 2, 5, ... 100 ms between tries); other processes' writers still wait on the busy
//! timeout. Measured with core/benches/ledger.rs (issue 18: 8 clients claiming).

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, SqlitePool};

use super::rules::{self, Fence, ItemState};
use super::{
    AttemptOutcome, BacklogReport, ClaimRequest, ClaimResult, Durability, GrantReason, GrantReasonCounts, Labelled,
    LedgerError, LedgerOptions, LedgerStore, Record, RecordResult, Recorded, RunActivity, StoredRow, Verdict,
};

/// Reads a row selected with the item columns in table order, `scope` to `last_attempt_at` (either store).
macro_rules! stored_row {
    ($r:expr) => {{
        let r = $r;
        StoredRow {
            scope: r.try_get(0)?,
            subject_key: r.try_get(1)?,
            routine_id: r.try_get(2)?,
            state: ItemState {
                attempts: r.try_get(3)?,
                misses: r.try_get(4)?,
                claim_token: r.try_get(5)?,
                lease_until: r.try_get(6)?,
                lease_run_id: r.try_get(7)?,
                eligible_at: r.try_get(8)?,
                fingerprint: r.try_get(9)?,
                last_outcome: r.try_get::<Option<String>, _>(10)?.as_deref().and_then(AttemptOutcome::parse),
            },
            last_grant_reason: r.try_get::<Option<String>, _>(11)?.as_deref().and_then(GrantReason::parse),
            last_attempt_at: r.try_get(12)?,
        }
    }};
}
pub(crate) use stored_row;

/// The ledger in one SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    /// Held for the whole of each write transaction of this process (see the module's note).
    writer: std::sync::Arc<tokio::sync::Mutex<()>>,
}

impl SqliteStore {
    /// Opens (creating if missing) the file at `path` and applies the migrations.
    pub async fn open(path: &str, options: &LedgerOptions) -> Result<SqliteStore, LedgerError> {
        if path.is_empty() {
            return Err(LedgerError::InvalidArgument(
                "sqlite:// needs a file path, e.g. sqlite:///var/lib/app/ledger.db".into(),
            ));
        }
        let connect = SqliteConnectOptions::from_str("sqlite://")
            .map_err(|e| LedgerError::InvalidArgument(e.to_string()))?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(match options.durability {
                Durability::Full => SqliteSynchronous::Full,
                Durability::Fast => SqliteSynchronous::Normal,
            })
            .busy_timeout(Duration::from_secs(30));
        let pool = SqlitePoolOptions::new()
            .max_connections(options.max_connections.max(1))
            .acquire_timeout(Duration::from_secs(60))
            // No ping on acquire: the connection is a file opened in this process, with nothing at the
            // other end to hang up, and the ping is one more trip to the connection's worker thread
            // inside the write lock of every claim (issue 18: under load each trip waits for a CPU).
            .test_before_acquire(false)
            .connect_with(connect)
            .await?;
        crate::migrate::sqlite(&pool, &super::migrate::PLAN, options.clock.now_ms())
            .await
            .map_err(LedgerError::Store)?;
        Ok(SqliteStore { pool, writer: Default::default() })
    }

    /// The connection pool, for tools that read the file directly.
    pub fn pool(&self) -> &SqlitePool {
        &self.pool
    }
}

type Tx = sqlx::Transaction<'static, sqlx::Sqlite>;

impl SqliteStore {
    /// A write transaction (BEGIN IMMEDIATE) with this process's writer lock; keep the guard until the
    /// transaction is committed or dropped.
    async fn begin_write(&self) -> Result<(tokio::sync::OwnedMutexGuard<()>, Tx), LedgerError> {
        let guard = self.writer.clone().lock_owned().await;
        Ok((guard, self.pool.begin_with("BEGIN IMMEDIATE").await?))
    }
}

async fn pin(tx: &mut Tx, routine_id: Option<&str>, scope: &str, now: i64) -> Result<(), LedgerError> {
    let Some(routine_id) = routine_id else { return Ok(()) };
    sqlx::query(
        "INSERT INTO ambit_ledger_routines (routine_id, scope, pinned_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
    )
    .bind(routine_id)
    .bind(scope)
    .bind(now)
    .execute(&mut **tx)
    .await?;
    let pinned: String = sqlx::query_scalar("SELECT scope FROM ambit_ledger_routines WHERE routine_id = $1")
        .bind(routine_id)
        .fetch_one(&mut **tx)
        .await?;
    if pinned != scope {
        return Err(LedgerError::ScopePinned {
            routine_id: routine_id.into(),
            pinned_scope: pinned,
            scope: scope.into(),
        });
    }
    Ok(())
}

async fn rows_of(tx: &mut Tx, scope: &str, keys: &[&str]) -> Result<HashMap<String, StoredRow>, LedgerError> {
    let keys_json = serde_json::to_string(keys).map_err(|e| LedgerError::Store(e.to_string()))?;
    let rows = sqlx::query(ROWS_OF).bind(scope).bind(keys_json).fetch_all(&mut **tx).await?;
    let mut out = HashMap::with_capacity(rows.len());
    for r in &rows {
        let row: StoredRow = stored_row!(r);
        out.insert(row.subject_key.clone(), row);
    }
    Ok(out)
}

/// The grant a record names by its claim token (either store).
pub(super) const GRANT_BY_TOKEN: &str = "SELECT token, run_id, outcome FROM ambit_ledger_attempts \
     WHERE scope = $1 AND subject_key = $2 AND claim_secret = $3";
/// The latest grant of a subject to a run, for a record without a token (either store).
pub(super) const GRANT_BY_RUN: &str = "SELECT token, run_id, outcome FROM ambit_ledger_attempts \
     WHERE scope = $1 AND subject_key = $2 AND run_id = $3 ORDER BY token DESC LIMIT 1";

/// A grant row read with [`GRANT_BY_TOKEN`] or [`GRANT_BY_RUN`].
pub(super) fn grant_facts((number, run_id, outcome): (i64, Option<String>, Option<String>)) -> rules::GrantFacts {
    rules::GrantFacts { number, run_id, outcome }
}

/// The fence's refusal as the ledger's error (either store).
pub(super) fn fence_error(subject_key: &str, verdict: Result<(), Fence>) -> Result<(), LedgerError> {
    verdict.map_err(|f| match f {
        Fence::Stale => LedgerError::StaleToken { subject_key: subject_key.to_string() },
        Fence::NotClaimed(reason) => LedgerError::NotClaimed { subject_key: subject_key.to_string(), reason },
    })
}

const ROWS_OF: &str = "SELECT scope, subject_key, routine_id, attempts, misses, claim_token, lease_until, lease_run_id, \
     eligible_at, fingerprint, last_outcome, last_grant_reason, last_attempt_at FROM ambit_ledger_items \
     WHERE scope = $1 AND subject_key IN (SELECT value FROM json_each($2))";

#[async_trait]
impl LedgerStore for SqliteStore {
    async fn claim(&self, req: &ClaimRequest, now: i64) -> Result<ClaimResult, LedgerError> {
        let (_writer, mut tx) = self.begin_write().await?;
        pin(&mut tx, req.routine_id.as_deref(), &req.scope, now).await?;
        let keys: Vec<&str> = req.candidates.iter().map(|c| c.subject_key.as_str()).collect();
        let rows = rows_of(&mut tx, &req.scope, &keys).await?;
        let eligibilities: Vec<rules::Eligibility> = req
            .candidates
            .iter()
            .map(|c| rules::eligibility(rows.get(&c.subject_key).map(|r| &r.state), c.fingerprint.as_deref(), now))
            .collect();
        let lease_until = now.saturating_add(req.lease_ms);
        let mut grants = Vec::new();
        let mut secrets = Vec::new();
        for _ in 0..req.limit.min(req.candidates.len()) {
            secrets.push(rules::new_claim_token()?);
        }
        let verdicts = rules::label(&eligibilities, req.limit, |i, reason| {
            let number = rows.get(&req.candidates[i].subject_key).map_or(0, |r| r.state.claim_token) + 1;
            let secret = secrets[grants.len()];
            grants.push((i, reason, number, secret));
            Verdict::Granted { grant_reason: reason, token: secret, lease_until }
        });
        for (i, reason, token, secret) in grants {
            let c = &req.candidates[i];
            let abandons = match &eligibilities[i] {
                rules::Eligibility::Eligible { abandons, .. } => *abandons,
                _ => None,
            };
            if let Some(old) = abandons {
                sqlx::query(
                    "UPDATE ambit_ledger_attempts SET outcome = 'abandoned', finished_at = $4 \
                     WHERE scope = $1 AND subject_key = $2 AND token = $3 AND outcome IS NULL",
                )
                .bind(&req.scope)
                .bind(&c.subject_key)
                .bind(old)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            }
            sqlx::query(
                "INSERT INTO ambit_ledger_items (scope, subject_key, routine_id, attempts, claim_token, lease_until, \
                     lease_run_id, fingerprint, last_grant_reason, last_attempt_at) \
                 VALUES ($1, $2, $3, 1, 1, $4, $5, $6, $7, $8) \
                 ON CONFLICT (scope, subject_key) DO UPDATE SET \
                     routine_id = COALESCE(excluded.routine_id, ambit_ledger_items.routine_id), \
                     attempts = ambit_ledger_items.attempts + 1, \
                     claim_token = ambit_ledger_items.claim_token + 1, \
                     lease_until = excluded.lease_until, lease_run_id = excluded.lease_run_id, \
                     fingerprint = COALESCE(excluded.fingerprint, ambit_ledger_items.fingerprint), \
                     last_grant_reason = excluded.last_grant_reason, last_attempt_at = excluded.last_attempt_at, \
                     last_outcome = CASE WHEN $9 THEN 'abandoned' ELSE ambit_ledger_items.last_outcome END",
            )
            .bind(&req.scope)
            .bind(&c.subject_key)
            .bind(&req.routine_id)
            .bind(lease_until)
            .bind(&req.run_id)
            .bind(&c.fingerprint)
            .bind(reason.as_str())
            .bind(now)
            .bind(abandons.is_some())
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO ambit_ledger_attempts (scope, subject_key, token, run_id, routine_id, grant_reason, \
                     granted_at, lease_until, claim_secret) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            )
            .bind(&req.scope)
            .bind(&c.subject_key)
            .bind(token)
            .bind(&req.run_id)
            .bind(&req.routine_id)
            .bind(reason.as_str())
            .bind(now)
            .bind(lease_until)
            .bind(secret)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(ClaimResult {
            scope: req.scope.clone(),
            candidates: req
                .candidates
                .iter()
                .zip(verdicts)
                .map(|(c, verdict)| Labelled { subject_key: c.subject_key.clone(), verdict })
                .collect(),
        })
    }

    async fn record(
        &self,
        scope: &str,
        run_id: Option<&str>,
        records: &[Record],
        now: i64,
    ) -> Result<RecordResult, LedgerError> {
        let (_writer, mut tx) = self.begin_write().await?;
        let keys: Vec<&str> = records.iter().map(|r| r.subject_key.as_str()).collect();
        let rows = rows_of(&mut tx, scope, &keys).await?;
        let mut applied = Vec::with_capacity(records.len());
        for r in records {
            let state = rows.get(&r.subject_key).map(|row| &row.state);
            let grant = match (r.token, run_id) {
                (Some(token), _) => sqlx::query_as(GRANT_BY_TOKEN).bind(scope).bind(&r.subject_key).bind(token),
                (None, run) => sqlx::query_as(GRANT_BY_RUN).bind(scope).bind(&r.subject_key).bind(run),
            }
            .fetch_optional(&mut *tx)
            .await?
            .map(grant_facts);
            fence_error(&r.subject_key, rules::fence(state, grant.as_ref(), r.token.is_some(), run_id))?;
            let state = state.expect("the fence passed, so the row exists");
            applied.push((r, state.claim_token, rules::apply_outcome(state, r.outcome, now)));
        }
        let mut recorded = Vec::with_capacity(applied.len());
        for (r, token, next) in applied {
            sqlx::query(
                "UPDATE ambit_ledger_items SET attempts = $3, misses = $4, lease_until = NULL, lease_run_id = NULL, \
                     eligible_at = $5, last_outcome = $6, fingerprint = COALESCE($7, fingerprint) \
                 WHERE scope = $1 AND subject_key = $2",
            )
            .bind(scope)
            .bind(&r.subject_key)
            .bind(next.attempts)
            .bind(next.misses)
            .bind(next.eligible_at)
            .bind(next.last_outcome.map(AttemptOutcome::as_str))
            .bind(&r.fingerprint)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "UPDATE ambit_ledger_attempts SET outcome = $4, finished_at = $5 \
                 WHERE scope = $1 AND subject_key = $2 AND token = $3",
            )
            .bind(scope)
            .bind(&r.subject_key)
            .bind(token)
            .bind(r.outcome.as_str())
            .bind(now)
            .execute(&mut *tx)
            .await?;
            recorded.push(recorded_entry(r, &next));
        }
        tx.commit().await?;
        Ok(record_result(scope, recorded))
    }

    async fn rows(&self, scope: Option<&str>, routine_id: Option<&str>) -> Result<Vec<StoredRow>, LedgerError> {
        let rows = sqlx::query(
            "SELECT scope, subject_key, routine_id, attempts, misses, claim_token, lease_until, lease_run_id, \
                 eligible_at, fingerprint, last_outcome, last_grant_reason, last_attempt_at \
             FROM ambit_ledger_items WHERE claim_token > 0 AND ($1 IS NULL OR scope = $1) \
               AND ($2 IS NULL OR scope IN (SELECT scope FROM ambit_ledger_items WHERE routine_id = $2 \
                                            UNION SELECT scope FROM ambit_ledger_routines WHERE routine_id = $2))",
        )
        .bind(scope)
        .bind(routine_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok(stored_row!(r))).collect()
    }

    async fn states(&self, scope: &str, keys: &[String]) -> Result<Vec<(String, ItemState)>, LedgerError> {
        let mut conn = self.pool.begin().await?;
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let rows = rows_of(&mut conn, scope, &keys).await?;
        conn.rollback().await?;
        Ok(rows.into_iter().map(|(k, r)| (k, r.state)).collect())
    }

    async fn grant_reason_counts(&self, scope: &str) -> Result<GrantReasonCounts, LedgerError> {
        let rows = sqlx::query(
            "SELECT last_grant_reason, COUNT(*) FROM ambit_ledger_items \
             WHERE scope = $1 AND last_grant_reason IS NOT NULL GROUP BY 1",
        )
        .bind(scope)
        .fetch_all(&self.pool)
        .await?;
        let mut counts = GrantReasonCounts::default();
        for r in &rows {
            let reason: String = r.try_get(0)?;
            add_count(&mut counts, &reason, r.try_get::<i64, _>(1)?);
        }
        Ok(counts)
    }

    async fn pinned_scope(&self, routine_id: &str) -> Result<Option<String>, LedgerError> {
        Ok(sqlx::query_scalar("SELECT scope FROM ambit_ledger_routines WHERE routine_id = $1")
            .bind(routine_id)
            .fetch_optional(&self.pool)
            .await?)
    }

    async fn save_report(
        &self,
        report: &BacklogReport,
        run_id: Option<&str>,
        subjects: usize,
        batch_size: u32,
        now: i64,
    ) -> Result<(), LedgerError> {
        let (_writer, mut tx) = self.begin_write().await?;
        sqlx::query(
            "INSERT INTO ambit_ledger_backlog_reports (routine_id, run_id, scope, reported_at, subjects, workable, \
                 batch_size, extra_runs) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&report.routine_id)
        .bind(run_id)
        .bind(&report.scope)
        .bind(now)
        .bind(subjects as i64)
        .bind(report.workable as i64)
        .bind(i64::from(batch_size))
        .bind(i64::from(report.extra_runs))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn latest_report(&self, routine_id: &str) -> Result<Option<(i64, u64)>, LedgerError> {
        let row: Option<(i64, i64)> = sqlx::query_as(
            "SELECT reported_at, workable FROM ambit_ledger_backlog_reports WHERE routine_id = $1 \
             ORDER BY reported_at DESC, id DESC LIMIT 1",
        )
        .bind(routine_id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(|(at, w)| (at, w.max(0) as u64)))
    }

    async fn run_activity(&self, routine_id: &str, run_id: &str) -> Result<RunActivity, LedgerError> {
        let (claimed, reported): (bool, bool) = sqlx::query_as(
            "SELECT EXISTS (SELECT 1 FROM ambit_ledger_attempts WHERE run_id = $2), \
                    EXISTS (SELECT 1 FROM ambit_ledger_backlog_reports WHERE routine_id = $1 AND run_id = $2)",
        )
        .bind(routine_id)
        .bind(run_id)
        .fetch_one(&self.pool)
        .await?;
        Ok(RunActivity { claimed, reported })
    }
}

pub(crate) fn add_count(counts: &mut GrantReasonCounts, reason: &str, n: i64) {
    let n = n.max(0) as u64;
    match GrantReason::parse(reason) {
        Some(GrantReason::Fresh) => counts.fresh += n,
        Some(GrantReason::CooldownExpired) => counts.cooldown_expired += n,
        Some(GrantReason::FingerprintChanged) => counts.fingerprint_changed += n,
        None => {}
    }
}

pub(crate) fn recorded_entry(r: &Record, next: &ItemState) -> Recorded {
    Recorded {
        subject_key: r.subject_key.clone(),
        outcome: r.outcome,
        attempts: next.attempts,
        misses: next.misses,
        eligible_at: next.eligible_at,
        escalate: rules::should_escalate(next.misses),
    }
}

pub(crate) fn record_result(scope: &str, recorded: Vec<Recorded>) -> RecordResult {
    let escalate = recorded.iter().filter(|r| r.escalate).map(|r| r.subject_key.clone()).collect();
    RecordResult { scope: scope.to_string(), recorded, escalate }
}
