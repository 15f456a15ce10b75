//! Paired bootstrap confidence interval of the accuracy difference.
//!
//! Resampling keeps each question's baseline and candidate outcomes together,
//! so only the per-question difference `d = cand - base` in {-1, 0, 1} matters.
//!
//! - Unit `question`: resample the n pairs with replacement; a resample's delta
//!   is `sum(d) / n`.
//! - Unit `conversation` (cluster bootstrap): questions of one conversation are
//!   not independent (same memory, same retrieval failures), so resample whole
//!   conversations with replacement, as many as there are; a resample's delta is
//!   `(sum cand - sum base) / (questions drawn)`. It is NOT guaranteed to be
//!   wider than the question interval: with few conversations (5 on the dev
//!   set) a percentile cluster bootstrap can be narrower, and "the interval
//!   excludes zero" then fires more often than its level under the null. Do
//!   not gate on it; for a cluster-level check use `cluster_check` (CR2 with
//!   Bell-McCaffrey degrees of freedom), which says when there are too few clusters to tell.
//!
//! The interval is the percentile interval at `level` (type-7 quantiles, linear
//! interpolation between order statistics, as numpy's default). The generator
//! is ChaCha8 seeded from the caller's seed: same inputs and seed, same interval.
//!
//! Speed: the data are reduced before resampling to I, R and n (question unit)
//! or to one `(sum d, size)` per conversation, and the resampling loop does not
//! allocate; only the vector of resampled deltas is allocated, once.

use std::collections::BTreeMap;
use std::fmt;

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use serde::{Deserialize, Serialize};

use super::pairing::Paired;
use super::probe::probe_of;

/// What is resampled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BootstrapUnit {
    /// Question pairs, independently.
    #[default]
    Question,
    /// Whole conversations (cluster bootstrap).
    Conversation,
    /// Whole probe trajectories under longitudinal replay: every observation
    /// of a probe (ids `<probe>@<checkpoint>`) is drawn together.
    Trajectory,
}

impl BootstrapUnit {
    /// The serialized name (`question`, `conversation`).
    pub fn name(self) -> &'static str {
        match self {
            BootstrapUnit::Question => "question",
            BootstrapUnit::Conversation => "conversation",
            BootstrapUnit::Trajectory => "trajectory",
        }
    }
}

impl fmt::Display for BootstrapUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How to bootstrap.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BootstrapConfig {
    pub unit: BootstrapUnit,
    pub resamples: u32,
    pub seed: u64,
    /// Two-sided confidence level, in (0, 1).
    pub level: f64,
}

impl Default for BootstrapConfig {
    /// Question unit, 10,000 resamples, seed 0, 95%.
    fn default() -> Self {
        BootstrapConfig { unit: BootstrapUnit::Question, resamples: 10_000, seed: 0, level: 0.95 }
    }
}

/// A percentile bootstrap interval of `cand accuracy - base accuracy`, with
/// everything needed to reproduce it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BootstrapCi {
    pub unit: BootstrapUnit,
    pub resamples: u32,
    pub seed: u64,
    pub level: f64,
    /// Number of resampling units (questions or conversations).
    pub units: usize,
    /// The observed difference (not a bootstrap mean).
    pub delta: f64,
    pub low: f64,
    pub high: f64,
}

/// Why a bootstrap cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BootstrapError {
    #[error("the bootstrap needs at least one resample")]
    NoResamples,
    #[error("confidence level {0} is not strictly between 0 and 1")]
    InvalidLevel(f64),
    #[error("question {id:?} has no conversation; the conversation unit needs one on every question")]
    MissingConversation { id: String },
    #[error("{0} resampling units is more than the bootstrap supports ({max})", max = u32::MAX)]
    TooLarge(usize),
}

/// Bootstraps the accuracy difference of `paired` as `config` says.
pub fn paired_bootstrap(paired: &Paired, config: &BootstrapConfig) -> Result<BootstrapCi, BootstrapError> {
    if config.resamples == 0 {
        return Err(BootstrapError::NoResamples);
    }
    if !(config.level > 0.0 && config.level < 1.0) {
        return Err(BootstrapError::InvalidLevel(config.level));
    }
    let mut draws = Draws::new(config.seed);
    let mut deltas = Vec::with_capacity(config.resamples as usize);
    let units = match config.unit {
        BootstrapUnit::Question => {
            let n = to_u32(paired.n())?;
            let improved = paired.improved().len() as u32;
            let regressed = paired.regressed().len() as u32;
            // Resampling pairs only needs the multiset of d values: lay it out as
            // I ones, then R minus ones, then zeros, and draw positions.
            for _ in 0..config.resamples {
                let mut sum: i64 = 0;
                for _ in 0..n {
                    let u = draws.below(n);
                    // Branch-free: +1 below I, -1 in [I, I + R) (the wrapping
                    // subtraction sends u < I far above R).
                    sum += i64::from(u < improved) - i64::from(u.wrapping_sub(improved) < regressed);
                }
                deltas.push(sum as f64 / f64::from(n));
            }
            paired.n()
        }
        BootstrapUnit::Conversation | BootstrapUnit::Trajectory => {
            let clusters = clusters(paired, config.unit)?;
            let k = to_u32(clusters.len())?;
            for _ in 0..config.resamples {
                let (mut sum, mut size) = (0i64, 0i64);
                for _ in 0..k {
                    let (d, s) = clusters[draws.below(k) as usize];
                    sum += d;
                    size += s;
                }
                deltas.push(sum as f64 / size as f64);
            }
            clusters.len()
        }
    };
    deltas.sort_unstable_by(f64::total_cmp);
    let tail = (1.0 - config.level) / 2.0;
    Ok(BootstrapCi {
        unit: config.unit,
        resamples: config.resamples,
        seed: config.seed,
        level: config.level,
        units,
        delta: paired.delta(),
        low: quantile(&deltas, tail),
        high: quantile(&deltas, 1.0 - tail),
    })
}

/// Uniform integers from a ChaCha8 stream seeded with the caller's seed.
///
/// The generator's words are taken a block at a time rather than one call per
/// draw, and bounded with Lemire's multiply-and-reject (unbiased): the
/// resampling loop then costs a multiply and a compare per draw.
struct Draws {
    rng: ChaCha8Rng,
    words: [u32; Draws::WORDS],
    next: usize,
}

impl Draws {
    const WORDS: usize = 256;

    fn new(seed: u64) -> Self {
        Draws { rng: ChaCha8Rng::seed_from_u64(seed), words: [0; Draws::WORDS], next: Draws::WORDS }
    }

    #[inline]
    fn word(&mut self) -> u32 {
        if self.next == Draws::WORDS {
            self.rng.fill(&mut self.words[..]);
            self.next = 0;
        }
        let w = self.words[self.next];
        self.next += 1;
        w
    }

    /// Uniform in `0..n`, `n > 0`.
    #[inline]
    fn below(&mut self, n: u32) -> u32 {
        let mut m = u64::from(self.word()) * u64::from(n);
        if (m as u32) < n {
            // Reject the low words that would over-represent some results:
            // 2^32 mod n of them.
            let threshold = n.wrapping_neg() % n;
            while (m as u32) < threshold {
                m = u64::from(self.word()) * u64::from(n);
            }
        }
        (m >> 32) as u32
    }
}

fn to_u32(units: usize) -> Result<u32, BootstrapError> {
    u32::try_from(units).map_err(|_| BootstrapError::TooLarge(units))
}

/// `(sum of d, number of questions)` per conversation, in conversation-id order.
fn clusters(paired: &Paired, unit: BootstrapUnit) -> Result<Vec<(i64, i64)>, BootstrapError> {
    let mut by_conversation: BTreeMap<&str, (i64, i64)> = BTreeMap::new();
    for p in paired.pairs() {
        let conversation = match unit {
            BootstrapUnit::Trajectory => probe_of(&p.id),
            _ => p.conversation.as_deref().ok_or_else(|| BootstrapError::MissingConversation { id: p.id.clone() })?,
        };
        let c = by_conversation.entry(conversation).or_default();
        c.0 += p.d();
        c.1 += 1;
    }
    Ok(by_conversation.into_values().collect())
}

/// Type-7 quantile of sorted, non-empty `xs`.
fn quantile(xs: &[f64], q: f64) -> f64 {
    let h = (xs.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(xs.len() - 1);
    xs[lo] + (h - lo as f64) * (xs[hi] - xs[lo])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pairing::{Outcome, pair};
    use crate::testdata::{outcomes_with, paired_counts};

    fn config(unit: BootstrapUnit, resamples: u32, seed: u64) -> BootstrapConfig {
        BootstrapConfig { unit, resamples, seed, level: 0.95 }
    }

    #[test]
    fn same_seed_same_interval_other_seed_other_interval() {
        let p = paired_counts(30, 15, 100, 55);
        let a = paired_bootstrap(&p, &config(BootstrapUnit::Question, 2000, 7)).unwrap();
        let b = paired_bootstrap(&p, &config(BootstrapUnit::Question, 2000, 7)).unwrap();
        assert_eq!(a, b);
        assert_eq!((a.unit, a.resamples, a.seed, a.level, a.units), (BootstrapUnit::Question, 2000, 7, 0.95, 200));
        assert_eq!(a.delta, 0.075);
        assert!(a.low < a.delta && a.delta < a.high, "{a:?}");
        // Question-unit deltas live on a lattice of 1/n, so two seeds can give
        // the same quantiles; five seeds giving one interval would mean the
        // seed is ignored.
        let large = paired_counts(75, 37, 250, 137);
        let intervals: Vec<_> = (1..=5)
            .map(|seed| {
                let ci = paired_bootstrap(&large, &config(BootstrapUnit::Question, 500, seed)).unwrap();
                (ci.low, ci.high)
            })
            .collect();
        assert!(intervals.iter().any(|x| *x != intervals[0]), "{intervals:?}");
        // Conversations of uneven sizes give ratio deltas off any lattice: a
        // different seed gives a different interval (almost surely).
        let (base, cand) = outcomes_with(30, 15, 100, 55, |i| Some(format!("c{}", (i * i) % 101)));
        let p = pair(&base, &cand).unwrap();
        let a = paired_bootstrap(&p, &config(BootstrapUnit::Conversation, 2000, 7)).unwrap();
        let b = paired_bootstrap(&p, &config(BootstrapUnit::Conversation, 2000, 7)).unwrap();
        let c = paired_bootstrap(&p, &config(BootstrapUnit::Conversation, 2000, 8)).unwrap();
        assert_eq!(a, b);
        assert!((a.low, a.high) != (c.low, c.high), "seeds 7 and 8: {a:?} {c:?}");
    }

    #[test]
    fn interval_matches_normal_approximation() {
        // Var(d) = (I + R)/n - delta^2; the 95% percentile interval should be
        // close to delta +- 1.96 sd / sqrt(n).
        let p = paired_counts(30, 15, 300, 155);
        let ci = paired_bootstrap(&p, &config(BootstrapUnit::Question, 2000, 1)).unwrap();
        let n = 500.0;
        let delta: f64 = 0.03;
        let sd = ((45.0 / n - delta * delta) / n).sqrt();
        assert!((ci.low - (delta - 1.96 * sd)).abs() < 0.2 * sd, "{ci:?} vs sd {sd}");
        assert!((ci.high - (delta + 1.96 * sd)).abs() < 0.2 * sd, "{ci:?} vs sd {sd}");
    }

    #[test]
    fn interval_narrows_as_n_grows() {
        let small = paired_counts(15, 5, 50, 30);
        let large = paired_counts(150, 50, 500, 300);
        let a = paired_bootstrap(&small, &config(BootstrapUnit::Question, 1000, 3)).unwrap();
        let b = paired_bootstrap(&large, &config(BootstrapUnit::Question, 1000, 3)).unwrap();
        assert_eq!(a.delta, b.delta);
        let (wa, wb) = (a.high - a.low, b.high - b.low);
        // Width scales as 1/sqrt(n): expect about sqrt(10) ~ 3.2 times narrower.
        assert!(wb < wa / 2.5, "n=100 width {wa}, n=1000 width {wb}");
    }

    #[test]
    fn one_giant_conversation_widens_the_cluster_interval() {
        // 200 singleton conversations with mixed outcomes, plus one conversation
        // of 200 questions the candidate all improved: correlated, so the
        // cluster bootstrap must be much less sure than the question bootstrap.
        let mut base = Vec::new();
        let mut cand = Vec::new();
        for i in 0..200 {
            let (b, c) = [(true, true), (false, false), (true, false), (false, true)][i % 4];
            base.push(Outcome {
                id: format!("s{i:03}"),
                conversation: Some(format!("c{i:03}")),
                category: "x".into(),
                correct: b,
            });
            cand.push(Outcome { correct: c, ..base[i].clone() });
        }
        for i in 0..200 {
            base.push(Outcome {
                id: format!("g{i:03}"),
                conversation: Some("giant".into()),
                category: "x".into(),
                correct: false,
            });
            cand.push(Outcome { correct: true, ..base.last().unwrap().clone() });
        }
        let p = pair(&base, &cand).unwrap();
        let q = paired_bootstrap(&p, &config(BootstrapUnit::Question, 2000, 5)).unwrap();
        let c = paired_bootstrap(&p, &config(BootstrapUnit::Conversation, 2000, 5)).unwrap();
        assert_eq!((q.units, c.units), (400, 201));
        assert!(c.high - c.low > 3.0 * (q.high - q.low), "question {q:?}, conversation {c:?}");
        // Without the giant in a resample the delta is about 0: the cluster
        // interval reaches down to (or below) zero, the question one does not.
        assert!(q.low > 0.4 && c.low < 0.2, "question {q:?}, conversation {c:?}");
    }

    #[test]
    fn cluster_unit_with_singleton_conversations_matches_question_unit() {
        let (base, cand) = outcomes_with(60, 20, 250, 170, |i| Some(format!("c{i}")));
        let p = pair(&base, &cand).unwrap();
        let q = paired_bootstrap(&p, &config(BootstrapUnit::Question, 2000, 9)).unwrap();
        let c = paired_bootstrap(&p, &config(BootstrapUnit::Conversation, 2000, 9)).unwrap();
        let w = q.high - q.low;
        assert!((c.low - q.low).abs() < 0.1 * w && (c.high - q.high).abs() < 0.1 * w, "{q:?} vs {c:?}");
    }

    #[test]
    fn conversation_unit_needs_every_conversation() {
        let (base, cand) = outcomes_with(3, 1, 4, 2, |i| (i != 5).then(|| "c".to_string()));
        let p = pair(&base, &cand).unwrap();
        let err = paired_bootstrap(&p, &config(BootstrapUnit::Conversation, 10, 0)).unwrap_err();
        assert!(matches!(err, BootstrapError::MissingConversation { .. }), "{err:?}");
    }

    #[test]
    fn bad_configs_are_refused() {
        let p = paired_counts(1, 1, 1, 1);
        assert_eq!(paired_bootstrap(&p, &config(BootstrapUnit::Question, 0, 0)), Err(BootstrapError::NoResamples));
        for level in [0.0, 1.0, -0.5, f64::NAN] {
            let c = BootstrapConfig { level, ..BootstrapConfig::default() };
            assert!(matches!(paired_bootstrap(&p, &c), Err(BootstrapError::InvalidLevel(_))));
        }
    }

    #[test]
    fn no_discordant_pairs_gives_a_zero_interval() {
        let p = paired_counts(0, 0, 10, 10);
        let ci = paired_bootstrap(&p, &config(BootstrapUnit::Question, 100, 0)).unwrap();
        assert_eq!((ci.low, ci.high), (0.0, 0.0));
    }

    #[test]
    fn draws_are_uniform_and_in_range() {
        let mut d = Draws::new(42);
        for n in [1u32, 2, 3, 7, 1000, u32::MAX] {
            for _ in 0..1000 {
                assert!(d.below(n) < n);
            }
        }
        // Chi-square goodness of fit over 10 cells, 100,000 draws: the 0.999
        // quantile of chi-square(9) is 27.9.
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            counts[d.below(10) as usize] += 1;
        }
        let chi: f64 = counts.iter().map(|&c| (f64::from(c) - 10_000.0).powi(2) / 10_000.0).sum();
        assert!(chi < 27.9, "{counts:?}: chi-square {chi}");
        // Same seed, same stream.
        let (mut a, mut b) = (Draws::new(3), Draws::new(3));
        assert!((0..1000).all(|_| a.below(1 << 20) == b.below(1 << 20)));
    }

    #[test]
    fn quantile_interpolates_like_numpy() {
        let xs = [1.0, 2.0, 3.0, 4.0];
        // numpy.quantile([1, 2, 3, 4], [0, 0.025, 0.5, 0.975, 1])
        for (q, want) in [(0.0, 1.0), (0.025, 1.075), (0.5, 2.5), (0.975, 3.925), (1.0, 4.0)] {
            assert!((quantile(&xs, q) - want).abs() < 1e-12, "q={q}");
        }
        assert_eq!(quantile(&[7.0], 0.3), 7.0);
    }

    #[test]
    fn trajectories_are_resampled_whole() {
        // 30 probes of 4 observations each, all four improved or all four unchanged:
        // by trajectory there are 30 units, and the interval is wider than by observation.
        let mut base = Vec::new();
        let mut cand = Vec::new();
        for p in 0..30 {
            for k in 1..=4 {
                let o = Outcome {
                    id: format!("c#{p}@{k}"),
                    conversation: Some("c".into()),
                    category: "x".into(),
                    correct: false,
                };
                cand.push(Outcome { correct: p % 3 == 0, ..o.clone() });
                base.push(o);
            }
        }
        let p = pair(&base, &cand).unwrap();
        let t = paired_bootstrap(&p, &config(BootstrapUnit::Trajectory, 2000, 4)).unwrap();
        let q = paired_bootstrap(&p, &config(BootstrapUnit::Question, 2000, 4)).unwrap();
        assert_eq!((t.units, q.units), (30, 120));
        assert!(t.high - t.low > q.high - q.low, "{t:?} vs {q:?}");
        assert_eq!(probe_of("c#1@12"), "c#1");
        assert_eq!(probe_of("c#1"), "c#1");
    }
}
