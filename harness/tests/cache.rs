//! The stage cache: in-memory capacity that follows the task set, and the
//! persistent layer shared between evaluators (processes).

mod common;

use std::sync::Arc;

use common::{default_strategy, repo_file, with};
use emend_harness::{Evaluator, HarnessSettings};
use serde_json::json;

/// The embedded dataset with every conversation copied `n` times (renamed).
fn replica(n: usize) -> emend_harness::Dataset {
    let text = std::fs::read_to_string(repo_file("harness/data/synthetic-locomo.json")).unwrap();
    let samples: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
    let mut out = Vec::new();
    for copy in 0..n {
        for s in &samples {
            let mut s = s.clone();
            s["sample_id"] = json!(format!("{}-x{copy}", s["sample_id"].as_str().unwrap()));
            out.push(s);
        }
    }
    emend_harness::load_str("replica.json", &serde_json::to_string(&out).unwrap()).unwrap()
}

#[test]
fn a_retrieval_only_change_reuses_ingest_and_index_beyond_64_conversations() {
    let d = replica(20);
    let n = d.samples().len();
    assert!(n > 64, "the replica must hold more conversations than the old fixed capacity ({n})");
    let ev = Evaluator::new(Arc::new(d), HarnessSettings::default()).unwrap();
    let s = default_strategy();
    let first = ev.evaluate(&s).unwrap();
    assert_eq!(first.cache.ingest.misses as usize, n);
    let warm = ev.evaluate(&with(&s, "retrieve.top_k", json!(7))).unwrap();
    assert_eq!((warm.cache.ingest.misses, warm.cache.index.misses), (0, 0));
    assert_eq!(warm.cache.ingest.hits as usize, n);
    // An ingest change, then the first strategy again: both fit.
    ev.evaluate(&with(&s, "ingest.window_size", json!(3))).unwrap();
    let again = ev.evaluate(&s).unwrap();
    assert_eq!((again.cache.ingest.misses, again.cache.index.misses, again.cache.retrieve.misses), (0, 0, 0));
}

#[test]
fn the_disk_cache_serves_another_evaluator_with_identical_outcomes() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("stages");
    let s = default_strategy();
    let make = || {
        Evaluator::new(Arc::new(emend_harness::Dataset::builtin()), HarnessSettings::default())
            .unwrap()
            .with_disk_cache(&root, 1 << 30)
            .unwrap()
    };
    let plain = Evaluator::new(Arc::new(emend_harness::Dataset::builtin()), HarnessSettings::default()).unwrap();
    let want = plain.evaluate(&s).unwrap();

    let cold = make().evaluate(&s).unwrap();
    let n = cold.memory.conversations as u64;
    assert_eq!(cold.cache.disk.hits, 0);
    assert_eq!(cold.cache.disk.misses, 2 * n, "ingest and index were looked up on disk");
    assert_eq!(cold.outcomes, want.outcomes);

    // A new evaluator (a new process) with a retrieval-only change: no stage before retrieval runs.
    let s2 = with(&s, "retrieve.top_k", json!(9));
    let warm = make().evaluate(&s2).unwrap();
    assert_eq!(warm.cache.disk.hits, 2 * n);
    assert_eq!((warm.cache.ingest.misses, warm.cache.index.misses), (0, 0));
    assert_eq!(warm.outcomes, plain.evaluate(&s2).unwrap().outcomes);
    assert_eq!(warm.memory, want.memory);

    // Another harness (settings) reads none of it.
    let other = Evaluator::new(
        Arc::new(emend_harness::Dataset::builtin()),
        HarnessSettings { budget_ceiling: 1500, ..HarnessSettings::default() },
    )
    .unwrap()
    .with_disk_cache(&root, 1 << 30)
    .unwrap();
    assert_eq!(other.evaluate(&s).unwrap().cache.disk.hits, 0);
}

#[test]
fn the_disk_cache_stays_within_its_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("stages");
    let bound = 200_000u64;
    let ev = Evaluator::new(Arc::new(replica(3)), HarnessSettings::default())
        .unwrap()
        .with_disk_cache(&root, bound)
        .unwrap();
    let s = default_strategy();
    for w in [2, 3, 4] {
        ev.evaluate(&with(&s, "ingest.window_size", json!(w))).unwrap();
    }
    let total: u64 = walk(&root).iter().map(|p| std::fs::metadata(p).unwrap().len()).sum();
    assert!(total > 0 && total <= bound, "{total} bytes on disk, bound {bound}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}
