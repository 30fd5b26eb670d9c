//! What every wire shares: the endpoint settings (base URL, key, timeout, retries, streaming), the HTTP
//! client, and one POST with retries (backoff and jitter on 429, 5xx and connection failures,
//! honouring `retry-after`).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::Value;

use super::limits::{MAX_ERROR_BODY_BYTES, WireLimits, over};
use super::retry::{RetryPolicy, backoff, retryable_status};
use crate::error::ModelError;

/// The settings of one endpoint, shared by the three wires.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    pub model: String,
    pub base_url: String,
    pub api_key: Option<String>,
    pub timeout: Duration,
    pub retry: RetryPolicy,
    pub stream: bool,
    /// What one answer may hold (see [`WireLimits`]).
    pub limits: WireLimits,
    client: Arc<OnceLock<reqwest::Client>>,
}

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
            client: Arc::new(OnceLock::new()),
        }
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

    pub fn url(&self, path: &str) -> String {
        format!("{}/{path}", self.base_url.trim_end_matches('/'))
    }

    /// POSTs `body` to `url`, retrying what is worth retrying; returns the first 2xx response.
    pub async fn post(
        &self,
        url: &str,
        headers: &[(&str, String)],
        body: &(impl serde::Serialize + ?Sized),
    ) -> Result<reqwest::Response, ModelError> {
        let client = self.client()?;
        // Serialized once, sent as often as the retries need.
        let bytes = bytes::Bytes::from(
            serde_json::to_vec(body).map_err(|e| ModelError::InvalidResponse(format!("the request body: {e}")))?,
        );
        let mut attempt = 0;
        loop {
            let mut http = client.post(url).header("content-type", "application/json").body(bytes.clone());
            for (k, v) in headers {
                http = http.header(*k, v);
            }
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
                    let err = ModelError::Http { status, message: error_message(&String::from_utf8_lossy(&bytes)) };
                    if !retryable_status(status) {
                        return Err(err);
                    }
                    (err, retry_after)
                }
                // reqwest's own text for a timeout does not say so: the message names it.
                Err(e) if e.is_timeout() => (
                    ModelError::Transport(format!(
                        "no answer within the per-request timeout of {} s ({url})",
                        self.timeout.as_secs_f64()
                    )),
                    None,
                ),
                Err(e) if e.is_connect() || e.is_request() => (ModelError::Transport(format!("{e} ({url})")), None),
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
