//! What one run holds apart from the conversation (its checklist), reachable from the built-in tools
//! called in that run through a task-local.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::background::Tasks;
pub use super::checklist::Checklist;
use super::scratchpad::Entries;
use crate::error::Error;
use crate::model::{Message, Usage};

tokio::task_local! {
    static CURRENT: Arc<RunState>;
}

tokio::task_local! {
    /// The round watcher of the run about to start, taken once by that run ([`with_rounds`]).
    static ROUNDS: Mutex<Option<Arc<dyn Rounds>>>;
}

/// What watches a run's rounds from outside the loop (a session, crate::session): it hears what each
/// model response reported and sees the conversation at each round boundary, which it may replace (a
/// compaction between rounds). The model requests it makes for the run (a compaction's summary) are the
/// run's: in its usage, cost, `model_response` events and budget.
#[async_trait::async_trait]
pub(crate) trait Rounds: Send + Sync {
    /// After a model response to a request of `sent` messages; `messages` now ends with the response.
    fn responded(&self, usage: &Usage, sent: usize, messages: &[Message]);
    /// What it spent for the run before the run started (a compaction before it).
    fn carried(&self) -> Usage;
    /// The state of a parked run this run resumes, once.
    fn restored(&self) -> Option<RunSnapshot>;
    /// At a round boundary, before the next model request; what its own requests used. An error stops
    /// the run with it.
    async fn boundary(&self, messages: &mut Vec<Message>) -> Result<Usage, Error>;
    /// The run is about to fail after a turn whose calls ran (a tool call's hook failed): `messages` is
    /// the conversation through that turn's results, to keep before the run ends.
    fn failed_with(&self, _messages: Vec<Message>) {}
    /// Where the run's background tasks are kept: with one, the run may end while tasks are still
    /// running, and their results land in the session when they come (SPEC §8b).
    fn tasks(&self) -> Option<Arc<dyn super::background::TaskSink>> {
        None
    }
}

/// Runs `fut` (an agent's run) with `rounds` watching it. The run that starts first takes it, so a
/// sub-agent's run inside it is not watched.
pub(crate) async fn with_rounds<F: std::future::Future>(rounds: Arc<dyn Rounds>, fut: F) -> F::Output {
    ROUNDS.scope(Mutex::new(Some(rounds)), fut).await
}

/// The round watcher set for the run starting now, if any.
pub(crate) fn take_rounds() -> Option<Arc<dyn Rounds>> {
    ROUNDS.try_with(|r| r.lock().unwrap_or_else(|p| p.into_inner()).take()).ok().flatten()
}

/// A run's state as one value (SPEC §8b): what a parked run keeps in the store and its resume
/// restores, in any process.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunSnapshot {
    /// Model requests made so far: the resumed run's turns go on from here, under the same `max_turns`.
    pub turns: u32,
    /// Tokens used so far, sub-agents and compactions included: the budget goes on from here.
    pub usage: Usage,
    /// Checklist nudges given so far.
    #[serde(default)]
    pub nudges: u32,
    #[serde(default)]
    /// The run's checklist.
    pub checklist: Checklist,
    /// The scratchpad's entries, by name.
    #[serde(default)]
    pub scratchpad: Entries,
    /// Deferred tools loaded, in load order.
    #[serde(default)]
    pub loaded_tools: Vec<String>,
    /// Tools whose undocumented-parameter note was given.
    #[serde(default)]
    pub noted_tools: std::collections::BTreeSet<String>,
    /// Background tasks started by the run and not yet reported to it: they go on (in the process that
    /// started them) and their results land in the session.
    #[serde(default)]
    pub tasks: Vec<OutstandingTask>,
    /// The sub-agent tree: each sub-agent with its spawn terms, what it holds and its conversation.
    #[serde(default)]
    pub subagents: Vec<super::subagent::SubagentRecord>,
    /// How many sub-agents the agent has spawned (the next id follows).
    #[serde(default)]
    pub subagents_spawned: u64,
}

/// A background task the run started whose result has not reached it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutstandingTask {
    /// The task's id.
    pub task_id: String,
    /// The tool it runs.
    pub name: String,
}

/// The state of one run.
#[derive(Debug, Default)]
pub(crate) struct RunState {
    pub checklist: Mutex<Checklist>,
    /// The scratchpad's entries (SPEC §5).
    pub scratchpad: Mutex<Entries>,
    /// The background tasks (SPEC §5).
    pub tasks: Arc<Tasks>,
    /// What this run loaded and was told about deferred tools (SPEC §4).
    pub deferral: Mutex<crate::deferral::RunLoads>,
    /// The tokens of the sub-agent runs this run started (SPEC §7).
    pub subagents: super::subagent::Spend,
    /// The first hook failure of a tool call (crate::agent::hooks): the loop ends the run with it.
    pub hook_failure: Mutex<Option<Error>>,
    /// A call of a run with tool hooks went through the gate (it may have run): when a hook then
    /// fails, the turn is kept rather than dropped (crate::session), so no later run repeats the call.
    pub gated: std::sync::atomic::AtomicBool,
    /// The model request under way (for the hooks' context).
    pub turn: std::sync::atomic::AtomicU32,
    /// The content parts of tool results that carry images ([`crate::content::tool_content`]), by call
    /// id, until the loop puts the result in the conversation.
    pub media: Mutex<std::collections::HashMap<String, Vec<crate::content::Part>>>,
}

impl RunState {
    /// The state of the run this code is called in, if any.
    pub fn current() -> Option<Arc<RunState>> {
        CURRENT.try_with(Arc::clone).ok()
    }

    /// Runs `fut` as part of this run.
    pub async fn scope<F: std::future::Future>(self: Arc<Self>, fut: F) -> F::Output {
        CURRENT.scope(self, fut).await
    }

    /// This run's state as one value, at `turns` requests, `usage` and `nudges` (the sub-agent tree is
    /// the agent's, which the loop adds).
    pub fn snapshot(&self, turns: u32, usage: Usage, nudges: u32) -> RunSnapshot {
        let loads = self.deferral.lock().unwrap_or_else(|p| p.into_inner());
        let tasks = self.tasks.outstanding_list().into_iter().map(|(task_id, name)| OutstandingTask { task_id, name });
        RunSnapshot {
            tasks: tasks.collect(),
            subagents: Vec::new(),
            subagents_spawned: 0,
            turns,
            usage,
            nudges,
            checklist: self.checklist.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            scratchpad: self.scratchpad.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            loaded_tools: loads.loaded.clone(),
            noted_tools: loads.noted.clone(),
        }
    }

    /// Takes the state a snapshot holds (the loop's counts are the caller's).
    pub fn restore(&self, s: &RunSnapshot) {
        *self.checklist.lock().unwrap_or_else(|p| p.into_inner()) = s.checklist.clone();
        *self.scratchpad.lock().unwrap_or_else(|p| p.into_inner()) = s.scratchpad.clone();
        let mut loads = self.deferral.lock().unwrap_or_else(|p| p.into_inner());
        loads.loaded = s.loaded_tools.clone();
        loads.noted = s.noted_tools.clone();
        *self.subagents.spent.lock().unwrap_or_else(|p| p.into_inner()) = s.usage;
        self.tasks.keep_elsewhere(s.tasks.iter().map(|t| (t.task_id.clone(), t.name.clone())));
    }

    /// Keeps a tool hook's failure (the first one) for the loop.
    pub fn hook_failed(&self, e: Error) {
        self.hook_failure.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
    }

    /// The hook failure a tool call left, if any.
    pub fn take_hook_failure(&self) -> Option<Error> {
        self.hook_failure.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Whether a checklist item may wait on the background task `id`.
    pub fn task_may_be_waited_on(&self, id: &str) -> Result<(), String> {
        self.tasks.may_be_waited_on(id)
    }
}
