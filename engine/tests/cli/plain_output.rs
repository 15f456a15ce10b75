//! Output into a pipe is plain text: no escape codes from `evolve` (progress,
//! decision lines), `show`, or the tracing subscriber's warnings, unless
//! `CLICOLOR_FORCE` asks for colour; `NO_COLOR` is honoured. The forced runs
//! show that the check would see a stray escape code.

use std::path::Path;
use std::process::Command;

const ESC: u8 = 0x1b;

/// Runs emend with stdout and stderr piped and the colour variables cleared,
/// then `env` set; returns (exit code, stdout, stderr) as bytes.
fn emend(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, Vec<u8>, Vec<u8>) {
    let out = crate::support::command(dir, args).envs(env.iter().copied()).output().expect("emend runs");
    (out.status.code().unwrap_or(-1), out.stdout, out.stderr)
}

fn project() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let (code, _, err) = emend(tmp.path(), &["init", dir.to_str().unwrap(), "--tasks", "builtin"], &[]);
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
    (tmp, dir)
}

fn has_escape(bytes: &[u8]) -> bool {
    bytes.contains(&ESC)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn evolve_and_show_print_no_escape_codes_into_a_pipe() {
    let (_tmp, dir) = project();
    for env in [&[][..], &[("NO_COLOR", "1")][..], &[("NO_COLOR", "1"), ("TERM", "xterm-256color")][..]] {
        let (code, out, err) = emend(&dir, &["evolve", "--rounds", "2"], env);
        assert_eq!(code, 0, "{}", text(&err));
        assert!(text(&err).contains("round"), "progress lines are printed: {}", text(&err));
        assert!(!has_escape(&out) && !has_escape(&err), "{env:?}: {}{}", text(&out), text(&err));
        let (code, out, err) = emend(&dir, &["show", "served"], env);
        assert_eq!(code, 0, "{}", text(&err));
        assert!(!out.is_empty());
        assert!(!has_escape(&out) && !has_escape(&err), "{env:?}: {}{}", text(&out), text(&err));
    }
    // Forced colour reaches the pipe: the decision lines are bold (a fresh
    // project: the first has stopped exhausted and decides nothing more).
    let (_tmp, dir) = project();
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "1"], &[("CLICOLOR_FORCE", "1")]);
    assert_eq!(code, 0, "{}", text(&err));
    assert!(has_escape(&err), "CLICOLOR_FORCE=1 colours the decision line: {}", text(&err));
}

#[test]
fn warnings_are_plain_in_a_pipe_and_coloured_when_forced() {
    let (_tmp, dir) = project();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_string();
    // A LOCK left by a process that no longer exists: the next opener takes it over with a WARN.
    let mut dead = Command::new("true").spawn().unwrap();
    let pid = dead.id();
    dead.wait().unwrap();
    let stale = format!(r#"{{"pid":{pid},"host":"{host}","started_at":"2020-01-02T03:04:05Z"}}"#);
    for (env, coloured) in [(&[][..], false), (&[("CLICOLOR_FORCE", "1")][..], true)] {
        std::fs::write(dir.join(".emend/journal/LOCK"), &stale).unwrap();
        // A writer takes the lock (readers never do); --quiet leaves the WARN the only styled line.
        let (code, _, err) = emend(&dir, &["evolve", "--rounds", "1", "--quiet"], env);
        assert_eq!(code, 0, "{}", text(&err));
        assert!(text(&err).contains("WARN") && text(&err).contains("stale journal lock"), "{}", text(&err));
        assert_eq!(has_escape(&err), coloured, "{env:?}: {}", text(&err));
    }
}

#[test]
fn show_colours_only_when_forced_and_never_with_no_color() {
    let (_tmp, dir) = project();
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "2", "--quiet"], &[]);
    assert_eq!(code, 0, "{}", text(&err));
    // Piped (as `emend show served | cat`): plain.
    let (code, plain, err) = emend(&dir, &["show", "served"], &[]);
    assert_eq!(code, 0, "{}", text(&err));
    assert!(!has_escape(&plain), "{}", text(&plain));
    // `CLICOLOR_FORCE=1 emend show served | cat`: the headings and verdicts are styled.
    let (code, forced, err) = emend(&dir, &["show", "served"], &[("CLICOLOR_FORCE", "1")]);
    assert_eq!(code, 0, "{}", text(&err));
    assert!(has_escape(&forced), "CLICOLOR_FORCE=1 colours show: {}", text(&forced));
    // The styles are the only difference.
    let stripped = String::from_utf8(strip_ansi(&forced)).unwrap();
    assert_eq!(stripped, text(&plain));
    // NO_COLOR and --no-color win over CLICOLOR_FORCE.
    for (args, env) in [
        (&["show", "served"][..], &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")][..]),
        (&["show", "served", "--no-color"][..], &[("CLICOLOR_FORCE", "1")][..]),
        (&["diff", "v1", "served", "--no-color"][..], &[("CLICOLOR_FORCE", "1")][..]),
    ] {
        let (code, out, err) = emend(&dir, args, env);
        assert_eq!(code, 0, "{}", text(&err));
        assert!(!out.is_empty() && !has_escape(&out), "{args:?} {env:?}: {}", text(&out));
    }
}

/// `bytes` without CSI sequences (`ESC [ ... letter`).
fn strip_ansi(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == ESC && bytes.get(i + 1) == Some(&b'[') {
            i += 2;
            while i < bytes.len() && !bytes[i].is_ascii_alphabetic() {
                i += 1;
            }
            i += 1;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    out
}
