//! A run in a session: the live window (after the last compaction) is the conversation the run
//! continues; its new messages are appended when it ends. Auto-compaction fires before a run whose
//! window is past the ceiling, and after a run that asked for one with `context_compact`.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use super::rules::{self, Gauge, Item};
use super::{SessionError, Sessions, now_ms};
use crate::agent::{Agent, RunResult};
use crate::model::{Message, ModelRequest};

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
        let mut entries = self.store.entries(session_id).await?;
        if gauge(self, &entries, overhead).over() {
            self.compact_with(agent, session_id, self.config.keep_recent > 0, None).await?;
            entries = self.store.entries(session_id).await?;
        }
        let history: Vec<Message> = rules::live_window(&entries).into_iter().map(|(_, m)| m).collect();
        let skip = history.len();
        let current = Arc::new(Current {
            sessions: self.clone(),
            session_id: session_id.to_string(),
            overhead,
            compact: Mutex::new(None),
            compact_asked: AtomicBool::new(false),
        });
        let run = crate::agent::subagent::with_history(history, agent.run(input));
        let result = CURRENT.scope(current.clone(), run).await?;
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
