//! Every ledger rule of SPEC §9, on SQLite and on PostgreSQL, with the injected clock.

mod ledger_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use ambit::ledger::*;
use ledger_support::*;
use serde_json::json;

fn clock() -> ManualClock {
    ManualClock::new(T0)
}

fn hours(h: i64) -> Duration {
    Duration::from_millis((h * HOUR) as u64)
}

async fn claim_one(l: &Ledger, scope: &str, key: &str, run: &str) -> Labelled {
    let r = l.claim(ClaimRequest::new(scope, [key], 1).run_id(run)).await.unwrap();
    r.candidates.into_iter().next().unwrap()
}

async fn record_one(l: &Ledger, scope: &str, key: &str, outcome: Outcome, token: i64) -> Recorded {
    let r = l.record(scope, None, vec![Record::new(key, outcome, Some(token))]).await.unwrap();
    r.recorded.into_iter().next().unwrap()
}

#[tokio::test]
async fn cooldown_ladder_escalates_caps_and_resets() {
    for s in stores().await {
        let c = clock();
        let l = s.open(Arc::new(c.clone())).await;
        let first = claim_one(&l, "po", "PO-1", "r").await;
        assert_eq!(first.grant_reason(), Some(GrantReason::Fresh), "{}", s.name);
        let mut token = first.token().unwrap();
        let mut got = Vec::new();
        for miss in 1..=7 {
            let outcome = if miss % 2 == 0 { Outcome::Failed } else { Outcome::Empty };
            let rec = record_one(&l, "po", "PO-1", outcome, token).await;
            assert_eq!(rec.misses, miss, "{}", s.name);
            assert_eq!(rec.escalate, miss >= 5, "{}: escalation hint after {miss} misses", s.name);
            let wait = rec.eligible_at.unwrap() - l.now_ms();
            got.push(wait / HOUR);
            // One millisecond before the cooldown ends it is still cooling down, with that time.
            c.advance(Duration::from_millis(wait as u64 - 1));
            let early = claim_one(&l, "po", "PO-1", "r").await;
            assert_eq!(early.skip_reason(), Some(SkipReason::CoolingDown), "{}", s.name);
            assert_eq!(
                early.verdict,
                Verdict::Skipped { skip_reason: SkipReason::CoolingDown, eligible_at: rec.eligible_at }
            );
            c.advance(Duration::from_millis(1));
            let again = claim_one(&l, "po", "PO-1", "r").await;
            assert_eq!(again.grant_reason(), Some(GrantReason::CooldownExpired), "{}", s.name);
            token = again.token().unwrap();
        }
        assert_eq!(got, [6, 12, 24, 48, 96, 168, 168], "{}: the ladder", s.name);
        // A productive attempt resets the count; the next eligibility is the first step.
        let rec = record_one(&l, "po", "PO-1", Outcome::Productive, token).await;
        assert_eq!((rec.misses, rec.escalate), (0, false), "{}", s.name);
        assert_eq!(rec.eligible_at, Some(l.now_ms() + 6 * HOUR), "{}", s.name);
        let entry = &l.list(&ListQuery { scope: Some("po".into()), ..Default::default() }).await.unwrap()[0];
        assert_eq!((entry.attempts, entry.misses, entry.last_outcome), (8, 0, Some(AttemptOutcome::Productive)));
        // And a miss after it starts the ladder again at 6 h.
        c.advance(hours(6));
        let t = claim_one(&l, "po", "PO-1", "r").await.token().unwrap();
        let rec = record_one(&l, "po", "PO-1", Outcome::Empty, t).await;
        assert_eq!((rec.misses, rec.eligible_at), (1, Some(l.now_ms() + 6 * HOUR)), "{}", s.name);
    }
}

#[tokio::test]
async fn each_grant_and_skip_reason() {
    for s in stores().await {
        let c = clock();
        let l = s.open(Arc::new(c.clone())).await;
        // fresh, then over_limit for an eligible candidate past the limit: nothing touched it.
        let r = l.claim(ClaimRequest::new("sc", ["A", "B"], 1).run_id("r1")).await.unwrap();
        assert_eq!(r.candidates[0].grant_reason(), Some(GrantReason::Fresh), "{}", s.name);
        assert_eq!(r.candidates[1].verdict, Verdict::Skipped { skip_reason: SkipReason::OverLimit, eligible_at: None });
        let listed: Vec<String> =
            l.list(&ListQuery::default()).await.unwrap().into_iter().map(|e| e.subject_key).collect();
        assert_eq!(listed, ["A"], "{}: an over_limit subject was not touched", s.name);
        // in_flight while the lease of another run is live, with the lease's end.
        let lease_end = match r.candidates[0].verdict {
            Verdict::Granted { lease_until, .. } => lease_until,
            _ => unreachable!(),
        };
        assert_eq!(lease_end, T0 + HOUR, "{}: default lease 1 h", s.name);
        let r2 = l.claim(ClaimRequest::new("sc", ["A", "B"], 5).run_id("r2")).await.unwrap();
        assert_eq!(
            r2.candidates[0].verdict,
            Verdict::Skipped { skip_reason: SkipReason::InFlight, eligible_at: Some(lease_end) }
        );
        assert_eq!(r2.candidates[1].grant_reason(), Some(GrantReason::Fresh), "{}", s.name);
        // cooling_down with the time it becomes eligible.
        let token = r.candidates[0].token().unwrap();
        let rec = record_one(&l, "sc", "A", Outcome::Empty, token).await;
        let r3 = l.claim(ClaimRequest::new("sc", ["A"], 5)).await.unwrap();
        assert_eq!(
            r3.candidates[0].verdict,
            Verdict::Skipped { skip_reason: SkipReason::CoolingDown, eligible_at: rec.eligible_at }
        );
        // cooldown_expired once it ran out.
        c.advance(hours(6));
        let r4 = l.claim(ClaimRequest::new("sc", ["A"], 5)).await.unwrap();
        assert_eq!(r4.candidates[0].grant_reason(), Some(GrantReason::CooldownExpired), "{}", s.name);
    }
}

#[tokio::test]
async fn fingerprints_compare_byte_for_byte() {
    for s in stores().await {
        let c = clock();
        let l = s.open(Arc::new(c.clone())).await;
        let claim = |fp: Option<&str>| {
            let cand = match fp {
                Some(f) => Candidate::with_fingerprint("X", f),
                None => Candidate::new("X"),
            };
            l.claim(ClaimRequest::new("fp", [cand], 1))
        };
        let t = claim(Some("caf\u{e9}|open")).await.unwrap().candidates[0].token().unwrap();
        record_one(&l, "fp", "X", Outcome::Empty, t).await;
        // Same bytes, or omitted: still cooling down.
        assert_eq!(
            claim(Some("caf\u{e9}|open")).await.unwrap().candidates[0].skip_reason(),
            Some(SkipReason::CoolingDown)
        );
        assert_eq!(claim(None).await.unwrap().candidates[0].skip_reason(), Some(SkipReason::CoolingDown));
        // The same text in another Unicode normal form, another case or with a trailing space differs.
        for changed in ["cafe\u{301}|open", "CAF\u{c9}|open", "caf\u{e9}|open "] {
            let r = claim(Some(changed)).await.unwrap();
            assert_eq!(
                r.candidates[0].grant_reason(),
                Some(GrantReason::FingerprintChanged),
                "{}: {changed:?}",
                s.name
            );
            let t = r.candidates[0].token().unwrap();
            // Recorded with the original fingerprint again, so the next variant is compared with it.
            let mut rec = Record::new("X", Outcome::Empty, Some(t));
            rec.fingerprint = Some("caf\u{e9}|open".into());
            l.record("fp", None, vec![rec]).await.unwrap();
        }
        // The health check: per scope, the count of each last grant reason.
        for (i, key) in ["Y1", "Y2", "Y3"].iter().enumerate() {
            let t = l
                .claim(ClaimRequest::new("fp", [Candidate::with_fingerprint(*key, "v1")], 1))
                .await
                .unwrap()
                .candidates[0]
                .token()
                .unwrap();
            record_one(&l, "fp", key, Outcome::Empty, t).await;
            if i < 2 {
                let r = l.claim(ClaimRequest::new("fp", [Candidate::with_fingerprint(*key, "v2")], 1)).await.unwrap();
                assert_eq!(r.candidates[0].grant_reason(), Some(GrantReason::FingerprintChanged));
            }
        }
        let counts = l.grant_reason_counts("fp").await.unwrap();
        assert_eq!(counts, GrantReasonCounts { fresh: 1, cooldown_expired: 0, fingerprint_changed: 3 }, "{}", s.name);
        assert!(counts.fingerprints_look_unstable());
        assert_eq!(l.grant_reason_counts("other").await.unwrap(), GrantReasonCounts::default());
    }
}

#[tokio::test]
async fn an_expired_lease_is_reclaimed_and_the_old_attempt_abandoned() {
    for s in stores().await {
        let c = clock();
        let l = s.open(Arc::new(c.clone())).await;
        let first = claim_one(&l, "sc", "K", "run-1").await;
        let t1 = first.token().unwrap();
        c.advance(Duration::from_millis((HOUR - 1) as u64));
        assert_eq!(claim_one(&l, "sc", "K", "run-2").await.skip_reason(), Some(SkipReason::InFlight), "{}", s.name);
        c.advance(Duration::from_millis(1));
        let second = claim_one(&l, "sc", "K", "run-2").await;
        assert_eq!(second.grant_reason(), Some(GrantReason::CooldownExpired), "{}", s.name);
        assert!(second.token().is_some_and(|t2| t2 != t1), "{}: a new grant gets a new token", s.name);
        let entry = l.list(&ListQuery::default()).await.unwrap().remove(0);
        assert_eq!(
            (entry.last_outcome, entry.attempts, entry.state),
            (Some(AttemptOutcome::Abandoned), 2, EntryState::InFlight)
        );
        // The late record of the first run is rejected, by token and by run id, and writes nothing.
        let before = s.checksum("sc").await;
        let e = l.record("sc", None, vec![Record::new("K", Outcome::Productive, Some(t1))]).await.unwrap_err();
        assert_eq!(e.code(), "ledger_stale_token", "{}", s.name);
        let e = l.record("sc", Some("run-1"), vec![Record::new("K", Outcome::Productive, None)]).await.unwrap_err();
        assert_eq!(e.code(), "ledger_stale_token", "{}", s.name);
        assert_eq!(s.checksum("sc").await, before, "{}", s.name);
        // The reclaiming run records by its run id.
        let rec = l.record("sc", Some("run-2"), vec![Record::new("K", Outcome::Productive, None)]).await.unwrap();
        assert_eq!(rec.recorded[0].attempts, 2);
    }
}

#[tokio::test]
async fn released_drops_the_lease_without_counting_an_attempt() {
    for s in stores().await {
        let c = clock();
        let l = s.open(Arc::new(c.clone())).await;
        let t = claim_one(&l, "sc", "K", "r").await.token().unwrap();
        let rec = record_one(&l, "sc", "K", Outcome::Released, t).await;
        assert_eq!((rec.attempts, rec.misses, rec.eligible_at), (0, 0, None), "{}", s.name);
        let r = l.claim(ClaimRequest::new("sc", [Candidate::with_fingerprint("K", "old")], 1)).await.unwrap();
        let again = &r.candidates[0];
        assert_eq!(again.grant_reason(), Some(GrantReason::Fresh), "{}: never attempted", s.name);
        assert_ne!(again.token(), Some(t), "{}: tokens are never reused", s.name);
        let rec = record_one(&l, "sc", "K", Outcome::Empty, again.token().unwrap()).await;
        // Released during a cooldown: still cooling down until the same time.
        let r = l.claim(ClaimRequest::new("sc", [Candidate::with_fingerprint("K", "new")], 1)).await.unwrap();
        assert_eq!(r.candidates[0].grant_reason(), Some(GrantReason::FingerprintChanged));
        record_one(&l, "sc", "K", Outcome::Released, r.candidates[0].token().unwrap()).await;
        let entry = l.list(&ListQuery::default()).await.unwrap().remove(0);
        assert_eq!(
            (entry.state, entry.eligible_at, entry.attempts),
            (EntryState::CoolingDown, rec.eligible_at, 1),
            "{}",
            s.name
        );
    }
}

/// Claims in another scope, in a loop, while a batch is rejected.
fn background_claims(l: Ledger, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<u32> {
    tokio::spawn(async move {
        let mut n = 0u32;
        while !stop.load(Ordering::SeqCst) {
            let keys: Vec<String> = (0..20).map(|i| format!("bg-{n}-{i}")).collect();
            let r = l.claim(ClaimRequest::new("background", keys, 20).run_id("bg")).await.unwrap();
            let recs: Vec<Record> =
                r.granted().map(|g| Record::new(&g.subject_key, Outcome::Empty, g.token())).collect();
            l.record("background", None, recs).await.unwrap();
            n += 1;
        }
        n
    })
}

#[tokio::test]
async fn a_rejected_batch_writes_nothing() {
    for s in stores().await {
        let c = clock();
        let l = s.open(Arc::new(c.clone())).await;
        let r = l.claim(ClaimRequest::new("batch", ["A", "B", "C"], 3).run_id("run-1")).await.unwrap();
        let ta = r.candidates[0].token().unwrap();
        let tb = r.candidates[1].token().unwrap();
        // D was claimed by another run only; E by nobody.
        l.claim(ClaimRequest::new("batch", ["D"], 1).run_id("run-2")).await.unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let bg = background_claims(s.open(Arc::new(c.clone())).await, stop.clone());
        let before = s.checksum("batch").await;
        let good = json!({"subject_key": "A", "outcome": "productive", "token": ta});
        let cases = [
            (
                "unknown outcome",
                json!([good, {"subject_key": "B", "outcome": "done", "token": tb}]),
                "ledger_invalid_batch",
            ),
            ("missing subject_key", json!([good, {"outcome": "empty", "token": tb}]), "ledger_invalid_batch"),
            (
                "same subject twice",
                json!([good, {"subject_key": "A", "outcome": "empty", "token": ta}]),
                "ledger_invalid_batch",
            ),
            (
                "a token no claim carries",
                json!([good, {"subject_key": "B", "outcome": "empty", "token": tb ^ 1}]),
                "ledger_not_claimed",
            ),
            (
                "never claimed by this run",
                json!([good, {"subject_key": "D", "outcome": "empty"}]),
                "ledger_not_claimed",
            ),
            ("never claimed at all", json!([good, {"subject_key": "E", "outcome": "empty"}]), "ledger_not_claimed"),
        ];
        for (what, batch, code) in cases {
            let e = l.record_json("batch", Some("run-1"), &batch).await.unwrap_err();
            assert_eq!(e.code(), code, "{}: {what}: {e}", s.name);
            assert_eq!(s.checksum("batch").await, before, "{}: {what} wrote something", s.name);
        }
        // A stale token proper: B reclaimed by another run after its lease ran out.
        c.advance(hours(1));
        l.claim(ClaimRequest::new("batch", ["B"], 1).run_id("run-3")).await.unwrap();
        let before = s.checksum("batch").await;
        let batch = json!([good, {"subject_key": "B", "outcome": "empty", "token": tb}]);
        let e = l.record_json("batch", Some("run-1"), &batch).await.unwrap_err();
        assert_eq!(e.code(), "ledger_stale_token", "{}: {e}", s.name);
        assert_eq!(s.checksum("batch").await, before, "{}: stale token wrote something", s.name);
        stop.store(true, Ordering::SeqCst);
        assert!(bg.await.unwrap() > 0, "{}: the concurrent claims ran", s.name);
        // The good half alone goes through.
        l.record_json("batch", Some("run-1"), &json!([good])).await.unwrap();
        assert_ne!(s.checksum("batch").await, before);
    }
}

#[tokio::test]
async fn a_routine_is_pinned_to_the_scope_of_its_first_claim() {
    for s in stores().await {
        let l = s.open(Arc::new(clock())).await;
        assert_eq!(l.pinned_scope("rt").await.unwrap(), None);
        l.claim(ClaimRequest::new("po.tracking", ["A"], 1).run_id("run-1").routine_id("rt")).await.unwrap();
        assert_eq!(l.pinned_scope("rt").await.unwrap().as_deref(), Some("po.tracking"));
        let before = s.checksum("po.other").await;
        let e = l.claim(ClaimRequest::new("po.other", ["B"], 1).run_id("run-2").routine_id("rt")).await.unwrap_err();
        assert_eq!(e.code(), "ledger_scope_pinned", "{}", s.name);
        assert!(matches!(e, LedgerError::ScopePinned { ref pinned_scope, .. } if pinned_scope == "po.tracking"));
        assert_eq!(s.checksum("po.other").await, before, "{}: a refused claim wrote nothing", s.name);
        // Same scope is fine; another scope without the routine id is someone else's work.
        l.claim(ClaimRequest::new("po.tracking", ["B"], 1).run_id("run-2").routine_id("rt")).await.unwrap();
        l.claim(ClaimRequest::new("po.other", ["B"], 1).run_id("chat")).await.unwrap();
    }
}

#[tokio::test]
async fn list_filters_sorts_and_resolves_a_routine_in_two_hops() {
    for s in stores().await {
        let c = clock();
        let l = s.open(Arc::new(c.clone())).await;
        // The routine claims X and Y in its scope; someone in chat checks Z in the same scope, and W
        // elsewhere.
        let r = l.claim(ClaimRequest::new("po", ["X", "Y"], 2).run_id("run-1").routine_id("rt")).await.unwrap();
        l.record("po", Some("run-1"), vec![Record::new("X", Outcome::Empty, None)]).await.unwrap();
        c.advance(hours(1) / 2);
        let z = l.claim(ClaimRequest::new("po", ["Z"], 1).run_id("chat")).await.unwrap();
        l.record("po", None, vec![Record::new("Z", Outcome::Empty, z.candidates[0].token())]).await.unwrap();
        let w = l.claim(ClaimRequest::new("elsewhere", ["W"], 1)).await.unwrap();
        assert!(r.candidates.iter().all(|c| c.token().is_some()) && w.candidates[0].token().is_some());
        let keys = |v: Vec<LedgerEntry>| v.into_iter().map(|e| e.subject_key).collect::<Vec<_>>();
        let routine = ListQuery { routine_id: Some("rt".into()), ..Default::default() };
        // Soonest eligible first: Y's lease ends at T0+1h, X cools until T0+6h, Z until T0+6.5h.
        assert_eq!(keys(l.list(&routine).await.unwrap()), ["Y", "X", "Z"], "{}: two hops include the chat row", s.name);
        let entries = l.list(&routine).await.unwrap();
        assert_eq!(entries[0].state, EntryState::InFlight);
        assert_eq!(entries[0].eligible_at, Some(T0 + HOUR));
        assert_eq!(entries[2].routine_id, None, "{}: Z was written outside the routine", s.name);
        assert_eq!(entries[1].last_grant_reason, Some(GrantReason::Fresh));
        assert_eq!(keys(l.list(&ListQuery::default()).await.unwrap()), ["Y", "W", "X", "Z"], "{}", s.name);
        let eligible = ListQuery { state: ListFilter::Eligible, ..Default::default() };
        assert_eq!(keys(l.list(&eligible).await.unwrap()), Vec::<String>::new(), "{}: W is in flight", s.name);
        c.advance(Duration::from_millis((5 * HOUR + 3 * HOUR / 4) as u64));
        assert_eq!(keys(l.list(&eligible).await.unwrap()), ["Y", "W", "X"], "{}", s.name);
        let suppressed = ListQuery { scope: Some("po".into()), state: ListFilter::Suppressed, ..Default::default() };
        assert_eq!(keys(l.list(&suppressed).await.unwrap()), ["Z"], "{}", s.name);
    }
}

#[tokio::test]
async fn backlog_counts_workable_subjects_and_drains_stop_on_each_condition() {
    for s in stores().await {
        let c = clock();
        let l = s.open(Arc::new(c.clone())).await;
        let queue: Vec<String> = (0..10).map(|i| format!("S{i}")).collect();
        let limits = RoutineLimits { parallel_limit: 3, daily_cap: Some(10), running: 1, started_today: 1 };
        // Nothing claimed yet: all ten workable; ceil(10 / 3) = 4 capped by the parallel limit to 2.
        let report = l.report_backlog("rt", Some("run-0"), &queue, 3, &limits).await.unwrap();
        assert_eq!((report.workable, report.extra_runs, report.scope.clone()), (10, 2, None), "{}", s.name);
        // Two in flight, three cooling down.
        let r = l.claim(ClaimRequest::new("q", &queue[..5], 5).run_id("run-1").routine_id("rt")).await.unwrap();
        let recs: Vec<Record> =
            r.candidates[2..].iter().map(|g| Record::new(&g.subject_key, Outcome::Empty, g.token())).collect();
        l.record("q", Some("run-1"), recs).await.unwrap();
        let report = l.report_backlog("rt", Some("run-1"), &queue, 2, &limits).await.unwrap();
        assert_eq!((report.workable, report.extra_runs), (5, 2), "{}", s.name);
        let tight = RoutineLimits { parallel_limit: 8, daily_cap: Some(3), running: 1, started_today: 2 };
        assert_eq!(l.report_backlog("rt", Some("run-1"), &queue, 1, &tight).await.unwrap().extra_runs, 1);
        let single = RoutineLimits::default();
        assert_eq!(l.report_backlog("rt", Some("run-1"), &queue, 1, &single).await.unwrap().extra_runs, 0);
        // A run that claimed and reported: the drain goes on with the next run.
        let d = l.drain_decision("rt", "run-1", &limits).await.unwrap();
        assert_eq!(d, DrainDecision { stop: None, start_runs: 1 }, "{}", s.name);
        // A run that finished without reporting.
        l.claim(ClaimRequest::new("q", &queue[5..6], 1).run_id("run-2").routine_id("rt")).await.unwrap();
        assert_eq!(l.drain_decision("rt", "run-2", &limits).await.unwrap().stop, Some(DrainStop::RunDidNotReport));
        // A run that found the queue empty: claimed nothing.
        assert_eq!(l.drain_decision("rt", "run-3", &limits).await.unwrap().stop, Some(DrainStop::QueueEmpty));
        // The latest report is more than an hour old.
        c.advance(Duration::from_millis(HOUR as u64 + 1));
        assert_eq!(l.drain_decision("rt", "run-1", &limits).await.unwrap().stop, Some(DrainStop::ReportStale));
        // A queue made only of cooldowns and leases counts 0 and starts nothing.
        let cooling: Vec<String> = queue[2..5].to_vec();
        let report = l.report_backlog("rt", Some("run-1"), &cooling, 1, &limits).await.unwrap();
        assert_eq!((report.workable, report.extra_runs), (0, 0), "{}", s.name);
        assert_eq!(l.drain_decision("rt", "run-1", &limits).await.unwrap().stop, Some(DrainStop::NothingWorkable));
        let e = l.report_backlog("rt", None, &queue, 0, &limits).await.unwrap_err();
        assert_eq!(e.code(), "ledger_invalid_argument");
    }
}

#[tokio::test]
async fn open_applies_migrations_once_and_refuses_bad_urls() {
    for s in stores().await {
        let l = s.open(Arc::new(clock())).await;
        l.claim(ClaimRequest::new("m", ["A"], 1)).await.unwrap();
        let again = s.open(Arc::new(clock())).await;
        assert_eq!(again.list(&ListQuery::default()).await.unwrap().len(), 1, "{}: reopening keeps the data", s.name);
        let fast =
            Ledger::open_with(&s.url, LedgerOptions { durability: Durability::Fast, ..LedgerOptions::default() }).await;
        assert!(fast.is_ok(), "{}: the fast mode opens", s.name);
    }
    for bad in ["mysql://x", "ledger.db", "sqlite://"] {
        assert_eq!(Ledger::open(bad).await.unwrap_err().code(), "ledger_invalid_argument", "{bad}");
    }
    let dup = Ledger::open(&sqlite_store().await.url).await;
    let e = dup.unwrap().claim(ClaimRequest::new("s", ["A", "A"], 2)).await.unwrap_err();
    assert_eq!(e.code(), "ledger_invalid_argument");
}

/// Issue 12 item 9: a stranger who guesses tokens cannot record (or release) a live claim of another
/// run; the owner's record still goes through; each refusal says what happened.
#[tokio::test]
async fn a_stranger_cannot_guess_a_claim_token() {
    for s in stores().await {
        let c = clock();
        let l = s.open(Arc::new(c.clone())).await;
        let owner = claim_one(&l, "sc", "K", "owner").await;
        let t = owner.token().unwrap();
        let before = s.checksum("sc").await;
        // The guesses an attacker tries first (the old tokens were attempt numbers), and neighbours
        // of the real one.
        let guesses: Vec<i64> = (0..=200).chain([t - 1, t + 1, t ^ 1, -t, i64::MAX]).filter(|&g| g != t).collect();
        for g in &guesses {
            for run in [None, Some("stranger")] {
                let e = l.record("sc", run, vec![Record::new("K", Outcome::Released, Some(*g))]).await.unwrap_err();
                assert_eq!(e.code(), "ledger_not_claimed", "{}: guess {g}: {e}", s.name);
                assert!(e.to_string().contains("no claim of it carries this token"), "{}: {e}", s.name);
            }
        }
        // Without a token, another run id is not the run that claimed.
        let e = l.record("sc", Some("stranger"), vec![Record::new("K", Outcome::Released, None)]).await.unwrap_err();
        assert!(e.to_string().contains("this run never claimed it"), "{}: {e}", s.name);
        // The right token from another run.
        let e = l.record("sc", Some("stranger"), vec![Record::new("K", Outcome::Released, Some(t))]).await.unwrap_err();
        assert!(e.to_string().contains("claimed by another run"), "{}: {e}", s.name);
        assert_eq!(s.checksum("sc").await, before, "{}: a refused guess wrote something", s.name);
        assert_eq!(
            claim_one(&l, "sc", "K", "other").await.skip_reason(),
            Some(SkipReason::InFlight),
            "{}: the claim is still live",
            s.name
        );
        // Control: the owner's own token records (so the refusals above are the fence, not a broken call).
        let rec = l.record("sc", Some("owner"), vec![Record::new("K", Outcome::Empty, Some(t))]).await.unwrap();
        assert_eq!(rec.recorded[0].misses, 1, "{}", s.name);
        // Recording it twice is refused as what it is.
        let e = l.record("sc", Some("owner"), vec![Record::new("K", Outcome::Empty, Some(t))]).await.unwrap_err();
        assert_eq!(e.code(), "ledger_not_claimed", "{}", s.name);
        assert!(e.to_string().contains("already recorded (empty)"), "{}: {e}", s.name);
    }
}

/// Issue 12 item 9: SQLite and PostgreSQL accept and refuse the same inputs, checked at the API:
/// a NUL byte anywhere and keys past the limit are refused by name and write nothing.
#[tokio::test]
async fn both_stores_accept_and_refuse_the_same_inputs() {
    let long_key = "k".repeat(513);
    let max_key = "k".repeat(512);
    let long_fp = "f".repeat(4097);
    for s in stores().await {
        let l = s.open(Arc::new(clock())).await;
        let cases: Vec<(&str, ClaimRequest, &str)> = vec![
            ("NUL in scope", ClaimRequest::new("s\0c", ["K"], 1), "scope contains a NUL byte"),
            ("NUL in key", ClaimRequest::new("sc", ["K\0"], 1), "subject_key contains a NUL byte"),
            ("NUL in run id", ClaimRequest::new("sc", ["K"], 1).run_id("r\0"), "run_id contains a NUL byte"),
            ("NUL in routine id", ClaimRequest::new("sc", ["K"], 1).routine_id("\0"), "routine_id contains a NUL byte"),
            (
                "NUL in fingerprint",
                ClaimRequest::new("sc", [Candidate::with_fingerprint("K", "a\0b")], 1),
                "fingerprint of 'K' contains a NUL byte",
            ),
            ("long key", ClaimRequest::new("sc", [long_key.as_str()], 1), "513 bytes long; the most is 512"),
            (
                "long fingerprint",
                ClaimRequest::new("sc", [Candidate::with_fingerprint("K", long_fp.clone())], 1),
                "4097 bytes long; the most is 4096",
            ),
        ];
        for (what, req, says) in cases {
            let e = l.claim(req).await.unwrap_err();
            assert_eq!(e.code(), "ledger_invalid_argument", "{}: {what}: {e}", s.name);
            assert!(e.to_string().contains(says), "{}: {what}: {e}", s.name);
        }
        assert!(l.list(&ListQuery::default()).await.unwrap().is_empty(), "{}: nothing was written", s.name);
        let e = l.record("sc", Some("r\0"), vec![Record::new("K", Outcome::Empty, Some(1))]).await.unwrap_err();
        assert!(e.to_string().contains("run_id contains a NUL byte"), "{}: {e}", s.name);
        let e = l.record("sc", None, vec![Record::new("K\0", Outcome::Empty, Some(1))]).await.unwrap_err();
        assert_eq!(e.code(), "ledger_invalid_batch", "{}: {e}", s.name);
        let e = l.list(&ListQuery { scope: Some("\0".into()), ..Default::default() }).await.unwrap_err();
        assert_eq!(e.code(), "ledger_invalid_argument", "{}: {e}", s.name);
        // Control: the longest key and a non-ASCII fingerprint are accepted by both stores alike.
        let r = l
            .claim(ClaimRequest::new("sc", [Candidate::with_fingerprint(max_key.clone(), "caf\u{e9} \u{1F600}")], 1))
            .await
            .unwrap();
        let t = r.candidates[0].token().unwrap();
        l.record("sc", None, vec![Record::new(max_key.clone(), Outcome::Productive, Some(t))]).await.unwrap();
        let listed = l.list(&ListQuery::default()).await.unwrap();
        assert_eq!(listed[0].subject_key, max_key, "{}", s.name);
    }
}
