//! What a run did: the summary a run returns (for people and schedulers),
//! why it stopped, and what each round adds to it.

use std::collections::BTreeMap;
use std::time::Instant;

use emend_journal::EventLog;
use serde::Serialize;

use super::{Evolution, Result, Screening};
use emend_core::candidate::Resolution;
use emend_core::decide::Decision;
use emend_core::served::missing;
use emend_core::store::Recorded;

/// What a run did, for people and schedulers.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunSummary {
    pub rounds: u64,
    /// The first and last journaled round of this run; null when it journaled none.
    pub first_round: Option<u64>,
    pub last_round: Option<u64>,
    pub accepted: u64,
    pub accepted_versions: Vec<u64>,
    pub rejected_by: BTreeMap<String, u64>,
    pub candidates: u64,
    /// Candidates that errored (the evolver, an evaluation or the comparison failed).
    pub errored: u64,
    /// The first error of an errored candidate in this run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_error: Option<String>,
    pub full_evaluations: u64,
    pub probe_evaluations: u64,
    pub start_accuracy: f64,
    pub served_accuracy: f64,
    /// The best-ever version's recorded accuracy; None (null) before any
    /// round has set a best-ever version.
    pub best_accuracy: Option<f64>,
    pub served_version: u64,
    /// The best-ever version; None (null) before any round has set one.
    pub best_version: Option<u64>,
    pub rollbacks: u64,
    pub escalations: u64,
    pub elapsed_ms: u64,
    /// Full-evaluation equivalents spent by this run (k of n questions cost
    /// k/n; results reused from the journal cost 0).
    pub evaluations_used: f64,
    /// Why the run stopped.
    pub stopped: Stopped,
    /// Mean context tokens of the strategy served at the start and at the end.
    pub start_mean_tokens: Option<f64>,
    pub served_mean_tokens: Option<f64>,
    /// The served version's mean context tokens beside its parent's and v1's (as `status` prints them).
    pub served_cost: Option<emend_core::cost::VersionCost>,
    /// Versions that passed every gate and wait for approval (serve.approval: manual).
    pub pending_versions: Vec<u64>,
    /// Hooks that failed after a change was committed (journaled as `hook_failed`).
    pub hook_failures: Vec<String>,
    /// The pending version a run waited for (`stopped: pending`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub waiting: Option<u64>,
    /// The round abandoned by a stop request (journaled as `interrupted`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted_round: Option<u64>,
}

/// Why a run stopped, and what the next run does (docs/how-a-round-decides.md, "Why a run
/// stopped"; `evolve --help`): one list, the same in both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stopped {
    /// It ran the rounds it was asked for.
    #[default]
    Rounds,
    /// `--max-evals` was reached.
    MaxEvals,
    /// `--max-time` passed.
    MaxTime,
    /// A round found nothing to propose; it was not run and spent no alpha.
    Exhausted,
    /// The global search converged by its stated rule (`search.converge`
    /// trials in a row with nothing better than the served strategy worth a
    /// confirm test), possibly with budget left.
    Converged,
    /// A stop was requested (a signal, `--preempt`, a closed output): the
    /// round in progress was journaled as `interrupted`, nothing of it applied.
    Interrupted,
    /// Every candidate of the run errored (the harness, the evolver or the
    /// comparison failed): nothing was learnt, and the run exits with its own code.
    Errored,
    /// In manual approval, a pending version tested against the served one
    /// waits for `approve` or `reject`: the run did not search.
    Pending,
}

impl Stopped {
    /// Every value, in the order docs/how-a-round-decides.md and `evolve --help` list them.
    pub const ALL: [Stopped; 8] = [
        Stopped::Rounds,
        Stopped::MaxEvals,
        Stopped::MaxTime,
        Stopped::Converged,
        Stopped::Exhausted,
        Stopped::Pending,
        Stopped::Interrupted,
        Stopped::Errored,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Stopped::Rounds => "rounds",
            Stopped::MaxEvals => "max_evals",
            Stopped::MaxTime => "max_time",
            Stopped::Exhausted => "exhausted",
            Stopped::Converged => "converged",
            Stopped::Interrupted => "interrupted",
            Stopped::Errored => "errored",
            Stopped::Pending => "pending",
        }
    }

    /// Why the run stopped and what the next run will do, in one sentence.
    pub fn next_run(self) -> &'static str {
        match self {
            Stopped::Rounds => "it ran the rounds asked for (--rounds); the next run goes on searching",
            Stopped::MaxEvals => {
                "the --max-evals budget is spent (or what is left cannot pay for a round); the next run goes on with \
                 a budget of its own"
            }
            Stopped::MaxTime => "--max-time passed; the next run goes on where this one stopped",
            Stopped::Converged => {
                "the search found nothing better worth a confirm test in search.converge trials in a row; on \
                 unchanged data every later run does the same and stops at once, until the data, the harness \
                 version or the search space changes"
            }
            Stopped::Exhausted => {
                "nothing is left to propose; every later run stops at once until the data, the harness version, the \
                 search space or the served strategy changes"
            }
            Stopped::Interrupted => {
                "a stop was requested (a signal, --preempt, a closed output); the next run runs the interrupted \
                 round again, under the same number"
            }
            Stopped::Pending => {
                "a version waits for approval against the served one (serve.approval: manual; see `emend \
                 pending`); every later run stops the same way, without searching, until it is approved or rejected \
                 (or the served version changes)"
            }
            Stopped::Errored => {
                "every candidate errored (see first_error): the harness or a model role is broken; the next run \
                 tries again, and fails the same way until it is fixed (exit 5)"
            }
        }
    }
}

/// A recorded evaluation's summary, for status and reports.
pub fn recorded_accuracy(r: &Recorded) -> f64 {
    r.summary.accuracy
}

/// What one round did, for the run's summary.
pub(super) struct RoundOutcome {
    pub(super) candidates: u64,
    pub(super) probes: u64,
    pub(super) full: u64,
    pub(super) accepted: Option<u64>,
    pub(super) pending: Option<u64>,
    pub(super) restored: bool,
    pub(super) hook_failures: Vec<String>,
    pub(super) rejected_by: BTreeMap<String, u64>,
    pub(super) escalations: u64,
    pub(super) evaluations_used: f64,
    /// Its errored candidates, and the first one's error.
    pub(super) errored: u64,
    pub(super) first_error: Option<String>,
}

impl RoundOutcome {
    /// A round that journaled nothing but spent evaluations looking.
    pub(super) fn empty(evaluations_used: f64) -> RoundOutcome {
        RoundOutcome {
            candidates: 0,
            probes: 0,
            full: 0,
            accepted: None,
            pending: None,
            restored: false,
            hook_failures: Vec::new(),
            rejected_by: BTreeMap::new(),
            escalations: 0,
            evaluations_used,
            errored: 0,
            first_error: None,
        }
    }
}

impl RoundOutcome {
    /// A journaled round: its candidates, evaluations and verdicts.
    pub(super) fn of(
        s: &Screening,
        decision: &Decision,
        full: u64,
        hook_failures: Vec<String>,
        rejected_by: BTreeMap<String, u64>,
        evaluations_used: f64,
    ) -> RoundOutcome {
        RoundOutcome {
            candidates: s.trials.len() as u64,
            probes: s.probes,
            full,
            accepted: decision.winner.filter(|_| !decision.pending).map(|w| w.version),
            pending: decision.winner.filter(|_| decision.pending).map(|w| w.version),
            restored: decision.restore.is_some(),
            hook_failures,
            rejected_by,
            escalations: s.escalations.len() as u64,
            evaluations_used,
            errored: s.trials.iter().filter(|t| t.record.outcome == Resolution::Errored).count() as u64,
            first_error: s
                .trials
                .iter()
                .find(|t| t.record.outcome == Resolution::Errored)
                .map(|t| t.record.reason.clone()),
        }
    }
}

impl RunSummary {
    /// Adds a journaled round. True when it changed the served strategy (an
    /// accept or an auto-restore), whose replay check must then be redone.
    pub(super) fn count(&mut self, round: u64, outcome: RoundOutcome) -> bool {
        self.rounds += 1;
        self.last_round = Some(round);
        self.candidates += outcome.candidates;
        self.errored += outcome.errored;
        if self.first_error.is_none() {
            self.first_error = outcome.first_error;
        }
        self.full_evaluations += outcome.full;
        self.probe_evaluations += outcome.probes;
        self.escalations += outcome.escalations;
        for (k, v) in outcome.rejected_by {
            *self.rejected_by.entry(k).or_default() += v;
        }
        self.pending_versions.extend(outcome.pending);
        self.hook_failures.extend(outcome.hook_failures);
        let mut changed = false;
        if let Some(v) = outcome.accepted {
            self.accepted += 1;
            self.accepted_versions.push(v);
            changed = true;
        }
        if outcome.restored {
            self.rollbacks += 1;
            changed = true;
        }
        changed
    }
}

impl<L: EventLog + ?Sized> Evolution<'_, L> {
    pub(super) fn finish(&self, mut summary: RunSummary, started: Instant) -> Result<RunSummary> {
        let store = self.store();
        let served = store.served()?.ok_or_else(|| missing(0))?;
        summary.served_version = served.version;
        let (h, d) = (self.backend.harness_hash(), self.backend.dataset_hash());
        let served_eval = store.evaluation(&served.hash, &h, &d)?;
        summary.served_accuracy = served_eval.as_ref().map_or(0.0, |r| r.summary.accuracy);
        summary.served_mean_tokens = served_eval.as_ref().and_then(|r| r.summary.mean_context_tokens);
        summary.served_cost = store.version_cost(served.version)?;
        if let Some(best) = store.best()? {
            summary.best_version = Some(best.version);
            // Its recorded whole-set evaluation, as `status` and `show` print it.
            summary.best_accuracy = match store.evaluation(&best.hash, &h, &d)? {
                Some(r) => Some(r.summary.accuracy),
                None => store.latest_evaluation(&best.hash)?.map(|(_, s)| s.accuracy),
            };
        }
        // Versions that became pending in this run and were superseded before it ended are no option.
        let live = store.live_pending()?;
        summary.pending_versions.retain(|v| live.contains_key(v));
        if summary.rounds == 0 {
            summary.first_round = None;
            summary.last_round = None;
            summary.start_accuracy = summary.served_accuracy;
            summary.start_mean_tokens = summary.served_mean_tokens;
        }
        summary.elapsed_ms = started.elapsed().as_millis() as u64;
        Ok(summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome() -> RoundOutcome {
        RoundOutcome { candidates: 2, probes: 2, full: 1, ..RoundOutcome::empty(0.5) }
    }

    #[test]
    fn a_counted_round_adds_up_and_says_when_the_served_strategy_changed() {
        let mut s = RunSummary::default();
        let rejected = BTreeMap::from([("probe".to_string(), 1)]);
        assert!(!s.count(3, RoundOutcome { rejected_by: rejected.clone(), pending: Some(4), ..outcome() }));
        assert!(s.count(4, RoundOutcome { rejected_by: rejected, accepted: Some(5), ..outcome() }));
        assert!(s.count(5, RoundOutcome { restored: true, ..outcome() }));
        assert_eq!(
            (s.rounds, s.last_round, s.candidates, s.full_evaluations, s.probe_evaluations),
            (3, Some(5), 6, 3, 6)
        );
        assert_eq!((s.accepted, s.accepted_versions.clone(), s.rollbacks), (1, vec![5], 1));
        assert_eq!(s.pending_versions, vec![4]);
        assert_eq!(s.rejected_by["probe"], 2);
        // The run's spending is its own account, not the rounds' sum.
        assert_eq!(s.evaluations_used, 0.0);
    }
}
