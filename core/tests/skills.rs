//! Skills (SPEC §14) through the public API, on real folders: a skill folder laid out as Claude Code
//! writes it is read unchanged and written back with only the changed lines different; the per-turn
//! index is ordered, bounded and says when it is cut, and skill_search reaches what it left out;
//! skill_edit refuses an ambiguous match and an edit against a body that changed since it was read;
//! the writing tools exist only when agent-managed and never for a sub-agent; every file is reached
//! through the session's scope (a directory outside reach refused, a link never followed); a write
//! replaces SKILL.md whole; a hostile pattern neither hangs nor compiles past its bound. Each guarantee
//! has a control showing the test can fail.

#[path = "mcp_support/mod.rs"]
mod mcp_support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ambit::agent::subagent::SubagentConfig;
use ambit::model::ModelRequest;
use ambit::permission::{Level, Network, Policy, Scope};
use ambit::skills::SkillsConfig;
use ambit::tools::{Tool, ToolContext};
use ambit::{Agent, Message};
use mcp_support::{call, names, scripted, text};
use serde_json::{Value, json};

/// A SKILL.md as Claude Code's documentation lays one out: front matter with `allowed-tools`, a
/// license, a nested `metadata` map and a comment; a body that links a bundled file.
const CLAUDE_SKILL: &str = "---\n\
name: pdf-processing\n\
description: Extract text and tables from PDF files, fill forms, merge documents. Use when working with PDF files or when the user mentions PDFs, forms, or document extraction.\n\
allowed-tools: Read, Grep, Glob, Bash(python:*)\n\
license: Complete terms in LICENSE.txt\n\
metadata:\n  version: \"1.2\"\n  owner: docs-team\n\
# kept as written\n\
---\n\
\n\
# PDF Processing\n\
\n\
## Quick start\n\
\n\
Use pdfplumber to extract text:\n\
\n\
```python\n\
import pdfplumber\n\
with pdfplumber.open(\"doc.pdf\") as pdf:\n\
\x20   text = pdf.pages[0].extract_text()\n\
```\n\
\n\
For form filling, see [FORMS.md](FORMS.md) and run `scripts/fill_form.py`.\n";

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ambit-skills-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::canonicalize(d).unwrap()
}

/// A project as Claude Code keeps its skills: `.claude/skills/<name>/SKILL.md` and bundled files.
fn claude_project(name: &str) -> PathBuf {
    let root = tempdir(name);
    let skill = root.join(".claude/skills/pdf-processing");
    std::fs::create_dir_all(skill.join("scripts")).unwrap();
    std::fs::write(skill.join("SKILL.md"), CLAUDE_SKILL).unwrap();
    std::fs::write(skill.join("FORMS.md"), "# Forms\nFill the fields in order.\n").unwrap();
    std::fs::write(skill.join("scripts/fill_form.py"), "print('filled')\n").unwrap();
    root
}

fn skill_md(root: &Path, name: &str) -> String {
    std::fs::read_to_string(root.join(".claude/skills").join(name).join("SKILL.md")).unwrap()
}

fn policy(root: &Path, level: Level) -> Policy {
    Policy::level(level).scope(Scope::new(root, Vec::<PathBuf>::new(), Vec::<PathBuf>::new(), true).unwrap())
}

fn tool_results(r: &ModelRequest) -> Vec<String> {
    r.messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect()
}

/// Runs an agent on one scripted turn of calls, then a final answer; the requests it sent.
async fn run_calls(
    agent_of: impl FnOnce(mcp_support::Scripted) -> Agent,
    calls: Vec<(&str, Value)>,
) -> Vec<ModelRequest> {
    let mut answers: Vec<_> = calls.into_iter().enumerate().map(|(i, (n, a))| call(&format!("c{i}"), n, a)).collect();
    answers.push(text("done"));
    let (model, seen) = scripted(answers);
    let agent = agent_of(model);
    agent.run("go").await.unwrap();
    seen.lock().unwrap().clone()
}

fn ctx(scope: &Scope, level: Level) -> ToolContext {
    ToolContext {
        call_id: "t".into(),
        level,
        scope: Arc::new(scope.clone()),
        network: Network::None,
        allow_local_addresses: Arc::from([]),
        credentials: None,
        declared: Arc::from([]),
        context: None,
    }
}

fn managed_agent(root: &Path, level: Level, model: mcp_support::Scripted) -> Agent {
    Agent::builder()
        .model(model)
        .policy(policy(root, level))
        .skills(SkillsConfig::new([".claude/skills"]).agent_managed(true))
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_claude_code_skill_is_read_unchanged_and_written_back_changing_only_what_was_asked() {
    let root = claude_project("claude");
    let requests = run_calls(
        |m| managed_agent(&root, Level::Workspace, m),
        vec![
            ("skill_read", json!({"name": "pdf-processing"})),
            ("skill_edit", json!({"name": "pdf-processing", "old_string": "pdfplumber to extract", "new_string": "pdfplumber (0.11) to extract"})),
            ("skill_write", json!({"name": "pdf-processing", "priority": 7})),
        ],
    )
    .await;
    // The index the first request carried lists it with its description.
    let index = requests[0].instructions.clone().unwrap();
    assert!(index.starts_with("# Skills\n"), "{index}");
    assert!(index.contains("\n- pdf-processing: Extract text and tables from PDF files"), "{index}");
    let results = tool_results(requests.last().unwrap());
    let base = root.join(".claude/skills/pdf-processing");
    let body = CLAUDE_SKILL.split_once("# kept as written\n---\n").unwrap().1;
    assert_eq!(results[0], format!("Base directory for this skill: {}\n\n{body}", base.display()), "read unchanged");
    assert_eq!(results[1], "Replaced 1 occurrence in skill 'pdf-processing'.");
    assert!(results[2].starts_with("Updated skill 'pdf-processing'"), "{results:?}");
    // On disk: the same bytes but for the edited words and the added priority line.
    let want = CLAUDE_SKILL
        .replace("pdfplumber to extract", "pdfplumber (0.11) to extract")
        .replace("# kept as written\n---\n", "# kept as written\npriority: 7\n---\n");
    assert_eq!(skill_md(&root, "pdf-processing"), want);
    // The bundled files are untouched.
    assert_eq!(std::fs::read_to_string(base.join("FORMS.md")).unwrap(), "# Forms\nFill the fields in order.\n");
    assert_eq!(std::fs::read_to_string(base.join("scripts/fill_form.py")).unwrap(), "print('filled')\n");
    // Control: a write that changes the description changes that line, so the comparison above can fail.
    run_calls(
        |m| managed_agent(&root, Level::Workspace, m),
        vec![("skill_write", json!({"name": "pdf-processing", "description": "PDFs: read and fill."}))],
    )
    .await;
    let now = skill_md(&root, "pdf-processing");
    assert!(now.contains("\ndescription: \"PDFs: read and fill.\"\n") && now != want, "{now}");
    assert!(now.contains("allowed-tools: Read, Grep, Glob, Bash(python:*)\n") && now.contains("  owner: docs-team\n"));
}

#[tokio::test]
async fn a_skill_written_by_the_agent_is_in_the_agent_skills_format() {
    let root = tempdir("format");
    let requests = run_calls(
        |m| managed_agent(&root, Level::Workspace, m),
        vec![(
            "skill_write",
            json!({"name": "release-notes", "description": "Write release notes: group by feature.", "body": "# Release notes\nGroup changes by feature.\n"}),
        )],
    )
    .await;
    assert!(tool_results(&requests[1])[0].starts_with("Created skill 'release-notes'"), "{requests:?}");
    // The skills directory was made, and the file reads as any Agent Skills reader expects.
    assert_eq!(
        skill_md(&root, "release-notes"),
        "---\nname: release-notes\ndescription: \"Write release notes: group by feature.\"\n---\n# Release notes\nGroup changes by feature.\n"
    );
    // A bad name and a new skill without a description are refused by name.
    let requests = run_calls(
        |m| managed_agent(&root, Level::Workspace, m),
        vec![
            ("skill_write", json!({"name": "../escape", "description": "x"})),
            ("skill_write", json!({"name": "Bad_Name", "description": "x"})),
            ("skill_write", json!({"name": "no-description", "body": "b"})),
        ],
    )
    .await;
    let r = tool_results(requests.last().unwrap());
    assert!(r[0].contains("argument 'name'") && r[1].contains("argument 'name'"), "{r:?}");
    assert!(r[2].contains("argument 'description' is required"), "{r:?}");
    assert!(!root.join("escape").exists() && !root.join(".claude/escape").exists());
}

fn write_skill(dir: &Path, name: &str, description: &str, priority: Option<i64>, body: &str) {
    std::fs::create_dir_all(dir.join(name)).unwrap();
    let priority = priority.map(|p| format!("priority: {p}\n")).unwrap_or_default();
    std::fs::write(
        dir.join(name).join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {description}\n{priority}---\n{body}"),
    )
    .unwrap();
}

#[tokio::test]
async fn the_index_is_ordered_and_bounded_and_search_reaches_the_rest() {
    let root = tempdir("index");
    let dir = root.join("skills");
    write_skill(&dir, "zeta", "Last by name, first by priority.", Some(5), "z\n");
    write_skill(&dir, "alpha", "First by name.", None, "a\n");
    write_skill(&dir, "beta", "Second by name.", None, "The invoice template lives in templates/invoice.md.\n");
    std::fs::create_dir_all(dir.join("not-a-skill")).unwrap();
    let agent_of = |entries: usize| {
        let root = root.clone();
        move |m: mcp_support::Scripted| {
            Agent::builder()
                .model(m)
                .policy(policy(&root, Level::Read))
                .skills(SkillsConfig { index_entries: Some(entries), ..SkillsConfig::new(["skills"]) })
                .build()
                .unwrap()
        }
    };
    let requests = run_calls(agent_of(10), vec![]).await;
    let index = requests[0].instructions.clone().unwrap();
    let lines: Vec<&str> = index.lines().skip(2).collect();
    assert_eq!(
        lines,
        ["- zeta: Last by name, first by priority.", "- alpha: First by name.", "- beta: Second by name."]
    );
    // Cut to two: it says so, and skill_search finds the left-out skill by a line of its body.
    let requests = run_calls(agent_of(2), vec![("skill_search", json!({"pattern": "invoice\\s+template"}))]).await;
    let index = requests[0].instructions.clone().unwrap();
    assert!(
        index.ends_with("- alpha: First by name.\n[… 1 more skill not listed here; skill_search finds them]"),
        "{index}"
    );
    assert_eq!(tool_results(&requests[1]), ["beta:5: The invoice template lives in templates/invoice.md."]);
    // Control: a pattern nothing matches says so.
    let requests = run_calls(agent_of(2), vec![("skill_search", json!({"pattern": "no such words"}))]).await;
    assert_eq!(tool_results(&requests[1]), ["no matches"]);
}

#[tokio::test]
async fn hostile_patterns_neither_hang_nor_compile_past_their_bound() {
    let root = tempdir("regex");
    let dir = root.join("skills");
    // A line that makes a backtracking engine take exponential time on (a*)*b or (a|aa)+$.
    write_skill(&dir, "long", "Long lines.", None, &format!("{}c\n", "a".repeat(100_000)));
    let requests = run_calls(
        |m| {
            Agent::builder()
                .model(m)
                .policy(policy(&root, Level::Read))
                .skills(SkillsConfig::new(["skills"]))
                .build()
                .unwrap()
        },
        vec![
            ("skill_search", json!({"pattern": "(a*)*b"})),
            ("skill_search", json!({"pattern": "(a|aa)+$"})),
            ("skill_search", json!({"pattern": "\\w{1000}{1000}"})),
            ("skill_search", json!({"pattern": "(unclosed"})),
        ],
    )
    .await;
    let r = tool_results(requests.last().unwrap());
    assert_eq!(r[0], "no matches");
    assert!(r[1].starts_with("no matches"), "{r:?}");
    assert!(
        r[2].contains("argument 'pattern' is not a valid regular expression") && r[2].contains("size limit"),
        "{r:?}"
    );
    assert!(r[3].contains("argument 'pattern'"), "{r:?}");
}

#[tokio::test]
async fn an_edit_is_refused_when_ambiguous_or_computed_against_a_body_that_changed() {
    let root = claude_project("stale");
    let path = root.join(".claude/skills/pdf-processing/SKILL.md");
    let agent = managed_agent(&root, Level::Workspace, scripted(vec![]).0);
    let edit = agent.tools().get("skill_edit").unwrap().clone();
    let read = agent.tools().get("skill_read").unwrap().clone();
    let scope = Scope::new(&root, Vec::<PathBuf>::new(), Vec::<PathBuf>::new(), true).unwrap();
    let c = ctx(&scope, Level::Workspace);
    let change = json!({"name": "pdf-processing", "old_string": "Quick start", "new_string": "Start here"});
    // Not read yet: refused.
    let e = edit.call_in(change.clone(), &c).await.unwrap_err().to_string();
    assert!(e.contains("has not been read"), "{e}");
    read.call_in(json!({"name": "pdf-processing"}), &c).await.unwrap();
    // Someone else changes the body after the read: the edit computed against the old body is refused,
    // and the file keeps the other writer's change.
    let theirs = CLAUDE_SKILL.replace("Use pdfplumber", "Use pypdf or pdfplumber");
    std::fs::write(&path, &theirs).unwrap();
    let e = edit.call_in(change.clone(), &c).await.unwrap_err().to_string();
    assert!(e.contains("changed since you read it"), "{e}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), theirs);
    // Read again: the same edit goes through (the control: the refusal came from the change).
    read.call_in(json!({"name": "pdf-processing"}), &c).await.unwrap();
    edit.call_in(change, &c).await.unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), theirs.replace("Quick start", "Start here"));
    // More than one match: refused unless replace_all.
    let twice = json!({"name": "pdf-processing", "old_string": "pdf", "new_string": "PDF"});
    let e = edit.call_in(twice.clone(), &c).await.unwrap_err().to_string();
    assert!(e.contains("occurs") && e.contains("replace_all"), "{e}");
    let mut all = twice;
    all["replace_all"] = json!(true);
    let done = edit.call_in(all, &c).await.unwrap();
    assert!(done.as_str().unwrap().starts_with("Replaced "), "{done}");
    // The front matter is left alone: the edit replaced in the body only.
    assert!(std::fs::read_to_string(&path).unwrap().starts_with("---\nname: pdf-processing\n"));
}

#[tokio::test]
async fn a_write_replaces_skill_md_whole_never_in_place() {
    let root = claude_project("atomic");
    let path = root.join(".claude/skills/pdf-processing/SKILL.md");
    let agent = managed_agent(&root, Level::Workspace, scripted(vec![]).0);
    let scope = Scope::new(&root, Vec::<PathBuf>::new(), Vec::<PathBuf>::new(), true).unwrap();
    let c = ctx(&scope, Level::Workspace);
    let write = agent.tools().get("skill_write").unwrap().clone();
    // A reader that opened SKILL.md before the write still reads the whole old file: the new one was
    // written beside it and renamed into place.
    let mut before = std::fs::File::open(&path).unwrap();
    write.call_in(json!({"name": "pdf-processing", "body": "new body\n".repeat(10_000)}), &c).await.unwrap();
    let mut old = String::new();
    before.read_to_string(&mut old).unwrap();
    assert_eq!(old, CLAUDE_SKILL);
    assert!(std::fs::read_to_string(&path).unwrap().ends_with(&"new body\n".repeat(10_000)));
    // No temporary file is left behind.
    let names: Vec<String> = std::fs::read_dir(path.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
    // Control: file_write writes in place, and the early reader sees the new bytes, not the old file.
    let file_write = ambit::tools::builtin::FileWrite::new();
    let mut early = std::fs::File::open(&path).unwrap();
    file_write.call_in(json!({"path": path.to_str().unwrap(), "content": "in place\n"}), &c).await.unwrap();
    let mut seen = String::new();
    early.read_to_string(&mut seen).unwrap();
    assert_eq!(seen, "in place\n");
}

#[tokio::test]
async fn skill_files_are_reached_only_through_the_scope() {
    let root = tempdir("scope");
    let outside = tempdir("scope-outside");
    write_skill(&outside.join("skills"), "secret", "Outside reach.", None, "SECRET BODY\n");
    write_skill(&root.join("skills"), "inside", "Inside reach.", None, "inside body\n");
    // A skill folder that is a link to a folder outside: never followed.
    std::os::unix::fs::symlink(outside.join("skills/secret"), root.join("skills/linked")).unwrap();
    let outside_dir = outside.join("skills").to_str().unwrap().to_string();
    let requests = run_calls(
        |m| {
            Agent::builder()
                .model(m)
                .policy(policy(&root, Level::Read))
                .skills(SkillsConfig::new(["skills".to_string(), outside_dir.clone()]))
                .build()
                .unwrap()
        },
        vec![
            ("skill_read", json!({"name": "secret"})),
            ("skill_read", json!({"name": "linked"})),
            ("skill_search", json!({"pattern": "SECRET"})),
            ("skill_read", json!({"name": "inside"})),
        ],
    )
    .await;
    let index = requests[0].instructions.clone().unwrap();
    assert!(
        index.contains("- inside: Inside reach.") && !index.contains("secret") && !index.contains("linked"),
        "{index}"
    );
    assert!(index.contains("is outside this session's reach"), "the index names the refused directory: {index}");
    let r = tool_results(requests.last().unwrap());
    assert!(r[0].contains("outside this session's reach") && !r[0].contains("SECRET BODY"), "{r:?}");
    // The link is not followed; the lookup goes on to the next directory, which is refused.
    assert!(r[1].starts_with("Error:") && !r[1].contains("SECRET BODY"), "{r:?}");
    assert!(!r[2].contains("SECRET BODY"), "{r:?}");
    // Control: the skill inside reach is read.
    assert!(r[3].ends_with("\n\ninside body\n"), "{r:?}");

    // Writes: a skills directory in read reach only (a readable directory) is refused at workspace;
    // one in the workspace is written.
    let ro = tempdir("scope-readonly");
    write_skill(&ro.join("skills"), "kept", "Read-only.", None, "kept\n");
    let ro_dir = ro.join("skills").to_str().unwrap().to_string();
    let scope = Scope::new(&root, Vec::<PathBuf>::new(), [&ro], true).unwrap();
    let agent = Agent::builder()
        .model(scripted(vec![]).0)
        .policy(Policy::level(Level::Workspace).scope(scope.clone()))
        .skills(SkillsConfig::new([ro_dir]).agent_managed(true))
        .build()
        .unwrap();
    let c = ctx(&scope, Level::Workspace);
    agent.tools().get("skill_read").unwrap().call_in(json!({"name": "kept"}), &c).await.unwrap();
    for (tool, args) in [
        ("skill_write", json!({"name": "kept", "body": "changed"})),
        ("skill_edit", json!({"name": "kept", "old_string": "kept", "new_string": "changed"})),
        ("skill_delete", json!({"name": "kept"})),
    ] {
        let e = agent.tools().get(tool).unwrap().call_in(args, &c).await.unwrap_err().to_string();
        assert!(e.contains("outside this session's reach"), "{tool}: {e}");
    }
    assert_eq!(
        std::fs::read_to_string(ro.join("skills/kept/SKILL.md")).unwrap(),
        "---\nname: kept\ndescription: Read-only.\n---\nkept\n"
    );
}

#[tokio::test]
async fn skill_delete_removes_the_folder_and_never_what_a_link_in_it_points_to() {
    let root = claude_project("delete");
    let outside = tempdir("delete-outside");
    std::fs::write(outside.join("precious.txt"), "keep me").unwrap();
    let skill = root.join(".claude/skills/pdf-processing");
    std::os::unix::fs::symlink(&outside, skill.join("link-out")).unwrap();
    std::os::unix::fs::symlink(outside.join("precious.txt"), skill.join("scripts/file-link")).unwrap();
    let requests = run_calls(
        |m| managed_agent(&root, Level::Workspace, m),
        vec![("skill_delete", json!({"name": "pdf-processing"})), ("skill_read", json!({"name": "pdf-processing"}))],
    )
    .await;
    let r = tool_results(requests.last().unwrap());
    assert!(r[0].starts_with("Deleted skill 'pdf-processing'"), "{r:?}");
    assert!(r[1].contains("there is no skill named 'pdf-processing'"), "{r:?}");
    assert!(!skill.exists());
    assert_eq!(std::fs::read_dir(root.join(".claude/skills")).unwrap().count(), 0, "nothing left behind");
    assert_eq!(std::fs::read_to_string(outside.join("precious.txt")).unwrap(), "keep me");
}

#[tokio::test]
async fn the_writing_tools_exist_only_when_agent_managed_and_never_for_a_sub_agent() {
    let root = claude_project("subagent");
    let build = |managed: bool| {
        Agent::builder()
            .model(scripted(vec![]).0)
            .policy(policy(&root, Level::Workspace))
            .skills(SkillsConfig::new([".claude/skills"]).agent_managed(managed))
            .build()
            .unwrap()
    };
    let tool_names = |a: &Agent| a.tools().iter().map(|t| t.spec().name.clone()).collect::<Vec<_>>();
    assert_eq!(tool_names(&build(false)), ["skill_read", "skill_search"]);
    assert_eq!(tool_names(&build(true)), ["skill_read", "skill_search", "skill_write", "skill_edit", "skill_delete"]);
    let none = Agent::builder().model(scripted(vec![]).0).build().unwrap();
    assert!(tool_names(&none).iter().all(|n| !n.starts_with("skill_")));

    // A sub-agent of a managing agent: the index and the two reading tools, never the three writing.
    let (model, seen) = scripted(vec![
        call("s", "agent_spawn", json!({"prompt": "child"})),
        call("w", "skill_write", json!({"name": "pdf-processing", "body": "hijacked"})),
        text("child done"),
        text("parent done"),
    ]);
    let agent = Agent::builder()
        .model(model)
        .policy(policy(&root, Level::Workspace))
        .skills(SkillsConfig::new([".claude/skills"]).agent_managed(true))
        .subagents(SubagentConfig::default())
        .build()
        .unwrap();
    agent.run("parent").await.unwrap();
    let requests = seen.lock().unwrap().clone();
    let child = &requests[1];
    let child_names = names(child);
    assert!(child_names.contains(&"skill_read".to_string()) && child_names.contains(&"skill_search".to_string()));
    assert!(
        child_names.iter().all(|n| !["skill_write", "skill_edit", "skill_delete"].contains(&n.as_str())),
        "{child_names:?}"
    );
    assert!(
        child.instructions.as_deref().unwrap_or_default().contains("- pdf-processing: "),
        "the child sees the index"
    );
    assert_eq!(tool_results(&requests[2]), ["Error: there is no tool named 'skill_write'"]);
    assert_eq!(skill_md(&root, "pdf-processing"), CLAUDE_SKILL);
    // Control: the parent itself was offered skill_write.
    assert!(names(&requests[0]).contains(&"skill_write".to_string()));
}

#[tokio::test]
async fn the_index_reads_only_heads_and_search_refuses_a_limit_that_is_no_count() {
    let root = tempdir("heads");
    let dir = root.join("skills");
    // A long body: the index reads the front matter at the top; skill_read still returns it all.
    let body = "step\n".repeat(20_000);
    write_skill(&dir, "long-one", "A long skill.", None, &body);
    let agent = Agent::builder()
        .model(scripted(vec![]).0)
        .policy(policy(&root, Level::Read))
        .skills(SkillsConfig::new(["skills"]))
        .build()
        .unwrap();
    let scope = Scope::new(&root, Vec::<PathBuf>::new(), Vec::<PathBuf>::new(), true).unwrap();
    let c = ctx(&scope, Level::Read);
    let read = agent.tools().get("skill_read").unwrap().call_in(json!({"name": "long-one"}), &c).await.unwrap();
    assert!(read.as_str().unwrap().ends_with(&body));
    let search = agent.tools().get("skill_search").unwrap().clone();
    for limit in [json!(-1), json!(0), json!(101), json!(2.5)] {
        let e = search.call_in(json!({"pattern": "step", "limit": limit}), &c).await.unwrap_err().to_string();
        assert!(e.contains("argument 'limit'"), "{limit}: {e}");
    }
    // Control: a count is taken, and cuts the matches.
    let two = search.call_in(json!({"pattern": "step", "limit": 2}), &c).await.unwrap();
    assert!(two.as_str().unwrap().starts_with("long-one:5: step\nlong-one:6: step\n[… 19998 more matches"), "{two}");
    let requests = run_calls(
        |m| {
            Agent::builder()
                .model(m)
                .policy(policy(&root, Level::Read))
                .skills(SkillsConfig::new(["skills"]))
                .build()
                .unwrap()
        },
        vec![],
    )
    .await;
    assert!(requests[0].instructions.as_deref().unwrap().contains("- long-one: A long skill."));
}
