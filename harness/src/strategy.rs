//! The harness's typed view of a strategy artifact.
//!
//! The engine validates a strategy against `schemas/strategy.schema.json`
//! (ranges, invariants, markers) before the harness sees it; this type only
//! fixes the shape. Field docs are in the schema, which is the contract.

use serde::{Deserialize, Serialize};

/// A whole strategy: one section per pipeline stage, plus the locked judge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Strategy {
    /// Metadata, not part of the content hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// Metadata, not part of the content hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<u64>,
    pub ingest: Ingest,
    pub index: Index,
    pub retrieve: Retrieve,
    pub assemble: Assemble,
    pub answer: Answer,
    pub judge: JudgeSpec,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IngestUnit {
    Window,
    Fact,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ingest {
    pub unit: IngestUnit,
    pub window_size: u32,
    pub window_overlap: u32,
    pub min_chars: u32,
    pub dedup_threshold: f64,
    pub max_items_per_session: u32,
    pub stamp_date: bool,
    pub extraction_prompt: String,
    /// Maintenance at each replay checkpoint (and over the whole history at
    /// endpoint); off unless the strategy names it, and then left out of the
    /// serialized strategy, so the stage cache keys of strategies without it
    /// are the ones they always were.
    #[serde(default, skip_serializing_if = "Consolidate::is_off")]
    pub consolidate: Consolidate,
}

/// `ingest.consolidate`: an item that is a near-duplicate (the character-trigram
/// cosine dedup uses, at or above `threshold`) of a newer item of the memory
/// is retired: its text and its turn ids leave the memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Consolidate {
    pub enabled: bool,
    pub threshold: f64,
}

impl Default for Consolidate {
    fn default() -> Self {
        Consolidate { enabled: false, threshold: Consolidate::DEFAULT_THRESHOLD }
    }
}

impl Consolidate {
    /// The threshold of a strategy that does not set one.
    pub const DEFAULT_THRESHOLD: f64 = 0.6;

    /// True when consolidation does not run.
    pub fn is_off(&self) -> bool {
        !self.enabled
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DenseKind {
    Trigram,
    /// all-MiniLM-L6-v2 sentence embeddings ([`crate::minilm`]); needs the model installed.
    Minilm,
    None,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Index {
    pub bm25_k1: f64,
    pub bm25_b: f64,
    pub dense_kind: DenseKind,
    pub dense_dim: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fusion {
    Rrf,
    WeightedSum,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChannelWeights {
    pub bm25: f64,
    pub dense: f64,
    pub expansion: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expansion {
    pub enabled: bool,
    pub terms: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntentOverride {
    pub top_k_multiplier: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IntentOverrides {
    pub temporal: IntentOverride,
    pub quantity: IntentOverride,
    pub reasoning: IntentOverride,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retrieve {
    pub fusion: Fusion,
    pub rrf_kappa: f64,
    pub weights: ChannelWeights,
    pub pool: u32,
    pub top_k: u32,
    pub recency_half_life_days: f64,
    pub expansion: Expansion,
    pub intent_overrides: IntentOverrides,
    pub rerank_top_n: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ContextOrder {
    Score,
    Chronological,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Assemble {
    pub token_budget: u32,
    pub token_budget_ceiling: u32,
    pub backfill_window: u32,
    pub order: ContextOrder,
    pub dedup: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerFormat {
    Short,
    Sentence,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    pub prompt: String,
    pub format: AnswerFormat,
}

/// Who decides whether an answer is correct: the one judge type of the
/// strategy's `judge.kind`, the project's `harness.judge` and `emend eval --judge`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JudgeKind {
    /// Every resolvable gold evidence turn is in the context (deterministic).
    Evidence,
    /// Token F1 of the answer against the gold answer, at the strategy's threshold.
    F1,
    /// The project's judge model (roles.judge of emend.yaml).
    Llm,
    /// The evidence rule, and a context holding a superseded reference's
    /// evidence (a turn only an earlier `reference_versions` entry cites) is
    /// wrong. Equal to `evidence` on questions without reference versions.
    Temporal,
}

impl JudgeKind {
    pub const ALL: [JudgeKind; 4] = [JudgeKind::Evidence, JudgeKind::F1, JudgeKind::Llm, JudgeKind::Temporal];

    /// The name as written in YAML and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            JudgeKind::Evidence => "evidence",
            JudgeKind::F1 => "f1",
            JudgeKind::Llm => "llm",
            JudgeKind::Temporal => "temporal",
        }
    }

    pub fn parse(s: &str) -> Option<JudgeKind> {
        JudgeKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgeSpec {
    pub kind: JudgeKind,
    pub f1_threshold: f64,
}

/// The strategy fields each stage reads, as JSON: the stage cache keys on
/// these, so a field a stage ignores (for example `rrf_kappa` under
/// `weighted_sum`) never invalidates that stage's cached output.
impl Strategy {
    /// `ingest.*`; `extraction_prompt` only for `unit: fact`. Never
    /// `consolidate`: it runs on the ingested memory, by checkpoint
    /// ([`Strategy::consolidate_fields`]).
    pub fn ingest_fields(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(&self.ingest).expect("a strategy serializes");
        let o = v.as_object_mut().expect("an object");
        if self.ingest.unit == IngestUnit::Window {
            o.remove("extraction_prompt");
        }
        o.remove("consolidate");
        v
    }

    /// `ingest.consolidate` when it runs, empty otherwise (keys of the
    /// memory after maintenance and of the index built on it).
    pub fn consolidate_fields(&self) -> Vec<u8> {
        if self.ingest.consolidate.is_off() {
            return Vec::new();
        }
        serde_json::to_vec(&self.ingest.consolidate).expect("a strategy serializes")
    }

    /// `index.*`; `dense_dim` only with the trigram channel (the only one it sizes).
    pub fn index_fields(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(&self.index).expect("a strategy serializes");
        if self.index.dense_kind != DenseKind::Trigram {
            v.as_object_mut().expect("an object").remove("dense_dim");
        }
        v
    }

    /// `retrieve.*`; `rrf_kappa` only under `rrf`, the expansion weight and
    /// terms only with expansion enabled.
    pub fn retrieve_fields(&self) -> serde_json::Value {
        let mut v = serde_json::to_value(&self.retrieve).expect("a strategy serializes");
        let o = v.as_object_mut().expect("an object");
        if self.retrieve.fusion != Fusion::Rrf {
            o.remove("rrf_kappa");
        }
        if !self.retrieve.expansion.enabled {
            o.remove("expansion");
            if let Some(w) = o.get_mut("weights").and_then(|w| w.as_object_mut()) {
                w.remove("expansion");
            }
        }
        v
    }
}
