//! Tooling over a registry: what a request carries, the catalog, lookups, tool_search, tool_load and
//! the note, without a model.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::*;
use crate::agent::run_state::RunState;
use crate::permission::{Filters, Level};
use crate::tools::{ToolContext, ToolRegistry, tool_fn};

fn echo(name: &str, description: &str, level: Level) -> Arc<dyn Tool> {
    let params = json!({"type": "object", "properties": {
        "q": {"type": "string", "description": "The query."},
        "limit": {"type": "integer", "default": 10, "description": "At most this many."},
    }, "required": ["q"]});
    Arc::new(
        tool_fn(name, description, params, |a: Value| async move { Ok::<_, String>(format!("ran {a}")) }).level(level),
    )
}

fn facts(level: Level, approvals: bool, filters: Filters) -> Facts {
    Facts { level, approvals, filters: Arc::new(filters), network: crate::permission::Network::Unrestricted }
}

fn tooling(deferrable: &[&str], setting: Deferral, strategy: LoadStrategy, f: Facts) -> Tooling {
    let mut reg = ToolRegistry::new();
    reg.register(echo("get_weather", "Current weather for a city.", Level::Read)).unwrap();
    reg.register(echo("find_xrefs", "Cross references of a symbol.\nSecond line.", Level::Read)).unwrap();
    reg.register(echo("deploy", "Deploys the service.", Level::Unrestricted)).unwrap();
    let config =
        DeferralConfig { setting, strategy, deferrable_tools: deferrable.iter().map(|s| s.to_string()).collect() };
    Tooling::new(reg, config, None, f)
}

fn names(specs: &[ToolSpec]) -> Vec<&str> {
    specs.iter().map(|s| s.name.as_str()).collect()
}

fn ctx(level: Level) -> ToolContext {
    ToolContext {
        call_id: "c1".into(),
        level,
        scope: Arc::new(crate::permission::Scope::current_dir().unwrap()),
        network: crate::permission::Network::Unrestricted,
        allow_local_addresses: Arc::from([]),
        credentials: None,
        declared: Arc::from([]),
        context: None,
    }
}

#[test]
fn resolve_covers_every_setting() {
    assert_eq!(resolve(Deferral::Deferred, false), Some(true));
    assert_eq!(resolve(Deferral::Eager, false), Some(false));
    assert_eq!(resolve(Deferral::Hidden, false), None);
    for s in [Deferral::Deferred, Deferral::Eager, Deferral::Hidden] {
        assert_eq!(resolve(s, true), Some(false), "eager_load_tools wins under {s:?}");
    }
    assert_eq!("hidden".parse::<Deferral>(), Ok(Deferral::Hidden));
    assert!("lazy".parse::<Deferral>().is_err());
}

#[test]
fn with_nothing_deferred_the_request_is_unchanged() {
    let t =
        tooling(&[], Deferral::Deferred, LoadStrategy::Append, facts(Level::Unrestricted, false, Filters::default()));
    let tb = t.toolbox();
    assert_eq!(names(&t.request_tools(&tb, &RunLoads::default())), ["get_weather", "find_xrefs", "deploy"]);
    assert_eq!(t.catalog(&tb), None);
    assert!(t.lookup(TOOL_SEARCH).is_none());
    assert!(t.lookup(TOOL_LOAD).is_none());
}

#[test]
fn deferrable_host_tools_wait_in_the_catalog_until_loaded() {
    let t = tooling(
        &["find_xrefs", "deploy"],
        Deferral::Deferred,
        LoadStrategy::Append,
        facts(Level::Unrestricted, false, Filters::default()),
    );
    let tb = t.toolbox();
    let mut loads = RunLoads::default();
    assert_eq!(names(&t.request_tools(&tb, &loads)), ["get_weather", TOOL_SEARCH, TOOL_LOAD]);
    let cat = t.catalog(&tb).unwrap();
    assert!(cat.contains("### host (2 tools)\n- deploy [unrestricted]: Deploys the service.\n- find_xrefs [read]: Cross references of a symbol.\n"), "{cat}");
    loads.load("deploy");
    assert_eq!(names(&t.request_tools(&tb, &loads)), ["get_weather", TOOL_SEARCH, TOOL_LOAD, "deploy"]);
}

#[test]
fn hidden_and_eager_settings_and_the_eager_strategy() {
    let f = || facts(Level::Unrestricted, false, Filters::default());
    let t = tooling(&["find_xrefs"], Deferral::Hidden, LoadStrategy::Append, f());
    assert_eq!(names(&t.request_tools(&t.toolbox(), &RunLoads::default())), ["get_weather", "deploy"]);
    assert!(t.lookup("find_xrefs").is_none(), "hidden: not registered at all");
    let t = tooling(&["find_xrefs"], Deferral::Eager, LoadStrategy::Append, f());
    assert_eq!(names(&t.request_tools(&t.toolbox(), &RunLoads::default())), ["get_weather", "find_xrefs", "deploy"]);
    let t = tooling(&["find_xrefs"], Deferral::Deferred, LoadStrategy::Eager, f());
    assert_eq!(names(&t.request_tools(&t.toolbox(), &RunLoads::default())), ["get_weather", "find_xrefs", "deploy"]);
    assert_eq!(t.catalog(&t.toolbox()), None);
}

#[test]
fn blocked_and_above_level_tools_are_not_in_the_catalog() {
    let mut filters = Filters::default();
    filters.block.insert("find_xrefs".into());
    let t = tooling(
        &["find_xrefs", "deploy"],
        Deferral::Deferred,
        LoadStrategy::Append,
        facts(Level::Read, false, filters),
    );
    // deploy is above level without approvals, find_xrefs blocked: nothing offered is deferred.
    assert_eq!(t.catalog(&t.toolbox()), None);
    assert_eq!(names(&t.request_tools(&t.toolbox(), &RunLoads::default())), ["get_weather"]);
}

#[tokio::test]
async fn tool_search_ranks_and_says_whether_a_call_is_allowed() {
    let t = tooling(
        &["find_xrefs", "deploy"],
        Deferral::Deferred,
        LoadStrategy::Append,
        facts(Level::Read, true, Filters::default()),
    );
    let search = t.lookup(TOOL_SEARCH).unwrap();
    let out = search.call_in(json!({"query": "xerfs"}), &ctx(Level::Read)).await.unwrap();
    assert_eq!(out["results"][0]["name"], "find_xrefs");
    assert_eq!(out["results"][0]["deferred"], true);
    assert_eq!(out["results"][0]["call"], "allowed");
    assert_eq!(out["results"][0]["summary"], "Cross references of a symbol.");
    let out = search.call_in(json!({"query": "deploys service"}), &ctx(Level::Read)).await.unwrap();
    assert_eq!(out["results"][0]["name"], "deploy");
    assert_eq!(out["results"][0]["call"], "needs approval (requires level unrestricted, this session holds read)");
    let out = search.call_in(json!({"query": "zzqqy"}), &ctx(Level::Read)).await.unwrap();
    assert_eq!(out, json!("No tool matches 'zzqqy'."));
}

#[tokio::test]
async fn tool_load_marks_loaded_suggests_and_limits() {
    let t = tooling(
        &["find_xrefs", "deploy"],
        Deferral::Deferred,
        LoadStrategy::Append,
        facts(Level::Unrestricted, false, Filters::default()),
    );
    let state = Arc::new(RunState::default());
    let load = t.lookup(TOOL_LOAD).unwrap();
    let out = state
        .clone()
        .scope(load.call_in(json!({"name": ["find_xrefs", "find_xref", "weather"]}), &ctx(Level::Unrestricted)))
        .await
        .unwrap();
    assert_eq!(out["loaded"][0]["name"], "find_xrefs");
    assert_eq!(out["loaded"][0]["parameters"]["properties"]["limit"]["default"], 10);
    assert_eq!(out["unknown"][0]["nearest_names"], json!(["find_xrefs"]));
    assert_eq!(out["unknown"][1]["keyword_matches"], json!(["get_weather"]));
    assert_eq!(state.deferral.lock().unwrap().loaded, ["find_xrefs"]);
    let eleven: Vec<String> = (0..11).map(|i| format!("t{i}")).collect();
    let err = load.call_in(json!({"name": eleven}), &ctx(Level::Unrestricted)).await.unwrap_err();
    assert!(err.to_string().contains("at most 10"), "{err}");
}

#[tokio::test]
async fn a_deferred_call_without_loading_runs_and_notes_once_per_tool_per_run() {
    let t = tooling(
        &["find_xrefs"],
        Deferral::Deferred,
        LoadStrategy::Append,
        facts(Level::Unrestricted, false, Filters::default()),
    );
    let state = Arc::new(RunState::default());
    let tool = t.lookup("find_xrefs").unwrap();
    let first = state.clone().scope(tool.call_in(json!({"q": "main"}), &ctx(Level::Unrestricted))).await.unwrap();
    let text = first.as_str().unwrap();
    assert!(text.starts_with("ran {\"q\":\"main\"}\n\n[Note: find_xrefs was called without tool_load."), "{text}");
    assert!(text.contains("- limit (integer, default 10): At most this many."), "{text}");
    assert!(!text.contains("- q ("), "{text}");
    let second = state.clone().scope(tool.call_in(json!({"q": "x"}), &ctx(Level::Unrestricted))).await.unwrap();
    assert_eq!(second, json!("ran {\"q\":\"x\"}"));
    // A new run notes again; a loaded tool never.
    let state = Arc::new(RunState::default());
    state.deferral.lock().unwrap().load("find_xrefs");
    let loaded = state.clone().scope(tool.call_in(json!({"q": "x"}), &ctx(Level::Unrestricted))).await.unwrap();
    assert_eq!(loaded, json!("ran {\"q\":\"x\"}"));
    // Every documented parameter passed: no note.
    let state = Arc::new(RunState::default());
    let all =
        state.clone().scope(tool.call_in(json!({"q": "x", "limit": 2}), &ctx(Level::Unrestricted))).await.unwrap();
    assert_eq!(all, json!("ran {\"limit\":2,\"q\":\"x\"}"));
}

#[tokio::test]
async fn prepare_puts_the_catalog_after_the_instructions() {
    let t = tooling(
        &["deploy"],
        Deferral::Deferred,
        LoadStrategy::Append,
        facts(Level::Unrestricted, false, Filters::default()),
    );
    let mut req = crate::model::ModelRequest::default();
    let loads = Mutex::new(RunLoads::default());
    t.prepare(&mut req, Some("Be brief."), &loads).await;
    let i = req.instructions.unwrap();
    assert!(i.starts_with("Be brief.\n\n## Tool discovery\n"), "{i}");
    assert_eq!(names(&req.tools), ["get_weather", "find_xrefs", TOOL_SEARCH, TOOL_LOAD]);
}

#[test]
fn undocumented_note_lists_type_default_and_description_in_name_order() {
    let spec = ToolSpec::new(
        "t",
        "",
        json!({"type": "object", "properties": {
        "b": {"type": ["string", "null"]}, "a": {"type": "integer", "default": 3, "description": "A."}}}),
    );
    let note = undocumented_note(&spec, &json!({})).unwrap();
    assert!(
        note.ends_with("- a (integer, default 3): A.\n- b (string | null, no default): (no description)]"),
        "{note}"
    );
    assert_eq!(undocumented_note(&spec, &json!({"a": 1, "b": "x"})), None);
    let _ = BTreeMap::<u8, u8>::new();
}

#[test]
fn the_listing_reports_deferred_and_hidden_after_the_policy() {
    let status = |t: &Tooling| t.listing().into_iter().map(|l| (l.name, l.status)).collect::<Vec<_>>();
    let f = || facts(Level::Unrestricted, false, Filters::default());
    let t = tooling(&["find_xrefs", "deploy"], Deferral::Deferred, LoadStrategy::Append, f());
    assert_eq!(
        status(&t),
        [
            ("get_weather".to_string(), ToolStatus::Offered),
            ("find_xrefs".to_string(), ToolStatus::Deferred),
            ("deploy".to_string(), ToolStatus::Deferred),
        ]
    );
    // Hidden ones come after those that ship.
    let t = tooling(&["find_xrefs"], Deferral::Hidden, LoadStrategy::Append, f());
    assert_eq!(
        status(&t),
        [
            ("get_weather".to_string(), ToolStatus::Offered),
            ("deploy".to_string(), ToolStatus::Offered),
            ("find_xrefs".to_string(), ToolStatus::Hidden),
        ]
    );
    // The policy's answer comes first: blocked and above-level tools say so, deferred or not.
    let mut filters = Filters::default();
    filters.block.insert("find_xrefs".into());
    let t =
        tooling(&["find_xrefs", "deploy"], Deferral::Hidden, LoadStrategy::Append, facts(Level::Read, false, filters));
    assert_eq!(
        status(&t),
        [
            ("get_weather".to_string(), ToolStatus::Offered),
            ("find_xrefs".to_string(), ToolStatus::Blocked),
            ("deploy".to_string(), ToolStatus::AboveLevel),
        ]
    );
    // With approvals, an above-level deferred tool is deferred and its calls go to the handler.
    let t =
        tooling(&["deploy"], Deferral::Deferred, LoadStrategy::Append, facts(Level::Read, true, Filters::default()));
    let deploy = t.listing().into_iter().find(|l| l.name == "deploy").unwrap();
    assert_eq!((deploy.status, deploy.approval, deploy.level), (ToolStatus::Deferred, true, Level::Unrestricted));
}

#[test]
fn the_catalog_is_rendered_once_per_snapshot() {
    let t = tooling(
        &["deploy"],
        Deferral::Deferred,
        LoadStrategy::Append,
        facts(Level::Unrestricted, false, Filters::default()),
    );
    let tb = t.toolbox();
    let a = t.catalog(&tb).unwrap();
    assert_eq!(t.catalog(&tb).unwrap(), a);
    assert_eq!(
        Some(a),
        catalog::render(
            &[CatalogEntry {
                name: "deploy".into(),
                group: "host".into(),
                level: Level::Unrestricted,
                description: "Deploys the service.".into()
            }],
            &CatalogLimits::default(),
        )
    );
}

#[test]
fn native_ships_deferred_tools_whole_to_the_provider_search() {
    let f = || facts(Level::Unrestricted, false, Filters::default());
    let t = tooling(&["find_xrefs", "deploy"], Deferral::Deferred, LoadStrategy::Native, f()).with_native_search(true);
    assert!(t.native());
    let tb = t.toolbox();
    let tools = t.request_tools(&tb, &RunLoads::default());
    // No catalog, tool_search or tool_load: the deferred tools ship whole, marked for the provider.
    assert_eq!(names(&tools), ["get_weather", "find_xrefs", "deploy"]);
    assert_eq!(tools.iter().map(|s| s.defer_loading).collect::<Vec<_>>(), [false, true, true]);
    assert_eq!(tools[1].parameters, tb.get("find_xrefs").unwrap().tool.spec().parameters);
    assert_eq!(t.catalog(&tb), None);
    assert!(t.lookup(TOOL_SEARCH).is_none());
    assert!(t.lookup(TOOL_LOAD).is_none());
    // The provider loaded the schema: a call runs the tool itself, without the undocumented note.
    assert_eq!(t.lookup("deploy").unwrap().spec().name, "deploy");
    assert!(Arc::ptr_eq(&t.lookup("deploy").unwrap(), &tb.get("deploy").unwrap().tool));
    // The listing still says deferred.
    assert!(t.listing().iter().any(|l| l.name == "deploy" && l.status == crate::permission::ToolStatus::Deferred));

    // Without the model's support, and with the other strategies, the local search stays.
    let local =
        tooling(&["find_xrefs", "deploy"], Deferral::Deferred, LoadStrategy::Native, f()).with_native_search(false);
    assert_eq!(
        names(&local.request_tools(&local.toolbox(), &RunLoads::default())),
        ["get_weather", TOOL_SEARCH, TOOL_LOAD]
    );
    let append = tooling(&["deploy"], Deferral::Deferred, LoadStrategy::Append, f()).with_native_search(true);
    assert!(!append.native());
    assert!(append.catalog(&append.toolbox()).is_some());
    assert_eq!(LoadStrategy::default(), LoadStrategy::Native);
    assert_eq!("native".parse::<LoadStrategy>(), Ok(LoadStrategy::Native));
    assert_eq!(serde_json::to_value(LoadStrategy::Native).unwrap(), json!("native"));
}
