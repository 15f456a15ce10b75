//! The diagnostic trace: one [`PipelineOutcome`] per question (a JSONL record of
//! `emend eval --outcomes`, and the format external harnesses write), and the
//! [`Summary`] computed from a set of them.
//!
//! The trace says where every gold evidence turn went. For each resolved gold
//! turn, [`EvidenceTrace`] records the memory items holding it, whether any of
//! them was retrieved and whether the turn is in the context, so the earliest
//! losing stage of a turn that is not in the context is read off directly:
//! no `memory_ids` -> ingest; none of them `retrieved` -> retrieval; else
//! assembly. A turn can be `in_context` without a retrieved item holding it
//! (neighbour backfill): such a turn is not lost.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::assemble::Context;
use crate::dataset::{Question, Sample};
use crate::ingest::Memory;
use crate::retrieve::Channel;
use crate::text::{for_each_term, terms};

/// One retrieved item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetrievedItem {
    /// Memory item id, `<conversation>/m<NNNN>`.
    pub id: String,
    /// 1-based, after reranking.
    pub rank: u32,
    /// Fused score after recency decay, rounded to 6 significant digits.
    pub score: f64,
    /// The channel contributing most to the fused score.
    pub channel: Channel,
}

/// Where one resolved gold turn went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceTrace {
    /// The dia_id.
    pub turn: String,
    /// Memory items holding the turn (empty: ingest lost it).
    pub memory_ids: Vec<String>,
    /// Some item in `memory_ids` was retrieved.
    pub retrieved: bool,
    /// The turn is in the assembled context.
    pub in_context: bool,
}

/// The record of one question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PipelineOutcome {
    /// `<sample_id>#<index in qa>`.
    pub id: String,
    pub conversation: String,
    /// `multi-hop`, `temporal`, `open-domain`, `single-hop` or `adversarial`.
    pub category: String,
    pub question: String,
    pub gold_answer: Option<String>,
    pub correct: bool,
    /// Resolved gold dia_ids.
    pub evidence: Vec<String>,
    /// Gold evidence ids that could not be resolved, as written.
    pub unresolved_evidence: Vec<String>,
    /// Memory items holding any resolved gold turn.
    pub evidence_memory_ids: Vec<String>,
    pub retrieved: Vec<RetrievedItem>,
    /// Memory items in the context, in context order.
    pub context_ids: Vec<String>,
    /// Every dia_id the context covers (backfill included), chronological.
    pub context_turns: Vec<String>,
    pub context_tokens: u32,
    pub answer: Option<String>,
    /// One entry per resolved gold turn, in `evidence` order.
    pub evidence_trace: Vec<EvidenceTrace>,
    /// The intent read from the question text, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub intent: Option<String>,
    /// Terms the expansion channel added.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expansion_terms: Vec<String>,
    /// The judge's score where it has one (F1), rounded to 6 significant digits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge_score: Option<f64>,
    /// Why this question has no verdict: a model call (extraction, answer,
    /// judge) failed after its retries. Such an outcome is not correct, and
    /// the evaluation is incomplete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Under longitudinal replay, the checkpoint of this observation (1 for
    /// the first); the id is then `<question id>@<checkpoint>`. None under
    /// endpoint evaluation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<u32>,
    /// Did the memory that reached the context keep the answer its source
    /// stated? Absent without a gold answer or resolved evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_coverage: Option<AnswerCoverage>,
}

/// The gold answer's terms in the source and in the memory that reached the
/// context: Layer A's deterministic test of whether extraction lost the fact
/// (`source_only`) or the answerer failed with the fact in front of it
/// (`full_coverage`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AnswerCoverage {
    /// Gold answer terms (lowercased, stopwords dropped) that the gold
    /// evidence turns state: the source window.
    pub source: Vec<String>,
    /// Of `source`, the terms the context still states where it derives from
    /// a gold turn: the text of context items holding a gold turn, and gold
    /// turns backfilled verbatim.
    pub kept: Vec<String>,
    /// The text of each context item derived from a gold turn, in context
    /// order: what the classifier model compares with the source turns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub memory: Vec<String>,
}

impl AnswerCoverage {
    /// Measures one question: `None` without a gold answer or resolved evidence.
    /// Runs for every question of every evaluation, so texts are scanned term by
    /// term against the few answer terms instead of collecting all their terms.
    pub fn measure(sample: &Sample, memory: &Memory, q: &Question, ctx: &Context) -> Option<AnswerCoverage> {
        let answer = q.answer.as_deref()?;
        let gold: Vec<u32> = q.evidence.iter().filter_map(|t| sample.ordinal(t)).collect();
        if gold.is_empty() {
            return None;
        }
        let answer_terms: BTreeSet<String> = terms(answer).into_iter().collect();
        // The source terms (answer terms a gold turn states), each with whether the context reaches it.
        let mut source: BTreeMap<&str, bool> = BTreeMap::new();
        for &o in &gold {
            for_each_term(&sample.turn(o).content(), |t| {
                if let Some(a) = answer_terms.get(t) {
                    source.insert(a.as_str(), false);
                }
            });
        }
        let mut reach = |text: &str| {
            if !source.is_empty() {
                for_each_term(text, |t| {
                    if let Some(r) = source.get_mut(t) {
                        *r = true;
                    }
                });
            }
        };
        let mut texts = Vec::new();
        for b in &ctx.blocks {
            let item = &memory.items[b.item as usize];
            if item.turns.iter().any(|t| gold.contains(t)) {
                reach(&item.text);
                texts.push(item.text.clone());
            }
            for &o in b.before.iter().chain(&b.after) {
                if gold.contains(&o) {
                    reach(&sample.turn(o).content());
                }
            }
        }
        let kept = source.iter().filter(|(_, r)| **r).map(|(t, _)| t.to_string()).collect();
        let source = source.keys().map(|t| t.to_string()).collect();
        Some(AnswerCoverage { source, kept, memory: texts })
    }
}

/// Accuracy over a group of questions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CategoryScore {
    pub n: usize,
    pub correct: usize,
    pub accuracy: f64,
}

impl CategoryScore {
    fn new(n: usize, correct: usize) -> Self {
        CategoryScore { n, correct, accuracy: if n == 0 { 0.0 } else { correct as f64 / n as f64 } }
    }
}

/// Aggregate figures of an evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub correct: usize,
    pub accuracy: f64,
    /// Category name -> score; only categories present.
    pub per_category: BTreeMap<String, CategoryScore>,
    /// Mean of `context_tokens`, rounded to 3 decimals.
    pub mean_context_tokens: f64,
    /// Questions with at least one unresolvable evidence id.
    pub unresolved_evidence: usize,
    /// Unresolvable evidence ids in all (a question may have several).
    pub unresolved_evidence_ids: usize,
    /// Questions with no resolvable evidence at all (always wrong under the evidence judge).
    pub without_evidence: usize,
    /// Questions whose model calls failed (see [`PipelineOutcome::error`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub errors: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Summary {
    pub fn from_outcomes(outcomes: &[PipelineOutcome]) -> Summary {
        let n = outcomes.len();
        let correct = outcomes.iter().filter(|o| o.correct).count();
        let mut cats: BTreeMap<String, (usize, usize)> = BTreeMap::new();
        for o in outcomes {
            let e = cats.entry(o.category.clone()).or_default();
            e.0 += 1;
            e.1 += usize::from(o.correct);
        }
        let tokens: u64 = outcomes.iter().map(|o| u64::from(o.context_tokens)).sum();
        let mean = if n == 0 { 0.0 } else { (tokens as f64 / n as f64 * 1000.0).round() / 1000.0 };
        Summary {
            n,
            correct,
            accuracy: CategoryScore::new(n, correct).accuracy,
            per_category: cats.into_iter().map(|(k, (n, c))| (k, CategoryScore::new(n, c))).collect(),
            mean_context_tokens: mean,
            unresolved_evidence: outcomes.iter().filter(|o| !o.unresolved_evidence.is_empty()).count(),
            unresolved_evidence_ids: outcomes.iter().map(|o| o.unresolved_evidence.len()).sum(),
            without_evidence: outcomes.iter().filter(|o| o.evidence.is_empty()).count(),
            errors: outcomes.iter().filter(|o| o.error.is_some()).count(),
        }
    }
}

/// Writes outcomes as JSONL, one record a line.
pub fn to_jsonl(outcomes: &[PipelineOutcome]) -> String {
    let mut s = String::new();
    for o in outcomes {
        s.push_str(&serde_json::to_string(o).expect("an outcome serializes"));
        s.push('\n');
    }
    s
}
