//! Why a run could not go on, with the exit
//! class the CLI uses. An operation on the served file has its own error
//! (`ServedError`), which this one wraps.

use emend_journal::{ErrorClass, JournalError};

use emend_core::served::ServedError;
use emend_core::store::StoreError;
use emend_eval::backend::BackendError;
use emend_stats;

/// Why a run could not go on.
#[derive(Debug, thiserror::Error)]
pub enum EvolveError {
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The served file or pointer (a hand edit, an unknown version...).
    #[error(transparent)]
    ServedFile(#[from] ServedError),
    /// The served strategy itself could not be evaluated.
    #[error("evaluating the served strategy v{version} failed: {source}")]
    Served { version: u64, source: BackendError },
    /// The task set cannot be split into search and confirm parts.
    #[error("emend.yaml: {0}")]
    Split(#[from] emend_stats::SplitError),
    /// The split assigns questions differently from the journal's last round:
    /// questions the search has read would be tested as fresh.
    #[error(
        "emend.yaml: harness.split: the journal's round {round} used a {was}; this run would use a {now}, which moves \
         questions the search has read into the confirm part. Restore the recorded harness.split settings, or run \
         `emend evolve --new-split` to start a new LORD++ sequence on the new split (its confirm tests start again at W0)"
    )]
    SplitChanged { round: u64, was: String, now: String },
    /// The winner's search part could not be evaluated.
    #[error("evaluating the accepted candidate on the search part failed: {0}")]
    Winner(BackendError),
    /// `approve --retest` could not compare the pending version with the served one.
    #[error("retesting v{version} against the served version failed: {reason}")]
    Retest { version: u64, reason: String },
    /// A person's proposal (`emend propose`) that cannot be tested: a field
    /// the schema does not declare, a value it refuses, an unknown category,
    /// a strategy evaluated before.
    #[error("{0}")]
    Proposal(String),
    /// A stop was requested (a signal, `--preempt`, a closed output) mid-round.
    #[error("the run was stopped ({cause}) before its round finished")]
    Interrupted { cause: &'static str },
}

impl EvolveError {
    /// How the CLI should exit on this error.
    pub fn exit_class(&self) -> ErrorClass {
        match self {
            EvolveError::Journal(j) => j.exit_class(),
            EvolveError::Store(s) => s.exit_class(),
            EvolveError::ServedFile(s) => s.exit_class(),
            EvolveError::Split(_) | EvolveError::SplitChanged { .. } | EvolveError::Proposal(_) => ErrorClass::BadInput,
            EvolveError::Served { .. }
            | EvolveError::Winner(_)
            | EvolveError::Interrupted { .. }
            | EvolveError::Retest { .. } => ErrorClass::Failed,
        }
    }
}

pub type Result<T> = std::result::Result<T, EvolveError>;
