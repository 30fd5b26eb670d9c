//! The Anthropic Messages wire (`POST {base_url}/messages`, base URL `https://api.anthropic.com/v1` by
//! default), streamed (SSE) or not.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::body::{RequestBody, ToolShape, WireTool};

use super::http::{Endpoint, count, json_body, truncate};
use super::limits::{WireLimits, index_below, over};
use super::openai_chat::env_key;
use super::sse::SseEvent;
use super::{Message, Model, ModelReply, ModelRequest, ModelResponse, StopReason, TextSink, ToolCall, Usage};
use crate::content::Part;
use crate::error::ModelError;

/// The API version sent in `anthropic-version`.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// `max_tokens` when none is set (the wire requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 4096;
/// The wire's name on a [`Message::Provider`].
pub const WIRE: &str = "anthropic";
/// The server tool a request with deferred tools carries (SPEC §4 `native`): Claude searches the
/// deferred definitions in natural language (BM25) and the API loads what it finds.
pub const TOOL_SEARCH_TYPE: &str = "tool_search_tool_bm25_20251119";
/// The name of Anthropic's server-side tool search (BM25) tool.
pub const TOOL_SEARCH_NAME: &str = "tool_search_tool_bm25";
/// The beta the tool search tool was introduced under, sent with a request that uses it.
pub const TOOL_SEARCH_BETA: &str = "advanced-tool-use-2025-11-20";

/// Whether the provider's tool search serves `model`: Claude Opus and Sonnet 4.5 and later, any
/// Claude 5 or later (by name, dated or not: `claude-sonnet-4-5`, `claude-opus-4-5-20251101`).
pub fn supports_tool_search(model: &str) -> bool {
    match claude_version(model) {
        Some((family, major, minor)) => major >= 5 || (major == 4 && minor >= 5 && family != "haiku"),
        None => false,
    }
}

/// A Claude model's family (`opus`, `sonnet`, `haiku`) and version, by name: after the family
/// (`claude-sonnet-4-5`, `claude-opus-4-20250514`: 4.0) or before it (`claude-3-5-haiku-20241022`: 3.5).
/// A date is never a version.
pub fn claude_version(model: &str) -> Option<(&'static str, u32, u32)> {
    let m = model.to_ascii_lowercase();
    let small = |p: &str| p.parse::<u32>().ok().filter(|n| *n < 100);
    for family in ["opus", "sonnet", "haiku"] {
        for (at, _) in m.match_indices(family) {
            let rest = m[at + family.len()..].strip_prefix('-').unwrap_or("");
            let mut parts = rest.split(['-', '.', '@', ':']);
            if let Some(major) = parts.next().and_then(small) {
                return Some((family, major, parts.next().and_then(small).unwrap_or(0)));
            }
            // The older naming: the version before the family (`claude-3-5-haiku`, `claude-3-opus`).
            let before: Vec<u32> = m[..at].split(['-', '.']).filter(|p| !p.is_empty()).filter_map(small).collect();
            if let Some(&major) = before.first() {
                return Some((family, major, before.get(1).copied().unwrap_or(0)));
            }
        }
    }
    None
}

/// The fewest tokens a prefix must have for the API to cache it on `model` (Anthropic's prompt-caching
/// documentation): 4,096 on Opus 4.5 and later and on Haiku 4.5 and later; 2,048 on Sonnet 4.6 and later
/// and on Haiku 3 and 3.5; 1,024 on the other Opus and Sonnet models and on any model not known by name.
pub fn min_cacheable_tokens(model: &str) -> u64 {
    match claude_version(model) {
        Some(("opus", major, minor)) if (major, minor) >= (4, 5) => 4096,
        Some(("haiku", major, _)) if major >= 4 => 4096,
        Some(("haiku", _, _)) => 2048,
        Some(("sonnet", major, minor)) if (major, minor) >= (4, 6) => 2048,
        _ => 1024,
    }
}

/// The bytes taken to hold a token when a prefix is measured against [`min_cacheable_tokens`]: 2, fewer
/// than any tokenizer's average (English runs about 4 bytes a token, JSON about 3), so the estimate errs
/// high. Marking a prefix below the minimum costs nothing but a breakpoint; leaving a cacheable one
/// unmarked would cost its reads.
pub const BYTES_PER_TOKEN_ESTIMATE: u64 = 2;

/// A model on the Anthropic Messages wire.
#[derive(Debug, Clone)]
pub struct Anthropic {
    endpoint: Endpoint,
    max_tokens: u32,
}

impl Anthropic {
    /// A model by name. The base URL and key default to `ANTHROPIC_BASE_URL` (with `/v1` added) and
    /// `ANTHROPIC_API_KEY`, else `https://api.anthropic.com/v1` and no key.
    pub fn new(model: impl Into<String>) -> Self {
        let base = env_key("ANTHROPIC_BASE_URL")
            .map(|b| format!("{}/v1", b.trim_end_matches('/')))
            .unwrap_or_else(|| "https://api.anthropic.com/v1".to_string());
        Anthropic {
            endpoint: Endpoint::new(model.into(), base, env_key("ANTHROPIC_API_KEY")),
            max_tokens: DEFAULT_MAX_TOKENS,
        }
    }

    super::builder::endpoint_builders!(wire: "anthropic", name_limit: LONG_WIRE_LIMIT);

    /// The most tokens one answer may have (default [`DEFAULT_MAX_TOKENS`]).
    pub fn max_tokens(mut self, n: u32) -> Self {
        self.max_tokens = n;
        self
    }

    /// The sampling and tool-use settings every request carries ([`ModelSettings`]); a value out of range,
    /// or a setting this wire lacks, is a configuration error naming it and the wire.
    ///
    /// [`ModelSettings`]: crate::model::ModelSettings
    ///
    /// A `thinking_budget` must be less than the answer's `max_tokens` (`max_output_tokens`, else
    /// [`Anthropic::max_tokens`]: set that first).
    pub fn settings(mut self, settings: crate::model::ModelSettings) -> Result<Self, crate::Error> {
        settings.check(Some(crate::model::Wire::Anthropic)).map_err(crate::model::settings::config_error)?;
        let max = settings.max_output_tokens.unwrap_or(self.max_tokens);
        if let Some(budget) = settings.thinking_budget.filter(|b| *b >= max) {
            return Err(crate::model::settings::config_error(format!(
                "thinking_budget ({budget}) must be less than max_tokens ({max}), which holds the thinking and the answer"
            )));
        }
        self.endpoint.settings = settings;
        Ok(self)
    }
}

/// A content part as a Messages content block: `text`, `image` (a `base64` or `url` source; a `data:`
/// URL becomes a `base64` source) or `document` (a PDF as a `base64` source, text as a `text` source).
fn anthropic_part(part: &Part) -> Value {
    match part {
        Part::Text { text } => json!({"type": "text", "text": text}),
        Part::Image { media_type, data } => {
            json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}})
        }
        Part::ImageUrl { url } => match url.strip_prefix("data:").and_then(|r| r.split_once(";base64,")) {
            Some((media_type, data)) => {
                json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}})
            }
            None => json!({"type": "image", "source": {"type": "url", "url": url}}),
        },
        Part::File { media_type, filename, data } if media_type == "text/plain" => {
            use base64::Engine as _;
            let bytes = base64::engine::general_purpose::STANDARD.decode(data).unwrap_or_default();
            let text = String::from_utf8_lossy(&bytes);
            json!({"type": "document", "title": filename,
                   "source": {"type": "text", "media_type": "text/plain", "data": text}})
        }
        Part::File { media_type, filename, data } => json!({"type": "document", "title": filename,
            "source": {"type": "base64", "media_type": media_type, "data": data}}),
    }
}

/// The request body, exactly as the Messages API takes it. Tool results go back as `tool_result` blocks
/// in a user message; consecutive entries of one role are merged, as the wire wants roles to alternate.
pub fn request_body(model: &str, max_tokens: u32, req: &ModelRequest, stream: bool) -> Value {
    request(model, max_tokens, req, stream).to_value()
}

/// The request body, its tools written from the request's specs when it is serialized.
pub fn request<'a>(model: &str, max_tokens: u32, req: &'a ModelRequest, stream: bool) -> RequestBody<'a> {
    let mut messages: Vec<(String, Vec<Value>)> = Vec::new();
    let mut push = |role: &str, blocks: Vec<Value>| {
        if blocks.is_empty() {
            return;
        }
        match messages.last_mut() {
            Some((r, b)) if r == role => b.extend(blocks),
            _ => messages.push((role.to_string(), blocks)),
        }
    };
    for m in &req.messages {
        match m {
            Message::User { parts, .. } if !parts.is_empty() => {
                push("user", parts.iter().map(anthropic_part).collect())
            }
            Message::User { content, .. } => push("user", vec![json!({"type": "text", "text": content})]),
            Message::Assistant { content, tool_calls } => {
                let mut blocks = Vec::new();
                if let Some(t) = content.as_deref().filter(|t| !t.is_empty()) {
                    blocks.push(json!({"type": "text", "text": t}));
                }
                for c in tool_calls {
                    let input = serde_json::from_str::<Value>(&c.arguments)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| Value::Object(Map::new()));
                    blocks.push(json!({"type": "tool_use", "id": c.id, "name": c.name, "input": input}));
                }
                push("assistant", blocks);
            }
            Message::Tool { call_id, content, is_error, parts, .. } => {
                let content =
                    if parts.is_empty() { json!(content) } else { parts.iter().map(anthropic_part).collect() };
                let mut block = json!({"type": "tool_result", "tool_use_id": call_id, "content": content});
                if *is_error {
                    block["is_error"] = json!(true);
                }
                push("user", vec![block]);
            }
            // The server's own blocks go back as they came, in the assistant message they belong to.
            Message::Provider { wire, items } if wire == WIRE => push("assistant", items.clone()),
            Message::Provider { .. } => {}
        }
    }
    let messages: Vec<Value> =
        messages.into_iter().map(|(role, content)| json!({"role": role, "content": content})).collect();
    let mut fields = Map::new();
    fields.insert("model".into(), json!(model));
    fields.insert("max_tokens".into(), json!(max_tokens));
    fields.insert("messages".into(), Value::Array(messages));
    if let Some(instructions) = &req.instructions {
        fields.insert("system".into(), json!(instructions));
    }
    if stream {
        fields.insert("stream".into(), json!(true));
    }
    let mut tools = Vec::with_capacity(req.tools.len() + 1);
    if req.tools.iter().any(|t| t.defer_loading) {
        tools.push(WireTool::Fixed(json!({"type": TOOL_SEARCH_TYPE, "name": TOOL_SEARCH_NAME})));
    }
    tools.extend(req.tools.iter().map(|t| WireTool::Function(ToolShape::Anthropic, t)));
    RequestBody { fields, tools, cache_last_tool: None, strict: false }
}

/// The `cache_control` of a prompt-caching breakpoint.
fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

/// Prompt caching of the stable prefix (on by default): a breakpoint on the last tool and one on the
/// system prompt (the instructions, with the deferred tools' catalog after them), which the API caches
/// in that order (tools, then system). The conversation after them changes every turn and is not marked.
/// A breakpoint goes only where the prefix up to it may reach `min_tokens` ([`min_cacheable_tokens`],
/// estimated at [`BYTES_PER_TOKEN_ESTIMATE`]): the API caches nothing shorter.
pub fn cache_stable_prefix(body: &mut RequestBody<'_>, min_tokens: u64) {
    let need = min_tokens.saturating_mul(BYTES_PER_TOKEN_ESTIMATE);
    // The tools' bytes, counted only up to what is needed.
    let tools = if body.tools.is_empty() { 0 } else { bytes_up_to(&body.tools, need) };
    if !body.tools.is_empty() && tools >= need {
        body.cache_last_tool = Some(ephemeral());
    }
    if let Some(Value::String(system)) = body.fields.get("system")
        && tools.saturating_add(system.len() as u64) >= need
    {
        let block = json!([{"type": "text", "text": system, "cache_control": ephemeral()}]);
        body.fields.insert("system".into(), block);
    }
}

/// How many bytes `value` serializes to, counting no further than `limit`.
fn bytes_up_to(value: &impl serde::Serialize, limit: u64) -> u64 {
    struct Count(u64, u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(buf.len() as u64);
            if self.0 >= self.1 { Err(std::io::Error::other("enough")) } else { Ok(buf.len()) }
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0, limit);
    // Stopped at the limit on purpose: the count so far is the answer.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// Whether a block is one the server produced and answered itself (`server_tool_use`, and its
/// `…_tool_result`, such as `tool_search_tool_result`), or the model's thinking (`thinking` with its
/// `signature`, `redacted_thinking`): kept verbatim for the next request, where the API wants the
/// thinking of the turn that called tools sent back unchanged, first in its assistant message.
fn is_server_block(kind: &str) -> bool {
    kind == "server_tool_use"
        || (kind.ends_with("_tool_result") && kind != "tool_result")
        || kind == "thinking"
        || kind == "redacted_thinking"
}

fn stop_reason(reason: Option<&str>, has_calls: bool) -> StopReason {
    match reason {
        Some("end_turn") | Some("stop_sequence") => StopReason::End,
        Some("tool_use") => StopReason::ToolCalls,
        Some("max_tokens") | Some("model_context_window_exceeded") => StopReason::Length,
        Some("refusal") => StopReason::Refusal,
        _ if has_calls => StopReason::ToolCalls,
        _ => StopReason::Other,
    }
}

fn parse_usage(u: Option<&Value>) -> Usage {
    Usage {
        requests: 1,
        input_tokens: count(u.and_then(|u| u.get("input_tokens"))),
        output_tokens: count(u.and_then(|u| u.get("output_tokens"))),
        cache_read_tokens: count(u.and_then(|u| u.get("cache_read_input_tokens"))),
        cache_write_tokens: count(u.and_then(|u| u.get("cache_creation_input_tokens"))),
    }
}

/// Reads a Messages response body.
pub fn parse_response(body: &Value) -> Result<ModelResponse, ModelError> {
    parse_reply(body).map(|r| r.response)
}

/// Reads a Messages response body, with the server's own blocks (its tool search) verbatim.
pub fn parse_reply(body: &Value) -> Result<ModelReply, ModelError> {
    parse_reply_within(body, &WireLimits::default())
}

/// Like [`parse_reply`], refusing more tool calls than `limits` allow.
pub fn parse_reply_within(body: &Value, limits: &WireLimits) -> Result<ModelReply, ModelError> {
    let bad = |what: &str| ModelError::InvalidResponse(format!("{what} in {}", truncate(&body.to_string(), 300)));
    let blocks = body.get("content").and_then(Value::as_array).ok_or_else(|| bad("no content"))?;
    let mut text: Option<String> = None;
    let mut tool_calls = Vec::new();
    let mut provider_items = Vec::new();
    for b in blocks {
        match b.get("type").and_then(Value::as_str) {
            Some(kind) if is_server_block(kind) => provider_items.push(b.clone()),
            Some("text") => {
                text.get_or_insert_with(String::new).push_str(b.get("text").and_then(Value::as_str).unwrap_or(""))
            }
            Some("tool_use") if tool_calls.len() >= limits.max_tool_calls => {
                return Err(over("the answer's tool calls", "max_tool_calls", limits.max_tool_calls, "calls"));
            }
            Some("tool_use") => tool_calls.push(ToolCall {
                id: b.get("id").and_then(Value::as_str).ok_or_else(|| bad("a tool_use without id"))?.to_string(),
                name: b.get("name").and_then(Value::as_str).ok_or_else(|| bad("a tool_use without name"))?.to_string(),
                arguments: b.get("input").map(Value::to_string).unwrap_or_else(|| "{}".into()),
                from_text: false,
            }),
            _ => {}
        }
    }
    let stop = stop_reason(body.get("stop_reason").and_then(Value::as_str), !tool_calls.is_empty());
    crate::telemetry::response_model(body.get("model"));
    let response = ModelResponse {
        id: body.get("id").and_then(Value::as_str).unwrap_or_default().to_string(),
        text,
        tool_calls,
        stop,
        usage: parse_usage(body.get("usage")),
    };
    Ok(ModelReply { response, wire: if provider_items.is_empty() { "" } else { WIRE }, provider_items })
}

/// Reads a streamed Messages answer: folds the stream's events (`message_start`, `content_block_*`,
/// `message_delta`, `message_stop`) into the message they describe, then reads it like a whole answer.
/// Feed it the events of an [`SseParser`](super::sse::SseParser) until [`push`](Self::push) returns
/// `Ok(false)` (at `message_stop`), then [`finish`](Self::finish). This is the code [`Anthropic`] runs
/// on a streamed answer; it is public so the benchmarks (core/benches/hot_paths.rs) can time it
/// without a connection.
#[derive(Debug, Default)]
pub struct StreamDecoder {
    limits: WireLimits,
    /// The message of `message_start`, with what `message_delta` changed.
    message: Option<Map<String, Value>>,
    /// The content blocks by index; `Null` where none was started.
    blocks: Vec<Value>,
    partial_json: Vec<String>,
    done: bool,
}

/// Appends `t` to the text field `key` of a streamed block, in place: copying the whole text per delta
/// made long answers quadratic.
fn append(block: &mut Map<String, Value>, key: &str, t: &str, index: usize) -> Result<(), ModelError> {
    match block.entry(key) {
        serde_json::map::Entry::Occupied(mut e) => match e.get_mut() {
            Value::String(whole) => whole.push_str(t),
            _ => return Err(misshapen(format!("block {index} has a {key} that is not a string"))),
        },
        serde_json::map::Entry::Vacant(e) => {
            e.insert(Value::String(t.to_string()));
        }
    }
    Ok(())
}

/// A stream that does not have the wire's shape.
fn misshapen(what: String) -> ModelError {
    ModelError::InvalidResponse(what)
}

impl StreamDecoder {
    /// A decoder that refuses a content-block `index` at or past `limits.max_content_blocks`, and
    /// more tool calls than `limits.max_tool_calls`.
    pub fn new(limits: WireLimits) -> Self {
        StreamDecoder { limits, ..Default::default() }
    }

    /// Reads one event; text deltas go to `sink`. Returns whether more events are expected.
    pub fn push(&mut self, event: &SseEvent, sink: &TextSink<'_>) -> Result<bool, ModelError> {
        let data: Value = serde_json::from_str(&event.data).map_err(|err| {
            ModelError::InvalidResponse(format!("an event is not JSON ({err}): {}", truncate(&event.data, 300)))
        })?;
        let name = event.event.as_deref().or_else(|| data.get("type").and_then(Value::as_str)).unwrap_or("");
        self.fold(name, &data, sink)?;
        Ok(!self.done)
    }

    /// The `index` of a `content_block_*` event (0 when absent or `null`), below `max_content_blocks`.
    fn index(&self, data: &Value) -> Result<usize, ModelError> {
        match data.get("index").filter(|i| !i.is_null()) {
            Some(i) => index_below(i, self.limits.max_content_blocks, "max_content_blocks", "a content-block index"),
            None => Ok(0),
        }
    }

    fn fold(&mut self, event: &str, data: &Value, sink: &TextSink<'_>) -> Result<(), ModelError> {
        match event {
            "message_start" => match data.get("message") {
                Some(Value::Object(m)) => self.message = Some(m.clone()),
                _ => return Err(misshapen("a message_start without a message object".into())),
            },
            "content_block_start" => {
                let index = self.index(data)?;
                let block = match data.get("content_block") {
                    Some(b @ Value::Object(_)) => b.clone(),
                    _ => return Err(misshapen(format!("a content_block_start without a block object at {index}"))),
                };
                if self.blocks.len() <= index {
                    self.blocks.resize(index + 1, Value::Null);
                    self.partial_json.resize(index + 1, String::new());
                }
                if let Some(slot) = self.blocks.get_mut(index) {
                    *slot = block;
                }
            }
            "content_block_delta" => {
                let index = self.index(data)?;
                let delta = data.get("delta").unwrap_or(&Value::Null);
                let Some(Value::Object(block)) = self.blocks.get_mut(index) else {
                    return Err(misshapen(format!("a delta for block {index}, never started")));
                };
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        let t = delta.get("text").and_then(Value::as_str).unwrap_or("");
                        append(block, "text", t, index)?;
                        if !t.is_empty() {
                            sink(t);
                        }
                    }
                    // The model's thinking and its signature, kept (never shown as the answer's text).
                    Some("thinking_delta") => {
                        append(block, "thinking", delta.get("thinking").and_then(Value::as_str).unwrap_or(""), index)?
                    }
                    Some("signature_delta") => {
                        append(block, "signature", delta.get("signature").and_then(Value::as_str).unwrap_or(""), index)?
                    }
                    Some("input_json_delta") => {
                        if let Some(partial) = self.partial_json.get_mut(index) {
                            partial.push_str(delta.get("partial_json").and_then(Value::as_str).unwrap_or(""));
                        }
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                let index = self.index(data)?;
                if let Some(Value::Object(block)) = self.blocks.get_mut(index)
                    && matches!(block.get("type").and_then(Value::as_str), Some("tool_use" | "server_tool_use"))
                    && let Some(partial) = self.partial_json.get(index)
                    && !partial.trim().is_empty()
                {
                    let input = serde_json::from_str(partial)
                        .map_err(|e| ModelError::InvalidResponse(format!("streamed tool input is not JSON ({e})")))?;
                    block.insert("input".into(), input);
                }
            }
            "message_delta" => {
                let msg = self.message.get_or_insert_with(Map::new);
                if let Some(d) = data.get("delta").and_then(Value::as_object) {
                    for (k, v) in d {
                        msg.insert(k.clone(), v.clone());
                    }
                }
                if let Some(u) = data.get("usage").and_then(Value::as_object) {
                    let usage = msg.entry("usage").or_insert_with(|| Value::Object(Map::new()));
                    if !usage.is_object() {
                        *usage = Value::Object(Map::new());
                    }
                    if let Value::Object(usage) = usage {
                        for (k, v) in u.iter().filter(|(_, v)| !v.is_null()) {
                            usage.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
            "message_stop" => self.done = true,
            "error" => return Err(super::http::stream_error(data.get("error").unwrap_or(&Value::Null))),
            _ => {}
        }
        Ok(())
    }

    /// The response the events described.
    pub fn finish(self) -> Result<ModelResponse, ModelError> {
        self.finish_reply().map(|r| r.response)
    }

    /// The response the events described, with the server's own blocks.
    pub fn finish_reply(self) -> Result<ModelReply, ModelError> {
        let mut message =
            self.message.ok_or_else(|| ModelError::InvalidResponse("the stream ended without message_start".into()))?;
        if !self.done {
            return Err(ModelError::InvalidResponse("the stream ended without message_stop".into()));
        }
        message.insert("content".into(), Value::Array(self.blocks));
        parse_reply_within(&Value::Object(message), &self.limits)
    }
}

impl super::http::StreamRead for StreamDecoder {
    type Answer = ModelReply;
    fn event(&mut self, event: &SseEvent, sink: &TextSink<'_>) -> Result<bool, ModelError> {
        self.push(event, sink)
    }
    fn answer(self) -> Result<ModelReply, ModelError> {
        self.finish_reply()
    }
}

#[async_trait]
impl Model for Anthropic {
    fn name(&self) -> &str {
        &self.endpoint.model
    }

    fn context_window(&self) -> u64 {
        self.endpoint.context_window.unwrap_or_else(|| super::window::default_context_window(&self.endpoint.model))
    }

    fn max_tool_name_bytes(&self) -> usize {
        self.endpoint.max_tool_name_bytes.unwrap_or(crate::tools::wire_name::LONG_WIRE_LIMIT)
    }

    fn native_tool_search(&self) -> bool {
        supports_tool_search(&self.endpoint.model)
    }

    async fn respond(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        self.respond_streaming(request, &|_| {}).await
    }

    async fn respond_streaming(
        &self,
        request: &ModelRequest,
        sink: &TextSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        self.respond_with_items(request, Some(sink)).await.map(|r| r.response)
    }

    async fn respond_with_items(
        &self,
        request: &ModelRequest,
        sink: Option<&TextSink<'_>>,
    ) -> Result<ModelReply, ModelError> {
        crate::telemetry::provider("anthropic");
        let noop = |_: &str| {};
        let sink: &TextSink<'_> = sink.unwrap_or(&noop);
        let ep = &self.endpoint;
        let mut body = self::request(&ep.model, self.max_tokens, request, ep.stream);
        let limit = self.max_tool_name_bytes();
        let has_tools = !body.tools.is_empty();
        ep.settings.apply(super::Wire::Anthropic, &mut body.fields, has_tools, &request.messages, &|n| {
            crate::tools::wire_name::wire_name(n, limit)
        });
        if ep.settings.prompt_caching != Some(false) {
            cache_stable_prefix(&mut body, min_cacheable_tokens(&ep.model));
        }
        let mut headers = vec![("anthropic-version", ANTHROPIC_VERSION.to_string())];
        if let Some(key) = &ep.api_key {
            headers.push(("x-api-key", key.clone()));
        }
        if request.tools.iter().any(|t| t.defer_loading) {
            headers.push(("anthropic-beta", TOOL_SEARCH_BETA.to_string()));
        }
        let url = ep.url("messages");
        // The JSON tree is dropped once written: only its bytes wait with the request.
        let sent = super::http::encode(&body)?;
        drop(body);
        if !ep.stream {
            let resp = ep.post(&url, &headers, &sent).await?;
            let reply = parse_reply_within(&json_body(resp, ep.limits.max_body_bytes).await?, &ep.limits)?;
            if let Some(t) = reply.response.text.as_deref().filter(|t| !t.is_empty()) {
                sink(t);
            }
            return Ok(reply);
        }
        ep.post_stream(&url, &headers, &sent, sink, || StreamDecoder::new(ep.limits)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ToolSpec;

    #[test]
    fn each_claude_family_has_its_minimum_cacheable_length() {
        for (model, min) in [
            ("claude-opus-4-5-20251101", 4096),
            ("claude-opus-4-6", 4096),
            ("claude-haiku-4-5", 4096),
            ("claude-sonnet-4-6", 2048),
            ("claude-3-5-haiku-20241022", 2048),
            ("claude-3-haiku-20240307", 2048),
            ("claude-sonnet-4-5", 1024),
            ("claude-sonnet-4-20250514", 1024),
            ("claude-opus-4-1", 1024),
            ("claude-3-7-sonnet-latest", 1024),
            ("some-proxy-model", 1024),
        ] {
            assert_eq!(min_cacheable_tokens(model), min, "{model}");
        }
    }

    /// A breakpoint goes where the prefix up to it may reach the model's minimum, never below it: the
    /// tools' own breakpoint by the tools' bytes, the system prompt's by the tools' and its own.
    #[test]
    fn a_prefix_below_the_minimum_is_not_marked() {
        let spec = ToolSpec::new("get_weather", "Current weather.", json!({"type": "object"}));
        let req = |system: &str| ModelRequest {
            instructions: Some(system.to_string()),
            messages: vec![Message::user("hi")],
            tools: vec![spec.clone()],
            output: None,
        };
        let marked = |system: &str, min: u64| {
            let r = req(system);
            let mut body = request("m", 64, &r, false);
            cache_stable_prefix(&mut body, min);
            let v = body.to_value();
            (v["tools"][0].get("cache_control").is_some(), v["system"].is_array())
        };
        let tool_bytes = serde_json::to_vec(&request("m", 64, &req(""), false).tools).unwrap().len() as u64;
        let need = 1024 * BYTES_PER_TOKEN_ESTIMATE;
        let just = "x".repeat((need - tool_bytes) as usize);
        let short = "x".repeat((need - tool_bytes - 1) as usize);
        assert_eq!(marked("short", 1024), (false, false), "a tiny prefix is not marked");
        assert_eq!(marked(&short, 1024), (false, false), "one byte short of the minimum");
        assert_eq!(marked(&just, 1024), (false, true), "the system prompt brings the prefix to the minimum");
        assert_eq!(marked(&just, 2048), (false, false), "the same prefix is short on a model with a higher minimum");
        // The tools alone long enough: both breakpoints (negative control of the cut).
        assert_eq!(marked("s", (tool_bytes / BYTES_PER_TOKEN_ESTIMATE).max(1)), (true, true));
    }

    #[test]
    fn tool_results_merge_into_one_user_message() {
        let req = ModelRequest {
            instructions: Some("be brief".into()),
            messages: vec![
                Message::user("hi"),
                Message::Assistant {
                    content: Some("let me look".into()),
                    tool_calls: vec![
                        ToolCall { id: "t1".into(), name: "f".into(), arguments: "{\"x\":1}".into(), from_text: false },
                        ToolCall { id: "t2".into(), name: "f".into(), arguments: "{}".into(), from_text: false },
                    ],
                },
                Message::Tool {
                    call_id: "t1".into(),
                    name: "f".into(),
                    content: "ok".into(),
                    is_error: false,
                    parts: Vec::new(),
                },
                Message::Tool {
                    call_id: "t2".into(),
                    name: "f".into(),
                    content: "bad".into(),
                    is_error: true,
                    parts: Vec::new(),
                },
            ],
            tools: vec![ToolSpec::new("f", "does f", json!({"type": "object"}))],
            ..Default::default()
        };
        let b = request_body("claude", 100, &req, true);
        assert_eq!(b["system"], "be brief");
        assert_eq!(b["stream"], true);
        assert_eq!(b["messages"].as_array().unwrap().len(), 3);
        assert_eq!(b["messages"][1]["content"][1]["input"], json!({"x": 1}));
        assert_eq!(
            b["messages"][2]["content"][1],
            json!({"type": "tool_result", "tool_use_id": "t2", "content": "bad", "is_error": true})
        );
        assert_eq!(b["tools"][0]["input_schema"], json!({"type": "object"}));
    }

    fn native_search_blocks() -> Vec<Value> {
        vec![
            json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "tool_search_tool_bm25", "input": {"query": "forecast"}}),
            json!({"type": "tool_search_tool_result", "tool_use_id": "srvtoolu_1", "content": {
                "type": "tool_search_tool_search_result",
                "tool_references": [{"type": "tool_reference", "tool_name": "get_forecast"}]}}),
        ]
    }

    #[test]
    fn deferred_tools_ship_with_the_search_tool_and_server_blocks_go_back() {
        let mut forecast = ToolSpec::new("get_forecast", "Tomorrow.", json!({"type": "object"}));
        forecast.defer_loading = true;
        let req = ModelRequest {
            instructions: Some("be brief".into()),
            messages: vec![
                Message::user("forecast?"),
                Message::Provider { wire: WIRE.into(), items: native_search_blocks() },
                Message::Provider { wire: "openai_responses".into(), items: vec![json!({"type": "tool_search_call"})] },
                Message::Assistant {
                    content: None,
                    tool_calls: vec![ToolCall {
                        id: "toolu_1".into(),
                        name: "get_forecast".into(),
                        arguments: "{}".into(),
                        from_text: false,
                    }],
                },
                Message::Tool {
                    call_id: "toolu_1".into(),
                    name: "get_forecast".into(),
                    content: "rain".into(),
                    is_error: false,
                    parts: Vec::new(),
                },
            ],
            tools: vec![ToolSpec::new("get_weather", "Now.", json!({"type": "object"})), forecast],
            ..Default::default()
        };
        let b = request_body("claude-sonnet-4-5", 100, &req, false);
        assert_eq!(b["tools"][0], json!({"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}));
        assert!(b["tools"][1].get("defer_loading").is_none());
        assert_eq!(b["tools"][2]["defer_loading"], true);
        assert_eq!(b["tools"][2]["input_schema"], json!({"type": "object"}));
        // The server's blocks, verbatim, then the call, in one assistant message; the other wire's left out.
        let assistant = &b["messages"][1];
        assert_eq!(assistant["role"], "assistant");
        let mut want = native_search_blocks();
        want.push(json!({"type": "tool_use", "id": "toolu_1", "name": "get_forecast", "input": {}}));
        assert_eq!(assistant["content"], Value::Array(want));
        assert_eq!(b["messages"].as_array().unwrap().len(), 3);
        // Without deferred tools, no search tool.
        let plain = ModelRequest { tools: vec![req.tools[0].clone()], ..req };
        assert_eq!(request_body("m", 100, &plain, false)["tools"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn server_blocks_are_kept_apart_whole_and_streamed() {
        let mut content = native_search_blocks();
        content.push(json!({"type": "text", "text": "Found it."}));
        content.push(json!({"type": "tool_use", "id": "toolu_1", "name": "get_forecast", "input": {"city": "Oslo"}}));
        let body = json!({"id": "msg_1", "content": content, "stop_reason": "tool_use", "usage": {}});
        let r = parse_reply(&body).unwrap();
        assert_eq!(r.wire, WIRE);
        assert_eq!(r.provider_items, native_search_blocks());
        assert_eq!(r.response.text.as_deref(), Some("Found it."));
        assert_eq!(r.response.tool_calls.len(), 1);
        assert_eq!(r.response.tool_calls[0].name, "get_forecast");

        let mut f = StreamDecoder::default();
        let sink = |_: &str| {};
        let blocks = native_search_blocks();
        let events = [
            ("message_start", json!({"message": {"id": "msg_2", "content": [], "usage": {"input_tokens": 3}}})),
            (
                "content_block_start",
                json!({"index": 0, "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "tool_search_tool_bm25", "input": {}}}),
            ),
            (
                "content_block_delta",
                json!({"index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"query\": "}}),
            ),
            (
                "content_block_delta",
                json!({"index": 0, "delta": {"type": "input_json_delta", "partial_json": "\"forecast\"}"}}),
            ),
            ("content_block_stop", json!({"index": 0})),
            ("content_block_start", json!({"index": 1, "content_block": blocks[1]})),
            ("content_block_stop", json!({"index": 1})),
            (
                "content_block_start",
                json!({"index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "get_forecast", "input": {}}}),
            ),
            ("content_block_stop", json!({"index": 2})),
            ("message_delta", json!({"delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 9}})),
            ("message_stop", json!({})),
        ];
        for (e, d) in events {
            f.fold(e, &d, &sink).unwrap();
        }
        let r = f.finish_reply().unwrap();
        assert_eq!(r.provider_items, blocks);
        assert_eq!(r.response.tool_calls[0].arguments, "{}");
        assert_eq!(r.response.stop, StopReason::ToolCalls);
    }

    #[test]
    fn tool_search_models() {
        for m in [
            "claude-sonnet-4-5",
            "claude-opus-4-5-20251101",
            "claude-sonnet-4-6",
            "claude-opus-5",
            "anthropic.claude-sonnet-4-5-20250929-v1:0",
        ] {
            assert!(supports_tool_search(m), "{m}");
        }
        for m in
            ["claude-haiku-4-5", "claude-sonnet-4-20250514", "claude-3-5-sonnet-20241022", "claude-opus-4-1", "gpt-5.4"]
        {
            assert!(!supports_tool_search(m), "{m}");
        }
    }

    #[test]
    fn a_stream_folds_into_the_message() {
        let mut f = StreamDecoder::default();
        let got = std::sync::Mutex::new(String::new());
        let sink = |t: &str| got.lock().unwrap().push_str(t);
        let events = [
            (
                "message_start",
                json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "stop_reason": null, "usage": {"input_tokens": 10, "output_tokens": 1, "cache_read_input_tokens": 4, "cache_creation_input_tokens": 2}}}),
            ),
            ("content_block_start", json!({"index": 0, "content_block": {"type": "text", "text": ""}})),
            ("content_block_delta", json!({"index": 0, "delta": {"type": "text_delta", "text": "Hel"}})),
            ("content_block_delta", json!({"index": 0, "delta": {"type": "text_delta", "text": "lo"}})),
            ("content_block_stop", json!({"index": 0})),
            (
                "content_block_start",
                json!({"index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}}),
            ),
            (
                "content_block_delta",
                json!({"index": 1, "delta": {"type": "input_json_delta", "partial_json": "{\"a\":"}}),
            ),
            ("content_block_delta", json!({"index": 1, "delta": {"type": "input_json_delta", "partial_json": "2}"}})),
            ("content_block_stop", json!({"index": 1})),
            (
                "message_delta",
                json!({"delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 7}}),
            ),
            ("message_stop", json!({})),
        ];
        for (e, d) in events {
            f.fold(e, &d, &sink).unwrap();
        }
        let r = f.finish().unwrap();
        assert_eq!(*got.lock().unwrap(), "Hello");
        assert_eq!(r.text.as_deref(), Some("Hello"));
        assert_eq!(r.tool_calls[0].arguments, "{\"a\":2}");
        assert_eq!(r.stop, StopReason::ToolCalls);
        assert_eq!(
            (r.usage.input_tokens, r.usage.output_tokens, r.usage.cache_read_tokens, r.usage.cache_write_tokens),
            (10, 7, 4, 2)
        );
    }
}
