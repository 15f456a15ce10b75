//! Line search along a direction, and bundles of fields that move together.
//!
//! A [`Move`] names a field and a direction; a bundle is several moves taken
//! at once. [`line_points`] turns a bundle into strategies at several step
//! sizes: each numeric field moves by `m * x-step` for every multiplier `m`,
//! never more than its `x-max-delta` and never outside its range; enums and
//! booleans move to their next option. Each point is repaired against the
//! invariants, and points that repair back to the start or repeat an earlier
//! point are dropped, so every point returned is a distinct, valid change.
//!
//! [`invariant_bundle`] adds the moves a move needs to survive repair (raising
//! `rerank_top_n` past `top_k` needs `top_k` raised too, and so on up the
//! chain). [`bundles`] pairs the numeric fields that the observed Layer A
//! labels implicate together (the schema's `x-symptoms`), e.g. `top_k` with
//! `token_budget` when both `retrieval_gap` and `kf_filtered` (the budget
//! binds) are observed.

use serde_json::Value;

use super::space::{SpaceError, repair};
use crate::schema::{Direction, FieldKind, Op, Operand, StrategySchema, get_path, set_path};

/// One field moved one way.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Move {
    pub path: String,
    pub direction: Direction,
}

impl Move {
    pub fn new(path: impl Into<String>, direction: Direction) -> Self {
        Move { path: path.into(), direction }
    }
}

fn moved(schema: &StrategySchema, doc: &Value, mv: &Move, m: f64) -> Result<Option<Value>, SpaceError> {
    let field = schema
        .field(&mv.path)
        .filter(|f| f.evolvable)
        .ok_or_else(|| SpaceError { path: mv.path.clone(), message: "not an evolvable field".into() })?;
    let current =
        get_path(doc, &mv.path).ok_or_else(|| SpaceError { path: mv.path.clone(), message: "missing".into() })?;
    let value = match (&field.kind, mv.direction) {
        (FieldKind::Integer | FieldKind::Number, Direction::Increase | Direction::Decrease) => {
            let x =
                current.as_f64().ok_or_else(|| SpaceError { path: mv.path.clone(), message: "not a number".into() })?;
            let (step, max_delta) = (field.step.unwrap_or(1.0), field.max_delta.unwrap_or(f64::INFINITY));
            let sign = if mv.direction == Direction::Increase { 1.0 } else { -1.0 };
            let delta = (m * step).min(max_delta);
            let y = (x + sign * delta)
                .clamp(field.minimum.unwrap_or(f64::NEG_INFINITY), field.maximum.unwrap_or(f64::INFINITY));
            if field.kind == FieldKind::Integer { Value::from(y.round() as i64) } else { Value::from(y) }
        }
        (FieldKind::Boolean, Direction::Toggle) => Value::Bool(!current.as_bool().unwrap_or(false)),
        (FieldKind::Enum(options), Direction::Toggle) => {
            let i = options.iter().position(|o| current.as_str() == Some(o.as_str())).unwrap_or(0);
            Value::String(options[(i + 1) % options.len()].clone())
        }
        _ => return Ok(None),
    };
    let mut out = doc.clone();
    set_path(&mut out, &mv.path, value);
    Ok(Some(out))
}

/// The bundle applied at each multiplier, repaired; duplicates and no-ops dropped.
pub fn line_points(
    schema: &StrategySchema,
    doc: &Value,
    bundle: &[Move],
    multipliers: &[f64],
) -> Result<Vec<(f64, Value)>, SpaceError> {
    let mut out: Vec<(f64, Value)> = Vec::new();
    for &m in multipliers {
        let mut point = doc.clone();
        for mv in bundle {
            if let Some(p) = moved(schema, &point, mv, m)? {
                point = p;
            }
        }
        repair(schema, &mut point)?;
        if point != *doc && out.iter().all(|(_, p)| *p != point) {
            out.push((m, point));
        }
    }
    Ok(out)
}

/// `mv` plus the moves of evolvable right-hand sides it would otherwise run
/// into (`left <= right` or `left < right`, left increasing), transitively.
pub fn invariant_bundle(schema: &StrategySchema, mv: &Move) -> Vec<Move> {
    let mut out = vec![mv.clone()];
    let mut i = 0;
    while i < out.len() {
        let cur = out[i].clone();
        if cur.direction == Direction::Increase {
            for inv in schema.invariants().iter().filter(|inv| inv.left == cur.path) {
                if let (Op::Le | Op::Lt, Operand::Path(right)) = (inv.op, &inv.right)
                    && schema.field(right).is_some_and(|f| f.evolvable)
                    && !out.iter().any(|m| &m.path == right)
                {
                    out.push(Move::new(right.clone(), Direction::Increase));
                }
            }
        }
        i += 1;
    }
    out
}

/// Pairs of numeric moves implicated by the observed labels, in a stable order
/// (each pair sorted, pairs sorted, no field paired with itself).
pub fn bundles(schema: &StrategySchema, labels: &[&str]) -> Vec<[Move; 2]> {
    let mut moves: Vec<Move> = labels
        .iter()
        .filter_map(|l| schema.symptoms().get(*l))
        .flatten()
        .filter(|link| matches!(link.direction, Direction::Increase | Direction::Decrease))
        .map(|link| Move::new(link.path.clone(), link.direction))
        .collect();
    moves.sort();
    moves.dedup();
    let mut out = Vec::new();
    for (i, a) in moves.iter().enumerate() {
        for b in &moves[i + 1..] {
            if a.path != b.path {
                out.push([a.clone(), b.clone()]);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::space::tests::default_doc;

    #[test]
    fn step_sizes_respect_max_delta_range_and_invariants() {
        let schema = StrategySchema::builtin();
        let doc = default_doc(); // top_k 5, pool 50, token_budget 300, ceiling 2000
        let pts =
            line_points(&schema, &doc, &[Move::new("retrieve.top_k", Direction::Increase)], &[1.0, 2.0, 4.0, 8.0])
                .unwrap();
        let ks: Vec<i64> = pts.iter().map(|(_, p)| get_path(p, "retrieve.top_k").unwrap().as_i64().unwrap()).collect();
        // step 2, max delta 10: 7, 9, 13, then 8 x 2 = 16 capped at 10 -> 15.
        assert_eq!(ks, vec![7, 9, 13, 15]);
        let budget =
            line_points(&schema, &doc, &[Move::new("assemble.token_budget", Direction::Increase)], &[1.0, 4.0, 100.0])
                .unwrap();
        let b: Vec<i64> =
            budget.iter().map(|(_, p)| get_path(p, "assemble.token_budget").unwrap().as_i64().unwrap()).collect();
        assert_eq!(b, vec![400, 700], "the max delta (400) caps the step, and 100x repeats 4x so it is dropped");
        for (_, p) in pts.iter().chain(&budget) {
            assert!(schema.check(p).is_empty(), "{:?}", schema.check(p));
        }
    }

    #[test]
    fn a_bundle_moves_co_implicated_fields_together_and_repair_keeps_the_ceiling() {
        let schema = StrategySchema::builtin();
        let mut doc = default_doc();
        set_path(&mut doc, "assemble.token_budget", Value::from(1900)).unwrap();
        let bundle =
            [Move::new("retrieve.top_k", Direction::Increase), Move::new("assemble.token_budget", Direction::Increase)];
        let pts = line_points(&schema, &doc, &bundle, &[1.0, 3.0]).unwrap();
        assert_eq!(pts.len(), 2);
        for (_, p) in &pts {
            assert_eq!(get_path(p, "assemble.token_budget"), Some(&Value::from(2000)));
            assert!(schema.check(p).is_empty());
        }
        let pairs = bundles(&schema, &["retrieval_gap", "kf_filtered"]);
        assert!(pairs.contains(&[
            Move::new("assemble.token_budget", Direction::Increase),
            Move::new("retrieve.top_k", Direction::Increase)
        ]));
        assert!(bundles(&schema, &["no_such_label"]).is_empty());
    }

    #[test]
    fn raising_the_head_of_a_chain_raises_what_it_would_hit() {
        let schema = StrategySchema::builtin();
        let b = invariant_bundle(&schema, &Move::new("retrieve.rerank_top_n", Direction::Increase));
        let paths: Vec<&str> = b.iter().map(|m| m.path.as_str()).collect();
        assert_eq!(paths, vec!["retrieve.rerank_top_n", "retrieve.top_k", "retrieve.pool"]);
        // The locked ceiling is not moved.
        let b = invariant_bundle(&schema, &Move::new("assemble.token_budget", Direction::Increase));
        assert_eq!(b.len(), 1);
        // Toggles move to the next option.
        let doc = default_doc();
        let pts = line_points(&schema, &doc, &[Move::new("assemble.order", Direction::Toggle)], &[1.0, 2.0]).unwrap();
        assert_eq!(pts.len(), 1);
        assert_eq!(get_path(&pts[0].1, "assemble.order"), Some(&Value::from("chronological")));
    }
}
