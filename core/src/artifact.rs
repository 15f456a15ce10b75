//! Strategy artifacts: reading a YAML file safely, checking it against the
//! schema, its content identity, and writing it back.
//!
//! Identity is the SHA-256 of a canonical serialization (keys sorted, no
//! whitespace) of the document without its metadata (`version`, `parent`), so
//! key order, comments and formatting never change a strategy's hash and any
//! value does.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::schema::{Problem, StrategySchema};

/// Largest strategy file read. Real strategies are a few KiB; the limit keeps
/// a runaway file from costing time or memory.
pub const MAX_STRATEGY_BYTES: u64 = 1024 * 1024;

/// Where `emend init` puts the strategy schema in a project (relative to the
/// project directory), for editors and for the served file's modeline.
pub const PROJECT_SCHEMA_FILE: &str = "schema/strategy.schema.json";

/// Metadata keys: not part of the content hash.
pub const METADATA_KEYS: [&str; 2] = ["version", "parent"];

/// A strategy that passed every check.
#[derive(Debug, Clone)]
pub struct Artifact {
    /// The harness's typed view (built-in schema only; external harnesses have none).
    pub strategy: Option<emend_harness::Strategy>,
    /// The document as read, metadata included, key order kept.
    pub value: Value,
    /// Content hash (hex SHA-256), metadata excluded.
    pub hash: String,
    pub version: Option<u64>,
    pub parent: Option<u64>,
}

impl Artifact {
    /// The typed strategy; errors for artifacts of external harnesses.
    pub fn typed(&self) -> Result<&emend_harness::Strategy, ArtifactError> {
        self.strategy.as_ref().ok_or_else(|| ArtifactError {
            origin: format!("strategy {}", &self.hash[..12]),
            kind: ArtifactErrorKind::Invalid(vec![Problem::new("(root)", "not a built-in harness strategy")]),
        })
    }
}

/// Why a strategy was refused: where it came from and what is wrong.
#[derive(Debug, thiserror::Error)]
pub struct ArtifactError {
    pub origin: String,
    pub kind: ArtifactErrorKind,
}

#[derive(Debug)]
pub enum ArtifactErrorKind {
    Io(std::io::Error),
    TooLarge { bytes: u64 },
    Empty,
    Yaml { line: Option<usize>, column: Option<usize>, message: String },
    Invalid(Vec<Problem>),
}

impl ArtifactError {
    /// One line per problem, each naming the file and the field or position.
    pub fn lines(&self) -> Vec<String> {
        let o = &self.origin;
        match &self.kind {
            ArtifactErrorKind::Io(e) => vec![format!("{o}: cannot read: {e}")],
            ArtifactErrorKind::TooLarge { bytes } => {
                vec![format!("{o}: file is {bytes} bytes; a strategy is at most {MAX_STRATEGY_BYTES} bytes")]
            }
            ArtifactErrorKind::Empty => vec![format!("{o}: empty file: expected a strategy mapping")],
            ArtifactErrorKind::Yaml { line: Some(l), column: Some(c), message } => {
                vec![format!("{o}:{l}:{c}: YAML syntax error: {message}")]
            }
            ArtifactErrorKind::Yaml { message, .. } => vec![format!("{o}: YAML error: {message}")],
            ArtifactErrorKind::Invalid(problems) => problems.iter().map(|p| format!("{o}: {p}")).collect(),
        }
    }

    /// The problems, for `--json` output.
    pub fn problems(&self) -> Vec<Problem> {
        match &self.kind {
            ArtifactErrorKind::Invalid(p) => p.clone(),
            _ => self
                .lines()
                .into_iter()
                .map(|l| Problem::new("(file)", l.strip_prefix(&format!("{}: ", self.origin)).unwrap_or(&l)))
                .collect(),
        }
    }
}

impl fmt::Display for ArtifactError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.lines().join("\n"))
    }
}

/// The built-in default strategy (strategies/default.yaml): the first version
/// of a project made without `--strategy`, and what `emend collision` runs
/// without one.
pub const DEFAULT_STRATEGY: &str = include_str!("../../strategies/default.yaml");

/// Reads and checks a strategy file against the built-in schema.
pub fn load_strategy_file(path: &Path) -> Result<Artifact, ArtifactError> {
    load_file(path, &StrategySchema::builtin())
}

/// Reads and checks a strategy file against `schema`.
pub fn load_file(path: &Path, schema: &StrategySchema) -> Result<Artifact, ArtifactError> {
    let origin = path.display().to_string();
    let text = read_bounded(path).map_err(|kind| ArtifactError { origin: origin.clone(), kind })?;
    from_yaml(&origin, &text, schema)
}

fn read_bounded(path: &Path) -> Result<String, ArtifactErrorKind> {
    let file = std::fs::File::open(path).map_err(ArtifactErrorKind::Io)?;
    let len = file.metadata().map_err(ArtifactErrorKind::Io)?.len();
    if len > MAX_STRATEGY_BYTES {
        return Err(ArtifactErrorKind::TooLarge { bytes: len });
    }
    // Read one byte past the limit so a file that grows (or a device) is caught too.
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(MAX_STRATEGY_BYTES + 1).read_to_end(&mut bytes).map_err(ArtifactErrorKind::Io)?;
    if bytes.len() as u64 > MAX_STRATEGY_BYTES {
        return Err(ArtifactErrorKind::TooLarge { bytes: bytes.len() as u64 });
    }
    String::from_utf8(bytes).map_err(|e| ArtifactErrorKind::Yaml {
        line: None,
        column: None,
        message: format!("not UTF-8 text (invalid byte at offset {})", e.utf8_error().valid_up_to()),
    })
}

/// Parses and checks YAML text; `origin` names it in errors.
pub fn from_yaml(origin: &str, text: &str, schema: &StrategySchema) -> Result<Artifact, ArtifactError> {
    let fail = |kind| ArtifactError { origin: origin.to_string(), kind };
    let value = parse_yaml(text).map_err(fail)?;
    from_value(origin, value, schema)
}

/// Checks a document that is already JSON (a mutation's result, a journal record).
pub fn from_value(origin: &str, value: Value, schema: &StrategySchema) -> Result<Artifact, ArtifactError> {
    let fail = |kind| ArtifactError { origin: origin.to_string(), kind };
    let problems = schema.check(&value);
    if !problems.is_empty() {
        return Err(fail(ArtifactErrorKind::Invalid(problems)));
    }
    let strategy = if is_builtin(schema) {
        Some(serde_json::from_value::<emend_harness::Strategy>(value.clone()).map_err(|e| {
            fail(ArtifactErrorKind::Invalid(vec![Problem::new("(root)", format!("does not fit the harness: {e}"))]))
        })?)
    } else {
        None
    };
    let version = value.get("version").and_then(Value::as_u64);
    let parent = value.get("parent").and_then(Value::as_u64);
    let hash = content_hash(&value);
    Ok(Artifact { strategy, value, hash, version, parent })
}

fn is_builtin(schema: &StrategySchema) -> bool {
    schema.raw().get("$id").and_then(Value::as_str) == Some("https://emend.dev/schemas/strategy.schema.json")
}

/// Deepest nesting accepted in a YAML file emend reads (strategies, emend.yaml). The
/// built-in strategy nests 4 levels; emend.yaml 4.
pub const MAX_YAML_DEPTH: usize = 64;

/// Where and why YAML text exceeds a bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlBound {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// Refuse YAML nested deeper than `max_depth`, without parsing it: one linear pass that
/// counts block nesting (indentation and `- ` entries) plus flow nesting (`[` and `{`
/// outside quotes and comments). It over-counts rather than under-counts (a bracket inside a
/// plain or block scalar counts too), which only matters past `max_depth` open brackets.
pub fn check_yaml_bounds(text: &str, max_depth: usize) -> Result<(), YamlBound> {
    let mut indents: Vec<usize> = Vec::new();
    let mut flow = 0usize;
    let mut quote: Option<char> = None;
    for (n, line) in text.lines().enumerate() {
        let line_no = n + 1;
        let too_deep = |depth: usize, col: usize| YamlBound {
            line: line_no,
            column: col,
            message: format!(
                "nesting is deeper than {max_depth} levels (at depth {depth}); refused before parsing, \
                 as no strategy or configuration needs that much"
            ),
        };
        let mut chars = line.char_indices().peekable();
        // Block structure: only for lines that start outside quotes and flow collections.
        let mut block = 0usize;
        if quote.is_none() && flow == 0 {
            let indent = line.len() - line.trim_start_matches(' ').len();
            let rest = line[indent..].trim_end();
            if !rest.is_empty() && !rest.starts_with('#') {
                while indents.last().is_some_and(|&top| top >= indent) {
                    indents.pop();
                }
                indents.push(indent);
                // Compact nested entries on one line: `- - - a`.
                let mut r = rest;
                while let Some(after) = r.strip_prefix("- ").or_else(|| (r == "-").then_some("")) {
                    block += 1;
                    r = after.trim_start_matches(' ');
                }
                let depth = indents.len() + block;
                if depth > max_depth {
                    return Err(too_deep(depth, indent + 1));
                }
            }
        }
        let base = indents.len() + block;
        let mut prev_space = true;
        while let Some((i, c)) = chars.next() {
            match quote {
                Some('\'') => {
                    if c == '\'' {
                        if chars.peek().is_some_and(|&(_, d)| d == '\'') {
                            chars.next();
                        } else {
                            quote = None;
                        }
                    }
                }
                Some(_) => {
                    if c == '\\' {
                        chars.next();
                    } else if c == '"' {
                        quote = None;
                    }
                }
                None => match c {
                    '#' if prev_space => break,
                    '\'' | '"' if prev_space || flow > 0 => quote = Some(c),
                    '[' | '{' => {
                        flow += 1;
                        if base + flow > max_depth {
                            return Err(too_deep(base + flow, i + 1));
                        }
                    }
                    ']' | '}' => flow = flow.saturating_sub(1),
                    _ => {}
                },
            }
            prev_space = c == ' ' || c == '\t' || (quote.is_none() && flow > 0 && matches!(c, '[' | '{' | ','));
        }
    }
    Ok(())
}

/// YAML text -> JSON value, refusing what JSON cannot hold faithfully:
/// NaN and infinities, non-string keys, tags. serde_yaml bounds recursion
/// and alias expansion, which stops "billion laughs" documents early.
///
/// Size and nesting depth are checked before the text reaches the YAML parser
/// ([`check_yaml_bounds`]): libyaml's scanner is quadratic on deeply nested flow
/// collections, so a small hostile file would otherwise stall every command.
pub fn parse_yaml(text: &str) -> Result<Value, ArtifactErrorKind> {
    if text.len() as u64 > MAX_STRATEGY_BYTES {
        return Err(ArtifactErrorKind::TooLarge { bytes: text.len() as u64 });
    }
    if text.trim().is_empty() {
        return Err(ArtifactErrorKind::Empty);
    }
    check_yaml_bounds(text, MAX_YAML_DEPTH).map_err(|b| ArtifactErrorKind::Yaml {
        line: Some(b.line),
        column: Some(b.column),
        message: b.message,
    })?;
    let yaml: serde_yaml::Value = serde_yaml::from_str(text).map_err(|e| {
        let loc = e.location();
        ArtifactErrorKind::Yaml {
            line: loc.as_ref().map(|l| l.line()),
            column: loc.as_ref().map(|l| l.column()),
            message: e.to_string(),
        }
    })?;
    if yaml.is_null() {
        return Err(ArtifactErrorKind::Empty);
    }
    let mut problems = Vec::new();
    let value = to_json(&yaml, "(root)", &mut problems);
    if problems.is_empty() { Ok(value) } else { Err(ArtifactErrorKind::Invalid(problems)) }
}

fn to_json(y: &serde_yaml::Value, path: &str, problems: &mut Vec<Problem>) -> Value {
    use serde_yaml::Value as Y;
    match y {
        Y::Null => Value::Null,
        Y::Bool(b) => Value::Bool(*b),
        Y::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::from(i)
            } else if let Some(u) = n.as_u64() {
                Value::from(u)
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                match serde_json::Number::from_f64(f) {
                    Some(num) => Value::Number(num),
                    None => {
                        problems.push(Problem::new(path, format!("must be a finite number, got {n}")));
                        Value::Null
                    }
                }
            }
        }
        Y::String(s) => Value::String(s.clone()),
        Y::Sequence(items) => {
            Value::Array(items.iter().enumerate().map(|(i, v)| to_json(v, &format!("{path}[{i}]"), problems)).collect())
        }
        Y::Mapping(m) => {
            let mut out = Map::new();
            for (k, v) in m {
                let Some(key) = k.as_str() else {
                    problems.push(Problem::new(path, format!("keys must be strings, got {}", yaml_kind(k))));
                    continue;
                };
                let child = if path == "(root)" { key.to_string() } else { format!("{path}.{key}") };
                let converted = to_json(v, &child, problems);
                out.insert(key.to_string(), converted);
            }
            Value::Object(out)
        }
        Y::Tagged(t) => {
            problems.push(Problem::new(path, format!("YAML tags are not allowed, got {}", t.tag)));
            Value::Null
        }
    }
}

fn yaml_kind(v: &serde_yaml::Value) -> &'static str {
    use serde_yaml::Value as Y;
    match v {
        Y::Null => "null",
        Y::Bool(_) => "a boolean",
        Y::Number(_) => "a number",
        Y::String(_) => "a string",
        Y::Sequence(_) => "a sequence",
        Y::Mapping(_) => "a mapping",
        Y::Tagged(_) => "a tagged value",
    }
}

/// Canonical serialization: keys sorted recursively, compact.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push(':');
                write_canonical(&m[k.as_str()], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Hex SHA-256 of bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The content hash of a strategy document: metadata excluded.
pub fn content_hash(v: &Value) -> String {
    let mut stripped = v.clone();
    if let Some(m) = stripped.as_object_mut() {
        for key in METADATA_KEYS {
            m.remove(key);
        }
    }
    sha256_hex(canonical_json(&stripped).as_bytes())
}

/// The YAML text of an artifact with its metadata set, under a header comment.
pub fn render_yaml(value: &Value, version: Option<u64>, parent: Option<u64>, header: &str) -> String {
    render_strategy(value, version, parent, header, None)
}

/// The editor modeline naming a strategy file's JSON schema: the YAML language
/// server (VS Code, Neovim, Helix, ...) validates and completes the file against
/// it. `schema` is relative to the strategy file's directory. A comment, so the
/// content hash never sees it.
pub fn schema_modeline(schema: &str) -> String {
    format!("# yaml-language-server: $schema={schema}\n")
}

/// [`render_yaml`] with a first line naming the schema (see [`schema_modeline`]).
pub fn render_strategy(
    value: &Value,
    version: Option<u64>,
    parent: Option<u64>,
    header: &str,
    schema: Option<&str>,
) -> String {
    let mut doc = Map::new();
    if let Some(v) = version {
        doc.insert("version".into(), Value::from(v));
    }
    if version.is_some() {
        doc.insert("parent".into(), parent.map(Value::from).unwrap_or(Value::Null));
    }
    if let Some(m) = value.as_object() {
        for (k, v) in m {
            if !METADATA_KEYS.contains(&k.as_str()) {
                doc.insert(k.clone(), v.clone());
            }
        }
    }
    let body = serde_yaml::to_string(&Value::Object(doc)).expect("a JSON value always renders as YAML");
    let mut out = schema.map(schema_modeline).unwrap_or_default();
    for line in header.lines() {
        out.push_str("# ");
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(&body);
    out
}

/// `to` as a relative path from the directory `from` (both absolute, or both
/// relative to the same place), with `/` separators as the modeline and
/// `emend.yaml` want them. No file system access: `..` and symlinks are the
/// caller's to resolve first.
pub fn relative_path(from: &Path, to: &Path) -> String {
    use std::path::Component;
    let keep = |c: &Component| !matches!(c, Component::CurDir);
    let from: Vec<Component> = from.components().filter(keep).collect();
    let to: Vec<Component> = to.components().filter(keep).collect();
    let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_string(); from.len() - common];
    parts.extend(to[common..].iter().map(|c| c.as_os_str().to_string_lossy().into_owned()));
    if parts.is_empty() { ".".to_string() } else { parts.join("/") }
}

/// Writes a file atomically: a temporary file in the same directory, synced,
/// then renamed over the target, then the directory synced.
pub fn write_atomic(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "file".into());
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(contents)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Ok(d) = std::fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_path_walks_up_then_down() {
        assert_eq!(relative_path(Path::new("/p/strategies"), Path::new("/p/schema/s.json")), "../schema/s.json");
        assert_eq!(relative_path(Path::new("/p"), Path::new("/p/schema/s.json")), "schema/s.json");
        assert_eq!(relative_path(Path::new("/a/b/p"), Path::new("/a/data/t.json")), "../../data/t.json");
        assert_eq!(relative_path(Path::new("/p/./x"), Path::new("/p/x")), ".");
    }

    #[test]
    fn the_schema_modeline_comes_first_and_leaves_the_hash_alone() {
        let a = from_yaml("default", DEFAULT, &schema()).unwrap();
        let text = render_strategy(&a.value, Some(3), Some(2), "header", Some("../schema/strategy.schema.json"));
        assert!(
            text.starts_with("# yaml-language-server: $schema=../schema/strategy.schema.json\n# header\n"),
            "{text}"
        );
        let back = from_yaml("rendered", &text, &schema()).unwrap();
        assert_eq!(back.hash, a.hash);
        assert_eq!(
            render_yaml(&a.value, Some(3), Some(2), "header"),
            render_strategy(&a.value, Some(3), Some(2), "header", None)
        );
    }

    const DEFAULT: &str = DEFAULT_STRATEGY;

    fn schema() -> StrategySchema {
        StrategySchema::builtin()
    }

    #[test]
    fn default_strategy_is_valid() {
        let a = from_yaml("default.yaml", DEFAULT, &schema()).unwrap();
        assert_eq!(a.version, Some(1));
        assert!(a.strategy.is_some());
        assert_eq!(a.hash.len(), 64);
    }

    #[test]
    fn hash_ignores_key_order_comments_whitespace_and_metadata() {
        let a = from_yaml("a", DEFAULT, &schema()).unwrap();
        // Reverse the order of every mapping, drop comments, change metadata.
        let mut v = a.value.clone();
        fn reverse(v: &mut Value) {
            if let Value::Object(m) = v {
                let mut items: Vec<(String, Value)> = std::mem::take(m).into_iter().collect();
                items.reverse();
                for (k, mut val) in items {
                    reverse(&mut val);
                    m.insert(k, val);
                }
            }
        }
        reverse(&mut v);
        let text = render_yaml(&v, Some(7), Some(3), "another header");
        assert_ne!(text.lines().find(|l| !l.starts_with('#')), DEFAULT.lines().find(|l| !l.starts_with('#')));
        let b = from_yaml("b", &text, &schema()).unwrap();
        assert_eq!(a.hash, b.hash);
        assert_eq!(b.version, Some(7));
    }

    #[test]
    fn hash_changes_when_any_value_changes() {
        let a = from_yaml("a", DEFAULT, &schema()).unwrap();
        let s = schema();
        for field in s.fields().values().filter(|f| !METADATA_KEYS.contains(&f.path.as_str())) {
            let mut v = a.value.clone();
            // An optional field the default leaves out (ingest.consolidate) has no value to change.
            let Some(old) = crate::schema::get_path(&v, &field.path).cloned() else {
                assert!(field.path.starts_with("ingest.consolidate"), "{} is missing from the default", field.path);
                continue;
            };
            let new = match &old {
                Value::Bool(b) => Value::Bool(!b),
                Value::Number(n) => {
                    let x = n.as_f64().unwrap();
                    if n.is_f64() { serde_json::json!(x + 0.01) } else { serde_json::json!(n.as_i64().unwrap() + 1) }
                }
                Value::String(t) => Value::String(format!("{t} ")),
                other => panic!("unexpected leaf {other}"),
            };
            crate::schema::set_path(&mut v, &field.path, new);
            assert_ne!(content_hash(&v), a.hash, "{} did not change the hash", field.path);
        }
    }

    #[test]
    fn canonical_json_sorts_keys() {
        let v = serde_json::json!({"b": 1, "a": {"d": [1, {"z": 0, "y": 1}], "c": "x"}});
        assert_eq!(canonical_json(&v), r#"{"a":{"c":"x","d":[1,{"y":1,"z":0}]},"b":1}"#);
    }
}
