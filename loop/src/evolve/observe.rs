//! Observe: the served strategy's recorded evaluation (evaluated and
//! journaled when there is none), the replay check of its record, and the
//! best-ever pointer under the current harness and dataset.

use std::collections::{BTreeMap, BTreeSet};

use emend_journal::EventLog;

use super::{Evolution, EvolveError, Result, RoundInput};
use emend_core::artifact::Artifact;
use emend_core::confirm::Parts;
use emend_core::digest::{self, Digest, Evidence};
use emend_core::events::{EvalSummary, Event, LabeledOutcome};
use emend_core::gates::{self, Replay};
use emend_core::records::{evaluated_event, question_results, summarize};
use emend_core::served::{ServedError, artifact_of, missing};
use emend_core::store::Best;
use emend_eval::backend::BackendError;

/// The served strategy as a round found it, with its results on the whole task set.
pub(super) struct Observed {
    pub(super) version: u64,
    pub(super) artifact: Artifact,
    pub(super) results: Vec<LabeledOutcome>,
    pub(super) summary: EvalSummary,
    /// Its results came from the journal (they cost nothing).
    pub(super) reused: bool,
}

impl<L: EventLog + ?Sized> Evolution<'_, L> {
    /// The recorded evaluation of a strategy under the current harness and
    /// dataset, evaluating (and journaling) it when there is none.
    pub(super) fn ensure_evaluated(
        &mut self,
        artifact: &Artifact,
        version: u64,
    ) -> Result<(Vec<LabeledOutcome>, bool)> {
        let (h, d) = (self.backend.harness_hash(), self.backend.dataset_hash());
        if let Some(rec) = self.store().evaluation(&artifact.hash, &h, &d)? {
            return Ok((rec.questions, true));
        }
        let eval = self.backend.evaluate(artifact, None).map_err(|source| EvolveError::Served { version, source })?;
        if eval.outcomes.iter().any(|o| o.error.is_some()) {
            let source = BackendError::incomplete(&eval, eval.n());
            return Err(EvolveError::Served { version, source });
        }
        let results = question_results(&eval);
        let mut event = evaluated_event(&artifact.hash, &h, &d, &results);
        if let (Event::Evaluated { lifecycle, .. }, emend_harness::Protocol::Replay { every_sessions }) =
            (&mut event, self.project.config.harness.protocol())
        {
            let half_life = artifact.strategy.as_ref().map_or(0.0, |s| s.retrieve.recency_half_life_days);
            let mut l = emend_harness::replay::Lifecycle::new(every_sessions, half_life, &[]);
            if let Some(s) = &artifact.strategy {
                l = l.with_maintenance(&s.ingest.consolidate);
            }
            *lifecycle = Some(Box::new(l));
        }
        self.log.append(vec![event.to_new()])?;
        Ok((results, false))
    }

    pub(super) fn load_version(&self, version: u64) -> Result<(Artifact, Option<u64>)> {
        let store = self.store();
        let info = store.version(version)?.ok_or_else(|| missing(version))?;
        let doc = store.document(&info.hash)?.ok_or_else(|| missing(version))?;
        let mut a = artifact_of(self.schema, &info.hash, doc)?;
        a.version = Some(version);
        Ok((a, info.parent))
    }

    pub(super) fn observe(&mut self) -> Result<Observed> {
        let served = self.store().served()?.ok_or(ServedError::NothingServed)?;
        let (artifact, _) = self.load_version(served.version)?;
        let (results, reused) = self.ensure_evaluated(&artifact, served.version)?;
        let summary = summarize(&results);
        Ok(Observed { version: served.version, artifact, results, summary, reused })
    }

    /// The round's evidence digested ([`emend_core::digest`]): the served
    /// results on the search part against its parent's recorded evaluation
    /// under the current harness and dataset, and the older versions of the
    /// lineage as far back as each has one. Nothing is evaluated for it.
    pub(super) fn digest(&self, input: &RoundInput<'_>, search: &[LabeledOutcome]) -> Result<Digest> {
        let (h, d) = (self.backend.harness_hash(), self.backend.dataset_hash());
        let store = self.store();
        let mut lineage: Vec<(u64, Vec<LabeledOutcome>)> = Vec::new();
        let mut at = store.version(input.observed.version)?.and_then(|v| v.parent);
        while let Some(v) = at {
            let Some(info) = store.version(v)? else { break };
            let Some(rec) = store.evaluation(&info.hash, &h, &d)? else { break };
            lineage.push((v, rec.questions));
            at = info.parent;
        }
        let older: Vec<&[LabeledOutcome]> = lineage.iter().skip(1).map(|(_, r)| r.as_slice()).collect();
        let candidates: Vec<_> = store.candidates()?.iter().map(|c| c.recent_change()).collect();
        Ok(digest::digest(&Evidence {
            round: input.round,
            version: input.observed.version,
            results: search,
            previous: lineage.first().map(|(v, r)| (*v, r.as_slice())),
            older: &older,
            candidates: &candidates,
        }))
    }

    /// Re-evaluates the served strategy on a seeded probe-sized sample of the
    /// search part and compares with its record. Returns the replay and the
    /// questions it evaluated.
    pub(super) fn replay(&self, observed: &Observed, parts: &Parts) -> Result<(Replay, usize)> {
        let cfg = &self.project.config;
        let search: Vec<(String, String)> =
            self.backend.questions().into_iter().filter(|(id, _)| parts.search.contains(id)).collect();
        let ids = gates::probe_sample(&search, cfg.gates.probe_size, cfg.loop_.seed ^ 0x5EED_0F2E_91A7);
        let eval = self
            .backend
            .evaluate(&observed.artifact, Some(&ids))
            .map_err(|source| EvolveError::Served { version: observed.version, source })?;
        let fresh = question_results(&eval);
        let wanted: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
        let recorded: BTreeMap<&str, bool> = observed
            .results
            .iter()
            .filter(|q| wanted.contains(q.id.as_str()))
            .map(|q| (q.id.as_str(), q.correct))
            .collect();
        let mut mismatches = 0;
        let mut example = None;
        for q in &fresh {
            if recorded.get(q.id.as_str()) != Some(&q.correct) {
                mismatches += 1;
                example.get_or_insert_with(|| q.id.clone());
            }
        }
        if fresh.len() != recorded.len() {
            mismatches = mismatches.max(fresh.len().abs_diff(recorded.len()));
        }
        Ok((Replay { mismatches, n: fresh.len(), example }, ids.len()))
    }

    /// The best-ever pointer under the current harness and dataset; when they
    /// changed, or the pointer's accuracy is not its recorded evaluation's,
    /// every version is re-scored first (from the records, or cheaply with
    /// the stage cache).
    pub(super) fn ensure_best(&mut self, observed: &Observed, used: &mut f64) -> Result<(Best, Vec<Event>)> {
        let (h, d) = (self.backend.harness_hash(), self.backend.dataset_hash());
        // Quarantined, pending and rejected versions are never the best-ever.
        let ineligible = self.store().ineligible()?;
        // The pointer is kept only when its accuracy is the best-ever's
        // recorded whole-set evaluation (older journals could hold an
        // estimate there): otherwise it is recomputed from the records.
        if let Some(best) = self.store().best()?
            && best.harness_hash == h
            && best.dataset_hash == d
            && !ineligible.contains(&best.version)
            && self.store().evaluation(&best.hash, &h, &d)?.is_some_and(|r| r.summary.accuracy == best.accuracy)
        {
            return Ok((best, vec![]));
        }
        let mut best: Option<(u64, String, f64)> = None;
        for info in self.store().versions()?.into_iter().filter(|v| !ineligible.contains(&v.version)) {
            let accuracy = if info.hash == observed.artifact.hash {
                observed.summary.accuracy
            } else {
                let (a, _) = self.load_version(info.version)?;
                let (results, reused) = self.ensure_evaluated(&a, info.version)?;
                if !reused {
                    *used += 1.0;
                }
                summarize(&results).accuracy
            };
            if best.as_ref().is_none_or(|b| accuracy > b.2) {
                best = Some((info.version, info.hash.clone(), accuracy));
            }
        }
        let (version, hash, accuracy) = best.ok_or_else(|| missing(observed.version))?;
        let event = Event::BestChanged {
            version,
            hash: hash.clone(),
            accuracy,
            harness_hash: h.clone(),
            dataset_hash: d.clone(),
        };
        Ok((Best { version, hash, accuracy, harness_hash: h, dataset_hash: d }, vec![event]))
    }
}
