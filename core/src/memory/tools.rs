//! The memory tools. An agent gets them only when memory is configured (a disabled subsystem registers
//! no tools): `memory_remember`, `memory_recall`, `memory_forget`, and the caller-context pair
//! `memory_record_preference` and `memory_caller_context` (seed 004's `record_org_preference` and
//! `get_caller_context`, named under the `memory_` prefix every memory tool shares, as the
//! `checklist_`, `scratchpad_` and `conversation_` tools share theirs). A sub-agent granted memory
//! `read` gets the two reading tools over its parent's store, and never the three that write.
//!
//! Memories are the SDK's own store, not the host's files, so every memory tool runs from `read` up.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::rules::{self, MAX_RECALL};
use super::{Access, MemoryError, Recall, Remember, Target};
use crate::error::ToolError;
use crate::tools::{Tool, ToolSpec};

/// The names of the memory tools; the first two only read.
pub const NAMES: [&str; 5] =
    ["memory_recall", "memory_caller_context", "memory_remember", "memory_forget", "memory_record_preference"];

/// The tools for an agent's access: all five, or the two that read.
pub(crate) fn tools(access: &Arc<Access>) -> Vec<Arc<dyn Tool>> {
    let mut out: Vec<Arc<dyn Tool>> = vec![
        Arc::new(MemoryTool { kind: Kind::Recall, spec: recall_spec(), access: access.clone() }),
        Arc::new(MemoryTool { kind: Kind::CallerContext, spec: caller_context_spec(), access: access.clone() }),
    ];
    if access.writable {
        out.push(Arc::new(MemoryTool { kind: Kind::Remember, spec: remember_spec(), access: access.clone() }));
        out.push(Arc::new(MemoryTool { kind: Kind::Forget, spec: forget_spec(), access: access.clone() }));
        out.push(Arc::new(MemoryTool { kind: Kind::Preference, spec: preference_spec(), access: access.clone() }));
    }
    out
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Remember,
    Recall,
    Forget,
    Preference,
    CallerContext,
}

struct MemoryTool {
    kind: Kind,
    spec: ToolSpec,
    access: Arc<Access>,
}

fn spec(name: &str, description: &str, parameters: Value) -> ToolSpec {
    ToolSpec::new(name, description, parameters).with_level(crate::permission::Level::Read)
}

const KINDS: [&str; 4] = ["fact", "preference", "lesson", "instruction"];

fn remember_spec() -> ToolSpec {
    spec(
        "memory_remember",
        "Save a fact, preference, lesson or standing instruction that outlives this session. With a key, \
         a memory already saved under that key is updated in place (fields you leave out keep their \
         values); without one, a new memory is saved. Returns its id.",
        json!({"type": "object", "additionalProperties": false, "properties": {
            "title": {"type": "string", "description": "A short title (at most 200 bytes); the body's first line when left out."},
            "body": {"type": "string", "description": "What to remember (at most 8192 bytes). Required for a new memory."},
            "kind": {"type": "string", "enum": KINDS, "description": "Default fact."},
            "tags": {"type": "array", "items": {"type": "string"}, "description": "At most 16 tags."},
            "salience": {"type": "integer", "minimum": 1, "maximum": 10, "description": "1 (trivia) to 10 (essential); default 5."},
            "pinned": {"type": "boolean", "description": "Always shown at the start of every session."},
            "key": {"type": "string", "description": "A stable key: saving under it again updates this memory."}}}),
    )
}

fn recall_spec() -> ToolSpec {
    spec(
        "memory_recall",
        "Recall saved memories. With a query, ranked by relevance over title, body and tags; without one, \
         pinned and highest-salience memories first (your baseline). Filter by tags (all of them) and kind.",
        json!({"type": "object", "additionalProperties": false, "properties": {
            "query": {"type": "string", "description": "Words to search for."},
            "tags": {"type": "array", "items": {"type": "string"}},
            "kind": {"type": "string", "enum": KINDS},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RECALL, "description": "At most this many (default 10, at most 50)."}}}),
    )
}

fn forget_spec() -> ToolSpec {
    spec(
        "memory_forget",
        "Forget one memory, by its id (as recall shows it, without the #) or by its key.",
        json!({"type": "object", "additionalProperties": false, "properties": {
            "id": {"type": "integer", "minimum": 1},
            "key": {"type": "string"}}}),
    )
}

fn preference_spec() -> ToolSpec {
    spec(
        "memory_record_preference",
        "Save how a caller (an organisation or an agent that calls you) likes things served, so the next \
         interaction with them is better. With a key, the preference saved under it is updated in place.",
        json!({"type": "object", "additionalProperties": false, "properties": {
            "subject": {"type": "string", "description": "Who it is about, e.g. org:acme or agent:billing-bot."},
            "note": {"type": "string", "description": "The preference (at most 8192 bytes)."},
            "title": {"type": "string"},
            "key": {"type": "string", "description": "A stable key: saving under it again updates this preference."},
            "tags": {"type": "array", "items": {"type": "string"}},
            "salience": {"type": "integer", "minimum": 1, "maximum": 10},
            "pinned": {"type": "boolean"}},
            "required": ["subject", "note"]}),
    )
}

fn caller_context_spec() -> ToolSpec {
    spec(
        "memory_caller_context",
        "Read back what you saved about one or more callers (an organisation and/or an agent), most relevant \
         first: by the query when given, else pinned and highest salience first.",
        json!({"type": "object", "additionalProperties": false, "properties": {
            "subjects": {"type": "array", "items": {"type": "string"}, "description": "e.g. [\"org:acme\", \"agent:billing-bot\"]."},
            "query": {"type": "string"},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RECALL}},
            "required": ["subjects"]}),
    )
}

fn failed(e: MemoryError) -> ToolError {
    ToolError::Failed(format!("{e} ({})", e.code()))
}

fn text(args: &Value, key: &str) -> Option<String> {
    args.get(key).and_then(Value::as_str).map(str::to_string)
}

fn strings(args: &Value, key: &str) -> Option<Vec<String>> {
    args.get(key).and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
}

/// An integer argument: absent, `None`; an integer within 64 bits, itself; anything else (2^80, a
/// fraction, a string) refused by name rather than left out.
fn integer(args: &Value, name: &str) -> Result<Option<i64>, MemoryError> {
    match args.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .map(Some)
            .ok_or_else(|| MemoryError::invalid(name, format!("must be an integer within the 64-bit range, got {v}"))),
    }
}

/// The `limit` argument: absent, the default; a count otherwise. A negative, a fraction or any other
/// value is refused by name, never read as the default (SPEC §2), even on a call that did not come
/// through the loop's argument rule.
fn limit(args: &Value) -> Result<usize, MemoryError> {
    match args.get("limit") {
        None | Some(Value::Null) => Ok(Recall::default().limit),
        Some(v) => match v.as_u64() {
            Some(n) => {
                usize::try_from(n).map_err(|_| MemoryError::invalid("limit", format!("{n} is above {MAX_RECALL}")))
            }
            None => Err(MemoryError::invalid("limit", format!("must be a count from 1 to {MAX_RECALL}, got {v}"))),
        },
    }
}

#[async_trait]
impl Tool for MemoryTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, args: Value) -> Result<Value, ToolError> {
        self.run(args).await.map_err(failed)
    }
}

impl MemoryTool {
    async fn run(&self, args: Value) -> Result<Value, MemoryError> {
        let writes = matches!(self.kind, Kind::Remember | Kind::Forget | Kind::Preference);
        if writes && !self.access.writable {
            return Err(MemoryError::ReadOnly);
        }
        let memory = self.access.config.memory().await?;
        let agent = self.access.config.agent();
        let source = crate::session::current_session_id();
        match self.kind {
            Kind::Remember => {
                let m = Remember {
                    key: text(&args, "key"),
                    subject: None,
                    kind: rules::kind_arg("kind", args.get("kind").and_then(Value::as_str))?,
                    title: text(&args, "title"),
                    body: text(&args, "body"),
                    tags: strings(&args, "tags"),
                    salience: integer(&args, "salience")?,
                    pinned: args.get("pinned").and_then(Value::as_bool),
                    source,
                };
                let saved = memory.remember(agent, m).await?;
                let verb = if saved.created { "Saved" } else { "Updated" };
                Ok(Value::String(format!("{verb} memory #{}.", saved.memory.id)))
            }
            Kind::Preference => {
                let m = Remember {
                    key: text(&args, "key"),
                    subject: text(&args, "subject"),
                    kind: Some(super::MemoryKind::Preference),
                    title: text(&args, "title"),
                    body: text(&args, "note"),
                    tags: strings(&args, "tags"),
                    salience: integer(&args, "salience")?,
                    pinned: args.get("pinned").and_then(Value::as_bool),
                    source,
                };
                if m.body.is_none() {
                    return Err(MemoryError::invalid("note", "is required"));
                }
                let saved = memory.remember(agent, m).await?;
                let verb = if saved.created { "Saved" } else { "Updated" };
                Ok(Value::String(format!("{verb} preference #{}.", saved.memory.id)))
            }
            Kind::Recall => {
                let recall = Recall {
                    query: text(&args, "query"),
                    tags: strings(&args, "tags").unwrap_or_default(),
                    kind: rules::kind_arg("kind", args.get("kind").and_then(Value::as_str))?,
                    subjects: Vec::new(),
                    limit: limit(&args)?,
                };
                Ok(Value::String(rules::render_results(&memory.recall(agent, &recall).await?)))
            }
            Kind::CallerContext => {
                let subjects = strings(&args, "subjects").unwrap_or_default();
                if subjects.is_empty() {
                    return Err(MemoryError::invalid("subjects", "name at least one caller"));
                }
                let recall =
                    Recall { query: text(&args, "query"), subjects, limit: limit(&args)?, ..Recall::default() };
                Ok(Value::String(rules::render_results(&memory.recall(agent, &recall).await?)))
            }
            Kind::Forget => {
                let target = match (integer(&args, "id")?, text(&args, "key")) {
                    (Some(id), None) => Target::Id(id),
                    (None, Some(key)) => Target::Key(key),
                    (Some(_), Some(_)) => return Err(MemoryError::invalid("id", "give id or key, not both")),
                    (None, None) => return Err(MemoryError::invalid("id", "give the memory's id or its key")),
                };
                let shown = match &target {
                    Target::Id(id) => format!("#{id}"),
                    Target::Key(k) => format!("with key '{k}'"),
                };
                if memory.forget(agent, &target).await? {
                    Ok(Value::String(format!("Forgot memory {shown}.")))
                } else {
                    Err(MemoryError::NotFound(shown))
                }
            }
        }
    }
}
