//! Why an operation on the served file or the served pointer could not go
//! on, with the exit class the CLI uses. A run's own error (`EvolveError`)
//! wraps it.

use std::path::PathBuf;

use emend_journal::{ErrorClass, JournalError};

use crate::artifact::ArtifactError;
use crate::store::StoreError;

/// Why an operation on the served strategy could not go on.
#[derive(Debug, thiserror::Error)]
pub enum ServedError {
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Store(#[from] StoreError),
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
    #[error("no version v{version} in the journal (it has v1..v{max})")]
    UnknownVersion { version: u64, max: u64 },
    /// An operator cannot serve this version (quarantined, pending, rejected, unknown): [`super::check_servable`] says why.
    #[error("{why}")]
    NotServable { version: u64, why: String },
    #[error("{}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl ServedError {
    /// How the CLI should exit on this error.
    pub fn exit_class(&self) -> ErrorClass {
        match self {
            ServedError::Journal(j) => j.exit_class(),
            ServedError::Store(s) => s.exit_class(),
            ServedError::HandEdited { .. }
            | ServedError::Unreadable { .. }
            | ServedError::InvalidHandEdit { .. }
            | ServedError::Journaled { .. }
            | ServedError::NothingServed
            | ServedError::UnknownVersion { .. }
            | ServedError::NotServable { .. } => ErrorClass::BadInput,
            ServedError::Io { .. } => ErrorClass::Failed,
        }
    }
}

pub type Result<T> = std::result::Result<T, ServedError>;
