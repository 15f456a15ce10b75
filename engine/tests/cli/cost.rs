//! The operator's token budget (`cost.max_tokens`): on the embedded dataset,
//! where the accuracy-only run's first accepted change reads 9x the context
//! of v1, a run under a budget serves only versions within it, the search
//! proposes none above it, and the confirm test's `cost_max_tokens` rule
//! rejects a candidate above it (a hand-made budget below every candidate);
//! `rollback --max-tokens` journals a budget the next runs keep. A price
//! (`cost.per_1k_tokens`) makes the search and the confirm test weigh
//! context; the cheaper step (`cost.noninferiority_margin`) rejects a
//! cheaper strategy that loses too much (embedded set) and confirms one on
//! locomo10-dev (skipped when the file is absent).

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support;
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
    // Without a budget the first accepted change reads 1262 tokens a question (docs/cost.md).
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path(), Some(600), |t| t);
    let run = json(&dir, &["evolve", "--rounds", "10", "--json", "--quiet"]);
    check_within(&dir, &run, 600.0, true);
}

#[test]
fn the_conservative_mode_keeps_the_budget_too() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path(), Some(250), |t| t.replace("method: null", "method: steps"));
    let run = json(&dir, &["evolve", "--rounds", "12", "--json", "--quiet"]);
    // The step search proposes within the budget; none of its steps here passes the confirm test.
    check_within(&dir, &run, 250.0, false);
}

#[test]
fn the_confirm_test_rejects_a_candidate_above_the_budget() {
    // Without the search (search.method: rules) the planner's one-field moves
    // reach the gates unfiltered; v1 reads about 135 tokens a question, so a
    // budget of 100 is above no candidate, and the confirm test's rule is
    // what stops every one that gets there.
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path(), Some(100), |t| t.replacen("  method: null\n", "  method: rules\n", 1));
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

/// The served version's mean context tokens on the whole task set, from `status`.
fn served_tokens(dir: &Path) -> f64 {
    json(dir, &["status", "--json"])["served_cost"]["mean_context_tokens"].as_f64().unwrap()
}

/// The rule named `name` of a judged candidate's confirm test.
fn rule<'a>(c: &'a Value, name: &str) -> Option<&'a Value> {
    c["full"]["rules"].as_array()?.iter().find(|r| r["name"] == name)
}

#[test]
fn a_price_on_context_serves_fewer_tokens_and_tests_utility() {
    // Accuracy alone serves v3 at 1892 tokens a question (0.9598); at 2 points
    // per 1,000 tokens the search and the confirm test weigh the context.
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let plain = project(&a, None, |t| t);
    json(&plain, &["evolve", "--rounds", "10", "--json", "--quiet"]);
    let priced = project(&b, None, |t| t.replacen("  per_1k_tokens: null\n", "  per_1k_tokens: 2\n", 1));
    let run = json(&priced, &["evolve", "--rounds", "10", "--json", "--quiet"]);
    assert!(run["accepted"].as_u64().unwrap() >= 1, "{run}");
    let (a, b) = (served_tokens(&plain), served_tokens(&priced));
    assert!(b < a, "the priced run serves {b} tokens a question, the accuracy-only one {a}");
    let judged = judged(&priced);
    let tested: Vec<&Value> = judged.iter().filter(|c| c["full"].is_object()).collect();
    assert!(!tested.is_empty());
    for c in tested {
        assert!(rule(c, "confirm_better").is_none(), "a priced confirm test is the utility test: {c}");
        let u = rule(c, "confirm_utility").unwrap_or_else(|| panic!("no confirm_utility rule: {c}"));
        assert!(u["detail"].as_str().unwrap().contains("worth of the token difference"), "{u}");
        assert!(c["full"]["utility"]["per_1k_tokens"] == 2.0, "{c}");
    }
    let log = ok(&priced, &["log"]);
    assert!(log.contains("utility +") && log.contains("at 2 pp per 1,000 tokens"), "{log}");
}

/// `cost.objective` only restated the price (utility with one, accuracy
/// without): it is refused at its line, with what to do.
#[test]
fn a_cost_objective_is_refused_as_a_retired_key() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path(), None, |t| t.replacen("cost:\n", "cost:\n  objective: utility\n", 1));
    let (code, _, stderr) = support::emend(&dir, &["evolve", "--rounds", "1"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("cost.objective") && stderr.contains("follows `cost.per_1k_tokens`"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn a_cheaper_step_that_loses_too_much_accuracy_is_rejected() {
    // The embedded set: from the accuracy-only winner (1892 tokens), the
    // cheaper step proposes a strategy reading about a quarter fewer tokens;
    // on the confirm part it loses more than the 5-point margin, and the
    // non-inferiority test rejects it: the cheaper gate can say no.
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path(), None, |t| t);
    json(&dir, &["evolve", "--rounds", "10", "--json", "--quiet"]);
    let served = served_tokens(&dir);
    support::edit_config(&dir, "  noninferiority_margin: null\n", "  noninferiority_margin: 0.05\n");
    json(&dir, &["evolve", "--rounds", "3", "--json", "--quiet"]);
    let cheaper: Vec<Value> = judged(&dir).into_iter().filter(|c| c["change_kind"] == "cheaper").collect();
    assert!(!cheaper.is_empty(), "no cheaper step was proposed");
    for c in &cheaper {
        let ni = rule(c, "confirm_noninferior").unwrap_or_else(|| panic!("no confirm_noninferior rule: {c}"));
        assert!(ni["pass"] == false && c["outcome"] != "accepted", "{c}");
        assert!(rule(c, "confirm_better").is_none() && rule(c, "cost_saving").is_some(), "{c}");
    }
    assert!((served_tokens(&dir) - served).abs() < 1e-9, "nothing cheaper was served");
}

#[test]
fn a_cheaper_step_is_found_and_confirmed_on_locomo() {
    let Some(data) = support::locomo() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    ok(tmp.path(), &["init", dir.to_str().unwrap(), "--tasks", data.to_str().unwrap()]);
    json(&dir, &["evolve", "--max-evals", "45", "--json", "--quiet"]);
    let before = served_tokens(&dir);
    support::edit_config(&dir, "  noninferiority_margin: null\n", "  noninferiority_margin: 0.05\n");
    json(&dir, &["evolve", "--max-evals", "45", "--json", "--quiet"]);
    let after = served_tokens(&dir);
    assert!(after <= 0.8 * before, "served {before} then {after} tokens a question");
    let accepted: Vec<Value> =
        judged(&dir).into_iter().filter(|c| c["change_kind"] == "cheaper" && c["outcome"] == "accepted").collect();
    assert_eq!(accepted.len(), 1, "one confirmed cheaper step");
    assert!(rule(&accepted[0], "confirm_noninferior").unwrap()["pass"] == true);
    let log = ok(&dir, &["log"]);
    assert!(log.contains("ACCEPTED (cheaper: tokens ") && log.contains("non-inferior at 5 pp, p = "), "{log}");
}
