//! Calibration and power of the confirm test, by simulation.
//!
//! Under the null (the candidate is no better: P(improved) = P(regressed)) the
//! gate must accept at most alpha of the time, up to Monte Carlo error; under a
//! real improvement it should usually accept. Every simulation is seeded.
//!
//! Speed: accepting needs every rule to pass, so when `|I| > |R|` or McNemar
//! already fails the verdict is a rejection whatever the interval, and the
//! (costly) bootstrap is skipped. `skipping_the_bootstrap_does_not_change_the_verdict`
//! checks that shortcut against the full verdict.

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

use super::bootstrap::{BootstrapConfig, BootstrapUnit, paired_bootstrap};
use super::mcnemar::mcnemar;
use super::pairing::{Outcome, pair};
use super::verdict::{Thresholds, verdict};

const ALPHA: f64 = 0.05;
const THRESHOLDS: Thresholds = Thresholds { alpha: ALPHA, category_drop_max: 0.02, cost_bound: None };
const CATEGORIES: usize = 4;

/// One simulated setting: per-question probabilities of improved and
/// regressed; the rest is both-correct (60%) or both-wrong (40%).
#[derive(Clone, Copy)]
struct Setting {
    n: usize,
    p_improved: f64,
    p_regressed: f64,
    /// Conversations of `cluster_size` questions whose (I, R) probabilities are
    /// swapped at random per conversation: null on average, correlated within.
    cluster_size: Option<usize>,
}

#[derive(Default)]
struct Rates {
    sims: usize,
    mcnemar_rejects: usize,
    accepts: usize,
}

impl Rates {
    fn rate(count: usize, sims: usize) -> f64 {
        count as f64 / sims as f64
    }
    fn accept_rate(&self) -> f64 {
        Rates::rate(self.accepts, self.sims)
    }
    fn mcnemar_rate(&self) -> f64 {
        Rates::rate(self.mcnemar_rejects, self.sims)
    }
}

/// alpha + 3 Monte Carlo standard errors of a rate alpha estimated from `sims` runs.
fn bound(sims: usize) -> f64 {
    ALPHA + 3.0 * (ALPHA * (1.0 - ALPHA) / sims as f64).sqrt()
}

fn simulate(setting: Setting, sims: usize, unit: BootstrapUnit, resamples: u32, seed: u64) -> Rates {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let template: Vec<Outcome> = (0..setting.n)
        .map(|i| Outcome {
            id: format!("q{i:05}"),
            conversation: Some(format!("c{:04}", i / setting.cluster_size.unwrap_or(1))),
            category: format!("cat{}", i % CATEGORIES),
            correct: false,
        })
        .collect();
    let (mut base, mut cand) = (template.clone(), template);
    let mut words = vec![0u32; setting.n];
    // Cumulative probabilities as 32-bit thresholds: one word per question.
    let scale = |p: f64| (p * 2f64.powi(32)) as u64;
    let mut rates = Rates { sims, ..Rates::default() };
    for sim in 0..sims {
        rng.fill(&mut words[..]);
        let mut swapped = false;
        for (i, &word) in words.iter().enumerate() {
            if let Some(size) = setting.cluster_size
                && i.is_multiple_of(size)
            {
                swapped = rng.random::<bool>();
            }
            let (pi, pr) = if swapped {
                (setting.p_regressed, setting.p_improved)
            } else {
                (setting.p_improved, setting.p_regressed)
            };
            let concordant = 1.0 - pi - pr;
            let u = u64::from(word);
            let (b, c) = if u < scale(pi) {
                (false, true)
            } else if u < scale(pi + pr) {
                (true, false)
            } else if u < scale(pi + pr + 0.6 * concordant) {
                (true, true)
            } else {
                (false, false)
            };
            base[i].correct = b;
            cand[i].correct = c;
        }
        let paired = pair(&base, &cand).unwrap();
        let (improved, regressed) = (paired.improved().len() as u64, paired.regressed().len() as u64);
        let m = mcnemar(improved, regressed);
        if m.p_value < ALPHA {
            rates.mcnemar_rejects += 1;
        }
        if improved > regressed && m.p_value < ALPHA {
            let config = BootstrapConfig { unit, resamples, seed: sim as u64, level: 0.95 };
            let ci = paired_bootstrap(&paired, &config).unwrap();
            if verdict(&paired, &m, &ci, &THRESHOLDS, None).accept {
                rates.accepts += 1;
            }
        }
    }
    rates
}

fn null(n: usize, discordance: f64) -> Setting {
    Setting { n, p_improved: discordance / 2.0, p_regressed: discordance / 2.0, cluster_size: None }
}

/// `resamples`: fewer than the gate's 10,000 to keep debug builds fast; the
/// 2.5% quantile is noisier, not biased, so the rate barely moves.
fn check_null(setting: Setting, sims: usize, resamples: u32, seed: u64) {
    let rates = simulate(setting, sims, BootstrapUnit::Question, resamples, seed);
    let limit = bound(sims);
    println!(
        "null n={} discordance={:.2}: false-accept {:.4}, McNemar alone {:.4} (limit {limit:.4}, {sims} sims, {resamples} resamples)",
        setting.n,
        setting.p_improved * 2.0,
        rates.accept_rate(),
        rates.mcnemar_rate()
    );
    assert!(rates.accept_rate() <= limit, "verdict false-accept rate {} > {limit}", rates.accept_rate());
    assert!(rates.mcnemar_rate() <= limit, "McNemar rejection rate {} > {limit}", rates.mcnemar_rate());
}

#[test]
fn null_n200_discordance_5pct() {
    check_null(null(200, 0.05), 1000, 500, 11);
}

#[test]
fn null_n200_discordance_20pct() {
    check_null(null(200, 0.20), 1000, 500, 12);
}

#[test]
fn null_n1000_discordance_5pct() {
    check_null(null(1000, 0.05), 1000, 200, 13);
}

#[test]
fn null_n1000_discordance_20pct() {
    check_null(null(1000, 0.20), 1000, 200, 14);
}

/// Questions that share a conversation are correlated; McNemar assumes they are
/// not and rejects far too often. The conversation-unit interval is what keeps
/// the gate calibrated then.
#[test]
fn clustered_null_needs_the_conversation_unit() {
    let setting = Setting { n: 1000, p_improved: 0.15, p_regressed: 0.05, cluster_size: Some(25) };
    let sims = 1000;
    let rates = simulate(setting, sims, BootstrapUnit::Conversation, 500, 15);
    let limit = bound(sims);
    println!(
        "clustered null (40 conversations of 25): false-accept {:.4} (conversation unit), McNemar alone {:.4} (limit {limit:.4})",
        rates.accept_rate(),
        rates.mcnemar_rate()
    );
    assert!(rates.accept_rate() <= limit, "verdict false-accept rate {} > {limit}", rates.accept_rate());
    assert!(
        rates.mcnemar_rate() > 2.0 * ALPHA,
        "expected McNemar to be anti-conservative here: {}",
        rates.mcnemar_rate()
    );
}

/// +5pp (P(I) = 10%, P(R) = 5%) at n = 762, the size of a full locked set.
fn power(sims: usize, resamples: u32) -> f64 {
    let setting = Setting { n: 762, p_improved: 0.10, p_regressed: 0.05, cluster_size: None };
    let rates = simulate(setting, sims, BootstrapUnit::Question, resamples, 16);
    println!(
        "power at +5pp, n=762, discordance 15%: accept {:.3}, McNemar alone {:.3} ({sims} sims, {resamples} resamples)",
        rates.accept_rate(),
        rates.mcnemar_rate()
    );
    rates.accept_rate()
}

#[test]
fn power_at_plus_5pp_quick() {
    assert!(power(50, 200) > 0.5);
}

#[test]
#[ignore = "slow in debug builds; power_at_plus_5pp_quick runs by default"]
fn power_at_plus_5pp_full() {
    assert!(power(1000, 1000) > 0.5);
}

#[test]
fn skipping_the_bootstrap_does_not_change_the_verdict() {
    // Small n and a null, so that many simulations fail McNemar: the full
    // verdict must reject each of them too.
    let mut rng = ChaCha8Rng::seed_from_u64(17);
    let mut skipped = 0;
    for sim in 0..200 {
        let (base, cand): (Vec<_>, Vec<_>) = (0..60)
            .map(|i| {
                let o = Outcome {
                    id: format!("q{i}"),
                    conversation: None,
                    category: format!("c{}", i % 3),
                    correct: rng.random(),
                };
                (o.clone(), Outcome { correct: rng.random(), ..o })
            })
            .unzip();
        let paired = pair(&base, &cand).unwrap();
        let m = mcnemar(paired.improved().len() as u64, paired.regressed().len() as u64);
        let ci =
            paired_bootstrap(&paired, &BootstrapConfig { resamples: 100, seed: sim, ..BootstrapConfig::default() })
                .unwrap();
        let full = verdict(&paired, &m, &ci, &THRESHOLDS, None).accept;
        if !(paired.improved().len() > paired.regressed().len() && m.p_value < ALPHA) {
            skipped += 1;
            assert!(!full);
        }
    }
    assert!(skipped > 150, "{skipped}");
}
