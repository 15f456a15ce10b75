//! The reviewer's and operator's commands end to end on the embedded
//! dataset: snapshot tests of `show`, `diff` and `log`; the rollback flow
//! (rollback, status, log, restore-best, journal verify); refusals (unknown
//! version, hand-edited served file, a journal held by another process) and
//! `--force`; and `emend report` (deterministic, self-contained, escaped).
//!
//! One 3-round run (seed 0) is shared; every test that writes works on its
//! own copy. Snapshots live in `tests/snapshots/`; text that varies per run
//! (timestamps, user@host, temp paths) is normalized first. Rewrite them
//! with `UPDATE_SNAPSHOTS=1 cargo test -p emend --test cli review`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};

use emend_journal::EventLog;
use serde_json::Value;

use crate::support;
use support::copy_dir;

const USER: &str = "reviewer";

fn emend(dir: &Path, args: &[&str]) -> (i32, String, String) {
    support::emend_env(dir, args, &[("USER", USER), ("LOGNAME", USER)])
}

/// Runs a command that must succeed; returns its stdout.
fn ok(dir: &Path, args: &[&str]) -> String {
    let (code, out, err) = emend(dir, args);
    assert_eq!(code, 0, "emend {args:?} exited {code}\nstdout:\n{out}\nstderr:\n{err}");
    out
}

fn json(dir: &Path, args: &[&str]) -> Value {
    let out = ok(dir, args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("emend {args:?}: not JSON ({e}):\n{out}"))
}

/// The shared run: `emend init` + 3 rounds of `emend evolve` on the embedded
/// dataset, with the rule evolver (`search.method: rules`), whose candidates
/// stop at every stage (gates, probe, full test) for the snapshots to show.
/// Split seed 4 at share 0.5: a split on which the rule evolver accepts
/// within three rounds (on seed 0 its small steps all fail the confirm test).
/// Even readers lock the journal, so tests take turns on it: hold the guard
/// while using the directory.
fn base() -> (MutexGuard<'static, ()>, &'static Path) {
    static TURN: Mutex<()> = Mutex::new(());
    static BASE: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let guard = TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let (_, dir) = BASE.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("p");
        ok(tmp.path(), &["init", "p", "--tasks", "builtin"]);
        let config = std::fs::read_to_string(dir.join("emend.yaml")).unwrap();
        assert!(config.contains("  method: null\n"), "{config}");
        std::fs::write(
            dir.join("emend.yaml"),
            config
                .replace("  method: null\n", "  method: rules\n")
                .replace("confirm_fraction: 0.4\n    seed: 0", "confirm_fraction: 0.5\n    seed: 4"),
        )
        .unwrap();
        ok(&dir, &["evolve", "--rounds", "3", "--quiet"]);
        let status = json(&dir, &["status", "--json"]);
        assert!(status["served_version"].as_u64().unwrap() >= 2, "the run must accept something: {status}");
        (tmp, dir)
    });
    (guard, dir)
}

/// A private copy of the shared run.
fn project() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    copy_dir(base().1, &dir);
    (tmp, dir)
}

/// The OS account emend records as `who` (`$USER`, set to [`USER`] above, is not read).
fn os_user() -> String {
    let out = Command::new("id").arg("-un").output().expect("id runs");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default()
}

/// Replaces what varies per run: RFC 3339 timestamps, user@host, the project path.
fn normalize(text: &str, dir: &Path) -> String {
    let text = text.replace(&dir.display().to_string(), "<project>");
    let host = hostname();
    let text = if host.is_empty() { text } else { text.replace(&format!("{}@{host}", os_user()), "<user>@<host>") };
    // YYYY-MM-DDTHH:MM:SSZ
    let shape = b"dddd-dd-ddTdd:dd:ddZ";
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let matches = i + shape.len() <= bytes.len()
            && shape.iter().zip(&bytes[i..i + shape.len()]).all(|(s, b)| match s {
                b'd' => b.is_ascii_digit(),
                other => other == b,
            });
        if matches {
            out.push_str("<time>");
            i += shape.len();
        } else {
            let ch = text[i..].chars().next().unwrap();
            out.push(ch);
            i += ch.len_utf8();
        }
    }
    out
}

/// Compares `actual` with `tests/snapshots/<name>.txt` (rewritten with UPDATE_SNAPSHOTS=1).
fn snapshot(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots").join(format!("{name}.txt"));
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some_and(|v| v != "0") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|_| {
        panic!(
            "no snapshot {}; create it with UPDATE_SNAPSHOTS=1 cargo test -p emend --test cli review",
            path.display()
        )
    });
    if expected != actual {
        let diff = similar::TextDiff::from_lines(&expected, actual)
            .unified_diff()
            .header(&format!("{name} (snapshot)"), &format!("{name} (actual)"))
            .to_string();
        panic!("snapshot {name} differs; if the change is intended, rerun with UPDATE_SNAPSHOTS=1\n{diff}");
    }
}

/// Candidate records of the run, from `emend log --json`.
fn candidates(dir: &Path) -> Vec<Value> {
    let log = json(dir, &["log", "--json"]);
    log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|e| e["candidates"].as_array().cloned().unwrap_or_default())
        .collect()
}

fn first_candidate(dir: &Path, pred: impl Fn(&Value) -> bool) -> Option<String> {
    candidates(dir).into_iter().find(|c| pred(c)).and_then(|c| c["id"].as_str().map(String::from))
}

fn head(dir: &Path) -> u64 {
    json(dir, &["journal", "verify", "--json"])["head"].as_u64().unwrap()
}

fn served_file(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("strategies/served.yaml")).unwrap()
}

fn has_ansi(s: &str) -> bool {
    s.contains('\x1b')
}

#[test]
fn show_accepted_version_snapshot() {
    let (_turn, dir) = base();
    let out = ok(dir, &["show", "v2"]);
    assert!(!has_ansi(&out), "piped output must be plain");
    for needle in [
        "candidate r",
        "why: Layer A on v1",
        "gates:",
        "critic:",
        "probe:",
        "full:",
        "McNemar",
        "diff:\n--- v1\n+++ v2",
    ] {
        assert!(out.contains(needle), "show v2 lacks {needle:?}:\n{out}");
    }
    snapshot("show_v2", &normalize(&out, dir));
    assert_eq!(ok(dir, &["show", "v2", "--no-color"]), out);
}

#[test]
fn every_accepted_version_shows_its_diff_diagnosis_and_gates() {
    let (_turn, dir) = base();
    let status = json(dir, &["status", "--json"]);
    let max = status["served_version"].as_u64().unwrap().max(status["best_version"].as_u64().unwrap());
    for v in 2..=max {
        let s = json(dir, &["show", &format!("v{v}"), "--json"]);
        if s["version"]["origin"] != "accepted" {
            continue;
        }
        let c = &s["candidate"];
        assert_eq!(c["accepted_version"], v, "v{v}: {s}");
        assert!(s["diff"].as_str().is_some_and(|d| d.contains(&format!("+++ v{v}"))), "v{v} diff: {s}");
        assert!(c["motivation"].as_object().is_some_and(|m| !m.is_empty()), "v{v} motivation");
        assert!(s["layer_a"]["counts"].is_object(), "v{v} Layer A evidence");
        assert!(c["gates"].as_array().is_some_and(|g| g.len() == 5 && g.iter().all(|g| g["pass"] == true)));
        assert_eq!(c["critic"]["label"], "actionable");
        assert_eq!(c["probe"]["pass"], true);
        for key in ["n", "improved", "regressed", "ci_low", "ci_high", "mcnemar_p", "alpha", "rules"] {
            assert!(!c["full"][key].is_null(), "v{v} full lacks {key}");
        }
        let improved = s["examples"]["improved"].as_array().unwrap();
        assert!(!improved.is_empty(), "v{v} has no improved examples");
        for q in improved {
            assert!(!q["question"].as_str().unwrap().is_empty(), "{q}");
            assert_eq!(q["after"], "correct", "{q}");
            assert_ne!(q["before"], "correct", "{q}");
        }
    }
}

#[test]
fn show_first_version_and_candidates_snapshots() {
    let (_turn, dir) = base();
    snapshot("show_v1", &normalize(&ok(dir, &["show", "v1"]), dir));
    let full = first_candidate(dir, |c| c["rejected_by"].as_str().is_some_and(|r| r.starts_with("full:")))
        .expect("some candidate failed the full test");
    let out = ok(dir, &["show", &full]);
    assert!(out.contains("FAIL"), "{out}");
    snapshot("show_full_rejected", &normalize(&out, dir));
    let early = first_candidate(dir, |c| {
        c["rejected_by"]
            .as_str()
            .is_some_and(|r| r.starts_with("probe") || r.starts_with("gate:") || r.starts_with("critic:"))
    })
    .expect("some candidate stopped before the full test");
    snapshot("show_early_rejected", &normalize(&ok(dir, &["show", &early]), dir));
}

#[test]
fn show_yaml_is_the_served_file() {
    let (_turn, dir) = base();
    assert_eq!(ok(dir, &["show", "served", "--yaml"]), served_file(dir));
    let yaml = ok(dir, &["show", "v1", "--yaml"]);
    assert!(yaml.contains("version: 1\n") && yaml.contains("retrieve:"), "{yaml}");
}

#[test]
fn show_resolves_pointers_and_refuses_unknown_targets() {
    let (_turn, dir) = base();
    let served = json(dir, &["show", "served", "--json"]);
    let best = json(dir, &["show", "best", "--json"]);
    assert!(served["version"]["name"].as_str().unwrap().contains("served"), "{served}");
    assert!(best["version"]["name"].as_str().unwrap().contains("best"), "{best}");
    for bad in ["v99", "r99c9", "nonsense"] {
        let (code, _, err) = emend(dir, &["show", bad]);
        assert_eq!(code, 2, "show {bad}: {err}");
        assert!(err.starts_with("error: "), "{err}");
    }
}

#[test]
fn diff_snapshots() {
    let (_turn, dir) = base();
    let out = ok(dir, &["diff", "v1", "v2"]);
    assert!(!has_ansi(&out));
    snapshot("diff_v1_v2", &normalize(&out, dir));
    // A version against a file, whatever the file's key order and metadata.
    snapshot("diff_v1_file", &normalize(&ok(dir, &["diff", "v1", "strategies/served.yaml"]), dir));
    let same = ok(dir, &["diff", "served", "strategies/served.yaml"]);
    assert!(same.ends_with("are identical\n"), "{same}");
    let j = json(dir, &["diff", "v2", "v1", "--json"]);
    assert_eq!(j["identical"], false);
    assert!(j["diff"].as_str().unwrap().starts_with("--- v2\n+++ v1\n"), "{j}");
    let (code, _, err) = emend(dir, &["diff", "v1", "no-such-thing"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("nor a file"), "{err}");
}

#[test]
fn log_snapshot_after_rollback_and_restore() {
    let (_tmp, dir) = project();
    let served = json(&dir, &["status", "--json"])["served_version"].as_u64().unwrap();
    ok(&dir, &["rollback", "--to", "v1", "--reason", "production disagrees"]);
    ok(&dir, &["unquarantine", &format!("v{served}"), "--reason", "production fixed"]);
    ok(&dir, &["restore-best"]);
    let out = ok(&dir, &["log"]);
    snapshot("log_after_rollback", &normalize(&out, &dir));
}

#[test]
fn rollback_status_log_restore_best_verify() {
    let (_tmp, dir) = project();
    let before = json(&dir, &["status", "--json"]);
    let (served, best) = (before["served_version"].as_u64().unwrap(), before["best_version"].as_u64().unwrap());
    assert_ne!(served, 1);

    let out = ok(&dir, &["rollback", "--to", "v1", "--reason", "production disagrees"]);
    assert!(out.contains(&format!("served v{served} -> v1 by {}@", os_user())), "{out}");
    let status = json(&dir, &["status", "--json"]);
    assert_eq!(status["served_version"], 1);
    assert_eq!(status["served_pinned"], true);
    assert_eq!(status["served_file"], "consistent");
    assert_eq!(ok(&dir, &["show", "v1", "--yaml"]), served_file(&dir), "the served file is v1");
    let log = ok(&dir, &["log"]);
    assert!(log.contains(&format!("rollback: v{served} -> v1 by {}@", os_user())), "{log}");
    assert!(log.contains("production disagrees"), "{log}");
    // The rollback record: before, after, reason, who, the best-ever then.
    let export = ok(&dir, &["journal", "export"]);
    let record: Value = serde_json::from_str(export.lines().last().unwrap()).unwrap();
    let p = &record["payload"];
    assert_eq!(record["kind"], "served_changed");
    assert_eq!((p["from"].as_u64(), p["to"].as_u64(), p["cause"].as_str()), (Some(served), Some(1), Some("rollback")));
    assert_eq!(p["reason"], "production disagrees");
    assert!(p["who"].as_str().unwrap().starts_with(&format!("{}@", os_user())), "{p}");
    // The versions rolled back from are quarantined: the best-ever is now v1.
    assert_eq!(p["best_version"], 1);
    assert_eq!(json(&dir, &["status", "--json"])["best_version"], 1);

    // Lifting the best-ever's quarantine makes it the best-ever again.
    ok(&dir, &["unquarantine", &format!("v{best}"), "--reason", "production fixed"]);
    assert_eq!(json(&dir, &["status", "--json"])["best_version"], best);
    let out = ok(&dir, &["restore-best"]);
    assert!(out.contains(&format!("served v1 -> v{best}")), "{out}");
    let status = json(&dir, &["status", "--json"]);
    assert_eq!(status["served_version"], best);
    assert_eq!(status["served_pinned"], false);
    assert!(ok(&dir, &["log"]).contains(&format!("restore best: v1 -> v{best}")));
    assert_eq!(ok(&dir, &["show", "served", "--yaml"]), served_file(&dir));

    // Restoring again changes nothing and journals nothing.
    let h = head(&dir);
    assert!(ok(&dir, &["restore-best"]).contains("nothing to do"));
    assert_eq!(head(&dir), h);
    assert!(ok(&dir, &["journal", "verify"]).starts_with("ok"));
}

#[test]
fn rollback_refuses_unknown_versions_without_writing() {
    let (_tmp, dir) = project();
    let (h, file) = (head(&dir), served_file(&dir));
    for bad in ["v99", "banana", "v"] {
        let (code, _, err) = emend(&dir, &["rollback", "--to", bad]);
        assert_eq!(code, 2, "--to {bad}: {err}");
    }
    let (_, _, err) = emend(&dir, &["rollback", "--to", "v99"]);
    assert!(err.contains("no version v99"), "{err}");
    // Not even a hand edit is journaled for an unknown version.
    std::fs::write(dir.join("strategies/served.yaml"), file.replace("top_k: ", "top_k: 1")).unwrap();
    let (code, _, err) = emend(&dir, &["rollback", "--to", "v99", "--force"]);
    assert_eq!(code, 2, "{err}");
    assert_eq!(head(&dir), h);
}

#[test]
fn hand_edited_served_file_is_refused_then_journaled_with_force() {
    let (_tmp, dir) = project();
    let original = served_file(&dir);
    let edited = original.replace("rrf_kappa: 60", "rrf_kappa: 61");
    assert_ne!(edited, original);
    std::fs::write(dir.join("strategies/served.yaml"), &edited).unwrap();
    let h = head(&dir);
    for args in [&["rollback", "--to", "v1"][..], &["restore-best"][..]] {
        let (code, _, err) = emend(&dir, args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("edited by hand") && err.contains("--force"), "{err}");
    }
    assert_eq!(served_file(&dir), edited, "a refused rollback leaves the file alone");
    assert_eq!(head(&dir), h, "and writes nothing");

    let out = ok(&dir, &["rollback", "--to", "v1", "--force", "--reason", "undo a hand edit"]);
    let max = json(&dir, &["status", "--json"])["best_version"].as_u64().unwrap();
    let journaled: u64 = out
        .split("journaled as v")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(journaled > max, "{out}");
    let shown = json(&dir, &["show", &format!("v{journaled}"), "--json"]);
    assert_eq!(shown["version"]["origin"], "hand_edit");
    assert!(shown["diff"].as_str().unwrap().contains("+  rrf_kappa: 61"), "{shown}");
    assert_eq!(json(&dir, &["status", "--json"])["served_version"], 1);
    assert!(ok(&dir, &["log"]).contains(&format!("hand edit journaled as v{journaled}")));
    assert!(ok(&dir, &["journal", "verify"]).starts_with("ok"));
}

#[test]
fn an_invalid_hand_edit_is_kept_and_force_still_rolls_back() {
    let (_tmp, dir) = project();
    std::fs::write(dir.join("strategies/served.yaml"), "retrieve: [this is: not a strategy\n").unwrap();
    let (code, _, err) = emend(&dir, &["rollback", "--to", "v1"]);
    assert_eq!(code, 2, "{err}");
    let (code, out, err) = emend(&dir, &["rollback", "--to", "v1", "--force"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("kept as"), "{err}");
    let kept: Vec<_> = std::fs::read_dir(dir.join(".emend"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("hand-edit-"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(json(&dir, &["status", "--json"])["served_file"], "consistent");
    assert!(ok(&dir, &["log"]).contains("not a valid strategy; it was kept"));
}

#[test]
fn writers_get_exit_3_and_readers_still_read_while_the_journal_is_held() {
    let (_tmp, dir) = project();
    let project = emend_core::config::Project::open(&dir).unwrap();
    let holder = emend_journal::open_writer(project.journal_dir(), emend_core::events::EngineProjector).unwrap();
    let h = holder.head().seq;
    let file = served_file(&dir);
    for args in [&["rollback", "--to", "v1"][..], &["restore-best"][..]] {
        let (code, _, err) = emend(&dir, args);
        assert_eq!(code, 3, "{args:?}: {err}");
        assert!(err.to_lowercase().contains("lock") || err.contains("held"), "{args:?}: {err}");
    }
    // Readers never take the writer's lock: they read the published view.
    for args in [&["show", "v1"][..], &["diff", "v1", "v2"][..], &["log"][..], &["report", "--out", "r.html"][..]] {
        let (code, _, err) = emend(&dir, args);
        assert_eq!(code, 0, "{args:?}: {err}");
    }
    assert_eq!(served_file(&dir), file);
    drop(holder);
    assert_eq!(head(&dir), h);
}

#[test]
fn report_is_deterministic_self_contained_and_escaped() {
    let (tmp, dir) = project();
    ok(&dir, &["rollback", "--to", "v1", "--reason", "<script>alert('x')</script> & more"]);
    ok(&dir, &["restore-best"]);
    let out = ok(&dir, &["report", "--out", "a.html"]);
    assert!(out.starts_with("wrote a.html"), "{out}");
    let j = json(&dir, &["report", "--out", "../b.html", "--json"]);
    assert_eq!(j["rounds"], 3);
    let a = std::fs::read(dir.join("a.html")).unwrap();
    let b = std::fs::read(tmp.path().join("b.html")).unwrap();
    assert!(a == b, "the same journal must give byte-identical HTML");
    let html = String::from_utf8(a).unwrap();
    for needle in [
        "<svg id=\"trajectory-chart\"",
        "<polyline class=\"served\"",
        "class=\"point accepted\"",
        "class=\"point rollback\"",
        "<table class=\"categories\">",
        "<table class=\"funnel\">",
        "<table class=\"hypotheses\">",
        "<pre class=\"diff\">",
        // The template escapes markup; a quote in text content needs no escape.
        "&lt;script&gt;alert('x')&lt;/script&gt; &amp; more",
    ] {
        assert!(html.contains(needle), "report lacks {needle}");
    }
    for banned in ["<script", "http://", "https://", "@import", "url(", " src=", "<link"] {
        assert!(!html.contains(banned), "report has {banned}");
    }
    assert!(!html.contains(&dir.display().to_string()), "report names the temp path");
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let (code, _, err) = emend(&dir, &["report", "--out", "no/such/dir/r.html"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn the_report_shows_each_version_as_show_json_does() {
    let (_turn, dir) = base();
    let out = tempfile::tempdir().unwrap();
    let path = out.path().join("r.html");
    ok(dir, &["report", "--out", path.to_str().unwrap()]);
    let html = std::fs::read_to_string(&path).unwrap();
    let status = json(dir, &["status", "--json"]);
    let max = status["served_version"].as_u64().unwrap().max(status["best_version"].as_u64().unwrap());
    let mut compared = 0;
    for v in 1..=max {
        let s = json(dir, &["show", &format!("v{v}"), "--json"]);
        let start = html.find(&format!("id=\"v{v}\"")).unwrap_or_else(|| panic!("the report has no v{v}"));
        let section = &html[start..start + html[start..].find("</section>").unwrap()];
        let accuracy =
            s["version"]["accuracy"].as_f64().map_or("not evaluated".to_string(), |a| format!("{:.1}%", a * 100.0));
        assert!(section.contains(&format!("accuracy {accuracy}")), "v{v}: show says {accuracy}: {section}");
        for q in s["examples"]["improved"].as_array().unwrap().iter().take(3) {
            let id = q["id"].as_str().unwrap();
            assert!(section.contains(&format!("<code>{id}</code>")), "v{v}: the report lacks example {id}");
            compared += 1;
        }
    }
    assert!(compared > 0, "no version had examples to compare");
}
