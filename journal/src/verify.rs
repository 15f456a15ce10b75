//! Verification: the chain first (seq contiguity, prev_hash linkage, recomputed hashes),
//! then every projection rebuilt from the events alone and compared with the stored trees.
//!
//! The check is one pass over the stored records in key order; it stops at the first
//! broken record and names its seq. Projections are compared only over an intact chain,
//! because a rebuild from a broken chain would only restate the break.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value;

use crate::error::ErrorKind;
use crate::projection::{Projector, Rebuilt, Replay};
use crate::record::{EventRecord, Head, ZERO_HASH, canonical_json_bytes, maybe_decompress, record_links};

/// Where and how the view differs from the store (or from itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ViewDifference {
    /// The first seq that differs (for a view that lacks records: the first one it lacks).
    pub seq: u64,
    pub detail: String,
}

impl std::fmt::Display for ViewDifference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "seq {}: {}", self.seq, self.detail)
    }
}

/// The outcome of verifying a journal.
#[derive(Debug, Clone, PartialEq)]
pub struct VerifyReport {
    /// Records that passed every check, from seq 1.
    pub events_checked: u64,
    /// The last record that passed (seq 0 when none did).
    pub last_good: Head,
    /// The first broken record, if any.
    pub chain_break: Option<ChainBreak>,
    /// How the stored projections compare with a rebuild from the events.
    pub projections: ProjectionCheck,
    /// Stored projection trees the projector no longer declares (left over after a
    /// projector change; `rebuild` drops them). Informational: they do not fail verify.
    pub undeclared_trees: Vec<String>,
    /// How the published read view compares with the store, record by record.
    pub view: ViewCheck,
}

/// How the published read view compares with the store (see the seal module).
#[derive(Debug, Clone, PartialEq)]
pub enum ViewCheck {
    /// Every record of the view is the store's, and the view ends where the store recorded.
    Match { records: u64 },
    /// A true prefix lacking only the store's last batch (seq `from..=to`): a crash between
    /// the store's commit and the view's write; the next writer appends it.
    Behind { from: u64, to: u64 },
    /// There is no view (the next writer writes one; readers read the idle store meanwhile).
    Missing,
    /// The view differs from the store: forged, edited, cut, or the store was truncated.
    Differs(ViewDifference),
    /// Not compared, and why (the view itself was what was verified, or the chain is broken).
    NotChecked { reason: String },
}

impl VerifyReport {
    /// True when the chain is intact and every projection matches its rebuild.
    pub fn is_ok(&self) -> bool {
        self.chain_break.is_none()
            && matches!(self.projections, ProjectionCheck::Match { .. })
            && !matches!(self.view, ViewCheck::Differs(_))
    }
}

/// The first record at which the chain is broken.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainBreak {
    /// The seq at which the chain breaks (for a missing record: the seq that is missing).
    pub seq: u64,
    pub problem: ChainProblem,
}

/// What is wrong at a [`ChainBreak`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainProblem {
    /// The stored bytes are not a record (edited beyond decoding).
    Undecodable { detail: String },
    /// The record decodes but its hash does not match its content (edited).
    HashMismatch { stored: String, computed: String },
    /// No record is stored under this seq; `next_present` is the next one that is.
    Missing { next_present: Option<u64> },
    /// The record stored under this seq carries another seq (records moved or swapped).
    OutOfOrder { found_seq: u64 },
    /// The record's prev_hash is not the previous record's hash (the previous record was
    /// rewritten with a fresh hash, or this one was replaced).
    BrokenLink { expected: String, found: String },
    /// A key in the events tree is not an 8-byte big-endian seq.
    BadKey { key_hex: String },
    /// The head recorded in the meta data disagrees with the last record.
    HeadMismatch { head_seq: u64, head_hash: String },
}

impl ChainProblem {
    /// A one- or two-word name: `edited`, `missing`, `out of order`, `broken link`, ...
    pub fn category(&self) -> &'static str {
        match self {
            ChainProblem::Undecodable { .. } | ChainProblem::HashMismatch { .. } => "edited",
            ChainProblem::Missing { .. } => "missing",
            ChainProblem::OutOfOrder { .. } => "out of order",
            ChainProblem::BrokenLink { .. } => "broken link",
            ChainProblem::BadKey { .. } => "bad key",
            ChainProblem::HeadMismatch { .. } => "head mismatch",
        }
    }
}

impl fmt::Display for ChainBreak {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let seq = self.seq;
        write!(f, "seq {seq}: {}: ", self.problem.category())?;
        match &self.problem {
            ChainProblem::Undecodable { detail } => write!(f, "{detail}"),
            ChainProblem::HashMismatch { stored, computed } => {
                write!(f, "the record's content hashes to {computed}, but it carries hash {stored}")
            }
            ChainProblem::Missing { next_present: Some(next) } => {
                write!(f, "no record is stored under seq {seq}; the next one present is seq {next}")
            }
            ChainProblem::Missing { next_present: None } => {
                write!(f, "no record is stored under seq {seq}, though the journal's head is at or past it")
            }
            ChainProblem::OutOfOrder { found_seq } => {
                write!(f, "the record stored under seq {seq} is record seq {found_seq}")
            }
            ChainProblem::BrokenLink { expected, found } => {
                write!(f, "prev_hash is {found}, but record seq {} hashes to {expected}", seq.saturating_sub(1))
            }
            ChainProblem::BadKey { key_hex } => {
                write!(f, "events key {key_hex} is not an 8-byte big-endian seq")
            }
            ChainProblem::HeadMismatch { head_seq, head_hash } => {
                write!(f, "the recorded head is seq {head_seq} hash {head_hash}, but the last record is seq {seq}")
            }
        }
    }
}

/// How the stored projections compare with a rebuild from the events.
#[derive(Debug, Clone, PartialEq)]
pub enum ProjectionCheck {
    /// Every declared tree equals its rebuild.
    Match { trees: Vec<String> },
    /// These trees differ from their rebuild (the others match).
    Differ(Vec<ProjectionDiff>),
    /// Not compared, and why (a broken chain, or the projector failed during replay).
    NotChecked { reason: String },
}

/// One projection tree that differs from its rebuild.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectionDiff {
    pub tree: String,
    /// The first key (in key order) whose entry differs.
    pub first_key: String,
    pub first: KeyDiff,
    /// How many keys differ in all.
    pub differing_keys: u64,
}

/// How one key differs; values are canonical JSON text (stored bytes shown as stored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyDiff {
    OnlyStored { stored: String },
    OnlyRebuilt { rebuilt: String },
    Differs { stored: String, rebuilt: String },
}

impl fmt::Display for ProjectionDiff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "projection `{}` differs from its rebuild in {} key(s); first at key `{}`: ",
            self.tree, self.differing_keys, self.first_key
        )?;
        match &self.first {
            KeyDiff::OnlyStored { stored } => {
                write!(f, "stored {stored}, absent from the rebuild")
            }
            KeyDiff::OnlyRebuilt { rebuilt } => {
                write!(f, "absent from the store, rebuilt {rebuilt}")
            }
            KeyDiff::Differs { stored, rebuilt } => write!(f, "stored {stored}, rebuilt {rebuilt}"),
        }
    }
}

impl fmt::Display for VerifyReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.chain_break {
            None => writeln!(
                f,
                "chain: ok, {} event(s), head seq {} hash {}",
                self.events_checked, self.last_good.seq, self.last_good.hash
            )?,
            Some(b) => writeln!(f, "chain: BROKEN at {b} ({} event(s) verified intact)", self.events_checked)?,
        }
        match &self.projections {
            ProjectionCheck::Match { trees } => {
                writeln!(f, "projections: ok, {} tree(s) match their rebuild", trees.len())?
            }
            ProjectionCheck::Differ(diffs) => {
                for d in diffs {
                    writeln!(f, "projections: {d}")?;
                }
            }
            ProjectionCheck::NotChecked { reason } => writeln!(f, "projections: not checked: {reason}")?,
        }
        match &self.view {
            ViewCheck::Match { records } => writeln!(f, "view: ok, its {records} record(s) are the store's")?,
            ViewCheck::Behind { from, to } => writeln!(
                f,
                "view: lacks seq {from}..{to}, the store's last batch (a run stopped between the store and the \
                 view); the next writer appends it"
            )?,
            ViewCheck::Missing => writeln!(f, "view: none; the next writer writes it from the store")?,
            ViewCheck::Differs(d) => writeln!(
                f,
                "view: DIFFERS from the store at {d}; run `emend journal repair` to rebuild it from the store"
            )?,
            ViewCheck::NotChecked { reason } => writeln!(f, "view: not compared with the store: {reason}")?,
        }
        for tree in &self.undeclared_trees {
            writeln!(f, "note: stored projection `{tree}` is not declared by the projector")?;
        }
        Ok(())
    }
}

/// One pass over stored records in key order: checks the chain and replays the projector.
pub(crate) struct ChainCheck<'a> {
    expected: u64,
    prev_hash: String,
    checked: u64,
    chain_break: Option<ChainBreak>,
    replay: Replay<'a>,
    replaying: bool,
    replay_error: Option<String>,
    /// Check each record's seq, prev_hash and hash as stored, without recomputing the hash.
    links_only: bool,
}

impl<'a> ChainCheck<'a> {
    pub(crate) fn new(projector: &'a dyn Projector, declared: &'a BTreeSet<String>) -> Self {
        ChainCheck {
            expected: 1,
            prev_hash: ZERO_HASH.to_owned(),
            checked: 0,
            chain_break: None,
            replay: Replay::new(projector, declared),
            replaying: true,
            replay_error: None,
            links_only: false,
        }
    }

    /// Check the links only: each record's seq and that its prev_hash is the hash the
    /// record before carries, read from where the record's line holds them. What a writer
    /// checks before it writes; a record whose content was edited but whose hash was left
    /// is found by the full check (`verify`), which recomputes every hash.
    pub(crate) fn links_only(projector: &'a dyn Projector, declared: &'a BTreeSet<String>) -> Self {
        ChainCheck { links_only: true, ..ChainCheck::chain_only(projector, declared) }
    }

    /// Check the chain only (seq, hashes, links), without replaying the projector.
    pub(crate) fn chain_only(projector: &'a dyn Projector, declared: &'a BTreeSet<String>) -> Self {
        ChainCheck { replaying: false, ..ChainCheck::new(projector, declared) }
    }

    /// The last record that passed so far.
    pub(crate) fn last_good(&self) -> Head {
        Head { seq: self.expected - 1, hash: self.prev_hash.clone() }
    }

    /// Check the next stored record; returns false once the chain is broken.
    pub(crate) fn feed(&mut self, key: &[u8], value: &[u8]) -> bool {
        if self.chain_break.is_some() {
            return false;
        }
        let expected = self.expected;
        let problem = match <[u8; 8]>::try_from(key).map(u64::from_be_bytes) {
            Err(_) => Some((expected, ChainProblem::BadKey { key_hex: hex::encode(key) })),
            Ok(at) if at > expected => Some((expected, ChainProblem::Missing { next_present: Some(at) })),
            Ok(at) if at < expected => Some((expected, ChainProblem::BadKey { key_hex: hex::encode(key) })),
            Ok(at) => self.check_record(at, value).err().map(|p| (at, p)),
        };
        match problem {
            Some((seq, problem)) => {
                self.chain_break = Some(ChainBreak { seq, problem });
                false
            }
            None => true,
        }
    }

    fn check_record(&mut self, at: u64, value: &[u8]) -> Result<(), ChainProblem> {
        if self.links_only {
            let line = maybe_decompress(value).map_err(|detail| ChainProblem::Undecodable { detail })?;
            if let Some((seq, prev, hash)) = record_links(&line) {
                if seq != at {
                    return Err(ChainProblem::OutOfOrder { found_seq: seq });
                }
                if prev != self.prev_hash {
                    return Err(ChainProblem::BrokenLink { expected: self.prev_hash.clone(), found: prev.to_owned() });
                }
                self.expected += 1;
                self.checked += 1;
                self.prev_hash = hash.to_owned();
                return Ok(());
            }
        }
        let record = EventRecord::decode(value).map_err(|detail| ChainProblem::Undecodable { detail })?;
        if record.seq != at {
            return Err(ChainProblem::OutOfOrder { found_seq: record.seq });
        }
        let computed = record.compute_hash();
        if computed != record.hash {
            return Err(ChainProblem::HashMismatch { stored: record.hash, computed });
        }
        if record.prev_hash != self.prev_hash {
            return Err(ChainProblem::BrokenLink { expected: self.prev_hash.clone(), found: record.prev_hash });
        }
        if self.replaying
            && self.replay_error.is_none()
            && let Err(e) = self.replay.apply(&record)
        {
            self.replay_error = Some(format!("the projector failed on event seq {at}: {e}"));
        }
        self.expected += 1;
        self.checked += 1;
        self.prev_hash = record.hash;
        Ok(())
    }

    /// Close the pass against the head recorded in the meta data (if any).
    /// Returns the partial report and, when projections can be compared, the rebuild.
    pub(crate) fn finish(mut self, recorded_head: Option<&Head>) -> (VerifyReport, Option<Rebuilt>) {
        let last_good = Head { seq: self.expected - 1, hash: self.prev_hash.clone() };
        if self.chain_break.is_none()
            && let Some(head) = recorded_head
            && *head != last_good
        {
            let problem = if head.seq > last_good.seq {
                ChainBreak { seq: last_good.seq + 1, problem: ChainProblem::Missing { next_present: None } }
            } else {
                ChainBreak {
                    seq: last_good.seq,
                    problem: ChainProblem::HeadMismatch { head_seq: head.seq, head_hash: head.hash.clone() },
                }
            };
            self.chain_break = Some(problem);
        }
        let (projections, rebuilt) = if let Some(b) = &self.chain_break {
            (ProjectionCheck::NotChecked { reason: format!("the chain is broken at seq {}", b.seq) }, None)
        } else if let Some(reason) = self.replay_error.take() {
            (ProjectionCheck::NotChecked { reason }, None)
        } else if !self.replaying {
            (ProjectionCheck::NotChecked { reason: "the chain alone was checked".to_owned() }, None)
        } else {
            (ProjectionCheck::Match { trees: Vec::new() }, Some(self.replay.finish()))
        };
        let report = VerifyReport {
            events_checked: self.checked,
            last_good,
            chain_break: self.chain_break,
            projections,
            undeclared_trees: Vec::new(),
            view: ViewCheck::NotChecked { reason: "the events themselves were verified".to_owned() },
        };
        (report, rebuilt)
    }
}

/// Compare one stored tree, as (key, stored value bytes) in key order, with its rebuild.
pub(crate) fn compare_tree<I>(
    tree: &str,
    stored: I,
    rebuilt: &BTreeMap<String, Value>,
) -> Result<Option<ProjectionDiff>, ErrorKind>
where
    I: Iterator<Item = Result<(Vec<u8>, Vec<u8>), ErrorKind>>,
{
    let mut first: Option<(String, KeyDiff)> = None;
    let mut differing = 0u64;
    let mut note = |key: &[u8], diff: KeyDiff| {
        differing += 1;
        if first.is_none() {
            first = Some((String::from_utf8_lossy(key).into_owned(), diff));
        }
    };
    let mut rebuilt_iter = rebuilt.iter().peekable();
    for entry in stored {
        let (skey, sval) = entry?;
        while let Some((rkey, rval)) = rebuilt_iter.next_if(|(k, _)| k.as_bytes() < skey.as_slice()) {
            note(rkey.as_bytes(), KeyDiff::OnlyRebuilt { rebuilt: text(rval) });
        }
        let stored_text = || String::from_utf8_lossy(&sval).into_owned();
        match rebuilt_iter.next_if(|(k, _)| k.as_bytes() == skey.as_slice()) {
            Some((_, rval)) => {
                if canonical_json_bytes(rval) != sval {
                    note(&skey, KeyDiff::Differs { stored: stored_text(), rebuilt: text(rval) });
                }
            }
            None => note(&skey, KeyDiff::OnlyStored { stored: stored_text() }),
        }
    }
    for (rkey, rval) in rebuilt_iter {
        note(rkey.as_bytes(), KeyDiff::OnlyRebuilt { rebuilt: text(rval) });
    }
    Ok(first.map(|(first_key, first)| ProjectionDiff {
        tree: tree.to_owned(),
        first_key,
        first,
        differing_keys: differing,
    }))
}

fn text(value: &Value) -> String {
    String::from_utf8_lossy(&canonical_json_bytes(value)).into_owned()
}

/// Fill in the projection part of `report` from per-tree comparisons.
pub(crate) fn conclude(report: &mut VerifyReport, declared: &BTreeSet<String>, diffs: Vec<ProjectionDiff>) {
    if matches!(report.projections, ProjectionCheck::NotChecked { .. }) {
        return;
    }
    report.projections = if diffs.is_empty() {
        ProjectionCheck::Match { trees: declared.iter().cloned().collect() }
    } else {
        ProjectionCheck::Differ(diffs)
    };
}
