//! What a reviewer reads beside the figures: the dataset's question texts,
//! and strategy documents as key-sorted YAML and their unified diffs. The
//! views, the report and the CLI's `show` and `diff` share them.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use emend_core::artifact;
use emend_core::config::Project;

/// A dataset question as a reviewer reads it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct QuestionText {
    pub question: String,
    /// The gold answer (empty when the dataset has none).
    pub gold: String,
    /// Evidence ids as written in the dataset.
    pub evidence: Vec<String>,
    pub category: String,
}

/// Question texts of the project's task set by question id; empty when the
/// task set cannot be loaded (the views then show ids only).
pub fn question_texts(project: &Project) -> BTreeMap<String, QuestionText> {
    let Ok(dataset) = emend_core::setup::load_tasks(&project.config.harness.tasks, &project.dir) else {
        return BTreeMap::new();
    };
    dataset
        .questions()
        .map(|q| {
            (
                q.id.clone(),
                QuestionText {
                    question: q.question.clone(),
                    gold: q.answer.clone().or_else(|| q.adversarial_answer.clone()).unwrap_or_default(),
                    evidence: q.raw_evidence.clone(),
                    category: q.category.to_string(),
                },
            )
        })
        .collect()
}

/// `v` with every object's keys sorted, recursively.
pub fn sorted_keys(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let keys: BTreeSet<&String> = m.keys().collect();
            let mut out = Map::new();
            for k in keys {
                out.insert(k.clone(), sorted_keys(&m[k]));
            }
            Value::Object(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(sorted_keys).collect()),
        other => other.clone(),
    }
}

/// A strategy document as key-sorted YAML without the version metadata: the
/// form both sides of every diff take.
pub fn document_yaml(doc: &Value) -> String {
    artifact::render_yaml(&sorted_keys(doc), None, None, "")
}

/// The unified diff (3 lines of context) of two strategy documents; empty
/// when they render the same.
pub fn unified_diff(a: &Value, b: &Value, a_name: &str, b_name: &str) -> String {
    let (a, b) = (document_yaml(a), document_yaml(b));
    if a == b {
        return String::new();
    }
    similar::TextDiff::from_lines(&a, &b).unified_diff().context_radius(3).header(a_name, b_name).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn diffs_ignore_key_order() {
        let a = json!({"b": {"y": 1, "x": 2}, "a": 1});
        let b = json!({"a": 1, "b": {"x": 2, "y": 1}});
        assert_eq!(unified_diff(&a, &b, "a", "b"), "");
        let c = json!({"a": 1, "b": {"x": 3, "y": 1}});
        let d = unified_diff(&a, &c, "a", "c");
        assert!(d.contains("-  x: 2\n+  x: 3\n"), "{d}");
    }
}
