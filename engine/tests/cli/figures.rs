//! One honest number per version: after a real `emend evolve`, `status`,
//! `log`, `show vN --json`, `evolve --json`, `hypotheses` and the report
//! print the same measured figure for the same version and data part, and
//! the same cost (mean context tokens, from the recorded evaluation, with the
//! ratios to the parent's and v1's; `diff` and `pending` too); a
//! version's confirm-part figure is the one its gate record tested; and every
//! hypothesis node a candidate is credited to names a field its diff changes,
//! in the global search and in the conservative mode. The LoCoMo test skips
//! (with a note) when `../shared/data/locomo10-dev.json` is absent.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::support;
use support::emend;

fn json(dir: &Path, args: &[&str]) -> Value {
    let (code, out, err) = emend(dir, args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {out}"))
}

/// A project at `tmp/p` on `tasks`, with `edit` applied to its emend.yaml.
fn project(tmp: &Path, tasks: &str, edit: impl Fn(String) -> String) -> PathBuf {
    let dir = tmp.join("p");
    let (code, out, err) = emend(tmp, &["init", dir.to_str().unwrap(), "--tasks", tasks]);
    assert_eq!(code, 0, "{out}{err}");
    let cfg = dir.join("emend.yaml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, edit(text)).unwrap();
    dir
}

/// Every journaled version: (parent, document).
fn versions(dir: &Path) -> BTreeMap<u64, (Option<u64>, Value)> {
    let (code, out, err) = emend(dir, &["journal", "export"]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["kind"] == "strategy_versioned")
        .map(|e| {
            let p = &e["payload"];
            (p["version"].as_u64().unwrap(), (p["parent"].as_u64(), p["document"].clone()))
        })
        .collect()
}

/// Each strategy hash's mean context tokens in its last recorded whole-set evaluation.
fn recorded_tokens(dir: &Path) -> BTreeMap<String, f64> {
    let (code, out, err) = emend(dir, &["journal", "export"]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["kind"] == "evaluated")
        .filter_map(|e| {
            let p = &e["payload"];
            Some((p["strategy_hash"].as_str()?.to_string(), p["summary"]["mean_context_tokens"].as_f64()?))
        })
        .collect()
}

/// Every view prints each version's cost as `show` does, and `show`'s is
/// the recorded evaluation's mean context tokens with the ratios to the
/// parent's and v1's recorded tokens.
fn check_costs(dir: &Path, run: &Value, shows: &BTreeMap<u64, Value>) {
    let recorded = recorded_tokens(dir);
    let tokens = |v: u64| recorded[shows[&v]["version"]["hash"].as_str().unwrap()];
    for (v, show) in shows {
        let cost = &show["version"]["cost"];
        assert!(close(cost["mean_context_tokens"].as_f64().unwrap(), tokens(*v)), "v{v}: {cost}");
        let relative = |key: &str, other: u64| {
            let r = &cost[key];
            assert_eq!(r["version"].as_u64(), Some(other), "v{v} {key}: {cost}");
            assert!(close(r["mean_context_tokens"].as_f64().unwrap(), tokens(other)), "v{v} {key}: {cost}");
            assert!(close(r["ratio"].as_f64().unwrap(), tokens(*v) / tokens(other)), "v{v} {key}: {cost}");
        };
        match show["version"]["parent"].as_u64() {
            Some(p) => relative("parent", p),
            None => assert!(cost["parent"].is_null(), "v{v}: {cost}"),
        }
        if *v == 1 {
            assert!(cost["first"].is_null(), "{cost}")
        } else {
            relative("first", 1)
        }
        // A version's gate record names the cost change on the confirm part it was tested on.
        if let Some(c) = show["candidate"]["full"]["cost"].as_object() {
            assert!(c["baseline_mean_tokens"].is_f64() && c["candidate_mean_tokens"].is_f64(), "v{v}: {c:?}");
            assert!(show["candidate"]["reason"].as_str().unwrap().contains("context tokens"), "v{v}: {show}");
        }
        let (a, b) = (format!("v{}", show["version"]["parent"].as_u64().unwrap_or(1)), format!("v{v}"));
        let diff = json(dir, &["diff", &a, &b, "--json"]);
        assert!(close(diff["tokens"]["b"].as_f64().unwrap(), tokens(*v)), "diff {a} {b}: {diff}");
    }
    let status = json(dir, &["status", "--json"]);
    for key in ["served", "best"] {
        let v = status[format!("{key}_version")].as_u64().unwrap();
        assert_eq!(status[format!("{key}_cost")], shows[&v]["version"]["cost"], "status {key}_cost against show v{v}");
    }
    let served = run["served_version"].as_u64().unwrap();
    assert_eq!(run["served_cost"], shows[&served]["version"]["cost"], "evolve --json against show v{served}");
    let log = json(dir, &["log", "--json"]);
    for r in log["entries"].as_array().unwrap().iter().filter(|e| e["kind"] == "round") {
        let v = r["served_after"].as_u64().unwrap();
        assert_eq!(r["served_cost"], shows[&v]["version"]["cost"], "log round {r} against show v{v}");
    }
    let html = std::fs::read_to_string(dir.join("r.html")).unwrap();
    for (v, show) in shows {
        let c = &show["version"]["cost"];
        let needle = format!("cost: {:.0} context tokens a question", c["mean_context_tokens"].as_f64().unwrap());
        assert!(html.contains(&needle), "the report lacks v{v}'s {needle:?}");
    }
}

/// The dotted paths of the leaves where `a` and `b` differ.
fn changed(a: &Value, b: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for k in x.keys().chain(y.keys()).collect::<BTreeSet<_>>() {
                let p = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                changed(x.get(k).unwrap_or(&Value::Null), y.get(k).unwrap_or(&Value::Null), &p, out);
            }
        }
        (x, y) if x.is_number() && y.is_number() && x.as_f64() != y.as_f64() => {
            out.insert(prefix.to_string());
        }
        (x, y) if !(x.is_number() && y.is_number()) && x != y => {
            out.insert(prefix.to_string());
        }
        _ => {}
    }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

/// The same measured figure for the same version and part in every view.
fn check_views(dir: &Path, run: &Value) {
    let status = json(dir, &["status", "--json"]);
    let served = run["served_version"].as_u64().unwrap();
    let best = run["best_version"].as_u64().unwrap();
    assert_eq!(status["served_version"].as_u64(), Some(served), "{status}");
    assert_eq!(status["best_version"].as_u64(), Some(best), "{status}");
    let mut whole: BTreeMap<u64, f64> = BTreeMap::new();
    let mut shows: BTreeMap<u64, Value> = BTreeMap::new();
    for v in versions(dir).keys() {
        let show = json(dir, &["show", &format!("v{v}"), "--json"]);
        let f = &show["version"]["figures"];
        let w = f["whole"]["accuracy"].as_f64().unwrap_or_else(|| panic!("v{v} has no whole-set figure: {show}"));
        assert_eq!(show["version"]["accuracy"].as_f64(), Some(w), "v{v}");
        // The parts add up to the whole set: the same evaluation, split once.
        let (s, c) = (&f["search"], &f["confirm"]);
        let n = |x: &Value, k: &str| x[k].as_u64().unwrap();
        assert_eq!(n(s, "n") + n(c, "n"), n(&f["whole"], "n"), "v{v}: {f}");
        assert_eq!(n(s, "correct") + n(c, "correct"), n(&f["whole"], "correct"), "v{v}: {f}");
        whole.insert(*v, w);
        shows.insert(*v, show);
    }
    // evolve --json and status: the served and best-ever versions' whole-set figures.
    for (key, v) in [("served", served), ("best", best)] {
        let acc = whole[&v];
        assert!(close(run[format!("{key}_accuracy")].as_f64().unwrap(), acc), "evolve --json {key}: {run}");
        assert!(close(status[format!("{key}_accuracy")].as_f64().unwrap(), acc), "status {key}: {status}");
        let sf = &status[format!("{key}_figures")];
        assert_eq!(sf, &shows[&v]["version"]["figures"], "status {key}_figures against show v{v}");
    }
    // The best-ever is the best measured whole-set figure among accepted and initial versions.
    let top = shows
        .iter()
        .filter(|(_, s)| matches!(s["version"]["origin"].as_str(), Some("init" | "accepted")))
        .map(|(v, _)| whole[v])
        .fold(f64::NEG_INFINITY, f64::max);
    assert!(close(whole[&best], top), "best-ever v{best} {} is not the best measured {top}", whole[&best]);
    // log: each round prints its served version's figure.
    let log = json(dir, &["log", "--json"]);
    let rounds: Vec<&Value> = log["entries"].as_array().unwrap().iter().filter(|e| e["kind"] == "round").collect();
    assert!(!rounds.is_empty(), "{log}");
    for r in rounds {
        let v = r["served_after"].as_u64().unwrap();
        assert!(close(r["served_accuracy"].as_f64().unwrap(), whole[&v]), "log round {r} against show v{v}");
    }
    // The accepted versions' confirm-part figure is what their gate record tested,
    // and their parent's confirm-part figure is the gate's baseline.
    for (v, show) in &shows {
        let Some(full) = show["candidate"]["full"].as_object() else { continue };
        if show["version"]["origin"] != "accepted" {
            continue;
        }
        let confirm = &show["version"]["figures"]["confirm"];
        assert!(close(confirm["accuracy"].as_f64().unwrap(), full["cand_accuracy"].as_f64().unwrap()), "v{v}");
        assert_eq!(confirm["n"], full["n"], "v{v}");
        let parent = show["version"]["parent"].as_u64().unwrap();
        let pc = &shows[&parent]["version"]["figures"]["confirm"]["accuracy"];
        assert!(close(pc.as_f64().unwrap(), full["base_accuracy"].as_f64().unwrap()), "v{v}'s parent v{parent}");
    }
    // The report prints each version's figures as show does.
    let (code, _, err) = emend(dir, &["report", "--out", "r.html"]);
    assert_eq!(code, 0, "{err}");
    let html = std::fs::read_to_string(dir.join("r.html")).unwrap();
    for (v, w) in &whole {
        let n = shows[v]["version"]["figures"]["whole"]["n"].as_u64().unwrap();
        let needle = format!("measured: {w:.4} on the whole task set ({n} questions)");
        assert!(html.contains(&needle), "the report lacks v{v}'s {needle:?}");
    }
    // hypotheses: each credited node's best search-part delta is at least what the credit measured.
    let hyp = json(dir, &["hypotheses", "--json"]);
    let nodes: BTreeMap<&str, &Value> =
        hyp["hypotheses"].as_array().unwrap().iter().map(|h| (h["key"].as_str().unwrap(), h)).collect();
    for show in shows.values() {
        for c in show["candidate"]["credits"].as_array().into_iter().flatten() {
            let Some(d) = c["delta"].as_f64() else { continue };
            let node = nodes.get(c["key"].as_str().unwrap()).unwrap_or_else(|| panic!("no node for {c}"));
            assert!(node["best_delta"].as_f64().unwrap() >= d - 1e-12, "{node} against {c}");
        }
    }
    check_costs(dir, run, &shows);
}

/// Every candidate's credited nodes and hypothesis name fields its diff
/// changes against its parent; every version's, too.
fn check_credits(dir: &Path) -> usize {
    let versions = versions(dir);
    let (code, out, err) = emend(dir, &["journal", "export"]);
    assert_eq!(code, 0, "{err}");
    let mut checked = 0;
    for e in out.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()) {
        if e["kind"] != "candidate_judged" {
            continue;
        }
        let c = &e["payload"];
        let (Some(doc), Some(parent)) = (c.get("document").filter(|d| !d.is_null()), c["parent_version"].as_u64())
        else {
            continue;
        };
        let mut paths = BTreeSet::new();
        changed(&versions[&parent].1, doc, "", &mut paths);
        let node_path = |key: &str| key.rsplit_once("::").map_or(key.to_string(), |(p, _)| p.to_string());
        let hyp = node_path(c["hypothesis"].as_str().unwrap());
        assert!(paths.contains(&hyp), "{} is credited to {hyp}, which it does not change ({paths:?})", c["id"]);
        for credit in c["credits"].as_array().into_iter().flatten() {
            let p = node_path(credit["key"].as_str().unwrap());
            assert!(paths.contains(&p), "{} credits {p}, which it does not change ({paths:?})", c["id"]);
        }
        checked += 1;
    }
    checked
}

#[test]
fn one_figure_per_version_and_part_on_the_embedded_dataset() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path(), "builtin", |t| t);
    let run = json(&dir, &["evolve", "--rounds", "60", "--json", "--quiet"]);
    assert!(run["accepted"].as_u64().unwrap() >= 1, "{run}");
    check_views(&dir, &run);
    assert!(check_credits(&dir) > 0);
}

/// A version waiting for approval shows its cost in `pending` as `show` does.
#[test]
fn a_pending_version_shows_its_cost() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path(), "builtin", |t| t.replace("  approval: auto", "  approval: manual"));
    let run = json(&dir, &["evolve", "--rounds", "60", "--json", "--quiet"]);
    let v = run["pending_versions"][0].as_u64().unwrap_or_else(|| panic!("no pending version: {run}"));
    let pending = json(&dir, &["pending", "--json"]);
    let p = pending["pending"].as_array().unwrap().iter().find(|p| p["version"] == v).unwrap().clone();
    let show = json(&dir, &["show", &format!("v{v}"), "--json"]);
    assert!(show["version"]["cost"]["mean_context_tokens"].is_f64(), "{show}");
    assert_eq!(p["cost"], show["version"]["cost"], "pending v{v} against show");
    let (code, out, err) = emend(&dir, &["pending"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("  cost: {}", p["cost_text"].as_str().unwrap())), "{out}");
}

#[test]
fn credited_nodes_name_changed_fields_in_the_conservative_mode() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path(), "builtin", |t| t.replace("method: null", "method: steps"));
    let run = json(&dir, &["evolve", "--rounds", "12", "--json", "--quiet"]);
    assert!(run["candidates"].as_u64().unwrap() >= 1, "{run}");
    assert!(check_credits(&dir) > 0);
    check_views(&dir, &run);
}

#[test]
fn one_figure_per_version_and_part_on_locomo() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/locomo10-dev.json");
    if !data.is_file() {
        eprintln!("skipped: {} is absent", data.display());
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path(), data.canonicalize().unwrap().to_str().unwrap(), |t| t);
    let run = json(&dir, &["evolve", "--max-evals", "45", "--json", "--quiet"]);
    assert!(run["accepted"].as_u64().unwrap() >= 1, "{run}");
    check_views(&dir, &run);
    assert!(check_credits(&dir) > 0);
}
