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

/// The longest a run may be asked to wait for a busy session (`busy_wait_ms`): one hour.
pub const MAX_BUSY_WAIT_MS: u64 = 3_600_000;

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
/// Every write a run makes to the log goes through [`Lease::settle`], which checks that this lease still
/// holds the session in the same transaction.
pub(crate) struct Lease {
    store: Arc<dyn SessionStore>,
    clock: Arc<dyn Clock>,
    session_id: String,
    owner: String,
    heartbeat: tokio::task::JoinHandle<()>,
    settled: AtomicBool,
    lost: Arc<tokio::sync::watch::Sender<bool>>,
    lease_ms: i64,
}

/// Releases of dropped leases still under way in this process, by session: a `take` of the same
/// session waits for them first, so a run that follows a cancelled one is not refused by its lease.
static RELEASING: std::sync::Mutex<Vec<(String, tokio::task::JoinHandle<()>)>> = std::sync::Mutex::new(Vec::new());

fn releasing() -> std::sync::MutexGuard<'static, Vec<(String, tokio::task::JoinHandle<()>)>> {
    RELEASING.lock().unwrap_or_else(|p| p.into_inner())
}

/// Waits for the releases of `session_id` this process started and has not finished.
async fn released(session_id: &str) {
    let pending: Vec<tokio::task::JoinHandle<()>> = {
        let mut all = releasing();
        all.retain(|(_, h)| !h.is_finished());
        let (mine, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut *all).into_iter().partition(|(s, _)| s == session_id);
        *all = rest;
        mine.into_iter().map(|(_, h)| h).collect()
    };
    for h in pending {
        let _ = h.await;
    }
}

impl Lease {
    /// Takes the session; what the take found (the claimed parked state, the interrupted calls).
    pub async fn take(sessions: &Sessions, session_id: &str, take: Take) -> Result<(Lease, Taken), SessionError> {
        released(session_id).await;
        let owner = fresh_id();
        let lease_ms = sessions.lease.as_millis() as i64;
        let taken = Self::take_waiting(sessions, session_id, &owner, take, lease_ms).await?;
        Ok((Self::held(sessions, session_id, owner), taken))
    }

    /// Creates the root session `session_id`, titled `title`, held by a new lease for a run: one write
    /// where `create`, `take` and `title` make three. `None` when the session exists already (nothing
    /// written): the run takes it with [`Lease::take`].
    pub async fn create(sessions: &Sessions, session_id: &str, title: &str) -> Result<Option<Lease>, SessionError> {
        let owner = fresh_id();
        let lease_ms = sessions.lease.as_millis() as i64;
        let title = (!title.is_empty()).then_some(title);
        let now = sessions.clock.now_ms();
        if !sessions.store.create_taken(session_id, title, &owner, now, lease_ms).await? {
            return Ok(None);
        }
        Ok(Some(Self::held(sessions, session_id, owner)))
    }

    /// The lease `owner` holds on the session since a take: its heartbeat started.
    fn held(sessions: &Sessions, session_id: &str, owner: String) -> Lease {
        let lease_ms = sessions.lease.as_millis() as i64;
        let store = sessions.store.clone();
        let lost = Arc::new(tokio::sync::watch::channel(false).0);
        let beat = (store.clone(), sessions.clock.clone(), session_id.to_string(), owner.clone(), lost.clone());
        let every = (sessions.lease / 3).max(Duration::from_millis(1));
        let heartbeat = tokio::spawn(async move {
            let (store, clock, session_id, owner, lost) = beat;
            loop {
                tokio::time::sleep(every).await;
                match store.renew(&session_id, &owner, clock.now_ms(), lease_ms).await {
                    Ok(true) => {}
                    // Taken over: the run is cancelled (its `go_on` waits on this).
                    Ok(false) => {
                        lost.send_replace(true);
                        break;
                    }
                    // A store that failed once: the next tick tries again; the lease may run out meanwhile,
                    // and then a renewal finds it lost.
                    Err(e) => tracing::warn!(session_id = %session_id, error = %e, "a lease renewal failed"),
                }
            }
        });
        Lease {
            store,
            clock: sessions.clock.clone(),
            session_id: session_id.to_string(),
            owner,
            heartbeat,
            settled: AtomicBool::new(false),
            lost,
            lease_ms,
        }
    }

    /// Takes the session, or, while another run holds it, waits for it up to the store's `busy_wait_ms`
    /// (polling the store: from 10 ms, doubling to 500 ms between tries), then refuses with
    /// `session_busy` saying how long it waited.
    async fn take_waiting(
        sessions: &Sessions,
        session_id: &str,
        owner: &str,
        take: Take,
        lease_ms: i64,
    ) -> Result<Taken, SessionError> {
        let bound = Duration::from_millis(sessions.config.busy_wait_ms.unwrap_or(0));
        let started = tokio::time::Instant::now();
        let mut pause = Duration::from_millis(10);
        loop {
            match sessions.store.take(session_id, owner, take, sessions.clock.now_ms(), lease_ms).await {
                Err(SessionError::Busy(why)) if !bound.is_zero() => {
                    let waited = started.elapsed();
                    if waited >= bound {
                        return Err(SessionError::Busy(format!(
                            "{why} (waited {} ms for it, the most busy_wait_ms allows)",
                            waited.as_millis()
                        )));
                    }
                    tokio::time::sleep(pause.min(bound - waited)).await;
                    pause = (pause * 2).min(Duration::from_millis(500));
                }
                other => return other,
            }
        }
    }

    /// The lease's owner id.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The signal that this lease was lost (taken over): set by the heartbeat or by a refused call.
    pub fn lost_signal(&self) -> Arc<tokio::sync::watch::Sender<bool>> {
        self.lost.clone()
    }

    /// Resolves once this lease is known lost.
    pub async fn lost(&self) {
        let mut rx = self.lost.subscribe();
        let _ = rx.wait_for(|lost| *lost).await;
    }

    /// Whether this lease still holds the session (renewing it); a lease found lost is signalled so.
    pub async fn check(&self) -> Result<(), SessionError> {
        match self.store.renew(&self.session_id, &self.owner, self.clock.now_ms(), self.lease_ms).await? {
            true => Ok(()),
            false => {
                self.lost.send_replace(true);
                Err(SessionError::Busy(format!(
                    "session '{}' was taken over by another run: this run's lease ran out",
                    self.session_id
                )))
            }
        }
    }

    /// Appends `items` and sets `state` in one transaction while this lease holds the session; a state
    /// other than `running` lets it go.
    pub async fn settle(&self, items: &[super::Item], state: SessionState) -> Result<Vec<i64>, SessionError> {
        let done = state.state != "running";
        let out = self.store.settle(&self.session_id, &self.owner, items, &state, self.clock.now_ms()).await;
        if let Err(SessionError::Busy(_)) = &out {
            self.lost.send_replace(true);
        }
        if done || out.is_err() {
            self.settled.store(true, Ordering::SeqCst);
            self.heartbeat.abort();
        }
        out
    }

    /// Appends `items` to the log while this lease holds the session, the run going on.
    pub async fn append(&self, items: &[super::Item]) -> Result<Vec<i64>, SessionError> {
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let out = self
            .store
            .settle(
                &self.session_id,
                &self.owner,
                items,
                &SessionState { state: "running".into(), parked: None },
                self.clock.now_ms(),
            )
            .await;
        if let Err(SessionError::Busy(_)) = &out {
            self.lost.send_replace(true);
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
        // calls as recorded, and the next run takes it over at once. The release is a task on the
        // runtime. On a multi-threaded runtime the drop waits for it (at most 10 s), so a host that gives
        // up on a run and exits lets its session go; a runtime shutting down (a host's runtime dropped
        // with runs in flight) cancels the task at once, and the drop does not wait: the release would
        // need the drivers the shutdown stopped. Otherwise the next `take` of the session in this
        // process waits for it.
        let (store, session_id, owner) = (self.store.clone(), self.session_id.clone(), self.owner.clone());
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        let (released, wait) = std::sync::mpsc::channel::<()>();
        let task = rt.spawn({
            let session_id = session_id.clone();
            async move {
                let _ = store.let_go(&session_id, &owner).await;
                let _ = released.send(());
            }
        });
        if rt.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread {
            let waited = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                tokio::task::block_in_place(|| wait.recv_timeout(Duration::from_secs(10)))
            }));
            if let Ok(Ok(())) = waited {
                return;
            }
        }
        releasing().push((session_id, task));
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
    /// The lease the run holds: a call is recorded (and runs) only while it holds the session.
    owner: String,
    lost: Arc<tokio::sync::watch::Sender<bool>>,
}

impl Journal {
    pub fn new(sessions: &Sessions, session_id: &str, lease: &Lease, run: String, turn: u64) -> Arc<Journal> {
        Arc::new(Journal {
            owner: lease.owner().to_string(),
            lost: lease.lost_signal(),
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

/// The journal of the session run this code runs in, a sub-agent's calls included (never a background
/// task's: it may outlive the run and its lease, and a task whose process died is never run again but
/// read `lost`, session/tasks.rs).
pub(crate) fn current() -> Option<Arc<Journal>> {
    if crate::agent::background::TaskHandle::current().is_some() {
        return None;
    }
    JOURNAL.try_with(Arc::clone).ok()
}

/// The journal key of call `call_id` made now: the run, its turn, and in a sub-agent the sub-agent's id
/// and its own turn.
fn key_of(journal: &Journal, call_id: &str) -> String {
    let (run_id, turn) = journal.position();
    // The model's id is escaped so its `/` cannot mimic a sub-agent's position (`x/1/y`); ids without
    // `/` or `%` keep their key.
    let call_id = call_id.replace('%', "%25").replace('/', "%2F");
    match crate::agent::subagent::journal_position() {
        Some(sub) => format!("{run_id}/{turn}/{sub}/{call_id}"),
        None => format!("{run_id}/{turn}/{call_id}"),
    }
}

/// What a call that a crash interrupted returns in place of running again.
fn interrupted(name: &str) -> ToolError {
    ToolError::Failed(format!(
        "this call to '{name}' was started earlier (it was approved, or needed no approval) by a run that was \
         interrupted (cancelled, or its process stopped) before its result was recorded: its outcome is unknown, \
         it may or may not have taken effect, and it was not run again"
    ))
}

fn encode(result: &Result<Value, ToolError>) -> Value {
    match result {
        Ok(v) => json!({"ok": v}),
        Err(ToolError::Failed(m) | ToolError::Raised { message: m, .. }) => json!({"failed": m}),
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
    let key = key_of(&journal, call_id);
    let (store, session_id) = (&journal.store, &journal.session_id);
    let owner = &journal.owner;
    match store.call_started(session_id, owner, &key, name, &arguments.to_string(), journal.clock.now_ms()).await {
        Ok(None) => {}
        Ok(Some(CallRecord::Finished(outcome))) => return decode(outcome),
        Ok(Some(CallRecord::Started)) if tool.spec().idempotent => {}
        Ok(Some(CallRecord::Started)) => return Err(interrupted(name)),
        Err(e @ SessionError::Busy(_)) => {
            // Taken over: this run no longer holds the session; it is cancelled, and the call never runs.
            journal.lost.send_replace(true);
            return Err(ToolError::Failed(format!("the call to '{name}' was not run: {e}")));
        }
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

/// What the journal of the current session run holds for `call_id`, when a call put to a person is
/// answered: a call recorded before is not run (or denied) anew, whatever the answer. `None` when the
/// answer decides (nothing recorded, or a started idempotent call that `runs` again, or no session run).
pub(crate) async fn recorded(call_id: &str, tool: &dyn Tool, runs: bool) -> Option<Result<Value, ToolError>> {
    let journal = current().filter(|j| j.guarded)?;
    let key = key_of(&journal, call_id);
    let name = &tool.spec().name;
    match journal.store.call(&journal.session_id, &key).await {
        Ok(None) => None,
        Ok(Some(CallRecord::Finished(outcome))) => Some(decode(outcome)),
        Ok(Some(CallRecord::Started)) if runs && tool.spec().idempotent => None,
        Ok(Some(CallRecord::Started)) => Some(Err(interrupted(name))),
        Err(e) => Some(Err(ToolError::Failed(format!(
            "the journal of the call to '{name}' could not be read, so the call was not run: {e}"
        )))),
    }
}

/// The most of a call's arguments the takeover note quotes.
const NOTE_ARGUMENTS: usize = 1024;

/// The message a run that takes over a session from a dead owner adds first: what that run started and
/// never finished, which is not run again: its tool calls (`calls`) and its background tasks found lost
/// (`tasks`, task id and tool name).
pub(crate) fn interrupted_note(calls: &[StartedCall], tasks: &[(String, String)]) -> String {
    let mut note = String::from(
        "[A previous run in this session was interrupted (cancelled, or its process stopped) before it finished, \
         and its turns are not in this conversation.",
    );
    if calls.is_empty() && tasks.is_empty() {
        note.push(']');
        return note;
    }
    if !calls.is_empty() {
        note.push_str(
            " These tool calls were started and have no recorded result, so their outcome is unknown (they may or \
             may not have taken effect); they were not run again:",
        );
    }
    for c in calls {
        let mut arguments = c.arguments.clone();
        if arguments.len() > NOTE_ARGUMENTS {
            let mut cut = NOTE_ARGUMENTS;
            while !arguments.is_char_boundary(cut) {
                cut -= 1;
            }
            arguments.truncate(cut);
            arguments.push_str(&format!("… [cut: {} bytes in all]", c.arguments.len()));
        }
        note.push_str(&format!("\n- {} {arguments}", c.name));
    }
    if !tasks.is_empty() {
        note.push_str(
            "\nThese background tasks were running in its process and are lost: their outcome is unknown (they may \
             or may not have taken effect); they were not run again:",
        );
    }
    for (id, name) in tasks {
        note.push_str(&format!("\n- background task {id} ({name})"));
    }
    note.push(']');
    note
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_takeover_note_cuts_long_arguments_and_says_a_cancel_is_possible() {
        let long = format!("{{\"body\":\"{}\"}}", "é".repeat(5000));
        let calls = [
            StartedCall { key: "r/0/a".into(), name: "send".into(), arguments: long.clone() },
            StartedCall { key: "r/0/b".into(), name: "ping".into(), arguments: "{}".into() },
        ];
        let note = interrupted_note(&calls, &[]);
        assert!(note.contains("cancelled, or its process stopped"), "{note}");
        assert!(note.contains(&format!("[cut: {} bytes in all]", long.len())), "{note}");
        assert!(note.contains("\n- ping {}"), "{note}");
        // The quoted arguments stay within the bound (plus the marker), whatever the input's size.
        assert!(note.len() < 1024 + 600, "{}", note.len());
        // Negative control: short arguments are quoted whole, with no marker.
        let short = interrupted_note(&calls[1..], &[]);
        assert!(!short.contains("[cut:"), "{short}");
    }
}
