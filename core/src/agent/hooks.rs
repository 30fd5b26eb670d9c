//! Hooks and guardrails (issue #21): host code the loop calls on the way of a run.
//!
//! Hooks run at six points ([`HookPoint`]): the run's start and end (observing), before each model
//! request (may edit its instructions and messages), after each model response (may edit its text and
//! tool calls), before each tool call (may edit its arguments, or refuse it with a reason the model
//! sees) and after it (may edit the result the model sees). Guardrails check the run's input (beside
//! the first model request: the request is not held for them, but a tripped one stops the run before
//! any tool runs or any answer is returned) and its final answer.
//!
//! Both see what the model sees: tool results after the credential redactor (`[credential:alias]`,
//! never a value), the conversation in the core's message form. Each gets the run's context
//! ([`HookContext::context`]). A hook or guardrail that fails ends the run with [`Error::HookFailed`]
//! naming it; a tripped guardrail with [`Error::GuardrailTripped`] carrying its name and verdict.
//!
//! Payloads and answers are JSON (the form every binding hands its language):
//! - `run_start`: `{"input": [messages]}`; `run_end`: the run's result (`output`, `tool_calls`, `usage`,
//!   `turns`, `structured_output`, `messages`, …). Both observe: they answer [`HookAction::Continue`].
//! - `before_model_request`: `{"turn", "instructions", "messages", "tools": [names]}`; a
//!   [`HookAction::Replace`] with `instructions` and/or `messages` replaces those (the messages for the
//!   rest of the run: they are the conversation).
//! - `after_model_response`: `{"turn", "text", "tool_calls": [{"id", "name", "arguments"}]}`; a replace
//!   with `text` and/or `tool_calls` replaces those before the loop acts on the answer (and keeps them
//!   in the conversation). A streamed run's text deltas were sent as the model wrote them: an edited
//!   final text is the result's `output`, not re-streamed.
//! - `before_tool_call`: `{"id", "name", "arguments"}`; a replace is the new arguments (an object);
//!   [`HookAction::Refuse`] refuses the call, the reason is what the model sees.
//! - `after_tool_call`: `{"id", "name", "arguments", "result", "is_error"}`; a replace is the new result
//!   text (a string), or an object with `result` and/or `is_error`.

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::context::RunContextValue;
use crate::error::Error;
use crate::tools::{Tool, ToolContext};

/// Where a hook runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookPoint {
    /// When the run starts (observes).
    RunStart,
    /// When the run ends (observes).
    RunEnd,
    /// Before each model request (may replace the instructions or messages).
    BeforeModelRequest,
    /// After each model answer (may replace its text or tool calls).
    AfterModelResponse,
    /// Before each tool call (may replace the arguments, or refuse the call).
    BeforeToolCall,
    /// After each tool call (may replace the result).
    AfterToolCall,
}

impl HookPoint {
    /// Every point, in the order they are listed.
    pub const ALL: [HookPoint; 6] = [
        HookPoint::RunStart,
        HookPoint::RunEnd,
        HookPoint::BeforeModelRequest,
        HookPoint::AfterModelResponse,
        HookPoint::BeforeToolCall,
        HookPoint::AfterToolCall,
    ];

    /// The point as configured and sent (`run_start`, `before_tool_call`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            HookPoint::RunStart => "run_start",
            HookPoint::RunEnd => "run_end",
            HookPoint::BeforeModelRequest => "before_model_request",
            HookPoint::AfterModelResponse => "after_model_response",
            HookPoint::BeforeToolCall => "before_tool_call",
            HookPoint::AfterToolCall => "after_tool_call",
        }
    }

    /// The point a name (`before_tool_call`, …) names; an unknown one is a config error listing them.
    pub fn parse(name: &str) -> Result<HookPoint, Error> {
        HookPoint::ALL.into_iter().find(|p| p.as_str() == name).ok_or_else(|| {
            let names: Vec<&str> = HookPoint::ALL.iter().map(|p| p.as_str()).collect();
            Error::Config(format!("there is no hook point '{name}' (points: {})", names.join(", ")))
        })
    }
}

/// What a hook or guardrail knows of the run it is called in.
#[derive(Debug, Clone)]
pub struct HookContext {
    /// The hook's or guardrail's own name.
    pub name: String,
    /// The model request the call belongs to (0 before the first).
    pub turn: u32,
    /// The run's context, as a host tool gets it (its call id is the hook's name; no credentials are
    /// declared, so none are handed out).
    pub tool_context: ToolContext,
}

impl HookContext {
    /// The run's host value as `T`, when the run has one of that type ([`crate::Agent::run_with_context`]).
    pub fn context<T: std::any::Any>(&self) -> Option<&T> {
        self.tool_context.context::<T>()
    }

    /// The run's host value, if it has one.
    pub fn run_context(&self) -> Option<&RunContextValue> {
        self.tool_context.context.as_ref()
    }
}

/// What a hook answers.
#[derive(Debug, Clone, PartialEq)]
pub enum HookAction {
    /// Go on unchanged.
    Continue,
    /// Go on with this value instead (see the module's payloads for each point).
    Replace(Value),
    /// Refuse the tool call (`before_tool_call` only): the reason is what the model sees.
    Refuse(String),
}

impl HookAction {
    /// A binding's answer as JSON: `null` or `{"action": "continue"}`, `{"action": "replace", "value":
    /// …}`, `{"action": "refuse", "reason": "…"}`.
    pub fn from_json(value: Value) -> Result<HookAction, String> {
        if value.is_null() {
            return Ok(HookAction::Continue);
        }
        match value.get("action").and_then(Value::as_str) {
            Some("continue") => Ok(HookAction::Continue),
            Some("replace") => Ok(HookAction::Replace(value.get("value").cloned().unwrap_or(Value::Null))),
            Some("refuse") => match value.get("reason").and_then(Value::as_str) {
                Some(r) => Ok(HookAction::Refuse(r.to_string())),
                None => Err("a refusal needs a reason (a string)".into()),
            },
            _ => Err(format!("a hook's answer must be continue, replace or refuse, got {value}")),
        }
    }
}

/// A hook: host code run at one [`HookPoint`] of every run of the agent.
#[async_trait]
pub trait Hook: Send + Sync {
    /// Its name, in the error a failure ends the run with.
    fn name(&self) -> &str;
    /// Where it runs.
    fn point(&self) -> HookPoint;
    /// An `Err` ends the run with [`Error::HookFailed`] naming the hook.
    async fn call(&self, ctx: HookContext, payload: Value) -> Result<HookAction, String>;
}

/// A hook made of a closure (see [`hook_fn`]).
pub struct FnHook<F> {
    name: String,
    point: HookPoint,
    f: F,
}

#[async_trait]
impl<F, Fut> Hook for FnHook<F>
where
    F: Fn(HookContext, Value) -> Fut + Send + Sync,
    Fut: Future<Output = Result<HookAction, String>> + Send,
{
    fn name(&self) -> &str {
        &self.name
    }
    fn point(&self) -> HookPoint {
        self.point
    }
    async fn call(&self, ctx: HookContext, payload: Value) -> Result<HookAction, String> {
        (self.f)(ctx, payload).await
    }
}

/// A hook from an async closure: `hook_fn("upper", HookPoint::AfterToolCall, |ctx, payload| async move
/// { … })`.
pub fn hook_fn<F, Fut>(name: impl Into<String>, point: HookPoint, f: F) -> Arc<dyn Hook>
where
    F: Fn(HookContext, Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<HookAction, String>> + Send + 'static,
{
    Arc::new(FnHook { name: name.into(), point, f })
}

/// A guardrail's answer: `tripped` stops the run; `info` (any JSON) is carried by the error and the
/// `guardrail_checked` event.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct GuardrailVerdict {
    /// Whether the check stops the run.
    pub tripped: bool,
    #[serde(default)]
    /// What the guardrail says with its verdict (any JSON).
    pub info: Value,
}

impl GuardrailVerdict {
    /// A verdict that lets the run go on.
    pub fn pass() -> Self {
        GuardrailVerdict { tripped: false, info: Value::Null }
    }
    /// A verdict that stops the run, with `info`.
    pub fn trip(info: impl Into<Value>) -> Self {
        GuardrailVerdict { tripped: true, info: info.into() }
    }
}

/// Which side of a run a guardrail checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardrailKind {
    /// The run's input (`{"input": text of the last user message, "messages": [...]}`), checked beside
    /// the first model request.
    Input,
    /// The final answer (`{"output": text, "structured_output": value or null}`).
    Output,
}

impl GuardrailKind {
    /// The kind as sent (`input` or `output`).
    pub fn as_str(self) -> &'static str {
        match self {
            GuardrailKind::Input => "input",
            GuardrailKind::Output => "output",
        }
    }
}

/// A guardrail: a check of the run's input or its final answer.
#[async_trait]
pub trait Guardrail: Send + Sync {
    /// Its name, in the event and the error.
    fn name(&self) -> &str;
    /// An `Err` (the check itself failed) ends the run with [`Error::HookFailed`] naming the guardrail.
    async fn check(&self, ctx: HookContext, payload: Value) -> Result<GuardrailVerdict, String>;
}

/// A guardrail made of a closure (see [`guardrail_fn`]).
pub struct FnGuardrail<F> {
    name: String,
    f: F,
}

#[async_trait]
impl<F, Fut> Guardrail for FnGuardrail<F>
where
    F: Fn(HookContext, Value) -> Fut + Send + Sync,
    Fut: Future<Output = Result<GuardrailVerdict, String>> + Send,
{
    fn name(&self) -> &str {
        &self.name
    }
    async fn check(&self, ctx: HookContext, payload: Value) -> Result<GuardrailVerdict, String> {
        (self.f)(ctx, payload).await
    }
}

/// A guardrail from an async closure.
pub fn guardrail_fn<F, Fut>(name: impl Into<String>, f: F) -> Arc<dyn Guardrail>
where
    F: Fn(HookContext, Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<GuardrailVerdict, String>> + Send + 'static,
{
    Arc::new(FnGuardrail { name: name.into(), f })
}

/// A binding's hook: its language's function wrapped as a host tool (the same wrapper its tools use,
/// so it runs sync or async and reads the run's context the same way), called with the payload as its
/// arguments; it answers the [`HookAction`] JSON.
pub struct HostHook {
    /// The hook's name.
    pub name: String,
    /// Where it runs.
    pub point: HookPoint,
    /// The function, as a host tool.
    pub function: Arc<dyn Tool>,
}

#[async_trait]
impl Hook for HostHook {
    fn name(&self) -> &str {
        &self.name
    }
    fn point(&self) -> HookPoint {
        self.point
    }
    async fn call(&self, ctx: HookContext, payload: Value) -> Result<HookAction, String> {
        let answer = self.function.call_in(payload, &ctx.tool_context).await.map_err(|e| e.to_string())?;
        HookAction::from_json(host_json(answer)?)
    }
}

/// A binding's guardrail (see [`HostHook`]); it answers the [`GuardrailVerdict`] JSON.
pub struct HostGuardrail {
    /// The guardrail's name.
    pub name: String,
    /// The function, as a host tool.
    pub function: Arc<dyn Tool>,
}

#[async_trait]
impl Guardrail for HostGuardrail {
    fn name(&self) -> &str {
        &self.name
    }
    async fn check(&self, ctx: HookContext, payload: Value) -> Result<GuardrailVerdict, String> {
        let answer = self.function.call_in(payload, &ctx.tool_context).await.map_err(|e| e.to_string())?;
        serde_json::from_value(host_json(answer)?).map_err(|e| format!("a guardrail's answer is not a verdict: {e}"))
    }
}

/// A host function's answer: JSON text (a binding's functions answer text), or a value.
fn host_json(answer: Value) -> Result<Value, String> {
    match answer {
        Value::String(text) => serde_json::from_str(&text).map_err(|e| format!("the answer is not JSON: {e}")),
        other => Ok(other),
    }
}

/// An agent's hooks and guardrails.
#[derive(Clone, Default)]
pub(crate) struct HookSet {
    pub hooks: Vec<Arc<dyn Hook>>,
    pub input_guardrails: Vec<Arc<dyn Guardrail>>,
    pub output_guardrails: Vec<Arc<dyn Guardrail>>,
}

impl HookSet {
    pub fn has(&self, point: HookPoint) -> bool {
        self.hooks.iter().any(|h| h.point() == point)
    }

    /// A sub-agent's: the same hooks, no guardrails.
    pub fn for_subagent(&self) -> HookSet {
        HookSet { hooks: self.hooks.clone(), ..HookSet::default() }
    }

    pub fn validate(&self) -> Result<(), Error> {
        let mut names = std::collections::BTreeSet::new();
        let all = self
            .hooks
            .iter()
            .map(|h| h.name())
            .chain(self.input_guardrails.iter().chain(&self.output_guardrails).map(|g| g.name()));
        for name in all {
            if name.trim().is_empty() {
                return Err(Error::Config("a hook or guardrail needs a name".into()));
            }
            if !names.insert(name.to_string()) {
                return Err(Error::Config(format!("two hooks or guardrails are named '{name}'")));
            }
        }
        Ok(())
    }

    /// Runs the hooks of `point` in order, each on the payload the one before it left; what the last
    /// one left (`Some`) when any replaced it, or the refusal (`Err(Ok(reason))`).
    pub async fn run(
        &self,
        point: HookPoint,
        turn: u32,
        ctx: &(dyn Fn(&str) -> ToolContext + Sync),
        mut payload: Value,
        merge: impl Fn(&mut Value, Value) -> Result<(), String>,
    ) -> Result<HookOutcome, Error> {
        let mut replaced = false;
        for hook in self.hooks.iter().filter(|h| h.point() == point) {
            let failed = |message: String| Error::HookFailed {
                hook: hook.name().to_string(),
                point: point.as_str().to_string(),
                message,
            };
            let context = HookContext { name: hook.name().to_string(), turn, tool_context: ctx(hook.name()) };
            match hook.call(context, payload.clone()).await.map_err(failed)? {
                HookAction::Continue => {}
                HookAction::Replace(value) => {
                    if matches!(point, HookPoint::RunStart | HookPoint::RunEnd) {
                        return Err(failed(format!("a {} hook observes: it cannot replace", point.as_str())));
                    }
                    merge(&mut payload, value).map_err(failed)?;
                    replaced = true;
                }
                HookAction::Refuse(reason) => {
                    if point != HookPoint::BeforeToolCall {
                        return Err(failed(format!("only a before_tool_call hook may refuse (at {})", point.as_str())));
                    }
                    return Ok(HookOutcome::Refused { hook: hook.name().to_string(), reason });
                }
            }
        }
        Ok(if replaced { HookOutcome::Replaced(payload) } else { HookOutcome::Unchanged })
    }
}

pub(crate) enum HookOutcome {
    Unchanged,
    Replaced(Value),
    Refused { hook: String, reason: String },
}

/// Replaces the keys `keys` of `payload` that `value` (an object) gives.
pub(crate) fn merge_keys(keys: &'static [&'static str]) -> impl Fn(&mut Value, Value) -> Result<(), String> {
    move |payload, value| {
        let Value::Object(given) = value else {
            return Err(format!("the replacement must be an object with {}", keys.join(" and/or ")));
        };
        for (k, v) in given {
            if !keys.contains(&k.as_str()) {
                return Err(format!("the replacement may give {}, not '{k}'", keys.join(" and/or ")));
            }
            payload[&k] = v;
        }
        Ok(())
    }
}

/// A guardrail's view of a run's input: the last user message's text, and the whole list.
pub(crate) fn input_payload(messages: &[crate::model::Message]) -> Value {
    let input = messages.iter().rev().find_map(|m| match m {
        crate::model::Message::User { content, .. } => Some(content.clone()),
        _ => None,
    });
    serde_json::json!({"input": input.unwrap_or_default(), "messages": serde_json::to_value(messages).unwrap_or_default()})
}

/// Tool calls as hooks see them: `{"id", "name", "arguments"}`, the arguments as JSON (their text when
/// they are not JSON).
pub(crate) fn calls_json(calls: &[crate::model::ToolCall]) -> Value {
    Value::Array(
        calls
            .iter()
            .map(|c| {
                let arguments =
                    serde_json::from_str::<Value>(&c.arguments).unwrap_or_else(|_| Value::String(c.arguments.clone()));
                serde_json::json!({"id": c.id, "name": c.name, "arguments": arguments})
            })
            .collect(),
    )
}

/// Tool calls a hook gave back (see [`calls_json`]).
pub(crate) fn calls_from(value: &Value) -> Result<Vec<crate::model::ToolCall>, String> {
    let Some(items) = value.as_array() else { return Err("tool_calls must be a list".into()) };
    items
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let text = |k: &str| {
                c[k].as_str().map(str::to_string).ok_or_else(|| format!("tool_calls[{i}].{k} must be a string"))
            };
            let arguments = match &c["arguments"] {
                Value::String(s) => s.clone(),
                Value::Null => "{}".to_string(),
                other => other.to_string(),
            };
            Ok(crate::model::ToolCall { id: text("id")?, name: text("name")?, arguments, from_text: false })
        })
        .collect()
}
