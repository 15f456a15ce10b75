//! Engine overhead of one evaluation through the external harness protocol
//! on locomo10-dev's 762 questions: writing the strategy and the task shard,
//! starting the command, reading, parsing and validating the outcomes.
//! Measured with a trivial adapter that copies prepared outcomes (so its own
//! time is a process start), and next to the Python reference adapter, whose
//! own time is measured by running it directly. Plain `std::time`, medians.
//! Target: engine overhead at most 50 ms plus the adapter's own time.
//!
//! `cargo bench -p emend --bench command` (needs `../shared/data/locomo10-dev.json`
//! relative to the workspace root, or `EMEND_LOCOMO=path`; python3 for the
//! reference adapter).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use emend_core::artifact;
use emend_core::schema::StrategySchema;
use emend_eval::backend::Backend;
use emend_eval::command::{CommandBackend, CommandSpec};

const RUNS: usize = 15;
const TARGET: Duration = Duration::from_millis(50);

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> Duration {
    median(
        (0..runs)
            .map(|_| {
                let start = Instant::now();
                std::hint::black_box(f());
                start.elapsed()
            })
            .collect(),
    )
}

/// CPU time (user + system) this process has used, all threads, children
/// excluded: on a busy machine wall time overstates what emend itself costs.
/// Linux only (`/proc/self/stat`, 100 ticks a second).
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// Mean CPU time of emend per call of `f`, over `runs` calls.
fn cpu_per_run<T>(runs: usize, mut f: impl FnMut() -> T) -> Option<Duration> {
    let before = cpu_time()?;
    for _ in 0..runs {
        std::hint::black_box(f());
    }
    Some((cpu_time()? - before) / runs as u32)
}

fn sh(script: &str) -> Vec<String> {
    ["sh", "-c", script, "sh", "{strategy}", "{tasks}", "{out}"].iter().map(|s| s.to_string()).collect()
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the engine is in a workspace").to_path_buf();
    let data = std::env::var_os("EMEND_LOCOMO")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("../shared/data/locomo10-dev.json"));
    if !data.is_file() {
        println!("command bench: skipped ({} not found; set EMEND_LOCOMO)", data.display());
        return;
    }
    let example = root.join("examples/python-bm25");
    let schema = StrategySchema::from_path(&example.join("strategy.schema.json")).expect("the example schema loads");
    let strategy = artifact::load_file(&example.join("default.yaml"), &schema).expect("the example strategy loads");
    let dataset = emend_harness::load_path(&data).expect("the dataset loads");
    let selection = emend_harness::Selection::default();
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let backend = |argv: Vec<String>, shards: usize, concurrency: usize| {
        let spec = CommandSpec {
            argv,
            workdir: tmp.path().to_path_buf(),
            env: BTreeMap::new(),
            timeout: Duration::from_secs(120),
            shards,
            concurrency,
        };
        CommandBackend::new(&dataset, &selection, spec, schema.raw(), None).expect("the backend sets up")
    };

    // Prepared outcomes: one run of the reference adapter, kept.
    let adapter = example.join("adapter.py");
    let prepared = tmp.path().join("prepared.jsonl");
    let keep = backend(
        sh(&format!("python3 '{}' \"$1\" \"$2\" \"$3\" && cp \"$3\" '{}'", adapter.display(), prepared.display())),
        1,
        1,
    );
    let eval = match keep.evaluate(&strategy, None) {
        Ok(e) => e,
        Err(e) => {
            println!("command bench: skipped (the reference adapter failed: {e})");
            return;
        }
    };
    let n = eval.n();
    println!(
        "command bench: {} ({n} questions), median of {RUNS} runs; reference adapter accuracy {:.4}",
        dataset.name(),
        eval.accuracy()
    );

    // 1. Engine overhead: the command only copies the prepared outcomes.
    let trivial = backend(sh(&format!("exec cp '{}' \"$3\"", prepared.display())), 1, 1);
    let overhead = time(RUNS, || trivial.evaluate(&strategy, None).expect("the trivial adapter evaluates"));
    let cpu = cpu_per_run(4 * RUNS, || trivial.evaluate(&strategy, None).expect("the trivial adapter evaluates"));
    let start_only = time(RUNS, || {
        Command::new("sh")
            .args(["-c", "exec cp \"$1\" \"$2\"", "sh"])
            .arg(&prepared)
            .arg(tmp.path().join("copy.jsonl"))
            .status()
    });
    println!(
        "  engine overhead per evaluation (trivial `cp` adapter, 1 shard): {} wall (starting sh+cp alone: {}), {} CPU in emend; target <= {}: {}",
        ms(overhead),
        ms(start_only),
        cpu.map_or("?".to_string(), ms),
        ms(TARGET),
        if overhead <= TARGET { "ok" } else { "MISSED" }
    );

    // 2. The reference adapter alone, on a shard file emend wrote.
    let shard = tmp.path().join("shard.json");
    let strategy_json = tmp.path().join("strategy.json");
    std::fs::write(&shard, &keep.shard_files(None).expect("shards render")[0]).expect("shard written");
    let mut doc = strategy.value.clone();
    doc.as_object_mut().expect("a mapping").retain(|k, _| !artifact::METADATA_KEYS.contains(&k.as_str()));
    std::fs::write(&strategy_json, doc.to_string()).expect("strategy written");
    let out = tmp.path().join("direct.jsonl");
    let direct = || {
        let start = Instant::now();
        let s = Command::new("python3").arg(&adapter).arg(&strategy_json).arg(&shard).arg(&out).status();
        assert!(s.expect("python3 runs").success());
        start.elapsed()
    };

    // 3. The reference adapter through emend, 1 shard and 4 shards on 2 workers.
    let argv = || -> Vec<String> {
        vec!["python3".into(), adapter.display().to_string(), "{strategy}".into(), "{tasks}".into(), "{out}".into()]
    };
    let reference = backend(argv(), 1, 1);
    let sharded = backend(argv(), 4, 2);
    // Alternate direct and through-emend runs: on a busy machine the
    // adapter's time drifts, and the pairwise difference is what emend adds.
    let (mut own, mut through, mut added, mut through4) = (vec![], vec![], vec![], vec![]);
    for _ in 0..RUNS {
        let d = direct();
        let start = Instant::now();
        reference.evaluate(&strategy, None).expect("the adapter evaluates");
        let t = start.elapsed();
        own.push(d);
        through.push(t);
        added.push(t.saturating_sub(d));
        let start = Instant::now();
        sharded.evaluate(&strategy, None).expect("the adapter evaluates");
        through4.push(start.elapsed());
    }
    println!("  reference adapter's own time (python3 run directly):            {}", ms(median(own)));
    println!(
        "  reference adapter through emend, 1 shard:                       {}  (added by emend: median of paired differences {})",
        ms(median(through)),
        ms(median(added))
    );
    println!("  reference adapter through emend, 4 shards, concurrency 2:      {}", ms(median(through4)));
}
