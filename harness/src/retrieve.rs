//! Stage 3, retrieve: channels propose candidates, fusion ranks them, the list
//! is cut to top_k and its head reranked.
//!
//! Reads `retrieve.*`. Channels: `bm25` (the question's terms), `dense` (the
//! trigram vector, when the index has one) and `expansion` (pseudo-relevance
//! feedback: a second BM25 query made of the `terms` most distinctive terms,
//! not in the question, of the top [`FEEDBACK_ITEMS`] BM25 items, by tf x idf
//! summed over those items, each weighted by its BM25 score over the best
//! one's; it reaches items linked to the first hits by a name the question
//! does not contain). Each channel proposes its best `pool` items with a positive score;
//! a channel with weight 0 is not run. Fusion is weighted RRF,
//! `sum w / (kappa + rank)`, or a weighted sum of scores divided by the
//! channel's best. Fused scores then decay with the item's age before the
//! conversation's last session. The question's intent, read from its words
//! only, scales top_k. The first `rerank_top_n` items are reordered by the
//! share of question terms they contain (stable, so ties keep fused order).
//! Every ordering breaks ties by item number.

use serde::{Deserialize, Serialize};

use crate::index::Index;
use crate::ingest::Memory;
use crate::strategy::{Fusion, Retrieve};
use crate::text::words;

/// How many top BM25 items feed query expansion.
pub const FEEDBACK_ITEMS: usize = 3;

/// The channel contributing most to an item's fused score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Channel {
    Bm25,
    Dense,
    Expansion,
}

/// The intent a question's words show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Intent {
    Temporal,
    Quantity,
    Reasoning,
}

impl Intent {
    pub fn name(self) -> &'static str {
        match self {
            Intent::Temporal => "temporal",
            Intent::Quantity => "quantity",
            Intent::Reasoning => "reasoning",
        }
    }

    /// Detects the intent from the question text alone (never a dataset
    /// label). The first that matches, in the order temporal, quantity, reasoning:
    /// temporal: `when`, `how long`, `what|which date|year|month|day|time|week`;
    /// quantity: `how many|much|often`; reasoning: `would`, `likely`, `why`, `might`, `could`.
    pub fn detect(question: &str) -> Option<Intent> {
        let w = words(question);
        let has = |x: &str| w.iter().any(|y| y == x);
        let pair =
            |a: &[&str], b: &[&str]| w.windows(2).any(|p| a.contains(&p[0].as_str()) && b.contains(&p[1].as_str()));
        if has("when")
            || pair(&["how"], &["long"])
            || pair(&["what", "which"], &["date", "year", "month", "day", "time", "week"])
        {
            Some(Intent::Temporal)
        } else if pair(&["how"], &["many", "much", "often"]) {
            Some(Intent::Quantity)
        } else if ["would", "likely", "why", "might", "could"].iter().any(|x| has(x)) {
            Some(Intent::Reasoning)
        } else {
            None
        }
    }
}

/// One retrieved item.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// Index into the memory's items.
    pub item: u32,
    /// Fused score after recency decay.
    pub score: f64,
    pub channel: Channel,
}

/// The retrieval of one question.
#[derive(Debug, Clone, PartialEq)]
pub struct Retrieval {
    pub intent: Option<Intent>,
    /// Effective top_k after the intent override.
    pub k: usize,
    /// Items in final rank order (rank = position + 1).
    pub hits: Vec<Hit>,
    /// Terms the expansion channel added (empty when it did not run).
    pub expansion_terms: Vec<String>,
}

/// Indices of the best `pool` items with a positive score, best first, ties by item.
/// Three channels per question over every item: the order (score descending by
/// `total_cmp`, then item) is compared as one integer pair, not through the scores.
fn top_pool(scores: &[f64], pool: usize) -> Vec<u32> {
    let mut keys: Vec<(u64, u32)> =
        scores.iter().zip(0u32..).filter(|(x, _)| **x > 0.0).map(|(x, i)| (descending(*x), i)).collect();
    if keys.len() > pool {
        keys.select_nth_unstable(pool);
        keys.truncate(pool);
    }
    keys.sort_unstable();
    keys.into_iter().map(|(_, i)| i).collect()
}

/// An integer that orders like `f64::total_cmp`, reversed.
fn descending(x: f64) -> u64 {
    let b = x.to_bits();
    let ascending = if b >> 63 == 1 { !b } else { b | (1 << 63) };
    !ascending
}

/// Runs the retrieve stage for one question.
/// `embedded` is the question's embedding for a model's dense channel
/// ([`crate::index::Dense::is_model`]), None otherwise.
pub fn retrieve(
    question: &str,
    embedded: Option<&[f32]>,
    memory: &Memory,
    index: &Index,
    spec: &Retrieve,
) -> Retrieval {
    let intent = Intent::detect(question);
    let pool = spec.pool.max(1) as usize;
    let mult = match intent {
        Some(Intent::Temporal) => spec.intent_overrides.temporal.top_k_multiplier,
        Some(Intent::Quantity) => spec.intent_overrides.quantity.top_k_multiplier,
        Some(Intent::Reasoning) => spec.intent_overrides.reasoning.top_k_multiplier,
        None => 1.0,
    };
    let k = ((f64::from(spec.top_k) * mult).round() as usize).clamp(1, pool);
    let n = memory.items.len();
    if n == 0 {
        return Retrieval { intent, k, hits: Vec::new(), expansion_terms: Vec::new() };
    }

    let q_ids = index.bm25.query_ids(question);
    let bm25_scores = index.bm25.scores(&q_ids);
    let bm25_pool = top_pool(&bm25_scores, pool);

    let mut channels: Vec<(Channel, f64, Vec<u32>, Vec<f64>)> = Vec::with_capacity(3);
    let mut expansion_terms = Vec::new();
    if spec.expansion.enabled && spec.weights.expansion > 0.0 && !bm25_pool.is_empty() {
        let (terms, s) = expansion(index, &q_ids, &bm25_scores, &bm25_pool, spec);
        expansion_terms = terms;
        channels.push((Channel::Expansion, spec.weights.expansion, top_pool(&s, pool), s));
    }
    if spec.weights.bm25 > 0.0 {
        channels.push((Channel::Bm25, spec.weights.bm25, bm25_pool, bm25_scores));
    }
    if let (Some(dense), true) = (&index.dense, spec.weights.dense > 0.0) {
        let s = match embedded {
            Some(q) if dense.is_model() => dense.scores_embedded(q),
            _ => dense.scores(question),
        };
        channels.push((Channel::Dense, spec.weights.dense, top_pool(&s, pool), s));
    }
    channels.sort_by_key(|c| c.0);

    let mut hits = fuse(&channels, n, memory, spec);
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.item.cmp(&b.item)));
    hits.truncate(k);

    let head = (spec.rerank_top_n as usize).min(hits.len());
    if head > 1 && !q_ids.is_empty() {
        let coverage = |h: &Hit| {
            let dt = index.bm25.doc_terms(h.item);
            q_ids.iter().filter(|&&t| dt.binary_search_by_key(&t, |x| x.0).is_ok()).count()
        };
        hits[..head].sort_by_key(|h| std::cmp::Reverse(coverage(h)));
    }
    Retrieval { intent, k, hits, expansion_terms }
}

/// Pseudo-relevance feedback: the `spec.expansion.terms` terms that weigh
/// most in the top BM25 items (not in the question), and their BM25 scores.
fn expansion(
    index: &Index,
    q_ids: &[u32],
    bm25_scores: &[f64],
    bm25_pool: &[u32],
    spec: &Retrieve,
) -> (Vec<String>, Vec<f64>) {
    let mut weight: Vec<(u32, f64)> = Vec::new();
    let top = bm25_scores[bm25_pool[0] as usize];
    for &d in bm25_pool.iter().take(FEEDBACK_ITEMS) {
        let doc_weight = bm25_scores[d as usize] / top;
        for &(t, tf) in index.bm25.doc_terms(d) {
            if q_ids.contains(&t) {
                continue;
            }
            let w = doc_weight * f64::from(tf) * index.bm25.idf(t);
            match weight.iter_mut().find(|(x, _)| *x == t) {
                Some((_, acc)) => *acc += w,
                None => weight.push((t, w)),
            }
        }
    }
    weight.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| index.bm25.term(a.0).cmp(index.bm25.term(b.0))));
    weight.truncate(spec.expansion.terms as usize);
    let ex_ids: Vec<u32> = weight.iter().map(|(t, _)| *t).collect();
    let terms = weight.iter().map(|(t, _)| index.bm25.term(*t).to_string()).collect();
    (terms, index.bm25.scores(&ex_ids))
}

/// Fuses the channels' ranked pools into scored hits (RRF or weighted sum,
/// then recency decay), unsorted; items that score 0 are left out.
fn fuse(channels: &[(Channel, f64, Vec<u32>, Vec<f64>)], n: usize, memory: &Memory, spec: &Retrieve) -> Vec<Hit> {
    // Per item: contribution of each channel (bm25, dense, expansion).
    let mut contrib = vec![[0f64; 3]; n];
    let mut touched: Vec<u32> = Vec::new();
    for (ch, w, list, scores) in channels {
        let best = list.first().map_or(0.0, |&i| scores[i as usize]);
        for (r, &i) in list.iter().enumerate() {
            let c = match spec.fusion {
                Fusion::Rrf => w / (spec.rrf_kappa + (r + 1) as f64),
                Fusion::WeightedSum => w * scores[i as usize] / best,
            };
            let slot = &mut contrib[i as usize];
            if slot.iter().all(|x| *x == 0.0) {
                touched.push(i);
            }
            slot[*ch as usize] += c;
        }
    }
    touched
        .into_iter()
        .map(|i| {
            let c = contrib[i as usize];
            // Fixed summation order, so scores are identical across runs and threads.
            let mut score = c[0] + c[1] + c[2];
            let mut channel = Channel::Bm25;
            for (ch, v) in [(Channel::Dense, c[1]), (Channel::Expansion, c[2])] {
                if v > c[channel as usize] {
                    channel = ch;
                }
            }
            if let (true, Some(last), Some(day)) =
                (spec.recency_half_life_days > 0.0, memory.last_day, memory.items[i as usize].day)
            {
                score *= (-(last - day).max(0.0) / spec.recency_half_life_days).exp2();
            }
            Hit { item: i, score, channel }
        })
        .filter(|h| h.score > 0.0)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intents_come_from_words() {
        assert_eq!(Intent::detect("When did Ann move?"), Some(Intent::Temporal));
        assert_eq!(Intent::detect("How long has Ann painted?"), Some(Intent::Temporal));
        assert_eq!(Intent::detect("In which year did it happen?"), Some(Intent::Temporal));
        assert_eq!(Intent::detect("How many dogs does Ann have?"), Some(Intent::Quantity));
        assert_eq!(Intent::detect("Would Ann enjoy hiking?"), Some(Intent::Reasoning));
        assert_eq!(Intent::detect("What is Ann's dog called?"), None);
        assert_eq!(Intent::detect("Whenever"), None);
    }

    #[test]
    fn top_pool_orders_as_total_cmp_then_item() {
        // The comparison it replaced, as the reference.
        fn reference(scores: &[f64], pool: usize) -> Vec<u32> {
            let mut idx: Vec<u32> = (0..scores.len() as u32).filter(|&i| scores[i as usize] > 0.0).collect();
            idx.sort_by(|a, b| scores[*b as usize].total_cmp(&scores[*a as usize]).then(a.cmp(b)));
            idx.truncate(pool);
            idx
        }
        let specials = [0.0, -0.0, f64::MIN_POSITIVE, 1e-300, 5e-324, f64::MAX, f64::INFINITY, f64::NAN, -1.0, 1.0];
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for round in 0..300 {
            let n = round % 97;
            let scores: Vec<f64> = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    match x % 5 {
                        0 => specials[(x >> 8) as usize % specials.len()],
                        // Few distinct values, so ties are common.
                        1 => ((x >> 8) % 4) as f64 * 0.25,
                        _ => f64::from_bits(x >> 2),
                    }
                })
                .collect();
            for pool in [0, 1, 3, 50, 200] {
                assert_eq!(top_pool(&scores, pool), reference(&scores, pool), "{scores:?} pool {pool}");
            }
        }
        let sorted = [f64::INFINITY, f64::MAX, 1.0, 5e-324, 0.0, -0.0, -1.0, -f64::INFINITY];
        assert!(sorted.windows(2).all(|w| descending(w[0]) < descending(w[1])));
    }

    #[test]
    fn top_pool_breaks_ties_by_item() {
        assert_eq!(top_pool(&[1.0, 2.0, 2.0, 0.0, 0.5], 3), vec![1, 2, 0]);
        assert_eq!(top_pool(&[0.0, -1.0], 3), Vec::<u32>::new());
    }
}
