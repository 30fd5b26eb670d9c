//! A routine runner in its own process, for the multi-process tests (core/tests/routines_multiprocess.rs),
//! which start several on one store and kill them with SIGKILL.
//!
//! Usage: `ambit-routine-runner-child <store-url> <runner-id> [--broken]`. It prints `ready`, then
//! answers one command a line:
//! - `tick T`: sets its clock to T (ms) and ticks at T; answers `ok <started> <lost> <skipped> <in-flight>`;
//! - `idle T`: sets its clock to T and waits until its runs have ended; answers `ok`;
//! - `settle T`: sets its clock to T and waits until every run it has in flight waits for the clock to
//!   move past T (the rest have ended); answers `ok <in-flight>`. Nothing it runs moves after that until
//!   the clock does, so the test's final tick reads a store at rest.
//!
//! `--broken` runs the deliberately broken slot claim of the negative control.

#[path = "routine_agent.rs"]
mod routine_agent;

use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Duration;

use ambit::ledger::{Clock, ManualClock};
use ambit::routine::{RoutineOptions, Routines, Runner};
use ambit::session::Sessions;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(url), Some(id)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: ambit-routine-runner-child <store-url> <runner-id> [--broken]");
        std::process::exit(2);
    };
    let clock = ManualClock::new(0);
    let options = RoutineOptions { clock: Arc::new(clock.clone()), max_connections: 4 };
    let routines = Routines::open_with(url, options).await.expect("open the routines");
    let sessions = Sessions::open(url).await.expect("open the sessions");
    let agent_clock: Arc<dyn Clock> = Arc::new(clock.clone());
    let mut builder = Runner::builder(routines, sessions)
        .id(id.clone())
        .agent("tester", move |ctx| routine_agent::agent(ctx, agent_clock.clone()))
        .lease(Duration::from_secs(30 * 60));
    if args.iter().any(|a| a == "--broken") {
        builder = builder.broken_claim_for_tests();
    }
    let runner = builder.build().expect("build the runner");
    println!("ready");
    let stdin = std::io::stdin();
    let mut line = String::new();
    loop {
        line.clear();
        if stdin.lock().read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut words = line.split_whitespace();
        let (Some(command), Some(t)) = (words.next(), words.next().and_then(|t| t.parse::<i64>().ok())) else {
            continue;
        };
        clock.set(t);
        let answer = match command {
            "tick" => match runner.tick(t).await {
                Ok(r) => format!("ok {} {} {} {}", r.started.len(), r.lost.len(), r.skipped.len(), runner.in_flight()),
                Err(e) => format!("error {e}"),
            },
            "idle" => {
                runner.wait_idle().await;
                "ok".to_string()
            }
            "settle" => {
                // A real condition, polled with a generous cap: each run in flight either ends or
                // reaches its wait on the clock within moments.
                let waiting = || routine_agent::waiting_past(t);
                let began = std::time::Instant::now();
                while runner.in_flight() != waiting() && began.elapsed() < Duration::from_secs(120) {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
                if runner.in_flight() == waiting() {
                    format!("ok {}", runner.in_flight())
                } else {
                    format!(
                        "error {} runs in flight, {} waiting on the clock after 120 s",
                        runner.in_flight(),
                        waiting()
                    )
                }
            }
            _ => "error unknown command".to_string(),
        };
        println!("{answer}");
        let _ = std::io::stdout().flush();
    }
}
