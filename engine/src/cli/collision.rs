//! `emend collision`: the entity-collision protocol (`harness::collision`).
//! Per discriminator tag and K it scores hit@1 of the strategy's retrieval
//! and of its BM25 channel alone on tasks where BM25 cannot tell the K
//! memories apart (1/K by construction), and reports the paired difference
//! with a 95% paired bootstrap interval. `--out` writes the task set in the
//! LoCoMo format. Standalone: no project is needed; without `--strategy` the
//! built-in default strategy runs.

use std::path::PathBuf;

use anyhow::anyhow;
use harness::collision::{self, CellResult, CollisionSpec, Vocab};
use harness::strategy::Fusion;
use serde_json::{Value, json};

use engine::artifact;
use engine::percent::{percent, points};
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
    /// Entities (tasks) per tag and K (default: seed 001's 32 K: 64, 128, 256, 512 for K = 2, 4, 8, 16).
    #[arg(long)]
    entities: Option<usize>,
    /// The tag vocabulary: `seed` (seed 001: lexical service and tool, intent-style phrasal preference,
    /// project and technical) or `emend` (one-word answers; project and technical named things).
    #[arg(long, value_enum, default_value_t = VocabArg::Seed)]
    vocab: VocabArg,
    /// Memory templates per fact: each memory is written with one of the first N of 8 templates.
    #[arg(long, default_value_t = 1, value_name = "N")]
    paraphrase: usize,
    /// The fusion of the run: `weighted-sum` (BM25's K-way tie adds the same score to every memory),
    /// `rrf` (the tie is ranked by the memories' order and enters the fused score) or `strategy` (its own).
    #[arg(long, value_enum, default_value_t = FusionArg::WeightedSum)]
    fusion: FusionArg,
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum VocabArg {
    /// Seed 001's tags: lexical service and tool, intent-style preference, project and technical.
    Seed,
    /// The first vocabulary: one-word answers for every tag.
    Emend,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum FusionArg {
    /// Weighted score sum: a BM25 tie carries no rank signal.
    WeightedSum,
    /// Weighted RRF: BM25's tie is ranked by the memories' seeded order.
    Rrf,
    /// The strategy's own `retrieve.fusion`.
    Strategy,
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
    match args.fusion {
        FusionArg::WeightedSum => s.retrieve.fusion = Fusion::WeightedSum,
        FusionArg::Rrf => s.retrieve.fusion = Fusion::Rrf,
        FusionArg::Strategy => {}
    }
    Ok(s)
}

/// The mark of a cell: `*` when the 95% interval of the delta lies above 0
/// (CI-positive), `-` when it lies below, `n.s.` when it contains 0.
pub fn mark(low: f64, high: f64) -> &'static str {
    if low > 0.0 {
        "*"
    } else if high < 0.0 {
        "-"
    } else {
        "n.s."
    }
}

/// What every cell of a run shares.
struct RunInfo {
    seed: u64,
    dense_kind: Value,
    fusion: Value,
    vocab: &'static str,
    paraphrase: usize,
}

/// One cell's figures, with everything needed to reproduce its interval.
fn cell_json(c: &CellResult, info: &RunInfo) -> Result<Value, Failure> {
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
    let config = BootstrapConfig { resamples: RESAMPLES, seed: info.seed, ..BootstrapConfig::default() };
    let ci = stats::paired_bootstrap(&paired, &config).map_err(Failure::failed)?;
    Ok(json!({
        "tag": c.tag,
        "class": c.class.name(),
        "k": c.k,
        "n": c.tasks.len(),
        "chance": 1.0 / c.k as f64,
        "bm25_hit1": c.bm25_hit1(),
        "hit1": c.hit1(),
        "delta": ci.delta,
        "ci_low": ci.low,
        "ci_high": ci.high,
        "mark": mark(ci.low, ci.high),
        "level": ci.level,
        "resamples": ci.resamples,
        "bootstrap_seed": ci.seed,
        "seed": info.seed,
        "dense_kind": info.dense_kind,
        "fusion": info.fusion,
        "vocab": info.vocab,
        "paraphrase": info.paraphrase,
    }))
}

/// The MiniLM model for a strategy whose dense channel is `minilm`.
fn model(strategy: &harness::Strategy) -> Result<Option<harness::minilm::MiniLm>, Failure> {
    if strategy.index.dense_kind != harness::strategy::DenseKind::Minilm {
        return Ok(None);
    }
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
    Ok(Some(harness::minilm::MiniLm::load(&dir).map_err(|e| Failure::bad_input(anyhow!("{setting}: {e}")))?))
}

fn write_tasks(spec: &CollisionSpec, out: &std::path::Path) -> Result<(), Failure> {
    let mut tasks = Vec::new();
    for tag in &spec.tags {
        for &k in &spec.ks {
            tasks.extend(spec.cell(tag, k).map_err(Failure::bad_input)?);
        }
    }
    let text = serde_json::to_string_pretty(&collision::to_locomo(&tasks)).expect("JSON serializes");
    artifact::write_atomic(out, text.as_bytes()).map_err(|e| Failure::failed(anyhow!("--out {}: {e}", out.display())))
}

fn print_table(rows: &[Value], info: &RunInfo) {
    let pct = |v: &Value| percent(v.as_f64().unwrap_or(f64::NAN), 1);
    let pp = |v: &Value| points(v.as_f64().unwrap_or(f64::NAN), 1);
    let table_rows = rows
        .iter()
        .map(|r| {
            vec![
                r["tag"].as_str().unwrap_or_default().to_string(),
                r["class"].as_str().unwrap_or_default().to_string(),
                r["k"].to_string(),
                r["n"].to_string(),
                pct(&r["chance"]),
                pct(&r["bm25_hit1"]),
                pct(&r["hit1"]),
                pp(&r["delta"]),
                format!("[{}, {}]", pp(&r["ci_low"]), pp(&r["ci_high"])),
                r["mark"].as_str().unwrap_or_default().to_string(),
            ]
        })
        .collect();
    print!(
        "{}",
        term::table(
            &["tag", "class", "k", "n", "1/k", "bm25 hit@1", "hit@1", "delta pp", "95% CI pp", ""],
            table_rows,
            &[false, false, true, true, true, true, true, true, false, false],
        )
    );
    println!(
        "dense channel: {}; fusion: {}; vocabulary: {}; paraphrase: {} template(s) per fact; seed {} (tasks, \
         tie-break and bootstrap); paired percentile bootstrap, {RESAMPLES} resamples; * 95% CI above 0, \
         n.s. CI contains 0, - CI below 0",
        info.dense_kind.as_str().unwrap_or("?"),
        info.fusion.as_str().unwrap_or("?"),
        info.vocab,
        info.paraphrase,
        info.seed
    );
}

pub fn run(args: &CollisionArgs) -> CmdResult {
    let strategy = strategy(args)?;
    let vocab = match args.vocab {
        VocabArg::Seed => Vocab::Seed,
        VocabArg::Emend => Vocab::Emend,
    };
    let spec = CollisionSpec {
        tags: args.tags.clone().unwrap_or_else(|| collision::tag_names().iter().map(|t| t.to_string()).collect()),
        ks: args.k.clone(),
        entities: args.entities,
        seed: args.seed,
        vocab,
        paraphrase: args.paraphrase,
    };
    spec.validate().map_err(|e| Failure::bad_input(anyhow!("emend collision: {e}")))?;
    if let Some(out) = &args.out {
        write_tasks(&spec, out)?;
    }
    let model = model(&strategy)?;
    let cells = collision::run_with(&spec, &strategy, model.as_ref()).map_err(Failure::bad_input)?;
    let info = RunInfo {
        seed: args.seed,
        dense_kind: serde_json::to_value(strategy.index.dense_kind).expect("an enum serializes"),
        fusion: serde_json::to_value(strategy.retrieve.fusion).expect("an enum serializes"),
        vocab: vocab.name(),
        paraphrase: args.paraphrase,
    };
    let rows: Vec<Value> = cells.iter().map(|c| cell_json(c, &info)).collect::<Result<_, _>>()?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&Value::Array(rows)).expect("JSON serializes"));
        return Ok(engine::exit::OK);
    }
    print_table(&rows, &info);
    if let Some(out) = &args.out {
        println!("task set written to {}", out.display());
    }
    Ok(engine::exit::OK)
}
