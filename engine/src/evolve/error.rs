//! Why a run, or an operation on the served strategy, could not go on: one
//! error type for the loop and the served file, with the exit class the CLI
//! uses.

use std::path::PathBuf;

use journal::{ErrorClass, JournalError};

use crate::artifact::ArtifactError;
use crate::backend::BackendError;
use crate::stats;
use crate::store::StoreError;

/// Why a run (or an operation on the served strategy) could not go on.
#[derive(Debug, thiserror::Error)]
pub enum EvolveError {
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The served strategy itself could not be evaluated.
    #[error("evaluating the served strategy v{version} failed: {source}")]
    Served { version: u64, source: BackendError },
    /// The served file differs from what the journal serves and is no version it knows.
    #[error(
        "{file}: edited by hand (content hash {file_hash:.12}, but the journal serves v{version}, hash {served_hash:.12}); \
         it is not adopted. See the edit with `emend diff served {file}`; `emend rollback --to v{version} --force` journals \
         the edited content as a new version and serves v{version} again"
    )]
    HandEdited { file: String, file_hash: String, version: u64, served_hash: String },
    /// The served file cannot be read, so whether it was edited by hand is unknown.
    #[error(
        "{}: cannot be read, so emend cannot tell whether it was edited by hand (the journal serves v{version}); \
         fix its permissions, or replace it with `emend rollback --to v{version} --force`",
        file.display()
    )]
    Unreadable {
        file: PathBuf,
        version: u64,
        #[source]
        source: std::io::Error,
    },
    /// A hand edit of the served file is no valid strategy; its bytes were kept.
    #[error("the edited file is not a valid strategy; it was kept as {}", kept.display())]
    InvalidHandEdit {
        kept: PathBuf,
        #[source]
        source: ArtifactError,
    },
    /// A journaled document no longer passes the schema.
    #[error("journal strategy {hash:.12} is not a valid strategy")]
    Journaled {
        hash: String,
        #[source]
        source: ArtifactError,
    },
    #[error("the journal has no served strategy")]
    NothingServed,
    /// The task set cannot be split into search and confirm parts.
    #[error("emend.yaml: {0}")]
    Split(#[from] stats::SplitError),
    /// The winner's search part could not be evaluated.
    #[error("evaluating the accepted candidate on the search part failed: {0}")]
    Winner(BackendError),
    #[error("no version v{version} in the journal (it has v1..v{max})")]
    UnknownVersion { version: u64, max: u64 },
    /// `approve --retest` could not compare the pending version with the served one.
    #[error("retesting v{version} against the served version failed: {reason}")]
    Retest { version: u64, reason: String },
    /// A stop was requested (a signal, `--preempt`, a closed output) mid-round.
    #[error("the run was stopped ({cause}) before its round finished")]
    Interrupted { cause: &'static str },
    #[error("{}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl EvolveError {
    /// How the CLI should exit on this error.
    pub fn exit_class(&self) -> ErrorClass {
        match self {
            EvolveError::Journal(j) => j.exit_class(),
            EvolveError::Store(s) => s.exit_class(),
            EvolveError::HandEdited { .. }
            | EvolveError::Unreadable { .. }
            | EvolveError::InvalidHandEdit { .. }
            | EvolveError::Journaled { .. }
            | EvolveError::NothingServed
            | EvolveError::Split(_)
            | EvolveError::UnknownVersion { .. } => ErrorClass::BadInput,
            EvolveError::Served { .. }
            | EvolveError::Winner(_)
            | EvolveError::Io { .. }
            | EvolveError::Interrupted { .. }
            | EvolveError::Retest { .. } => ErrorClass::Failed,
        }
    }
}

pub type Result<T> = std::result::Result<T, EvolveError>;
