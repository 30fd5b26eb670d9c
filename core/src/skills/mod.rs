//! Skills (SPEC §14): knowledge packages in the Agent Skills format, the one Claude Code and other
//! tools read: a folder per skill holding `SKILL.md`, whose YAML front matter gives `name`,
//! `description` and optionally `priority`, and whose Markdown body is the skill's instructions; other
//! files of the folder ride along (scripts, references) and are the agent's to open with the file tools.
//!
//! An agent is given one or more skills directories ([`SkillsConfig`]). Every request carries a
//! bounded index of the installed skills ([`render_index`]: priority first, then name, one line each;
//! when it is cut it says so, and `skill_search` reaches the rest). The tools ([`tools`]): `skill_read`
//! and `skill_search` always; `skill_write`, `skill_edit` and `skill_delete` only when the directories
//! are `agent_managed`, and never for a sub-agent.
//!
//! Every file is reached through the session's scope by the same open-and-verify path the file tools
//! use ([`crate::permission::Scope`]): a skills directory outside the session's reach is refused, a
//! link is never followed, and a write lands as a whole new `SKILL.md` renamed into place, never half
//! written. A skill folder is named by its directory: `skill_read({"name": "pdf-tools"})` reads
//! `<skills dir>/pdf-tools/SKILL.md`; where two directories hold the same name, the first listed wins.
//!
//! ```no_run
//! use ambit::skills::SkillsConfig;
//! # fn demo() -> Result<(), ambit::Error> {
//! let skills = SkillsConfig::new(["/home/me/.claude/skills"]).agent_managed(true);
//! # let model = ambit::OpenAiChat::new("gpt-4.1");
//! let agent = ambit::Agent::builder().model(model).skills(skills).build()?;
//! # Ok(()) }
//! ```

pub(crate) mod frontmatter;
pub mod tools;

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::permission::open::Kind;
use crate::permission::scope::Found;
use crate::permission::{Access, Scope, ScopeError, WriteReach};
use frontmatter::SkillFile;

/// The largest `SKILL.md` read or written (256 KiB).
pub const MAX_SKILL_BYTES: u64 = 256 << 10;
/// The most entries of one skills directory looked at.
pub const MAX_SKILLS_PER_DIR: usize = 10_000;
/// The longest skill name written: the Agent Skills format's 64 characters.
pub const MAX_NAME_CHARS: usize = 64;
/// The longest description written: the Agent Skills format's 1,024 characters.
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// The lowest and highest priority.
pub const PRIORITY_RANGE: std::ops::RangeInclusive<i64> = -1000..=1000;
/// The most skills the per-turn index lists by default.
pub const DEFAULT_INDEX_ENTRIES: usize = 100;
/// The most skills an index may be set to list.
pub const MAX_INDEX_ENTRIES: usize = 1000;
/// The most bytes of the per-turn index (8 KiB), like the deferred-tool catalog.
pub const INDEX_MAX_BYTES: usize = 8 << 10;
/// The most characters of a description the index shows.
pub const INDEX_DESCRIPTION_CHARS: usize = 200;
/// The heading of the per-turn index.
pub const INDEX_HEADING: &str = "# Skills";

/// An agent's skills directories, as plain data (`AgentOptions::skills`, the bindings' form).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillsConfig {
    /// The directories that hold skill folders, absolute or relative to the working directory; a new
    /// skill is written to the first.
    pub dirs: Vec<String>,
    /// Whether the agent gets `skill_write`, `skill_edit` and `skill_delete` (default off).
    #[serde(default)]
    pub agent_managed: bool,
    /// The most skills the per-turn index lists (default 100, at most 1,000; 0: no index).
    #[serde(default)]
    pub index_entries: Option<usize>,
}

impl SkillsConfig {
    /// Skills from these directories, read-only for the agent.
    pub fn new(dirs: impl IntoIterator<Item = impl Into<String>>) -> SkillsConfig {
        SkillsConfig { dirs: dirs.into_iter().map(Into::into).collect(), agent_managed: false, index_entries: None }
    }

    /// Lets the agent write, edit and delete skills (never a sub-agent).
    pub fn agent_managed(mut self, on: bool) -> SkillsConfig {
        self.agent_managed = on;
        self
    }

    /// Checks the settings: at least one directory, each a valid path, the index within its bound.
    pub fn validate(&self) -> Result<(), String> {
        if self.dirs.is_empty() {
            return Err("skills: 'dirs' must name at least one skills directory".into());
        }
        for (i, d) in self.dirs.iter().enumerate() {
            crate::permission::scope::validate(d).map_err(|e| format!("skills: dirs[{i}]: {e}"))?;
        }
        if let Some(n) = self.index_entries.filter(|n| *n > MAX_INDEX_ENTRIES) {
            return Err(format!("skills: index_entries {n} is above the limit of {MAX_INDEX_ENTRIES}"));
        }
        Ok(())
    }

    fn entries(&self) -> usize {
        self.index_entries.unwrap_or(DEFAULT_INDEX_ENTRIES)
    }
}

/// One installed skill as the index shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillEntry {
    /// The skill folder's name, which `skill_read` takes.
    pub name: String,
    /// The description from the front matter, on one line.
    pub description: String,
    /// Its priority in the index (higher first; from the front matter, default 0).
    pub priority: i64,
}

/// The per-turn index of `skills`: priority first (highest first), then name; at most `entries` skills
/// and [`INDEX_MAX_BYTES`] bytes, each description on one line and at most
/// [`INDEX_DESCRIPTION_CHARS`] characters. When skills are left out, the index says how many and that
/// `skill_search` reaches them. `problems` (directories or skills that could not be read) are named
/// after the list. `None` when there is nothing to show. The same skills give the same bytes.
pub fn render_index(skills: &[SkillEntry], entries: usize, problems: &[String]) -> Option<String> {
    if (skills.is_empty() && problems.is_empty()) || entries == 0 {
        return None;
    }
    let mut order: Vec<&SkillEntry> = skills.iter().collect();
    order.sort_by(|a, b| b.priority.cmp(&a.priority).then_with(|| a.name.cmp(&b.name)));
    let mut out = String::with_capacity(INDEX_MAX_BYTES);
    out.push_str(INDEX_HEADING);
    out.push_str(
        "\nYour installed skills, highest priority first. skill_read gives a skill's instructions; \
         skill_search searches every line of every skill.",
    );
    // Room kept for the closing note and the problem lines as shown, so the whole block stays within the
    // bound (a problem is cut by characters, so its room is counted on the cut text's bytes).
    let shown_problems = problem_lines(problems);
    let reserve = 160 + shown_problems.iter().map(|p| p.len() + 1).sum::<usize>();
    let mut shown = 0usize;
    for s in order.iter().take(entries) {
        let line = index_line(s);
        if out.len() + line.len() + reserve > INDEX_MAX_BYTES {
            break;
        }
        out.push_str(&line);
        shown += 1;
    }
    if shown < order.len() {
        let left = order.len() - shown;
        out.push_str(&format!(
            "\n[… {left} more skill{} not listed here; skill_search finds them]",
            if left == 1 { "" } else { "s" }
        ));
    }
    for p in &shown_problems {
        out.push('\n');
        out.push_str(p);
    }
    Some(out)
}

/// The most problems (directories or skills that could not be read) an answer names one by one.
const PROBLEMS_SHOWN: usize = 3;

/// The lines that name `problems`: the first [`PROBLEMS_SHOWN`], each cut to 300 characters, then how
/// many more there are. The index and skill_search show the same.
pub(crate) fn problem_lines(problems: &[String]) -> Vec<String> {
    let mut lines: Vec<String> = problems.iter().take(PROBLEMS_SHOWN).map(|p| clip_chars(p, 300)).collect();
    if problems.len() > PROBLEMS_SHOWN {
        lines.push(format!("[… {} more skills could not be read]", problems.len() - PROBLEMS_SHOWN));
    }
    lines
}

/// `text` cut to at most `limit` characters, an ellipsis marking the cut.
fn clip_chars(text: &str, limit: usize) -> String {
    match text.char_indices().nth(limit) {
        None => text.to_string(),
        Some((i, _)) => format!("{}…", text.get(..i).unwrap_or(text)),
    }
}

fn index_line(s: &SkillEntry) -> String {
    let description: String = s.description.split_whitespace().collect::<Vec<_>>().join(" ");
    let description = clip_chars(&description, INDEX_DESCRIPTION_CHARS);
    if description.is_empty() { format!("\n- {}", s.name) } else { format!("\n- {}: {description}", s.name) }
}

/// One skill as read from its folder.
#[derive(Debug, Clone)]
pub(crate) struct Loaded {
    pub(crate) name: String,
    /// The folder, as resolved.
    pub(crate) dir: PathBuf,
    /// The skills directory it is in, as configured.
    pub(crate) home: String,
    pub(crate) file: SkillFile,
}

impl Loaded {
    pub(crate) fn entry(&self) -> SkillEntry {
        SkillEntry {
            name: self.name.clone(),
            description: self.file.get("description").unwrap_or_default(),
            priority: self.priority(),
        }
    }

    fn priority(&self) -> i64 {
        self.file.get("priority").and_then(|p| p.trim().parse().ok()).unwrap_or(0)
    }
}

/// The skills directory `dir`, located through the scope; `Ok(None)` when it does not exist.
fn open_home<'a>(scope: &'a Scope, dir: &str) -> Result<Option<Found<'a>>, String> {
    match scope.locate(dir, Access::Read, WriteReach::Nowhere) {
        Ok(found) if found.kind() == Kind::Directory => Ok(Some(found)),
        Ok(_) => Err(format!("skills directory '{dir}' is not a directory")),
        Err(ScopeError::Io(m)) if m.starts_with("no such file or directory") => Ok(None),
        Err(e) => Err(format!("skills directory: {e}")),
    }
}

/// The most bytes of each `SKILL.md` the per-turn index reads: its front matter is at the top.
pub const INDEX_READ_BYTES: u64 = 8 << 10;
/// The most bytes one `skill_search` reads in all (64 MiB); past it the search stops and says so.
pub const SEARCH_TOTAL_MAX_BYTES: u64 = 64 << 20;

/// How much of the skills a scan reads.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ReadBounds {
    /// Of each `SKILL.md`: past it, the index reads only the head, a whole read refuses the file.
    pub(crate) each: u64,
    /// Whether a file longer than `each` is cut (the index) or refused (a whole read).
    pub(crate) head_only: bool,
    /// Of all files together.
    pub(crate) total: u64,
}

impl ReadBounds {
    /// Whole files, for skill_search.
    pub(crate) const WHOLE: ReadBounds =
        ReadBounds { each: MAX_SKILL_BYTES, head_only: false, total: SEARCH_TOTAL_MAX_BYTES };
    /// The heads, for the per-turn index.
    pub(crate) const HEADS: ReadBounds = ReadBounds { each: INDEX_READ_BYTES, head_only: true, total: u64::MAX };
}

/// Reads `<home>/<name>/SKILL.md` beneath the located skills directory: `Ok(None)` when the folder or
/// its `SKILL.md` is missing, or is a link (never followed).
fn read_in(home: &Found<'_>, name: &str) -> Result<Option<(PathBuf, SkillFile)>, String> {
    read_bounded(home, name, ReadBounds::WHOLE).map(|r| r.map(|(p, f, _)| (p, f)))
}

/// [`read_in`] within `bounds`; also the bytes read.
fn read_bounded(home: &Found<'_>, name: &str, bounds: ReadBounds) -> Result<Option<(PathBuf, SkillFile, u64)>, String> {
    let rel = home.rel.join(name).join("SKILL.md");
    let located = match home.beneath.locate(&rel) {
        Ok(l) if l.kind == Kind::Regular => l,
        _ => return Ok(None),
    };
    let file =
        home.beneath.read(&rel, &located).map_err(|_| format!("skill '{name}': SKILL.md could not be opened"))?;
    let mut bytes = Vec::new();
    file.take(bounds.each + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("skill '{name}': SKILL.md could not be read: {e}"))?;
    let read = bytes.len() as u64;
    let text = if read > bounds.each {
        if !bounds.head_only {
            return Err(format!(
                "skill '{name}': SKILL.md is larger than {}, the largest skill read",
                crate::tools::builtin::bytes_in_words(MAX_SKILL_BYTES)
            ));
        }
        bytes.truncate(bounds.each as usize);
        crate::tools::builtin::utf8_cut(&bytes).map(str::to_string)
    } else {
        String::from_utf8(bytes).ok()
    };
    let text = text.ok_or_else(|| format!("skill '{name}': SKILL.md is not UTF-8 text"))?;
    Ok(Some((home.resolved.join(name), SkillFile::parse(&text), read)))
}

/// Every skill in `dirs` (the first directory holding a name wins), in name order per directory, and
/// what could not be read.
pub(crate) fn load_all(scope: &Scope, dirs: &[String], bounds: ReadBounds) -> (Vec<Loaded>, Vec<String>) {
    let mut out: Vec<Loaded> = Vec::new();
    let mut problems = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut total = 0u64;
    'dirs: for dir in dirs {
        let home = match open_home(scope, dir) {
            Ok(Some(h)) => h,
            Ok(None) => continue,
            Err(e) => {
                problems.push(e);
                continue;
            }
        };
        let Ok((mut names, more)) = home.beneath.list(&home.located, MAX_SKILLS_PER_DIR) else {
            problems.push(format!("skills directory '{dir}' could not be listed"));
            continue;
        };
        if more {
            problems.push(format!(
                "skills directory '{dir}' holds more than {MAX_SKILLS_PER_DIR} entries; the rest are not read"
            ));
        }
        names.sort();
        for name in names {
            // A folder whose name could not be looked up (hidden, or holding a control character that
            // would break the index's one line per skill) is not a skill.
            let Some(name) = name.to_str().filter(|n| check_lookup_name(n).is_ok()) else { continue };
            if seen.contains(name) {
                continue;
            }
            if total >= bounds.total {
                problems.push(format!(
                    "[the skills were read up to {} in all; the rest were not searched]",
                    crate::tools::builtin::bytes_in_words(bounds.total)
                ));
                break 'dirs;
            }
            match read_bounded(&home, name, bounds) {
                Ok(Some((path, file, read))) => {
                    total += read;
                    seen.insert(name.to_string());
                    out.push(Loaded { name: name.to_string(), dir: path, home: dir.clone(), file });
                }
                Ok(None) => {}
                Err(e) => problems.push(e),
            }
        }
    }
    (out, problems)
}

/// The skill named `name` in the first of `dirs` that holds it, or why none could be read.
pub(crate) fn find(scope: &Scope, dirs: &[String], name: &str) -> Result<Option<Loaded>, String> {
    check_lookup_name(name)?;
    let mut refused = None;
    for dir in dirs {
        match open_home(scope, dir) {
            Ok(Some(home)) => {
                if let Some((path, file)) = read_in(&home, name)? {
                    return Ok(Some(Loaded { name: name.to_string(), dir: path, home: dir.clone(), file }));
                }
            }
            Ok(None) => {}
            Err(e) => refused = refused.or(Some(e)),
        }
    }
    match refused {
        Some(e) => Err(e),
        None => Ok(None),
    }
}

/// A name to look up: one folder name, nothing that could walk elsewhere.
fn check_lookup_name(name: &str) -> Result<(), String> {
    if name.is_empty()
        || name == "."
        || name == ".."
        || name.contains('/')
        || name.chars().any(char::is_control)
        || name.starts_with('.')
    {
        return Err(format!("argument 'name': '{}' is not a skill name", name.escape_debug()));
    }
    if name.chars().count() > 255 {
        return Err("argument 'name': a skill name is at most 255 characters".into());
    }
    Ok(())
}

/// A name for a new skill, by the Agent Skills format: 1 to 64 characters, lowercase letters, digits
/// and single hyphens, neither first nor last.
pub(crate) fn check_new_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.chars().count() <= MAX_NAME_CHARS
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--");
    if ok {
        Ok(())
    } else {
        Err(format!(
            "argument 'name': '{}' is not a skill name: 1 to {MAX_NAME_CHARS} lowercase letters, digits and \
             single hyphens, not first or last",
            name.escape_debug()
        ))
    }
}

/// An agent's skills: the settings, and the body each skill had when the agent last read or wrote it
/// (an edit computed against an older body is refused).
#[derive(Debug)]
pub(crate) struct SkillsAccess {
    pub(crate) config: SkillsConfig,
    /// Skill folder (as resolved) to the SHA-256 of the body the agent last saw.
    seen: Mutex<HashMap<PathBuf, [u8; 32]>>,
}

impl SkillsAccess {
    pub(crate) fn new(config: SkillsConfig) -> SkillsAccess {
        SkillsAccess { config, seen: Mutex::new(HashMap::new()) }
    }

    fn seen(&self) -> std::sync::MutexGuard<'_, HashMap<PathBuf, [u8; 32]>> {
        self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn saw(&self, dir: &Path, body: &str) {
        self.seen().insert(dir.to_path_buf(), digest(body));
    }

    pub(crate) fn last_seen(&self, dir: &Path) -> Option<[u8; 32]> {
        self.seen().get(dir).copied()
    }

    pub(crate) fn forget(&self, dir: &Path) {
        self.seen().remove(dir);
    }
}

pub(crate) fn digest(body: &str) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(body.as_bytes()).into()
}

/// The per-turn index for an agent's skills, read through the session's scope on the blocking pool.
pub(crate) async fn index_block(access: &SkillsAccess, scope: Arc<Scope>) -> Option<String> {
    let dirs = access.config.dirs.clone();
    let entries = access.config.entries();
    if entries == 0 {
        return None;
    }
    let loaded = tokio::task::spawn_blocking(move || load_all(&scope, &dirs, ReadBounds::HEADS)).await;
    let (skills, problems) = match loaded {
        Ok(l) => l,
        Err(e) => (Vec::new(), vec![format!("the skills could not be read: {e}")]),
    };
    let skills: Vec<SkillEntry> = skills.iter().map(Loaded::entry).collect();
    render_index(&skills, entries, &problems)
}

/// A sub-agent's registry: the parent's skill tools replaced by fresh reading ones over the same
/// directories (its own record of what it has read), and never the three that write.
pub(crate) fn narrowed(
    tools: crate::tools::ToolRegistry,
    parent: Option<&Arc<SkillsAccess>>,
) -> Result<(crate::tools::ToolRegistry, Option<Arc<SkillsAccess>>), crate::Error> {
    let Some(parent) = parent else { return Ok((tools, None)) };
    let access = Arc::new(SkillsAccess::new(SkillsConfig { agent_managed: false, ..parent.config.clone() }));
    let mut out = crate::tools::ToolRegistry::new();
    let had: Vec<String> = tools.iter().map(|t| t.spec().name.clone()).collect();
    for t in tools.iter().filter(|t| !tools::NAMES.contains(&t.spec().name.as_str())) {
        out.register(t.clone())?;
    }
    // Only the reading tools the sub-agent's registry held (a spawn's tool list may have left them out).
    for t in tools::tools(&access).into_iter().filter(|t| had.contains(&t.spec().name)) {
        out.register(t)?;
    }
    Ok((out, Some(access)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, priority: i64) -> SkillEntry {
        SkillEntry { name: name.into(), description: format!("does {name}\nover  lines"), priority }
    }

    #[test]
    fn the_index_orders_by_priority_then_name_and_says_when_it_is_cut() {
        let skills = vec![entry("b", 0), entry("a", 0), entry("z", 5), entry("c", -1)];
        let full = render_index(&skills, 10, &[]).unwrap();
        assert_eq!(
            full.lines().skip(2).collect::<Vec<_>>(),
            ["- z: does z over lines", "- a: does a over lines", "- b: does b over lines", "- c: does c over lines"]
        );
        let cut = render_index(&skills, 2, &[]).unwrap();
        assert!(cut.ends_with("- a: does a over lines\n[… 2 more skills not listed here; skill_search finds them]"));
        let many: Vec<SkillEntry> = (0..1000).map(|i| entry(&format!("skill-{i:04}"), 0)).collect();
        let bounded = render_index(&many, 1000, &["one problem".into()]).unwrap();
        assert!(bounded.len() <= INDEX_MAX_BYTES, "{}", bounded.len());
        assert!(bounded.contains("more skills not listed here") && bounded.ends_with("one problem"));
        assert_eq!(render_index(&many, 1000, &[]), render_index(&many, 1000, &[]), "same skills, same bytes");
        assert_eq!(render_index(&[], 10, &[]), None);
    }

    #[test]
    fn new_names_follow_the_agent_skills_format() {
        for ok in ["pdf", "pdf-tools", "a1", &"a".repeat(64)] {
            check_new_name(ok).unwrap();
        }
        for bad in ["", "-a", "a-", "a--b", "A", "a_b", "a b", "../x", &"a".repeat(65)] {
            assert!(check_new_name(bad).is_err(), "{bad}");
        }
        for bad in ["", ".", "..", "a/b", ".hidden", "a\0b"] {
            assert!(check_lookup_name(bad).is_err(), "{bad:?}");
        }
    }
}
