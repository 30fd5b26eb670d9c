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

use crate::model::Message;

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
/// Bounded: a window over [`Windows::WINDOW_BYTES`] (its text, roughly) is not kept, and the oldest
/// windows go first past [`Windows::SESSIONS`] sessions or [`Windows::BYTES`] in all.
#[derive(Default)]
struct Windows {
    kept: std::collections::HashMap<String, (Arc<store::Live>, usize)>,
    order: std::collections::VecDeque<String>,
    bytes: usize,
}

impl Windows {
    const SESSIONS: usize = 64;
    const WINDOW_BYTES: usize = 16 << 20;
    const BYTES: usize = 64 << 20;

    /// Takes the session's window out (a read puts it back with what was appended since).
    fn take(&mut self, session_id: &str) -> Option<(Arc<store::Live>, usize)> {
        let kept = self.kept.remove(session_id)?;
        self.bytes -= kept.1;
        self.order.retain(|id| id != session_id);
        Some(kept)
    }

    /// Keeps `live`, of `size` ([`approx_size`] summed), in place of what was kept for the session.
    fn keep(&mut self, session_id: &str, live: &Arc<store::Live>, size: usize) {
        if let Some((_, size)) = self.kept.remove(session_id) {
            self.bytes -= size;
            self.order.retain(|id| id != session_id);
        }
        if size > Self::WINDOW_BYTES {
            return;
        }
        self.kept.insert(session_id.to_string(), (Arc::clone(live), size));
        self.order.push_back(session_id.to_string());
        self.bytes += size;
        while self.order.len() > Self::SESSIONS || self.bytes > Self::BYTES {
            let Some(old) = self.order.pop_front() else { break };
            if let Some((_, size)) = self.kept.remove(&old) {
                self.bytes -= size;
            }
        }
    }
}

/// An entry's size in memory, roughly: its strings' lengths.
fn approx_size(entry: &rules::Entry) -> usize {
    use crate::content::Part;
    let parts = |parts: &[Part]| -> usize {
        parts
            .iter()
            .map(|p| match p {
                Part::Text { text } => text.len(),
                Part::Image { media_type, data } => media_type.len() + data.len(),
                Part::ImageUrl { url } => url.len(),
                Part::File { media_type, filename, data } => media_type.len() + filename.len() + data.len(),
            })
            .sum()
    };
    64 + match &entry.item {
        Item::Message { message } => match message {
            Message::User { content, parts: p } => content.len() + parts(p),
            Message::Assistant { content, tool_calls } => {
                content.as_ref().map_or(0, String::len)
                    + tool_calls.iter().map(|c| c.id.len() + c.name.len() + c.arguments.len()).sum::<usize>()
            }
            Message::Tool { call_id, name, content, parts: p, .. } => {
                call_id.len() + name.len() + content.len() + parts(p)
            }
            Message::Provider { wire, items } => wire.len() + items.iter().map(|v| v.to_string().len()).sum::<usize>(),
        },
        Item::Boundary { .. } => 0,
        Item::Summary { text } => text.len(),
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
    pub(crate) async fn live(&self, session_id: &str) -> Result<Arc<store::Live>, SessionError> {
        // Taken out of the cache, so the window is copied only when a caller still holds it.
        let kept = self.windows.lock().unwrap_or_else(|p| p.into_inner()).take(session_id);
        let (live, size) = match kept {
            None => {
                let live = self.store.live(session_id).await?;
                let size = live.entries.iter().map(approx_size).sum();
                (Arc::new(live), size)
            }
            Some((mut live, size)) => {
                let last = live.entries.last().map_or(0, |e| e.index);
                let added = self.store.entries_after(session_id, last).await?;
                let compacted = added.iter().any(|e| matches!(e.item, Item::Boundary { .. }));
                let added_size: usize = added.iter().map(approx_size).sum();
                Arc::make_mut(&mut live).add(added);
                // A compaction moved the window's start: measured again (once per compaction).
                let size = if compacted { live.entries.iter().map(approx_size).sum() } else { size + added_size };
                (live, size)
            }
        };
        self.windows.lock().unwrap_or_else(|p| p.into_inner()).keep(session_id, &live, size);
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

#[cfg(test)]
mod window_tests {
    use super::*;

    fn window(text_bytes: usize) -> store::Live {
        let message = Message::user("x".repeat(text_bytes));
        store::Live { entries: vec![rules::Entry { index: 1, item: Item::Message { message } }], compactions: 0 }
    }

    fn keep(w: &mut Windows, id: &str, live: &store::Live) {
        let size = live.entries.iter().map(approx_size).sum();
        w.keep(id, &Arc::new(live.clone()), size);
    }

    #[test]
    fn the_kept_windows_are_bounded_by_count_and_by_size() {
        let mut w = Windows::default();
        for i in 0..Windows::SESSIONS + 6 {
            keep(&mut w, &format!("s{i}"), &window(10));
        }
        // The oldest went first.
        assert_eq!(w.kept.len(), Windows::SESSIONS);
        assert!(!w.kept.contains_key("s0") && w.kept.contains_key(&format!("s{}", Windows::SESSIONS + 5)));
        // A window over the per-session bound is not kept (and what was kept for it goes).
        keep(&mut w, "s10", &window(Windows::WINDOW_BYTES + 1));
        assert!(!w.kept.contains_key("s10"));
        // Windows under the per-session bound, over the total: the oldest go until it holds.
        let mut big = Windows::default();
        for i in 0..8 {
            keep(&mut big, &format!("b{i}"), &window(Windows::WINDOW_BYTES - 1024));
        }
        assert!(big.bytes <= Windows::BYTES, "{}", big.bytes);
        assert_eq!(big.kept.len(), 4);
        assert!(big.kept.contains_key("b7") && !big.kept.contains_key("b3"));
        // Keeping a session again replaces its window and its size.
        let before = big.bytes;
        keep(&mut big, "b7", &window(10));
        assert_eq!(big.kept.len(), 4);
        assert!(big.bytes < before);
    }
}
