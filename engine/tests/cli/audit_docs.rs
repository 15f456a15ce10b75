//! docs/audit.md prints the audit and the buildup of the default strategy on
//! the built-in dataset, each under the command that produces it
//! (`Command: `...``). This runs every such command in a project made with
//! `emend init --tasks builtin` and checks that the text block under it is
//! the command's output byte for byte. The LoCoMo figures' commands are
//! marked `Command (locomo10-dev, not run in CI): ` and are not run here.

use std::path::Path;

use crate::support;
use support::ok;

/// (command, printed output) of each figure docs/audit.md marks with `Command: `.
fn figures(doc: &str) -> Vec<(String, String)> {
    let lines: Vec<&str> = doc.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.strip_prefix("Command: `") else { continue };
        let command = rest.strip_suffix('`').unwrap_or_else(|| panic!("line {}: unterminated command", i + 1));
        assert_eq!(lines.get(i + 2).copied(), Some("```text"), "line {}: no text block under the command", i + 1);
        let body: Vec<&str> = lines[i + 3..].iter().take_while(|l| **l != "```").copied().collect();
        out.push((command.to_string(), body.iter().map(|l| format!("{l}\n")).collect()));
    }
    out
}

#[test]
fn the_docs_tables_are_the_commands_output() {
    let doc_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/audit.md");
    let doc = std::fs::read_to_string(&doc_path).unwrap();
    let figures = figures(&doc);
    assert_eq!(figures.len(), 2, "docs/audit.md: the audit and the buildup on the built-in dataset");
    let tmp = tempfile::tempdir().unwrap();
    ok(tmp.path(), &["init", "--tasks", "builtin", "demo"]);
    for (command, printed) in figures {
        let args: Vec<&str> = command.split_whitespace().collect();
        assert_eq!(args[0], "emend", "{command}");
        let output = ok(tmp.path(), &args[1..]);
        assert!(output == printed, "docs/audit.md: `{command}` prints\n{output}\nnot what the page shows:\n{printed}");
    }
    // --json: the same buildup, whose last step is the served strategy at its accuracy.
    let b = support::json(tmp.path(), &["--project", "demo", "audit", "--buildup", "--json"]);
    let steps = b["buildup"]["steps"].as_array().unwrap();
    assert_eq!(steps[0]["step"], 0);
    assert_eq!(steps.last().unwrap()["accuracy"], b["buildup"]["served_accuracy"], "{b}");
    assert_eq!(b["buildup"]["unit"], "question");
    let a = support::json(tmp.path(), &["--project", "demo", "audit", "--json"]);
    let answer = a["mechanisms"].as_array().unwrap().iter().find(|m| m["mechanism"] == "answer").unwrap();
    assert_eq!((answer["mechanistic"].as_str(), answer["quality"].as_str()), (Some("unexercised"), Some("not_tested")));
    assert_eq!(answer["status"], "unexercised");
    // Outside a project: one line naming the file, exit 2.
    let (code, _, err) = support::emend(tmp.path(), &["--project", "nowhere", "audit", "--buildup"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("nowhere/emend.yaml"), "{err}");
    // The LoCoMo figures say they are not run here.
    assert!(doc.contains("Command (locomo10-dev, not run in CI): `"), "docs/audit.md");
}
