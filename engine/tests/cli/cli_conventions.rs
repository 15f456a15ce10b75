//! How the CLI fits its ecosystem (issue 15, items 5-8): the run summary a job
//! can act on, JSON errors, timed exports, the output-path exit codes, the
//! schema modeline and init's files, the rustls build, completions and the man page.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::{bin, emend};
use serde_json::Value;

fn init(dir: &Path) {
    let (code, out, err) = emend(dir.parent().unwrap(), &["init", dir.to_str().unwrap(), "--tasks", "builtin"]);
    assert_eq!(code, 0, "{out}{err}");
}

/// A project after enough rounds that at least one candidate was accepted; the summary of that run.
fn evolved() -> (tempfile::TempDir, PathBuf, Value) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    init(&dir);
    let (code, out, err) = emend(&dir, &["evolve", "--rounds", "12", "--json", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    (tmp, dir, v)
}

#[test]
fn the_evolve_summary_names_its_format_the_served_file_and_every_change() {
    let (_tmp, dir, v) = evolved();
    assert_eq!(v["format"], 1, "{v}");
    let served = PathBuf::from(v["served_file"].as_str().unwrap());
    assert!(served.is_absolute(), "{v}");
    assert_eq!(served.canonicalize().unwrap(), dir.join("strategies/served.yaml").canonicalize().unwrap());
    let changes = v["changes"].as_array().unwrap();
    let accepted: Vec<u64> = v["accepted_versions"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap()).collect();
    assert!(!accepted.is_empty(), "12 rounds on the embedded dataset accept something: {v}");
    let served_by_accept: Vec<u64> =
        changes.iter().filter(|c| c["cause"] == "accept").map(|c| c["version"].as_u64().unwrap()).collect();
    assert_eq!(served_by_accept, accepted, "{v}");
    for c in changes {
        assert_eq!(c["status"], "served", "{c}");
        if c["cause"] != "accept" {
            continue;
        }
        let version = c["version"].as_u64().unwrap();
        assert!(c["parent"].as_u64().is_some(), "{c}");
        let fields = c["fields"].as_array().unwrap();
        assert!(!fields.is_empty(), "an accepted version changes a field: {c}");
        for f in fields {
            assert!(f["path"].is_string() && f.get("from").is_some() && f.get("to").is_some(), "{f}");
            assert_ne!(f["from"], f["to"], "{f}");
        }
        let alpha = c["alpha"].as_f64().unwrap();
        assert!(alpha > 0.0 && alpha < 0.05, "{c}");
        assert!(c["delta"].as_f64().unwrap() > 0.0, "{c}");
        // The same numbers `show` gives for the version.
        let (code, out, err) = emend(&dir, &["show", &format!("v{version}"), "--json"]);
        assert_eq!(code, 0, "{err}");
        let shown: Value = serde_json::from_str(&out).unwrap();
        let text = shown.to_string();
        assert!(text.contains(&c["candidate"].as_str().unwrap().to_string()), "{c} vs {text:.400}");
    }
    // The last change leaves the served version the summary names.
    if let Some(last) = changes.last() {
        assert_eq!(last["version"], v["served_version"], "{v}");
    }
}

/// Parses the one JSON line a failing `--json` command prints on stdout.
fn json_error(out: &str) -> Value {
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 1, "one line on stdout: {out:?}");
    let v: Value = serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert!(v["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
    v
}

#[test]
fn every_json_command_prints_an_error_object_on_failure() {
    let tmp = tempfile::tempdir().unwrap();
    let empty = tmp.path();
    // No project: bad input (2).
    for args in [
        &["status", "--json"][..],
        &["evolve", "--json", "--quiet"],
        &["log", "--json"],
        &["show", "served", "--json"],
        &["journal", "verify", "--json"],
        &["report", "--json"],
    ] {
        let (code, out, err) = emend(empty, args);
        assert_eq!(code, 2, "{args:?}: {err}");
        let v = json_error(&out);
        assert_eq!((v["error"]["exit_code"].as_u64(), v["error"]["kind"].as_str()), (Some(2), Some("bad_input")));
        // The stderr line says the same.
        assert_eq!(err.trim(), format!("error: {}", v["error"]["message"].as_str().unwrap()), "{args:?}");
    }
    // A usage error of a --json command.
    let (code, out, _) = emend(empty, &["status", "--json", "--no-such-flag"]);
    assert_eq!(code, 2);
    assert_eq!(json_error(&out)["error"]["kind"], "bad_input");
    // Without --json, stdout stays empty.
    let (code, out, _) = emend(empty, &["status"]);
    assert_eq!((code, out.as_str()), (2, ""));
    // A held writer lock: exit 3, kind locked.
    let dir = empty.join("p");
    init(&dir);
    let project = emend_core::config::Project::open(&dir).unwrap();
    let holder = emend_journal::open_writer(project.journal_dir(), emend_core::events::EngineProjector).unwrap();
    let (code, out, err) = emend(&dir, &["rollback", "--to", "v1", "--json"]);
    drop(holder);
    assert_eq!(code, 3, "{err}");
    let v = json_error(&out);
    assert_eq!((v["error"]["exit_code"].as_u64(), v["error"]["kind"].as_str()), (Some(3), Some("locked")));
}

#[test]
fn every_exported_event_has_a_time() {
    let (_tmp, dir, _) = evolved();
    let (code, out, err) = emend(&dir, &["journal", "export"]);
    assert_eq!(code, 0, "{err}");
    let events: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert!(events.len() > 10);
    let mut sources = std::collections::BTreeSet::new();
    let mut last = String::new();
    for e in &events {
        let at = e["at"].as_str().unwrap_or_else(|| panic!("no time: {e}"));
        check_time(at);
        let source = e["at_source"].as_str().unwrap();
        if e["payload"].get("at").is_some() {
            assert_eq!((source, e["payload"]["at"].as_str()), ("event", Some(at)), "{e}");
        }
        sources.insert(source.to_string());
        // Times never go backwards along the chain.
        assert!(at >= last.as_str(), "{at} after {last}");
        last = at.to_string();
        // The record itself is untouched: its hash still checks out against `journal verify`.
        assert_eq!(e["hash"].as_str().unwrap().len(), 64);
    }
    assert!(sources.contains("event") && sources.contains("next"), "{sources:?}");
    // --from exports the same lines for the same events.
    let (code, tail, _) = emend(&dir, &["journal", "export", "--from", "5"]);
    assert_eq!(code, 0);
    assert_eq!(tail.lines().collect::<Vec<_>>(), out.lines().skip(4).collect::<Vec<_>>());
}

/// An RFC 3339 UTC time as the engine writes it (`2026-12-01T09:13:15Z`, maybe with fractions).
fn check_time(s: &str) {
    let b = s.as_bytes();
    assert!(
        s.len() >= 20 && b[4] == b'-' && b[7] == b'-' && b[10] == b'T' && b[13] == b':' && s.ends_with('Z'),
        "not an RFC 3339 UTC time: {s}"
    );
}

#[test]
fn output_paths_follow_one_rule() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    init(&dir);
    let missing = tmp.path().join("missing/dir/x");
    // A missing parent directory is bad input (2), for every output path.
    for args in [
        vec!["report".to_string(), "--out".into(), missing.display().to_string()],
        vec!["journal".into(), "export".into(), "--out".into(), missing.display().to_string()],
        vec![
            "eval".into(),
            "--strategy".into(),
            "strategies/served.yaml".into(),
            "--outcomes".into(),
            missing.display().to_string(),
        ],
    ] {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, _, err) = emend(&dir, &args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("no directory"), "{err}");
    }
    // A write that fails in an existing directory is a failed run (1): a directory where the file should go.
    let target = dir.join("taken");
    std::fs::create_dir(&target).unwrap();
    for args in [&["report", "--out", "taken"][..], &["journal", "export", "--out", "taken"]] {
        let (code, _, err) = emend(&dir, args);
        assert_eq!(code, 1, "{args:?}: {err}");
        assert!(err.contains("taken"), "{err}");
    }
    // And the files are written when the directory exists.
    let (code, _, err) = emend(&dir, &["journal", "export", "--out", "out/events.jsonl"]);
    assert_eq!(code, 2, "{err}");
    std::fs::create_dir(dir.join("out")).unwrap();
    let (code, _, err) = emend(&dir, &["journal", "export", "--out", "out/events.jsonl"]);
    assert_eq!(code, 0, "{err}");
    assert!(std::fs::read_to_string(dir.join("out/events.jsonl")).unwrap().lines().count() >= 2);
}

const MODELINE: &str = "# yaml-language-server: $schema=";

#[test]
fn init_writes_the_schema_a_gitignore_and_relative_paths() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    std::fs::create_dir(&data).unwrap();
    let tasks = data.join("tasks.json");
    std::fs::write(
        &tasks,
        r#"[{"sample_id": "c1", "conversation": {"speaker_a": "A", "speaker_b": "B",
            "session_1_date_time": "1 May 2023", "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "I adopted a cat named Miso."}]},
            "qa": [{"question": "What is the cat's name?", "answer": "Miso", "evidence": ["D1:1"], "category": 1}, {"question": "What is the cat's name (1)?", "answer": "Miso", "evidence": ["D1:1"], "category": 1}, {"question": "What is the cat's name (2)?", "answer": "Miso", "evidence": ["D1:1"], "category": 1}, {"question": "What is the cat's name (3)?", "answer": "Miso", "evidence": ["D1:1"], "category": 1}, {"question": "What is the cat's name (4)?", "answer": "Miso", "evidence": ["D1:1"], "category": 1}, {"question": "What is the cat's name (5)?", "answer": "Miso", "evidence": ["D1:1"], "category": 1}, {"question": "What is the cat's name (6)?", "answer": "Miso", "evidence": ["D1:1"], "category": 1}, {"question": "What is the cat's name (7)?", "answer": "Miso", "evidence": ["D1:1"], "category": 1}, {"question": "What is the cat's name (8)?", "answer": "Miso", "evidence": ["D1:1"], "category": 1}, {"question": "What is the cat's name (9)?", "answer": "Miso", "evidence": ["D1:1"], "category": 1}, {"question": "What is the cat's name (10)?", "answer": "Miso", "evidence": ["D1:1"], "category": 1}, {"question": "What is the cat's name (11)?", "answer": "Miso", "evidence": ["D1:1"], "category": 1}]}]"#,
    )
    .unwrap();
    let (code, out, err) = emend(tmp.path(), &["init", "work/p", "--tasks", "data/tasks.json"]);
    assert_eq!(code, 0, "{out}{err}");
    let dir = tmp.path().join("work/p");
    let config = std::fs::read_to_string(dir.join("emend.yaml")).unwrap();
    assert!(config.contains("tasks: \"../../data/tasks.json\""), "{config}");
    assert!(!config.contains(tmp.path().to_str().unwrap()), "no absolute path: {config}");
    // The schema copy is the one `emend schema` prints.
    let (code, printed, _) = emend(tmp.path(), &["schema"]);
    assert_eq!(code, 0);
    let schema: Value = serde_json::from_str(&printed).unwrap();
    assert!(schema.get("properties").is_some());
    assert_eq!(std::fs::read_to_string(dir.join("schema/strategy.schema.json")).unwrap(), printed);
    // The journal's directory ignores itself.
    let ignore = std::fs::read_to_string(dir.join(".emend/.gitignore")).unwrap();
    assert!(ignore.lines().any(|l| l == "*"), "{ignore}");
    // The served file names the schema relative to itself, and the project still works.
    let served = std::fs::read_to_string(dir.join("strategies/served.yaml")).unwrap();
    assert_eq!(served.lines().next().unwrap(), format!("{MODELINE}../schema/strategy.schema.json"), "{served}");
    let (code, _, err) = emend(&dir, &["status"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = emend(&dir, &["journal", "verify"]);
    assert_eq!(code, 0, "{err}");
    // From another directory through --project too.
    let (code, _, err) = emend(tmp.path(), &["--project", "work/p", "evolve", "--rounds", "1", "--quiet"]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn harness_command_and_schema_paths_are_relative_to_emend_yaml() {
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("SKIPPED: python3 is not available");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let schema = tmp.path().join("my.schema.json");
    // init runs the command once: an adapter that answers every question of its shard (wrongly).
    let adapter = r#"import json, sys
shard = json.load(open(sys.argv[2]))
with open(sys.argv[3], "w") as f:
    for s in shard["samples"]:
        for qa in s["qa"]:
            f.write(json.dumps({"id": qa["id"], "conversation": s["sample_id"],
                                "category": qa["category_name"], "correct": False}) + "\n")
"#;
    std::fs::write(tmp.path().join("adapter.py"), adapter).unwrap();
    std::fs::write(&schema, include_str!("../../../schemas/strategy.schema.json")).unwrap();
    let (code, out, err) = emend(
        tmp.path(),
        &[
            "init",
            "p",
            "--tasks",
            "builtin",
            "--schema",
            "my.schema.json",
            "--harness-command",
            "python3",
            tmp.path().join("adapter.py").to_str().unwrap(),
            "{strategy}",
            "{tasks}",
            "{out}",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    let config = std::fs::read_to_string(tmp.path().join("p/emend.yaml")).unwrap();
    assert!(config.contains("schema: \"../my.schema.json\""), "{config}");
    assert!(config.contains(r#"argv: ["python3", "../adapter.py", "{strategy}", "{tasks}", "{out}"]"#), "{config}");
    assert!(!config.contains(tmp.path().to_str().unwrap()), "{config}");
    // The built-in pipeline's judge and token ceiling mean nothing to a command: not written.
    let harness: Vec<&str> = config
        .lines()
        .skip_while(|l| *l != "harness:")
        .skip(1)
        .take_while(|l| !l.starts_with(|c: char| c.is_alphabetic()))
        .collect();
    assert!(harness.iter().any(|l| l.starts_with("  kind: command")), "{config}");
    for key in ["judge:", "f1_threshold:", "budget_ceiling:"] {
        assert!(!harness.iter().any(|l| l.trim_start().starts_with(key)), "{key} under harness: {config}");
    }
    // The served file's modeline names that schema, and init copied none of its own
    // (only emend.yaml's schema).
    let served = std::fs::read_to_string(tmp.path().join("p/strategies/served.yaml")).unwrap();
    assert_eq!(served.lines().next().unwrap(), format!("{MODELINE}../../my.schema.json"));
    assert!(!tmp.path().join("p/schema/strategy.schema.json").exists());
    assert!(tmp.path().join("p/schema/emend.schema.json").is_file());
}

#[test]
fn init_writes_emend_yaml_under_the_modeline_of_its_schema() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    init(&dir);
    let config = std::fs::read_to_string(dir.join("emend.yaml")).unwrap();
    assert_eq!(config.lines().next().unwrap(), format!("{MODELINE}schema/emend.schema.json"), "{config}");
    // The file the modeline names, relative to emend.yaml, is the schema built into emend.
    assert_eq!(
        std::fs::read_to_string(dir.join("schema/emend.schema.json")).unwrap(),
        emend_core::config::CONFIG_SCHEMA
    );
    // The modeline is a comment: the project loads as before.
    let (code, _, err) = emend(&dir, &["status"]);
    assert_eq!(code, 0, "{err}");
    // init refuses to overwrite a different schema/emend.schema.json and leaves it as it was.
    let other = tmp.path().join("q");
    std::fs::create_dir_all(other.join("schema")).unwrap();
    std::fs::write(other.join("schema/emend.schema.json"), "{}").unwrap();
    let (code, _, err) = emend(tmp.path(), &["init", "q", "--tasks", "builtin"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("emend.schema.json"), "{err}");
    assert_eq!(std::fs::read_to_string(other.join("schema/emend.schema.json")).unwrap(), "{}");
    assert!(!other.join("emend.yaml").exists());
}

#[test]
fn strategy_files_begin_with_the_schema_modeline_and_keep_their_hash() {
    let (_tmp, dir, v) = evolved();
    let served = std::fs::read_to_string(dir.join("strategies/served.yaml")).unwrap();
    assert!(served.starts_with(&format!("{MODELINE}../schema/strategy.schema.json\n")), "{served}");
    // `show --yaml` exports a version as the served file holds it.
    let version = v["served_version"].as_u64().unwrap();
    let (code, shown, _) = emend(&dir, &["show", &format!("v{version}"), "--yaml"]);
    assert_eq!(code, 0);
    assert_eq!(shown, served);
    // The modeline is a comment: the file still validates and the journal sees no hand edit.
    let (code, _, err) = emend(&dir, &["validate", "strategies/served.yaml"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    assert_eq!(code, 0, "{err}");
}

#[test]
fn the_binary_links_no_system_openssl() {
    let Ok(out) = Command::new("ldd").arg(bin()).output() else {
        eprintln!("skipped: no ldd on this machine");
        return;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() || text.contains("not a dynamic executable"), "{text}");
    for lib in ["libssl", "libcrypto"] {
        assert!(!text.contains(lib), "{} links {lib}:\n{text}", bin().display());
    }
}

#[test]
fn bash_sources_the_completion_script() {
    let tmp = tempfile::tempdir().unwrap();
    for shell in ["bash", "zsh", "fish"] {
        let (code, out, err) = emend(tmp.path(), &["completions", shell]);
        assert_eq!(code, 0, "{shell}: {err}");
        assert!(out.contains("emend"), "{shell}");
        assert!(out.contains("restore-best"), "{shell}: every subcommand is completed");
    }
    let (_, script, _) = emend(tmp.path(), &["completions", "bash"]);
    let file = tmp.path().join("emend.bash");
    std::fs::write(&file, script).unwrap();
    let status = Command::new("bash")
        .arg("-c")
        .arg(format!("set -e; source '{}'; complete -p emend", file.display()))
        .stdout(Stdio::null())
        .status();
    match status {
        Ok(s) => assert!(s.success(), "bash could not source the script"),
        Err(_) => eprintln!("skipped: no bash"),
    }
    let (code, _, _) = emend(tmp.path(), &["completions", "tcsh"]);
    assert_eq!(code, 2);
}

#[test]
fn the_man_page_parses() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, page, err) = emend(tmp.path(), &["man"]);
    assert_eq!(code, 0, "{err}");
    assert!(page.starts_with(".ie") || page.contains(".TH emend"), "{page:.200}");
    for sub in ["evolve", "rollback", "completions"] {
        assert!(page.contains(sub), "the page lists {sub}");
    }
    // groff (or man) renders it without warnings when present.
    let file = tmp.path().join("emend.1");
    std::fs::write(&file, &page).unwrap();
    let Ok(out) = Command::new("groff").args(["-man", "-Tutf8", "-ww", "-z"]).arg(&file).output() else {
        eprintln!("skipped: no groff");
        return;
    };
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "groff warnings");
}

#[test]
fn man_dir_writes_a_page_per_subcommand_with_exit_status_environment_and_files() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, _, err) = emend(tmp.path(), &["man", "--dir", "pages"]);
    assert_eq!(code, 0, "{err}");
    let dir = tmp.path().join("pages");
    let mut names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    for page in ["emend.1", "emend-evolve.1", "emend-rollback.1", "emend-restore-best.1", "emend-man.1"] {
        assert!(names.iter().any(|n| n == page), "{page} missing from {names:?}");
    }
    assert!(!names.iter().any(|n| n == "emend-help.1"), "{names:?}");
    let groff = Command::new("groff").arg("--version").output().is_ok();
    for name in &names {
        let file = dir.join(name);
        let page = std::fs::read_to_string(&file).unwrap();
        for section in [".SH \"EXIT STATUS\"", ".SH ENVIRONMENT", ".SH FILES", "EMEND_MINILM_DIR", "emend.yaml"] {
            assert!(page.contains(section), "{name}: no {section}");
        }
        if groff {
            let out = Command::new("groff").args(["-man", "-Tutf8", "-ww", "-z"]).arg(&file).output().unwrap();
            assert!(out.status.success() && out.stderr.is_empty(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
    // `emend man` alone still prints emend(1), with the same closing sections; `emend man CMD` prints CMD's page.
    let (code, page, _) = emend(tmp.path(), &["man"]);
    assert_eq!(code, 0);
    assert_eq!(page, std::fs::read_to_string(dir.join("emend.1")).unwrap());
    let (code, page, _) = emend(tmp.path(), &["man", "restore-best"]);
    assert_eq!(code, 0);
    assert_eq!(page, std::fs::read_to_string(dir.join("emend-restore-best.1")).unwrap());
    let (code, _, err) = emend(tmp.path(), &["man", "restore"]);
    assert_eq!(code, 2, "{err}");
}

/// The text of a page's section `name` (its lines up to the next `.SH`).
fn man_section<'a>(page: &'a str, name: &str) -> Vec<&'a str> {
    let mut lines = page.lines().skip_while(|l| *l != format!(".SH {name}")).skip(1);
    let mut out = Vec::new();
    for line in lines.by_ref() {
        if line.starts_with(".SH") {
            break;
        }
        out.push(line);
    }
    out
}

/// Every command's page teaches (issue 47): a DESCRIPTION that is not its NAME line again, and EXAMPLES
/// that run emend and show what it printed; emend(1) lists every page under the groups of `emend --help`.
#[test]
fn every_page_has_a_description_beyond_its_name_and_examples() {
    let tmp = tempfile::tempdir().unwrap();
    let (code, _, err) = emend(tmp.path(), &["man", "--dir", "pages"]);
    assert_eq!(code, 0, "{err}");
    let dir = tmp.path().join("pages");
    let mut names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert!(names.len() > 25, "{names:?}");
    let top = std::fs::read_to_string(dir.join("emend.1")).unwrap();
    let (_, script, _) = emend(tmp.path(), &["completions", "bash"]);
    for name in &names {
        let page = std::fs::read_to_string(dir.join(name)).unwrap();
        let title = man_section(&page, "NAME").join(" ");
        let (_, about) = title.split_once(" \\- ").unwrap_or_else(|| panic!("{name}: NAME {title}"));
        let description = man_section(&page, "DESCRIPTION");
        let text: Vec<&str> = description.iter().copied().filter(|l| !l.starts_with('.')).collect();
        assert!(!text.is_empty(), "{name}: no DESCRIPTION");
        assert!(!text[0].starts_with(about.trim_end_matches('.')), "{name}: DESCRIPTION repeats NAME: {about}");
        assert!(text.join(" ").len() > 2 * about.len(), "{name}: DESCRIPTION is no more than NAME");
        let examples = man_section(&page, "EXAMPLES");
        let runs = examples.iter().filter(|l| l.starts_with("$ emend ")).count();
        assert!(runs >= 1, "{name}: EXAMPLES runs no emend command: {examples:?}");
        assert!(examples.contains(&".nf"), "{name}: examples are not set as typed");
        if let Some(command) = name.strip_prefix("emend-").and_then(|n| n.strip_suffix(".1")) {
            let listed = format!("\\fBemend\\-{}\\fR(1)", command.replace('-', "\\-"));
            assert!(top.contains(&listed), "emend(1) does not list {command}");
            assert!(script.contains(command), "the bash completion does not complete {command}");
        }
    }
    // The top-level help, in all three spellings, lists the groups.
    for args in [&["--help"][..], &["-h"], &["help"]] {
        let (code, out, err) = emend(tmp.path(), args);
        assert_eq!(code, 0, "{args:?}: {err}");
        for group in ["Set up a project:", "(the scheduled job", "(the reviewer):", "(the operator):", "Options:"] {
            assert!(out.contains(group), "{args:?}: no {group}:\n{out}");
        }
    }
    // A command's --help ends with its examples; -h keeps to the summary.
    let (_, long, _) = emend(tmp.path(), &["rollback", "--help"]);
    assert!(long.contains("Examples:\n") && long.contains("$ emend rollback --to v2"), "{long}");
    let (_, short, _) = emend(tmp.path(), &["rollback", "-h"]);
    assert!(!short.contains("Examples:"), "{short}");
}
