//! `conversation_search`, `conversation_read`, `context_check` and `context_compact`: the session's
//! log and window as the agent reaches them. They act on the session the run belongs to
//! ([`super::Sessions::run`]); outside one they say so.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::rules;
use crate::error::ToolError;
use crate::permission::Level;
use crate::tools::{Tool, ToolSpec};

/// The session tools, at `read`.
pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(Search(
            ToolSpec::new(
                "conversation_search",
                "Search this session's whole conversation, including turns compaction summarised away. Returns \
                 matching lines tagged #N and role.",
                json!({"type": "object", "properties": {
                    "query": {"type": "string", "description": "A literal (case-insensitive) unless is_regex."},
                    "id": {"type": "string", "description": "A sub-agent's id (or a unique prefix; session_list shows them): search its conversation instead."},
                    "is_regex": {"type": "boolean", "description": "A case-sensitive regular expression. Default false."},
                    "limit": {"type": "integer", "minimum": 1, "description": "Most matches (default 20, at most 100)."}
                }, "required": ["query"]}),
            )
            .with_level(Level::Read),
        )),
        Arc::new(Read(
            ToolSpec::new(
                "conversation_read",
                "Read this session's conversation from message #N (as conversation_search shows it).",
                json!({"type": "object", "properties": {
                    "start": {"type": "integer", "minimum": 1, "description": "1-based message index."},
                    "id": {"type": "string", "description": "A sub-agent's id (or a unique prefix; session_list shows them): read its conversation instead."},
                    "limit": {"type": "integer", "minimum": 1, "description": "Messages to read (default 1, at most 20)."}
                }, "required": ["start"]}),
            )
            .with_level(Level::Read),
        )),
        Arc::new(List(
            ToolSpec::new(
                "session_list",
                "The sessions this one may read: itself first, then its sub-agents (at unrestricted: the store's most \
                 recent root sessions), each with its id, last update, parent and title; then this session's id.",
                json!({"type": "object", "properties": {}}),
            )
            .with_level(Level::Read),
        )),
        Arc::new(FindSessions(
            ToolSpec::new(
                "session_search",
                "Find sessions this one may read by what was said in them (user and assistant text, summaries; \
                 conversation_search covers tool calls and results within a session): this session and its \
                 sub-agents (at unrestricted: the store's root sessions). A session whose title holds every word \
                 comes first, the rest by their best-matching line.",
                json!({"type": "object", "properties": {
                    "query": {"type": "string", "description": "The words to find."},
                    "limit": {"type": "integer", "minimum": 1, "description": "Most sessions (default 10, at most 100)."},
                    "include_children": {"type": "boolean", "description": "At unrestricted, sub-agent sessions too (within a tree they always are). Default false."}
                }, "required": ["query"]}),
            )
            .with_level(Level::Read),
        )),
        Arc::new(Check(
            ToolSpec::new("context_check", "Report the context window's use now.", json!({"type": "object", "properties": {}}))
                .with_level(Level::Read),
        )),
        Arc::new(Compact(
            ToolSpec::new(
                "context_compact",
                "Ask for a compaction: older turns are summarised (never deleted) before the next model request.",
                json!({"type": "object", "properties": {
                    "instructions": {"type": "string", "description": "What to preserve or drop."},
                    "keep_recent": {"type": "boolean", "description": "Keep recent rounds verbatim. Default true."}
                }}),
            )
            .with_level(Level::Read)
            // A request to the loop, which compacts at the next round boundary: nothing to detach.
            .with_inline(true),
        )),
    ]
}

fn session() -> Result<Arc<super::run::Current>, ToolError> {
    super::run::current().ok_or_else(|| ToolError::Failed("this run has no session: run it with Sessions::run".into()))
}

fn failed(e: impl std::fmt::Display) -> ToolError {
    ToolError::Failed(e.to_string())
}

struct Search(ToolSpec);
struct Read(ToolSpec);
struct List(ToolSpec);
struct FindSessions(ToolSpec);

/// The most root sessions `session_search` looks through at `unrestricted`: the most recent ones.
pub const SESSION_SEARCH_SCAN: usize = 500;

/// The most root sessions `session_list` shows at `unrestricted`.
pub const SESSION_LIST_LIMIT: usize = 50;

/// The session the calling agent is: the session run's, or, in a sub-agent, the sub-agent's own child
/// session (the read is one way, parent to sub-agent: a sub-agent never reaches its parent's log).
fn calling(s: &super::run::Current) -> String {
    match crate::agent::subagent::current_id() {
        Some(id) => super::children::child_session_id(&s.session_id, &id),
        None => s.session_id.clone(),
    }
}

/// The session a `conversation_*` call reads (seed 000, one rule with `session_list`): this one, or (with
/// `id`) one of its sub-agents by full id or a prefix unique among them; at `unrestricted` (the live
/// level, where the shell reaches the store anyway) any session of the store by its full id. Below it,
/// any other id gets the same refusal whether or not it exists.
async fn reach(s: &super::run::Current, args: &Value, level: Level) -> Result<String, ToolError> {
    let Some(given) = args.get("id").and_then(Value::as_str).map(str::trim).filter(|g| !g.is_empty()) else {
        return Ok(calling(s));
    };
    let children = s.sessions.store().children(&calling(s)).await.map_err(failed)?;
    let matches: Vec<&super::store::ChildSession> =
        children.iter().filter(|c| c.agent_id == given || c.agent_id.starts_with(given)).collect();
    match matches.as_slice() {
        [one] => Ok(one.session_id.clone()),
        [] if level == Level::Unrestricted => match s.sessions.store().state(given).await {
            Ok(_) => Ok(given.to_string()),
            Err(super::SessionError::NotFound(_)) => Err(failed(format!(
                "there is no session '{given}' in the store (at unrestricted a session is read by its full id; \
                 session_list shows them)"
            ))),
            Err(e) => Err(failed(e)),
        },
        [] => Err(failed(format!("'{given}' is not a sub-agent of this session (session_list shows them)"))),
        many if many.iter().any(|c| c.agent_id == given) => {
            Ok(many.iter().find(|c| c.agent_id == given).map(|c| c.session_id.clone()).unwrap_or_default())
        }
        many => Err(failed(format!(
            "'{given}' is a prefix of more than one sub-agent: {}",
            many.iter().map(|c| c.agent_id.as_str()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// A time in ms since the epoch, as session_list shows it (UTC, to the second).
fn when(ms: i64) -> String {
    crate::agent::subagent::timestamp_at(ms / 1000)
}
struct Check(ToolSpec);
struct Compact(ToolSpec);

#[async_trait]
impl Tool for Search {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn call(&self, _args: Value) -> Result<Value, ToolError> {
        Err(failed("conversation_search runs only inside an agent's loop"))
    }
    async fn call_in(&self, args: Value, ctx: &crate::tools::ToolContext) -> Result<Value, ToolError> {
        let s = session()?;
        let query = args["query"].as_str().unwrap_or_default();
        let is_regex = args["is_regex"].as_bool().unwrap_or(false);
        let limit = args["limit"].as_u64().unwrap_or(20) as usize;
        let entries = s.sessions.store().entries(&reach(&s, &args, ctx.level).await?).await.map_err(failed)?;
        rules::search(&entries, query, is_regex, limit).map(Value::String).map_err(failed)
    }
}

#[async_trait]
impl Tool for Read {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn call(&self, _args: Value) -> Result<Value, ToolError> {
        Err(failed("conversation_read runs only inside an agent's loop"))
    }
    async fn call_in(&self, args: Value, ctx: &crate::tools::ToolContext) -> Result<Value, ToolError> {
        let s = session()?;
        let start = args["start"].as_i64().ok_or_else(|| failed("start must be an integer"))?;
        let limit = args["limit"].as_u64().unwrap_or(1) as usize;
        let entries = s.sessions.store().entries(&reach(&s, &args, ctx.level).await?).await.map_err(failed)?;
        rules::read(&entries, start, limit).map(Value::String).map_err(failed)
    }
}

#[async_trait]
impl Tool for List {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn call(&self, _args: Value) -> Result<Value, ToolError> {
        Err(failed("session_list runs only inside an agent's loop"))
    }
    async fn call_in(&self, _args: Value, ctx: &crate::tools::ToolContext) -> Result<Value, ToolError> {
        let s = session()?;
        let store = s.sessions.store();
        let mut lines = Vec::new();
        if ctx.level == Level::Unrestricted {
            // At unrestricted (where the shell reaches the store anyway): the store's recent root sessions.
            let (rows, more) = store.recent_roots(SESSION_LIST_LIMIT).await.map_err(failed)?;
            for r in rows {
                lines.push(format!("{}\t{}\t-\t{}", r.session_id, when(r.updated_at), r.title.unwrap_or_default()));
            }
            if more {
                lines.push(format!("(the {SESSION_LIST_LIMIT} most recent root sessions; there are more)"));
            }
        } else {
            let me = calling(&s);
            lines.push(format!("{me}\t-\t-\t(this session)"));
            let mut pending = vec![me.clone()];
            while let Some(parent) = pending.pop() {
                for c in store.children(&parent).await.map_err(failed)? {
                    let by = if parent == me { "this session".to_string() } else { parent.clone() };
                    lines.push(format!("{}\t{}\t{by}\t{}", c.agent_id, when(c.updated_at), c.title));
                    pending.push(c.session_id);
                }
            }
        }
        lines.push(format!("This session: {}", calling(&s)));
        Ok(Value::String(lines.join("\n")))
    }
}

#[async_trait]
impl Tool for FindSessions {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn call(&self, _args: Value) -> Result<Value, ToolError> {
        Err(failed("session_search runs only inside an agent's loop"))
    }
    async fn call_in(&self, args: Value, ctx: &crate::tools::ToolContext) -> Result<Value, ToolError> {
        let s = session()?;
        let store = s.sessions.store();
        let query = args["query"].as_str().unwrap_or_default();
        let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
        if words.is_empty() {
            return Err(failed("query is required: the words to find"));
        }
        let limit = (args["limit"].as_u64().unwrap_or(10) as usize).clamp(1, rules::SESSION_SEARCH_MAX);
        let with_children = args["include_children"].as_bool().unwrap_or(false);
        // The sessions in reach: (id as the tools take it, session id, title, last update).
        let mut reach: Vec<(String, String, String, i64)> = Vec::new();
        let mut trees: Vec<String> = Vec::new();
        if ctx.level == Level::Unrestricted {
            let (rows, _) = store.recent_roots(SESSION_SEARCH_SCAN).await.map_err(failed)?;
            for r in rows {
                if with_children {
                    trees.push(r.session_id.clone());
                }
                reach.push((r.session_id.clone(), r.session_id, r.title.unwrap_or_default(), r.updated_at));
            }
        } else {
            let me = calling(&s);
            reach.push((me.clone(), me.clone(), String::new(), 0));
            trees.push(me);
        }
        while let Some(parent) = trees.pop() {
            for c in store.children(&parent).await.map_err(failed)? {
                trees.push(c.session_id.clone());
                reach.push((c.agent_id, c.session_id, c.title, c.updated_at));
            }
        }
        let mut found = Vec::new();
        for (id, session_id, title, updated) in reach {
            let entries = store.entries(&session_id).await.map_err(failed)?;
            if let Some((in_title, n, line)) = rules::session_match(&words, &title, &rules::said(&entries)) {
                found.push((in_title, n, updated, id, title, line));
            }
        }
        found.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)).then(b.2.cmp(&a.2)));
        if found.is_empty() {
            return Ok(Value::String(format!("No session in reach matches '{query}'.")));
        }
        let lines: Vec<String> = found
            .into_iter()
            .take(limit)
            .map(|(_, _, updated, id, title, line)| {
                let when = if updated > 0 { when(updated) } else { "-".to_string() };
                format!("{id}\t{when}\t{title}\t{line}")
            })
            .collect();
        Ok(Value::String(lines.join("\n")))
    }
}

#[async_trait]
impl Tool for Check {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn call(&self, _args: Value) -> Result<Value, ToolError> {
        let s = session()?;
        Ok(Value::String(s.gauge().await.map_err(failed)?.report()))
    }
}

#[async_trait]
impl Tool for Compact {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn call(&self, args: Value) -> Result<Value, ToolError> {
        let s = session()?;
        if s.compact_asked.swap(true, Ordering::SeqCst) {
            return Ok(Value::String("A compaction is already requested.".into()));
        }
        let keep_recent = args["keep_recent"].as_bool().unwrap_or(true);
        let instructions = args["instructions"].as_str().map(str::to_string);
        *s.compact.lock().unwrap_or_else(|p| p.into_inner()) = Some((keep_recent, instructions));
        Ok(Value::String(
            "Compaction requested: older turns are summarised before the next model request, or when this run ends."
                .into(),
        ))
    }
}
