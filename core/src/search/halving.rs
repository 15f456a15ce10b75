//! Successive halving on nested samples of the search part, with the cost of
//! every evaluation counted in full-evaluation equivalents.
//!
//! Rung r evaluates the surviving candidates on the first `sizes[r]` questions
//! of one seeded order of the search part (so each rung's sample contains the
//! previous one and reuses its results); the top `ceil(c / eta)` go on. The
//! probe is the first rung. An evaluation of k of the task set's n questions
//! costs k / n; a result already known (an earlier rung, the journal, a cache)
//! costs 0.

use std::collections::BTreeMap;

use rand::SeedableRng;
use rand::rngs::ChaCha8Rng;
use rand::seq::SliceRandom;

use emend_stats::TaskKey;

/// Rung sizes `first, first * eta, ...`, the last one the whole search part.
pub fn ladder(search_size: usize, first: usize, eta: usize) -> Vec<usize> {
    assert!(eta >= 2 && first >= 1, "eta >= 2 and a first rung of at least one question");
    let mut sizes = Vec::new();
    let mut s = first.min(search_size);
    while s < search_size {
        sizes.push(s);
        s = s.saturating_mul(eta);
    }
    sizes.push(search_size);
    sizes
}

/// A seeded order of the search part whose every prefix is spread over the
/// conversations: each conversation's ids are shuffled, then taken round-robin
/// (conversations in sorted order).
pub fn nested_order(search: &[TaskKey], seed: u64) -> Vec<String> {
    let mut by_conv: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for t in search {
        by_conv.entry(&t.conversation).or_default().push(&t.id);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut queues: Vec<Vec<&str>> = by_conv
        .into_values()
        .map(|mut ids| {
            ids.sort_unstable();
            ids.shuffle(&mut rng);
            ids.reverse();
            ids
        })
        .collect();
    let mut out = Vec::with_capacity(search.len());
    while queues.iter().any(|q| !q.is_empty()) {
        for q in &mut queues {
            if let Some(id) = q.pop() {
                out.push(id.to_string());
            }
        }
    }
    out
}

/// How many candidates a rung evaluates, on how many questions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RungPlan {
    pub size: usize,
    pub candidates: usize,
}

/// The rungs for `candidates` candidates: each keeps `ceil(c / eta)`.
pub fn plan(candidates: usize, sizes: &[usize], eta: usize) -> Vec<RungPlan> {
    let mut c = candidates;
    sizes
        .iter()
        .map(|&size| {
            let rung = RungPlan { size, candidates: c };
            c = c.div_ceil(eta).max(1);
            rung
        })
        .collect()
}

/// The plan's cost in full-evaluation equivalents when nothing is cached:
/// rung r adds `candidates_r * (size_r - size_{r-1})` new question evaluations.
pub fn cost_of(plan: &[RungPlan], total_questions: usize) -> f64 {
    let mut prev = 0;
    let mut evals = 0usize;
    for r in plan {
        evals += r.candidates * (r.size - prev);
        prev = r.size;
    }
    evals as f64 / total_questions as f64
}

/// The top `ceil(len / eta)` candidates by score; ties go to the lower index.
pub fn promote(scores: &[(usize, f64)], eta: usize) -> Vec<usize> {
    let mut ranked = scores.to_vec();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked.truncate(scores.len().div_ceil(eta));
    ranked.into_iter().map(|r| r.0).collect()
}

/// One rung as run: each candidate's accuracy on the rung's sample.
#[derive(Debug, Clone, PartialEq)]
pub struct Rung {
    pub size: usize,
    pub scores: Vec<(usize, f64)>,
}

/// A finished successive-halving run.
#[derive(Debug, Clone, PartialEq)]
pub struct Halving {
    pub rungs: Vec<Rung>,
    /// The last rung's candidates, best first.
    pub ranking: Vec<usize>,
    /// New question evaluations made.
    pub evaluations: usize,
    /// Their cost in full-evaluation equivalents (`evaluations / total_questions`).
    pub cost: f64,
}

/// Runs successive halving over candidates `0..candidates`. `known(c, id)`
/// returns a result already held (cost 0); `evaluate(c, ids)` evaluates
/// candidate c on `ids` and returns correctness in the same order.
pub fn successive_halving(
    candidates: usize,
    order: &[String],
    sizes: &[usize],
    eta: usize,
    total_questions: usize,
    known: impl Fn(usize, &str) -> Option<bool>,
    mut evaluate: impl FnMut(usize, &[String]) -> Vec<bool>,
) -> Halving {
    let mut results: BTreeMap<(usize, usize), bool> = BTreeMap::new();
    let mut alive: Vec<usize> = (0..candidates).collect();
    let mut rungs = Vec::new();
    let mut evaluations = 0;
    for (r, &size) in sizes.iter().enumerate() {
        for &c in &alive {
            let mut missing = Vec::new();
            for (q, id) in order[..size].iter().enumerate() {
                if results.contains_key(&(c, q)) {
                    continue;
                }
                match known(c, id) {
                    Some(v) => {
                        results.insert((c, q), v);
                    }
                    None => missing.push(q),
                }
            }
            let ids: Vec<String> = missing.iter().map(|&q| order[q].clone()).collect();
            if !ids.is_empty() {
                let got = evaluate(c, &ids);
                assert_eq!(got.len(), ids.len(), "evaluate returns one result per question");
                evaluations += ids.len();
                for (&q, v) in missing.iter().zip(got) {
                    results.insert((c, q), v);
                }
            }
        }
        let scores: Vec<(usize, f64)> = alive
            .iter()
            .map(|&c| (c, (0..size).filter(|&q| results[&(c, q)]).count() as f64 / size.max(1) as f64))
            .collect();
        let last = r + 1 == sizes.len();
        // The last rung ranks everyone it evaluated (eta 1 keeps all, sorted).
        alive = promote(&scores, if last { 1 } else { eta });
        rungs.push(Rung { size, scores });
    }
    Halving { rungs, ranking: alive, evaluations, cost: evaluations as f64 / total_questions as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn truth(c: usize) -> f64 {
        0.40 + 0.01 * c as f64
    }

    fn correct(c: usize, id: &str, seed: u64) -> bool {
        // A fixed pseudo-random draw per (candidate, question, seed).
        let mut h: u64 = seed ^ 0xcbf2_9ce4_8422_2325;
        for b in id.bytes().chain((c as u64).to_le_bytes()) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        ((h >> 11) as f64 / (1u64 << 53) as f64) < truth(c)
    }

    fn search_part() -> Vec<TaskKey> {
        (0..300).map(|i| TaskKey::new(format!("q{i:03}"), format!("c{}", i % 3), "1")).collect()
    }

    #[test]
    fn ladders_plans_and_costs() {
        assert_eq!(ladder(300, 12, 3), vec![12, 36, 108, 300]);
        assert_eq!(ladder(10, 12, 3), vec![10]);
        let p = plan(27, &ladder(300, 12, 3), 3);
        assert_eq!(p.iter().map(|r| r.candidates).collect::<Vec<_>>(), vec![27, 9, 3, 1]);
        // (27 * 12 + 9 * 24 + 3 * 72 + 1 * 192) / 600 = 948 / 600
        assert!((cost_of(&p, 600) - 948.0 / 600.0).abs() < 1e-12);
        assert_eq!(promote(&[(0, 0.5), (1, 0.7), (2, 0.7), (3, 0.1)], 3), vec![1, 2]);
    }

    #[test]
    fn nested_order_is_seeded_and_its_prefixes_are_spread_over_conversations() {
        let search = search_part();
        let a = nested_order(&search, 1);
        assert_eq!(a.len(), 300);
        assert_eq!(a, nested_order(&search, 1));
        assert_ne!(a, nested_order(&search, 2));
        let first: Vec<usize> = a[..12].iter().map(|id| id[1..].parse::<usize>().unwrap() % 3).collect();
        for c in 0..3 {
            assert_eq!(first.iter().filter(|&&x| x == c).count(), 4);
        }
    }

    #[test]
    fn halving_finds_a_good_candidate_at_a_fraction_of_the_cost_and_reuses_results() {
        let search = search_part();
        let mut winners = Vec::new();
        for seed in 0..20 {
            let order = nested_order(&search, seed);
            let sizes = ladder(300, 12, 3);
            let h = successive_halving(
                27,
                &order,
                &sizes,
                3,
                600,
                |_, _| None,
                |c, ids| ids.iter().map(|id| correct(c, id, seed)).collect(),
            );
            assert!((h.cost - cost_of(&plan(27, &sizes, 3), 600)).abs() < 1e-12);
            assert_eq!(h.rungs.len(), 4);
            winners.push(truth(h.ranking[0]));
            // Everything known already: the same run costs nothing.
            let again = successive_halving(
                27,
                &order,
                &sizes,
                3,
                600,
                |c, id| Some(correct(c, id, seed)),
                |_, _| panic!("nothing should be evaluated"),
            );
            assert_eq!((again.cost, &again.ranking), (0.0, &h.ranking));
        }
        let mean = winners.iter().sum::<f64>() / winners.len() as f64;
        eprintln!(
            "27 candidates (true 0.40..0.66), 20 seeds: mean true accuracy of the winner {mean:.3}, cost 1.58 of 27 full evaluations on a 600-question task set"
        );
        assert!(mean > 0.58, "{winners:?}");
    }
}
