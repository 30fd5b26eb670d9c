//! The client under test for the official MCP client conformance scenarios
//! (`@modelcontextprotocol/conformance client --command <this binary>`, run by
//! core/tests/mcp_conformance.rs). The suite appends the server URL as the last argument and names the
//! scenario in MCP_CONFORMANCE_SCENARIO. Everything goes through ambit's MCP client (the hub an agent
//! uses): connect over streamable HTTP with `initialize`, list every tool, then call what the
//! scenario asks for (`add_numbers` for tools_call, every listed tool otherwise). Exit 0 when the
//! server answered; 1 with the reason when it was unavailable.

use ambit::deferral::{Deferral, ToolSource};
use ambit::mcp::{McpHub, McpServer};
use serde_json::{Value, json};

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
    let hub = McpHub::new(vec![McpServer::http("conformance", url)], Deferral::Eager, None);
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
