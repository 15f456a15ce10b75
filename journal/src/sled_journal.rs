//! The durable journal on sled.
//!
//! On-disk layout of a journal directory:
//!
//! ```text
//! <dir>/LOCK           who holds the journal (see the lock module)
//! <dir>/sled/          the sled database:
//!   tree `events`      key: seq as 8 bytes big-endian -> value: the record's JSON line
//!   tree `meta`        `format_version` -> u32 big-endian; `head` -> JSON {"seq","hash"}
//!   tree `proj:<name>` one per projection: key UTF-8 -> value: canonical JSON
//! ```
//!
//! A batch (events, head and projection writes) is one sled transaction over all the trees
//! it touches, flushed before `append` returns: an acknowledged batch is durable, and a
//! crash leaves the whole batch or none of it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;
use sled::transaction::{ConflictableTransactionError, TransactionError, Transactional};
use sled::{Db, Tree};

use crate::error::{ErrorKind, JournalError, Result};
use crate::lock::{JournalLock, LockHolder, OpenMode};
use crate::log::EventLog;
use crate::projection::{ProjectionBase, Projector, Replay, Writes, declared_trees, plan_batch};
use crate::record::{EventRecord, Head, NewEvent, canonical_json_bytes};
use crate::verify::{ChainCheck, VerifyReport, compare_tree, conclude};

/// The on-disk format this build reads and writes. Bump it on any incompatible change to
/// the layout above or to the record hash.
pub const FORMAT_VERSION: u32 = 1;

const SLED_DIR: &str = "sled";
const EVENTS_TREE: &str = "events";
const META_TREE: &str = "meta";
const PROJECTION_PREFIX: &str = "proj:";
const FORMAT_KEY: &[u8] = b"format_version";
const HEAD_KEY: &[u8] = b"head";

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
}

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

struct SledBase<'a>(&'a BTreeMap<String, Tree>);

impl ProjectionBase for SledBase<'_> {
    fn read(&self, tree: &str, key: &str) -> Result<Option<Value>, ErrorKind> {
        let Some(t) = self.0.get(tree) else {
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
pub fn open_writer(dir: impl AsRef<Path>, projector: impl Projector + 'static) -> Result<SledJournal> {
    SledJournal::open(dir.as_ref(), Box::new(projector), OpenMode::Writer)
}

/// Open the existing journal in `dir` for reading; never creates one.
pub fn open_reader(dir: impl AsRef<Path>, projector: impl Projector + 'static) -> Result<SledJournal> {
    SledJournal::open(dir.as_ref(), Box::new(projector), OpenMode::Reader)
}

/// Open the journal in `dir` as a reader and verify it (see [`EventLog::verify`]).
pub fn verify(dir: impl AsRef<Path>, projector: impl Projector + 'static) -> Result<VerifyReport> {
    open_reader(dir, projector)?.verify()
}

/// Open the journal in `dir` as the writer and rebuild its projections from the events.
pub fn rebuild(dir: impl AsRef<Path>, projector: impl Projector + 'static) -> Result<()> {
    let mut journal = SledJournal::open(dir.as_ref(), Box::new(projector), OpenMode::Writer)?;
    journal.rebuild()
}

impl SledJournal {
    fn open(dir: &Path, projector: Box<dyn Projector>, mode: OpenMode) -> Result<Self> {
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

        let db = open_db(&db_dir).map_err(|e| at(open_error(e, &dir)))?;
        let events = db.open_tree(EVENTS_TREE).map_err(|e| at(e.into()))?;
        let meta = db.open_tree(META_TREE).map_err(|e| at(e.into()))?;
        let declared = declared_trees(&*projector);
        let mut projections = BTreeMap::new();
        for name in &declared {
            let tree = db.open_tree(format!("{PROJECTION_PREFIX}{name}")).map_err(|e| at(e.into()))?;
            projections.insert(name.clone(), tree);
        }
        let store = Store { db, events, meta, projections };

        store.check_format(mode).map_err(at)?;
        let head = store.recorded_head().map_err(at)?.unwrap_or_default();
        if mode == OpenMode::Writer {
            store.check_tip(&head).map_err(at)?;
        }
        Ok(SledJournal {
            store,
            lock: acquired.lock,
            dir,
            mode,
            projector,
            declared,
            head,
            took_over: acquired.took_over,
        })
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

/// Open the sled database. sled's own file lock can be held for a moment after its last
/// holder closed it (see `lock::take_lock`): retry briefly on that error only.
fn open_db(db_dir: &Path) -> sled::Result<Db> {
    let deadline = std::time::Instant::now() + crate::lock::UNNAMED_HOLDER_PATIENCE;
    loop {
        let opened = sled::Config::new()
            .path(db_dir)
            // We flush after every batch; a background flusher would add nothing.
            .flush_every_ms(None)
            .open();
        match opened {
            Err(e) if is_sled_lock_error(&e) && std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

fn is_sled_lock_error(e: &sled::Error) -> bool {
    matches!(e, sled::Error::Io(io) if io.to_string().contains("could not acquire lock"))
}

/// sled reports its own file lock as an I/O error. We hold the LOCK file by now, so the
/// database is held by something that does not take it (another tool opening sled directly).
fn open_error(e: sled::Error, dir: &Path) -> ErrorKind {
    if is_sled_lock_error(&e) {
        return ErrorKind::locked_by(None, dir.join(SLED_DIR));
    }
    ErrorKind::Storage(e)
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

    /// A writer builds on the recorded head; refuse if the last record disagrees with it.
    fn check_tip(&self, head: &Head) -> Result<(), ErrorKind> {
        let last = self.events.last()?;
        let agrees = match &last {
            None => head.seq == 0,
            Some((key, value)) => {
                let key_seq = <[u8; 8]>::try_from(key.as_ref()).map(u64::from_be_bytes).ok();
                let record = EventRecord::decode(value).ok();
                key_seq == Some(head.seq) && record.is_some_and(|r| r.hash == head.hash)
            }
        };
        if agrees {
            Ok(())
        } else {
            Err(ErrorKind::corrupt(format!(
                "the recorded head (seq {}) does not match the last stored event; \
                 run `emend journal verify` before writing to this journal",
                head.seq
            )))
        }
    }

    /// Commit a planned batch in one transaction over every tree it touches.
    fn commit(&self, records: &[EventRecord], writes: &Writes, head: &Head) -> Result<(), ErrorKind> {
        let encoded: Vec<([u8; 8], Vec<u8>)> = records.iter().map(|r| (r.seq.to_be_bytes(), r.encode())).collect();
        let head_bytes = serde_json::to_vec(head).map_err(|e| ErrorKind::corrupt(format!("encoding the head: {e}")))?;
        let mut trees = vec![self.events.clone(), self.meta.clone()];
        let mut tree_writes = Vec::new();
        for (name, entries) in writes {
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
            for (key, value) in &encoded {
                tx[0].insert(key, value.as_slice())?;
            }
            tx[1].insert(HEAD_KEY, head_bytes.as_slice())?;
            for (i, entries) in tree_writes.iter().enumerate() {
                let tree = &tx[2 + i];
                for (key, value) in entries {
                    match value {
                        Some(v) => tree.insert(*key, v.as_slice())?,
                        None => tree.remove(*key)?,
                    };
                }
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
        let batch =
            plan_batch(&self.head, events, &*self.projector, &self.declared, &SledBase(&self.store.projections))
                .map_err(|(seq, kind)| self.err(Some(seq), kind))?;
        let last = batch.head.seq;
        self.store.commit(&batch.records, &batch.writes, &batch.head).map_err(|k| self.err(Some(last), k))?;
        // Committed: later appends chain onto it even if the flush below fails.
        self.head = batch.head;
        self.store.db.flush().map_err(|e| self.err(Some(last), e.into()))?;
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
        match self.tree(tree)?.get(key.as_bytes()).map_err(|e| self.err(None, e.into()))? {
            None => Ok(None),
            Some(bytes) => decode_value(tree, key, &bytes).map(Some).map_err(|k| self.err(None, k)),
        }
    }

    fn scan(&self, tree: &str, prefix: &str) -> Result<Vec<(String, Value)>> {
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
        for item in self.store.events.iter() {
            let (key, value) = item.map_err(|e| self.err(None, e.into()))?;
            if !check.feed(&key, &value) {
                break;
            }
        }
        let recorded = self.store.recorded_head().map_err(|k| self.err(None, k))?;
        let (mut report, rebuilt) = check.finish(Some(&recorded.unwrap_or_default()));
        if let Some(rebuilt) = rebuilt {
            let mut diffs = Vec::new();
            for (name, expected) in &rebuilt {
                let tree = self.tree(name)?;
                if let Some(d) = compare_tree(name, Store::entries(tree), expected).map_err(|k| self.err(None, k))? {
                    diffs.push(d);
                }
            }
            conclude(&mut report, &self.declared, diffs);
        }
        report.undeclared_trees = self.undeclared_trees();
        Ok(report)
    }

    fn rebuild(&mut self) -> Result<()> {
        self.ensure_writer()?;
        let mut replay = Replay::new(&*self.projector, &self.declared);
        for record in self.read_from(1)? {
            replay.apply(&record).map_err(|k| self.err(Some(record.seq), k))?;
        }
        let rebuilt = replay.finish();

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
        for name in self.undeclared_trees() {
            tracing::info!(tree = %name, "dropping projection tree the projector no longer declares");
            self.store.db.drop_tree(format!("{PROJECTION_PREFIX}{name}")).map_err(|e| self.err(None, e.into()))?;
        }
        self.store.db.flush().map_err(|e| self.err(None, e.into()))?;
        Ok(())
    }
}
