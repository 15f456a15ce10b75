//! The [`EventLog`] trait both backends implement, and JSONL export over it.

use std::io::Write;

use serde_json::Value;

use crate::error::{ErrorKind, JournalError, Result};
use crate::record::{EventRecord, Head, NewEvent};
use crate::verify::VerifyReport;

/// An append-only, hash-chained event log with projections.
pub trait EventLog {
    /// Append a batch atomically: all events and all their projection writes, or none.
    /// When this returns `Ok`, the batch is durable (for a backend that has a disk).
    /// An empty batch writes nothing and returns an empty vector.
    fn append(&mut self, events: Vec<NewEvent>) -> Result<Vec<EventRecord>>;

    /// Up to `limit` records from seq `from` on, in seq order (`from` 0 reads from 1).
    fn read_range(&self, from: u64, limit: usize) -> Result<Vec<EventRecord>>;

    /// Every record from seq `from` on.
    fn read_from(&self, from: u64) -> Result<Vec<EventRecord>> {
        self.read_range(from, usize::MAX)
    }

    /// The last seq and its hash; seq 0 and [`crate::ZERO_HASH`] when empty.
    fn head(&self) -> Head;

    /// One projection entry.
    fn get(&self, tree: &str, key: &str) -> Result<Option<Value>>;

    /// The entries of a projection tree whose keys start with `prefix`, in key order.
    fn scan(&self, tree: &str, prefix: &str) -> Result<Vec<(String, Value)>>;

    /// Check the chain and compare every projection with its rebuild from the events.
    fn verify(&self) -> Result<VerifyReport>;

    /// Rewrite every projection from the events alone (after a projector change),
    /// atomically, and drop stored projection trees the projector no longer declares.
    fn rebuild(&mut self) -> Result<()>;
}

/// Write records from seq `from` on as JSON lines (one [`EventRecord`] per line, fields in
/// declaration order, payload keys sorted). Returns how many lines were written.
pub fn export_jsonl<L, W>(log: &L, from: u64, mut out: W) -> Result<u64>
where
    L: EventLog + ?Sized,
    W: Write,
{
    const PAGE: usize = 256;
    let mut next = from.max(1);
    let mut written = 0u64;
    loop {
        let page = log.read_range(next, PAGE)?;
        for record in &page {
            let mut line = record.to_json_line();
            line.push('\n');
            out.write_all(line.as_bytes())
                .map_err(|e| JournalError::new(None, Some(record.seq), ErrorKind::io("writing the export", e)))?;
            written += 1;
        }
        match page.last() {
            Some(last) if page.len() == PAGE => next = last.seq + 1,
            _ => break,
        }
    }
    out.flush().map_err(|e| JournalError::new(None, None, ErrorKind::io("flushing the export", e)))?;
    Ok(written)
}
