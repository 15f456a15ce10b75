//! Sled-only behaviour: durability across reopen, open modes, format version, projector
//! changes, and tampering with stored data.

use std::path::{Path, PathBuf};

use emend_journal::{
    ChainProblem, ErrorClass, ErrorKind, EventLog, EventRecord, FORMAT_VERSION, KeyDiff, NewEvent, ProjectError,
    ProjectionCheck, ProjectionState, Projector, open_reader, open_writer, rebuild, verify,
};
use serde_json::json;
use tempfile::TempDir;

use crate::common::{Tally, del, inc, set, snapshot};

/// The raw sled database of a closed journal (layout documented in `sled_journal.rs`).
/// sled's background flusher can hold the file lock for a moment after the
/// journal that owned it was dropped, so the raw open retries briefly.
pub fn raw_db(dir: &Path) -> sled::Db {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match sled::open(dir.join("sled")) {
            Ok(db) => return db,
            Err(e) if std::time::Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => panic!("open raw sled: {e}"),
        }
    }
}

fn journal_with_ten_events() -> (TempDir, PathBuf) {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().join("j");
    let mut log = open_writer(&dir, Tally).unwrap();
    log.append(vec![inc("a", 1), inc("b", 2), set("s", json!({"x": 1.5}))]).unwrap();
    log.append(vec![inc("a", 3), del("b"), inc("c", 4), inc("a", 5)]).unwrap();
    log.append(vec![inc("d", 6), set("s", json!([0.1, 0.2])), inc("a", 7)]).unwrap();
    assert_eq!(log.head().seq, 10);
    (tmp, dir)
}

#[test]
fn batches_survive_reopen_and_the_chain_continues() {
    let (_tmp, dir) = journal_with_ten_events();
    let (events, head, snap) = {
        let log = open_reader(&dir, Tally).unwrap();
        (log.read_from(1).unwrap(), log.head(), snapshot(&log))
    };
    assert_eq!(events.len(), 10);
    assert_eq!(head.seq, 10);
    assert_eq!(snap["counts"], vec![("a".into(), json!(16)), ("c".into(), json!(4)), ("d".into(), json!(6))]);

    let mut log = open_writer(&dir, Tally).unwrap();
    assert_eq!(log.read_from(1).unwrap(), events);
    let next = log.append(vec![inc("a", 1)]).unwrap();
    assert_eq!(next[0].seq, 11);
    assert_eq!(next[0].prev_hash, head.hash);
    assert!(log.verify().unwrap().is_ok());
}

#[test]
fn reader_cannot_append_or_rebuild() {
    let (_tmp, dir) = journal_with_ten_events();
    let mut log = open_reader(&dir, Tally).unwrap();
    assert!(matches!(log.append(vec![inc("a", 1)]).unwrap_err().kind(), ErrorKind::ReadOnly));
    assert!(matches!(log.rebuild().unwrap_err().kind(), ErrorKind::ReadOnly));
    assert_eq!(log.head().seq, 10);
}

#[test]
fn reader_never_creates_a_journal() {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().join("absent");
    let err = open_reader(&dir, Tally).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::NotFound { path } if *path == dir), "{err:?}");
    assert_eq!(err.exit_class(), ErrorClass::BadInput);
    assert!(err.kind().to_string().contains(&dir.display().to_string()));
    assert!(!dir.exists(), "a reader created {}", dir.display());

    // An existing but empty directory is not a journal either, and stays empty.
    std::fs::create_dir(&dir).unwrap();
    assert!(matches!(open_reader(&dir, Tally).unwrap_err().kind(), ErrorKind::NotFound { .. }));
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    assert!(matches!(verify(&dir, Tally).unwrap_err().kind(), ErrorKind::NotFound { .. }));
}

fn set_format_version(dir: &Path, version: u32) {
    let db = raw_db(dir);
    db.open_tree("meta").unwrap().insert("format_version", &version.to_be_bytes()).unwrap();
    db.flush().unwrap();
}

#[test]
fn format_version_mismatch_is_a_typed_error_naming_both_versions() {
    let (_tmp, dir) = journal_with_ten_events();
    // The stamp is where the layout says, so that the test below tampers with the real thing.
    {
        let db = raw_db(&dir);
        let stamp = db.open_tree("meta").unwrap().get("format_version").unwrap().unwrap();
        assert_eq!(stamp.as_ref(), FORMAT_VERSION.to_be_bytes());
    }
    set_format_version(&dir, 999);
    for err in
        [open_writer(&dir, Tally).unwrap_err(), open_reader(&dir, Tally).unwrap_err(), verify(&dir, Tally).unwrap_err()]
    {
        assert!(
            matches!(err.kind(), ErrorKind::FormatMismatch { found: 999, expected } if *expected == FORMAT_VERSION),
            "{err:?}"
        );
        assert_eq!(err.exit_class(), ErrorClass::BadInput);
        let message = err.kind().to_string();
        assert!(message.contains("999") && message.contains(&FORMAT_VERSION.to_string()), "{message}");
    }
    set_format_version(&dir, FORMAT_VERSION);
    assert!(verify(&dir, Tally).unwrap().is_ok());
}

/// Tally plus a third tree counting events per kind.
struct TallyWithKinds;

impl Projector for TallyWithKinds {
    fn trees(&self) -> Vec<String> {
        let mut trees = Tally.trees();
        trees.push("kinds".into());
        trees
    }
    fn project(&self, state: &mut dyn ProjectionState, event: &EventRecord) -> Result<(), ProjectError> {
        Tally.project(state, event)?;
        let n = state.get("kinds", &event.kind).and_then(|v| v.as_u64()).unwrap_or(0);
        state.put("kinds", &event.kind, json!(n + 1));
        Ok(())
    }
}

/// Only the counters.
struct CountsOnly;

impl Projector for CountsOnly {
    fn trees(&self) -> Vec<String> {
        vec!["counts".into()]
    }
    fn project(&self, state: &mut dyn ProjectionState, event: &EventRecord) -> Result<(), ProjectError> {
        if event.kind == "inc" {
            let k = event.payload["key"].as_str().ok_or("no key")?;
            let n = state.get("counts", k).and_then(|v| v.as_i64()).unwrap_or(0);
            state.put("counts", k, json!(n + event.payload["by"].as_i64().unwrap_or(0)));
        } else if event.kind == "del" {
            state.remove("counts", event.payload["key"].as_str().ok_or("no key")?);
        }
        Ok(())
    }
}

#[test]
fn projector_change_shows_in_verify_and_rebuild_fixes_it() {
    let (_tmp, dir) = journal_with_ten_events();
    let report = verify(&dir, TallyWithKinds).unwrap();
    assert!(!report.is_ok());
    let ProjectionCheck::Differ(diffs) = &report.projections else { panic!("{report}") };
    assert_eq!(diffs.len(), 1, "{report}");
    assert_eq!(diffs[0].tree, "kinds");
    assert_eq!(diffs[0].first_key, "del");
    assert_eq!(diffs[0].first, KeyDiff::OnlyRebuilt { rebuilt: "1".into() });
    assert_eq!(diffs[0].differing_keys, 3);

    rebuild(&dir, TallyWithKinds).unwrap();
    let report = verify(&dir, TallyWithKinds).unwrap();
    assert!(report.is_ok(), "{report}");
    let log = open_reader(&dir, TallyWithKinds).unwrap();
    assert_eq!(log.get("kinds", "inc").unwrap(), Some(json!(7)));
    drop(log);

    // A projector that drops trees: verify notes the leftovers, rebuild drops them.
    let report = verify(&dir, CountsOnly).unwrap();
    assert!(report.is_ok(), "{report}");
    assert_eq!(report.undeclared_trees, vec!["kinds".to_string(), "last".to_string()]);
    rebuild(&dir, CountsOnly).unwrap();
    assert!(verify(&dir, CountsOnly).unwrap().undeclared_trees.is_empty());
}

// ---- tampering -------------------------------------------------------------------------

fn events_tree(db: &sled::Db) -> sled::Tree {
    db.open_tree("events").unwrap()
}

fn key(seq: u64) -> [u8; 8] {
    seq.to_be_bytes()
}

fn chain_break(dir: &Path) -> emend_journal::ChainBreak {
    let report = verify(dir, Tally).unwrap();
    assert!(!report.is_ok());
    assert!(matches!(report.projections, ProjectionCheck::NotChecked { .. }), "{report}");
    report.chain_break.clone().unwrap_or_else(|| panic!("no chain break in {report}"))
}

#[test]
fn tamper_flipped_payload_byte_is_an_edit_at_that_seq() {
    let (_tmp, dir) = journal_with_ten_events();
    {
        let events = events_tree(&raw_db(&dir));
        let mut value = events.get(key(4)).unwrap().unwrap().to_vec();
        // `"by":3` -> `"by":2`: still a valid record, but not the one that was hashed.
        let at = value.windows(6).position(|w| w == b"\"by\":3").unwrap() + 5;
        value[at] ^= 0x01;
        events.insert(key(4), value).unwrap();
        events.flush().unwrap();
    }
    let b = chain_break(&dir);
    assert_eq!(b.seq, 4);
    assert!(matches!(b.problem, ChainProblem::HashMismatch { .. }), "{b}");
    assert_eq!(b.problem.category(), "edited");
    assert!(b.to_string().starts_with("seq 4: edited"), "{b}");

    // The record still decodes, so plain reads do not notice; verify does.
    let report = verify(&dir, Tally).unwrap();
    assert_eq!(report.events_checked, 3);
    assert_eq!(report.last_good.seq, 3);
}

#[test]
fn tamper_flipped_structural_byte_is_an_edit_and_reads_name_the_seq() {
    let (_tmp, dir) = journal_with_ten_events();
    {
        let events = events_tree(&raw_db(&dir));
        let mut value = events.get(key(7)).unwrap().unwrap().to_vec();
        value[0] ^= 0x01; // `{` -> `z`
        events.insert(key(7), value).unwrap();
        events.flush().unwrap();
    }
    let b = chain_break(&dir);
    assert_eq!(b.seq, 7);
    assert!(matches!(b.problem, ChainProblem::Undecodable { .. }), "{b}");
    assert_eq!(b.problem.category(), "edited");

    let log = open_reader(&dir, Tally).unwrap();
    let err = log.read_from(1).unwrap_err();
    assert_eq!(err.seq, Some(7), "{err:?}");
    assert!(matches!(err.kind(), ErrorKind::Corrupt { .. }));
    assert_eq!(log.read_from(8).unwrap().len(), 3);
}

#[test]
fn tamper_deleted_event_is_missing_at_that_seq() {
    let (_tmp, dir) = journal_with_ten_events();
    {
        let events = events_tree(&raw_db(&dir));
        events.remove(key(6)).unwrap();
        events.flush().unwrap();
    }
    let b = chain_break(&dir);
    assert_eq!(b.seq, 6);
    assert_eq!(b.problem, ChainProblem::Missing { next_present: Some(7) });
    assert_eq!(b.problem.category(), "missing");
}

#[test]
fn tamper_deleted_last_event_is_missing_and_the_writer_refuses() {
    let (_tmp, dir) = journal_with_ten_events();
    {
        let events = events_tree(&raw_db(&dir));
        events.remove(key(10)).unwrap();
        events.flush().unwrap();
    }
    let b = chain_break(&dir);
    assert_eq!(b.seq, 10);
    assert_eq!(b.problem, ChainProblem::Missing { next_present: None });

    let err = open_writer(&dir, Tally).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Corrupt { .. }), "{err:?}");
}

#[test]
fn tamper_swapped_events_are_out_of_order_at_the_first() {
    let (_tmp, dir) = journal_with_ten_events();
    {
        let events = events_tree(&raw_db(&dir));
        let three = events.get(key(3)).unwrap().unwrap();
        let seven = events.get(key(7)).unwrap().unwrap();
        events.insert(key(3), seven).unwrap();
        events.insert(key(7), three).unwrap();
        events.flush().unwrap();
    }
    let b = chain_break(&dir);
    assert_eq!(b.seq, 3);
    assert_eq!(b.problem, ChainProblem::OutOfOrder { found_seq: 7 });
    assert_eq!(b.problem.category(), "out of order");
}

#[test]
fn tamper_rehashed_edit_breaks_the_next_link() {
    let (_tmp, dir) = journal_with_ten_events();
    {
        let events = events_tree(&raw_db(&dir));
        let mut record: EventRecord = serde_json::from_slice(&events.get(key(5)).unwrap().unwrap()).unwrap();
        record.payload = json!({"key": "b", "by": 1000});
        record.hash = record.compute_hash();
        events.insert(key(5), serde_json::to_vec(&record).unwrap()).unwrap();
        events.flush().unwrap();
    }
    let b = chain_break(&dir);
    assert_eq!(b.seq, 6);
    assert!(matches!(b.problem, ChainProblem::BrokenLink { .. }), "{b}");
}

#[test]
fn tamper_projection_value_is_named_by_tree_and_key() {
    let (_tmp, dir) = journal_with_ten_events();
    {
        let db = raw_db(&dir);
        let counts = db.open_tree("proj:counts").unwrap();
        assert_eq!(counts.get("c").unwrap().unwrap().as_ref(), b"4");
        counts.insert("c", &b"5"[..]).unwrap();
        counts.insert("zz", &b"1"[..]).unwrap();
        db.flush().unwrap();
    }
    let report = verify(&dir, Tally).unwrap();
    assert!(report.chain_break.is_none());
    assert!(!report.is_ok());
    let ProjectionCheck::Differ(diffs) = &report.projections else { panic!("{report}") };
    assert_eq!(diffs.len(), 1);
    assert_eq!(diffs[0].tree, "counts");
    assert_eq!(diffs[0].first_key, "c");
    assert_eq!(diffs[0].first, KeyDiff::Differs { stored: "5".into(), rebuilt: "4".into() });
    assert_eq!(diffs[0].differing_keys, 2);
    assert!(report.to_string().contains("projection `counts`"), "{report}");

    rebuild(&dir, Tally).unwrap();
    assert!(verify(&dir, Tally).unwrap().is_ok());
}

#[test]
fn event_kinds_the_projector_ignores_are_stored_and_chained() {
    let (_tmp, dir) = journal_with_ten_events();
    let mut log = open_writer(&dir, Tally).unwrap();
    log.append(vec![NewEvent::new("round", json!({"n": 1}))]).unwrap();
    assert_eq!(log.head().seq, 11);
    assert!(log.verify().unwrap().is_ok());
}
