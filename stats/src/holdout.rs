//! A reusable holdout for the confirm part: Thresholdout (Dwork, Feldman,
//! Hardt, Pitassi, Reingold and Roth, "The reusable holdout", Science 2015).
//!
//! What goes through it. The confirm part informs the search in two ways only:
//! the accept/reject bit of each confirm test (decided by the exact test at the
//! LORD++ alpha, see `lord.rs`), and the *number* fed back after an accept (the
//! delta that becomes the UCB reward and the best-ever tracking). The number
//! goes through this mechanism: the loop asks with the candidate's delta on the
//! search part and on the confirm part (both in [-1, 1]); while the two agree
//! within a noisy threshold the answer is the search-part value, which reveals
//! nothing new about the confirm part; when they disagree the answer is the
//! confirm value plus Laplace noise and one unit of budget is spent. The raw
//! confirm delta may still be *shown* to people (the journal's record): it must
//! not flow back into proposing. A rejected test feeds back nothing numeric.
//!
//! The guarantee, as stated by Dwork et al. for statistical queries with values
//! in [0, 1] (a delta in [-1, 1] is rescaled as (1 + d) / 2, which doubles the
//! accuracy terms): with threshold `T = 3 tau / 4`, noise `sigma = tau / (96
//! ln(4 m / beta))` and budget `B`, every answer to `m` adaptively chosen
//! queries is within `tau` of the true population value with probability at
//! least `1 - beta`, as long as the budget has not run out, provided the
//! confirm part has at least on the order of `sqrt(B) ln(m / beta) / tau^2`
//! questions (the paper gives the constant). The constants of that theorem are
//! far too conservative for a few hundred questions; the defaults here
//! ([`HoldoutConfig::default`]: T = 0.04, sigma = 0.005, B = 20) are practical
//! choices without that formal guarantee at our sizes; what we test is the
//! mechanism's behaviour (it answers with the search value while they agree,
//! spends budget only on disagreement, is seeded, and refuses once empty).
//!
//! When the budget runs out, no further numbers come from the confirm part:
//! `emend status` should say so and advise a fresh confirm part (a new split
//! seed over new or the same questions, journaled as a new holdout).

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

/// Thresholdout's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct HoldoutConfig {
    /// Threshold on |search - confirm| (in delta units) before the confirm value is revealed.
    pub threshold: f64,
    /// Laplace scale of the noise.
    pub sigma: f64,
    /// Overfitting answers allowed.
    pub budget: u32,
    pub seed: u64,
}

impl Default for HoldoutConfig {
    /// T = 0.04, sigma = 0.005, B = 20, seed 0.
    fn default() -> Self {
        HoldoutConfig { threshold: 0.04, sigma: 0.005, budget: 20, seed: 0 }
    }
}

/// The mechanism's state: its configuration, the queries answered and the
/// budget spent. The noise stream is replayed from the seed and the query count,
/// so the state serializes without the generator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Holdout {
    pub config: HoldoutConfig,
    pub queries: u64,
    pub spent: u32,
}

/// One answer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum HoldoutAnswer {
    /// The two parts agree: the search-part value is the answer.
    Search { value: f64 },
    /// They disagree: the confirm value with noise; one unit of budget spent.
    Confirm { value: f64 },
    /// The budget is spent: the confirm part answers no more numbers.
    Exhausted,
}

impl Holdout {
    pub fn new(config: HoldoutConfig) -> Self {
        Holdout { config, queries: 0, spent: 0 }
    }

    /// Budget left.
    pub fn budget_left(&self) -> u32 {
        self.config.budget.saturating_sub(self.spent)
    }

    /// A Laplace(0, scale) draw from the stream `stream` at position `index`, keyed by the seed.
    fn laplace(&self, stream: u64, index: u64, scale: f64) -> f64 {
        let key =
            self.config.seed ^ stream.wrapping_mul(0xD1B5_4A32_D192_ED03) ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let u: f64 = ChaCha8Rng::seed_from_u64(key).random::<f64>() - 0.5;
        -scale * u.signum() * (1.0 - 2.0 * u.abs()).max(f64::MIN_POSITIVE).ln()
    }

    /// As in the paper: the threshold noise gamma ~ Lap(2 sigma) is drawn anew
    /// after each overfitting answer; eta ~ Lap(4 sigma) and xi ~ Lap(sigma) per query.
    fn noise(&self, q: u64) -> (f64, f64, f64) {
        let s = self.config.sigma;
        (self.laplace(1, u64::from(self.spent), 2.0 * s), self.laplace(2, q, 4.0 * s), self.laplace(3, q, s))
    }

    /// Answers one query: the same statistic on the search part and on the confirm part.
    pub fn query(&mut self, search: f64, confirm: f64) -> HoldoutAnswer {
        if self.budget_left() == 0 {
            return HoldoutAnswer::Exhausted;
        }
        let (gamma, eta, xi) = self.noise(self.queries);
        self.queries += 1;
        if (search - confirm).abs() > self.config.threshold + gamma + eta {
            self.spent += 1;
            HoldoutAnswer::Confirm { value: confirm + xi }
        } else {
            HoldoutAnswer::Search { value: search }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agreement_mostly_answers_with_the_search_value_and_spends_only_on_noise() {
        // With |search - confirm| = 0.001 and T = 0.04, only noise below
        // -0.039 (gamma ~ Lap(0.01) plus eta ~ Lap(0.02), about 7% of draws)
        // reveals the confirm value.
        let mut h = Holdout::new(HoldoutConfig { budget: 1000, ..HoldoutConfig::default() });
        let mut search = 0;
        for i in 0..200 {
            let s = 0.01 * (i % 7) as f64;
            match h.query(s, s + 0.001) {
                HoldoutAnswer::Search { value } => {
                    assert_eq!(value, s);
                    search += 1;
                }
                HoldoutAnswer::Confirm { .. } => {}
                HoldoutAnswer::Exhausted => panic!("budget 1000 cannot run out in 200 queries"),
            }
        }
        assert!(search >= 170, "{search} of 200 answered from the search part");
        assert_eq!(h.budget_left(), 1000 - (200 - search));
    }

    #[test]
    fn disagreement_reveals_a_noisy_confirm_value_and_spends_budget_until_exhausted() {
        let mut h = Holdout::new(HoldoutConfig { seed: 5, ..HoldoutConfig::default() });
        let mut errors = Vec::new();
        for _ in 0..20 {
            match h.query(0.20, 0.02) {
                HoldoutAnswer::Confirm { value } => errors.push(value - 0.02),
                other => panic!("expected a confirm answer, got {other:?}"),
            }
        }
        assert_eq!(h.budget_left(), 0);
        assert_eq!(h.query(0.20, 0.02), HoldoutAnswer::Exhausted);
        assert_eq!(h.query(0.0, 0.0), HoldoutAnswer::Exhausted);
        // The noise is Laplace(sigma = 0.005): mean |xi| is 0.005.
        let mean_abs = errors.iter().map(|e| e.abs()).sum::<f64>() / errors.len() as f64;
        assert!(mean_abs > 0.0005 && mean_abs < 0.025, "{mean_abs}");
        assert!(errors.iter().any(|&e| e != errors[0]), "noise varies across queries");
    }

    #[test]
    fn seeded_and_replayable_from_its_serialized_state() {
        let mut a = Holdout::new(HoldoutConfig { seed: 9, ..HoldoutConfig::default() });
        for i in 0..10 {
            a.query(0.1 * i as f64, 0.0);
        }
        let mut b: Holdout = serde_json::from_str(&serde_json::to_string(&a).unwrap()).unwrap();
        for i in 0..10 {
            assert_eq!(a.query(0.05 * i as f64, 0.0), b.query(0.05 * i as f64, 0.0));
        }
    }

    #[test]
    fn the_laplace_noise_has_the_stated_scale() {
        let h = Holdout::new(HoldoutConfig { sigma: 1.0, ..HoldoutConfig::default() });
        let n = 20_000;
        let mean_abs: f64 = (0..n).map(|q| h.noise(q).2.abs()).sum::<f64>() / n as f64;
        // E|Laplace(1)| = 1, sd of |X| is 1: 4 standard errors of 20,000 draws is 0.028.
        assert!((mean_abs - 1.0).abs() < 0.03, "{mean_abs}");
    }
}
