//! One full paired comparison: pairing, McNemar, bootstrap and verdict.

use serde::Serialize;

use super::bootstrap::{BootstrapCi, BootstrapConfig, BootstrapError, paired_bootstrap};
use super::mcnemar::{McNemar, mcnemar};
use super::pairing::{Outcome, Paired, PairingError, pair};
use super::verdict::{Cost, ThresholdError, Thresholds, Verdict, verdict};

/// Everything a comparison needs besides the data.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct CompareConfig {
    /// `thresholds.alpha` is this test's alpha, as the caller spends it
    /// (LORD++ in the loop).
    pub thresholds: Thresholds,
    pub bootstrap: BootstrapConfig,
}

/// Why a comparison could not be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StatsError {
    #[error(transparent)]
    Pairing(#[from] PairingError),
    #[error(transparent)]
    Bootstrap(#[from] BootstrapError),
    #[error(transparent)]
    Thresholds(#[from] ThresholdError),
}

/// The frozen result of a comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub paired: Paired,
    pub mcnemar: McNemar,
    pub bootstrap: BootstrapCi,
    pub verdict: Verdict,
}

/// Compares `candidate` with `baseline` question by question and applies the
/// acceptance rules. `cost` (mean context tokens of each run) feeds the cost
/// rule when `config.thresholds.cost_bound` is set.
pub fn compare(
    baseline: &[Outcome],
    candidate: &[Outcome],
    config: &CompareConfig,
    cost: Option<&Cost>,
) -> Result<Comparison, StatsError> {
    config.thresholds.validate()?;
    let paired = pair(baseline, candidate)?;
    let mcnemar = mcnemar(paired.improved().len() as u64, paired.regressed().len() as u64);
    let bootstrap = paired_bootstrap(&paired, &config.bootstrap)?;
    let verdict = verdict(&paired, &mcnemar, &bootstrap, &config.thresholds, cost);
    Ok(Comparison { paired, mcnemar, bootstrap, verdict })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::BootstrapUnit;
    use crate::testdata::outcomes_with;

    #[test]
    fn a_clear_win_is_accepted_end_to_end() {
        let (base, cand) = outcomes_with(60, 20, 300, 120, |i| Some(format!("c{}", i % 25)));
        for unit in [BootstrapUnit::Question, BootstrapUnit::Conversation] {
            let config = CompareConfig {
                bootstrap: BootstrapConfig { unit, resamples: 1000, ..BootstrapConfig::default() },
                ..CompareConfig::default()
            };
            let c = compare(&base, &cand, &config, None).unwrap();
            assert_eq!((c.paired.n(), c.mcnemar.improved, c.mcnemar.regressed), (500, 60, 20));
            assert_eq!(c.bootstrap.unit, unit);
            assert!(c.verdict.accept, "{unit}: {:#?}", c.verdict);
        }
    }

    #[test]
    fn errors_are_typed() {
        let (base, cand) = outcomes_with(1, 1, 1, 1, |_| None);
        let bad = CompareConfig {
            thresholds: Thresholds { alpha: 2.0, ..Thresholds::default() },
            ..CompareConfig::default()
        };
        assert!(matches!(compare(&base, &cand, &bad, None), Err(StatsError::Thresholds(_))));
        assert!(matches!(compare(&base, &cand[1..], &CompareConfig::default(), None), Err(StatsError::Pairing(_))));
        let cluster = CompareConfig {
            bootstrap: BootstrapConfig { unit: BootstrapUnit::Conversation, ..BootstrapConfig::default() },
            ..CompareConfig::default()
        };
        assert!(matches!(compare(&base, &cand, &cluster, None), Err(StatsError::Bootstrap(_))));
    }
}
