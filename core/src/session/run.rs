//! A run in a session: the live window (after the last compaction) is the conversation the run
//! continues; its new messages are appended to the log, each once and in order, when a compaction
//! between rounds needs them there and when the run ends. Auto-compaction fires before a run whose
//! window is past the ceiling, and at a round boundary inside a run (before a model request) once the
//! window is past it: the last response's reported input tokens plus an estimate of what was added
//! since, or an estimate of the whole when no count was reported. A `context_compact` call compacts at
//! the next round boundary, or when the run ends if nothing before the round in flight can be
//! summarised yet.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use tracing::Instrument;

use serde::{Deserialize, Serialize};

use super::durable::{self, Journal, Lease, Take};
use super::rules::{self, Gauge, Item, Overhead};
use super::store::Live;
use super::{SessionError, SessionState, Sessions, now_ms};
use crate::agent::run_state::{self, Rounds, RunSnapshot};
use crate::agent::{Agent, RunResult};
use crate::model::{Message, ModelRequest, Usage};
use crate::permission::{ApprovalDecision, ApprovalRequest};

tokio::task_local! {
    static CURRENT: Arc<Current>;
}

/// What the session tools of a run reach.
pub(crate) struct Current {
    pub sessions: Sessions,
    pub session_id: String,
    /// Instructions and tool schemas, estimated in tokens.
    pub overhead: Overhead,
    /// A `context_compact` request: its keep_recent and instructions.
    pub compact: Mutex<Option<(bool, Option<String>)>>,
    pub compact_asked: AtomicBool,
    /// Calls whose approval was answered "later", in the model's order.
    pub parked_calls: Mutex<Vec<ParkedCall>>,
    /// The run's conversation when it stopped for them.
    pub parked_messages: Mutex<Option<Vec<Message>>>,
    /// The run's state when it stopped for them.
    parked_run: Mutex<Option<RunSnapshot>>,
    /// The state of the parked run this run resumes, until the loop takes it.
    restored: Mutex<Option<RunSnapshot>>,
    /// The agent running, for the summariser of a compaction between rounds.
    agent: Agent,
    /// How many of the run's messages, from the first, are in the log (its live window) already.
    stored: Mutex<usize>,
    /// What the last model response of the run reported; none before the first, or since a compaction.
    last: Mutex<Option<Last>>,
    /// A compaction between rounds that failed: the run stops, and fails with it.
    failure: Mutex<Option<SessionError>>,
    /// Where the run's calls are recorded before and after they run.
    journal: Arc<Journal>,
    /// The run's hold on the session: every append of the run goes through it.
    lease: Arc<Lease>,
    /// What a compaction before the run used: the run's own spend.
    carried: Usage,
    /// The conversation through a turn whose calls ran when a tool call's hook then failed: kept in the
    /// log as the run fails, so no later run repeats a call that ran.
    kept_on_failure: Mutex<Option<Vec<Message>>>,
}

/// The window's use as the last model response left it.
#[derive(Debug, Clone, Copy)]
struct Last {
    /// The provider's count of the request's whole prompt (input, cache read, cache write); 0 when it
    /// reported none.
    reported: u64,
    /// The request's messages.
    sent: usize,
    /// The messages added since the request (the response), estimated.
    since: u64,
    /// The whole conversation, estimated: only when the provider reported no count.
    estimate: Option<u64>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A call waiting on an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParkedCall {
    /// The call's id.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// What the approval handler is asked.
    pub request: ApprovalRequest,
    /// The run and turn that made the call: where the call journal records it when it runs.
    #[serde(default)]
    pub run: String,
    #[serde(default)]
    /// The turn that made the call.
    pub turn: u64,
}

/// What a parked session holds in its state row until it is resumed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Parked {
    /// The run's messages not yet in the log, the waiting calls' results as placeholders.
    messages: Vec<Message>,
    calls: Vec<ParkedCall>,
    /// The run's state apart from the conversation (SPEC §8b), restored on resume.
    #[serde(default)]
    run: Option<RunSnapshot>,
}

/// The tool result a waiting call holds until its answer comes.
const WAITING: &str = "(waiting for an approval)";

/// Called by the loop for a call the handler answered later: parks it in the session run, or says why
/// it cannot be parked.
pub(crate) fn park(call_id: &str, name: &str, request: ApprovalRequest) -> Result<String, String> {
    let why = format!("the approval handler answered later for tool '{name}', and this run has no session to park in");
    if crate::agent::subagent::in_subagent() {
        return Err(format!("{why} (a sub-agent's parent waits on it)"));
    }
    let Some(current) = current() else { return Err(why) };
    let (run, turn) = current.journal.position();
    let call = ParkedCall { call_id: call_id.to_string(), name: name.to_string(), request, run, turn };
    current.parked_calls.lock().unwrap_or_else(|p| p.into_inner()).push(call);
    Ok(WAITING.to_string())
}

/// Called by the loop after a round's results: whether the run stops here because a call waits; if so
/// the session keeps the conversation and the run's state (`snapshot`).
pub(crate) fn parked_at(messages: &[Message], snapshot: impl FnOnce() -> RunSnapshot) -> bool {
    if crate::agent::subagent::in_subagent() {
        return false;
    }
    let Some(current) = current() else { return false };
    if current.parked_calls.lock().unwrap_or_else(|p| p.into_inner()).is_empty() {
        return false;
    }
    *current.parked_messages.lock().unwrap_or_else(|p| p.into_inner()) = Some(messages.to_vec());
    *lock(&current.parked_run) = Some(snapshot());
    true
}

/// The session the current run belongs to.
pub(crate) fn current() -> Option<Arc<Current>> {
    CURRENT.try_with(Arc::clone).ok()
}

const SUMMARISER: &str = "You write the summary that replaces the earlier part of a conversation in an agent's \
context window. Keep every active restriction, authorization and commitment, the decisions taken and why, facts \
found (names, paths, numbers, ids) and what remains to be done. Write plain prose and lists; no preamble.";

impl Current {
    /// The gauge now (`context_check`): from the count the last response reported, plus an estimate of
    /// what was added since; estimated whole when there is no count.
    pub async fn gauge(&self) -> Result<Gauge, SessionError> {
        let live = self.sessions.live(&self.session_id).await?;
        let mut g = gauge(&self.sessions, &self.agent, &live, self.overhead);
        if let Some(last) = *lock(&self.last) {
            if last.reported > 0 {
                (g.reported, g.since) = (Some(last.reported), last.since);
            } else if let Some(estimate) = last.estimate {
                // The log does not hold the run's messages yet; the run's own conversation does.
                g.conversation = estimate;
            }
        }
        Ok(g)
    }

    /// The gauge over the run's conversation at a round boundary (the count of compactions left out).
    fn gauge_at(&self, messages: &[Message], last: Last) -> Gauge {
        let config = &self.sessions.config;
        let mut g = Gauge {
            window: self.sessions.window(&self.agent),
            overhead: self.overhead.tokens,
            tool_schemas: self.overhead.tools,
            conversation: 0,
            compact_at: config.compact_at,
            compactions: 0,
            reported: None,
            since: 0,
        };
        if last.reported > 0 {
            g.reported = Some(last.reported);
            g.since = rules::messages_tokens(messages.get(last.sent..).unwrap_or_default());
        } else {
            g.conversation = rules::messages_tokens(messages);
        }
        g
    }

    /// Compacts between rounds: appends the run's messages not yet in the log, then compacts the log;
    /// the run goes on with the new live window. What the summary's request used, when it compacted.
    async fn compact_between_rounds(
        &self,
        messages: &mut Vec<Message>,
        keep_recent: bool,
        instructions: Option<String>,
    ) -> Result<Option<Usage>, SessionError> {
        let stored = *lock(&self.stored);
        let added: Vec<Item> =
            messages.get(stored..).unwrap_or_default().iter().map(|m| Item::Message { message: m.clone() }).collect();
        if !added.is_empty() {
            self.lease.append(&added).await?;
            *lock(&self.stored) = messages.len();
        }
        let keep = if keep_recent { self.sessions.config.keep_recent } else { 0 };
        let compacted =
            self.sessions.compact_with(&self.agent, &self.session_id, keep, instructions, true, Some(&self.lease));
        let Some(spent) = compacted.await? else {
            return Ok(None);
        };
        let live = self.sessions.live(&self.session_id).await?;
        *messages = rules::live_window(&live.entries).into_iter().map(|(_, m)| m).collect();
        *lock(&self.stored) = messages.len();
        *lock(&self.last) = None;
        Ok(Some(spent))
    }
}

#[async_trait::async_trait]
impl Rounds for Current {
    fn responded(&self, usage: &Usage, sent: usize, messages: &[Message]) {
        self.journal.next_turn();
        let reported =
            usage.input_tokens.saturating_add(usage.cache_read_tokens).saturating_add(usage.cache_write_tokens);
        let since = rules::messages_tokens(messages.get(sent..).unwrap_or_default());
        let estimate = (reported == 0).then(|| rules::messages_tokens(messages));
        *lock(&self.last) = Some(Last { reported, sent, since, estimate });
    }

    fn carried(&self) -> Usage {
        self.carried
    }

    fn failed_with(&self, messages: Vec<Message>) {
        *lock(&self.kept_on_failure) = Some(messages);
    }

    fn restored(&self) -> Option<RunSnapshot> {
        lock(&self.restored).take()
    }

    fn tasks(&self) -> Option<Arc<dyn crate::agent::background::TaskSink>> {
        let keeper =
            super::tasks::SessionTasks { sessions: self.sessions.clone(), session_id: self.session_id.clone() };
        Some(Arc::new(keeper))
    }

    async fn boundary(&self, messages: &mut Vec<Message>) -> Result<Usage, crate::Error> {
        // Before each model request: a run taken over (its lease ran out while it was paused) stops here.
        if let Err(e) = self.lease.check().await {
            *lock(&self.failure) = Some(e);
            return Err(crate::Error::Cancelled);
        }
        // Before the run's first response the check before the run covered the window; right after a
        // compaction, nothing new has come yet.
        let Some(last) = *lock(&self.last) else { return Ok(Usage::default()) };
        let asked = lock(&self.compact).take();
        let (keep_recent, instructions) = match asked.clone() {
            Some(asked) => asked,
            None => {
                let g = self.gauge_at(messages, last);
                // When the fixed overhead alone is past the ceiling, compacting every round would only
                // lose the conversation: between runs, then.
                if !(g.over() && g.reclaimable()) {
                    return Ok(Usage::default());
                }
                (self.sessions.config.keep_recent > 0, None)
            }
        };
        match self.compact_between_rounds(messages, keep_recent, instructions).await {
            Ok(Some(spent)) => {
                self.compact_asked.store(false, Ordering::SeqCst);
                Ok(spent)
            }
            Ok(None) => {
                // Nothing before the round in flight to summarise yet: a request waits for the next
                // boundary, or the run's end.
                *lock(&self.compact) = asked;
                Ok(Usage::default())
            }
            Err(e) => {
                *lock(&self.failure) = Some(e);
                Err(crate::Error::Cancelled)
            }
        }
    }
}

fn idle() -> SessionState {
    SessionState { state: "idle".into(), parked: None }
}

/// A run that failed lets its session go (idle), and fails with `e`.
async fn idle_after(lease: &Lease, e: SessionError) -> SessionError {
    if let Err(lost) = lease.settle(&[], idle()).await {
        tracing::warn!(error = %lost, "a failed run could not let its session go");
    }
    e
}

async fn park_session<T>(lease: &Lease, session_id: &str, parked: Parked) -> Result<T, SessionError> {
    let request = parked.calls[0].request.clone();
    let value = serde_json::to_value(&parked).map_err(|e| SessionError::Store(e.to_string()))?;
    let state = SessionState { state: "awaiting_approval".into(), parked: Some(value) };
    lease.settle(&[], state).await?;
    Err(SessionError::AwaitingApproval { session_id: session_id.to_string(), request: Box::new(request) })
}

fn gauge(sessions: &Sessions, agent: &Agent, live: &Live, overhead: Overhead) -> Gauge {
    let window = rules::live_window(&live.entries);
    Gauge {
        window: sessions.window(agent),
        overhead: overhead.tokens,
        tool_schemas: overhead.tools,
        conversation: rules::conversation_tokens(&window),
        compact_at: sessions.config.compact_at,
        compactions: live.compactions,
        reported: None,
        since: 0,
    }
}

/// What the agent's requests carry besides the conversation, as the loop builds a request.
async fn overhead(agent: &Agent) -> Overhead {
    let (instructions, tools) = agent.request_overhead().await;
    Overhead::of(instructions.as_deref(), &tools)
}

impl Sessions {
    /// The context window runs of `agent` have here: this store's setting, else the model's.
    fn window(&self, agent: &Agent) -> u64 {
        self.config.context_window.unwrap_or_else(|| agent.model_and_instructions().0.context_window())
    }

    /// Runs `agent` on `input` in the session: it continues the session's live window, and what it adds
    /// is appended to the log when it ends. `input` is the next user message: text, or parts
    /// ([`crate::Input::parts`]: text, images, files), stored in the log as the wire gets them, so every
    /// later turn (and a resume in another process) sends them again. A part that is refused
    /// ([`crate::Error::InvalidMessage`], naming it) or a history ([`crate::Error::Config`]: the session
    /// holds the history) fails the run before anything is stored.
    pub async fn run(
        &self,
        agent: &Agent,
        session_id: &str,
        input: impl Into<crate::Input>,
    ) -> Result<RunResult, SessionError> {
        let input = input.into().into_session_messages()?;
        let span = session_span("session.run", session_id);
        // Boxed as a trait object: the future's type is deep enough already for the compiler's Send check.
        let run: std::pin::Pin<Box<dyn std::future::Future<Output = _> + Send + '_>> =
            Box::pin(self.run_session(agent, session_id, input, false));
        crate::telemetry::in_conversation(session_id, run).instrument(span).await
    }

    /// [`Sessions::run`] in a session created for it (a routine's run): when the session does not exist
    /// yet, it is created already held by the run and titled, in one write, and its empty log and
    /// sub-agents are not read back; when it exists, this is `run`.
    pub(crate) async fn run_new(
        &self,
        agent: &Agent,
        session_id: &str,
        input: &str,
    ) -> Result<RunResult, SessionError> {
        let span = session_span("session.run", session_id);
        let input = vec![Message::user(input)];
        let run: std::pin::Pin<Box<dyn std::future::Future<Output = _> + Send + '_>> =
            Box::pin(self.run_session(agent, session_id, input, true));
        crate::telemetry::in_conversation(session_id, run).instrument(span).await
    }

    /// [`Sessions::run`] with a run context ([`crate::Agent::run_with_context`]): every host tool, hook
    /// and guardrail of the run (its sub-agents' and background calls' too) is handed `context`; it is
    /// never stored nor sent to the model.
    pub async fn run_with_context(
        &self,
        agent: &Agent,
        session_id: &str,
        input: impl Into<crate::Input>,
        context: crate::agent::RunContextValue,
    ) -> Result<RunResult, SessionError> {
        crate::agent::context::scope(Some(context), self.run(agent, session_id, input)).await
    }

    /// [`Sessions::resume`] with a run context: the answered call and the run it continues are handed
    /// `context` (a parked run's context is not stored: the host gives it again).
    pub async fn resume_with_context(
        &self,
        agent: &Agent,
        session_id: &str,
        decision: ApprovalDecision,
        context: crate::agent::RunContextValue,
    ) -> Result<RunResult, SessionError> {
        crate::agent::context::scope(Some(context), self.resume(agent, session_id, decision)).await
    }

    async fn run_session(
        &self,
        agent: &Agent,
        session_id: &str,
        input: Vec<Message>,
        new: bool,
    ) -> Result<RunResult, SessionError> {
        // A root session's title: its first input's first line (of parts: their text view's).
        let text = input.iter().find_map(|m| match m {
            Message::User { content, .. } => Some(content.as_str()),
            _ => None,
        });
        let title = crate::agent::subagent::title_of(text.unwrap_or_default());
        // A session created for the run is held and titled as it is created, and its log is empty.
        let created = if new { Lease::create(self, session_id, &title).await? } else { None };
        let fresh = created.is_some();
        // One run at a time (SPEC §8b): the lease, or session_busy.
        let (lease, taken) = match created {
            Some(lease) => (lease, super::store::Taken::default()),
            None => Lease::take(self, session_id, Take::Run).await?,
        };
        if !fresh
            && !title.is_empty()
            && let Err(e) = self.store.title(session_id, &title).await
        {
            return Err(idle_after(&lease, e).await);
        }
        if taken.taken_over {
            // The run this one takes over from died: the model is told what it started and never finished.
            let note = Message::user(durable::interrupted_note(&taken.interrupted, &taken.lost_tasks));
            lease.append(&[Item::Message { message: note }]).await?;
        }
        let overhead = overhead(agent).await;
        let mut live = if fresh {
            Arc::new(Live::default())
        } else {
            match self.live(session_id).await {
                Ok(live) => live,
                Err(e) => return Err(idle_after(&lease, e).await),
            }
        };
        let mut carried = Usage::default();
        let mut empty = fresh;
        if gauge(self, agent, &live, overhead).over() {
            empty = false;
            match self.compact_with(agent, session_id, self.config.keep_recent, None, false, Some(&lease)).await {
                Ok(spent) => carried = spent.unwrap_or_default(),
                Err(e) => return Err(idle_after(&lease, e).await),
            }
            // The compaction appended its boundary and summary: the window is read again.
            live = match self.live(session_id).await {
                Ok(live) => live,
                Err(e) => return Err(idle_after(&lease, e).await),
            };
        }
        self.go_on(agent, session_id, Some(input), lease, carried, None, Some(live), empty).await
    }

    /// Runs the live window on, with `input` (or, resuming when `None`, from the tool results it ends
    /// with), appends what the run adds (what a compaction between rounds appended already, once), and
    /// parks the session when a call waits on an answer. `lease` holds the session; `carried` is what a
    /// compaction before the run used; `restored` the state of the parked run it resumes; `live` the window
    /// when the caller read it already; `empty` that
    /// the session was created for this run and nothing is in it yet (no log, no sub-agents to read).
    #[allow(clippy::too_many_arguments)]
    async fn go_on(
        &self,
        agent: &Agent,
        session_id: &str,
        input: Option<Vec<Message>>,
        lease: Lease,
        carried: Usage,
        restored: Option<RunSnapshot>,
        live: Option<Arc<Live>>,
        empty: bool,
    ) -> Result<RunResult, SessionError> {
        let overhead = overhead(agent).await;
        let live = match live {
            Some(live) => live,
            None => match self.live(session_id).await {
                Ok(live) => live,
                Err(e) => return Err(idle_after(&lease, e).await),
            },
        };
        // The sub-agents the session keeps (spawned by runs in any process) are this agent's too.
        if !empty && let Err(e) = self.restore_subagents(agent, session_id).await {
            return Err(idle_after(&lease, e).await);
        }
        let lease = Arc::new(lease);
        let journal = Journal::new(self, session_id, &lease, durable::fresh_id(), 0);
        let history: Vec<Message> = rules::live_window(&live.entries).into_iter().map(|(_, m)| m).collect();
        let current = Arc::new(Current {
            sessions: self.clone(),
            session_id: session_id.to_string(),
            overhead,
            compact: Mutex::new(None),
            compact_asked: AtomicBool::new(false),
            parked_calls: Mutex::new(Vec::new()),
            parked_messages: Mutex::new(None),
            agent: agent.clone(),
            stored: Mutex::new(history.len()),
            last: Mutex::new(None),
            failure: Mutex::new(None),
            journal: journal.clone(),
            lease: lease.clone(),
            carried,
            parked_run: Mutex::new(None),
            restored: Mutex::new(restored),
            kept_on_failure: Mutex::new(None),
        });
        // Boxed: a run's future is large, and the stack of the thread polling it (a binding's worker)
        // is not.
        // A run context a `*_with_context` call set around it is the run's (`Agent::run` inherits it).
        let resume = input.is_none();
        let input = input.map_or(crate::Input::Text(String::new()), crate::Input::Messages);
        let run = Box::pin(crate::agent::subagent::with_history(history, resume, agent.run(input)));
        let run = run_state::with_rounds(current.clone(), run);
        let run = CURRENT.scope(current.clone(), journal.scope(run));
        // A run whose lease is lost (taken over while it was paused) is cancelled: it runs no more tools
        // and writes nothing more.
        let outcome = tokio::select! {
            biased;
            _ = lease.lost() => {
                return Err(SessionError::Busy(format!(
                    "session '{session_id}' was taken over by another run: this run's lease ran out, and the run \
                     was stopped"
                )));
            }
            outcome = run => outcome,
        };
        let failure = lock(&current.failure).take();
        if let Some(e) = failure {
            return Err(idle_after(&lease, e).await);
        }
        // The run's messages from here on are not in the log yet.
        let skip = *lock(&current.stored);
        let parked = lock(&current.parked_messages).take();
        if let (Err(crate::Error::Cancelled), Some(messages)) = (&outcome, parked) {
            let calls = std::mem::take(&mut *lock(&current.parked_calls));
            let run = lock(&current.parked_run).take();
            let parked = Parked { messages: messages.into_iter().skip(skip).collect(), calls, run };
            return park_session(&lease, session_id, parked).await;
        }
        let mut result = match outcome {
            Ok(result) => result,
            Err(e) => {
                let kept = lock(&current.kept_on_failure).take();
                if let Some(messages) = kept {
                    // The turn whose calls ran is kept with the session let go, in one transaction.
                    let added: Vec<Item> =
                        messages.into_iter().skip(skip).map(|message| Item::Message { message }).collect();
                    lease.settle(&added, idle()).await?;
                    return Err(e.into());
                }
                return Err(idle_after(&lease, e.into()).await);
            }
        };
        let added: Vec<Item> =
            result.messages.iter().skip(skip).map(|m| Item::Message { message: m.clone() }).collect();
        let asked = lock(&current.compact).take();
        let Some((keep_recent, instructions)) = asked else {
            // The run's messages and the end of its hold, in one transaction.
            lease.settle(&added, idle()).await?;
            return Ok(result);
        };
        lease.append(&added).await?;
        let keep = if keep_recent { self.config.keep_recent } else { 0 };
        match self.compact_with(agent, session_id, keep, instructions, false, Some(&lease)).await {
            // The run asked for it: what it used is the run's (the budget cannot stop a run that ended).
            Ok(Some(spent)) => {
                result.usage.add(&spent);
                result.cost = agent.price_of(&result.usage);
            }
            Ok(None) => {}
            Err(e) => return Err(idle_after(&lease, e).await),
        }
        lease.settle(&[], idle()).await?;
        Ok(result)
    }

    /// The approval a parked session waits on, if it is parked: also while a resume answers it, or after
    /// a resume that died before it was done (a `resume` then takes it over once its lease ran out).
    pub async fn pending(&self, session_id: &str) -> Result<Option<ApprovalRequest>, SessionError> {
        let state = self.store.state(session_id).await?;
        let Some(parked) = state.parked else { return Ok(None) };
        let parked: Parked = serde_json::from_value(parked).map_err(|e| SessionError::Store(e.to_string()))?;
        Ok(parked.calls.first().map(|c| c.request.clone()))
    }

    /// Answers the approval a parked session waits on, from any process that opens the same store, and
    /// continues the run as if the answer had come live. Another waiting call of the same turn parks it
    /// again ([`SessionError::AwaitingApproval`]).
    pub async fn resume(
        &self,
        agent: &Agent,
        session_id: &str,
        decision: ApprovalDecision,
    ) -> Result<RunResult, SessionError> {
        let span = session_span("session.resume", session_id);
        let resumed: std::pin::Pin<Box<dyn std::future::Future<Output = _> + Send + '_>> =
            Box::pin(self.resume_session(agent, session_id, decision));
        crate::telemetry::in_conversation(session_id, resumed).instrument(span).await
    }

    async fn resume_session(
        &self,
        agent: &Agent,
        session_id: &str,
        decision: ApprovalDecision,
    ) -> Result<RunResult, SessionError> {
        if decision == ApprovalDecision::Later {
            return Err(SessionError::InvalidArgument("resume needs an answer: approve, deny or revise".into()));
        }
        // Exactly once (SPEC §8b): the parked state is claimed by compare-and-set before anything runs;
        // a second resume gets session_not_parked.
        let take = if self.guarded { Take::Resume } else { Take::Unguarded };
        let (lease, taken) = Lease::take(self, session_id, take).await?;
        let parked =
            taken.parked.ok_or_else(|| SessionError::NotParked(format!("session '{session_id}' is not parked")));
        let mut parked: Parked =
            parked.and_then(|p| serde_json::from_value(p).map_err(|e| SessionError::Store(e.to_string())))?;
        if parked.calls.is_empty() {
            return Err(SessionError::Store(format!("session '{session_id}' is parked on no call")));
        }
        let call = parked.calls.remove(0);
        // The call runs under the journal of the run that made it: a resume that a crash interrupted
        // finds it recorded, and does not run it again.
        let journal = Journal::new(self, session_id, &lease, call.run.clone(), call.turn);
        let answer = agent.answer_parked(&call.call_id, &call.name, call.request.arguments.clone(), decision);
        let (content, is_error, parts) = journal.scope(answer).await;
        for m in &mut parked.messages {
            if let Message::Tool { call_id, content: c, is_error: e, parts: p, .. } = m
                && *call_id == call.call_id
            {
                *c = content.clone();
                *e = is_error;
                *p = parts.clone();
            }
        }
        if !parked.calls.is_empty() {
            return park_session(&lease, session_id, parked).await;
        }
        let added: Vec<Item> = parked.messages.into_iter().map(|message| Item::Message { message }).collect();
        // The answered turn goes into the log as the parked state goes, in one transaction: a crash
        // leaves either the claim to take over or the run going on, never both.
        lease.settle(&added, SessionState { state: "running".into(), parked: None }).await?;
        self.go_on(agent, session_id, None, lease, Usage::default(), parked.run, None, false).await
    }

    /// Compacts the session now: a boundary and a summary the model writes are appended; nothing is
    /// deleted. Returns false when there was nothing to summarise.
    #[tracing::instrument(target = "ambit::session", name = "session.compact", skip_all, fields(gen_ai.conversation.id = session_id))]
    pub async fn compact(&self, agent: &Agent, session_id: &str) -> Result<bool, SessionError> {
        Ok(self.compact_with(agent, session_id, self.config.keep_recent, None, false, None).await?.is_some())
    }

    /// Compacts the log keeping `keep` rounds verbatim; `in_run`, at a round boundary inside a run, the
    /// round in flight is kept as well ([`rules::plan_in_run`]). What the summary's request used, or
    /// `None` when there was nothing to summarise. A run's compaction appends through its `lease` (only
    /// while it holds the session).
    async fn compact_with(
        &self,
        agent: &Agent,
        session_id: &str,
        keep: usize,
        instructions: Option<String>,
        in_run: bool,
        lease: Option<&Lease>,
    ) -> Result<Option<Usage>, SessionError> {
        let live = self.live(session_id).await?;
        let entries = &live.entries;
        let window = rules::live_window(entries);
        if window.len() <= 1 {
            // Nothing since the last summary, or a lone message: nothing worth summarising.
            return Ok(None);
        }
        let next = entries.last().map_or(1, |e| e.index + 1);
        let plan = if in_run { rules::plan_in_run(&window, keep) } else { rules::plan(&window, keep, next) };
        let Some(plan) = plan else { return Ok(None) };
        let transcript: Vec<String> = plan
            .summarise
            .iter()
            .map(|(i, m)| {
                let (role, text) = rules::render(m);
                format!("#{i} {role}: {text}")
            })
            .collect();
        let mut ask = format!("Summarise this conversation:\n\n{}", transcript.join("\n"));
        if let Some(extra) = instructions {
            ask.push_str(&format!("\n\nWhen summarising: {extra}"));
        }
        let (model, _) = agent.model_and_instructions();
        let request = ModelRequest {
            instructions: Some(SUMMARISER.to_string()),
            messages: vec![Message::user(ask)],
            tools: Vec::new(),
            ..Default::default()
        };
        let response = model.respond(&request).await.map_err(|e| SessionError::Run(e.into()))?;
        let summary = response.text.unwrap_or_default();
        let spent = response.usage;
        let items = [Item::Boundary { keep_from: plan.keep_from }, Item::Summary { text: summary }];
        match lease {
            Some(lease) => lease.append(&items).await?,
            None => self.store.append(session_id, &items, now_ms()).await?,
        };
        Ok(Some(spent))
    }
}

/// The span of a session operation, with the session's id as the conversation's.
fn session_span(name: &'static str, session_id: &str) -> tracing::Span {
    match name {
        "session.resume" => {
            tracing::info_span!(target: "ambit::session", "session.resume", gen_ai.conversation.id = session_id)
        }
        _ => tracing::info_span!(target: "ambit::session", "session.run", gen_ai.conversation.id = session_id),
    }
}
