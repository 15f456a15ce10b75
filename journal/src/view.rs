//! The published read view: what read commands open instead of the writer's store.
//!
//! sled holds an exclusive lock on its database, so a reader cannot open the store a writer
//! has open. Instead the writer publishes every committed batch to `<dir>/events.log`, an
//! append-only file that readers open without any lock:
//!
//! ```text
//! header   the 21 bytes `emend-journal-view/1\n`
//! frame*   len: u64 big-endian | body: len bytes | check: first 8 bytes of SHA-256(body)
//! body     the batch's records, each as its JSON line followed by `\n`; a body of at
//!          least 1 KiB is stored zstd-compressed (it then starts with zstd's magic
//!          number instead of `{`)
//! ```
//!
//! One frame is one committed batch, written with one `write` after sled has flushed the
//! batch. A reader reads the frames in order and stops at the first incomplete one (a
//! write in progress), so it sees the journal as of a committed batch, never a torn one. It
//! checks the hash chain of every record and replays the projector over them in memory
//! ([`ReadView`]), so it never touches the sled store and works on a read-only directory.
//!
//! The store stays the authority: when the writer opens the journal it brings the view in
//! line with the store (drops a torn tail, appends batches it lacks, or rewrites it when it
//! disagrees), so a view lost or damaged by a crash or by hand is repaired by the next writer.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::error::{ErrorKind, JournalError, Result};
use crate::log::EventLog;
use crate::memory::MemoryJournal;
use crate::projection::{Projector, declared_trees};
use crate::record::{EventRecord, Head, NewEvent, compress, maybe_decompress};
use crate::verify::{ChainCheck, ProjectionCheck, VerifyReport};

/// Name of the published view inside the journal directory.
pub const VIEW_FILE: &str = "events.log";
const VIEW_TMP: &str = "events.log.tmp";
const HEADER: &[u8] = b"emend-journal-view/1\n";
const CHECK_LEN: usize = 8;

fn checksum(body: &[u8]) -> [u8; CHECK_LEN] {
    let digest = Sha256::digest(body);
    let mut out = [0u8; CHECK_LEN];
    out.copy_from_slice(&digest[..CHECK_LEN]);
    out
}

/// One frame holding `records`.
pub(crate) fn frame(records: &[EventRecord]) -> Vec<u8> {
    frame_lines(&records.iter().map(EventRecord::encode).collect::<Vec<_>>())
}

/// One frame holding records already encoded as JSON lines.
pub(crate) fn frame_lines(lines: &[Vec<u8>]) -> Vec<u8> {
    let mut body = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for line in lines {
        body.extend_from_slice(line);
        body.push(b'\n');
    }
    let body = compress(body);
    let mut out = Vec::with_capacity(body.len() + 16);
    out.extend_from_slice(&(body.len() as u64).to_be_bytes());
    out.extend_from_slice(&body);
    out.extend_from_slice(&checksum(&body));
    out
}

/// The complete frames of a view file's bytes.
pub(crate) struct Frames<'a> {
    /// Frame bodies, in order.
    pub bodies: Vec<&'a [u8]>,
    /// Bytes up to the end of the last complete frame (the header alone when none).
    pub good_len: u64,
    /// Bytes after the last complete frame (a write in progress, or a torn tail).
    pub trailing: u64,
}

/// Split view bytes into frames. `Err` when the header is not ours.
pub(crate) fn frames(bytes: &[u8]) -> std::result::Result<Frames<'_>, String> {
    if !bytes.starts_with(HEADER) {
        return Err(format!("{VIEW_FILE} does not start with the header {:?}", String::from_utf8_lossy(HEADER)));
    }
    let mut at = HEADER.len();
    let mut bodies = Vec::new();
    while let Some(len_bytes) = bytes.get(at..at + 8) {
        let len = u64::from_be_bytes(len_bytes.try_into().expect("8 bytes")) as usize;
        let body_end = match (at + 8).checked_add(len) {
            Some(end) if end.checked_add(CHECK_LEN).is_some_and(|e| e <= bytes.len()) => end,
            _ => break,
        };
        let body = &bytes[at + 8..body_end];
        if bytes[body_end..body_end + CHECK_LEN] != checksum(body) {
            // The last frame may be a write cut short by a crash; one followed by more
            // frames was complete once and has been changed since.
            if body_end + CHECK_LEN == bytes.len() {
                break;
            }
            return Err(format!("{VIEW_FILE}: the frame at byte {at} fails its checksum (edited or damaged)"));
        }
        bodies.push(body);
        at = body_end + CHECK_LEN;
    }
    Ok(Frames { bodies, good_len: at as u64, trailing: (bytes.len() - at) as u64 })
}

/// The plain text of a frame body (decompressed when it was stored compressed).
fn body_text(body: &[u8]) -> std::result::Result<Cow<'_, [u8]>, String> {
    maybe_decompress(body).map_err(|e| format!("{VIEW_FILE}: a frame body: {e}"))
}

/// The records of a frame body's text, in order, with the line's own bytes.
fn body_lines(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    text.split(|b| *b == b'\n').filter(|l| !l.is_empty())
}

/// The last record of the last complete frame, if any.
pub(crate) fn last_record(frames: &Frames<'_>) -> std::result::Result<Option<EventRecord>, String> {
    let Some(body) = frames.bodies.last() else { return Ok(None) };
    let text = body_text(body)?;
    match body_lines(&text).last() {
        None => Ok(None),
        Some(line) => EventRecord::decode(line).map(Some),
    }
}

/// The writer's handle on the view: appends one frame per committed batch.
pub(crate) struct ViewWriter {
    file: File,
    path: PathBuf,
    len: u64,
    /// False after a failed write: the writer stops publishing and the next writer to open
    /// the journal rewrites the view from the store.
    healthy: bool,
}

impl ViewWriter {
    /// Open the view for appending after its last complete frame (a torn tail is cut).
    pub(crate) fn open_at(dir: &Path, good_len: u64) -> std::io::Result<Self> {
        let path = dir.join(VIEW_FILE);
        let file = OpenOptions::new().write(true).open(&path)?;
        file.set_len(good_len)?;
        Ok(ViewWriter { file, path, len: good_len, healthy: true })
    }

    /// Write a new view holding `records` beside the old one and rename it into place.
    pub(crate) fn rewrite(
        dir: &Path,
        records: impl Iterator<Item = Result<EventRecord, ErrorKind>>,
    ) -> Result<Self, ErrorKind> {
        let tmp = dir.join(VIEW_TMP);
        let path = dir.join(VIEW_FILE);
        let io = |what: &str, e| ErrorKind::io(format!("{what} {}", tmp.display()), e);
        let mut file = File::create(&tmp).map_err(|e| io("creating", e))?;
        file.write_all(HEADER).map_err(|e| io("writing", e))?;
        let mut len = HEADER.len() as u64;
        let mut chunk = Vec::new();
        let flush_chunk = |chunk: &mut Vec<EventRecord>, file: &mut File, len: &mut u64| -> Result<(), ErrorKind> {
            if chunk.is_empty() {
                return Ok(());
            }
            let bytes = frame(chunk);
            file.write_all(&bytes)
                .map_err(|e| ErrorKind::io(format!("writing {}", dir.join(VIEW_TMP).display()), e))?;
            *len += bytes.len() as u64;
            chunk.clear();
            Ok(())
        };
        for record in records {
            chunk.push(record?);
            if chunk.len() >= 512 {
                flush_chunk(&mut chunk, &mut file, &mut len)?;
            }
        }
        flush_chunk(&mut chunk, &mut file, &mut len)?;
        file.sync_all().map_err(|e| io("syncing", e))?;
        drop(file);
        std::fs::rename(&tmp, &path)
            .map_err(|e| ErrorKind::io(format!("renaming {} to {}", tmp.display(), path.display()), e))?;
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        let file = OpenOptions::new().write(true).open(&path).map_err(|e| io("reopening", e))?;
        Ok(ViewWriter { file, path, len, healthy: true })
    }

    /// Publish a committed batch. A failure is logged, not returned: the batch is already
    /// durable in the store, and the next writer repairs the view.
    pub(crate) fn publish(&mut self, records: &[EventRecord]) {
        let lines: Vec<Vec<u8>> = records.iter().map(EventRecord::encode).collect();
        self.publish_lines(records.first().map_or(0, |r| r.seq), &lines);
    }

    /// [`Self::publish`] for records already encoded as JSON lines, the first one `first_seq`.
    pub(crate) fn publish_lines(&mut self, first_seq: u64, lines: &[Vec<u8>]) {
        if !self.healthy || lines.is_empty() {
            return;
        }
        let bytes = frame_lines(lines);
        let written = self.file.seek(SeekFrom::Start(self.len)).and_then(|_| self.file.write_all(&bytes));
        match written {
            Ok(()) => self.len += bytes.len() as u64,
            Err(e) => {
                self.healthy = false;
                // Cut what was half written, so that no later frame follows a torn one.
                let _ = self.file.set_len(self.len);
                tracing::warn!(
                    view = %self.path.display(),
                    "could not publish events to the read view ({e}); readers see the journal as of seq {} \
                     until the next run repairs the view",
                    first_seq.saturating_sub(1)
                );
            }
        }
    }
}

/// Remove a leftover of an interrupted view rewrite.
pub(crate) fn remove_leftover(dir: &Path) {
    let tmp = dir.join(VIEW_TMP);
    if tmp.exists() {
        match std::fs::remove_file(&tmp) {
            Ok(()) => tracing::info!(file = %tmp.display(), "removed the leftover of an interrupted view rewrite"),
            Err(e) => tracing::warn!(file = %tmp.display(), "could not remove a leftover view rewrite: {e}"),
        }
    }
}

/// Where a [`ReadView`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViewSource {
    /// The published `events.log`.
    Published,
    /// The sled store itself (a journal written before views existed, while nobody held it).
    Store,
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

/// Open the journal in `dir` for reading without its lock: its published view, or (for a
/// journal that has none yet) the store itself when nobody holds it.
pub fn open_view(dir: impl AsRef<Path>, projector: impl Projector + 'static) -> Result<ReadView> {
    let dir = dir.as_ref().to_path_buf();
    let at = |seq: Option<u64>, kind: ErrorKind| JournalError::new(Some(dir.clone()), seq, kind);
    let path = dir.join(VIEW_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if !dir.join("sled").join("db").is_file() {
                return Err(at(None, ErrorKind::NotFound { path: dir.clone() }));
            }
            return from_store(&dir, projector);
        }
        Err(e) => return Err(at(None, ErrorKind::io(format!("reading {}", path.display()), e))),
    };
    let frames = frames(&bytes).map_err(|d| at(None, ErrorKind::corrupt(d)))?;
    let projector: Box<dyn Projector> = Box::new(projector);
    let declared = declared_trees(&*projector);
    let mut check = ChainCheck::new(&*projector, &declared);
    let mut events = BTreeMap::new();
    for body in &frames.bodies {
        let text = body_text(body).map_err(|d| at(None, ErrorKind::corrupt(d)))?;
        for line in body_lines(&text) {
            let seq = check.last_good().seq + 1;
            if !check.feed(&seq.to_be_bytes(), line) {
                break;
            }
            events.insert(seq, line.to_vec());
        }
    }
    let (report, rebuilt) = check.finish(None);
    if let Some(b) = &report.chain_break {
        return Err(at(
            Some(b.seq),
            ErrorKind::corrupt(format!(
                "the published read view {} is damaged at {b}; run `emend journal verify` (a writer rewrites \
                 the view from the store when it next opens the journal)",
                path.display()
            )),
        ));
    }
    let Some(trees) = rebuilt else {
        let reason = match report.projections {
            ProjectionCheck::NotChecked { reason } => reason,
            _ => "unknown".to_owned(),
        };
        return Err(at(None, ErrorKind::corrupt(format!("replaying the read view: {reason}"))));
    };
    let inner = MemoryJournal::from_parts(projector, events, trees, report.last_good);
    Ok(ReadView { inner, dir, source: ViewSource::Published, pending_bytes: frames.trailing })
}

/// A journal with no view yet: read the store once (taking its lock as a reader briefly).
fn from_store(dir: &Path, projector: impl Projector + 'static) -> Result<ReadView> {
    let projector: Box<dyn Projector> = Box::new(projector);
    let records = {
        let store = crate::sled_journal::open_reader(dir, EventsOnly)?;
        store.read_from(1)?
    };
    let declared = declared_trees(&*projector);
    let mut check = ChainCheck::new(&*projector, &declared);
    let mut events = BTreeMap::new();
    for r in &records {
        let line = r.encode();
        if !check.feed(&r.seq.to_be_bytes(), &line) {
            break;
        }
        events.insert(r.seq, line);
    }
    let (report, rebuilt) = check.finish(None);
    let at = |seq, kind| JournalError::new(Some(dir.to_path_buf()), seq, kind);
    if let Some(b) = &report.chain_break {
        return Err(at(Some(b.seq), ErrorKind::corrupt(format!("{b}; run `emend journal verify`"))));
    }
    let trees = rebuilt.ok_or_else(|| at(None, ErrorKind::corrupt("replaying the journal failed")))?;
    let inner = MemoryJournal::from_parts(projector, events, trees, report.last_good);
    Ok(ReadView { inner, dir: dir.to_path_buf(), source: ViewSource::Store, pending_bytes: 0 })
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

impl ReadView {
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
        self.inner.verify()
    }

    fn rebuild(&mut self) -> Result<()> {
        Err(self.read_only())
    }
}
