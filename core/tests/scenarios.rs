//! Runs every scenario file in tests/scenarios/ against the loopback provider: the same files the
//! Python, Node and Swift suites run.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ambit::{Agent, OpenAiChat, Tool, ToolError, ToolSpec};
use ambit_test_provider::{Provider, Script};
use async_trait::async_trait;
use serde_json::Value;

/// A host tool that does what a scenario's `behavior` says.
struct ScenarioTool {
    spec: ToolSpec,
    behavior: Value,
}

fn fill(template: &str, args: &Value) -> String {
    let mut out = template.to_string();
    if let Some(obj) = args.as_object() {
        for (k, v) in obj {
            let text = v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
            out = out.replace(&format!("{{{k}}}"), &text);
        }
    }
    out
}

#[async_trait]
impl Tool for ScenarioTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        if let Some(t) = self.behavior.get("returns").and_then(Value::as_str) {
            return Ok(Value::String(fill(t, &arguments)));
        }
        if let Some(t) = self.behavior.get("raises").and_then(Value::as_str) {
            return Err(ToolError::Failed(fill(t, &arguments)));
        }
        Err(ToolError::Failed(format!("the scenario gives no behavior this suite knows: {}", self.behavior)))
    }
}

fn scenario_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no scenario files in {}", dir.display());
    files
}

async fn run_scenario(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let scenario: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let provider = Provider::start(Script::load(path)?).await.map_err(|e| e.to_string())?;
    let cfg = &scenario["agent"];
    let mut model = OpenAiChat::new(cfg["model"].as_str().unwrap()).base_url(provider.base_url()).max_retries(0);
    if let Some(key) = cfg["api_key"].as_str() {
        model = model.api_key(key);
    }
    let mut builder = Agent::builder().model(model);
    if let Some(i) = cfg["instructions"].as_str() {
        builder = builder.instructions(i);
    }
    if let Some(n) = cfg["max_turns"].as_u64() {
        builder = builder.max_turns(n as u32);
    }
    for t in scenario["tools"].as_array().into_iter().flatten() {
        builder = builder.tool(ScenarioTool {
            spec: ToolSpec::new(
                t["name"].as_str().unwrap(),
                t["description"].as_str().unwrap(),
                t["parameters"].clone(),
            ),
            behavior: t["behavior"].clone(),
        });
    }
    let agent = builder.build().map_err(|e| e.to_string())?;
    let outcome = agent.run(scenario["input"].as_str().unwrap()).await;
    let expect = &scenario["expect"];
    if let Some(err) = expect.get("error") {
        let e = match outcome {
            Ok(r) => return Err(format!("expected error {err}, got output {:?}", r.output)),
            Err(e) => e,
        };
        if e.code() != err["code"].as_str().unwrap() {
            return Err(format!("expected error code {}, got {} ({e})", err["code"], e.code()));
        }
        if let Some(m) = err.get("message_contains").and_then(Value::as_str)
            && !e.to_string().contains(m)
        {
            return Err(format!("error message {e:?} does not contain {m:?}"));
        }
        return Ok(());
    }
    let result = outcome.map_err(|e| format!("run failed: {e}"))?;
    if let Some(out) = expect.get("output")
        && out.as_str() != Some(result.output.as_str())
    {
        return Err(format!("output: expected {out}, got {:?}", result.output));
    }
    if let Some(calls) = expect.get("tool_calls").and_then(Value::as_array) {
        if calls.len() != result.tool_calls.len() {
            return Err(format!("expected {} tool calls, got {:?}", calls.len(), result.tool_calls));
        }
        for (want, got) in calls.iter().zip(&result.tool_calls) {
            let got_v = serde_json::to_value(got).unwrap();
            for k in ["name", "arguments", "result", "is_error"] {
                if let Some(w) = want.get(k)
                    && w != &got_v[k]
                {
                    return Err(format!("tool call {k}: expected {w}, got {}", got_v[k]));
                }
            }
        }
    }
    if let Some(usage) = expect.get("usage").and_then(Value::as_object) {
        let got = serde_json::to_value(result.usage).unwrap();
        for (k, w) in usage {
            if w != &got[k] {
                return Err(format!("usage.{k}: expected {w}, got {}", got[k]));
            }
        }
    }
    let (served, mismatches) = provider.report();
    if !mismatches.is_empty() {
        return Err(format!("provider saw mismatches: {mismatches:?}"));
    }
    let exchanges = scenario["exchanges"].as_array().map_or(0, Vec::len);
    if served != exchanges {
        return Err(format!("{served} of {exchanges} scripted exchanges were used"));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_file_passes() {
    let mut failures = Vec::new();
    let files = scenario_files();
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        match run_scenario(f).await {
            Ok(()) => println!("scenario {name}: ok"),
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{} of {} scenarios failed:\n{}", failures.len(), files.len(), failures.join("\n"));
}

fn object_tool(name: &str) -> ScenarioTool {
    ScenarioTool { spec: ToolSpec::new(name, "d", serde_json::json!({"type": "object"})), behavior: Value::Null }
}

#[tokio::test]
async fn duplicate_tool_names_are_a_config_error() {
    let err =
        Agent::builder().model(OpenAiChat::new("m")).tool(object_tool("t")).tool(object_tool("t")).build().unwrap_err();
    assert_eq!(err.code(), "config");
    assert!(err.to_string().contains("'t' is already registered"), "{err}");
}

#[tokio::test]
async fn a_schema_that_is_not_an_object_is_refused() {
    let err = Agent::builder()
        .model(OpenAiChat::new("m"))
        .tool(ScenarioTool { spec: ToolSpec::new("t", "d", serde_json::json!("string")), behavior: Value::Null })
        .build()
        .unwrap_err();
    assert_eq!(err.code(), "config");
    assert!(err.to_string().contains("tool 't': parameters must be a JSON Schema object"), "{err}");
}

#[tokio::test]
async fn an_unreachable_provider_is_a_transport_error() {
    // A port that was free a moment ago: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let agent = Agent::builder()
        .model(OpenAiChat::new("m").base_url(format!("http://127.0.0.1:{port}/v1")).max_retries(0))
        .build()
        .unwrap();
    let err = agent.run("hi").await.unwrap_err();
    assert_eq!(err.code(), "model_transport", "{err}");
}

#[test]
fn arc_tools_share_one_registry_namespace() {
    let t: Arc<dyn Tool> = Arc::new(object_tool("a"));
    let agent = Agent::builder().model(OpenAiChat::new("m")).tool_arc(t).build().unwrap();
    assert!(agent.tools().get("a").is_some());
    assert!(agent.tools().get("b").is_none());
}
