//! Property tests: any sequence of appends, cut into batches anywhere, replays to the same
//! projections and the same chain; a rebuild equals the incremental update; both backends
//! agree.

use emend_journal::{EventLog, MemoryJournal, NewEvent, open_reader, open_writer};
use proptest::prelude::*;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::common::{Tally, copy, del, inc, set, snapshot};

fn key() -> impl Strategy<Value = String> {
    (0u8..6).prop_map(|k| format!("k{k:02}"))
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
        "[a-z\"\\\\é]{0,6}".prop_map(Value::String),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::Null),
    ]
}

fn value() -> impl Strategy<Value = Value> {
    scalar().prop_recursive(2, 12, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,3}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().rev().collect())),
        ]
    })
}

fn event() -> impl Strategy<Value = NewEvent> {
    prop_oneof![
        4 => (key(), -5i64..6).prop_map(|(k, by)| inc(&k, by)),
        2 => (key(), value()).prop_map(|(k, v)| set(&k, v)),
        1 => key().prop_map(|k| del(&k)),
        1 => (key(), key()).prop_map(|(a, b)| copy(&a, &b)),
        1 => value().prop_map(|v| NewEvent::new("note", json!({"v": v}))),
    ]
}

/// Events and, for each, whether a batch ends after it.
fn history() -> impl Strategy<Value = Vec<(NewEvent, bool)>> {
    prop::collection::vec((event(), any::<bool>()), 0..40)
}

fn batches(history: &[(NewEvent, bool)]) -> Vec<Vec<NewEvent>> {
    let mut out = vec![Vec::new()];
    for (event, cut) in history {
        out.last_mut().unwrap().push(event.clone());
        if *cut {
            out.push(Vec::new());
        }
    }
    out
}

fn feed(log: &mut dyn EventLog, batches: Vec<Vec<NewEvent>>) {
    for batch in batches {
        log.append(batch).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn batch_boundaries_do_not_change_projections_or_chain(history in history()) {
        let events: Vec<NewEvent> = history.iter().map(|(e, _)| e.clone()).collect();
        let mut cut = MemoryJournal::new(Tally);
        feed(&mut cut, batches(&history));
        let mut whole = MemoryJournal::new(Tally);
        feed(&mut whole, vec![events.clone()]);
        let mut single = MemoryJournal::new(Tally);
        feed(&mut single, events.into_iter().map(|e| vec![e]).collect());

        prop_assert_eq!(snapshot(&cut), snapshot(&whole));
        prop_assert_eq!(snapshot(&cut), snapshot(&single));
        prop_assert_eq!(cut.head(), whole.head());
        prop_assert_eq!(cut.head(), single.head());
        prop_assert_eq!(cut.read_from(1).unwrap(), single.read_from(1).unwrap());
    }

    #[test]
    fn rebuild_equals_incremental_update(history in history()) {
        let mut log = MemoryJournal::new(Tally);
        feed(&mut log, batches(&history));
        let report = log.verify().unwrap();
        prop_assert!(report.is_ok(), "{}", report);
        let incremental = snapshot(&log);
        log.rebuild().unwrap();
        prop_assert_eq!(snapshot(&log), incremental);
    }
}

proptest! {
    // Each case opens a database and flushes every batch: fewer cases.
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn sled_agrees_with_memory_and_survives_reopen(history in history()) {
        let tmp = TempDir::new().unwrap();
        let dir = tmp.path().join("j");
        let mut memory = MemoryJournal::new(Tally);
        feed(&mut memory, batches(&history));
        {
            let mut disk = open_writer(&dir, Tally).unwrap();
            feed(&mut disk, batches(&history));
            prop_assert_eq!(snapshot(&disk), snapshot(&memory));
        }
        let disk = open_reader(&dir, Tally).unwrap();
        prop_assert_eq!(disk.head(), memory.head());
        prop_assert_eq!(disk.read_from(1).unwrap(), memory.read_from(1).unwrap());
        prop_assert_eq!(snapshot(&disk), snapshot(&memory));
        let report = disk.verify().unwrap();
        prop_assert!(report.is_ok(), "{}", report);
        drop(disk);

        let mut disk = open_writer(&dir, Tally).unwrap();
        disk.rebuild().unwrap();
        prop_assert_eq!(snapshot(&disk), snapshot(&memory));
    }
}
