//! The paired comparison of two evaluations of the same task set, in the
//! unit the confirm test uses: the question at an endpoint evaluation, the
//! probe under longitudinal replay (ids `<probe>@<checkpoint>`), where a
//! probe's observations share its question, evidence and memory and are not
//! independent pairs. Under replay the counts are the probes' last
//! observations (one pair per probe, where all history is in) and the p-value
//! is the confirm side's two-sided exact McNemar test on them
//! ([`emend_stats::mcnemar_by_probe`]).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use emend_core::outcome::{BackendOutcome, Evaluation};
use emend_stats::{self, Outcome, TestUnit};

/// Two evaluations compared pair by pair.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PairedCounts {
    /// What one pair is: a question, or a probe (longitudinal replay).
    pub unit: TestUnit,
    /// Pairs compared (questions, or probes).
    pub pairs: usize,
    /// Outcomes compared (questions, or observations under replay).
    pub observations: usize,
    /// Pairs right with the first evaluation only (under replay: at the probe's last observation).
    pub first_only: usize,
    /// Pairs right with the second evaluation only.
    pub second_only: usize,
    /// Observations right with the first only, and with the second only.
    pub observations_first_only: usize,
    pub observations_second_only: usize,
    /// Two-sided exact McNemar p on the pairs.
    pub p_value: f64,
}

fn outcome(o: &BackendOutcome) -> Outcome {
    Outcome { id: o.id.clone(), conversation: o.conversation.clone(), category: o.category.clone(), correct: o.correct }
}

/// Compares `first` with `second` on the ids both hold.
pub fn paired(first: &Evaluation, second: &Evaluation) -> PairedCounts {
    let common: BTreeSet<&str> = {
        let a: BTreeSet<&str> = first.outcomes.iter().map(|o| o.id.as_str()).collect();
        second.outcomes.iter().map(|o| o.id.as_str()).filter(|id| a.contains(id)).collect()
    };
    let side = |e: &Evaluation| -> Vec<Outcome> {
        let mut seen = BTreeSet::new();
        e.outcomes
            .iter()
            .filter(|o| common.contains(o.id.as_str()) && seen.insert(o.id.as_str()))
            .map(outcome)
            .collect()
    };
    // The second is the baseline: "improved" is right with the first only.
    let p = emend_stats::pair(&side(second), &side(first)).expect("the same unique ids on both sides");
    let (obs_first, obs_second) = (p.improved().len(), p.regressed().len());
    if emend_stats::has_observation_ids(&p) {
        let c = emend_stats::probe_counts(&p);
        let m = emend_stats::mcnemar_by_probe(&p);
        PairedCounts {
            unit: TestUnit::Probe,
            pairs: c.probes as usize,
            observations: p.n(),
            first_only: c.improved as usize,
            second_only: c.regressed as usize,
            observations_first_only: obs_first,
            observations_second_only: obs_second,
            p_value: m.exact_p,
        }
    } else {
        PairedCounts {
            unit: TestUnit::Question,
            pairs: p.n(),
            observations: p.n(),
            first_only: obs_first,
            second_only: obs_second,
            observations_first_only: obs_first,
            observations_second_only: obs_second,
            p_value: emend_stats::mcnemar(obs_first as u64, obs_second as u64).exact_p,
        }
    }
}

/// Whether the outcomes are a longitudinal replay's observations.
pub fn is_replay(e: &Evaluation) -> bool {
    e.outcomes.iter().any(|o| emend_harness::replay::checkpoint_of(&o.id).is_some())
}

/// Accuracy in the unit of [`paired`]: over the questions, or under replay
/// over each probe's last observation (its final accuracy).
pub fn unit_accuracy(e: &Evaluation) -> f64 {
    if !is_replay(e) {
        return e.accuracy();
    }
    let mut last: BTreeMap<&str, (u32, bool)> = BTreeMap::new();
    for o in &e.outcomes {
        let k = emend_harness::replay::checkpoint_of(&o.id).unwrap_or(0);
        let entry = last.entry(emend_harness::replay::probe_of(&o.id)).or_insert((k, o.correct));
        if k >= entry.0 {
            *entry = (k, o.correct);
        }
    }
    if last.is_empty() { 0.0 } else { last.values().filter(|v| v.1).count() as f64 / last.len() as f64 }
}
