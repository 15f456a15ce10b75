//! The shared suite: every test here runs against both backends.

use emend_journal::{
    ErrorKind, EventLog, EventRecord, Head, MemoryJournal, NewEvent, ProjectionCheck, SledJournal, ZERO_HASH,
    export_jsonl, open_writer,
};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::common::{Tally, copy, del, inc, set, snapshot};

/// A journal under test, with the directory that must outlive it (sled only).
pub struct Fixture<L> {
    pub log: L,
    _dir: Option<TempDir>,
}

pub fn memory() -> Fixture<MemoryJournal> {
    Fixture { log: MemoryJournal::new(Tally), _dir: None }
}

pub fn sled() -> Fixture<SledJournal> {
    let dir = TempDir::new().expect("tempdir");
    let log = open_writer(dir.path().join("j"), Tally).expect("open writer");
    Fixture { log, _dir: Some(dir) }
}

macro_rules! shared_suite {
    ($($test:ident),* $(,)?) => {
        mod memory_backend {
            $( #[test] fn $test() { super::$test(super::memory()) } )*
        }
        mod sled_backend {
            $( #[test] fn $test() { super::$test(super::sled()) } )*
        }
    };
}

shared_suite!(
    empty_journal,
    append_read_head,
    empty_batch_writes_nothing,
    projections_visible_with_their_events,
    reads_see_earlier_writes_in_batch,
    failed_batch_leaves_nothing,
    undeclared_tree_fails_the_batch,
    undeclared_tree_read_is_an_error,
    verify_and_rebuild_intact_journal,
    payload_keys_are_canonical,
    export_writes_one_line_per_record,
);

fn empty_journal<L: EventLog>(f: Fixture<L>) {
    let log = f.log;
    assert_eq!(log.head(), Head::empty());
    assert_eq!(log.head().hash, ZERO_HASH);
    assert!(log.read_from(1).unwrap().is_empty());
    assert_eq!(log.get("counts", "a").unwrap(), None);
    assert!(log.scan("last", "").unwrap().is_empty());
    let report = log.verify().unwrap();
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.events_checked, 0);
}

fn append_read_head<L: EventLog>(f: Fixture<L>) {
    let mut log = f.log;
    let first = log.append(vec![inc("a", 1), inc("b", 2), set("c", json!("x"))]).unwrap();
    let second = log.append(vec![del("a"), inc("b", 5)]).unwrap();
    assert_eq!(first.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(second.iter().map(|r| r.seq).collect::<Vec<_>>(), [4, 5]);

    let all = log.read_from(1).unwrap();
    assert_eq!(all, [first.clone(), second.clone()].concat());
    assert_eq!(all[0].prev_hash, ZERO_HASH);
    for pair in all.windows(2) {
        assert_eq!(pair[1].prev_hash, pair[0].hash, "seq {} links to {}", pair[1].seq, pair[0].seq);
    }
    for r in &all {
        assert_eq!(r.compute_hash(), r.hash);
    }
    assert_eq!(log.head(), Head { seq: 5, hash: all[4].hash.clone() });

    assert_eq!(log.read_from(0).unwrap(), all);
    assert_eq!(log.read_from(3).unwrap(), all[2..]);
    assert_eq!(log.read_range(2, 2).unwrap(), all[1..3]);
    assert!(log.read_from(6).unwrap().is_empty());
    assert_eq!(all[2].kind, "set");
    assert_eq!(all[2].payload, json!({"key": "c", "value": "x"}));
}

fn empty_batch_writes_nothing<L: EventLog>(f: Fixture<L>) {
    let mut log = f.log;
    log.append(vec![inc("a", 1)]).unwrap();
    let head = log.head();
    assert!(log.append(Vec::new()).unwrap().is_empty());
    assert_eq!(log.head(), head);
    assert_eq!(log.read_from(1).unwrap().len(), 1);
}

fn projections_visible_with_their_events<L: EventLog>(f: Fixture<L>) {
    let mut log = f.log;
    log.append(vec![inc("q0001", 1), inc("q0002", 2), inc("r0001", 3)]).unwrap();
    assert_eq!(log.get("counts", "q0001").unwrap(), Some(json!(1)));
    assert_eq!(log.get("last", "q0002").unwrap(), Some(json!({"by": 2, "seq": 2})));
    let scanned = log.scan("counts", "q").unwrap();
    assert_eq!(scanned, vec![("q0001".to_owned(), json!(1)), ("q0002".to_owned(), json!(2))]);
    assert_eq!(log.scan("counts", "").unwrap().len(), 3);
    assert!(log.scan("counts", "z").unwrap().is_empty());

    log.append(vec![del("q0001"), inc("q0002", 10)]).unwrap();
    assert_eq!(log.get("counts", "q0001").unwrap(), None);
    assert_eq!(log.get("last", "q0001").unwrap(), None);
    assert_eq!(log.get("counts", "q0002").unwrap(), Some(json!(12)));
}

fn reads_see_earlier_writes_in_batch<L: EventLog>(f: Fixture<L>) {
    let mut log = f.log;
    log.append(vec![inc("a", 100)]).unwrap();
    // Each inc reads the counter the previous one wrote in the same batch.
    log.append(vec![inc("a", 1), inc("a", 2), inc("a", 3)]).unwrap();
    assert_eq!(log.get("counts", "a").unwrap(), Some(json!(106)));

    // copy reads a value set earlier in the batch; a delete earlier in the batch hides
    // the stored value from later reads.
    log.append(vec![set("s", json!([1, 2])), copy("s", "t"), del("a"), copy("a", "u")]).unwrap();
    assert_eq!(log.get("last", "t").unwrap(), Some(json!([1, 2])));
    assert_eq!(log.get("last", "u").unwrap(), Some(Value::Null));
    assert_eq!(log.get("counts", "a").unwrap(), None);

    log.append(vec![inc("a", 1), inc("a", 1)]).unwrap();
    assert_eq!(log.get("counts", "a").unwrap(), Some(json!(2)));
}

fn failed_batch_leaves_nothing<L: EventLog>(f: Fixture<L>) {
    let mut log = f.log;
    log.append(vec![inc("a", 1), set("s", json!(1))]).unwrap();
    let head = log.head();
    let before = snapshot(&log);

    let err = log.append(vec![inc("a", 5), inc("b", 1), NewEvent::new("fail", json!({})), inc("c", 1)]).unwrap_err();
    assert_eq!(err.seq, Some(5), "the failing event is the third of the batch: {err:?}");
    assert!(matches!(err.kind(), ErrorKind::Projection { event_kind, .. } if event_kind == "fail"));
    assert!(format!("{err:?}").contains("asked to fail"));

    assert_eq!(log.head(), head);
    assert_eq!(log.read_from(1).unwrap().len(), 2);
    assert_eq!(snapshot(&log), before);

    // The chain continues from the last good head.
    let next = log.append(vec![inc("b", 1)]).unwrap();
    assert_eq!(next[0].seq, 3);
    assert_eq!(next[0].prev_hash, head.hash);
    assert!(log.verify().unwrap().is_ok());
}

fn undeclared_tree_fails_the_batch<L: EventLog>(f: Fixture<L>) {
    let mut log = f.log;
    let err = log.append(vec![inc("a", 1), NewEvent::new("stray", json!({}))]).unwrap_err();
    assert_eq!(err.seq, Some(2));
    assert!(matches!(err.kind(), ErrorKind::UndeclaredTree { tree, .. } if tree == "nowhere"), "{err:?}");
    assert_eq!(log.head(), Head::empty());
    assert_eq!(log.get("counts", "a").unwrap(), None);
}

fn undeclared_tree_read_is_an_error<L: EventLog>(f: Fixture<L>) {
    let log = f.log;
    assert!(matches!(log.get("nowhere", "k").unwrap_err().kind(), ErrorKind::UndeclaredTree { .. }));
    assert!(matches!(log.scan("nowhere", "").unwrap_err().kind(), ErrorKind::UndeclaredTree { .. }));
}

fn verify_and_rebuild_intact_journal<L: EventLog>(f: Fixture<L>) {
    let mut log = f.log;
    for i in 0..5 {
        log.append(vec![inc("a", i), inc(&format!("k{i}"), 1), copy("a", "b")]).unwrap();
    }
    log.append(vec![del("k2")]).unwrap();
    let report = log.verify().unwrap();
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.events_checked, 16);
    assert_eq!(report.last_good, log.head());
    assert!(matches!(&report.projections, ProjectionCheck::Match { trees } if trees.len() == 2));

    let before = snapshot(&log);
    log.rebuild().unwrap();
    assert_eq!(snapshot(&log), before);
    assert!(log.verify().unwrap().is_ok());
}

fn payload_keys_are_canonical<L: EventLog>(f: Fixture<L>) {
    let mut log = f.log;
    let payload: Value = serde_json::from_str(r#"{"z":1,"key":"a","by":2,"m":{"y":1,"x":2}}"#).unwrap();
    let written = log.append(vec![NewEvent::new("inc", payload)]).unwrap();
    let line = log.read_from(1).unwrap()[0].to_json_line();
    assert!(line.contains(r#""payload":{"by":2,"key":"a","m":{"x":2,"y":1},"z":1}"#), "{line}");
    assert_eq!(written[0].to_json_line(), line);
}

fn export_writes_one_line_per_record<L: EventLog>(f: Fixture<L>) {
    let mut log = f.log;
    // More than one export page (256 records).
    for chunk in 0..6 {
        log.append((0..50).map(|i| inc(&format!("k{chunk}"), i)).collect()).unwrap();
    }
    let mut out = Vec::new();
    let n = export_jsonl(&log, 2, &mut out).unwrap();
    assert_eq!(n, 299);
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 299);
    let expected = log.read_from(2).unwrap();
    for (line, record) in lines.iter().zip(&expected) {
        let parsed: EventRecord = serde_json::from_str(line).unwrap();
        assert_eq!(&parsed, record);
        assert_eq!(*line, record.to_json_line());
    }
    assert!(lines[0].starts_with(r#"{"seq":2,"kind":"inc","payload":{"#), "{}", lines[0]);
    let mut all = Vec::new();
    assert_eq!(export_jsonl(&log, 0, &mut all).unwrap(), 300);
}
