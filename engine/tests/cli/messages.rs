//! Messages are sentences: no Rust debug value (`Stale { holds: 3 }`) in any
//! message. Every `{..:?}` in the non-test source of the engine crates and the
//! harness must name its argument, and the name must be one of the values
//! whose debug form reads as text: strings (shown quoted, with escapes) and
//! durations (`30s`). A positional `{:?}` is refused outright, since its
//! argument cannot be checked here.

use std::path::Path;

/// Arguments printed with `:?` that are strings or durations.
const QUOTED: &[&str] = &[
    "s", "id", "text", "raw_id", "key", "field", "program", "expected", "got", "protocol", "label", "clipped", "short",
    "other", "after", "timeout",
    // The String fields of two error variants (evaluator's unknown question id, collision's unknown tag).
    "0",
];

fn sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn no_message_prints_a_rust_debug_value() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    for crate_dir in ["engine/src", "core/src", "eval/src", "loop/src", "report/src", "harness/src"] {
        sources(&root.join(crate_dir), &mut files);
    }
    assert!(files.len() > 50, "{} files", files.len());
    let mut bad = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        // Only code outside the test module: tests may print whatever helps.
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        for (n, line) in code.lines().enumerate() {
            let mut rest = line;
            while let Some(i) = rest.find(":?}") {
                let open = rest[..i].rfind('{').map_or(0, |o| o + 1);
                let arg = rest[open..i].trim();
                if arg.is_empty() || !QUOTED.contains(&arg) {
                    bad.push(format!("{}:{}: {}", f.strip_prefix(root).unwrap().display(), n + 1, line.trim()));
                }
                rest = &rest[i + 3..];
            }
        }
    }
    assert!(bad.is_empty(), "debug values in messages:\n{}", bad.join("\n"));
}
