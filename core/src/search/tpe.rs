//! A tree-structured Parzen estimator (TPE) sampler over a [`Space`],
//! mirroring the defaults of Optuna's `TPESampler` (independent per
//! parameter, as Optuna's default `multivariate=False`):
//!
//! - the first `n_startup_trials` (10) points are uniform random;
//! - then the history is split into the best `gamma(n) = min(ceil(0.1 n), 25)`
//!   trials ("below", the good ones; here higher scores are better) and the
//!   rest ("above"). As Optuna's `_split_trials` does, every complete trial
//!   ranks above every trial stopped early (Optuna's PRUNED); stopped trials
//!   rank among themselves by how far they got, then by their last value, so
//!   one enters "below" only when there are fewer complete trials than
//!   `gamma(n)`;
//! - each group gets a Parzen estimator per parameter: a truncated-normal
//!   kernel per observation with Optuna's neighbour-distance bandwidth
//!   (neighbours among the observations and the prior's centre; the range's
//!   endpoints count only for inner kernels) clipped to
//!   `[(high - low) / min(100, 2 + n), high - low]` ("magic clip"), plus a
//!   prior kernel at the range's centre with bandwidth `high - low` and weight
//!   `prior_weight` (1); observation weights are 1, or, past 25 trials, a ramp
//!   from `1/n` up to 1 for all but the 25 latest; categoricals use Optuna's
//!   kernel (`prior_weight / (n + 1)` on every option, plus 1 on the observed);
//! - `n_ei_candidates` (24) values drawn from the good estimator; the one with
//!   the largest `log l(x) - log g(x)` wins.
//!
//! Integers are drawn from the continuous relaxation `[low - 1/2, high + 1/2]`
//! and rounded; unlike Optuna, which integrates each kernel over the integer's
//! bin, their density is evaluated at the integer itself. `ask` is a pure function of the history, the trial number and
//! the seed, so a journal can replay it.
//!
//! The `tpe` crate (0.3.1) was considered: it is univariate per optimiser,
//! with a fixed `gamma` fraction, no startup phase, no prior kernel and no
//! integer relaxation, so it does not reproduce Optuna's behaviour that the
//! peer benchmark compares against.

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use statrs::distribution::{ContinuousCDF, Normal};

use super::space::{Domain, Space};

/// Optuna's defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TpeConfig {
    pub n_startup_trials: usize,
    pub n_ei_candidates: usize,
    pub prior_weight: f64,
    pub seed: u64,
    /// Optuna's `multivariate=True`: one mixture of product kernels over all
    /// parameters (a candidate's values come from the same observation's
    /// kernel, and are scored jointly) instead of one estimator per parameter.
    pub multivariate: bool,
}

impl Default for TpeConfig {
    fn default() -> Self {
        TpeConfig { n_startup_trials: 10, n_ei_candidates: 24, prior_weight: 1.0, seed: 0, multivariate: false }
    }
}

/// One evaluated point; higher scores are better.
#[derive(Debug, Clone, PartialEq)]
pub struct Trial {
    pub point: Vec<f64>,
    pub score: f64,
    /// For a trial stopped early and ranked as Optuna ranks a pruned one:
    /// how far it got (questions evaluated), its `score` being its value
    /// there. None for a complete trial (and for a stopped one whose score
    /// the caller already made comparable with complete ones).
    pub stopped_at: Option<usize>,
    /// How far it breaks a constraint (0: feasible), as Optuna's constrained
    /// TPE reads `constraints_func`: an infeasible trial ranks below every
    /// feasible one, infeasible ones by violation, smallest first.
    pub violation: f64,
}

impl Trial {
    /// A complete trial.
    pub fn complete(point: Vec<f64>, score: f64) -> Trial {
        Trial { point, score, stopped_at: None, violation: 0.0 }
    }
}

/// The trial indices best first: feasible trials first, complete ones by
/// score, then stopped ones by how far they got and then by score; then
/// infeasible ones by violation; ties keep history order (Optuna's
/// `_split_complete_trials`, `_split_pruned_trials` and
/// `_split_infeasible_trials`).
pub fn ranked(history: &[Trial]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..history.len()).collect();
    order.sort_by(|&a, &b| {
        let (x, y) = (&history[a], &history[b]);
        let (vx, vy) = (x.violation.max(0.0), y.violation.max(0.0));
        if vx > 0.0 || vy > 0.0 {
            return vx.total_cmp(&vy).then(a.cmp(&b));
        }
        match (x.stopped_at, y.stopped_at) {
            (None, Some(_)) => std::cmp::Ordering::Less,
            (Some(_), None) => std::cmp::Ordering::Greater,
            (Some(i), Some(j)) if i != j => j.cmp(&i),
            _ => y.score.total_cmp(&x.score),
        }
        .then(a.cmp(&b))
    });
    order
}

/// The good ("below") and other ("above") trials, each in history order.
fn split(history: &[Trial]) -> (Vec<usize>, Vec<usize>) {
    let n = history.len();
    let order = ranked(history);
    let (mut below, mut above) = (order[..gamma(n)].to_vec(), order[gamma(n)..].to_vec());
    below.sort_unstable();
    above.sort_unstable();
    (below, above)
}

/// Optuna's `default_gamma`: how many of `n` trials count as good.
pub fn gamma(n: usize) -> usize {
    n.div_ceil(10).min(25)
}

/// Optuna's `default_weights`: older trials weigh less once there are more than 25.
pub fn default_weights(n: usize) -> Vec<f64> {
    if n < 25 {
        return vec![1.0; n];
    }
    let ramp = n - 25;
    let mut w: Vec<f64> = (0..ramp)
        .map(|i| {
            if ramp == 1 {
                1.0 / n as f64
            } else {
                1.0 / n as f64 + (1.0 - 1.0 / n as f64) * i as f64 / (ramp - 1) as f64
            }
        })
        .collect();
    w.extend(std::iter::repeat_n(1.0, 25));
    w
}

/// A TPE sampler over a space.
#[derive(Debug, Clone)]
pub struct Tpe {
    pub space: Space,
    pub config: TpeConfig,
}

struct Numeric {
    mus: Vec<f64>,
    sigmas: Vec<f64>,
    weights: Vec<f64>,
    low: f64,
    high: f64,
}

fn std_normal() -> Normal {
    Normal::new(0.0, 1.0).expect("a standard normal")
}

impl Numeric {
    fn fit(obs: &[f64], obs_weights: &[f64], low: f64, high: f64, prior_weight: f64) -> Numeric {
        let width = high - low;
        let n = obs.len();
        // Optuna's univariate bandwidth: neighbour distances among the
        // observations and the prior's centre, the endpoints counted only for
        // inner kernels (consider_endpoints = false), then the magic clip.
        let mut with_prior = obs.to_vec();
        with_prior.push(0.5 * (low + high));
        let m = with_prior.len();
        let mut order: Vec<usize> = (0..m).collect();
        order.sort_by(|&a, &b| with_prior[a].total_cmp(&with_prior[b]));
        let mut ext = Vec::with_capacity(m + 2);
        ext.push(low);
        ext.extend(order.iter().map(|&i| with_prior[i]));
        ext.push(high);
        let mut sorted_sigmas: Vec<f64> = (0..m).map(|r| (ext[r + 1] - ext[r]).max(ext[r + 2] - ext[r + 1])).collect();
        if ext.len() >= 4 {
            sorted_sigmas[0] = ext[2] - ext[1];
            sorted_sigmas[m - 1] = ext[m] - ext[m - 1];
        }
        let min_sigma = width / 100f64.min(1.0 + (n + 1) as f64);
        let mut sigmas = vec![0.0; n];
        for (rank, &i) in order.iter().enumerate() {
            if i < n {
                sigmas[i] = sorted_sigmas[rank].clamp(min_sigma, width);
            }
        }
        let mut mus = obs.to_vec();
        let mut weights = obs_weights.to_vec();
        mus.push(0.5 * (low + high));
        sigmas.push(width);
        weights.push(prior_weight);
        let total: f64 = weights.iter().sum();
        weights.iter_mut().for_each(|w| *w /= total);
        Numeric { mus, sigmas, weights, low, high }
    }

    fn sample(&self, rng: &mut ChaCha8Rng) -> f64 {
        let k = pick(&self.weights, rng.random());
        let (mu, sigma) = (self.mus[k], self.sigmas[k]);
        let z = std_normal();
        let (a, b) = (z.cdf((self.low - mu) / sigma), z.cdf((self.high - mu) / sigma));
        if b - a < 1e-12 {
            return if mu < self.low { self.low } else { self.high };
        }
        let u = a + (b - a) * rng.random::<f64>();
        (mu + sigma * z.inverse_cdf(u.clamp(1e-300, 1.0 - 1e-16))).clamp(self.low, self.high)
    }

    fn log_pdf(&self, x: f64) -> f64 {
        let p: f64 = (0..self.mus.len()).map(|k| self.weights[k] * self.kernel_pdf(k, x)).sum();
        p.max(1e-300).ln()
    }

    /// Kernel `k`'s truncated-normal density at `x`.
    fn kernel_pdf(&self, k: usize, x: f64) -> f64 {
        let z = std_normal();
        let (mu, sigma) = (self.mus[k], self.sigmas[k]);
        let mass = z.cdf((self.high - mu) / sigma) - z.cdf((self.low - mu) / sigma);
        let t = (x - mu) / sigma;
        (-0.5 * t * t).exp() / (sigma * (2.0 * std::f64::consts::PI).sqrt() * mass.max(1e-300))
    }

    /// A draw from kernel `k` alone.
    fn sample_kernel(&self, k: usize, rng: &mut ChaCha8Rng) -> f64 {
        let z = std_normal();
        let (mu, sigma) = (self.mus[k], self.sigmas[k]);
        let (a, b) = (z.cdf((self.low - mu) / sigma), z.cdf((self.high - mu) / sigma));
        if b - a < 1e-12 {
            return if mu < self.low { self.low } else { self.high };
        }
        let u = a + (b - a) * rng.random::<f64>();
        (mu + sigma * z.inverse_cdf(u.clamp(1e-300, 1.0 - 1e-16))).clamp(self.low, self.high)
    }
}

/// Per observation (and the prior, last): a categorical kernel's row, as
/// [`categorical_pmf`] mixes them.
fn categorical_rows(obs: &[f64], k: usize, prior_weight: f64) -> Vec<Vec<f64>> {
    let kernels = obs.len() + 1;
    let fill = prior_weight / kernels as f64;
    let mut rows: Vec<Vec<f64>> = obs
        .iter()
        .map(|&o| {
            let total = fill * k as f64 + 1.0;
            (0..k).map(|c| (fill + if c == o as usize { 1.0 } else { 0.0 }) / total).collect()
        })
        .collect();
    rows.push(vec![1.0 / k as f64; k]);
    rows
}

/// One dimension of a mixture of product kernels.
enum Dim {
    Numeric { est: Numeric, int: Option<(f64, f64)> },
    Categorical { rows: Vec<Vec<f64>> },
}

/// A mixture of product kernels over every parameter (Optuna's multivariate
/// Parzen estimator): one component per observation plus the prior.
struct Joint {
    weights: Vec<f64>,
    dims: Vec<Dim>,
}

impl Joint {
    fn fit(space: &Space, history: &[Trial], members: &[usize], obs_weights: &[f64], prior_weight: f64) -> Joint {
        let mut weights = obs_weights.to_vec();
        weights.push(prior_weight);
        let total: f64 = weights.iter().sum();
        weights.iter_mut().for_each(|w| *w /= total);
        let dims = space
            .params
            .iter()
            .enumerate()
            .map(|(j, p)| {
                let xs: Vec<f64> = members.iter().map(|&i| history[i].point[j]).collect();
                match &p.domain {
                    Domain::Categorical(options) => {
                        Dim::Categorical { rows: categorical_rows(&xs, options.len(), prior_weight) }
                    }
                    Domain::Int { low, high } => {
                        let (lo, hi) = (*low as f64 - 0.5, *high as f64 + 0.5);
                        Dim::Numeric {
                            est: Numeric::fit(&xs, obs_weights, lo, hi, prior_weight),
                            int: Some((*low as f64, *high as f64)),
                        }
                    }
                    Domain::Float { low, high } => {
                        Dim::Numeric { est: Numeric::fit(&xs, obs_weights, *low, *high, prior_weight), int: None }
                    }
                }
            })
            .collect();
        Joint { weights, dims }
    }

    fn sample(&self, rng: &mut ChaCha8Rng) -> Vec<f64> {
        let k = pick(&self.weights, rng.random());
        self.dims
            .iter()
            .map(|d| match d {
                Dim::Categorical { rows } => pick(&rows[k], rng.random()) as f64,
                Dim::Numeric { est, int: Some((low, high)) } => est.sample_kernel(k, rng).round().clamp(*low, *high),
                Dim::Numeric { est, int: None } => est.sample_kernel(k, rng),
            })
            .collect()
    }

    fn log_pdf(&self, x: &[f64]) -> f64 {
        let logs: Vec<f64> = (0..self.weights.len())
            .map(|k| {
                let mut l = self.weights[k].max(1e-300).ln();
                for (d, &v) in self.dims.iter().zip(x) {
                    l += match d {
                        Dim::Categorical { rows } => rows[k][v as usize].max(1e-300).ln(),
                        Dim::Numeric { est, .. } => est.kernel_pdf(k, v).max(1e-300).ln(),
                    };
                }
                l
            })
            .collect();
        let max = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        max + logs.iter().map(|l| (l - max).exp()).sum::<f64>().ln()
    }
}

fn categorical_pmf(obs: &[f64], obs_weights: &[f64], k: usize, prior_weight: f64) -> Vec<f64> {
    let kernels = obs.len() + 1;
    let fill = prior_weight / kernels as f64;
    let total_w: f64 = obs_weights.iter().sum::<f64>() + prior_weight;
    let mut pmf = vec![prior_weight / total_w / k as f64; k];
    for (&o, &w) in obs.iter().zip(obs_weights) {
        let row_total = fill * k as f64 + 1.0;
        for (c, p) in pmf.iter_mut().enumerate() {
            let row = (fill + if c == o as usize { 1.0 } else { 0.0 }) / row_total;
            *p += w / total_w * row;
        }
    }
    pmf
}

fn pick(weights: &[f64], u: f64) -> usize {
    let mut acc = 0.0;
    for (i, w) in weights.iter().enumerate() {
        acc += w;
        if u < acc {
            return i;
        }
    }
    weights.len() - 1
}

impl Tpe {
    pub fn new(space: Space, config: TpeConfig) -> Tpe {
        Tpe { space, config }
    }

    fn rng(&self, number: u64) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(self.config.seed ^ number.wrapping_mul(0x9E37_79B9_7F4A_7C15))
    }

    /// A uniform random point (the startup sampler, and the random-search baseline).
    pub fn random(&self, number: u64) -> Vec<f64> {
        let mut rng = self.rng(number);
        self.space
            .params
            .iter()
            .map(|p| match &p.domain {
                Domain::Int { low, high } => rng.random_range(*low..=*high) as f64,
                Domain::Float { low, high } => low + (high - low) * rng.random::<f64>(),
                Domain::Categorical(options) => rng.random_range(0..options.len()) as f64,
            })
            .collect()
    }

    /// Per parameter, how much more likely `x`'s value is under the good
    /// trials' estimator than under the rest (`log l(x_j) - log g(x_j)`,
    /// each parameter on its own): near 0 where the history does not tell
    /// good from bad by that parameter. Empty below two trials.
    pub fn log_ratios(&self, history: &[Trial], x: &[f64]) -> Vec<f64> {
        let n = history.len();
        if n < 2 {
            return Vec::new();
        }
        let (below, above) = split(history);
        let (wb, wa) = (default_weights(below.len()), default_weights(above.len()));
        let pw = self.config.prior_weight;
        self.space
            .params
            .iter()
            .enumerate()
            .map(|(j, p)| {
                let xb: Vec<f64> = below.iter().map(|&i| history[i].point[j]).collect();
                let xa: Vec<f64> = above.iter().map(|&i| history[i].point[j]).collect();
                match &p.domain {
                    Domain::Categorical(options) => {
                        let (l, g) = (
                            categorical_pmf(&xb, &wb, options.len(), pw),
                            categorical_pmf(&xa, &wa, options.len(), pw),
                        );
                        let c = (x[j].round().max(0.0) as usize).min(options.len() - 1);
                        l[c].ln() - g[c].ln()
                    }
                    Domain::Int { low, high } => {
                        let (lo, hi) = (*low as f64 - 0.5, *high as f64 + 0.5);
                        Numeric::fit(&xb, &wb, lo, hi, pw).log_pdf(x[j])
                            - Numeric::fit(&xa, &wa, lo, hi, pw).log_pdf(x[j])
                    }
                    Domain::Float { low, high } => {
                        Numeric::fit(&xb, &wb, *low, *high, pw).log_pdf(x[j])
                            - Numeric::fit(&xa, &wa, *low, *high, pw).log_pdf(x[j])
                    }
                }
            })
            .collect()
    }

    /// The point for trial `number` given every earlier trial.
    pub fn ask(&self, history: &[Trial], number: u64) -> Vec<f64> {
        let n = history.len();
        if n < self.config.n_startup_trials.max(1) {
            return self.random(number);
        }
        let (below, above) = split(history);
        let (wb, wa) = (default_weights(below.len()), default_weights(above.len()));
        let mut rng = self.rng(number);
        let pw = self.config.prior_weight;
        if self.config.multivariate {
            let l = Joint::fit(&self.space, history, &below, &wb, pw);
            let g = Joint::fit(&self.space, history, &above, &wa, pw);
            let mut best: (Vec<f64>, f64) = (Vec::new(), f64::NEG_INFINITY);
            for _ in 0..self.config.n_ei_candidates {
                let x = l.sample(&mut rng);
                let score = l.log_pdf(&x) - g.log_pdf(&x);
                if best.0.is_empty() || score > best.1 {
                    best = (x, score);
                }
            }
            return best.0;
        }
        self.space
            .params
            .iter()
            .enumerate()
            .map(|(j, p)| {
                let xb: Vec<f64> = below.iter().map(|&i| history[i].point[j]).collect();
                let xa: Vec<f64> = above.iter().map(|&i| history[i].point[j]).collect();
                match &p.domain {
                    Domain::Categorical(options) => {
                        let (l, g) = (
                            categorical_pmf(&xb, &wb, options.len(), pw),
                            categorical_pmf(&xa, &wa, options.len(), pw),
                        );
                        let draws = (0..self.config.n_ei_candidates).map(|_| pick(&l, rng.random()));
                        best_of(draws.map(|c| (c as f64, l[c].ln() - g[c].ln())))
                    }
                    Domain::Int { low, high } => {
                        let (lo, hi) = (*low as f64 - 0.5, *high as f64 + 0.5);
                        let (l, g) = (Numeric::fit(&xb, &wb, lo, hi, pw), Numeric::fit(&xa, &wa, lo, hi, pw));
                        let draws: Vec<f64> = (0..self.config.n_ei_candidates)
                            .map(|_| l.sample(&mut rng).round().clamp(*low as f64, *high as f64))
                            .collect();
                        best_of(draws.into_iter().map(|x| (x, l.log_pdf(x) - g.log_pdf(x))))
                    }
                    Domain::Float { low, high } => {
                        let (l, g) = (Numeric::fit(&xb, &wb, *low, *high, pw), Numeric::fit(&xa, &wa, *low, *high, pw));
                        let draws: Vec<f64> = (0..self.config.n_ei_candidates).map(|_| l.sample(&mut rng)).collect();
                        best_of(draws.into_iter().map(|x| (x, l.log_pdf(x) - g.log_pdf(x))))
                    }
                }
            })
            .collect()
    }
}

fn best_of(scored: impl Iterator<Item = (f64, f64)>) -> f64 {
    let mut best = (f64::NAN, f64::NEG_INFINITY);
    for (x, s) in scored {
        if s > best.1 || best.0.is_nan() {
            best = (x, s);
        }
    }
    best.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::space::Param;
    use serde_json::Value;

    fn run(tpe: &Tpe, budget: usize, objective: &dyn Fn(&[f64]) -> f64, random: bool) -> f64 {
        let mut history: Vec<Trial> = Vec::new();
        for t in 0..budget as u64 {
            let point = if random { tpe.random(t) } else { tpe.ask(&history, t) };
            let score = objective(&point);
            history.push(Trial::complete(point, score));
        }
        history.iter().map(|t| t.score).fold(f64::NEG_INFINITY, f64::max)
    }

    fn compare(space: Space, budget: usize, objective: &dyn Fn(&[f64]) -> f64) -> (f64, f64, usize) {
        let (mut tpe_sum, mut rnd_sum, mut wins) = (0.0, 0.0, 0);
        for seed in 0..10 {
            let tpe = Tpe::new(space.clone(), TpeConfig { seed, ..TpeConfig::default() });
            let (a, b) = (run(&tpe, budget, objective, false), run(&tpe, budget, objective, true));
            tpe_sum += a;
            rnd_sum += b;
            wins += usize::from(a > b);
        }
        (tpe_sum / 10.0, rnd_sum / 10.0, wins)
    }

    #[test]
    fn gamma_and_weights_match_optuna() {
        assert_eq!([gamma(1), gamma(10), gamma(11), gamma(100), gamma(300)], [1, 1, 2, 10, 25]);
        assert_eq!(default_weights(3), vec![1.0; 3]);
        let w = default_weights(30);
        assert_eq!(w.len(), 30);
        assert!((w[0] - 1.0 / 30.0).abs() < 1e-12 && w[4] == 1.0 && w[29] == 1.0);
    }

    #[test]
    fn beats_random_search_on_a_quadratic_bowl_over_ints_and_floats() {
        let space = Space {
            params: vec![
                Param { path: "a".into(), domain: Domain::Int { low: 0, high: 100 } },
                Param { path: "b".into(), domain: Domain::Int { low: -20, high: 20 } },
                Param { path: "c".into(), domain: Domain::Float { low: 0.0, high: 1.0 } },
                Param { path: "d".into(), domain: Domain::Float { low: 0.0, high: 10.0 } },
            ],
        };
        let bowl = |x: &[f64]| {
            -(((x[0] - 73.0) / 100.0).powi(2)
                + ((x[1] + 5.0) / 40.0).powi(2)
                + ((x[2] - 0.31) / 1.0).powi(2)
                + ((x[3] - 2.2) / 10.0).powi(2))
        };
        let (tpe, rnd, wins) = compare(space, 60, &bowl);
        eprintln!("bowl, 60 trials, 10 seeds: mean best TPE {tpe:.5}, random {rnd:.5}, TPE wins {wins}/10");
        assert!(tpe > rnd && wins >= 7, "TPE {tpe} vs random {rnd}, {wins} wins");
        assert!(-tpe < 0.5 * -rnd, "TPE's regret {} should be under half of random's {}", -tpe, -rnd);
    }

    #[test]
    fn beats_random_search_on_a_categorical_optimum() {
        // Five parameters of six options; option c of parameter j pays
        // ((c + 3j) mod 6) / 5, so each parameter has one best option and the
        // optimum (score 5) is one point of 7,776.
        let options = Domain::Categorical((0..6u64).map(Value::from).collect());
        let space =
            Space { params: (0..5).map(|j| Param { path: format!("p{j}"), domain: options.clone() }).collect() };
        let payoff =
            |x: &[f64]| x.iter().enumerate().map(|(j, &c)| ((c as usize + 3 * j) % 6) as f64 / 5.0).sum::<f64>();
        let (tpe, rnd, wins) = compare(space, 60, &payoff);
        eprintln!(
            "categorical, 60 trials, 10 seeds: mean best TPE {tpe:.3}, random {rnd:.3} (optimum 5), TPE wins {wins}/10"
        );
        assert!(tpe > rnd && wins >= 7, "TPE {tpe} vs random {rnd}, {wins} wins");
        assert!(5.0 - tpe < 0.7 * (5.0 - rnd), "TPE's regret {} vs random's {}", 5.0 - tpe, 5.0 - rnd);
    }

    #[test]
    fn complete_trials_rank_above_stopped_ones_as_optuna_splits_them() {
        let t = |score: f64, stopped_at: Option<usize>| Trial { point: vec![0.0], score, stopped_at, violation: 0.0 };
        // A trial stopped at 24 questions with a perfect record still ranks
        // below the worst complete trial; stopped trials rank by how far
        // they got, then by their value there.
        let history =
            vec![t(0.50, None), t(1.0, Some(24)), t(0.70, None), t(0.2, Some(48)), t(0.9, Some(24)), t(0.60, None)];
        assert_eq!(ranked(&history), vec![2, 5, 0, 3, 1, 4]);
        // Infeasible trials rank below every feasible one, by violation.
        let mut with = history.clone();
        with[2].violation = 300.0;
        with[0].violation = 10.0;
        assert_eq!(ranked(&with), vec![5, 3, 1, 4, 0, 2]);
        // gamma(6) = 1: only the best complete trial is good.
        assert_eq!(split(&history), (vec![2], vec![0, 1, 3, 4, 5]));
        // With fewer complete trials than gamma(n), the furthest stopped ones fill "below".
        let mut few: Vec<Trial> = (0..12).map(|i| t(0.9 - i as f64 / 100.0, Some(24))).collect();
        few.push(t(0.1, Some(96)));
        few.push(t(0.3, None));
        assert_eq!(gamma(few.len()), 2);
        assert_eq!(split(&few).0, vec![12, 13]);
    }

    #[test]
    fn ask_is_a_pure_function_of_history_number_and_seed() {
        let space = Space { params: vec![Param { path: "a".into(), domain: Domain::Float { low: 0.0, high: 1.0 } }] };
        let tpe = Tpe::new(space, TpeConfig { seed: 3, ..TpeConfig::default() });
        let history: Vec<Trial> =
            (0..15).map(|i| Trial::complete(vec![i as f64 / 15.0], -(i as f64 - 4.0).abs())).collect();
        assert_eq!(tpe.ask(&history, 15), tpe.ask(&history, 15));
        assert_ne!(tpe.ask(&history, 15), tpe.ask(&history, 16));
        let x = tpe.ask(&history, 15)[0];
        assert!((0.0..=1.0).contains(&x));
    }

    #[test]
    fn points_over_the_builtin_schema_repair_into_valid_strategies() {
        use crate::schema::StrategySchema;
        use crate::search::space::{repair, tests::default_doc};
        let schema = StrategySchema::builtin();
        let doc = default_doc();
        let space = Space::from_schema(&schema, &doc, None).unwrap();
        let tpe = Tpe::new(space.clone(), TpeConfig { seed: 1, ..TpeConfig::default() });
        let mut history = Vec::new();
        let mut repaired = 0;
        for t in 0..40u64 {
            let point = tpe.ask(&history, t);
            let mut candidate = space.decode(&doc, &point).unwrap();
            repaired += usize::from(!repair(&schema, &mut candidate).unwrap().is_empty());
            assert!(schema.check(&candidate).is_empty(), "trial {t}: {:?}", schema.check(&candidate));
            // A made-up score: larger top_k is better.
            let score = crate::schema::get_path(&candidate, "retrieve.top_k").unwrap().as_f64().unwrap();
            history.push(Trial::complete(point, score));
        }
        assert!(repaired > 0, "uniform draws over these ranges break some invariant");
    }
}
