//! Work that outlives the run (SPEC §8b): a session run's background tasks are kept in the store, so
//! `task_result` reads them from any process, and a run may end while some still run. The process
//! running them renews their heartbeat; a result that lands after its run ended is appended to the
//! session as its own turn and the host is told ([`Sessions::deliveries`]); a task whose process died
//! is read `lost`, never left `running`.

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::rules::Item;
use super::store::TaskSnapshot;
use super::{SessionError, Sessions};
use crate::agent::background::{Report, TaskSink, TaskStatus, lost_message};
use crate::model::Message;

/// A background task's result that landed in a session after its run ended: the host may continue the
/// session with it (its result is the session's last turn).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    /// The session the result landed in.
    pub session_id: String,
    /// The task's id.
    pub task_id: String,
    /// The tool the task ran.
    pub name: String,
    /// `finished`, `failed` or `cancelled`.
    pub status: TaskStatus,
    /// The result text, as the session's turn carries it.
    pub result: String,
}

/// The deliveries of one store handle (and its clones) from the moment it was asked for
/// ([`Sessions::deliveries`]).
#[derive(Debug)]
pub struct Deliveries {
    rx: tokio::sync::broadcast::Receiver<Delivery>,
}

impl Deliveries {
    /// The next delivery; `None` only once the store handle and all its clones are gone. A reader that
    /// fell more than [`DELIVERY_BUFFER`] behind skips the oldest (`task_result` still has each).
    pub async fn next(&mut self) -> Option<Delivery> {
        loop {
            match self.rx.recv().await {
                Ok(d) => return Some(d),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => continue,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    }
}

/// How many deliveries a reader may fall behind before the oldest are skipped.
pub const DELIVERY_BUFFER: usize = 1024;

pub(crate) fn channel() -> Arc<tokio::sync::broadcast::Sender<Delivery>> {
    Arc::new(tokio::sync::broadcast::channel(DELIVERY_BUFFER).0)
}

/// The task keeper of one session run.
pub(crate) struct SessionTasks {
    pub sessions: Sessions,
    pub session_id: String,
}

impl SessionTasks {
    fn snapshot(&self, report: &Report, note: Option<String>) -> TaskSnapshot {
        TaskSnapshot {
            session_id: self.session_id.clone(),
            task_id: report.id.clone(),
            name: report.name.clone(),
            status: report.status,
            note,
            result: Some(report.result.clone()),
        }
    }
}

#[async_trait::async_trait]
impl TaskSink for SessionTasks {
    async fn started(&self, name: &str) -> Result<String, String> {
        let now = self.sessions.clock.now_ms();
        self.sessions.store.task_started(&self.session_id, name, now).await.map_err(|e| e.to_string())
    }

    async fn beat(&self, running: Vec<(String, Option<String>)>) {
        let now = self.sessions.clock.now_ms();
        if let Err(e) = self.sessions.store.task_beat(&self.session_id, &running, now).await {
            // The next beat tries again; a store down for a whole lease length reads the tasks lost.
            tracing::warn!(session_id = %self.session_id, error = %e, "a background task heartbeat failed");
        }
    }

    fn beat_every(&self) -> Duration {
        (self.sessions.lease / 3).max(Duration::from_millis(1))
    }

    async fn reported(&self, report: &Report, note: Option<String>) {
        let task = self.snapshot(report, note);
        let now = self.sessions.clock.now_ms();
        if let Err(e) = self.sessions.store.task_landed(&self.session_id, &task, None, now).await {
            tracing::warn!(session_id = %self.session_id, task_id = %report.id, error = %e, "a task's end was not recorded");
        }
    }

    async fn landed(&self, report: Report, note: Option<String>) {
        let task = self.snapshot(&report, note);
        let item = Item::Message { message: report.to_message() };
        let now = self.sessions.clock.now_ms();
        match self.sessions.store.task_landed(&self.session_id, &task, Some(&item), now).await {
            Ok(true) => {
                let delivery = Delivery {
                    session_id: self.session_id.clone(),
                    task_id: report.id,
                    name: report.name,
                    status: report.status,
                    result: report.result,
                };
                // Nobody listening is no failure: the result is in the session.
                let _ = self.sessions.deliveries.send(delivery);
            }
            Ok(false) => {
                tracing::warn!(session_id = %self.session_id, task_id = %report.id, "a landed task is not in the store")
            }
            Err(e) => {
                tracing::warn!(session_id = %self.session_id, task_id = %report.id, error = %e, "a landed task's result was not recorded")
            }
        }
    }
}

impl Sessions {
    /// The background-task results that land in this store's sessions after their runs ended, from now
    /// on, as this process runs them (SPEC §8b: the host is told, so it can continue the session).
    pub fn deliveries(&self) -> Deliveries {
        Deliveries { rx: self.deliveries.subscribe() }
    }

    /// A session's background task as the store has it, from any process: its status, latest progress
    /// note and result. A task whose process died (its heartbeat older than the lease length) is `lost`,
    /// and the session is told so once.
    pub async fn task_result(&self, session_id: &str, task_id: &str) -> Result<TaskSnapshot, SessionError> {
        self.store.state(session_id).await?;
        let window = self.lease.as_millis() as i64;
        let id = task_id.to_string();
        let lost = move |name: &str| Item::Message { message: Message::user(lost_message(&id, name)) };
        let now = self.clock.now_ms();
        self.store.task(session_id, task_id, window, &lost, now).await?.ok_or_else(|| {
            SessionError::InvalidArgument(format!("there is no background task '{task_id}' in session '{session_id}'"))
        })
    }
}
