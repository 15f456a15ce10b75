//! The writer's check of the store's chain before it writes.
//!
//! One pass over the stored records checks every seq and link (each record's prev_hash is
//! the hash the record before carries, read from where the record's line holds them,
//! without parsing the payload or recomputing the hash) and the recorded head, and hashes
//! each record's stored bytes into a checksum compared with the one the store updates with
//! every batch (`events_digest`). Only when that checksum differs (a record edited in the
//! store) or was never recorded (a journal from before it) is every record decoded and its
//! hash recomputed, as `verify` does, to name the seq.

use super::{EVENTS_DIGEST_KEY, SledJournal, TreeDigest, entry_digest, xor_into};
use crate::error::{ErrorKind, Result};
use crate::verify::{ChainBreak, ChainCheck};

impl SledJournal {
    /// Refuse unless the whole chain checks out against the recorded head. Returns the hash
    /// of every record, seq 1 first.
    pub(super) fn check_chain(&self) -> Result<Vec<String>> {
        let (hashes, digest) = self.chain_pass(true)?;
        let recorded = self.store.meta.get(EVENTS_DIGEST_KEY).map_err(|e| self.err(None, e.into()))?;
        match recorded {
            Some(r) if r.as_ref() == digest.as_slice() => return Ok(hashes),
            Some(_) => {
                // A record was changed in the store: the full check names it.
                self.chain_pass(false)?;
                // Records removed from the end with the head moved back: the view's binding,
                // recorded with the last batch, still names the old head; the view check
                // refuses it, naming the first seq the store lost.
                let binding = self.store.recorded_binding().map_err(|k| self.err(None, k))?;
                if binding.is_some_and(|b| b.seq != self.head.seq || b.hash != self.head.hash) {
                    return Ok(hashes);
                }
                // Every record intact yet the checksum differs: records after the head
                // were removed (the head moved back with them), or the checksum was edited.
                let head = self.head.seq;
                return Err(self.err(
                    Some(head + 1),
                    ErrorKind::corrupt(format!(
                        "the store holds seq 1..{head}, intact, but they do not match the checksum recorded with \
                         the last batch: records after seq {head} were removed (or the checksum edited) outside \
                         the journal; nothing was written: run `emend journal verify` for the full report"
                    )),
                ));
            }
            None => {}
        }
        // A journal from before the checksum: check every record in full once, then record it.
        let (hashes, digest) = self.chain_pass(false)?;
        if self.mode == crate::lock::OpenMode::Writer {
            tracing::info!("recording the checksum of the stored events, which has none yet");
            self.store.meta.insert(EVENTS_DIGEST_KEY, digest.as_slice()).map_err(|e| self.err(None, e.into()))?;
        }
        Ok(hashes)
    }

    /// One pass over the stored records: links only (`links`) or every hash recomputed.
    /// Returns every record's hash and the checksum of their stored bytes.
    fn chain_pass(&self, links: bool) -> Result<(Vec<String>, TreeDigest)> {
        let mut check = if links {
            ChainCheck::links_only(&*self.projector, &self.declared)
        } else {
            ChainCheck::chain_only(&*self.projector, &self.declared)
        };
        let mut hashes = Vec::new();
        let mut digest = [0u8; 32];
        for item in self.store.events.iter() {
            match item {
                Ok((key, value)) => {
                    if !check.feed(&key, &value) {
                        break;
                    }
                    xor_into(&mut digest, &entry_digest(&key, &value));
                    hashes.push(check.last_good().hash);
                }
                Err(e) => {
                    let after = check.last_good().seq;
                    return Err(self.err(
                        Some(after + 1),
                        ErrorKind::corrupt(format!(
                            "the store cannot be read past event seq {after} ({e}); nothing was written: \
                             run `emend journal verify` for the full report"
                        )),
                    ));
                }
            }
        }
        let (report, _) = check.finish(Some(&self.head));
        match report.chain_break {
            None => Ok((hashes, digest)),
            Some(b) => Err(self.broken(b)),
        }
    }

    fn broken(&self, b: ChainBreak) -> crate::error::JournalError {
        self.err(
            Some(b.seq),
            ErrorKind::corrupt(format!(
                "the chain is broken at {b}; nothing was written to this journal: \
                 run `emend journal verify` for the full report"
            )),
        )
    }
}
