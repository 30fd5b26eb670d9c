//! Permissions in the Node binding: the policy (JSON text of the core's `PolicyConfig`, converted from
//! camelCase by the facade), the JS approval handler as an [`ambit::ApprovalHandler`], the built-in tools
//! by name, a host tool's level declarations, and the listing API. It only translates; every rule lives
//! in the core.

use std::sync::Arc;

use ambit::{
    AgentBuilder, ApprovalDecision, ApprovalHandler, ApprovalRequest, Error, Level, Policy, PolicyConfig, ToolSpec,
};
use async_trait::async_trait;
use napi::Status;
use napi::bindgen_prelude::{Either, Promise};
use napi::threadsafe_function::ThreadsafeFunction;
use napi_derive::napi;
use serde_json::Value;

use crate::{NativeAgent, NativeError};

/// A JS approval handler as Rust calls it: the JSON text of the request (snake_case, as the core
/// serializes it), a Promise of the JSON text of `{"ok": true, "value": decision}` or
/// `{"ok": false, "message": "..."}` back. Weak: a handler does not keep the process alive.
pub type JsApprovalFn = ThreadsafeFunction<String, Promise<String>, String, Status, false, true>;

/// Adapts the facade's approval function to the core's [`ApprovalHandler`]. Every failure (a throw,
/// an answer that is not a decision) is an `Err`, which the core turns into a denial naming it.
struct JsApproval {
    decide: JsApprovalFn,
}

#[async_trait]
impl ApprovalHandler for JsApproval {
    async fn decide(&self, request: &ApprovalRequest) -> Result<ApprovalDecision, String> {
        let request = serde_json::to_string(request).map_err(|e| e.to_string())?;
        let promise = self.decide.call_async_catch(request).await.map_err(|e| e.reason.clone())?;
        let text = promise.await.map_err(|e| e.reason.clone())?;
        let mut envelope: Value =
            serde_json::from_str(&text).map_err(|e| format!("the approval handler's answer could not be read: {e}"))?;
        if envelope.get("ok").and_then(Value::as_bool) != Some(true) {
            let message = envelope.get("message").and_then(Value::as_str).unwrap_or("unknown error");
            return Err(message.to_string());
        }
        let answer = envelope.get_mut("value").map(Value::take).unwrap_or(Value::Null);
        serde_json::from_value(answer.clone())
            .map_err(|e| format!("the approval handler's answer {answer} is not a decision: {e}"))
    }
}

/// Applies the policy (JSON text of a `PolicyConfig`) and the approval handler, when either is given.
pub fn apply_policy(
    builder: AgentBuilder,
    policy_json: Option<String>,
    approvals: Option<JsApprovalFn>,
) -> Result<AgentBuilder, Error> {
    if policy_json.is_none() && approvals.is_none() {
        return Ok(builder);
    }
    let config = match policy_json {
        Some(text) => PolicyConfig::from_json(&text)?,
        None => PolicyConfig::default(),
    };
    let handler = approvals.map(|decide| Arc::new(JsApproval { decide }) as Arc<dyn ApprovalHandler>);
    Ok(builder.policy(config.into_policy(handler)?))
}

/// The policy of `with_policy`: the JSON text of a `PolicyConfig` and the approval handler, if any.
pub fn policy_of(policy_json: &str, approvals: Option<JsApprovalFn>) -> Result<Policy, Error> {
    let handler = approvals.map(|decide| Arc::new(JsApproval { decide }) as Arc<dyn ApprovalHandler>);
    PolicyConfig::from_json(policy_json)?.into_policy(handler)
}

/// Registers the built-in tools named; an unknown name is a configuration error naming it.
pub fn apply_builtins(mut builder: AgentBuilder, names: Vec<String>) -> Result<AgentBuilder, Error> {
    for name in names {
        let tool = ambit::tools::builtin::by_name(&name).ok_or_else(|| {
            Error::Config(format!(
                "there is no built-in tool named '{name}' (built-ins: {})",
                ambit::tools::builtin::NAMES.join(", ")
            ))
        })?;
        builder = builder.tool_arc(tool);
    }
    Ok(builder)
}

/// A host tool's permission declarations: its level (the core's spelling), whether every call goes to
/// the approval handler, the string arguments whose blank value is kept, and whether it is idempotent.
pub fn declare(
    spec: ToolSpec,
    level: Option<String>,
    requires_approval: Option<bool>,
    allow_blank: Option<Vec<String>>,
    idempotent: Option<bool>,
) -> Result<ToolSpec, Error> {
    let mut spec = spec;
    if let Some(level) = level {
        let level: Level = level.parse().map_err(|e| Error::Config(format!("tool '{}': {e}", spec.name)))?;
        spec = spec.with_level(level);
    }
    Ok(spec
        .with_requires_approval(requires_approval.unwrap_or(false))
        .with_allow_blank(allow_blank.unwrap_or_default())
        .with_idempotent(idempotent.unwrap_or(false)))
}

#[napi]
impl NativeAgent {
    /// Every registered tool with its effective level, declared level, status and whether its calls go
    /// to the approval handler: the JSON text of the core's listing (snake_case).
    #[napi]
    pub fn list_tools(&self) -> napi::Result<String> {
        crate::guard(|| serde_json::to_string(&self.agent.list_tools()))?
            .map_err(|e| napi::Error::from_reason(format!("the tool listing could not be serialized: {e}")))
    }

    /// The same agent under another policy (the JSON text of a `PolicyConfig`, the approval handler as
    /// in `createAgent`), keeping its sub-agents: a follow-up is re-admitted against this policy's
    /// reach. Or the core's configuration error as data.
    #[napi(ts_args_type = "policy: string, approvals?: (requestJson: string) => Promise<string>")]
    pub fn with_policy(
        &self,
        policy: String,
        approvals: Option<JsApprovalFn>,
    ) -> napi::Result<Either<NativeAgent, NativeError>> {
        crate::guard(|| match policy_of(&policy, approvals).and_then(|p| self.agent.with_policy(p)) {
            Ok(agent) => Either::A(NativeAgent { agent }),
            Err(e) => Either::B(NativeError::from_core(&e)),
        })
    }
}
