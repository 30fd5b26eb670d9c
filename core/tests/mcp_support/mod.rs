//! Shared by the MCP tests against real servers: a scripted model that records every request, and
//! the servers scripts/mcp-servers.sh installs (it is run here; it is idempotent). A missing server
//! fails the test: the script exits non-zero, or the program it installed is absent.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ambit::model::{ModelRequest, ModelResponse, StopReason, ToolCall, Usage};
use ambit::{Model, ModelError};
use async_trait::async_trait;

/// Answers from a script and records every request.
pub struct Scripted {
    answers: Mutex<VecDeque<ModelResponse>>,
    seen: Arc<Mutex<Vec<ModelRequest>>>,
}

pub fn call(id: &str, name: &str, args: serde_json::Value) -> ModelResponse {
    ModelResponse {
        id: id.into(),
        text: None,
        tool_calls: vec![ToolCall { id: id.into(), name: name.into(), arguments: args.to_string(), from_text: false }],
        stop: StopReason::ToolCalls,
        usage: Usage::default(),
    }
}

pub fn text(t: &str) -> ModelResponse {
    ModelResponse {
        id: "end".into(),
        text: Some(t.into()),
        tool_calls: vec![],
        stop: StopReason::End,
        usage: Usage::default(),
    }
}

#[async_trait]
impl Model for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }
    async fn respond(&self, request: &ModelRequest) -> Result<ModelResponse, ModelError> {
        self.seen.lock().unwrap().push(request.clone());
        self.answers.lock().unwrap().pop_front().ok_or_else(|| ModelError::InvalidResponse("script ran out".into()))
    }
}

pub fn scripted(answers: Vec<ModelResponse>) -> (Scripted, Arc<Mutex<Vec<ModelRequest>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    (Scripted { answers: Mutex::new(answers.into()), seen: seen.clone() }, seen)
}

pub fn names(r: &ModelRequest) -> Vec<String> {
    r.tools.iter().map(|t| t.name.clone()).collect()
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Runs scripts/mcp-servers.sh and returns the directory it installed into.
pub fn servers_dir() -> PathBuf {
    let out = std::process::Command::new("bash")
        .arg(repo_root().join("scripts/mcp-servers.sh"))
        .output()
        .expect("run mcp-servers.sh");
    assert!(out.status.success(), "mcp-servers.sh failed: {}", String::from_utf8_lossy(&out.stderr));
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// A file the install must have put there; its absence fails the test.
pub fn installed(dir: &Path, rel: &str) -> String {
    let p = dir.join(rel);
    assert!(p.exists(), "{} is missing: scripts/mcp-servers.sh did not install it", p.display());
    p.display().to_string()
}

pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Waits (up to 20 s) until something accepts connections on 127.0.0.1:port; panics with the child's
/// exit status if it dies first.
pub async fn wait_for_port(port: u16, child: &mut tokio::process::Child) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return;
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the server exited before listening on {port}: {status}");
        }
        assert!(std::time::Instant::now() < deadline, "nothing listens on 127.0.0.1:{port} after 20 s");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Starts the OAuth-protected MCP test server (tests/mcp/oauth_server.py, its arguments there) and
/// returns its MCP URL, which it prints first, and the process (killed when dropped).
pub async fn oauth_server(args: &[&str]) -> (String, tokio::process::Child) {
    use tokio::io::AsyncBufReadExt;
    let dir = servers_dir();
    let python = installed(&dir, "venv/bin/python");
    let mut child = tokio::process::Command::new(python)
        .arg(repo_root().join("tests/mcp/oauth_server.py"))
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let url = lines.next_line().await.unwrap().expect("the server prints its URL");
    (url, child)
}
