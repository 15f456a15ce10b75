//! End-to-end tests of `emend compare`: exit codes, the JSON report and the
//! error messages for bad input.

use std::path::PathBuf;
use std::process::Output;

use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compare").join(name)
}

fn emend(args: &[&str]) -> Output {
    crate::support::command(std::path::Path::new("."), args).output().expect("emend runs")
}

fn compare(base: &str, cand: &str, extra: &[&str]) -> Output {
    let (base, cand) = (fixture(base), fixture(cand));
    let mut args = vec!["compare", base.to_str().unwrap(), cand.to_str().unwrap()];
    args.extend_from_slice(extra);
    emend(&args)
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

fn json(o: &Output) -> Value {
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(o));
    serde_json::from_str(&stdout(o)).unwrap_or_else(|e| panic!("not one JSON object ({e}): {}", stdout(o)))
}

/// Writes `lines` to a file named `name` in a fresh directory.
fn temp_file(name: &str, lines: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    std::fs::write(&path, lines.join("\n")).unwrap();
    (dir, path)
}

fn assert_bad_input(o: &Output, needles: &[&str]) {
    assert_eq!(o.status.code(), Some(2), "stdout: {}\nstderr: {}", stdout(o), stderr(o));
    let err = stderr(o);
    for needle in needles {
        assert!(err.contains(needle), "stderr lacks {needle:?}: {err}");
    }
}

#[test]
fn valid_pair_reports_every_field_and_accepts() {
    let v = json(&compare("base.jsonl", "cand.jsonl", &["--json", "--cost-bound", "0.10"]));
    assert_eq!(v["n"], 120);
    assert_eq!((v["improved"].as_u64(), v["regressed"].as_u64()), (Some(20), Some(4)));
    assert_eq!((v["both_correct"].as_u64(), v["both_wrong"].as_u64()), (Some(60), Some(36)));
    assert!((v["delta"].as_f64().unwrap() - 16.0 / 120.0).abs() < 1e-12);
    let (low, high) = (v["ci_low"].as_f64().unwrap(), v["ci_high"].as_f64().unwrap());
    assert!(0.0 < low && low < 16.0 / 120.0 && 16.0 / 120.0 < high, "{low} {high}");
    assert_eq!(v["unit"], "question");
    assert_eq!(v["resamples"], 10000);
    assert_eq!(v["seed"], 0);
    // 24 discordant pairs: below the cut-off of 25, so the exact test.
    assert_eq!(v["mcnemar_test"], "exact");
    // scipy 1.17.1: 2 * binom.cdf(4, 24, 0.5) = 0.001543879508972168
    let p = v["mcnemar_p"].as_f64().unwrap();
    assert!((p - 0.001543879508972168).abs() / p < 1e-9, "{p}");
    // Integer categories come out as their decimal string; the map is sorted.
    let cats: Vec<_> = v["per_category"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(cats, ["4", "multi-hop", "single-hop", "temporal"]);
    assert_eq!(v["per_category"]["4"]["n"], 30);
    assert_eq!(v["per_category"]["4"]["base_correct"], 16);
    assert_eq!(v["per_category"]["4"]["cand_correct"], 20);
    assert!((v["cost"]["growth"].as_f64().unwrap() - 0.05).abs() < 1e-3);
    assert_eq!(v["accept"], true);
    let rules: Vec<_> =
        v["rules"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap().to_string()).collect();
    assert_eq!(
        rules,
        [
            "confirm_better",
            "more_improved_than_regressed",
            "category_non_regression",
            "category_non_regression",
            "category_non_regression",
            "category_non_regression",
            "cost_within_bound"
        ]
    );
    for r in v["rules"].as_array().unwrap() {
        assert_eq!(r["pass"], true, "{r}");
        assert!(r["value"].is_number() && r["threshold"].is_number(), "{r}");
    }
}

/// The verdict is the gate's: for 19 improved and 7 regressed questions the
/// one-sided exact p-value the confirm test records (0.0145), not the
/// two-sided McNemar's (0.029), and the same value as the gate's own rule.
#[test]
fn the_verdict_is_the_gates_one_sided_exact_test() {
    let mut base = Vec::new();
    let mut cand = Vec::new();
    for i in 0..100 {
        let (b, c) = match i {
            0..19 => (false, true),
            19..26 => (true, false),
            26..70 => (true, true),
            _ => (false, false),
        };
        base.push(format!(r#"{{"id":"q{i}","category":"c{}","correct":{b}}}"#, i % 2));
        cand.push(format!(r#"{{"id":"q{i}","category":"c{}","correct":{c}}}"#, i % 2));
    }
    let dir = tempfile::tempdir().unwrap();
    let (b, c) = (dir.path().join("b.jsonl"), dir.path().join("c.jsonl"));
    std::fs::write(&b, base.join("\n")).unwrap();
    std::fs::write(&c, cand.join("\n")).unwrap();
    let run = |alpha: &str| {
        json(&emend(&[
            "compare",
            b.to_str().unwrap(),
            c.to_str().unwrap(),
            "--json",
            "--alpha",
            alpha,
            "--epsilon",
            "1",
        ]))
    };
    let v = run("0.0152");
    let gate = emend_stats::better_test(19, 7, 100, 0.0152);
    let p = v["confirm_better"]["p_value"].as_f64().unwrap();
    assert_eq!(p, gate.p_value, "{v}");
    // The sum of C(26, k) for k >= 19 is 971712, over 2^26.
    assert!((p - 971_712.0 / 67_108_864.0).abs() < 1e-12, "{p}");
    assert_eq!(v["rules"][0]["name"], "confirm_better");
    assert_eq!(v["rules"][0]["value"].as_f64(), Some(p));
    assert_eq!(v["accept"], true, "{v}");
    // The two-sided McNemar is shown for information: about twice as large, and it decides nothing.
    assert!(v["mcnemar_p"].as_f64().unwrap() > 0.028, "{v}");
    let v = run("0.01");
    assert_eq!((v["accept"].as_bool(), v["confirm_better"]["better"].as_bool()), (Some(false), Some(false)), "{v}");
}

#[test]
fn output_is_deterministic() {
    let a = compare("base.jsonl", "cand.jsonl", &["--json", "--unit", "conversation"]);
    let b = compare("base.jsonl", "cand.jsonl", &["--json", "--unit", "conversation"]);
    assert_eq!(stdout(&a), stdout(&b));
    let v = json(&a);
    assert_eq!(v["unit"], "conversation");
    assert_eq!(v["resampling_units"], 6);
    // With few resamples the interval's ends move with the seed (with many,
    // they sit on the same multiples of 1/n).
    let other_seed = json(&compare("base.jsonl", "cand.jsonl", &["--json", "--resamples", "50", "--seed", "1"]));
    let same_seed = json(&compare("base.jsonl", "cand.jsonl", &["--json", "--resamples", "50", "--seed", "0"]));
    assert_ne!((&other_seed["ci_low"], &other_seed["ci_high"]), (&same_seed["ci_low"], &same_seed["ci_high"]));
}

#[test]
fn a_rejection_is_data_and_exits_zero() {
    let o = compare("base.jsonl", "cand_mixed.jsonl", &["--json"]);
    let v = json(&o);
    assert_eq!((v["improved"].as_u64(), v["regressed"].as_u64()), (Some(10), Some(8)));
    assert_eq!(v["accept"], false);
    let failed: Vec<_> = v["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["pass"] == false)
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["confirm_better"]);
}

#[test]
fn human_report_shows_counts_test_categories_and_each_rule() {
    let o = compare("base.jsonl", "cand_mixed.jsonl", &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    for needle in [
        "improved          10",
        "regressed          8",
        "delta +1.67 pp",
        "95% CI",
        "paired bootstrap by question",
        "gate test exact binomial, one-sided (the confirm test's): p = ",
        "McNemar   exact binomial (18 discordant < 25), two-sided, for information: p = ",
        "single-hop",
        "verdict: REJECT (1 of 6 rules fail",
        "FAIL  confirm_better",
        "PASS  more_improved_than_regressed",
        "PASS  category_non_regression",
    ] {
        assert!(out.contains(needle), "report lacks {needle:?}:\n{out}");
    }
}

#[test]
fn mismatched_ids_are_refused_with_counts() {
    let o = compare("base.jsonl", "cand_mismatch.jsonl", &[]);
    assert_bad_input(
        &o,
        &[
            "3 baseline id(s) missing from the candidate",
            "\"q010\"",
            "2 candidate id(s) not in the baseline",
            "\"extra-1\"",
        ],
    );
}

#[test]
fn duplicate_id_names_file_and_lines() {
    let o = compare("base.jsonl", "cand_duplicate.jsonl", &[]);
    assert_bad_input(&o, &["cand_duplicate.jsonl:17: duplicate id \"q003\" (first on line 4)"]);
}

#[test]
fn bad_field_names_file_line_and_value() {
    let o = compare("base.jsonl", "cand_bad_correct.jsonl", &[]);
    assert_bad_input(&o, &["cand_bad_correct.jsonl:17: field \"correct\": expected a boolean, got \"yes\""]);
}

#[test]
fn unreadable_lines_name_file_and_line() {
    let cases: [(&[&str], &str); 5] = [
        (&[r#"{"id": "a", "category": "x", "correct": true}"#, "not json"], "bad.jsonl:2: not valid JSON"),
        (&[r#"{"category": "x", "correct": true}"#], "bad.jsonl:1: missing field \"id\""),
        (&[r#"{"id": 7, "category": "x", "correct": true}"#], "bad.jsonl:1: field \"id\": expected a string, got 7"),
        (&["", r#"{"id": "a", "correct": true}"#], "bad.jsonl:2: missing field \"category\""),
        (&["[1, 2]"], "bad.jsonl:1: expected a JSON object, got [1,2]"),
    ];
    for (lines, needle) in cases {
        let (_dir, bad) = temp_file("bad.jsonl", lines);
        let o = emend(&["compare", bad.to_str().unwrap(), fixture("cand.jsonl").to_str().unwrap()]);
        assert_bad_input(&o, &[needle]);
    }
}

#[test]
fn empty_file_is_an_error() {
    let (_dir, empty) = temp_file("empty.jsonl", &["", "  "]);
    let o = emend(&["compare", fixture("base.jsonl").to_str().unwrap(), empty.to_str().unwrap()]);
    assert_bad_input(&o, &["empty.jsonl: no outcome records"]);
}

#[test]
fn conversation_unit_needs_conversations() {
    let o = compare("base_no_conversation.jsonl", "cand.jsonl", &["--unit", "conversation"]);
    assert_bad_input(
        &o,
        &["base_no_conversation.jsonl:5: field \"conversation\" is required with --unit conversation"],
    );
    // The question unit does not need them.
    let o = compare("base_no_conversation.jsonl", "cand.jsonl", &["--json"]);
    assert_eq!(json(&o)["accept"], true);
}

#[test]
fn cost_bound_needs_tokens_and_can_fail() {
    let (_dir, base) = temp_file("base.jsonl", &[r#"{"id": "a", "category": "x", "correct": true}"#]);
    let cand = fixture("cand.jsonl");
    let o = emend(&["compare", base.to_str().unwrap(), cand.to_str().unwrap(), "--cost-bound", "0.1"]);
    assert_bad_input(&o, &["--cost-bound needs \"context_tokens\"", "base.jsonl:1 has none"]);

    // The candidate uses 5% more tokens: a 1% bound fails that rule alone.
    let v = json(&compare("base.jsonl", "cand.jsonl", &["--json", "--cost-bound", "0.01"]));
    assert_eq!(v["accept"], false);
    let failed: Vec<_> = v["rules"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["pass"] == false)
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(failed, ["cost_within_bound"]);
}

#[test]
fn bad_flags_are_bad_input() {
    for flags in
        [&["--alpha", "1.5"][..], &["--category-drop-max", "-1"], &["--resamples", "0"], &["--unit", "session"]]
    {
        let o = compare("base.jsonl", "cand.jsonl", flags);
        assert_eq!(o.status.code(), Some(2), "{flags:?}: {}", stderr(&o));
    }
    let o = emend(&["compare", "/nonexistent/base.jsonl", fixture("cand.jsonl").to_str().unwrap()]);
    assert_bad_input(&o, &["/nonexistent/base.jsonl: cannot read"]);
}
