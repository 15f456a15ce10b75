//! The entity-collision protocol: how much of a strategy's retrieval lift the
//! dense channel earns beyond what lexical overlap gives for free.
//!
//! A task is one entity and one discriminator tag: a gold memory and K - 1
//! distractors that are the same sentence about the same entity with the
//! answer slot flipped (`Amara Abbott said the tool is hammer.` against
//! `... is chisel.`), and a query that names the entity and describes the
//! answer without sharing a word with any memory (`Which tool does Amara
//! Abbott use for driving nails?`). Every memory has the same index terms but
//! the answer slot (one term each), so BM25 scores all K memories exactly
//! alike: BM25-only hit@1 is 1/K by construction, the tie broken by the
//! memories' seeded order (retrieval breaks ties by item number). Whatever the
//! strategy's retrieval gains over that is what its dense channel (and fusion)
//! knows about the answer slot.
//!
//! Tags: `service`, `tool`, `project`, `technical` (closed vocabularies of
//! named things, the query a description of the thing's use) and `preference`
//! (intent-style: the query states a craving, the memory the usual order).
//! Scoring runs the harness's own [`index`](crate::index) and
//! [`retrieve`](crate::retrieve) stages on memory items built directly from
//! the task's sentences, one item per memory: ingest (windows, dedup) is not
//! part of the measurement. [`to_locomo`] writes a task set in the LoCoMo
//! format for a full evaluation.

use std::fmt;

use serde::Serialize;
use serde_json::{Value, json};

use crate::index;
use crate::ingest::{IngestStats, Memory, MemoryItem};
use crate::minilm::MiniLm;
use crate::retrieve::retrieve;
use crate::strategy::{DenseKind, Strategy};
use crate::text::estimate_tokens;

/// One discriminator tag: its slot noun, the query form and a closed
/// vocabulary of (answer, description) pairs. Answers are one word each;
/// descriptions share no word with any answer, entity or memory template.
struct TagSpec {
    name: &'static str,
    /// The memory: `{entity} said the {slot} is {value}.`
    slot: &'static str,
    /// The query, with `{entity}` and `{hint}`.
    query: &'static str,
    vocab: &'static [(&'static str, &'static str)],
}

const TAGS: &[TagSpec] = &[
    TagSpec {
        name: "service",
        slot: "service",
        query: "Which service does {entity} use for {hint}?",
        vocab: &[
            ("Netflix", "watching films at night"),
            ("Spotify", "listening to music playlists"),
            ("Dropbox", "backing up documents"),
            ("Slack", "team chat messages at work"),
            ("Zoom", "video calls"),
            ("Uber", "getting a ride across town"),
            ("Airbnb", "booking a vacation rental"),
            ("Venmo", "paying friends back"),
            ("Duolingo", "practicing a foreign language"),
            ("Audible", "audiobooks on the commute"),
            ("Instacart", "grocery delivery"),
            ("Grammarly", "fixing typos in essays"),
            ("Shopify", "selling handmade goods on a web shop"),
            ("Twitch", "livestreaming video games"),
            ("Coursera", "taking university courses remotely"),
            ("Peloton", "indoor cycling classes"),
            ("Tinder", "finding a romantic partner"),
        ],
    },
    TagSpec {
        name: "tool",
        slot: "tool",
        query: "Which tool does {entity} use for {hint}?",
        vocab: &[
            ("hammer", "driving nails"),
            ("wrench", "tightening bolts"),
            ("screwdriver", "fastening cabinet hinges"),
            ("shovel", "moving dirt in the garden"),
            ("ladder", "reaching the roof gutters"),
            ("chisel", "carving wood"),
            ("pliers", "gripping and bending wire"),
            ("saw", "cutting planks"),
            ("drill", "boring holes through brick"),
            ("sander", "smoothing rough surfaces"),
            ("trowel", "spreading mortar"),
            ("crowbar", "prying open crates"),
            ("ruler", "drawing straight lines"),
            ("stapler", "binding paper sheets"),
            ("scissors", "trimming fabric"),
            ("multimeter", "testing electrical voltage"),
            ("wheelbarrow", "hauling bricks around a building site"),
        ],
    },
    TagSpec {
        name: "preference",
        slot: "usual order",
        query: "What does {entity} get when craving {hint}?",
        vocab: &[
            ("espresso", "a strong caffeine jolt"),
            ("lemonade", "something sour and cold in summer"),
            ("cocoa", "a warm chocolatey treat"),
            ("sushi", "raw fish with rice"),
            ("pizza", "cheesy slices from an oven"),
            ("salad", "leafy greens"),
            ("ramen", "a bowl of noodle soup"),
            ("tacos", "Mexican dishes in folded tortillas"),
            ("pancakes", "a sweet breakfast stack with syrup"),
            ("smoothie", "blended fruit"),
            ("steak", "grilled beef"),
            ("croissant", "a buttery French pastry"),
            ("oatmeal", "a hearty porridge"),
            ("kombucha", "fermented tea"),
            ("curry", "spicy Indian cooking"),
            ("popcorn", "a salty snack at the cinema"),
            ("bagel", "a chewy ring of bread with cream cheese"),
        ],
    },
    TagSpec {
        name: "project",
        slot: "project",
        query: "Which project is {entity} working on: {hint}?",
        vocab: &[
            ("website", "building pages for the internet"),
            ("podcast", "hosting weekly audio episodes"),
            ("vegetables", "growing tomatoes in the backyard"),
            ("novel", "writing a long fiction book"),
            ("app", "a mobile phone program"),
            ("documentary", "filming a nonfiction movie"),
            ("treehouse", "a wooden hut up in the branches"),
            ("quilt", "stitching fabric patches together"),
            ("robot", "a machine that moves by itself"),
            ("mural", "painting a big wall"),
            ("cookbook", "collecting family recipes"),
            ("marathon", "training to run 26 miles"),
            ("newsletter", "emailing subscribers each month"),
            ("renovation", "redoing the kitchen"),
            ("startup", "founding a new company"),
            ("choir", "singing with a group"),
            ("album", "recording songs in a studio"),
        ],
    },
    TagSpec {
        name: "technical",
        slot: "technology",
        query: "Which technology does {entity} use for {hint}?",
        vocab: &[
            ("Python", "scientific scripting in notebooks"),
            ("Rust", "borrow-checked systems code"),
            ("Kubernetes", "orchestrating containers"),
            ("PostgreSQL", "a relational database"),
            ("Redis", "an in-memory key value cache"),
            ("React", "building user interfaces in the browser"),
            ("Kafka", "streaming event logs"),
            ("Terraform", "provisioning cloud infrastructure"),
            ("Git", "version control"),
            ("Docker", "packaging services into images"),
            ("Elasticsearch", "full text search"),
            ("TensorFlow", "training neural networks"),
            ("Swift", "writing iPhone apps"),
            ("Haskell", "pure functional programming"),
            ("Nginx", "a reverse proxy web server"),
            ("Spark", "large scale batch data processing"),
            ("Jenkins", "continuous integration builds"),
        ],
    },
];

const FIRST: &[&str] = &[
    "Amara", "Bruno", "Celeste", "Dmitri", "Elena", "Farid", "Greta", "Hiro", "Ingrid", "Jonas", "Keiko", "Luca",
    "Marisol", "Nikhil", "Olga", "Priya", "Quentin", "Rosa", "Soren", "Tamsin",
];
const LAST: &[&str] = &[
    "Abbott",
    "Barlow",
    "Castillo",
    "Delgado",
    "Ellison",
    "Fairbanks",
    "Gallagher",
    "Holloway",
    "Iverson",
    "Jennings",
    "Kowalski",
    "Lindqvist",
    "Moreau",
    "Nakamura",
    "Okafor",
    "Petrov",
    "Quinlan",
    "Rasmussen",
    "Sandoval",
    "Thornton",
];

/// The tags in their fixed order.
pub fn tag_names() -> Vec<&'static str> {
    TAGS.iter().map(|t| t.name).collect()
}

/// The largest K a tag supports (its vocabulary size).
pub fn max_k() -> usize {
    TAGS.iter().map(|t| t.vocab.len()).min().unwrap_or(0)
}

/// The most entities a cell can have (distinct first x last names).
pub fn max_entities() -> usize {
    FIRST.len() * LAST.len()
}

/// Bad collision parameters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CollisionError {
    #[error("unknown tag {0:?} (known: service, tool, preference, project, technical)")]
    UnknownTag(String),
    #[error(
        "k = {k} is out of range: each task needs a gold memory and at least one distractor, at most {max} memories"
    )]
    BadK { k: usize, max: usize },
    #[error("entities = {n} is out of range (1 to {max})")]
    BadEntities { n: usize, max: usize },
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
    /// Entities (tasks) per tag and K.
    pub entities: usize,
    pub seed: u64,
}

impl CollisionSpec {
    pub fn validate(&self) -> Result<(), CollisionError> {
        for t in &self.tags {
            if !TAGS.iter().any(|s| s.name == t) {
                return Err(CollisionError::UnknownTag(t.clone()));
            }
        }
        for &k in &self.ks {
            if k < 2 || k > max_k() {
                return Err(CollisionError::BadK { k, max: max_k() });
            }
        }
        if self.entities == 0 || self.entities > max_entities() {
            return Err(CollisionError::BadEntities { n: self.entities, max: max_entities() });
        }
        Ok(())
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

/// Generates the tasks of one (tag, K) cell. Deterministic in (seed, tag, K):
/// a cell does not depend on which other cells are generated.
pub fn generate_cell(tag: &str, k: usize, entities: usize, seed: u64) -> Result<Vec<CollisionTask>, CollisionError> {
    let (ti, spec) =
        TAGS.iter().enumerate().find(|(_, s)| s.name == tag).ok_or_else(|| CollisionError::UnknownTag(tag.into()))?;
    if k < 2 || k > spec.vocab.len() {
        return Err(CollisionError::BadK { k, max: spec.vocab.len() });
    }
    if entities == 0 || entities > max_entities() {
        return Err(CollisionError::BadEntities { n: entities, max: max_entities() });
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
        let memories =
            values.iter().map(|&v| format!("{entity} said the {} is {}.", spec.slot, spec.vocab[v].0)).collect();
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

/// Whether a strategy's retrieval ranks the gold memory first. `minilm` is
/// the model for a strategy whose dense channel is `minilm`.
pub fn hit_at_1(task: &CollisionTask, strategy: &Strategy, minilm: Option<&MiniLm>) -> Result<bool, CollisionError> {
    let memory = memory_of(task);
    let model = match strategy.index.dense_kind {
        DenseKind::Minilm => Some(minilm.ok_or(CollisionError::NeedsModel)?),
        _ => None,
    };
    let embed_err = |e: crate::minilm::EmbedError| CollisionError::Embed(e.to_string());
    let ix = index::build(&memory, &strategy.index, model).map_err(embed_err)?;
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
    spec.validate()?;
    let lexical = bm25_only(strategy);
    let mut out = Vec::new();
    for tag in &spec.tags {
        for &k in &spec.ks {
            let tasks = generate_cell(tag, k, spec.entities, spec.seed)?;
            let results = tasks
                .iter()
                .map(|t| {
                    let r = TaskResult { bm25: hit_at_1(t, &lexical, None)?, strategy: hit_at_1(t, strategy, minilm)? };
                    Ok((t.id.clone(), r))
                })
                .collect::<Result<_, CollisionError>>()?;
            out.push(CellResult { tag: tag.clone(), k, tasks: results });
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
    use crate::text::terms;
    use std::collections::BTreeSet;

    #[test]
    fn answers_are_one_term_and_descriptions_share_no_term_with_any_memory() {
        let names: BTreeSet<String> = FIRST.iter().chain(LAST).map(|w| w.to_lowercase()).collect();
        for spec in TAGS {
            let template: BTreeSet<String> = terms(&format!("said the {} is", spec.slot)).into_iter().collect();
            let values: BTreeSet<String> = spec.vocab.iter().flat_map(|(v, _)| terms(v)).collect();
            for (v, hint) in spec.vocab {
                assert_eq!(terms(v).len(), 1, "{v}");
                assert!(!names.contains(&v.to_lowercase()), "{v}");
                for w in terms(hint) {
                    assert!(!values.contains(&w) && !template.contains(&w) && !names.contains(&w), "{hint}: {w}");
                }
            }
            let query: BTreeSet<String> =
                terms(&spec.query.replace("{entity}", "").replace("{hint}", "")).into_iter().collect();
            assert!(query.iter().all(|w| !values.contains(w)), "{}", spec.name);
        }
    }

    #[test]
    fn cells_are_deterministic_and_independent_of_each_other() {
        let a = generate_cell("tool", 4, 30, 7).unwrap();
        assert_eq!(a, generate_cell("tool", 4, 30, 7).unwrap());
        assert_ne!(a, generate_cell("tool", 4, 30, 8).unwrap());
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
    }

    #[test]
    fn bm25_scores_every_memory_of_a_task_alike() {
        for tag in tag_names() {
            for t in generate_cell(tag, 16, 20, 3).unwrap() {
                let memory = memory_of(&t);
                let texts: Vec<&str> = memory.items.iter().map(|i| i.text.as_str()).collect();
                let bm = index::Bm25::build(&texts, 1.2, 0.75);
                let s = bm.scores(&bm.query_ids(&t.query));
                assert!(s[0] > 0.0, "{t}");
                assert!(s.iter().all(|x| x.to_bits() == s[0].to_bits()), "{t}{s:?}");
            }
        }
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(matches!(generate_cell("colour", 2, 5, 0), Err(CollisionError::UnknownTag(_))));
        assert!(matches!(generate_cell("tool", 1, 5, 0), Err(CollisionError::BadK { .. })));
        assert!(matches!(generate_cell("tool", 99, 5, 0), Err(CollisionError::BadK { .. })));
        assert!(matches!(generate_cell("tool", 2, 0, 0), Err(CollisionError::BadEntities { .. })));
    }

    #[test]
    fn the_locomo_export_loads_and_keeps_the_gold_evidence() {
        let tasks = generate_cell("service", 3, 4, 1).unwrap();
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
