//! The Node binding of ambit (napi-rs 3). It only translates: JS values to core types, JS tool
//! functions to [`ambit::Tool`], and core results and errors to JSON envelopes the JS facade
//! (`index.js`) turns into objects and typed errors. Every rule lives in the core.

use std::sync::Arc;

use ambit::test_model::{HostReplyFunction, ReplyFunction};
use ambit::{Agent, AgentOptions, Error, ModelError, RunResult, Tool, ToolError, ToolSpec};
use async_trait::async_trait;
use futures::FutureExt;
use napi::Status;
use napi::bindgen_prelude::{Either, Promise};
use napi::threadsafe_function::ThreadsafeFunction;
use napi_derive::napi;
use serde_json::{Value, json};

mod envelope;
pub mod ledger;
pub mod logging;
mod mcp;
pub mod memory;
mod policy;
pub mod routine;
pub mod session;

/// A JS tool function as Rust calls it: one JSON string argument (the arguments object), a Promise of
/// a JSON string back. Not callee-handled (called with the value itself), weak (a tool does not keep
/// the process alive; a pending run does).
/// A host tool: called with the request's JSON text, it answers the envelope's JSON text at once (a
/// synchronous `run`) or a promise of it (an async one), saving a second trip to the JS thread.
pub(crate) type JsToolFn = ThreadsafeFunction<String, Either<String, Promise<String>>, String, Status, false, true>;

/// The model: the JSON text of the core's `ModelConfig` (wire, model, base_url, api_key, stream, …), or
/// of a test model (`{"test_model": {...}}`, `ambit::test_model::build_model`).
#[napi(object, object_to_js = false)]
pub struct NativeModelConfig {
    pub config: String,
    /// A test model's function, called as a tool is: with `{"arguments": request}`, answering the
    /// envelope of a reply's JSON.
    #[napi(ts_type = "(requestJson: string) => Promise<string>")]
    pub function: Option<JsToolFn>,
}

/// The agent settings.
#[napi(object, object_to_js = false)]
pub struct NativeAgentConfig {
    pub model: Option<NativeModelConfig>,
    pub instructions: Option<String>,
    pub max_turns: Option<u32>,
    /// The loop's settings: the JSON text of the core's `AgentOptions` (max_concurrency, budget, prices).
    pub options: Option<String>,
    /// The permission policy: the JSON text of the core's `PolicyConfig` (snake_case).
    pub policy: Option<String>,
    /// The approval handler (see `policy::JsApprovalFn`).
    #[napi(ts_type = "(requestJson: string) => Promise<string>")]
    pub approvals: Option<policy::JsApprovalFn>,
    /// Built-in tools to register, by name.
    pub builtins: Option<Vec<String>>,
    /// The aliases of the `callback` credentials (in `options.credentials`), all answered by
    /// `credential_callback`.
    pub credential_callbacks: Option<Vec<String>>,
    /// Produces a callback credential's value: receives the alias, resolves to the JSON text of
    /// `{"ok": true, "value": text}` or `{"ok": false, "message"}`.
    #[napi(ts_type = "(alias: string) => Promise<string>")]
    pub credential_callback: Option<policy::JsApprovalFn>,
    /// The MCP servers' host callbacks as `[server, kind]` pairs (kind `authorize`, `elicit` or
    /// `token_store`), all answered by `mcp_hook`.
    pub mcp_hooks: Option<Vec<Vec<String>>>,
    /// Receives the JSON text of `{"server", "kind", "arg"}`, resolves to the JSON text of
    /// `{"ok": true, "value": text}` or `{"ok": false, "message"}`.
    #[napi(ts_type = "(requestJson: string) => Promise<string>")]
    pub mcp_hook: Option<policy::JsApprovalFn>,
    /// The profiles `agent_spawn` may name: each a model as `model` is.
    pub profiles: Option<Vec<NativeProfileConfig>>,
    /// The named agents, each by the handle `NativeAgent.lendForNaming` gave.
    pub named_agents: Option<Vec<NativeNamedAgentConfig>>,
    /// Hooks (`point`: `before_tool_call`, …) and guardrails (`point`: `input` or `output`), each called
    /// as a tool is, answering the core's JSON (ambit::agent::hooks) as the envelope's value.
    pub hooks: Option<Vec<NativeHookConfig>>,
    pub guardrails: Option<Vec<NativeHookConfig>>,
}

/// One hook or guardrail: its name, its point (a guardrail's: `input` or `output`), its function.
#[napi(object, object_to_js = false)]
pub struct NativeHookConfig {
    pub name: String,
    pub point: String,
    #[napi(ts_type = "(requestJson: string) => Promise<string>")]
    pub call: JsToolFn,
}

/// A profile: its name and its model.
#[napi(object, object_to_js = false)]
pub struct NativeProfileConfig {
    pub name: String,
    pub model: NativeModelConfig,
}

/// A named agent: its name, its description and the handle of the built agent.
#[napi(object, object_to_js = false)]
pub struct NativeNamedAgentConfig {
    pub name: String,
    pub description: String,
    pub handle: u32,
}

/// Agents lent for naming (`NativeAgent.lendForNaming`), taken back by the next `create_agent` that
/// names them.
static LENT: std::sync::Mutex<std::collections::BTreeMap<u32, Agent>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());
static LENT_IDS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// One host tool. `parameters` is the JSON text of the schema. `call` receives the JSON text of the
/// arguments and resolves to the JSON text of `{"ok": true, "value": ...}` or
/// `{"ok": false, "message": "..."}`.
#[napi(object, object_to_js = false)]
pub struct NativeToolConfig {
    pub name: String,
    pub description: String,
    pub parameters: String,
    #[napi(ts_type = "(requestJson: string) => Promise<string>")]
    pub call: JsToolFn,
    /// The lowest level the tool may run at (`none`, `read`, `workspace`, `unrestricted`).
    pub level: Option<String>,
    pub requires_approval: Option<bool>,
    pub allow_blank: Option<Vec<String>>,
    /// Running a call twice has the effect of running it once (SPEC §8b).
    pub idempotent: Option<bool>,
    /// The credential aliases the tool reads from its context.
    pub credentials: Option<Vec<String>>,
}

/// A core error as data: the facade throws the matching error class.
#[napi(object)]
pub struct NativeError {
    pub code: String,
    pub message: String,
    /// The HTTP status, for `model_http`.
    pub status: Option<u32>,
    /// The JSON text of the error's details: `usage` (turn limit, budget, cut call, invalid output),
    /// `budget`, `limit`, `spent`, `cost` (budget), `tools` (cut call), `attempt` and `retries` (invalid
    /// output).
    pub details: Option<String>,
}

impl NativeError {
    fn from_core(e: &Error) -> Self {
        let status = match e {
            Error::Model(ModelError::Http { status, .. }) => Some(u32::from(*status)),
            _ => None,
        };
        let mut details = serde_json::Map::new();
        if let Some(u) = e.usage() {
            details.insert("usage".into(), json!(u));
        }
        if let Error::OutputTruncated { tools, .. } = e {
            details.insert("tools".into(), json!(tools));
        }
        if let Error::OutputInvalid { attempt, retries, .. } = e {
            details.insert("attempt".into(), json!(attempt));
            details.insert("retries".into(), json!(retries));
        }
        if let Error::InvalidMessage { index, field, .. } = e {
            details.insert("index".into(), json!(index));
            details.insert("field".into(), json!(field));
        }
        if let Error::HookFailed { hook, point, .. } = e {
            details.insert("hook".into(), json!(hook));
            details.insert("point".into(), json!(point));
        }
        if let Error::GuardrailTripped { guardrail, kind, verdict, .. } = e {
            details.insert("guardrail".into(), json!(guardrail));
            details.insert("kind".into(), json!(kind));
            details.insert("verdict".into(), verdict.clone());
        }
        if let Error::Budget { budget, limit, spent, cost, .. } = e {
            details.insert("budget".into(), json!(budget));
            details.insert("limit".into(), json!(limit));
            details.insert("spent".into(), json!(spent));
            details.insert("cost".into(), json!(cost));
        }
        let details = (!details.is_empty()).then(|| Value::Object(details).to_string());
        NativeError { code: e.code().to_string(), message: e.to_string(), status, details }
    }
}

/// What the reason of an error thrown for a caught panic starts with: `native.js`, the facade's one door
/// to this module, turns such an error into `InternalError` (code `internal`).
pub(crate) const INTERNAL_MARK: &str = "ambit-internal:";

/// The error a caught panic is thrown as (see [`INTERNAL_MARK`]).
pub(crate) fn internal_error(payload: &(dyn std::any::Any + Send)) -> napi::Error {
    napi::Error::from_reason(format!("{INTERNAL_MARK}{}", Error::from_panic(payload)))
}

/// Runs the body of a synchronous export: a panic in it (the core's or this binding's) is thrown as the
/// internal error instead of aborting the process. Every synchronous export goes through it; the
/// asynchronous ones run their work in a task of its own and map a panicking task the same way.
pub(crate) fn guard<T>(body: impl FnOnce() -> T) -> napi::Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).map_err(|p| internal_error(&*p))
}

/// The core error of a task that panicked, for the envelopes (`{code: "internal", message}`).
pub(crate) fn join_error(e: tokio::task::JoinError) -> Error {
    match e.try_into_panic() {
        Ok(payload) => Error::from_panic(&*payload),
        Err(e) => Error::Internal(format!("the task stopped unexpectedly: {e}")),
    }
}

struct JsTool {
    spec: ToolSpec,
    call: JsToolFn,
}

#[async_trait]
impl Tool for JsTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        self.call_with(arguments, Default::default(), 0).await
    }

    /// The tool's context gets its declared credentials, produced now by the core's broker, and the
    /// run's context (the id under which the facade keeps the run's value).
    async fn call_in(&self, arguments: Value, ctx: &ambit::ToolContext) -> Result<Value, ToolError> {
        let credentials = ctx.declared_credentials().await?;
        self.call_with(arguments, credentials, ctx.context::<RunContextId>().map_or(0, |c| c.0)).await
    }
}

/// One MCP server's host callback, through the facade's one function for every callback.
struct JsMcpHook {
    call: Arc<policy::JsApprovalFn>,
    server: String,
    kind: String,
}

impl JsMcpHook {
    async fn invoke(&self, arg: String) -> Result<String, String> {
        let request = json!({"server": self.server, "kind": self.kind, "arg": arg}).to_string();
        let promise = self.call.call_async_catch(request).await.map_err(|e| e.reason.clone())?;
        let text = promise.await.map_err(|e| e.reason.clone())?;
        let envelope: Value = serde_json::from_str(&text)
            .map_err(|e| format!("the {} callback's answer could not be read: {e}", self.kind))?;
        match (envelope.get("ok").and_then(Value::as_bool), envelope.get("value").and_then(Value::as_str)) {
            (Some(true), Some(value)) => Ok(value.to_string()),
            (Some(true), _) => Err(format!("the {} callback did not return a string", self.kind)),
            _ => Err(envelope.get("message").and_then(Value::as_str).unwrap_or("unknown error").to_string()),
        }
    }
}

#[async_trait]
impl ambit::mcp::Authorize for JsMcpHook {
    async fn authorize(&self, url: String) -> Result<String, String> {
        self.invoke(url).await
    }
}

#[async_trait]
impl ambit::mcp::Elicit for JsMcpHook {
    async fn elicit(&self, request: ambit::mcp::ElicitationRequest) -> Result<ambit::mcp::ElicitationResponse, String> {
        let answer = self.invoke(serde_json::to_string(&request).map_err(|e| e.to_string())?).await?;
        serde_json::from_str(&answer).map_err(|e| format!("the elicitation handler's answer is not a response: {e}"))
    }
}

impl JsMcpHook {
    async fn store(&self, op: Value) -> Result<Value, String> {
        let answer = self.invoke(op.to_string()).await?;
        serde_json::from_str(&answer).map_err(|e| format!("the token store's answer is not JSON: {e}"))
    }
}

#[async_trait]
impl ambit::mcp::TokenStore for JsMcpHook {
    async fn load(&self, key: &str) -> Result<Option<String>, String> {
        match self.store(json!({"op": "load", "key": key})).await? {
            Value::Null => Ok(None),
            Value::String(s) => Ok(Some(s)),
            other => Err(format!("the token store's load answered {other}, not a string or null")),
        }
    }
    async fn save(&self, key: &str, value: &str) -> Result<(), String> {
        self.store(json!({"op": "save", "key": key, "value": value})).await.map(|_| ())
    }
    async fn clear(&self, key: &str) -> Result<(), String> {
        self.store(json!({"op": "clear", "key": key})).await.map(|_| ())
    }
}

/// Attaches the MCP servers' host callbacks to their configurations.
fn attach_mcp_hooks(
    options: &mut AgentOptions,
    hooks: Vec<Vec<String>>,
    call: Option<policy::JsApprovalFn>,
) -> Result<(), Error> {
    let Some(call) = call.map(Arc::new) else { return Ok(()) };
    for pair in hooks {
        let [server, kind] = <[String; 2]>::try_from(pair)
            .map_err(|_| Error::Config("an MCP callback is named by [server, kind]".into()))?;
        let hook = Arc::new(JsMcpHook { call: call.clone(), server: server.clone(), kind: kind.clone() });
        let callback = match kind.as_str() {
            "authorize" => ambit::McpCallback::Authorize(hook),
            "token_store" => ambit::McpCallback::TokenStore(hook),
            "elicit" => ambit::McpCallback::Elicit(hook),
            other => return Err(Error::Config(format!("unknown MCP callback kind '{other}'"))),
        };
        options.attach_mcp_callback(&server, &kind, callback)?;
    }
    Ok(())
}

/// A JavaScript credential callback (the facade's one function for every callback alias).
struct JsCredential {
    fetch: Arc<policy::JsApprovalFn>,
}

#[async_trait]
impl ambit::CredentialSource for JsCredential {
    async fn fetch(&self, alias: &str) -> Result<String, String> {
        let promise = self.fetch.call_async_catch(alias.to_string()).await.map_err(|e| e.reason.clone())?;
        let text = promise.await.map_err(|e| e.reason.clone())?;
        let envelope: Value =
            serde_json::from_str(&text).map_err(|e| format!("the callback's answer could not be read: {e}"))?;
        match (envelope.get("ok").and_then(Value::as_bool), envelope.get("value").and_then(Value::as_str)) {
            (Some(true), Some(value)) => Ok(value.to_string()),
            (Some(true), _) => Err("the callback did not return a string".into()),
            _ => Err(envelope.get("message").and_then(Value::as_str).unwrap_or("unknown error").to_string()),
        }
    }
}

impl JsTool {
    async fn call_with(
        &self,
        arguments: Value,
        credentials: std::collections::BTreeMap<String, String>,
        context: u32,
    ) -> Result<Value, ToolError> {
        // The background task this call runs in (if any), by a token the tool's TaskContext uses.
        let task = ambit::agent::background::HostTask::enter();
        let request =
            json!({"arguments": arguments, "task": task.token(), "credentials": credentials, "context": context})
                .to_string();
        let answer = self.call.call_async_catch(request).await.map_err(|e| ToolError::Failed(e.reason.clone()))?;
        let text = match answer {
            Either::A(text) => text,
            Either::B(promise) => promise.await.map_err(|e| ToolError::Failed(e.reason.clone()))?,
        };
        let mut envelope: Value = serde_json::from_str(&text)
            .map_err(|e| ToolError::Failed(format!("the tool's answer could not be read: {e}")))?;
        if envelope.get("ok").and_then(Value::as_bool) == Some(true) {
            Ok(envelope.get_mut("value").map(Value::take).unwrap_or(Value::Null))
        } else {
            let message = envelope.get("message").and_then(Value::as_str).unwrap_or("unknown error");
            // A thrown error's stack: the core logs it (redacted) and keeps it from the model.
            match envelope.get("stack").and_then(Value::as_str).filter(|s| !s.is_empty()) {
                Some(stack) => Err(ToolError::raised(message, stack)),
                None => Err(ToolError::Failed(message.to_string())),
            }
        }
    }
}

/// A run's context as the core carries it: the id under which the JavaScript facade keeps the run's
/// value. The value itself never leaves JavaScript.
struct RunContextId(u32);

/// A run's input: `messages` (a JSON list in the core's message form) when given, else the text.
fn run_input(input: String, messages: Option<String>) -> Result<ambit::Input, Error> {
    match messages {
        None => Ok(ambit::Input::Text(input)),
        Some(json) => {
            ambit::Input::from_json(serde_json::from_str(&json).map_err(|e| Error::Config(format!("messages: {e}")))?)
        }
    }
}

pub(crate) fn run_context(context: Option<u32>) -> Option<ambit::RunContextValue> {
    context.filter(|c| *c != 0).map(|c| ambit::RunContextValue::new(RunContextId(c)))
}

/// An agent built by the core.
#[napi]
pub struct NativeAgent {
    pub(crate) agent: Agent,
}

#[napi]
impl NativeAgent {
    /// A handle for this agent, for one `createAgent` that names it (`named_agents`).
    #[napi]
    pub fn lend_for_naming(&self) -> u32 {
        let id = LENT_IDS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        LENT.lock().unwrap_or_else(|p| p.into_inner()).insert(id, self.agent.clone());
        id
    }

    /// Runs the agent on one user message. Resolves (never rejects for a core error) to the JSON text
    /// of `{"ok": true, "result": RunResult}` or `{"ok": false, "error": {code, message, status}}`.
    /// `messages`, when given, is the input as a JSON list of messages; `context` the id of the run's
    /// context in the facade.
    #[napi]
    pub async fn run(&self, input: String, messages: Option<String>, context: Option<u32>) -> String {
        let agent = self.agent.clone();
        // Polled in napi's own task, on its runtime: a task of its own (to catch a panic as a
        // JoinError) cost a spawn and a wake per run (bench/peers); a panic is caught here instead.
        let run = async move {
            #[cfg(feature = "test-hooks")]
            testing_hooks::maybe_panic();
            let input = run_input(input, messages)?;
            match run_context(context) {
                Some(c) => agent.run_with_context(input, c).await,
                None => agent.run(input).await,
            }
        };
        let outcome = match std::panic::AssertUnwindSafe(run).catch_unwind().await {
            Ok(outcome) => outcome,
            Err(payload) => Err(Error::from_panic(&*payload)),
        };
        match outcome {
            // The envelope written straight from the result (no intermediate JSON value).
            Ok(result) => match serde_json::to_string(&RunEnvelope { ok: true, result: &result }) {
                // A result whose text would not fit in a JS string is a typed error, not napi's own.
                Ok(text) => match too_long_for_js(&text, max_text(V8_MAX_STRING)) {
                    Some(units) => {
                        drop(text);
                        error_envelope(&too_large("run result", units, max_text(V8_MAX_STRING), "")).to_string()
                    }
                    None => text,
                },
                Err(e) => json!({"ok": false, "error": {
                    "code": "internal",
                    "message": format!("the run result could not be serialized: {e}"),
                }})
                .to_string(),
            },
            Err(e) => {
                let e = NativeError::from_core(&e);
                limit_error(error_envelope(&e).to_string(), &e)
            }
        }
    }

    /// Starts the run as a stream of events; `NativeRunStream.next` hands them out.
    #[napi]
    pub fn stream(
        &self,
        input: String,
        messages: Option<String>,
        context: Option<u32>,
    ) -> napi::Result<NativeRunStream> {
        guard(|| {
            // A history the core refuses is the stream's first (and only) item.
            let stream = match (run_input(input, messages), run_context(context)) {
                (Ok(input), Some(c)) => self.agent.stream_with_context(input, c),
                (Ok(input), None) => self.agent.stream(input),
                (Err(e), _) => ambit::RunStream::failed(e),
            };
            NativeRunStream {
                feed: Arc::new(ambit::EventFeed::start(stream, |run| ambit::runtime::runtime().spawn(run))),
            }
        })
    }
}

/// A finished run's envelope, `{"ok": true, "result": RunResult}`.
#[derive(serde::Serialize)]
struct RunEnvelope<'a> {
    ok: bool,
    result: &'a RunResult,
}

fn error_envelope(e: &NativeError) -> Value {
    json!({"ok": false, "error": {"code": e.code, "message": e.message, "status": e.status, "details": e.details}})
}

/// The most events one `NativeRunStream.next` hands over.
const STREAM_BATCH: usize = 64;

/// The JSON text one `NativeRunStream.next` gathers before it stops taking events (the last one taken
/// may pass it): many large events (tool results of megabytes) cross in batches of about this size, never
/// as one string past V8's limit.
const STREAM_BATCH_BYTES: usize = 1 << 20;

/// V8's longest string, in UTF-16 units (`v8::String::kMaxLength` on 64-bit: 2^29 − 24).
const V8_MAX_STRING: usize = (1 << 29) - 24;

/// The longest envelope of one event, in UTF-16 units: a batch is at most `STREAM_BATCH_BYTES` of text
/// before its last event, its commas and brackets, and that event, so it always fits in a V8 string.
const MAX_EVENT_TEXT: usize = V8_MAX_STRING - STREAM_BATCH_BYTES - STREAM_BATCH - 2;

/// A test build's lower `MAX_EVENT_TEXT` (0: none), so a test reaches the refusal without half a gigabyte.
#[cfg(feature = "test-hooks")]
static TEST_MAX_EVENT_TEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn max_event_text() -> usize {
    max_text(MAX_EVENT_TEXT)
}

/// `limit`, or a test build's lower one.
fn max_text(limit: usize) -> usize {
    #[cfg(feature = "test-hooks")]
    {
        let n = TEST_MAX_EVENT_TEXT.load(std::sync::atomic::Ordering::SeqCst);
        if n > 0 {
            return n;
        }
    }
    limit
}

/// An event's envelope, `{"ok": true, "event": Event}`, written straight from the event.
#[derive(serde::Serialize)]
struct EventEnvelope<'a> {
    ok: bool,
    event: &'a ambit::Event,
}

/// One item of a stream as the JSON text of its envelope, and that text's length in bytes (its size in
/// a batch). An event whose envelope would not fit in a JS string becomes the error `event_too_large`,
/// naming its type and size: the stream ends with it, after the events before it.
fn encode_item(item: Result<ambit::Event, Error>) -> (String, usize) {
    let text = match item {
        Ok(event) => serde_json::to_string(&EventEnvelope { ok: true, event: &event }).unwrap_or_else(|e| {
            let e = Error::Internal(format!("an event could not be serialized: {e}"));
            error_envelope(&NativeError::from_core(&e)).to_string()
        }),
        Err(e) => {
            // The run's error keeps its code even when its text is too long (its message is shortened).
            let e = NativeError::from_core(&e);
            let text = limit_error(error_envelope(&e).to_string(), &e);
            let size = text.len();
            return (text, size);
        }
    };
    let size = text.len();
    let limit = max_event_text();
    if let Some(units) = too_long_for_js(&text, limit) {
        // `{"ok":true,"event":{"type":"…"` begins the text of every event.
        let kind = match text.strip_prefix(r#"{"ok":true,"event":{"type":""#) {
            Some(rest) => format!("{} event", rest.split('"').next().unwrap_or("unknown")),
            None => "error".to_string(),
        };
        drop(text);
        let e = too_large(&kind, units, limit, "; the stream ends here");
        return (error_envelope(&e).to_string(), size);
    }
    (text, size)
}

/// The length of `text` in UTF-16 units when it passes `limit` (V8 counts a string in them).
fn too_long_for_js(text: &str, limit: usize) -> Option<usize> {
    // UTF-16 units are at most UTF-8 bytes: counted only for a text whose bytes pass the limit.
    if text.len() <= limit {
        return None;
    }
    let units = text.encode_utf16().count();
    (units > limit).then_some(units)
}

/// The error `event_too_large` for `what` (`tool_finished event`, `run result`): its JSON text is `units`
/// long, more than `limit`. `details.event` names the event's type (or `what`).
fn too_large(what: &str, units: usize, limit: usize, tail: &str) -> NativeError {
    let message = format!(
        "the {what} is too large for a JavaScript string: its JSON text is {units} characters, the most it \
         may have is {limit} (V8's string limit){tail}"
    );
    let event = what.strip_suffix(" event").unwrap_or(what);
    let details = json!({"event": event, "size": units, "limit": limit}).to_string();
    NativeError { code: "event_too_large".into(), message, status: None, details: Some(details) }
}

/// An error's envelope `text`, or, when it would not fit in a JS string, the same error (its code and
/// status kept) with its message shortened and its details left out.
fn limit_error(text: String, e: &NativeError) -> String {
    const KEEP: usize = 64 * 1024;
    if too_long_for_js(&text, max_event_text()).is_none() {
        return text;
    }
    drop(text);
    let mut end = KEEP.min(e.message.len());
    while !e.message.is_char_boundary(end) {
        end -= 1;
    }
    let message = format!(
        "{}… (shortened: the error's text is {} bytes, too long for a JavaScript string)",
        &e.message[..end],
        e.message.len()
    );
    let short = NativeError { code: e.code.clone(), message, status: e.status, details: None };
    error_envelope(&short).to_string()
}

/// The events of one run.
#[napi]
pub struct NativeRunStream {
    feed: Arc<ambit::EventFeed>,
}

#[napi]
impl NativeRunStream {
    /// Resolves (never rejects for a core error) to the JSON text of a list of envelopes, in order: the
    /// next event and the events already waiting behind it (one crossing for them all, up to about
    /// `STREAM_BATCH_BYTES` of text), each `{"ok": true, "event": Event}`; `{"ok": false, "error": {...}}`
    /// when the run failed (or an event is too large for a JS string, code `event_too_large`); `[]` once
    /// the run is over.
    #[napi]
    pub async fn next(&self) -> String {
        // Awaited in napi's own task: the feed is a channel, and a hop to the core's runtime and back
        // cost a spawn and two wakes per event (bench/peers). A panic is caught here, as in `run`.
        let feed = self.feed.clone();
        let batch = std::panic::AssertUnwindSafe(async move {
            #[cfg(feature = "test-hooks")]
            testing_hooks::maybe_panic();
            feed.next_batch_within(STREAM_BATCH, STREAM_BATCH_BYTES, encode_item).await
        })
        .catch_unwind()
        .await;
        let batch = match batch {
            Ok(batch) => batch,
            Err(payload) => {
                let e = NativeError::from_core(&Error::from_panic(&*payload));
                return Value::Array(vec![error_envelope(&e)]).to_string();
            }
        };
        let mut out = String::with_capacity(batch.iter().map(|t| t.len() + 1).sum::<usize>() + 2);
        out.push('[');
        for (i, text) in batch.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(text);
        }
        out.push(']');
        out
    }

    /// Stops the run: its HTTP request and its tools are dropped.
    #[napi]
    pub fn cancel(&self) -> napi::Result<()> {
        guard(|| self.feed.cancel())
    }
}

/// Builds an agent, or returns the core's configuration error as data.
#[napi]
pub fn create_agent(
    config: NativeAgentConfig,
    tools: Vec<NativeToolConfig>,
    ledger: Option<&ledger::NativeLedgerTools>,
) -> napi::Result<Either<NativeAgent, NativeError>> {
    guard(|| {
        let ledger_tools = ledger.map(|l| l.tools.clone()).unwrap_or_default();
        match build(config, tools, ledger_tools) {
            Ok(agent) => Either::A(NativeAgent { agent }),
            Err(e) => Either::B(NativeError::from_core(&e)),
        }
    })
}

fn build(
    config: NativeAgentConfig,
    tools: Vec<NativeToolConfig>,
    ledger_tools: Vec<Arc<dyn ambit::Tool>>,
) -> Result<Agent, Error> {
    let mut builder = Agent::builder();
    let model_of = |m: NativeModelConfig| {
        let function = m.function.map(|call| {
            let spec = ToolSpec::new("test_model_function", "A test model's function.", json!({}));
            Arc::new(HostReplyFunction(Arc::new(JsTool { spec, call }))) as Arc<dyn ReplyFunction>
        });
        ambit::test_model::build_model(&m.config, function)
    };
    if let Some(m) = config.model {
        builder = builder.model_arc(model_of(m)?);
    }
    for p in config.profiles.unwrap_or_default() {
        builder = builder.profile(p.name, model_of(p.model)?);
    }
    for n in config.named_agents.unwrap_or_default() {
        let agent = LENT.lock().unwrap_or_else(|p| p.into_inner()).remove(&n.handle).ok_or_else(|| {
            Error::Config(format!("named_agents.{}: the agent handle {} is not lent", n.name, n.handle))
        })?;
        builder = builder.named_agent(n.name, ambit::NamedAgent::new(agent, n.description));
    }
    if let Some(o) = config.options {
        let mut options = AgentOptions::from_json(&o)?;
        attach_mcp_hooks(&mut options, config.mcp_hooks.unwrap_or_default(), config.mcp_hook)?;
        builder = builder.options(options);
    }
    if let Some(instructions) = config.instructions {
        builder = builder.instructions(instructions);
    }
    if let Some(fetch) = config.credential_callback.map(Arc::new) {
        for alias in config.credential_callbacks.unwrap_or_default() {
            builder = builder.credential_callback(alias, Arc::new(JsCredential { fetch: fetch.clone() }));
        }
    }
    if let Some(n) = config.max_turns {
        builder = builder.max_turns(n);
    }
    let function = |name: &str, call| {
        let spec = ToolSpec::new(name, "A hook.", json!({}));
        Arc::new(JsTool { spec, call }) as Arc<dyn Tool>
    };
    for h in config.hooks.unwrap_or_default() {
        let point = ambit::HookPoint::parse(&h.point)?;
        let function = function(&h.name, h.call);
        builder = builder.hook(Arc::new(ambit::agent::hooks::HostHook { name: h.name, point, function }));
    }
    for g in config.guardrails.unwrap_or_default() {
        let function = function(&g.name, g.call);
        let guardrail = Arc::new(ambit::agent::hooks::HostGuardrail { name: g.name, function });
        builder = match g.point.as_str() {
            "input" => builder.input_guardrail(guardrail),
            "output" => builder.output_guardrail(guardrail),
            other => return Err(Error::Config(format!("a guardrail is input or output, not '{other}'"))),
        };
    }
    for t in tools {
        let parameters: Value = serde_json::from_str(&t.parameters)
            .map_err(|e| Error::Config(format!("tool '{}': parameters are not valid JSON: {e}", t.name)))?;
        let spec = policy::declare(
            ToolSpec::new(t.name, t.description, parameters),
            t.level,
            t.requires_approval,
            t.allow_blank,
            t.idempotent,
        )?
        .with_credentials(t.credentials.unwrap_or_default());
        builder = builder.tool_arc(Arc::new(JsTool { spec, call: t.call }));
    }
    builder = policy::apply_builtins(builder, config.builtins.unwrap_or_default())?;
    for tool in ledger_tools {
        builder = builder.tool_arc(tool);
    }
    builder = policy::apply_policy(builder, config.policy, config.approvals)?;
    builder.build()
}

/// Reports progress for the background task of a tool call (its TaskContext's token). False outside one.
/// Publishes a text document into a knowledge directory (`Knowledge.publish`): the JSON envelope of the
/// core's `Published`, or of its error (code, message, details with the field).
#[napi]
pub fn knowledge_publish(dir: String, name: String, content: String, overwrite: bool) -> String {
    let out = match ambit::knowledge::publish(&dir, &name, &content, overwrite) {
        Ok(p) => json!({"ok": true, "value": p}),
        Err(e) => {
            let details = e.field().map_or_else(|| json!({}), |f| json!({"field": f}));
            json!({"ok": false, "error": {"code": e.code(), "message": e.to_string(), "details": details}})
        }
    };
    out.to_string()
}

/// Turns OTLP export on (`telemetry.enable`): `headers` as `[name, value]` pairs. The JSON envelope of
/// nothing, or of the core's error (code `config`).
#[napi]
pub fn telemetry_enable(
    endpoint: String,
    headers: Vec<Vec<String>>,
    record_content: bool,
    service_name: String,
) -> String {
    let headers = headers.into_iter().filter_map(|p| Some((p.first()?.clone(), p.get(1)?.clone()))).collect();
    let config = ambit::telemetry::OtlpConfig { endpoint, headers, record_content, service_name };
    telemetry_envelope(ambit::telemetry::init(config).map(|_| ()))
}

/// Exports every finished span not yet sent (`telemetry.flush`).
#[napi]
pub fn telemetry_flush() -> String {
    telemetry_envelope(ambit::telemetry::flush())
}

/// Exports what is pending and turns export off (`telemetry.disable`).
#[napi]
pub fn telemetry_disable() -> String {
    telemetry_envelope(ambit::telemetry::shutdown())
}

fn telemetry_envelope(outcome: Result<(), ambit::Error>) -> String {
    match outcome {
        Ok(()) => json!({"ok": true, "value": null}),
        Err(e) => json!({"ok": false, "error": {"code": e.code(), "message": e.to_string(), "details": {}}}),
    }
    .to_string()
}

#[napi]
pub fn task_progress(token: i64, note: String) -> napi::Result<bool> {
    guard(|| u64::try_from(token).is_ok_and(|t| ambit::agent::background::host_task_progress(t, &note)))
}

/// Whether the background task of a tool call was asked to stop.
#[napi]
pub fn task_cancelled(token: i64) -> napi::Result<bool> {
    guard(|| u64::try_from(token).is_ok_and(ambit::agent::background::host_task_cancelled))
}

/// The name a model sees for the tool `name` on a wire that takes names of at most `max_bytes` bytes
/// (default 64, Chat Completions; 128 on Anthropic and Responses): the name itself when the wire takes
/// it, else its head, `_` and 12 hex digits of its SHA-256 (SPEC §3).
#[napi]
pub fn wire_name(name: String, max_bytes: Option<u32>) -> napi::Result<String> {
    guard(|| {
        let limit = max_bytes
            .map_or(ambit::tools::wire_name::CHAT_COMPLETIONS_LIMIT, |n| usize::try_from(n).unwrap_or(usize::MAX));
        ambit::tools::wire_name::wire_name(&name, limit)
    })
}

/// Test hook: panics inside the core, in a synchronous export (the facade throws `InternalError`).
#[napi(js_name = "_testingForcePanic")]
pub fn testing_force_panic() -> napi::Result<()> {
    guard(|| ambit::testing::force_panic())
}

/// Test hook: a clock the test moves by hand (`ambit::testing`), for `_testingOpenLedger` and
/// `_testingOpenSessions`; times are milliseconds since the Unix epoch. A bad time throws the JSON text of
/// `{code: "ledger_invalid_argument", message}` (the tests read it as the ledger's errors).
#[napi]
pub struct TestingClock {
    clock: ambit::testing::ManualClock,
}

#[napi]
impl TestingClock {
    #[napi(constructor)]
    pub fn new(start_ms: i64) -> napi::Result<Self> {
        guard(|| {
            ambit::testing::manual_clock(start_ms)
                .map(|clock| TestingClock { clock })
                .map_err(|e| envelope::rejection(&e))
        })?
    }

    /// The clock's time.
    #[napi]
    pub fn now_ms(&self) -> napi::Result<i64> {
        guard(|| ambit::ledger::Clock::now_ms(&self.clock))
    }

    /// Moves the clock forward by `ms` (never back); the new time.
    #[napi]
    pub fn advance(&self, ms: i64) -> napi::Result<i64> {
        guard(|| ambit::testing::advance_clock(&self.clock, ms).map_err(|e| envelope::rejection(&e)))?
    }
}

/// Test hook: opens the ledger at `url` on `clock` (a `NativeLedger`, for `new Ledger(...)`); rejects as
/// `openLedger` does.
#[napi(js_name = "_testingOpenLedger")]
pub async fn testing_open_ledger(url: String, clock: &TestingClock) -> napi::Result<ledger::NativeLedger> {
    ledger::open_on(url, "full".into(), Some(clock.clock.clone())).await
}

/// Test hook: opens the session store at `url` on `clock`, `config` a SessionConfig as JSON (a
/// `NativeSessions`, for `new Sessions(...)`); rejects as `openSessions` does.
#[napi(js_name = "_testingOpenSessions")]
pub async fn testing_open_sessions(
    url: String,
    config: String,
    clock: &TestingClock,
) -> napi::Result<session::NativeSessions> {
    session::open_on(url, config, Some(clock.clock.clone())).await
}

/// Test hook: opens the routine store at `url` on `clock` (a `NativeRoutines`, for `new Routines(...)`);
/// rejects as `openRoutines` does.
#[napi(js_name = "_testingOpenRoutines")]
pub async fn testing_open_routines(url: String, clock: &TestingClock) -> napi::Result<routine::NativeRoutines> {
    routine::open_on(url, Some(clock.clock.clone())).await
}

/// Test hook: a tool whose call panics inside the run's task, to pass where `createAgent` takes the
/// ledger's tools.
#[napi(js_name = "_testingPanickingTools")]
pub fn testing_panicking_tools() -> napi::Result<ledger::NativeLedgerTools> {
    guard(|| ledger::NativeLedgerTools { tools: vec![ambit::testing::panicking_tool()] })
}

/// Hooks of a test build only (cargo feature `test-hooks`, which `scripts/test-node.sh` builds with; the
/// release addon has none of them): a panic where only the binding's own `catch_unwind` catches it, and a
/// lower limit for one event's text.
#[cfg(feature = "test-hooks")]
pub mod testing_hooks {
    use std::sync::atomic::{AtomicBool, Ordering};

    use napi_derive::napi;

    static PANIC_NEXT: AtomicBool = AtomicBool::new(false);

    /// Panics once after `_testingPanicNext`: called first thing inside the futures of `NativeAgent.run`
    /// and `NativeRunStream.next`, outside the core, so the binding's own catch is what catches it.
    pub(crate) fn maybe_panic() {
        if PANIC_NEXT.swap(false, Ordering::SeqCst) {
            ambit::testing::force_panic()
        }
    }

    /// Test hook: the next `NativeAgent.run` or `NativeRunStream.next` panics in the binding, before the
    /// core is reached.
    #[napi(js_name = "_testingPanicNext")]
    pub fn testing_panic_next() {
        PANIC_NEXT.store(true, Ordering::SeqCst);
    }

    /// Test hook: the most UTF-16 units one streamed event's text may have (0: V8's own limit).
    #[napi(js_name = "_testingSetMaxEventText")]
    pub fn testing_set_max_event_text(units: u32) {
        super::TEST_MAX_EVENT_TEXT.store(units as usize, Ordering::SeqCst);
    }
}
