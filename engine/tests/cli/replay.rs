//! Longitudinal replay end to end: `emend eval --protocol replay`, `emend
//! compare --unit trajectory`, and `emend evolve` on a replay project. Tests
//! on locomo10-dev skip (with a note) when the file is absent.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::support;
use support::emend;

fn repo(rel: &str) -> PathBuf {
    crate::support::workspace().join(rel)
}

fn locomo() -> Option<PathBuf> {
    let p =
        std::env::var_os("EMEND_LOCOMO").map(PathBuf::from).unwrap_or_else(|| repo("../shared/data/locomo10-dev.json"));
    if p.exists() {
        Some(p)
    } else {
        eprintln!("note: {} is absent; skipping", p.display());
        None
    }
}

fn eval_json(dir: &Path, strategy: &Path, tasks: &str, extra: &[&str]) -> Value {
    let mut args = vec!["eval", "--strategy", strategy.to_str().unwrap(), "--tasks", tasks, "--json"];
    args.extend_from_slice(extra);
    let (code, out, err) = emend(dir, &args);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

fn check_checkpoints(v: &Value) {
    let cps = v["checkpoints"].as_array().expect("checkpoints");
    assert!(!cps.is_empty());
    let mut last = 0;
    for (i, c) in cps.iter().enumerate() {
        for key in ["checkpoint", "probes", "accuracy", "mean_context_tokens"] {
            assert!(c.get(key).is_some(), "missing {key} in {c}");
        }
        assert_eq!(c["checkpoint"], i + 1);
        let p = c["probes"].as_u64().unwrap();
        assert!(p >= last, "probes fell at checkpoint {}: {cps:?}", i + 1);
        last = p;
    }
    assert_eq!(last, v["probes"].as_u64().unwrap(), "every probe is observed at the last checkpoint");
}

#[test]
fn eval_replay_reports_checkpoints_and_final_accuracy() {
    let tmp = tempfile::tempdir().unwrap();
    let s = repo("strategies/default.yaml");
    let endpoint = eval_json(tmp.path(), &s, "builtin", &[]);
    assert_eq!(endpoint["protocol"], "endpoint");
    assert!(endpoint.get("checkpoints").is_none());
    let replay = eval_json(tmp.path(), &s, "builtin", &["--protocol", "replay"]);
    assert_eq!(replay["protocol"], "replay");
    check_checkpoints(&replay);
    assert_eq!(replay["checkpoints"].as_array().unwrap().len(), 16);
    assert_eq!(replay["probes"], endpoint["n"]);
    assert_eq!(replay["final_accuracy"], endpoint["accuracy"]);
    // The lifecycle schedule: append-only, no maintenance, no query side effects.
    let l = &replay["lifecycle"];
    assert_eq!(
        (&l["between_checkpoints"], &l["maintenance"], &l["query_side_effects"], &l["clock"]),
        (&json!("append-only"), &json!("none"), &json!("none"), &json!("latest-session-date"))
    );
    assert!(l.get("clocks").is_none(), "the default strategy does not age: {l}");
    assert!(endpoint.get("lifecycle").is_none());
    let every4 = eval_json(tmp.path(), &s, "builtin", &["--protocol", "replay", "--every-sessions", "4"]);
    assert_eq!(every4["checkpoints"].as_array().unwrap().len(), 4);
    assert_eq!(every4["final_accuracy"], endpoint["accuracy"]);
    let (code, _, err) = emend(
        tmp.path(),
        &["eval", "--strategy", s.to_str().unwrap(), "--protocol", "replay", "--every-sessions", "0"],
    );
    assert_eq!(code, 2, "{err}");
}

#[test]
fn locomo_replay_final_accuracy_equals_endpoint_accuracy() {
    let Some(path) = locomo() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let s = repo("strategies/default.yaml");
    let tasks = path.to_str().unwrap();
    let endpoint = eval_json(tmp.path(), &s, tasks, &[]);
    let replay = eval_json(tmp.path(), &s, tasks, &["--protocol", "replay"]);
    check_checkpoints(&replay);
    assert_eq!(replay["final_accuracy"], endpoint["accuracy"]);
    eprintln!(
        "locomo10-dev: {} checkpoints, final accuracy {}, {} observations; endpoint {} ms, replay {} ms",
        replay["checkpoints"].as_array().unwrap().len(),
        replay["final_accuracy"],
        replay["n"],
        endpoint["elapsed_ms"],
        replay["elapsed_ms"]
    );
}

#[test]
fn compare_resamples_whole_trajectories() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let base = dir.join("base.jsonl");
    let cand = dir.join("cand.jsonl");
    let s = repo("strategies/default.yaml");
    let recency = dir.join("recency.yaml");
    let text = std::fs::read_to_string(&s).unwrap().replace("recency_half_life_days: 0", "recency_half_life_days: 30");
    std::fs::write(&recency, text).unwrap();
    for (strategy, out) in [(&s, &base), (&recency, &cand)] {
        eval_json(dir, strategy, "builtin", &["--protocol", "replay", "--outcomes", out.to_str().unwrap()]);
    }
    let compare = |unit: &str| -> Value {
        let (code, out, err) =
            emend(dir, &["compare", base.to_str().unwrap(), cand.to_str().unwrap(), "--unit", unit, "--json"]);
        assert_eq!(code, 0, "{err}");
        serde_json::from_str(&out).unwrap()
    };
    let t = compare("trajectory");
    let q = compare("question");
    // The gate test takes the probe as its unit whatever the bootstrap's.
    for v in [&t, &q] {
        let gate = &v["confirm_better"];
        assert_eq!(gate["unit"], "probe", "{gate}");
        assert_eq!(gate["questions"], 348, "{gate}");
        assert_eq!(gate["probe"]["observations"], v["n"], "{gate}");
    }
    let (code, text, err) = emend(dir, &["compare", base.to_str().unwrap(), cand.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("gate test by probe") && text.contains("unit probe: p = "), "{text}");
    let text = t.to_string();
    assert!(text.contains("\"trajectory\""), "{text}");
    // 348 probes are the units, not the observations.
    assert!(text.contains("348"), "{text}");
    assert_ne!(t, q);
}

#[test]
fn evolve_runs_on_the_replay_protocol() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let (code, out, err) = emend(tmp.path(), &["init", dir.to_str().unwrap(), "--tasks", "builtin"]);
    assert_eq!(code, 0, "{out}{err}");
    let config = dir.join("emend.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains("protocol: endpoint"), "{text}");
    std::fs::write(&config, text.replace("protocol: endpoint", "protocol: replay\n  replay:\n    every_sessions: 4"))
        .unwrap();
    let (code, out, err) = emend(&dir, &["evolve", "--rounds", "1", "--json", "--quiet"]);
    assert_eq!(code, 0, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["rounds"], 1);
    assert_eq!(v["lifecycle"]["query_side_effects"], "none", "{v}");
    let (code, out, err) = emend(&dir, &["journal", "export"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("#0@4"), "the loop's question results are replay observations");
    // The served evaluation records its lifecycle schedule; a confirm test, its unit.
    let evaluated = out.lines().find(|l| l.contains("\"evaluated\"")).expect("an evaluated event");
    for field in ["\"lifecycle\":{", "\"between_checkpoints\":\"append-only\"", "\"query_side_effects\":\"none\""] {
        assert!(evaluated.contains(field), "no {field} in the evaluated event");
    }
    if let Some(judged) = out.lines().find(|l| l.contains("\"confirm\":{")) {
        assert!(judged.contains("\"unit\":\"probe\""), "{judged}");
    }
    let (code, text, err) = emend(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    assert_eq!(code, 0, "{text}{err}");
    assert!(text.contains("replay: a checkpoint every 4 sessions; append-only between checkpoints"), "{text}");
    let (code, _, err) = emend(&dir, &["report", "--out", "r.html"]);
    assert_eq!(code, 0, "{err}");
    let html = std::fs::read_to_string(dir.join("r.html")).unwrap();
    assert!(html.contains("id=\"checkpoint-chart\""), "the report plots the served replay by checkpoint");
    assert!(html.contains("checkpoint 4"), "four checkpoints of four sessions each");
}

#[test]
fn an_endpoint_report_has_no_checkpoint_chart() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let (code, out, err) = emend(tmp.path(), &["init", dir.to_str().unwrap(), "--tasks", "builtin"]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = emend(&dir, &["report", "--out", "r.html"]);
    assert_eq!(code, 0, "{err}");
    assert!(!std::fs::read_to_string(dir.join("r.html")).unwrap().contains("checkpoint-chart"));
}

#[test]
fn an_example_file_gives_evolving_references_by_checkpoint() {
    let tmp = tempfile::tempdir().unwrap();
    let s = repo("strategies/default.yaml");
    let tasks = repo("examples/evolving-references/locomo-evolving.json");
    let out = tmp.path().join("out.jsonl");
    let v = eval_json(
        tmp.path(),
        &s,
        tasks.to_str().unwrap(),
        &["--protocol", "replay", "--outcomes", out.to_str().unwrap()],
    );
    check_checkpoints(&v);
    assert_eq!((v["probes"].as_u64(), v["checkpoints"].as_array().unwrap().len()), (Some(3), 3));
    let rows: Vec<Value> =
        std::fs::read_to_string(&out).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let reference = |id: &str| -> (String, Value) {
        let r = rows.iter().find(|r| r["id"] == id).unwrap_or_else(|| panic!("no observation {id}"));
        (r["gold_answer"].as_str().unwrap().to_string(), r["evidence"].clone())
    };
    assert_eq!(reference("evolving-1#1@1"), ("baker at the Alfama bakery".into(), json!(["D1:3"])));
    assert_eq!(reference("evolving-1#1@2"), ("baker and weekend pottery teacher".into(), json!(["D1:3", "D2:2"])));
    assert_eq!(reference("evolving-1#1@3").0, "she glazes tiles at a ceramics studio");
    assert_eq!(reference("evolving-1#0@2").0, "Lisbon");
    assert_eq!(reference("evolving-1#0@3").0, "Porto");
    // The anchored question keeps its one answer at every checkpoint.
    assert_eq!(reference("evolving-1#2@1").0, "Lisbon");
    assert_eq!(reference("evolving-1#2@3").0, "Lisbon");
    // Endpoint evaluation asks each question once, against its own answer.
    let endpoint = eval_json(tmp.path(), &s, tasks.to_str().unwrap(), &[]);
    assert_eq!(endpoint["n"], 3);
    // With recency decay, the run says at which clock each checkpoint is evaluated.
    let recency = tmp.path().join("recency.yaml");
    let text = std::fs::read_to_string(&s).unwrap().replace("recency_half_life_days: 0", "recency_half_life_days: 30");
    std::fs::write(&recency, text).unwrap();
    let aged = eval_json(tmp.path(), &recency, tasks.to_str().unwrap(), &["--protocol", "replay"]);
    assert_eq!(
        aged["lifecycle"]["clocks"],
        json!([{"conversation": "evolving-1", "clocks": ["6 March 2023", "2 May 2023", "14 August 2023"]}])
    );
    let (code, human, err) = emend(
        tmp.path(),
        &["eval", "--strategy", recency.to_str().unwrap(), "--tasks", tasks.to_str().unwrap(), "--protocol", "replay"],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        human.contains(
            "lifecycle  append-only between checkpoints, maintenance none, query side effects none; \
                        recency decay (half-life 30 days) measured from each checkpoint's latest session date"
        ),
        "{human}"
    );
}
