//! Evaluation benchmark on locomo10-dev with the default strategy:
//! `cargo bench -p emend-harness` (plain `std::time`, medians of several runs).
//!
//! - cold: load the file, ingest, index and evaluate the 762 questions;
//! - warm: evaluate a retrieval-only change (a new top_k each run, so
//!   retrieval really runs) with ingest and index cached;
//! - peak RSS of the process (VmHWM).
//!
//! Targets on a 2-core machine: cold <= 1 s, warm <= 100 ms, peak <= 300 MB.
//! The file is found at `../shared/data/locomo10-dev.json` from the workspace
//! root, or at `EMEND_LOCOMO`; without it the benchmark says so and exits.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use harness::{Evaluator, HarnessSettings, Strategy};

const RUNS: usize = 9;

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// User + system CPU time of the process so far (from /proc/self/stat, in
/// clock ticks of 10 ms), so that a loaded machine can be told apart from a slow run.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is parenthesized and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs this too: stay quick there.
    let quick = !std::env::args().any(|a| a == "--bench");
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let path = std::env::var_os("EMEND_LOCOMO")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../shared/data/locomo10-dev.json"));
    if !path.exists() {
        println!("eval bench: {} is absent; skipping (set EMEND_LOCOMO)", path.display());
        return;
    }
    let strategy: Strategy = serde_yaml::from_str(
        &std::fs::read_to_string(root.join("strategies/default.yaml")).expect("strategies/default.yaml"),
    )
    .expect("the default strategy parses");
    let runs = if quick { 1 } else { RUNS };

    let mut cold = Vec::new();
    let mut n = 0;
    let cpu0 = cpu_time();
    for _ in 0..runs {
        let t = Instant::now();
        let dataset = harness::load_path(&path).expect("locomo10-dev loads");
        let ev = Evaluator::new(Arc::new(dataset), HarnessSettings::default()).expect("default settings");
        let e = ev.evaluate(&strategy).expect("the default strategy evaluates");
        cold.push(t.elapsed());
        n = e.summary.n;
    }

    let cold_cpu = cpu_time().zip(cpu0).map(|(b, a)| (b - a) / runs as u32);
    let dataset = Arc::new(harness::load_path(&path).expect("locomo10-dev loads"));
    let ev = Evaluator::new(dataset, HarnessSettings::default()).expect("default settings");
    ev.evaluate(&strategy).expect("the default strategy evaluates");
    let mut warm = Vec::new();
    let mut repeat = Vec::new();
    let mut warm_cpu = Duration::ZERO;
    for i in 0..runs {
        let mut s = strategy.clone();
        s.retrieve.top_k += 1 + i as u32;
        let c = cpu_time();
        let t = Instant::now();
        let e = ev.evaluate(&s).expect("evaluates");
        warm.push(t.elapsed());
        warm_cpu += cpu_time().zip(c).map_or(Duration::ZERO, |(b, a)| b - a);
        assert_eq!(
            (e.cache.ingest.misses, e.cache.index.misses),
            (0, 0),
            "a retrieval-only change re-ran ingest or index"
        );
        assert_eq!(e.cache.retrieve.hits, 0, "each warm run must retrieve");
        let t = Instant::now();
        ev.evaluate(&s).expect("evaluates");
        repeat.push(t.elapsed());
    }

    println!(
        "eval bench: {} ({n} questions), default strategy, {runs} runs, {} threads",
        path.display(),
        rayon::current_num_threads()
    );
    println!(
        "  cold (load + ingest + index + evaluate)   median {:>9}  (min {}, max {})",
        ms(median(cold.clone())),
        ms(*cold.iter().min().unwrap()),
        ms(*cold.iter().max().unwrap())
    );
    println!(
        "  warm (retrieval-only change, top_k + k)   median {:>9}  (min {}, max {})",
        ms(median(warm.clone())),
        ms(*warm.iter().min().unwrap()),
        ms(*warm.iter().max().unwrap())
    );
    println!("  repeat (same strategy, all stages cached) median {:>9}", ms(median(repeat)));
    if let Some(c) = cold_cpu {
        println!(
            "  CPU time per run (all threads): cold {}, warm {}  (wall ~ CPU / threads on an idle machine)",
            ms(c),
            ms(warm_cpu / runs as u32)
        );
    }
    match peak_rss_mb() {
        Some(mb) => println!("  peak RSS (VmHWM)                          {mb:.1} MB"),
        None => println!("  peak RSS: /proc/self/status unavailable"),
    }
}
