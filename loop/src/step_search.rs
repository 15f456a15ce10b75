//! The step search proposer of the conservative mode (`search.method:
//! steps`): many multi-field candidates, each within one `x-max-delta` step
//! of the served strategy, screened cheaply on the search part, the best one
//! sent on to the gates and the confirm test. The default is the global
//! search of [`crate::jump`].
//!
//! Each round it answers the first direction the planner ranked (once per
//! round). The fields it moves are those the round's plans implicate (Layer A
//! and the UCB1 tree choose the dimensions), and every candidate stays within
//! one step of the served strategy: no field moves by more than its
//! `x-max-delta`, so the value-range gate holds by construction. Candidates:
//!
//! - line points: the top plans' moves, singly and bundled (with the fields
//!   an invariant would otherwise block), at half and at full step;
//! - TPE points: a TPE sampler ([`emend_core::search::Tpe`]) fitted to every
//!   candidate this proposer has scored, restricted to the step box around
//!   the served strategy;
//! - scouts: TPE points over the implicated fields' whole ranges, scored on
//!   a small seeded sample and never proposed; candidates step toward the
//!   best strategies scored so far (full and half `x-max-delta` steps).
//!
//! They are screened by successive halving on nested seeded samples of the
//! search part ([`emend_core::search::successive_halving`]); every question
//! evaluated is counted in full-evaluation equivalents ([`Proposer::spent`])
//! and no strategy is screened twice. The survivor, evaluated on the whole
//! search part, is proposed only when it gains at least `min_gain` (a share
//! of the search part) there, keeps every category within the confirm
//! test's floor, and its own improved and regressed questions would pass the
//! exact test at the next confirm alpha; its search-part results travel with
//! it, so the probe and the winner's completion cost nothing more. After
//! `patience` fruitless searches around one served strategy (a rejected
//! searched candidate counts as one) it stays quiet until the served
//! strategy changes. Each search is journaled (a `searched` event: what it
//! screened and scored, its counters and patience), so a later or resumed
//! run rebuilds the same state ([`Proposer::restore`]) and goes on where the
//! journal left off.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::propose::{Ask, Proposed, Proposer, Told};
use emend_core::artifact;
use emend_core::candidate::Resolution;
use emend_core::events::{CandidateRecord, ChangeKind, Event, LabeledOutcome, ScoredPoint, SearchRecord};
use emend_core::hypothesis::Hypothesis;
use emend_core::planner::Plan;
use emend_core::records::question_results;
use emend_core::schema::{Direction, FieldKind, StrategySchema};
use emend_core::search::{self, Domain, Move, Space, Tpe, TpeConfig};
use emend_stats::TaskKey;

/// Per screened candidate (by index): the largest rung it reached and its accuracy there.
type Reached = BTreeMap<usize, (usize, f64)>;

/// A scored strategy as the search remembers it: its evolvable (non-text)
/// fields by path. The rest of a strategy does not move in a search.
use emend_core::search::{Point, materialize, point_of};
use emend_core::steps::{ahead, changes_between, consensus, snap, sparse, step_box, toward, within_step};

/// How hard the step search looks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepSettings {
    /// Candidates screened per round (line points first, TPE points after).
    pub candidates: usize,
    /// Questions in the first rung.
    pub first_rung: usize,
    /// Each rung keeps `1 / eta` of its candidates.
    pub eta: usize,
    /// The smallest gain on the search part worth proposing, as a share of
    /// its questions (smaller steps rarely survive the confirm test).
    pub min_gain: f64,
    /// Fruitless searches around one served strategy before the proposer goes quiet.
    pub patience: u32,
    /// `gates.cost_bound`: a candidate whose mean context tokens grow by more
    /// than this share on a rung's sample is infeasible (scores 0 there).
    pub cost_bound: Option<f64>,
    /// `cost.max_tokens`: a candidate whose mean context tokens on a rung's
    /// sample exceed it (or are not reported) is infeasible (scores 0 there).
    pub max_tokens: Option<f64>,
    /// `gates.category_drop_max`: the proposed candidate loses no category by more
    /// than this on the search part.
    pub category_drop_max: f64,
    pub seed: u64,
    /// Fields a TPE point may move at once.
    pub keep: usize,
    /// Scouts per search: TPE points anywhere in the implicated fields'
    /// ranges, scored on `scout_rung` questions and never proposed
    /// themselves; candidates step toward the best of them.
    pub scouts: usize,
    pub scout_rung: usize,
    /// Best-scored strategies that candidates step toward.
    pub targets: usize,
}

impl Default for StepSettings {
    fn default() -> Self {
        StepSettings {
            candidates: 16,
            first_rung: 24,
            eta: 3,
            min_gain: 0.025,
            patience: 8,
            cost_bound: None,
            max_tokens: None,
            category_drop_max: 1.0,
            seed: 0,
            keep: 8,
            scouts: 12,
            scout_rung: 64,
            targets: 3,
        }
    }
}

/// The step search's state within one `evolve` run.
pub struct StepProposer {
    settings: StepSettings,
    /// Every strategy scored so far, with its estimated search-part accuracy.
    scored: Vec<(Point, f64)>,
    /// Hashes of every strategy screened so far: none is screened twice.
    screened: BTreeSet<String>,
    /// Per strategy hash: its results in the current search.
    results: BTreeMap<String, BTreeMap<String, LabeledOutcome>>,
    /// The record of the search in progress or not yet journaled.
    record: Option<SearchRecord>,
    /// Full-evaluation equivalents spent since the last `spent()`.
    spent: f64,
    /// Set once the proposer answered in the current round.
    asked: bool,
    /// (served hash, fruitless searches around it).
    misses: (String, u32),
    number: u64,
    /// Searches run so far (each draws its own order of the search part).
    searches: u64,
    /// The served strategy's search-part accuracy in the current search.
    scored_served: f64,
    /// Set once what is left of `--max-evals` could not pay for a search.
    short_of_budget: bool,
}

impl StepProposer {
    pub fn new(settings: StepSettings) -> StepProposer {
        StepProposer {
            settings,
            scored: Vec::new(),
            screened: BTreeSet::new(),
            results: BTreeMap::new(),
            record: None,
            spent: 0.0,
            asked: false,
            misses: (String::new(), 0),
            number: 0,
            searches: 0,
            scored_served: 0.0,
            short_of_budget: false,
        }
    }
}

/// The fields the search may move: every field a ranked plan names (the
/// diagnosis implicates it and its direction is still open) that a sampler
/// can draw and the backend can run.
fn focus_paths(ask: &Ask<'_>) -> Vec<String> {
    let mut paths: Vec<String> = ask
        .plans
        .iter()
        .filter(|plan| {
            ask.schema.field(&plan.path).is_some_and(|f| {
                f.evolvable && f.kind != FieldKind::Text && f.needs_role.as_ref().is_none_or(|r| ask.roles.contains(r))
            })
        })
        .map(|plan| plan.path.clone())
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// Bundles that answer every observed failure label at once: the first
/// `depth` open numeric moves of each label's symptom list (labels by count),
/// with the moves of fields an invariant would otherwise block. A move whose
/// effect is masked by another stage's limit (more retrieved items that the
/// context budget then drops) is screened together with that limit's move.
fn label_bundles(ask: &Ask<'_>, depth: usize) -> Vec<Vec<Move>> {
    let open: BTreeSet<(&str, Direction)> = ask.plans.iter().map(|p| (p.path.as_str(), p.direction)).collect();
    let mut labels: Vec<(&String, &usize)> = ask.diagnosis.counts.iter().filter(|(_, n)| **n > 0).collect();
    labels.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    (1..=depth)
        .map(|d| {
            let mut bundle: Vec<Move> = Vec::new();
            for (label, _) in &labels {
                let links = ask.schema.symptoms().get(label.as_str()).into_iter().flatten();
                let numeric = links.filter(|l| {
                    matches!(l.direction, Direction::Increase | Direction::Decrease)
                        && open.contains(&(l.path.as_str(), l.direction))
                });
                for link in numeric.take(d) {
                    for m in search::invariant_bundle(ask.schema, &Move::new(link.path.clone(), link.direction)) {
                        if !bundle.iter().any(|b| b.path == m.path) {
                            bundle.push(m);
                        }
                    }
                }
            }
            bundle
        })
        .filter(|b| !b.is_empty())
        .collect()
}

impl StepProposer {
    /// The round's candidates: line points along the top plans, then TPE points.
    fn candidates(&mut self, ask: &Ask<'_>, space: &Space, far: &Space, top: &[&Plan]) -> Vec<Value> {
        let served = &ask.served.value;
        let mut docs: Vec<Value> = Vec::new();
        // Steps toward the best strategies scored so far (scouts included).
        let served_score = self.scored_served;
        let mut best: Vec<&(Point, f64)> = self.scored.iter().filter(|(_, s)| *s > served_score).collect();
        best.sort_by(|a, b| b.1.total_cmp(&a.1));
        let center = consensus(&self.scored, far, served);
        let targets = best.into_iter().take(self.settings.targets).map(|(t, _)| materialize(served, t));
        let momentum = ask.parent.map(|parent| ahead(ask.schema, served, parent));
        for target in momentum.into_iter().chain(center).chain(targets) {
            for fraction in [1.0, 0.5] {
                docs.extend(toward(ask.schema, far, served, &target, fraction));
            }
        }
        let moves: Vec<Move> = top
            .iter()
            .filter(|p| space.params.iter().any(|q| q.path == p.path))
            .map(|p| Move::new(p.path.clone(), p.direction))
            .collect();
        let mut bundles: Vec<Vec<Move>> = label_bundles(ask, 2);
        for mv in moves.iter().take(2) {
            bundles.push(search::invariant_bundle(ask.schema, mv));
        }
        for b in &bundles {
            // Multipliers of `x-step`: infinity is the full `x-max-delta` step.
            let steps: Vec<f64> =
                if b.iter().all(|m| m.direction == Direction::Toggle) { vec![1.0] } else { vec![f64::INFINITY, 2.0] };
            for (_, point) in search::line_points(ask.schema, served, b, &steps).unwrap_or_default() {
                docs.push(point);
            }
        }
        let in_box: Vec<search::Trial> = self
            .scored
            .iter()
            .filter_map(|(doc, score)| {
                let point = space.encode(&materialize(served, doc)).ok()?;
                let inside = space.params.iter().zip(&point).all(|(p, &x)| match &p.domain {
                    Domain::Int { low, high } => x >= *low as f64 && x <= *high as f64,
                    Domain::Float { low, high } => x >= *low - 1e-9 && x <= *high + 1e-9,
                    Domain::Categorical(o) => (x as usize) < o.len(),
                });
                inside.then_some(search::Trial::complete(point, *score))
            })
            .collect();
        // A strategy this proposer screened before is not screened again: its
        // score is already in the sampler's history, and a search that found
        // nothing must look somewhere else next time.
        let mut seen: BTreeSet<String> = BTreeSet::new();
        seen.insert(artifact::content_hash(served));
        let mut fresh = |d: &Value, screened: &BTreeSet<String>| {
            let hash = artifact::content_hash(d);
            within_step(ask.schema, &changes_between(space, ask.schema, served, d, ""))
                && ask.schema.check(d).is_empty()
                && !ask.seen.contains(&hash)
                && !screened.contains(&hash)
                && seen.insert(hash)
        };
        docs.retain(|d| fresh(d, &self.screened));
        let Ok(current) = space.encode(served) else { return docs };
        let tpe = Tpe::new(space.clone(), TpeConfig { seed: self.settings.seed, ..TpeConfig::default() });
        let mut tries = 0;
        while docs.len() < self.settings.candidates && tries < 8 * self.settings.candidates {
            tries += 1;
            self.number += 1;
            // Once the sampler keeps returning strategies already screened, uniform points explore.
            let drawn = if tries <= 2 * self.settings.candidates {
                tpe.ask(&in_box, self.number)
            } else {
                tpe.random(self.number)
            };
            let point = sparse(&drawn, &current, self.settings.seed ^ self.number, self.settings.keep);
            let Ok(mut doc) = space.decode(served, &point) else { continue };
            snap(ask.schema, served, &mut doc, space);
            if search::repair(ask.schema, &mut doc).is_ok() && fresh(&doc, &self.screened) {
                docs.push(doc);
            }
        }
        docs.truncate(self.settings.candidates);
        docs
    }

    /// How many of `docs` candidates the halving ladder `sizes` can screen
    /// within `budget_left` (fewer candidates, never a smaller last rung);
    /// None when not even one fits.
    fn fit(&self, docs: usize, sizes: &[usize], budget_left: Option<f64>, total: usize) -> Option<usize> {
        let cost = |count| search::cost_of(&search::plan(count, sizes, self.settings.eta), total);
        let Some(left) = budget_left else { return Some(docs) };
        (1..=docs).rev().find(|&count| cost(count) <= left + 1e-9)
    }

    /// Successive halving of `docs` over `order`'s nested rungs: per
    /// candidate its score at the largest rung it reached, and the final
    /// ranking. Every candidate's score, corrected by the served strategy's
    /// on the same questions, joins the sampler's history.
    fn halve(
        &mut self,
        ask: &Ask<'_>,
        docs: &[Value],
        order: &[String],
        sizes: &[usize],
        served_correct: &BTreeMap<&str, bool>,
    ) -> Result<(Reached, Vec<usize>), String> {
        let mut failed: Option<String> = None;
        let halving = search::successive_halving(
            docs.len(),
            order,
            sizes,
            self.settings.eta,
            ask.total_questions,
            |_, _| None,
            |c, ids| match self.evaluate(ask, &docs[c], ids) {
                Ok(v) if self.too_costly(ask, &docs[c], ids) => vec![false; v.len()],
                Ok(v) => v,
                Err(e) => {
                    failed.get_or_insert(e);
                    vec![false; ids.len()]
                }
            },
        );
        if let Some(reason) = failed {
            return Err(reason);
        }
        let served_on = |k: usize| order[..k].iter().filter(|id| served_correct[id.as_str()]).count() as f64 / k as f64;
        let mut best_rung: Reached = BTreeMap::new();
        for rung in &halving.rungs {
            for &(c, s) in &rung.scores {
                best_rung.insert(c, (rung.size, s));
            }
        }
        for (c, (size, s)) in &best_rung {
            self.remember(ask.schema, &docs[*c], self.scored_served + s - served_on(*size));
        }
        Ok((best_rung, halving.ranking))
    }

    /// Scouts: TPE points over the implicated fields' whole ranges, fitted to
    /// every strategy scored so far, each scored on the first `scout_rung`
    /// questions of `order` (against the served strategy on the same
    /// questions) and added to the history that candidates step toward.
    fn scout(
        &mut self,
        ask: &Ask<'_>,
        far: &Space,
        order: &[String],
        served_correct: &BTreeMap<&str, bool>,
    ) -> Result<(), String> {
        if self.settings.scouts == 0 || far.params.is_empty() {
            return Ok(());
        }
        let ids = &order[..self.settings.scout_rung.min(order.len())];
        let served_on = ids.iter().filter(|id| served_correct[id.as_str()]).count() as f64 / ids.len().max(1) as f64;
        let history: Vec<search::Trial> = self
            .scored
            .iter()
            .filter_map(|(doc, score)| {
                Some(search::Trial::complete(far.encode(&materialize(&ask.served.value, doc)).ok()?, *score))
            })
            .collect();
        let tpe = Tpe::new(far.clone(), TpeConfig { seed: self.settings.seed ^ 0x5C0u64, ..TpeConfig::default() });
        let served = &ask.served.value;
        let mut scouts: Vec<Value> = Vec::new();
        let mut tries = 0;
        while scouts.len() < self.settings.scouts && tries < 4 * self.settings.scouts {
            tries += 1;
            self.number += 1;
            let drawn =
                if tries <= self.settings.scouts { tpe.ask(&history, self.number) } else { tpe.random(self.number) };
            let Ok(mut doc) = far.decode(served, &drawn) else { continue };
            snap(ask.schema, served, &mut doc, far);
            let hash = artifact::content_hash(&doc);
            if search::repair(ask.schema, &mut doc).is_err()
                || !ask.schema.check(&doc).is_empty()
                || self.screened.contains(&hash)
                || scouts.iter().any(|s| artifact::content_hash(s) == hash)
            {
                continue;
            }
            scouts.push(doc);
        }
        for doc in scouts {
            let correct = self.evaluate(ask, &doc, ids)?;
            let acc = if self.too_costly(ask, &doc, ids) {
                0.0
            } else {
                correct.iter().filter(|c| **c).count() as f64 / ids.len().max(1) as f64
            };
            self.remember(ask.schema, &doc, self.scored_served + acc - served_on);
        }
        Ok(())
    }

    /// Results of `doc` on `ids`, evaluating only the questions not yet known.
    fn evaluate(&mut self, ask: &Ask<'_>, doc: &Value, ids: &[String]) -> Result<Vec<bool>, String> {
        let hash = artifact::content_hash(doc);
        let known = self.results.entry(hash.clone()).or_default();
        let missing: Vec<String> = ids.iter().filter(|id| !known.contains_key(*id)).cloned().collect();
        if !missing.is_empty() {
            let short = &hash[..12.min(hash.len())];
            let art = artifact::from_value("search candidate", doc.clone(), ask.schema)
                .map_err(|e| format!("search candidate {short}: {e}"))?;
            let eval =
                ask.backend.evaluate(&art, Some(&missing)).map_err(|e| format!("search candidate {short}: {e}"))?;
            if let Some(o) = eval.outcomes.iter().find(|o| o.error.is_some()) {
                return Err(format!(
                    "search candidate {short}: question {}: {}",
                    o.id,
                    o.error.as_deref().unwrap_or_default()
                ));
            }
            if eval.n() != missing.len() {
                return Err(format!("search candidate {short}: {} of {} questions evaluated", eval.n(), missing.len()));
            }
            let cost = missing.len() as f64 / ask.total_questions.max(1) as f64;
            self.spent += cost;
            if let Some(r) = &mut self.record {
                r.spent += cost;
            }
            if self.screened.insert(hash.clone())
                && let Some(r) = &mut self.record
            {
                r.screened.push(hash.clone());
            }
            for r in question_results(&eval) {
                known.insert(r.id.clone(), r);
            }
        }
        Ok(ids.iter().map(|id| known.get(id).is_some_and(|r| r.correct)).collect())
    }

    /// True when `doc`'s mean context tokens on `ids` exceed `cost.max_tokens`
    /// (or are not reported under one), or the served strategy's by more than
    /// the cost bound.
    fn too_costly(&self, ask: &Ask<'_>, doc: &Value, ids: &[String]) -> bool {
        let Some(known) = self.results.get(&artifact::content_hash(doc)) else { return false };
        if let Some(cap) = self.settings.max_tokens {
            let tokens: Option<f64> = ids.iter().map(|id| known.get(id).and_then(|r| r.tokens)).sum();
            if tokens.is_none_or(|t| t / ids.len().max(1) as f64 > cap + 1e-9) {
                return true;
            }
        }
        let Some(bound) = self.settings.cost_bound else { return false };
        let served: BTreeMap<&str, f64> =
            ask.results.iter().map(|r| (r.id.as_str(), r.tokens.unwrap_or(0.0))).collect();
        let (mut a, mut b) = (0.0, 0.0);
        for id in ids {
            a += served.get(id.as_str()).copied().unwrap_or(0.0);
            b += known.get(id).and_then(|r| r.tokens).unwrap_or(0.0);
        }
        a > 0.0 && b / a - 1.0 > bound
    }

    /// True when `doc` keeps every category of the search part within the
    /// confirm test's floor ([`emend_stats::keeps_category`]).
    fn keeps_categories(&self, ask: &Ask<'_>, doc: &Value) -> bool {
        let Some(known) = self.results.get(&artifact::content_hash(doc)) else { return false };
        let mut per: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
        for r in ask.results {
            let e = per.entry(r.category.as_str()).or_default();
            e.0 += 1;
            e.1 += usize::from(r.correct);
            e.2 += usize::from(known.get(&r.id).is_some_and(|k| k.correct));
        }
        per.values()
            .all(|&(n, served, cand)| emend_stats::keeps_category(served, cand, n, self.settings.category_drop_max))
    }

    /// True when `doc`'s gain over the served strategy on the whole search
    /// part would pass the confirm test itself: the one-sided exact test of
    /// its improved against its regressed questions at the next confirm
    /// alpha. The confirm part is as large as the search part, so a gain that
    /// could not be seen there would spend alpha on a test it cannot pass
    /// (and the winner of a search overstates its gain, never understates it).
    fn visible(&self, ask: &Ask<'_>, doc: &Value) -> bool {
        let Some(known) = self.results.get(&artifact::content_hash(doc)) else { return false };
        let (mut improved, mut regressed) = (0u64, 0u64);
        for r in ask.results {
            match (r.correct, known.get(&r.id).map(|k| k.correct)) {
                (false, Some(true)) => improved += 1,
                (true, Some(false)) => regressed += 1,
                _ => {}
            }
        }
        emend_stats::better_p_value(improved, regressed) <= ask.next_alpha
    }

    fn fruitless(&mut self) -> Option<Proposed> {
        self.misses.1 += 1;
        None
    }

    /// Adds a scored strategy to the sampler's history and to the search's record.
    fn remember(&mut self, schema: &StrategySchema, doc: &Value, score: f64) {
        let values = point_of(schema, doc);
        if let Some(r) = &mut self.record {
            r.scored.push(ScoredPoint::new(values.clone(), score));
        }
        self.scored.push((values, score));
    }

    /// One search around the served strategy (patience permitting).
    fn search(&mut self, ask: &Ask<'_>, plan: &Plan) -> Option<Proposed> {
        let served_hash = &self.misses.0.clone();
        let paths = focus_paths(ask);
        let only: Vec<&str> = paths.iter().map(String::as_str).collect();
        let whole = Space::from_schema(ask.schema, &ask.served.value, Some(&only)).ok()?;
        let far = step_box(ask.schema, whole.clone(), &ask.served.value, ask.roles, false);
        let space = step_box(ask.schema, whole, &ask.served.value, ask.roles, true);
        if space.params.is_empty() {
            return None;
        }
        let keys: Vec<TaskKey> = ask
            .results
            .iter()
            .map(|r| TaskKey::new(r.id.clone(), r.conversation.clone().unwrap_or_default(), r.category.clone()))
            .collect();
        // A new seeded order each search: the first rungs see other questions,
        // so one unlucky sample does not decide every search around a strategy.
        self.searches += 1;
        let order = search::nested_order(&keys, self.settings.seed ^ self.searches.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let sizes = search::ladder(order.len(), self.settings.first_rung, self.settings.eta);
        let served_correct: BTreeMap<&str, bool> = ask.results.iter().map(|r| (r.id.as_str(), r.correct)).collect();
        self.scored_served = served_correct.values().filter(|c| **c).count() as f64 / order.len().max(1) as f64;
        // Scouting is skipped when it would leave too little for one candidate's ladder.
        let scout_cost = (self.settings.scouts * self.settings.scout_rung.min(order.len())) as f64
            / ask.total_questions.max(1) as f64;
        let ladder_cost = search::cost_of(&search::plan(1, &sizes, self.settings.eta), ask.total_questions);
        // After an accepted step the first search tries that step again before it scouts.
        let momentum = ask.parent.is_some() && self.misses.1 == 0;
        if !momentum
            && ask.budget_left.is_none_or(|left| left >= scout_cost + ladder_cost)
            && let Err(reason) = self.scout(ask, &far, &order, &served_correct)
        {
            return Some(Proposed::Failed { reason });
        }
        let budget_left = ask.budget_left.map(|left| left - self.spent);
        let top: Vec<&Plan> = ask.plans.iter().take(4).collect();
        let docs = self.candidates(ask, &space, &far, &top);
        if docs.is_empty() {
            return self.fruitless();
        }
        let Some(count) = self.fit(docs.len(), &sizes, budget_left, ask.total_questions) else {
            // What is left of --max-evals cannot pay for one candidate's ladder.
            self.short_of_budget = true;
            return None;
        };
        let docs = &docs[..count];
        let (best_rung, ranking) = match self.halve(ask, docs, &order, &sizes, &served_correct) {
            Ok(r) => r,
            Err(reason) => return Some(Proposed::Failed { reason }),
        };
        let served_on = |k: usize| order[..k].iter().filter(|id| served_correct[id.as_str()]).count() as f64 / k as f64;
        let full = ranking.into_iter().filter(|&c| best_rung[&c].0 == order.len());
        let Some(winner) = full.into_iter().find(|&c| self.keeps_categories(ask, &docs[c])) else {
            tracing::info!(candidates = docs.len(), "search: no candidate keeps every category");
            return self.fruitless();
        };
        let (size, score) = best_rung[&winner];
        let gain = score - served_on(size);
        let visible = self.visible(ask, &docs[winner]);
        tracing::info!(candidates = docs.len(), gain, visible, "search around {}", &served_hash[..12]);
        if size < order.len() || gain < self.settings.min_gain || !visible {
            return self.fruitless();
        }
        let value = docs[winner].clone();
        let hash = artifact::content_hash(&value);
        let known: Vec<LabeledOutcome> =
            self.results.get(&hash).map(|m| m.values().cloned().collect()).unwrap_or_default();
        let changes = changes_between(&space, ask.schema, &ask.served.value, &value, &plan.path);
        if changes.is_empty() {
            return self.fruitless();
        }
        Some(Proposed::Candidate {
            value,
            changes,
            data: None,
            known: Some(known),
            credits: Vec::new(),
            kind: ChangeKind::Better,
        })
    }
}

impl Proposer for StepProposer {
    fn ask(&mut self, ask: &Ask<'_>, plan: &Plan, _node: &Hypothesis) -> Option<Proposed> {
        if self.asked {
            return None;
        }
        self.asked = true;
        let served_hash = artifact::content_hash(&ask.served.value);
        if self.misses.0 != served_hash {
            self.misses = (served_hash.clone(), 0);
        }
        if self.misses.1 >= self.settings.patience {
            return None;
        }
        self.results.clear();
        self.record = Some(SearchRecord {
            round: ask.round,
            served_hash,
            searches: 0,
            draws: 0,
            misses: 0,
            spent: 0.0,
            screened: Vec::new(),
            scored: Vec::new(),
            proposed: None,
            global: None,
        });
        let out = self.search(ask, plan);
        self.results.clear();
        if let Some(r) = &mut self.record {
            r.searches = self.searches;
            r.draws = self.number;
            r.misses = self.misses.1;
            r.proposed = match &out {
                Some(Proposed::Candidate { value, .. }) => Some(artifact::content_hash(value)),
                _ => None,
            };
            // A search that evaluated nothing changed nothing worth keeping.
            if r.screened.is_empty() && r.scored.is_empty() {
                self.record = None;
            }
        }
        out
    }

    fn journal(&mut self) -> Vec<Event> {
        self.record.take().map(|r| Event::Searched(Box::new(r))).into_iter().collect()
    }

    /// The state after `searches`, in journal order: each one's counters,
    /// screened hashes and scored points, and the patience it left; a
    /// proposed candidate that its round did not accept counts against
    /// patience, as [`Proposer::tell`] counted it.
    fn restore(&mut self, searches: &[SearchRecord], candidates: &[CandidateRecord]) {
        for r in searches {
            self.searches = r.searches;
            self.number = r.draws;
            self.screened.extend(r.screened.iter().cloned());
            self.scored.extend(r.scored.iter().map(|p| (p.values.clone(), p.score)));
            self.misses = (r.served_hash.clone(), r.misses);
            if r.proposed.is_some() {
                let round: Vec<&CandidateRecord> = candidates.iter().filter(|c| c.round == r.round).collect();
                if !round.is_empty() && !round.iter().any(|c| c.outcome == Resolution::Accepted) {
                    self.misses.1 += 1;
                }
            }
        }
    }

    fn spent(&mut self) -> f64 {
        std::mem::take(&mut self.spent)
    }

    fn start_round(&mut self) {
        self.asked = false;
    }

    fn stop_cause(&self) -> Option<crate::propose::StopCause> {
        self.short_of_budget.then_some(crate::propose::StopCause::Budget)
    }

    /// A round whose searched candidate was not accepted counts as a
    /// fruitless search too: patience bounds every search around one served
    /// strategy, not only those that found nothing to test.
    fn tell(&mut self, told: &[Told]) {
        if !told.is_empty() && !told.iter().any(|t| t.outcome == emend_core::candidate::Resolution::Accepted) {
            self.misses.1 += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use emend_core::schema::get_path;
    use serde_json::json;

    fn default_doc() -> Value {
        emend_core::artifact::parse_yaml(emend_core::artifact::DEFAULT_STRATEGY).unwrap()
    }

    fn space(schema: &StrategySchema, doc: &Value, paths: &[&str], narrow: bool) -> Space {
        let whole = Space::from_schema(schema, doc, Some(paths)).unwrap();
        step_box(schema, whole, doc, &[], narrow)
    }

    #[test]
    fn a_step_toward_a_far_target_moves_each_field_by_at_most_its_max_delta() {
        let schema = StrategySchema::builtin();
        let served = default_doc();
        let paths = ["assemble.token_budget", "retrieve.top_k", "retrieve.fusion", "ingest.min_chars"];
        let far = space(&schema, &served, &paths, false);
        let mut target = served.clone();
        emend_core::schema::set_path(&mut target, "assemble.token_budget", json!(1900));
        emend_core::schema::set_path(&mut target, "retrieve.top_k", json!(8));
        emend_core::schema::set_path(&mut target, "retrieve.fusion", json!("weighted_sum"));
        emend_core::schema::set_path(&mut target, "ingest.min_chars", json!(200));
        let full = toward(&schema, &far, &served, &target, 1.0).unwrap();
        // token_budget 300 -> +400 (its x-max-delta), top_k 5 -> 8 (the target is within a step;
        // snapped to 9 on its x-step grid of 2 through 5), fusion takes the target's option,
        // min_chars 20 -> +40.
        assert_eq!(get_path(&full, "assemble.token_budget"), Some(&json!(700)));
        assert_eq!(get_path(&full, "retrieve.top_k"), Some(&json!(9)));
        assert_eq!(get_path(&full, "retrieve.fusion"), Some(&json!("weighted_sum")));
        assert_eq!(get_path(&full, "ingest.min_chars"), Some(&json!(60)));
        let half = toward(&schema, &far, &served, &target, 0.5).unwrap();
        assert_eq!(get_path(&half, "assemble.token_budget"), Some(&json!(500)));
        assert_eq!(get_path(&half, "ingest.min_chars"), Some(&json!(40)));
        let changes = changes_between(&far, &schema, &served, &full, "retrieve.top_k");
        assert_eq!(changes[0].path, "retrieve.top_k", "the plan's own field comes first");
        assert!(within_step(&schema, &changes));
        assert!(schema.check(&full).is_empty(), "{:?}", schema.check(&full));
    }

    #[test]
    fn the_step_box_narrows_numbers_and_drops_options_a_missing_model_needs() {
        let schema = StrategySchema::builtin();
        let served = default_doc();
        let boxed = space(&schema, &served, &["assemble.token_budget", "index.dense_kind"], true);
        let far = space(&schema, &served, &["assemble.token_budget", "index.dense_kind"], false);
        let domain = |s: &Space, path: &str| s.params.iter().find(|p| p.path == path).map(|p| p.domain.clone());
        assert_eq!(domain(&boxed, "assemble.token_budget"), Some(Domain::Int { low: 50, high: 700 }));
        // The far space keeps the whole range the invariants allow (token_budget <= its ceiling, 2000).
        assert_eq!(domain(&far, "assemble.token_budget"), Some(Domain::Int { low: 50, high: 2000 }));
        let Some(Domain::Categorical(options)) = domain(&boxed, "index.dense_kind") else { panic!("dense_kind") };
        assert!(!options.contains(&json!("minilm")), "{options:?}");
    }

    #[test]
    fn snapping_puts_numbers_on_the_step_grid_through_the_served_value() {
        let schema = StrategySchema::builtin();
        let served = default_doc();
        let far = space(&schema, &served, &["assemble.token_budget", "index.bm25_b"], false);
        let mut doc = served.clone();
        emend_core::schema::set_path(&mut doc, "assemble.token_budget", json!(672));
        emend_core::schema::set_path(&mut doc, "index.bm25_b", json!(0.8731));
        snap(&schema, &served, &mut doc, &far);
        assert_eq!(get_path(&doc, "assemble.token_budget"), Some(&json!(700)));
        assert_eq!(get_path(&doc, "index.bm25_b"), Some(&json!(0.85)));
    }

    #[test]
    fn the_ladder_fits_the_budget_with_fewer_candidates_never_a_smaller_last_rung() {
        let p = StepProposer::new(StepSettings::default());
        let sizes = search::ladder(192, 24, 3);
        let cost = |n| search::cost_of(&search::plan(n, &sizes, 3), 385);
        assert_eq!(p.fit(16, &sizes, None, 385), Some(16));
        assert_eq!(p.fit(16, &sizes, Some(cost(16)), 385), Some(16));
        let some = p.fit(16, &sizes, Some(cost(16) - 0.3), 385).unwrap();
        assert!(some < 16 && cost(some) <= cost(16) - 0.3, "{some}");
        assert_eq!(p.fit(16, &sizes, Some(cost(1) - 0.01), 385), None);
    }

    #[test]
    fn sparse_points_move_at_most_keep_fields() {
        let current = vec![0.0; 10];
        let point: Vec<f64> = (1..=10).map(f64::from).collect();
        let out = sparse(&point, &current, 7, 3);
        assert_eq!(out.iter().filter(|x| **x != 0.0).count(), 3);
        assert_eq!(out, sparse(&point, &current, 7, 3), "seeded");
    }

    #[test]
    fn the_consensus_is_the_median_of_the_best_quarter_and_the_commonest_option() {
        let schema = StrategySchema::builtin();
        let doc = default_doc();
        let far = space(&schema, &doc, &["retrieve.top_k", "retrieve.fusion"], false);
        let at = |k: i64, fusion: &str, score: f64| {
            let mut d = doc.clone();
            emend_core::schema::set_path(&mut d, "retrieve.top_k", Value::from(k));
            emend_core::schema::set_path(&mut d, "retrieve.fusion", Value::from(fusion));
            (point_of(&schema, &d), score)
        };
        // 12 scored: the best quarter (3) has top_k 40, 50, 90; two of them use weighted_sum.
        let mut scored = vec![at(40, "weighted_sum", 0.9), at(90, "rrf", 0.8), at(50, "weighted_sum", 0.7)];
        scored.extend((0..9).map(|i| at(5 + i, "rrf", 0.1)));
        let c = consensus(&scored, &far, &doc).unwrap();
        assert_eq!(get_path(&c, "retrieve.top_k"), Some(&Value::from(50)));
        assert_eq!(get_path(&c, "retrieve.fusion"), Some(&Value::from("weighted_sum")));
        assert!(consensus(&scored[..5], &far, &doc).is_none(), "too few to agree on anything");
    }

    #[test]
    fn the_last_step_taken_again_stays_in_range() {
        let schema = StrategySchema::builtin();
        let parent = default_doc();
        let mut served = parent.clone();
        emend_core::schema::set_path(&mut served, "retrieve.top_k", Value::from(15));
        emend_core::schema::set_path(&mut served, "assemble.token_budget", Value::from(7900));
        let next = ahead(&schema, &served, &parent);
        assert_eq!(get_path(&next, "retrieve.top_k"), Some(&Value::from(25)));
        assert_eq!(get_path(&next, "assemble.token_budget"), Some(&Value::from(8000)), "clamped to the maximum");
        assert_eq!(get_path(&next, "retrieve.pool"), get_path(&served, "retrieve.pool"), "unmoved fields stay");
    }

    #[test]
    fn a_journaled_search_restores_the_same_state() {
        let schema = StrategySchema::builtin();
        let doc = default_doc();
        let mut a = StepProposer::new(StepSettings::default());
        a.record = Some(SearchRecord {
            round: 2,
            served_hash: "s".into(),
            searches: 0,
            draws: 0,
            misses: 0,
            spent: 0.5,
            screened: vec![],
            scored: vec![],
            proposed: None,
            global: None,
        });
        a.remember(&schema, &doc, 0.61);
        a.screened.insert("h1".into());
        a.record.as_mut().unwrap().screened.push("h1".into());
        (a.searches, a.number, a.misses) = (3, 77, ("s".into(), 2));
        let r = a.record.as_mut().unwrap();
        (r.searches, r.draws, r.misses) = (3, 77, 2);
        let events = a.journal();
        let Some(Event::Searched(record)) = events.first() else { panic!("{events:?}") };
        let mut b = StepProposer::new(StepSettings::default());
        b.restore(std::slice::from_ref(record), &[]);
        assert_eq!((b.searches, b.number, &b.misses, &b.screened), (a.searches, a.number, &a.misses, &a.screened));
        assert_eq!(b.scored, a.scored);
        // A proposed candidate its round did not accept costs one more unit of patience.
        let mut proposed = (**record).clone();
        proposed.proposed = Some("c".into());
        let mut rejected = CandidateRecord::new("r2c1", 2, 1, "served", "retrieve.top_k::increase");
        rejected.outcome = Resolution::Rejected;
        let mut c = StepProposer::new(StepSettings::default());
        c.restore(&[proposed], &[rejected]);
        assert_eq!(c.misses.1, 3);
        assert!(a.journal().is_empty(), "journaled once");
    }
}
