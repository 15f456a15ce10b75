//! Layer A: every failed question is labelled by the earliest pipeline stage
//! that lost its gold evidence. Pure: a label is a function of one trace.
//!
//! As specified: ingestion failed (`ingestion_gap`) only when no memory item
//! derived from any gold evidence turn exists; when some gold turns have a
//! memory item and a lost one has none, the finding is `partial_ingestion`.
//! A `generation_error` (all evidence in the context, answer judged wrong) is
//! split by [`split`]: `source_only` when the memory that reached the context
//! dropped gold-answer terms its source turns state (extraction lost or
//! weakened the fact), `full_coverage` when it kept them all (the answerer
//! failed). A classifier model, when configured, sees the same pair (source
//! turns, memory items) and its verdict replaces the deterministic one.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::outcome::Label;
use crate::outcome::{BackendOutcome, LabeledOutcome};

/// The label of one outcome; `None` for a correct answer.
pub fn label(o: &BackendOutcome) -> Option<Label> {
    if o.correct {
        return None;
    }
    let Some(trace) = &o.evidence_trace else {
        // A system that reports its evidence but no trace still tells us
        // when the evidence could not be located.
        let resolved = o.evidence.as_ref().map_or(0, Vec::len);
        let unresolved = o.unresolved_evidence.as_ref().map_or(0, Vec::len);
        if o.evidence.is_some() && resolved == 0 && unresolved > 0 {
            return Some(Label::UnresolvedEvidence);
        }
        return Some(Label::NoTrace);
    };
    if trace.is_empty() {
        return Some(Label::UnresolvedEvidence);
    }
    // Only turns missing from the context were lost; a turn can be in the
    // context without a retrieved item holding it (neighbour backfill).
    let lost: Vec<&crate::outcome::EvidenceStep> = trace.iter().filter(|s| !s.in_context).collect();
    if lost.is_empty() {
        Some(Label::GenerationError)
    } else if trace.iter().all(|s| s.memory_ids.is_empty()) {
        Some(Label::IngestionGap)
    } else if lost.iter().any(|s| s.memory_ids.is_empty()) {
        Some(Label::PartialIngestion)
    } else if lost.iter().any(|s| !s.retrieved) {
        Some(Label::RetrievalGap)
    } else {
        Some(Label::KfFiltered)
    }
}

/// Seed 002's order (App. 15), for comparison with [`label`]: whole
/// question, not per turn. Ingestion failed when no memory item derives from
/// any gold turn; retrieval failed when none of those items was retrieved;
/// every other failure is one class, generation or lossy ingestion (split by
/// [`split`]'s rule). The seed has no `partial_ingestion` and no
/// `kf_filtered`: a question with one gold item retrieved is past retrieval
/// even when another gold turn was never stored, retrieved or packed. The
/// labels it returns are `ingestion_gap`, `retrieval_gap`,
/// `generation_or_lossy_ingestion`, `unresolved_evidence` and `no_trace`.
pub fn seed_order_label(o: &BackendOutcome) -> Option<&'static str> {
    let emend = label(o)?;
    let Some(trace) = o.evidence_trace.as_ref().filter(|t| !t.is_empty()) else {
        return Some(emend.as_str());
    };
    Some(if trace.iter().all(|s| s.memory_ids.is_empty()) {
        "ingestion_gap"
    } else if !trace.iter().any(|s| s.retrieved) {
        "retrieval_gap"
    } else {
        "generation_or_lossy_ingestion"
    })
}

/// Whether emend's label and the seed order's name the same stage
/// (`generation_error` is the seed's generation-or-lossy-ingestion class).
pub fn same_stage(emend: &str, seed: &str) -> bool {
    emend == seed || (emend == "generation_error" && seed == "generation_or_lossy_ingestion")
}

/// emend's label against seed 002's order ([`seed_order_label`]) for every
/// failure: (emend label, seed label) -> count, in label order.
pub fn order_table(outcomes: &[BackendOutcome]) -> BTreeMap<(String, String), usize> {
    let mut t = BTreeMap::new();
    for o in outcomes {
        if let (Some(e), Some(s)) = (label(o), seed_order_label(o)) {
            *t.entry((e.as_str().to_string(), s.to_string())).or_default() += 1;
        }
    }
    t
}

/// The split of a generation error.
pub const SOURCE_ONLY: &str = "source_only";
pub const FULL_COVERAGE: &str = "full_coverage";

/// The deterministic split of a `generation_error`: `source_only` when the
/// memory that reached the context lost a gold-answer term its source turns
/// state, `full_coverage` when it kept every one (including when the source
/// states none of them: nothing was lost between source and memory, so the
/// answering step failed). `None` for any other label or without the trace's
/// `answer_coverage` (no gold answer, or an external system that does not
/// report it).
pub fn split(o: &BackendOutcome) -> Option<&'static str> {
    if label(o) != Some(Label::GenerationError) {
        return None;
    }
    let c = o.answer_coverage.as_ref()?;
    if c.source.iter().all(|t| c.kept.contains(t)) { Some(FULL_COVERAGE) } else { Some(SOURCE_ONLY) }
}

/// Label counts overall and by category, plus example question ids.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    pub failures: usize,
    pub n: usize,
    /// label -> count
    pub counts: BTreeMap<String, usize>,
    /// category -> label -> count
    pub by_category: BTreeMap<String, BTreeMap<String, usize>>,
    /// label -> up to `examples` question ids, in id order
    pub examples: BTreeMap<String, Vec<String>>,
    /// The split of `generation_error` ([`split`], or the classifier's when
    /// one is configured): `full_coverage` or `source_only` -> count.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub splits: BTreeMap<String, usize>,
}

impl Diagnosis {
    pub fn count(&self, l: Label) -> usize {
        self.counts.get(l.as_str()).copied().unwrap_or(0)
    }
}

/// The diagnosis of recorded results: label counts overall and by category,
/// example ids (the first `examples` per label, in result order) and the
/// classifier's splits. The loop and `emend diagnose` both build it here.
pub fn diagnose(results: &[LabeledOutcome], examples: usize) -> Diagnosis {
    let mut d = Diagnosis { n: results.len(), ..Diagnosis::default() };
    for q in results {
        let Some(l) = q.label.map(|l| l.as_str().to_string()) else { continue };
        d.failures += 1;
        *d.counts.entry(l.clone()).or_default() += 1;
        *d.by_category.entry(q.category.clone()).or_default().entry(l.clone()).or_default() += 1;
        let ex = d.examples.entry(l.clone()).or_default();
        if ex.len() < examples {
            ex.push(q.id.clone());
        }
        if let Some(split) = &q.split {
            *d.splits.entry(split.clone()).or_default() += 1;
        }
    }
    d
}

/// How the failures moved from one version to the next (seed 002's
/// root-cause shift): per label its count under each, and per question id
/// both evaluated, what became of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Shift {
    /// Questions both evaluations answered (by id).
    pub questions: usize,
    /// Per label (Layer A's order, those either version has): (from, to).
    pub labels: Vec<(Label, usize, usize)>,
    /// Failed under `from`, correct under `to`.
    pub fixed: usize,
    /// Correct under `from`, failed under `to`: new failures.
    pub new: usize,
    /// Failed under both with the same label.
    pub persist: usize,
    /// Failed under both, the evidence lost at another stage.
    pub moved: usize,
    /// (from label, to label) -> count of the questions that `moved`.
    pub moves: BTreeMap<String, usize>,
}

/// The [`Shift`] from `from` to `to`, paired by question id (a question
/// only one of them answered is left out of every count).
pub fn shift(from: &[LabeledOutcome], to: &[LabeledOutcome]) -> Shift {
    let after: BTreeMap<&str, &LabeledOutcome> = to.iter().map(|q| (q.id.as_str(), q)).collect();
    let mut s = Shift::default();
    let mut counts: BTreeMap<Label, (usize, usize)> = BTreeMap::new();
    for a in from {
        let Some(b) = after.get(a.id.as_str()) else { continue };
        s.questions += 1;
        if let Some(l) = a.label {
            counts.entry(l).or_default().0 += 1;
        }
        if let Some(l) = b.label {
            counts.entry(l).or_default().1 += 1;
        }
        match (a.label, b.label) {
            (Some(_), None) => s.fixed += 1,
            (None, Some(_)) => s.new += 1,
            (Some(x), Some(y)) if x == y => s.persist += 1,
            (Some(x), Some(y)) => {
                s.moved += 1;
                *s.moves.entry(format!("{} -> {}", x.as_str(), y.as_str())).or_default() += 1;
            }
            (None, None) => {}
        }
    }
    s.labels = Label::ALL.iter().filter_map(|l| counts.get(l).map(|&(f, t)| (*l, f, t))).collect();
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::EvidenceStep;

    fn step(mem: bool, retrieved: bool, in_context: bool) -> EvidenceStep {
        EvidenceStep {
            turn: "D1:1".into(),
            memory_ids: if mem { vec!["c/m1".into()] } else { vec![] },
            retrieved,
            in_context,
        }
    }

    fn outcome(correct: bool, trace: Option<Vec<EvidenceStep>>) -> BackendOutcome {
        BackendOutcome {
            id: "c#0".into(),
            conversation: Some("c".into()),
            category: "single-hop".into(),
            correct,
            question: None,
            gold_answer: None,
            answer: None,
            evidence: Some(vec!["D1:1".into()]),
            unresolved_evidence: Some(vec![]),
            evidence_trace: trace,
            context_tokens: Some(10.0),
            error: None,
            answer_coverage: None,
            intent: None,
            expansion_terms: vec![],
            context_ids: vec![],
        }
    }

    fn covered(source: &[&str], kept: &[&str]) -> Option<emend_harness::outcome::AnswerCoverage> {
        Some(emend_harness::outcome::AnswerCoverage {
            source: source.iter().map(|s| s.to_string()).collect(),
            kept: kept.iter().map(|s| s.to_string()).collect(),
            memory: vec![],
        })
    }

    #[test]
    fn ingestion_gap_needs_every_gold_turn_missing_from_memory() {
        let none = step(false, false, false);
        assert_eq!(label(&outcome(false, Some(vec![none.clone(), none.clone()]))), Some(Label::IngestionGap));
        // One gold turn made it into memory (and even the context): partial.
        assert_eq!(
            label(&outcome(false, Some(vec![step(true, true, true), none.clone()]))),
            Some(Label::PartialIngestion)
        );
        assert_eq!(
            label(&outcome(false, Some(vec![step(true, false, false), none.clone()]))),
            Some(Label::PartialIngestion)
        );
        // A gold turn without memory that is in the context anyway (backfill) is not lost.
        assert_eq!(
            label(&outcome(false, Some(vec![step(false, false, true), step(true, false, false)]))),
            Some(Label::RetrievalGap)
        );
        assert_eq!(Label::PartialIngestion.stage(), "ingest");
    }

    #[test]
    fn generation_errors_split_on_what_the_memory_kept_of_the_source() {
        let mut o = outcome(false, Some(vec![step(true, true, true)]));
        assert_eq!(split(&o), None, "no coverage in the trace: no split");
        o.answer_coverage = covered(&["paris", "2019"], &["paris"]);
        assert_eq!(split(&o), Some(SOURCE_ONLY));
        o.answer_coverage = covered(&["paris", "2019"], &["2019", "paris"]);
        assert_eq!(split(&o), Some(FULL_COVERAGE));
        o.answer_coverage = covered(&[], &[]);
        assert_eq!(split(&o), Some(FULL_COVERAGE), "nothing to lose: the answerer failed");
        // Only generation errors are split.
        let mut r = outcome(false, Some(vec![step(true, false, false)]));
        r.answer_coverage = covered(&["paris"], &[]);
        assert_eq!(split(&r), None);
        o.correct = true;
        assert_eq!(split(&o), None);
    }

    #[test]
    fn labels_serialize_as_strings_and_old_records_load() {
        for l in Label::ALL {
            assert_eq!(serde_json::to_value(l).unwrap(), serde_json::Value::String(l.as_str().into()));
            assert_eq!(Label::parse(l.as_str()), Some(l));
        }
        // A result recorded before partial ingestion and the split existed.
        let old: crate::outcome::LabeledOutcome = serde_json::from_str(
            r#"{"id": "c#1", "category": "temporal", "conversation": "c", "correct": false, "label": "ingestion_gap", "tokens": 12.0}"#,
        )
        .unwrap();
        assert_eq!((old.label, old.split), (Some(Label::IngestionGap), None));
    }

    #[test]
    fn the_diagnosis_counts_the_deterministic_split() {
        let mut a = outcome(false, Some(vec![step(true, true, true)]));
        a.id = "a".into();
        a.answer_coverage = covered(&["paris"], &[]);
        let mut b = outcome(false, Some(vec![step(true, true, true)]));
        b.id = "b".into();
        b.answer_coverage = covered(&["paris"], &["paris"]);
        let mut eval = crate::outcome::Evaluation::new(vec![a, b]);
        let d = diagnose(&crate::records::question_results(&eval), 5);
        assert_eq!((d.splits["source_only"], d.splits["full_coverage"]), (1, 1));
        // A classifier's verdict replaces the deterministic one.
        eval.splits.insert("a".into(), "full_coverage".into());
        let d = diagnose(&crate::records::question_results(&eval), 5);
        assert_eq!((d.splits.get("source_only"), d.splits["full_coverage"]), (None, 2));
    }

    #[test]
    fn earliest_losing_stage_wins() {
        assert_eq!(label(&outcome(true, Some(vec![step(false, false, false)]))), None);
        assert_eq!(
            label(&outcome(false, Some(vec![step(true, true, true), step(false, false, false)]))),
            Some(Label::PartialIngestion)
        );
        assert_eq!(
            label(&outcome(false, Some(vec![step(true, true, false), step(true, false, false)]))),
            Some(Label::RetrievalGap)
        );
        assert_eq!(label(&outcome(false, Some(vec![step(true, true, false)]))), Some(Label::KfFiltered));
        assert_eq!(label(&outcome(false, Some(vec![step(true, true, true)]))), Some(Label::GenerationError));
        // Backfilled into the context without being retrieved: not lost.
        assert_eq!(label(&outcome(false, Some(vec![step(true, false, true)]))), Some(Label::GenerationError));
        assert_eq!(
            label(&outcome(false, Some(vec![step(true, false, true), step(true, true, false)]))),
            Some(Label::KfFiltered)
        );
        assert_eq!(label(&outcome(false, Some(vec![]))), Some(Label::UnresolvedEvidence));
        assert_eq!(label(&outcome(false, None)), Some(Label::NoTrace));
    }

    #[test]
    fn the_seed_order_labels_the_whole_question() {
        let seed = |steps: Vec<EvidenceStep>| seed_order_label(&outcome(false, Some(steps)));
        let none = step(false, false, false);
        assert_eq!(seed(vec![none.clone(), none.clone()]), Some("ingestion_gap"));
        // Partial ingestion: one gold turn stored, never retrieved -> retrieval.
        assert_eq!(seed(vec![step(true, false, false), none.clone()]), Some("retrieval_gap"));
        // One gold item retrieved: past retrieval, whatever else was lost.
        assert_eq!(seed(vec![step(true, true, true), none.clone()]), Some("generation_or_lossy_ingestion"));
        assert_eq!(seed(vec![step(true, true, false)]), Some("generation_or_lossy_ingestion"));
        assert_eq!(
            seed(vec![step(true, true, false), step(true, false, false)]),
            Some("generation_or_lossy_ingestion")
        );
        // Backfilled into the context, never retrieved: the seed calls it retrieval.
        assert_eq!(seed(vec![step(true, false, true)]), Some("retrieval_gap"));
        assert_eq!(seed_order_label(&outcome(true, Some(vec![none.clone()]))), None);
        assert_eq!(seed_order_label(&outcome(false, Some(vec![]))), Some("unresolved_evidence"));
        assert_eq!(seed_order_label(&outcome(false, None)), Some("no_trace"));
        let mut a = outcome(false, Some(vec![step(true, true, false), step(true, false, false)]));
        a.id = "a".into();
        let b = outcome(false, Some(vec![step(true, false, false)]));
        let t = order_table(&[a, b, outcome(true, Some(vec![none]))]);
        assert_eq!(t[&("retrieval_gap".into(), "generation_or_lossy_ingestion".into())], 1);
        assert_eq!(t[&("retrieval_gap".into(), "retrieval_gap".into())], 1);
        assert_eq!(t.values().sum::<usize>(), 2);
        assert!(same_stage("generation_error", "generation_or_lossy_ingestion"));
        assert!(!same_stage("kf_filtered", "generation_or_lossy_ingestion"));
    }

    #[test]
    fn traceless_records_with_only_unresolvable_evidence_are_unresolved() {
        let mut o = outcome(false, None);
        o.evidence = Some(vec![]);
        o.unresolved_evidence = Some(vec!["D".into()]);
        assert_eq!(label(&o), Some(Label::UnresolvedEvidence));
    }

    #[test]
    fn diagnosis_counts_by_label_and_category() {
        let mut a = outcome(false, Some(vec![step(false, false, false)]));
        a.id = "a".into();
        let mut b = outcome(false, Some(vec![step(true, false, false)]));
        b.id = "b".into();
        b.category = "temporal".into();
        let c = outcome(true, Some(vec![step(true, true, true)]));
        let mut eval = crate::outcome::Evaluation::new(vec![a, b, c]);
        eval.splits.insert("b".into(), "source_only".into());
        let d = diagnose(&crate::records::question_results(&eval), 5);
        assert_eq!(d.failures, 2);
        assert_eq!(d.count(Label::IngestionGap), 1);
        assert_eq!(d.by_category["temporal"]["retrieval_gap"], 1);
        assert_eq!(d.examples["ingestion_gap"], vec!["a".to_string()]);
        assert_eq!(d.splits["source_only"], 1);
    }

    #[test]
    fn a_shift_pairs_questions_and_counts_what_became_of_each() {
        let q = |id: &str, label: Option<Label>| LabeledOutcome {
            id: id.into(),
            category: "c".into(),
            conversation: None,
            correct: label.is_none(),
            label,
            tokens: None,
            split: None,
        };
        let from = [
            q("fixed", Some(Label::RetrievalGap)),
            q("new", None),
            q("same", Some(Label::KfFiltered)),
            q("moved", Some(Label::RetrievalGap)),
            q("gone", Some(Label::IngestionGap)),
        ];
        let to = [
            q("fixed", None),
            q("new", Some(Label::GenerationError)),
            q("same", Some(Label::KfFiltered)),
            q("moved", Some(Label::KfFiltered)),
        ];
        let s = shift(&from, &to);
        assert_eq!((s.questions, s.fixed, s.new, s.persist, s.moved), (4, 1, 1, 1, 1));
        assert_eq!(s.moves["retrieval_gap -> kf_filtered"], 1);
        // "gone" is in one evaluation only: counted nowhere.
        assert_eq!(
            s.labels,
            vec![(Label::RetrievalGap, 2, 0), (Label::KfFiltered, 1, 2), (Label::GenerationError, 0, 1)]
        );
    }
}
