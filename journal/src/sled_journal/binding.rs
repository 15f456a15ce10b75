//! The writer's side of the view's binding to the store (see the seal module): bring the
//! view in line with the store at open, or refuse; rebuild it on `repair`; compare it for
//! `verify`.

use sha2::{Digest, Sha256};

use super::{SledJournal, Store, VIEW_KEY};
use crate::compare::{self, ViewState};
use crate::error::{ErrorKind, Result};
use crate::log::EventLog;
use crate::seal::ViewBinding;
use crate::verify::ViewCheck;
use crate::verify::ViewDifference;
use crate::view::{self, ViewWriter};

impl Store {
    pub(super) fn recorded_binding(&self) -> Result<Option<ViewBinding>, ErrorKind> {
        match self.meta.get(VIEW_KEY)? {
            None => Ok(None),
            Some(bytes) => ViewBinding::decode(&bytes).map(Some).map_err(ErrorKind::corrupt),
        }
    }

    fn record_binding(&self, binding: &ViewBinding) -> Result<(), ErrorKind> {
        self.meta.insert(VIEW_KEY, binding.encode())?;
        self.db.flush()?;
        Ok(())
    }
}

impl SledJournal {
    /// Bring the published view in line with the store. A view that matches is kept; one
    /// that lacks only the last batch (a crash between the store's commit and the view's
    /// write) gets it appended; a missing view is written. Any other difference is refused,
    /// naming the first differing seq, unless `repair`: then the view is rebuilt from the
    /// store and the difference returned.
    ///
    /// The view's bytes are hashed once and compared with the digests the store recorded
    /// with its last batch; only when neither matches are the view's records read and
    /// compared one by one with the store's (`hashes`: every stored record's hash), to name
    /// the first differing seq.
    pub(super) fn sync_view(&mut self, hashes: &[String], repair: bool) -> Result<Option<ViewDifference>> {
        view::remove_leftover(&self.dir);
        let path = self.dir.join(view::VIEW_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                tracing::info!(view = %path.display(), "no read view: writing it from the store");
                self.rewrite_view()?;
                return Ok(None);
            }
            Err(e) => return Err(self.err(None, ErrorKind::io(format!("reading {}", path.display()), e))),
        };
        let binding = self.store.recorded_binding().map_err(|k| self.err(None, k))?;
        let (state, good_len) = match binding.as_ref().and_then(|b| self.judge_by_digest(&bytes, b)) {
            Some(found) => found,
            None => {
                let scan = compare::scan(&bytes, &*self.projector);
                (compare::judge(&scan, hashes, binding.as_ref()), scan.good_len)
            }
        };
        let kept = &bytes[..good_len as usize];
        let open_at = || {
            ViewWriter::open_at(&self.dir, kept)
                .map_err(|e| self.err(None, ErrorKind::io(format!("opening {}", path.display()), e)))
        };
        match state {
            ViewState::InSync => {
                let writer = open_at()?;
                let binding = match binding {
                    Some(b) if b.digest.is_some() => b,
                    // A binding from before digests: record one now.
                    _ => self.bind(&writer)?,
                };
                writer.seal(&binding);
                self.view = Some(writer);
                Ok(None)
            }
            ViewState::BehindByLastBatch { from, to } => {
                tracing::info!(
                    view = %path.display(),
                    "the read view lacks seq {from}..{to}, committed to the store just before the last run \
                     stopped; appending them"
                );
                let mut writer = open_at()?;
                let records = self.read_from(from)?;
                let planned = binding.clone().unwrap_or_else(|| ViewBinding {
                    seq: self.head.seq,
                    hash: self.head.hash.clone(),
                    len: 0,
                    prev_seq: from - 1,
                    prev_len: good_len,
                    digest: None,
                    prev_digest: None,
                });
                writer.publish(&records, &planned);
                if writer.len() != planned.len || planned.digest.as_deref() != Some(writer.digest().as_str()) {
                    let actual = self.bind(&writer)?;
                    writer.seal(&actual);
                }
                self.view = Some(writer);
                Ok(None)
            }
            ViewState::Differs(d) if repair => {
                tracing::warn!(view = %path.display(), "the read view differs from the store at {d}; rebuilding it");
                self.rewrite_view()?;
                Ok(Some(d))
            }
            ViewState::Differs(d) => Err(self.err(
                Some(d.seq),
                ErrorKind::corrupt(format!(
                    "the read view {} differs from the store at {d}; nothing was written: run \
                     `emend journal repair` to rebuild the view from the store (`emend journal verify` \
                     gives the full report)",
                    path.display()
                )),
            )),
        }
    }

    /// The view judged by its digest alone: in sync when its bytes are exactly those the
    /// store recorded with its last batch, behind by that batch when they are those it
    /// recorded before it. `None`: neither (or no digest recorded): compare record by record.
    fn judge_by_digest(&self, bytes: &[u8], b: &ViewBinding) -> Option<(ViewState, u64)> {
        // The store's head (its chain checked already) must be where the binding says.
        if b.seq != self.head.seq || b.hash != self.head.hash {
            return None;
        }
        let digest = hex::encode(Sha256::digest(bytes));
        if bytes.len() as u64 == b.len && b.digest.as_deref() == Some(digest.as_str()) {
            return Some((ViewState::InSync, b.len));
        }
        if bytes.len() as u64 == b.prev_len && b.prev_seq < b.seq && b.prev_digest.as_deref() == Some(digest.as_str()) {
            return Some((ViewState::BehindByLastBatch { from: b.prev_seq + 1, to: b.seq }, b.prev_len));
        }
        None
    }

    /// Record (in the store) that the view ends at the head as `writer` has written it,
    /// and return the binding.
    fn bind(&self, writer: &ViewWriter) -> Result<ViewBinding> {
        let (len, digest) = (writer.len(), writer.digest());
        let binding = ViewBinding {
            seq: self.head.seq,
            hash: self.head.hash.clone(),
            len,
            prev_seq: self.head.seq,
            prev_len: len,
            digest: Some(digest.clone()),
            prev_digest: Some(digest),
        };
        self.store.record_binding(&binding).map_err(|k| self.err(None, k))?;
        Ok(binding)
    }

    /// Write the whole view anew from the store, then bind and seal it.
    fn rewrite_view(&mut self) -> Result<()> {
        let records = self.read_from(1)?;
        let writer = ViewWriter::rewrite(&self.dir, records.into_iter().map(Ok)).map_err(|k| self.err(None, k))?;
        let binding = self.bind(&writer)?;
        writer.seal(&binding);
        self.view = Some(writer);
        Ok(())
    }

    /// `verify`'s comparison of the view with the store, given every stored record's hash.
    pub(super) fn view_check(&self, hashes: &[String]) -> Result<ViewCheck> {
        let path = self.dir.join(view::VIEW_FILE);
        let bytes = match std::fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ViewCheck::Missing),
            Err(e) => return Err(self.err(None, ErrorKind::io(format!("reading {}", path.display()), e))),
        };
        let binding = self.store.recorded_binding().map_err(|k| self.err(None, k))?;
        let scan = compare::scan(&bytes, &*self.projector);
        Ok(match compare::judge(&scan, hashes, binding.as_ref()) {
            ViewState::InSync => ViewCheck::Match { records: scan.last_seq() },
            ViewState::BehindByLastBatch { from, to } => ViewCheck::Behind { from, to },
            ViewState::Differs(d) => ViewCheck::Differs(d),
        })
    }
}

impl SledJournal {
    /// Whether the chain holds a record with this hash (a head printed earlier by
    /// `emend journal head`). A writer answers from the chain it checked when it opened the
    /// journal; a reader reads the store.
    pub fn contains_hash(&self, hash: &str) -> Result<bool> {
        if self.mode == crate::lock::OpenMode::Writer {
            return Ok(self.chain.iter().any(|h| h == hash));
        }
        Ok(self.read_from(1)?.iter().any(|r| r.hash == hash))
    }
}
