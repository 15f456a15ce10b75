//! LoCoMo-format datasets: loading, evidence-id normalization, question
//! selection and the dataset's content hash.
//!
//! A file is a JSON list of samples, each with `sample_id`, a `conversation`
//! (`speaker_a`, `speaker_b`, `session_N` turn lists, `session_N_date_time`)
//! and `qa` (`question`, `answer`, `category`, `evidence`). Real files are
//! messy: evidence ids such as `"D8:6; D9:17"`, `"D30:05"`, `"D:11:26"` are
//! normalized; ids that cannot be resolved (`"D"`, a turn that does not
//! exist) are kept on the question as `unresolved`, never dropped. Errors name
//! the file, the sample and the field.
//!
//! A question may carry `reference_versions` (an emend extension that LoCoMo
//! readers ignore): the references of a fact that changes over the
//! conversation, each `{"from_session": N, "answer": ..., "evidence": [...]}`
//! valid from session N on. Versions ascend by `from_session`; a version's
//! evidence lies in sessions up to its `from_session`; the last version's
//! answer and evidence are the question's own `answer` and `evidence` (the
//! reference at the end of the conversation, which endpoint evaluation uses).
//! Longitudinal replay ([`crate::replay`]) asks such a question against the
//! version valid at each checkpoint.

mod parse;

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::HARNESS_VERSION;
use crate::cache::{Dec, DiskCache, Enc};
use crate::text::SessionDate;
use parse::parse_samples;
pub use parse::{normalize_id, resolve_evidence};

/// The name `--tasks builtin` resolves to: the embedded synthetic dataset.
pub const BUILTIN_NAME: &str = "builtin";

const BUILTIN_JSON: &str = include_str!("../data/synthetic-locomo.json");

/// A question category, as LoCoMo numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Category {
    MultiHop,
    Temporal,
    OpenDomain,
    SingleHop,
    Adversarial,
}

impl Category {
    pub const ALL: [Category; 5] =
        [Category::MultiHop, Category::Temporal, Category::OpenDomain, Category::SingleHop, Category::Adversarial];

    /// LoCoMo's number: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial.
    pub fn from_number(n: u64) -> Option<Category> {
        Some(match n {
            1 => Category::MultiHop,
            2 => Category::Temporal,
            3 => Category::OpenDomain,
            4 => Category::SingleHop,
            5 => Category::Adversarial,
            _ => return None,
        })
    }

    pub fn number(self) -> u8 {
        self as u8 + 1
    }

    /// The name used in outcomes and summaries.
    pub fn name(self) -> &'static str {
        match self {
            Category::MultiHop => "multi-hop",
            Category::Temporal => "temporal",
            Category::OpenDomain => "open-domain",
            Category::SingleHop => "single-hop",
            Category::Adversarial => "adversarial",
        }
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One dialogue turn.
#[derive(Debug, Clone, Serialize)]
pub struct Turn {
    /// Canonical dia_id, `D<session>:<n>`.
    pub id: String,
    pub speaker: String,
    pub text: String,
    /// LoCoMo's `blip_caption` of a shared image, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caption: Option<String>,
}

impl Turn {
    /// What the turn says: its text, plus the caption of a shared image.
    pub fn content(&self) -> String {
        match &self.caption {
            Some(c) => format!("{} [image: {}]", self.text, c),
            None => self.text.clone(),
        }
    }

    /// The turn as a context line: `Speaker: content`.
    pub fn line(&self) -> String {
        format!("{}: {}", self.speaker, self.content())
    }
}

/// One dated session of a conversation.
#[derive(Debug, Clone, Serialize)]
pub struct Session {
    /// N of `session_N`.
    pub number: u32,
    /// `session_N_date_time` as written.
    pub date_time: Option<String>,
    #[serde(skip)]
    pub date: Option<SessionDate>,
    pub turns: Vec<Turn>,
}

/// A question with its gold data, evidence already normalized.
#[derive(Debug, Clone, Serialize)]
pub struct Question {
    /// Stable id: `<sample_id>#<index in qa>` (index among all qa entries).
    pub id: String,
    pub conversation: String,
    pub index: usize,
    pub question: String,
    /// Gold answer; integers become strings; absent for adversarial questions.
    pub answer: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub adversarial_answer: Option<String>,
    pub category: Category,
    /// The evidence entries as written in the file.
    pub raw_evidence: Vec<String>,
    /// Resolved dia_ids of existing turns, in order of first mention, no repeats.
    #[serde(skip)]
    pub evidence: Vec<String>,
    /// Evidence ids that could not be resolved, as written.
    #[serde(skip)]
    pub unresolved: Vec<String>,
    /// References that change over time, ascending by `from_session`; empty
    /// for a fact that never changes (every LoCoMo question). When present,
    /// the last one equals `answer` and `evidence`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reference_versions: Vec<ReferenceVersion>,
}

/// A question's reference (answer and evidence) valid from a session on.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ReferenceVersion {
    /// N of `session_N`: the reference holds once that session is available.
    pub from_session: u32,
    pub answer: Option<String>,
    /// The evidence entries as written in the file.
    pub raw_evidence: Vec<String>,
    /// Resolved dia_ids, as [`Question::evidence`].
    #[serde(skip)]
    pub evidence: Vec<String>,
}

impl Question {
    /// The question as asked once the sessions up to number `session` are
    /// available: its reference then (answer and evidence of the latest
    /// version with `from_session <= session`), or None when no version holds
    /// yet. A question without versions is always its own reference. Its
    /// `reference_versions` then end with the valid one.
    pub fn reference_at(&self, session: u32) -> Option<Question> {
        if self.reference_versions.is_empty() {
            return Some(self.clone());
        }
        let at = self.reference_versions.iter().rposition(|v| v.from_session <= session)?;
        let v = &self.reference_versions[at];
        Some(Question {
            answer: v.answer.clone(),
            raw_evidence: v.raw_evidence.clone(),
            evidence: v.evidence.clone(),
            unresolved: Vec::new(),
            // The versions known then, ending with the valid one: the earlier
            // ones are superseded (see `judge::superseded_evidence`).
            reference_versions: self.reference_versions[..=at].to_vec(),
            ..self.clone()
        })
    }
}

/// One conversation and its questions.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    pub id: String,
    pub speaker_a: String,
    pub speaker_b: String,
    /// Sessions with turns, ascending by number.
    pub sessions: Vec<Session>,
    pub questions: Vec<Question>,
    /// dia_id -> ordinal (position among all turns of the conversation, chronological).
    #[serde(skip)]
    ordinals: HashMap<String, u32>,
    /// ordinal -> (index into `sessions`, index into its turns).
    #[serde(skip)]
    locations: Vec<(u32, u32)>,
}

impl Sample {
    /// A turn's ordinal: its position among all turns of the conversation.
    pub fn ordinal(&self, dia_id: &str) -> Option<u32> {
        self.ordinals.get(dia_id).copied()
    }

    /// The turn at an ordinal.
    pub fn turn(&self, ordinal: u32) -> &Turn {
        let (s, t) = self.locations[ordinal as usize];
        &self.sessions[s as usize].turns[t as usize]
    }

    /// The index into `sessions` of the session holding an ordinal.
    pub fn session_of(&self, ordinal: u32) -> usize {
        self.locations[ordinal as usize].0 as usize
    }

    pub fn turn_count(&self) -> usize {
        self.locations.len()
    }

    /// The conversation as known after its first `sessions` sessions (by
    /// position in `sessions`): their turns, with the same ordinals, and no
    /// questions. `sessions` past the end keeps them all.
    pub fn prefix(&self, sessions: usize) -> Sample {
        let kept = sessions.min(self.sessions.len());
        let turns: usize = self.sessions[..kept].iter().map(|s| s.turns.len()).sum();
        let locations = self.locations[..turns].to_vec();
        let ordinals =
            self.ordinals.iter().filter(|(_, o)| (**o as usize) < turns).map(|(k, &o)| (k.clone(), o)).collect();
        Sample {
            id: self.id.clone(),
            speaker_a: self.speaker_a.clone(),
            speaker_b: self.speaker_b.clone(),
            sessions: self.sessions[..kept].to_vec(),
            questions: Vec::new(),
            ordinals,
            locations,
        }
    }

    /// The index into `sessions` of the session holding a dia_id.
    pub fn session_index(&self, dia_id: &str) -> Option<usize> {
        self.ordinal(dia_id).map(|o| self.session_of(o))
    }
}

/// A loaded task set.
#[derive(Debug, Clone)]
pub struct Dataset {
    name: String,
    samples: Vec<Sample>,
    hash: String,
}

/// Which questions an evaluation runs on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Selection {
    /// Keep category 5 (adversarial); excluded by default.
    pub include_adversarial: bool,
    /// Only these conversations (sample ids); all when None.
    pub conversations: Option<Vec<String>>,
}

/// A selection the dataset cannot satisfy.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SelectionError {
    /// A conversation named in the selection that the dataset does not hold.
    #[error("{dataset}: no conversation {id:?} (it has {available})")]
    Unknown { dataset: String, id: String, available: String },
    /// The selection keeps no question: every accuracy would be 0 of 0.
    #[error("{dataset}: the task set has no questions ({detail})")]
    Empty { dataset: String, detail: String },
}

/// The former name of [`SelectionError`].
pub type UnknownConversation = SelectionError;

impl Dataset {
    /// The embedded synthetic dataset (`--tasks builtin`).
    pub fn builtin() -> Dataset {
        load_str(BUILTIN_NAME, BUILTIN_JSON).expect("the embedded synthetic dataset is valid (tested)")
    }

    /// The name errors and reports use (the file name, or `builtin`).
    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn samples(&self) -> &[Sample] {
        &self.samples
    }

    pub fn sample(&self, id: &str) -> Option<&Sample> {
        self.samples.iter().find(|s| s.id == id)
    }

    /// SHA-256 (hex) of the canonical content: the parsed samples serialized
    /// as JSON, so formatting and key order of the file do not matter.
    pub fn hash(&self) -> &str {
        &self.hash
    }

    /// All questions in file order.
    pub fn questions(&self) -> impl Iterator<Item = &Question> {
        self.samples.iter().flat_map(|s| s.questions.iter())
    }

    /// The questions a selection keeps, in file order.
    pub fn select(&self, selection: &Selection) -> Result<Vec<&Question>, UnknownConversation> {
        if let Some(ids) = &selection.conversations {
            for id in ids {
                if self.sample(id).is_none() {
                    return Err(SelectionError::Unknown {
                        dataset: self.name.clone(),
                        id: id.clone(),
                        available: self.samples.iter().map(|s| s.id.as_str()).collect::<Vec<_>>().join(", "),
                    });
                }
            }
        }
        let chosen: Vec<&Question> = self
            .samples
            .iter()
            .filter(|s| selection.conversations.as_ref().is_none_or(|ids| ids.contains(&s.id)))
            .flat_map(|s| s.questions.iter())
            .filter(|q| selection.include_adversarial || q.category != Category::Adversarial)
            .collect();
        if chosen.is_empty() {
            let detail = if selection.include_adversarial {
                "the selected conversations hold no qa entries".to_owned()
            } else {
                "the selected conversations hold no qa entries outside category 5 (adversarial, excluded unless \
                 harness.include_adversarial)"
                    .to_owned()
            };
            return Err(SelectionError::Empty { dataset: self.name.clone(), detail });
        }
        Ok(chosen)
    }
}

/// A dataset that could not be loaded: which file, and what is wrong where.
#[derive(Debug, thiserror::Error)]
#[error("{source_name}: {kind}")]
pub struct DatasetError {
    /// The file name (or `builtin`).
    pub source_name: String,
    pub kind: DatasetErrorKind,
}

#[derive(Debug, thiserror::Error)]
pub enum DatasetErrorKind {
    #[error("cannot read: {0}")]
    Io(std::io::Error),
    #[error(
        "the file is {bytes} bytes, over the limit of {limit} bytes for a task set \
         (raise harness.max_dataset_mb in emend.yaml to load it)"
    )]
    TooLarge { bytes: u64, limit: u64 },
    #[error("not UTF-8 text: invalid byte at offset {offset}")]
    NotUtf8 { offset: usize },
    #[error("not valid JSON: {0}")]
    Json(serde_json::Error),
    /// `at` names the sample and field: `sample 3 (conv-41): qa[17].evidence`.
    #[error("{at}: expected {expected}, got {got}")]
    Shape { at: String, expected: String, got: String },
    #[error("{at}: {message}")]
    Invalid { at: String, message: String },
}

/// Largest task set file [`load_path`] reads (LoCoMo's ten conversations are about 3 MB).
pub const DEFAULT_MAX_DATASET_BYTES: u64 = 64 * 1024 * 1024;

/// Reads a LoCoMo JSON file of at most [`DEFAULT_MAX_DATASET_BYTES`]; the file name names it
/// in errors.
pub fn load_path(path: &Path) -> Result<Dataset, DatasetError> {
    load_path_limited(path, DEFAULT_MAX_DATASET_BYTES)
}

/// Reads a LoCoMo JSON file of at most `limit` bytes (checked before reading it).
pub fn load_path_limited(path: &Path, limit: u64) -> Result<Dataset, DatasetError> {
    let (name, bytes) = read_limited(path, limit)?;
    load_str(&name, &utf8(path, bytes)?)
}

/// The stage name of parsed datasets in a [`DiskCache`].
const DATASET_STAGE: &str = "dataset";

/// [`load_path_limited`] through a disk cache: the parsed dataset is stored
/// under the SHA-256 of the file's bytes, its name and the harness version,
/// so a later load of the same bytes decodes it instead of parsing the JSON,
/// checking it and hashing its content again. The file is still read and
/// bounded by `limit` every time; a file that does not load is never stored,
/// so its error is the one [`load_path_limited`] gives.
pub fn load_path_cached(path: &Path, limit: u64, cache: &DiskCache) -> Result<Dataset, DatasetError> {
    let (name, bytes) = read_limited(path, limit)?;
    let key = {
        let mut h = Sha256::new();
        for part in [DATASET_STAGE.as_bytes(), HARNESS_VERSION.as_bytes(), name.as_bytes()] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.update(&bytes);
        <[u8; 32]>::from(h.finalize())
    };
    if let Some(d) = cache.get(DATASET_STAGE, &key).and_then(|b| Dataset::decode(&name, &b)) {
        return Ok(d);
    }
    let d = load_str(&name, &utf8(path, bytes)?)?;
    cache.put(DATASET_STAGE, &key, &d.encode());
    cache.sweep();
    Ok(d)
}

/// The file name and bytes of a file of at most `limit` bytes.
fn read_limited(path: &Path, limit: u64) -> Result<(String, Vec<u8>), DatasetError> {
    use std::io::Read;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| path.display().to_string());
    let fail = |kind| DatasetError { source_name: path.display().to_string(), kind };
    let file = std::fs::File::open(path).map_err(|e| fail(DatasetErrorKind::Io(e)))?;
    let len = file.metadata().map_err(|e| fail(DatasetErrorKind::Io(e)))?.len();
    if len > limit {
        return Err(fail(DatasetErrorKind::TooLarge { bytes: len, limit }));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    // One byte past the limit catches a file that grows while we read it.
    file.take(limit + 1).read_to_end(&mut bytes).map_err(|e| fail(DatasetErrorKind::Io(e)))?;
    if bytes.len() as u64 > limit {
        return Err(fail(DatasetErrorKind::TooLarge { bytes: bytes.len() as u64, limit }));
    }
    Ok((name, bytes))
}

fn utf8(path: &Path, bytes: Vec<u8>) -> Result<String, DatasetError> {
    String::from_utf8(bytes).map_err(|e| DatasetError {
        source_name: path.display().to_string(),
        kind: DatasetErrorKind::NotUtf8 { offset: e.utf8_error().valid_up_to() },
    })
}

impl Dataset {
    /// The parsed dataset in the stage cache's binary form ([`Enc`]): every
    /// field as parsed, and the content hash. Session dates, ordinals and
    /// turn locations are derived again on decoding.
    fn encode(&self) -> Vec<u8> {
        let mut e = Enc::default();
        e.str(&self.hash);
        e.u64(self.samples.len() as u64);
        for s in &self.samples {
            e.str(&s.id);
            e.str(&s.speaker_a);
            e.str(&s.speaker_b);
            e.u64(s.sessions.len() as u64);
            for session in &s.sessions {
                e.u32(session.number);
                e.opt_str(session.date_time.as_deref());
                e.u64(session.turns.len() as u64);
                for t in &session.turns {
                    e.str(&t.id);
                    e.str(&t.speaker);
                    e.str(&t.text);
                    e.opt_str(t.caption.as_deref());
                }
            }
            e.u64(s.questions.len() as u64);
            for q in &s.questions {
                e.str(&q.id);
                e.str(&q.conversation);
                e.u64(q.index as u64);
                e.str(&q.question);
                e.opt_str(q.answer.as_deref());
                e.opt_str(q.adversarial_answer.as_deref());
                e.u32(u32::from(q.category.number()));
                e.strs(&q.raw_evidence);
                e.strs(&q.evidence);
                e.strs(&q.unresolved);
                e.u64(q.reference_versions.len() as u64);
                for v in &q.reference_versions {
                    e.u32(v.from_session);
                    e.opt_str(v.answer.as_deref());
                    e.strs(&v.raw_evidence);
                    e.strs(&v.evidence);
                }
            }
        }
        e.0
    }

    /// The dataset [`Dataset::encode`] wrote, or None for input it did not write.
    fn decode(name: &str, bytes: &[u8]) -> Option<Dataset> {
        let mut d = Dec(bytes);
        let hash = d.str()?;
        let n_samples = d.count(8)?;
        let mut samples = Vec::with_capacity(n_samples);
        for _ in 0..n_samples {
            let (id, speaker_a, speaker_b) = (d.str()?, d.str()?, d.str()?);
            let n_sessions = d.count(8)?;
            let mut sessions = Vec::with_capacity(n_sessions);
            for _ in 0..n_sessions {
                let number = d.u32()?;
                let date_time = d.opt_str()?;
                // As parsing derives it: a date that is written must read.
                let date = match date_time.as_deref() {
                    None => None,
                    Some(text) if text.trim().is_empty() => None,
                    Some(text) => Some(SessionDate::parse(text)?),
                };
                let n_turns = d.count(8)?;
                let mut turns = Vec::with_capacity(n_turns);
                for _ in 0..n_turns {
                    turns.push(Turn { id: d.str()?, speaker: d.str()?, text: d.str()?, caption: d.opt_str()? });
                }
                sessions.push(Session { number, date_time, date, turns });
            }
            let n_questions = d.count(8)?;
            let mut questions = Vec::with_capacity(n_questions);
            for _ in 0..n_questions {
                let (id, conversation) = (d.str()?, d.str()?);
                let index = usize::try_from(d.u64()?).ok()?;
                let (question, answer, adversarial_answer) = (d.str()?, d.opt_str()?, d.opt_str()?);
                let category = Category::from_number(u64::from(d.u32()?))?;
                let (raw_evidence, evidence, unresolved) = (d.strs()?, d.strs()?, d.strs()?);
                let n_versions = d.count(8)?;
                let mut reference_versions = Vec::with_capacity(n_versions);
                for _ in 0..n_versions {
                    reference_versions.push(ReferenceVersion {
                        from_session: d.u32()?,
                        answer: d.opt_str()?,
                        raw_evidence: d.strs()?,
                        evidence: d.strs()?,
                    });
                }
                questions.push(Question {
                    id,
                    conversation,
                    index,
                    question,
                    answer,
                    adversarial_answer,
                    category,
                    raw_evidence,
                    evidence,
                    unresolved,
                    reference_versions,
                });
            }
            let (ordinals, locations) = turn_index(&sessions).ok()?;
            samples.push(Sample { id, speaker_a, speaker_b, sessions, questions, ordinals, locations });
        }
        d.done().then(|| Dataset { name: name.to_string(), samples, hash })
    }
}

/// Every turn's ordinal by dia_id, and each ordinal's (session, turn)
/// position; `Err((session, turn))` at the first dia_id seen twice.
pub(crate) fn turn_index(sessions: &[Session]) -> Result<TurnIndex, (usize, usize)> {
    let mut ordinals = HashMap::new();
    let mut locations = Vec::new();
    for (s, session) in sessions.iter().enumerate() {
        for (t, turn) in session.turns.iter().enumerate() {
            locations.push((s as u32, t as u32));
            if ordinals.insert(turn.id.clone(), locations.len() as u32 - 1).is_some() {
                return Err((s, t));
            }
        }
    }
    Ok((ordinals, locations))
}

/// Ordinals by dia_id, and (session, turn) by ordinal.
pub(crate) type TurnIndex = (HashMap<String, u32>, Vec<(u32, u32)>);

/// Parses LoCoMo JSON text; `name` names it in errors and reports. A leading UTF-8 byte
/// order mark is skipped.
pub fn load_str(name: &str, text: &str) -> Result<Dataset, DatasetError> {
    let fail = |kind| DatasetError { source_name: name.to_string(), kind };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let value: Value = crate::strict_json::from_str(text).map_err(|e| fail(DatasetErrorKind::Json(e)))?;
    let samples = parse_samples(&value).map_err(fail)?;
    let hash = content_hash(&samples);
    Ok(Dataset { name: name.to_string(), samples, hash })
}

fn content_hash(samples: &[Sample]) -> String {
    #[derive(Serialize)]
    struct Canon<'a> {
        format: &'static str,
        samples: &'a [Sample],
    }
    let bytes = serde_json::to_vec(&Canon { format: "locomo/1", samples }).expect("a dataset serializes");
    hex::encode(Sha256::digest(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Everything a dataset holds, in a comparable form (ordinals sorted).
    fn anatomy(d: &Dataset) -> String {
        let mut out = format!("{} {}\n", d.name, d.hash);
        for s in &d.samples {
            let mut ordinals: Vec<_> = s.ordinals.iter().collect();
            ordinals.sort();
            out += &format!("{:?}\n{:?}\n{:?}\n{ordinals:?}\n{:?}\n", s.id, s.sessions, s.questions, s.locations);
            out += &format!("{} {}\n", s.speaker_a, s.speaker_b);
        }
        out
    }

    #[test]
    fn the_binary_form_decodes_to_the_parsed_dataset() {
        let messy = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/messy.json")).unwrap();
        for d in [Dataset::builtin(), load_str("messy.json", &messy).unwrap()] {
            assert!(d.samples.iter().flat_map(|s| &s.sessions).any(|s| s.date.is_some()));
            let bytes = d.encode();
            let back = Dataset::decode(&d.name, &bytes).expect("decodes");
            assert_eq!(anatomy(&back), anatomy(&d));
            assert!(Dataset::decode(&d.name, &bytes[..bytes.len() - 1]).is_none(), "short input");
            let mut longer = bytes.clone();
            longer.push(0);
            assert!(Dataset::decode(&d.name, &longer).is_none(), "trailing bytes");
        }
        assert!(Dataset::builtin().samples.iter().flat_map(|s| &s.questions).any(|q| !q.reference_versions.is_empty()));
    }

    #[test]
    fn a_cached_load_is_the_parsed_dataset_and_a_bad_file_is_never_stored() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = DiskCache::open_named(&tmp.path().join("stages"), "datasets", 1 << 30).unwrap();
        let path = tmp.path().join("tasks.json");
        std::fs::write(&path, BUILTIN_JSON).unwrap();
        let parsed = load_path(&path).unwrap();
        let first = load_path_cached(&path, DEFAULT_MAX_DATASET_BYTES, &cache).unwrap();
        assert_eq!(std::fs::read_dir(cache.dir()).unwrap().count(), 1, "one entry stored");
        let second = load_path_cached(&path, DEFAULT_MAX_DATASET_BYTES, &cache).unwrap();
        assert_eq!(anatomy(&first), anatomy(&parsed));
        assert_eq!(anatomy(&second), anatomy(&parsed));
        // Other bytes are another entry: an edited file is parsed again.
        std::fs::write(&path, BUILTIN_JSON.replacen("\"question\": \"", "\"question\": \"Q ", 1)).unwrap();
        let edited = load_path_cached(&path, DEFAULT_MAX_DATASET_BYTES, &cache).unwrap();
        assert_ne!(edited.hash(), parsed.hash());
        assert_eq!(anatomy(&edited), anatomy(&load_path(&path).unwrap()));
        // The size bound and the parse errors hold on every load.
        let limit = std::fs::metadata(&path).unwrap().len() - 1;
        let e = load_path_cached(&path, limit, &cache).unwrap_err();
        assert!(matches!(e.kind, DatasetErrorKind::TooLarge { .. }), "{e}");
        let entries = std::fs::read_dir(cache.dir()).unwrap().count();
        std::fs::write(&path, "[{\"sample_id\": \"a\"}]").unwrap();
        let e = load_path_cached(&path, DEFAULT_MAX_DATASET_BYTES, &cache).unwrap_err();
        assert_eq!(e.to_string(), load_path(&path).unwrap_err().to_string());
        assert_eq!(std::fs::read_dir(cache.dir()).unwrap().count(), entries, "a file that fails is not stored");
    }

    fn exists(id: &str) -> bool {
        ["D8:6", "D9:17", "D30:5", "D11:26", "D1:1"].contains(&id)
    }

    fn res(raw: &[&str]) -> (Vec<String>, Vec<String>) {
        resolve_evidence(&raw.iter().map(|s| s.to_string()).collect::<Vec<_>>(), exists)
    }

    #[test]
    fn messy_evidence_ids_are_normalized_or_reported() {
        assert_eq!(res(&["D8:6; D9:17"]), (vec!["D8:6".into(), "D9:17".into()], vec![]));
        assert_eq!(res(&["D30:05"]), (vec!["D30:5".into()], vec![]));
        assert_eq!(res(&["D:11:26"]), (vec!["D11:26".into()], vec![]));
        assert_eq!(res(&["D"]), (vec![], vec!["D".into()]));
        assert_eq!(res(&["D10:19", "D1:1", "D1:1"]), (vec!["D1:1".into()], vec!["D10:19".into()]));
        assert_eq!(res(&[""]), (vec![], vec!["".into()]));
        assert_eq!(normalize_id("D1:x"), None);
        assert_eq!(normalize_id("D1:2:3"), None);
    }

    fn one(qa: &str) -> String {
        format!(
            r#"[{{"sample_id": "c1", "conversation": {{"speaker_a": "A", "speaker_b": "B",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [{{"speaker": "A", "dia_id": "D1:1", "text": "hi"}}]}},
              "qa": [{qa}]}}]"#
        )
    }

    #[test]
    fn errors_name_the_sample_and_field() {
        let e =
            load_str("x.json", &one(r#"{"question": "q", "category": 4, "answer": "a", "evidence": 5}"#)).unwrap_err();
        assert_eq!(e.to_string(), "x.json: sample 0 (c1): qa[0].evidence: expected a list of strings, got 5");
        let e = load_str("x.json", &one(r#"{"category": 4, "evidence": []}"#)).unwrap_err();
        assert_eq!(e.to_string(), "x.json: sample 0 (c1): qa[0].question: missing");
        let e = load_str("x.json", "{").unwrap_err();
        assert!(e.to_string().starts_with("x.json: not valid JSON: "), "{e}");
        let e = load_str("x.json", r#"{"a": 1}"#).unwrap_err();
        assert_eq!(e.to_string(), "x.json: top level: expected a list of samples, got an object");
    }

    #[test]
    fn answers_may_be_integers_or_absent_and_ids_are_stable() {
        let d = load_str(
            "x.json",
            &one(r#"{"question": "q", "category": 2, "answer": 2022, "evidence": ["D1:1"]},
                   {"question": "q", "category": 5, "adversarial_answer": "x", "evidence": ["D"]},
                   {"question": "q", "category": 4, "answer": "a", "evidence": ["D1:01"]}"#),
        )
        .unwrap();
        let qs: Vec<_> = d.questions().collect();
        assert_eq!(qs[0].answer.as_deref(), Some("2022"));
        assert_eq!(qs[1].answer, None);
        assert_eq!(qs[1].unresolved, vec!["D"]);
        let kept = d.select(&Selection::default()).unwrap();
        assert_eq!(kept.iter().map(|q| q.id.as_str()).collect::<Vec<_>>(), vec!["c1#0", "c1#2"]);
        assert_eq!(kept[1].evidence, vec!["D1:1"]);
        let all = d.select(&Selection { include_adversarial: true, conversations: None }).unwrap();
        assert_eq!(all.len(), 3);
        assert!(d.select(&Selection { include_adversarial: false, conversations: Some(vec!["nope".into()]) }).is_err());
    }

    #[test]
    fn hash_ignores_formatting() {
        let a = load_str("a", &one(r#"{"question": "q", "category": 4, "answer": "a", "evidence": []}"#)).unwrap();
        let compact = serde_json::to_string(
            &serde_json::from_str::<Value>(&one(r#"{"question": "q", "category": 4, "answer": "a", "evidence": []}"#))
                .unwrap(),
        )
        .unwrap();
        let b = load_str("b", &compact).unwrap();
        assert_eq!(a.hash(), b.hash());
        assert_eq!(a.hash().len(), 64);
        let c = load_str("c", &one(r#"{"question": "q2", "category": 4, "answer": "a", "evidence": []}"#)).unwrap();
        assert_ne!(a.hash(), c.hash());
    }

    fn two_sessions(qa: &str) -> String {
        format!(
            r#"[{{"sample_id": "c1", "conversation": {{"speaker_a": "A", "speaker_b": "B",
                "session_1": [{{"speaker": "A", "dia_id": "D1:1", "text": "I live in Lisbon"}}],
                "session_2": [{{"speaker": "A", "dia_id": "D2:1", "text": "I moved to Porto"}}]}},
              "qa": [{qa}]}}]"#
        )
    }

    #[test]
    fn reference_versions_give_the_reference_at_each_session() {
        let d = load_str(
            "x.json",
            &two_sessions(
                r#"{"question": "Where does A live now?", "category": 4, "answer": "Porto", "evidence": ["D2:1"],
                    "reference_versions": [{"from_session": 1, "answer": "Lisbon", "evidence": ["D1:1"]},
                                           {"from_session": 2, "answer": "Porto", "evidence": ["D2:01"]}]}"#,
            ),
        )
        .unwrap();
        let q = d.questions().next().unwrap();
        assert_eq!(q.reference_at(1).unwrap().answer.as_deref(), Some("Lisbon"));
        assert_eq!(q.reference_at(1).unwrap().evidence, vec!["D1:1"]);
        assert_eq!(q.reference_at(2).unwrap().answer.as_deref(), Some("Porto"));
        assert_eq!(q.reference_at(2).unwrap().evidence, vec!["D2:1"]);
        // A file without the field hashes as before the field existed.
        let plain = load_str(
            "y.json",
            &two_sessions(r#"{"question": "q", "category": 4, "answer": "Porto", "evidence": ["D2:1"]}"#),
        )
        .unwrap();
        assert!(plain.questions().next().unwrap().reference_versions.is_empty());
        assert!(!serde_json::to_string(&plain.samples()[0]).unwrap().contains("reference_versions"));
    }

    #[test]
    fn bad_reference_versions_name_the_field() {
        let err = |versions: &str| {
            load_str(
                "x.json",
                &two_sessions(&format!(
                    r#"{{"question": "q", "category": 4, "answer": "Porto", "evidence": ["D2:1"], "reference_versions": {versions}}}"#
                )),
            )
            .unwrap_err()
            .to_string()
        };
        assert_eq!(
            err(
                r#"[{"from_session": 2, "answer": "Porto", "evidence": ["D2:1"]}, {"from_session": 1, "answer": "Porto", "evidence": ["D2:1"]}]"#
            ),
            "x.json: sample 0 (c1): qa[0].reference_versions[1].from_session: 1 does not follow 2 (versions ascend by from_session)"
        );
        assert_eq!(
            err(r#"[{"from_session": 1, "answer": "Porto", "evidence": ["D2:1"]}]"#),
            "x.json: sample 0 (c1): qa[0].reference_versions[0].evidence: D2:1 is in session 2, after from_session 1 \
             (a reference cannot hold before its evidence exists)"
        );
        assert_eq!(
            err(r#"[{"from_session": 2, "answer": "Lisbon", "evidence": ["D2:1"]}]"#),
            "x.json: sample 0 (c1): qa[0].reference_versions[0]: the last version must have the question's own answer \
             and evidence (the reference at the end)"
        );
        assert_eq!(
            err(r#"[{"from_session": 3, "answer": "Porto", "evidence": ["D2:1"]}]"#),
            "x.json: sample 0 (c1): qa[0].reference_versions[0].from_session: 3 is after the last session (2)"
        );
        assert_eq!(
            err(r#"[{"from_session": 2, "answer": "Porto", "evidence": ["D9:1"]}]"#),
            "x.json: sample 0 (c1): qa[0].reference_versions[0].evidence: no turn D9:1 (a version's evidence must resolve)"
        );
        assert_eq!(err("[]"), "x.json: sample 0 (c1): qa[0].reference_versions: empty (omit the field instead)");
        assert!(
            err(r#"[{"answer": "Porto", "evidence": ["D2:1"]}]"#)
                .ends_with("reference_versions[0].from_session: missing")
        );
    }

    #[test]
    fn a_prefix_keeps_the_first_sessions_and_their_ordinals() {
        let d = load_str("x.json", &two_sessions(r#"{"question": "q", "category": 4, "answer": "a", "evidence": []}"#))
            .unwrap();
        let s = &d.samples()[0];
        let p = s.prefix(1);
        assert_eq!((p.sessions.len(), p.turn_count(), p.ordinal("D1:1"), p.ordinal("D2:1")), (1, 1, Some(0), None));
        assert!(p.questions.is_empty());
        assert_eq!(s.prefix(9).turn_count(), 2);
    }
}
