//! A random-forest surrogate sampler over a [`Space`], in the manner of
//! SMAC3's `HyperparameterOptimizationFacade` (random forest, expected
//! improvement, local search around the best points, interleaved random
//! points); the alternative to [`super::Tpe`] that `search.sampler: forest`
//! selects.
//!
//! - The forest is fitted on the complete trials' scores. A trial stopped
//!   early (raced out) carries no score on the scale of complete ones; it
//!   lost to the incumbent, so it enters the fit at the lowest complete score
//!   (or its own estimate, when the caller made one comparable).
//! - Points are encoded in `[0, 1]` per parameter (a categorical option by
//!   its index over the last one), and each of the `trees` (10) trees is
//!   grown on a bootstrap sample, splitting on a random 5/6 of the
//!   parameters at each node by variance reduction, down to nodes of fewer
//!   than 3 trials (SMAC's defaults).
//! - The prediction is the trees' mean and the spread of their predictions;
//!   expected improvement over the best complete score picks the next point
//!   among `random_candidates` (1,000) uniform points and a greedy local
//!   search (one parameter at a time) from the 10 best trials.
//! - Every fifth draw is uniform random (SMAC's random design, 0.2).
//!
//! `ask` is a pure function of the history, the trial number and the seed.

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use statrs::distribution::{Continuous, ContinuousCDF, Normal};

use super::space::{Domain, Space};
use super::tpe::{Tpe, TpeConfig, Trial};

/// The forest's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ForestConfig {
    pub n_startup_trials: usize,
    pub trees: usize,
    pub min_split: usize,
    pub random_candidates: usize,
    pub seed: u64,
}

impl Default for ForestConfig {
    fn default() -> Self {
        ForestConfig { n_startup_trials: 10, trees: 10, min_split: 3, random_candidates: 1000, seed: 0 }
    }
}

/// A node of a regression tree: a split or a leaf's mean.
#[derive(Debug, Clone)]
enum Node {
    Leaf(f64),
    Split { feature: usize, threshold: f64, left: usize, right: usize },
}

#[derive(Debug, Clone)]
struct Tree {
    nodes: Vec<Node>,
}

impl Tree {
    fn grow(xs: &[Vec<f64>], ys: &[f64], rows: Vec<usize>, min_split: usize, rng: &mut ChaCha8Rng) -> Tree {
        let mut tree = Tree { nodes: Vec::new() };
        tree.node(xs, ys, rows, min_split, rng, 0);
        tree
    }

    fn node(
        &mut self,
        xs: &[Vec<f64>],
        ys: &[f64],
        rows: Vec<usize>,
        min_split: usize,
        rng: &mut ChaCha8Rng,
        depth: usize,
    ) -> usize {
        let at = self.nodes.len();
        let mean = rows.iter().map(|&r| ys[r]).sum::<f64>() / rows.len().max(1) as f64;
        self.nodes.push(Node::Leaf(mean));
        if rows.len() < min_split || depth >= 32 {
            return at;
        }
        let Some((feature, threshold)) = best_split(xs, ys, &rows, rng) else { return at };
        let (l, r): (Vec<usize>, Vec<usize>) = rows.iter().partition(|&&i| xs[i][feature] <= threshold);
        let left = self.node(xs, ys, l, min_split, rng, depth + 1);
        let right = self.node(xs, ys, r, min_split, rng, depth + 1);
        self.nodes[at] = Node::Split { feature, threshold, left, right };
        at
    }

    fn predict(&self, x: &[f64]) -> f64 {
        let mut i = 0;
        loop {
            match &self.nodes[i] {
                Node::Leaf(v) => return *v,
                Node::Split { feature, threshold, left, right } => {
                    i = if x[*feature] <= *threshold { *left } else { *right };
                }
            }
        }
    }
}

/// The split of `rows` (over a random 5/6 of the features) that most reduces
/// the sum of squared deviations; None when no split separates two values.
fn best_split(xs: &[Vec<f64>], ys: &[f64], rows: &[usize], rng: &mut ChaCha8Rng) -> Option<(usize, f64)> {
    let d = xs[0].len();
    let mut features: Vec<usize> = (0..d).collect();
    for i in (1..d).rev() {
        features.swap(i, rng.random_range(0..=i));
    }
    features.truncate((d * 5).div_ceil(6).max(1));
    let mut best: Option<(f64, usize, f64)> = None;
    for &f in &features {
        let mut order: Vec<usize> = rows.to_vec();
        order.sort_by(|&a, &b| xs[a][f].total_cmp(&xs[b][f]));
        let total: f64 = order.iter().map(|&r| ys[r]).sum();
        let total_sq: f64 = order.iter().map(|&r| ys[r] * ys[r]).sum();
        let (mut sum, mut sq) = (0.0, 0.0);
        for k in 0..order.len() - 1 {
            let y = ys[order[k]];
            sum += y;
            sq += y * y;
            let (a, b) = (xs[order[k]][f], xs[order[k + 1]][f]);
            if a == b {
                continue;
            }
            let (nl, nr) = ((k + 1) as f64, (order.len() - k - 1) as f64);
            let sse = (sq - sum * sum / nl) + ((total_sq - sq) - (total - sum).powi(2) / nr);
            if best.is_none_or(|(s, ..)| sse < s - 1e-12) {
                best = Some((sse, f, 0.5 * (a + b)));
            }
        }
    }
    best.map(|(_, f, t)| (f, t))
}

/// A random-forest sampler over a space.
#[derive(Debug, Clone)]
pub struct Forest {
    pub space: Space,
    pub config: ForestConfig,
}

impl Forest {
    pub fn new(space: Space, config: ForestConfig) -> Forest {
        Forest { space, config }
    }

    fn rng(&self, number: u64) -> ChaCha8Rng {
        ChaCha8Rng::seed_from_u64(self.config.seed ^ number.wrapping_mul(0xD1B5_4A32_D192_ED03))
    }

    /// A uniform random point (the same draws as TPE's startup).
    pub fn random(&self, number: u64) -> Vec<f64> {
        let tpe = TpeConfig { seed: self.config.seed, ..TpeConfig::default() };
        Tpe::new(self.space.clone(), tpe).random(number)
    }

    /// `x` in `[0, 1]` per parameter.
    fn unit(&self, x: &[f64]) -> Vec<f64> {
        self.space
            .params
            .iter()
            .zip(x)
            .map(|(p, &v)| match &p.domain {
                Domain::Int { low, high } if high > low => (v - *low as f64) / (high - low) as f64,
                Domain::Float { low, high } if high > low => (v - low) / (high - low),
                Domain::Categorical(o) if o.len() > 1 => v / (o.len() - 1) as f64,
                _ => 0.0,
            })
            .collect()
    }

    /// The point for trial `number` given every earlier trial.
    pub fn ask(&self, history: &[Trial], number: u64) -> Vec<f64> {
        let complete: Vec<&Trial> = history.iter().filter(|t| t.stopped_at.is_none()).collect();
        if complete.len() < self.config.n_startup_trials.max(2) || number % 5 == 4 {
            return self.random(number);
        }
        let floor = complete.iter().map(|t| t.score).fold(f64::INFINITY, f64::min);
        let xs: Vec<Vec<f64>> = history.iter().map(|t| self.unit(&t.point)).collect();
        let ys: Vec<f64> = history.iter().map(|t| if t.stopped_at.is_some() { floor } else { t.score }).collect();
        let mut rng = self.rng(number);
        let trees: Vec<Tree> = (0..self.config.trees)
            .map(|_| {
                let rows = (0..xs.len()).map(|_| rng.random_range(0..xs.len())).collect();
                Tree::grow(&xs, &ys, rows, self.config.min_split, &mut rng)
            })
            .collect();
        let best = complete.iter().map(|t| t.score).fold(f64::NEG_INFINITY, f64::max);
        let ei = |x: &[f64]| expected_improvement(&trees, &self.unit(x), best);
        let mut pick: (Vec<f64>, f64) = (Vec::new(), f64::NEG_INFINITY);
        for k in 0..self.config.random_candidates as u64 {
            let x = self.random(number.wrapping_mul(1_000_003).wrapping_add(k + 1));
            let v = ei(&x);
            if v > pick.1 {
                pick = (x, v);
            }
        }
        let mut starts: Vec<&Trial> = complete.clone();
        starts.sort_by(|a, b| b.score.total_cmp(&a.score));
        for t in starts.iter().take(10) {
            let (x, v) = self.local_search(t.point.clone(), &ei, &mut rng);
            if v > pick.1 {
                pick = (x, v);
            }
        }
        pick.0
    }

    /// Greedy one-parameter moves from `x` while expected improvement grows
    /// (at most 20 moves, 4 neighbours per parameter a move).
    fn local_search(&self, mut x: Vec<f64>, ei: &dyn Fn(&[f64]) -> f64, rng: &mut ChaCha8Rng) -> (Vec<f64>, f64) {
        let mut value = ei(&x);
        for _ in 0..20 {
            let mut best: Option<(Vec<f64>, f64)> = None;
            for (j, p) in self.space.params.iter().enumerate() {
                for _ in 0..4 {
                    let mut y = x.clone();
                    y[j] = match &p.domain {
                        Domain::Int { low, high } => {
                            let w = (*high - *low) as f64;
                            (x[j] + normal(rng) * 0.2 * w).round().clamp(*low as f64, *high as f64)
                        }
                        Domain::Float { low, high } => (x[j] + normal(rng) * 0.2 * (high - low)).clamp(*low, *high),
                        Domain::Categorical(o) => rng.random_range(0..o.len()) as f64,
                    };
                    if y[j] == x[j] {
                        continue;
                    }
                    let v = ei(&y);
                    if v > best.as_ref().map_or(value, |b| b.1) + 1e-15 {
                        best = Some((y, v));
                    }
                }
            }
            match best {
                Some((y, v)) => (x, value) = (y, v),
                None => break,
            }
        }
        (x, value)
    }
}

fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let u: f64 = rng.random::<f64>().clamp(1e-12, 1.0 - 1e-12);
    Normal::new(0.0, 1.0).expect("a standard normal").inverse_cdf(u)
}

/// Expected improvement over `best` (higher is better) of the trees'
/// prediction at `x`: their mean, and their spread as its uncertainty.
fn expected_improvement(trees: &[Tree], x: &[f64], best: f64) -> f64 {
    let preds: Vec<f64> = trees.iter().map(|t| t.predict(x)).collect();
    let mu = preds.iter().sum::<f64>() / preds.len() as f64;
    let var = preds.iter().map(|p| (p - mu).powi(2)).sum::<f64>() / preds.len() as f64;
    let sigma = var.sqrt();
    if sigma < 1e-12 {
        return (mu - best).max(0.0);
    }
    let z = (mu - best) / sigma;
    let n = Normal::new(0.0, 1.0).expect("a standard normal");
    (mu - best) * n.cdf(z) + sigma * n.pdf(z)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::space::Param;

    fn run(forest: &Forest, budget: usize, objective: &dyn Fn(&[f64]) -> f64, random: bool) -> f64 {
        let mut history: Vec<Trial> = Vec::new();
        for t in 0..budget as u64 {
            let point = if random { forest.random(t) } else { forest.ask(&history, t) };
            let score = objective(&point);
            history.push(Trial::complete(point, score));
        }
        history.iter().map(|t| t.score).fold(f64::NEG_INFINITY, f64::max)
    }

    #[test]
    fn beats_random_search_on_a_bowl_and_is_seeded() {
        let space = Space {
            params: vec![
                Param { path: "a".into(), domain: Domain::Int { low: 0, high: 100 } },
                Param { path: "b".into(), domain: Domain::Float { low: 0.0, high: 1.0 } },
                Param { path: "c".into(), domain: Domain::Categorical(vec![0.into(), 1.into(), 2.into()]) },
            ],
        };
        let bowl = |x: &[f64]| {
            -(((x[0] - 73.0) / 100.0).powi(2) + (x[1] - 0.31).powi(2)) + if x[2] == 2.0 { 0.2 } else { 0.0 }
        };
        let (mut f_sum, mut r_sum, mut wins) = (0.0, 0.0, 0);
        for seed in 0..8 {
            let forest =
                Forest::new(space.clone(), ForestConfig { seed, random_candidates: 200, ..Default::default() });
            let (a, b) = (run(&forest, 40, &bowl, false), run(&forest, 40, &bowl, true));
            f_sum += a;
            r_sum += b;
            wins += usize::from(a > b);
        }
        assert!(f_sum > r_sum && wins >= 6, "forest {f_sum} vs random {r_sum}, {wins} wins of 8");
        let forest = Forest::new(space, ForestConfig { seed: 3, random_candidates: 50, ..Default::default() });
        let history: Vec<Trial> =
            (0..12).map(|i| Trial::complete(vec![i as f64 * 8.0, i as f64 / 12.0, (i % 3) as f64], i as f64)).collect();
        assert_eq!(forest.ask(&history, 12), forest.ask(&history, 12));
    }
}
