//! Sub-agents (SPEC §7): `agent_spawn`, `agent_list`, `agent_followup`, `agent_steer`,
//! `agent_delete`. The narrowing rules are pure ([`crate::permission::narrow`]); this module holds the
//! tree of sub-agents and runs them.
//!
//! Each agent in the tree has a [`Frame`]: what it holds and the sub-agents it spawned. A sub-agent is an
//! [`Agent`] made from its parent's configuration with a narrowed policy, no instructions unless granted,
//! and its own five agent tools bound to its own frame, so a nested spawn is judged against the
//! sub-agent's grant and never its parent's. A run of a sub-agent has its own checklist and scratchpad
//! (each run does). Its conversation is kept for follow-ups.
//!
//! A sub-agent's tokens count towards the run that started it (its usage, and its budget, of which the
//! sub-agent is given what is left); it sees its parent's MCP tools, through the parent's connections,
//! narrowed by its tool and server lists; an interrupting `agent_steer` cuts the model request it has
//! in flight.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::run_state::RunState;
use super::{Agent, AgentBuilder, Budget, Inner, budget};
use crate::deferral::{Entry, Facts, SourceListing, ToolSource, Toolbox, Tooling, Unavailable};
use crate::error::{Error, ModelError, ToolError};
use crate::model::{Message, ModelReply, ModelRequest, TextSink, Usage};
use crate::permission::narrow::{
    self, AGENT_TOOLS, Admitted, Grant, KnownNames, MemoryGrant, RealDirs, SpawnTerms, ToolLists,
};
use crate::permission::{Filters, Level, Policy};
use crate::tools::{Tool, ToolContext, ToolRegistry, ToolSpec};

/// Sub-agent settings, as plain data (`AgentOptions::subagents`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubagentConfig {
    /// Levels of sub-agents below this agent (default 3; 1: sub-agents cannot spawn; 0: no agent tools).
    /// Real nesting is also bounded by [`narrow::ABSOLUTE_MAX_DEPTH`].
    #[serde(default = "default_depth")]
    pub max_depth: u32,
    /// Whether this agent holds a memory store it may grant read access to.
    #[serde(default)]
    pub memory: MemoryGrant,
}

fn default_depth() -> u32 {
    narrow::DEFAULT_MAX_DEPTH
}

impl Default for SubagentConfig {
    fn default() -> Self {
        SubagentConfig { max_depth: narrow::DEFAULT_MAX_DEPTH, memory: MemoryGrant::None }
    }
}

impl AgentBuilder {
    /// Gives the agent the five agent tools (SPEC §7). `max_depth` 0 gives it none of them.
    pub fn subagents(mut self, config: SubagentConfig) -> Self {
        self.subagents = Some(config);
        self
    }
}

/// One agent of the tree: what it holds and the sub-agents it spawned.
pub(crate) struct Frame {
    /// This agent's id ("root" for the agent the host built).
    id: String,
    /// The agent this frame belongs to (weak: the agent owns its tools, which own the frame).
    agent: Mutex<Weak<Inner>>,
    /// What this agent holds now. The root's comes from its policy when the agent is built.
    grant: Mutex<Option<Grant>>,
    /// The host's memory setting, for the root's grant.
    memory: MemoryGrant,
    /// `max_depth` as configured, for the root's grant.
    max_depth: u32,
    children: Arc<Mutex<BTreeMap<String, Arc<Child>>>>,
    spawned: Arc<AtomicU64>,
    /// The names of the configured profiles, which `agent_spawn`'s `profile` lists.
    profiles: Arc<[String]>,
}

impl std::fmt::Debug for Frame {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Frame").field("id", &self.id).finish()
    }
}

/// A sub-agent as its parent keeps it.
struct Child {
    id: String,
    /// The id of the agent that spawned it ("root" for the agent the host built).
    parent: String,
    /// The spawn's prompt, first line: its session's title.
    title: String,
    /// The spawn's terms, replayed on every follow-up.
    terms: SpawnTerms,
    /// Where a sub-agent spawned with no scope of its own was spawned.
    spawned_in: Option<PathBuf>,
    prompt_cwd: Mutex<PathBuf>,
    held: Mutex<Grant>,
    agent: Mutex<Agent>,
    frame: Arc<Frame>,
    messages: Mutex<Vec<Message>>,
    turns: AtomicU32,
    last_active: Mutex<String>,
    /// A run (spawn or follow-up) is under way.
    busy: AtomicBool,
    inbox: Mutex<Inbox>,
    /// Woken by an interrupting steer, which the run's model request is raced against.
    steered: tokio::sync::Notify,
}

/// Messages steered to a sub-agent and not yet read.
#[derive(Default)]
struct Inbox {
    messages: Vec<String>,
    /// One of them was sent with `interrupt: true`: the model request under way is cut for it.
    interrupt: bool,
}

impl Inbox {
    /// Every waiting message, oldest first; the inbox is left empty.
    fn take(&mut self) -> Vec<String> {
        self.interrupt = false;
        std::mem::take(&mut self.messages)
    }
}

tokio::task_local! {
    /// The sub-agent whose run this code is part of.
    static RUNNING: Arc<Running>;
}

struct Running {
    child: Arc<Child>,
    /// The conversation a follow-up continues, taken once by the run that starts.
    history: Mutex<Option<Vec<Message>>>,
    /// The run that started this one (spawn or follow-up), which its tokens count towards.
    parent: Option<Arc<RunState>>,
    /// The sub-agent's model turns before this run, and this run's turn now: where its calls are
    /// recorded in the session's call journal.
    turns_before: u32,
    turn: AtomicU32,
}

tokio::task_local! {
    /// The conversation a session run continues (crate::session), taken once by the run that starts.
    static PRIOR: Mutex<Option<(Vec<Message>, bool)>>;
}

/// Runs `fut` (an agent's run) continuing `history`; with `resume`, the run's input is not added (a
/// parked run goes on from the tool results it waited for).
pub(crate) async fn with_history<F: std::future::Future>(history: Vec<Message>, resume: bool, fut: F) -> F::Output {
    PRIOR.scope(Mutex::new(Some((history, resume))), fut).await
}

/// Whether this code runs inside a sub-agent (which never parks: its parent waits on it).
pub(crate) fn in_subagent() -> bool {
    RUNNING.try_with(|_| ()).is_ok()
}

/// The id of the sub-agent this code runs in, if any.
pub(crate) fn current_id() -> Option<String> {
    RUNNING.try_with(|r| r.child.id.clone()).ok()
}

/// In a sub-agent started by a background call, each of its rounds is the task's progress note (and
/// heartbeat): a long sub-agent run is not failed as dead.
pub(crate) fn round_progress(turn: u32) {
    let _ = RUNNING.try_with(|r| r.turn.store(turn, Ordering::SeqCst));
    let Some(task) = super::background::TaskHandle::current() else { return };
    if let Ok(id) = RUNNING.try_with(|r| r.child.id.clone()) {
        task.progress(format!("sub-agent {id}: round {turn} answered"));
    }
}

/// In a sub-agent, where its calls go in the session's call journal: its id and its model turn (over all
/// its runs), so no two of its calls share a key with each other or with its parent's.
pub(crate) fn journal_position() -> Option<String> {
    RUNNING
        .try_with(|r| {
            let turn = r.turns_before.saturating_add(r.turn.load(Ordering::SeqCst));
            format!("{}/{turn}", r.child.id)
        })
        .ok()
}

impl Agent {
    /// Runs a call that waited for an answer, with the answer given now, and words its result the way
    /// the loop words a live one (agent/mod.rs `dispatch`).
    pub(crate) async fn answer_parked(
        &self,
        call_id: &str,
        name: &str,
        arguments: Value,
        answer: crate::permission::ApprovalDecision,
    ) -> (String, bool, Vec<crate::content::Part>) {
        let Some(tool) = self.lookup_tool(name) else {
            return (format!("Error: there is no tool named '{name}'"), true, Vec::new());
        };
        match super::gate::answered(&self.inner.session, tool.as_ref(), call_id, arguments, answer, || {}).await {
            super::gate::GateOutcome::Refused { message } => (format!("Error: {message}"), true, Vec::new()),
            super::gate::GateOutcome::Denied { reason } => {
                (format!("Error: the call to tool '{name}' was denied: {reason}"), true, Vec::new())
            }
            super::gate::GateOutcome::Parked { .. } => {
                (format!("Error: tool '{name}' needs an answer now"), true, Vec::new())
            }
            // As a live call's: a result of parts is stored as parts (its images sent as images).
            super::gate::GateOutcome::Ran { result, .. } => {
                let (text, is_error, parts) = super::ran_result(name, result);
                (text, is_error, parts.unwrap_or_default())
            }
        }
    }

    /// The model and instructions, for the session's summariser and gauge.
    pub(crate) fn model_and_instructions(&self) -> (Arc<dyn crate::model::Model>, Option<String>) {
        (self.inner.model.clone(), self.inner.instructions.clone())
    }
}

/// A sub-agent as a run's state keeps it (SPEC §8b): its spawn terms, what it holds, its conversation,
/// and the sub-agents it spawned, so a resumed run (in any process) can follow it up, steer, list and
/// delete it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SubagentRecord {
    /// Its id among its siblings.
    pub id: String,
    /// The `agent_spawn` call's terms, replayed (and re-admitted) on every follow-up.
    pub terms: SpawnTerms,
    /// What it holds now.
    pub held: Grant,
    /// Where a sub-agent spawned with no scope of its own was spawned.
    #[serde(default)]
    pub spawned_in: Option<PathBuf>,
    /// Its conversation, the next follow-up's history.
    #[serde(default)]
    pub messages: Vec<Message>,
    #[serde(default)]
    /// Turns it has run.
    pub turns: u32,
    #[serde(default)]
    /// When it last ran (RFC 3339).
    pub last_active: String,
    /// Steering messages left for it and not yet read.
    #[serde(default)]
    pub inbox: Vec<String>,
    /// How many sub-agents it has spawned (its next id follows).
    #[serde(default)]
    pub spawned: u64,
    /// The sub-agents it spawned.
    #[serde(default)]
    pub children: Vec<SubagentRecord>,
    /// Its session's title: the spawn's prompt, first line.
    #[serde(default)]
    pub title: String,
}

/// The record of one sub-agent, without its sub-agents (`deep`: with them).
fn record_of(c: &Child, deep: bool) -> SubagentRecord {
    SubagentRecord {
        id: c.id.clone(),
        terms: c.terms.clone(),
        held: lock(&c.held).clone(),
        spawned_in: c.spawned_in.clone(),
        messages: lock(&c.messages).clone(),
        turns: c.turns.load(Ordering::SeqCst),
        last_active: lock(&c.last_active).clone(),
        inbox: lock(&c.inbox).messages.clone(),
        spawned: c.frame.spawned.load(Ordering::SeqCst),
        children: if deep { tree_of(&c.frame) } else { Vec::new() },
        title: c.title.clone(),
    }
}

/// The sub-agent tree below `frame`, and how many it spawned: what a run's state keeps.
fn tree_of(frame: &Frame) -> Vec<SubagentRecord> {
    let children: Vec<Arc<Child>> = lock(&frame.children).values().cloned().collect();
    children.iter().map(|c| record_of(c, true)).collect()
}

impl Agent {
    /// This agent's sub-agent tree and how many sub-agents it has spawned (none without the agent tools).
    pub(crate) fn subagent_tree(&self) -> (Vec<SubagentRecord>, u64) {
        match &self.inner.subagents {
            Some(frame) => (tree_of(frame), frame.spawned.load(Ordering::SeqCst)),
            None => (Vec::new(), 0),
        }
    }

    /// Restores a sub-agent tree a run's state kept: each sub-agent this agent does not have yet is made
    /// again from its record (its agent from what it held), so it can be followed up, steered, listed
    /// and deleted as before. One that cannot be made again is left out, with a warning.
    pub(crate) fn restore_subagents(&self, tree: &[SubagentRecord], spawned: u64) {
        let Some(frame) = &self.inner.subagents else { return };
        frame.spawned.fetch_max(spawned, Ordering::SeqCst);
        restore_into(self, frame, tree);
    }
}

fn restore_into(parent: &Agent, frame: &Arc<Frame>, tree: &[SubagentRecord]) {
    for r in tree {
        if lock(&frame.children).contains_key(&r.id) {
            continue;
        }
        let own = Arc::new(frame.child(r.id.clone()));
        own.spawned.store(r.spawned, Ordering::SeqCst);
        let agent = match child_agent(parent, &r.held, &own, r.terms.profile.as_deref()) {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(subagent = %r.id, error = %e, "a kept sub-agent could not be made again");
                continue;
            }
        };
        restore_into(&agent, &own, &r.children);
        let child = Arc::new(Child {
            id: r.id.clone(),
            parent: frame.id.clone(),
            title: r.title.clone(),
            terms: r.terms.clone(),
            spawned_in: r.spawned_in.clone(),
            prompt_cwd: Mutex::new(r.held.scope.working_dir.clone()),
            held: Mutex::new(r.held.clone()),
            agent: Mutex::new(agent),
            frame: own,
            messages: Mutex::new(r.messages.clone()),
            turns: AtomicU32::new(r.turns),
            last_active: Mutex::new(r.last_active.clone()),
            busy: AtomicBool::new(false),
            inbox: Mutex::new(Inbox { messages: r.inbox.clone(), interrupt: false }),
            steered: tokio::sync::Notify::new(),
        });
        lock(&frame.children).insert(r.id.clone(), child);
    }
}

/// The messages a run opens with: the conversation a follow-up continues, then the input.
pub(crate) fn opening(input: String) -> Vec<Message> {
    let (mut messages, resume) = RUNNING
        .try_with(|r| r.history.lock().unwrap_or_else(|p| p.into_inner()).take())
        .ok()
        .flatten()
        .map(|h| (h, false))
        .or_else(|| PRIOR.try_with(|p| lock(p).take()).ok().flatten())
        .unwrap_or_default();
    if !resume {
        messages.push(Message::user(input));
    }
    messages
}

/// The messages a run given a list of messages opens with: in a session run (crate::session), the
/// session's live window, then the new user messages (text or parts) it adds; elsewhere the list itself.
pub(crate) fn opening_messages(input: Vec<Message>) -> Vec<Message> {
    match PRIOR.try_with(|p| lock(p).take()).ok().flatten() {
        Some((mut messages, resume)) => {
            if !resume {
                messages.extend(input);
            }
            messages
        }
        None => input,
    }
}

/// At a round boundary: the steering messages waiting in the inbox of the sub-agent this run is, as
/// user turns. Whether there were any.
pub(crate) fn steer_into(messages: &mut Vec<Message>) -> bool {
    let waiting = RUNNING.try_with(|r| lock(&r.child.inbox).take()).unwrap_or_default();
    let any = !waiting.is_empty();
    messages.extend(waiting.into_iter().map(Message::user));
    any
}

/// What the sub-agents of one run used (kept in the run's state).
#[derive(Debug, Default)]
pub(crate) struct Spend {
    /// Tokens of sub-agent runs this run started, not yet added to its usage.
    pending: Mutex<Usage>,
    /// The run's usage as last accounted, for the budget a sub-agent it starts is given.
    pub(crate) spent: Mutex<Usage>,
}

/// Adds `own` (the tokens of this run's latest model request) and the tokens its sub-agents used since
/// the last call to `usage`. A sub-agent hands the same tokens on to the run that started it as it
/// goes, so a run's usage and budget cover every sub-agent run it made, a failed one too. Whether any
/// sub-agent tokens were added.
pub(crate) fn account(state: &RunState, usage: &mut Usage, own: &Usage) -> bool {
    let children = std::mem::take(&mut *lock(&state.subagents.pending));
    let any = children != Usage::default();
    usage.add(own);
    usage.add(&children);
    *lock(&state.subagents.spent) = *usage;
    let mut delta = *own;
    delta.add(&children);
    if delta != Usage::default() {
        let _ = RUNNING.try_with(|r| {
            if let Some(parent) = &r.parent {
                lock(&parent.subagents.pending).add(&delta);
            }
        });
    }
    any
}

/// The budget a sub-agent run gets: what is left of its parent's run's budget.
fn remaining_budget(parent: &Inner) -> Budget {
    let b = &parent.budget;
    if b.max_tokens.is_none() && b.max_cost.is_none() {
        return b.clone();
    }
    let spent = RunState::current().map(|s| *lock(&s.subagents.spent)).unwrap_or_default();
    let cost = budget::cost_of(&parent.prices, parent.model.name(), &spent).unwrap_or(0.0);
    Budget {
        max_tokens: b.max_tokens.map(|m| m.saturating_sub(budget::budget_tokens(&spent))),
        max_cost: b.max_cost.map(|m| (m - cost).max(0.0)),
    }
}

impl Agent {
    /// One model request of the loop. In a sub-agent it is raced against an interrupting steer
    /// (SPEC §7): the request is dropped, the text it had streamed kept as the assistant's (partial)
    /// message, the steered messages follow, and the request goes again. Elsewhere it is the plain
    /// request. Either way the request's tool images are held to their budget first
    /// ([`crate::content::budget_request`]).
    pub(crate) async fn model_request(
        &self,
        request: &mut ModelRequest,
        sink: Option<&TextSink<'_>>,
    ) -> Result<ModelReply, ModelError> {
        // However many tool results carry images by now, the request takes no more than its budget
        // (the newest kept): a hostile server's flood cannot break every later request of the run.
        crate::content::budget_request(&mut request.messages);
        let Ok(child) = RUNNING.try_with(|r| r.child.clone()) else {
            return self.inner.model.respond_with_items(request, sink).await;
        };
        loop {
            let kept = Mutex::new(String::new());
            let keep = |t: &str| {
                lock(&kept).push_str(t);
                if let Some(s) = sink {
                    s(t);
                }
            };
            let keep: &TextSink<'_> = &keep;
            let reply = self.inner.model.respond_with_items(request, Some(keep));
            if let Some(outcome) = unless_interrupted(&child, reply).await {
                return outcome;
            }
            // Cut: a model that streams has given part of its answer, which is kept; one that does not
            // has given nothing, and its reply is dropped whole.
            let partial = std::mem::take(&mut *lock(&kept));
            if !partial.is_empty() {
                request.messages.push(Message::Assistant { content: Some(partial), tool_calls: Vec::new() });
            }
            let waiting = lock(&child.inbox).take();
            request.messages.extend(waiting.into_iter().map(Message::user));
        }
    }
}

/// Runs `request` unless an interrupting steer reaches `child` first (then `None`: it was dropped).
async fn unless_interrupted<F: std::future::Future>(child: &Child, request: F) -> Option<F::Output> {
    let mut request = std::pin::pin!(request);
    loop {
        let notified = child.steered.notified();
        let mut notified = std::pin::pin!(notified);
        // Registered before the inbox is looked at, so a steer in between still wakes it.
        notified.as_mut().enable();
        if lock(&child.inbox).interrupt {
            return None;
        }
        tokio::select! {
            biased;
            out = &mut request => return Some(out),
            () = &mut notified => {}
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Now, as the report lines show it (UTC, RFC 3339, seconds).
fn timestamp() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    timestamp_at(i64::try_from(secs).unwrap_or(0))
}

/// `secs` since the epoch as an RFC 3339 UTC time, to the second.
pub(crate) fn timestamp_at(secs: i64) -> String {
    let secs = u64::try_from(secs).unwrap_or(0);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

impl Frame {
    fn new(id: String, config: &SubagentConfig, profiles: Arc<[String]>) -> Frame {
        Frame {
            id,
            agent: Mutex::new(Weak::new()),
            grant: Mutex::new(None),
            memory: config.memory,
            max_depth: config.max_depth.min(narrow::ABSOLUTE_MAX_DEPTH),
            children: Arc::default(),
            spawned: Arc::default(),
            profiles,
        }
    }

    /// The frame of a sub-agent this agent spawns: the same profiles to choose from.
    fn child(&self, id: String) -> Frame {
        Frame::new(id, &SubagentConfig::default(), self.profiles.clone())
    }

    fn agent(&self) -> Result<Agent, ToolError> {
        lock(&self.agent)
            .upgrade()
            .map(|inner| Agent { inner })
            .ok_or_else(|| ToolError::Failed("the agent that owns this sub-agent tool is gone".into()))
    }

    /// What this agent holds now; the root's from its policy.
    fn grant(&self) -> Result<Grant, ToolError> {
        if let Some(g) = lock(&self.grant).clone() {
            return Ok(g);
        }
        let agent = self.agent()?;
        Ok(root_grant(&agent.inner, self.max_depth, self.memory))
    }

    /// The tools and MCP servers this agent has: registered, and its MCP servers' as last listed.
    fn known(&self) -> Result<KnownNames, ToolError> {
        let agent = self.agent()?;
        let toolbox = agent.inner.tooling.toolbox();
        let mut tools: std::collections::BTreeSet<String> =
            agent.inner.tools.iter().map(|t| t.spec().name.clone()).collect();
        tools.extend(toolbox.entries().iter().chain(toolbox.hidden()).map(|e| e.tool.spec().name.clone()));
        let mut servers: std::collections::BTreeSet<String> =
            tools.iter().filter_map(|n| narrow::server_of(n).map(str::to_string)).collect();
        servers.extend(toolbox.unavailable().iter().map(|u| u.group.clone()));
        Ok(KnownNames { tools, servers })
    }

    /// A child of this session by its full id or a prefix unique among them.
    fn find(&self, given: &str) -> Result<Arc<Child>, ToolError> {
        let children = lock(&self.children);
        if let Some(c) = children.get(given) {
            return Ok(c.clone());
        }
        let matches: Vec<&Arc<Child>> =
            children.values().filter(|c| !given.is_empty() && c.id.starts_with(given)).collect();
        match matches.as_slice() {
            [one] => Ok((*one).clone()),
            [] => Err(ToolError::Failed(format!("'{given}' is not a sub-agent of this session"))),
            many => Err(ToolError::Failed(format!(
                "'{given}' is a prefix of more than one sub-agent: {}",
                many.iter().map(|c| c.id.as_str()).collect::<Vec<_>>().join(", ")
            ))),
        }
    }

    fn next_id(&self) -> String {
        let n = self.spawned.fetch_add(1, Ordering::SeqCst) + 1;
        let digest = Sha256::digest(format!("{}/{n}", self.id).as_bytes());
        digest.iter().take(6).map(|b| format!("{b:02x}")).collect()
    }
}

/// The root's grant: its policy, scope and network; its filters as the first tool lists.
fn root_grant(inner: &Inner, max_depth: u32, memory: MemoryGrant) -> Grant {
    let policy = &inner.session.policy;
    Grant {
        level: policy.level,
        scope: (*inner.session.scope).clone(),
        network: policy.network,
        tools: ToolLists {
            allow_tools: policy.filters.allow.clone(),
            deny_tools: policy.filters.block.clone(),
            allow_servers: None,
            deny_servers: Default::default(),
        },
        depth_left: max_depth,
        depth: 0,
        // An agent with a memory store holds read access to it, to grant; the host's flag adds nothing
        // to an agent without one but is kept as it was.
        memory: if inner.memory.is_some() { memory.max(MemoryGrant::Read) } else { memory },
        instructions: inner.instructions.clone(),
    }
}

/// Registers the agent tools for a new root agent (none when `max_depth` is 0); the frame is bound to
/// the agent once it exists ([`bind`]).
pub(crate) fn install(
    tools: &mut ToolRegistry,
    config: Option<&SubagentConfig>,
    policy: Option<&Policy>,
    profiles: Vec<String>,
) -> Result<Option<Arc<Frame>>, Error> {
    let Some(config) = config else { return Ok(None) };
    // All five go together: an agent that cannot delegate has no sub-agents for the other four to act on.
    if config.max_depth == 0 || policy.is_some_and(|p| p.filters.is_blocked("agent_spawn")) {
        return Ok(None);
    }
    let frame = Arc::new(Frame::new("root".into(), config, profiles.into()));
    for t in agent_tools(&frame) {
        tools.register(t)?;
    }
    Ok(Some(frame))
}

/// Points the frame at the agent it belongs to.
pub(crate) fn bind(frame: Option<Arc<Frame>>, agent: &Agent) {
    if let Some(f) = frame {
        *lock(&f.agent) = Arc::downgrade(&agent.inner);
    }
}

fn agent_tools(frame: &Arc<Frame>) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(SpawnTool { spec: spawn_spec(&frame.profiles), frame: frame.clone() }),
        Arc::new(ListTool { spec: list_spec(), frame: frame.clone() }),
        Arc::new(FollowupTool { spec: followup_spec(), frame: frame.clone() }),
        Arc::new(SteerTool { spec: steer_spec(), frame: frame.clone() }),
        Arc::new(DeleteTool { spec: delete_spec(), frame: frame.clone() }),
    ]
}

impl Agent {
    /// The same agent under another policy, keeping its sub-agents: a follow-up then re-admits a
    /// sub-agent against this policy's reach (a level dropped to narrows it; a directory no longer
    /// held refuses it). Its MCP servers are this agent's, through the same connections, judged by the
    /// new policy.
    pub fn with_policy(&self, policy: Policy) -> Result<Agent, Error> {
        self.with_policy_in(policy, false)
    }

    /// [`Agent::with_policy`], for a delegation (agent/named.rs) when `fresh`: its agent tools see only
    /// the sub-agents spawned under this policy, never one an earlier, wider run of the agent spawned
    /// (which would still act on its own grant). Ids stay unique across both.
    pub(crate) fn with_policy_in(&self, policy: Policy, fresh: bool) -> Result<Agent, Error> {
        let mut session = super::gate::Session::new(policy).map_err(Error::Config)?;
        session.credentials = self.inner.session.credentials.clone();
        let old = self.frame();
        let frame = old.as_ref().map(|f| {
            Arc::new(Frame {
                id: f.id.clone(),
                agent: Mutex::new(Weak::new()),
                grant: Mutex::new(None),
                memory: f.memory,
                max_depth: f.max_depth,
                children: if fresh { Arc::default() } else { f.children.clone() },
                spawned: f.spawned.clone(),
                profiles: f.profiles.clone(),
            })
        });
        let tools = rebind(&self.inner.tools, frame.as_ref())?;
        // Its MCP tools are this agent's, through this agent's connections (as a sub-agent's are, here
        // with nothing narrowed but the policy); this agent's model already maps their names to the wire.
        let facts = Facts::of(&session.policy);
        let source = Inherited::of(&self.inner, &ToolLists::default()).map(|s| Arc::new(s) as Arc<dyn ToolSource>);
        let tooling = Arc::new(
            Tooling::new(tools.clone(), self.inner.tooling.config().clone(), source, facts)
                .with_native_search(self.inner.model.native_tool_search()),
        );
        let agent = Agent {
            inner: Arc::new(Inner { session, tools, subagents: frame.clone(), tooling, ..(*self.inner).clone() }),
        };
        bind(frame, &agent);
        Ok(agent)
    }

    fn frame(&self) -> Option<Arc<Frame>> {
        self.inner.subagents.clone()
    }
}

/// The registry with the five agent tools replaced by ones bound to `frame` (or removed when `None`).
fn rebind(tools: &ToolRegistry, frame: Option<&Arc<Frame>>) -> Result<ToolRegistry, Error> {
    let mut out = ToolRegistry::new();
    let mut fresh: BTreeMap<String, Arc<dyn Tool>> = BTreeMap::new();
    if let Some(f) = frame {
        for t in agent_tools(f) {
            fresh.insert(t.spec().name.clone(), t);
        }
    }
    for t in tools.iter() {
        let name = &t.spec().name;
        if AGENT_TOOLS.contains(&name.as_str()) {
            if let Some(new) = fresh.remove(name) {
                out.register(new)?;
            }
        } else {
            out.register(t.clone())?;
        }
    }
    Ok(out)
}

/// A sub-agent made from its parent: the parent's model (or the model of the profile it was spawned
/// on), tools and loop settings; the grant's policy; the parent's MCP tools the grant holds; what is
/// left of the parent's run's budget; instructions only when granted; its agent tools bound to its own
/// frame.
fn child_agent(parent: &Agent, grant: &Grant, frame: &Arc<Frame>, profile: Option<&str>) -> Result<Agent, ToolError> {
    let p = &parent.inner;
    let model = match profile {
        None => p.model.clone(),
        Some(name) => super::named::profile_model(p, name)?,
    };
    // The registered tools it does not hold are blocked by name; the MCP tools, whose names change at
    // run time, are narrowed where they are listed ([`Inherited`]).
    let mut block: std::collections::BTreeSet<String> =
        p.tools.iter().map(|t| t.spec().name.clone()).filter(|n| !grant.holds_tool(n)).collect();
    if grant.depth_left == 0 {
        // A sub-agent that cannot spawn has no sub-agents for the other four to act on.
        block.extend(AGENT_TOOLS.iter().map(|n| n.to_string()));
    }
    let policy = Policy {
        level: grant.level,
        approvals: p.session.policy.approvals.clone(),
        filters: Filters { allow: None, block, overrides: p.session.policy.filters.overrides.clone() },
        scope: Some(grant.scope.clone()),
        network: grant.network,
        // Handed down unchanged: a spawn cannot name addresses, so it never widens the parent's.
        allow_local_addresses: p.session.policy.allow_local_addresses.clone(),
    };
    let session = super::gate::Session {
        policy,
        scope: Arc::new(grant.scope.clone()),
        credentials: p.session.credentials.clone(),
    };
    let tools =
        rebind(&p.tools, (grant.depth_left > 0).then_some(frame)).map_err(|e| ToolError::Failed(e.to_string()))?;
    // Memory is granted, never inherited: read-only recall of the parent's store, or nothing.
    let (tools, memory) = crate::memory::narrowed(tools, p.memory.as_ref(), grant.memory)
        .map_err(|e| ToolError::Failed(e.to_string()))?;
    // Skills: the reading tools over the parent's directories, never the three that write.
    let (tools, skills) =
        crate::skills::narrowed(tools, p.skills.as_ref()).map_err(|e| ToolError::Failed(e.to_string()))?;
    // Its own tooling over its own registry and filters, with the parent's MCP tools handed down
    // through the parent's connections. The parent's model already maps every name the parent has
    // (a superset of the sub-agent's) to the wire.
    let facts = Facts::of(&session.policy);
    let source = Inherited::of(p, &grant.tools).map(|s| Arc::new(s) as Arc<dyn ToolSource>);
    let tooling = Arc::new(
        Tooling::new(tools.clone(), p.tooling.config().clone(), source, facts)
            .with_native_search(model.native_tool_search()),
    );
    let agent = Agent {
        inner: Arc::new(Inner {
            session,
            tools,
            instructions: grant.instructions.clone(),
            subagents: Some(frame.clone()),
            tooling,
            memory,
            skills,
            model,
            budget: remaining_budget(p),
            // A sub-agent reports to its parent in text; the parent's answer is the typed one.
            output: None,
            // Hooks hold for every call in the tree; guardrails check the root run's input and answer.
            hooks: p.hooks.for_subagent(),
            ..(**p).clone()
        }),
    };
    *lock(&frame.agent) = Arc::downgrade(&agent.inner);
    *lock(&frame.grant) = Some(grant.clone());
    Ok(agent)
}

/// The parent's MCP tools as a sub-agent sees them: the parent's current listing (the MCP servers'
/// tools, or, for a nested sub-agent, those its parent was handed) narrowed by the sub-agent's tool and
/// server lists. Calls go through the parent's connections; a server's list change reaches the
/// sub-agent before its next request. The resource and prompt meta-tools name any server in their
/// arguments, so a sub-agent whose servers were narrowed does not get them.
struct Inherited {
    parent: Arc<Tooling>,
    /// The parent's registered tools, which the sub-agent has through its own registry.
    registered: std::collections::BTreeSet<String>,
    lists: narrow::ToolLists,
    /// The snapshot of the parent's listing last seen, to tell whether it changed.
    seen: Mutex<Option<Arc<Toolbox>>>,
}

impl Inherited {
    /// `None` when the parent has no MCP tools at all (no server configured, none handed down).
    fn of(parent: &Inner, lists: &narrow::ToolLists) -> Option<Inherited> {
        let registered: std::collections::BTreeSet<String> =
            parent.tools.iter().map(|t| t.spec().name.clone()).collect();
        let toolbox = parent.tooling.toolbox();
        let dynamic =
            toolbox.entries().iter().chain(toolbox.hidden()).any(|e| !registered.contains(&e.tool.spec().name))
                || !toolbox.unavailable().is_empty();
        dynamic.then(|| Inherited {
            parent: parent.tooling.clone(),
            registered,
            lists: lists.clone(),
            seen: Mutex::new(Some(toolbox)),
        })
    }

    fn server_held(&self, server: &str) -> bool {
        !self.lists.deny_servers.contains(server)
            && self.lists.allow_servers.as_ref().is_none_or(|a| a.contains(server))
    }

    fn holds(&self, name: &str) -> bool {
        if crate::mcp::meta::NAMES.contains(&name)
            && (self.lists.allow_servers.is_some() || !self.lists.deny_servers.is_empty())
        {
            return false;
        }
        self.lists.passes(name)
    }
}

#[async_trait]
impl ToolSource for Inherited {
    async fn refresh(&self) -> bool {
        self.parent.refresh().await;
        let now = self.parent.toolbox();
        let mut seen = lock(&self.seen);
        let changed = seen.as_ref().is_none_or(|s| !Arc::ptr_eq(s, &now));
        *seen = Some(now);
        changed
    }

    fn listing(&self) -> SourceListing {
        let toolbox = self.parent.toolbox();
        let keep = |e: &&Entry| {
            let name = &e.tool.spec().name;
            !self.registered.contains(name) && self.holds(name)
        };
        SourceListing {
            entries: toolbox.entries().iter().filter(keep).cloned().collect(),
            hidden: toolbox.hidden().iter().filter(keep).cloned().collect(),
            unavailable: toolbox
                .unavailable()
                .iter()
                .filter(|u| self.server_held(&u.group))
                .map(|u| Unavailable {
                    group: u.group.clone(),
                    reason: u.reason.clone(),
                    names: u.names.iter().filter(|n| self.lists.passes(n)).cloned().collect(),
                })
                .collect(),
        }
    }
}

/// Runs the sub-agent on `input`, continuing `history`, and keeps the conversation.
async fn run_child(child: Arc<Child>, input: String, history: Vec<Message>) -> Result<String, ToolError> {
    let agent = lock(&child.agent).clone();
    // Called in the parent's run (its agent_spawn or agent_followup), whose usage this run adds to.
    let parent = RunState::current();
    let turns_before = child.turns.load(Ordering::SeqCst);
    let running = Arc::new(Running {
        child: child.clone(),
        history: Mutex::new(Some(history)),
        parent,
        turns_before,
        turn: AtomicU32::new(0),
    });
    let outcome = RUNNING.scope(running, agent.run(input)).await;
    *lock(&child.last_active) = timestamp();
    child.busy.store(false, Ordering::SeqCst);
    match outcome {
        Ok(result) => {
            child.turns.fetch_add(result.turns, Ordering::SeqCst);
            *lock(&child.messages) = result.messages;
            // In a session, the sub-agent's conversation and terms are its own session in the store.
            crate::session::keep_subagent(&child.parent, record_of(&child, false)).await;
            Ok(result.output)
        }
        Err(e) => Err(ToolError::Failed(format!("sub-agent {} failed: {e}", child.id))),
    }
}

/// Runs a named agent a caller delegated to (agent/named.rs) as a sub-agent run: its tokens count
/// towards the caller's run, it never parks (its caller waits on it), and in a background call its
/// rounds are the task's progress. It is not kept: a delegation is one report.
pub(crate) async fn run_delegated(name: &str, agent: Agent, prompt: String) -> Result<super::RunResult, Error> {
    let id = format!("{name}:{}", DELEGATIONS.fetch_add(1, Ordering::SeqCst) + 1);
    let frame = Arc::new(Frame::new(id.clone(), &SubagentConfig::default(), Arc::from(Vec::new())));
    let child = Arc::new(Child {
        id,
        parent: current_id().unwrap_or_else(|| "root".into()),
        title: title_of(&prompt),
        terms: SpawnTerms::default(),
        spawned_in: None,
        prompt_cwd: Mutex::new(agent.inner.session.scope.working_dir.clone()),
        held: Mutex::new(root_grant(&agent.inner, 0, MemoryGrant::None)),
        agent: Mutex::new(agent.clone()),
        frame,
        messages: Mutex::default(),
        turns: AtomicU32::new(0),
        last_active: Mutex::new(timestamp()),
        busy: AtomicBool::new(true),
        inbox: Mutex::default(),
        steered: tokio::sync::Notify::new(),
    });
    let running = Arc::new(Running {
        child,
        history: Mutex::new(Some(Vec::new())),
        parent: RunState::current(),
        turns_before: 0,
        turn: AtomicU32::new(0),
    });
    RUNNING.scope(running, agent.run(prompt)).await
}

/// Delegations made in this process, for their journal ids.
static DELEGATIONS: AtomicU64 = AtomicU64::new(0);

/// A session title from a prompt: its first non-blank line, cut to 80 characters.
pub(crate) fn title_of(prompt: &str) -> String {
    let line = prompt.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or_default();
    let cut: String = line.chars().take(80).collect();
    if cut.len() < line.len() { format!("{cut}…") } else { cut }
}

fn report(id: &str, admitted: &Admitted, profile: Option<&str>, body: &str) -> String {
    let mut out = narrow::header(id, &admitted.grant);
    if let Some(p) = profile {
        out.push_str(&format!("Profile: {p}\n"));
    }
    for w in &admitted.warnings {
        out.push_str(&format!("Warning: {w}\n"));
    }
    out.push('\n');
    out.push_str(body);
    out
}

fn string_arg(args: &Value, key: &str) -> Result<String, ToolError> {
    match args.get(key) {
        Some(Value::String(s)) if !s.trim().is_empty() => Ok(s.clone()),
        _ => Err(ToolError::Failed(format!("'{key}' is required: a non-empty string"))),
    }
}

const DIR_ITEMS: &str = "string";

/// The five agent tools' specs, for the walk over every built-in's schema.
#[cfg(test)]
pub(crate) fn specs() -> Vec<ToolSpec> {
    vec![spawn_spec(&[]), list_spec(), followup_spec(), steer_spec(), delete_spec()]
}

/// `agent_spawn`'s spec; with profiles configured, its `profile` parameter lists their names.
fn spawn_spec(profiles: &[String]) -> ToolSpec {
    let list = |d: &str| json!({"type": "array", "items": {"type": DIR_ITEMS}, "description": d});
    let mut parameters = json!({
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "description": "The task, complete: the sub-agent starts with a clean slate."},
            "permission": {"type": "string", "enum": ["none", "read", "workspace", "unrestricted"], "description": "Its level; default yours."},
            "working_directory": {"type": "string", "description": "Where it works, relative to yours; naming it states its whole scope."},
            "additional_workspace_directories": list("More of its workspace (needs working_directory)."),
            "additional_readable_directories": list("Directories it may read, never write (needs working_directory)."),
            "network": {"type": "string", "enum": ["none", "remote", "unrestricted"], "description": "Default yours."},
            "allow_tools": list("Exactly the tools it sees."),
            "deny_tools": list("Tools withheld from it."),
            "allow_servers": list("The MCP servers it may see."),
            "deny_servers": list("MCP servers withheld from it."),
            "max_depth": {"type": "integer", "minimum": 1, "description": "How deep its subtree may nest (1: it cannot spawn)."},
            "memory": {"type": "string", "enum": ["none", "read"], "description": "Default none."},
            "instructions": {"type": "string", "enum": ["none", "inherit"], "description": "Default none."}
        },
        "required": ["prompt"]
    });
    if !profiles.is_empty() {
        parameters["properties"]["profile"] = json!({
            "type": "string",
            "enum": profiles,
            "description": "Run it on this configured profile (its model and settings), kept on every follow-up; \
                default your own. A profile never widens its level, scope, network or tools."
        });
    }
    ToolSpec::new(
        "agent_spawn",
        "Start a sub-agent on a delegated task; it returns one text report headed by its id and the scope it holds. \
         Several spawns in one turn run in parallel. A sub-agent can only be narrower than you: a wider request \
         is refused by name.",
        parameters,
    )
    .with_level(Level::Read)
}

fn list_spec() -> ToolSpec {
    ToolSpec::new(
        "agent_list",
        "The sub-agents this session spawned, one per line: <id>\\t<cwd>\\tturns=<n>\\tlast_active=<timestamp>.",
        json!({"type": "object", "properties": {}}),
    )
    .with_level(Level::Read)
}

fn followup_spec() -> ToolSpec {
    ToolSpec::new(
        "agent_followup",
        "Ask a sub-agent another question; it keeps its conversation. Its spawn's terms are replayed against \
         your reach now. Returns its new report.",
        json!({"type": "object", "properties": {
            "id": {"type": "string", "description": "Its id, or a prefix unique among your sub-agents."},
            "prompt": {"type": "string"}
        }, "required": ["id", "prompt"]}),
    )
    .with_level(Level::Read)
}

fn steer_spec() -> ToolSpec {
    ToolSpec::new(
        "agent_steer",
        "Put a message in a sub-agent's inbox and return at once: a running one reads it at its next round \
         boundary, a finished one at the start of its next follow-up.",
        json!({"type": "object", "properties": {
            "id": {"type": "string"},
            "message": {"type": "string"},
            "interrupt": {"type": "boolean", "description": "Cut the reply it is writing: it reads the message at once, inside the same turn (a tool it is running still finishes first)."}
        }, "required": ["id", "message"]}),
    )
    .with_level(Level::Read)
}

fn delete_spec() -> ToolSpec {
    ToolSpec::new(
        "agent_delete",
        "Discard a sub-agent: its conversation and the sub-agents it spawned. Nothing it wrote to disk is touched.",
        json!({"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]}),
    )
    .with_level(Level::Read)
}

/// The terms of a spawn call: everything but the prompt (and the loop's own parameters).
fn read_terms(args: &Value) -> Result<SpawnTerms, ToolError> {
    let mut obj = args.as_object().cloned().unwrap_or_default();
    obj.remove("prompt");
    obj.retain(|_, v| !v.is_null());
    serde_json::from_value(Value::Object(obj))
        .map_err(|e| ToolError::Failed(format!("the sub-agent was not started: {e}")))
}

struct SpawnTool {
    spec: ToolSpec,
    frame: Arc<Frame>,
}

#[async_trait]
impl Tool for SpawnTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _arguments: Value) -> Result<Value, ToolError> {
        Err(ToolError::Failed("agent_spawn runs only inside an agent's loop".into()))
    }

    async fn call_in(&self, arguments: Value, _ctx: &ToolContext) -> Result<Value, ToolError> {
        let prompt = string_arg(&arguments, "prompt")?;
        let terms = read_terms(&arguments)?;
        let parent = self.frame.agent()?;
        if let Some(name) = &terms.profile {
            // Refused before anything is admitted, naming the profile and those there are.
            super::named::profile_model(&parent.inner, name)?;
        }
        let grant = self.frame.grant()?;
        let admitted = narrow::admit(&grant, &terms, &self.frame.known()?, &RealDirs)
            .map_err(|r| ToolError::Failed(r.to_string()))?;
        let id = self.frame.next_id();
        let frame = Arc::new(self.frame.child(id.clone()));
        let agent = child_agent(&parent, &admitted.grant, &frame, terms.profile.as_deref())?;
        let child = Arc::new(Child {
            id: id.clone(),
            parent: self.frame.id.clone(),
            title: title_of(&prompt),
            spawned_in: (!admitted.stated_scope).then(|| admitted.grant.scope.working_dir.clone()),
            prompt_cwd: Mutex::new(admitted.grant.scope.working_dir.clone()),
            terms,
            held: Mutex::new(admitted.grant.clone()),
            agent: Mutex::new(agent),
            frame,
            messages: Mutex::default(),
            turns: AtomicU32::new(0),
            last_active: Mutex::new(timestamp()),
            busy: AtomicBool::new(true),
            inbox: Mutex::default(),
            steered: tokio::sync::Notify::new(),
        });
        // Registered before the sub-agent's first request, so a steer in the same turn finds it.
        lock(&self.frame.children).insert(id.clone(), child.clone());
        let profile = child.terms.profile.clone();
        let body = run_child(child, prompt, Vec::new()).await?;
        Ok(Value::String(report(&id, &admitted, profile.as_deref(), &body)))
    }
}

struct ListTool {
    spec: ToolSpec,
    frame: Arc<Frame>,
}

#[async_trait]
impl Tool for ListTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _arguments: Value) -> Result<Value, ToolError> {
        let children = lock(&self.frame.children);
        if children.is_empty() {
            return Ok(Value::String("No sub-agents.".into()));
        }
        let lines: Vec<String> = children
            .values()
            .map(|c| {
                format!(
                    "{}\t{}\tturns={}\tlast_active={}",
                    c.id,
                    lock(&c.prompt_cwd).display(),
                    c.turns.load(Ordering::SeqCst),
                    lock(&c.last_active)
                )
            })
            .collect();
        Ok(Value::String(lines.join("\n")))
    }
}

struct FollowupTool {
    spec: ToolSpec,
    frame: Arc<Frame>,
}

#[async_trait]
impl Tool for FollowupTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        let child = self.frame.find(&string_arg(&arguments, "id")?)?;
        let prompt = string_arg(&arguments, "prompt")?;
        if child.busy.swap(true, Ordering::SeqCst) {
            return Err(ToolError::Failed(format!(
                "sub-agent {} is still running: reach it with agent_steer, or follow up once it has finished",
                child.id
            )));
        }
        let readmitted = (|| {
            let parent = self.frame.agent()?;
            let grant = self.frame.grant()?;
            let held = lock(&child.held).clone();
            let admitted = narrow::readmit(
                &grant,
                &child.terms,
                &held,
                child.spawned_in.as_deref(),
                &self.frame.known()?,
                &RealDirs,
            )
            .map_err(|r| {
                ToolError::Failed(r.to_string().replace("the sub-agent was not started", "the follow-up was refused"))
            })?;
            let agent = child_agent(&parent, &admitted.grant, &child.frame, child.terms.profile.as_deref())?;
            Ok::<_, ToolError>((admitted, agent))
        })();
        let (admitted, agent) = match readmitted {
            Ok(x) => x,
            Err(e) => {
                child.busy.store(false, Ordering::SeqCst);
                return Err(e);
            }
        };
        *lock(&child.held) = admitted.grant.clone();
        *lock(&child.prompt_cwd) = admitted.grant.scope.working_dir.clone();
        *lock(&child.agent) = agent;
        // Messages steered to it since it finished follow the follow-up's own words.
        let mut input = prompt;
        for m in lock(&child.inbox).take() {
            input.push_str("\n\n");
            input.push_str(&m);
        }
        let history = lock(&child.messages).clone();
        let body = run_child(child.clone(), input, history).await?;
        Ok(Value::String(report(&child.id, &admitted, child.terms.profile.as_deref(), &body)))
    }
}

struct SteerTool {
    spec: ToolSpec,
    frame: Arc<Frame>,
}

#[async_trait]
impl Tool for SteerTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        let child = self.frame.find(&string_arg(&arguments, "id")?)?;
        let message = string_arg(&arguments, "message")?;
        let interrupt = match arguments.get("interrupt") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(_) => return Err(ToolError::Failed("'interrupt' must be true or false".into())),
        };
        let sender = &self.frame.id;
        let from = if sender == "root" { "your parent".to_string() } else { format!("your parent, agent {sender}") };
        {
            let mut inbox = lock(&child.inbox);
            inbox.messages.push(format!("[Message from {from}, sent {}]\n{message}", timestamp()));
            inbox.interrupt |= interrupt;
        }
        if interrupt {
            // A model request under way is cut; a tool under way finishes first (agent/mod.rs reads the
            // inbox after that round's results).
            child.steered.notify_waiters();
        }
        let busy = child.busy.load(Ordering::SeqCst);
        if !busy {
            // A finished sub-agent: in a session its inbox is stored now, not only when it next runs or its
            // parent parks, so a run elsewhere (or after a crash) finds the message.
            crate::session::keep_subagent(&child.parent, record_of(&child, false)).await;
        }
        let when = match (busy, interrupt) {
            (true, false) => "at its next round boundary",
            (true, true) => "now: the reply it is writing is cut (a tool it is running finishes first)",
            (false, _) => "at the start of its next follow-up",
        };
        Ok(Value::String(format!("Message left for sub-agent {}; it reads it {when}.", child.id)))
    }
}

struct DeleteTool {
    spec: ToolSpec,
    frame: Arc<Frame>,
}

#[async_trait]
impl Tool for DeleteTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        let child = self.frame.find(&string_arg(&arguments, "id")?)?;
        if child.busy.load(Ordering::SeqCst) {
            return Err(ToolError::Failed(format!(
                "sub-agent {} is still running; delete it once it has finished",
                child.id
            )));
        }
        lock(&self.frame.children).remove(&child.id);
        crate::session::forget_subagent(&child.id).await;
        let nested = count(&child.frame);
        let tail = if nested == 0 { String::new() } else { format!(" and the {nested} sub-agent(s) it spawned") };
        Ok(Value::String(format!("Deleted sub-agent {}{tail}.", child.id)))
    }
}

fn count(frame: &Frame) -> usize {
    lock(&frame.children).values().map(|c| 1 + count(&c.frame)).sum()
}
