//! The two routine stores, SQLite (one file, WAL, write transactions begun IMMEDIATE) and PostgreSQL
//! (rows locked `FOR UPDATE`, due routines claimed `SKIP LOCKED` so runners spread over them). The
//! code is written once: the SQL is the same but for a [`Dialect`], and `routine_store!` expands the
//! one implementation for each driver.
//!
//! The slot claim is the exactly-once guard. In one transaction, with the routine's row locked: re-read
//! the row and whether a run of it is live, plan the slots due ([`plan_claim`]), write the skipped ones,
//! insert the run under the unique `slot_key` (routine id and slot time), and move `next_slot` on. Two
//! runners racing for a slot cannot both commit: the second one either skips the locked row, sees the
//! moved `next_slot` when it re-reads, or fails on the unique key.

use std::collections::{HashMap, VecDeque};
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{AssertSqlSafe, Row};

use super::schedule::Timing;
use super::spec::Reschedule;
use super::{
    Outcome, OutcomeStatus, Revision, Routine, RoutineError, RoutinePatch, RoutineSpec, RunRecord, RunState,
    SkippedSlots,
};

/// What a runner asks of a claim.
#[derive(Debug, Clone)]
pub struct ClaimSlots {
    /// The claim's time (ms since the Unix epoch): the slots due by then are claimed.
    pub now: i64,
    /// The claiming runner's id.
    pub runner: String,
    /// Until when the runs it starts are leased to it (ms since the Unix epoch).
    pub lease_until: i64,
    /// The agents this runner can run; routines of other agents are left to other runners.
    pub agents: Vec<String>,
    /// The most routines claimed in one pass.
    pub limit: i64,
    /// A deliberately broken claim (read, then write, with no lock and no unique slot key): only for the
    /// negative control of the exactly-once tests.
    pub broken: bool,
}

/// What a claim started and skipped.
#[derive(Debug, Clone, Default)]
pub struct Claimed {
    /// The runs started, each with its routine as the claim left it.
    pub runs: Vec<(RunRecord, Routine)>,
    /// The slots skipped.
    pub skipped: Vec<SkippedSlots>,
}

/// What a finished run used.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunUsage {
    /// Tool calls the run made.
    pub tool_calls: i64,
    /// Of those, the calls that failed.
    pub tool_errors: i64,
    /// Input tokens the run's model requests took.
    pub input_tokens: i64,
    /// Output tokens the run's model requests produced.
    pub output_tokens: i64,
    /// What the run cost, when priced.
    pub cost: Option<f64>,
}

/// A routine store. Every time it needs comes in as an argument.
#[async_trait]
pub trait RoutineStore: Send + Sync {
    /// Stores a new routine, its first revision credited to `actor`.
    async fn create(&self, routine: &Routine, actor: &str) -> Result<(), RoutineError>;
    /// The routine with this id, if any.
    async fn get(&self, id: &str) -> Result<Option<Routine>, RoutineError>;
    /// The routine's revisions, oldest first.
    async fn revisions(&self, id: &str) -> Result<Vec<Revision>, RoutineError>;
    /// Every routine, or those of `agent`.
    async fn list(&self, agent: Option<&str>) -> Result<Vec<Routine>, RoutineError>;
    /// Applies `patch` (a new revision credited to `actor`), rescheduling when the timing changed.
    async fn update(&self, id: &str, patch: &RoutinePatch, actor: &str, now: i64) -> Result<Routine, RoutineError>;
    /// Deletes the routine and its run history (its revisions stay, with a `delete` one by `actor`).
    async fn delete(&self, id: &str, actor: &str, now: i64) -> Result<(), RoutineError>;
    /// Claims the due slots of up to `limit` routines: a run started or slots skipped for each.
    async fn claim(&self, req: &ClaimSlots) -> Result<Claimed, RoutineError>;
    /// Starts up to `want` extra runs of a routine for a drain, capped by its parallel limit (runs in
    /// progress, parked ones not counted) and its daily cap, in one transaction with the routine's row
    /// locked. A drain is not held by the routine's window.
    async fn claim_drain(
        &self,
        routine_id: &str,
        want: i64,
        runner: &str,
        lease_until: i64,
        now: i64,
    ) -> Result<Vec<(RunRecord, Routine)>, RoutineError>;
    /// Extends to `lease_until` the lease of every live run of `runner` whose lease ends before
    /// `renew_before` (a lease with time enough left is not written again).
    async fn renew(&self, runner: &str, lease_until: i64, renew_before: i64) -> Result<u64, RoutineError>;
    /// Marks `lost` every running run whose lease ran out before `now`.
    async fn mark_lost(&self, now: i64) -> Result<Vec<RunRecord>, RoutineError>;
    /// Extends the lease of one run of `runner` to `lease_until`; false when the run is no longer that
    /// runner's running run (marked `lost`, or ended).
    async fn renew_run(&self, run_id: &str, runner: &str, lease_until: i64) -> Result<bool, RoutineError>;
    /// The store's clock, ms since the epoch (PostgreSQL's server clock; SQLite's host's).
    async fn clock(&self) -> Result<i64, RoutineError>;
    /// Keeps a live run's reported outcome (the latest report wins).
    async fn report_outcome(&self, run_id: &str, outcome: &Outcome) -> Result<(), RoutineError>;
    /// Ends a run of `runner` as `finished` (an unreported outcome becomes `unknown`) or `parked`;
    /// `None` when the run was no longer this runner's (marked lost meanwhile).
    async fn finish(
        &self,
        run_id: &str,
        runner: &str,
        state: RunState,
        usage: &RunUsage,
        now: i64,
    ) -> Result<Option<RunRecord>, RoutineError>;
    /// Up to `limit` parked runs, the longest unchecked first, each marked checked at `now`: the runs
    /// whose sessions a runner looks at to see whether a resume ended them.
    async fn parked_to_check(&self, now: i64, limit: i64) -> Result<Vec<RunRecord>, RoutineError>;
    /// Ends a parked run as `finished` (an unreported outcome becomes `unknown`): its session's run was
    /// resumed and ended. `None` when it was no longer parked.
    async fn end_parked(&self, run_id: &str, now: i64) -> Result<Option<RunRecord>, RoutineError>;
    /// The latest `limit` runs, of one routine or of all.
    async fn runs(&self, routine_id: Option<&str>, limit: i64) -> Result<Vec<RunRecord>, RoutineError>;
    /// The run with this id, if any.
    async fn run(&self, run_id: &str) -> Result<Option<RunRecord>, RoutineError>;
    /// The skipped slots, of one routine or of all.
    async fn skipped(&self, routine_id: Option<&str>) -> Result<Vec<SkippedSlots>, RoutineError>;
}

/// What one routine's claim does: the slots it skips, the slot it runs, where `next_slot` goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClaimPlan {
    /// The slots skipped: (first, last, count, reason).
    pub skip: Vec<(i64, i64, i64, &'static str)>,
    /// The slot a run starts for, if one does.
    pub run: Option<i64>,
    /// Where the routine's next slot goes (`None`: paused).
    pub next_slot: Option<i64>,
}

/// The most slots of one routine walked in one claim (a one-second routine after a week's outage is
/// 604,800); past it the rest are skipped by the next claim.
const MAX_WALK: usize = 2_000_000;

/// Plans a claim at `now` for a routine whose earliest unclaimed slot is `next_slot`: of the slots due
/// (at or before `now`), the latest `catch_up` are kept and the older ones skipped as `missed`; the
/// earliest kept one runs (unless the daily cap is reached: then every due slot is skipped as
/// `daily_cap`), and `next_slot` moves to the next kept slot or to the first slot after `now`.
pub fn plan_claim(timing: &Timing, spec: &RoutineSpec, next_slot: i64, now: i64, runs_today: i64) -> ClaimPlan {
    let mut plan = plan_chain(timing, spec, next_slot, now, runs_today);
    if timing.window.is_some() {
        plan.skip.extend(outside_window(timing, next_slot, plan.next_slot));
    }
    plan
}

/// The most slots outside a window counted between two slots of the chain.
const MAX_WINDOW_WALK: usize = 100_000;

/// The slots of the cadence the window took out of the chain between `from` (a slot of the chain) and
/// `to` (where the claim moves the next slot), one `window` range for each gap in the chain: the claim
/// that moves the next slot past them records them, future ones included (they can no longer run).
fn outside_window(timing: &Timing, from: i64, to: Option<i64>) -> Vec<(i64, i64, i64, &'static str)> {
    let mut out = Vec::new();
    let Some(to) = to else { return out };
    let mut at = from;
    let mut walked = 0;
    while at < to && walked < MAX_WALK {
        let Some(next) = timing.next_slot(at) else { break };
        if let Some((first, last, slots)) = timing.cadence_slots_between(at, next.min(to), MAX_WINDOW_WALK) {
            out.push((first, last, slots, "window"));
        }
        at = next;
        walked += 1;
    }
    out
}

/// The slots a routine's chain would have had from `since` (when it was disabled) until `now`:
/// `(first, last, count)`, at most [`MAX_WINDOW_WALK`] walked.
fn paused_slots(spec: &RoutineSpec, since: i64, now: i64) -> Option<(i64, i64, i64)> {
    let timing = spec.timing().ok()?;
    let mut at = timing.first_slot(since);
    let (mut first, mut last, mut count) = (None, 0, 0i64);
    while let Some(s) = at.filter(|s| *s < now && (count as usize) < MAX_WINDOW_WALK) {
        first.get_or_insert(s);
        last = s;
        count += 1;
        at = timing.next_slot(s);
    }
    first.map(|f| (f, last, count))
}

/// [`plan_claim`] but for the window's gaps.
fn plan_chain(timing: &Timing, spec: &RoutineSpec, next_slot: i64, now: i64, runs_today: i64) -> ClaimPlan {
    let keep = spec.catch_up.max(1) as usize;
    let mut kept: VecDeque<i64> = VecDeque::new();
    let mut first_missed: Option<i64> = None;
    let mut last_missed = 0;
    let mut missed = 0i64;
    let mut slot = Some(next_slot);
    let mut walked = 0;
    while let Some(s) = slot.filter(|s| *s <= now && walked < MAX_WALK) {
        kept.push_back(s);
        if kept.len() > keep {
            let old = kept.pop_front().unwrap_or(s);
            first_missed.get_or_insert(old);
            last_missed = old;
            missed += 1;
        }
        slot = timing.next_slot(s);
        walked += 1;
    }
    let mut skip = Vec::new();
    if let Some(first) = first_missed {
        skip.push((first, last_missed, missed, "missed"));
    }
    let (Some(&earliest), Some(&latest)) = (kept.front(), kept.back()) else {
        return ClaimPlan { skip, run: None, next_slot: slot };
    };
    if spec.daily_cap.is_some_and(|cap| runs_today >= cap) {
        skip.push((earliest, latest, kept.len() as i64, "daily_cap"));
        return ClaimPlan { skip, run: None, next_slot: slot };
    }
    let next = if kept.len() > 1 { kept.get(1).copied() } else { slot };
    ClaimPlan { skip, run: Some(earliest), next_slot: next }
}

/// What differs between the two stores' SQL. Placeholders are `$N` in both.
struct Dialect {
    begin: &'static str,
    /// Appended to the read of one row about to be updated.
    lock: &'static str,
    /// Appended to the read of the due routines a claim takes.
    lock_due: &'static str,
    /// Appended to a read of rows to lock, skipping those another transaction holds.
    lock_skip: &'static str,
    /// The routine ids of a JSON array of strings (`$1`), as a subquery.
    ids: &'static str,
    /// Inserts the scheduled runs of a JSON array (`$1`) of `[id, routine_id, revision, slot_at,
    /// slot_key, session_id]`, for runner `$2`, leased until `$3`, started at `$4`; a slot already run
    /// is left out. Returns the runs inserted.
    insert_runs: &'static str,
    /// Moves `next_slot` of the routines of a JSON array (`$1`) of `[id, next_slot]`.
    move_slots: &'static str,
    /// The store's clock in SQL, ms since the epoch.
    clock: &'static str,
}

const SQLITE: Dialect = Dialect {
    begin: "BEGIN IMMEDIATE",
    clock: "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)",
    lock: "",
    lock_due: "",
    lock_skip: "",
    ids: "SELECT value FROM json_each($1)",
    insert_runs: "INSERT INTO ambit_routine_runs (id, routine_id, revision, kind, slot_at, slot_key, state, runner, \
                  lease_until, session_id, started_at) SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), \
                  json_extract(value, '$[2]'), 'scheduled', json_extract(value, '$[3]'), json_extract(value, '$[4]'), \
                  'running', $2, $3, json_extract(value, '$[5]'), $4 FROM json_each($1) WHERE true ON CONFLICT DO NOTHING",
    move_slots: "UPDATE ambit_routines SET next_slot = j.n FROM (SELECT json_extract(value, '$[0]') AS id, \
                 json_extract(value, '$[1]') AS n FROM json_each($1)) AS j WHERE ambit_routines.id = j.id",
};
const POSTGRES: Dialect = Dialect {
    begin: "BEGIN",
    clock: "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)",
    lock: " FOR UPDATE",
    lock_due: " FOR UPDATE OF r SKIP LOCKED",
    lock_skip: " FOR UPDATE SKIP LOCKED",
    ids: "SELECT jsonb_array_elements_text($1::jsonb)",
    insert_runs: "INSERT INTO ambit_routine_runs (id, routine_id, revision, kind, slot_at, slot_key, state, runner, \
                  lease_until, session_id, started_at) SELECT x->>0, x->>1, (x->>2)::bigint, 'scheduled', \
                  (x->>3)::bigint, x->>4, 'running', $2, $3, x->>5, $4 FROM jsonb_array_elements($1::jsonb) AS x \
                  ON CONFLICT DO NOTHING",
    move_slots: "UPDATE ambit_routines r SET next_slot = (x->>1)::bigint FROM jsonb_array_elements($1::jsonb) AS x \
                 WHERE r.id = x->>0",
};

const ROUTINE_COLUMNS: &str = "r.id, r.revision, r.definition, r.next_slot, r.created_at, r.updated_at";
const RUN_COLUMNS: &str = "id, routine_id, revision, kind, slot_at, state, runner, session_id, started_at, ended_at, \
                           outcome, summary, tool_calls, tool_errors, input_tokens, output_tokens, cost";

fn spec_json(spec: &RoutineSpec) -> Result<String, RoutineError> {
    serde_json::to_string(spec).map_err(|e| RoutineError::Store(e.to_string()))
}
fn spec_of(text: &str) -> Result<RoutineSpec, RoutineError> {
    serde_json::from_str(text).map_err(|e| RoutineError::Store(format!("a stored definition does not read: {e}")))
}

/// The database a pool type is for, so the macro can name its row type.
trait PoolDb {
    type Db: sqlx::Database;
}
impl PoolDb for sqlx::SqlitePool {
    type Db = sqlx::Sqlite;
}
impl PoolDb for sqlx::PgPool {
    type Db = sqlx::Postgres;
}

macro_rules! routine_store {
    ($store:ident, $pool:ty, $dialect:expr) => {
        impl $store {
            fn routine(row: &<<$pool as PoolDb>::Db as sqlx::Database>::Row) -> Result<Routine, RoutineError> {
                let definition: String = row.try_get(2)?;
                Ok(Routine {
                    id: row.try_get(0)?,
                    spec: spec_of(&definition)?,
                    revision: row.try_get(1)?,
                    next_slot: row.try_get(3)?,
                    created_at: row.try_get(4)?,
                    updated_at: row.try_get(5)?,
                })
            }

            fn run_record(r: &<<$pool as PoolDb>::Db as sqlx::Database>::Row) -> Result<RunRecord, RoutineError> {
                let state: String = r.try_get(5)?;
                let outcome: Option<String> = r.try_get(10)?;
                Ok(RunRecord {
                    id: r.try_get(0)?,
                    routine_id: r.try_get(1)?,
                    revision: r.try_get(2)?,
                    kind: r.try_get(3)?,
                    slot_at: r.try_get(4)?,
                    state: RunState::parse(&state).ok_or_else(|| RoutineError::Store(format!("unknown run state '{state}'")))?,
                    runner: r.try_get(6)?,
                    session_id: r.try_get(7)?,
                    started_at: r.try_get(8)?,
                    ended_at: r.try_get(9)?,
                    outcome: outcome.as_deref().and_then(OutcomeStatus::parse),
                    summary: r.try_get(11)?,
                    tool_calls: r.try_get(12)?,
                    tool_errors: r.try_get(13)?,
                    input_tokens: r.try_get(14)?,
                    output_tokens: r.try_get(15)?,
                    cost: r.try_get(16)?,
                })
            }

            async fn add_revision(
                tx: &mut sqlx::Transaction<'_, <$pool as PoolDb>::Db>,
                id: &str,
                revision: i64,
                actor: &str,
                at: i64,
                change: &str,
                spec: &RoutineSpec,
            ) -> Result<(), RoutineError> {
                sqlx::query(
                    "INSERT INTO ambit_routine_revisions (routine_id, revision, actor, at, change, definition) \
                     VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(id)
                .bind(revision)
                .bind(actor)
                .bind(at)
                .bind(change)
                .bind(spec_json(spec)?)
                .execute(&mut **tx)
                .await?;
                Ok(())
            }

            /// When a disabled routine was disabled: the time of the revision after its latest enabled one.
            async fn disabled_since(
                tx: &mut sqlx::Transaction<'_, <$pool as PoolDb>::Db>,
                id: &str,
            ) -> Result<Option<i64>, RoutineError> {
                let rows = sqlx::query(
                    "SELECT at, definition FROM ambit_routine_revisions WHERE routine_id = $1 ORDER BY revision DESC",
                )
                .bind(id)
                .fetch_all(&mut **tx)
                .await?;
                let mut since = None;
                for row in &rows {
                    let definition: String = row.try_get(1)?;
                    if spec_of(&definition)?.enabled {
                        break;
                    }
                    since = Some(row.try_get::<i64, _>(0)?);
                }
                Ok(since)
            }

            /// The due routines a claim looks at: locked (skipping rows other runners hold) unless broken.
            async fn due(
                conn: &mut <<$pool as PoolDb>::Db as sqlx::Database>::Connection,
                req: &ClaimSlots,
                lock: &str,
            ) -> Result<Vec<Routine>, RoutineError> {
                // Whether a routine has a live run is looked up per due routine, by the runs' (routine_id,
                // state) index (the OFFSET keeps PostgreSQL from turning the lookup into a join): as a
                // join, planned while the runs table had no statistics yet (its first minute, before
                // autovacuum's analyze), it read every live run for each due routine (2.7-4.4 s a claim at
                // 9,000 live runs, where the lookups take well under a millisecond).
                let holes: Vec<String> = (0..req.agents.len()).map(|i| format!("${}", i + 3)).collect();
                let sql = format!(
                    "SELECT {ROUTINE_COLUMNS} FROM ambit_routines r WHERE r.next_slot IS NOT NULL AND r.next_slot <= $1 \
                     AND r.enabled = 1 AND r.agent IN ({}) AND NOT EXISTS (SELECT 1 FROM ambit_routine_runs x \
                     WHERE x.routine_id = r.id AND x.state = 'running' LIMIT 1 OFFSET 0) ORDER BY r.next_slot \
                     LIMIT $2{lock}",
                    holes.join(", ")
                );
                let mut q = sqlx::query(AssertSqlSafe(sql)).bind(req.now).bind(req.limit);
                for a in &req.agents {
                    q = q.bind(a.as_str());
                }
                q.fetch_all(&mut *conn).await?.iter().map(Self::routine).collect()
            }

            /// Runs of a routine started today (in its day's zone): only a daily cap needs them.
            async fn runs_today(
                tx: &mut sqlx::Transaction<'_, <$pool as PoolDb>::Db>,
                routine: &Routine,
                now: i64,
            ) -> Result<i64, RoutineError> {
                if routine.spec.daily_cap.is_none() {
                    return Ok(0);
                }
                let (day_start, day_end) =
                    super::schedule::day_bounds(&routine.spec.day_zone(), now).unwrap_or((now, now));
                Ok(sqlx::query_scalar(
                    "SELECT count(*) FROM ambit_routine_runs WHERE routine_id = $1 AND started_at >= $2 AND started_at < $3",
                )
                .bind(&routine.id)
                .bind(day_start)
                .bind(day_end)
                .fetch_one(&mut **tx)
                .await?)
            }

            /// Records the slots a claim's plan skips.
            async fn write_skips(
                tx: &mut sqlx::Transaction<'_, <$pool as PoolDb>::Db>,
                req: &ClaimSlots,
                routine_id: &str,
                plan: &ClaimPlan,
                out: &mut Claimed,
            ) -> Result<(), RoutineError> {
                for &(first, last, slots, reason) in &plan.skip {
                    sqlx::query(
                        "INSERT INTO ambit_routine_skips (routine_id, first_slot, last_slot, slots, reason, at) \
                         VALUES ($1, $2, $3, $4, $5, $6)",
                    )
                    .bind(routine_id)
                    .bind(first)
                    .bind(last)
                    .bind(slots)
                    .bind(reason)
                    .bind(req.now)
                    .execute(&mut **tx)
                    .await?;
                    out.skipped.push(SkippedSlots {
                        routine_id: routine_id.to_string(),
                        first_slot: first,
                        last_slot: last,
                        slots,
                        reason: reason.to_string(),
                        at: req.now,
                    });
                }
                Ok(())
            }

            /// Claims one routine's due slots inside `tx`, given the routine as read.
            async fn claim_one(
                tx: &mut sqlx::Transaction<'_, <$pool as PoolDb>::Db>,
                req: &ClaimSlots,
                routine: Routine,
                out: &mut Claimed,
            ) -> Result<(), RoutineError> {
                let Some(next_slot) = routine.next_slot.filter(|s| *s <= req.now) else { return Ok(()) };
                let Ok(timing) = routine.spec.timing() else { return Ok(()) };
                let runs_today = Self::runs_today(tx, &routine, req.now).await?;
                let plan = plan_claim(&timing, &routine.spec, next_slot, req.now, runs_today);
                Self::write_skips(tx, req, &routine.id, &plan, out).await?;
                if let Some(slot) = plan.run {
                    let run_id = super::fresh_id("run");
                    let session_id = super::fresh_id("ses");
                    // The exactly-once key; the broken claim of the negative control keys by run instead.
                    // A slot already run (a reschedule can land on it) is taken: nothing is inserted, the
                    // routine moves on, and the rest of the batch is claimed as usual.
                    let slot_key = if req.broken { run_id.clone() } else { format!("{}@{slot}", routine.id) };
                    let sql = format!(
                        "INSERT INTO ambit_routine_runs (id, routine_id, revision, kind, slot_at, slot_key, state, runner, \
                         lease_until, session_id, started_at) VALUES ($1, $2, $3, 'scheduled', $4, $5, 'running', $6, $7, $8, $9) \
                         ON CONFLICT DO NOTHING RETURNING {RUN_COLUMNS}"
                    );
                    let row = sqlx::query(AssertSqlSafe(sql))
                        .bind(&run_id)
                        .bind(&routine.id)
                        .bind(routine.revision)
                        .bind(slot)
                        .bind(&slot_key)
                        .bind(&req.runner)
                        .bind(req.lease_until)
                        .bind(&session_id)
                        .bind(req.now)
                        .fetch_optional(&mut **tx)
                        .await?;
                    if let Some(row) = row {
                        out.runs.push((Self::run_record(&row)?, Routine { next_slot: plan.next_slot, ..routine.clone() }));
                    }
                }
                sqlx::query("UPDATE ambit_routines SET next_slot = $2 WHERE id = $1")
                    .bind(&routine.id)
                    .bind(plan.next_slot)
                    .execute(&mut **tx)
                    .await?;
                Ok(())
            }

            /// The claim: the due routines locked (skipping those other runners hold) and re-read, their
            /// plans made here, then every run inserted and every `next_slot` moved in one statement each.
            async fn claim_guarded(&self, req: &ClaimSlots) -> Result<Claimed, RoutineError> {
                let mut out = Claimed::default();
                let mut tx = self.pool.begin_with($dialect.begin).await?;
                let due = Self::due(&mut *tx, req, $dialect.lock_due).await?;
                if due.is_empty() {
                    tx.commit().await?;
                    return Ok(out);
                }
                // Re-read under the locks, in a statement of its own: a runner that committed since the
                // due list was read shows here (a moved next_slot, a live run).
                let ids = serde_json::to_string(&due.iter().map(|r| r.id.as_str()).collect::<Vec<_>>())
                    .map_err(|e| RoutineError::Store(e.to_string()))?;
                let sql = format!(
                    "SELECT {ROUTINE_COLUMNS}, (SELECT count(*) FROM ambit_routine_runs x WHERE x.routine_id = r.id \
                     AND x.state = 'running') FROM ambit_routines r WHERE r.id IN ({}) ORDER BY r.next_slot, r.id",
                    $dialect.ids
                );
                let rows = sqlx::query(AssertSqlSafe(sql)).bind(&ids).fetch_all(&mut *tx).await?;
                let mut runs = Vec::new();
                let mut moves = Vec::new();
                let mut planned: Vec<(String, Routine)> = Vec::new();
                for row in &rows {
                    let routine = Self::routine(row)?;
                    let live: i64 = row.try_get(6)?;
                    if live != 0 {
                        continue;
                    }
                    let Some(next_slot) = routine.next_slot.filter(|s| *s <= req.now) else { continue };
                    let Ok(timing) = routine.spec.timing() else { continue };
                    let runs_today = Self::runs_today(&mut tx, &routine, req.now).await?;
                    let plan = plan_claim(&timing, &routine.spec, next_slot, req.now, runs_today);
                    Self::write_skips(&mut tx, req, &routine.id, &plan, &mut out).await?;
                    if let Some(slot) = plan.run {
                        let run_id = super::fresh_id("run");
                        // The exactly-once key. A slot already run (a reschedule can land on it) is taken:
                        // nothing is inserted, the routine moves on, the rest of the batch is claimed.
                        runs.push(serde_json::json!([
                            run_id,
                            routine.id,
                            routine.revision,
                            slot,
                            format!("{}@{slot}", routine.id),
                            super::fresh_id("ses")
                        ]));
                        planned.push((run_id, Routine { next_slot: plan.next_slot, ..routine.clone() }));
                    }
                    moves.push(serde_json::json!([routine.id, plan.next_slot]));
                }
                if !runs.is_empty() {
                    let sql = format!("{} RETURNING {RUN_COLUMNS}", $dialect.insert_runs);
                    let inserted = sqlx::query(AssertSqlSafe(sql))
                        .bind(serde_json::Value::Array(runs).to_string())
                        .bind(&req.runner)
                        .bind(req.lease_until)
                        .bind(req.now)
                        .fetch_all(&mut *tx)
                        .await?;
                    let mut records: HashMap<String, RunRecord> = HashMap::with_capacity(inserted.len());
                    for row in &inserted {
                        let record = Self::run_record(row)?;
                        records.insert(record.id.clone(), record);
                    }
                    for (run_id, routine) in planned {
                        if let Some(record) = records.remove(&run_id) {
                            out.runs.push((record, routine));
                        }
                    }
                }
                if !moves.is_empty() {
                    sqlx::query($dialect.move_slots)
                        .bind(serde_json::Value::Array(moves).to_string())
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(out)
            }

            /// The negative control: the due list read with no lock, each routine then written as read.
            async fn claim_broken(&self, req: &ClaimSlots) -> Result<Claimed, RoutineError> {
                let mut out = Claimed::default();
                let due = {
                    let mut conn = self.pool.acquire().await?;
                    Self::due(&mut *conn, req, "").await?
                };
                for routine in due {
                    let mut tx = self.pool.begin_with($dialect.begin).await?;
                    Self::claim_one(&mut tx, req, routine, &mut out).await?;
                    tx.commit().await?;
                }
                Ok(out)
            }
        }

        #[async_trait]
        impl RoutineStore for $store {
            async fn create(&self, routine: &Routine, actor: &str) -> Result<(), RoutineError> {
                let mut tx = self.pool.begin_with($dialect.begin).await?;
                let inserted = sqlx::query(
                    "INSERT INTO ambit_routines (id, agent, revision, definition, enabled, next_slot, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (id) DO NOTHING",
                )
                .bind(&routine.id)
                .bind(&routine.spec.agent)
                .bind(routine.revision)
                .bind(spec_json(&routine.spec)?)
                .bind(routine.spec.enabled as i64)
                .bind(routine.next_slot)
                .bind(routine.created_at)
                .bind(routine.updated_at)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                let reused: Option<i64> =
                    sqlx::query_scalar("SELECT revision FROM ambit_routine_revisions WHERE routine_id = $1 LIMIT 1")
                        .bind(&routine.id)
                        .fetch_optional(&mut *tx)
                        .await?;
                if inserted == 0 || reused.is_some() {
                    return Err(RoutineError::invalid("id", format!("a routine '{}' exists or existed", routine.id)));
                }
                Self::add_revision(&mut tx, &routine.id, 1, actor, routine.created_at, "create", &routine.spec).await?;
                tx.commit().await?;
                Ok(())
            }

            async fn get(&self, id: &str) -> Result<Option<Routine>, RoutineError> {
                let sql = format!("SELECT {ROUTINE_COLUMNS} FROM ambit_routines r WHERE r.id = $1");
                let row = sqlx::query(AssertSqlSafe(sql)).bind(id).fetch_optional(&self.pool).await?;
                row.map(|r| Self::routine(&r)).transpose()
            }

            async fn revisions(&self, id: &str) -> Result<Vec<Revision>, RoutineError> {
                let rows = sqlx::query(
                    "SELECT revision, actor, at, change, definition FROM ambit_routine_revisions WHERE routine_id = $1 \
                     ORDER BY revision",
                )
                .bind(id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|r| {
                        let definition: String = r.try_get(4)?;
                        Ok(Revision {
                            revision: r.try_get(0)?,
                            actor: r.try_get(1)?,
                            at: r.try_get(2)?,
                            change: r.try_get(3)?,
                            definition: spec_of(&definition)?,
                        })
                    })
                    .collect()
            }

            async fn list(&self, agent: Option<&str>) -> Result<Vec<Routine>, RoutineError> {
                let sql = format!(
                    "SELECT {ROUTINE_COLUMNS} FROM ambit_routines r WHERE ($1 IS NULL OR r.agent = $1) ORDER BY r.id"
                );
                let rows = sqlx::query(AssertSqlSafe(sql)).bind(agent).fetch_all(&self.pool).await?;
                rows.iter().map(Self::routine).collect()
            }

            async fn update(&self, id: &str, patch: &RoutinePatch, actor: &str, now: i64) -> Result<Routine, RoutineError> {
                let mut tx = self.pool.begin_with($dialect.begin).await?;
                let sql = format!("SELECT {ROUTINE_COLUMNS} FROM ambit_routines r WHERE r.id = $1{}", $dialect.lock);
                let row = sqlx::query(AssertSqlSafe(sql))
                    .bind(id)
                    .fetch_optional(&mut *tx)
                    .await?
                    .ok_or_else(|| RoutineError::NotFound(id.to_string()))?;
                let old = Self::routine(&row)?;
                let (spec, how) = patch.apply(&old.spec)?;
                // A new timing must fire, whether the routine runs now or is paused (as on create).
                let first = if matches!(how, Reschedule::Anew) || !spec.same_timing(&old.spec) {
                    Some(spec.timing()?.first_slot(now).ok_or_else(|| super::never_fires(&spec))?)
                } else {
                    None
                };
                let next_slot = match how {
                    Reschedule::Keep => old.next_slot,
                    Reschedule::Anew => first,
                    Reschedule::Pause => None,
                };
                // Resumed: the slots that came while it was disabled are recorded as skipped.
                let paused = if !old.spec.enabled && spec.enabled {
                    Self::disabled_since(&mut tx, id).await?.and_then(|since| paused_slots(&spec, since, now))
                } else {
                    None
                };
                if let Some((first, last, slots)) = paused {
                    sqlx::query(
                        "INSERT INTO ambit_routine_skips (routine_id, first_slot, last_slot, slots, reason, at) \
                         VALUES ($1, $2, $3, $4, 'disabled', $5)",
                    )
                    .bind(id)
                    .bind(first)
                    .bind(last)
                    .bind(slots)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                }
                let new = Routine { spec, revision: old.revision + 1, updated_at: now, next_slot, ..old };
                sqlx::query(
                    "UPDATE ambit_routines SET revision = $2, definition = $3, enabled = $4, next_slot = $5, updated_at = $6 \
                     WHERE id = $1",
                )
                .bind(id)
                .bind(new.revision)
                .bind(spec_json(&new.spec)?)
                .bind(new.spec.enabled as i64)
                .bind(new.next_slot)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                Self::add_revision(&mut tx, id, new.revision, actor, now, "update", &new.spec).await?;
                tx.commit().await?;
                Ok(new)
            }

            async fn delete(&self, id: &str, actor: &str, now: i64) -> Result<(), RoutineError> {
                let mut tx = self.pool.begin_with($dialect.begin).await?;
                let sql = format!("SELECT {ROUTINE_COLUMNS} FROM ambit_routines r WHERE r.id = $1{}", $dialect.lock);
                let row = sqlx::query(AssertSqlSafe(sql))
                    .bind(id)
                    .fetch_optional(&mut *tx)
                    .await?
                    .ok_or_else(|| RoutineError::NotFound(id.to_string()))?;
                let old = Self::routine(&row)?;
                sqlx::query("DELETE FROM ambit_routines WHERE id = $1").bind(id).execute(&mut *tx).await?;
                // A run in progress finishes; its record goes when it does.
                sqlx::query("DELETE FROM ambit_routine_runs WHERE routine_id = $1 AND state <> 'running'")
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query("DELETE FROM ambit_routine_skips WHERE routine_id = $1").bind(id).execute(&mut *tx).await?;
                Self::add_revision(&mut tx, id, old.revision + 1, actor, now, "delete", &old.spec).await?;
                tx.commit().await?;
                Ok(())
            }

            async fn claim(&self, req: &ClaimSlots) -> Result<Claimed, RoutineError> {
                if req.agents.is_empty() {
                    return Ok(Claimed::default());
                }
                if req.broken { self.claim_broken(req).await } else { self.claim_guarded(req).await }
            }

            async fn claim_drain(
                &self,
                routine_id: &str,
                want: i64,
                runner: &str,
                lease_until: i64,
                now: i64,
            ) -> Result<Vec<(RunRecord, Routine)>, RoutineError> {
                let mut out = Vec::new();
                if want <= 0 {
                    return Ok(out);
                }
                let mut tx = self.pool.begin_with($dialect.begin).await?;
                let sql = format!("SELECT {ROUTINE_COLUMNS} FROM ambit_routines r WHERE r.id = $1{}", $dialect.lock);
                let Some(row) = sqlx::query(AssertSqlSafe(sql)).bind(routine_id).fetch_optional(&mut *tx).await? else {
                    return Ok(out);
                };
                let routine = Self::routine(&row)?;
                let running: i64 =
                    sqlx::query_scalar("SELECT count(*) FROM ambit_routine_runs WHERE routine_id = $1 AND state = 'running'")
                        .bind(routine_id)
                        .fetch_one(&mut *tx)
                        .await?;
                let (day_start, day_end) = super::schedule::day_bounds(&routine.spec.day_zone(), now).unwrap_or((now, now));
                let today: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM ambit_routine_runs WHERE routine_id = $1 AND started_at >= $2 AND started_at < $3",
                )
                .bind(routine_id)
                .bind(day_start)
                .bind(day_end)
                .fetch_one(&mut *tx)
                .await?;
                let allowed = super::rules_drain_allowed(want, routine.spec.parallel(), running, routine.spec.daily_cap, today);
                for _ in 0..allowed {
                    let sql = format!(
                        "INSERT INTO ambit_routine_runs (id, routine_id, revision, kind, slot_at, slot_key, state, runner, \
                         lease_until, session_id, started_at) VALUES ($1, $2, $3, 'drain', NULL, NULL, 'running', $4, $5, $6, $7) \
                         RETURNING {RUN_COLUMNS}"
                    );
                    let row = sqlx::query(AssertSqlSafe(sql))
                        .bind(super::fresh_id("run"))
                        .bind(routine_id)
                        .bind(routine.revision)
                        .bind(runner)
                        .bind(lease_until)
                        .bind(super::fresh_id("ses"))
                        .bind(now)
                        .fetch_one(&mut *tx)
                        .await?;
                    out.push((Self::run_record(&row)?, routine.clone()));
                }
                tx.commit().await?;
                Ok(out)
            }

            async fn renew(&self, runner: &str, lease_until: i64, renew_before: i64) -> Result<u64, RoutineError> {
                // Rows are locked in id order, so a renewal never deadlocks with another renewal or with
                // a lost-marking of the same rows (PostgreSQL; SQLite has one writer).
                let sql = format!(
                    "UPDATE ambit_routine_runs SET lease_until = $2 WHERE id IN (SELECT id FROM ambit_routine_runs \
                     WHERE runner = $1 AND state = 'running' AND lease_until < $3 ORDER BY id{})",
                    $dialect.lock
                );
                let done = sqlx::query(AssertSqlSafe(sql))
                    .bind(runner)
                    .bind(lease_until)
                    .bind(renew_before.min(lease_until))
                    .execute(&self.pool)
                    .await?;
                Ok(done.rows_affected())
            }

            async fn renew_run(&self, run_id: &str, runner: &str, lease_until: i64) -> Result<bool, RoutineError> {
                let done = sqlx::query(
                    "UPDATE ambit_routine_runs SET lease_until = $3 WHERE id = $1 AND runner = $2 AND state = 'running'",
                )
                .bind(run_id)
                .bind(runner)
                .bind(lease_until)
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn clock(&self) -> Result<i64, RoutineError> {
                Ok(sqlx::query_scalar(AssertSqlSafe(format!("SELECT {}", $dialect.clock))).fetch_one(&self.pool).await?)
            }

            async fn mark_lost(&self, now: i64) -> Result<Vec<RunRecord>, RoutineError> {
                // A row another transaction holds (a renewal in flight) is skipped: it is not lost.
                let sql = format!(
                    "UPDATE ambit_routine_runs SET state = 'lost', ended_at = $1 WHERE id IN (SELECT id FROM \
                     ambit_routine_runs WHERE state = 'running' AND lease_until < $1 ORDER BY id{}) \
                     AND state = 'running' AND lease_until < $1 RETURNING {RUN_COLUMNS}",
                    $dialect.lock_skip
                );
                let rows = sqlx::query(AssertSqlSafe(sql)).bind(now).fetch_all(&self.pool).await?;
                rows.iter().map(Self::run_record).collect()
            }

            async fn report_outcome(&self, run_id: &str, outcome: &Outcome) -> Result<(), RoutineError> {
                let done = sqlx::query(
                    "UPDATE ambit_routine_runs SET outcome = $2, summary = $3, tool_calls = $4, tool_errors = $5 \
                     WHERE id = $1 AND state IN ('running', 'parked')",
                )
                .bind(run_id)
                .bind(outcome.status.as_str())
                .bind(&outcome.summary)
                .bind(outcome.tool_calls)
                .bind(outcome.tool_errors)
                .execute(&self.pool)
                .await?;
                if done.rows_affected() == 0 {
                    return Err(RoutineError::invalid("run_id", format!("run '{run_id}' is not in progress")));
                }
                Ok(())
            }

            async fn finish(
                &self,
                run_id: &str,
                runner: &str,
                state: RunState,
                usage: &RunUsage,
                now: i64,
            ) -> Result<Option<RunRecord>, RoutineError> {
                let finished = state == RunState::Finished;
                // One statement (no transaction around it): the record, and whether its routine is still
                // there to keep it.
                let sql = format!(
                    "UPDATE ambit_routine_runs SET state = $3, ended_at = CASE WHEN $4 = 1 THEN $5 ELSE ended_at END, \
                     outcome = CASE WHEN $4 = 1 THEN COALESCE(outcome, 'unknown') ELSE outcome END, \
                     tool_calls = COALESCE(tool_calls, $6), tool_errors = COALESCE(tool_errors, $7), \
                     input_tokens = input_tokens + $8, output_tokens = output_tokens + $9, \
                     cost = CASE WHEN $10 IS NULL THEN cost ELSE COALESCE(cost, 0) + $10 END \
                     WHERE id = $1 AND runner = $2 AND state = 'running' RETURNING {RUN_COLUMNS}, \
                     CAST(CASE WHEN EXISTS (SELECT 1 FROM ambit_routines r WHERE r.id = ambit_routine_runs.routine_id) \
                     THEN 1 ELSE 0 END AS BIGINT)"
                );
                let row = sqlx::query(AssertSqlSafe(sql))
                    .bind(run_id)
                    .bind(runner)
                    .bind(state.as_str())
                    .bind(finished as i64)
                    .bind(now)
                    .bind(usage.tool_calls)
                    .bind(usage.tool_errors)
                    .bind(usage.input_tokens)
                    .bind(usage.output_tokens)
                    .bind(usage.cost)
                    .fetch_optional(&self.pool)
                    .await?;
                let kept = match &row {
                    Some(r) => r.try_get::<i64, _>(17)? == 1,
                    None => false,
                };
                let record = row.map(|r| Self::run_record(&r)).transpose()?;
                // The routine was deleted while the run was in progress: its history goes now (also the
                // record of a run marked lost meanwhile).
                if !kept {
                    sqlx::query(
                        "DELETE FROM ambit_routine_runs WHERE id = $1 AND state <> 'running' AND NOT EXISTS \
                         (SELECT 1 FROM ambit_routines r WHERE r.id = ambit_routine_runs.routine_id)",
                    )
                    .bind(run_id)
                    .execute(&self.pool)
                    .await?;
                }
                Ok(record)
            }

            async fn parked_to_check(&self, now: i64, limit: i64) -> Result<Vec<RunRecord>, RoutineError> {
                // Each parked run at most once a second, whichever runner looks.
                let sql = format!(
                    "UPDATE ambit_routine_runs SET checked_at = $1 WHERE id IN (SELECT id FROM ambit_routine_runs \
                     WHERE state = 'parked' AND COALESCE(checked_at, 0) <= $1 - 1000 \
                     ORDER BY COALESCE(checked_at, 0), id LIMIT $2{}) AND state = 'parked' RETURNING {RUN_COLUMNS}",
                    $dialect.lock_skip
                );
                let rows = sqlx::query(AssertSqlSafe(sql)).bind(now).bind(limit).fetch_all(&self.pool).await?;
                rows.iter().map(Self::run_record).collect()
            }

            async fn end_parked(&self, run_id: &str, now: i64) -> Result<Option<RunRecord>, RoutineError> {
                let sql = format!(
                    "UPDATE ambit_routine_runs SET state = 'finished', ended_at = $2, outcome = COALESCE(outcome, 'unknown') \
                     WHERE id = $1 AND state = 'parked' RETURNING {RUN_COLUMNS}"
                );
                let row = sqlx::query(AssertSqlSafe(sql)).bind(run_id).bind(now).fetch_optional(&self.pool).await?;
                row.map(|r| Self::run_record(&r)).transpose()
            }

            async fn runs(&self, routine_id: Option<&str>, limit: i64) -> Result<Vec<RunRecord>, RoutineError> {
                let sql = format!(
                    "SELECT {RUN_COLUMNS} FROM ambit_routine_runs WHERE ($1 IS NULL OR routine_id = $1) \
                     ORDER BY started_at DESC, id DESC LIMIT $2"
                );
                let rows = sqlx::query(AssertSqlSafe(sql)).bind(routine_id).bind(limit).fetch_all(&self.pool).await?;
                rows.iter().map(Self::run_record).collect()
            }

            async fn run(&self, run_id: &str) -> Result<Option<RunRecord>, RoutineError> {
                let sql = format!("SELECT {RUN_COLUMNS} FROM ambit_routine_runs WHERE id = $1");
                let row = sqlx::query(AssertSqlSafe(sql)).bind(run_id).fetch_optional(&self.pool).await?;
                row.map(|r| Self::run_record(&r)).transpose()
            }

            async fn skipped(&self, routine_id: Option<&str>) -> Result<Vec<SkippedSlots>, RoutineError> {
                let rows = sqlx::query(
                    "SELECT routine_id, first_slot, last_slot, slots, reason, at FROM ambit_routine_skips \
                     WHERE ($1 IS NULL OR routine_id = $1) ORDER BY routine_id, first_slot",
                )
                .bind(routine_id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|r| {
                        Ok(SkippedSlots {
                            routine_id: r.try_get(0)?,
                            first_slot: r.try_get(1)?,
                            last_slot: r.try_get(2)?,
                            slots: r.try_get(3)?,
                            reason: r.try_get(4)?,
                            at: r.try_get(5)?,
                        })
                    })
                    .collect()
            }
        }
    };
}

/// Routines in one SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteRoutines {
    pool: sqlx::SqlitePool,
}

impl SqliteRoutines {
    /// Opens (creating if missing) the SQLite file at `path` and applies the migrations.
    pub async fn open(path: &str, max_connections: u32, now: i64) -> Result<SqliteRoutines, RoutineError> {
        if path.is_empty() {
            return Err(RoutineError::invalid(
                "url",
                "sqlite:// needs a file path, e.g. sqlite:///var/lib/app/routines.db",
            ));
        }
        let connect = SqliteConnectOptions::from_str("sqlite://")
            .map_err(|e| RoutineError::invalid("url", e.to_string()))?
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(30));
        let pool = SqlitePoolOptions::new()
            .max_connections(max_connections.max(1))
            .acquire_timeout(Duration::from_secs(60))
            .connect_with(connect)
            .await?;
        crate::migrate::sqlite(&pool, &MIGRATIONS, now).await.map_err(RoutineError::Store)?;
        Ok(SqliteRoutines { pool })
    }
}

routine_store!(SqliteRoutines, sqlx::SqlitePool, SQLITE);

/// Routines in a PostgreSQL database.
#[derive(Debug, Clone)]
pub struct PgRoutines {
    pool: sqlx::PgPool,
}

impl PgRoutines {
    /// Connects to the PostgreSQL server at `url` and applies the migrations.
    pub async fn open(url: &str, max_connections: u32, now: i64) -> Result<PgRoutines, RoutineError> {
        let connect = PgConnectOptions::from_str(url)
            .map_err(|e| RoutineError::invalid("url", format!("bad PostgreSQL URL: {e}")))?;
        let pool = PgPoolOptions::new()
            .max_connections(max_connections.max(1))
            .acquire_timeout(Duration::from_secs(60))
            .connect_with(connect)
            .await?;
        crate::migrate::postgres(&pool, &MIGRATIONS, now).await.map_err(RoutineError::Store)?;
        Ok(PgRoutines { pool })
    }
}

routine_store!(PgRoutines, sqlx::PgPool, POSTGRES);

/// The routines' schema migrations, applied on open by the crate's one migration runner.
const MIGRATIONS: crate::migrate::Plan = crate::migrate::Plan {
    table: "ambit_routine_migrations",
    pg_lock: 7411015,
    sqlite: &[
        (1, "routines", include_str!("../../migrations/sqlite/routines_0001.sql")),
        (2, "routines_parked_check", include_str!("../../migrations/sqlite/routines_0002.sql")),
    ],
    postgres: &[
        (1, "routines", include_str!("../../migrations/postgres/routines_0001.sql")),
        (2, "routines_parked_check", include_str!("../../migrations/postgres/routines_0002.sql")),
    ],
};
