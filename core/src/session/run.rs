//! A run in a session: the live window (after the last compaction) is the conversation the run
//! continues; its new messages are appended when it ends. Auto-compaction fires before a run whose
//! window is past the ceiling, and after a run that asked for one with `context_compact`.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};

use super::rules::{self, Gauge, Item};
use super::{SessionError, SessionState, Sessions, now_ms};
use crate::agent::{Agent, RunResult};
use crate::model::{Message, ModelRequest};
use crate::permission::{ApprovalDecision, ApprovalRequest};

tokio::task_local! {
    static CURRENT: Arc<Current>;
}

/// What the session tools of a run reach.
pub(crate) struct Current {
    pub sessions: Sessions,
    pub session_id: String,
    /// Instructions and tool schemas, estimated in tokens.
    pub overhead: u64,
    /// A `context_compact` request: its keep_recent and instructions.
    pub compact: Mutex<Option<(bool, Option<String>)>>,
    pub compact_asked: AtomicBool,
    /// Calls whose approval was answered "later", in the model's order.
    pub parked_calls: Mutex<Vec<ParkedCall>>,
    /// The run's conversation when it stopped for them.
    pub parked_messages: Mutex<Option<Vec<Message>>>,
}

/// A call waiting on an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParkedCall {
    pub call_id: String,
    pub name: String,
    pub request: ApprovalRequest,
}

/// What a parked session holds in its state row until it is resumed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Parked {
    /// The run's messages not yet in the log, the waiting calls' results as placeholders.
    messages: Vec<Message>,
    calls: Vec<ParkedCall>,
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
    let call = ParkedCall { call_id: call_id.to_string(), name: name.to_string(), request };
    current.parked_calls.lock().unwrap_or_else(|p| p.into_inner()).push(call);
    Ok(WAITING.to_string())
}

/// Called by the loop after a round's results: whether the run stops here because a call waits.
pub(crate) fn parked_at(messages: &[Message]) -> bool {
    if crate::agent::subagent::in_subagent() {
        return false;
    }
    let Some(current) = current() else { return false };
    if current.parked_calls.lock().unwrap_or_else(|p| p.into_inner()).is_empty() {
        return false;
    }
    *current.parked_messages.lock().unwrap_or_else(|p| p.into_inner()) = Some(messages.to_vec());
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
    pub async fn gauge(&self) -> Result<Gauge, SessionError> {
        let entries = self.sessions.store.entries(&self.session_id).await?;
        Ok(gauge(&self.sessions, &entries, self.overhead))
    }
}

fn gauge(sessions: &Sessions, entries: &[rules::Entry], overhead: u64) -> Gauge {
    let window = rules::live_window(entries);
    Gauge {
        window: sessions.config.context_window,
        overhead,
        conversation: rules::conversation_tokens(&window),
        compact_at: sessions.config.compact_at,
        compactions: entries.iter().filter(|e| matches!(e.item, Item::Boundary { .. })).count(),
    }
}

fn overhead(agent: &Agent) -> u64 {
    let (_, instructions) = agent.model_and_instructions();
    let specs = serde_json::to_string(&agent.offered_specs()).unwrap_or_default();
    rules::estimate_tokens(instructions.as_deref().unwrap_or("")) + rules::estimate_tokens(&specs)
}

impl Sessions {
    /// Runs `agent` on `input` in the session: it continues the session's live window, and what it adds
    /// is appended to the log when it ends.
    pub async fn run(&self, agent: &Agent, session_id: &str, input: &str) -> Result<RunResult, SessionError> {
        let state = self.store.state(session_id).await?;
        if state.state == "awaiting_approval" {
            return Err(SessionError::InvalidArgument(format!(
                "session '{session_id}' is parked awaiting an approval; resume it first"
            )));
        }
        let overhead = overhead(agent);
        let entries = self.store.entries(session_id).await?;
        if gauge(self, &entries, overhead).over() {
            self.compact_with(agent, session_id, self.config.keep_recent > 0, None).await?;
        }
        self.go_on(agent, session_id, overhead, input, false).await
    }

    /// Runs the live window on, with `input` (or, resuming, from the tool results it ends with), appends
    /// what the run adds, and parks the session when a call waits on an answer.
    async fn go_on(
        &self,
        agent: &Agent,
        session_id: &str,
        overhead: u64,
        input: &str,
        resume: bool,
    ) -> Result<RunResult, SessionError> {
        let entries = self.store.entries(session_id).await?;
        let history: Vec<Message> = rules::live_window(&entries).into_iter().map(|(_, m)| m).collect();
        let skip = history.len();
        let current = Arc::new(Current {
            sessions: self.clone(),
            session_id: session_id.to_string(),
            overhead,
            compact: Mutex::new(None),
            compact_asked: AtomicBool::new(false),
            parked_calls: Mutex::new(Vec::new()),
            parked_messages: Mutex::new(None),
        });
        let run = crate::agent::subagent::with_history(history, resume, agent.run(input));
        let outcome = CURRENT.scope(current.clone(), run).await;
        let parked = current.parked_messages.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let (Err(crate::Error::Cancelled), Some(messages)) = (&outcome, parked) {
            let calls = std::mem::take(&mut *current.parked_calls.lock().unwrap_or_else(|p| p.into_inner()));
            let parked = Parked { messages: messages.into_iter().skip(skip).collect(), calls };
            return self.park_session(session_id, parked).await;
        }
        let result = outcome?;
        let added: Vec<Item> =
            result.messages.iter().skip(skip).map(|m| Item::Message { message: m.clone() }).collect();
        self.store.append(session_id, &added, now_ms()).await?;
        let asked = current.compact.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some((keep_recent, instructions)) = asked {
            self.compact_with(agent, session_id, keep_recent, instructions).await?;
        } else if current.compact_asked.load(Ordering::SeqCst) {
            self.compact_with(agent, session_id, true, None).await?;
        }
        Ok(result)
    }

    async fn park_session<T>(&self, session_id: &str, parked: Parked) -> Result<T, SessionError> {
        let request = parked.calls[0].request.clone();
        let value = serde_json::to_value(&parked).map_err(|e| SessionError::Store(e.to_string()))?;
        let state = SessionState { state: "awaiting_approval".into(), parked: Some(value) };
        self.store.set_state(session_id, &state, now_ms()).await?;
        Err(SessionError::AwaitingApproval { session_id: session_id.to_string(), request: Box::new(request) })
    }

    /// The approval a parked session waits on, if it is parked.
    pub async fn pending(&self, session_id: &str) -> Result<Option<ApprovalRequest>, SessionError> {
        let state = self.store.state(session_id).await?;
        let Some(parked) = state.parked.filter(|_| state.state == "awaiting_approval") else { return Ok(None) };
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
        if decision == ApprovalDecision::Later {
            return Err(SessionError::InvalidArgument("resume needs an answer: approve, deny or revise".into()));
        }
        let state = self.store.state(session_id).await?;
        let parked = match (state.state.as_str(), state.parked) {
            ("awaiting_approval", Some(p)) => p,
            _ => {
                return Err(SessionError::InvalidArgument(format!(
                    "session '{session_id}' is not awaiting an approval"
                )));
            }
        };
        let mut parked: Parked = serde_json::from_value(parked).map_err(|e| SessionError::Store(e.to_string()))?;
        let call = parked.calls.remove(0);
        let (content, is_error) =
            agent.answer_parked(&call.call_id, &call.name, call.request.arguments.clone(), decision).await;
        for m in &mut parked.messages {
            if let Message::Tool { call_id, content: c, is_error: e, .. } = m
                && *call_id == call.call_id
            {
                *c = content.clone();
                *e = is_error;
            }
        }
        if !parked.calls.is_empty() {
            return self.park_session(session_id, parked).await;
        }
        let added: Vec<Item> = parked.messages.into_iter().map(|message| Item::Message { message }).collect();
        self.store.append(session_id, &added, now_ms()).await?;
        self.store.set_state(session_id, &SessionState { state: "idle".into(), parked: None }, now_ms()).await?;
        self.go_on(agent, session_id, overhead(agent), "", true).await
    }

    /// Compacts the session now: a boundary and a summary the model writes are appended; nothing is
    /// deleted. Returns false when there was nothing to summarise.
    pub async fn compact(&self, agent: &Agent, session_id: &str) -> Result<bool, SessionError> {
        self.compact_with(agent, session_id, self.config.keep_recent > 0, None).await
    }

    async fn compact_with(
        &self,
        agent: &Agent,
        session_id: &str,
        keep_recent: bool,
        instructions: Option<String>,
    ) -> Result<bool, SessionError> {
        let entries = self.store.entries(session_id).await?;
        let window = rules::live_window(&entries);
        if window.len() <= 1 {
            // Nothing since the last summary, or a lone message: nothing worth summarising.
            return Ok(false);
        }
        let next = entries.last().map_or(1, |e| e.index + 1);
        let keep = if keep_recent { self.config.keep_recent } else { 0 };
        let Some(plan) = rules::plan(&window, keep, next) else { return Ok(false) };
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
            messages: vec![Message::User { content: ask }],
            tools: Vec::new(),
        };
        let response = model.respond(&request).await.map_err(|e| SessionError::Run(e.into()))?;
        let summary = response.text.unwrap_or_default();
        self.store
            .append(
                session_id,
                &[Item::Boundary { keep_from: plan.keep_from }, Item::Summary { text: summary }],
                now_ms(),
            )
            .await?;
        Ok(true)
    }
}
