//! The PostgreSQL store, for many machines sharing one ledger. A claim is one READ COMMITTED
//! transaction and one round trip (the function `ambit_ledger_claim`, migrations 0003 and 0004): rows
//! for new subjects (`ON CONFLICT DO NOTHING`, keys sorted; inserted already granted, and logged, when
//! the limit lets every candidate be granted, else as placeholders), then in candidate order each
//! existing eligible row locked `FOR UPDATE SKIP LOCKED`, updated and logged; every candidate returned.
//! Batched writes lock rows in key order, so concurrent batches never deadlock.

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Row};

use super::rules::{self, ItemState};
use super::sqlite::{
    GRANT_BY_RUN, GRANT_BY_TOKEN, add_count, fence_error, grant_facts, record_result, recorded_entry, stored_row,
};
use super::{
    AttemptOutcome, BacklogReport, ClaimRequest, ClaimResult, Durability, GrantReason, GrantReasonCounts, Labelled,
    LedgerError, LedgerOptions, LedgerStore, Record, RecordResult, RunActivity, StoredRow, Verdict,
};

/// The ledger in a PostgreSQL database.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    /// Connects to `postgres://…` and applies the migrations.
    pub async fn open(url: &str, options: &LedgerOptions) -> Result<PgStore, LedgerError> {
        let connect = PgConnectOptions::from_str(url)
            .map_err(|e| LedgerError::InvalidArgument(format!("bad PostgreSQL URL: {e}")))?
            .options([
                (
                    "synchronous_commit",
                    match options.durability {
                        Durability::Full => "on",
                        Durability::Fast => "off",
                    },
                ),
                // Plan every execution with its own arguments and the table's current size. Left to
                // choose, PostgreSQL keeps a generic plan once it looks no dearer than the custom ones,
                // and a generic plan made while the ledger is small joins the candidates to the whole
                // scope (a hash join, or the scope as the outer loop) instead of looking each candidate
                // up by key: a claim then reads every row of its scope until autovacuum's ANALYZE
                // invalidates the plan (20 ms a claim at 20,000 rows; found with EXPLAIN ANALYZE on a
                // plan prepared over an empty table). The claim itself (`ambit_ledger_claim`) keeps its
                // plans: its statements each look one key up by the whole primary key, with sequential
                // scans off inside it, so no plan of it can read a whole scope (issue 18: planning was
                // most of a claim's server time). The other statements are still planned each time.
                ("plan_cache_mode", "force_custom_plan"),
            ]);
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections.max(1))
            .acquire_timeout(Duration::from_secs(60))
            .connect_with(connect)
            .await?;
        crate::migrate::postgres(&pool, &super::migrate::PLAN, options.clock.now_ms())
            .await
            .map_err(LedgerError::Store)?;
        Ok(PgStore { pool })
    }

    /// The store's connection pool.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }
}

type Tx = sqlx::Transaction<'static, sqlx::Postgres>;

/// The claim, one statement: `ambit_ledger_claim` (migration 0003, its SQL beside this file's in
/// core/migrations/postgres) pins the routine's scope, inserts placeholder rows for new subjects, then
/// grants in candidate order and returns every candidate: subject_key, the granted secret, grant reason,
/// then the row as the claim found it (attempts, claim_token, lease_until, eligible_at, fingerprint), and
/// `pinned_scope` (set on the one row returned when the routine is pinned to another scope).
const CLAIM: &str = "SELECT * FROM ambit_ledger_claim($1, $2, $3, $4, $5, $6, $7, $8, $9)";

const ROWS_OF: &str = "SELECT scope, subject_key, routine_id, attempts, misses, claim_token, lease_until, lease_run_id, \
     eligible_at, fingerprint, last_outcome, last_grant_reason, last_attempt_at FROM ambit_ledger_items \
     WHERE scope = $1 AND subject_key = ANY($2) ORDER BY subject_key";

async fn rows_of(
    tx: &mut Tx,
    scope: &str,
    keys: &[String],
    lock: bool,
) -> Result<HashMap<String, StoredRow>, LedgerError> {
    let rows = if lock {
        sqlx::query(ROWS_OF_LOCKED).bind(scope).bind(keys).fetch_all(&mut **tx).await?
    } else {
        sqlx::query(ROWS_OF).bind(scope).bind(keys).fetch_all(&mut **tx).await?
    };
    let mut out = HashMap::with_capacity(rows.len());
    for r in &rows {
        let row: StoredRow = stored_row!(r);
        out.insert(row.subject_key.clone(), row);
    }
    Ok(out)
}

const ROWS_OF_LOCKED: &str = "SELECT scope, subject_key, routine_id, attempts, misses, claim_token, lease_until, \
     lease_run_id, eligible_at, fingerprint, last_outcome, last_grant_reason, last_attempt_at FROM ambit_ledger_items \
     WHERE scope = $1 AND subject_key = ANY($2) ORDER BY subject_key FOR UPDATE";

#[async_trait]
impl LedgerStore for PgStore {
    async fn claim(&self, req: &ClaimRequest, now: i64) -> Result<ClaimResult, LedgerError> {
        let keys: Vec<&str> = req.candidates.iter().map(|c| c.subject_key.as_str()).collect();
        let fingerprints: Vec<Option<&str>> = req.candidates.iter().map(|c| c.fingerprint.as_deref()).collect();
        let lease_until = now.saturating_add(req.lease_ms);
        // One unguessable token per candidate, by position; the granted ones are handed out.
        let secrets = req.candidates.iter().map(|_| rules::new_claim_token()).collect::<Result<Vec<i64>, _>>()?;
        // No BEGIN/COMMIT: the one statement is its own transaction (committed durably before it answers).
        let rows = sqlx::query(CLAIM)
            .bind(&req.scope)
            .bind(&keys)
            .bind(&fingerprints)
            .bind(now)
            .bind(i64::try_from(req.limit).unwrap_or(i64::MAX))
            .bind(lease_until)
            .bind(&req.run_id)
            .bind(&req.routine_id)
            .bind(&secrets)
            .fetch_all(&self.pool)
            .await?;
        if let Some(pinned) = rows.first().map(|r| r.try_get::<Option<String>, _>(8)).transpose()?.flatten() {
            return Err(LedgerError::ScopePinned {
                routine_id: req.routine_id.clone().unwrap_or_default(),
                pinned_scope: pinned,
                scope: req.scope.clone(),
            });
        }

        let mut granted_count = 0;
        let mut last_granted = None;
        for (i, r) in rows.iter().enumerate() {
            if r.try_get::<Option<i64>, _>(1)?.is_some() {
                granted_count += 1;
                last_granted = Some(i);
            }
        }
        let mut candidates = Vec::with_capacity(rows.len());
        for (i, (r, c)) in rows.iter().zip(&req.candidates).enumerate() {
            let verdict = match (r.try_get::<Option<i64>, _>(1)?, r.try_get::<Option<String>, _>(2)?) {
                (Some(token), Some(reason)) => Verdict::Granted {
                    grant_reason: GrantReason::parse(&reason)
                        .ok_or_else(|| LedgerError::Store(format!("unknown grant reason '{reason}'")))?,
                    token,
                    lease_until,
                },
                _ => {
                    let snapshot = match r.try_get::<Option<i64>, _>(3)? {
                        None => None,
                        Some(attempts) => Some(ItemState {
                            attempts,
                            claim_token: r.try_get(4)?,
                            lease_until: r.try_get(5)?,
                            eligible_at: r.try_get(6)?,
                            fingerprint: r.try_get(7)?,
                            ..ItemState::default()
                        }),
                    };
                    let seen = rules::eligibility(snapshot.as_ref(), c.fingerprint.as_deref(), now);
                    rules::label_not_granted(seen, i, granted_count, req.limit, last_granted)
                }
            };
            candidates.push(Labelled { subject_key: c.subject_key.clone(), verdict });
        }
        Ok(ClaimResult { scope: req.scope.clone(), candidates })
    }

    async fn record(
        &self,
        scope: &str,
        run_id: Option<&str>,
        records: &[Record],
        now: i64,
    ) -> Result<RecordResult, LedgerError> {
        let mut tx = self.pool.begin().await?;
        let mut keys: Vec<String> = records.iter().map(|r| r.subject_key.clone()).collect();
        keys.sort();
        let rows = rows_of(&mut tx, scope, &keys, true).await?;
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
        let recorded: Vec<_> = applied.iter().map(|(r, _, next)| recorded_entry(r, next)).collect();
        applied.sort_by(|a, b| a.0.subject_key.cmp(&b.0.subject_key));
        for (r, token, next) in &applied {
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
        }
        tx.commit().await?;
        Ok(record_result(scope, recorded))
    }

    async fn rows(&self, scope: Option<&str>, routine_id: Option<&str>) -> Result<Vec<StoredRow>, LedgerError> {
        let rows = sqlx::query(
            "SELECT scope, subject_key, routine_id, attempts, misses, claim_token, lease_until, lease_run_id, \
                 eligible_at, fingerprint, last_outcome, last_grant_reason, last_attempt_at \
             FROM ambit_ledger_items WHERE claim_token > 0 AND ($1::text IS NULL OR scope = $1) \
               AND ($2::text IS NULL OR scope IN (SELECT scope FROM ambit_ledger_items WHERE routine_id = $2 \
                                                  UNION SELECT scope FROM ambit_ledger_routines WHERE routine_id = $2))",
        )
        .bind(scope)
        .bind(routine_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(|r| Ok(stored_row!(r))).collect()
    }

    async fn states(&self, scope: &str, keys: &[String]) -> Result<Vec<(String, ItemState)>, LedgerError> {
        let mut tx = self.pool.begin().await?;
        let rows = rows_of(&mut tx, scope, keys, false).await?;
        tx.rollback().await?;
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
        .execute(&self.pool)
        .await?;
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
