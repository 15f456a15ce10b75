//! The evaluator: runs a strategy through the pipeline on a task set and
//! returns one [`Outcome`] per question, with a stage cache in between.
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
use crate::dataset::{Dataset, Question, Sample, Selection, UnknownConversation};
use crate::index::{self, Index};
use crate::ingest::{self, ExtractError, Extractor, IngestStats, Memory};
use crate::judge::{EvidenceJudge, F1Judge, Judge, JudgeCase, JudgeError, Verdict};
use crate::minilm::{EmbedError, MiniLm};
use crate::outcome::{AnswerCoverage, EvidenceTrace, Outcome, RetrievedItem, Summary};
use crate::replay::{self, CheckpointSummary, Observed, Protocol};
use crate::retrieve::{Retrieval, retrieve};
use crate::strategy::{DenseKind, IngestUnit, JudgeKind, Strategy};
use crate::text::round6;

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

/// Hits and misses of one stage cache.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageCounter {
    pub hits: u64,
    pub misses: u64,
}

/// Cache counters per stage (per evaluation in [`Evaluation`], lifetime totals
/// from [`Evaluator::cache_stats`]). Answers are counted only for answerers
/// worth caching (models).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CacheStats {
    pub ingest: StageCounter,
    pub index: StageCounter,
    pub retrieve: StageCounter,
    pub answer: StageCounter,
    /// The persistent layer (ingest and index together): a hit there also
    /// counts as a hit of its stage, since the stage did not run.
    pub disk: StageCounter,
}

#[derive(Default)]
struct Counters([AtomicU64; 10]);

impl Counters {
    fn count(&self, stage: usize, hit: bool) {
        self.0[stage * 2 + usize::from(!hit)].fetch_add(1, Ordering::Relaxed);
    }
    fn add(&self, other: &CacheStats) {
        for (i, c) in [other.ingest, other.index, other.retrieve, other.answer, other.disk].iter().enumerate() {
            self.0[i * 2].fetch_add(c.hits, Ordering::Relaxed);
            self.0[i * 2 + 1].fetch_add(c.misses, Ordering::Relaxed);
        }
    }
    fn snapshot(&self) -> CacheStats {
        let g = |i: usize| StageCounter {
            hits: self.0[i * 2].load(Ordering::Relaxed),
            misses: self.0[i * 2 + 1].load(Ordering::Relaxed),
        };
        CacheStats { ingest: g(0), index: g(1), retrieve: g(2), answer: g(3), disk: g(4) }
    }
}

const INGEST: usize = 0;
const INDEX: usize = 1;
const RETRIEVE: usize = 2;
const ANSWER: usize = 3;
const DISK: usize = 4;

type Key = [u8; 32];

fn key(parts: &[&[u8]]) -> Key {
    let mut h = Sha256::new();
    for p in parts {
        // Length-prefixed, so that part boundaries are unambiguous.
        h.update((p.len() as u64).to_le_bytes());
        h.update(p);
    }
    h.finalize().into()
}

fn json(v: &serde_json::Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("JSON serializes")
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a cache lock leaves the map consistent (entries are inserted whole).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

type Slot<V> = Arc<Mutex<Option<Arc<V>>>>;

/// The slots by key with their last use, and the keys by last use (for eviction).
struct Slots<V> {
    map: HashMap<Key, (Slot<V>, u64)>,
    by_use: BTreeMap<u64, Key>,
    tick: u64,
}

/// A bounded map from key to a stage's output; the least recently used
/// entries go first. One slot per key, so concurrent evaluations compute each
/// output once.
struct StageCache<V> {
    capacity: usize,
    inner: Mutex<Slots<V>>,
}

impl<V> StageCache<V> {
    fn new(capacity: usize) -> Self {
        StageCache { capacity, inner: Mutex::new(Slots { map: HashMap::new(), by_use: BTreeMap::new(), tick: 0 }) }
    }

    /// The slot for a key, created when missing, marked as just used.
    fn slot(&self, k: Key) -> Slot<V> {
        let mut g = lock(&self.inner);
        let Slots { map, by_use, tick } = &mut *g;
        *tick += 1;
        let now = *tick;
        if let Some((s, used)) = map.get_mut(&k) {
            by_use.remove(used);
            *used = now;
            by_use.insert(now, k);
            return s.clone();
        }
        let s: Slot<V> = Arc::new(Mutex::new(None));
        map.insert(k, (s.clone(), now));
        by_use.insert(now, k);
        while map.len() > self.capacity {
            let Some((_, old)) = by_use.pop_first() else { break };
            map.remove(&old);
        }
        s
    }

    fn get_or_try<E>(&self, k: Key, f: impl FnOnce() -> Result<V, E>) -> Result<(Arc<V>, bool), E> {
        let slot = self.slot(k);
        let mut value = lock(&slot);
        if let Some(v) = &*value {
            return Ok((v.clone(), true));
        }
        let v = Arc::new(f()?);
        *value = Some(v.clone());
        Ok((v, false))
    }

    /// The stored output for a key, if any (without computing it).
    fn get(&self, k: &Key) -> Option<Arc<V>> {
        let slot = lock(&self.inner).map.get(k).map(|e| e.0.clone())?;
        lock(&slot).clone()
    }

    /// Stores an output computed elsewhere (a batch); keeps one already stored.
    fn insert(&self, k: Key, v: V) -> Arc<V> {
        self.get_or_try::<std::convert::Infallible>(k, || Ok(v)).map(|(v, _)| v).unwrap_or_else(|e| match e {})
    }

    fn clear(&self) {
        let mut g = lock(&self.inner);
        g.map.clear();
        g.by_use.clear();
    }
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
}

/// The result of one evaluation.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// Sorted by conversation id, then by index in the conversation's qa list.
    pub outcomes: Vec<Outcome>,
    pub summary: Summary,
    /// Cache hits and misses of this evaluation alone.
    pub cache: CacheStats,
    pub memory: MemoryStats,
}

impl Evaluation {
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
    pub fn evaluate(&self, strategy: &Strategy) -> Result<Evaluation, EvalError> {
        self.run(strategy, &self.selected)
    }

    /// Evaluates the strategy on some questions (ids as in outcomes; any
    /// question of the dataset, selected or not). Outcomes keep the usual order.
    pub fn evaluate_subset(&self, strategy: &Strategy, ids: &[String]) -> Result<Evaluation, EvalError> {
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
        // A model's channel is keyed by the model too.
        let minilm = self.minilm.as_deref().filter(|_| s.index.dense_kind == DenseKind::Minilm);
        let model_id = minilm.map(MiniLm::id).unwrap_or_default();
        let index_key = key(&[b"index", &ingest_key, &json(&s.index_fields()), model_id.as_bytes()]);
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

        Ok(Prepared { full: memory.clone(), memory, index, index_key, sample: None, queries })
    }

    /// The memory and index at a replay checkpoint of `sessions` sessions.
    /// Ingest is not re-run: it is one pass in conversation order whose
    /// filters (length, dedup against kept items, per-session caps) look only
    /// backwards, so the checkpoint's memory is the prefix of the whole
    /// conversation's (tested equal to ingesting the truncated conversation).
    /// The index is rebuilt: BM25 and the dense channel weigh terms by corpus
    /// statistics of the items present.
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
            let memory = Arc::new(memory_prefix(&full.memory, &view));
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

    fn run(&self, s: &Strategy, qs: &[Job]) -> Result<Evaluation, EvalError> {
        self.check(s)?;
        let judge: Arc<dyn Judge> = match self.judge_kind(s) {
            JudgeKind::Evidence => Arc::new(EvidenceJudge),
            JudgeKind::F1 => {
                Arc::new(F1Judge { threshold: self.settings.f1_threshold.unwrap_or(s.judge.f1_threshold) })
            }
            JudgeKind::Llm => self.llm_judge.clone().expect("checked above"),
        };
        let local = Counters::default();
        let samples = self.dataset.samples();
        let convs: Vec<(usize, Option<usize>)> =
            qs.iter().map(|q| (q.si, q.view.map(|v| v.0))).collect::<BTreeSet<_>>().into_iter().collect();
        // A conversation whose extraction failed makes its questions errored, not the evaluation.
        let prepared: HashMap<(usize, Option<usize>), Result<Prepared, String>> = convs
            .par_iter()
            .map(|&c| {
                let p = match c.1 {
                    None => self.prepare(&samples[c.0], s, &local),
                    Some(n) => self.prepare_view(&samples[c.0], n, s, &local),
                };
                let p = match p {
                    Ok(p) => Ok(p),
                    Err(EvalError::Extract(e)) => Err(e.to_string()),
                    Err(e) => return Err(e),
                };
                Ok((c, p))
            })
            .collect::<Result<_, _>>()?;
        let retrieve_fields = json(&s.retrieve_fields());
        let answer_fields = json(&serde_json::to_value(&s.answer).expect("a strategy serializes"));

        // Retrieval and assembly, per question in parallel.
        let staged: Vec<Result<Staged, String>> = qs
            .par_iter()
            .map(|&job| match &prepared[&(job.si, job.view.map(|v| v.0))] {
                Ok(p) => Ok(self.stage(p.sample(&samples[job.si]), job, p, s, &retrieve_fields, &local)),
                Err(e) => Err(e.clone()),
            })
            .collect();

        // Answers: model answers go through the cache and one batch call.
        // None at all when the judge does not read them (the evidence judge).
        let mut answers: Vec<Result<Option<String>, String>> = vec![Ok(None); staged.len()];
        if !judge.reads_answer() {
        } else if self.answerer.cacheable() {
            let id = self.answerer.id();
            let mut missing: Vec<(usize, Key)> = Vec::new();
            for (i, st) in staged.iter().enumerate() {
                let Ok(st) = st else { continue };
                let q = self.question(st.job);
                let text = render(&st.lines);
                let akey = key(&[b"answer", id.as_bytes(), &answer_fields, q.question.as_bytes(), text.as_bytes()]);
                match self.answer_cache.get(&akey) {
                    Some(a) => {
                        local.count(ANSWER, true);
                        answers[i] = Ok((*a).clone());
                    }
                    None => missing.push((i, akey)),
                }
            }
            let inputs: Vec<AnswerInput<'_>> = missing
                .iter()
                .map(|&(i, _)| {
                    let st = staged[i].as_ref().expect("only staged questions are missing");
                    AnswerInput { question: &self.question(st.job).question, lines: &st.lines }
                })
                .collect();
            let results = if inputs.is_empty() { Vec::new() } else { self.answerer.answer_batch(&inputs, &s.answer) };
            for ((i, akey), r) in missing.into_iter().zip(results) {
                local.count(ANSWER, false);
                answers[i] = match r {
                    Ok(a) => Ok((*self.answer_cache.insert(akey, a)).clone()),
                    Err(e) => Err(e.to_string()),
                };
            }
        } else {
            answers = staged
                .par_iter()
                .map(|st| match st {
                    Ok(st) => {
                        let q = self.question(st.job);
                        self.answerer
                            .answer(&AnswerInput { question: &q.question, lines: &st.lines }, &s.answer)
                            .map_err(|e| e.to_string())
                    }
                    Err(_) => Ok(None),
                })
                .collect();
        }

        // Judgement, one batch for every question that has an answer stage behind it.
        let context_turns: Vec<Vec<String>> = staged
            .par_iter()
            .map(|st| match st {
                Ok(st) => st.ctx.turns.iter().map(|&o| samples[st.job.si].turn(o).id.clone()).collect(),
                Err(_) => Vec::new(),
            })
            .collect();
        let judged: Vec<usize> = (0..staged.len()).filter(|&i| staged[i].is_ok() && answers[i].is_ok()).collect();
        let cases: Vec<JudgeCase<'_>> = judged
            .iter()
            .map(|&i| {
                let st = staged[i].as_ref().expect("filtered");
                JudgeCase {
                    question: self.question(st.job),
                    answer: answers[i].as_ref().expect("filtered").as_deref(),
                    context_turns: &context_turns[i],
                }
            })
            .collect();
        let verdicts = if cases.is_empty() { Vec::new() } else { judge.judge_batch(&cases) };
        let mut verdict: Vec<Option<Result<Verdict, String>>> = vec![None; staged.len()];
        for (i, v) in judged.into_iter().zip(verdicts) {
            verdict[i] = Some(v.map_err(|e| e.to_string()));
        }

        // Building traces allocates a lot: in parallel too (collect keeps the order).
        let outcomes: Vec<Outcome> = staged
            .par_iter()
            .zip(answers)
            .zip(verdict)
            .zip(context_turns)
            .zip(qs)
            .map(|((((st, answer), verdict), context_turns), &job)| {
                let q = self.question(job);
                let checkpoint = job.view.map(|v| self.observations[v.1].0);
                let mut o = match st {
                    Ok(st) => {
                        let p = prepared[&(job.si, job.view.map(|v| v.0))]
                            .as_ref()
                            .expect("staged questions have a memory");
                        let (answer, error) = match answer {
                            Ok(a) => (a, None),
                            Err(e) => (None, Some(e)),
                        };
                        let (verdict, error) = match verdict {
                            Some(Ok(v)) => (v, error),
                            Some(Err(e)) => (Verdict { correct: false, score: None }, Some(e)),
                            None => (Verdict { correct: false, score: None }, error),
                        };
                        self.outcome(p.sample(&samples[job.si]), q, p, st, context_turns, answer, verdict, error)
                    }
                    Err(e) => errored(q, e.clone()),
                };
                o.checkpoint = checkpoint;
                o
            })
            .collect();
        if let Some(disk) = &self.disk {
            disk.sweep();
        }
        if let Some(m) = &self.minilm {
            m.sweep();
        }
        let cache = local.snapshot();
        self.totals.add(&cache);
        // Each conversation once, with its whole memory (under replay: as at its last checkpoint).
        let mut full: BTreeMap<usize, Option<&Arc<Memory>>> = BTreeMap::new();
        for ((si, _), p) in &prepared {
            let e = full.entry(*si).or_default();
            if let Ok(p) = p {
                *e = Some(&p.full);
            }
        }
        let mut memory = MemoryStats { conversations: full.len(), ..MemoryStats::default() };
        for m in full.values().flatten() {
            let st: IngestStats = m.stats;
            memory.items += m.items.len();
            memory.candidates += st.candidates;
            memory.too_short += st.too_short;
            memory.duplicates += st.duplicates;
            memory.over_cap += st.over_cap;
        }
        Ok(Evaluation { summary: Summary::from_outcomes(&outcomes), outcomes, cache, memory })
    }

    /// Retrieval and assembly of one question.
    #[allow(clippy::too_many_arguments)]
    fn stage(
        &self,
        sample: &Sample,
        job: Job,
        p: &Prepared,
        s: &Strategy,
        retrieve_fields: &[u8],
        local: &Counters,
    ) -> Staged {
        let q = self.question(job);
        let memory = &*p.memory;
        let rkey = key(&[b"retrieve", &p.index_key, retrieve_fields, q.id.as_bytes()]);
        let (ret, hit) = self
            .retrieve_cache
            .get_or_try::<std::convert::Infallible>(rkey, || {
                let embedded = p.queries.as_ref().map(|v| v[job.qi].as_slice());
                Ok(retrieve(&q.question, embedded, memory, &p.index, &s.retrieve))
            })
            .unwrap_or_else(|e| match e {});
        local.count(RETRIEVE, hit);
        let ctx = assemble(sample, memory, &ret, &s.assemble, self.settings.budget_ceiling);
        let lines = ctx.lines(sample, memory);
        Staged { job, ret, ctx, lines }
    }

    #[allow(clippy::too_many_arguments)]
    fn outcome(
        &self,
        sample: &Sample,
        q: &Question,
        p: &Prepared,
        st: &Staged,
        context_turns: Vec<String>,
        answer: Option<String>,
        verdict: Verdict,
        error: Option<String>,
    ) -> Outcome {
        let memory = &*p.memory;
        let (ret, ctx) = (&st.ret, &st.ctx);
        let item_id = |i: u32| memory.items[i as usize].id.clone();
        let retrieved_items: BTreeSet<u32> = ret.hits.iter().map(|h| h.item).collect();
        let mut evidence_items: BTreeSet<u32> = BTreeSet::new();
        let evidence_trace: Vec<EvidenceTrace> = q
            .evidence
            .iter()
            .map(|turn| {
                let o = sample.ordinal(turn).expect("resolved evidence names an existing turn");
                let holders = &memory.holders[o as usize];
                evidence_items.extend(holders.iter().copied());
                EvidenceTrace {
                    turn: turn.clone(),
                    memory_ids: holders.iter().map(|&i| item_id(i)).collect(),
                    retrieved: holders.iter().any(|i| retrieved_items.contains(i)),
                    in_context: ctx.turns.contains(&o),
                }
            })
            .collect();

        Outcome {
            id: q.id.clone(),
            conversation: q.conversation.clone(),
            category: q.category.name().to_string(),
            question: q.question.clone(),
            gold_answer: q.answer.clone(),
            correct: verdict.correct && error.is_none(),
            evidence: q.evidence.clone(),
            unresolved_evidence: q.unresolved.clone(),
            evidence_memory_ids: evidence_items.into_iter().map(item_id).collect(),
            retrieved: ret
                .hits
                .iter()
                .enumerate()
                .map(|(r, h)| RetrievedItem {
                    id: item_id(h.item),
                    rank: r as u32 + 1,
                    score: round6(h.score),
                    channel: h.channel,
                })
                .collect(),
            context_ids: ctx.blocks.iter().map(|b| item_id(b.item)).collect(),
            context_turns,
            context_tokens: ctx.tokens,
            answer,
            evidence_trace,
            intent: ret.intent.map(|i| i.name().to_string()),
            expansion_terms: ret.expansion_terms.clone(),
            judge_score: verdict.score.map(round6),
            error,
            checkpoint: None,
            answer_coverage: AnswerCoverage::measure(sample, memory, q, ctx),
        }
    }
}

/// A question after retrieval and assembly.
struct Staged {
    job: Job,
    ret: Arc<Retrieval>,
    ctx: Context,
    lines: Vec<ContextLine>,
}

/// The outcome of a question whose conversation could not be ingested.
fn errored(q: &Question, error: String) -> Outcome {
    Outcome {
        id: q.id.clone(),
        conversation: q.conversation.clone(),
        category: q.category.name().to_string(),
        question: q.question.clone(),
        gold_answer: q.answer.clone(),
        correct: false,
        evidence: q.evidence.clone(),
        unresolved_evidence: q.unresolved.clone(),
        evidence_memory_ids: vec![],
        retrieved: vec![],
        context_ids: vec![],
        context_turns: vec![],
        context_tokens: 0,
        answer: None,
        evidence_trace: vec![],
        intent: None,
        expansion_terms: vec![],
        judge_score: None,
        error: Some(error),
        checkpoint: None,
        answer_coverage: None,
    }
}

/// A conversation's memory as at a checkpoint: the items of its first
/// sessions, the holders of its first turns. The ingest statistics stay the
/// whole conversation's (a replay reports them once, for the last checkpoint).
fn memory_prefix(full: &Memory, view: &Sample) -> Memory {
    let sessions = view.sessions.len();
    let turns = view.turn_count();
    let items: Vec<_> = full.items.iter().take_while(|it| it.session < sessions).cloned().collect();
    debug_assert!(full.items[items.len()..].iter().all(|it| it.session >= sessions), "items are in session order");
    let last_day = view
        .sessions
        .iter()
        .filter_map(|s| s.date.map(|d| d.days()))
        .fold(None, |m: Option<f64>, d| Some(m.map_or(d, |m| m.max(d))));
    Memory {
        conversation: full.conversation.clone(),
        items,
        holders: full.holders[..turns.min(full.holders.len())].to_vec(),
        last_day,
        stats: full.stats,
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
