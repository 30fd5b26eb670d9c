//! The model side of the loop: a provider-neutral conversation, the [`Model`] trait, and one module per
//! wire format.

pub mod anthropic;
pub mod body;
mod builder;
mod config;
pub(crate) mod http;
pub mod limits;
pub mod openai_chat;
pub mod openai_responses;
pub mod pricing;
pub mod retry;
pub mod settings;
pub mod sse;
pub mod strict;
pub mod text_calls;
pub mod window;

pub use config::{ModelConfig, Wire};
pub use limits::WireLimits;
pub use pricing::{Price, PriceTable};
pub use settings::{ModelSettings, ToolChoice};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::error::ModelError;
use crate::tools::ToolSpec;

/// Token counts, per request and summed per run. Sums saturate at `u64::MAX`: counts are the
/// provider's word, and a huge one must stop a token budget, not wrap past it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Model requests made.
    pub requests: u64,
    /// Input tokens (not read from the prompt cache).
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read_tokens: u64,
    /// Input tokens written to the prompt cache.
    pub cache_write_tokens: u64,
}

impl Usage {
    /// Adds `other`, each count saturating.
    pub fn add(&mut self, other: &Usage) {
        self.requests = self.requests.saturating_add(other.requests);
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_read_tokens = self.cache_read_tokens.saturating_add(other.cache_read_tokens);
        self.cache_write_tokens = self.cache_write_tokens.saturating_add(other.cache_write_tokens);
    }

    /// Input and output tokens, saturating.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

/// A tool call the model asked for. `arguments` is the raw JSON text the model wrote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id, as the model gave it.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, as the model wrote them (JSON text).
    pub arguments: String,
    /// The call was read from the answer's text, not sent as a call by the server (the Chat Completions
    /// wire's `text_tool_calls` setting, [`text_calls`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub from_text: bool,
}

/// One entry of the conversation, independent of any wire.
///
/// `Provider` holds items the provider produced and answered itself during the assistant's turn (its
/// own tool search under the `native` load strategy, SPEC §4): kept as they came and sent back
/// verbatim, before the assistant message that follows them, on the wire named by `wire` (`anthropic`:
/// content blocks, `openai_responses`: input items). Other wires leave them out. They are not ambit
/// tool calls: nothing of them reaches the gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// `parts`, when there are any, are the message's content (text, images, files:
    /// [`crate::content::Part`]) and `content` their text view ([`crate::content::text_view`]), which is
    /// what guardrails, hooks, titles and summaries read.
    User {
        /// The text (with parts: their text view).
        content: String,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        /// Text, images and files, when the message has more than text.
        parts: Vec<crate::content::Part>,
    },
    /// What the model said: text, tool calls, or both.
    Assistant {
        /// The text, if any.
        content: Option<String>,
        /// The tool calls, in order.
        tool_calls: Vec<ToolCall>,
    },
    /// `parts`, when there are any, are the result's content (a tool that returned images,
    /// [`crate::content::tool_content`]) and `content` their text view.
    Tool {
        /// The id of the call answered.
        call_id: String,
        /// The tool's name.
        name: String,
        /// What the model reads (with parts: their text view).
        content: String,
        /// Whether the call failed.
        is_error: bool,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        /// Images the tool returned, with its text.
        parts: Vec<crate::content::Part>,
    },
    /// Items a provider answered itself (server-side tools, reasoning), kept verbatim for that wire.
    Provider {
        /// The wire the items belong to.
        wire: String,
        /// The items, in order.
        items: Vec<serde_json::Value>,
    },
}

impl Message {
    /// A user message of text.
    pub fn user(content: impl Into<String>) -> Message {
        Message::User { content: content.into(), parts: Vec::new() }
    }

    /// A user message of parts (text, images, files); its `content` is their text view.
    pub fn user_parts(parts: Vec<crate::content::Part>) -> Message {
        Message::User { content: crate::content::text_view(&parts), parts }
    }

    /// A tool's result of text.
    pub fn tool(
        call_id: impl Into<String>,
        name: impl Into<String>,
        content: impl Into<String>,
        is_error: bool,
    ) -> Message {
        Message::Tool {
            call_id: call_id.into(),
            name: name.into(),
            content: content.into(),
            is_error,
            parts: Vec::new(),
        }
    }
}

/// Everything one model request carries.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ModelRequest {
    /// The system prompt (with the tool catalog and the other per-turn blocks).
    pub instructions: Option<String>,
    /// The conversation.
    pub messages: Vec<Message>,
    /// The tools offered.
    pub tools: Vec<ToolSpec>,
    /// The final answer's type, for a wire with native structured output
    /// ([`Model::native_structured_output`]); `None`: a free answer.
    pub output: Option<StructuredOutput>,
}

/// What a request asks of a wire's native structured output: the answer is JSON matching `schema`.
#[derive(Debug, Clone, PartialEq)]
pub struct StructuredOutput {
    /// The name the schema is sent under.
    pub name: String,
    /// The JSON Schema the answer must match.
    pub schema: serde_json::Value,
}

/// Why the model stopped answering, the same on every wire (each wire's own words in brackets).
///
/// In the run result ([`crate::RunResult::stop_reason`]) and every `model_response` event. A tool call
/// cut by [`StopReason::Length`] never runs: the run ends with [`crate::Error::OutputTruncated`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The model ended its answer (`stop`, `end_turn`, `stop_sequence`, `completed`).
    #[default]
    End,
    /// The model asked for tool calls (`tool_calls`, `tool_use`).
    ToolCalls,
    /// The answer was cut by the output token limit (`length`, `max_tokens`, `max_output_tokens`) or the
    /// context window (`model_context_window_exceeded`).
    Length,
    /// The provider's content filter cut or withheld the answer (`content_filter`).
    ContentFilter,
    /// The model refused (`refusal`; a Chat Completions or Responses answer carrying a refusal).
    Refusal,
    /// Any other reason a provider gave (`pause_turn`, an unknown value, none at all).
    Other,
}

impl StopReason {
    /// The reason's name, as in events and every binding: `end`, `tool_calls`, `length`,
    /// `content_filter`, `refusal` or `other`.
    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::End => "end",
            StopReason::ToolCalls => "tool_calls",
            StopReason::Length => "length",
            StopReason::ContentFilter => "content_filter",
            StopReason::Refusal => "refusal",
            StopReason::Other => "other",
        }
    }
}

/// The model's answer to one request.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelResponse {
    /// The provider's id for the answer (empty when it gave none).
    pub id: String,
    /// The text, if any.
    pub text: Option<String>,
    /// The tool calls, in order.
    pub tool_calls: Vec<ToolCall>,
    /// Why the model stopped.
    pub stop: StopReason,
    /// The request's token counts.
    pub usage: Usage,
}

/// A model's answer with the items the provider answered itself (see [`Message::Provider`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ModelReply {
    /// The answer.
    pub response: ModelResponse,
    /// The wire the items belong to (`anthropic`, `openai_responses`); empty when there are none.
    pub wire: &'static str,
    /// Server-side blocks or items, verbatim, in the order they came.
    pub provider_items: Vec<serde_json::Value>,
}

/// Where a streaming wire hands each piece of text as it arrives.
pub type TextSink<'a> = dyn Fn(&str) + Send + Sync + 'a;

/// A model reachable over some wire.
#[async_trait]
pub trait Model: Send + Sync {
    /// The model's name as the provider knows it.
    fn name(&self) -> &str;
    /// The longest tool name the wire accepts, in bytes (SPEC §3): 64 on Chat Completions, 128 on the
    /// Anthropic Messages and OpenAI Responses wires, or less where an endpoint holds names shorter.
    /// Longer names reach the model cut to fit, as [`crate::tools::wire_name::wire_name`] says.
    fn max_tool_name_bytes(&self) -> usize {
        crate::tools::wire_name::CHAT_COMPLETIONS_LIMIT
    }
    /// How many tokens the model's context window holds: its `context_window` setting, else its
    /// family's default ([`window::default_context_window`]). A session's auto-compaction fires at a
    /// share of it.
    fn context_window(&self) -> u64 {
        window::default_context_window(self.name())
    }
    /// Answers `request`.
    async fn respond(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError>;
    /// Like [`Model::respond`], handing text to `sink` as it arrives when the model streams. A model
    /// that does not stream answers whole (the default).
    async fn respond_streaming(
        &self,
        request: &ModelRequest,
        sink: &TextSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let response = self.respond(request).await?;
        if let Some(t) = response.text.as_deref().filter(|t| !t.is_empty()) {
            sink(t);
        }
        Ok(response)
    }

    /// Whether the provider searches and loads deferred tools itself for this model (SPEC §4, the
    /// `native` load strategy): the Anthropic Messages wire on Claude Opus / Sonnet 4.5 and later, the
    /// OpenAI Responses wire on GPT-5.4 and later. Elsewhere `native` falls back to the local search.
    fn native_tool_search(&self) -> bool {
        false
    }

    /// Whether the wire asks for a typed final answer itself ([`ModelRequest::output`]): Chat Completions
    /// `response_format` and Responses `text.format`. Elsewhere the loop offers a `final_answer` tool.
    fn native_structured_output(&self) -> bool {
        false
    }

    /// Like [`Model::respond_streaming`] (with a sink) or [`Model::respond`] (without), with the items
    /// the provider answered itself, which the loop keeps in the conversation as a
    /// [`Message::Provider`]. The default has none.
    async fn respond_with_items(
        &self,
        request: &ModelRequest,
        sink: Option<&TextSink<'_>>,
    ) -> Result<ModelReply, ModelError> {
        let response = match sink {
            Some(sink) => self.respond_streaming(request, sink).await?,
            None => self.respond(request).await?,
        };
        Ok(ModelReply { response, wire: "", provider_items: Vec::new() })
    }
}

/// A tool call's arguments as a wire carries them: the JSON text the wire specifies, as it is; a server
/// that sends the object itself instead of its text is read as that object (never replaced by `{}`);
/// absent or `null` is no arguments. Any other value is kept as its JSON text, so the argument rule
/// refuses it by name instead of the call silently running without it.
pub(crate) fn arguments_text(value: Option<&serde_json::Value>) -> String {
    match value {
        None | Some(serde_json::Value::Null) => "{}".to_string(),
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}
