//! Runs every scenario file in tests/scenarios/ against the loopback provider: the same files the
//! Python, Node and Swift suites run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ambit::{Agent, Budget, Event, ModelConfig, OpenAiChat, PolicyConfig, Tool, ToolContext, ToolError, ToolSpec};
use ambit_test_provider::{Provider, Script};
use async_trait::async_trait;
use futures::StreamExt;
use serde_json::Value;

/// A scenario's `context`, as the host value this suite passes to each run (a Rust type of its own: the
/// core holds it opaquely and never serializes it).
struct ScenarioContext(Value);

/// A run's input: a step's `messages` (a list in the core's message form, given as it is), a step with
/// `history: true` (the previous run's `result.messages`, then the step's `input` as a user message),
/// or its `input`.
fn step_input(
    step: &Value,
    previous: Option<&ambit::RunResult>,
    at: &str,
) -> Result<Result<ambit::Input, ambit::Error>, String> {
    if let Some(m) = step.get("messages") {
        // Decoded by the core, which checks it: a bad entry is the run's typed error.
        return Ok(ambit::Input::from_json(m.clone()));
    }
    let input = step["input"].as_str().ok_or_else(|| format!("{at} has no input"))?.to_string();
    if step.get("history") == Some(&Value::Bool(true)) {
        let mut messages = previous.ok_or_else(|| format!("{at}: history without an earlier run"))?.messages.clone();
        messages.push(ambit::Message::user(input));
        return Ok(Ok(ambit::Input::Messages(messages)));
    }
    Ok(Ok(ambit::Input::Text(input)))
}

/// A scenario hook's `behavior` (tests/scenarios/README.md, "Hooks and guardrails"), the same in every
/// suite: what it answers for `payload`, or the error it raises.
fn hook_answer(behavior: &Value, payload: &Value, ctx: &ambit::HookContext) -> Result<ambit::HookAction, String> {
    use ambit::HookAction;
    if let Some(m) = behavior.get("raises").and_then(Value::as_str) {
        return Err(m.to_string());
    }
    if behavior.get("uppercase_result") == Some(&Value::Bool(true)) {
        let result = payload["result"].as_str().unwrap_or_default().to_uppercase();
        return Ok(HookAction::Replace(Value::String(result)));
    }
    if let Some(key) = behavior.get("append_context").and_then(Value::as_str) {
        let context = ctx.context::<ScenarioContext>().ok_or("the run has no context")?;
        let value = context.0[key].as_str().unwrap_or_default();
        let result = format!("{} [{value}]", payload["result"].as_str().unwrap_or_default());
        return Ok(HookAction::Replace(Value::String(result)));
    }
    if let Some(reason) = behavior.get("refuse").and_then(Value::as_str) {
        return Ok(HookAction::Refuse(reason.to_string()));
    }
    if let Some(args) = behavior.get("set_arguments") {
        return Ok(HookAction::Replace(args.clone()));
    }
    if let Some(text) = behavior.get("append_instructions").and_then(Value::as_str) {
        let instructions = format!("{}{text}", payload["instructions"].as_str().unwrap_or_default());
        return Ok(HookAction::Replace(serde_json::json!({ "instructions": instructions })));
    }
    if let Some(text) = behavior.get("set_preamble")
        && payload["tool_calls"].as_array().is_some_and(|c| !c.is_empty())
    {
        return Ok(HookAction::Replace(serde_json::json!({ "text": text })));
    }
    Ok(HookAction::Continue)
}

/// A scenario guardrail's `behavior`: `trips_on` a word (case-insensitively) in the payload's `input`
/// (input guardrails) or `output` (output guardrails), with the verdict `{"matched": word}`; or
/// `raises`.
fn guardrail_answer(behavior: &Value, payload: &Value) -> Result<ambit::GuardrailVerdict, String> {
    if let Some(m) = behavior.get("raises").and_then(Value::as_str) {
        return Err(m.to_string());
    }
    let word = behavior["trips_on"].as_str().ok_or("a guardrail behavior needs trips_on")?;
    let text = payload.get("input").or_else(|| payload.get("output")).and_then(Value::as_str).unwrap_or_default();
    Ok(if text.to_lowercase().contains(&word.to_lowercase()) {
        ambit::GuardrailVerdict::trip(serde_json::json!({ "matched": word }))
    } else {
        ambit::GuardrailVerdict::pass()
    })
}

/// The scenario's `hooks`, `input_guardrails` and `output_guardrails` on `builder`: each entry a plain
/// closure, or (`"async": true`) one that yields once before it answers.
fn with_hooks(mut builder: ambit::AgentBuilder, scenario: &Value) -> Result<ambit::AgentBuilder, String> {
    for h in scenario["hooks"].as_array().into_iter().flatten() {
        let name = h["name"].as_str().ok_or("hooks[].name")?.to_string();
        let point = ambit::HookPoint::parse(h["point"].as_str().ok_or("hooks[].point")?).map_err(|e| e.to_string())?;
        let (behavior, is_async) = (h["behavior"].clone(), h["async"] == Value::Bool(true));
        builder = builder.hook_fn(name, point, move |ctx, payload| {
            let behavior = behavior.clone();
            async move {
                if is_async {
                    tokio::task::yield_now().await;
                }
                hook_answer(&behavior, &payload, &ctx)
            }
        });
    }
    for (key, input) in [("input_guardrails", true), ("output_guardrails", false)] {
        for g in scenario[key].as_array().into_iter().flatten() {
            let name = g["name"].as_str().ok_or("guardrails[].name")?.to_string();
            let (behavior, is_async) = (g["behavior"].clone(), g["async"] == Value::Bool(true));
            let guardrail = ambit::guardrail_fn(name, move |_ctx, payload| {
                let behavior = behavior.clone();
                async move {
                    if is_async {
                        tokio::task::yield_now().await;
                    }
                    guardrail_answer(&behavior, &payload)
                }
            });
            builder = if input { builder.input_guardrail(guardrail) } else { builder.output_guardrail(guardrail) };
        }
    }
    Ok(builder)
}

/// A host tool that does what a scenario's `behavior` says.
struct ScenarioTool {
    spec: ToolSpec,
    behavior: Value,
    /// Opened by a session step's `release`: what a `waits_for_release` tool waits on.
    release: tokio::sync::watch::Receiver<bool>,
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
        self.act(arguments, BTreeMap::new()).await
    }

    /// `{credential:alias}` in a behavior's text is the declared credential, read from the context;
    /// `{context:key}` the run context's `key` (the suite's [`ScenarioContext`]).
    async fn call_in(&self, arguments: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let mut credentials = ctx.declared_credentials().await?;
        let template = self.behavior.get("returns").and_then(Value::as_str).unwrap_or_default();
        if template.contains("{context:") {
            let context =
                ctx.context::<ScenarioContext>().ok_or_else(|| ToolError::failed("the run has no context"))?;
            for (k, v) in context.0.as_object().into_iter().flatten() {
                credentials.insert(format!("\0context:{k}"), v.as_str().unwrap_or_default().to_string());
            }
        }
        self.act(arguments, credentials).await
    }
}

impl ScenarioTool {
    async fn act(&self, arguments: Value, credentials: BTreeMap<String, String>) -> Result<Value, ToolError> {
        let fill = |t: &str, a: &Value| {
            let mut out = fill(t, a);
            for (alias, value) in &credentials {
                match alias.strip_prefix("\0") {
                    Some(key) => out = out.replace(&format!("{{{key}}}"), value),
                    None => out = out.replace(&format!("{{credential:{alias}}}"), value),
                }
            }
            out
        };
        if self.behavior.get("until_cancelled") == Some(&Value::Bool(true)) {
            // Progress through the task handle, then wait on the cancellation token. (On cancel the
            // core drops this future: that is how Rust code is cancelled.)
            let task = ambit::agent::background::TaskHandle::current()
                .ok_or_else(|| ToolError::failed("not in the background"))?;
            if let Some(note) = self.behavior.get("progress").and_then(Value::as_str) {
                task.progress(fill(note, &arguments));
            }
            tokio::select! {
                _ = task.cancelled() => return Err(ToolError::Cancelled),
                _ = tokio::time::sleep(std::time::Duration::from_secs(20)) => {}
            }
        }
        if self.behavior.get("waits_for_release") == Some(&Value::Bool(true)) {
            // Progress through the task handle, then hold until the suite releases it (after its run
            // ended: work that outlives the run).
            if let (Some(task), Some(note)) =
                (ambit::agent::background::TaskHandle::current(), self.behavior.get("progress").and_then(Value::as_str))
            {
                task.progress(fill(note, &arguments));
            }
            let mut release = self.release.clone();
            release.wait_for(|open| *open).await.map_err(|e| ToolError::Failed(e.to_string()))?;
        }
        if let Some(ms) = self.behavior.get("sleeps_ms").and_then(Value::as_u64) {
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        }
        if let Some(t) = self.behavior.get("returns").and_then(Value::as_str) {
            return Ok(Value::String(fill(t, &arguments)));
        }
        if let Some(i) = self.behavior.get("returns_image") {
            // The text, then the image: a result of content parts.
            let text = fill(i["text"].as_str().unwrap_or_default(), &arguments);
            let (media_type, data) =
                (i["media_type"].as_str().unwrap_or_default(), i["data"].as_str().unwrap_or_default());
            let image = ambit::Part::Image { media_type: media_type.into(), data: data.into() };
            let repeat = self.behavior.get("repeat").and_then(Value::as_u64).unwrap_or(1) as usize;
            let parts = std::iter::once(ambit::Part::text(text)).chain(std::iter::repeat_n(image, repeat));
            return Ok(ambit::content::tool_content(parts.collect()));
        }
        if let Some(t) = self.behavior.get("raises").and_then(Value::as_str) {
            return Err(ToolError::Failed(fill(t, &arguments)));
        }
        Err(ToolError::Failed(format!("the scenario gives no behavior this suite knows: {}", self.behavior)))
    }
}

/// The host's approval handler in a scenario: answers from `approvals`, in order, and records what it
/// was asked.
#[derive(Clone)]
struct ScriptedApprovals {
    answers: Arc<std::sync::Mutex<std::collections::VecDeque<Value>>>,
    requests: Arc<std::sync::Mutex<Vec<ambit::ApprovalRequest>>>,
    /// The latch the `waits_for_release` tools of every agent the scenario builds wait on.
    release: Arc<tokio::sync::watch::Sender<bool>>,
}

impl ScriptedApprovals {
    fn new(scenario: &Value) -> Self {
        let answers = scenario.get("approvals").and_then(Value::as_array).cloned().unwrap_or_default();
        ScriptedApprovals {
            answers: Arc::new(std::sync::Mutex::new(answers.into())),
            requests: Arc::default(),
            release: Arc::new(tokio::sync::watch::channel(false).0),
        }
    }
}

#[async_trait]
impl ambit::ApprovalHandler for ScriptedApprovals {
    async fn decide(&self, request: &ambit::ApprovalRequest) -> Result<ambit::ApprovalDecision, String> {
        self.requests.lock().unwrap().push(request.clone());
        let answer = self.answers.lock().unwrap().pop_front().ok_or("the scenario has no answer left")?;
        serde_json::from_value(answer).map_err(|e| e.to_string())
    }
}

/// Writes the scenario's fixture into a fresh temporary directory T: `fixture.files` into T/ws, which
/// becomes the working directory, and `fixture.outside` into T/outside (beyond the session's reach,
/// `../outside/…` from the working directory).
fn write_fixture(scenario: &Value) -> Result<Option<PathBuf>, String> {
    let Some(fixture) = scenario.get("fixture") else { return Ok(None) };
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let root = std::env::temp_dir().join(format!(
        "ambit-fixture-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&root);
    for (key, sub) in [("files", "ws"), ("outside", "outside")] {
        let dir = root.join(sub);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        for (name, spec) in fixture.get(key).and_then(Value::as_object).into_iter().flatten() {
            let text = match (spec.get("text").and_then(Value::as_str), spec.get("line").and_then(Value::as_str)) {
                (Some(t), _) => t.to_string(),
                (None, Some(line)) => format!("{line}\n").repeat(spec["count"].as_u64().unwrap_or(1) as usize),
                _ => return Err(format!("fixture file {name}: give text, or line and count")),
            };
            let path = dir.join(name);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
            }
            std::fs::write(path, text).map_err(|e| e.to_string())?;
        }
    }
    Ok(Some(root.join("ws")))
}

fn scenario_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        // `AMBIT_SCENARIOS=part`: only the files whose name holds `part` (while working on them).
        .filter(|p| std::env::var("AMBIT_SCENARIOS").map_or(true, |f| p.to_string_lossy().contains(&f)))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no scenario files in {}", dir.display());
    files
}

/// The model a scenario names, on its wire, streamed or not, at the provider's URL.
fn scenario_model(scenario: &Value, base_url: String) -> Result<ModelConfig, String> {
    let cfg = &scenario["agent"];
    let config = serde_json::json!({
        "wire": scenario.get("wire").cloned().unwrap_or_else(|| "openai_chat".into()),
        "model": cfg["model"],
        "base_url": base_url,
        "api_key": cfg["api_key"],
        "stream": scenario.get("stream").cloned().unwrap_or(Value::Bool(false)),
        // No retries unless the scenario counts on them; `timeout_secs` is the per-request timeout.
        "max_retries": cfg.get("max_retries").cloned().unwrap_or(Value::from(0)),
        "timeout_secs": cfg.get("timeout_secs"),
        "settings": cfg.get("settings").cloned().unwrap_or_else(|| serde_json::json!({})),
        "headers": cfg.get("headers").cloned().unwrap_or_else(|| serde_json::json!({})),
        "query": cfg.get("query").cloned().unwrap_or_else(|| serde_json::json!({})),
    });
    ModelConfig::from_json(&config.to_string()).map_err(|e| e.to_string())
}

/// How a scenario is run: to the result, or as a stream of events.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Mode {
    Run,
    Stream,
}

/// The scenario's agent at the provider's URL, its approval handler `approvals` (shared by every agent
/// a session scenario builds); a `ledger` lives at `ledger`.
async fn build_agent(
    scenario: &Value,
    base_url: String,
    approvals: &ScriptedApprovals,
    ledger: &LedgerAt,
) -> Result<Agent, String> {
    let model = scenario_model(scenario, base_url.clone())?.build().map_err(|e| e.to_string())?;
    let mut builder = Agent::builder();
    // `agent.profiles`: each a model of the same wire and provider, under its own name and settings.
    for (name, p) in scenario["agent"]["profiles"].as_object().into_iter().flatten() {
        let mut s = scenario.clone();
        s["agent"]["model"] = p["model"].clone();
        s["agent"]["settings"] = p.get("settings").cloned().unwrap_or_else(|| serde_json::json!({}));
        let m = scenario_model(&s, base_url.clone())?.build().map_err(|e| e.to_string())?;
        builder = builder.profile(name, m);
    }
    // `named_agents`: each an agent of its own (model, instructions, tools, policy) on the same provider.
    for (name, n) in scenario.get("named_agents").and_then(Value::as_object).into_iter().flatten() {
        let own = serde_json::json!({
            "wire": scenario.get("wire").cloned().unwrap_or_else(|| "openai_chat".into()),
            "stream": scenario.get("stream").cloned().unwrap_or(Value::Bool(false)),
            "agent": {"model": n["model"], "api_key": scenario["agent"]["api_key"], "instructions": n.get("instructions")},
            "tools": n.get("tools").cloned().unwrap_or_else(|| serde_json::json!([])),
            "policy": n.get("policy").cloned().unwrap_or_else(|| serde_json::json!({})),
        });
        let agent = Box::pin(build_agent(&own, base_url.clone(), approvals, ledger)).await?;
        let description = n["description"].as_str().unwrap_or_default();
        builder = builder.named_agent(name, ambit::NamedAgent::new(agent, description));
    }
    build_agent_with(builder, scenario, model, approvals, ledger).await
}

/// The scenario's agent on `model`.
async fn build_agent_on(
    scenario: &Value,
    model: std::sync::Arc<dyn ambit::Model>,
    approvals: &ScriptedApprovals,
    ledger: &LedgerAt,
) -> Result<Agent, String> {
    build_agent_with(Agent::builder(), scenario, model, approvals, ledger).await
}

/// The scenario's agent on `model`, from `builder` (which may hold its profiles and named agents).
async fn build_agent_with(
    builder: ambit::AgentBuilder,
    scenario: &Value,
    model: std::sync::Arc<dyn ambit::Model>,
    approvals: &ScriptedApprovals,
    ledger: &LedgerAt,
) -> Result<Agent, String> {
    let cfg = &scenario["agent"];
    let mut builder = builder.model_arc(model);
    if let Some(n) = cfg["max_concurrency"].as_u64() {
        builder = builder.max_concurrency(n as usize);
    }
    if let Some(b) = cfg.get("budget") {
        builder = builder.budget(serde_json::from_value::<Budget>(b.clone()).map_err(|e| e.to_string())?);
    }
    if let Some(p) = cfg.get("prices") {
        builder = builder.prices(serde_json::from_value(p.clone()).map_err(|e| e.to_string())?);
    }
    if cfg["checklist"].as_bool() == Some(true) {
        builder = builder.checklist(true);
    }
    if let Some(n) = cfg["checklist_nudge_cap"].as_u64() {
        builder = builder.checklist_nudge_cap(n as u32);
    }
    builder = builder.background(cfg["background"].as_bool() == Some(true));
    builder = builder.scratchpad(cfg["scratchpad"].as_bool() == Some(true));
    if let Some(s) = cfg.get("subagents") {
        builder = builder.subagents(serde_json::from_value(s.clone()).map_err(|e| format!("subagents: {e}"))?);
    }
    if let Some(i) = cfg["instructions"].as_str() {
        builder = builder.instructions(i);
    }
    if let Some(n) = cfg["max_turns"].as_u64() {
        builder = builder.max_turns(n as u32);
    }
    if let Some(o) = cfg.get("output") {
        // `agent.output`: the final answer's type (a JSON Schema, as a Rust program derives one).
        builder = builder.output(serde_json::from_value(o.clone()).map_err(|e| format!("agent.output: {e}"))?);
    }
    if let Some(c) = scenario.get("credentials") {
        // `credentials`: the broker as data; `credential_callbacks`: what each callback answers.
        let config: ambit::CredentialsConfig =
            serde_json::from_value(c.clone()).map_err(|e| format!("credentials: {e}"))?;
        let mut callbacks: BTreeMap<String, Arc<dyn ambit::CredentialSource>> = BTreeMap::new();
        for (alias, value) in scenario["credential_callbacks"].as_object().into_iter().flatten() {
            let value = value.as_str().unwrap_or_default().to_string();
            let source = ambit::credentials::FnSource(move || {
                let value = value.clone();
                async move { Ok::<_, String>(value) }
            });
            callbacks.insert(alias.clone(), Arc::new(source));
        }
        builder = builder.credentials(config.into_credentials(callbacks).map_err(|e| e.to_string())?);
    }
    for t in scenario["tools"].as_array().into_iter().flatten() {
        // The scenario's tool object is a ToolSpec (name, description, parameters, level,
        // requires_approval, allow_blank) plus the behavior.
        let spec: ToolSpec = serde_json::from_value(t.clone()).map_err(|e| format!("tool spec: {e}"))?;
        let release = approvals.release.subscribe();
        builder = builder.tool(ScenarioTool { spec, behavior: t["behavior"].clone(), release });
    }
    for name in scenario.get("builtins").and_then(Value::as_array).into_iter().flatten() {
        let name = name.as_str().unwrap_or_default();
        builder = builder.tool_arc(ambit::tools::builtin::by_name(name).ok_or(format!("no built-in {name}"))?);
    }
    // `ledger`: the work ledger's four tools, bound to one run of a routine (on PostgreSQL with the
    // scope, routine id and run id made unique by the store's suffix).
    if let Some(l) = scenario.get("ledger") {
        let store = ledger.open().await?;
        let sfx = &ledger.suffix;
        let mut run = ambit::ledger::tools::RoutineRun::new(
            format!("{}{sfx}", l["scope"].as_str().ok_or("ledger.scope")?),
            format!("{}{sfx}", l["run_id"].as_str().ok_or("ledger.run_id")?),
        );
        run.routine_id = l["routine_id"].as_str().map(|r| format!("{r}{sfx}"));
        if let Some(n) = l["limit"].as_u64() {
            run = run.limit(n as usize);
        }
        for tool in ambit::ledger::tools::ledger_tools(store, run) {
            builder = builder.tool_arc(tool);
        }
    }
    // `memory`: a fresh SQLite memory store beside the ledger (one per run of the file, shared by its
    // steps) and the agent's name in it.
    if let Some(m) = scenario.get("memory") {
        let url = format!("sqlite://{}", ledger.dir.path().join("memory.db").display());
        let memory = ambit::memory::Memory::open(&url).await.map_err(|e| e.to_string())?;
        let name = m["agent"].as_str().ok_or("memory.agent")?;
        builder = builder.memory(ambit::memory::MemoryConfig::new(memory, name).map_err(|e| e.to_string())?);
    }
    // `skills`: the skills directories (relative to the fixture's working directory) as plain data.
    if let Some(s) = scenario.get("skills") {
        builder = builder.skills(serde_json::from_value(s.clone()).map_err(|e| format!("skills: {e}"))?);
    }
    if let Some(k) = scenario.get("knowledge") {
        builder = builder.knowledge(serde_json::from_value(k.clone()).map_err(|e| format!("knowledge: {e}"))?);
    }
    let fixture = write_fixture(scenario)?;
    let mut policy = scenario.get("policy").cloned();
    if let Some(dir) = &fixture {
        let p = policy.get_or_insert_with(|| serde_json::json!({}));
        p["working_directory"] = Value::String(dir.display().to_string());
    }
    if let Some(policy) = policy {
        builder = builder.policy(scenario_policy(&policy, approvals)?);
    }
    if scenario.get("mcp_servers").is_some() || scenario.get("deferral").is_some() {
        builder = builder.tooling(scenario_tooling(scenario, ledger).await?);
    }
    builder = with_hooks(builder, scenario)?;
    builder.build().map_err(|e| e.to_string())
}

/// A scenario's policy (`policy`, or a step's `with_policy`): the core's PolicyConfig, plus
/// `approvals: true` for the host's handler.
fn scenario_policy(policy: &Value, approvals: &ScriptedApprovals) -> Result<ambit::Policy, String> {
    let mut config = policy.clone();
    let on = config.as_object_mut().and_then(|o| o.remove("approvals")) == Some(Value::Bool(true));
    let config = PolicyConfig::from_json(&config.to_string()).map_err(|e| e.to_string())?;
    let handler: Option<Arc<dyn ambit::ApprovalHandler>> = on.then(|| Arc::new(approvals.clone()) as _);
    config.into_policy(handler).map_err(|e| e.to_string())
}

/// `steps`: every step but the last runs to its result (its `expect.output` checked), each first putting
/// the agent under its `with_policy` when it has one, or moves the ledger's manual clock
/// (`advance_clock`); a step's `expect.drain_decision` is checked after it. Returns the agent and the
/// input of the last step, which the caller runs as the mode says. Without `steps`: the agent as it is,
/// and `input`.
async fn run_steps(
    mut agent: Agent,
    base_url: &str,
    scenario: &Value,
    approvals: &ScriptedApprovals,
    ledger: &LedgerAt,
) -> Result<(Agent, Result<ambit::Input, ambit::Error>), String> {
    let context = scenario_context(scenario);
    let Some(steps) = scenario.get("steps").and_then(Value::as_array) else {
        return Ok((agent, step_input(scenario, None, "the scenario")?));
    };
    let (last, earlier) = steps.split_last().ok_or("steps is empty")?;
    let mut previous = None;
    for (n, step) in earlier.iter().enumerate() {
        let at = format!("step {}", n + 1);
        if let Some(ms) = step.get("advance_clock") {
            let clock = ledger.clock.as_ref().ok_or_else(|| format!("{at}: advance_clock without ledger.clock_ms"))?;
            let ms = ms.as_i64().ok_or_else(|| format!("{at}: advance_clock is a number of milliseconds"))?;
            ambit::testing::advance_clock(clock, ms).map_err(|e| format!("{at}: {e}"))?;
            check_drain(scenario, step, ledger).await.map_err(|e| format!("{at}: {e}"))?;
            continue;
        }
        if step.get("new_agent").and_then(Value::as_bool) == Some(true) {
            agent = build_agent(scenario, base_url.to_string(), approvals, ledger)
                .await
                .map_err(|e| format!("{at}: {e}"))?;
        }
        if let Some(p) = step.get("with_policy") {
            agent = agent.with_policy(scenario_policy(p, approvals)?).map_err(|e| format!("{at}: with_policy: {e}"))?;
        }
        let input = step_input(step, previous.as_ref(), &at)?.map_err(|e| format!("{at}: {e}"))?;
        let run = match &context {
            Some(c) => agent.run_with_context(input, c.clone()).await,
            None => agent.run(input).await,
        };
        let result = run.map_err(|e| format!("{at}: run failed: {e}"))?;
        if let Some(out) = step.pointer("/expect/output")
            && out.as_str() != Some(result.output.as_str())
        {
            return Err(format!("{at}: output: expected {out}, got {:?}", result.output));
        }
        check_drain(scenario, step, ledger).await.map_err(|e| format!("{at}: {e}"))?;
        previous = Some(result);
    }
    if last.get("new_agent").and_then(Value::as_bool) == Some(true) {
        agent = build_agent(scenario, base_url.to_string(), approvals, ledger)
            .await
            .map_err(|e| format!("the last step: {e}"))?;
    }
    if let Some(p) = last.get("with_policy") {
        agent =
            agent.with_policy(scenario_policy(p, approvals)?).map_err(|e| format!("last step: with_policy: {e}"))?;
    }
    let input = step_input(last, previous.as_ref(), "the last step")?;
    Ok((agent, input))
}

/// `context`: the host value every run of the file gets (a [`ScenarioContext`]).
fn scenario_context(scenario: &Value) -> Option<ambit::RunContextValue> {
    scenario.get("context").map(|c| ambit::RunContextValue::new(ScenarioContext(c.clone())))
}

/// Where a scenario's `ledger` lives: a store, and the suffix its scope, routine id and run id get there
/// (none on a fresh SQLite file; a unique one on the shared PostgreSQL database, so runs never meet).
struct LedgerAt {
    url: String,
    suffix: String,
    /// A directory of the run's own, for its SQLite files (the ledger there on SQLite, the memory store).
    dir: tempfile::TempDir,
    /// `ledger.clock_ms`: the ledger's manual clock (the test hook), which `advance_clock` steps move;
    /// `None`: the system clock.
    clock: Option<ambit::ledger::ManualClock>,
    /// The run's `oauth` MCP servers (tests/mcp/oauth_server.py), by the scenario's server name, started
    /// when an agent is first built: every agent of the run (a `new_agent` step's) reaches the same one.
    oauth: tokio::sync::Mutex<BTreeMap<String, (String, tokio::process::Child)>>,
}

impl LedgerAt {
    fn sqlite() -> Result<LedgerAt, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let url = format!("sqlite://{}", dir.path().join("ledger.db").display());
        Ok(LedgerAt { url, suffix: String::new(), dir, clock: None, oauth: Default::default() })
    }

    /// The MCP URL of the run's `oauth` server `name`, started with `args` the first time.
    async fn oauth_server(&self, name: &str, args: &[String]) -> Result<String, String> {
        use tokio::io::AsyncBufReadExt;
        let mut servers = self.oauth.lock().await;
        if let Some((url, _)) = servers.get(name) {
            return Ok(url.clone());
        }
        let python = mcp_dir()?.join("venv/bin/python");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp/oauth_server.py");
        let mut child = tokio::process::Command::new(python)
            .arg(script)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("oauth_server.py: {e}"))?;
        let mut lines = tokio::io::BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
        let url = lines.next_line().await.map_err(|e| e.to_string())?.ok_or("oauth_server.py printed no URL")?;
        servers.insert(name.to_string(), (url.clone(), child));
        Ok(url)
    }

    /// `expect.oauth_stats`: each `oauth` server's counters (`GET /stats`), the keys named, equal.
    async fn check_oauth_stats(&self, expect: &Value) -> Result<(), String> {
        for (name, want) in expect.get("oauth_stats").and_then(Value::as_object).into_iter().flatten() {
            let url = self.oauth.lock().await.get(name).map(|(u, _)| u.clone());
            let url = url.ok_or_else(|| format!("oauth_stats: no oauth server '{name}' was started"))?;
            let stats: Value = reqwest::get(format!("{}/stats", url.trim_end_matches("/mcp")))
                .await
                .and_then(|r| r.error_for_status())
                .map_err(|e| e.to_string())?
                .json()
                .await
                .map_err(|e| e.to_string())?;
            for (k, w) in want.as_object().into_iter().flatten() {
                if &stats[k] != w {
                    return Err(format!("oauth_stats.{name}.{k}: expected {w}, got {} (all: {stats})", stats[k]));
                }
            }
        }
        Ok(())
    }

    /// The ledger at this store, on the scenario's manual clock when it has one.
    async fn open(&self) -> Result<ambit::ledger::Ledger, String> {
        match &self.clock {
            Some(clock) => ambit::testing::open_ledger(&self.url, clock).await,
            None => ambit::ledger::Ledger::open(&self.url).await,
        }
        .map_err(|e| e.to_string())
    }

    /// The scenario's provider, with `{{scope}}` and `{{routine_id}}` (the ledger's, as this store has
    /// them) for its expectations.
    async fn provider(&self, path: &Path, scenario: &Value) -> Result<Provider, String> {
        let mut script = Script::load(path)?;
        for key in ["scope", "routine_id"] {
            if let Some(v) = scenario.get("ledger").and_then(|l| l.get(key)).and_then(Value::as_str) {
                script.vars.insert(key.into(), format!("{v}{}", self.suffix));
            }
        }
        Provider::start(script).await.map_err(|e| e.to_string())
    }
}

/// The stores a scenario runs on: a fresh SQLite file; with a `ledger`, also the PostgreSQL server
/// scripts/test.sh starts (`AMBIT_TEST_POSTGRES_URL`).
fn ledger_stores(path: &Path, scenario: &Value) -> Result<Vec<(&'static str, LedgerAt)>, String> {
    let mut stores = vec![("sqlite", LedgerAt::sqlite()?)];
    let clock = match scenario.pointer("/ledger/clock_ms") {
        Some(ms) => {
            let ms = ms.as_i64().ok_or("ledger.clock_ms is a number of milliseconds")?;
            Some(ambit::testing::manual_clock(ms).map_err(|e| e.to_string())?)
        }
        None => None,
    };
    if scenario.get("ledger").is_some() {
        match std::env::var("AMBIT_TEST_POSTGRES_URL") {
            Ok(url) => {
                let nanos =
                    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
                let suffix = format!("-{:x}-{nanos:x}", std::process::id());
                let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
                stores.push(("postgres", LedgerAt { url, suffix, dir, clock: None, oauth: Default::default() }));
            }
            Err(_) => {
                println!("{}: the ledger not run on PostgreSQL: AMBIT_TEST_POSTGRES_URL is not set", path.display())
            }
        }
    }
    // Each store's run gets a clock of its own, at the same start.
    for (_, at) in &mut stores {
        at.clock = clock.as_ref().map(|c| ambit::ledger::ManualClock::new(ambit::ledger::Clock::now_ms(c)));
    }
    Ok(stores)
}

async fn run_scenario(path: &Path, mode: Mode) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let scenario: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    if scenario.get("session").is_some() {
        return run_session_scenario(path, &scenario).await;
    }
    let with_ledger = scenario.get("ledger").is_some();
    for (store, ledger) in ledger_stores(path, &scenario)? {
        run_scenario_on(path, &scenario, mode, &ledger)
            .await
            .map_err(|e| if with_ledger { format!("ledger on {store}: {e}") } else { e })?;
    }
    Ok(())
}

async fn run_scenario_on(path: &Path, scenario: &Value, mode: Mode, ledger: &LedgerAt) -> Result<(), String> {
    let scenario = scenario.clone();
    let provider = ledger.provider(path, &scenario).await?;
    let expect = &scenario["expect"];
    let approvals = ScriptedApprovals::new(&scenario);
    let agent = build_agent(&scenario, provider.base_url(), &approvals, ledger).await?;
    if let Some(want) = expect.get("tool_list").and_then(Value::as_array) {
        let got = serde_json::to_value(agent.list_tools()).unwrap();
        ambit_test_provider::subset(&Value::Array(want.clone()), &got, "tool_list")?;
    }
    let (agent, input) = run_steps(agent, &provider.base_url(), &scenario, &approvals, ledger).await?;
    if let Some(cancel) = scenario.get("cancel") {
        let input = match input.map_err(|e| e.to_string())? {
            ambit::Input::Text(t) => t,
            ambit::Input::Messages(_) => return Err("a cancel file takes a text input".into()),
        };
        return run_cancelled(&agent, &input, mode, cancel, &provider, &scenario).await;
    }
    let context = scenario_context(&scenario);
    let outcome = match (mode, input) {
        // A history the core refused: the run never started (no events to check).
        (_, Err(e)) => Err(e),
        (Mode::Run, Ok(input)) => match context {
            Some(c) => agent.run_with_context(input, c).await,
            None => agent.run(input).await,
        },
        (Mode::Stream, Ok(input)) => {
            let mut events = Vec::new();
            let mut stream = match context {
                Some(c) => agent.stream_with_context(input, c),
                None => agent.stream(input),
            };
            let mut end = None;
            while let Some(item) = stream.next().await {
                match item {
                    Ok(Event::RunFinished { result, .. }) => end = Some(Ok(result)),
                    Ok(e) => events.push(e),
                    Err(e) => end = Some(Err(e)),
                }
            }
            let refused = matches!(end, Some(Err(ambit::Error::InvalidMessage { .. }))) && events.is_empty();
            if !refused {
                check_events(expect, &events, end.as_ref())?;
            }
            end.ok_or("the stream ended without run_finished or an error")?
        }
    };
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
        if let Some(want) = err.get("attempt") {
            let got = match e {
                ambit::Error::OutputInvalid { ref attempt, .. } => attempt.clone(),
                _ => return Err(format!("the error carries no attempt: {e}")),
            };
            if want.as_str() != Some(got.as_str()) {
                return Err(format!("error attempt: expected {want}, got {got:?}"));
            }
        }
        // `hook`: the hook (or guardrail) a `hook_failed` names; `guardrail` and `verdict`: what a
        // `guardrail_tripped` carries.
        match (&e, err.get("hook"), err.get("guardrail")) {
            (ambit::Error::HookFailed { hook, .. }, Some(want), _) if want.as_str() != Some(hook.as_str()) => {
                return Err(format!("error hook: expected {want}, got {hook:?}"));
            }
            (ambit::Error::GuardrailTripped { guardrail, verdict, .. }, _, Some(want)) => {
                if want.as_str() != Some(guardrail.as_str()) {
                    return Err(format!("error guardrail: expected {want}, got {guardrail:?}"));
                }
                if let Some(v) = err.get("verdict")
                    && v != verdict
                {
                    return Err(format!("error verdict: expected {v}, got {verdict}"));
                }
            }
            (_, None, None) | (ambit::Error::HookFailed { .. }, Some(_), _) => {}
            (other, _, _) => return Err(format!("the error carries no hook or guardrail: {other}")),
        }
        if let Some(want) = err.get("tools") {
            let got = match e {
                ambit::Error::OutputTruncated { ref tools, .. } => serde_json::to_value(tools).unwrap(),
                _ => return Err(format!("the error names no tools: {e}")),
            };
            if want != &got {
                return Err(format!("error tools: expected {want}, got {got}"));
            }
        }
        if let Some(want) = err.get("usage").and_then(Value::as_object) {
            let got =
                serde_json::to_value(e.usage().ok_or_else(|| format!("the error carries no usage: {e}"))?).unwrap();
            for (k, w) in want {
                if w != &got[k] {
                    return Err(format!("error usage.{k}: expected {w}, got {}", got[k]));
                }
            }
        }
        ledger.check_oauth_stats(expect).await?;
        return check_provider(&provider, &scenario).await;
    }
    let result = outcome.map_err(|e| format!("run failed: {e}"))?;
    check_result(expect, &result, &approvals, &agent)?;
    check_drain(&scenario, &scenario, ledger).await?;
    ledger.check_oauth_stats(expect).await?;
    check_provider(&provider, &scenario).await
}

/// `expect.drain_decision` of the scenario (or of one of its steps, `at_step`): what the ledger's
/// `drain_decision` answers for the routine's run (the default limits), on the ledger's clock: `stop`
/// (null, or why) and `start_runs`.
async fn check_drain(scenario: &Value, at_step: &Value, at: &LedgerAt) -> Result<(), String> {
    let Some(want) = at_step.pointer("/expect/drain_decision") else { return Ok(()) };
    let l = &scenario["ledger"];
    let (routine, run) =
        (l["routine_id"].as_str().ok_or("ledger.routine_id")?, l["run_id"].as_str().ok_or("ledger.run_id")?);
    let ledger = at.open().await?;
    let got = ledger
        .drain_decision(&format!("{routine}{}", at.suffix), &format!("{run}{}", at.suffix), &Default::default())
        .await
        .map_err(|e| e.to_string())?;
    ambit_test_provider::subset(want, &serde_json::to_value(got).map_err(|e| e.to_string())?, "drain_decision")
}

/// `cancel`: the run (or its stream) is dropped, which is how Rust code cancels, once the provider has
/// received request `at_request` (which it holds with its `delay_ms`); then `expect.abandoned`: the
/// provider saw the client hang up on those requests, and no other request came.
async fn run_cancelled(
    agent: &Agent,
    input: &str,
    mode: Mode,
    cancel: &Value,
    provider: &Provider,
    scenario: &Value,
) -> Result<(), String> {
    let at = cancel["at_request"].as_u64().ok_or("cancel.at_request")? as usize;
    let run = async {
        match mode {
            Mode::Run => agent.run(input).await.map(|r| r.output).map_err(|e| e.to_string()),
            Mode::Stream => {
                let mut stream = agent.stream(input);
                let mut last = Err("the stream ended without run_finished".to_string());
                while let Some(item) = stream.next().await {
                    last = match item {
                        Ok(Event::RunFinished { result, .. }) => Ok(result.output),
                        Ok(_) => continue,
                        Err(e) => Err(e.to_string()),
                    };
                }
                last
            }
        }
    };
    let reached = async {
        // Bounded polling on a real condition: the provider has the request.
        for _ in 0..1000 {
            if provider.report().0 >= at {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    };
    tokio::select! {
        ended = run => return Err(format!("the run ended before it was cancelled: {ended:?}")),
        () = reached => {}
    }
    // The run's future is dropped here: cancelled.
    check_provider(provider, scenario).await
}

/// `expect` against a finished run's result.
fn check_result(
    expect: &Value,
    result: &ambit::RunResult,
    approvals: &ScriptedApprovals,
    agent: &Agent,
) -> Result<(), String> {
    if let Some(want) = expect.get("approval_requests") {
        let got = serde_json::to_value(approvals.requests.lock().unwrap().clone()).unwrap();
        ambit_test_provider::subset(want, &got, "approval_requests")?;
    }
    if let Some(out) = expect.get("output")
        && out.as_str() != Some(result.output.as_str())
    {
        return Err(format!("output: expected {out}, got {:?}", result.output));
    }
    if let Some(want) = expect.get("structured_output")
        && Some(want) != result.structured_output.as_ref()
    {
        return Err(format!("structured_output: expected {want}, got {:?}", result.structured_output));
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
    if let Some(want) = expect.get("tool_list_after").and_then(Value::as_array) {
        let got = serde_json::to_value(agent.list_tools()).unwrap();
        ambit_test_provider::subset(&Value::Array(want.clone()), &got, "tool_list_after")?;
    }
    if let Some(want) = expect.get("cost").and_then(Value::as_f64)
        && result.cost.is_none_or(|c| (c - want).abs() > 1e-12)
    {
        return Err(format!("cost: expected {want}, got {:?}", result.cost));
    }
    if let Some(want) = expect.get("stop_reason")
        && want.as_str() != Some(result.stop_reason.as_str())
    {
        return Err(format!("stop_reason: expected {want}, got {:?}", result.stop_reason));
    }
    if let Some(want) = expect.get("open_items") {
        let got: Vec<&str> = result.open_items.iter().map(|i| i.text.as_str()).collect();
        if want != &serde_json::to_value(&got).unwrap() {
            return Err(format!("open_items: expected {want}, got {got:?}"));
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
    Ok(())
}

/// Every scripted exchange was used, and none mismatched; `expect.abandoned`: the requests whose client
/// hung up before the answer (polled for a while: the hang-up may reach the provider after the run ends).
async fn check_provider(provider: &Provider, scenario: &Value) -> Result<(), String> {
    // `expect.absent_from_requests`: texts no request body holds (a run context never reaches the model).
    for text in scenario["expect"].get("absent_from_requests").and_then(Value::as_array).into_iter().flatten() {
        let text = text.as_str().ok_or("absent_from_requests holds strings")?;
        for (n, r) in provider.requests().iter().enumerate() {
            if r["body"].to_string().contains(text) {
                return Err(format!("request {} holds {text:?}, which must never reach the model", n + 1));
            }
        }
    }
    if let Some(want) = scenario["expect"].get("abandoned") {
        let want: Vec<usize> = serde_json::from_value(want.clone()).map_err(|e| format!("expect.abandoned: {e}"))?;
        let mut got = provider.abandoned();
        for _ in 0..1000 {
            if got.len() >= want.len() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            got = provider.abandoned();
        }
        if got != want {
            return Err(format!("abandoned requests: expected {want:?}, got {got:?}"));
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

/// `session`: the steps run through `ambit::session::Sessions`, on a fresh SQLite file and on the
/// PostgreSQL server scripts/test.sh starts (`AMBIT_TEST_POSTGRES_URL`; each run makes its own session).
async fn run_session_scenario(path: &Path, scenario: &Value) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let mut stores = vec![("sqlite", format!("sqlite://{}", dir.path().join("sessions.db").display()))];
    match std::env::var("AMBIT_TEST_POSTGRES_URL") {
        Ok(url) => stores.push(("postgres", url)),
        Err(_) => println!(
            "{}: not run on PostgreSQL: AMBIT_TEST_POSTGRES_URL is not set (scripts/test.sh sets it)",
            path.display()
        ),
    }
    for (store, url) in stores {
        run_session_on(path, scenario, &url).await.map_err(|e| format!("{store}: {e}"))?;
        println!("session scenario {} on {store}: ok", path.display());
    }
    Ok(())
}

async fn run_session_on(path: &Path, scenario: &Value, url: &str) -> Result<(), String> {
    use ambit::session::{SessionConfig, SessionError, Sessions};
    let ledger = LedgerAt::sqlite()?;
    let provider = ledger.provider(path, scenario).await?;
    let approvals = ScriptedApprovals::new(scenario);
    let session = &scenario["session"];
    let config: SessionConfig =
        serde_json::from_value(session.get("config").cloned().unwrap_or_else(|| serde_json::json!({})))
            .map_err(|e| format!("session.config: {e}"))?;
    let open = || {
        let config = config.clone();
        async move { Sessions::open(url).await.and_then(|s| s.with_config(config)).map_err(|e| e.to_string()) }
    };
    let mut sessions = open().await?;
    let mut agent = build_agent(scenario, provider.base_url(), &approvals, &ledger).await?;
    let sid = sessions.create().await.map_err(|e| e.to_string())?;
    let steps = session["steps"].as_array().ok_or("session.steps is missing")?;
    let mut last = None;
    let mut deliveries = sessions.deliveries();
    for (n, step) in steps.iter().enumerate() {
        let at = format!("step {}", n + 1);
        if step.get("release") == Some(&Value::Bool(true)) {
            // The held tools finish; their results land in the session after the run that started them.
            approvals.release.send_replace(true);
            check_task_step(&sessions, &mut deliveries, &sid, &step["expect"], &at).await?;
            continue;
        }
        let outcome = if let Some(input) = step["input"].as_str() {
            sessions.run(&agent, &sid, input).await
        } else if let Some(parts) = step["input"].as_array() {
            // A user message of parts (text, images, files), as a plain run's input of parts.
            let parts: Vec<ambit::content::Part> =
                serde_json::from_value(Value::Array(parts.clone())).map_err(|e| format!("{at}: input: {e}"))?;
            sessions.run(&agent, &sid, ambit::Input::parts(parts)).await
        } else if let Some(answer) = step.get("resume") {
            // As another process would: a new store handle, a new agent.
            sessions = open().await?;
            agent = build_agent(scenario, provider.base_url(), &approvals, &ledger).await?;
            let answer = serde_json::from_value(answer.clone()).map_err(|e| format!("{at}: resume: {e}"))?;
            sessions.resume(&agent, &sid, answer).await
        } else {
            return Err(format!("{at}: a step has input or resume"));
        };
        let want = &step["expect"];
        last = match outcome {
            Err(SessionError::AwaitingApproval { session_id, request }) => {
                let parked = want.get("parked").ok_or_else(|| format!("{at}: parked on {}", request.tool))?;
                if session_id != sid {
                    return Err(format!("{at}: parked session {session_id}, not {sid}"));
                }
                let pending = sessions.pending(&sid).await.map_err(|e| e.to_string())?;
                let pending = pending.ok_or_else(|| format!("{at}: parked, but nothing is pending"))?;
                if pending.tool != request.tool {
                    return Err(format!("{at}: pending {} but the error names {}", pending.tool, request.tool));
                }
                let state = sessions.store().state(&sid).await.map_err(|e| e.to_string())?.state;
                if state != "awaiting_approval" {
                    return Err(format!("{at}: the session is {state}"));
                }
                ambit_test_provider::subset(
                    parked,
                    &serde_json::to_value(&pending).unwrap(),
                    &format!("{at}: parked"),
                )?;
                None
            }
            Err(e) => {
                let err = want.get("error").ok_or_else(|| format!("{at} failed: {e}"))?;
                if e.code() != err["code"].as_str().unwrap_or_default() {
                    return Err(format!("{at}: expected error code {}, got {} ({e})", err["code"], e.code()));
                }
                if let Some(m) = err["message_contains"].as_str()
                    && !e.to_string().contains(m)
                {
                    return Err(format!("{at}: error message {e:?} does not contain {m:?}"));
                }
                None
            }
            Ok(result) => {
                if want.get("parked").is_some() || want.get("error").is_some() {
                    return Err(format!("{at}: expected {want}, got output {:?}", result.output));
                }
                if let Some(out) = want.get("output")
                    && out.as_str() != Some(result.output.as_str())
                {
                    return Err(format!("{at}: output: expected {out}, got {:?}", result.output));
                }
                check_task_step(&sessions, &mut deliveries, &sid, want, &at).await?;
                Some(result)
            }
        };
    }
    let result = last.ok_or("the last step did not finish a run")?;
    let expect = &scenario["expect"];
    check_result(expect, &result, &approvals, &agent)?;
    if let Some(want) = expect.get("session_log") {
        let entries = sessions.entries(&sid).await.map_err(|e| e.to_string())?;
        let got: Vec<&str> = entries.iter().map(|e| e.item.kind()).collect();
        if want != &serde_json::to_value(&got).unwrap() {
            return Err(format!("session_log: expected {want}, got {got:?}"));
        }
    }
    check_provider(&provider, scenario).await
}

/// A session step's `delivery` (the next one the store handle announces, within 60 s) and `task` (what
/// `task_result` reads for its `task_id`), each matched as a subset.
async fn check_task_step(
    sessions: &ambit::session::Sessions,
    deliveries: &mut ambit::session::Deliveries,
    sid: &str,
    want: &Value,
    at: &str,
) -> Result<(), String> {
    if let Some(d) = want.get("delivery") {
        let next = tokio::time::timeout(std::time::Duration::from_secs(60), deliveries.next()).await;
        let got = next.map_err(|_| format!("{at}: no delivery within 60 s"))?.ok_or("the deliveries ended")?;
        if got.session_id != sid {
            return Err(format!("{at}: a delivery for session {}, not {sid}", got.session_id));
        }
        ambit_test_provider::subset(d, &serde_json::to_value(&got).unwrap(), &format!("{at}: delivery"))?;
    }
    if let Some(t) = want.get("task") {
        let id = t["task_id"].as_str().ok_or(format!("{at}: task.task_id is missing"))?;
        let got = sessions.task_result(sid, id).await.map_err(|e| format!("{at}: task_result: {e}"))?;
        ambit_test_provider::subset(t, &serde_json::to_value(&got).unwrap(), &format!("{at}: task"))?;
    }
    Ok(())
}

/// Where scripts/mcp-servers.sh installed the MCP servers (it runs once per test binary; idempotent).
fn mcp_dir() -> Result<PathBuf, String> {
    static DIR: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/mcp-servers.sh");
        let out = std::process::Command::new("bash").arg(script).output().map_err(|e| e.to_string())?;
        if !out.status.success() {
            return Err(format!("mcp-servers.sh failed: {}", String::from_utf8_lossy(&out.stderr)));
        }
        Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
    })
    .clone()
}

/// The scenario's `mcp_servers` and `deferral`: each server's `server` names a real server, run here
/// over stdio (`everything`: @modelcontextprotocol/server-everything).
async fn scenario_tooling(scenario: &Value, run: &LedgerAt) -> Result<ambit::ToolingOptions, String> {
    let mut servers = Vec::new();
    let mut consents = Vec::new();
    for s in scenario["mcp_servers"].as_array().into_iter().flatten() {
        let mut s = s.clone();
        let kind = s.as_object_mut().and_then(|o| o.remove("server")).unwrap_or(Value::Null);
        let args = s.as_object_mut().and_then(|o| o.remove("server_args")).unwrap_or_else(|| serde_json::json!([]));
        let oauth = s.as_object_mut().and_then(|o| o.remove("oauth"));
        let transport = match kind.as_str() {
            // tests/mcp/oauth_server.py with the scenario's flags, one per run of the file.
            Some("oauth") => {
                let name = s["name"].as_str().ok_or("an oauth server needs a name")?;
                let args: Vec<String> = serde_json::from_value(args).map_err(|e| format!("server_args: {e}"))?;
                serde_json::json!({"type": "http", "url": run.oauth_server(name, &args).await?})
            }
            Some("everything") => {
                let js = mcp_dir()?.join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
                serde_json::json!({"type": "stdio", "command": "node", "args": [js, "stdio"]})
            }
            // tests/mcp/dynamic_server.py, which adds a tool at run time (in the MCP servers' venv).
            Some("dynamic") => {
                let python = mcp_dir()?.join("venv/bin/python");
                let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/mcp/dynamic_server.py");
                serde_json::json!({"type": "stdio", "command": python, "args": [script]})
            }
            // A server that cannot start: its command does not exist.
            Some("unavailable") => serde_json::json!({"type": "stdio", "command": "/nonexistent/ambit-mcp-server"}),
            other => return Err(format!("unknown MCP server {other:?} in the scenario")),
        };
        s["transport"] = transport;
        if let Some(o) = oauth {
            let (config, deny) = scenario_oauth(&o, &s, run)?;
            s["oauth"] = config;
            consents.push((servers.len(), deny));
        }
        servers.push(s);
    }
    let options = serde_json::json!({"mcp_servers": servers, "deferral": scenario.get("deferral")});
    let mut options = ambit::ToolingOptions::from_json(&options.to_string()).map_err(|e| e.to_string())?;
    for (i, deny) in consents {
        if let Some(oauth) = options.mcp_servers[i].oauth.as_mut() {
            oauth.on_authorize = Some(ambit::mcp::Hook(Arc::new(HeadlessConsent { deny })));
        }
    }
    Ok(options)
}

/// A server's `oauth` field as the core's settings: `grant`, `scopes`, `client_name`, `client_id` and
/// `client_secret` (a credential alias) as they are; `token_store`: `memory` (default) or `file` (a token
/// file in the run's directory, one per server, shared by every agent of the run); the redirect URI the
/// test server's own `/callback`. Returns them and whether the consent is `deny`.
fn scenario_oauth(o: &Value, server: &Value, run: &LedgerAt) -> Result<(Value, bool), String> {
    let mut config = serde_json::Map::new();
    for key in ["grant", "scopes", "client_name", "client_id", "client_secret"] {
        if let Some(v) = o.get(key) {
            config.insert(key.into(), v.clone());
        }
    }
    if o.get("grant").and_then(Value::as_str) != Some("client_credentials") {
        config.insert("redirect_uri".into(), "http://127.0.0.1:1/callback".into());
    }
    match o.get("token_store").and_then(Value::as_str) {
        None | Some("memory") => {}
        Some("file") => {
            let file = run.dir.path().join(format!("tokens-{}.json", server["name"].as_str().unwrap_or("mcp")));
            config.insert("token_file".into(), file.display().to_string().into());
        }
        Some(other) => return Err(format!("oauth.token_store must be memory or file, got {other:?}")),
    }
    let deny = match o.get("consent").and_then(Value::as_str) {
        None | Some("approve") => false,
        Some("deny") => true,
        Some(other) => return Err(format!("oauth.consent must be approve or deny, got {other:?}")),
    };
    Ok((Value::Object(config), deny))
}

/// The user's consent, headless: fetches the authorization URL with a plain HTTP client (the test server
/// approves at once, or denies when the URL carries `consent=deny`) and hands back the redirect's URL,
/// as a browser sent back to the redirect URI would.
struct HeadlessConsent {
    deny: bool,
}

#[async_trait]
impl ambit::mcp::Authorize for HeadlessConsent {
    async fn authorize(&self, url: String) -> Result<String, String> {
        let url = if self.deny { format!("{url}&consent=deny") } else { url };
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| e.to_string())?;
        let answer = http.get(&url).send().await.map_err(|e| e.to_string())?;
        answer
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
            .ok_or_else(|| format!("the authorization endpoint did not redirect: {}", answer.status()))
    }
}

/// `expect.events`: event types that must appear in this order (others may come between),
/// `expect.stop_reasons`: the stop reasons of the `model_response` events, `expect.from_text`: the tools
/// of the calls read from text, `expect.streamed_text`: all the text deltas, and the streamed text, which
/// must add up to the output.
fn check_events(
    expect: &Value,
    events: &[Event],
    end: Option<&Result<ambit::RunResult, ambit::Error>>,
) -> Result<(), String> {
    let types: Vec<String> =
        events.iter().map(|e| serde_json::to_value(e).unwrap()["type"].as_str().unwrap().to_string()).collect();
    if types.first().map(String::as_str) != Some("run_started") {
        return Err(format!("the first event is not run_started: {types:?}"));
    }
    if let Some(want) = expect.get("events").and_then(Value::as_array) {
        let mut at = 0;
        for w in want {
            let w = w.as_str().unwrap();
            match types[at..].iter().position(|t| t == w) {
                Some(i) => at += i + 1,
                None => return Err(format!("event {w} missing (in order) from {types:?}")),
            }
        }
    }
    // Event types the run must never send (a refused call never reports `tool_started`).
    for absent in expect.get("absent_events").and_then(Value::as_array).into_iter().flatten() {
        if types.iter().any(|t| Some(t.as_str()) == absent.as_str()) {
            return Err(format!("event {absent} was sent, and must not be: {types:?}"));
        }
    }
    if let Some(want) = expect.get("stop_reasons") {
        let got: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                Event::ModelResponse { stop_reason, .. } => Some(stop_reason.as_str()),
                _ => None,
            })
            .collect();
        if want != &serde_json::to_value(&got).unwrap() {
            return Err(format!("stop_reasons of the model_response events: expected {want}, got {got:?}"));
        }
    }
    if let Some(want) = expect.get("from_text") {
        let got: Vec<&str> = events
            .iter()
            .filter_map(|e| match e {
                Event::ToolCallRequested { name, from_text: true, .. } => Some(name.as_str()),
                _ => None,
            })
            .collect();
        if want != &serde_json::to_value(&got).unwrap() {
            return Err(format!("from_text: the calls read from text: expected {want}, got {got:?}"));
        }
    }
    if let Some(want) = expect.get("streamed_text").and_then(Value::as_str) {
        let got: String = events
            .iter()
            .filter_map(|e| match e {
                Event::TextDelta { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        if got != want {
            return Err(format!("streamed_text: expected {want:?}, got {got:?}"));
        }
    }
    if let Some(Ok(result)) = end {
        let text: String = events
            .iter()
            .filter_map(|e| match e {
                Event::TextDelta { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        if !text.ends_with(&result.output) {
            return Err(format!("the text deltas {text:?} do not end with the output {:?}", result.output));
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_file_passes() {
    let mut failures = Vec::new();
    let files = scenario_files();
    for f in &files {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        // A session scenario runs through the session API, which does not stream: once (on each store).
        let text = std::fs::read_to_string(f).unwrap_or_default();
        let session = serde_json::from_str::<Value>(&text).is_ok_and(|v| v.get("session").is_some());
        let modes: &[Mode] = if session { &[Mode::Run] } else { &[Mode::Run, Mode::Stream] };
        for &mode in modes {
            let how = match (session, mode) {
                (true, _) => "session",
                (false, Mode::Run) => "run",
                (false, Mode::Stream) => "stream",
            };
            match run_scenario(f, mode).await {
                Ok(()) => println!("scenario {name} ({how}): ok"),
                Err(e) => failures.push(format!("{name} ({how}): {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{} of {} scenarios failed:\n{}", failures.len(), files.len(), failures.join("\n"));
}

/// `test_model`: the users' test model on the scenario's wire, answering with the exchanges' `respond`
/// entries: scripted ([`TestModel`]), or by a function of the request ([`FunctionModel`]) answering
/// request n with the n-th.
fn scenario_test_model(scenario: &Value) -> Result<std::sync::Arc<dyn ambit::Model>, String> {
    use ambit::test_model::{Reply, TestRequest};
    use ambit::{FunctionModel, TestModel, Wire};
    let replies = scenario["exchanges"]
        .as_array()
        .ok_or("no exchanges")?
        .iter()
        .map(|e| Reply::from_value(e["respond"].clone()))
        .collect::<Result<Vec<_>, _>>()?;
    let wire: Wire = serde_json::from_value(scenario.get("wire").cloned().unwrap_or_else(|| "openai_chat".into()))
        .map_err(|e| e.to_string())?;
    let name = scenario["agent"]["model"].as_str().ok_or("no model name")?.to_string();
    let stream = scenario["stream"].as_bool().unwrap_or(false);
    let tools: Vec<String> = scenario["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(String::from))
        .collect();
    Ok(match scenario["test_model"].as_str() {
        Some("script") => std::sync::Arc::new(TestModel::new(replies).wire(wire).name(name).stream(stream)),
        Some("function") => {
            let expected = name.clone();
            let f = move |r: &TestRequest| {
                let offered: Vec<String> = r.tools.iter().map(|t| t.name.clone()).collect();
                if offered != tools || r.body["model"] != expected {
                    return Err(format!("unexpected request: tools {offered:?}, body model {}", r.body["model"]));
                }
                replies.get(r.index - 1).cloned().ok_or_else(|| format!("request {} past the exchanges", r.index))
            };
            std::sync::Arc::new(FunctionModel::new(f).wire(wire).name(name).stream(stream))
        }
        other => return Err(format!("test_model must be \"script\" or \"function\", got {other:?}")),
    })
}

/// A file with `test_model` runs again on the users' test model, without a provider: its replies are the
/// exchanges' answers, so the run must come out as it does against the loopback provider.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_test_model_files_pass_on_the_test_model() {
    let mut failures = Vec::new();
    let mut ran = 0;
    for f in scenario_files() {
        let scenario: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        if scenario.get("test_model").is_none() {
            continue;
        }
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        for mode in [Mode::Run, Mode::Stream] {
            let outcome: Result<(), String> = async {
                let approvals = ScriptedApprovals::new(&scenario);
                let agent =
                    build_agent_on(&scenario, scenario_test_model(&scenario)?, &approvals, &LedgerAt::sqlite()?)
                        .await?;
                let input = scenario["input"].as_str().ok_or("no input")?;
                let result = match mode {
                    Mode::Run => agent.run(input).await.map_err(|e| e.to_string())?,
                    Mode::Stream => {
                        let (mut events, mut end) = (Vec::new(), None);
                        let mut stream = agent.stream(input);
                        while let Some(item) = stream.next().await {
                            match item {
                                Ok(Event::RunFinished { result, .. }) => end = Some(Ok(result)),
                                Ok(e) => events.push(e),
                                Err(e) => end = Some(Err(e)),
                            }
                        }
                        check_events(&scenario["expect"], &events, end.as_ref())?;
                        end.ok_or("no end")?.map_err(|e| e.to_string())?
                    }
                };
                check_result(&scenario["expect"], &result, &approvals, &agent)
            }
            .await;
            ran += 1;
            if let Err(e) = outcome {
                failures.push(format!("{name} ({}): {e}", if mode == Mode::Run { "run" } else { "stream" }));
            }
        }
    }
    assert!(ran >= 6, "only {ran} runs on the test model");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The negative control of the runs on the test model: a file whose first answer lost one of its tool
/// calls, or whose usage is a token off, no longer passes its own expectations.
#[tokio::test]
async fn a_test_model_file_fails_when_its_answers_change() {
    let path =
        scenario_files().into_iter().find(|f| f.ends_with("test_model_chat.json")).expect("test_model_chat.json");
    let scenario: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let run = |scenario: Value| async move {
        let approvals = ScriptedApprovals::new(&scenario);
        let agent =
            build_agent_on(&scenario, scenario_test_model(&scenario)?, &approvals, &LedgerAt::sqlite()?).await?;
        let result = agent.run(scenario["input"].as_str().unwrap_or_default()).await.map_err(|e| e.to_string())?;
        check_result(&scenario["expect"], &result, &approvals, &agent)
    };
    run(scenario.clone()).await.expect("the file as written passes");
    let mut one_call = scenario.clone();
    one_call["exchanges"][0]["respond"]["tool_calls"].as_array_mut().unwrap().pop();
    assert!(run(one_call).await.is_err(), "a lost tool call went unnoticed");
    let mut usage = scenario;
    usage["exchanges"][1]["respond"]["usage"]["output_tokens"] = 10.into();
    assert!(run(usage).await.is_err(), "a changed usage count went unnoticed");
}

/// The scenario files whose ledger runs on the manual clock (`ledger.clock_ms`).
fn timeline_files() -> Vec<(PathBuf, Value)> {
    scenario_files()
        .into_iter()
        .filter_map(|f| {
            let v: Value = serde_json::from_str(&std::fs::read_to_string(&f).ok()?).ok()?;
            v.pointer("/ledger/clock_ms").is_some().then_some((f, v))
        })
        .collect()
}

/// The negative control of the ledger timelines: each file passes as written (`every_scenario_file_passes`),
/// and fails when any one of its `advance_clock` steps moves the clock a millisecond too little (a lease
/// still held, a cooldown not over, a report not yet stale).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_timeline_fails_when_the_clock_moves_a_millisecond_too_little() {
    let files = timeline_files();
    assert!(files.len() >= 3, "the ledger timeline scenarios: {files:?}");
    let dir = tempfile::tempdir().unwrap();
    let mut tried = 0;
    for (file, scenario) in files {
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        run_scenario(&file, Mode::Run).await.unwrap_or_else(|e| panic!("{name} as written: {e}"));
        let steps = scenario["steps"].as_array().unwrap();
        for (n, step) in steps.iter().enumerate() {
            let Some(ms) = step.get("advance_clock").and_then(Value::as_i64) else { continue };
            let mut short = scenario.clone();
            short["steps"][n]["advance_clock"] = Value::from(ms - 1);
            let path = dir.path().join(format!("{n}-{name}"));
            std::fs::write(&path, short.to_string()).unwrap();
            // On each store (a failure on SQLite must not hide a pass on PostgreSQL).
            for (store, at) in ledger_stores(&path, &short).unwrap() {
                let err = run_scenario_on(&path, &short, Mode::Run, &at).await.expect_err(&format!(
                    "{name} on {store}: step {} moved {} ms",
                    n + 1,
                    ms - 1
                ));
                println!("{name} on {store}, step {} a millisecond short: {err}", n + 1);
                tried += 1;
            }
        }
    }
    assert!(tried >= 8, "{tried} shortened steps");
}

#[tokio::test]
async fn an_output_type_a_wire_would_refuse_is_a_config_error() {
    use ambit::agent::output::OutputType;
    let build = |o: OutputType, tool: Option<&str>| {
        let mut b = Agent::builder().model(OpenAiChat::new("m")).output(o);
        if let Some(t) = tool {
            b = b.tool(object_tool(t));
        }
        b.build().map(|_| ()).unwrap_err().to_string()
    };
    let object = serde_json::json!({"type": "object"});
    assert!(build(OutputType::new("my answer", object.clone()), None).contains("'my answer'"));
    assert!(build(OutputType::new("T", serde_json::json!({"type": "string"})), None).contains("\"type\": \"object\""));
    assert!(build(OutputType::new("T", object), Some("final_answer")).contains("'final_answer'"));
}

fn object_tool(name: &str) -> ScenarioTool {
    ScenarioTool {
        spec: ToolSpec::new(name, "d", serde_json::json!({"type": "object"})),
        behavior: Value::Null,
        release: tokio::sync::watch::channel(false).1,
    }
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
        .tool(ScenarioTool {
            spec: ToolSpec::new("t", "d", serde_json::json!("string")),
            behavior: Value::Null,
            release: tokio::sync::watch::channel(false).1,
        })
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

/// The negative controls of the message-history files: run 2 given only its new message (no history)
/// no longer matches what the provider must see, and a tool answering with the run context's secret
/// field breaks `absent_from_requests`.
#[tokio::test]
async fn history_and_context_files_fail_when_the_history_or_the_context_leaks() {
    let dir = tempfile::tempdir().unwrap();
    let load = |name: &str| -> Value {
        let path = scenario_files().into_iter().find(|f| f.ends_with(name)).unwrap();
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    for wire in ["history_chat.json", "history_responses.json", "history_anthropic.json"] {
        let mut forgetful = load(wire);
        forgetful["steps"][1]["history"] = Value::Bool(false);
        let path = dir.path().join(wire);
        std::fs::write(&path, forgetful.to_string()).unwrap();
        let err = run_scenario(&path, Mode::Run).await.expect_err(wire);
        assert!(err.contains("request 3"), "{wire}: {err}");
    }
    let mut leaky = load("run_context.json");
    leaky["tools"][0]["behavior"]["returns"] = "user {context:user} {context:secret}".into();
    // Only `absent_from_requests` may catch it: the exchange and the result no longer look at the text.
    leaky["exchanges"][1]["expect"] = serde_json::json!({});
    leaky["expect"].as_object_mut().unwrap().remove("tool_calls");
    let path = dir.path().join("run_context.json");
    std::fs::write(&path, leaky.to_string()).unwrap();
    let err = run_scenario(&path, Mode::Run).await.expect_err("a leaked context");
    assert!(err.contains("must never reach the model"), "{err}");
}

/// The negative controls of the profile and named-agent files: a follow-up that went back to the
/// parent's model, a delegate that ran on the caller's model or without its own instructions, and a
/// report that claimed the callee's own (wider) level, each fail the file.
#[tokio::test]
async fn profile_and_named_agent_files_fail_when_the_model_or_the_reach_is_wrong() {
    let dir = tempfile::tempdir().unwrap();
    let load = |name: &str| -> Value {
        let path = scenario_files().into_iter().find(|f| f.ends_with(name)).unwrap();
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    let fails = |name: &str, v: Value| {
        let path = dir.path().join(name);
        std::fs::write(&path, v.to_string()).unwrap();
        async move { run_scenario(&path, Mode::Run).await }
    };
    fails("profile_spawn_followup.json", load("profile_spawn_followup.json")).await.expect("the file as written");
    let mut parents_model = load("profile_spawn_followup.json");
    parents_model["exchanges"][3]["expect"]["model"] = "gpt-4.1".into();
    let err = fails("a.json", parents_model).await.expect_err("a follow-up on the parent's model");
    assert!(err.contains("model"), "{err}");
    let mut callers_model = load("named_agent_delegate.json");
    callers_model["exchanges"][2]["expect"]["model"] = "gpt-4.1".into();
    fails("b.json", callers_model).await.expect_err("a delegate on the caller's model");
    let mut no_instructions = load("named_agent_delegate.json");
    no_instructions["exchanges"][2]["expect"]["messages_tail"][0]["content"] = "You are the caller.".into();
    fails("c.json", no_instructions).await.expect_err("a delegate without its own instructions");
    let mut wider = load("named_agent_delegate.json");
    let own = "Agent: researcher\nPermission: unrestricted\nWorking directory: /tmp\nAdditional readable directories: anywhere\n\nParis: sunny.";
    wider["exchanges"][4]["expect"]["messages_tail"][0]["content"] = own.into();
    fails("d.json", wider).await.expect_err("a delegate holding its own, wider level");
}

/// Bad profile and named-agent configuration is a typed error naming the field.
#[test]
fn bad_profiles_and_named_agents_are_refused_by_field() {
    let model = || Arc::new(OpenAiChat::new("m")) as Arc<dyn ambit::Model>;
    let err = Agent::builder().model(OpenAiChat::new("m")).profile("no spaces", model()).build().unwrap_err();
    assert_eq!(err.code(), "config");
    assert!(err.to_string().contains("profiles: 'no spaces'"), "{err}");
    let err = Agent::builder()
        .model(OpenAiChat::new("m"))
        .profile("fast", model())
        .profile("fast", model())
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("profiles.fast"), "{err}");
    let callee = Agent::builder().model(OpenAiChat::new("m")).build().unwrap();
    let err = Agent::builder()
        .model(OpenAiChat::new("m"))
        .named_agent("helper", ambit::NamedAgent::new(callee.clone(), "  "))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("named_agents.helper.description"), "{err}");
    // Without named agents there are no named-agent tools; with one, both.
    let plain = Agent::builder().model(OpenAiChat::new("m")).build().unwrap();
    assert!(plain.tools().get("agent_delegate").is_none() && plain.tools().get("agent_list_named").is_none());
    let with = Agent::builder()
        .model(OpenAiChat::new("m"))
        .named_agent("helper", ambit::NamedAgent::new(callee, "Helps."))
        .build()
        .unwrap();
    let delegate = with.tools().get("agent_delegate").expect("agent_delegate");
    assert_eq!(delegate.spec().parameters["properties"]["agent"]["enum"], serde_json::json!(["helper"]));
    assert!(with.tools().get("agent_list_named").is_some());
    // The profile parameter lists the configured names, and is absent without profiles.
    let spawner = Agent::builder()
        .model(OpenAiChat::new("m"))
        .subagents(Default::default())
        .profile("fast", model())
        .profile("deep", model())
        .build()
        .unwrap();
    let spawn = spawner.tools().get("agent_spawn").unwrap();
    assert_eq!(spawn.spec().parameters["properties"]["profile"]["enum"], serde_json::json!(["deep", "fast"]));
    let bare = Agent::builder().model(OpenAiChat::new("m")).subagents(Default::default()).build().unwrap();
    assert!(bare.tools().get("agent_spawn").unwrap().spec().parameters["properties"].get("profile").is_none());
}

const HOOK_FILES: [&str; 6] = [
    "hooks_edit.json",
    "hooks_arguments.json",
    "hooks_refuse.json",
    "hooks_raises.json",
    "guardrail_input.json",
    "guardrail_output.json",
];

/// The hook and guardrail files alone (every_scenario_file_passes runs them too), both ways.
#[tokio::test]
async fn hook_and_guardrail_files_pass() {
    let mut failures = Vec::new();
    for f in scenario_files().into_iter().filter(|f| HOOK_FILES.iter().any(|n| f.ends_with(n))) {
        for mode in [Mode::Run, Mode::Stream] {
            if let Err(e) = run_scenario(&f, mode).await {
                failures.push(format!("{} ({mode:?}): {e}", f.display()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Negative controls: each hook and guardrail file without its hooks and guardrails fails: the provider
/// sees the unedited bytes (or the run goes on where it had to stop).
#[tokio::test]
async fn hook_and_guardrail_files_fail_without_their_hooks() {
    let dir = tempfile::tempdir().unwrap();
    for name in HOOK_FILES {
        let path = scenario_files().into_iter().find(|f| f.ends_with(name)).unwrap();
        let mut bare: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        for key in ["hooks", "input_guardrails", "output_guardrails"] {
            bare.as_object_mut().unwrap().remove(key);
        }
        let path = dir.path().join(name);
        std::fs::write(&path, bare.to_string()).unwrap();
        let err = run_scenario(&path, Mode::Run).await.expect_err(name);
        println!("{name} without its hooks: {err}");
    }
    // The edit reached the provider: without the hooks it sees the original bytes.
    let path = dir.path().join("hooks_edit.json");
    let err = run_scenario(&path, Mode::Run).await.unwrap_err();
    assert!(err.contains("request 1") && err.contains("Answer in one line"), "{err}");
}

/// The venv python the telemetry receiver runs in (tests/otel/, `opentelemetry-proto`): `AMBIT_PY`, else
/// the cached venv scripts/llama-env.sh makes.
#[cfg(feature = "otel")]
fn otel_python() -> PathBuf {
    if let Ok(p) = std::env::var("AMBIT_PY") {
        return PathBuf::from(p);
    }
    let cache = std::env::var("AMBIT_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(std::env::var("HOME").unwrap_or_default()).join(".cache/ambit"));
    let python = cache.join("venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run scripts/llama-env.sh (it installs opentelemetry-proto)",
        python.display()
    );
    python
}

/// The receiver's checker (tests/otel/check.py, the same in every suite) on the latest run of `file`.
#[cfg(feature = "otel")]
fn otel_check(python: &Path, receiver: &str, file: &Path, content: bool) -> Result<(), String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = std::process::Command::new(python)
        .arg(root.join("tests/otel/check.py"))
        .arg(receiver)
        .arg(file)
        .args(["--content", if content { "on" } else { "off" }])
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
}

/// Files with `telemetry`: run with OTLP export on, to a real OTLP/HTTP receiver (tests/otel/receiver.py,
/// the official `opentelemetry-proto` decoding the exporter's protobuf), contents off and then on; the
/// shared checker asserts the span tree, the attributes, the token counts, contents only when asked and
/// never a credential value. Negative control: with contents on, the checker run as if they were off
/// fails (contents are there); and after `shutdown`, a run exports nothing.
#[cfg(feature = "otel")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn telemetry_files_export_their_span_tree() {
    use tokio::io::AsyncBufReadExt;
    let python = otel_python();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut receiver = tokio::process::Command::new(&python)
        .arg(root.join("tests/otel/receiver.py"))
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("the receiver starts");
    let mut lines = tokio::io::BufReader::new(receiver.stdout.take().unwrap()).lines();
    let url = lines.next_line().await.unwrap().expect("the receiver prints its URL");
    let mut config = ambit::telemetry::OtlpConfig::new(url.clone());
    config.service_name = "ambit-rust-scenarios".into();
    config.headers = vec![("x-ambit-suite".into(), "rust".into())];
    let telemetry = ambit::telemetry::init(config).expect("export turns on");
    let files: Vec<PathBuf> = scenario_files()
        .into_iter()
        .filter(|f| std::fs::read_to_string(f).unwrap_or_default().contains("\"telemetry\""))
        .collect();
    assert!(!files.is_empty(), "no scenario file has a telemetry section");
    for f in &files {
        for content in [false, true] {
            ambit::telemetry::set_record_content(content);
            run_scenario(f, Mode::Run).await.unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            telemetry.flush().expect("the spans are exported");
            otel_check(&python, &url, f, content)
                .unwrap_or_else(|e| panic!("{} (content {content}): {e}", f.display()));
        }
        // Negative control: the spans of the run with contents do hold contents.
        let e = otel_check(&python, &url, f, false).expect_err("contents were recorded, so `off` must fail");
        assert!(e.contains("record_content is off and span"), "{e}");
    }
    // Off again: a run makes no span, so the checker still finds the last run with contents.
    telemetry.shutdown().expect("export turns off");
    assert!(!ambit::telemetry::record_content());
    run_scenario(&files[0], Mode::Run).await.unwrap();
    otel_check(&python, &url, &files[0], true).expect("the run after shutdown exported nothing");
}
