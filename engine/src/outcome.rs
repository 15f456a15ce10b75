//! The engine's view of one question's outcome: the JSONL record that
//! `emend eval` writes and that external harnesses write too
//! (`schemas/outcome.schema.json`). Trace fields are optional, since an
//! external system may not report them; Layer A then says `no_trace`.

use serde::{Deserialize, Serialize};

/// What happened to one gold evidence turn along the pipeline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceStep {
    pub turn: String,
    /// Memory items holding the turn; empty when ingestion lost it.
    #[serde(default)]
    pub memory_ids: Vec<String>,
    pub retrieved: bool,
    pub in_context: bool,
}

/// One outcome record. Unknown fields are kept out of the engine's way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutcomeRecord {
    pub id: String,
    #[serde(default)]
    pub conversation: Option<String>,
    #[serde(deserialize_with = "category_string")]
    pub category: String,
    pub correct: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gold_answer: Option<serde_json::Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unresolved_evidence: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence_trace: Option<Vec<EvidenceStep>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<f64>,
    /// Why the system could not answer this question (a model error, say):
    /// such a record makes the whole evaluation incomplete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

fn category_string<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(s) => Ok(s),
        serde_json::Value::Number(n) => Ok(n.to_string()),
        other => Err(serde::de::Error::custom(format!("expected a string or an integer, got {other}"))),
    }
}

/// An evaluation as the engine sees it: outcome records sorted by id.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    pub outcomes: Vec<OutcomeRecord>,
    /// The Layer A classifier's split of generation errors by question id
    /// (`full_coverage` or `source_only`), when `roles.classifier` is configured.
    pub splits: std::collections::BTreeMap<String, String>,
}

impl Evaluation {
    pub fn new(mut outcomes: Vec<OutcomeRecord>) -> Evaluation {
        outcomes.sort_by(|a, b| a.id.cmp(&b.id));
        Evaluation { outcomes, splits: Default::default() }
    }

    /// Questions whose evaluation failed (a model call, say).
    pub fn errors(&self) -> usize {
        self.outcomes.iter().filter(|o| o.error.is_some()).count()
    }

    pub fn n(&self) -> usize {
        self.outcomes.len()
    }

    pub fn correct(&self) -> usize {
        self.outcomes.iter().filter(|o| o.correct).count()
    }

    pub fn accuracy(&self) -> f64 {
        if self.outcomes.is_empty() { 0.0 } else { self.correct() as f64 / self.n() as f64 }
    }

    /// Mean context tokens, when every record reports them.
    pub fn mean_context_tokens(&self) -> Option<f64> {
        let tokens: Option<Vec<f64>> = self.outcomes.iter().map(|o| o.context_tokens).collect();
        let tokens = tokens?;
        if tokens.is_empty() { None } else { Some(tokens.iter().sum::<f64>() / tokens.len() as f64) }
    }

    /// Accuracy per category, sorted by category.
    pub fn per_category(&self) -> std::collections::BTreeMap<String, (usize, usize)> {
        let mut out = std::collections::BTreeMap::new();
        for o in &self.outcomes {
            let e = out.entry(o.category.clone()).or_insert((0usize, 0usize));
            e.0 += 1;
            e.1 += usize::from(o.correct);
        }
        out
    }
}
