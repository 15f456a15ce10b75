//! The round's decision, as a pure function of frozen records: which fully
//! tested candidate wins, what every other tested candidate is told (not
//! best, or the rules it failed), whether the best-ever pointer moves, and
//! whether the best-ever version is restored. [`events`] turns a decision into
//! the journal events that apply it; the clock and the user come in as
//! arguments.
//!
//! Serving under human control: in manual approval the winner becomes a
//! *pending* version (numbered and journaled, not served, never the
//! best-ever until approved); a quarantined version is never restored.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

pub use crate::config::Approval;

use crate::candidate::{FullRecord, Rule};
use crate::events::Event;
use crate::store::Best;

/// A candidate that reached the full test.
#[derive(Debug, Clone, PartialEq)]
pub struct Tested<'a> {
    /// Its index among the round's trials.
    pub trial: usize,
    pub full: &'a FullRecord,
    /// Its accuracy on the whole task set, measured by evaluating it: the
    /// caller measures the winner's ([`winner_of`]) before deciding; the
    /// others are never read and may be `None`.
    pub accuracy: Option<f64>,
}

/// The served pointer before the decision.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Serving {
    pub version: u64,
    pub accuracy: f64,
    /// An operator pinned it (`emend rollback --pin`): no auto-restore.
    pub pinned: bool,
}

/// The serving rules a decision follows.
#[derive(Debug, Clone, Copy)]
pub struct Policy<'a> {
    /// Auto-restore when the served version scores more than this below the best-ever.
    pub restore_below_best: f64,
    pub approval: Approval,
    /// Versions never restored automatically (an operator rolled back from them or quarantined them).
    pub quarantined: &'a BTreeSet<u64>,
    /// The live pending versions (version -> the served version it was tested against), oldest first.
    pub pending: &'a BTreeMap<u64, u64>,
    /// `serve.max_pending`: at most this many live pending versions.
    pub max_pending: Option<u32>,
}

/// What the round decides.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub winner: Option<Winner>,
    /// Manual approval: the winner is a pending version, not served, not the best-ever.
    pub pending: bool,
    /// An auto-restore was due but its target is quarantined: nothing is restored.
    pub held_by_quarantine: Option<u64>,
    /// Per tested candidate (by trial index), in trial order.
    pub verdicts: Vec<(usize, Verdict)>,
    /// The best-ever pointer after the round (moved when the winner beats it).
    pub best: BestAfter,
    /// The served version scores more than tau below the best-ever: serve the best again.
    pub restore: Option<Restore>,
    /// The operator's pin held back an auto-restore that would otherwise be considered.
    pub pinned: bool,
    /// Live pending versions the new pending one supersedes: those tested
    /// against the same served version, and the oldest beyond `max_pending`.
    pub supersedes: Vec<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Winner {
    pub trial: usize,
    pub version: u64,
    pub accuracy: f64,
    pub delta: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BestAfter {
    pub version: u64,
    pub accuracy: f64,
    /// The winner became the new best-ever.
    pub moved: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Restore {
    pub from: u64,
    pub from_accuracy: f64,
    pub to: u64,
    pub to_accuracy: f64,
    pub tau: f64,
}

/// What a tested candidate is told.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    Accepted {
        version: u64,
    },
    /// Passed every rule and won, but waits for a person's approval as this version.
    Pending {
        version: u64,
    },
    /// Passed every rule, but another candidate of the round gained more.
    NotBest,
    /// The rules it failed, in order (never empty).
    Failed(Vec<Rule>),
}

impl Decision {
    /// The version served after the round and its accuracy.
    pub fn served_after(&self, before: Serving) -> (u64, f64) {
        match (&self.restore, &self.winner) {
            (Some(r), _) => (r.to, r.to_accuracy),
            (None, Some(w)) if !self.pending => (w.version, w.accuracy),
            (None, _) => (before.version, before.accuracy),
        }
    }
}

/// Decides the round. The winner is the candidate that passed every rule with
/// the largest paired delta (the earliest on a tie); it becomes `next_version`,
/// served at once in auto approval, pending in manual approval (then the
/// served version and the best-ever stay where they are, and the search goes
/// on from the served version). Whatever the round decided, the best-ever
/// version is served again when the served one scores more than
/// `restore_below_best` below it, unless an operator pinned the served version and
/// nothing was served since, or the best-ever is quarantined (the caller
/// passes the best non-quarantined version; this guard keeps a stale pointer
/// from undoing an operator's rollback).
pub fn decide(tested: &[Tested<'_>], served: Serving, best: &Best, next_version: u64, policy: &Policy<'_>) -> Decision {
    let restore_below_best = policy.restore_below_best;
    let pending = policy.approval == Approval::Manual;
    let winner = winner_of(tested).map(|i| &tested[i]).map(|w| Winner {
        trial: w.trial,
        version: next_version,
        accuracy: w.accuracy.expect("the winner's whole-set accuracy is measured before the decision"),
        delta: w.full.delta,
    });
    let verdicts = tested
        .iter()
        .map(|t| {
            let v = if winner.is_some_and(|w| w.trial == t.trial) {
                if pending {
                    Verdict::Pending { version: next_version }
                } else {
                    Verdict::Accepted { version: next_version }
                }
            } else if t.full.accept {
                Verdict::NotBest
            } else {
                Verdict::Failed(t.full.failed())
            };
            (t.trial, v)
        })
        .collect();
    let served_winner = winner.filter(|_| !pending);
    let best_after = match served_winner {
        Some(w) if w.accuracy > best.accuracy => BestAfter { version: w.version, accuracy: w.accuracy, moved: true },
        _ => BestAfter { version: best.version, accuracy: best.accuracy, moved: false },
    };
    let (served_version, served_accuracy) =
        served_winner.map_or((served.version, served.accuracy), |w| (w.version, w.accuracy));
    let pinned = served.pinned && served_winner.is_none();
    let due =
        !pinned && served_accuracy < best_after.accuracy - restore_below_best && best_after.version != served_version;
    let held_by_quarantine = (due && policy.quarantined.contains(&best_after.version)).then_some(best_after.version);
    let restore = (due && held_by_quarantine.is_none()).then_some(Restore {
        from: served_version,
        from_accuracy: served_accuracy,
        to: best_after.version,
        to_accuracy: best_after.accuracy,
        tau: restore_below_best,
    });
    let supersedes = match winner {
        Some(_) if pending => superseded(policy, served.version),
        _ => Vec::new(),
    };
    Decision { winner, pending, held_by_quarantine, verdicts, best: best_after, restore, pinned, supersedes }
}

/// The live pending versions a new pending version (tested against `served`)
/// supersedes, in version order: every one tested against `served`, then the
/// oldest others until at most `max_pending` stay live with the new one.
fn superseded(policy: &Policy<'_>, served: u64) -> Vec<u64> {
    let mut out: Vec<u64> = policy.pending.iter().filter(|(_, p)| **p == served).map(|(v, _)| *v).collect();
    if let Some(max) = policy.max_pending {
        let mut live: Vec<u64> = policy.pending.keys().copied().filter(|v| !out.contains(v)).collect();
        // The new version counts as one of the live ones.
        while live.len() + 1 > max as usize && !live.is_empty() {
            out.push(live.remove(0));
        }
        out.sort_unstable();
    }
    out
}

/// The index in `tested` of the round's winner: the candidate that passed
/// every rule with the largest paired delta, the earliest on a tie.
pub fn winner_of(tested: &[Tested<'_>]) -> Option<usize> {
    let mut winner: Option<usize> = None;
    for (i, t) in tested.iter().enumerate().filter(|(_, t)| t.full.accept) {
        if winner.is_none_or(|w| t.full.delta > tested[w].full.delta) {
            winner = Some(i);
        }
    }
    winner
}

/// Who applies a decision, and when.
#[derive(Debug, Clone)]
pub struct Stamp {
    pub who: String,
    pub at: String,
}

/// The strategy a decision serves: the winner's or the best-ever's.
#[derive(Debug, Clone)]
pub struct Applied<'a> {
    pub hash: &'a str,
    /// The document without metadata.
    pub document: &'a Value,
}

/// The events that apply `decision`: the new version, the best-ever move and
/// the served moves (accept, then auto-restore), in that order. `winner` is
/// the winner's strategy (when there is one), `best_hash` the best-ever's
/// hash after the round.
pub fn events(
    decision: &Decision,
    round: u64,
    served_before: u64,
    winner: Option<(Applied<'_>, &str)>,
    best: &Best,
    stamp: &Stamp,
) -> Vec<Event> {
    let mut out = Vec::new();
    let served_changed = |from, to, hash: &str, cause: &str, reason: String| Event::ServedChanged {
        from: Some(from),
        to,
        hash: hash.to_string(),
        cause: cause.into(),
        reason,
        who: stamp.who.clone(),
        pinned: false,
        best_version: Some(decision.best.version),
        best_accuracy: Some(decision.best.accuracy),
        at: stamp.at.clone(),
    };
    if let (Some(w), Some((applied, note))) = (&decision.winner, &winner) {
        out.push(Event::StrategyVersioned {
            version: w.version,
            parent: Some(served_before),
            hash: applied.hash.to_string(),
            document: applied.document.clone(),
            origin: if decision.pending { "pending" } else { "accepted" }.into(),
            round: Some(round),
            note: note.to_string(),
        });
        for &version in &decision.supersedes {
            out.push(Event::PendingSuperseded { version, superseded_by: w.version, at: stamp.at.clone() });
        }
    }
    if let (Some(w), Some((applied, note)), false) = (&decision.winner, &winner, decision.pending) {
        if decision.best.moved {
            out.push(Event::BestChanged {
                version: w.version,
                hash: applied.hash.to_string(),
                accuracy: w.accuracy,
                harness_hash: best.harness_hash.clone(),
                dataset_hash: best.dataset_hash.clone(),
            });
        }
        out.push(served_changed(served_before, w.version, applied.hash, "accept", format!("round {round}: {note}")));
    }
    if let Some(r) = &decision.restore {
        // A best-ever that moved this round is the winner, which is served: a
        // restore always goes to the best-ever from before the round.
        let best_hash = best.hash.as_str();
        let reason = format!(
            "served v{} scores {:.4}, more than tau {} below the best-ever v{} ({:.4})",
            r.from, r.from_accuracy, r.tau, r.to, r.to_accuracy
        );
        out.push(served_changed(r.from, r.to, best_hash, "auto_restore", reason));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::candidate::Rule;
    use emend_stats::RuleKind;

    fn full(delta: f64, accept: bool, failed: &[Rule]) -> FullRecord {
        crate::candidate::sample_full(delta, accept, failed)
    }

    fn best(version: u64, accuracy: f64) -> Best {
        Best { version, hash: format!("h{version}"), accuracy, harness_hash: "H".into(), dataset_hash: "D".into() }
    }

    const SERVED: Serving = Serving { version: 3, accuracy: 0.60, pinned: false };
    static NONE: BTreeSet<u64> = BTreeSet::new();
    static NO_PENDING: BTreeMap<u64, u64> = BTreeMap::new();

    fn auto() -> Policy<'static> {
        Policy {
            restore_below_best: 0.02,
            approval: Approval::Auto,
            quarantined: &NONE,
            pending: &NO_PENDING,
            max_pending: None,
        }
    }

    fn kinds(ev: &[Event]) -> Vec<String> {
        ev.iter()
            .map(|e| match e {
                Event::StrategyVersioned { origin, .. } => format!("versioned:{origin}"),
                Event::ServedChanged { cause, to, .. } => format!("{cause}:v{to}"),
                other => other.kind().to_string(),
            })
            .collect()
    }

    #[test]
    fn manual_approval_makes_the_winner_pending_and_serves_nothing() {
        let a = full(0.05, true, &[]);
        let tested = [Tested { trial: 0, full: &a, accuracy: Some(0.65) }];
        let manual = Policy { approval: Approval::Manual, ..auto() };
        let d = decide(&tested, SERVED, &best(3, 0.60), 4, &manual);
        assert!(d.pending);
        assert_eq!(d.verdicts, vec![(0, Verdict::Pending { version: 4 })]);
        assert_eq!(d.winner.map(|w| w.version), Some(4));
        // Not served, and not the best-ever before approval.
        assert_eq!(d.served_after(SERVED), (3, 0.60));
        assert_eq!(d.best, BestAfter { version: 3, accuracy: 0.60, moved: false });
        let stamp = Stamp { who: "u@h".into(), at: "T".into() };
        let doc = serde_json::json!({"x": 1});
        let ev = events(&d, 7, 3, Some((Applied { hash: "hw", document: &doc }, "n")), &best(3, 0.60), &stamp);
        assert_eq!(kinds(&ev), ["versioned:pending"]);
        // The same round in auto approval serves it.
        let d = decide(&tested, SERVED, &best(3, 0.60), 4, &auto());
        let ev = events(&d, 7, 3, Some((Applied { hash: "hw", document: &doc }, "n")), &best(3, 0.60), &stamp);
        assert_eq!(kinds(&ev), ["versioned:accepted", "best_changed", "accept:v4"]);
    }

    #[test]
    fn a_new_pending_version_supersedes_those_tested_against_the_same_served_version() {
        let a = full(0.05, true, &[]);
        let tested = [Tested { trial: 0, full: &a, accuracy: Some(0.65) }];
        // v4 and v6 were tested against the served v3, v5 against v2 (served before a rollback).
        let live = BTreeMap::from([(4, 3), (5, 2), (6, 3)]);
        let manual = Policy { approval: Approval::Manual, pending: &live, ..auto() };
        let d = decide(&tested, SERVED, &best(3, 0.60), 7, &manual);
        assert_eq!(d.supersedes, vec![4, 6]);
        let stamp = Stamp { who: "u@h".into(), at: "T".into() };
        let doc = serde_json::json!({"x": 1});
        let ev = events(&d, 7, 3, Some((Applied { hash: "hw", document: &doc }, "n")), &best(3, 0.60), &stamp);
        assert_eq!(kinds(&ev), ["versioned:pending", "pending_superseded", "pending_superseded"]);
        // A cap of one live pending version: v5 goes too.
        let capped = Policy { max_pending: Some(1), ..manual };
        assert_eq!(decide(&tested, SERVED, &best(3, 0.60), 7, &capped).supersedes, vec![4, 5, 6]);
        // A cap of two: the new version and v5 stay live.
        let two = Policy { max_pending: Some(2), ..manual };
        assert_eq!(decide(&tested, SERVED, &best(3, 0.60), 7, &two).supersedes, vec![4, 6]);
        // Without a winner, or in auto approval, nothing is superseded.
        assert!(decide(&[], SERVED, &best(3, 0.60), 7, &manual).supersedes.is_empty());
        let auto_live = Policy { pending: &live, ..auto() };
        assert!(decide(&tested, SERVED, &best(3, 0.60), 7, &auto_live).supersedes.is_empty());
    }

    #[test]
    fn a_pending_winner_keeps_an_operators_pin_and_a_due_restore_still_happens() {
        let a = full(0.05, true, &[]);
        let tested = [Tested { trial: 0, full: &a, accuracy: Some(0.65) }];
        let manual = Policy { approval: Approval::Manual, ..auto() };
        let pinned = Serving { pinned: true, ..SERVED };
        let d = decide(&tested, pinned, &best(2, 0.70), 4, &manual);
        assert!(d.pinned && d.pending);
        assert_eq!(d.restore, None);
        // Unpinned, the served version is more than tau below the best-ever: restored, the winner stays pending.
        let d = decide(&tested, SERVED, &best(2, 0.70), 4, &manual);
        assert_eq!(d.restore.map(|r| (r.from, r.to)), Some((3, 2)));
        assert_eq!(d.served_after(SERVED), (2, 0.70));
    }

    #[test]
    fn a_quarantined_best_ever_is_never_restored() {
        let q = BTreeSet::from([2]);
        let policy = Policy { quarantined: &q, ..auto() };
        let d = decide(&[], SERVED, &best(2, 0.70), 4, &policy);
        assert_eq!(d.restore, None);
        assert_eq!(d.held_by_quarantine, Some(2));
        assert_eq!(d.served_after(SERVED), (3, 0.60));
        // Not due: nothing held either.
        let d = decide(&[], SERVED, &best(2, 0.61), 4, &policy);
        assert_eq!((d.restore, d.held_by_quarantine), (None, None));
    }

    #[test]
    fn an_acceptance_after_a_rollback_does_not_bring_back_the_version_rolled_back_from() {
        // The operator rolled v6 back to v2 (pinned, v6 quarantined); round 11 accepts v7,
        // which lifts the pin, and v7 scores more than tau below the stale best pointer v6.
        let q = BTreeSet::from([6]);
        let policy = Policy { quarantined: &q, ..auto() };
        let a = full(0.01, true, &[]);
        let tested = [Tested { trial: 0, full: &a, accuracy: Some(0.61) }];
        let pinned = Serving { version: 2, accuracy: 0.60, pinned: true };
        let d = decide(&tested, pinned, &best(6, 0.70), 7, &policy);
        assert_eq!(d.winner.map(|w| w.version), Some(7));
        assert_eq!(d.restore, None);
        assert_eq!(d.served_after(pinned), (7, 0.61));
        // Without the quarantine this is exactly the restore of v6 that the rollback must prevent.
        let d = decide(&tested, pinned, &best(6, 0.70), 7, &auto());
        assert_eq!(d.restore.map(|r| r.to), Some(6));
    }

    #[test]
    fn the_largest_delta_wins_and_the_other_passing_one_is_not_best() {
        let (a, b, c) =
            (full(0.02, true, &[]), full(0.05, true, &[]), full(0.09, false, &[Rule::CategoryVsFirstVersion]));
        let tested = [
            Tested { trial: 0, full: &a, accuracy: Some(0.62) },
            Tested { trial: 2, full: &b, accuracy: Some(0.65) },
            Tested { trial: 3, full: &c, accuracy: Some(0.69) },
        ];
        let d = decide(&tested, SERVED, &best(3, 0.60), 4, &auto());
        assert_eq!(d.winner, Some(Winner { trial: 2, version: 4, accuracy: 0.65, delta: 0.05 }));
        assert_eq!(
            d.verdicts,
            vec![
                (0, Verdict::NotBest),
                (2, Verdict::Accepted { version: 4 }),
                (3, Verdict::Failed(vec![Rule::CategoryVsFirstVersion])),
            ]
        );
        assert_eq!(d.best, BestAfter { version: 4, accuracy: 0.65, moved: true });
        assert_eq!(d.restore, None);
        assert_eq!(d.served_after(SERVED), (4, 0.65));
    }

    #[test]
    fn a_tie_goes_to_the_earliest() {
        let (a, b) = (full(0.05, true, &[]), full(0.05, true, &[]));
        let tested =
            [Tested { trial: 1, full: &a, accuracy: Some(0.65) }, Tested { trial: 4, full: &b, accuracy: Some(0.65) }];
        let d = decide(&tested, SERVED, &best(3, 0.60), 4, &auto());
        assert_eq!(d.winner.map(|w| w.trial), Some(1));
        assert_eq!(d.verdicts[1], (4, Verdict::NotBest));
    }

    #[test]
    fn no_passing_candidate_no_winner_and_failed_rules_are_listed_once() {
        let r = Rule::Stats(RuleKind::McnemarPBelowAlpha);
        let mut a = full(0.05, false, &[r, Rule::CategoryVsFirstVersion]);
        a.rules.push(a.rules[0].clone());
        let tested = [Tested { trial: 0, full: &a, accuracy: Some(0.65) }];
        let d = decide(&tested, SERVED, &best(3, 0.60), 4, &auto());
        assert_eq!(d.winner, None);
        assert_eq!(d.verdicts, vec![(0, Verdict::Failed(vec![r, Rule::CategoryVsFirstVersion]))]);
        assert_eq!(d.best, BestAfter { version: 3, accuracy: 0.60, moved: false });
        assert_eq!(d.served_after(SERVED), (3, 0.60));
    }

    #[test]
    fn a_winner_below_the_best_ever_leaves_the_best_pointer() {
        let a = full(0.01, true, &[]);
        let tested = [Tested { trial: 0, full: &a, accuracy: Some(0.61) }];
        let d = decide(&tested, SERVED, &best(2, 0.62), 4, &auto());
        assert_eq!(d.best, BestAfter { version: 2, accuracy: 0.62, moved: false });
        // 0.61 is within tau of 0.62: no restore.
        assert_eq!(d.restore, None);
    }

    #[test]
    fn the_best_ever_is_restored_when_the_served_falls_more_than_tau_below() {
        let d = decide(&[], SERVED, &best(2, 0.70), 4, &auto());
        assert_eq!(d.restore, Some(Restore { from: 3, from_accuracy: 0.60, to: 2, to_accuracy: 0.70, tau: 0.02 }));
        assert_eq!(d.served_after(SERVED), (2, 0.70));
        assert!(!d.pinned);
        // Exactly tau below is not more than tau below.
        let d = decide(&[], SERVED, &best(2, 0.62), 4, &auto());
        assert_eq!(d.restore, None);
    }

    #[test]
    fn a_winner_below_the_best_by_more_than_tau_is_accepted_then_restored() {
        let a = full(0.01, true, &[]);
        let tested = [Tested { trial: 0, full: &a, accuracy: Some(0.61) }];
        let d = decide(&tested, SERVED, &best(2, 0.70), 4, &auto());
        assert_eq!(d.winner.map(|w| w.version), Some(4));
        assert_eq!(d.restore.map(|r| (r.from, r.to)), Some((4, 2)));
    }

    #[test]
    fn a_pin_holds_back_the_restore_until_something_is_accepted() {
        let pinned = Serving { pinned: true, ..SERVED };
        let d = decide(&[], pinned, &best(2, 0.70), 4, &auto());
        assert!(d.pinned);
        assert_eq!(d.restore, None);
        let a = full(0.01, true, &[]);
        let tested = [Tested { trial: 0, full: &a, accuracy: Some(0.61) }];
        let d = decide(&tested, pinned, &best(2, 0.70), 4, &auto());
        assert!(!d.pinned);
        assert_eq!(d.restore.map(|r| r.to), Some(2));
    }

    #[test]
    fn the_served_best_is_never_restored_onto_itself() {
        let d = decide(&[], Serving { version: 2, accuracy: 0.60, pinned: false }, &best(2, 0.70), 4, &auto());
        assert_eq!(d.restore, None);
    }

    #[test]
    fn events_apply_accept_best_and_restore_in_order() {
        let a = full(0.05, true, &[]);
        let tested = [Tested { trial: 0, full: &a, accuracy: Some(0.65) }];
        let stamp = Stamp { who: "u@h".into(), at: "T".into() };
        let doc = serde_json::json!({"x": 1});
        let d = decide(&tested, SERVED, &best(3, 0.60), 4, &auto());
        let ev =
            events(&d, 7, 3, Some((Applied { hash: "hw", document: &doc }, "accepted as v4")), &best(3, 0.60), &stamp);
        let kinds: Vec<&str> = ev
            .iter()
            .map(|e| match e {
                Event::StrategyVersioned { .. } => "versioned",
                Event::BestChanged { .. } => "best",
                Event::ServedChanged { cause, .. } => cause.as_str(),
                _ => "other",
            })
            .collect();
        assert_eq!(kinds, ["versioned", "best", "accept"]);
        let Event::ServedChanged { reason, best_version, .. } = &ev[2] else { unreachable!() };
        assert_eq!(reason, "round 7: accepted as v4");
        assert_eq!(*best_version, Some(4));

        let d = decide(&[], SERVED, &best(2, 0.70), 4, &auto());
        let ev = events(&d, 7, 3, None, &best(2, 0.70), &stamp);
        let [Event::ServedChanged { from, to, hash, cause, reason, .. }] = ev.as_slice() else { panic!("{ev:?}") };
        assert_eq!((*from, *to, hash.as_str(), cause.as_str()), (Some(3), 2, "h2", "auto_restore"));
        assert_eq!(reason, "served v3 scores 0.6000, more than tau 0.02 below the best-ever v2 (0.7000)");
        assert!(events(&decide(&[], SERVED, &best(3, 0.60), 4, &auto()), 7, 3, None, &best(3, 0.6), &stamp).is_empty());
    }
}
