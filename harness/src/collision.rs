//! The entity-collision protocol (seed 001): how much of a strategy's
//! retrieval lift the dense channel earns beyond what lexical overlap gives
//! for free.
//!
//! A task is one entity and one discriminator tag: a gold memory and K - 1
//! distractors that are the same sentence about the same entity with the
//! answer slot flipped (`Amara Abbott said the tool is hammer.` against
//! `... is chisel.`), and a query that names the entity and describes the
//! answer without sharing a word with any memory (`Which tool does Amara
//! Abbott use for hammering nails?`). Every memory has the same index terms
//! but the answer slot (the same number of terms in each), so BM25 scores all
//! K memories exactly alike: BM25-only hit@1 is 1/K by construction, the tie
//! broken by the memories' seeded order (retrieval breaks ties by item
//! number). Whatever the strategy's retrieval gains over that is what its
//! dense channel (and fusion) knows about the answer slot. Under RRF the K
//! tied memories share one BM25 rank, so the tie carries no rank signal into
//! the fused score.
//!
//! Tags and vocabularies: see [`vocab`]. The `seed` vocabulary (the default)
//! has lexical `service` and `tool` (closed enums of one-word names) and
//! intent-style `preference`, `project` and `technical` (free three-term
//! phrases; the query states the need in other words); `emend`, the
//! protocol's first vocabulary, has one-word answers for every tag.
//! `paraphrase` N writes each memory with one of the first N of
//! [`vocab::TEMPLATES`], drawn per memory (seed 001's robustness check).
//! Scoring runs the harness's own [`index`](crate::index) and
//! [`retrieve`](crate::retrieve) stages on memory items built directly from
//! the task's sentences, one item per memory: ingest (windows, dedup) is not
//! part of the measurement. [`to_locomo`] writes a task set in the LoCoMo
//! format for a full evaluation.

mod hash;
mod vocab;

use std::fmt;

use rayon::prelude::*;

use serde::Serialize;
use serde_json::{Value, json};

use crate::index;
use crate::ingest::{IngestStats, Memory, MemoryItem};
use crate::minilm::MiniLm;
use crate::retrieve::retrieve;
use crate::strategy::{DenseKind, Strategy};
use crate::text::estimate_tokens;
pub use hash::{HashStats, hash_stats};
pub use vocab::SlotClass;
use vocab::{FIRST, LAST, TEMPLATES, TagSpec};

/// Which tag vocabulary generates the tasks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Vocab {
    /// Seed 001: lexical `service`, `tool`; intent-style (phrasal)
    /// `preference`, `project`, `technical`.
    #[default]
    Seed,
    /// One-word answers for every tag; `project` and `technical` named things.
    Emend,
}

impl Vocab {
    pub fn name(self) -> &'static str {
        match self {
            Vocab::Seed => "seed",
            Vocab::Emend => "emend",
        }
    }

    fn tags(self) -> &'static [TagSpec] {
        match self {
            Vocab::Seed => vocab::SEED,
            Vocab::Emend => vocab::EMEND,
        }
    }

    /// A tag's slot class in this vocabulary.
    pub fn class(self, tag: &str) -> Option<SlotClass> {
        self.tags().iter().find(|t| t.name == tag).map(|t| t.class)
    }
}

/// The tags in their fixed order (the same names in both vocabularies).
pub fn tag_names() -> Vec<&'static str> {
    vocab::SEED.iter().map(|t| t.name).collect()
}

/// The largest K every tag supports (the smallest vocabulary).
pub fn max_k() -> usize {
    vocab::SEED.iter().chain(vocab::EMEND).map(|t| t.vocab.len()).min().unwrap_or(0)
}

/// The most entities a cell can have (distinct first x last names).
pub fn max_entities() -> usize {
    FIRST.len() * LAST.len()
}

/// Tasks per cell when not given: seed 001's 64 / 128 / 256 / 512 for
/// K = 2 / 4 / 8 / 16, that is 32 K (32 at K = 1, the trivial cell).
pub fn default_entities(k: usize) -> usize {
    32 * k
}

/// The most memory templates `paraphrase` can draw from.
pub fn max_paraphrase() -> usize {
    TEMPLATES.len()
}

/// Bad collision parameters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CollisionError {
    #[error("unknown tag {0:?} (known: service, tool, preference, project, technical)")]
    UnknownTag(String),
    #[error("k = {k} is out of range: each task has a gold memory and K - 1 distractors, 1 to {max} memories")]
    BadK { k: usize, max: usize },
    #[error("entities = {n} is out of range (1 to {max})")]
    BadEntities { n: usize, max: usize },
    #[error("paraphrase = {n} is out of range (1 to {max} templates per fact)")]
    BadParaphrase { n: usize, max: usize },
    #[error("index.dense_kind: minilm needs the model (set EMEND_MINILM_DIR)")]
    NeedsModel,
    #[error("the MiniLM embedder failed: {0}")]
    Embed(String),
}

/// What to generate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CollisionSpec {
    pub tags: Vec<String>,
    pub ks: Vec<usize>,
    /// Entities (tasks) per tag and K; None: [`default_entities`] of K.
    pub entities: Option<usize>,
    pub seed: u64,
    pub vocab: Vocab,
    /// Memory templates per fact (1: every memory says `{entity} said the {slot} is {value}.`).
    pub paraphrase: usize,
}

impl CollisionSpec {
    /// The default grid: every tag, K = 1, 2, 4, 8, 16 (K = 1, one memory,
    /// is the trivial cell: both hit@1 are 100%), seed 001's n per K, the
    /// seed vocabulary, one template.
    pub fn new(seed: u64) -> CollisionSpec {
        CollisionSpec {
            tags: tag_names().iter().map(|t| t.to_string()).collect(),
            ks: vec![1, 2, 4, 8, 16],
            entities: None,
            seed,
            vocab: Vocab::Seed,
            paraphrase: 1,
        }
    }

    /// Tasks in the cell of this K.
    pub fn entities_for(&self, k: usize) -> usize {
        self.entities.unwrap_or_else(|| default_entities(k))
    }

    pub fn validate(&self) -> Result<(), CollisionError> {
        for t in &self.tags {
            if self.vocab.class(t).is_none() {
                return Err(CollisionError::UnknownTag(t.clone()));
            }
        }
        for &k in &self.ks {
            if k < 1 || k > max_k() {
                return Err(CollisionError::BadK { k, max: max_k() });
            }
            let n = self.entities_for(k);
            if n == 0 || n > max_entities() {
                return Err(CollisionError::BadEntities { n, max: max_entities() });
            }
        }
        if self.paraphrase == 0 || self.paraphrase > max_paraphrase() {
            return Err(CollisionError::BadParaphrase { n: self.paraphrase, max: max_paraphrase() });
        }
        Ok(())
    }

    /// The tasks of one (tag, K) cell: [`generate_cell`] with this spec's
    /// vocabulary, paraphrase, seed and n.
    pub fn cell(&self, tag: &str, k: usize) -> Result<Vec<CollisionTask>, CollisionError> {
        generate_cell(self.vocab, tag, k, self.entities_for(k), self.paraphrase, self.seed)
    }
}

/// One task: the query and its K memories in their seeded order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CollisionTask {
    /// `collision-<tag>-k<K>-e<NNN>`.
    pub id: String,
    pub tag: String,
    pub k: usize,
    pub entity: String,
    pub query: String,
    pub answer: String,
    pub memories: Vec<String>,
    /// Index into `memories` of the gold memory.
    pub gold: usize,
}

/// splitmix64: small, seedable, and the same on every platform.
struct Mix(u64);

impl Mix {
    fn new(parts: &[u64]) -> Mix {
        let mut m = Mix(0x9e37_79b9_7f4a_7c15);
        // Each part goes through the full mix, so nearby seeds give unrelated streams.
        for &p in parts {
            m.0 ^= p;
            m.0 = m.next();
        }
        m
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = self.below(i + 1);
            v.swap(i, j);
        }
    }
}

/// Generates the tasks of one (tag, K) cell. Deterministic in (vocab, tag,
/// K, paraphrase, seed): a cell does not depend on which other cells are
/// generated, and `paraphrase` 1 draws the same values and order as any
/// other (it only picks templates after them).
pub fn generate_cell(
    vocab: Vocab,
    tag: &str,
    k: usize,
    entities: usize,
    paraphrase: usize,
    seed: u64,
) -> Result<Vec<CollisionTask>, CollisionError> {
    let (ti, spec) = vocab
        .tags()
        .iter()
        .enumerate()
        .find(|(_, s)| s.name == tag)
        .ok_or_else(|| CollisionError::UnknownTag(tag.into()))?;
    if k < 1 || k > spec.vocab.len() {
        return Err(CollisionError::BadK { k, max: spec.vocab.len() });
    }
    if entities == 0 || entities > max_entities() {
        return Err(CollisionError::BadEntities { n: entities, max: max_entities() });
    }
    if paraphrase == 0 || paraphrase > TEMPLATES.len() {
        return Err(CollisionError::BadParaphrase { n: paraphrase, max: TEMPLATES.len() });
    }
    let mut names: Vec<(usize, usize)> = (0..FIRST.len()).flat_map(|f| (0..LAST.len()).map(move |l| (f, l))).collect();
    Mix::new(&[seed, ti as u64, 0xe7]).shuffle(&mut names);
    let mut out = Vec::with_capacity(entities);
    for (e, &(f, l)) in names.iter().take(entities).enumerate() {
        let mut rng = Mix::new(&[seed, ti as u64, k as u64, e as u64]);
        let entity = format!("{} {}", FIRST[f], LAST[l]);
        let mut values: Vec<usize> = (0..spec.vocab.len()).collect();
        rng.shuffle(&mut values);
        values.truncate(k);
        let gold_value = values[0];
        // The memories' order is the tie-break: shuffle after choosing the gold.
        rng.shuffle(&mut values);
        let gold = values.iter().position(|&v| v == gold_value).expect("the gold value is among the values");
        let memories = values
            .iter()
            .map(|&v| {
                TEMPLATES[rng.below(paraphrase)]
                    .replace("{entity}", &entity)
                    .replace("{slot}", spec.slot)
                    .replace("{value}", spec.vocab[v].0)
            })
            .collect();
        let (answer, hint) = spec.vocab[gold_value];
        out.push(CollisionTask {
            id: format!("collision-{tag}-k{k}-e{e:03}"),
            tag: tag.to_string(),
            k,
            entity: entity.clone(),
            query: spec.query.replace("{entity}", &entity).replace("{hint}", hint),
            answer: answer.to_string(),
            memories,
            gold,
        });
    }
    Ok(out)
}

/// The memory of one task: one item per memory sentence, in the task's order.
pub fn memory_of(task: &CollisionTask) -> Memory {
    let items: Vec<MemoryItem> = task
        .memories
        .iter()
        .enumerate()
        .map(|(i, text)| MemoryItem {
            id: format!("{}/m{:04}", task.id, i + 1),
            number: i as u32 + 1,
            session: i,
            turns: vec![i as u32],
            text: text.clone(),
            tokens: estimate_tokens(text),
            day: None,
        })
        .collect();
    let holders = (0..items.len() as u32).map(|i| vec![i]).collect();
    let n = items.len() as u32;
    Memory {
        conversation: task.id.clone(),
        items,
        holders,
        last_day: None,
        stats: IngestStats { candidates: n, ..IngestStats::default() },
        retired: 0,
    }
}

/// The strategy with only its BM25 channel: dense and expansion weights 0,
/// expansion off, no rerank, no recency decay, no dense channel built.
/// Same BM25 parameters, pool and top_k.
pub fn bm25_only(strategy: &Strategy) -> Strategy {
    let mut s = strategy.clone();
    s.retrieve.weights.dense = 0.0;
    s.retrieve.weights.expansion = 0.0;
    s.retrieve.expansion.enabled = false;
    s.retrieve.rerank_top_n = 0;
    s.retrieve.recency_half_life_days = 0.0;
    // No dense channel is built at all (its weight is 0 anyway).
    s.index.dense_kind = DenseKind::None;
    s
}

/// How the dense channel is built beyond the strategy's `index.*` fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Channel {
    /// The trigram channel's bucket idf weights (true: every strategy's
    /// channel; false: [`index::Dense::build_unweighted`], plain cosine of
    /// the hashed counts).
    pub hash_idf: bool,
}

impl Default for Channel {
    fn default() -> Channel {
        Channel { hash_idf: true }
    }
}

/// Whether a strategy's retrieval ranks the gold memory first. `minilm` is
/// the model for a strategy whose dense channel is `minilm`.
pub fn hit_at_1(task: &CollisionTask, strategy: &Strategy, minilm: Option<&MiniLm>) -> Result<bool, CollisionError> {
    hit_at_1_with(task, strategy, minilm, Channel::default())
}

/// [`hit_at_1`] with the dense channel built as `channel` says.
pub fn hit_at_1_with(
    task: &CollisionTask,
    strategy: &Strategy,
    minilm: Option<&MiniLm>,
    channel: Channel,
) -> Result<bool, CollisionError> {
    let memory = memory_of(task);
    let model = match strategy.index.dense_kind {
        DenseKind::Minilm => Some(minilm.ok_or(CollisionError::NeedsModel)?),
        _ => None,
    };
    let embed_err = |e: crate::minilm::EmbedError| CollisionError::Embed(e.to_string());
    let ix = index::build_with(&memory, &strategy.index, model, channel.hash_idf).map_err(embed_err)?;
    let query = match model {
        Some(m) => m.embed(&[task.query.as_str()]).map_err(embed_err)?.pop(),
        None => None,
    };
    let r = retrieve(&task.query, query.as_deref(), &memory, &ix, &strategy.retrieve);
    Ok(r.hits.first().is_some_and(|h| h.item as usize == task.gold))
}

/// One task's paired result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct TaskResult {
    pub bm25: bool,
    pub strategy: bool,
}

/// The paired results of one cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellResult {
    pub tag: String,
    /// The tag's slot class in the run's vocabulary.
    pub class: SlotClass,
    pub k: usize,
    /// Task id and result, in task order.
    pub tasks: Vec<(String, TaskResult)>,
}

impl CellResult {
    pub fn bm25_hit1(&self) -> f64 {
        self.rate(|r| r.bm25)
    }

    pub fn hit1(&self) -> f64 {
        self.rate(|r| r.strategy)
    }

    fn rate(&self, f: impl Fn(&TaskResult) -> bool) -> f64 {
        if self.tasks.is_empty() {
            return 0.0;
        }
        self.tasks.iter().filter(|(_, r)| f(r)).count() as f64 / self.tasks.len() as f64
    }
}

/// Scores every cell of `spec` (tags outer, K inner, in the order given).
pub fn run(spec: &CollisionSpec, strategy: &Strategy) -> Result<Vec<CellResult>, CollisionError> {
    run_with(spec, strategy, None)
}

/// [`run`] with the MiniLM model for a strategy whose dense channel is `minilm`.
pub fn run_with(
    spec: &CollisionSpec,
    strategy: &Strategy,
    minilm: Option<&MiniLm>,
) -> Result<Vec<CellResult>, CollisionError> {
    run_channel(spec, strategy, minilm, Channel::default())
}

/// [`run_with`] with the dense channel built as `channel` says. Tasks are
/// scored in parallel and come back in task order (the same results on any
/// number of threads).
pub fn run_channel(
    spec: &CollisionSpec,
    strategy: &Strategy,
    minilm: Option<&MiniLm>,
    channel: Channel,
) -> Result<Vec<CellResult>, CollisionError> {
    spec.validate()?;
    let lexical = bm25_only(strategy);
    let mut out = Vec::new();
    for tag in &spec.tags {
        for &k in &spec.ks {
            let tasks = spec.cell(tag, k)?;
            let results = tasks
                .par_iter()
                .map(|t| {
                    let r = TaskResult {
                        bm25: hit_at_1(t, &lexical, None)?,
                        strategy: hit_at_1_with(t, strategy, minilm, channel)?,
                    };
                    Ok((t.id.clone(), r))
                })
                .collect::<Result<_, CollisionError>>()?;
            let class = spec.vocab.class(tag).ok_or_else(|| CollisionError::UnknownTag(tag.clone()))?;
            out.push(CellResult { tag: tag.clone(), class, k, tasks: results });
        }
    }
    Ok(out)
}

/// A task set in the LoCoMo format: one conversation per task, each memory a
/// one-turn session (so windows never merge two memories), one question
/// (category 4, single-hop) whose evidence is the gold memory's turn. The
/// conversation id carries the tag (`collision-<tag>-k<K>-e<NNN>`), and each
/// qa entry a `tag` field (LoCoMo's numeric categories cannot name it).
pub fn to_locomo(tasks: &[CollisionTask]) -> Value {
    let samples: Vec<Value> = tasks
        .iter()
        .map(|t| {
            let mut conv = serde_json::Map::new();
            conv.insert("speaker_a".into(), json!("User"));
            conv.insert("speaker_b".into(), json!("Assistant"));
            for (i, m) in t.memories.iter().enumerate() {
                let n = i + 1;
                conv.insert(format!("session_{n}_date_time"), Value::Null);
                conv.insert(
                    format!("session_{n}"),
                    json!([{"speaker": "User", "dia_id": format!("D{n}:1"), "text": m}]),
                );
            }
            json!({
                "sample_id": t.id,
                "conversation": conv,
                "qa": [{
                    "question": t.query,
                    "answer": t.answer,
                    "evidence": [format!("D{}:1", t.gold + 1)],
                    "category": 4,
                    "tag": t.tag,
                }],
            })
        })
        .collect();
    Value::Array(samples)
}

impl fmt::Display for CollisionTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{} ({} k={}): {}", self.id, self.tag, self.k, self.query)?;
        for (i, m) in self.memories.iter().enumerate() {
            writeln!(f, "  {} {m}", if i == self.gold { '*' } else { ' ' })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::{terms, words};
    use std::collections::BTreeSet;

    const VOCABS: [Vocab; 2] = [Vocab::Seed, Vocab::Emend];

    /// Index terms of every template with its placeholders removed.
    fn template_terms() -> BTreeSet<String> {
        TEMPLATES
            .iter()
            .flat_map(|t| terms(&t.replace("{entity}", "").replace("{slot}", "").replace("{value}", "")))
            .collect()
    }

    #[test]
    fn answers_have_equal_lengths_and_descriptions_share_no_term_with_any_memory() {
        let names: BTreeSet<String> = FIRST.iter().chain(LAST).map(|w| w.to_lowercase()).collect();
        let templates = template_terms();
        for spec in VOCABS.iter().flat_map(|v| v.tags()) {
            let slot: BTreeSet<String> = terms(spec.slot).into_iter().collect();
            let values: BTreeSet<String> = spec.vocab.iter().flat_map(|(v, _)| terms(v)).collect();
            let width = match spec.class {
                SlotClass::Lexical => 1,
                SlotClass::Intent => terms(spec.vocab[0].0).len(),
            };
            for (v, hint) in spec.vocab {
                assert_eq!(terms(v).len(), width, "{}: {v}", spec.name);
                assert!(terms(v).iter().all(|w| !names.contains(w) && !templates.contains(w)), "{v}");
                for w in terms(hint) {
                    let in_memory = values.contains(&w) || templates.contains(&w) || slot.contains(&w);
                    assert!(!in_memory && !names.contains(&w), "{hint}: {w}");
                }
            }
            let query: BTreeSet<String> =
                terms(&spec.query.replace("{entity}", "").replace("{hint}", "")).into_iter().collect();
            assert!(query.iter().all(|w| !values.contains(w) && !templates.contains(w)), "{}", spec.name);
        }
        // Each template has one index term of its own, so paraphrases keep the BM25 tie.
        for t in TEMPLATES {
            assert_eq!(terms(&t.replace("{entity}", "").replace("{slot}", "").replace("{value}", "")).len(), 1, "{t}");
        }
    }

    /// Whether two words share a run of four characters.
    fn share_stem(a: &str, b: &str) -> bool {
        let b: Vec<char> = b.chars().collect();
        let a: Vec<char> = a.chars().collect();
        a.windows(4).any(|x| b.windows(4).any(|y| x == y))
    }

    #[test]
    fn seed_intent_descriptions_share_no_stem_with_the_answer() {
        for spec in vocab::SEED.iter().filter(|t| t.class == SlotClass::Intent) {
            for (v, hint) in spec.vocab {
                let shared = words(hint).iter().any(|h| words(v).iter().any(|a| share_stem(h, a)));
                assert!(!shared, "{}: {v} / {hint}", spec.name);
            }
        }
        let classes: Vec<&str> = vocab::SEED.iter().map(|t| t.class.name()).collect();
        assert_eq!(classes, ["lexical", "lexical", "intent", "intent", "intent"]);
        let emend: Vec<&str> = vocab::EMEND.iter().map(|t| t.class.name()).collect();
        assert_eq!(emend, ["lexical", "lexical", "intent", "lexical", "lexical"]);
        assert!(vocab::SEED.iter().zip(vocab::EMEND).all(|(a, b)| a.name == b.name));
    }

    #[test]
    fn cells_are_deterministic_and_independent_of_each_other() {
        let a = generate_cell(Vocab::Seed, "tool", 4, 30, 1, 7).unwrap();
        assert_eq!(a, generate_cell(Vocab::Seed, "tool", 4, 30, 1, 7).unwrap());
        assert_ne!(a, generate_cell(Vocab::Seed, "tool", 4, 30, 1, 8).unwrap());
        for t in &a {
            assert_eq!(t.memories.len(), 4);
            assert!(t.memories[t.gold].ends_with(&format!(" {}.", t.answer)));
            let distinct: BTreeSet<&String> = t.memories.iter().collect();
            assert_eq!(distinct.len(), 4);
            assert!(t.memories.iter().all(|m| m.starts_with(&t.entity)));
            assert!(t.query.contains(&t.entity));
        }
        let entities: BTreeSet<&String> = a.iter().map(|t| &t.entity).collect();
        assert_eq!(entities.len(), 30);
        // Paraphrase changes the sentences only: same entities, values, order and gold.
        let p = generate_cell(Vocab::Seed, "tool", 4, 30, 8, 7).unwrap();
        let mut templates = BTreeSet::new();
        for (x, y) in a.iter().zip(&p) {
            assert_eq!((&x.entity, &x.query, &x.answer, x.gold), (&y.entity, &y.query, &y.answer, y.gold));
            for (m, n) in x.memories.iter().zip(&y.memories) {
                let value = m.trim_end_matches('.').rsplit(' ').next().unwrap();
                assert!(n.contains(value) && n.contains(&x.entity), "{n}");
                templates.insert(
                    TEMPLATES
                        .iter()
                        .position(|t| {
                            words(&t.replace("{entity}", &x.entity).replace("{slot}", "tool").replace("{value}", value))
                                == words(n)
                        })
                        .unwrap(),
                );
            }
        }
        assert_eq!(templates.len(), 8, "{templates:?}");
    }

    #[test]
    fn default_n_per_cell_is_the_seeds() {
        let spec = CollisionSpec::new(0);
        let n: Vec<usize> = spec.ks.iter().map(|&k| spec.entities_for(k)).collect();
        assert_eq!(n, [32, 64, 128, 256, 512]);
        spec.validate().unwrap();
        assert_eq!(spec.cell("project", 16).unwrap().len(), 512);
    }

    #[test]
    fn bm25_scores_every_memory_of_a_task_alike() {
        for vocab in VOCABS {
            for paraphrase in [1, 8] {
                for tag in tag_names() {
                    for t in generate_cell(vocab, tag, 16, 20, paraphrase, 3).unwrap() {
                        let memory = memory_of(&t);
                        let texts: Vec<&str> = memory.items.iter().map(|i| i.text.as_str()).collect();
                        let bm = index::Bm25::build(&texts, 1.2, 0.75);
                        let s = bm.scores(&bm.query_ids(&t.query));
                        assert!(s[0] > 0.0, "{t}");
                        assert!(s.iter().all(|x| x.to_bits() == s[0].to_bits()), "{t}{s:?}");
                    }
                }
            }
        }
    }

    /// K = 1: one memory, the gold; BM25 alone and the strategy both rank it
    /// first, in every tag and vocabulary, with or without the bucket weights.
    #[test]
    fn k_1_is_the_trivial_cell_at_100_percent() {
        let strategy: Strategy = serde_yaml::from_str(include_str!("../../strategies/default.yaml")).unwrap();
        for vocab in VOCABS {
            let spec = CollisionSpec { vocab, ks: vec![1], ..CollisionSpec::new(4) };
            for hash_idf in [true, false] {
                let cells = run_channel(&spec, &strategy, None, Channel { hash_idf }).unwrap();
                assert_eq!(cells.len(), 5);
                for c in &cells {
                    assert_eq!((c.k, c.tasks.len()), (1, 32));
                    assert_eq!((c.bm25_hit1(), c.hit1()), (1.0, 1.0), "{} {vocab:?}", c.tag);
                }
            }
        }
    }

    #[test]
    fn bad_parameters_are_refused() {
        let cell = |tag, k, n, p| generate_cell(Vocab::Seed, tag, k, n, p, 0);
        assert!(matches!(cell("colour", 2, 5, 1), Err(CollisionError::UnknownTag(_))));
        assert!(matches!(cell("tool", 0, 5, 1), Err(CollisionError::BadK { .. })));
        assert!(matches!(cell("tool", 99, 5, 1), Err(CollisionError::BadK { .. })));
        assert!(matches!(cell("tool", 2, 0, 1), Err(CollisionError::BadEntities { .. })));
        assert!(matches!(cell("tool", 2, 5, 0), Err(CollisionError::BadParaphrase { .. })));
        assert!(matches!(cell("tool", 2, 5, 9), Err(CollisionError::BadParaphrase { .. })));
        let spec = CollisionSpec { entities: Some(max_entities() + 1), ..CollisionSpec::new(0) };
        assert!(matches!(spec.validate(), Err(CollisionError::BadEntities { .. })));
    }

    #[test]
    fn the_locomo_export_loads_and_keeps_the_gold_evidence() {
        let tasks = generate_cell(Vocab::Seed, "project", 3, 4, 4, 1).unwrap();
        let text = serde_json::to_string(&to_locomo(&tasks)).unwrap();
        let d = crate::load_str("collision.json", &text).unwrap();
        assert_eq!(d.samples().len(), 4);
        for (s, t) in d.samples().iter().zip(&tasks) {
            let q = &s.questions[0];
            assert_eq!(q.answer.as_deref(), Some(t.answer.as_str()));
            let o = s.ordinal(&q.evidence[0]).unwrap();
            assert_eq!(s.turn(o).text, t.memories[t.gold]);
        }
    }
}
