//! Duplicate JSON keys are refused (exit 2) naming the file, the key and its
//! position: in a task set, in `compare`'s outcome files and in a strategy schema.

use crate::support::emend;
use std::path::Path;

#[test]
fn duplicate_keys_are_refused_naming_file_key_and_position() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let (code, out, err) = emend(tmp.path(), &["init", dir.to_str().unwrap(), "--tasks", "builtin"]);
    assert_eq!(code, 0, "{out}{err}");

    // A task set.
    std::fs::write(dir.join("dup.json"), "[\n  {\"sample_id\": \"a\",\n   \"sample_id\": \"b\"}\n]\n").unwrap();
    let (code, _, err) = emend(&dir, &["eval", "--strategy", "strategies/served.yaml", "--tasks", "dup.json"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("dup.json") && err.contains("duplicate key \"sample_id\" at line 3 column 14"), "{err}");

    // compare's outcome files: the line in the file, the key and its column.
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compare");
    let base = std::fs::read_to_string(fixtures.join("base.jsonl")).unwrap();
    let mut lines: Vec<String> = base.lines().map(str::to_string).collect();
    lines[2] = lines[2].replacen("\"correct\": false", "\"correct\": false, \"correct\": true", 1);
    std::fs::write(dir.join("base_dup.jsonl"), lines.join("\n") + "\n").unwrap();
    let cand = fixtures.join("cand.jsonl");
    let (code, _, err) = emend(&dir, &["compare", "base_dup.jsonl", cand.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("base_dup.jsonl:3") && err.contains("duplicate key \"correct\" at line 1 column"), "{err}");
    // The file without the duplicate compares.
    std::fs::write(dir.join("base_ok.jsonl"), &base).unwrap();
    let (code, _, err) = emend(&dir, &["compare", "base_ok.jsonl", cand.to_str().unwrap()]);
    assert!(code == 0 || code == 1, "{err}");
}
