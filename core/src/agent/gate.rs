//! The gate every tool call passes before the tool runs: the permission decision, the argument rule,
//! and the approval handler. Approval never widens reach: the tool then runs with the session's context.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::Instrument;

use crate::error::ToolError;
use crate::permission::decision::{SessionFacts, ToolFacts, decide, status};
use crate::permission::{ApprovalDecision, ApprovalRequest, CallDecision, Level, Policy, Scope, ToolStatus};
use crate::tools::args::read_arguments;
use crate::tools::{Tool, ToolContext};

/// A policy with its scope resolved, as a run holds it.
#[derive(Clone)]
pub(crate) struct Session {
    pub policy: Policy,
    pub scope: Arc<Scope>,
    /// The credential broker (crate::credentials): what tools that declare an alias receive, and what
    /// the redactor knows. Sub-agents hold their parent's.
    pub credentials: Option<crate::credentials::Credentials>,
}

impl Session {
    pub fn new(policy: Policy) -> Result<Session, String> {
        let scope = match &policy.scope {
            Some(s) => s.clone(),
            None => Scope::current_dir()?,
        };
        Ok(Session { policy, scope: Arc::new(scope), credentials: None })
    }

    /// What a hook or guardrail named `name` knows of the session: a call's context with no credentials
    /// declared (crate::agent::hooks).
    pub(crate) fn hook_context(&self, name: &str) -> ToolContext {
        ToolContext {
            call_id: name.to_string(),
            level: self.policy.level,
            scope: self.scope.clone(),
            network: self.policy.network,
            allow_local_addresses: self.policy.allow_local_addresses.clone(),
            credentials: None,
            declared: Vec::new().into(),
            context: super::context::current(),
        }
    }

    /// What a call of `tool` knows of the session: one place builds it, for a call decided now and for
    /// one answered later.
    fn context(&self, call_id: &str, tool: &dyn Tool) -> ToolContext {
        ToolContext {
            call_id: call_id.to_string(),
            level: self.policy.level,
            scope: self.scope.clone(),
            network: self.policy.network,
            allow_local_addresses: self.policy.allow_local_addresses.clone(),
            credentials: self.credentials.clone(),
            declared: tool.spec().credentials.clone().into(),
            context: super::context::current(),
        }
    }

    /// Runs the tool, its result and error text passed through the credential redactor: the one place a
    /// tool's text enters the loop (SPEC §15). The call journal, the conversation, the events, the
    /// session store and the run's result all come after it, so none holds a value, only
    /// `[credential:alias]`.
    async fn run(&self, tool: &dyn Tool, arguments: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let result = if tool.spec().name == super::named::DELEGATE_TOOL {
            // A delegation reads the caller's approval path and level overrides (agent/named.rs).
            super::named::as_caller(&self.policy, tool.call_in(arguments, ctx)).await
        } else {
            tool.call_in(arguments, ctx).await
        };
        let redact = |text: String| match &self.credentials {
            Some(c) => c.redact(&text),
            None => text,
        };
        match result {
            Ok(value) => Ok(match &self.credentials {
                Some(c) => redact_value(c, value),
                None => value,
            }),
            Err(ToolError::Failed(text)) => Err(ToolError::Failed(redact(text))),
            // Host code raised: its traceback is logged here, once, redacted; the loop goes on with the
            // message alone, so nothing after this point (journal, conversation, store) sees the trace.
            Err(ToolError::Raised { message, trace }) => {
                let message = redact(message);
                let trace = crate::tools::builtin::clip(&redact(trace), MAX_TRACE_CHARS, "the traceback");
                let logged = crate::tools::builtin::clip(&message, MAX_TRACE_CHARS, "the message");
                crate::telemetry::tool_raised(&tool.spec().name, &logged, &trace);
                Err(ToolError::Failed(message))
            }
            Err(other) => Err(other),
        }
    }

    fn facts(&self) -> SessionFacts<'_> {
        SessionFacts {
            level: self.policy.level,
            approvals: self.policy.approvals.is_some(),
            filters: &self.policy.filters,
            network: self.policy.network,
        }
    }

    pub fn status(&self, tool: &dyn Tool) -> ToolStatus {
        status(tool_facts(tool), self.facts())
    }
}

/// The most characters of a host tool's traceback logged (a tool may raise with any text at all).
const MAX_TRACE_CHARS: usize = 32 * 1024;

/// Every string of a tool's JSON result (keys too) redacted.
pub(crate) fn redact_value(c: &crate::credentials::Credentials, value: Value) -> Value {
    match value {
        Value::String(s) => Value::String(c.redact(&s)),
        Value::Array(a) => Value::Array(a.into_iter().map(|v| redact_value(c, v)).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (c.redact(&k), redact_value(c, v))).collect()),
        other => other,
    }
}

fn tool_facts(tool: &dyn Tool) -> ToolFacts<'_> {
    ToolFacts::of(tool)
}

/// One line of the listing API.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolListing {
    /// The tool's whole name.
    pub name: String,
    /// The level the tool requires after overrides.
    pub level: Level,
    /// The level the tool declares.
    pub declared_level: Level,
    /// Whether it is offered, deferred, hidden, blocked, above the level or withheld.
    pub status: ToolStatus,
    /// Whether a call goes to the approval handler.
    pub approval: bool,
    /// What confines the tool's calls on this machine, for a tool that runs sandboxed (the shell: the
    /// kernel's sandbox layers, or why it runs only at `unrestricted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confinement: Option<String>,
}

/// What became of a call at the gate.
#[derive(Debug)]
pub(crate) enum GateOutcome {
    /// The tool ran (perhaps after an approval) with these arguments.
    Ran { arguments: Value, result: Result<Value, ToolError> },
    /// Refused before it ran: level, filters, or the argument rule. The text names why.
    Refused { message: String },
    /// A person denied it.
    Denied { reason: String },
    /// The handler answered later: the run parks on this call (crate::session).
    Parked { request: ApprovalRequest },
}

/// Decides, reads the arguments, asks when it must, and runs the tool.
pub(crate) async fn run_call(
    session: &Session,
    tool: &dyn Tool,
    call_id: &str,
    arguments: Value,
    on_approval: impl FnOnce(&ApprovalRequest),
    on_run: impl FnOnce(),
) -> GateOutcome {
    let spec = tool.spec();
    let decision = decide(tool_facts(tool), session.facts());
    if let CallDecision::Refuse(message) = decision {
        return GateOutcome::Refused { message };
    }
    let arguments = match read_arguments(&spec.parameters, &spec.allow_blank, arguments) {
        Ok(a) => a,
        Err(e) => return GateOutcome::Refused { message: format!("tool '{}' refused the call: {e}", spec.name) },
    };
    let ctx = session.context(call_id, tool);
    let CallDecision::Ask(reason) = decision else {
        on_run();
        let result =
            crate::session::journaled(call_id, tool, &arguments, session.run(tool, arguments.clone(), &ctx)).await;
        return GateOutcome::Ran { arguments, result };
    };
    let Some(handler) = &session.policy.approvals else {
        return GateOutcome::Refused {
            message: format!("tool '{}' needs an approval and no handler is set", spec.name),
        };
    };
    let request = ApprovalRequest {
        call_id: call_id.to_string(),
        tool: spec.name.clone(),
        arguments: arguments.clone(),
        tool_level: session.policy.filters.effective_level(&spec.name, tool.level()),
        session_level: session.policy.level,
        reason,
    };
    on_approval(&request);
    let span = tracing::info_span!(
        target: "ambit::permission",
        "approval",
        gen_ai.tool.name = %spec.name,
        gen_ai.tool.call.id = call_id,
        ambit.approval.decision = tracing::field::Empty,
    );
    let answer = handler
        .decide(&request)
        .instrument(span.clone())
        .await
        .unwrap_or_else(|e| ApprovalDecision::Deny { reason: format!("the approval handler failed: {e}") });
    span.record(
        "ambit.approval.decision",
        match answer {
            ApprovalDecision::Approve => "approve",
            ApprovalDecision::Deny { .. } => "deny",
            ApprovalDecision::Revise { .. } => "revise",
            ApprovalDecision::Later => "later",
        },
    );
    if answer == ApprovalDecision::Later {
        return GateOutcome::Parked { request };
    }
    answered(session, tool, call_id, arguments, answer, on_run).await
}

/// What an answer does to a call put to a person: the same for a live answer and for one given later,
/// when a parked run is resumed.
pub(crate) async fn answered(
    session: &Session,
    tool: &dyn Tool,
    call_id: &str,
    arguments: Value,
    answer: ApprovalDecision,
    on_run: impl FnOnce(),
) -> GateOutcome {
    let spec = tool.spec();
    let ctx = session.context(call_id, tool);
    // A call recorded before (a resume that a crash interrupted after the call started) is not decided
    // anew: whatever the answer, the model is told what the journal holds.
    let runs = matches!(answer, ApprovalDecision::Approve | ApprovalDecision::Revise { .. });
    if let Some(result) = crate::session::recorded(call_id, tool, runs).await {
        return GateOutcome::Ran { arguments, result };
    }
    let run_with = match &answer {
        ApprovalDecision::Approve => arguments,
        ApprovalDecision::Later => {
            return GateOutcome::Refused { message: format!("tool '{}' needs an answer now, not later", spec.name) };
        }
        ApprovalDecision::Deny { reason } => return GateOutcome::Denied { reason: reason.clone() },
        ApprovalDecision::Revise { arguments: revised } => {
            match read_arguments(&spec.parameters, &spec.allow_blank, revised.clone()) {
                Ok(a) => a,
                Err(e) => {
                    return GateOutcome::Refused {
                        message: format!("tool '{}' refused the revised call: {e}", spec.name),
                    };
                }
            }
        }
    };
    on_run();
    let result = crate::session::journaled(call_id, tool, &run_with, session.run(tool, run_with.clone(), &ctx)).await;
    GateOutcome::Ran { arguments: run_with, result }
}
