//! Online error control across a run: LORD++ (Ramdas, Yang, Wainwright and
//! Jordan 2017, "Online control of the false discovery rate with decaying
//! memory"), indexed by confirm tests actually run, never by rounds.
//!
//! Test t (from 1) runs at
//!
//! `alpha_t = gamma_t * W0 + (alpha - W0) * gamma_{t - tau_1} + alpha * sum_{j >= 2} gamma_{t - tau_j}`
//!
//! where `tau_j` is the test of the j-th accept (discovery), `gamma_k = 0` for
//! `k <= 0`, and `gamma` is a non-increasing sequence summing to at most 1;
//! the default is Javanmard and Montanari's
//! `gamma_j = C * ln(max(j, 2)) / (j * exp(sqrt(ln j)))` with C = 0.07720838
//! as published (and used by the onlineFDR package); the infinite sum is then
//! 0.9763 (a test bounds it by a partial sum plus integral bounds of the
//! tail), so the sequence is valid and about 2% conservative. Every accept earns alpha
//! back, so a run that keeps finding real improvements does not starve; a run
//! that finds nothing spends its initial wealth `W0` ever more slowly.
//!
//! What it controls, exactly:
//! - Under the global null (no candidate of the run is truly better than the
//!   strategy it is tested against), until the first accept every test runs at
//!   `gamma_t * W0`, so by the union bound the probability that the run
//!   accepts anything is at most `W0 * sum_t gamma_t <= W0 <= alpha`. This
//!   needs only that each p-value is valid given the earlier verdicts (all
//!   rejections, a fixed transcript), not independence. Here FDR control and
//!   "the probability of any false accept" are the same thing.
//! - Otherwise it controls the false discovery rate (the expected share of
//!   false accepts among accepts) at `alpha` when the null p-values are
//!   independent of each other and of the non-null ones (the paper's
//!   assumption), and the modified FDR likewise. It does NOT bound the
//!   probability of any false accept once real improvements are accepted.
//!
//! The state is the configuration, the number of tests run and the tests that
//! accepted: serializable, so the journal can hold it and replay it.

use serde::{Deserialize, Serialize};

/// Javanmard and Montanari's normalising constant.
pub const JM_CONSTANT: f64 = 0.07720838;

/// The spending sequence.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Gamma {
    /// `C ln(max(j, 2)) / (j exp(sqrt(ln j)))`: spends slowly, for long-lived journals.
    JavanmardMontanari,
    /// `6 / (pi^2 j^2)`: front-loaded (61% of the wealth on the first test after
    /// each accept), for runs that send few candidates to the confirm test.
    Basel,
    /// `1 / horizon` for the first `horizon` tests, 0 after: spends the wealth
    /// evenly over a planned number of tests (a scheduled run of known length).
    Horizon { tests: u64 },
}

impl Gamma {
    /// `gamma_j` for j >= 1; 0 for j = 0.
    pub fn at(self, j: u64) -> f64 {
        if j == 0 {
            return 0.0;
        }
        match self {
            Gamma::JavanmardMontanari => {
                let x = j as f64;
                JM_CONSTANT * x.max(2.0).ln() / (x * x.ln().sqrt().exp())
            }
            Gamma::Basel => 6.0 / (std::f64::consts::PI.powi(2) * (j as f64).powi(2)),
            Gamma::Horizon { tests } => {
                if j <= tests {
                    1.0 / tests as f64
                } else {
                    0.0
                }
            }
        }
    }
}

/// A LORD++ configuration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LordConfig {
    /// The target FDR level.
    pub alpha: f64,
    /// Initial wealth, `0 < w0 <= alpha` (Ramdas et al. suggest alpha / 2).
    pub w0: f64,
    pub gamma: Gamma,
}

impl LordConfig {
    /// `alpha`, `W0 = alpha / 2`, Javanmard-Montanari gamma.
    pub fn new(alpha: f64) -> Result<Self, LordError> {
        LordConfig { alpha, w0: alpha / 2.0, gamma: Gamma::JavanmardMontanari }.validated()
    }

    pub fn validated(self) -> Result<Self, LordError> {
        if !(self.alpha > 0.0 && self.alpha < 1.0) {
            return Err(LordError(format!("gates.alpha must be in (0, 1), got {}", self.alpha)));
        }
        if !(self.w0 > 0.0 && self.w0 <= self.alpha) {
            return Err(LordError(format!(
                "W0 (gates.lord_initial_wealth * alpha) must be in (0, alpha = {}], got {}",
                self.alpha, self.w0
            )));
        }
        if matches!(self.gamma, Gamma::Horizon { tests: 0 }) {
            return Err(LordError("gates.lord_horizon must be at least 1".into()));
        }
        Ok(self)
    }
}

/// A configuration that cannot control anything.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LordError(pub String);

/// The running state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lord {
    pub config: LordConfig,
    /// Confirm tests run so far.
    pub tests: u64,
    /// The (1-based) tests that accepted, in order.
    pub accepts: Vec<u64>,
}

/// One test's record.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LordTest {
    /// Its index among the run's tests (from 1).
    pub index: u64,
    pub alpha: f64,
    pub p_value: f64,
    pub accepted: bool,
    /// Wealth after the test.
    pub wealth: f64,
}

impl Lord {
    pub fn new(config: LordConfig) -> Self {
        Lord { config, tests: 0, accepts: Vec::new() }
    }

    /// The alpha of test `t` (1-based) given the accepts before it.
    fn alpha_at(&self, t: u64) -> f64 {
        let LordConfig { alpha, w0, gamma } = self.config;
        let mut a = gamma.at(t) * w0;
        for (j, &tau) in self.accepts.iter().filter(|&&tau| tau < t).enumerate() {
            let weight = if j == 0 { alpha - w0 } else { alpha };
            a += weight * gamma.at(t - tau);
        }
        a
    }

    /// The alpha the next confirm test will run at.
    pub fn next_alpha(&self) -> f64 {
        self.alpha_at(self.tests + 1)
    }

    /// Wealth: `W0 - sum of alphas spent + (alpha - W0) at the first accept + alpha at each later one`.
    pub fn wealth(&self) -> f64 {
        let LordConfig { alpha, w0, .. } = self.config;
        let spent: f64 = (1..=self.tests).map(|t| self.alpha_at(t)).sum();
        let earned = match self.accepts.len() {
            0 => 0.0,
            k => (alpha - w0) + alpha * (k - 1) as f64,
        };
        w0 - spent + earned
    }

    /// Runs the next test on `p_value`: accepts when `p_value <= alpha_t`.
    pub fn test(&mut self, p_value: f64) -> LordTest {
        let alpha = self.next_alpha();
        self.tests += 1;
        let accepted = p_value <= alpha;
        if accepted {
            self.accepts.push(self.tests);
        }
        LordTest { index: self.tests, alpha, p_value, accepted, wealth: self.wealth() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_jm_sequence_sums_to_one() {
        // Partial sum to N, plus the tail: for the decreasing f(x) = ln x /
        // (x e^sqrt(ln x)), sum_{j > N} f(j) lies between the integrals from
        // N + 1 and from N; with u = sqrt(ln x) the integral from x0 is
        // 2 e^-u0 (u0^3 + 3 u0^2 + 6 u0 + 6).
        let n = 2_000_000u64;
        let partial: f64 = (1..=n).map(|j| Gamma::JavanmardMontanari.at(j)).sum();
        let tail = |x: f64| {
            let u = x.ln().sqrt();
            2.0 * (-u).exp() * (u.powi(3) + 3.0 * u * u + 6.0 * u + 6.0) * JM_CONSTANT
        };
        let (low, high) = (partial + tail((n + 1) as f64), partial + tail(n as f64));
        assert!(high <= 1.0, "gamma must sum to at most 1: sum in [{low}, {high}]");
        assert!(low > 0.976 && high < 0.9764, "sum in [{low}, {high}]");
        assert!(partial < 0.7, "the tail is heavy: {partial}");
        for j in 2..1000 {
            assert!(Gamma::JavanmardMontanari.at(j + 1) <= Gamma::JavanmardMontanari.at(j));
        }
    }

    #[test]
    fn without_accepts_the_run_spends_only_its_initial_wealth() {
        let mut lord = Lord::new(LordConfig::new(0.05).unwrap());
        let first = lord.next_alpha();
        assert!((first - 0.025 * JM_CONSTANT * 2f64.ln()).abs() < 1e-15);
        let mut spent = 0.0;
        for _ in 0..5000 {
            let t = lord.test(1.0);
            spent += t.alpha;
            assert!(!t.accepted);
            assert!((t.wealth - (0.025 - spent)).abs() < 1e-12);
        }
        assert!(spent < 0.025);
    }

    #[test]
    fn an_accept_earns_alpha_back() {
        let mut lord = Lord::new(LordConfig::new(0.05).unwrap());
        lord.test(1.0);
        let before = lord.next_alpha();
        let t = lord.test(0.0);
        assert!(t.accepted && t.index == 2);
        // Test 3 gets gamma_3 W0 + (alpha - W0) gamma_1: much more than before.
        let expected = Gamma::JavanmardMontanari.at(3) * 0.025 + 0.025 * Gamma::JavanmardMontanari.at(1);
        assert!((lord.next_alpha() - expected).abs() < 1e-15);
        assert!(lord.next_alpha() > 5.0 * before);
        lord.test(0.0);
        let expected = Gamma::JavanmardMontanari.at(4) * 0.025
            + 0.025 * Gamma::JavanmardMontanari.at(2)
            + 0.05 * Gamma::JavanmardMontanari.at(1);
        assert!((lord.next_alpha() - expected).abs() < 1e-15);
        assert!(lord.wealth() > 0.0);
    }

    #[test]
    fn the_state_round_trips_and_bad_configs_are_named() {
        let mut lord = Lord::new(LordConfig { alpha: 0.1, w0: 0.05, gamma: Gamma::Horizon { tests: 20 } });
        for p in [0.5, 0.001, 0.3] {
            lord.test(p);
        }
        let json = serde_json::to_string(&lord).unwrap();
        let back: Lord = serde_json::from_str(&json).unwrap();
        assert_eq!(back, lord);
        assert_eq!(back.next_alpha(), lord.next_alpha());
        assert!(LordConfig { alpha: 0.05, w0: 0.06, gamma: Gamma::JavanmardMontanari }.validated().is_err());
        assert!(LordConfig::new(1.5).unwrap_err().0.contains("gates.alpha"));
        assert!(LordConfig { alpha: 0.05, w0: 0.02, gamma: Gamma::Horizon { tests: 0 } }.validated().is_err());
    }

    #[test]
    fn basel_and_horizon_sequences_are_valid_and_non_increasing() {
        for gamma in [Gamma::Basel, Gamma::Horizon { tests: 50 }] {
            let sum: f64 = (1..=100_000).map(|j| gamma.at(j)).sum();
            assert!(sum <= 1.0 + 1e-12 && sum > 0.9999, "{gamma:?}: {sum}");
            assert!((1..1000).all(|j| gamma.at(j + 1) <= gamma.at(j)));
        }
        let lord = Lord::new(LordConfig { alpha: 0.05, w0: 0.025, gamma: Gamma::Basel });
        assert!((lord.next_alpha() - 0.025 * 6.0 / std::f64::consts::PI.powi(2)).abs() < 1e-15);
    }
}
