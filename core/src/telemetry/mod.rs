//! Telemetry: the loop's `tracing` spans named and attributed as the OpenTelemetry GenAI semantic
//! conventions say, and (with the `otel` cargo feature) their export over OTLP/HTTP ([`init`]).
//!
//! Spans, parents first:
//! - `invoke_agent` (a run): `gen_ai.operation.name` = `invoke_agent`, `gen_ai.request.model`,
//!   `ambit.run.id`, `gen_ai.conversation.id` (the session id, in a session), and at its end the run's
//!   `gen_ai.usage.input_tokens` / `gen_ai.usage.output_tokens`, or `error.type`;
//! - `turn` (one round of the loop: its model request and the tool calls it asked for): `ambit.turn`;
//! - `chat {model}` (a model request): `gen_ai.operation.name` = `chat`, `gen_ai.provider.name` (and the
//!   older `gen_ai.system`), `gen_ai.request.model`, `gen_ai.response.id`, `gen_ai.response.model` (the
//!   model the provider says answered, as each wire's answer names it), `gen_ai.response.finish_reasons`, `gen_ai.usage.input_tokens` / `output_tokens`;
//! - `execute_tool {name}` (a tool call): `gen_ai.operation.name` = `execute_tool`, `gen_ai.tool.name`,
//!   `gen_ai.tool.call.id`, `gen_ai.tool.type`, and `error.type` when the call failed or was refused;
//!   the approval, an MCP call, ledger and session operations are spans of their own inside.
//!
//! Message contents (`gen_ai.input.messages`, `gen_ai.output.messages`, `gen_ai.system_instructions`,
//! `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`) are recorded only when the host opts in
//! ([`set_record_content`], or `record_content` in [`OtlpConfig`]), and then after the run's
//! credential redactor.
//!
//! Without a `tracing` subscriber (the default) none of this costs more than a disabled callsite check.

use std::sync::atomic::{AtomicBool, Ordering};

use tracing::Span;
use tracing::field::Empty;

use crate::model::{Message, ModelRequest, ModelResponse, StopReason, Usage};

#[cfg(feature = "otel")]
mod export;
#[cfg(feature = "otel")]
mod otlp;
#[cfg(feature = "otel")]
pub use otlp::{LogForward, OtlpConfig, Telemetry, flush, init, shutdown};

static RECORD_CONTENT: AtomicBool = AtomicBool::new(false);

/// Whether spans carry message contents (off by default). Contents pass the run's credential redactor
/// first.
pub fn set_record_content(on: bool) {
    RECORD_CONTENT.store(on, Ordering::Relaxed);
}

/// Whether spans carry message contents ([`set_record_content`]).
pub fn record_content() -> bool {
    RECORD_CONTENT.load(Ordering::Relaxed)
}

tokio::task_local! {
    static CONVERSATION: String;
}

/// Runs `fut` with `id` as the `gen_ai.conversation.id` of the runs inside it (a session's runs).
pub(crate) async fn in_conversation<F: std::future::Future>(id: &str, fut: F) -> F::Output {
    CONVERSATION.scope(id.to_string(), fut).await
}

/// The span of one run (`invoke_agent`).
pub(crate) fn run_span(model: &str) -> Span {
    let span = tracing::info_span!(
        target: "ambit::agent",
        "invoke_agent",
        otel.name = "invoke_agent",
        otel.kind = "internal",
        gen_ai.operation.name = "invoke_agent",
        gen_ai.request.model = model,
        gen_ai.conversation.id = Empty,
        ambit.run.id = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        ambit.turns = Empty,
        error.type = Empty,
    );
    if !span.is_disabled() {
        let mut id = [0u8; 8];
        if getrandom::fill(&mut id).is_ok() {
            span.record("ambit.run.id", id.iter().map(|b| format!("{b:02x}")).collect::<String>().as_str());
        }
        let _ = CONVERSATION.try_with(|c| span.record("gen_ai.conversation.id", c.as_str()));
    }
    span
}

/// Records how a run ended on its span: its usage and turns, or its error's kind.
pub(crate) fn run_ended(span: &Span, outcome: &Result<crate::agent::RunResult, crate::Error>) {
    match outcome {
        Ok(r) => tracing::info!(
            target: "ambit::agent",
            turns = r.turns,
            input_tokens = r.usage.input_tokens,
            output_tokens = r.usage.output_tokens,
            tool_calls = r.tool_calls.len(),
            "run finished"
        ),
        Err(e) => tracing::info!(target: "ambit::agent", error = e.code(), "run failed"),
    }
    if span.is_disabled() {
        return;
    }
    match outcome {
        Ok(r) => {
            record_usage(span, &r.usage);
            span.record("ambit.turns", int(r.turns));
        }
        Err(e) => {
            span.record("error.type", e.code());
            if let Some(u) = e.usage() {
                record_usage(span, u);
            }
        }
    }
}

/// The span of one turn of the loop; its model request and tool calls are its children.
pub(crate) fn turn_span(turn: u32) -> Span {
    tracing::info_span!(target: "ambit::agent", "turn", ambit.turn = int(turn))
}

/// The span of one model request (`chat {model}`), a child of `parent` (its turn).
pub(crate) fn chat_span(parent: &Span, model: &str, request: &ModelRequest, redact: Redact<'_>) -> Span {
    let span = tracing::info_span!(
        target: "ambit::model",
        parent: parent,
        "chat",
        otel.name = Empty,
        otel.kind = "client",
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = Empty,
        gen_ai.system = Empty,
        gen_ai.request.model = model,
        gen_ai.response.id = Empty,
        gen_ai.response.model = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.system_instructions = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
        error.type = Empty,
    );
    if span.is_disabled() {
        return span;
    }
    span.record("otel.name", format!("chat {model}").as_str());
    if record_content() {
        if let Some(i) = &request.instructions {
            span.record("gen_ai.system_instructions", redact.text(i).as_str());
        }
        let messages = serde_json::to_string(&request.messages).unwrap_or_default();
        span.record("gen_ai.input.messages", redact.text(&messages).as_str());
    }
    span
}

/// Records a model's answer (or failure) on its `chat` span.
pub(crate) fn chat_ended(span: &Span, outcome: Result<&ModelResponse, &crate::ModelError>, redact: Redact<'_>) {
    if span.is_disabled() {
        return;
    }
    let response = match outcome {
        Ok(r) => r,
        Err(e) => {
            span.record("error.type", e.code());
            return;
        }
    };
    if !response.id.is_empty() {
        span.record("gen_ai.response.id", response.id.as_str());
    }
    record_usage(span, &response.usage);
    let reason = finish_reason(response.stop);
    record_finish_reasons(span, reason);
    if record_content() {
        let message = Message::Assistant { content: response.text.clone(), tool_calls: response.tool_calls.clone() };
        let text = serde_json::to_string(&[message]).unwrap_or_default();
        span.record("gen_ai.output.messages", redact.text(&text).as_str());
    }
}

/// Records the finish reason; the exporting layer sends it as a string array, as the conventions type
/// it (a `tracing` field cannot hold one).
fn record_finish_reasons(span: &Span, reason: &'static str) {
    span.record("gen_ai.response.finish_reasons", reason);
}

/// The conventions' finish reason for a stop reason.
pub fn finish_reason(stop: StopReason) -> &'static str {
    match stop {
        StopReason::End => "stop",
        StopReason::ToolCalls => "tool_calls",
        StopReason::Length => "length",
        StopReason::ContentFilter => "content_filter",
        StopReason::Refusal => "refusal",
        _ => "other",
    }
}

/// Records the provider of the model request in flight on its `chat` span (called by a wire).
pub(crate) fn provider(name: &'static str) {
    let span = Span::current();
    if !span.is_disabled() {
        span.record("gen_ai.provider.name", name);
        span.record("gen_ai.system", name);
    }
}

/// Records the model the provider says answered (`gen_ai.response.model`) on the model request in flight
/// (called by a wire with its answer's `model`; nothing when it names none).
pub(crate) fn response_model(model: Option<&serde_json::Value>) {
    let Some(model) = model.and_then(serde_json::Value::as_str).filter(|m| !m.is_empty()) else { return };
    let span = Span::current();
    if !span.is_disabled() {
        span.record("gen_ai.response.model", model);
    }
}

/// The span of one tool call (`execute_tool {name}`).
pub(crate) fn tool_span(name: &str, call_id: &str) -> Span {
    let span = tracing::info_span!(
        target: "ambit::tools",
        "execute_tool",
        otel.name = Empty,
        otel.kind = "internal",
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = name,
        gen_ai.tool.call.id = call_id,
        gen_ai.tool.type = "function",
        gen_ai.tool.call.arguments = Empty,
        gen_ai.tool.call.result = Empty,
        error.type = Empty,
    );
    if !span.is_disabled() {
        span.record("otel.name", format!("execute_tool {name}").as_str());
    }
    span
}

/// Records a tool call's outcome on its span: the arguments and result (contents, when recorded) and
/// whether it failed.
pub(crate) fn tool_ended(
    span: &Span,
    name: &str,
    arguments: &serde_json::Value,
    result: &str,
    is_error: bool,
    redact: Redact<'_>,
) {
    tracing::debug!(target: "ambit::tools", parent: span, tool = name, is_error, "tool call finished");
    if span.is_disabled() {
        return;
    }
    if is_error {
        span.record("error.type", "tool_error");
    }
    if record_content() {
        span.record("gen_ai.tool.call.arguments", redact.text(&arguments.to_string()).as_str());
        span.record("gen_ai.tool.call.result", redact.text(result).as_str());
    }
}

/// Logs host code that raised inside a tool (a Python traceback, a JavaScript stack), after the redactor:
/// the one place a tool's traceback goes, since the model reads only the message.
pub(crate) fn tool_raised(name: &str, message: &str, trace: &str) {
    tracing::warn!(
        target: "ambit::tools",
        tool = name,
        exception.message = message,
        exception.stacktrace = trace,
    "tool '{name}' raised"
    );
}

fn record_usage(span: &Span, usage: &Usage) {
    span.record("gen_ai.usage.input_tokens", int(usage.input_tokens));
    span.record("gen_ai.usage.output_tokens", int(usage.output_tokens));
}

/// A count as an `i64`: the exporting layer exports `u64` fields as text, `i64` ones as integers.
pub(crate) fn int(n: impl TryInto<i64>) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}

/// The credential redactor contents pass before they are recorded (none: recorded as they are).
#[derive(Clone, Copy)]
pub(crate) struct Redact<'a>(pub Option<&'a crate::credentials::Credentials>);

impl Redact<'_> {
    fn text(&self, text: &str) -> String {
        match self.0 {
            Some(c) => c.redact(text),
            None => text.to_string(),
        }
    }
}
