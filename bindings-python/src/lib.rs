//! `ambit._native`: the Python binding. It translates: Python callables become core tools, core
//! futures become awaitables on the core's runtime, core errors become the exceptions defined in
//! `ambit.errors`. Every rule lives in the core.

mod awaitable;
mod ledger;
mod memory;
mod routine;
mod session;
mod telemetry;

use std::sync::Arc;

use ambit::test_model::{HostReplyFunction, ReplyFunction};
use ambit::{
    Agent, AgentOptions, ApprovalDecision, ApprovalHandler, ApprovalRequest, Error, PolicyConfig, Tool, ToolError,
    ToolSpec,
};
use async_trait::async_trait;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::Value;

/// Builds the exception `ambit.errors` defines for a core error, keeping its code and details.
fn core_err(e: Error) -> PyErr {
    Python::attach(|py| {
        let details = PyDict::new(py);
        let _ = details.set_item("code", e.code());
        if let Some(usage) = e.usage() {
            let _ = details.set_item("usage", serde_json::to_string(usage).unwrap_or_default());
        }
        match &e {
            Error::Model(ambit::ModelError::Http { status, .. }) => {
                let _ = details.set_item("status", *status);
            }
            Error::MaxTurns { max_turns, .. } => {
                let _ = details.set_item("max_turns", *max_turns);
            }
            Error::OutputTruncated { tools, .. } => {
                let _ = details.set_item("tools", tools.clone());
            }
            Error::OutputInvalid { attempt, retries, .. } => {
                let _ = details.set_item("attempt", attempt);
                let _ = details.set_item("retries", *retries);
            }
            Error::InvalidMessage { index, field, .. } => {
                let _ = details.set_item("index", *index);
                let _ = details.set_item("field", field);
            }
            Error::HookFailed { hook, point, .. } => {
                let _ = details.set_item("hook", hook);
                let _ = details.set_item("point", point);
            }
            Error::GuardrailTripped { guardrail, kind, verdict, .. } => {
                let _ = details.set_item("guardrail", guardrail);
                let _ = details.set_item("kind", kind);
                let _ = details.set_item("verdict", verdict.to_string());
            }
            Error::Budget { budget, limit, spent, cost, .. } => {
                let _ = details.set_item("budget", budget);
                let _ = details.set_item("limit", *limit);
                let _ = details.set_item("spent", *spent);
                let _ = details.set_item("cost", *cost);
            }
            _ => {}
        }
        python_err(py, "ambit.errors", e.code(), e.to_string(), details)
    })
}

/// The exception the Python module `module` makes (its `_from_core`) for a core error's code, message
/// and details: the module decides the class. A failure to make it is raised as itself.
pub(crate) fn python_err(
    py: Python<'_>,
    module: &str,
    code: &str,
    message: String,
    details: Bound<'_, PyDict>,
) -> PyErr {
    let made = py.import(module).and_then(|m| m.getattr("_from_core")).and_then(|f| f.call1((code, message, details)));
    match made {
        Ok(exc) => PyErr::from_value(exc),
        Err(err) => err,
    }
}

/// [`python_err`] for an error whose one detail is the argument it names (`field`).
pub(crate) fn field_err(module: &str, code: &str, message: String, field: Option<&str>) -> PyErr {
    Python::attach(|py| {
        let details = PyDict::new(py);
        if let Some(field) = field {
            let _ = details.set_item("field", field);
        }
        python_err(py, module, code, message, details)
    })
}

/// Runs the body of an exported function: a panic in it (the core's or this binding's) raises
/// `ambit.InternalError` (code `internal`) instead of crossing into Python. Every export goes through it;
/// the awaitables catch their tasks' panics themselves (`awaitable::into_awaitable`).
pub(crate) fn guard<T>(body: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(body))
        .unwrap_or_else(|p| Err(core_err(Error::from_panic(&*p))))
}

/// The text of a Python exception, for the model: its message, else its type's name.
fn exception_text(py: Python<'_>, err: &PyErr) -> String {
    let value = err.value(py);
    match value.str() {
        Ok(s) if !s.to_string().is_empty() => s.to_string(),
        _ => value.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "exception".into()),
    }
}

/// A run's context as the core carries it: the id under which the Python facade keeps the run's value
/// (`ambit._contexts`). The value itself never leaves Python.
struct RunContextId(u64);

/// A run's input: a JSON list of messages (`messages`), else the text.
fn run_input(input: String, messages: Option<String>) -> Result<ambit::Input, Error> {
    match messages {
        None => Ok(ambit::Input::Text(input)),
        Some(json) => {
            let value = serde_json::from_str(&json).map_err(|e| Error::Config(format!("messages: {e}")))?;
            ambit::Input::from_json(value)
        }
    }
}

pub(crate) fn run_context(context: u64) -> Option<ambit::RunContextValue> {
    (context != 0).then(|| ambit::RunContextValue::new(RunContextId(context)))
}

/// A Python callable as a core tool. The facade hands over `call(arguments_json) -> str` (or a
/// coroutine for async functions); the result text reaches the model as is.
struct PyTool {
    spec: ToolSpec,
    call: Py<PyAny>,
    is_async: bool,
}

#[async_trait]
impl Tool for PyTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        self.call_with(arguments, std::collections::BTreeMap::new(), None).await
    }

    /// The function's context gets its declared credentials, produced now by the core's broker, and
    /// the run's context (the id of the facade's value).
    async fn call_in(&self, arguments: Value, ctx: &ambit::ToolContext) -> Result<Value, ToolError> {
        let credentials = ctx.declared_credentials().await?;
        self.call_with(arguments, credentials, ctx.context::<RunContextId>().map(|c| c.0)).await
    }
}

impl PyTool {
    async fn call_with(
        &self,
        arguments: Value,
        credentials: std::collections::BTreeMap<String, String>,
        context: Option<u64>,
    ) -> Result<Value, ToolError> {
        // The background task this call runs in (if any), by a token the function's TaskContext uses;
        // the credentials ride with the arguments as `[arguments, credentials]`.
        let task = ambit::agent::background::HostTask::enter();
        // The run's context: the id under which the facade keeps the run's Python value (0: none).
        let context = context.unwrap_or(0);
        let arg = serde_json::json!([arguments, credentials, context]).to_string();
        call_python_raising(&self.call, arg, Some(task.token()), self.is_async)
            .await
            .map(ambit::content::from_host_text)
            .map_err(|r| ToolError::raised(r.message, r.trace))
    }
}

/// A Python credential callback (plain or async), run each time a tool needs its credential.
struct PyCredential {
    call: Py<PyAny>,
    is_async: bool,
}

#[async_trait]
impl ambit::CredentialSource for PyCredential {
    async fn fetch(&self, alias: &str) -> Result<String, String> {
        call_python(&self.call, alias.to_string(), None, self.is_async).await
    }
}

/// What the model sees of a failed Python call: the exception's text. `KeyboardInterrupt` and
/// `SystemExit` also go to the run's escape hatch, so the run stops and its awaitable raises them.
fn failure(py: Python<'_>, err: PyErr) -> Raised {
    let message = exception_text(py, &err);
    let trace = traceback_text(py, &err);
    if awaitable::ends_the_program(py, &err) {
        awaitable::escape(err);
    }
    Raised { message, trace }
}

/// A Python exception as the core takes it: its text for the model, its traceback for the log
/// (`ToolError::Raised`; the core redacts both and logs the traceback under `ambit.tools`).
struct Raised {
    message: String,
    trace: String,
}

/// The exception's traceback as `traceback.format_exception` writes it (empty when it cannot be made).
fn traceback_text(py: Python<'_>, err: &PyErr) -> String {
    let lines = py
        .import("traceback")
        .and_then(|m| m.getattr("format_exception")?.call1((err.value(py),)))
        .and_then(|l| l.extract::<Vec<String>>());
    lines.map(|l| l.concat()).unwrap_or_default()
}

/// Awaits a Python callable's result: the value itself, or the coroutine it returned (run on the event
/// loop that awaited the run, which the run's future carries as a task local).
async fn call_python(call: &Py<PyAny>, arg: String, token: Option<u64>, is_async: bool) -> Result<String, String> {
    call_python_raising(call, arg, token, is_async).await.map_err(|r| r.message)
}

/// [`call_python`], the failure with its traceback.
async fn call_python_raising(
    call: &Py<PyAny>,
    arg: String,
    token: Option<u64>,
    is_async: bool,
) -> Result<String, Raised> {
    if is_async {
        let fut = Python::attach(|py| {
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            let coro = match token {
                Some(t) => call.bind(py).call1((arg, t))?,
                None => call.bind(py).call1((arg,))?,
            };
            pyo3_async_runtimes::into_future_with_locals(&locals, coro)
        })
        .map_err(|e| Python::attach(|py| failure(py, e)))?;
        let out = fut.await;
        return Python::attach(|py| match out {
            Ok(v) => v.bind(py).extract::<String>().map_err(|e| failure(py, e)),
            Err(e) => Err(failure(py, e)),
        });
    }
    // A plain function runs on a daemon thread of Python's own (`ambit._aio.call_in_thread`), so it never
    // stalls the runtime's workers, and a call still running when the interpreter exits is ended by
    // Python like any daemon thread instead of coming back into a finalized interpreter.
    let (tx, rx) = tokio::sync::oneshot::channel();
    Python::attach(|py| {
        let answer = Answer { tx: std::sync::Mutex::new(Some(tx)) };
        py.import("ambit._aio")?.getattr("call_in_thread")?.call1((call.clone_ref(py), arg, token, answer))?;
        Ok(())
    })
    .map_err(|e: PyErr| Python::attach(|py| failure(py, e)))?;
    match rx.await {
        Ok(Ok(text)) => Ok(text),
        Ok(Err(e)) => Err(Python::attach(|py| failure(py, e))),
        Err(_) => {
            Err(Raised { message: "the tool's thread ended without an answer".to_string(), trace: String::new() })
        }
    }
}

/// Receives a plain function's outcome from its thread: `(True, text)` or `(False, exception)`.
#[pyclass(module = "ambit._native", frozen)]
struct Answer {
    tx: std::sync::Mutex<Option<tokio::sync::oneshot::Sender<PyResult<String>>>>,
}

#[pymethods]
impl Answer {
    fn __call__(&self, ok: bool, value: Bound<'_, PyAny>) -> PyResult<()> {
        guard(|| {
            let outcome = if ok { value.extract::<String>() } else { Err(PyErr::from_value(value)) };
            if let Some(tx) = self.tx.lock().unwrap_or_else(|p| p.into_inner()).take() {
                // The run may be gone (cancelled): nobody waits for the answer then.
                let _ = tx.send(outcome);
            }
            Ok(())
        })
    }
}

/// A server's OAuth consent step: `authorize(url) -> redirect`.
struct PyAuthorize(Py<PyAny>);

#[async_trait]
impl ambit::mcp::Authorize for PyAuthorize {
    async fn authorize(&self, url: String) -> Result<String, String> {
        call_python(&self.0, url, None, false).await
    }
}

/// A server's elicitation handler: `elicit(request_json) -> response_json`.
struct PyElicit(Py<PyAny>);

#[async_trait]
impl ambit::mcp::Elicit for PyElicit {
    async fn elicit(&self, request: ambit::mcp::ElicitationRequest) -> Result<ambit::mcp::ElicitationResponse, String> {
        let request = serde_json::to_string(&request).map_err(|e| e.to_string())?;
        let answer = call_python(&self.0, request, None, false).await?;
        serde_json::from_str(&answer).map_err(|e| format!("the elicitation handler's answer is not a response: {e}"))
    }
}

/// A host token store: `store(op_json) -> result_json`, op `{"op": "load"|"save"|"clear", "key", "value"}`.
struct PyTokenStore(Py<PyAny>);

impl PyTokenStore {
    async fn op(&self, op: Value) -> Result<Value, String> {
        let answer = call_python(&self.0, op.to_string(), None, false).await?;
        serde_json::from_str(&answer).map_err(|e| format!("the token store's answer is not JSON: {e}"))
    }
}

#[async_trait]
impl ambit::mcp::TokenStore for PyTokenStore {
    async fn load(&self, key: &str) -> Result<Option<String>, String> {
        match self.op(serde_json::json!({"op": "load", "key": key})).await? {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(s)),
            other => Err(format!("the token store's load answered {other}, not a string or None")),
        }
    }
    async fn save(&self, key: &str, value: &str) -> Result<(), String> {
        self.op(serde_json::json!({"op": "save", "key": key, "value": value})).await.map(|_| ())
    }
    async fn clear(&self, key: &str) -> Result<(), String> {
        self.op(serde_json::json!({"op": "clear", "key": key})).await.map(|_| ())
    }
}

/// Attaches the host callbacks of the MCP servers, `(server, kind, callable)`, kind `authorize`,
/// `elicit` or `token_store`.
fn attach_mcp_hooks(options: &mut AgentOptions, hooks: Vec<(String, String, Py<PyAny>)>) -> Result<(), Error> {
    for (server, kind, call) in hooks {
        let callback = match kind.as_str() {
            "authorize" => ambit::McpCallback::Authorize(Arc::new(PyAuthorize(call))),
            "token_store" => ambit::McpCallback::TokenStore(Arc::new(PyTokenStore(call))),
            "elicit" => ambit::McpCallback::Elicit(Arc::new(PyElicit(call))),
            other => return Err(Error::Config(format!("unknown MCP callback kind '{other}'"))),
        };
        options.attach_mcp_callback(&server, &kind, callback)?;
    }
    Ok(())
}

/// A Python approval handler. The facade hands over `decide(request_json) -> decision_json` (or a
/// coroutine); an exception is the core's denial.
struct PyApproval {
    call: Py<PyAny>,
    is_async: bool,
}

#[async_trait]
impl ApprovalHandler for PyApproval {
    async fn decide(&self, request: &ApprovalRequest) -> Result<ApprovalDecision, String> {
        let request = serde_json::to_string(request).map_err(|e| e.to_string())?;
        let answer = call_python(&self.call, request, None, self.is_async).await?;
        serde_json::from_str(&answer).map_err(|e| format!("the approval handler's answer is not a decision: {e}"))
    }
}

/// A host function and whether it is async, as the facade hands one over.
type HostFunction = (Py<PyAny>, bool);

/// The native agent; `ambit.Agent` wraps it.
#[pyclass(name = "NativeAgent", module = "ambit._native", frozen)]
pub(crate) struct NativeAgent {
    pub(crate) agent: Agent,
}

#[pymethods]
impl NativeAgent {
    /// `tools` holds `(spec_json, call, is_async)` tuples; `policy` is a PolicyConfig as JSON;
    /// `approvals` is `(decide, is_async)`; `builtins` names built-in tools; `ledger_tools` are the
    /// work ledger's tools bound to a routine's run.
    #[new]
    /// `model_function` is a test model's function, `(call, is_async)`, called as a tool is
    /// (`ambit::test_model::HostReplyFunction`).
    /// `profiles` holds `(name, model_json, model_function)` (each a model as `model` is);
    /// `named_agents` holds `(name, description, agent)`.
    /// `hooks` holds `(name, point, call, is_async)` and `guardrails` `(name, kind, call, is_async)`
    /// (`kind`: `input` or `output`), each called as a tool is (`[payload, {}, context]`), answering the
    /// core's JSON (ambit::agent::hooks).
    #[pyo3(signature = (model, tools, instructions=None, max_turns=None, options=None, policy=None, approvals=None, builtins=Vec::new(), ledger_tools=None, model_function=None, credential_callbacks=Vec::new(), mcp_hooks=Vec::new(), profiles=Vec::new(), named_agents=Vec::new(), hooks=Vec::new(), guardrails=Vec::new()))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        model: String,
        tools: Vec<(String, Py<PyAny>, bool)>,
        instructions: Option<String>,
        max_turns: Option<u32>,
        options: Option<String>,
        policy: Option<String>,
        approvals: Option<(Py<PyAny>, bool)>,
        builtins: Vec<String>,
        ledger_tools: Option<PyRef<'_, ledger::NativeLedgerTools>>,
        model_function: Option<(Py<PyAny>, bool)>,
        credential_callbacks: Vec<(String, Py<PyAny>, bool)>,
        mcp_hooks: Vec<(String, String, Py<PyAny>)>,
        profiles: Vec<(String, String, Option<HostFunction>)>,
        named_agents: Vec<(String, String, PyRef<'_, NativeAgent>)>,
        hooks: Vec<(String, String, Py<PyAny>, bool)>,
        guardrails: Vec<(String, String, Py<PyAny>, bool)>,
    ) -> PyResult<Self> {
        guard(|| {
            // `model` is a ModelConfig as JSON (the wire, the model's name, where, and how), or a test
            // model's (`ambit::test_model::build_model`).
            let function = |f: Option<HostFunction>| {
                f.map(|(call, is_async)| {
                    let spec = ToolSpec::new("test_model_function", "A test model's function.", serde_json::json!({}));
                    Arc::new(HostReplyFunction(Arc::new(PyTool { spec, call, is_async }))) as Arc<dyn ReplyFunction>
                })
            };
            let m = ambit::test_model::build_model(&model, function(model_function)).map_err(core_err)?;
            let mut b = Agent::builder().model_arc(m);
            for (name, model, f) in profiles {
                b = b.profile(name, ambit::test_model::build_model(&model, function(f)).map_err(core_err)?);
            }
            for (name, description, agent) in named_agents {
                b = b.named_agent(name, ambit::NamedAgent::new(agent.agent.clone(), description));
            }
            if let Some(o) = options {
                let mut options = AgentOptions::from_json(&o).map_err(core_err)?;
                attach_mcp_hooks(&mut options, mcp_hooks).map_err(core_err)?;
                b = b.options(options);
            } else if let Some((server, ..)) = mcp_hooks.first() {
                return Err(core_err(Error::Config(format!("no MCP server named '{server}'"))));
            }
            if let Some(i) = instructions {
                b = b.instructions(i);
            }
            let function = |name: &str, call, is_async| {
                let spec = ToolSpec::new(name, "A hook.", serde_json::json!({}));
                Arc::new(PyTool { spec, call, is_async }) as Arc<dyn Tool>
            };
            for (name, point, call, is_async) in hooks {
                let point = ambit::HookPoint::parse(&point).map_err(core_err)?;
                let function = function(&name, call, is_async);
                b = b.hook(Arc::new(ambit::agent::hooks::HostHook { name, point, function }));
            }
            for (name, kind, call, is_async) in guardrails {
                let function = function(&name, call, is_async);
                let g = Arc::new(ambit::agent::hooks::HostGuardrail { name, function });
                b = match kind.as_str() {
                    "input" => b.input_guardrail(g),
                    "output" => b.output_guardrail(g),
                    other => {
                        return Err(core_err(Error::Config(format!("a guardrail is input or output, not '{other}'"))));
                    }
                };
            }
            for (alias, call, is_async) in credential_callbacks {
                b = b.credential_callback(alias, Arc::new(PyCredential { call, is_async }));
            }
            if let Some(n) = max_turns {
                b = b.max_turns(n);
            }
            for (spec, call, is_async) in tools {
                let spec: ToolSpec = serde_json::from_str(&spec)
                    .map_err(|e| core_err(Error::Config(format!("a tool's declaration is not valid: {e}"))))?;
                b = b.tool(PyTool { spec, call, is_async });
            }
            for name in builtins {
                let tool = ambit::tools::builtin::by_name(&name).ok_or_else(|| {
                    core_err(Error::Config(format!(
                        "there is no built-in tool named '{name}' (built-ins: {})",
                        ambit::tools::builtin::NAMES.join(", ")
                    )))
                })?;
                b = b.tool_arc(tool);
            }
            for tool in ledger_tools.iter().flat_map(|l| l.tools.iter()) {
                b = b.tool_arc(tool.clone());
            }
            let handler =
                approvals.map(|(call, is_async)| Arc::new(PyApproval { call, is_async }) as Arc<dyn ApprovalHandler>);
            if policy.is_some() || handler.is_some() {
                let config = match policy {
                    Some(p) => PolicyConfig::from_json(&p).map_err(core_err)?,
                    None => PolicyConfig::default(),
                };
                b = b.policy(config.into_policy(handler).map_err(core_err)?);
            }
            let agent = b.build().map_err(core_err)?;
            Ok(NativeAgent { agent })
        })
    }

    /// The same agent under another policy (a PolicyConfig as JSON, with `approvals` as in `new`),
    /// keeping its sub-agents: a follow-up is re-admitted against this policy's reach.
    #[pyo3(signature = (policy, approvals=None))]
    fn with_policy(&self, policy: String, approvals: Option<(Py<PyAny>, bool)>) -> PyResult<NativeAgent> {
        guard(|| {
            let handler =
                approvals.map(|(call, is_async)| Arc::new(PyApproval { call, is_async }) as Arc<dyn ApprovalHandler>);
            let policy = PolicyConfig::from_json(&policy).and_then(|c| c.into_policy(handler)).map_err(core_err)?;
            let agent = self.agent.with_policy(policy).map_err(core_err)?;
            Ok(NativeAgent { agent })
        })
    }

    /// Runs the agent on `input`, or on `messages` (a JSON list in the core's message form) when given,
    /// with the run context `context` (an id of the facade's; 0: none); returns an awaitable of the
    /// result as JSON text.
    #[pyo3(signature = (input, messages=None, context=0))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        input: String,
        messages: Option<String>,
        context: u64,
    ) -> PyResult<Bound<'py, PyAny>> {
        guard(|| {
            let task_locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            let agent = self.agent.clone();
            awaitable::into_awaitable(py, task_locals, async move {
                let input = run_input(input, messages).map_err(core_err)?;
                let run = match run_context(context) {
                    Some(c) => agent.run_with_context(input, c).await,
                    None => agent.run(input).await,
                };
                let result = run.map_err(core_err)?;
                serde_json::to_string(&result).map_err(|e| core_err(Error::Config(e.to_string())))
            })
        })
    }

    /// Runs the agent as a stream of events (`messages` and `context` as in `run`).
    #[pyo3(signature = (input, messages=None, context=0))]
    fn stream(
        &self,
        py: Python<'_>,
        input: String,
        messages: Option<String>,
        context: u64,
    ) -> PyResult<NativeRunStream> {
        guard(|| {
            let input = run_input(input, messages).map_err(core_err)?;
            let stream = match run_context(context) {
                Some(c) => self.agent.stream_with_context(input, c),
                None => self.agent.stream(input),
            };
            // Async tools run on the event loop that started the stream: the run carries it as a task
            // local, and the stream's escape hatch beside it.
            let task_locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            let hatch = Arc::new(awaitable::Escape::default());
            let scoped = hatch.clone();
            let feed = ambit::EventFeed::start(stream, move |run| {
                ambit::runtime::runtime().spawn(pyo3_async_runtimes::tokio::scope(task_locals, scoped.scope(run)))
            });
            Ok(NativeRunStream { feed: Arc::new(feed), hatch })
        })
    }

    /// Every tool with its effective level and status, as JSON.
    fn list_tools(&self) -> PyResult<String> {
        guard(|| serde_json::to_string(&self.agent.list_tools()).map_err(|e| core_err(Error::Config(e.to_string()))))
    }

    /// Connects the MCP servers not yet connected and re-lists those that changed; an awaitable.
    fn refresh_tools<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        guard(|| {
            let task_locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            let agent = self.agent.clone();
            awaitable::into_awaitable(py, task_locals, async move {
                agent.refresh_tools().await;
                Ok(true)
            })
        })
    }

    /// The names of the registered tools, in order.
    fn tool_names(&self) -> PyResult<Vec<String>> {
        guard(|| Ok(self.agent.tools().specs().into_iter().map(|s| s.name).collect()))
    }
}

/// The events of one run; `ambit.Agent.stream` iterates it.
#[pyclass(name = "NativeRunStream", module = "ambit._native", frozen)]
struct NativeRunStream {
    feed: Arc<ambit::EventFeed>,
    /// Where the run's `KeyboardInterrupt` or `SystemExit` waits for `next` to raise it.
    hatch: Arc<awaitable::Escape>,
}

#[pymethods]
impl NativeRunStream {
    /// An awaitable of the next event as JSON, `None` at the end; raises the run's error (or the
    /// `KeyboardInterrupt`/`SystemExit` a tool raised, which also stops the run).
    fn next<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        guard(|| {
            let (feed, hatch) = (self.feed.clone(), self.hatch.clone());
            let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
            awaitable::into_awaitable(py, locals, async move {
                let item = tokio::select! {
                    biased;
                    err = hatch.raised() => {
                        feed.cancel();
                        return Err(err);
                    }
                    item = feed.next() => item,
                };
                match item {
                    Some(Ok(event)) => {
                        serde_json::to_string(&event).map(Some).map_err(|e| core_err(Error::Config(e.to_string())))
                    }
                    Some(Err(e)) => Err(core_err(e)),
                    None => Ok(None),
                }
            })
        })
    }

    /// Stops the run: its HTTP request and its tools are dropped.
    fn cancel(&self) -> PyResult<()> {
        guard(|| {
            self.feed.cancel();
            Ok(())
        })
    }
}

/// Reports progress for the background task of a tool call (its TaskContext's token). False outside one.
#[pyfunction]
fn task_progress(token: u64, note: &str) -> PyResult<bool> {
    guard(|| Ok(ambit::agent::background::host_task_progress(token, note)))
}

/// Whether the background task of a tool call was asked to stop.
#[pyfunction]
fn task_cancelled(token: u64) -> PyResult<bool> {
    guard(|| Ok(ambit::agent::background::host_task_cancelled(token)))
}

/// The tag a tool's typed content return (an `Image`, a list of parts) starts with: the facade puts it
/// before the content value's JSON, so a plain string a tool returns can never pass for content.
#[pyfunction]
fn host_content_tag() -> &'static str {
    ambit::content::host_content_tag()
}

/// The name a model sees for the tool `name` on a wire that takes names of at most `max_bytes` bytes
/// (64 on Chat Completions, 128 on Anthropic and Responses): the name itself when the wire takes it,
/// else its head, `_` and 12 hex digits of its SHA-256 (SPEC §3).
#[pyfunction]
#[pyo3(signature = (name, max_bytes=ambit::tools::wire_name::CHAT_COMPLETIONS_LIMIT))]
fn wire_name(name: &str, max_bytes: usize) -> PyResult<String> {
    guard(|| Ok(ambit::tools::wire_name::wire_name(name, max_bytes)))
}

/// Test hook: panics inside the core, in a synchronous export (`ambit.InternalError` comes out).
#[pyfunction]
fn _testing_force_panic() -> PyResult<()> {
    guard(|| ambit::testing::force_panic())
}

/// Test hook: a tool whose call panics inside the run's task, as tools to pass where `NativeAgent`
/// takes `ledger_tools`.
#[pyfunction]
fn _testing_panicking_tools() -> PyResult<ledger::NativeLedgerTools> {
    guard(|| Ok(ledger::NativeLedgerTools { tools: vec![ambit::testing::panicking_tool()] }))
}

/// Test hook: a clock the test moves by hand (`ambit::testing`), for `_testing_open_ledger` and
/// `_testing_open_sessions`; times are milliseconds since the Unix epoch. A bad time raises
/// `ambit.ledger.InvalidLedgerArgument`.
#[pyclass(name = "_TestingClock", module = "ambit._native", frozen)]
struct TestingClock {
    clock: ambit::testing::ManualClock,
}

#[pymethods]
impl TestingClock {
    #[new]
    fn new(start_ms: i64) -> PyResult<Self> {
        guard(|| Ok(TestingClock { clock: ambit::testing::manual_clock(start_ms).map_err(ledger::ledger_err)? }))
    }

    /// The clock's time.
    fn now_ms(&self) -> PyResult<i64> {
        guard(|| Ok(ambit::ledger::Clock::now_ms(&self.clock)))
    }

    /// Moves the clock forward by `ms` (never back); the new time.
    fn advance(&self, ms: i64) -> PyResult<i64> {
        guard(|| ambit::testing::advance_clock(&self.clock, ms).map_err(ledger::ledger_err))
    }
}

/// Test hook: opens the ledger at `url` on `clock` (awaitable `NativeLedger`, for `ambit.Ledger(...)`).
#[pyfunction]
fn _testing_open_ledger<'py>(py: Python<'py>, url: String, clock: &TestingClock) -> PyResult<Bound<'py, PyAny>> {
    guard(|| {
        let clock = clock.clock.clone();
        let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
        awaitable::into_awaitable(py, locals, async move {
            let ledger = ambit::testing::open_ledger(&url, &clock).await.map_err(ledger::ledger_err)?;
            Ok(ledger::NativeLedger { ledger })
        })
    })
}

/// Test hook: opens the session store at `url` on `clock`, `config` a SessionConfig as JSON (awaitable
/// `NativeSessions`, for `ambit.Sessions(...)`).
#[pyfunction]
fn _testing_open_sessions<'py>(
    py: Python<'py>,
    url: String,
    config: String,
    clock: &TestingClock,
) -> PyResult<Bound<'py, PyAny>> {
    guard(|| {
        let config = ambit::session::SessionConfig::from_json(&config).map_err(session::session_err)?;
        let clock = clock.clock.clone();
        let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
        awaitable::into_awaitable(py, locals, async move {
            let sessions = ambit::testing::open_sessions(&url, &clock)
                .await
                .and_then(|s| s.with_config(config))
                .map_err(session::session_err)?;
            Ok(session::NativeSessions { sessions })
        })
    })
}

/// Test hook: opens the routine store at `url` on `clock` (awaitable `NativeRoutines`, for
/// `ambit.Routines(...)`).
#[pyfunction]
fn _testing_open_routines<'py>(py: Python<'py>, url: String, clock: &TestingClock) -> PyResult<Bound<'py, PyAny>> {
    guard(|| {
        let clock = clock.clock.clone();
        let locals = pyo3_async_runtimes::tokio::get_current_locals(py)?;
        awaitable::into_awaitable(py, locals, async move {
            let routines = ambit::testing::open_routines(&url, &clock).await.map_err(routine::routine_err)?;
            Ok(routine::NativeRoutines { routines })
        })
    })
}

/// Publishes a text document into a knowledge directory (`ambit.Knowledge.publish`); the result as JSON.
/// A refusal is raised as the exception `ambit.knowledge` defines for its code, naming the argument.
#[pyfunction]
fn knowledge_publish(py: Python<'_>, dir: String, name: String, content: String, overwrite: bool) -> PyResult<String> {
    guard(|| {
        let published = py.detach(|| ambit::knowledge::publish(&dir, &name, &content, overwrite));
        match published {
            Ok(p) => serde_json::to_string(&p).map_err(|e| core_err(Error::Config(e.to_string()))),
            Err(e) => Err(field_err("ambit.knowledge", e.code(), e.to_string(), e.field())),
        }
    })
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let _ = pyo3_async_runtimes::tokio::init_with_runtime(ambit::runtime::runtime());
    m.add_class::<NativeAgent>()?;
    m.add_function(wrap_pyfunction!(task_progress, m)?)?;
    m.add_function(wrap_pyfunction!(task_cancelled, m)?)?;
    m.add_function(wrap_pyfunction!(wire_name, m)?)?;
    m.add_function(wrap_pyfunction!(host_content_tag, m)?)?;
    m.add_function(wrap_pyfunction!(awaitable::_drain, m)?)?;
    m.add_function(wrap_pyfunction!(_testing_force_panic, m)?)?;
    m.add_function(wrap_pyfunction!(_testing_panicking_tools, m)?)?;
    m.add_function(wrap_pyfunction!(_testing_open_ledger, m)?)?;
    m.add_function(wrap_pyfunction!(_testing_open_sessions, m)?)?;
    m.add_function(wrap_pyfunction!(_testing_open_routines, m)?)?;
    m.add_class::<TestingClock>()?;
    m.add_class::<NativeRunStream>()?;
    m.add_class::<ledger::NativeLedger>()?;
    m.add_class::<ledger::NativeLedgerTools>()?;
    m.add_class::<session::NativeSessions>()?;
    m.add_class::<session::NativeDeliveries>()?;
    m.add_class::<memory::NativeMemory>()?;
    m.add_function(wrap_pyfunction!(knowledge_publish, m)?)?;
    m.add_class::<routine::NativeRoutines>()?;
    m.add_class::<routine::NativeRunner>()?;
    m.add_function(wrap_pyfunction!(telemetry::telemetry_enable, m)?)?;
    m.add_function(wrap_pyfunction!(telemetry::telemetry_flush, m)?)?;
    m.add_function(wrap_pyfunction!(telemetry::telemetry_disable, m)?)?;
    m.add_function(wrap_pyfunction!(telemetry::telemetry_reset_logging, m)?)?;
    telemetry::install_logging();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
