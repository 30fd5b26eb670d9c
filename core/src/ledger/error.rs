//! The ledger's errors. Each has a stable `code`, the same in every language.

/// A ledger call refused or failed. A refused batch wrote nothing.
#[derive(Debug, Clone, thiserror::Error)]
pub enum LedgerError {
    /// A record batch is malformed (an unknown outcome, a missing subject_key, the same subject twice);
    /// the whole call was rejected and nothing written.
    #[error("record batch rejected, nothing written: {0}")]
    InvalidBatch(String),
    /// A record names a grant whose lease ran out and that another run has since reclaimed.
    #[error(
        "record batch rejected, nothing written: the claim on '{subject_key}' is stale (its lease ran out and another run has claimed it since)"
    )]
    StaleToken {
        /// The subject whose claim is stale.
        subject_key: String,
    },
    /// A record that names no open claim: the subject was never claimed, the token matches no claim of
    /// it, the run never claimed it, the claim was already recorded, or another run holds it.
    /// `reason` says which.
    #[error("record batch rejected, nothing written: '{subject_key}' has no open claim to record: {reason}")]
    NotClaimed {
        /// The subject recorded.
        subject_key: String,
        /// Why its claim is not open.
        reason: String,
    },
    /// The routine's runs all claim in one scope, pinned by its first claim.
    #[error("routine '{routine_id}' claims in scope '{pinned_scope}', not '{scope}'")]
    ScopePinned {
        /// The routine claiming.
        routine_id: String,
        /// The scope its first claim pinned.
        pinned_scope: String,
        /// The scope this claim named.
        scope: String,
    },
    /// A call with arguments the ledger cannot use (an empty scope, a zero batch size, a bad URL).
    #[error("invalid ledger argument: {0}")]
    InvalidArgument(String),
    /// The store failed (unreachable, I/O, a migration that does not apply).
    #[error("ledger store error: {0}")]
    Store(String),
}

impl LedgerError {
    /// A stable machine-readable code, the same in every language.
    pub fn code(&self) -> &'static str {
        match self {
            LedgerError::InvalidBatch(_) => "ledger_invalid_batch",
            LedgerError::StaleToken { .. } => "ledger_stale_token",
            LedgerError::NotClaimed { .. } => "ledger_not_claimed",
            LedgerError::ScopePinned { .. } => "ledger_scope_pinned",
            LedgerError::InvalidArgument(_) => "ledger_invalid_argument",
            LedgerError::Store(_) => "ledger_store",
        }
    }
}

impl From<sqlx::Error> for LedgerError {
    fn from(e: sqlx::Error) -> Self {
        LedgerError::Store(e.to_string())
    }
}
