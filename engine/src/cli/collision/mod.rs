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
//! `--hash-idf` makes one column per value (`emend_eval::collision`, which
//! plans and runs the grid); `--markdown` prints
//! the tables as docs/collision.md shows them ([`table`]).

mod table;

use std::path::PathBuf;

use anyhow::anyhow;
use emend_eval::collision::{self, FusionChoice, GridError, GridRequest};
use emend_harness::collision::Vocab;

use emend_core::artifact;

use super::{CmdResult, Failure};

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

impl CollisionArgs {
    /// The library's request: the flags without their clap types.
    fn request(&self) -> GridRequest {
        GridRequest {
            k: self.k.clone(),
            tags: self.tags.clone(),
            entities: self.entities,
            vocab: self
                .vocab
                .iter()
                .map(|v| match v {
                    VocabArg::Seed => Vocab::Seed,
                    VocabArg::Emend => Vocab::Emend,
                })
                .collect(),
            paraphrase: self.paraphrase.clone(),
            fusion: self
                .fusion
                .iter()
                .map(|f| match f {
                    FusionArg::WeightedSum => FusionChoice::WeightedSum,
                    FusionArg::Rrf => FusionChoice::Rrf,
                    FusionArg::Strategy => FusionChoice::Strategy,
                })
                .collect(),
            dense_dim: self.dense_dim.clone(),
            hash_idf: self.hash_idf.iter().map(|s| *s == Switch::On).collect(),
            seed: self.seed,
            seeds: self.seeds.clone(),
            strategy: self.strategy.clone(),
            dense_kind: self.dense_kind.clone(),
        }
    }
}

/// A grid error as the binary reports it: a statistics failure exits 1,
/// anything else is bad input (exit 2).
fn failure(e: GridError) -> Failure {
    match e {
        GridError::Failed(_) => Failure::failed(e),
        GridError::BadInput(_) | GridError::Input(_) => Failure::bad_input(e),
    }
}

pub fn run(args: &CollisionArgs) -> CmdResult {
    let plan = collision::plan(&args.request()).map_err(failure)?;
    if let Some(out) = &args.out {
        let tasks = collision::locomo_tasks(&plan.spec(&plan.columns[0], plan.seeds[0])).map_err(failure)?;
        let text = serde_json::to_string_pretty(&tasks).expect("JSON serializes");
        artifact::write_atomic(out, text.as_bytes())
            .map_err(|e| Failure::failed(anyhow!("--out {}: {e}", out.display())))?;
    }
    let model = collision::model(&plan.base).map_err(failure)?;
    let grid = collision::run(&plan, model.as_ref()).map_err(failure)?;
    let hash = if args.hash_stats { Some(collision::hash_stats(&plan).map_err(failure)?) } else { None };
    if args.json {
        let cells = serde_json::Value::Array(grid.cells.iter().flatten().flatten().cloned().collect());
        let value = match &hash {
            Some(h) => serde_json::json!({ "cells": cells, "hash_stats": table::hash_json(&plan, h) }),
            None => cells,
        };
        println!("{}", serde_json::to_string_pretty(&value).expect("JSON serializes"));
        return Ok(emend_core::exit::OK);
    }
    print!("{}", table::render(&plan, &grid, args.markdown));
    if let Some(h) = &hash {
        println!();
        print!("{}", table::render_hash(&plan, h, args.markdown));
    }
    if let Some(out) = &args.out {
        println!("task set written to {}", out.display());
    }
    Ok(emend_core::exit::OK)
}
