//! Knowledge (SPEC §14, seed 004) through the public API, on real directories: the host publishes text
//! documents (at most 200 KB, overwrite off by default, never through a link, never half written); the
//! agent lists them and reads one inline up to the cap, or, larger or binary, gets a path the file tools
//! open under its scope; a knowledge directory outside reach is refused. Each guarantee has a control.

#[path = "mcp_support/mod.rs"]
mod mcp_support;

use std::path::{Path, PathBuf};

use ambit::knowledge::{KnowledgeConfig, KnowledgeError, MAX_PUBLISH_BYTES, publish};
use ambit::model::ModelRequest;
use ambit::permission::{Level, Policy, Scope};
use ambit::{Agent, Message};
use mcp_support::{call, scripted, text};
use serde_json::{Value, json};

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ambit-knowledge-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::canonicalize(d).unwrap()
}

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

#[test]
fn publish_takes_text_up_to_200_kb_and_never_overwrites_unless_asked() {
    let root = tempdir("publish");
    let dir = s(&root.join("kb"));
    let p = publish(&dir, "refund-policy", "# Refunds\nOver 500 EUR: a second approver.\n", false).unwrap();
    assert_eq!((p.name.as_str(), p.replaced), ("refund-policy.md", false), "a name without an extension gets .md");
    assert_eq!(
        std::fs::read_to_string(root.join("kb/refund-policy.md")).unwrap(),
        "# Refunds\nOver 500 EUR: a second approver.\n"
    );
    // Overwrite is off by default: refused, typed, and the document is unchanged.
    let e = publish(&dir, "refund-policy.md", "clobbered", false).unwrap_err();
    assert_eq!(e.code(), "knowledge_exists");
    assert!(matches!(e, KnowledgeError::Exists(ref n) if n == "refund-policy.md"), "{e}");
    assert!(std::fs::read_to_string(root.join("kb/refund-policy.md")).unwrap().starts_with("# Refunds"));
    // Control: with overwrite the same call replaces it.
    let p = publish(&dir, "refund-policy.md", "v2", true).unwrap();
    assert!(p.replaced);
    assert_eq!(std::fs::read_to_string(root.join("kb/refund-policy.md")).unwrap(), "v2");
    // 200 KB exactly is taken; one byte more is refused naming the content.
    publish(&dir, "big.txt", &"x".repeat(MAX_PUBLISH_BYTES), false).unwrap();
    let e = publish(&dir, "bigger.txt", &"x".repeat(MAX_PUBLISH_BYTES + 1), false).unwrap_err();
    assert_eq!((e.code(), e.field()), ("knowledge_invalid_argument", Some("content")), "{e}");
    assert!(!root.join("kb/bigger.txt").exists());
    // Text only, plain names only.
    for (name, content, field) in [
        ("report.pdf", "%PDF-1.7", "name"),
        ("nul.txt", "a\0b", "content"),
        ("../escape", "x", "name"),
        ("sub/dir.md", "x", "name"),
        (".hidden", "x", "name"),
        ("", "x", "name"),
    ] {
        let e = publish(&dir, name, content, true).unwrap_err();
        assert_eq!(e.field(), Some(field), "{name:?}: {e}");
    }
    assert!(!root.join("escape.md").exists() && !root.join("escape").exists());
    // A name that is a link to a file outside: refused, and the file outside is untouched.
    std::fs::write(root.join("outside.md"), "precious").unwrap();
    std::os::unix::fs::symlink(root.join("outside.md"), root.join("kb/link.md")).unwrap();
    let e = publish(&dir, "link.md", "overwritten", true).unwrap_err();
    assert_eq!(e.code(), "knowledge_io", "{e}");
    assert_eq!(std::fs::read_to_string(root.join("outside.md")).unwrap(), "precious");
    // No temporary file is left in the directory.
    let names: Vec<String> = std::fs::read_dir(root.join("kb"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
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

async fn run(root: &Path, knowledge: KnowledgeConfig, calls: Vec<(&str, Value)>) -> Vec<String> {
    let mut answers: Vec<_> = calls.into_iter().enumerate().map(|(i, (n, a))| call(&format!("c{i}"), n, a)).collect();
    answers.push(text("done"));
    let (model, seen) = scripted(answers);
    let scope = Scope::new(root, Vec::<PathBuf>::new(), Vec::<PathBuf>::new(), true).unwrap();
    let agent = Agent::builder()
        .model(model)
        .policy(Policy::level(Level::Read).scope(scope))
        .knowledge(knowledge)
        .tool(ambit::tools::builtin::FileRead::new())
        .build()
        .unwrap();
    agent.run("go").await.unwrap();
    let requests = seen.lock().unwrap().clone();
    tool_results(requests.last().unwrap())
}

#[tokio::test]
async fn the_agent_lists_and_reads_inline_up_to_the_cap_and_gets_a_path_past_it() {
    let root = tempdir("read");
    let kb = root.join("kb");
    publish(&s(&kb), "faq", "Q: Refunds?\nA: Within 30 days.\n", false).unwrap();
    publish(&s(&kb), "long.txt", &"line of text\n".repeat(200), false).unwrap();
    let png = [0x89u8, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d];
    std::fs::write(kb.join("logo.png"), png).unwrap();
    let config = KnowledgeConfig { inline_max_bytes: Some(1024), ..KnowledgeConfig::new("kb") };
    let r = run(
        &root,
        config,
        vec![
            ("knowledge_list", json!({})),
            ("knowledge_read", json!({"name": "faq.md"})),
            ("knowledge_read", json!({"name": "long.txt"})),
            ("knowledge_read", json!({"name": "logo.png"})),
            ("file_read", json!({"path": s(&kb.join("long.txt")), "limit": 1})),
            ("knowledge_read", json!({"name": "missing.md"})),
            ("knowledge_read", json!({"name": "../kb/faq.md"})),
        ],
    )
    .await;
    assert_eq!(r[0], "faq.md (text, 31 bytes)\nlogo.png (binary, 12 bytes)\nlong.txt (text, 2600 bytes)");
    assert_eq!(r[1], "Q: Refunds?\nA: Within 30 days.\n");
    let long_path = s(&kb.join("long.txt"));
    assert_eq!(
        r[2],
        format!(
            "long.txt is 2600 bytes, more than the 1 KiB returned inline: open it with the file tools (file_read with offset and limit) at {long_path}"
        )
    );
    assert_eq!(
        r[3],
        format!("logo.png is a binary document (12 bytes): open it with the file tools at {}", s(&kb.join("logo.png")))
    );
    // The path it gave is one the file tools open under the agent's scope.
    assert_eq!(r[4], "line of text\n");
    assert!(r[5].contains("there is no knowledge document named 'missing.md'"), "{r:?}");
    assert!(r[6].contains("argument 'name'"), "{r:?}");
}

#[tokio::test]
async fn a_knowledge_directory_outside_reach_is_refused() {
    let root = tempdir("scope");
    let outside = tempdir("scope-outside");
    publish(&s(&outside), "secret", "SECRET", false).unwrap();
    let r = run(
        &root,
        KnowledgeConfig::new(s(&outside)),
        vec![("knowledge_list", json!({})), ("knowledge_read", json!({"name": "secret.md"}))],
    )
    .await;
    assert!(r[0].contains("outside this session's reach") && r[1].contains("outside this session's reach"), "{r:?}");
    assert!(r.iter().all(|x| !x.contains("SECRET")), "{r:?}");
    // Control: the same directory inside reach is read.
    publish(&s(&root.join("kb")), "secret", "SECRET", false).unwrap();
    let r = run(&root, KnowledgeConfig::new("kb"), vec![("knowledge_read", json!({"name": "secret.md"}))]).await;
    assert_eq!(r, ["SECRET"]);
}

#[test]
fn a_bad_knowledge_setting_is_a_config_error() {
    let (model, _) = scripted(vec![]);
    let e = Agent::builder()
        .model(model)
        .knowledge(KnowledgeConfig { inline_max_bytes: Some(0), ..KnowledgeConfig::new("kb") })
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("inline_max_bytes"), "{e}");
}
