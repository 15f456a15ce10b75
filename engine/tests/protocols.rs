//! The evaluation protocols end to end: `emend collision` (the entity-collision
//! table, its JSON cells, the LoCoMo export and bad input).

use std::process::Command;

use serde_json::Value;

/// Runs `emend ARGS`: (exit code, stdout, stderr).
fn emend(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_emend")).args(args).output().expect("emend runs");
    (
        out.status.code().expect("exited"),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn collision_prints_one_cell_per_tag_and_k_and_exports_the_task_set() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("collision.json");
    let (code, stdout, stderr) = emend(&[
        "collision",
        "--k",
        "2,4",
        "--tags",
        "tool,preference",
        "--entities",
        "50",
        "--seed",
        "3",
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let cells: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    let keys: Vec<(String, u64)> =
        cells.iter().map(|c| (c["tag"].as_str().unwrap().to_string(), c["k"].as_u64().unwrap())).collect();
    assert_eq!(keys, [("tool".into(), 2), ("tool".into(), 4), ("preference".into(), 2), ("preference".into(), 4)]);
    for c in &cells {
        assert_eq!(c["n"], 50);
        assert_eq!((c["resamples"].as_u64(), c["bootstrap_seed"].as_u64()), (Some(10_000), Some(3)));
        let d = c["hit1"].as_f64().unwrap() - c["bm25_hit1"].as_f64().unwrap();
        assert!((c["delta"].as_f64().unwrap() - d).abs() < 1e-9);
        assert!(c["ci_low"].as_f64().unwrap() <= d && d <= c["ci_high"].as_f64().unwrap());
    }
    let d = harness::load_path(&out).unwrap();
    assert_eq!(d.samples().len(), 4 * 50);
    assert_eq!(d.questions().count(), 4 * 50);

    let (code, stdout, _) = emend(&["collision", "--k", "4", "--entities", "20"]);
    assert_eq!(code, 0);
    assert!(stdout.starts_with("tag "), "{stdout}");
    assert!(stdout.contains("seed 0"), "{stdout}");
}

#[test]
fn collision_refuses_bad_parameters_with_exit_2() {
    for args in
        [&["collision", "--tags", "colour"][..], &["collision", "--k", "1"], &["collision", "--dense-kind", "x"]]
    {
        let (code, _, stderr) = emend(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: ") && stderr.lines().count() == 1, "{stderr}");
    }
}
