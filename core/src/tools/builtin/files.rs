//! file_read, file_find, file_search (read) and file_edit, file_write (workspace).
//!
//! Every file these tools open goes through the scope's one open-and-verify path
//! ([`crate::permission::Scope::open_read`], [`crate::permission::Scope::open_write`], and for walks
//! the located root beneath which each entry is opened): resolved, checked, then opened beneath the
//! granting root following no link, regular files only. Every read is streamed with a byte bound, and
//! all the work runs on the blocking pool, never on the async runtime's workers: a call cancelled with
//! its run returns at once, and what is left of its work is bounded by the limits below.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{MAX_OUTPUT_BYTES, bytes_in_words, utf8_cut};
use crate::error::ToolError;
use crate::permission::open::{Kind, Located};
use crate::permission::scope::Found;
use crate::permission::{Access, Level, Scope, ScopeError, WriteReach};
use crate::tools::{Tool, ToolContext, ToolSpec};

/// The most results file_find returns.
pub const FIND_CAP: usize = 500;
/// The most matches file_search returns.
pub const SEARCH_CAP: usize = 100;
/// The most characters file_read returns.
pub const READ_CAP: usize = 256 * 1024;
/// The most bytes file_read reads through to reach the line `offset` names.
pub const READ_SCAN_MAX_BYTES: u64 = 1 << 30;
/// The largest file file_edit edits (it holds the file and its edited copy in memory).
pub const EDIT_MAX_BYTES: u64 = 32 << 20;
/// The most bytes file_search reads of one file; the rest of a larger file is not searched.
pub const SEARCH_FILE_MAX_BYTES: u64 = 16 << 20;
/// The most bytes one file_search call reads in all.
pub const SEARCH_TOTAL_MAX_BYTES: u64 = 1 << 30;
/// The longest line file_search matches; a longer one is matched on its first this many bytes.
pub const SEARCH_LINE_MAX_BYTES: usize = 64 << 10;
/// The most directory entries one file_find or file_search walk looks at.
pub const WALK_MAX_ENTRIES: usize = 500_000;
/// The buffer each streamed read goes through.
const READ_BUFFER_BYTES: usize = 64 << 10;
/// How far into a file file_search looks for a NUL byte, the mark of a binary file it skips.
const BINARY_PROBE_BYTES: usize = 8 << 10;

fn arg<'a>(args: &'a Value, name: &str) -> Option<&'a str> {
    args.get(name).and_then(Value::as_str)
}

fn count(args: &Value, name: &str) -> Option<usize> {
    args.get(name).and_then(Value::as_u64).map(|n| usize::try_from(n).unwrap_or(usize::MAX))
}

fn fail(e: impl std::fmt::Display) -> ToolError {
    ToolError::Failed(e.to_string())
}

fn scope_fail(e: ScopeError) -> ToolError {
    fail(e)
}

/// Runs a file tool's work on the blocking pool. The call's future only waits for it: dropped (the run
/// cancelled), it returns at once and the work, bounded by this module's limits, ends on its own.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, ToolError> + Send + 'static,
) -> Result<T, ToolError> {
    tokio::task::spawn_blocking(work).await.map_err(|e| fail(format!("the file tool's work failed: {e}")))?
}

macro_rules! builtin {
    ($ty:ident, $name:literal, $level:expr, $desc:literal, $params:expr $(, allow_blank = $blank:expr)?) => {
        #[doc = $desc]
        pub struct $ty {
            spec: ToolSpec,
        }

        impl $ty {
            /// The tool.
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
    "Reads a text file. Optional `offset` (first line, 1-based) and `limit` (number of lines). At most 262144 characters are returned; use offset and limit to read further.",
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
        let offset = count(&args, "offset").unwrap_or(1).max(1);
        let limit = count(&args, "limit");
        let (scope, writes) = (ctx.scope.clone(), ctx.write_reach());
        blocking(move || {
            let (_, file) = scope.open_read(&path, writes).map_err(scope_fail)?;
            read_lines(file, &path, offset, limit).map(Value::String)
        })
        .await
    }
}

/// Lines `offset..offset + limit` (1-based) of a file, streamed: at most [`READ_SCAN_MAX_BYTES`] are
/// read through to reach `offset`, and at most [`READ_CAP`] characters are returned, with a note when
/// the file goes on. Memory stays within a few times [`READ_CAP`] whatever the file's size.
fn read_lines(file: std::fs::File, given: &str, offset: usize, limit: Option<usize>) -> Result<String, ToolError> {
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let io = |e: std::io::Error| fail(format!("{given}: {e}"));
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, file);
    let mut position: u64 = 0;
    // Skip to the line `offset` names, within the scan bound.
    let mut skipped = 0usize;
    while skipped < offset - 1 {
        if position >= READ_SCAN_MAX_BYTES {
            return Err(fail(format!(
                "offset {offset} lies past the first {} of {given}, the most file_read reads through to reach a line",
                bytes_in_words(READ_SCAN_MAX_BYTES)
            )));
        }
        let buf = reader.fill_buf().map_err(io)?;
        if buf.is_empty() {
            return Ok(String::new());
        }
        let n = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => {
                skipped += 1;
                i + 1
            }
            None => buf.len(),
        };
        reader.consume(n);
        position += n as u64;
    }
    // Take whole lines up to `limit`, and at most READ_CAP characters (four bytes each at most).
    let byte_cap = READ_CAP * 4;
    let mut out: Vec<u8> = Vec::new();
    let mut lines = 0usize;
    let mut more = false;
    while limit.is_none_or(|l| lines < l) {
        let buf = reader.fill_buf().map_err(io)?;
        if buf.is_empty() {
            break;
        }
        if out.len() == byte_cap {
            more = true;
            break;
        }
        let (take, line_end) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        let take = take.min(byte_cap - out.len());
        out.extend_from_slice(buf.get(..take).unwrap_or_default());
        reader.consume(take);
        position += take as u64;
        if line_end && out.last() == Some(&b'\n') {
            lines += 1;
        }
    }
    let text = match utf8_cut(&out) {
        Some(t) if t.len() == out.len() || more => t,
        _ => return Err(fail(format!("{given} is not a UTF-8 text file"))),
    };
    let (text, cut) = match text.char_indices().nth(READ_CAP) {
        Some((i, _)) => (text.get(..i).unwrap_or(text), true),
        None => (text, more),
    };
    if !cut {
        return Ok(text.to_string());
    }
    let shown = if offset > 1 { format!(" from line {offset}") } else { String::new() };
    let rest = size.saturating_sub(position.saturating_sub((out.len() - text.len()) as u64));
    let rest = if rest > 0 { format!("{rest} more bytes of the file") } else { "more of the file".to_string() };
    Ok(format!(
        "{text}\n[… {rest} not shown: file_read returns at most {READ_CAP} characters{shown}; use offset and limit to read further]"
    ))
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

/// How a walk ended.
#[derive(Debug, Default)]
struct Walked {
    /// Entries looked at.
    entries: usize,
    /// The walk stopped at [`WALK_MAX_ENTRIES`].
    truncated: bool,
}

impl Walked {
    fn note(&self) -> Option<String> {
        self.truncated.then(|| {
            format!(
                "[the walk stopped after {WALK_MAX_ENTRIES} entries, the most one call looks at; name a narrower path]"
            )
        })
    }
}

/// Walks the located directory `found` depth first in name order (a directory's files, then its
/// subdirectories), calling `visit` with each regular file's path relative to `found` and its
/// location; stops when `visit` returns false. Every entry is located beneath the granting root by the
/// scope's one open path, following no link: a symlink is skipped, and an entry swapped for one after
/// it was listed fails to open. `.git` is not entered. At most [`WALK_MAX_ENTRIES`] entries are looked at.
fn walk(found: &Found<'_>, visit: &mut dyn FnMut(&Path, &Path, &Located) -> bool) -> Walked {
    let beneath = &found.beneath;
    let mut walked = Walked::default();
    let mut stack = vec![PathBuf::new()];
    while let Some(dir) = stack.pop() {
        let Ok(located) = beneath.locate(&found.rel.join(&dir)) else { continue };
        if located.kind != Kind::Directory {
            continue;
        }
        let room = WALK_MAX_ENTRIES.saturating_sub(walked.entries);
        let Ok((mut names, more)) = beneath.list(&located, room) else { continue };
        drop(located);
        if more {
            walked.truncated = true;
        }
        names.sort();
        let mut subdirs = Vec::new();
        for name in names {
            walked.entries += 1;
            let rel = dir.join(&name);
            let under_root = found.rel.join(&rel);
            let Ok(entry) = beneath.locate(&under_root) else { continue };
            match entry.kind {
                Kind::Directory if name != ".git" => subdirs.push(rel),
                Kind::Regular if !visit(&rel, &under_root, &entry) => return walked,
                _ => {}
            }
        }
        if walked.truncated {
            return walked;
        }
        stack.extend(subdirs.into_iter().rev());
    }
    walked
}

/// Collected output lines under a count cap and the [`MAX_OUTPUT_BYTES`] ceiling; what does not fit
/// is counted.
#[derive(Debug)]
struct Capped {
    cap: usize,
    lines: Vec<String>,
    bytes: usize,
    more: usize,
    full: bool,
}

impl Capped {
    fn new(cap: usize) -> Capped {
        Capped { cap, lines: Vec::new(), bytes: 0, more: 0, full: false }
    }

    fn push(&mut self, line: impl FnOnce() -> String) {
        if self.lines.len() >= self.cap || self.full {
            self.more += 1;
            return;
        }
        let line = line();
        if self.bytes + line.len() + 1 > MAX_OUTPUT_BYTES {
            self.full = true;
            self.more += 1;
            return;
        }
        self.bytes += line.len() + 1;
        self.lines.push(line);
    }

    fn finish(self, none: &str, what: &str, notes: impl IntoIterator<Item = String>) -> String {
        let mut out = if self.lines.is_empty() { none.to_string() } else { self.lines.join("\n") };
        if self.more > 0 {
            if self.full {
                out.push_str(&format!(
                    "\n[… {} more {what} not shown; one call returns at most {}]",
                    self.more,
                    bytes_in_words(MAX_OUTPUT_BYTES as u64)
                ));
            } else {
                out.push_str(&format!("\n[… {} more {what} not shown; the cap is {}]", self.more, self.cap));
            }
        }
        for note in notes {
            out.push('\n');
            out.push_str(&note);
        }
        out
    }
}

/// The located directory a walk starts from, or why `given` is not one.
fn walk_root<'a>(scope: &'a Scope, given: &str, writes: WriteReach) -> Result<Found<'a>, ToolError> {
    let found = scope.locate(given, Access::Read, writes).map_err(scope_fail)?;
    if found.kind() != Kind::Directory {
        return Err(fail(format!("not a directory: {given}")));
    }
    Ok(found)
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
        let given = arg(&args, "path").unwrap_or(".").to_string();
        let pattern = arg(&args, "pattern").unwrap_or_default();
        let glob = globset::GlobBuilder::new(pattern)
            .literal_separator(true)
            .build()
            .map_err(|e| fail(format!("argument 'pattern' is not a valid glob: {e}")))?
            .compile_matcher();
        let cap = crate::agent::scratchpad::output_cap(count(&args, "limit"), FIND_CAP);
        let (scope, writes) = (ctx.scope.clone(), ctx.write_reach());
        blocking(move || {
            let root = walk_root(&scope, &given, writes)?;
            let mut found = Capped::new(cap);
            let walked = walk(&root, &mut |rel, _, _| {
                if glob.is_match(rel) {
                    found.push(|| rel.display().to_string());
                }
                true
            });
            Ok(Value::String(found.finish("no files matched", "matches", walked.note())))
        })
        .await
    }
}

builtin!(
    FileSearch,
    "file_search",
    Level::Read,
    "Searches file contents with a regular expression, under a directory (default: the working directory). Answers `path:line: text`, at most 100 matches. Binary files are skipped; at most 16 MiB of each file and 1 GiB in all are read.",
    json!({"type": "object", "properties": {
        "pattern": {"type": "string", "description": "A regular expression (Rust syntax)"},
        "path": {"type": "string", "description": "A directory or a file (default: the working directory)"},
        "glob": {"type": "array", "items": {"type": "string"}, "description": "Only files whose relative path matches one of these globs"},
        "case_insensitive": {"type": "boolean"},
        "limit": {"type": "integer", "minimum": 0, "description": "At most this many matches (at most 100)"}
    }, "required": ["pattern"], "additionalProperties": false})
);

/// The most memory one search pattern may compile to (1 MiB): a larger one (`\w{1000}{1000}`) is refused,
/// never built. Matching itself takes time linear in the text (the `regex` crate never backtracks), so
/// no pattern can hang a search.
pub const PATTERN_MAX_BYTES: usize = 1 << 20;

/// A search pattern (Rust regex syntax) compiled within [`PATTERN_MAX_BYTES`], or why it is refused,
/// naming the argument `pattern`. The one rule for every tool that searches by pattern (file_search,
/// skill_search).
pub(crate) fn search_regex(pattern: &str, case_insensitive: bool) -> Result<regex::Regex, String> {
    regex::RegexBuilder::new(pattern)
        .case_insensitive(case_insensitive)
        .size_limit(PATTERN_MAX_BYTES)
        .dfa_size_limit(PATTERN_MAX_BYTES)
        .build()
        .map_err(|e| format!("argument 'pattern' is not a valid regular expression: {e}"))
}

/// One file_search call's matches and the bounds it met.
struct Search {
    regex: regex::Regex,
    hits: Capped,
    /// Bytes read so far, against [`SEARCH_TOTAL_MAX_BYTES`].
    read: u64,
    /// Files searched only in their first [`SEARCH_FILE_MAX_BYTES`].
    partial_files: usize,
    /// Lines matched only on their first [`SEARCH_LINE_MAX_BYTES`].
    long_lines: usize,
    /// The call stopped at [`SEARCH_TOTAL_MAX_BYTES`].
    exhausted: bool,
}

impl Search {
    /// Searches one open regular file, streamed line by line within the bounds. False when the call's
    /// byte budget is spent and the search must stop.
    fn file(&mut self, file: std::fs::File, rel: &Path) -> bool {
        let left = SEARCH_TOTAL_MAX_BYTES.saturating_sub(self.read);
        if left == 0 {
            self.exhausted = true;
            return false;
        }
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        let bound = SEARCH_FILE_MAX_BYTES.min(left);
        let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, file.take(bound));
        let mut line: Vec<u8> = Vec::new();
        let (mut number, mut long, mut first, mut consumed) = (0usize, false, true, 0u64);
        while let Ok(buf) = reader.fill_buf() {
            if buf.is_empty() {
                break;
            }
            if first {
                first = false;
                if buf.iter().take(BINARY_PROBE_BYTES).any(|&b| b == 0) {
                    break;
                }
            }
            let (segment, line_end) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (buf.get(..i).unwrap_or_default(), true),
                None => (buf, false),
            };
            let room = SEARCH_LINE_MAX_BYTES - line.len();
            long |= segment.len() > room;
            line.extend_from_slice(segment.get(..room.min(segment.len())).unwrap_or_default());
            let n = segment.len() + usize::from(line_end);
            reader.consume(n);
            consumed += n as u64;
            if line_end {
                number += 1;
                if !self.line(rel, number, &line, long) {
                    break;
                }
                line.clear();
                long = false;
            }
        }
        if !line.is_empty() {
            self.line(rel, number + 1, &line, long);
        }
        self.read += consumed;
        if consumed == bound && size > bound {
            if bound == SEARCH_FILE_MAX_BYTES {
                self.partial_files += 1;
            } else {
                self.exhausted = true;
                return false;
            }
        }
        true
    }

    /// Matches one line. False when the line is not text (the file is binary, and skipped from here).
    fn line(&mut self, rel: &Path, number: usize, line: &[u8], long: bool) -> bool {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let text = match utf8_cut(line) {
            Some(t) if t.len() == line.len() || long => t,
            _ => return false,
        };
        if long {
            self.long_lines += 1;
        }
        if self.regex.is_match(text) {
            self.hits.push(|| format!("{}:{number}: {}", rel.display(), super::clip(text, 500, "the line")));
        }
        true
    }

    fn finish(self) -> String {
        let mut notes = Vec::new();
        if self.partial_files > 0 {
            notes.push(format!(
                "[{} file(s) were searched only in their first {}, the most file_search reads of one file]",
                self.partial_files,
                bytes_in_words(SEARCH_FILE_MAX_BYTES)
            ));
        }
        if self.long_lines > 0 {
            notes.push(format!(
                "[{} line(s) longer than {} were matched on their first {} only]",
                self.long_lines,
                bytes_in_words(SEARCH_LINE_MAX_BYTES as u64),
                bytes_in_words(SEARCH_LINE_MAX_BYTES as u64)
            ));
        }
        if self.exhausted {
            notes.push(format!(
                "[the search stopped after reading {}, the most one call reads; name a narrower path or glob]",
                bytes_in_words(SEARCH_TOTAL_MAX_BYTES)
            ));
        }
        self.hits.finish("no matches", "matches", notes)
    }
}

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
        let case_insensitive = args.get("case_insensitive") == Some(&Value::Bool(true));
        let regex = search_regex(arg(&args, "pattern").unwrap_or_default(), case_insensitive).map_err(fail)?;
        let mut globs = globset::GlobSetBuilder::new();
        let globbed = args.get("glob").and_then(Value::as_array).is_some_and(|g| !g.is_empty());
        for g in args.get("glob").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            globs.add(globset::Glob::new(g).map_err(|e| fail(format!("argument 'glob' holds an invalid glob: {e}")))?);
        }
        let globs = globs.build().map_err(fail)?;
        let cap = crate::agent::scratchpad::output_cap(count(&args, "limit"), SEARCH_CAP);
        let (scope, writes) = (ctx.scope.clone(), ctx.write_reach());
        blocking(move || {
            let found = scope.locate(&given, Access::Read, writes).map_err(scope_fail)?;
            let mut search =
                Search { regex, hits: Capped::new(cap), read: 0, partial_files: 0, long_lines: 0, exhausted: false };
            let mut walked = Walked::default();
            match found.kind() {
                Kind::Directory => {
                    walked = walk(&found, &mut |rel, under_root, located| {
                        if globbed && !globs.is_match(rel) {
                            return true;
                        }
                        match found.beneath.read(under_root, located) {
                            Ok(file) => search.file(file, rel),
                            Err(_) => true,
                        }
                    });
                }
                _ => {
                    // One file, named by its own name (the directory it is in is the base).
                    let name = found.resolved.file_name().map(PathBuf::from).unwrap_or_default();
                    if !globbed || globs.is_match(&name) {
                        let file = found.open_file(&given).map_err(scope_fail)?;
                        search.file(file, &name);
                    }
                }
            }
            let mut out = search.finish();
            if let Some(note) = walked.note() {
                out.push('\n');
                out.push_str(&note);
            }
            Ok(Value::String(out))
        })
        .await
    }
}

builtin!(
    FileEdit,
    "file_edit",
    Level::Workspace,
    "Replaces exact text in a file: `old_text` must occur once (or pass `replace_all`). `new_text` may be empty. Files up to 32 MiB.",
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
        let path = arg(&args, "path").unwrap_or_default().to_string();
        let old = arg(&args, "old_text").unwrap_or_default().to_string();
        let new = arg(&args, "new_text").unwrap_or_default().to_string();
        let replace_all = args.get("replace_all") == Some(&Value::Bool(true));
        let (scope, writes) = (ctx.scope.clone(), ctx.write_reach());
        blocking(move || edit(&scope, writes, &path, &old, &new, replace_all)).await
    }
}

fn edit(
    scope: &Arc<Scope>,
    writes: WriteReach,
    path: &str,
    old: &str,
    new: &str,
    all: bool,
) -> Result<Value, ToolError> {
    if writes == WriteReach::Nowhere {
        return Err(scope_fail(ScopeError::OutsideReach(path.to_string())));
    }
    let (_, file) = scope.open_read(path, writes).map_err(scope_fail)?;
    let mut bytes = Vec::new();
    file.take(EDIT_MAX_BYTES + 1).read_to_end(&mut bytes).map_err(|e| fail(format!("{path}: {e}")))?;
    if bytes.len() as u64 > EDIT_MAX_BYTES {
        return Err(fail(format!(
            "{path} is larger than {}, the largest file file_edit edits",
            bytes_in_words(EDIT_MAX_BYTES)
        )));
    }
    let text = String::from_utf8(bytes).map_err(|_| fail(format!("{path} is not a UTF-8 text file")))?;
    let n = text.matches(old).count();
    if n == 0 {
        return Err(fail(format!("old_text was not found in {path}")));
    }
    if n > 1 && !all {
        return Err(fail(format!("old_text occurs {n} times in {path}; give more context or pass replace_all")));
    }
    let updated = if all { text.replace(old, new) } else { text.replacen(old, new, 1) };
    let (_, mut out) = scope.open_write(path, writes, true).map_err(scope_fail)?;
    out.write_all(updated.as_bytes()).map_err(|e| fail(format!("{path}: {e}")))?;
    Ok(Value::String(format!(
        "replaced {} occurrence{} in {path}",
        if all { n } else { 1 },
        if all && n != 1 { "s" } else { "" }
    )))
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
        let path = arg(&args, "path").unwrap_or_default().to_string();
        let content = arg(&args, "content").unwrap_or_default().to_string();
        let (scope, writes) = (ctx.scope.clone(), ctx.write_reach());
        blocking(move || {
            let (_, mut file) = scope.open_write(&path, writes, true).map_err(scope_fail)?;
            file.write_all(content.as_bytes()).map_err(|e| fail(format!("{path}: {e}")))?;
            Ok(Value::String(format!("wrote {} bytes to {path}", content.len())))
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file holding `bytes` in a temporary directory removed when the guard drops (a test run once
    /// left 13 MB behind in /tmp each time).
    fn tempfile(name: &str, bytes: &[u8]) -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::Builder::new().prefix(&format!("ambit-files-{name}-")).tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, bytes).unwrap();
        (d, p)
    }

    /// What file_read answered before it streamed: the whole text, then lines `offset..offset+limit`.
    fn whole_read_lines(text: &str, offset: usize, limit: Option<usize>) -> String {
        text.split_inclusive('\n').skip(offset - 1).take(limit.unwrap_or(usize::MAX)).collect()
    }

    #[test]
    fn streamed_lines_match_the_whole_read_across_buffer_boundaries() {
        // Lines of many lengths, some longer than the read buffer, multi-byte characters among them.
        let mut text = String::new();
        for i in 0..400usize {
            let len = (i * 7919) % (READ_BUFFER_BYTES + 3000);
            text.push_str(&"é".repeat(len / 2));
            text.push_str(&format!(" line {i}\n"));
        }
        text.push_str("no newline at the end");
        let (_dir_lines, path) = tempfile("lines", text.as_bytes());
        for (offset, limit) in
            [(1, None), (1, Some(0)), (1, Some(3)), (5, Some(2)), (399, None), (401, None), (402, None), (9999, None)]
        {
            let got = read_lines(std::fs::File::open(&path).unwrap(), "f", offset, limit).unwrap();
            let want = whole_read_lines(&text, offset, limit);
            if want.chars().count() <= READ_CAP {
                assert_eq!(got, want, "offset {offset} limit {limit:?}");
            } else {
                let head: String = want.chars().take(READ_CAP).collect();
                assert!(
                    got.starts_with(&head) && got[head.len()..].starts_with("\n[… "),
                    "offset {offset} limit {limit:?}"
                );
                assert!(got.ends_with("use offset and limit to read further]"));
            }
        }
        let (_dir_bad, bad) = tempfile("bad", b"ok\n\xff\xfe\n");
        let e = read_lines(std::fs::File::open(&bad).unwrap(), "bad", 1, None).unwrap_err();
        assert_eq!(e.to_string(), "bad is not a UTF-8 text file");
    }

    #[test]
    fn search_numbers_lines_across_buffers_strips_cr_and_bounds_long_lines() {
        let mut text = String::new();
        for i in 1..=3000usize {
            let pad = "x".repeat((i * 31) % 200);
            text.push_str(&format!("{pad} {}\r\n", if i % 1000 == 0 { "hit" } else { "miss" }));
        }
        text.push_str(&"y".repeat(SEARCH_LINE_MAX_BYTES * 2));
        text.push_str(" hit-beyond-the-line-bound\nlast hit");
        let (_dir_search, path) = tempfile("search", text.as_bytes());
        let regex = regex::Regex::new(r"\bhit\b").unwrap();
        let mut search =
            Search { regex, hits: Capped::new(100), read: 0, partial_files: 0, long_lines: 0, exhausted: false };
        assert!(search.file(std::fs::File::open(&path).unwrap(), Path::new("f")));
        let lines: Vec<&str> = search.hits.lines.iter().map(String::as_str).collect();
        let want: Vec<String> = [1000, 2000, 3000]
            .iter()
            .map(|&i| format!("f:{i}: {} hit", "x".repeat((i * 31) % 200)))
            .chain(["f:3002: last hit".to_string()])
            .collect();
        assert_eq!(lines, want);
        assert_eq!(search.long_lines, 1);
        let (_dir_binary, binary) = tempfile("binary", b"hit\0hit\n");
        assert!(search.file(std::fs::File::open(&binary).unwrap(), Path::new("b")));
        assert_eq!(search.hits.lines.len(), 4, "a file with a NUL byte is skipped");
    }

    /// A call's future dropped (its run cancelled) returns at once, while its work is still running on
    /// the blocking pool; the runtime's only worker is free for other work meanwhile.
    #[tokio::test(flavor = "current_thread")]
    async fn a_cancelled_call_returns_while_its_blocking_work_lingers() {
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let (started, is_started) = tokio::sync::oneshot::channel::<()>();
        let (done, is_done) = std::sync::mpsc::channel::<()>();
        let mut call = Box::pin(blocking(move || {
            let _ = started.send(());
            let _ = wait.recv();
            let _ = done.send(());
            Ok(())
        }));
        tokio::select! {
            _ = &mut call => panic!("the work cannot finish before it is released"),
            _ = is_started => {}
        }
        drop(call);
        let other = tokio::spawn(async { 42 });
        assert_eq!(other.await.unwrap(), 42, "the runtime runs other work");
        assert!(is_done.try_recv().is_err(), "the work is still running after the call was dropped");
        release.send(()).unwrap();
        is_done.recv().unwrap();
    }
}
