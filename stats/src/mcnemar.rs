//! McNemar's test on the discordant pairs of a paired comparison.
//!
//! Only the discordant questions carry information about which run is better:
//! under the null (the candidate is no better and no worse), each discordant
//! question is improved or regressed with probability 1/2, so
//! |I| ~ Binomial(|I| + |R|, 1/2).
//!
//! Two versions, matching statsmodels 0.14 `mcnemar`:
//! - exact: `p = min(1, 2 * P(X <= min(I, R)))`, X ~ Bin(I + R, 1/2);
//! - chi-square with continuity correction: `(|I - R| - 1)^2 / (I + R)` against
//!   chi-square with one degree of freedom. As in statsmodels, the correction is
//!   not clamped at zero, so I = R gives a statistic of 1/(I + R), not 0; that
//!   only matters for p-values far above any alpha.
//!
//! The exact test is used when `I + R <` [`EXACT_BELOW`] (25), the usual rule of
//! thumb: below it the chi-square approximation is poor (for (5, 0) it gives
//! 0.074 where the exact p is 0.0625); from 25 on the two agree closely and the
//! chi-square is the conventional report. Both p-values are always returned so
//! a reader can see how close they are.

use serde::{Deserialize, Serialize};
use statrs::distribution::{Binomial, ChiSquared, ContinuousCDF, DiscreteCDF};

/// The exact binomial test is used when `I + R` is below this; chi-square from here on.
pub const EXACT_BELOW: u64 = 25;

/// Which version of the test decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McNemarTest {
    /// Exact two-sided binomial test.
    Exact,
    /// Chi-square with continuity correction.
    ChiSquare,
}

impl McNemarTest {
    /// The serialized name (`exact`, `chi_square`).
    pub fn name(self) -> &'static str {
        match self {
            McNemarTest::Exact => "exact",
            McNemarTest::ChiSquare => "chi_square",
        }
    }
}

/// The result of McNemar's test.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct McNemar {
    pub improved: u64,
    pub regressed: u64,
    /// The test chosen by the `I + R <` [`EXACT_BELOW`] rule.
    pub test: McNemarTest,
    /// The chosen test's two-sided p-value.
    pub p_value: f64,
    /// Exact binomial p-value (always computed; 1 when there is no discordant pair).
    pub exact_p: f64,
    /// Continuity-corrected chi-square statistic; `None` when `I + R = 0` (undefined).
    pub chi_square: Option<f64>,
    /// Its p-value; `None` when `I + R = 0`.
    pub chi_square_p: Option<f64>,
}

/// McNemar's test on `improved` (|I|) and `regressed` (|R|) counts.
/// With no discordant pair there is no evidence either way: exact, p = 1.
pub fn mcnemar(improved: u64, regressed: u64) -> McNemar {
    let discordant = improved + regressed;
    let (exact_p, chi_square, chi_square_p) = if discordant == 0 {
        (1.0, None, None)
    } else {
        let (stat, p) = chi_square(improved, regressed);
        (exact(improved, regressed), Some(stat), Some(p))
    };
    let (test, p_value) = match chi_square_p {
        Some(p) if discordant >= EXACT_BELOW => (McNemarTest::ChiSquare, p),
        _ => (McNemarTest::Exact, exact_p),
    };
    McNemar { improved, regressed, test, p_value, exact_p, chi_square, chi_square_p }
}

fn exact(improved: u64, regressed: u64) -> f64 {
    let binomial = Binomial::new(0.5, improved + regressed).expect("p = 0.5 is a valid probability");
    (2.0 * binomial.cdf(improved.min(regressed))).min(1.0)
}

fn chi_square(improved: u64, regressed: u64) -> (f64, f64) {
    let diff = improved.abs_diff(regressed) as f64 - 1.0;
    let stat = diff * diff / (improved + regressed) as f64;
    let dist = ChiSquared::new(1.0).expect("1 is a valid degree of freedom");
    (stat, dist.sf(stat))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_rel(actual: f64, expected: f64, tol: f64, what: &str) {
        let rel = (actual - expected).abs() / expected.abs();
        assert!(rel <= tol, "{what}: got {actual}, expected {expected} (relative error {rel:e} > {tol:e})");
    }

    /// statsmodels 0.14 `mcnemar(table, exact=True)` and
    /// `mcnemar(table, exact=False, correction=True)`, as recorded in
    /// /work/shared/DEPENDENCIES.md (7 significant digits, hence 1e-6 relative).
    const STATSMODELS: [(u64, u64, f64, f64); 5] = [
        (10, 2, 0.03857421875, 0.0433081),
        (30, 15, 0.0356978, 0.0368884),
        (5, 0, 0.0625, 0.0736383),
        (100, 70, 0.0258444, 0.0261351),
        (3, 1, 0.625, 0.6170751),
    ];

    #[test]
    fn matches_statsmodels_reference_values() {
        for (i, r, exact_p, chi_p) in STATSMODELS {
            let m = mcnemar(i, r);
            assert_rel(m.exact_p, exact_p, 1e-6, &format!("exact p for ({i}, {r})"));
            assert_rel(m.chi_square_p.unwrap(), chi_p, 1e-6, &format!("chi-square p for ({i}, {r})"));
            // The test is symmetric in I and R.
            let swapped = mcnemar(r, i);
            assert_eq!((swapped.exact_p, swapped.chi_square_p), (m.exact_p, m.chi_square_p));
        }
    }

    /// Full-precision values from scipy 1.17.1:
    /// `min(1, 2 * binom.cdf(min(I, R), I + R, 0.5))` and
    /// `chi2.sf((abs(I - R) - 1)**2 / (I + R), 1)`.
    #[test]
    fn matches_scipy_to_full_precision() {
        let scipy: [(u64, u64, f64, f64); 8] = [
            (10, 2, 0.03857421875, 0.04330814281079206),
            (30, 15, 0.035697803555194696, 0.036888425707049914),
            (5, 0, 0.0625, 0.07363827012030258),
            (100, 70, 0.025844387581341693, 0.02613509411386816),
            (3, 1, 0.625, 0.6170750774519739),
            (0, 7, 0.015625, 0.02334220201289086),
            (13, 11, 0.8388197422027588, 0.8382564863858263),
            (40, 20, 0.01348929373119186, 0.014171388254012323),
        ];
        for (i, r, exact_p, chi_p) in scipy {
            let m = mcnemar(i, r);
            assert_rel(m.exact_p, exact_p, 1e-9, &format!("exact p for ({i}, {r})"));
            assert_rel(m.chi_square_p.unwrap(), chi_p, 1e-9, &format!("chi-square p for ({i}, {r})"));
        }
    }

    #[test]
    fn chooses_exact_below_25_discordant_pairs() {
        let m = mcnemar(13, 11);
        assert_eq!(m.test, McNemarTest::Exact);
        assert_eq!(m.p_value, m.exact_p);
        let m = mcnemar(14, 11);
        assert_eq!(m.test, McNemarTest::ChiSquare);
        assert_eq!(Some(m.p_value), m.chi_square_p);
        assert_eq!(mcnemar(10, 2).test, McNemarTest::Exact);
        assert_eq!(mcnemar(100, 70).test, McNemarTest::ChiSquare);
    }

    #[test]
    fn no_discordant_pairs_gives_p_one() {
        let m = mcnemar(0, 0);
        assert_eq!(
            (m.test, m.p_value, m.exact_p, m.chi_square, m.chi_square_p),
            (McNemarTest::Exact, 1.0, 1.0, None, None)
        );
    }

    #[test]
    fn exact_p_is_capped_at_one() {
        assert_eq!(mcnemar(12, 12).exact_p, 1.0);
        assert_eq!(mcnemar(40, 40).exact_p, 1.0);
        // 2 * P(X <= 0), X ~ Bin(1, 1/2) is exactly 1; the incomplete beta
        // function behind statrs' cdf gets within a few ulps.
        assert!((mcnemar(1, 0).exact_p - 1.0).abs() < 1e-12);
    }
}
