//! The work ledger for Node. Every call resolves to the JSON text of `{"ok": true, "value": …}` or
//! `{"ok": false, "error": {code, message, details}}`; `ledger.js` turns these into objects and typed
//! errors. Every rule lives in the core.

use ambit::ledger::tools::{RoutineRun, ledger_tools};
use ambit::ledger::{ClaimRequest, Durability, Ledger, LedgerError, LedgerOptions, ListQuery, RoutineLimits};
use napi_derive::napi;
use serde_json::{Value, json};

use crate::envelope::{JsError, envelope};

impl JsError for LedgerError {
    fn to_js(&self) -> Value {
        let details = match self {
            LedgerError::StaleToken { subject_key } | LedgerError::NotClaimed { subject_key, .. } => {
                json!({"subjectKey": subject_key})
            }
            LedgerError::ScopePinned { routine_id, pinned_scope, scope } => {
                json!({"routineId": routine_id, "pinnedScope": pinned_scope, "scope": scope})
            }
            _ => json!({}),
        };
        json!({"code": self.code(), "message": self.to_string(), "details": details})
    }
}

macro_rules! value {
    ($v:expr) => {
        serde_json::to_value($v).map_err(|e| LedgerError::Store(e.to_string()))
    };
}

macro_rules! parse {
    ($t:ty, $text:expr) => {
        serde_json::from_str::<$t>($text).map_err(|e| LedgerError::InvalidArgument(e.to_string()))
    };
}

/// The four ledger tools bound to one run of a routine (`ledger.forRoutine(...)`), for
/// `new Agent({ledger})`.
#[napi]
pub struct NativeLedgerTools {
    pub(crate) tools: Vec<std::sync::Arc<dyn ambit::Tool>>,
}

#[napi]
impl NativeLedgerTools {
    /// The tools' names, in registration order.
    #[napi]
    pub fn names(&self) -> napi::Result<Vec<String>> {
        crate::guard(|| self.tools.iter().map(|t| t.spec().name.clone()).collect())
    }

    /// These tools and `other`'s, in one set (a routine run's tools with a ledger's).
    #[napi]
    pub fn join(&self, other: &NativeLedgerTools) -> napi::Result<NativeLedgerTools> {
        crate::guard(|| NativeLedgerTools { tools: self.tools.iter().chain(other.tools.iter()).cloned().collect() })
    }
}

/// An open ledger.
#[napi]
pub struct NativeLedger {
    pub(crate) ledger: Ledger,
}

/// Opens `sqlite:///path` or `postgres://…`. Resolves to the ledger, or rejects with the JSON text of
/// `{code, message}` as the message (the facade throws the typed error).
#[napi]
pub async fn open_ledger(url: String, durability: String) -> napi::Result<NativeLedger> {
    open_on(url, durability, None).await
}

/// [`open_ledger`], on the test hook's manual clock when one is given (then always durable).
pub(crate) async fn open_on(
    url: String,
    durability: String,
    clock: Option<ambit::testing::ManualClock>,
) -> napi::Result<NativeLedger> {
    let opened = async move {
        let durability = match durability.as_str() {
            "full" => Durability::Full,
            "fast" => Durability::Fast,
            other => {
                return Err(LedgerError::InvalidArgument(format!("durability is full or fast, got '{other}'")));
            }
        };
        match clock {
            Some(clock) => ambit::testing::open_ledger(&url, &clock).await,
            None => Ledger::open_with(&url, LedgerOptions { durability, ..LedgerOptions::default() }).await,
        }
    };
    let ledger = crate::envelope::open(opened).await?;
    Ok(NativeLedger { ledger })
}

#[napi]
impl NativeLedger {
    /// `request`: the JSON text of a ClaimRequest (snake_case).
    #[napi]
    pub async fn claim(&self, request: String) -> String {
        let ledger = self.ledger.clone();
        envelope(async move { value!(ledger.claim(parse!(ClaimRequest, &request)?).await?) }).await
    }

    /// `records`: the JSON text of a list of `{subject_key, outcome, token?, fingerprint?}`.
    #[napi]
    pub async fn record(&self, scope: String, records: String, run_id: Option<String>) -> String {
        let ledger = self.ledger.clone();
        envelope(async move {
            let records = parse!(Value, &records)?;
            value!(ledger.record_json(&scope, run_id.as_deref(), &records).await?)
        })
        .await
    }

    /// `query`: the JSON text of a ListQuery.
    #[napi]
    pub async fn list(&self, query: String) -> String {
        let ledger = self.ledger.clone();
        envelope(async move { value!(ledger.list(&parse!(ListQuery, &query)?).await?) }).await
    }

    /// The four agent tools bound to one run of a routine; `limits`: the JSON text of RoutineLimits.
    /// Throws with the JSON text of `{code, message}` as the message.
    #[napi]
    pub fn tools_for_routine(
        &self,
        scope: String,
        run_id: String,
        limit: u32,
        lease_ms: i64,
        limits: String,
        routine_id: Option<String>,
    ) -> napi::Result<NativeLedgerTools> {
        crate::guard(|| {
            let limits = RoutineLimits::from_json(&limits).map_err(|e| crate::envelope::rejection(&e))?;
            let mut run = RoutineRun::new(scope, run_id).limit(limit as usize).limits(limits);
            run.routine_id = routine_id;
            run.lease_ms = lease_ms;
            Ok(NativeLedgerTools { tools: ledger_tools(self.ledger.clone(), run) })
        })?
    }

    #[napi]
    pub async fn grant_reason_counts(&self, scope: String) -> String {
        let ledger = self.ledger.clone();
        envelope(async move { value!(ledger.grant_reason_counts(&scope).await?) }).await
    }

    /// `limits`: the JSON text of RoutineLimits; `batch_size` a whole number (the facade checks it is one).
    #[napi]
    pub async fn report_backlog(
        &self,
        routine_id: String,
        subject_keys: Vec<String>,
        batch_size: i64,
        limits: String,
        run_id: Option<String>,
    ) -> String {
        let ledger = self.ledger.clone();
        envelope(async move {
            let limits = RoutineLimits::from_json(&limits)?;
            let batch_size = ambit::ledger::rules::batch_size(batch_size)?;
            value!(ledger.report_backlog(&routine_id, run_id.as_deref(), &subject_keys, batch_size, &limits).await?)
        })
        .await
    }

    #[napi]
    pub async fn drain_decision(&self, routine_id: String, run_id: String, limits: String) -> String {
        let ledger = self.ledger.clone();
        envelope(async move {
            let limits = RoutineLimits::from_json(&limits)?;
            value!(ledger.drain_decision(&routine_id, &run_id, &limits).await?)
        })
        .await
    }
}
