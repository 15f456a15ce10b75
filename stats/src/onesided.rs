//! The confirm test: is the candidate *better* than the served strategy?
//!
//! One-sided exact McNemar (binomial) test. Only discordant questions carry
//! information: under the null "no better" every discordant question is
//! improved with probability at most 1/2, so with I improved and R regressed,
//! `p = P(X >= I)`, X ~ Bin(I + R, 1/2). The test is exact conditionally on
//! I + R, whatever each question's own discordance probability: it needs only
//! that questions are independent given the strategies and that, on each
//! discordant question, improvement is no likelier than regression.
//!
//! Its interval is tied to the alpha it is tested at: [`lower_bound`] is the
//! one-sided `1 - alpha` lower confidence bound for the accuracy difference,
//! `(I + R) / n * (2 * pi_L - 1)`, where `pi_L` is the Clopper-Pearson lower
//! bound of P(improved | discordant). Clopper-Pearson inverts the exact
//! binomial test, so the bound is above 0 exactly when the test rejects at
//! `alpha` (tested on a grid). The bound is conditional on the observed number
//! of discordant questions.
//!
//! [`minimum_detectable_effect`] answers "how large a step can the next
//! confirm test see": the smallest accuracy gain that the test at `alpha`
//! detects with the given power, for `n` confirm questions and a discordance
//! rate `q` (the share of questions on which the two strategies disagree),
//! computed exactly over the binomial number of discordant questions.

use serde::{Deserialize, Serialize};
use statrs::distribution::{Beta, Binomial, ContinuousCDF, Discrete, DiscreteCDF};

use super::unit::{ProbeDetail, TestUnit};

/// A one-sided confirm test and its alpha-tied lower bound.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BetterTest {
    pub improved: u64,
    pub regressed: u64,
    /// Questions in the confirm part (the denominator of the accuracy difference).
    pub questions: u64,
    /// The alpha the test was run at.
    pub alpha: f64,
    /// `P(X >= improved)`, X ~ Bin(improved + regressed, 1/2); 1 without discordant questions.
    pub p_value: f64,
    /// Observed accuracy difference `(improved - regressed) / questions`.
    pub delta: f64,
    /// One-sided `1 - alpha` lower confidence bound of the accuracy difference.
    pub lower_bound: f64,
    /// `p_value <= alpha`, equivalently `lower_bound > 0`.
    pub better: bool,
    /// What one pair is: a question (left out of records) or, under
    /// longitudinal replay, a probe's trajectory ([`crate::better_test_by_probe`]);
    /// `questions`, `improved` and `regressed` then count probes.
    #[serde(default, skip_serializing_if = "TestUnit::is_question")]
    pub unit: TestUnit,
    /// Under the probe unit, the observation counts and both parts of the
    /// test (`p_value` is the larger of the two).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeDetail>,
    /// Under the conversation unit, the confirm part's conversations:
    /// `p_value`, `lower_bound` and `better` are the sign-flip test's
    /// ([`crate::conversation_test`]); the counts stay question counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversations: Option<u64>,
}

/// `P(X >= improved)`, X ~ Bin(improved + regressed, 1/2).
pub fn better_p_value(improved: u64, regressed: u64) -> f64 {
    let d = improved + regressed;
    if improved == 0 {
        return 1.0;
    }
    let b = Binomial::new(0.5, d).expect("p = 0.5 is a valid probability");
    b.sf(improved - 1).clamp(0.0, 1.0)
}

/// The one-sided `1 - alpha` lower bound of the accuracy difference, tied to the exact test.
pub fn lower_bound(improved: u64, regressed: u64, questions: u64, alpha: f64) -> f64 {
    let d = improved + regressed;
    if d == 0 || questions == 0 {
        return 0.0;
    }
    let pi_low = if improved == 0 {
        0.0
    } else {
        Beta::new(improved as f64, (regressed + 1) as f64).expect("positive shapes").inverse_cdf(alpha)
    };
    d as f64 / questions as f64 * (2.0 * pi_low - 1.0)
}

/// Runs the confirm test at `alpha`.
///
/// # Panics
/// If `alpha` is not in (0, 1) or the discordant count exceeds `questions`.
pub fn better_test(improved: u64, regressed: u64, questions: u64, alpha: f64) -> BetterTest {
    assert!(alpha > 0.0 && alpha < 1.0, "alpha must be in (0, 1), got {alpha}");
    assert!(improved + regressed <= questions, "more discordant questions than questions");
    let p_value = better_p_value(improved, regressed);
    let lb = lower_bound(improved, regressed, questions, alpha);
    let delta = if questions == 0 { 0.0 } else { (improved as f64 - regressed as f64) / questions as f64 };
    BetterTest {
        improved,
        regressed,
        questions,
        alpha,
        p_value,
        delta,
        lower_bound: lb,
        better: p_value <= alpha,
        unit: TestUnit::Question,
        probe: None,
        conversations: None,
    }
}

/// The smallest `k` with `P(X >= k) <= alpha`, X ~ Bin(d, 1/2); `d + 1` when none.
pub(crate) fn critical(d: u64, alpha: f64) -> u64 {
    let (mut lo, mut hi) = (0u64, d + 1);
    // P(X >= k) decreases in k; binary search the first k where it is <= alpha.
    while lo < hi {
        let mid = (lo + hi) / 2;
        let tail = if mid == 0 { 1.0 } else { Binomial::new(0.5, d).unwrap().sf(mid - 1) };
        if tail <= alpha { hi = mid } else { lo = mid + 1 }
    }
    lo
}

/// The power of the exact test at `alpha` on `n` questions when the strategies
/// disagree on a share `q` of questions and the candidate gains `delta`
/// (P(improved) = (q + delta) / 2, P(regressed) = (q - delta) / 2).
pub fn power(n: u64, q: f64, delta: f64, alpha: f64) -> f64 {
    assert!(q > 0.0 && q <= 1.0 && delta >= 0.0 && delta <= q, "need 0 <= delta <= q <= 1");
    let disc = Binomial::new(q, n).expect("q is a probability");
    let pi = (q + delta) / (2.0 * q);
    let mean = n as f64 * q;
    let sd = (n as f64 * q * (1.0 - q)).sqrt();
    let lo = (mean - 9.0 * sd - 1.0).max(0.0) as u64;
    let hi = ((mean + 9.0 * sd + 1.0) as u64).min(n);
    let mut total = 0.0;
    for d in lo..=hi {
        let w = disc.pmf(d);
        if w < 1e-15 {
            continue;
        }
        let c = critical(d, alpha);
        if c > d {
            continue;
        }
        let tail = if c == 0 { 1.0 } else { Binomial::new(pi.min(1.0), d).unwrap().sf(c - 1) };
        total += w * tail;
    }
    total
}

/// The smallest accuracy gain the exact test at `alpha` detects with probability
/// `target_power` on `n` confirm questions at discordance rate `q`; `None` when
/// even a candidate that wins every discordant question (`delta = q`) is not
/// detected that often. Bisection to 1e-5 in delta.
pub fn minimum_detectable_effect(n: u64, q: f64, alpha: f64, target_power: f64) -> Option<f64> {
    if n == 0 || q <= 0.0 || power(n, q, q, alpha) < target_power {
        return None;
    }
    let (mut lo, mut hi) = (0.0, q);
    while hi - lo > 1e-5 {
        let mid = 0.5 * (lo + hi);
        if power(n, q, mid, alpha) >= target_power { hi = mid } else { lo = mid }
    }
    Some(hi)
}

#[cfg(test)]
mod tests {
    use rand::rngs::ChaCha8Rng;
    use rand::{RngExt, SeedableRng};

    use super::*;

    #[test]
    fn p_values_match_scipy_binomtest_greater() {
        // Exact: sum over k >= I of C(I + R, k) / 2^(I + R), in integer arithmetic (Python math.comb).
        for (i, r, p) in
            [(10u64, 2u64, 0.019287109375), (5, 0, 0.03125), (3, 1, 0.3125), (0, 7, 1.0), (40, 20, 0.00674464686559593)]
        {
            let got = better_p_value(i, r);
            assert!((got - p).abs() <= 1e-9 * p.max(1e-3), "({i}, {r}): {got} vs {p}");
        }
        // Half the two-sided exact p of the existing test when I > R.
        let two = super::super::mcnemar(30, 15).exact_p;
        assert!((better_p_value(30, 15) - two / 2.0).abs() < 1e-12);
    }

    #[test]
    fn the_lower_bound_is_positive_exactly_when_the_test_rejects() {
        for alpha in [0.05, 0.01, 0.0013, 1e-4] {
            for d in 0..60u64 {
                for i in 0..=d {
                    let t = better_test(i, d - i, 200, alpha);
                    assert_eq!(t.better, t.lower_bound > 0.0, "I={i}, R={}, alpha={alpha}: {t:?}", d - i);
                    assert!(t.lower_bound <= t.delta + 1e-12);
                }
            }
        }
    }

    #[test]
    fn the_lower_bound_covers_the_truth_at_its_level() {
        // n = 300, q = 0.2, true delta = 0.04: the 95% lower bound must lie
        // below 0.04 in at least 95% of draws (3 standard errors of 2,000 draws).
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let (n, q, delta, alpha) = (300u64, 0.2, 0.04, 0.05);
        let mut covered = 0;
        let reps = 2000;
        for _ in 0..reps {
            let (mut i, mut r) = (0, 0);
            for _ in 0..n {
                let u: f64 = rng.random();
                if u < (q + delta) / 2.0 {
                    i += 1
                } else if u < q {
                    r += 1
                }
            }
            covered += usize::from(lower_bound(i, r, n, alpha) <= delta);
        }
        let rate = covered as f64 / reps as f64;
        assert!(rate >= 0.95 - 3.0 * (0.05f64 * 0.95 / reps as f64).sqrt(), "coverage {rate}");
    }

    #[test]
    fn the_mde_matches_a_simulation_of_the_test() {
        let (n, q, alpha) = (500u64, 0.1, 0.01);
        let mde = minimum_detectable_effect(n, q, alpha, 0.8).unwrap();
        assert!(mde > 0.02 && mde < 0.06, "mde {mde}");
        let simulate = |delta: f64, seed: u64| {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let reps = 4000;
            let mut hits = 0;
            for _ in 0..reps {
                let (mut i, mut r) = (0, 0);
                for _ in 0..n {
                    let u: f64 = rng.random();
                    if u < (q + delta) / 2.0 {
                        i += 1
                    } else if u < q {
                        r += 1
                    }
                }
                hits += usize::from(better_p_value(i, r) <= alpha);
            }
            hits as f64 / reps as f64
        };
        // Monte Carlo SE at 0.8 with 4,000 draws is 0.0063: 4 SE is 0.025.
        let at_mde = simulate(mde, 1);
        assert!((at_mde - 0.8).abs() < 0.025, "simulated power at the MDE {mde}: {at_mde}");
        assert!((power(n, q, mde, alpha) - 0.8).abs() < 1e-3);
        let at_half = simulate(mde / 2.0, 2);
        assert!(at_half < 0.5, "half the MDE is detected {at_half} of the time");
    }

    #[test]
    fn smaller_alpha_or_fewer_questions_need_larger_effects() {
        let a = minimum_detectable_effect(500, 0.1, 0.01, 0.8).unwrap();
        let b = minimum_detectable_effect(500, 0.1, 0.001, 0.8).unwrap();
        let c = minimum_detectable_effect(250, 0.1, 0.01, 0.8).unwrap();
        assert!(b > a && c > a, "{a} {b} {c}");
        assert_eq!(minimum_detectable_effect(10, 0.1, 1e-6, 0.8), None);
        assert_eq!(critical(10, 0.05), 9); // P(X >= 9) = 11/1024 <= 0.05 < P(X >= 8) = 56/1024
    }
}
