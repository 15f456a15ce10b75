//! Racing trials: the search part's order and history, scoring a strategy
//! question by question against the incumbent with early drops, and the
//! sampler's draws (Layer A's prior on the random start).

use super::*;

impl JumpProposer {
    /// The search part's racing order and, when it is new to this run, the
    /// history journaled on the same part; the served strategy joins it.
    pub(super) fn setup(&mut self, ask: &Ask<'_>) {
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
            let points: Vec<(bool, ScoredPoint)> =
                self.restored.iter().filter(|(p, ..)| *p == self.part).map(|(_, old, s)| (*old, s.clone())).collect();
            for (old, p) in points {
                if let Some(s) = restored(old, p, n) {
                    self.add(s);
                }
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
        let by_id: BTreeMap<&str, &LabeledOutcome> = ask.results.iter().map(|r| (r.id.as_str(), r)).collect();
        let correct: Vec<bool> = self.order.iter().map(|id| by_id[id.as_str()].correct).collect();
        let score = correct.iter().filter(|c| **c).count() as f64 / correct.len().max(1) as f64;
        let tokens = mean_tokens(ask.results);
        self.results
            .entry(hash.clone())
            .or_insert_with(|| ask.results.iter().map(|r| (r.id.clone(), r.clone())).collect());
        let values = point_of(ask.schema, served);
        if !self.by_hash.contains_key(&hash) {
            // Journaled like a trial, so that a resumed run rebuilds the same history in the same order.
            let s = Scored {
                hash,
                values,
                correct,
                tokens,
                score,
                estimate: None,
                stage: "served",
                started: None,
                duration_ms: None,
            };
            if let Some(r) = &mut self.record {
                r.scored.push(s.point());
            }
            self.add(s);
        }
    }

    /// Adds (or, when it was scored on fewer questions, replaces) a scored strategy.
    pub(super) fn add(&mut self, s: Scored) -> usize {
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

    pub(super) fn cost(&self, ask: &Ask<'_>, questions: usize) -> f64 {
        questions as f64 / ask.total_questions.max(1) as f64
    }

    /// What is left of `--max-evals` for this search (infinite without one).
    pub(super) fn left(&self, ask: &Ask<'_>) -> f64 {
        ask.budget_left.map_or(f64::INFINITY, |b| b - self.spent)
    }

    /// The incumbent: the best strategy scored on the whole search part that
    /// is the served one or may still be proposed (never evaluated by the
    /// journal, within `cost.max_tokens`), and is the strategy it names under
    /// the served text fields.
    pub(super) fn incumbent(&self, ask: &Ask<'_>) -> usize {
        let served = artifact::content_hash(&ask.served.value);
        let n = self.order.len();
        let mut best = self.by_hash[&served];
        for (i, s) in self.scored.iter().enumerate() {
            let eligible = s.correct.len() == n
                && (s.hash == served
                    || (!ask.seen.contains(&s.hash)
                        && self.affordable(s)
                        && artifact::content_hash(&materialize(&ask.served.value, &s.values)) == s.hash));
            if eligible && s.value(self.settings.price) > self.scored[best].value(self.settings.price) + 1e-12 {
                best = i;
            }
        }
        best
    }

    /// Evaluates `doc` on the questions of `ids` it has no result for yet.
    pub(super) fn evaluate(&mut self, ask: &Ask<'_>, doc: &Value, hash: &str, ids: &[String]) -> Result<(), String> {
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
    pub(super) fn race(
        &mut self,
        ask: &Ask<'_>,
        doc: &Value,
        against: usize,
        stage: &'static str,
    ) -> Result<usize, String> {
        let hash = artifact::content_hash(doc);
        let n = self.order.len();
        // A strategy is scored once: a complete one is not raced again.
        if let Some(&i) = self.by_hash.get(&hash)
            && self.scored[i].correct.len() == n
        {
            return Ok(i);
        }
        let started = emend_core::events::now_rfc3339_millis();
        let clock = std::time::Instant::now();
        let mut done = 0;
        for k in emend_stats::race_looks(n, self.settings.first_look) {
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
            if self.settings.price.is_some() {
                let taken: Vec<&LabeledOutcome> = self.order[..k].iter().map(|id| &known[id]).collect();
                let charge = |t: Option<f64>| self.settings.price.zip(t).map_or(0.0, |(p, t)| p * t);
                let (base, cand) = (self.scored[against].charge(self.settings.price), charge(mean_tokens_of(&taken)));
                (improved, regressed) = priced(improved, regressed, base, cand, k);
            }
            if k < n && emend_stats::race_drops(improved, regressed, self.settings.race_level) {
                break;
            }
        }
        // Raced again no further than before (against another incumbent):
        // the same answers, already recorded.
        if let Some(&i) = self.by_hash.get(&hash)
            && self.scored[i].correct.len() >= done
        {
            return Ok(i);
        }
        let known = &self.results[&hash];
        let correct: Vec<bool> = self.order[..done].iter().map(|id| known[id].correct).collect();
        let taken: Vec<&LabeledOutcome> = self.order[..done].iter().map(|id| &known[id]).collect();
        let tokens = mean_tokens_of(&taken);
        let hits = correct.iter().filter(|c| **c).count() as i64;
        let estimate = (done < n).then(|| self.estimate(against, hits, done)).flatten();
        let s = Scored {
            hash,
            values: point_of(ask.schema, doc),
            score: hits as f64 / done.max(1) as f64,
            correct,
            tokens,
            estimate,
            stage,
            started: Some(started),
            duration_ms: Some(u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX)),
        };
        if let Some(r) = &mut self.record {
            r.scored.push(s.point());
        }
        Ok(self.add(s))
    }
}

impl JumpProposer {
    /// The estimate a trial raced out after `done` questions with `hits`
    /// correct carries under `search.raced_out` (None under `rank`): the
    /// incumbent's score plus the paired difference per question evaluated,
    /// shrunk toward a tie by `first_look` questions under `shrunk`.
    fn estimate(&self, against: usize, hits: i64, done: usize) -> Option<f64> {
        let inc = &self.scored[against];
        let diff = (hits - inc.hits(done)) as f64;
        match self.settings.raced_out {
            RacedOut::Rank => None,
            RacedOut::Deficit => Some(inc.score + diff / done as f64),
            RacedOut::Shrunk => Some(inc.score + diff / (done + self.settings.first_look) as f64),
        }
    }
}

/// A point journaled by an earlier segment as this run scores it, on a part
/// of `n` questions; `old` when its journal predates `search.raced_out`, so
/// that a raced-out point's score is an estimate (kept as one), not a
/// measurement. None when it records no hash, questions or answers.
fn restored(old: bool, p: ScoredPoint, n: usize) -> Option<Scored> {
    let (hash, k, hex) = (p.hash?, p.questions?, p.correct?);
    let correct = hex_to_bits(&hex, k.min(n))?;
    let stage = match p.stage.as_deref() {
        Some("prune") => "prune",
        Some("consensus") => "consensus",
        Some("served") => "served",
        _ => "trial",
    };
    let hits = correct.iter().filter(|c| **c).count();
    let (score, estimate) = if old && correct.len() < n {
        (hits as f64 / correct.len().max(1) as f64, Some(p.score))
    } else {
        (p.score, p.estimate)
    };
    Some(Scored {
        hash,
        values: p.values,
        correct,
        tokens: p.tokens,
        score,
        estimate,
        stage,
        started: p.started,
        duration_ms: p.duration_ms,
    })
}

pub(super) fn mean_tokens(results: &[LabeledOutcome]) -> Option<f64> {
    mean_tokens_of(&results.iter().collect::<Vec<_>>())
}

pub(super) fn mean_tokens_of(results: &[&LabeledOutcome]) -> Option<f64> {
    let t: Option<Vec<f64>> = results.iter().map(|r| r.tokens).collect();
    t.filter(|t| !t.is_empty()).map(|t| t.iter().sum::<f64>() / t.len() as f64)
}

impl JumpProposer {
    /// What the sampler learns from: every scored strategy in `space` (see
    /// [`Scored::learnt`]), over `cost.max_tokens` ranked as infeasible by its excess.
    pub(super) fn history(&self, space: &Space, served: &Value) -> Vec<search::Trial> {
        let n = self.order.len();
        self.scored
            .iter()
            .filter_map(|s| {
                let (score, stopped_at) = s.learnt(n, self.settings.price);
                let point = space.encode(&materialize(served, &s.values)).ok()?;
                Some(search::Trial { point, score, stopped_at, violation: self.violation(s) })
            })
            .collect()
    }

    /// The sampler's next new strategy, or None when draws keep repeating
    /// strategies already scored.
    pub(super) fn draw(&mut self, ask: &Ask<'_>, space: &Space, focus: &[String]) -> Option<Value> {
        let served = &ask.served.value;
        let history = self.history(space, served);
        let config = TpeConfig {
            n_startup_trials: self.settings.startup,
            seed: self.settings.seed ^ 0x9B05_688C_2B3E_6C1F,
            multivariate: self.settings.multivariate,
            ..TpeConfig::default()
        };
        let tpe = Tpe::new(space.clone(), config);
        let forest = search::Forest::new(
            space.clone(),
            search::ForestConfig { n_startup_trials: self.settings.startup, seed: config.seed, ..Default::default() },
        );
        let current = space.encode(served).ok()?;
        for attempt in 0..64 {
            self.draws += 1;
            let mut point = match (attempt < 32, self.settings.sampler) {
                (true, Sampler::Tpe) => tpe.ask(&history, self.draws),
                (true, Sampler::Forest) => forest.ask(&history, self.draws),
                (false, _) => tpe.random(self.draws),
            };
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
pub(super) fn prior(point: &mut [f64], current: &[f64], space: &Space, focus: &[String], seed: u64) {
    use rand::RngExt;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    for (i, p) in space.params.iter().enumerate() {
        let keep = rng.random::<f64>() < 0.5;
        if keep && !focus.contains(&p.path) {
            point[i] = current[i];
        }
    }
}
