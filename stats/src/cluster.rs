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
//!
//! When the split's unit is the conversation (`harness.split.unit:
//! conversation`: whole conversations go to one part), the confirm test
//! itself is cluster-level: [`conversation_test`], an exact sign-flip test
//! over the confirm part's conversation totals, with its inverted lower
//! bound. `sim_conversation.rs` measures it against CR2 and the
//! question-level test under conversation-level candidate effects.

use std::collections::BTreeMap;

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
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
        // Every cluster's mean difference is the same positive value: the
        // residuals are all 0, so the variance estimate is 0, which with a few
        // clusters is not evidence of infinite precision. Report the sign
        // test's p-value instead: the chance that all G clusters move the same
        // way when each is as likely to move up as down, 2^-G (0.0625 with 4
        // clusters, the exact sign-flip p-value of [`conversation_test`]).
        (f64::INFINITY, 0.5f64.powi(i32::try_from(g).unwrap_or(i32::MAX)))
    } else {
        (0.0, 1.0)
    };
    ClusterCheck::Tested { clusters: g, estimate: mean, std_error: se, t, df, p_value, alpha, better: p_value <= alpha }
}

/// Conversations up to which [`conversation_test`] enumerates every sign
/// vector (2^16 = 65,536); beyond, it draws [`SIGN_FLIP_DRAWS`] seeded ones.
pub const EXACT_SIGN_FLIPS_UP_TO: usize = 16;

/// Random sign vectors of [`conversation_test`] beyond [`EXACT_SIGN_FLIPS_UP_TO`]
/// conversations (the Monte Carlo standard error of a p-value near 0.015 is 0.0009).
pub const SIGN_FLIP_DRAWS: usize = 20_000;

/// The fixed seed of those draws: the same differences give the same answer.
pub(crate) const SIGN_FLIP_SEED: u64 = 0x00c0_7e57_5167_f11b;

/// The confirm test when the split's unit is the conversation.
///
/// An exact sign-flip (randomization) test over conversation totals: with
/// `T_g` the sum of `d = candidate - served` over conversation g's confirm
/// questions, the statistic is `sum_g T_g` (n times the accuracy difference).
/// Under the null "no better on new conversations", each conversation's total
/// is as likely to be `T_g` as `-T_g` (its effect is drawn from a distribution
/// symmetric about 0, and on each discordant question improvement and
/// regression are then equally likely), so every sign vector `s` gives an
/// equally likely `sum_g s_g T_g`. The one-sided p-value is the share of sign
/// vectors whose statistic is at least the observed one; it is exact whatever
/// the conversations' sizes, discordance rates and effects' spread, and
/// needs no variance estimate (with 8 conversations the smallest p-value is
/// 2^-8 = 0.0039). Up to [`EXACT_SIGN_FLIPS_UP_TO`] conversations every sign
/// vector is enumerated; beyond, [`SIGN_FLIP_DRAWS`] seeded random ones
/// give `p = (1 + hits) / (draws + 1)`, a valid p-value.
///
/// `lower_bound` inverts the same test: the supremum of the shifts `delta`
/// for which the test of "the accuracy difference is `delta`" (totals
/// `T_g - delta * n_g`) still rejects at `alpha`. Flipping the conversations
/// of a set F reaches the observed statistic exactly when
/// `delta >= r_F = sum_F T_g / sum_F n_g`, so the bound is an order
/// statistic of the `r_F` (the `floor(alpha * N)`-th smallest of the N - 1
/// non-empty sets); it is above 0 exactly when the test rejects. When even
/// the smallest p-value exceeds `alpha` (fewer than `log2(1 / alpha)`
/// conversations) there is no bound and it is -1, the trivial one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConversationTest {
    /// Conversations in the confirm part.
    pub conversations: usize,
    /// The accuracy difference over the confirm questions.
    pub estimate: f64,
    /// One-sided `1 - alpha` lower confidence bound of the accuracy difference
    /// (the inverted sign-flip test); -1 when there is none.
    pub lower_bound: f64,
    /// One-sided p-value for "better"; 1 below [`MIN_CLUSTERS`] conversations.
    pub p_value: f64,
    pub alpha: f64,
    /// `p_value <= alpha` and `estimate > 0`; false below [`MIN_CLUSTERS`] conversations.
    pub better: bool,
}

/// The sign-flip test of [`ConversationTest`] on `(conversation, d)` pairs,
/// d in {-1, 0, 1}, one per confirm question, at `alpha`.
///
/// # Panics
/// If `alpha` is not in (0, 1).
pub fn conversation_test<'a>(diffs: impl IntoIterator<Item = (&'a str, i8)>, alpha: f64) -> ConversationTest {
    assert!(alpha > 0.0 && alpha < 1.0, "alpha must be in (0, 1), got {alpha}");
    let mut clusters: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
    for (c, d) in diffs {
        let e = clusters.entry(c).or_default();
        e.0 += i64::from(d);
        e.1 += 1;
    }
    let (totals, sizes): (Vec<f64>, Vec<f64>) = clusters.into_values().map(|(t, n)| (t as f64, n as f64)).unzip();
    let g = totals.len();
    let n: f64 = sizes.iter().sum();
    let estimate = if n > 0.0 { totals.iter().sum::<f64>() / n } else { 0.0 };
    if g < MIN_CLUSTERS {
        return ConversationTest { conversations: g, estimate, lower_bound: -1.0, p_value: 1.0, alpha, better: false };
    }
    let flips = sign_flips(&totals, &sizes);
    let p_value = flips.p_value();
    let lower_bound = flips.lower_bound(alpha).unwrap_or(-1.0);
    ConversationTest {
        conversations: g,
        estimate,
        lower_bound: lower_bound.clamp(-1.0, 1.0),
        p_value,
        alpha,
        better: p_value <= alpha && estimate > 0.0,
    }
}

/// A flipped set's mean at most this far above 0 still reaches the observed
/// statistic: a tie, counted against the candidate. Totals that are integers
/// (accuracy differences) give means 0 or at least `1 / n` away from it, so
/// this only absorbs the rounding of sums of real-valued differences
/// ([`crate::utility_test`]).
const TIE: f64 = 1e-12;

/// The sign vectors of a sign-flip test, each as the set F of flipped
/// units: `r_F = sum_F T / sum_F n` for each non-empty F, `always`
/// the empty sets (which reach any observed statistic; 1 for the observed
/// data itself, plus any empty draw), `count` the number of sign vectors.
pub(crate) struct SignFlips {
    ratios: Vec<f64>,
    always: usize,
    pub(crate) count: usize,
}

impl SignFlips {
    /// The share of sign vectors whose statistic `sum_g s_g T_g` is at least
    /// the observed one: those whose flipped totals sum to at most 0.
    pub(crate) fn p_value(&self) -> f64 {
        let hits = self.always + self.ratios.iter().filter(|&&r| r <= TIE).count();
        hits as f64 / self.count as f64
    }

    /// The inverted test's `1 - alpha` lower bound of the mean per unit of
    /// size: the `k`-th smallest `r_F`, `k = floor(alpha * count) - always`
    /// (the test of a shift `delta` rejects while `#{r_F <= delta} <= k`);
    /// `None` when no shift can be rejected.
    pub(crate) fn lower_bound(self, alpha: f64) -> Option<f64> {
        let allowed = (alpha * self.count as f64).floor() as i64 - self.always as i64;
        let mut ratios = self.ratios;
        if allowed < 0 || ratios.is_empty() {
            return None;
        }
        let k = (allowed as usize).min(ratios.len() - 1);
        Some(*ratios.select_nth_unstable_by(k, f64::total_cmp).1)
    }
}

/// Every sign vector of `totals` (with `sizes`) up to
/// [`EXACT_SIGN_FLIPS_UP_TO`] units, else [`SIGN_FLIP_DRAWS`] seeded ones:
/// one `u64` per 64 units, bit j set when unit j is flipped. Sums of
/// integers in f64 are exact, so integer totals give the same ratios
/// whatever the order of the additions.
pub(crate) fn sign_flips(totals: &[f64], sizes: &[f64]) -> SignFlips {
    let g = totals.len();
    if g <= EXACT_SIGN_FLIPS_UP_TO {
        // Every subset: its sums from the subset without its lowest member.
        let count = 1usize << g;
        let (mut t, mut n) = (vec![0f64; count], vec![0f64; count]);
        let mut ratios = Vec::with_capacity(count - 1);
        for mask in 1..count {
            let (low, rest) = (mask.trailing_zeros() as usize, mask & (mask - 1));
            t[mask] = t[rest] + totals[low];
            n[mask] = n[rest] + sizes[low];
            ratios.push(t[mask] / n[mask]);
        }
        return SignFlips { ratios, always: 1, count };
    }
    let tables = byte_tables(totals, sizes);
    let words = g.div_ceil(64);
    let mut rng = ChaCha8Rng::seed_from_u64(SIGN_FLIP_SEED);
    let mut ratios = Vec::with_capacity(SIGN_FLIP_DRAWS);
    let mut always = 1;
    for _ in 0..SIGN_FLIP_DRAWS {
        let (mut t, mut n) = (0f64, 0f64);
        for w in 0..words {
            let bits: u64 = rng.random();
            let bytes = (g - 64 * w).min(64).div_ceil(8);
            for (b, table) in tables[8 * w..8 * w + bytes].iter().enumerate() {
                let (tb, nb) = table[(bits >> (8 * b) & 0xff) as usize];
                t += tb;
                n += nb;
            }
        }
        if n == 0.0 {
            always += 1;
        } else {
            ratios.push(t / n);
        }
    }
    SignFlips { ratios, always, count: SIGN_FLIP_DRAWS + 1 }
}

/// For each run of 8 units, the (total, size) sums of the flipped ones for
/// each of the 256 values of their byte of a draw's bits.
fn byte_tables(totals: &[f64], sizes: &[f64]) -> Vec<[(f64, f64); 256]> {
    totals
        .chunks(8)
        .zip(sizes.chunks(8))
        .map(|(tw, nw)| {
            let mut table = [(0f64, 0f64); 256];
            for mask in 1..256usize {
                let (low, rest) = (mask.trailing_zeros() as usize, mask & (mask - 1));
                let (t, n) = table[rest];
                table[mask] = if low < tw.len() { (t + tw[low], n + nw[low]) } else { (t, n) };
            }
            table
        })
        .collect()
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
        // V = (1.96/0.7 + 0.16/0.8 + 0.36/0.8 + 2.56/0.7) / 100 = 0.0710714...
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

    #[test]
    fn identical_positive_clusters_get_the_sign_test_p_value_not_zero() {
        // Every cluster +1 of 4 questions: the CR2 variance is 0; with 4 clusters
        // that is 1/16, not p = 0, and not better at 0.05.
        let d: Vec<(&str, i8)> =
            ["a", "b", "c", "d"].iter().flat_map(|&c| [(c, 1i8), (c, 0), (c, 0), (c, 0)]).collect();
        let ClusterCheck::Tested { std_error, p_value, better, .. } = cluster_check(d.iter().copied(), 0.05) else {
            panic!("four clusters")
        };
        assert_eq!((std_error, p_value, better), (0.0, 0.0625, false));
        assert_eq!(conversation_test(d.iter().copied(), 0.05).p_value, 0.0625);
        // Six such clusters: 1/64 = 0.0156, better at 0.05 but not at 0.0152.
        let six: Vec<(&str, i8)> =
            ["a", "b", "c", "d", "e", "f"].iter().flat_map(|&c| [(c, 1i8), (c, 0), (c, 0), (c, 0)]).collect();
        assert!(cluster_check(six.iter().copied(), 0.05).better());
        assert!(!cluster_check(six.iter().copied(), 0.0152).better());
        // All clusters identical and not positive: p = 1.
        let zero: Vec<(&str, i8)> = ["a", "b", "c", "d"].iter().map(|&c| (c, 0i8)).collect();
        let ClusterCheck::Tested { p_value, .. } = cluster_check(zero.iter().copied(), 0.05) else { panic!() };
        assert_eq!(p_value, 1.0);
    }

    /// Six conversations of 10 questions with totals 2, 3, 1, 4, 2, -1.
    fn six_conversations() -> Vec<(&'static str, i8)> {
        let mut d = Vec::new();
        for (c, t) in [("a", 2i8), ("b", 3), ("c", 1), ("d", 4), ("e", 2), ("f", -1)] {
            let sign = t.signum();
            d.extend(std::iter::repeat_n((c, sign), t.unsigned_abs() as usize));
            d.extend(std::iter::repeat_n((c, 0i8), 10 - t.unsigned_abs() as usize));
        }
        d
    }

    #[test]
    fn conversation_test_matches_a_hand_count_of_sign_flips() {
        // Flipping a set F of conversations reaches the observed sum 11 when
        // F's totals sum to at most 0: {}, {f}, {c, f}. p = 3/64.
        let t = conversation_test(six_conversations(), 0.05);
        assert_eq!(t.conversations, 6);
        assert!((t.estimate - 11.0 / 60.0).abs() < 1e-12);
        assert_eq!(t.p_value, 3.0 / 64.0);
        assert!(t.better);
        // The bound: r_F = sum_F T / sum_F n in increasing order starts -0.1
        // ({f}), 0 ({c, f}), 0.05 ({a, f}, {e, f}); the test at delta rejects
        // while 1 + #{r_F <= delta} <= 0.05 * 64 = 3.2, so up to delta < 0.05.
        assert!((t.lower_bound - 0.05).abs() < 1e-12, "{t:?}");
        // At 0.0152 (< 1/64) no shift can be rejected: no verdict, the trivial bound.
        let strict = conversation_test(six_conversations(), 0.0152);
        assert_eq!((strict.better, strict.lower_bound), (false, -1.0));
        // Below MIN_CLUSTERS: no verdict whatever the differences.
        let three = conversation_test([("a", 1i8), ("b", 1), ("c", 1)], 0.5);
        assert_eq!((three.p_value, three.better, three.conversations), (1.0, false, 3));
    }

    /// P(sum_F T <= 0) over uniform subsets F of `plus` conversations of total
    /// +1 and `minus` of total -1: sum over a <= b of C(plus, a) C(minus, b) / 2^G.
    fn plus_minus_p(plus: u32, minus: u32) -> f64 {
        let choose = |n: u32, k: u32| (0..k).fold(1u64, |acc, i| acc * u64::from(n - i) / u64::from(i + 1));
        let hits: u64 = (0..=plus).flat_map(|a| (a..=minus).map(move |b| choose(plus, a) * choose(minus, b))).sum();
        hits as f64 / 2f64.powi((plus + minus) as i32)
    }

    fn plus_minus(plus: usize, minus: usize) -> Vec<(String, i8)> {
        (0..plus + minus).map(|k| (format!("c{k:02}"), if k < plus { 1 } else { -1 })).collect()
    }

    #[test]
    fn exact_enumeration_and_seeded_draws_agree_with_the_binomial_count() {
        // 16 conversations: enumerated, exact to rounding.
        let d = plus_minus(11, 5);
        let exact = conversation_test(d.iter().map(|(c, x)| (c.as_str(), *x)), 0.05);
        assert!((exact.p_value - plus_minus_p(11, 5)).abs() < 1e-12, "{exact:?}");
        // 25 conversations: seeded draws, within 4 Monte Carlo SE, and the same twice.
        let d = plus_minus(17, 8);
        let drawn = conversation_test(d.iter().map(|(c, x)| (c.as_str(), *x)), 0.05);
        let truth = plus_minus_p(17, 8);
        let se = (truth * (1.0 - truth) / SIGN_FLIP_DRAWS as f64).sqrt();
        assert!((drawn.p_value - truth).abs() < 4.0 * se, "{} vs {truth}", drawn.p_value);
        assert_eq!(drawn, conversation_test(d.iter().map(|(c, x)| (c.as_str(), *x)), 0.05));
        assert_eq!(drawn.better, drawn.lower_bound > 0.0);
    }

    #[test]
    fn the_bound_is_positive_exactly_when_the_test_says_better() {
        use rand::rngs::ChaCha8Rng;
        use rand::{RngExt, SeedableRng};
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let names: Vec<String> = (0..20).map(|k| format!("c{k}")).collect();
        for case in 0..300 {
            let g = 4 + case % 16;
            let shift = 0.3 * rng.random::<f64>();
            let mut d = Vec::new();
            for name in &names[..g] {
                for _ in 0..rng.random_range(3..30) {
                    let u: f64 = rng.random();
                    d.push((
                        name.as_str(),
                        if u < 0.2 + shift {
                            1i8
                        } else if u < 0.5 {
                            -1
                        } else {
                            0
                        },
                    ));
                }
            }
            for alpha in [0.05, 0.0152] {
                let t = conversation_test(d.iter().copied(), alpha);
                assert_eq!(t.better, t.lower_bound > 0.0, "case {case}, alpha {alpha}: {t:?}");
                assert!(t.lower_bound <= t.estimate + 1e-12, "case {case}: {t:?}");
            }
        }
    }
}
