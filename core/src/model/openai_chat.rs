//! The OpenAI Chat Completions wire (`POST {base_url}/chat/completions`). Any OpenAI-compatible server
//! (llama.cpp, vLLM, Ollama) works by base URL.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::body::{RequestBody, ToolShape, WireTool};

use super::http::{Endpoint, count, json_body, truncate};
use super::limits::{WireLimits, index_below, over};
use super::sse::SseEvent;
use super::text_calls::{self, TextToolCalls};
use super::{Message, Model, ModelRequest, ModelResponse, StopReason, TextSink, ToolCall, Usage};
use crate::content::Part;
use crate::error::ModelError;

/// A model on the Chat Completions wire.
#[derive(Debug, Clone)]
pub struct OpenAiChat {
    endpoint: Endpoint,
}

impl OpenAiChat {
    /// A model by name. The base URL and key default to `OPENAI_BASE_URL` and `OPENAI_API_KEY`, else
    /// `https://api.openai.com/v1` and no key.
    pub fn new(model: impl Into<String>) -> Self {
        OpenAiChat { endpoint: Endpoint::new(model.into(), openai_base_url(), env_key("OPENAI_API_KEY")) }
    }

    super::builder::endpoint_builders!(wire: "openai_chat", name_limit: CHAT_COMPLETIONS_LIMIT);

    /// The sampling and tool-use settings every request carries ([`ModelSettings`]); a value out of range,
    /// or a setting this wire lacks, is a configuration error naming it and the wire.
    ///
    /// [`ModelSettings`]: crate::model::ModelSettings
    pub fn settings(mut self, settings: crate::model::ModelSettings) -> Result<Self, crate::Error> {
        settings.check(Some(crate::model::Wire::OpenaiChat)).map_err(crate::model::settings::config_error)?;
        self.endpoint.settings = settings;
        Ok(self)
    }

    /// Builds the HTTP client now instead of at the first request.
    pub fn connect(self) -> Result<Self, ModelError> {
        self.endpoint.client()?;
        Ok(self)
    }
}

pub(crate) fn env_key(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|s| !s.trim().is_empty())
}

pub(crate) fn openai_base_url() -> String {
    env_key("OPENAI_BASE_URL").unwrap_or_else(|| "https://api.openai.com/v1".to_string())
}

/// A content part as a Chat Completions content part: `text`, `image_url` (a `data:` URL for bytes) or
/// `file` (its bytes as a `data:` URL in `file_data`).
fn chat_part(part: &Part) -> Value {
    match part {
        Part::Text { text } => json!({"type": "text", "text": text}),
        Part::ImageUrl { url } => json!({"type": "image_url", "image_url": {"url": url}}),
        Part::Image { .. } => json!({"type": "image_url", "image_url": {"url": part.data_url()}}),
        Part::File { filename, .. } => {
            json!({"type": "file", "file": {"filename": filename, "file_data": part.data_url()}})
        }
    }
}

/// The request body for a conversation, exactly as the Chat Completions API takes it.
pub fn request_body(model: &str, req: &ModelRequest, stream: bool) -> Value {
    request(model, req, stream).to_value()
}

/// The request body, its tools written from the request's specs when it is serialized.
pub fn request<'a>(model: &str, req: &'a ModelRequest, stream: bool) -> RequestBody<'a> {
    let mut messages = Vec::with_capacity(req.messages.len() + 1);
    if let Some(instructions) = &req.instructions {
        messages.push(json!({"role": "system", "content": instructions}));
    }
    // Images tool results returned, waiting for the end of the run of tool messages they belong to: a
    // tool message holds text only, so they follow as one user message (the wire has no other place),
    // each result's images after a text that marks them as tool output, not the user's words.
    let mut tool_images: Vec<Value> = Vec::new();
    for m in &req.messages {
        if !matches!(m, Message::Tool { .. }) && !tool_images.is_empty() {
            messages.push(json!({"role": "user", "content": std::mem::take(&mut tool_images)}));
        }
        messages.push(match m {
            Message::User { parts, .. } if !parts.is_empty() => {
                json!({"role": "user", "content": parts.iter().map(chat_part).collect::<Vec<_>>()})
            }
            Message::User { content, .. } => json!({"role": "user", "content": content}),
            Message::Assistant { content, tool_calls } => {
                let mut msg = json!({"role": "assistant", "content": content});
                if !tool_calls.is_empty() {
                    msg["tool_calls"] = tool_calls
                        .iter()
                        .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}))
                        .collect();
                }
                msg
            }
            Message::Tool { call_id, name, content, parts, .. } => {
                if crate::content::has_media(parts) {
                    tool_images.push(json!({"type": "text", "text": format!("[tool output, not the user's words] The images tool {name} returned (call {call_id}):")}));
                    tool_images.extend(parts.iter().filter(|p| !matches!(p, Part::Text { .. })).map(chat_part));
                }
                json!({"role": "tool", "tool_call_id": call_id, "content": content})
            }
            // No server-side tool search on this wire: the native strategy falls back to the local one.
            Message::Provider { .. } => continue,
        });
    }
    if !tool_images.is_empty() {
        messages.push(json!({"role": "user", "content": tool_images}));
    }
    let mut fields = Map::new();
    fields.insert("model".into(), json!(model));
    fields.insert("messages".into(), Value::Array(messages));
    if stream {
        fields.insert("stream".into(), json!(true));
        fields.insert("stream_options".into(), json!({"include_usage": true}));
    }
    if let Some(o) = &req.output {
        // Native structured output: the answer is JSON of the output type (checked by the loop).
        fields.insert(
            "response_format".into(),
            json!({"type": "json_schema", "json_schema": {"name": o.name, "schema": o.schema}}),
        );
    }
    let tools = req.tools.iter().map(|t| WireTool::Function(ToolShape::Chat, t)).collect();
    RequestBody { fields, tools, cache_last_tool: None, strict: false }
}

/// Reads a Chat Completions response body.
pub fn parse_response(body: &Value) -> Result<ModelResponse, ModelError> {
    parse_response_within(body, &WireLimits::default())
}

/// Reads a Chat Completions response body, refusing more tool calls than `limits` allow.
pub fn parse_response_within(body: &Value, limits: &WireLimits) -> Result<ModelResponse, ModelError> {
    let bad = |what: &str| ModelError::InvalidResponse(format!("{what} in {}", truncate(&body.to_string(), 300)));
    let choice = body.get("choices").and_then(|c| c.get(0)).ok_or_else(|| bad("no choices[0]"))?;
    let message = choice.get("message").ok_or_else(|| bad("no choices[0].message"))?;
    let mut text = message.get("content").and_then(Value::as_str).map(str::to_string);
    // A refusal is the answer's text (when there is no other), and its stop reason.
    let refusal = message.get("refusal").and_then(Value::as_str).filter(|r| !r.is_empty());
    if let Some(r) = refusal
        && text.as_deref().is_none_or(str::is_empty)
    {
        text = Some(r.to_string());
    }
    let mut tool_calls = Vec::new();
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        if calls.len() > limits.max_tool_calls {
            return Err(over("the answer's tool calls", "max_tool_calls", limits.max_tool_calls, "calls"));
        }
        for c in calls {
            let f = c.get("function").ok_or_else(|| bad("a tool call without function"))?;
            tool_calls.push(ToolCall {
                id: c.get("id").and_then(Value::as_str).ok_or_else(|| bad("a tool call without id"))?.to_string(),
                name: f.get("name").and_then(Value::as_str).ok_or_else(|| bad("a tool call without name"))?.to_string(),
                arguments: super::arguments_text(f.get("arguments")),
                from_text: false,
            });
        }
    }
    let stop =
        stop_reason(choice.get("finish_reason").and_then(Value::as_str), !tool_calls.is_empty(), refusal.is_some());
    let usage = parse_usage(body.get("usage"));
    crate::telemetry::response_model(body.get("model"));
    Ok(ModelResponse {
        id: body.get("id").and_then(Value::as_str).unwrap_or_default().to_string(),
        text,
        tool_calls,
        stop,
        usage,
    })
}

/// The stop reason of a `finish_reason`; an answer carrying a refusal stopped for it, whatever the
/// finish reason says (OpenAI sends `stop`).
fn stop_reason(finish: Option<&str>, has_calls: bool, refused: bool) -> StopReason {
    match finish {
        Some("length") => StopReason::Length,
        Some("content_filter") => StopReason::ContentFilter,
        _ if refused => StopReason::Refusal,
        Some("stop") => StopReason::End,
        Some("tool_calls") | Some("function_call") => StopReason::ToolCalls,
        _ if has_calls => StopReason::ToolCalls,
        _ => StopReason::Other,
    }
}

fn parse_usage(u: Option<&Value>) -> Usage {
    let cached = count(u.and_then(|u| u.pointer("/prompt_tokens_details/cached_tokens")));
    let written = count(u.and_then(|u| u.pointer("/prompt_tokens_details/cache_write_tokens")));
    Usage {
        requests: 1,
        // Chat Completions counts cache reads and writes inside prompt_tokens; we report them apart.
        input_tokens: count(u.and_then(|u| u.get("prompt_tokens"))).saturating_sub(cached.saturating_add(written)),
        output_tokens: count(u.and_then(|u| u.get("completion_tokens"))),
        cache_read_tokens: cached,
        cache_write_tokens: written,
    }
}

/// Reads a streamed Chat Completions answer: feed it the events of an [`SseParser`](super::sse::SseParser)
/// until [`push`](Self::push) returns `Ok(false)` (at `[DONE]`), then [`finish`](Self::finish). This is
/// the code [`OpenAiChat`] runs on a streamed answer; it is public so the benchmarks
/// (core/benches/hot_paths.rs) can time it without a connection.
#[derive(Debug, Default)]
pub struct StreamDecoder {
    limits: WireLimits,
    id: String,
    text: Option<String>,
    calls: Vec<ToolCall>,
    finish: Option<String>,
    /// The refusal the deltas carried, if any.
    refusal: Option<String>,
    usage: Option<Value>,
    /// Whether a chunk's `model` was recorded (the first that names one).
    model_seen: bool,
}

impl StreamDecoder {
    /// A decoder that refuses a tool-call `index` at or past `limits.max_tool_calls`.
    pub fn new(limits: WireLimits) -> Self {
        StreamDecoder { limits, ..Default::default() }
    }

    /// Reads one event (a `chat.completion.chunk`, or `[DONE]`); text deltas go to `sink`. Returns
    /// whether more events are expected.
    pub fn push(&mut self, event: &SseEvent, sink: &TextSink<'_>) -> Result<bool, ModelError> {
        if event.data.trim() == "[DONE]" {
            return Ok(false);
        }
        let v: Value = serde_json::from_str(&event.data).map_err(|err| {
            ModelError::InvalidResponse(format!("a chunk is not JSON ({err}): {}", truncate(&event.data, 300)))
        })?;
        self.chunk(&v, sink)?;
        Ok(true)
    }

    fn chunk(&mut self, chunk: &Value, sink: &TextSink<'_>) -> Result<(), ModelError> {
        if let Some(e) = chunk.get("error") {
            return Err(super::http::stream_error(e));
        }
        if self.id.is_empty()
            && let Some(id) = chunk.get("id").and_then(Value::as_str)
        {
            self.id = id.to_string();
        }
        if !self.model_seen && chunk.get("model").is_some_and(|m| m.as_str().is_some_and(|m| !m.is_empty())) {
            self.model_seen = true;
            crate::telemetry::response_model(chunk.get("model"));
        }
        if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
            self.usage = Some(u.clone());
        }
        let Some(choice) = chunk.get("choices").and_then(|c| c.get(0)) else { return Ok(()) };
        if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(f.to_string());
        }
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        if let Some(r) = delta.get("refusal").and_then(Value::as_str).filter(|r| !r.is_empty()) {
            self.refusal.get_or_insert_with(String::new).push_str(r);
        }
        if let Some(t) = delta.get("content").and_then(Value::as_str) {
            self.text.get_or_insert_with(String::new).push_str(t);
            if !t.is_empty() {
                sink(t);
            }
        }
        for c in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            let max = self.limits.max_tool_calls;
            // `null` reads as absent, as it always did (some compatible servers send it).
            let index = match c.get("index").filter(|i| !i.is_null()) {
                Some(i) => index_below(i, max, "max_tool_calls", "a streamed tool-call index")?,
                None if self.calls.len() < max => self.calls.len(),
                None => return Err(over("the answer's tool calls", "max_tool_calls", max, "calls")),
            };
            if self.calls.len() <= index {
                self.calls.resize_with(index + 1, || ToolCall {
                    id: String::new(),
                    name: String::new(),
                    arguments: String::new(),
                    from_text: false,
                });
            }
            let Some(call) = self.calls.get_mut(index) else { continue };
            if let Some(id) = c.get("id").and_then(Value::as_str) {
                call.id = id.to_string();
            }
            if let Some(n) = c.pointer("/function/name").and_then(Value::as_str) {
                call.name.push_str(n);
            }
            match c.pointer("/function/arguments") {
                Some(Value::String(a)) => call.arguments.push_str(a),
                // An object sent whole instead of as text: its text, not nothing.
                Some(other @ Value::Object(_)) => call.arguments.push_str(&other.to_string()),
                _ => {}
            }
        }
        Ok(())
    }

    /// The response the events described.
    pub fn finish(self) -> Result<ModelResponse, ModelError> {
        if self.id.is_empty() && self.finish.is_none() {
            return Err(ModelError::InvalidResponse("the stream ended before any chunk".into()));
        }
        if let Some(c) = self.calls.iter().find(|c| c.id.is_empty() || c.name.is_empty()) {
            return Err(ModelError::InvalidResponse(format!("a streamed tool call without id or name: {c:?}")));
        }
        let stop = stop_reason(self.finish.as_deref(), !self.calls.is_empty(), self.refusal.is_some());
        let text = match (self.text, self.refusal) {
            (Some(t), _) if !t.is_empty() => Some(t),
            (_, Some(r)) => Some(r),
            (t, None) => t,
        };
        Ok(ModelResponse { id: self.id, text, tool_calls: self.calls, stop, usage: parse_usage(self.usage.as_ref()) })
    }
}

impl super::http::StreamRead for StreamDecoder {
    type Answer = ModelResponse;
    fn event(&mut self, event: &SseEvent, sink: &TextSink<'_>) -> Result<bool, ModelError> {
        self.push(event, sink)
    }
    fn answer(self) -> Result<ModelResponse, ModelError> {
        self.finish()
    }
}

#[async_trait]
impl Model for OpenAiChat {
    fn name(&self) -> &str {
        &self.endpoint.model
    }

    fn native_structured_output(&self) -> bool {
        true
    }

    fn max_tool_name_bytes(&self) -> usize {
        self.endpoint.max_tool_name_bytes.unwrap_or(crate::tools::wire_name::CHAT_COMPLETIONS_LIMIT)
    }

    fn context_window(&self) -> u64 {
        self.endpoint.context_window.unwrap_or_else(|| super::window::default_context_window(&self.endpoint.model))
    }

    async fn respond(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        self.respond_streaming(request, &|_| {}).await
    }

    async fn respond_streaming(
        &self,
        request: &ModelRequest,
        sink: &TextSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        crate::telemetry::provider("openai");
        let ep = &self.endpoint;
        let mut body = self::request(&ep.model, request, ep.stream);
        let limit = self.max_tool_name_bytes();
        let has_tools = !body.tools.is_empty();
        ep.settings.apply(super::Wire::OpenaiChat, &mut body.fields, has_tools, &request.messages, &|n| {
            crate::tools::wire_name::wire_name(n, limit)
        });
        super::strict::mark(&mut body, super::Wire::OpenaiChat, ep.settings.strict_schemas(), request.output.is_some());
        let mut headers = Vec::new();
        if let Some(key) = &ep.api_key {
            headers.push(("authorization", format!("Bearer {key}")));
        }
        let tool_choice = ep.settings.tool_choice_for(&request.messages);
        // Calls written as text (text_calls.rs): read only from an answer to a request that offers tools
        // and does not ask for none.
        let mode = match ep.settings.text_tool_calls.unwrap_or_default() {
            _ if !has_tools || tool_choice == Some(super::ToolChoice::None) => TextToolCalls::Off,
            m => m,
        };
        if mode == TextToolCalls::Constrained {
            let tools: Vec<(String, &Value)> = request
                .tools
                .iter()
                .map(|t| (crate::tools::wire_name::wire_name(&t.name, limit), &*t.parameters))
                .collect();
            let named: Vec<(&str, &Value)> = match &tool_choice {
                Some(super::ToolChoice::Tool(n)) => {
                    let n = crate::tools::wire_name::wire_name(n, limit);
                    tools.iter().filter(|(w, _)| *w == n).map(|(w, p)| (w.as_str(), *p)).collect()
                }
                _ => tools.iter().map(|(w, p)| (w.as_str(), *p)).collect(),
            };
            let answer = tool_choice.as_ref().is_none_or(|c| *c == super::ToolChoice::Auto);
            body.fields.insert("response_format".into(), text_calls::constrained_format(&named, answer));
        }
        let offered: Vec<String> =
            request.tools.iter().map(|t| crate::tools::wire_name::wire_name(&t.name, limit)).collect();
        let offered: Vec<&str> = offered.iter().map(String::as_str).collect();
        let seq = request.messages.len();
        let url = ep.url("chat/completions");
        // The JSON tree is dropped once written: only its bytes wait with the request.
        let sent = super::http::encode(&body)?;
        drop(body);
        if !ep.stream {
            let resp = ep.post(&url, &headers, &sent).await?;
            let mut response = parse_response_within(&json_body(resp, ep.limits.max_body_bytes).await?, &ep.limits)?;
            text_calls::recover(&mut response, &offered, seq, ep.limits.max_tool_calls, mode);
            if let Some(t) = response.text.as_deref().filter(|t| !t.is_empty()) {
                sink(t);
            }
            return Ok(response);
        }
        if mode == TextToolCalls::Off {
            return ep.post_stream(&url, &headers, &sent, sink, || StreamDecoder::new(ep.limits)).await;
        }
        let held = text_calls::HeldText::new(sink);
        let hold = |t: &str| held.push(t);
        let mut response = ep.post_stream(&url, &headers, &sent, &hold, || StreamDecoder::new(ep.limits)).await?;
        let before = response.text.clone();
        let read = text_calls::recover(&mut response, &offered, seq, ep.limits.max_tool_calls, mode);
        held.finish(read, if response.text != before { response.text.as_deref() } else { None });
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ToolSpec;

    /// Issue 12 item 10: arguments a server sends as an object instead of its text are read as that
    /// object, never silently replaced by `{}`; another type stays visible so the argument rule refuses it.
    #[test]
    fn arguments_sent_as_an_object_are_kept() {
        let answer = |arguments: Value| {
            json!({"id": "x", "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant",
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": arguments}}]}}]})
        };
        let args = |v: Value| parse_response(&answer(v)).unwrap().tool_calls[0].arguments.clone();
        assert_eq!(args(json!({"city": "Paris"})), r#"{"city":"Paris"}"#);
        assert_eq!(args(json!("{\"city\": \"Paris\"}")), "{\"city\": \"Paris\"}");
        assert_eq!(args(json!(null)), "{}");
        assert_eq!(args(json!([1, 2])), "[1,2]");
        // Streamed: an object delta is its text too.
        let mut d = StreamDecoder::default();
        let chunk = json!({"id": "x", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1",
            "function": {"name": "f", "arguments": {"city": "Paris"}}}]}, "finish_reason": "tool_calls"}]});
        d.push(&crate::model::sse::SseEvent { event: None, data: chunk.to_string() }, &|_: &str| {}).unwrap();
        assert_eq!(d.finish().unwrap().tool_calls[0].arguments, r#"{"city":"Paris"}"#);
    }

    /// A refusal is the answer's text and its stop reason, whole and streamed, whatever the finish
    /// reason (OpenAI sends `stop`); a cut answer is `length` even with a refusal field.
    #[test]
    fn a_refusal_is_the_text_and_the_stop_reason() {
        let whole = |finish: &str| {
            json!({"id": "x", "choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant",
                "content": null, "refusal": "I can't help with that."}}]})
        };
        let r = parse_response(&whole("stop")).unwrap();
        assert_eq!((r.text.as_deref(), r.stop), (Some("I can't help with that."), StopReason::Refusal));
        assert_eq!(parse_response(&whole("length")).unwrap().stop, StopReason::Length);
        let mut d = StreamDecoder::default();
        for chunk in [
            json!({"id": "x", "choices": [{"index": 0, "delta": {"role": "assistant", "refusal": "I can't"}}]}),
            json!({"id": "x", "choices": [{"index": 0, "delta": {"refusal": " help."}, "finish_reason": "stop"}]}),
        ] {
            d.push(&crate::model::sse::SseEvent { event: None, data: chunk.to_string() }, &|_: &str| {}).unwrap();
        }
        let r = d.finish().unwrap();
        assert_eq!((r.text.as_deref(), r.stop), (Some("I can't help."), StopReason::Refusal));
        // Negative control: a plain answer ends.
        let plain = json!({"id": "x", "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant",
            "content": "Sure.", "refusal": null}}]});
        assert_eq!(parse_response(&plain).unwrap().stop, StopReason::End);
    }

    #[test]
    fn body_carries_system_tools_and_tool_results() {
        let req = ModelRequest {
            instructions: Some("be brief".into()),
            messages: vec![
                Message::user("hi"),
                Message::Assistant {
                    content: None,
                    tool_calls: vec![ToolCall {
                        id: "c1".into(),
                        name: "f".into(),
                        arguments: "{}".into(),
                        from_text: false,
                    }],
                },
                Message::Tool {
                    call_id: "c1".into(),
                    name: "f".into(),
                    content: "ok".into(),
                    is_error: false,
                    parts: Vec::new(),
                },
            ],
            tools: vec![ToolSpec::new("f", "does f", json!({"type": "object", "properties": {}}))],
            ..Default::default()
        };
        let b = request_body("m", &req, false);
        assert_eq!(b["messages"][0], json!({"role": "system", "content": "be brief"}));
        assert_eq!(b["messages"][2]["tool_calls"][0]["function"]["name"], "f");
        assert_eq!(b["messages"][3], json!({"role": "tool", "tool_call_id": "c1", "content": "ok"}));
        assert_eq!(b["tools"][0]["type"], "function");
    }

    #[test]
    fn parse_reports_cached_tokens_apart() {
        let v = json!({"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
            "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 2,
            "prompt_tokens_details": {"cached_tokens": 4}}});
        let r = parse_response(&v).unwrap();
        assert_eq!(r.text.as_deref(), Some("hi"));
        assert_eq!((r.usage.input_tokens, r.usage.cache_read_tokens, r.usage.output_tokens), (6, 4, 2));
        assert_eq!(r.stop, StopReason::End);
    }

    #[test]
    fn parse_refuses_what_is_not_the_wire() {
        assert!(matches!(parse_response(&json!({"nope": 1})), Err(ModelError::InvalidResponse(_))));
    }
}
