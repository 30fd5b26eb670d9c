//! Background calls (SPEC §5): a call with `background: true` returns a task id at once and its result
//! arrives later as its own turn. A task reports progress notes; one silent longer than its heartbeat
//! window is failed as dead; cancellation is cooperative: the tool sees a token ([`TaskHandle`]) and
//! unwinds at its next checkpoint (for async code, its next `.await`).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::channel::mpsc;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::time::Instant;

use super::events::Emitter;
use super::run_state::RunState;
use crate::error::ToolError;
use crate::permission::Level;
use crate::tools::{Tool, ToolSpec};

/// How long a background task may stay silent (no progress note, no result) before it is failed as dead.
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(300);

/// How long a cancelled task has to unwind at its next checkpoint (SPEC §5: the token first, a grace
/// period, then abort).
pub const CANCEL_GRACE: Duration = Duration::from_secs(5);

tokio::task_local! {
    static CURRENT: TaskHandle;
}

struct Shared {
    id: String,
    cancelled: AtomicBool,
    notify: Notify,
    last_beat: Mutex<Instant>,
    note: Mutex<Option<String>>,
    events: Emitter,
}

/// What a tool running in the background sees of its task: its id, a way to report progress (which is
/// also its heartbeat), and the cancellation token.
#[derive(Clone)]
pub struct TaskHandle {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for TaskHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskHandle").field("id", &self.shared.id).finish()
    }
}

impl TaskHandle {
    /// The task the calling code runs in, when it runs in the background.
    pub fn current() -> Option<TaskHandle> {
        CURRENT.try_with(Clone::clone).ok()
    }

    /// The task's id.
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// Reports progress: a short note the run's events and `task_list` show. It is also proof of life.
    pub fn progress(&self, note: impl Into<String>) {
        let note = note.into();
        *self.shared.last_beat.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        *self.shared.note.lock().unwrap_or_else(|p| p.into_inner()) = Some(note.clone());
        // Coalesced: a task reporting in a loop holds one note in the stream, which reads as its latest.
        self.shared.events.progress(&self.shared.id, note);
    }

    /// Whether the task was asked to stop. A tool checks it at its checkpoints and unwinds.
    pub fn is_cancelled(&self) -> bool {
        self.shared.cancelled.load(Ordering::SeqCst)
    }

    /// Resolves when the task is asked to stop.
    pub async fn cancelled(&self) {
        loop {
            let notified = self.shared.notify.notified();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

/// How a task ended, or that it has not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Still running.
    Running,
    /// It returned its result.
    Finished,
    /// It returned an error, or was failed as dead (silent past its heartbeat window).
    Failed,
    /// It was cancelled.
    Cancelled,
    /// The process running it stopped before it reported (a session's task, read from the store).
    Lost,
}

impl TaskStatus {
    /// The status as stored and shown: `running`, `finished`, `failed`, `cancelled`, `lost`.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Running => "running",
            TaskStatus::Finished => "finished",
            TaskStatus::Failed => "failed",
            TaskStatus::Cancelled => "cancelled",
            TaskStatus::Lost => "lost",
        }
    }

    /// The status stored as `s`.
    pub fn parse(s: &str) -> Option<TaskStatus> {
        [TaskStatus::Running, TaskStatus::Finished, TaskStatus::Failed, TaskStatus::Cancelled, TaskStatus::Lost]
            .into_iter()
            .find(|t| t.as_str() == s)
    }
}

/// A finished task, as the loop delivers it.
#[derive(Debug, Clone)]
pub(crate) struct Report {
    pub id: String,
    pub name: String,
    pub result: String,
    pub is_error: bool,
    pub status: TaskStatus,
    /// The result's content parts when the tool returned images ([`crate::content::tool_content`]),
    /// within one result's budget; `result` is their text view. Empty for a text result.
    pub parts: Vec<crate::content::Part>,
}

impl Report {
    fn new(id: String, name: String, result: String, is_error: bool) -> Report {
        let status = if is_error { TaskStatus::Failed } else { TaskStatus::Finished };
        Report { id, name, result, is_error, status, parts: Vec::new() }
    }

    /// The turn that carries the result to the model, as text.
    pub fn message(&self) -> String {
        format!("{}\n{}", self.header(), self.result)
    }

    fn header(&self) -> String {
        let how = if self.is_error { "failed" } else { "finished" };
        format!("{TASK_REPORT_PREFIX}{} ({}) {how}]", self.id, self.name)
    }

    /// The user message that carries the result to the model: its text ([`Report::message`]), or, for
    /// a result with images, the header then the result's parts (their text view is that same text),
    /// so the images reach the model as a live call's do, on every wire.
    pub fn to_message(&self) -> crate::model::Message {
        if self.parts.is_empty() {
            return crate::model::Message::user(self.message());
        }
        let mut parts = vec![crate::content::Part::text(self.header())];
        parts.extend(self.parts.iter().cloned());
        crate::model::Message::user_parts(parts)
    }
}

/// How the message carrying a background task's result starts ([`Report::to_message`]): the per-request
/// tool image budget counts such a message's images as a tool result's ([`crate::content::budget_request`]).
pub(crate) const TASK_REPORT_PREFIX: &str = "[background task ";

/// The message that tells the model a task was lost with the process that ran it.
pub(crate) fn lost_message(id: &str, name: &str) -> String {
    format!(
        "[background task {id} ({name}) was lost]\nThe process running it stopped before it reported: its outcome is unknown, it may or may not have taken effect, and it was not run again."
    )
}

/// Where the background tasks of a session run are kept (crate::session): the store numbers and
/// records each task, the process renews the running ones, and a result that lands after its run
/// ended goes into the session and to the host.
#[async_trait]
pub(crate) trait TaskSink: Send + Sync {
    /// Records a new task of tool `name` as running; its id (`task_N`, counting in the session).
    async fn started(&self, name: &str) -> Result<String, String>;
    /// The process is alive and runs these tasks (id, latest note).
    async fn beat(&self, running: Vec<(String, Option<String>)>);
    /// How often [`TaskSink::beat`] is due.
    fn beat_every(&self) -> Duration;
    /// A task's result reached the run's model, as its own turn.
    async fn reported(&self, report: &Report, note: Option<String>);
    /// A task's result landed after its run ended: into the session, and the host is told.
    async fn landed(&self, report: Report, note: Option<String>);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Running,
    /// Its report is waiting for the loop.
    Reported,
    /// Its report reached the model.
    Delivered,
}

struct Entry {
    name: String,
    handle: TaskHandle,
    abort: futures::future::AbortHandle,
    state: State,
}

type Work = futures::future::BoxFuture<'static, ()>;

/// The background tasks of one run. They are polled by the run's own task ([`Tasks::driver`]), beside
/// the loop, so they see what the run's task carries (a binding's event loop, the run's state) and stop
/// when the run stops.
pub(crate) struct Tasks {
    next: AtomicU32,
    entries: Mutex<BTreeMap<String, Entry>>,
    tx: mpsc::UnboundedSender<Report>,
    rx: tokio::sync::Mutex<mpsc::UnboundedReceiver<Report>>,
    work_tx: mpsc::UnboundedSender<Work>,
    work_rx: Mutex<Option<mpsc::UnboundedReceiver<Work>>>,
    /// The session the tasks are kept in, when the run is a session's.
    sink: std::sync::OnceLock<Arc<dyn TaskSink>>,
    /// How long a cancelled task has to unwind before it is aborted.
    grace: Duration,
    /// Tasks a parked part of the run started (id, tool): [`Tasks::keep_elsewhere`].
    elsewhere: Mutex<Vec<(String, String)>>,
}

impl std::fmt::Debug for Tasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tasks").finish_non_exhaustive()
    }
}

impl Default for Tasks {
    fn default() -> Self {
        // futures' channels allocate per message: a run without background tasks (most) holds two
        // small channels, not two of tokio's 32-slot blocks (2.7 KB a run, issue 18's RSS per run).
        let (tx, rx) = mpsc::unbounded();
        let (work_tx, work_rx) = mpsc::unbounded();
        Tasks {
            next: AtomicU32::new(0),
            entries: Mutex::default(),
            tx,
            rx: tokio::sync::Mutex::new(rx),
            work_tx,
            work_rx: Mutex::new(Some(work_rx)),
            sink: std::sync::OnceLock::new(),
            grace: CANCEL_GRACE,
            elsewhere: Mutex::default(),
        }
    }
}

impl Drop for Tasks {
    fn drop(&mut self) {
        for e in self.entries.get_mut().unwrap_or_else(|p| p.into_inner()).values() {
            e.abort.abort();
        }
    }
}

impl Tasks {
    /// Keeps the tasks in a session (set before the first task starts, once).
    pub fn keep_in(&self, sink: Arc<dyn TaskSink>) {
        let _ = self.sink.set(sink);
    }

    /// Whether the tasks are a session's: they may outlive the run ([`Tasks::outlive`]).
    pub fn kept(&self) -> bool {
        self.sink.get().is_some()
    }

    /// Polls the background tasks until dropped (never finishes); the run selects it beside the loop.
    /// Tasks kept in a session have their heartbeat renewed in the store from here.
    pub fn driver(self: &Arc<Self>) -> impl Future<Output = ()> + Send + 'static {
        let incoming = self.work_rx.lock().unwrap_or_else(|p| p.into_inner()).take();
        let (tasks, sink) = (Arc::downgrade(self), self.sink.get().cloned());
        async move {
            use futures::StreamExt;
            let Some(mut incoming) = incoming else { return std::future::pending().await };
            let mut running = futures::stream::FuturesUnordered::new();
            let every = sink.as_ref().map_or(Duration::from_secs(3600), |s| s.beat_every());
            let mut beat = tokio::time::interval(every);
            beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    Some(w) = incoming.next() => running.push(w),
                    Some(()) = running.next(), if !running.is_empty() => {}
                    _ = beat.tick(), if sink.is_some() => {
                        let (Some(sink), Some(tasks)) = (sink.clone(), tasks.upgrade()) else { continue };
                        let live = tasks.running();
                        if !live.is_empty() {
                            running.push(Box::pin(async move { sink.beat(live).await }));
                        }
                    }
                    else => std::future::pending::<()>().await,
                }
            }
        }
    }

    /// The running tasks with their latest notes.
    fn running(&self) -> Vec<(String, Option<String>)> {
        self.lock()
            .iter()
            .filter(|(_, e)| e.state == State::Running)
            .map(|(id, e)| (id.clone(), e.handle.shared.note.lock().unwrap_or_else(|p| p.into_inner()).clone()))
            .collect()
    }

    fn note_of(&self, id: &str) -> Option<String> {
        self.lock().get(id).and_then(|e| e.handle.shared.note.lock().unwrap_or_else(|p| p.into_inner()).clone())
    }

    /// A report reached the run's model: the session keeps it too.
    pub async fn delivered(&self, report: &Report) {
        if let Some(sink) = self.sink.get() {
            sink.reported(report, self.note_of(&report.id)).await;
        }
    }

    /// The tasks of a run that ended with some outstanding, kept in a session: `driver` (this run's,
    /// taken from its select) goes on polling them and each result lands in the session as it comes.
    /// Resolves when none is outstanding.
    pub async fn outlive(self: Arc<Self>, driver: impl Future<Output = ()>, heartbeat: Duration) {
        let Some(sink) = self.sink.get().cloned() else { return };
        let landing = async {
            while let Some(r) = self.next_report(heartbeat).await {
                let note = self.note_of(&r.id);
                sink.landed(r, note).await;
            }
        };
        futures::pin_mut!(driver, landing);
        futures::future::select(driver, landing).await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts `work` (a tool call: its result text, whether it is an error, and the result's content
    /// parts when it carries images) as task `task_N` (N
    /// counting in the run, or in the session that keeps the tasks). Fails when the session could not
    /// record it: the work does not start.
    pub async fn spawn<F>(self: &Arc<Self>, name: &str, events: &Emitter, work: F) -> Result<String, String>
    where
        F: Future<Output = (String, bool, Vec<crate::content::Part>)> + Send + 'static,
    {
        let id = match self.sink.get() {
            Some(sink) => sink.started(name).await?,
            None => format!("task_{}", self.next.fetch_add(1, Ordering::SeqCst) + 1),
        };
        let handle = TaskHandle {
            shared: Arc::new(Shared {
                id: id.clone(),
                cancelled: AtomicBool::new(false),
                notify: Notify::new(),
                last_beat: Mutex::new(Instant::now()),
                note: Mutex::new(None),
                events: events.clone(),
            }),
        };
        let tasks = Arc::downgrade(self);
        let (task_id, task_name, scoped) = (id.clone(), name.to_string(), handle.clone());
        // Registered before it is polled, so its report always finds its entry.
        let (work, abort) = futures::future::abortable(async move {
            let (result, is_error, parts) = CURRENT.scope(scoped, work).await;
            if let Some(tasks) = tasks.upgrade() {
                let mut report = Report::new(task_id, task_name, result, is_error);
                report.parts = parts;
                tasks.report(report);
            }
        });
        self.lock().insert(id.clone(), Entry { name: name.to_string(), handle, abort, state: State::Running });
        let _ = self.work_tx.unbounded_send(Box::pin(async move {
            let _ = work.await;
        }));
        Ok(id)
    }

    /// Sends a task's report once: the first of finishing, being cancelled or being failed as dead wins.
    fn report(&self, report: Report) {
        let mut entries = self.lock();
        if let Some(e) = entries.get_mut(&report.id)
            && e.state == State::Running
        {
            e.state = State::Reported;
            let _ = self.tx.unbounded_send(report);
        }
    }

    /// The tasks whose result has not reached the run (id, tool): its own, and those a parked part of
    /// the run started ([`Tasks::keep_elsewhere`]).
    pub fn outstanding_list(&self) -> Vec<(String, String)> {
        let mut out = self.elsewhere.lock().unwrap_or_else(|p| p.into_inner()).clone();
        out.extend(
            self.lock().iter().filter(|(_, e)| e.state != State::Delivered).map(|(id, e)| (id.clone(), e.name.clone())),
        );
        out
    }

    /// Tasks a parked part of this run started, still outstanding when it parked: they run on in the
    /// process that started them and land in the session. `task_list` shows them.
    pub fn keep_elsewhere(&self, tasks: impl IntoIterator<Item = (String, String)>) {
        self.elsewhere.lock().unwrap_or_else(|p| p.into_inner()).extend(tasks);
    }

    /// Tasks whose result has not reached the model yet.
    pub fn outstanding(&self) -> usize {
        self.lock().values().filter(|e| e.state != State::Delivered).count()
    }

    /// Waits for the next report, failing as dead every task silent for longer than `heartbeat`; `None`
    /// when nothing is outstanding. The report is marked delivered.
    pub async fn next_report(&self, heartbeat: Duration) -> Option<Report> {
        let r = self.wait_report(heartbeat).await?;
        self.mark_delivered(&r);
        Some(r)
    }

    /// The next report if one is ready now, marked delivered; never waits.
    pub fn ready_report(&self) -> Option<Report> {
        let r = self.rx.try_lock().ok()?.try_recv().ok()?;
        self.mark_delivered(&r);
        Some(r)
    }

    fn mark_delivered(&self, r: &Report) {
        if let Some(e) = self.lock().get_mut(&r.id) {
            e.state = State::Delivered;
        }
    }

    async fn wait_report(&self, heartbeat: Duration) -> Option<Report> {
        let mut rx = self.rx.lock().await;
        loop {
            let deadline = {
                let entries = self.lock();
                let running: Vec<Instant> = entries
                    .values()
                    .filter(|e| e.state == State::Running)
                    .map(|e| *e.handle.shared.last_beat.lock().unwrap_or_else(|p| p.into_inner()) + heartbeat)
                    .collect();
                if running.is_empty() {
                    return rx.try_recv().ok();
                }
                running.into_iter().min()
            };
            let deadline = deadline?;
            tokio::select! {
                r = futures::StreamExt::next(&mut *rx) => return r,
                _ = tokio::time::sleep_until(deadline) => {
                    let now = Instant::now();
                    let dead: Vec<(String, String)> = self
                        .lock()
                        .iter()
                        .filter(|(_, e)| e.state == State::Running)
                        .filter(|(_, e)| *e.handle.shared.last_beat.lock().unwrap_or_else(|p| p.into_inner()) + heartbeat <= now)
                        .map(|(id, e)| (id.clone(), e.name.clone()))
                        .collect();
                    for (id, name) in dead {
                        self.stop(&id);
                        let result = format!(
                            "Error: background task {id} ({name}) was failed as dead: no progress note or result for more than {} s",
                            heartbeat.as_secs_f64()
                        );
                        self.report(Report::new(id, name, result, true));
                    }
                }
            }
        }
    }

    /// Stops a task cooperatively (SPEC §5): the token first, which a tool sees at its next
    /// checkpoint and unwinds; then, after the grace period [`CANCEL_GRACE`], the task is aborted if it
    /// is still running.
    fn stop(&self, id: &str) {
        if let Some(e) = self.lock().get(id) {
            e.handle.shared.cancelled.store(true, Ordering::SeqCst);
            e.handle.shared.notify.notify_waiters();
            let (abort, grace) = (e.abort.clone(), self.grace);
            let _ = self.work_tx.unbounded_send(Box::pin(async move {
                tokio::time::sleep(grace).await;
                abort.abort();
            }));
        }
    }

    /// Cancels a running task; its report (an error result) arrives as its own turn.
    pub fn cancel(&self, id: &str, reason: Option<&str>) -> Result<String, String> {
        let name = {
            let entries = self.lock();
            let e = entries.get(id).ok_or_else(|| format!("there is no background task '{id}'"))?;
            if e.state != State::Running {
                return Err(format!("background task {id} ({}) has already reported", e.name));
            }
            e.name.clone()
        };
        self.stop(id);
        let why = reason.map(|r| format!(": {r}")).unwrap_or_default();
        let result = format!("Error: background task {id} ({name}) was cancelled{why}");
        let mut report = Report::new(id.to_string(), name.clone(), result, true);
        report.status = TaskStatus::Cancelled;
        self.report(report);
        Ok(format!("Cancelled background task {id} ({name}){why}."))
    }

    /// `task_list`: every task with its tool, status and latest progress note.
    pub fn list(&self) -> String {
        let entries = self.lock();
        let elsewhere = self.elsewhere.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if entries.is_empty() && elsewhere.is_empty() {
            return "No background tasks.".to_string();
        }
        let earlier = elsewhere.iter().map(|(id, name)| {
            format!("{id} ({name}): started before this run parked; its result lands in the session as its own turn")
        });
        let lines: Vec<String> = earlier
            .chain(entries.iter().map(|(id, e)| {
                let status = if e.state == State::Running { "running" } else { "reported" };
                let note = e.handle.shared.note.lock().unwrap_or_else(|p| p.into_inner()).clone();
                match note {
                    Some(n) => format!("{id} ({}): {status}; latest note: {n}", e.name),
                    None => format!("{id} ({}): {status}", e.name),
                }
            }))
            .collect();
        lines.join("\n")
    }

    /// Whether a checklist item may wait on `id`: a task that is still running.
    pub fn may_be_waited_on(&self, id: &str) -> Result<(), String> {
        match self.lock().get(id) {
            None => Err(format!("there is no background task '{id}'")),
            Some(e) if e.state != State::Running => Err(format!("background task {id} has already reported")),
            Some(_) => Ok(()),
        }
    }
}

/// What the model is told about its background call.
pub(crate) fn started_note(id: &str, name: &str) -> String {
    format!(
        "Started background task {id} ({name}). Its result will arrive as its own turn; do not wait for it. task_list shows it, task_cancel stops it."
    )
}

struct ListTool(ToolSpec);
struct CancelTool(ToolSpec);

fn tasks() -> Result<Arc<RunState>, ToolError> {
    RunState::current().ok_or_else(|| ToolError::failed("background tasks exist only inside a run"))
}

#[async_trait]
impl Tool for ListTool {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    async fn call(&self, _arguments: Value) -> Result<Value, ToolError> {
        Ok(Value::String(tasks()?.tasks.list()))
    }
}

#[async_trait]
impl Tool for CancelTool {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        let id = arguments.get("task_id").and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
        let id = id.ok_or_else(|| ToolError::failed("task_id is required"))?;
        let reason = arguments.get("reason").and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
        tasks()?.tasks.cancel(id, reason).map(Value::String).map_err(ToolError::failed)
    }
}

/// `task_list` and `task_cancel`, at level `read`.
pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ListTool(
            ToolSpec::new(
                "task_list",
                "Lists this run's background tasks: id, tool, status and latest progress note.",
                json!({"type": "object", "properties": {}}),
            )
            .with_level(Level::Read)
            // Both act on the background tasks themselves: nothing to detach.
            .with_inline(true),
        )),
        Arc::new(CancelTool(
            ToolSpec::new(
                "task_cancel",
                "Cancels a running background task by id. Cancellation is cooperative: the task stops at its next checkpoint; its result arrives as a cancelled error.",
                json!({"type": "object", "properties": {"task_id": {"type": "string"}, "reason": {"type": "string"}}, "required": ["task_id"]}),
            )
            .with_level(Level::Read)
            .with_inline(true),
        )),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_silent_task_is_failed_as_dead_and_a_cancelled_one_reports_once() {
        let tasks = Arc::new(Tasks::default());
        tokio::spawn(tasks.driver());
        let events = Emitter::default();
        let id = tasks
            .spawn("sleepy", &events, async {
                std::future::pending::<()>().await;
                (String::new(), false, Vec::new())
            })
            .await
            .unwrap();
        let r = tasks.next_report(Duration::from_millis(20)).await.unwrap();
        assert_eq!(r.id, id);
        assert!(r.is_error && r.result.contains("failed as dead"), "{r:?}");
        assert!(tasks.cancel(&id, None).unwrap_err().contains("already reported"));

        let id = tasks
            .spawn("waits", &events, async {
                let me = TaskHandle::current().unwrap();
                me.progress("started");
                me.cancelled().await;
                ("unwound".to_string(), false, Vec::new())
            })
            .await
            .unwrap();
        assert!(tasks.list().contains("running"));
        assert_eq!(
            tasks.cancel(&id, Some("not needed")).unwrap(),
            format!("Cancelled background task {id} (waits): not needed.")
        );
        let r = tasks.next_report(Duration::from_secs(60)).await.unwrap();
        assert!(r.result.contains("was cancelled: not needed"), "{r:?}");
        assert_eq!(r.status, TaskStatus::Cancelled);
        assert_eq!(tasks.outstanding(), 0);
        assert!(tasks.next_report(Duration::from_secs(60)).await.is_none());
    }

    /// Sets its flag when dropped: a task's future was dropped (aborted, or finished).
    struct Dropped(Arc<AtomicBool>);
    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    async fn until(what: &str, flag: &AtomicBool) {
        let started = std::time::Instant::now();
        while !flag.load(Ordering::SeqCst) {
            assert!(started.elapsed() < Duration::from_secs(30), "{what}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn a_cancel_gives_the_token_first_and_aborts_only_after_the_grace_period() {
        let mut tasks = Tasks::default();
        tasks.grace = Duration::from_millis(200);
        let tasks = Arc::new(tasks);
        tokio::spawn(tasks.driver());
        let events = Emitter::default();
        // A cooperative task: it sees the token and unwinds with async steps of its own, which a cancel
        // that aborted at once would cut (the negative control of the grace).
        let unwound = Arc::new(AtomicBool::new(false));
        let flag = unwound.clone();
        let id = tasks
            .spawn("cooperative", &events, async move {
                let me = TaskHandle::current().unwrap();
                me.cancelled().await;
                for _ in 0..3 {
                    tokio::task::yield_now().await;
                }
                flag.store(true, Ordering::SeqCst);
                ("unwound".to_string(), false, Vec::new())
            })
            .await
            .unwrap();
        tokio::task::yield_now().await;
        tasks.cancel(&id, None).unwrap();
        assert_eq!(tasks.next_report(Duration::from_secs(60)).await.unwrap().status, TaskStatus::Cancelled);
        until("the cooperative task could not finish unwinding", &unwound).await;

        // A task that ignores the token is not aborted at the cancel; it is once the grace period is over.
        let dropped = Arc::new(AtomicBool::new(false));
        let guard = Dropped(dropped.clone());
        let id = tasks
            .spawn("stubborn", &events, async move {
                let _guard = guard;
                std::future::pending::<()>().await;
                (String::new(), false, Vec::new())
            })
            .await
            .unwrap();
        tokio::task::yield_now().await;
        tasks.cancel(&id, None).unwrap();
        tokio::task::yield_now().await;
        assert!(!dropped.load(Ordering::SeqCst), "aborted at the cancel, before any grace");
        until("not aborted after the grace period", &dropped).await;
    }
}

/// The task a host-language tool call runs in, by a number a binding can pass to its language: the
/// tool then reports progress ([`host_task_progress`]) and checks its cancellation token
/// ([`host_task_cancelled`]) through the binding. Registered for the length of the call.
#[derive(Debug)]
pub struct HostTask {
    token: u64,
}

fn host_tasks() -> &'static Mutex<std::collections::HashMap<u64, TaskHandle>> {
    static TASKS: std::sync::OnceLock<Mutex<std::collections::HashMap<u64, TaskHandle>>> = std::sync::OnceLock::new();
    TASKS.get_or_init(Default::default)
}

impl HostTask {
    /// Registers the calling code's background task, if it runs in one. Token 0 means "not in the
    /// background": progress goes nowhere and the call is never cancelled cooperatively.
    pub fn enter() -> HostTask {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        match TaskHandle::current() {
            Some(handle) => {
                let token = NEXT.fetch_add(1, Ordering::SeqCst);
                host_tasks().lock().unwrap_or_else(|p| p.into_inner()).insert(token, handle);
                HostTask { token }
            }
            None => HostTask { token: 0 },
        }
    }

    /// The token the host's task context carries (0: not in a background task).
    pub fn token(&self) -> u64 {
        self.token
    }
}

impl Drop for HostTask {
    fn drop(&mut self) {
        if self.token != 0 {
            host_tasks().lock().unwrap_or_else(|p| p.into_inner()).remove(&self.token);
        }
    }
}

fn host_task(token: u64) -> Option<TaskHandle> {
    host_tasks().lock().unwrap_or_else(|p| p.into_inner()).get(&token).cloned()
}

/// Reports progress for the host task `token` (a heartbeat too). False when the call is not (or no
/// longer) a background task.
pub fn host_task_progress(token: u64, note: &str) -> bool {
    host_task(token).map(|h| h.progress(note)).is_some()
}

/// Whether the host task `token` was asked to stop. A call that is not a background task (token 0)
/// never is; a token no longer registered belongs to a call that is over (cancelled and dropped, or
/// finished), so its code should stop too.
pub fn host_task_cancelled(token: u64) -> bool {
    token != 0 && host_task(token).is_none_or(|h| h.is_cancelled())
}
