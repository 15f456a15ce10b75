//! Hostile text from an operator: a `--reason` holding terminal escape
//! sequences (clear the screen, retitle the window, a bidi override) is
//! journaled as given and printed escaped by `log`, `status` and the HTML
//! report (`show` and `diff` escape through `term::print_stdout`, unit-tested there).

use std::path::Path;
use std::process::Command;

fn emend(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_emend"))
        .current_dir(dir)
        .args(args)
        .env("CLICOLOR_FORCE", "1")
        .output()
        .expect("emend runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok(dir: &Path, args: &[&str]) -> String {
    let (code, out, err) = emend(dir, args);
    assert_eq!(code, 0, "emend {args:?}: {out}{err}");
    out
}

const HOSTILE: &str = "prod\u{1b}[2J\u{1b}]0;pwned\u{7} said so\u{202e}";

#[test]
fn a_reason_with_escape_sequences_is_printed_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    ok(tmp.path(), &["init", dir.to_str().unwrap(), "--tasks", "builtin"]);
    // A hand edit, then a forced rollback: both carry the reason into the journal.
    let file = dir.join("strategies/served.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, text.replace("rrf_kappa: 60", "rrf_kappa: 61")).unwrap();
    ok(&dir, &["rollback", "--to", "v1", "--force", "--reason", HOSTILE]);
    let journal = ok(&dir, &["journal", "export"]);
    assert!(journal.contains("prod\\u001b[2J"), "the journal keeps the reason as given: {journal}");

    let escaped = "prod\\u{1b}[2J\\u{1b}]0;pwned\\u{7} said so\\u{202e}";
    for args in [&["log"][..], &["status"][..]] {
        let out = ok(&dir, args);
        assert!(out.contains(escaped), "emend {args:?} does not show the reason escaped:\n{out}");
        assert!(!out.contains("\u{1b}[2J") && !out.contains("\u{1b}]0") && !out.contains('\u{7}'), "{args:?}: {out:?}");
        assert!(!out.contains('\u{202e}'), "{args:?}");
    }
    ok(&dir, &["report", "--out", "r.html"]);
    let html = std::fs::read_to_string(dir.join("r.html")).unwrap();
    assert!(html.contains(escaped), "the report does not show the reason escaped");
    assert!(!html.contains('\u{1b}') && !html.contains('\u{7}'));
}
