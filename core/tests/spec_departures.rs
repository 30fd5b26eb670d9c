//! SPEC departures found side by side with the code, each attacked through the public API with a
//! scripted model that records every request: network `none` withholds web_fetch (§1), for a
//! sub-agent spawned with it too; refusals name the argument as the schema spells it and a blank list
//! entry is dropped (§2); a negative count is refused, never replaced by the default (§2).

mod mcp_support;

use ambit::agent::subagent::SubagentConfig;
use ambit::permission::Network;
use ambit::{Agent, Level, Policy, Scope, ToolStatus};
use mcp_support::{call, names, scripted, text};
use serde_json::json;

fn web_fetch() -> std::sync::Arc<dyn ambit::Tool> {
    ambit::tools::builtin::by_name("web_fetch").unwrap()
}

fn tmp_scope() -> Scope {
    Scope::new("/tmp", Vec::<&str>::new(), Vec::<&str>::new(), false).unwrap()
}

#[tokio::test]
async fn network_none_withholds_web_fetch_from_the_request_and_the_listing() {
    for (network, offered) in [(Network::None, false), (Network::Remote, true), (Network::Unrestricted, true)] {
        let (model, seen) = scripted(vec![call("c1", "web_fetch", json!({"url": "http://192.0.2.1/"})), text("done")]);
        let agent = Agent::builder()
            .model(model)
            .tool_arc(web_fetch())
            .policy(Policy::level(Level::Read).network(network))
            .build()
            .unwrap();
        let status = agent.list_tools().into_iter().find(|t| t.name == "web_fetch").unwrap().status;
        if !offered {
            let result = agent.run("fetch").await.unwrap();
            let seen = seen.lock().unwrap();
            assert!(!names(&seen[0]).contains(&"web_fetch".to_string()), "{network:?}: {:?}", names(&seen[0]));
            assert_eq!(status, ToolStatus::NoNetwork);
            // Called anyway (a model that remembers it), it is refused in words that say why.
            assert_eq!(
                result.tool_calls[0].result,
                "Error: tool 'web_fetch' needs the network, and this session's network setting is none"
            );
        } else {
            // Negative control: with a network, it is offered (the call is not made here).
            let agent = Agent::builder()
                .model(scripted(vec![text("done")]).0)
                .tool_arc(web_fetch())
                .policy(Policy::level(Level::Read).network(network))
                .build()
                .unwrap();
            assert_eq!(agent.offered_specs().iter().filter(|s| s.name == "web_fetch").count(), 1, "{network:?}");
            assert_eq!(status, ToolStatus::Offered, "{network:?}");
        }
    }
}

#[tokio::test]
async fn a_sub_agent_spawned_with_network_none_does_not_see_web_fetch() {
    let (model, seen) = scripted(vec![
        call("s1", "agent_spawn", json!({"prompt": "look", "network": "none"})),
        text("child done"),
        call("s2", "agent_spawn", json!({"prompt": "look again"})),
        text("second child done"),
        text("done"),
    ]);
    let agent = Agent::builder()
        .model(model)
        .tool_arc(web_fetch())
        .policy(Policy::level(Level::Read).network(Network::Remote).scope(tmp_scope()))
        .subagents(SubagentConfig::default())
        .build()
        .unwrap();
    let result = agent.run("delegate").await.unwrap();
    assert_eq!(result.output, "done");
    let seen = seen.lock().unwrap();
    let has_fetch = |i: usize| names(&seen[i]).contains(&"web_fetch".to_string());
    assert!(has_fetch(0), "the parent (network remote) is offered web_fetch");
    assert!(!has_fetch(1), "the sub-agent at network none: {:?}", names(&seen[1]));
    // Negative control: a sub-agent spawned without narrowing the network sees it.
    assert!(has_fetch(3), "the second sub-agent inherits remote: {:?}", names(&seen[3]));
}

#[tokio::test]
async fn refusals_name_the_argument_as_the_schema_spells_it() {
    let (model, _) = scripted(vec![
        call("c1", "checklist_add", json!({"items": ["Write the fix", "   "]})),
        call("c2", "agent_spawn", json!({"prompt": "p", "permission": "admin"})),
        call(
            "c3",
            "agent_spawn",
            json!({"prompt": "p", "working_directory": ".", "additional_workspace_directories": ["/etc"]}),
        ),
        call("c4", "agent_spawn", json!({"prompt": "p", "additional_workspace_directories": ["."]})),
        call("c5", "checklist_edit", json!({"id": 1, "status": "done"})),
        call("c6", "conversation_search", json!({"query": "x", "limit": -1})),
        call("c7", "conversation_read", json!({"start": 1, "limit": -3})),
        call("c8", "checklist_edit", json!({"id": 1, "status": "completed"})),
        text("done"),
    ]);
    let session_tool = |n: &str| ambit::tools::builtin::by_name(n).unwrap();
    let agent = Agent::builder()
        .model(model)
        .checklist(true)
        .tool_arc(session_tool("conversation_search"))
        .tool_arc(session_tool("conversation_read"))
        .policy(Policy::level(Level::Workspace).scope(tmp_scope()))
        .subagents(SubagentConfig::default())
        .max_turns(20)
        .build()
        .unwrap();
    let result = agent.run("go").await.unwrap();
    let r: Vec<&str> = result.tool_calls.iter().map(|c| c.result.as_str()).collect();
    // A blank entry of a list is dropped: one item added.
    assert!(r[0].starts_with("Added #1.\nChecklist (1 open):\n#1 [pending] Write the fix"), "{}", r[0]);
    assert!(!r[0].contains("#2"), "{}", r[0]);
    assert_eq!(
        r[1],
        "Error: tool 'agent_spawn' refused the call: argument 'permission' must be one of none, read, workspace, \
         unrestricted, got the string \"admin\""
    );
    assert!(r[2].contains("additional_workspace_directories '/etc' is outside your reach"), "{}", r[2]);
    assert!(r[3].contains("additional_workspace_directories needs working_directory beside it"), "{}", r[3]);
    assert!(
        r[4].contains("argument 'status' must be one of pending, in_progress, deferred, completed, canceled"),
        "{}",
        r[4]
    );
    // A negative count is refused before the tool runs, never replaced by the default.
    assert_eq!(
        r[5],
        "Error: tool 'conversation_search' refused the call: argument 'limit' is a count and cannot be negative, got -1"
    );
    assert_eq!(
        r[6],
        "Error: tool 'conversation_read' refused the call: argument 'limit' is a count and cannot be negative, got -3"
    );
    assert!(r[7].starts_with("Updated #1."), "{}", r[7]);
}

/// SPEC §3: a smaller per-endpoint `max_tool_name_bytes` cuts names to fit it (a call under the cut
/// name runs the tool by its whole name), on every wire; a value above the wire's own limit is refused
/// with a typed error naming the setting.
#[tokio::test]
async fn a_per_endpoint_max_tool_name_bytes_cuts_names_to_fit_and_never_exceeds_the_wire() {
    use ambit::tools::wire_name::wire_name;
    use ambit::{Anthropic, Model, ModelConfig, OpenAiChat, OpenAiResponses, Wire, tool_fn};
    use ambit_test_provider::{Provider, Script};

    #[derive(serde::Deserialize)]
    struct City {
        city: String,
    }
    let whole = "lookup_the_current_weather_for_a_city";
    let short = "get_time";
    for (wire, limit) in [("openai_chat", 24), ("anthropic", 32), ("openai_responses", 20)] {
        let cut = wire_name(whole, limit);
        assert_eq!(cut.len(), limit, "{cut}");
        let script: Script =
            serde_json::from_value(json!({"name": format!("short_names_{wire}"), "wire": wire, "exchanges": [
                {"expect": {"tool_names": [cut, short]},
                 "respond": {"tool_calls": [{"id": "c1", "name": cut, "arguments": {"city": "Oslo"}}]}},
                {"respond": {"content": "done"}}
            ]}))
            .unwrap();
        let provider = Provider::start(script).await.unwrap();
        let url = provider.base_url();
        let model: std::sync::Arc<dyn Model> = match wire {
            "anthropic" => std::sync::Arc::new(
                Anthropic::new("m").base_url(url).api_key("k").with_max_tool_name_bytes(limit).unwrap(),
            ),
            "openai_responses" => std::sync::Arc::new(
                OpenAiResponses::new("m").base_url(url).api_key("k").with_max_tool_name_bytes(limit).unwrap(),
            ),
            _ => std::sync::Arc::new(
                OpenAiChat::new("m").base_url(url).api_key("k").with_max_tool_name_bytes(limit).unwrap(),
            ),
        };
        let weather = tool_fn(
            whole,
            "Weather.",
            json!({"type": "object", "properties": {"city": {"type": "string"}}}),
            |a: City| async move { Ok::<_, String>(format!("sunny in {}", a.city)) },
        );
        let time = tool_fn(short, "Time.", json!({"type": "object"}), |_: serde_json::Value| async {
            Ok::<_, String>("noon")
        });
        let agent = Agent::builder().model_arc(model).tool(weather).tool(time).build().unwrap();
        let result = agent.run("weather?").await.unwrap_or_else(|e| panic!("{wire}: {e}"));
        let (served, mismatches) = provider.report();
        assert!(mismatches.is_empty(), "{wire}: {mismatches:?}");
        assert_eq!(served, 2);
        assert_eq!(result.tool_calls[0].name, whole, "recorded under the whole name");
        assert_eq!(result.tool_calls[0].result, "sunny in Oslo");
    }
    // Never larger than the wire's own limit (nor too short for a cut name), in the builder and in the
    // plain-data form the bindings use.
    let e = OpenAiChat::new("m").with_max_tool_name_bytes(65).err().unwrap();
    assert_eq!(e.code(), "config");
    assert!(
        e.to_string().contains("max_tool_name_bytes 65 is larger than the openai_chat wire's own limit of 64 bytes"),
        "{e}"
    );
    assert!(Anthropic::new("m").with_max_tool_name_bytes(129).is_err());
    assert!(Anthropic::new("m").with_max_tool_name_bytes(128).is_ok());
    let e = OpenAiResponses::new("m").with_max_tool_name_bytes(13).err().unwrap();
    assert!(e.to_string().contains("max_tool_name_bytes 13 is below 14 bytes"), "{e}");
    let mut config = ModelConfig::new(Wire::OpenaiChat, "m");
    config.max_tool_name_bytes = Some(100);
    let e = config.build().err().unwrap();
    assert_eq!(e.code(), "config");
    assert!(
        e.to_string().contains("model: max_tool_name_bytes 100 is larger than the openai_chat wire's own limit of 64"),
        "{e}"
    );
    config.max_tool_name_bytes = Some(40);
    assert_eq!(config.build().unwrap().max_tool_name_bytes(), 40);
    let e = ModelConfig::from_json(r#"{"wire": "anthropic", "model": "m", "max_tool_name_bytes": -3}"#).unwrap_err();
    assert!(e.to_string().contains("max_tool_name_bytes must be a whole number, 0 or more; got -3"), "{e}");
}

/// SPEC §4: the context gauge counts what the request carries: not a deferred (or hidden) host tool,
/// yes the MCP tools, tool_search / tool_load and the catalog. Checked against the request the
/// loopback provider received.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_context_gauge_counts_the_tools_the_request_carries() {
    use ambit::deferral::{Deferral, DeferralConfig, LoadStrategy};
    use ambit::mcp::McpServer;
    use ambit::session::Sessions;
    use ambit::{OpenAiChat, tool_fn};
    use ambit_test_provider::{Provider, Script};

    let script: Script = serde_json::from_value(json!({"name": "gauge_tools", "exchanges": [
        {"respond": {"tool_calls": [{"id": "c1", "name": "context_check", "arguments": {}}]}},
        {"respond": {"content": "done"}}
    ]}))
    .unwrap();
    let provider = Provider::start(script).await.unwrap();
    let dir = mcp_support::servers_dir();
    let python = dir.join("venv/bin/python").display().to_string();
    let server = mcp_support::repo_root().join("tests/mcp/arguments_server.py").display().to_string();
    let plain = |name: &str, description: String| {
        tool_fn(name, description, json!({"type": "object"}), |_: serde_json::Value| async { Ok::<_, String>("ok") })
    };
    // A deferred host tool whose description alone is about 10,000 tokens.
    let huge = plain("huge", "A tool that is described at length. ".repeat(1100));
    let agent = Agent::builder()
        .model(OpenAiChat::new("m").base_url(provider.base_url()).api_key("k").max_retries(0))
        .instructions("Be brief.")
        .tool(plain("small", "A small eager tool.".into()))
        .tool(huge)
        .tool_arc(ambit::tools::builtin::by_name("context_check").unwrap())
        .deferral(DeferralConfig {
            setting: Deferral::Deferred,
            strategy: LoadStrategy::Append,
            deferrable_tools: ["huge".to_string()].into(),
        })
        .mcp(McpServer::stdio("args", [python, server]).deferral(Deferral::Eager))
        .build()
        .unwrap();
    let store = tempfile::tempdir().unwrap();
    let sessions = Sessions::open(&format!("sqlite://{}", store.path().join("s.db").display())).await.unwrap();
    let id = sessions.create().await.unwrap();
    let result = sessions.run(&agent, &id, "how full is the window?").await.unwrap();
    let report = &result.tool_calls[0].result;

    let state: serde_json::Value =
        reqwest::get(format!("{}/__ambit/state", provider.base_url().trim_end_matches("/v1")))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    let body = &state["requests"][0]["body"];
    let sent: Vec<&str> =
        body["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap()).collect();
    // What the request carried: the eager tools, the MCP server's, the discovery tools; not `huge`.
    for name in ["small", "context_check", "mcp__args__show_arguments", "tool_search", "tool_load"] {
        assert!(sent.contains(&name), "{name} not sent: {sent:?}");
    }
    assert!(!sent.contains(&"huge"), "{sent:?}");
    let system = body["messages"][0]["content"].as_str().unwrap();
    assert!(system.contains("## Tool discovery") && system.contains("- huge ["), "{system}");

    // The gauge counts exactly those schemas, and the catalog with the instructions.
    let fixed = report.split("Fixed overhead: about ").nth(1).unwrap_or_else(|| panic!("{report}"));
    let (tokens, rest) = fixed.split_once(" tokens of instructions and the ").unwrap_or_else(|| panic!("{report}"));
    let tokens: u64 = tokens.parse().unwrap();
    let counted: usize = rest.split_once(' ').unwrap().0.parse().unwrap_or_else(|_| panic!("{report}"));
    assert_eq!(counted, sent.len(), "{report}\nsent: {sent:?}");
    let system_tokens = (system.chars().count() as u64).div_ceil(4);
    assert!(tokens > system_tokens, "the catalog and instructions ({system_tokens}) are counted: {report}");
    assert!(tokens < 5_000, "the deferred tool's 10,000 tokens are not counted: {report}");
}
