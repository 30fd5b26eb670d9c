//! web_fetch (read): GET a URL under the session's network setting. Every address a name resolves to
//! is checked, the connection is pinned to a checked address (no rebinding between check and use), and
//! redirects are followed by hand so each hop is checked too. The body is streamed with a byte bound:
//! enough for `max_length` characters and a look past them, never more than [`FETCH_INLINE_MAX_BYTES`]
//! for an answer returned inline, and never more than [`super::MAX_OUTPUT_BYTES`] even when the output
//! is saved to the scratchpad (which lifts `max_length`'s default) or the body never ends.

use std::net::SocketAddr;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::MAX_OUTPUT_BYTES;
use crate::error::ToolError;
use crate::permission::network::AddrRange;
use crate::permission::{Level, Network, network};
use crate::tools::{Tool, ToolContext, ToolSpec};

/// The default limit on the characters returned.
pub const DEFAULT_FETCH_LIMIT: usize = 100_000;
/// The most bytes of a body read when the answer goes to the model inline, whatever `max_length` says
/// (saved to the scratchpad, up to [`MAX_OUTPUT_BYTES`] are read). An inline answer is copied into the
/// conversation, every later request and the run's result, so its ceiling is kept well under the saved one.
pub const FETCH_INLINE_MAX_BYTES: usize = 1 << 20;
/// How many bytes past the `max_length` characters' worth are read, so a body that ends soon after the
/// limit is still counted exactly in the note on what was left out.
pub const FETCH_LOOKAHEAD_BYTES: usize = 64 << 10;
const MAX_REDIRECTS: usize = 10;
/// The longest one request may take, from connecting to the body's last byte.
const FETCH_TIMEOUT: Duration = Duration::from_secs(60);

/// A failed request or body read in words; a timeout names the limit.
fn request_error(url: &reqwest::Url, e: reqwest::Error) -> ToolError {
    if e.is_timeout() {
        fail(format!("{url}: no complete answer within {} s, web_fetch's time limit", FETCH_TIMEOUT.as_secs()))
    } else {
        fail(format!("{url}: {e}"))
    }
}

fn fail(e: impl std::fmt::Display) -> ToolError {
    ToolError::Failed(e.to_string())
}

/// web_fetch.
pub struct WebFetch {
    spec: ToolSpec,
}

impl WebFetch {
    /// The tool.
    pub fn new() -> Self {
        WebFetch {
            spec: ToolSpec::new(
                "web_fetch",
                "Fetches a URL (GET) and returns the status and the body as text, cut at `max_length` characters (default 100000). At most 1 MiB of a body is read (8 MiB when saved to the scratchpad).",
                json!({"type": "object", "properties": {
                    "url": {"type": "string", "description": "An http or https URL"},
                    "headers": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Request headers"},
                    "max_length": {"type": "integer", "minimum": 0, "description": "At most this many characters of the body"}
                }, "required": ["url"], "additionalProperties": false}),
            )
            .with_level(Level::Read)
            .with_needs_network(true),
        }
    }
}

impl Default for WebFetch {
    fn default() -> Self {
        Self::new()
    }
}

/// The addresses `url` may be fetched from under `net`, or why none may.
async fn checked_addrs(url: &reqwest::Url, net: Network, allowed: &[AddrRange]) -> Result<Vec<SocketAddr>, ToolError> {
    if net == Network::None {
        return Err(fail("the network is off for this session (network: none)"));
    }
    let host = url.host_str().ok_or_else(|| fail(format!("the URL has no host: {url}")))?;
    let port = url.port_or_known_default().unwrap_or(80);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port))
        .await
        .map_err(|e| fail(format!("could not resolve {host}: {e}")))?
        .collect();
    for a in &addrs {
        if let Some(why) = network::refusal(net, a.ip(), allowed) {
            return Err(fail(format!("refused {url}: {why}")));
        }
    }
    if addrs.is_empty() {
        return Err(fail(format!("{host} resolved to no address")));
    }
    Ok(addrs)
}

#[async_trait]
impl Tool for WebFetch {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn call(&self, _: Value) -> Result<Value, ToolError> {
        Err(fail("web_fetch runs inside an agent"))
    }
    async fn call_in(&self, args: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let mut url = reqwest::Url::parse(args.get("url").and_then(Value::as_str).unwrap_or_default())
            .map_err(|e| fail(format!("argument 'url' is not a URL: {e}")))?;
        let explicit = args.get("max_length").and_then(Value::as_u64).map(|n| n as usize);
        // Saved to the scratchpad, the length limit is lifted; an explicit max_length still applies.
        let saving = crate::agent::scratchpad::saving();
        let limit = if saving { explicit.unwrap_or(usize::MAX) } else { explicit.unwrap_or(DEFAULT_FETCH_LIMIT) };
        let mut headers = reqwest::header::HeaderMap::new();
        for (k, v) in args.get("headers").and_then(Value::as_object).into_iter().flatten() {
            let name = reqwest::header::HeaderName::from_bytes(k.as_bytes())
                .map_err(|_| fail(format!("argument 'headers': '{k}' is not a header name")))?;
            let value = reqwest::header::HeaderValue::from_str(v.as_str().unwrap_or_default())
                .map_err(|_| fail(format!("argument 'headers': the value of '{k}' is not a header value")))?;
            headers.insert(name, value);
        }
        let _ = rustls::crypto::ring::default_provider().install_default();
        for _ in 0..=MAX_REDIRECTS {
            if !matches!(url.scheme(), "http" | "https") {
                return Err(fail(format!("only http and https URLs are fetched, not {}", url.scheme())));
            }
            let addrs = checked_addrs(&url, ctx.network, &ctx.allow_local_addresses).await?;
            let host = url.host_str().unwrap_or_default().to_string();
            let client = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(FETCH_TIMEOUT)
                .resolve_to_addrs(&host, &addrs)
                .build()
                .map_err(fail)?;
            // Credentials for this host (crate::credentials), per hop: a redirect elsewhere goes without.
            let mut sent = headers.clone();
            if let Some(c) = &ctx.credentials {
                for (name, value) in c.web_headers(&host).await.map_err(fail)? {
                    let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                        .map_err(|_| fail(format!("credentials: '{name}' is not a header name")))?;
                    let mut value = reqwest::header::HeaderValue::from_str(&value)
                        .map_err(|_| fail("credentials: a credential is not a header value"))?;
                    value.set_sensitive(true);
                    sent.insert(name, value);
                }
            }
            let resp = client.get(url.clone()).headers(sent).send().await.map_err(|e| request_error(&url, e))?;
            let status = resp.status();
            if status.is_redirection()
                && let Some(loc) = resp.headers().get("location").and_then(|l| l.to_str().ok())
            {
                url = url.join(loc).map_err(|e| fail(format!("a redirect to an invalid URL: {e}")))?;
                continue;
            }
            let ceiling = if saving { MAX_OUTPUT_BYTES } else { FETCH_INLINE_MAX_BYTES };
            let text = read_body(resp, limit, ceiling, &url).await?;
            return Ok(Value::String(format!("HTTP {}\n\n{text}", status.as_u16())));
        }
        Err(fail(format!("more than {MAX_REDIRECTS} redirects")))
    }
}

/// Reads at most `limit` characters of a response's body, streamed: no more bytes than those characters
/// can take plus [`FETCH_LOOKAHEAD_BYTES`], and never more than `ceiling`; then says what was left out.
/// A body that ends within the bytes read is cut and counted exactly, as [`super::clip`] does.
async fn read_body(
    mut resp: reqwest::Response,
    limit: usize,
    ceiling: usize,
    url: &reqwest::Url,
) -> Result<String, ToolError> {
    let budget = limit.saturating_mul(4).saturating_add(FETCH_LOOKAHEAD_BYTES).min(ceiling);
    let mut body: Vec<u8> = Vec::new();
    let mut stopped = false;
    while let Some(chunk) = resp.chunk().await.map_err(|e| request_error(url, e))? {
        let room = budget - body.len();
        if chunk.len() > room {
            body.extend_from_slice(chunk.get(..room).unwrap_or_default());
            stopped = true;
            break;
        }
        body.extend_from_slice(&chunk);
    }
    // The connection is dropped with `resp`: nothing more of the body is read.
    drop(resp);
    if !stopped {
        return Ok(super::clip(&String::from_utf8_lossy(&body), limit, "the body"));
    }
    // In place: the bytes read become the text, cut at a character boundary and at `limit` characters.
    let mut text = match super::utf8_cut(&body).map(str::len) {
        Some(valid) => {
            body.truncate(valid);
            String::from_utf8(body).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
        }
        None => String::from_utf8_lossy(&body).into_owned(),
    };
    if let Some((i, _)) = text.char_indices().nth(limit) {
        text.truncate(i);
    }
    let why = if budget == MAX_OUTPUT_BYTES {
        format!("web_fetch reads at most {} of a body", super::bytes_in_words(MAX_OUTPUT_BYTES as u64))
    } else if budget == ceiling {
        format!(
            "web_fetch reads at most {} of a body for an answer returned inline; save it to the scratchpad to read up to {}",
            super::bytes_in_words(ceiling as u64),
            super::bytes_in_words(MAX_OUTPUT_BYTES as u64)
        )
    } else {
        format!("reading stopped after {budget} bytes, enough for max_length {limit}")
    };
    text.push_str(&format!("\n[… more of the body not shown: {why}]"));
    Ok(text)
}
