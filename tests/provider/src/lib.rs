//! A loopback model provider for tests and the demo. It listens on 127.0.0.1, answers the OpenAI Chat
//! Completions wire as the real API does (ids, `finish_reason`, `tool_calls`, `usage`), and is scripted
//! by a scenario file (see `tests/scenarios/README.md`). Each request is checked against the scenario's
//! expectation; a mismatch is answered with HTTP 400 naming the first difference.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::net::TcpListener;

/// The parts of a scenario file the provider reads.
#[derive(Debug, Clone, Deserialize)]
pub struct Script {
    pub name: String,
    pub exchanges: Vec<Exchange>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Exchange {
    #[serde(default)]
    pub expect: Value,
    pub respond: Value,
}

impl Script {
    pub fn load(path: &std::path::Path) -> Result<Script, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

#[derive(Debug, Default)]
struct State {
    served: usize,
    mismatches: Vec<String>,
}

/// A running provider.
pub struct Provider {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Provider {
    /// Starts serving `script` on a free loopback port, on the current tokio runtime.
    pub async fn start(script: Script) -> std::io::Result<Provider> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State::default()));
        let script = Arc::new(script);
        let st = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let (script, st) = (script.clone(), st.clone());
                tokio::spawn(async move {
                    let service = service_fn(move |req| handle(req, script.clone(), st.clone()));
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                });
            }
        });
        Ok(Provider { addr, state, task })
    }

    /// The base URL a client puts before `/chat/completions`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// How many scripted exchanges were answered, and every mismatch seen.
    pub fn report(&self) -> (usize, Vec<String>) {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        (s.served, s.mismatches.clone())
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type Body = Full<Bytes>;

async fn handle(
    req: Request<Incoming>,
    script: Arc<Script>,
    state: Arc<Mutex<State>>,
) -> Result<Response<Body>, std::convert::Infallible> {
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    let headers: Map<String, Value> = req
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_ascii_lowercase(), Value::String(v.to_str().unwrap_or("").to_string())))
        .collect();
    let bytes = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return Ok(error_response(400, &format!("could not read the body: {e}"), None)),
    };
    if method == hyper::Method::GET && path == "/__ambit/state" {
        let s = state.lock().unwrap_or_else(|p| p.into_inner());
        let body = json!({"scenario": script.name, "served": s.served, "remaining": script.exchanges.len() - s.served.min(script.exchanges.len()), "mismatches": s.mismatches});
        return Ok(json_response(200, &body, None));
    }
    if method != hyper::Method::POST || !path.ends_with("/chat/completions") {
        return Ok(error_response(404, &format!("no route for {method} {path}"), None));
    }
    let body: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => return Ok(error_response(400, &format!("the body is not JSON: {e}"), None)),
    };
    let index = {
        let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
        let i = s.served;
        s.served += 1;
        i
    };
    let Some(exchange) = script.exchanges.get(index) else {
        let msg = format!(
            "scenario '{}' has {} exchanges; request {} is one too many",
            script.name,
            script.exchanges.len(),
            index + 1
        );
        state.lock().unwrap_or_else(|p| p.into_inner()).mismatches.push(msg.clone());
        return Ok(error_response(400, &msg, None));
    };
    if let Err(diff) = check_chat_request(&exchange.expect, &body, &headers) {
        let msg = format!("scenario '{}', request {}: {diff}", script.name, index + 1);
        state.lock().unwrap_or_else(|p| p.into_inner()).mismatches.push(msg.clone());
        return Ok(error_response(400, &msg, None));
    }
    if let Some(err) = exchange.respond.get("error") {
        let status = err.get("status").and_then(Value::as_u64).unwrap_or(500) as u16;
        let message = err.get("message").and_then(Value::as_str).unwrap_or("scripted error");
        let retry_after = err.get("retry_after").and_then(Value::as_str);
        return Ok(error_response(status, message, retry_after));
    }
    let model = body.get("model").and_then(Value::as_str).unwrap_or("unknown");
    let id = format!("chatcmpl-ambit{}{}", hash(&script.name), index + 1);
    Ok(json_response(200, &chat_completion(&id, model, &exchange.respond), None))
}

/// A Chat Completions response body for a scripted answer, field for field as the API returns it.
pub fn chat_completion(id: &str, model: &str, respond: &Value) -> Value {
    let calls: Vec<Value> = respond
        .get("tool_calls")
        .and_then(Value::as_array)
        .map(|calls| {
            calls
                .iter()
                .map(|c| {
                    let args = match c.get("arguments") {
                        Some(Value::String(s)) => s.clone(),
                        Some(v) => v.to_string(),
                        None => "{}".to_string(),
                    };
                    json!({"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": args}})
                })
                .collect()
        })
        .unwrap_or_default();
    let content = respond.get("content").cloned().unwrap_or(Value::Null);
    let finish = respond.get("finish_reason").and_then(Value::as_str).unwrap_or(if calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    });
    let mut message = json!({"role": "assistant", "content": content, "refusal": null, "annotations": []});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    let u = respond.get("usage").cloned().unwrap_or(json!({}));
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let (prompt, completion) = (n("prompt_tokens"), n("completion_tokens"));
    json!({
        "id": id,
        "object": "chat.completion",
        "created": 1_764_633_600,
        "model": model,
        "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": n("cached_tokens"), "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
        },
        "service_tier": "default",
        "system_fingerprint": "fp_ambit_loopback"
    })
}

/// Checks one Chat Completions request against an exchange's `expect`.
pub fn check_chat_request(expect: &Value, body: &Value, headers: &Map<String, Value>) -> Result<(), String> {
    let empty = Vec::new();
    let messages = body.get("messages").and_then(Value::as_array).unwrap_or(&empty);
    if let Some(model) = expect.get("model") {
        subset(model, body.get("model").unwrap_or(&Value::Null), "model")?;
    }
    if let Some(want) = expect.get("headers").and_then(Value::as_object) {
        for (k, v) in want {
            subset(v, headers.get(&k.to_ascii_lowercase()).unwrap_or(&Value::Null), &format!("header {k}"))?;
        }
    }
    if let Some(names) = expect.get("tool_names") {
        let got: Vec<Value> = body
            .get("tools")
            .and_then(Value::as_array)
            .map(|t| t.iter().map(|t| t.pointer("/function/name").cloned().unwrap_or(Value::Null)).collect())
            .unwrap_or_default();
        subset(names, &Value::Array(got), "tool_names")?;
    }
    if let Some(n) = expect.get("messages_count").and_then(Value::as_u64)
        && messages.len() as u64 != n
    {
        return Err(format!("expected {n} messages, got {}: {}", messages.len(), Value::Array(messages.clone())));
    }
    if let Some(tail) = expect.get("messages_tail").and_then(Value::as_array) {
        if tail.len() > messages.len() {
            return Err(format!("expected at least {} messages, got {}", tail.len(), messages.len()));
        }
        let start = messages.len() - tail.len();
        for (i, want) in tail.iter().enumerate() {
            subset(want, &messages[start + i], &format!("messages[{}]", start + i))?;
        }
    }
    Ok(())
}

/// `want` matches `got`: objects by the keys `want` names, arrays item by item, the rest by equality.
pub fn subset(want: &Value, got: &Value, path: &str) -> Result<(), String> {
    match (want, got) {
        (Value::Object(w), Value::Object(g)) => {
            for (k, wv) in w {
                let gv = g.get(k).unwrap_or(&Value::Null);
                subset(wv, gv, &format!("{path}.{k}"))?;
            }
            Ok(())
        }
        (Value::Array(w), Value::Array(g)) => {
            if w.len() != g.len() {
                return Err(format!("{path}: expected {} items, got {}: {got}", w.len(), g.len()));
            }
            for (i, (wv, gv)) in w.iter().zip(g).enumerate() {
                subset(wv, gv, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        _ if want == got => Ok(()),
        _ => Err(format!("{path}: expected {want}, got {got}")),
    }
}

fn hash(s: &str) -> String {
    // FNV-1a: a stable, readable id part per scenario.
    let mut h: u64 = 0xcbf29ce484222325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{:08x}", h as u32)
}

fn json_response(status: u16, body: &Value, retry_after: Option<&str>) -> Response<Body> {
    let mut b = Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("content-type", "application/json")
        .header("x-request-id", "req_ambit_loopback")
        .header("openai-processing-ms", "1");
    if let Some(r) = retry_after {
        b = b.header("retry-after", r);
    }
    b.body(Full::new(Bytes::from(body.to_string()))).unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

/// An error answer in the API's shape: `{"error": {"message", "type", "param", "code"}}`.
fn error_response(status: u16, message: &str, retry_after: Option<&str>) -> Response<Body> {
    let (kind, code) = match status {
        401 => ("invalid_request_error", "invalid_api_key"),
        429 => ("requests", "rate_limit_exceeded"),
        400 | 404 => ("invalid_request_error", "invalid_request"),
        _ => ("server_error", "server_error"),
    };
    json_response(
        status,
        &json!({"error": {"message": message, "type": kind, "param": null, "code": code}}),
        retry_after,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subset_names_the_first_difference() {
        let got = json!({"a": [{"b": 1, "c": 2}], "d": "x"});
        assert!(subset(&json!({"a": [{"b": 1}]}), &got, "$").is_ok());
        let err = subset(&json!({"a": [{"b": 2}]}), &got, "$").unwrap_err();
        assert!(err.starts_with("$.a[0].b: expected 2, got 1"), "{err}");
        assert!(subset(&json!({"a": []}), &got, "$").is_err());
    }

    #[test]
    fn completion_has_the_wire_fields() {
        let r = chat_completion("id1", "m", &json!({"tool_calls": [{"id": "c", "name": "f", "arguments": {"x": 1}}]}));
        assert_eq!(r["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(r["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], "{\"x\":1}");
        assert_eq!(r["choices"][0]["message"]["content"], Value::Null);
        let r = chat_completion(
            "id2",
            "m",
            &json!({"content": "hi", "usage": {"prompt_tokens": 3, "completion_tokens": 2}}),
        );
        assert_eq!(r["choices"][0]["finish_reason"], "stop");
        assert_eq!(r["usage"]["total_tokens"], 5);
    }
}
