//! The confirm test under longitudinal replay, with the probe as its unit.
//!
//! Under replay a probe (a question) is observed at every checkpoint from the
//! one where it becomes eligible (ids `<probe>@<checkpoint>`). Its
//! observations share the question, its evidence and its conversation's
//! memory, which only grows: a change that fixes a probe at one checkpoint
//! tends to fix it at the next ones. Counting observations as independent
//! pairs overstates the evidence (in one run 46 discordant observations came
//! from 12 probes).
//!
//! Here the unit is the probe, and "better" must hold twice (an
//! intersection-union test, whose p-value is the larger of the two):
//!
//! 1. at the final checkpoint: the one-sided exact McNemar test on each
//!    probe's last observation (one pair per probe, where all history is in);
//! 2. across checkpoints: the accuracy difference over every observation,
//!    with the CR2 cluster-robust variance clustered by probe and Bell and
//!    McCaffrey's degrees of freedom ([`crate::cluster_check`]), so that a
//!    probe's observations count as one correlated unit (below
//!    [`crate::MIN_CLUSTERS`] probes it cannot pass).
//!
//! Each part keeps its level on its own null (the first exactly, the second
//! as CR2 does with many clusters), and the test rejects only when both do,
//! so it keeps the level of either. `sim_replay.rs` measures it against the
//! observation-level test, which over-rejects. On outcomes with one
//! observation per probe the first part is the question-level test.
//!
//! The counts and the lower bound of [`BetterTest`] are then the final
//! checkpoint's: a lower bound of the accuracy difference over probes there.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::cluster::{ClusterCheck, cluster_check};
use super::mcnemar::{McNemar, mcnemar};
use super::onesided::{BetterTest, better_test};
use super::pairing::Paired;
use super::unit::{ProbeDetail, TestUnit};

/// Per-probe outcomes at the final checkpoint of a paired comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeCounts {
    pub probes: u64,
    /// Probes right at their last observation with the candidate only.
    pub improved: u64,
    /// Probes right at their last observation with the served strategy only.
    pub regressed: u64,
}

/// The probe of an observation id `<probe>@<checkpoint>` (an id without a
/// numeric `@` suffix is its own probe); the harness's `replay::probe_of`.
pub(crate) fn probe_of(id: &str) -> &str {
    match id.rsplit_once('@') {
        Some((probe, k)) if !k.is_empty() && k.bytes().all(|b| b.is_ascii_digit()) => probe,
        _ => id,
    }
}

/// Whether any id of `paired` is an observation id (`<probe>@<checkpoint>`):
/// the outcomes of a longitudinal replay.
pub fn has_observation_ids(paired: &Paired) -> bool {
    paired.pairs().iter().any(|p| probe_of(&p.id) != p.id)
}

/// The checkpoint of an observation id (0 for an id without one).
fn checkpoint_of(id: &str) -> u64 {
    id.rsplit_once('@').and_then(|(_, k)| k.parse().ok()).unwrap_or(0)
}

/// Each probe's last observation, compared.
pub fn probe_counts(paired: &Paired) -> ProbeCounts {
    let mut last: BTreeMap<&str, (u64, i64)> = BTreeMap::new();
    for p in paired.pairs() {
        let k = checkpoint_of(&p.id);
        let e = last.entry(probe_of(&p.id)).or_insert((k, p.d()));
        if k >= e.0 {
            *e = (k, p.d());
        }
    }
    ProbeCounts {
        probes: last.len() as u64,
        improved: last.values().filter(|v| v.1 > 0).count() as u64,
        regressed: last.values().filter(|v| v.1 < 0).count() as u64,
    }
}

/// The confirm test with the probe as its unit (see the module
/// documentation): the p-value is the larger of the final checkpoint's exact
/// p and the probe-clustered p across checkpoints.
pub fn better_test_by_probe(paired: &Paired, alpha: f64) -> BetterTest {
    let c = probe_counts(paired);
    let last = better_test(c.improved, c.regressed, c.probes, alpha);
    let diffs = paired.pairs().iter().map(|p| (probe_of(&p.id), p.d() as i8));
    let (estimate, t, df, clustered_p) = match cluster_check(diffs, alpha) {
        ClusterCheck::Tested { estimate, t, df, p_value, .. } => (estimate, t, df, p_value),
        ClusterCheck::TooFewClusters { .. } => (paired.delta(), 0.0, 0.0, 1.0),
    };
    let p_value = last.p_value.max(clustered_p);
    BetterTest {
        p_value,
        better: p_value <= alpha,
        unit: TestUnit::Probe,
        probe: Some(ProbeDetail {
            observations: paired.n() as u64,
            improved: paired.improved().len() as u64,
            regressed: paired.regressed().len() as u64,
            final_p: last.p_value,
            estimate,
            t,
            df,
            clustered_p,
        }),
        ..last
    }
}

/// The confirm test under `harness.split.unit: conversation`: the exact
/// sign-flip test over the conversations of `diffs` ((conversation,
/// candidate - served) per confirm question) decides; the record keeps the
/// question counts of `paired` beside it.
pub fn better_test_by_conversation<'a>(
    paired: &Paired,
    diffs: impl IntoIterator<Item = (&'a str, i8)>,
    alpha: f64,
) -> BetterTest {
    let counts = better_test(paired.improved().len() as u64, paired.regressed().len() as u64, paired.n() as u64, alpha);
    let c = crate::cluster::conversation_test(diffs, alpha);
    BetterTest {
        p_value: c.p_value,
        delta: c.estimate,
        lower_bound: c.lower_bound,
        better: c.better,
        unit: TestUnit::Conversation,
        conversations: Some(c.conversations as u64),
        ..counts
    }
}

/// The two-sided McNemar test on the probes' last observations (for information).
pub fn mcnemar_by_probe(paired: &Paired) -> McNemar {
    let c = probe_counts(paired);
    mcnemar(c.improved, c.regressed)
}

/// The gate's test of "better" on a paired comparison: by probe when `by_probe`
/// (under longitudinal replay), by question otherwise.
pub fn gate_test(paired: &Paired, alpha: f64, by_probe: bool) -> BetterTest {
    if by_probe {
        better_test_by_probe(paired, alpha)
    } else {
        better_test(paired.improved().len() as u64, paired.regressed().len() as u64, paired.n() as u64, alpha)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::onesided::better_p_value;
    use crate::pairing::{Outcome, pair};

    /// `probes` probes of `per` observations each; `improved_probes` of them
    /// improved at every checkpoint, the rest concordant.
    fn trajectories(probes: usize, per: usize, improved_probes: usize) -> Paired {
        let (mut base, mut cand) = (Vec::new(), Vec::new());
        for p in 0..probes {
            for k in 1..=per {
                let o = Outcome {
                    id: format!("c#{p}@{k}"),
                    conversation: Some("c".into()),
                    category: "x".into(),
                    correct: p % 2 == 1 && p >= improved_probes,
                };
                cand.push(Outcome { correct: p < improved_probes || o.correct, ..o.clone() });
                base.push(o);
            }
        }
        pair(&base, &cand).unwrap()
    }

    #[test]
    fn forty_discordant_observations_from_ten_probes_give_the_probe_level_p_value() {
        let paired = trajectories(30, 4, 10);
        assert_eq!((paired.improved().len(), paired.regressed().len()), (40, 0));
        let c = probe_counts(&paired);
        assert_eq!((c.probes, c.improved, c.regressed), (30, 10, 0));
        let t = better_test_by_probe(&paired, 0.05);
        // 2^-10 from the ten probes at the final checkpoint, not the
        // observation-level 2^-40; the probe-clustered part is smaller here.
        assert!((t.p_value - 0.5f64.powi(10)).abs() < 1e-15, "{}", t.p_value);
        assert!((better_p_value(40, 0) - 0.5f64.powi(40)).abs() < 1e-20);
        assert_eq!((t.unit, t.questions, t.improved, t.regressed), (TestUnit::Probe, 30, 10, 0));
        let d = t.probe.unwrap();
        assert_eq!((d.observations, d.improved, d.regressed, d.final_p), (120, 40, 0, t.p_value));
        assert!((d.estimate - 1.0 / 3.0).abs() < 1e-12 && (d.df - 29.0).abs() < 1e-6, "{d:?}");
        assert!(d.clustered_p < d.final_p, "{d:?}");
        let json = serde_json::to_value(t).unwrap();
        assert_eq!(json["unit"], "probe");
        assert_eq!(json["probe"]["improved"], 40);
        assert!(has_observation_ids(&paired));
        assert_eq!(gate_test(&paired, 0.05, true), t);
        assert_eq!(mcnemar_by_probe(&paired).improved, 10);
    }

    fn paired_rows(rows: &[(&str, bool, bool)]) -> Paired {
        let mk = |cand: bool| -> Vec<Outcome> {
            rows.iter()
                .map(|&(id, b, c)| Outcome {
                    id: id.into(),
                    conversation: None,
                    category: "x".into(),
                    correct: if cand { c } else { b },
                })
                .collect()
        };
        pair(&mk(false), &mk(true)).unwrap()
    }

    #[test]
    fn the_final_checkpoint_is_the_largest_not_the_last_in_id_order() {
        // "a@10" sorts before "a@9": the final observation is a@10 (regressed).
        let p = paired_rows(&[("a@9", false, true), ("a@10", true, false), ("b@1", false, true), ("c", true, false)]);
        let c = probe_counts(&p);
        assert_eq!((c.probes, c.improved, c.regressed), (3, 1, 2));
    }

    #[test]
    fn both_parts_must_pass() {
        // Every probe improves at its final checkpoint only, while each
        // regresses at its three earlier ones: the final-checkpoint test
        // passes, the accuracy over all observations falls, so the test fails.
        let mut rows = Vec::new();
        let ids: Vec<String> = (0..12).flat_map(|p| (1..=4).map(move |k| format!("p{p}@{k}"))).collect();
        for (i, id) in ids.iter().enumerate() {
            rows.push((id.as_str(), i % 4 != 3, i % 4 == 3));
        }
        let t = better_test_by_probe(&paired_rows(&rows), 0.05);
        let d = t.probe.unwrap();
        assert!(d.final_p < 0.001 && d.clustered_p > 0.5, "{d:?}");
        assert!(!t.better && t.p_value == d.clustered_p, "{t:?}");
        // Fewer than four probes: the clustered part cannot pass.
        let few = better_test_by_probe(&paired_rows(&[("a@1", false, true), ("b@1", false, true)]), 0.5);
        assert_eq!((few.probe.unwrap().clustered_p, few.better), (1.0, false));
    }

    #[test]
    fn endpoint_outcomes_keep_the_question_test_and_serialise_as_before() {
        let paired = crate::testdata::paired_counts(10, 2, 30, 20);
        assert!(!has_observation_ids(&paired));
        let q = gate_test(&paired, 0.05, false);
        assert_eq!(q, better_test(10, 2, 62, 0.05));
        let text = serde_json::to_string(&q).unwrap();
        assert!(!text.contains("unit") && !text.contains("probe"), "{text}");
        // With one observation per probe the final-checkpoint part is the question test.
        let p = better_test_by_probe(&paired, 0.05);
        assert_eq!((p.probe.unwrap().final_p, p.improved, p.regressed, p.questions), (q.p_value, 10, 2, 62));
    }
}
