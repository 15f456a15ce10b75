//! The tamper matrix: for each way of tampering with a journal (its read view or its store),
//! every reading command prints the true history or refuses with exit 1, `journal verify`
//! fails, and every writing command refuses. The one documented exception: readers never
//! open the store, so a view forged together with its seal (chain recomputed) is printed
//! by a plain reader; `journal verify` and every writer catch it. Then `journal repair`
//! and its journaled event.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::support;
use crate::support::emend;
use support::copy_dir;

/// A project after `init` and one evolve round, made once for every test here (an evolve
/// round is the slow part); each test works on a copy.
fn evolved_copy(to: &Path) {
    static BASE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let base = BASE.get_or_init(|| {
        // Under the target's scratch directory, replaced by each run (nothing left in /tmp).
        let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join("tamper_matrix");
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        let base = tmp.join("base");
        let (code, _, err) = emend(&tmp, &["init", base.to_str().unwrap(), "--tasks", "builtin"]);
        assert_eq!(code, 0, "{err}");
        let (code, _, err) = emend(&base, &["evolve", "--rounds", "1", "--quiet"]);
        assert_eq!(code, 0, "{err}");
        // The stage cache (hundreds of MB) is not needed by the copies: nothing evolves there.
        std::fs::remove_dir_all(base.join(".emend/cache")).unwrap();
        base
    });
    copy_dir(base, to);
}

/// The checks every writing command runs before it writes, in process.
fn writer_accepts(project: &Path) {
    drop(emend_journal::open_writer(journal_dir(project), emend_core::events::EngineProjector).unwrap());
}

fn journal_dir(project: &Path) -> PathBuf {
    project.join(".emend/journal")
}

const HEADER: &[u8] = b"emend-journal-view/1\n";

/// The view's frames, each with its length prefix and checksum.
fn frames(bytes: &[u8]) -> Vec<Vec<u8>> {
    assert!(bytes.starts_with(HEADER));
    let mut at = HEADER.len();
    let mut out = Vec::new();
    while at < bytes.len() {
        let len = u64::from_be_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
        let end = at + 8 + len + 8;
        out.push(bytes[at..end].to_vec());
        at = end;
    }
    out
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = (body.len() as u64).to_be_bytes().to_vec();
    out.extend_from_slice(body);
    out.extend_from_slice(&Sha256::digest(body)[..8]);
    out
}

fn write_view(project: &Path, frames: &[Vec<u8>]) {
    let mut bytes = HEADER.to_vec();
    for f in frames {
        bytes.extend_from_slice(f);
    }
    std::fs::write(journal_dir(project).join("events.log"), bytes).unwrap();
}

fn raw_db(project: &Path) -> sled::Db {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match sled::open(journal_dir(project).join("sled")) {
            Ok(db) => return db,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("open raw sled: {e}"),
        }
    }
}

fn records(project: &Path) -> Vec<emend_journal::EventRecord> {
    let view = emend_journal::open_view(journal_dir(project), emend_core::events::EngineProjector).unwrap();
    emend_journal::EventLog::read_from(&view, 1).unwrap()
}

/// A forger who knows the format: every record rewritten with a changed payload, the chain
/// and every checksum recomputed, and the seal rewritten to the forged head.
fn forge_view(project: &Path) {
    let mut prev = emend_journal::ZERO_HASH.to_owned();
    let mut body = Vec::new();
    let mut head = (0, String::new());
    for mut r in records(project) {
        if let Some(note) = r.payload.get_mut("note") {
            *note = serde_json::Value::String("forged".into());
        }
        if let Some(reason) = r.payload.get_mut("reason") {
            *reason = serde_json::Value::String("forged".into());
        }
        r.prev_hash = prev;
        r.hash = r.compute_hash();
        prev = r.hash.clone();
        head = (r.seq, r.hash.clone());
        body.extend_from_slice(r.to_json_line().as_bytes());
        body.push(b'\n');
    }
    let f = frame(&body);
    let len = HEADER.len() + f.len();
    write_view(project, &[f]);
    let seal = serde_json::json!({"seq": head.0, "hash": head.1, "len": len, "prev_seq": head.0, "prev_len": len});
    std::fs::write(journal_dir(project).join("events.seal"), seal.to_string()).unwrap();
}

fn drop_middle_frame(project: &Path) {
    let mut f = frames(&std::fs::read(journal_dir(project).join("events.log")).unwrap());
    assert!(f.len() >= 3, "{} frames", f.len());
    f.remove(f.len() / 2);
    write_view(project, &f);
}

fn truncate_view(project: &Path) {
    let f = frames(&std::fs::read(journal_dir(project).join("events.log")).unwrap());
    write_view(project, &f[..f.len() / 2]);
}

fn flip_view_byte(project: &Path) {
    let mut f = frames(&std::fs::read(journal_dir(project).join("events.log")).unwrap());
    let mid = f.len() / 2;
    let at = f[mid].len() / 2;
    f[mid][at] ^= 0x20;
    write_view(project, &f);
}

/// Remove the newest records from the store and set its head to the new last one.
fn truncate_store(project: &Path) {
    let all = records(project);
    let keep = &all[all.len() - 3];
    let db = raw_db(project);
    let events = db.open_tree("events").unwrap();
    for r in &all[all.len() - 2..] {
        events.remove(r.seq.to_be_bytes()).unwrap();
    }
    let head = serde_json::json!({"seq": keep.seq, "hash": keep.hash});
    db.open_tree("meta").unwrap().insert("head", serde_json::to_vec(&head).unwrap()).unwrap();
    db.flush().unwrap();
}

fn edit_projection(project: &Path) {
    let db = raw_db(project);
    let p = db.open_tree("proj:pointers").unwrap();
    let (k, v) = p.iter().next().unwrap().unwrap();
    let mut v = v.to_vec();
    v.extend_from_slice(b" ");
    p.insert(k, v).unwrap();
    db.flush().unwrap();
}

const READERS: [&[&str]; 6] = [
    &["status"],
    &["show", "v1"],
    &["log"],
    &["report", "--json", "--out", "../report.html"],
    &["journal", "export"],
    &["journal", "head"],
];

const WRITERS: [&[&str]; 4] =
    [&["evolve", "--rounds", "1", "--quiet"], &["rollback", "--to", "v1"], &["approve", "v2"], &["restore-best"]];

#[test]
fn every_tamper_makes_readers_print_the_truth_or_refuse_verify_fail_and_writers_refuse() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    evolved_copy(&base);
    let truth: Vec<String> = READERS
        .iter()
        .map(|args| {
            let (code, out, err) = emend(&base, args);
            assert_eq!(code, 0, "{args:?}: {err}");
            out
        })
        .collect();

    type Tamper = fn(&Path);
    // The bool: whether a plain reader (which reads the view and its seal, never the store)
    // can see the tamper.
    let tampers: [(&str, Tamper, bool); 6] = [
        ("forged view, chain and seal recomputed", forge_view, false),
        ("a frame removed from the middle of the view", drop_middle_frame, true),
        ("the view truncated", truncate_view, true),
        ("a byte flipped in the view", flip_view_byte, true),
        ("the store truncated by sled", truncate_store, true),
        ("a projection edited", edit_projection, true),
    ];
    let mut matrix = String::new();
    for (i, (name, tamper, readers_see)) in tampers.into_iter().enumerate() {
        let dir = tmp.path().join(format!("case{i}"));
        copy_dir(&base, &dir);
        tamper(&dir);
        let mut row = vec![name.to_owned()];
        for (args, truth) in READERS.iter().zip(&truth) {
            let (code, out, err) = emend(&dir, args);
            let out = out.replace(dir.to_str().unwrap(), base.to_str().unwrap());
            let outcome = match code {
                0 if !readers_see && &out != truth => "prints the forged history (documented)",
                0 => {
                    assert_eq!(&out, truth, "{name}: {args:?} printed a history that is not the true one");
                    "true history"
                }
                1 => {
                    assert!(err.contains("emend journal repair"), "{name}: {args:?}: {err}");
                    assert!(err.contains("seq "), "{name}: {args:?} does not name the seq: {err}");
                    assert!(!out.contains("forged"), "{name}: {args:?} printed forged history: {out}");
                    "refused"
                }
                _ => panic!("{name}: {args:?} exited {code}: {err}"),
            };
            row.push(format!("{} {outcome}", args[..args.len().min(2)].join(" ")));
        }
        let (code, out, _) = emend(&dir, &["journal", "verify"]);
        assert_eq!(code, 1, "{name}: verify passed: {out}");
        row.push("verify fails".into());
        let served = std::fs::read(dir.join("strategies/served.yaml")).unwrap();
        for args in WRITERS {
            let (code, _, err) = emend(&dir, args);
            assert_eq!(code, 1, "{name}: {args:?} was not refused: {err}");
            assert!(err.contains("emend journal"), "{name}: {args:?}: {err}");
            row.push(format!("{} refused", args[0]));
        }
        assert_eq!(std::fs::read(dir.join("strategies/served.yaml")).unwrap(), served, "{name}");
        let (code, _, _) = emend(&dir, &["journal", "verify"]);
        assert_eq!(code, 1, "{name}: a refused writer changed the verdict");
        matrix.push_str(&row.join(" | "));
        matrix.push('\n');
    }
    eprintln!("{matrix}");
}

#[test]
fn repair_rebuilds_a_forged_view_from_the_store_and_journals_that_it_did() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    evolved_copy(&dir);
    let (_, truth, _) = emend(&dir, &["log"]);
    let (code, out, _) = emend(&dir, &["journal", "repair"]);
    assert_eq!(code, 0);
    assert!(out.contains("nothing to repair"), "{out}");

    drop_middle_frame(&dir);
    let (code, _, err) = emend(&dir, &["log"]);
    assert_eq!(code, 1, "{err}");
    let (code, out, err) = emend(&dir, &["journal", "repair", "--json"]);
    assert_eq!(code, 0, "{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["repaired"], true, "{out}");
    let differed = report["differed_at"].as_u64().unwrap();
    assert!(differed > 1, "{out}");
    let (code, out, _) = emend(&dir, &["journal", "verify"]);
    assert_eq!(code, 0, "{out}");
    // The history reads again, with the repair journaled at its end.
    let (code, log, err) = emend(&dir, &["log"]);
    assert_eq!(code, 0, "{err}");
    for line in truth.lines() {
        assert!(log.contains(line), "{line} is missing from\n{log}");
    }
    assert!(log.contains(&format!("differed at seq {differed}")), "{log}");
    let (_, export, _) = emend(&dir, &["journal", "export"]);
    let last: serde_json::Value = serde_json::from_str(export.lines().last().unwrap()).unwrap();
    assert_eq!(last["kind"], "view_repaired");
    assert_eq!(last["payload"]["seq"], differed);
    // And writers accept the journal again.
    writer_accepts(&dir);
}

#[test]
fn a_view_behind_by_the_last_batch_is_read_as_of_that_batch_and_caught_up_by_the_next_writer() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    evolved_copy(&dir);
    let (_, truth, _) = emend(&dir, &["journal", "export"]);
    // As a run stopped between the store's commit and the view's write leaves it: the view
    // and its seal as of the batch before.
    let all = records(&dir);
    let f = frames(&std::fs::read(journal_dir(&dir).join("events.log")).unwrap());
    write_view(&dir, &f[..f.len() - 1]);
    let kept = emend_journal::open_view(journal_dir(&dir), emend_core::events::EngineProjector).unwrap_err();
    assert!(kept.kind().to_string().contains("emend journal repair"), "{}", kept.kind());
    let last = all.iter().rev().find(|r| {
        std::fs::write(
            journal_dir(&dir).join("events.seal"),
            serde_json::json!({"seq": r.seq, "hash": r.hash, "len": 0, "prev_seq": 0, "prev_len": 0}).to_string(),
        )
        .unwrap();
        emend_journal::open_view(journal_dir(&dir), emend_core::events::EngineProjector).is_ok()
    });
    let last = last.expect("the view is a true prefix of the history");
    // Readers print the history as of that batch, a true prefix.
    let (code, out, err) = emend(&dir, &["journal", "export"]);
    assert_eq!(code, 0, "{err}");
    // (Compared by hash: `at` fields derived from later events differ in a prefix.)
    let hashes = |text: &str| -> Vec<String> {
        text.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["hash"].to_string()).collect()
    };
    let (printed, true_hashes) = (hashes(&out), hashes(&truth));
    assert_eq!(printed.len(), last.seq as usize, "{out}");
    assert_eq!(printed[..], true_hashes[..printed.len()], "the history printed is not a true prefix");
    let (code, out, _) = emend(&dir, &["journal", "verify"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("the next writer appends it"), "{out}");
    writer_accepts(&dir);
    let (code, out, _) = emend(&dir, &["journal", "verify"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("view: ok"), "{out}");
    let (code, out, _) = emend(&dir, &["journal", "export"]);
    assert_eq!((code, out), (0, truth));
}

#[test]
fn journal_expect_head_in_emend_yaml_makes_writers_refuse_a_chain_without_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let (code, _, err) = emend(tmp.path(), &["init", dir.to_str().unwrap(), "--tasks", "builtin"]);
    assert_eq!(code, 0, "{err}");
    let (_, head, _) = emend(&dir, &["journal", "head"]);
    let hash = head.split_whitespace().nth(1).unwrap().to_owned();
    let config = std::fs::read_to_string(dir.join("emend.yaml")).unwrap();
    let with =
        |h: &str| std::fs::write(dir.join("emend.yaml"), format!("{config}\njournal:\n  expect_head: {h}\n")).unwrap();
    with(&"ab".repeat(32));
    let (code, _, err) = emend(&dir, &["restore-best"]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("journal.expect_head") && err.contains("not in the journal's chain"), "{err}");
    let (code, out, _) = emend(&dir, &["journal", "verify"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("NOT in the chain"), "{out}");
    with("not-a-hash");
    let (code, _, err) = emend(&dir, &["status"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("journal.expect_head"), "{err}");
    with(&hash);
    let (code, out, _) = emend(&dir, &["journal", "verify"]);
    assert_eq!(code, 0, "{out}");
    // The writer opens the journal and goes on (serving v1 already, restore-best has
    // nothing to do: whatever it answers, it is not a refusal of the journal).
    let (code, _, err) = emend(&dir, &["restore-best"]);
    assert!(code != 1 && !err.contains("expect_head"), "{code}: {err}");
}
