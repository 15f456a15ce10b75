//! The global search proposer (`gates.step_bound: off`, the default): one
//! confirmed jump per served change.
//!
//! - **Search the whole legal space.** A TPE sampler ([`emend_model::search::Tpe`],
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
//!   is worse ([`emend_model::stats::race_drops`]). Only the questions evaluated
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
//! - **Stop by a stated rule.** `converge` trials in a row with nothing
//!   better than the served strategy worth a test: the search has converged
//!   ([`StopCause::Converged`]). What is left of `--max-evals` cannot pay for
//!   a trial: [`StopCause::Budget`].
//!
//! Each segment of at most `stall` trials is journaled (a `searched` event
//! with every trial's values, questions evaluated, answers and score), so a
//! resumed run or a later `emend evolve` rebuilds the same state.

use std::collections::{BTreeMap, BTreeSet};

use rand::SeedableRng;
use rand::rngs::ChaCha8Rng;
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::propose::{Ask, Proposed, Proposer, StopCause};
use crate::searcher::{changes_between, snap, step_box};
use emend_model::artifact;
use emend_model::events::{
    CandidateRecord, Credit, Event, GlobalRecord, PruneStep, QuestionResult, ScoredPoint, SearchRecord, bits_to_hex,
    hex_to_bits,
};
use emend_model::hypothesis::{self, Hypothesis};
use emend_model::planner::{Change, Plan};
use emend_model::records::question_results;
use emend_model::schema::{Direction, FieldKind, StrategySchema, get_path, set_path};
use emend_model::search::{self, Space, Tpe, TpeConfig};
use emend_model::search::{materialize, point_of};
use emend_model::stats::{self, TaskKey};

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
    /// `gates.epsilon_c`: a proposed candidate keeps every category of the search part within the floor.
    pub epsilon_c: f64,
}

impl JumpSettings {
    pub fn from_config(cfg: &emend_model::config::ProjectConfig) -> JumpSettings {
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
            epsilon_c: cfg.gates.epsilon_c,
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
    /// Its search-part accuracy; for a raced-out trial the incumbent's plus
    /// the paired difference on the questions it was evaluated on.
    score: f64,
    stage: &'static str,
}

impl Scored {
    fn hits(&self, k: usize) -> i64 {
        self.correct[..k].iter().filter(|c| **c).count() as i64
    }

    fn point(&self) -> ScoredPoint {
        ScoredPoint {
            values: self.values.clone(),
            score: self.score,
            hash: Some(self.hash.clone()),
            questions: Some(self.correct.len()),
            correct: Some(bits_to_hex(&self.correct)),
            stage: Some(self.stage.to_string()),
            tokens: self.tokens,
        }
    }
}

/// Why a segment of the search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ended {
    Proposed,
    Segment,
    Budget,
    Converged,
    Nothing,
}

impl Ended {
    fn as_str(self) -> &'static str {
        match self {
            Ended::Proposed => "proposed",
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
    /// Points journaled by earlier segments: (search part, point).
    restored: Vec<(String, ScoredPoint)>,
    /// The search part's hash (see [`GlobalRecord::part`]) and its racing order.
    part: String,
    /// The part and the served strategy of the last search (its counters are for them).
    last_part: String,
    last_served: String,
    order: Vec<String>,
    scored: Vec<Scored>,
    by_hash: BTreeMap<String, usize>,
    /// This run's per-question results, by strategy hash and question id.
    results: BTreeMap<String, BTreeMap<String, QuestionResult>>,
    draws: u64,
    trials: u64,
    since_best: u64,
    searches: u64,
    spent: f64,
    record: Option<SearchRecord>,
    asked: bool,
    cause: Option<StopCause>,
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
        }
    }
}

/// The racing order of the search part (seeded, spread over conversations)
/// and the hash that identifies it with the harness.
fn racing_order(results: &[QuestionResult], seed: u64, harness_hash: &str) -> (Vec<String>, String) {
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

/// The direction a change takes, as a hypothesis node names it.
/// The direction of a move of one field: up or down for a number, else a toggle.
pub(crate) fn direction(from: &Value, to: &Value) -> Direction {
    match (from.as_f64(), to.as_f64()) {
        (Some(a), Some(b)) if b > a => Direction::Increase,
        (Some(_), Some(_)) => Direction::Decrease,
        _ => Direction::Toggle,
    }
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
    /// The search part's racing order and, when it is new to this run, the
    /// history journaled on the same part; the served strategy joins it.
    fn setup(&mut self, ask: &Ask<'_>) {
        let (order, part) = racing_order(ask.results, self.settings.seed, &ask.backend.harness_hash());
        if part != self.part {
            // Another search part or harness than the last search's: the stall counter restarts.
            if self.last_part != part {
                self.since_best = 0;
            }
            self.last_part = part.clone();
            self.part = part;
            self.order = order;
            self.scored.clear();
            self.by_hash.clear();
            let n = self.order.len();
            let points: Vec<ScoredPoint> =
                self.restored.iter().filter(|(p, _)| *p == self.part).map(|(_, s)| s.clone()).collect();
            for p in points {
                let (Some(hash), Some(k), Some(hex)) = (p.hash.clone(), p.questions, p.correct.as_deref()) else {
                    continue;
                };
                let Some(correct) = hex_to_bits(hex, k.min(n)) else { continue };
                let stage = match p.stage.as_deref() {
                    Some("prune") => "prune",
                    Some("consensus") => "consensus",
                    Some("served") => "served",
                    _ => "trial",
                };
                self.add(Scored { hash, values: p.values, correct, tokens: p.tokens, score: p.score, stage });
            }
        }
        let served = &ask.served.value;
        let hash = artifact::content_hash(served);
        // A served strategy the last search did not search around (an
        // operator's rollback, an approval): the stall counter restarts.
        if hash != self.last_served {
            self.since_best = 0;
            self.last_served = hash.clone();
        }
        let by_id: BTreeMap<&str, &QuestionResult> = ask.results.iter().map(|r| (r.id.as_str(), r)).collect();
        let correct: Vec<bool> = self.order.iter().map(|id| by_id[id.as_str()].correct).collect();
        let score = correct.iter().filter(|c| **c).count() as f64 / correct.len().max(1) as f64;
        let tokens = mean_tokens(ask.results);
        self.results
            .entry(hash.clone())
            .or_insert_with(|| ask.results.iter().map(|r| (r.id.clone(), r.clone())).collect());
        let values = point_of(ask.schema, served);
        if !self.by_hash.contains_key(&hash) {
            // Journaled like a trial, so that a resumed run rebuilds the same history in the same order.
            let s = Scored { hash, values, correct, tokens, score, stage: "served" };
            if let Some(r) = &mut self.record {
                r.scored.push(s.point());
            }
            self.add(s);
        }
    }

    /// Adds (or, when it was scored on fewer questions, replaces) a scored strategy.
    fn add(&mut self, s: Scored) -> usize {
        match self.by_hash.get(&s.hash) {
            Some(&i) if self.scored[i].correct.len() >= s.correct.len() => i,
            Some(&i) => {
                self.scored[i] = s;
                i
            }
            None => {
                self.by_hash.insert(s.hash.clone(), self.scored.len());
                self.scored.push(s);
                self.scored.len() - 1
            }
        }
    }

    fn cost(&self, ask: &Ask<'_>, questions: usize) -> f64 {
        questions as f64 / ask.total_questions.max(1) as f64
    }

    /// What is left of `--max-evals` for this search (infinite without one).
    fn left(&self, ask: &Ask<'_>) -> f64 {
        ask.budget_left.map_or(f64::INFINITY, |b| b - self.spent)
    }

    /// The incumbent: the best strategy scored on the whole search part that
    /// is the served one or may still be proposed (never evaluated by the
    /// journal), and is the strategy it names under the served text fields.
    fn incumbent(&self, ask: &Ask<'_>) -> usize {
        let served = artifact::content_hash(&ask.served.value);
        let n = self.order.len();
        let mut best = self.by_hash[&served];
        for (i, s) in self.scored.iter().enumerate() {
            let eligible = s.correct.len() == n
                && (s.hash == served
                    || (!ask.seen.contains(&s.hash)
                        && artifact::content_hash(&materialize(&ask.served.value, &s.values)) == s.hash));
            if eligible && s.score > self.scored[best].score + 1e-12 {
                best = i;
            }
        }
        best
    }

    /// Evaluates `doc` on the questions of `ids` it has no result for yet.
    fn evaluate(&mut self, ask: &Ask<'_>, doc: &Value, hash: &str, ids: &[String]) -> Result<(), String> {
        let known = self.results.entry(hash.to_string()).or_default();
        let missing: Vec<String> = ids.iter().filter(|id| !known.contains_key(*id)).cloned().collect();
        if missing.is_empty() {
            return Ok(());
        }
        let short = &hash[..12.min(hash.len())];
        let art = artifact::from_value("search trial", doc.clone(), ask.schema)
            .map_err(|e| format!("search trial {short}: {e}"))?;
        let mut sorted = missing.clone();
        sorted.sort();
        let eval = ask.backend.evaluate(&art, Some(&sorted)).map_err(|e| format!("search trial {short}: {e}"))?;
        if let Some(o) = eval.outcomes.iter().find(|o| o.error.is_some()) {
            return Err(format!("search trial {short}: question {}: {}", o.id, o.error.as_deref().unwrap_or_default()));
        }
        if eval.n() != missing.len() {
            return Err(format!("search trial {short}: {} of {} questions evaluated", eval.n(), missing.len()));
        }
        let cost = missing.len() as f64 / ask.total_questions.max(1) as f64;
        self.spent += cost;
        if let Some(r) = &mut self.record {
            r.spent += cost;
            r.screened.push(hash.to_string());
        }
        let known = self.results.entry(hash.to_string()).or_default();
        for r in question_results(&eval) {
            known.insert(r.id.clone(), r);
        }
        Ok(())
    }

    /// Races `doc` against `against` (scored on the whole search part): look
    /// by look, dropped once significantly worse. Returns its index.
    fn race(&mut self, ask: &Ask<'_>, doc: &Value, against: usize, stage: &'static str) -> Result<usize, String> {
        let hash = artifact::content_hash(doc);
        let n = self.order.len();
        let mut done = 0;
        for k in stats::race_looks(n, self.settings.first_look) {
            let ids = self.order[done..k].to_vec();
            self.evaluate(ask, doc, &hash, &ids)?;
            done = k;
            let known = &self.results[&hash];
            let inc = &self.scored[against].correct;
            let (mut improved, mut regressed) = (0u64, 0u64);
            for (id, &was) in self.order[..k].iter().zip(inc) {
                match (known[id].correct, was) {
                    (true, false) => improved += 1,
                    (false, true) => regressed += 1,
                    _ => {}
                }
            }
            if k < n && stats::race_drops(improved, regressed, self.settings.race_level) {
                break;
            }
        }
        let known = &self.results[&hash];
        let correct: Vec<bool> = self.order[..done].iter().map(|id| known[id].correct).collect();
        let taken: Vec<&QuestionResult> = self.order[..done].iter().map(|id| &known[id]).collect();
        let tokens = mean_tokens_of(&taken);
        let inc = &self.scored[against];
        let hits = correct.iter().filter(|c| **c).count() as i64;
        let score = inc.score + (hits - inc.hits(done)) as f64 / n as f64;
        let values = point_of(ask.schema, doc);
        let s = Scored { hash, values, correct, tokens, score, stage };
        if let Some(r) = &mut self.record {
            r.scored.push(s.point());
        }
        Ok(self.add(s))
    }
}

fn mean_tokens(results: &[QuestionResult]) -> Option<f64> {
    mean_tokens_of(&results.iter().collect::<Vec<_>>())
}

fn mean_tokens_of(results: &[&QuestionResult]) -> Option<f64> {
    let t: Option<Vec<f64>> = results.iter().map(|r| r.tokens).collect();
    t.filter(|t| !t.is_empty()).map(|t| t.iter().sum::<f64>() / t.len() as f64)
}

impl JumpProposer {
    /// The sampler's next new strategy, or None when draws keep repeating
    /// strategies already scored.
    fn draw(&mut self, ask: &Ask<'_>, space: &Space, focus: &[String]) -> Option<Value> {
        let served = &ask.served.value;
        let history: Vec<search::Trial> = self
            .scored
            .iter()
            .filter_map(|s| {
                Some(search::Trial { point: space.encode(&materialize(served, &s.values)).ok()?, score: s.score })
            })
            .collect();
        let config = TpeConfig {
            n_startup_trials: self.settings.startup,
            seed: self.settings.seed ^ 0x9B05_688C_2B3E_6C1F,
            multivariate: self.settings.multivariate,
            ..TpeConfig::default()
        };
        let tpe = Tpe::new(space.clone(), config);
        let current = space.encode(served).ok()?;
        for attempt in 0..64 {
            self.draws += 1;
            let mut point = if attempt < 32 { tpe.ask(&history, self.draws) } else { tpe.random(self.draws) };
            if history.len() < self.settings.startup {
                prior(&mut point, &current, space, focus, self.settings.seed ^ self.draws);
            }
            let Ok(mut doc) = space.decode(served, &point) else { continue };
            snap(ask.schema, served, &mut doc, space);
            if search::repair(ask.schema, &mut doc).is_err() {
                continue;
            }
            search::reset_inert(ask.schema, served, &mut doc, ask.harness);
            let hash = artifact::content_hash(&doc);
            if ask.schema.check(&doc).is_empty() && !self.by_hash.contains_key(&hash) && !ask.seen.contains(&hash) {
                return Some(doc);
            }
        }
        None
    }
}

/// Layer A's prior on a random start point: each field the round's plans do
/// not implicate stays at its served value with probability 1/2 (seeded);
/// implicated fields keep their draw over the whole range.
fn prior(point: &mut [f64], current: &[f64], space: &Space, focus: &[String], seed: u64) {
    use rand::RngExt;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for (i, p) in space.params.iter().enumerate() {
        let keep = rng.random::<f64>() < 0.5;
        if keep && !focus.contains(&p.path) {
            point[i] = current[i];
        }
    }
}

/// A field pruning keeps, with its loss when reverted alone: (share of the
/// search part, questions evaluated, the hash of the strategy it was reverted
/// from); None when it could not be measured.
type Kept = (String, Option<(f64, usize, String)>);

/// A pruned winner: the strategy, its search-part results and its credits.
struct Pruned {
    doc: Value,
    index: usize,
    steps: Vec<PruneStep>,
    credits: Vec<Credit>,
}

impl JumpProposer {
    /// `doc` with `paths` back at their served values, repaired (a field an
    /// invariant ties to a reverted one moves with it, e.g. `retrieve.top_k`
    /// down to a reverted `retrieve.pool`) and with inert fields reset;
    /// None when no valid strategy results.
    fn reverted(ask: &Ask<'_>, doc: &Value, paths: &[String]) -> Option<Value> {
        let served = &ask.served.value;
        let mut out = doc.clone();
        for p in paths {
            set_path(&mut out, p, get_path(served, p)?.clone());
        }
        search::repair(ask.schema, &mut out).ok()?;
        search::reset_inert(ask.schema, served, &mut out, ask.harness);
        ask.schema.check(&out).is_empty().then_some(out)
    }

    /// Per field, how strongly the sampler's model ties `doc`'s value to the
    /// good trials (see [`Tpe::log_ratios`]); fields the diagnosis implicates
    /// count as tied a little more (ties to the model's silence).
    fn importance(&self, ask: &Ask<'_>, doc: &Value) -> impl Fn(&String) -> f64 + use<> {
        let served = &ask.served.value;
        let mut by_path: BTreeMap<String, f64> = BTreeMap::new();
        if let Some(space) = whole_space(ask) {
            let history: Vec<search::Trial> = self
                .scored
                .iter()
                .filter_map(|s| {
                    Some(search::Trial { point: space.encode(&materialize(served, &s.values)).ok()?, score: s.score })
                })
                .collect();
            let tpe = Tpe::new(space.clone(), TpeConfig::default());
            if let Ok(x) = space.encode(doc) {
                for (p, r) in space.params.iter().zip(tpe.log_ratios(&history, &x)) {
                    by_path.insert(p.path.clone(), r);
                }
            }
        }
        let focus = implicated(ask.plans);
        move |p: &String| by_path.get(p).copied().unwrap_or(0.0) + if focus.contains(p) { 0.1 } else { 0.0 }
    }

    /// Prunes the strategy scored at `winner` (see the module doc).
    fn prune(&mut self, ask: &Ask<'_>, winner: usize) -> Result<Pruned, String> {
        let served = &ask.served.value;
        let n = self.order.len();
        let tol = self.settings.prune_tolerance as i64;
        let full = self.cost(ask, n);
        let mut doc = materialize(served, &self.scored[winner].values);
        let mut cur = winner;
        let start_hits = self.scored[winner].hits(n);
        let mut queue = changed_paths(ask.schema, served, &doc);
        // The fields the sampler's model least ties to good scores first, so
        // that a group of them can go back at once.
        let weight = self.importance(ask, &doc);
        queue.sort_by(|a, b| weight(a).total_cmp(&weight(b)).then(a.cmp(b)));
        let mut kept: Vec<Kept> = Vec::new();
        let mut steps = Vec::new();
        let mut group = (queue.len() / 2).max(1);
        while !queue.is_empty() {
            if self.left(ask) < full {
                kept.extend(queue.drain(..).map(|p| (p, None)));
                break;
            }
            let g: Vec<String> = queue[..group.min(queue.len())].to_vec();
            let Some(test) = Self::reverted(ask, &doc, &g) else {
                if g.len() == 1 {
                    kept.push((queue.remove(0), None));
                } else {
                    group = (g.len() / 2).max(1);
                }
                continue;
            };
            let r = self.race(ask, &test, cur, "prune")?;
            let k = self.scored[r].correct.len();
            let lost = self.scored[cur].hits(k) - self.scored[r].hits(k);
            tracing::debug!(fields = ?g, k, lost, left = self.left(ask), "prune step");
            let within = k == n && lost <= tol && start_hits - self.scored[r].hits(n) <= 2 * tol;
            steps.push(PruneStep { fields: g.clone(), questions: k, lost, reverted: within });
            if within {
                doc = test;
                cur = r;
                queue.drain(..g.len());
            } else if g.len() == 1 {
                kept.push((queue.remove(0), Some((lost as f64 / k as f64, k, self.scored[cur].hash.clone()))));
            } else {
                group = (g.len() / 2).max(1);
            }
        }
        let credits = self.credits(ask, &doc, cur, kept)?;
        Ok(Pruned { doc, index: cur, steps, credits })
    }

    /// Each kept field's credit, measured against the final strategy: a
    /// contribution measured before a later reversion is measured again
    /// when the budget allows, else reported as measured earlier.
    fn credits(&mut self, ask: &Ask<'_>, doc: &Value, cur: usize, kept: Vec<Kept>) -> Result<Vec<Credit>, String> {
        let served = &ask.served.value;
        let n = self.order.len();
        let final_hash = self.scored[cur].hash.clone();
        let mut credits = Vec::new();
        for (path, measured) in kept {
            let mut measured = measured;
            let mut earlier = false;
            if measured.as_ref().is_some_and(|m| m.2 != final_hash) {
                earlier = true;
                if self.left(ask) >= self.cost(ask, n)
                    && let Some(test) = Self::reverted(ask, doc, std::slice::from_ref(&path))
                {
                    let r = self.race(ask, &test, cur, "prune")?;
                    let k = self.scored[r].correct.len();
                    let lost = self.scored[cur].hits(k) - self.scored[r].hits(k);
                    measured = Some((lost as f64 / k as f64, k, final_hash.clone()));
                    earlier = false;
                }
            }
            let (Some(from), Some(to)) = (get_path(served, &path), get_path(doc, &path)) else { continue };
            credits.push(Credit {
                key: hypothesis::key(&path, direction(from, to)),
                path: path.clone(),
                from: from.clone(),
                to: to.clone(),
                delta: measured.as_ref().map(|m| m.0),
                questions: measured.as_ref().map_or(0, |m| m.1),
                earlier,
            });
        }
        credits.sort_by(|a, b| {
            b.delta
                .unwrap_or(f64::NEG_INFINITY)
                .total_cmp(&a.delta.unwrap_or(f64::NEG_INFINITY))
                .then(a.path.cmp(&b.path))
        });
        Ok(credits)
    }
}

impl JumpProposer {
    /// The whole-search-part results of the strategy scored at `i`, in the
    /// served results' order; evaluated afresh when this run has none (a
    /// strategy restored from an earlier run's journal).
    fn full_results(&mut self, ask: &Ask<'_>, i: usize) -> Result<Vec<QuestionResult>, String> {
        let hash = self.scored[i].hash.clone();
        let doc = materialize(&ask.served.value, &self.scored[i].values);
        let order = self.order.clone();
        self.evaluate(ask, &doc, &hash, &order)?;
        let known = &self.results[&hash];
        Ok(ask.results.iter().map(|r| known[&r.id].clone()).collect())
    }

    /// True when the strategy scored at `i` is on the whole search part,
    /// keeps every category there within the confirm test's floor, and its
    /// gain over the served strategy would pass the exact test at the next
    /// confirm alpha. Read from the journaled answers alone, so that a
    /// resumed run decides as an uninterrupted one.
    fn worth_a_test(&self, ask: &Ask<'_>, i: usize) -> bool {
        let served = &self.scored[self.by_hash[&artifact::content_hash(&ask.served.value)]];
        let cand = &self.scored[i];
        if cand.hash == served.hash || cand.correct.len() != self.order.len() {
            return false;
        }
        let category: BTreeMap<&str, &str> = ask.results.iter().map(|r| (r.id.as_str(), r.category.as_str())).collect();
        let mut per: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
        let (mut improved, mut regressed) = (0u64, 0u64);
        for ((id, &a), &b) in self.order.iter().zip(&served.correct).zip(&cand.correct) {
            let e = per.entry(category[id.as_str()]).or_default();
            e.0 += 1;
            e.1 += usize::from(a);
            e.2 += usize::from(b);
            match (a, b) {
                (false, true) => improved += 1,
                (true, false) => regressed += 1,
                _ => {}
            }
        }
        let keeps = per.values().all(|&(n, a, b)| stats::keeps_category(a, b, n, self.settings.epsilon_c));
        keeps && stats::better_p_value(improved, regressed) <= ask.next_alpha
    }
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
        elite.sort_by(|&a, &b| self.scored[b].score.total_cmp(&self.scored[a].score).then(a.cmp(&b)));
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
        let pruned = self.prune(ask, best)?;
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
        Ok(Some(Proposed::Candidate { value: chosen.0, changes, data: None, known: Some(results), credits: chosen.2 }))
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
        let ended = if ended == Ended::Proposed && out.is_none() { Ended::Nothing } else { ended };
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
            self.restored.extend(r.scored.iter().map(|p| (g.part.clone(), p.clone())));
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
    use serde_json::json;

    #[test]
    fn a_change_names_its_direction() {
        assert_eq!(direction(&json!(5), &json!(40)), Direction::Increase);
        assert_eq!(direction(&json!(0.9), &json!(0.5)), Direction::Decrease);
        assert_eq!(direction(&json!("rrf"), &json!("weighted_sum")), Direction::Toggle);
        assert_eq!(direction(&json!(false), &json!(true)), Direction::Toggle);
    }

    #[test]
    fn the_racing_order_and_its_hash_depend_on_the_part_and_the_harness() {
        let q = |id: &str, conv: &str| QuestionResult {
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
