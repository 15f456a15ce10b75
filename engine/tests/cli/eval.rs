//! `emend eval` end to end: reports, outcome files, determinism and the exit
//! codes of bad input. Tests on locomo10-dev skip (with a note) when the file
//! is absent; `EMEND_LOCOMO` points elsewhere.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value;

fn repo(rel: &str) -> PathBuf {
    crate::support::workspace().join(rel)
}

fn default_strategy() -> PathBuf {
    repo("strategies/default.yaml")
}

fn harness_fixture(name: &str) -> PathBuf {
    repo("harness/tests/fixtures").join(name)
}

/// Runs `emend eval ARGS`: (exit code, stdout, stderr).
fn eval(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(crate::support::bin()).arg("eval").args(args).output().expect("emend runs");
    (
        out.status.code().expect("exited"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn json_of(stdout: &str) -> Value {
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("not one JSON object ({e}): {stdout}"))
}

#[test]
fn builtin_tasks_report_per_category_figures() {
    let s = default_strategy();
    let (code, out, err) = eval(&["--strategy", s.to_str().unwrap(), "--tasks", "builtin"]);
    assert_eq!(code, 0, "{err}");
    for needle in [
        "accuracy",
        "multi-hop",
        "temporal",
        "open-domain",
        "single-hop",
        "mean context tokens",
        "unresolved evidence",
        "time",
    ] {
        assert!(out.contains(needle), "{needle} missing in:\n{out}");
    }
    assert!(!out.contains("adversarial"));
}

#[test]
fn json_report_has_the_promised_fields() {
    let s = default_strategy();
    let (code, out, err) = eval(&["--strategy", s.to_str().unwrap(), "--json", "--conversations", "syn-1,syn-2"]);
    assert_eq!(code, 0, "{err}");
    let v = json_of(&out);
    for key in [
        "accuracy",
        "n",
        "correct",
        "per_category",
        "mean_context_tokens",
        "unresolved_evidence",
        "strategy_hash",
        "dataset_hash",
        "harness_hash",
        "elapsed_ms",
    ] {
        assert!(v.get(key).is_some(), "{key} missing: {v}");
    }
    let n = v["n"].as_u64().unwrap();
    let per: u64 = v["per_category"].as_object().unwrap().values().map(|c| c["n"].as_u64().unwrap()).sum();
    assert_eq!(per, n);
    assert!(v["per_category"]["multi-hop"]["accuracy"].is_number());
    assert_eq!(v["strategy_hash"].as_str().unwrap().len(), 64);
    // Restricting the conversations changes the harness identity, not the dataset's.
    let (_, all, _) = eval(&["--strategy", s.to_str().unwrap(), "--json"]);
    let all = json_of(&all);
    assert!(all["n"].as_u64().unwrap() > n);
    assert_eq!(all["dataset_hash"], v["dataset_hash"]);
    assert_ne!(all["harness_hash"], v["harness_hash"]);
}

#[test]
fn outcome_files_are_written_and_identical_across_runs() {
    let dir = tempfile::tempdir().unwrap();
    let s = default_strategy();
    let a = dir.path().join("a.jsonl");
    let b = dir.path().join("b.jsonl");
    for out in [&a, &b] {
        let (code, _, err) = eval(&["--strategy", s.to_str().unwrap(), "--outcomes", out.to_str().unwrap(), "--json"]);
        assert_eq!(code, 0, "{err}");
    }
    let (ta, tb) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    assert!(ta == tb, "two runs wrote different outcome files");
    let lines: Vec<Value> = String::from_utf8(ta).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(lines.len() > 300);
    for key in [
        "id",
        "conversation",
        "category",
        "correct",
        "evidence",
        "unresolved_evidence",
        "evidence_memory_ids",
        "retrieved",
        "context_ids",
        "context_tokens",
        "evidence_trace",
    ] {
        assert!(lines[0].get(key).is_some(), "{key} missing: {}", lines[0]);
    }
    let r = &lines[0]["retrieved"][0];
    for key in ["id", "rank", "score", "channel"] {
        assert!(r.get(key).is_some(), "retrieved.{key} missing: {r}");
    }
    // No temporary file is left behind.
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 2, "{names:?}");
}

#[test]
fn the_f1_judge_and_adversarial_questions_are_options() {
    let s = default_strategy();
    let (code, out, err) = eval(&["--strategy", s.to_str().unwrap(), "--judge", "f1", "--json"]);
    assert_eq!(code, 0, "{err}");
    let f1 = json_of(&out);
    let (_, out, _) = eval(&["--strategy", s.to_str().unwrap(), "--json"]);
    let ev = json_of(&out);
    assert_ne!(f1["harness_hash"], ev["harness_hash"]);
    assert_ne!(f1["correct"], ev["correct"]);
    let messy = harness_fixture("messy.json");
    let (code, out, err) = eval(&[
        "--strategy",
        s.to_str().unwrap(),
        "--tasks",
        messy.to_str().unwrap(),
        "--include-adversarial",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v = json_of(&out);
    assert_eq!(v["n"], 4);
    assert_eq!(v["per_category"]["adversarial"]["n"], 1);
    assert_eq!(v["unresolved_evidence"], 1);
}

#[test]
fn bad_input_exits_2_naming_the_problem() {
    let s = default_strategy();
    let s = s.to_str().unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["--tasks".into(), harness_fixture("bad-evidence.json").display().to_string()],
            "bad-evidence.json: sample 0 (conv-1): qa[1].evidence: expected a list of strings, got 5",
        ),
        (
            vec!["--tasks".into(), harness_fixture("not-json.json").display().to_string()],
            "not-json.json: not valid JSON",
        ),
        (
            vec!["--tasks".into(), harness_fixture("wrong-shape.json").display().to_string()],
            "wrong-shape.json: top level: expected a list of samples, got an object",
        ),
        (
            vec!["--tasks".into(), harness_fixture("missing-question.json").display().to_string()],
            "missing-question.json: sample 0 (conv-1): qa[0].question: missing",
        ),
        (vec!["--tasks".into(), "/nonexistent/tasks.json".into()], "cannot read"),
        (vec!["--conversations".into(), "conv-404".into()], "no conversation \"conv-404\""),
        (vec!["--outcomes".into(), "/nonexistent/dir/out.jsonl".into()], "no directory /nonexistent/dir"),
        (vec!["--judge".into(), "llm".into()], "judge.kind: llm needs roles.judge"),
    ];
    for (extra, expected) in cases {
        let mut args = vec!["--strategy", s];
        args.extend(extra.iter().map(String::as_str));
        let (code, out, err) = eval(&args);
        assert_eq!(code, 2, "{extra:?}: {out}{err}");
        assert!(err.contains(expected), "{extra:?}: expected {expected:?} in {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let bad_strategy = repo("engine/tests/fixtures/strategies/out-of-range.yaml");
    let (code, _, err) = eval(&["--strategy", bad_strategy.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("retrieve.top_k"), "{err}");
}

#[test]
fn a_strategy_needing_a_model_role_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(default_strategy()).unwrap().replace("unit: window", "unit: fact");
    let p = dir.path().join("fact.yaml");
    std::fs::write(&p, text).unwrap();
    let (code, _, err) = eval(&["--strategy", p.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("ingest.unit: fact needs roles.extractor"), "{err}");
}

#[test]
fn locomo_dev_has_762_questions_and_stable_outcomes() {
    let Some(tasks) = crate::support::locomo() else { return };
    let dir = tempfile::tempdir().unwrap();
    let s = default_strategy();
    let mut files = Vec::new();
    for name in ["a.jsonl", "b.jsonl"] {
        let out = dir.path().join(name);
        let (code, stdout, err) = eval(&[
            "--strategy",
            s.to_str().unwrap(),
            "--tasks",
            tasks.to_str().unwrap(),
            "--outcomes",
            out.to_str().unwrap(),
            "--json",
        ]);
        assert_eq!(code, 0, "{err}");
        let v = json_of(&stdout);
        assert_eq!(v["n"], 762);
        assert_eq!(v["per_category"].as_object().unwrap().len(), 4);
        assert_eq!(v["unresolved_evidence"], 2);
        files.push(std::fs::read(out).unwrap());
    }
    assert!(files[0] == files[1], "two runs wrote different outcome files");
}

/// A model directory that is not there is bad input naming the setting; a
/// binary built without the `minilm` feature refuses any model directory (and
/// `dense_kind: minilm`) with exit 2 and the command that builds it in.
#[test]
fn a_minilm_model_dir_is_refused_naming_the_setting_or_a_build_without_the_feature() {
    let out = Command::new(crate::support::bin())
        .arg("eval")
        .args(["--strategy", default_strategy().to_str().unwrap()])
        .env("EMEND_MINILM_DIR", "/nonexistent/minilm")
        .output()
        .expect("emend runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    if cfg!(feature = "minilm") {
        assert!(err.contains("EMEND_MINILM_DIR: /nonexistent/minilm: not a directory"), "{err}");
        return;
    }
    assert!(err.contains("EMEND_MINILM_DIR: /nonexistent/minilm: this emend is built without MiniLM support"), "{err}");
    assert!(err.contains("--features minilm"), "{err}");

    let tmp = tempfile::tempdir().unwrap();
    let strategy = std::fs::read_to_string(default_strategy()).unwrap();
    let minilm = tmp.path().join("minilm.yaml");
    std::fs::write(&minilm, strategy.replace("dense_kind: trigram", "dense_kind: minilm")).unwrap();
    let out = Command::new(crate::support::bin())
        .args(["eval", "--strategy", minilm.to_str().unwrap()])
        .env_remove("EMEND_MINILM_DIR")
        .output()
        .expect("emend runs");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("index.dense_kind: minilm") && err.contains("--features minilm"), "{err}");
}

/// A binary built without the `llm` feature refuses a project that
/// configures a model role, with exit 2, the role and the build command.
#[cfg(not(feature = "llm"))]
#[test]
fn a_binary_without_llm_refuses_a_configured_role_and_says_how_to_build_it_in() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let run = |args: &[&str]| {
        let out = Command::new(crate::support::bin()).current_dir(dir).args(args).output().expect("emend runs");
        (out.status.code(), String::from_utf8_lossy(&out.stderr).to_string())
    };
    let (code, err) = run(&["init", "--tasks", "builtin"]);
    assert_eq!(code, Some(0), "{err}");
    let config = std::fs::read_to_string(dir.join("emend.yaml")).unwrap();
    let roles = "roles:\n  judge: {base_url: \"http://127.0.0.1:9/v1\", model: \"m\"}\n";
    assert!(config.contains("\nroles: {}\n"), "{config}");
    std::fs::write(dir.join("emend.yaml"), config.replace("\nroles: {}\n", &format!("\n{roles}"))).unwrap();
    for args in [&["evolve", "--rounds", "1"][..], &["eval", "--strategy", "strategies/served.yaml"][..]] {
        let (code, err) = run(args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains("roles.judge: this emend is built without LLM support"), "{args:?}: {err}");
        assert!(err.contains("--features llm"), "{args:?}: {err}");
    }
}

/// Inside a project, what the flags leave out is the project's harness: its
/// task file, adversarial questions and judge, so the figures and the
/// harness hash (with `harness.version` in it) are the ones the journal
/// records; a flag still wins.
#[test]
fn inside_a_project_eval_measures_what_the_journal_measures() {
    use crate::support::{edit_config, json, ok};
    let tmp = tempfile::tempdir().unwrap();
    std::fs::copy(harness_fixture("messy.json"), tmp.path().join("messy.json")).unwrap();
    ok(tmp.path(), &["init", "p", "--tasks", "messy.json"]);
    let dir = tmp.path().join("p");
    edit_config(&dir, "include_adversarial: false", "include_adversarial: true");
    edit_config(&dir, "judge: evidence", "judge: f1");
    // The system's version is part of the harness hash the journal records.
    edit_config(&dir, "  version: null", "  version: 'memory service 1.2'");
    // A run whose budget pays for the served strategy's evaluation alone: it journals it.
    ok(&dir, &["evolve", "--rounds", "1", "--max-evals", "1", "--quiet"]);
    let journal = ok(&dir, &["journal", "export"]);
    let v = json(&dir, &["eval", "--strategy", "strategies/served.yaml", "--json"]);
    assert_eq!((v["tasks"].as_str(), v["n"].as_u64()), (Some("messy.json"), Some(4)), "{v}");
    let hash = v["harness_hash"].as_str().unwrap();
    assert!(journal.contains(&format!("\"harness_hash\":\"{hash}\"")), "{hash} is not the journal's: {journal}");
    let s = default_strategy();
    let messy = harness_fixture("messy.json");
    let (code, out, err) = eval(&[
        "--no-project",
        "--strategy",
        s.to_str().unwrap(),
        "--tasks",
        messy.to_str().unwrap(),
        "--include-adversarial",
        "--judge",
        "f1",
        "--json",
    ]);
    assert_eq!(code, 0, "{err}");
    let flags = json_of(&out);
    assert_eq!((&flags["n"], &flags["correct"]), (&v["n"], &v["correct"]), "the project's settings, spelled as flags");
    // A flag wins over the project's setting.
    let evidence = json(&dir, &["eval", "--strategy", "strategies/served.yaml", "--judge", "evidence", "--json"]);
    assert_ne!(evidence["harness_hash"], v["harness_hash"]);
    let builtin = json(&dir, &["eval", "--strategy", "strategies/served.yaml", "--tasks", "builtin", "--json"]);
    assert_eq!((builtin["tasks"].as_str(), builtin["n"].as_u64()), (Some("builtin"), Some(348)), "{builtin}");
}
