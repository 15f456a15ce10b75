//! Pruning the winner's diff: fields whose reversion to the served value
//! costs little go back (in groups, then one by one), and each field kept is
//! credited with its marginal contribution.

use super::*;

/// A field pruning keeps, with its loss when reverted alone: (share of the
/// search part, questions evaluated, the hash of the strategy it was reverted
/// from, the questions only the kept / only the reverted strategy answers);
/// None when it could not be measured.
pub(super) type Kept = (String, Option<(f64, usize, String, (u64, u64))>);

/// A pruned winner: the strategy, its search-part results and its credits.
pub(super) struct Pruned {
    pub(super) doc: Value,
    pub(super) index: usize,
    pub(super) steps: Vec<PruneStep>,
    pub(super) credits: Vec<Credit>,
}

impl JumpProposer {
    /// `doc` with `paths` back at their served values, repaired (a field an
    /// invariant ties to a reverted one moves with it, e.g. `retrieve.top_k`
    /// down to a reverted `retrieve.pool`) and with inert fields reset;
    /// None when no valid strategy results.
    pub(super) fn reverted(ask: &Ask<'_>, doc: &Value, paths: &[String]) -> Option<Value> {
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
    pub(super) fn importance(&self, ask: &Ask<'_>, doc: &Value) -> impl Fn(&String) -> f64 + use<> {
        let served = &ask.served.value;
        let mut by_path: BTreeMap<String, f64> = BTreeMap::new();
        if let Some(space) = whole_space(ask) {
            let history = self.history(&space, served);
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

    /// Prunes the strategy scored at `winner` (see the module doc). With
    /// `limit` (the cheaper step) a reversion must also keep the strategy's
    /// mean context tokens within it: pruning may not give the saving back.
    pub(super) fn prune(&mut self, ask: &Ask<'_>, winner: usize, limit: Option<f64>) -> Result<Pruned, String> {
        let served = &ask.served.value;
        let n = self.order.len();
        let tol = self.settings.prune_tolerance as i64;
        let full = self.cost(ask, n);
        let mut doc = materialize(served, &self.scored[winner].values);
        let mut cur = winner;
        let price = self.settings.price;
        let start_worth = self.scored[winner].worth(n, price);
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
            // Answers lost (under a price, answers' worth less the context saved).
            let lost = self.scored[cur].worth(k, price) - self.scored[r].worth(k, price);
            tracing::debug!(fields = ?g, k, lost, left = self.left(ask), "prune step");
            let cheap = limit.is_none_or(|l| self.scored[r].tokens.is_some_and(|t| t <= l));
            let within = k == n
                && cheap
                && lost <= tol as f64 + 1e-9
                && start_worth - self.scored[r].worth(n, price) <= 2.0 * tol as f64 + 1e-9;
            let lost = self.scored[cur].hits(k) - self.scored[r].hits(k);
            steps.push(PruneStep { fields: g.clone(), questions: k, lost, reverted: within });
            if within {
                doc = test;
                cur = r;
                queue.drain(..g.len());
            } else if g.len() == 1 {
                let counts = self.scored[cur].discordant(&self.scored[r], k);
                kept.push((queue.remove(0), Some((lost as f64 / k as f64, k, self.scored[cur].hash.clone(), counts))));
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
    pub(super) fn credits(
        &mut self,
        ask: &Ask<'_>,
        doc: &Value,
        cur: usize,
        kept: Vec<Kept>,
    ) -> Result<Vec<Credit>, String> {
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
                    let counts = self.scored[cur].discordant(&self.scored[r], k);
                    measured = Some((lost as f64 / k as f64, k, final_hash.clone(), counts));
                    earlier = false;
                }
            }
            let (Some(from), Some(to)) = (get_path(served, &path), get_path(doc, &path)) else { continue };
            credits.push(Credit {
                key: hypothesis::key(&path, emend_core::schema::Direction::of_move(from, to)),
                path: path.clone(),
                from: from.clone(),
                to: to.clone(),
                delta: measured.as_ref().map(|m| m.0),
                questions: measured.as_ref().map_or(0, |m| m.1),
                discordant: measured.as_ref().map(|m| m.3),
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
