//! The agent loop: model turns, tool dispatch (the calls of one turn in parallel), results back, until
//! the model answers with text or the turn limit is reached.

pub mod background;
pub mod budget;
mod call;
pub mod checklist;
pub mod context;
pub mod events;
mod gate;
#[cfg(test)]
mod gate_props;
pub mod hooks;
pub mod image_render;
pub mod input;
pub mod named;
pub mod options;
pub mod output;
pub(crate) mod run_state;
pub mod scratchpad;
pub mod subagent;
mod tooling;

use std::sync::Arc;

use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tracing::Instrument;

use crate::error::{Error, ToolError};
use crate::model::{Message, Model, ModelRequest, PriceTable, StopReason, ToolCall, Usage};
use crate::permission::Policy;
use crate::tools::{Tool, ToolRegistry, ToolSpec};
pub use budget::Budget;
pub use checklist::ChecklistItem;
pub use context::RunContextValue;
use events::Emitter;
pub use events::{Event, EventFeed, RunStream};
pub use gate::ToolListing;
pub use input::Input;
pub use named::NamedAgent;
pub use options::{AgentOptions, McpCallback};
use run_state::RunState;
pub use tooling::ToolingOptions;

/// The default limit on model requests in one run.
pub const DEFAULT_MAX_TURNS: u32 = 10;
/// The default limit on tool calls of one turn running at the same time.
pub const DEFAULT_MAX_CONCURRENCY: usize = 8;

/// One tool call made during a run, as the model saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    /// The call id the model gave.
    pub id: String,
    /// The tool's whole name.
    pub name: String,
    /// The arguments as the model sent them (the raw text when it was not JSON).
    pub arguments: Value,
    /// The text the model received as the result.
    pub result: String,
    /// True when the result is an error (the tool failed, or the call was refused).
    pub is_error: bool,
}

/// What a finished run returns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The model's final text answer.
    pub output: String,
    /// Every tool call made, in the order the model asked for them.
    pub tool_calls: Vec<ToolCallRecord>,
    /// Tokens used, summed over every model request of the run and of the sub-agent runs (spawns and
    /// follow-ups) it made.
    pub usage: Usage,
    /// Model requests made.
    pub turns: u32,
    /// Why the model stopped its final answer: `end`, or `length` when the output token limit cut the
    /// answer (`output` is then the part written), `content_filter` or `refusal`.
    #[serde(default)]
    pub stop_reason: StopReason,
    /// What the run cost, when the price table has the model.
    #[serde(default)]
    pub cost: Option<f64>,
    /// Checklist items still pending or in_progress when the run ended (after the nudge cap).
    #[serde(default)]
    pub open_items: Vec<ChecklistItem>,
    /// The final answer read as the agent's output type (JSON matching its schema), when the agent has
    /// one; `output` is then its JSON text.
    #[serde(default)]
    pub structured_output: Option<Value>,
    /// The whole conversation, the input first.
    pub messages: Vec<Message>,
}

impl RunResult {
    /// The typed final answer decoded as `T` (a serde type matching the output type's schema).
    pub fn output_as<T: serde::de::DeserializeOwned>(&self) -> Result<T, Error> {
        let value = self
            .structured_output
            .clone()
            .ok_or_else(|| Error::Config("the agent has no output type: the answer is text".into()))?;
        serde_json::from_value(value).map_err(|e| Error::Config(format!("the typed answer does not decode: {e}")))
    }
}

/// An agent: a model, instructions and tools. Cheap to clone; runs share nothing but configuration.
#[derive(Clone)]
pub struct Agent {
    inner: Arc<Inner>,
}

#[derive(Clone)]
struct Inner {
    model: Arc<dyn Model>,
    instructions: Option<String>,
    tools: ToolRegistry,
    max_turns: u32,
    max_concurrency: usize,
    budget: Budget,
    prices: PriceTable,
    session: gate::Session,
    /// The checklist's nudge cap; `None` when the checklist is off.
    nudge_cap: Option<u32>,
    /// Background calls' heartbeat window; `None` when background calls are off.
    heartbeat: Option<std::time::Duration>,
    scratchpad: bool,
    /// The tools at run time: deferral and MCP servers (agent/tooling.rs).
    tooling: Arc<crate::deferral::Tooling>,
    /// The sub-agent tree this agent's agent tools act on (agent/subagent.rs).
    subagents: Option<Arc<subagent::Frame>>,
    /// The agent's memory store and whether it may write it (crate::memory); `None`: no memory tools.
    memory: Option<Arc<crate::memory::Access>>,
    /// The final answer's type (agent/output.rs); `None`: a free text answer.
    output: Option<output::OutputType>,
    /// The agent's skills directories (crate::skills); `None`: no skill tools, no index.
    skills: Option<Arc<crate::skills::SkillsAccess>>,
    /// The profiles sub-agents may be spawned on (agent/named.rs), by name.
    profiles: Arc<std::collections::BTreeMap<String, Arc<dyn Model>>>,
    /// Hooks and guardrails (agent/hooks.rs).
    hooks: hooks::HookSet,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("model", &self.inner.model.name())
            .field("tools", &self.inner.tools)
            .field("max_turns", &self.inner.max_turns)
            .finish()
    }
}

/// Configures an [`Agent`].
#[derive(Default)]
pub struct AgentBuilder {
    model: Option<Arc<dyn Model>>,
    instructions: Option<String>,
    tools: Vec<Arc<dyn Tool>>,
    max_turns: Option<u32>,
    max_concurrency: Option<usize>,
    budget: Budget,
    prices: PriceTable,
    policy: Option<Policy>,
    checklist: bool,
    nudge_cap: Option<u32>,
    background: bool,
    heartbeat: Option<std::time::Duration>,
    scratchpad: bool,
    /// The model takes images: `image_render` is offered.
    vision: bool,
    deferral: crate::deferral::DeferralConfig,
    mcp: Vec<crate::mcp::McpServer>,
    subagents: Option<subagent::SubagentConfig>,
    memory: Option<Result<crate::memory::MemoryConfig, crate::memory::MemoryError>>,
    output: Option<output::OutputType>,
    skills: Option<crate::skills::SkillsConfig>,
    knowledge: Option<crate::knowledge::KnowledgeConfig>,
    credentials: Option<crate::credentials::Credentials>,
    credentials_config: Option<crate::credentials::CredentialsConfig>,
    credential_callbacks: std::collections::BTreeMap<String, Arc<dyn crate::credentials::CredentialSource>>,
    /// Profiles and named agents (agent/named.rs).
    profiles: Vec<(String, Arc<dyn Model>)>,
    named_agents: Vec<(String, named::NamedAgent)>,
    hooks: hooks::HookSet,
}

impl AgentBuilder {
    /// A hook (agent/hooks.rs): host code run at its point of every run, which may edit what passes
    /// there (a request, a response, a call's arguments or result) or refuse a tool call. Hooks of one
    /// point run in the order given. [`hooks::hook_fn`] makes one of a closure.
    pub fn hook(mut self, hook: Arc<dyn hooks::Hook>) -> Self {
        self.hooks.hooks.push(hook);
        self
    }

    /// A hook of a closure: `.hook_fn("upper", HookPoint::AfterToolCall, |ctx, payload| async move { … })`.
    pub fn hook_fn<F, Fut>(self, name: impl Into<String>, point: hooks::HookPoint, f: F) -> Self
    where
        F: Fn(hooks::HookContext, Value) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<hooks::HookAction, String>> + Send + 'static,
    {
        self.hook(hooks::hook_fn(name, point, f))
    }

    /// An input guardrail: checks the run's input beside the first model request (which is not held
    /// for it); a tripped one ends the run with [`Error::GuardrailTripped`] before any tool runs.
    pub fn input_guardrail(mut self, guardrail: Arc<dyn hooks::Guardrail>) -> Self {
        self.hooks.input_guardrails.push(guardrail);
        self
    }

    /// An output guardrail: checks the final answer before the run returns it.
    pub fn output_guardrail(mut self, guardrail: Arc<dyn hooks::Guardrail>) -> Self {
        self.hooks.output_guardrails.push(guardrail);
        self
    }

    /// The host callback of a `callback` credential given as data ([`AgentOptions::credentials`]).
    pub fn credential_callback(
        mut self,
        alias: impl Into<String>,
        source: Arc<dyn crate::credentials::CredentialSource>,
    ) -> Self {
        self.credential_callbacks.insert(alias.into(), source);
        self
    }

    /// The credential broker (SPEC §15): the aliases tools declare, the shell's and web_fetch's
    /// delivery rules, and the MCP servers' environment and headers. Every tool result and error text
    /// passes its redactor.
    pub fn credentials(mut self, credentials: crate::credentials::Credentials) -> Self {
        self.credentials = Some(credentials);
        self
    }

    /// The final answer's type (agent/output.rs): the run answers JSON matching its schema, read into
    /// [`RunResult::structured_output`]; an answer that does not match goes back to the model up to its
    /// retries, then the run fails with [`Error::OutputInvalid`].
    pub fn output(mut self, output: output::OutputType) -> Self {
        self.output = Some(output);
        self
    }

    /// The model the agent runs on.
    pub fn model(self, model: impl Model + 'static) -> Self {
        self.model_arc(Arc::new(model))
    }

    /// [`AgentBuilder::model`], shared.
    pub fn model_arc(mut self, model: Arc<dyn Model>) -> Self {
        self.model = Some(model);
        self
    }

    /// Gives the agent a memory store (SPEC §14): the memory tools, and its baseline in a bounded block
    /// after the instructions on every request.
    pub fn memory(mut self, config: crate::memory::MemoryConfig) -> Self {
        self.memory = Some(Ok(config));
        self
    }

    /// Gives the agent skills directories (SPEC §14): `skill_read` and `skill_search`, the three writing
    /// tools when the config is agent-managed, and a bounded index of the skills on every request.
    pub fn skills(mut self, config: crate::skills::SkillsConfig) -> Self {
        self.skills = Some(config);
        self
    }

    /// Gives the agent a knowledge directory (SPEC §14): `knowledge_list` and `knowledge_read`.
    pub fn knowledge(mut self, config: crate::knowledge::KnowledgeConfig) -> Self {
        self.knowledge = Some(config);
        self
    }

    /// The system instructions sent with every request.
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// Adds a host tool.
    pub fn tool(self, tool: impl Tool + 'static) -> Self {
        self.tool_arc(Arc::new(tool))
    }

    /// [`AgentBuilder::tool`], shared.
    pub fn tool_arc(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds host tools.
    pub fn tools(mut self, tools: impl IntoIterator<Item = Arc<dyn Tool>>) -> Self {
        self.tools.extend(tools);
        self
    }

    /// The most model requests one run may make (default [`DEFAULT_MAX_TURNS`]).
    pub fn max_turns(mut self, n: u32) -> Self {
        self.max_turns = Some(n);
        self
    }

    /// The most tool calls of one turn that run at the same time (default [`DEFAULT_MAX_CONCURRENCY`]);
    /// results still go back in the model's order.
    pub fn max_concurrency(mut self, n: usize) -> Self {
        self.max_concurrency = Some(n);
        self
    }

    /// Hard budgets: a run that goes past one stops with [`Error::Budget`].
    pub fn budget(mut self, budget: Budget) -> Self {
        self.budget = budget;
        self
    }

    /// The permission policy: level, approvals, filters, scope, network. Without one the agent runs at
    /// `unrestricted` with approvals off.
    pub fn policy(mut self, policy: Policy) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Gives the agent the checklist tools and the rule that a run cannot end its turn while an item is
    /// pending or in_progress (SPEC §6).
    pub fn checklist(mut self, on: bool) -> Self {
        self.checklist = on;
        self
    }

    /// How many times the loop nudges the model about open items before the run ends anyway and reports
    /// them (default [`checklist::DEFAULT_NUDGE_CAP`]).
    pub fn checklist_nudge_cap(mut self, n: u32) -> Self {
        self.nudge_cap = Some(n);
        self
    }

    /// Background calls (SPEC §5): every tool gains an optional `background` parameter; such a call
    /// returns a task id at once and its result arrives as its own turn. Adds `task_list` and
    /// `task_cancel`.
    pub fn background(mut self, on: bool) -> Self {
        self.background = on;
        self
    }

    /// How long a background task may stay silent before it is failed as dead (default
    /// [`background::DEFAULT_HEARTBEAT`]).
    pub fn heartbeat(mut self, window: std::time::Duration) -> Self {
        self.heartbeat = Some(window);
        self
    }

    /// The scratchpad (SPEC §5): every tool gains an optional `scratchpad` parameter that saves its
    /// output under a name instead of returning it; adds the scratchpad tools.
    pub fn scratchpad(mut self, on: bool) -> Self {
        self.scratchpad = on;
        self
    }

    /// The model takes images as input: adds the `image_render` tool ([`image_render`]), which shows the
    /// model an image held as base64 or in a scratchpad entry. Off by default: a text-only model is never
    /// offered it.
    pub fn vision(mut self, on: bool) -> Self {
        self.vision = on;
        self
    }

    /// Prices per model name, for [`RunResult::cost`] and the cost budget.
    pub fn prices(mut self, prices: PriceTable) -> Self {
        self.prices = prices;
        self
    }

    /// The agent, its settings checked (a wrong one is [`Error::Config`] naming it).
    pub fn build(mut self) -> Result<Agent, Error> {
        let model = self.model.ok_or_else(|| Error::Config("an agent needs a model".into()))?;
        let max_turns = self.max_turns.unwrap_or(DEFAULT_MAX_TURNS);
        if max_turns == 0 {
            return Err(Error::Config("max_turns must be at least 1".into()));
        }
        let max_concurrency = self.max_concurrency.unwrap_or(DEFAULT_MAX_CONCURRENCY);
        if max_concurrency == 0 {
            return Err(Error::Config("max_concurrency must be at least 1".into()));
        }
        self.budget.validate(model.name(), &self.prices)?;
        let mut tools = ToolRegistry::new();
        for t in self.tools {
            tools.register(t)?;
        }
        if self.checklist {
            for t in checklist::tools() {
                tools.register(t)?;
            }
        }
        let nudge_cap = self.checklist.then(|| self.nudge_cap.unwrap_or(checklist::DEFAULT_NUDGE_CAP));
        if self.background {
            for t in background::tools() {
                tools.register(t)?;
            }
        }
        if self.scratchpad {
            for t in scratchpad::tools() {
                tools.register(t)?;
            }
        }
        if self.vision {
            tools.register(image_render::tool())?;
        }
        let profiles = named::profiles(std::mem::take(&mut self.profiles))?;
        let frame = subagent::install(
            &mut tools,
            self.subagents.as_ref(),
            self.policy.as_ref(),
            profiles.keys().cloned().collect(),
        )?;
        for t in named::tools(std::mem::take(&mut self.named_agents))? {
            tools.register(t)?;
        }
        let memory = match self.memory {
            None => None,
            Some(Err(e)) => return Err(Error::Config(e.to_string())),
            Some(Ok(config)) => Some(Arc::new(crate::memory::Access { config, writable: true })),
        };
        for t in memory.iter().flat_map(crate::memory::tools::tools) {
            tools.register(t)?;
        }
        let skills = match self.skills {
            None => None,
            Some(config) => {
                config.validate().map_err(Error::Config)?;
                Some(Arc::new(crate::skills::SkillsAccess::new(config)))
            }
        };
        for t in skills.iter().flat_map(crate::skills::tools::tools) {
            tools.register(t)?;
        }
        if let Some(k) = &self.knowledge {
            k.validate().map_err(Error::Config)?;
            for t in crate::knowledge::tools(k) {
                tools.register(t)?;
            }
        }
        if let Some(o) = &self.output {
            o.validate().map_err(Error::Config)?;
            if tools.iter().any(|t| t.spec().name == output::FINAL_ANSWER_TOOL) {
                return Err(Error::Config(format!(
                    "a tool named '{}' is the output type's own: rename the tool",
                    output::FINAL_ANSWER_TOOL
                )));
            }
        }
        let heartbeat = self.background.then(|| self.heartbeat.unwrap_or(background::DEFAULT_HEARTBEAT));
        if heartbeat.is_some_and(|h| h.is_zero()) {
            return Err(Error::Config("heartbeat must be longer than zero".into()));
        }
        self.hooks.validate()?;
        let mut session = gate::Session::new(self.policy.unwrap_or_default()).map_err(Error::Config)?;
        if let Some(config) = self.credentials_config {
            if self.credentials.is_some() {
                return Err(Error::Config("credentials are given twice: as data and as a broker".into()));
            }
            self.credentials = Some(config.into_credentials(self.credential_callbacks)?);
        } else if let Some(alias) = self.credential_callbacks.keys().next() {
            return Err(Error::Config(format!("credential '{alias}': a callback but no credentials")));
        }
        if let Some(c) = &self.credentials {
            c.validate().map_err(|e| Error::Config(format!("credentials: {e}")))?;
        }
        // Every alias a tool or an MCP server names is registered: a typo is found now, not at a call.
        let named = tools
            .iter()
            .flat_map(|t| t.spec().credentials.clone())
            .chain(self.mcp.iter().flat_map(|s| s.credential_aliases()));
        for alias in named {
            match &self.credentials {
                Some(c) => c.require(&alias).map_err(Error::Config)?,
                None => {
                    return Err(Error::Config(format!(
                        "credential '{alias}' is declared but the agent has no credentials"
                    )));
                }
            }
        }
        // An MCP server's OAuth tokens are credentials: they go to a broker (the agent's, or an empty one)
        // whose redactor the loop applies to every tool result and error text.
        if self.credentials.is_none() && self.mcp.iter().any(|s| s.oauth.is_some()) {
            self.credentials = Some(crate::credentials::Credentials::new());
        }
        session.credentials = self.credentials;
        // Names a wire refuses (too long, or with other characters) reach it cut and hashed (SPEC §3).
        let names: Vec<String> = tools.iter().map(|t| t.spec().name.clone()).collect();
        let dynamic = !self.mcp.is_empty();
        let (tooling, model) = tooling::build(&tools, &session, self.deferral, self.mcp, model);
        let model = crate::tools::wire_name::WireNamedModel::wrap(model, names.iter().map(String::as_str))
            .map_err(Error::Config)?;
        // A profile's model reaches the wire the way the agent's own does.
        let mut wired = std::collections::BTreeMap::new();
        for (name, m) in profiles {
            let m = if dynamic { crate::deferral::wire::wrap(m, tooling.clone()) } else { m };
            let m = crate::tools::wire_name::WireNamedModel::wrap(m, names.iter().map(String::as_str))
                .map_err(Error::Config)?;
            wired.insert(name, m);
        }
        let agent = Agent {
            inner: Arc::new(Inner {
                model,
                instructions: self.instructions,
                tools,
                max_turns,
                max_concurrency,
                budget: self.budget,
                prices: self.prices,
                session,
                nudge_cap,
                heartbeat,
                scratchpad: self.scratchpad,
                tooling,
                subagents: frame.clone(),
                memory,
                output: self.output,
                skills,
                profiles: Arc::new(wired),
                hooks: self.hooks,
            }),
        };
        subagent::bind(frame, &agent);
        Ok(agent)
    }
}

impl Agent {
    /// A builder: a model, then tools, policy and the rest.
    pub fn builder() -> AgentBuilder {
        AgentBuilder::default()
    }

    /// The agent's own tools (host functions and built-ins).
    pub fn tools(&self) -> &ToolRegistry {
        &self.inner.tools
    }

    /// Every tool with its effective level and status (offered, blocked, above level, deferred, hidden)
    /// and whether its calls go to the approval handler: the registered ones, then the MCP servers'
    /// as last listed ([`Agent::refresh_tools`] lists them before a run does).
    pub fn list_tools(&self) -> Vec<ToolListing> {
        // With deferral and MCP (agent/tooling.rs): `deferred` and `hidden` too, and the MCP tools as
        // last listed.
        self.inner.tooling.listing()
    }

    /// The tools sent to the model: those the policy offers. At `none`, nothing.
    pub fn offered_specs(&self) -> Vec<ToolSpec> {
        let session = &self.inner.session;
        self.inner
            .tools
            .iter()
            .filter(|t| session.status(t.as_ref()) == crate::permission::ToolStatus::Offered)
            .map(|t| t.spec().clone())
            .collect()
    }

    /// Runs the loop from its input to the final answer: one user message (a string), or a message
    /// history the host keeps ([`Input::Messages`], e.g. an earlier result's
    /// [`RunResult::messages`] and a new user message), checked first ([`Error::InvalidMessage`]).
    pub async fn run(&self, input: impl Into<Input>) -> Result<RunResult, Error> {
        self.run_with(input.into(), None).await
    }

    /// [`Agent::run`] with a host value every host tool of the run reads through
    /// [`crate::ToolContext::context`] (a database pool, the current user). It is never sent to the
    /// model nor stored.
    pub async fn run_with_context(
        &self,
        input: impl Into<Input>,
        context: RunContextValue,
    ) -> Result<RunResult, Error> {
        self.run_with(input.into(), Some(context)).await
    }

    /// A run of a history of messages (see [`Agent::run`]).
    pub async fn run_messages(&self, messages: Vec<Message>) -> Result<RunResult, Error> {
        self.run_with(Input::Messages(messages), None).await
    }

    /// A run given no context of its own runs with the one it runs inside, if any: a sub-agent's run
    /// (or an agent run from a tool) hands its tools the context of the run that started it.
    async fn run_with(&self, input: Input, context: Option<RunContextValue>) -> Result<RunResult, Error> {
        let span = crate::telemetry::run_span(self.inner.model.name());
        if let Input::Messages(m) = &input {
            input::validate(m)?;
        }
        let context = context.or_else(context::current);
        let outcome = context::scope(context, self.run_inner(input, Emitter::default())).instrument(span.clone()).await;
        crate::telemetry::run_ended(&span, &outcome);
        outcome
    }

    /// Runs the loop like [`Agent::run`], as a stream of [`Event`]s ending with
    /// [`Event::RunFinished`] (or the run's error). Polling the stream drives the run; dropping it
    /// cancels the run.
    pub fn stream(&self, input: impl Into<Input>) -> RunStream {
        self.stream_with(input.into(), None)
    }

    /// [`Agent::stream`] with a host value for the run's tools (see [`Agent::run_with_context`]).
    pub fn stream_with_context(&self, input: impl Into<Input>, context: RunContextValue) -> RunStream {
        self.stream_with(input.into(), Some(context))
    }

    fn stream_with(&self, input: Input, context: Option<RunContextValue>) -> RunStream {
        let agent = self.clone();
        let span = crate::telemetry::run_span(self.inner.model.name());
        RunStream::channel(|events| {
            Box::pin(async move {
                if let Input::Messages(m) = &input {
                    input::validate(m)?;
                }
                let context = context.or_else(context::current);
                let outcome = context::scope(context, agent.run_inner(input, events)).instrument(span.clone()).await;
                crate::telemetry::run_ended(&span, &outcome);
                outcome
            })
        })
    }

    async fn run_inner(&self, input: Input, events: Emitter) -> Result<RunResult, Error> {
        let state = Arc::new(RunState::default());
        // A session watching the run (crate::session): it may compact the conversation between rounds,
        // and it keeps the run's background tasks.
        let rounds = run_state::take_rounds();
        if let Some(sink) = rounds.as_ref().and_then(|r| r.tasks()) {
            state.tasks.keep_in(sink);
        }
        // Background tasks are polled beside the loop, in the run's own task; they stop with the run,
        // unless a session keeps them: then those still running outlive it.
        let mut background = Box::pin(state.tasks.driver());
        let run = Box::pin(self.run_loop(input, events, state.clone(), rounds));
        let outcome = state.clone().scope(async {
            match futures::future::select(run, background.as_mut()).await {
                futures::future::Either::Left((outcome, _)) => outcome,
                futures::future::Either::Right(((), run)) => run.await,
            }
        });
        // A panic anywhere in the run (a wire, a tool, the loop) ends this run with the typed internal
        // error instead of unwinding into the caller's task.
        use futures::FutureExt;
        let outcome =
            std::panic::AssertUnwindSafe(outcome).catch_unwind().await.unwrap_or_else(|p| Err(Error::from_panic(&*p)));
        if state.tasks.kept() && state.tasks.outstanding() > 0 {
            let heartbeat = self.inner.heartbeat.unwrap_or(background::DEFAULT_HEARTBEAT);
            crate::runtime::detach(Box::pin(state.tasks.clone().outlive(background, heartbeat)));
        }
        outcome
    }

    /// The run's turns, then its output guardrails and `run_end` hooks (agent/hooks.rs).
    async fn run_loop(
        &self,
        input: Input,
        events: Emitter,
        state: Arc<RunState>,
        rounds: Option<Arc<dyn run_state::Rounds>>,
    ) -> Result<RunResult, Error> {
        let result = self.run_turns(input, events.clone(), state, rounds).await?;
        let hooks = &self.inner.hooks;
        if !hooks.output_guardrails.is_empty() {
            let payload = serde_json::json!({"output": result.output, "structured_output": result.structured_output});
            self.check_guardrails(hooks::GuardrailKind::Output, result.turns, payload, &events, result.usage).await?;
        }
        if hooks.has(hooks::HookPoint::RunEnd) {
            let payload = serde_json::to_value(&result).unwrap_or_default();
            self.run_hooks(hooks::HookPoint::RunEnd, result.turns, payload, |_, _| Ok(())).await?;
        }
        Ok(result)
    }

    /// Runs the hooks of `point` (agent/hooks.rs) with this agent's session as their context.
    async fn run_hooks(
        &self,
        point: hooks::HookPoint,
        turn: u32,
        payload: Value,
        merge: impl Fn(&mut Value, Value) -> Result<(), String>,
    ) -> Result<hooks::HookOutcome, Error> {
        let session = &self.inner.session;
        let outcome = self.inner.hooks.run(point, turn, &|name| session.hook_context(name), payload, merge).await;
        outcome.map_err(|e| self.redacted(e))
    }

    /// A hook's or guardrail's failure with its text passed through the credential redactor: a hook
    /// that quotes a credential value in its error reaches neither the host's error nor the model.
    fn redacted(&self, e: Error) -> Error {
        let Some(c) = &self.inner.session.credentials else { return e };
        match e {
            Error::HookFailed { hook, point, message } => {
                Error::HookFailed { hook, point, message: c.redact(&message) }
            }
            Error::GuardrailTripped { guardrail, kind, verdict, usage } => {
                Error::GuardrailTripped { guardrail, kind, verdict: gate::redact_value(c, verdict), usage }
            }
            other => other,
        }
    }

    /// Runs the guardrails of `kind` together, each verdict an event; the first (in the order given)
    /// that tripped or failed ends the run.
    async fn check_guardrails(
        &self,
        kind: hooks::GuardrailKind,
        turn: u32,
        payload: Value,
        events: &Emitter,
        usage: Usage,
    ) -> Result<(), Error> {
        let list = match kind {
            hooks::GuardrailKind::Input => &self.inner.hooks.input_guardrails,
            hooks::GuardrailKind::Output => &self.inner.hooks.output_guardrails,
        };
        let session = &self.inner.session;
        let checks = list.iter().map(|g| {
            let ctx =
                hooks::HookContext { name: g.name().to_string(), turn, tool_context: session.hook_context(g.name()) };
            let payload = payload.clone();
            async move { (g.name().to_string(), g.check(ctx, payload).await) }
        });
        let mut first = None;
        for (name, outcome) in futures::future::join_all(checks).await {
            let error = match outcome {
                Err(message) => {
                    Some(Error::HookFailed { hook: name, point: format!("{}_guardrail", kind.as_str()), message })
                }
                Ok(verdict) => {
                    events.emit(Event::GuardrailChecked {
                        guardrail: name.clone(),
                        kind: kind.as_str().to_string(),
                        tripped: verdict.tripped,
                        info: verdict.info.clone(),
                    });
                    verdict.tripped.then(|| Error::GuardrailTripped {
                        guardrail: name,
                        kind: kind.as_str().to_string(),
                        verdict: verdict.info,
                        usage,
                    })
                }
            };
            if first.is_none() {
                first = error;
            }
        }
        first.map_or(Ok(()), |e| Err(self.redacted(e)))
    }

    async fn run_turns(
        &self,
        input: Input,
        events: Emitter,
        state: Arc<RunState>,
        rounds: Option<Arc<dyn run_state::Rounds>>,
    ) -> Result<RunResult, Error> {
        let inner = &self.inner;
        let mut nudges = 0;
        events.emit(Event::RunStarted { input: input.summary() });
        // A typed answer (agent/output.rs): asked of the wire natively where it can, else through the
        // `final_answer` tool; either way read here, and sent back while it does not match.
        let output = inner.output.as_ref();
        let via_tool = output.is_some() && !inner.model.native_structured_output();
        let mut output_misses = 0u32;
        let mut request = ModelRequest {
            instructions: inner.instructions.clone(),
            messages: match input {
                Input::Text(text) => subagent::opening(text),
                Input::Messages(history) => subagent::opening_messages(history),
            },
            tools: self.offered_specs(),
            output: output.filter(|_| !via_tool).map(output::OutputType::structured),
        };
        if inner.hooks.has(hooks::HookPoint::RunStart) {
            let payload = serde_json::json!({"input": serde_json::to_value(&request.messages).unwrap_or_default()});
            self.run_hooks(hooks::HookPoint::RunStart, 0, payload, |_, _| Ok(())).await?;
        }
        let mut usage = Usage::default();
        let mut records = Vec::new();
        let model_name = inner.model.name().to_string();
        let mut first = 1;
        if let Some(r) = &rounds {
            // A resumed run goes on from the state its park kept: turns, budget spent, checklist,
            // scratchpad, loaded tools.
            if let Some(s) = r.restored() {
                state.restore(&s);
                self.restore_subagents(&s.subagents, s.subagents_spawned);
                (usage, nudges, first) = (s.usage, s.nudges, s.turns.saturating_add(1));
            }
            self.account_aside(&state, &events, &mut usage, 0, r.carried())?;
        }
        for turn in first..=inner.max_turns {
            if let Some(r) = &rounds {
                let spent = r.boundary(&mut request.messages).await?;
                self.account_aside(&state, &events, &mut usage, turn, spent)?;
            }
            self.prepare_request(&mut request, &state).await;
            self.add_loop_params(&mut request.tools);
            if let Some(o) = output.filter(|_| via_tool) {
                request.tools.push(o.final_answer_tool());
            }
            state.turn.store(turn, std::sync::atomic::Ordering::Relaxed);
            if let Some(e) = state.take_hook_failure() {
                // A hook of a background call failed.
                return Err(e);
            }
            if inner.hooks.has(hooks::HookPoint::BeforeModelRequest) {
                let payload = serde_json::json!({
                    "turn": turn,
                    "instructions": request.instructions,
                    "messages": serde_json::to_value(&request.messages).unwrap_or_default(),
                    "tools": request.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
                });
                let point = hooks::HookPoint::BeforeModelRequest;
                if let hooks::HookOutcome::Replaced(p) = self.run_hooks(point, turn, payload, merge_request).await? {
                    // Checked by `merge_request` already.
                    request.instructions = p["instructions"].as_str().map(str::to_string);
                    request.messages = serde_json::from_value(p["messages"].clone()).unwrap_or_default();
                }
            }
            // A consumer far behind (the stream's bound) makes the run wait here, between turns.
            events.room().await;
            events.emit(Event::ModelRequest { turn });
            let sent = request.messages.len();
            let sink = |t: &str| events.emit(Event::TextDelta { text: t.to_string() });
            let sink: Option<&crate::model::TextSink<'_>> = if events.is_on() { Some(&sink) } else { None };
            let guarded = (turn == first && !inner.hooks.input_guardrails.is_empty())
                .then(|| hooks::input_payload(&request.messages));
            // In a sub-agent, raced against an interrupting steer (agent/subagent.rs).
            // The turn's span: its model request and the tool calls it asks for are its children.
            let turn_span = crate::telemetry::turn_span(turn);
            let redact = crate::telemetry::Redact(inner.session.credentials.as_ref());
            let chat_span = crate::telemetry::chat_span(&turn_span, &model_name, &request, redact);
            let asked = {
                let (chat_span, request) = (chat_span.clone(), &mut request);
                async move {
                    let reply = self.model_request(request, sink).instrument(chat_span.clone()).await;
                    crate::telemetry::chat_ended(&chat_span, reply.as_ref().map(|r| &r.response), redact);
                    reply
                }
            };
            let reply = match guarded {
                // The input guardrails run beside the first request: it is not held for them, but the run
                // goes no further (no tool, no answer) until they all passed.
                Some(payload) => {
                    // Both run to their end (the request's answer is the run's usage either way, and a
                    // provider sees the same requests whatever the guardrails take).
                    let checks = self.check_guardrails(hooks::GuardrailKind::Input, turn, payload, &events, usage);
                    let (checked, reply) = futures::join!(checks, asked);
                    let reply = reply?;
                    if let Err(e) = checked {
                        let mut usage = usage;
                        usage.add(&reply.response.usage);
                        return Err(match e {
                            Error::GuardrailTripped { guardrail, kind, verdict, .. } => {
                                Error::GuardrailTripped { guardrail, kind, verdict, usage }
                            }
                            other => other,
                        });
                    }
                    reply
                }
                None => asked.await?,
            };
            drop(chat_span);
            let mut response = reply.response;
            subagent::round_progress(turn);
            subagent::account(&state, &mut usage, &response.usage);
            let request_cost = budget::cost_of(&inner.prices, &model_name, &response.usage);
            events.emit(Event::ModelResponse {
                turn,
                usage: response.usage,
                cost: request_cost,
                stop_reason: response.stop,
            });
            let cost = budget::cost_of(&inner.prices, &model_name, &usage);
            inner.budget.check(&usage, cost)?;
            if inner.hooks.has(hooks::HookPoint::AfterModelResponse) {
                let payload = serde_json::json!({
                    "turn": turn,
                    "text": response.text,
                    "tool_calls": hooks::calls_json(&response.tool_calls),
                });
                let point = hooks::HookPoint::AfterModelResponse;
                if let hooks::HookOutcome::Replaced(p) = self.run_hooks(point, turn, payload, merge_response).await? {
                    // Checked by `merge_response` already.
                    response.text = p["text"].as_str().map(str::to_string);
                    response.tool_calls = hooks::calls_from(&p["tool_calls"]).unwrap_or_default();
                }
            }
            let calls = response.tool_calls;
            if response.stop == StopReason::Length && !calls.is_empty() {
                // Calls cut by the output token limit have incomplete arguments: none of them runs, and
                // the run ends saying so (the model cannot shorten what it was never told about).
                let tools = calls.into_iter().map(|c| c.name).collect();
                return Err(Error::OutputTruncated { tools, usage });
            }
            if !reply.provider_items.is_empty() {
                // The provider's own tool search (the native load strategy): kept for the next request,
                // nothing of it reaches the gate.
                request.messages.push(Message::Provider { wire: reply.wire.to_string(), items: reply.provider_items });
            }
            request.messages.push(Message::Assistant { content: response.text.clone(), tool_calls: calls.clone() });
            if let Some(r) = &rounds {
                r.responded(&response.usage, sent, &request.messages);
            }
            if let Some(o) = output.filter(|_| via_tool)
                && let Some(answer) = calls.iter().find(|c| c.name == output::FINAL_ANSWER_TOOL)
            {
                // The answer through the `final_answer` tool: never dispatched, read as the answer.
                // The checklist gate holds a typed answer as it holds a text one: every call of the turn
                // gets its result, then the nudge.
                let gate = match o.read(&answer.arguments) {
                    Ok(_) => self.checklist_gate(&state, &mut nudges, &events),
                    Err(_) => Ok(Vec::new()),
                };
                if let Err(nudge) = gate {
                    for c in &calls {
                        let content = format!(
                            "not {}: the checklist has open items; finish or defer them, then call {} again",
                            if c.id == answer.id { "recorded" } else { "run" },
                            output::FINAL_ANSWER_TOOL
                        );
                        let (call_id, name) = (c.id.clone(), c.name.clone());
                        request.messages.push(Message::Tool {
                            call_id,
                            name,
                            content,
                            is_error: true,
                            parts: Vec::new(),
                        });
                    }
                    request.messages.push(nudge);
                    continue;
                }
                let open = gate.unwrap_or_default();
                match o.read(&answer.arguments) {
                    Ok(value) => {
                        let text = output::text_of(&value);
                        events.emit(Event::TextDelta { text: text.clone() });
                        // Every call of the turn gets its result, so the conversation stays one a wire
                        // takes back (a session's next run continues it).
                        for c in &calls {
                            let (content, is_error) = if c.id == answer.id {
                                ("The final answer was recorded.".to_string(), false)
                            } else {
                                (format!("not run: a call of {} ends the run", output::FINAL_ANSWER_TOOL), true)
                            };
                            let (call_id, name) = (c.id.clone(), c.name.clone());
                            request.messages.push(Message::Tool {
                                call_id,
                                name,
                                content,
                                is_error,
                                parts: Vec::new(),
                            });
                        }
                        return Ok(RunResult {
                            output: text,
                            tool_calls: records,
                            usage,
                            turns: turn,
                            stop_reason: StopReason::End,
                            cost,
                            open_items: open,
                            structured_output: Some(value),
                            messages: request.messages,
                        });
                    }
                    Err(problem) => {
                        output_misses += 1;
                        if output_misses > o.retries {
                            let attempt = answer.arguments.clone();
                            return Err(Error::OutputInvalid { message: problem, attempt, retries: o.retries, usage });
                        }
                        // Every call of the turn gets its result: the answer what was wrong, the others
                        // that they did not run.
                        let retry = o.retry_message(&problem, true);
                        for c in &calls {
                            let content = if c.id == answer.id {
                                retry.clone()
                            } else {
                                format!("not run: a call of {} ends the turn; call it alone", output::FINAL_ANSWER_TOOL)
                            };
                            request.messages.push(Message::Tool {
                                call_id: c.id.clone(),
                                name: c.name.clone(),
                                content,
                                is_error: true,
                                parts: Vec::new(),
                            });
                        }
                        continue;
                    }
                }
            }
            if calls.is_empty() && state.tasks.outstanding() > 0 {
                // Background results arrive as their own turns, one per turn, once the model has ended
                // its turn: the next one that is ready, or the next to finish. In a session that keeps
                // the tasks, only one that is ready: the run ends without waiting, and the others land in
                // the session when they come.
                let window = inner.heartbeat.unwrap_or(background::DEFAULT_HEARTBEAT);
                let report =
                    if state.tasks.kept() { state.tasks.ready_report() } else { state.tasks.next_report(window).await };
                if let Some(r) = report {
                    state.tasks.delivered(&r).await;
                    deliver(&mut request, &events, r);
                    continue;
                }
            }
            if calls.is_empty() && subagent::steer_into(&mut request.messages) {
                // A sub-agent steered while it wrote this answer reads the message and answers it.
                continue;
            }
            if calls.is_empty() {
                let open = match self.checklist_gate(&state, &mut nudges, &events) {
                    Ok(open) => open,
                    Err(nudge) => {
                        request.messages.push(nudge);
                        continue;
                    }
                };
                let text = response.text.unwrap_or_default();
                let structured_output = match output {
                    None => None,
                    Some(o) => match o.read(&text) {
                        Ok(value) => Some(value),
                        Err(problem) => {
                            output_misses += 1;
                            if output_misses > o.retries {
                                let retries = o.retries;
                                return Err(Error::OutputInvalid { message: problem, attempt: text, retries, usage });
                            }
                            request.messages.push(Message::user(o.retry_message(&problem, via_tool)));
                            continue;
                        }
                    },
                };
                return Ok(RunResult {
                    output: text,
                    tool_calls: records,
                    usage,
                    turns: turn,
                    stop_reason: response.stop,
                    cost,
                    open_items: open,
                    structured_output,
                    messages: request.messages,
                });
            }
            // The calls of one turn run together, at most `max_concurrency` at a time; results go back
            // in the model's order.
            if events.is_on() {
                for c in &calls {
                    let arguments = serde_json::from_str::<Value>(&c.arguments)
                        .unwrap_or_else(|_| Value::String(c.arguments.clone()));
                    events.emit(Event::ToolCallRequested {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        arguments,
                        from_text: c.from_text,
                    });
                }
            }
            // Call ids name results (and, in a session, journal entries): a turn that gives two calls one
            // id runs neither of them; each is refused by its id and the model may ask again.
            let shared = call::shared_ids(&calls);
            let pending: Vec<_> = calls
                .iter()
                .map(|c| {
                    let (events, state, shared) = (&events, &state, &shared);
                    async move {
                        match shared.get(c.id.as_str()) {
                            Some(&n) => call::refuse_shared_id(c, n, events),
                            None => self.dispatch_call(c, events, state).await,
                        }
                    }
                })
                .collect();
            let outcomes: Vec<_> =
                futures::stream::iter(pending).buffered(inner.max_concurrency).collect().instrument(turn_span).await;
            drop(shared);
            if let Some(e) = state.take_hook_failure() {
                // A tool call's hook failed: the run ends here. In a session run the turn is kept first,
                // each call's result as it came (a call that ran, as run, with the hook's error): a later
                // run of the session sees it ran and has no reason to run it again.
                if let Some(r) = rounds.as_ref().filter(|_| state.gated.load(std::sync::atomic::Ordering::SeqCst)) {
                    let mut kept = request.messages.clone();
                    for (call, (_, result, is_error)) in calls.iter().zip(&outcomes) {
                        let media = state.media.lock().unwrap_or_else(|p| p.into_inner()).remove(&call.id);
                        kept.push(Message::Tool {
                            call_id: call.id.clone(),
                            name: call.name.clone(),
                            content: result.clone(),
                            is_error: *is_error,
                            parts: media.map(|parts| crate::content::with_text(parts, result)).unwrap_or_default(),
                        });
                    }
                    r.failed_with(kept);
                }
                return Err(e);
            }
            for (call, (arguments, result, is_error)) in calls.into_iter().zip(outcomes) {
                let media = state.media.lock().unwrap_or_else(|p| p.into_inner()).remove(&call.id);
                request.messages.push(Message::Tool {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    content: result.clone(),
                    is_error,
                    parts: media.map(|parts| crate::content::with_text(parts, &result)).unwrap_or_default(),
                });
                records.push(ToolCallRecord { id: call.id, name: call.name, arguments, result, is_error });
            }
            if subagent::account(&state, &mut usage, &Usage::default()) {
                // A run's budget covers the sub-agents it ran.
                inner.budget.check(&usage, budget::cost_of(&inner.prices, &model_name, &usage))?;
            }
            subagent::steer_into(&mut request.messages);
            if crate::session::parked_at(&request.messages, || self.run_snapshot(&state, turn, usage, nudges)) {
                // A call waits on an answer given later (crate::session): the run stops here, persisted.
                return Err(Error::Cancelled);
            }
        }
        Err(Error::MaxTurns { max_turns: inner.max_turns, usage })
    }

    /// The run's state as one value: the run's own ([`RunState::snapshot`]) and this agent's sub-agent
    /// tree.
    fn run_snapshot(&self, state: &RunState, turns: u32, usage: Usage, nudges: u32) -> run_state::RunSnapshot {
        let mut s = state.snapshot(turns, usage, nudges);
        (s.subagents, s.subagents_spawned) = self.subagent_tree();
        s
    }

    /// The checklist gate (SPEC §6): while items are open and nudges remain, the nudge to send (an
    /// `Err`, the run goes on); else the items still open when the run may end.
    fn checklist_gate(
        &self,
        state: &RunState,
        nudges: &mut u32,
        events: &Emitter,
    ) -> Result<Vec<ChecklistItem>, Message> {
        let Some(cap) = self.inner.nudge_cap else { return Ok(Vec::new()) };
        let open: Vec<ChecklistItem> = {
            let list = state.checklist.lock().unwrap_or_else(|p| p.into_inner());
            list.open().into_iter().cloned().collect()
        };
        if open.is_empty() || *nudges >= cap {
            return Ok(open);
        }
        *nudges += 1;
        let open_items = open.iter().map(ChecklistItem::line).collect();
        events.emit(Event::ChecklistNudge { nudge: *nudges, open_items });
        let refs: Vec<&ChecklistItem> = open.iter().collect();
        Err(Message::user(checklist::nudge_message(&refs, *nudges, cap)))
    }

    /// Model requests made for the run outside its turns (a session's compaction summary, before `turn`):
    /// counted in its usage and cost, reported as a `model_response` of that turn, held to its budget.
    fn account_aside(
        &self,
        state: &RunState,
        events: &Emitter,
        usage: &mut Usage,
        turn: u32,
        spent: Usage,
    ) -> Result<(), Error> {
        if spent == Usage::default() {
            return Ok(());
        }
        subagent::account(state, usage, &spent);
        events.emit(Event::ModelResponse {
            turn,
            usage: spent,
            cost: self.price_of(&spent),
            stop_reason: Default::default(),
        });
        self.inner.budget.check(usage, self.price_of(usage))
    }

    /// What `usage` of this agent's model costs, when the price table has the model.
    pub(crate) fn price_of(&self, usage: &Usage) -> Option<f64> {
        budget::cost_of(&self.inner.prices, self.inner.model.name(), usage)
    }

    /// [`Agent::dispatch`] with its events around it: `tool_started` when the tool is about to run (after
    /// the gate and any approval), `tool_refused` when it never will, `tool_finished` for every call.
    async fn dispatch_observed(&self, call: &ToolCall, events: &Emitter) -> (Value, String, bool) {
        let outcome = self.dispatch(call, events).await;
        events.emit(Event::ToolFinished {
            id: call.id.clone(),
            name: call.name.clone(),
            result: outcome.1.clone(),
            is_error: outcome.2,
        });
        outcome
    }

    /// Runs one call with its hooks around it (agent/hooks.rs): `before_tool_call` may edit its
    /// arguments or refuse it, `after_tool_call` edit its result (which the redactor has seen). A hook
    /// that fails leaves its error in the run's state, which the loop ends the run with.
    async fn dispatch(&self, call: &ToolCall, events: &Emitter) -> (Value, String, bool) {
        let hooks = &self.inner.hooks;
        let (before, after) = (hooks.has(hooks::HookPoint::BeforeToolCall), hooks.has(hooks::HookPoint::AfterToolCall));
        if !before && !after {
            return self.dispatch_gated(call, events).await;
        }
        let state = RunState::current();
        let turn = state.as_ref().map_or(0, |s| s.turn.load(std::sync::atomic::Ordering::Relaxed));
        let failed = |e: Error, arguments: Value, ran: Option<&str>| {
            let text = match ran {
                None => format!("Error: not run: {e}"),
                // The tool ran: its result is kept with the hook's error, so the call is never taken as
                // one that did not run (and repeated).
                Some(result) => format!("{result}\n[the tool ran; then {e}]"),
            };
            if let Some(s) = &state {
                s.hook_failed(e);
            }
            (arguments, text, true)
        };
        let mut call = call.clone();
        let parsed =
            serde_json::from_str::<Value>(if call.arguments.trim().is_empty() { "{}" } else { &call.arguments });
        if before
            && let Ok(arguments) = parsed
            && self.lookup_tool(&call.name).is_some()
        {
            let payload = serde_json::json!({"id": call.id, "name": call.name, "arguments": arguments});
            match self.run_hooks(hooks::HookPoint::BeforeToolCall, turn, payload, merge_arguments).await {
                Err(e) => return failed(e, arguments, None),
                Ok(hooks::HookOutcome::Refused { hook, reason }) => {
                    let reason = format!("the call to tool '{}' was refused by hook '{hook}': {reason}", call.name);
                    events.emit(Event::ToolRefused {
                        id: call.id.clone(),
                        name: call.name.clone(),
                        reason: reason.clone(),
                    });
                    return (arguments, format!("Error: {reason}"), true);
                }
                Ok(hooks::HookOutcome::Replaced(p)) => call.arguments = p["arguments"].to_string(),
                Ok(hooks::HookOutcome::Unchanged) => {}
            }
        }
        let (arguments, mut result, mut is_error) = self.dispatch_gated(&call, events).await;
        if let Some(s) = &state {
            s.gated.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        if after {
            let payload = serde_json::json!({
                "id": call.id, "name": call.name, "arguments": arguments, "result": result, "is_error": is_error,
            });
            match self.run_hooks(hooks::HookPoint::AfterToolCall, turn, payload, merge_result).await {
                Err(e) => return failed(e, arguments, Some(&result)),
                Ok(hooks::HookOutcome::Replaced(p)) => {
                    result = p["result"].as_str().unwrap_or_default().to_string();
                    is_error = p["is_error"].as_bool().unwrap_or(is_error);
                }
                Ok(_) => {}
            }
        }
        (arguments, result, is_error)
    }

    /// Runs one call through the gate; every failure becomes an error result the model sees.
    /// A tool's result and error text pass the credential redactor in the gate (`gate::Session::run`).
    async fn dispatch_gated(&self, call: &ToolCall, events: &Emitter) -> (Value, String, bool) {
        // ... and before each tool call (a call's result may be large).
        events.room().await;
        let span = crate::telemetry::tool_span(&call.name, &call.id);
        let outcome = self.dispatch_in(call, events, &span).await;
        let redact = crate::telemetry::Redact(self.inner.session.credentials.as_ref());
        crate::telemetry::tool_ended(&span, &call.name, &outcome.0, &outcome.1, outcome.2, redact);
        outcome
    }

    async fn dispatch_in(&self, call: &ToolCall, events: &Emitter, span: &tracing::Span) -> (Value, String, bool) {
        let raw = if call.arguments.trim().is_empty() { "{}" } else { call.arguments.as_str() };
        let refused = |reason: String| {
            events.emit(Event::ToolRefused { id: call.id.clone(), name: call.name.clone(), reason: reason.clone() });
            reason
        };
        let arguments = match serde_json::from_str::<Value>(raw) {
            Ok(v) => v,
            Err(e) => {
                let msg = refused(format!("the arguments for tool '{}' are not valid JSON: {e}", call.name));
                return (Value::String(call.arguments.clone()), format!("Error: {msg}"), true);
            }
        };
        let Some(tool) = self.lookup_tool(&call.name) else {
            let msg = refused(format!("there is no tool named '{}'", call.name));
            return (arguments, format!("Error: {msg}"), true);
        };
        let on_approval = |r: &crate::permission::ApprovalRequest| {
            events.emit(Event::ApprovalRequested { request: r.clone() });
        };
        let on_run = || events.emit(Event::ToolStarted { id: call.id.clone(), name: call.name.clone() });
        let outcome =
            gate::run_call(&self.inner.session, tool.as_ref(), &call.id, arguments.clone(), on_approval, on_run)
                .instrument(span.clone())
                .await;
        match outcome {
            gate::GateOutcome::Refused { message } => (arguments, format!("Error: {}", refused(message)), true),
            gate::GateOutcome::Parked { request } => match crate::session::park(&call.id, &call.name, request) {
                Ok(note) => (arguments, note, true),
                Err(why) => (arguments, format!("Error: {}", refused(why)), true),
            },
            gate::GateOutcome::Denied { reason } => {
                let msg = refused(format!("the call to tool '{}' was denied: {reason}", call.name));
                (arguments, format!("Error: {msg}"), true)
            }
            gate::GateOutcome::Ran { arguments, result } => {
                let (text, is_error, parts) = ran_result(&call.name, result);
                if let (Some(parts), Some(state)) = (parts, run_state::RunState::current()) {
                    state.media.lock().unwrap_or_else(|p| p.into_inner()).insert(call.id.clone(), parts);
                }
                (arguments, text, is_error)
            }
        }
    }
}

/// What a tool that ran answered, as the model reads it: its text, whether it failed, and, for a result
/// of parts ([`crate::content::tool_content`]), the parts within one result's budget
/// ([`crate::content::budget_result`]), whose text view the text is. A live call and a parked call
/// answered later ([`Agent::answer_parked`]) read it alike.
pub(crate) fn ran_result(
    name: &str,
    result: Result<Value, ToolError>,
) -> (String, bool, Option<Vec<crate::content::Part>>) {
    match result {
        Ok(Value::String(s)) => (s, false, None),
        Ok(v) => match crate::content::read_tool_content(&v) {
            // The images go to the model in the wire's blocks; the result's text (events, hooks, the
            // record) describes them.
            Some(Ok(parts)) => {
                let parts = crate::content::budget_result(parts);
                (crate::content::text_view(&parts), false, Some(parts))
            }
            Some(Err(why)) => (format!("Error: tool '{name}' returned content that was refused: {why}"), true, None),
            None => (v.to_string(), false, None),
        },
        Err(ToolError::Failed(m) | ToolError::Raised { message: m, .. }) => {
            (format!("Error: tool '{name}' failed: {m}"), true, None)
        }
        Err(ToolError::Cancelled) => (format!("Error: tool '{name}' was cancelled"), true, None),
    }
}

/// Hands a background task's result to the model as its own turn.
fn deliver(request: &mut ModelRequest, events: &Emitter, r: background::Report) {
    events.emit(Event::BackgroundTaskReported {
        task_id: r.id.clone(),
        name: r.name.clone(),
        result: r.result.clone(),
        is_error: r.is_error,
    });
    request.messages.push(r.to_message());
}

/// A `before_model_request` hook's replacement: `instructions` (a string or null) and/or `messages` (a
/// message list in the core's form, checked as a run's history is).
fn merge_request(payload: &mut Value, value: Value) -> Result<(), String> {
    hooks::merge_keys(&["instructions", "messages"])(payload, value)?;
    if !(payload["instructions"].is_null() || payload["instructions"].is_string()) {
        return Err("instructions must be a string or null".into());
    }
    let messages: Vec<Message> = serde_json::from_value(payload["messages"].clone())
        .map_err(|e| format!("messages are not the core's message list: {e}"))?;
    input::validate(&messages).map_err(|e| e.to_string())
}

/// An `after_model_response` hook's replacement: `text` (a string or null) and/or `tool_calls`.
fn merge_response(payload: &mut Value, value: Value) -> Result<(), String> {
    hooks::merge_keys(&["text", "tool_calls"])(payload, value)?;
    if !(payload["text"].is_null() || payload["text"].is_string()) {
        return Err("text must be a string or null".into());
    }
    hooks::calls_from(&payload["tool_calls"]).map(|_| ())
}

/// A `before_tool_call` hook's replacement: the call's new arguments (an object).
fn merge_arguments(payload: &mut Value, value: Value) -> Result<(), String> {
    if !value.is_object() {
        return Err(format!("a before_tool_call hook replaces the arguments with an object, got {value}"));
    }
    payload["arguments"] = value;
    Ok(())
}

/// An `after_tool_call` hook's replacement: the new result text, or an object with `result` (a string)
/// and/or `is_error` (a boolean).
fn merge_result(payload: &mut Value, value: Value) -> Result<(), String> {
    match value {
        Value::String(_) => payload["result"] = value,
        Value::Object(_) => {
            hooks::merge_keys(&["result", "is_error"])(payload, value)?;
            if !payload["result"].is_string() || !payload["is_error"].is_boolean() {
                return Err("result must be a string and is_error a boolean".into());
            }
        }
        other => return Err(format!("an after_tool_call hook replaces the result with a string, got {other}")),
    }
    Ok(())
}
