//! The published read view (readers never take the lock), the writer's refusal of a
//! damaged journal, the free-space check, and operator edges of the LOCK file.

use std::io::Write;
use std::path::{Path, PathBuf};

use emend_journal::{
    ErrorClass, ErrorKind, EventLog, LOCK_FILE, LockHolder, OpenMode, VIEW_FILE, ViewSource, open_view, open_writer,
    rebuild, verify,
};
use serde_json::json;
use tempfile::TempDir;

use crate::common::{Tally, del, inc, set, snapshot};
use crate::disk::raw_db;

fn ten_events() -> (TempDir, PathBuf) {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().join("j");
    let mut log = open_writer(&dir, Tally).unwrap();
    log.append(vec![inc("a", 1), inc("b", 2), set("s", json!({"x": 1.5}))]).unwrap();
    log.append(vec![inc("a", 3), del("b"), inc("c", 4), inc("a", 5)]).unwrap();
    log.append(vec![inc("d", 6), set("s", json!([0.1, 0.2])), inc("a", 7)]).unwrap();
    (tmp, dir)
}

#[test]
fn readers_open_the_view_while_the_writer_holds_the_journal_and_see_each_committed_batch() {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().join("j");
    let mut writer = open_writer(&dir, Tally).unwrap();
    assert_eq!(open_view(&dir, Tally).unwrap().head().seq, 0);
    for round in 1..=5u64 {
        writer.append(vec![inc("a", round as i64), inc(&format!("k{round}"), 1)]).unwrap();
        let view = open_view(&dir, Tally).unwrap();
        assert_eq!(view.source(), ViewSource::Published);
        assert_eq!(view.head(), writer.head());
        assert_eq!(view.read_from(1).unwrap(), writer.read_from(1).unwrap());
        assert_eq!(snapshot(&view), snapshot(&writer));
        assert!(view.verify().unwrap().is_ok());
    }
    // The writer still holds its lock: readers did not disturb it.
    let holder: LockHolder = serde_json::from_str(&std::fs::read_to_string(dir.join(LOCK_FILE)).unwrap()).unwrap();
    assert_eq!(holder.mode, OpenMode::Writer);
    let mut view = open_view(&dir, Tally).unwrap();
    assert!(matches!(view.append(vec![inc("a", 1)]).unwrap_err().kind(), ErrorKind::ReadOnly));
}

#[test]
fn a_torn_tail_is_ignored_by_readers_and_cut_by_the_next_writer() {
    let (_tmp, dir) = ten_events();
    let path = dir.join(VIEW_FILE);
    let good = std::fs::metadata(&path).unwrap().len();
    // A frame whose length runs past the end: a write in progress, or cut by a crash.
    let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
    f.write_all(&1000u64.to_be_bytes()).unwrap();
    f.write_all(b"{\"seq\":11,").unwrap();
    drop(f);
    let view = open_view(&dir, Tally).unwrap();
    assert_eq!(view.head().seq, 10);
    assert!(view.pending_bytes() > 0);

    let mut writer = open_writer(&dir, Tally).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), good);
    writer.append(vec![inc("z", 1)]).unwrap();
    drop(writer);
    let view = open_view(&dir, Tally).unwrap();
    assert_eq!(view.head().seq, 11);
    assert!(verify(&dir, Tally).unwrap().is_ok());
}

#[test]
fn a_damaged_view_is_refused_by_readers_and_writers_until_repair_rebuilds_it_from_the_store() {
    let (_tmp, dir) = ten_events();
    let path = dir.join(VIEW_FILE);
    let mut bytes = std::fs::read(&path).unwrap();
    // Inside the first frame's body: `"by":1` -> `"by":0`.
    let at = bytes.windows(6).position(|w| w == b"\"by\":1").unwrap() + 5;
    bytes[at] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let err = open_view(&dir, Tally).unwrap_err();
    assert_eq!(err.exit_class(), ErrorClass::Failed);
    assert_eq!(err.seq, Some(1));
    let text = err.kind().to_string();
    assert!(text.contains("checksum") && text.contains("emend journal repair"), "{text}");

    let err = open_writer(&dir, Tally).unwrap_err();
    assert_eq!(err.seq, Some(1), "{err:?}");
    assert!(err.kind().to_string().contains("emend journal repair"), "{}", err.kind());
    assert_eq!(std::fs::read(&path).unwrap(), bytes, "a refusing writer left the view as it was");
    let report = verify(&dir, Tally).unwrap();
    assert!(!report.is_ok());
    assert!(matches!(&report.view, emend_journal::ViewCheck::Differs(d) if d.seq == 1), "{report}");

    let (writer, found) = emend_journal::repair(&dir, Tally).unwrap();
    assert_eq!(found.unwrap().seq, 1);
    drop(writer);
    let view = open_view(&dir, Tally).unwrap();
    assert_eq!(view.head().seq, 10);
    assert!(verify(&dir, Tally).unwrap().is_ok());
    let (_, found) = emend_journal::repair(&dir, Tally).unwrap();
    assert_eq!(found, None);
}

#[test]
fn a_missing_view_is_refused_by_readers_and_written_by_the_next_writer() {
    let (_tmp, dir) = ten_events();
    std::fs::remove_file(dir.join(VIEW_FILE)).unwrap();
    // Readers never open the store: they refuse, naming `emend journal repair`.
    let err = open_view(&dir, Tally).unwrap_err();
    assert_eq!(err.exit_class(), emend_journal::ErrorClass::Failed, "{err}");
    assert!(err.kind().to_string().contains("emend journal repair"), "{}", err.kind());
    drop(open_writer(&dir, Tally).unwrap());
    let view = open_view(&dir, Tally).unwrap();
    assert_eq!(view.source(), ViewSource::Published);
    assert_eq!(view.head().seq, 10);
}

#[test]
fn the_view_reads_from_a_read_only_directory() {
    let (_tmp, dir) = ten_events();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
    // Root ignores permission bits; the reader never writes in any case, which is what
    // this checks: no file in the directory changes.
    let before: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    let view = open_view(&dir, Tally).unwrap();
    assert_eq!(view.head().seq, 10);
    let after: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(before, after);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
}

// ---- the writer refuses a damaged journal ---------------------------------------------------

fn events_tree(dir: &Path) -> (sled::Db, sled::Tree) {
    let db = raw_db(dir);
    let t = db.open_tree("events").unwrap();
    (db, t)
}

fn refused(dir: &Path) -> emend_journal::JournalError {
    let err = open_writer(dir, Tally).unwrap_err();
    assert_eq!(err.exit_class(), ErrorClass::Failed, "{err:?}");
    assert!(matches!(err.kind(), ErrorKind::Corrupt { .. }), "{err:?}");
    assert!(err.kind().to_string().contains("emend journal verify"), "{}", err.kind());
    err
}

#[test]
fn the_writer_refuses_every_kind_of_tampering_naming_the_seq_or_projection() {
    type Tamper = fn(&Path);
    let cases: [(&str, Tamper, Option<u64>, &str); 6] = [
        (
            "flipped byte",
            |dir| {
                let (_db, ev) = events_tree(dir);
                let mut v = ev.get(4u64.to_be_bytes()).unwrap().unwrap().to_vec();
                let at = v.windows(6).position(|w| w == b"\"by\":3").unwrap() + 5;
                v[at] ^= 0x01;
                ev.insert(4u64.to_be_bytes(), v).unwrap();
                ev.flush().unwrap();
            },
            Some(4),
            "edited",
        ),
        (
            "deleted event",
            |dir| {
                let (_db, ev) = events_tree(dir);
                ev.remove(6u64.to_be_bytes()).unwrap();
                ev.flush().unwrap();
            },
            Some(6),
            "missing",
        ),
        (
            "swapped events",
            |dir| {
                let (_db, ev) = events_tree(dir);
                let three = ev.get(3u64.to_be_bytes()).unwrap().unwrap();
                let seven = ev.get(7u64.to_be_bytes()).unwrap().unwrap();
                ev.insert(3u64.to_be_bytes(), seven).unwrap();
                ev.insert(7u64.to_be_bytes(), three).unwrap();
                ev.flush().unwrap();
            },
            Some(3),
            "out of order",
        ),
        (
            "cut tail",
            |dir| {
                let (_db, ev) = events_tree(dir);
                ev.remove(10u64.to_be_bytes()).unwrap();
                ev.remove(9u64.to_be_bytes()).unwrap();
                ev.flush().unwrap();
            },
            Some(9),
            "missing",
        ),
        (
            "edited projection",
            |dir| {
                let db = raw_db(dir);
                let counts = db.open_tree("proj:counts").unwrap();
                counts.insert("c", &b"5"[..]).unwrap();
                db.flush().unwrap();
            },
            None,
            "projection `counts`",
        ),
        (
            "added projection key",
            |dir| {
                let db = raw_db(dir);
                let counts = db.open_tree("proj:counts").unwrap();
                counts.insert("zz", &b"1"[..]).unwrap();
                db.flush().unwrap();
            },
            None,
            "projection `counts`",
        ),
    ];
    for (name, tamper, seq, needle) in cases {
        let (_tmp, dir) = ten_events();
        let before = std::fs::read(dir.join(VIEW_FILE)).unwrap();
        tamper(&dir);
        let err = refused(&dir);
        assert_eq!(err.seq, seq, "{name}: {err:?}");
        assert!(err.kind().to_string().contains(needle), "{name}: {}", err.kind());
        // Refusing wrote nothing: not even the view changed.
        assert_eq!(std::fs::read(dir.join(VIEW_FILE)).unwrap(), before, "{name}");
        // And it keeps refusing.
        refused(&dir);
    }
}

#[test]
fn rebuild_repairs_an_edited_projection_and_the_writer_accepts_it_again() {
    let (_tmp, dir) = ten_events();
    {
        let db = raw_db(&dir);
        db.open_tree("proj:counts").unwrap().insert("c", &b"5"[..]).unwrap();
        db.flush().unwrap();
    }
    refused(&dir);
    rebuild(&dir, Tally).unwrap();
    let mut log = open_writer(&dir, Tally).unwrap();
    log.append(vec![inc("c", 1)]).unwrap();
    assert_eq!(log.get("counts", "c").unwrap(), Some(json!(5)));
}

#[test]
fn a_writer_short_of_free_space_writes_nothing() {
    let (_tmp, dir) = ten_events();
    let mut log = open_writer(&dir, Tally).unwrap();
    log.set_min_free_bytes(u64::MAX);
    let err = log.append(vec![inc("a", 1)]).unwrap_err();
    let ErrorKind::DiskFull { available, needed, .. } = err.kind() else { panic!("{err:?}") };
    assert!(available < needed);
    assert_eq!(err.exit_class(), ErrorClass::Failed);
    assert_eq!(log.head().seq, 10);
    log.set_min_free_bytes(0);
    assert_eq!(log.append(vec![inc("a", 1)]).unwrap()[0].seq, 11);
    drop(log);
    assert!(verify(&dir, Tally).unwrap().is_ok());
}

#[test]
fn leftovers_of_an_interrupted_snapshot_are_removed_on_open() {
    let (_tmp, dir) = ten_events();
    let leftover = dir.join("sled").join("snap.00000000000000FF.generating");
    std::fs::write(&leftover, b"").unwrap();
    std::fs::write(dir.join("events.log.tmp"), b"half a view").unwrap();
    let log = open_writer(&dir, Tally).unwrap();
    assert!(!leftover.exists());
    assert!(!dir.join("events.log.tmp").exists());
    assert_eq!(log.head().seq, 10);
    drop(log);
    assert!(verify(&dir, Tally).unwrap().is_ok());
}

// ---- the LOCK file ---------------------------------------------------------------------

#[test]
fn an_unreadable_lock_file_is_taken_over_as_stale_with_a_warning_that_says_so() {
    let (_tmp, dir) = ten_events();
    std::fs::write(dir.join(LOCK_FILE), [0xff, 0xfe, 0x00, 0x41]).unwrap();
    let (log, logged) = crate::locks::capture_logs(|| open_writer(&dir, Tally));
    let log = log.unwrap();
    assert!(log.took_over().is_none());
    assert!(logged.contains("treated as stale"), "{logged}");
    drop(log);
    assert!(open_view(&dir, Tally).is_ok());
}

#[test]
fn a_stale_lock_naming_a_live_pid_does_not_say_it_died() {
    let (_tmp, dir) = ten_events();
    // This process is alive, and holds no lock on the journal.
    let live = LockHolder {
        pid: std::process::id(),
        host: std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_owned(),
        started_at: "2020-01-02T03:04:05Z".into(),
        mode: OpenMode::Writer,
    };
    std::fs::write(dir.join(LOCK_FILE), serde_json::to_string(&live).unwrap()).unwrap();
    let (log, logged) = crate::locks::capture_logs(|| open_writer(&dir, Tally));
    assert!(log.is_ok());
    assert!(logged.contains("stale journal lock"), "{logged}");
    assert!(!logged.contains("died"), "{logged}");
    assert!(logged.contains("without clearing it"), "{logged}");
}
