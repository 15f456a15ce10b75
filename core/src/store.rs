//! Reading the engine's state back from the journal's projections: the
//! served and best-ever pointers, versions and their artifacts, the
//! hypothesis tree, dimension effects, recorded evaluations.

use std::collections::{BTreeMap, BTreeSet};

use emend_journal::{EventLog, JournalError};
use serde::Deserialize;
use serde_json::Value;

use crate::candidate::Resolution;
use crate::events::{CandidateRecord, SearchRecord, SplitRecord, T_LAYER_A, T_SEARCHES};
use crate::events::{
    EvalSummary, LabeledOutcome, T_CANDIDATES, T_EFFECTS, T_ESCALATIONS, T_EVALUATIONS, T_POINTERS, T_ROUNDS,
    T_STRATEGIES, T_TREE, evaluation_key, hash_key, version_key,
};
use crate::hypothesis::Hypothesis;
use crate::layer_a::Diagnosis;
use crate::planner::DimensionEffect;

/// How many times a candidate may error before novelty counts it as evaluated.
pub const ERRORED_RETRY_CAP: u32 = 3;

/// Why the journal's state could not be read.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error("journal state is inconsistent: {0}")]
    Corrupt(String),
}

impl StoreError {
    /// How the CLI should exit on this error: the journal's own class, else a failed run.
    pub fn exit_class(&self) -> emend_journal::ErrorClass {
        match self {
            StoreError::Journal(j) => j.exit_class(),
            StoreError::Corrupt(_) => emend_journal::ErrorClass::Failed,
        }
    }
}

pub type Result<T> = std::result::Result<T, StoreError>;

fn decode<T: for<'de> Deserialize<'de>>(what: &str, v: Value) -> Result<T> {
    serde_json::from_value(v).map_err(|e| StoreError::Corrupt(format!("{what}: {e}")))
}

/// The served pointer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Served {
    pub version: u64,
    pub hash: String,
    #[serde(default)]
    pub pinned: bool,
    #[serde(default)]
    pub cause: String,
    #[serde(default)]
    pub reason: String,
}

/// The best-ever pointer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Best {
    pub version: u64,
    pub hash: String,
    pub accuracy: f64,
    pub harness_hash: String,
    pub dataset_hash: String,
}

/// A numbered version.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct VersionInfo {
    pub version: u64,
    pub parent: Option<u64>,
    pub hash: String,
    pub origin: String,
    pub round: Option<u64>,
    #[serde(default)]
    pub note: String,
}

/// A recorded evaluation.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Recorded {
    pub summary: EvalSummary,
    pub questions: Vec<LabeledOutcome>,
}

/// Typed reads over any event log.
pub struct Store<'a, L: EventLog + ?Sized> {
    pub log: &'a L,
}

impl<'a, L: EventLog + ?Sized> Store<'a, L> {
    pub fn new(log: &'a L) -> Self {
        Store { log }
    }

    pub fn served(&self) -> Result<Option<Served>> {
        self.log.get(T_POINTERS, "served")?.map(|v| decode("served pointer", v)).transpose()
    }

    pub fn best(&self) -> Result<Option<Best>> {
        self.log.get(T_POINTERS, "best")?.map(|v| decode("best pointer", v)).transpose()
    }

    pub fn version(&self, version: u64) -> Result<Option<VersionInfo>> {
        self.log.get(T_STRATEGIES, &version_key(version))?.map(|v| decode("version", v)).transpose()
    }

    pub fn versions(&self) -> Result<Vec<VersionInfo>> {
        self.log.scan(T_STRATEGIES, "v/")?.into_iter().map(|(_, v)| decode("version", v)).collect()
    }

    /// The document stored under a content hash (versions and candidates).
    pub fn document(&self, hash: &str) -> Result<Option<Value>> {
        Ok(self.log.get(T_STRATEGIES, &hash_key(hash))?.and_then(|v| v.get("document").cloned()))
    }

    /// The content hashes the novelty gate counts as already evaluated: every version, and
    /// every candidate judged at least once without error. A candidate whose every attempt so
    /// far errored (a crashed shard, a malformed reply) was never evaluated: it may be tried
    /// again in a later round, until it has errored [`ERRORED_RETRY_CAP`] times. Each attempt
    /// is its own journaled candidate record, so the count replays from the journal.
    pub fn seen_hashes(&self) -> Result<BTreeSet<String>> {
        let mut seen = BTreeSet::new();
        let mut candidate_only = BTreeSet::new();
        for (k, v) in self.log.scan(T_STRATEGIES, "h/")? {
            let hash = k.trim_start_matches("h/").to_string();
            if v.get("version").is_none_or(Value::is_null) {
                candidate_only.insert(hash.clone());
            }
            seen.insert(hash);
        }
        let mut errored: BTreeMap<String, u32> = BTreeMap::new();
        let mut completed = BTreeSet::new();
        for (_, c) in self.log.scan(T_CANDIDATES, "")? {
            let Some(hash) = c.get("hash").and_then(Value::as_str) else { continue };
            if c.get("outcome").and_then(Value::as_str) == Some("errored") {
                *errored.entry(hash.to_string()).or_default() += 1;
            } else {
                completed.insert(hash.to_string());
            }
        }
        for (hash, attempts) in errored {
            if attempts < ERRORED_RETRY_CAP && !completed.contains(&hash) && candidate_only.contains(&hash) {
                seen.remove(&hash);
            }
        }
        Ok(seen)
    }

    pub fn tree(&self) -> Result<BTreeMap<String, Hypothesis>> {
        self.log.scan(T_TREE, "")?.into_iter().map(|(k, v)| Ok((k, decode("hypothesis", v)?))).collect()
    }

    pub fn effects(&self) -> Result<BTreeMap<String, DimensionEffect>> {
        self.log.scan(T_EFFECTS, "")?.into_iter().map(|(k, v)| Ok((k, decode("dimension effect", v)?))).collect()
    }

    pub fn evaluation(&self, strategy: &str, harness: &str, dataset: &str) -> Result<Option<Recorded>> {
        self.log
            .get(T_EVALUATIONS, &evaluation_key(strategy, harness, dataset))?
            .map(|v| decode("evaluation", v))
            .transpose()
    }

    /// The most recent evaluation of `hash` under any harness and dataset
    /// (the highest journal sequence number): its key and summary.
    pub fn latest_evaluation(&self, hash: &str) -> Result<Option<(String, EvalSummary)>> {
        let latest = self
            .log
            .scan(T_EVALUATIONS, &format!("{hash}/"))?
            .into_iter()
            .max_by_key(|(_, v)| v.get("seq").and_then(Value::as_u64).unwrap_or(0));
        let Some((key, v)) = latest else { return Ok(None) };
        let summary = decode(&format!("evaluation {key}"), v.get("summary").cloned().unwrap_or(Value::Null))?;
        Ok(Some((key, summary)))
    }

    /// The recorded evaluation of `hash` under the best pointer's harness and
    /// dataset (the current ones), else its most recent one; with its key.
    pub fn recorded_evaluation(&self, hash: &str, best: Option<&Best>) -> Result<Option<(String, EvalSummary)>> {
        if hash.is_empty() {
            return Ok(None);
        }
        if let Some(b) = best {
            let key = evaluation_key(hash, &b.harness_hash, &b.dataset_hash);
            if let Some(v) = self.log.get(T_EVALUATIONS, &key)? {
                let summary = decode(&format!("evaluation {key}"), v.get("summary").cloned().unwrap_or(Value::Null))?;
                return Ok(Some((key, summary)));
            }
        }
        self.latest_evaluation(hash)
    }

    /// The Layer A diagnosis recorded with the evaluation under `key`.
    pub fn diagnosis(&self, key: &str) -> Result<Option<Diagnosis>> {
        self.log.get(T_LAYER_A, key)?.map(|v| decode(&format!("diagnosis {key}"), v)).transpose()
    }

    /// `(path, from, to)` of every move that was probed and rejected with a
    /// non-positive search-part delta (a confirm test's delta is never read).
    pub fn rejected_moves(&self) -> Result<BTreeSet<(String, String, String)>> {
        let mut out = BTreeSet::new();
        for c in self.candidates()? {
            let non_positive = c.search_delta().is_some_and(|d| d <= 0.0);
            if let (Resolution::Rejected, true, Some(ch)) = (c.outcome, non_positive, &c.change) {
                out.insert((ch.path.clone(), ch.from.to_string(), ch.to.to_string()));
            }
        }
        Ok(out)
    }

    /// Every candidate's gate record, by round and id.
    pub fn candidates(&self) -> Result<Vec<CandidateRecord>> {
        self.log.scan(T_CANDIDATES, "")?.into_iter().map(|(k, v)| decode(&format!("candidate {k}"), v)).collect()
    }

    /// Every search of the search proposer, in journal order.
    pub fn searches(&self) -> Result<Vec<SearchRecord>> {
        self.log.scan(T_SEARCHES, "")?.into_iter().map(|(k, v)| decode(&format!("search {k}"), v)).collect()
    }

    /// Rounds finished so far (the last round number).
    pub fn last_round(&self) -> Result<u64> {
        Ok(self.log.scan(T_ROUNDS, "")?.last().and_then(|(k, _)| k.parse::<u64>().ok()).unwrap_or(0))
    }

    pub fn rounds(&self) -> Result<Vec<Value>> {
        Ok(self.log.scan(T_ROUNDS, "")?.into_iter().map(|(_, v)| v).collect())
    }

    /// The split round `round` recorded (None for a round without one).
    pub fn split_of_round(&self, round: u64) -> Result<Option<SplitRecord>> {
        let Some(v) = self.log.get(T_ROUNDS, &crate::events::round_key(round))? else { return Ok(None) };
        match v.get("split").filter(|s| !s.is_null()) {
            Some(split) => Ok(Some(decode(&format!("round {round}"), split.clone())?)),
            None => Ok(None),
        }
    }

    /// The split the journal's last round recorded, with that round's number.
    pub fn last_split(&self) -> Result<Option<(u64, SplitRecord)>> {
        for (k, v) in self.log.scan(T_ROUNDS, "")?.into_iter().rev() {
            if let Some(split) = v.get("split").filter(|s| !s.is_null()) {
                let split = decode(&format!("round {k}"), split.clone())?;
                return Ok(Some((k.parse().unwrap_or(0), split)));
            }
        }
        Ok(None)
    }

    pub fn escalations(&self) -> Result<Vec<Value>> {
        Ok(self.log.scan(T_ESCALATIONS, "")?.into_iter().map(|(_, v)| v).collect())
    }

    /// Versions an operator (or a rollback) quarantined: never served
    /// automatically, never the best-ever. Each with its record.
    pub fn quarantined(&self) -> Result<BTreeMap<u64, Value>> {
        Ok(self
            .log
            .scan(T_STRATEGIES, "q/")?
            .into_iter()
            .filter_map(|(_, v)| v.get("version").and_then(Value::as_u64).map(|n| (n, v)))
            .collect())
    }

    /// The versions still pending approval, each with the served version it
    /// was tested against (its parent), oldest first.
    pub fn live_pending(&self) -> Result<BTreeMap<u64, u64>> {
        Ok(self
            .reviews()?
            .into_iter()
            .filter(|(_, r)| r.get("status").and_then(Value::as_str) == Some("pending"))
            .filter_map(|(v, r)| r.get("parent").and_then(Value::as_u64).map(|p| (v, p)))
            .collect())
    }

    /// The last run's interruption, if one was journaled.
    pub fn interrupted(&self) -> Result<Option<Value>> {
        self.pointer("interrupted")
    }

    /// A row of the pointers table by key.
    pub fn pointer(&self, key: &str) -> Result<Option<Value>> {
        Ok(self.log.get(T_POINTERS, key)?)
    }

    /// Versions that went through manual approval, by version: status
    /// `pending`, `approved`, `rejected` or `superseded`, with the review.
    pub fn reviews(&self) -> Result<BTreeMap<u64, Value>> {
        Ok(self
            .log
            .scan(T_STRATEGIES, "p/")?
            .into_iter()
            .filter_map(|(_, v)| v.get("version").and_then(Value::as_u64).map(|n| (n, v)))
            .collect())
    }

    /// Versions that must not be served automatically nor be the best-ever:
    /// quarantined, pending approval, or rejected.
    pub fn ineligible(&self) -> Result<BTreeSet<u64>> {
        let mut out: BTreeSet<u64> = self.quarantined()?.into_keys().collect();
        for (v, r) in self.reviews()? {
            if r.get("status").and_then(Value::as_str) != Some("approved") {
                out.insert(v);
            }
        }
        Ok(out)
    }

    /// The last hook failure journaled, if any.
    pub fn last_hook_failure(&self) -> Result<Option<Value>> {
        Ok(self.log.get(T_POINTERS, "hook_failed")?)
    }

    pub fn max_version(&self) -> Result<u64> {
        Ok(self.versions()?.iter().map(|v| v.version).max().unwrap_or(0))
    }
}
