//! An in-memory [`EventLog`]: the same records, chain and projections as the sled journal,
//! without a disk. For tests and dry runs; it keeps records in their stored (encoded) form
//! so that reads and `verify` go through the same decoding as on disk.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::error::{ErrorKind, JournalError, Result};
use crate::log::EventLog;
use crate::projection::{ProjectionBase, Projector, Replay, Writes, declared_trees, plan_batch};
use crate::record::{EventRecord, Head, NewEvent, canonical_json_bytes};
use crate::verify::{ChainCheck, VerifyReport, compare_tree, conclude};

type Trees = BTreeMap<String, BTreeMap<String, Value>>;

/// An in-memory journal.
pub struct MemoryJournal {
    projector: Box<dyn Projector>,
    declared: BTreeSet<String>,
    events: BTreeMap<u64, Vec<u8>>,
    trees: Trees,
    head: Head,
}

impl std::fmt::Debug for MemoryJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryJournal").field("head", &self.head).field("trees", &self.declared).finish_non_exhaustive()
    }
}

struct MemoryBase<'a>(&'a Trees);

impl ProjectionBase for MemoryBase<'_> {
    fn read(&self, tree: &str, key: &str) -> Result<Option<Value>, ErrorKind> {
        Ok(self.0.get(tree).and_then(|t| t.get(key)).cloned())
    }
}

fn fail(seq: Option<u64>, kind: ErrorKind) -> JournalError {
    JournalError::new(None, seq, kind)
}

impl MemoryJournal {
    /// An empty journal projected by `projector`.
    pub fn new(projector: impl Projector + 'static) -> Self {
        let projector: Box<dyn Projector> = Box::new(projector);
        let declared = declared_trees(&*projector);
        let trees = declared.iter().map(|t| (t.clone(), BTreeMap::new())).collect();
        MemoryJournal { projector, declared, events: BTreeMap::new(), trees, head: Head::empty() }
    }

    /// A journal from records already checked and projections already rebuilt (the view).
    pub(crate) fn from_parts(
        projector: Box<dyn Projector>,
        events: BTreeMap<u64, Vec<u8>>,
        trees: Trees,
        head: Head,
    ) -> Self {
        let declared = declared_trees(&*projector);
        MemoryJournal { projector, declared, events, trees, head }
    }

    fn check_tree(&self, tree: &str) -> Result<&BTreeMap<String, Value>> {
        self.trees.get(tree).ok_or_else(|| {
            fail(
                None,
                ErrorKind::UndeclaredTree { tree: tree.to_owned(), declared: self.declared.iter().cloned().collect() },
            )
        })
    }

    fn apply_writes(trees: &mut Trees, writes: Writes) {
        for (tree, entries) in writes {
            let target = trees.entry(tree).or_default();
            for (key, value) in entries {
                match value {
                    Some(v) => target.insert(key, v),
                    None => target.remove(&key),
                };
            }
        }
    }
}

impl EventLog for MemoryJournal {
    fn append(&mut self, events: Vec<NewEvent>) -> Result<Vec<EventRecord>> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let batch = plan_batch(&self.head, events, &*self.projector, &self.declared, &MemoryBase(&self.trees))
            .map_err(|(seq, kind)| fail(Some(seq), kind))?;
        for record in &batch.records {
            self.events.insert(record.seq, record.encode());
        }
        Self::apply_writes(&mut self.trees, batch.writes);
        self.head = batch.head;
        Ok(batch.records)
    }

    fn read_range(&self, from: u64, limit: usize) -> Result<Vec<EventRecord>> {
        self.events
            .range(from.max(1)..)
            .take(limit)
            .map(|(seq, bytes)| EventRecord::decode(bytes).map_err(|d| fail(Some(*seq), ErrorKind::corrupt(d))))
            .collect()
    }

    fn head(&self) -> Head {
        self.head.clone()
    }

    fn get(&self, tree: &str, key: &str) -> Result<Option<Value>> {
        Ok(self.check_tree(tree)?.get(key).cloned())
    }

    fn scan(&self, tree: &str, prefix: &str) -> Result<Vec<(String, Value)>> {
        Ok(self
            .check_tree(tree)?
            .range(prefix.to_owned()..)
            .take_while(|(k, _)| k.starts_with(prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect())
    }

    fn verify(&self) -> Result<VerifyReport> {
        let mut check = ChainCheck::new(&*self.projector, &self.declared);
        for (seq, bytes) in &self.events {
            if !check.feed(&seq.to_be_bytes(), bytes) {
                break;
            }
        }
        let (mut report, rebuilt) = check.finish(Some(&self.head));
        if let Some(rebuilt) = rebuilt {
            let mut diffs = Vec::new();
            for (tree, expected) in &rebuilt {
                let stored = self
                    .trees
                    .get(tree)
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| Ok((k.as_bytes().to_vec(), canonical_json_bytes(v))));
                if let Some(d) = compare_tree(tree, stored, expected).map_err(|k| fail(None, k))? {
                    diffs.push(d);
                }
            }
            conclude(&mut report, &self.declared, diffs);
        }
        report.undeclared_trees = self.trees.keys().filter(|t| !self.declared.contains(*t)).cloned().collect();
        Ok(report)
    }

    fn rebuild(&mut self) -> Result<()> {
        let mut replay = Replay::new(&*self.projector, &self.declared);
        for (seq, bytes) in &self.events {
            let record = EventRecord::decode(bytes).map_err(|d| fail(Some(*seq), ErrorKind::corrupt(d)))?;
            replay.apply(&record).map_err(|k| fail(Some(*seq), k))?;
        }
        self.trees = replay.finish();
        Ok(())
    }
}
