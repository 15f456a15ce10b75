//! `emend trials` and the search where a reviewer reads it, end to end on the
//! embedded dataset: a short `emend evolve --max-evals 12` with the global
//! search, then the trials table as JSON, CSV and text; `show`, `log` and
//! `pending` listing a searched candidate's kept fields; and the report's
//! search section.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::support::emend;
use serde_json::{Value, json};

const HEADING: &str = "fields kept after pruning (search-part contribution when reverted alone)";

fn ok(dir: &Path, args: &[&str]) -> String {
    let (code, out, err) = emend(dir, args);
    assert_eq!(code, 0, "emend {args:?} exited {code}\nstdout:\n{out}\nstderr:\n{err}");
    out
}

fn json_of(dir: &Path, args: &[&str]) -> Value {
    let out = ok(dir, args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("emend {args:?}: not JSON ({e}):\n{out}"))
}

/// A new project on the embedded dataset, with `approval` (`auto` or `manual`).
fn project(approval: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    ok(tmp.path(), &["init", "p", "--tasks", "builtin"]);
    let dir = tmp.path().join("p");
    let config = std::fs::read_to_string(dir.join("emend.yaml")).unwrap();
    assert!(config.contains("  approval: auto\n"), "{config}");
    std::fs::write(
        dir.join("emend.yaml"),
        config.replacen("  approval: auto\n", &format!("  approval: {approval}\n"), 1),
    )
    .unwrap();
    (tmp, dir)
}

/// The `payload`s of the journal's `searched` events, in order.
fn searched(dir: &Path) -> Vec<Value> {
    ok(dir, &["journal", "export"])
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["kind"] == "searched")
        .map(|e| e["payload"].clone())
        .collect()
}

/// The search part's size from the last round's split, else the most
/// questions any row was evaluated on (no round ran).
fn part_size(dir: &Path, rows: &[Value]) -> u64 {
    let status = json_of(dir, &["status", "--json"]);
    let most = rows.iter().filter_map(|r| r["evaluated"].as_u64()).max().unwrap_or(0);
    status["last_round"]["split"]["search"].as_u64().unwrap_or(most)
}

/// `trials --front`: complete strategies with their tokens, none beaten by
/// another complete one (as accurate with fewer tokens, or more accurate with
/// as few), and every complete strategy left out is beaten by one on it.
fn check_front(dir: &Path, rows: &[Value]) {
    let point = |r: &Value| (r["score"].as_f64(), r["tokens"].as_f64());
    let beats = |(s2, t2): (f64, f64), (s, t): (f64, f64)| s2 >= s && t2 <= t && (s2 > s || t2 < t);
    let mut latest: std::collections::BTreeMap<&str, (f64, f64)> = Default::default();
    for r in rows.iter().filter(|r| r["state"] == "complete") {
        if let (Some(h), (Some(s), Some(t))) = (r["hash"].as_str(), point(r)) {
            latest.insert(h, (s, t));
        }
    }
    let front = json_of(dir, &["trials", "--front", "--json"]);
    let front = front["trials"].as_array().unwrap();
    assert!(!front.is_empty() && front.len() <= latest.len(), "{front:?}");
    let on: Vec<(f64, f64)> =
        front.iter().map(|r| (r["score"].as_f64().unwrap(), r["tokens"].as_f64().unwrap())).collect();
    assert!(on.windows(2).all(|w| w[0].1 <= w[1].1), "by tokens: {on:?}");
    for p in &on {
        assert!(!latest.values().any(|q| beats(*q, *p)), "{p:?} on the front is beaten");
    }
    for (h, p) in &latest {
        let listed = front.iter().any(|r| r["hash"] == *h);
        assert!(listed || on.iter().any(|q| beats(*q, *p)), "{h} {p:?} is neither on the front nor beaten by it");
    }
    let text = ok(dir, &["trials", "--front"]);
    assert!(text.contains("the accuracy-cost front:"), "{text}");
}

#[test]
fn trials_export_every_strategy_the_searches_scored() {
    let (_tmp, dir) = project("auto");
    assert_eq!(ok(&dir, &["trials"]), "no searches journaled yet\n");
    assert_eq!(json_of(&dir, &["trials", "--json"]), json!({"format": 2, "trials": []}));
    ok(&dir, &["evolve", "--max-evals", "12", "--quiet"]);

    let doc = json_of(&dir, &["trials", "--json"]);
    assert_eq!(doc["format"], 2, "{doc:.300}");
    let rows = doc["trials"].as_array().unwrap();
    assert!(!rows.is_empty(), "a search scored something");
    let part = part_size(&dir, rows);
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r["number"], i, "numbered over the whole journal in order: {r}");
        assert!(r["search"].as_u64().unwrap() >= 1, "{r}");
        assert_eq!(r["hash"].as_str().map(str::len), Some(64), "full hashes in JSON: {r}");
        assert!(matches!(r["stage"].as_str(), Some("trial" | "prune" | "served" | "consensus")), "{r}");
        let q = r["evaluated"].as_u64().unwrap();
        assert!(q >= 1 && q <= part, "{q} questions of a search part of {part}: {r}");
        let correct = r["correct"].as_u64().unwrap();
        assert!(correct <= q, "{r}");
        if q == part {
            // A score is the accuracy on the whole search part, never from fewer questions.
            assert_eq!(r["state"], "complete", "{r}");
            let score = r["score"].as_f64().unwrap();
            assert!((score - correct as f64 / q as f64).abs() < 1e-12, "the score is what was measured: {r}");
        } else {
            assert_eq!(r["state"], "raced_out", "{r}");
            assert_eq!(r["score"], Value::Null, "no score from {q} of {part} questions: {r}");
            assert_eq!(r["estimate"], Value::Null, "search.raced_out: rank learns no estimate: {r}");
        }
        if r["stage"] == "served" {
            // The served strategy's results come from the run's observe step, not from the search.
            assert_eq!((&r["started"], &r["duration_ms"]), (&Value::Null, &Value::Null), "{r}");
        } else {
            assert!(r["started"].as_str().is_some_and(|t| t.ends_with('Z')), "{r}");
            assert!(r["duration_ms"].as_u64().is_some(), "{r}");
        }
        assert!(r["values"].as_object().is_some_and(|v| !v.is_empty()), "{r}");
    }
    assert!(rows.iter().any(|r| r["state"] == "complete"), "at least one strategy saw the whole search part");
    // A strategy is scored once: a hash on several rows got further each time, never two results.
    let mut by_hash: std::collections::BTreeMap<&str, Vec<&Value>> = std::collections::BTreeMap::new();
    for r in rows {
        by_hash.entry(r["hash"].as_str().unwrap()).or_default().push(r);
    }
    for (h, seen) in by_hash {
        let evaluated: Vec<u64> = seen.iter().map(|r| r["evaluated"].as_u64().unwrap()).collect();
        assert!(evaluated.windows(2).all(|w| w[0] < w[1]), "{h} scored twice on {evaluated:?} questions");
    }
    let searches = searched(&dir);
    assert_eq!(rows.last().unwrap()["search"], searches.len(), "one ordinal per searched event");
    for (i, s) in searches.iter().enumerate() {
        let Some(h) = s["proposed"].as_str() else { continue };
        assert!(
            rows.iter().any(|r| r["hash"] == h && r["proposed"] == true),
            "search {} proposed {h}, which a row names as proposed",
            i + 1
        );
    }

    let csv = ok(&dir, &["trials", "--csv"]);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), rows.len() + 1, "a header, then a row per trial:\n{csv:.600}");
    assert!(lines[0].starts_with(
        "number,search,round,stage,state,hash,evaluated,correct,score,estimate,started,duration_ms,tokens,proposed,changed,"
    ));
    let columns = lines[0].split(',').count();
    assert_eq!(columns, 15 + rows[0]["values"].as_object().unwrap().len(), "a column per field");
    for line in lines.iter().filter(|l| !l.contains('"')) {
        assert_eq!(line.split(',').count(), columns, "{line}");
    }

    let text = ok(&dir, &["trials"]);
    let header: Vec<&str> = text.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "number",
            "search",
            "round",
            "stage",
            "state",
            "evaluated",
            "correct",
            "score",
            "estimate",
            "tokens",
            "hash",
            "proposed",
            "changed"
        ]
    );
    assert_eq!(text.lines().count(), rows.len() + 5, "header, rows, four closing lines:\n{text}");
    check_front(&dir, rows);
    let one = json_of(&dir, &["trials", "--search", "1", "--json"]);
    let firsts: Vec<&Value> = rows.iter().filter(|r| r["search"] == 1).collect();
    assert_eq!(one["trials"].as_array().unwrap().iter().collect::<Vec<_>>(), firsts);
    for bad in [&["trials", "--search", "0"][..], &["trials", "--search", "999"], &["trials", "--json", "--csv"]] {
        let (code, out, err) = emend(&dir, bad);
        assert_eq!(code, 2, "{bad:?}: {out}{err}");
        assert_eq!(err.lines().filter(|l| l.starts_with("error: ")).count(), 1, "{bad:?}: {err}");
    }
}

/// The candidates the journal's searches proposed: (id, credits).
fn searched_candidates(dir: &Path) -> Vec<(String, Vec<Value>)> {
    let proposed: BTreeSet<String> =
        searched(dir).iter().filter_map(|s| s["proposed"].as_str().map(String::from)).collect();
    let log = json_of(dir, &["log", "--json"]);
    let mut out = Vec::new();
    for c in log["entries"].as_array().unwrap().iter().flat_map(|e| e["candidates"].as_array().into_iter().flatten()) {
        let id = c["id"].as_str().unwrap().to_string();
        let shown = json_of(dir, &["show", &id, "--json"]);
        let hash = shown["candidate"]["hash"].as_str().unwrap_or_default().to_string();
        if proposed.contains(&hash) {
            let credits = shown["candidate"]["credits"].as_array().cloned().unwrap_or_default();
            assert_eq!(c["credits"].as_array().cloned().unwrap_or_default(), credits, "log and show agree");
            out.push((id, credits));
        }
    }
    out
}

#[test]
fn a_reviewer_reads_the_search_and_the_kept_fields() {
    let (_tmp, dir) = project("auto");
    ok(&dir, &["evolve", "--max-evals", "12", "--quiet"]);
    let candidates = searched_candidates(&dir);
    let log = ok(&dir, &["log"]);
    for (id, credits) in &candidates {
        let text = ok(&dir, &["show", id, "--no-color"]);
        if credits.is_empty() {
            assert!(!text.contains(HEADING), "{text}");
            continue;
        }
        assert!(text.contains(&format!("{HEADING}:\n")), "{text}");
        for c in credits {
            let line = format!("  {} {} -> {} (", c["path"].as_str().unwrap(), c["from"], c["to"]);
            assert!(text.contains(&line), "show {id} lacks {line:?}:\n{text}");
        }
        assert!(log.contains(&format!("{} field", credits.len())) && log.contains(" kept, "), "{log}");
    }

    ok(&dir, &["report", "--out", "a.html"]);
    ok(&dir, &["report", "--out", "b.html"]);
    let html = std::fs::read_to_string(dir.join("a.html")).unwrap();
    assert_eq!(html, std::fs::read_to_string(dir.join("b.html")).unwrap(), "the same journal, the same bytes");
    for needle in [
        "<h2 id=\"search\">Search</h2>",
        "<svg id=\"search-chart\"",
        "screened (trials drawn)",
        "<table class=\"searches\">",
    ] {
        assert!(html.contains(needle), "the report lacks {needle}");
    }
    if candidates.iter().any(|(_, c)| !c.is_empty()) && json_of(&dir, &["status", "--json"])["served_version"] != 1 {
        assert!(html.contains(HEADING), "an accepted searched candidate's kept fields are in the report");
    }
}

#[test]
fn a_pending_searched_version_lists_its_kept_fields() {
    let (_tmp, dir) = project("manual");
    ok(&dir, &["evolve", "--max-evals", "12", "--quiet"]);
    let pending = json_of(&dir, &["pending", "--json"]);
    let text = ok(&dir, &["pending"]);
    let mut any = false;
    for p in pending["pending"].as_array().unwrap() {
        let credits = p["credits"].as_array().unwrap_or_else(|| panic!("credits as recorded: {p}"));
        for c in credits {
            let line = format!("    {} {} -> {} (", c["path"].as_str().unwrap(), c["from"], c["to"]);
            assert!(text.contains(&line), "pending lacks {line:?}:\n{text}");
        }
        any |= !credits.is_empty();
    }
    assert_eq!(text.contains(HEADING), any, "{text}");
}
