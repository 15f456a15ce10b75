//! The confirm test under longitudinal replay, simulated under the null.
//!
//! A replay of 5 conversations with 150 confirm probes, each observed at 2 to
//! 8 checkpoints (from its eligibility to its conversation's end). Under the
//! null the two strategies are exchangeable per probe and strongly
//! correlated across a probe's checkpoints: a probe is discordant with
//! probability `q`, and when it is, one strategy (either, with probability
//! 1/2) answers it right from a random checkpoint on and the other does not;
//! independently, each observation flips for both strategies' correctness
//! symmetric noise (an observation-level discordance of a few percent, again
//! either way with probability 1/2).
//!
//! The observation-level test (every observation an independent pair, the
//! gate's test before the probe became its unit) over-rejects; the
//! probe-level test ([`better_test_by_probe`]) stays within alpha, at 0.05
//! and at LORD++'s first alpha (0.0152). Bounds are checked at the nominal
//! value plus 3 Monte Carlo standard errors, as in `sim.rs`.

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

use super::onesided::better_p_value;
use super::pairing::{Outcome, pair};
use super::probe::better_test_by_probe;

fn mc_bound(alpha: f64, reps: usize) -> f64 {
    alpha + 3.0 * (alpha * (1.0 - alpha) / reps as f64).sqrt()
}

/// One replay's (served, candidate) outcomes under the null.
fn null_replay(rng: &mut ChaCha8Rng, probes: usize, q: f64, noise: f64) -> (Vec<Outcome>, Vec<Outcome>) {
    let (mut base, mut cand) = (Vec::new(), Vec::new());
    for p in 0..probes {
        let conversation = format!("c{}", p % 5);
        let checkpoints = rng.random_range(2..=8u32);
        let right = rng.random_bool(0.5);
        let discordant = rng.random_bool(q);
        let from = rng.random_range(1..=checkpoints);
        let cand_wins = rng.random_bool(0.5);
        for k in 1..=checkpoints {
            let (mut b, mut c) = (right, right);
            if discordant && k >= from {
                (b, c) = (!cand_wins, cand_wins);
            }
            if rng.random_bool(noise) {
                if rng.random_bool(0.5) {
                    c = !c;
                } else {
                    b = !b;
                }
            }
            let o = Outcome {
                id: format!("{conversation}#{p}@{k}"),
                conversation: Some(conversation.clone()),
                category: "x".into(),
                correct: b,
            };
            cand.push(Outcome { correct: c, ..o.clone() });
            base.push(o);
        }
    }
    (base, cand)
}

#[test]
fn under_replay_the_probe_level_test_keeps_its_level_and_the_observation_level_test_does_not() {
    let reps = 4000;
    for (q, noise) in [(0.15, 0.02), (0.30, 0.05)] {
        let mut rng = ChaCha8Rng::seed_from_u64(2026 + (q * 100.0) as u64);
        let alphas = [0.05, 0.0152];
        let (mut by_obs, mut by_probe) = ([0usize; 2], [0usize; 2]);
        for _ in 0..reps {
            let (base, cand) = null_replay(&mut rng, 150, q, noise);
            let paired = pair(&base, &cand).unwrap();
            let obs_p = better_p_value(paired.improved().len() as u64, paired.regressed().len() as u64);
            let probe_p = better_test_by_probe(&paired, 0.05).p_value;
            for (i, &alpha) in alphas.iter().enumerate() {
                by_obs[i] += usize::from(obs_p <= alpha);
                by_probe[i] += usize::from(probe_p <= alpha);
            }
        }
        for (i, &alpha) in alphas.iter().enumerate() {
            let (o, p) = (by_obs[i] as f64 / reps as f64, by_probe[i] as f64 / reps as f64);
            eprintln!("replay null q {q} noise {noise}: alpha {alpha}: by observation {o:.4}, by probe {p:.4}");
            assert!(p <= mc_bound(alpha, reps), "q {q}, alpha {alpha}: probe-level false-accept rate {p}");
            assert!(
                o > mc_bound(alpha, reps),
                "q {q}, alpha {alpha}: the observation-level test should over-reject: {o}"
            );
        }
    }
}
