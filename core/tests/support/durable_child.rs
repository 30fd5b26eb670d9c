//! A process of the durable-run tests (core/tests/durable.rs): it opens a session store through the
//! public API and takes commands on stdin, one a line, answering each with one line on stdout:
//!
//!   resume SID PROVIDER_URL   resumes SID with "approve"; answers `ok SID` or `<error code> SID`
//!   run SID PROVIDER_URL      runs SID on "go"; answers the same way
//!
//! ambit-durable-child STORE_URL EFFECTS_FILE [FLAGS]
//!   --unguarded     the exactly-once guards off (the negative control)
//!   --block         the tool blocks forever once it has had its effect (a crash after the effect)
//!   --idempotent    the tool declares itself idempotent
//!   --lease-ms N    the lease length
//!
//! The agent and its tools: durable_agent.rs. The child prints `ready` once the store is open.

use std::io::{BufRead, Write};
use std::time::Duration;

use ambit::ApprovalDecision;
use ambit::session::Sessions;

#[path = "durable_agent.rs"]
mod durable_agent;
use durable_agent::agent;

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (url, effects) = (&args[1], &args[2]);
    let flag = |f: &str| args.iter().any(|a| a == f);
    let mut sessions = Sessions::open(url).await.expect("open the store");
    if let Some(i) = args.iter().position(|a| a == "--lease-ms") {
        let ms: u64 = args[i + 1].parse().expect("--lease-ms N");
        sessions = sessions.with_lease(Duration::from_millis(ms)).expect("lease");
    }
    if flag("--unguarded") {
        sessions = sessions.unguarded_for_tests();
    }
    say("ready");
    let (block, idempotent) = (flag("--block"), flag("--idempotent"));
    // Commands come one at a time from a parent that waits for each answer; read them as they come.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    while let Some(line) = rx.recv().await {
        let words: Vec<&str> = line.split_whitespace().collect();
        let [verb, sid, provider] = words[..] else { panic!("bad command: {line}") };
        let agent = agent(provider, effects, block, idempotent);
        let outcome = match verb {
            "resume" => sessions.resume(&agent, sid, ApprovalDecision::Approve).await,
            "run" => sessions.run(&agent, sid, "go").await,
            other => panic!("unknown command {other}"),
        };
        match outcome {
            Ok(_) => say(&format!("ok {sid}")),
            Err(e) => say(&format!("{} {sid}", e.code())),
        }
    }
}
