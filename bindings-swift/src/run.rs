//! The model settings, the loop's limits, and a run's events, as UniFFI types.

use std::collections::HashMap;
use std::sync::Arc;

use crate::{CoreError, RunResult, StopReason, Usage, guard, guard_async};

/// The three wires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum Wire {
    OpenAiChat,
    Anthropic,
    OpenAiResponses,
}

/// Which model, on which wire, where, and how.
#[derive(Debug, Clone, uniffi::Record)]
pub struct ModelSettings {
    pub wire: Wire,
    pub model: String,
    /// The provider's base URL (`…/v1`); absent: the wire's environment variable, else the vendor's URL.
    #[uniffi(default = None)]
    pub base_url: Option<String>,
    #[uniffi(default = None)]
    pub api_key: Option<String>,
    /// Stream answers (SSE).
    #[uniffi(default = false)]
    pub stream: bool,
    /// The limit on one HTTP request in seconds, retries not included (default 600).
    #[uniffi(default = None)]
    pub timeout_secs: Option<f64>,
    /// Attempts after the first on 408, 409, 429, 5xx and connection errors, except errors the same request
    /// gets again (default 2); negative or too large, a configuration error naming it.
    #[uniffi(default = None)]
    pub max_retries: Option<i64>,
    /// Anthropic only: the most tokens one answer may have (default 4096); negative or too large, a
    /// configuration error naming it.
    #[uniffi(default = None)]
    pub max_tokens: Option<i64>,
    /// A limit on tool names smaller than the wire's own (64 bytes on Chat Completions, 128 on the
    /// others); above it, or negative, a configuration error naming `max_tool_name_bytes`.
    #[uniffi(default = None)]
    pub max_tool_name_bytes: Option<i64>,
    /// The tokens the context window holds (default: the model family's, `ambit::model::window`);
    /// negative, a configuration error naming `context_window`.
    #[uniffi(default = None)]
    pub context_window: Option<i64>,
    /// The most tokens one answer may have (at least 1): Chat Completions `max_completion_tokens`,
    /// Responses `max_output_tokens`, Anthropic `max_tokens` (the same number as `max_tokens` there).
    #[uniffi(default = None)]
    pub max_output_tokens: Option<i64>,
    /// Sampling temperature, 0 to 2. Not on Anthropic.
    #[uniffi(default = None)]
    pub temperature: Option<f64>,
    /// Nucleus sampling, 0 to 1. Not on Anthropic.
    #[uniffi(default = None)]
    pub top_p: Option<f64>,
    /// Texts that end the answer when written: 1 to 4, none empty. Not on Responses.
    #[uniffi(default = None)]
    pub stop: Option<Vec<String>>,
    /// A seed for repeatable sampling. Chat Completions only.
    #[uniffi(default = None)]
    pub seed: Option<i64>,
    /// Which tool use the model is asked for.
    #[uniffi(default = None)]
    pub tool_choice: Option<ToolChoice>,
    /// Whether the model may ask for several tool calls in one answer.
    #[uniffi(default = None)]
    pub parallel_tool_calls: Option<bool>,
    /// Chat Completions only: whether tool calls a model writes as text are read as calls
    /// (`ambit::model::text_calls`).
    #[uniffi(default = None)]
    pub text_tool_calls: Option<TextToolCalls>,
    /// How hard a reasoning model thinks: `none`, `minimal`, `low`, `medium`, `high`, `xhigh`, `max`
    /// (Anthropic `low` to `max`).
    #[uniffi(default = None)]
    pub reasoning_effort: Option<String>,
    /// Anthropic only: extended thinking with this many tokens (at least 1,024, below the answer's max
    /// tokens).
    #[uniffi(default = None)]
    pub thinking_budget: Option<i64>,
    /// Anthropic only: prompt caching of the stable prefix (`cache_control` on the tools and the system
    /// prompt), on unless `false`.
    #[uniffi(default = None)]
    pub prompt_caching: Option<bool>,
    /// OpenAI wires: strict schemas, on unless `false` (`ambit::model::strict`).
    #[uniffi(default = None)]
    pub strict: Option<bool>,
    /// Responses only: whether the server keeps the response; `false` also asks for the reasoning items'
    /// encrypted content (stateless use).
    #[uniffi(default = None)]
    pub store: Option<bool>,
    /// Headers every request carries, replacing the wire's own of those names (Azure OpenAI's `api-key`,
    /// `OpenAI-Organization`, `OpenAI-Project`); a bad or reserved name is a configuration error naming it.
    #[uniffi(default = None)]
    pub headers: Option<HashMap<String, String>>,
    /// Query parameters every request's URL carries (Azure OpenAI's `api-version`).
    #[uniffi(default = None)]
    pub query: Option<HashMap<String, String>>,
}

/// How an answer's text is read for tool calls (Chat Completions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum TextToolCalls {
    /// Text is text.
    Off,
    /// A call written as text (bare or fenced JSON, `<tool_call>`, `<|python_tag|>`, `[TOOL_CALLS]`) of a
    /// tool offered in that request is read as a call; never when the server sent calls.
    Auto,
    /// As `Auto`, and the server (llama.cpp) is asked to constrain the answer to one call or a JSON string.
    Constrained,
}

impl TextToolCalls {
    fn as_str(self) -> &'static str {
        match self {
            TextToolCalls::Off => "off",
            TextToolCalls::Auto => "auto",
            TextToolCalls::Constrained => "constrained",
        }
    }
}

/// Which tool use the model is asked for. `NoTool` is the wires' `none` (a Swift case named `none`
/// would be taken for `Optional.none`).
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Enum)]
pub enum ToolChoice {
    /// The model decides.
    Auto,
    /// The model must call at least one tool.
    Required,
    /// The model must not call a tool.
    NoTool,
    /// The model must call this tool.
    Tool { name: String },
}

impl ToolChoice {
    /// The core's plain-data form.
    fn to_json(&self) -> serde_json::Value {
        match self {
            ToolChoice::Auto => "auto".into(),
            ToolChoice::Required => "required".into(),
            ToolChoice::NoTool => "none".into(),
            ToolChoice::Tool { name } => serde_json::json!({"name": name}),
        }
    }
}

impl ModelSettings {
    pub(crate) fn build(self) -> Result<Arc<dyn ambit::Model>, ambit::Error> {
        let wire = match self.wire {
            Wire::OpenAiChat => ambit::Wire::OpenaiChat,
            Wire::Anthropic => ambit::Wire::Anthropic,
            Wire::OpenAiResponses => ambit::Wire::OpenaiResponses,
        };
        // The core's plain-data form, read by the core: a bad count is refused there, by name.
        let config = serde_json::json!({
            "wire": wire.as_str(), "model": self.model, "base_url": self.base_url, "api_key": self.api_key,
            "stream": self.stream, "timeout_secs": self.timeout_secs, "max_retries": self.max_retries,
            "max_tokens": self.max_tokens, "max_tool_name_bytes": self.max_tool_name_bytes,
            "context_window": self.context_window,
            "headers": self.headers, "query": self.query,
            "settings": {
                "max_output_tokens": self.max_output_tokens, "stop": self.stop, "seed": self.seed, "tool_choice": self.tool_choice.as_ref().map(ToolChoice::to_json),
                "parallel_tool_calls": self.parallel_tool_calls,
                "text_tool_calls": self.text_tool_calls.map(TextToolCalls::as_str),
                "reasoning_effort": self.reasoning_effort, "thinking_budget": self.thinking_budget,
                "prompt_caching": self.prompt_caching, "strict": self.strict, "store": self.store,
            },
        });
        let mut config = ambit::ModelConfig::from_json(&config.to_string())?;
        // Set directly, not through JSON, where a NaN would become null (absent); the core refuses it.
        config.settings.temperature = self.temperature;
        config.settings.top_p = self.top_p;
        config.build()
    }
}

/// What a model costs per million tokens, in any unit (the cost budget uses the same unit).
#[derive(Debug, Clone, uniffi::Record)]
pub struct Price {
    #[uniffi(default = 0.0)]
    pub input_per_mtok: f64,
    #[uniffi(default = 0.0)]
    pub output_per_mtok: f64,
    #[uniffi(default = 0.0)]
    pub cache_read_per_mtok: f64,
    #[uniffi(default = 0.0)]
    pub cache_write_per_mtok: f64,
}

/// The loop's settings: concurrency within a turn, hard budgets, the checklist.
#[derive(Debug, Clone, Default, uniffi::Record)]
pub struct LoopSettings {
    /// The most tool calls of one turn running at the same time (default 8).
    #[uniffi(default = None)]
    pub max_concurrency: Option<u32>,
    /// The most tokens (input, output, cache-read and cache-write together) a run may use.
    #[uniffi(default = None)]
    pub max_tokens: Option<u64>,
    /// The most a run may cost, by `prices`.
    #[uniffi(default = None)]
    pub max_cost: Option<f64>,
    /// Prices per model name.
    #[uniffi(default)]
    pub prices: HashMap<String, Price>,
    /// The checklist tools and the rule that a turn cannot end while an item is pending or in_progress.
    #[uniffi(default = false)]
    pub checklist: bool,
    /// How many nudges about open items before the run ends anyway (default 3).
    #[uniffi(default = None)]
    pub checklist_nudge_cap: Option<u32>,
    /// Background calls: an optional `background` parameter on every tool; the result arrives later
    /// as its own turn.
    #[uniffi(default = false)]
    pub background: bool,
    /// Seconds a background task may stay silent before it is failed as dead (default 300).
    #[uniffi(default = None)]
    pub heartbeat_secs: Option<f64>,
    /// The scratchpad parameter and tools.
    #[uniffi(default = false)]
    pub scratchpad: bool,
    /// The model takes images: adds `image_render` (as Python `vision=True`, Node `vision: true`).
    #[uniffi(default = false)]
    pub vision: bool,
}

impl LoopSettings {
    pub(crate) fn apply(self, mut b: ambit::AgentBuilder) -> ambit::AgentBuilder {
        if let Some(n) = self.max_concurrency {
            b = b.max_concurrency(n as usize);
        }
        b = b.budget(ambit::Budget { max_tokens: self.max_tokens, max_cost: self.max_cost }).checklist(self.checklist);
        if let Some(n) = self.checklist_nudge_cap {
            b = b.checklist_nudge_cap(n);
        }
        b = b.background(self.background).scratchpad(self.scratchpad);
        if self.vision {
            b = b.vision(true);
        }
        if let Some(s) = self.heartbeat_secs {
            // A bad number becomes a zero window, which the core refuses by name.
            b = b.heartbeat(std::time::Duration::try_from_secs_f64(s).unwrap_or(std::time::Duration::ZERO));
        }
        if !self.prices.is_empty() {
            b = b.prices(
                self.prices
                    .into_iter()
                    .map(|(m, p)| {
                        let price = ambit::Price {
                            input_per_mtok: p.input_per_mtok,
                            output_per_mtok: p.output_per_mtok,
                            cache_read_per_mtok: p.cache_read_per_mtok,
                            cache_write_per_mtok: p.cache_write_per_mtok,
                        };
                        (m, price)
                    })
                    .collect(),
            );
        }
        b
    }
}

/// One event of a run, in the order it happened.
#[derive(Debug, Clone, uniffi::Enum)]
pub enum AgentEvent {
    RunStarted {
        input: String,
    },
    /// A model request is about to be sent (`turn` counts from 1).
    ModelRequest {
        turn: u32,
    },
    /// A piece of the model's text as it streams (the whole text at once on an unstreamed wire).
    TextDelta {
        text: String,
    },
    /// `usage` is this request's; `cost` its cost when the price table has the model; `stop_reason` why
    /// the model stopped.
    ModelResponse {
        turn: u32,
        usage: Usage,
        cost: Option<f64>,
        stop_reason: StopReason,
    },
    /// `from_text`: the call was read from the answer's text (the `text_tool_calls` setting).
    ToolCallRequested {
        id: String,
        name: String,
        arguments_json: String,
        from_text: bool,
    },
    ToolStarted {
        id: String,
        name: String,
    },
    ToolFinished {
        id: String,
        name: String,
        result: String,
        is_error: bool,
    },
    ToolRefused {
        id: String,
        name: String,
        reason: String,
    },
    /// A call was put to the approval handler.
    ApprovalRequested {
        request: crate::policy::ApprovalRequest,
    },
    ChecklistNudge {
        nudge: u32,
        open_items: Vec<String>,
    },
    BackgroundTaskStarted {
        task_id: String,
        call_id: String,
        name: String,
    },
    BackgroundTaskProgress {
        task_id: String,
        note: String,
    },
    BackgroundTaskReported {
        task_id: String,
        name: String,
        result: String,
        is_error: bool,
    },
    /// A guardrail answered: its name, `kind` (`input` or `output`), whether it tripped, and its verdict's
    /// `info` as JSON text.
    GuardrailChecked {
        guardrail: String,
        kind: String,
        tripped: bool,
        info_json: String,
    },
    RunFinished {
        usage: Usage,
        result: RunResult,
    },
    /// An event this version of the binding does not know: its `type` and its JSON.
    Other {
        kind: String,
        json: String,
    },
}

impl From<ambit::Event> for AgentEvent {
    fn from(e: ambit::Event) -> Self {
        use ambit::Event as E;
        match e {
            E::RunStarted { input } => AgentEvent::RunStarted { input },
            E::ModelRequest { turn } => AgentEvent::ModelRequest { turn },
            E::TextDelta { text } => AgentEvent::TextDelta { text },
            E::ModelResponse { turn, usage, cost, stop_reason } => {
                AgentEvent::ModelResponse { turn, usage: usage.into(), cost, stop_reason: stop_reason.into() }
            }
            E::ToolCallRequested { id, name, arguments, from_text } => {
                let arguments_json = match arguments {
                    serde_json::Value::String(raw) => raw,
                    other => other.to_string(),
                };
                AgentEvent::ToolCallRequested { id, name, arguments_json, from_text }
            }
            E::ToolStarted { id, name } => AgentEvent::ToolStarted { id, name },
            E::ToolFinished { id, name, result, is_error } => AgentEvent::ToolFinished { id, name, result, is_error },
            E::ToolRefused { id, name, reason } => AgentEvent::ToolRefused { id, name, reason },
            E::ApprovalRequested { request } => AgentEvent::ApprovalRequested { request: (&request).into() },
            E::ChecklistNudge { nudge, open_items } => AgentEvent::ChecklistNudge { nudge, open_items },
            E::BackgroundTaskStarted { task_id, call_id, name } => {
                AgentEvent::BackgroundTaskStarted { task_id, call_id, name }
            }
            E::BackgroundTaskProgress { task_id, note } => AgentEvent::BackgroundTaskProgress { task_id, note },
            E::BackgroundTaskReported { task_id, name, result, is_error } => {
                AgentEvent::BackgroundTaskReported { task_id, name, result, is_error }
            }
            E::GuardrailChecked { guardrail, kind, tripped, info } => {
                AgentEvent::GuardrailChecked { guardrail, kind, tripped, info_json: info.to_string() }
            }
            E::RunFinished { usage, result } => AgentEvent::RunFinished { usage: usage.into(), result: result.into() },
            other => {
                let json = serde_json::to_value(&other).unwrap_or_default();
                let kind = json.get("type").and_then(|t| t.as_str()).unwrap_or("unknown").to_string();
                AgentEvent::Other { kind, json: json.to_string() }
            }
        }
    }
}

/// The events of one run; the Swift facade turns it into an `AsyncThrowingStream`.
#[derive(uniffi::Object)]
pub struct CoreRunStream {
    pub(crate) feed: ambit::EventFeed,
}

#[uniffi::export(async_runtime = "tokio")]
impl CoreRunStream {
    /// The next event; `nil` at the end; throws the run's error.
    pub async fn next(&self) -> Result<Option<AgentEvent>, CoreError> {
        guard_async(async move {
            match self.feed.next().await {
                Some(Ok(e)) => Ok(Some(e.into())),
                Some(Err(e)) => Err(e.into()),
                None => Ok(None),
            }
        })
        .await
    }

    /// Stops the run: its HTTP request and its tools are dropped.
    pub fn cancel(&self) -> Result<(), CoreError> {
        guard(|| {
            self.feed.cancel();
            Ok(())
        })
    }
}

/// One item of a run's checklist; `status` is pending, in_progress, deferred, completed or canceled.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ChecklistItem {
    pub id: u32,
    pub text: String,
    pub status: String,
    pub reason: Option<String>,
    pub task: Option<String>,
}

impl From<ambit::ChecklistItem> for ChecklistItem {
    fn from(i: ambit::ChecklistItem) -> Self {
        ChecklistItem { id: i.id, text: i.text, status: i.status.as_str().to_string(), reason: i.reason, task: i.task }
    }
}
