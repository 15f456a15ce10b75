//! Apply a round's decision: the winner's evaluation on the whole task set,
//! the round's records and the decision's events appended in one journal
//! batch, then the served file rewritten and the hooks run.

use std::collections::{BTreeMap, BTreeSet};

use emend_journal::EventLog;

use super::{Evolution, EvolveError, Result, RoundInput, Screening, Trial};
use emend_core::config::SplitConfig;
use emend_core::confirm::Parts;
use emend_core::decide::{self, Applied, Decision, Serving, Stamp};
use emend_core::digest::Digest;
use emend_core::events::{Event, LabeledOutcome, RoundRecord, SplitRecord, now_rfc3339, who};
use emend_core::hypothesis::Hypothesis;
use emend_core::layer_a;
use emend_core::records::{evaluated_event, question_results};
use emend_core::served::{strip_metadata, write_served};
use emend_core::store::Best;
use emend_eval::backend::BackendError;
use emend_eval::llm;

impl<L: EventLog + ?Sized> Evolution<'_, L> {
    /// The winner's results on the whole task set, when the round has a
    /// winner; evaluating its search part afresh counts in `used`.
    pub(super) fn completed(
        &self,
        parts: &Parts,
        trials: &[Trial],
        winner: Option<usize>,
        used: &mut f64,
    ) -> Result<Option<(usize, Vec<LabeledOutcome>)>> {
        let Some(w) = winner else { return Ok(None) };
        let t = &trials[w];
        if t.known.as_ref().is_none_or(|k| k.len() != parts.search.len()) {
            *used += parts.cost(parts.search.len());
        }
        let c = self.complete(parts, t)?;
        Ok(Some((w, c)))
    }

    /// The winner's results on the whole task set: its confirm-part results
    /// and a fresh evaluation of the search part, sorted by id.
    fn complete(&self, parts: &Parts, t: &Trial) -> Result<Vec<LabeledOutcome>> {
        let artifact = t.artifact.as_ref().expect("the winner keeps its artifact");
        let ids: Vec<String> = parts.search.iter().cloned().collect();
        if let Some(known) = t.known.as_ref().filter(|k| k.len() == ids.len()) {
            let mut all = known.clone();
            all.extend(t.full.as_ref().expect("the winner was tested").iter().cloned());
            all.sort_by(|a, b| a.id.cmp(&b.id));
            return Ok(all);
        }
        let eval = self.backend.evaluate(artifact, Some(&ids)).map_err(EvolveError::Winner)?;
        if eval.outcomes.iter().any(|o| o.error.is_some()) || eval.n() != ids.len() {
            return Err(EvolveError::Winner(BackendError::incomplete(&eval, ids.len())));
        }
        let mut all = question_results(&eval);
        all.extend(t.full.as_ref().expect("the winner was tested").iter().cloned());
        all.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(all)
    }

    /// The round's records before the decision's own events: evaluations of
    /// fully evaluated candidates, the touched hypotheses, escalations and
    /// every gate record.
    pub(super) fn batch(
        &self,
        events: &mut Vec<Event>,
        s: &Screening,
        completed: Option<&(usize, Vec<LabeledOutcome>)>,
        tree: &BTreeMap<String, Hypothesis>,
    ) -> Result<()> {
        let (h, d) = (self.backend.harness_hash(), self.backend.dataset_hash());
        // Only a whole-task-set evaluation is journaled as an evaluation: the winner's.
        if let Some((i, results)) = completed
            && let Some(hash) = &s.trials[*i].record.hash
        {
            events.push(evaluated_event(hash, &h, &d, results));
        }
        let touched: BTreeSet<&str> = s
            .trials
            .iter()
            .flat_map(|t| std::iter::once(t.node.key.as_str()).chain(t.record.credits.iter().map(|c| c.key.as_str())))
            .collect();
        let before = self.store().tree()?;
        for (k, node) in tree {
            if touched.contains(k.as_str()) || before.get(k) != Some(node) {
                events.push(Event::HypothesisUpdated { node: node.clone() });
            }
        }
        events.extend(s.escalations.iter().cloned());
        events.extend(s.trials.iter().map(|t| Event::CandidateJudged(Box::new(t.record.clone()))));
        Ok(())
    }

    /// Appends the round (its records, the decision's events and the round
    /// summary) in one batch, then rewrites the served file when it changed.
    /// Returns the number of full evaluations and the hooks that failed.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn apply(
        &mut self,
        input: &RoundInput<'_>,
        mut events: Vec<Event>,
        s: &Screening,
        decision: &Decision,
        best: &Best,
        rejected_by: &BTreeMap<String, u64>,
        extras: RoundExtras,
    ) -> Result<(u64, Vec<String>)> {
        let RoundExtras { split, digest, evaluations_used } = extras;
        let observed = input.observed;
        let winner = decision.winner.map(|w| {
            let t = &s.trials[w.trial];
            let a = t.artifact.as_ref().expect("the winner keeps its artifact");
            (a.hash.clone(), strip_metadata(&a.value), t.record.reason.clone())
        });
        let stamp = Stamp { who: who(), at: now_rfc3339() };
        events.extend(decide::events(
            decision,
            input.round,
            observed.version,
            winner.as_ref().map(|(hash, doc, note)| (Applied { hash, document: doc }, note.as_str())),
            best,
            &stamp,
        ));
        let serving = Serving { version: observed.version, accuracy: observed.summary.accuracy, pinned: false };
        let (served_version, served_accuracy) = decision.served_after(serving);
        let full_evals = s.trials.iter().filter(|t| t.full.is_some()).count() as u64;
        events.push(Event::RoundFinished(Box::new(RoundRecord {
            round: input.round,
            served_version_before: observed.version,
            served_version_after: served_version,
            served_accuracy,
            best_version: Some(decision.best.version),
            best_accuracy: Some(decision.best.accuracy),
            // A pending winner is not served: the round accepted nothing into service.
            accepted: decision.winner.filter(|_| !decision.pending).map(|w| s.trials[w.trial].record.id.clone()),
            candidates: s.trials.len(),
            probe_evaluations: s.probes as usize,
            full_evaluations: full_evals as usize,
            rejected_by: rejected_by.iter().map(|(k, v)| (k.clone(), *v as usize)).collect(),
            diagnosis: layer_a::diagnose(&input.parts.search_of(&observed.results), 0).counts,
            alpha: s.alpha,
            at: stamp.at.clone(),
            llm: match (self.backend.models(), input.usage_before) {
                (Some(m), Some(before)) => llm::usage_since(&m.usage(), before),
                _ => llm::Usage::new(),
            },
            split: Some(split),
            evaluations_used,
            digest: Some(Box::new(digest)),
        })));
        self.log.append(events.iter().map(Event::to_new).collect())?;
        // One hook run per round for the net change of the served version.
        let mut hook_failures = Vec::new();
        if let Some(r) = &decision.restore {
            let (a, parent) = self.load_version(r.to)?;
            write_served(self.project, r.to, parent, &best.hash, &strip_metadata(&a.value))?;
            let change = crate::hooks::Change::AutoRestore;
            hook_failures.extend(crate::hooks::on_served(
                self.project,
                &mut *self.log,
                Some(observed.version),
                r.to,
                &best.hash,
                change,
            ));
        } else if let (Some(w), Some((hash, doc, _)), false) = (&decision.winner, &winner, decision.pending) {
            write_served(self.project, w.version, Some(observed.version), hash, doc)?;
            let change = crate::hooks::Change::Accepted;
            hook_failures.extend(crate::hooks::on_served(
                self.project,
                &mut *self.log,
                Some(observed.version),
                w.version,
                hash,
                change,
            ));
        }
        if let (Some(w), Some((hash, _, _)), true) = (&decision.winner, &winner, decision.pending) {
            let (served_now, _) = decision.served_after(serving);
            hook_failures.extend(crate::hooks::on_pending(
                self.project,
                &mut *self.log,
                w.version,
                observed.version,
                hash,
                served_now,
                &decision.supersedes,
            ));
        }
        Ok((full_evals, hook_failures))
    }
}

/// What the round record takes from the round beyond the decision: the
/// split, the digest the planner read, the evaluations spent.
pub(super) struct RoundExtras {
    pub(super) split: SplitRecord,
    pub(super) digest: Digest,
    pub(super) evaluations_used: f64,
}

/// The split the round ran on, for its round record.
pub(super) fn split_record(split: &SplitConfig, parts: &Parts, lord_from: u64) -> SplitRecord {
    SplitRecord {
        confirm_fraction: split.confirm_fraction,
        seed: split.seed,
        search: parts.search.len(),
        confirm: parts.confirm.len(),
        confirm_hash: emend_core::artifact::sha256_hex(parts.confirm_ids.join("\n").as_bytes()),
        unit: Some(parts.design.unit),
        assignment: Some(emend_core::events::HASH_ASSIGNMENT.to_string()),
        conversations: Some(parts.conversations),
        confirm_conversations: Some(parts.confirm_conversations),
        lord_from_round: (lord_from > 0).then_some(lord_from),
    }
}
