//! The evaluator: runs a strategy through the pipeline on a task set and
//! returns one [`PipelineOutcome`] per question, with a stage cache in between.
//!
//! Stage outputs are cached in memory by the SHA-256 of (the previous stage's
//! key, the strategy fields the stage reads): ingest and index per
//! conversation, retrieval per question, and model answers per (question,
//! context). So a candidate that changes only retrieval fields re-runs neither
//! ingest nor index. In-memory capacity follows the task set (a few entries
//! per conversation and per question), least recently used first out. With
//! [`Evaluator::with_disk_cache`] ingest and index outputs also persist
//! between processes ([`crate::cache`]). The cache is invisible in results:
//! every stage is a pure function of its key's inputs. The evaluator is `Send + Sync`; questions and
//! conversations run in parallel (rayon) and come back in a fixed order.

mod run;
mod stage_cache;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::HARNESS_VERSION;
use crate::answer::{AnswerError, AnswerInput, Answerer, Extractive};
use crate::assemble::{Context, ContextLine, assemble, render};
use crate::cache::DiskCache;
use crate::consolidate::consolidate;
use crate::dataset::{Dataset, Question, Sample, Selection, UnknownConversation};
use crate::index::{self, Index};
use crate::ingest::{self, ExtractError, Extractor, IngestStats, Memory};
use crate::judge::{EvidenceJudge, F1Judge, Judge, JudgeCase, JudgeError, TemporalJudge, Verdict};
use crate::minilm::{EmbedError, MiniLm};
use crate::outcome::{AnswerCoverage, EvidenceTrace, PipelineOutcome, RetrievedItem, Summary};
use crate::replay::{self, CheckpointSummary, Observed, Protocol};
use crate::retrieve::{Retrieval, retrieve};
use crate::strategy::{DenseKind, IngestUnit, JudgeKind, Strategy};
use crate::text::round6;
use run::memory_prefix;
use stage_cache::{ANSWER, Counters, DISK, INDEX, INGEST, Key, RETRIEVE, StageCache, json, key};
pub use stage_cache::{CacheStats, StageCounter};

/// The locked context budget ceiling, in estimated tokens.
pub const DEFAULT_BUDGET_CEILING: u32 = 2000;

/// Locked settings of an evaluation: everything besides the strategy and the
/// dataset that can change an outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HarnessSettings {
    /// The harness's own context ceiling (the strategy's budget is capped by it).
    pub budget_ceiling: u32,
    /// Judge override; None uses the strategy's `judge.kind`.
    pub judge: Option<JudgeKind>,
    /// F1 threshold override; None uses the strategy's `judge.f1_threshold`.
    pub f1_threshold: Option<f64>,
    /// Keep category 5 (adversarial).
    pub include_adversarial: bool,
    /// Only these conversations; all when None.
    pub conversations: Option<Vec<String>>,
    /// Endpoint evaluation or longitudinal replay ([`crate::replay`]). Left
    /// out of the harness hash under endpoint evaluation, so that hash is the
    /// one of earlier versions.
    #[serde(default, skip_serializing_if = "Protocol::is_endpoint")]
    pub protocol: Protocol,
}

impl Default for HarnessSettings {
    fn default() -> Self {
        HarnessSettings {
            budget_ceiling: DEFAULT_BUDGET_CEILING,
            judge: None,
            f1_threshold: None,
            include_adversarial: false,
            conversations: None,
            protocol: Protocol::Endpoint,
        }
    }
}

impl HarnessSettings {
    pub fn selection(&self) -> Selection {
        Selection { include_adversarial: self.include_adversarial, conversations: self.conversations.clone() }
    }
}

/// SHA-256 (hex) of the harness version, the settings and the built-in
/// components (extractive answerer, no extractor, no LLM judge).
/// [`Evaluator::harness_hash`] gives the same value unless models are plugged in.
pub fn harness_hash(settings: &HarnessSettings) -> String {
    hash_harness(settings, &Extractive.id(), None, None, None)
}

fn hash_harness(
    settings: &HarnessSettings,
    answerer: &str,
    extractor: Option<String>,
    judge: Option<String>,
    minilm: Option<String>,
) -> String {
    let mut doc = serde_json::json!({
        "harness_version": HARNESS_VERSION,
        "settings": settings,
        "answerer": answerer,
        "extractor": extractor,
        "llm_judge": judge,
    });
    // Only when installed, so that the hash without a model is the one it always was.
    if let Some(m) = minilm {
        doc["minilm"] = serde_json::Value::String(m);
    }
    hex::encode(Sha256::digest(serde_json::to_vec(&doc).expect("settings serialize")))
}

/// Why an evaluation could not run.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    /// A strategy setting needs an LLM role that is not configured.
    #[error("{field}: {value} needs roles.{role}")]
    NeedsRole { field: &'static str, value: &'static str, role: &'static str },
    /// A strategy setting needs a model that is not installed.
    #[error("{field}: {value} needs the {model} model, which is not installed ({setting})")]
    NeedsModel { field: &'static str, value: &'static str, model: &'static str, setting: &'static str },
    /// The embedding model failed on a text.
    #[error(transparent)]
    Embed(#[from] EmbedError),
    /// A strategy value the pipeline cannot run (ranges are the schema's job; this guards the rest).
    #[error("{field}: {message}")]
    Strategy { field: &'static str, message: String },
    #[error("unknown question id {0:?}")]
    UnknownQuestion(String),
    #[error(transparent)]
    UnknownConversation(#[from] UnknownConversation),
    #[error(transparent)]
    Extract(#[from] ExtractError),
    #[error(transparent)]
    Answer(#[from] AnswerError),
    #[error(transparent)]
    Judge(#[from] JudgeError),
}

/// Memory-item statistics of an evaluation, summed over its conversations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryStats {
    pub conversations: usize,
    pub items: usize,
    pub candidates: u32,
    pub too_short: u32,
    pub duplicates: u32,
    pub over_cap: u32,
    /// Items retired by maintenance (`ingest.consolidate`) over the whole
    /// history (under replay: at each conversation's last checkpoint).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub retired: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The result of one evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct PipelineEvaluation {
    /// Sorted by conversation id, then by index in the conversation's qa list.
    pub outcomes: Vec<PipelineOutcome>,
    pub summary: Summary,
    /// Cache hits and misses of this evaluation alone.
    pub cache: CacheStats,
    pub memory: MemoryStats,
}

impl PipelineEvaluation {
    /// Under replay, the results per checkpoint (see [`crate::replay`]); empty
    /// under endpoint evaluation.
    pub fn checkpoints(&self) -> Vec<CheckpointSummary> {
        replay::checkpoint_summaries(&self.observed())
    }

    /// Under replay, the accuracy of each probe's last observation; None
    /// under endpoint evaluation.
    pub fn final_accuracy(&self) -> Option<f64> {
        let observed = self.observed();
        (!observed.is_empty()).then(|| replay::final_accuracy(&observed))
    }

    fn observed(&self) -> Vec<Observed> {
        self.outcomes
            .iter()
            .filter_map(|o| {
                Some(Observed {
                    conversation: o.conversation.clone(),
                    id: o.id.clone(),
                    checkpoint: o.checkpoint?,
                    correct: Some(o.correct),
                    context_tokens: Some(o.context_tokens),
                })
            })
            .collect()
    }
}

/// One unit of evaluation: a question, or under replay one observation of a
/// question at a checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
struct Job {
    si: usize,
    qi: usize,
    /// The checkpoint's session count and index into `observations` (replay).
    view: Option<(usize, usize)>,
}

/// Evaluates strategies on one dataset with fixed settings. Cheap to share
/// (`Arc<Evaluator>`) between threads.
pub struct Evaluator {
    dataset: Arc<Dataset>,
    settings: HarnessSettings,
    /// Selected questions (or observations), in outcome order.
    selected: Vec<Job>,
    by_id: HashMap<String, Job>,
    /// Under replay, every planned observation (the question as asked then).
    observations: Vec<(u32, Question)>,
    extractor: Option<Arc<dyn Extractor>>,
    answerer: Arc<dyn Answerer>,
    llm_judge: Option<Arc<dyn Judge>>,
    minilm: Option<Arc<MiniLm>>,
    ingest_cache: StageCache<Memory>,
    index_cache: StageCache<Index>,
    /// Replay checkpoints' memory (a prefix of the conversation's) and index.
    view_cache: StageCache<(Arc<Memory>, Arc<Index>)>,
    retrieve_cache: StageCache<Retrieval>,
    answer_cache: StageCache<Option<String>>,
    /// The questions' embeddings per (model, conversation), for `dense_kind: minilm`.
    query_cache: StageCache<Vec<Vec<f32>>>,
    /// The persistent layer under the ingest and index caches.
    disk: Option<DiskCache>,
    totals: Counters,
}

/// In-memory ingest and index entries per conversation of the dataset.
const CONVERSATION_SLOTS: usize = 4;
/// In-memory retrieval entries per question of the dataset.
const QUESTION_SLOTS: usize = 8;

impl std::fmt::Debug for Evaluator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Evaluator")
            .field("dataset", &self.dataset.name())
            .field("settings", &self.settings)
            .field("questions", &self.selected.len())
            .finish_non_exhaustive()
    }
}

/// Every prepared conversation (or replay view) of an evaluation, by
/// (sample, view); an extraction error is kept as its message.
type PreparedMap = HashMap<(usize, Option<usize>), Result<Prepared, String>>;

struct Prepared {
    memory: Arc<Memory>,
    index: Arc<Index>,
    index_key: Key,
    /// The embeddings of the conversation's questions (by index in its qa
    /// list), when the dense channel is a model's.
    queries: Option<Arc<Vec<Vec<f32>>>>,
    /// Under replay, the conversation as known at the checkpoint.
    sample: Option<Arc<Sample>>,
    /// The whole conversation's memory (for the memory statistics).
    full: Arc<Memory>,
    /// The whole conversation's memory as ingested, before maintenance
    /// (checkpoint memories are its prefixes, maintained again).
    raw: Arc<Memory>,
}

impl Prepared {
    fn sample<'a>(&'a self, full: &'a Sample) -> &'a Sample {
        self.sample.as_deref().unwrap_or(full)
    }
}

impl Evaluator {
    /// Fails when the settings name a conversation the dataset does not hold.
    pub fn new(dataset: Arc<Dataset>, settings: HarnessSettings) -> Result<Evaluator, EvalError> {
        let selection = settings.selection();
        let chosen: BTreeSet<&str> = dataset.select(&selection)?.into_iter().map(|q| q.id.as_str()).collect();
        let mut selected = Vec::new();
        let mut by_id = HashMap::new();
        let mut observations = Vec::new();
        let mut views = 0usize;
        for (si, s) in dataset.samples().iter().enumerate() {
            if let Protocol::Replay { every_sessions } = settings.protocol {
                views += replay::checkpoint_count(s.sessions.len(), every_sessions) as usize;
            }
            for (qi, q) in s.questions.iter().enumerate() {
                let jobs: Vec<(String, Job)> = match settings.protocol {
                    Protocol::Endpoint => vec![(q.id.clone(), Job { si, qi, view: None })],
                    Protocol::Replay { every_sessions } => replay::observations(s, q, every_sessions)
                        .into_iter()
                        .map(|o| {
                            observations.push((o.checkpoint, o.question));
                            let id = observations.last().expect("pushed").1.id.clone();
                            (id, Job { si, qi, view: Some((o.sessions, observations.len() - 1)) })
                        })
                        .collect(),
                };
                for (id, job) in jobs {
                    by_id.insert(id, job);
                    if chosen.contains(q.id.as_str()) {
                        selected.push(job);
                    }
                }
            }
        }
        let samples = dataset.samples();
        selected
            .sort_by(|a, b| samples[a.si].id.cmp(&samples[b.si].id).then(a.qi.cmp(&b.qi)).then(a.view.cmp(&b.view)));
        let conversations = samples.len();
        let questions = by_id.len();
        Ok(Evaluator {
            dataset,
            settings,
            selected,
            by_id,
            observations,
            extractor: None,
            answerer: Arc::new(Extractive),
            llm_judge: None,
            minilm: None,
            // Capacity follows the task set: per conversation, the outputs of
            // several strategies (the served one, a candidate's, a probe's);
            // per question, several full evaluations' retrievals and answers.
            ingest_cache: StageCache::new((CONVERSATION_SLOTS * conversations).max(64)),
            index_cache: StageCache::new((CONVERSATION_SLOTS * conversations).max(64)),
            view_cache: StageCache::new((CONVERSATION_SLOTS * views).max(64)),
            retrieve_cache: StageCache::new((QUESTION_SLOTS * questions).max(50_000)),
            answer_cache: StageCache::new((4 * QUESTION_SLOTS * questions).max(200_000)),
            query_cache: StageCache::new(conversations.max(64)),
            disk: None,
            totals: Counters::default(),
        })
    }

    /// Plugs in the extractor model (`ingest.unit: fact`).
    pub fn with_extractor(mut self, extractor: Arc<dyn Extractor>) -> Self {
        self.extractor = Some(extractor);
        self
    }

    /// Replaces the extractive answerer with a model.
    pub fn with_answerer(mut self, answerer: Arc<dyn Answerer>) -> Self {
        self.answerer = answerer;
        self
    }

    /// Adds the persistent stage cache under `root` (for example a project's
    /// `.emend/cache/stages`), at most `capacity_bytes` on disk: ingest and
    /// index outputs are read from there before they are computed, and
    /// written there after. Call it after plugging in models: the cache's
    /// directory is chosen by [`Evaluator::harness_hash`].
    pub fn with_disk_cache(self, root: &std::path::Path, capacity_bytes: u64) -> std::io::Result<Self> {
        self.with_disk_cache_floor(root, capacity_bytes, crate::space::Floor::none())
    }

    /// [`Evaluator::with_disk_cache`], leaving `floor` free on the file system
    /// (see [`DiskCache::with_floor`]).
    pub fn with_disk_cache_floor(
        mut self,
        root: &std::path::Path,
        capacity_bytes: u64,
        floor: crate::space::Floor,
    ) -> std::io::Result<Self> {
        self.disk = Some(DiskCache::open(root, &self.harness_hash(), capacity_bytes)?.with_floor(floor));
        Ok(self)
    }

    /// Plugs in the MiniLM embedder (`index.dense_kind: minilm`); its model
    /// hash enters the harness hash.
    pub fn with_minilm(mut self, minilm: Arc<MiniLm>) -> Self {
        self.minilm = Some(minilm);
        self
    }

    /// The plugged-in MiniLM embedder.
    pub fn minilm(&self) -> Option<&Arc<MiniLm>> {
        self.minilm.as_ref()
    }

    /// Plugs in the LLM judge (`judge.kind: llm`).
    pub fn with_llm_judge(mut self, judge: Arc<dyn Judge>) -> Self {
        self.llm_judge = Some(judge);
        self
    }

    pub fn dataset(&self) -> &Arc<Dataset> {
        &self.dataset
    }

    pub fn settings(&self) -> &HarnessSettings {
        &self.settings
    }

    /// The selected questions, in outcome order (for sampling a probe);
    /// under replay, one entry per observation, with the observation's id and
    /// its reference at the checkpoint.
    pub fn questions(&self) -> Vec<&Question> {
        self.selected.iter().map(|&j| self.question(j)).collect()
    }

    /// The question a job asks.
    fn question(&self, j: Job) -> &Question {
        match j.view {
            None => &self.dataset.samples()[j.si].questions[j.qi],
            Some((_, o)) => &self.observations[o].1,
        }
    }

    /// The harness hash of this evaluator (settings and plugged-in components).
    pub fn harness_hash(&self) -> String {
        hash_harness(
            &self.settings,
            &self.answerer.id(),
            self.extractor.as_ref().map(|e| e.id()),
            self.llm_judge.as_ref().map(|j| j.id()),
            self.minilm.as_ref().map(|m| m.id()),
        )
    }

    /// Lifetime cache counters.
    pub fn cache_stats(&self) -> CacheStats {
        self.totals.snapshot()
    }

    /// Drops every cached stage output (counters are kept).
    pub fn clear_cache(&self) {
        self.ingest_cache.clear();
        self.index_cache.clear();
        self.view_cache.clear();
        self.retrieve_cache.clear();
        self.answer_cache.clear();
        self.query_cache.clear();
    }

    /// Evaluates the strategy on every selected question.
    pub fn evaluate(&self, strategy: &Strategy) -> Result<PipelineEvaluation, EvalError> {
        self.run(strategy, &self.selected)
    }

    /// Evaluates the strategy on some questions (ids as in outcomes; any
    /// question of the dataset, selected or not). Outcomes keep the usual order.
    pub fn evaluate_subset(&self, strategy: &Strategy, ids: &[String]) -> Result<PipelineEvaluation, EvalError> {
        let mut qs = Vec::with_capacity(ids.len());
        for id in ids {
            qs.push(*self.by_id.get(id).ok_or_else(|| EvalError::UnknownQuestion(id.clone()))?);
        }
        let samples = self.dataset.samples();
        qs.sort_by(|a, b| samples[a.si].id.cmp(&samples[b.si].id).then(a.qi.cmp(&b.qi)).then(a.view.cmp(&b.view)));
        qs.dedup();
        self.run(strategy, &qs)
    }

    fn check(&self, s: &Strategy) -> Result<(), EvalError> {
        if s.ingest.unit == IngestUnit::Fact && self.extractor.is_none() {
            return Err(EvalError::NeedsRole { field: "ingest.unit", value: "fact", role: "extractor" });
        }
        if s.index.dense_kind == DenseKind::Minilm && self.minilm.is_none() {
            return Err(EvalError::NeedsModel {
                field: "index.dense_kind",
                value: "minilm",
                model: "all-MiniLM-L6-v2",
                setting: if cfg!(feature = "minilm") {
                    "set EMEND_MINILM_DIR or harness.minilm_dir; install with scripts/install-minilm.sh DIR"
                } else {
                    crate::minilm::NOT_BUILT
                },
            });
        }
        if self.judge_kind(s) == JudgeKind::Llm && self.llm_judge.is_none() {
            return Err(EvalError::NeedsRole { field: "judge.kind", value: "llm", role: "judge" });
        }
        let bad = |field, message: String| Err(EvalError::Strategy { field, message });
        if s.ingest.window_size == 0 {
            return bad("ingest.window_size", "must be at least 1".into());
        }
        if s.ingest.window_overlap >= s.ingest.window_size {
            return bad(
                "ingest.window_overlap",
                format!("{} must be below window_size ({})", s.ingest.window_overlap, s.ingest.window_size),
            );
        }
        if s.index.dense_dim == 0 {
            return bad("index.dense_dim", "must be at least 1".into());
        }
        if s.retrieve.pool == 0 || s.retrieve.top_k == 0 {
            return bad("retrieve.top_k", "top_k and pool must be at least 1".into());
        }
        Ok(())
    }

    fn judge_kind(&self, s: &Strategy) -> JudgeKind {
        self.settings.judge.unwrap_or(s.judge.kind)
    }

    fn prepare(&self, sample: &Sample, s: &Strategy, local: &Counters) -> Result<Prepared, EvalError> {
        let ingest_fields = json(&s.ingest_fields());
        let extractor_id = match (s.ingest.unit, &self.extractor) {
            (IngestUnit::Fact, Some(e)) => e.id(),
            _ => String::new(),
        };
        let ingest_key = key(&[
            b"ingest",
            self.dataset.hash().as_bytes(),
            sample.id.as_bytes(),
            &ingest_fields,
            extractor_id.as_bytes(),
        ]);
        let mut from_disk = false;
        let (memory, hit) = self.ingest_cache.get_or_try(ingest_key, || {
            self.through_disk("ingest", &ingest_key, local, &mut from_disk, Memory::decode, Memory::encode, || {
                ingest::ingest(
                    sample,
                    &s.ingest,
                    self.extractor.as_deref().filter(|_| s.ingest.unit == IngestUnit::Fact),
                )
            })
        })?;
        local.count(INGEST, hit || from_disk);
        // Maintenance over the whole history (the last checkpoint's); the
        // memory's key is the ingest key when none runs.
        let raw = memory;
        let (memory, memory_key) = if s.ingest.consolidate.is_off() {
            (raw.clone(), ingest_key)
        } else {
            let ckey = key(&[b"consolidate", &ingest_key, &s.consolidate_fields()]);
            let (m, _) = self
                .ingest_cache
                .get_or_try::<std::convert::Infallible>(ckey, || Ok(consolidate(&raw, sample, &s.ingest)))
                .unwrap_or_else(|e| match e {});
            (m, ckey)
        };
        // A model's channel is keyed by the model too.
        let minilm = self.minilm.as_deref().filter(|_| s.index.dense_kind == DenseKind::Minilm);
        let model_id = minilm.map(MiniLm::id).unwrap_or_default();
        let index_key = key(&[b"index", &memory_key, &json(&s.index_fields()), model_id.as_bytes()]);
        let mut from_disk = false;
        let (index, hit) = self.index_cache.get_or_try(index_key, || {
            self.through_disk("index", &index_key, local, &mut from_disk, Index::decode, Index::encode, || {
                index::build(&memory, &s.index, minilm)
            })
        })?;
        local.count(INDEX, hit || from_disk);
        let queries = match minilm {
            Some(m) => {
                let qkey =
                    key(&[b"queries", model_id.as_bytes(), self.dataset.hash().as_bytes(), sample.id.as_bytes()]);
                let (q, _) = self.query_cache.get_or_try(qkey, || {
                    let texts: Vec<&str> = sample.questions.iter().map(|q| q.question.as_str()).collect();
                    m.embed(&texts)
                })?;
                Some(q)
            }
            None => None,
        };

        Ok(Prepared { full: memory.clone(), memory, raw, index, index_key, sample: None, queries })
    }

    /// The memory and index at a replay checkpoint of `sessions` sessions.
    /// Ingest is not re-run: it is one pass in conversation order whose
    /// filters (length, dedup against kept items, per-session caps) look only
    /// backwards, so the checkpoint's memory is the prefix of the whole
    /// conversation's (tested equal to ingesting the truncated conversation).
    /// Maintenance (`ingest.consolidate`) then runs on the checkpoint's
    /// items. The index is rebuilt: BM25 and the dense channel weigh terms by
    /// corpus statistics of the items present.
    fn prepare_view(
        &self,
        sample: &Sample,
        sessions: usize,
        s: &Strategy,
        local: &Counters,
    ) -> Result<Prepared, EvalError> {
        let full = self.prepare(sample, s, local)?;
        if sessions >= sample.sessions.len() {
            return Ok(full);
        }
        let view = Arc::new(sample.prefix(sessions));
        let minilm = self.minilm.as_deref().filter(|_| s.index.dense_kind == DenseKind::Minilm);
        let vkey = key(&[b"view", &full.index_key, &(sessions as u64).to_le_bytes()]);
        let (pair, hit) = self.view_cache.get_or_try::<EmbedError>(vkey, || {
            let memory = Arc::new(consolidate(&memory_prefix(&full.raw, &view), &view, &s.ingest));
            let index = Arc::new(index::build(&memory, &s.index, minilm)?);
            Ok((memory, index))
        })?;
        local.count(INDEX, hit);
        Ok(Prepared {
            memory: pair.0.clone(),
            index: pair.1.clone(),
            index_key: vkey,
            sample: Some(view),
            full: full.memory,
            raw: full.raw,
            queries: full.queries.clone(),
        })
    }

    /// A stage output from the disk cache, or computed and stored there.
    #[allow(clippy::too_many_arguments)]
    fn through_disk<V, E>(
        &self,
        stage: &str,
        k: &Key,
        local: &Counters,
        from_disk: &mut bool,
        decode: fn(&[u8]) -> Option<V>,
        encode: fn(&V) -> Vec<u8>,
        compute: impl FnOnce() -> Result<V, E>,
    ) -> Result<V, E> {
        let Some(disk) = &self.disk else { return compute() };
        if let Some(v) = disk.get(stage, k).and_then(|b| decode(&b)) {
            local.count(DISK, true);
            *from_disk = true;
            return Ok(v);
        }
        local.count(DISK, false);
        let v = compute()?;
        disk.put(stage, k, &encode(&v));
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn evaluator_is_send_and_sync() {
        assert_send_sync::<Evaluator>();
    }

    #[test]
    fn harness_hash_depends_on_every_setting() {
        let base = HarnessSettings::default();
        let h = harness_hash(&base);
        assert_eq!(h.len(), 64);
        assert_eq!(h, harness_hash(&base.clone()));
        for other in [
            HarnessSettings { budget_ceiling: 1000, ..base.clone() },
            HarnessSettings { judge: Some(JudgeKind::F1), ..base.clone() },
            HarnessSettings { f1_threshold: Some(0.3), ..base.clone() },
            HarnessSettings { include_adversarial: true, ..base.clone() },
            HarnessSettings { conversations: Some(vec!["a".into()]), ..base.clone() },
        ] {
            assert_ne!(harness_hash(&other), h);
        }
    }

    #[test]
    fn stage_cache_evicts_the_oldest_and_counts_hits() {
        let c: StageCache<u32> = StageCache::new(2);
        let k = |i: u8| [i; 32];
        let ok = |v: u32| move || Ok::<_, ()>(v);
        assert_eq!(c.get_or_try(k(1), ok(1)).unwrap(), (Arc::new(1), false));
        assert_eq!(c.get_or_try(k(1), ok(9)).unwrap(), (Arc::new(1), true));
        c.get_or_try(k(2), ok(2)).unwrap();
        c.get_or_try(k(3), ok(3)).unwrap();
        assert_eq!(c.get_or_try(k(1), ok(4)).unwrap(), (Arc::new(4), false));
        assert!(c.get_or_try(k(5), || Err::<u32, _>("boom")).is_err());
        assert_eq!(c.get_or_try(k(5), ok(5)).unwrap(), (Arc::new(5), false));
    }
}
