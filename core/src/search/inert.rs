//! Fields that do nothing under the rest of the strategy (`x-inert-when`):
//! the global search puts them back to their served values, so a candidate
//! never carries a change that cannot matter (`index.dense_dim` with the
//! dense channel off, `retrieve.rrf_kappa` under weighted-sum fusion, the
//! answer format under the evidence judge), two strategies that differ only
//! there are one strategy, and a reviewer reads only changes that can act.

use serde_json::Value;

use crate::schema::{StrategySchema, get_path, set_path};

/// Puts every field of `doc` that is inert in `doc` (its `x-inert-when`
/// holds there, or, for a `harness.` condition, in `harness`) back to its
/// value in `served`. Returns the paths it reset, in path order.
pub fn reset_inert(schema: &StrategySchema, served: &Value, doc: &mut Value, harness: &Value) -> Vec<String> {
    // Conditions are read on the document as drawn, before any reset, so
    // the result does not depend on the order fields are visited in.
    let inert: Vec<String> = schema
        .evolvable()
        .filter(|f| f.inert_when.iter().any(|c| c.holds(doc, harness)))
        .map(|f| f.path.clone())
        .collect();
    let mut reset = Vec::new();
    for path in inert {
        let (Some(now), Some(before)) = (get_path(doc, &path), get_path(served, &path)) else { continue };
        let same = now == before || (now.is_number() && now.as_f64() == before.as_f64());
        if !same {
            let before = before.clone();
            set_path(doc, &path, before);
            reset.push(path);
        }
    }
    reset
}

/// Whether `path` has no effect in `doc` (see [`reset_inert`]).
pub fn is_inert(schema: &StrategySchema, doc: &Value, path: &str, harness: &Value) -> bool {
    schema.field(path).is_some_and(|f| f.inert_when.iter().any(|c| c.holds(doc, harness)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::space::tests::default_doc;
    use serde_json::json;

    #[test]
    fn inert_fields_go_back_to_their_served_values_and_active_ones_stay() {
        let schema = StrategySchema::builtin();
        let served = default_doc();
        let evidence = json!({"judge": "evidence"});
        let mut doc = served.clone();
        set_path(&mut doc, "retrieve.fusion", json!("weighted_sum"));
        set_path(&mut doc, "retrieve.rrf_kappa", json!(150.0));
        set_path(&mut doc, "retrieve.weights.dense", json!(0.0));
        set_path(&mut doc, "index.dense_dim", json!(1024));
        set_path(&mut doc, "index.dense_kind", json!("none"));
        set_path(&mut doc, "answer.format", json!("sentence"));
        set_path(&mut doc, "retrieve.top_k", json!(40));
        let reset = reset_inert(&schema, &served, &mut doc, &evidence);
        assert_eq!(
            reset,
            ["answer.format", "index.dense_dim", "index.dense_kind", "retrieve.rrf_kappa", "retrieve.weights.dense"]
        );
        assert_eq!(get_path(&doc, "retrieve.top_k"), Some(&json!(40)));
        assert_eq!(get_path(&doc, "retrieve.fusion"), Some(&json!("weighted_sum")));
        // Under the f1 judge the answer format acts.
        let mut doc = served.clone();
        set_path(&mut doc, "answer.format", json!("sentence"));
        assert!(reset_inert(&schema, &served, &mut doc, &json!({"judge": "f1"})).is_empty());
        assert!(!is_inert(&schema, &doc, "answer.format", &json!({"judge": "f1"})));
        assert!(is_inert(&schema, &doc, "answer.format", &evidence));
    }
}
