//! The journal of emend: an append-only, hash-chained event log on sled, plus projections
//! (materialized views) written in the same transaction as the events that cause them.
//!
//! The journal knows nothing of memory QA. The engine defines the events ([`NewEvent`]:
//! a kind and a JSON payload) and the projections (a [`Projector`]); the journal numbers
//! and chains the events ([`EventRecord`]), applies the projector, and stores both
//! atomically. Every projection can be rebuilt from the events ([`EventLog::rebuild`]),
//! and [`verify`] checks the chain and compares each projection with its rebuild.
//!
//! Two backends implement [`EventLog`]: [`SledJournal`] on disk (one process at a time,
//! guarded by a LOCK file naming its holder) and [`MemoryJournal`].

mod error;
mod lock;
mod log;
mod memory;
mod projection;
mod record;
mod sled_journal;
mod verify;

pub use error::{ErrorClass, ErrorKind, JournalError, Result};
pub use lock::{LOCK_FILE, LockHolder, OpenMode};
pub use log::{EventLog, export_jsonl};
pub use memory::MemoryJournal;
pub use projection::{ProjectError, ProjectionState, Projector};
pub use record::{EventRecord, Head, NewEvent, ZERO_HASH, canonical_json, canonicalize};
pub use sled_journal::{FORMAT_VERSION, SledJournal, open_reader, open_writer, rebuild, verify};
pub use verify::{ChainBreak, ChainProblem, KeyDiff, ProjectionCheck, ProjectionDiff, VerifyReport};
