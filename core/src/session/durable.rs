//! Durable runs (SPEC §8b): one run at a time per session, across processes, by a lease in the store
//! (owner, expiry, renewed by a heartbeat while the run lives); a resume that claims the parked state by
//! compare-and-set before anything runs; and the call journal, which records a tool call as started
//! before it runs and its outcome after, so a call a crash interrupted is never re-run silently.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use super::store::{CallRecord, SessionStore, StartedCall, Taken};
use super::{SessionError, SessionState, Sessions};
use crate::error::ToolError;
use crate::ledger::Clock;
use crate::tools::Tool;

/// How long a run's lease lasts unless renewed, by default. The heartbeat renews it three times per
/// lease, so a live run keeps it; a dead one's runs out and the session is taken over.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// How a run takes its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// A new run: refused while another run holds the session or while it waits on an approval.
    Run,
    /// A resume: claims the parked state, once.
    Resume,
    /// A resume that claims without the compare-and-set, and records no calls: only for the negative
    /// control of the exactly-once tests ([`Sessions::unguarded_for_tests`]).
    #[doc(hidden)]
    Unguarded,
}

/// Whether `take` may take a session in `state`; `Ok(true)` when it takes over from an owner whose lease
/// ran out. The one rule both stores apply inside their transaction.
pub(crate) fn admit(
    session_id: &str,
    take: Take,
    state: &str,
    parked: bool,
    holder: Option<&str>,
    expires: Option<i64>,
    now: i64,
) -> Result<bool, SessionError> {
    let live = holder.is_some() && expires.is_some_and(|e| e > now);
    let running = state == "running";
    let busy = || {
        SessionError::Busy(format!(
            "session '{session_id}' is running in another run (its lease has {} ms left); one run at a time per \
             session",
            expires.unwrap_or(now).saturating_sub(now)
        ))
    };
    match take {
        Take::Run if running && live => Err(busy()),
        Take::Run if parked => Err(SessionError::InvalidArgument(format!(
            "session '{session_id}' is parked awaiting an approval; resume it first"
        ))),
        Take::Run => Ok(running),
        Take::Resume | Take::Unguarded if !parked => {
            Err(SessionError::NotParked(format!("session '{session_id}' is not awaiting an approval")))
        }
        Take::Unguarded => Ok(false),
        Take::Resume if state == "awaiting_approval" => Ok(false),
        Take::Resume if running && !live => Ok(true),
        Take::Resume => Err(SessionError::NotParked(format!(
            "session '{session_id}' is not awaiting an approval: another resume claimed it and is answering it"
        ))),
    }
}

/// A unique id for a session, a lease owner or a run.
pub(crate) fn fresh_id() -> String {
    use sha2::{Digest, Sha256};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::SeqCst);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let digest = Sha256::digest(format!("{}/{nanos}/{n}", std::process::id()).as_bytes());
    digest.iter().take(10).map(|b| format!("{b:02x}")).collect()
}

/// A run's hold on its session: renewed by a heartbeat while it lives; settled (appended and let go)
/// when the run ends; let go at once when dropped unsettled, so the next run takes over without waiting.
pub(crate) struct Lease {
    store: Arc<dyn SessionStore>,
    clock: Arc<dyn Clock>,
    session_id: String,
    owner: String,
    heartbeat: tokio::task::JoinHandle<()>,
    settled: AtomicBool,
}

impl Lease {
    /// Takes the session; what the take found (the claimed parked state, the interrupted calls).
    pub async fn take(sessions: &Sessions, session_id: &str, take: Take) -> Result<(Lease, Taken), SessionError> {
        let owner = fresh_id();
        let lease_ms = sessions.lease.as_millis() as i64;
        let store = sessions.store.clone();
        let taken = store.take(session_id, &owner, take, sessions.clock.now_ms(), lease_ms).await?;
        let beat = (store.clone(), sessions.clock.clone(), session_id.to_string(), owner.clone());
        let every = (sessions.lease / 3).max(Duration::from_millis(1));
        let heartbeat = tokio::spawn(async move {
            let (store, clock, session_id, owner) = beat;
            loop {
                tokio::time::sleep(every).await;
                // A lost lease, or a store that fails: the run's settle finds out.
                if !matches!(store.renew(&session_id, &owner, clock.now_ms(), lease_ms).await, Ok(true)) {
                    break;
                }
            }
        });
        let lease = Lease {
            store,
            clock: sessions.clock.clone(),
            session_id: session_id.to_string(),
            owner,
            heartbeat,
            settled: AtomicBool::new(false),
        };
        Ok((lease, taken))
    }

    /// Appends `items` and sets `state` in one transaction while this lease holds the session; a state
    /// other than `running` lets it go.
    pub async fn settle(&self, items: &[super::Item], state: SessionState) -> Result<Vec<i64>, SessionError> {
        let done = state.state != "running";
        let out = self.store.settle(&self.session_id, &self.owner, items, &state, self.clock.now_ms()).await;
        if done || out.is_err() {
            self.settled.store(true, Ordering::SeqCst);
            self.heartbeat.abort();
        }
        out
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.heartbeat.abort();
        if self.settled.load(Ordering::SeqCst) {
            return;
        }
        // Dropped mid-run (a cancelled future, a failed run): the session stays `running` with its
        // calls as recorded, and the next run takes it over at once.
        let (store, session_id, owner) = (self.store.clone(), self.session_id.clone(), self.owner.clone());
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = store.let_go(&session_id, &owner).await;
            });
        }
    }
}

tokio::task_local! {
    static JOURNAL: Arc<Journal>;
}

/// Where the calls of a session run are recorded: each under `run/turn/call id`.
pub(crate) struct Journal {
    store: Arc<dyn SessionStore>,
    clock: Arc<dyn Clock>,
    session_id: String,
    run: String,
    turn: AtomicU64,
    guarded: bool,
}

impl Journal {
    pub fn new(sessions: &Sessions, session_id: &str, run: String, turn: u64) -> Arc<Journal> {
        Arc::new(Journal {
            store: sessions.store.clone(),
            clock: sessions.clock.clone(),
            session_id: session_id.to_string(),
            run,
            turn: AtomicU64::new(turn),
            guarded: sessions.guarded,
        })
    }

    /// The run's id and its turn now: where a parked call's record will be found on resume.
    pub fn position(&self) -> (String, u64) {
        (self.run.clone(), self.turn.load(Ordering::SeqCst))
    }

    /// A model response came: the calls from here on are the next turn's.
    pub fn next_turn(&self) {
        self.turn.fetch_add(1, Ordering::SeqCst);
    }

    /// Runs `fut` with this journal recording the calls made in it.
    pub async fn scope<F: std::future::Future>(self: Arc<Self>, fut: F) -> F::Output {
        JOURNAL.scope(self, fut).await
    }
}

/// The journal of the session run this code runs in (never a sub-agent's: it does not park).
pub(crate) fn current() -> Option<Arc<Journal>> {
    if crate::agent::subagent::in_subagent() {
        return None;
    }
    JOURNAL.try_with(Arc::clone).ok()
}

/// What a call that a crash interrupted returns in place of running again.
fn interrupted(name: &str) -> ToolError {
    ToolError::Failed(format!(
        "this call to '{name}' was started by a run that was interrupted (its process stopped) before its result \
         was recorded: its outcome is unknown, it may or may not have taken effect, and it was not run again"
    ))
}

fn encode(result: &Result<Value, ToolError>) -> Value {
    match result {
        Ok(v) => json!({"ok": v}),
        Err(ToolError::Failed(m)) => json!({"failed": m}),
        Err(ToolError::Cancelled) => json!({"cancelled": true}),
    }
}

fn decode(outcome: Value) -> Result<Value, ToolError> {
    match outcome {
        Value::Object(mut o) => {
            if let Some(v) = o.remove("ok") {
                Ok(v)
            } else if let Some(Value::String(m)) = o.remove("failed") {
                Err(ToolError::Failed(m))
            } else {
                Err(ToolError::Cancelled)
            }
        }
        _ => Err(ToolError::Failed("the recorded outcome of this call is unreadable".into())),
    }
}

/// Runs a tool call (`run`) under the session's journal: recorded as started before it runs and
/// finished after. A call recorded before is not run again: a finished one returns its recorded
/// outcome; one started and never finished (its run died) tells the model its outcome is unknown,
/// unless the tool declares itself idempotent. Outside a session run, `run` simply runs.
pub(crate) async fn journaled<F>(call_id: &str, tool: &dyn Tool, arguments: &Value, run: F) -> Result<Value, ToolError>
where
    F: std::future::Future<Output = Result<Value, ToolError>>,
{
    let Some(journal) = current().filter(|j| j.guarded) else { return run.await };
    let name = &tool.spec().name;
    let (run_id, turn) = journal.position();
    let key = format!("{run_id}/{turn}/{call_id}");
    let (store, session_id) = (&journal.store, &journal.session_id);
    match store.call_started(session_id, &key, name, &arguments.to_string(), journal.clock.now_ms()).await {
        Ok(None) => {}
        Ok(Some(CallRecord::Finished(outcome))) => return decode(outcome),
        Ok(Some(CallRecord::Started)) if tool.spec().idempotent => {}
        Ok(Some(CallRecord::Started)) => return Err(interrupted(name)),
        Err(e) => {
            return Err(ToolError::Failed(format!(
                "the call to '{name}' could not be recorded as started, so it was not run: {e}"
            )));
        }
    }
    let result = run.await;
    if let Err(e) = store.call_finished(session_id, &key, &encode(&result), journal.clock.now_ms()).await {
        tracing::warn!(session_id = %session_id, call = %key, error = %e, "a call's outcome could not be recorded");
    }
    result
}

/// The message a run that takes over a session from a dead owner adds first: what that run started and
/// never finished, which is not run again.
pub(crate) fn interrupted_note(calls: &[StartedCall]) -> String {
    let mut note = String::from(
        "[A previous run in this session was interrupted: its process stopped before it finished, and its turns \
         are not in this conversation.",
    );
    if calls.is_empty() {
        note.push(']');
        return note;
    }
    note.push_str(
        " These tool calls were started and have no recorded result, so their outcome is unknown (they may or may \
         not have taken effect); they were not run again:",
    );
    for c in calls {
        note.push_str(&format!("\n- {} {}", c.name, c.arguments));
    }
    note.push(']');
    note
}
