//! MCP against real servers installed by scripts/mcp-servers.sh (the test runs it; it is idempotent):
//! @modelcontextprotocol/server-everything over stdio and over streamable HTTP on 127.0.0.1, with
//! deferral, tool_search, a deferred call and a failed server, driven by a scripted model.

mod mcp_support;

use ambit::Agent;
use ambit::mcp::McpServer;
use mcp_support::{call, names, scripted, servers_dir, text};

fn everything_js(dir: &std::path::Path) -> String {
    dir.join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js").display().to_string()
}

async fn deferred_flow(server: McpServer) {
    let (model, seen) = scripted(vec![
        call("c1", "tool_search", serde_json::json!({"query": "echo"})),
        call("c2", "tool_load", serde_json::json!({"name": "mcp__everything__echo"})),
        call("c3", "mcp__everything__echo", serde_json::json!({"message": "hello there"})),
        call("c4", "mcp__everything__get-sum", serde_json::json!({"a": 2, "b": 3})),
        text("done"),
    ]);
    let agent = Agent::builder().model(model).mcp(server.trusted(true)).build().unwrap();
    let result = agent.run("echo something").await.unwrap();
    assert_eq!(result.output, "done");
    let seen = seen.lock().unwrap();
    // Deferred by default: only the discovery tools ship; the catalog lists the server with its count.
    assert_eq!(names(&seen[0]), ["tool_search", "tool_load"]);
    let catalog = seen[0].instructions.clone().unwrap();
    assert!(catalog.contains("## Tool discovery"), "{catalog}");
    assert!(catalog.contains("### everything ("), "{catalog}");
    // Trusted annotations: echo is readOnlyHint in server-everything? Either way it has a level.
    assert!(catalog.contains("- mcp__everything__echo ["), "{catalog}");
    let search = &result.tool_calls[0];
    assert!(!search.is_error, "{}", search.result);
    assert!(search.result.contains("\"name\":\"mcp__everything__echo\""), "{}", search.result);
    // After the load, the schema is in the next request of the same run.
    assert!(!names(&seen[1]).contains(&"mcp__everything__echo".to_string()));
    assert!(names(&seen[2]).contains(&"mcp__everything__echo".to_string()), "{:?}", names(&seen[2]));
    let echo = &result.tool_calls[2];
    assert!(!echo.is_error && echo.result.contains("hello there"), "{}", echo.result);
    assert!(!echo.result.contains("[Note:"), "a loaded tool gets no note: {}", echo.result);
    // Called without loading: it runs (get-sum has no undocumented optional parameters left out).
    let sum = &result.tool_calls[3];
    assert!(!sum.is_error && sum.result.contains('5'), "{}", sum.result);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_stdio_deferred_search_load_and_call() {
    let dir = servers_dir();
    deferred_flow(McpServer::stdio("everything", ["node".to_string(), everything_js(&dir), "stdio".to_string()])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_over_streamable_http() {
    let dir = servers_dir();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut child = tokio::process::Command::new("node")
        .arg(everything_js(&dir))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Wait for the server's "running on port" line.
    {
        use tokio::io::AsyncBufReadExt;
        let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
        while let Some(l) = lines.next_line().await.unwrap() {
            if l.contains(&port.to_string()) {
                break;
            }
        }
    }
    deferred_flow(McpServer::http("everything", format!("http://127.0.0.1:{port}/mcp"))).await;
    child.kill().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eager_setting_ships_schemas_and_levels_come_from_config() {
    let dir = servers_dir();
    let server = McpServer::stdio("everything", ["node".to_string(), everything_js(&dir)])
        .deferral(ambit::deferral::Deferral::Eager)
        .level("echo", ambit::Level::Read);
    let (model, seen) = scripted(vec![text("ok")]);
    // The install-wide setting hides what it would defer (the resource and prompt meta-tools follow
    // it); the server's own setting wins for its tools.
    let install = ambit::deferral::DeferralConfig { setting: ambit::deferral::Deferral::Hidden, ..Default::default() };
    let agent = Agent::builder().model(model).deferral(install).mcp(server).build().unwrap();
    agent.run("hi").await.unwrap();
    let seen = seen.lock().unwrap();
    let tools = &seen[0].tools;
    assert!(!tools.iter().any(|t| ambit::mcp::meta::NAMES.contains(&t.name.as_str())), "meta-tools hidden");
    assert!(!tools.iter().any(|t| t.name == "tool_search"), "nothing deferred: no discovery tools");
    assert!(seen[0].instructions.is_none(), "nothing deferred: no catalog");
    let echo = tools.iter().find(|t| t.name == "mcp__everything__echo").expect("echo shipped");
    assert_eq!(echo.level, Some(ambit::Level::Read));
    let sum = tools.iter().find(|t| t.name == "mcp__everything__get-sum").expect("get-sum shipped");
    assert_eq!(sum.level, Some(ambit::Level::Unrestricted), "untrusted annotations are ignored");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_fails_is_reported_unavailable_with_its_reason() {
    let server = McpServer::stdio("broken", ["/nonexistent/mcp-server"]);
    let (model, seen) = scripted(vec![call("c1", "mcp__broken__anything", serde_json::json!({})), text("ok")]);
    let agent = Agent::builder().model(model).mcp(server).build().unwrap();
    let result = agent.run("hi").await.unwrap();
    let seen = seen.lock().unwrap();
    let ctx = seen[0].instructions.clone().unwrap();
    assert!(ctx.contains("## Unavailable tool servers\n- broken: could not start '/nonexistent/mcp-server'"), "{ctx}");
    assert!(result.tool_calls[0].is_error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_added_at_run_time_joins_the_catalog_before_the_next_request() {
    let dir = servers_dir();
    let python = dir.join("venv/bin/python").display().to_string();
    let script = mcp_support::repo_root().join("tests/mcp/dynamic_server.py").display().to_string();
    let (model, seen) = scripted(vec![
        call("c1", "mcp__dyn__enable_extra", serde_json::json!({})),
        call("c2", "mcp__dyn__extra_tool", serde_json::json!({"word": "hi"})),
        text("ok"),
    ]);
    let agent = Agent::builder().model(model).mcp(McpServer::stdio("dyn", [python, script])).build().unwrap();
    let result = agent.run("add a tool").await.unwrap();
    let seen = seen.lock().unwrap();
    let first = seen[0].instructions.clone().unwrap();
    assert!(first.contains("### dyn (1 tool)") && !first.contains("- mcp__dyn__extra_tool"), "{first}");
    assert!(!result.tool_calls[0].is_error, "{}", result.tool_calls[0].result);
    let second = seen[1].instructions.clone().unwrap();
    assert!(second.contains("### dyn (2 tools)") && second.contains("- mcp__dyn__extra_tool ["), "{second}");
    // Structured content is carried beside the text.
    assert_eq!(result.tool_calls[1].result, "extra: hi\nstructured_content: {\"result\":\"extra: hi\"}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_and_prompt_meta_tools_follow_resources_list_changed() {
    let dir = servers_dir();
    let server = McpServer::stdio("everything", ["node".to_string(), everything_js(&dir), "stdio".to_string()]);
    let session_uri = "demo://resource/session/hello.txt.gz";
    let (model, seen) = scripted(vec![
        call("c1", "tool_search", serde_json::json!({"query": "resource templates"})),
        call("c2", "mcp_resource_list", serde_json::json!({"server": "everything"})),
        call("c3", "mcp_resource_template_list", serde_json::json!({"server": "everything"})),
        call(
            "c4",
            "mcp_resource_read",
            serde_json::json!({"server": "everything", "uri": "demo://resource/dynamic/text/7"}),
        ),
        call("c5", "mcp_prompt_list", serde_json::json!({"server": "everything"})),
        call(
            "c6",
            "mcp_prompt_get",
            serde_json::json!({"server": "everything", "name": "args-prompt", "arguments": {"city": "Oslo"}}),
        ),
        // Registers a session resource and sends notifications/resources/list_changed.
        call(
            "c7",
            "mcp__everything__gzip-file-as-resource",
            serde_json::json!({"name": "hello.txt.gz", "data": "data:text/plain;base64,aGVsbG8=", "outputType": "resourceLink"}),
        ),
        call("c8", "mcp_resource_list", serde_json::json!({"server": "everything"})),
        call("c9", "mcp_list_all", serde_json::json!({})),
        call("c10", "mcp_resource_read_any", serde_json::json!({"uri": session_uri})),
        call("c11", "mcp_resource_read", serde_json::json!({"server": "nowhere", "uri": "x://y"})),
        text("done"),
    ]);
    let agent = Agent::builder().model(model).mcp(server).max_turns(20).build().unwrap();
    let result = agent.run("browse").await.unwrap();
    let r: Vec<&ambit::ToolCallRecord> = result.tool_calls.iter().collect();
    for c in &r[..10] {
        assert!(!c.is_error, "{}: {}", c.name, c.result);
    }
    // Deferred by default, under their own heading; tool_search finds them.
    let catalog = seen.lock().unwrap()[0].instructions.clone().unwrap();
    assert!(catalog.contains("\n### mcp (7 tools)\n- mcp_list_all [read]: "), "{catalog}");
    assert!(catalog.contains("- mcp_resource_template_list [read]: Lists the resource templates"), "{catalog}");
    assert!(r[0].result.contains("\"name\":\"mcp_resource_template_list\""), "{}", r[0].result);
    // The static documents, the templates, a filled-in template read, the prompts and one filled in.
    assert!(r[1].result.contains("demo://resource/static/document/instructions.md"), "{}", r[1].result);
    assert!(!r[1].result.contains(session_uri));
    assert!(r[2].result.contains("demo://resource/dynamic/text/{resourceId}"), "{}", r[2].result);
    assert!(r[3].result.contains("Resource 7: This is a plaintext resource"), "{}", r[3].result);
    assert!(
        r[4].result.contains("\"name\":\"args-prompt\"") && r[4].result.contains("simple-prompt"),
        "{}",
        r[4].result
    );
    assert_eq!(r[5].result, "user: What's weather in Oslo?");
    assert!(r[6].result.contains(session_uri), "{}", r[6].result);
    // After the list_changed, the new resource is listed (lists are read at the call, never cached).
    assert!(r[7].result.contains(session_uri), "{}", r[7].result);
    assert!(r[8].result.contains(session_uri) && r[8].result.contains("args-prompt"), "{}", r[8].result);
    assert!(r[8].result.contains("\"resource_templates\""), "{}", r[8].result);
    assert!(r[9].result.contains("(application/gzip): binary"), "{}", r[9].result);
    assert!(
        r[10].is_error && r[10].result.contains("no MCP server is named 'nowhere' (servers: everything)"),
        "{}",
        r[10].result
    );
    // The listing shows them deferred; under the install-wide `hidden` they are not registered at all.
    let listing = agent.list_tools();
    let meta = listing.iter().find(|t| t.name == "mcp_prompt_get").unwrap();
    assert_eq!((meta.status, meta.level), (ambit::ToolStatus::Deferred, ambit::Level::Read));
    let (model, seen) = scripted(vec![text("ok")]);
    let agent = Agent::builder()
        .model(model)
        .deferral(ambit::deferral::DeferralConfig { setting: ambit::deferral::Deferral::Hidden, ..Default::default() })
        .mcp(
            McpServer::stdio("everything", ["node".to_string(), everything_js(&dir), "stdio".to_string()])
                .eager_load_tools(["echo"]),
        )
        .build()
        .unwrap();
    agent.run("hi").await.unwrap();
    assert_eq!(names(&seen.lock().unwrap()[0]), ["mcp__everything__echo"]);
    let listing = agent.list_tools();
    let meta: Vec<_> = listing.iter().filter(|t| ambit::mcp::meta::NAMES.contains(&t.name.as_str())).collect();
    assert_eq!(meta.len(), 7);
    assert!(meta.iter().all(|t| t.status == ambit::ToolStatus::Hidden), "{meta:?}");
    let get_sum = listing.iter().find(|t| t.name == "mcp__everything__get-sum").unwrap();
    assert_eq!(get_sum.status, ambit::ToolStatus::Hidden);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_policy_keeps_the_mcp_servers_under_the_new_policy() {
    let dir = servers_dir();
    let server = McpServer::stdio("everything", ["node".to_string(), everything_js(&dir)])
        .deferral(ambit::deferral::Deferral::Eager)
        .level("echo", ambit::Level::Read);
    let (model, seen) =
        scripted(vec![call("c1", "mcp__everything__echo", serde_json::json!({"message": "still here"})), text("ok")]);
    let agent = Agent::builder().model(model).mcp(server).build().unwrap();
    let narrowed = agent.with_policy(ambit::Policy::level(ambit::Level::Read)).unwrap();
    let result = narrowed.run("echo").await.unwrap();
    let echo = &result.tool_calls[0];
    assert!(!echo.is_error && echo.result.contains("still here"), "{}", echo.result);
    let tools = names(&seen.lock().unwrap()[0]);
    assert!(tools.contains(&"mcp__everything__echo".to_string()), "{tools:?}");
    assert!(!tools.contains(&"mcp__everything__get-sum".to_string()), "above read, not offered: {tools:?}");
    let status = |name: &str| narrowed.list_tools().into_iter().find(|t| t.name == name).map(|t| t.status);
    assert_eq!(status("mcp__everything__get-sum"), Some(ambit::ToolStatus::AboveLevel));
    assert_eq!(status("mcp__everything__echo"), Some(ambit::ToolStatus::Offered));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_call_forwards_the_servers_progress_notifications_as_its_notes() {
    use futures::StreamExt;
    // server-everything's long-running operation sends notifications/progress at each step when its
    // request carries a progress token: a background call asks for them, and each is the task's note.
    let dir = servers_dir();
    let tool = "mcp__everything__trigger-long-running-operation";
    let (model, _seen) = scripted(vec![
        call("c1", tool, serde_json::json!({"duration": 0.3, "steps": 3, "background": true})),
        text("started"),
        text("done"),
    ]);
    let server = McpServer::stdio("everything", ["node".to_string(), everything_js(&dir), "stdio".to_string()]);
    let agent = Agent::builder().model(model).mcp(server.trusted(true)).background(true).build().unwrap();
    let events: Vec<ambit::Event> = agent.stream("go").filter_map(|e| async move { e.ok() }).collect().await;
    let notes: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            ambit::Event::BackgroundTaskProgress { note, .. } => Some(note.as_str()),
            _ => None,
        })
        .collect();
    // The notes come in order, each a step of the server's. The last may be lost: rmcp hands a
    // notification to the handler on a task of its own, so one sent just before the result can be
    // handled after the call (and its progress token) ended; a loaded machine showed it (2 of 3 notes).
    assert!(!notes.is_empty() && ["1/3", "2/3", "3/3"].starts_with(&notes), "{notes:?} {events:#?}");
    // Negative control: the same call inline (not in the background) asks for no progress.
    let (model, _seen) =
        scripted(vec![call("c1", tool, serde_json::json!({"duration": 0.3, "steps": 3})), text("done")]);
    let server = McpServer::stdio("everything", ["node".to_string(), everything_js(&dir), "stdio".to_string()]);
    let agent = Agent::builder().model(model).mcp(server.trusted(true)).background(true).build().unwrap();
    let events: Vec<ambit::Event> = agent.stream("go").filter_map(|e| async move { e.ok() }).collect().await;
    assert!(!events.iter().any(|e| matches!(e, ambit::Event::BackgroundTaskProgress { .. })), "{events:#?}");
}
