//! The agent under attack in core/tests/shell_sandbox.rs, run in a child process so the guarantees are
//! shown for whichever user runs it (root, or uid 65534 through `setpriv`) and so its peak memory is its
//! own. It reads one JSON object from stdin:
//!
//!   {"base_url", "level", "network", "ws", "mode": "run" | "cancel" | "ballast", "marker", "count"}
//!
//! and runs an agent with the built-in `shell_execute` against the scripted provider at `base_url`
//! (which asks for one shell call, then answers). It prints one JSON line: the call's result, its own
//! pid, and its peak RSS (VmHWM, kB) before and after the run.
//!
//! - `run`: the run to its end.
//! - `cancel`: the run is dropped (cancelled) once `count` live processes whose command line holds
//!   `marker` exist; it prints how many it saw.
//! - `ballast`: before the run, touches 50 MB of memory, so the parent can see that the RSS figures
//!   move (the negative control of the memory test).

use std::io::{Read, Write};
use std::time::Duration;

use ambit::tools::builtin;
use ambit::{Agent, Level, Network, OpenAiChat, Policy, Scope};
use serde_json::{Value, json};

#[path = "rss.rs"]
mod rss;
use rss::peak_rss_kib as vm_hwm_kb;

/// Live processes (not zombies) whose command line holds `marker`.
fn marked(marker: &str) -> usize {
    let Ok(dir) = std::fs::read_dir("/proc") else { return 0 };
    dir.filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
        .filter(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            let zombie = stat.rsplit(')').next().is_some_and(|s| s.trim_start().starts_with('Z'));
            !zombie && cmdline.windows(marker.len()).any(|w| w == marker.as_bytes())
        })
        .count()
}

fn parse<T: serde::de::DeserializeOwned>(v: &Value) -> T {
    serde_json::from_value(v.clone()).expect("a level or a network")
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input).expect("stdin");
    let cfg: Value = serde_json::from_str(&input).expect("JSON on stdin");
    let level: Level = parse(&cfg["level"]);
    let network: Network = parse(&cfg["network"]);
    let ws = cfg["ws"].as_str().expect("ws");
    let mode = cfg["mode"].as_str().unwrap_or("run");
    let shell = builtin::by_name("shell_execute").expect("the shell");
    let agent = Agent::builder()
        .model(OpenAiChat::new("m").base_url(cfg["base_url"].as_str().expect("base_url")).max_retries(0))
        .tools([shell])
        .policy(
            Policy::level(level)
                .scope(Scope::new(ws, Vec::<&str>::new(), Vec::<&str>::new(), false).expect("scope"))
                .network(network),
        )
        .build()
        .expect("agent");
    let mut ballast = Vec::new();
    if mode == "ballast" {
        ballast = vec![1u8; 50_000_000];
    }
    let before = vm_hwm_kb();
    let f = builtin::sandbox::features();
    let features = json!({"landlock_abi": f.landlock_abi, "seccomp": f.seccomp, "namespaces": f.namespaces});
    let mut out =
        json!({"pid": std::process::id(), "hwm_before_kb": before, "ballast": ballast.len(), "features": features});
    match mode {
        "cancel" => {
            let marker = cfg["marker"].as_str().expect("marker");
            let count = cfg["count"].as_u64().expect("count") as usize;
            let run = agent.run("go");
            tokio::pin!(run);
            // Bounded polling on a real condition: the processes the command started are alive.
            let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
            let seen = loop {
                tokio::select! {
                    r = &mut run => panic!("the run ended before it was cancelled: {:?}", r.map(|r| r.output)),
                    _ = tokio::time::sleep(Duration::from_millis(20)) => {}
                }
                let seen = marked(marker);
                if seen >= count || tokio::time::Instant::now() > deadline {
                    break seen;
                }
            };
            out["seen_before_cancel"] = json!(seen);
            // Dropping the future cancels the run.
        }
        _ => {
            let r = agent.run("go").await.expect("the run");
            let call = r.tool_calls.first().expect("one tool call");
            out["result"] = json!(call.result);
            out["is_error"] = json!(call.is_error);
        }
    }
    out["hwm_after_kb"] = json!(vm_hwm_kb());
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{out}").expect("stdout");
    stdout.flush().expect("stdout");
}
