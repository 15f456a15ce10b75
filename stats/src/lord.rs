//! Online error control across a run: LORD++ (Ramdas, Yang, Wainwright and
//! Jordan 2017, "Online control of the false discovery rate with decaying
//! memory"), indexed by confirm tests actually run, never by rounds, and
//! earning wealth only for what was served.
//!
//! Test t (from 1) runs at
//!
//! `alpha_t = gamma_t * W0 + (alpha - W0) * gamma_{t - s_1} + alpha * sum_{j >= 2} gamma_{t - s_j}`
//!
//! where `s_j` is the number of tests run when the j-th deployment was
//! recorded ([`Lord::deployed`]), `gamma_k = 0` for `k <= 0`, and `gamma` is
//! a non-increasing sequence summing to at most 1. The paper's `tau_j` is the
//! j-th rejection; here a rejection (`p_t <= alpha_t`, [`LordTest::accepted`])
//! earns nothing by itself: a round may test several candidates and deploy
//! at most one (the best that passes every rule), and only a deployment
//! earns. Its wealth is spent from the test after it was recorded, so the
//! alpha of a test never changes once it has run (a round's later tests run
//! before its deployment is decided). The default gamma is Javanmard and
//! Montanari's `gamma_j = C * ln(max(j, 2)) / (j * exp(sqrt(ln j)))` with
//! C = 0.07720838 as published (and used by the onlineFDR package); the
//! infinite sum is then 0.9763 (a test bounds it by a partial sum plus
//! integral bounds of the tail), so the sequence is valid and about 2%
//! conservative. Every deployment earns alpha back, so a run that keeps
//! deploying real improvements does not starve; a run that deploys nothing
//! spends its initial wealth `W0` ever more slowly.
//!
//! What it controls, exactly. Write D(T) for the deployments among the first
//! T tests. Whatever the data, the alphas spent satisfy
//! `sum_{t <= T} alpha_t <= W0 + (alpha - W0) [|D| >= 1] + alpha (|D| - 1)_+ <= alpha * max(|D(T)|, 1)`
//! (the middle expression is `alpha * |D|` with a deployment, `W0` without), because each deployment's
//! weight is spread by gamma over the tests after it and gamma sums to at
//! most 1. A deployment needs a rejection, so the false deployments are
//! among the false rejections V(T). Then:
//! - mFDR over deployed changes: if each null p-value is valid given
//!   everything before its test (earlier tests, verdicts and deployments,
//!   which fix `alpha_t`), `E[V(T)] <= sum_t E[alpha_t] <= alpha E[max(|D(T)|, 1)]`,
//!   so `E[false deployments] <= E[V(T)] <= alpha E[max(|D(T)|, 1)]`: the
//!   mFDR over deployed changes, `E[false deployments] / E[max(|D|, 1)]`, is
//!   at most alpha.
//! - Under the global null (no candidate of the run is truly better than the
//!   strategy it is tested against), until the first deployment every test
//!   runs at `gamma_t * W0`, and a false deployment needs a rejection at one
//!   of those tests, so by the union bound the probability that the run
//!   deploys anything is at most `W0 * sum_t gamma_t <= W0 <= alpha`. This
//!   needs only that each p-value is valid given the earlier verdicts, not
//!   independence.
//! - FDR over deployed changes (`E[false deployments / max(|D|, 1)]`): the
//!   paper proves FDR control for LORD++ when the null p-values are
//!   independent of each other and of the non-null ones and the alphas are
//!   monotone in the earlier rejections. Deployments are monotone in
//!   rejections only if whether a rejected test is deployed does not depend
//!   on its data otherwise; the round's best passer is chosen by its confirm
//!   delta, a function of the same answers as its p-value, so the paper's
//!   theorem does not carry over as is. `sim_lord.rs` measures the FDR over
//!   deployed changes of the gate's rule (one deployment per round, the best
//!   passer) and finds it within alpha. It does NOT bound the probability of
//!   any false deployment once real improvements are deployed.
//!
//! With several tests per round the tests of a round share the served
//! strategy's answers on the confirm questions, so their p-values are not
//! independent; the global-null bound above does not need independence.
//!
//! The state is the configuration, the number of tests run, the tests that
//! rejected and the deployments: serializable, so the journal can hold it and
//! replay it.

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
    /// The (1-based) tests whose p-value was at most their alpha, in order.
    pub rejections: Vec<u64>,
    /// The deployed tests, in the order they were recorded.
    pub deployments: Vec<Deployment>,
}

/// A deployed test and when its deployment was recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Deployment {
    /// The deployed test's index (from 1); it rejected.
    pub test: u64,
    /// The number of tests run when the deployment was recorded: its wealth
    /// is spent from test `after + 1` on. A replay sets it to the last test
    /// of the deployed candidate's round (the deployment is decided after
    /// every test of the round has run).
    pub after: u64,
}

/// One test's record.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LordTest {
    /// Its index among the run's tests (from 1).
    pub index: u64,
    pub alpha: f64,
    pub p_value: f64,
    /// The test's own rejection: `p_value <= alpha`. It earns nothing until
    /// the candidate is deployed ([`Lord::deployed`]).
    pub accepted: bool,
    /// Wealth after the test (before any deployment of its round).
    pub wealth: f64,
}

impl Lord {
    pub fn new(config: LordConfig) -> Self {
        Lord { config, tests: 0, rejections: Vec::new(), deployments: Vec::new() }
    }

    /// The alpha of test `t` (1-based) given the deployments recorded before it.
    fn alpha_at(&self, t: u64) -> f64 {
        let LordConfig { alpha, w0, gamma } = self.config;
        let mut a = gamma.at(t) * w0;
        for (j, d) in self.deployments.iter().enumerate() {
            if d.after < t {
                let weight = if j == 0 { alpha - w0 } else { alpha };
                a += weight * gamma.at(t - d.after);
            }
        }
        a
    }

    /// The alpha the next confirm test will run at.
    pub fn next_alpha(&self) -> f64 {
        self.alpha_at(self.tests + 1)
    }

    /// Wealth: `W0 - sum of alphas spent + (alpha - W0) at the first deployment + alpha at each later one`.
    pub fn wealth(&self) -> f64 {
        let LordConfig { alpha, w0, .. } = self.config;
        let spent: f64 = (1..=self.tests).map(|t| self.alpha_at(t)).sum();
        let earned = match self.deployments.len() {
            0 => 0.0,
            k => (alpha - w0) + alpha * (k - 1) as f64,
        };
        w0 - spent + earned
    }

    /// Runs the next test on `p_value` and records it: it rejects when
    /// `p_value <= alpha_t`, and earns nothing (see [`Lord::deployed`]).
    pub fn test(&mut self, p_value: f64) -> LordTest {
        let alpha = self.next_alpha();
        self.tests += 1;
        let accepted = p_value <= alpha;
        if accepted {
            self.rejections.push(self.tests);
        }
        LordTest { index: self.tests, alpha, p_value, accepted, wealth: self.wealth() }
    }

    /// Records that the candidate of test `index` was deployed (served, or
    /// accepted pending approval): it earns `alpha - W0` if it is the run's
    /// first deployment and `alpha` otherwise, spent from the next test on.
    ///
    /// # Errors
    /// When test `index` has not run, did not reject, or was already recorded
    /// as deployed; the state is then unchanged.
    pub fn deployed(&mut self, index: u64) -> Result<(), LordError> {
        if index == 0 || index > self.tests {
            return Err(LordError(format!("LORD++ test {index} has not run ({} tests so far)", self.tests)));
        }
        if !self.rejections.contains(&index) {
            return Err(LordError(format!("LORD++ test {index} did not reject: it cannot be deployed")));
        }
        if self.deployments.iter().any(|d| d.test == index) {
            return Err(LordError(format!("LORD++ test {index} is already deployed")));
        }
        self.deployments.push(Deployment { test: index, after: self.tests });
        Ok(())
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
    fn a_deployment_earns_alpha_back() {
        let mut lord = Lord::new(LordConfig::new(0.05).unwrap());
        lord.test(1.0);
        let before = lord.next_alpha();
        let t = lord.test(0.0);
        assert!(t.accepted && t.index == 2);
        lord.deployed(2).unwrap();
        // Test 3 gets gamma_3 W0 + (alpha - W0) gamma_1: much more than before.
        let expected = Gamma::JavanmardMontanari.at(3) * 0.025 + 0.025 * Gamma::JavanmardMontanari.at(1);
        assert!((lord.next_alpha() - expected).abs() < 1e-15);
        assert!(lord.next_alpha() > 5.0 * before);
        lord.test(0.0);
        lord.deployed(3).unwrap();
        let expected = Gamma::JavanmardMontanari.at(4) * 0.025
            + 0.025 * Gamma::JavanmardMontanari.at(2)
            + 0.05 * Gamma::JavanmardMontanari.at(1);
        assert!((lord.next_alpha() - expected).abs() < 1e-15);
        assert!(lord.wealth() > 0.0);
    }

    /// The wealth rule as documented: a rejection that is not deployed earns
    /// nothing; a deployment earns `alpha - W0` the first time and `alpha`
    /// afterwards, and its wealth is spent from the test after it was
    /// recorded, so no test's alpha changes once it has run.
    #[test]
    fn only_deployments_earn_and_each_earns_what_the_doc_says() {
        let config = LordConfig { alpha: 0.05, w0: 0.025, gamma: Gamma::Basel };
        let (mut lord, mut never) = (Lord::new(config), Lord::new(config));
        // A round of 4 tests: 1 and 3 reject, 3 is deployed (the best passer).
        let round: Vec<LordTest> = [0.0, 0.9, 0.0, 0.5].iter().map(|&p| lord.test(p)).collect();
        for &p in &[0.0, 0.9, 0.0, 0.5] {
            never.test(p);
        }
        assert_eq!(lord.rejections, vec![1, 3]);
        // Rejected but not (yet) deployed: nothing earned, the same state as a run that never deploys.
        assert!((lord.wealth() - never.wealth()).abs() < 1e-15);
        assert!((lord.wealth() - (0.025 - round.iter().map(|t| t.alpha).sum::<f64>())).abs() < 1e-15);
        let before = lord.wealth();
        lord.deployed(3).unwrap();
        assert!((lord.wealth() - before - (0.05 - 0.025)).abs() < 1e-15, "the first deployment earns alpha - W0");
        assert_eq!(lord.deployments, vec![Deployment { test: 3, after: 4 }]);
        // The round's alphas are unchanged: the earning is spent from test 5 on.
        let spent: f64 = (1..=4).map(|t| lord.alpha_at(t)).sum();
        assert!((spent - round.iter().map(|t| t.alpha).sum::<f64>()).abs() < 1e-15);
        let six_over_pi2 = 6.0 / std::f64::consts::PI.powi(2);
        assert!((lord.next_alpha() - six_over_pi2 * (0.025 / 25.0 + 0.025)).abs() < 1e-15);
        // Test 1 also rejected; it was not deployed, and it never earns.
        assert!((never.next_alpha() - six_over_pi2 * 0.025 / 25.0).abs() < 1e-15);
        let t = lord.test(0.0);
        let before = lord.wealth();
        lord.deployed(t.index).unwrap();
        assert!((lord.wealth() - before - 0.05).abs() < 1e-15, "a later deployment earns alpha");
        // What cannot be deployed, with the state unchanged.
        let state = lord.clone();
        assert!(lord.deployed(2).unwrap_err().0.contains("did not reject"));
        assert!(lord.deployed(3).unwrap_err().0.contains("already deployed"));
        assert!(lord.deployed(9).unwrap_err().0.contains("has not run"));
        assert!(lord.deployed(0).is_err());
        assert_eq!(lord, state);
    }

    /// The shipped settings (Basel, W0 = 0.5 * 0.05, 4 tests per round): the
    /// first test gets 61% of W0, a first round without a deployment spends
    /// 86% of it, and test 5 runs at 0.0006.
    #[test]
    fn four_tests_a_round_spend_most_of_the_initial_wealth_in_the_first_round() {
        let config = LordConfig { alpha: 0.05, w0: 0.025, gamma: Gamma::Basel };
        let mut lord = Lord::new(config);
        assert!((lord.next_alpha() / 0.025 - 0.6079).abs() < 1e-4);
        let spent: f64 = (0..4).map(|_| lord.test(1.0).alpha).sum();
        assert!((spent / 0.025 - 0.8654).abs() < 1e-4, "{}", spent / 0.025);
        assert!((lord.next_alpha() - 0.000608).abs() < 1e-6, "{}", lord.next_alpha());
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
