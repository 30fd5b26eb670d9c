//! The work ledger for Swift: `CoreLedger` (async, on the core's runtime) with records and enums for
//! its results, and `LedgerCoreError` (one case per core code). The facade (`Ledger.swift`) wraps it.
//! Every rule lives in the core.

use std::sync::Arc;

use ambit::ledger::tools::{RoutineRun, ledger_tools};
use ambit::ledger::{self as core, Durability, Ledger, LedgerOptions, ListFilter, ListQuery};
use serde_json::json;

use crate::{CaughtPanic, CoreError, guard, guard_async};

/// A ledger failure, one case per code of the core's `LedgerError`; `message` is the core's text.
#[derive(Debug, thiserror::Error, uniffi::Error)]
pub enum LedgerCoreError {
    /// Code `ledger_invalid_batch`: the whole batch was rejected, nothing written.
    #[error("{message}")]
    InvalidBatch { message: String },
    /// Code `ledger_stale_token`.
    #[error("{message}")]
    StaleToken { subject_key: String, message: String },
    /// Code `ledger_not_claimed`.
    #[error("{message}")]
    NotClaimed { subject_key: String, message: String },
    /// Code `ledger_scope_pinned`.
    #[error("{message}")]
    ScopePinned { routine_id: String, pinned_scope: String, scope: String, message: String },
    /// Code `ledger_invalid_argument`.
    #[error("{message}")]
    InvalidArgument { message: String },
    /// Code `ledger_store`.
    #[error("{message}")]
    Store { message: String },
    /// Code `internal`: a bug in ambit, a panic caught at the boundary instead of taking the process down.
    #[error("{message}")]
    Internal { message: String },
}

impl CaughtPanic for LedgerCoreError {
    fn internal(error: ambit::Error) -> Self {
        LedgerCoreError::Internal { message: error.to_string() }
    }
}

impl From<core::LedgerError> for LedgerCoreError {
    fn from(e: core::LedgerError) -> Self {
        let message = e.to_string();
        match e {
            core::LedgerError::InvalidBatch(_) => LedgerCoreError::InvalidBatch { message },
            core::LedgerError::StaleToken { subject_key } => LedgerCoreError::StaleToken { subject_key, message },
            core::LedgerError::NotClaimed { subject_key, .. } => LedgerCoreError::NotClaimed { subject_key, message },
            core::LedgerError::ScopePinned { routine_id, pinned_scope, scope } => {
                LedgerCoreError::ScopePinned { routine_id, pinned_scope, scope, message }
            }
            core::LedgerError::InvalidArgument(_) => LedgerCoreError::InvalidArgument { message },
            core::LedgerError::Store(_) => LedgerCoreError::Store { message },
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum GrantReason {
    Fresh,
    CooldownExpired,
    FingerprintChanged,
}

impl From<core::GrantReason> for GrantReason {
    fn from(r: core::GrantReason) -> Self {
        match r {
            core::GrantReason::Fresh => GrantReason::Fresh,
            core::GrantReason::CooldownExpired => GrantReason::CooldownExpired,
            core::GrantReason::FingerprintChanged => GrantReason::FingerprintChanged,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum SkipReason {
    InFlight,
    CoolingDown,
    OverLimit,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum EntryState {
    InFlight,
    CoolingDown,
    Eligible,
}

/// One candidate: a subject key and, optionally, a deterministic fingerprint of its state.
#[derive(Debug, Clone, uniffi::Record)]
pub struct WorkCandidate {
    pub subject_key: String,
    pub fingerprint: Option<String>,
}

/// One candidate of a claim, labelled.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct LabelledCandidate {
    pub subject_key: String,
    pub grant_reason: Option<GrantReason>,
    pub token: Option<i64>,
    pub lease_until: Option<i64>,
    pub skip_reason: Option<SkipReason>,
    pub eligible_at: Option<i64>,
}

/// One record of a batch. `outcome` is `productive`, `empty`, `failed` or `released`; anything else
/// rejects the batch.
#[derive(Debug, Clone, uniffi::Record)]
pub struct WorkRecord {
    pub subject_key: String,
    pub outcome: String,
    pub token: Option<i64>,
    pub fingerprint: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct RecordedWork {
    pub subject_key: String,
    pub outcome: String,
    pub attempts: i64,
    pub misses: i64,
    pub eligible_at: Option<i64>,
    pub escalate: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct LedgerEntry {
    pub scope: String,
    pub subject_key: String,
    pub state: EntryState,
    pub eligible_at: Option<i64>,
    pub last_outcome: Option<String>,
    pub last_grant_reason: Option<GrantReason>,
    pub attempts: i64,
    pub misses: i64,
    pub claim_token: i64,
    pub escalate: bool,
    pub routine_id: Option<String>,
}

/// Per scope, how many rows were last granted for each reason (the fingerprint health check).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct GrantReasonCounts {
    pub fresh: u64,
    pub cooldown_expired: u64,
    pub fingerprint_changed: u64,
    /// More than half of the scope's rows were last granted because the fingerprint changed.
    pub fingerprints_look_unstable: bool,
}

/// A routine's limits, for `report_backlog` and the drain decision.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct RoutineLimits {
    /// Runs of the routine allowed at once.
    #[uniffi(default = 1)]
    pub parallel_limit: u32,
    /// Runs of the routine allowed per day; absent: no cap.
    #[uniffi(default = None)]
    pub daily_cap: Option<u32>,
    /// Runs of the routine running now (the reporting run included).
    #[uniffi(default = 1)]
    pub running: u32,
    /// Runs of the routine started today (the reporting run included).
    #[uniffi(default = 0)]
    pub started_today: u32,
}

impl From<RoutineLimits> for core::RoutineLimits {
    fn from(l: RoutineLimits) -> Self {
        core::RoutineLimits {
            parallel_limit: l.parallel_limit,
            daily_cap: l.daily_cap,
            running: l.running,
            started_today: l.started_today,
        }
    }
}

/// The answer to `report_backlog`.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct BacklogReport {
    pub routine_id: String,
    pub scope: Option<String>,
    /// Subjects workable now: not in flight, not cooling down.
    pub workable: u64,
    /// `ceil(workable / batch_size)`, capped by the parallel limit and the daily cap.
    pub extra_runs: u32,
}

/// Why a drain stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum DrainStop {
    /// The latest report counted nothing workable (or there is no report).
    NothingWorkable,
    /// The finished run ended without claiming anything.
    QueueEmpty,
    /// The finished run never reported its backlog.
    RunDidNotReport,
    /// The latest report is more than an hour old.
    ReportStale,
}

/// After a run of a draining routine finishes: stop (and why), or how many runs to start.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct DrainDecision {
    pub stop: Option<DrainStop>,
    pub start_runs: u32,
}

/// The four ledger tools (`claim_work`, `record_work`, `list_work_ledger`, `report_backlog`) bound to
/// one run of a routine: give it to an agent (`Agent(..., ledger:)`). The scope, routine id, run id and
/// claim tokens are filled in by the SDK, never by the model.
#[derive(uniffi::Object)]
pub struct CoreLedgerTools {
    pub(crate) tools: Vec<Arc<dyn ambit::Tool>>,
}

#[uniffi::export]
impl CoreLedgerTools {
    /// The tools' names, in the order they are registered.
    pub fn names(&self) -> Result<Vec<String>, CoreError> {
        guard(|| Ok(self.tools.iter().map(|t| t.spec().name.clone()).collect()))
    }
}

/// The ledger object under the Swift facade's `Ledger`.
#[derive(uniffi::Object)]
pub struct CoreLedger {
    pub(crate) ledger: Ledger,
}

#[uniffi::export(async_runtime = "tokio")]
impl CoreLedger {
    /// Opens `sqlite:///path` or `postgres://…`; `fast` trades durability for speed.
    #[uniffi::constructor]
    pub async fn open(url: String, fast: bool) -> Result<Arc<Self>, LedgerCoreError> {
        guard_async(async move {
            let durability = if fast { Durability::Fast } else { Durability::Full };
            let ledger = Ledger::open_with(&url, LedgerOptions { durability, ..LedgerOptions::default() }).await?;
            Ok(Arc::new(CoreLedger { ledger }))
        })
        .await
    }

    /// Labels every candidate granted or skipped, granting at most `limit`, in one atomic step.
    pub async fn claim(
        &self,
        scope: String,
        candidates: Vec<WorkCandidate>,
        limit: u32,
        lease_ms: i64,
        run_id: Option<String>,
        routine_id: Option<String>,
    ) -> Result<Vec<LabelledCandidate>, LedgerCoreError> {
        guard_async(async move {
            let mut req = core::ClaimRequest::new(
                scope,
                candidates
                    .into_iter()
                    .map(|c| core::Candidate { subject_key: c.subject_key, fingerprint: c.fingerprint }),
                limit as usize,
            );
            req.lease_ms = lease_ms;
            req.run_id = run_id;
            req.routine_id = routine_id;
            let result = self.ledger.claim(req).await?;
            Ok(result
                .candidates
                .into_iter()
                .map(|c| match c.verdict {
                    core::Verdict::Granted { grant_reason, token, lease_until } => LabelledCandidate {
                        subject_key: c.subject_key,
                        grant_reason: Some(grant_reason.into()),
                        token: Some(token),
                        lease_until: Some(lease_until),
                        skip_reason: None,
                        eligible_at: None,
                    },
                    core::Verdict::Skipped { skip_reason, eligible_at } => LabelledCandidate {
                        subject_key: c.subject_key,
                        grant_reason: None,
                        token: None,
                        lease_until: None,
                        skip_reason: Some(match skip_reason {
                            core::SkipReason::InFlight => SkipReason::InFlight,
                            core::SkipReason::CoolingDown => SkipReason::CoolingDown,
                            core::SkipReason::OverLimit => SkipReason::OverLimit,
                        }),
                        eligible_at,
                    },
                })
                .collect())
        })
        .await
    }

    /// Records a batch: the whole batch or nothing.
    pub async fn record(
        &self,
        scope: String,
        records: Vec<WorkRecord>,
        run_id: Option<String>,
    ) -> Result<Vec<RecordedWork>, LedgerCoreError> {
        guard_async(async move {
            let batch = json!(
                records
                    .iter()
                    .map(|r| json!({"subject_key": r.subject_key, "outcome": r.outcome, "token": r.token, "fingerprint": r.fingerprint}))
                    .collect::<Vec<_>>()
            );
            let result = self.ledger.record_json(&scope, run_id.as_deref(), &batch).await?;
            Ok(result
                .recorded
                .into_iter()
                .map(|r| RecordedWork {
                    subject_key: r.subject_key,
                    outcome: r.outcome.as_str().to_string(),
                    attempts: r.attempts,
                    misses: r.misses,
                    eligible_at: r.eligible_at,
                    escalate: r.escalate,
                })
                .collect())
        })
        .await
    }

    /// Per scope, how many rows were last granted for each reason.
    pub async fn grant_reason_counts(&self, scope: String) -> Result<GrantReasonCounts, LedgerCoreError> {
        guard_async(async move {
            let c = self.ledger.grant_reason_counts(&scope).await?;
            Ok(GrantReasonCounts {
                fresh: c.fresh,
                cooldown_expired: c.cooldown_expired,
                fingerprint_changed: c.fingerprint_changed,
                fingerprints_look_unstable: c.fingerprints_look_unstable(),
            })
        })
        .await
    }

    /// Counts how many of `subject_keys` are workable now in the routine's scope; answers the extra runs.
    pub async fn report_backlog(
        &self,
        routine_id: String,
        subject_keys: Vec<String>,
        batch_size: i64,
        limits: RoutineLimits,
        run_id: Option<String>,
    ) -> Result<BacklogReport, LedgerCoreError> {
        guard_async(async move {
            let batch_size = core::rules::batch_size(batch_size)?;
            let r = self
                .ledger
                .report_backlog(&routine_id, run_id.as_deref(), &subject_keys, batch_size, &limits.into())
                .await?;
            Ok(BacklogReport {
                routine_id: r.routine_id,
                scope: r.scope,
                workable: r.workable,
                extra_runs: r.extra_runs,
            })
        })
        .await
    }

    /// After a run of a draining routine finishes: stop the drain (and why), or how many runs to start.
    pub async fn drain_decision(
        &self,
        routine_id: String,
        run_id: String,
        limits: RoutineLimits,
    ) -> Result<DrainDecision, LedgerCoreError> {
        guard_async(async move {
            let d = self.ledger.drain_decision(&routine_id, &run_id, &limits.into()).await?;
            Ok(DrainDecision {
                stop: d.stop.map(|s| match s {
                    core::DrainStop::NothingWorkable => DrainStop::NothingWorkable,
                    core::DrainStop::QueueEmpty => DrainStop::QueueEmpty,
                    core::DrainStop::RunDidNotReport => DrainStop::RunDidNotReport,
                    core::DrainStop::ReportStale => DrainStop::ReportStale,
                }),
                start_runs: d.start_runs,
            })
        })
        .await
    }

    /// The four agent tools bound to one run of a routine (`limit`: the most one `claim_work` grants).
    pub fn tools_for_routine(
        &self,
        scope: String,
        routine_id: Option<String>,
        run_id: String,
        limit: u32,
        lease_ms: i64,
        limits: RoutineLimits,
    ) -> Result<Arc<CoreLedgerTools>, LedgerCoreError> {
        guard(|| {
            let mut run = RoutineRun::new(scope, run_id).limit(limit as usize).limits(limits.into());
            run.routine_id = routine_id;
            run.lease_ms = lease_ms;
            Ok(Arc::new(CoreLedgerTools { tools: ledger_tools(self.ledger.clone(), run) }))
        })
    }

    /// Test hook: panics inside the core after the call has gone async (it throws
    /// `LedgerCoreError.Internal`); the ledger stays usable.
    pub async fn testing_force_panic(&self) -> Result<(), LedgerCoreError> {
        guard_async(async move {
            tokio::task::yield_now().await;
            ambit::testing::force_panic()
        })
        .await
    }

    /// Ledger rows, soonest eligible first; `state` is `all`, `eligible` or `suppressed`.
    pub async fn list(
        &self,
        scope: Option<String>,
        state: String,
        routine_id: Option<String>,
    ) -> Result<Vec<LedgerEntry>, LedgerCoreError> {
        guard_async(async move {
            let state = ListFilter::parse(&state).ok_or_else(|| {
                core::LedgerError::InvalidArgument(format!("state is all, eligible or suppressed, got '{state}'"))
            })?;
            let entries = self.ledger.list(&ListQuery { scope, state, routine_id }).await?;
            Ok(entries
                .into_iter()
                .map(|e| LedgerEntry {
                    scope: e.scope,
                    subject_key: e.subject_key,
                    state: match e.state {
                        core::EntryState::InFlight => EntryState::InFlight,
                        core::EntryState::CoolingDown => EntryState::CoolingDown,
                        core::EntryState::Eligible => EntryState::Eligible,
                    },
                    eligible_at: e.eligible_at,
                    last_outcome: e.last_outcome.map(|o| o.as_str().to_string()),
                    last_grant_reason: e.last_grant_reason.map(Into::into),
                    attempts: e.attempts,
                    misses: e.misses,
                    claim_token: e.claim_token,
                    escalate: e.escalate,
                    routine_id: e.routine_id,
                })
                .collect())
        })
        .await
    }
}
