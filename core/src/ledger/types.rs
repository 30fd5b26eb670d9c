//! The ledger's plain data: what goes into a claim or a record and what comes back. Everything is
//! serde, so the bindings and the agent tools pass it as JSON. Times are milliseconds since the Unix
//! epoch.

use serde::{Deserialize, Serialize};

use super::rules::DEFAULT_LEASE_MS;

macro_rules! string_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $variant:ident => $s:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($(#[$vm])* $variant),+ }

        impl $name {
            /// The value as stored and sent.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $s),+ }
            }
            /// The value named by `s`, if any.
            pub fn parse(s: &str) -> Option<Self> {
                match s { $($s => Some($name::$variant),)+ _ => None }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

string_enum!(
    /// Why a candidate was granted.
    GrantReason {
        /// Never attempted in this scope.
        Fresh => "fresh",
        /// Its cooldown, or the lease of a run that never recorded, has run out.
        CooldownExpired => "cooldown_expired",
        /// Still cooling down, but its fingerprint differs from the last one recorded.
        FingerprintChanged => "fingerprint_changed",
    }
);

string_enum!(
    /// Why a candidate was skipped. Never merged: each says something different.
    SkipReason {
        /// Claimed by another run whose lease is live.
        InFlight => "in_flight",
        /// Cooling down until `eligible_at`.
        CoolingDown => "cooling_down",
        /// Eligible, but the limit was reached; nothing has touched it.
        OverLimit => "over_limit",
    }
);

string_enum!(
    /// What a run reports for a subject it claimed.
    Outcome {
        /// Work done.
        Productive => "productive",
        /// The attempt was correct and there was nothing there.
        Empty => "empty",
        /// The attempt itself failed.
        Failed => "failed",
        /// Claimed but not attempted: the lease is dropped, no attempt counted.
        Released => "released",
    }
);

string_enum!(
    /// How an attempt ended: a recorded outcome, or `abandoned` when its expired lease was claimed again.
    AttemptOutcome {
        /// Work done.
        Productive => "productive",
        /// Nothing there.
        Empty => "empty",
        /// The attempt failed.
        Failed => "failed",
        /// Released without an attempt.
        Released => "released",
        /// Its run never recorded, and its expired lease was claimed again.
        Abandoned => "abandoned",
    }
);

string_enum!(
    /// A ledger row's state as `list` shows it.
    EntryState {
        /// Claimed by a run whose lease is live.
        InFlight => "in_flight",
        /// Recorded, and waiting out its cooldown.
        CoolingDown => "cooling_down",
        /// A claim may grant it now.
        Eligible => "eligible",
    }
);

string_enum!(
    /// Which rows `list` returns: all, eligible now, or suppressed (in flight or cooling down).
    #[derive(Default)]
    ListFilter {
        /// Every row.
        #[default]
        All => "all",
        /// The rows a claim may grant now.
        Eligible => "eligible",
        /// The rows in flight or cooling down.
        Suppressed => "suppressed",
    }
);

/// One candidate of a claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    /// The subject's key in the scope (a PO number, a ticket id).
    pub subject_key: String,
    /// A deterministic rendering of the subject's state; compared byte for byte. Omitting it is safe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
}

impl Candidate {
    /// A candidate with no fingerprint.
    pub fn new(subject_key: impl Into<String>) -> Self {
        Candidate { subject_key: subject_key.into(), fingerprint: None }
    }
    /// A candidate with the subject's current fingerprint.
    pub fn with_fingerprint(subject_key: impl Into<String>, fingerprint: impl Into<String>) -> Self {
        Candidate { subject_key: subject_key.into(), fingerprint: Some(fingerprint.into()) }
    }
}

impl From<&str> for Candidate {
    fn from(key: &str) -> Self {
        Candidate::new(key)
    }
}

impl From<&String> for Candidate {
    fn from(key: &String) -> Self {
        Candidate::new(key.clone())
    }
}

impl From<String> for Candidate {
    fn from(key: String) -> Self {
        Candidate::new(key)
    }
}

/// A claim: candidates in priority order, at most `limit` granted, each with a lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimRequest {
    /// The scope the subjects belong to (one kind of work).
    pub scope: String,
    /// The candidates, highest priority first.
    pub candidates: Vec<Candidate>,
    /// At most this many are granted.
    pub limit: usize,
    /// The lease of each grant in milliseconds (default 1 h).
    #[serde(default = "default_lease")]
    pub lease_ms: i64,
    #[serde(default)]
    /// The run claiming (a record without a token must come from it).
    pub run_id: Option<String>,
    #[serde(default)]
    /// The routine claiming, for its `report_backlog` view.
    pub routine_id: Option<String>,
}

fn default_lease() -> i64 {
    DEFAULT_LEASE_MS
}

impl ClaimRequest {
    /// A claim of up to `limit` of `candidates` in `scope`, with the default lease (1 h).
    pub fn new<C: Into<Candidate>>(
        scope: impl Into<String>,
        candidates: impl IntoIterator<Item = C>,
        limit: usize,
    ) -> Self {
        ClaimRequest {
            scope: scope.into(),
            candidates: candidates.into_iter().map(Into::into).collect(),
            limit,
            lease_ms: DEFAULT_LEASE_MS,
            run_id: None,
            routine_id: None,
        }
    }
    /// Sets the lease of each grant.
    pub fn lease(mut self, lease: std::time::Duration) -> Self {
        self.lease_ms = i64::try_from(lease.as_millis()).unwrap_or(i64::MAX);
        self
    }
    /// Sets the claiming run's id.
    pub fn run_id(mut self, run_id: impl Into<String>) -> Self {
        self.run_id = Some(run_id.into());
        self
    }
    /// Sets the claiming routine's id.
    pub fn routine_id(mut self, routine_id: impl Into<String>) -> Self {
        self.routine_id = Some(routine_id.into());
        self
    }
}

/// The label of one candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Verdict {
    /// The candidate is the caller's until `lease_until`.
    Granted {
        /// Why it was granted.
        grant_reason: GrantReason,
        /// The claim token: unguessable (53 random bits), new for every grant; a record is fenced by it.
        token: i64,
        /// When the lease ends.
        lease_until: i64,
    },
    /// The candidate was not granted.
    Skipped {
        /// Why.
        skip_reason: SkipReason,
        /// When it becomes eligible (cooling down), or when the live lease ends (in flight, where known).
        #[serde(default)]
        eligible_at: Option<i64>,
    },
}

/// One candidate, labelled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Labelled {
    /// The candidate's subject key.
    pub subject_key: String,
    #[serde(flatten)]
    /// Granted or skipped, and why.
    pub verdict: Verdict,
}

impl Labelled {
    /// Why it was granted (`None`: skipped).
    pub fn grant_reason(&self) -> Option<GrantReason> {
        match self.verdict {
            Verdict::Granted { grant_reason, .. } => Some(grant_reason),
            Verdict::Skipped { .. } => None,
        }
    }
    /// Why it was skipped (`None`: granted).
    pub fn skip_reason(&self) -> Option<SkipReason> {
        match self.verdict {
            Verdict::Skipped { skip_reason, .. } => Some(skip_reason),
            Verdict::Granted { .. } => None,
        }
    }
    /// The claim token of a grant (`None`: skipped).
    pub fn token(&self) -> Option<i64> {
        match self.verdict {
            Verdict::Granted { token, .. } => Some(token),
            Verdict::Skipped { .. } => None,
        }
    }
}

/// Every candidate of a claim, labelled, in the order given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimResult {
    /// The claim's scope.
    pub scope: String,
    /// Every candidate, labelled, in the order given.
    pub candidates: Vec<Labelled>,
}

impl ClaimResult {
    /// The candidates granted.
    pub fn granted(&self) -> impl Iterator<Item = &Labelled> {
        self.candidates.iter().filter(|c| c.grant_reason().is_some())
    }
    /// The candidate with this subject key, if it was one.
    pub fn get(&self, subject_key: &str) -> Option<&Labelled> {
        self.candidates.iter().find(|c| c.subject_key == subject_key)
    }
}

/// One subject's outcome in a record batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The subject the outcome is for.
    pub subject_key: String,
    /// How the attempt went.
    pub outcome: Outcome,
    /// The claim token of the grant; without it the batch's run id must be the run that claimed.
    #[serde(default)]
    pub token: Option<i64>,
    /// Replaces the fingerprint the ledger keeps for the subject.
    #[serde(default)]
    pub fingerprint: Option<String>,
}

impl Record {
    /// A record of `outcome` for `subject_key`, fenced by its grant's `token`.
    pub fn new(subject_key: impl Into<String>, outcome: Outcome, token: Option<i64>) -> Self {
        Record { subject_key: subject_key.into(), outcome, token, fingerprint: None }
    }
}

/// A subject after its record was applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recorded {
    /// The subject.
    pub subject_key: String,
    /// The outcome recorded.
    pub outcome: Outcome,
    /// Attempts so far.
    pub attempts: i64,
    /// Consecutive unproductive attempts.
    pub misses: i64,
    /// When it becomes eligible again (its cooldown's end); `None`: at once.
    pub eligible_at: Option<i64>,
    /// After five consecutive misses: escalate to a human rather than retrying forever.
    pub escalate: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
/// What a record batch did.
pub struct RecordResult {
    /// The scope recorded in.
    pub scope: String,
    /// Each subject, after its record.
    pub recorded: Vec<Recorded>,
    /// The subjects whose misses suggest escalating to a human.
    pub escalate: Vec<String>,
}

/// What `list` returns: which rows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    /// Only this scope (none: every scope).
    pub scope: Option<String>,
    #[serde(default = "list_all")]
    /// Which rows: all, eligible or suppressed.
    pub state: ListFilter,
    /// A routine's view: every row of the scopes the routine has written to.
    #[serde(default)]
    pub routine_id: Option<String>,
}

fn list_all() -> ListFilter {
    ListFilter::All
}

/// One ledger row.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerEntry {
    /// The scope.
    pub scope: String,
    /// The subject's key.
    pub subject_key: String,
    /// In flight, cooling down, eligible or done.
    pub state: EntryState,
    /// When it becomes (or became) eligible: the lease's end while in flight, the cooldown's end after.
    pub eligible_at: Option<i64>,
    /// The outcome of its last attempt.
    pub last_outcome: Option<AttemptOutcome>,
    /// Why it was last granted.
    pub last_grant_reason: Option<GrantReason>,
    /// Attempts so far.
    pub attempts: i64,
    /// Consecutive unproductive attempts.
    pub misses: i64,
    /// The number of the subject's latest grant (1 for the first). Not a claim token: the token a
    /// record needs is unguessable and only its grant's holder has it.
    pub claim_token: i64,
    /// Whether its misses suggest escalating to a human.
    pub escalate: bool,
    /// The routine that last claimed it.
    pub routine_id: Option<String>,
    /// When it was last attempted.
    pub last_attempt_at: Option<i64>,
}

/// Per scope, how many rows were last granted for each reason: a scope dominated by
/// `fingerprint_changed` has unstable fingerprints.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrantReasonCounts {
    /// Last granted because they were new.
    pub fresh: u64,
    /// Last granted because their cooldown ended.
    pub cooldown_expired: u64,
    /// Last granted because their fingerprint changed.
    pub fingerprint_changed: u64,
}

impl GrantReasonCounts {
    /// Rows counted.
    pub fn total(&self) -> u64 {
        self.fresh + self.cooldown_expired + self.fingerprint_changed
    }
    /// More than half of the scope's rows were last granted because the fingerprint changed.
    pub fn fingerprints_look_unstable(&self) -> bool {
        self.total() > 0 && self.fingerprint_changed * 2 > self.total()
    }
}

/// The answer to `report_backlog`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BacklogReport {
    /// The routine the report is for.
    pub routine_id: String,
    /// The scope it counts (none: every scope the routine has written to).
    pub scope: Option<String>,
    /// Subjects workable now: not in flight, not cooling down.
    pub workable: u64,
    /// `ceil(workable / batch_size)`, capped by the parallel limit and the daily cap.
    pub extra_runs: u32,
}
