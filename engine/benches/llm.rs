//! Engine overhead of model roles: `eval` of locomo10-dev's 762 questions
//! with LLM answering and judging at concurrency 16, against the in-process
//! test server that answers at once (so the time is emend's: prompts,
//! HTTP, parsing, the reply cache, the pipeline). Target: at most 5 s.
//! Then the same evaluation again, from the reply cache (no request).
//!
//! `cargo bench -p emend --bench llm`. The dataset is
//! `../shared/data/locomo10-dev.json` from the workspace root, or
//! `EMEND_LOCOMO`; without it the benchmark says so and exits.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use emend_core::config::RoleConfig;
use emend_eval::llm::Models;
use emend_harness::strategy::JudgeKind;
use emend_harness::{Evaluator, HarnessSettings};

const TARGET_SECS: f64 = 5.0;

fn main() {
    let path = std::env::var_os("EMEND_LOCOMO")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/data/locomo10-dev.json")));
    if !path.is_file() {
        println!("llm bench: skipped ({} not found; set EMEND_LOCOMO)", path.display());
        return;
    }
    let dataset = Arc::new(emend_harness::load_path(&path).expect("locomo10-dev loads"));
    let strategy: emend_harness::Strategy = serde_yaml::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../strategies/default.yaml")).unwrap(),
    )
    .expect("the default strategy");
    let server = emend_eval::test_server::Server::roles();
    let role = |model: &str| RoleConfig { concurrency: Some(16), ..RoleConfig::new(&server.url, model) };
    let roles: BTreeMap<String, RoleConfig> =
        [("answerer".to_string(), role("answer-model")), ("judge".to_string(), role("judge-model"))].into();
    let cache = tempfile::tempdir().unwrap();
    let settings = HarnessSettings { judge: Some(JudgeKind::Llm), ..HarnessSettings::default() };

    // The deterministic pipeline alone, for reference.
    let plain = Evaluator::new(dataset.clone(), HarnessSettings::default()).unwrap();
    let t = Instant::now();
    let base = plain.evaluate(&strategy).unwrap();
    let deterministic = t.elapsed().as_secs_f64();

    let run = |label: &str| {
        // A fresh process each time: new models (the disk cache persists), new stage cache.
        let models = Arc::new(Models::new(&roles, Some(cache.path())).unwrap());
        let evaluator =
            emend_eval::llm::pipeline::plug(Evaluator::new(dataset.clone(), settings.clone()).unwrap(), &models);
        let before = server.requests();
        let t = Instant::now();
        let eval = evaluator.evaluate(&strategy).unwrap();
        let secs = t.elapsed().as_secs_f64();
        let requests = server.requests() - before;
        let usage = models.usage();
        println!(
            "llm bench {label}: {} questions in {secs:.3} s; {requests} requests (answerer {}, judge {}), \
             cache hits {} + {}, errors {}, accuracy {:.4}",
            eval.summary.n,
            usage["answerer"].requests,
            usage["judge"].requests,
            usage["answerer"].cache_hits,
            usage["judge"].cache_hits,
            eval.summary.errors,
            eval.summary.accuracy,
        );
        assert_eq!(eval.summary.errors, 0);
        (secs, requests, eval.summary.n)
    };
    let (cold, requests, n) = run("cold (every answer and verdict requested)");
    let (warm, warm_requests, _) = run("warm (replies from the disk cache)");
    println!(
        "llm bench: deterministic eval {deterministic:.3} s ({} questions); with LLM answering and judging at \
         concurrency 16: {cold:.3} s cold, {warm:.3} s warm; {requests} requests cold, {warm_requests} warm; \
         target <= {TARGET_SECS} s: {}",
        base.summary.n,
        if cold <= TARGET_SECS { "met" } else { "MISSED" }
    );
    assert_eq!(n, 762, "locomo10-dev has 762 questions in categories 1-4");
    assert_eq!(warm_requests, 0, "a second evaluation must make no request");
}
