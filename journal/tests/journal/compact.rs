//! The compact layout: large records stored compressed, trees kept in memory instead of
//! stored, and journals written with those trees stored (before) still open and verify.

use std::path::PathBuf;

use emend_journal::{
    EventLog, EventRecord, NewEvent, ProjectError, ProjectionCheck, ProjectionState, Projector, open_reader, open_view,
    open_writer, rebuild, verify,
};
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::common::{Tally, inc, snapshot};
use crate::disk::raw_db;

/// [`Tally`] with its `last` tree kept in memory only.
struct TallyLastInMemory;

impl Projector for TallyLastInMemory {
    fn trees(&self) -> Vec<String> {
        Tally.trees()
    }
    fn project(&self, state: &mut dyn ProjectionState, event: &EventRecord) -> Result<(), ProjectError> {
        Tally.project(state, event)
    }
    fn memory_trees(&self) -> Vec<String> {
        vec!["last".into()]
    }
}

const ZSTD_MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];

/// An event whose JSON line is well over 1 KiB: a round with many per-question results.
fn big(key: &str, by: i64) -> NewEvent {
    let results: Vec<Value> = (0..200).map(|q| json!({"q": format!("q{q:04}"), "correct": q % 3 != 0})).collect();
    NewEvent::new("inc", json!({"key": key, "by": by, "results": results}))
}

fn written(projector: impl Projector + 'static) -> (TempDir, PathBuf) {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().join("j");
    let mut log = open_writer(&dir, projector).unwrap();
    log.append(vec![inc("a", 1), big("b", 2), inc("c", 3)]).unwrap();
    log.append(vec![big("a", 4), inc("b", 5)]).unwrap();
    (tmp, dir)
}

#[test]
fn large_records_are_stored_compressed_and_small_ones_as_json_and_both_read_back() {
    let (_tmp, dir) = written(Tally);
    {
        let db = raw_db(&dir);
        let events = db.open_tree("events").unwrap();
        let stored = |seq: u64| events.get(seq.to_be_bytes()).unwrap().unwrap().to_vec();
        assert!(stored(2).starts_with(&ZSTD_MAGIC), "the large record is compressed");
        assert!(stored(1).starts_with(b"{"), "a small record stays plain JSON");
        // Compressed well: 200 results of ~30 bytes each in far fewer bytes.
        assert!(stored(2).len() < 1500, "{} bytes", stored(2).len());
    }
    let reader = open_reader(&dir, Tally).unwrap();
    let records = reader.read_from(1).unwrap();
    assert_eq!(records.len(), 5);
    assert_eq!(records[1].payload["results"].as_array().unwrap().len(), 200);
    assert!(reader.verify().unwrap().is_ok());
    let view = open_view(&dir, Tally).unwrap();
    assert_eq!(view.read_from(1).unwrap(), records);
    assert_eq!(snapshot(&view), snapshot(&reader));
}

#[test]
fn a_damaged_compressed_record_breaks_the_chain_at_its_seq() {
    let (_tmp, dir) = written(Tally);
    {
        let db = raw_db(&dir);
        let events = db.open_tree("events").unwrap();
        let mut value = events.get(4u64.to_be_bytes()).unwrap().unwrap().to_vec();
        assert!(value.starts_with(&ZSTD_MAGIC));
        let at = value.len() / 2;
        value[at] ^= 0x55;
        events.insert(4u64.to_be_bytes(), value).unwrap();
        events.flush().unwrap();
    }
    let report = verify(&dir, Tally).unwrap();
    assert_eq!(report.chain_break.as_ref().map(|b| b.seq), Some(4), "{report}");
    let err = open_writer(&dir, Tally).unwrap_err();
    assert_eq!(err.seq, Some(4), "{err}");
}

#[test]
fn memory_trees_are_not_stored_yet_read_scan_and_verify_like_stored_ones() {
    let (_tmp, dir) = written(TallyLastInMemory);
    let (_tmp2, reference) = written(Tally);
    {
        let db = raw_db(&dir);
        let names: Vec<String> = db.tree_names().iter().map(|n| String::from_utf8_lossy(n).into_owned()).collect();
        assert!(names.contains(&"proj:counts".to_string()), "{names:?}");
        assert!(!names.contains(&"proj:last".to_string()), "{names:?}");
    }
    let expected = snapshot(&open_reader(&reference, Tally).unwrap());
    let reader = open_reader(&dir, TallyLastInMemory).unwrap();
    assert_eq!(snapshot(&reader), expected);
    assert_eq!(reader.get("last", "a").unwrap(), Some(json!({"by": 4, "seq": 4})));
    assert!(reader.verify().unwrap().is_ok());
    drop(reader);

    // A writer keeps the tree up to date across appends; its verify compares that copy.
    let mut writer = open_writer(&dir, TallyLastInMemory).unwrap();
    writer.append(vec![inc("z", 9)]).unwrap();
    assert_eq!(writer.get("last", "z").unwrap(), Some(json!({"by": 9, "seq": 6})));
    let report = writer.verify().unwrap();
    assert!(report.is_ok(), "{report}");
    assert!(matches!(&report.projections, ProjectionCheck::Match { trees } if trees.contains(&"last".to_string())));
    writer.rebuild().unwrap();
    assert_eq!(writer.get("last", "z").unwrap(), Some(json!({"by": 9, "seq": 6})));
    drop(writer);
    assert!(verify(&dir, TallyLastInMemory).unwrap().is_ok());
    assert_eq!(open_view(&dir, TallyLastInMemory).unwrap().get("last", "z").unwrap(), Some(json!({"by": 9, "seq": 6})));
}

#[test]
fn a_journal_that_stores_a_tree_now_kept_in_memory_verifies_and_the_writer_migrates_it() {
    let (_tmp, dir) = written(Tally);
    let expected = snapshot(&open_reader(&dir, Tally).unwrap());

    // A reader leaves the old layout alone and checks the stored copy against the rebuild.
    let reader = open_reader(&dir, TallyLastInMemory).unwrap();
    assert_eq!(snapshot(&reader), expected);
    assert!(reader.verify().unwrap().is_ok());
    drop(reader);
    {
        let db = raw_db(&dir);
        let last = db.open_tree("proj:last").unwrap();
        last.insert("a", &b"{\"by\":99,\"seq\":4}"[..]).unwrap();
        last.flush().unwrap();
    }
    let report = verify(&dir, TallyLastInMemory).unwrap();
    assert!(!report.is_ok(), "an edited stored copy is reported: {report}");
    {
        let db = raw_db(&dir);
        db.open_tree("proj:last").unwrap().insert("a", &b"{\"by\":4,\"seq\":4}"[..]).unwrap();
        db.flush().unwrap();
    }

    // The writer drops the stored copy (and its digest) and carries on.
    let mut writer = open_writer(&dir, TallyLastInMemory).unwrap();
    assert_eq!(snapshot(&writer), expected);
    writer.append(vec![inc("a", 10)]).unwrap();
    drop(writer);
    {
        let db = raw_db(&dir);
        let names: Vec<String> = db.tree_names().iter().map(|n| String::from_utf8_lossy(n).into_owned()).collect();
        assert!(!names.contains(&"proj:last".to_string()), "{names:?}");
        assert!(db.open_tree("meta").unwrap().get("digest:last").unwrap().is_none());
    }
    assert!(verify(&dir, TallyLastInMemory).unwrap().is_ok());
    assert_eq!(
        open_reader(&dir, TallyLastInMemory).unwrap().get("last", "a").unwrap(),
        Some(json!({"by": 10, "seq": 6}))
    );

    // A projector that stores the tree again gets it back from the events by `rebuild`.
    rebuild(&dir, Tally).unwrap();
    assert!(verify(&dir, Tally).unwrap().is_ok());
}
