//! docs/collision.md shows every hash-trigram table under the command that
//! produces it (`Command: `emend collision ... --markdown``, a blank line,
//! then the output). This runs each such command and checks that the page
//! holds its output byte for byte, followed by a blank line or the end. The
//! MiniLM tables' commands are marked `Command (MiniLM, not run in CI): `
//! (CI may have no model) and are not run here.

use std::path::Path;

use crate::support;
use support::ok;

/// (line number, command) of each figure docs/collision.md marks with `Command: `.
fn commands(doc: &str) -> Vec<(usize, String)> {
    doc.lines()
        .enumerate()
        .filter_map(|(i, line)| {
            let rest = line.strip_prefix("Command: `")?;
            let command = rest.strip_suffix('`').unwrap_or_else(|| panic!("line {}: unterminated command", i + 1));
            Some((i + 1, command.to_string()))
        })
        .collect()
}

#[test]
fn the_docs_collision_tables_are_the_commands_output() {
    let doc_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/collision.md");
    let doc = std::fs::read_to_string(&doc_path).unwrap();
    let figures = commands(&doc);
    assert!(figures.len() >= 7, "docs/collision.md: the figures' commands ({})", figures.len());
    let tmp = tempfile::tempdir().unwrap();
    let lines: Vec<&str> = doc.lines().collect();
    for (line, command) in figures {
        let args: Vec<&str> = command.split_whitespace().collect();
        assert_eq!(&args[..2], ["emend", "collision"], "line {line}: {command}");
        assert!(args.contains(&"--markdown"), "line {line}: {command}: the page shows the Markdown tables");
        let output = ok(tmp.path(), &args[1..]);
        assert_eq!(lines.get(line).copied(), Some(""), "line {line}: a blank line under the command");
        let n = output.lines().count();
        let shown: String = lines.iter().skip(line + 1).take(n).map(|l| format!("{l}\n")).collect();
        assert!(
            output == shown,
            "docs/collision.md line {line}: `{command}` prints\n{output}\nnot what the page shows:\n{shown}"
        );
        assert!(
            lines.get(line + 1 + n).is_none_or(|l| l.is_empty()),
            "docs/collision.md line {line}: the page shows more than `{command}` prints"
        );
    }
    // The MiniLM figures say they are not run here.
    assert!(doc.contains("Command (MiniLM, not run in CI): `emend collision"), "docs/collision.md");
}
