//! The priced confirm test: is the candidate's accuracy net of its token
//! cost above the served strategy's?
//!
//! The operator sets a price P (`cost.per_1k_tokens`): P accuracy points
//! given up per 1,000 mean context tokens. A question's utility is
//! `correct - (P / 100) * tokens / 1000` (correct 0 or 1), and on confirm
//! question i the candidate's utility minus the served strategy's is
//!
//! `d_i = (cand_correct - base_correct) - (P / 100) * (cand_tokens - base_tokens) / 1000`.
//!
//! The test is one-sided, for "the candidate's mean utility is higher"
//! (`delta = mean d > 0`), paired by question.
//!
//! **Question unit.** A sign-flip (paired randomization) test of the
//! studentized mean `T = mean(d) / sd(d) * sqrt(n)`, its sd recomputed for
//! each sign vector. Flipping signs leaves `sum d_i^2` unchanged, so for a
//! sign vector s with `S = sum s_i d_i`, `T(s) = S / sqrt(n) / sqrt((sum d^2 -
//! S^2 / n) / (n - 1))`, strictly increasing in S (infinite where the sd is
//! 0): the studentized test and the sign-flip test of the plain sum `sum d`
//! are the same test, sign vector by sign vector (checked in the tests), and
//! the code counts sums. Up to [`EXACT_SIGN_FLIPS_UP_TO`] questions every
//! sign vector is enumerated; beyond, [`SIGN_FLIP_DRAWS`] seeded ones give
//! `p = (1 + #{T(s) >= T}) / (draws + 1)`. When every d is -1, 0 or 1 (P = 0,
//! or equal tokens), the sign-flip law of the sum is `2X - D`, X ~ Bin(D,
//! 1/2) over the D nonzero differences, and the p-value is that binomial
//! tail computed exactly: the one-sided exact McNemar test
//! ([`crate::better_test`]), the same p-value, bound and decision.
//!
//! **Conversation unit.** The same sign flips over conversation totals of d,
//! as [`crate::conversation_test`] runs them for accuracy differences (with
//! P = 0 the two agree exactly): exact up to [`EXACT_SIGN_FLIPS_UP_TO`]
//! conversations, else seeded draws; below [`MIN_CLUSTERS`] conversations no
//! verdict (p = 1).
//!
//! **What the p-value guarantees.** Under the sharp null, each question's (or
//! conversation's) d is symmetric about 0 (the two strategies are
//! exchangeable on it), the p-value is exact: valid at any n, whatever the
//! tokens, the discordance and their spread (the Monte Carlo p is valid too,
//! at a resolution of `1 / (draws + 1)`). Under the weak null, mean utility
//! difference 0 with d asymmetric about it (the usual case: a cheaper
//! candidate that loses a few questions pays for them with a small token
//! saving on every question), validity is only asymptotic (the studentized
//! statistic, Janssen 1997; for one-sample sign flips the unstudentized sum
//! is the same test, see above). With a skewed d the one-sided error is of
//! order `1 / sqrt(n)`, on the liberal side when d is skewed to the left:
//! rare losses of a whole point against a small, steady saving. And when
//! the saving is worth much less than one question, the token terms break
//! the ties of the accuracy part in the candidate's favour: the p-value
//! falls from McNemar's `P(X >= I)` towards `P(X > I)`. `sim_utility.rs`
//! measures both at the confirm parts' sizes (up to 0.09 at alpha 0.05 and
//! 0.046 at 0.0152; docs/price.md).
//!
//! `lower_bound` inverts the same sign flips (the test of "the mean utility
//! difference is `delta`" on `d - delta`): it is above 0 exactly when the test
//! rejects. In the exact-binomial case it is [`crate::better_test`]'s
//! Clopper-Pearson bound (conditional on the number of discordant
//! questions). When no shift can be rejected the bound is the trivial one,
//! `-1` minus the candidate's mean token cost (every question lost).
//!
//! The result depends on the multiset of pairs, not their order: the
//! differences are sorted before the sign vectors are assigned.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::cluster::{EXACT_SIGN_FLIPS_UP_TO, MIN_CLUSTERS, SIGN_FLIP_DRAWS, sign_flips};
use super::onesided::{better_p_value, lower_bound};

/// One confirm question of both strategies.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UtilityPair<'a> {
    /// The question's conversation (the unit under `by_conversation`).
    pub conversation: &'a str,
    pub base_correct: bool,
    pub cand_correct: bool,
    /// Mean context tokens of the served strategy's answer to the question.
    pub base_tokens: f64,
    /// Mean context tokens of the candidate's answer.
    pub cand_tokens: f64,
}

/// The priced confirm test's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UtilityTest {
    pub questions: u64,
    /// P, accuracy points per 1,000 mean context tokens.
    pub per_1k_tokens: f64,
    /// Questions right only under the candidate.
    pub improved: u64,
    /// Questions right only under the served strategy.
    pub regressed: u64,
    /// The candidate's accuracy minus the served one's (a fraction).
    pub accuracy_delta: f64,
    /// The served strategy's mean context tokens a question.
    pub base_tokens: f64,
    /// The candidate's mean context tokens a question.
    pub cand_tokens: f64,
    /// Mean utility difference, candidate minus served (accuracy units):
    /// `accuracy_delta - (P / 100) * (cand_tokens - base_tokens) / 1000`.
    pub delta: f64,
    /// One-sided `1 - alpha` lower bound of `delta` (the inverted sign-flip
    /// test; the exact binomial's when every d is -1, 0 or 1); the trivial
    /// `-1 - (P / 100) * (cand_tokens - base_tokens) / 1000` when there is none.
    pub lower_bound: f64,
    /// One-sided p-value for "higher utility"; 1 when every difference is 0 or
    /// below [`MIN_CLUSTERS`] conversations.
    pub p_value: f64,
    pub alpha: f64,
    /// `p_value <= alpha && delta > 0`.
    pub better: bool,
    /// `Some(G)` under the conversation unit: the confirm part's conversations.
    pub conversations: Option<u64>,
    /// Sign vectors used: `2^units` when every one is enumerated (up to
    /// [`EXACT_SIGN_FLIPS_UP_TO`] units), else the [`SIGN_FLIP_DRAWS`] seeded
    /// ones (`p = (1 + hits) / (draws + 1)`); 0 when none was (the exact
    /// binomial, every difference 0, or too few conversations).
    pub draws: u64,
}

/// The p-value, bound and sign vectors of one unit's test.
struct Flipped {
    p_value: f64,
    lower_bound: Option<f64>,
    draws: u64,
}

const NOT_TESTED: Flipped = Flipped { p_value: 1.0, lower_bound: None, draws: 0 };

/// Runs the priced confirm test at `alpha` (see the module's doc), with the
/// question as the unit or, with `by_conversation`, the conversation.
///
/// # Panics
/// If `alpha` is not in (0, 1), `per_1k_tokens` is negative or not finite,
/// or a token count is not finite.
pub fn utility_test(pairs: &[UtilityPair<'_>], per_1k_tokens: f64, alpha: f64, by_conversation: bool) -> UtilityTest {
    assert!(alpha > 0.0 && alpha < 1.0, "alpha must be in (0, 1), got {alpha}");
    assert!(per_1k_tokens.is_finite() && per_1k_tokens >= 0.0, "the price must be finite and >= 0: {per_1k_tokens}");
    assert!(
        pairs.iter().all(|p| p.base_tokens.is_finite() && p.cand_tokens.is_finite()),
        "token counts must be finite"
    );
    let price = per_1k_tokens / 100.0 / 1000.0;
    let d: Vec<f64> = pairs
        .iter()
        .map(|p| {
            f64::from(i8::from(p.cand_correct) - i8::from(p.base_correct)) - price * (p.cand_tokens - p.base_tokens)
        })
        .collect();
    let n = pairs.len();
    // Summed in sorted order: the same pairs in any order give the same bits.
    let mean = |f: &dyn Fn(&UtilityPair<'_>) -> f64| {
        let mut xs: Vec<f64> = pairs.iter().map(f).collect();
        xs.sort_by(f64::total_cmp);
        if n == 0 { 0.0 } else { xs.iter().sum::<f64>() / n as f64 }
    };
    let improved = pairs.iter().filter(|p| p.cand_correct && !p.base_correct).count() as u64;
    let regressed = pairs.iter().filter(|p| p.base_correct && !p.cand_correct).count() as u64;
    let (base_tokens, cand_tokens) = (mean(&|p| p.base_tokens), mean(&|p| p.cand_tokens));
    let cost = price * (cand_tokens - base_tokens);
    let accuracy_delta = if n == 0 { 0.0 } else { (improved as f64 - regressed as f64) / n as f64 };
    let delta = accuracy_delta - cost;
    let (flipped, conversations) = if by_conversation {
        let (f, g) = by_conversation_flips(pairs, &d, alpha);
        (f, Some(g as u64))
    } else {
        (by_question_flips(d, alpha), None)
    };
    UtilityTest {
        questions: n as u64,
        per_1k_tokens,
        improved,
        regressed,
        accuracy_delta,
        base_tokens,
        cand_tokens,
        delta,
        lower_bound: flipped.lower_bound.map_or(-1.0 - cost, |b| b.clamp(-1.0 - cost, 1.0 - cost)),
        p_value: flipped.p_value,
        alpha,
        better: flipped.p_value <= alpha && delta > 0.0,
        conversations,
        draws: flipped.draws,
    }
}

/// The question unit: the exact binomial when every d is -1, 0 or 1, else
/// sign flips of the sorted differences.
fn by_question_flips(mut d: Vec<f64>, alpha: f64) -> Flipped {
    if d.iter().all(|&x| x == 0.0) {
        return NOT_TESTED;
    }
    if d.iter().all(|&x| x == -1.0 || x == 0.0 || x == 1.0) {
        let improved = d.iter().filter(|&&x| x == 1.0).count() as u64;
        let regressed = d.iter().filter(|&&x| x == -1.0).count() as u64;
        let bound = lower_bound(improved, regressed, d.len() as u64, alpha);
        return Flipped { p_value: better_p_value(improved, regressed), lower_bound: Some(bound), draws: 0 };
    }
    d.sort_by(f64::total_cmp);
    let ones = vec![1.0; d.len()];
    flip(&d, &ones, alpha)
}

/// The conversation unit: sign flips of the conversations' totals (in
/// conversation order, each summed over its sorted differences); the number
/// of conversations.
fn by_conversation_flips(pairs: &[UtilityPair<'_>], d: &[f64], alpha: f64) -> (Flipped, usize) {
    let mut by: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for (p, &x) in pairs.iter().zip(d) {
        by.entry(p.conversation).or_default().push(x);
    }
    let g = by.len();
    if g < MIN_CLUSTERS || d.iter().all(|&x| x == 0.0) {
        return (NOT_TESTED, g);
    }
    let (totals, sizes): (Vec<f64>, Vec<f64>) = by
        .into_values()
        .map(|mut xs| {
            xs.sort_by(f64::total_cmp);
            (xs.iter().sum::<f64>(), xs.len() as f64)
        })
        .unzip();
    (flip(&totals, &sizes, alpha), g)
}

/// The sign-flip p-value and inverted bound of `totals` with `sizes`.
fn flip(totals: &[f64], sizes: &[f64], alpha: f64) -> Flipped {
    let flips = sign_flips(totals, sizes);
    let draws = if totals.len() <= EXACT_SIGN_FLIPS_UP_TO { flips.count } else { SIGN_FLIP_DRAWS } as u64;
    let p_value = flips.p_value();
    Flipped { p_value, lower_bound: flips.lower_bound(alpha), draws }
}

#[cfg(test)]
mod tests {
    use rand::rngs::ChaCha8Rng;
    use rand::seq::SliceRandom;
    use rand::{RngExt, SeedableRng};

    use super::super::cluster::{SIGN_FLIP_SEED, conversation_test};
    use super::super::onesided::better_test;
    use super::*;

    /// Owned pairs: (conversation, base_correct, cand_correct, base_tokens, cand_tokens).
    type Row = (String, bool, bool, f64, f64);

    fn view(rows: &[Row]) -> Vec<UtilityPair<'_>> {
        rows.iter()
            .map(|(c, b, k, bt, ct)| UtilityPair {
                conversation: c,
                base_correct: *b,
                cand_correct: *k,
                base_tokens: *bt,
                cand_tokens: *ct,
            })
            .collect()
    }

    /// `improved`, `regressed`, then concordant questions (every third both
    /// wrong) up to `n`, in `conversations` round-robin; the served strategy
    /// uses 1500 +- 300 tokens, the candidate `saving` fewer +- 50.
    fn rows(improved: usize, regressed: usize, n: usize, saving: f64, conversations: usize, seed: u64) -> Vec<Row> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        (0..n)
            .map(|i| {
                let (b, c) = if i < improved {
                    (false, true)
                } else if i < improved + regressed {
                    (true, false)
                } else {
                    (i % 3 != 0, i % 3 != 0)
                };
                let base = 1500.0 + 300.0 * (2.0 * rng.random::<f64>() - 1.0);
                let cand = base - saving + 50.0 * (2.0 * rng.random::<f64>() - 1.0);
                (format!("c{:02}", i % conversations), b, c, base, cand)
            })
            .collect()
    }

    /// `P(X > i)`, X ~ Bin(d, 1/2).
    fn binomial_above(i: u64, d: u64) -> f64 {
        let choose = |n: u64, k: u64| (0..k).fold(1f64, |acc, j| acc * (n - j) as f64 / (j + 1) as f64);
        (i + 1..=d).map(|k| choose(d, k)).sum::<f64>() / 2f64.powi(d as i32)
    }

    #[test]
    fn at_no_price_it_is_the_exact_mcnemar_test() {
        for (i, r, n) in
            [(10, 2, 200), (40, 20, 300), (19, 11, 300), (20, 10, 300), (5, 0, 100), (3, 1, 50), (0, 7, 90)]
        {
            // Tokens differ, but at P = 0 they cost nothing: every d is -1, 0 or 1.
            let rows = rows(i, r, n, 700.0, 1, 1);
            for alpha in [0.05, 0.0152] {
                let t = utility_test(&view(&rows), 0.0, alpha, false);
                let m = better_test(i as u64, r as u64, n as u64, alpha);
                assert_eq!((t.p_value, t.lower_bound, t.better, t.draws), (m.p_value, m.lower_bound, m.better, 0));
                assert!((t.delta - m.delta).abs() < 1e-15 && t.delta == t.accuracy_delta, "{t:?}");
                assert_eq!((t.improved, t.regressed, t.questions), (i as u64, r as u64, n as u64));
            }
        }
    }

    /// The sign flips themselves (drawn, not the binomial shortcut) on d in
    /// {-1, 0, 1}: the exact binomial p-value to Monte Carlo error, the same
    /// decisions away from alpha. With a tiny price and noisy tokens the
    /// token terms break the ties of the sum: the p-value moves from
    /// `P(X >= I)` towards `P(X > I)`, X ~ Bin(I + R, 1/2).
    #[test]
    fn drawn_sign_flips_agree_with_mcnemar_at_no_price() {
        eprintln!("| I | R | n | McNemar P(X >= I) | P(X > I) | drawn sign flips | P = 1e-6, noisy tokens |");
        for (i, r, n) in [(10, 2, 200), (40, 20, 300), (19, 11, 300), (20, 10, 300), (30, 15, 193), (24, 16, 317)] {
            let d: Vec<f64> = (0..n)
                .map(|k| {
                    if k < i {
                        1.0
                    } else if k < i + r {
                        -1.0
                    } else {
                        0.0
                    }
                })
                .collect();
            let exact = better_p_value(i as u64, r as u64);
            let above = binomial_above(i as u64, (i + r) as u64);
            let drawn = flip(&d, &vec![1.0; n], 0.05);
            let se = (exact * (1.0 - exact) / SIGN_FLIP_DRAWS as f64).sqrt();
            assert!((drawn.p_value - exact).abs() <= 4.0 * se + 1e-4, "({i}, {r}): {} vs {exact}", drawn.p_value);
            for alpha in [0.05, 0.0152] {
                let near = (exact - alpha).abs() < 4.0 * se;
                assert!(near || (drawn.p_value <= alpha) == (exact <= alpha), "({i}, {r}) at {alpha}");
            }
            let rows = rows(i, r, n, 300.0, 1, 2);
            let tiny = utility_test(&view(&rows), 1e-6, 0.05, false).p_value;
            assert!(tiny <= exact + 4.0 * se + 1e-4 && tiny >= above - 4.0 * se - 1e-4, "({i}, {r}): {tiny}");
            eprintln!("| {i} | {r} | {n} | {exact:.5} | {above:.5} | {:.5} | {tiny:.5} |", drawn.p_value);
        }
    }

    /// 300 questions, discordance 0.1, the candidate 500 tokens cheaper on
    /// every question, P = 2 (a saving worth 1 pp). 19 improved and 11
    /// regressed: McNemar's p is 0.10, the saving tips it. Equally accurate
    /// at discordance 0.1 (15 and 15), 1 pp is not enough to show (the
    /// studentized mean is about 0.55); equally accurate with 1 and 1
    /// discordant questions, it is.
    #[test]
    fn a_saving_can_tip_the_test() {
        let tipped = rows(19, 11, 300, 500.0, 1, 3);
        let priced = utility_test(&view(&tipped), 2.0, 0.05, false);
        let free = utility_test(&view(&tipped), 0.0, 0.05, false);
        eprintln!("19/11, P 2: {priced:?}\n19/11, P 0: {free:?}");
        assert!(priced.better && !free.better, "{priced:?} {free:?}");
        assert!(
            (priced.delta - (8.0 / 300.0 + 0.02 * (priced.base_tokens - priced.cand_tokens) / 1000.0)).abs() < 1e-12
        );
        assert!((priced.base_tokens - priced.cand_tokens - 500.0).abs() < 10.0, "{priced:?}");
        let even = utility_test(&view(&rows(15, 15, 300, 500.0, 1, 4)), 2.0, 0.05, false);
        assert!(!even.better && even.p_value > 0.2 && even.delta > 0.0, "{even:?}");
        let rare = rows(1, 1, 300, 500.0, 1, 5);
        let (priced, free) =
            (utility_test(&view(&rare), 2.0, 0.05, false), utility_test(&view(&rare), 0.0, 0.05, false));
        eprintln!("1/1, P 2: {priced:?}");
        assert!(priced.better && !free.better, "{priced:?} {free:?}");
    }

    #[test]
    fn signs_candidate_minus_served() {
        // Same answers, the candidate 1,000 tokens cheaper (more expensive) at P = 5: +5 (-5) pp.
        let cheaper: Vec<Row> =
            (0..40).map(|i| (format!("c{}", i % 8), i % 2 == 0, i % 2 == 0, 2000.0, 1000.0)).collect();
        let t = utility_test(&view(&cheaper), 5.0, 0.05, false);
        assert!((t.delta - 0.05).abs() < 1e-12 && t.accuracy_delta == 0.0, "{t:?}");
        assert_eq!(
            (t.p_value, t.better, t.draws),
            (1.0 / (SIGN_FLIP_DRAWS as f64 + 1.0), true, SIGN_FLIP_DRAWS as u64)
        );
        let dearer: Vec<Row> = cheaper.iter().map(|(c, b, k, bt, ct)| (c.clone(), *b, *k, *ct, *bt)).collect();
        let t = utility_test(&view(&dearer), 5.0, 0.05, false);
        assert!((t.delta + 0.05).abs() < 1e-12 && t.p_value == 1.0 && !t.better, "{t:?}");
        // Swapping the strategies negates every difference.
        let rows = rows(19, 11, 300, 500.0, 6, 7);
        let swapped: Vec<Row> = rows.iter().map(|(c, b, k, bt, ct)| (c.clone(), *k, *b, *ct, *bt)).collect();
        let (a, b) = (utility_test(&view(&rows), 2.0, 0.05, true), utility_test(&view(&swapped), 2.0, 0.05, true));
        assert!((a.delta + b.delta).abs() < 1e-12 && (a.accuracy_delta + b.accuracy_delta).abs() < 1e-15);
        assert!(a.better && !b.better && b.p_value > 0.9, "{a:?} {b:?}");
        // A higher price raises a cheaper candidate's utility.
        let dear = utility_test(&view(&rows), 5.0, 0.05, false);
        assert!(dear.delta > a.delta && dear.p_value <= a.p_value, "{dear:?} {a:?}");
    }

    #[test]
    fn degenerate_inputs() {
        let empty = utility_test(&[], 2.0, 0.05, false);
        assert_eq!((empty.questions, empty.p_value, empty.better, empty.delta, empty.draws), (0, 1.0, false, 0.0, 0));
        assert_eq!(utility_test(&[], 2.0, 0.05, true).conversations, Some(0));
        // Every difference 0: the same answers at the same tokens.
        let same: Vec<Row> = (0..50).map(|i| (format!("c{}", i % 5), i % 3 == 0, i % 3 == 0, 900.0, 900.0)).collect();
        for unit in [false, true] {
            let t = utility_test(&view(&same), 3.0, 0.05, unit);
            assert_eq!((t.p_value, t.better, t.delta, t.draws), (1.0, false, 0.0, 0), "{t:?}");
        }
        // Up to 16 questions, every sign vector: 12 equal gains give 2^-12.
        let twelve: Vec<Row> = (0..12).map(|i| (format!("c{i}"), true, true, 1200.0, 1000.0)).collect();
        let t = utility_test(&view(&twelve), 2.0, 0.05, false);
        assert_eq!((t.p_value, t.draws), (0.5f64.powi(12), 4096));
        // The conversation unit below MIN_CLUSTERS: no verdict.
        let three = rows(30, 0, 60, 500.0, 3, 8);
        let t = utility_test(&view(&three), 2.0, 0.05, true);
        assert_eq!((t.p_value, t.better, t.conversations, t.draws), (1.0, false, Some(3), 0));
        assert!((t.lower_bound - (-1.0 - t.accuracy_delta + t.delta)).abs() < 1e-12, "{t:?}");
    }

    #[test]
    fn at_no_price_the_conversation_unit_is_conversation_test() {
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        for case in 0..40 {
            let g = 4 + case % 24;
            let n = g * rng.random_range(3..20);
            let i = rng.random_range(0..n / 4);
            let rows = rows(i, rng.random_range(0..n / 5), n, 400.0, g, case as u64);
            let d: Vec<(&str, i8)> =
                rows.iter().map(|(c, b, k, _, _)| (c.as_str(), i8::from(*k) - i8::from(*b))).collect();
            for alpha in [0.05, 0.0152] {
                let t = utility_test(&view(&rows), 0.0, alpha, true);
                let c = conversation_test(d.iter().copied(), alpha);
                assert_eq!((t.p_value, t.better, t.conversations), (c.p_value, c.better, Some(g as u64)), "{case}");
                assert!((t.lower_bound - c.lower_bound).abs() < 1e-12 || c.lower_bound == -1.0, "{t:?} {c:?}");
                assert_eq!(t.draws, if g <= 16 { 1 << g } else { SIGN_FLIP_DRAWS as u64 });
            }
        }
    }

    /// The studentized statistic `mean / sd * sqrt(n)`, sd recomputed; +-inf (or 0) when the sd is 0.
    fn studentized(d: &[f64]) -> f64 {
        let n = d.len() as f64;
        let mean = d.iter().sum::<f64>() / n;
        let sd = (d.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0)).sqrt();
        if sd > 1e-12 {
            mean / sd * n.sqrt()
        } else if mean.abs() < 1e-12 {
            0.0
        } else {
            mean.signum() * f64::INFINITY
        }
    }

    /// The studentized test, counted sign vector by sign vector (every one
    /// for 12 questions; the same seeded draws for 40), gives the p-value of
    /// the sum's sign flips.
    #[test]
    fn the_studentized_and_the_plain_sum_are_the_same_test() {
        let mut rng = ChaCha8Rng::seed_from_u64(10);
        for case in 0..20 {
            let n = if case % 2 == 0 { 12 } else { 40 };
            let mut rows = rows(rng.random_range(0..n / 3), rng.random_range(0..n / 4), n, 300.0, 4, 100 + case);
            rows.shuffle(&mut rng);
            let t = utility_test(&view(&rows), 4.0, 0.05, false);
            let mut d: Vec<f64> = view(&rows)
                .iter()
                .map(|p| {
                    f64::from(i8::from(p.cand_correct) - i8::from(p.base_correct))
                        - 4e-5 * (p.cand_tokens - p.base_tokens)
                })
                .collect();
            d.sort_by(f64::total_cmp);
            let observed = studentized(&d);
            let reaches = |bits: u64| {
                let flipped: Vec<f64> =
                    d.iter().enumerate().map(|(j, x)| if bits >> j & 1 == 1 { -x } else { *x }).collect();
                studentized(&flipped) >= observed - 1e-9
            };
            let p = if n <= EXACT_SIGN_FLIPS_UP_TO {
                (0..1u64 << n).filter(|&b| reaches(b)).count() as f64 / (1u64 << n) as f64
            } else {
                let mut draws = ChaCha8Rng::seed_from_u64(SIGN_FLIP_SEED);
                let hits = (0..SIGN_FLIP_DRAWS).filter(|_| reaches(draws.random::<u64>())).count();
                (1 + hits) as f64 / (SIGN_FLIP_DRAWS + 1) as f64
            };
            assert_eq!(t.p_value, p, "case {case}, n {n}");
        }
    }

    #[test]
    fn order_does_not_matter_and_the_bound_is_positive_exactly_when_better() {
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        for case in 0..200 {
            let n = rng.random_range(20..400);
            let g = rng.random_range(4..30);
            let saving = 1500.0 * rng.random::<f64>() - 300.0;
            let mut rows = rows(rng.random_range(0..n / 4), rng.random_range(0..n / 6), n, saving, g, 200 + case);
            let price = [0.5, 2.0, 5.0][case as usize % 3];
            for unit in [false, true] {
                for alpha in [0.05, 0.0152] {
                    let t = utility_test(&view(&rows), price, alpha, unit);
                    assert_eq!(t.better, t.lower_bound > 0.0, "case {case}: {t:?}");
                    assert!(t.lower_bound <= t.delta + 1e-12, "case {case}: {t:?}");
                }
            }
            let before =
                (utility_test(&view(&rows), price, 0.05, false), utility_test(&view(&rows), price, 0.05, true));
            rows.shuffle(&mut rng);
            let after = (utility_test(&view(&rows), price, 0.05, false), utility_test(&view(&rows), price, 0.05, true));
            assert_eq!(before, after, "case {case}");
        }
    }

    #[test]
    fn one_call_on_a_thousand_questions_is_fast() {
        let rows = rows(110, 90, 1000, 400.0, 40, 12);
        let pairs = view(&rows);
        let start = std::time::Instant::now();
        let t = utility_test(&pairs, 2.0, 0.05, false);
        let question = start.elapsed();
        let start = std::time::Instant::now();
        let c = utility_test(&pairs, 2.0, 0.05, true);
        let conversation = start.elapsed();
        eprintln!("1,000 questions: question unit {question:?} (p {}), 40 conversations {conversation:?}", t.p_value);
        assert_eq!(utility_test(&pairs, 2.0, 0.05, false), t);
        assert_eq!(utility_test(&pairs, 2.0, 0.05, true), c);
        if !cfg!(debug_assertions) {
            assert!(question.as_millis() < 50 && conversation.as_millis() < 50, "{question:?} {conversation:?}");
        }
    }
}
