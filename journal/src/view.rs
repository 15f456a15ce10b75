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
//! ([`crate::ReadView`], in the reader module); it works on a read-only directory.
//!
//! The store stays the authority and the view is a cache of it, bound to it (see the seal
//! module): readers check the view's frames, chain and seal, never opening the store;
//! `verify` and the writer compare it with the store (the compare module). The writer,
//! when it opens the journal, drops a torn tail, appends the one batch a stopped run kept
//! from the view, writes a missing view, and refuses any other difference until
//! `emend journal repair` ([`crate::repair`]) rebuilds the view from the store.

use std::borrow::Cow;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{ErrorKind, Result};
use crate::record::{EventRecord, compress, maybe_decompress};
use crate::seal::{ViewBinding, write_seal};

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
    /// The offset of a last frame that is complete but fails its checksum: a write in
    /// progress to a reader, an edit to a writer (which has the journal to itself).
    pub bad_tail: Option<u64>,
    /// A frame followed by more frames that fails its checksum (edited or damaged): the
    /// frames before it are in `bodies`, none after.
    pub damaged: Option<String>,
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
    let mut bad_tail = None;
    let mut damaged = None;
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
                bad_tail = Some(at as u64);
                break;
            }
            damaged = Some(format!("{VIEW_FILE}: the frame at byte {at} fails its checksum (edited or damaged)"));
            break;
        }
        bodies.push(body);
        at = body_end + CHECK_LEN;
    }
    Ok(Frames { bodies, bad_tail, damaged, good_len: at as u64, trailing: (bytes.len() - at) as u64 })
}

/// The plain text of a frame body (decompressed when it was stored compressed).
pub(crate) fn body_text(body: &[u8]) -> std::result::Result<Cow<'_, [u8]>, String> {
    maybe_decompress(body).map_err(|e| format!("{VIEW_FILE}: a frame body: {e}"))
}

/// The records of a frame body's text, in order, with the line's own bytes.
pub(crate) fn body_lines(text: &[u8]) -> impl Iterator<Item = &[u8]> {
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
    /// SHA-256 over the view's bytes so far (`len` of them).
    hasher: Sha256,
    /// False after a failed write: the writer stops publishing; the view then lags behind
    /// the store until `emend journal repair` rebuilds it.
    healthy: bool,
}

impl ViewWriter {
    /// Open the view for appending after its last complete frame (a torn tail is cut),
    /// given its bytes up to there.
    pub(crate) fn open_at(dir: &Path, kept: &[u8]) -> std::io::Result<Self> {
        let path = dir.join(VIEW_FILE);
        let file = OpenOptions::new().write(true).open(&path)?;
        file.set_len(kept.len() as u64)?;
        let mut hasher = Sha256::new();
        hasher.update(kept);
        Ok(ViewWriter { file, path, len: kept.len() as u64, hasher, healthy: true })
    }

    /// SHA-256 (hex) of the view as written so far.
    pub(crate) fn digest(&self) -> String {
        hex::encode(self.hasher.clone().finalize())
    }

    /// SHA-256 (hex) of the view once `frame` is appended.
    pub(crate) fn digest_after(&self, frame: &[u8]) -> String {
        let mut h = self.hasher.clone();
        h.update(frame);
        hex::encode(h.finalize())
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
        let mut hasher = Sha256::new();
        hasher.update(HEADER);
        let mut chunk = Vec::new();
        let mut flush_chunk = |chunk: &mut Vec<EventRecord>, file: &mut File| -> Result<(), ErrorKind> {
            if chunk.is_empty() {
                return Ok(());
            }
            let bytes = frame(chunk);
            file.write_all(&bytes)
                .map_err(|e| ErrorKind::io(format!("writing {}", dir.join(VIEW_TMP).display()), e))?;
            len += bytes.len() as u64;
            hasher.update(&bytes);
            chunk.clear();
            Ok(())
        };
        for record in records {
            chunk.push(record?);
            if chunk.len() >= 512 {
                flush_chunk(&mut chunk, &mut file)?;
            }
        }
        flush_chunk(&mut chunk, &mut file)?;
        file.sync_all().map_err(|e| io("syncing", e))?;
        drop(file);
        std::fs::rename(&tmp, &path)
            .map_err(|e| ErrorKind::io(format!("renaming {} to {}", tmp.display(), path.display()), e))?;
        if let Ok(d) = File::open(dir) {
            let _ = d.sync_all();
        }
        let file = OpenOptions::new().write(true).open(&path).map_err(|e| io("reopening", e))?;
        Ok(ViewWriter { file, path, len, hasher, healthy: true })
    }

    /// The view's length in bytes as this writer has written it.
    pub(crate) fn len(&self) -> u64 {
        self.len
    }

    /// Publish records read back from the store (the batch a crash kept from the view),
    /// then seal the view at `binding`.
    pub(crate) fn publish(&mut self, records: &[EventRecord], binding: &ViewBinding) {
        let first_seq = records.first().map_or(0, |r| r.seq);
        self.publish_frame(first_seq, &frame(records), binding);
    }

    /// Publish a committed batch's frame (the records from `first_seq` on), then seal the
    /// view at `binding`. A failure is logged, not returned: the batch is already durable in
    /// the store; the view then lags behind it, and the next writer refuses to write until
    /// `emend journal repair` rebuilds it.
    pub(crate) fn publish_frame(&mut self, first_seq: u64, bytes: &[u8], binding: &ViewBinding) {
        if !self.healthy || bytes.is_empty() {
            return;
        }
        let written = self.file.seek(SeekFrom::Start(self.len)).and_then(|_| self.file.write_all(bytes));
        match written {
            Ok(()) => {
                self.len += bytes.len() as u64;
                self.hasher.update(bytes);
                self.seal(binding);
            }
            Err(e) => {
                self.healthy = false;
                // Cut what was half written, so that no later frame follows a torn one.
                let _ = self.file.set_len(self.len);
                tracing::warn!(
                    view = %self.path.display(),
                    "could not publish events to the read view ({e}); readers see the journal as of seq {} \
                     until `emend journal repair` rebuilds the view",
                    first_seq.saturating_sub(1)
                );
            }
        }
    }

    /// Write the seal readers check the view against (see the seal module).
    pub(crate) fn seal(&self, binding: &ViewBinding) {
        if let Some(dir) = self.path.parent() {
            write_seal(dir, binding);
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
