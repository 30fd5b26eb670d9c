//! OAuth 2.1 and elicitation against a real OAuth-protected MCP server: tests/mcp/oauth_server.py (the
//! `mcp` package 2.x, its own authorization server with dynamic registration, PKCE and refresh
//! tokens). The consent step here plays the browser: it follows the authorization URL (the server
//! consents at once) and hands back the redirect. Negative controls: a wrong bearer token, a forged
//! code, no consent callback, and an elicitation with no handler (declined).

mod mcp_support;

use std::sync::{Arc, Mutex};

use ambit::Agent;
use ambit::credentials::Credentials;
use ambit::deferral::{Deferral, ToolSource};
use ambit::mcp::{
    AuthorizeFn, ElicitFn, ElicitationRequest, ElicitationResponse, FileTokenStore, McpHub, McpOAuth, McpServer,
    MemoryTokenStore,
};
use mcp_support::{call, installed, repo_root, scripted, servers_dir, text};
use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

const REDIRECT: &str = "http://127.0.0.1:1/callback";

struct Server {
    url: String,
    _child: tokio::process::Child,
}

impl Server {
    async fn start() -> Server {
        let dir = servers_dir();
        let python = installed(&dir, "venv/bin/python");
        let mut child = tokio::process::Command::new(python)
            .arg(repo_root().join("tests/mcp/oauth_server.py"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let url = lines.next_line().await.unwrap().expect("the server prints its URL");
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
