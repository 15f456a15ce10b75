//! Aligning a baseline run and a candidate run question by question.
//!
//! Pairing is what makes the later tests paired: both runs must cover exactly
//! the same question ids, each once, with the same category and conversation.
//! Anything else is refused with a typed error, never papered over, because a
//! comparison on mismatched sets would silently compare different datasets.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// How many example ids an error carries.
const EXAMPLES: usize = 5;

/// One question's result in one evaluation run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    pub id: String,
    /// The conversation the question belongs to; needed to resample by conversation.
    pub conversation: Option<String>,
    pub category: String,
    pub correct: bool,
}

/// Which run of the two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    Baseline,
    Candidate,
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Side::Baseline => "baseline",
            Side::Candidate => "candidate",
        })
    }
}

/// Why two runs cannot be paired.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PairingError {
    #[error("the {0} run has no outcomes")]
    Empty(Side),
    #[error("the {side} run has {count} duplicated id(s) (e.g. {})", quoted(.examples))]
    DuplicateIds { side: Side, count: usize, examples: Vec<String> },
    #[error(
        "the runs do not cover the same questions: {missing} baseline id(s) missing from the candidate{}, \
         {extra} candidate id(s) not in the baseline{}",
        examples_suffix(.missing_examples),
        examples_suffix(.extra_examples)
    )]
    MismatchedIds { missing: usize, extra: usize, missing_examples: Vec<String>, extra_examples: Vec<String> },
    #[error("question {id:?} has category {baseline:?} in the baseline but {candidate:?} in the candidate")]
    CategoryMismatch { id: String, baseline: String, candidate: String },
    #[error("question {id:?} is in conversation {baseline:?} in the baseline but {candidate:?} in the candidate")]
    ConversationMismatch { id: String, baseline: String, candidate: String },
}

fn quoted(ids: &[String]) -> String {
    ids.iter().map(|id| format!("{id:?}")).collect::<Vec<_>>().join(", ")
}

fn examples_suffix(ids: &[String]) -> String {
    if ids.is_empty() { String::new() } else { format!(" (e.g. {})", quoted(ids)) }
}

/// One question seen by both runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pair {
    pub id: String,
    pub conversation: Option<String>,
    pub category: String,
    pub baseline: bool,
    pub candidate: bool,
}

impl Pair {
    /// Candidate minus baseline correctness: +1 improved, -1 regressed, 0 concordant.
    pub fn d(&self) -> i64 {
        i64::from(self.candidate) - i64::from(self.baseline)
    }
}

/// Per-category accuracy counts and their difference.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CategoryDelta {
    pub n: usize,
    pub base_correct: usize,
    pub cand_correct: usize,
    /// `(cand_correct - base_correct) / n`, a fraction (0.02 = 2pp).
    pub delta: f64,
}

/// Two runs aligned by question id. Built only by [`pair`], so its counts
/// always agree with its pairs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Paired {
    n: usize,
    improved: Vec<String>,
    regressed: Vec<String>,
    both_correct: Vec<String>,
    both_wrong: Vec<String>,
    base_accuracy: f64,
    cand_accuracy: f64,
    delta: f64,
    per_category: BTreeMap<String, CategoryDelta>,
    pairs: Vec<Pair>,
}

impl Paired {
    /// Number of paired questions (never 0).
    pub fn n(&self) -> usize {
        self.n
    }
    /// Ids the baseline got wrong and the candidate right (I), sorted.
    pub fn improved(&self) -> &[String] {
        &self.improved
    }
    /// Ids the baseline got right and the candidate wrong (R), sorted.
    pub fn regressed(&self) -> &[String] {
        &self.regressed
    }
    pub fn both_correct(&self) -> &[String] {
        &self.both_correct
    }
    pub fn both_wrong(&self) -> &[String] {
        &self.both_wrong
    }
    pub fn base_accuracy(&self) -> f64 {
        self.base_accuracy
    }
    pub fn cand_accuracy(&self) -> f64 {
        self.cand_accuracy
    }
    /// Candidate accuracy minus baseline accuracy, a fraction.
    pub fn delta(&self) -> f64 {
        self.delta
    }
    pub fn per_category(&self) -> &BTreeMap<String, CategoryDelta> {
        &self.per_category
    }
    /// Every pair, sorted by id.
    pub fn pairs(&self) -> &[Pair] {
        &self.pairs
    }
}

/// Aligns `baseline` and `candidate` by id.
///
/// Refuses empty runs, duplicated ids, id sets that differ (with the counts of
/// missing and extra ids), and a question whose category or conversation
/// differs between the runs. A conversation given on one side only is taken.
pub fn pair(baseline: &[Outcome], candidate: &[Outcome]) -> Result<Paired, PairingError> {
    let base = sorted(baseline, Side::Baseline)?;
    let cand = sorted(candidate, Side::Candidate)?;
    check_same_ids(&base, &cand)?;

    // Both sides are sorted by id and hold the same ids: they align index by
    // index, and every list below comes out sorted.
    let n = base.len();
    let mut improved = Vec::new();
    let mut regressed = Vec::new();
    let mut both_correct = Vec::new();
    let mut both_wrong = Vec::new();
    let mut pairs = Vec::with_capacity(n);
    let mut categories: BTreeMap<&str, CategoryDelta> = BTreeMap::new();
    let (mut base_correct, mut cand_correct) = (0usize, 0usize);
    for (b, c) in base.iter().zip(&cand) {
        if b.category != c.category {
            return Err(PairingError::CategoryMismatch {
                id: b.id.clone(),
                baseline: b.category.clone(),
                candidate: c.category.clone(),
            });
        }
        let conversation = match (&b.conversation, &c.conversation) {
            (Some(x), Some(y)) if x != y => {
                return Err(PairingError::ConversationMismatch {
                    id: b.id.clone(),
                    baseline: x.clone(),
                    candidate: y.clone(),
                });
            }
            (x, y) => x.as_ref().or(y.as_ref()).cloned(),
        };
        let list = match (b.correct, c.correct) {
            (false, true) => &mut improved,
            (true, false) => &mut regressed,
            (true, true) => &mut both_correct,
            (false, false) => &mut both_wrong,
        };
        list.push(b.id.clone());
        base_correct += usize::from(b.correct);
        cand_correct += usize::from(c.correct);
        let cat = categories.entry(&b.category).or_insert(CategoryDelta {
            n: 0,
            base_correct: 0,
            cand_correct: 0,
            delta: 0.0,
        });
        cat.n += 1;
        cat.base_correct += usize::from(b.correct);
        cat.cand_correct += usize::from(c.correct);
        pairs.push(Pair {
            id: b.id.clone(),
            conversation,
            category: b.category.clone(),
            baseline: b.correct,
            candidate: c.correct,
        });
    }
    let per_category = categories
        .into_iter()
        .map(|(name, c)| {
            (name.to_string(), CategoryDelta { delta: difference(c.cand_correct, c.base_correct, c.n), ..c })
        })
        .collect();
    Ok(Paired {
        n,
        improved,
        regressed,
        both_correct,
        both_wrong,
        base_accuracy: base_correct as f64 / n as f64,
        cand_accuracy: cand_correct as f64 / n as f64,
        // From the counts, not from the two rounded accuracies.
        delta: difference(cand_correct, base_correct, n),
        per_category,
        pairs,
    })
}

/// `(a - b) / n` without going through two rounded ratios.
fn difference(a: usize, b: usize, n: usize) -> f64 {
    (a as f64 - b as f64) / n as f64
}

/// The outcomes sorted by id (cheap when they already are), refusing empty
/// runs and duplicated ids.
fn sorted(outcomes: &[Outcome], side: Side) -> Result<Vec<&Outcome>, PairingError> {
    if outcomes.is_empty() {
        return Err(PairingError::Empty(side));
    }
    let mut sorted: Vec<&Outcome> = outcomes.iter().collect();
    sorted.sort_unstable_by(|a, b| a.id.cmp(&b.id));
    let mut duplicated: Vec<&str> =
        sorted.windows(2).filter(|w| w[0].id == w[1].id).map(|w| w[0].id.as_str()).collect();
    if !duplicated.is_empty() {
        duplicated.dedup();
        return Err(PairingError::DuplicateIds { side, count: duplicated.len(), examples: examples(duplicated) });
    }
    Ok(sorted)
}

/// Refuses id sets that differ, with the counts of missing and extra ids.
fn check_same_ids(base: &[&Outcome], cand: &[&Outcome]) -> Result<(), PairingError> {
    let (mut missing, mut extra) = (Vec::new(), Vec::new());
    let (mut i, mut j) = (0, 0);
    while i < base.len() || j < cand.len() {
        let order = match (base.get(i), cand.get(j)) {
            (Some(b), Some(c)) => b.id.cmp(&c.id),
            (Some(_), None) => Ordering::Less,
            _ => Ordering::Greater,
        };
        match order {
            Ordering::Equal => (i, j) = (i + 1, j + 1),
            Ordering::Less => {
                missing.push(base[i].id.as_str());
                i += 1;
            }
            Ordering::Greater => {
                extra.push(cand[j].id.as_str());
                j += 1;
            }
        }
    }
    if missing.is_empty() && extra.is_empty() {
        return Ok(());
    }
    Err(PairingError::MismatchedIds {
        missing: missing.len(),
        extra: extra.len(),
        missing_examples: examples(missing),
        extra_examples: examples(extra),
    })
}

fn examples(ids: Vec<&str>) -> Vec<String> {
    ids.into_iter().take(EXAMPLES).map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn o(id: &str, category: &str, correct: bool) -> Outcome {
        Outcome { id: id.into(), conversation: None, category: category.into(), correct }
    }

    #[test]
    fn counts_lists_and_deltas() {
        let base =
            vec![o("q4", "a", false), o("q1", "a", true), o("q2", "b", true), o("q3", "b", false), o("q5", "a", false)];
        let cand =
            vec![o("q1", "a", true), o("q2", "b", false), o("q3", "b", true), o("q4", "a", true), o("q5", "a", false)];
        let p = pair(&base, &cand).unwrap();
        assert_eq!(p.n(), 5);
        assert_eq!(p.improved(), ["q3", "q4"]);
        assert_eq!(p.regressed(), ["q2"]);
        assert_eq!(p.both_correct(), ["q1"]);
        assert_eq!(p.both_wrong(), ["q5"]);
        assert_eq!(p.base_accuracy(), 0.4);
        assert_eq!(p.cand_accuracy(), 0.6);
        assert!((p.delta() - 0.2).abs() < 1e-15);
        let a = p.per_category()["a"];
        assert_eq!((a.n, a.base_correct, a.cand_correct), (3, 1, 2));
        assert!((a.delta - 1.0 / 3.0).abs() < 1e-15);
        let b = p.per_category()["b"];
        assert_eq!((b.n, b.base_correct, b.cand_correct, b.delta), (2, 1, 1, 0.0));
        let ids: Vec<_> = p.pairs().iter().map(|x| x.id.as_str()).collect();
        assert_eq!(ids, ["q1", "q2", "q3", "q4", "q5"]);
        assert_eq!(p.pairs().iter().map(Pair::d).sum::<i64>(), 1);
    }

    #[test]
    fn mismatched_ids_carry_counts_and_examples() {
        let base = vec![o("q1", "a", true), o("q2", "a", true), o("q3", "a", true)];
        let cand = vec![o("q1", "a", true), o("q9", "a", true)];
        let err = pair(&base, &cand).unwrap_err();
        assert_eq!(
            err,
            PairingError::MismatchedIds {
                missing: 2,
                extra: 1,
                missing_examples: vec!["q2".into(), "q3".into()],
                extra_examples: vec!["q9".into()],
            }
        );
        let msg = err.to_string();
        assert!(
            msg.contains("2 baseline id(s) missing") && msg.contains("1 candidate id(s) not in the baseline"),
            "{msg}"
        );
    }

    #[test]
    fn examples_are_capped() {
        let base: Vec<_> = (0..20).map(|i| o(&format!("b{i:02}"), "a", true)).collect();
        let cand = vec![o("x", "a", true)];
        match pair(&base, &cand).unwrap_err() {
            PairingError::MismatchedIds { missing, extra, missing_examples, .. } => {
                assert_eq!((missing, extra, missing_examples.len()), (20, 1, EXAMPLES));
            }
            e => panic!("unexpected {e:?}"),
        }
    }

    #[test]
    fn duplicates_are_refused_per_side() {
        let base =
            vec![o("q1", "a", true), o("q1", "a", false), o("q2", "a", true), o("q2", "a", true), o("q2", "a", true)];
        let cand = vec![o("q1", "a", true), o("q2", "a", true)];
        assert_eq!(
            pair(&base, &cand).unwrap_err(),
            PairingError::DuplicateIds { side: Side::Baseline, count: 2, examples: vec!["q1".into(), "q2".into()] }
        );
        assert!(matches!(pair(&cand, &base).unwrap_err(), PairingError::DuplicateIds { side: Side::Candidate, .. }));
    }

    #[test]
    fn empty_runs_are_refused() {
        assert_eq!(pair(&[], &[o("q", "a", true)]).unwrap_err(), PairingError::Empty(Side::Baseline));
        assert_eq!(pair(&[o("q", "a", true)], &[]).unwrap_err(), PairingError::Empty(Side::Candidate));
    }

    #[test]
    fn category_and_conversation_must_agree() {
        let err = pair(&[o("q", "a", true)], &[o("q", "b", true)]).unwrap_err();
        assert!(matches!(err, PairingError::CategoryMismatch { .. }), "{err:?}");

        let mut b = o("q", "a", true);
        let mut c = o("q", "a", true);
        b.conversation = Some("c1".into());
        c.conversation = Some("c2".into());
        assert!(matches!(pair(&[b.clone()], &[c.clone()]).unwrap_err(), PairingError::ConversationMismatch { .. }));
        c.conversation = None;
        assert_eq!(pair(&[b], &[c]).unwrap().pairs()[0].conversation.as_deref(), Some("c1"));
    }
}
