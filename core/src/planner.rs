//! Improve: turn a diagnosis into ranked directions, and directions into
//! candidate strategies.
//!
//! The planner links Layer A symptoms to dimensions through the schema's
//! `x-symptoms`, scores each direction with its hypothesis node's UCB1 score
//! plus a small reputation prior, and the evolver moves one field per
//! candidate: a numeric step within `x-max-delta` (the largest allowed move
//! first, halved after each failure since the last success), or an enum or
//! boolean move. Deterministic: ties break on the hypothesis key.
//!
//! The round's [`Digest`] weighs the failures. A direction's actionability is
//! the share of failures its labels explain; when the digest compares the
//! served version with a previous one, each failure of a label counts
//! `1 + PERSIST_WEIGHT * persist / count + RISE_WEIGHT * rise / count` times
//! (`persist`: failures with the same label under the previous version;
//! `rise`: how much the label's count grew since then, zero when it fell),
//! in the explained failures and in the total alike. So with the same counts
//! now, a label whose failures persist, or whose count rose, outranks one
//! whose failures are new or being fixed (the tests
//! `persisting_failures_outrank_new_ones_with_the_same_counts` and
//! `a_rising_label_outranks_a_falling_one_with_the_same_counts`). The
//! generation splits (`source_only`, `full_coverage`) take the weight of
//! `generation_error`. Without a previous version (the first version, or no
//! digest) actionability is the plain share, as before.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::digest::Digest;
use crate::hypothesis::{self, Hypothesis};
use crate::layer_a::Diagnosis;
use crate::schema::{Direction, FieldKind, FieldSpec, StrategySchema, get_path, set_path};

/// What the journal knows about a dimension's past.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DimensionEffect {
    pub tried: u32,
    pub accepted: u32,
    /// Evaluated and rejected with a non-positive paired delta.
    pub reverted: u32,
    pub total_delta: f64,
}

impl DimensionEffect {
    /// Accepted changes raise it, reverts lower it.
    pub fn reputation(&self) -> f64 {
        f64::from(self.accepted) - 0.5 * f64::from(self.reverted)
    }
}

/// A direction worth trying, with why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    pub key: String,
    pub path: String,
    pub direction: Direction,
    /// Share of failures whose label implicates this direction.
    pub actionability: f64,
    pub ucb: f64,
    pub reputation: f64,
    pub score: f64,
    /// Label -> count of the failures that motivate it.
    pub motivation: BTreeMap<String, usize>,
}

/// Planner settings from the project configuration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlannerSettings {
    pub exploration: f64,
    /// Weight of the reputation prior (added as `weight * tanh(reputation)`).
    pub reputation_weight: f64,
}

impl Default for PlannerSettings {
    fn default() -> Self {
        PlannerSettings { exploration: 1.0, reputation_weight: 0.2 }
    }
}

/// Failures per symptom: the Layer A label counts, with generation errors
/// that have a split (`source_only`: ingest and extraction fields;
/// `full_coverage`: answer fields) counted under the split when the schema
/// links it, so each half motivates its own fields.
pub fn symptom_counts(schema: &StrategySchema, diagnosis: &Diagnosis) -> BTreeMap<String, usize> {
    let mut counts = diagnosis.counts.clone();
    let generation = crate::layer_a::Label::GenerationError.as_str();
    for (split, &n) in &diagnosis.splits {
        if !schema.symptoms().contains_key(split) {
            continue;
        }
        let g = counts.entry(generation.to_string()).or_default();
        let moved = n.min(*g);
        *g -= moved;
        *counts.entry(split.clone()).or_default() += moved;
    }
    counts
}

/// The extra weight of a failure whose label persists from the previous version.
pub const PERSIST_WEIGHT: f64 = 0.5;
/// The extra weight of each failure a label gained since the previous version.
pub const RISE_WEIGHT: f64 = 0.5;

/// Per label, the weight of one of its failures under the digest (see the
/// module comment); `None` when the digest compares with no previous version.
pub fn label_weights(digest: Option<&Digest>) -> Option<BTreeMap<String, f64>> {
    let d = digest.filter(|d| d.compared())?;
    let mut weights: BTreeMap<String, f64> = d
        .labels
        .iter()
        .filter(|(_, l)| l.count > 0)
        .map(|(label, l)| {
            let rise = l.rise().unwrap_or(0).max(0) as f64;
            let extra = PERSIST_WEIGHT * l.persist as f64 + RISE_WEIGHT * rise;
            (label.clone(), 1.0 + extra / l.count as f64)
        })
        .collect();
    let generation = crate::layer_a::Label::GenerationError.as_str();
    if let Some(&w) = weights.get(generation) {
        for split in [crate::layer_a::SOURCE_ONLY, crate::layer_a::FULL_COVERAGE] {
            weights.insert(split.to_string(), w);
        }
    }
    Some(weights)
}

/// Ranks every direction the diagnosis implicates. Closed nodes (refuted,
/// exhausted, escalated) are left out; everything else is ranked. The
/// digest weighs the failures as the module comment says.
pub fn plan(
    schema: &StrategySchema,
    diagnosis: &Diagnosis,
    digest: Option<&Digest>,
    tree: &BTreeMap<String, Hypothesis>,
    effects: &BTreeMap<String, DimensionEffect>,
    settings: PlannerSettings,
) -> Vec<Plan> {
    let weights = label_weights(digest);
    let weigh =
        |label: &str, count: usize| count as f64 * weights.as_ref().and_then(|w| w.get(label)).copied().unwrap_or(1.0);
    // (path, direction, label -> count, best position in a symptom's list)
    let mut motivations: BTreeMap<String, (String, Direction, BTreeMap<String, usize>, usize)> = BTreeMap::new();
    let counts = symptom_counts(schema, diagnosis);
    let failures = match &weights {
        Some(_) => counts.iter().map(|(l, &c)| weigh(l, c)).sum::<f64>().max(1.0),
        None => diagnosis.failures.max(1) as f64,
    };
    for (label, links) in schema.symptoms() {
        let count = counts.get(label).copied().unwrap_or(0);
        if count == 0 {
            continue;
        }
        for (position, link) in links.iter().enumerate() {
            let key = hypothesis::key(&link.path, link.direction);
            let entry = motivations
                .entry(key)
                .or_insert_with(|| (link.path.clone(), link.direction, BTreeMap::new(), position));
            entry.2.insert(label.clone(), count);
            entry.3 = entry.3.min(position);
        }
    }
    let total_visits: u32 = tree.values().map(|h| h.visits).sum();
    let mut plans: Vec<Plan> = motivations
        .into_iter()
        .filter(|(key, _)| tree.get(key).is_none_or(|h| h.status.open()))
        .map(|(key, (path, direction, motivation, position))| {
            let explained: f64 = motivation.iter().map(|(l, &c)| weigh(l, c)).sum();
            let actionability = (explained / failures).min(1.0);
            let ucb =
                tree.get(&key).map_or(f64::INFINITY, |h| h.ucb(total_visits, actionability, settings.exploration));
            let reputation = effects.get(&path).map_or(0.0, DimensionEffect::reputation);
            // Unvisited nodes tie at infinity: order them by actionability, then by
            // the schema author's order within the symptom's list (first = most likely).
            let score = if ucb.is_infinite() {
                1e6 + actionability - 1e-4 * position as f64
            } else {
                ucb + settings.reputation_weight * reputation.tanh()
            };
            Plan { key, path, direction, actionability, ucb, reputation, score, motivation }
        })
        .collect();
    plans.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.key.cmp(&b.key)));
    plans
}

/// What the evolver made of a direction.
#[derive(Debug, Clone, PartialEq)]
pub enum Proposal {
    /// A candidate document and its one change.
    Candidate { value: Box<Value>, change: Change },
    /// No legal move exists: the direction needs a change outside the strategy
    /// (a schema bound, a model role). The critic labels it out of scope.
    Blocked { reason: String },
    /// Another strategy field binds the move (an `x-invariants` rule): the
    /// direction is exhausted until the served strategy changes.
    Exhausted { reason: String },
}

/// One field's change.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub path: String,
    pub from: Value,
    pub to: Value,
}

/// Moves `plan.path` of `served` in `plan.direction`. `failures_since_success`
/// (the node's streak against) halves the numeric move each time.
pub fn evolve(
    schema: &StrategySchema,
    served: &Value,
    plan: &Plan,
    node: Option<&Hypothesis>,
    roles: &[String],
) -> Proposal {
    let Some(field) = schema.field(&plan.path) else {
        return Proposal::Blocked { reason: format!("{} is not in the schema", plan.path) };
    };
    if let Some(role) = &field.needs_role
        && !roles.iter().any(|r| r == role)
    {
        return Proposal::Blocked {
            reason: format!("{} only has an effect with roles.{role}, which is not configured", plan.path),
        };
    }
    if let Some(model) = &field.needs_model
        && !roles.iter().any(|r| r == model)
    {
        let reason = if model == "minilm" && !emend_harness::minilm::BUILT {
            format!("{} needs the minilm model: {}", plan.path, emend_harness::minilm::NOT_BUILT)
        } else {
            format!(
                "{} needs the {model} model installed (EMEND_MINILM_DIR or harness.minilm_dir), which is not",
                plan.path
            )
        };
        return Proposal::Blocked { reason };
    }
    let Some(current) = get_path(served, &plan.path) else {
        return Proposal::Blocked { reason: format!("{} is missing from the served strategy", plan.path) };
    };
    let halvings = node.map_or(0, |n| n.misses);
    let attempt = node.map_or(0, |n| n.visits);
    let to = match (&field.kind, plan.direction) {
        (FieldKind::Integer | FieldKind::Number, Direction::Increase | Direction::Decrease) => {
            // A move past the field's `x-off` value changes nothing: the
            // direction is exhausted, never escalated.
            if let crate::search::BoundState::Off { value } =
                crate::search::bound_state(schema, served, &plan.path, plan.direction)
            {
                return Proposal::Exhausted {
                    reason: format!("{} is at {value}, which already switches it off", plan.path),
                };
            }
            let stepped = match step_number(field, current, plan.direction, halvings) {
                Ok(v) => v,
                Err(reason) => return Proposal::Blocked { reason },
            };
            match clamp_to_invariants(schema, served, field, current, stepped) {
                Ok(v) => v,
                Err(reason) => return Proposal::Exhausted { reason },
            }
        }
        (FieldKind::Boolean, Direction::Toggle) => match current {
            Value::Bool(b) => Value::Bool(!b),
            other => return Proposal::Blocked { reason: format!("{} holds {other}, not a boolean", plan.path) },
        },
        (FieldKind::Enum(options), Direction::Toggle) => {
            let others: Vec<&String> = options.iter().filter(|o| current.as_str() != Some(o.as_str())).collect();
            if others.is_empty() {
                return Proposal::Blocked { reason: format!("{} has no other value", plan.path) };
            }
            Value::String(others[attempt as usize % others.len()].clone())
        }
        (FieldKind::Text, Direction::Rewrite) => {
            return Proposal::Blocked {
                reason: format!("{} needs a rewrite, which needs roles.evolver (not configured)", plan.path),
            };
        }
        (kind, direction) => {
            return Proposal::Blocked {
                reason: format!("{} ({}) cannot move in direction {}", plan.path, kind.describe(), direction.as_str()),
            };
        }
    };
    let mut value = served.clone();
    set_path(&mut value, &plan.path, to.clone());
    Proposal::Candidate {
        value: Box::new(value),
        change: Change { path: plan.path.clone(), from: current.clone(), to },
    }
}

/// Keeps a numeric move inside the cross-field invariants that bind it to
/// another field (`retrieve.rerank_top_n <= retrieve.top_k`): the move is
/// shortened to the bound, and when nothing is left of it the direction is
/// exhausted. The value-ranges gate still checks every invariant.
fn clamp_to_invariants(
    schema: &StrategySchema,
    served: &Value,
    field: &FieldSpec,
    current: &Value,
    proposed: Value,
) -> Result<Value, String> {
    use crate::schema::{Op, Operand};
    let (Some(from), Some(mut to)) = (current.as_f64(), proposed.as_f64()) else { return Ok(proposed) };
    let strict_gap = if field.kind == FieldKind::Integer { 1.0 } else { field.step.unwrap_or(1.0) };
    let mut binding = None;
    for inv in schema.invariants() {
        let other = |o: &Operand| match o {
            Operand::Number(n) => Some(*n),
            Operand::Path(p) => get_path(served, p).and_then(Value::as_f64),
        };
        // Normalize to "field <= bound" or "field >= bound".
        let (upper, bound) = if inv.left == field.path {
            match (inv.op, other(&inv.right)) {
                (Op::Le, Some(b)) => (true, b),
                (Op::Lt, Some(b)) => (true, b - strict_gap),
                (Op::Ge, Some(b)) => (false, b),
                (Op::Gt, Some(b)) => (false, b + strict_gap),
                _ => continue,
            }
        } else if matches!(&inv.right, Operand::Path(p) if *p == field.path) {
            match (inv.op, get_path(served, &inv.left).and_then(Value::as_f64)) {
                (Op::Le, Some(b)) => (false, b),
                (Op::Lt, Some(b)) => (false, b + strict_gap),
                (Op::Ge, Some(b)) => (true, b),
                (Op::Gt, Some(b)) => (true, b - strict_gap),
                _ => continue,
            }
        } else {
            continue;
        };
        if (upper && to > bound) || (!upper && to < bound) {
            to = bound;
            binding = Some(inv.to_string());
        }
    }
    if let Some(rule) = binding {
        if (to - from).abs() < 1e-12 || (to - from).signum() != (proposed.as_f64().unwrap_or(to) - from).signum() {
            return Err(format!("{} cannot move: bound by {rule}", field.path));
        }
        return Ok(if field.kind == FieldKind::Integer || to.fract() == 0.0 {
            Value::from(to.round() as i64)
        } else {
            serde_json::Number::from_f64(to).map(Value::Number).unwrap_or(proposed)
        });
    }
    Ok(proposed)
}

fn step_number(field: &FieldSpec, current: &Value, direction: Direction, halvings: u32) -> Result<Value, String> {
    let x = current.as_f64().ok_or_else(|| format!("{} holds {current}, not a number", field.path))?;
    let step = field.step.unwrap_or(1.0);
    let max_delta = field.max_delta.unwrap_or(step);
    let mut magnitude = max_delta / 2f64.powi(halvings.min(30) as i32);
    magnitude = ((magnitude / step + 1e-9).floor() * step).max(step);
    let sign = if direction == Direction::Increase { 1.0 } else { -1.0 };
    let mut next = x + sign * magnitude;
    if let Some(max) = field.maximum {
        next = next.min(max);
    }
    if let Some(min) = field.minimum {
        next = next.max(min);
    }
    // Keep decimal steps readable (0.3, not 0.30000000000000004).
    next = (next * 1e6).round() / 1e6;
    if (next - x).abs() < 1e-12 {
        let bound = if sign > 0.0 { field.maximum } else { field.minimum };
        return Err(match bound {
            Some(b) => format!(
                "{} is at its schema {} {}; going further needs a schema change",
                field.path,
                if sign > 0.0 { "maximum" } else { "minimum" },
                crate::schema::fmt_num(b)
            ),
            None => format!("{} cannot move", field.path),
        });
    }
    // Whole numbers are written as integers (a number field accepts them).
    Ok(if field.kind == FieldKind::Integer || next.fract() == 0.0 {
        Value::from(next.round() as i64)
    } else {
        serde_json::Number::from_f64(next)
            .map(Value::Number)
            .ok_or_else(|| format!("{} step is not finite", field.path))?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn served() -> Value {
        crate::artifact::parse_yaml(crate::artifact::DEFAULT_STRATEGY).unwrap()
    }

    fn diagnosis(counts: &[(&str, usize)]) -> Diagnosis {
        Diagnosis {
            failures: counts.iter().map(|c| c.1).sum(),
            n: 100,
            counts: counts.iter().map(|(l, c)| (l.to_string(), *c)).collect(),
            ..Diagnosis::default()
        }
    }

    fn plan_for(path: &str, direction: Direction) -> Plan {
        Plan {
            key: hypothesis::key(path, direction),
            path: path.into(),
            direction,
            actionability: 1.0,
            ucb: f64::INFINITY,
            reputation: 0.0,
            score: 0.0,
            motivation: BTreeMap::new(),
        }
    }

    #[test]
    fn the_generation_split_points_source_only_at_ingest_and_full_coverage_at_answer_fields() {
        let schema = StrategySchema::builtin();
        let mut d = diagnosis(&[("generation_error", 10)]);
        d.splits.insert("source_only".into(), 10);
        let plans = plan(&schema, &d, None, &BTreeMap::new(), &BTreeMap::new(), PlannerSettings::default());
        assert!(!plans.is_empty());
        assert!(plans.iter().all(|p| p.path.starts_with("ingest.")), "{plans:?}");
        assert!(plans.iter().all(|p| p.motivation.keys().eq(["source_only"])));
        d.splits = [("full_coverage".to_string(), 10)].into();
        let plans = plan(&schema, &d, None, &BTreeMap::new(), &BTreeMap::new(), PlannerSettings::default());
        assert!(plans.iter().any(|p| p.path == "answer.prompt"));
        assert!(plans.iter().all(|p| !p.path.starts_with("ingest.")), "{plans:?}");
        // Unsplit generation errors keep the generic links.
        d.splits.clear();
        let plans = plan(&schema, &d, None, &BTreeMap::new(), &BTreeMap::new(), PlannerSettings::default());
        assert!(plans.iter().all(|p| p.motivation.keys().eq(["generation_error"])));
    }

    #[test]
    fn plans_follow_the_symptoms_and_skip_closed_nodes() {
        let schema = StrategySchema::builtin();
        let d = diagnosis(&[("kf_filtered", 30)]);
        let plans = plan(&schema, &d, None, &BTreeMap::new(), &BTreeMap::new(), PlannerSettings::default());
        assert!(plans.iter().all(|p| p.motivation.contains_key("kf_filtered")));
        assert!(plans.iter().any(|p| p.key == "assemble.token_budget::increase"));
        let mut tree = BTreeMap::new();
        let mut h = Hypothesis::new("assemble.token_budget", Direction::Increase);
        h.status = crate::hypothesis::Status::Refuted;
        tree.insert(h.key.clone(), h);
        let plans = plan(&schema, &d, None, &tree, &BTreeMap::new(), PlannerSettings::default());
        assert!(!plans.iter().any(|p| p.key == "assemble.token_budget::increase"));
    }

    #[test]
    fn more_actionable_unvisited_directions_come_first() {
        let schema = StrategySchema::builtin();
        let d = diagnosis(&[("kf_filtered", 10), ("retrieval_gap", 90)]);
        let plans = plan(&schema, &d, None, &BTreeMap::new(), &BTreeMap::new(), PlannerSettings::default());
        assert!(plans[0].motivation.contains_key("retrieval_gap"), "{:?}", plans[0]);
    }

    /// A digest against v1 with, per label, (count now, count then, persist).
    fn compared(labels: &[(&str, usize, usize, usize)]) -> Digest {
        let labels = labels
            .iter()
            .map(|&(l, count, then, persist)| {
                let d = crate::digest::LabelDigest {
                    count,
                    previous: Some(then),
                    new: count - persist,
                    persist,
                    ..Default::default()
                };
                (l.to_string(), d)
            })
            .collect();
        Digest { version: 2, previous: Some(1), labels, ..Digest::default() }
    }

    fn first_label(plans: &[Plan]) -> &str {
        plans[0].motivation.keys().next().map(String::as_str).unwrap_or("")
    }

    #[test]
    fn persisting_failures_outrank_new_ones_with_the_same_counts() {
        let schema = StrategySchema::builtin();
        let d = diagnosis(&[("kf_filtered", 50), ("retrieval_gap", 50)]);
        let settings = PlannerSettings::default();
        let (none, tree, effects) = (None, BTreeMap::new(), BTreeMap::new());
        let kf = compared(&[("kf_filtered", 50, 50, 40), ("retrieval_gap", 50, 50, 0)]);
        let plans = plan(&schema, &d, Some(&kf), &tree, &effects, settings);
        assert_eq!(first_label(&plans), "kf_filtered", "{:?}", plans[0]);
        let kf_a = plans.iter().find(|p| p.motivation.contains_key("kf_filtered")).unwrap().actionability;
        let rg_a = plans.iter().find(|p| p.motivation.contains_key("retrieval_gap")).unwrap().actionability;
        // 50 + 0.5 * 40 = 70 weighted failures of 120.
        assert!((kf_a - 70.0 / 120.0).abs() < 1e-12 && (rg_a - 50.0 / 120.0).abs() < 1e-12, "{kf_a} {rg_a}");
        let rg = compared(&[("kf_filtered", 50, 50, 0), ("retrieval_gap", 50, 50, 40)]);
        let plans = plan(&schema, &d, Some(&rg), &tree, &effects, settings);
        assert_eq!(first_label(&plans), "retrieval_gap", "{:?}", plans[0]);
        // The same counts without history: the plain share, the order the digest overturns above.
        let plain = plan(&schema, &d, none, &tree, &effects, settings);
        assert!(plain.iter().all(|p| (p.actionability - 0.5).abs() < 1e-12));
    }

    #[test]
    fn a_rising_label_outranks_a_falling_one_with_the_same_counts() {
        let schema = StrategySchema::builtin();
        let d = diagnosis(&[("kf_filtered", 50), ("retrieval_gap", 50)]);
        let (tree, effects) = (BTreeMap::new(), BTreeMap::new());
        let up = compared(&[("kf_filtered", 50, 80, 0), ("retrieval_gap", 50, 20, 0)]);
        let plans = plan(&schema, &d, Some(&up), &tree, &effects, PlannerSettings::default());
        assert_eq!(first_label(&plans), "retrieval_gap", "{:?}", plans[0]);
        let down = compared(&[("kf_filtered", 50, 20, 0), ("retrieval_gap", 50, 80, 0)]);
        let plans = plan(&schema, &d, Some(&down), &tree, &effects, PlannerSettings::default());
        assert_eq!(first_label(&plans), "kf_filtered", "{:?}", plans[0]);
    }

    #[test]
    fn a_digest_without_a_previous_version_changes_nothing() {
        let schema = StrategySchema::builtin();
        let mut d = diagnosis(&[("kf_filtered", 10), ("retrieval_gap", 30), ("generation_error", 20)]);
        d.splits.insert("source_only".into(), 5);
        let mut first = compared(&[("kf_filtered", 10, 0, 0)]);
        first.previous = None;
        let (tree, effects) = (BTreeMap::new(), BTreeMap::new());
        let without = plan(&schema, &d, None, &tree, &effects, PlannerSettings::default());
        let with = plan(&schema, &d, Some(&first), &tree, &effects, PlannerSettings::default());
        assert_eq!(without, with);
        assert!(label_weights(Some(&first)).is_none());
        // Compared, generation splits take generation_error's weight.
        let w = label_weights(Some(&compared(&[("generation_error", 20, 20, 10)]))).unwrap();
        assert_eq!((w["generation_error"], w["source_only"], w["full_coverage"]), (1.25, 1.25, 1.25));
    }

    #[test]
    fn numeric_moves_stay_within_max_delta_and_halve_after_failures() {
        let schema = StrategySchema::builtin();
        let p = plan_for("retrieve.top_k", Direction::Increase);
        let Proposal::Candidate { change, .. } = evolve(&schema, &served(), &p, None, &[]) else { panic!() };
        assert_eq!(change.to, serde_json::json!(15));
        let mut h = Hypothesis::new("retrieve.top_k", Direction::Increase);
        h.misses = 1;
        let Proposal::Candidate { change, .. } = evolve(&schema, &served(), &p, Some(&h), &[]) else { panic!() };
        assert_eq!(change.to, serde_json::json!(9));
    }

    #[test]
    fn decimal_steps_are_clean_and_bounds_block() {
        let schema = StrategySchema::builtin();
        let p = plan_for("index.bm25_b", Direction::Increase);
        let Proposal::Candidate { change, .. } = evolve(&schema, &served(), &p, None, &[]) else { panic!() };
        assert_eq!(change.to, serde_json::json!(1));
        let mut v = served();
        set_path(&mut v, "index.bm25_b", serde_json::json!(1.0));
        let Proposal::Blocked { reason } = evolve(&schema, &v, &p, None, &[]) else { panic!() };
        assert!(reason.contains("schema maximum 1"), "{reason}");
    }

    #[test]
    fn moves_respect_invariants_with_other_fields() {
        let schema = StrategySchema::builtin();
        // rerank_top_n <= top_k (5): a +10 move is shortened to 5.
        let p = plan_for("retrieve.rerank_top_n", Direction::Increase);
        let Proposal::Candidate { change, .. } = evolve(&schema, &served(), &p, None, &[]) else { panic!() };
        assert_eq!(change.to, serde_json::json!(5));
        // top_k <= pool: at the pool, top_k cannot grow; that exhausts the direction.
        let mut v = served();
        set_path(&mut v, "retrieve.top_k", serde_json::json!(50));
        let p = plan_for("retrieve.top_k", Direction::Increase);
        let Proposal::Exhausted { reason } = evolve(&schema, &v, &p, None, &[]) else { panic!() };
        assert!(reason.contains("retrieve.top_k <= retrieve.pool"), "{reason}");
        // window_overlap < window_size (2): overlap can reach 1, not 2.
        let p = plan_for("ingest.window_overlap", Direction::Increase);
        let Proposal::Candidate { change, .. } = evolve(&schema, &served(), &p, None, &[]) else { panic!() };
        assert_eq!(change.to, serde_json::json!(1));
    }

    #[test]
    fn toggles_and_role_bound_fields() {
        let schema = StrategySchema::builtin();
        let p = plan_for("assemble.order", Direction::Toggle);
        let Proposal::Candidate { change, .. } = evolve(&schema, &served(), &p, None, &[]) else { panic!() };
        assert_eq!(change.to, serde_json::json!("chronological"));
        let p = plan_for("answer.prompt", Direction::Rewrite);
        let Proposal::Blocked { reason } = evolve(&schema, &served(), &p, None, &[]) else { panic!() };
        assert!(reason.contains("roles.answerer"), "{reason}");
    }
}
