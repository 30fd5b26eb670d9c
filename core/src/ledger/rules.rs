//! The ledger's rules as plain functions over plain data (SPEC §9): the cooldown ladder, claim
//! verdicts, record fencing and outcomes, entry states, backlog and drain decisions. The stores call
//! these; nothing here does I/O. Times are milliseconds since the Unix epoch.

use serde::{Deserialize, Serialize};

use super::error::LedgerError;
use super::types::{AttemptOutcome, EntryState, GrantReason, Outcome, SkipReason, Verdict};

/// An hour, in milliseconds.
pub const HOUR_MS: i64 = 3_600_000;
/// A day, in milliseconds.
pub const DAY_MS: i64 = 24 * HOUR_MS;
/// The default lease of a claim: 1 h.
pub const DEFAULT_LEASE_MS: i64 = HOUR_MS;
/// The cooldown ladder: 6 h, 12 h, 24 h, 48 h, 96 h, then capped at 7 days.
pub const COOLDOWN_LADDER_MS: [i64; 5] = [6 * HOUR_MS, 12 * HOUR_MS, 24 * HOUR_MS, 48 * HOUR_MS, 96 * HOUR_MS];
/// The longest cooldown: a week.
pub const COOLDOWN_CAP_MS: i64 = 7 * DAY_MS;
/// After this many consecutive misses the ledger suggests escalating to a human.
pub const ESCALATE_AFTER_MISSES: i64 = 5;
/// A drain stops when its latest backlog report is older than this (1 h).
pub const REPORT_MAX_AGE_MS: i64 = HOUR_MS;

/// The cooldown after an attempt, given the consecutive misses counted after it (0 after a productive
/// attempt, which waits the first step).
pub fn cooldown_ms(misses: i64) -> i64 {
    if misses <= 0 {
        return COOLDOWN_LADDER_MS[0];
    }
    match COOLDOWN_LADDER_MS.get((misses - 1) as usize) {
        Some(&ms) => ms,
        None => COOLDOWN_CAP_MS,
    }
}

/// Whether the ledger suggests a human look at a subject with this many consecutive misses.
pub fn should_escalate(misses: i64) -> bool {
    misses >= ESCALATE_AFTER_MISSES
}

/// What a store knows about one subject in a scope.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ItemState {
    /// Attempts recorded.
    pub attempts: i64,
    /// Consecutive unproductive attempts.
    pub misses: i64,
    /// The number of the subject's latest grant.
    pub claim_token: i64,
    /// Set while a grant is open (claimed, not yet recorded), live or expired.
    pub lease_until: Option<i64>,
    /// The run holding the open grant, if it named one.
    pub lease_run_id: Option<String>,
    /// When it becomes eligible again (its cooldown's end).
    pub eligible_at: Option<i64>,
    /// The fingerprint last recorded.
    pub fingerprint: Option<String>,
    /// How its last attempt ended.
    pub last_outcome: Option<AttemptOutcome>,
}

/// Whether a candidate may be granted now, and why; before the limit is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Eligibility {
    /// Eligible; `abandons` is the token of an expired open grant that this grant supersedes.
    Eligible {
        /// Why it may be granted.
        reason: GrantReason,
        /// The token of the expired open grant this grant supersedes.
        abandons: Option<i64>,
    },
    /// Claimed by a run whose lease is live.
    InFlight {
        /// When the lease ends.
        until: i64,
    },
    /// Cooling down.
    CoolingDown {
        /// When the cooldown ends.
        until: i64,
    },
}

/// The claim rule for one candidate. Fingerprints are compared byte for byte, and only when both the
/// candidate and the ledger have one: omitting a fingerprint is safe.
pub fn eligibility(state: Option<&ItemState>, fingerprint: Option<&str>, now: i64) -> Eligibility {
    let Some(s) = state else {
        return Eligibility::Eligible { reason: GrantReason::Fresh, abandons: None };
    };
    if let Some(until) = s.lease_until {
        if until > now {
            return Eligibility::InFlight { until };
        }
        // The lease of a run that never recorded has run out.
        return Eligibility::Eligible { reason: GrantReason::CooldownExpired, abandons: Some(s.claim_token) };
    }
    if s.attempts == 0 {
        return Eligibility::Eligible { reason: GrantReason::Fresh, abandons: None };
    }
    match s.eligible_at {
        Some(until) if until > now => {
            let changed =
                matches!((fingerprint, s.fingerprint.as_deref()), (Some(a), Some(b)) if a.as_bytes() != b.as_bytes());
            if changed {
                Eligibility::Eligible { reason: GrantReason::FingerprintChanged, abandons: None }
            } else {
                Eligibility::CoolingDown { until }
            }
        }
        _ => Eligibility::Eligible { reason: GrantReason::CooldownExpired, abandons: None },
    }
}

/// Labels candidates (in priority order) given their eligibility: eligible ones are granted until the
/// limit is reached, the rest of the eligible ones are `over_limit`. `grant` produces the granted verdict
/// (token and lease) for a candidate index.
pub fn label(
    eligibilities: &[Eligibility],
    limit: usize,
    mut grant: impl FnMut(usize, GrantReason) -> Verdict,
) -> Vec<Verdict> {
    let mut granted = 0;
    eligibilities
        .iter()
        .enumerate()
        .map(|(i, e)| match e {
            Eligibility::InFlight { until } => {
                Verdict::Skipped { skip_reason: SkipReason::InFlight, eligible_at: Some(*until) }
            }
            Eligibility::CoolingDown { until } => {
                Verdict::Skipped { skip_reason: SkipReason::CoolingDown, eligible_at: Some(*until) }
            }
            Eligibility::Eligible { reason, .. } => {
                if granted < limit {
                    granted += 1;
                    grant(i, *reason)
                } else {
                    Verdict::Skipped { skip_reason: SkipReason::OverLimit, eligible_at: None }
                }
            }
        })
        .collect()
}

/// Labels a candidate that a locking store (PostgreSQL, `SKIP LOCKED`) did not grant although its
/// snapshot looked eligible: if the claim filled its limit before reaching it, it is `over_limit`;
/// otherwise another run held its row locked, so it is `in_flight`.
pub fn label_not_granted(
    snapshot: Eligibility,
    position: usize,
    granted: usize,
    limit: usize,
    last_granted: Option<usize>,
) -> Verdict {
    match snapshot {
        Eligibility::InFlight { until } => {
            Verdict::Skipped { skip_reason: SkipReason::InFlight, eligible_at: Some(until) }
        }
        Eligibility::CoolingDown { until } => {
            Verdict::Skipped { skip_reason: SkipReason::CoolingDown, eligible_at: Some(until) }
        }
        Eligibility::Eligible { .. } => {
            if granted >= limit && last_granted.is_none_or(|last| position > last) {
                Verdict::Skipped { skip_reason: SkipReason::OverLimit, eligible_at: None }
            } else {
                Verdict::Skipped { skip_reason: SkipReason::InFlight, eligible_at: None }
            }
        }
    }
}

/// Why a record is refused by the fence: what really happened to the claim it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fence {
    /// The claim's lease ran out and another run has claimed the subject since.
    Stale,
    /// The subject has no open claim the record can name; the text says why.
    NotClaimed(String),
}

/// The grant a record names, as the store logged it: found by the record's claim token or, without
/// one, the latest grant made to the batch's run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantFacts {
    /// The grant's number for this subject (1 for the first grant).
    pub number: i64,
    /// The run the grant was made to.
    pub run_id: Option<String>,
    /// `None` while the grant is open; else `abandoned` or the outcome recorded.
    pub outcome: Option<String>,
}

/// The record fence. A record names its grant by the claim token (unguessable) or by the run that
/// claimed; the named grant must be the subject's open one, and a run id given with a token must be
/// the run the grant was made to. Every refusal says what happened.
pub fn fence(
    state: Option<&ItemState>,
    grant: Option<&GrantFacts>,
    token_given: bool,
    run_id: Option<&str>,
) -> Result<(), Fence> {
    let Some(s) = state.filter(|s| s.claim_token > 0) else {
        return Err(Fence::NotClaimed("it was never claimed in this scope".into()));
    };
    let Some(g) = grant else {
        return Err(Fence::NotClaimed(if token_given {
            "no claim of it carries this token".into()
        } else {
            "this run never claimed it".into()
        }));
    };
    match g.outcome.as_deref() {
        Some("abandoned") => return Err(Fence::Stale),
        Some(outcome) => return Err(Fence::NotClaimed(format!("its claim was already recorded ({outcome})"))),
        None => {}
    }
    if g.number != s.claim_token || s.lease_until.is_none() {
        // An open grant that is not the subject's latest one was superseded.
        return Err(Fence::Stale);
    }
    if let Some(r) = run_id
        && g.run_id.as_deref().is_some_and(|owner| owner != r)
    {
        return Err(Fence::NotClaimed("it was claimed by another run".into()));
    }
    Ok(())
}

/// A fresh claim token: unguessable (53 random bits, so it survives a JavaScript number), never 0.
pub fn new_claim_token() -> Result<i64, LedgerError> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| LedgerError::Store(format!("no randomness for a claim token: {e}")))?;
    let n = (u64::from_le_bytes(bytes) >> 11) as i64;
    Ok(if n == 0 { 1 } else { n })
}

/// The longest scope, subject key, run id, routine id (bytes) and fingerprint the ledger accepts: the
/// same in every store (PostgreSQL indexes a key of up to about 2,700 bytes).
pub const MAX_KEY_BYTES: usize = 512;
/// The longest fingerprint the ledger accepts, in bytes.
pub const MAX_FINGERPRINT_BYTES: usize = 4096;

/// Checks named keys (scope, run and routine ids) with [`check_text`]; absent ones pass.
pub fn check_keys(keys: &[(&str, Option<&str>)]) -> Result<(), LedgerError> {
    for (what, value) in keys {
        if let Some(v) = value {
            check_text(what, v, MAX_KEY_BYTES).map_err(LedgerError::InvalidArgument)?;
        }
    }
    Ok(())
}

/// [`check_keys`], and each key given must not be empty.
pub fn check_required(keys: &[(&str, Option<&str>)]) -> Result<(), LedgerError> {
    if let Some((what, _)) = keys.iter().find(|(_, v)| v.is_some_and(str::is_empty)) {
        return Err(LedgerError::InvalidArgument(format!("{what} is empty")));
    }
    check_keys(keys)
}

/// One text input checked the same way for every store: no NUL byte (PostgreSQL text cannot hold
/// one) and at most `max` bytes.
pub fn check_text(what: &str, value: &str, max: usize) -> Result<(), String> {
    if value.contains('\0') {
        return Err(format!("{what} contains a NUL byte"));
    }
    if value.len() > max {
        return Err(format!("{what} is {} bytes long; the most is {max}", value.len()));
    }
    Ok(())
}

/// The subject's state after a record is applied.
pub fn apply_outcome(state: &ItemState, outcome: Outcome, now: i64) -> ItemState {
    let mut next = ItemState { lease_until: None, lease_run_id: None, ..state.clone() };
    match outcome {
        Outcome::Productive => {
            next.misses = 0;
            next.eligible_at = Some(now + cooldown_ms(0));
            next.last_outcome = Some(AttemptOutcome::Productive);
        }
        Outcome::Empty | Outcome::Failed => {
            next.misses = state.misses + 1;
            next.eligible_at = Some(now + cooldown_ms(next.misses));
            next.last_outcome =
                Some(if outcome == Outcome::Empty { AttemptOutcome::Empty } else { AttemptOutcome::Failed });
        }
        Outcome::Released => {
            // Claimed but not attempted: the lease is dropped and no attempt counted.
            next.attempts = (state.attempts - 1).max(0);
        }
    }
    next
}

/// The state of a ledger row as `list` shows it, and the time it becomes (or became) eligible.
pub fn entry_state(state: &ItemState, now: i64) -> (EntryState, Option<i64>) {
    if let Some(until) = state.lease_until
        && until > now
    {
        return (EntryState::InFlight, Some(until));
    }
    if state.lease_until.is_none()
        && state.attempts > 0
        && let Some(at) = state.eligible_at
        && at > now
    {
        return (EntryState::CoolingDown, Some(at));
    }
    (EntryState::Eligible, if state.lease_until.is_some() { state.lease_until } else { state.eligible_at })
}

/// Whether a subject counts as workable for `report_backlog`: not in flight, not cooling down.
pub fn workable(state: Option<&ItemState>, now: i64) -> bool {
    state.is_none_or(|s| entry_state(s, now).0 == EntryState::Eligible)
}

/// A routine's run limits, as the host knows them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoutineLimits {
    /// Runs of the routine allowed at once; a routine without a setting runs one at a time.
    #[serde(default = "one")]
    pub parallel_limit: u32,
    /// Runs of the routine allowed per day; `None` for no cap.
    #[serde(default)]
    pub daily_cap: Option<u32>,
    /// Runs of the routine running now (the reporting run included).
    #[serde(default = "one")]
    pub running: u32,
    /// Runs of the routine started today (the reporting run included).
    #[serde(default)]
    pub started_today: u32,
}

fn one() -> u32 {
    1
}

impl RoutineLimits {
    /// The limits as a binding sends them, the JSON text of an object with any of `parallel_limit`,
    /// `daily_cap` (null for no cap), `running` and `started_today`, each a whole number from 0 to
    /// 4294967295: anything else is refused with an error naming the field.
    pub fn from_json(text: &str) -> Result<RoutineLimits, LedgerError> {
        const FIELDS: [&str; 4] = ["parallel_limit", "daily_cap", "running", "started_today"];
        let bad = |m: String| LedgerError::InvalidArgument(m);
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| bad(format!("limits are not JSON: {e}")))?;
        let fields = value.as_object().ok_or_else(|| bad(format!("limits must be an object, got {value}")))?;
        for (key, v) in fields {
            if !FIELDS.contains(&key.as_str()) {
                return Err(bad(format!("unknown routine limit '{key}' (the limits are {})", FIELDS.join(", "))));
            }
            let allowed = v.as_u64().is_some_and(|n| u32::try_from(n).is_ok()) || (key == "daily_cap" && v.is_null());
            if !allowed {
                let null = if key == "daily_cap" { " or null" } else { "" };
                return Err(bad(format!("{key} must be a whole number from 0 to {}{null}, got {v}", u32::MAX)));
            }
        }
        serde_json::from_value(value).map_err(|e| bad(format!("limits: {e}")))
    }
}

/// A batch size as a binding sends it (any integer): at least 1, and at most 4294967295.
pub fn batch_size(n: i64) -> Result<u32, LedgerError> {
    u32::try_from(n)
        .ok()
        .filter(|&b| b >= 1)
        .ok_or_else(|| LedgerError::InvalidArgument(format!("batch_size must be from 1 to {}, got {n}", u32::MAX)))
}

impl Default for RoutineLimits {
    fn default() -> Self {
        RoutineLimits { parallel_limit: 1, daily_cap: None, running: 1, started_today: 0 }
    }
}

/// `ceil(workable / batch_size)` extra runs, capped by the parallel limit (less the runs already
/// running) and the daily cap (less the runs already started today).
pub fn extra_runs(workable: u64, batch_size: u32, limits: &RoutineLimits) -> Result<u32, LedgerError> {
    if batch_size == 0 {
        return Err(LedgerError::InvalidArgument("batch_size must be at least 1, got 0".into()));
    }
    let wanted = workable.div_ceil(u64::from(batch_size));
    let parallel = limits.parallel_limit.saturating_sub(limits.running);
    let daily = limits.daily_cap.map_or(u32::MAX, |cap| cap.saturating_sub(limits.started_today));
    Ok(wanted.min(u64::from(parallel)).min(u64::from(daily)) as u32)
}

/// Why a drain stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DrainStop {
    /// The latest report counted nothing workable (or there is no report).
    NothingWorkable,
    /// The finished run found the queue empty: it ended without claiming anything.
    QueueEmpty,
    /// The finished run never reported its backlog.
    RunDidNotReport,
    /// The latest report is more than an hour old.
    ReportStale,
}

/// What the ledger knows when a run of a draining routine finishes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainFacts {
    /// The time of the decision.
    pub now: i64,
    /// Whether the finished run was granted anything.
    pub run_claimed: bool,
    /// Whether the finished run reported its backlog.
    pub run_reported: bool,
    /// The routine's latest report: when, and how many subjects it counted workable.
    pub latest_report: Option<(i64, u64)>,
}

/// The decision after a run finishes: stop (with the first stop condition that holds), or start the
/// next run, if the daily cap allows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DrainDecision {
    /// Why the drain stops (`None`: it goes on).
    pub stop: Option<DrainStop>,
    /// Runs for the host to start now.
    pub start_runs: u32,
}

/// Decides, after a run of a draining routine finishes, whether the drain stops or starts more runs.
pub fn drain_decision(facts: &DrainFacts, limits: &RoutineLimits) -> DrainDecision {
    let stop = if !facts.run_claimed {
        Some(DrainStop::QueueEmpty)
    } else if !facts.run_reported {
        Some(DrainStop::RunDidNotReport)
    } else {
        match facts.latest_report {
            None | Some((_, 0)) => Some(DrainStop::NothingWorkable),
            Some((at, _)) if facts.now - at > REPORT_MAX_AGE_MS => Some(DrainStop::ReportStale),
            Some(_) => None,
        }
    };
    let start_runs = match stop {
        Some(_) => 0,
        None => {
            let daily = limits.daily_cap.map_or(u32::MAX, |cap| cap.saturating_sub(limits.started_today));
            // The finished run freed its slot: the next one starts the moment it finishes.
            let parallel = limits.parallel_limit.saturating_sub(limits.running.saturating_sub(1));
            1.min(daily).min(parallel)
        }
    };
    DrainDecision { stop, start_runs }
}

/// Reads a record batch sent as JSON (by a binding or an agent tool): a list of objects with
/// `subject_key`, `outcome` and optionally `token` and `fingerprint`. Any malformed entry rejects the
/// whole batch.
pub fn parse_records(value: &serde_json::Value) -> Result<Vec<super::types::Record>, LedgerError> {
    use serde_json::Value;
    let items =
        value.as_array().ok_or_else(|| LedgerError::InvalidBatch("records must be a list of objects".into()))?;
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let obj = item.as_object().ok_or_else(|| LedgerError::InvalidBatch(format!("record {i} is not an object")))?;
        let subject_key = match obj.get("subject_key") {
            Some(Value::String(k)) => k.clone(),
            _ => return Err(LedgerError::InvalidBatch(format!("record {i} has no subject_key"))),
        };
        let outcome = match obj.get("outcome") {
            Some(Value::String(o)) => Outcome::parse(o).ok_or_else(|| {
                LedgerError::InvalidBatch(format!(
                    "record {i} ('{subject_key}') has the unknown outcome '{o}' (productive, empty, failed or released)"
                ))
            })?,
            _ => return Err(LedgerError::InvalidBatch(format!("record {i} ('{subject_key}') has no outcome"))),
        };
        let token = match obj.get("token") {
            None | Some(Value::Null) => None,
            Some(t) => Some(t.as_i64().ok_or_else(|| {
                LedgerError::InvalidBatch(format!("record {i} ('{subject_key}'): token must be an integer"))
            })?),
        };
        let fingerprint = match obj.get("fingerprint") {
            None | Some(Value::Null) => None,
            Some(Value::String(f)) => Some(f.clone()),
            Some(_) => {
                return Err(LedgerError::InvalidBatch(format!(
                    "record {i} ('{subject_key}'): fingerprint must be a string"
                )));
            }
        };
        out.push(super::types::Record { subject_key, outcome, token, fingerprint });
    }
    Ok(out)
}

/// The checks every record batch passes before a store sees it: each subject named once, none empty.
/// Duplicates are rejected, never merged.
pub fn validate_records(records: &[super::types::Record]) -> Result<(), LedgerError> {
    let mut seen = std::collections::HashSet::new();
    for (i, r) in records.iter().enumerate() {
        if r.subject_key.is_empty() {
            return Err(LedgerError::InvalidBatch(format!("record {i} has no subject_key")));
        }
        check_text(&format!("record {i}'s subject_key"), &r.subject_key, MAX_KEY_BYTES)
            .and_then(|()| match &r.fingerprint {
                Some(f) => check_text(&format!("record {i}'s fingerprint"), f, MAX_FINGERPRINT_BYTES),
                None => Ok(()),
            })
            .map_err(LedgerError::InvalidBatch)?;
        if !seen.insert(r.subject_key.as_str()) {
            return Err(LedgerError::InvalidBatch(format!("the subject '{}' appears twice", r.subject_key)));
        }
    }
    Ok(())
}

/// The checks every claim passes: a scope, each candidate named once.
pub fn validate_claim(req: &super::types::ClaimRequest) -> Result<(), LedgerError> {
    if req.scope.is_empty() {
        return Err(LedgerError::InvalidArgument("a claim needs a scope".into()));
    }
    if req.lease_ms <= 0 {
        return Err(LedgerError::InvalidArgument("the lease must be positive".into()));
    }
    check_keys(&[
        ("scope", Some(req.scope.as_str())),
        ("run_id", req.run_id.as_deref()),
        ("routine_id", req.routine_id.as_deref()),
    ])?;
    let mut seen = std::collections::HashSet::new();
    for c in &req.candidates {
        if c.subject_key.is_empty() {
            return Err(LedgerError::InvalidArgument("a candidate has an empty subject_key".into()));
        }
        check_text("a candidate's subject_key", &c.subject_key, MAX_KEY_BYTES)
            .and_then(|()| match &c.fingerprint {
                Some(f) => check_text(&format!("the fingerprint of '{}'", c.subject_key), f, MAX_FINGERPRINT_BYTES),
                None => Ok(()),
            })
            .map_err(LedgerError::InvalidArgument)?;
        if !seen.insert(c.subject_key.as_str()) {
            return Err(LedgerError::InvalidArgument(format!("the candidate '{}' appears twice", c.subject_key)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_and_batch_sizes_from_a_binding_are_refused_by_name() {
        let limits = RoutineLimits::from_json(r#"{"parallel_limit": 3, "daily_cap": null}"#).unwrap();
        assert_eq!(limits, RoutineLimits { parallel_limit: 3, ..RoutineLimits::default() });
        for (text, named) in [
            (r#"{"parallel_limt": 3}"#, "unknown routine limit 'parallel_limt'"),
            (r#"{"running": -1}"#, "running must be a whole number from 0 to 4294967295, got -1"),
            (r#"{"started_today": 1.5}"#, "started_today must be a whole number"),
            (r#"{"parallel_limit": 4294967296}"#, "parallel_limit must be a whole number"),
            (r#"{"parallel_limit": null}"#, "parallel_limit must be a whole number from 0 to 4294967295, got null"),
            (r#"{"daily_cap": "5"}"#, "daily_cap must be a whole number from 0 to 4294967295 or null"),
            ("[1]", "limits must be an object"),
            ("{", "limits are not JSON"),
        ] {
            let e = RoutineLimits::from_json(text).unwrap_err();
            assert!(e.to_string().contains(named), "{text}: {e}");
        }
        assert_eq!(batch_size(1).unwrap(), 1);
        for n in [0, -1, i64::from(u32::MAX) + 1] {
            assert!(batch_size(n).unwrap_err().to_string().contains(&format!("got {n}")));
        }
    }

    #[test]
    fn ladder_is_6_12_24_48_96_hours_then_7_days() {
        let hours: Vec<i64> = (1..=8).map(|m| cooldown_ms(m) / HOUR_MS).collect();
        assert_eq!(hours, [6, 12, 24, 48, 96, 168, 168, 168]);
        assert_eq!(cooldown_ms(0), 6 * HOUR_MS);
        assert!(!should_escalate(4));
        assert!(should_escalate(5));
    }

    #[test]
    fn extra_runs_is_ceil_capped() {
        let l = RoutineLimits { parallel_limit: 10, daily_cap: Some(20), running: 1, started_today: 1 };
        assert_eq!(extra_runs(0, 5, &l).unwrap(), 0);
        assert_eq!(extra_runs(11, 5, &l).unwrap(), 3);
        assert_eq!(extra_runs(1000, 5, &l).unwrap(), 9);
        let l = RoutineLimits { parallel_limit: 10, daily_cap: Some(4), running: 1, started_today: 2 };
        assert_eq!(extra_runs(1000, 5, &l).unwrap(), 2);
        assert_eq!(extra_runs(1000, 5, &RoutineLimits::default()).unwrap(), 0);
        assert!(extra_runs(1, 0, &l).is_err());
    }

    #[test]
    fn drain_stops_on_each_condition() {
        let l = RoutineLimits { parallel_limit: 3, daily_cap: None, running: 3, started_today: 3 };
        let ok = DrainFacts {
            now: 10 * HOUR_MS,
            run_claimed: true,
            run_reported: true,
            latest_report: Some((10 * HOUR_MS - 1000, 4)),
        };
        assert_eq!(drain_decision(&ok, &l), DrainDecision { stop: None, start_runs: 1 });
        let f = |facts: DrainFacts| drain_decision(&facts, &l).stop;
        assert_eq!(f(DrainFacts { run_claimed: false, ..ok.clone() }), Some(DrainStop::QueueEmpty));
        assert_eq!(f(DrainFacts { run_reported: false, ..ok.clone() }), Some(DrainStop::RunDidNotReport));
        assert_eq!(f(DrainFacts { latest_report: Some((ok.now, 0)), ..ok.clone() }), Some(DrainStop::NothingWorkable));
        assert_eq!(f(DrainFacts { latest_report: None, ..ok.clone() }), Some(DrainStop::NothingWorkable));
        let stale = DrainFacts { latest_report: Some((ok.now - HOUR_MS - 1, 4)), ..ok.clone() };
        assert_eq!(f(stale), Some(DrainStop::ReportStale));
        let exactly_an_hour = DrainFacts { latest_report: Some((ok.now - HOUR_MS, 4)), ..ok.clone() };
        assert_eq!(f(exactly_an_hour), None);
        let capped = RoutineLimits { daily_cap: Some(3), ..l };
        assert_eq!(drain_decision(&ok, &capped), DrainDecision { stop: None, start_runs: 0 });
    }

    #[test]
    fn fence_rules() {
        let open = ItemState {
            attempts: 2,
            claim_token: 3,
            lease_until: Some(5),
            lease_run_id: Some("b".into()),
            ..Default::default()
        };
        let grant = |number: i64, run: &str, outcome: Option<&str>| GrantFacts {
            number,
            run_id: Some(run.into()),
            outcome: outcome.map(str::to_string),
        };
        let not_claimed = |why: &str| Err(Fence::NotClaimed(why.into()));
        // The open grant, by token (with or without its run) or by its run.
        assert_eq!(fence(Some(&open), Some(&grant(3, "b", None)), true, None), Ok(()));
        assert_eq!(fence(Some(&open), Some(&grant(3, "b", None)), true, Some("b")), Ok(()));
        assert_eq!(fence(Some(&open), Some(&grant(3, "b", None)), false, Some("b")), Ok(()));
        // The right token from the wrong run.
        assert_eq!(
            fence(Some(&open), Some(&grant(3, "b", None)), true, Some("x")),
            not_claimed("it was claimed by another run")
        );
        // An earlier grant reclaimed after its lease ran out.
        assert_eq!(fence(Some(&open), Some(&grant(2, "a", Some("abandoned"))), true, None), Err(Fence::Stale));
        assert_eq!(fence(Some(&open), Some(&grant(2, "a", Some("abandoned"))), false, Some("a")), Err(Fence::Stale));
        // Already recorded, a token nobody was given, a run that never claimed, a subject never claimed.
        assert_eq!(
            fence(Some(&open), Some(&grant(2, "a", Some("empty"))), true, None),
            not_claimed("its claim was already recorded (empty)")
        );
        assert_eq!(fence(Some(&open), None, true, None), not_claimed("no claim of it carries this token"));
        assert_eq!(fence(Some(&open), None, false, Some("c")), not_claimed("this run never claimed it"));
        assert_eq!(fence(None, None, true, None), not_claimed("it was never claimed in this scope"));
        let placeholder = ItemState::default();
        assert_eq!(fence(Some(&placeholder), None, true, None), not_claimed("it was never claimed in this scope"));
    }

    #[test]
    fn claim_tokens_are_unguessable_and_fit_a_javascript_number() {
        let tokens: std::collections::HashSet<i64> = (0..1000).map(|_| new_claim_token().unwrap()).collect();
        assert_eq!(tokens.len(), 1000);
        assert!(tokens.iter().all(|&t| t > 0 && t < (1 << 53)));
        // Not small numbers an attacker would try first.
        assert!(tokens.iter().filter(|&&t| t < 1 << 40).count() < 5);
    }
}
