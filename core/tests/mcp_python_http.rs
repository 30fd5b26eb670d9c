//! The Python server tests/mcp/dynamic_server.py (the `mcp` package 2.x, installed in a virtualenv by
//! scripts/mcp-servers.sh) over streamable HTTP on 127.0.0.1, on both revisions: 2025-11-25 (with
//! `initialize`; list_changed as a notification) and the stateless 2026-07-28 (`server/discover`;
//! list_changed only through `subscriptions/listen`, which the server advertises). A tool it adds at
//! run time joins the catalog before the next model request.

mod mcp_support;

use ambit::Agent;
use ambit::mcp::{McpProtocol, McpServer};
use mcp_support::{call, free_port, installed, repo_root, scripted, servers_dir, text, wait_for_port};
use serde_json::json;

async fn dynamic_over_http(protocol: McpProtocol) {
    let dir = servers_dir();
    let python = installed(&dir, "venv/bin/python");
    let script = repo_root().join("tests/mcp/dynamic_server.py");
    let port = free_port();
    let mut child = tokio::process::Command::new(python)
        .arg(script)
        .arg("http")
        .arg(port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    wait_for_port(port, &mut child).await;
    let server = McpServer::http("dyn", format!("http://127.0.0.1:{port}/mcp")).protocol(protocol);
    let (model, seen) = scripted(vec![
        call("c1", "mcp__dyn__enable_extra", json!({})),
        call("c2", "mcp__dyn__extra_tool", json!({"word": "hi"})),
        text("ok"),
    ]);
    let agent = Agent::builder().model(model).mcp(server).build().unwrap();
    let result = agent.run("add a tool").await.unwrap();
    assert_eq!(result.output, "ok");
    let seen = seen.lock().unwrap().clone();
    let first = seen[0].instructions.clone().unwrap();
    assert!(
        first.contains("### dyn (1 tool)\n- mcp__dyn__enable_extra [") && !first.contains("mcp__dyn__extra_tool"),
        "{first}"
    );
    assert!(!result.tool_calls[0].is_error, "{}", result.tool_calls[0].result);
    assert!(result.tool_calls[0].result.starts_with("extra_tool added"), "{}", result.tool_calls[0].result);
    // The list_changed (a notification, or an event on the subscriptions/listen stream) was followed
    // before the second request.
    let second = seen[1].instructions.clone().unwrap();
    assert!(second.contains("### dyn (2 tools)") && second.contains("- mcp__dyn__extra_tool ["), "{second}");
    assert!(!result.tool_calls[1].is_error, "{}", result.tool_calls[1].result);
    assert_eq!(result.tool_calls[1].result, "extra: hi\nstructured_content: {\"result\":\"extra: hi\"}");
    child.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_server_over_http_on_2025_11_25() {
    dynamic_over_http(McpProtocol::Initialize).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_server_over_http_on_stateless_2026_07_28() {
    dynamic_over_http(McpProtocol::Stateless).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_server_over_http_auto_picks_2026_07_28() {
    dynamic_over_http(McpProtocol::Auto).await;
}
