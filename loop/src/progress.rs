//! What the loop reports while it runs, as data: the round, the candidate,
//! its change, the stage it reached and the numbers. The CLI decides how to
//! show it; [`fmt::Display`] gives the plain one-line form.

use std::fmt;

use emend_core::critic::CriticLabel;
use emend_core::gates::Gate;
use emend_core::planner::Change;

/// One step of a run.
#[derive(Debug, Clone, PartialEq)]
pub enum Progress {
    /// The served strategy's evaluation at the start of a round.
    Observed { round: u64, version: u64, accuracy: f64, reused: bool },
    /// A candidate reached a stage (or the proposer gave up on a direction).
    Candidate {
        round: u64,
        /// `r{round}c{n}`; `r{round}` for a direction found exhausted.
        id: String,
        /// The hypothesis (direction) key.
        hypothesis: String,
        /// The change, once there is one (the first of a multi-field candidate's).
        change: Option<Change>,
        /// How many more fields the candidate changes.
        more: usize,
        step: Step,
    },
    /// A round's search screened candidates on the search part and found none
    /// worth a confirm test: nothing is journaled, no alpha is spent.
    Searched { round: u64, evaluations_used: f64 },
    /// A hook failed after the round's change was committed (journaled as
    /// `hook_failed`; the change stands). Reported even by a quiet run.
    HookFailed { round: u64, message: String },
    /// The round's decision, applied.
    Decided { round: u64, accepted: Option<Accepted>, restored: Option<u64>, served_accuracy: f64, candidates: usize },
}

/// Where a candidate got to.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// The proposer, an evaluation or the critic model failed.
    Errored {
        reason: String,
    },
    /// The move is out of scope; no candidate was built.
    Blocked {
        reason: String,
    },
    /// Nothing new is left in the direction.
    Exhausted {
        reason: String,
    },
    Gate(Gate),
    Critic(CriticLabel),
    CriticModel(CriticLabel),
    /// The probe fell below the tolerance.
    Probe {
        delta: f64,
    },
    /// Every stage before the full test passed.
    Passed {
        probe_delta: f64,
    },
    /// The full evaluation finished.
    FullEvaluated,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Accepted {
    pub id: String,
    pub version: u64,
    /// The paired delta of the full test.
    pub delta: f64,
}

fn change_line(c: &Change) -> String {
    format!("{} {} -> {}", c.path, c.from, c.to)
}

impl fmt::Display for Progress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Progress::Observed { round, version, accuracy, reused } => write!(
                f,
                "round {round}: served v{version} accuracy {accuracy:.4}{}",
                if *reused { " (recorded evaluation)" } else { "" }
            ),
            Progress::Candidate { id, hypothesis, change, more, step, .. } => {
                let mut head = change.as_ref().map_or_else(|| hypothesis.clone(), change_line);
                if *more > 0 {
                    head.push_str(&format!(" (+{more} more field{})", if *more == 1 { "" } else { "s" }));
                }
                write!(f, "  {id} ")?;
                match step {
                    Step::Errored { reason } => write!(f, "{head}: errored ({reason})"),
                    Step::Blocked { reason } => write!(f, "{head}: blocked, out of scope ({reason})"),
                    Step::Exhausted { reason } => write!(f, "{head}: exhausted ({reason})"),
                    Step::Gate(g) => write!(f, "{head}: rejected at gate {}", g.as_str()),
                    Step::Critic(l) => write!(f, "{head}: rejected by the critic ({})", l.as_str()),
                    Step::CriticModel(l) => write!(f, "{head}: rejected by the critic model ({})", l.as_str()),
                    Step::Probe { delta } => write!(f, "{head}: rejected by the probe ({delta:+.3})"),
                    Step::Passed { probe_delta } => write!(f, "{head}: probe {probe_delta:+.3}, passed"),
                    Step::FullEvaluated => f.write_str("full evaluation done"),
                }
            }
            Progress::Searched { round, evaluations_used } => write!(
                f,
                "round {round}: the search found nothing worth a confirm test \
                 ({evaluations_used:.2} full-evaluation equivalents screened; journaled as a search, not a round)"
            ),
            Progress::HookFailed { message, .. } => write!(f, "warning: {message}"),
            Progress::Decided { round, accepted, restored, served_accuracy, candidates } => {
                match (accepted, restored) {
                    (Some(a), _) => write!(
                        f,
                        "round {round}: accepted {} as v{} ({:+.4}), served accuracy {served_accuracy:.4}",
                        a.id, a.version, a.delta
                    ),
                    (None, Some(v)) => write!(f, "round {round}: nothing accepted; restored best-ever v{v}"),
                    (None, None) => write!(f, "round {round}: nothing accepted ({candidates} candidates)"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn plain_lines() {
        let change = Change { path: "retrieve.top_k".into(), from: json!(5), to: json!(8) };
        let cand = |step| Progress::Candidate {
            round: 2,
            id: "r2c1".into(),
            hypothesis: "retrieve.top_k:increase".into(),
            change: Some(change.clone()),
            more: 0,
            step,
        };
        assert_eq!(
            cand(Step::Gate(Gate::Novelty)).to_string(),
            "  r2c1 retrieve.top_k 5 -> 8: rejected at gate novelty"
        );
        assert_eq!(
            cand(Step::Passed { probe_delta: 0.05 }).to_string(),
            "  r2c1 retrieve.top_k 5 -> 8: probe +0.050, passed"
        );
        assert_eq!(cand(Step::FullEvaluated).to_string(), "  r2c1 full evaluation done");
        let blocked = Progress::Candidate {
            round: 2,
            id: "r2c2".into(),
            hypothesis: "answer.prompt:rewrite".into(),
            change: None,
            more: 0,
            step: Step::Blocked { reason: "needs role x".into() },
        };
        assert_eq!(blocked.to_string(), "  r2c2 answer.prompt:rewrite: blocked, out of scope (needs role x)");
        let decided = Progress::Decided {
            round: 3,
            accepted: Some(Accepted { id: "r3c1".into(), version: 4, delta: 0.0353 }),
            restored: None,
            served_accuracy: 0.78,
            candidates: 5,
        };
        assert_eq!(decided.to_string(), "round 3: accepted r3c1 as v4 (+0.0353), served accuracy 0.7800");
        let none = Progress::Decided { round: 3, accepted: None, restored: None, served_accuracy: 0.7, candidates: 0 };
        assert_eq!(none.to_string(), "round 3: nothing accepted (0 candidates)");
    }
}
