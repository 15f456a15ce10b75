//! How readers open a journal ([`open_view`]): the published view, checked on its own and
//! against the seal the writer left (see the seal module). A reader never opens the store:
//! sled takes an exclusive lock and writes files when it opens a database, and a reader must
//! neither get in a writer's way nor write anything (it works on a read-only project).
//!
//! What a reader checks: every frame's checksum, the whole hash chain of the view (seqs,
//! hashes, links: a frame missing from the middle breaks it), and that the view reaches
//! the seq the seal names and carries the sealed hash there (a view cut short or forged
//! without its seal). A view ahead of its seal is a batch being published. A view and seal
//! forged together with a recomputed chain pass these checks: `journal verify` and every
//! writer, which compare the view with the store, find it.
//!
//! A reader that finds the view inconsistent refuses, naming the first seq that differs and
//! `emend journal repair`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::{ErrorKind, JournalError, Result};
use crate::log::EventLog;
use crate::memory::MemoryJournal;
use crate::projection::{Projector, declared_trees};
use crate::record::{EventRecord, Head, NewEvent};
use crate::seal::{self, ViewBinding};
use crate::verify::{ChainCheck, ProjectionCheck, VerifyReport};
use crate::view::{self, VIEW_FILE};

/// Open the journal in `dir` for reading, without its lock and without writing anything:
/// its published view, checked on its own and against the writer's seal.
pub fn open_view(dir: impl AsRef<Path>, projector: impl Projector + 'static) -> Result<ReadView> {
    let dir = dir.as_ref().to_path_buf();
    let at = |seq: Option<u64>, kind: ErrorKind| JournalError::new(Some(dir.clone()), seq, kind);
    // The seal first, then the view: a view read after its seal reaches at least as far.
    let sealed = seal::read_seal(&dir).map_err(|d| at(None, ErrorKind::corrupt(d)))?;
    let path = dir.join(VIEW_FILE);
    let projector: Box<dyn Projector> = Box::new(projector);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if !dir.join("sled").join("db").is_file() {
                return Err(at(None, ErrorKind::NotFound { path: dir.clone() }));
            }
            let detail = "there is no read view (the store holds the journal; a writer writes the view from it)";
            return Err(refusal(&dir, 1, detail));
        }
        Err(e) => return Err(at(None, ErrorKind::io(format!("reading {}", path.display()), e))),
    };
    let (lines, pending) = view_lines(&bytes).map_err(|(seq, d)| refusal(&dir, seq, &d))?;
    let replayed = replay(&*projector, lines).map_err(|(seq, d)| match seq {
        Some(seq) => refusal(&dir, seq, &d),
        None => at(None, ErrorKind::corrupt(format!("replaying the read view: {d}"))),
    })?;
    if let Some(sealed) = sealed {
        check_seal(&sealed, &replayed).map_err(|(seq, d)| refusal(&dir, seq, &d))?;
    }
    let inner = MemoryJournal::from_parts(projector, replayed.events, replayed.trees, replayed.head);
    Ok(ReadView::new(inner, dir, ViewSource::Published, pending))
}

/// The error a reader gives for a view it will not print.
fn refusal(dir: &Path, seq: u64, detail: &str) -> JournalError {
    JournalError::new(
        Some(dir.to_path_buf()),
        Some(seq),
        ErrorKind::corrupt(format!(
            "the read view {} is not whole at seq {seq}: {detail}; nothing was printed: run \
             `emend journal repair` to rebuild the view from the store (`emend journal verify` gives the full \
             report)",
            dir.join(VIEW_FILE).display()
        )),
    )
}

/// Every record line of the view's intact frames, and the bytes after them. `Err` names
/// the first seq a damaged frame would hold.
/// A seq and what is wrong there.
type Problem = (u64, String);

fn view_lines(bytes: &[u8]) -> std::result::Result<(Vec<Vec<u8>>, u64), Problem> {
    let frames = view::frames(bytes).map_err(|d| (1, d))?;
    let mut lines = Vec::new();
    for body in &frames.bodies {
        let text = view::body_text(body).map_err(|d| (lines.len() as u64 + 1, d))?;
        lines.extend(view::body_lines(&text).map(<[u8]>::to_vec));
    }
    if let Some(detail) = frames.damaged {
        return Err((lines.len() as u64 + 1, detail));
    }
    Ok((lines, frames.trailing))
}

/// Records checked and replayed.
struct Replayed {
    events: BTreeMap<u64, Vec<u8>>,
    trees: crate::projection::Rebuilt,
    head: Head,
}

/// Check the chain of `lines` (seq 1 first) and replay the projector over them. `Err`
/// names the seq of a chain break (`None`: the projector failed).
fn replay(projector: &dyn Projector, lines: Vec<Vec<u8>>) -> std::result::Result<Replayed, (Option<u64>, String)> {
    let declared = declared_trees(projector);
    let mut check = ChainCheck::new(projector, &declared);
    let mut events = BTreeMap::new();
    for line in lines {
        let seq = check.last_good().seq + 1;
        if !check.feed(&seq.to_be_bytes(), &line) {
            break;
        }
        events.insert(seq, line);
    }
    let (report, rebuilt) = check.finish(None);
    if let Some(b) = &report.chain_break {
        return Err((Some(b.seq), b.to_string()));
    }
    let Some(trees) = rebuilt else {
        let reason = match report.projections {
            ProjectionCheck::NotChecked { reason } => reason,
            _ => "unknown".to_owned(),
        };
        return Err((None, reason));
    };
    Ok(Replayed { events, trees, head: report.last_good })
}

/// Check a replayed view against the seal the writer left after its last published batch.
fn check_seal(sealed: &ViewBinding, view: &Replayed) -> std::result::Result<(), (u64, String)> {
    if sealed.seq == 0 {
        return Ok(());
    }
    if view.head.seq < sealed.seq {
        let detail = format!(
            "the view ends at seq {}, but the writer sealed it at seq {} (the view was cut)",
            view.head.seq, sealed.seq
        );
        return Err((view.head.seq + 1, detail));
    }
    let mine = view.events.get(&sealed.seq).and_then(|l| EventRecord::decode(l).ok()).map(|r| r.hash);
    if mine.as_deref() != Some(sealed.hash.as_str()) {
        let detail = format!("the view's record is not the one the writer sealed (hash {})", sealed.hash);
        return Err((sealed.seq, detail));
    }
    Ok(())
}

/// Where a [`ReadView`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewSource {
    /// The published `events.log` (readers never open the store itself).
    Published,
}

/// The journal as of its last published batch, read without the writer's lock. Reads and
/// `verify` work as on any [`EventLog`]; `append` and `rebuild` fail with
/// [`ErrorKind::ReadOnly`].
pub struct ReadView {
    inner: MemoryJournal,
    dir: PathBuf,
    source: ViewSource,
    /// Bytes after the last complete frame when the view was read (a write in progress).
    pending_bytes: u64,
}

impl std::fmt::Debug for ReadView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadView")
            .field("dir", &self.dir)
            .field("source", &self.source)
            .field("head", &self.inner.head())
            .finish_non_exhaustive()
    }
}

impl ReadView {
    pub(crate) fn new(inner: MemoryJournal, dir: PathBuf, source: ViewSource, pending_bytes: u64) -> Self {
        ReadView { inner, dir, source, pending_bytes }
    }

    /// The journal directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the view was read from.
    pub fn source(&self) -> ViewSource {
        self.source
    }

    /// Bytes of a batch being published when the view was read (not included).
    pub fn pending_bytes(&self) -> u64 {
        self.pending_bytes
    }

    fn read_only(&self) -> JournalError {
        JournalError::new(Some(self.dir.clone()), None, ErrorKind::ReadOnly)
    }
}

impl EventLog for ReadView {
    fn append(&mut self, _events: Vec<NewEvent>) -> Result<Vec<EventRecord>> {
        Err(self.read_only())
    }

    fn read_range(&self, from: u64, limit: usize) -> Result<Vec<EventRecord>> {
        self.inner.read_range(from, limit)
    }

    fn head(&self) -> Head {
        self.inner.head()
    }

    fn get(&self, tree: &str, key: &str) -> Result<Option<Value>> {
        self.inner.get(tree, key)
    }

    fn scan(&self, tree: &str, prefix: &str) -> Result<Vec<(String, Value)>> {
        self.inner.scan(tree, prefix)
    }

    fn verify(&self) -> Result<VerifyReport> {
        let mut report = self.inner.verify()?;
        report.view = crate::verify::ViewCheck::NotChecked {
            reason: "the view itself was verified, not the store (a writer holds it, or it is read-only)".to_owned(),
        };
        Ok(report)
    }

    fn rebuild(&mut self) -> Result<()> {
        Err(self.read_only())
    }
}
