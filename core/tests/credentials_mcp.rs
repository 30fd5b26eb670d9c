//! Credentials delivered to MCP servers (SPEC §15, issue 17 part 2): an HTTP server gets static
//! headers, credential headers and a bearer token from the broker; a stdio server gets a credential in
//! its environment and not the variable an `env` credential is read from. The server's failure (a 401
//! whose body quotes the request's headers) reaches the model as a reason with no header value in it.
//! Negative control: with the broker's redactor off, the credential values show in that reason; the
//! static header's value never does (it is redacted by the server's connection itself).

use ambit::mcp::McpServer;
use ambit::{Agent, Credentials, OpenAiChat};
use ambit_test_provider::{Provider, Script};
use serde_json::{Value, json};

const GITHUB: &str = "ghp_McpBearerToken0123456789";
const API: &str = "api-key-for-mcp-7c1d2e3f";
const STATIC: &str = "static-header-value-91ab";
const HOST_VAR: &str = "AMBIT_TEST_CREDS_HOST_SECRET";
const HOST_SECRET: &str = "host-env-secret-5566778899";

/// An HTTP server that answers every request 401, its body quoting the request; the requests seen.
async fn quoting_server() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let keep = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else { continue };
            let keep = keep.clone();
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut buf = vec![0u8; 16384];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let request = String::from_utf8_lossy(&got).into_owned();
                keep.lock().unwrap().push(request.clone());
                let body = format!("{{\"error\": \"unauthorized\", \"you_sent\": {}}}", json!(request));
                let answer = format!(
                    "HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = s.write_all(answer.as_bytes()).await;
            });
        }
    });
    (format!("http://127.0.0.1:{}/mcp", addr.port()), seen)
}

fn script() -> Script {
    serde_json::from_value(json!({"name": "mcp-credentials", "exchanges": [
        {"respond": {"tool_calls": [{"id": "c1", "name": "mcp_list_all", "arguments": {}}]}},
        {"respond": {"content": "done"}}
    ]}))
    .unwrap()
}

async fn run(redaction: bool) -> (Vec<String>, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("env.txt");
    let (url, seen) = quoting_server().await;
    // SAFETY: the only test of this binary that touches the environment sets it before any thread
    // reads it, to the same value each time.
    unsafe { std::env::set_var(HOST_VAR, HOST_SECRET) };
    let creds = Credentials::new()
        .value("api", API)
        .callback("github", ambit::credentials::FnSource(|| async { Ok::<_, String>(GITHUB.to_string()) }))
        .env("hostsecret", HOST_VAR);
    let creds = if redaction { creds } else { ambit::testing::without_redaction(creds) };
    let http = McpServer::http("remote", url)
        .header("X-Static-Key", STATIC)
        .credential_header("X-Api-Key", "api")
        .bearer("github");
    let command = format!("printf '%s|%s' \"$MCP_TOKEN\" \"${HOST_VAR}\" > '{}'; exit 1", dump.display());
    let stdio = McpServer::stdio("envdump", ["/bin/sh", "-c", command.as_str()]).credential_env("MCP_TOKEN", "github");
    let provider = Provider::start(script()).await.unwrap();
    let agent = Agent::builder()
        .model(OpenAiChat::new("gpt-4.1").base_url(provider.base_url()).api_key("sk-test"))
        .mcp(http)
        .mcp(stdio)
        .deferral(serde_json::from_value(json!({"setting": "eager"})).unwrap())
        .credentials(creds)
        .build()
        .unwrap();
    let result = agent.run("list everything").await.unwrap();
    let state: Value =
        reqwest::get(format!("http://{}/__ambit/state", provider.addr)).await.unwrap().json().await.unwrap();
    let requests = seen.lock().unwrap().clone();
    let dumped = std::fs::read_to_string(&dump).unwrap_or_default();
    let reached = format!("{}\n{}", state["requests"], result.tool_calls[0].result);
    (requests, dumped, reached)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_servers_get_headers_bearer_and_env_and_no_value_reaches_the_model() {
    let (requests, dumped, reached) = run(true).await;
    let first = requests.first().expect("the HTTP server was reached").to_ascii_lowercase();
    assert!(first.contains(&format!("authorization: bearer {}", GITHUB.to_ascii_lowercase())), "{first}");
    assert!(first.contains(&format!("x-api-key: {}", API.to_ascii_lowercase())), "{first}");
    assert!(first.contains(&format!("x-static-key: {STATIC}")), "{first}");
    // The stdio server got its credential, and not the variable the `env` credential is read from.
    assert_eq!(dumped, format!("{GITHUB}|"));
    eprintln!("what reached the model:\n{reached}");
    for value in [GITHUB, API, STATIC, HOST_SECRET] {
        assert!(!reached.contains(value), "{value} reached the model: {reached}");
    }
    assert!(reached.contains("remote"), "the reason names the server: {reached}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_control_without_the_redactor_the_quoted_header_reaches_the_model() {
    let (_, _, reached) = run(false).await;
    assert!(reached.contains(GITHUB) || reached.contains(API), "no credential in the reason: {reached}");
    assert!(!reached.contains(STATIC), "the static header is redacted by the connection itself: {reached}");
}

#[test]
fn headers_on_a_stdio_server_and_env_on_an_http_one_are_refused() {
    let e = McpServer::stdio("s", ["x"]).bearer("github").validate().unwrap_err();
    assert!(e.contains("HTTP server, not stdio"), "{e}");
    let e = McpServer::http("h", "http://127.0.0.1:1/").credential_env("X", "github").validate().unwrap_err();
    assert!(e.contains("stdio server, not HTTP"), "{e}");
}
