//! The durable-run tests' child process, driven over its stdin and stdout
//! (tests/support/durable_child.rs), and the provider and side-effect file they share.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use ambit_test_provider::{Provider, Script};
use serde_json::{Value, json};

/// The loopback provider answering `exchanges` in order.
pub async fn provider(exchanges: Value) -> Provider {
    let script: Script = serde_json::from_value(json!({"name": "durable", "exchanges": exchanges})).unwrap();
    Provider::start(script).await.unwrap()
}

/// How many times `line` is in the side-effect file `effects`.
pub fn effects_of(effects: &str, line: &str) -> usize {
    std::fs::read_to_string(effects).unwrap_or_default().lines().filter(|l| *l == line).count()
}

/// A child process running the durable agent on a store, one command a line.
pub struct Worker {
    pub child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Worker {
    pub fn start(url: &str, effects: &str, flags: &[&str]) -> Worker {
        let mut child = Command::new(env!("CARGO_BIN_EXE_ambit-durable-child"))
            .arg(url)
            .arg(effects)
            .args(flags)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the child");
        let stdin = child.stdin.take().unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready", "the child did not start");
        Worker { child, stdin, stdout }
    }

    pub fn send(&mut self, command: &str) {
        writeln!(self.stdin, "{command}").unwrap();
        self.stdin.flush().unwrap();
    }

    pub fn answer(&mut self) -> String {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        line.split_whitespace().next().unwrap_or("(the child died)").to_string()
    }

    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill").arg(sig).arg(self.child.id().to_string()).status().unwrap().success();
        assert!(ok, "kill {sig}");
    }

    pub fn kill(mut self) {
        // SIGKILL: no destructor, no lease let go, no outcome recorded.
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
