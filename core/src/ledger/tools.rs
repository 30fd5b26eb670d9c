//! The four ledger tools for an agent bound to a routine: `claim_work`, `record_work`,
//! `list_work_ledger` and `report_backlog`. The scope, the routine id, the run id and the claim tokens
//! are filled in by the SDK, so the model never carries anything it could get wrong.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Candidate, ClaimRequest, Ledger, LedgerError, ListFilter, ListQuery, RoutineLimits, Verdict};
use crate::error::ToolError;
use crate::tools::{Tool, ToolSpec};

/// One run of a routine, as the ledger tools see it.
#[derive(Debug, Clone)]
pub struct RoutineRun {
    /// The scope its claims and records are in.
    pub scope: String,
    /// The routine, for `report_backlog` (none: a run of no routine).
    pub routine_id: Option<String>,
    /// The run's id: its claims name it, and a record without a token must come from it.
    pub run_id: String,
    /// The most a single `claim_work` grants (default 5).
    pub limit: usize,
    /// The lease of each grant, in milliseconds.
    pub lease_ms: i64,
    /// The routine's limits, for `report_backlog`.
    pub limits: RoutineLimits,
}

impl RoutineRun {
    /// A run in `scope` with the default limit (5), lease and routine limits.
    pub fn new(scope: impl Into<String>, run_id: impl Into<String>) -> Self {
        RoutineRun {
            scope: scope.into(),
            routine_id: None,
            run_id: run_id.into(),
            limit: 5,
            lease_ms: super::rules::DEFAULT_LEASE_MS,
            limits: RoutineLimits::default(),
        }
    }
    /// Sets the routine's id.
    pub fn routine_id(mut self, routine_id: impl Into<String>) -> Self {
        self.routine_id = Some(routine_id.into());
        self
    }
    /// Sets the most a single `claim_work` grants.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = limit;
        self
    }
    /// Sets the routine's limits.
    pub fn limits(mut self, limits: RoutineLimits) -> Self {
        self.limits = limits;
        self
    }
}

struct Bound {
    ledger: Ledger,
    run: RoutineRun,
    /// The tokens of this run's open grants, by subject.
    tokens: Mutex<HashMap<String, i64>>,
}

/// The four tools for one run of a routine, sharing the run's claim tokens.
pub fn ledger_tools(ledger: Ledger, run: RoutineRun) -> Vec<Arc<dyn Tool>> {
    let bound = Arc::new(Bound { ledger, run, tokens: Mutex::new(HashMap::new()) });
    vec![
        Arc::new(LedgerTool { kind: Kind::Claim, spec: claim_spec(), bound: bound.clone() }),
        Arc::new(LedgerTool { kind: Kind::Record, spec: record_spec(), bound: bound.clone() }),
        Arc::new(LedgerTool { kind: Kind::List, spec: list_spec(), bound: bound.clone() }),
        Arc::new(LedgerTool { kind: Kind::Backlog, spec: backlog_spec(), bound }),
    ]
}

#[derive(Clone, Copy)]
enum Kind {
    Claim,
    Record,
    List,
    Backlog,
}

struct LedgerTool {
    kind: Kind,
    spec: ToolSpec,
    bound: Arc<Bound>,
}

/// The ledger is the SDK's own bookkeeping: its tools reach nothing of the host's, so they run from
/// `read` up.
fn spec(name: &str, description: &str, parameters: Value) -> ToolSpec {
    let mut spec = ToolSpec::new(name, description, parameters);
    spec.level = Some(crate::permission::Level::Read);
    spec
}

/// The four ledger tools' specs, for the walk over every built-in's schema.
#[cfg(test)]
pub(crate) fn specs() -> Vec<ToolSpec> {
    vec![claim_spec(), record_spec(), list_spec(), backlog_spec()]
}

fn claim_spec() -> ToolSpec {
    spec(
        "claim_work",
        "Claim work: give your candidate subjects in priority order; get back the ones worth doing now \
         (granted, with a reason) and why each other one was skipped (in_flight, cooling_down with the time \
         it becomes eligible, over_limit). Work only on granted subjects, then report each with record_work.",
        json!({"type": "object", "properties": {
            "candidates": {"type": "array", "description": "Subject keys in priority order, or objects with subject_key and a deterministic fingerprint of the subject's state.",
                "items": {"anyOf": [{"type": "string"}, {"type": "object", "properties": {
                    "subject_key": {"type": "string"}, "fingerprint": {"type": "string"}}, "required": ["subject_key"]}]}},
            "limit": {"type": "integer", "minimum": 1, "description": "At most this many grants."}},
            "required": ["candidates"]}),
    )
}

fn record_spec() -> ToolSpec {
    spec(
        "record_work",
        "Record the outcome of every subject you claimed, in one call: productive (work done), empty (the \
         attempt was correct and there was nothing there), failed (the attempt itself failed) or released \
         (claimed but not attempted). The batch is atomic: one bad entry rejects it all.",
        json!({"type": "object", "properties": {
            "records": {"type": "array", "items": {"type": "object", "properties": {
                "subject_key": {"type": "string"},
                "outcome": {"type": "string", "enum": ["productive", "empty", "failed", "released"]},
                "fingerprint": {"type": "string"}}, "required": ["subject_key", "outcome"]}}},
            "required": ["records"]}),
    )
}

fn list_spec() -> ToolSpec {
    spec(
        "list_work_ledger",
        "List this routine's work ledger, soonest eligible first: each subject's state, outcome, counters \
         and last grant reason. Use it to explain a skip or to check whether anything is worth doing.",
        json!({"type": "object", "properties": {
            "state": {"type": "string", "enum": ["all", "eligible", "suppressed"]}}}),
    )
}

fn backlog_spec() -> ToolSpec {
    spec(
        "report_backlog",
        "Report your whole queue (the same subject keys you give claim_work) and your batch size; the ledger \
         counts what is workable now and starts extra runs of this routine to drain it.",
        json!({"type": "object", "properties": {
            "subject_keys": {"type": "array", "items": {"type": "string"}},
            "batch_size": {"type": "integer", "minimum": 1}},
            "required": ["subject_keys", "batch_size"]}),
    )
}

fn failed(e: LedgerError) -> ToolError {
    ToolError::Failed(format!("{} ({})", e, e.code()))
}

fn bad(message: &str) -> ToolError {
    ToolError::Failed(format!("invalid arguments: {message}"))
}

#[async_trait]
impl Tool for LedgerTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        let b = &self.bound;
        match self.kind {
            Kind::Claim => {
                let items = arguments
                    .get("candidates")
                    .and_then(Value::as_array)
                    .ok_or_else(|| bad("candidates must be a list"))?;
                let mut candidates = Vec::with_capacity(items.len());
                for item in items {
                    candidates.push(match item {
                        Value::String(k) => Candidate::new(k.clone()),
                        Value::Object(_) => {
                            serde_json::from_value::<Candidate>(item.clone()).map_err(|e| bad(&e.to_string()))?
                        }
                        _ => return Err(bad("a candidate is a subject key or an object with subject_key")),
                    });
                }
                let limit = match arguments.get("limit").and_then(Value::as_u64) {
                    Some(n) => (n as usize).min(b.run.limit),
                    None => b.run.limit,
                };
                let mut req = ClaimRequest::new(b.run.scope.clone(), candidates, limit).run_id(b.run.run_id.clone());
                req.lease_ms = b.run.lease_ms;
                req.routine_id = b.run.routine_id.clone();
                let result = b.ledger.claim(req).await.map_err(failed)?;
                let mut tokens = b.tokens.lock().unwrap_or_else(|p| p.into_inner());
                let labelled: Vec<Value> = result
                    .candidates
                    .iter()
                    .map(|c| match &c.verdict {
                        Verdict::Granted { grant_reason, token, .. } => {
                            tokens.insert(c.subject_key.clone(), *token);
                            json!({"subject_key": c.subject_key, "status": "granted", "grant_reason": grant_reason})
                        }
                        Verdict::Skipped { skip_reason, eligible_at } => {
                            json!({"subject_key": c.subject_key, "status": "skipped", "skip_reason": skip_reason, "eligible_at": eligible_at})
                        }
                    })
                    .collect();
                Ok(json!({"candidates": labelled}))
            }
            Kind::Record => {
                // The single-subject form still works; a list is preferred.
                let records = match arguments.get("records") {
                    Some(r) => r.clone(),
                    None if arguments.get("subject_key").is_some() => Value::Array(vec![arguments.clone()]),
                    None => return Err(bad("records must be a list")),
                };
                let mut records = records;
                {
                    let tokens = b.tokens.lock().unwrap_or_else(|p| p.into_inner());
                    for r in records.as_array_mut().into_iter().flatten() {
                        if let Some(obj) = r.as_object_mut() {
                            obj.remove("token");
                            if let Some(t) = obj.get("subject_key").and_then(Value::as_str).and_then(|k| tokens.get(k))
                            {
                                obj.insert("token".into(), json!(t));
                            }
                        }
                    }
                }
                let result = b.ledger.record_json(&b.run.scope, Some(&b.run.run_id), &records).await.map_err(failed)?;
                let mut tokens = b.tokens.lock().unwrap_or_else(|p| p.into_inner());
                for r in &result.recorded {
                    tokens.remove(&r.subject_key);
                }
                let mut out = serde_json::to_value(&result).map_err(|e| ToolError::Failed(e.to_string()))?;
                if !result.escalate.is_empty() {
                    out["suggestion"] = json!(format!(
                        "five or more consecutive misses on {}: escalate to a human rather than retrying",
                        result.escalate.join(", ")
                    ));
                }
                Ok(out)
            }
            Kind::List => {
                let state = match arguments.get("state").and_then(Value::as_str) {
                    None => ListFilter::All,
                    Some(s) => ListFilter::parse(s).ok_or_else(|| bad("state is all, eligible or suppressed"))?,
                };
                let query = match &b.run.routine_id {
                    Some(r) => ListQuery { scope: None, state, routine_id: Some(r.clone()) },
                    None => ListQuery { scope: Some(b.run.scope.clone()), state, routine_id: None },
                };
                let entries = b.ledger.list(&query).await.map_err(failed)?;
                Ok(json!({"entries": entries}))
            }
            Kind::Backlog => {
                let routine_id =
                    b.run.routine_id.as_deref().ok_or_else(|| bad("this run is not bound to a routine"))?;
                let keys: Vec<String> =
                    serde_json::from_value(arguments.get("subject_keys").cloned().unwrap_or(Value::Null))
                        .map_err(|_| bad("subject_keys must be a list of strings"))?;
                let batch_size = arguments
                    .get("batch_size")
                    .and_then(Value::as_u64)
                    .and_then(|n| u32::try_from(n).ok())
                    .ok_or_else(|| bad("batch_size must be a positive integer"))?;
                let report = b
                    .ledger
                    .report_backlog(routine_id, Some(&b.run.run_id), &keys, batch_size, &b.run.limits)
                    .await
                    .map_err(failed)?;
                serde_json::to_value(report).map_err(|e| ToolError::Failed(e.to_string()))
            }
        }
    }
}
