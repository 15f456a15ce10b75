//! The embedded default dataset: committed bytes, shape, and the failure
//! modes it is built to show.

mod common;
/// The generator is a dev tool (the `gen_synthetic` example), not library code.
#[path = "../examples/gen_synthetic/synthetic.rs"]
mod synthetic;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use emend_harness::{Category, Dataset, HarnessSettings, Selection};

#[test]
fn committed_dataset_is_exactly_what_the_seed_generates() {
    let committed =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/data/synthetic-locomo.json")).unwrap();
    // Compare without printing a 300 KB diff on failure.
    let generated = synthetic::generate(synthetic::SEED);
    assert!(
        generated == committed,
        "data/synthetic-locomo.json is stale: run `cargo run -p emend-harness --example gen_synthetic`"
    );
}

#[test]
fn builtin_dataset_has_the_promised_shape() {
    let d = Dataset::builtin();
    assert_eq!(d.name(), "builtin");
    assert!(d.samples().len() >= 3);
    let qs: Vec<_> = d.questions().collect();
    assert!(qs.len() >= 300, "{} questions", qs.len());
    let cats: BTreeSet<Category> = qs.iter().map(|q| q.category).collect();
    assert_eq!(
        cats,
        [Category::MultiHop, Category::Temporal, Category::OpenDomain, Category::SingleHop].into_iter().collect()
    );
    for s in d.samples() {
        assert!(s.sessions.len() >= 10);
        assert!(s.sessions.iter().all(|x| x.date.is_some()), "every session is dated");
    }
    // Messy ids on purpose: one unresolvable extra id, one question with none resolvable.
    let sel = d.select(&Selection::default()).unwrap();
    assert_eq!(sel.len(), qs.len());
    let unresolved: Vec<_> = qs.iter().filter(|q| !q.unresolved.is_empty()).collect();
    assert_eq!(unresolved.len(), 2);
    assert!(unresolved.iter().any(|q| q.evidence.is_empty()));
    assert!(qs.iter().any(|q| q.raw_evidence.iter().any(|e| e.contains(';'))));
    assert!(qs.iter().any(|q| q.raw_evidence.iter().any(|e| e.split(':').nth(1).is_some_and(|n| n.starts_with('0')))));
    assert!(qs.iter().any(|q| q.answer.as_deref().is_some_and(|a| a.parse::<u32>().is_ok())));
}

fn labels(strategy: &emend_harness::Strategy) -> (f64, BTreeMap<&'static str, usize>) {
    let ev = builtin_evaluator(HarnessSettings::default());
    let e = ev.evaluate(strategy).unwrap();
    let mut m = BTreeMap::new();
    for o in &e.outcomes {
        if let Some(l) = label(o) {
            *m.entry(l).or_default() += 1;
        }
    }
    (e.summary.accuracy, m)
}

#[test]
fn a_poor_strategy_loses_evidence_at_every_stage() {
    let poor = with(&default_strategy(), "ingest.dedup_threshold", 0.5.into());
    let poor = with(&poor, "retrieve.top_k", 10.into());
    let poor = with(&poor, "assemble.token_budget", 150.into());
    let (_, m) = labels(&poor);
    for l in ["ingestion_gap", "retrieval_gap", "kf_filtered"] {
        assert!(m.get(l).copied().unwrap_or(0) >= 3, "{l} missing: {m:?}");
    }
}

#[test]
fn the_default_strategy_leaves_headroom() {
    let default = default_strategy();
    let (base, m) = labels(&default);
    assert!(m.get("retrieval_gap").copied().unwrap_or(0) > 0, "{m:?}");
    assert!(m.get("ingestion_gap").copied().unwrap_or(0) > 0, "near-duplicates cost the default evidence: {m:?}");
    let mut better = default.clone();
    better.ingest.dedup_threshold = 1.0;
    better.ingest.stamp_date = true;
    better.index.dense_dim = 1024;
    better.retrieve.top_k = 30;
    better.retrieve.weights.bm25 = 0.5;
    better.retrieve.expansion.enabled = true;
    better.retrieve.weights.expansion = 1.0;
    better.assemble.token_budget = 2000;
    let (best, _) = labels(&better);
    assert!(best >= base + 0.15, "default {base:.3}, hand-edited {best:.3}");
    assert!(base < 0.8, "default {base:.3} leaves too little room");
}
