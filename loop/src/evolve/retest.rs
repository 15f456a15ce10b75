//! `approve --retest`: the confirm test of a pending version against the
//! version served now (not the one it was tested against), on the same
//! confirm part, by the same rules, at the next LORD++ alpha. The test counts
//! in the LORD++ sequence whatever its verdict: its candidate record is
//! journaled either way, so the next confirm test of any round runs at the
//! alpha after it.

use emend_journal::EventLog;

use super::{Evolution, EvolveError, Result, RunState, RunSummary, Trial};
use emend_core::candidate::{Resolution, StoppedBy};
use emend_core::confirm::ConfirmState;
use emend_core::events::{CandidateRecord, Event};
use emend_core::hypothesis::Hypothesis;
use emend_core::records::summarize;
use emend_core::schema::Direction;
use emend_stats;

/// The hypothesis key of a retest's record (no field moves, so no dimension learns from it).
pub use emend_core::candidate::RETEST;

/// A retest's verdict and its record (journaled by the caller, with the
/// approval when it passed, alone when it failed).
#[derive(Debug, Clone)]
pub struct Retested {
    pub record: CandidateRecord,
    /// Every rule of the confirm test passed against the version served now.
    pub passed: bool,
    pub served: u64,
}

impl<L: EventLog + ?Sized> Evolution<'_, L> {
    /// Tests pending `version` against the served version on the confirm
    /// part. Both sides' whole-set evaluations come from the journal when it
    /// holds them (the pending version's does: it was measured before it
    /// became pending); what is missing is evaluated and journaled.
    pub fn retest(&mut self, version: u64) -> Result<Retested> {
        let observed = self.observe()?;
        let round = self.store().last_round()?;
        let (mut state, mut summary) = (RunState::default(), RunSummary::default());
        self.prepare(round.max(1), &observed, &mut state, &mut summary, false)?;
        let (artifact, _) = self.load_version(version)?;
        let (results, _) = self.ensure_evaluated(&artifact, version)?;
        let parts = state.parts.as_ref().expect("set by prepare");
        let tests = self.store().candidates()?.iter().filter(|c| c.hypothesis == RETEST).count() + 1;
        let served_hash = observed.artifact.hash.clone();
        let mut record =
            CandidateRecord::new(&format!("retest{tests}-v{version}"), round, observed.version, &served_hash, RETEST);
        record.hash = Some(artifact.hash.clone());
        let mut trial = Trial {
            record,
            artifact: None,
            full: Some(parts.confirm_of(&results)),
            known: None,
            node: Hypothesis::new(RETEST, Direction::Toggle),
        };
        let mut confirm =
            ConfirmState::replay_from(&self.project.config.gates, &self.store().candidates()?, state.lord_from);
        let base_results = parts.confirm_of(&observed.results);
        let base: Vec<emend_stats::Outcome> = base_results.iter().map(emend_stats::Outcome::from).collect();
        let input = super::RoundInput {
            round,
            observed: &observed,
            start: state.start.as_ref().expect("set by prepare"),
            parts,
            // A retest replays nothing: the served strategy's record is what the round checked.
            replay: &emend_core::gates::Replay { mismatches: 0, n: 0, example: None },
            opts: &super::RunOptions::rounds(1, 1),
            usage_before: None,
            lord_from: state.lord_from,
        };
        self.compare(&input, &base, &summarize(&base_results), &mut trial, &mut confirm);
        let mut record = trial.record;
        if record.outcome == Resolution::Errored {
            return Err(EvolveError::Retest { version, reason: record.reason });
        }
        let full = record.full.as_ref().expect("compared");
        let passed = full.accept;
        let delta = full.delta;
        if passed {
            record.outcome = Resolution::Accepted;
            record.reason =
                format!("retest of v{version} against the served v{}: passed, delta {delta:+.4}", observed.version);
        } else {
            let failed = full.failed();
            record.rejected_by = failed.first().copied().map(StoppedBy::FullRule);
            let names: Vec<&str> = failed.iter().map(|r| r.as_str()).collect();
            record.reason = format!(
                "retest of v{version} against the served v{}: failed rule(s) {}, delta {delta:+.4}",
                observed.version,
                names.join(", ")
            );
        }
        Ok(Retested { record, passed, served: observed.version })
    }
}

/// The candidate record of a retest as a journal event.
pub fn judged(r: &Retested) -> Event {
    Event::CandidateJudged(Box::new(r.record.clone()))
}
