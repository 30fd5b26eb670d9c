//! The OpenAI Responses wire (`POST {base_url}/responses`), streamed (SSE) or not. Every request
//! carries the whole conversation as input items (no `previous_response_id`), so any server that speaks
//! the wire works statelessly.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::http::{Endpoint, count, json_body, truncate};
use super::openai_chat::{env_key, openai_base_url};
use super::sse::read_events;
use super::{Message, Model, ModelRequest, ModelResponse, StopReason, TextSink, ToolCall, Usage};
use crate::error::ModelError;

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

    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.endpoint.base_url = url.into();
        self
    }

    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.endpoint.api_key = Some(key.into());
        self
    }

    /// The limit on one HTTP request, retries not included (default 600 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.endpoint.timeout = timeout;
        self.endpoint.reset_client();
        self
    }

    pub fn max_retries(mut self, n: u32) -> Self {
        self.endpoint.retry.max_retries = n;
        self
    }

    /// Streams answers (SSE).
    pub fn stream(mut self, on: bool) -> Self {
        self.endpoint.stream = on;
        self
    }
}

/// The request body, exactly as the Responses API takes it.
pub fn request_body(model: &str, req: &ModelRequest, stream: bool) -> Value {
    let mut input = Vec::new();
    for m in &req.messages {
        match m {
            Message::User { content } => input.push(json!({"role": "user", "content": content})),
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
            Message::Tool { call_id, content, .. } => {
                input.push(json!({"type": "function_call_output", "call_id": call_id, "output": content}))
            }
        }
    }
    let mut body = json!({"model": model, "input": input});
    if let Some(instructions) = &req.instructions {
        body["instructions"] = json!(instructions);
    }
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"type": "function", "name": t.name, "description": t.description, "parameters": t.parameters, "strict": false}))
            .collect();
    }
    if stream {
        body["stream"] = json!(true);
    }
    body
}

/// Reads a Responses response object (the body, or `response` of `response.completed`).
pub fn parse_response(body: &Value) -> Result<ModelResponse, ModelError> {
    let bad = |what: &str| ModelError::InvalidResponse(format!("{what} in {}", truncate(&body.to_string(), 300)));
    let items = body.get("output").and_then(Value::as_array).ok_or_else(|| bad("no output"))?;
    let mut text: Option<String> = None;
    let mut tool_calls = Vec::new();
    for item in items {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                for part in item.get("content").and_then(Value::as_array).into_iter().flatten() {
                    if part.get("type").and_then(Value::as_str) == Some("output_text") {
                        text.get_or_insert_with(String::new)
                            .push_str(part.get("text").and_then(Value::as_str).unwrap_or(""));
                    }
                }
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
                arguments: item.get("arguments").and_then(Value::as_str).unwrap_or("{}").to_string(),
            }),
            _ => {}
        }
    }
    let stop = match (
        body.get("status").and_then(Value::as_str),
        body.pointer("/incomplete_details/reason").and_then(Value::as_str),
    ) {
        (Some("incomplete"), Some("max_output_tokens")) => StopReason::MaxTokens,
        (Some("incomplete"), Some("content_filter")) => StopReason::ContentFilter,
        (Some("failed"), _) => {
            let message = body.pointer("/error/message").and_then(Value::as_str).unwrap_or("status failed");
            return Err(ModelError::InvalidResponse(format!("the response failed: {message}")));
        }
        _ if !tool_calls.is_empty() => StopReason::ToolUse,
        (Some("completed"), _) => StopReason::EndTurn,
        _ => StopReason::Other,
    };
    let u = body.get("usage");
    let cached = count(u.and_then(|u| u.pointer("/input_tokens_details/cached_tokens")));
    let written = count(u.and_then(|u| u.pointer("/input_tokens_details/cache_write_tokens")));
    let usage = Usage {
        requests: 1,
        // The Responses wire counts cache reads and writes inside input_tokens; we report them apart.
        input_tokens: count(u.and_then(|u| u.get("input_tokens"))).saturating_sub(cached + written),
        output_tokens: count(u.and_then(|u| u.get("output_tokens"))),
        cache_read_tokens: cached,
        cache_write_tokens: written,
    };
    Ok(ModelResponse {
        id: body.get("id").and_then(Value::as_str).unwrap_or_default().to_string(),
        text,
        tool_calls,
        stop,
        usage,
    })
}

#[async_trait]
impl Model for OpenAiResponses {
    fn name(&self) -> &str {
        &self.endpoint.model
    }

    fn max_tool_name_bytes(&self) -> usize {
        crate::tools::wire_name::LONG_WIRE_LIMIT
    }

    async fn respond(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        self.respond_streaming(request, &|_| {}).await
    }

    #[tracing::instrument(name = "model_request", skip_all, fields(wire = "openai_responses", model = %self.endpoint.model))]
    async fn respond_streaming(
        &self,
        request: &ModelRequest,
        sink: &TextSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        let ep = &self.endpoint;
        let body = request_body(&ep.model, request, ep.stream);
        let mut headers = Vec::new();
        if let Some(key) = &ep.api_key {
            headers.push(("authorization", format!("Bearer {key}")));
        }
        let resp = ep.post(&ep.url("responses"), &headers, &body).await?;
        if !ep.stream {
            let response = parse_response(&json_body(resp).await?)?;
            if let Some(t) = response.text.as_deref().filter(|t| !t.is_empty()) {
                sink(t);
            }
            return Ok(response);
        }
        // Text deltas go to the sink as they come; the final `response.completed` (or `.incomplete`,
        // `.failed`) carries the whole response, which is read like an unstreamed answer.
        let mut last: Option<Value> = None;
        read_events(resp, |e| {
            let data: Value = serde_json::from_str(&e.data).map_err(|err| {
                ModelError::InvalidResponse(format!("an event is not JSON ({err}): {}", truncate(&e.data, 300)))
            })?;
            let name = e.event.as_deref().or_else(|| data.get("type").and_then(Value::as_str)).unwrap_or("");
            match name {
                "response.output_text.delta" => {
                    if let Some(t) = data.get("delta").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                        sink(t);
                    }
                    Ok(true)
                }
                "response.completed" | "response.incomplete" | "response.failed" => {
                    last = data.get("response").cloned();
                    Ok(false)
                }
                "error" => {
                    let message = data.get("message").and_then(Value::as_str).unwrap_or("error event");
                    Err(ModelError::InvalidResponse(format!("the stream reported an error: {message}")))
                }
                _ => Ok(true),
            }
        })
        .await?;
        let response =
            last.ok_or_else(|| ModelError::InvalidResponse("the stream ended without response.completed".into()))?;
        parse_response(&response)
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
                Message::User { content: "hi".into() },
                Message::Assistant {
                    content: None,
                    tool_calls: vec![ToolCall { id: "call_1".into(), name: "f".into(), arguments: "{}".into() }],
                },
                Message::Tool { call_id: "call_1".into(), name: "f".into(), content: "ok".into(), is_error: false },
            ],
            tools: vec![ToolSpec::new("f", "does f", json!({"type": "object"}))],
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

    #[test]
    fn parse_reads_items_and_usage() {
        let v = json!({"id": "resp_1", "status": "completed", "output": [
            {"type": "message", "content": [{"type": "output_text", "text": "hi"}]},
            {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{\"a\":1}"}],
            "usage": {"input_tokens": 10, "output_tokens": 3, "input_tokens_details": {"cached_tokens": 4}}});
        let r = parse_response(&v).unwrap();
        assert_eq!(r.text.as_deref(), Some("hi"));
        assert_eq!(r.tool_calls[0].id, "call_1");
        assert_eq!(r.stop, StopReason::ToolUse);
        assert_eq!((r.usage.input_tokens, r.usage.cache_read_tokens), (6, 4));
    }
}
