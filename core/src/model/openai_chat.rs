//! The OpenAI Chat Completions wire (`POST {base_url}/chat/completions`). Any OpenAI-compatible server
//! (llama.cpp, vLLM, Ollama) works by base URL.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::retry::{RetryPolicy, backoff, retryable_status};
use super::{Message, Model, ModelRequest, ModelResponse, StopReason, ToolCall, Usage};
use crate::error::ModelError;

/// A model on the Chat Completions wire.
#[derive(Debug, Clone)]
pub struct OpenAiChat {
    model: String,
    base_url: String,
    api_key: Option<String>,
    timeout: Duration,
    retry: RetryPolicy,
    client: Option<reqwest::Client>,
}

impl OpenAiChat {
    /// A model by name. The base URL and key default to `OPENAI_BASE_URL` and `OPENAI_API_KEY`, else
    /// `https://api.openai.com/v1` and no key.
    pub fn new(model: impl Into<String>) -> Self {
        OpenAiChat {
            model: model.into(),
            base_url: std::env::var("OPENAI_BASE_URL")
                .ok()
                .filter(|s| !s.trim().is_empty())
                .unwrap_or_else(|| "https://api.openai.com/v1".to_string()),
            api_key: std::env::var("OPENAI_API_KEY").ok().filter(|s| !s.trim().is_empty()),
            timeout: Duration::from_secs(600),
            retry: RetryPolicy::default(),
            client: None,
        }
    }

    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = url.into();
        self
    }

    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// The limit on one HTTP request, retries not included.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    pub fn max_retries(mut self, n: u32) -> Self {
        self.retry.max_retries = n;
        self
    }

    fn client(&self) -> Result<reqwest::Client, ModelError> {
        if let Some(c) = &self.client {
            return Ok(c.clone());
        }
        http_client(self.timeout)
    }

    /// Builds the HTTP client now instead of at the first request.
    pub fn connect(mut self) -> Result<Self, ModelError> {
        self.client = Some(http_client(self.timeout)?);
        Ok(self)
    }

    fn endpoint(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }
}

pub(crate) fn http_client(timeout: Duration) -> Result<reqwest::Client, ModelError> {
    // reqwest is built without a default crypto provider; ring is ours. A second install is a no-op.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| ModelError::Transport(format!("the HTTP client could not be built: {e}")))
}

/// The request body for a conversation, exactly as the Chat Completions API takes it.
pub fn request_body(model: &str, req: &ModelRequest) -> Value {
    let mut messages = Vec::with_capacity(req.messages.len() + 1);
    if let Some(instructions) = &req.instructions {
        messages.push(json!({"role": "system", "content": instructions}));
    }
    for m in &req.messages {
        messages.push(match m {
            Message::User { content } => json!({"role": "user", "content": content}),
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
            Message::Tool { call_id, content, .. } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
        });
    }
    let mut body = json!({"model": model, "messages": messages});
    if !req.tools.is_empty() {
        body["tools"] = req
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
            .collect();
    }
    body
}

/// Reads a Chat Completions response body.
pub fn parse_response(body: &Value) -> Result<ModelResponse, ModelError> {
    let bad = |what: &str| ModelError::InvalidResponse(format!("{what} in {}", truncate(&body.to_string(), 300)));
    let choice = body.get("choices").and_then(|c| c.get(0)).ok_or_else(|| bad("no choices[0]"))?;
    let message = choice.get("message").ok_or_else(|| bad("no choices[0].message"))?;
    let text = message.get("content").and_then(Value::as_str).map(str::to_string);
    let mut tool_calls = Vec::new();
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        for c in calls {
            let f = c.get("function").ok_or_else(|| bad("a tool call without function"))?;
            tool_calls.push(ToolCall {
                id: c.get("id").and_then(Value::as_str).ok_or_else(|| bad("a tool call without id"))?.to_string(),
                name: f.get("name").and_then(Value::as_str).ok_or_else(|| bad("a tool call without name"))?.to_string(),
                arguments: f.get("arguments").and_then(Value::as_str).unwrap_or("{}").to_string(),
            });
        }
    }
    let stop = match choice.get("finish_reason").and_then(Value::as_str) {
        Some("stop") => StopReason::EndTurn,
        Some("tool_calls") | Some("function_call") => StopReason::ToolUse,
        Some("length") => StopReason::MaxTokens,
        Some("content_filter") => StopReason::ContentFilter,
        _ if !tool_calls.is_empty() => StopReason::ToolUse,
        _ => StopReason::Other,
    };
    let u = body.get("usage");
    let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
    let cached = n(u.and_then(|u| u.get("prompt_tokens_details")).and_then(|d| d.get("cached_tokens")));
    let usage = Usage {
        requests: 1,
        // Chat Completions counts cached tokens inside prompt_tokens; we report them apart.
        input_tokens: n(u.and_then(|u| u.get("prompt_tokens"))).saturating_sub(cached),
        output_tokens: n(u.and_then(|u| u.get("completion_tokens"))),
        cache_read_tokens: cached,
        cache_write_tokens: 0,
    };
    Ok(ModelResponse {
        id: body.get("id").and_then(Value::as_str).unwrap_or_default().to_string(),
        text,
        tool_calls,
        stop,
        usage,
    })
}

fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// The message of an error body (`{"error": {"message": …}}`), else the body itself.
pub(crate) fn error_message(text: &str) -> String {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v.pointer("/error/message").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| truncate(text, 500).to_string())
}

#[async_trait]
impl Model for OpenAiChat {
    fn name(&self) -> &str {
        &self.model
    }

    #[tracing::instrument(name = "model_request", skip_all, fields(wire = "openai_chat", model = %self.model))]
    async fn respond(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        let client = self.client()?;
        let body = request_body(&self.model, request);
        let mut attempt = 0;
        loop {
            let mut http = client.post(self.endpoint()).json(&body);
            if let Some(key) = &self.api_key {
                http = http.bearer_auth(key);
            }
            let (err, retry_after) = match http.send().await {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let retry_after =
                        resp.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_string);
                    let text = resp.text().await.map_err(|e| ModelError::Transport(e.to_string()))?;
                    if (200..300).contains(&status) {
                        let v: Value = serde_json::from_str(&text).map_err(|e| {
                            ModelError::InvalidResponse(format!("not JSON ({e}): {}", truncate(&text, 300)))
                        })?;
                        return parse_response(&v);
                    }
                    let err = ModelError::Http { status, message: error_message(&text) };
                    if !retryable_status(status) {
                        return Err(err);
                    }
                    (err, retry_after)
                }
                Err(e) if e.is_timeout() || e.is_connect() || e.is_request() => {
                    (ModelError::Transport(format!("{e} ({})", self.endpoint())), None)
                }
                Err(e) => return Err(ModelError::Transport(e.to_string())),
            };
            if attempt >= self.retry.max_retries {
                return Err(err);
            }
            tokio::time::sleep(backoff(&self.retry, attempt, retry_after.as_deref())).await;
            attempt += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::ToolSpec;

    #[test]
    fn body_carries_system_tools_and_tool_results() {
        let req = ModelRequest {
            instructions: Some("be brief".into()),
            messages: vec![
                Message::User { content: "hi".into() },
                Message::Assistant {
                    content: None,
                    tool_calls: vec![ToolCall { id: "c1".into(), name: "f".into(), arguments: "{}".into() }],
                },
                Message::Tool { call_id: "c1".into(), name: "f".into(), content: "ok".into(), is_error: false },
            ],
            tools: vec![ToolSpec::new("f", "does f", json!({"type": "object", "properties": {}}))],
        };
        let b = request_body("m", &req);
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
        assert_eq!(r.stop, StopReason::EndTurn);
    }

    #[test]
    fn parse_refuses_what_is_not_the_wire() {
        assert!(matches!(parse_response(&json!({"nope": 1})), Err(ModelError::InvalidResponse(_))));
    }
}
