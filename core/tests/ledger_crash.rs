//! Crashes, on both stores: a client killed with SIGKILL in the middle of a claim leaves nothing granted
//! (and a sound SQLite file); one killed after its claim committed holds the subject until the lease
//! ends, then the subject is granted again with the old attempt abandoned, and a late record carrying
//! the old token is rejected.

mod ledger_support;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use ambit::ledger::*;
use ledger_support::*;
use sqlx::Connection;

fn child(args: &[&str]) -> (Child, BufReader<std::process::ChildStdout>) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ambit-ledger-crash-child"))
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the crash child");
    let out = BufReader::new(c.stdout.take().unwrap());
    (c, out)
}

fn line(out: &mut BufReader<std::process::ChildStdout>) -> String {
    let mut l = String::new();
    out.read_line(&mut l).unwrap();
    l.trim().to_string()
}

#[tokio::test]
async fn killed_mid_claim_grants_nothing() {
    for s in stores().await {
        drop(s.open(Arc::new(SystemClock)).await);
        // A claim big enough to be still running when the kill comes.
        let (mut c, mut out) = child(&[&s.url, "mid-claim", "crash", "40000"]);
        assert_eq!(line(&mut out), "claiming");
        std::thread::sleep(Duration::from_millis(300));
        assert!(c.try_wait().unwrap().is_none(), "{}: the child is still claiming", s.name);
        c.kill().unwrap(); // SIGKILL
        c.wait().unwrap();
        assert_eq!(line(&mut out), "", "{}: the claim must still have been running when killed", s.name);
        // Wait for the server to notice the dropped connection and roll back.
        let l = s.open(Arc::new(SystemClock)).await;
        let mut granted = usize::MAX;
        for _ in 0..100 {
            let listed = l.list(&ListQuery { scope: Some("crash".into()), ..Default::default() }).await.unwrap();
            granted = listed.len();
            if granted == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(granted, 0, "{}: nothing granted", s.name);
        let r = l.claim(ClaimRequest::new("crash", ["S-000000"], 1)).await.unwrap();
        assert_eq!(r.candidates[0].grant_reason(), Some(GrantReason::Fresh), "{}", s.name);
        assert!(r.candidates[0].token().is_some_and(|t| t > 0));
        if s.is_sqlite() {
            let mut conn = sqlx::SqliteConnection::connect(&s.url).await.unwrap();
            let ok: String = sqlx::query_scalar("PRAGMA integrity_check").fetch_one(&mut conn).await.unwrap();
            assert_eq!(ok, "ok");
        }
    }
}

#[tokio::test]
async fn killed_after_commit_holds_the_subject_until_the_lease_ends() {
    for s in stores().await {
        let (mut c, mut out) = child(&[&s.url, "after-commit", "crash", "PO-9", &T0.to_string()]);
        let committed = line(&mut out);
        let old_token: i64 = committed
            .strip_prefix("committed ")
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("{}: the child said '{committed}'", s.name));
        c.kill().unwrap();
        c.wait().unwrap();
        let clock = ManualClock::new(T0 + HOUR - 1);
        let l = s.open(Arc::new(clock.clone())).await;
        let r = l.claim(ClaimRequest::new("crash", ["PO-9"], 1).run_id("next")).await.unwrap();
        assert_eq!(
            r.candidates[0].verdict,
            Verdict::Skipped { skip_reason: SkipReason::InFlight, eligible_at: Some(T0 + HOUR) },
            "{}: held until the lease ends",
            s.name
        );
        clock.advance(Duration::from_millis(1));
        let r = l.claim(ClaimRequest::new("crash", ["PO-9"], 1).run_id("next")).await.unwrap();
        assert_eq!(r.candidates[0].grant_reason(), Some(GrantReason::CooldownExpired), "{}", s.name);
        let new_token = r.candidates[0].token().unwrap();
        assert_ne!(new_token, old_token, "{}: a new grant gets a new token", s.name);
        let entry = l.list(&ListQuery::default()).await.unwrap().remove(0);
        assert_eq!(entry.last_outcome, Some(AttemptOutcome::Abandoned), "{}", s.name);
        // The dead run's record, arriving late with the old token, is rejected and changes nothing.
        let before = s.checksum("crash").await;
        let e = l
            .record("crash", Some("child"), vec![Record::new("PO-9", Outcome::Productive, Some(old_token))])
            .await
            .unwrap_err();
        assert_eq!(e.code(), "ledger_stale_token", "{}", s.name);
        assert_eq!(s.checksum("crash").await, before);
        l.record("crash", Some("next"), vec![Record::new("PO-9", Outcome::Empty, Some(new_token))]).await.unwrap();
    }
}
