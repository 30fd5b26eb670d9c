//! Contention: 8 writers, each its own client (own connection pool), claiming from a hot set of 200
//! subjects with short leases for 20 seconds (`AMBIT_LEDGER_CONTENTION_SECS` overrides), on both
//! stores. Every grant is logged in the claim's own transaction (the attempts table); each writer also
//! notes when it held each subject. The checker finds no two writers holding one subject at once, and
//! catches a deliberately broken claim (read, then write in a second transaction) as a negative control.

mod ledger_support;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use ambit::ledger::rules::{self, Eligibility, ItemState};
use ambit::ledger::*;
use ledger_support::*;
use sqlx::{Connection, Row};

const WRITERS: usize = 8;
const HOT_SET: usize = 200;
const LEASE_MS: i64 = 150;

/// A stretch of time during which one writer held one subject: from the claim's acknowledgement to
/// the start of its record (or the end of its lease, whichever is first).
#[derive(Debug, Clone)]
struct Hold {
    subject: String,
    token: i64,
    writer: usize,
    start: i64,
    end: i64,
}

fn now_ms() -> i64 {
    SystemClock.now_ms()
}

/// Tiny deterministic generator, so a failure can be replayed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Overlapping holds of one subject by two writers.
fn overlaps(holds: &[Hold]) -> Vec<(Hold, Hold)> {
    let mut by_subject: HashMap<&str, Vec<&Hold>> = HashMap::new();
    for h in holds {
        by_subject.entry(&h.subject).or_default().push(h);
    }
    let mut found = Vec::new();
    for hs in by_subject.values_mut() {
        hs.sort_by_key(|h| (h.start, h.end));
        let mut longest: Option<&Hold> = None;
        for h in hs.iter() {
            if let Some(prev) = longest
                && h.start < prev.end
            {
                found.push((prev.clone(), (*h).clone()));
            }
            if longest.is_none_or(|p| h.end > p.end) {
                longest = Some(h);
            }
        }
    }
    found
}

/// The correct claim: the ledger's.
/// What a writer claims: its scope, how many candidates per claim, the limit, and the subjects they are
/// drawn from.
#[derive(Clone, Copy)]
struct Workload {
    scope: &'static str,
    candidates: usize,
    limit: usize,
    /// The subject key for a random number: a fixed hot set, or a window sliding over new keys.
    key: fn(&mut Rng) -> String,
}

/// 10 candidates from a hot set of 200 subjects, 3 granted at most.
const HOT: Workload =
    Workload { scope: "hot", candidates: 10, limit: 3, key: |rng| format!("H{:03}", rng.below(HOT_SET)) };

/// Every candidate can be granted (limit = candidates: the claim's fresh-subject path, migration 0004),
/// drawn from a window of 24 keys that slides to new keys every 10 ms: every writer claims the same
/// new subjects at about the same moment, beside subjects that exist and are held or cooling.
const FRESH: Workload = Workload {
    scope: "fresh",
    candidates: 4,
    limit: 4,
    key: |rng| format!("F{:09}", (now_ms() / 10) as usize + rng.below(24)),
};

async fn writer(url: String, id: usize, until: Instant, w: Workload) -> Vec<Hold> {
    let ledger = Ledger::open(&url).await.unwrap();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (id as u64 + 1));
    let mut holds = Vec::new();
    while Instant::now() < until {
        let mut candidates: Vec<Candidate> = Vec::new();
        while candidates.len() < w.candidates {
            let key = (w.key)(&mut rng);
            if candidates.iter().all(|c| c.subject_key != key) {
                // A fingerprint that changes now and then lets cooling subjects back in.
                candidates.push(Candidate::with_fingerprint(key, format!("v{}", rng.below(4))));
            }
        }
        let mut req = ClaimRequest::new(w.scope, candidates, w.limit).run_id(format!("w{id}"));
        req.lease_ms = LEASE_MS;
        let claim = ledger.claim(req).await.unwrap();
        let acked = now_ms();
        let mut records = Vec::new();
        for g in claim.granted() {
            let Verdict::Granted { token, lease_until, .. } = g.verdict else { unreachable!() };
            holds.push(Hold { subject: g.subject_key.clone(), token, writer: id, start: acked, end: lease_until });
            match rng.below(10) {
                0..=4 => records.push(Record::new(&g.subject_key, Outcome::Released, Some(token))),
                5 => records.push(Record::new(&g.subject_key, Outcome::Empty, Some(token))),
                6 => records.push(Record::new(&g.subject_key, Outcome::Productive, Some(token))),
                _ => {} // left to expire: the next claim abandons it
            }
        }
        if !records.is_empty() {
            tokio::time::sleep(Duration::from_millis(rng.below(5) as u64)).await;
            let started = now_ms();
            for h in holds.iter_mut().rev().take(claim.granted().count()) {
                if records.iter().any(|r| r.subject_key == h.subject) {
                    h.end = h.end.min(started);
                }
            }
            // A record can be stale when its lease ran out and another writer took the subject.
            match ledger.record(w.scope, Some(&format!("w{id}")), records).await {
                Ok(_) => {}
                Err(LedgerError::StaleToken { .. }) => {}
                Err(e) => panic!("writer {id}: {e}"),
            }
        }
    }
    holds
}

/// The broken claim: eligibility read in one transaction, the grant written in another, so two
/// writers can both see a subject free and both take it.
async fn broken_writer(url: String, id: usize, until: Instant) -> Vec<Hold> {
    let sqlite = url.starts_with("sqlite://");
    let mut rng = Rng(0xD1B5_4A32_D192_ED03 ^ (id as u64 + 1));
    let mut holds = Vec::new();
    let mut pg = if sqlite { None } else { Some(sqlx::PgConnection::connect(&url).await.unwrap()) };
    let mut lite = if sqlite { Some(sqlx::SqliteConnection::connect(&url).await.unwrap()) } else { None };
    let select = "SELECT attempts, claim_token, lease_until, eligible_at FROM ambit_ledger_items WHERE scope = 'broken' AND subject_key = $1";
    let grant = "INSERT INTO ambit_ledger_items (scope, subject_key, attempts, claim_token, lease_until, lease_run_id, last_grant_reason) \
                 VALUES ('broken', $1, 1, 1, $2, $3, 'fresh') ON CONFLICT (scope, subject_key) DO UPDATE SET \
                 claim_token = ambit_ledger_items.claim_token + 1, attempts = ambit_ledger_items.attempts + 1, \
                 lease_until = $2, lease_run_id = $3 RETURNING claim_token";
    while Instant::now() < until {
        let key = format!("H{:03}", rng.below(HOT_SET / 10));
        let now = now_ms();
        let row: Option<(i64, i64, Option<i64>, Option<i64>)> = match (&mut pg, &mut lite) {
            (Some(c), _) => sqlx::query_as(select).bind(&key).fetch_optional(c).await.unwrap(),
            (_, Some(c)) => sqlx::query_as(select).bind(&key).fetch_optional(c).await.unwrap(),
            _ => unreachable!(),
        };
        let state = row.map(|(attempts, claim_token, lease_until, eligible_at)| ItemState {
            attempts,
            claim_token,
            lease_until,
            eligible_at,
            ..ItemState::default()
        });
        if !matches!(rules::eligibility(state.as_ref(), None, now), Eligibility::Eligible { .. }) {
            continue;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
        let lease_until = now + LEASE_MS;
        let token: i64 = match (&mut pg, &mut lite) {
            (Some(c), _) => sqlx::query(grant)
                .bind(&key)
                .bind(lease_until)
                .bind(format!("b{id}"))
                .fetch_one(c)
                .await
                .unwrap()
                .get(0),
            (_, Some(c)) => sqlx::query(grant)
                .bind(&key)
                .bind(lease_until)
                .bind(format!("b{id}"))
                .fetch_one(c)
                .await
                .unwrap()
                .get(0),
            _ => unreachable!(),
        };
        holds.push(Hold { subject: key, token, writer: id, start: now_ms(), end: lease_until });
    }
    holds
}

/// The grant log (attempts table): every grant a writer saw is there, once, numbered consecutively
/// per subject.
async fn check_log(store: &TestStore, scope: &str, holds: &[Hold]) -> usize {
    let sql = "SELECT subject_key, token, run_id, claim_secret FROM ambit_ledger_attempts WHERE scope = $1 ORDER BY subject_key, token";
    let rows: Vec<(String, i64, Option<String>, i64)> = if store.is_sqlite() {
        let mut c = sqlx::SqliteConnection::connect(&store.url).await.unwrap();
        sqlx::query_as(sql).bind(scope).fetch_all(&mut c).await.unwrap()
    } else {
        let mut c = sqlx::PgConnection::connect(&store.url).await.unwrap();
        sqlx::query_as(sql).bind(scope).fetch_all(&mut c).await.unwrap()
    };
    let mut logged: HashMap<(String, i64), String> = HashMap::new();
    let mut last: HashMap<String, i64> = HashMap::new();
    for (subject, number, run_id, secret) in rows {
        let prev = last.insert(subject.clone(), number).unwrap_or(0);
        assert_eq!(number, prev + 1, "{}: grants of {subject} are numbered consecutively", store.name);
        // The writer saw the grant's unguessable claim token, which the log keeps beside its number.
        logged.insert((subject, secret), run_id.unwrap_or_default());
    }
    assert_eq!(logged.len(), holds.len(), "{}: every grant is logged, and only those", store.name);
    for h in holds {
        assert_eq!(logged.get(&(h.subject.clone(), h.token)), Some(&format!("w{}", h.writer)), "{}: {h:?}", store.name);
    }
    logged.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_writers_on_a_hot_set_never_hold_one_subject_at_once() {
    let secs: u64 = std::env::var("AMBIT_LEDGER_CONTENTION_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(20);
    for store in stores().await {
        // Migrations first, once.
        drop(Ledger::open(&store.url).await.unwrap());
        let until = Instant::now() + Duration::from_secs(secs);
        let tasks: Vec<_> = (0..WRITERS).map(|id| tokio::spawn(writer(store.url.clone(), id, until, HOT))).collect();
        let mut holds = Vec::new();
        for t in tasks {
            holds.extend(t.await.unwrap());
        }
        let logged = check_log(&store, "hot", &holds).await;
        let found = overlaps(&holds);
        eprintln!(
            "contention {}: {WRITERS} writers, {HOT_SET} subjects, {secs} s: {} grants ({} logged), {} overlapping holds",
            store.name,
            holds.len(),
            logged,
            found.len()
        );
        assert!(holds.len() > 100, "{}: the writers made progress ({} grants)", store.name, holds.len());
        assert!(found.is_empty(), "{}: overlapping holds: {:?}", store.name, &found[..found.len().min(5)]);
        if store.is_sqlite() {
            let mut c = sqlx::SqliteConnection::connect(&store.url).await.unwrap();
            let ok: String = sqlx::query_scalar("PRAGMA integrity_check").fetch_one(&mut c).await.unwrap();
            assert_eq!(ok, "ok");
        }

        // The negative control: the same checker catches a claim that is not atomic.
        let until = Instant::now() + Duration::from_secs(3);
        let tasks: Vec<_> = (0..WRITERS).map(|id| tokio::spawn(broken_writer(store.url.clone(), id, until))).collect();
        let mut broken = Vec::new();
        for t in tasks {
            broken.extend(t.await.unwrap());
        }
        let caught = overlaps(&broken);
        eprintln!(
            "contention {} (broken claim, 3 s): {} grants, {} overlapping holds caught",
            store.name,
            broken.len(),
            caught.len()
        );
        assert!(!caught.is_empty(), "{}: the checker must catch the broken claim", store.name);
    }
}

/// The claim's fresh-subject path (migration 0004: a claim that can grant every candidate inserts a new
/// subject's row already granted): 8 writers claim 4 candidates each with limit 4 from a window sliding
/// over new keys, so new subjects are claimed by several writers at once beside existing, held and
/// cooling ones. No claim fails (a deadlock would), every grant is logged once and numbered
/// consecutively, and no two writers hold one subject at once. The negative control is the same checker
/// catching `broken_writer` in the test above.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_writers_claiming_new_subjects_at_once_never_hold_one_twice() {
    let secs: u64 = std::env::var("AMBIT_LEDGER_CONTENTION_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(10);
    for store in stores().await {
        drop(Ledger::open(&store.url).await.unwrap());
        let until = Instant::now() + Duration::from_secs(secs);
        let tasks: Vec<_> = (0..WRITERS).map(|id| tokio::spawn(writer(store.url.clone(), id, until, FRESH))).collect();
        let mut holds = Vec::new();
        for t in tasks {
            holds.extend(t.await.unwrap());
        }
        let logged = check_log(&store, FRESH.scope, &holds).await;
        let found = overlaps(&holds);
        let regranted = {
            let mut seen = std::collections::HashSet::new();
            holds.iter().filter(|h| !seen.insert(h.subject.clone())).count()
        };
        eprintln!(
            "fresh contention {}: {WRITERS} writers, {secs} s: {} grants ({} logged, {regranted} of subjects granted before), {} overlapping holds",
            store.name,
            holds.len(),
            logged,
            found.len()
        );
        assert!(holds.len() > 100, "{}: the writers made progress ({} grants)", store.name, holds.len());
        assert!(regranted > 0, "{}: existing subjects were claimed beside new ones", store.name);
        assert!(found.is_empty(), "{}: overlapping holds: {:?}", store.name, &found[..found.len().min(5)]);
    }
}
