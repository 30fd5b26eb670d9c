//! Swift binding of ambit, with UniFFI proc-macros. It only translates: configuration records into the
//! core's builder, Swift tools into the core's [`ambit::Tool`] trait, the core's results and errors
//! back into records and one error enum. Every rule lives in the core.
//!
//! The Swift package (`bindings-swift/swift`) wraps the generated code in a small facade (`Agent`,
//! `AmbitTool`); these exported names are the layer under it.

use std::sync::Arc;

use ambit::test_model::{HostReplyFunction, ReplyFunction};
use async_trait::async_trait;
use serde_json::{Value, json};

uniffi::setup_scaffolding!();

mod knowledge;
mod ledger;
mod mcp;
mod memory;
mod policy;
mod routine;
mod run;
mod session;
mod subagent;
mod telemetry;
pub use run::{AgentEvent, ChecklistItem, CoreRunStream, LoopSettings, ModelSettings, Price, Wire};
pub use subagent::SubagentSettings;

/// Every failure of a configuration call or a run, one case per code of the core's [`ambit::Error`].
/// `message` is the core's text for the error, the same in every language. The Swift facade rethrows it
/// as its `AmbitError` (lowerCamelCase cases, `code`, `message`).
#[derive(Debug, thiserror::Error, uniffi::Error)]
pub enum CoreError {
    /// The agent or a tool was configured wrongly (code `config`).
    #[error("{message}")]
    Config { message: String },
    /// The provider answered with an error status (code `model_http`).
    #[error("{message}")]
    ModelHttp { status: u16, message: String },
    /// The provider could not be reached (code `model_transport`).
    #[error("{message}")]
    ModelTransport { message: String },
    /// The provider's answer could not be read (code `model_response`).
    #[error("{message}")]
    ModelResponse { message: String },
    /// The run used its turn budget without a final answer (code `max_turns`).
    #[error("{message}")]
    MaxTurns { max_turns: u32, usage: Usage, message: String },
    /// The run went past a hard budget (code `budget_exceeded`); `budget` is `tokens` or `cost`.
    #[error("{message}")]
    BudgetExceeded { budget: String, limit: f64, spent: f64, cost: Option<f64>, usage: Usage, message: String },
    /// The output token limit cut the model's answer in the middle of calls of `tools`; none ran (code
    /// `output_truncated`).
    #[error("{message}")]
    OutputTruncated { tools: Vec<String>, usage: Usage, message: String },
    /// The final answer did not match the output type after `retries` retries; `attempt` is the last
    /// answer's text (code `output_invalid`).
    #[error("{message}")]
    OutputInvalid { attempt: String, retries: u32, usage: Usage, message: String },
    /// A message history given as a run's input breaks a rule: `index` is the message's place in the
    /// list, `field` the field that is wrong (code `invalid_message`). Nothing was sent.
    #[error("{message}")]
    InvalidMessage { index: u64, field: String, message: String },
    /// A hook or guardrail failed: `hook` is its name, `point` where it ran (code `hook_failed`).
    #[error("{message}")]
    HookFailed { hook: String, point: String, message: String },
    /// A guardrail tripped: its name, `kind` (`input` or `output`) and the JSON of its verdict (code
    /// `guardrail_tripped`).
    #[error("{message}")]
    GuardrailTripped { guardrail: String, kind: String, verdict_json: String, message: String },
    /// The run was cancelled (code `cancelled`).
    #[error("{message}")]
    Cancelled { message: String },
    /// A bug in ambit: a panic was caught at the boundary instead of taking the process down (code
    /// `internal`).
    #[error("{message}")]
    Internal { message: String },
}

impl From<ambit::Error> for CoreError {
    fn from(e: ambit::Error) -> Self {
        let message = e.to_string();
        match e {
            ambit::Error::Config(_) => CoreError::Config { message },
            ambit::Error::Model(m) => match m {
                ambit::ModelError::Http { status, .. } => CoreError::ModelHttp { status, message },
                ambit::ModelError::Transport(_) => CoreError::ModelTransport { message },
                ambit::ModelError::InvalidResponse(_) => CoreError::ModelResponse { message },
            },
            ambit::Error::MaxTurns { max_turns, usage } => {
                CoreError::MaxTurns { max_turns, usage: usage.into(), message }
            }
            ambit::Error::Budget { budget, limit, spent, usage, cost } => {
                CoreError::BudgetExceeded { budget, limit, spent, cost, usage: usage.into(), message }
            }
            ambit::Error::OutputTruncated { tools, usage } => {
                CoreError::OutputTruncated { tools, usage: usage.into(), message }
            }
            ambit::Error::OutputInvalid { attempt, retries, usage, .. } => {
                CoreError::OutputInvalid { attempt, retries, usage: usage.into(), message }
            }
            ambit::Error::InvalidMessage { index, field, .. } => {
                CoreError::InvalidMessage { index: index as u64, field, message }
            }
            ambit::Error::HookFailed { hook, point, .. } => CoreError::HookFailed { hook, point, message },
            ambit::Error::GuardrailTripped { guardrail, kind, verdict, .. } => {
                CoreError::GuardrailTripped { guardrail, kind, verdict_json: verdict.to_string(), message }
            }
            ambit::Error::Cancelled => CoreError::Cancelled { message },
            ambit::Error::Internal(_) => CoreError::Internal { message },
        }
    }
}

/// An export's error type: it has a case for a caught panic (code `internal`), so no panic reaches Swift
/// as UniFFI's own untyped error (or, from an export without an error type, as a trap).
pub(crate) trait CaughtPanic {
    /// The error for `error`, an [`ambit::Error::Internal`] built by [`ambit::Error::from_panic`].
    fn internal(error: ambit::Error) -> Self;
}

impl CaughtPanic for CoreError {
    fn internal(error: ambit::Error) -> Self {
        error.into()
    }
}

/// Runs the body of a synchronous export: a panic in it (the core's or this binding's) is the export's
/// internal error (code `internal`; Swift's `AmbitError.internal`, `SessionError.internal`,
/// `LedgerError.internal`). Every synchronous export goes through it.
pub(crate) fn guard<T, E: CaughtPanic>(body: impl FnOnce() -> Result<T, E>) -> Result<T, E> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(body))
        .unwrap_or_else(|p| Err(E::internal(ambit::Error::from_panic(&*p))))
}

/// [`guard`] for the body of an asynchronous export: a panic while the future is polled is the
/// export's internal error. Every asynchronous export goes through it.
pub(crate) async fn guard_async<T, E: CaughtPanic>(
    body: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, E> {
    use futures::FutureExt;
    std::panic::AssertUnwindSafe(body)
        .catch_unwind()
        .await
        .unwrap_or_else(|p| Err(E::internal(ambit::Error::from_panic(&*p))))
}

/// The tag a tool's typed content return (`toolContent([...])`) starts with: put before the content
/// value's JSON, so a plain string a tool returns can never pass for content.
#[uniffi::export]
pub fn host_content_tag() -> Result<String, CoreError> {
    guard(|| Ok(ambit::content::host_content_tag().to_string()))
}

/// Test hook: panics inside the core, in a synchronous export (throws `CoreError.Internal`).
#[uniffi::export]
pub fn testing_force_panic() -> Result<(), CoreError> {
    guard(|| ambit::testing::force_panic())
}

/// Test hook: a tool whose call panics inside the run's task, as the ledger tools `AgentConfig` takes.
#[uniffi::export]
pub fn testing_panicking_tools() -> Result<Arc<ledger::CoreLedgerTools>, CoreError> {
    guard(|| Ok(Arc::new(ledger::CoreLedgerTools { tools: vec![ambit::testing::panicking_tool()] })))
}

/// Test hook: a tool whose spec panics once the switch is armed, so an agent built with it (its tools
/// passed where `AgentConfig` takes the ledger tools) panics in the core on `list_tools`,
/// `tool_names` and a session run, outside any run's task.
#[derive(uniffi::Object)]
pub struct TestingPanicSwitch {
    tools: Arc<ledger::CoreLedgerTools>,
    armed: Arc<std::sync::atomic::AtomicBool>,
}

#[uniffi::export]
impl TestingPanicSwitch {
    /// A new switch, not armed.
    #[uniffi::constructor]
    pub fn new() -> Result<Arc<Self>, CoreError> {
        guard(|| {
            let (tool, armed) = ambit::testing::tool_with_panicking_spec();
            Ok(Arc::new(TestingPanicSwitch { tools: Arc::new(ledger::CoreLedgerTools { tools: vec![tool] }), armed }))
        })
    }

    /// The tool, as the ledger tools `AgentConfig` takes.
    pub fn tools(&self) -> Result<Arc<ledger::CoreLedgerTools>, CoreError> {
        guard(|| Ok(self.tools.clone()))
    }

    /// From now on, every read of the tool's spec panics.
    pub fn arm(&self) -> Result<(), CoreError> {
        guard(|| {
            self.armed.store(true, std::sync::atomic::Ordering::SeqCst);
            Ok(())
        })
    }
}

/// Test hook: a clock the test moves by hand (`ambit::testing`), for `testingOpenLedger` and
/// `testingOpenSessions`; times are milliseconds since the Unix epoch. A bad time throws
/// `LedgerCoreError.InvalidArgument`.
#[derive(uniffi::Object)]
pub struct TestingClock {
    clock: ambit::testing::ManualClock,
}

#[uniffi::export]
impl TestingClock {
    /// A clock at `start_ms`.
    #[uniffi::constructor]
    pub fn new(start_ms: i64) -> Result<Arc<Self>, ledger::LedgerCoreError> {
        guard(|| Ok(Arc::new(TestingClock { clock: ambit::testing::manual_clock(start_ms)? })))
    }

    /// The clock's time.
    pub fn now_ms(&self) -> Result<i64, ledger::LedgerCoreError> {
        guard(|| Ok(ambit::ledger::Clock::now_ms(&self.clock)))
    }

    /// Moves the clock forward by `ms` (never back); the new time.
    pub fn advance(&self, ms: i64) -> Result<i64, ledger::LedgerCoreError> {
        guard(|| Ok(ambit::testing::advance_clock(&self.clock, ms)?))
    }
}

/// Test hook: opens the ledger at `url` on `clock` (for the facade's `Ledger(core:)`).
#[uniffi::export(async_runtime = "tokio")]
pub async fn testing_open_ledger(
    url: String,
    clock: Arc<TestingClock>,
) -> Result<Arc<ledger::CoreLedger>, ledger::LedgerCoreError> {
    guard_async(async move {
        let ledger = ambit::testing::open_ledger(&url, &clock.clock).await?;
        Ok(Arc::new(ledger::CoreLedger { ledger }))
    })
    .await
}

/// Test hook: opens the session store at `url` on `clock`, with the window settings `CoreSessions.open`
/// takes (for the facade's `Sessions(core:)`).
#[uniffi::export(async_runtime = "tokio")]
pub async fn testing_open_sessions(
    url: String,
    context_window: Option<u64>,
    compact_at: f64,
    keep_recent: u32,
    clock: Arc<TestingClock>,
) -> Result<Arc<session::CoreSessions>, session::SessionCoreError> {
    guard_async(async move {
        let config = ambit::session::SessionConfig {
            context_window,
            compact_at,
            keep_recent: keep_recent as usize,
            ..ambit::session::SessionConfig::default()
        };
        let sessions = ambit::testing::open_sessions(&url, &clock.clock).await?.with_config(config)?;
        Ok(Arc::new(session::CoreSessions { sessions }))
    })
    .await
}

impl From<uniffi::UnexpectedUniFFICallbackError> for CoreError {
    fn from(e: uniffi::UnexpectedUniFFICallbackError) -> Self {
        CoreError::Config { message: format!("unexpected error in a Swift callback: {}", e.reason) }
    }
}

/// What a Swift tool throws. The message reaches the model as the core formats it
/// ("Error: tool 'x' failed: <message>").
#[derive(Debug, thiserror::Error, uniffi::Error)]
pub enum HostToolError {
    #[error("{message}")]
    Failed { message: String },
}

impl From<uniffi::UnexpectedUniFFICallbackError> for HostToolError {
    fn from(e: uniffi::UnexpectedUniFFICallbackError) -> Self {
        HostToolError::Failed { message: e.reason }
    }
}

/// A tool implemented in Swift.
#[uniffi::export(foreign)]
#[async_trait]
pub trait HostTool: Send + Sync {
    /// Runs the tool on the JSON object the model sent (as text); the returned text reaches the model.
    /// `task` names the background task the call runs in (0: none), for progress and cancellation;
    /// `credentials_json` is the JSON object of the credentials the tool declared, by alias; `context`
    /// the id under which the facade keeps the run's context value (0: the run has none).
    async fn call(
        &self,
        arguments_json: String,
        task: u64,
        credentials_json: String,
        context: u64,
    ) -> Result<String, HostToolError>;
}

/// The host's credential callbacks (SPEC §15): produces the value of a `callback` credential, each time
/// a tool needs it.
#[uniffi::export(foreign)]
#[async_trait]
pub trait HostCredentials: Send + Sync {
    async fn fetch(&self, alias: String) -> Result<String, HostToolError>;
}

/// Adapts the Swift callbacks to the core's [`ambit::CredentialSource`].
struct SwiftCredential {
    host: Arc<dyn HostCredentials>,
}

#[async_trait]
impl ambit::CredentialSource for SwiftCredential {
    async fn fetch(&self, alias: &str) -> Result<String, String> {
        self.host.fetch(alias.to_string()).await.map_err(|HostToolError::Failed { message }| message)
    }
}

/// A tool as the model is told about it, and its Swift implementation.
#[derive(uniffi::Record)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    /// The JSON Schema of the arguments, as text; must be an object schema.
    pub parameters_json: String,
    pub implementation: Arc<dyn HostTool>,
    /// The lowest level the tool may run at; absent: undeclared (`unrestricted`).
    #[uniffi(default = None)]
    pub level: Option<policy::Level>,
    /// Every call goes to the approval handler, whatever the level.
    #[uniffi(default = false)]
    pub requires_approval: bool,
    /// String arguments whose blank value is kept.
    #[uniffi(default = [])]
    pub allow_blank: Vec<String>,
    /// Running a call twice has the effect of running it once (SPEC §8b).
    #[uniffi(default = false)]
    pub idempotent: bool,
    /// The credential aliases the tool reads from its context.
    #[uniffi(default = [])]
    pub credentials: Vec<String>,
}

/// An agent's configuration.
#[derive(uniffi::Record)]
pub struct AgentConfig {
    pub model: ModelSettings,
    /// Concurrency within a turn, hard budgets, the checklist.
    #[uniffi(default = None)]
    pub settings: Option<LoopSettings>,
    #[uniffi(default = None)]
    pub instructions: Option<String>,
    /// The most model requests one run may make; absent: the core's default.
    #[uniffi(default = None)]
    pub max_turns: Option<u32>,
    #[uniffi(default = [])]
    pub tools: Vec<ToolDefinition>,
    /// The permission policy; absent: `unrestricted`, approvals off.
    #[uniffi(default = None)]
    pub policy: Option<policy::PolicySettings>,
    /// Built-in tools to register (after `tools`), by name.
    #[uniffi(default = [])]
    pub builtins: Vec<String>,
    /// MCP servers and deferral: the JSON text of the core's `ToolingOptions`
    /// (`{"mcp_servers": [...], "deferral": {...}}`); the Swift facade writes it from `McpServer` and
    /// `Deferral`.
    #[uniffi(default = None)]
    pub tooling_json: Option<String>,
    /// The MCP servers' host callbacks (OAuth consent and token store, elicitation).
    #[uniffi(default = [])]
    pub mcp_hooks: Vec<mcp::McpHook>,
    /// The agent tools; absent: none.
    #[uniffi(default = None)]
    pub subagents: Option<SubagentSettings>,
    /// The credential broker: the JSON text of the core's `CredentialsConfig`.
    #[uniffi(default = None)]
    pub credentials_json: Option<String>,
    /// The aliases of the `callback` credentials, all answered by `credential_source`.
    #[uniffi(default = [])]
    pub credential_callbacks: Vec<String>,
    #[uniffi(default = None)]
    pub credential_source: Option<Arc<dyn HostCredentials>>,
    /// The work ledger's four tools, bound to one run of a routine (`Ledger.tools(...)`).
    #[uniffi(default = None)]
    pub ledger: Option<Arc<ledger::CoreLedgerTools>>,
    /// A memory store (`Memory.open`), given with `agent_name`: the memory tools and the baseline block.
    #[uniffi(default = None)]
    pub memory: Option<Arc<memory::CoreMemory>>,
    /// The agent's name in its memory store; required with `memory`.
    #[uniffi(default = None)]
    pub agent_name: Option<String>,
    /// The final answer's type: the JSON text of `{"name", "schema", "retries"}` (the core's
    /// `OutputType`); the Swift facade writes it from `OutputSchema`.
    #[uniffi(default = None)]
    pub output_json: Option<String>,
    /// Skills directories (SPEC §14): the index, skill_read and skill_search, and the writing tools when
    /// agent-managed.
    #[uniffi(default = None)]
    pub skills: Option<SkillsSettings>,
    /// A knowledge directory (SPEC §14): knowledge_list and knowledge_read.
    #[uniffi(default = None)]
    pub knowledge: Option<knowledge::KnowledgeSettings>,
    /// A test model in place of `model`: the JSON text of `{"test_model": {...}}`
    /// (`ambit::test_model::build_model`); the Swift facade writes it from `TestModel` and `FunctionModel`.
    #[uniffi(default = None)]
    pub test_model_json: Option<String>,
    /// A `FunctionModel`'s function, called as a tool is: with a request's JSON, answering a reply's JSON.
    #[uniffi(default = None)]
    pub model_function: Option<Arc<dyn HostTool>>,
    /// The profiles `agent_spawn`'s `profile` may name.
    #[uniffi(default = [])]
    pub profiles: Vec<ProfileSettings>,
    /// The named agents `agent_delegate` hands work to.
    #[uniffi(default = [])]
    pub named_agents: Vec<NamedAgentSettings>,
    /// Hooks (`ambit::agent::hooks`), run in the order given at their point.
    #[uniffi(default = [])]
    pub hooks: Vec<HookSettings>,
    /// Input and output guardrails.
    #[uniffi(default = [])]
    pub guardrails: Vec<GuardrailSettings>,
}

/// A hook: its name, its point (`before_tool_call`, ...) and the Swift function, called as a tool is
/// with the payload's JSON; it answers the JSON of a `HookAction` (`null`, `{"action": ...}`).
#[derive(uniffi::Record)]
pub struct HookSettings {
    pub name: String,
    pub point: String,
    pub implementation: Arc<dyn HostTool>,
}

/// A guardrail: its name, `kind` (`input` or `output`) and the Swift function, answering the JSON of a
/// `GuardrailVerdict` (`{"tripped", "info"}`).
#[derive(uniffi::Record)]
pub struct GuardrailSettings {
    pub name: String,
    pub kind: String,
    pub implementation: Arc<dyn HostTool>,
}

/// A profile: its name and its model (settings, or a test model as the agent's own is given).
#[derive(uniffi::Record)]
pub struct ProfileSettings {
    pub name: String,
    pub model: ModelSettings,
    #[uniffi(default = None)]
    pub test_model_json: Option<String>,
    #[uniffi(default = None)]
    pub model_function: Option<Arc<dyn HostTool>>,
}

/// A named agent: its name, when and how to use it, and the agent.
#[derive(uniffi::Record)]
pub struct NamedAgentSettings {
    pub name: String,
    pub description: String,
    pub agent: Arc<CoreAgent>,
}

/// A model from its settings, or the test model `test_model_json` with its function.
fn model_of(
    settings: ModelSettings,
    test_model_json: Option<String>,
    function: Option<Arc<dyn HostTool>>,
) -> Result<Arc<dyn ambit::Model>, CoreError> {
    Ok(match test_model_json {
        Some(json) => {
            let function = function.map(|implementation| {
                let spec = ambit::ToolSpec::new("test_model_function", "A test model's function.", json!({}));
                Arc::new(HostReplyFunction(Arc::new(SwiftTool { spec, implementation }))) as Arc<dyn ReplyFunction>
            });
            ambit::test_model::build_model(&json, function)?
        }
        None => settings.build()?,
    })
}

/// An agent's skills directories: the core's `SkillsConfig` as a record.
#[derive(uniffi::Record)]
pub struct SkillsSettings {
    /// Directories holding skill folders, absolute or relative to the working directory; a new skill is
    /// written to the first.
    pub dirs: Vec<String>,
    /// The agent may write, edit and delete skills (never a sub-agent).
    #[uniffi(default = false)]
    pub agent_managed: bool,
    /// The most skills the per-turn index lists (default 100, at most 1,000; 0: no index).
    #[uniffi(default = None)]
    pub index_entries: Option<u32>,
}

/// Tokens used, summed over the model requests of a run.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct Usage {
    pub requests: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
}

impl From<ambit::Usage> for Usage {
    fn from(u: ambit::Usage) -> Self {
        Usage {
            requests: u.requests,
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_read_tokens: u.cache_read_tokens,
            cache_write_tokens: u.cache_write_tokens,
        }
    }
}

/// Why the model stopped answering (the core's [`ambit::StopReason`]): Swift's `.end`, `.toolCalls`,
/// `.length` (cut by the output token limit), `.contentFilter`, `.refusal`, `.other`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Enum)]
pub enum StopReason {
    End,
    ToolCalls,
    Length,
    ContentFilter,
    Refusal,
    Other,
}

impl From<ambit::StopReason> for StopReason {
    fn from(r: ambit::StopReason) -> Self {
        match r {
            ambit::StopReason::End => StopReason::End,
            ambit::StopReason::ToolCalls => StopReason::ToolCalls,
            ambit::StopReason::Length => StopReason::Length,
            ambit::StopReason::ContentFilter => StopReason::ContentFilter,
            ambit::StopReason::Refusal => StopReason::Refusal,
            ambit::StopReason::Other => StopReason::Other,
        }
    }
}

/// One tool call made during a run.
#[derive(Debug, Clone, PartialEq, Eq, uniffi::Record)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The arguments as JSON text (the raw text when the model did not send JSON).
    pub arguments_json: String,
    /// The text the model received as the result.
    pub result: String,
    /// True when the result is an error (the tool failed, or the call was refused).
    pub is_error: bool,
}

/// What a finished run returns.
#[derive(Debug, Clone, PartialEq, uniffi::Record)]
pub struct RunResult {
    pub output: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
    pub turns: u32,
    /// Why the model stopped its final answer (`.length`: the output token limit cut it).
    pub stop_reason: StopReason,
    /// What the run cost, when the price table has the model.
    pub cost: Option<f64>,
    /// Checklist items still pending or in_progress when the run ended (past the nudge cap).
    pub open_items: Vec<ChecklistItem>,
    /// The final answer read as the agent's output type, as JSON text, when it has one (the facade's
    /// `decode(_:)` decodes it).
    pub structured_output_json: Option<String>,
    /// The whole conversation, the input first, as the core's JSON message list (the facade's
    /// `messages` decodes it into `Message`s).
    pub messages_json: String,
}

impl From<ambit::RunResult> for RunResult {
    fn from(r: ambit::RunResult) -> Self {
        RunResult {
            output: r.output,
            tool_calls: r
                .tool_calls
                .into_iter()
                .map(|c| ToolCall {
                    id: c.id,
                    name: c.name,
                    arguments_json: match c.arguments {
                        Value::String(raw) => raw,
                        other => other.to_string(),
                    },
                    result: c.result,
                    is_error: c.is_error,
                })
                .collect(),
            usage: r.usage.into(),
            turns: r.turns,
            stop_reason: r.stop_reason.into(),
            cost: r.cost,
            open_items: r.open_items.into_iter().map(Into::into).collect(),
            structured_output_json: r.structured_output.map(|v| v.to_string()),
            messages_json: serde_json::to_string(&r.messages).unwrap_or_else(|_| "[]".into()),
        }
    }
}

type AbortableRun = std::pin::Pin<
    Box<
        dyn std::future::Future<Output = Result<Result<ambit::RunResult, ambit::Error>, futures::future::Aborted>>
            + Send,
    >,
>;

/// One run started by [`CoreAgent::start_run`]: its result, awaited once, or its cancellation.
#[derive(uniffi::Object)]
pub struct CoreRun {
    run: std::sync::Mutex<Option<AbortableRun>>,
    abort: futures::future::AbortHandle,
}

/// Polls `F` inside the core's runtime (its IO driver, timers and spawns), in the caller's task: no
/// task of its own per run and no hop between threads to hand the result back.
struct InCoreRuntime<F>(F);

impl<F: std::future::Future + Unpin> std::future::Future for InCoreRuntime<F> {
    type Output = F::Output;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<F::Output> {
        let _entered = ambit::runtime::runtime().enter();
        std::pin::Pin::new(&mut self.0).poll(cx)
    }
}

#[uniffi::export]
impl CoreRun {
    /// The run's result, polled in the awaiting task; its error; `CoreError::Cancelled` once
    /// [`CoreRun::cancel`] was called (or the result was already taken).
    pub async fn result(&self) -> Result<RunResult, CoreError> {
        let run = self.run.lock().unwrap_or_else(|p| p.into_inner()).take();
        guard_async(async move {
            let Some(run) = run else {
                return Err(ambit::Error::Cancelled.into());
            };
            match InCoreRuntime(run).await {
                Ok(outcome) => Ok(outcome?.into()),
                Err(futures::future::Aborted) => Err(ambit::Error::Cancelled.into()),
            }
        })
        .await
    }

    /// Stops the run: its HTTP request and its tools are dropped, and [`CoreRun::result`] answers
    /// `CoreError::Cancelled`.
    pub fn cancel(&self) -> Result<(), CoreError> {
        guard(|| {
            self.abort.abort();
            Ok(())
        })
    }
}

/// Adapts a Swift tool to the core's [`ambit::Tool`].
struct SwiftTool {
    spec: ambit::ToolSpec,
    implementation: Arc<dyn HostTool>,
}

#[async_trait]
impl ambit::Tool for SwiftTool {
    fn spec(&self) -> &ambit::ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value) -> Result<Value, ambit::ToolError> {
        self.call_with(arguments, Default::default(), 0).await
    }

    /// The tool's context gets its declared credentials, produced now by the core's broker, and the
    /// run's context (the id of the facade's value).
    async fn call_in(&self, arguments: Value, ctx: &ambit::ToolContext) -> Result<Value, ambit::ToolError> {
        let credentials = ctx.declared_credentials().await?;
        self.call_with(arguments, credentials, ctx.context::<RunContextId>().map_or(0, |c| c.0)).await
    }
}

/// A run's context as the core carries it: the id under which the Swift facade keeps the run's value.
/// The value itself never leaves Swift.
pub(crate) struct RunContextId(pub(crate) u64);

impl SwiftTool {
    async fn call_with(
        &self,
        arguments: Value,
        credentials: std::collections::BTreeMap<String, String>,
        context: u64,
    ) -> Result<Value, ambit::ToolError> {
        // The background task this call runs in (if any), by a token the tool's TaskContext uses.
        let task = ambit::agent::background::HostTask::enter();
        let credentials = serde_json::to_string(&credentials).unwrap_or_else(|_| "{}".into());
        match self.implementation.call(arguments.to_string(), task.token(), credentials, context).await {
            // A `toolContent([...])` answer is the core's content value: its images go as image blocks.
            Ok(text) => Ok(ambit::content::from_host_text(text)),
            Err(HostToolError::Failed { message }) => Err(ambit::ToolError::Failed(message)),
        }
    }
}

/// The agent object under the Swift facade's `Agent`.
#[derive(uniffi::Object)]
pub struct CoreAgent {
    pub(crate) inner: ambit::Agent,
}

#[uniffi::export(async_runtime = "tokio")]
impl CoreAgent {
    /// Builds the agent; a bad configuration (duplicate tool names, a schema that is not an object, …)
    /// is a `CoreError::Config`.
    #[uniffi::constructor]
    pub fn new(config: AgentConfig) -> Result<Arc<Self>, CoreError> {
        guard(|| Self::build(config))
    }

    /// The names of the agent's tools, in registration order.
    pub fn tool_names(&self) -> Result<Vec<String>, CoreError> {
        guard(|| Ok(self.inner.tools().specs().into_iter().map(|s| s.name).collect()))
    }

    /// Runs the agent from one user message to the final answer.
    pub async fn run(&self, input: String) -> Result<RunResult, CoreError> {
        guard_async(async { Ok(self.inner.run(input).await?.into()) }).await
    }

    /// Starts the run on `input` without its events: the Swift facade's `Agent.run` awaits its
    /// [`CoreRun::result`] (one crossing per run, not one per event) and cancels it with
    /// [`CoreRun::cancel`] when its `Task` is cancelled.
    pub fn start_run(&self, input: String) -> Result<Arc<CoreRun>, CoreError> {
        guard(|| {
            let agent = self.inner.clone();
            let (run, abort) = futures::future::abortable(async move { agent.run(input).await });
            Ok(Arc::new(CoreRun { run: std::sync::Mutex::new(Some(Box::pin(run))), abort }))
        })
    }

    /// Starts the run as a stream of events.
    pub fn stream(&self, input: String) -> Result<Arc<CoreRunStream>, CoreError> {
        guard(|| {
            let feed = ambit::EventFeed::start(self.inner.stream(input), |run| ambit::runtime::runtime().spawn(run));
            Ok(Arc::new(CoreRunStream { feed }))
        })
    }

    /// Starts the run on `input`, or on `messages_json` (the core's JSON message list) when given, with
    /// the run context `context` (an id of the facade's; 0: none), as a stream of events. A history the
    /// core refuses is the stream's error (`CoreError::InvalidMessage`).
    pub fn stream_input(
        &self,
        input: String,
        messages_json: Option<String>,
        context: u64,
    ) -> Result<Arc<CoreRunStream>, CoreError> {
        guard(|| {
            let input = match messages_json {
                None => Ok(ambit::Input::Text(input)),
                Some(json) => serde_json::from_str(&json)
                    .map_err(|e| ambit::Error::Config(format!("messages: {e}")))
                    .and_then(ambit::Input::from_json),
            };
            let stream = match (input, context) {
                (Ok(input), 0) => self.inner.stream(input),
                (Ok(input), c) => self.inner.stream_with_context(input, ambit::RunContextValue::new(RunContextId(c))),
                (Err(e), _) => ambit::RunStream::failed(e),
            };
            let feed = ambit::EventFeed::start(stream, |run| ambit::runtime::runtime().spawn(run));
            Ok(Arc::new(CoreRunStream { feed }))
        })
    }
}

impl CoreAgent {
    fn build(config: AgentConfig) -> Result<Arc<Self>, CoreError> {
        let model = model_of(config.model, config.test_model_json, config.model_function)?;
        let mut builder = ambit::Agent::builder().model_arc(model);
        for p in config.profiles {
            builder = builder.profile(p.name, model_of(p.model, p.test_model_json, p.model_function)?);
        }
        for n in config.named_agents {
            builder = builder.named_agent(n.name, ambit::NamedAgent::new(n.agent.inner.clone(), n.description));
        }
        let function = |name: &str, implementation: Arc<dyn HostTool>| {
            let spec = ambit::ToolSpec::new(name, "A hook.", json!({}));
            Arc::new(SwiftTool { spec, implementation }) as Arc<dyn ambit::Tool>
        };
        for h in config.hooks {
            let point = ambit::HookPoint::parse(&h.point)?;
            let function = function(&h.name, h.implementation);
            builder = builder.hook(Arc::new(ambit::agent::hooks::HostHook { name: h.name, point, function }));
        }
        for g in config.guardrails {
            let function = function(&g.name, g.implementation);
            let guardrail = Arc::new(ambit::agent::hooks::HostGuardrail { name: g.name, function });
            builder = match g.kind.as_str() {
                "input" => builder.input_guardrail(guardrail),
                "output" => builder.output_guardrail(guardrail),
                other => {
                    return Err(ambit::Error::Config(format!("a guardrail is input or output, not '{other}'")).into());
                }
            };
        }
        if let Some(settings) = config.settings {
            builder = settings.apply(builder);
        }
        if let Some(instructions) = config.instructions {
            builder = builder.instructions(instructions);
        }
        if let Some(n) = config.max_turns {
            builder = builder.max_turns(n);
        }
        for tool in config.tools {
            let parameters: Value = serde_json::from_str(&tool.parameters_json)
                .map_err(|e| ambit::Error::Config(format!("tool '{}': parameters are not JSON: {e}", tool.name)))?;
            let spec = policy::declare(
                ambit::ToolSpec::new(tool.name, tool.description, parameters),
                tool.level,
                tool.requires_approval,
                tool.allow_blank,
                tool.idempotent,
            )
            .with_credentials(tool.credentials);
            builder = builder.tool_arc(Arc::new(SwiftTool { spec, implementation: tool.implementation }));
        }
        builder = policy::apply(builder, config.builtins, config.policy)?;
        for tool in config.ledger.iter().flat_map(|l| l.tools.iter()) {
            builder = builder.tool_arc(tool.clone());
        }
        if let Some(tooling) = config.tooling_json {
            let mut tooling = ambit::ToolingOptions::from_json(&tooling)?;
            mcp::attach(&mut tooling, config.mcp_hooks)?;
            builder = builder.tooling(tooling);
        }
        if let Some(s) = config.subagents {
            builder = builder.subagents(s.into_core()?);
        }
        if let Some(c) = config.credentials_json {
            let mut callbacks = std::collections::BTreeMap::new();
            if let Some(host) = config.credential_source {
                for alias in config.credential_callbacks {
                    let source: Arc<dyn ambit::CredentialSource> = Arc::new(SwiftCredential { host: host.clone() });
                    callbacks.insert(alias, source);
                }
            }
            builder = builder.credentials(ambit::CredentialsConfig::from_json(&c)?.into_credentials(callbacks)?);
        }
        if let Some(o) = config.output_json {
            builder = builder.output(ambit::agent::output::OutputType::from_json(&o)?);
        }
        match (config.memory, config.agent_name) {
            (None, None) => {}
            (Some(m), Some(name)) => {
                let memory = ambit::memory::MemoryConfig::new(m.memory.clone(), name)
                    .map_err(|e| ambit::Error::Config(e.to_string()))?;
                builder = builder.memory(memory);
            }
            (Some(_), None) => {
                return Err(ambit::Error::Config(
                    "memory needs agent_name: the agent's name in its memory store".into(),
                )
                .into());
            }
            (None, Some(_)) => {
                return Err(ambit::Error::Config(
                    "agent_name is the agent's name in a memory store: give memory too".into(),
                )
                .into());
            }
        }
        if let Some(s) = config.skills {
            builder = builder.skills(ambit::skills::SkillsConfig {
                dirs: s.dirs,
                agent_managed: s.agent_managed,
                index_entries: s.index_entries.map(|n| n as usize),
            });
        }
        if let Some(k) = config.knowledge {
            builder = builder.knowledge(k.into_core());
        }
        Ok(Arc::new(CoreAgent { inner: builder.build()? }))
    }
}

/// Reports progress for the background task of a tool call (its TaskContext's token). False outside one.
#[uniffi::export]
pub fn task_progress(token: u64, note: String) -> Result<bool, CoreError> {
    guard(|| Ok(ambit::agent::background::host_task_progress(token, &note)))
}

/// Whether the background task of a tool call was asked to stop.
#[uniffi::export]
pub fn task_cancelled(token: u64) -> Result<bool, CoreError> {
    guard(|| Ok(ambit::agent::background::host_task_cancelled(token)))
}
