//! The scratchpad (SPEC §5): named texts a run keeps out of the conversation. `scratchpad: "<name>"` on
//! any call saves the tool's output there instead of returning it inline (errors and refusals stay
//! inline), and lifts the output caps of the tools that have them. The scratchpad tools read and change
//! the entries of the run they are called in.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::run_state::RunState;
use crate::error::ToolError;
use crate::permission::Level;
use crate::tools::{Tool, ToolContext, ToolSpec};

/// How many characters `scratchpad_read` returns when no `limit` is given.
pub const DEFAULT_READ_LIMIT: usize = 20_000;

tokio::task_local! {
    static SAVING: bool;
}

/// Whether the tool call this code runs in saves its output to the scratchpad. Tools with an output
/// cap (file_find 500 results, file_search 100 matches, web_fetch's length limit) return everything
/// when it does; an explicit limit the caller gave still applies.
pub fn saving() -> bool {
    SAVING.try_with(|s| *s).unwrap_or(false)
}

/// The number of results (or characters) a capped tool returns: `explicit` (the caller's limit) within
/// `cap`; when the output is saved to the scratchpad, the cap is lifted and only an explicit limit
/// applies.
pub fn output_cap(explicit: Option<usize>, cap: usize) -> usize {
    match (explicit, saving()) {
        (Some(n), true) => n,
        (None, true) => usize::MAX,
        (n, false) => n.unwrap_or(cap).min(cap),
    }
}

/// Runs `fut` as a call whose output is (or is not) saved.
pub(crate) async fn with_saving<F: std::future::Future>(on: bool, fut: F) -> F::Output {
    SAVING.scope(on, fut).await
}

/// The entries of one run.
pub(crate) type Entries = BTreeMap<String, String>;

/// What the model sees instead of an output saved under `name`.
pub(crate) fn saved_note(name: &str, output: &str) -> String {
    format!(
        "Saved {} characters ({} lines) to scratchpad '{name}'. Read it with scratchpad_read.",
        output.chars().count(),
        output.lines().count()
    )
}

fn state() -> Result<Arc<RunState>, ToolError> {
    RunState::current().ok_or_else(|| ToolError::failed("the scratchpad is only available inside a run"))
}

fn string_arg<'a>(args: &'a Value, key: &str, required: bool) -> Result<Option<&'a str>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) if required => Err(ToolError::failed(format!("{key} is required"))),
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.as_str())),
        Some(other) => Err(ToolError::failed(format!("{key} must be a string, got {other}"))),
    }
}

fn count_arg(args: &Value, key: &str) -> Result<Option<usize>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_f64()
            .filter(|n| n.fract() == 0.0 && *n >= 0.0)
            .map(|n| Some(n as usize))
            .ok_or_else(|| ToolError::failed(format!("{key} must be a non-negative integer, got {v}"))),
    }
}

fn name_arg(args: &Value) -> Result<String, ToolError> {
    let name = string_arg(args, "name", true)?.unwrap_or_default().trim().to_string();
    if name.is_empty() {
        return Err(ToolError::failed("name is required"));
    }
    Ok(name)
}

fn missing(entries: &Entries, name: &str) -> ToolError {
    let names: Vec<&str> = entries.keys().map(String::as_str).collect();
    ToolError::failed(format!(
        "there is no scratchpad entry '{name}' (entries: {})",
        if names.is_empty() { "none".to_string() } else { names.join(", ") }
    ))
}

enum Kind {
    Read,
    Write,
    Edit,
    List,
    SaveFile,
}

struct ScratchpadTool {
    spec: ToolSpec,
    kind: Kind,
}

#[async_trait]
impl Tool for ScratchpadTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _arguments: Value) -> Result<Value, ToolError> {
        Err(ToolError::failed("the scratchpad tools run inside a run only"))
    }

    async fn call_in(&self, args: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let state = state()?;
        if let Kind::SaveFile = self.kind {
            return save_file(&state, &args, ctx).await;
        }
        let mut entries = state.scratchpad.lock().unwrap_or_else(|p| p.into_inner());
        let text = match self.kind {
            Kind::List => {
                if entries.is_empty() {
                    "The scratchpad is empty.".to_string()
                } else {
                    let lines: Vec<String> =
                        entries.iter().map(|(k, v)| format!("{k}: {} characters", v.chars().count())).collect();
                    lines.join("\n")
                }
            }
            Kind::Read => {
                let name = name_arg(&args)?;
                let entry = entries.get(&name).ok_or_else(|| missing(&entries, &name))?;
                let offset = count_arg(&args, "offset")?.unwrap_or(0);
                let limit = count_arg(&args, "limit")?.unwrap_or(DEFAULT_READ_LIMIT);
                let total = entry.chars().count();
                let part: String = entry.chars().skip(offset).take(limit).collect();
                let end = (offset + part.chars().count()).min(total);
                if offset == 0 && end == total {
                    part
                } else {
                    format!("[characters {offset}..{end} of {total}]\n{part}")
                }
            }
            Kind::Write => {
                let name = name_arg(&args)?;
                let content = string_arg(&args, "content", true)?.unwrap_or_default().to_string();
                let n = content.chars().count();
                entries.insert(name.clone(), content);
                format!("Wrote {n} characters to scratchpad '{name}'.")
            }
            Kind::Edit => {
                let name = name_arg(&args)?;
                let old = string_arg(&args, "old", true)?.unwrap_or_default();
                let new = string_arg(&args, "new", true)?.unwrap_or_default();
                let missing_err = missing(&entries, &name);
                let entry = entries.get_mut(&name).ok_or(missing_err)?;
                if old.is_empty() {
                    return Err(ToolError::failed("old must not be empty"));
                }
                match entry.matches(old).count() {
                    0 => return Err(ToolError::failed(format!("'{name}' does not contain the text to replace"))),
                    1 => *entry = entry.replacen(old, new, 1),
                    n => {
                        return Err(ToolError::failed(format!(
                            "'{name}' contains the text to replace {n} times; give more context so it is unique"
                        )));
                    }
                }
                format!("Edited scratchpad '{name}'.")
            }
            Kind::SaveFile => unreachable!("handled above"),
        };
        Ok(Value::String(text))
    }
}

async fn save_file(state: &RunState, args: &Value, ctx: &ToolContext) -> Result<Value, ToolError> {
    let name = name_arg(args)?;
    let path = string_arg(args, "path", true)?.unwrap_or_default();
    let entry = {
        let entries = state.scratchpad.lock().unwrap_or_else(|p| p.into_inner());
        entries.get(&name).ok_or_else(|| missing(&entries, &name))?.clone()
    };
    // The file tools' one open path (checked, opened beneath the workspace root following no link, a
    // FIFO or device refused), on the blocking pool.
    let (scope, writes, path) = (ctx.scope.clone(), ctx.write_reach(), path.to_string());
    let bytes = entry.len();
    let target = tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let (target, mut file) = scope.open_write(&path, writes, true).map_err(|e| ToolError::failed(e.to_string()))?;
        file.write_all(entry.as_bytes())
            .map_err(|e| ToolError::failed(format!("could not write {}: {e}", target.display())))?;
        Ok::<_, ToolError>(target)
    })
    .await
    .map_err(|e| ToolError::failed(format!("scratchpad_save_file's work failed: {e}")))??;
    Ok(Value::String(format!("Saved scratchpad '{name}' ({bytes} bytes) to {}.", target.display())))
}

/// The scratchpad tools: read, write, edit and list at level `read`; save_file at `workspace`.
pub fn tools() -> Vec<Arc<dyn Tool>> {
    let name = json!({"type": "string", "description": "The entry's name"});
    let make = |n: &str, d: &str, params: Value, level: Level, kind: Kind, blank: &[&str]| -> Arc<dyn Tool> {
        let spec = ToolSpec::new(n, d, params).with_level(level).with_allow_blank(blank.iter().copied());
        Arc::new(ScratchpadTool { spec, kind })
    };
    vec![
        make(
            "scratchpad_read",
            "Reads a scratchpad entry (outputs saved with the scratchpad parameter, or written), by characters: offset (default 0) and limit (default 20000).",
            json!({"type": "object", "properties": {"name": name, "offset": {"type": "integer", "minimum": 0}, "limit": {"type": "integer", "minimum": 0}}, "required": ["name"]}),
            Level::Read,
            Kind::Read,
            &[],
        ),
        make(
            "scratchpad_write",
            "Writes a scratchpad entry, replacing one of the same name.",
            json!({"type": "object", "properties": {"name": name, "content": {"type": "string"}}, "required": ["name", "content"]}),
            Level::Read,
            Kind::Write,
            &["content"],
        ),
        make(
            "scratchpad_edit",
            "Replaces the one occurrence of old with new in a scratchpad entry.",
            json!({"type": "object", "properties": {"name": name, "old": {"type": "string"}, "new": {"type": "string"}}, "required": ["name", "old", "new"]}),
            Level::Read,
            Kind::Edit,
            &["new"],
        ),
        make(
            "scratchpad_list",
            "Lists the scratchpad entries with their sizes.",
            json!({"type": "object", "properties": {}}),
            Level::Read,
            Kind::List,
            &[],
        ),
        make(
            "scratchpad_save_file",
            "Writes a scratchpad entry to a file at path.",
            json!({"type": "object", "properties": {"name": name, "path": {"type": "string"}}, "required": ["name", "path"]}),
            Level::Workspace,
            Kind::SaveFile,
            &[],
        ),
    ]
}
