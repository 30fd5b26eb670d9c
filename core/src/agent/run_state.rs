//! What one run holds apart from the conversation (its checklist), reachable from the built-in tools
//! called in that run through a task-local.

use std::sync::{Arc, Mutex};

use super::background::Tasks;
use super::checklist::Checklist;
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
    /// At a round boundary, before the next model request; what its own requests used. An error stops
    /// the run with it.
    async fn boundary(&self, messages: &mut Vec<Message>) -> Result<Usage, Error>;
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

    /// Whether a checklist item may wait on the background task `id`.
    pub fn task_may_be_waited_on(&self, id: &str) -> Result<(), String> {
        self.tasks.may_be_waited_on(id)
    }
}
