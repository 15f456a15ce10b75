//! Builders of paired runs for the tests of this module.

use super::pairing::{Outcome, Paired, pair};

/// Two runs with the given counts of improved, regressed, both-correct and
/// both-wrong questions (in that id order), one category `x`, and
/// `conversation(i)` for the i-th question.
pub fn outcomes_with(
    improved: usize,
    regressed: usize,
    both_correct: usize,
    both_wrong: usize,
    conversation: impl Fn(usize) -> Option<String>,
) -> (Vec<Outcome>, Vec<Outcome>) {
    let kinds = std::iter::repeat_n((false, true), improved)
        .chain(std::iter::repeat_n((true, false), regressed))
        .chain(std::iter::repeat_n((true, true), both_correct))
        .chain(std::iter::repeat_n((false, false), both_wrong));
    let mut base = Vec::new();
    let mut cand = Vec::new();
    for (i, (b, c)) in kinds.enumerate() {
        let o = Outcome { id: format!("q{i:05}"), conversation: conversation(i), category: "x".into(), correct: b };
        cand.push(Outcome { correct: c, ..o.clone() });
        base.push(o);
    }
    (base, cand)
}

/// [`outcomes_with`], paired, without conversations.
pub fn paired_counts(improved: usize, regressed: usize, both_correct: usize, both_wrong: usize) -> Paired {
    let (base, cand) = outcomes_with(improved, regressed, both_correct, both_wrong, |_| None);
    pair(&base, &cand).expect("test runs pair")
}
