//! Timing of one full confirm-test comparison (pairing, McNemar, bootstrap,
//! verdict) on two runs of 2,000 questions in 40 conversations, 10,000
//! resamples, for both resampling units. Plain `std::time`, median of 20 runs.
//! Target: at most 200 ms per comparison.
//!
//! `cargo bench -p emend-stats --bench stats`

use std::hint::black_box;
use std::time::{Duration, Instant};

use emend_stats::{BootstrapConfig, BootstrapUnit, CompareConfig, Outcome, Thresholds, compare};
use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};

const QUESTIONS: usize = 2_000;
const CONVERSATIONS: usize = 40;
const RUNS: usize = 20;

/// Two runs: baseline about 60% correct, the candidate improving 8% of the
/// questions and regressing 5%.
fn runs() -> (Vec<Outcome>, Vec<Outcome>) {
    let mut rng = ChaCha8Rng::seed_from_u64(2024);
    let mut base = Vec::with_capacity(QUESTIONS);
    let mut cand = Vec::with_capacity(QUESTIONS);
    for i in 0..QUESTIONS {
        let u: f64 = rng.random();
        let (b, c) = match u {
            u if u < 0.08 => (false, true),
            u if u < 0.13 => (true, false),
            u if u < 0.13 + 0.87 * 0.6 => (true, true),
            _ => (false, false),
        };
        let o = Outcome {
            id: format!("q{i:05}"),
            conversation: Some(format!("conv-{:02}", i % CONVERSATIONS)),
            category: ["single-hop", "multi-hop", "temporal", "open-domain"][i % 4].to_string(),
            correct: b,
        };
        cand.push(Outcome { correct: c, ..o.clone() });
        base.push(o);
    }
    (base, cand)
}

fn main() {
    let (base, cand) = runs();
    println!("stats bench: {QUESTIONS} questions, {CONVERSATIONS} conversations, 10000 resamples, median of {RUNS}");
    for unit in [BootstrapUnit::Question, BootstrapUnit::Conversation] {
        let config = CompareConfig {
            thresholds: Thresholds::default(),
            bootstrap: BootstrapConfig { unit, resamples: 10_000, seed: 0, level: 0.95 },
        };
        let mut times: Vec<Duration> = (0..RUNS)
            .map(|_| {
                let start = Instant::now();
                let c = compare(black_box(&base), black_box(&cand), &config, None).expect("bench runs compare");
                black_box(&c);
                start.elapsed()
            })
            .collect();
        times.sort();
        let c = compare(&base, &cand, &config, None).unwrap();
        println!(
            "  unit {:<12} median {:>8.2?}  min {:>8.2?}  max {:>8.2?}   (delta {:+.4}, CI [{:+.4}, {:+.4}], accept {})",
            unit.name(),
            times[RUNS / 2],
            times[0],
            times[RUNS - 1],
            c.paired.delta(),
            c.bootstrap.low,
            c.bootstrap.high,
            c.verdict.accept
        );
    }
}
