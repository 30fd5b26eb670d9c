//! Knowledge (SPEC §14, seed 004 "Knowledge"): documents an agent opens on demand, in a knowledge
//! directory. The agent lists them (`knowledge_list`: names, types, sizes) and reads one
//! (`knowledge_read`): a text document comes back inline up to a cap; a larger one, or a binary one (a
//! PDF, an image, a spreadsheet), comes back as its path, which the file tools open under the agent's
//! scope. Publishing is the host's operation, never the agent's ([`publish`]): "Text documents only
//! (up to 200 KB) and overwrite defaults to false so you can't clobber an existing file by accident".
//!
//! Every file is reached through the session's scope by the file tools' open-and-verify path: a
//! knowledge directory outside reach is refused and no link is followed. A publish writes the whole
//! document beside its name and renames it into place, never half written.
//!
//! ```no_run
//! use ambit::knowledge::{KnowledgeConfig, publish};
//! # fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! publish("/srv/agents/support/knowledge", "refund-policy", "# Refunds\nOver 500 EUR: a second approver.", false)?;
//! # let model = ambit::OpenAiChat::new("gpt-4.1");
//! let agent = ambit::Agent::builder().model(model).knowledge(KnowledgeConfig::new("/srv/agents/support/knowledge")).build()?;
//! # Ok(()) }
//! ```

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::error::ToolError;
use crate::permission::open::Kind;
use crate::permission::{Access, Level, Scope, ScopeError, WriteReach};
use crate::tools::builtin::bytes_in_words;
use crate::tools::{Tool, ToolContext, ToolSpec};

/// The largest document a host publishes: seed 004's 200 KB (200,000 bytes).
pub const MAX_PUBLISH_BYTES: usize = 200_000;
/// The most bytes of text `knowledge_read` returns inline by default (64 KiB); a larger document comes
/// back as its path.
pub const DEFAULT_INLINE_MAX_BYTES: usize = 64 << 10;
/// The most an inline cap may be set to (1 MiB).
pub const MAX_INLINE_MAX_BYTES: usize = 1 << 20;
/// The most entries `knowledge_list` looks at.
pub const LIST_MAX_ENTRIES: usize = 10_000;
/// The most bytes of `knowledge_list`'s answer (32 KiB); the documents past it are counted, not listed.
pub const LIST_MAX_BYTES: usize = 32 << 10;
/// The longest document name, in bytes.
pub const MAX_NAME_BYTES: usize = 255;
/// The names of the knowledge tools.
pub const NAMES: [&str; 2] = ["knowledge_list", "knowledge_read"];

/// Extensions whose documents are text (seed 004: "md, txt, csv, json, html…"); anything else is read as
/// text only when its bytes are UTF-8 without a NUL byte.
const TEXT_EXTENSIONS: [&str; 16] = [
    "md", "markdown", "txt", "text", "csv", "tsv", "json", "jsonl", "html", "htm", "xml", "yaml", "yml", "toml", "rst",
    "log",
];
/// Extensions that are never published (binaries go through the host's own upload).
const BINARY_EXTENSIONS: [&str; 14] =
    ["pdf", "png", "jpg", "jpeg", "gif", "webp", "xlsx", "xls", "docx", "doc", "pptx", "zip", "gz", "bin"];

/// A knowledge call refused or failed. Each has a stable `code`, the same in every language.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KnowledgeError {
    /// An argument out of bounds or malformed; `field` names it.
    #[error("invalid knowledge argument '{field}': {message}")]
    InvalidArgument {
        /// The argument that is wrong.
        field: String,
        /// What is wrong with it.
        message: String,
    },
    /// A document of that name exists and `overwrite` was off.
    #[error("a knowledge document named '{0}' already exists; pass overwrite to replace it")]
    Exists(String),
    /// The directory could not be read or written.
    #[error("knowledge store error: {0}")]
    Io(String),
}

impl KnowledgeError {
    /// A stable machine-readable code, the same in every language.
    pub fn code(&self) -> &'static str {
        match self {
            KnowledgeError::InvalidArgument { .. } => "knowledge_invalid_argument",
            KnowledgeError::Exists(_) => "knowledge_exists",
            KnowledgeError::Io(_) => "knowledge_io",
        }
    }

    /// The argument a refusal names, if any.
    pub fn field(&self) -> Option<&str> {
        match self {
            KnowledgeError::InvalidArgument { field, .. } => Some(field),
            _ => None,
        }
    }

    fn invalid(field: &str, message: impl Into<String>) -> KnowledgeError {
        KnowledgeError::InvalidArgument { field: field.into(), message: message.into() }
    }
}

/// An agent's knowledge directory, as plain data (`AgentOptions::knowledge`, the bindings' form).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KnowledgeConfig {
    /// The directory, absolute or relative to the working directory; it must be in the session's read
    /// reach.
    pub dir: String,
    /// The most bytes of text returned inline (default 64 KiB, at most 1 MiB).
    #[serde(default)]
    pub inline_max_bytes: Option<usize>,
}

impl KnowledgeConfig {
    /// Knowledge in `dir`, every other setting at its default.
    pub fn new(dir: impl Into<String>) -> KnowledgeConfig {
        KnowledgeConfig { dir: dir.into(), inline_max_bytes: None }
    }

    /// Checks the settings: a valid path, the cap within its bound.
    pub fn validate(&self) -> Result<(), String> {
        crate::permission::scope::validate(&self.dir).map_err(|e| format!("knowledge: dir: {e}"))?;
        match self.inline_max_bytes {
            Some(n) if n == 0 || n > MAX_INLINE_MAX_BYTES => {
                Err(format!("knowledge: inline_max_bytes must be from 1 to {MAX_INLINE_MAX_BYTES}, got {n}"))
            }
            _ => Ok(()),
        }
    }

    fn inline_cap(&self) -> usize {
        self.inline_max_bytes.unwrap_or(DEFAULT_INLINE_MAX_BYTES)
    }
}

/// What a publish wrote.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Published {
    /// The document's name in the directory (`.md` added when the name had no extension).
    pub name: String,
    /// Its path, as resolved.
    pub path: String,
    /// The document's size in bytes.
    pub bytes: usize,
    /// Whether an existing document was replaced.
    pub replaced: bool,
}

/// A document's name: one file name, no path, not hidden; `.md` added when it has no extension.
fn document_name(name: &str) -> Result<String, KnowledgeError> {
    let bad = |why: &str| KnowledgeError::invalid("name", format!("'{}' {why}", name.escape_debug()));
    if name.trim().is_empty() {
        return Err(KnowledgeError::invalid("name", "is empty"));
    }
    if name.contains(['/', '\\', '\0']) || name.chars().any(char::is_control) {
        return Err(bad("is not a plain file name: no slashes or control characters"));
    }
    if name.starts_with('.') {
        return Err(bad("starts with a dot"));
    }
    let name = if Path::new(name).extension().is_none() { format!("{name}.md") } else { name.to_string() };
    if name.len() > MAX_NAME_BYTES {
        return Err(KnowledgeError::invalid("name", format!("is longer than {MAX_NAME_BYTES} bytes")));
    }
    Ok(name)
}

fn extension(name: &str) -> String {
    Path::new(name).extension().and_then(|e| e.to_str()).unwrap_or_default().to_ascii_lowercase()
}

/// Publishes a text document into the knowledge directory `dir` (made if missing), atomically: "Text
/// documents only (up to 200 KB)", and an existing document of that name is replaced only with
/// `overwrite`. The agent sees it on its next request (`knowledge_list`).
pub fn publish(dir: &str, name: &str, content: &str, overwrite: bool) -> Result<Published, KnowledgeError> {
    let name = document_name(name)?;
    if BINARY_EXTENSIONS.contains(&extension(&name).as_str()) {
        return Err(KnowledgeError::invalid(
            "name",
            format!("'{name}' names a binary document; only text documents are published"),
        ));
    }
    if content.len() > MAX_PUBLISH_BYTES {
        return Err(KnowledgeError::invalid(
            "content",
            format!("is {} bytes, more than the {MAX_PUBLISH_BYTES} (200 KB) a document may hold", content.len()),
        ));
    }
    if content.contains('\0') {
        return Err(KnowledgeError::invalid("content", "holds a NUL byte: only text documents are published"));
    }
    crate::permission::scope::validate(dir).map_err(|e| KnowledgeError::invalid("dir", e.to_string()))?;
    std::fs::create_dir_all(dir).map_err(|e| KnowledgeError::Io(format!("{dir}: {e}")))?;
    // The directory is the one workspace root: the write lands beneath it by the scope's open path.
    let scope = Scope::new(dir, Vec::<PathBuf>::new(), Vec::<PathBuf>::new(), true).map_err(KnowledgeError::Io)?;
    let existed = scope.open_read(&name, WriteReach::WorkspaceRoots).is_ok();
    let path =
        scope.write_atomic(&name, WriteReach::WorkspaceRoots, content.as_bytes(), overwrite).map_err(|e| match e {
            ScopeError::Exists(_) => KnowledgeError::Exists(name.clone()),
            other => KnowledgeError::Io(other.to_string()),
        })?;
    Ok(Published { path: path.display().to_string(), bytes: content.len(), replaced: existed && overwrite, name })
}

/// Gives an agent the knowledge tools over its directory.
pub(crate) fn tools(config: &KnowledgeConfig) -> Vec<Arc<dyn Tool>> {
    let config = Arc::new(config.clone());
    vec![
        Arc::new(KnowledgeTool { read: false, spec: list_spec(), config: config.clone() }),
        Arc::new(KnowledgeTool { read: true, spec: read_spec(config.inline_cap()), config }),
    ]
}

fn list_spec() -> ToolSpec {
    ToolSpec::new(
        "knowledge_list",
        "Lists your knowledge documents: name, type (text or binary) and size. Open one with knowledge_read.",
        json!({"type": "object", "additionalProperties": false, "properties": {}}),
    )
    .with_level(Level::Read)
}

fn read_spec(cap: usize) -> ToolSpec {
    ToolSpec::new(
        "knowledge_read",
        format!(
            "Reads a knowledge document by name. A text document up to {} comes back inline; a larger or \
             binary one (PDF, image, spreadsheet) comes back as a path to open with the file tools.",
            bytes_in_words(cap as u64)
        ),
        json!({"type": "object", "additionalProperties": false, "properties": {
            "name": {"type": "string", "description": "The document's name, as knowledge_list shows it."}},
            "required": ["name"]}),
    )
    .with_level(Level::Read)
}

struct KnowledgeTool {
    read: bool,
    spec: ToolSpec,
    config: Arc<KnowledgeConfig>,
}

#[async_trait]
impl Tool for KnowledgeTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _: Value) -> Result<Value, ToolError> {
        Err(ToolError::Failed(format!("{} runs inside an agent", self.spec.name)))
    }

    async fn call_in(&self, args: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let (read, config, scope) = (self.read, self.config.clone(), ctx.scope.clone());
        let name = args.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
        let work = move || {
            let out = if read { read_document(&scope, &config, &name) } else { list(&scope, &config.dir) };
            out.map(Value::String).map_err(ToolError::Failed)
        };
        tokio::task::spawn_blocking(work)
            .await
            .map_err(|e| ToolError::Failed(format!("the knowledge tool's work failed: {e}")))?
    }
}

/// Whether bytes (a document's first bytes) read as text.
fn looks_like_text(name: &str, head: &[u8]) -> bool {
    if TEXT_EXTENSIONS.contains(&extension(name).as_str()) {
        return !head.contains(&0);
    }
    !head.contains(&0) && crate::tools::builtin::utf8_cut(head).is_some()
}

/// Every regular file beneath the knowledge directory, in name order, with its type and size.
fn list(scope: &Scope, dir: &str) -> Result<String, String> {
    let found =
        scope.locate(dir, Access::Read, WriteReach::Nowhere).map_err(|e| format!("knowledge directory: {e}"))?;
    if found.kind() != Kind::Directory {
        return Err(format!("knowledge directory '{dir}' is not a directory"));
    }
    let (mut names, more) = found
        .beneath
        .list(&found.located, LIST_MAX_ENTRIES)
        .map_err(|_| format!("knowledge directory '{dir}' could not be listed"))?;
    names.sort();
    let mut lines = Vec::new();
    let (mut bytes, mut left_out) = (0usize, 0usize);
    for name in names {
        if bytes > LIST_MAX_BYTES {
            left_out += 1;
            continue;
        }
        let Some(name) = name.to_str().filter(|n| !n.starts_with('.')) else { continue };
        let rel = found.rel.join(name);
        let Ok(located) = found.beneath.locate(&rel) else { continue };
        if located.kind != Kind::Regular {
            continue;
        }
        let size = located.meta.len();
        let mut head = Vec::new();
        if let Ok(file) = found.beneath.read(&rel, &located) {
            let _ = file.take(8 << 10).read_to_end(&mut head);
        }
        let kind = if looks_like_text(name, &head) { "text" } else { "binary" };
        let line = format!("{name} ({kind}, {size} bytes)");
        bytes += line.len() + 1;
        if bytes > LIST_MAX_BYTES {
            left_out += 1;
            continue;
        }
        lines.push(line);
    }
    let mut out = if lines.is_empty() { "no knowledge documents".to_string() } else { lines.join("\n") };
    if left_out > 0 {
        out.push_str(&format!(
            "\n[… {left_out} more documents not listed: the listing stops at {}; knowledge_read opens any by name, \
             and the file tools list the directory '{dir}']",
            bytes_in_words(LIST_MAX_BYTES as u64)
        ));
    }
    if more {
        out.push_str(&format!("\n[the listing stopped after {LIST_MAX_ENTRIES} entries]"));
    }
    Ok(out)
}

/// A document inline, or its path when it is binary or larger than the cap.
fn read_document(scope: &Scope, config: &KnowledgeConfig, name: &str) -> Result<String, String> {
    if name.is_empty() || name.contains(['/', '\0']) || name.starts_with('.') {
        return Err(format!("argument 'name': '{}' is not a knowledge document name", name.escape_debug()));
    }
    let given = Path::new(&config.dir).join(name).to_string_lossy().into_owned();
    let found = scope.locate(&given, Access::Read, WriteReach::Nowhere).map_err(|e| match e {
        ScopeError::Io(m) if m.starts_with("no such file") => {
            format!("there is no knowledge document named '{name}'; knowledge_list lists them")
        }
        other => other.to_string(),
    })?;
    let file = found.open_file(&given).map_err(|e| e.to_string())?;
    let size = found.located.meta.len();
    let cap = config.inline_cap();
    let mut bytes = Vec::new();
    file.take(cap as u64 + 1).read_to_end(&mut bytes).map_err(|e| format!("{name}: {e}"))?;
    let path = found.resolved.display();
    if !looks_like_text(name, bytes.get(..bytes.len().min(8 << 10)).unwrap_or_default()) {
        return Ok(format!("{name} is a binary document ({size} bytes): open it with the file tools at {path}"));
    }
    if size > cap as u64 || bytes.len() > cap {
        return Ok(format!(
            "{name} is {size} bytes, more than the {} returned inline: open it with the file tools (file_read with \
             offset and limit) at {path}",
            bytes_in_words(cap as u64)
        ));
    }
    String::from_utf8(bytes).map_err(|_| format!("{name} is not UTF-8 text: open it with the file tools at {path}"))
}
