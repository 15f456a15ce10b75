//! Evaluation benchmark: `cargo bench -p emend-harness` (plain `std::time`,
//! medians of several runs).
//!
//! On locomo10-dev and on a 16x replica built here (16 renamed copies of every
//! conversation, so 16 times the conversations and questions):
//!
//! - in process: cold (load, ingest, index, evaluate with a new evaluator),
//!   warm (a retrieval-only change, a new top_k each run, ingest and index
//!   cached) and repeat (the same strategy again);
//! - through the CLI in a project (`emend eval` inside a directory made by
//!   `emend init`, a fresh process each run): cold (no stage cache on disk),
//!   warm (a retrieval-only change after an evaluation of another strategy)
//!   and repeat;
//! - peak memory: the benchmark process's VmHWM per dataset (reset in
//!   between), and each CLI process's maximum RSS.
//!
//! Goals on a 2-core machine: warm CLI <= 50 ms on locomo10-dev, warm faster
//! than cold at 16x. The file is found at `../shared/data/locomo10-dev.json`
//! from the workspace root, or at `EMEND_LOCOMO`; without it the benchmark
//! says so and exits. The CLI is `target/release/emend` (or `EMEND_BIN`):
//! build it first (`cargo build --release -p emend`); without it the CLI rows
//! are skipped with a note.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use emend_harness::{Evaluator, HarnessSettings, Strategy};

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// Resets VmHWM to the current RSS (Linux >= 4.0), so each dataset's peak is its own.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// User + system CPU time of the process so far.
fn cpu_time() -> Duration {
    // SAFETY: getrusage writes into the struct we pass.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// `n` renamed copies of every conversation of a LoCoMo file.
fn replicate(text: &str, n: usize) -> String {
    let samples: Vec<serde_json::Value> = serde_json::from_str(text).expect("a LoCoMo file is a JSON list");
    let mut out = Vec::with_capacity(samples.len() * n);
    for copy in 0..n {
        for s in &samples {
            let mut s = s.clone();
            let id = s["sample_id"].as_str().expect("sample_id").to_string();
            s["sample_id"] = serde_json::json!(format!("{id}-x{copy:02}"));
            out.push(s);
        }
    }
    serde_json::to_string(&out).expect("serializes")
}

/// The first conversation with its sessions repeated `n` times (renumbered
/// sessions and turn ids, dates kept, each copy's turns marked with its
/// number): nearly the same content at `n` times the length.
fn lengthen(text: &str, n: usize) -> String {
    let samples: Vec<serde_json::Value> = serde_json::from_str(text).expect("a LoCoMo file is a JSON list");
    let s = &samples[0];
    let conv = s["conversation"].as_object().expect("conversation");
    let sessions = conv.keys().filter(|k| k.starts_with("session_") && !k.ends_with("date_time")).count();
    let mut out = serde_json::Map::new();
    out.insert("speaker_a".into(), conv["speaker_a"].clone());
    out.insert("speaker_b".into(), conv["speaker_b"].clone());
    for copy in 0..n {
        for i in 1..=sessions {
            let j = copy * sessions + i;
            let turns: Vec<serde_json::Value> = conv[&format!("session_{i}")]
                .as_array()
                .expect("turns")
                .iter()
                .map(|t| {
                    let mut t = t.clone();
                    let id = t["dia_id"].as_str().expect("dia_id").to_string();
                    let num = id.rsplit(':').next().expect("turn number").to_string();
                    t["dia_id"] = serde_json::json!(format!("D{j}:{num}"));
                    // A mark per copy: near-duplicates, not exact ones, so the similarity check runs.
                    if copy > 0 {
                        let text = t["text"].as_str().unwrap_or_default().to_string();
                        t["text"] = serde_json::json!(format!("{text} (copy {copy})"));
                    }
                    t
                })
                .collect();
            out.insert(format!("session_{j}_date_time"), conv[&format!("session_{i}_date_time")].clone());
            out.insert(format!("session_{j}"), serde_json::Value::Array(turns));
        }
    }
    serde_json::json!([{"sample_id": "long", "conversation": out, "qa": []}]).to_string()
}

/// Median time of the ingest stage alone on the first sample of `text`.
fn ingest_time(text: &str, strategy: &Strategy, runs: usize) -> (usize, Duration) {
    let d = emend_harness::load_str("long.json", text).expect("loads");
    let sample = &d.samples()[0];
    let mut ts = Vec::new();
    let mut items = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let m = emend_harness::ingest::ingest(sample, &strategy.ingest, None).expect("ingests");
        ts.push(t.elapsed());
        items = m.items.len() + m.stats.duplicates as usize;
    }
    (items, median(ts))
}

struct Rows {
    cold: Vec<Duration>,
    warm: Vec<Duration>,
    repeat: Vec<Duration>,
    cold_cpu: Duration,
    warm_cpu: Duration,
    /// Ingest and index cache misses over the warm runs (0 when the cache holds the task set).
    stage_misses: u64,
    stage_lookups: u64,
}

fn in_process(path: &Path, strategy: &Strategy, runs: usize) -> (usize, Rows) {
    let mut cold = Vec::new();
    let mut n = 0;
    let c0 = cpu_time();
    for _ in 0..runs {
        let t = Instant::now();
        let dataset = emend_harness::load_path(path).expect("the task set loads");
        let ev = Evaluator::new(Arc::new(dataset), HarnessSettings::default()).expect("default settings");
        let e = ev.evaluate(strategy).expect("the default strategy evaluates");
        cold.push(t.elapsed());
        n = e.summary.n;
    }
    let cold_cpu = (cpu_time() - c0) / runs as u32;
    let dataset = Arc::new(emend_harness::load_path(path).expect("the task set loads"));
    let ev = Evaluator::new(dataset, HarnessSettings::default()).expect("default settings");
    ev.evaluate(strategy).expect("the default strategy evaluates");
    let (mut warm, mut repeat) = (Vec::new(), Vec::new());
    let mut warm_cpu = Duration::ZERO;
    let (mut stage_misses, mut stage_lookups) = (0, 0);
    for i in 0..runs {
        let mut s = strategy.clone();
        s.retrieve.top_k += 1 + i as u32;
        let c = cpu_time();
        let t = Instant::now();
        let e = ev.evaluate(&s).expect("evaluates");
        warm.push(t.elapsed());
        warm_cpu += cpu_time() - c;
        // Reported, not asserted: a cache too small for the task set shows up here.
        stage_misses += e.cache.ingest.misses + e.cache.index.misses;
        stage_lookups += e.cache.ingest.hits + e.cache.ingest.misses + e.cache.index.hits + e.cache.index.misses;
        assert_eq!(e.cache.retrieve.hits, 0, "each warm run must retrieve");
        let t = Instant::now();
        ev.evaluate(&s).expect("evaluates");
        repeat.push(t.elapsed());
    }
    (n, Rows { cold, warm, repeat, cold_cpu, warm_cpu: warm_cpu / runs as u32, stage_misses, stage_lookups })
}

/// One `emend eval` in the project: wall time, CPU time (user + system, all
/// threads) and the process's maximum RSS in MB. The RSS comes from GNU time
/// (`/usr/bin/time -f %M`) when it is installed: the rusage of a child forked
/// from this benchmark would report this process's own size.
// The child is reaped by wait4 (for its rusage), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn cli_eval(bin: &Path, project: &Path, strategy: &Path, tasks: &Path) -> (Duration, Duration, Option<f64>) {
    let gnu_time = Path::new("/usr/bin/time");
    let rss_file = project.join("rss.txt");
    let mut cmd = if gnu_time.exists() {
        let mut c = Command::new(gnu_time);
        c.arg("-f").arg("%M").arg("-o").arg(&rss_file).arg(bin);
        c
    } else {
        Command::new(bin)
    };
    let t = Instant::now();
    let child = cmd
        .current_dir(project)
        .args(["eval", "--json", "--strategy"])
        .arg(strategy)
        .arg("--tasks")
        .arg(tasks)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("emend starts");
    let mut status = 0;
    // SAFETY: wait4 reaps the child we spawned and fills the rusage we pass.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    let pid = unsafe { libc::wait4(child.id() as libc::pid_t, &mut status, 0, &mut u) };
    let wall = t.elapsed();
    assert!(pid > 0 && libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "emend eval failed ({status})");
    // GNU time's own CPU is a few hundred microseconds; the rusage covers its child.
    let tv = |t: libc::timeval| Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64);
    let rss = std::fs::read_to_string(&rss_file).ok().and_then(|s| s.trim().parse::<f64>().ok()).map(|kb| kb / 1024.0);
    (wall, tv(u.ru_utime) + tv(u.ru_stime), rss)
}

struct CliRows {
    cold: Vec<Duration>,
    warm: Vec<Duration>,
    repeat: Vec<Duration>,
    warm_cpu: Vec<Duration>,
    peak_mb: Option<f64>,
}

fn through_cli(bin: &Path, tasks: &Path, strategy_text: &str, runs: usize) -> CliRows {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let project = dir.path().join("proj");
    let ok = Command::new(bin)
        .arg("init")
        .arg(&project)
        .arg("--tasks")
        .arg(tasks)
        .stdout(Stdio::null())
        .status()
        .expect("emend init runs");
    assert!(ok.success(), "emend init failed");
    let cache = project.join(".emend/cache");
    let write = |name: &str, top_k: u32| {
        let p = dir.path().join(name);
        std::fs::write(&p, strategy_text.replace("top_k: 5\n", &format!("top_k: {top_k}\n"))).expect("writes");
        p
    };
    let base = write("base.yaml", 5);
    let mut rows =
        CliRows { cold: Vec::new(), warm: Vec::new(), repeat: Vec::new(), warm_cpu: Vec::new(), peak_mb: None };
    let mut peak = |mb: Option<f64>| {
        if let Some(mb) = mb {
            rows.peak_mb = Some(rows.peak_mb.map_or(mb, |p: f64| p.max(mb)));
        }
    };
    for i in 0..runs {
        let _ = std::fs::remove_dir_all(&cache);
        let (t, _, mb) = cli_eval(bin, &project, &base, tasks);
        rows.cold.push(t);
        peak(mb);
        let s = write(&format!("warm-{i}.yaml"), 6 + i as u32);
        let (t, cpu, mb) = cli_eval(bin, &project, &s, tasks);
        rows.warm.push(t);
        rows.warm_cpu.push(cpu);
        peak(mb);
        let (t, _, mb) = cli_eval(bin, &project, &s, tasks);
        rows.repeat.push(t);
        peak(mb);
    }
    rows
}

fn row(name: &str, xs: &[Duration]) {
    println!(
        "  {name:<44} median {:>10}  (min {}, max {})",
        ms(median(xs.to_vec())),
        ms(*xs.iter().min().unwrap()),
        ms(*xs.iter().max().unwrap())
    );
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
    let strategy_text = std::fs::read_to_string(root.join("strategies/default.yaml")).expect("strategies/default.yaml");
    let strategy: Strategy = serde_yaml::from_str(&strategy_text).expect("the default strategy parses");
    let bin = std::env::var_os("EMEND_BIN").map(PathBuf::from).unwrap_or_else(|| root.join("target/release/emend"));
    let bin = bin.exists().then_some(bin);

    let dir = tempfile::tempdir().expect("a temporary directory");
    let replica = dir.path().join("locomo10-dev-x16.json");
    std::fs::write(&replica, replicate(&std::fs::read_to_string(&path).expect("reads"), 16)).expect("writes");
    let sets: Vec<(&str, PathBuf, usize)> = if quick {
        vec![("locomo10-dev", path.clone(), 1)]
    } else {
        vec![("locomo10-dev", path.clone(), 9), ("16x replica", replica, 3)]
    };
    println!("eval bench: default strategy, {} threads", rayon::current_num_threads());
    let text = std::fs::read_to_string(&path).expect("reads");
    let runs = 5;
    let (n1, t1) = ingest_time(&lengthen(&text, 1), &strategy, runs);
    let (n16, t16) = ingest_time(&lengthen(&text, 16), &strategy, runs);
    println!(
        "ingest of one conversation ({n1} candidate items) {}; nearly the same content at 16x length ({n16}) {} ({:.1}x)",
        ms(t1),
        ms(t16),
        t16.as_secs_f64() / t1.as_secs_f64()
    );
    for (name, p, runs) in sets {
        reset_peak_rss();
        let (n, r) = in_process(&p, &strategy, runs);
        let peak = peak_rss_mb();
        println!("{name} ({n} questions), {runs} runs");
        row("in process: cold (load+ingest+index+evaluate)", &r.cold);
        row("in process: warm (retrieval-only change)", &r.warm);
        row("in process: repeat (same strategy)", &r.repeat);
        println!("  CPU per run (all threads): cold {}, warm {}", ms(r.cold_cpu), ms(r.warm_cpu));
        println!("  in process: ingest+index cache misses in warm runs {}/{}", r.stage_misses, r.stage_lookups);
        match peak {
            Some(mb) => println!("  in process: peak RSS (VmHWM)                  {mb:.1} MB"),
            None => println!("  in process: peak RSS unavailable"),
        }
        match &bin {
            Some(bin) if !quick => {
                let c = through_cli(bin, &p, &strategy_text, runs);
                row("CLI in a project: cold (no cache on disk)", &c.cold);
                row("CLI in a project: warm (retrieval-only change)", &c.warm);
                row("CLI in a project: repeat (same strategy)", &c.repeat);
                println!("  CLI: CPU of a warm run (user + system)        median {}", ms(median(c.warm_cpu.clone())));
                match c.peak_mb {
                    Some(mb) => println!("  CLI: peak RSS of one process                  {mb:.1} MB"),
                    None => println!("  CLI: peak RSS unavailable (no /usr/bin/time)"),
                }
            }
            Some(_) => {}
            None => println!("  CLI rows skipped: build target/release/emend first (or set EMEND_BIN)"),
        }
    }
}
