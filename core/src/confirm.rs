//! The confirm side of a run: the seeded search/confirm split of the task
//! set, and the LORD++ state replayed from the journal's confirm tests.
//! Nothing here is stored apart from the candidates' gate records: every
//! confirm test journals its LORD++ test (index, alpha, wealth after), so the
//! state is a pure function of the journal and the configuration. (Records of
//! older runs may hold a Thresholdout answer; it is no longer read: nothing
//! measured on the confirm part flows back into the search.)

use std::collections::BTreeSet;

use crate::candidate::Resolution;
use crate::config::GateConfig;
use crate::config::SplitConfig;
use crate::events::{CandidateRecord, LabeledOutcome};
use emend_stats::{self, Gamma, Lord, LordConfig, TaskKey};

/// The two parts of the task set, as id sets and sorted id lists.
#[derive(Debug, Clone, PartialEq)]
pub struct Parts {
    pub search: BTreeSet<String>,
    pub confirm: BTreeSet<String>,
    /// The confirm part's ids in sorted order (what the confirm test evaluates).
    pub confirm_ids: Vec<String>,
    /// Questions in the whole task set.
    pub n: usize,
    /// The design the parts were drawn with (`auto` resolved).
    pub design: emend_stats::SplitDesign,
    /// Conversations in the task set, and in the confirm part.
    pub conversations: usize,
    pub confirm_conversations: usize,
}

impl Parts {
    /// Splits the task set given by `results` (id, conversation, category);
    /// a question without a conversation belongs to conversation `""`.
    /// Under longitudinal replay the results are observations
    /// (`<question>@<checkpoint>`): the split is drawn over the probes, and
    /// every observation of a probe goes to its probe's part (on endpoint
    /// ids, the split of old).
    pub fn of(results: &[LabeledOutcome], config: &SplitConfig) -> Result<Parts, emend_stats::SplitError> {
        let mut seen = BTreeSet::new();
        let keys: Vec<TaskKey> = results
            .iter()
            .filter(|q| seen.insert(emend_harness::replay::probe_of(&q.id)))
            .map(|q| {
                TaskKey::new(
                    emend_harness::replay::probe_of(&q.id).to_string(),
                    q.conversation.clone().unwrap_or_default(),
                    q.category.clone(),
                )
            })
            .collect();
        let conversations = keys.iter().map(|k| k.conversation.as_str()).collect::<BTreeSet<_>>().len();
        let design = emend_stats::SplitDesign {
            unit: config.unit.resolve(&keys, config),
            confirm_fraction: config.confirm_fraction,
            seed: config.seed,
        };
        let s = emend_stats::split_by(&keys, &design)?;
        let confirm_probes: BTreeSet<&str> = s.confirm.iter().map(String::as_str).collect();
        let (mut search, mut confirm) = (BTreeSet::new(), BTreeSet::new());
        let mut confirm_convs = BTreeSet::new();
        for q in results {
            if confirm_probes.contains(emend_harness::replay::probe_of(&q.id)) {
                confirm.insert(q.id.clone());
                confirm_convs.insert(q.conversation.as_deref().unwrap_or(""));
            } else {
                search.insert(q.id.clone());
            }
        }
        Ok(Parts {
            search,
            confirm_ids: confirm.iter().cloned().collect(),
            confirm,
            n: results.len(),
            design,
            conversations,
            confirm_conversations: confirm_convs.len(),
        })
    }

    /// The results on the search part, in their order.
    pub fn search_of(&self, results: &[LabeledOutcome]) -> Vec<LabeledOutcome> {
        results.iter().filter(|q| self.search.contains(&q.id)).cloned().collect()
    }

    /// The results on the confirm part, in their order.
    pub fn confirm_of(&self, results: &[LabeledOutcome]) -> Vec<LabeledOutcome> {
        results.iter().filter(|q| self.confirm.contains(&q.id)).cloned().collect()
    }

    /// The full-evaluation equivalents of evaluating `k` questions.
    pub fn cost(&self, k: usize) -> f64 {
        if self.n == 0 { 0.0 } else { k as f64 / self.n as f64 }
    }
}

/// The LORD++ configuration of the gate: `gates.alpha`, `W0 = lord_initial_wealth * alpha`
/// and the front-loaded Basel gamma (61% of the wealth on the first test
/// after each accept), so that the first confirm tests have useful power.
pub fn lord_config(g: &GateConfig) -> LordConfig {
    LordConfig { alpha: g.alpha, w0: g.lord_initial_wealth * g.alpha, gamma: Gamma::Basel }
}

/// The confirm tests' running state, replayed from the journal.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfirmState {
    pub lord: Lord,
    /// Discordant and total questions over every confirm test so far
    /// (probes, under longitudinal replay).
    pub discordant: u64,
    pub questions: u64,
    /// The last confirm test's unit and how many of them it had: under
    /// replay a test counts probes, not the confirm part's observations.
    pub last_unit: Option<(emend_stats::TestUnit, u64)>,
}

impl ConfirmState {
    /// Replays the journal's confirm tests (candidate records in journal order).
    pub fn replay(g: &GateConfig, records: &[CandidateRecord]) -> ConfirmState {
        Self::replay_from(g, records, 0)
    }

    /// Replays the confirm tests of the LORD++ sequence that starts at round
    /// `from_round` (a new split starts a new sequence: see
    /// [`SplitRecord::lord_from_round`](crate::events::SplitRecord)).
    pub fn replay_from(g: &GateConfig, records: &[CandidateRecord], from_round: u64) -> ConfirmState {
        let mut lord = Lord::new(lord_config(g));
        let (mut discordant, mut questions, mut last_unit) = (0, 0, None);
        let records: Vec<&CandidateRecord> = records.iter().filter(|r| r.round >= from_round).collect();
        // A round's tests all run before its decision: its deployment (the
        // accepted candidate, served or pending approval) earns from the
        // test after the round's last one.
        for round in records.chunk_by(|a, b| a.round == b.round) {
            let mut deployed = Vec::new();
            for r in round {
                let Some(full) = r.full.as_ref() else { continue };
                if let Some(t) = &full.lord {
                    lord.tests = lord.tests.max(t.index);
                    if t.accepted {
                        lord.rejections.push(t.index);
                        if r.outcome == Resolution::Accepted {
                            deployed.push(t.index);
                        }
                    }
                }
                if let Some(c) = &full.confirm {
                    discordant += c.improved + c.regressed;
                    questions += c.questions;
                    last_unit = Some((c.unit, c.questions));
                }
            }
            for index in deployed {
                // Recorded once per test; a journal holding it twice would be corrupt.
                let _ = lord.deployed(index);
            }
        }
        ConfirmState { lord, discordant, questions, last_unit }
    }

    /// The pooled discordance rate of the confirm tests so far.
    pub fn discordance(&self) -> Option<f64> {
        (self.questions > 0).then(|| self.discordant as f64 / self.questions as f64)
    }

    /// The minimum detectable effect at 80% power of the next confirm test on
    /// `n` units (questions, or probes under replay: see [`Self::test_units`])
    /// at the observed discordance rate (`None` before any test or when the
    /// rate is 0).
    pub fn next_mde(&self, n: u64) -> Option<f64> {
        let q = self.discordance().filter(|&q| q > 0.0)?;
        emend_stats::minimum_detectable_effect(n, q, self.lord.next_alpha(), 0.8)
    }

    /// What the next confirm test counts and how many: under longitudinal
    /// replay the probes of the last test (the confirm part's size counts
    /// observations, which are not independent); otherwise the confirm
    /// part's `part_size` questions.
    pub fn test_units(&self, part_size: Option<u64>) -> (emend_stats::TestUnit, Option<u64>) {
        match self.last_unit {
            Some((emend_stats::TestUnit::Probe, probes)) => (emend_stats::TestUnit::Probe, Some(probes)),
            // The sign-flip test's power is not the question-level formula's.
            Some((emend_stats::TestUnit::Conversation, _)) => (emend_stats::TestUnit::Conversation, None),
            _ => (emend_stats::TestUnit::Question, part_size),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::candidate::sample_full;

    fn result(id: &str, conv: &str, cat: &str) -> LabeledOutcome {
        LabeledOutcome {
            id: id.into(),
            category: cat.into(),
            conversation: Some(conv.into()),
            correct: true,
            label: None,
            tokens: None,
            split: None,
        }
    }

    /// A confirm share of one half.
    fn half() -> SplitConfig {
        SplitConfig { confirm_fraction: 0.5, ..SplitConfig::default() }
    }

    #[test]
    fn the_split_is_seeded_and_disjoint_and_auto_keeps_few_conversations_by_question() {
        let rs: Vec<LabeledOutcome> =
            (0..40).map(|i| result(&format!("q{i:02}"), &format!("c{}", i % 2), ["a", "b"][i / 20])).collect();
        let p = Parts::of(&rs, &half()).unwrap();
        assert_eq!(p.search.len() + p.confirm.len(), 40);
        assert!(p.search.is_disjoint(&p.confirm));
        assert_eq!(p.confirm.len(), 19, "binomial around 20 (pinned by the hash)");
        assert_eq!((p.design.unit, p.conversations, p.confirm_conversations), (emend_stats::SplitUnit::Question, 2, 2));
        assert_eq!(p, Parts::of(&rs, &half()).unwrap());
        let other = Parts::of(&rs, &SplitConfig { seed: 7, ..half() }).unwrap();
        assert_ne!(p.confirm, other.confirm);
        assert_eq!(p.confirm_of(&rs).len(), 19);
        assert!((p.cost(10) - 0.25).abs() < 1e-12);
        // Forty conversations of three questions: auto splits them whole.
        let many: Vec<LabeledOutcome> =
            (0..120).map(|i| result(&format!("q{i:03}"), &format!("c{}", i / 3), "a")).collect();
        let p = Parts::of(&many, &half()).unwrap();
        assert_eq!(p.design.unit, emend_stats::SplitUnit::Conversation);
        let conv = |id: &String| many.iter().find(|q| &q.id == id).unwrap().conversation.clone();
        let confirm: BTreeSet<_> = p.confirm.iter().map(conv).collect();
        assert!(p.search.iter().all(|id| !confirm.contains(&conv(id))), "no conversation in both parts");
        assert_eq!(p.confirm_conversations, confirm.len());
    }

    #[test]
    fn replay_observations_of_a_probe_stay_in_one_part() {
        let mut rs = Vec::new();
        for i in 0..40 {
            for k in (1 + i % 3)..=4 {
                rs.push(result(&format!("c{}#{i}@{k}", i % 2), &format!("c{}", i % 2), ["a", "b"][i / 20]));
            }
        }
        let p = Parts::of(&rs, &half()).unwrap();
        assert_eq!(p.search.len() + p.confirm.len(), rs.len());
        let probes = |ids: &BTreeSet<String>| -> BTreeSet<String> {
            ids.iter().map(|id| emend_harness::replay::probe_of(id).to_string()).collect()
        };
        assert!(probes(&p.search).is_disjoint(&probes(&p.confirm)));
        assert_eq!(probes(&p.confirm).len(), 20);
        // On probe ids, the split is the one drawn over the observations' probes.
        let endpoint: Vec<LabeledOutcome> =
            (0..40).map(|i| result(&format!("c{}#{i}", i % 2), &format!("c{}", i % 2), ["a", "b"][i / 20])).collect();
        assert_eq!(probes(&p.confirm), Parts::of(&endpoint, &half()).unwrap().confirm);
    }

    fn record(id: &str, full: crate::candidate::FullRecord) -> CandidateRecord {
        CandidateRecord { full: Some(full), ..CandidateRecord::new(id, 1, 1, "h", "k") }
    }

    #[test]
    fn under_replay_the_next_test_counts_probes_not_observations() {
        let g = GateConfig::default();
        let mut full = sample_full(0.01, false, &[]);
        full.confirm = Some(emend_stats::better_test(60, 20, 400, 0.01));
        let endpoint = ConfirmState::replay(&g, &[record("a", full.clone())]);
        assert_eq!(endpoint.test_units(Some(400)), (emend_stats::TestUnit::Question, Some(400)));
        let mut probe = emend_stats::better_test(60, 20, 400, 0.01);
        probe.unit = emend_stats::TestUnit::Probe;
        full.confirm = Some(probe);
        let replay = ConfirmState::replay(&g, &[record("a", full)]);
        // The confirm part holds 1,600 observations of those 400 probes.
        let (unit, n) = replay.test_units(Some(1600));
        assert_eq!((unit, n), (emend_stats::TestUnit::Probe, Some(400)));
        assert!(replay.next_mde(400).unwrap() > replay.next_mde(1600).unwrap());
    }

    #[test]
    fn the_state_replays_lord_tests_and_earns_only_on_deployments() {
        let g = GateConfig::default();
        // One round of three tests: the second rejects and is deployed.
        let (mut live, mut records) = (Lord::new(lord_config(&g)), Vec::new());
        for (i, p) in [0.5, 0.0001, 0.3].into_iter().enumerate() {
            let t = live.test(p);
            let mut full = sample_full(0.0, t.accepted, &[]);
            full.lord = Some(t);
            full.confirm = Some(emend_stats::better_test(3, 1, 40, t.alpha));
            let mut r = record(&format!("c{i}"), full);
            r.outcome = if t.accepted { Resolution::Accepted } else { Resolution::Rejected };
            records.push(r);
        }
        live.deployed(2).unwrap();
        let s = ConfirmState::replay(&g, &records);
        assert_eq!(s.lord, live);
        assert_eq!(s.discordance(), Some(0.1));
        assert!(s.next_mde(200).is_some());
        // The same rejection lost to another passer (not deployed): it earns nothing.
        records[1].outcome = Resolution::Rejected;
        let undeployed = ConfirmState::replay(&g, &records);
        assert_eq!(undeployed.lord.rejections, vec![2]);
        assert!(undeployed.lord.deployments.is_empty());
        let spent: f64 = [0.5, 0.0001, 0.3]
            .iter()
            .enumerate()
            .map(|(i, _)| records[i].full.as_ref().unwrap().lord.unwrap().alpha)
            .sum();
        assert!((undeployed.lord.wealth() - (undeployed.lord.config.w0 - spent)).abs() < 1e-15);
        assert!(s.lord.wealth() > undeployed.lord.wealth());
        let empty = ConfirmState::replay(&g, &[]);
        assert_eq!(empty.lord.next_alpha(), 6.0 / std::f64::consts::PI.powi(2) * 0.025);
        assert_eq!(empty.next_mde(200), None);
    }
}
