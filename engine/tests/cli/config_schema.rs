//! The JSON Schema of emend.yaml (schemas/emend.schema.json, `emend_core::config::CONFIG_SCHEMA`):
//! the files emend writes and ships validate against it, a bad file is refused naming
//! the key, the schema and the parser agree on the ranges, and the schema's keys at
//! every level are exactly the keys the parser accepts (read from the parser's own
//! errors, so a field added to a config struct fails here until the schema has it).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::workspace;
use emend_core::config::{CONFIG_SCHEMA, parse_config, render_config};
use serde_json::Value;

fn schema() -> Value {
    serde_json::from_str(CONFIG_SCHEMA).expect("the schema is JSON")
}

fn validator() -> jsonschema::Validator {
    jsonschema::options().with_draft(jsonschema::Draft::Draft202012).build(&schema()).expect("a valid JSON Schema")
}

/// emend.yaml as an editor's YAML language server checks it: the YAML document as JSON.
fn as_json(yaml: &str) -> Value {
    serde_yaml::from_str(yaml).unwrap_or_else(|e| panic!("{e}: {yaml}"))
}

/// The schema's errors for a YAML text: (instance path, message).
fn schema_errors(v: &jsonschema::Validator, yaml: &str) -> Vec<(String, String)> {
    v.iter_errors(&as_json(yaml)).map(|e| (e.instance_path().as_str().to_string(), e.to_string())).collect()
}

/// A project made by `emend init DIR --tasks builtin` in a temporary directory.
fn init_project() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let out = Command::new(crate::support::bin())
        .current_dir(tmp.path())
        .args(["init", dir.to_str().unwrap(), "--tasks", "builtin"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (tmp, dir)
}

/// The emend.yaml that `emend init DIR --tasks builtin` writes.
fn init_config() -> String {
    let (_tmp, dir) = init_project();
    std::fs::read_to_string(dir.join("emend.yaml")).unwrap()
}

fn emend_yamls_under(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            emend_yamls_under(&path, found);
        } else if path.file_name().is_some_and(|n| n == "emend.yaml") {
            found.push(path);
        }
    }
}

#[test]
fn the_configurations_emend_writes_and_ships_validate() {
    let v = validator();
    let mut files: Vec<(String, String)> = vec![("emend init's emend.yaml".into(), init_config())];
    let argv = ["python3".to_string(), "adapter.py".into(), "{strategy}".into(), "{tasks}".into(), "{out}".into()];
    files.push((
        "render_config with a command harness".into(),
        render_config("t.json", Path::new("s.yaml"), Some(&argv), Some(Path::new("my.schema.json"))),
    ));
    let mut shipped = vec![workspace().join("emend.yaml")];
    emend_yamls_under(&workspace().join("examples"), &mut shipped);
    for file in shipped {
        files.push((file.display().to_string(), std::fs::read_to_string(&file).unwrap()));
    }
    for (name, text) in &files {
        parse_config(text).unwrap_or_else(|e| panic!("{name}: the parser refuses it: {e}"));
        assert_eq!(schema_errors(&v, text), vec![], "{name}");
    }
}

// ---- retired keys ---------------------------------------------------------------------

/// `emend init` in a temporary directory, then `edit` applied to its emend.yaml.
fn project_with(edit: impl Fn(&str) -> String) -> (tempfile::TempDir, PathBuf) {
    let (tmp, dir) = init_project();
    let file = dir.join("emend.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, edit(&text)).unwrap();
    (tmp, dir)
}

fn emend_in(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(crate::support::bin()).current_dir(dir).args(args).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

#[test]
fn a_retired_key_is_refused_naming_the_file_the_line_and_what_to_write() {
    let (_tmp, dir) = project_with(|t| t.replace("  probe_drop_max: 0.02\n", "  delta1: 0.07\n"));
    let file = dir.join("emend.yaml");
    let line = std::fs::read_to_string(&file).unwrap().lines().position(|l| l == "  delta1: 0.07").unwrap() + 1;
    let (code, stdout, stderr) = emend_in(&dir, &["status"]);
    assert_eq!((code, stdout.as_str()), (2, ""), "{stderr}");
    let want = format!("line {line} column 3: gates.delta1: `delta1` is renamed: write `probe_drop_max`");
    assert!(stderr.contains(&want) && stderr.contains(&file.display().to_string()), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    // `emend validate` lists it among the file's problems.
    let (code, out, stderr) = emend_in(&dir, &["validate", file.to_str().unwrap()]);
    assert_eq!(code, 2, "{stderr}");
    assert!(format!("{out}{stderr}").contains("`delta1` is renamed: write `probe_drop_max`"), "{out}{stderr}");
    // A setting that would load and do nothing is refused with the reason.
    let (_tmp, dir) = project_with(|t| {
        t.replace("  lord_initial_wealth: 0.5\n", "  lord_initial_wealth: 0.5\n  holdout_budget: 20\n")
    });
    let (code, _, stderr) = emend_in(&dir, &["status"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr
            .contains("gates.holdout_budget: `holdout_budget` is no longer read: nothing measured on the confirm part"),
        "{stderr}"
    );
}
