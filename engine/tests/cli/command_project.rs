//! `emend init`, `evolve`, `validate` and `eval` on a project whose harness
//! is a command: end to end against the Python reference adapter, a failing
//! command, and the project's own schema and task set.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support::{self, emend, workspace};

// --- end to end: the CLI and the reference adapter ---

/// `emend init DIR` in `cwd` with the reference adapter's schema and default
/// strategy, the synthetic task set and `python3 ADAPTER` as the harness command.
fn init_command_project(cwd: &Path, dir: &str, adapter: &Path) -> (i32, String, String) {
    let ex = workspace().join("examples/python-bm25");
    let tasks = workspace().join("harness/data/synthetic-locomo.json");
    emend(
        cwd,
        &[
            "init",
            dir,
            "--tasks",
            tasks.to_str().unwrap(),
            "--schema",
            ex.join("strategy.schema.json").to_str().unwrap(),
            "--strategy",
            ex.join("default.yaml").to_str().unwrap(),
            "--harness-command",
            "python3",
            adapter.to_str().unwrap(),
            "{strategy}",
            "{tasks}",
            "{out}",
        ],
    )
}

fn init_with_adapter(tmp: &Path, adapter: &Path) -> PathBuf {
    let dir = tmp.join("project");
    let (code, out, err) = init_command_project(tmp, dir.to_str().unwrap(), adapter);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("348 questions"), "{out}");
    dir
}

#[test]
fn init_and_evolve_against_the_reference_adapter() {
    let tmp = tempfile::tempdir().unwrap();
    let adapter = workspace().join("examples/python-bm25/adapter.py");
    let dir = init_with_adapter(tmp.path(), &adapter);
    let config = std::fs::read_to_string(dir.join("emend.yaml")).unwrap();
    assert!(config.contains("kind: command"), "{config}");
    // The adapter's path is written relative to emend.yaml, like every path in it.
    let rel = emend_core::artifact::relative_path(&dir.canonicalize().unwrap(), &adapter.canonicalize().unwrap());
    assert!(!rel.starts_with('/'), "{rel}");
    assert!(config.contains(&format!("argv: [\"python3\", \"{rel}\", \"{{strategy}}\"")), "{config}");
    // Shards run concurrently, as they would for a user; fewer resamples keep the test quick.
    let config = config
        .replace("    shards: 1\n    concurrency: 1\n", "    shards: 2\n    concurrency: 2\n")
        .replace("bootstrap_resamples: 10000", "bootstrap_resamples: 2000");
    assert!(config.contains("shards: 2") && config.contains("bootstrap_resamples: 2000"), "{config}");
    std::fs::write(dir.join("emend.yaml"), config).unwrap();

    // Every evaluation starts the adapter's processes: a budget keeps the run short.
    let (code, out, err) =
        emend(&dir, &["evolve", "--rounds", "2", "--candidates", "3", "--max-evals", "12", "--json", "--quiet"]);
    assert_eq!(code, 0, "{out}{err}");
    let summary: Value = serde_json::from_str(&out).unwrap();
    // Two rounds, or fewer when the budget or the search's convergence stopped it first.
    assert!(
        summary["rounds"] == 2 || summary["stopped"] == "max_evals" || summary["stopped"] == "converged",
        "{summary}"
    );
    assert!(summary["evaluations_used"].as_f64().unwrap() <= 12.0 + 1e-9, "{summary}");
    assert!(summary["candidates"].as_u64().unwrap() > 0, "{summary}");
    assert!(summary["start_accuracy"].as_f64().unwrap() > 0.0, "{summary}");

    let (code, out, err) = emend(&dir, &["log", "--json"]);
    assert_eq!(code, 0, "{err}");
    let log: Value = serde_json::from_str(&out).unwrap();
    let rounds: Vec<&Value> = log["entries"].as_array().unwrap().iter().filter(|e| e["kind"] == "round").collect();
    assert_eq!(rounds.len() as u64, summary["rounds"].as_u64().unwrap(), "{log}");
    let candidates: Vec<&Value> = rounds.iter().flat_map(|r| r["candidates"].as_array().unwrap()).collect();
    assert!(!candidates.is_empty());
    // Decisions were made on real evaluations: nothing errored.
    for c in &candidates {
        assert_ne!(c["outcome"], "errored", "{c}");
    }
    let (code, out, _) = emend(&dir, &["status", "--json"]);
    assert_eq!(code, 0);
    let status: Value = serde_json::from_str(&out).unwrap();
    assert!(status["served_version"].is_u64(), "{status}");
    let (code, out, err) = emend(&dir, &["show", "served", "--yaml"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("top_k:"), "{out}");
    let (code, out, err) = emend(&dir, &["show", "r1c1"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("r1c1"), "{out}");
    let (code, out, _) = emend(&dir, &["journal", "verify"]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn a_failing_command_rejects_candidates_as_errored_and_fails_the_served_evaluation() {
    let tmp = tempfile::tempdir().unwrap();
    // The reference adapter, except that any strategy other than the default crashes.
    let schema = workspace().join("examples/python-bm25/strategy.schema.json");
    let schema = emend_core::schema::StrategySchema::from_path(&schema).unwrap();
    let default = workspace().join("examples/python-bm25/default.yaml");
    let mut default = emend_core::artifact::load_file(&default, &schema).unwrap().value;
    default.as_object_mut().unwrap().retain(|k, _| k != "version" && k != "parent");
    let wrapper = tmp.path().join("picky.py");
    let adapter = workspace().join("examples/python-bm25/adapter.py");
    let script = r#"import json, runpy, sys
if json.load(open(sys.argv[1])) != json.loads(DEFAULT):
    print("unsupported strategy", file=sys.stderr)
    sys.exit(4)
sys.argv[0] = ADAPTER
runpy.run_path(ADAPTER, run_name="__main__")
"#
    .replace("DEFAULT", &serde_json::to_string(&default.to_string()).unwrap())
    .replace("ADAPTER", &serde_json::to_string(&adapter.display().to_string()).unwrap());
    std::fs::write(&wrapper, script).unwrap();
    let dir = init_with_adapter(tmp.path(), &wrapper);
    // Every candidate errored: the run says so with its own exit code (5).
    let (code, out, err) = emend(&dir, &["evolve", "--rounds", "1", "--candidates", "2", "--quiet"]);
    assert_eq!(code, 5, "{out}{err}");
    let (_, out, _) = emend(&dir, &["log", "--json"]);
    let log: Value = serde_json::from_str(&out).unwrap();
    let errored: Vec<&Value> = log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "round")
        .flat_map(|e| e["candidates"].as_array().unwrap())
        .filter(|c| c["outcome"] == "errored")
        .collect();
    assert!(!errored.is_empty(), "{log}");
    for c in &errored {
        let reason = c["reason"].as_str().unwrap();
        assert!(reason.contains("shard 1/1: exit status 4 after retry; stderr: unsupported strategy"), "{reason}");
    }
    let (_, out, _) = emend(&dir, &["status", "--json"]);
    let status: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(status["served_version"], 1, "an errored candidate is never served");

    // When the served strategy itself cannot be evaluated, the run fails (exit 1).
    std::fs::write(&wrapper, "import sys\nprint('database unreachable', file=sys.stderr)\nsys.exit(2)\n").unwrap();
    let config = std::fs::read_to_string(dir.join("emend.yaml")).unwrap();
    std::fs::write(dir.join("emend.yaml"), config.replace("version: null", "version: \"broken\"")).unwrap();
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("shard 1/1: exit status 2 after retry; stderr: database unreachable"), "{err}");
    // The failure keeps its typed cause as its source, and the line says it once.
    assert_eq!(err.matches("database unreachable").count(), 1, "{err}");
}

// --- the project's tools on a command harness ---

/// Whether python3 runs here; the tests that need it skip (with a note) when not.
fn python3() -> bool {
    let ok = std::process::Command::new("python3").arg("--version").output().is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("SKIPPED: python3 is not available");
    }
    ok
}

#[test]
fn validate_in_a_command_project_uses_its_schema() {
    if !python3() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_with_adapter(tmp.path(), &workspace().join("examples/python-bm25/adapter.py"));
    // emend's own served file is legal under the project's schema (harness.schema).
    let (code, out, err) = emend(&dir, &["validate", "strategies/served.yaml"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("ok ") && out.contains("examples/python-bm25/strategy.schema.json"), "{out}");
    let v = support::json(&dir, &["validate", "--json", "strategies/served.yaml", "emend.yaml"]);
    assert!(v["schema"].as_str().unwrap().ends_with("examples/python-bm25/strategy.schema.json"), "{v}");
    assert_eq!(v["ok"], true, "{v}");
    // From another directory, through --project.
    let (code, out, err) = emend(tmp.path(), &["--project", "project", "validate", "project/strategies/served.yaml"]);
    assert_eq!(code, 0, "{out}{err}");
    // --no-project: the built-in schema, which refuses the adapter's fields; --schema wins over the project.
    let (code, out, err) = emend(&dir, &["validate", "--no-project", "strategies/served.yaml"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.contains("strategies/served.yaml: index.k1: unknown field"), "{out}");
    let builtin = workspace().join("schemas/strategy.schema.json");
    let (code, out, err) = emend(&dir, &["validate", "--schema", builtin.to_str().unwrap(), "strategies/served.yaml"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.contains("index.k1: unknown field"), "{out}");
    let v: Value = serde_json::from_str(&emend(&dir, &["validate", "--json", "--no-project", "x.yaml"]).1).unwrap();
    assert_eq!(v["schema"], "builtin", "{v}");

    // An invalid emend.yaml is an error naming it, not "no project"; checked as a
    // configuration it needs no project to load.
    let config = dir.join("emend.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("{text}colour: red\n")).unwrap();
    let (code, out, err) = emend(&dir, &["validate", "strategies/served.yaml"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.starts_with("error: ") && err.contains("emend.yaml") && err.contains("colour"), "{err}");
    let (code, out, err) = emend(&dir, &["validate", "emend.yaml"]);
    assert_eq!(code, 2, "{out}{err}");
    let line = text.lines().count() + 1;
    assert!(out.starts_with(&format!("emend.yaml:{line}:1: colour: unknown key `colour`")), "{out}");
    let (code, out, err) = emend(&dir, &["validate", "--no-project", "strategies/served.yaml"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(out.contains("index.k1: unknown field"), "{out}");
}

#[test]
fn eval_in_a_command_project_runs_its_command_on_its_task_set() {
    if !python3() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = init_with_adapter(tmp.path(), &workspace().join("examples/python-bm25/adapter.py"));
    let (code, out, err) = emend(&dir, &["eval", "--strategy", "strategies/served.yaml"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains(": 348 questions in 4 conversations"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("accuracy   ") && l.ends_with("/348)")), "{out}");
    assert!(out.contains("single-hop"), "{out}");

    let v = support::json(
        &dir,
        &[
            "eval",
            "--strategy",
            "strategies/served.yaml",
            "--json",
            "--outcomes",
            "out.jsonl",
            "--conversations",
            "syn-1",
        ],
    );
    assert_eq!(v["harness_kind"], "command", "{v}");
    assert_eq!(v["n"], 87, "{v}");
    let accuracy = v["accuracy"].as_f64().unwrap();
    assert!(accuracy > 0.0 && accuracy <= 1.0, "{v}");
    assert!(v["per_category"]["single-hop"]["n"].as_u64().unwrap() > 0, "{v}");
    let outcomes = std::fs::read_to_string(dir.join("out.jsonl")).unwrap();
    assert_eq!(outcomes.lines().count(), 87);
    assert!(outcomes.lines().all(|l| l.contains(r#""conversation":"syn-1""#)), "{outcomes}");

    // What the command cannot do is refused with a reason (one line), before it runs.
    for (extra, reason) in [
        (["--tasks", "x.json"], "error: --tasks x.json: this project's harness is a command"),
        (["--judge", "f1"], "error: --judge f1: this project's harness is a command"),
        (["--protocol", "replay"], "error: --protocol replay: longitudinal replay runs on the built-in harness only"),
    ] {
        let mut args = vec!["eval", "--strategy", "strategies/served.yaml"];
        args.extend(extra);
        let (code, out, err) = emend(&dir, &args);
        assert_eq!(code, 2, "{extra:?}: {out}{err}");
        assert!(err.starts_with(reason) && err.lines().count() == 1, "{extra:?}: {err}");
    }
    // --no-project: the built-in harness and schema, which refuse the adapter's strategy.
    let (code, _, err) = emend(&dir, &["eval", "--no-project", "--strategy", "strategies/served.yaml"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("index.k1: unknown field"), "{err}");
}

#[test]
fn init_runs_the_harness_command_once_and_refuses_a_broken_one_writing_nothing() {
    if !python3() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let crash = tmp.path().join("crash.py");
    std::fs::write(&crash, "import sys\nprint('no index here', file=sys.stderr)\nsys.exit(3)\n").unwrap();
    let garbage = tmp.path().join("garbage.py");
    let script = r#"import json, sys
shard = json.load(open(sys.argv[2]))
with open(sys.argv[3], "w") as f:
    for s in shard["samples"]:
        for qa in s["qa"]:
            f.write(json.dumps({"id": qa["id"], "conversation": s["sample_id"],
                                "category": qa["category_name"], "correct": "yes"}) + "\n")
"#;
    std::fs::write(&garbage, script).unwrap();
    let cases = [
        (&crash, false, "shard 1/1: exit status 3 after retry; stderr: no index here"),
        (&garbage, true, r#"shard 1/1: out.jsonl:1: field "correct": expected a boolean, got the string "yes""#),
    ];
    for (adapter, dir_existed, reason) in cases {
        let dir = tmp.path().join("p");
        if dir_existed {
            std::fs::create_dir(&dir).unwrap();
        }
        let (code, out, err) = init_command_project(tmp.path(), "p", adapter);
        assert_eq!(code, 2, "{out}{err}");
        let line = err.lines().find(|l| l.starts_with("error: ")).unwrap_or_else(|| panic!("{err}"));
        assert!(line.starts_with(&format!("error: --harness-command `python3 {}", adapter.display())), "{line}");
        assert!(line.ends_with(reason), "{line}");
        // Nothing written: no emend.yaml, no journal; a new directory is removed, an existing one left empty.
        assert!(!dir.join("emend.yaml").exists() && !dir.join(".emend").exists(), "{err}");
        assert_eq!(dir.exists(), dir_existed);
        if dir_existed {
            assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
            std::fs::remove_dir(&dir).unwrap();
        }
    }
}
