//! `emend collision`: the entity-collision protocol (`emend_harness::collision`).
//! Per discriminator tag and K it scores hit@1 of the strategy's retrieval
//! and of its BM25 channel alone on tasks where BM25 cannot tell the K
//! memories apart (1/K by construction), and reports the paired difference
//! with a 95% paired bootstrap interval. `--out` writes the task set in the
//! LoCoMo format. Standalone: no project is needed; without `--strategy` the
//! built-in default strategy runs.
//!
//! `--seeds` runs the grid once per task seed and reports, per cell, the
//! mean delta and how many seeds' intervals lie above or below 0; a list
//! given to one of `--fusion`, `--vocab`, `--paraphrase`, `--dense-dim` or
//! `--hash-idf` makes one column per value ([`grid`]); `--markdown` prints
//! the tables as docs/collision.md shows them ([`table`]).

mod grid;
mod table;

use std::path::PathBuf;

use anyhow::anyhow;
use emend_harness::collision::{self, CollisionSpec};

use emend_model::artifact;

use super::{CmdResult, Failure};
use grid::{Column, Grid};

/// Bootstrap resamples per cell.
pub const RESAMPLES: u32 = 10_000;

#[derive(Debug, clap::Args)]
pub struct CollisionArgs {
    /// Memories per task (the gold one and K-1 distractors), comma-separated; K = 1 is the trivial cell (100%).
    #[arg(long, value_delimiter = ',', value_name = "K,...", default_values_t = [1usize, 2, 4, 8, 16])]
    k: Vec<usize>,
    /// Discriminator tags, comma-separated (default: all: service, tool, preference, project, technical).
    #[arg(long, value_delimiter = ',', value_name = "TAG,...")]
    tags: Option<Vec<String>>,
    /// Entities (tasks) per tag and K (default: seed 001's 32 K: 64, 128, 256, 512 for K = 2, 4, 8, 16; 32 at K = 1).
    #[arg(long)]
    entities: Option<usize>,
    /// The tag vocabulary: `seed` (seed 001: lexical service and tool, intent-style phrasal preference,
    /// project and technical) or `emend` (one-word answers; project and technical named things).
    /// A list makes one column per vocabulary.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "VOCAB,...", default_values_t = [VocabArg::Seed])]
    vocab: Vec<VocabArg>,
    /// Memory templates per fact: each memory is written with one of the first N of 8 templates.
    /// A list makes one column per N.
    #[arg(long, value_delimiter = ',', value_name = "N,...", default_values_t = [1usize])]
    paraphrase: Vec<usize>,
    /// The fusion of the run: `weighted-sum` (BM25's K-way tie adds the same score to every memory),
    /// `rrf` (the tie is ranked by the memories' order and enters the fused score) or `strategy` (its own).
    /// A list makes one column per fusion.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "FUSION,...", default_values_t = [FusionArg::WeightedSum])]
    fusion: Vec<FusionArg>,
    /// Override the strategy's `index.dense_dim` (trigram channel only; 1 to 65536). A list makes one column per dimension.
    #[arg(long, value_delimiter = ',', value_name = "DIM,...")]
    dense_dim: Option<Vec<u32>>,
    /// The trigram channel's bucket idf weights: `on` (every strategy's channel) or `off` (plain cosine of the
    /// hashed counts). A list makes one column per setting.
    #[arg(long, value_enum, value_delimiter = ',', value_name = "on|off,...", default_values_t = [Switch::On])]
    hash_idf: Vec<Switch>,
    /// Seeds the tasks, the memories' order (BM25's tie-break) and the bootstrap.
    #[arg(long, default_value_t = 0, conflicts_with = "seeds")]
    seed: u64,
    /// Run the grid for each of several task seeds: a range `1-5` or a list `0,2,4` (or both: `1-3,7`).
    /// Each cell shows the mean delta and the seeds whose 95% CI lies above 0 (`*`) or below 0 (`-`).
    #[arg(long, value_name = "S-E|S,...")]
    seeds: Option<String>,
    /// The strategy file (YAML); default: the built-in default strategy.
    #[arg(long, value_name = "PATH")]
    strategy: Option<PathBuf>,
    /// Override the strategy's `index.dense_kind` (for example `trigram`, `none`).
    #[arg(long, value_name = "KIND")]
    dense_kind: Option<String>,
    /// Also print the trigram channel's hash statistics at each dimension: memory pairs sharing a bucket,
    /// exact and spurious (collision) matches with the query per memory.
    #[arg(long)]
    hash_stats: bool,
    /// Write the task set (every requested tag and K, the first seed) as a LoCoMo-format JSON file.
    #[arg(long, value_name = "FILE.json")]
    out: Option<PathBuf>,
    /// Print a JSON list of cells instead of the table (an object with `cells` and `hash_stats` under --hash-stats).
    #[arg(long, conflicts_with = "markdown")]
    json: bool,
    /// Print the tables in Markdown, as docs/collision.md shows them.
    #[arg(long)]
    markdown: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum VocabArg {
    /// Seed 001's tags: lexical service and tool, intent-style preference, project and technical.
    Seed,
    /// The first vocabulary: one-word answers for every tag.
    Emend,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FusionArg {
    /// Weighted score sum: a BM25 tie carries no rank signal.
    WeightedSum,
    /// Weighted RRF: BM25's tie is ranked by the memories' seeded order.
    Rrf,
    /// The strategy's own `retrieve.fusion`.
    Strategy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    On,
    Off,
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

/// The MiniLM model for a strategy whose dense channel is `minilm`.
fn model(strategy: &emend_harness::Strategy) -> Result<Option<emend_harness::minilm::MiniLm>, Failure> {
    if strategy.index.dense_kind != emend_harness::strategy::DenseKind::Minilm {
        return Ok(None);
    }
    if !cfg!(feature = "minilm") {
        return Err(Failure::bad_input(anyhow!(
            "emend collision: index.dense_kind: minilm: {}",
            emend_harness::minilm::NOT_BUILT
        )));
    }
    let Some((dir, setting)) = emend_harness::minilm::locate(None) else {
        return Err(Failure::bad_input(anyhow!(
            "emend collision: index.dense_kind: minilm needs the model: set EMEND_MINILM_DIR (scripts/install-minilm.sh)"
        )));
    };
    Ok(Some(emend_harness::minilm::MiniLm::load(&dir).map_err(|e| Failure::bad_input(anyhow!("{setting}: {e}")))?))
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

pub fn run(args: &CollisionArgs) -> CmdResult {
    let plan = grid::plan(args)?;
    if let Some(out) = &args.out {
        let first: &Column = &plan.columns[0];
        write_tasks(&plan.spec(first, plan.seeds[0]), out)?;
    }
    let model = model(&plan.base)?;
    let grid: Grid = grid::run(&plan, model.as_ref())?;
    let hash = if args.hash_stats { Some(grid::hash_stats(&plan)?) } else { None };
    if args.json {
        let cells = serde_json::Value::Array(grid.cells.iter().flatten().flatten().cloned().collect());
        let value = match &hash {
            Some(h) => serde_json::json!({ "cells": cells, "hash_stats": table::hash_json(&plan, h) }),
            None => cells,
        };
        println!("{}", serde_json::to_string_pretty(&value).expect("JSON serializes"));
        return Ok(emend_model::exit::OK);
    }
    print!("{}", table::render(&plan, &grid, args.markdown));
    if let Some(h) = &hash {
        println!();
        print!("{}", table::render_hash(&plan, h, args.markdown));
    }
    if let Some(out) = &args.out {
        println!("task set written to {}", out.display());
    }
    Ok(emend_model::exit::OK)
}
