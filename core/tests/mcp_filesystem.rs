//! @modelcontextprotocol/server-filesystem (installed by scripts/mcp-servers.sh) over stdio, with a
//! temporary directory as its one allowed root: real files written, read and listed through an agent
//! driven by a scripted model; a path outside the root comes back as the server's isError result.

mod mcp_support;

use ambit::mcp::McpServer;
use ambit::{Agent, Level, Policy};
use mcp_support::{call, installed, scripted, servers_dir, text};
use serde_json::json;

fn filesystem(root: &std::path::Path) -> McpServer {
    let dir = servers_dir();
    let js = installed(&dir, "npm/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    // Its annotations mark the read tools readOnlyHint: trusted, those are `read`; configuration wins.
    McpServer::stdio("fs", ["node".to_string(), js, root.display().to_string()])
        .trusted(true)
        .level("create_directory", Level::Workspace)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filesystem_server_writes_reads_and_lists_real_files() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    std::fs::write(root.join("given.txt"), "already here\nsecond line\n").unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().canonicalize().unwrap().join("secret.txt");
    std::fs::write(&secret, "not yours").unwrap();
    let p = |name: &str| root.join(name).display().to_string();
    let (model, seen) = scripted(vec![
        call("c1", "mcp__fs__write_file", json!({"path": p("new.txt"), "content": "written by the tool\n"})),
        call("c2", "mcp__fs__read_text_file", json!({"path": p("given.txt")})),
        call("c3", "mcp__fs__list_directory", json!({"path": root.display().to_string()})),
        call("c4", "mcp__fs__read_text_file", json!({"path": secret.display().to_string()})),
        call("c5", "mcp__fs__create_directory", json!({"path": p("sub/deeper")})),
        text("done"),
    ]);
    let agent = Agent::builder().model(model).mcp(filesystem(&root)).build().unwrap();
    let result = agent.run("work with files").await.unwrap();
    assert_eq!(result.output, "done");
    let r = &result.tool_calls;
    for c in [&r[0], &r[1], &r[2], &r[4]] {
        assert!(!c.is_error, "{}: {}", c.name, c.result);
    }
    // The write happened on disk, with the content.
    assert_eq!(std::fs::read_to_string(root.join("new.txt")).unwrap(), "written by the tool\n");
    assert!(r[0].result.contains("Successfully wrote"), "{}", r[0].result);
    // The read returns the file's text.
    assert!(r[1].result.starts_with("already here\nsecond line"), "{}", r[1].result);
    // The listing shows both files.
    assert!(r[2].result.contains("[FILE] given.txt") && r[2].result.contains("[FILE] new.txt"), "{}", r[2].result);
    // Outside the root: the server's own error, as an isError result carried to the model.
    assert!(r[3].is_error, "{}", r[3].result);
    assert!(r[3].result.contains("Access denied - path outside allowed directories"), "{}", r[3].result);
    assert!(!r[3].result.contains("not yours"));
    assert!(root.join("sub/deeper").is_dir());
    // The model saw the error text in the next request.
    let seen = seen.lock().unwrap();
    let last = serde_json::to_string(&seen[4].messages).unwrap();
    assert!(last.contains("Access denied - path outside allowed directories"), "{last}");
    // Levels: trusted readOnlyHint gives `read`, the rest `unrestricted`, configuration wins.
    let listing = agent.list_tools();
    let level = |n: &str| listing.iter().find(|t| t.name == format!("mcp__fs__{n}")).map(|t| t.level);
    assert_eq!(level("read_text_file"), Some(Level::Read));
    assert_eq!(level("list_directory"), Some(Level::Read));
    assert_eq!(level("write_file"), Some(Level::Unrestricted));
    assert_eq!(level("create_directory"), Some(Level::Workspace));
    assert!(listing.iter().filter(|t| t.name.starts_with("mcp__fs__")).count() >= 13, "{listing:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_level_read_the_read_tools_run_and_the_write_tool_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    std::fs::write(root.join("given.txt"), "readable").unwrap();
    let (model, _seen) = scripted(vec![
        call("c1", "mcp__fs__read_text_file", json!({"path": root.join("given.txt").display().to_string()})),
        call("c2", "mcp__fs__write_file", json!({"path": root.join("no.txt").display().to_string(), "content": "x"})),
        text("done"),
    ]);
    let agent =
        Agent::builder().model(model).policy(Policy::level(Level::Read)).mcp(filesystem(&root)).build().unwrap();
    let result = agent.run("read only").await.unwrap();
    let r = &result.tool_calls;
    assert!(!r[0].is_error && r[0].result.starts_with("readable\nstructured_content"), "{}", r[0].result);
    assert!(r[1].is_error, "{}", r[1].result);
    assert!(!root.join("no.txt").exists(), "a refused write must not reach the server");
}
