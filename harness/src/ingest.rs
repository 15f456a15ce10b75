//! Stage 1, ingest: a conversation's turns become memory items, each keeping
//! the turns it came from (its provenance).
//!
//! Reads `ingest.*`. Windows never cross a session. Items are then filtered in
//! one pass, in conversation order: too short (`min_chars`), a near-duplicate
//! of an item already kept (`dedup_threshold`, character-trigram cosine), or
//! over the session's cap (`max_items_per_session`, the first ones are kept).
//! A dropped item is gone with its text and its turns: a turn no kept item
//! holds is lost to every later stage, and the trace shows it.

use std::collections::{HashMap, HashSet};

use crate::cache::{Dec, Enc};
use crate::dataset::{Sample, Turn};
use crate::strategy::{Ingest, IngestUnit};
use crate::text::{FnvBuild, estimate_tokens, for_each_trigram};

/// One memory item.
#[derive(Debug, Clone)]
pub struct MemoryItem {
    /// Stable, readable id: `<conversation>/m<NNNN>`, numbered over all
    /// candidate items before filtering, so gaps show what was dropped.
    pub id: String,
    /// The number in the id.
    pub number: u32,
    /// Index into the sample's sessions.
    pub session: usize,
    /// Ordinals of the turns it came from, ascending.
    pub turns: Vec<u32>,
    /// What is indexed and shown in the context: an optional date stamp line,
    /// then `Speaker: text` lines (or the extracted fact).
    pub text: String,
    /// [`estimate_tokens`] of `text`.
    pub tokens: u32,
    /// The session date in days since the epoch, when it could be parsed.
    pub day: Option<f64>,
}

/// Counts of what ingest dropped and why, for reports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IngestStats {
    pub candidates: u32,
    pub too_short: u32,
    pub duplicates: u32,
    pub over_cap: u32,
}

/// A conversation's memory: the kept items and, per turn, the items holding it.
#[derive(Debug, Clone)]
pub struct Memory {
    pub conversation: String,
    pub items: Vec<MemoryItem>,
    /// Per turn ordinal: indices into `items` of the items holding that turn.
    pub holders: Vec<Vec<u32>>,
    /// The latest session date of the conversation (recency decay's reference).
    pub last_day: Option<f64>,
    pub stats: IngestStats,
    /// Items retired by maintenance ([`crate::consolidate`]); 0 for an
    /// ingested memory (never in the persistent cache).
    pub retired: u32,
}

impl Memory {
    /// True when some kept item holds the turn (its text is still known).
    pub fn holds(&self, ordinal: u32) -> bool {
        self.holders.get(ordinal as usize).is_some_and(|h| !h.is_empty())
    }

    /// The persistent stage cache's encoding (see [`crate::cache`]).
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut e = Enc::default();
        e.str(&self.conversation);
        e.u64(self.items.len() as u64);
        for it in &self.items {
            e.str(&it.id);
            e.u32(it.number);
            e.u64(it.session as u64);
            e.u32s(&it.turns);
            e.str(&it.text);
            e.u32(it.tokens);
            e.opt_f64(it.day);
        }
        e.u64(self.holders.len() as u64);
        for h in &self.holders {
            e.u32s(h);
        }
        e.opt_f64(self.last_day);
        let s = self.stats;
        for x in [s.candidates, s.too_short, s.duplicates, s.over_cap] {
            e.u32(x);
        }
        e.0
    }

    pub(crate) fn decode(bytes: &[u8]) -> Option<Memory> {
        let mut d = Dec(bytes);
        let conversation = d.str()?;
        let n = usize::try_from(d.u64()?).ok()?.min(bytes.len());
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            items.push(MemoryItem {
                id: d.str()?,
                number: d.u32()?,
                session: usize::try_from(d.u64()?).ok()?,
                turns: d.u32s()?,
                text: d.str()?,
                tokens: d.u32()?,
                day: d.opt_f64()?,
            });
        }
        let h = usize::try_from(d.u64()?).ok()?.min(bytes.len());
        let mut holders = Vec::with_capacity(h);
        for _ in 0..h {
            holders.push(d.u32s()?);
        }
        let last_day = d.opt_f64()?;
        let stats = IngestStats { candidates: d.u32()?, too_short: d.u32()?, duplicates: d.u32()?, over_cap: d.u32()? };
        d.done().then_some(Memory { conversation, items, holders, last_day, stats, retired: 0 })
    }
}

/// A fact an extractor model found in a window.
#[derive(Debug, Clone, PartialEq)]
pub struct Fact {
    pub text: String,
    /// dia_ids of the window's turns the fact comes from. Ids outside the
    /// window are ignored; a fact citing none is attributed to the whole window.
    pub turns: Vec<String>,
}

/// An extractor model failed.
#[derive(Debug, thiserror::Error)]
#[error("extractor {extractor}: {message}")]
pub struct ExtractError {
    pub extractor: String,
    pub message: String,
}

/// The `ingest.unit: fact` plug-in: an LLM (the `extractor` role) that turns a
/// window of turns into facts. None ships yet; the engine will provide one.
pub trait Extractor: Send + Sync {
    /// Identity (endpoint, model, version), part of the ingest cache key.
    fn id(&self) -> String;
    /// `prompt` is `ingest.extraction_prompt` with `{turns}` filled in.
    fn extract(&self, prompt: &str, window: &[&Turn]) -> Result<Vec<Fact>, ExtractError>;
    /// Extracts from every window of a conversation (ingest calls this once
    /// per conversation); results in input order. A model overrides it to
    /// run the calls concurrently.
    fn extract_batch(&self, jobs: &[ExtractJob<'_>]) -> Vec<Result<Vec<Fact>, ExtractError>> {
        jobs.iter().map(|j| self.extract(&j.prompt, &j.window)).collect()
    }
}

/// One window to extract facts from.
pub struct ExtractJob<'a> {
    pub prompt: String,
    pub window: Vec<&'a Turn>,
}

struct Candidate {
    session: usize,
    turns: Vec<u32>,
    /// Text without speakers or stamp: what min_chars and dedup look at.
    content: String,
    /// The item text without the stamp.
    body: String,
}

/// Turns ordinals [start, end) of one session into windows of `size` turns
/// advancing by `size - overlap`; the last window may be shorter.
fn windows(start: u32, end: u32, size: u32, overlap: u32) -> Vec<(u32, u32)> {
    let stride = size.saturating_sub(overlap).max(1);
    let mut out = Vec::new();
    let mut s = start;
    while s < end {
        let e = (s + size).min(end);
        out.push((s, e));
        if e == end {
            break;
        }
        s += stride;
    }
    out
}

/// Runs the ingest stage for one conversation.
pub fn ingest(sample: &Sample, spec: &Ingest, extractor: Option<&dyn Extractor>) -> Result<Memory, ExtractError> {
    let size = spec.window_size.max(1);
    let overlap = spec.window_overlap.min(size - 1);
    let mut candidates = Vec::new();
    // Fact windows are extracted in one batch: (session, start, end) per job.
    let mut jobs: Vec<ExtractJob<'_>> = Vec::new();
    let mut spans: Vec<(usize, u32, u32)> = Vec::new();
    let mut first = 0u32;
    for (s, session) in sample.sessions.iter().enumerate() {
        let end = first + session.turns.len() as u32;
        for (a, b) in windows(first, end, size, overlap) {
            let turns: Vec<&Turn> = (a..b).map(|o| sample.turn(o)).collect();
            match spec.unit {
                IngestUnit::Window => candidates.push(Candidate {
                    session: s,
                    turns: (a..b).collect(),
                    content: turns.iter().map(|t| t.content()).collect::<Vec<_>>().join(" "),
                    body: turns.iter().map(|t| t.line()).collect::<Vec<_>>().join("\n"),
                }),
                IngestUnit::Fact => {
                    let listing: String =
                        turns.iter().map(|t| format!("[{}] {}\n", t.id, t.line())).collect::<String>();
                    let prompt = spec.extraction_prompt.replace("{turns}", listing.trim_end());
                    jobs.push(ExtractJob { prompt, window: turns });
                    spans.push((s, a, b));
                }
            }
        }
        first = end;
    }
    if spec.unit == IngestUnit::Fact {
        let Some(ex) = extractor else {
            return Err(ExtractError {
                extractor: "(none)".into(),
                message: "ingest.unit: fact needs roles.extractor".into(),
            });
        };
        for ((s, a, b), facts) in spans.into_iter().zip(ex.extract_batch(&jobs)) {
            for fact in facts? {
                let mut cited: Vec<u32> =
                    fact.turns.iter().filter_map(|id| sample.ordinal(id)).filter(|o| (a..b).contains(o)).collect();
                cited.sort_unstable();
                cited.dedup();
                if cited.is_empty() {
                    cited = (a..b).collect();
                }
                candidates.push(Candidate { session: s, turns: cited, content: fact.text.clone(), body: fact.text });
            }
        }
    }

    let (kept, stats) = keep(candidates, spec, sample.sessions.len());

    let mut holders = vec![Vec::new(); sample.turn_count()];
    let mut items = Vec::with_capacity(kept.len());
    for (i, (number, c)) in kept.into_iter().enumerate() {
        let session = &sample.sessions[c.session];
        let text = match stamp(session, spec) {
            Some(s) => format!("[{s}]\n{}", c.body),
            None => c.body,
        };
        for &o in &c.turns {
            holders[o as usize].push(i as u32);
        }
        items.push(MemoryItem {
            id: format!("{}/m{:04}", sample.id, number),
            number,
            session: c.session,
            turns: c.turns,
            tokens: estimate_tokens(&text),
            text,
            day: session.date.map(|d| d.days()),
        });
    }
    let last_day = sample
        .sessions
        .iter()
        .filter_map(|s| s.date.map(|d| d.days()))
        .fold(None, |m: Option<f64>, d| Some(m.map_or(d, |m| m.max(d))));
    Ok(Memory { conversation: sample.id.clone(), items, holders, last_day, stats, retired: 0 })
}

/// The date stamp an item of `session` starts with (`[stamp]` on its own line).
fn stamp(session: &crate::dataset::Session, spec: &Ingest) -> Option<String> {
    if !spec.stamp_date {
        return None;
    }
    match (&session.date, &session.date_time) {
        (Some(d), _) => Some(d.stamp()),
        (None, Some(raw)) => Some(raw.clone()),
        (None, None) => None,
    }
}

/// The text of an item that min_chars and dedup look at (without speakers
/// or stamp), lowercased: what the consolidation compares.
pub(crate) fn item_content(sample: &Sample, spec: &Ingest, item: &MemoryItem) -> String {
    let content = match spec.unit {
        IngestUnit::Window => item.turns.iter().map(|&o| sample.turn(o).content()).collect::<Vec<_>>().join(" "),
        IngestUnit::Fact => match stamp(&sample.sessions[item.session], spec) {
            Some(s) => item.text.strip_prefix(&format!("[{s}]\n")).unwrap_or(&item.text).to_string(),
            None => item.text.clone(),
        },
    };
    content.to_lowercase()
}

/// The candidates that become memory items, numbered in candidate order:
/// long enough, not near-duplicates of one kept before, within the
/// per-session cap; and what was dropped for which reason.
fn keep(candidates: Vec<Candidate>, spec: &Ingest, sessions: usize) -> (Vec<(u32, Candidate)>, IngestStats) {
    let mut stats = IngestStats { candidates: candidates.len() as u32, ..IngestStats::default() };
    let mut kept: Vec<(u32, Candidate)> = Vec::new();
    let mut dedup = Deduper::new(spec.dedup_threshold);
    let mut per_session = vec![0u32; sessions];
    for (number, c) in candidates.into_iter().enumerate() {
        if (c.content.chars().count() as u64) < u64::from(spec.min_chars) {
            stats.too_short += 1;
            continue;
        }
        let low = c.content.to_lowercase();
        let profile = dedup.profile(&low);
        if dedup.is_duplicate(&low, &profile) {
            stats.duplicates += 1;
            continue;
        }
        if per_session[c.session] >= spec.max_items_per_session {
            stats.over_cap += 1;
            continue;
        }
        per_session[c.session] += 1;
        dedup.keep(low, &profile);
        kept.push((number as u32, c));
    }
    (kept, stats)
}

/// Near-duplicate detection against the items kept so far: cosine similarity
/// of character-trigram count vectors (see [`for_each_trigram`]), computed
/// through an inverted index. Only identical (lowercased) texts reach 1.0, so
/// threshold 1.0 drops exact duplicates only.
///
/// Linear in practice: a query does not walk the long posting lists of the
/// trigrams nearly every item has. Those (more than [`LONG_POSTINGS`] items),
/// from the most common down, form the query's "common" part while its
/// squared norm stays below threshold² x the query's (with a margin). An item
/// sharing only common trigrams has cosine <= |common| / |query| < threshold
/// (Cauchy-Schwarz), so only items reached through the other trigrams are
/// candidates; a candidate whose exact rest plus |common| x |item| cannot
/// reach the threshold is dropped, the others get the common part from their
/// stored counts and the same arithmetic as before. The decisions are those
/// of the exhaustive comparison (tested).
/// Trigrams found in more kept items than this may go to a query's common part.
const LONG_POSTINGS: usize = 64;

pub(crate) struct Deduper {
    threshold: f64,
    ids: HashMap<u64, u32, FnvBuild>,
    /// Per trigram id: (kept item, count).
    postings: Vec<Vec<(u32, u32)>>,
    /// Per kept item: its trigram counts, ascending by id.
    profiles: Vec<Vec<(u32, u32)>>,
    norms: Vec<f64>,
    exact: HashSet<String>,
    acc: Vec<u64>,
    touched: Vec<u32>,
}

/// A text's trigram counts by compact trigram id, ascending, and the vector's norm.
pub(crate) struct Profile {
    counts: Vec<(u32, u32)>,
    norm: f64,
}

impl Deduper {
    pub(crate) fn new(threshold: f64) -> Self {
        Deduper {
            threshold,
            ids: HashMap::default(),
            postings: Vec::new(),
            profiles: Vec::new(),
            norms: Vec::new(),
            exact: HashSet::new(),
            acc: Vec::new(),
            touched: Vec::new(),
        }
    }

    pub(crate) fn profile(&mut self, text: &str) -> Profile {
        if self.threshold >= 1.0 {
            return Profile { counts: Vec::new(), norm: 0.0 };
        }
        let mut ids = Vec::new();
        for_each_trigram(text, |h| {
            let next = self.ids.len() as u32;
            ids.push(*self.ids.entry(h).or_insert(next));
        });
        ids.sort_unstable();
        let mut counts: Vec<(u32, u32)> = Vec::new();
        for id in ids {
            match counts.last_mut() {
                Some((x, c)) if *x == id => *c += 1,
                _ => counts.push((id, 1)),
            }
        }
        let norm = counts.iter().map(|&(_, c)| f64::from(c) * f64::from(c)).sum::<f64>().sqrt();
        Profile { counts, norm }
    }

    /// The highest similarity to a kept item (0 when none is similar at all).
    fn max_similarity(&mut self, text: &str, p: &Profile) -> f64 {
        if self.exact.contains(text) {
            return 1.0;
        }
        if p.norm == 0.0 {
            return 0.0;
        }
        self.acc.resize(self.norms.len(), 0);
        for &(t, c) in &p.counts {
            if let Some(list) = self.postings.get(t as usize) {
                for &(k, c2) in list {
                    if self.acc[k as usize] == 0 {
                        self.touched.push(k);
                    }
                    self.acc[k as usize] += u64::from(c) * u64::from(c2);
                }
            }
        }
        let mut best = 0.0f64;
        for k in self.touched.drain(..) {
            let cos = self.acc[k as usize] as f64 / (p.norm * self.norms[k as usize]);
            self.acc[k as usize] = 0;
            best = best.max(cos.min(1.0 - 1e-9));
        }
        best
    }

    pub(crate) fn is_duplicate(&mut self, text: &str, p: &Profile) -> bool {
        let t = self.threshold;
        if self.exact.contains(text) || t <= 0.0 || p.norm == 0.0 {
            return self.max_similarity(text, p) >= t;
        }
        let posting_len = |id: u32| self.postings.get(id as usize).map_or(0, Vec::len);
        // The trigrams with long posting lists, most common first, go to the
        // common part while its squared norm stays below threshold² x the query's.
        let mut long: Vec<(usize, u32, u32)> =
            p.counts.iter().map(|&(id, c)| (posting_len(id), id, c)).filter(|f| f.0 > LONG_POSTINGS).collect();
        long.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let total: u64 = p.counts.iter().map(|&(_, c)| u64::from(c) * u64::from(c)).sum();
        let bound = t * t * total as f64 * (1.0 - 1e-9);
        let mut common_sq = 0u64;
        let mut common: Vec<(u32, u32)> = Vec::new();
        for &(_, id, c) in &long {
            let sq = u64::from(c) * u64::from(c);
            if ((common_sq + sq) as f64) >= bound {
                break;
            }
            common_sq += sq;
            common.push((id, c));
        }
        common.sort_unstable();
        self.acc.resize(self.norms.len(), 0);
        for &(id, c) in &p.counts {
            if common.binary_search_by_key(&id, |x| x.0).is_ok() {
                continue;
            }
            if let Some(list) = self.postings.get(id as usize) {
                for &(k, c2) in list {
                    if self.acc[k as usize] == 0 {
                        self.touched.push(k);
                    }
                    self.acc[k as usize] += u64::from(c) * u64::from(c2);
                }
            }
        }
        // An item's dot product is its exact rare part plus at most
        // |common| x |item|: items that cannot reach the threshold even so
        // are not looked at again.
        let common_norm = (common_sq as f64).sqrt();
        let mut duplicate = false;
        for k in self.touched.drain(..) {
            let mut dot = self.acc[k as usize];
            self.acc[k as usize] = 0;
            let norm_k = self.norms[k as usize];
            if duplicate || (dot as f64 + common_norm * norm_k) < t * p.norm * norm_k * (1.0 - 1e-9) {
                continue;
            }
            let profile = &self.profiles[k as usize];
            for &(id, c) in &common {
                if let Ok(i) = profile.binary_search_by_key(&id, |x| x.0) {
                    dot += u64::from(c) * u64::from(profile[i].1);
                }
            }
            // The exhaustive comparison's arithmetic, exactly.
            let cos = dot as f64 / (p.norm * norm_k);
            duplicate = cos.min(1.0 - 1e-9) >= t;
        }
        duplicate
    }

    pub(crate) fn keep(&mut self, text: String, p: &Profile) {
        let k = self.norms.len() as u32;
        self.norms.push(p.norm);
        self.profiles.push(p.counts.clone());
        for &(t, c) in &p.counts {
            if self.postings.len() <= t as usize {
                self.postings.resize(t as usize + 1, Vec::new());
            }
            self.postings[t as usize].push((k, c));
        }
        self.exact.insert(text);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::load_str;

    fn sample() -> Sample {
        let json = r#"[{"sample_id": "c", "conversation": {"speaker_a": "Ann", "speaker_b": "Bo",
            "session_1_date_time": "1:00 pm on 1 May, 2023",
            "session_1": [
              {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a beagle named Biscuit last week."},
              {"speaker": "Bo", "dia_id": "D1:2", "text": "Ok."},
              {"speaker": "Ann", "dia_id": "D1:3", "text": "I adopted a beagle named Pepper last week."}],
            "session_2_date_time": "1:00 pm on 11 May, 2023",
            "session_2": [
              {"speaker": "Bo", "dia_id": "D2:1", "text": "My sister moved to Lisbon for work."},
              {"speaker": "Ann", "dia_id": "D2:2", "text": "Lisbon is lovely in spring."}]},
            "qa": []}]"#;
        load_str("t", json).unwrap().samples()[0].clone()
    }

    fn spec() -> Ingest {
        Ingest {
            unit: IngestUnit::Window,
            window_size: 1,
            window_overlap: 0,
            min_chars: 0,
            dedup_threshold: 1.0,
            max_items_per_session: 100,
            stamp_date: false,
            extraction_prompt: "{turns}".into(),
            consolidate: Default::default(),
        }
    }

    #[test]
    fn windows_cover_every_turn_and_stay_in_their_session() {
        assert_eq!(windows(0, 5, 2, 0), vec![(0, 2), (2, 4), (4, 5)]);
        assert_eq!(windows(0, 5, 3, 1), vec![(0, 3), (2, 5)]);
        assert_eq!(windows(3, 4, 4, 0), vec![(3, 4)]);
        let m = ingest(&sample(), &Ingest { window_size: 2, ..spec() }, None).unwrap();
        let turns: Vec<_> = m.items.iter().map(|i| i.turns.clone()).collect();
        assert_eq!(turns, vec![vec![0, 1], vec![2], vec![3, 4]]);
        assert_eq!(m.items[2].id, "c/m0002");
        assert_eq!(m.items[0].text, "Ann: I adopted a beagle named Biscuit last week.\nBo: Ok.");
    }

    #[test]
    fn similarity_is_one_only_for_identical_text() {
        let mut d = Deduper::new(0.5);
        let a = "i adopted a beagle named biscuit";
        let pa = d.profile(a);
        d.keep(a.to_string(), &pa);
        let same = d.profile(a);
        assert_eq!(d.max_similarity(a, &same), 1.0);
        let b = "i adopted a beagle, named biscuit!";
        let pb = d.profile(b);
        let s = d.max_similarity(b, &pb);
        assert!(s < 1.0 && s > 0.999, "{s}");
        let c = "i adopted a beagle named pepper";
        let pc = d.profile(c);
        let s = d.max_similarity(c, &pc);
        assert!(s > 0.6 && s < 0.95, "{s}");
        let e = d.profile("");
        assert_eq!(d.max_similarity("", &e), 0.0);
    }

    #[test]
    fn the_pruned_check_decides_like_the_exhaustive_one() {
        // Texts sharing many trigrams (a small vocabulary), at several thresholds.
        let words = ["i", "adopted", "a", "beagle", "named", "biscuit", "pepper", "we", "went", "to", "lisbon", "the"];
        let mut x = 12345u64;
        let mut next = |n: usize| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) as usize % n
        };
        let texts: Vec<String> = (0..400)
            .map(|_| (0..3 + next(8)).map(|_| words[next(words.len())]).collect::<Vec<_>>().join(" "))
            .collect();
        for t in [0.3, 0.6, 0.8, 0.9, 0.97, 1.0] {
            let mut d = Deduper::new(t);
            let (mut dups, mut kept) = (0, 0);
            for text in &texts {
                let p = d.profile(text);
                let exhaustive = d.max_similarity(text, &p) >= t;
                assert_eq!(d.is_duplicate(text, &p), exhaustive, "threshold {t}: {text:?}");
                if exhaustive {
                    dups += 1;
                } else {
                    kept += 1;
                    d.keep(text.clone(), &p);
                }
            }
            assert!(dups > 0 && kept > 0, "threshold {t}: {dups} duplicates, {kept} kept");
        }
    }

    #[test]
    fn dedup_drops_the_later_item_with_its_turns() {
        let m = ingest(&sample(), &Ingest { dedup_threshold: 0.6, ..spec() }, None).unwrap();
        assert!(!m.holds(2), "the near-duplicate Pepper turn is gone");
        assert!(m.holds(0));
        assert_eq!(m.stats.duplicates, 1);
        assert_eq!(
            m.items.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
            vec!["c/m0000", "c/m0001", "c/m0003", "c/m0004"]
        );
        let exact = ingest(&sample(), &spec(), None).unwrap();
        assert_eq!(exact.items.len(), 5);
    }

    #[test]
    fn min_chars_caps_and_stamps() {
        let m = ingest(&sample(), &Ingest { min_chars: 5, max_items_per_session: 1, stamp_date: true, ..spec() }, None)
            .unwrap();
        assert_eq!(m.stats.too_short, 1);
        assert_eq!(m.stats.over_cap, 2);
        assert_eq!(m.items.len(), 2);
        assert!(m.items[1].text.starts_with("[11 May 2023]\nBo: My sister"), "{}", m.items[1].text);
        assert_eq!(m.last_day, m.items[1].day);
    }

    struct Echo;
    impl Extractor for Echo {
        fn id(&self) -> String {
            "echo".into()
        }
        fn extract(&self, prompt: &str, window: &[&Turn]) -> Result<Vec<Fact>, ExtractError> {
            assert!(prompt.contains(&format!("[{}]", window[0].id)));
            Ok(window
                .iter()
                .map(|t| Fact { text: format!("fact: {}", t.text), turns: vec![t.id.clone(), "D9:9".into()] })
                .collect())
        }
    }

    #[test]
    fn fact_unit_needs_an_extractor_and_keeps_provenance() {
        let s = Ingest { unit: IngestUnit::Fact, window_size: 2, ..spec() };
        let e = ingest(&sample(), &s, None).unwrap_err();
        assert!(e.to_string().contains("ingest.unit: fact needs roles.extractor"));
        let m = ingest(&sample(), &s, Some(&Echo)).unwrap();
        assert_eq!(m.items.len(), 5);
        assert_eq!(m.items[1].turns, vec![1]);
    }
}
