//! Hostile text from an operator: a `--reason` holding terminal escape
//! sequences (clear the screen, retitle the window, a bidi override) is
//! journaled as given and printed escaped by `log`, `status` and the HTML
//! report (`show` and `diff` escape through `term::print_stdout`, unit-tested there).

use std::path::Path;
use std::process::Command;

fn emend(dir: &Path, args: &[&str]) -> (i32, String, String) {
    crate::support::emend_env(dir, args, &[("CLICOLOR_FORCE", "1")])
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

/// Whether `text` holds a character the sanitizer escapes (a control but newline
/// and tab, or a bidi override or isolate).
fn hazard(text: &str) -> Option<char> {
    text.chars().find(|&c| {
        (c.is_control() && c != '\n' && c != '\t') || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
    })
}

fn plain(dir: &Path, args: &[&str]) -> String {
    let out = Command::new(crate::support::bin())
        .current_dir(dir)
        .args(args)
        .env("NO_COLOR", "1")
        .env_remove("CLICOLOR_FORCE")
        .output()
        .expect("emend runs");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "emend {args:?}: {stdout}{stderr}");
    if let Some(c) = hazard(&stdout).or(hazard(&stderr)) {
        panic!("emend {args:?} printed {c:?} unescaped:\n{stdout}\n{stderr}");
    }
    stdout.into_owned()
}

#[test]
fn every_read_command_escapes_every_journaled_free_text_field() {
    const BIDI: &str = "esc\u{1b}]0;title\u{7}\u{1b}[31mred\u{2066}iso\u{2069}\u{202e}rtl\u{7f}";
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    ok(tmp.path(), &["init", dir.to_str().unwrap(), "--tasks", "builtin"]);
    let configure = |from: &str, to: &str| {
        let path = dir.join("emend.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replacen(from, to, 1)).unwrap();
    };
    configure("  approval: auto", "  approval: manual");
    configure("  method: null", "  method: rules");
    // The rule evolver's bounded steps on the embedded dataset need the confirm part of 0.5 to be accepted.
    configure("confirm_fraction: 0.4\n    seed: 0", "confirm_fraction: 0.5\n    seed: 4");
    let pending = |dir: &Path| -> u64 {
        let out = ok(dir, &["pending", "--json"]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["pending"][0]["version"].as_u64().expect("a pending version")
    };
    // Every free-text field an operator types, and who they declare to be.
    ok(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    let v2 = format!("v{}", pending(&dir));
    ok(&dir, &["--by", BIDI, "approve", &v2, "--reason", BIDI]);
    ok(&dir, &["--by", BIDI, "rollback", "--to", "v1", "--reason", BIDI]);
    ok(&dir, &["unquarantine", &v2, "--reason", BIDI]);
    ok(&dir, &["quarantine", &v2, "--reason", BIDI]);
    ok(&dir, &["restore-best", "--reason", BIDI]);
    ok(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    let v3 = format!("v{}", pending(&dir));
    ok(&dir, &["reject", &v3, "--reason", BIDI]);
    // What a model or a hook writes: an escalation's reasons and its review, a hook's error.
    {
        use emend_core::events::{EngineProjector, Event};
        use emend_journal::EventLog;
        let mut log = emend_journal::open_writer(dir.join(".emend/journal"), EngineProjector).unwrap();
        let events = [
            Event::Escalated { class: "retrieve.top_k::increase".into(), round: 1, reasons: vec![BIDI.into()] },
            Event::EscalationReviewed {
                class: "retrieve.top_k::increase".into(),
                resolved: true,
                reason: BIDI.into(),
                who: BIDI.into(),
                at: BIDI.into(),
            },
            Event::HookFailed {
                hook: BIDI.into(),
                version: 1,
                change: BIDI.into(),
                error: BIDI.into(),
                at: BIDI.into(),
            },
        ];
        log.append(events.iter().map(Event::to_new).collect()).unwrap();
    }
    let mut reads: Vec<Vec<String>> = [
        &["status"][..],
        &["log"],
        &["pending"],
        &["pending", "--all"],
        &["escalations"],
        &["hypotheses"],
        &["show", "served"],
        &["show", "best"],
        &["diff", "v1", "served"],
        &["journal", "verify"],
    ]
    .iter()
    .map(|a| a.iter().map(|s| s.to_string()).collect())
    .collect();
    for v in ["v1", &v2, &v3] {
        reads.push(vec!["show".into(), v.to_string()]);
        reads.push(vec!["diff".into(), "v1".into(), v.to_string()]);
    }
    let shown: String =
        reads.iter().map(|args| plain(&dir, &args.iter().map(String::as_str).collect::<Vec<_>>())).collect();
    assert!(
        shown.contains("esc\\u{1b}]0;title\\u{7}\\u{1b}[31mred\\u{2066}iso\\u{2069}\\u{202e}rtl\\u{7f}"),
        "{shown}"
    );
    // A refusal that quotes a journaled reason escapes it too.
    let (code, _, err) = emend(&dir, &["rollback", "--to", &v2, "--reason", "t"]);
    assert_eq!(code, 2, "{err}");
    assert!(hazard(&err).is_none() && err.contains("\\u{1b}"), "{err:?}");
}
