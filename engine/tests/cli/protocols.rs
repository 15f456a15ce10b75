//! The evaluation protocols end to end: `emend collision` (the entity-collision
//! table, its JSON cells, the LoCoMo export and bad input).

use serde_json::Value;

/// Runs `emend ARGS`: (exit code, stdout, stderr).
fn emend(args: &[&str]) -> (i32, String, String) {
    crate::support::emend(std::path::Path::new("."), args)
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
    let classes: Vec<&str> = cells.iter().map(|c| c["class"].as_str().unwrap()).collect();
    assert_eq!(classes, ["lexical", "lexical", "intent", "intent"]);
    for c in &cells {
        let positive = c["ci_low"].as_f64().unwrap() > 0.0;
        assert_eq!(c["mark"] == "*", positive, "{c}");
        assert_eq!(
            (c["fusion"].as_str(), c["vocab"].as_str(), c["paraphrase"].as_u64()),
            (Some("weighted_sum"), Some("seed"), Some(1))
        );
    }
    let d = emend_harness::load_path(&out).unwrap();
    assert_eq!(d.samples().len(), 4 * 50);
    assert_eq!(d.questions().count(), 4 * 50);

    // Seed 001's n per cell by default (32 K), and the options that change the tasks.
    let (code, stdout, _) =
        emend(&["collision", "--k", "2", "--tags", "project", "--vocab", "emend", "--paraphrase", "4", "--json"]);
    assert_eq!(code, 0);
    let cells: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    assert_eq!((cells[0]["n"].as_u64(), cells[0]["class"].as_str()), (Some(64), Some("lexical")));
    assert_eq!((cells[0]["vocab"].as_str(), cells[0]["paraphrase"].as_u64()), (Some("emend"), Some(4)));

    let (code, stdout, _) = emend(&["collision", "--k", "4", "--entities", "20"]);
    assert_eq!(code, 0);
    assert!(stdout.starts_with("tag "), "{stdout}");
    assert!(stdout.contains("seed 0"), "{stdout}");
}

/// K = 1 is in the default grid at 100% / 100%; `--seeds` and a list axis
/// run one grid per (value, seed); `--hash-stats --json` adds the statistics.
#[test]
fn collision_seeds_axes_and_hash_stats() {
    let (code, stdout, stderr) = emend(&["collision", "--tags", "tool", "--entities", "10", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let cells: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    let ks: Vec<u64> = cells.iter().map(|c| c["k"].as_u64().unwrap()).collect();
    assert_eq!(ks, [1, 2, 4, 8, 16]);
    assert_eq!((cells[0]["bm25_hit1"].as_f64(), cells[0]["hit1"].as_f64()), (Some(1.0), Some(1.0)));
    assert_eq!(cells[0]["mark"], "n.s.");
    let args = ["collision", "--tags", "tool", "--k", "4", "--entities", "10", "--seeds", "1-2,5"];
    let (code, stdout, stderr) = emend(&[&args[..], &["--hash-idf", "on,off", "--hash-stats", "--json"]].concat());
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let runs: Vec<(u64, bool)> =
        v["cells"].as_array().unwrap().iter().map(|c| (c["seed"].as_u64().unwrap(), c["hash_idf"] == true)).collect();
    assert_eq!(runs, [(1, true), (2, true), (5, true), (1, false), (2, false), (5, false)]);
    let stats = v["hash_stats"].as_array().unwrap();
    assert_eq!(stats.len(), 2, "one column's tasks at 256-d: the tag and all");
    assert_eq!((stats[0]["tasks"].as_u64(), stats[0]["dim"].as_u64()), (Some(30), Some(256)));
    // The plain table: one column per value, the seeds' counts in each cell.
    let (code, stdout, _) = emend(&[&args[..], &["--fusion", "weighted-sum,rrf"]].concat());
    assert_eq!(code, 0);
    let header = stdout.lines().next().unwrap();
    assert!(header.contains(" weighted sum ") && header.ends_with(" RRF"), "{stdout}");
    assert!(stdout.contains("seeds 1-2,5 (each: tasks"), "{stdout}");
    let (_, twice, _) = emend(&[&args[..], &["--fusion", "weighted-sum,rrf"]].concat());
    assert_eq!(stdout, twice, "the same command prints the same bytes");
}

#[test]
fn collision_refuses_bad_parameters_with_exit_2() {
    for args in
        [&["collision", "--tags", "colour"][..], &["collision", "--k", "0"], &["collision", "--dense-kind", "x"]]
            .into_iter()
            .chain([
                &["collision", "--paraphrase", "0"][..],
                &["collision", "--paraphrase", "1,9"],
                &["collision", "--entities", "577"],
            ])
    {
        let (code, _, stderr) = emend(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: ") && stderr.lines().count() == 1, "{stderr}");
    }
    // The new flags: one line naming the flag and what it expects.
    for (args, says) in [
        (&["collision", "--seeds", "5-1"][..], "--seeds 5-1: expected a range like 1-5"),
        (&["collision", "--seeds", "1,x"], "--seeds 1,x: expected"),
        (&["collision", "--seeds", "1-3,2"], "seed 2 is listed twice"),
        (&["collision", "--dense-dim", "0"], "--dense-dim 0: expected a dimension from 1 to 65536"),
        (&["collision", "--dense-dim", "128", "--dense-kind", "none"], "--dense-dim: sizes the trigram channel only"),
        (
            &["collision", "--hash-idf", "off", "--dense-kind", "none"],
            "--hash-idf off: weighs the trigram channel only",
        ),
        (&["collision", "--hash-stats", "--dense-kind", "none"], "--hash-stats: describes the trigram channel only"),
        (
            &["collision", "--fusion", "rrf,weighted-sum", "--vocab", "seed,emend"],
            "--fusion, --vocab: one flag at a time",
        ),
    ] {
        let (code, _, stderr) = emend(args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: ") && stderr.lines().count() == 1 && stderr.contains(says), "{stderr}");
    }
    // clap's own refusal of a value outside an enum: exit 2 and the values it takes.
    for (flag, value) in [("--vocab", "other"), ("--fusion", "max"), ("--hash-idf", "maybe"), ("--fusion", "rrf,max")] {
        let (code, _, stderr) = emend(&["collision", flag, value]);
        assert_eq!(code, 2, "{flag}: {stderr}");
        assert!(stderr.starts_with("error: ") && stderr.contains("possible values"), "{stderr}");
    }
}

fn locomo() -> Option<std::path::PathBuf> {
    let p = std::env::var_os("EMEND_LOCOMO").map(std::path::PathBuf::from).unwrap_or_else(|| {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/locomo10-dev.json")
    });
    if p.exists() {
        Some(p)
    } else {
        eprintln!("note: {} is absent; skipping", p.display());
        None
    }
}

/// On locomo10-dev with the default strategy the audit names unexercised
/// mechanisms (expansion is off, so its terms and weight change nothing),
/// gives each mechanism's trace counts and Holm-adjusted contrast p-values,
/// and `emend diagnose` reports the generation-error split.
#[test]
fn audit_and_diagnose_on_locomo10_dev() {
    let Some(data) = locomo() else { return };
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().to_str().unwrap();
    let (code, _, stderr) = emend(&["init", "--tasks", data.to_str().unwrap(), project]);
    assert_eq!(code, 0, "{stderr}");
    let (code, stdout, stderr) = emend(&["--project", project, "audit", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let mechanisms = v["mechanisms"].as_array().unwrap();
    let status =
        |m: &str| mechanisms.iter().find(|x| x["mechanism"] == m).map(|x| x["status"].as_str().unwrap().to_string());
    let field = |m: &str, k: &str| mechanisms.iter().find(|x| x["mechanism"] == m).map(|x| x[k].clone());
    assert_eq!(status("expansion").as_deref(), Some("unexercised"));
    // The answer is never computed under the evidence judge: it reaches no context.
    assert_eq!(field("answer", "mechanistic"), Some(Value::from("unexercised")));
    assert_eq!(field("answer", "quality"), Some(Value::from("not_tested")));
    assert_eq!(field("retrieval depth", "mechanistic"), Some(Value::from("contributing")));
    assert!(mechanisms.iter().all(|m| !m["evidence"].as_str().unwrap().is_empty()));
    // Retrieval depth is always on, and halving top_k costs answers.
    assert_eq!(status("retrieval depth").as_deref(), Some("contributing"));
    assert_eq!(v["correction"], "holm");
    let n = mechanisms[0]["trace"]["questions"].as_u64().unwrap();
    assert!(n > 0);
    for m in mechanisms {
        let t = &m["trace"];
        let c = |k: &str| t[k].as_u64().unwrap_or_else(|| panic!("{k} in {m}"));
        // Each stage is a subset of the one before it.
        assert!(c("eligible") <= n && c("executed") <= c("eligible") && c("produced") <= c("executed"), "{m}");
        assert!(c("included") <= c("selected") && c("selected") <= c("produced"), "{m}");
        // Defective only for a mechanism that executed and failed (none does on this set).
        assert_ne!(m["status"], "defective", "{m}");
        // Only a mechanistically contributing mechanism is tested for quality.
        if let Some(adjusted) = m["adjusted_p"].as_f64() {
            assert!(adjusted >= m["p_value"].as_f64().unwrap() && c("selected") > 0, "{m}");
            assert_eq!(m["mechanistic"], "contributing", "{m}");
        } else {
            assert!(!["contributing", "harmful"].contains(&m["status"].as_str().unwrap()), "{m}");
            assert_eq!(m["quality"], "not_tested", "{m}");
        }
        eprintln!(
            "{:>18} {:>13} {:>13} eligible {} executed {} produced {} selected {} included {} p {} Holm {}",
            m["mechanism"].as_str().unwrap(),
            m["mechanistic"].as_str().unwrap(),
            m["quality"].as_str().unwrap(),
            c("eligible"),
            c("executed"),
            c("produced"),
            c("selected"),
            c("included"),
            m["p_value"],
            m["adjusted_p"]
        );
    }

    // Under longitudinal replay the contrasts count probes (each at its last
    // observation), not the observations, which are not independent.
    let cfg = dir.path().join("emend.yaml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    assert!(text.contains("  protocol: endpoint\n"), "{text}");
    std::fs::write(&cfg, text.replace("  protocol: endpoint\n", "  protocol: replay\n")).unwrap();
    let (code, stdout, stderr) = emend(&["--project", project, "audit", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let replay: Value = serde_json::from_str(&stdout).unwrap();
    let bm25 = replay["mechanisms"].as_array().unwrap().iter().find(|m| m["mechanism"] == "bm25").unwrap().clone();
    let c = &bm25["contrast"];
    assert_eq!((c["unit"].as_str(), c["pairs"].as_u64()), (Some("probe"), Some(n)), "{c}");
    assert!(c["questions"].as_u64().unwrap() > n, "{c}");
    assert!(c["observations_served_only"].as_u64().unwrap() > c["served_only"].as_u64().unwrap(), "{c}");
    std::fs::write(&cfg, std::fs::read_to_string(&cfg).unwrap().replace("protocol: replay", "protocol: endpoint"))
        .unwrap();

    let (code, stdout, stderr) = emend(&["--project", project, "diagnose", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let d: Value = serde_json::from_str(&stdout).unwrap();
    for k in ["source_only", "full_coverage", "unsplit"] {
        assert!(d["splits"][k].is_u64(), "{d}");
    }
    // Under the evidence judge a question with all its evidence in the context is correct.
    assert!(d["counts"].get("generation_error").is_none(), "{d}");
    assert!(d["counts"]["retrieval_gap"].as_u64().unwrap() > 0, "{d}");
    let (_, text, _) = emend(&["--project", project, "diagnose"]);
    assert!(text.contains("generation_error split: source_only "), "{text}");
}
