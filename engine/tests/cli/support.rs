//! What the CLI tests share: running the `emend` binary in a project
//! directory and reading what it printed.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The binary under test: `EMEND_BIN` when set (a copy of this build's
/// binary, for a target directory other builds share), else Cargo's.
pub fn bin() -> PathBuf {
    std::env::var_os("EMEND_BIN").map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_emend")), PathBuf::from)
}

/// The repository's root directory.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// `emend args` in `dir`, without the caller's log, colour and actor
/// variables (a test that needs one sets it).
pub fn command(dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(bin());
    cmd.current_dir(dir).args(args);
    for var in ["RUST_LOG", "NO_COLOR", "CLICOLOR_FORCE", "CLICOLOR", "EMEND_ACTOR"] {
        cmd.env_remove(var);
    }
    cmd
}

/// Runs `emend args` in `dir` with the variables `env` set: its exit code,
/// stdout and stderr.
pub fn emend_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = command(dir, args).envs(env.iter().copied()).output().expect("emend runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Runs `emend args` in `dir`: its exit code, stdout and stderr.
pub fn emend(dir: &Path, args: &[&str]) -> (i32, String, String) {
    emend_env(dir, args, &[])
}

/// `emend args`, which must exit 0: its stdout.
pub fn ok(dir: &Path, args: &[&str]) -> String {
    let (code, out, err) = emend(dir, args);
    assert_eq!(code, 0, "emend {args:?} exited {code}\nstdout:\n{out}\nstderr:\n{err}");
    out
}

/// `emend args`, which must exit 0 and print JSON: the JSON.
pub fn json(dir: &Path, args: &[&str]) -> Value {
    let out = ok(dir, args);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("emend {args:?}: not JSON ({e}):\n{out}"))
}

/// Copies the directory tree `from` to `to`.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Removes a search trial's clock (`started`, `duration_ms`) at any depth of
/// a journaled event: wall-clock fields, like an event's `at`.
pub fn strip_clock(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove("started");
            m.remove("duration_ms");
            m.values_mut().for_each(strip_clock);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_clock),
        _ => {}
    }
}

/// `../shared/data/locomo10-dev.json` beside the checkout (or the file
/// `EMEND_LOCOMO` names), or None (the caller skips, saying so) when it is absent.
pub fn locomo() -> Option<std::path::PathBuf> {
    let data = std::env::var_os("EMEND_LOCOMO")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/locomo10-dev.json"));
    if data.is_file() {
        return Some(data);
    }
    eprintln!("skipped: {} is absent", data.display());
    None
}

/// Every event of `dir`'s journal, decoded, through a read view (no writer lock).
pub fn events(dir: &Path) -> Vec<emend_core::events::Event> {
    use emend_core::events::{EngineProjector, Event};
    use emend_journal::EventLog;
    let log = emend_journal::open_view(dir.join(".emend/journal"), EngineProjector).unwrap();
    log.read_from(0).unwrap().iter().map(|r| Event::from_record(r).unwrap()).collect()
}

/// The served version, as `emend status --json` reports it.
pub fn served(dir: &Path) -> u64 {
    json(dir, &["status", "--json"])["served_version"].as_u64().unwrap()
}

/// Replaces the first `from` of `dir`'s emend.yaml with `to` (which must be there).
pub fn edit_config(dir: &Path, from: &str, to: &str) {
    let cfg = dir.join("emend.yaml");
    let text = std::fs::read_to_string(&cfg).unwrap();
    assert!(text.contains(from), "emend.yaml has no {from:?}");
    std::fs::write(&cfg, text.replacen(from, to, 1)).unwrap();
}
