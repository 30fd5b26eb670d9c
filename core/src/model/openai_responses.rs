//! The OpenAI Responses wire (`POST {base_url}/responses`), streamed (SSE) or not. Every request
//! carries the whole conversation as input items (no `previous_response_id`), so any server that speaks
//! the wire works statelessly.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::body::{RequestBody, ToolShape, WireTool};

use super::http::{Endpoint, count, json_body, truncate};
use super::limits::{WireLimits, over};
use super::openai_chat::{env_key, openai_base_url};
use super::sse::SseEvent;
use super::{Message, Model, ModelReply, ModelRequest, ModelResponse, StopReason, TextSink, ToolCall, Usage};
use crate::content::Part;
use crate::error::ModelError;

/// The wire's name on a [`Message::Provider`].
pub const WIRE: &str = "openai_responses";

/// Whether the hosted `tool_search` serves `model`: GPT-5.4 and later (`gpt-5.4`, `gpt-5.4-mini`,
/// `gpt-6`, dated or not).
pub fn supports_tool_search(model: &str) -> bool {
    let m = model.to_ascii_lowercase();
    m.match_indices("gpt-").any(|(at, _)| {
        let rest = &m[at + 4..];
        let version: String = rest.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
        let mut parts = version.split('.');
        let major: u32 = match parts.next().and_then(|p| p.parse().ok()) {
            Some(n) => n,
            None => return false,
        };
        let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        major > 5 || (major == 5 && minor >= 4)
    })
}

/// Output items the server produced and answered itself (its tool search), and the model's
/// `reasoning` items: kept verbatim for the next request, where a reasoning model wants the reasoning
/// that led to its function calls sent back before them.
fn is_server_item(kind: &str) -> bool {
    matches!(kind, "tool_search_call" | "tool_search_output" | "reasoning")
}

/// A model on the Responses wire.
#[derive(Debug, Clone)]
pub struct OpenAiResponses {
    endpoint: Endpoint,
}

impl OpenAiResponses {
    /// A model by name. The base URL and key default to `OPENAI_BASE_URL` and `OPENAI_API_KEY`, else
    /// `https://api.openai.com/v1` and no key.
    pub fn new(model: impl Into<String>) -> Self {
        OpenAiResponses { endpoint: Endpoint::new(model.into(), openai_base_url(), env_key("OPENAI_API_KEY")) }
    }

    super::builder::endpoint_builders!(wire: "openai_responses", name_limit: LONG_WIRE_LIMIT);

    /// The sampling and tool-use settings every request carries ([`ModelSettings`]); a value out of range,
    /// or a setting this wire lacks, is a configuration error naming it and the wire.
    ///
    /// [`ModelSettings`]: crate::model::ModelSettings
    pub fn settings(mut self, settings: crate::model::ModelSettings) -> Result<Self, crate::Error> {
        settings.check(Some(crate::model::Wire::OpenaiResponses)).map_err(crate::model::settings::config_error)?;
        self.endpoint.settings = settings;
        Ok(self)
    }
}

/// A content part as a Responses input content item: `input_text`, `input_image` (a `data:` URL for
/// bytes) or `input_file` (its bytes as a `data:` URL in `file_data`).
fn responses_part(part: &Part) -> Value {
    match part {
        Part::Text { text } => json!({"type": "input_text", "text": text}),
        Part::ImageUrl { url } => json!({"type": "input_image", "image_url": url, "detail": "auto"}),
        Part::Image { .. } => json!({"type": "input_image", "image_url": part.data_url(), "detail": "auto"}),
        Part::File { filename, .. } => {
            json!({"type": "input_file", "filename": filename, "file_data": part.data_url()})
        }
    }
}

/// The request body, exactly as the Responses API takes it.
pub fn request_body(model: &str, req: &ModelRequest, stream: bool) -> Value {
    request(model, req, stream).to_value()
}

/// The request body, its tools written from the request's specs when it is serialized.
pub fn request<'a>(model: &str, req: &'a ModelRequest, stream: bool) -> RequestBody<'a> {
    let mut input = Vec::new();
    for m in &req.messages {
        match m {
            Message::User { parts, .. } if !parts.is_empty() => {
                input.push(json!({"role": "user", "content": parts.iter().map(responses_part).collect::<Vec<_>>()}))
            }
            Message::User { content, .. } => input.push(json!({"role": "user", "content": content})),
            Message::Assistant { content, tool_calls } => {
                if let Some(t) = content.as_deref().filter(|t| !t.is_empty()) {
                    input.push(json!({"role": "assistant", "content": t}));
                }
                for c in tool_calls {
                    input.push(
                        json!({"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}),
                    );
                }
            }
            Message::Tool { call_id, parts, .. } if !parts.is_empty() => {
                let output: Vec<Value> = parts.iter().map(responses_part).collect();
                input.push(json!({"type": "function_call_output", "call_id": call_id, "output": output}))
            }
            Message::Tool { call_id, content, .. } => {
                input.push(json!({"type": "function_call_output", "call_id": call_id, "output": content}))
            }
            // The server's own items go back as they came.
            Message::Provider { wire, items } if wire == WIRE => input.extend(items.iter().cloned()),
            Message::Provider { .. } => {}
        }
    }
    let mut fields = Map::new();
    fields.insert("model".into(), json!(model));
    fields.insert("input".into(), Value::Array(input));
    if let Some(instructions) = &req.instructions {
        fields.insert("instructions".into(), json!(instructions));
    }
    if stream {
        fields.insert("stream".into(), json!(true));
    }
    if let Some(o) = &req.output {
        // Native structured output: the answer is JSON of the output type (checked by the loop).
        fields.insert("text".into(), json!({"format": {"type": "json_schema", "name": o.name, "schema": o.schema}}));
    }
    let mut tools = Vec::with_capacity(req.tools.len() + 1);
    if req.tools.iter().any(|t| t.defer_loading) {
        tools.push(WireTool::Fixed(json!({"type": "tool_search"})));
    }
    tools.extend(req.tools.iter().map(|t| WireTool::Function(ToolShape::Responses, t)));
    RequestBody { fields, tools, cache_last_tool: None, strict: false }
}

/// Reads a Responses response object (the body, or `response` of `response.completed`).
pub fn parse_response(body: &Value) -> Result<ModelResponse, ModelError> {
    parse_reply(body).map(|r| r.response)
}

/// Reads a Responses response object, with the server's own items (its tool search) verbatim.
pub fn parse_reply(body: &Value) -> Result<ModelReply, ModelError> {
    parse_reply_within(body, &WireLimits::default())
}

/// Like [`parse_reply`], refusing more tool calls than `limits` allow.
pub fn parse_reply_within(body: &Value, limits: &WireLimits) -> Result<ModelReply, ModelError> {
    let bad = |what: &str| ModelError::InvalidResponse(format!("{what} in {}", truncate(&body.to_string(), 300)));
    let items = body.get("output").and_then(Value::as_array).ok_or_else(|| bad("no output"))?;
    let mut text: Option<String> = None;
    let mut tool_calls = Vec::new();
    let mut provider_items = Vec::new();
    let mut refused = false;
    for item in items {
        match item.get("type").and_then(Value::as_str) {
            Some(kind) if is_server_item(kind) => provider_items.push(item.clone()),
            Some("message") => {
                for part in item.get("content").and_then(Value::as_array).into_iter().flatten() {
                    match part.get("type").and_then(Value::as_str) {
                        Some("output_text") => text
                            .get_or_insert_with(String::new)
                            .push_str(part.get("text").and_then(Value::as_str).unwrap_or("")),
                        // A refusal is the answer's text, and its stop reason.
                        Some("refusal") => {
                            refused = true;
                            text.get_or_insert_with(String::new)
                                .push_str(part.get("refusal").and_then(Value::as_str).unwrap_or(""));
                        }
                        _ => {}
                    }
                }
            }
            Some("function_call") if tool_calls.len() >= limits.max_tool_calls => {
                return Err(over("the answer's tool calls", "max_tool_calls", limits.max_tool_calls, "calls"));
            }
            Some("function_call") => tool_calls.push(ToolCall {
                id: item
                    .get("call_id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad("a function_call without call_id"))?
                    .to_string(),
                name: item
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| bad("a function_call without name"))?
                    .to_string(),
                arguments: super::arguments_text(item.get("arguments")),
                from_text: false,
            }),
            _ => {}
        }
    }
    let stop = match (
        body.get("status").and_then(Value::as_str),
        body.pointer("/incomplete_details/reason").and_then(Value::as_str),
    ) {
        (Some("incomplete"), Some("max_output_tokens")) => StopReason::Length,
        (Some("incomplete"), Some("content_filter")) => StopReason::ContentFilter,
        // A failed response is the error it carries, as a stream's error event is.
        (Some("failed"), _) => return Err(super::http::stream_error(body.get("error").unwrap_or(&json!({})))),
        _ if !tool_calls.is_empty() => StopReason::ToolCalls,
        _ if refused => StopReason::Refusal,
        (Some("completed"), _) => StopReason::End,
        _ => StopReason::Other,
    };
    let u = body.get("usage");
    let cached = count(u.and_then(|u| u.pointer("/input_tokens_details/cached_tokens")));
    let written = count(u.and_then(|u| u.pointer("/input_tokens_details/cache_write_tokens")));
    let usage = Usage {
        requests: 1,
        // The Responses wire counts cache reads and writes inside input_tokens; we report them apart.
        input_tokens: count(u.and_then(|u| u.get("input_tokens"))).saturating_sub(cached.saturating_add(written)),
        output_tokens: count(u.and_then(|u| u.get("output_tokens"))),
        cache_read_tokens: cached,
        cache_write_tokens: written,
    };
    crate::telemetry::response_model(body.get("model"));
    let response = ModelResponse {
        id: body.get("id").and_then(Value::as_str).unwrap_or_default().to_string(),
        text,
        tool_calls,
        stop,
        usage,
    };
    Ok(ModelReply { response, wire: if provider_items.is_empty() { "" } else { WIRE }, provider_items })
}

/// Reads a streamed Responses answer: text deltas go to the sink as they come; the final
/// `response.completed` (or `.incomplete`, `.failed`) carries the whole response, which is read like an
/// unstreamed answer. Feed it the events of an [`SseParser`](super::sse::SseParser) until
/// [`push`](Self::push) returns `Ok(false)`, then [`finish`](Self::finish). This is the code
/// [`OpenAiResponses`] runs on a streamed answer; it is public so the benchmarks
/// (core/benches/hot_paths.rs) can time it without a connection.
#[derive(Debug, Default)]
pub struct StreamDecoder {
    limits: WireLimits,
    last: Option<Value>,
}

impl StreamDecoder {
    /// A decoder that refuses more tool calls than `limits.max_tool_calls`.
    pub fn new(limits: WireLimits) -> Self {
        StreamDecoder { limits, last: None }
    }

    /// Reads one event; text deltas go to `sink`. Returns whether more events are expected.
    pub fn push(&mut self, event: &SseEvent, sink: &TextSink<'_>) -> Result<bool, ModelError> {
        let data: Value = serde_json::from_str(&event.data).map_err(|err| {
            ModelError::InvalidResponse(format!("an event is not JSON ({err}): {}", truncate(&event.data, 300)))
        })?;
        let name = event.event.as_deref().or_else(|| data.get("type").and_then(Value::as_str)).unwrap_or("");
        match name {
            "response.output_text.delta" => {
                if let Some(t) = data.get("delta").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                    sink(t);
                }
                Ok(true)
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                self.last = data.get("response").cloned();
                Ok(false)
            }
            "error" => Err(super::http::stream_error(&data)),
            _ => Ok(true),
        }
    }

    /// The response the events described.
    pub fn finish(self) -> Result<ModelResponse, ModelError> {
        self.finish_reply().map(|r| r.response)
    }

    /// The response the events described, with the server's own items.
    pub fn finish_reply(self) -> Result<ModelReply, ModelError> {
        let response = self
            .last
            .ok_or_else(|| ModelError::InvalidResponse("the stream ended without response.completed".into()))?;
        parse_reply_within(&response, &self.limits)
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
impl Model for OpenAiResponses {
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

    fn native_structured_output(&self) -> bool {
        true
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
        crate::telemetry::provider("openai");
        let noop = |_: &str| {};
        let sink: &TextSink<'_> = sink.unwrap_or(&noop);
        let ep = &self.endpoint;
        let mut body = self::request(&ep.model, request, ep.stream);
        let limit = self.max_tool_name_bytes();
        let has_tools = !body.tools.is_empty();
        ep.settings.apply(super::Wire::OpenaiResponses, &mut body.fields, has_tools, &request.messages, &|n| {
            crate::tools::wire_name::wire_name(n, limit)
        });
        super::strict::mark(
            &mut body,
            super::Wire::OpenaiResponses,
            ep.settings.strict_schemas(),
            request.output.is_some(),
        );
        let mut headers = Vec::new();
        if let Some(key) = &ep.api_key {
            headers.push(("authorization", format!("Bearer {key}")));
        }
        let url = ep.url("responses");
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
    fn body_has_items_and_instructions() {
        let req = ModelRequest {
            instructions: Some("be brief".into()),
            messages: vec![
                Message::user("hi"),
                Message::Assistant {
                    content: None,
                    tool_calls: vec![ToolCall {
                        id: "call_1".into(),
                        name: "f".into(),
                        arguments: "{}".into(),
                        from_text: false,
                    }],
                },
                Message::Tool {
                    call_id: "call_1".into(),
                    name: "f".into(),
                    content: "ok".into(),
                    is_error: false,
                    parts: Vec::new(),
                },
            ],
            tools: vec![ToolSpec::new("f", "does f", json!({"type": "object"}))],
            ..Default::default()
        };
        let b = request_body("m", &req, false);
        assert_eq!(b["instructions"], "be brief");
        assert_eq!(
            b["input"][1],
            json!({"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"})
        );
        assert_eq!(b["input"][2], json!({"type": "function_call_output", "call_id": "call_1", "output": "ok"}));
        assert_eq!(b["tools"][0]["name"], "f");
        assert!(b.get("stream").is_none());
    }

    fn search_items() -> Vec<Value> {
        vec![
            json!({"id": "tsc_1", "type": "tool_search_call", "status": "completed", "execution": "server",
                "call_id": null, "arguments": {"paths": ["get_forecast"]}}),
            json!({"id": "tso_1", "type": "tool_search_output", "status": "completed", "execution": "server",
                "call_id": null, "tools": [{"type": "function", "name": "get_forecast", "description": "Tomorrow.",
                "parameters": {"type": "object"}, "strict": false, "defer_loading": true}]}),
        ]
    }

    #[test]
    fn deferred_functions_ship_with_tool_search_and_search_items_go_back() {
        let mut forecast = ToolSpec::new("get_forecast", "Tomorrow.", json!({"type": "object"}));
        forecast.defer_loading = true;
        let req = ModelRequest {
            instructions: None,
            messages: vec![
                Message::user("forecast?"),
                Message::Provider { wire: WIRE.into(), items: search_items() },
                Message::Provider { wire: "anthropic".into(), items: vec![json!({"type": "server_tool_use"})] },
                Message::Assistant {
                    content: None,
                    tool_calls: vec![ToolCall {
                        id: "call_1".into(),
                        name: "get_forecast".into(),
                        arguments: "{}".into(),
                        from_text: false,
                    }],
                },
            ],
            tools: vec![ToolSpec::new("get_weather", "Now.", json!({"type": "object"})), forecast],
            ..Default::default()
        };
        let b = request_body("gpt-5.4", &req, true);
        assert_eq!(b["tools"][0], json!({"type": "tool_search"}));
        assert!(b["tools"][1].get("defer_loading").is_none());
        assert_eq!(b["tools"][2]["defer_loading"], true);
        assert_eq!(b["tools"][2]["parameters"], json!({"type": "object"}));
        let input = b["input"].as_array().unwrap();
        assert_eq!(input.len(), 4);
        assert_eq!(input[1..3], search_items()[..]);
        assert_eq!(input[3]["type"], "function_call");
    }

    #[test]
    fn search_items_are_kept_apart_whole_and_streamed() {
        let mut output = search_items();
        output.push(json!({"type": "function_call", "call_id": "call_1", "name": "get_forecast", "arguments": "{}"}));
        let body = json!({"id": "resp_1", "status": "completed", "output": output, "usage": {}});
        let r = parse_reply(&body).unwrap();
        assert_eq!((r.wire, &r.provider_items), (WIRE, &search_items()));
        assert_eq!(r.response.tool_calls[0].name, "get_forecast");
        assert_eq!(r.response.stop, StopReason::ToolCalls);

        let mut d = StreamDecoder::default();
        let sink = |_: &str| {};
        let ev = |name: &str, data: Value| SseEvent { event: Some(name.into()), data: data.to_string() };
        assert!(d.push(&ev("response.output_item.added", json!({"item": search_items()[0]})), &sink).unwrap());
        assert!(d.push(&ev("response.output_item.done", json!({"item": search_items()[1]})), &sink).unwrap());
        assert!(!d.push(&ev("response.completed", json!({"response": body})), &sink).unwrap());
        let r = d.finish_reply().unwrap();
        assert_eq!(r.provider_items, search_items());
    }

    #[test]
    fn tool_search_models() {
        for m in ["gpt-5.4", "gpt-5.4-mini", "gpt-5.5-2026-01-01", "gpt-6"] {
            assert!(supports_tool_search(m), "{m}");
        }
        for m in ["gpt-5", "gpt-5.1", "gpt-4.1", "o3", "claude-sonnet-4-5"] {
            assert!(!supports_tool_search(m), "{m}");
        }
    }

    #[test]
    fn parse_reads_items_and_usage() {
        let v = json!({"id": "resp_1", "status": "completed", "output": [
            {"type": "message", "content": [{"type": "output_text", "text": "hi"}]},
            {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{\"a\":1}"}],
            "usage": {"input_tokens": 10, "output_tokens": 3, "input_tokens_details": {"cached_tokens": 4}}});
        let r = parse_response(&v).unwrap();
        assert_eq!(r.text.as_deref(), Some("hi"));
        assert_eq!(r.tool_calls[0].id, "call_1");
        assert_eq!(r.stop, StopReason::ToolCalls);
        assert_eq!((r.usage.input_tokens, r.usage.cache_read_tokens), (6, 4));
    }
}
