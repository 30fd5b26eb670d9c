//! The agent tools of a routine run: `report_outcome` (the run's final act), and the read-only
//! `list_my_routines` and `list_my_outcomes`. An agent never changes a routine, not even its own: the
//! write operations are the host's API only, and no tool here reaches them.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Outcome, OutcomeStatus, RoutineError, Routines, RunState};
use crate::error::ToolError;
use crate::tools::{Tool, ToolSpec};

/// The most outcomes `list_my_outcomes` returns.
const MAX_OUTCOMES: i64 = 50;

/// The most routines `list_my_routines` returns.
const MAX_ROUTINES_LISTED: usize = 50;

/// The most bytes of JSON `list_my_routines` returns (instructions run to 64 KiB each): the rest is
/// counted in `omitted`, not listed.
const MAX_ROUTINES_BYTES: usize = 128 * 1024;

#[derive(Clone, Copy)]
enum Kind {
    Report,
    ListRoutines,
    ListOutcomes,
}

struct RoutineTool {
    kind: Kind,
    spec: ToolSpec,
    routines: Routines,
    agent: String,
    run_id: String,
}

/// The three tools for one run of a routine of `agent`.
pub fn routine_tools(routines: Routines, agent: &str, run_id: &str) -> Vec<Arc<dyn Tool>> {
    let make = |kind, spec| -> Arc<dyn Tool> {
        Arc::new(RoutineTool {
            kind,
            spec,
            routines: routines.clone(),
            agent: agent.to_string(),
            run_id: run_id.to_string(),
        })
    };
    vec![
        make(Kind::Report, report_spec()),
        make(Kind::ListRoutines, routines_spec()),
        make(Kind::ListOutcomes, outcomes_spec()),
    ]
}

/// The SDK's own bookkeeping: these tools reach nothing of the host's, so they run from `read` up.
fn spec(name: &str, description: &str, parameters: Value) -> ToolSpec {
    let mut spec = ToolSpec::new(name, description, parameters);
    spec.level = Some(crate::permission::Level::Read);
    spec
}

/// The three tools' specs, for the walk over every built-in's schema.
pub fn specs() -> Vec<ToolSpec> {
    vec![report_spec(), routines_spec(), outcomes_spec()]
}

fn report_spec() -> ToolSpec {
    spec(
        "report_outcome",
        "Your final act in a scheduled run: the status (success; nothing_to_do when the run worked correctly \
         and found no work, not success; failure; error; unknown) and a one-to-two sentence summary, with \
         optional counts of tool calls and tool errors.",
        json!({"type": "object", "properties": {
            "status": {"type": "string", "enum": ["success", "nothing_to_do", "failure", "error", "unknown"]},
            "summary": {"type": "string", "description": "One or two sentences: what the run did."},
            "tool_calls": {"type": "integer", "minimum": 0},
            "tool_errors": {"type": "integer", "minimum": 0}},
            "required": ["status", "summary"]}),
    )
}

fn routines_spec() -> ToolSpec {
    spec(
        "list_my_routines",
        "Your standing work: your routines with their schedules, instructions and revision, and optionally \
         their recent runs with verdicts (at most 50 routines or 128 KiB; `omitted` counts the rest). \
         Read-only: only people change routines.",
        json!({"type": "object", "properties": {
            "include_runs": {"type": "boolean", "description": "Add each routine's latest runs."}}}),
    )
}

fn outcomes_spec() -> ToolSpec {
    spec(
        "list_my_outcomes",
        "Your delivered work: the latest finished runs of your routines, newest first, with status and summary.",
        json!({"type": "object", "properties": {
            "routine_id": {"type": "string"},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_OUTCOMES}}}),
    )
}

fn failed(e: RoutineError) -> ToolError {
    ToolError::Failed(format!("{e} ({})", e.code()))
}

impl RoutineTool {
    async fn report(&self, args: &Value) -> Result<Value, RoutineError> {
        let status = args.get("status").and_then(Value::as_str).unwrap_or_default();
        let status = OutcomeStatus::parse(status).ok_or_else(|| {
            RoutineError::invalid("status", "must be success, nothing_to_do, failure, error or unknown")
        })?;
        let count = |field: &str| -> Result<Option<i64>, RoutineError> {
            match args.get(field) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v.as_i64().map(Some).ok_or_else(|| RoutineError::invalid(field, "must be an integer")),
            }
        };
        let outcome = Outcome {
            status,
            summary: args.get("summary").and_then(Value::as_str).unwrap_or_default().to_string(),
            tool_calls: count("tool_calls")?,
            tool_errors: count("tool_errors")?,
        };
        outcome.validate()?;
        self.routines.store().report_outcome(&self.run_id, &outcome).await?;
        Ok(json!({"recorded": status.as_str()}))
    }

    async fn list_routines(&self, args: &Value) -> Result<Value, RoutineError> {
        let with_runs = args.get("include_runs").and_then(Value::as_bool).unwrap_or(false);
        let all = self.routines.list(Some(&self.agent)).await?;
        let total = all.len();
        let (mut out, mut bytes) = (Vec::new(), 0usize);
        for r in all.into_iter().take(MAX_ROUTINES_LISTED) {
            let mut v = serde_json::to_value(&r).map_err(|e| RoutineError::Store(e.to_string()))?;
            if with_runs {
                let runs = self.routines.runs(Some(&r.id), 5).await?;
                v["recent_runs"] = serde_json::to_value(runs).map_err(|e| RoutineError::Store(e.to_string()))?;
            }
            bytes += v.to_string().len();
            if bytes > MAX_ROUTINES_BYTES {
                break;
            }
            out.push(v);
        }
        let omitted = total - out.len();
        if omitted == 0 {
            return Ok(json!({"routines": out}));
        }
        Ok(json!({
            "routines": out,
            "omitted": omitted,
            "note": format!(
                "{omitted} more routine(s) not listed: the list stops at {MAX_ROUTINES_LISTED} routines or \
                 {MAX_ROUTINES_BYTES} bytes"
            ),
        }))
    }

    async fn list_outcomes(&self, args: &Value) -> Result<Value, RoutineError> {
        let limit = args.get("limit").and_then(Value::as_i64).unwrap_or(20).clamp(1, MAX_OUTCOMES);
        let only = args.get("routine_id").and_then(Value::as_str);
        let mut runs = Vec::new();
        for r in self.routines.list(Some(&self.agent)).await? {
            if only.is_some_and(|o| o != r.id) {
                continue;
            }
            runs.extend(
                self.routines.runs(Some(&r.id), limit).await?.into_iter().filter(|x| x.state == RunState::Finished),
            );
        }
        runs.sort_by(|a, b| b.ended_at.cmp(&a.ended_at).then_with(|| b.id.cmp(&a.id)));
        runs.truncate(limit as usize);
        let outcomes: Vec<Value> = runs
            .iter()
            .map(|x| {
                json!({"routine_id": x.routine_id, "run_id": x.id, "slot_at": x.slot_at, "ended_at": x.ended_at,
                       "status": x.outcome.map(OutcomeStatus::as_str), "summary": x.summary})
            })
            .collect();
        Ok(json!({"outcomes": outcomes}))
    }
}

#[async_trait]
impl Tool for RoutineTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        match self.kind {
            Kind::Report => self.report(&arguments).await,
            Kind::ListRoutines => self.list_routines(&arguments).await,
            Kind::ListOutcomes => self.list_outcomes(&arguments).await,
        }
        .map_err(failed)
    }
}
