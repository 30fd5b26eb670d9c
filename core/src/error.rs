//! Errors, one enum per area. Bindings map each variant to an exception or error class of their
//! language using [`Error::code`], and keep the message.

use crate::model::Usage;

/// Everything a run or a configuration call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The agent or a tool was configured wrongly (duplicate tool names, a schema that is not an object, …).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The model provider failed, after retries where a retry made sense.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The run used its turn budget without the model giving a final answer.
    #[error("the run reached its limit of {max_turns} turns without a final answer")]
    MaxTurns {
        /// The limit.
        max_turns: u32,
        /// What the run used.
        usage: Usage,
    },
    /// The run went past a hard budget (`budget` is `tokens` or `cost`); `usage` and `cost` are what it
    /// used up to then.
    #[error("the run went past its {budget} budget of {limit} (spent {spent})")]
    Budget {
        /// `tokens` or `cost`.
        budget: String,
        /// The budget.
        limit: f64,
        /// What the run spent of it.
        spent: f64,
        /// What the run used.
        usage: Usage,
        /// What the run cost, when priced.
        cost: Option<f64>,
    },
    /// The model's answer was cut by its output token limit in the middle of tool calls (`tools`, by
    /// name). Their arguments are incomplete, so none of them ran; `usage` is what the run used, the cut
    /// answer included. Raise the model's output token limit, or ask for less at once.
    #[error(
        "the model's answer was cut by its output token limit in the middle of a call of {}: the call did not run",
        tools.join(", ")
    )]
    OutputTruncated {
        /// The tools whose calls were cut.
        tools: Vec<String>,
        /// What the run used.
        usage: Usage,
    },
    /// The model's final answer did not match the agent's output type, after the answers that did not
    /// went back to it `retries` times: `message` says what is wrong with the last one, `attempt` is
    /// that answer's text as the model gave it, `usage` what the run used.
    #[error("the model's final answer did not match the output type after {retries} retries: {message}")]
    OutputInvalid {
        /// What is wrong with the last answer.
        message: String,
        /// The last answer's text.
        attempt: String,
        /// How many times answers went back to the model.
        retries: u32,
        /// What the run used.
        usage: Usage,
    },
    /// A message history given as a run's input breaks a rule (crate::agent::input): `index` is the
    /// message's place in the list, `field` the field that is wrong (`role`, `call_id`,
    /// `tool_calls[0].id`; empty for the whole entry). Nothing was sent or stored.
    #[error("invalid message history: messages[{index}]{}: {message}", if field.is_empty() { String::new() } else { format!(".{field}") })]
    InvalidMessage {
        /// The message's place in the list.
        index: usize,
        /// The field that is wrong (empty: the whole entry).
        field: String,
        /// What is wrong.
        message: String,
    },
    /// A hook or a guardrail (crate::agent::hooks) failed: it raised, or answered something its point
    /// does not take. `hook` is its name, `point` where it ran (`before_tool_call`, …, or
    /// `input_guardrail` / `output_guardrail`). The run ended there; a session stores nothing of it.
    #[error("hook '{hook}' ({point}) failed: {message}")]
    HookFailed {
        /// The hook's name.
        hook: String,
        /// Where it ran.
        point: String,
        /// What went wrong.
        message: String,
    },
    /// A guardrail tripped: `guardrail` is its name, `kind` `input` or `output`, `verdict` the
    /// information it gave (any JSON), `usage` what the run used. No tool ran after an input guardrail
    /// tripped, and no answer was returned.
    #[error("guardrail '{guardrail}' ({kind}) tripped: {verdict}")]
    GuardrailTripped {
        /// The guardrail's name.
        guardrail: String,
        /// `input` or `output`.
        kind: String,
        /// What the guardrail said.
        verdict: serde_json::Value,
        /// What the run used.
        usage: Usage,
    },
    /// The run was cancelled. A signal, not a failure.
    #[error("the run was cancelled")]
    Cancelled,
    /// A bug in ambit: a panic was caught at the boundary (a run's task, a binding's exported function)
    /// instead of taking the host process down. The message is the panic's.
    #[error("internal error in ambit (please report it): {0}")]
    Internal(String),
}

impl Error {
    /// A stable machine-readable code, the same in every language.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Config(_) => "config",
            Error::Model(e) => e.code(),
            Error::MaxTurns { .. } => "max_turns",
            Error::Budget { .. } => "budget_exceeded",
            Error::OutputTruncated { .. } => "output_truncated",
            Error::OutputInvalid { .. } => "output_invalid",
            Error::InvalidMessage { .. } => "invalid_message",
            Error::HookFailed { .. } => "hook_failed",
            Error::GuardrailTripped { .. } => "guardrail_tripped",
            Error::Cancelled => "cancelled",
            Error::Internal(_) => "internal",
        }
    }
    /// The [`Error::Internal`] for a caught panic, with the panic's message when it has one (a `&str` or
    /// a `String` payload, as `panic!` makes). Every boundary that catches a panic builds its error here.
    pub fn from_panic(payload: &(dyn std::any::Any + Send)) -> Error {
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".to_string());
        Error::Internal(format!("panic: {message}"))
    }
    /// What the run used before it stopped, for the errors that stop a run part-way (turn limit, budget,
    /// a cut tool call).
    pub fn usage(&self) -> Option<&Usage> {
        match self {
            Error::MaxTurns { usage, .. }
            | Error::Budget { usage, .. }
            | Error::OutputTruncated { usage, .. }
            | Error::OutputInvalid { usage, .. }
            | Error::GuardrailTripped { usage, .. } => Some(usage),
            _ => None,
        }
    }
}

/// A failure talking to the model provider.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ModelError {
    /// The provider answered with an error status.
    #[error("the model provider answered HTTP {status}: {message}")]
    Http {
        /// The HTTP status.
        status: u16,
        /// The provider's error message.
        message: String,
    },
    /// The request never got an answer (connection refused, reset, timed out).
    #[error("could not reach the model provider: {0}")]
    Transport(String),
    /// The provider answered with something that is not the wire format.
    #[error("the model provider's answer could not be read: {0}")]
    InvalidResponse(String),
}

impl ModelError {
    /// A stable machine-readable code, the same in every language.
    pub fn code(&self) -> &'static str {
        match self {
            ModelError::Http { .. } => "model_http",
            ModelError::Transport(_) => "model_transport",
            ModelError::InvalidResponse(_) => "model_response",
        }
    }
}

/// What a tool returns when it fails. The model sees the message as an error result; the run goes on.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ToolError {
    /// The tool failed; the message is what the model reads.
    #[error("{0}")]
    Failed(String),
    /// Host code raised (a Python exception, a JavaScript error): the model reads `message`; `trace`
    /// (the host language's traceback or stack) goes to the log (`ambit::tools`, WARN) and never to the
    /// model. Both pass the credential redactor first.
    #[error("{message}")]
    Raised {
        /// What the model reads: the exception's text.
        message: String,
        /// The host language's traceback or stack, for the log only.
        trace: String,
    },
    /// The call was cancelled before it finished.
    #[error("the tool call was cancelled")]
    Cancelled,
}

impl ToolError {
    /// A failure the model reads as `message`.
    pub fn failed(message: impl std::fmt::Display) -> Self {
        ToolError::Failed(message.to_string())
    }

    /// Host code raised: `message` for the model, `trace` for the log only.
    pub fn raised(message: impl Into<String>, trace: impl Into<String>) -> Self {
        ToolError::Raised { message: message.into(), trace: trace.into() }
    }
}
