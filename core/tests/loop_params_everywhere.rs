//! `background` and `scratchpad` (SPEC §5) on every tool the model is offered, not only the host's:
//! an MCP tool of a real server (tests/mcp/arguments_server.py, which answers with the names of the
//! arguments that reached it), `tool_search`, `tool_load` and the MCP resource meta-tools. Each call
//! detaches or is saved, and neither parameter reaches the tool or the server.

mod mcp_support;

use ambit::mcp::McpServer;
use ambit::{Agent, Message};
use mcp_support::{call, scripted, servers_dir, text};
use serde_json::json;

fn arguments_server() -> McpServer {
    let dir = servers_dir();
    let python = dir.join("venv/bin/python").display().to_string();
    let script = mcp_support::repo_root().join("tests/mcp/arguments_server.py").display().to_string();
    McpServer::stdio("args", [python, script])
}

/// The user messages that carried background reports, in order.
fn reports(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::User { content, .. } if content.starts_with("[background task ") => Some(content.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_and_scratchpad_work_on_mcp_tools_and_the_meta_tools_and_never_reach_the_server() {
    let (model, seen) = scripted(vec![
        // Negative control: a stray argument does reach the server, which names it.
        call("c1", "mcp__args__show_arguments", json!({"word": "a", "other": 1})),
        call("c2", "mcp__args__show_arguments", json!({"word": "b", "scratchpad": "args"})),
        call("c3", "mcp__args__show_arguments", json!({"word": "c", "background": true})),
        text("waiting"),
        call("c4", "tool_search", json!({"query": "arguments", "scratchpad": "found"})),
        call("c5", "tool_load", json!({"name": "mcp__args__show_arguments", "background": true})),
        text("waiting again"),
        call("c6", "mcp_resource_list", json!({"server": "args", "scratchpad": "resources", "background": true})),
        text("and again"),
        call("c7", "scratchpad_read", json!({"name": "args"})),
        call("c8", "scratchpad_read", json!({"name": "found"})),
        call("c9", "scratchpad_list", json!({})),
        text("done"),
    ]);
    let agent = Agent::builder()
        .model(model)
        .mcp(arguments_server())
        .background(true)
        .scratchpad(true)
        .max_turns(20)
        .build()
        .unwrap();
    let result = agent.run("show me").await.unwrap();
    assert_eq!(result.output, "done");
    let by_id = |id: &str| result.tool_calls.iter().find(|c| c.id == id).unwrap_or_else(|| panic!("no call {id}"));
    let seen = seen.lock().unwrap();

    // Every tool the first request offered carries both parameters (the MCP tools are deferred, so
    // the request holds the discovery tools, the task and scratchpad tools).
    for t in &seen[0].tools {
        let props = &t.parameters["properties"];
        assert!(props.get("scratchpad").is_some(), "{} lacks scratchpad", t.name);
        // task_list and task_cancel act on the tasks themselves: no background for them.
        let inline = t.name == "task_list" || t.name == "task_cancel";
        assert_eq!(props.get("background").is_some(), !inline, "{}", t.name);
    }
    // After the load, the MCP tool ships with both.
    let loaded = seen.last().unwrap().tools.iter().find(|t| t.name == "mcp__args__show_arguments").unwrap();
    assert!(loaded.parameters["properties"].get("background").is_some());
    assert!(loaded.parameters["properties"].get("scratchpad").is_some());

    let c1 = by_id("c1");
    assert!(!c1.is_error && c1.result.contains(r#"["other", "word"]"#), "negative control: {}", c1.result);

    // Saved, not inline; what the server saw is in the scratchpad, without `scratchpad`.
    let c2 = by_id("c2");
    assert!(c2.result.starts_with("Saved ") && c2.result.contains("scratchpad 'args'"), "{}", c2.result);
    let c7 = by_id("c7");
    assert!(!c7.is_error && c7.result.contains(r#"["word"]"#), "{}", c7.result);

    // Detached: a task id at once, the result later as its own turn, without `background`.
    let c3 = by_id("c3");
    assert!(c3.result.starts_with("Started background task "), "{}", c3.result);
    let last = &seen.last().unwrap().messages;
    let reports = reports(last);
    assert_eq!(reports.len(), 3, "{reports:#?}");
    assert!(
        reports[0].contains("(mcp__args__show_arguments) finished") && reports[0].contains(r#"["word"]"#),
        "{}",
        reports[0]
    );

    // tool_search saved to the scratchpad.
    let c4 = by_id("c4");
    assert!(c4.result.starts_with("Saved ") && c4.result.contains("scratchpad 'found'"), "{}", c4.result);
    let c8 = by_id("c8");
    assert!(c8.result.contains("mcp__args__show_arguments"), "{}", c8.result);

    // tool_load detached; its report says what it loaded, and the schema ships from then on.
    let c5 = by_id("c5");
    assert!(c5.result.starts_with("Started background task "), "{}", c5.result);
    assert!(reports[1].contains("(tool_load) finished"), "{}", reports[1]);
    assert!(seen.last().unwrap().tools.iter().any(|t| t.name == "mcp__args__show_arguments"));

    // An MCP meta-tool, detached and saved: the report is the saved note, the list is in the scratchpad.
    let c6 = by_id("c6");
    assert!(c6.result.starts_with("Started background task "), "{}", c6.result);
    assert!(
        reports[2].contains("(mcp_resource_list) finished")
            && reports[2].contains("Saved ")
            && reports[2].contains("scratchpad 'resources'"),
        "{}",
        reports[2]
    );
    let c9 = by_id("c9");
    for entry in ["args:", "found:", "resources:"] {
        assert!(c9.result.contains(entry), "{entry} missing: {}", c9.result);
    }
}

/// SPEC §5: `background` is added to every schema "except to tools that do no work of their own, such
/// as compaction requests": those are declared so ([`ambit::ToolSpec::inline`]), are not offered it,
/// and a call that sends it anyway runs inline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_that_do_no_work_of_their_own_are_not_offered_background() {
    let (model, seen) = scripted(vec![call("c1", "context_compact", json!({"background": true})), text("done")]);
    let builtin = |n: &str| ambit::tools::builtin::by_name(n).unwrap();
    let agent = Agent::builder()
        .model(model)
        .tool_arc(builtin("context_compact"))
        .tool_arc(builtin("conversation_search"))
        .tool_arc(builtin("escalate_to_human"))
        .background(true)
        .scratchpad(true)
        .build()
        .unwrap();
    let result = agent.run("compact").await.unwrap();
    let seen = seen.lock().unwrap();
    let offered = |name: &str| {
        let t = seen[0].tools.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("{name} not offered"));
        let props = &t.parameters["properties"];
        (props.get("background").is_some(), props.get("scratchpad").is_some())
    };
    for inline in ["context_compact", "escalate_to_human", "task_list", "task_cancel"] {
        assert_eq!(offered(inline), (false, true), "{inline}");
    }
    // Negative control: a tool that does work of its own is offered both.
    for working in ["conversation_search", "scratchpad_read"] {
        assert_eq!(offered(working), (true, true), "{working}");
    }
    // Sent anyway, it runs inline (here: outside a session, it says so at once) and never detaches.
    let c1 = &result.tool_calls[0];
    assert!(!c1.result.starts_with("Started background task"), "{}", c1.result);
    assert!(c1.result.contains("this run has no session"), "{}", c1.result);
}

/// A tool of a server that became unavailable (it was listed, then its process ended and cannot start
/// again): the model may still call it by name. `background` detaches that call too, and `scratchpad`
/// keeps its error inline (errors are never saved).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_and_scratchpad_work_on_a_tool_of_an_unavailable_server() {
    let dir = servers_dir();
    let python = dir.join("venv/bin/python").display().to_string();
    let script = mcp_support::repo_root().join("tests/mcp/arguments_server.py").display().to_string();
    let flag = tempfile::tempdir().unwrap();
    let started = flag.path().join("started");
    // Starts the server once; every later start fails, so the server stays unavailable.
    let command = format!(
        "if [ -e '{s}' ]; then echo 'refusing a second start' >&2; exit 1; fi; touch '{s}'; exec '{python}' '{script}'",
        s = started.display()
    );
    let (model, seen) = scripted(vec![
        call("c1", "mcp__args__exit_now", json!({})),
        call("c2", "mcp__args__show_arguments", json!({"word": "x", "background": true})),
        text("waiting"),
        call("c3", "mcp__args__show_arguments", json!({"word": "y", "scratchpad": "never"})),
        call("c4", "scratchpad_list", json!({})),
        text("done"),
    ]);
    let server = ambit::mcp::McpServer::stdio("args", ["sh".to_string(), "-c".to_string(), command]);
    let agent = Agent::builder()
        .model(model)
        .mcp(server.deferral(ambit::deferral::Deferral::Eager))
        .background(true)
        .scratchpad(true)
        .max_turns(20)
        .build()
        .unwrap();
    let result = agent.run("go").await.unwrap();
    assert_eq!(result.output, "done");
    let by_id = |id: &str| result.tool_calls.iter().find(|c| c.id == id).unwrap_or_else(|| panic!("no call {id}"));
    let seen = seen.lock().unwrap();
    // The server is reported unavailable from the second request on, and its tools are not offered.
    let context = seen[1].instructions.clone().unwrap_or_default();
    assert!(context.contains("## Unavailable tool servers\n- args: "), "{context}");
    assert!(
        !mcp_support::names(&seen[1]).iter().any(|n| n.starts_with("mcp__args__")),
        "{:?}",
        mcp_support::names(&seen[1])
    );
    // Detached: the unavailable server's answer arrives as its own turn.
    let c2 = by_id("c2");
    assert!(c2.result.starts_with("Started background task "), "{}", c2.result);
    let reports = reports(&seen.last().unwrap().messages);
    assert_eq!(reports.len(), 1, "{reports:#?}");
    assert!(
        reports[0].contains("(mcp__args__show_arguments) failed")
            && reports[0].contains("MCP server 'args' is unavailable"),
        "{}",
        reports[0]
    );
    // Saved? No: an error stays inline, and nothing is saved under the name.
    let c3 = by_id("c3");
    assert!(c3.is_error && c3.result.contains("MCP server 'args' is unavailable"), "{}", c3.result);
    assert!(!by_id("c4").result.contains("never"), "{}", by_id("c4").result);
}
