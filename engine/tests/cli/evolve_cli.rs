//! `emend init` / `emend evolve` end to end on the embedded dataset: exit
//! codes, the single-writer lock, and resuming after SIGKILL mid-round.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use crate::support;
use support::emend;

fn init(dir: &Path) {
    let (code, out, err) = emend(dir.parent().unwrap(), &["init", dir.to_str().unwrap(), "--tasks", "builtin"]);
    assert_eq!(code, 0, "{out}{err}");
}

/// The journal's events with wall-clock fields removed.
fn normalized_events(dir: &Path) -> Vec<serde_json::Value> {
    let (code, out, err) = emend(dir, &["journal", "export"]);
    assert_eq!(code, 0, "{err}");
    out.lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let mut payload = v["payload"].clone();
            for k in ["at", "who"] {
                payload.as_object_mut().unwrap().remove(k);
            }
            support::strip_clock(&mut payload);
            serde_json::json!({"seq": v["seq"], "kind": v["kind"], "payload": payload})
        })
        .collect()
}

#[test]
fn evolve_json_summary_and_status() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    init(&dir);
    let (code, out, err) = emend(&dir, &["evolve", "--rounds", "2", "--json", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    for key in [
        "rounds",
        "accepted",
        "rejected_by",
        "full_evaluations",
        "probe_evaluations",
        "start_accuracy",
        "served_accuracy",
        "best_accuracy",
        "served_version",
        "rollbacks",
        "elapsed_ms",
    ] {
        assert!(v.get(key).is_some(), "missing {key} in {v}");
    }
    // Two rounds, or fewer when the search converged first.
    assert!(v["rounds"] == 2 || v["stopped"] == "converged" || v["stopped"] == "exhausted", "{v}");
    assert!(v["rounds"].as_u64().unwrap() >= 1, "{v}");
    let (code, out, _) = emend(&dir, &["status", "--json"]);
    assert_eq!(code, 0);
    let s: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert!(s["served_version"].is_u64() && s["best_version"].is_u64(), "{s}");
    assert_eq!(s["rounds"], v["rounds"]);
    let (code, out, _) = emend(&dir, &["show", "served", "--yaml"]);
    assert_eq!(code, 0);
    assert!(out.contains("retrieve:"), "{out}");
    let (code, out, _) = emend(&dir, &["journal", "verify"]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn bad_input_and_missing_project_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, _, err) = emend(tmp.path(), &["evolve"]);
    assert_eq!(code, 2);
    assert!(err.contains("no emend.yaml"), "{err}");
    let dir = tmp.path().join("p");
    init(&dir);
    let cfg = std::fs::read_to_string(dir.join("emend.yaml")).unwrap();
    std::fs::write(dir.join("emend.yaml"), cfg.replace("alpha: 0.05", "alpha: 7")).unwrap();
    let (code, _, err) = emend(&dir, &["evolve"]);
    assert_eq!(code, 2);
    assert!(err.contains("emend.yaml: line ") && err.contains(": gates.alpha: must be between"), "{err}");
    let (code, _, err) = emend(tmp.path(), &["init", dir.to_str().unwrap(), "--tasks", "builtin"]);
    assert_eq!(code, 2);
    assert!(err.contains("already exists"), "{err}");
}

#[test]
fn a_second_writer_exits_3_naming_the_holder() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    init(&dir);
    let mut child = Command::new(crate::support::bin())
        .current_dir(&dir)
        .args(["evolve", "--rounds", "50"])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("round 1"), "{first}");
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "1"]);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(code, 3, "{err}");
    assert!(err.contains(&format!("pid {}", child.id())), "{err}");
}

#[test]
fn killed_mid_round_and_resumed_gives_the_same_journal_as_an_uninterrupted_run() {
    let tmp = tempfile::tempdir().unwrap();
    let straight = tmp.path().join("straight");
    init(&straight);
    let (code, _, err) = emend(&straight, &["evolve", "--rounds", "3", "--quiet"]);
    assert_eq!(code, 0, "{err}");

    let resumed = tmp.path().join("resumed");
    init(&resumed);
    let mut child = Command::new(crate::support::bin())
        .current_dir(&resumed)
        .args(["evolve", "--rounds", "3"])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    // Kill (SIGKILL) as soon as round 2 has started: mid-round.
    loop {
        let line = lines.next().expect("evolve printed round 2").unwrap();
        if line.starts_with("round 2: served") {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let (code, out, _) = emend(&resumed, &["journal", "verify"]);
    assert_eq!(code, 0, "{out}");
    let (code, _, err) = emend(&resumed, &["evolve", "--rounds", "2", "--quiet"]);
    assert_eq!(code, 0, "{err}");

    let a = normalized_events(&straight);
    let b = normalized_events(&resumed);
    if let Some(i) = (0..a.len().min(b.len())).find(|&i| a[i] != b[i]) {
        let (x, y) = (a[i].to_string(), b[i].to_string());
        let at = x.bytes().zip(y.bytes()).position(|(p, q)| p != q).unwrap_or(0);
        let clip = |s: &str| s[at.saturating_sub(200)..(at + 200).min(s.len())].to_string();
        panic!(
            "event {} differs ({}):\n uninterrupted: ...{}...\n resumed:       ...{}...",
            i + 1,
            a[i]["kind"],
            clip(&x),
            clip(&y)
        );
    }
    assert_eq!(a.len(), b.len());
    assert_eq!(
        std::fs::read_to_string(straight.join("strategies/served.yaml")).unwrap(),
        std::fs::read_to_string(resumed.join("strategies/served.yaml")).unwrap()
    );
}

#[test]
fn an_unreadable_served_file_is_not_reported_as_a_hand_edit() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    init(&dir);
    // A directory where the file should be: reading it fails whoever runs the test (even root).
    let served = dir.join("strategies/served.yaml");
    std::fs::remove_file(&served).unwrap();
    std::fs::create_dir(&served).unwrap();
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("cannot be read"), "{err}");
    assert!(!err.contains("content hash"), "{err}");
    assert!(err.contains("directory"), "the OS error is kept as the source: {err}");
}

/// Runs 60 rounds in `dir` and checks issue 13's stopping contract: the run
/// either keeps accepting or stops `exhausted`, and every journaled round
/// proposed at least one new candidate (an empty round is never run).
fn sixty_rounds(dir: &Path) -> serde_json::Value {
    let (code, out, err) = emend(dir, &["evolve", "--rounds", "60", "--json", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let rounds = v["rounds"].as_u64().unwrap();
    assert!(rounds == 60 || v["stopped"] == "converged" || v["stopped"] == "exhausted", "{v}");
    assert!(v["evaluations_used"].as_f64().unwrap() > 0.0, "{v}");
    let events = normalized_events(dir);
    for e in events.iter().filter(|e| e["kind"] == "round_finished") {
        assert!(e["payload"]["candidates"].as_u64().unwrap() > 0, "an empty round was journaled: {e}");
        assert!(e["payload"]["split"]["confirm"].as_u64().unwrap() > 0, "{e}");
    }
    // A second run over a converged (or exhausted) journal stops at once, as the first one did, and searches nothing.
    if v["stopped"] == "converged" || v["stopped"] == "exhausted" {
        let (code, out, err) = emend(dir, &["evolve", "--rounds", "5", "--json", "--quiet"]);
        assert_eq!(code, 0, "{err}");
        let again: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!((again["rounds"].as_u64(), &again["stopped"]), (Some(0), &v["stopped"]), "{again}");
        let searches = |e: &Vec<serde_json::Value>| e.iter().filter(|e| e["kind"] == "searched").count();
        let before = searches(&events);
        assert_eq!(searches(&normalized_events(dir)), before, "the second run searched again");
    }
    v
}

#[test]
fn sixty_rounds_on_the_embedded_dataset_accept_or_stop_exhausted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    init(&dir);
    let v = sixty_rounds(&dir);
    assert!(v["accepted"].as_u64().unwrap() >= 1, "{v}");
    assert!(v["start_mean_tokens"].is_f64() && v["served_mean_tokens"].is_f64(), "{v}");
    let (code, out, _) = emend(&dir, &["status", "--json"]);
    assert_eq!(code, 0);
    let s: serde_json::Value = serde_json::from_str(&out).unwrap();
    let c = &s["confirm"];
    assert!(c["questions"].as_u64().unwrap() > 0, "{s}");
    let (alpha, wealth) = (c["next_alpha"].as_f64().unwrap(), c["lord_wealth"].as_f64().unwrap());
    assert!(alpha > 0.0 && alpha < 0.05 && wealth > 0.0, "{s}");
    let reuse = c["reuse"].as_str().unwrap();
    assert!(reuse.contains("only each confirm test's verdict") && reuse.contains("not fresh data"), "{s}");
    assert!(!reuse.contains("holdout"), "{s}");
    // Every accepted version names its confirm-part delta, alpha and wealth.
    let (code, out, _) = emend(&dir, &["show", "v2"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("confirm-part delta") && out.contains("tested at alpha") && out.contains("wealth left"),
        "{out}"
    );
}

#[test]
fn sixty_rounds_on_locomo_accept_or_stop_exhausted() {
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/locomo10-dev.json");
    if !data.is_file() {
        eprintln!("skipped: {} is absent", data.display());
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let (code, out, err) =
        emend(tmp.path(), &["init", dir.to_str().unwrap(), "--tasks", data.canonicalize().unwrap().to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    sixty_rounds(&dir);
}

#[test]
fn max_evals_stops_the_run_and_bad_budgets_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    init(&dir);
    let (code, out, err) = emend(&dir, &["evolve", "--rounds", "60", "--max-evals", "3", "--json", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["stopped"], "max_evals", "{v}");
    // Nothing is spent that the budget cannot pay for.
    let used = v["evaluations_used"].as_f64().unwrap();
    assert!(used > 1.0 && used <= 3.0 + 1e-9, "{v}");
    for bad in [["--max-evals", "0"], ["--max-evals", "x"], ["--max-time", "soon"]] {
        let (code, _, err) = emend(&dir, &["evolve", bad[0], bad[1]]);
        assert_eq!(code, 2, "{bad:?}: {err}");
    }
    let (code, out, err) = emend(&dir, &["evolve", "--rounds", "60", "--max-time", "1ns", "--json", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((v["stopped"].as_str(), v["rounds"].as_u64()), (Some("max_time"), Some(0)), "{v}");
    // No round journaled: no first or last round either.
    assert_eq!((&v["first_round"], &v["last_round"]), (&serde_json::Value::Null, &serde_json::Value::Null), "{v}");
}

/// Before any round has run there is no best-ever version: the summary says
/// so (null in JSON), not "v0 0.0000".
#[test]
fn a_run_before_any_round_has_no_best_ever_version() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    init(&dir);
    let (code, out, err) = emend(&dir, &["evolve", "--rounds", "1", "--max-time", "1ns", "--json", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((&v["best_version"], &v["best_accuracy"]), (&serde_json::Value::Null, &serde_json::Value::Null), "{v}");
    let (code, out, err) = emend(&dir, &["evolve", "--rounds", "1", "--max-time", "1ns"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("best-ever none yet (no round has run)"), "{out}");
}

/// Every value `stopped` takes is listed by `evolve --help`, each with what the next run does.
#[test]
fn evolve_help_lists_every_stopped_value_with_the_next_run() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, out, err) = emend(tmp.path(), &["evolve", "--help"]);
    assert_eq!(code, 0, "{err}");
    for value in ["rounds", "max_evals", "max_time", "converged", "exhausted", "interrupted", "errored"] {
        let line = out.lines().find(|l| l.trim_start().starts_with(&format!("{value} "))).unwrap_or_else(|| {
            panic!("evolve --help does not list stopped: {value}:\n{out}");
        });
        assert!(line.contains("next run") || line.contains("later run"), "{line}");
    }
    assert!(out.contains("5 for errored"), "{out}");
}

/// A harness that evaluates the served strategy but fails for every candidate: the
/// run says `stopped: errored`, names the first error and exits 5, not 0.
#[test]
fn a_run_whose_every_candidate_errored_exits_5_naming_the_first_error() {
    let tmp = tempfile::tempdir().unwrap();
    let emend_bin = crate::support::bin().display().to_string();
    let base = tmp.path().join("served.json");
    // The first strategy it sees is the served one; any other gets an outcomes file that is no JSON.
    let script = format!(
        "[ -f '{b}' ] || cp {{strategy}} '{b}'; if cmp -s {{strategy}} '{b}'; then exec \"{emend_bin}\" worker \
         {{strategy}} {{tasks}} {{out}}; else echo 'broken adapter' > {{out}}; fi",
        b = base.display()
    );
    let (code, out, err) =
        emend(tmp.path(), &["init", "p", "--tasks", "builtin", "--harness-command", "sh", "-c", &script]);
    assert_eq!(code, 0, "{out}{err}");
    // init ran the command once, on the starting strategy with its file's key order; the run's
    // first evaluation, of v1 as the journal holds it (keys sorted), is the one to remember.
    std::fs::remove_file(&base).unwrap();
    let dir = tmp.path().join("p");
    let config = dir.join("emend.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, text.replacen("  method: null", "  method: rules", 1)).unwrap();
    let (code, out, err) = emend(&dir, &["evolve", "--rounds", "3", "--json", "--quiet"]);
    assert_eq!(code, 5, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["stopped"], "errored", "{v}");
    assert!(v["candidates"].as_u64().unwrap() > 0 && v["errored"] == v["candidates"], "{v}");
    let first = v["first_error"].as_str().unwrap();
    assert!(err.contains("stopped: errored") && err.contains(first), "{err}");
    let (code, out, err) = emend(&dir, &["journal", "verify"]);
    assert_eq!(code, 0, "{out}{err}");
}

/// A direction blocked for the same reason in every searched segment (the
/// MiniLM channel without its model or feature) is reported once per run on
/// stderr, however many segments the run searched.
#[test]
fn a_repeated_notice_is_printed_once_per_run() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    init(&dir);
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "2"]);
    assert_eq!(code, 0, "{err}");
    let blocked: Vec<&str> = err.lines().filter(|l| l.contains("index.dense_kind::toggle: blocked")).collect();
    assert_eq!(blocked.len(), 1, "{err}");
    let (code, export, err) = emend(&dir, &["journal", "export"]);
    assert_eq!(code, 0, "{err}");
    // Each searched segment asked the planner again (and was blocked again).
    let segments = export.lines().filter(|l| l.contains("\"kind\":\"searched\"")).count();
    assert!(segments > 1, "{segments} searched segments");
}

/// The rounds' split records, in journal order.
fn split_records(dir: &Path) -> Vec<serde_json::Value> {
    normalized_events(dir)
        .into_iter()
        .filter(|e| e["kind"] == "round_finished")
        .filter_map(|e| e["payload"].get("split").cloned())
        .collect()
}

#[test]
fn a_changed_split_is_refused_until_new_split_starts_a_new_lord_sequence() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    init(&dir);
    // The rule evolver proposes every round, so every run below journals a round.
    let config = std::fs::read_to_string(dir.join("emend.yaml")).unwrap();
    std::fs::write(dir.join("emend.yaml"), config.replace("  method: null\n", "  method: rules\n")).unwrap();
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "2", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let first = split_records(&dir);
    assert!(!first.is_empty(), "a round recorded its split");
    assert_eq!(first[0]["assignment"], "hash");
    assert_eq!(first[0]["unit"], "question", "the embedded set has too few conversations for a conversation split");
    assert!(first[0].get("lord_from_round").is_none(), "{}", first[0]);
    let (code, out, _) = emend(&dir, &["status", "--json"]);
    assert_eq!(code, 0);
    let status: serde_json::Value = serde_json::from_str(&out).unwrap();
    let guarantee = status["confirm"]["guarantee"].as_str().unwrap();
    assert!(
        guarantee.contains("new questions about these") && guarantee.contains("not new conversations"),
        "{guarantee}"
    );
    let tests_before = status["confirm"]["tests"].as_u64().unwrap();
    assert!(tests_before > 0, "{status}");
    let (code, human, _) = emend(&dir, &["status"]);
    assert_eq!(code, 0);
    assert!(human.contains("split: question split at 0.4, seed 0; the confirm test's guarantee covers"), "{human}");

    // Another split seed would move searched questions into the confirm part.
    let config = std::fs::read_to_string(dir.join("emend.yaml")).unwrap();
    let changed = config.replace("confirm_fraction: 0.4\n    seed: 0", "confirm_fraction: 0.4\n    seed: 7");
    assert_ne!(changed, config, "the template's split block");
    std::fs::write(dir.join("emend.yaml"), changed).unwrap();
    let before = normalized_events(&dir);
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("harness.split") && err.contains("--new-split") && err.contains("seed 7"), "{err}");
    assert_eq!(normalized_events(&dir), before, "a refused run journals nothing");

    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "1", "--new-split", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let after = split_records(&dir);
    assert_eq!(after.len(), first.len() + 1, "the run on the new split journaled its round");
    let last = after.last().unwrap();
    assert_eq!(last["seed"], 7);
    let from = last["lord_from_round"].as_u64().expect("a new sequence starts at this round");
    let (_, out, _) = emend(&dir, &["status", "--json"]);
    let status: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(status["confirm"]["lord_from_round"], from);
    assert_eq!(status["confirm"]["tests"], 1, "the new sequence counts only its own test: {status}");
    // The next run on the same split joins that sequence without the flag.
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(split_records(&dir).last().unwrap()["lord_from_round"], from);
}

#[test]
fn diagnose_compare_shows_how_the_labels_moved_between_versions() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    init(&dir);
    support::json(&dir, &["evolve", "--rounds", "10", "--json", "--quiet"]);
    let served = support::json(&dir, &["status", "--json"])["served_version"].as_u64().unwrap();
    assert!(served >= 2);
    let n = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap() as i64;
    // A version against itself: nothing moves, and the counts are `diagnose`'s.
    let v = format!("v{served}");
    let same = support::json(&dir, &["diagnose", "--compare", &v, &v, "--json"]);
    assert_eq!((n(&same, "fixed"), n(&same, "new"), n(&same, "moved")), (0, 0, 0), "{same}");
    let diagnosed = support::json(&dir, &["diagnose", "--json"]);
    // The evidence judge rules generation errors out, and diagnose says so.
    assert_eq!(diagnosed["cannot_occur"]["label"], "generation_error", "{diagnosed}");
    assert!(diagnosed["counts"].get("generation_error").is_none(), "{diagnosed}");
    assert!(
        support::ok(&dir, &["diagnose"]).contains("generation_error cannot occur here: under harness.judge: evidence")
    );
    for row in same["labels"].as_array().unwrap() {
        let label = row["label"].as_str().unwrap();
        assert_eq!(row["from"], diagnosed["counts"][label], "{label}: {same} vs {diagnosed}");
        assert_eq!(row["to"], row["from"]);
    }
    // v1 -> the served version: the label totals move by fixed minus new failures.
    let moved = support::json(&dir, &["diagnose", "--compare", "v1", &v, "--json"]);
    let total = |k: &str| moved["labels"].as_array().unwrap().iter().map(|r| r[k].as_i64().unwrap()).sum::<i64>();
    assert_eq!(total("from") - total("to"), n(&moved, "fixed") - n(&moved, "new"), "{moved}");
    assert!(n(&moved, "fixed") > 0, "{moved}");
    assert_eq!(total("to"), n(&moved, "persist") + n(&moved, "moved") + n(&moved, "new"), "{moved}");
    let text = support::ok(&dir, &["diagnose", "--compare", "v1", &v]);
    assert!(text.starts_with(&format!("Layer A labels, v1 -> {v} on ")) && text.contains("fixed "), "{text}");
    let (code, _, err) = emend(&dir, &["diagnose", "--compare", "v1", "v99"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("v99: no such version"), "{err}");

    // Seed 002's order labels the same failures: the rows add up to them,
    // and each of emend's labels keeps its count.
    let ordered = support::json(&dir, &["diagnose", "--seed-order", "--json"]);
    let rows = ordered["seed_order"].as_array().unwrap();
    let sum = |label: Option<&str>| {
        rows.iter().filter(|r| label.is_none_or(|l| r["emend"] == l)).map(|r| r["count"].as_u64().unwrap()).sum::<u64>()
    };
    assert_eq!(sum(None), ordered["failures"].as_u64().unwrap(), "{ordered}");
    for (label, count) in ordered["counts"].as_object().unwrap() {
        assert_eq!(sum(Some(label)), count.as_u64().unwrap(), "{label}: {ordered}");
    }
    let text = support::ok(&dir, &["diagnose", "--seed-order"]);
    assert!(text.contains("seed 002's order") && text.contains(" failures (generation_error is the seed's"), "{text}");
    assert!(support::json(&dir, &["diagnose", "--json"])["seed_order"].is_null());
}

#[test]
fn every_round_journals_its_digest_and_show_rn_prints_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    init(&dir);
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "4", "--json", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let rounds: Vec<serde_json::Value> = normalized_events(&dir)
        .into_iter()
        .filter(|e| e["kind"] == "round_finished")
        .map(|e| e["payload"].clone())
        .collect();
    assert!(!rounds.is_empty());
    for r in &rounds {
        let d = &r["digest"];
        assert_eq!(d["version"], r["served_version_before"], "{r}");
        let failures: u64 = d["labels"].as_object().unwrap().values().map(|l| l["count"].as_u64().unwrap()).sum();
        assert_eq!(Some(failures), d["failures"].as_u64(), "{d}");
        // The round's diagnosis and its digest count the same failures.
        let diagnosed: u64 = r["diagnosis"].as_object().unwrap().values().map(|n| n.as_u64().unwrap()).sum();
        assert_eq!(failures, diagnosed, "{r}");
        // v1 has no previous version; a later version is compared with its parent.
        if d["version"] == 1 {
            assert!(d.get("previous").is_none(), "{d}");
        } else {
            assert!(d["previous"].as_u64().is_some_and(|p| p < d["version"].as_u64().unwrap()), "{d}");
            assert!(d["categories"].as_object().unwrap().values().all(|c| c["delta"].is_f64()), "{d}");
        }
    }
    let (code, out, err) = emend(&dir, &["show", "r1"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("round 1: served v1 -> v"), "{out}");
    assert!(out.contains("digest (what the planner read, search part):"), "{out}");
    assert!(out.contains("  v1: ") && out.contains("search questions failed"), "{out}");
    assert!(out.contains("no previous version to compare with"), "{out}");
    let (code, out, _) = emend(&dir, &["show", "r1", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((v["round"].as_u64(), v["digest"]["version"].as_u64()), (Some(1), Some(1)), "{v}");
    let (code, _, err) = emend(&dir, &["show", "r99"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no round r99"), "{err}");
    // The report lists each round's digest.
    let (code, _, err) = emend(&dir, &["report", "--out", "r.html"]);
    assert_eq!(code, 0, "{err}");
    let html = std::fs::read_to_string(dir.join("r.html")).unwrap();
    assert!(html.contains("What each round&#39;s planner read") || html.contains("What each round's planner read"));
    for r in &rounds {
        assert!(html.contains(&format!("id=\"digest-r{}\"", r["round"])), "round {} has no digest block", r["round"]);
    }
}
