//! file_read, file_find, file_search (read) and file_edit, file_write (workspace).

use std::io::{Read, Write};
use std::path::Path;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::error::ToolError;
use crate::permission::{Access, Level, WriteReach};
use crate::tools::{Tool, ToolContext, ToolSpec};

/// The most results file_find returns.
pub const FIND_CAP: usize = 500;
/// The most matches file_search returns.
pub const SEARCH_CAP: usize = 100;
/// The most characters file_read returns.
const READ_CAP: usize = 256 * 1024;

fn arg<'a>(args: &'a Value, name: &str) -> Option<&'a str> {
    args.get(name).and_then(Value::as_str)
}

fn count(args: &Value, name: &str) -> Option<usize> {
    args.get(name).and_then(Value::as_u64).map(|n| n as usize)
}

fn fail(e: impl std::fmt::Display) -> ToolError {
    ToolError::Failed(e.to_string())
}

fn outside_message(
    result: Result<std::path::PathBuf, crate::permission::ScopeError>,
) -> Result<std::path::PathBuf, ToolError> {
    result.map_err(fail)
}

macro_rules! builtin {
    ($ty:ident, $name:literal, $level:expr, $desc:literal, $params:expr $(, allow_blank = $blank:expr)?) => {
        #[doc = $desc]
        pub struct $ty {
            spec: ToolSpec,
        }

        impl $ty {
            pub fn new() -> Self {
                #[allow(unused_mut)]
                let mut spec = ToolSpec::new($name, $desc, $params).with_level($level);
                $(spec = spec.with_allow_blank($blank);)?
                $ty { spec }
            }
        }

        impl Default for $ty {
            fn default() -> Self {
                Self::new()
            }
        }
    };
}

builtin!(
    FileRead,
    "file_read",
    Level::Read,
    "Reads a text file. Optional `offset` (first line, 1-based) and `limit` (number of lines).",
    json!({"type": "object", "properties": {
        "path": {"type": "string", "description": "The file, relative to the working directory or absolute"},
        "offset": {"type": "integer", "minimum": 1, "description": "The first line to return, 1-based"},
        "limit": {"type": "integer", "minimum": 0, "description": "How many lines to return"}
    }, "required": ["path"], "additionalProperties": false})
);

#[async_trait]
impl Tool for FileRead {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn call(&self, _: Value) -> Result<Value, ToolError> {
        Err(fail("file_read runs inside an agent"))
    }
    async fn call_in(&self, args: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let path = arg(&args, "path").unwrap_or_default().to_string();
        let (_, mut file) = ctx.scope.open_read(&path, ctx.write_reach()).map_err(fail)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(|e| fail(format!("{path}: {e}")))?;
        let text = String::from_utf8(bytes).map_err(|_| fail(format!("{path} is not a UTF-8 text file")))?;
        let offset = count(&args, "offset").unwrap_or(1).max(1);
        let text = match (args.get("offset"), count(&args, "limit")) {
            (None, None) => text,
            (_, limit) => {
                text.split_inclusive('\n').skip(offset - 1).take(limit.unwrap_or(usize::MAX)).collect::<String>()
            }
        };
        Ok(Value::String(super::clip(&text, READ_CAP, "the file")))
    }
}

builtin!(
    FileFind,
    "file_find",
    Level::Read,
    "Finds files whose path matches a glob (`**/*.rs`), under a directory (default: the working directory). At most 500 results.",
    json!({"type": "object", "properties": {
        "pattern": {"type": "string", "description": "A glob matched against paths relative to `path`"},
        "path": {"type": "string", "description": "The directory to search (default: the working directory)"},
        "limit": {"type": "integer", "minimum": 0, "description": "At most this many results (at most 500)"}
    }, "required": ["pattern"], "additionalProperties": false})
);

/// Walks `root` depth first in name order, calling `visit` with each file's path; stops when it returns
/// false. Directories outside reach and symlinks are not followed.
fn walk(root: &Path, ctx: &ToolContext, visit: &mut dyn FnMut(&Path) -> bool) {
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut entries: Vec<_> = entries.filter_map(Result::ok).collect();
        entries.sort_by_key(|e| std::cmp::Reverse(e.file_name()));
        let mut subdirs = Vec::new();
        for e in entries.into_iter().rev() {
            let Ok(ft) = e.file_type() else { continue };
            let p = e.path();
            if ft.is_dir() {
                if e.file_name() != ".git" && ctx.scope.allows(&p, Access::Read, ctx.write_reach()) {
                    subdirs.push(p);
                }
            } else if ft.is_file() && !visit(&p) {
                return;
            }
        }
        stack.extend(subdirs.into_iter().rev());
    }
}

#[async_trait]
impl Tool for FileFind {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn call(&self, _: Value) -> Result<Value, ToolError> {
        Err(fail("file_find runs inside an agent"))
    }
    async fn call_in(&self, args: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let root =
            outside_message(ctx.scope.check(arg(&args, "path").unwrap_or("."), Access::Read, ctx.write_reach()))?;
        if !root.is_dir() {
            return Err(fail(format!("not a directory: {}", arg(&args, "path").unwrap_or("."))));
        }
        let pattern = arg(&args, "pattern").unwrap_or_default();
        let glob = globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| fail(format!("argument 'pattern' is not a valid glob: {e}")))?
            .compile_matcher();
        let cap = crate::agent::scratchpad::output_cap(count(&args, "limit"), FIND_CAP);
        let ctx2 = ctx.clone();
        tokio::task::spawn_blocking(move || {
            let mut found = Vec::new();
            let mut more = 0usize;
            walk(&root, &ctx2, &mut |p| {
                let rel = p.strip_prefix(&root).unwrap_or(p);
                if glob.is_match(rel) {
                    if found.len() < cap {
                        found.push(rel.display().to_string());
                    } else {
                        more += 1;
                    }
                }
                true
            });
            let mut out = found.join("\n");
            if found.is_empty() {
                out = "no files matched".into();
            }
            if more > 0 {
                out.push_str(&format!("\n[… {more} more matches not shown; the cap is {cap}]"));
            }
            Ok(Value::String(out))
        })
        .await
        .map_err(fail)?
    }
}

builtin!(
    FileSearch,
    "file_search",
    Level::Read,
    "Searches file contents with a regular expression, under a directory (default: the working directory). Answers `path:line: text`, at most 100 matches.",
    json!({"type": "object", "properties": {
        "pattern": {"type": "string", "description": "A regular expression (Rust syntax)"},
        "path": {"type": "string", "description": "A directory or a file (default: the working directory)"},
        "glob": {"type": "array", "items": {"type": "string"}, "description": "Only files whose relative path matches one of these globs"},
        "case_insensitive": {"type": "boolean"},
        "limit": {"type": "integer", "minimum": 0, "description": "At most this many matches (at most 100)"}
    }, "required": ["pattern"], "additionalProperties": false})
);

#[async_trait]
impl Tool for FileSearch {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn call(&self, _: Value) -> Result<Value, ToolError> {
        Err(fail("file_search runs inside an agent"))
    }
    async fn call_in(&self, args: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let given = arg(&args, "path").unwrap_or(".").to_string();
        let root = outside_message(ctx.scope.check(&given, Access::Read, ctx.write_reach()))?;
        let regex = regex::RegexBuilder::new(arg(&args, "pattern").unwrap_or_default())
            .case_insensitive(args.get("case_insensitive") == Some(&Value::Bool(true)))
            .size_limit(1 << 20)
            .build()
            .map_err(|e| fail(format!("argument 'pattern' is not a valid regular expression: {e}")))?;
        let mut globs = globset::GlobSetBuilder::new();
        let globbed = args.get("glob").and_then(Value::as_array).is_some_and(|g| !g.is_empty());
        for g in args.get("glob").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            globs.add(globset::Glob::new(g).map_err(|e| fail(format!("argument 'glob' holds an invalid glob: {e}")))?);
        }
        let globs = globs.build().map_err(fail)?;
        let cap = crate::agent::scratchpad::output_cap(count(&args, "limit"), SEARCH_CAP);
        let ctx2 = ctx.clone();
        tokio::task::spawn_blocking(move || {
            let mut hits = Vec::new();
            let mut more = 0usize;
            let base = if root.is_dir() { root.clone() } else { root.parent().unwrap_or(&root).to_path_buf() };
            let mut scan = |p: &Path| {
                let rel = p.strip_prefix(&base).unwrap_or(p);
                if globbed && !globs.is_match(rel) {
                    return true;
                }
                let Ok(text) = std::fs::read_to_string(p) else { return true };
                for (i, line) in text.lines().enumerate() {
                    if regex.is_match(line) {
                        if hits.len() < cap {
                            hits.push(format!("{}:{}: {}", rel.display(), i + 1, super::clip(line, 500, "the line")));
                        } else {
                            more += 1;
                        }
                    }
                }
                true
            };
            if root.is_dir() {
                walk(&root, &ctx2, &mut scan);
            } else {
                scan(&root);
            }
            let mut out = if hits.is_empty() { "no matches".to_string() } else { hits.join("\n") };
            if more > 0 {
                out.push_str(&format!("\n[… {more} more matches not shown; the cap is {cap}]"));
            }
            Ok(Value::String(out))
        })
        .await
        .map_err(fail)?
    }
}

builtin!(
    FileEdit,
    "file_edit",
    Level::Workspace,
    "Replaces exact text in a file: `old_text` must occur once (or pass `replace_all`). `new_text` may be empty.",
    json!({"type": "object", "properties": {
        "path": {"type": "string"},
        "old_text": {"type": "string", "description": "The exact text to replace"},
        "new_text": {"type": "string", "description": "The replacement; empty deletes"},
        "replace_all": {"type": "boolean", "description": "Replace every occurrence"}
    }, "required": ["path", "old_text", "new_text"], "additionalProperties": false}),
    allow_blank = ["new_text"]
);

#[async_trait]
impl Tool for FileEdit {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn call(&self, _: Value) -> Result<Value, ToolError> {
        Err(fail("file_edit runs inside an agent"))
    }
    async fn call_in(&self, args: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let path = arg(&args, "path").unwrap_or_default();
        let old = arg(&args, "old_text").unwrap_or_default();
        let new = arg(&args, "new_text").unwrap_or_default();
        if ctx.write_reach() == WriteReach::Nowhere {
            return Err(fail(format!("path '{path}' is outside this session's reach")));
        }
        let (_, mut file) = ctx.scope.open_read(path, ctx.write_reach()).map_err(fail)?;
        let mut text = String::new();
        file.read_to_string(&mut text).map_err(|e| fail(format!("{path}: {e}")))?;
        let n = text.matches(old).count();
        let replace_all = args.get("replace_all") == Some(&Value::Bool(true));
        if n == 0 {
            return Err(fail(format!("old_text was not found in {path}")));
        }
        if n > 1 && !replace_all {
            return Err(fail(format!("old_text occurs {n} times in {path}; give more context or pass replace_all")));
        }
        let updated = if replace_all { text.replace(old, new) } else { text.replacen(old, new, 1) };
        let (_, mut out) = ctx.scope.open_write(path, ctx.write_reach(), true).map_err(fail)?;
        out.write_all(updated.as_bytes()).map_err(|e| fail(format!("{path}: {e}")))?;
        Ok(Value::String(format!(
            "replaced {} occurrence{} in {path}",
            if replace_all { n } else { 1 },
            if replace_all && n != 1 { "s" } else { "" }
        )))
    }
}

builtin!(
    FileWrite,
    "file_write",
    Level::Workspace,
    "Writes a file, replacing what it held. The parent directory must exist. `content` may be empty.",
    json!({"type": "object", "properties": {
        "path": {"type": "string"},
        "content": {"type": "string", "description": "The whole new content"}
    }, "required": ["path", "content"], "additionalProperties": false}),
    allow_blank = ["content"]
);

#[async_trait]
impl Tool for FileWrite {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }
    async fn call(&self, _: Value) -> Result<Value, ToolError> {
        Err(fail("file_write runs inside an agent"))
    }
    async fn call_in(&self, args: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let path = arg(&args, "path").unwrap_or_default();
        let content = arg(&args, "content").unwrap_or_default();
        let (_, mut file) = ctx.scope.open_write(path, ctx.write_reach(), true).map_err(fail)?;
        file.write_all(content.as_bytes()).map_err(|e| fail(format!("{path}: {e}")))?;
        Ok(Value::String(format!("wrote {} bytes to {path}", content.len())))
    }
}
