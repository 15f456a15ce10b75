//! The recorded form of an evaluation: one [`LabeledOutcome`] per question
//! (with its Layer A label), the [`EvalSummary`] and the `Evaluated` event.
//! The loop, `emend diagnose` and the read commands all summarize and
//! diagnose through these functions, so they cannot count differently.

use std::collections::BTreeMap;

use crate::events::{EvalSummary, Event, LabeledOutcome};
use crate::layer_a;
use crate::outcome::Evaluation;

/// Per-question results of an evaluation, with Layer A labels.
pub fn question_results(eval: &Evaluation) -> Vec<LabeledOutcome> {
    eval.outcomes
        .iter()
        .map(|o| LabeledOutcome {
            id: o.id.clone(),
            category: o.category.clone(),
            conversation: o.conversation.clone(),
            correct: o.correct,
            label: layer_a::label(o),
            tokens: o.context_tokens,
            split: eval.splits.get(&o.id).cloned().or_else(|| layer_a::split(o).map(str::to_string)),
        })
        .collect()
}

/// Accuracy overall and per category, and the mean context size when every question reports it.
pub fn summarize(results: &[LabeledOutcome]) -> EvalSummary {
    let n = results.len();
    let correct = results.iter().filter(|q| q.correct).count();
    let mut per_category: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for q in results {
        let e = per_category.entry(q.category.clone()).or_default();
        e.0 += 1;
        e.1 += usize::from(q.correct);
    }
    let tokens: Option<Vec<f64>> = results.iter().map(|q| q.tokens).collect();
    let mean_context_tokens = tokens.filter(|t| !t.is_empty()).map(|t| t.iter().sum::<f64>() / t.len() as f64);
    EvalSummary {
        n,
        correct,
        accuracy: if n == 0 { 0.0 } else { correct as f64 / n as f64 },
        per_category,
        mean_context_tokens,
    }
}

/// The paired statistics' view of a recorded result (the crate boundary of `stats`).
impl From<&LabeledOutcome> for emend_stats::Outcome {
    fn from(q: &LabeledOutcome) -> Self {
        emend_stats::Outcome {
            id: q.id.clone(),
            conversation: q.conversation.clone(),
            category: q.category.clone(),
            correct: q.correct,
        }
    }
}

/// The Evaluated event of a full evaluation.
pub fn evaluated_event(hash: &str, harness: &str, dataset: &str, results: &[LabeledOutcome]) -> Event {
    Event::Evaluated {
        strategy_hash: hash.to_string(),
        harness_hash: harness.to_string(),
        dataset_hash: dataset.to_string(),
        summary: summarize(results),
        diagnosis: layer_a::diagnose(results, 5),
        questions: results.to_vec(),
        lifecycle: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(id: &str, cat: &str, correct: bool, tokens: Option<f64>) -> LabeledOutcome {
        LabeledOutcome {
            id: id.into(),
            category: cat.into(),
            conversation: None,
            correct,
            label: None,
            tokens,
            split: None,
        }
    }

    #[test]
    fn summary_counts_per_category_and_averages_tokens_only_when_all_report() {
        let s =
            summarize(&[q("a", "x", true, Some(10.0)), q("b", "x", false, Some(20.0)), q("c", "y", true, Some(30.0))]);
        assert_eq!((s.n, s.correct), (3, 2));
        assert!((s.accuracy - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(s.per_category, BTreeMap::from([("x".into(), (2, 1)), ("y".into(), (1, 1))]));
        assert_eq!(s.mean_context_tokens, Some(20.0));
        assert_eq!(summarize(&[q("a", "x", true, None), q("b", "x", true, Some(1.0))]).mean_context_tokens, None);
        assert_eq!(summarize(&[]).accuracy, 0.0);
    }
}
