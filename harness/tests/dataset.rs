//! Loading LoCoMo files: the fixtures of bad and messy files, and the real
//! development file when it is present.

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use common::*;
use emend_harness::{Category, Evaluator, HarnessSettings, Selection, load_path};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

#[test]
fn bad_files_are_rejected_naming_the_sample_and_field() {
    let cases = [
        ("not-json.json", "not-json.json: not valid JSON: "),
        ("wrong-shape.json", "wrong-shape.json: top level: expected a list of samples, got an object"),
        (
            "bad-evidence.json",
            "bad-evidence.json: sample 0 (conv-1): qa[1].evidence: expected a list of strings, got 5",
        ),
        ("missing-question.json", "missing-question.json: sample 0 (conv-1): qa[0].question: missing"),
    ];
    for (file, expected) in cases {
        let err = load_path(&fixture(file)).unwrap_err().to_string();
        assert!(err.starts_with(expected), "{file}: {err}");
    }
    let err = load_path(&fixture("absent.json")).unwrap_err().to_string();
    assert!(err.contains("absent.json: cannot read: "), "{err}");
}

#[test]
fn messy_evidence_is_normalized_and_reported() {
    let d = load_path(&fixture("messy.json")).unwrap();
    let qs: Vec<_> = d.questions().collect();
    assert_eq!(qs[0].evidence, vec!["D1:1"]);
    assert_eq!(qs[1].evidence, vec!["D1:1", "D2:2"]);
    assert_eq!(qs[1].answer.as_deref(), Some("1"));
    assert_eq!(qs[2].evidence, vec!["D1:2"]);
    assert_eq!(qs[2].unresolved, vec!["D", "D7:1"]);
    assert_eq!(qs[3].category, Category::Adversarial);
    assert_eq!(qs[3].answer, None);
    // Sessions without turns are ignored; dates are parsed.
    assert_eq!(d.samples()[0].sessions.len(), 2);
    let e = Evaluator::new(Arc::new(d), HarnessSettings::default()).unwrap().evaluate(&default_strategy()).unwrap();
    assert_eq!(e.summary.n, 3);
    assert_eq!((e.summary.unresolved_evidence, e.summary.unresolved_evidence_ids), (1, 2));
    let o = &e.outcomes[2];
    assert_eq!(o.id, "conv-1#2");
    assert_eq!(o.unresolved_evidence, vec!["D", "D7:1"]);
    assert_eq!(o.evidence, vec!["D1:2"]);
}

#[test]
fn locomo_dev_loads_with_its_known_quirks() {
    let Some(path) = locomo_path() else { return };
    let d = load_path(&path).unwrap();
    assert_eq!(d.samples().len(), 5);
    assert_eq!(d.questions().count(), 999);
    assert_eq!(d.select(&Selection::default()).unwrap().len(), 762);
    let with_unresolved: Vec<_> = d.questions().filter(|q| !q.unresolved.is_empty()).collect();
    let mut ids: Vec<&str> = with_unresolved.iter().flat_map(|q| q.unresolved.iter().map(String::as_str)).collect();
    ids.sort_unstable();
    assert_eq!(ids, vec!["D", "D10:19"], "D8:6; D9:17 and D:11:26 resolve");
    assert!(d.questions().any(|q| q.raw_evidence.iter().any(|e| e == "D8:6; D9:17") && q.evidence.len() >= 2));
    assert!(
        d.questions().any(|q| q.raw_evidence.iter().any(|e| e == "D:11:26") && q.evidence.contains(&"D11:26".into()))
    );
}

#[test]
fn locomo_dev_evaluates_deterministically() {
    let Some(path) = locomo_path() else { return };
    let d = Arc::new(load_path(&path).unwrap());
    let s = default_strategy();
    let a = Evaluator::new(d.clone(), HarnessSettings::default()).unwrap().evaluate(&s).unwrap();
    let b = Evaluator::new(d, HarnessSettings::default()).unwrap().evaluate(&s).unwrap();
    assert_eq!(a.summary.n, 762);
    assert_eq!(a.summary.per_category.len(), 4);
    assert_eq!(jsonl(&a.outcomes), jsonl(&b.outcomes));
}
