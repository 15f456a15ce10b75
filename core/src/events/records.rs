//! The records events carry: a candidate's gate record with its credit, a
//! round's record, and the split design a run searched and confirmed under.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::candidate::{FullRecord, Resolution, StoppedBy};
use crate::critic::CriticVerdict;
use crate::gates::{GateResult, ProbeVerdict};
use crate::hypothesis::Hypothesis;
use crate::percent::points;
use crate::planner::Change;

/// The gate record of one candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CandidateRecord {
    pub id: String,
    pub round: u64,
    pub hash: Option<String>,
    pub parent_version: u64,
    pub parent_hash: String,
    pub hypothesis: String,
    pub change: Option<Change>,
    pub document: Option<Value>,
    pub motivation: BTreeMap<String, usize>,
    pub actionability: f64,
    pub ucb: f64,
    pub gates: Vec<GateResult>,
    pub critic: Option<CriticVerdict>,
    pub probe: Option<ProbeVerdict>,
    /// The full paired comparison.
    pub full: Option<FullRecord>,
    pub outcome: Resolution,
    /// What stopped it (serialized `gate:novelty`, `critic:duplicate`, `probe`, `full:<rule>`, ...).
    pub rejected_by: Option<StoppedBy>,
    pub reason: String,
    /// Paired accuracy delta (full test, else the probe's), when evaluated.
    pub delta: Option<f64>,
    /// The alpha this candidate was tested at.
    pub alpha: Option<f64>,
    pub accepted_version: Option<u64>,
    /// Changes beyond `change` of a candidate that moves several fields at once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more_changes: Vec<Change>,
    /// Per field a pruned candidate keeps: its hypothesis node and its
    /// marginal contribution on the search part (the global search). The
    /// hypothesis tree and dimension reputation are credited per field from
    /// these, never for a field the candidate does not change.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credits: Vec<Credit>,
    /// The direction the proposer was asked for, when its proposal does not
    /// change that direction's field (an evolver asked to rewrite one field
    /// that edits another). The proposal is credited to the fields it
    /// changes; a gate's stop counts against the direction asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked: Option<String>,
    /// What the candidate claims: a gain (the default), or the same quality
    /// for less context (`cheaper`, tested for non-inferiority).
    #[serde(default, skip_serializing_if = "ChangeKind::is_better")]
    pub change_kind: ChangeKind,
    /// A person's proposal (`emend propose --predict`): the predicted
    /// per-category movement and its verdict on the confirm part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prediction: Option<crate::prediction::PredictionRecord>,
}

impl CandidateRecord {
    /// The candidate as the digest keeps it: no confirm-part figure.
    pub fn recent_change(&self) -> crate::digest::RecentChange {
        crate::digest::RecentChange {
            round: self.round,
            id: self.id.clone(),
            hypothesis: self.hypothesis.clone(),
            paths: self.change.iter().chain(self.more_changes.iter()).map(|ch| ch.path.clone()).collect(),
            outcome: self.outcome.as_str().to_string(),
            stopped_by: self.rejected_by.map(|s| s.to_string()),
            probe_delta: self.probe.as_ref().map(|p| p.delta),
            accepted_version: self.accepted_version,
        }
    }
}

/// What a candidate claims, and so what its confirm test tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Better than the served strategy: the one-sided exact test of a gain
    /// (of utility under a price, `cost.per_1k_tokens`).
    #[default]
    Better,
    /// As good for fewer context tokens: the non-inferiority test at
    /// `cost.noninferiority_margin` and a saving of at least `cost.min_saving`.
    Cheaper,
}

impl ChangeKind {
    pub fn is_better(&self) -> bool {
        *self == ChangeKind::Better
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Better => "better",
            ChangeKind::Cheaper => "cheaper",
        }
    }
}

/// One field a candidate changes, credited to its own hypothesis node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Credit {
    /// The hypothesis node, `path::direction`.
    pub key: String,
    pub path: String,
    pub from: Value,
    pub to: Value,
    /// Search-part accuracy of the candidate minus that of the candidate
    /// with this field alone back at its served value; None when it could
    /// not be measured (the budget ran out, or an invariant ties it to
    /// another field).
    pub delta: Option<f64>,
    /// Questions of the search part that measurement evaluated (a
    /// reversion that is clearly worse is stopped early).
    pub questions: usize,
    /// On those questions: how many only the candidate answers and how many
    /// only the reverted strategy does (absent in older journals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discordant: Option<(u64, u64)>,
    /// True when the contribution was measured before later reversions of
    /// fields within the pruning tolerance (the budget left none to measure
    /// it again against the proposed strategy).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub earlier: bool,
}

impl Credit {
    /// Its hypothesis node as `tree` holds it, or a new one.
    pub fn node(&self, tree: &BTreeMap<String, Hypothesis>) -> Hypothesis {
        tree.get(&self.key).cloned().unwrap_or_else(|| {
            let direction = self.key.rsplit_once("::").and_then(|(_, d)| crate::schema::Direction::parse(d));
            Hypothesis::new(&self.path, direction.unwrap_or(crate::schema::Direction::Toggle))
        })
    }

    /// The line a reviewer reads: `retrieve.top_k 5 -> 40 (+6.2 pp on 193
    /// search questions, 95% interval +1.9 to +10.6 pp)`. The interval says
    /// how little a contribution measured on few questions (a reversion
    /// raced out after 24) pins down.
    pub fn describe(&self) -> String {
        let measured = match self.delta {
            Some(d) => {
                let mut s = format!("{} pp on {} search questions", points(d, 1), self.questions);
                if let Some((low, high)) = self.interval() {
                    s.push_str(&format!(", 95% interval {} to {} pp", points(low, 1), points(high, 1)));
                }
                if self.earlier {
                    s.push_str(", before later reversions");
                }
                s
            }
            None => "not measured".to_string(),
        };
        format!("{} {} -> {} ({measured})", self.path, self.from, self.to)
    }

    /// The two-sided 95% interval of the contribution: exact (Clopper-Pearson
    /// on the discordant questions, each side at 2.5%), conditional on their
    /// number; None without recorded counts.
    pub fn interval(&self) -> Option<(f64, f64)> {
        let (only_kept, only_reverted) = self.discordant?;
        let n = self.questions as u64;
        (n > 0).then(|| {
            (
                emend_stats::lower_bound(only_kept, only_reverted, n, 0.025),
                -emend_stats::lower_bound(only_reverted, only_kept, n, 0.025),
            )
        })
    }
}

impl CandidateRecord {
    /// Its paired delta on the search part (the probe's), when it was
    /// probed. The only delta of a candidate the search may learn from: the
    /// confirm test's (`full`, and `delta` once it ran) never flows back.
    pub fn search_delta(&self) -> Option<f64> {
        self.probe.as_ref().map(|p| p.delta)
    }

    /// Each credited field with its measured search-part contribution: the
    /// credit's own, or for a candidate that changes one field its probe
    /// delta (that field's contribution); `None` when not measured.
    pub fn credit_deltas(&self) -> impl Iterator<Item = (&Credit, Option<f64>)> {
        let single = if self.credits.len() == 1 { self.search_delta() } else { None };
        self.credits.iter().map(move |c| (c, c.delta.or(single)))
    }

    /// A candidate's record before anything is known about it: no change,
    /// no gate passed, outcome `rejected` until the round says otherwise.
    pub fn new(id: &str, round: u64, parent_version: u64, parent_hash: &str, hypothesis: &str) -> CandidateRecord {
        CandidateRecord {
            id: id.to_string(),
            round,
            hash: None,
            parent_version,
            parent_hash: parent_hash.to_string(),
            hypothesis: hypothesis.to_string(),
            change: None,
            document: None,
            motivation: BTreeMap::new(),
            actionability: 0.0,
            ucb: 0.0,
            gates: vec![],
            critic: None,
            probe: None,
            full: None,
            outcome: Resolution::Rejected,
            rejected_by: None,
            reason: String::new(),
            delta: None,
            alpha: None,
            accepted_version: None,
            more_changes: vec![],
            credits: vec![],
            asked: None,
            change_kind: ChangeKind::Better,
            prediction: None,
        }
    }

    /// `path from -> to` of its first change, with `(and N more fields)` when
    /// it moves several; None when nothing was proposed.
    pub fn change_summary(&self) -> Option<String> {
        let ch = self.change.as_ref()?;
        Some(format!("{} {} -> {}{}", ch.path, ch.from, ch.to, self.more_fields()))
    }

    /// ` (and N more fields)` for a candidate that moves N fields beyond its first change; empty otherwise.
    pub fn more_fields(&self) -> String {
        match self.more_changes.len() {
            0 => String::new(),
            n => format!(" (and {n} more field{})", if n == 1 { "" } else { "s" }),
        }
    }
}

/// A round's summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RoundRecord {
    pub round: u64,
    pub served_version_before: u64,
    pub served_version_after: u64,
    pub served_accuracy: f64,
    pub best_version: Option<u64>,
    pub best_accuracy: Option<f64>,
    pub accepted: Option<String>,
    pub candidates: usize,
    pub probe_evaluations: usize,
    pub full_evaluations: usize,
    pub rejected_by: BTreeMap<String, usize>,
    pub diagnosis: BTreeMap<String, usize>,
    pub alpha: f64,
    pub at: String,
    /// Model usage of the round per role (requests, tokens, cache hits,
    /// errors); empty without model roles.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub llm: crate::usage::Usage,
    /// The search/confirm split the round used (absent in pre-split journals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<SplitRecord>,
    /// Full-evaluation equivalents the round spent (k of n questions cost k/n).
    #[serde(default)]
    pub evaluations_used: f64,
    /// What the digester made of the round's evidence, as the planner read
    /// it (absent in older journals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<Box<crate::digest::Digest>>,
}

/// The split a round used: derived from the task keys, the unit, the fraction and the seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SplitRecord {
    pub confirm_fraction: f64,
    pub seed: u64,
    pub search: usize,
    pub confirm: usize,
    /// Hash of the confirm part's sorted ids.
    pub confirm_hash: String,
    /// The unit the split assigned; absent in journals of the stratified
    /// split (before each unit's part was derived from a hash).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<emend_stats::SplitUnit>,
    /// `hash`: each unit's part from a hash of (seed, unit id); absent: the
    /// seeded stratified shuffle of older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignment: Option<String>,
    /// Conversations in the task set and in the confirm part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversations: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm_conversations: Option<usize>,
    /// The first round of the LORD++ sequence this round's confirm tests
    /// belong to (a new split starts a new one); absent: the journal's first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lord_from_round: Option<u64>,
}

/// The `assignment` of the hash-derived split.
pub const HASH_ASSIGNMENT: &str = "hash";

impl SplitRecord {
    /// The configuration that reproduces this split (the stratified split
    /// of older journals is not reproduced: its confirm hash will not match).
    pub fn config(&self) -> crate::config::SplitConfig {
        let unit = match self.unit {
            Some(emend_stats::SplitUnit::Conversation) => crate::config::SplitUnitChoice::Conversation,
            _ => crate::config::SplitUnitChoice::Question,
        };
        crate::config::SplitConfig { unit, confirm_fraction: self.confirm_fraction, seed: self.seed }
    }

    /// Whether `self` and `other` assign every question the same way: the
    /// same assignment, unit, share and seed (the task set may have grown).
    pub fn same_design(&self, other: &SplitRecord) -> bool {
        self.assignment == other.assignment
            && self.unit == other.unit
            && self.confirm_fraction == other.confirm_fraction
            && self.seed == other.seed
    }

    /// `question split at 0.4, seed 0` / `stratified split (before hash assignment) at 0.5, seed 0`.
    pub fn describe_design(&self) -> String {
        match (self.assignment.as_deref(), self.unit) {
            (Some(HASH_ASSIGNMENT), Some(unit)) => {
                format!("{} split at {}, seed {}", unit.name(), self.confirm_fraction, self.seed)
            }
            _ => format!("stratified split of an older version at {}, seed {}", self.confirm_fraction, self.seed),
        }
    }

    /// The one sentence saying which population a confirm test's guarantee
    /// covers under this split.
    pub fn population(&self) -> String {
        let convs = |n: Option<usize>| match n {
            Some(1) => "this conversation".to_string(),
            Some(n) => format!("these {n} conversations"),
            None => "these conversations".to_string(),
        };
        match self.unit {
            Some(emend_stats::SplitUnit::Conversation) => format!(
                "the confirm test's guarantee covers new conversations like these {} (the split is by conversation: \
                 {} of them are in the confirm part, none in both parts)",
                self.conversations.map_or("ones".to_string(), |n| n.to_string()),
                self.confirm_conversations.map_or("some".to_string(), |n| n.to_string())
            ),
            _ => format!(
                "the confirm test's guarantee covers new questions about {} only, not new conversations (the split \
                 is by question: every conversation is in both parts)",
                convs(self.conversations)
            ),
        }
    }
}
