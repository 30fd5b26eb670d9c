//! Sub-agents as child sessions (SPEC §8b): in a session run, each sub-agent's conversation is a session
//! of its own under the session (or sub-agent) that spawned it, with its title and what a follow-up
//! replays; a run in the session (in any process, after a restart) finds its sub-agents there, and
//! `conversation_search`, `conversation_read` and `session_list` reach them.

use serde_json::Value;

use super::rules::Item;
use super::store::ChildSession;
use super::{SessionError, Sessions, now_ms};
use crate::agent::Agent;
use crate::agent::subagent::SubagentRecord;

/// The session id of sub-agent `agent_id` of the session tree rooted at `root` (ids are unique in a tree).
pub(crate) fn child_session_id(root: &str, agent_id: &str) -> String {
    format!("{root}.{agent_id}")
}

/// The session a sub-agent spawned by `parent` ("root" or a sub-agent's id) belongs under.
fn parent_session_id(root: &str, parent: &str) -> String {
    if parent == "root" { root.to_string() } else { child_session_id(root, parent) }
}

/// Keeps sub-agent `record` (spawned by `parent`) as a child session of the current session run; outside
/// one, nothing. A store failure is logged: the sub-agent's answer still reaches its parent.
pub(crate) async fn keep_subagent(parent: &str, mut record: SubagentRecord) {
    let Some(current) = super::run::current() else { return };
    let root = &current.session_id;
    let messages = std::mem::take(&mut record.messages);
    let child = ChildSession {
        session_id: child_session_id(root, &record.id),
        parent_id: parent_session_id(root, parent),
        agent_id: record.id.clone(),
        title: record.title.clone(),
        spawn: serde_json::to_value(&record).unwrap_or(Value::Null),
        updated_at: 0,
    };
    if let Err(e) = current.sessions.store.keep_child(&child, &messages, now_ms()).await {
        tracing::warn!(session_id = %child.session_id, error = %e, "a sub-agent's session was not kept");
    }
}

/// Marks sub-agent `agent_id`'s session (and those below it) deleted, in a session run.
pub(crate) async fn forget_subagent(agent_id: &str) {
    let Some(current) = super::run::current() else { return };
    let id = child_session_id(&current.session_id, agent_id);
    if let Err(e) = current.sessions.store.delete_child(&id, now_ms()).await {
        tracing::warn!(session_id = %id, error = %e, "a deleted sub-agent's session was not marked");
    }
}

impl Sessions {
    /// The sub-agent tree kept under `parent_id`, each with its conversation.
    async fn tree_below(&self, parent_id: &str) -> Result<Vec<SubagentRecord>, SessionError> {
        let mut out = Vec::new();
        for child in self.store.children(parent_id).await? {
            let Ok(mut record) = serde_json::from_value::<SubagentRecord>(child.spawn.clone()) else {
                tracing::warn!(session_id = %child.session_id, "a sub-agent session's record is unreadable");
                continue;
            };
            record.messages = self
                .store
                .entries(&child.session_id)
                .await?
                .into_iter()
                .filter_map(|e| match e.item {
                    Item::Message { message } => Some(message),
                    _ => None,
                })
                .collect();
            record.children = Box::pin(self.tree_below(&child.session_id)).await?;
            out.push(record);
        }
        Ok(out)
    }

    /// Gives `agent` the sub-agents session `session_id` keeps (those it does not have yet), so a run in
    /// another process, or after a restart, can list, follow up, steer and delete them.
    pub(crate) async fn restore_subagents(&self, agent: &Agent, session_id: &str) -> Result<(), SessionError> {
        let tree = self.tree_below(session_id).await?;
        if tree.is_empty() {
            return Ok(());
        }
        // The spawn count goes on past every sub-agent this session ever spawned, deleted ones too.
        let spawned = self.store.spawned(session_id).await?;
        agent.restore_subagents(&tree, spawned);
        Ok(())
    }
}
