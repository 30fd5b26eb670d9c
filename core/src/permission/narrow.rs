//! Narrowing for sub-agents (SPEC §7): what a spawn may hand a sub-agent, as plain functions over plain
//! data. A sub-agent's level, directories, network, tools, depth and context grants are equal to or
//! narrower than its parent's at that moment, never wider; a wider request is refused by name.
//!
//! Directories are the one place the file system matters; it is reached through [`Dirs`], so the rules
//! stay pure and the property tests run over a virtual tree.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Level, Network, Scope};

/// The default `max_depth`: levels of sub-agents below the root (1: sub-agents cannot spawn; 0: no
/// `agent_spawn` at all).
pub const DEFAULT_MAX_DEPTH: u32 = 3;
/// Real nesting never goes deeper than this, whatever `max_depth` says.
pub const ABSOLUTE_MAX_DEPTH: u32 = 8;

/// The names of the tools that act on sub-agents: all five go together.
pub const AGENT_TOOLS: [&str; 5] = ["agent_spawn", "agent_list", "agent_followup", "agent_steer", "agent_delete"];

/// Access to another's memory store: none, or read. Sub-agents never write memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryGrant {
    #[default]
    /// No access.
    None,
    /// Read-only recall of the parent's memories.
    Read,
}

/// Whether the sub-agent is handed its parent's instructions verbatim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstructionsGrant {
    #[default]
    /// The sub-agent gets no instructions of its parent's.
    None,
    /// The sub-agent runs with its parent's instructions, verbatim.
    Inherit,
}

/// The four tool lists as one agent holds them, composed with every ancestor's.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolLists {
    /// When set, only these tools (whole names).
    pub allow_tools: Option<BTreeSet<String>>,
    /// These tools are refused (whole names).
    pub deny_tools: BTreeSet<String>,
    /// When set, only the MCP servers named (built-ins are untouched).
    pub allow_servers: Option<BTreeSet<String>>,
    /// These MCP servers' tools are refused.
    pub deny_servers: BTreeSet<String>,
}

/// The `<server>` of an `mcp__<server>__<tool>` name.
pub fn server_of(tool: &str) -> Option<&str> {
    let rest = tool.strip_prefix("mcp__")?;
    rest.split_once("__").map(|(s, _)| s)
}

impl ToolLists {
    /// Whether a tool of this name passes every list: a deny wins over an allow.
    pub fn passes(&self, tool: &str) -> bool {
        if self.deny_tools.contains(tool) || self.allow_tools.as_ref().is_some_and(|a| !a.contains(tool)) {
            return false;
        }
        match server_of(tool) {
            Some(s) => !self.deny_servers.contains(s) && self.allow_servers.as_ref().is_none_or(|a| a.contains(s)),
            None => true,
        }
    }
}

/// What one agent holds: the root from its policy, a sub-agent from its spawn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Grant {
    /// The permission level.
    pub level: Level,
    /// The directories it reaches.
    pub scope: Scope,
    /// Its network access.
    pub network: Network,
    /// The tools it holds.
    pub tools: ToolLists,
    /// How many more levels of sub-agents may exist below this agent (0: it cannot spawn).
    pub depth_left: u32,
    /// How far below the root this agent is (the root: 0).
    pub depth: u32,
    /// Access to its parent's memory.
    pub memory: MemoryGrant,
    /// The instructions this agent runs with, which it may hand down verbatim.
    pub instructions: Option<String>,
}

impl Grant {
    /// Whether this agent holds the tool `name` (before levels: see [`super::decision`]).
    pub fn holds_tool(&self, name: &str) -> bool {
        if name == "agent_spawn" && self.depth_left == 0 {
            return false;
        }
        self.tools.passes(name)
    }

    /// Whether this agent may write under `path` (resolved).
    pub fn can_write(&self, path: &Path) -> bool {
        super::reach::may_write(self.level, &self.scope, path)
    }

    /// Whether this agent may read under `path` (resolved). At `none` it reads nothing; at
    /// `unrestricted` nothing is confined (its shell reads anywhere).
    pub fn can_read(&self, path: &Path) -> bool {
        super::reach::may_read(self.level, &self.scope, path)
    }
}

/// An `agent_spawn` call's terms, as the model sends them (all optional but the prompt, which the
/// rules do not need).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SpawnTerms {
    #[serde(default)]
    /// A level at most the parent's.
    pub permission: Option<Level>,
    #[serde(default)]
    /// The sub-agent's working directory, inside the parent's reach.
    pub working_directory: Option<String>,
    #[serde(default)]
    /// More directories it may write, inside the parent's workspace.
    pub additional_workspace_directories: Option<Vec<String>>,
    #[serde(default)]
    /// More directories it may read, inside the parent's reach.
    pub additional_readable_directories: Option<Vec<String>>,
    #[serde(default)]
    /// Network access at most the parent's.
    pub network: Option<Network>,
    #[serde(default)]
    /// Only these tools (of those the parent holds).
    pub allow_tools: Option<Vec<String>>,
    #[serde(default)]
    /// These tools refused.
    pub deny_tools: Option<Vec<String>>,
    #[serde(default)]
    /// Only these MCP servers' tools.
    pub allow_servers: Option<Vec<String>>,
    #[serde(default)]
    /// These MCP servers' tools refused.
    pub deny_servers: Option<Vec<String>>,
    #[serde(default)]
    /// How many levels of sub-agents may exist below it (less than the parent's).
    pub max_depth: Option<u32>,
    #[serde(default)]
    /// Read access to the parent's memory (only if the parent has it).
    pub memory: Option<MemoryGrant>,
    #[serde(default)]
    /// Whether it runs with the parent's instructions.
    pub instructions: Option<InstructionsGrant>,
    /// The configured profile it runs on (another model and its settings), kept on every follow-up. A
    /// profile changes the model only: the rules here never read it, so it never widens anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

/// The names a spawn's lists may mention: the tools of the registry and the configured MCP servers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KnownNames {
    /// The tools of the registry.
    pub tools: BTreeSet<String>,
    /// The configured MCP servers.
    pub servers: BTreeSet<String>,
}

/// The file system as the rules need it: where a path leads and whether it is a directory.
pub trait Dirs {
    /// `given` resolved against `base` (symlinks, `..`), absolute, whether or not it exists.
    fn resolve(&self, base: &Path, given: &Path) -> PathBuf;
    /// Whether the resolved path is an existing directory.
    fn is_dir(&self, resolved: &Path) -> bool;
}

/// The real file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealDirs;

impl Dirs for RealDirs {
    fn resolve(&self, base: &Path, given: &Path) -> PathBuf {
        super::scope::resolve(base, given)
    }
    fn is_dir(&self, resolved: &Path) -> bool {
        resolved.is_dir()
    }
}

/// A spawn the rules admitted.
#[derive(Debug, Clone, PartialEq)]
pub struct Admitted {
    /// What the sub-agent holds.
    pub grant: Grant,
    /// Names that match nothing, and names the parent does not hold; they restrict or grant nothing.
    pub warnings: Vec<String>,
    /// Whether the spawn named a scope of its own (a follow-up keeps it; otherwise it follows the
    /// parent's scope from the working directory it was spawned in).
    pub stated_scope: bool,
}

/// Why a spawn was refused: one line per failing part, each naming it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub Vec<String>);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the sub-agent was not started: ")?;
        f.write_str(&self.0.join("; "))
    }
}

/// Admits a spawn against its parent's reach at this moment.
pub fn admit(parent: &Grant, terms: &SpawnTerms, known: &KnownNames, dirs: &dyn Dirs) -> Result<Admitted, Refusal> {
    admit_with(parent, terms, known, dirs, None)
}

/// A sub-agent's recorded terms, replayed for a follow-up and re-admitted against the parent's reach
/// now: the level and network narrow to the parent's if it dropped; a directory the parent can no
/// longer grant refuses the follow-up; the tool lists compose with the parent's lists now.
/// `spawned_in` is the working directory a sub-agent spawned without a scope of its own was given.
pub fn readmit(
    parent: &Grant,
    terms: &SpawnTerms,
    held: &Grant,
    spawned_in: Option<&Path>,
    known: &KnownNames,
    dirs: &dyn Dirs,
) -> Result<Admitted, Refusal> {
    let mut replay = terms.clone();
    replay.permission = Some(held.level.min(parent.level));
    replay.network = Some(held.network.min(parent.network));
    // A setting narrowed only by inheritance is held at unrestricted without asking for it.
    if replay.permission == Some(Level::Unrestricted) && terms.network.is_none() {
        replay.network = None;
    }
    replay.memory = Some(held.memory.min(parent.memory));
    replay.max_depth = None;
    let mut admitted = admit_with(parent, &replay, known, dirs, spawned_in)?;
    admitted.grant.network = admitted.grant.network.min(held.network);
    admitted.grant.depth_left = admitted.grant.depth_left.min(held.depth_left);
    admitted.warnings.clear();
    Ok(admitted)
}

fn admit_with(
    parent: &Grant,
    terms: &SpawnTerms,
    known: &KnownNames,
    dirs: &dyn Dirs,
    spawned_in: Option<&Path>,
) -> Result<Admitted, Refusal> {
    let mut refusals = Vec::new();
    let mut warnings = Vec::new();

    // Depth.
    let depth_left = if parent.depth_left == 0 || parent.depth >= ABSOLUTE_MAX_DEPTH {
        refusals.push("this agent may not start sub-agents: its max_depth is used up".to_string());
        0
    } else {
        let below = parent.depth_left.min(ABSOLUTE_MAX_DEPTH - parent.depth);
        match terms.max_depth {
            Some(0) => {
                refusals.push("max_depth 0 would allow no sub-agent at all; leave it out to keep yours".into());
                0
            }
            Some(n) if n > below => {
                refusals.push(format!("max_depth {n} is deeper than the {below} level(s) you may still nest"));
                0
            }
            Some(n) => n - 1,
            None => below - 1,
        }
    };

    // Level.
    let level = match terms.permission {
        Some(l) if l > parent.level => {
            refusals.push(format!("permission '{l}' is above your own level '{}'", parent.level));
            parent.level
        }
        Some(l) => l,
        None => parent.level,
    };

    // Network.
    let network = match terms.network {
        Some(n) if n > parent.network => {
            refusals.push(format!("network '{n}' is wider than your own network setting '{}'", parent.network));
            parent.network
        }
        Some(n) if n < Network::Unrestricted && level == Level::Unrestricted => {
            refusals.push(format!(
                "network '{n}' beside permission 'unrestricted' cannot be held: nothing sandboxes an unrestricted shell"
            ));
            n
        }
        Some(n) => n,
        None => parent.network,
    };

    // Scope.
    let scope = admit_scope(parent, terms, level, dirs, spawned_in, &mut refusals);

    // Tools.
    let tools = admit_tools(parent, terms, known, &mut refusals, &mut warnings);

    // Context grants.
    let memory = match terms.memory.unwrap_or_default() {
        m if m > parent.memory => {
            refusals
                .push(format!("memory 'read' cannot be granted: you hold memory '{}'", name_of_memory(parent.memory)));
            MemoryGrant::None
        }
        m => m,
    };
    let instructions = match terms.instructions.unwrap_or_default() {
        InstructionsGrant::None => None,
        InstructionsGrant::Inherit => match &parent.instructions {
            Some(i) => Some(i.clone()),
            None => {
                refusals.push("instructions 'inherit' cannot be granted: you hold no instructions".into());
                None
            }
        },
    };

    if !refusals.is_empty() {
        return Err(Refusal(refusals));
    }
    let stated_scope = terms.working_directory.is_some();
    Ok(Admitted {
        grant: Grant {
            level,
            scope: scope.expect("a scope whenever nothing was refused"),
            network,
            tools,
            depth_left,
            depth: parent.depth + 1,
            memory,
            instructions,
        },
        warnings,
        stated_scope,
    })
}

fn name_of_memory(m: MemoryGrant) -> &'static str {
    match m {
        MemoryGrant::None => "none",
        MemoryGrant::Read => "read",
    }
}

/// The argument names of the two lists of directories, as `agent_spawn`'s schema spells them.
const WORKSPACE_DIRS: &str = "additional_workspace_directories";
const READABLE_DIRS: &str = "additional_readable_directories";

fn admit_scope(
    parent: &Grant,
    terms: &SpawnTerms,
    level: Level,
    dirs: &dyn Dirs,
    spawned_in: Option<&Path>,
    refusals: &mut Vec<String>,
) -> Option<Scope> {
    let ws = terms.additional_workspace_directories.clone().unwrap_or_default();
    let rd = terms.additional_readable_directories.clone().unwrap_or_default();
    let writes = level >= Level::Workspace;
    // The lists given, by their argument names (SPEC §2: a refusal names the argument).
    let lists = {
        let given: Vec<&str> = [(!ws.is_empty(), WORKSPACE_DIRS), (!rd.is_empty(), READABLE_DIRS)]
            .into_iter()
            .filter_map(|(given, name)| given.then_some(name))
            .collect();
        given.join(" and ")
    };
    let one = !(ws.is_empty() || rd.is_empty());
    let Some(wd_given) = &terms.working_directory else {
        if !ws.is_empty() || !rd.is_empty() {
            let (verb, pronoun) = if one { ("need", "them") } else { ("needs", "it") };
            refusals.push(format!("{lists} {verb} working_directory beside {pronoun}: name it (\".\" is yours)"));
            return None;
        }
        // Your whole scope; a follow-up keeps the working directory the sub-agent was spawned in.
        let mut scope = parent.scope.clone();
        if let Some(wd) = spawned_in {
            let ok = if writes { parent.can_write(wd) } else { parent.can_read(wd) };
            if !ok {
                refusals.push(format!("working directory '{}' is outside your reach", wd.display()));
                return None;
            }
            scope.working_dir = wd.to_path_buf();
        }
        return Some(scope);
    };
    if level == Level::Unrestricted && (!ws.is_empty() || !rd.is_empty()) {
        let verb = if one { "are" } else { "is" };
        refusals.push(format!("{lists} beside permission 'unrestricted' {verb} refused: nothing is confined there"));
        return None;
    }
    let base = &parent.scope.working_dir;
    let mut failed = false;
    let mut judge = |given: &str, what: &str, need_write: bool| -> Option<PathBuf> {
        if let Err(e) = super::scope::validate(given) {
            refusals.push(format!("{what} {e}"));
            failed = true;
            return None;
        }
        let resolved = dirs.resolve(base, Path::new(given));
        let reach = if need_write { parent.can_write(&resolved) } else { parent.can_read(&resolved) };
        if !reach {
            // The same words whether or not it exists.
            refusals.push(format!("{what} '{given}' is outside your reach"));
            failed = true;
            return None;
        }
        if !dirs.is_dir(&resolved) {
            refusals.push(format!("{what} '{given}' does not exist or is not a directory"));
            failed = true;
            return None;
        }
        Some(resolved)
    };
    let wd = judge(wd_given, "working_directory", writes);
    let ws: Vec<PathBuf> = ws.iter().filter_map(|d| judge(d, WORKSPACE_DIRS, writes)).collect();
    let rd: Vec<PathBuf> = rd.iter().filter_map(|d| judge(d, READABLE_DIRS, false)).collect();
    if failed {
        return None;
    }
    let wd = wd?;
    // What adds nothing is merged: repeats, entries inside the working directory or the workspace.
    let mut workspace: Vec<PathBuf> = Vec::new();
    for d in ws {
        if d.starts_with(&wd) || workspace.iter().any(|w| d.starts_with(w)) {
            continue;
        }
        workspace.retain(|w| !w.starts_with(&d));
        workspace.push(d);
    }
    let mut readable: Vec<PathBuf> = Vec::new();
    for d in rd {
        if d.starts_with(&wd) || workspace.iter().any(|w| d.starts_with(w)) || readable.iter().any(|r| d.starts_with(r))
        {
            continue;
        }
        readable.retain(|r| !r.starts_with(&d));
        readable.push(d);
    }
    // A stated scope confines reads, except at unrestricted, where nothing is confined.
    let confine_reads = if level == Level::Unrestricted { parent.scope.confine_reads } else { true };
    Some(Scope { working_dir: wd, workspace_dirs: workspace, readable_dirs: readable, confine_reads })
}

fn admit_tools(
    parent: &Grant,
    terms: &SpawnTerms,
    known: &KnownNames,
    refusals: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> ToolLists {
    let mut lists = parent.tools.clone();
    let known_tool = |n: &str| {
        known.tools.contains(n) || AGENT_TOOLS.contains(&n) || server_of(n).is_some_and(|s| known.servers.contains(s))
    };
    let mut check_names = |list: &[String], what: &str, servers: bool| {
        for n in list {
            let known = if servers { known.servers.contains(n) } else { known_tool(n) };
            if !known {
                let kind = if servers { "configured server" } else { "tool or configured server" };
                warnings.push(format!("{what} names '{n}', which matches no {kind}; it restricts nothing"));
            }
        }
    };
    if let Some(allow) = &terms.allow_tools {
        check_names(allow, "allow_tools", false);
    }
    if let Some(deny) = &terms.deny_tools {
        check_names(deny, "deny_tools", false);
    }
    if let Some(allow) = &terms.allow_servers {
        check_names(allow, "allow_servers", true);
    }
    if let Some(deny) = &terms.deny_servers {
        check_names(deny, "deny_servers", true);
    }
    if let Some(deny) = &terms.deny_tools {
        lists.deny_tools.extend(deny.iter().cloned());
    }
    if let Some(deny) = &terms.deny_servers {
        lists.deny_servers.extend(deny.iter().cloned());
    }
    if let Some(allow) = &terms.allow_tools {
        if allow.is_empty() {
            refusals.push("allow_tools is empty, which would allow nothing; leave it out to withhold nothing".into());
        } else {
            for n in allow {
                if known_tool(n) && !parent.holds_tool(n) {
                    warnings.push(format!(
                        "allow_tools names '{n}', which you do not hold; the sub-agent will not have it"
                    ));
                }
            }
            let asked: BTreeSet<String> = allow.iter().cloned().collect();
            let next = match &lists.allow_tools {
                Some(mine) => mine.intersection(&asked).cloned().collect(),
                None => asked,
            };
            if !next.iter().any(|n| parent.holds_tool(n) && !lists.deny_tools.contains(n)) {
                refusals.push("allow_tools leaves the sub-agent no tool you hold".into());
            }
            lists.allow_tools = Some(next);
        }
    }
    if let Some(allow) = &terms.allow_servers {
        if allow.is_empty() {
            refusals
                .push("allow_servers is empty, which would allow no server; leave it out to withhold nothing".into());
        } else {
            let asked: BTreeSet<String> = allow.iter().cloned().collect();
            lists.allow_servers = Some(match &lists.allow_servers {
                Some(mine) => mine.intersection(&asked).cloned().collect(),
                None => asked,
            });
        }
    }
    lists
}

/// The lines a sub-agent's report opens with: its id and the scope it holds, in the environment
/// block's words.
pub fn header(id: &str, grant: &Grant) -> String {
    let mut out =
        format!("Agent: {id}\nPermission: {}\nWorking directory: {}\n", grant.level, grant.scope.working_dir.display());
    if !grant.scope.workspace_dirs.is_empty() {
        out.push_str("Additional workspace directories:\n");
        for d in &grant.scope.workspace_dirs {
            out.push_str(&format!("  {}\n", d.display()));
        }
    }
    if !grant.scope.confine_reads {
        out.push_str("Additional readable directories: anywhere\n");
    } else if grant.scope.readable_dirs.is_empty() {
        out.push_str("Additional readable directories: none\n");
    } else {
        out.push_str("Additional readable directories:\n");
        for d in &grant.scope.readable_dirs {
            out.push_str(&format!("  {}\n", d.display()));
        }
    }
    if grant.network < Network::Unrestricted {
        // At unrestricted nothing sandboxes the shell: only web_fetch is held to the setting.
        let tools = if grant.level == Level::Unrestricted { "web_fetch" } else { "shell and web_fetch" };
        out.push_str(&format!("Network: {} ({tools})\n", grant.network));
    }
    out
}

#[cfg(test)]
#[path = "narrow_tests.rs"]
mod tests;
