//! The skill tools (seed 000 "The skill_* tools"). `skill_read` and `skill_search` are registered
//! whenever skills are configured and run from `read`; `skill_write`, `skill_edit` and `skill_delete`
//! "are registered only when [skills] agent_managed is on, and never for a sub-agent", and run from
//! `workspace`, since they write files: where the write lands is decided by the session's scope as for
//! `file_write` (the skills directory must be in write reach). All file work runs on the blocking pool.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::frontmatter::SkillFile;
use super::{Loaded, MAX_DESCRIPTION_CHARS, MAX_SKILL_BYTES, PRIORITY_RANGE, SkillsAccess};
use crate::error::ToolError;
use crate::permission::{Level, Scope, WriteReach};
use crate::tools::builtin::bytes_in_words;
use crate::tools::{Tool, ToolContext, ToolSpec};

/// The names of the skill tools; the first two only read.
pub const NAMES: [&str; 5] = ["skill_read", "skill_search", "skill_write", "skill_edit", "skill_delete"];

/// The most matches skill_search returns.
pub const SEARCH_CAP: usize = 100;
/// The most characters of a matched line skill_search shows.
const SEARCH_LINE_CHARS: usize = 500;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Read,
    Search,
    Write,
    Edit,
    Delete,
}

/// The tools for an agent's skills: the two that read, and the three that write when agent-managed.
pub(crate) fn tools(access: &Arc<SkillsAccess>) -> Vec<Arc<dyn Tool>> {
    let mut kinds = vec![Kind::Read, Kind::Search];
    if access.config.agent_managed {
        kinds.extend([Kind::Write, Kind::Edit, Kind::Delete]);
    }
    kinds.into_iter().map(|kind| Arc::new(SkillTool { kind, spec: spec(kind), access: access.clone() }) as _).collect()
}

struct SkillTool {
    kind: Kind,
    spec: ToolSpec,
    access: Arc<SkillsAccess>,
}

fn spec(kind: Kind) -> ToolSpec {
    let name = json!({"type": "string", "description": "The skill's folder name, as the skills index lists it."});
    match kind {
        Kind::Read => ToolSpec::new(
            "skill_read",
            "Returns the full body of a skill's SKILL.md, prefixed with the skill's base directory (where its \
             bundled files are).",
            json!({"type": "object", "additionalProperties": false, "properties": {"name": name}, "required": ["name"]}),
        )
        .with_level(Level::Read),
        Kind::Search => ToolSpec::new(
            "skill_search",
            "Matches a regular expression (Rust syntax) against each line of every skill, bodies included: this \
             reaches the skills the capped index did not list. Answers `skill:line: text`, at most 100 matches.",
            json!({"type": "object", "additionalProperties": false, "properties": {
                "pattern": {"type": "string", "description": "A regular expression"},
                "case_insensitive": {"type": "boolean"},
                "limit": {"type": "integer", "minimum": 1, "maximum": SEARCH_CAP, "description": "At most this many matches (default and most 100)"}},
                "required": ["pattern"]}),
        )
        .with_level(Level::Read),
        Kind::Write => ToolSpec::new(
            "skill_write",
            "Creates or updates a skill. Omitted fields keep their values; a given body replaces the existing \
             one whole. A new skill needs a description; its name is 1 to 64 lowercase letters, digits and \
             hyphens.",
            json!({"type": "object", "additionalProperties": false, "properties": {
                "name": name,
                "description": {"type": "string", "description": "What the skill does and when to use it (at most 1024 characters)."},
                "priority": {"type": "integer", "minimum": PRIORITY_RANGE.start(), "maximum": PRIORITY_RANGE.end(), "description": "Higher is listed first in the index (default 0)."},
                "body": {"type": "string", "description": "The whole body of SKILL.md (Markdown), after the front matter."}},
                "required": ["name"]}),
        )
        .with_level(Level::Workspace)
        .with_allow_blank(["body"]),
        Kind::Edit => ToolSpec::new(
            "skill_edit",
            "Replaces one exact string in the body and leaves the frontmatter alone. An old_string that matches \
             more than once is refused unless replace_all is true, and an edit computed against a body that has \
             since changed is refused rather than written over it (read the skill with skill_read first).",
            json!({"type": "object", "additionalProperties": false, "properties": {
                "name": name,
                "old_string": {"type": "string", "description": "The exact text to replace"},
                "new_string": {"type": "string", "description": "The replacement; empty deletes"},
                "replace_all": {"type": "boolean"}},
                "required": ["name", "old_string", "new_string"]}),
        )
        .with_level(Level::Workspace)
        .with_allow_blank(["new_string"]),
        Kind::Delete => ToolSpec::new(
            "skill_delete",
            "Removes a skill's whole directory, bundled files included.",
            json!({"type": "object", "additionalProperties": false, "properties": {"name": name}, "required": ["name"]}),
        )
        .with_level(Level::Workspace),
    }
}

fn text(args: &Value, key: &str) -> Option<String> {
    args.get(key).and_then(Value::as_str).map(str::to_string)
}

#[async_trait]
impl Tool for SkillTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _: Value) -> Result<Value, ToolError> {
        Err(ToolError::Failed(format!("{} runs inside an agent", self.spec.name)))
    }

    async fn call_in(&self, args: Value, ctx: &ToolContext) -> Result<Value, ToolError> {
        let (kind, access, scope, writes) = (self.kind, self.access.clone(), ctx.scope.clone(), ctx.write_reach());
        let work = move || run(kind, &access, &scope, writes, &args).map(Value::String).map_err(ToolError::Failed);
        tokio::task::spawn_blocking(work)
            .await
            .map_err(|e| ToolError::Failed(format!("the skill tool's work failed: {e}")))?
    }
}

fn run(kind: Kind, access: &SkillsAccess, scope: &Scope, writes: WriteReach, args: &Value) -> Result<String, String> {
    let dirs = &access.config.dirs;
    let name = text(args, "name").unwrap_or_default();
    let missing =
        || format!("there is no skill named '{}'; skill_search finds skills by their text", name.escape_debug());
    match kind {
        Kind::Read => {
            let skill = super::find(scope, dirs, &name)?.ok_or_else(missing)?;
            access.saw(&skill.dir, &skill.file.body);
            Ok(format!("Base directory for this skill: {}\n\n{}", skill.dir.display(), skill.file.body))
        }
        Kind::Search => search(scope, dirs, args),
        Kind::Write => write(access, scope, writes, &name, args),
        Kind::Edit => {
            let skill = super::find(scope, dirs, &name)?.ok_or_else(missing)?;
            edit(access, scope, writes, skill, args)
        }
        Kind::Delete => {
            let skill = super::find(scope, dirs, &name)?.ok_or_else(missing)?;
            let folder = folder_path(&skill.home, &skill.name);
            scope.remove_tree(&folder, writes).map_err(|e| e.to_string())?;
            access.forget(&skill.dir);
            Ok(format!("Deleted skill '{}' ({}).", skill.name, skill.dir.display()))
        }
    }
}

/// `<home>/<name>`, as a path the scope reads (relative to the working directory, or absolute).
fn folder_path(home: &str, name: &str) -> String {
    Path::new(home).join(name).to_string_lossy().into_owned()
}

fn search(scope: &Scope, dirs: &[String], args: &Value) -> Result<String, String> {
    let case_insensitive = args.get("case_insensitive") == Some(&Value::Bool(true));
    let regex = crate::tools::builtin::search_regex(&text(args, "pattern").unwrap_or_default(), case_insensitive)?;
    // A limit that is not a count from 1 to the cap is refused, never read as the default (SPEC §2).
    let cap = match args.get("limit") {
        None | Some(Value::Null) => SEARCH_CAP,
        Some(v) => v
            .as_u64()
            .filter(|n| (1..=SEARCH_CAP as u64).contains(n))
            .map(|n| n as usize)
            .ok_or_else(|| format!("argument 'limit' must be a count from 1 to {SEARCH_CAP}, got {v}"))?,
    };
    let (skills, problems) = super::load_all(scope, dirs, super::ReadBounds::WHOLE);
    let mut hits = Vec::new();
    let mut more = 0usize;
    for skill in &skills {
        let text = skill.file.render();
        for (i, line) in text.lines().enumerate() {
            if regex.is_match(line) {
                if hits.len() < cap {
                    let shown = super::clip_chars(line, SEARCH_LINE_CHARS);
                    hits.push(format!("{}:{}: {shown}", skill.name, i + 1));
                } else {
                    more += 1;
                }
            }
        }
    }
    let mut out = if hits.is_empty() { "no matches".to_string() } else { hits.join("\n") };
    if more > 0 {
        out.push_str(&format!("\n[… {more} more matches not shown; the cap is {cap}]"));
    }
    for p in super::problem_lines(&problems) {
        out.push('\n');
        out.push_str(&p);
    }
    Ok(out)
}

fn check_description(d: &str) -> Result<(), String> {
    if d.trim().is_empty() {
        return Err("argument 'description' is empty".into());
    }
    if d.chars().count() > MAX_DESCRIPTION_CHARS {
        return Err(format!("argument 'description' is longer than {MAX_DESCRIPTION_CHARS} characters"));
    }
    Ok(())
}

fn check_size(text: &str) -> Result<(), String> {
    if text.len() as u64 > MAX_SKILL_BYTES {
        return Err(format!(
            "the skill would be {} bytes, more than {}, the largest SKILL.md written",
            text.len(),
            bytes_in_words(MAX_SKILL_BYTES)
        ));
    }
    Ok(())
}

fn write(access: &SkillsAccess, scope: &Scope, writes: WriteReach, name: &str, args: &Value) -> Result<String, String> {
    let dirs = &access.config.dirs;
    let description = text(args, "description");
    if let Some(d) = &description {
        check_description(d)?;
    }
    let priority = match args.get("priority") {
        None => None,
        Some(p) => Some(p.as_i64().filter(|p| PRIORITY_RANGE.contains(p)).ok_or_else(|| {
            format!(
                "argument 'priority' must be an integer from {} to {}",
                PRIORITY_RANGE.start(),
                PRIORITY_RANGE.end()
            )
        })?),
    };
    let body = text(args, "body");
    let (mut file, folder, created) = match super::find(scope, dirs, name)? {
        Some(skill) => (skill.file, folder_path(&skill.home, &skill.name), false),
        None => {
            super::check_new_name(name)?;
            if description.is_none() {
                return Err("argument 'description' is required for a new skill".into());
            }
            let home = dirs.first().ok_or("no skills directory is configured")?;
            make_dirs(scope, home, writes, 0)?;
            let folder = folder_path(home, name);
            scope.create_dir(&folder, writes).map_err(|e| e.to_string())?;
            let mut file = SkillFile::parse("");
            file.set("name", name);
            (file, folder, true)
        }
    };
    if let Some(d) = &description {
        file.set("description", d);
    }
    if let Some(p) = priority {
        file.set_raw("priority", &p.to_string());
    }
    if let Some(b) = body {
        file.body = b;
    }
    let rendered = file.render();
    check_size(&rendered)?;
    let path = format!("{folder}/SKILL.md");
    let written = scope.write_atomic(&path, writes, rendered.as_bytes(), true).map_err(|e| e.to_string())?;
    let dir = written.parent().map(Path::to_path_buf).unwrap_or_default();
    access.saw(&dir, &file.body);
    let verb = if created { "Created" } else { "Updated" };
    Ok(format!("{verb} skill '{name}' ({}).", dir.display()))
}

/// Makes the directory `path` and the missing directories above it (at most 16 levels), each through
/// the scope.
fn make_dirs(scope: &Scope, path: &str, writes: WriteReach, depth: usize) -> Result<(), String> {
    match scope.create_dir(path, writes) {
        Ok(_) => Ok(()),
        Err(crate::permission::ScopeError::Io(m)) if m.starts_with("no such file or directory") && depth < 16 => {
            let parent = Path::new(path).parent().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
            if parent.is_empty() {
                return Err(m);
            }
            make_dirs(scope, &parent, writes, depth + 1)?;
            scope.create_dir(path, writes).map(|_| ()).map_err(|e| e.to_string())
        }
        Err(e) => Err(e.to_string()),
    }
}

fn edit(
    access: &SkillsAccess,
    scope: &Scope,
    writes: WriteReach,
    skill: Loaded,
    args: &Value,
) -> Result<String, String> {
    let name = &skill.name;
    match access.last_seen(&skill.dir) {
        None => {
            return Err(format!(
                "skill '{name}' has not been read in this session: an edit is computed against the body you read, \
                 so read it with skill_read first"
            ));
        }
        Some(seen) if seen != super::digest(&skill.file.body) => {
            return Err(format!(
                "skill '{name}' changed since you read it; the edit was not made. Read it again with skill_read and \
                 redo the edit against its current body"
            ));
        }
        Some(_) => {}
    }
    let old = text(args, "old_string").unwrap_or_default();
    let new = text(args, "new_string").unwrap_or_default();
    let all = args.get("replace_all") == Some(&Value::Bool(true));
    if old.is_empty() {
        return Err("argument 'old_string' is required".into());
    }
    let n = skill.file.body.matches(&old).count();
    if n == 0 {
        return Err(format!("old_string was not found in the body of skill '{name}'"));
    }
    if n > 1 && !all {
        return Err(format!(
            "old_string occurs {n} times in the body of skill '{name}'; give more context or pass replace_all"
        ));
    }
    let mut file = skill.file;
    file.body = if all { file.body.replace(&old, &new) } else { file.body.replacen(&old, &new, 1) };
    let rendered = file.render();
    check_size(&rendered)?;
    let path = format!("{}/SKILL.md", folder_path(&skill.home, name));
    scope.write_atomic(&path, writes, rendered.as_bytes(), true).map_err(|e| e.to_string())?;
    access.saw(&skill.dir, &file.body);
    let count = if all { n } else { 1 };
    Ok(format!("Replaced {count} occurrence{} in skill '{name}'.", if count == 1 { "" } else { "s" }))
}
