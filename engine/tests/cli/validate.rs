//! `emend validate` end to end: every bad strategy fixture is refused with
//! exit 2 and a line naming the file and the field or position.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/strategies").join(name)
}

fn default_strategy() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../strategies/default.yaml")
}

fn validate(args: &[&Path]) -> (i32, String, Duration) {
    let start = Instant::now();
    let out = Command::new(crate::support::bin()).arg("validate").args(args).output().expect("emend runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code().expect("exited"), text, start.elapsed())
}

#[test]
fn default_strategy_is_ok() {
    let (code, text, _) = validate(&[&default_strategy()]);
    assert_eq!(code, 0, "{text}");
    assert!(text.starts_with("ok "), "{text}");
}

#[test]
fn each_bad_fixture_is_rejected_with_its_reason() {
    let cases: &[(&str, &str)] = &[
        ("empty.yaml", "empty.yaml: empty file: expected a strategy mapping"),
        ("syntax-error.yaml", "syntax-error.yaml:4:1: YAML syntax error"),
        ("wrong-type.yaml", "wrong-type.yaml: retrieve.top_k: expected integer, got a string (\"five\")"),
        ("nan.yaml", "nan.yaml: index.bm25_k1: must be a finite number, got .nan"),
        ("infinity.yaml", "infinity.yaml: index.bm25_b: must be a finite number, got .inf"),
        ("out-of-range.yaml", "out-of-range.yaml: retrieve.top_k: must be <= 200, got 5000"),
        ("unknown-key.yaml", "unknown-key.yaml: retrieve.colour: unknown field"),
        ("missing-marker.yaml", "missing-marker.yaml: answer.prompt: missing required marker {question}"),
        (
            "broken-invariant.yaml",
            "broken-invariant.yaml: retrieve.rerank_top_n: invariant broken: must be <= retrieve.top_k (5), got 8",
        ),
        ("not-a-mapping.yaml", "not-a-mapping.yaml: (root): expected a mapping of strategy sections, got a sequence"),
        ("alias-bomb.yaml", "alias-bomb.yaml: YAML error: repetition limit exceeded"),
    ];
    for (name, expected) in cases {
        let (code, text, elapsed) = validate(&[&fixture(name)]);
        assert_eq!(code, 2, "{name}: {text}");
        assert!(text.contains(expected), "{name}: expected {expected:?} in:\n{text}");
        assert!(!text.contains("panicked"), "{name}: {text}");
        // A generous bound: the point is that nothing hangs, not speed.
        assert!(elapsed < Duration::from_secs(10), "{name} took {elapsed:?}");
    }
}

#[test]
fn a_huge_file_is_refused_without_reading_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.yaml");
    let f = std::fs::File::create(&path).unwrap();
    f.set_len(50 * 1024 * 1024).unwrap();
    let (code, text, _) = validate(&[&path]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("huge.yaml: file is 52428800 bytes; a strategy is at most 1048576 bytes"), "{text}");
}

#[test]
fn one_bad_file_among_good_ones_fails_the_run_and_json_names_the_problems() {
    let out = Command::new(crate::support::bin())
        .args(["validate", "--json"])
        .arg(default_strategy())
        .arg(fixture("out-of-range.yaml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["files"][0]["ok"], true);
    assert_eq!(v["files"][1]["problems"][0]["path"], "retrieve.top_k");
    assert_eq!(v["files"][1]["problems"][0]["message"], "must be <= 200, got 5000");
}

#[test]
fn a_missing_file_is_bad_input() {
    let (code, text, _) = validate(&[Path::new("/nonexistent/strategy.yaml")]);
    assert_eq!(code, 2);
    assert!(text.contains("/nonexistent/strategy.yaml: cannot read"), "{text}");
}

/// A file named emend.yaml is checked as a project configuration by emend's
/// own parser: the repository's passes; a misspelled key is refused with
/// exit 2 and one line naming the file, the line and the key.
#[test]
fn emend_yaml_is_checked_as_a_configuration() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../emend.yaml");
    let (code, text, _) = validate(&[&root]);
    assert_eq!(code, 0, "{text}");
    assert!(text.starts_with("ok configuration "), "{text}");

    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("emend.yaml");
    let good = std::fs::read_to_string(&root).unwrap();
    assert!(good.contains("\n  alpha: "), "the repository's emend.yaml sets gates.alpha");
    std::fs::write(&bad, good.replace("\n  alpha: ", "\n  alpah: ")).unwrap();
    let (code, text, _) = validate(&[&bad]);
    assert_eq!(code, 2, "{text}");
    assert_eq!(text.trim().lines().count(), 1, "{text}");
    let line = good.lines().position(|l| l.starts_with("  alpha: ")).unwrap() + 1;
    assert!(text.starts_with(&format!("{}:{line}:3: gates.alpah: unknown key `alpah`", bad.display())), "{text}");
    assert!(text.contains("did you mean `alpha`?") && !text.contains("delta1"), "{text}");
}

#[test]
fn every_problem_of_an_emend_yaml_is_reported_in_one_run_each_at_its_line() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../emend.yaml");
    let good = std::fs::read_to_string(&root).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("emend.yaml");
    let edits = [
        ("\n  alpha: ", "\n  alpah: "),
        ("\n  probe_size: ", "\n  probe_size: 3\n  x_probe: "),
        ("\n  rounds: ", "\n  rounds: 0\n  x_rounds: "),
    ];
    let mut text = good.clone();
    for (from, to) in edits {
        assert!(text.contains(from), "the repository's emend.yaml has {from:?}");
        text = text.replacen(from, to, 1);
    }
    std::fs::write(&bad, &text).unwrap();
    let line_of = |start: &str| text.lines().position(|l| l.starts_with(start)).unwrap() + 1;
    let (code, out, _) = validate(&[&bad]);
    assert_eq!(code, 2, "{out}");
    let name = bad.display().to_string();
    for (key, start) in
        [("gates.alpah", "  alpah: "), ("gates.x_probe", "  x_probe: "), ("loop.x_rounds", "  x_rounds: ")]
    {
        assert!(out.contains(&format!("{name}:{}:3: {key}: unknown key", line_of(start))), "{key}: {out}");
    }
    // A range problem beside the unknown keys, at its own line.
    assert!(
        out.contains(&format!("{name}:{}:3: gates.probe_size: must be at least 10", line_of("  probe_size: 3"))),
        "{out}"
    );
    assert!(out.contains(&format!("{name}:{}:3: loop.rounds: must be between 1", line_of("  rounds: 0"))), "{out}");
    // In file order, each once; --json carries the same problems with their positions.
    let lines: Vec<usize> =
        out.lines().map(|l| l[name.len() + 1..].split(':').next().unwrap().parse().unwrap()).collect();
    assert!(lines.windows(2).all(|w| w[0] < w[1]), "{out}");
    let (_, json, _) = validate(&[&bad, Path::new("--json")]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let problems = v["files"][0]["problems"].as_array().unwrap();
    assert_eq!(problems.len(), lines.len(), "{json}");
    assert!(problems.iter().all(|p| p["line"].is_u64() && p["column"].is_u64() && p["path"].is_string()), "{json}");
}
