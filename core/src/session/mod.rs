//! Sessions (SPEC §8): an append-only log of turns in a store (SQLite file by default, PostgreSQL by
//! URL), compaction that appends a boundary and a model-written summary and never deletes, the
//! conversation tools that still reach what was summarised, and the context gauge.
//!
//! ```no_run
//! # async fn demo(agent: ambit::Agent) -> Result<(), ambit::session::SessionError> {
//! let sessions = ambit::session::Sessions::open("sqlite:///var/lib/app/sessions.db").await?;
//! let id = sessions.create().await?;
//! let first = sessions.run(&agent, &id, "Remember: the deploy key is in vault/ops.").await?;
//! let later = sessions.run(&agent, &id, "Where is the deploy key?").await?;   // continues the log
//! # Ok(()) }
//! ```

pub(crate) mod children;
mod durable;
mod escalate;
pub mod rules;
mod run;
pub mod store;
mod tasks;
mod tools;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::agent::background::TaskStatus;
pub use crate::agent::run_state::{OutstandingTask, RunSnapshot};
pub use crate::agent::subagent::SubagentRecord;
pub(crate) use children::{forget_subagent, keep_subagent};
pub use durable::{DEFAULT_LEASE, MAX_BUSY_WAIT_MS, Take};

/// The longest run lease (`lease_ms`): 24 hours. A session whose run died is held no longer than this,
/// and the millisecond arithmetic of the lease (`now + lease_ms`, an `i64`) cannot overflow.
pub const MAX_LEASE: std::time::Duration = std::time::Duration::from_secs(24 * 60 * 60);
pub(crate) use durable::{journaled, recorded};
pub use rules::{Entry, Item};
pub use run::ParkedCall;
pub(crate) use run::{park, parked_at};
pub use store::{ChildSession, Live, SessionRow, SessionStore, TaskSnapshot};
pub use tasks::{DELIVERY_BUFFER, Deliveries, Delivery};
pub use tools::tools;

/// The id of the session the current run belongs to, if it runs in one.
pub(crate) fn current_session_id() -> Option<String> {
    run::current().map(|c| c.session_id.clone())
}

/// A built-in of this module by name: the four session tools and `escalate_to_human`.
pub fn builtin(name: &str) -> Option<Arc<dyn crate::tools::Tool>> {
    if name == "escalate_to_human" {
        return Some(Arc::new(escalate::Escalate::new()));
    }
    tools().into_iter().find(|t| t.spec().name == name)
}

/// A session's failure: the store, a missing session, a bad argument, or the run itself.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// An argument the store cannot use (the text names it).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// No session has this id.
    #[error("no session '{0}' in this store")]
    NotFound(String),
    /// The store (SQLite or PostgreSQL) failed; the text is its error.
    #[error("the session store failed: {0}")]
    Store(String),
    /// The run failed (the agent's own error).
    #[error(transparent)]
    Run(#[from] crate::Error),
    /// Another run holds the session (SPEC §8b: one run at a time per session, across processes); or
    /// this run's lease ran out and another run took the session over.
    #[error("{0}")]
    Busy(String),
    /// A resume of a session with no approval waiting: never parked, already resumed, or being resumed
    /// by another run that claimed it first.
    #[error("{0}")]
    NotParked(String),
    /// The run parked: a call waits on an answer given later (`Sessions::resume`). A signal, not a
    /// failure.
    #[error("session '{session_id}' is awaiting an approval for tool '{}'", request.tool)]
    AwaitingApproval {
        /// The parked session.
        session_id: String,
        /// What the call waits on.
        request: Box<crate::permission::ApprovalRequest>,
    },
}

impl SessionError {
    /// A stable machine-readable code, the same in every language.
    pub fn code(&self) -> &'static str {
        match self {
            SessionError::InvalidArgument(_) => "invalid_argument",
            SessionError::NotFound(_) => "session_not_found",
            SessionError::Store(_) => "session_store",
            SessionError::Busy(_) => "session_busy",
            SessionError::NotParked(_) => "session_not_parked",
            SessionError::Run(e) => e.code(),
            SessionError::AwaitingApproval { .. } => "awaiting_approval",
        }
    }
}

/// A session's state row: `idle`, `running` (held by a run's lease) or `awaiting_approval` (with what it
/// waits on).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionState {
    /// `idle`, `running` or `awaiting_approval`.
    pub state: String,
    /// What a parked run waits on, and what its resume needs.
    #[serde(default)]
    pub parked: Option<Value>,
}

/// How runs in a session manage the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionConfig {
    /// The context window, in tokens: `None` (the default) takes the model's (its `context_window`
    /// setting, else its family's default, [`crate::model::window`]); a number overrides it for the
    /// runs of this store.
    #[serde(default)]
    pub context_window: Option<u64>,
    /// The share of the window at which auto-compaction fires (default 0.85): before a run, and at a
    /// round boundary inside one.
    #[serde(default = "default_compact_at")]
    pub compact_at: f64,
    /// Rounds kept verbatim by a compaction (default 2; 0 keeps none). A round opens with a user message
    /// or with a model turn after tool results; a compaction inside a run also keeps the round in flight.
    #[serde(default = "default_keep_recent")]
    pub keep_recent: usize,
    /// How long a run's lease lasts unless its heartbeat renews it, in ms (`None`: [`DEFAULT_LEASE`]);
    /// also how long a background task's process may stay silent before the task is read `lost`.
    #[serde(default)]
    pub lease_ms: Option<u64>,
    /// How long a run (or resume) on a session another run holds waits for it to be let go before it is
    /// refused with `session_busy`, in ms (`None` or 0: refused at once; SPEC §8b "or waits, as asked").
    #[serde(default)]
    pub busy_wait_ms: Option<u64>,
}

fn default_compact_at() -> f64 {
    rules::DEFAULT_COMPACT_AT
}
fn default_keep_recent() -> usize {
    rules::DEFAULT_KEEP_RECENT
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            context_window: None,
            compact_at: default_compact_at(),
            keep_recent: default_keep_recent(),
            lease_ms: None,
            busy_wait_ms: None,
        }
    }
}

impl SessionConfig {
    /// Decodes a config from its JSON text, as the bindings pass it. The millisecond settings
    /// (`lease_ms`, `busy_wait_ms`) must be absent, null or a whole number >= 0: anything else (a
    /// negative or fractional number, a bool, a string, a non-finite number a binding spelled as a
    /// string because JSON has none) is an `invalid_argument` naming the setting. Their upper bounds
    /// are checked by [`Sessions::with_config`].
    pub fn from_json(text: &str) -> Result<SessionConfig, SessionError> {
        let value: Value = serde_json::from_str(text)
            .map_err(|e| SessionError::InvalidArgument(format!("the session config is not JSON: {e}")))?;
        for field in ["lease_ms", "busy_wait_ms"] {
            match value.get(field) {
                None | Some(Value::Null) => {}
                Some(v) if v.as_u64().is_some() => {}
                Some(v) => {
                    return Err(SessionError::InvalidArgument(format!(
                        "{field} must be a whole number of milliseconds >= 0, got {v}"
                    )));
                }
            }
        }
        serde_json::from_value(value)
            .map_err(|e| SessionError::InvalidArgument(format!("the session config is not valid: {e}")))
    }
}

/// A session store, open.
#[derive(Clone)]
pub struct Sessions {
    store: Arc<dyn SessionStore>,
    config: SessionConfig,
    /// How long a run's lease lasts unless its heartbeat renews it.
    lease: std::time::Duration,
    clock: Arc<dyn crate::ledger::Clock>,
    /// False only for the negative control of the exactly-once tests.
    guarded: bool,
    /// Where background-task results that land after their run are announced (tasks.rs).
    deliveries: Arc<tokio::sync::broadcast::Sender<Delivery>>,
    /// The live windows this process read last ([`Sessions::live`]), shared by its clones.
    windows: Arc<std::sync::Mutex<Windows>>,
}

/// The live windows of the sessions this process ran last, so the next run of one reads only what was
/// appended since (by any process): the log is append-only, so a window read once stays a true prefix.
/// At most [`Windows::SESSIONS`] sessions, the oldest dropped first; a window over
/// [`Windows::ENTRIES`] entries is not kept.
#[derive(Default)]
struct Windows {
    kept: std::collections::HashMap<String, store::Live>,
    order: std::collections::VecDeque<String>,
}

impl Windows {
    const SESSIONS: usize = 64;
    const ENTRIES: usize = 20_000;

    fn keep(&mut self, session_id: &str, live: &store::Live) {
        if live.entries.len() > Self::ENTRIES {
            self.kept.remove(session_id);
            return;
        }
        if self.kept.insert(session_id.to_string(), live.clone()).is_none() {
            self.order.push_back(session_id.to_string());
            while self.order.len() > Self::SESSIONS {
                if let Some(old) = self.order.pop_front() {
                    self.kept.remove(&old);
                }
            }
        }
    }
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").field("config", &self.config).field("lease", &self.lease).finish()
    }
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

impl Sessions {
    /// Opens `sqlite://<path>` (created if missing) or `postgres://…`, applying the migrations.
    pub async fn open(url: &str) -> Result<Sessions, SessionError> {
        let store: Arc<dyn SessionStore> = if let Some(path) = url.strip_prefix("sqlite://") {
            Arc::new(store::SqliteSessions::open(path, now_ms()).await?)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Arc::new(store::PgSessions::open(url, now_ms()).await?)
        } else {
            return Err(SessionError::InvalidArgument(format!(
                "a session store URL starts with sqlite:// or postgres://, got '{url}'"
            )));
        };
        Ok(Sessions {
            store,
            config: SessionConfig::default(),
            lease: DEFAULT_LEASE,
            clock: Arc::new(crate::ledger::SystemClock),
            guarded: true,
            deliveries: tasks::channel(),
            windows: Arc::default(),
        })
    }

    /// The same store with another lease length (default [`DEFAULT_LEASE`]): how long a session stays
    /// held by a run whose process died before another run may take it over. A live run's heartbeat
    /// renews its lease three times per length. At least 3 ms and at most [`MAX_LEASE`] (24 h).
    pub fn with_lease(mut self, lease: std::time::Duration) -> Result<Sessions, SessionError> {
        if lease.as_millis() < 3 {
            return Err(SessionError::InvalidArgument(format!(
                "the lease (lease_ms) must be at least 3 ms, got {} ms",
                lease.as_millis()
            )));
        }
        if lease > MAX_LEASE {
            return Err(SessionError::InvalidArgument(format!(
                "the lease (lease_ms) must be at most {} ms (24 h), got {} ms",
                MAX_LEASE.as_millis(),
                lease.as_millis()
            )));
        }
        self.lease = lease;
        Ok(self)
    }

    /// The same store read through another clock (leases expire by it).
    pub fn with_clock(mut self, clock: Arc<dyn crate::ledger::Clock>) -> Sessions {
        self.clock = clock;
        self
    }

    /// The same store with the exactly-once guards off: a resume claims without the compare-and-set
    /// and calls are not recorded. Only for the negative control of the tests that prove the guards.
    #[doc(hidden)]
    pub fn unguarded_for_tests(mut self) -> Sessions {
        self.guarded = false;
        self
    }

    /// The same store with other settings: the window's, the lease length, the wait on a busy session.
    pub fn with_config(mut self, config: SessionConfig) -> Result<Sessions, SessionError> {
        if config.context_window == Some(0) || !(config.compact_at > 0.0 && config.compact_at <= 1.0) {
            return Err(SessionError::InvalidArgument(
                "context_window must be above 0 and compact_at in (0, 1]".into(),
            ));
        }
        if let Some(ms) = config.lease_ms {
            self = self.with_lease(std::time::Duration::from_millis(ms))?;
        }
        if config.busy_wait_ms.is_some_and(|ms| ms > durable::MAX_BUSY_WAIT_MS) {
            return Err(SessionError::InvalidArgument(format!(
                "busy_wait_ms must be at most {} (one hour), got {}",
                durable::MAX_BUSY_WAIT_MS,
                config.busy_wait_ms.unwrap_or_default()
            )));
        }
        self.config = config;
        Ok(self)
    }

    /// The session's log from where its live window starts: the window this process read last with
    /// what was appended since (one read of the new entries), or the store's [`SessionStore::live`].
    pub(crate) async fn live(&self, session_id: &str) -> Result<store::Live, SessionError> {
        let kept = self.windows.lock().unwrap_or_else(|p| p.into_inner()).kept.get(session_id).cloned();
        let live = match kept {
            None => self.store.live(session_id).await?,
            Some(mut live) => {
                let last = live.entries.last().map_or(0, |e| e.index);
                let added = self.store.entries_after(session_id, last).await?;
                live.add(added);
                live
            }
        };
        self.windows.lock().unwrap_or_else(|p| p.into_inner()).keep(session_id, &live);
        Ok(live)
    }

    /// The store the sessions are kept in.
    pub fn store(&self) -> &Arc<dyn SessionStore> {
        &self.store
    }

    /// The sessions' settings (leases, compaction).
    pub fn config(&self) -> &SessionConfig {
        &self.config
    }

    /// A new, empty session; its id.
    #[tracing::instrument(target = "ambit::session", name = "session.create", skip_all)]
    pub async fn create(&self) -> Result<String, SessionError> {
        let id = durable::fresh_id();
        self.store.create(&id, None, now_ms()).await?;
        Ok(id)
    }

    /// The whole log of a session.
    pub async fn entries(&self, session_id: &str) -> Result<Vec<Entry>, SessionError> {
        self.store.state(session_id).await?;
        self.store.entries(session_id).await
    }

    /// `conversation_search` over a session.
    pub async fn search(
        &self,
        session_id: &str,
        query: &str,
        is_regex: bool,
        limit: usize,
    ) -> Result<String, SessionError> {
        rules::search(&self.entries(session_id).await?, query, is_regex, limit).map_err(SessionError::InvalidArgument)
    }

    /// `conversation_read` over a session.
    pub async fn read(&self, session_id: &str, start: i64, limit: usize) -> Result<String, SessionError> {
        rules::read(&self.entries(session_id).await?, start, limit).map_err(SessionError::InvalidArgument)
    }
}
