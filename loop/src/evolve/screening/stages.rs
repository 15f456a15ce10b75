//! Screening: one candidate through the hard gates, the rule-based critic,
//! the probe and the critic model, in that order, stopping at the first that
//! refuses it. [`screen`] fills the candidate's gate record with the evidence
//! of every stage it reached and returns [`Screened::Passed`] or
//! [`Screened::Stopped`] with what stopped it and why. What a stop means for
//! the hypothesis tree (exhaustion, escalation) is the round's business.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use emend_core::artifact::{self, Artifact};
use emend_core::candidate::{Resolution, StoppedBy};
use emend_core::config::CostConfig;
use emend_core::critic::{self, CriticInput, CriticVerdict};
use emend_core::events::{CandidateRecord, ChangeKind, LabeledOutcome};
use emend_core::gates::{self, DataText, GateInput, GateResult, ProbeVerdict, Replay};
use emend_core::hypothesis::Hypothesis;
use emend_core::layer_a::Diagnosis;
use emend_core::outcome::Evaluation;
use emend_core::planner::{Change, DimensionEffect};
use emend_core::records::question_results;
use emend_core::schema::StrategySchema;
use emend_eval::backend::Backend;
use emend_eval::llm::{Role, advice};

/// What every candidate of a round is screened against.
pub struct Screen<'a> {
    pub round: u64,
    pub schema: &'a StrategySchema,
    pub backend: &'a dyn Backend,
    pub served: &'a Artifact,
    pub served_results: &'a [LabeledOutcome],
    /// The round's diagnosis of the served strategy: what the critic checks
    /// each changed field against.
    pub diagnosis: &'a Diagnosis,
    pub replay: &'a Replay,
    pub effects: &'a BTreeMap<String, DimensionEffect>,
    pub rejected_moves: &'a BTreeSet<(String, String, String)>,
    pub probe_drop_max: f64,
    /// The round's probe sample and how many of it the served strategy answers.
    pub probe_ids: &'a [String],
    pub served_on_probe: usize,
    /// `search.method: steps`: numbers stay within their `x-max-delta`.
    pub bounded: bool,
    /// `cost:`: under a price the probe tolerates the accuracy the
    /// candidate's saving on the probe is worth; a `cheaper` candidate's probe
    /// tolerates `cost.noninferiority_margin`.
    pub cost: &'a CostConfig,
}

/// One candidate to screen.
pub struct Candidate<'a> {
    pub id: &'a str,
    pub value: &'a Value,
    pub hash: &'a str,
    pub change: &'a Change,
    pub motivation: &'a BTreeMap<String, usize>,
    pub hypothesis: Option<&'a Hypothesis>,
    /// Dataset text a model saw while proposing it.
    pub data: Option<&'a DataText>,
    /// Its results on the whole search part, when the proposer evaluated it there.
    pub known: Option<&'a [LabeledOutcome]>,
}

/// The stage a stopped candidate reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    Gates,
    Critic,
    /// Building the candidate from its document.
    Artifact,
    Probe,
    CriticModel,
}

#[derive(Debug, Clone)]
pub enum Screened {
    Passed { candidate: Box<Artifact>, probe_delta: f64 },
    Stopped(Stop),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Stop {
    pub by: StoppedBy,
    pub stage: Stage,
    pub outcome: Resolution,
    pub reason: String,
}

impl Stop {
    fn rejected(by: StoppedBy, stage: Stage, reason: String) -> Stop {
        Stop { by, stage, outcome: Resolution::Rejected, reason }
    }

    fn errored(stage: Stage, reason: String) -> Stop {
        Stop { by: StoppedBy::Errored, stage, outcome: Resolution::Errored, reason }
    }
}

/// Runs `c` through every stage; `record` receives each stage's evidence
/// (gate results, critic verdicts, the probe) and `seen` the candidate's hash.
pub fn screen(
    s: &Screen<'_>,
    c: &Candidate<'_>,
    record: &mut CandidateRecord,
    seen: &mut BTreeSet<String>,
) -> Screened {
    let kind = record.change_kind;
    let gate_results = gates::run_gates(&GateInput {
        schema: s.schema,
        served: &s.served.value,
        candidate: c.value,
        candidate_hash: c.hash,
        seen,
        hypothesis: c.hypothesis,
        replay: s.replay,
        data: c.data,
        bounded: s.bounded,
    });
    seen.insert(c.hash.to_string());
    let failed: Option<GateResult> = gate_results.iter().find(|g| !g.pass).cloned();
    record.gates = gate_results;
    if let Some(g) = failed {
        return Screened::Stopped(Stop::rejected(StoppedBy::Gate(g.gate), Stage::Gates, g.detail));
    }
    // The rest of the diff and each field's contribution the search measured, as recorded.
    let more = record.more_changes.clone();
    let contributions: BTreeMap<String, f64> =
        record.credits.iter().filter_map(|c| Some((c.path.clone(), c.delta?))).collect();
    let rules = critic::critic(&CriticInput {
        schema: s.schema,
        diagnosis: s.diagnosis,
        change: c.change,
        more: &more,
        contributions: &contributions,
        bounded: s.bounded,
        effects: s.effects,
        rejected_moves: s.rejected_moves,
        // A cheaper candidate claims something else than the moves rejected for accuracy.
        duplicates_reject: kind != ChangeKind::Cheaper,
        motivation: c.motivation,
        tokens: c.known.and_then(|known| Some((mean_tokens(s.served_results)?, mean_tokens(known)?))),
        probe_drop_max: s.probe_drop_max,
    });
    record.critic = Some(rules.clone());
    if rules.reject {
        return Screened::Stopped(Stop::rejected(StoppedBy::Critic(rules.label), Stage::Critic, rules.reason));
    }
    let candidate = match artifact::from_value(c.id, c.value.clone(), s.schema) {
        Ok(a) => a,
        Err(e) => return Screened::Stopped(Stop::errored(Stage::Artifact, e.to_string())),
    };
    let (probe, verdict) = match probe(s, &candidate, kind, &rules, record) {
        Ok(p) => p,
        Err(stop) => return Screened::Stopped(stop),
    };
    if let Some(stop) = critic_model(s, c, &rules, &probe, &verdict, record) {
        return Screened::Stopped(stop);
    }
    Screened::Passed { candidate: Box::new(candidate), probe_delta: verdict.delta }
}

/// Screening: the probe sample, against the served strategy's answers.
fn probe(
    s: &Screen<'_>,
    candidate: &Artifact,
    kind: ChangeKind,
    rules: &CriticVerdict,
    record: &mut CandidateRecord,
) -> Result<(Evaluation, ProbeVerdict), Stop> {
    let probe = s
        .backend
        .evaluate(candidate, Some(s.probe_ids))
        .map_err(|e| Stop::errored(Stage::Probe, format!("probe evaluation failed: {e}")))?;
    if probe.outcomes.iter().any(|o| o.error.is_some()) || probe.n() != s.probe_ids.len() {
        return Err(Stop::errored(
            Stage::Probe,
            format!(
                "probe evaluation incomplete: {} of {} questions answered",
                probe.outcomes.iter().filter(|o| o.error.is_none()).count(),
                s.probe_ids.len()
            ),
        ));
    }
    let tolerance = probe_tolerance(s, kind, rules.probe_tolerance, &probe);
    let pv = gates::probe_verdict(s.served_on_probe, probe.correct(), s.probe_ids.len(), tolerance);
    record.delta = Some(pv.delta);
    record.probe = Some(pv.clone());
    if !pv.pass {
        return Err(Stop::rejected(
            StoppedBy::Probe,
            Stage::Probe,
            format!(
                "probe accuracy {:.3} vs served {:.3} on {} questions: below the tolerance {:.3}",
                pv.candidate_accuracy, pv.served_accuracy, pv.n, pv.tolerance
            ),
        ));
    }
    Ok((probe, pv))
}

/// The accuracy the probe tolerates losing: the critic's tolerance; for a
/// `cheaper` candidate at least the non-inferiority margin; under a price,
/// plus what the candidate's saving of context on the probe is worth.
fn probe_tolerance(s: &Screen<'_>, kind: ChangeKind, critic: f64, probe: &Evaluation) -> f64 {
    let mut tolerance = critic;
    if kind == ChangeKind::Cheaper {
        tolerance = tolerance.max(s.cost.noninferiority_margin.unwrap_or(0.0));
    }
    if let (Some(price), Some((a, b))) = (s.cost.price_per_token(), probe_tokens(s, probe)) {
        tolerance += (price * (a - b)).max(0.0);
    }
    tolerance
}

/// Mean context tokens a question on the probe, served and candidate.
fn probe_tokens(s: &Screen<'_>, probe: &Evaluation) -> Option<(f64, f64)> {
    let ids: BTreeSet<&str> = s.probe_ids.iter().map(String::as_str).collect();
    let served: Vec<LabeledOutcome> =
        s.served_results.iter().filter(|q| ids.contains(q.id.as_str())).cloned().collect();
    Some((mean_tokens(&served)?, mean_tokens(&question_results(probe))?))
}

/// Mean context tokens a question of `results`, when every one has a count.
fn mean_tokens(results: &[LabeledOutcome]) -> Option<f64> {
    let t: Option<Vec<f64>> = results.iter().map(|q| q.tokens).collect();
    t.filter(|t| !t.is_empty()).map(|t| t.iter().sum::<f64>() / t.len() as f64)
}

/// The critic model's second opinion, now that the probe is known: it may only reject.
fn critic_model(
    s: &Screen<'_>,
    c: &Candidate<'_>,
    rules: &CriticVerdict,
    probe: &Evaluation,
    pv: &ProbeVerdict,
    record: &mut CandidateRecord,
) -> Option<Stop> {
    let models = s.backend.models().filter(|m| m.has(Role::Critic))?;
    let (improved, regressed) = probe_examples(s.served_results, probe);
    let input = advice::ReviewInput {
        change: c.change,
        field: s.schema.field(&c.change.path),
        effect: s.effects.get(&c.change.path),
        motivation: c.motivation,
        probe: pv,
        improved: &improved,
        regressed: &regressed,
        rules,
        tokens: rules.tokens.or_else(|| probe_tokens(s, probe)),
    };
    match advice::review(models, &input) {
        Ok(v) => {
            record.critic = Some(v.clone());
            v.reject.then(|| Stop::rejected(StoppedBy::Critic(v.label), Stage::CriticModel, v.reason))
        }
        Err(e) => Some(Stop::errored(Stage::CriticModel, format!("the critic failed: {e}"))),
    }
}

/// Up to three improved and three regressed questions of a probe, for the critic.
fn probe_examples(served: &[LabeledOutcome], probe: &Evaluation) -> (Vec<advice::Example>, Vec<advice::Example>) {
    let was: BTreeMap<&str, bool> = served.iter().map(|q| (q.id.as_str(), q.correct)).collect();
    let pick = |want: bool| {
        probe
            .outcomes
            .iter()
            .filter(|o| was.get(o.id.as_str()).is_some_and(|&w| w != want) && o.correct == want)
            .take(3)
            .map(advice::Example::of)
            .collect::<Vec<_>>()
    };
    (pick(true), pick(false))
}

#[cfg(test)]
mod tests {
    use super::*;
    use emend_core::critic::CriticLabel;
    use emend_core::gates::Gate;
    use emend_core::outcome::BackendOutcome;
    use emend_eval::backend::BackendError;
    use emend_eval::fake::FakeBackend;
    use serde_json::json;

    /// Answers the first `correct` questions it is asked, or fails as an
    /// unreachable external harness does (its command timing out twice).
    fn fake(correct: usize, fail: bool) -> FakeBackend {
        let questions = (0..10).map(|i| (format!("q{i}"), "c".to_string())).collect();
        FakeBackend::new(questions, move |_, ids| {
            if fail {
                let timed_out = || emend_eval::backend::ShardFailure::TimedOut {
                    after: std::time::Duration::from_secs(30),
                    stderr: "down".into(),
                };
                let failed = emend_eval::backend::ShardFailed {
                    shard: 1,
                    count: 1,
                    first_attempt: Some(Box::new(timed_out())),
                    kind: timed_out(),
                };
                return Err(BackendError::Shard { failed: Box::new(failed), others: 0 });
            }
            let record = |(i, id): (usize, &String)| BackendOutcome {
                conversation: Some("c".into()),
                ..BackendOutcome::new(id, "c", i < correct)
            };
            Ok(ids.iter().enumerate().map(record).collect())
        })
    }

    fn record() -> CandidateRecord {
        CandidateRecord { actionability: 0.5, ..CandidateRecord::new("r1c1", 1, 1, "h", "k") }
    }

    /// Screens the served strategy with `retrieve.top_k` set to `top_k`, motivated by `label`.
    fn run(backend: &FakeBackend, top_k: i64, label: &str, seen: &mut BTreeSet<String>) -> (Screened, CandidateRecord) {
        let schema = StrategySchema::builtin();
        let text = emend_core::artifact::DEFAULT_STRATEGY;
        let served = artifact::from_yaml("default", text, &schema).unwrap();
        let mut value = served.value.clone();
        let from = value["retrieve"]["top_k"].clone();
        value["retrieve"]["top_k"] = json!(top_k);
        let hash = artifact::content_hash(&value);
        let change = Change { path: "retrieve.top_k".into(), from, to: json!(top_k) };
        let probe_ids: Vec<String> = (0..10).map(|i| format!("q{i}")).collect();
        let (effects, rejected) = (BTreeMap::new(), BTreeSet::new());
        let replay = Replay { mismatches: 0, n: 10, example: None };
        let cost = emend_core::config::CostConfig::default();
        let diagnosis =
            Diagnosis { failures: 3, n: 10, counts: BTreeMap::from([(label.to_string(), 3)]), ..Diagnosis::default() };
        let s = Screen {
            round: 1,
            schema: &schema,
            backend,
            served: &served,
            served_results: &[],
            diagnosis: &diagnosis,
            replay: &replay,
            effects: &effects,
            rejected_moves: &rejected,
            probe_drop_max: 0.02,
            probe_ids: &probe_ids,
            served_on_probe: 5,
            bounded: true,
            cost: &cost,
        };
        let motivation = BTreeMap::from([(label.to_string(), 3)]);
        let c = Candidate {
            id: "r1c1",
            value: &value,
            hash: &hash,
            change: &change,
            motivation: &motivation,
            hypothesis: None,
            data: None,
            known: None,
        };
        let mut r = record();
        (screen(&s, &c, &mut r, seen), r)
    }

    fn stop(s: Screened) -> Stop {
        match s {
            Screened::Stopped(stop) => stop,
            Screened::Passed { .. } => panic!("expected a stop"),
        }
    }

    #[test]
    fn the_first_failing_gate_stops_and_the_hash_is_seen() {
        let mut seen = BTreeSet::new();
        let backend = fake(10, false);
        let (first, _) = run(&backend, 6, "retrieval_gap", &mut seen);
        assert!(matches!(first, Screened::Passed { .. }));
        // The same candidate again: the novelty gate stops it before any evaluation.
        let (again, record) = run(&fake(0, true), 6, "retrieval_gap", &mut seen);
        let again = stop(again);
        assert_eq!(
            (again.by, again.stage, again.outcome),
            (StoppedBy::Gate(Gate::Novelty), Stage::Gates, Resolution::Rejected)
        );
        assert!(record.gates.iter().any(|g| g.gate == Gate::Novelty && !g.pass));
        assert!(record.critic.is_none() && record.probe.is_none());
    }

    #[test]
    fn the_critic_stops_a_change_no_strategy_can_make_good() {
        let (s, record) = run(&fake(10, true), 6, "no_trace", &mut BTreeSet::new());
        let s = stop(s);
        assert_eq!((s.by, s.stage), (StoppedBy::Critic(CriticLabel::OutOfScope), Stage::Critic));
        assert_eq!(record.critic.map(|c| c.label), Some(CriticLabel::OutOfScope));
        assert!(record.probe.is_none());
    }

    #[test]
    fn a_probe_below_the_tolerance_stops_with_its_delta() {
        let (s, record) = run(&fake(2, false), 6, "retrieval_gap", &mut BTreeSet::new());
        let s = stop(s);
        assert_eq!((s.by, s.stage, s.outcome), (StoppedBy::Probe, Stage::Probe, Resolution::Rejected));
        assert!(s.reason.contains("below the tolerance"), "{}", s.reason);
        assert!((record.delta.unwrap() - -0.3).abs() < 1e-9);
    }

    #[test]
    fn a_failed_probe_evaluation_is_an_error_not_a_rejection() {
        let (s, record) = run(&fake(10, true), 6, "retrieval_gap", &mut BTreeSet::new());
        let s = stop(s);
        assert_eq!((s.by, s.stage, s.outcome), (StoppedBy::Errored, Stage::Probe, Resolution::Errored));
        assert_eq!(
            s.reason,
            "probe evaluation failed: shard 1/1: timed out after 30s (killed) after retry; stderr: down"
        );
        assert!(record.probe.is_none());
    }

    #[test]
    fn a_candidate_through_every_stage_passes_with_its_probe_delta() {
        let (s, record) = run(&fake(7, false), 6, "retrieval_gap", &mut BTreeSet::new());
        let Screened::Passed { probe_delta, .. } = s else { panic!("expected a pass: {s:?}") };
        assert!((probe_delta - 0.2).abs() < 1e-9);
        assert_eq!(record.critic.map(|c| c.label), Some(CriticLabel::Actionable));
    }
}
