//! The writer's side of the view's binding to the store (see the seal module): bring the
//! view in line with the store at open, or refuse; rebuild it on `repair`; compare it for
//! `verify`.

use super::{SledJournal, Store, VIEW_KEY};
use crate::error::{ErrorKind, Result};
use crate::log::EventLog;
use crate::seal::{self, ViewBinding, ViewDifference, ViewState};
use crate::verify::ViewCheck;
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
    /// Bring the published view in line with the store, given the hash of every stored
    /// record. A view that matches is kept; one that lacks only the last batch (a crash
    /// between the store's commit and the view's write) gets it appended; a missing view
    /// is written. Any other difference is refused, naming the first differing seq, unless
    /// `repair`: then the view is rebuilt from the store and the difference returned.
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
        let scan = seal::scan(&bytes, &*self.projector);
        let open_at = |len| {
            ViewWriter::open_at(&self.dir, len)
                .map_err(|e| self.err(None, ErrorKind::io(format!("opening {}", path.display()), e)))
        };
        match seal::judge(&scan, hashes, binding.as_ref()) {
            ViewState::InSync => {
                let writer = open_at(scan.good_len)?;
                let binding = match binding {
                    Some(b) => b,
                    None => self.bind(writer.len())?,
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
                let mut writer = open_at(scan.good_len)?;
                let records = self.read_from(from)?;
                let planned = binding.unwrap_or_else(|| ViewBinding {
                    seq: self.head.seq,
                    hash: self.head.hash.clone(),
                    len: 0,
                    prev_seq: from - 1,
                    prev_len: scan.good_len,
                });
                writer.publish(&records, &planned);
                if writer.len() != planned.len {
                    let actual = self.bind(writer.len())?;
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

    /// Record (in the store) that the view ends at the head with `len` bytes, and return it.
    fn bind(&self, len: u64) -> Result<ViewBinding> {
        let binding = ViewBinding {
            seq: self.head.seq,
            hash: self.head.hash.clone(),
            len,
            prev_seq: self.head.seq,
            prev_len: len,
        };
        self.store.record_binding(&binding).map_err(|k| self.err(None, k))?;
        Ok(binding)
    }

    /// Write the whole view anew from the store, then bind and seal it.
    fn rewrite_view(&mut self) -> Result<()> {
        let records = self.read_from(1)?;
        let writer = ViewWriter::rewrite(&self.dir, records.into_iter().map(Ok)).map_err(|k| self.err(None, k))?;
        let binding = self.bind(writer.len())?;
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
        let scan = seal::scan(&bytes, &*self.projector);
        Ok(match seal::judge(&scan, hashes, binding.as_ref()) {
            ViewState::InSync => ViewCheck::Match { records: scan.last_seq() },
            ViewState::BehindByLastBatch { from, to } => ViewCheck::Behind { from, to },
            ViewState::Differs(d) => ViewCheck::Differs(d),
        })
    }
}

impl SledJournal {
    /// Where the store recorded the view to end with its last batch (`None` for a journal
    /// written before bindings).
    pub(crate) fn binding(&self) -> Result<Option<ViewBinding>> {
        self.store.recorded_binding().map_err(|k| self.err(None, k))
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
