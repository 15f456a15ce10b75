//! What no reader, damage, full disk or hostile input may do to a run, end to end with the
//! built binary: readers never block `evolve`; a damaged journal is never written to; a full
//! disk plus reads leaves a journal that verifies; hostile inputs get exit 2 quickly; an
//! errored candidate may be tried again.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support;
use crate::support::{emend, workspace};
use support::copy_dir;

/// The read commands that must work without writing (the report is added where it can write its file).
const READ_COMMANDS: &[&[&str]] = &[
    &["status"],
    &["log"],
    &["show", "served"],
    &["diff", "v1", "served"],
    &["hypotheses"],
    &["journal", "export"],
    &["journal", "head"],
];

fn init(dir: &Path) {
    let (code, out, err) = emend(dir.parent().unwrap(), &["init", dir.to_str().unwrap(), "--tasks", "builtin"]);
    assert_eq!(code, 0, "{out}{err}");
}

// ---- 1. readers never block the run --------------------------------------------------------

#[test]
fn a_10hz_status_poller_during_50_evolve_runs_fails_no_run_and_no_read() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    init(&dir);
    let stop = Arc::new(AtomicBool::new(false));
    // A monitoring loop: `emend status` every 100 ms.
    let poller = {
        let stop = stop.clone();
        let dir = dir.clone();
        std::thread::spawn(move || {
            let mut reads = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let (code, out, err) = emend(&dir, &["status", "--json"]);
                let served = serde_json::from_str::<Value>(&out).ok().and_then(|v| v["served_version"].as_u64());
                reads.push((code, served, err));
                std::thread::sleep(Duration::from_millis(100));
            }
            reads
        })
    };
    let mut failed_runs = Vec::new();
    // Runs after the search is exhausted journal no round; count what each run says it ran.
    let mut rounds_run = 0;
    for run in 0..50 {
        let (code, out, err) = emend(&dir, &["evolve", "--rounds", "1", "--quiet", "--json"]);
        if code != 0 {
            failed_runs.push((run, code, err));
            continue;
        }
        let summary: Value = serde_json::from_str(&out).unwrap();
        rounds_run += summary["rounds"].as_u64().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let reads = poller.join().unwrap();
    let failed_reads: Vec<_> = reads.iter().filter(|(code, served, _)| *code != 0 || served.is_none()).collect();
    eprintln!("50 evolve runs, {} status reads during them", reads.len());
    assert!(failed_runs.is_empty(), "{failed_runs:?}");
    assert!(
        failed_reads.is_empty(),
        "{} of {} reads failed: {:?}",
        failed_reads.len(),
        reads.len(),
        failed_reads.first()
    );
    assert!(reads.len() >= 20, "the poller ran only {} times", reads.len());
    let (code, out, _) = emend(&dir, &["journal", "verify"]);
    assert_eq!(code, 0, "{out}");
    let (code, out, _) = emend(&dir, &["status", "--json"]);
    assert_eq!(code, 0);
    let status: Value = serde_json::from_str(&out).unwrap();
    assert!(rounds_run >= 1, "no run ran a round");
    assert_eq!(status["rounds"], rounds_run, "{status}");
}

#[test]
fn read_commands_work_while_a_writer_holds_the_journal_and_a_second_writer_gets_exit_3() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    init(&dir);
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    // A long evolve run holds the writer's lock.
    let mut writer = Command::new(crate::support::bin())
        .current_dir(&dir)
        .args(["evolve", "--rounds", "100000", "--quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::read_to_string(dir.join(".emend/journal/LOCK")).unwrap_or_default().trim().is_empty() {
        assert!(Instant::now() < deadline, "the writer never took the lock");
        std::thread::sleep(Duration::from_millis(20));
    }
    for args in [
        &["status"][..],
        &["log"],
        &["show", "served"],
        &["diff", "v1", "served"],
        &["hypotheses"],
        &["escalations"],
        &["journal", "export"],
        &["journal", "head"],
        &["report", "--out", "r.html"],
    ] {
        let (code, out, err) = emend(&dir, args);
        assert_eq!(code, 0, "{args:?}: {out}{err}");
    }
    // `journal verify` compares the view with the store, which the writer holds: it checks
    // the view on its own and says it could not compare.
    let (code, out, err) = emend(&dir, &["journal", "verify"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(out.contains("could not be compared with the store"), "{out}");
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains(&format!("pid {}", writer.id())), "{err}");
    let (code, _, err) = emend(&dir, &["rollback", "--to", "v1"]);
    assert_eq!(code, 3, "{err}");
    writer.kill().unwrap();
    writer.wait().unwrap();
    let (code, out, _) = emend(&dir, &["journal", "verify"]);
    assert_eq!(code, 0, "{out}");
}

#[test]
fn export_into_a_closed_pipe_leaves_no_stale_lock() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    init(&dir);
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "2", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let bin = crate::support::bin().display().to_string();
    let status = Command::new("sh")
        .current_dir(&dir)
        .arg("-c")
        .arg(format!("'{bin}' journal export | head -1"))
        .status()
        .unwrap();
    assert!(status.success());
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("stale"), "{err}");
}

/// Every file under `dir`: its path, size, modification time and SHA-256, sorted.
fn snapshot(dir: &Path) -> Vec<String> {
    use sha2::Digest;
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                stack.push(entry.path());
                continue;
            }
            let bytes = std::fs::read(entry.path()).unwrap_or_default();
            let mtime = meta.modified().unwrap().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
            let hash = hex::encode(sha2::Sha256::digest(&bytes));
            out.push(format!("{} {} {mtime} {hash}", entry.path().display(), meta.len()));
        }
    }
    out.sort();
    out
}

#[test]
fn read_commands_work_on_a_read_only_project() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    init(&dir);
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    // As root, permission bits do not stop writes; `chattr` is not available everywhere.
    // What is checked: no read command creates, removes or changes any file under the
    // project (size, modification time and content of each), one command at a time.
    let before = snapshot(&dir);
    let report = tmp.path().join("r.html");
    let report_args = ["report", "--out", report.to_str().unwrap()];
    for args in READ_COMMANDS.iter().copied().chain([&report_args[..]]) {
        let (code, out, err) = emend(&dir, args);
        assert_eq!(code, 0, "{args:?}: {out}{err}");
        assert_eq!(snapshot(&dir), before, "{args:?} changed a file under the project");
    }

    // A truly read-only file system: the project bind-mounted read-only (needs root).
    let ro = tmp.path().join("ro");
    std::fs::create_dir_all(&ro).unwrap();
    let mounted = Command::new("mount")
        .arg("--bind")
        .arg(&dir)
        .arg(&ro)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        eprintln!("SKIPPED the read-only mount part: cannot bind-mount here");
        return;
    }
    let remounted = Command::new("mount")
        .args(["-o", "remount,ro,bind"])
        .arg(&ro)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if remounted {
        assert!(std::fs::write(ro.join("probe"), b"x").is_err(), "the mount is not read-only");
        for &args in READ_COMMANDS {
            let (code, out, err) = emend(&ro, args);
            assert_eq!(code, 0, "{args:?} on a read-only mount: {out}{err}");
        }
        // `journal verify` cannot open the store there: it checks the view on its own and
        // fails, saying it could not compare the view with the store.
        let (code, out, err) = emend(&ro, &["journal", "verify"]);
        assert_eq!(code, 1, "{out}{err}");
        assert!(out.contains("could not be compared with the store"), "{out}");
        // A writer fails cleanly there, and says why.
        let (code, _, err) = emend(&ro, &["evolve", "--rounds", "1", "--quiet"]);
        assert_ne!(code, 0, "{err}");
    } else {
        eprintln!("SKIPPED the read-only mount part: cannot remount read-only here");
    }
    let _ = Command::new("umount").arg(&ro).status();
}

// ---- 2. refuse to build on damage ----------------------------------------------------------

fn raw_db(project: &Path) -> sled::Db {
    let path = project.join(".emend/journal/sled");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match sled::open(&path) {
            Ok(db) => return db,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("open raw sled: {e}"),
        }
    }
}

fn key(seq: u64) -> [u8; 8] {
    seq.to_be_bytes()
}

#[test]
fn every_kind_of_tampering_makes_evolve_rollback_and_restore_best_refuse() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base");
    init(&base);
    let (code, _, err) = emend(&base, &["evolve", "--rounds", "2", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let (_, head, _) = emend(&base, &["journal", "head"]);
    let head_seq: u64 = head.split_whitespace().next().unwrap().parse().unwrap();
    assert!(head_seq >= 6, "{head}");

    type Tamper = fn(&sled::Db, u64);
    let cases: [(&str, Tamper, &str); 6] = [
        (
            "flipped byte",
            |db, _| {
                let ev = db.open_tree("events").unwrap();
                let mut v = ev.get(key(3)).unwrap().unwrap().to_vec();
                let at = v.len() / 2;
                v[at] = if v[at] == b'1' { b'2' } else { b'1' };
                ev.insert(key(3), v).unwrap();
            },
            "seq 3",
        ),
        (
            "deleted event",
            |db, _| {
                db.open_tree("events").unwrap().remove(key(4)).unwrap();
            },
            "seq 4",
        ),
        (
            "swapped events",
            |db, _| {
                let ev = db.open_tree("events").unwrap();
                let a = ev.get(key(2)).unwrap().unwrap();
                let b = ev.get(key(5)).unwrap().unwrap();
                ev.insert(key(2), b).unwrap();
                ev.insert(key(5), a).unwrap();
            },
            "seq 2",
        ),
        (
            "cut tail",
            |db, head| {
                db.open_tree("events").unwrap().remove(key(head)).unwrap();
            },
            "missing",
        ),
        (
            "edited projection",
            |db, _| {
                let p = db.open_tree("proj:rounds").unwrap();
                let (k, v) = p.iter().next().unwrap().unwrap();
                let mut v = v.to_vec();
                v.extend_from_slice(b" ");
                p.insert(k, v).unwrap();
            },
            "projection `rounds`",
        ),
        (
            "pointers projection pointing at another version",
            |db, _| {
                let p = db.open_tree("proj:pointers").unwrap();
                let served: Value = serde_json::from_slice(&p.get("served").unwrap().unwrap()).unwrap();
                let mut edited = served.clone();
                edited["version"] = Value::from(served["version"].as_u64().unwrap() + 7);
                p.insert("served", serde_json::to_vec(&edited).unwrap()).unwrap();
            },
            "projection `pointers`",
        ),
    ];
    for (i, (name, tamper, needle)) in cases.into_iter().enumerate() {
        let dir = tmp.path().join(format!("case{i}"));
        copy_dir(&base, &dir);
        {
            let db = raw_db(&dir);
            tamper(&db, head_seq);
            db.flush().unwrap();
        }
        let (code, out, _) = emend(&dir, &["journal", "verify"]);
        assert_eq!(code, 1, "{name}: verify passed: {out}");
        let served_before = std::fs::read(dir.join("strategies/served.yaml")).unwrap();
        for args in [&["evolve", "--rounds", "1", "--quiet"][..], &["rollback", "--to", "v1"], &["restore-best"]] {
            let (code, _, err) = emend(&dir, args);
            assert_eq!(code, 1, "{name}: {args:?} was not refused: {err}");
            assert!(err.contains(needle), "{name}: {args:?}: {err}");
            assert!(err.contains("emend journal verify"), "{name}: {args:?}: {err}");
        }
        // Nothing was written: the served file and the verify verdict are as they were.
        assert_eq!(std::fs::read(dir.join("strategies/served.yaml")).unwrap(), served_before, "{name}");
        let (code, _, _) = emend(&dir, &["journal", "verify"]);
        assert_eq!(code, 1, "{name}");
    }
}

#[test]
fn journal_head_anchors_the_chain_against_a_rewrite() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    init(&dir);
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let (code, head, _) = emend(&dir, &["journal", "head"]);
    assert_eq!(code, 0);
    let hash = head.split_whitespace().nth(1).unwrap().to_string();
    let (code, out, _) = emend(&dir, &["journal", "verify", "--expect-head", &hash]);
    assert_eq!(code, 0, "{out}");
    // Later appends keep the old head in the chain.
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = emend(&dir, &["journal", "verify", "--expect-head", &hash]);
    assert_eq!(code, 0, "{out}");
    // A hash the chain never held (as after a full rewrite) fails.
    let (code, out, _) = emend(&dir, &["journal", "verify", "--expect-head", &"ab".repeat(32)]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("NOT in the chain"), "{out}");
    let (code, _, err) = emend(&dir, &["journal", "verify", "--expect-head", "xyz"]);
    assert_eq!(code, 2, "{err}");
}

// ---- 3. disk full ----------------------------------------------------------------------

/// A small tmpfs mounted for the test (needs root and a kernel that allows it).
struct Tmpfs(PathBuf);

impl Tmpfs {
    fn mount(at: &Path, size: &str) -> Option<Tmpfs> {
        std::fs::create_dir_all(at).ok()?;
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(at)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| Tmpfs(at.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Fill the file system of `dir` until a write fails; returns the filler's path.
fn fill(dir: &Path) -> PathBuf {
    let path = dir.join("filler");
    let mut f = std::fs::File::create(&path).unwrap();
    let chunk = vec![7u8; 64 * 1024];
    while f.write_all(&chunk).is_ok() {}
    let small = [7u8; 512];
    while f.write_all(&small).is_ok() {}
    let _ = f.sync_all();
    path
}

#[test]
fn a_full_disk_during_evolve_followed_by_reads_leaves_a_journal_that_verifies() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(fs) = Tmpfs::mount(&tmp.path().join("mnt"), "48m") else {
        eprintln!("SKIPPED: cannot mount a tmpfs here (needs root and mount permission)");
        return;
    };
    let dir = fs.0.join("p");
    init(&dir);
    // No stage cache: the 48 MB file system is for the journal (the cache grows with every search).
    let config = std::fs::read_to_string(dir.join("emend.yaml")).unwrap();
    std::fs::write(dir.join("emend.yaml"), config.replacen("harness:\n", "harness:\n  stage_cache_mb: 0\n", 1))
        .unwrap();
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "2", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let (_, before, _) = emend(&dir, &["journal", "head"]);

    for attempt in 0..3 {
        let filler = fill(&fs.0);
        let (code, _, err) = emend(&dir, &["evolve", "--rounds", "2", "--quiet"]);
        assert_eq!(code, 1, "attempt {attempt}: evolve on a full disk: {err}");
        assert!(err.contains("No space left") || err.contains("bytes are free"), "{err}");
        for _ in 0..2 {
            let (code, out, err) = emend(&dir, &["status"]);
            assert_eq!(code, 0, "status on a full disk: {out}{err}");
            let (code, _, err) = emend(&dir, &["log"]);
            assert_eq!(code, 0, "log on a full disk: {err}");
        }
        std::fs::remove_file(filler).unwrap();
        let (code, out, err) = emend(&dir, &["journal", "verify"]);
        assert_eq!(code, 0, "attempt {attempt}: verify after space came back: {out}{err}");
        let (_, after, _) = emend(&dir, &["journal", "head"]);
        assert_eq!(after, before, "a refused run wrote nothing");
    }
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = emend(&dir, &["journal", "verify"]);
    assert_eq!(code, 0, "{out}");
}

// ---- 4. bounded inputs -----------------------------------------------------------------

/// Run, expect exit 2 and a message containing `needle`; returns the elapsed time.
fn refused_quickly(dir: &Path, args: &[&str], needle: &str) -> Duration {
    let start = Instant::now();
    let (code, out, err) = emend(dir, args);
    let took = start.elapsed();
    assert_eq!(code, 2, "{args:?}: {out}{err}");
    assert!(err.contains(needle) || out.contains(needle), "{args:?}: {out}{err}");
    // Generous: the quadratic parse took 28 s on 200 KB; the check is linear.
    assert!(took < Duration::from_secs(5), "{args:?} took {took:?}");
    eprintln!("{args:?}: exit 2 in {:.0} ms", took.as_secs_f64() * 1e3);
    took
}

fn hostile_yaml() -> Vec<(&'static str, String)> {
    const MB: usize = 1024 * 1024 - 64;
    let flow_seq = format!("a: {}", "[".repeat(MB - 3));
    let flow_map = format!("a: {}", "{a: ".repeat((MB - 3) / 4));
    let block = format!("a:\n{}", "- ".repeat((MB - 3) / 2));
    let balanced = format!("a: {}{}", "[".repeat(MB / 2 - 4), "]".repeat(MB / 2 - 4));
    vec![("flow sequences", flow_seq), ("flow maps", flow_map), ("block sequences", block), ("balanced", balanced)]
}

#[test]
fn hostile_yaml_is_refused_with_exit_2_before_parsing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    init(&dir);
    let served = dir.join("strategies/served.yaml");
    let served_text = std::fs::read_to_string(&served).unwrap();
    let config_text = std::fs::read_to_string(dir.join("emend.yaml")).unwrap();
    for (name, text) in hostile_yaml() {
        assert!(text.len() < 1024 * 1024, "{name}");
        let file = tmp.path().join("hostile.yaml");
        std::fs::write(&file, &text).unwrap();
        refused_quickly(tmp.path(), &["validate", file.to_str().unwrap()], "deeper than");
        // As emend.yaml: every command reads it first. 1 MB is over its size limit; 200 KB
        // of the same nesting is under it and refused for its depth.
        std::fs::write(dir.join("emend.yaml"), &text).unwrap();
        refused_quickly(&dir, &["status"], "larger than");
        std::fs::write(dir.join("emend.yaml"), &text[..200 * 1024]).unwrap();
        refused_quickly(&dir, &["status"], "deeper than");
        refused_quickly(&dir, &["evolve", "--rounds", "1"], "deeper than");
        std::fs::write(dir.join("emend.yaml"), &config_text).unwrap();
        // As the served file: not a version emend wrote, so it is refused as edited by hand
        // (and never adopted), again without the slow parse.
        std::fs::write(&served, &text).unwrap();
        refused_quickly(&dir, &["evolve", "--rounds", "1", "--quiet"], "served.yaml");
        refused_quickly(&dir, &["validate", "strategies/served.yaml"], "deeper than");
        std::fs::write(&served, &served_text).unwrap();
    }
    // emend.yaml size: a 50 MB file (mostly a comment) is refused without reading it whole.
    let big = format!("{config_text}\n#{}\n", "x".repeat(50 * 1024 * 1024));
    std::fs::write(dir.join("emend.yaml"), big).unwrap();
    refused_quickly(&dir, &["status"], "larger than");
    std::fs::write(dir.join("emend.yaml"), &config_text).unwrap();
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    assert_eq!(code, 0, "{err}");
}

const ONE_SAMPLE: &str = r#"[{"sample_id": "c1", "conversation": {"speaker_a": "Ann", "speaker_b": "Bo",
   "session_1_date_time": "DATE",
   "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat named Miso last week."},
                 {"speaker": "Bo", "dia_id": "D1:2", "text": "Lovely, what does Miso eat?"}]},
  "qa": QA}]"#;

fn dataset(date: &str, qa: &str) -> String {
    ONE_SAMPLE.replace("DATE", date).replace("QA", qa)
}

const QA: &str = r#"[{"question": "What is the cat's name?", "answer": "Miso", "evidence": ["D1:1"], "category": 4}]"#;

#[test]
fn hostile_datasets_are_refused_by_init_naming_the_input_and_leaving_nothing_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("no questions", dataset("1:56 pm on 8 May, 2023", "[]").into_bytes(), "no questions"),
        ("bad date", dataset("the day after yesterday", QA).into_bytes(), "session_1_date_time"),
        (
            "invalid UTF-8",
            {
                let mut b = dataset("1:56 pm on 8 May, 2023", QA).into_bytes();
                b[40] = 0xff;
                b
            },
            "offset 40",
        ),
        (
            "only adversarial",
            dataset("1:56 pm on 8 May, 2023", &QA.replace("\"category\": 4", "\"category\": 5")).into_bytes(),
            "no questions",
        ),
    ];
    for (name, bytes, needle) in cases {
        let file = tmp.path().join("tasks.json");
        std::fs::write(&file, bytes).unwrap();
        let target = tmp.path().join("newproj");
        let took =
            refused_quickly(tmp.path(), &["init", target.to_str().unwrap(), "--tasks", file.to_str().unwrap()], needle);
        let _ = took;
        let (_, _, err) = emend(tmp.path(), &["init", target.to_str().unwrap(), "--tasks", file.to_str().unwrap()]);
        assert!(err.contains("--tasks"), "{name}: the message names the input: {err}");
        assert!(!err.contains("newproj/emend.yaml"), "{name}: names a file that does not exist: {err}");
        assert!(!target.exists(), "{name}: init left {} behind", target.display());
    }
    // A file over the size limit is refused before it is read (a sparse file: no disk used).
    let big = tmp.path().join("big.json");
    std::fs::File::create(&big).unwrap().set_len(65 * 1024 * 1024).unwrap();
    let target = tmp.path().join("bigproj");
    refused_quickly(
        tmp.path(),
        &["init", target.to_str().unwrap(), "--tasks", big.to_str().unwrap()],
        "max_dataset_mb",
    );
    assert!(!target.exists());
    // A byte order mark is accepted.
    let bom = tmp.path().join("bom.json");
    let mut bytes = vec![0xef, 0xbb, 0xbf];
    bytes.extend_from_slice(dataset("1:56 pm on 8 May, 2023", QA).as_bytes());
    std::fs::write(&bom, bytes).unwrap();
    let target = tmp.path().join("bomproj");
    let (code, out, err) = emend(tmp.path(), &["init", target.to_str().unwrap(), "--tasks", bom.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    // init into an existing directory that fails leaves the directory as it was.
    let existing = tmp.path().join("existing");
    std::fs::create_dir_all(&existing).unwrap();
    std::fs::write(existing.join("notes.txt"), "mine").unwrap();
    std::fs::write(&bom, dataset("1:56 pm on 8 May, 2023", "[]")).unwrap();
    let (code, _, _) = emend(tmp.path(), &["init", existing.to_str().unwrap(), "--tasks", bom.to_str().unwrap()]);
    assert_eq!(code, 2);
    let left: Vec<_> = std::fs::read_dir(&existing).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("notes.txt")]);
}

// ---- 5. operator edges -------------------------------------------------------------------

#[test]
fn operator_edges() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    init(&dir);
    let config = std::fs::read_to_string(dir.join("emend.yaml")).unwrap();

    // A LOCK file that cannot be parsed is stale, and the warning says so.
    std::fs::write(dir.join(".emend/journal/LOCK"), [0xff, 0xfe, 0xfd]).unwrap();
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("treated as stale"), "{err}");

    // One limit for the flag and the setting; rounds 0 refused.
    let (code, _, err) = emend(&dir, &["evolve", "--candidates", "65"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("between 1 and 64"), "{err}");
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "0"]);
    assert_eq!(code, 2, "{err}");
    for (setting, needle) in [
        (config.replace("  rounds: ", "  rounds: 0 #"), "loop.rounds"),
        (config.replace("  candidates: ", "  candidates: 65 #"), "loop.candidates"),
        (config.replace("strategy: ", "strategy: ../outside.yaml #"), "inside the project"),
        (config.replace("strategy: ", "strategy: /tmp/outside.yaml #"), "inside the project"),
    ] {
        std::fs::write(dir.join("emend.yaml"), &setting).unwrap();
        let (code, _, err) = emend(&dir, &["status"]);
        assert_eq!(code, 2, "{err}");
        assert!(err.contains(needle), "{err}");
    }
    std::fs::write(dir.join("emend.yaml"), &config).unwrap();

    // The advice printed for a hand-edited served file is a command that works.
    let served = dir.join("strategies/served.yaml");
    let text = std::fs::read_to_string(&served).unwrap();
    let edited: String = text
        .lines()
        .map(|l| match l.strip_prefix("  top_k: ").and_then(|v| v.trim().parse::<u64>().ok()) {
            Some(k) => format!("  top_k: {}\n", k + 1),
            None => format!("{l}\n"),
        })
        .collect();
    assert_ne!(edited, text);
    std::fs::write(&served, edited).unwrap();
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    assert_eq!(code, 2, "a hand-edited served file is refused: {err}");
    let advice = err.split('`').find(|s| s.starts_with("emend rollback")).expect("advice names a rollback command");
    let argv: Vec<&str> = advice.split_whitespace().skip(1).collect();
    let (code, _, err2) = emend(&dir, &argv);
    assert_eq!(code, 0, "advised `{advice}` failed: {err2}");
    let (code, _, err) = emend(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    assert_eq!(code, 0, "{err}");
}

// ---- 6. errored is not evaluated ---------------------------------------------------------

fn init_with_adapter(tmp: &Path, adapter: &Path) -> PathBuf {
    let ex = workspace().join("examples/python-bm25");
    let dir = tmp.join("project");
    let tasks = workspace().join("harness/data/synthetic-locomo.json");
    let (code, out, err) = emend(
        tmp,
        &[
            "init",
            dir.to_str().unwrap(),
            "--tasks",
            tasks.to_str().unwrap(),
            "--schema",
            ex.join("strategy.schema.json").to_str().unwrap(),
            "--strategy",
            ex.join("default.yaml").to_str().unwrap(),
            "--harness-command",
            "python3",
            adapter.to_str().unwrap(),
            "{strategy}",
            "{tasks}",
            "{out}",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    dir
}

fn round_candidates(dir: &Path) -> Vec<Value> {
    let (code, out, err) = emend(dir, &["log", "--json"]);
    assert_eq!(code, 0, "{err}");
    let log: Value = serde_json::from_str(&out).unwrap();
    log["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "round")
        .flat_map(|e| e["candidates"].as_array().unwrap().clone())
        .collect()
}

#[test]
fn an_errored_candidate_is_tried_again_in_a_later_round() {
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("SKIPPED: python3 is not available");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let flag = tmp.path().join("flaky");
    std::fs::write(&flag, "").unwrap();
    let adapter = workspace().join("examples/python-bm25/adapter.py");
    // The reference adapter, except that while the flag file exists any strategy but the
    // first one it saw (the served v1) crashes: a flaky endpoint, then a healthy one.
    let wrapper = tmp.path().join("flaky.py");
    let script = r#"import json, os, runpy, sys
first = os.path.join(os.path.dirname(FLAG), "first.json")
s = json.load(open(sys.argv[1]))
if not os.path.exists(first):
    json.dump(s, open(first, "w"))
if os.path.exists(FLAG) and s != json.load(open(first)):
    print("endpoint unavailable", file=sys.stderr)
    sys.exit(4)
sys.argv[0] = ADAPTER
runpy.run_path(ADAPTER, run_name="__main__")
"#
    .replace("FLAG", &serde_json::to_string(&flag.display().to_string()).unwrap())
    .replace("ADAPTER", &serde_json::to_string(&adapter.display().to_string()).unwrap());
    std::fs::write(&wrapper, script).unwrap();
    let dir = init_with_adapter(tmp.path(), &wrapper);
    // The rule evolver: its candidates name their change, which the next round proposes again.
    let config = std::fs::read_to_string(dir.join("emend.yaml")).unwrap();
    std::fs::write(dir.join("emend.yaml"), config.replace("  method: null", "  method: rules")).unwrap();
    // Every candidate of the first run errored: exit 5 (stopped: errored).
    let (code, out, err) = emend(&dir, &["evolve", "--rounds", "1", "--candidates", "2", "--quiet"]);
    assert!(code == 5 || code == 0, "{out}{err}");
    let first = round_candidates(&dir);
    // Nothing is accepted, so a change names the same strategy (same parent) in both rounds.
    let errored: Vec<String> = first
        .iter()
        .filter(|c| c["outcome"] == "errored")
        .filter_map(|c| c["change"].as_str().map(String::from))
        .collect();
    assert!(!errored.is_empty(), "{first:?}");

    std::fs::remove_file(&flag).unwrap();
    let (code, out, err) = emend(&dir, &["evolve", "--rounds", "1", "--candidates", "2", "--quiet"]);
    assert_eq!(code, 0, "{out}{err}");
    let all = round_candidates(&dir);
    let retried: Vec<&Value> = all[first.len()..]
        .iter()
        .filter(|c| c["change"].as_str().is_some_and(|h| errored.iter().any(|e| e == h)))
        .collect();
    assert!(!retried.is_empty(), "no errored candidate came back: {all:?}");
    for c in retried {
        assert_ne!(c["rejected_by"], "gate:novelty", "{c}");
        assert_ne!(c["outcome"], "errored", "{c}");
    }
}
