//! The cumulative one-at-a-time buildup: start from the served strategy with
//! every switchable mechanism off (the off-setting its audit contrast uses;
//! a mechanism that cannot be turned off stays on, in the base), then put the
//! mechanisms back one at a time in pipeline order (ingest, index, retrieve,
//! assemble, answer), each step keeping the ones before it. Per step: the
//! accuracy, its change from the step before (the paired exact McNemar test,
//! by probe under replay) and the mean context tokens. The last step is the
//! served strategy, and its accuracy must be the served one. A step the
//! schema refuses (an invariant, a range) is reported with the schema's
//! reason; the next step is compared with the last legal one.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use emend_core::artifact::{self, Artifact};
use emend_core::outcome::Evaluation;
use emend_core::schema::{StrategySchema, set_path};
use emend_eval::backend::Backend;
use emend_stats::TestUnit;

use super::AuditError;
use super::mechanisms::{MECHANISMS, Mechanism};
use super::paired::{paired, unit_accuracy};

/// One step of the buildup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuildupStep {
    /// 0 for the base.
    pub step: usize,
    /// The mechanism put back (none for the base).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mechanism: Option<String>,
    /// The field moves of this step (`path: from -> to`; for the base, every
    /// mechanism's off-setting).
    pub changes: Vec<String>,
    /// Why the schema refuses this step's strategy (then it is not evaluated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub illegal: Option<String>,
    /// Accuracy in the test's unit (under replay, each probe's last observation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accuracy: Option<f64>,
    /// The step it is compared with: the last legal one before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub versus: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<f64>,
    /// Pairs right at this step only, and at the compared step only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gained: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost: Option<usize>,
    /// Two-sided exact McNemar p of the change (by probe under replay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_context_tokens: Option<f64>,
}

/// The whole buildup.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Buildup {
    /// What one pair of the tests is: a question, or a probe under replay.
    pub unit: TestUnit,
    /// Pairs per test (questions, or probes).
    pub pairs: usize,
    /// Mechanisms on in the served strategy that have no off-setting: on in every step.
    pub base: Vec<String>,
    /// Mechanisms switched off in the served strategy: off in every step.
    pub off: Vec<String>,
    pub served_accuracy: f64,
    pub steps: Vec<BuildupStep>,
}

fn changes(from: &Value, to: &Value, m: &Mechanism, served: &Value) -> Vec<String> {
    (m.contrast)(served)
        .into_iter()
        .filter_map(|(path, _)| {
            let a = emend_core::schema::get_path(from, path).cloned().unwrap_or(Value::Null);
            let b = emend_core::schema::get_path(to, path).cloned().unwrap_or(Value::Null);
            (a != b).then(|| format!("{path}: {a} -> {b}"))
        })
        .collect()
}

/// The schema's first reason to refuse `doc`, if it does.
fn refusal(schema: &StrategySchema, doc: &Value) -> Option<String> {
    schema.check(doc).first().map(ToString::to_string)
}

/// Runs the buildup of `served` on the task set (or on `ids`).
pub fn buildup(
    schema: &StrategySchema,
    backend: &dyn Backend,
    served: &Artifact,
    ids: Option<&[String]>,
) -> Result<Buildup, AuditError> {
    let doc = &served.value;
    let evaluate = |name: &str, a: &Artifact| {
        backend.evaluate(a, ids).map_err(|source| AuditError::Evaluate { mechanism: name.to_string(), source })
    };
    let served_eval = evaluate("served strategy", served)?;
    let (mut base, mut off, mut adds) = (Vec::new(), Vec::new(), Vec::new());
    for m in MECHANISMS {
        if (m.off)(doc).is_some() {
            off.push(m.name.to_string());
        } else if m.switchable(doc) {
            adds.push(m);
        } else {
            base.push(m.name.to_string());
        }
    }
    let mut current = doc.clone();
    for m in &adds {
        for (path, to) in (m.contrast)(doc) {
            set_path(&mut current, path, to);
        }
    }
    let base_changes = adds.iter().flat_map(|m| changes(doc, &current, m, doc)).collect();
    let mut steps = Vec::new();
    let mut last: Option<(usize, Evaluation)> = None;
    steps.push(step(schema, 0, None, base_changes, &current, &mut last, &evaluate)?);
    for (i, m) in adds.iter().enumerate() {
        let before = current.clone();
        m.restore(&mut current, doc);
        let moved = changes(&before, &current, m, doc);
        steps.push(step(schema, i + 1, Some(m.name), moved, &current, &mut last, &evaluate)?);
    }
    check_last(doc, &current, &served_eval, last.as_ref().map(|l| &l.1))?;
    let p = paired(&served_eval, &served_eval);
    Ok(Buildup { unit: p.unit, pairs: p.pairs, base, off, served_accuracy: unit_accuracy(&served_eval), steps })
}

/// One step: refused, or evaluated and compared with the last legal step.
fn step(
    schema: &StrategySchema,
    index: usize,
    mechanism: Option<&str>,
    changes: Vec<String>,
    doc: &Value,
    last: &mut Option<(usize, Evaluation)>,
    evaluate: &dyn Fn(&str, &Artifact) -> Result<Evaluation, AuditError>,
) -> Result<BuildupStep, AuditError> {
    let mut s = BuildupStep {
        step: index,
        mechanism: mechanism.map(str::to_string),
        changes,
        illegal: None,
        accuracy: None,
        versus: None,
        delta: None,
        gained: None,
        lost: None,
        p_value: None,
        mean_context_tokens: None,
    };
    if let Some(why) = refusal(schema, doc) {
        s.illegal = Some(why);
        return Ok(s);
    }
    let name = format!("buildup step {index}");
    let a = artifact::from_value(&name, doc.clone(), schema).map_err(|e| AuditError::Buildup(e.to_string()))?;
    let e = evaluate(&name, &a)?;
    let accuracy = unit_accuracy(&e);
    s.accuracy = Some(accuracy);
    s.mean_context_tokens = e.mean_context_tokens();
    if let Some((k, prev)) = last.as_ref() {
        let p = paired(&e, prev);
        s.versus = Some(*k);
        s.delta = Some(accuracy - unit_accuracy(prev));
        s.gained = Some(p.first_only);
        s.lost = Some(p.second_only);
        s.p_value = Some(p.p_value);
    }
    *last = Some((index, e));
    Ok(s)
}

/// The last step is the served strategy, with the served accuracy.
fn check_last(
    served: &Value,
    last_doc: &Value,
    served_eval: &Evaluation,
    last: Option<&Evaluation>,
) -> Result<(), AuditError> {
    if last_doc != served {
        return Err(AuditError::Buildup("the last step is not the served strategy".into()));
    }
    let last = last.ok_or_else(|| AuditError::Buildup("no step was evaluated".into()))?;
    let (a, b) = (unit_accuracy(last), unit_accuracy(served_eval));
    if a != b {
        return Err(AuditError::Buildup(format!(
            "the last step's accuracy {a} is not the served strategy's {b} (the backend is not deterministic)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use emend_core::outcome::BackendOutcome;
    use emend_eval::fake::FakeBackend;
    use serde_json::json;

    /// q0..q9 need BM25, q10..q13 both channels; context tokens grow with
    /// each channel on.
    fn channels() -> FakeBackend {
        let questions = (0..24).map(|i| (format!("q{i:02}"), "single-hop".to_string())).collect();
        FakeBackend::new(questions, |a, _| {
            let s = a.typed().unwrap();
            let (bm25, dense) = (s.retrieve.weights.bm25 > 0.0, s.retrieve.weights.dense > 0.0);
            Ok((0..24)
                .map(|i| {
                    let correct = match i {
                        0..=9 => bm25,
                        10..=13 => bm25 && dense,
                        _ => false,
                    };
                    BackendOutcome {
                        context_tokens: Some(100.0 + 10.0 * f64::from(u8::from(bm25) + u8::from(dense))),
                        ..BackendOutcome::new(&format!("q{i:02}"), "single-hop", correct)
                    }
                })
                .collect())
        })
    }

    fn default_served(schema: &StrategySchema) -> Artifact {
        let doc = artifact::parse_yaml(include_str!("../../../strategies/default.yaml")).unwrap();
        artifact::from_value("served", doc, schema).unwrap()
    }

    #[test]
    fn the_buildup_adds_mechanisms_back_in_pipeline_order_and_ends_at_the_served_accuracy() {
        let schema = StrategySchema::builtin();
        let backend = channels();
        let b = buildup(&schema, &backend, &default_served(&schema), None).unwrap();
        let added: Vec<Option<&str>> = b.steps.iter().map(|s| s.mechanism.as_deref()).collect();
        assert_eq!(added, [None, Some("ingest filters"), Some("dedup"), Some("bm25"), Some("dense channel")]);
        assert_eq!(b.base, ["windows", "fusion", "retrieval depth", "context budget", "ordering", "answer"]);
        assert!(b.off.contains(&"expansion".to_string()) && b.off.contains(&"date stamps".to_string()));
        let acc: Vec<Option<f64>> = b.steps.iter().map(|s| s.accuracy).collect();
        assert_eq!(acc, [Some(0.0), Some(0.0), Some(0.0), Some(10.0 / 24.0), Some(14.0 / 24.0)]);
        // The last step is the served strategy, at its accuracy.
        assert_eq!(b.steps.last().unwrap().accuracy, Some(b.served_accuracy));
        assert_eq!(b.served_accuracy, 14.0 / 24.0);
        let bm25 = &b.steps[3];
        assert_eq!((bm25.gained, bm25.lost, bm25.versus), (Some(10), Some(0), Some(2)));
        assert!((bm25.p_value.unwrap() - 2.0 / 1024.0).abs() < 1e-15);
        assert_eq!(bm25.changes, ["retrieve.weights.bm25: 0.0 -> 1.0"]);
        assert_eq!(bm25.mean_context_tokens, Some(110.0));
        assert!((b.steps[4].delta.unwrap() - 4.0 / 24.0).abs() < 1e-12);
        assert!(b.steps[0].changes.contains(&"retrieve.weights.dense: 1.0 -> 0.0".to_string()));
        assert_eq!((b.unit, b.pairs), (TestUnit::Question, 24));
        // One evaluation for the served strategy and one per step.
        assert_eq!(backend.calls(), 1 + b.steps.len());
    }

    #[test]
    fn a_step_the_schema_refuses_is_reported_and_the_next_compares_with_the_last_legal_one() {
        // An extra invariant: BM25's weight may not exceed the dense one's.
        let mut raw = StrategySchema::builtin().raw().clone();
        raw["x-invariants"].as_array_mut().unwrap().push(json!({
            "left": "retrieve.weights.bm25", "op": "<=", "right": "retrieve.weights.dense",
            "why": "the dense channel leads"
        }));
        let schema = StrategySchema::from_str("test schema", &raw.to_string()).unwrap();
        let b = buildup(&schema, &channels(), &default_served(&schema), None).unwrap();
        let bm25 = &b.steps[3];
        assert_eq!(bm25.mechanism.as_deref(), Some("bm25"));
        let why = bm25.illegal.as_deref().unwrap();
        assert!(why.contains("retrieve.weights.bm25") && why.contains("the dense channel leads"), "{why}");
        assert_eq!((bm25.accuracy, bm25.p_value), (None, None));
        let dense = &b.steps[4];
        assert_eq!((dense.versus, dense.accuracy, dense.gained), (Some(2), Some(14.0 / 24.0), Some(14)));
        assert_eq!(dense.accuracy, Some(b.served_accuracy));
    }

    #[test]
    fn a_nondeterministic_backend_fails_the_last_step_check() {
        let schema = StrategySchema::builtin();
        let calls = std::sync::atomic::AtomicUsize::new(0);
        let questions = (0..4).map(|i| (format!("q{i}"), "x".to_string())).collect();
        let flaky = FakeBackend::new(questions, move |_, _| {
            let n = calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok((0..4).map(|i| BackendOutcome::new(&format!("q{i}"), "x", n == 0 && i == 0)).collect())
        });
        let err = buildup(&schema, &flaky, &default_served(&schema), None).unwrap_err().to_string();
        assert!(err.starts_with("buildup: the last step's accuracy 0 is not the served strategy's 0.25"), "{err}");
    }
}
