//! The single-writer LOCK: a second opener gets `Locked` naming the holder, across threads
//! of one process and across processes; a LOCK left by a dead process is taken over.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use emend_journal::{ErrorClass, ErrorKind, EventLog, LOCK_FILE, LockHolder, OpenMode, open_reader, open_writer};
use tempfile::TempDir;

use crate::common::{Tally, child_test, inc};

const CHILD_ENV: &str = "EMEND_JOURNAL_TEST_LOCK_CHILD";

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_owned()
}

fn lock_content(dir: &Path) -> String {
    std::fs::read_to_string(dir.join(LOCK_FILE)).unwrap()
}

fn assert_rfc3339_utc(s: &str) {
    let b = s.as_bytes();
    assert_eq!(b.len(), 20, "{s}");
    assert!(s.ends_with('Z') && b[4] == b'-' && b[7] == b'-' && b[10] == b'T' && b[13] == b':', "{s}");
}

#[test]
fn second_writer_in_process_gets_locked_naming_the_holder() {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().join("j");
    let _first = open_writer(&dir, Tally).unwrap();
    let holder: LockHolder = serde_json::from_str(&lock_content(&dir)).unwrap();
    assert_eq!(holder.pid, std::process::id());
    assert_eq!(holder.mode, OpenMode::Writer);

    let err = open_writer(&dir, Tally).unwrap_err();
    assert_eq!(err.exit_class(), ErrorClass::Locked);
    let ErrorKind::Locked { pid, host, started_at, holder_mode, path } = err.kind() else { panic!("{err:?}") };
    assert_eq!(*pid, std::process::id());
    assert_eq!(*host, hostname());
    assert_eq!(*started_at, holder.started_at);
    assert_rfc3339_utc(started_at);
    assert_eq!(holder_mode.as_deref(), Some("writer"));
    assert_eq!(*path, dir.join(LOCK_FILE));
    let message = err.kind().to_string();
    for needle in [pid.to_string().as_str(), host, started_at, "writer"] {
        assert!(message.contains(needle), "{message} lacks {needle}");
    }
    // The failed attempt did not disturb the holder's record.
    assert_eq!(serde_json::from_str::<LockHolder>(&lock_content(&dir)).unwrap(), holder);
}

#[test]
fn store_reader_and_writer_exclude_each_other_and_a_writer_waits_for_a_reader() {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().join("j");
    {
        let writer = open_writer(&dir, Tally).unwrap();
        let err = open_reader(&dir, Tally).unwrap_err();
        assert!(matches!(err.kind(), ErrorKind::Locked { holder_mode: Some(m), .. } if m == "writer"), "{err:?}");
        drop(writer);
    }
    // A reader of the store itself (`verify` of an idle journal) holds the lock briefly; a
    // writer waits for it instead of failing.
    let reader = open_reader(&dir, Tally).unwrap();
    let started = std::time::Instant::now();
    let releaser = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(300));
        drop(reader);
    });
    let writer = open_writer(&dir, Tally).unwrap();
    assert!(started.elapsed() >= std::time::Duration::from_millis(250), "{:?}", started.elapsed());
    releaser.join().unwrap();
    drop(writer);
    // A second reader of the store does not wait: it is told who holds it.
    let _reader = open_reader(&dir, Tally).unwrap();
    let err = open_reader(&dir, Tally).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Locked { holder_mode: Some(m), .. } if m == "reader"), "{err:?}");
}

#[test]
fn clean_close_empties_the_lock_and_reopen_takes_nothing_over() {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().join("j");
    let mut log = open_writer(&dir, Tally).unwrap();
    assert!(log.took_over().is_none());
    log.append(vec![inc("a", 1)]).unwrap();
    drop(log);
    assert_eq!(lock_content(&dir), "");
    let log = open_writer(&dir, Tally).unwrap();
    assert!(log.took_over().is_none());
}

/// Run `f` with tracing output captured (this thread only); returns its result and the text.
pub fn capture_logs<T>(f: impl FnOnce() -> T) -> (T, String) {
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);
    impl Write for Buffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let buffer = Buffer::default();
    let sink = buffer.clone();
    let subscriber = tracing_subscriber::fmt().with_writer(move || sink.clone()).with_ansi(false).finish();
    let out = tracing::subscriber::with_default(subscriber, f);
    let text = String::from_utf8_lossy(&buffer.0.lock().unwrap()).into_owned();
    (out, text)
}

fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    pid
}

#[test]
fn stale_lock_file_is_taken_over() {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().join("j");
    drop(open_writer(&dir, Tally).unwrap());
    let dead = LockHolder {
        pid: dead_pid(),
        host: hostname(),
        started_at: "2020-01-02T03:04:05Z".into(),
        mode: OpenMode::Writer,
    };
    std::fs::write(dir.join(LOCK_FILE), serde_json::to_string(&dead).unwrap()).unwrap();

    let (log, logged) = capture_logs(|| open_writer(&dir, Tally).unwrap());
    assert_eq!(log.took_over(), Some(&dead));
    assert!(logged.contains("WARN"), "{logged}");
    assert!(logged.contains("stale journal lock"), "{logged}");
    assert!(logged.contains(&format!("pid {}", dead.pid)), "{logged}");
    assert!(logged.contains(&dead.started_at), "{logged}");
    let now: LockHolder = serde_json::from_str(&lock_content(&dir)).unwrap();
    assert_eq!(now.pid, std::process::id());
    assert_ne!(now.started_at, dead.started_at);
}

/// Child side of `writer_in_another_process_is_named_and_its_death_frees_the_journal`:
/// open the journal named by the env var as writer, say so, and hold it until stdin
/// closes (or the parent kills us). Ignored, so a normal run does not count it as a test;
/// the parent runs it with `--ignored --exact`.
#[test]
#[ignore = "child process of locks::writer_in_another_process_is_named_and_its_death_frees_the_journal"]
fn child_holds_the_lock() {
    let dir = std::env::var(CHILD_ENV)
        .unwrap_or_else(|_| panic!("child process only: the parent test sets {CHILD_ENV} and runs it"));
    let _log = open_writer(&dir, Tally).unwrap();
    println!("holding");
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
}

#[test]
fn writer_in_another_process_is_named_and_its_death_frees_the_journal() {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().join("j");
    let mut child = child_test("locks::child_holds_the_lock")
        .env(CHILD_ENV, &dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let ready = lines.find(|l| l.as_deref().is_ok_and(|l| l.trim() == "holding"));
    assert!(ready.is_some(), "the child never took the lock");

    for err in [open_writer(&dir, Tally).unwrap_err(), open_reader(&dir, Tally).unwrap_err()] {
        let ErrorKind::Locked { pid, host, started_at, .. } = err.kind() else { panic!("{err:?}") };
        assert_eq!(*pid, child.id());
        assert_eq!(*host, hostname());
        assert_rfc3339_utc(started_at);
        assert!(err.kind().to_string().contains(&child.id().to_string()));
    }

    // SIGKILL: no destructor runs, the LOCK content still names the child.
    child.kill().unwrap();
    child.wait().unwrap();
    let left: LockHolder = serde_json::from_str(&lock_content(&dir)).unwrap();
    assert_eq!(left.pid, child.id());

    let log = open_writer(&dir, Tally).unwrap();
    assert_eq!(log.took_over().map(|h| h.pid), Some(child.id()));
}

#[test]
fn database_held_without_the_lock_file_is_reported_as_locked() {
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().join("j");
    drop(open_writer(&dir, Tally).unwrap());
    let _raw = crate::disk::raw_db(&dir);
    let err = open_writer(&dir, Tally).unwrap_err();
    assert_eq!(err.exit_class(), ErrorClass::Locked, "{err:?}");
    assert!(matches!(err.kind(), ErrorKind::Locked { pid: 0, path, .. } if *path == dir.join("sled")));
    assert!(err.kind().to_string().contains("another process"), "{}", err.kind());
    // The failed open left the LOCK file clean for the next opener.
    assert_eq!(lock_content(&dir), "");
}
