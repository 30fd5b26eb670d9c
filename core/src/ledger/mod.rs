//! The work ledger (SPEC §9): effort already spent, and when it is worth spending again.
//!
//! [`Ledger`] is the handle: `claim`, `record`, `list`, `grant_reason_counts`, `report_backlog` and
//! `drain_decision`, over a [`LedgerStore`] (SQLite, the embedded default, or PostgreSQL), with time
//! from an injectable [`Clock`]. The rules are plain functions in [`rules`]; [`tools`] makes the four
//! agent tools for a run bound to a routine.
//!
//! ```no_run
//! use ambit::ledger::{ClaimRequest, Ledger, Outcome, Record};
//! # async fn demo() -> Result<(), ambit::ledger::LedgerError> {
//! let ledger = Ledger::open("sqlite:///var/lib/app/ledger.db").await?;
//! let claim = ledger.claim(ClaimRequest::new("po.tracking", ["PO-1", "PO-2"], 1).run_id("run-7")).await?;
//! let records: Vec<Record> =
//!     claim.granted().map(|g| Record::new(&g.subject_key, Outcome::Empty, g.token())).collect();
//! ledger.record("po.tracking", Some("run-7"), records).await?;
//! # Ok(()) }
//! ```

pub mod error;
pub(crate) mod migrate;
pub mod postgres;
pub mod rules;
pub mod sqlite;
pub mod tools;
pub mod types;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use async_trait::async_trait;

pub use error::LedgerError;
pub use rules::{DrainDecision, DrainStop, ItemState, RoutineLimits};
pub use types::*;

/// Where the ledger's time comes from, so every rule is testable without waiting.
pub trait Clock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
    /// Whether this clock is the machine's wall clock (true for [`SystemClock`]; false, the default, for
    /// a clock a test or host moves). A routine runner on the wall clock times its leases and due slots
    /// by the store's clock, so a machine whose clock is off neither fires early nor finds another
    /// runner's live run lost; on any other clock, that clock's time is the store's.
    fn is_wall_clock(&self) -> bool {
        false
    }
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
    }
    fn is_wall_clock(&self) -> bool {
        true
    }
}

/// A clock that moves only when told to; clones share the time.
#[derive(Debug, Clone, Default)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock reading `now_ms`.
    pub fn new(now_ms: i64) -> Self {
        ManualClock(Arc::new(AtomicI64::new(now_ms)))
    }
    /// Sets the time.
    pub fn set(&self, now_ms: i64) {
        self.0.store(now_ms, Ordering::SeqCst);
    }
    /// Moves the time on by `by`.
    pub fn advance(&self, by: std::time::Duration) {
        self.0.fetch_add(by.as_millis() as i64, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// How durable an acknowledged claim or record is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// Durable when acknowledged: SQLite `synchronous=FULL`, PostgreSQL `synchronous_commit=on`.
    #[default]
    Full,
    /// Faster, less durable, an explicit choice: SQLite `synchronous=NORMAL`, PostgreSQL
    /// `synchronous_commit=off`.
    Fast,
}

/// Options of [`Ledger::open_with`].
#[derive(Clone)]
pub struct LedgerOptions {
    /// How durable each commit is (SQLite's `synchronous`; PostgreSQL's `synchronous_commit`).
    pub durability: Durability,
    /// The clock every time the ledger records comes from.
    pub clock: Arc<dyn Clock>,
    /// Connections in the pool (default 8).
    pub max_connections: u32,
}

impl Default for LedgerOptions {
    fn default() -> Self {
        LedgerOptions { durability: Durability::Full, clock: Arc::new(SystemClock), max_connections: 8 }
    }
}

impl std::fmt::Debug for LedgerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LedgerOptions")
            .field("durability", &self.durability)
            .field("max_connections", &self.max_connections)
            .finish_non_exhaustive()
    }
}

/// One stored ledger row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRow {
    /// The scope.
    pub scope: String,
    /// The subject's key.
    pub subject_key: String,
    /// The routine that last claimed it.
    pub routine_id: Option<String>,
    /// What the store knows of the subject.
    pub state: ItemState,
    /// Why it was last granted.
    pub last_grant_reason: Option<GrantReason>,
    /// When it was last attempted.
    pub last_attempt_at: Option<i64>,
}

/// What a run of a routine did, for the drain decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RunActivity {
    /// Whether the run was granted anything.
    pub claimed: bool,
    /// Whether the run reported its backlog.
    pub reported: bool,
}

/// A ledger store. Every time it needs comes in as `now` from the ledger's clock.
#[async_trait]
pub trait LedgerStore: Send + Sync {
    /// Filters and claims in one atomic step under the store's row lock.
    async fn claim(&self, req: &ClaimRequest, now: i64) -> Result<ClaimResult, LedgerError>;
    /// Applies a validated batch atomically: every record, or nothing.
    async fn record(
        &self,
        scope: &str,
        run_id: Option<&str>,
        records: &[Record],
        now: i64,
    ) -> Result<RecordResult, LedgerError>;
    /// Rows ever granted, of one scope, of a routine's scopes (two hops), or all.
    async fn rows(&self, scope: Option<&str>, routine_id: Option<&str>) -> Result<Vec<StoredRow>, LedgerError>;
    /// The states of some subjects of a scope (absent when the ledger has no row).
    async fn states(&self, scope: &str, keys: &[String]) -> Result<Vec<(String, ItemState)>, LedgerError>;
    /// Per reason, how many of the scope's rows were last granted for it.
    async fn grant_reason_counts(&self, scope: &str) -> Result<GrantReasonCounts, LedgerError>;
    /// The scope a routine's first claim pinned, if it claimed.
    async fn pinned_scope(&self, routine_id: &str) -> Result<Option<String>, LedgerError>;
    /// Keeps a routine's backlog report.
    async fn save_report(
        &self,
        report: &BacklogReport,
        run_id: Option<&str>,
        subjects: usize,
        batch_size: u32,
        now: i64,
    ) -> Result<(), LedgerError>;
    /// The routine's latest report (time, workable count).
    async fn latest_report(&self, routine_id: &str) -> Result<Option<(i64, u64)>, LedgerError>;
    /// Whether a run of the routine claimed and reported.
    async fn run_activity(&self, routine_id: &str, run_id: &str) -> Result<RunActivity, LedgerError>;
}

/// The work ledger: a store and a clock. Cheap to clone.
#[derive(Clone)]
pub struct Ledger {
    store: Arc<dyn LedgerStore>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger").finish_non_exhaustive()
    }
}

impl Ledger {
    /// Opens `sqlite:///path/to/file.db` (created if missing) or `postgres://…`, durable, on the
    /// system clock, applying the migrations.
    pub async fn open(url: &str) -> Result<Ledger, LedgerError> {
        Self::open_with(url, LedgerOptions::default()).await
    }

    /// Opens the ledger with `options` (durability, clock, pool size); see [`Ledger::open`].
    pub async fn open_with(url: &str, options: LedgerOptions) -> Result<Ledger, LedgerError> {
        let store: Arc<dyn LedgerStore> = if let Some(path) = url.strip_prefix("sqlite://") {
            Arc::new(sqlite::SqliteStore::open(path, &options).await?)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Arc::new(postgres::PgStore::open(url, &options).await?)
        } else {
            return Err(LedgerError::InvalidArgument(format!(
                "a ledger URL starts with sqlite:// or postgres://, got '{url}'"
            )));
        };
        Ok(Ledger { store, clock: options.clock })
    }

    /// A ledger over any store.
    pub fn with_store(store: Arc<dyn LedgerStore>, clock: Arc<dyn Clock>) -> Ledger {
        Ledger { store, clock }
    }

    /// The ledger clock's time (ms since the Unix epoch).
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Labels every candidate granted or skipped, granting at most `limit`, in one atomic step.
    #[tracing::instrument(target = "ambit::ledger", name = "ledger.claim", skip_all, fields(ambit.ledger.scope = %req.scope))]
    pub async fn claim(&self, req: ClaimRequest) -> Result<ClaimResult, LedgerError> {
        rules::validate_claim(&req)?;
        self.store.claim(&req, self.clock.now_ms()).await
    }

    /// Records the outcomes of a run's claims, atomically: the whole batch or nothing.
    #[tracing::instrument(target = "ambit::ledger", name = "ledger.record", skip_all, fields(ambit.ledger.scope = scope, ambit.ledger.records = crate::telemetry::int(records.len())))]
    pub async fn record(
        &self,
        scope: &str,
        run_id: Option<&str>,
        records: Vec<Record>,
    ) -> Result<RecordResult, LedgerError> {
        rules::check_keys(&[("scope", Some(scope)), ("run_id", run_id)])?;
        rules::validate_records(&records)?;
        if let Some(r) = records.iter().find(|r| r.token.is_none() && run_id.is_none()) {
            return Err(LedgerError::InvalidBatch(format!(
                "the record for '{}' needs the claim token or the run id that claimed",
                r.subject_key
            )));
        }
        self.store.record(scope, run_id, &records, self.clock.now_ms()).await
    }

    /// [`Ledger::record`] with the batch as JSON (what bindings and tools send): an unknown outcome or
    /// a missing subject_key rejects the whole batch.
    pub async fn record_json(
        &self,
        scope: &str,
        run_id: Option<&str>,
        records: &serde_json::Value,
    ) -> Result<RecordResult, LedgerError> {
        self.record(scope, run_id, rules::parse_records(records)?).await
    }

    /// Ledger rows, soonest eligible first.
    #[tracing::instrument(target = "ambit::ledger", name = "ledger.list", skip_all)]
    pub async fn list(&self, query: &ListQuery) -> Result<Vec<LedgerEntry>, LedgerError> {
        rules::check_keys(&[("scope", query.scope.as_deref()), ("routine_id", query.routine_id.as_deref())])?;
        let now = self.clock.now_ms();
        let rows = self.store.rows(query.scope.as_deref(), query.routine_id.as_deref()).await?;
        let mut entries: Vec<LedgerEntry> = rows
            .into_iter()
            .filter_map(|row| {
                let (state, eligible_at) = rules::entry_state(&row.state, now);
                let keep = match query.state {
                    ListFilter::All => true,
                    ListFilter::Eligible => state == EntryState::Eligible,
                    ListFilter::Suppressed => state != EntryState::Eligible,
                };
                keep.then(|| LedgerEntry {
                    scope: row.scope,
                    subject_key: row.subject_key,
                    state,
                    eligible_at,
                    last_outcome: row.state.last_outcome,
                    last_grant_reason: row.last_grant_reason,
                    attempts: row.state.attempts,
                    misses: row.state.misses,
                    claim_token: row.state.claim_token,
                    escalate: rules::should_escalate(row.state.misses),
                    routine_id: row.routine_id,
                    last_attempt_at: row.last_attempt_at,
                })
            })
            .collect();
        entries.sort_by(|a, b| {
            let key = |e: &LedgerEntry| match e.state {
                EntryState::Eligible => (0, e.eligible_at.unwrap_or(i64::MIN)),
                _ => (1, e.eligible_at.unwrap_or(i64::MAX)),
            };
            key(a).cmp(&key(b)).then_with(|| (&a.scope, &a.subject_key).cmp(&(&b.scope, &b.subject_key)))
        });
        Ok(entries)
    }

    /// Per scope, how many rows were last granted for each reason (the fingerprint health check).
    pub async fn grant_reason_counts(&self, scope: &str) -> Result<GrantReasonCounts, LedgerError> {
        rules::check_keys(&[("scope", Some(scope))])?;
        self.store.grant_reason_counts(scope).await
    }

    /// The scope a routine's first claim pinned, if any.
    pub async fn pinned_scope(&self, routine_id: &str) -> Result<Option<String>, LedgerError> {
        rules::check_keys(&[("routine_id", Some(routine_id))])?;
        self.store.pinned_scope(routine_id).await
    }

    /// Counts how many of `subject_keys` are workable now in the routine's scope, and answers
    /// `ceil(workable / batch_size)` extra runs capped by the routine's limits. The report is kept for
    /// the drain decision.
    pub async fn report_backlog(
        &self,
        routine_id: &str,
        run_id: Option<&str>,
        subject_keys: &[String],
        batch_size: u32,
        limits: &RoutineLimits,
    ) -> Result<BacklogReport, LedgerError> {
        rules::batch_size(i64::from(batch_size))?;
        rules::check_required(&[("routine_id", Some(routine_id)), ("run_id", run_id)])?;
        for (i, key) in subject_keys.iter().enumerate() {
            if key.is_empty() {
                return Err(LedgerError::InvalidArgument(format!("subject_keys[{i}] is empty")));
            }
            rules::check_text("a subject key", key, rules::MAX_KEY_BYTES).map_err(LedgerError::InvalidArgument)?;
        }
        let now = self.clock.now_ms();
        let mut keys: Vec<String> = subject_keys.to_vec();
        keys.sort();
        keys.dedup();
        let scope = self.store.pinned_scope(routine_id).await?;
        let workable = match &scope {
            None => keys.len() as u64,
            Some(scope) => {
                let states: std::collections::HashMap<String, ItemState> =
                    self.store.states(scope, &keys).await?.into_iter().collect();
                keys.iter().filter(|k| rules::workable(states.get(*k), now)).count() as u64
            }
        };
        let report = BacklogReport {
            routine_id: routine_id.to_string(),
            scope,
            workable,
            extra_runs: rules::extra_runs(workable, batch_size, limits)?,
        };
        self.store.save_report(&report, run_id, keys.len(), batch_size, now).await?;
        Ok(report)
    }

    /// After a run of a draining routine finishes: stop the drain (and why), or how many runs to start.
    pub async fn drain_decision(
        &self,
        routine_id: &str,
        finished_run_id: &str,
        limits: &RoutineLimits,
    ) -> Result<DrainDecision, LedgerError> {
        rules::check_required(&[("routine_id", Some(routine_id)), ("run_id", Some(finished_run_id))])?;
        let activity = self.store.run_activity(routine_id, finished_run_id).await?;
        let facts = rules::DrainFacts {
            now: self.clock.now_ms(),
            run_claimed: activity.claimed,
            run_reported: activity.reported,
            latest_report: self.store.latest_report(routine_id).await?,
        };
        Ok(rules::drain_decision(&facts, limits))
    }
}
