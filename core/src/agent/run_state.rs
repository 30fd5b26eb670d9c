//! What one run holds apart from the conversation (its checklist), reachable from the built-in tools
//! called in that run through a task-local.

use std::sync::{Arc, Mutex};

use super::background::Tasks;
use super::checklist::Checklist;
use super::scratchpad::Entries;

tokio::task_local! {
    static CURRENT: Arc<RunState>;
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
