//! The strategy schema: JSON Schema validation plus the engine's `x-` data
//! (which fields may evolve and by how much, cross-field invariants, required
//! prompt markers, and which Layer A symptoms implicate which dimensions).
//!
//! The schema is the contract between the engine and the system it evolves;
//! nothing here knows the built-in harness's fields by name.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use serde_json::Value;

/// The schema shipped with emend for the built-in harness.
pub const BUILTIN_SCHEMA: &str = include_str!("../../schemas/strategy.schema.json");

/// One problem with a strategy: the dotted field path (`retrieve.top_k`, or
/// `(root)`) and what is wrong, phrased so it can follow `path: `.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Problem {
    pub path: String,
    pub message: String,
    /// Which rule family the problem breaks (the gates sort problems by it).
    pub kind: ProblemKind,
}

/// Rule families, in the order the gates check them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// Types, required and unknown fields, enums: the document's shape.
    Structure,
    /// A value outside its minimum or maximum.
    Range,
    /// A cross-field `x-invariants` rule.
    Invariant,
    /// A required prompt marker is missing.
    Marker,
    /// A text field outside its length bounds.
    Length,
}

impl Problem {
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Problem::of(ProblemKind::Structure, path, message)
    }

    pub fn of(kind: ProblemKind, path: impl Into<String>, message: impl Into<String>) -> Self {
        Problem { path: path.into(), message: message.into(), kind }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// What kind of value a field holds, as far as mutation is concerned.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldKind {
    Integer,
    Number,
    Boolean,
    Enum(Vec<String>),
    Text,
}

impl FieldKind {
    /// The kind in words, for messages.
    pub fn describe(&self) -> String {
        match self {
            FieldKind::Integer => "an integer".into(),
            FieldKind::Number => "a number".into(),
            FieldKind::Boolean => "a boolean".into(),
            FieldKind::Enum(values) => format!("one of {}", values.join(", ")),
            FieldKind::Text => "text".into(),
        }
    }
}

/// A leaf field of the strategy and the engine's data about it.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldSpec {
    pub path: String,
    pub kind: FieldKind,
    pub minimum: Option<f64>,
    pub maximum: Option<f64>,
    pub evolvable: bool,
    pub step: Option<f64>,
    pub max_delta: Option<f64>,
    pub required_markers: Vec<String>,
    pub min_length: Option<u64>,
    pub max_length: Option<u64>,
    /// The field only has an effect when this LLM role is configured.
    pub needs_role: Option<String>,
    /// Some of the field's values need this model installed (`x-needs-model`:
    /// `minilm` for `index.dense_kind`); the engine moves it only then.
    pub needs_model: Option<String>,
    /// `x-inert-when`: the field has no effect on any outcome while one of
    /// these conditions holds (e.g. `retrieve.rrf_kappa` under
    /// `retrieve.fusion: weighted_sum`). The search leaves an inert field at
    /// its served value, so a candidate never changes a field that does nothing.
    pub inert_when: Vec<InertCondition>,
    /// Locked by a rollback ([`StrategySchema::with_frozen`]): the version
    /// whose change the rollback undid, quarantined until `emend
    /// unquarantine` lifts it and the freeze.
    pub frozen_by: Option<u64>,
}

/// One condition of `x-inert-when`: the value at `path` is one of `values`.
/// A path under `harness.` names a setting of the harness that runs the
/// strategy (`harness.judge`), not a strategy field.
#[derive(Debug, Clone, PartialEq)]
pub struct InertCondition {
    pub path: String,
    pub values: Vec<Value>,
}

impl InertCondition {
    /// True when `doc` (or, for a `harness.` path, `harness`) holds one of the values.
    pub fn holds(&self, doc: &Value, harness: &Value) -> bool {
        let value = match self.path.strip_prefix("harness.") {
            Some(rest) => get_path(harness, rest),
            None => get_path(doc, &self.path),
        };
        let Some(value) = value else { return false };
        self.values.iter().any(|v| v == value || (v.is_number() && v.as_f64() == value.as_f64()))
    }
}

/// A comparison operator of an `x-invariants` rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
}

impl Op {
    fn parse(s: &str) -> Option<Op> {
        Some(match s {
            "<" => Op::Lt,
            "<=" => Op::Le,
            ">" => Op::Gt,
            ">=" => Op::Ge,
            "==" => Op::Eq,
            "!=" => Op::Ne,
            _ => return None,
        })
    }

    pub fn symbol(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Eq => "==",
            Op::Ne => "!=",
        }
    }

    pub fn holds(self, a: f64, b: f64) -> bool {
        match self {
            Op::Lt => a < b,
            Op::Le => a <= b,
            Op::Gt => a > b,
            Op::Ge => a >= b,
            Op::Eq => a == b,
            Op::Ne => a != b,
        }
    }
}

/// The right-hand side of an invariant: another field or a constant.
#[derive(Debug, Clone, PartialEq)]
pub enum Operand {
    Path(String),
    Number(f64),
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Operand::Path(p) => f.write_str(p),
            Operand::Number(n) => write!(f, "{n}"),
        }
    }
}

/// A cross-field rule written as data in the schema's root `x-invariants`.
#[derive(Debug, Clone, PartialEq)]
pub struct Invariant {
    pub left: String,
    pub op: Op,
    pub right: Operand,
    pub why: String,
}

impl Invariant {
    /// The numeric values of both sides in `doc`; None when a side is missing
    /// or not a number (the schema check reports that).
    pub fn sides(&self, doc: &Value) -> Option<(f64, f64)> {
        let a = get_path(doc, &self.left).and_then(Value::as_f64)?;
        let b = match &self.right {
            Operand::Number(n) => *n,
            Operand::Path(p) => get_path(doc, p).and_then(Value::as_f64)?,
        };
        Some((a, b))
    }
}

impl fmt::Display for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.left, self.op.symbol(), self.right)
    }
}

/// Which way a symptom pushes a dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    Increase,
    Decrease,
    /// Enum or boolean: move to another value.
    Toggle,
    /// A prompt rewrite (needs the evolver model).
    Rewrite,
}

impl Direction {
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Increase => "increase",
            Direction::Decrease => "decrease",
            Direction::Toggle => "toggle",
            Direction::Rewrite => "rewrite",
        }
    }

    /// The direction of a move of one field: up or down for a number, else a toggle.
    pub fn of_move(from: &Value, to: &Value) -> Direction {
        match (from.as_f64(), to.as_f64()) {
            (Some(a), Some(b)) if b > a => Direction::Increase,
            (Some(_), Some(_)) => Direction::Decrease,
            _ => Direction::Toggle,
        }
    }

    pub fn parse(s: &str) -> Option<Direction> {
        Some(match s {
            "increase" => Direction::Increase,
            "decrease" => Direction::Decrease,
            "toggle" => Direction::Toggle,
            "rewrite" => Direction::Rewrite,
            _ => return None,
        })
    }
}

/// A dimension the schema links to a Layer A symptom.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SymptomLink {
    pub path: String,
    pub direction: Direction,
}

/// Why a schema file could not be used.
#[derive(Debug, thiserror::Error)]
#[error("schema {origin}: {message}")]
pub struct SchemaError {
    pub origin: String,
    pub message: String,
}

/// A loaded strategy schema.
pub struct StrategySchema {
    origin: String,
    raw: Value,
    validator: jsonschema::Validator,
    fields: BTreeMap<String, FieldSpec>,
    invariants: Vec<Invariant>,
    symptoms: BTreeMap<String, Vec<SymptomLink>>,
}

impl fmt::Debug for StrategySchema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StrategySchema").field("origin", &self.origin).field("fields", &self.fields.len()).finish()
    }
}

impl StrategySchema {
    /// The schema of the built-in harness.
    pub fn builtin() -> StrategySchema {
        StrategySchema::from_str("schemas/strategy.schema.json (built in)", BUILTIN_SCHEMA)
            .expect("the built-in schema is valid (tested)")
    }

    /// A user's schema file (external harnesses bring their own).
    pub fn from_path(path: &Path) -> Result<StrategySchema, SchemaError> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| SchemaError { origin: origin.clone(), message: format!("cannot read: {e}") })?;
        StrategySchema::from_str(&origin, &text)
    }

    pub fn from_str(origin: &str, text: &str) -> Result<StrategySchema, SchemaError> {
        let err = |message: String| SchemaError { origin: origin.to_string(), message };
        let raw: Value = emend_harness::strict_json::from_str(text).map_err(|e| err(format!("not JSON: {e}")))?;
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .build(&raw)
            .map_err(|e| err(format!("not a valid JSON Schema: {e}")))?;
        let mut fields = BTreeMap::new();
        collect_fields(&raw, &raw, "", &mut fields).map_err(err)?;
        for f in fields.values() {
            if let Some(c) =
                f.inert_when.iter().find(|c| !c.path.starts_with("harness.") && !fields.contains_key(&c.path))
            {
                return Err(err(format!("{}: x-inert-when names unknown field {}", f.path, c.path)));
            }
        }
        let invariants = parse_invariants(&raw, &fields).map_err(err)?;
        let symptoms = parse_symptoms(&raw, &fields).map_err(err)?;
        Ok(StrategySchema { origin: origin.to_string(), raw, validator, fields, invariants, symptoms })
    }

    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// This schema with `frozen` fields (each with the version whose change
    /// froze it) locked as if they were not `x-evolvable` (and no symptom
    /// pointing at them): what a run searches after a rollback froze them at
    /// their served values.
    pub fn with_frozen(&self, frozen: &BTreeMap<String, u64>) -> StrategySchema {
        let text = serde_json::to_string(&self.raw).expect("a schema serializes");
        let mut out = StrategySchema::from_str(&self.origin, &text).expect("a loaded schema loads again");
        for (path, version) in frozen {
            if let Some(f) = out.fields.get_mut(path.as_str()) {
                f.evolvable = false;
                f.frozen_by = Some(*version);
            }
            for links in out.symptoms.values_mut() {
                links.retain(|l| &l.path != path);
            }
        }
        out
    }

    /// The schema document itself (for hashing and display).
    pub fn raw(&self) -> &Value {
        &self.raw
    }

    /// Every leaf field, by dotted path, in path order.
    pub fn fields(&self) -> &BTreeMap<String, FieldSpec> {
        &self.fields
    }

    pub fn field(&self, path: &str) -> Option<&FieldSpec> {
        self.fields.get(path)
    }

    /// The fields the engine may mutate.
    pub fn evolvable(&self) -> impl Iterator<Item = &FieldSpec> {
        self.fields.values().filter(|f| f.evolvable)
    }

    pub fn invariants(&self) -> &[Invariant] {
        &self.invariants
    }

    /// Layer A label -> the dimensions (and directions) it implicates.
    pub fn symptoms(&self) -> &BTreeMap<String, Vec<SymptomLink>> {
        &self.symptoms
    }

    /// Every problem with `doc`: schema violations, then broken invariants and
    /// missing prompt markers. Sorted, so output is stable.
    pub fn check(&self, doc: &Value) -> Vec<Problem> {
        if !doc.is_object() {
            return vec![Problem::new(
                "(root)",
                format!("expected a mapping of strategy sections, got {}", Dialect::Yaml.describe(doc)),
            )];
        }
        let mut problems: Vec<Problem> =
            self.validator.iter_errors(doc).flat_map(|e| explain(&e, Dialect::Yaml)).collect();
        // jsonschema's error order is not stable: sort, then add the engine's own
        // checks, then group by field (stable, so schema errors come first).
        problems.sort();
        problems.dedup();
        problems.extend(self.check_markers(doc));
        problems.extend(self.check_invariants(doc));
        problems.sort_by(|a, b| a.path.cmp(&b.path));
        problems
    }

    /// Problems with required prompt markers only.
    pub fn check_markers(&self, doc: &Value) -> Vec<Problem> {
        let mut out = Vec::new();
        for field in self.fields.values().filter(|f| !f.required_markers.is_empty()) {
            if let Some(Value::String(text)) = get_path(doc, &field.path) {
                for marker in &field.required_markers {
                    if !text.contains(marker.as_str()) {
                        out.push(Problem::of(
                            ProblemKind::Marker,
                            &field.path,
                            format!("missing required marker {marker}"),
                        ));
                    }
                }
            }
        }
        out
    }

    /// Problems with the cross-field invariants only. A side that is missing
    /// or not a number is left to the schema check, which reports it.
    pub fn check_invariants(&self, doc: &Value) -> Vec<Problem> {
        let mut out = Vec::new();
        for inv in &self.invariants {
            let Some((a, b)) = inv.sides(doc) else { continue };
            if !inv.op.holds(a, b) {
                let right = match &inv.right {
                    Operand::Path(p) => format!("{p} ({})", fmt_num(b)),
                    Operand::Number(_) => fmt_num(b),
                };
                out.push(Problem::of(
                    ProblemKind::Invariant,
                    &inv.left,
                    format!("invariant broken: must be {} {right}, got {} ({})", inv.op.symbol(), fmt_num(a), inv.why),
                ));
            }
        }
        out
    }
}

/// Value at a dotted path (`retrieve.weights.bm25`).
pub fn get_path<'a>(doc: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(doc, |v, key| v.as_object()?.get(key))
}

/// Sets the value at an existing dotted path; `None` when the path does not exist.
pub fn set_path(doc: &mut Value, path: &str, value: Value) -> Option<Value> {
    let slot = path.split('.').try_fold(doc, |v, key| v.as_object_mut()?.get_mut(key))?;
    Some(std::mem::replace(slot, value))
}

/// A number as people write it: integers without a fraction.
pub fn fmt_num(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 { format!("{}", x as i64) } else { format!("{x}") }
}

/// How schema violations are worded for their reader: a strategy is YAML
/// written by people (dotted paths from `(root)`, `mapping`, `sequence`); an
/// adapter's outcome line is JSON (`evidence_trace[0].retrieved`, `object`,
/// `list`, the record itself an empty path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Yaml,
    Json,
}

impl Dialect {
    fn path(self, pointer: &str) -> String {
        let segments = pointer.split('/').skip(1).map(|s| s.replace("~1", "/").replace("~0", "~"));
        match self {
            Dialect::Yaml if pointer.is_empty() => "(root)".to_string(),
            Dialect::Yaml => segments.collect::<Vec<_>>().join("."),
            Dialect::Json => {
                let mut out = String::new();
                for seg in segments {
                    if !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) {
                        out.push_str(&format!("[{seg}]"));
                    } else {
                        if !out.is_empty() {
                            out.push('.');
                        }
                        out.push_str(&seg);
                    }
                }
                out
            }
        }
    }

    fn child(self, parent: &str, key: &str) -> String {
        match self {
            Dialect::Yaml if parent == "(root)" => key.to_string(),
            Dialect::Json if parent.is_empty() => key.to_string(),
            _ => format!("{parent}.{key}"),
        }
    }

    /// A JSON Schema type name (`integer`) as the reader says it.
    fn type_name(self, t: &str) -> String {
        match (self, t) {
            (Dialect::Yaml, t) => t.to_string(),
            (Dialect::Json, "array") => "a list".into(),
            (Dialect::Json, "object") => "an object".into(),
            (Dialect::Json, "integer") => "an integer".into(),
            (Dialect::Json, "null") => "null".into(),
            (Dialect::Json, other) => format!("a {other}"),
        }
    }

    /// What a value is, for "got ...".
    fn describe(self, v: &Value) -> String {
        match (self, v) {
            (_, Value::Null) => "null".into(),
            (_, Value::Bool(b)) => format!("a boolean ({b})"),
            (_, Value::Number(n)) => format!("a number ({n})"),
            (Dialect::Yaml, Value::String(s)) => format!("a string ({})", short(s)),
            (Dialect::Json, Value::String(s)) => format!("the string {}", short(s)),
            (Dialect::Yaml, Value::Array(_)) => "a sequence".into(),
            (Dialect::Yaml, Value::Object(_)) => "a mapping".into(),
            (Dialect::Json, Value::Array(_)) => "a list".into(),
            (Dialect::Json, Value::Object(_)) => "an object".into(),
        }
    }

    fn missing(self) -> &'static str {
        match self {
            Dialect::Yaml => "missing required field",
            Dialect::Json => "missing",
        }
    }
}

fn short(s: &str) -> String {
    let clipped: String = s.chars().take(40).collect();
    if clipped.len() < s.len() { format!("{clipped:?}...") } else { format!("{clipped:?}") }
}

/// The one explainer of a JSON Schema violation: the field it is at (one
/// problem per unknown field) and what was expected, in `dialect`.
pub fn explain(e: &jsonschema::ValidationError<'_>, dialect: Dialect) -> Vec<Problem> {
    let path = dialect.path(e.instance_path().as_str());
    let got = e.instance();
    let got = got.as_ref();
    let one = |m: String| vec![Problem::new(path.clone(), m)];
    let range = |m: String| vec![Problem::of(ProblemKind::Range, path.clone(), m)];
    let length = |m: String| vec![Problem::of(ProblemKind::Length, path.clone(), m)];
    let chars = got.as_str().map_or(0, |s| s.chars().count());
    match e.kind() {
        ValidationErrorKind::Maximum { limit } => range(format!("must be <= {limit}, got {got}")),
        ValidationErrorKind::Minimum { limit } => range(format!("must be >= {limit}, got {got}")),
        ValidationErrorKind::ExclusiveMaximum { limit } => range(format!("must be < {limit}, got {got}")),
        ValidationErrorKind::ExclusiveMinimum { limit } => range(format!("must be > {limit}, got {got}")),
        ValidationErrorKind::Type { kind } => {
            let expected = match kind {
                TypeKind::Single(t) => dialect.type_name(&t.to_string()),
                TypeKind::Multiple(set) => {
                    set.iter().map(|t| dialect.type_name(&t.to_string())).collect::<Vec<_>>().join(" or ")
                }
            };
            one(format!("expected {expected}, got {}", dialect.describe(got)))
        }
        ValidationErrorKind::Enum { options } => {
            let opts = options.as_array().map(|a| a.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", "));
            one(format!("must be one of {}, got {got}", opts.unwrap_or_else(|| options.to_string())))
        }
        ValidationErrorKind::Required { property } => {
            let name = property.as_str().map(str::to_string).unwrap_or_else(|| property.to_string());
            vec![Problem::new(dialect.child(&path, &name), dialect.missing())]
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            unexpected.iter().map(|k| Problem::new(dialect.child(&path, k), "unknown field")).collect()
        }
        ValidationErrorKind::MinLength { limit } => length(format!("must be at least {limit} characters, got {chars}")),
        ValidationErrorKind::MaxLength { limit } => length(format!("must be at most {limit} characters, got {chars}")),
        _ => one(e.to_string()),
    }
}

/// Resolves a local `$ref` (`#/$defs/name`) and merges the referring node's
/// own keywords over the target (so a `description` beside `$ref` wins).
fn resolve<'a>(root: &'a Value, node: &'a Value) -> Result<std::borrow::Cow<'a, Value>, String> {
    let Some(reference) = node.get("$ref").and_then(Value::as_str) else {
        return Ok(std::borrow::Cow::Borrowed(node));
    };
    let pointer =
        reference.strip_prefix('#').ok_or_else(|| format!("only local $ref are supported, got {reference}"))?;
    let target = root.pointer(pointer).ok_or_else(|| format!("$ref {reference} points nowhere"))?;
    let mut merged = target.clone();
    if let (Some(m), Some(own)) = (merged.as_object_mut(), node.as_object()) {
        for (k, v) in own {
            if k != "$ref" {
                m.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(std::borrow::Cow::Owned(merged))
}

fn collect_fields(
    root: &Value,
    node: &Value,
    prefix: &str,
    out: &mut BTreeMap<String, FieldSpec>,
) -> Result<(), String> {
    let node = resolve(root, node)?;
    if let Some(props) = node.get("properties").and_then(Value::as_object) {
        for (key, sub) in props {
            let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
            collect_fields(root, sub, &path, out)?;
        }
        return Ok(());
    }
    if prefix.is_empty() {
        return Err("the root must declare properties".into());
    }
    let types: Vec<&str> = match node.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    let kind = if let Some(options) = node.get("enum").and_then(Value::as_array) {
        FieldKind::Enum(
            options.iter().map(|v| v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())).collect(),
        )
    } else if types.contains(&"integer") {
        FieldKind::Integer
    } else if types.contains(&"number") {
        FieldKind::Number
    } else if types.contains(&"boolean") {
        FieldKind::Boolean
    } else {
        FieldKind::Text
    };
    let num = |k: &str| node.get(k).and_then(Value::as_f64);
    let evolvable = node.get("x-evolvable").and_then(Value::as_bool).unwrap_or(false);
    let spec = FieldSpec {
        path: prefix.to_string(),
        kind,
        minimum: num("minimum"),
        maximum: num("maximum"),
        evolvable,
        step: num("x-step"),
        max_delta: num("x-max-delta"),
        required_markers: node
            .get("x-required-markers")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default(),
        min_length: node.get("minLength").and_then(Value::as_u64),
        max_length: node.get("maxLength").and_then(Value::as_u64),
        needs_role: node.get("x-needs-role").and_then(Value::as_str).map(str::to_string),
        needs_model: node.get("x-needs-model").and_then(Value::as_str).map(str::to_string),
        inert_when: parse_inert_when(prefix, &node)?,
        frozen_by: None,
    };
    // x-max-delta is optional: it bounds a step only under `search.method: steps`.
    if evolvable && matches!(spec.kind, FieldKind::Integer | FieldKind::Number) && spec.step.is_none() {
        return Err(format!("{prefix}: an evolvable number needs x-step"));
    }
    out.insert(prefix.to_string(), spec);
    Ok(())
}

/// `x-inert-when`: a list of `{"path": ..., "in": [values]}`.
fn parse_inert_when(prefix: &str, node: &Value) -> Result<Vec<InertCondition>, String> {
    let Some(list) = node.get("x-inert-when") else { return Ok(vec![]) };
    let bad = || format!("{prefix}: x-inert-when must be a list of {{\"path\": \"a.b\", \"in\": [values]}}");
    list.as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|c| {
            let path = c.get("path").and_then(Value::as_str).ok_or_else(bad)?;
            let values = c.get("in").and_then(Value::as_array).filter(|v| !v.is_empty()).ok_or_else(bad)?;
            Ok(InertCondition { path: path.to_string(), values: values.clone() })
        })
        .collect()
}

fn parse_invariants(root: &Value, fields: &BTreeMap<String, FieldSpec>) -> Result<Vec<Invariant>, String> {
    let Some(list) = root.get("x-invariants") else { return Ok(vec![]) };
    let list = list.as_array().ok_or("x-invariants must be a list")?;
    let known = |p: &str| -> Result<String, String> {
        if fields.contains_key(p) { Ok(p.to_string()) } else { Err(format!("x-invariants names unknown field {p}")) }
    };
    list.iter()
        .enumerate()
        .map(|(i, rule)| {
            let left = rule
                .get("left")
                .and_then(Value::as_str)
                .ok_or(format!("x-invariants[{i}].left must be a field path"))?;
            let op = rule
                .get("op")
                .and_then(Value::as_str)
                .and_then(Op::parse)
                .ok_or(format!("x-invariants[{i}].op must be one of < <= > >= == !="))?;
            let right = match rule.get("right") {
                Some(Value::String(p)) => Operand::Path(known(p)?),
                Some(Value::Number(n)) => Operand::Number(n.as_f64().unwrap_or(f64::NAN)),
                _ => return Err(format!("x-invariants[{i}].right must be a field path or a number")),
            };
            let why = rule.get("why").and_then(Value::as_str).unwrap_or("").to_string();
            Ok(Invariant { left: known(left)?, op, right, why })
        })
        .collect()
}

fn parse_symptoms(
    root: &Value,
    fields: &BTreeMap<String, FieldSpec>,
) -> Result<BTreeMap<String, Vec<SymptomLink>>, String> {
    let mut out = BTreeMap::new();
    let Some(map) = root.get("x-symptoms") else { return Ok(out) };
    let map = map.as_object().ok_or("x-symptoms must be a mapping of Layer A label -> list")?;
    for (label, links) in map {
        let links = links.as_array().ok_or(format!("x-symptoms.{label} must be a list"))?;
        let mut parsed = Vec::new();
        for (i, link) in links.iter().enumerate() {
            let path =
                link.get("path").and_then(Value::as_str).ok_or(format!("x-symptoms.{label}[{i}].path missing"))?;
            let field = fields.get(path).ok_or(format!("x-symptoms.{label}[{i}] names unknown field {path}"))?;
            if !field.evolvable {
                return Err(format!("x-symptoms.{label}[{i}] names {path}, which is not x-evolvable"));
            }
            let direction =
                link.get("direction").and_then(Value::as_str).and_then(Direction::parse).ok_or(format!(
                    "x-symptoms.{label}[{i}].direction must be increase, decrease, toggle or rewrite"
                ))?;
            parsed.push(SymptomLink { path: path.to_string(), direction });
        }
        out.insert(label.clone(), parsed);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_schema_loads_with_enough_evolvable_dimensions_in_every_stage() {
        let schema = StrategySchema::builtin();
        let evolvable: Vec<&str> = schema.evolvable().map(|f| f.path.as_str()).collect();
        assert!(evolvable.len() >= 12, "{evolvable:?}");
        for stage in ["ingest.", "index.", "retrieve.", "assemble.", "answer."] {
            assert!(evolvable.iter().any(|p| p.starts_with(stage)), "no evolvable field in {stage}");
        }
        for locked in ["assemble.token_budget_ceiling", "judge.kind", "judge.f1_threshold"] {
            assert!(!schema.field(locked).unwrap().evolvable, "{locked} must be locked");
        }
        assert!(schema.invariants().iter().any(|i| i.to_string() == "retrieve.rerank_top_n <= retrieve.top_k"));
    }

    #[test]
    fn ref_fields_are_resolved() {
        let schema = StrategySchema::builtin();
        let f = schema.field("retrieve.intent_overrides.temporal.top_k_multiplier").unwrap();
        assert!(f.evolvable);
        assert_eq!(f.maximum, Some(4.0));
    }

    #[test]
    fn symptom_links_must_name_evolvable_fields() {
        let text = r#"{"type":"object","properties":{"a":{"type":"integer"}},
            "x-symptoms":{"retrieval_gap":[{"path":"a","direction":"increase"}]}}"#;
        let err = StrategySchema::from_str("t", text).unwrap_err();
        assert!(err.to_string().contains("not x-evolvable"), "{err}");
    }

    #[test]
    fn paths_get_and_set() {
        let mut v = serde_json::json!({"a": {"b": 1}});
        assert_eq!(get_path(&v, "a.b"), Some(&serde_json::json!(1)));
        assert_eq!(set_path(&mut v, "a.b", serde_json::json!(2)), Some(serde_json::json!(1)));
        assert_eq!(set_path(&mut v, "a.c", serde_json::json!(2)), None);
        assert_eq!(get_path(&v, "a.b"), Some(&serde_json::json!(2)));
    }

    #[test]
    fn paths_and_nouns_read_as_each_dialect_writes_them() {
        assert_eq!(Dialect::Json.path(""), "");
        assert_eq!(Dialect::Json.path("/correct"), "correct");
        assert_eq!(Dialect::Json.path("/evidence_trace/0/retrieved"), "evidence_trace[0].retrieved");
        assert_eq!(Dialect::Yaml.path(""), "(root)");
        assert_eq!(Dialect::Yaml.path("/retrieve/weights/a~1b"), "retrieve.weights.a/b");
        assert_eq!(Dialect::Yaml.child("(root)", "k"), "k");
        assert_eq!(Dialect::Json.child("", "k"), "k");
        assert_eq!(Dialect::Json.child("a[0]", "k"), "a[0].k");
        assert_eq!(Dialect::Json.describe(&Value::from("yes")), "the string \"yes\"");
        assert_eq!(Dialect::Yaml.describe(&Value::from("yes")), "a string (\"yes\")");
        assert_eq!(Dialect::Yaml.describe(&serde_json::json!([])), "a sequence");
        assert_eq!(Dialect::Json.type_name("integer"), "an integer");
    }
}
