//! Elicitation: an MCP server asks the user for input (a form with a JSON schema, or a URL to visit)
//! while it handles a request. The request reaches the host's [`Elicit`] handler; without one it is
//! declined.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the server asks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElicitationRequest {
    /// The server's configured name.
    pub server: String,
    /// The text to show the user.
    pub message: String,
    /// `form` (answer with an object that matches `schema`) or `url` (the user visits `url`).
    pub mode: String,
    /// Form: the JSON schema of the answer (an object of primitive properties).
    #[serde(default)]
    pub schema: Option<Value>,
    /// URL mode: where the user goes.
    #[serde(default)]
    pub url: Option<String>,
}

/// The user's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum ElicitationResponse {
    /// Accepted, with the content (form mode: an object matching the schema).
    Accept {
        #[serde(default)]
        /// What the user entered.
        content: Option<Value>,
    },
    /// The user said no.
    Decline,
    /// The user dismissed the request.
    Cancel,
}

/// The host's handler. An `Err` is sent to the server as an error response.
#[async_trait]
pub trait Elicit: Send + Sync {
    /// Asks the user; the answer goes back to the server.
    async fn elicit(&self, request: ElicitationRequest) -> Result<ElicitationResponse, String>;
}

/// A handler from a Rust closure.
pub struct ElicitFn<F>(pub F);

#[async_trait]
impl<F, Fut> Elicit for ElicitFn<F>
where
    F: Fn(ElicitationRequest) -> Fut + Send + Sync,
    Fut: std::future::Future<Output = Result<ElicitationResponse, String>> + Send,
{
    async fn elicit(&self, request: ElicitationRequest) -> Result<ElicitationResponse, String> {
        (self.0)(request).await
    }
}

/// rmcp's request as ours.
pub(super) fn request(server: &str, params: rmcp::model::ElicitRequestParams) -> ElicitationRequest {
    match params {
        rmcp::model::ElicitRequestParams::FormElicitationParams { message, requested_schema, .. } => {
            ElicitationRequest {
                server: server.to_string(),
                message,
                mode: "form".to_string(),
                schema: serde_json::to_value(&requested_schema).ok(),
                url: None,
            }
        }
        rmcp::model::ElicitRequestParams::UrlElicitationParams { message, url, .. } => ElicitationRequest {
            server: server.to_string(),
            message,
            mode: "url".to_string(),
            schema: None,
            url: Some(url),
        },
        _ => ElicitationRequest {
            server: server.to_string(),
            message: String::new(),
            mode: "unknown".to_string(),
            schema: None,
            url: None,
        },
    }
}

/// Why a request must not reach the host, or `None`: a URL-mode request's URL must be https (http only
/// to a loopback address), so a server cannot hand the host a `javascript:`, `file:` or plain-http link
/// to open. A URL that passes reaches the host as parsed and serialized again (its host in ASCII,
/// punycode for a non-ASCII name; spaces and control characters percent-encoded or refused), never as
/// the raw text the server sent.
pub(super) fn refusal(request: &mut ElicitationRequest) -> Option<String> {
    if request.mode != "url" {
        return None;
    }
    let Some(text) = &request.url else { return Some("a URL-mode elicitation without a URL".to_string()) };
    let Ok(url) = url::Url::parse(text) else { return Some(format!("'{text}' is not a URL")) };
    let why = refused_url(&url);
    if why.is_none() {
        request.url = Some(url.to_string());
    }
    why
}

fn refused_url(url: &url::Url) -> Option<String> {
    let loopback = match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(a)) => a.is_loopback(),
        Some(url::Host::Ipv6(a)) => a.is_loopback(),
        None => false,
    };
    if !url.username().is_empty() || url.password().is_some() {
        return Some("the elicitation URL carries userinfo (a name before '@'), which hides the real host".to_string());
    }
    match url.scheme() {
        "https" if url.host().is_some() => None,
        "http" if loopback => None,
        scheme => Some(format!(
            "the elicitation URL's scheme '{scheme}' is refused: only https (or http to a loopback address) reaches the host"
        )),
    }
}

/// A decline that says why (in the result's `_meta`, key `ambit/reason`).
pub(super) fn declined(why: String) -> rmcp::model::ElicitResult {
    let mut r = rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Decline);
    let mut meta = serde_json::Map::new();
    meta.insert("ambit/reason".to_string(), Value::String(why));
    r.meta = Some(rmcp::model::MetaObject(meta));
    r
}

/// Our answer as rmcp's.
pub(super) fn result(response: ElicitationResponse) -> rmcp::model::ElicitResult {
    use rmcp::model::{ElicitResult, ElicitationAction};
    match response {
        ElicitationResponse::Accept { content } => {
            let r = ElicitResult::new(ElicitationAction::Accept);
            match content {
                Some(c) => r.with_content(c),
                None => r,
            }
        }
        ElicitationResponse::Decline => ElicitResult::new(ElicitationAction::Decline),
        ElicitationResponse::Cancel => ElicitResult::new(ElicitationAction::Cancel),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url_request(url: &str) -> ElicitationRequest {
        ElicitationRequest {
            server: "s".into(),
            message: "open this".into(),
            mode: "url".into(),
            schema: None,
            url: Some(url.into()),
        }
    }

    #[test]
    fn attack_an_elicitation_url_reaches_the_host_parsed_not_raw() {
        // A lookalike non-ASCII host and a space: the host gets the punycode host and an encoded path.
        let mut r = url_request("https://аpple.com/sign in");
        assert_eq!(refusal(&mut r), None);
        assert_eq!(r.url.as_deref(), Some("https://xn--pple-43d.com/sign%20in"));
        // Refused ones are declined (their text never reaches the host).
        for bad in
            ["javascript:alert(1)", "http://example.com/x", "https://user@example.com/", "http://evil.localhost/"]
        {
            assert!(refusal(&mut url_request(bad)).is_some(), "{bad}");
        }
        // Control: an ordinary https URL passes as it was.
        let mut ok = url_request("https://example.com/consent?x=1");
        assert_eq!(refusal(&mut ok), None);
        assert_eq!(ok.url.as_deref(), Some("https://example.com/consent?x=1"));
    }
}
