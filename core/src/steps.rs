//! Moves of at most one step: the step box around a strategy (numbers
//! within their `x-max-delta`), snapping a drawn strategy to the `x-step`
//! grid through the served value, stepping toward a target, the consensus of
//! the best strategies scored, and the changes between two strategies. Both
//! search proposers (the confirmed jump and the step search) use them.

use serde_json::Value;

use crate::planner::Change;
use crate::schema::{FieldKind, StrategySchema, get_path, set_path};
use crate::search::{self, Domain, Point, Space};

/// `space` without the options a missing model needs and, when `narrow`,
/// narrowed to one step around `doc`: numbers within `x-max-delta` of their
/// current value.
pub fn step_box(schema: &StrategySchema, space: Space, doc: &Value, roles: &[String], narrow: bool) -> Space {
    let params = space
        .params
        .into_iter()
        .filter_map(|mut p| {
            let field = schema.field(&p.path)?;
            let current = get_path(doc, &p.path)?;
            match &mut p.domain {
                Domain::Int { .. } | Domain::Float { .. } if !narrow => Some(p),
                Domain::Int { low, high } => {
                    let (x, d) = (current.as_f64()?, field.max_delta.unwrap_or(f64::INFINITY));
                    *low = (*low).max((x - d).ceil() as i64);
                    *high = (*high).min((x + d).floor() as i64);
                    (low < high).then_some(p)
                }
                Domain::Float { low, high } => {
                    let (x, d) = (current.as_f64()?, field.max_delta.unwrap_or(f64::INFINITY));
                    *low = low.max(x - d);
                    *high = high.min(x + d);
                    (low < high).then_some(p)
                }
                Domain::Categorical(options) => {
                    if let Some(model) = &field.needs_model
                        && !roles.contains(model)
                    {
                        options.retain(|o| o.as_str() != Some(model.as_str()));
                    }
                    (options.len() > 1).then_some(p)
                }
            }
        })
        .collect();
    Space { params }
}

/// `point` with at most `keep` of its coordinates (a seeded choice) taken
/// from the sampler and the rest left at `current`: a candidate that moves a
/// few fields can be told from noise, one that moves all of them rarely can.
pub fn sparse(point: &[f64], current: &[f64], seed: u64, keep: usize) -> Vec<f64> {
    use rand::SeedableRng;
    use rand::seq::SliceRandom;
    let mut rng = rand::rngs::ChaCha8Rng::seed_from_u64(seed);
    let mut moved: Vec<usize> = (0..point.len()).filter(|&i| point[i] != current[i]).collect();
    moved.shuffle(&mut rng);
    let mut out = current.to_vec();
    for &i in moved.iter().take(keep.max(1)) {
        out[i] = point[i];
    }
    out
}

/// Numbers rounded to their `x-step` grid through the served value, so a
/// reviewer reads `0.85`, not `0.8731...`, and `700`, not `672`.
pub fn snap(schema: &StrategySchema, served: &Value, doc: &mut Value, space: &Space) {
    for p in &space.params {
        let (low, high) = match p.domain {
            Domain::Float { low, high } => (low, high),
            Domain::Int { low, high } => (low as f64, high as f64),
            Domain::Categorical(_) => continue,
        };
        let (Some(step), Some(x0)) =
            (schema.field(&p.path).and_then(|f| f.step), get_path(served, &p.path).and_then(Value::as_f64))
        else {
            continue;
        };
        let Some(x) = get_path(doc, &p.path).and_then(Value::as_f64) else { continue };
        let mut y = x0 + ((x - x0) / step).round() * step;
        if y < low - 1e-9 {
            y += step;
        }
        if y > high + 1e-9 {
            y -= step;
        }
        let y = (y * 1e9).round() / 1e9;
        let value = if (y - x0).abs() < 1e-12 {
            get_path(served, &p.path).cloned().unwrap_or(Value::from(y))
        } else if matches!(p.domain, Domain::Int { .. }) {
            Value::from(y.round() as i64)
        } else {
            Value::from(y)
        };
        set_path(doc, &p.path, value);
    }
}

/// The strategy one step (`fraction` of each field's `x-max-delta`) from
/// `served` toward `target` in every field of `far`: numbers move by at most
/// that much, options take the target's value; snapped to the `x-step` grid
/// and repaired to the invariants. A point the sampler found far away is
/// reached this way, a step at a time, each step tested on its own.
pub fn toward(schema: &StrategySchema, far: &Space, served: &Value, target: &Value, fraction: f64) -> Option<Value> {
    let mut doc = served.clone();
    for p in &far.params {
        let b = get_path(target, &p.path)?;
        let value = match &p.domain {
            Domain::Categorical(_) => b.clone(),
            Domain::Int { .. } | Domain::Float { .. } => {
                let (a, b) = (get_path(served, &p.path)?.as_f64()?, b.as_f64()?);
                let d = schema.field(&p.path).and_then(|f| f.max_delta).unwrap_or(f64::INFINITY) * fraction;
                let x = a + (b - a).clamp(-d, d);
                if matches!(p.domain, Domain::Int { .. }) { Value::from(x.round() as i64) } else { Value::from(x) }
            }
        };
        set_path(&mut doc, &p.path, value);
    }
    snap(schema, served, &mut doc, far);
    search::repair(schema, &mut doc).ok()?;
    Some(doc)
}

/// The last accepted step taken again: every evolvable number of `served`
/// moved by as much as it moved from `parent` (options stay).
pub fn ahead(schema: &StrategySchema, served: &Value, parent: &Value) -> Value {
    let mut doc = served.clone();
    for f in schema.evolvable().filter(|f| matches!(f.kind, FieldKind::Integer | FieldKind::Number)) {
        let (Some(a), Some(b)) =
            (get_path(parent, &f.path).and_then(Value::as_f64), get_path(served, &f.path).and_then(Value::as_f64))
        else {
            continue;
        };
        if a != b {
            let x = (b + (b - a)).clamp(f.minimum.unwrap_or(f64::MIN), f.maximum.unwrap_or(f64::MAX));
            let x = if f.kind == FieldKind::Integer { Value::from(x.round() as i64) } else { Value::from(x) };
            set_path(&mut doc, &f.path, x);
        }
    }
    doc
}

/// The centre of the best quarter (at least 3) of the strategies scored so
/// far: per field of `far`, the median of their numbers and the commonest of
/// their options (ties to the better-scored). One scout's score on a small
/// sample is mostly noise; where the best of many agree is a direction.
pub fn consensus(scored: &[(Point, f64)], far: &Space, served: &Value) -> Option<Value> {
    if scored.len() < 6 {
        return None;
    }
    let mut ranked: Vec<&(Point, f64)> = scored.iter().collect();
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
    let elite = &ranked[..(scored.len() / 4).max(3)];
    let mut doc = served.clone();
    for p in &far.params {
        let values: Vec<&Value> = elite.iter().filter_map(|(d, _)| d.get(&p.path)).collect();
        let value = match &p.domain {
            Domain::Categorical(_) => {
                let count = |v: &Value| values.iter().filter(|w| **w == v).count();
                (*values.iter().max_by_key(|v| (count(v), std::cmp::Reverse(values.iter().position(|w| w == *v))))?)
                    .clone()
            }
            Domain::Int { .. } | Domain::Float { .. } => {
                let mut xs: Vec<f64> = values.iter().filter_map(|v| v.as_f64()).collect();
                xs.sort_by(f64::total_cmp);
                let m = *xs.get(xs.len() / 2)?;
                if matches!(p.domain, Domain::Int { .. }) { Value::from(m.round() as i64) } else { Value::from(m) }
            }
        };
        set_path(&mut doc, &p.path, value);
    }
    Some(doc)
}

/// Every field whose value differs between `from` and `to`, as changes; the
/// plan's own field first when it moved, then by path.
pub fn changes_between(space: &Space, schema: &StrategySchema, from: &Value, to: &Value, first: &str) -> Vec<Change> {
    let mut paths: Vec<String> = space.params.iter().map(|p| p.path.clone()).collect();
    for inv in schema.invariants() {
        paths.push(inv.left.clone());
    }
    paths.sort();
    paths.dedup();
    let mut out: Vec<Change> = paths
        .into_iter()
        .filter_map(|path| {
            let (a, b) = (get_path(from, &path)?, get_path(to, &path)?);
            let same = a == b || (a.is_number() && a.as_f64() == b.as_f64());
            (!same).then(|| Change { path, from: a.clone(), to: b.clone() })
        })
        .collect();
    out.sort_by_key(|c| c.path != first);
    out
}

/// True when every numeric field of `to` is within its `x-max-delta` of `from`.
pub fn within_step(schema: &StrategySchema, changes: &[Change]) -> bool {
    changes.iter().all(|c| {
        let max = schema.field(&c.path).and_then(|f| f.max_delta);
        match (c.from.as_f64(), c.to.as_f64(), max) {
            (Some(a), Some(b), Some(m)) => (b - a).abs() <= m + 1e-9,
            _ => true,
        }
    })
}
