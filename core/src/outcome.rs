//! The engine's view of one question's outcome: the JSONL record that
//! `emend eval` writes and that external harnesses write too
//! (`schemas/outcome.schema.json`), and what the journal keeps of it (a
//! question's result with its Layer A [`Label`], an evaluation's summary).
//! Trace fields are optional, since an external system may not report them;
//! Layer A then says `no_trace`.

use std::collections::BTreeMap;
use std::fmt;

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
pub struct BackendOutcome {
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
    /// The gold answer's terms in the source turns and in the memory that
    /// reached the context (Layer A's source_only / full_coverage test).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_coverage: Option<emend_harness::outcome::AnswerCoverage>,
    /// The intent the pipeline read from the question (trace counter of the intent overrides).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<String>,
    /// Terms the expansion channel added (trace counter of the expansion).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expansion_terms: Vec<String>,
    /// Memory items in the context, in context order (when the system reports them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context_ids: Vec<String>,
}

impl BackendOutcome {
    /// A record of `id` in `category` with no conversation and no trace: the
    /// least an external harness may write.
    pub fn new(id: &str, category: &str, correct: bool) -> BackendOutcome {
        BackendOutcome {
            id: id.to_string(),
            conversation: None,
            category: category.to_string(),
            correct,
            question: None,
            gold_answer: None,
            answer: None,
            evidence: None,
            unresolved_evidence: None,
            evidence_trace: None,
            context_tokens: None,
            error: None,
            answer_coverage: None,
            intent: None,
            expansion_terms: Vec::new(),
            context_ids: Vec::new(),
        }
    }
}

/// The built-in harness's outcome as the engine's record: the same fields
/// `emend eval --outcomes` writes, without a trip through JSON.
impl From<&emend_harness::PipelineOutcome> for BackendOutcome {
    fn from(o: &emend_harness::PipelineOutcome) -> BackendOutcome {
        BackendOutcome {
            id: o.id.clone(),
            conversation: Some(o.conversation.clone()),
            category: o.category.clone(),
            correct: o.correct,
            question: Some(o.question.clone()),
            gold_answer: o.gold_answer.clone().map(serde_json::Value::String),
            answer: o.answer.clone(),
            evidence: Some(o.evidence.clone()),
            unresolved_evidence: Some(o.unresolved_evidence.clone()),
            evidence_trace: Some(
                o.evidence_trace
                    .iter()
                    .map(|t| EvidenceStep {
                        turn: t.turn.clone(),
                        memory_ids: t.memory_ids.clone(),
                        retrieved: t.retrieved,
                        in_context: t.in_context,
                    })
                    .collect(),
            ),
            context_tokens: Some(f64::from(o.context_tokens)),
            error: o.error.clone(),
            answer_coverage: o.answer_coverage.clone(),
            intent: o.intent.clone(),
            expansion_terms: o.expansion_terms.clone(),
            context_ids: o.context_ids.clone(),
        }
    }
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
    pub outcomes: Vec<BackendOutcome>,
    /// The Layer A classifier's split of generation errors by question id
    /// (`full_coverage` or `source_only`), when `roles.classifier` is configured.
    pub splits: std::collections::BTreeMap<String, String>,
}

impl Evaluation {
    pub fn new(mut outcomes: Vec<BackendOutcome>) -> Evaluation {
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

/// Where a failed question lost its evidence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Label {
    /// No stored memory item derives from any gold evidence turn.
    IngestionGap,
    /// Stored, but never retrieved.
    RetrievalGap,
    /// Retrieved, but not in the assembled context.
    KfFiltered,
    /// All evidence in the context, but the answer was judged wrong.
    GenerationError,
    /// The gold evidence cannot be located in the conversation.
    UnresolvedEvidence,
    /// The system reported no trace for this question.
    NoTrace,
    /// Some gold turns are in memory, but a lost one has no memory item.
    PartialIngestion,
}

impl Label {
    pub const ALL: [Label; 7] = [
        Label::IngestionGap,
        Label::PartialIngestion,
        Label::RetrievalGap,
        Label::KfFiltered,
        Label::GenerationError,
        Label::UnresolvedEvidence,
        Label::NoTrace,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Label::IngestionGap => "ingestion_gap",
            Label::PartialIngestion => "partial_ingestion",
            Label::RetrievalGap => "retrieval_gap",
            Label::KfFiltered => "kf_filtered",
            Label::GenerationError => "generation_error",
            Label::UnresolvedEvidence => "unresolved_evidence",
            Label::NoTrace => "no_trace",
        }
    }

    pub fn parse(s: &str) -> Option<Label> {
        Label::ALL.into_iter().find(|l| l.as_str() == s)
    }

    /// The pipeline stage the label blames, for grouping.
    pub fn stage(self) -> &'static str {
        match self {
            Label::IngestionGap | Label::PartialIngestion => "ingest",
            Label::RetrievalGap => "retrieve",
            Label::KfFiltered => "assemble",
            Label::GenerationError => "answer",
            Label::UnresolvedEvidence => "dataset",
            Label::NoTrace => "unknown",
        }
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One question's result in a recorded evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LabeledOutcome {
    pub id: String,
    pub category: String,
    #[serde(default)]
    pub conversation: Option<String>,
    pub correct: bool,
    /// Layer A label for a failure.
    #[serde(default)]
    pub label: Option<Label>,
    #[serde(default)]
    pub tokens: Option<f64>,
    /// The Layer A classifier's split of a generation error (`full_coverage` or `source_only`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<String>,
}

/// Summary numbers of an evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalSummary {
    pub n: usize,
    pub correct: usize,
    pub accuracy: f64,
    /// category -> [n, correct]
    pub per_category: BTreeMap<String, (usize, usize)>,
    #[serde(default)]
    pub mean_context_tokens: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The direct conversion gives what the JSON round trip through the
    /// outcome schema gave, with and without the optional fields.
    #[test]
    fn from_harness_outcome_matches_the_json_round_trip() {
        let full = json!({
            "id": "c1#0", "conversation": "c1", "category": "temporal", "question": "when?",
            "gold_answer": "May", "correct": false, "evidence": ["D1:1", "D1:2"], "unresolved_evidence": ["D9:9"],
            "evidence_memory_ids": ["c1/m0001"], "retrieved": [], "context_ids": ["c1/m0001"],
            "context_turns": ["D1:1"], "context_tokens": 412, "answer": "June",
            "evidence_trace": [
                {"turn": "D1:1", "memory_ids": ["c1/m0001"], "retrieved": true, "in_context": true},
                {"turn": "D1:2", "memory_ids": [], "retrieved": false, "in_context": false}
            ],
            "judge_score": 0.5, "error": "answerer: timed out"
        });
        let mut bare = full.clone();
        bare["gold_answer"] = json!(null);
        bare["answer"] = json!(null);
        bare.as_object_mut().unwrap().remove("error");
        for v in [full, bare] {
            let o: emend_harness::PipelineOutcome = serde_json::from_value(v).unwrap();
            let via_json: BackendOutcome = serde_json::from_value(serde_json::to_value(&o).unwrap()).unwrap();
            assert_eq!(BackendOutcome::from(&o), via_json);
        }
    }
}
