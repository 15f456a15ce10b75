//! Proposing, behind a small ask/tell interface in the spirit of Optuna's
//! samplers. The round asks proposers, in order, for a candidate along each
//! direction the planner ranked; the first that answers is taken. After the
//! decision, every proposer is told what became of the round's candidates.
//!
//! Four proposers, two defined here: [`ModelRewrite`] (the evolver model
//! rewrites a text field, when a model is configured) and [`RuleEvolver`]
//! (the schema's own moves, always asked last); `search.method` adds the
//! global search ([`crate::jump::JumpProposer`], `jump`) or the step search
//! ([`crate::step_search::StepProposer`], `steps`), or lets the rule
//! evolver propose its own candidates (`rules`). A proposer may evaluate strategies cheaply on a subset of
//! the task set through [`Ask::backend`], and a candidate may change several
//! fields at once ([`Proposed::Candidate::changes`]).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use emend_core::artifact::Artifact;
use emend_core::candidate::{Resolution, StoppedBy};
use emend_core::events::{CandidateRecord, ChangeKind, Credit, LabeledOutcome};
use emend_core::gates::DataText;
use emend_core::hypothesis::Hypothesis;
use emend_core::layer_a::Diagnosis;
use emend_core::planner::{self, Change, DimensionEffect, Plan, Proposal};
use emend_core::schema::{self, Direction, FieldKind, StrategySchema};
use emend_eval::backend::Backend;
use emend_eval::llm::{Role, advice};

/// What a proposer sees: the served strategy and its results, the diagnosis,
/// the hypothesis tree and the journal's history, and an evaluator.
pub struct Ask<'a> {
    pub round: u64,
    pub schema: &'a StrategySchema,
    pub served: &'a Artifact,
    pub results: &'a [LabeledOutcome],
    pub diagnosis: &'a Diagnosis,
    pub tree: &'a BTreeMap<String, Hypothesis>,
    /// Per strategy field: how its past changes fared.
    pub effects: &'a BTreeMap<String, DimensionEffect>,
    /// Hashes of every strategy the journal has evaluated (the novelty gate's set).
    pub seen: &'a BTreeSet<String>,
    /// `(path, from, to)` moves evaluated and rejected before.
    pub rejected_moves: &'a BTreeSet<(String, String, String)>,
    /// LLM roles strategies may use.
    pub roles: &'a [String],
    /// Evaluates a strategy on every question or on a list of question ids.
    pub backend: &'a dyn Backend,
    /// The round's ranked directions (the one asked about is among them).
    pub plans: &'a [Plan],
    /// Questions in the whole task set (an evaluation of k costs k / n).
    pub total_questions: usize,
    /// The alpha of the round's first confirm test (LORD++).
    pub next_alpha: f64,
    /// The served version's parent document (where the last accepted step started), if any.
    pub parent: Option<&'a Value>,
    /// Full-evaluation equivalents left under `--max-evals`, if set.
    pub budget_left: Option<f64>,
    /// The harness settings that `x-inert-when` conditions under `harness.`
    /// read (`{"judge": "evidence"}` for the built-in harness).
    pub harness: &'a Value,
}

/// A proposer's answer for one direction.
#[derive(Debug, Clone)]
pub enum Proposed {
    Candidate {
        value: Value,
        /// Never empty; the first is the one the critic weighs.
        changes: Vec<Change>,
        /// Dataset text a model saw while proposing it (the gates check the proposal against it).
        data: Option<DataText>,
        /// The candidate's results on the whole search part, when the proposer
        /// already evaluated it there (the probe and the winner's completion reuse them).
        known: Option<Vec<LabeledOutcome>>,
        /// Per changed field, its hypothesis node and measured contribution
        /// (the global search); empty when the proposer measured none.
        credits: Vec<Credit>,
        /// What it claims: a gain, or the same quality for less context.
        kind: ChangeKind,
    },
    /// The move is out of scope (e.g. it needs an LLM role that is not configured).
    Blocked { reason: String },
    /// Nothing new is left in this direction.
    Exhausted { reason: String },
    /// The proposer itself failed (a model call).
    Failed { reason: String },
}

/// What became of one proposal, told after the round's decision.
#[derive(Debug, Clone, PartialEq)]
pub struct Told {
    pub id: String,
    pub hypothesis: String,
    pub outcome: Resolution,
    pub stopped_by: Option<StoppedBy>,
    /// Paired delta on the search part (the probe's), never the confirm
    /// test's: nothing measured on the confirm part reaches a proposer.
    pub delta: Option<f64>,
}

impl From<&CandidateRecord> for Told {
    fn from(r: &CandidateRecord) -> Self {
        Told {
            id: r.id.clone(),
            hypothesis: r.hypothesis.clone(),
            outcome: r.outcome,
            stopped_by: r.rejected_by,
            delta: r.search_delta(),
        }
    }
}

/// Why a proposer that proposes nothing more will not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopCause {
    /// What is left of `--max-evals` cannot pay for another step.
    Budget,
    /// The search converged by its stated rule (`search.converge` trials in a
    /// row without anything better than the served strategy worth a test).
    Converged,
}

pub trait Proposer {
    /// A proposal along `plan`'s direction, or None when this proposer does not
    /// handle it (the next proposer is asked).
    fn ask(&mut self, ask: &Ask<'_>, plan: &Plan, node: &Hypothesis) -> Option<Proposed>;

    /// What became of the round's proposals. The loop's own learning (the
    /// hypothesis tree) is journaled; a proposer with state of its own keeps it here.
    fn tell(&mut self, _told: &[Told]) {}

    /// Full-evaluation equivalents this proposer spent evaluating since it was
    /// last asked (the round adds them to its budget).
    fn spent(&mut self) -> f64 {
        0.0
    }

    /// A new round begins (also a round that journals nothing because its
    /// search found nothing, whose number the next round takes again).
    fn start_round(&mut self) {}

    /// Events recording this proposer's own state since it was last asked
    /// (the loop journals them with the round, or alone when the round
    /// journals nothing), so that a later run can [`Proposer::restore`] it.
    fn journal(&mut self) -> Vec<emend_core::events::Event> {
        Vec::new()
    }

    /// Rebuilds the state a previous run journaled: its searches and the
    /// journal's candidate records (what became of what it proposed).
    fn restore(
        &mut self,
        _searches: &[emend_core::events::SearchRecord],
        _candidates: &[emend_core::events::CandidateRecord],
    ) {
    }

    /// Set once this proposer will propose nothing more in this run, and why.
    fn stop_cause(&self) -> Option<StopCause> {
        None
    }
}

/// The schema's own moves (`planner::evolve`).
///
/// With `candidates` false it only says which directions are out of scope
/// (blocked: they need a model that is not installed, a role that is not
/// configured) or exhausted (at a bound, or at a value that already means
/// "off"), and leaves every move to a proposer that screens its candidates
/// itself (the global search or the step search, under `search.method: jump`
/// or `steps`): one field moved at a time is what those proposers already
/// screen.
pub struct RuleEvolver {
    pub candidates: bool,
}

impl Proposer for RuleEvolver {
    fn ask(&mut self, ask: &Ask<'_>, plan: &Plan, _node: &Hypothesis) -> Option<Proposed> {
        match planner::evolve(ask.schema, &ask.served.value, plan, ask.tree.get(&plan.key), ask.roles) {
            Proposal::Candidate { value, change } => self.candidates.then(|| Proposed::Candidate {
                value: *value,
                changes: vec![change],
                data: None,
                known: None,
                credits: Vec::new(),
                kind: ChangeKind::Better,
            }),
            Proposal::Blocked { reason } => Some(Proposed::Blocked { reason }),
            Proposal::Exhausted { reason } => Some(Proposed::Exhausted { reason }),
        }
    }
}

/// The evolver model rewrites a text field, when the direction is a rewrite,
/// `roles.evolver` is configured and the field's own role exists. The examples
/// are failed questions of the served strategy (re-evaluated on just those
/// ids, cheap with the caches); their text is what the gates later check the
/// proposal against.
pub struct ModelRewrite;

impl Proposer for ModelRewrite {
    fn ask(&mut self, ask: &Ask<'_>, plan: &Plan, node: &Hypothesis) -> Option<Proposed> {
        let models = ask.backend.models().filter(|m| m.has(Role::Evolver))?;
        let field = ask.schema.field(&plan.path).filter(|f| f.kind == FieldKind::Text)?;
        if plan.direction != Direction::Rewrite || field.needs_role.as_ref().is_some_and(|r| !ask.roles.contains(r)) {
            return None;
        }
        let current = schema::get_path(&ask.served.value, &plan.path).and_then(Value::as_str)?;
        let ids = example_ids(ask.results, &plan.motivation);
        let examples: Vec<advice::Example> = if ids.is_empty() {
            Vec::new()
        } else {
            match ask.backend.evaluate(ask.served, Some(&ids)) {
                Ok(eval) => eval.outcomes.iter().map(advice::Example::of).collect(),
                Err(e) => return Some(Proposed::Failed { reason: format!("cannot collect examples: {e}") }),
            }
        };
        let input = advice::RewriteInput {
            field,
            current,
            motivation: &plan.motivation,
            splits: &ask.diagnosis.splits,
            examples: &examples,
            attempt: node.visits + node.blocked,
        };
        let patch = match advice::rewrite(models, &input) {
            Ok(p) => p,
            Err(e) => return Some(Proposed::Failed { reason: e.to_string() }),
        };
        let mut data = DataText::new();
        for t in examples.iter().flat_map(advice::Example::texts) {
            data.add(&t);
        }
        let value = apply_patch(&ask.served.value, &patch.path, patch.value.clone());
        let from = schema::get_path(&ask.served.value, &patch.path).cloned().unwrap_or(Value::Null);
        let change = Change { path: patch.path, from, to: patch.value };
        Some(Proposed::Candidate {
            value,
            changes: vec![change],
            data: Some(data),
            known: None,
            credits: Vec::new(),
            kind: ChangeKind::Better,
        })
    }
}

/// Up to six failed questions motivating the direction, sorted by id; those
/// whose evidence reached the context (`full_coverage`) are preferred.
fn example_ids(results: &[LabeledOutcome], motivation: &BTreeMap<String, usize>) -> Vec<String> {
    let mut ids: Vec<String> = results
        .iter()
        // A generation error motivates under its split's name when it has one.
        .filter(|q| {
            q.label.as_ref().is_some_and(|l| motivation.contains_key(l.as_str()))
                || q.split.as_deref().is_some_and(|s| motivation.contains_key(s))
        })
        .map(|q| (q.split.as_deref() != Some("full_coverage"), q.id.clone()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .map(|(_, id)| id)
        .take(6)
        .collect();
    ids.sort();
    ids
}

/// Sets `path` in a copy of `doc`, creating the objects on the way, so that
/// even a patch to a path the schema does not know reaches the gates.
fn apply_patch(doc: &Value, path: &str, value: Value) -> Value {
    let mut out = doc.clone();
    let mut slot = &mut out;
    for key in path.split('.') {
        if !slot.is_object() {
            *slot = Value::Object(Default::default());
        }
        slot = slot.as_object_mut().expect("an object").entry(key.to_string()).or_insert(Value::Null);
    }
    *slot = value;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_patch_creates_the_objects_on_its_way() {
        let doc = json!({"a": {"b": 1}, "c": 2});
        assert_eq!(apply_patch(&doc, "a.b", json!(5)), json!({"a": {"b": 5}, "c": 2}));
        assert_eq!(apply_patch(&doc, "c.d", json!("x")), json!({"a": {"b": 1}, "c": {"d": "x"}}));
        assert_eq!(apply_patch(&doc, "e.f.g", json!(true)), json!({"a": {"b": 1}, "c": 2, "e": {"f": {"g": true}}}));
    }

    fn q(id: &str, label: Option<&str>, split: Option<&str>) -> LabeledOutcome {
        LabeledOutcome {
            id: id.into(),
            category: "c".into(),
            conversation: None,
            correct: label.is_none(),
            label: label.map(|l| emend_core::layer_a::Label::parse(l).expect("a Layer A label")),
            tokens: None,
            split: split.map(String::from),
        }
    }

    #[test]
    fn examples_are_motivating_failures_full_coverage_first_then_sorted() {
        let results: Vec<LabeledOutcome> = (0..9)
            .map(|i| {
                let split = if i % 3 == 0 { Some("full_coverage") } else { Some("source_only") };
                q(&format!("q{i}"), Some("generation_error"), split)
            })
            .chain([q("z", Some("retrieval_gap"), None), q("ok", None, None)])
            .collect();
        let motivation = BTreeMap::from([("generation_error".to_string(), 9)]);
        // q0, q3, q6 (full coverage) first, then the other ids in order, six in all.
        assert_eq!(example_ids(&results, &motivation), ["q0", "q1", "q2", "q3", "q4", "q6"]);
    }
}
