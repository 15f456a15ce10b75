//! Journal benchmarks (plain `std::time`, no harness): run with `cargo bench -p emend-journal`.
//!
//! 1. Append one round's worth: one batch of 1 round event carrying 2,000 verdicts (its
//!    projector updates 2,000 question-history keys, reading each first; like the engine's,
//!    it keeps that tree in memory) plus 20 candidate-outcome events, flush included.
//!    Target: <= 100 ms, and at most half of the 15.5-19.2 ms median measured when every
//!    question-history key was stored in sled.
//! 2. Open and verify a journal of 100 such rounds (chain, hashes, full projection
//!    rebuild and comparison). Target: <= 2 s.
//! 3. Size: the journal directory (store, read view, everything) after 20 such rounds,
//!    against the JSONL export of its events. Target: at most 2x.
//! 4. Open the read view of 100 rounds (what `emend status` does while a run writes).
//! 5. The writer's check before it writes, on a journal of 1,000 such rounds: opening it
//!    as the writer checks the store's whole chain (seqs, links, head, the recorded view
//!    end), every projection's digest and the read view against the store (its bytes
//!    hashed and compared with the digest the store recorded with its last batch).
//!    Target: <= 1 s. Also the reader's open of the same journal (the view's frames and
//!    chain checked, and its seal; readers never open the store), with the store idle and
//!    with a writer holding it. `EMEND_BENCH_ONLY=5` runs this part alone.

use std::time::{Duration, Instant};

use emend_journal::{
    EventLog, EventRecord, NewEvent, ProjectError, ProjectionState, Projector, open_reader, open_view, open_writer,
};
use serde_json::json;

const QUESTIONS: usize = 2_000;
const CANDIDATES: usize = 20;
const APPEND_RUNS: usize = 30;
const VERIFY_ROUNDS: u64 = 100;
const VERIFY_RUNS: usize = 7;
const CHECK_ROUNDS: u64 = 1_000;
const CHECK_RUNS: usize = 5;

/// Rounds, candidate outcomes and per-question history, shaped like the engine's.
struct RoundProjector;

impl Projector for RoundProjector {
    fn trees(&self) -> Vec<String> {
        vec!["rounds".into(), "candidate_outcomes".into(), "question_history".into()]
    }

    // As the engine's projector does: thousands of small per-question entries per round,
    // all derived from the round event, are rebuilt in memory rather than stored.
    fn memory_trees(&self) -> Vec<String> {
        vec!["question_history".into()]
    }

    fn project(&self, state: &mut dyn ProjectionState, event: &EventRecord) -> Result<(), ProjectError> {
        let round = event.payload["round"].as_u64().ok_or("no round")?;
        match event.kind.as_str() {
            "round" => {
                let verdicts = event.payload["verdicts"].as_array().ok_or("no verdicts")?;
                state.put(
                    "rounds",
                    &format!("{round:06}"),
                    json!({"round": round, "questions": verdicts.len(), "seq": event.seq}),
                );
                for v in verdicts {
                    let q = v["q"].as_str().ok_or("no question id")?;
                    let correct = v["verdict"] == "correct";
                    let mut h = state.get("question_history", q).unwrap_or_else(|| json!({"runs": 0, "correct": 0}));
                    h["runs"] = json!(h["runs"].as_u64().unwrap_or(0) + 1);
                    h["correct"] = json!(h["correct"].as_u64().unwrap_or(0) + u64::from(correct));
                    h["last_round"] = json!(round);
                    h["last_verdict"] = v["verdict"].clone();
                    state.put("question_history", q, h);
                }
            }
            "candidate_outcome" => {
                let candidate = event.payload["candidate"].as_u64().ok_or("no candidate")?;
                state.put("candidate_outcomes", &format!("{round:06}/{candidate:02}"), event.payload.clone());
            }
            _ => {}
        }
        Ok(())
    }
}

fn round_batch(round: u64) -> Vec<NewEvent> {
    round_batch_of(round, QUESTIONS)
}

fn round_batch_of(round: u64, questions: usize) -> Vec<NewEvent> {
    let verdicts: Vec<_> = (0..questions)
        .map(|q| {
            let verdict = if (q as u64 + round).is_multiple_of(3) { "incorrect" } else { "correct" };
            json!({"q": format!("q{q:05}"), "verdict": verdict, "tokens": 400 + q % 97})
        })
        .collect();
    let mut batch = vec![NewEvent::new(
        "round",
        json!({"round": round, "served": "a3f9c0de", "score": 0.7125, "verdicts": verdicts}),
    )];
    batch.extend((0..CANDIDATES as u64).map(|c| {
        NewEvent::new(
            "candidate_outcome",
            json!({
                "round": round,
                "candidate": c,
                "outcome": if c % 4 == 0 { "rejected_probe" } else { "rejected_full" },
                "delta": (c as f64 - 10.0) / 400.0,
                "p_value": 0.05 + c as f64 / 100.0,
                "dimension": format!("retrieval.dim_{c}"),
            }),
        )
    }));
    batch
}

fn summary(name: &str, mut times: Vec<Duration>, target: Duration, quick: bool) {
    times.sort();
    let median = times[times.len() / 2];
    let min = times[0];
    let verdict = match (quick, median <= target) {
        (true, _) => "smoke run, not measured against",
        (false, true) => "within",
        (false, false) => "MISSES",
    };
    println!(
        "{name}: median {:.1} ms, min {:.1} ms over {} runs ({verdict} target {} ms)",
        median.as_secs_f64() * 1e3,
        min.as_secs_f64() * 1e3,
        times.len(),
        target.as_millis()
    );
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs us too: keep that quick.
    let quick = !std::env::args().any(|a| a == "--bench");
    let (append_runs, verify_rounds, verify_runs) =
        if quick { (2, 3, 1) } else { (APPEND_RUNS, VERIFY_ROUNDS, VERIFY_RUNS) };

    let tmp = tempfile::TempDir::new().expect("tempdir");
    // EMEND_BENCH_ONLY=5: part 5 alone.
    if std::env::var("EMEND_BENCH_ONLY").is_ok_and(|v| v == "5") {
        writer_check(tmp.path(), quick);
        return;
    }

    // 1. Append one round.
    let dir = tmp.path().join("append");
    let mut log = open_writer(&dir, RoundProjector).expect("open writer");
    let mut times = Vec::new();
    for round in 0..append_runs as u64 {
        let batch = round_batch(round);
        let start = Instant::now();
        log.append(batch).expect("append");
        times.push(start.elapsed());
    }
    drop(log);
    summary(
        "append one round (1 round event + 2,000 verdicts + 20 candidates, flushed)",
        times,
        Duration::from_millis(100),
        quick,
    );

    // 2. Open + verify a journal of 100 rounds.
    let dir = tmp.path().join("verify");
    {
        let mut log = open_writer(&dir, RoundProjector).expect("open writer");
        for round in 0..verify_rounds {
            log.append(round_batch(round)).expect("append");
        }
    }
    let mut times = Vec::new();
    let mut opens = Vec::new();
    for _ in 0..verify_runs {
        let start = Instant::now();
        let log = open_reader(&dir, RoundProjector).expect("open reader");
        opens.push(start.elapsed());
        let report = log.verify().expect("verify");
        times.push(start.elapsed());
        assert!(report.is_ok(), "{report}");
        assert_eq!(report.events_checked, verify_rounds * (1 + CANDIDATES as u64));
    }
    summary(&format!("open + verify a journal of {verify_rounds} rounds"), times, Duration::from_secs(2), quick);
    summary(&format!("  of which open alone ({verify_rounds} rounds)"), opens, Duration::from_secs(2), quick);

    // 4. Open the read view of the same journal.
    let mut views = Vec::new();
    for _ in 0..verify_runs {
        let start = Instant::now();
        let view = open_view(&dir, RoundProjector).expect("open view");
        views.push(start.elapsed());
        assert_eq!(view.head().seq, verify_rounds * (1 + CANDIDATES as u64));
    }
    summary(&format!("open the read view of {verify_rounds} rounds"), views, Duration::from_secs(2), quick);

    writer_check(tmp.path(), quick);

    // 3. Size after 20 rounds against the JSONL export.
    let size_rounds = if quick { 3 } else { 20 };
    let dir = tmp.path().join("size");
    {
        let mut log = open_writer(&dir, RoundProjector).expect("open writer");
        for round in 0..size_rounds {
            log.append(round_batch(round)).expect("append");
        }
    }
    let on_disk = dir_bytes(&dir);
    let mut export = Vec::new();
    let log = open_view(&dir, RoundProjector).expect("open view");
    emend_journal::export_jsonl(&log, 1, &mut export).expect("export");
    let ratio = on_disk as f64 / export.len() as f64;
    println!(
        "size after {size_rounds} rounds: journal directory {on_disk} bytes, JSONL export {} bytes, ratio {ratio:.2} ({} target 2.00)",
        export.len(),
        if quick {
            "smoke run, not measured against"
        } else if ratio <= 2.0 {
            "within"
        } else {
            "MISSES"
        }
    );
}

/// 5. The writer's pre-write check on 1,000 rounds.
fn writer_check(tmp: &std::path::Path, quick: bool) {
    let (rounds, runs) = if quick { (3, 1) } else { (CHECK_ROUNDS, CHECK_RUNS) };
    // EMEND_BENCH_CHECK_QUESTIONS: verdicts per round event (default 2,000, as above).
    let questions = std::env::var("EMEND_BENCH_CHECK_QUESTIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(QUESTIONS);
    let dir = tmp.join("check");
    let mut writer = open_writer(&dir, RoundProjector).expect("open writer");
    for round in 0..rounds {
        writer.append(round_batch_of(round, questions)).expect("append");
    }
    drop(writer);
    let events = rounds * (1 + CANDIDATES as u64);
    println!(
        "journal of {rounds} rounds ({questions} verdicts per round event): {events} events, {} bytes on disk",
        dir_bytes(&dir)
    );
    let mut checks = Vec::new();
    let mut bare = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        let writer = open_writer(&dir, RoundProjector).expect("open writer");
        checks.push(start.elapsed());
        assert_eq!(writer.head().seq, events);
        drop(writer);
        // The same open without any check: what the checks add is the difference.
        let start = Instant::now();
        drop(open_reader(&dir, RoundProjector).expect("open reader"));
        bare.push(start.elapsed());
    }
    summary(&format!("open the writer of {rounds} rounds, all checks"), checks, Duration::from_secs(1), quick);
    summary(&format!("  open the store of {rounds} rounds without checks"), bare, Duration::from_secs(1), quick);
    let mut idle = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        assert_eq!(open_view(&dir, RoundProjector).expect("open view").head().seq, events);
        idle.push(start.elapsed());
    }
    summary(&format!("open the read view of {rounds} rounds, no writer"), idle, Duration::from_secs(5), quick);
    let writer = open_writer(&dir, RoundProjector).expect("open writer");
    let mut held = Vec::new();
    for _ in 0..runs {
        let start = Instant::now();
        assert_eq!(open_view(&dir, RoundProjector).expect("open view").head().seq, events);
        held.push(start.elapsed());
    }
    drop(writer);
    summary(
        &format!("open the read view of {rounds} rounds, a writer holds the store"),
        held,
        Duration::from_secs(5),
        quick,
    );
}

/// Bytes of every file under `dir` (allocated size, as `du` counts).
fn dir_bytes(dir: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let meta = entry.metadata().expect("metadata");
        total += if meta.is_dir() { dir_bytes(&entry.path()) } else { meta.blocks() * 512 };
    }
    total
}
