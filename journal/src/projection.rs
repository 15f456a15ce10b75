//! Projections: materialized views that a [`Projector`] (supplied by the engine) derives
//! from events, written in the same transaction as the events that cause them.
//!
//! A batch is planned in memory first: each event is sealed into the chain and handed to
//! the projector together with an [`Overlay`], whose reads fall through to the stored
//! trees and see the batch's earlier writes. Only when every event has projected cleanly
//! is the plan committed, so a projector error leaves nothing behind, and the projector
//! runs exactly once per event even if the storage transaction has to retry.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;

use crate::error::ErrorKind;
pub use crate::error::ProjectError;
use crate::record::{EventRecord, Head, NewEvent};

/// Derives projection state from events. Supplied by the engine, which defines both.
///
/// `project` must be deterministic: it sees only the state and the event, so replaying the
/// same events always rebuilds the same projections (`verify` and `rebuild` rely on it).
pub trait Projector: Send + Sync {
    /// Names of the projection trees this projector reads and writes.
    fn trees(&self) -> Vec<String>;

    /// Apply one event to the projections.
    fn project(&self, state: &mut dyn ProjectionState, event: &EventRecord) -> Result<(), ProjectError>;

    /// Declared trees a durable journal keeps in memory only, rebuilt from the events when
    /// it is opened, instead of storing them beside the events: fit for trees with many
    /// small entries per event (one per question) that the events already hold. Reads and
    /// `verify` treat them like any other tree. None by default.
    fn memory_trees(&self) -> Vec<String> {
        Vec::new()
    }
}

impl<P: Projector + ?Sized> Projector for Arc<P> {
    fn trees(&self) -> Vec<String> {
        (**self).trees()
    }
    fn memory_trees(&self) -> Vec<String> {
        (**self).memory_trees()
    }
    fn project(&self, state: &mut dyn ProjectionState, event: &EventRecord) -> Result<(), ProjectError> {
        (**self).project(state, event)
    }
}

impl<P: Projector + ?Sized> Projector for Box<P> {
    fn trees(&self) -> Vec<String> {
        (**self).trees()
    }
    fn memory_trees(&self) -> Vec<String> {
        (**self).memory_trees()
    }
    fn project(&self, state: &mut dyn ProjectionState, event: &EventRecord) -> Result<(), ProjectError> {
        (**self).project(state, event)
    }
}

/// The projections as a projector sees them while a batch is being applied.
///
/// Keys are strings and sort by their UTF-8 bytes: zero-pad numbers in keys. Reads see
/// writes made earlier in the same batch. Using a tree the projector does not declare,
/// or a storage failure during a read, fails the whole batch after `project` returns.
pub trait ProjectionState {
    /// The value under `key` in `tree`, if any.
    fn get(&self, tree: &str, key: &str) -> Option<Value>;
    /// Set `key` in `tree` to `value`.
    fn put(&mut self, tree: &str, key: &str, value: Value);
    /// Remove `key` from `tree` (no-op if absent).
    fn remove(&mut self, tree: &str, key: &str);
}

/// Read access to stored projection trees.
pub(crate) trait ProjectionBase {
    fn read(&self, tree: &str, key: &str) -> Result<Option<Value>, ErrorKind>;
}

/// A base with no stored state: replaying from the first event.
pub(crate) struct EmptyBase;

impl ProjectionBase for EmptyBase {
    fn read(&self, _tree: &str, _key: &str) -> Result<Option<Value>, ErrorKind> {
        Ok(None)
    }
}

/// Pending projection writes per tree: `Some` puts, `None` removes.
pub(crate) type Writes = BTreeMap<String, BTreeMap<String, Option<Value>>>;

/// Writes layered over a base; see the module doc.
pub(crate) struct Overlay<'a> {
    base: &'a dyn ProjectionBase,
    declared: &'a BTreeSet<String>,
    writes: Writes,
    fault: RefCell<Option<ErrorKind>>,
}

impl<'a> Overlay<'a> {
    pub(crate) fn new(base: &'a dyn ProjectionBase, declared: &'a BTreeSet<String>) -> Self {
        Overlay { base, declared, writes: Writes::new(), fault: RefCell::new(None) }
    }

    /// Apply one event; the first fault (undeclared tree, storage read error) wins.
    pub(crate) fn project(&mut self, projector: &dyn Projector, event: &EventRecord) -> Result<(), ErrorKind> {
        let outcome = projector.project(self, event);
        if let Some(fault) = self.fault.borrow_mut().take() {
            return Err(fault);
        }
        outcome.map_err(|source| ErrorKind::Projection { event_kind: event.kind.clone(), source })
    }

    pub(crate) fn into_writes(self) -> Writes {
        self.writes
    }

    fn check_declared(&self, tree: &str) -> bool {
        if self.declared.contains(tree) {
            return true;
        }
        let mut fault = self.fault.borrow_mut();
        if fault.is_none() {
            *fault = Some(ErrorKind::UndeclaredTree {
                tree: tree.to_owned(),
                declared: self.declared.iter().cloned().collect(),
            });
        }
        false
    }
}

impl ProjectionState for Overlay<'_> {
    fn get(&self, tree: &str, key: &str) -> Option<Value> {
        if !self.check_declared(tree) {
            return None;
        }
        if let Some(pending) = self.writes.get(tree).and_then(|t| t.get(key)) {
            return pending.clone();
        }
        match self.base.read(tree, key) {
            Ok(value) => value,
            Err(e) => {
                self.fault.borrow_mut().get_or_insert(e);
                None
            }
        }
    }

    fn put(&mut self, tree: &str, key: &str, value: Value) {
        if self.check_declared(tree) {
            self.writes.entry(tree.to_owned()).or_default().insert(key.to_owned(), Some(value));
        }
    }

    fn remove(&mut self, tree: &str, key: &str) {
        if self.check_declared(tree) {
            self.writes.entry(tree.to_owned()).or_default().insert(key.to_owned(), None);
        }
    }
}

/// The declared tree names of a projector, deduplicated.
pub(crate) fn declared_trees(projector: &dyn Projector) -> BTreeSet<String> {
    projector.trees().into_iter().collect()
}

/// A planned batch: the sealed records, their projection writes and the new head.
pub(crate) struct Batch {
    pub records: Vec<EventRecord>,
    pub writes: Writes,
    pub head: Head,
}

/// Seal `events` after `head` and project them over `base`. Nothing is stored.
/// On failure returns the seq of the event that failed with the error.
pub(crate) fn plan_batch(
    head: &Head,
    events: Vec<NewEvent>,
    projector: &dyn Projector,
    declared: &BTreeSet<String>,
    base: &dyn ProjectionBase,
) -> Result<Batch, (u64, ErrorKind)> {
    let mut overlay = Overlay::new(base, declared);
    let mut records = Vec::with_capacity(events.len());
    let mut prev_hash = head.hash.clone();
    let mut seq = head.seq;
    for event in events {
        seq =
            seq.checked_add(1).ok_or_else(|| (seq, ErrorKind::corrupt("the event sequence number overflowed u64")))?;
        let record = EventRecord::seal(seq, event, &prev_hash);
        overlay.project(projector, &record).map_err(|e| (seq, e))?;
        prev_hash.clone_from(&record.hash);
        records.push(record);
    }
    Ok(Batch { records, writes: overlay.into_writes(), head: Head { seq, hash: prev_hash } })
}

/// Projections rebuilt from events alone, tree by tree (every declared tree present).
pub(crate) type Rebuilt = BTreeMap<String, BTreeMap<String, Value>>;

/// Replays events from the first one into fresh projections.
pub(crate) struct Replay<'a> {
    projector: &'a dyn Projector,
    overlay: Overlay<'a>,
}

impl<'a> Replay<'a> {
    pub(crate) fn new(projector: &'a dyn Projector, declared: &'a BTreeSet<String>) -> Self {
        Replay { projector, overlay: Overlay::new(&EmptyBase, declared) }
    }

    pub(crate) fn apply(&mut self, event: &EventRecord) -> Result<(), ErrorKind> {
        self.overlay.project(self.projector, event)
    }

    pub(crate) fn finish(self) -> Rebuilt {
        let mut rebuilt: Rebuilt = self.overlay.declared.iter().map(|t| (t.clone(), BTreeMap::new())).collect();
        for (tree, entries) in self.overlay.into_writes() {
            let target = rebuilt.entry(tree).or_default();
            target.extend(entries.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))));
        }
        rebuilt
    }
}
