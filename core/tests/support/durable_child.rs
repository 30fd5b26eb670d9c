//! A process of the durable-run tests (core/tests/durable.rs): it opens a session store through the
//! public API and takes commands on stdin, one a line, answering each with one line on stdout:
//!
//!   resume SID PROVIDER_URL   resumes SID with "approve"; answers `ok SID` or `<error code> SID`
//!   run SID PROVIDER_URL      runs SID on "go"; answers the same way
//!   runcancel SID PROVIDER_URL  runs SID, drops the run once its `gate` call started, answers
//!                             `cancelled SID` and exits normally (main returns)
//!
//! ambit-durable-child STORE_URL EFFECTS_FILE [FLAGS]
//!   --unguarded     the exactly-once guards off (the negative control)
//!   --block         the tool blocks forever once it has had its effect (a crash after the effect)
//!   --idempotent    the tool declares itself idempotent
//!   --lease-ms N    the lease length
//!   --session-tools the agent has the session tools (context_compact ...)
//!   --clock-ahead-ms N  the process's clock runs N ms ahead (negative: behind)
//!   --background    the agent has background calls (a background `hold` outlives its run)
//!
//! The agent and its tools: durable_agent.rs. The child prints `ready` once the store is open.

use std::io::{BufRead, Write};
use std::time::Duration;

use ambit::ApprovalDecision;
use ambit::session::Sessions;

#[path = "durable_agent.rs"]
mod durable_agent;
use durable_agent::agent_with;

/// The system clock, `0` ms ahead (negative: behind): a process on a machine whose clock is off.
struct Ahead(i64);
impl ambit::ledger::Clock for Ahead {
    fn now_ms(&self) -> i64 {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64);
        now.unwrap_or(0) + self.0
    }
}

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
    if let Some(i) = args.iter().position(|a| a == "--clock-ahead-ms") {
        let ms: i64 = args[i + 1].parse().expect("--clock-ahead-ms N");
        sessions = sessions.with_clock(std::sync::Arc::new(Ahead(ms)));
    }
    if flag("--unguarded") {
        sessions = sessions.unguarded_for_tests();
    }
    say("ready");
    let (block, idempotent, session_tools) = (flag("--block"), flag("--idempotent"), flag("--session-tools"));
    let background = flag("--background");
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
        let agent = agent_with(provider, effects, block, idempotent, session_tools, background);
        if verb == "runcancel" {
            // A host that gives up on a run (a timeout, a Ctrl-C) and exits normally: the run's future is
            // dropped once its `gate` call has started, then main returns.
            let entered = format!("entered:{sid}");
            let run = sessions.run(&agent, sid, "go");
            let started = async {
                while !std::fs::read_to_string(effects).unwrap_or_default().lines().any(|l| l == entered) {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            };
            tokio::select! {
                _ = run => say(&format!("ended {sid}")),
                _ = started => say(&format!("cancelled {sid}")),
            }
            return;
        }
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
