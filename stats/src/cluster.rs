//! A cluster-level check of "better" that stays valid with few clusters:
//! the CR2 (Bell-McCaffrey) cluster-robust variance with a t(G - 1) reference.
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
//! `P(T > d_bar / sqrt(V))`, T ~ t(G - 1). Unlike a percentile cluster
//! bootstrap (which with 5 clusters is often narrower than the per-question
//! interval), this is conservative in the simulations of `sim.rs`.
//!
//! Below [`MIN_CLUSTERS`] clusters the answer is "too few clusters to tell":
//! with 2 or 3 clusters, t(1) and t(2) make the check either powerless or
//! driven by one cluster.

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
        df: usize,
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

/// CR2 / t(G - 1) check on `(cluster, d)` pairs, d in {-1, 0, 1}, at `alpha`.
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
    let df = g - 1;
    let (t, p_value) = if se > 0.0 {
        let t = mean / se;
        (t, StudentsT::new(0.0, 1.0, df as f64).expect("df >= 3").sf(t))
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
        assert_eq!(df, 3);
        // The t(3) cdf in closed form: 1/2 + (theta + sin theta cos theta) / pi, theta = atan(t / sqrt 3).
        let closed = {
            let x = t;
            let th = (x / 3f64.sqrt()).atan();
            let cdf = 0.5 + (th + th.sin() * th.cos()) / std::f64::consts::PI;
            1.0 - cdf
        };
        assert!((p_value - closed).abs() < 1e-9, "{p_value} vs {closed}");
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
