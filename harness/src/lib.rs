//! emend's harness: the locked evaluation framework. It evaluates one strategy
//! on one task set and says, for every question, where the gold evidence went.
//! It knows nothing of evolution.
//!
//! The pipeline, one module per stage, each driven only by its part of the
//! [`Strategy`]: [`ingest`] (turns -> memory items with provenance), [`index`]
//! (BM25 and hashed trigram vectors), [`retrieve`] (channels, fusion, intent,
//! rerank), [`assemble`] (the token-budgeted context), [`answer`] (extractive,
//! or a model behind a trait) and [`judge`]. [`evaluator`] runs it with a stage
//! cache and produces [`outcome::PipelineOutcome`] traces. [`dataset`] loads LoCoMo
//! JSON and embeds the default dataset, `data/synthetic-locomo.json`, which the
//! `gen_synthetic` example (a dev tool, not part of this library) generates.
//! [`collision`] is the entity-collision protocol: generated tasks where BM25
//! cannot tell the gold memory from its distractors, scored on the index and
//! retrieve stages.

pub mod answer;
pub mod assemble;
pub mod cache;
pub mod collision;
pub mod consolidate;
pub mod dataset;
pub mod evaluator;
pub mod index;
pub mod ingest;
pub mod judge;
pub mod minilm;
pub mod outcome;
pub mod replay;
pub mod retrieve;
pub mod space;
pub mod strategy;
pub mod strict_json;
pub mod text;

/// The version of the locked pipeline. Bump it whenever a change to the
/// harness can change any outcome: it is part of the harness hash (and of
/// the dataset cache's keys).
pub const HARNESS_VERSION: &str = "emend-harness/2";

pub use dataset::{Category, Dataset, DatasetError, Selection, load_path, load_str};
pub use evaluator::{
    CacheStats, DEFAULT_BUDGET_CEILING, EvalError, Evaluator, HarnessSettings, PipelineEvaluation, harness_hash,
};
pub use outcome::{CategoryScore, EvidenceTrace, PipelineOutcome, RetrievedItem, Summary};
pub use replay::Protocol;
pub use strategy::Strategy;
