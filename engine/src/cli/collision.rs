//! `emend collision`: the entity-collision protocol (`harness::collision`).
//! Per discriminator tag and K it scores hit@1 of the strategy's retrieval
//! and of its BM25 channel alone on tasks where BM25 cannot tell the K
//! memories apart (1/K by construction), and reports the paired difference
//! with a 95% paired bootstrap interval. `--out` writes the task set in the
//! LoCoMo format. Standalone: no project is needed; without `--strategy` the
//! built-in default strategy runs.

use std::path::PathBuf;

use anyhow::anyhow;
use harness::collision::{self, CellResult, CollisionSpec};
use serde_json::{Value, json};

use engine::artifact;
use engine::schema::StrategySchema;
use engine::stats::{self, BootstrapConfig};

use super::{CmdResult, Failure, term};

const DEFAULT_STRATEGY: &str = include_str!("../../../strategies/default.yaml");
/// Bootstrap resamples per cell.
pub const RESAMPLES: u32 = 10_000;

#[derive(Debug, clap::Args)]
pub struct CollisionArgs {
    /// Memories per task (the gold one and K-1 distractors), comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "K,...", default_values_t = [2usize, 4, 8, 16])]
    k: Vec<usize>,
    /// Discriminator tags, comma-separated (default: all: service, tool, preference, project, technical).
    #[arg(long, value_delimiter = ',', value_name = "TAG,...")]
    tags: Option<Vec<String>>,
    /// Entities (tasks) per tag and K.
    #[arg(long, default_value_t = 200)]
    entities: usize,
    /// Seeds the tasks, the memories' order (BM25's tie-break) and the bootstrap.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The strategy file (YAML); default: the built-in default strategy.
    #[arg(long, value_name = "PATH")]
    strategy: Option<PathBuf>,
    /// Override the strategy's `index.dense_kind` (for example `trigram`, `none`).
    #[arg(long, value_name = "KIND")]
    dense_kind: Option<String>,
    /// Write the task set (every requested tag and K) as a LoCoMo-format JSON file.
    #[arg(long, value_name = "FILE.json")]
    out: Option<PathBuf>,
    /// Print a JSON list of cells instead of the table.
    #[arg(long)]
    json: bool,
}

fn strategy(args: &CollisionArgs) -> Result<harness::Strategy, Failure> {
    let schema = StrategySchema::builtin();
    let a = match &args.strategy {
        Some(p) => artifact::load_strategy_file(p).map_err(Failure::bad_input)?,
        None => artifact::from_yaml("strategies/default.yaml (built in)", DEFAULT_STRATEGY, &schema)
            .map_err(Failure::bad_input)?,
    };
    let mut s = a.typed().map_err(Failure::bad_input)?.clone();
    if let Some(kind) = &args.dense_kind {
        s.index.dense_kind = serde_json::from_value(Value::String(kind.clone()))
            .map_err(|e| Failure::bad_input(anyhow!("--dense-kind {kind}: {e}")))?;
    }
    Ok(s)
}

/// One cell's figures, with everything needed to reproduce its interval.
fn cell_json(c: &CellResult, seed: u64, dense_kind: &Value) -> Result<Value, Failure> {
    let outcomes = |strategy: bool| -> Vec<stats::Outcome> {
        c.tasks
            .iter()
            .map(|(id, r)| stats::Outcome {
                id: id.clone(),
                conversation: Some(id.clone()),
                category: c.tag.clone(),
                correct: if strategy { r.strategy } else { r.bm25 },
            })
            .collect()
    };
    let paired = stats::pair(&outcomes(false), &outcomes(true)).map_err(Failure::failed)?;
    let config = BootstrapConfig { resamples: RESAMPLES, seed, ..BootstrapConfig::default() };
    let ci = stats::paired_bootstrap(&paired, &config).map_err(Failure::failed)?;
    Ok(json!({
        "tag": c.tag,
        "k": c.k,
        "n": c.tasks.len(),
        "chance": 1.0 / c.k as f64,
        "bm25_hit1": c.bm25_hit1(),
        "hit1": c.hit1(),
        "delta": ci.delta,
        "ci_low": ci.low,
        "ci_high": ci.high,
        "level": ci.level,
        "resamples": ci.resamples,
        "bootstrap_seed": ci.seed,
        "seed": seed,
        "dense_kind": dense_kind,
    }))
}

pub fn run(args: &CollisionArgs) -> CmdResult {
    let strategy = strategy(args)?;
    let spec = CollisionSpec {
        tags: args.tags.clone().unwrap_or_else(|| collision::tag_names().iter().map(|t| t.to_string()).collect()),
        ks: args.k.clone(),
        entities: args.entities,
        seed: args.seed,
    };
    spec.validate().map_err(|e| Failure::bad_input(anyhow!("emend collision: {e}")))?;
    if let Some(out) = &args.out {
        let mut tasks = Vec::new();
        for tag in &spec.tags {
            for &k in &spec.ks {
                tasks.extend(collision::generate_cell(tag, k, spec.entities, spec.seed).map_err(Failure::bad_input)?);
            }
        }
        let text = serde_json::to_string_pretty(&collision::to_locomo(&tasks)).expect("JSON serializes");
        artifact::write_atomic(out, text.as_bytes())
            .map_err(|e| Failure::failed(anyhow!("--out {}: {e}", out.display())))?;
    }
    let model = match strategy.index.dense_kind {
        harness::strategy::DenseKind::Minilm => {
            if !cfg!(feature = "minilm") {
                return Err(Failure::bad_input(anyhow!(
                    "emend collision: index.dense_kind: minilm: {}",
                    harness::minilm::NOT_BUILT
                )));
            }
            let Some((dir, setting)) = harness::minilm::locate(None) else {
                return Err(Failure::bad_input(anyhow!(
                    "emend collision: index.dense_kind: minilm needs the model: set EMEND_MINILM_DIR (scripts/install-minilm.sh)"
                )));
            };
            Some(harness::minilm::MiniLm::load(&dir).map_err(|e| Failure::bad_input(anyhow!("{setting}: {e}")))?)
        }
        _ => None,
    };
    let cells = collision::run_with(&spec, &strategy, model.as_ref()).map_err(Failure::bad_input)?;
    let dense_kind = serde_json::to_value(strategy.index.dense_kind).expect("an enum serializes");
    let rows: Vec<Value> = cells.iter().map(|c| cell_json(c, args.seed, &dense_kind)).collect::<Result<_, _>>()?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&Value::Array(rows)).expect("JSON serializes"));
        return Ok(engine::exit::OK);
    }
    let pct = |v: &Value| format!("{:.1}%", v.as_f64().unwrap_or(f64::NAN) * 100.0);
    let pp = |v: &Value| format!("{:+.1}", v.as_f64().unwrap_or(f64::NAN) * 100.0);
    let table_rows = rows
        .iter()
        .map(|r| {
            vec![
                r["tag"].as_str().unwrap_or_default().to_string(),
                r["k"].to_string(),
                r["n"].to_string(),
                pct(&r["chance"]),
                pct(&r["bm25_hit1"]),
                pct(&r["hit1"]),
                pp(&r["delta"]),
                format!("[{}, {}]", pp(&r["ci_low"]), pp(&r["ci_high"])),
            ]
        })
        .collect();
    print!(
        "{}",
        term::table(
            &["tag", "k", "n", "1/k", "bm25 hit@1", "hit@1", "delta pp", "95% CI pp"],
            table_rows,
            &[false, true, true, true, true, true, true, false],
        )
    );
    println!(
        "dense channel: {}; seed {} (tasks, tie-break and bootstrap); paired percentile bootstrap, {RESAMPLES} resamples",
        dense_kind.as_str().unwrap_or("?"),
        args.seed
    );
    if let Some(out) = &args.out {
        println!("task set written to {}", out.display());
    }
    Ok(engine::exit::OK)
}
