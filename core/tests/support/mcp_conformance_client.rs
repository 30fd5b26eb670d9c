//! The client under test for the official MCP client conformance scenarios
//! (`@modelcontextprotocol/conformance client --command <this binary>`, run by
//! core/tests/mcp_conformance.rs). The suite appends the server URL as the last argument and names the
//! scenario in MCP_CONFORMANCE_SCENARIO. Everything goes through ambit's MCP client (the hub an agent
//! uses): connect over streamable HTTP with `initialize`, list every tool, then call what the
//! scenario asks for (`add_numbers` for tools_call, every listed tool otherwise). Exit 0 when the
//! server answered; 1 with the reason when it was unavailable.
//!
//! The auth/ scenarios run ambit's OAuth: the host's consent step here follows the suite's
//! authorization endpoint headlessly (it redirects at once with the code) and hands back the redirect.
//! A pre-registered client's ID and secret come from MCP_CONFORMANCE_CONTEXT (the secret through the
//! credential broker). Elicitation requests are accepted with the schema's defaults.

use ambit::credentials::Credentials;
use ambit::deferral::{Deferral, ToolSource};
use ambit::mcp::{AuthorizeFn, ElicitFn, ElicitationRequest, ElicitationResponse, McpHub, McpOAuth, McpServer};
use serde_json::{Value, json};

const REDIRECT_URI: &str = "http://localhost:3000/callback";
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// The consent step of a browser that is already logged in and consents: follow the authorization
/// URL without following its redirect, and hand back where it points.
async fn consent(url: String) -> Result<String, String> {
    let http =
        reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().map_err(|e| e.to_string())?;
    let resp = http.get(&url).send().await.map_err(|e| e.to_string())?;
    resp.headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .ok_or_else(|| format!("the authorization endpoint answered {} without a redirect", resp.status()))
}

/// Accepts with every default the requested schema gives.
async fn defaults(request: ElicitationRequest) -> Result<ElicitationResponse, String> {
    eprintln!("elicitation: {}", request.message);
    let mut content = serde_json::Map::new();
    if let Some(props) = request.schema.as_ref().and_then(|s| s.get("properties")).and_then(Value::as_object) {
        for (name, p) in props {
            if let Some(d) = p.get("default") {
                content.insert(name.clone(), d.clone());
            }
        }
    }
    Ok(ElicitationResponse::Accept { content: Some(Value::Object(content)) })
}

/// The server's configuration for the scenario, and the broker with any client secret.
fn server(scenario: &str, url: String) -> (McpServer, Credentials) {
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or(Value::Null);
    let field = |k: &str| context.get(k).and_then(Value::as_str).map(str::to_string);
    let mut credentials = Credentials::new();
    let server = McpServer::http("conformance", url).on_elicit(ElicitFn(defaults));
    if !scenario.starts_with("auth/") {
        return (server, credentials);
    }
    let oauth = if scenario.starts_with("auth/client-credentials") {
        credentials = credentials.value("client_secret", field("client_secret").unwrap_or_default());
        McpOAuth::client_credentials(field("client_id").unwrap_or_default(), "client_secret")
    } else {
        let mut o = McpOAuth::authorization_code(REDIRECT_URI, AuthorizeFn(consent))
            .client_name("ambit-conformance")
            .client_metadata_url(CLIENT_METADATA_URL);
        if let Some(id) = field("client_id") {
            let secret = field("client_secret").map(|s| {
                credentials = credentials.clone().value("client_secret", s);
                "client_secret".to_string()
            });
            o = o.client_id(id, secret);
        }
        o
    };
    (server.oauth(oauth), credentials)
}

/// Arguments for a tool from its schema: numbers 5 and 3 for `a` and `b` (add_numbers), a word for
/// strings, `true` for booleans; nothing for the rest.
fn arguments(schema: &Value) -> Value {
    let mut out = serde_json::Map::new();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, p) in props {
            let v = match p.get("type").and_then(Value::as_str) {
                Some("number") | Some("integer") => json!(if name == "b" { 3 } else { 5 }),
                Some("string") => json!("conformance"),
                Some("boolean") => json!(true),
                _ => continue,
            };
            out.insert(name.clone(), v);
        }
    }
    Value::Object(out)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let url = std::env::args().next_back().expect("the server URL");
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    eprintln!("scenario {scenario} at {url}");
    let (server, credentials) = server(&scenario, url);
    let hub = McpHub::new(vec![server], Deferral::Eager, Some(credentials));
    hub.refresh().await;
    let listing = hub.listing();
    if let Some(u) = listing.unavailable.first() {
        eprintln!("unavailable: {}", u.reason);
        std::process::exit(1);
    }
    let tools: Vec<_> = listing.entries.iter().filter(|e| e.group == "conformance").map(|e| e.tool.clone()).collect();
    println!("tools: {:?}", tools.iter().map(|t| t.spec().name.clone()).collect::<Vec<_>>());
    let mut failed = false;
    for tool in &tools {
        let spec = tool.spec();
        if scenario == "tools_call" && !spec.name.ends_with("__add_numbers") {
            continue;
        }
        let args = arguments(&spec.parameters);
        match tool.call(args.clone()).await {
            Ok(v) => println!("{}({args}) -> {v}", spec.name),
            Err(e) => {
                println!("{}({args}) failed: {e}", spec.name);
                failed = true;
            }
        }
    }
    // A refresh after the calls follows any list_changed, then the connection is dropped.
    hub.refresh().await;
    std::process::exit(i32::from(failed));
}
