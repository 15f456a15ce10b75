//! Every `x-inert-when` rule of the built-in schema against the pipeline
//! itself: under each condition, moving the field leaves every question's
//! outcome record (verdict, retrieved items with their scores, context,
//! tokens) byte for byte as it was on the embedded dataset. The global search
//! resets a field that is inert under the rest of a strategy, so a rule that
//! did not hold would hide a real change from the search.

use std::path::Path;
use std::process::Command;

use emend_core::schema::{FieldKind, StrategySchema, get_path, set_path};
use serde_json::{Value, json};

/// The outcome lines of `doc` on the embedded dataset (evidence judge).
fn outcomes(dir: &Path, name: &str, doc: &Value) -> Vec<String> {
    let strategy = dir.join(format!("{name}.yaml"));
    std::fs::write(&strategy, serde_yaml::to_string(doc).unwrap()).unwrap();
    let out = dir.join(format!("{name}.jsonl"));
    let status = Command::new(crate::support::bin())
        .args(["eval", "--tasks", "builtin", "--strategy"])
        .arg(&strategy)
        .arg("--outcomes")
        .arg(&out)
        .output()
        .unwrap();
    assert!(status.status.success(), "{name}: {}", String::from_utf8_lossy(&status.stderr));
    std::fs::read_to_string(out).unwrap().lines().map(str::to_string).collect()
}

/// Another legal value of the field than `current` (an option that needs no model).
fn another(field: &emend_core::schema::FieldSpec, current: &Value) -> Value {
    match &field.kind {
        FieldKind::Boolean => json!(!current.as_bool().unwrap()),
        FieldKind::Enum(options) => {
            let other =
                options.iter().find(|o| json!(o) != *current && Some(o.as_str()) != field.needs_model.as_deref());
            json!(other.expect("another option"))
        }
        FieldKind::Integer | FieldKind::Number => {
            let (lo, hi, x) = (field.minimum.unwrap(), field.maximum.unwrap(), current.as_f64().unwrap());
            let y = if hi - x > x - lo { (x + (hi - x) / 2.0).round() } else { (lo + (x - lo) / 2.0).round() };
            if field.kind == FieldKind::Integer { json!(y as i64) } else { json!(y) }
        }
        FieldKind::Text => unreachable!("text fields carry no x-inert-when"),
    }
}

#[test]
fn every_inert_rule_leaves_every_outcome_unchanged() {
    let schema = StrategySchema::builtin();
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../strategies/default.yaml")).unwrap();
    let start: Value = serde_yaml::from_str(&text).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut checked = 0;
    for field in schema.evolvable().filter(|f| !f.inert_when.is_empty()) {
        for cond in &field.inert_when {
            for value in &cond.values {
                // `emend eval` runs the evidence judge, the one harness setting a rule names.
                if cond.path.starts_with("harness.") && value != &json!("evidence") {
                    continue;
                }
                let mut base = start.clone();
                if !cond.path.starts_with("harness.") {
                    if value == &json!("minilm") {
                        continue; // needs the model; `none` covers the rule
                    }
                    set_path(&mut base, &cond.path, value.clone());
                }
                let mut moved = base.clone();
                let to = another(field, get_path(&base, &field.path).unwrap());
                set_path(&mut moved, &field.path, to.clone());
                emend_core::search::repair(&schema, &mut moved).unwrap();
                let to = get_path(&moved, &field.path).unwrap().clone();
                assert_ne!(Some(&to), get_path(&base, &field.path), "{} moved", field.path);
                let name = format!("{}-{checked}", field.path);
                let (a, b) = (
                    outcomes(tmp.path(), &format!("{name}-a"), &base),
                    outcomes(tmp.path(), &format!("{name}-b"), &moved),
                );
                assert!(!a.is_empty());
                assert_eq!(a, b, "{} -> {to} changed an outcome while {} is {value}", field.path, cond.path);
                checked += 1;
            }
        }
    }
    // dense_dim (2 rules), dense_kind, weights.dense, rrf_kappa, weights.expansion,
    // expansion.terms (2), expansion.enabled and answer.format.
    assert_eq!(checked, 10, "every rule of the built-in schema was checked");
}

/// The rules are not vacuous: where a condition does not hold, the same
/// moves do change outcomes (one example per mechanism).
#[test]
fn where_a_condition_does_not_hold_the_field_acts() {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../strategies/default.yaml")).unwrap();
    let start: Value = serde_yaml::from_str(&text).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let base = outcomes(tmp.path(), "start", &start);
    for (path, to) in [("retrieve.rrf_kappa", json!(1.0)), ("index.dense_dim", json!(32))] {
        let mut moved = start.clone();
        set_path(&mut moved, path, to);
        assert_ne!(outcomes(tmp.path(), path, &moved), base, "{path} acts under the default strategy");
    }
}
