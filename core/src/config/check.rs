//! Every problem of an `emend.yaml` in one pass, each at its line and column:
//! the YAML syntax, then the document against the configuration schema
//! (schemas/emend.schema.json: unknown keys with a suggestion, types, enums,
//! ranges), then, when the shape is right, the typed parse and the range and
//! consistency checks of [`super::validate`]. `emend validate emend.yaml`
//! prints them all; every other command stops at the first and says how many
//! more there are.

use std::fmt;
use std::sync::OnceLock;

use serde_json::Value;

use super::retired::retired;
use super::types::ProjectConfig;
use super::validate::{MAX_CONFIG_BYTES, problems};
use super::{CONFIG_FILE, CONFIG_SCHEMA};
use crate::schema::{Dialect, explain};

/// One problem of a configuration: the key it is at (dotted, empty for the
/// file as a whole), where that key is written, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ConfigProblem {
    pub path: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
}

impl fmt::Display for ConfigProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let (Some(l), Some(c)) = (self.line, self.column) {
            write!(f, "line {l} column {c}: ")?;
        }
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        f.write_str(&self.message)
    }
}

/// What checking a configuration found: the configuration when there is no
/// problem, and every problem in file order.
#[derive(Debug)]
pub struct Checked {
    pub config: Option<ProjectConfig>,
    pub problems: Vec<ConfigProblem>,
}

impl Checked {
    /// The configuration, or the first problem as one line that counts the rest.
    pub fn into_result(self) -> Result<ProjectConfig, String> {
        match (self.config, self.problems.first()) {
            (Some(c), None) => Ok(c),
            (_, Some(first)) => {
                let more = self.problems.len() - 1;
                Err(match more {
                    0 => first.to_string(),
                    n => format!(
                        "{first} (and {n} more problem{}: `emend validate {CONFIG_FILE}` lists them all)",
                        if n == 1 { "" } else { "s" }
                    ),
                })
            }
            (None, None) => unreachable!("a configuration without problems parses"),
        }
    }
}

/// Checks configuration text and reports every problem it can find.
pub fn check_config(text: &str) -> Checked {
    let fail = |problems: Vec<ConfigProblem>| Checked { config: None, problems };
    if text.len() as u64 > MAX_CONFIG_BYTES {
        let message = format!("file is larger than {MAX_CONFIG_BYTES} bytes; an emend.yaml is a few KB");
        return fail(vec![ConfigProblem { path: String::new(), line: None, column: None, message }]);
    }
    // libyaml is quadratic on deep nesting: bound it before parsing.
    if let Err(b) = crate::artifact::check_yaml_bounds(text, crate::artifact::MAX_YAML_DEPTH) {
        return fail(vec![at(b.line, b.column, b.message)]);
    }
    let doc: Value = match serde_yaml::from_str(text) {
        Ok(doc) => doc,
        Err(e) => return fail(vec![yaml_problem(&e)]),
    };
    if doc.is_null() {
        let message = "empty file: expected a mapping with at least `harness:` and its `tasks:`".to_string();
        return fail(vec![ConfigProblem { path: String::new(), line: None, column: None, message }]);
    }
    let mut found: Vec<ConfigProblem> = schema_problems(&doc).into_iter().map(|p| place(text, p)).collect();
    let mut config = None;
    if found.is_empty() {
        match serde_yaml::from_str::<ProjectConfig>(text) {
            Ok(c) => {
                found = problems(&c).into_iter().map(|m| located(text, m)).collect();
                config = Some(c);
            }
            Err(e) => found.push(yaml_problem(&e)),
        }
    } else {
        // The ranges and the consistency of the rest: the document without the
        // values of the wrong shape (their defaults in their place), when it parses.
        let mut repaired = doc;
        for p in &found {
            remove(&mut repaired, &p.path);
        }
        if let Ok(c) = serde_json::from_value::<ProjectConfig>(repaired) {
            let bad: Vec<String> = found.iter().map(|p| p.path.clone()).collect();
            found.extend(
                problems(&c).into_iter().map(|m| located(text, m)).filter(|p| !bad.iter().any(|b| b == &p.path)),
            );
        }
    }
    found.sort_by(|a, b| {
        (a.line.unwrap_or(usize::MAX), a.column, &a.path, &a.message).cmp(&(
            b.line.unwrap_or(usize::MAX),
            b.column,
            &b.path,
            &b.message,
        ))
    });
    found.dedup();
    if !found.is_empty() {
        config = None;
    }
    Checked { config, problems: found }
}

fn at(line: usize, column: usize, message: String) -> ConfigProblem {
    ConfigProblem { path: String::new(), line: Some(line), column: Some(column), message }
}

/// A serde_yaml error at its position, its text without the position it
/// already appends (so the line shows once).
fn yaml_problem(e: &serde_yaml::Error) -> ConfigProblem {
    let text = e.to_string();
    match e.location() {
        Some(l) => {
            let message = text.replacen(&format!(" at line {} column {}", l.line(), l.column()), "", 1);
            // serde names the key it failed in first (`gates.alpha: invalid type ...`).
            let (path, message) = split_path(&message);
            ConfigProblem { path, line: Some(l.line()), column: Some(l.column()), message }
        }
        None => ConfigProblem { path: String::new(), line: None, column: None, message: text },
    }
}

/// A message that starts with its key (`gates.alpha: must be ...`), placed at that key.
fn located(text: &str, message: String) -> ConfigProblem {
    let (path, message) = split_path(&message);
    place(text, ConfigProblem { path, line: None, column: None, message })
}

/// `key.path: rest` into the path and the rest; a message without a leading key has an empty path.
fn split_path(message: &str) -> (String, String) {
    match message.split_once(": ") {
        Some((head, rest)) if !head.is_empty() && !head.contains(char::is_whitespace) && !head.contains('`') => {
            (head.to_string(), rest.to_string())
        }
        _ => (String::new(), message.to_string()),
    }
}

/// The problem at the line and column of its key (or of the nearest parent written in the file).
fn place(text: &str, mut p: ConfigProblem) -> ConfigProblem {
    if p.line.is_none()
        && let Some((line, column)) = locate(text, &p.path)
    {
        p.line = Some(line);
        p.column = Some(column);
    }
    p
}

/// The configuration schema, compiled once.
fn validator() -> &'static jsonschema::Validator {
    static V: OnceLock<jsonschema::Validator> = OnceLock::new();
    V.get_or_init(|| {
        let schema: Value = serde_json::from_str(CONFIG_SCHEMA).expect("the configuration schema is JSON");
        jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .build(&schema)
            .expect("the configuration schema is a valid JSON Schema")
    })
}

/// Every violation of the configuration schema, unknown keys with the keys
/// expected there (old names left out) and the nearest as a suggestion.
fn schema_problems(doc: &Value) -> Vec<ConfigProblem> {
    use jsonschema::error::ValidationErrorKind as K;
    let schema: Value = serde_json::from_str(CONFIG_SCHEMA).expect("the configuration schema is JSON");
    let mut out = Vec::new();
    for e in validator().iter_errors(doc) {
        // The schema says what shape the document has: unknown keys, types,
        // enums and required keys. Ranges, patterns, paths and the cross-key
        // rules are the parser's (validate.rs), in its words; the schema agrees
        // with them (tests/config_schema.rs).
        let shape =
            matches!(e.kind(), K::AdditionalProperties { .. } | K::Type { .. } | K::Enum { .. } | K::Required { .. });
        if !shape || e.schema_path().as_str().contains("/allOf/") {
            continue;
        }
        for p in explain(&e, Dialect::Yaml) {
            let path = if p.path == "(root)" { String::new() } else { p.path };
            let message = if p.message == "unknown field" { unknown_key(&schema, &path) } else { p.message };
            out.push(ConfigProblem { path, line: None, column: None, message });
        }
    }
    out
}

/// Removes the value at dotted `path` from `doc` (the whole sequence for an item of one).
fn remove(doc: &mut Value, path: &str) {
    let segments: Vec<&str> = path.split('.').filter(|s| !s.is_empty()).collect();
    let keys: Vec<&str> = segments.iter().copied().take_while(|s| !s.bytes().all(|b| b.is_ascii_digit())).collect();
    let Some((last, parents)) = keys.split_last() else { return };
    let mut node = doc;
    for k in parents {
        match node.get_mut(*k) {
            Some(child) => node = child,
            None => return,
        }
    }
    if let Some(m) = node.as_object_mut() {
        m.remove(*last);
    }
}

/// "unknown key (expected one of ...; did you mean ...?)" for the key at
/// `path`, or why a retired key is refused.
fn unknown_key(schema: &Value, path: &str) -> String {
    let (parent, key) = match path.rsplit_once('.') {
        Some((parent, key)) => (parent, key),
        None => ("", path),
    };
    if let Some(why) = retired(parent, key) {
        return format!("`{key}` is {why}");
    }
    let expected: Vec<String> = keys_at(schema, parent);
    if expected.is_empty() {
        return format!("unknown key `{key}`");
    }
    let mut message = format!("unknown key `{key}` (expected one of {})", expected.join(", "));
    if let Some(near) = suggest(key, &expected) {
        message.push_str(&format!("; did you mean `{near}`?"));
    }
    message
}

/// The key among `known` nearest to `key` by edit distance, when it is near
/// enough to be a misspelling (at most a third of the key's length, at least 1).
pub fn suggest<'a>(key: &str, known: &'a [String]) -> Option<&'a str> {
    let limit = (key.chars().count() / 3).max(1);
    known
        .iter()
        .map(|k| (strsim::damerau_levenshtein(key, k), k))
        .filter(|(d, _)| *d <= limit)
        .min_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1)))
        .map(|(_, k)| k.as_str())
}

/// The keys the schema declares for the mapping at dotted `path`.
fn keys_at(schema: &Value, path: &str) -> Vec<String> {
    let mut node = schema;
    for segment in path.split('.').filter(|s| !s.is_empty()) {
        match properties(schema, node).into_iter().find(|(k, _)| *k == segment) {
            Some((_, child)) => node = child,
            None => return Vec::new(),
        }
    }
    properties(schema, node).into_iter().map(|(k, _)| k.to_string()).collect()
}

/// A node's `properties` in schema order, through a local `$ref` and its `allOf` parts.
fn properties<'a>(root: &'a Value, node: &'a Value) -> Vec<(&'a str, &'a Value)> {
    let deref = |n: &'a Value| -> &'a Value {
        match n.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#')) {
            Some(target) => root.pointer(target).unwrap_or(n),
            None => n,
        }
    };
    let mut nodes = vec![node, deref(node)];
    if let Some(parts) = node.get("allOf").and_then(Value::as_array) {
        nodes.extend(parts.iter().map(deref));
    }
    let mut out: Vec<(&'a str, &'a Value)> = Vec::new();
    for n in nodes {
        for (k, v) in n.get("properties").and_then(Value::as_object).into_iter().flatten() {
            if !out.iter().any(|(have, _)| *have == k.as_str()) {
                out.push((k.as_str(), v));
            }
        }
    }
    out
}

/// Where the key at dotted `path` is written in block-style YAML (line and
/// column, 1-based), or its nearest written parent; `None` when no part of
/// it is (a flow mapping, or a problem of the file as a whole).
pub fn locate(text: &str, path: &str) -> Option<(usize, usize)> {
    let keys: Vec<&str> = path
        .split('.')
        .map(|s| s.split('[').next().unwrap_or(s))
        .take_while(|s| !s.is_empty() && !s.bytes().all(|b| b.is_ascii_digit()))
        .collect();
    (1..=keys.len()).rev().find_map(|n| locate_exact(text, &keys[..n]))
}

/// The line and column of the block-mapping key at exactly `keys`.
fn locate_exact(text: &str, keys: &[&str]) -> Option<(usize, usize)> {
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut scalar_above: Option<usize> = None;
    for (n, raw) in text.lines().enumerate() {
        let indent = raw.len() - raw.trim_start_matches(' ').len();
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') || line == "---" {
            continue;
        }
        // The lines of a block scalar (`key: |`) are text, not keys.
        if let Some(level) = scalar_above {
            if indent > level {
                continue;
            }
            scalar_above = None;
        }
        if line.starts_with('-') {
            continue;
        }
        let Some((key, rest)) = line.split_once(':') else { continue };
        if !(rest.is_empty() || rest.starts_with(' ')) {
            continue;
        }
        let key = key.trim().trim_matches(|c| c == '"' || c == '\'');
        while stack.last().is_some_and(|(i, _)| *i >= indent) {
            stack.pop();
        }
        stack.push((indent, key.to_string()));
        let value = rest.split(" #").next().unwrap_or("").trim();
        if value.starts_with('|') || value.starts_with('>') {
            scalar_above = Some(indent);
        }
        if stack.len() == keys.len() && stack.iter().zip(keys).all(|((_, k), want)| k == want) {
            return Some((n + 1, indent + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::render_config;
    use std::path::Path;

    fn base() -> String {
        render_config("builtin", Path::new("s.yaml"), None, None)
    }

    fn line_of(text: &str, needle: &str) -> usize {
        text.lines().position(|l| l.contains(needle)).expect("the needle is in the text") + 1
    }

    #[test]
    fn every_problem_is_reported_at_its_line_with_a_suggestion_for_a_misspelt_key() {
        let text = base()
            .replace("alpha: 0.05", "alpha: 2")
            .replace("candidates: 4", "candidates: lots")
            .replace("  rounds: 20\n", "  rounds: 20\n  rouns: 3\n");
        let checked = check_config(&text);
        assert!(checked.config.is_none());
        let got: Vec<(String, Option<usize>)> = checked.problems.iter().map(|p| (p.path.clone(), p.line)).collect();
        assert!(got.contains(&("gates.alpha".into(), Some(line_of(&text, "alpha: 2")))), "{got:?}");
        assert!(got.contains(&("loop.candidates".into(), Some(line_of(&text, "candidates: lots")))), "{got:?}");
        let unknown = checked.problems.iter().find(|p| p.path == "loop.rouns").expect("the unknown key");
        assert_eq!(unknown.line, Some(line_of(&text, "rouns: 3")));
        assert!(unknown.message.contains("did you mean `rounds`?"), "{}", unknown.message);
        // The old names still load but are not offered.
        let gates = check_config(&base().replace("alpha: 0.05", "alpha: 0.05\n  alpah: 1")).problems;
        assert!(
            gates[0].message.contains("did you mean `alpha`?") && !gates[0].message.contains("delta1"),
            "{gates:?}"
        );
        // Problems come in file order, each once.
        let lines: Vec<usize> = checked.problems.iter().filter_map(|p| p.line).collect();
        assert!(lines.windows(2).all(|w| w[0] <= w[1]), "{lines:?}");
    }

    #[test]
    fn range_and_consistency_problems_are_all_reported_with_their_lines() {
        let text = base()
            .replace("probe_size: 100", "probe_size: 3")
            .replace("bootstrap_resamples: 10000", "bootstrap_resamples: 5");
        assert!(text.contains("probe_size: 3") && text.contains("bootstrap_resamples: 5"), "{text}");
        let checked = check_config(&text);
        let paths: Vec<&str> = checked.problems.iter().map(|p| p.path.as_str()).collect();
        assert!(paths.contains(&"gates.probe_size") && paths.contains(&"gates.bootstrap_resamples"), "{paths:?}");
        assert!(checked.problems.iter().all(|p| p.line.is_some()), "{:?}", checked.problems);
        let one = checked.into_result().unwrap_err();
        assert!(one.contains("and 1 more problem: `emend validate emend.yaml`"), "{one}");
    }

    #[test]
    fn a_syntax_error_names_its_position_once() {
        let checked = check_config("harness:\n  tasks: [builtin\n");
        assert_eq!(checked.problems.len(), 1);
        let shown = checked.problems[0].to_string();
        assert_eq!(shown.matches("line 3 column 1").count(), 1, "{shown}");
        assert!(checked.problems[0].line.is_some());
        let empty = check_config("# nothing yet\n").problems;
        assert!(empty.len() == 1 && empty[0].message.starts_with("empty file"), "{empty:?}");
    }

    #[test]
    fn the_locator_follows_block_mappings_and_skips_block_scalars() {
        let text = "a:\n  b: |\n    c: 1\n  c: 2\nd:\n  - x: 1\n";
        assert_eq!(locate(text, "a.c"), Some((4, 3)));
        assert_eq!(locate(text, "a.b"), Some((2, 3)));
        assert_eq!(locate(text, "a.missing"), Some((1, 1)));
        assert_eq!(locate(text, "d.0.x"), Some((5, 1)));
        assert_eq!(locate(text, "zzz"), None);
        assert_eq!(suggest("tsks", &["tasks".into(), "judge".into()]), Some("tasks"));
        assert_eq!(suggest("colour", &["tasks".into(), "judge".into()]), None);
    }
}
