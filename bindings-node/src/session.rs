//! Sessions for Node (SPEC §8): open, create, run in a session, resume a parked run, search and read.
//! Every call resolves to the JSON text of `{"ok": true, "value": …}` or
//! `{"ok": false, "error": {code, message, details}}`; `sessions.js` turns these into objects and typed
//! errors. Every rule lives in the core.

use ambit::session::{SessionConfig, SessionError, Sessions};
use napi::Env;
use napi::bindgen_prelude::PromiseRaw;
use napi_derive::napi;
use serde_json::{Value, json};

use crate::NativeAgent;
use crate::envelope::{JsError, envelope};

impl JsError for SessionError {
    fn to_js(&self) -> Value {
        let details = match self {
            SessionError::AwaitingApproval { session_id, request } => {
                json!({"sessionId": session_id, "request": request})
            }
            SessionError::Run(ambit::Error::InvalidMessage { index, field, .. }) => {
                json!({"index": index, "field": field})
            }
            SessionError::Run(err) => json!({"usage": err.usage()}),
            _ => json!({}),
        };
        json!({"code": self.code(), "message": self.to_string(), "details": details})
    }
}

macro_rules! value {
    ($v:expr) => {
        serde_json::to_value($v).map_err(|e| SessionError::Store(e.to_string()))
    };
}

/// An open session store.
#[napi]
pub struct NativeSessions {
    pub(crate) sessions: Sessions,
}

/// Opens `sqlite:///path` or `postgres://…` with a SessionConfig as JSON. Resolves to the envelope; the
/// store itself is then taken with [`take_sessions`].
#[napi]
pub async fn open_sessions(url: String, config: String) -> napi::Result<NativeSessions> {
    open_on(url, config, None).await
}

/// [`open_sessions`], on the test hook's manual clock when one is given.
pub(crate) async fn open_on(
    url: String,
    config: String,
    clock: Option<ambit::testing::ManualClock>,
) -> napi::Result<NativeSessions> {
    let opened = async move {
        let config = SessionConfig::from_json(&config)?;
        match clock {
            Some(clock) => ambit::testing::open_sessions(&url, &clock).await,
            None => Sessions::open(&url).await,
        }?
        .with_config(config)
    };
    let sessions = crate::envelope::open(opened).await?;
    Ok(NativeSessions { sessions })
}

#[napi]
impl NativeSessions {
    /// A new session's id.
    #[napi]
    pub async fn create(&self) -> String {
        let s = self.sessions.clone();
        envelope(async move { value!(s.create().await?) }).await
    }

    /// Runs the agent in the session; the RunResult.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn run<'env>(
        &self,
        env: &'env Env,
        agent: &NativeAgent,
        session_id: String,
        input: String,
        context: Option<u32>,
        messages: Option<String>,
    ) -> napi::Result<PromiseRaw<'env, String>> {
        let (s, agent) = (self.sessions.clone(), agent.agent.clone());
        crate::guard(|| {
            env.spawn_future(async move {
                Ok(envelope(async move {
                    // `messages`: the user message of parts as a JSON list (the facade's `runInput`).
                    let input = crate::run_input(input, messages)?;
                    value!(match crate::run_context(context) {
                        Some(c) => s.run_with_context(&agent, &session_id, input, c).await?,
                        None => s.run(&agent, &session_id, input).await?,
                    })
                })
                .await)
            })
        })?
    }

    /// Answers the approval a parked session waits on (`decision` as JSON) and continues the run.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn resume<'env>(
        &self,
        env: &'env Env,
        agent: &NativeAgent,
        session_id: String,
        decision: String,
        context: Option<u32>,
    ) -> napi::Result<PromiseRaw<'env, String>> {
        let (s, agent) = (self.sessions.clone(), agent.agent.clone());
        crate::guard(|| {
            env.spawn_future(async move {
                Ok(envelope(async move {
                    let decision: ambit::ApprovalDecision =
                        serde_json::from_str(&decision).map_err(|e| SessionError::InvalidArgument(e.to_string()))?;
                    value!(match crate::run_context(context) {
                        Some(c) => s.resume_with_context(&agent, &session_id, decision, c).await?,
                        None => s.resume(&agent, &session_id, decision).await?,
                    })
                })
                .await)
            })
        })?
    }

    /// Compacts the session now; whether anything was summarised.
    #[napi(ts_return_type = "Promise<string>")]
    pub fn compact<'env>(
        &self,
        env: &'env Env,
        agent: &NativeAgent,
        session_id: String,
    ) -> napi::Result<PromiseRaw<'env, String>> {
        let (s, agent) = (self.sessions.clone(), agent.agent.clone());
        crate::guard(|| {
            env.spawn_future(
                async move { Ok(envelope(async move { value!(s.compact(&agent, &session_id).await?) }).await) },
            )
        })?
    }

    /// The approval a parked session waits on, or null.
    #[napi]
    pub async fn pending(&self, session_id: String) -> String {
        let s = self.sessions.clone();
        envelope(async move { value!(s.pending(&session_id).await?) }).await
    }

    /// `conversation_search` over the session.
    #[napi]
    pub async fn search(&self, session_id: String, query: String, is_regex: bool, limit: u32) -> String {
        let s = self.sessions.clone();
        envelope(async move { value!(s.search(&session_id, &query, is_regex, limit as usize).await?) }).await
    }

    /// `conversation_read` over the session.
    #[napi]
    pub async fn read(&self, session_id: String, start: i64, limit: u32) -> String {
        let s = self.sessions.clone();
        envelope(async move { value!(s.read(&session_id, start, limit as usize).await?) }).await
    }

    /// The whole log.
    #[napi]
    pub async fn entries(&self, session_id: String) -> String {
        let s = self.sessions.clone();
        envelope(async move { value!(s.entries(&session_id).await?) }).await
    }

    /// The background-task results that land in this store's sessions from now on.
    #[napi]
    pub fn deliveries(&self) -> NativeDeliveries {
        NativeDeliveries { rx: std::sync::Arc::new(tokio::sync::Mutex::new(self.sessions.deliveries())) }
    }

    /// A session's background task: `{session_id, task_id, name, status, note, result}`.
    #[napi]
    pub async fn task_result(&self, session_id: String, task_id: String) -> String {
        let s = self.sessions.clone();
        envelope(async move { value!(s.task_result(&session_id, &task_id).await?) }).await
    }
}

/// The deliveries of a store handle, one `next()` at a time.
#[napi]
pub struct NativeDeliveries {
    rx: std::sync::Arc<tokio::sync::Mutex<ambit::session::Deliveries>>,
}

#[napi]
impl NativeDeliveries {
    /// The next delivery (null once the store handle is gone).
    #[napi]
    pub async fn next(&self) -> String {
        let rx = self.rx.clone();
        envelope(async move { value!(rx.lock().await.next().await) }).await
    }
}
