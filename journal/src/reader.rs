//! How readers open a journal ([`open_view`]): the published view, checked against the
//! store when nobody holds it, else against the seal the writer left (see the seal module).
//!
//! What a reader does with what it finds:
//! - the view matches the store (or its seal): it reads the view;
//! - the view is a true prefix of an idle store (a run stopped between the store's commit
//!   and the view's write, or the view was cut): it reads the store, the whole history,
//!   and warns that the view is behind;
//! - anything else (a bad frame, a gap, a broken chain, a record the store does not hold
//!   or holds otherwise, a view cut short of its seal): it refuses, naming the first seq
//!   that differs and `emend journal repair`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::{ErrorKind, JournalError, Result};
use crate::log::EventLog;
use crate::memory::MemoryJournal;
use crate::projection::{Projector, declared_trees};
use crate::record::{EventRecord, Head};
use crate::seal::{self, ViewBinding};
use crate::sled_journal::SledJournal;
use crate::verify::{ChainCheck, ProjectionCheck};
use crate::view::{self, ReadView, VIEW_FILE, ViewSource};

/// Open the journal in `dir` for reading without its lock: its published view, or the
/// store itself when the view is missing or behind and nobody holds the store.
pub fn open_view(dir: impl AsRef<Path>, projector: impl Projector + 'static) -> Result<ReadView> {
    let dir = dir.as_ref().to_path_buf();
    let at = |seq: Option<u64>, kind: ErrorKind| JournalError::new(Some(dir.clone()), seq, kind);
    // The seal first, then the view: a view read after its seal reaches at least as far.
    let sealed = seal::read_seal(&dir).map_err(|d| at(None, ErrorKind::corrupt(d)))?;
    let store = idle_store(&dir);
    let path = dir.join(VIEW_FILE);
    let projector: Box<dyn Projector> = Box::new(projector);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if !dir.join("sled").join("db").is_file() {
                return Err(at(None, ErrorKind::NotFound { path: dir.clone() }));
            }
            let store = match store {
                Some(s) => s,
                None => crate::sled_journal::open_reader(&dir, EventsOnly)?,
            };
            return from_store(&dir, &store, projector);
        }
        Err(e) => return Err(at(None, ErrorKind::io(format!("reading {}", path.display()), e))),
    };
    let (lines, pending) = view_lines(&bytes).map_err(|(seq, d)| refusal(&dir, seq, &d))?;
    let replayed = replay(&*projector, lines).map_err(|(seq, d)| match seq {
        Some(seq) => refusal(&dir, seq, &d),
        None => at(None, ErrorKind::corrupt(format!("replaying the read view: {d}"))),
    })?;
    match &store {
        Some(store) => match compare(store, &replayed)? {
            None => {}
            Some(Compared::Behind { view_seq, store_seq }) => {
                tracing::warn!(
                    view = %path.display(),
                    "the read view ends at seq {view_seq} but the store holds up to seq {store_seq}: reading the \
                     store (the next writer appends a batch a stopped run kept from the view; otherwise run \
                     `emend journal repair`)"
                );
                return from_store(&dir, store, projector);
            }
            Some(Compared::Differs { seq, detail }) => return Err(refusal(&dir, seq, &detail)),
        },
        None => {
            if let Some(sealed) = sealed {
                check_seal(&sealed, &replayed).map_err(|(seq, d)| refusal(&dir, seq, &d))?;
            }
        }
    }
    drop(store);
    let inner = MemoryJournal::from_parts(projector, replayed.events, replayed.trees, replayed.head);
    Ok(ReadView::new(inner, dir, ViewSource::Published, pending))
}

/// The error a reader gives for a view it will not print.
fn refusal(dir: &Path, seq: u64, detail: &str) -> JournalError {
    JournalError::new(
        Some(dir.to_path_buf()),
        Some(seq),
        ErrorKind::corrupt(format!(
            "the read view {} differs from the store at seq {seq}: {detail}; nothing was printed: run \
             `emend journal repair` to rebuild the view from the store (`emend journal verify` gives the full \
             report)",
            dir.join(VIEW_FILE).display()
        )),
    )
}

/// The store, when nobody holds it and it can be opened (taking its lock as a reader for as
/// long as the returned handle lives); `None` while a writer holds it, on a read-only
/// directory, or when it cannot be opened (`verify` and writers report why).
fn idle_store(dir: &Path) -> Option<SledJournal> {
    if !dir.join("sled").join("db").is_file() {
        return None;
    }
    match crate::sled_journal::open_reader(dir, EventsOnly) {
        Ok(store) => Some(store),
        Err(e) => {
            tracing::debug!(journal = %dir.display(), "reading the view without the store: {e}: {}", e.kind());
            None
        }
    }
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

enum Compared {
    Behind { view_seq: u64, store_seq: u64 },
    Differs { seq: u64, detail: String },
}

/// Compare a replayed view with the idle store: its binding, then the view's head. The
/// view's chain is intact, so a view whose last record is the store's holds the store's
/// records before it too (or the store's chain is broken, which writers and `verify` find).
fn compare(store: &SledJournal, view: &Replayed) -> Result<Option<Compared>> {
    let head = store.head();
    if let Some(b) = store.binding()?
        && (b.seq != head.seq || b.hash != head.hash)
    {
        let detail = format!(
            "the store's head is seq {}, but with its last batch it recorded a view ending at seq {} \
             (the store was truncated or rewritten)",
            head.seq, b.seq
        );
        return Ok(Some(Compared::Differs { seq: (head.seq + 1).min(b.seq), detail }));
    }
    let last = view.head.seq;
    if last > head.seq {
        let detail = format!("the view holds seq {}..{last}, which the store does not hold", head.seq + 1);
        return Ok(Some(Compared::Differs { seq: head.seq + 1, detail }));
    }
    if last > 0 && store_hash(store, last)?.as_deref() != Some(view.head.hash.as_str()) {
        // Name the first record that differs.
        let records = store.read_range(1, last as usize)?;
        for r in &records {
            let mine = view.events.get(&r.seq).and_then(|l| EventRecord::decode(l).ok()).map(|v| v.hash);
            if mine.as_deref() != Some(r.hash.as_str()) {
                let detail = format!("the view's record is not the store's (store hash {})", r.hash);
                return Ok(Some(Compared::Differs { seq: r.seq, detail }));
            }
        }
    }
    Ok((last < head.seq).then_some(Compared::Behind { view_seq: last, store_seq: head.seq }))
}

fn store_hash(store: &SledJournal, seq: u64) -> Result<Option<String>> {
    Ok(store.read_range(seq, 1)?.into_iter().find(|r| r.seq == seq).map(|r| r.hash))
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

/// Read the journal from the store itself (no view yet, or the view is behind).
fn from_store(dir: &Path, store: &SledJournal, projector: Box<dyn Projector>) -> Result<ReadView> {
    let at = |seq, kind| JournalError::new(Some(dir.to_path_buf()), seq, kind);
    let lines = store.read_from(1)?.iter().map(EventRecord::encode).collect();
    let replayed = replay(&*projector, lines).map_err(|(seq, d)| match seq {
        Some(seq) => at(Some(seq), ErrorKind::corrupt(format!("{d}; run `emend journal verify`"))),
        None => at(None, ErrorKind::corrupt(format!("replaying the journal failed: {d}"))),
    })?;
    let inner = MemoryJournal::from_parts(projector, replayed.events, replayed.trees, replayed.head);
    Ok(ReadView::new(inner, PathBuf::from(dir), ViewSource::Store, 0))
}

/// Reads the store's events only: projections are rebuilt from them in memory.
struct EventsOnly;

impl Projector for EventsOnly {
    fn trees(&self) -> Vec<String> {
        Vec::new()
    }
    fn project(
        &self,
        _state: &mut dyn crate::ProjectionState,
        _event: &EventRecord,
    ) -> std::result::Result<(), crate::ProjectError> {
        Ok(())
    }
}
