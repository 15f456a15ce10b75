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
//! guarded by a LOCK file naming its holder) and [`MemoryJournal`]. A third, [`ReadView`]
//! ([`open_view`]), is how readers open a journal while a writer holds it: the writer
//! publishes every committed batch to an append-only file that readers replay without any
//! lock and without opening the store; it refuses to append.
//!
//! A projector declares its trees and applies one event at a time. Keys sort as strings,
//! so zero-pad numbers; reads see writes made earlier in the same batch; `project` must be
//! deterministic, because `verify` and `rebuild` replay it over the events.
//!
//! ```
//! use emend_journal::{EventLog, EventRecord, NewEvent, ProjectError, ProjectionState, Projector};
//! use serde_json::json;
//!
//! struct Rounds;
//!
//! impl Projector for Rounds {
//!     fn trees(&self) -> Vec<String> {
//!         vec!["rounds".into(), "scoreboard".into()]
//!     }
//!
//!     fn project(&self, state: &mut dyn ProjectionState, event: &EventRecord) -> Result<(), ProjectError> {
//!         if event.kind == "round_finished" {
//!             let round = event.payload["round"].as_u64().ok_or("round_finished without `round`")?;
//!             state.put("rounds", &format!("{round:06}"), event.payload.clone());
//!             let best = state.get("scoreboard", "best").and_then(|v| v.as_f64()).unwrap_or(0.0);
//!             let score = event.payload["score"].as_f64().unwrap_or(0.0);
//!             state.put("scoreboard", "best", json!(best.max(score)));
//!         }
//!         Ok(())
//!     }
//! }
//!
//! # fn main() -> emend_journal::Result<()> {
//! # let tmp = tempfile::TempDir::new().unwrap();
//! # let dir = tmp.path().join("journal");
//! let mut log = emend_journal::open_writer(&dir, Rounds)?;
//! let records = log.append(vec![NewEvent::new("round_finished", json!({"round": 1, "score": 0.71}))])?;
//! assert_eq!(records[0].seq, 1);
//! assert_eq!(log.get("scoreboard", "best")?, Some(json!(0.71)));
//! drop(log);
//! assert!(emend_journal::verify(&dir, Rounds)?.is_ok());
//! # Ok(())
//! # }
//! ```

mod compare;
mod error;
mod holder;
mod lock;
mod log;
mod memory;
mod projection;
mod reader;
mod record;
mod seal;
mod sled_journal;
mod verify;
mod view;

pub use error::{ErrorClass, ErrorKind, JournalError, Result};
pub use lock::{LOCK_FILE, LockHolder, OpenMode};
pub use log::{EventLog, export_jsonl};
pub use memory::MemoryJournal;
pub use projection::{ProjectError, ProjectionState, Projector};
pub use reader::{ReadView, ViewSource, open_view};
pub use record::{EventRecord, Head, NewEvent, ZERO_HASH, canonical_json, canonicalize};
pub use seal::SEAL_FILE;
pub use sled_journal::{
    DEFAULT_MIN_FREE_BYTES, FORMAT_VERSION, SledJournal, open_reader, open_writer, rebuild, repair, verify,
};
pub use verify::{
    ChainBreak, ChainProblem, KeyDiff, ProjectionCheck, ProjectionDiff, VerifyReport, ViewCheck, ViewDifference,
};
pub use view::VIEW_FILE;

#[cfg(test)]
mod tests {
    fn assert_send<T: Send>() {}

    // The engine may hold either backend as `Box<dyn EventLog>`.
    #[allow(dead_code)]
    fn event_log_is_object_safe(log: &mut dyn crate::EventLog) -> crate::Result<u64> {
        log.append(Vec::new())?;
        crate::export_jsonl(&*log, 1, std::io::sink())
    }

    #[test]
    fn journals_can_move_between_threads() {
        assert_send::<crate::SledJournal>();
        assert_send::<crate::MemoryJournal>();
        assert_send::<crate::JournalError>();
    }
}
