//! Crash test: a child process appends batches and acknowledges each one after `append`
//! returns; the parent SIGKILLs it at seeded random moments, then checks that the journal
//! verifies, that every acknowledged batch is there, and that no batch is partial.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use emend_journal::{ErrorKind, EventLog, EventRecord, NewEvent, open_reader, open_writer};
use serde_json::json;
use tempfile::TempDir;

use crate::common::{Tally, child_test};

const CHILD_ENV: &str = "EMEND_JOURNAL_TEST_CRASH_CHILD";
const SEED_ENV: &str = "EMEND_JOURNAL_CRASH_SEED";
const KILLS: usize = 60;

/// Batch sizes vary with the batch number so the parent can check completeness.
fn batch_size(batch: u64) -> u64 {
    1 + (batch * 7 + 3) % 9
}

/// Child side of the crash test: append batches forever, printing `ack <last seq>` after
/// each append returns. Ignored, so a normal run does not count it as a test; the parent
/// runs it with `--ignored --exact`.
#[test]
#[ignore = "child process of the crash test, which runs it"]
fn child_appends_until_killed() {
    let dir = std::env::var(CHILD_ENV)
        .unwrap_or_else(|_| panic!("child process only: the parent test sets {CHILD_ENV} and runs it"));
    let mut log = open_writer(&dir, Tally).expect("child: open writer");
    let mut batch = match log.read_from(log.head().seq).expect("child: read head").last() {
        Some(last) => last.payload["batch"].as_u64().expect("child: batch number") + 1,
        None => 0,
    };
    println!("ready");
    loop {
        let n = batch_size(batch);
        let events = (0..n)
            .map(|i| {
                NewEvent::new(
                    "inc",
                    json!({
                        "key": format!("k{:02}", (batch + i) % 13),
                        "by": 1,
                        "batch": batch,
                        "i": i,
                        "n": n,
                        "pad": "p".repeat(200 + (i as usize * 37) % 300),
                    }),
                )
            })
            .collect();
        let records = log.append(events).expect("child: append");
        println!("ack {}", records.last().expect("non-empty batch").seq);
        batch += 1;
    }
}

/// SplitMix64: a seeded generator, enough for picking moments.
struct Moments(u64);

impl Moments {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }
}

struct Run {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Run {
    fn start(dir: &Path) -> Run {
        let mut child = child_test("crash::child_appends_until_killed")
            .env(CHILD_ENV, dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn child writer");
        let stdout = child.stdout.take().expect("child stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Run { child, lines, seen: Vec::new() }
    }

    fn wait_for_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.seen.iter().any(|l| l.trim() == "ready") {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.seen.push(line),
                Err(_) => self.fail("the child writer never got ready"),
            }
        }
    }

    fn fail(&mut self, what: &str) -> ! {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut stderr = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut stderr);
        }
        panic!("{what}; child stderr:\n{stderr}");
    }

    /// SIGKILL the child; returns the seqs it acknowledged.
    fn kill(mut self) -> Vec<u64> {
        if let Ok(Some(status)) = self.child.try_wait() {
            self.fail(&format!("the child writer exited by itself ({status})"));
        }
        self.child.kill().expect("SIGKILL the child");
        self.child.wait().expect("reap the child");
        // The reader thread ends at EOF, which comes once the child is gone.
        self.seen.extend(self.lines.iter());
        self.seen.iter().filter_map(|l| l.strip_prefix("ack ")?.trim().parse().ok()).collect()
    }
}

/// Every batch complete and in order.
fn check_batches(records: &[EventRecord]) {
    let mut at = 0;
    let mut batch = 0u64;
    while at < records.len() {
        let n = batch_size(batch) as usize;
        assert!(
            at + n <= records.len(),
            "partial batch {batch}: {} of {n} events present at the end of the log",
            records.len() - at
        );
        for (i, r) in records[at..at + n].iter().enumerate() {
            assert_eq!(r.payload["batch"], json!(batch), "seq {}", r.seq);
            assert_eq!(r.payload["i"], json!(i), "seq {}", r.seq);
        }
        at += n;
        batch += 1;
    }
}

#[test]
fn killed_writer_loses_no_acknowledged_batch_and_leaves_no_partial_one() {
    let seed = std::env::var(SEED_ENV).ok().and_then(|s| s.parse().ok()).unwrap_or(0x5EED_0001);
    eprintln!("crash test seed {seed} (set {SEED_ENV} to replay)");
    let mut moments = Moments(seed);
    let tmp = TempDir::new().unwrap();
    let dir = tmp.path().join("j");
    let mut acked: Vec<u64> = Vec::new();
    let mut kills_mid_append = 0;
    let started = Instant::now();

    for kill in 0..KILLS {
        let mut run = Run::start(&dir);
        if moments.below(4) == 0 {
            // Any moment at all, including while the child starts or recovers the database.
            std::thread::sleep(Duration::from_millis(moments.below(40)));
        } else {
            run.wait_for_ready();
            std::thread::sleep(Duration::from_micros(moments.below(25_000)));
        }
        let new_acks = run.kill();
        if !new_acks.is_empty() {
            kills_mid_append += 1;
        }
        acked.extend(new_acks);

        let log = match open_reader(&dir, Tally) {
            Err(e) if matches!(e.kind(), ErrorKind::NotFound { .. }) && acked.is_empty() => continue,
            other => other.unwrap_or_else(|e| panic!("kill {kill} (seed {seed}): {e:?}")),
        };
        let report = log.verify().unwrap();
        assert!(report.is_ok(), "kill {kill} (seed {seed}): {report}");
        let records = log.read_from(1).unwrap();
        drop(log);
        check_batches(&records);
        let head = report.last_good.seq;
        for &seq in &acked {
            assert!(seq <= head, "kill {kill} (seed {seed}): acknowledged seq {seq} lost, head {head}");
            let r = &records[seq as usize - 1];
            assert_eq!(r.payload["i"].as_u64().unwrap() + 1, r.payload["n"].as_u64().unwrap());
        }
    }
    eprintln!(
        "{KILLS} kills in {:?}; {} batches acknowledged; {kills_mid_append} kills after at least one ack",
        started.elapsed(),
        acked.len()
    );
    assert!(kills_mid_append >= KILLS / 2, "too few kills landed while appending");
    assert!(acked.len() > KILLS, "the children acknowledged too little to test anything");
}
