//! Routines (SPEC §13): standing work on a schedule, run by any number of runner processes over one
//! store (SQLite on one machine, PostgreSQL across many).
//!
//! [`Routines`] keeps the definitions (create, get with revision history, list, update, delete; every
//! change a revision credited to an actor) and the run records. [`Runner`] fires the due slots: each
//! slot starts exactly one run because the claim inserts a row keyed by (routine, slot) under a unique
//! index, in the same transaction that moves the routine's next slot on, with the routine's row locked
//! (PostgreSQL `FOR UPDATE SKIP LOCKED`, so runners spread over the routines; SQLite `BEGIN
//! IMMEDIATE`). There is no leader: a runner's runs carry a lease its ticks renew; a run whose lease
//! ran out is marked `lost` by whichever runner ticks next, and its slot is never run again.
//!
//! ```no_run
//! # async fn demo(agent: ambit::Agent) -> Result<(), ambit::routine::RoutineError> {
//! use ambit::routine::{Routines, RoutineSpec, Runner};
//! let routines = Routines::open("sqlite:///var/lib/app/routines.db").await?;
//! let spec = RoutineSpec::every("po-chaser", "Chase the five oldest POs without tracking.", 1800);
//! let routine = routines.create(spec, "alice").await?;
//! let sessions = ambit::session::Sessions::open("sqlite:///var/lib/app/sessions.db").await.unwrap();
//! let runner = Runner::builder(routines, sessions)
//!     .agent("po-chaser", move |_ctx| Ok(agent.clone()))
//!     .build()?;
//! runner.run_forever().await?;
//! # Ok(()) }
//! ```

mod runner;
pub mod schedule;
pub mod spec;
pub mod store;
pub mod tools;

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::ledger::{Clock, SystemClock};
pub use runner::{AgentFactory, MAX_LEASE, MIN_POLL, RunContext, Runner, RunnerBuilder, TickReport};
pub use spec::{ActiveWindow, Reschedule, RoutinePatch, RoutineSpec};
pub use store::RoutineStore;

/// A routine operation's failure.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RoutineError {
    /// A field of a definition, an update or a call is wrong; `field` names it.
    #[error("invalid {field}: {message}")]
    Invalid {
        /// The field that is wrong (`cron_expression`, `active_window.start`, …).
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// No routine has this id.
    #[error("no routine '{0}'")]
    NotFound(String),
    /// The store (SQLite or PostgreSQL) failed; the text is its error.
    #[error("the routine store failed: {0}")]
    Store(String),
}

impl RoutineError {
    pub(crate) fn invalid(field: &str, message: impl Into<String>) -> RoutineError {
        RoutineError::Invalid { field: field.to_string(), message: message.into() }
    }

    /// A stable machine-readable code, the same in every language.
    pub fn code(&self) -> &'static str {
        match self {
            RoutineError::Invalid { .. } => "invalid_argument",
            RoutineError::NotFound(_) => "routine_not_found",
            RoutineError::Store(_) => "routine_store",
        }
    }

    /// The field a validation error names.
    pub fn field(&self) -> Option<&str> {
        match self {
            RoutineError::Invalid { field, .. } => Some(field),
            _ => None,
        }
    }
}

impl From<sqlx::Error> for RoutineError {
    fn from(e: sqlx::Error) -> Self {
        RoutineError::Store(e.to_string())
    }
}

/// A stored routine: its id, its current definition, and where its schedule stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Routine {
    /// The routine's id (`rt_…`).
    pub id: String,
    #[serde(flatten)]
    /// Its current definition.
    pub spec: RoutineSpec,
    /// The number of the current revision (1 at creation).
    pub revision: i64,
    /// When it was created (ms since the Unix epoch).
    pub created_at: i64,
    /// When its definition last changed (ms since the Unix epoch).
    pub updated_at: i64,
    /// The earliest slot not yet started or skipped; `None` while paused.
    pub next_slot: Option<i64>,
}

/// One definition change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Revision {
    /// The revision's number (1 for the creation).
    pub revision: i64,
    /// Who made the change, as the host named them.
    pub actor: String,
    /// When the change was made (ms since the Unix epoch).
    pub at: i64,
    /// `create`, `update` or `delete`.
    pub change: String,
    /// The definition as this revision left it (for `delete`, as it was).
    pub definition: RoutineSpec,
}

/// A routine with its revision history, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoutineWithHistory {
    #[serde(flatten)]
    /// The routine as it stands.
    pub routine: Routine,
    /// Every change to its definition, oldest first.
    pub revisions: Vec<Revision>,
}

/// How a run ended, as its agent reported it (`unknown` when it never reported).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeStatus {
    /// The run did what it was for.
    Success,
    /// There was nothing to do.
    NothingToDo,
    /// The run tried and failed at its task.
    Failure,
    /// The run could not work (a tool or the model failed).
    Error,
    /// The run never reported.
    Unknown,
}

impl OutcomeStatus {
    /// The status as stored and sent (`success`, `nothing_to_do`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeStatus::Success => "success",
            OutcomeStatus::NothingToDo => "nothing_to_do",
            OutcomeStatus::Failure => "failure",
            OutcomeStatus::Error => "error",
            OutcomeStatus::Unknown => "unknown",
        }
    }
    /// The status named by `s`, if any.
    pub fn parse(s: &str) -> Option<OutcomeStatus> {
        [Self::Success, Self::NothingToDo, Self::Failure, Self::Error, Self::Unknown]
            .into_iter()
            .find(|o| o.as_str() == s)
    }
}

/// What a run's agent reports with `report_outcome`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// How the run ended.
    pub status: OutcomeStatus,
    /// One or two sentences.
    pub summary: String,
    /// Tool calls the run made, as it counted them.
    pub tool_calls: Option<i64>,
    /// Of those, the calls that failed.
    pub tool_errors: Option<i64>,
}

/// The most a summary holds, in bytes.
pub const MAX_SUMMARY_BYTES: usize = 2000;

impl Outcome {
    /// Checks the fields; a refusal names its field.
    pub fn validate(&self) -> Result<(), RoutineError> {
        if self.summary.trim().is_empty() {
            return Err(RoutineError::invalid(
                "summary",
                "must not be empty: say in one or two sentences what the run did",
            ));
        }
        if self.summary.len() > MAX_SUMMARY_BYTES {
            return Err(RoutineError::invalid(
                "summary",
                format!("is {} bytes, the most is {MAX_SUMMARY_BYTES}", self.summary.len()),
            ));
        }
        for (field, v) in [("tool_calls", self.tool_calls), ("tool_errors", self.tool_errors)] {
            if let Some(v) = v.filter(|v| *v < 0) {
                return Err(RoutineError::invalid(field, format!("must not be negative, got {v}")));
            }
        }
        Ok(())
    }
}

/// A run's state: `running` (holds its routine's one slot, under its runner's lease), `parked` (waits
/// on a person; holds no slot), `finished`, or `lost` (its runner died; never run again).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Holds its routine's slot, under its runner's lease.
    Running,
    /// Waits on a person (an escalation or a parked approval); holds no slot.
    Parked,
    /// Ended (its outcome tells how).
    Finished,
    /// Its runner died; it is never run again.
    Lost,
}

impl RunState {
    /// The state as stored and sent (`running`, `parked`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Parked => "parked",
            RunState::Finished => "finished",
            RunState::Lost => "lost",
        }
    }
    /// The state named by `s`, if any.
    pub fn parse(s: &str) -> Option<RunState> {
        [Self::Running, Self::Parked, Self::Finished, Self::Lost].into_iter().find(|r| r.as_str() == s)
    }
}

/// The record of one run of a routine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// The run's id (`run_…`).
    pub id: String,
    /// The routine it ran for.
    pub routine_id: String,
    /// The revision of the definition the run acted on.
    pub revision: i64,
    /// `scheduled` or `drain`.
    pub kind: String,
    /// The slot the run fired for (none for a drain's extra runs).
    pub slot_at: Option<i64>,
    /// Where it stands.
    pub state: RunState,
    /// The runner that started it.
    pub runner: String,
    /// The session the run's conversation is kept in.
    pub session_id: String,
    /// When it started (ms since the Unix epoch).
    pub started_at: i64,
    /// When it ended (ms since the Unix epoch); `None` while it runs or is parked.
    pub ended_at: Option<i64>,
    /// How it ended, as its agent reported it.
    pub outcome: Option<OutcomeStatus>,
    /// The agent's one- or two-sentence summary.
    pub summary: Option<String>,
    /// Tool calls the run made, as its agent reported them.
    pub tool_calls: Option<i64>,
    /// Of those, the calls that failed.
    pub tool_errors: Option<i64>,
    /// Input tokens the run's model requests took.
    pub input_tokens: i64,
    /// Output tokens the run's model requests produced.
    pub output_tokens: i64,
    /// What the run cost, when the agent has prices for its model.
    pub cost: Option<f64>,
}

/// Slots that were not run: older slots beyond `catch_up` (`missed`), slots over the daily cap
/// (`daily_cap`), slots of the schedule outside the active window (`window`: recorded by the claim that
/// moves the next slot past them, so a gap reaching into the future is recorded when it starts), and
/// slots that came while the routine was disabled (`disabled`: recorded when it is enabled again).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedSlots {
    /// The routine whose slots were not run.
    pub routine_id: String,
    /// The first slot not run (ms since the Unix epoch).
    pub first_slot: i64,
    /// The last slot not run (ms since the Unix epoch).
    pub last_slot: i64,
    /// How many slots were not run.
    pub slots: i64,
    /// Why: `missed`, `daily_cap`, `window` or `disabled`.
    pub reason: String,
    /// When the skip was recorded (ms since the Unix epoch).
    pub at: i64,
}

/// What a runner tells its host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RoutineEvent {
    /// A run started (a slot's, or a drain's).
    RunStarted {
        /// The run as recorded at its start.
        run: RunRecord,
    },
    /// A run ended.
    RunFinished {
        /// The run as recorded at its end.
        run: RunRecord,
    },
    /// A run parked on a person.
    RunParked {
        /// The run as recorded when it parked.
        run: RunRecord,
    },
    /// A run's runner died; the run is `lost`.
    RunLost {
        /// The run as recorded when it was found lost.
        run: RunRecord,
    },
    /// Slots were skipped.
    SlotSkipped {
        /// Which, and why.
        skipped: SkippedSlots,
    },
    /// A run's backlog report started extra runs (or a finished drain run started the next).
    DrainStarted {
        /// The routine.
        routine_id: String,
        /// How many extra runs were started.
        runs: i64,
    },
    /// A drain stopped: `nothing_workable`, `queue_empty`, `run_did_not_report` or `report_stale`.
    DrainStopped {
        /// The routine.
        routine_id: String,
        /// Why the drain stopped.
        reason: String,
    },
}

/// How many extra runs a drain may start now: what it wants, capped by the parallel limit (less the runs
/// in progress) and by what the daily cap leaves of today.
pub(crate) fn rules_drain_allowed(
    want: i64,
    parallel_limit: i64,
    running: i64,
    daily_cap: Option<i64>,
    today: i64,
) -> i64 {
    let parallel = parallel_limit - running;
    let daily = daily_cap.map_or(i64::MAX, |cap| cap - today);
    want.min(parallel).min(daily).max(0)
}

/// Options of [`Routines::open_with`].
#[derive(Clone)]
pub struct RoutineOptions {
    /// The clock the store reads (the system's; a test's own to move time by hand).
    pub clock: Arc<dyn Clock>,
    /// Connections in the pool (default 8).
    pub max_connections: u32,
}

impl Default for RoutineOptions {
    fn default() -> Self {
        RoutineOptions { clock: Arc::new(SystemClock), max_connections: 8 }
    }
}

/// The routine store, open: definitions, revisions, runs. Cheap to clone.
#[derive(Clone)]
pub struct Routines {
    store: Arc<dyn RoutineStore>,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for Routines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Routines").finish_non_exhaustive()
    }
}

fn fresh_id(prefix: &str) -> String {
    let mut bytes = [0u8; 12];
    let _ = getrandom::fill(&mut bytes);
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{prefix}_{hex}")
}

/// How far a wall clock may be from the store's before routines correct for it, in ms.
pub(crate) const SKEW_TOLERANCE_MS: i64 = 1_000;
/// The largest skew corrected for, in ms (a day): a store clock further away is not a skew to follow.
pub(crate) const MAX_SKEW_MS: i64 = 86_400_000;

impl Routines {
    /// Opens `sqlite:///path` (created if missing) or `postgres://…`, applying the migrations.
    pub async fn open(url: &str) -> Result<Routines, RoutineError> {
        Self::open_with(url, RoutineOptions::default()).await
    }

    /// Opens the store with `options` (the clock, the pool's size); see [`Routines::open`].
    pub async fn open_with(url: &str, options: RoutineOptions) -> Result<Routines, RoutineError> {
        let now = options.clock.now_ms();
        let store: Arc<dyn RoutineStore> = if let Some(path) = url.strip_prefix("sqlite://") {
            Arc::new(store::SqliteRoutines::open(path, options.max_connections, now).await?)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Arc::new(store::PgRoutines::open(url, options.max_connections, now).await?)
        } else {
            return Err(RoutineError::invalid(
                "url",
                format!("a routine store URL starts with sqlite:// or postgres://, got '{url}'"),
            ));
        };
        Ok(Routines { store, clock: options.clock })
    }

    /// The store underneath.
    pub fn store(&self) -> &Arc<dyn RoutineStore> {
        &self.store
    }

    /// The clock definitions are timed by.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The store's clock less this one's, read now. On a clock a host or a test moves, 0: such a clock
    /// is taken as the store's time. On the wall clock, measured against the round trip's midpoint; a
    /// clock within [`SKEW_TOLERANCE_MS`] of the store's agrees (0; the difference is the round trip's
    /// noise), a larger skew is clamped to [`MAX_SKEW_MS`]. `None` when the reading took longer than the
    /// tolerance (a wait for a connection, a pause between the two local readings): it says nothing.
    pub(crate) async fn measure_skew(&self) -> Result<Option<i64>, RoutineError> {
        if !self.clock.is_wall_clock() {
            return Ok(Some(0));
        }
        let before = self.clock.now_ms();
        let store_now = self.store.clock().await?;
        let after = self.clock.now_ms();
        if after.saturating_sub(before) > SKEW_TOLERANCE_MS {
            return Ok(None);
        }
        let skew = store_now.saturating_sub(before.saturating_add((after - before) / 2));
        Ok(Some(if skew.abs() < SKEW_TOLERANCE_MS { 0 } else { skew.clamp(-MAX_SKEW_MS, MAX_SKEW_MS) }))
    }

    /// Now, on the store's clock (see [`Routines::measure_skew`]): what a definition change times its
    /// revision and its next slot by, so a machine whose clock is off neither delays nor hurries a new
    /// routine's first slot.
    async fn now(&self) -> Result<i64, RoutineError> {
        // A reading that said nothing (a slow round trip) is taken again, up to three times in all.
        for _ in 0..3 {
            if let Some(skew) = self.measure_skew().await? {
                return Ok(self.clock.now_ms().saturating_add(skew));
            }
        }
        Err(RoutineError::Store("the store's clock could not be read within a second (three tries)".into()))
    }

    /// Creates a routine with a fresh id; it first fires at its next slot (an interval routine on the
    /// next tick, inside its window).
    pub async fn create(&self, spec: RoutineSpec, actor: &str) -> Result<Routine, RoutineError> {
        self.create_with_id(&fresh_id("rtn"), spec, actor).await
    }

    /// [`Routines::create`] with an id the host chose.
    pub async fn create_with_id(&self, id: &str, spec: RoutineSpec, actor: &str) -> Result<Routine, RoutineError> {
        spec::check_name("id", id)?;
        spec::check_name("actor", actor)?;
        let timing = spec.validate()?;
        let now = self.now().await?;
        // A schedule that never fires is refused, as 31 February is: by its window when it has one.
        let first = timing.first_slot(now).ok_or_else(|| never_fires(&spec))?;
        let next_slot = spec.enabled.then_some(first);
        let routine = Routine { id: id.to_string(), spec, revision: 1, created_at: now, updated_at: now, next_slot };
        self.store.create(&routine, actor).await?;
        Ok(routine)
    }

    /// [`Routines::create`] from JSON (what bindings send); an `id` field names the routine.
    pub async fn create_json(&self, definition: &serde_json::Value, actor: &str) -> Result<Routine, RoutineError> {
        let spec = RoutineSpec::from_json(definition)?;
        match definition.get("id") {
            None | Some(serde_json::Value::Null) => self.create(spec, actor).await,
            Some(v) => {
                let id = v.as_str().ok_or_else(|| RoutineError::invalid("id", "must be a string"))?;
                self.create_with_id(id, spec, actor).await
            }
        }
    }

    /// A routine and its revision history.
    pub async fn get(&self, id: &str) -> Result<RoutineWithHistory, RoutineError> {
        let routine = self.store.get(id).await?.ok_or_else(|| RoutineError::NotFound(id.to_string()))?;
        let revisions = self.store.revisions(id).await?;
        Ok(RoutineWithHistory { routine, revisions })
    }

    /// The revision history of a routine, also after it was deleted.
    pub async fn revisions(&self, id: &str) -> Result<Vec<Revision>, RoutineError> {
        self.store.revisions(id).await
    }

    /// Every routine, or those of one agent, by id.
    pub async fn list(&self, agent: Option<&str>) -> Result<Vec<Routine>, RoutineError> {
        self.store.list(agent).await
    }

    /// Applies an update: only the fields passed change; a new revision credited to `actor`.
    pub async fn update(&self, id: &str, patch: &RoutinePatch, actor: &str) -> Result<Routine, RoutineError> {
        spec::check_name("actor", actor)?;
        self.store.update(id, patch, actor, self.now().await?).await
    }

    /// [`Routines::update`] from JSON: absent fields stay, `null` clears.
    pub async fn update_json(&self, id: &str, patch: &serde_json::Value, actor: &str) -> Result<Routine, RoutineError> {
        self.update(id, &RoutinePatch::from_json(patch)?, actor).await
    }

    /// Removes a routine and its run history; its revisions stay (a `delete` revision is added). A run
    /// in progress finishes.
    pub async fn delete(&self, id: &str, actor: &str) -> Result<(), RoutineError> {
        spec::check_name("actor", actor)?;
        self.store.delete(id, actor, self.now().await?).await
    }

    /// The runs of a routine (or of every routine), latest first, at most `limit` (at least 0: a
    /// negative limit is refused, naming `limit`).
    pub async fn runs(&self, routine_id: Option<&str>, limit: i64) -> Result<Vec<RunRecord>, RoutineError> {
        if limit < 0 {
            return Err(RoutineError::invalid("limit", format!("must be at least 0, got {limit}")));
        }
        self.store.runs(routine_id, limit).await
    }

    /// One run's record.
    pub async fn run(&self, run_id: &str) -> Result<Option<RunRecord>, RoutineError> {
        self.store.run(run_id).await
    }

    /// The slots of a routine (or of every routine) that came due and were skipped.
    pub async fn skipped(&self, routine_id: Option<&str>) -> Result<Vec<SkippedSlots>, RoutineError> {
        self.store.skipped(routine_id).await
    }
}

#[cfg(test)]
mod schedule_tests;

/// The error for a schedule with no slot ahead (31 February, or a cron that never matches inside its
/// window): refused on create and on an update that changes the timing, as the window or the cron.
pub(crate) fn never_fires(spec: &RoutineSpec) -> RoutineError {
    match spec.active_window {
        Some(_) => RoutineError::invalid("active_window", "the schedule never fires inside this window"),
        None => RoutineError::invalid("cron_expression", "the schedule never fires"),
    }
}
