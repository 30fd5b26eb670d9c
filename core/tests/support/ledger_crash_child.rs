//! A ledger client for the crash tests, killed with SIGKILL by its parent (core/tests/ledger_crash.rs).
//!
//!   ambit-ledger-crash-child URL mid-claim SCOPE COUNT      claims COUNT fresh subjects in one call
//!   ambit-ledger-crash-child URL after-commit SCOPE KEY NOW  claims KEY at NOW (ms), then waits
//!
//! It prints a line before and after each step so the parent knows where it is.

use std::io::Write;
use std::sync::Arc;

use ambit::ledger::{ClaimRequest, Ledger, LedgerOptions, ManualClock};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (url, mode, scope) = (&args[1], args[2].as_str(), &args[3]);
    let say = |line: &str| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    match mode {
        "mid-claim" => {
            let count: usize = args[4].parse().expect("COUNT");
            let ledger = Ledger::open(url).await.expect("open");
            let keys: Vec<String> = (0..count).map(|i| format!("S-{i:06}")).collect();
            say("claiming");
            let result =
                ledger.claim(ClaimRequest::new(scope.as_str(), keys, count).run_id("child")).await.expect("claim");
            say(&format!("claimed {}", result.granted().count()));
        }
        "after-commit" => {
            let now: i64 = args[5].parse().expect("NOW");
            let options = LedgerOptions { clock: Arc::new(ManualClock::new(now)), ..LedgerOptions::default() };
            let ledger = Ledger::open_with(url, options).await.expect("open");
            let result = ledger
                .claim(ClaimRequest::new(scope.as_str(), [args[4].as_str()], 1).run_id("child"))
                .await
                .expect("claim");
            let token = result.candidates[0].token().expect("granted");
            say(&format!("committed {token}"));
            std::future::pending::<()>().await;
        }
        other => panic!("unknown mode {other}"),
    }
}
