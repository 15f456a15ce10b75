//! Typed journal errors: where it happened ([`JournalError`]) and what went wrong ([`ErrorKind`]).
//!
//! The CLI maps kinds to exit codes: [`ErrorKind::Locked`] is "another run holds the
//! journal" (exit 3); [`ErrorKind::FormatMismatch`] and [`ErrorKind::NotFound`] are bad
//! input (exit 2); everything else is a failed run (exit 1). See [`JournalError::exit_class`].

use std::fmt;
use std::path::PathBuf;

use crate::holder::LockHolder;

/// Result alias for journal operations.
/// The error a projector returns; any error type converts, and so does a `String` or `&str`.
pub type ProjectError = Box<dyn std::error::Error + Send + Sync>;

pub type Result<T, E = JournalError> = std::result::Result<T, E>;

/// A journal error: the journal (directory, or none for an in-memory journal), the event
/// sequence number involved if any, and the kind of failure as its source.
///
/// `Display` prints only the context; print the chain (`{:#}` with anyhow) to see the kind.
#[derive(Debug, thiserror::Error)]
pub struct JournalError {
    /// The journal directory; `None` for a [`crate::MemoryJournal`] or an export stream.
    pub path: Option<PathBuf>,
    /// The event sequence number the failure concerns, if any.
    pub seq: Option<u64>,
    /// Boxed to keep `Result`s small.
    #[source]
    pub kind: Box<ErrorKind>,
}

impl fmt::Display for JournalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.path {
            Some(path) => write!(f, "journal {}", path.display())?,
            None => write!(f, "in-memory journal")?,
        }
        if let Some(seq) = self.seq {
            write!(f, " (event seq {seq})")?;
        }
        Ok(())
    }
}

/// How a caller should react to an error; the CLI turns this into an exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// Bad input or usage: wrong path, or a journal written by another format version (exit 2).
    BadInput,
    /// Another process holds the journal (exit 3).
    Locked,
    /// The operation failed: I/O, storage, corruption, a projector error (exit 1).
    Failed,
}

impl JournalError {
    pub(crate) fn new(path: Option<PathBuf>, seq: Option<u64>, kind: ErrorKind) -> Self {
        JournalError { path, seq, kind: Box::new(kind) }
    }

    /// The kind of failure.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// Which exit-code family this error belongs to.
    pub fn exit_class(&self) -> ErrorClass {
        match *self.kind {
            ErrorKind::Locked { .. } => ErrorClass::Locked,
            ErrorKind::FormatMismatch { .. } | ErrorKind::NotFound { .. } => ErrorClass::BadInput,
            _ => ErrorClass::Failed,
        }
    }
}

/// What went wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A reader was asked to open a journal that does not exist; readers never create one.
    #[error("no journal exists at {} (a reader never creates one)", path.display())]
    NotFound { path: PathBuf },

    /// Another process (or another handle in this process) holds the journal.
    #[error("{}", locked_message(*pid, host, started_at, path, holder_mode.as_deref()))]
    Locked {
        /// The holder's pid; 0 when the LOCK file names no holder.
        pid: u32,
        host: String,
        /// RFC 3339 UTC time at which the holder opened the journal.
        started_at: String,
        /// `writer` or `reader`, when the LOCK file says.
        holder_mode: Option<String>,
        /// What is held: the journal's LOCK file, or its sled database when a process that
        /// does not take the LOCK (a tool opening sled directly) holds that.
        path: PathBuf,
    },

    /// The journal on disk was written in a format this build does not read.
    #[error("journal format version {found} is not supported: this build reads format version {expected}")]
    FormatMismatch { found: u32, expected: u32 },

    /// Stored data that cannot be decoded or does not agree with itself.
    #[error("corrupt journal: {detail}")]
    Corrupt { detail: String },

    /// The projector returned an error for an event; the batch was not written.
    #[error("projector failed on event of kind `{event_kind}`: {source}")]
    Projection {
        event_kind: String,
        #[source]
        source: ProjectError,
    },

    /// A projector read or wrote a tree its `trees()` does not declare.
    #[error("projection tree `{tree}` is not declared by the projector's trees() {declared:?}")]
    UndeclaredTree { tree: String, declared: Vec<String> },

    /// `append` or `rebuild` on a journal opened with `open_reader`.
    #[error("the journal was opened read-only (open_reader); writing needs open_writer")]
    ReadOnly,

    /// A file-system operation on the journal directory or LOCK file failed.
    #[error("{action} failed")]
    Io {
        action: String,
        #[source]
        source: std::io::Error,
    },

    /// The sled database reported an error.
    #[error("sled storage error")]
    Storage(#[source] sled::Error),

    /// The journal's file system has too little free space to write safely; nothing was written.
    #[error(
        "only {available} bytes are free on the file system of {}, and a write needs at least {needed}; \
         nothing was written: free some space and run again",
        path.display()
    )]
    DiskFull { path: PathBuf, available: u64, needed: u64 },
}

fn locked_message(pid: u32, host: &str, started_at: &str, path: &std::path::Path, mode: Option<&str>) -> String {
    if pid == 0 {
        return format!("the journal is locked by another process, which did not record itself in {}", path.display());
    }
    let who = match mode {
        Some(mode) => format!("a {mode}"),
        None => "another process".to_owned(),
    };
    format!(
        "the journal is locked by {who}: pid {pid} on host {host}, holding it since {started_at} (lock file {})",
        path.display()
    )
}

impl ErrorKind {
    pub(crate) fn corrupt(detail: impl Into<String>) -> Self {
        ErrorKind::Corrupt { detail: detail.into() }
    }

    pub(crate) fn io(action: impl Into<String>, source: std::io::Error) -> Self {
        ErrorKind::Io { action: action.into(), source }
    }

    pub(crate) fn locked_by(holder: Option<&LockHolder>, path: PathBuf) -> Self {
        match holder {
            Some(h) => ErrorKind::Locked {
                pid: h.pid,
                host: h.host.clone(),
                started_at: h.started_at.clone(),
                holder_mode: Some(h.mode.as_str().to_owned()),
                path,
            },
            None => {
                ErrorKind::Locked { pid: 0, host: String::new(), started_at: String::new(), holder_mode: None, path }
            }
        }
    }
}

impl From<sled::Error> for ErrorKind {
    fn from(e: sled::Error) -> Self {
        ErrorKind::Storage(e)
    }
}
