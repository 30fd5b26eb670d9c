//! What every wire shares: the endpoint settings (base URL, key, timeout, retries, streaming), the HTTP
//! client, and one POST with retries (backoff and jitter on the errors [`super::retry::retryable`]
//! allows and on connection failures, honouring `retry-after`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::Value;

use super::TextSink;
use super::limits::{MAX_ERROR_BODY_BYTES, WireLimits, over};
use super::retry::{RetryPolicy, backoff, retryable};
use super::sse::{SseEvent, read_events};
use crate::error::ModelError;

/// The settings of one endpoint, shared by the three wires. Its `Debug` never shows the key, nor the
/// values of the extra headers and query parameters (they may carry a key).
#[derive(Clone)]
pub(crate) struct Endpoint {
    pub model: String,
    pub base_url: String,
    pub api_key: Option<String>,
    pub timeout: Duration,
    pub retry: RetryPolicy,
    pub stream: bool,
    /// What one answer may hold (see [`WireLimits`]).
    pub limits: WireLimits,
    /// A per-endpoint limit on tool names below the wire's own (SPEC §3), checked when it is set.
    pub max_tool_name_bytes: Option<usize>,
    /// The context window, when set; else the model family's default.
    pub context_window: Option<u64>,
    /// The settings every request carries (checked for the wire when they are set).
    pub settings: super::settings::ModelSettings,
    /// Headers every request carries besides the wire's own, which they replace (checked when added).
    pub extra_headers: reqwest::header::HeaderMap,
    /// Query parameters every request's URL carries.
    pub query: Vec<(String, String)>,
    client: Arc<OnceLock<reqwest::Client>>,
}

impl std::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("model", &self.model)
            .field("base_url", &shown_url(&self.base_url))
            .field("api_key", &self.api_key.as_ref().map(|_| REDACTED))
            .field("timeout", &self.timeout)
            .field("retry", &self.retry)
            .field("stream", &self.stream)
            .field("limits", &self.limits)
            .field("max_tool_name_bytes", &self.max_tool_name_bytes)
            .field("context_window", &self.context_window)
            .field("settings", &self.settings)
            .field("extra_headers", &self.extra_headers.keys().map(|k| (k.as_str(), REDACTED)).collect::<Vec<_>>())
            .field("query", &self.query.iter().map(|(k, _)| (k.as_str(), REDACTED)).collect::<Vec<_>>())
            .finish()
    }
}

/// What a `Debug` shows in place of a value that may be a secret.
pub(crate) const REDACTED: &str = "<redacted>";

/// Headers the HTTP exchange itself sets: never taken as extra headers.
const RESERVED_HEADERS: [&str; 5] = ["content-type", "content-length", "host", "transfer-encoding", "connection"];

/// The per-request timeout when none is set.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

impl Endpoint {
    pub fn new(model: String, base_url: String, api_key: Option<String>) -> Self {
        Endpoint {
            model,
            base_url,
            api_key,
            timeout: DEFAULT_TIMEOUT,
            retry: RetryPolicy::default(),
            stream: false,
            limits: WireLimits::default(),
            max_tool_name_bytes: None,
            context_window: None,
            settings: Default::default(),
            extra_headers: Default::default(),
            query: Vec::new(),
            client: Arc::new(OnceLock::new()),
        }
    }

    /// Adds a header every request carries (Azure OpenAI's `api-key`, `OpenAI-Organization`,
    /// `OpenAI-Project`, …), replacing the wire's own of that name. A name that is not a header name, one
    /// the HTTP exchange sets itself (`content-type`, `host`, …), or a value a header cannot carry is
    /// refused, naming the header (never the value, which may be a secret).
    pub fn add_header(&mut self, name: &str, value: &str) -> Result<(), String> {
        let header = reqwest::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("headers: {name:?} is not a header name"))?;
        if RESERVED_HEADERS.contains(&header.as_str()) {
            return Err(format!("headers: {name} is set by the HTTP exchange itself"));
        }
        let mut value = reqwest::header::HeaderValue::from_str(value)
            .map_err(|_| format!("headers: the value of {name} is not a valid header value"))?;
        value.set_sensitive(true);
        self.extra_headers.insert(header, value);
        Ok(())
    }

    /// Adds a query parameter every request's URL carries (Azure OpenAI's `api-version`); an empty name is
    /// refused.
    pub fn add_query(&mut self, name: &str, value: &str) -> Result<(), String> {
        if name.trim().is_empty() {
            return Err("query: a parameter name is empty".into());
        }
        self.query.push((name.to_string(), value.to_string()));
        Ok(())
    }

    /// A new client is needed when the timeout changes.
    pub fn reset_client(&mut self) {
        self.client = Arc::new(OnceLock::new());
    }

    pub fn client(&self) -> Result<reqwest::Client, ModelError> {
        if let Some(c) = self.client.get() {
            return Ok(c.clone());
        }
        let c = http_client(self.timeout)?;
        Ok(self.client.get_or_init(|| c).clone())
    }

    /// The URL of `path` under the base URL, with the model's query parameters.
    pub fn url(&self, path: &str) -> String {
        let url = format!("{}/{path}", self.base_url.trim_end_matches('/'));
        if self.query.is_empty() {
            return url;
        }
        match reqwest::Url::parse(&url) {
            Ok(mut u) => {
                u.query_pairs_mut().extend_pairs(&self.query);
                u.to_string()
            }
            // Not a URL: the request fails naming it, as it would without parameters.
            Err(_) => url,
        }
    }

    /// POSTs `bytes` (a body from [`encode`]) to `url`, retrying what is worth retrying; returns the
    /// first 2xx response.
    pub async fn post(
        &self,
        url: &str,
        headers: &[(&str, String)],
        bytes: &bytes::Bytes,
    ) -> Result<reqwest::Response, ModelError> {
        let client = self.client()?;
        // Errors name the URL without its query (a parameter may carry a key, `?key=…`) or its user
        // information (a password); written only when there is an error to name it in.
        let named = || shown_url(url);
        // The connection a run's previous request just finished with goes back to the client's pool
        // from another task (hyper-util's idle watcher). One yield lets it get there first, so this
        // request checks it out instead of opening a new connection raced against it; with many runs
        // in flight that race left 1.3-1.7 open connections per in-flight request (issue 18).
        tokio::task::yield_now().await;
        let mut attempt = 0;
        loop {
            let mut http = client.post(url).header("content-type", "application/json").body(bytes.clone());
            for (k, v) in headers {
                http = http.header(*k, v);
            }
            // The model's own headers replace the wire's of the same name.
            http = http.headers(self.extra_headers.clone());
            let (err, retry_after) = match http.send().await {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    if (200..300).contains(&status) {
                        return Ok(resp);
                    }
                    let retry_after =
                        resp.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_string);
                    // Only the start of an error body is read: it is for its message.
                    let (bytes, _) = read_capped(resp, MAX_ERROR_BODY_BYTES).await?;
                    let message = error_message(&String::from_utf8_lossy(&bytes));
                    if !retryable(status, &message) {
                        return Err(ModelError::Http { status, message });
                    }
                    let err = ModelError::Http { status, message };
                    (err, retry_after)
                }
                // reqwest's own text for a timeout does not say so: the message names it.
                Err(e) if e.is_timeout() => (
                    ModelError::Transport(format!(
                        "no answer within the per-request timeout of {} s ({})",
                        self.timeout.as_secs_f64(),
                        named()
                    )),
                    None,
                ),
                // A certificate the client does not trust is not retried: it will not change.
                Err(e) if let Some(unknown_issuer) = refused_certificate(&e) => {
                    // Only a certificate of an issuer not trusted is a matter of trust; an expired one or
                    // one for another name is the server's to fix.
                    let hint = if unknown_issuer {
                        "; a private CA is trusted through SSL_CERT_FILE or SSL_CERT_DIR"
                    } else {
                        ""
                    };
                    return Err(ModelError::Transport(format!(
                        "the server's TLS certificate was refused: {} ({}){hint}",
                        causes(e),
                        named()
                    )));
                }
                Err(e) if e.is_connect() || e.is_request() => {
                    (ModelError::Transport(format!("{} ({})", causes(e), named())), None)
                }
                Err(e) => return Err(ModelError::Transport(format!("{} ({})", causes(e), named()))),
            };
            if attempt >= self.retry.max_retries {
                return Err(err);
            }
            tokio::time::sleep(backoff(&self.retry, attempt, retry_after.as_deref())).await;
            attempt += 1;
        }
    }
}

/// A request error's text with what caused it: reqwest's own says only "error sending request", the
/// causes say what failed (refused, reset, a certificate not trusted). Each cause once, without the URL.
pub(crate) fn causes(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        let t = c.to_string();
        if !text.contains(&t) {
            text.push_str(": ");
            text.push_str(&t);
        }
        cause = c.source();
    }
    text
}

/// Whether a request failed because the server's certificate was refused (`Some`, and whether for an
/// issuer not trusted): rustls's error, found in the causes directly or inside the I/O errors that carry
/// it (nested, and hidden from `source()`).
fn refused_certificate(e: &reqwest::Error) -> Option<bool> {
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        let mut inner: &(dyn std::error::Error + 'static) = c;
        while let Some(io) = inner.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()) {
            inner = io;
        }
        if let Some(rustls::Error::InvalidCertificate(why)) = inner.downcast_ref::<rustls::Error>() {
            return Some(matches!(why, rustls::CertificateError::UnknownIssuer));
        }
        cause = c.source();
    }
    None
}

/// `url` as an error or a `Debug` may show it: without its query (`?…`: a parameter may carry a key),
/// its fragment, or its user information (`user:password@`, which reqwest sends as basic auth).
pub(crate) fn shown_url(url: &str) -> String {
    let url = url.split_once(['?', '#']).map_or(url, |(before, _)| before);
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let end = rest.find('/').unwrap_or(rest.len());
            let host = rest[..end].rsplit_once('@').map_or(&rest[..end], |(_, host)| host);
            format!("{scheme}://{host}{}", &rest[end..])
        }
        None => url.to_string(),
    }
}

/// A wire's reader of a streamed answer, one event at a time (each wire's `StreamDecoder`).
pub(crate) trait StreamRead {
    /// What the whole stream answers.
    type Answer;
    /// Reads one event, handing text to `sink`; whether more events are expected.
    fn event(&mut self, event: &SseEvent, sink: &TextSink<'_>) -> Result<bool, ModelError>;
    /// The answer the events described.
    fn answer(self) -> Result<Self::Answer, ModelError>;
}

impl Endpoint {
    /// POSTs a streamed request and reads its answer with a fresh reader from `reader`. An error the
    /// stream reports (an error event, read as the HTTP error it stands for) gets the same retry rule
    /// as an error status ([`retryable`]), as long as no text has reached the sink yet: text already
    /// shown is never shown twice, so past it the error ends the request.
    pub async fn post_stream<R: StreamRead>(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &bytes::Bytes,
        sink: &TextSink<'_>,
        reader: impl Fn() -> R,
    ) -> Result<R::Answer, ModelError> {
        let mut attempt = 0;
        loop {
            let resp = self.post(url, headers, body).await?;
            let shown = AtomicBool::new(false);
            let tracked = |t: &str| {
                shown.store(true, Ordering::Relaxed);
                sink(t);
            };
            let mut read = reader();
            let err = match read_events(resp, self.limits, |e| read.event(&e, &tracked)).await {
                Ok(()) => return read.answer(),
                Err(e) => e,
            };
            match &err {
                ModelError::Http { status, message }
                    if !shown.load(Ordering::Relaxed)
                        && attempt < self.retry.max_retries
                        && retryable(*status, message) =>
                {
                    tokio::time::sleep(backoff(&self.retry, attempt, None)).await;
                    attempt += 1;
                }
                _ => return Err(err),
            }
        }
    }
}

/// A request body serialized once, to be sent as often as the retries need. The wires encode it before
/// the request and drop the JSON tree it came from, so an in-flight run holds only these bytes while it
/// waits (issue 18, RSS per in-flight run).
pub(crate) fn encode(body: &(impl serde::Serialize + ?Sized)) -> Result<bytes::Bytes, ModelError> {
    let bytes = serde_json::to_vec(body).map_err(|e| ModelError::InvalidResponse(format!("the request body: {e}")))?;
    Ok(bytes::Bytes::from(bytes))
}

pub(crate) fn http_client(timeout: Duration) -> Result<reqwest::Client, ModelError> {
    // reqwest is built without a default crypto provider; ring is ours. A second install is a no-op.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(timeout)
        .build()
        .map_err(|e| ModelError::Transport(format!("the HTTP client could not be built: {e}")))
}

/// Reads at most `max` bytes of a body, chunk by chunk; `true` with them when there was more (which
/// is then not read).
async fn read_capped(mut resp: reqwest::Response, max: usize) -> Result<(Vec<u8>, bool), ModelError> {
    let mut out = Vec::new();
    while let Some(chunk) =
        resp.chunk().await.map_err(|e| ModelError::Transport(format!("the answer broke off: {e}")))?
    {
        let room = max.saturating_sub(out.len());
        if chunk.len() > room {
            out.extend_from_slice(chunk.get(..room).unwrap_or_default());
            return Ok((out, true));
        }
        out.extend_from_slice(&chunk);
    }
    Ok((out, false))
}

/// Reads a whole JSON body of at most `max` bytes (`max_body_bytes`): a longer one is refused as
/// soon as its length says so, or its bytes do, without reading the rest.
pub(crate) async fn json_body(resp: reqwest::Response, max: usize) -> Result<Value, ModelError> {
    let too_long = || over("the answer", "max_body_bytes", max, "bytes");
    if resp.content_length().is_some_and(|n| n > max as u64) {
        return Err(too_long());
    }
    let (bytes, more) = read_capped(resp, max).await?;
    if more {
        return Err(too_long());
    }
    serde_json::from_slice(&bytes).map_err(|e| {
        ModelError::InvalidResponse(format!("not JSON ({e}): {}", truncate(&String::from_utf8_lossy(&bytes), 300)))
    })
}

pub(crate) fn truncate(s: &str, max: usize) -> &str {
    match s.char_indices().nth(max) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

/// The message of an error body (`{"error": {"message": …}}` on all three wires), else the body itself.
pub(crate) fn error_message(text: &str) -> String {
    serde_json::from_str::<Value>(text)
        .ok()
        .and_then(|v| v.pointer("/error/message").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| truncate(text, 500).to_string())
}

/// The error a stream reports in place of an answer (a Chat Completions chunk's `error`, an Anthropic
/// `error` event's `error`, a Responses `error` event), read as the HTTP error it stands for, so a run
/// fails with the same code streamed and not: the status is the error's numeric `code` (llama.cpp and
/// other compatible servers send it), else its `type` or textual `code` (Anthropic's and OpenAI's error
/// types). An error with neither is an answer that could not be read.
pub(crate) fn stream_error(error: &Value) -> ModelError {
    let message = error.get("message").and_then(Value::as_str).unwrap_or("the stream reported an error").to_string();
    let by_code = error.get("code").and_then(Value::as_u64).and_then(|c| u16::try_from(c).ok());
    let by_type = || {
        let kind = |key: &str| error.get(key).and_then(Value::as_str);
        Some(match kind("type").filter(|t| *t != "error").or_else(|| kind("code"))? {
            "invalid_request_error" => 400,
            "authentication_error" => 401,
            "permission_error" => 403,
            "not_found_error" => 404,
            "request_too_large" => 413,
            "rate_limit_error" | "rate_limit_exceeded" => 429,
            "api_error" | "server_error" => 500,
            "overloaded_error" => 529,
            _ => return None,
        })
    };
    match by_code.filter(|c| (400..600).contains(c)).or_else(by_type) {
        Some(status) => ModelError::Http { status, message },
        None => ModelError::InvalidResponse(format!("the stream reported an error: {message}")),
    }
}

/// A JSON number as a token count: 0 when absent, not a number or negative; a count past `u64::MAX`
/// (`1e30`) is `u64::MAX`, so a huge count still stops a budget rather than reading as none.
pub(crate) fn count(v: Option<&Value>) -> u64 {
    match v {
        Some(Value::Number(n)) => n.as_u64().unwrap_or_else(|| {
            // A float or a negative integer. `as` saturates: NaN and negatives give 0, huge gives MAX.
            n.as_f64().map_or(0, |f| f as u64)
        }),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{anthropic, openai_chat, openai_responses};
    use super::*;

    fn status(e: &ModelError) -> Option<u16> {
        match e {
            ModelError::Http { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// A stream's error event is the HTTP error it stands for on every wire (code `model_http`, as the
    /// same error unstreamed), so the one retry rule reads it the same way.
    #[test]
    fn a_streamed_error_is_the_http_error_it_stands_for_on_every_wire() {
        let sink = |_: &str| {};
        let llama = json!({"error": {"code": 500, "type": "server_error",
            "message": "The model output does not match the expected format"}});
        let mut chat = openai_chat::StreamDecoder::new(WireLimits::default());
        let err = chat.push(&SseEvent { event: None, data: llama.to_string() }, &sink).unwrap_err();
        assert_eq!((err.code(), status(&err)), ("model_http", Some(500)));
        assert!(!super::super::retry::retryable(500, &err.to_string()), "{err}");

        let overloaded = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
        let mut claude = anthropic::StreamDecoder::new(WireLimits::default());
        let err =
            claude.push(&SseEvent { event: Some("error".into()), data: overloaded.to_string() }, &sink).unwrap_err();
        assert_eq!((err.code(), status(&err)), ("model_http", Some(529)));

        let limited = json!({"type": "error", "code": "rate_limit_exceeded", "message": "slow down", "param": null});
        let mut responses = openai_responses::StreamDecoder::new(WireLimits::default());
        let err =
            responses.push(&SseEvent { event: Some("error".into()), data: limited.to_string() }, &sink).unwrap_err();
        assert_eq!((err.code(), status(&err)), ("model_http", Some(429)));

        // Negative control: an error that names no status stays an unreadable answer.
        let bare = json!({"error": {"message": "something"}});
        let mut chat = openai_chat::StreamDecoder::new(WireLimits::default());
        let err = chat.push(&SseEvent { event: None, data: bare.to_string() }, &sink).unwrap_err();
        assert_eq!(err.code(), "model_response");
    }
}
