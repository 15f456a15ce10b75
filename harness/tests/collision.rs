//! The entity-collision protocol on the default strategy: the BM25 floor is
//! 1/K by construction, and the paired results are reproducible.

mod common;

use emend_harness::collision::{CollisionSpec, Vocab, bm25_only, hit_at_1, run};
use serde_json::json;

fn spec(seed: u64) -> CollisionSpec {
    CollisionSpec { entities: Some(200), ..CollisionSpec::new(seed) }
}

/// Every cell's BM25-only hit@1 lies within 3 standard errors of 1/K, and
/// pooled over the tags within 3 standard errors too.
#[test]
fn bm25_only_hit_at_1_is_one_over_k_within_sampling_error() {
    let cells = run(&spec(11), &common::default_strategy()).unwrap();
    assert_eq!(cells.len(), 5 * 5);
    for k in [1usize, 2, 4, 8, 16] {
        let p = 1.0 / k as f64;
        let mut pooled = (0usize, 0usize);
        for c in cells.iter().filter(|c| c.k == k) {
            let n = c.tasks.len();
            assert_eq!(n, 200);
            let se = (p * (1.0 - p) / n as f64).sqrt();
            assert!((c.bm25_hit1() - p).abs() <= 3.0 * se, "{} k={k}: {} vs {p}", c.tag, c.bm25_hit1());
            pooled.0 += c.tasks.iter().filter(|(_, r)| r.bm25).count();
            pooled.1 += n;
        }
        let se = (p * (1.0 - p) / pooled.1 as f64).sqrt();
        let rate = pooled.0 as f64 / pooled.1 as f64;
        assert!((rate - p).abs() <= 3.0 * se, "k={k}: pooled {rate} vs {p}");
    }
}

/// The strategy reduced to BM25 scores exactly like the BM25 column: its
/// retrieval is a pure tie, broken by the seeded memory order.
#[test]
fn the_bm25_only_strategy_is_the_floor_and_results_are_seeded() {
    let s = common::default_strategy();
    let a = run(&spec(5), &bm25_only(&s)).unwrap();
    for c in &a {
        assert!(c.tasks.iter().all(|(_, r)| r.bm25 == r.strategy), "{} k={}", c.tag, c.k);
    }
    let b = run(&spec(5), &s).unwrap();
    assert_eq!(b, run(&spec(5), &s).unwrap());
    assert_ne!(b, run(&spec(6), &s).unwrap());
}

/// With weighted-sum fusion BM25's tie adds the same score to each of the K
/// memories, so the fused order is the dense channel's: the same hit@1 as
/// the dense channel alone, task by task. Under RRF the tie is ranked (by
/// the memories' seeded order) and enters the fused score as if it were a
/// signal: at K = 2 (ranks 1 and 2 in both channels, kappa the same) the
/// fused hit@1 is BM25's, task by task, whatever the dense channel says.
#[test]
fn weighted_sum_fusion_carries_no_bm25_tie_signal_and_rrf_does() {
    let rrf = common::default_strategy();
    assert_eq!(rrf.retrieve.fusion, emend_harness::strategy::Fusion::Rrf);
    let ws = common::with(&rrf, "retrieve.fusion", json!("weighted_sum"));
    let dense_only = common::with(&ws, "retrieve.weights.bm25", json!(0.0));
    let lexical = bm25_only(&rrf);
    let (mut differs, mut rrf_k2) = (0, 0);
    for vocab in [Vocab::Seed, Vocab::Emend] {
        for paraphrase in [1, 4] {
            let spec = CollisionSpec { vocab, paraphrase, entities: Some(40), ..CollisionSpec::new(2) };
            for tag in &spec.tags {
                for &k in &spec.ks {
                    for t in spec.cell(tag, k).unwrap() {
                        let fused = hit_at_1(&t, &ws, None).unwrap();
                        assert_eq!(fused, hit_at_1(&t, &dense_only, None).unwrap(), "{t}");
                        let floor = hit_at_1(&t, &lexical, None).unwrap();
                        differs += usize::from(fused != floor);
                        if k == 2 {
                            assert_eq!(hit_at_1(&t, &rrf, None).unwrap(), floor, "{t}");
                            rrf_k2 += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(differs > 0 && rrf_k2 == 2 * 2 * 5 * 40);
}
