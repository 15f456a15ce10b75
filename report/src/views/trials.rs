//! Every strategy the journal's searches scored, one row each in journal
//! order (like Optuna's trials table), a summary of each search, and the
//! run's true funnel: what `emend trials` prints and the report's search
//! section shows.

use std::collections::{BTreeMap, BTreeSet};

use emend_journal::EventLog;
use serde::Serialize;
use serde_json::Value;

use emend_core::artifact;
use emend_core::events::{CandidateRecord, ScoredPoint, SearchRecord, hex_to_bits};
use emend_core::store::{Store, StoreError};

/// How far a scored strategy got (Optuna's COMPLETE and PRUNED).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TrialState {
    /// Evaluated on the whole search part.
    Complete,
    /// Dropped by a race before the whole search part.
    RacedOut,
}

impl TrialState {
    pub fn as_str(self) -> &'static str {
        match self {
            TrialState::Complete => "complete",
            TrialState::RacedOut => "raced_out",
        }
    }
}

/// One strategy a search scored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrialRow {
    /// 0-based over the whole journal.
    pub number: usize,
    /// The ordinal of the `searched` event that scored it, 1-based.
    pub search: usize,
    pub round: u64,
    /// `trial` (drawn by the sampler), `consensus` (the consensus of the best
    /// strategies, tried before pruning), `prune` (a reversion tested while
    /// pruning), `served` (the served strategy itself, the baseline scored on
    /// the whole search part) or `step` (a point of the bounded step search).
    pub stage: String,
    /// `complete` or `raced_out`; None for a step-search point, whose
    /// questions were not recorded.
    pub state: Option<TrialState>,
    /// The strategy's content hash. A step-search point records none: its
    /// hash is derived from its values and the served document, and kept
    /// only when the search screened that hash.
    pub hash: Option<String>,
    /// Questions of the search part it was evaluated on (None for the step search).
    pub evaluated: Option<usize>,
    /// How many of those it answered correctly (None when not recorded).
    pub correct: Option<usize>,
    /// Its accuracy on the whole search part: only for a complete trial.
    pub score: Option<f64>,
    /// Not a measurement: the estimate of its search-part accuracy that the
    /// sampler learned from, for a trial raced out under `search.raced_out:
    /// deficit | shrunk` (or journaled before that setting) and for a step
    /// point (the served score plus its difference on the sample it was
    /// screened on). None for a complete trial and under `rank`, where a
    /// raced-out trial ranks below every complete one.
    pub estimate: Option<f64>,
    /// When its evaluation started (RFC 3339 UTC), and for how long.
    pub started: Option<String>,
    pub duration_ms: Option<u64>,
    /// Mean context tokens on the questions it was evaluated on.
    pub tokens: Option<f64>,
    /// Whether it is the strategy its search proposed (see [`TrialsView::of`]).
    pub proposed: bool,
    /// Fields whose value differs from the served strategy's when the search
    /// ran; None when that document is not in the journal's strategy store.
    pub changed: Option<usize>,
    /// Its evolvable (non-text) fields by path.
    pub values: BTreeMap<String, Value>,
}

/// One `searched` event, summarized.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchSummary {
    /// Its ordinal, 1-based.
    pub search: usize,
    pub round: u64,
    pub served_hash: String,
    /// True for the global search, whose points record their questions.
    pub global: bool,
    /// Points drawn by the sampler (`trial`) or the step search (`step`).
    pub trials: usize,
    /// The served strategy, journaled as the baseline (`served`; 0 or 1).
    pub served: usize,
    pub prune_tests: usize,
    /// Points stopped before the whole search part (None for the step search).
    pub raced_out: Option<usize>,
    /// The search part's size: the largest `questions` recorded on it.
    pub part_questions: Option<usize>,
    /// Full-evaluation equivalents it spent.
    pub spent: f64,
    /// Why it ended (`proposed`, `segment`, `budget`, `converged`, `nothing`).
    pub ended: String,
    pub proposed: Option<String>,
    /// Numbers of its best rows: the top three strategies by score among
    /// those not raced out (the proposed one first among equals).
    pub best: Vec<usize>,
}

/// The run's true funnel, over every search: what was screened, how much of
/// it was raced out, pruned, proposed and confirmed.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct SearchFunnel {
    /// Strategies drawn (sampler trials and step-search points).
    pub screened: usize,
    /// Step-search points: screened, with no record of their questions.
    pub unrecorded: usize,
    pub raced_out: usize,
    /// Evaluated on the whole search part.
    pub whole_part: usize,
    pub prune_tests: usize,
    /// Searches that sent a candidate to the gates.
    pub proposed: usize,
    /// Proposed candidates that passed the confirm test (accepted or pending approval).
    pub confirmed: usize,
}

/// `emend trials`: every scored strategy and every search.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TrialsView {
    pub searches: Vec<SearchSummary>,
    pub trials: Vec<TrialRow>,
}

/// How many rows a search lists as its best.
const BEST: usize = 3;

impl TrialsView {
    /// The view of every `searched` event of `log`, with the served
    /// documents from its strategy store.
    pub fn build<L: EventLog + ?Sized>(log: &L) -> Result<TrialsView, StoreError> {
        let store = Store::new(log);
        let records = store.searches()?;
        let mut documents = BTreeMap::new();
        for r in &records {
            if !documents.contains_key(&r.served_hash)
                && let Some(doc) = store.document(&r.served_hash)?
            {
                documents.insert(r.served_hash.clone(), doc);
            }
        }
        Ok(TrialsView::of(&records, &documents))
    }

    /// The view of `records` (in journal order); `documents` holds served
    /// documents by hash. A row is `proposed` when its search proposed its
    /// hash; when the proposing search did not score that strategy itself
    /// (an earlier segment did), the latest earlier row of it is.
    pub fn of(records: &[SearchRecord], documents: &BTreeMap<String, Value>) -> TrialsView {
        let mut part_size: BTreeMap<&str, usize> = BTreeMap::new();
        for r in records {
            if let Some(g) = &r.global {
                let most = r.scored.iter().filter_map(|p| p.questions).max().unwrap_or(0);
                let e = part_size.entry(g.part.as_str()).or_default();
                *e = (*e).max(most);
            }
        }
        let mut view = TrialsView::default();
        for (i, r) in records.iter().enumerate() {
            let served = documents.get(&r.served_hash);
            let size = r.global.as_ref().and_then(|g| part_size.get(g.part.as_str()).copied()).filter(|n| *n > 0);
            let first = view.trials.len();
            for p in &r.scored {
                let number = view.trials.len();
                view.trials.push(row(number, i + 1, r, p, served, size));
            }
            mark_proposed(&mut view.trials, first, r.proposed.as_deref());
            view.searches.push(summary(i + 1, r, &view.trials[first..], size));
        }
        view
    }

    /// Keeps only search `n` (1-based) and its rows; false when there is none.
    pub fn keep_search(&mut self, n: usize) -> bool {
        self.searches.retain(|s| s.search == n);
        self.trials.retain(|t| t.search == n);
        !self.searches.is_empty()
    }

    /// Every field path a row has a value for, sorted.
    pub fn fields(&self) -> Vec<String> {
        let set: BTreeSet<&String> = self.trials.iter().flat_map(|t| t.values.keys()).collect();
        set.into_iter().cloned().collect()
    }

    /// The accuracy-cost front: of each strategy (by hash) its latest row
    /// scored on the whole search part with its mean context tokens, those
    /// no other beats (at least as accurate with at most as many tokens,
    /// strictly better in one); by tokens, then score descending, then number.
    /// The same strategy appears once even when several searches scored it.
    pub fn front(&self) -> Vec<&TrialRow> {
        let points: Vec<(&TrialRow, f64, f64)> =
            self.costed().into_values().filter_map(|t| Some((t, t.score?, t.tokens?))).collect();
        let beaten = |s: f64, k: f64| points.iter().any(|&(_, s2, k2)| s2 >= s && k2 <= k && (s2 > s || k2 < k));
        let mut front: Vec<(&TrialRow, f64, f64)> = points.iter().copied().filter(|&(_, s, k)| !beaten(s, k)).collect();
        front.sort_by(|a, b| a.2.total_cmp(&b.2).then(b.1.total_cmp(&a.1)).then(a.0.number.cmp(&b.0.number)));
        front.into_iter().map(|(t, ..)| t).collect()
    }

    /// Each strategy's latest row scored on the whole search part with its
    /// mean context tokens, by hash: what the front and its chart are drawn from.
    pub fn costed(&self) -> BTreeMap<&str, &TrialRow> {
        let mut latest = BTreeMap::new();
        for t in &self.trials {
            if let (Some(TrialState::Complete), Some(h), Some(_), Some(_)) = (t.state, &t.hash, t.score, t.tokens) {
                latest.insert(h.as_str(), t);
            }
        }
        latest
    }

    /// Keeps only the rows of the accuracy-cost front ([`TrialsView::front`]), in its order.
    pub fn keep_front(&mut self) {
        self.trials = self.front().into_iter().cloned().collect();
    }

    /// The row numbered `number`.
    pub fn row(&self, number: usize) -> Option<&TrialRow> {
        self.trials.iter().find(|t| t.number == number)
    }

    /// The run's true funnel; `candidates` are every judged candidate.
    pub fn funnel(&self, candidates: &[CandidateRecord]) -> SearchFunnel {
        let drawn = || self.trials.iter().filter(|t| t.is_drawn());
        let proposed: BTreeSet<&str> = self.searches.iter().filter_map(|s| s.proposed.as_deref()).collect();
        SearchFunnel {
            screened: drawn().count(),
            unrecorded: drawn().filter(|t| t.state.is_none()).count(),
            raced_out: drawn().filter(|t| t.state == Some(TrialState::RacedOut)).count(),
            whole_part: drawn().filter(|t| t.state == Some(TrialState::Complete)).count(),
            prune_tests: self.trials.iter().filter(|t| t.stage == "prune").count(),
            proposed: self.searches.iter().filter(|s| s.proposed.is_some()).count(),
            confirmed: candidates
                .iter()
                .filter(|c| c.accepted_version.is_some())
                .filter(|c| c.hash.as_deref().is_some_and(|h| proposed.contains(h)))
                .count(),
        }
    }
}

impl TrialRow {
    /// Its accuracy on the questions it was evaluated on: the score of a
    /// complete trial, the share right of a raced-out one; for a step point
    /// (no questions recorded) its estimate. What the report plots.
    pub fn accuracy(&self) -> f64 {
        let measured = self.evaluated.zip(self.correct).filter(|(n, _)| *n > 0).map(|(n, c)| c as f64 / n as f64);
        self.score.or(measured).or(self.estimate).unwrap_or(0.0)
    }

    /// Whether a sampler (or the step search) drew it: not a prune test, not the served baseline.
    pub fn is_drawn(&self) -> bool {
        matches!(self.stage.as_str(), "trial" | "step")
    }
}

fn row(
    number: usize,
    search: usize,
    r: &SearchRecord,
    p: &ScoredPoint,
    served: Option<&Value>,
    size: Option<usize>,
) -> TrialRow {
    let stage = p.stage.clone().unwrap_or_else(|| if r.global.is_some() { "trial" } else { "step" }.to_string());
    let hash = p.hash.clone().or_else(|| {
        let h = artifact::content_hash(&emend_core::search::materialize(served?, &p.values));
        r.screened.contains(&h).then_some(h)
    });
    let state = p.questions.zip(size).map(|(q, n)| if q >= n { TrialState::Complete } else { TrialState::RacedOut });
    let correct = p
        .questions
        .zip(p.correct.as_deref())
        .and_then(|(q, hex)| hex_to_bits(hex, q))
        .map(|bits| bits.iter().filter(|b| **b).count());
    // A journal written before `search.raced_out` kept a raced-out trial's estimate in `score`.
    let old = r.global.as_ref().is_some_and(|g| g.raced_out.is_none());
    let (score, estimate) = match state {
        Some(TrialState::Complete) => (Some(p.score), None),
        Some(TrialState::RacedOut) if old => (None, Some(p.score)),
        Some(TrialState::RacedOut) => (None, p.estimate),
        None => (None, Some(p.score)),
    };
    TrialRow {
        number,
        search,
        round: r.round,
        stage,
        state,
        hash,
        evaluated: p.questions,
        correct,
        score,
        estimate,
        started: p.started.clone(),
        duration_ms: p.duration_ms,
        tokens: p.tokens,
        proposed: false,
        changed: served.map(|doc| changed_from(doc, &p.values)),
        values: p.values.clone(),
    }
}

/// Marks the rows of a search (from `first`) that hold the hash it proposed,
/// or, when none does, the latest earlier row with that hash.
fn mark_proposed(rows: &mut [TrialRow], first: usize, proposed: Option<&str>) {
    let Some(h) = proposed else { return };
    let is = |t: &TrialRow| t.hash.as_deref() == Some(h);
    let mut own = false;
    for t in rows[first..].iter_mut().filter(|t| is(t)) {
        t.proposed = true;
        own = true;
    }
    if !own && let Some(t) = rows[..first].iter_mut().rev().find(|t| is(t)) {
        t.proposed = true;
    }
}

/// Fields of `values` whose value differs from `served`'s (numbers compared as numbers).
fn changed_from(served: &Value, values: &BTreeMap<String, Value>) -> usize {
    values
        .iter()
        .filter(|(path, v)| match emend_core::schema::get_path(served, path) {
            Some(s) => !(s == *v || (s.is_number() && s.as_f64() == v.as_f64())),
            None => false,
        })
        .count()
}

fn summary(search: usize, r: &SearchRecord, rows: &[TrialRow], size: Option<usize>) -> SearchSummary {
    let value = |t: &TrialRow| t.score.or(t.estimate).unwrap_or(f64::NEG_INFINITY);
    let mut ranked: Vec<&TrialRow> = rows.iter().filter(|t| t.state != Some(TrialState::RacedOut)).collect();
    ranked
        .sort_by(|a, b| value(b).total_cmp(&value(a)).then(b.proposed.cmp(&a.proposed)).then(a.number.cmp(&b.number)));
    // A strategy scored twice (a reversion raced again) is listed once.
    let mut seen = BTreeSet::new();
    ranked.retain(|t| t.hash.as_ref().is_none_or(|h| seen.insert(h.clone())));
    let ended = match &r.global {
        Some(g) if !g.ended.is_empty() => g.ended.clone(),
        _ if r.proposed.is_some() => "proposed".to_string(),
        _ => "nothing".to_string(),
    };
    SearchSummary {
        search,
        round: r.round,
        served_hash: r.served_hash.clone(),
        global: r.global.is_some(),
        trials: rows.iter().filter(|t| t.is_drawn()).count(),
        served: rows.iter().filter(|t| t.stage == "served").count(),
        prune_tests: rows.iter().filter(|t| t.stage == "prune").count(),
        raced_out: size.map(|_| rows.iter().filter(|t| t.state == Some(TrialState::RacedOut)).count()),
        part_questions: size,
        spent: r.spent,
        ended,
        proposed: r.proposed.clone(),
        best: ranked.iter().take(BEST).map(|t| t.number).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use emend_core::events::GlobalRecord;
    use serde_json::json;

    fn point(hash: &str, questions: usize, score: f64, stage: &str, k: i64) -> ScoredPoint {
        let mut p = ScoredPoint::new(BTreeMap::from([("retrieve.top_k".to_string(), json!(k))]), score);
        p.hash = Some(hash.into());
        p.questions = Some(questions);
        p.stage = Some(stage.into());
        p
    }

    fn record(round: u64, served: &str, part: &str, scored: Vec<ScoredPoint>, proposed: Option<&str>) -> SearchRecord {
        SearchRecord {
            round,
            served_hash: served.into(),
            searches: round,
            draws: 0,
            misses: 0,
            spent: 1.5,
            screened: scored.iter().filter_map(|p| p.hash.clone()).collect(),
            scored,
            proposed: proposed.map(String::from),
            global: Some(GlobalRecord {
                part: part.into(),
                trials: 0,
                since_best: 0,
                ended: if proposed.is_some() { "proposed" } else { "segment" }.into(),
                prune: vec![],
                credits: vec![],
                raced_out: None,
            }),
        }
    }

    #[test]
    fn rows_number_the_whole_journal_and_know_what_was_raced_out_and_proposed() {
        let served = json!({"retrieve": {"top_k": 5}});
        let docs = BTreeMap::from([("s".to_string(), served)]);
        let records = vec![
            record(
                1,
                "s",
                "P",
                vec![
                    point("s", 96, 0.6, "served", 5),
                    point("a", 24, 0.5, "trial", 10),
                    point("b", 96, 0.8, "trial", 5),
                ],
                None,
            ),
            record(1, "s", "P", vec![point("c", 48, 0.6, "trial", 7), point("d", 96, 0.7, "prune", 20)], Some("b")),
        ];
        let view = TrialsView::of(&records, &docs);
        type Seen<'a> = (usize, usize, &'a str, Option<TrialState>, bool, Option<usize>);
        let got: Vec<Seen> = view
            .trials
            .iter()
            .map(|t| (t.number, t.search, t.stage.as_str(), t.state, t.proposed, t.changed))
            .collect();
        let (done, out) = (Some(TrialState::Complete), Some(TrialState::RacedOut));
        assert_eq!(
            got,
            vec![
                (0, 1, "served", done, false, Some(0)),
                (1, 1, "trial", out, false, Some(1)),
                (2, 1, "trial", done, true, Some(0)),
                (3, 2, "trial", out, false, Some(1)),
                (4, 2, "prune", done, false, Some(1)),
            ],
            "b was proposed by search 2, which did not score it again: search 1's row is marked"
        );
        assert_eq!(view.searches[0].best, vec![2, 0]);
        assert_eq!((view.searches[0].trials, view.searches[0].served), (2, 1));
        assert_eq!(
            (view.searches[1].trials, view.searches[1].prune_tests, view.searches[1].raced_out),
            (1, 1, Some(1))
        );
        assert_eq!(view.fields(), vec!["retrieve.top_k".to_string()]);
        let mut accepted = CandidateRecord::new("r1c1", 1, 1, "s", "retrieve.top_k::increase");
        accepted.hash = Some("b".into());
        accepted.accepted_version = Some(2);
        let f = view.funnel(&[accepted]);
        assert_eq!((f.screened, f.raced_out, f.whole_part, f.prune_tests, f.proposed, f.confirmed), (3, 2, 1, 1, 1, 1));
        let mut one = view.clone();
        assert!(one.keep_search(2));
        assert_eq!(one.trials.iter().map(|t| t.number).collect::<Vec<_>>(), vec![3, 4]);
        assert!(!view.clone().keep_search(3));
    }

    #[test]
    fn a_score_is_shown_only_for_the_whole_search_part_and_an_estimate_is_labelled_as_one() {
        let served = json!({"retrieve": {"top_k": 5}});
        let docs = BTreeMap::from([("s".to_string(), served)]);
        let with_answers = |mut p: ScoredPoint, hex: &str| {
            p.correct = Some(hex.into());
            p
        };
        // 16 questions; a trial raced out after 8 with 2 of them right.
        let mut raced = with_answers(point("a", 8, 0.25, "trial", 10), "c0");
        let full = with_answers(point("s", 16, 0.5, "served", 5), "ff00");
        let mut new = record(1, "s", "P", vec![full.clone(), raced.clone()], None);
        new.global.as_mut().unwrap().raced_out = Some("rank".into());
        let view = TrialsView::of(&[new.clone()], &docs);
        let row = |v: &TrialsView, i: usize| {
            let t = &v.trials[i];
            (t.state, t.evaluated, t.correct, t.score, t.estimate)
        };
        assert_eq!(row(&view, 0), (Some(TrialState::Complete), Some(16), Some(8), Some(0.5), None));
        assert_eq!(row(&view, 1), (Some(TrialState::RacedOut), Some(8), Some(2), None, None), "rank: no estimate");
        raced.estimate = Some(0.31);
        new.scored[1] = raced.clone();
        new.global.as_mut().unwrap().raced_out = Some("deficit".into());
        assert_eq!(
            row(&TrialsView::of(&[new], &docs), 1),
            (Some(TrialState::RacedOut), Some(8), Some(2), None, Some(0.31))
        );
        // Before search.raced_out, a raced-out point's score was an estimate.
        let old = record(1, "s", "P", vec![full, with_answers(point("a", 8, 0.47, "trial", 10), "c0")], None);
        assert_eq!(
            row(&TrialsView::of(&[old], &docs), 1),
            (Some(TrialState::RacedOut), Some(8), Some(2), None, Some(0.47))
        );
    }

    #[test]
    fn the_front_keeps_what_nothing_beats_in_both_accuracy_and_tokens() {
        let at = |hash: &str, questions: usize, score: f64, tokens: f64| {
            let mut p = point(hash, questions, score, "trial", 5);
            p.tokens = Some(tokens);
            p
        };
        let records = vec![
            record(1, "s", "P", vec![at("a", 96, 0.8, 1000.0), at("b", 96, 0.8, 500.0), at("c", 96, 0.6, 200.0)], None),
            // d is beaten by b; e was raced out (cheap, but not scored on the whole part);
            // c scored again later, worse: its latest row counts, and b beats it now.
            record(2, "s", "P", vec![at("d", 96, 0.7, 600.0), at("e", 24, 0.9, 100.0), at("c", 96, 0.5, 600.0)], None),
        ];
        let mut view = TrialsView::of(&records, &BTreeMap::new());
        let front: Vec<&str> = view.front().iter().map(|t| t.hash.as_deref().unwrap()).collect();
        assert_eq!(front, ["b"]);
        let records = vec![record(1, "s", "P", vec![at("a", 96, 0.8, 1000.0), at("c", 96, 0.6, 200.0)], None)];
        view = TrialsView::of(&records, &BTreeMap::new());
        view.keep_front();
        let kept: Vec<(&str, f64)> =
            view.trials.iter().map(|t| (t.hash.as_deref().unwrap(), t.tokens.unwrap())).collect();
        assert_eq!(kept, [("c", 200.0), ("a", 1000.0)]);
    }

    #[test]
    fn step_search_points_have_derived_hashes_and_unknown_completeness() {
        let served = json!({"retrieve": {"top_k": 5}, "answer": {"prompt": "p"}});
        let values = BTreeMap::from([("retrieve.top_k".to_string(), json!(8))]);
        let doc = emend_core::search::materialize(&served, &values);
        let hash = artifact::content_hash(&doc);
        let old = SearchRecord {
            round: 2,
            served_hash: "s".into(),
            searches: 1,
            draws: 3,
            misses: 0,
            spent: 0.4,
            screened: vec![hash.clone()],
            scored: vec![ScoredPoint::new(values.clone(), 0.7), ScoredPoint::new(BTreeMap::new(), 0.6)],
            proposed: Some(hash.clone()),
            global: None,
        };
        let view = TrialsView::of(std::slice::from_ref(&old), &BTreeMap::from([("s".to_string(), served)]));
        assert_eq!(view.trials[0].hash.as_deref(), Some(hash.as_str()));
        assert!(view.trials[0].proposed);
        assert_eq!((view.trials[0].stage.as_str(), view.trials[0].state), ("step", None));
        assert_eq!(
            (view.trials[0].score, view.trials[0].estimate),
            (None, Some(0.7)),
            "a step point's score is an estimate"
        );
        assert_eq!(view.trials[1].hash, None, "the served strategy itself was not screened");
        assert_eq!(view.searches[0].ended, "proposed");
        assert_eq!(view.searches[0].raced_out, None);
        let f = view.funnel(&[]);
        assert_eq!((f.screened, f.unrecorded, f.raced_out, f.whole_part), (2, 2, 0, 0));
        // Without the served document: no derived hash, no count of changed fields.
        let bare = TrialsView::of(&[old], &BTreeMap::new());
        assert_eq!((bare.trials[0].hash.as_deref(), bare.trials[0].changed), (None, None));
    }
}
