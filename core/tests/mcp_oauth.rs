//! OAuth 2.1 and elicitation against a real OAuth-protected MCP server: tests/mcp/oauth_server.py (the
//! `mcp` package 2.x, its own authorization server with dynamic registration, PKCE and refresh
//! tokens). The consent step here plays the browser: it follows the authorization URL (the server
//! consents at once) and hands back the redirect. Negative controls: a wrong bearer token, a forged
//! code, no consent callback, and an elicitation with no handler (declined).
//!
//! The attack tests run the server in its hostile modes (a second, untrusted authorization server; a
//! server refusing every token; a registration that issues a secret or answers a huge error) and each
//! has a control: the same setup where the attack is let through, showing it is live.

mod mcp_support;

use std::sync::{Arc, Mutex};

use ambit::Agent;
use ambit::credentials::Credentials;
use ambit::deferral::{Deferral, ToolSource};
use ambit::mcp::{
    AuthorizeFn, ElicitFn, ElicitationRequest, ElicitationResponse, FileTokenStore, McpHub, McpOAuth, McpServer,
    MemoryTokenStore,
};
use mcp_support::{call, scripted, text};
use serde_json::{Value, json};

const REDIRECT: &str = "http://127.0.0.1:1/callback";

struct Server {
    url: String,
    _child: tokio::process::Child,
}

impl Server {
    async fn start() -> Server {
        Server::start_with(&[]).await
    }

    /// The server in a hostile mode (its arguments: see tests/mcp/oauth_server.py).
    async fn start_with(args: &[&str]) -> Server {
        let (url, child) = mcp_support::oauth_server(args).await;
        Server { url, _child: child }
    }

    fn base(&self) -> String {
        self.url.trim_end_matches("/mcp").to_string()
    }

    async fn stats(&self) -> Value {
        reqwest::get(format!("{}/stats", self.base())).await.unwrap().json().await.unwrap()
    }
}

/// The browser's part: follow the authorization URL without following its redirect; record the URL.
fn browser(
    urls: Arc<Mutex<Vec<String>>>,
) -> AuthorizeFn<impl Fn(String) -> futures::future::BoxFuture<'static, Result<String, String>>> {
    AuthorizeFn(move |url: String| {
        urls.lock().unwrap().push(url.clone());
        let fut: futures::future::BoxFuture<'static, Result<String, String>> = Box::pin(async move {
            let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
            let resp = http.get(&url).send().await.map_err(|e| e.to_string())?;
            resp.headers()
                .get("location")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
                .ok_or_else(|| format!("no redirect: {}", resp.status()))
        });
        fut
    })
}

async fn name_ada(request: ElicitationRequest) -> Result<ElicitationResponse, String> {
    assert_eq!(request.server, "notes");
    assert_eq!(request.mode, "form");
    assert!(request.schema.as_ref().unwrap()["properties"]["name"].is_object(), "{request:?}");
    Ok(ElicitationResponse::Accept { content: Some(json!({"name": "Ada"})) })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_code_with_consent_tokens_stored_and_never_shown_to_the_model() {
    let server = Server::start().await;
    let dir = tempfile::tempdir().unwrap();
    let store_path = dir.path().join("tokens.json");
    let urls = Arc::new(Mutex::new(Vec::new()));
    let oauth = McpOAuth::authorization_code(REDIRECT, browser(urls.clone()))
        .client_name("ambit-test")
        .token_store(FileTokenStore::new(&store_path));
    let mcp = McpServer::http("notes", server.url.clone()).oauth(oauth).on_elicit(ElicitFn(name_ada));
    let (model, seen) = scripted(vec![
        call("c1", "mcp__notes__whoami", json!({})),
        call("c2", "mcp__notes__ask_name", json!({})),
        call("c3", "mcp__notes__leak_token", json!({})),
        text("done"),
    ]);
    let agent = Agent::builder().model(model).mcp(mcp).build().unwrap();
    let result = agent.run("who am I?").await.unwrap();
    assert_eq!(result.output, "done");
    // One consent, to a PKCE (S256) authorization request for this resource (RFC 8707).
    let urls = urls.lock().unwrap().clone();
    assert_eq!(urls.len(), 1, "{urls:?}");
    let auth = url::Url::parse(&urls[0]).unwrap();
    let q: std::collections::HashMap<_, _> = auth.query_pairs().into_owned().collect();
    assert_eq!(q.get("code_challenge_method").map(String::as_str), Some("S256"), "{q:?}");
    assert_eq!(q.get("resource"), Some(&server.url), "{q:?}");
    assert!(q.get("scope").is_some_and(|s| s.contains("notes:read")), "{q:?}");
    // The tools ran with the token; the elicitation reached the handler.
    assert!(!result.tool_calls[0].is_error, "{}", result.tool_calls[0].result);
    assert!(result.tool_calls[0].result.contains("\"scopes\": [\"notes:read\"]"), "{}", result.tool_calls[0].result);
    assert!(result.tool_calls[1].result.starts_with("hello Ada"), "{}", result.tool_calls[1].result);
    // A server that quotes the token back: the model gets the placeholder (the control that it was quoted).
    assert!(
        result.tool_calls[2].result.contains("your token is [credential:oauth.notes]"),
        "{}",
        result.tool_calls[2].result
    );
    let stats = server.stats().await;
    assert_eq!((stats["registrations"].as_u64(), stats["codes_exchanged"].as_u64()), (Some(1), Some(1)), "{stats}");
    // The tokens are in the store (mode 0600) and nowhere the model or the result could see them.
    let stored: Value = serde_json::from_str(&std::fs::read_to_string(&store_path).unwrap()).unwrap();
    let entry: Value = serde_json::from_str(stored[&server.url].as_str().unwrap()).unwrap();
    let access = entry["token_response"]["access_token"].as_str().unwrap().to_string();
    let refresh = entry["token_response"]["refresh_token"].as_str().unwrap().to_string();
    assert!(access.starts_with("at-") && refresh.starts_with("rt-"), "{entry}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&store_path).unwrap().permissions().mode() & 0o777, 0o600);
    }
    let requests = format!("{:?}", seen.lock().unwrap());
    let outcome = serde_json::to_string(&result).unwrap();
    for secret in [&access, &refresh] {
        assert!(!requests.contains(secret.as_str()) && !outcome.contains(secret.as_str()));
    }

    // A second client with the same store uses the stored token: no consent (its callback would fail).
    let refuse = AuthorizeFn(|_url: String| async { Err::<String, String>("no consent expected".into()) });
    let again = McpServer::http("notes", server.url.clone())
        .oauth(McpOAuth::authorization_code(REDIRECT, refuse).token_store(FileTokenStore::new(&store_path)));
    let hub = McpHub::new(vec![again], Deferral::Eager, None);
    hub.refresh().await;
    let listing = hub.listing();
    assert!(listing.unavailable.is_empty(), "{:?}", listing.unavailable);
    let whoami = listing.entries.iter().find(|e| e.tool.spec().name == "mcp__notes__whoami").unwrap().tool.clone();
    whoami.call(json!({})).await.unwrap();

    // Every access token invalid: the next request refreshes (no consent) and goes through.
    reqwest::Client::new().post(format!("{}/expire", server.base())).send().await.unwrap();
    let out = whoami.call(json!({})).await.unwrap();
    assert!(out.to_string().contains("notes:read"), "{out}");
    let stats = server.stats().await;
    assert_eq!((stats["refreshes"].as_u64(), stats["authorizations"].as_u64()), (Some(1), Some(1)), "{stats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_token_a_forged_code_and_no_consent_are_refused() {
    let server = Server::start().await;
    // A bearer token the server never issued: 401, the server unavailable, the token not in the reason.
    let creds = Credentials::new().value("notes_token", "at-not-a-token-the-server-issued");
    let wrong = McpServer::http("notes", server.url.clone()).bearer("notes_token");
    let hub = McpHub::new(vec![wrong], Deferral::Eager, Some(creds));
    hub.refresh().await;
    let reason = hub.listing().unavailable.first().expect("refused").reason.clone();
    assert!(!reason.contains("at-not-a-token"), "{reason}");
    assert!(reason.to_lowercase().contains("auth"), "{reason}");

    // A consent that hands back a code the server never issued: the exchange fails.
    let forged = AuthorizeFn(|_url: String| async {
        Ok::<String, String>(format!("{REDIRECT}?code=forged-code&state=whatever"))
    });
    let hub = McpHub::new(
        vec![McpServer::http("notes", server.url.clone()).oauth(McpOAuth::authorization_code(REDIRECT, forged))],
        Deferral::Eager,
        None,
    );
    hub.refresh().await;
    let reason = hub.listing().unavailable.first().expect("refused").reason.clone();
    assert!(reason.contains("OAuth for MCP server 'notes'"), "{reason}");

    // No consent callback: unavailable, saying so.
    let mut oauth = McpOAuth::authorization_code(REDIRECT, AuthorizeFn(|u: String| async move { Ok(u) }));
    oauth.on_authorize = None;
    let hub = McpHub::new(
        vec![McpServer::http("notes", server.url.clone()).oauth(oauth.token_store(MemoryTokenStore::new()))],
        Deferral::Eager,
        None,
    );
    hub.refresh().await;
    let reason = hub.listing().unavailable.first().expect("refused").reason.clone();
    assert!(reason.contains("no on_authorize callback"), "{reason}");
    let stats = server.stats().await;
    assert_eq!(stats["codes_exchanged"].as_u64(), Some(0), "{stats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elicitation_without_a_handler_is_declined() {
    let server = Server::start().await;
    let urls = Arc::new(Mutex::new(Vec::new()));
    let mcp = McpServer::http("notes", server.url.clone()).oauth(McpOAuth::authorization_code(REDIRECT, browser(urls)));
    let hub = McpHub::new(vec![mcp], Deferral::Eager, None);
    hub.refresh().await;
    let listing = hub.listing();
    assert!(listing.unavailable.is_empty(), "{:?}", listing.unavailable);
    let ask = listing.entries.iter().find(|e| e.tool.spec().name == "mcp__notes__ask_name").unwrap().tool.clone();
    let out = ask.call(json!({})).await.unwrap();
    assert!(out.to_string().contains("no name: decline"), "{out}");
}

#[test]
fn settings_are_checked_naming_the_field() {
    let no_redirect = McpOAuth { redirect_uri: None, ..McpOAuth::default() };
    let err = McpServer::http("s", "http://127.0.0.1:1/mcp").oauth(no_redirect).validate().unwrap_err();
    assert!(err.contains("oauth.redirect_uri"), "{err}");
    let cc = McpOAuth { client_secret: None, ..McpOAuth::client_credentials("id", "alias") };
    let err = McpServer::http("s", "http://127.0.0.1:1/mcp").oauth(cc).validate().unwrap_err();
    assert!(err.contains("oauth.client_secret"), "{err}");
    let stdio = McpServer::stdio("s", ["true"]).oauth(McpOAuth::client_credentials("id", "alias"));
    assert!(stdio.validate().unwrap_err().contains("HTTP server"));
    let cimd = McpOAuth::authorization_code(REDIRECT, AuthorizeFn(|u: String| async move { Ok(u) }))
        .client_metadata_url("http://insecure.example/client.json");
    let err = McpServer::http("s", "http://127.0.0.1:1/mcp").oauth(cimd).validate().unwrap_err();
    assert!(err.contains("oauth.client_metadata_url"), "{err}");
}

const PRE_CLIENT: &str = "pre-client";
const PRE_SECRET: &str = "pre-secret-0123456789";

fn pre_registered(urls: Arc<Mutex<Vec<String>>>) -> McpOAuth {
    McpOAuth::authorization_code(REDIRECT, browser(urls)).client_id(PRE_CLIENT, Some("pre".to_string()))
}

async fn reason_of(hub: &McpHub) -> String {
    hub.refresh().await;
    hub.listing().unavailable.first().map(|u| u.reason.clone()).unwrap_or_default()
}

/// Finding 1: a pre-registered client's secret goes only to the trusted authorization server. The MCP
/// server's metadata names another one (`evil`, at `localhost`): refused, naming `oauth.issuer`, with a
/// pin and without one (then the MCP server's own host is the trusted one); the control pins `evil`,
/// and the secret reaches it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_a_client_secret_goes_only_to_the_pinned_authorization_server() {
    let evil = Server::start_with(&["--host", "localhost"]).await;
    let server = Server::start_with(&["--authorization-server", &evil.base()]).await;
    let creds = || Some(Credentials::new().value("pre", PRE_SECRET));
    let urls = Arc::new(Mutex::new(Vec::new()));
    for oauth in [pre_registered(urls.clone()).issuer(server.base()), pre_registered(urls.clone())] {
        let hub =
            McpHub::new(vec![McpServer::http("notes", server.url.clone()).oauth(oauth)], Deferral::Eager, creds());
        let reason = reason_of(&hub).await;
        assert!(reason.contains("oauth.issuer") && reason.contains(&evil.base()), "{reason}");
    }
    assert!(urls.lock().unwrap().is_empty(), "no consent for a refused authorization server");
    let stats = evil.stats().await;
    assert_eq!((stats["secrets_received"].as_u64(), stats["authorizations"].as_u64()), (Some(0), Some(0)), "{stats}");
    // Control: the same setup trusting `evil` hands it the secret at its token endpoint.
    let trusting = pre_registered(urls.clone()).issuer(evil.base());
    let hub = McpHub::new(vec![McpServer::http("notes", server.url.clone()).oauth(trusting)], Deferral::Eager, creds());
    let _ = reason_of(&hub).await;
    let stats = evil.stats().await;
    assert!(stats["secrets_received"].as_u64() >= Some(1), "{stats}");
}

/// Finding 1: plain-http metadata or endpoints off loopback are refused before any request; a loopback
/// one (the control) is used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_plain_http_authorization_server_off_loopback_is_refused() {
    let server = Server::start_with(&["--authorization-server", "http://auth.example.invalid"]).await;
    let urls = Arc::new(Mutex::new(Vec::new()));
    let oauth = McpOAuth::authorization_code(REDIRECT, browser(urls.clone()));
    let hub = McpHub::new(vec![McpServer::http("notes", server.url.clone()).oauth(oauth)], Deferral::Eager, None);
    let reason = reason_of(&hub).await;
    assert!(reason.contains("plain http is allowed only to a loopback address"), "{reason}");
    // The pin itself must be https (or loopback http), naming the field.
    let pinned = McpOAuth::authorization_code(REDIRECT, browser(urls.clone())).issuer("http://auth.example.com");
    let err = McpServer::http("s", "https://mcp.example.com/mcp").oauth(pinned).validate().unwrap_err();
    assert!(err.contains("oauth.issuer") && err.contains("plain http"), "{err}");
    // Control: a loopback authorization server over http is reached (one consent).
    let local = Server::start_with(&["--host", "localhost"]).await;
    let server = Server::start_with(&["--authorization-server", &local.base()]).await;
    let oauth = McpOAuth::authorization_code(REDIRECT, browser(urls.clone()));
    let hub = McpHub::new(vec![McpServer::http("notes", server.url.clone()).oauth(oauth)], Deferral::Eager, None);
    let _ = reason_of(&hub).await;
    assert_eq!(local.stats().await["registrations"].as_u64(), Some(1));
}

/// Finding 4: a server that answers 401 to every token gets MAX consents in a row, then a typed auth
/// error without asking the user. Control: the first refreshes do consent (the attack drives them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_a_server_refusing_every_token_gets_bounded_consents() {
    let server = Server::start_with(&["--always-401"]).await;
    let urls = Arc::new(Mutex::new(Vec::new()));
    let oauth = McpOAuth::authorization_code(REDIRECT, browser(urls.clone()));
    let hub = McpHub::new(vec![McpServer::http("notes", server.url.clone()).oauth(oauth)], Deferral::Eager, None);
    let mut reasons = Vec::new();
    for _ in 0..6 {
        reasons.push(reason_of(&hub).await);
    }
    // Control: each of the first three reconnects asked for consent.
    assert_eq!(urls.lock().unwrap().len(), 3, "{reasons:?}");
    assert_eq!(server.stats().await["codes_exchanged"].as_u64(), Some(3));
    let last = reasons.last().unwrap();
    assert!(last.contains("3 authorizations in a row failed or the server refused their token"), "{last}");
}

/// Finding 4, second way round: authorizations that fail (the user declines, the token endpoint answers
/// an error) count too, so a server cannot have the host asked for consent on every request.
/// Control: the first three refreshes each asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_declined_consents_are_bounded_too() {
    let server = Server::start().await;
    let asked = Arc::new(Mutex::new(0usize));
    let count = asked.clone();
    let decline = AuthorizeFn(move |_url: String| {
        *count.lock().unwrap() += 1;
        let fut: futures::future::BoxFuture<'static, Result<String, String>> =
            Box::pin(async { Err("the user closed the window".to_string()) });
        fut
    });
    let oauth = McpOAuth::authorization_code(REDIRECT, decline);
    let hub = McpHub::new(vec![McpServer::http("notes", server.url.clone()).oauth(oauth)], Deferral::Eager, None);
    let mut reasons = Vec::new();
    for _ in 0..6 {
        reasons.push(reason_of(&hub).await);
    }
    assert_eq!(*asked.lock().unwrap(), 3, "{reasons:?}");
    assert!(reasons[0].contains("the user closed the window"), "{}", reasons[0]);
    let last = reasons.last().unwrap();
    assert!(last.contains("3 authorizations in a row failed"), "{last}");
}

/// The authorization URL comes from metadata a hostile server writes: a `javascript:` or userinfo URL
/// never reaches the host's browser. Control: the server's own https-less loopback endpoint does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_a_hostile_authorization_endpoint_never_reaches_the_browser() {
    for (endpoint, why) in [
        ("javascript:alert(document.cookie)//", "is not http or https"),
        ("https://accounts.example.com@evil.example/authorize", "carries userinfo"),
        ("http://evil.example/authorize", "plain http is allowed only to a loopback address"),
    ] {
        let server = Server::start_with(&["--authorization-endpoint", endpoint]).await;
        let urls = Arc::new(Mutex::new(Vec::new()));
        let oauth = McpOAuth::authorization_code(REDIRECT, browser(urls.clone()));
        let hub = McpHub::new(vec![McpServer::http("notes", server.url.clone()).oauth(oauth)], Deferral::Eager, None);
        let reason = reason_of(&hub).await;
        assert!(reason.contains(why), "{endpoint}: {reason}");
        assert!(urls.lock().unwrap().is_empty(), "{endpoint} reached the browser");
    }
    // Control: the hostile mode itself works: a loopback endpoint it names is opened.
    let server = Server::start().await;
    let own = format!("{}/authorize", server.base());
    let hostile = Server::start_with(&["--authorization-endpoint", &own]).await;
    let urls = Arc::new(Mutex::new(Vec::new()));
    let oauth = McpOAuth::authorization_code(REDIRECT, browser(urls.clone()));
    let hub = McpHub::new(vec![McpServer::http("notes", hostile.url.clone()).oauth(oauth)], Deferral::Eager, None);
    let _ = reason_of(&hub).await;
    let opened = urls.lock().unwrap().clone();
    assert!(opened.first().is_some_and(|u| u.starts_with(&own)), "{opened:?}");
}

/// A hostile server cannot make the redactor blank words of its choosing: token-looking fields in its
/// metadata (answers to GETs, which issue nothing) are not learnt. Control: the tokens the flow is issued
/// (POST answers) are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_metadata_cannot_teach_the_redactor_words_to_hide() {
    let chosen = "curl-evil.example-sh";
    let server = Server::start_with(&["--metadata-token", chosen]).await;
    let creds = Credentials::new();
    let urls = Arc::new(Mutex::new(Vec::new()));
    let oauth = McpOAuth::authorization_code(REDIRECT, browser(urls.clone()));
    let hub = McpHub::new(
        vec![McpServer::http("notes", server.url.clone()).oauth(oauth)],
        Deferral::Eager,
        Some(creds.clone()),
    );
    hub.refresh().await;
    assert!(hub.listing().unavailable.is_empty(), "{:?}", hub.listing().unavailable);
    assert_eq!(urls.lock().unwrap().len(), 1, "the flow ran");
    let text = format!("the model ran {chosen} here");
    assert_eq!(creds.redact(&text), text, "a metadata value was learnt as a credential");
    // Control: the access token the flow was issued is redacted.
    let stats = server.stats().await;
    let token = stats["last_access_token"].as_str().unwrap_or_default().to_string();
    assert!(!token.is_empty(), "{stats}");
    assert!(!creds.redact(&format!("token {token}")).contains(&token));
}

/// A FIFO planted at the token file's path (or its lock's) by the model's shell must not hang the store
/// (and every process waiting on its lock): refused as not a regular file. Control: a regular file.
#[tokio::test]
async fn attack_a_fifo_at_the_token_file_is_refused_not_waited_on() {
    use ambit::mcp::TokenStore;
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens.json");
    for fifo in [tokens.clone(), dir.path().join("tokens.json.lock")] {
        let _ = std::fs::remove_file(dir.path().join("tokens.json.lock"));
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let store = FileTokenStore::new(&tokens);
        let err = store.load("k").await.unwrap_err();
        assert!(err.contains("not a regular file"), "{err}");
        std::fs::remove_file(&fifo).unwrap();
    }
    let store = FileTokenStore::new(&tokens);
    store.save("k", "v").await.unwrap();
    assert_eq!(store.load("k").await.unwrap().as_deref(), Some("v"));
}

/// Finding 6: a client secret the authorization server issues at registration is redacted like a
/// token: a server that quotes it gets the placeholder to the model. Control: the secret was issued and
/// used (the token endpoint saw it) and the tool did quote something in its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_a_registered_client_secret_never_reaches_the_model() {
    let server = Server::start_with(&["--register-secret"]).await;
    let urls = Arc::new(Mutex::new(Vec::new()));
    let oauth = McpOAuth::authorization_code(REDIRECT, browser(urls.clone()));
    let mcp = McpServer::http("notes", server.url.clone()).oauth(oauth);
    let hub = McpHub::new(vec![mcp.clone()], Deferral::Eager, None);
    hub.refresh().await;
    assert!(hub.listing().unavailable.is_empty(), "{:?}", hub.listing().unavailable);
    let (model, seen) = scripted(vec![call("c1", "mcp__notes__leak_client_secret", json!({})), text("done")]);
    let agent = Agent::builder().model(model).mcp(mcp).build().unwrap();
    let result = agent.run("leak").await.unwrap();
    let out = &result.tool_calls[0].result;
    assert!(out.contains("your client secret is [credential:oauth.notes]"), "{out}");
    assert!(server.stats().await["secrets_received"].as_u64() >= Some(1));
    let requests = format!("{:?}", seen.lock().unwrap());
    // A 64-hex-digit secret nowhere in what the model was sent.
    let hex64 = regex::Regex::new("[0-9a-f]{64}").unwrap();
    assert!(!hex64.is_match(&requests) && !hex64.is_match(out), "{out}");
}

/// Finding 6: a failed registration quotes at most 2 KiB of the server's body, saying it was cut.
/// Control: it is the body that is quoted (its bytes appear).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_a_huge_registration_error_is_cut_in_the_reason() {
    let server = Server::start_with(&["--register-error-bytes", "100000"]).await;
    let urls = Arc::new(Mutex::new(Vec::new()));
    let oauth = McpOAuth::authorization_code(REDIRECT, browser(urls));
    let hub = McpHub::new(vec![McpServer::http("notes", server.url.clone()).oauth(oauth)], Deferral::Eager, None);
    let reason = reason_of(&hub).await;
    assert!(reason.contains("EEEEEEEE"), "{reason}");
    assert!(
        reason.contains("[cut: 100000 bytes in all, the first 2048 shown]"),
        "{}",
        &reason[reason.len().saturating_sub(300)..]
    );
    assert!(reason.len() < 4096, "{}", reason.len());
}

/// Finding 5: discovery, registration and token requests follow the agent's network setting: under
/// `remote` with only 127.0.0.1 allowed, an authorization server at 127.0.0.2 is refused; under `none`
/// nothing is reached. Control: allowing 127.0.0.0/8 reaches it (it registers the client).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_discovery_follows_the_agent_network_setting() {
    use ambit::permission::Network;
    let auth = Server::start_with(&["--host", "127.0.0.2"]).await;
    let server = Server::start_with(&["--authorization-server", &auth.base()]).await;
    let urls = Arc::new(Mutex::new(Vec::new()));
    let hub_under = |network: Network, allowed: &[&str]| {
        let ranges: Vec<ambit::permission::network::AddrRange> = allowed.iter().map(|a| a.parse().unwrap()).collect();
        let oauth = McpOAuth::authorization_code(REDIRECT, browser(urls.clone()));
        McpHub::with_network(
            vec![McpServer::http("notes", server.url.clone()).oauth(oauth)],
            Deferral::Eager,
            None,
            network,
            &ranges,
        )
    };
    let reason = reason_of(&hub_under(Network::Remote, &["127.0.0.1"])).await;
    assert!(reason.contains("127.0.0.2") && reason.contains("not reachable under network: remote"), "{reason}");
    let reason = reason_of(&hub_under(Network::None, &[])).await;
    assert!(reason.contains("network: none"), "{reason}");
    assert_eq!(auth.stats().await["registrations"].as_u64(), Some(0));
    // Control: the same authorization server, allowed, is reached.
    let _ = reason_of(&hub_under(Network::Remote, &["127.0.0.0/8"])).await;
    assert_eq!(auth.stats().await["registrations"].as_u64(), Some(1));
}

/// Finding 7: a URL-mode elicitation reaches the host only with an https URL (or http to loopback);
/// others are declined and the handler never sees them. Control: https and loopback http reach it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_url_elicitation_with_a_hostile_scheme_never_reaches_the_host() {
    let server = Server::start().await;
    let seen_urls = Arc::new(Mutex::new(Vec::<String>::new()));
    let record = seen_urls.clone();
    let handler = ElicitFn(move |request: ElicitationRequest| {
        let record = record.clone();
        async move {
            record.lock().unwrap().push(request.url.clone().unwrap_or_default());
            Ok::<_, String>(ElicitationResponse::Accept { content: None })
        }
    });
    let urls = Arc::new(Mutex::new(Vec::new()));
    let mcp = McpServer::http("notes", server.url.clone())
        .oauth(McpOAuth::authorization_code(REDIRECT, browser(urls)))
        .on_elicit(handler);
    let hub = McpHub::new(vec![mcp], Deferral::Eager, None);
    hub.refresh().await;
    let listing = hub.listing();
    assert!(listing.unavailable.is_empty(), "{:?}", listing.unavailable);
    let visit = listing.entries.iter().find(|e| e.tool.spec().name == "mcp__notes__visit").unwrap().tool.clone();
    for hostile in [
        "javascript:alert(1)",
        "file:///etc/passwd",
        "http://evil.example/phish",
        "data:text/html,hi",
        "https://accounts.example.com@evil.example/consent",
    ] {
        let out = visit.call(json!({"url": hostile})).await.unwrap().to_string();
        assert!(out.contains("visit: decline"), "{hostile}: {out}");
    }
    assert!(seen_urls.lock().unwrap().is_empty(), "{:?}", seen_urls.lock().unwrap());
    for fine in ["https://example.com/consent", "http://127.0.0.1:9/local"] {
        let out = visit.call(json!({"url": fine})).await.unwrap().to_string();
        assert!(out.contains("visit: accept"), "{fine}: {out}");
    }
    assert_eq!(seen_urls.lock().unwrap().len(), 2);
}

/// Finding 2: the token file is written through a fresh temp file created exclusively, never through a
/// link: a link planted at the old fixed `<file>.tmp` name is not followed (the victim is untouched),
/// and a token file that is itself a link is refused, saying so.
#[tokio::test]
async fn attack_a_planted_symlink_never_redirects_the_token_file() {
    use ambit::mcp::TokenStore;
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "precious").unwrap();
    let tokens = dir.path().join("tokens.json");
    std::os::unix::fs::symlink(&victim, dir.path().join("tokens.tmp")).unwrap();
    std::os::unix::fs::symlink(&victim, dir.path().join("tokens.json.tmp")).unwrap();
    let store = FileTokenStore::new(&tokens);
    store.save("k", "v").await.unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    assert!(!std::fs::symlink_metadata(&tokens).unwrap().file_type().is_symlink());
    assert_eq!(store.load("k").await.unwrap().as_deref(), Some("v"));
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&tokens).unwrap().permissions().mode() & 0o777, 0o600);
    }
    // The token file itself a link: refused both ways, the victim untouched.
    std::fs::remove_file(&tokens).unwrap();
    std::os::unix::fs::symlink(&victim, &tokens).unwrap();
    let err = store.save("k", "v2").await.unwrap_err();
    assert!(err.contains("symbolic link"), "{err}");
    let err = store.load("k").await.unwrap_err();
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
    // Control: a plain file at the same path is used.
    std::fs::remove_file(&tokens).unwrap();
    store.save("k", "v3").await.unwrap();
    assert_eq!(store.load("k").await.unwrap().as_deref(), Some("v3"));
}

/// Finding 3: stores sharing one token file (separate instances, as separate servers or processes
/// have) do read-modify-write under a lock: 8 writers x 25 keys, concurrently, lose no entry.
#[test]
fn attack_concurrent_writers_sharing_a_token_file_lose_no_entry() {
    use ambit::mcp::TokenStore;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokens.json");
    let start = Arc::new(std::sync::Barrier::new(8));
    let writers: Vec<_> = (0..8)
        .map(|w| {
            let (path, start) = (path.clone(), start.clone());
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
                let store = FileTokenStore::new(&path);
                start.wait();
                rt.block_on(async {
                    for k in 0..25 {
                        store.save(&format!("w{w}-k{k}"), "tokens").await.unwrap();
                    }
                });
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let all: std::collections::BTreeMap<String, String> =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(all.len(), 200, "lost entries: {}", 200 - all.len());
}

/// A loopback HTTP endpoint that answers every request with `answer` (its status line and headers) and
/// records each request's head.
async fn endpoint(answer: impl Fn(u16) -> String + Send + Sync + 'static) -> (u16, Arc<Mutex<Vec<String>>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (record, answer) = (seen.clone(), Arc::new(answer));
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (record, answer) = (record.clone(), answer.clone());
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                record.lock().unwrap().push(String::from_utf8_lossy(&head).to_lowercase());
                let reply = format!("{}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n", answer(port));
                let _ = socket.write_all(reply.as_bytes()).await;
            });
        }
    });
    (port, seen)
}

/// Finding 10: an MCP HTTP server's redirect is not followed, so its headers (here a static API key;
/// a bearer or OAuth token alike) never go where it points. Control: the sink, reached directly, does
/// see the header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_an_mcp_server_redirect_does_not_carry_its_headers_away() {
    let (sink, sunk) = endpoint(|_| "HTTP/1.1 500 Internal Server Error".to_string()).await;
    let (redirector, asked) =
        endpoint(move |_| format!("HTTP/1.1 307 Temporary Redirect\r\nlocation: http://127.0.0.1:{sink}/mcp")).await;
    let server = |port: u16| {
        McpServer::http("r", format!("http://127.0.0.1:{port}/mcp")).header("x-api-key", "key-that-must-stay-home")
    };
    let reason = reason_of(&McpHub::new(vec![server(redirector)], Deferral::Eager, None)).await;
    assert!(!reason.is_empty(), "the redirect is an error");
    assert!(!asked.lock().unwrap().is_empty(), "the redirector was asked");
    assert!(sunk.lock().unwrap().is_empty(), "the redirect was followed: {:?}", sunk.lock().unwrap());
    // Control: the sink reached directly gets the header (so the check above can see one).
    let _ = reason_of(&McpHub::new(vec![server(sink)], Deferral::Eager, None)).await;
    assert!(sunk.lock().unwrap().iter().any(|h| h.contains("x-api-key: key-that-must-stay-home")));
}

/// Finding 10: a token goes over plain http only to a loopback address: OAuth on an http URL elsewhere
/// is refused by name. Control: https, and loopback http, pass.
#[test]
fn attack_oauth_over_plain_http_off_loopback_is_refused() {
    let urls = Arc::new(Mutex::new(Vec::new()));
    let oauth = || McpOAuth::authorization_code(REDIRECT, browser(urls.clone()));
    let err = McpServer::http("s", "http://mcp.example.com/mcp").oauth(oauth()).validate().unwrap_err();
    assert!(err.contains("MCP server 's': url") && err.contains("plain http is allowed only to a loopback"), "{err}");
    let err = McpServer::http("s", "http://evil.localhost/mcp").oauth(oauth()).validate().unwrap_err();
    assert!(err.contains("plain http"), "{err}");
    for ok in ["https://mcp.example.com/mcp", "http://127.0.0.1:9/mcp", "http://localhost:9/mcp"] {
        assert!(McpServer::http("s", ok).oauth(oauth()).validate().is_ok(), "{ok}");
    }
}

/// Finding 11: two requests that hit a 401 together (every token revoked) ask for consent once: the
/// second waits for the first's authorization and goes with its token. The consent step holds its
/// answer until the server has answered both requests 401, so both were refused before any new token
/// existed. Control: the first connection consented, and the revoke made a new consent necessary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attack_concurrent_401s_share_one_consent() {
    let server = Arc::new(Server::start().await);
    let urls = Arc::new(Mutex::new(Vec::new()));
    // 0: consent at once; n: first wait until the server has answered n 401s.
    let hold = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (seen, wait, stats_url) = (urls.clone(), hold.clone(), format!("{}/stats", server.base()));
    let consent = AuthorizeFn(move |url: String| {
        seen.lock().unwrap().push(url.clone());
        let (wait, stats_url) = (wait.load(std::sync::atomic::Ordering::SeqCst), stats_url.clone());
        let fut: futures::future::BoxFuture<'static, Result<String, String>> = Box::pin(async move {
            // Polls for the condition (both requests refused), not for a time; the bound only stops a
            // broken build from hanging the suite.
            for _ in 0..3000 {
                let stats: Value = reqwest::get(&stats_url).await.unwrap().json().await.unwrap();
                if stats["unauthorized"].as_u64().unwrap_or(0) >= wait {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
            let resp = http.get(&url).send().await.map_err(|e| e.to_string())?;
            resp.headers()
                .get("location")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
                .ok_or_else(|| "no redirect".into())
        });
        fut
    });
    let oauth = McpOAuth::authorization_code(REDIRECT, consent);
    let hub = McpHub::new(vec![McpServer::http("notes", server.url.clone()).oauth(oauth)], Deferral::Eager, None);
    hub.refresh().await;
    let listing = hub.listing();
    assert!(listing.unavailable.is_empty(), "{:?}", listing.unavailable);
    assert_eq!(urls.lock().unwrap().len(), 1, "the first connection consented");
    let whoami = listing.entries.iter().find(|e| e.tool.spec().name == "mcp__notes__whoami").unwrap().tool.clone();

    reqwest::Client::new().post(format!("{}/revoke", server.base())).send().await.unwrap();
    let refused_before = server.stats().await["unauthorized"].as_u64().unwrap();
    hold.store(refused_before + 2, std::sync::atomic::Ordering::SeqCst);
    let (a, b) = futures::join!(whoami.call(json!({})), whoami.call(json!({})));
    let (a, b) = (a.unwrap().to_string(), b.unwrap().to_string());
    assert!(a.contains("notes:read") && b.contains("notes:read"), "{a} / {b}");
    assert!(server.stats().await["unauthorized"].as_u64().unwrap() >= refused_before + 2, "both were refused");
    assert_eq!(urls.lock().unwrap().len(), 2, "one consent for the two refused requests: {:?}", urls.lock().unwrap());
}
