//! Hash statistics of the trigram channel on collision tasks: how often the
//! `dense_dim` buckets make two different character trigrams one, which is
//! what the hash-dimension ablation varies.
//!
//! A task's K memories share every trigram but those of the answer slot. A
//! memory's *discriminating* trigrams are those not in every memory of its
//! task (distinct trigrams, each counted once). Per memory, against the
//! query's distinct trigrams: *exact* matches are discriminating trigrams
//! that the query has too (a real sub-word cue: the same three characters);
//! *spurious* matches are discriminating trigrams the query does not have
//! whose bucket one of the query's trigrams falls in (a hash collision: the
//! channel sees a match where there is none). Per pair of memories of a
//! task, the pair *shares a bucket* when a trigram only the one has and a
//! trigram only the other has fall in the same bucket. Signs are ignored (a
//! colliding pair may add or cancel).

use std::collections::BTreeSet;

use rayon::prelude::*;
use serde::Serialize;

use super::CollisionTask;
use crate::text::trigram_hashes;

/// The hash statistics of a set of tasks at one dimension (tasks with K >= 2).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HashStats {
    pub dim: usize,
    pub tasks: usize,
    /// Memory pairs within a task.
    pub pairs: usize,
    /// Pairs whose own trigrams share a bucket.
    pub shared_pairs: usize,
    pub golds: usize,
    pub distractors: usize,
    /// Sums over the gold memories (exact, spurious) and the distractors.
    pub gold_exact: usize,
    pub gold_spurious: usize,
    pub distractor_exact: usize,
    pub distractor_spurious: usize,
}

impl HashStats {
    /// Adds another set's counts (of the same dimension) to these.
    pub fn merge(&mut self, o: &HashStats) {
        self.tasks += o.tasks;
        self.pairs += o.pairs;
        self.shared_pairs += o.shared_pairs;
        self.golds += o.golds;
        self.distractors += o.distractors;
        self.gold_exact += o.gold_exact;
        self.gold_spurious += o.gold_spurious;
        self.distractor_exact += o.distractor_exact;
        self.distractor_spurious += o.distractor_spurious;
    }

    /// The share of memory pairs that share a bucket.
    pub fn shared_rate(&self) -> f64 {
        ratio(self.shared_pairs, self.pairs)
    }

    /// Mean (exact, spurious) matches with the query per gold memory.
    pub fn gold_means(&self) -> (f64, f64) {
        (ratio(self.gold_exact, self.golds), ratio(self.gold_spurious, self.golds))
    }

    /// Mean (exact, spurious) matches with the query per distractor.
    pub fn distractor_means(&self) -> (f64, f64) {
        (ratio(self.distractor_exact, self.distractors), ratio(self.distractor_spurious, self.distractors))
    }
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// One [`HashStats`] per dimension in `dims` (in that order) over `tasks`;
/// tasks with one memory (K = 1) have no distractor and are skipped. Tasks
/// are counted in parallel; the sums do not depend on the order.
pub fn hash_stats(tasks: &[CollisionTask], dims: &[usize]) -> Vec<HashStats> {
    let per_task: Vec<Vec<HashStats>> = tasks
        .par_iter()
        .filter(|t| t.memories.len() >= 2)
        .map(|task| {
            let query: BTreeSet<u64> = trigram_hashes(&task.query).into_iter().collect();
            let sets: Vec<BTreeSet<u64>> =
                task.memories.iter().map(|m| trigram_hashes(m).into_iter().collect()).collect();
            let common: BTreeSet<u64> =
                sets.iter().skip(1).fold(sets[0].clone(), |acc, s| acc.intersection(s).copied().collect());
            let own: Vec<Vec<u64>> = sets.iter().map(|s| s.difference(&common).copied().collect()).collect();
            dims.iter()
                .map(|&dim| {
                    let mut st = HashStats { dim, ..HashStats::default() };
                    add_task(&mut st, task.gold, &query, &sets, &own);
                    st
                })
                .collect()
        })
        .collect();
    let mut out: Vec<HashStats> = dims.iter().map(|&dim| HashStats { dim, ..HashStats::default() }).collect();
    for t in &per_task {
        for (o, st) in out.iter_mut().zip(t) {
            o.merge(st);
        }
    }
    out
}

fn add_task(st: &mut HashStats, gold: usize, query: &BTreeSet<u64>, sets: &[BTreeSet<u64>], own: &[Vec<u64>]) {
    let dim = st.dim.max(1) as u64;
    let query_buckets: BTreeSet<u64> = query.iter().map(|h| h % dim).collect();
    st.tasks += 1;
    for (i, d) in own.iter().enumerate() {
        let exact = d.iter().filter(|h| query.contains(h)).count();
        let spurious = d.iter().filter(|h| !query.contains(h) && query_buckets.contains(&(*h % dim))).count();
        if i == gold {
            st.golds += 1;
            st.gold_exact += exact;
            st.gold_spurious += spurious;
        } else {
            st.distractors += 1;
            st.distractor_exact += exact;
            st.distractor_spurious += spurious;
        }
    }
    let mut a: Vec<u64> = Vec::new();
    for i in 0..own.len() {
        for j in i + 1..own.len() {
            st.pairs += 1;
            a.clear();
            a.extend(own[i].iter().filter(|h| !sets[j].contains(h)).map(|h| h % dim));
            a.sort_unstable();
            let shared = own[j].iter().any(|h| !sets[i].contains(h) && a.binary_search(&(h % dim)).is_ok());
            st.shared_pairs += usize::from(shared);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collision::{Vocab, generate_cell};

    #[test]
    fn collisions_fall_as_the_dimension_grows_and_exact_matches_do_not_move() {
        let tasks = generate_cell(Vocab::Seed, "technical", 8, 40, 1, 0).unwrap();
        let s = hash_stats(&tasks, &[16, 256, 1 << 24]);
        assert!(s.iter().all(|x| x.tasks == 40 && x.pairs == 40 * 28 && x.golds == 40 && x.distractors == 280));
        assert!(s[0].shared_rate() > s[1].shared_rate() && s[1].shared_rate() > s[2].shared_rate());
        assert!(s[0].gold_means().1 > s[2].gold_means().1);
        // Exact matches do not depend on the buckets; at 2^24 buckets collisions are (almost) gone.
        assert_eq!(s[0].gold_exact, s[2].gold_exact);
        assert!(s[2].shared_rate() < 0.01 && s[2].distractor_means().1 < 0.01, "{:?}", s[2]);
        // K = 1 tasks have no pair and no distractor: skipped.
        assert_eq!(hash_stats(&generate_cell(Vocab::Seed, "tool", 1, 5, 1, 0).unwrap(), &[64])[0].tasks, 0);
    }
}
