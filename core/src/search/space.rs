//! The search space: the schema's evolvable fields as parameters a sampler
//! can draw (integers, numbers, enums, booleans; prompts are left to the
//! model proposer), and the repair that makes a drawn point a valid strategy.
//!
//! Ranges come from the schema's `minimum` / `maximum`, tightened by every
//! `x-invariants` rule whose left side is the field and whose right side is a
//! constant or a locked field of the current strategy (so
//! `assemble.token_budget <= assemble.token_budget_ceiling` caps the budget's
//! range at the locked ceiling). `x-step` is the *mutation* step (line search
//! uses it); the sampler draws integers on the integer grid and numbers
//! continuously within the range, as Optuna's TPE baseline does.

use serde_json::Value;

use crate::schema::{FieldKind, Op, Operand, StrategySchema, fmt_num, get_path, set_path};

/// What values a parameter takes.
#[derive(Debug, Clone, PartialEq)]
pub enum Domain {
    Int {
        low: i64,
        high: i64,
    },
    Float {
        low: f64,
        high: f64,
    },
    /// Enum options, or `[false, true]` for a boolean.
    Categorical(Vec<Value>),
}

/// One evolvable field.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub path: String,
    pub domain: Domain,
}

/// The parameters, in path order. A point is one `f64` per parameter: the value
/// for numbers, the option's index for categoricals.
#[derive(Debug, Clone, PartialEq)]
pub struct Space {
    pub params: Vec<Param>,
}

/// A space or a point that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct SpaceError {
    pub path: String,
    pub message: String,
}

fn err(path: &str, message: impl Into<String>) -> SpaceError {
    SpaceError { path: path.to_string(), message: message.into() }
}

impl Space {
    /// Every evolvable non-text field of `schema` (or only those in `only`, when
    /// given), with ranges tightened by the invariants against `doc`'s locked fields.
    pub fn from_schema(schema: &StrategySchema, doc: &Value, only: Option<&[&str]>) -> Result<Space, SpaceError> {
        let mut params = Vec::new();
        for f in schema.evolvable() {
            if only.is_some_and(|o| !o.contains(&f.path.as_str())) {
                continue;
            }
            let domain = match &f.kind {
                FieldKind::Text => continue,
                FieldKind::Boolean => Domain::Categorical(vec![Value::Bool(false), Value::Bool(true)]),
                FieldKind::Enum(options) => Domain::Categorical(options.iter().cloned().map(Value::String).collect()),
                FieldKind::Integer | FieldKind::Number => {
                    let (Some(mut low), Some(mut high)) = (f.minimum, f.maximum) else {
                        return Err(err(&f.path, "an evolvable number needs minimum and maximum to be searched"));
                    };
                    let int = f.kind == FieldKind::Integer;
                    for inv in schema.invariants().iter().filter(|i| i.left == f.path) {
                        let bound = match &inv.right {
                            Operand::Number(n) => *n,
                            Operand::Path(p) if !schema.field(p).is_some_and(|r| r.evolvable) => {
                                match get_path(doc, p).and_then(Value::as_f64) {
                                    Some(v) => v,
                                    None => return Err(err(p, "locked field missing from the strategy")),
                                }
                            }
                            Operand::Path(_) => continue,
                        };
                        let strict = if int { 1.0 } else { f.step.unwrap_or(0.0).max(f64::EPSILON) };
                        match inv.op {
                            Op::Le => high = high.min(bound),
                            Op::Lt => high = high.min(bound - strict),
                            Op::Ge => low = low.max(bound),
                            Op::Gt => low = low.max(bound + strict),
                            Op::Eq | Op::Ne => {}
                        }
                    }
                    if low > high {
                        return Err(err(&f.path, format!("empty range [{}, {}]", fmt_num(low), fmt_num(high))));
                    }
                    if int {
                        Domain::Int { low: low.ceil() as i64, high: high.floor() as i64 }
                    } else {
                        Domain::Float { low, high }
                    }
                }
            };
            params.push(Param { path: f.path.clone(), domain });
        }
        Ok(Space { params })
    }

    /// The point of `doc` (its current values).
    pub fn encode(&self, doc: &Value) -> Result<Vec<f64>, SpaceError> {
        self.params
            .iter()
            .map(|p| {
                let v = get_path(doc, &p.path).ok_or_else(|| err(&p.path, "missing from the strategy"))?;
                match &p.domain {
                    Domain::Int { .. } | Domain::Float { .. } => {
                        v.as_f64().ok_or_else(|| err(&p.path, format!("expected a number, got {v}")))
                    }
                    Domain::Categorical(options) => options
                        .iter()
                        .position(|o| o == v)
                        .map(|i| i as f64)
                        .ok_or_else(|| err(&p.path, format!("{v} is not one of the options"))),
                }
            })
            .collect()
    }

    /// `doc` with the point's values written in.
    pub fn decode(&self, doc: &Value, point: &[f64]) -> Result<Value, SpaceError> {
        let mut out = doc.clone();
        for (p, &x) in self.params.iter().zip(point) {
            let v = match &p.domain {
                Domain::Int { low, high } => Value::from((x.round() as i64).clamp(*low, *high)),
                Domain::Float { low, high } => Value::from(x.clamp(*low, *high)),
                Domain::Categorical(options) => options[(x.round().max(0.0) as usize).min(options.len() - 1)].clone(),
            };
            // An unchanged number keeps its spelling (60 stays 60, not 60.0).
            let same =
                get_path(&out, &p.path).is_some_and(|old| old == &v || (old.is_number() && old.as_f64() == v.as_f64()));
            if !same {
                set_path(&mut out, &p.path, v).ok_or_else(|| err(&p.path, "missing from the strategy"))?;
            }
        }
        Ok(out)
    }
}

/// One change the repair made.
#[derive(Debug, Clone, PartialEq)]
pub struct Repaired {
    pub path: String,
    pub from: f64,
    pub to: f64,
    /// The invariant, as written (`retrieve.top_k <= retrieve.pool`).
    pub rule: String,
}

/// Makes `doc` satisfy the schema's `x-invariants` by moving the left side of
/// each broken rule to the nearest value that holds (within the field's own
/// range), repeating until nothing changes, so chains such as
/// `rerank_top_n <= top_k <= pool` settle. The right side is never moved: a
/// locked ceiling stays where it is. Returns what changed; an error when a
/// rule cannot be satisfied by moving its left side.
pub fn repair(schema: &StrategySchema, doc: &mut Value) -> Result<Vec<Repaired>, SpaceError> {
    let mut changes = Vec::new();
    for _pass in 0..=schema.invariants().len() {
        let mut changed = false;
        for inv in schema.invariants() {
            let Some((a, b)) = inv.sides(doc) else { continue };
            if inv.op.holds(a, b) {
                continue;
            }
            let field = schema.field(&inv.left).ok_or_else(|| err(&inv.left, "unknown field"))?;
            if !field.evolvable {
                return Err(err(&inv.left, format!("locked field breaks {inv}")));
            }
            let int = field.kind == FieldKind::Integer;
            let strict = if int { 1.0 } else { field.step.unwrap_or(1e-9) };
            let to = match inv.op {
                Op::Lt => b - strict,
                Op::Le | Op::Eq => b,
                Op::Gt => b + strict,
                Op::Ge => b,
                Op::Ne => a + strict,
            };
            let to = if int { to.round() } else { to };
            let (lo, hi) = (field.minimum.unwrap_or(f64::NEG_INFINITY), field.maximum.unwrap_or(f64::INFINITY));
            if to < lo || to > hi {
                return Err(err(&inv.left, format!("cannot satisfy {inv}: {} is outside [{lo}, {hi}]", fmt_num(to))));
            }
            let value = if int { Value::from(to as i64) } else { Value::from(to) };
            set_path(doc, &inv.left, value);
            changes.push(Repaired { path: inv.left.clone(), from: a, to, rule: inv.to_string() });
            changed = true;
        }
        if !changed {
            return Ok(changes);
        }
    }
    Err(err("(root)", "x-invariants did not settle: the rules contradict each other"))
}

/// A strategy's values of the evolvable fields, by path.
pub type Point = std::collections::BTreeMap<String, Value>;

/// `doc`'s evolvable, non-text field values.
pub fn point_of(schema: &StrategySchema, doc: &Value) -> Point {
    schema
        .evolvable()
        .filter(|f| f.kind != FieldKind::Text)
        .filter_map(|f| Some((f.path.clone(), get_path(doc, &f.path)?.clone())))
        .collect()
}

/// `served` with `point`'s values.
pub fn materialize(served: &Value, point: &Point) -> Value {
    let mut doc = served.clone();
    for (path, value) in point {
        set_path(&mut doc, path, value.clone());
    }
    doc
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn default_doc() -> Value {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../strategies/default.yaml")).unwrap();
        serde_yaml::from_str(&text).unwrap()
    }

    #[test]
    fn the_builtin_space_covers_the_non_text_evolvable_fields_with_tightened_ranges() {
        let schema = StrategySchema::builtin();
        let doc = default_doc();
        let space = Space::from_schema(&schema, &doc, None).unwrap();
        let texts = schema.evolvable().filter(|f| f.kind == FieldKind::Text).count();
        assert_eq!(space.params.len() + texts, schema.evolvable().count());
        let budget = space.params.iter().find(|p| p.path == "assemble.token_budget").unwrap();
        assert_eq!(budget.domain, Domain::Int { low: 50, high: 2000 }, "capped at the locked ceiling");
        let terms = space.params.iter().find(|p| p.path == "retrieve.expansion.terms").unwrap();
        assert_eq!(terms.domain, Domain::Int { low: 1, high: 20 });
        let point = space.encode(&doc).unwrap();
        assert_eq!(space.decode(&doc, &point).unwrap(), doc);
        let only = Space::from_schema(&schema, &doc, Some(&["retrieve.top_k", "assemble.order"])).unwrap();
        assert_eq!(only.params.len(), 2);
    }

    #[test]
    fn repair_settles_chains_and_respects_the_locked_ceiling() {
        let schema = StrategySchema::builtin();
        let mut doc = default_doc();
        for (p, v) in [
            ("retrieve.rerank_top_n", Value::from(150)),
            ("retrieve.top_k", Value::from(120)),
            ("retrieve.pool", Value::from(40)),
            ("ingest.window_size", Value::from(3)),
            ("ingest.window_overlap", Value::from(7)),
            ("assemble.token_budget", Value::from(5000)),
        ] {
            set_path(&mut doc, p, v).unwrap();
        }
        let changes = repair(&schema, &mut doc).unwrap();
        assert!(schema.check_invariants(&doc).is_empty(), "{:?}", schema.check_invariants(&doc));
        assert_eq!(get_path(&doc, "retrieve.top_k"), Some(&Value::from(40)));
        assert_eq!(get_path(&doc, "retrieve.rerank_top_n"), Some(&Value::from(40)));
        assert_eq!(get_path(&doc, "ingest.window_overlap"), Some(&Value::from(2)));
        assert_eq!(get_path(&doc, "assemble.token_budget"), Some(&Value::from(2000)));
        assert_eq!(get_path(&doc, "assemble.token_budget_ceiling"), Some(&Value::from(2000)));
        assert!(changes.iter().any(|c| c.rule == "retrieve.top_k <= retrieve.pool"));
        assert!(schema.check(&doc).is_empty(), "{:?}", schema.check(&doc));
    }

    #[test]
    fn a_locked_field_that_breaks_a_rule_is_named() {
        let schema = StrategySchema::from_str(
            "t",
            r#"{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer","minimum":0,"maximum":9,"x-evolvable":true,"x-step":1,"x-max-delta":1}},
               "x-invariants":[{"left":"a","op":"<=","right":"b"}]}"#,
        )
        .unwrap();
        let mut doc = serde_json::json!({"a": 5, "b": 2});
        assert_eq!(repair(&schema, &mut doc).unwrap_err().path, "a");
    }
}
