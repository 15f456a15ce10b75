//! The durable journal on sled.
//!
//! On-disk layout of a journal directory:
//!
//! ```text
//! <dir>/LOCK           who holds the journal (see the lock module)
//! <dir>/events.log     the published read view (see the view module)
//! <dir>/events.seal    where the view ends, for readers (see the seal module)
//! <dir>/sled/          the sled database:
//!   tree `events`      key: seq as 8 bytes big-endian -> value: the record's JSON line,
//!                      zstd-compressed (with its checksum) when it is 1 KiB or more; plain
//!                      JSON lines (every record of journals written before) read as well
//!   tree `meta`        `format_version` -> u32 big-endian; `head` -> JSON {"seq","hash"};
//!                      `digest:<name>` -> 32 bytes: the XOR of SHA-256 over every entry of
//!                      projection `<name>` (see [`entry_digest`]); `events_digest` -> 32
//!                      bytes: the same over every stored record; `view` -> JSON: where the
//!                      read view ends after the last batch and the SHA-256 of its bytes
//!                      (see the seal module)
//!   tree `proj:<name>` one per stored projection: key UTF-8 -> value: canonical JSON
//! ```
//!
//! Projections the projector names in [`Projector::memory_trees`] are not stored: the
//! journal rebuilds them from the events the first time it needs them and keeps them in
//! memory, updating them after each committed batch. A journal written when such a tree
//! was stored still has its `proj:<name>` tree: the writer drops it (and its digest) when it
//! opens the journal, saying so in its log; a reader leaves it and `verify` compares it
//! with the rebuild like any stored tree.
//!
//! A batch (events, head, projection writes and their digests) is one sled transaction over
//! all the trees it touches, flushed before `append` returns: an acknowledged batch is
//! durable, and a crash leaves the whole batch or none of it. Then the batch is published
//! to the read view.
//!
//! A writer refuses a damaged journal: when it opens the journal it checks the whole chain
//! (sequence numbers, links, the recorded head, and the stored records against their
//! checksum; see the chain module) and recomputes each projection's digest from its stored
//! entries, which is cheap (no replay); any mismatch is an error naming the seq or the
//! projection. It then checks the read view against the store (by the digest of its bytes,
//! record by record on a mismatch) and refuses a view that differs (see the seal module)
//! until [`repair`] rebuilds it. Before each batch it checks that the file system has room
//! ([`SledJournal::set_min_free_bytes`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde_json::Value;
use sled::transaction::{ConflictableTransactionError, TransactionError, Transactional};
use sled::{Db, Tree};

use sha2::{Digest, Sha256};

use crate::error::{ErrorKind, JournalError, Result};
use crate::lock::{JournalLock, LockHolder, OpenMode};
use crate::log::EventLog;
use crate::projection::{ProjectionBase, Projector, Replay, Writes, declared_trees, plan_batch};
use crate::record::{EventRecord, Head, NewEvent, canonical_json_bytes, compress};
use crate::seal::ViewBinding;
use crate::verify::ViewDifference;
use crate::verify::{ChainCheck, ProjectionDiff, VerifyReport, ViewCheck, compare_tree, conclude};
use crate::view::{self, ViewWriter};

mod binding;
mod chain;
mod files;

use files::{open_db, open_error, remove_snapshot_leftovers};

/// The on-disk format this build reads and writes. Bump it on any incompatible change to
/// the layout above or to the record hash.
pub const FORMAT_VERSION: u32 = 1;

const SLED_DIR: &str = "sled";
const EVENTS_TREE: &str = "events";
const META_TREE: &str = "meta";
const PROJECTION_PREFIX: &str = "proj:";
const FORMAT_KEY: &[u8] = b"format_version";
const HEAD_KEY: &[u8] = b"head";
const DIGEST_PREFIX: &str = "digest:";
const VIEW_KEY: &[u8] = b"view";
/// The XOR of [`entry_digest`] over every stored record (key and stored bytes).
const EVENTS_DIGEST_KEY: &[u8] = b"events_digest";

/// Free space a writer wants on the journal's file system before it writes a batch.
pub const DEFAULT_MIN_FREE_BYTES: u64 = 16 * 1024 * 1024;

/// A projection's digest: the XOR of [`entry_digest`] over its entries. XOR makes it
/// order-free and updatable per write: remove the old entry's digest, add the new one's.
type TreeDigest = [u8; 32];

/// SHA-256 over one stored projection entry (key and value length-prefixed).
fn entry_digest(key: &[u8], value: &[u8]) -> TreeDigest {
    let mut h = Sha256::new();
    h.update((key.len() as u64).to_be_bytes());
    h.update(key);
    h.update((value.len() as u64).to_be_bytes());
    h.update(value);
    h.finalize().into()
}

fn xor_into(acc: &mut TreeDigest, d: &TreeDigest) {
    for (a, b) in acc.iter_mut().zip(d) {
        *a ^= b;
    }
}

fn digest_key(tree: &str) -> Vec<u8> {
    format!("{DIGEST_PREFIX}{tree}").into_bytes()
}

/// A journal on disk, opened as the single writer or as a reader.
pub struct SledJournal {
    // Field order matters: the database must close before the lock is released.
    store: Store,
    lock: JournalLock,
    dir: PathBuf,
    mode: OpenMode,
    projector: Box<dyn Projector>,
    declared: BTreeSet<String>,
    head: Head,
    took_over: Option<LockHolder>,
    /// The read view this writer publishes to (`None` for a reader).
    view: Option<ViewWriter>,
    min_free: u64,
    /// The projector's memory-only trees ([`Projector::memory_trees`]) ...
    memory_names: BTreeSet<String>,
    /// ... and their content, rebuilt from the events on first use.
    memory: OnceLock<MemoryTrees>,
    /// A reader's handle on memory-only trees a journal from before still stores.
    legacy: BTreeMap<String, Tree>,
    /// What [`repair`] found wrong with the view (and rewrote).
    repaired: Option<ViewDifference>,
    /// A writer's hash of every record, seq 1 first (checked at open, kept up to date).
    chain: Vec<String>,
}

/// Memory-only projection trees: name -> key -> value.
type MemoryTrees = BTreeMap<String, BTreeMap<String, Value>>;

impl std::fmt::Debug for SledJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SledJournal")
            .field("dir", &self.dir)
            .field("mode", &self.mode)
            .field("head", &self.head)
            .field("lock", &self.lock)
            .finish_non_exhaustive()
    }
}

struct Store {
    db: Db,
    events: Tree,
    meta: Tree,
    projections: BTreeMap<String, Tree>,
}

struct SledBase<'a> {
    stored: &'a BTreeMap<String, Tree>,
    memory: &'a MemoryTrees,
}

impl ProjectionBase for SledBase<'_> {
    fn read(&self, tree: &str, key: &str) -> Result<Option<Value>, ErrorKind> {
        if let Some(t) = self.memory.get(tree) {
            return Ok(t.get(key).cloned());
        }
        let Some(t) = self.stored.get(tree) else {
            return Ok(None);
        };
        match t.get(key.as_bytes())? {
            None => Ok(None),
            Some(bytes) => decode_value(tree, key, &bytes).map(Some),
        }
    }
}

fn decode_value(tree: &str, key: &str, bytes: &[u8]) -> Result<Value, ErrorKind> {
    serde_json::from_slice(bytes)
        .map_err(|e| ErrorKind::corrupt(format!("projection `{tree}` key `{key}` holds invalid JSON: {e}")))
}

/// Open (creating if needed) the journal in `dir` as its single writer.
///
/// Fails with [`ErrorKind::Corrupt`], naming the seq or the projection, when the chain or a
/// projection's digest does not check out: nothing is ever written to a damaged journal.
pub fn open_writer(dir: impl AsRef<Path>, projector: impl Projector + 'static) -> Result<SledJournal> {
    SledJournal::open(dir.as_ref(), Box::new(projector), OpenMode::Writer, Checks::Full)
}

/// Open the existing journal in `dir` for reading; never creates one.
pub fn open_reader(dir: impl AsRef<Path>, projector: impl Projector + 'static) -> Result<SledJournal> {
    SledJournal::open(dir.as_ref(), Box::new(projector), OpenMode::Reader, Checks::Full)
}

/// Open the journal in `dir` as a reader and verify it (see [`EventLog::verify`]).
pub fn verify(dir: impl AsRef<Path>, projector: impl Projector + 'static) -> Result<VerifyReport> {
    open_reader(dir, projector)?.verify()
}

/// Open the journal in `dir` as the writer and rebuild its projections from the events.
/// The chain must be intact; projections that fail their digest are what this repairs.
pub fn rebuild(dir: impl AsRef<Path>, projector: impl Projector + 'static) -> Result<()> {
    let mut journal = SledJournal::open(dir.as_ref(), Box::new(projector), OpenMode::Writer, Checks::ChainOnly)?;
    journal.rebuild()
}

/// Open the journal in `dir` as the writer, rebuilding its read view from the store when
/// the view differs from it (any other check fails as in [`open_writer`]). Returns the
/// writer and what differed (`None`: the view matched the store and was left as it was).
pub fn repair(
    dir: impl AsRef<Path>,
    projector: impl Projector + 'static,
) -> Result<(SledJournal, Option<ViewDifference>)> {
    let mut journal = SledJournal::open(dir.as_ref(), Box::new(projector), OpenMode::Writer, Checks::Repair)?;
    let found = journal.repaired.take();
    Ok((journal, found))
}

/// What a writer checks when it opens a journal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Checks {
    /// The chain, the projections' digests, and the view against the store.
    Full,
    /// The chain and the view (projections are what `rebuild` repairs).
    ChainOnly,
    /// As `Full`, rebuilding a view that differs instead of refusing it.
    Repair,
}

impl SledJournal {
    fn open(dir: &Path, projector: Box<dyn Projector>, mode: OpenMode, checks: Checks) -> Result<Self> {
        let dir = dir.to_path_buf();
        let at = |kind: ErrorKind| JournalError::new(Some(dir.clone()), None, kind);
        let db_dir = dir.join(SLED_DIR);
        match mode {
            OpenMode::Writer => std::fs::create_dir_all(&dir)
                .map_err(|e| at(ErrorKind::io(format!("creating journal directory {}", dir.display()), e)))?,
            OpenMode::Reader => {
                if !db_dir.join("db").is_file() {
                    return Err(at(ErrorKind::NotFound { path: dir.clone() }));
                }
            }
        }
        let acquired = JournalLock::acquire(&dir, mode).map_err(at)?;
        remove_snapshot_leftovers(&db_dir);

        let db = open_db(&db_dir).map_err(|e| at(open_error(e, &dir)))?;
        let events = db.open_tree(EVENTS_TREE).map_err(|e| at(e.into()))?;
        let meta = db.open_tree(META_TREE).map_err(|e| at(e.into()))?;
        let declared = declared_trees(&*projector);
        let memory_names: BTreeSet<String> =
            projector.memory_trees().into_iter().filter(|t| declared.contains(t)).collect();
        let mut projections = BTreeMap::new();
        for name in declared.difference(&memory_names) {
            let tree = db.open_tree(format!("{PROJECTION_PREFIX}{name}")).map_err(|e| at(e.into()))?;
            projections.insert(name.clone(), tree);
        }
        let stored_names = db.tree_names();
        let mut legacy = BTreeMap::new();
        for name in &memory_names {
            let raw = format!("{PROJECTION_PREFIX}{name}");
            if stored_names.iter().any(|t| t.as_ref() == raw.as_bytes()) {
                legacy.insert(name.clone(), db.open_tree(&raw).map_err(|e| at(e.into()))?);
            }
        }
        let store = Store { db, events, meta, projections };

        store.check_format(mode).map_err(at)?;
        let head = store.recorded_head().map_err(at)?.unwrap_or_default();
        let mut journal = SledJournal {
            store,
            lock: acquired.lock,
            dir,
            mode,
            projector,
            declared,
            head,
            took_over: acquired.took_over,
            view: None,
            min_free: DEFAULT_MIN_FREE_BYTES,
            memory_names,
            memory: OnceLock::new(),
            legacy,
            repaired: None,
            chain: Vec::new(),
        };
        if mode == OpenMode::Writer {
            let hashes = journal.check_chain()?;
            if checks != Checks::ChainOnly {
                journal.check_digests()?;
            }
            journal.drop_legacy_trees()?;
            journal.repaired = journal.sync_view(&hashes, checks == Checks::Repair)?;
            journal.chain = hashes;
        }
        Ok(journal)
    }

    /// The digest of a stored projection tree, recomputed from its entries.
    fn stored_digest(&self, name: &str, tree: &Tree) -> Result<TreeDigest> {
        let mut acc = [0u8; 32];
        for item in tree.iter() {
            let (k, v) = item.map_err(|e| {
                self.err(
                    None,
                    ErrorKind::corrupt(format!(
                        "projection `{name}` cannot be read ({e}); run `emend journal verify` for the full report"
                    )),
                )
            })?;
            xor_into(&mut acc, &entry_digest(&k, &v));
        }
        Ok(acc)
    }

    /// Refuse unless every projection matches the digest recorded at its last commit. A tree
    /// with no recorded digest (a journal from before digests, or a newly declared tree)
    /// gets one from its current content.
    fn check_digests(&self) -> Result<()> {
        for (name, tree) in &self.store.projections {
            let actual = self.stored_digest(name, tree)?;
            match self.store.meta.get(digest_key(name)).map_err(|e| self.err(None, e.into()))? {
                Some(recorded) if recorded.as_ref() == actual.as_slice() => {}
                Some(_) => {
                    return Err(self.err(
                        None,
                        ErrorKind::corrupt(format!(
                            "projection `{name}` does not match the checksum recorded when it was last written \
                             (it was changed outside the journal); nothing was written: run `emend journal verify` \
                             for the full report"
                        )),
                    ));
                }
                None => {
                    tracing::info!(projection = %name, "recording the digest of a projection that has none yet");
                    self.store
                        .meta
                        .insert(digest_key(name), actual.as_slice())
                        .map_err(|e| self.err(None, e.into()))?;
                }
            }
        }
        Ok(())
    }

    /// Migrate a journal that stores trees now kept in memory: drop each such tree and its
    /// digest. Its content is derived from the events, which stay; the writer has checked
    /// the chain already.
    fn drop_legacy_trees(&mut self) -> Result<()> {
        for name in std::mem::take(&mut self.legacy).into_keys() {
            tracing::info!(
                projection = %name,
                "migrating the journal: projection `{name}` is now rebuilt from the events in memory; dropping its stored copy"
            );
            self.store.db.drop_tree(format!("{PROJECTION_PREFIX}{name}")).map_err(|e| self.err(None, e.into()))?;
            self.store.meta.remove(digest_key(&name)).map_err(|e| self.err(None, e.into()))?;
        }
        self.store.db.flush().map_err(|e| self.err(None, e.into()))?;
        Ok(())
    }

    /// The memory-only trees, rebuilt from the events on first use.
    fn memory(&self) -> Result<&MemoryTrees> {
        if let Some(m) = self.memory.get() {
            return Ok(m);
        }
        let mut built = MemoryTrees::new();
        if !self.memory_names.is_empty() {
            let mut replay = Replay::new(&*self.projector, &self.declared);
            for record in self.read_from(1)? {
                replay.apply(&record).map_err(|k| self.err(Some(record.seq), k))?;
            }
            built = replay.finish().into_iter().filter(|(name, _)| self.memory_names.contains(name)).collect();
        }
        Ok(self.memory.get_or_init(|| built))
    }

    /// The journal directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Writer or reader.
    pub fn mode(&self) -> OpenMode {
        self.mode
    }

    /// The holder named by a stale LOCK file taken over when this journal was opened.
    pub fn took_over(&self) -> Option<&LockHolder> {
        self.took_over.as_ref()
    }

    fn err(&self, seq: Option<u64>, kind: ErrorKind) -> JournalError {
        JournalError::new(Some(self.dir.clone()), seq, kind)
    }

    fn ensure_writer(&self) -> Result<()> {
        match self.mode {
            OpenMode::Writer => Ok(()),
            OpenMode::Reader => Err(self.err(None, ErrorKind::ReadOnly)),
        }
    }

    fn tree(&self, name: &str) -> Result<&Tree> {
        self.store.projections.get(name).ok_or_else(|| {
            self.err(
                None,
                ErrorKind::UndeclaredTree { tree: name.to_owned(), declared: self.declared.iter().cloned().collect() },
            )
        })
    }

    /// Compare a memory-only tree with its rebuild: the copy a journal from before still
    /// stores when there is one (a reader), else the copy in memory when appends have kept
    /// it up to date (a writer). A copy rebuilt at open is the rebuild: nothing to compare.
    fn compare_memory_tree(&self, name: &str, expected: &BTreeMap<String, Value>) -> Result<Option<ProjectionDiff>> {
        let found = if let Some(tree) = self.legacy.get(name) {
            compare_tree(name, Store::entries(tree), expected)
        } else if let Some(memory) = self.memory.get() {
            let empty = BTreeMap::new();
            let entries = memory.get(name).unwrap_or(&empty);
            compare_tree(
                name,
                entries.iter().map(|(k, v)| Ok((k.as_bytes().to_vec(), canonical_json_bytes(v)))),
                expected,
            )
        } else {
            Ok(None)
        };
        found.map_err(|k| self.err(None, k))
    }

    /// Names of stored projection trees the projector does not declare.
    fn undeclared_trees(&self) -> Vec<String> {
        self.store
            .db
            .tree_names()
            .into_iter()
            .filter_map(|raw| {
                let name = String::from_utf8_lossy(&raw).into_owned();
                let proj = name.strip_prefix(PROJECTION_PREFIX)?.to_owned();
                (!self.declared.contains(&proj)).then_some(proj)
            })
            .collect()
    }
}

impl Store {
    fn check_format(&self, mode: OpenMode) -> Result<(), ErrorKind> {
        match self.meta.get(FORMAT_KEY)? {
            Some(bytes) => {
                let found = <[u8; 4]>::try_from(bytes.as_ref()).map(u32::from_be_bytes).map_err(|_| {
                    ErrorKind::corrupt(format!("meta format_version is {} bytes, expected 4", bytes.len()))
                })?;
                if found != FORMAT_VERSION {
                    return Err(ErrorKind::FormatMismatch { found, expected: FORMAT_VERSION });
                }
                Ok(())
            }
            None if !self.events.is_empty() || self.meta.get(HEAD_KEY)?.is_some() => {
                Err(ErrorKind::corrupt("the journal holds events but records no format_version"))
            }
            // A fresh database: a writer stamps it, a reader sees an empty journal.
            None => {
                if mode == OpenMode::Writer {
                    self.meta.insert(FORMAT_KEY, &FORMAT_VERSION.to_be_bytes())?;
                    self.db.flush()?;
                }
                Ok(())
            }
        }
    }

    fn recorded_head(&self) -> Result<Option<Head>, ErrorKind> {
        match self.meta.get(HEAD_KEY)? {
            None => Ok(None),
            Some(bytes) => serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|e| ErrorKind::corrupt(format!("meta head is not valid: {e}"))),
        }
    }

    /// Commit a planned batch in one transaction over every tree it touches.
    /// `encoded`: each record's key and stored bytes.
    fn commit(
        &self,
        encoded: &[([u8; 8], Vec<u8>)],
        writes: &Writes,
        head: &Head,
        binding: &ViewBinding,
    ) -> Result<(), ErrorKind> {
        let head_bytes = serde_json::to_vec(head).map_err(|e| ErrorKind::corrupt(format!("encoding the head: {e}")))?;
        let binding_bytes = binding.encode();
        let mut trees = vec![self.events.clone(), self.meta.clone()];
        let mut tree_writes = Vec::new();
        let mut digest_keys = Vec::new();
        for (name, entries) in writes {
            digest_keys.push(digest_key(name));
            let tree = self.projections.get(name).ok_or_else(|| ErrorKind::UndeclaredTree {
                tree: name.clone(),
                declared: self.projections.keys().cloned().collect(),
            })?;
            trees.push(tree.clone());
            let entries: Vec<(&[u8], Option<Vec<u8>>)> =
                entries.iter().map(|(k, v)| (k.as_bytes(), v.as_ref().map(canonical_json_bytes))).collect();
            tree_writes.push(entries);
        }
        let outcome = trees.as_slice().transaction(|tx| -> std::result::Result<(), ConflictableTransactionError<()>> {
            let mut events_digest: TreeDigest = match tx[1].get(EVENTS_DIGEST_KEY)? {
                Some(d) => <[u8; 32]>::try_from(d.as_ref()).unwrap_or([0u8; 32]),
                None => [0u8; 32],
            };
            for (key, value) in encoded {
                xor_into(&mut events_digest, &entry_digest(key, value));
                if let Some(old) = tx[0].insert(key, value.as_slice())? {
                    xor_into(&mut events_digest, &entry_digest(key, &old));
                }
            }
            tx[1].insert(EVENTS_DIGEST_KEY, &events_digest[..])?;
            tx[1].insert(HEAD_KEY, head_bytes.as_slice())?;
            tx[1].insert(VIEW_KEY, binding_bytes.as_slice())?;
            for (i, entries) in tree_writes.iter().enumerate() {
                let tree = &tx[2 + i];
                let mut digest: TreeDigest = match tx[1].get(&digest_keys[i])? {
                    Some(d) => <[u8; 32]>::try_from(d.as_ref()).unwrap_or([0u8; 32]),
                    None => [0u8; 32],
                };
                for (key, value) in entries {
                    let old = match value {
                        Some(v) => {
                            xor_into(&mut digest, &entry_digest(key, v));
                            tree.insert(*key, v.as_slice())?
                        }
                        None => tree.remove(*key)?,
                    };
                    if let Some(old) = old {
                        xor_into(&mut digest, &entry_digest(key, &old));
                    }
                }
                tx[1].insert(digest_keys[i].as_slice(), &digest[..])?;
            }
            Ok(())
        });
        transaction_result(outcome)
    }

    /// Iterate a stored tree as (key, value) byte pairs.
    fn entries(tree: &Tree) -> impl Iterator<Item = Result<(Vec<u8>, Vec<u8>), ErrorKind>> + '_ {
        tree.iter().map(|item| item.map(|(k, v)| (k.to_vec(), v.to_vec())).map_err(ErrorKind::from))
    }
}

/// How `rebuild` rewrites one projection tree.
struct TreeRewrite<'a> {
    /// Stored keys the rebuild does not have.
    stale: Vec<sled::IVec>,
    /// Every rebuilt entry, as stored bytes.
    puts: Vec<(&'a [u8], Vec<u8>)>,
}

fn transaction_result(outcome: std::result::Result<(), TransactionError<()>>) -> Result<(), ErrorKind> {
    match outcome {
        Ok(()) => Ok(()),
        Err(TransactionError::Storage(e)) => Err(ErrorKind::Storage(e)),
        // Nothing in our closures aborts.
        Err(TransactionError::Abort(())) => Err(ErrorKind::corrupt("the storage transaction aborted")),
    }
}

impl EventLog for SledJournal {
    fn append(&mut self, events: Vec<NewEvent>) -> Result<Vec<EventRecord>> {
        self.ensure_writer()?;
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let base = SledBase { stored: &self.store.projections, memory: self.memory()? };
        let mut batch = plan_batch(&self.head, events, &*self.projector, &self.declared, &base)
            .map_err(|(seq, kind)| self.err(Some(seq), kind))?;
        let last = batch.head.seq;
        self.check_free_space()?;
        let (in_memory, stored): (Writes, Writes) =
            std::mem::take(&mut batch.writes).into_iter().partition(|(name, _)| self.memory_names.contains(name));
        // Encode each record once, for the store (compressed when large) and for the view.
        let lines: Vec<Vec<u8>> = batch.records.iter().map(EventRecord::encode).collect();
        let encoded: Vec<([u8; 8], Vec<u8>)> =
            batch.records.iter().zip(&lines).map(|(r, l)| (r.seq.to_be_bytes(), compress(l.clone()))).collect();
        // The view's frame and where the view will end, recorded with the batch.
        let frame = view::frame_lines(&lines);
        let view_len = self.view.as_ref().map_or(0, ViewWriter::len);
        let binding = ViewBinding {
            seq: last,
            hash: batch.head.hash.clone(),
            len: view_len + frame.len() as u64,
            prev_seq: self.head.seq,
            prev_len: view_len,
            digest: self.view.as_ref().map(|v| v.digest_after(&frame)),
            prev_digest: self.view.as_ref().map(ViewWriter::digest),
        };
        self.store.commit(&encoded, &stored, &batch.head, &binding).map_err(|k| self.err(Some(last), k))?;
        // Committed: later appends chain onto it even if the flush below fails.
        self.head = batch.head;
        if self.mode == OpenMode::Writer {
            self.chain.extend(batch.records.iter().map(|r| r.hash.clone()));
        }
        if let Some(memory) = self.memory.get_mut() {
            for (name, entries) in in_memory {
                let tree = memory.entry(name).or_default();
                for (key, value) in entries {
                    match value {
                        Some(v) => tree.insert(key, v),
                        None => tree.remove(&key),
                    };
                }
            }
        }
        self.store.db.flush().map_err(|e| self.err(Some(last), e.into()))?;
        if let Some(view) = &mut self.view {
            view.publish_frame(batch.records[0].seq, &frame, &binding);
        }
        Ok(batch.records)
    }

    fn read_range(&self, from: u64, limit: usize) -> Result<Vec<EventRecord>> {
        let mut out = Vec::new();
        for item in self.store.events.range(from.max(1).to_be_bytes()..).take(limit) {
            let (key, value) = item.map_err(|e| self.err(None, e.into()))?;
            let key_seq = <[u8; 8]>::try_from(key.as_ref()).map(u64::from_be_bytes).ok();
            let record = EventRecord::decode(&value).map_err(|d| self.err(key_seq, ErrorKind::corrupt(d)))?;
            if Some(record.seq) != key_seq {
                return Err(self.err(
                    key_seq,
                    ErrorKind::corrupt(format!("the record stored under this seq carries seq {}", record.seq)),
                ));
            }
            out.push(record);
        }
        Ok(out)
    }

    fn head(&self) -> Head {
        self.head.clone()
    }

    fn get(&self, tree: &str, key: &str) -> Result<Option<Value>> {
        if self.memory_names.contains(tree) {
            return Ok(self.memory()?.get(tree).and_then(|t| t.get(key)).cloned());
        }
        match self.tree(tree)?.get(key.as_bytes()).map_err(|e| self.err(None, e.into()))? {
            None => Ok(None),
            Some(bytes) => decode_value(tree, key, &bytes).map(Some).map_err(|k| self.err(None, k)),
        }
    }

    fn scan(&self, tree: &str, prefix: &str) -> Result<Vec<(String, Value)>> {
        if self.memory_names.contains(tree) {
            let Some(t) = self.memory()?.get(tree) else { return Ok(Vec::new()) };
            let found = t.range(prefix.to_owned()..).take_while(|(k, _)| k.starts_with(prefix));
            return Ok(found.map(|(k, v)| (k.clone(), v.clone())).collect());
        }
        let mut out = Vec::new();
        for item in self.tree(tree)?.scan_prefix(prefix.as_bytes()) {
            let (key, value) = item.map_err(|e| self.err(None, e.into()))?;
            let key = String::from_utf8(key.to_vec()).map_err(|_| {
                self.err(None, ErrorKind::corrupt(format!("projection `{tree}` holds a key that is not UTF-8")))
            })?;
            let value = decode_value(tree, &key, &value).map_err(|k| self.err(None, k))?;
            out.push((key, value));
        }
        Ok(out)
    }

    fn verify(&self) -> Result<VerifyReport> {
        let mut check = ChainCheck::new(&*self.projector, &self.declared);
        let mut hashes = Vec::new();
        for item in self.store.events.iter() {
            let (key, value) = item.map_err(|e| self.err(None, e.into()))?;
            if !check.feed(&key, &value) {
                break;
            }
            hashes.push(check.last_good().hash);
        }
        let recorded = self.store.recorded_head().map_err(|k| self.err(None, k))?;
        let (mut report, rebuilt) = check.finish(Some(&recorded.unwrap_or_default()));
        if let Some(rebuilt) = rebuilt {
            let mut diffs = Vec::new();
            for (name, expected) in &rebuilt {
                let diff = if self.memory_names.contains(name) {
                    self.compare_memory_tree(name, expected)?
                } else {
                    compare_tree(name, Store::entries(self.tree(name)?), expected).map_err(|k| self.err(None, k))?
                };
                diffs.extend(diff);
            }
            conclude(&mut report, &self.declared, diffs);
        }
        report.undeclared_trees = self.undeclared_trees();
        report.view = match &report.chain_break {
            None => self.view_check(&hashes)?,
            Some(b) => ViewCheck::NotChecked { reason: format!("the store's chain is broken at seq {}", b.seq) },
        };
        Ok(report)
    }

    fn rebuild(&mut self) -> Result<()> {
        self.ensure_writer()?;
        let mut replay = Replay::new(&*self.projector, &self.declared);
        for record in self.read_from(1)? {
            replay.apply(&record).map_err(|k| self.err(Some(record.seq), k))?;
        }
        let mut rebuilt = replay.finish();
        let mut memory = MemoryTrees::new();
        for name in &self.memory_names {
            memory.insert(name.clone(), rebuilt.remove(name).unwrap_or_default());
        }
        self.memory = OnceLock::from(memory);

        // Remove what the rebuild does not have, write everything it has: one transaction.
        let mut trees = Vec::new();
        let mut plans: Vec<TreeRewrite<'_>> = Vec::new();
        for (name, entries) in &rebuilt {
            let tree = self.tree(name)?;
            let mut stale = Vec::new();
            for key in tree.iter().keys() {
                let key = key.map_err(|e| self.err(None, e.into()))?;
                let keep = std::str::from_utf8(&key).is_ok_and(|k| entries.contains_key(k));
                if !keep {
                    stale.push(key);
                }
            }
            let puts = entries.iter().map(|(k, v)| (k.as_bytes(), canonical_json_bytes(v))).collect();
            trees.push(tree.clone());
            plans.push(TreeRewrite { stale, puts });
        }
        if !trees.is_empty() {
            let outcome =
                trees.as_slice().transaction(|tx| -> std::result::Result<(), ConflictableTransactionError<()>> {
                    for (tree, plan) in tx.iter().zip(&plans) {
                        for key in &plan.stale {
                            tree.remove(key)?;
                        }
                        for (key, value) in &plan.puts {
                            tree.insert(*key, value.as_slice())?;
                        }
                    }
                    Ok(())
                });
            transaction_result(outcome).map_err(|k| self.err(None, k))?;
        }
        for (name, tree) in &self.store.projections {
            let digest = self.stored_digest(name, tree)?;
            self.store.meta.insert(digest_key(name), digest.as_slice()).map_err(|e| self.err(None, e.into()))?;
        }
        for name in self.undeclared_trees() {
            tracing::info!(tree = %name, "dropping projection tree the projector no longer declares");
            self.store.db.drop_tree(format!("{PROJECTION_PREFIX}{name}")).map_err(|e| self.err(None, e.into()))?;
        }
        self.store.db.flush().map_err(|e| self.err(None, e.into()))?;
        Ok(())
    }
}
