//! A loopback model provider for tests and the demo. It listens on 127.0.0.1 and answers the three wires
//! as the real APIs do, streamed (SSE) or not: OpenAI Chat Completions (`POST /v1/chat/completions`),
//! Anthropic Messages (`POST /v1/messages`) and OpenAI Responses (`POST /v1/responses`). It is scripted
//! by a scenario file (see `tests/scenarios/README.md`). Each request is checked against the scenario's
//! expectation; a mismatch is answered with HTTP 400 naming the first difference. `GET /__ambit/state`
//! reports what was served, with every request body and every answer, for the suites to validate.

// The wire rendering lives in the core, where the users' test model (`ambit::test_model`) renders its
// replies through it too: one rule for what each wire answers.
#[path = "../../../core/src/test_model/wires.rs"]
pub mod wires;

pub mod tls;

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
    /// `openai_chat` (default), `anthropic` or `openai_responses`.
    #[serde(default = "default_wire")]
    pub wire: String,
    /// Whether every request must ask for a streamed answer.
    #[serde(default)]
    pub stream: bool,
    pub exchanges: Vec<Exchange>,
    /// Values for `{{name}}` in the exchanges' `expect` strings, given when the provider starts
    /// (`--var name=value`), not by the file: what a suite makes unique per run (a ledger scope on a
    /// shared PostgreSQL database).
    #[serde(skip)]
    pub vars: std::collections::BTreeMap<String, String>,
    /// Anthropic prompt caching, as the API does it: the prefix a request marks with `cache_control`
    /// (its tools up to the last marked one, then its system blocks up to the last marked one) is
    /// written to the cache the first time it is seen and read from it after; its size in tokens
    /// (a token per 4 bytes of its JSON) is reported as `cache_creation_input_tokens` or
    /// `cache_read_input_tokens`, beside the exchange's own `usage`.
    #[serde(default)]
    pub prompt_cache: bool,
}

/// `want` with every `{{name}}` in its strings replaced by that var's value.
pub fn with_vars(want: &Value, vars: &std::collections::BTreeMap<String, String>) -> Value {
    match want {
        Value::String(t) if t.contains("{{") => {
            let mut t = t.clone();
            for (k, v) in vars {
                t = t.replace(&format!("{{{{{k}}}}}"), v);
            }
            Value::String(t)
        }
        Value::Array(a) => Value::Array(a.iter().map(|w| with_vars(w, vars)).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, w)| (k.clone(), with_vars(w, vars))).collect()),
        other => other.clone(),
    }
}

fn default_wire() -> String {
    "openai_chat".to_string()
}

#[derive(Debug, Clone, Deserialize)]
pub struct Exchange {
    #[serde(default)]
    pub expect: Value,
    pub respond: Value,
    /// Milliseconds to wait before answering: time for work the scenario started in the background
    /// (a task reporting progress) to get going before the model's next move.
    #[serde(default)]
    pub delay_ms: u64,
}

impl Script {
    pub fn load(path: &std::path::Path) -> Result<Script, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

#[derive(Debug, Default)]
struct State {
    /// The prefixes written to the prompt cache (`Script::prompt_cache`).
    cached: std::collections::HashSet<String>,
    served: usize,
    mismatches: Vec<String>,
    /// Every request: `{path, body}`.
    requests: Vec<Value>,
    /// Every answer: `{status, body}` or, streamed, `{status, events: [{event, data}]}`.
    responses: Vec<Value>,
    /// The requests (1-based) whose client hung up before their answer was sent.
    abandoned: Vec<usize>,
    /// Each scripted request's HTTP version, as negotiated: `HTTP/1.1` or `HTTP/2.0`.
    versions: Vec<String>,
    /// When the last answer was sent (for `expect.waited_ms`).
    last_answer: Option<std::time::Instant>,
    /// The TCP connections accepted (each a TLS handshake over HTTPS), whether or not a request followed.
    connections: usize,
}

/// Records a request as abandoned when its handler is dropped (the client hung up) before it answered.
struct Pending {
    request: usize,
    state: Arc<Mutex<State>>,
    answered: bool,
}

impl Drop for Pending {
    fn drop(&mut self) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if self.answered {
            s.last_answer = Some(std::time::Instant::now());
        } else {
            s.abandoned.push(self.request);
        }
    }
}

/// A running provider.
pub struct Provider {
    pub addr: SocketAddr,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
    https: bool,
}

impl Provider {
    /// Starts serving `script` on a free loopback port, on the current tokio runtime.
    pub async fn start(script: Script) -> std::io::Result<Provider> {
        Provider::start_with(script, None).await
    }

    /// As [`Provider::start`], over HTTPS with a certificate signed by `tls`'s CA (HTTP/2 or HTTP/1.1 by
    /// ALPN); [`Provider::base_url`] is then `https://127.0.0.1:PORT/v1`.
    pub async fn start_tls(script: Script, tls: tls::Tls) -> std::io::Result<Provider> {
        Provider::start_with(script, Some(tls)).await
    }

    async fn start_with(script: Script, tls: Option<tls::Tls>) -> std::io::Result<Provider> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State::default()));
        let script = Arc::new(script);
        let st = state.clone();
        let https = tls.is_some();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                st.lock().unwrap_or_else(|p| p.into_inner()).connections += 1;
                let (script, st, tls) = (script.clone(), st.clone(), tls.clone());
                tokio::spawn(async move {
                    let service = move |req| handle(req, script.clone(), st.clone());
                    match tls {
                        Some(tls) => tls.serve(stream, service).await,
                        None => {
                            let service = service_fn(service);
                            let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                        }
                    }
                });
            }
        });
        Ok(Provider { addr, state, task, https })
    }

    /// The base URL a client puts before `/chat/completions`, `/messages` or `/responses`.
    pub fn base_url(&self) -> String {
        format!("{}://{}/v1", if self.https { "https" } else { "http" }, self.addr)
    }

    /// How many scripted exchanges were answered, and every mismatch seen.
    pub fn report(&self) -> (usize, Vec<String>) {
        let s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        (s.served, s.mismatches.clone())
    }

    /// Every request seen, in order: `{path, body}`.
    pub fn requests(&self) -> Vec<Value> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).requests.clone()
    }

    /// Each scripted request's HTTP version as negotiated, in order: `HTTP/1.1` or `HTTP/2.0`.
    pub fn http_versions(&self) -> Vec<String> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).versions.clone()
    }

    /// How many TCP connections were accepted (each a TLS handshake attempt over HTTPS), counted before
    /// any handshake or request: a client's attempt that fails the handshake is counted too.
    pub fn connections(&self) -> usize {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).connections
    }

    /// The requests (1-based) whose client hung up before their answer was sent.
    pub fn abandoned(&self) -> Vec<usize> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).abandoned.clone()
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type Body = Full<Bytes>;

/// The path each wire posts to, under `/v1`.
fn wire_path(wire: &str) -> &'static str {
    match wire {
        "anthropic" => "/messages",
        "openai_responses" => "/responses",
        _ => "/chat/completions",
    }
}

async fn handle(
    req: Request<Incoming>,
    script: Arc<Script>,
    state: Arc<Mutex<State>>,
) -> Result<Response<Body>, std::convert::Infallible> {
    let path = req.uri().path().to_string();
    // The query parameters, for `expect.query` (percent-decoded: the names and values as sent).
    let query: Map<String, Value> = req
        .uri()
        .query()
        .map(|q| {
            form_urlencoded::parse(q.as_bytes()).map(|(k, v)| (k.into_owned(), Value::String(v.into_owned()))).collect()
        })
        .unwrap_or_default();
    let method = req.method().clone();
    let version = format!("{:?}", req.version());
    let headers: Map<String, Value> = req
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_ascii_lowercase(), Value::String(v.to_str().unwrap_or("").to_string())))
        .collect();
    let wire = script.wire.as_str();
    let bytes = match req.into_body().collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => return Ok(error_response(wire, 400, &format!("could not read the body: {e}"), None)),
    };
    if method == hyper::Method::GET && path == "/__ambit/state" {
        let s = state.lock().unwrap_or_else(|p| p.into_inner());
        let body = json!({
            "scenario": script.name, "wire": script.wire, "stream": script.stream, "served": s.served,
            "remaining": script.exchanges.len() - s.served.min(script.exchanges.len()),
            "mismatches": s.mismatches, "requests": s.requests, "responses": s.responses,
            "abandoned": s.abandoned
        });
        return Ok(json_response(wire, 200, &body, None));
    }
    if method != hyper::Method::POST || !path.ends_with(wire_path(wire)) {
        let msg = format!("no route for {method} {path} (scenario '{}' speaks {wire})", script.name);
        state.lock().unwrap_or_else(|p| p.into_inner()).mismatches.push(msg.clone());
        return Ok(error_response(wire, 404, &msg, None));
    }
    let body: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => return Ok(error_response(wire, 400, &format!("the body is not JSON: {e}"), None)),
    };
    let (index, since_answer) = {
        let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
        s.requests.push(json!({"path": path, "body": body}));
        s.versions.push(version);
        let i = s.served;
        s.served += 1;
        (i, s.last_answer.map(|t| t.elapsed()))
    };
    let record = |answer: Value| state.lock().unwrap_or_else(|p| p.into_inner()).responses.push(answer);
    let mismatch = |msg: String| {
        state.lock().unwrap_or_else(|p| p.into_inner()).mismatches.push(msg.clone());
        msg
    };
    let Some(exchange) = script.exchanges.get(index) else {
        let msg = mismatch(format!(
            "scenario '{}' has {} exchanges; request {} is one too many",
            script.name,
            script.exchanges.len(),
            index + 1
        ));
        return Ok(error_response(wire, 400, &msg, None));
    };
    let streamed = body.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let checked = if streamed != script.stream {
        Err(format!("expected stream {}, got {}", script.stream, streamed))
    } else {
        let expect = with_vars(&exchange.expect, &script.vars);
        check_request(wire, &expect, &body, &headers)
            .and_then(|()| check_query(&expect, &query))
            .and_then(|()| check_wait(&expect, since_answer))
    };
    if let Err(diff) = checked {
        let msg = mismatch(format!("scenario '{}', request {}: {diff}", script.name, index + 1));
        return Ok(error_response(wire, 400, &msg, None));
    }
    // Dropped with this handler: when the client hangs up first (hyper drops the handler of a closed
    // connection), the request is recorded abandoned; otherwise the time of the answer is kept.
    let mut pending = Pending { request: index + 1, state: state.clone(), answered: false };
    if exchange.delay_ms > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(exchange.delay_ms)).await;
    }
    pending.answered = true;
    if let Some(err) = exchange.respond.get("error") {
        let status = err.get("status").and_then(Value::as_u64).unwrap_or(500) as u16;
        let message = err.get("message").and_then(Value::as_str).unwrap_or("scripted error");
        let retry_after = err.get("retry_after").and_then(Value::as_str);
        record(json!({"status": status, "body": error_body(wire, status, message)}));
        return Ok(error_response(wire, status, message, retry_after));
    }
    // The model the answer names: the scripted `model` (a provider answering with a dated version of the
    // name asked for), else the one asked for.
    let model = exchange
        .respond
        .get("model")
        .and_then(Value::as_str)
        .or_else(|| body.get("model").and_then(Value::as_str))
        .unwrap_or("unknown")
        .to_string();
    let model = model.as_str();
    let tag = format!("{}{:02}", hash(&script.name), index + 1);
    let mut respond = exchange.respond.clone();
    if script.prompt_cache && wire == "anthropic" {
        cache_usage(&body, &mut respond, &mut state.lock().unwrap_or_else(|p| p.into_inner()).cached);
    }
    let respond = &respond;
    if !streamed {
        let answer = match wire {
            "anthropic" => wires::anthropic_message(&format!("msg_ambit{tag}"), model, respond),
            "openai_responses" => wires::responses_response(&format!("resp_ambit{tag}"), model, respond, &body, true),
            _ => wires::chat_completion(&format!("chatcmpl-ambit{tag}"), model, respond),
        };
        record(json!({"status": 200, "body": answer}));
        return Ok(json_response(wire, 200, &answer, None));
    }
    let events = if let Some(err) = respond.get("stream_error") {
        // The stream starts (HTTP 200) and reports an error in place of the answer.
        let status = err.get("status").and_then(Value::as_u64).unwrap_or(500) as u16;
        let message = err.get("message").and_then(Value::as_str).unwrap_or("scripted error");
        vec![stream_error_event(wire, status, message)]
    } else {
        match wire {
            "anthropic" => wires::anthropic_events(&format!("msg_ambit{tag}"), model, respond),
            "openai_responses" => wires::responses_events(&format!("resp_ambit{tag}"), model, respond, &body),
            _ => wires::chat_chunks(&format!("chatcmpl-ambit{tag}"), model, respond),
        }
    };
    let mut text: String = events.iter().map(wires::Sse::to_bytes).collect();
    if wire == "openai_chat" {
        text.push_str("data: [DONE]\n\n");
    }
    record(
        json!({"status": 200, "events": events.iter().map(|e| json!({"event": e.event, "data": e.data})).collect::<Vec<_>>()}),
    );
    Ok(base_response(wire, 200, None)
        .header("content-type", "text/event-stream; charset=utf-8")
        .header("cache-control", "no-cache")
        .body(Full::new(Bytes::from(text)))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()))))
}

pub use wires::chat_completion;

/// The list a wire carries the conversation in: `messages` (Chat Completions, the system message
/// included; Anthropic), or `input` (Responses).
fn conversation<'a>(wire: &str, body: &'a Value) -> &'a [Value] {
    let key = if wire == "openai_responses" { "input" } else { "messages" };
    body.get(key).and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[])
}

/// `expect.waited_ms`: the request came at least that many milliseconds after the previous answer was
/// sent (a client honouring `retry-after`); the first request has no previous answer to wait after.
fn check_wait(expect: &Value, since_answer: Option<std::time::Duration>) -> Result<(), String> {
    let Some(want) = expect.get("waited_ms").and_then(Value::as_u64) else { return Ok(()) };
    match since_answer {
        None => Err(format!("expected a wait of {want} ms after the previous answer, but there was none")),
        Some(d) if d.as_millis() < u128::from(want) => {
            Err(format!("expected a wait of at least {want} ms after the previous answer, got {} ms", d.as_millis()))
        }
        Some(_) => Ok(()),
    }
}

/// The prefix of an Anthropic request marked for caching (see [`Script::prompt_cache`]), as JSON text:
/// empty when nothing is marked.
pub fn cached_prefix(body: &Value) -> String {
    let marked = |v: &Value| v.get("cache_control").is_some_and(|c| !c.is_null());
    let list = |k: &str| body.get(k).and_then(Value::as_array).cloned().unwrap_or_default();
    let (tools, system) = (list("tools"), list("system"));
    let upto = |items: &[Value]| items.iter().rposition(marked).map(|i| items[..=i].to_vec());
    match (upto(&system), upto(&tools)) {
        (Some(sys), _) => json!({"tools": tools, "system": sys}).to_string(),
        (None, Some(t)) => json!({"tools": t}).to_string(),
        (None, None) => String::new(),
    }
}

/// Reports the request's cached prefix in `respond`'s usage: written the first time, read after.
fn cache_usage(body: &Value, respond: &mut Value, cached: &mut std::collections::HashSet<String>) {
    let prefix = cached_prefix(body);
    if prefix.is_empty() {
        return;
    }
    let tokens = (prefix.len() as u64).div_ceil(4);
    let key = if cached.contains(&prefix) { "cache_read_tokens" } else { "cache_write_tokens" };
    cached.insert(prefix);
    if !respond.get("usage").is_some_and(Value::is_object) {
        respond["usage"] = json!({});
    }
    respond["usage"][key] = json!(tokens);
}

/// `expect.query`: the request URL's query parameters, exactly (`{}`: none).
fn check_query(expect: &Value, query: &Map<String, Value>) -> Result<(), String> {
    match expect.get("query").and_then(Value::as_object) {
        Some(want) if want != query => {
            Err(format!("query: expected {}, got {}", Value::Object(want.clone()), Value::Object(query.clone())))
        }
        _ => Ok(()),
    }
}

/// Checks one Chat Completions request against an exchange's `expect`.
pub fn check_chat_request(expect: &Value, body: &Value, headers: &Map<String, Value>) -> Result<(), String> {
    check_request("openai_chat", expect, body, headers)
}

/// Checks one request of `wire` against an exchange's `expect`.
pub fn check_request(wire: &str, expect: &Value, body: &Value, headers: &Map<String, Value>) -> Result<(), String> {
    let messages = conversation(wire, body);
    if let Some(model) = expect.get("model") {
        subset(model, body.get("model").unwrap_or(&Value::Null), "model")?;
    }
    if let Some(want) = expect.get("headers").and_then(Value::as_object) {
        for (k, v) in want {
            subset(v, headers.get(&k.to_ascii_lowercase()).unwrap_or(&Value::Null), &format!("header {k}"))?;
        }
    }
    if let Some(want) = expect.get("body") {
        subset(want, body, "body")?;
    }
    if let Some(names) = expect.get("tool_names") {
        let pointer = if wire == "openai_chat" { "/function/name" } else { "/name" };
        let got: Vec<Value> = body
            .get("tools")
            .and_then(Value::as_array)
            .map(|t| t.iter().map(|t| t.pointer(pointer).cloned().unwrap_or(Value::Null)).collect())
            .unwrap_or_default();
        subset(names, &Value::Array(got), "tool_names")?;
    }
    if let Some(n) = expect.get("messages_count").and_then(Value::as_u64)
        && messages.len() as u64 != n
    {
        return Err(format!("expected {n} messages, got {}: {}", messages.len(), Value::Array(messages.to_vec())));
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
///
/// `{"$contains": text}` (or a list of texts) matches a string holding each text; `{"$one_of": [wants]}`
/// matches what any of them matches (an outcome that depends on the machine, e.g. whether the shell's
/// sandbox is available).
pub fn subset(want: &Value, got: &Value, path: &str) -> Result<(), String> {
    if let Some(options) = want.as_object().filter(|w| w.len() == 1).and_then(|w| w.get("$one_of")) {
        let options = options.as_array().ok_or_else(|| format!("{path}: $one_of takes a list, got {options}"))?;
        let mut misses = Vec::new();
        for o in options {
            match subset(o, got, path) {
                Ok(()) => return Ok(()),
                Err(e) => misses.push(e),
            }
        }
        return Err(format!("{path}: matches none of $one_of: {}", misses.join("; ")));
    }
    if let Some(needles) = want.as_object().filter(|w| w.len() == 1).and_then(|w| w.get("$contains")) {
        let hay = got.as_str().ok_or_else(|| format!("{path}: expected a string, got {got}"))?;
        let needles = match needles {
            Value::Array(a) => a.clone(),
            one => vec![one.clone()],
        };
        for n in &needles {
            let n = n.as_str().ok_or_else(|| format!("{path}: $contains takes text, got {n}"))?;
            if !hay.contains(n) {
                return Err(format!("{path}: expected text containing {n:?}, got {hay:?}"));
            }
        }
        return Ok(());
    }
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

fn base_response(wire: &str, status: u16, retry_after: Option<&str>) -> hyper::http::response::Builder {
    let mut b = Response::builder().status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR));
    b = match wire {
        "anthropic" => {
            b.header("request-id", "req_ambit_loopback").header("anthropic-organization-id", "ambit-loopback")
        }
        _ => b.header("x-request-id", "req_ambit_loopback").header("openai-processing-ms", "1"),
    };
    if let Some(r) = retry_after {
        b = b.header("retry-after", r);
    }
    b
}

fn json_response(wire: &str, status: u16, body: &Value, retry_after: Option<&str>) -> Response<Body> {
    base_response(wire, status, retry_after)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new())))
}

/// An error body in the wire's shape: OpenAI `{"error": {"message", "type", "param", "code"}}`,
/// Anthropic `{"type": "error", "error": {"type", "message"}}`.
fn error_body(wire: &str, status: u16, message: &str) -> Value {
    if wire == "anthropic" {
        let kind = match status {
            400 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            529 => "overloaded_error",
            _ => "api_error",
        };
        return json!({"type": "error", "error": {"type": kind, "message": message}});
    }
    let (kind, code) = match status {
        401 => ("invalid_request_error", "invalid_api_key"),
        429 => ("requests", "rate_limit_exceeded"),
        400 | 404 => ("invalid_request_error", "invalid_request"),
        _ => ("server_error", "server_error"),
    };
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
}

/// The error event a stream reports in place of its answer: Chat Completions a chunk
/// `{"error": {"code": status, "message", "type"}}` (llama.cpp's form), Anthropic an `error` event with
/// the error body, Responses an `error` event `{"type": "error", "code", "message", "param"}`.
fn stream_error_event(wire: &str, status: u16, message: &str) -> wires::Sse {
    let body = error_body(wire, status, message);
    match wire {
        "anthropic" => wires::Sse { event: Some("error".into()), data: body },
        "openai_responses" => wires::Sse {
            event: Some("error".into()),
            data: json!({"type": "error", "code": body["error"]["code"], "message": message, "param": null}),
        },
        _ => wires::Sse {
            event: None,
            data: json!({"error": {"code": status, "message": message, "type": body["error"]["type"]}}),
        },
    }
}

fn error_response(wire: &str, status: u16, message: &str, retry_after: Option<&str>) -> Response<Body> {
    json_response(wire, status, &error_body(wire, status, message), retry_after)
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
        assert!(subset(&json!({"d": {"$contains": "x"}}), &got, "$").is_ok());
        assert!(subset(&json!({"d": {"$contains": ["x", "y"]}}), &got, "$").is_err());
        assert!(subset(&json!({"a": {"$contains": "x"}}), &got, "$").is_err());
        assert!(subset(&json!({"d": {"$one_of": ["y", {"$contains": "x"}]}}), &got, "$").is_ok());
        assert!(subset(&json!({"d": {"$one_of": ["y", "z"]}}), &got, "$").is_err());
    }
}
