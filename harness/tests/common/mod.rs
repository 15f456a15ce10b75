//! Helpers shared by the harness's integration tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;

use emend_harness::{Dataset, Evaluator, HarnessSettings, PipelineOutcome, Strategy};

pub fn repo_file(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join(rel)
}

pub fn default_strategy() -> Strategy {
    let text = std::fs::read_to_string(repo_file("strategies/default.yaml")).expect("strategies/default.yaml");
    serde_yaml::from_str(&text).expect("the default strategy parses")
}

pub fn builtin_evaluator(settings: HarnessSettings) -> Evaluator {
    Evaluator::new(Arc::new(Dataset::builtin()), settings).expect("settings fit the builtin dataset")
}

/// A copy of the strategy with `path` (dotted) set to `value`.
pub fn with(strategy: &Strategy, path: &str, value: serde_json::Value) -> Strategy {
    let mut v = serde_json::to_value(strategy).unwrap();
    let mut cur = &mut v;
    for part in path.split('.') {
        cur = cur.get_mut(part).unwrap_or_else(|| panic!("no field {path} in the strategy"));
    }
    *cur = value;
    serde_json::from_value(v).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Layer A's rule, as the engine applies it: the earliest stage that lost a
/// gold turn (only turns missing from the context are lost).
pub fn label(o: &PipelineOutcome) -> Option<&'static str> {
    if o.correct {
        return None;
    }
    if o.evidence.is_empty() {
        return Some("unresolved_evidence");
    }
    let lost: Vec<_> = o.evidence_trace.iter().filter(|t| !t.in_context).collect();
    Some(if lost.iter().any(|t| t.memory_ids.is_empty()) {
        "ingestion_gap"
    } else if lost.iter().any(|t| !t.retrieved) {
        "retrieval_gap"
    } else if !lost.is_empty() {
        "kf_filtered"
    } else {
        "generation_error"
    })
}

pub fn jsonl(outcomes: &[PipelineOutcome]) -> String {
    emend_harness::outcome::to_jsonl(outcomes)
}

/// Where locomo10-dev lives (`EMEND_LOCOMO` overrides), if it is there.
pub fn locomo_path() -> Option<PathBuf> {
    let p = std::env::var_os("EMEND_LOCOMO")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_file("../shared/data/locomo10-dev.json"));
    if p.exists() {
        Some(p)
    } else {
        eprintln!("note: {} is absent; skipping", p.display());
        None
    }
}
