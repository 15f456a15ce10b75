//! The search proposer's journal records ([`super::Event::Searched`]):
//! what a search screened and scored, so that a later run goes on from the
//! same state.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Credit;

/// One search of the search proposer ((emend-loop's `step_search`)): enough to
/// rebuild its state (its sampler's history, the strategies it must not
/// screen again, its counters and patience) from the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchRecord {
    /// The round the search ran in (a fruitless search's round number is taken again by the next).
    pub round: u64,
    /// The served strategy it searched around.
    pub served_hash: String,
    /// Searches the proposer has run, this one included.
    pub searches: u64,
    /// Sampler draws so far (each draw's seed).
    pub draws: u64,
    /// Fruitless searches around `served_hash` so far, this one included when it was.
    pub misses: u32,
    /// Full-evaluation equivalents it spent.
    pub spent: f64,
    /// Hashes of the strategies it screened.
    pub screened: Vec<String>,
    /// Each strategy it scored: its evolvable (non-text) fields and its estimated search-part accuracy.
    pub scored: Vec<ScoredPoint>,
    /// The hash of the candidate it sent to the gates, if any.
    pub proposed: Option<String>,
    /// The global search's own state (`search.method: jump`); absent for the step search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub global: Option<GlobalRecord>,
}

/// What a segment of the global search did, beyond what every search records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GlobalRecord {
    /// SHA-256 of the harness hash and the search part's question ids in
    /// their racing order: a later run reuses these scores only when it is equal.
    pub part: String,
    /// Trials drawn so far in this journal, this segment's included.
    pub trials: u64,
    /// Trials in a row without a new best, at the segment's end.
    pub since_best: u64,
    /// Why the segment ended: `proposed`, `segment`, `budget`, `converged` or `nothing`.
    pub ended: String,
    /// The pruning of the proposed candidate, step by step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prune: Vec<PruneStep>,
    /// The proposed candidate's fields and their marginal contributions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credits: Vec<Credit>,
    /// `search.raced_out` when the segment ran. Absent in journals written
    /// before the rule existed, whose raced-out points carry in `score` an
    /// estimate (the incumbent's score plus their deficit spread over the
    /// whole part), not a measurement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raced_out: Option<String>,
}

/// One pruning test: `fields` put back to their served values together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PruneStep {
    pub fields: Vec<String>,
    /// Questions of the search part evaluated (fewer when it was clearly worse).
    pub questions: usize,
    /// Questions lost against the candidate before this step, on those questions.
    pub lost: i64,
    /// True when the fields went back (the loss was within the tolerance).
    pub reverted: bool,
}

/// A strategy the search proposer scored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScoredPoint {
    pub values: BTreeMap<String, Value>,
    /// Its accuracy on the questions it was evaluated on (`questions` of the
    /// racing order; all of the search part unless a race stopped it). In a
    /// journal whose [`GlobalRecord::raced_out`] is absent, a raced-out
    /// point's score is the old estimate instead.
    pub score: f64,
    /// The value the sampler learned from a raced-out point when it is an
    /// estimate on the scale of complete scores (`search.raced_out: deficit`
    /// or `shrunk`); absent for a complete point and under `rank`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<f64>,
    /// The global search: the strategy's content hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// The global search: questions of the racing order it was evaluated on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub questions: Option<usize>,
    /// The global search: which of those it answered, as hex of a bit string
    /// (bit i, most significant first, is question i of the racing order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub correct: Option<String>,
    /// The global search: `trial` (drawn by the sampler), `consensus` (the
    /// consensus of the best, tried before pruning), `prune` (a reversion
    /// tested while pruning) or `served` (the served strategy, the baseline).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// The global search: mean context tokens on those questions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<f64>,
    /// The global search: when its evaluation started (RFC 3339 UTC, milliseconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<String>,
    /// The global search: wall time of its evaluation in this segment, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

impl ScoredPoint {
    /// A point of the step search: values and score only.
    pub fn new(values: BTreeMap<String, Value>, score: f64) -> ScoredPoint {
        ScoredPoint {
            values,
            score,
            estimate: None,
            hash: None,
            questions: None,
            correct: None,
            stage: None,
            tokens: None,
            started: None,
            duration_ms: None,
        }
    }
}

/// `bits` as hex, most significant bit first, padded to whole bytes.
pub fn bits_to_hex(bits: &[bool]) -> String {
    bits.chunks(8)
        .map(|c| {
            let byte = c.iter().enumerate().fold(0u8, |b, (i, &x)| b | (u8::from(x) << (7 - i)));
            format!("{byte:02x}")
        })
        .collect()
}

/// The first `n` bits of `hex` (see [`bits_to_hex`]); None when it holds fewer.
pub fn hex_to_bits(hex: &str, n: usize) -> Option<Vec<bool>> {
    let bytes = hex::decode(hex).ok()?;
    (bytes.len() * 8 >= n).then(|| (0..n).map(|i| bytes[i / 8] & (1 << (7 - i % 8)) != 0).collect())
}
