//! The global search proposer (`search.method: jump`, the default): one
//! confirmed jump per served change.
//!
//! - **Search the whole legal space.** A TPE sampler ([`emend_core::search::Tpe`],
//!   Optuna's defaults, optionally multivariate) draws strategies over every
//!   evolvable, non-text field within its schema range and the
//!   `x-invariants` (repaired), on the `x-step` grid through the served
//!   value. Its history is every strategy the journal's searches scored on
//!   the same search part under the same harness, across runs: a scheduled
//!   run goes on where the last one stopped. Layer A sets the prior of the
//!   random start: fields the diagnosis implicates are drawn over their
//!   whole range, the others stay at their served value half of the time.
//!   A field that is inert under the rest of a drawn strategy
//!   (`x-inert-when`) goes back to its served value.
//! - **Race.** Every trial is scored question by question on the search part
//!   in one seeded order, against the incumbent (the best strategy scored
//!   on the whole search part that may still be proposed, or the served
//!   one), at looks of `first_look` questions then doubling; it is dropped
//!   at a look once the one-sided exact test says, at `race_level`, that it
//!   is worse ([`emend_stats::race_drops`]). Only the questions evaluated
//!   count toward `--max-evals`.
//! - **Where the best agree.** Before pruning, the consensus of the
//!   `consensus` best strategies scored on the whole search part (per field
//!   their median or commonest value) is raced against the best one and
//!   replaces it when it is not significantly worse and still worth a test.
//! - **Prune the diff.** Before the best is proposed, each changed field
//!   whose reversion to the served value costs at most `prune_tolerance`
//!   questions of the search part (and, with the reversions before it, at
//!   most twice that against the unpruned winner) goes back: first in
//!   groups (the fields the sampler's model least ties to good scores
//!   first), halving a group that costs more, down to single fields. Each field kept is
//!   credited with its marginal contribution: the search-part accuracy lost
//!   when that field alone is reverted.
//! - **Confirm once.** The pruned winner is proposed only when it keeps every
//!   category of the search part within the confirm test's floor and its own
//!   improved and regressed questions there would already pass the exact
//!   test at the next confirm alpha (a gain the confirm test cannot see would
//!   spend alpha on a test it cannot pass). It is proposed once `stall`
//!   trials in a row found nothing better, or when what is left of
//!   `--max-evals` pays only for its pruning.
//! - **Under a price** (`cost.per_1k_tokens`), every comparison above is of
//!   utility: accuracy less the price of the mean context tokens; racing and
//!   "worth a test" count a token difference as the answers it is worth.
//! - **Cheaper first** (`cost.noninferiority_margin`). Each segment starts
//!   with the cheaper step: the most accurate strategy scored on the whole
//!   search part that reads at least `cost.min_saving` fewer tokens than the
//!   served one is pruned toward it (a reversion must keep the saving) and
//!   proposed as a `cheaper` change when the exact non-inferiority test
//!   already passes on the search part at the next confirm alpha.
//! - **Stop by a stated rule.** `converge` trials in a row with nothing
//!   better than the served strategy worth a test: the search has converged
//!   ([`StopCause::Converged`]). What is left of `--max-evals` cannot pay for
//!   a trial: [`StopCause::Budget`].
//!
//! Each segment of at most `stall` trials is journaled (a `searched` event
//! with every trial's values, questions evaluated, answers and score), so a
//! resumed run or a later `emend evolve` rebuilds the same state.

mod prune;
mod race;

use std::collections::{BTreeMap, BTreeSet};

use rand::SeedableRng;
use rand::rngs::ChaCha8Rng;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::propose::{Ask, Proposed, Proposer, StopCause};
use emend_core::artifact;
use emend_core::config::{RacedOut, Sampler};
use emend_core::events::{
    CandidateRecord, ChangeKind, Credit, Event, GlobalRecord, LabeledOutcome, PruneStep, ScoredPoint, SearchRecord,
    bits_to_hex, hex_to_bits,
};
use emend_core::hypothesis::{self, Hypothesis};
use emend_core::planner::{Change, Plan};
use emend_core::records::question_results;
use emend_core::schema::{FieldKind, StrategySchema, get_path, set_path};
use emend_core::search::{self, Space, Tpe, TpeConfig};
use emend_core::search::{materialize, point_of};
use emend_core::steps::{changes_between, snap, step_box};
use emend_stats::{self, TaskKey};

/// A strategy's evolvable, non-text values by path.
type Point = BTreeMap<String, Value>;

/// How the global search looks (`search:` in emend.yaml).
#[derive(Debug, Clone, PartialEq)]
pub struct JumpSettings {
    pub seed: u64,
    pub race_level: f64,
    pub first_look: usize,
    pub prune_tolerance: usize,
    pub stall: usize,
    pub converge: usize,
    pub startup: usize,
    pub multivariate: bool,
    /// How many of the best strategies the consensus is taken over (0: none).
    pub consensus: usize,
    /// What the sampler learns from a raced-out trial (`search.raced_out`).
    pub raced_out: RacedOut,
    /// The model trials are drawn from (`search.sampler`).
    pub sampler: Sampler,
    /// `gates.category_drop_max`: a proposed candidate keeps every category of the search part within the floor.
    pub category_drop_max: f64,
    /// `cost.max_tokens`: no strategy above it (or not reporting its tokens) is the incumbent or proposed.
    pub max_tokens: Option<f64>,
    /// The price of a context token in accuracy units
    /// (`cost.per_1k_tokens / 100 / 1000`): the search ranks by
    /// accuracy less price times mean context tokens. None: accuracy alone.
    pub price: Option<f64>,
    /// `cost.noninferiority_margin`: the cheaper step's margin (None: no cheaper step).
    pub margin: Option<f64>,
    /// `cost.min_saving`: the relative saving of tokens a cheaper strategy shows.
    pub min_saving: f64,
}

impl JumpSettings {
    pub fn from_config(cfg: &emend_core::config::ProjectConfig) -> JumpSettings {
        let s = &cfg.search;
        JumpSettings {
            seed: cfg.loop_.seed,
            race_level: s.race_level,
            first_look: s.first_look,
            prune_tolerance: s.prune_tolerance,
            stall: s.stall,
            converge: s.converge,
            startup: s.startup,
            multivariate: s.multivariate,
            consensus: s.consensus,
            raced_out: s.raced_out,
            sampler: s.sampler,
            category_drop_max: cfg.gates.category_drop_max,
            max_tokens: cfg.cost.max_tokens.map(f64::from),
            price: cfg.cost.price_per_token(),
            margin: cfg.cost.noninferiority_margin,
            min_saving: cfg.cost.min_saving,
        }
    }
}

/// A strategy the search scored: its answers on a prefix of the racing order.
#[derive(Debug, Clone, PartialEq)]
struct Scored {
    hash: String,
    values: Point,
    correct: Vec<bool>,
    tokens: Option<f64>,
    /// Its accuracy on the questions it was evaluated on (`correct`): a
    /// measurement, the whole search part's accuracy for a complete trial.
    score: f64,
    /// For a raced-out trial under `search.raced_out: deficit | shrunk`, the
    /// estimate the sampler learns from instead (see [`Scored::learnt`]).
    estimate: Option<f64>,
    stage: &'static str,
    /// When this segment started evaluating it, and for how long (journaled only).
    started: Option<String>,
    duration_ms: Option<u64>,
}

impl Scored {
    fn hits(&self, k: usize) -> i64 {
        self.correct[..k].iter().filter(|c| **c).count() as i64
    }

    /// On the first `k` questions: those it answers and `other` does not,
    /// and the other way round.
    fn discordant(&self, other: &Scored, k: usize) -> (u64, u64) {
        let pairs = self.correct[..k].iter().zip(&other.correct[..k]);
        pairs.fold((0, 0), |(i, r), (a, b)| (i + u64::from(*a && !*b), r + u64::from(!*a && *b)))
    }

    /// What the sampler learns from it on a search part of `n` questions:
    /// a complete trial's score; a raced-out trial's estimate when it has
    /// one, else its accuracy on the questions it got through, ranked as
    /// Optuna ranks a pruned trial (below every complete one).
    /// Under a price, its utility (accuracy less the price of its mean context tokens).
    fn learnt(&self, n: usize, price: Option<f64>) -> (f64, Option<usize>) {
        let charge = self.charge(price);
        match self.estimate {
            Some(e) => (e - charge, None),
            None if self.correct.len() < n => (self.score - charge, Some(self.correct.len())),
            None => (self.score - charge, None),
        }
    }

    /// What its mean context tokens cost in accuracy at `price` a token (0 without a price).
    fn charge(&self, price: Option<f64>) -> f64 {
        match (price, self.tokens) {
            (Some(p), Some(t)) => p * t,
            _ => 0.0,
        }
    }

    /// What the search ranks it by: its accuracy, less the price of its
    /// context under a price (`cost.per_1k_tokens`).
    fn value(&self, price: Option<f64>) -> f64 {
        self.score - self.charge(price)
    }

    /// Its correct answers among the first `k` questions, less the price of
    /// its context there: what it is worth in answers.
    fn worth(&self, k: usize, price: Option<f64>) -> f64 {
        self.hits(k) as f64 - k as f64 * self.charge(price)
    }

    fn point(&self) -> ScoredPoint {
        ScoredPoint {
            values: self.values.clone(),
            score: self.score,
            estimate: self.estimate,
            hash: Some(self.hash.clone()),
            questions: Some(self.correct.len()),
            correct: Some(bits_to_hex(&self.correct)),
            stage: Some(self.stage.to_string()),
            tokens: self.tokens,
            started: self.started.clone(),
            duration_ms: self.duration_ms,
        }
    }
}

/// Why a segment of the search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    Proposed,
    /// The cheaper step proposed a strategy.
    Cheaper,
    Segment,
    Budget,
    Converged,
    Nothing,
}

impl Ended {
    fn as_str(self) -> &'static str {
        match self {
            Ended::Proposed => "proposed",
            Ended::Cheaper => "cheaper",
            Ended::Segment => "segment",
            Ended::Budget => "budget",
            Ended::Converged => "converged",
            Ended::Nothing => "nothing",
        }
    }
}

/// The global search's state within one `evolve` run.
pub struct JumpProposer {
    settings: JumpSettings,
    /// Points journaled by earlier segments: (search part, journaled before
    /// `search.raced_out` existed, point).
    restored: Vec<(String, bool, ScoredPoint)>,
    /// The search part's hash (see [`GlobalRecord::part`]) and its racing order.
    part: String,
    /// The part and the served strategy of the last search (its counters are for them).
    last_part: String,
    last_served: String,
    order: Vec<String>,
    scored: Vec<Scored>,
    by_hash: BTreeMap<String, usize>,
    /// This run's per-question results, by strategy hash and question id.
    results: BTreeMap<String, BTreeMap<String, LabeledOutcome>>,
    draws: u64,
    trials: u64,
    since_best: u64,
    searches: u64,
    spent: f64,
    record: Option<SearchRecord>,
    asked: bool,
    cause: Option<StopCause>,
    /// The strategies this run's cheaper steps started from.
    cheaper_tried: BTreeSet<String>,
}

impl JumpProposer {
    pub fn new(settings: JumpSettings) -> JumpProposer {
        JumpProposer {
            settings,
            restored: Vec::new(),
            part: String::new(),
            last_part: String::new(),
            last_served: String::new(),
            order: Vec::new(),
            scored: Vec::new(),
            by_hash: BTreeMap::new(),
            results: BTreeMap::new(),
            draws: 0,
            trials: 0,
            since_best: 0,
            searches: 0,
            spent: 0.0,
            record: None,
            asked: false,
            cause: None,
            cheaper_tried: BTreeSet::new(),
        }
    }
}

/// The racing order of the search part (seeded, spread over conversations)
/// and the hash that identifies it with the harness.
fn racing_order(results: &[LabeledOutcome], seed: u64, harness_hash: &str) -> (Vec<String>, String) {
    let keys: Vec<TaskKey> = results
        .iter()
        .map(|r| TaskKey::new(r.id.clone(), r.conversation.clone().unwrap_or_default(), r.category.clone()))
        .collect();
    let order = search::nested_order(&keys, seed ^ 0x6A09_E667_F3BC_C908);
    let mut h = Sha256::new();
    h.update(harness_hash.as_bytes());
    for id in &order {
        h.update(b"\n");
        h.update(id.as_bytes());
    }
    (order, hex::encode(h.finalize()))
}

fn same(a: &Value, b: &Value) -> bool {
    a == b || (a.is_number() && a.as_f64() == b.as_f64())
}

/// Evolvable, non-text fields whose value differs between `from` and `to`, by path.
fn changed_paths(schema: &StrategySchema, from: &Value, to: &Value) -> Vec<String> {
    schema
        .evolvable()
        .filter(|f| f.kind != FieldKind::Text)
        .filter(|f| match (get_path(from, &f.path), get_path(to, &f.path)) {
            (Some(a), Some(b)) => !same(a, b),
            _ => false,
        })
        .map(|f| f.path.clone())
        .collect()
}

/// Every evolvable field a sampler can draw and the backend can run, over
/// its whole range (options a missing model needs are left out).
fn whole_space(ask: &Ask<'_>) -> Option<Space> {
    let runnable: Vec<&str> = ask
        .schema
        .evolvable()
        .filter(|f| f.kind != FieldKind::Text && f.needs_role.as_ref().is_none_or(|r| ask.roles.contains(r)))
        .map(|f| f.path.as_str())
        .collect();
    let whole = Space::from_schema(ask.schema, &ask.served.value, Some(&runnable)).ok()?;
    let space = step_box(ask.schema, whole, &ask.served.value, ask.roles, false);
    (!space.params.is_empty()).then_some(space)
}

/// The fields the round's plans implicate (Layer A and the UCB1 tree), best first.
fn implicated(plans: &[Plan]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in plans {
        if !out.contains(&p.path) {
            out.push(p.path.clone());
        }
    }
    out
}

impl JumpProposer {
    /// The whole-search-part results of the strategy scored at `i`, in the
    /// served results' order; evaluated afresh when this run has none (a
    /// strategy restored from an earlier run's journal).
    fn full_results(&mut self, ask: &Ask<'_>, i: usize) -> Result<Vec<LabeledOutcome>, String> {
        let hash = self.scored[i].hash.clone();
        let doc = materialize(&ask.served.value, &self.scored[i].values);
        let order = self.order.clone();
        self.evaluate(ask, &doc, &hash, &order)?;
        let known = &self.results[&hash];
        Ok(ask.results.iter().map(|r| known[&r.id].clone()).collect())
    }

    /// Within `cost.max_tokens` on the questions it was scored on (always, without a budget).
    fn affordable(&self, s: &Scored) -> bool {
        self.violation(s) == 0.0
    }

    /// Mean context tokens above `cost.max_tokens` on the questions it was
    /// scored on (0 within it or without a budget; infinite when not reported).
    fn violation(&self, s: &Scored) -> f64 {
        match (self.settings.max_tokens, s.tokens) {
            (None, _) => 0.0,
            (Some(cap), Some(t)) if t <= cap + 1e-9 => 0.0,
            (Some(cap), Some(t)) => t - cap,
            (Some(_), None) => f64::INFINITY,
        }
    }

    /// True when the strategy scored at `i` is on the whole search part,
    /// within the token budget, keeps every category there within the confirm test's floor, and its
    /// gain over the served strategy would pass the exact test at the next
    /// confirm alpha. Read from the journaled answers alone, so that a
    /// resumed run decides as an uninterrupted one.
    fn worth_a_test(&self, ask: &Ask<'_>, i: usize) -> bool {
        let served = &self.scored[self.by_hash[&artifact::content_hash(&ask.served.value)]];
        let cand = &self.scored[i];
        if cand.hash == served.hash || cand.correct.len() != self.order.len() || !self.affordable(cand) {
            return false;
        }
        let (improved, regressed) = cand.discordant(served, self.order.len());
        let price = self.settings.price;
        let (improved, regressed) =
            priced(improved, regressed, served.charge(price), cand.charge(price), self.order.len());
        self.keeps_categories(ask, served, cand) && emend_stats::better_p_value(improved, regressed) <= ask.next_alpha
    }

    /// True when `cand` keeps every category of the search part within the
    /// confirm test's floor against `served`.
    fn keeps_categories(&self, ask: &Ask<'_>, served: &Scored, cand: &Scored) -> bool {
        let category: BTreeMap<&str, &str> = ask.results.iter().map(|r| (r.id.as_str(), r.category.as_str())).collect();
        let mut per: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
        for ((id, &a), &b) in self.order.iter().zip(&served.correct).zip(&cand.correct) {
            let e = per.entry(category[id.as_str()]).or_default();
            e.0 += 1;
            e.1 += usize::from(a);
            e.2 += usize::from(b);
        }
        per.values().all(|&(n, a, b)| emend_stats::keeps_category(a, b, n, self.settings.category_drop_max))
    }
}

/// The discordant counts of a candidate against a base on `k` questions,
/// with the difference of their charges (accuracy a question their context
/// costs at the price; 0 without one) counted in answers: a saving worth `w`
/// answers adds `floor(w)` improved questions, an extra cost `floor(w)`
/// regressed ones.
fn priced(improved: u64, regressed: u64, base_charge: f64, cand_charge: f64, k: usize) -> (u64, u64) {
    let worth = k as f64 * (base_charge - cand_charge);
    let whole = worth.abs().floor() as u64;
    if worth >= 0.0 { (improved + whole, regressed) } else { (improved, regressed + whole) }
}

/// The changes from `served` to `doc`, in the order of `credits` (largest
/// contribution first), then any other changed field by path.
fn ordered_changes(ask: &Ask<'_>, doc: &Value, credits: &[Credit]) -> Vec<Change> {
    let space = Space::from_schema(ask.schema, &ask.served.value, None).unwrap_or(Space { params: Vec::new() });
    let mut changes = changes_between(&space, ask.schema, &ask.served.value, doc, "");
    changes.sort_by_key(|c| credits.iter().position(|k| k.path == c.path).unwrap_or(usize::MAX));
    changes
}

/// Per field, the median number (the lower of two middles) or the commonest
/// option (ties to the better-ranked) of `elite`, best first.
fn centre(elite: &[&Point]) -> Point {
    let mut out = Point::new();
    for path in elite[0].keys() {
        let values: Vec<&Value> = elite.iter().filter_map(|p| p.get(path)).collect();
        let value = if values.iter().all(|v| v.is_number()) {
            let mut xs = values.clone();
            xs.sort_by(|a, b| a.as_f64().unwrap_or(0.0).total_cmp(&b.as_f64().unwrap_or(0.0)));
            xs[(xs.len() - 1) / 2].clone()
        } else {
            let count = |v: &Value| values.iter().filter(|w| **w == v).count();
            (*values
                .iter()
                .max_by_key(|v| (count(v), std::cmp::Reverse(values.iter().position(|w| w == *v))))
                .expect("an elite is not empty"))
            .clone()
        };
        out.insert(path.clone(), value);
    }
    out
}

impl JumpProposer {
    /// The consensus of the `consensus` best strategies scored on the whole
    /// search part (per field their median or commonest value), raced
    /// against the incumbent `best`: it replaces the incumbent when it is not
    /// significantly worse there and still worth a confirm test. The argmax
    /// of many noisy scores overstates its own gain; where the best agree
    /// is less tied to the noise of the questions they were chosen on.
    fn consensus(&mut self, ask: &Ask<'_>, best: usize) -> Result<usize, String> {
        let q = self.settings.consensus;
        let served = &ask.served.value;
        let served_hash = artifact::content_hash(served);
        let n = self.order.len();
        let mut elite: Vec<usize> = (0..self.scored.len())
            .filter(|&i| {
                let s = &self.scored[i];
                s.correct.len() == n
                    && s.hash != served_hash
                    && !ask.seen.contains(&s.hash)
                    && artifact::content_hash(&materialize(served, &s.values)) == s.hash
            })
            .collect();
        let price = self.settings.price;
        elite.sort_by(|&a, &b| self.scored[b].value(price).total_cmp(&self.scored[a].value(price)).then(a.cmp(&b)));
        elite.truncate(q);
        if q < 2 || elite.len() < q {
            return Ok(best);
        }
        let points: Vec<&Point> = elite.iter().map(|&i| &self.scored[i].values).collect();
        let mut doc = materialize(served, &centre(&points));
        if search::repair(ask.schema, &mut doc).is_err() {
            return Ok(best);
        }
        search::reset_inert(ask.schema, served, &mut doc, ask.harness);
        let hash = artifact::content_hash(&doc);
        if !ask.schema.check(&doc).is_empty() || ask.seen.contains(&hash) || hash == self.scored[best].hash {
            return Ok(best);
        }
        let i = self.race(ask, &doc, best, "consensus")?;
        if self.scored[i].correct.len() < n {
            return Ok(best);
        }
        Ok(if self.worth_a_test(ask, i) { i } else { best })
    }

    /// Prunes the incumbent and proposes it when the pruned strategy (or,
    /// failing that, the unpruned one) is still worth a confirm test.
    fn propose(&mut self, ask: &Ask<'_>, best: usize) -> Result<Option<Proposed>, String> {
        self.since_best = 0;
        let best = self.consensus(ask, best)?;
        let pruned = self.prune(ask, best, None)?;
        let mut chosen = (pruned.doc.clone(), pruned.index, pruned.credits.clone());
        if !self.worth_a_test(ask, pruned.index) {
            let doc = materialize(&ask.served.value, &self.scored[best].values);
            chosen = (doc, best, Vec::new());
        }
        let results = self.full_results(ask, chosen.1)?;
        let changes = ordered_changes(ask, &chosen.0, &chosen.2);
        if let Some(g) = self.record.as_mut().and_then(|r| r.global.as_mut()) {
            g.prune = pruned.steps;
            g.credits = chosen.2.clone();
        }
        if changes.is_empty() {
            return Ok(None);
        }
        Ok(Some(Proposed::Candidate {
            value: chosen.0,
            changes,
            data: None,
            known: Some(results),
            credits: chosen.2,
            kind: ChangeKind::Better,
        }))
    }

    /// The cheaper step's start (`cost.noninferiority_margin`): among the
    /// strategies scored on the whole search part that may still be proposed,
    /// are within the budget and were not tried by an earlier cheaper step,
    /// those reading at most `1 - min_saving` of the served strategy's tokens
    /// there; of them the most accurate (then the cheapest), with the token
    /// limit. Pruning it toward the served strategy then wins accuracy back
    /// within the limit. None when there is none.
    fn cheaper_start(&self, ask: &Ask<'_>) -> Option<(usize, f64)> {
        self.settings.margin?;
        let served_hash = artifact::content_hash(&ask.served.value);
        let served = &self.scored[*self.by_hash.get(&served_hash)?];
        let limit = served.tokens? * (1.0 - self.settings.min_saving);
        let n = self.order.len();
        let pool = (0..self.scored.len()).filter(|&i| {
            let s = &self.scored[i];
            s.correct.len() == n
                && s.hash != served_hash
                && !ask.seen.contains(&s.hash)
                && self.affordable(s)
                && s.tokens.is_some_and(|t| t <= limit)
                && !self.cheaper_tried.contains(&s.hash)
                && artifact::content_hash(&materialize(&ask.served.value, &s.values)) == s.hash
        });
        let key = |i: usize| (self.scored[i].score, -self.scored[i].tokens.unwrap_or(f64::INFINITY));
        let best = pool.max_by(|&a, &b| {
            let (x, y) = (key(a), key(b));
            x.0.total_cmp(&y.0).then(x.1.total_cmp(&y.1)).then(b.cmp(&a))
        })?;
        Some((best, limit))
    }

    /// True when the strategy scored at `i` is worth a cheaper step's
    /// confirm test: on the whole search part, it keeps every category
    /// within the confirm test's floor and the exact test already shows its
    /// non-inferiority at the margin there at the next confirm alpha (a
    /// saving the confirm test cannot show would spend alpha on a test it
    /// cannot pass).
    fn worth_a_cheaper_test(&self, ask: &Ask<'_>, i: usize) -> bool {
        let Some(margin) = self.settings.margin else { return false };
        let served = &self.scored[self.by_hash[&artifact::content_hash(&ask.served.value)]];
        let (cand, n) = (&self.scored[i], self.order.len());
        if cand.hash == served.hash || cand.correct.len() != n {
            return false;
        }
        let (improved, regressed) = cand.discordant(served, n);
        self.keeps_categories(ask, served, cand)
            && emend_stats::noninferiority_test(improved, regressed, n as u64, margin, ask.next_alpha).noninferior
    }

    /// The cheaper step: prunes its start toward the served strategy (a
    /// reversion must keep the saving: within the token limit) and proposes
    /// the pruned strategy, or failing that the unpruned one, when it is
    /// worth a cheaper test. A start is tried once.
    fn propose_cheaper(&mut self, ask: &Ask<'_>, start: usize, limit: f64) -> Result<Option<Proposed>, String> {
        self.cheaper_tried.insert(self.scored[start].hash.clone());
        let pruned = self.prune(ask, start, Some(limit))?;
        if let Some(g) = self.record.as_mut().and_then(|r| r.global.as_mut()) {
            g.prune = pruned.steps.clone();
        }
        let i = if self.worth_a_cheaper_test(ask, pruned.index) {
            pruned.index
        } else if self.worth_a_cheaper_test(ask, start) {
            start
        } else {
            return Ok(None);
        };
        let doc = materialize(&ask.served.value, &self.scored[i].values);
        let results = self.full_results(ask, i)?;
        let changes = ordered_changes(ask, &doc, &[]);
        if changes.is_empty() {
            return Ok(None);
        }
        Ok(Some(Proposed::Candidate {
            value: doc,
            changes,
            data: None,
            known: Some(results),
            credits: Vec::new(),
            kind: ChangeKind::Cheaper,
        }))
    }

    /// One segment of the search: trials until the incumbent is worth
    /// proposing, the segment is full, the budget is spent or the search converged.
    fn segment(&mut self, ask: &Ask<'_>) -> Result<(Ended, Option<Proposed>), String> {
        // Per-question results live for one segment, as a resumed run would
        // have them: a strategy from an earlier segment is evaluated again
        // (and paid for) when its details are needed.
        self.results.clear();
        self.setup(ask);
        let Some(space) = whole_space(ask) else { return Ok((Ended::Nothing, None)) };
        let served = &self.scored[self.by_hash[&artifact::content_hash(&ask.served.value)]];
        if self.settings.price.is_some() && served.tokens.is_none() {
            return Err("cost.per_1k_tokens: the served strategy's outcomes report no context_tokens, so the price \
                        cannot be charged (report context_tokens, or remove the price)"
                .into());
        }
        if let Some((start, limit)) = self.cheaper_start(ask)
            && let Some(p) = self.propose_cheaper(ask, start, limit)?
        {
            return Ok((Ended::Cheaper, Some(p)));
        }
        let focus = implicated(ask.plans);
        let full = self.cost(ask, self.order.len());
        for _ in 0..self.settings.stall {
            let best = self.incumbent(ask);
            let worth = self.worth_a_test(ask, best);
            let changed = changed_paths(
                ask.schema,
                &ask.served.value,
                &materialize(&ask.served.value, &self.scored[best].values),
            );
            // Pruning tests every changed field at most once or twice: keep room for it.
            let reserve = full * (2.0 + 0.6 * changed.len() as f64);
            let left = self.left(ask);
            tracing::debug!(trials = self.trials, since_best = self.since_best, worth, left, reserve, "search");
            if worth && (self.since_best >= self.settings.stall as u64 || left < full + reserve) {
                return Ok((Ended::Proposed, self.propose(ask, best)?));
            }
            if !worth && self.since_best >= self.settings.converge as u64 {
                return Ok((Ended::Converged, None));
            }
            if left < full {
                return Ok((Ended::Budget, None));
            }
            let Some(doc) = self.draw(ask, &space, &focus) else { return Ok((Ended::Converged, None)) };
            let i = self.race(ask, &doc, best, "trial")?;
            self.trials += 1;
            let new_best = self.incumbent(ask);
            if new_best == i && new_best != best {
                self.since_best = 0;
            } else {
                self.since_best += 1;
            }
            // The segment that reaches the rule names it (a later one would evaluate nothing).
            let best = self.incumbent(ask);
            if self.since_best >= self.settings.converge as u64 && !self.worth_a_test(ask, best) {
                return Ok((Ended::Converged, None));
            }
        }
        Ok((Ended::Segment, None))
    }
}

impl Proposer for JumpProposer {
    fn ask(&mut self, ask: &Ask<'_>, _plan: &Plan, _node: &Hypothesis) -> Option<Proposed> {
        if self.asked || self.cause.is_some() {
            return None;
        }
        self.asked = true;
        self.searches += 1;
        self.record = Some(SearchRecord {
            round: ask.round,
            served_hash: artifact::content_hash(&ask.served.value),
            searches: self.searches,
            draws: 0,
            misses: 0,
            spent: 0.0,
            screened: Vec::new(),
            scored: Vec::new(),
            proposed: None,
            global: Some(GlobalRecord {
                part: String::new(),
                trials: 0,
                since_best: 0,
                ended: String::new(),
                prune: Vec::new(),
                credits: Vec::new(),
                raced_out: Some(self.settings.raced_out.as_str().to_string()),
            }),
        });
        let (ended, out) = match self.segment(ask) {
            Ok(r) => r,
            Err(reason) => (Ended::Nothing, Some(Proposed::Failed { reason })),
        };
        match ended {
            Ended::Converged => self.cause = Some(StopCause::Converged),
            Ended::Budget => self.cause = Some(StopCause::Budget),
            _ => {}
        }
        let ended =
            if matches!(ended, Ended::Proposed | Ended::Cheaper) && out.is_none() { Ended::Nothing } else { ended };
        // A segment that evaluated nothing and proposes nothing has nothing to journal.
        if out.is_none() && self.record.as_ref().is_some_and(|r| r.scored.is_empty() && r.screened.is_empty()) {
            self.record = None;
            return None;
        }
        if let Some(r) = &mut self.record {
            r.draws = self.draws;
            r.proposed = match &out {
                Some(Proposed::Candidate { value, .. }) => Some(artifact::content_hash(value)),
                _ => None,
            };
            let g = r.global.as_mut().expect("set above");
            g.part = self.part.clone();
            g.trials = self.trials;
            g.since_best = self.since_best;
            g.ended = ended.as_str().to_string();
        }
        out
    }

    fn journal(&mut self) -> Vec<Event> {
        self.record.take().map(|r| Event::Searched(Box::new(r))).into_iter().collect()
    }

    /// Every point the journal's global searches scored (read once the
    /// search part is known), and their counters.
    fn restore(&mut self, searches: &[SearchRecord], _candidates: &[CandidateRecord]) {
        for r in searches {
            let Some(g) = &r.global else { continue };
            self.restored.extend(r.scored.iter().map(|p| (g.part.clone(), g.raced_out.is_none(), p.clone())));
            self.draws = r.draws;
            self.searches = r.searches;
            self.trials = g.trials;
            self.since_best = g.since_best;
            self.last_part = g.part.clone();
            self.last_served = r.served_hash.clone();
        }
    }

    fn spent(&mut self) -> f64 {
        std::mem::take(&mut self.spent)
    }

    fn start_round(&mut self) {
        self.asked = false;
    }

    fn stop_cause(&self) -> Option<StopCause> {
        self.cause
    }
}

/// The set of fields a version changes from its parent (for tests of credit).
pub fn changed_fields(schema: &StrategySchema, from: &Value, to: &Value) -> BTreeSet<String> {
    changed_paths(schema, from, to).into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use emend_core::schema::Direction;
    use serde_json::json;

    #[test]
    fn a_change_names_its_direction() {
        assert_eq!(Direction::of_move(&json!(5), &json!(40)), Direction::Increase);
        assert_eq!(Direction::of_move(&json!(0.9), &json!(0.5)), Direction::Decrease);
        assert_eq!(Direction::of_move(&json!("rrf"), &json!("weighted_sum")), Direction::Toggle);
        assert_eq!(Direction::of_move(&json!(false), &json!(true)), Direction::Toggle);
    }

    #[test]
    fn the_racing_order_and_its_hash_depend_on_the_part_and_the_harness() {
        let q = |id: &str, conv: &str| LabeledOutcome {
            id: id.into(),
            category: "1".into(),
            conversation: Some(conv.into()),
            correct: true,
            label: None,
            tokens: None,
            split: None,
        };
        let part = vec![q("a", "c1"), q("b", "c1"), q("c", "c2"), q("d", "c2")];
        let (order, hash) = racing_order(&part, 0, "h1");
        assert_eq!(order.len(), 4);
        assert_eq!(racing_order(&part, 0, "h1"), (order.clone(), hash.clone()), "seeded");
        assert_ne!(racing_order(&part, 0, "h2").1, hash, "another harness is another part");
        assert_ne!(racing_order(&part[..3], 0, "h1").1, hash);
    }
}
