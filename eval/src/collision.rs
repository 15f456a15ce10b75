//! The entity-collision grid behind `emend collision`: the task seeds, the
//! one list axis whose values make the columns, each (column, seed) run's
//! cells with their paired bootstrap intervals, and the trigram channel's
//! hash statistics. The binary turns its flags into a [`GridRequest`], makes
//! the [`plan`], [`run`]s it and prints the tables.

use std::path::PathBuf;

use emend_harness::collision::{self, CellResult, Channel, CollisionSpec, HashStats, Vocab};
use emend_harness::strategy::{DenseKind, Fusion};
use serde_json::{Value, json};

use emend_core::artifact;
use emend_core::schema::StrategySchema;
use emend_stats::{self, BootstrapConfig};

/// Bootstrap resamples per cell.
pub const RESAMPLES: u32 = 10_000;

/// Why a grid cannot be planned or run.
#[derive(Debug, thiserror::Error)]
pub enum GridError {
    /// A request that cannot run as given (exit 2).
    #[error("{0}")]
    BadInput(String),
    /// A strategy, a task set or a model that cannot be used (exit 2), with its cause.
    #[error(transparent)]
    Input(Box<dyn std::error::Error + Send + Sync>),
    /// The statistics failed on data the grid made (exit 1).
    #[error(transparent)]
    Failed(Box<dyn std::error::Error + Send + Sync>),
}

impl GridError {
    fn input(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        GridError::Input(Box::new(e))
    }
}

/// The fusion of a column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FusionChoice {
    /// Weighted score sum: a BM25 tie carries no rank signal.
    WeightedSum,
    /// Weighted RRF: BM25's tie is ranked by the memories' seeded order.
    Rrf,
    /// The strategy's own `retrieve.fusion`.
    Strategy,
}

/// What `emend collision` asks for; a list with several values makes the
/// columns (one list at a time).
#[derive(Debug, Clone)]
pub struct GridRequest {
    pub k: Vec<usize>,
    /// None: every tag.
    pub tags: Option<Vec<String>>,
    pub entities: Option<usize>,
    pub vocab: Vec<Vocab>,
    pub paraphrase: Vec<usize>,
    pub fusion: Vec<FusionChoice>,
    pub dense_dim: Option<Vec<u32>>,
    pub hash_idf: Vec<bool>,
    /// The task seed when `seeds` is None.
    pub seed: u64,
    /// `1-5`, `0,2,4` or `1-3,7`.
    pub seeds: Option<String>,
    /// None: the built-in default strategy.
    pub strategy: Option<PathBuf>,
    pub dense_kind: Option<String>,
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

/// The largest `--dense-dim`.
pub const MAX_DIM: u32 = 65_536;

/// The flag whose list makes the columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Axis {
    Fusion,
    Vocab,
    Paraphrase,
    DenseDim,
    HashIdf,
}

impl Axis {
    pub fn flag(self) -> &'static str {
        match self {
            Axis::Fusion => "--fusion",
            Axis::Vocab => "--vocab",
            Axis::Paraphrase => "--paraphrase",
            Axis::DenseDim => "--dense-dim",
            Axis::HashIdf => "--hash-idf",
        }
    }
}

/// One column's settings (every column of a run differs in the axis only).
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    pub label: String,
    pub fusion: FusionChoice,
    pub vocab: Vocab,
    pub paraphrase: usize,
    /// The trigram channel's dimension (None: not the trigram channel).
    pub dense_dim: Option<u32>,
    pub hash_idf: bool,
}

/// What to run.
pub struct Plan {
    /// The strategy with `--dense-kind` applied (fusion and dimension per column).
    pub base: emend_harness::Strategy,
    pub tags: Vec<String>,
    pub ks: Vec<usize>,
    pub entities: Option<usize>,
    pub seeds: Vec<u64>,
    pub axis: Option<Axis>,
    pub columns: Vec<Column>,
}

impl Plan {
    pub fn spec(&self, c: &Column, seed: u64) -> CollisionSpec {
        CollisionSpec {
            tags: self.tags.clone(),
            ks: self.ks.clone(),
            entities: self.entities,
            seed,
            vocab: c.vocab,
            paraphrase: c.paraphrase,
        }
    }

    pub fn strategy(&self, c: &Column) -> emend_harness::Strategy {
        let mut s = self.base.clone();
        match c.fusion {
            FusionChoice::WeightedSum => s.retrieve.fusion = Fusion::WeightedSum,
            FusionChoice::Rrf => s.retrieve.fusion = Fusion::Rrf,
            FusionChoice::Strategy => {}
        }
        if let Some(dim) = c.dense_dim {
            s.index.dense_dim = dim;
        }
        s
    }

    /// The seeds as `1-5` or `0,2,4` (runs of consecutive seeds as ranges).
    pub fn seeds_label(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        let mut i = 0;
        while i < self.seeds.len() {
            let mut j = i;
            while j + 1 < self.seeds.len() && self.seeds[j + 1] == self.seeds[j] + 1 {
                j += 1;
            }
            parts.push(if j > i { format!("{}-{}", self.seeds[i], self.seeds[j]) } else { self.seeds[i].to_string() });
            i = j + 1;
        }
        parts.join(",")
    }
}

fn bad(text: String) -> GridError {
    GridError::BadInput(text)
}

/// `1-5`, `0,2,4` or `1-3,7`: the seeds in the order given, each once.
pub fn parse_seeds(text: &str) -> Result<Vec<u64>, GridError> {
    let err =
        || bad(format!("--seeds {text}: expected a range like 1-5 or a list like 0,2,4 of non-negative integers"));
    let mut out: Vec<u64> = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<u64>().map_err(|_| err())?, b.trim().parse::<u64>().map_err(|_| err())?),
            None => {
                let a = part.parse::<u64>().map_err(|_| err())?;
                (a, a)
            }
        };
        if a > b || b - a >= 1000 {
            return Err(err());
        }
        for s in a..=b {
            if out.contains(&s) {
                return Err(bad(format!("--seeds {text}: seed {s} is listed twice")));
            }
            out.push(s);
        }
    }
    Ok(out)
}

fn load_strategy(req: &GridRequest) -> Result<emend_harness::Strategy, GridError> {
    let schema = StrategySchema::builtin();
    let a = match &req.strategy {
        Some(p) => artifact::load_strategy_file(p).map_err(GridError::input)?,
        None => artifact::from_yaml("strategies/default.yaml (built in)", artifact::DEFAULT_STRATEGY, &schema)
            .map_err(GridError::input)?,
    };
    let mut s = a.typed().map_err(GridError::input)?.clone();
    if let Some(kind) = &req.dense_kind {
        s.index.dense_kind = serde_json::from_value(Value::String(kind.clone()))
            .map_err(|e| bad(format!("--dense-kind {kind}: {e}")))?;
    }
    Ok(s)
}

/// The axis (at most one flag lists more than one value) and its columns.
fn columns(args: &GridRequest, base: &emend_harness::Strategy) -> Result<(Option<Axis>, Vec<Column>), GridError> {
    let trigram = base.index.dense_kind == DenseKind::Trigram;
    let dims: Vec<Option<u32>> = match &args.dense_dim {
        Some(d) => d.iter().map(|&x| Some(x)).collect(),
        None => vec![trigram.then_some(base.index.dense_dim)],
    };
    if let Some(d) = &args.dense_dim {
        if !trigram {
            return Err(bad("--dense-dim: sizes the trigram channel only (index.dense_kind: trigram)".into()));
        }
        if let Some(x) = d.iter().find(|&&x| x == 0 || x > MAX_DIM) {
            return Err(bad(format!("--dense-dim {x}: expected a dimension from 1 to {MAX_DIM}")));
        }
    }
    if args.hash_idf.contains(&false) && !trigram {
        return Err(bad("--hash-idf off: weighs the trigram channel only (index.dense_kind: trigram)".into()));
    }
    let lens = [
        (Axis::Fusion, args.fusion.len()),
        (Axis::Vocab, args.vocab.len()),
        (Axis::Paraphrase, args.paraphrase.len()),
        (Axis::DenseDim, dims.len()),
        (Axis::HashIdf, args.hash_idf.len()),
    ];
    let listed: Vec<Axis> = lens.iter().filter(|(_, n)| *n > 1).map(|(a, _)| *a).collect();
    if listed.len() > 1 {
        let flags: Vec<&str> = listed.iter().map(|a| a.flag()).collect();
        return Err(bad(format!("{}: one flag at a time may list several values", flags.join(", "))));
    }
    let axis = listed.first().copied();
    let n = lens.iter().map(|(_, n)| *n).max().unwrap_or(1);
    let pick = |i: usize, len: usize| if len > 1 { i } else { 0 };
    let cols = (0..n)
        .map(|i| {
            let fusion = args.fusion[pick(i, args.fusion.len())];
            let vocab = args.vocab[pick(i, args.vocab.len())];
            let paraphrase = args.paraphrase[pick(i, args.paraphrase.len())];
            let dense_dim = dims[pick(i, dims.len())];
            let hash_idf = args.hash_idf[pick(i, args.hash_idf.len())];
            let label = match axis {
                Some(Axis::Fusion) | None => fusion_label(fusion, base).to_string(),
                Some(Axis::Vocab) => format!("{} vocabulary", vocab.name()),
                Some(Axis::Paraphrase) => format!("N = {paraphrase}"),
                Some(Axis::DenseDim) => format!("{}-d", dense_dim.unwrap_or(0)),
                Some(Axis::HashIdf) => format!("idf {}", if hash_idf { "on" } else { "off" }),
            };
            Column { label, fusion, vocab, paraphrase, dense_dim, hash_idf }
        })
        .collect();
    Ok((axis, cols))
}

/// How a column's fusion is named in a table.
pub fn fusion_label(f: FusionChoice, base: &emend_harness::Strategy) -> &'static str {
    match (f, base.retrieve.fusion) {
        (FusionChoice::WeightedSum, _) | (FusionChoice::Strategy, Fusion::WeightedSum) => "weighted sum",
        (FusionChoice::Rrf, _) | (FusionChoice::Strategy, Fusion::Rrf) => "RRF",
    }
}

/// The plan of a request: its strategy, seeds, axis and columns, each
/// column's task spec checked.
pub fn plan(args: &GridRequest) -> Result<Plan, GridError> {
    let base = load_strategy(args)?;
    let seeds = match &args.seeds {
        Some(s) => parse_seeds(s)?,
        None => vec![args.seed],
    };
    let (axis, columns) = columns(args, &base)?;
    let plan = Plan {
        base,
        tags: args.tags.clone().unwrap_or_else(|| collision::tag_names().iter().map(|t| t.to_string()).collect()),
        ks: args.k.clone(),
        entities: args.entities,
        seeds,
        axis,
        columns,
    };
    for c in &plan.columns {
        plan.spec(c, plan.seeds[0]).validate().map_err(|e| bad(format!("emend collision: {e}")))?;
    }
    Ok(plan)
}

/// Every (column, seed) run's cells as JSON: `cells[column][seed]`.
pub struct Grid {
    pub cells: Vec<Vec<Vec<Value>>>,
}

/// Runs every (column, seed) of `plan`, with the MiniLM model when the
/// strategy's dense channel is `minilm` ([`model`]).
pub fn run(plan: &Plan, model: Option<&emend_harness::minilm::MiniLm>) -> Result<Grid, GridError> {
    let mut cells = Vec::new();
    for c in &plan.columns {
        let strategy = plan.strategy(c);
        let mut per_seed = Vec::new();
        for &seed in &plan.seeds {
            let spec = plan.spec(c, seed);
            let results = collision::run_channel(&spec, &strategy, model, Channel { hash_idf: c.hash_idf })
                .map_err(GridError::input)?;
            let rows = results.iter().map(|r| cell_json(r, c, &strategy, seed)).collect::<Result<Vec<_>, _>>()?;
            per_seed.push(rows);
        }
        cells.push(per_seed);
    }
    Ok(Grid { cells })
}

/// One cell's figures, with everything needed to reproduce its interval.
fn cell_json(c: &CellResult, col: &Column, strategy: &emend_harness::Strategy, seed: u64) -> Result<Value, GridError> {
    let outcomes = |strategy: bool| -> Vec<emend_stats::Outcome> {
        c.tasks
            .iter()
            .map(|(id, r)| emend_stats::Outcome {
                id: id.clone(),
                conversation: Some(id.clone()),
                category: c.tag.clone(),
                correct: if strategy { r.strategy } else { r.bm25 },
            })
            .collect()
    };
    let paired = emend_stats::pair(&outcomes(false), &outcomes(true)).map_err(|e| GridError::Failed(Box::new(e)))?;
    let config = BootstrapConfig { resamples: RESAMPLES, seed, ..BootstrapConfig::default() };
    let ci = emend_stats::paired_bootstrap(&paired, &config).map_err(|e| GridError::Failed(Box::new(e)))?;
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
        "seed": seed,
        "dense_kind": strategy.index.dense_kind,
        "dense_dim": col.dense_dim,
        "hash_idf": col.hash_idf,
        "fusion": strategy.retrieve.fusion,
        "vocab": col.vocab.name(),
        "paraphrase": col.paraphrase,
    }))
}

/// One row of the hash statistics: a column (its dimension, vocabulary and
/// paraphrase) and a tag, or `all` tags, pooled over the seeds and K >= 2.
pub struct HashRow {
    pub column: usize,
    pub tag: String,
    pub stats: HashStats,
}

/// Columns whose tasks are the same (vocabulary, paraphrase): (column, dimension) of each.
type TaskGroup = ((Vocab, usize), Vec<(usize, usize)>);

/// The trigram channel's hash statistics of `plan`, per column and tag.
pub fn hash_stats(plan: &Plan) -> Result<Vec<HashRow>, GridError> {
    if plan.base.index.dense_kind != DenseKind::Trigram {
        return Err(bad("--hash-stats: describes the trigram channel only (index.dense_kind: trigram)".into()));
    }
    // Columns with the same tasks (vocabulary, paraphrase) share one pass over them, every dimension at once.
    let mut groups: Vec<TaskGroup> = Vec::new();
    for (i, c) in plan.columns.iter().enumerate() {
        let dim = c.dense_dim.unwrap_or(plan.base.index.dense_dim).max(1) as usize;
        let key = (c.vocab, c.paraphrase);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, cols)) if cols.iter().any(|&(_, d)| d == dim) => {}
            Some((_, cols)) => cols.push((i, dim)),
            None => groups.push((key, vec![(i, dim)])),
        }
    }
    let mut rows = Vec::new();
    for (_, cols) in &groups {
        let dims: Vec<usize> = cols.iter().map(|&(_, d)| d).collect();
        let mut all: Vec<HashStats> = dims.iter().map(|&dim| HashStats { dim, ..HashStats::default() }).collect();
        let mut per_tag = Vec::new();
        for tag in &plan.tags {
            let mut tasks = Vec::new();
            for &seed in &plan.seeds {
                let spec = plan.spec(&plan.columns[cols[0].0], seed);
                for &k in plan.ks.iter().filter(|&&k| k >= 2) {
                    tasks.extend(spec.cell(tag, k).map_err(GridError::input)?);
                }
            }
            let stats = collision::hash_stats(&tasks, &dims);
            for (a, st) in all.iter_mut().zip(&stats) {
                a.merge(st);
            }
            per_tag.push((tag.clone(), stats));
        }
        for (n, &(column, _)) in cols.iter().enumerate() {
            for (tag, stats) in &per_tag {
                rows.push(HashRow { column, tag: tag.clone(), stats: stats[n].clone() });
            }
            rows.push(HashRow { column, tag: "all".into(), stats: all[n].clone() });
        }
    }
    Ok(rows)
}

/// The MiniLM model for a strategy whose dense channel is `minilm`; None for
/// any other channel.
pub fn model(strategy: &emend_harness::Strategy) -> Result<Option<emend_harness::minilm::MiniLm>, GridError> {
    if strategy.index.dense_kind != DenseKind::Minilm {
        return Ok(None);
    }
    if !cfg!(feature = "minilm") {
        return Err(bad(format!("emend collision: index.dense_kind: minilm: {}", emend_harness::minilm::NOT_BUILT)));
    }
    let Some((dir, setting)) = emend_harness::minilm::locate(None) else {
        return Err(bad(
            "emend collision: index.dense_kind: minilm needs the model: set EMEND_MINILM_DIR (scripts/install-minilm.sh)"
                .into(),
        ));
    };
    let model = emend_harness::minilm::MiniLm::load(&dir).map_err(|e| bad(format!("{setting}: {e}")))?;
    Ok(Some(model))
}

/// The task set of `spec` (every tag and K) in the LoCoMo format.
pub fn locomo_tasks(spec: &CollisionSpec) -> Result<Value, GridError> {
    let mut tasks = Vec::new();
    for tag in &spec.tags {
        for &k in &spec.ks {
            tasks.extend(spec.cell(tag, k).map_err(GridError::input)?);
        }
    }
    Ok(collision::to_locomo(&tasks))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_parse_as_ranges_and_lists() {
        assert_eq!(parse_seeds("1-5").unwrap(), [1, 2, 3, 4, 5]);
        assert_eq!(parse_seeds("0,2,4").unwrap(), [0, 2, 4]);
        assert_eq!(parse_seeds("1-3,7").unwrap(), [1, 2, 3, 7]);
        assert_eq!(parse_seeds("9").unwrap(), [9]);
        for bad in ["", "x", "5-1", "1-", "-3", "1,1", "1-3,2", "0-5000"] {
            assert!(parse_seeds(bad).is_err(), "{bad}");
        }
    }
}
