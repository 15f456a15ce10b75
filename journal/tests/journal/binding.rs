//! The view is a cache of the store: what readers, writers, `verify` and `repair` find for
//! each way the view and the store can come apart.

use std::path::{Path, PathBuf};

use emend_journal::{
    ErrorClass, EventLog, SEAL_FILE, VIEW_FILE, ViewCheck, ViewSource, open_view, open_writer, repair, verify,
};
use sha2::{Digest, Sha256};
use tempfile::TempDir;

use crate::common::{Tally, inc};
use crate::disk::raw_db;

const HEADER: &[u8] = b"emend-journal-view/1\n";

/// Six batches, 12 events.
fn six_batches() -> (TempDir, PathBuf) {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().join("j");
    let mut log = open_writer(&dir, Tally).unwrap();
    for b in 0..6i64 {
        log.append(vec![inc("a", b), inc(&format!("k{b}"), 1)]).unwrap();
    }
    (tmp, dir)
}

fn frames(dir: &Path) -> Vec<Vec<u8>> {
    let bytes = std::fs::read(dir.join(VIEW_FILE)).unwrap();
    let mut at = HEADER.len();
    let mut out = Vec::new();
    while at < bytes.len() {
        let len = u64::from_be_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
        out.push(bytes[at..at + 16 + len].to_vec());
        at += 16 + len;
    }
    out
}

fn write_frames(dir: &Path, frames: &[Vec<u8>]) {
    let mut bytes = HEADER.to_vec();
    frames.iter().for_each(|f| bytes.extend_from_slice(f));
    std::fs::write(dir.join(VIEW_FILE), bytes).unwrap();
}

/// The whole history rewritten (`by` of the first event changed), chain and checksum
/// recomputed; returns the forged head's seq and hash.
fn forge(dir: &Path) -> (u64, String) {
    let records = open_view(dir, Tally).unwrap().read_from(1).unwrap();
    let mut prev = emend_journal::ZERO_HASH.to_owned();
    let mut body = Vec::new();
    for mut r in records {
        if r.seq == 1 {
            r.payload["by"] = serde_json::json!(100);
        }
        r.prev_hash = prev;
        r.hash = r.compute_hash();
        prev = r.hash.clone();
        body.extend_from_slice(r.to_json_line().as_bytes());
        body.push(b'\n');
    }
    let mut frame = (body.len() as u64).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    frame.extend_from_slice(&Sha256::digest(&body)[..8]);
    write_frames(dir, &[frame]);
    (12, prev)
}

fn refused_naming(err: emend_journal::JournalError, seq: u64) {
    assert_eq!(err.exit_class(), ErrorClass::Failed, "{err:?}");
    assert_eq!(err.seq, Some(seq), "{err:?}");
    assert!(err.kind().to_string().contains("emend journal repair"), "{}", err.kind());
}

fn view_differs_at(dir: &Path, seq: u64) {
    let report = verify(dir, Tally).unwrap();
    assert!(!report.is_ok(), "{report}");
    assert!(matches!(&report.view, ViewCheck::Differs(d) if d.seq == seq), "{report}");
}

#[test]
fn a_frame_missing_from_the_middle_is_found_by_readers_writers_and_verify_and_repaired() {
    let (_tmp, dir) = six_batches();
    let mut f = frames(&dir);
    f.remove(2); // seq 5 and 6
    write_frames(&dir, &f);
    refused_naming(open_view(&dir, Tally).unwrap_err(), 5);
    refused_naming(open_writer(&dir, Tally).unwrap_err(), 5);
    view_differs_at(&dir, 5);
    let (log, found) = repair(&dir, Tally).unwrap();
    assert_eq!(found.unwrap().seq, 5);
    drop(log);
    assert_eq!(open_view(&dir, Tally).unwrap().head().seq, 12);
    assert!(verify(&dir, Tally).unwrap().is_ok());
}

#[test]
fn a_forged_view_with_a_recomputed_chain_is_refused_by_readers_at_the_seal_and_by_writers_and_verify() {
    let (_tmp, dir) = six_batches();
    forge(&dir);
    // Readers check against the seal (seq 12), writers and `verify` against the store.
    refused_naming(open_view(&dir, Tally).unwrap_err(), 12);
    refused_naming(open_writer(&dir, Tally).unwrap_err(), 1);
    view_differs_at(&dir, 1);
}

#[test]
fn while_a_writer_holds_the_store_readers_check_the_view_against_its_seal() {
    let (_tmp, dir) = six_batches();
    let writer = open_writer(&dir, Tally).unwrap();
    let good = std::fs::read(dir.join(VIEW_FILE)).unwrap();
    // Cut: the view ends before the seal.
    let f = frames(&dir);
    write_frames(&dir, &f[..4]);
    refused_naming(open_view(&dir, Tally).unwrap_err(), 9);
    // Forged without the seal: the sealed seq carries another hash.
    std::fs::write(dir.join(VIEW_FILE), &good).unwrap();
    let seal = std::fs::read(dir.join(SEAL_FILE)).unwrap();
    let (seq, hash) = forge(&dir);
    refused_naming(open_view(&dir, Tally).unwrap_err(), 12);
    // What a reader cannot find: a forger who also rewrote the seal (readers never open
    // the store). The next writer and `verify` find it.
    let forged_seal = serde_json::json!({"seq": seq, "hash": hash, "len": 0, "prev_seq": 0, "prev_len": 0});
    std::fs::write(dir.join(SEAL_FILE), forged_seal.to_string()).unwrap();
    assert_eq!(open_view(&dir, Tally).unwrap().head().hash, hash);
    drop(writer);
    assert_eq!(open_view(&dir, Tally).unwrap().head().hash, hash);
    refused_naming(open_writer(&dir, Tally).unwrap_err(), 1);
    view_differs_at(&dir, 1);
    std::fs::write(dir.join(VIEW_FILE), &good).unwrap();
    std::fs::write(dir.join(SEAL_FILE), &seal).unwrap();
    assert_eq!(open_view(&dir, Tally).unwrap().head().seq, 12);
}

#[test]
fn a_view_ahead_of_its_seal_is_a_batch_being_published_not_a_forgery() {
    let (_tmp, dir) = six_batches();
    let mut writer = open_writer(&dir, Tally).unwrap();
    let seal = std::fs::read(dir.join(SEAL_FILE)).unwrap();
    writer.append(vec![inc("z", 1)]).unwrap();
    // The reader read the seal before the writer replaced it, the view after.
    std::fs::write(dir.join(SEAL_FILE), &seal).unwrap();
    let view = open_view(&dir, Tally).unwrap();
    assert_eq!(view.head(), writer.head());
}

#[test]
fn a_store_truncated_by_sled_is_refused_by_writers_and_verify_while_readers_read_the_intact_view() {
    for rewrite_binding in [false, true] {
        let (_tmp, dir) = six_batches();
        let records = open_view(&dir, Tally).unwrap().read_from(1).unwrap();
        {
            let db = raw_db(&dir);
            let events = db.open_tree("events").unwrap();
            events.remove(12u64.to_be_bytes()).unwrap();
            events.remove(11u64.to_be_bytes()).unwrap();
            let meta = db.open_tree("meta").unwrap();
            let head = serde_json::json!({"seq": 10, "hash": records[9].hash});
            meta.insert("head", serde_json::to_vec(&head).unwrap()).unwrap();
            if rewrite_binding {
                let b =
                    serde_json::json!({"seq": 10, "hash": records[9].hash, "len": 0, "prev_seq": 10, "prev_len": 0});
                meta.insert("view", serde_json::to_vec(&b).unwrap()).unwrap();
            }
            db.flush().unwrap();
        }
        let err = open_writer(&dir, Tally).unwrap_err();
        assert_eq!((err.exit_class(), err.seq), (ErrorClass::Failed, Some(11)), "{err:?}");
        // The view and its seal are untouched: the true history.
        assert_eq!(open_view(&dir, Tally).unwrap().read_from(1).unwrap(), records);
        view_differs_at(&dir, 11);
    }
}

#[test]
fn a_view_behind_by_the_last_batch_is_caught_up_and_one_behind_by_more_is_refused() {
    let (_tmp, dir) = six_batches();
    let records = open_view(&dir, Tally).unwrap().read_from(1).unwrap();
    let f = frames(&dir);
    // As a run stopped between the store's commit and the view's write leaves it: the view
    // and its seal as of the batch before.
    write_frames(&dir, &f[..5]);
    let seal = serde_json::json!({"seq": 10, "hash": records[9].hash, "len": 0, "prev_seq": 0, "prev_len": 0});
    std::fs::write(dir.join(SEAL_FILE), seal.to_string()).unwrap();
    // Readers read the view as of that batch: a true prefix.
    let view = open_view(&dir, Tally).unwrap();
    assert_eq!((view.head().seq, view.source()), (10, ViewSource::Published));
    drop(view);
    assert!(matches!(verify(&dir, Tally).unwrap().view, ViewCheck::Behind { from: 11, to: 12 }));
    drop(open_writer(&dir, Tally).unwrap());
    assert_eq!(std::fs::read(dir.join(VIEW_FILE)).unwrap().len(), HEADER.len() + f.iter().map(Vec::len).sum::<usize>());
    assert!(matches!(verify(&dir, Tally).unwrap().view, ViewCheck::Match { records: 12 }));

    write_frames(&dir, &f[..4]);
    refused_naming(open_writer(&dir, Tally).unwrap_err(), 9);
    view_differs_at(&dir, 9);
    // Cut short of its seal: readers refuse too.
    refused_naming(open_view(&dir, Tally).unwrap_err(), 9);
}
