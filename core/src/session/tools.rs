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

/// The four session tools, at `read`.
pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(Search(
            ToolSpec::new(
                "conversation_search",
                "Search this session's whole conversation, including turns compaction summarised away. Returns \
                 matching lines tagged #N and role.",
                json!({"type": "object", "properties": {
                    "query": {"type": "string", "description": "A literal (case-insensitive) unless is_regex."},
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
                    "limit": {"type": "integer", "minimum": 1, "description": "Messages to read (default 1, at most 20)."}
                }, "required": ["start"]}),
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
struct Check(ToolSpec);
struct Compact(ToolSpec);

#[async_trait]
impl Tool for Search {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn call(&self, args: Value) -> Result<Value, ToolError> {
        let s = session()?;
        let query = args["query"].as_str().unwrap_or_default();
        let is_regex = args["is_regex"].as_bool().unwrap_or(false);
        let limit = args["limit"].as_u64().unwrap_or(20) as usize;
        let entries = s.sessions.store().entries(&s.session_id).await.map_err(failed)?;
        rules::search(&entries, query, is_regex, limit).map(Value::String).map_err(failed)
    }
}

#[async_trait]
impl Tool for Read {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }
    async fn call(&self, args: Value) -> Result<Value, ToolError> {
        let s = session()?;
        let start = args["start"].as_i64().ok_or_else(|| failed("start must be an integer"))?;
        let limit = args["limit"].as_u64().unwrap_or(1) as usize;
        let entries = s.sessions.store().entries(&s.session_id).await.map_err(failed)?;
        rules::read(&entries, start, limit).map(Value::String).map_err(failed)
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
