//! A cluster-level check of "better" that stays valid with few clusters:
//! the CR2 cluster-robust variance with Bell and McCaffrey's degrees of
//! freedom.
//!
//! Questions of one conversation share a memory and its failures, so their
//! per-question differences `d = candidate - served` (in {-1, 0, 1}) can be
//! correlated. The estimate is the mean difference `d_bar` over all n
//! questions (the accuracy difference). For this intercept-only model the CR2
//! variance has a closed form: with `S_g` the sum of residuals `d - d_bar` over
//! cluster g of `n_g` questions,
//!
//! `V = sum_g S_g^2 / (1 - n_g / n) / n^2`
//!
//! (the leverage of cluster g is `n_g / n`; `(I - H_gg)^(-1/2)` multiplies a
//! cluster's residual sum by `1 / sqrt(1 - n_g / n)`). The one-sided p-value is
//! `P(T > d_bar / sqrt(V))`, T ~ t(df) with Bell and McCaffrey's
//! Satterthwaite degrees of freedom ([`bell_mccaffrey_df`]): `G - 1` when the
//! clusters are of equal size, fewer (a wider interval) when one cluster
//! dominates. `sim.rs` measures the coverage of the resulting interval with
//! 5 to 10 conversations against the normal and the t(G - 1) references.
//!
//! Below [`MIN_CLUSTERS`] clusters the answer is "too few clusters to tell":
//! with 2 or 3 clusters the reference t has 1 or 2 degrees of freedom at
//! most, which makes the check either powerless or driven by one cluster.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// The fewest clusters the check will judge.
pub const MIN_CLUSTERS: usize = 4;

/// The cluster check's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ClusterCheck {
    /// Fewer than [`MIN_CLUSTERS`] clusters: no verdict either way.
    TooFewClusters { clusters: usize, needed: usize },
    Tested {
        clusters: usize,
        estimate: f64,
        /// CR2 standard error.
        std_error: f64,
        t: f64,
        /// Bell-McCaffrey degrees of freedom of the reference t.
        df: f64,
        /// One-sided p-value for "better".
        p_value: f64,
        alpha: f64,
        better: bool,
    },
}

impl ClusterCheck {
    /// Whether the check affirmatively says "better" (false when too few clusters).
    pub fn better(&self) -> bool {
        matches!(self, ClusterCheck::Tested { better: true, .. })
    }
}

/// Bell and McCaffrey's degrees of freedom for the CR2 variance of a mean
/// over clusters of `sizes` questions: `(tr M)^2 / tr(M^2)`, with M the
/// G x G matrix `M_gh = c_g c_h (delta_gh n_g - n_g n_h / n) / n^2`,
/// `c_g = 1 / sqrt(1 - n_g / n)`, under a working model of independent,
/// equal-variance questions. `tr M = 1 / n`; the answer is `G - 1` for
/// clusters of equal size and less when the sizes differ. NaN for fewer
/// than two clusters or a cluster holding every question.
pub fn bell_mccaffrey_df(sizes: &[usize]) -> f64 {
    let n: f64 = sizes.iter().sum::<usize>() as f64;
    if sizes.len() < 2 || sizes.iter().any(|&s| s as f64 >= n) {
        return f64::NAN;
    }
    let c: Vec<f64> = sizes.iter().map(|&s| 1.0 / (1.0 - s as f64 / n).sqrt()).collect();
    let mut trace_sq = 0.0;
    for (g, &ng) in sizes.iter().enumerate() {
        for (h, &nh) in sizes.iter().enumerate() {
            let (ng, nh) = (ng as f64, nh as f64);
            let diagonal = if g == h { ng } else { 0.0 };
            let m = c[g] * c[h] * (diagonal - ng * nh / n) / (n * n);
            trace_sq += m * m;
        }
    }
    (1.0 / (n * n)) / trace_sq
}

/// CR2 / t(Bell-McCaffrey df) check on `(cluster, d)` pairs, d in {-1, 0, 1}, at `alpha`.
pub fn cluster_check<'a>(diffs: impl IntoIterator<Item = (&'a str, i8)>, alpha: f64) -> ClusterCheck {
    let mut clusters: BTreeMap<&str, (f64, usize)> = BTreeMap::new();
    for (c, d) in diffs {
        let e = clusters.entry(c).or_default();
        e.0 += f64::from(d);
        e.1 += 1;
    }
    let g = clusters.len();
    if g < MIN_CLUSTERS {
        return ClusterCheck::TooFewClusters { clusters: g, needed: MIN_CLUSTERS };
    }
    let n: usize = clusters.values().map(|c| c.1).sum();
    let nf = n as f64;
    let mean = clusters.values().map(|c| c.0).sum::<f64>() / nf;
    let v: f64 = clusters
        .values()
        .map(|&(sum, size)| {
            let s = sum - mean * size as f64;
            s * s / (1.0 - size as f64 / nf)
        })
        .sum::<f64>()
        / (nf * nf);
    let se = v.sqrt();
    let sizes: Vec<usize> = clusters.values().map(|c| c.1).collect();
    let df = bell_mccaffrey_df(&sizes);
    let (t, p_value) = if se > 0.0 {
        let t = mean / se;
        (t, StudentsT::new(0.0, 1.0, df).expect("df > 0 with two or more clusters").sf(t))
    } else if mean > 0.0 {
        // Every cluster moved by exactly the same amount: no variance to judge by.
        (f64::INFINITY, 0.0)
    } else {
        (0.0, 1.0)
    };
    ClusterCheck::Tested { clusters: g, estimate: mean, std_error: se, t, df, p_value, alpha, better: p_value <= alpha }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_few_clusters_give_no_verdict() {
        let d = [("a", 1i8), ("a", 1), ("b", 1), ("c", 1)];
        assert_eq!(cluster_check(d, 0.05), ClusterCheck::TooFewClusters { clusters: 3, needed: 4 });
        assert!(!cluster_check(d, 0.05).better());
    }

    #[test]
    fn matches_a_hand_computed_cr2() {
        // Clusters (sum, size): a (2, 3), b (0, 2), c (1, 2), d (-1, 3); n = 10, mean = 0.2.
        let d =
            [("a", 1i8), ("a", 1), ("a", 0), ("b", 1), ("b", -1), ("c", 1), ("c", 0), ("d", 0), ("d", -1), ("d", 0)];
        // residual sums: a 2 - 0.6 = 1.4, b -0.4, c 0.6, d -1.6;
        // V = (1.96/0.7 + 0.16/0.8 + 0.36/0.8 + 2.56/0.7) / 100 = 0.071428...
        let v: f64 = (1.96 / 0.7 + 0.16 / 0.8 + 0.36 / 0.8 + 2.56 / 0.7) / 100.0;
        let ClusterCheck::Tested { estimate, std_error, t, df, p_value, .. } = cluster_check(d, 0.05) else {
            panic!("four clusters are enough")
        };
        assert!((estimate - 0.2).abs() < 1e-12);
        assert!((std_error - v.sqrt()).abs() < 1e-12);
        // Bell-McCaffrey df of sizes (3, 2, 2, 3), in exact fractions: M's
        // diagonal is n_g / 100, tr M = 1/10, tr M^2 = 137/39200, so
        // df = (1/100) / (137/39200) = 392/137, under G - 1 = 3.
        assert!((df - 392.0 / 137.0).abs() < 1e-9, "{df}");
        // t(392/137) lies between t(2) and t(3); both have closed forms.
        assert!(p_value > t3_sf(t) && p_value < t2_sf(t), "{p_value}");
        // Four clusters of 3 (same sums as above plus a concordant question
        // in b and c): df is exactly G - 1 = 3 and the p-value is t(3)'s.
        let equal = [
            ("a", 1i8),
            ("a", 1),
            ("a", 0),
            ("b", 1),
            ("b", -1),
            ("b", 0),
            ("c", 1),
            ("c", 0),
            ("c", 0),
            ("d", 0),
            ("d", -1),
            ("d", 0),
        ];
        let ClusterCheck::Tested { t, df, p_value, .. } = cluster_check(equal, 0.05) else { panic!("four clusters") };
        assert!((df - 3.0).abs() < 1e-9, "{df}");
        assert!((p_value - t3_sf(t)).abs() < 1e-9, "{p_value} vs {}", t3_sf(t));
    }

    /// P(T > t), T ~ t(3), in closed form: 1/2 - (theta + sin theta cos theta) / pi, theta = atan(t / sqrt 3).
    fn t3_sf(t: f64) -> f64 {
        let th = (t / 3f64.sqrt()).atan();
        0.5 - (th + th.sin() * th.cos()) / std::f64::consts::PI
    }

    /// P(T > t), T ~ t(2), in closed form: (1 - t / sqrt(2 + t^2)) / 2.
    fn t2_sf(t: f64) -> f64 {
        (1.0 - t / (2.0 + t * t).sqrt()) / 2.0
    }

    #[test]
    fn bell_mccaffrey_df_is_g_minus_one_for_equal_clusters_and_less_for_unequal() {
        for g in 2..=12 {
            let df = bell_mccaffrey_df(&vec![37; g]);
            assert!((df - (g - 1) as f64).abs() < 1e-9, "{g} clusters: {df}");
        }
        // One conversation of 200 questions and four of 30: far fewer than 4.
        let lopsided = bell_mccaffrey_df(&[200, 30, 30, 30, 30]);
        assert!((lopsided - 1.9696).abs() < 1e-4, "{lopsided}");
        // The dev set's confirm part (five conversations of 46 to 108): a little under 4.
        let dev = bell_mccaffrey_df(&[46, 70, 77, 85, 108]);
        assert!((dev - 3.6997).abs() < 1e-4, "{dev}");
        assert!(bell_mccaffrey_df(&[10]).is_nan());
    }

    #[test]
    fn a_uniform_gain_in_every_cluster_passes() {
        let mut d = Vec::new();
        for (k, c) in ["a", "b", "c", "d", "e"].into_iter().enumerate() {
            for i in 0..40 {
                d.push((
                    c,
                    if i < 6 + k {
                        1i8
                    } else if i < 8 + k {
                        -1
                    } else {
                        0
                    },
                ));
            }
        }
        let check = cluster_check(d.iter().copied(), 0.05);
        assert!(check.better(), "{check:?}");
        // The same gains, but all in one cluster and losses in the others: not better.
        let mut lopsided = vec![("a", 1i8); 60];
        for c in ["b", "c", "d", "e"] {
            lopsided.extend([(c, -1i8); 5]);
            lopsided.extend([(c, 0i8); 35]);
        }
        assert!(!cluster_check(lopsided.iter().copied(), 0.05).better());
    }
}
