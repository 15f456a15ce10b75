//! The winner's curse of the confirm test, simulated: what the raw confirm
//! delta, [`adjusted_gain`] and the test's lower bound say about an accepted
//! candidate's true gain.
//!
//! Each draw is one confirm test on `n` questions at discordance q = 0.25:
//! `D ~ Bin(n, q)` discordant questions, `I ~ Bin(D, (q + gain) / (2 q))` of
//! them improved, tested at `alpha`. Among the accepted draws (at least 3,000
//! per row, fixed seeds; about 20 s in release) the table gives each number's mean and its bias
//! against the true gain, in points, with its Monte Carlo SE. Rows "best of
//! 4": four candidates of the same true gain are tested independently at the
//! same alpha and the passer with the highest raw delta is reported (a second
//! selection, which the adjustment does not model; in the gate the four share
//! the served strategy's answers and run at decreasing LORD++ alphas).
//!
//! Reproduce: `cargo test -p emend-stats --release sim_curse -- --nocapture`.
//! Measured (bias in pp, +- 1 SE):
//!
//! | n | alpha | k | gain | P(acc) | raw bias | adjusted bias | lower-bound bias | conditional-on-D median bias |
//! |---|---|---|---|---|---|---|---|---|
//! | 193 | 0.0152 | 1 | 0.5 | 0.0150 | +9.01 +- 0.02 | -0.62 +- 0.13 | +0.79 +- 0.02 | -10.87 +- 0.30 |
//! | 193 | 0.0152 | 1 | 2 | 0.0403 | +7.71 +- 0.03 | -1.11 +- 0.13 | -0.53 +- 0.02 | -10.07 +- 0.30 |
//! | 193 | 0.0152 | 1 | 4 | 0.1158 | +5.98 +- 0.03 | -1.82 +- 0.13 | -2.25 +- 0.03 | -9.70 +- 0.30 |
//! | 193 | 0.0152 | 1 | 6 | 0.2584 | +4.37 +- 0.03 | -2.18 +- 0.13 | -3.83 +- 0.03 | -8.59 +- 0.30 |
//! | 193 | 0.0152 | 1 | 10 | 0.6936 | +1.69 +- 0.04 | -1.96 +- 0.13 | -6.39 +- 0.05 | -5.04 +- 0.25 |
//! | 193 | 0.0152 | 4 | 0.5 | 0.0598 | +9.00 +- 0.02 | -0.56 +- 0.13 | +0.78 +- 0.02 | -10.85 +- 0.30 |
//! | 193 | 0.0152 | 4 | 2 | 0.1473 | +7.70 +- 0.03 | -1.06 +- 0.13 | -0.53 +- 0.02 | -10.08 +- 0.30 |
//! | 193 | 0.0152 | 4 | 4 | 0.3986 | +6.12 +- 0.03 | -1.30 +- 0.13 | -2.14 +- 0.03 | -8.33 +- 0.30 |
//! | 193 | 0.0152 | 4 | 6 | 0.7114 | +4.87 +- 0.04 | -0.50 +- 0.13 | -3.38 +- 0.04 | -5.47 +- 0.28 |
//! | 193 | 0.0152 | 4 | 10 | 0.9921 | +3.69 +- 0.05 | +2.57 +- 0.08 | -4.38 +- 0.05 | +2.06 +- 0.12 |
//! | 193 | 0.05 | 1 | 0.5 | 0.0495 | +7.41 +- 0.03 | -0.87 +- 0.13 | +1.02 +- 0.02 | -8.96 +- 0.28 |
//! | 193 | 0.05 | 1 | 2 | 0.1102 | +6.12 +- 0.03 | -1.49 +- 0.13 | -0.25 +- 0.03 | -9.05 +- 0.29 |
//! | 193 | 0.05 | 1 | 4 | 0.2513 | +4.57 +- 0.03 | -1.66 +- 0.13 | -1.81 +- 0.03 | -7.10 +- 0.27 |
//! | 193 | 0.05 | 1 | 6 | 0.4645 | +3.05 +- 0.04 | -2.08 +- 0.13 | -3.30 +- 0.04 | -6.81 +- 0.27 |
//! | 193 | 0.05 | 1 | 10 | 0.8487 | +0.86 +- 0.05 | -1.41 +- 0.11 | -5.37 +- 0.05 | -3.15 +- 0.20 |
//! | 193 | 0.05 | 4 | 0.5 | 0.1866 | +7.40 +- 0.03 | -0.88 +- 0.13 | +1.02 +- 0.02 | -9.01 +- 0.28 |
//! | 193 | 0.05 | 4 | 2 | 0.3731 | +6.28 +- 0.03 | -0.77 +- 0.13 | -0.11 +- 0.03 | -7.48 +- 0.28 |
//! | 193 | 0.05 | 4 | 4 | 0.6911 | +4.94 +- 0.03 | -0.23 +- 0.12 | -1.46 +- 0.03 | -4.84 +- 0.26 |
//! | 193 | 0.05 | 4 | 6 | 0.9144 | +4.08 +- 0.04 | +1.11 +- 0.11 | -2.30 +- 0.04 | -1.01 +- 0.21 |
//! | 193 | 0.05 | 4 | 10 | 0.9993 | +3.66 +- 0.05 | +3.34 +- 0.06 | -2.52 +- 0.05 | +3.20 +- 0.07 |
//! | 400 | 0.0152 | 1 | 0.5 | 0.0195 | +6.07 +- 0.02 | -0.99 +- 0.10 | +0.44 +- 0.02 | -8.12 +- 0.26 |
//! | 400 | 0.0152 | 1 | 2 | 0.0709 | +4.74 +- 0.02 | -1.59 +- 0.11 | -0.90 +- 0.02 | -7.74 +- 0.26 |
//! | 400 | 0.0152 | 1 | 4 | 0.2491 | +3.11 +- 0.02 | -1.76 +- 0.10 | -2.51 +- 0.02 | -6.12 +- 0.24 |
//! | 400 | 0.0152 | 1 | 6 | 0.5738 | +1.76 +- 0.03 | -1.52 +- 0.10 | -3.85 +- 0.03 | -4.12 +- 0.21 |
//! | 400 | 0.0152 | 1 | 10 | 0.9677 | +0.18 +- 0.04 | -0.54 +- 0.07 | -5.28 +- 0.04 | -0.91 +- 0.10 |
//! | 400 | 0.0152 | 4 | 0.5 | 0.0732 | +6.08 +- 0.02 | -0.89 +- 0.10 | +0.45 +- 0.02 | -8.00 +- 0.26 |
//! | 400 | 0.0152 | 4 | 2 | 0.2631 | +4.81 +- 0.02 | -1.15 +- 0.10 | -0.83 +- 0.02 | -6.77 +- 0.25 |
//! | 400 | 0.0152 | 4 | 4 | 0.6874 | +3.42 +- 0.02 | -0.57 +- 0.10 | -2.21 +- 0.02 | -3.81 +- 0.22 |
//! | 400 | 0.0152 | 4 | 6 | 0.9656 | +2.65 +- 0.03 | +1.08 +- 0.07 | -2.94 +- 0.03 | +0.22 +- 0.14 |
//! | 400 | 0.0152 | 4 | 10 | 1.0000 | +2.49 +- 0.03 | +2.46 +- 0.03 | -2.93 +- 0.03 | +2.42 +- 0.03 |
//! | 400 | 0.05 | 1 | 0.5 | 0.0610 | +4.94 +- 0.02 | -1.23 +- 0.10 | +0.60 +- 0.02 | -6.75 +- 0.24 |
//! | 400 | 0.05 | 1 | 2 | 0.1684 | +3.67 +- 0.02 | -1.70 +- 0.10 | -0.68 +- 0.02 | -6.40 +- 0.24 |
//! | 400 | 0.05 | 1 | 4 | 0.4408 | +2.18 +- 0.03 | -1.64 +- 0.10 | -2.15 +- 0.03 | -4.65 +- 0.21 |
//! | 400 | 0.05 | 1 | 6 | 0.7461 | +1.05 +- 0.03 | -1.33 +- 0.09 | -3.25 +- 0.03 | -3.04 +- 0.17 |
//! | 400 | 0.05 | 1 | 10 | 0.9921 | -0.01 +- 0.04 | -0.32 +- 0.06 | -4.20 +- 0.04 | -0.44 +- 0.07 |
//! | 400 | 0.05 | 4 | 0.5 | 0.2176 | +5.02 +- 0.02 | -0.93 +- 0.11 | +0.67 +- 0.02 | -6.11 +- 0.24 |
//! | 400 | 0.05 | 4 | 2 | 0.5263 | +3.90 +- 0.02 | -0.69 +- 0.10 | -0.45 +- 0.02 | -4.31 +- 0.22 |
//! | 400 | 0.05 | 4 | 4 | 0.9017 | +2.85 +- 0.03 | +0.62 +- 0.08 | -1.49 +- 0.03 | -0.69 +- 0.16 |
//! | 400 | 0.05 | 4 | 6 | 0.9963 | +2.58 +- 0.03 | +2.07 +- 0.05 | -1.73 +- 0.03 | +1.94 +- 0.06 |
//! | 400 | 0.05 | 4 | 10 | 1.0000 | +2.54 +- 0.03 | +2.53 +- 0.03 | -1.59 +- 0.03 | +2.49 +- 0.03 |
//!
//! What holds (asserted): at n = 193 the raw delta of an accepted candidate
//! overstates a 2-4 pp gain by 4.5 to 7.7 points (it averages 8 to 10 pp);
//! there the adjusted estimate's bias is less than a third of the raw
//! delta's at 2 pp (both alphas) and at 4 pp at alpha 0.0152. Wherever the
//! test has less than 50% power the adjusted bias is smaller than the raw
//! delta's, and for gains of 2 pp or more the lower bound is below the truth
//! on average.
//!
//! What does not (`where_it_does_not_hold_*`): the adjusted estimate is
//! below the truth on average in every row, by 0.3 to 2.2 pp (it is
//! median-unbiased given acceptance, not mean-unbiased): at 4 pp, alpha 0.05,
//! its bias (-1.7 pp) is more than a third of the raw delta's (+4.6 pp), and
//! where selection is mild (power above 60%: 10 pp, and 6 pp at n = 400,
//! alpha 0.05) it is further from the truth on average than the raw delta.
//! Reporting the best of 4 passers is a second selection it does not
//! remove: wherever a single test has more than 15% power, the best of 4's
//! adjusted estimate is 0.5 to 5 pp higher than a single test's, and where
//! most of the four pass (P(acc) above 0.9) it overstates the gain by 0.6 to
//! 3.3 pp, nearly as much as the raw delta. The
//! conditional-on-`D` median (see `curse.rs`) is 4 to 11 pp below the truth
//! where acceptance is rare.

use std::collections::HashMap;

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use statrs::distribution::{Binomial, Discrete};

use super::curse::{adjusted_gain, alternatives};
use super::onesided::{better_p_value, lower_bound};

const Q: f64 = 0.25;
const GAINS: [f64; 5] = [0.005, 0.02, 0.04, 0.06, 0.10];

/// Draws (improved, regressed) on `n` questions by inverse CDF tables.
struct Sampler {
    d_cdf: Vec<f64>,
    i_cdf: Vec<Vec<f64>>,
}

fn cdf(b: &Binomial, len: u64) -> Vec<f64> {
    let mut acc = 0.0;
    (0..=len)
        .map(|k| {
            acc += b.pmf(k);
            acc
        })
        .collect()
}

impl Sampler {
    fn new(n: u64, gain: f64) -> Self {
        let pi = (Q + gain) / (2.0 * Q);
        let d_cdf = cdf(&Binomial::new(Q, n).unwrap(), n);
        let i_cdf = (0..=n).map(|d| cdf(&Binomial::new(pi, d).unwrap(), d)).collect();
        Sampler { d_cdf, i_cdf }
    }

    fn draw(&self, rng: &mut ChaCha8Rng) -> (u64, u64) {
        let pick = |c: &[f64], u: f64| c.partition_point(|&x| x < u).min(c.len() - 1) as u64;
        let d = pick(&self.d_cdf, rng.random());
        let i = pick(&self.i_cdf[d as usize], rng.random());
        (i, d - i)
    }
}

/// A running mean with its standard error.
#[derive(Default, Clone, Copy)]
struct Mean {
    n: f64,
    sum: f64,
    sum_sq: f64,
}

impl Mean {
    fn add(&mut self, x: f64) {
        self.n += 1.0;
        self.sum += x;
        self.sum_sq += x * x;
    }
    fn mean(self) -> f64 {
        self.sum / self.n
    }
    fn se(self) -> f64 {
        let m = self.mean();
        ((self.sum_sq / self.n - m * m).max(0.0) / (self.n - 1.0)).sqrt()
    }
}

/// One row: among accepted draws, the raw delta, the adjusted estimate, the
/// lower bound and the conditional-on-D median of the reported candidate.
struct Row {
    n: u64,
    alpha: f64,
    k: usize,
    gain: f64,
    accept_rate: f64,
    raw: Mean,
    adjusted: Mean,
    lower: Mean,
    conditional: Mean,
}

impl Row {
    fn bias(&self, m: Mean) -> f64 {
        m.mean() - self.gain
    }
    fn line(&self) -> String {
        let b = |m: Mean| format!("{:+.2} +- {:.2}", 100.0 * self.bias(m), 100.0 * m.se());
        format!(
            "| {} | {} | {} | {} | {:.4} | {} | {} | {} | {} |",
            self.n,
            self.alpha,
            self.k,
            100.0 * self.gain,
            self.accept_rate,
            b(self.raw),
            b(self.adjusted),
            b(self.lower),
            b(self.conditional)
        )
    }
}

/// Estimates per (improved, discordant), memoized: they do not depend on the truth.
type Memo = HashMap<(u64, u64), [f64; 3]>;

fn estimates(memo: &mut Memo, i: u64, r: u64, n: u64, alpha: f64) -> [f64; 3] {
    *memo.entry((i, i + r)).or_insert_with(|| {
        [adjusted_gain(i, r, n, alpha), lower_bound(i, r, n, alpha), alternatives::conditional_median(i, r, n, alpha)]
    })
}

/// Runs one row: rounds of `k` independent candidates until 3,000 rounds have a passer.
fn run(n: u64, alpha: f64, k: usize, gain: f64, memo: &mut Memo, seed: u64) -> Row {
    let sampler = Sampler::new(n, gain);
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let (mut rounds, mut accepted) = (0usize, 0usize);
    let mut row = Row {
        n,
        alpha,
        k,
        gain,
        accept_rate: 0.0,
        raw: Mean::default(),
        adjusted: Mean::default(),
        lower: Mean::default(),
        conditional: Mean::default(),
    };
    while accepted < 3000 {
        rounds += 1;
        let best = (0..k)
            .map(|_| sampler.draw(&mut rng))
            .filter(|&(i, r)| better_p_value(i, r) <= alpha)
            .max_by_key(|&(i, r)| i as i64 - r as i64);
        let Some((i, r)) = best else { continue };
        accepted += 1;
        let [adjusted, lower, conditional] = estimates(memo, i, r, n, alpha);
        row.raw.add((i as f64 - r as f64) / n as f64);
        row.adjusted.add(adjusted);
        row.lower.add(lower);
        row.conditional.add(conditional);
    }
    row.accept_rate = accepted as f64 / rounds as f64;
    row
}

/// Every row of the table, printed once.
fn table() -> &'static [Row] {
    static TABLE: std::sync::OnceLock<Vec<Row>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut rows = Vec::new();
        for (a, n) in [193u64, 400].into_iter().enumerate() {
            for (b, alpha) in [0.0152, 0.05].into_iter().enumerate() {
                let mut memo = Memo::new();
                for k in [1, 4] {
                    for (c, gain) in GAINS.into_iter().enumerate() {
                        let seed = 7000 + 1000 * a as u64 + 100 * b as u64 + 10 * k as u64 + c as u64;
                        rows.push(run(n, alpha, k, gain, &mut memo, seed));
                    }
                }
            }
        }
        let header = "| n | alpha | k | gain | P(acc) | raw bias | adjusted bias | lower-bound bias | conditional-on-D median bias |";
        eprintln!("{header}\n|---|---|---|---|---|---|---|---|---|");
        for row in &rows {
            eprintln!("{}", row.line());
        }
        rows
    })
}

fn rows(k: usize) -> impl Iterator<Item = &'static Row> {
    table().iter().filter(move |r| r.k == k)
}

#[test]
fn sim_curse_the_adjusted_estimate_removes_most_of_the_curse_at_two_to_four_points() {
    for row in rows(1) {
        let (raw, adjusted) = (row.bias(row.raw), row.bias(row.adjusted));
        if (row.gain == 0.02 || row.gain == 0.04) && row.n == 193 {
            assert!(raw > 0.045, "the curse: {}", row.line());
        }
        if row.n == 193 && (row.gain == 0.02 || (row.gain == 0.04 && row.alpha < 0.02)) {
            assert!(adjusted.abs() < raw / 3.0, "a third: {}", row.line());
        }
        if row.accept_rate < 0.5 {
            assert!(adjusted.abs() < raw, "smaller: {}", row.line());
        }
        if row.accept_rate < 0.5 && row.gain >= 0.02 {
            assert!(row.bias(row.lower) < 0.0, "the lower bound is below the truth on average: {}", row.line());
        }
    }
}

#[test]
fn where_it_does_not_hold_the_adjusted_estimate_underestimates_and_best_of_four_is_a_second_curse() {
    for row in rows(1) {
        let (raw, adjusted) = (row.bias(row.raw), row.bias(row.adjusted));
        // Median-unbiased given acceptance, not mean-unbiased: below the truth in every row.
        assert!(adjusted < 0.0 && adjusted > -0.025, "{}", row.line());
        if row.accept_rate > 0.6 {
            assert!(adjusted.abs() > raw.abs(), "mild selection: {}", row.line());
        }
        // The conditional-on-D median is far below the truth where acceptance is rare.
        if row.accept_rate < 0.3 {
            assert!(row.bias(row.conditional) < -0.04, "{}", row.line());
        }
    }
    for row in rows(4) {
        let single = rows(1).find(|r| (r.n, r.alpha, r.gain) == (row.n, row.alpha, row.gain)).unwrap();
        if single.accept_rate > 0.15 {
            assert!(row.bias(row.adjusted) > single.bias(single.adjusted) + 0.005, "{}", row.line());
        }
        if row.accept_rate > 0.9 {
            assert!(row.bias(row.adjusted) > 0.005, "most of the four pass: {}", row.line());
        }
    }
}
