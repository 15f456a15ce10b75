//! Spending a run's alpha across its rounds.
//!
//! An evolution run tests a candidate in round after round. Testing each at
//! the full alpha controls false accepts per round, but over many rounds a
//! candidate that is truly no better will eventually be accepted by chance
//! (20 rounds at 0.05 give such a candidate about a 64% chance somewhere).
//!
//! A spending schedule gives round k (from 1) its own alpha_k with
//! `sum over all k of alpha_k <= alpha`, for any number of rounds:
//!
//! - `basel`: `alpha_k = alpha * 6 / (pi^2 k^2)` (the sum of 1/k^2 is pi^2/6);
//!   spends 61% of alpha in round 1, then slowly: round 10 gets 0.6%.
//! - `geometric`: `alpha_k = alpha / 2^k`; spends half in round 1 and halves
//!   every round, so late rounds are nearly impossible to pass.
//! - `none`: every round tests at the full alpha. There is NO run-level
//!   control: the run's false-accept probability grows with its rounds.
//!
//! The guarantee (basel, geometric): by the union bound, the probability that
//! a run accepts ANY candidate that is truly no better (the null holds for it)
//! is at most the sum of the alphas of the tests it ran, which is at most
//! alpha. This needs each test to count once: if a round takes m candidates to
//! the full-set stage, split its alpha evenly, alpha_k / m each
//! ([`AlphaSchedule::alpha_per_candidate`]). Screening probes that can only
//! reject spend nothing. The union bound needs no independence between
//! rounds, but it does need each test's p-value to be valid: the candidate
//! (and the number m of candidates sharing the round's alpha) must be fixed
//! without looking at the questions of the test. When diagnosis, examples and
//! the probe read the same questions as the full test, or m is the number the
//! probe let through, that premise fails and the bound does not hold as
//! stated. Round-indexed spending also starves a long-lived journal (round 20
//! of basel at 0.05 tests at 7.6e-5). `lord.rs` (LORD++, indexed by tests
//! actually run, on a confirm part the search never reads) replaces it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How a run's alpha is spread over its rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlphaSchedule {
    /// Full alpha every round: no run-level control.
    None,
    /// `alpha * 6 / (pi^2 k^2)`.
    Basel,
    /// `alpha / 2^k`.
    Geometric,
}

impl AlphaSchedule {
    pub const ALL: [AlphaSchedule; 3] = [AlphaSchedule::None, AlphaSchedule::Basel, AlphaSchedule::Geometric];

    /// The alpha of round `round` (the first round is 1) of a run whose alpha is `run_alpha`.
    ///
    /// # Panics
    /// If `round` is 0.
    pub fn alpha_for_round(self, run_alpha: f64, round: u32) -> f64 {
        assert!(round >= 1, "rounds are numbered from 1");
        let k = f64::from(round);
        match self {
            AlphaSchedule::None => run_alpha,
            AlphaSchedule::Basel => run_alpha * 6.0 / (std::f64::consts::PI.powi(2) * k * k),
            AlphaSchedule::Geometric => run_alpha * (-k).exp2(),
        }
    }

    /// The alpha of each of `candidates` candidates tested on the full set in
    /// round `round`: the round's alpha split evenly.
    ///
    /// # Panics
    /// If `round` or `candidates` is 0.
    pub fn alpha_per_candidate(self, run_alpha: f64, round: u32, candidates: u32) -> f64 {
        assert!(candidates >= 1, "a round tests at least one candidate");
        self.alpha_for_round(run_alpha, round) / f64::from(candidates)
    }

    /// Whether the run as a whole keeps its false-accept probability within alpha.
    pub fn controls_run(self) -> bool {
        !matches!(self, AlphaSchedule::None)
    }

    /// The serialized name (`none`, `basel`, `geometric`).
    pub fn name(self) -> &'static str {
        match self {
            AlphaSchedule::None => "none",
            AlphaSchedule::Basel => "basel",
            AlphaSchedule::Geometric => "geometric",
        }
    }
}

impl fmt::Display for AlphaSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown schedule name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown alpha schedule {0:?} (expected none, basel or geometric)")]
pub struct UnknownSchedule(pub String);

impl FromStr for AlphaSchedule {
    type Err = UnknownSchedule;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AlphaSchedule::ALL.into_iter().find(|a| a.name() == s).ok_or_else(|| UnknownSchedule(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spending_schedules_never_exceed_the_run_alpha() {
        for schedule in [AlphaSchedule::Basel, AlphaSchedule::Geometric] {
            let mut spent = 0.0;
            for k in 1..=10_000 {
                let a = schedule.alpha_for_round(0.05, k);
                assert!(a >= 0.0);
                spent += a;
                assert!(spent <= 0.05, "{schedule} spent {spent} by round {k}");
            }
            // And they do spend most of it (not a trivially tiny schedule).
            assert!(spent > 0.0499, "{schedule} spent only {spent}");
        }
    }

    #[test]
    fn first_rounds_match_the_formulas() {
        let basel1 = 0.05 * 6.0 / std::f64::consts::PI.powi(2);
        assert!((AlphaSchedule::Basel.alpha_for_round(0.05, 1) - basel1).abs() < 1e-15);
        assert!((AlphaSchedule::Basel.alpha_for_round(0.05, 3) - basel1 / 9.0).abs() < 1e-15);
        assert_eq!(AlphaSchedule::Geometric.alpha_for_round(0.05, 1), 0.025);
        assert_eq!(AlphaSchedule::Geometric.alpha_for_round(0.05, 3), 0.00625);
    }

    #[test]
    fn none_gives_the_full_alpha_every_round() {
        for k in [1, 2, 10, 10_000] {
            assert_eq!(AlphaSchedule::None.alpha_for_round(0.05, k), 0.05);
        }
        assert!(!AlphaSchedule::None.controls_run());
        assert!(AlphaSchedule::Basel.controls_run() && AlphaSchedule::Geometric.controls_run());
    }

    #[test]
    fn a_round_with_several_candidates_splits_its_alpha() {
        let a = AlphaSchedule::Basel.alpha_per_candidate(0.05, 2, 4);
        assert!((4.0 * a - AlphaSchedule::Basel.alpha_for_round(0.05, 2)).abs() < 1e-18);
        // Many candidates in many rounds still stay within the run's alpha.
        let spent: f64 = (1..=1000).map(|k| 7.0 * AlphaSchedule::Geometric.alpha_per_candidate(0.05, k, 7)).sum();
        assert!(spent <= 0.05);
    }

    #[test]
    #[should_panic(expected = "rounds are numbered from 1")]
    fn round_zero_is_a_bug() {
        AlphaSchedule::Basel.alpha_for_round(0.05, 0);
    }

    #[test]
    fn names_round_trip_through_serde_and_from_str() {
        for s in AlphaSchedule::ALL {
            assert_eq!(serde_json::to_string(&s).unwrap(), format!("\"{}\"", s.name()));
            assert_eq!(s.name().parse::<AlphaSchedule>(), Ok(s));
        }
        assert!("bonferroni".parse::<AlphaSchedule>().is_err());
    }
}
