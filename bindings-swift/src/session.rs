//! Sessions for Swift (SPEC §8): open, create, run in a session, resume a parked run, search and read.
//! The Swift facade (`Sessions.swift`) wraps these; every rule lives in the core.

use std::sync::Arc;

use ambit::session::{SessionConfig, SessionError, Sessions};

use crate::policy::ApprovalDecision;
use crate::{CaughtPanic, CoreAgent, RunResult, guard, guard_async};

/// A session failure, one case per code; `message` is the core's text.
#[derive(Debug, thiserror::Error, uniffi::Error)]
pub enum SessionCoreError {
    /// Code `awaiting_approval`: the run parked; `request_json` is the ApprovalRequest it waits on.
    #[error("{message}")]
    AwaitingApproval { session_id: String, request_json: String, message: String },
    /// Code `session_not_found`.
    #[error("{message}")]
    NotFound { message: String },
    /// Code `invalid_argument`.
    #[error("{message}")]
    InvalidArgument { message: String },
    /// Code `session_store`.
    #[error("{message}")]
    Store { message: String },
    /// Code `session_busy`: another run holds the session (one run at a time, across processes).
    #[error("{message}")]
    Busy { message: String },
    /// Code `session_not_parked`: a resume of a session with no approval waiting (another resume
    /// claimed it first, or it was never parked).
    #[error("{message}")]
    NotParked { message: String },
    /// The run itself failed, with the code `Agent.run` would have thrown (never `internal`).
    #[error("{message}")]
    Run { code: String, message: String },
    /// Code `internal`: a bug in ambit, a panic caught at the boundary (in the session call or in its
    /// run) instead of taking the process down.
    #[error("{message}")]
    Internal { message: String },
}

impl CaughtPanic for SessionCoreError {
    fn internal(error: ambit::Error) -> Self {
        SessionError::Run(error).into()
    }
}

impl From<SessionError> for SessionCoreError {
    fn from(e: SessionError) -> Self {
        let message = e.to_string();
        match e {
            SessionError::AwaitingApproval { session_id, request } => SessionCoreError::AwaitingApproval {
                session_id,
                request_json: serde_json::to_string(&request).unwrap_or_default(),
                message,
            },
            SessionError::NotFound(_) => SessionCoreError::NotFound { message },
            SessionError::InvalidArgument(_) => SessionCoreError::InvalidArgument { message },
            SessionError::Store(_) => SessionCoreError::Store { message },
            SessionError::Run(ambit::Error::Internal(_)) => SessionCoreError::Internal { message },
            SessionError::Busy(_) => SessionCoreError::Busy { message },
            SessionError::NotParked(_) => SessionCoreError::NotParked { message },
            SessionError::Run(err) => SessionCoreError::Run { code: err.code().to_string(), message },
        }
    }
}

macro_rules! json {
    ($v:expr) => {
        serde_json::to_string($v).map_err(|e| SessionCoreError::Store { message: e.to_string() })
    };
}

/// The store under the Swift facade's `Sessions`.
#[derive(uniffi::Object)]
pub struct CoreSessions {
    pub(crate) sessions: Sessions,
}

#[uniffi::export(async_runtime = "tokio")]
impl CoreSessions {
    /// Opens `sqlite:///path` or `postgres://…`, applying the migrations.
    #[uniffi::constructor]
    pub async fn open(
        url: String,
        context_window: Option<u64>,
        compact_at: f64,
        keep_recent: u32,
        lease_ms: Option<u64>,
        busy_wait_ms: Option<u64>,
    ) -> Result<Arc<Self>, SessionCoreError> {
        guard_async(async move {
            let config =
                SessionConfig { context_window, compact_at, keep_recent: keep_recent as usize, lease_ms, busy_wait_ms };
            let sessions = Sessions::open(&url).await?.with_config(config)?;
            Ok(Arc::new(CoreSessions { sessions }))
        })
        .await
    }

    /// A new, empty session; its id.
    pub async fn create(&self) -> Result<String, SessionCoreError> {
        guard_async(async move { Ok(self.sessions.create().await?) }).await
    }

    /// Runs the agent in the session, continuing its conversation, with the run context `context` (an id
    /// of the facade's; 0: none). `messages_json`: the user message of parts as a JSON list (the
    /// facade's `run(_:sessionId:parts:)`), else `input` is the message.
    pub async fn run(
        &self,
        agent: Arc<CoreAgent>,
        session_id: String,
        input: String,
        context: u64,
        messages_json: Option<String>,
    ) -> Result<RunResult, SessionCoreError> {
        guard_async(async move {
            let input = match messages_json {
                None => ambit::Input::Text(input),
                Some(json) => serde_json::from_str(&json)
                    .map_err(|e| ambit::Error::Config(format!("messages: {e}")))
                    .and_then(ambit::Input::from_json)
                    .map_err(ambit::session::SessionError::from)?,
            };
            let result = match context {
                0 => self.sessions.run(&agent.inner, &session_id, input).await?,
                c => {
                    let c = ambit::RunContextValue::new(crate::RunContextId(c));
                    self.sessions.run_with_context(&agent.inner, &session_id, input, c).await?
                }
            };
            Ok(result.into())
        })
        .await
    }

    /// Answers the approval a parked session waits on and continues the run.
    pub async fn resume(
        &self,
        agent: Arc<CoreAgent>,
        session_id: String,
        decision: ApprovalDecision,
        context: u64,
    ) -> Result<RunResult, SessionCoreError> {
        guard_async(async move {
            let decision = ambit::ApprovalDecision::try_from(decision)
                .map_err(|message| SessionCoreError::InvalidArgument { message })?;
            let result = match context {
                0 => self.sessions.resume(&agent.inner, &session_id, decision).await?,
                c => {
                    let c = ambit::RunContextValue::new(crate::RunContextId(c));
                    self.sessions.resume_with_context(&agent.inner, &session_id, decision, c).await?
                }
            };
            Ok(result.into())
        })
        .await
    }

    /// The ApprovalRequest a parked session waits on, as JSON; nil when it is not parked.
    pub async fn pending(&self, session_id: String) -> Result<Option<String>, SessionCoreError> {
        guard_async(async move {
            match self.sessions.pending(&session_id).await? {
                Some(r) => Ok(Some(json!(&r)?)),
                None => Ok(None),
            }
        })
        .await
    }

    /// Compacts now; whether anything was summarised.
    pub async fn compact(&self, agent: Arc<CoreAgent>, session_id: String) -> Result<bool, SessionCoreError> {
        guard_async(async move { Ok(self.sessions.compact(&agent.inner, &session_id).await?) }).await
    }

    /// `conversation_search`.
    pub async fn search(
        &self,
        session_id: String,
        query: String,
        is_regex: bool,
        limit: u32,
    ) -> Result<String, SessionCoreError> {
        guard_async(async move { Ok(self.sessions.search(&session_id, &query, is_regex, limit as usize).await?) }).await
    }

    /// `conversation_read`.
    pub async fn read(&self, session_id: String, start: i64, limit: u32) -> Result<String, SessionCoreError> {
        guard_async(async move { Ok(self.sessions.read(&session_id, start, limit as usize).await?) }).await
    }

    /// The whole log as JSON.
    pub async fn entries_json(&self, session_id: String) -> Result<String, SessionCoreError> {
        guard_async(async move { json!(&self.sessions.entries(&session_id).await?) }).await
    }

    /// The background-task results that land in this store's sessions from now on.
    pub fn deliveries(&self) -> Result<Arc<CoreDeliveries>, SessionCoreError> {
        guard(|| Ok(Arc::new(CoreDeliveries { rx: tokio::sync::Mutex::new(self.sessions.deliveries()) })))
    }

    /// A session's background task as JSON: `{session_id, task_id, name, status, note, result}`.
    pub async fn task_result_json(&self, session_id: String, task_id: String) -> Result<String, SessionCoreError> {
        guard_async(async move { json!(&self.sessions.task_result(&session_id, &task_id).await?) }).await
    }
}

/// The deliveries of a store handle, one `next` at a time (the facade's `Sessions.deliveries()` stream).
#[derive(uniffi::Object)]
pub struct CoreDeliveries {
    rx: tokio::sync::Mutex<ambit::session::Deliveries>,
}

#[uniffi::export(async_runtime = "tokio")]
impl CoreDeliveries {
    /// The next delivery as JSON: `{session_id, task_id, name, status, result}`; nil once the store
    /// handle is gone.
    pub async fn next_json(&self) -> Result<Option<String>, SessionCoreError> {
        guard_async(async move {
            match self.rx.lock().await.next().await {
                Some(d) => Ok(Some(json!(&d)?)),
                None => Ok(None),
            }
        })
        .await
    }
}
