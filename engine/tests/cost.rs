//! The operator's token budget (`cost.max_tokens`): on the embedded dataset,
//! where the accuracy-only run's first accepted change reads 9x the context
//! of v1, a run under a budget serves only versions within it, the search
//! proposes none above it, and the confirm test's `cost_max_tokens` rule
//! rejects a candidate above it (a hand-made budget below every candidate);
//! `rollback --max-tokens` journals a budget the next runs keep.

use std::path::{Path, PathBuf};

use serde_json::Value;

mod support;
use support::{json, ok};

/// A project on the embedded dataset with `cost.max_tokens: budget` when given (and `edit` applied).
fn project(tmp: &Path, budget: Option<u32>, edit: impl Fn(String) -> String) -> PathBuf {
    let dir = tmp.join("p");
    ok(tmp, &["init", dir.to_str().unwrap(), "--tasks", "builtin"]);
    let cfg = dir.join("emend.yaml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    assert!(text.contains("  max_tokens: null\n"), "the generated emend.yaml lists cost.max_tokens");
    let text = match budget {
        Some(n) => text.replacen("  max_tokens: null\n", &format!("  max_tokens: {n}\n"), 1),
        None => text,
    };
    std::fs::write(&cfg, edit(text)).unwrap();
    dir
}

/// Every candidate the gates judged, from the journal.
fn judged(dir: &Path) -> Vec<Value> {
    ok(dir, &["journal", "export"])
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["kind"] == "candidate_judged")
        .map(|e| e["payload"].clone())
        .collect()
}

/// Every version served within `budget`, and every confirm test's budget
/// rule passed (at least one ran); `accepts`: the run served a new version.
fn check_within(dir: &Path, run: &Value, budget: f64, accepts: bool) {
    if accepts {
        assert!(run["accepted"].as_u64().unwrap() >= 1, "a budget of {budget} still leaves room to improve: {run}");
    }
    let served = run["served_version"].as_u64().unwrap();
    for v in 2..=served {
        let show = json(dir, &["show", &format!("v{v}"), "--json"]);
        let tokens = show["version"]["cost"]["mean_context_tokens"].as_f64().unwrap();
        assert!(tokens <= budget + 1e-9, "v{v} reads {tokens} tokens a question against a budget of {budget}");
    }
    let mut tested = 0;
    for c in judged(dir) {
        let Some(full) = c["full"].as_object() else { continue };
        tested += 1;
        let rule = full["rules"].as_array().unwrap().iter().find(|r| r["name"] == "cost_max_tokens");
        let rule = rule.unwrap_or_else(|| panic!("{} has no cost_max_tokens rule: {full:?}", c["id"]));
        assert!(rule["pass"] == true, "the search proposed {} above the budget: {rule}", c["id"]);
    }
    assert!(tested >= 1, "no candidate reached the confirm test: {run}");
}

#[test]
fn a_run_under_a_token_budget_serves_only_versions_within_it() {
    // Without a budget the first accepted change reads 1262 tokens a question (README).
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path(), Some(600), |t| t);
    let run = json(&dir, &["evolve", "--rounds", "10", "--json", "--quiet"]);
    check_within(&dir, &run, 600.0, true);
}

#[test]
fn the_conservative_mode_keeps_the_budget_too() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path(), Some(250), |t| t.replace("step_bound: off", "step_bound: schema"));
    let run = json(&dir, &["evolve", "--rounds", "12", "--json", "--quiet"]);
    // The step search proposes within the budget; none of its steps here passes the confirm test.
    check_within(&dir, &run, 250.0, false);
}

#[test]
fn the_confirm_test_rejects_a_candidate_above_the_budget() {
    // Without the search (loop.search: false) the planner's one-field moves
    // reach the gates unfiltered; v1 reads about 135 tokens a question, so a
    // budget of 100 is above no candidate, and the confirm test's rule is
    // what stops every one that gets there.
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path(), Some(100), |t| t.replacen("  search: true\n", "  search: false\n", 1));
    let run = json(&dir, &["evolve", "--rounds", "6", "--json", "--quiet"]);
    assert_eq!(run["accepted"], 0, "{run}");
    assert_eq!(run["served_version"], 1, "{run}");
    let mut tested = 0;
    for c in judged(&dir) {
        if let Some(full) = c["full"].as_object() {
            let rule = full["rules"].as_array().unwrap().iter().find(|r| r["name"] == "cost_max_tokens").unwrap();
            assert!(rule["pass"] == false && c["outcome"] != "accepted", "{}: {rule}", c["id"]);
            tested += 1;
        }
    }
    assert!(tested >= 1, "no candidate reached the confirm test in 6 rounds");
}

#[test]
fn a_rollback_with_max_tokens_keeps_the_next_runs_within_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path(), None, |t| t);
    let first = json(&dir, &["evolve", "--rounds", "10", "--json", "--quiet"]);
    assert!(first["served_mean_tokens"].as_f64().unwrap() > 600.0, "{first}");
    let (code, out, err) = support::emend(&dir, &["rollback", "--to", "v1", "--max-tokens", "0", "--reason", "x"]);
    assert_eq!(code, 2, "--max-tokens 0 is refused: {out}{err}");
    let back = json(&dir, &["rollback", "--to", "v1", "--max-tokens", "600", "--reason", "context cost", "--json"]);
    assert_eq!(back["budget"]["max_tokens"], 600, "{back}");
    let status = json(&dir, &["status", "--json"]);
    assert_eq!(status["max_tokens"], 600, "{status}");
    assert!(ok(&dir, &["status"]).contains("budget: at most 600 mean context tokens a question; set by"));
    assert!(ok(&dir, &["log"]).contains("budget: the next runs keep 600 mean context tokens a question"));
    let before = judged(&dir).len();
    let run = json(&dir, &["evolve", "--rounds", "10", "--json", "--quiet"]);
    let v = run["served_version"].as_u64().unwrap();
    let show = json(&dir, &["show", &format!("v{v}"), "--json"]);
    assert!(show["version"]["cost"]["mean_context_tokens"].as_f64().unwrap() <= 600.0 + 1e-9, "{show}");
    // Every confirm test after the rollback checked the journaled budget (emend.yaml sets none).
    for c in judged(&dir).into_iter().skip(before) {
        if let Some(full) = c["full"].as_object() {
            let rule = full["rules"].as_array().unwrap().iter().find(|r| r["name"] == "cost_max_tokens");
            assert!(rule.is_some_and(|r| r["pass"] == true), "{}: {full:?}", c["id"]);
        }
    }
}
