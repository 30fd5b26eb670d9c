//! The narrowing rules: one test per rule, then a property test over generated spawn trees (at least
//! 10,000 per run, seeded from the clock unless `AMBIT_NARROW_SEED` is set; a failure prints the seed).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use super::*;

/// A virtual file system: directories that exist, and symlinks.
struct FakeDirs {
    dirs: BTreeSet<PathBuf>,
    links: BTreeMap<PathBuf, PathBuf>,
}

impl FakeDirs {
    fn standard() -> FakeDirs {
        let dirs =
            ["/", "/w", "/w/a", "/w/a/b", "/w/c", "/r", "/r/x", "/o", "/o/p", "/usr", "/usr/lib", "/srv", "/srv/e"];
        let links = [("/w/ln", "/o/p"), ("/w/inner", "/w/a"), ("/r/up", "/")];
        FakeDirs {
            dirs: dirs.iter().map(PathBuf::from).collect(),
            links: links.iter().map(|(a, b)| (PathBuf::from(a), PathBuf::from(b))).collect(),
        }
    }
}

impl Dirs for FakeDirs {
    fn resolve(&self, base: &Path, given: &Path) -> PathBuf {
        let joined = if given.is_absolute() { given.to_path_buf() } else { base.join(given) };
        let mut out = PathBuf::from("/");
        let mut comps: Vec<String> = joined
            .components()
            .filter_map(|c| match c {
                Component::Normal(s) => Some(s.to_string_lossy().to_string()),
                Component::ParentDir => Some("..".into()),
                _ => None,
            })
            .collect();
        comps.reverse();
        let mut hops = 0;
        while let Some(c) = comps.pop() {
            if c == ".." {
                out.pop();
                continue;
            }
            let next = out.join(&c);
            if let Some(target) = self.links.get(&next) {
                hops += 1;
                assert!(hops < 40);
                out = PathBuf::from("/");
                let mut t: Vec<String> = target
                    .components()
                    .filter_map(|c| match c {
                        Component::Normal(s) => Some(s.to_string_lossy().to_string()),
                        _ => None,
                    })
                    .collect();
                t.reverse();
                comps.extend(t);
                continue;
            }
            out = next;
        }
        out
    }
    fn is_dir(&self, resolved: &Path) -> bool {
        self.dirs.contains(resolved)
    }
}

fn scope(wd: &str, ws: &[&str], rd: &[&str], confine: bool) -> Scope {
    Scope {
        working_dir: wd.into(),
        workspace_dirs: ws.iter().map(PathBuf::from).collect(),
        readable_dirs: rd.iter().map(PathBuf::from).collect(),
        confine_reads: confine,
    }
}

fn root(level: Level) -> Grant {
    Grant {
        level,
        scope: scope("/w", &[], &["/r"], true),
        network: Network::Unrestricted,
        tools: ToolLists::default(),
        depth_left: DEFAULT_MAX_DEPTH,
        depth: 0,
        memory: MemoryGrant::Read,
        instructions: Some("be brief".into()),
    }
}

fn known() -> KnownNames {
    KnownNames {
        tools: [
            "file_read",
            "file_write",
            "shell_execute",
            "web_fetch",
            "mcp__git__log",
            "mcp__git__push",
            "mcp__db__query",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        servers: ["git", "db"].iter().map(|s| s.to_string()).collect(),
    }
}

fn terms(json: serde_json::Value) -> SpawnTerms {
    serde_json::from_value(json).unwrap()
}

fn refused(parent: &Grant, t: serde_json::Value) -> String {
    admit(parent, &terms(t), &known(), &FakeDirs::standard()).unwrap_err().to_string()
}

fn admitted(parent: &Grant, t: serde_json::Value) -> Admitted {
    admit(parent, &terms(t), &known(), &FakeDirs::standard()).unwrap()
}

use serde_json::json;

#[test]
fn nothing_named_is_the_parents_whole_scope_and_level() {
    let p = root(Level::Workspace);
    let a = admitted(&p, json!({}));
    assert_eq!(a.grant.level, Level::Workspace);
    assert_eq!(a.grant.scope, p.scope);
    assert_eq!(a.grant.depth_left, DEFAULT_MAX_DEPTH - 1);
    assert_eq!(a.grant.memory, MemoryGrant::None, "memory is granted, not inherited");
    assert_eq!(a.grant.instructions, None, "instructions are granted, not inherited");
    assert!(!a.stated_scope);
}

#[test]
fn a_level_above_the_parents_is_refused_by_name() {
    let e = refused(&root(Level::Read), json!({"permission": "workspace"}));
    assert_eq!(e, "the sub-agent was not started: permission 'workspace' is above your own level 'read'");
    assert_eq!(admitted(&root(Level::Workspace), json!({"permission": "read"})).grant.level, Level::Read);
}

#[test]
fn a_wider_network_is_refused_and_a_narrowed_one_beside_unrestricted_too() {
    let mut p = root(Level::Workspace);
    p.network = Network::Remote;
    assert!(
        refused(&p, json!({"network": "unrestricted"}))
            .contains("network 'unrestricted' is wider than your own network setting 'remote'")
    );
    assert_eq!(admitted(&p, json!({"network": "none"})).grant.network, Network::None);
    assert_eq!(admitted(&p, json!({})).grant.network, Network::Remote);
    let mut u = root(Level::Unrestricted);
    u.scope.confine_reads = false;
    assert!(
        refused(&u, json!({"network": "none"}))
            .contains("network 'none' beside permission 'unrestricted' cannot be held")
    );
    assert_eq!(admitted(&u, json!({"network": "none", "permission": "workspace"})).grant.network, Network::None);
    u.network = Network::Remote;
    assert_eq!(
        admitted(&u, json!({})).grant.network,
        Network::Remote,
        "inherited at unrestricted: held as the parent holds it"
    );
}

#[test]
fn directories_outside_reach_are_refused_in_the_same_words_whether_or_not_they_exist() {
    let p = root(Level::Workspace);
    let exists = refused(&p, json!({"working_directory": "/o"}));
    let missing = refused(&p, json!({"working_directory": "/nowhere"}));
    assert_eq!(exists.replace("/o", "X"), missing.replace("/nowhere", "X"));
    assert!(exists.contains("working_directory '/o' is outside your reach"), "{exists}");
    // A symlink that leads out is outside too.
    assert!(refused(&p, json!({"working_directory": "ln"})).contains("'ln' is outside your reach"));
    // Missing inside reach: told so.
    assert!(refused(&p, json!({"working_directory": "missing"})).contains("'missing' does not exist"));
}

#[test]
fn every_failing_entry_is_named_in_one_refusal() {
    let p = root(Level::Workspace);
    let e = refused(
        &p,
        json!({"working_directory": "a", "additional_workspace_directories": ["/r", "/o"], "additional_readable_directories": ["/srv"]}),
    );
    for part in [
        "additional_workspace_directories '/r' is outside your reach",
        "additional_workspace_directories '/o'",
        "additional_readable_directories '/srv'",
    ] {
        assert!(e.contains(part), "{e}");
    }
}

#[test]
fn a_read_sub_agent_may_be_given_what_the_parent_reads() {
    let p = root(Level::Workspace);
    let a = admitted(
        &p,
        json!({"permission": "read", "working_directory": "/r/x", "additional_readable_directories": ["/w/c"]}),
    );
    assert_eq!(a.grant.scope, scope("/r/x", &[], &["/w/c"], true));
    // But a sub-agent that writes must be given what the parent writes.
    assert!(
        refused(&p, json!({"working_directory": "/r/x"})).contains("working_directory '/r/x' is outside your reach")
    );
}

#[test]
fn lists_need_a_working_directory_and_are_refused_beside_unrestricted() {
    let p = root(Level::Workspace);
    assert!(
        refused(&p, json!({"additional_readable_directories": ["/r"]}))
            .contains("additional_readable_directories needs working_directory beside it")
    );
    assert!(
        refused(&p, json!({"additional_readable_directories": ["/r"], "additional_workspace_directories": ["/w"]}))
            .contains("additional_workspace_directories and additional_readable_directories need working_directory")
    );
    let mut u = root(Level::Unrestricted);
    u.scope.confine_reads = false;
    assert!(
        refused(&u, json!({"working_directory": ".", "additional_readable_directories": ["/r"]}))
            .contains("additional_readable_directories beside permission 'unrestricted' is refused")
    );
    assert!(admitted(&u, json!({"working_directory": "/o"})).stated_scope);
}

#[test]
fn what_adds_nothing_is_merged() {
    let p = Grant { scope: scope("/w", &["/srv"], &["/r"], true), ..root(Level::Workspace) };
    let a = admitted(
        &p,
        json!({"working_directory": ".", "additional_workspace_directories": ["a", "/srv", "/srv/e", "/srv"],
               "additional_readable_directories": ["/r", "/srv", "c", "/r/x"]}),
    );
    assert_eq!(a.grant.scope, scope("/w", &["/srv"], &["/r"], true));
    let e = admitted(&p, json!({"working_directory": ".", "additional_workspace_directories": []}));
    assert_eq!(e.grant.scope, scope("/w", &[], &[], true), "naming the working directory states the whole scope");
}

#[test]
fn tool_lists_intersect_accumulate_and_deny_wins() {
    let mut p = root(Level::Workspace);
    p.tools.allow_tools = Some(["file_read", "file_write", "web_fetch"].iter().map(|s| s.to_string()).collect());
    p.tools.deny_tools.insert("web_fetch".into());
    let a = admitted(
        &p,
        json!({"allow_tools": ["file_read", "shell_execute", "web_fetch", "file_write"], "deny_tools": ["file_read"]}),
    );
    let g = &a.grant;
    assert!(g.holds_tool("file_write"));
    assert!(!g.holds_tool("file_read"), "a deny wins over an allow");
    assert!(!g.holds_tool("shell_execute"), "allow-lists intersect: the parent never held it");
    assert!(!g.holds_tool("web_fetch"), "denials accumulate");
    let b = admitted(&p, json!({"allow_tools": ["file_write"]}));
    assert!(!b.grant.holds_tool("file_read"), "outside the child's allow-list");
    assert!(a.warnings.iter().any(|w| w.contains("'shell_execute', which you do not hold")), "{:?}", a.warnings);
    assert!(refused(&p, json!({"allow_tools": []})).contains("allow_tools is empty"));
    assert!(refused(&p, json!({"allow_tools": ["shell_execute"]})).contains("leaves the sub-agent no tool you hold"));
}

#[test]
fn servers_withhold_their_tools_whole() {
    let p = root(Level::Workspace);
    let a = admitted(&p, json!({"allow_servers": ["git"], "deny_tools": ["mcp__git__push"]}));
    assert!(a.grant.holds_tool("mcp__git__log"));
    assert!(!a.grant.holds_tool("mcp__git__push"));
    assert!(!a.grant.holds_tool("mcp__db__query"));
    assert!(a.grant.holds_tool("file_read"), "built-ins are untouched by server lists");
    let b = admitted(&a.grant, json!({"deny_servers": ["git"]}));
    assert!(!b.grant.holds_tool("mcp__git__log"));
    assert!(refused(&p, json!({"allow_servers": []})).contains("allow_servers is empty"));
}

#[test]
fn unknown_names_are_warned_about_and_restrict_nothing() {
    let a = admitted(&root(Level::Workspace), json!({"deny_tools": ["no_such_tool"], "deny_servers": ["nope"]}));
    assert_eq!(a.warnings.len(), 2, "{:?}", a.warnings);
    assert!(a.warnings[0].contains("deny_tools names 'no_such_tool', which matches no tool or configured server"));
    assert!(a.warnings[1].contains("deny_servers names 'nope', which matches no configured server"));
    assert!(a.grant.holds_tool("file_read"));
}

#[test]
fn max_depth_bounds_nesting() {
    let mut p = root(Level::Workspace);
    p.depth_left = 1;
    let child = admitted(&p, json!({}));
    assert_eq!(child.grant.depth_left, 0);
    assert!(!child.grant.holds_tool("agent_spawn"), "1 means sub-agents cannot spawn");
    assert!(refused(&child.grant, json!({})).contains("max_depth is used up"));
    p.depth_left = 3;
    assert_eq!(admitted(&p, json!({"max_depth": 1})).grant.depth_left, 0);
    assert!(refused(&p, json!({"max_depth": 4})).contains("max_depth 4 is deeper than the 3 level(s)"));
    assert!(refused(&p, json!({"max_depth": 0})).contains("max_depth 0 would allow no sub-agent"));
    // The absolute cap holds whatever the configuration says.
    p.depth_left = 100;
    p.depth = ABSOLUTE_MAX_DEPTH - 1;
    let last = admitted(&p, json!({}));
    assert_eq!(last.grant.depth_left, 0);
    assert_eq!(last.grant.depth, ABSOLUTE_MAX_DEPTH);
}

#[test]
fn context_grants_never_exceed_the_parents() {
    let p = root(Level::Workspace);
    let a = admitted(&p, json!({"memory": "read", "instructions": "inherit"}));
    assert_eq!((a.grant.memory, a.grant.instructions.as_deref()), (MemoryGrant::Read, Some("be brief")));
    let b = admitted(&p, json!({}));
    let e = refused(&b.grant, json!({"memory": "read", "instructions": "inherit"}));
    assert!(e.contains("memory 'read' cannot be granted: you hold memory 'none'"), "{e}");
    assert!(e.contains("instructions 'inherit' cannot be granted"), "{e}");
}

#[test]
fn a_follow_up_narrows_to_the_parent_now_and_refuses_what_it_can_no_longer_grant() {
    let p = root(Level::Workspace);
    let t = terms(json!({"working_directory": "a", "additional_readable_directories": ["/r/x"]}));
    let first = admit(&p, &t, &known(), &FakeDirs::standard()).unwrap();
    assert_eq!(first.grant.level, Level::Workspace);
    // The parent dropped to read: the follow-up runs at read, the scope re-admitted for reading.
    let mut now = p.clone();
    now.level = Level::Read;
    now.network = Network::Remote;
    let again = readmit(&now, &t, &first.grant, None, &known(), &FakeDirs::standard()).unwrap();
    assert_eq!(again.grant.level, Level::Read);
    assert_eq!(again.grant.network, Network::Remote);
    assert_eq!(again.grant.scope, first.grant.scope);
    // The parent lost /r: the readable directory can no longer be granted.
    let mut lost = p.clone();
    lost.scope = scope("/w", &[], &[], true);
    let e = readmit(&lost, &t, &first.grant, None, &known(), &FakeDirs::standard()).unwrap_err().to_string();
    assert!(e.contains("additional_readable_directories '/r/x' is outside your reach"), "{e}");
    // Spawned with nothing named: keeps its working directory, follows the rest of the parent's scope.
    let plain = admit(&p, &SpawnTerms::default(), &known(), &FakeDirs::standard()).unwrap();
    let mut moved = p.clone();
    moved.scope = scope("/w/a", &[], &[], true);
    let e =
        readmit(&moved, &SpawnTerms::default(), &plain.grant, Some(Path::new("/w")), &known(), &FakeDirs::standard())
            .unwrap_err()
            .to_string();
    assert!(e.contains("working directory '/w' is outside your reach"), "{e}");
    // A level raised since does not raise the sub-agent.
    let mut up = p.clone();
    up.level = Level::Unrestricted;
    let read_child = admit(&p, &terms(json!({"permission": "read"})), &known(), &FakeDirs::standard()).unwrap();
    let again = readmit(
        &up,
        &terms(json!({"permission": "read"})),
        &read_child.grant,
        Some(Path::new("/w")),
        &known(),
        &FakeDirs::standard(),
    )
    .unwrap();
    assert_eq!(again.grant.level, Level::Read);
}

#[test]
fn the_report_header_uses_the_environment_block_lines() {
    let g = Grant {
        scope: scope("/home/u/repo-a", &["/srv/exports"], &["/home/u/repo-b"], true),
        ..root(Level::Workspace)
    };
    assert_eq!(
        header("3f2c", &g),
        "Agent: 3f2c\nPermission: workspace\nWorking directory: /home/u/repo-a\nAdditional workspace directories:\n  /srv/exports\nAdditional readable directories:\n  /home/u/repo-b\n"
    );
    let g2 = Grant { scope: scope("/a", &[], &[], true), network: Network::Remote, ..root(Level::Read) };
    assert_eq!(
        header("x", &g2),
        "Agent: x\nPermission: read\nWorking directory: /a\nAdditional readable directories: none\nNetwork: remote (shell and web_fetch)\n"
    );
    let g3 = Grant { scope: scope("/a", &[], &[], false), network: Network::None, ..root(Level::Unrestricted) };
    assert_eq!(
        header("y", &g3),
        "Agent: y\nPermission: unrestricted\nWorking directory: /a\nAdditional readable directories: anywhere\nNetwork: none (web_fetch)\n"
    );
}

// ---- The property test ----

/// splitmix64: small, seedable, good enough to spread cases.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
    fn subset(&mut self, items: &[&str], percent: u64) -> Vec<String> {
        items.iter().filter(|_| self.chance(percent)).map(|s| s.to_string()).collect()
    }
}

const DIR_NAMES: [&str; 16] = [
    "/", "/w", "/w/a", "/w/a/b", "/w/c", "/r", "/r/x", "/o", "/o/p", "/srv", "/srv/e", ".", "a", "..", "ln", "/nowhere",
];
const TOOLS: [&str; 11] = [
    "file_read",
    "file_write",
    "shell_execute",
    "web_fetch",
    "mcp__git__log",
    "mcp__git__push",
    "mcp__db__query",
    "agent_spawn",
    "agent_list",
    "ghost",
    "mcp__gone__x",
];
const SERVERS: [&str; 3] = ["git", "db", "gone"];
/// Paths whose reach the invariant compares, files included.
const PROBES: [&str; 17] = [
    "/",
    "/w",
    "/w/f",
    "/w/a",
    "/w/a/b/f",
    "/w/c/f",
    "/r",
    "/r/x/f",
    "/o",
    "/o/p/f",
    "/srv",
    "/srv/e/f",
    "/usr/lib/f",
    "/etc/passwd",
    "/nowhere/f",
    "/w/a/b",
    "/srv/e",
];

fn random_level(r: &mut Rng) -> Level {
    *r.pick(&Level::ALL)
}

fn random_network(r: &mut Rng) -> Network {
    *r.pick(&[Network::None, Network::Remote, Network::Unrestricted])
}

fn random_root(r: &mut Rng) -> Grant {
    let wd = *r.pick(&["/w", "/w/a", "/r", "/"]);
    let ws: Vec<PathBuf> = ["/srv", "/w/c"].iter().filter(|_| r.chance(30)).map(PathBuf::from).collect();
    let rd: Vec<PathBuf> = ["/r", "/o/p", "/srv/e"].iter().filter(|_| r.chance(40)).map(PathBuf::from).collect();
    let tools = ToolLists {
        allow_tools: r.chance(30).then(|| r.subset(&TOOLS, 60).into_iter().collect()),
        deny_tools: r.subset(&TOOLS, 10).into_iter().collect(),
        allow_servers: r.chance(20).then(|| r.subset(&SERVERS, 60).into_iter().collect()),
        deny_servers: r.subset(&SERVERS, 10).into_iter().collect(),
    };
    Grant {
        level: random_level(r),
        scope: Scope { working_dir: wd.into(), workspace_dirs: ws, readable_dirs: rd, confine_reads: r.chance(50) },
        network: random_network(r),
        tools,
        depth_left: if r.chance(10) { 0 } else { 1 + r.below(5) as u32 },
        depth: 0,
        memory: if r.chance(50) { MemoryGrant::Read } else { MemoryGrant::None },
        instructions: r.chance(50).then(|| "rules".to_string()),
    }
}

fn random_terms(r: &mut Rng, parent: &Grant) -> SpawnTerms {
    let list = |r: &mut Rng, items: &[&str], p: u64| -> Option<Vec<String>> {
        r.chance(p).then(|| if r.chance(5) { Vec::new() } else { r.subset(items, 40) })
    };
    let named = r.chance(35);
    // Mostly within the parent's level, so that deep trees grow; sometimes anything.
    let permission = match r.below(10) {
        0..=3 => None,
        4..=7 => Some(Level::ALL[r.below(Level::ALL.iter().position(|l| *l == parent.level).unwrap_or(0) + 1)]),
        _ => Some(random_level(r)),
    };
    SpawnTerms {
        permission,
        working_directory: named.then(|| r.pick(&DIR_NAMES).to_string()),
        additional_workspace_directories: if named || r.chance(5) { list(r, &DIR_NAMES, 40) } else { None },
        additional_readable_directories: if named || r.chance(5) { list(r, &DIR_NAMES, 40) } else { None },
        network: r.chance(40).then(|| random_network(r)),
        allow_tools: list(r, &TOOLS, 30),
        deny_tools: list(r, &TOOLS, 30),
        allow_servers: list(r, &SERVERS, 20),
        deny_servers: list(r, &SERVERS, 20),
        max_depth: r.chance(20).then(|| r.below(6) as u32),
        memory: r.chance(30).then(|| if r.chance(50) { MemoryGrant::Read } else { MemoryGrant::None }),
        instructions: r
            .chance(30)
            .then(|| if r.chance(50) { InstructionsGrant::Inherit } else { InstructionsGrant::None }),
        profile: r.chance(30).then(|| r.pick(&["fast", "deep"]).to_string()),
    }
}

/// The parent, narrowed the way a parent narrows between a spawn and a follow-up.
fn narrowed(r: &mut Rng, p: &Grant) -> Grant {
    let mut n = p.clone();
    if r.chance(50) {
        n.level = n.level.min(random_level(r));
    }
    if r.chance(50) {
        n.network = n.network.min(random_network(r));
    }
    if r.chance(30) {
        n.tools.deny_tools.extend(r.subset(&TOOLS, 30));
    }
    if r.chance(30) {
        n.scope.readable_dirs.clear();
        n.scope.workspace_dirs.clear();
        n.scope.confine_reads = true;
    }
    n
}

/// No sub-agent holds a level, directory, network setting, tool, depth or grant its parent did not
/// hold at that moment.
fn assert_within(parent: &Grant, child: &Grant, ctx: &dyn Fn() -> String) {
    assert!(child.level <= parent.level, "level {} above {}: {}", child.level, parent.level, ctx());
    assert!(child.network <= parent.network, "network wider: {}", ctx());
    for probe in PROBES {
        let p = Path::new(probe);
        assert!(!child.can_write(p) || parent.can_write(p), "the child writes {probe}, the parent does not: {}", ctx());
        assert!(!child.can_read(p) || parent.can_read(p), "the child reads {probe}, the parent does not: {}", ctx());
    }
    for t in TOOLS {
        assert!(!child.holds_tool(t) || parent.holds_tool(t), "the child holds {t}, the parent does not: {}", ctx());
    }
    assert!(child.depth_left < parent.depth_left, "depth not narrowed: {}", ctx());
    assert!(child.depth <= ABSOLUTE_MAX_DEPTH && child.depth == parent.depth + 1, "depth: {}", ctx());
    assert!(child.memory <= parent.memory, "memory: {}", ctx());
    assert!(child.instructions.is_none() || child.instructions == parent.instructions, "instructions: {}", ctx());
}

/// The refusals a spawn must get, by name, whatever else it asks.
fn assert_refused_by_name(
    parent: &Grant,
    terms: &SpawnTerms,
    outcome: &Result<Admitted, Refusal>,
    ctx: &dyn Fn() -> String,
) {
    if let Some(l) = terms.permission
        && l > parent.level
    {
        let e = outcome.as_ref().expect_err(&ctx());
        assert!(e.0.iter().any(|m| m.contains(&format!("permission '{l}'"))), "{e}: {}", ctx());
    }
    if let Some(n) = terms.network
        && n > parent.network
    {
        let e = outcome.as_ref().expect_err(&ctx());
        assert!(e.0.iter().any(|m| m.contains(&format!("network '{n}'"))), "{e}: {}", ctx());
    }
    if terms.allow_tools.as_ref().is_some_and(Vec::is_empty) {
        assert!(outcome.is_err(), "an empty allow-list admitted: {}", ctx());
    }
    if parent.depth_left == 0 {
        assert!(outcome.is_err(), "a spawn past max_depth admitted: {}", ctx());
    }
}

fn grow(r: &mut Rng, parent: &Grant, dirs: &FakeDirs, k: &KnownNames, stats: &mut [usize; 3], path: &str) {
    let spawns = 1 + r.below(3);
    for i in 0..spawns {
        let t = random_terms(r, parent);
        let outcome = admit(parent, &t, k, dirs);
        let here = format!("{path}/{i}");
        let ctx = || format!("at {here}: parent {parent:?}, terms {t:?}");
        assert_refused_by_name(parent, &t, &outcome, &ctx);
        let Ok(a) = outcome else {
            stats[1] += 1;
            continue;
        };
        stats[0] += 1;
        assert_within(parent, &a.grant, &ctx);
        // A profile changes the model only: the same spawn on another profile, or none, holds the same.
        let other = SpawnTerms { profile: if t.profile.is_some() { None } else { Some("fast".into()) }, ..t.clone() };
        assert_eq!(admit(parent, &other, k, dirs).map(|o| o.grant), Ok(a.grant.clone()), "profile: {}", ctx());
        // A follow-up against the parent as it is now, perhaps narrowed since.
        if r.chance(40) {
            let now = narrowed(r, parent);
            let spawned_in = (!a.stated_scope).then(|| a.grant.scope.working_dir.clone());
            if let Ok(again) = readmit(&now, &t, &a.grant, spawned_in.as_deref(), k, dirs) {
                stats[2] += 1;
                let ctx2 = || format!("follow-up at {here}: parent now {now:?}, held {:?}, terms {t:?}", a.grant);
                assert_within(&now, &again.grant, &ctx2);
                assert!(again.grant.level <= a.grant.level && again.grant.network <= a.grant.network, "{}", ctx2());
            }
        }
        grow(r, &a.grant, dirs, k, stats, &here);
    }
}

#[test]
fn no_generated_spawn_tree_ever_widens() {
    let seed = std::env::var("AMBIT_NARROW_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(7)
    });
    let dirs = FakeDirs::standard();
    let mut k = known();
    k.tools.extend(["agent_spawn", "agent_list"].iter().map(|s| s.to_string()));
    const TREES: usize = 10_000;
    let mut stats = [0usize; 3];
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut r = Rng(seed);
        for tree in 0..TREES {
            let root = random_root(&mut r);
            grow(&mut r, &root, &dirs, &k, &mut stats, &format!("tree {tree}"));
        }
    }));
    if let Err(e) = outcome {
        panic!("failed with AMBIT_NARROW_SEED={seed}: {:?}", e.downcast_ref::<String>());
    }
    println!(
        "{TREES} spawn trees (seed {seed}): {} spawns admitted, {} refused, {} follow-ups re-admitted",
        stats[0], stats[1], stats[2]
    );
    // The generator reaches both outcomes in volume, so the property is not vacuous.
    assert!(stats[0] > TREES && stats[1] > TREES && stats[2] > TREES / 10, "{stats:?}");
}
