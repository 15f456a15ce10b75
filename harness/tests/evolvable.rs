//! Every field the schema marks `x-evolvable` must change behaviour: changing
//! it (within its range) on the embedded dataset changes some trace.
//! Fields that need an LLM role (`x-needs-role`) are skipped: no model runs here.

mod common;

use common::*;
use emend_harness::HarnessSettings;
use serde_json::{Value, json};

/// (path, schema) of every evolvable leaf, `$ref`s followed.
fn evolvable(schema: &Value) -> Vec<(String, Value)> {
    fn walk(root: &Value, node: &Value, path: &str, out: &mut Vec<(String, Value)>) {
        let node = match node.get("$ref").and_then(Value::as_str) {
            Some(r) => {
                let mut target = root;
                for part in r.trim_start_matches("#/").split('/') {
                    target = &target[part];
                }
                // Keywords beside the $ref (a description) do not matter here.
                target
            }
            None => node,
        };
        if node.get("x-evolvable").and_then(Value::as_bool) == Some(true) {
            out.push((path.to_string(), node.clone()));
        }
        if let Some(props) = node.get("properties").and_then(Value::as_object) {
            for (k, v) in props {
                let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                walk(root, v, &p, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(schema, schema, "", &mut out);
    out
}

fn get<'a>(v: &'a Value, path: &str) -> &'a Value {
    path.split('.').fold(v, |v, p| &v[p])
}

/// Other values to try for a field, nearest first, all within the schema's range.
fn candidates(current: &Value, field: &Value) -> Vec<Value> {
    if let Some(options) = field.get("enum").and_then(Value::as_array) {
        return options.iter().filter(|o| *o != current).cloned().collect();
    }
    match field["type"].as_str() {
        Some("boolean") => vec![json!(!current.as_bool().unwrap())],
        Some(t @ ("integer" | "number")) => {
            let x = current.as_f64().unwrap();
            let (lo, hi) = (field["minimum"].as_f64().unwrap(), field["maximum"].as_f64().unwrap());
            let d = field.get("x-max-delta").and_then(Value::as_f64).unwrap_or((hi - lo) / 4.0);
            [x + d, x - d, x + 2.0 * d, hi, lo]
                .into_iter()
                .map(|v| v.clamp(lo, hi))
                .filter(|v| (v - x).abs() > 1e-12)
                .map(|v| if t == "integer" { json!(v.round() as i64) } else { json!(v) })
                .collect()
        }
        other => panic!("unexpected evolvable type {other:?}"),
    }
}

#[test]
fn every_evolvable_field_changes_some_trace() {
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(repo_file("schemas/strategy.schema.json")).unwrap()).unwrap();
    let fields = evolvable(&schema);
    assert!(fields.len() >= 25, "found only {} evolvable fields", fields.len());
    let default = default_strategy();
    // Two conversations keep the test quick in debug builds.
    let ev = builtin_evaluator(HarnessSettings {
        conversations: Some(vec!["syn-1".into(), "syn-3".into()]),
        ..HarnessSettings::default()
    });
    let mut checked = Vec::new();
    for (path, field) in &fields {
        // Fields needing a model role or an installed model (x-needs-model) are not run here.
        if field.get("x-needs-role").is_some() || field.get("x-needs-model").is_some() {
            continue;
        }
        // A few fields act only when another one enables them; the base says so.
        let base = match path.as_str() {
            "retrieve.expansion.terms" | "retrieve.weights.expansion" => {
                with(&default, "retrieve.expansion.enabled", json!(true))
            }
            // Skipping an item needs others covering all its turns: windows overlapping by 3 of 4.
            "assemble.dedup" => {
                let s = with(&default, "ingest.window_size", json!(4));
                let s = with(&s, "ingest.window_overlap", json!(3));
                let s = with(&s, "retrieve.top_k", json!(10));
                with(&s, "assemble.token_budget", json!(1000))
            }
            // Answers are computed only for a judge that reads them.
            "answer.format" => with(&default, "judge.kind", json!("f1")),
            _ => default.clone(),
        };
        let reference = jsonl(&ev.evaluate(&base).unwrap().outcomes);
        let current = get(&serde_json::to_value(&base).unwrap(), path).clone();
        let changed = candidates(&current, field).into_iter().find(|value| {
            let s = with(&base, path, value.clone());
            jsonl(&ev.evaluate(&s).unwrap().outcomes) != reference
        });
        assert!(changed.is_some(), "changing {path} (now {current}) changed no trace");
        checked.push(path.clone());
    }
    for must in ["ingest.dedup_threshold", "retrieve.top_k", "assemble.backfill_window", "answer.format"] {
        assert!(checked.iter().any(|p| p == must), "{must} was not checked");
    }
}
