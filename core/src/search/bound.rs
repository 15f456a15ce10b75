//! Whether a move at a bound is worth escalating.
//!
//! A direction that runs into its field's range may deserve a wider range (an
//! escalation to the user). Two cases do not: the field already sits at a
//! value the schema declares as "off" (`x-off`, e.g.
//! `retrieve.recency_half_life_days: 0` means no decay, so "decrease" has
//! nothing left to do), or the bound is a locked limit (an `x-invariants` rule
//! against a locked field or a constant, such as the token ceiling).

use serde_json::Value;

use crate::schema::{Direction, Op, Operand, StrategySchema, get_path};

/// Where a field stands for a move in one direction.
#[derive(Debug, Clone, PartialEq)]
pub enum BoundState {
    /// The move has room.
    Free,
    /// At the schema's own minimum or maximum: a wider range might help (may be escalated).
    AtRange { bound: f64 },
    /// At the field's `x-off` value, moving further "off": nothing to try, not escalated.
    Off { value: f64 },
    /// At a limit set by a locked field or a constant (`rule`): not escalated.
    AtLockedLimit { rule: String },
}

/// The schema node of a dotted path, following local `$ref`s.
fn node<'a>(root: &'a Value, path: &str) -> Option<&'a Value> {
    let deref = |n: &'a Value| -> &'a Value {
        match n.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix('#')) {
            Some(pointer) => root.pointer(pointer).unwrap_or(n),
            None => n,
        }
    };
    let mut n = root;
    for seg in path.split('.') {
        n = deref(n).get("properties")?.get(seg)?;
    }
    Some(n)
}

/// The field's declared "off" value (`x-off`), beside a `$ref` or in its target.
pub fn off_value(schema: &StrategySchema, path: &str) -> Option<f64> {
    let n = node(schema.raw(), path)?;
    n.get("x-off").and_then(Value::as_f64).or_else(|| {
        let target = n.get("$ref").and_then(Value::as_str)?.strip_prefix('#')?;
        schema.raw().pointer(target)?.get("x-off").and_then(Value::as_f64)
    })
}

/// Where `path` stands in `doc` for a move in `direction` (increase or decrease;
/// toggles and rewrites are always free).
pub fn bound_state(schema: &StrategySchema, doc: &Value, path: &str, direction: Direction) -> BoundState {
    let (Some(field), Some(x)) = (schema.field(path), get_path(doc, path).and_then(Value::as_f64)) else {
        return BoundState::Free;
    };
    let up = match direction {
        Direction::Increase => true,
        Direction::Decrease => false,
        Direction::Toggle | Direction::Rewrite => return BoundState::Free,
    };
    let range_bound = if up { field.maximum } else { field.minimum };
    if let Some(off) = off_value(schema, path) {
        let further_off = if up { x >= off } else { x <= off };
        if further_off && range_bound == Some(x) {
            return BoundState::Off { value: off };
        }
    }
    for inv in schema.invariants().iter().filter(|i| i.left == path) {
        let limit = match &inv.right {
            Operand::Number(n) => *n,
            Operand::Path(p) if !schema.field(p).is_some_and(|f| f.evolvable) => {
                match get_path(doc, p).and_then(Value::as_f64) {
                    Some(v) => v,
                    None => continue,
                }
            }
            Operand::Path(_) => continue,
        };
        let step = field.step.unwrap_or(1.0);
        let blocked = match inv.op {
            Op::Le => up && x >= limit,
            Op::Lt => up && x + step >= limit,
            Op::Ge => !up && x <= limit,
            Op::Gt => !up && x - step <= limit,
            Op::Eq | Op::Ne => false,
        };
        if blocked {
            return BoundState::AtLockedLimit { rule: inv.to_string() };
        }
    }
    match range_bound {
        Some(b) if (up && x >= b) || (!up && x <= b) => BoundState::AtRange { bound: b },
        _ => BoundState::Free,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::set_path;
    use crate::search::space::tests::default_doc;

    #[test]
    fn recency_at_zero_is_off_not_a_range_problem() {
        let schema = StrategySchema::builtin();
        let doc = default_doc();
        assert_eq!(off_value(&schema, "retrieve.recency_half_life_days"), Some(0.0));
        let p = "retrieve.recency_half_life_days";
        assert_eq!(bound_state(&schema, &doc, p, Direction::Decrease), BoundState::Off { value: 0.0 });
        assert_eq!(bound_state(&schema, &doc, p, Direction::Increase), BoundState::Free);
        assert_eq!(
            bound_state(&schema, &doc, "retrieve.rerank_top_n", Direction::Decrease),
            BoundState::Off { value: 0.0 }
        );
    }

    #[test]
    fn the_locked_ceiling_and_the_schema_range_are_told_apart() {
        let schema = StrategySchema::builtin();
        let mut doc = default_doc();
        set_path(&mut doc, "assemble.token_budget", Value::from(2000)).unwrap();
        assert_eq!(
            bound_state(&schema, &doc, "assemble.token_budget", Direction::Increase),
            BoundState::AtLockedLimit { rule: "assemble.token_budget <= assemble.token_budget_ceiling".into() }
        );
        set_path(&mut doc, "retrieve.pool", Value::from(500)).unwrap();
        assert_eq!(
            bound_state(&schema, &doc, "retrieve.pool", Direction::Increase),
            BoundState::AtRange { bound: 500.0 }
        );
        // A field without x-off at its minimum is a range matter (it may be escalated).
        set_path(&mut doc, "index.bm25_b", Value::from(0.0)).unwrap();
        assert_eq!(bound_state(&schema, &doc, "index.bm25_b", Direction::Decrease), BoundState::AtRange { bound: 0.0 });
        assert_eq!(off_value(&schema, "index.bm25_b"), None);
        assert_eq!(bound_state(&schema, &doc, "assemble.order", Direction::Toggle), BoundState::Free);
    }
}
