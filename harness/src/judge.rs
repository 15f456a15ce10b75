//! Stage 6, judge: is the outcome correct?
//!
//! [`EvidenceJudge`] (the default): correct iff every resolved gold evidence
//! turn is in the context; a question with no resolvable evidence is
//! incorrect. Deterministic, no model. [`TemporalJudge`]: the evidence rule,
//! and a context that holds a superseded reference's evidence is wrong.
//! [`F1Judge`]: token F1 of the answer
//! against the gold answer at or above a threshold (SQuAD normalization:
//! lowercase, alphanumeric tokens, articles dropped); with no gold answer
//! (adversarial), correct iff there is no answer either. An LLM judge plugs
//! in through [`Judge`]; it must never be the answering model.

use crate::dataset::Question;
use crate::text::words;

/// What a judge sees.
pub struct JudgeCase<'a> {
    pub question: &'a Question,
    pub answer: Option<&'a str>,
    /// Every dia_id the context covers.
    pub context_turns: &'a [String],
}

/// A judge's decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verdict {
    pub correct: bool,
    /// The judge's score where it has one (F1).
    pub score: Option<f64>,
}

/// A judge model failed.
#[derive(Debug, thiserror::Error)]
#[error("judge {judge}: {message}")]
pub struct JudgeError {
    pub judge: String,
    pub message: String,
}

/// The judge stage's plug-in point.
pub trait Judge: Send + Sync {
    /// Identity, part of the harness hash.
    fn id(&self) -> String;
    /// False for a judge that never looks at the answer: the evaluator then
    /// computes none (no answerer runs, no model is called) and outcomes
    /// carry `answer: null`.
    fn reads_answer(&self) -> bool {
        true
    }
    fn judge(&self, case: &JudgeCase<'_>) -> Result<Verdict, JudgeError>;
    /// Judges many cases (once per evaluation); results in input order. A
    /// model overrides it to run the calls concurrently.
    fn judge_batch(&self, cases: &[JudgeCase<'_>]) -> Vec<Result<Verdict, JudgeError>> {
        cases.iter().map(|c| self.judge(c)).collect()
    }
}

/// All resolved gold turns in the context.
#[derive(Debug, Clone, Copy, Default)]
pub struct EvidenceJudge;

impl Judge for EvidenceJudge {
    fn id(&self) -> String {
        "evidence/1".into()
    }

    fn reads_answer(&self) -> bool {
        false
    }

    /// Cases are independent and pure: judged on every core, in input order.
    fn judge_batch(&self, cases: &[JudgeCase<'_>]) -> Vec<Result<Verdict, JudgeError>> {
        use rayon::prelude::*;
        cases.par_iter().map(|c| self.judge(c)).collect()
    }

    fn judge(&self, case: &JudgeCase<'_>) -> Result<Verdict, JudgeError> {
        let ev = &case.question.evidence;
        let correct = !ev.is_empty() && ev.iter().all(|e| case.context_turns.iter().any(|t| t == e));
        Ok(Verdict { correct, score: None })
    }
}

/// The evidence rule, aware of revised references (`judge.kind: temporal`).
///
/// A question with `reference_versions` is asked (at a replay checkpoint, or
/// at endpoint where the last version is valid) with the valid version's
/// reference. Its superseded evidence is every turn an earlier version cites
/// that the valid version does not ([`superseded_evidence`]). Correct iff
/// every valid evidence turn is in the context and no superseded one is:
/// a context holding only the superseded version's evidence is wrong (so it
/// is under [`EvidenceJudge`], which asks for the valid evidence), and so is
/// one holding both, which leaves the reader two answers to choose between
/// (the evidence judge credits that one). A question without versions is
/// judged as by the evidence judge.
#[derive(Debug, Clone, Copy, Default)]
pub struct TemporalJudge;

impl Judge for TemporalJudge {
    fn id(&self) -> String {
        "temporal/1".into()
    }

    fn reads_answer(&self) -> bool {
        false
    }

    /// Cases are independent and pure: judged on every core, in input order.
    fn judge_batch(&self, cases: &[JudgeCase<'_>]) -> Vec<Result<Verdict, JudgeError>> {
        use rayon::prelude::*;
        cases.par_iter().map(|c| self.judge(c)).collect()
    }

    fn judge(&self, case: &JudgeCase<'_>) -> Result<Verdict, JudgeError> {
        let valid = EvidenceJudge.judge(case)?.correct;
        let stale = superseded_evidence(case.question).iter().any(|e| case.context_turns.iter().any(|t| t == *e));
        Ok(Verdict { correct: valid && !stale, score: None })
    }
}

/// The turns a question's superseded references cite and its valid one does
/// not, in order of first mention. The question is as asked (its reference
/// versions end with the valid one, see
/// [`crate::dataset::Question::reference_at`]); empty without versions.
pub fn superseded_evidence(q: &Question) -> Vec<&str> {
    let Some((_, earlier)) = q.reference_versions.split_last() else { return Vec::new() };
    let mut out: Vec<&str> = Vec::new();
    for e in earlier.iter().flat_map(|v| &v.evidence) {
        if !q.evidence.contains(e) && !out.contains(&e.as_str()) {
            out.push(e);
        }
    }
    out
}

/// Token F1 against the gold answer.
#[derive(Debug, Clone, Copy)]
pub struct F1Judge {
    pub threshold: f64,
}

impl Judge for F1Judge {
    fn id(&self) -> String {
        format!("f1/1@{}", self.threshold)
    }

    /// Cases are independent and pure: judged on every core, in input order.
    fn judge_batch(&self, cases: &[JudgeCase<'_>]) -> Vec<Result<Verdict, JudgeError>> {
        use rayon::prelude::*;
        cases.par_iter().map(|c| self.judge(c)).collect()
    }

    fn judge(&self, case: &JudgeCase<'_>) -> Result<Verdict, JudgeError> {
        Ok(match (&case.question.answer, case.answer) {
            (None, a) => Verdict { correct: a.is_none(), score: None },
            (Some(_), None) => Verdict { correct: false, score: Some(0.0) },
            (Some(gold), Some(a)) => {
                let f = token_f1(a, gold);
                Verdict { correct: f >= self.threshold, score: Some(f) }
            }
        })
    }
}

fn normalized(text: &str) -> Vec<String> {
    let mut w = words(text);
    w.retain(|t| !matches!(t.as_str(), "a" | "an" | "the"));
    w
}

/// Token F1 of `answer` against `gold` (multiset overlap).
pub fn token_f1(answer: &str, gold: &str) -> f64 {
    let mut a = normalized(answer);
    let mut g = normalized(gold);
    if a.is_empty() || g.is_empty() {
        return if a.is_empty() && g.is_empty() { 1.0 } else { 0.0 };
    }
    a.sort_unstable();
    g.sort_unstable();
    let (mut i, mut j, mut common) = (0, 0, 0usize);
    while i < a.len() && j < g.len() {
        match a[i].cmp(&g[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                common += 1;
                i += 1;
                j += 1;
            }
        }
    }
    if common == 0 {
        return 0.0;
    }
    let p = common as f64 / a.len() as f64;
    let r = common as f64 / g.len() as f64;
    2.0 * p * r / (p + r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f1_matches_squad_style_examples() {
        assert_eq!(token_f1("The Beagle", "beagle"), 1.0);
        assert_eq!(token_f1("a red bike", "blue car"), 0.0);
        let f = token_f1("adoption agencies it", "Adoption agencies");
        assert!((f - 0.8).abs() < 1e-12, "{f}");
    }
}
