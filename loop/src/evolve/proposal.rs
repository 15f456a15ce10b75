//! `emend propose`: a person's falsifiable hypothesis. Fields set on the
//! served strategy make one candidate, which a round screens and tests
//! exactly as it would an evolve candidate (the hard gates, the critic, the
//! probe, the confirm test at the next LORD++ alpha). Its prediction (see
//! [`emend_core::prediction`]) is then judged on the confirm part, and a
//! change whose prediction failed is not served, whatever its accuracy test
//! says, unless the person accepts it unpredicted: then it is served and its
//! record says the prediction failed and it was accepted anyway.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use emend_journal::EventLog;
use serde_json::Value;

use super::{Evolution, EvolveError, Result, RoundInput, RunOptions, RunState, RunSummary, Screening};
use crate::progress::Progress;
use crate::propose::{Ask, Proposed as Answer, Proposer};
use emend_core::candidate::{Rule, RuleRecord};
use emend_core::events::{CandidateRecord, ChangeKind};
use emend_core::hypothesis::{self, Hypothesis};
use emend_core::layer_a::Diagnosis;
use emend_core::planner::{Change, Plan};
use emend_core::prediction::{self, Predicted};
use emend_core::schema::{self, StrategySchema};
use emend_core::served::reconcile_served_file;
use emend_core::stop;

/// A person's change and what it predicts.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    /// `(path, value)` set on the served strategy, in the order given.
    pub fields: Vec<(String, Value)>,
    /// The prediction as written (`temporal +3pp, single-hop >= 0`).
    pub text: String,
    pub predicted: Vec<Predicted>,
    /// Serve the change when its prediction failed but every other rule passed.
    pub accept_unpredicted: bool,
}

/// What became of a proposal: its candidate record (None when the round
/// tested nothing, e.g. a version waits for approval) and the run's summary.
#[derive(Debug, Clone)]
pub struct Proposed {
    pub record: Option<CandidateRecord>,
    pub summary: RunSummary,
}

/// `PATH=VALUE`: the value is read as JSON (`12`, `true`, `"x"`, `[1, 2]`),
/// else taken as a string (`bm25`).
pub fn parse_field(s: &str) -> std::result::Result<(String, Value), String> {
    let (path, value) = s
        .split_once('=')
        .filter(|(p, _)| !p.trim().is_empty())
        .ok_or_else(|| format!("--field {s:?}: expected PATH=VALUE (e.g. retrieve.top_k=12)"))?;
    let value = value.trim();
    let parsed = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_string()));
    Ok((path.trim().to_string(), parsed))
}

impl Proposal {
    /// Parses the prediction; a parse error is one line naming the item.
    pub fn new(
        fields: Vec<(String, Value)>,
        text: &str,
        accept_unpredicted: bool,
    ) -> std::result::Result<Proposal, String> {
        let predicted = prediction::parse(text)?;
        Ok(Proposal { fields, text: text.to_string(), predicted, accept_unpredicted })
    }

    /// The candidate document (the fields set on `served`) and its changes.
    /// Each path must be a field the schema declares, and the result must
    /// pass the schema; an error names the field.
    pub fn document(
        &self,
        schema: &StrategySchema,
        served: &Value,
    ) -> std::result::Result<(Value, Vec<Change>), String> {
        let mut doc = served.clone();
        let mut changes = Vec::new();
        for (path, value) in &self.fields {
            let Some(field) = schema.field(path) else {
                let near: Vec<&str> = schema.fields().keys().map(String::as_str).filter(|k| close(k, path)).collect();
                let hint =
                    if near.is_empty() { String::new() } else { format!(" (did you mean {}?)", near.join(", ")) };
                return Err(format!("--field {path}: the strategy schema declares no field {path}{hint}"));
            };
            let from = schema::get_path(&doc, path).cloned().unwrap_or(Value::Null);
            if !field.evolvable && from != *value {
                let why = match field.frozen_by {
                    Some(v) => format!(
                        "frozen at its served value by the rollback from v{v}, which changed it, until \
                         `emend unquarantine v{v}`"
                    ),
                    None => format!("locked: x-evolvable is false for it in {}", schema.origin()),
                };
                return Err(format!(
                    "--field {path}: the field is {why}; the schema gate would stop the change untested"
                ));
            }
            schema::set_path(&mut doc, path, value.clone());
            if from != *value {
                changes.push(Change { path: path.clone(), from, to: value.clone() });
            }
        }
        let problems = schema.check(&doc);
        if let Some(first) = problems.first() {
            // The problem of a field the person set comes first; an invariant names the field it involves.
            let p = problems.iter().find(|p| self.fields.iter().any(|(f, _)| p.path == *f)).unwrap_or(first);
            let text = p.to_string();
            let named = self.fields.iter().map(|(f, _)| f).find(|f| text.contains(f.as_str()));
            let field = named.cloned().unwrap_or_else(|| p.path.clone());
            return Err(format!("--field {field}: the result breaks the schema: {text}"));
        }
        if changes.is_empty() {
            return Err("--field: every field already has that value in the served strategy: nothing to test".into());
        }
        Ok((doc, changes))
    }

    /// The round's one plan: the first changed field's direction.
    fn plan(&self, changes: &[Change]) -> Plan {
        let first = &changes[0];
        let direction = schema::Direction::of_move(&first.from, &first.to);
        Plan {
            key: hypothesis::key(&first.path, direction),
            path: first.path.clone(),
            direction,
            actionability: 0.0,
            ucb: f64::NAN,
            reputation: 0.0,
            score: 0.0,
            motivation: BTreeMap::new(),
        }
    }
}

/// Whether `a` and `b` name nearly the same path (a typo's suggestion).
fn close(a: &str, b: &str) -> bool {
    let (x, y) = (a.rsplit('.').next().unwrap_or(a), b.rsplit('.').next().unwrap_or(b));
    x == y || a.ends_with(b) || b.ends_with(a)
}

/// The proposer of a person's change: it answers the round's one plan once.
struct Person {
    fields: Vec<(String, Value)>,
    asked: bool,
}

impl Proposer for Person {
    fn ask(&mut self, ask: &Ask<'_>, _plan: &Plan, _node: &Hypothesis) -> Option<Answer> {
        if std::mem::replace(&mut self.asked, true) {
            return None;
        }
        let proposal =
            Proposal { fields: self.fields.clone(), text: String::new(), predicted: vec![], accept_unpredicted: false };
        Some(match proposal.document(ask.schema, &ask.served.value) {
            Ok((value, changes)) => Answer::Candidate {
                value,
                changes,
                data: None,
                known: None,
                credits: Vec::new(),
                kind: ChangeKind::Better,
            },
            Err(reason) => Answer::Failed { reason },
        })
    }
}

impl<L: EventLog + ?Sized> Evolution<'_, L> {
    /// Tests a person's change as one round's one candidate (see the module
    /// doc). Refused before anything is evaluated (exit class bad input):
    /// a field the schema does not declare or a result it refuses, a
    /// predicted category the dataset does not have, a strategy the journal
    /// evaluated before.
    pub fn propose(&mut self, proposal: &Proposal, progress: &mut dyn FnMut(Progress)) -> Result<Proposed> {
        let started = Instant::now();
        reconcile_served_file(self.project, self.schema, &*self.log)?;
        self.check_proposal(proposal)?;
        let before = self.store().last_round()?;
        let opts = RunOptions { proposal: Some(proposal.clone()), ..RunOptions::rounds(1, 1) };
        let mut proposers: Vec<Box<dyn Proposer>> =
            vec![Box::new(Person { fields: proposal.fields.clone(), asked: false })];
        let (mut state, mut summary) = (RunState::default(), RunSummary::default());
        let step = self.step(&opts, started, &mut state, &mut summary, &mut proposers, progress);
        match (step, stop::requested()) {
            (Err(e), None) => return Err(e),
            (_, Some(cause)) => self.interrupted(cause, &mut summary)?,
            (Ok(Some(stopped)), None) => summary.stopped = stopped,
            (Ok(None), None) => {}
        }
        summary.evaluations_used = state.used;
        let summary = self.finish(summary, started)?;
        let record = self.store().candidates()?.into_iter().rev().find(|c| c.round > before);
        Ok(Proposed { record, summary })
    }

    /// The refusals of [`Evolution::propose`], before anything is evaluated.
    pub fn check_proposal(&self, proposal: &Proposal) -> Result<()> {
        let store = self.store();
        let served = store.served()?.ok_or_else(|| emend_core::served::missing(0))?;
        let document = store.document(&served.hash)?.ok_or_else(|| emend_core::served::missing(served.version))?;
        let (doc, _) = proposal.document(self.schema, &document).map_err(EvolveError::Proposal)?;
        let known: BTreeSet<String> = self.backend.questions().into_iter().map(|(_, c)| c).collect();
        prediction::check_categories(&proposal.predicted, &known).map_err(EvolveError::Proposal)?;
        let hash = emend_core::artifact::content_hash(&doc);
        if store.seen_hashes()?.contains(&hash) {
            return Err(EvolveError::Proposal(format!(
                "the proposed strategy (hash {}) was evaluated before: the novelty gate would stop it untested",
                &hash[..hash.len().min(12)]
            )));
        }
        Ok(())
    }

    /// The round's plans: a proposal's one plan, else the planner's.
    pub(super) fn proposal_plans(&self, input: &RoundInput<'_>, diagnosis: &Diagnosis) -> Option<Vec<Plan>> {
        let proposal = input.opts.proposal.as_ref()?;
        let changes = proposal.document(self.schema, &input.observed.artifact.value).map(|(_, c)| c).ok()?;
        // Its motivation is the served strategy's diagnosis on the search part, as the planner's would be.
        Some(vec![Plan { motivation: diagnosis.counts.clone(), ..proposal.plan(&changes) }])
    }

    /// Judges a proposal's prediction for each candidate that had the
    /// confirm test, on the same confirm part and pairs; a failed one adds
    /// the failing `prediction` rule (the change is not served) unless the
    /// person accepts it unpredicted.
    pub(super) fn judge_prediction(&self, input: &RoundInput<'_>, screening: &mut Screening) {
        let Some(proposal) = input.opts.proposal.as_ref() else { return };
        let base: Vec<emend_stats::Outcome> =
            input.parts.confirm_of(&input.observed.results).iter().map(emend_stats::Outcome::from).collect();
        let gates = &self.project.config.gates;
        let seed = self.project.config.loop_.seed.wrapping_add(input.round);
        for t in screening.trials.iter_mut() {
            let (Some(full), Some(record)) = (t.full.as_ref(), t.record.full.as_mut()) else { continue };
            let cand: Vec<emend_stats::Outcome> = full.iter().map(emend_stats::Outcome::from).collect();
            let mut verdict = prediction::judge(
                &proposal.text,
                &proposal.predicted,
                &base,
                &cand,
                gates.bootstrap_resamples as u32,
                seed,
            );
            let failed = verdict.verdicts.iter().filter(|v| !v.held).count();
            if verdict.held || !proposal.accept_unpredicted {
                record.rules.push(RuleRecord {
                    name: Rule::Prediction,
                    category: None,
                    value: failed as f64,
                    threshold: 0.0,
                    pass: verdict.held,
                    detail: verdict.describe(),
                });
                record.accept &= verdict.held;
            } else {
                verdict.accepted_unpredicted = true;
            }
            t.record.prediction = Some(verdict);
        }
    }
}

/// After the decision, a proposal's record says what its prediction showed.
pub(super) fn note_predictions(screening: &mut Screening) {
    for t in screening.trials.iter_mut() {
        if let Some(p) = &t.record.prediction {
            t.record.reason = format!("{}; {}", t.record.reason, p.describe());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_field_is_a_path_and_a_json_or_string_value() {
        assert_eq!(parse_field("retrieve.top_k=12").unwrap(), ("retrieve.top_k".into(), json!(12)));
        assert_eq!(parse_field("a.b = true").unwrap(), ("a.b".into(), json!(true)));
        assert_eq!(parse_field("a.b=bm25").unwrap(), ("a.b".into(), json!("bm25")));
        assert!(parse_field("top_k").unwrap_err().contains("expected PATH=VALUE"));
        assert!(parse_field("=3").is_err());
    }

    #[test]
    fn the_document_names_an_undeclared_field_and_a_value_the_schema_refuses() {
        let schema = StrategySchema::builtin();
        let text = include_str!("../../../strategies/default.yaml");
        let served = emend_core::artifact::from_yaml("default", text, &schema).unwrap().value;
        let p = |f: &str| Proposal::new(vec![parse_field(f).unwrap()], "temporal >= 0", false).unwrap();
        let e = p("retrieve.top_kk=3").document(&schema, &served).unwrap_err();
        assert!(e.starts_with("--field retrieve.top_kk: the strategy schema declares no field"), "{e}");
        let e = p("retrieve.top_k=-4").document(&schema, &served).unwrap_err();
        assert!(e.starts_with("--field retrieve.top_k: the result breaks the schema"), "{e}");
        let top_k = schema::get_path(&served, "retrieve.top_k").unwrap().as_u64().unwrap();
        let (doc, changes) = p(&format!("retrieve.top_k={}", top_k + 1)).document(&schema, &served).unwrap();
        assert_eq!(changes.len(), 1);
        assert_eq!(schema::get_path(&doc, "retrieve.top_k"), Some(&json!(top_k + 1)));
        let e = p(&format!("retrieve.top_k={top_k}")).document(&schema, &served).unwrap_err();
        assert!(e.contains("nothing to test"), "{e}");
    }
}
