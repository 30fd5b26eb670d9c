//! `tool_search`, `tool_load`, the wrapper that adds the note on undocumented parameters to a deferred
//! tool called without loading, and the stand-in for a tool of an unavailable server.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::search::{self, MAX_RESULTS};
use super::{Facts, Toolbox, Unavailable};
use crate::agent::run_state::RunState;
use crate::error::ToolError;
use crate::permission::Level;
use crate::tools::{Tool, ToolContext, ToolSpec};

/// The name of the tool that searches the deferred tools.
pub const TOOL_SEARCH: &str = "tool_search";
/// The name of the tool that loads deferred tools' schemas.
pub const TOOL_LOAD: &str = "tool_load";
/// The most names one `tool_load` takes.
pub const MAX_LOAD: usize = 10;

pub(crate) fn search_spec() -> ToolSpec {
    ToolSpec::new(
        TOOL_SEARCH,
        "Finds tools by keyword in their names and descriptions, deferred ones included. Returns up to 10 \
         tools, each with its summary, whether it is deferred (load it with tool_load to get its schema), \
         and whether a call is allowed at this session's level.",
        json!({
            "type": "object",
            "properties": {"query": {"type": "string", "description": "Keywords, e.g. `list issues`."}},
            "required": ["query"],
        }),
    )
    .with_level(Level::Read)
}

pub(crate) fn load_spec() -> ToolSpec {
    ToolSpec::new(
        TOOL_LOAD,
        "Loads deferred tools by exact name (one name or a list of up to 10): their schemas are in the \
         tools from the next request on. A deferred tool can also be called without loading it.",
        json!({
            "type": "object",
            "properties": {"name": {
                "type": "array", "items": {"type": "string"},
                "description": "The exact tool names, as the catalog or tool_search gives them.",
            }},
            "required": ["name"],
        }),
    )
    .with_level(Level::Read)
}

pub(super) fn meta_tool(name: &str, toolbox: Arc<Toolbox>, facts: Facts) -> Arc<dyn Tool> {
    if name == TOOL_SEARCH {
        Arc::new(ToolSearch { spec: search_spec(), toolbox, facts })
    } else {
        Arc::new(ToolLoad { spec: load_spec(), toolbox, facts })
    }
}

fn result_line(toolbox: &Toolbox, facts: &Facts, i: usize) -> Value {
    let e = &toolbox.entries[i];
    let spec = e.tool.spec();
    json!({
        "name": spec.name,
        "summary": super::catalog::summary(&spec.description, super::catalog::DEFAULT_SUMMARY_CHARS),
        "deferred": e.deferred,
        "level": facts.level_of(e.tool.as_ref()),
        "call": facts.call_verdict(e.tool.as_ref()),
    })
}

/// The search over the tools this session can see (blocked ones do not exist for it).
fn visible_search(toolbox: &Toolbox, facts: &Facts, query: &str) -> Vec<usize> {
    toolbox
        .index
        .search_where(query, MAX_RESULTS, |i| !facts.blocked(toolbox.entries[i].tool.as_ref()))
        .into_iter()
        .map(|(i, _)| i)
        .collect()
}

struct ToolSearch {
    spec: ToolSpec,
    toolbox: Arc<Toolbox>,
    facts: Facts,
}

#[async_trait]
impl Tool for ToolSearch {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        let query = arguments.get("query").and_then(Value::as_str).unwrap_or_default();
        let results: Vec<Value> = visible_search(&self.toolbox, &self.facts, query)
            .into_iter()
            .map(|i| result_line(&self.toolbox, &self.facts, i))
            .collect();
        if results.is_empty() {
            return Ok(Value::String(format!("No tool matches '{query}'.")));
        }
        Ok(json!({ "results": results }))
    }
}

struct ToolLoad {
    spec: ToolSpec,
    toolbox: Arc<Toolbox>,
    facts: Facts,
}

#[async_trait]
impl Tool for ToolLoad {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        let names: Vec<String> = arguments
            .get("name")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default();
        if names.is_empty() {
            return Err(ToolError::Failed("argument 'name' needs at least one tool name".into()));
        }
        if names.len() > MAX_LOAD {
            return Err(ToolError::Failed(format!(
                "tool_load takes at most {MAX_LOAD} names at once, got {}",
                names.len()
            )));
        }
        let run = RunState::current();
        let mut loaded = Vec::new();
        let mut unknown = Vec::new();
        for name in &names {
            match self.toolbox.get(name).filter(|e| !self.facts.blocked(e.tool.as_ref())) {
                Some(e) => {
                    if e.deferred
                        && let Some(run) = &run
                    {
                        run.deferral.lock().unwrap_or_else(|p| p.into_inner()).load(name);
                    }
                    let spec = e.tool.spec();
                    loaded.push(json!({
                        "name": spec.name,
                        "call": self.facts.call_verdict(e.tool.as_ref()),
                        "level": self.facts.level_of(e.tool.as_ref()),
                        "description": spec.description,
                        "parameters": spec.parameters,
                    }));
                }
                None => unknown.push(self.suggest(name)),
            }
        }
        let mut out = serde_json::Map::new();
        if !loaded.is_empty() {
            out.insert("loaded".into(), Value::Array(loaded));
            out.insert(
                "note".into(),
                Value::String("The loaded tools' schemas are in the tools of the next request.".into()),
            );
        }
        if !unknown.is_empty() {
            out.insert("unknown".into(), Value::Array(unknown));
        }
        Ok(Value::Object(out))
    }
}

impl ToolLoad {
    /// For a name that matches nothing: the nearest registered names, or failing that the keyword
    /// matches for it.
    fn suggest(&self, name: &str) -> Value {
        let visible = self
            .toolbox
            .entries
            .iter()
            .filter(|e| !self.facts.blocked(e.tool.as_ref()))
            .map(|e| e.tool.spec().name.as_str());
        let nearest = search::nearest_names(name, visible, 5);
        if !nearest.is_empty() {
            return json!({"name": name, "error": "no tool has this name", "nearest_names": nearest});
        }
        let matches: Vec<&str> = visible_search(&self.toolbox, &self.facts, name)
            .into_iter()
            .map(|i| self.toolbox.entries[i].tool.spec().name.as_str())
            .collect();
        json!({"name": name, "error": "no tool has this name", "keyword_matches": matches})
    }
}

/// The note for a deferred tool called without loading: every documented parameter the call did not
/// pass, with its type, default and description. `None` when it passed them all.
pub fn undocumented_note(spec: &ToolSpec, arguments: &Value) -> Option<String> {
    let props = spec.parameters.get("properties")?.as_object()?;
    let passed = arguments.as_object();
    let mut lines = Vec::new();
    let mut keys: Vec<&String> = props.keys().collect();
    keys.sort();
    for key in keys {
        if passed.is_some_and(|p| p.contains_key(key)) {
            continue;
        }
        let prop = &props[key];
        let ty = match prop.get("type") {
            Some(Value::String(t)) => t.clone(),
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" | "),
            _ => "any".to_string(),
        };
        let default = match prop.get("default") {
            Some(d) => format!("default {d}"),
            None => "no default".to_string(),
        };
        let desc = prop.get("description").and_then(Value::as_str).unwrap_or("(no description)");
        lines.push(format!("- {key} ({ty}, {default}): {desc}"));
    }
    if lines.is_empty() {
        return None;
    }
    Some(format!(
        "[Note: {} was called without tool_load. Documented parameters this call did not pass:\n{}]",
        spec.name,
        lines.join("\n")
    ))
}

/// A deferred tool, called: it runs, and the first call in a run that leaves documented parameters out
/// (without the tool loaded) gets the note appended.
pub(super) struct DeferredCall {
    inner: Arc<dyn Tool>,
}

impl DeferredCall {
    pub fn new(inner: Arc<dyn Tool>) -> Self {
        DeferredCall { inner }
    }
}

fn append(result: Value, note: &str) -> Value {
    let text = match result {
        Value::String(s) => s,
        other => other.to_string(),
    };
    Value::String(format!("{text}\n\n{note}"))
}

#[async_trait]
impl Tool for DeferredCall {
    fn spec(&self) -> &ToolSpec {
        self.inner.spec()
    }
    fn level(&self) -> Level {
        self.inner.level()
    }
    fn requires_approval(&self) -> bool {
        self.inner.requires_approval()
    }

    async fn call(&self, arguments: Value) -> Result<Value, ToolError> {
        self.inner.call(arguments).await
    }

    async fn call_in(&self, arguments: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let note = RunState::current().and_then(|run| {
            let mut loads = run.deferral.lock().unwrap_or_else(|p| p.into_inner());
            let name = &self.inner.spec().name;
            if loads.is_loaded(name) || loads.noted.contains(name) {
                return None;
            }
            let note = undocumented_note(self.inner.spec(), &arguments)?;
            loads.noted.insert(name.clone());
            Some(note)
        });
        match (self.inner.call_in(arguments, ctx).await, note) {
            (Ok(result), Some(n)) => Ok(append(result, &n)),
            (Err(ToolError::Failed(m)), Some(n)) => Err(ToolError::Failed(format!("{m}\n\n{n}"))),
            (other, _) => other,
        }
    }
}

/// A tool of a server that does not answer: every call says why.
pub(super) fn unavailable_tool(name: &str, u: &Unavailable) -> Arc<dyn Tool> {
    let spec =
        ToolSpec::new(name, format!("unavailable: {}", u.reason), json!({"type": "object"})).with_level(Level::None);
    Arc::new(UnavailableTool { spec, message: format!("MCP server '{}' is unavailable: {}", u.group, u.reason) })
}

struct UnavailableTool {
    spec: ToolSpec,
    message: String,
}

#[async_trait]
impl Tool for UnavailableTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn call(&self, _arguments: Value) -> Result<Value, ToolError> {
        Err(ToolError::Failed(self.message.clone()))
    }
}
