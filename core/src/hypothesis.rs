//! The UCB1 hypothesis tree. A hypothesis is a direction on a dimension
//! (`retrieve.top_k::increase`); its node keeps visits, rewards, status and
//! the evidence for and against it.
//!
//! `UCB(h) = mean_reward(h) + c(a) * sqrt(ln N / n_h)`, with
//! `c(a) = c0 * (1 - a / 2)`: the exploration constant shrinks (to half) as
//! the actionability `a` — the share of current failures the direction can
//! explain — grows, so well-diagnosed directions are exploited and weakly
//! diagnosed ones explored. Rewards are paired accuracy deltas scaled so that
//! 5 percentage points is 1, clipped to [-1, 1].

use serde::{Deserialize, Serialize};

use crate::schema::Direction;

/// Accuracy delta that counts as a reward of 1.
pub const REWARD_SCALE: f64 = 0.05;
/// Consecutive non-improving evaluations (since the last confirmation) that refute a direction.
pub const REFUTE_AFTER: u32 = 2;
/// Out-of-scope blocks after which a candidate class is escalated to a person.
pub const ESCALATE_AFTER: u32 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Open: may be tried.
    Active,
    /// A candidate in this direction was accepted; may be tried again.
    Confirmed,
    /// Tried and did not help twice in a row; reopened when the served strategy changes.
    Refuted,
    /// Cannot move further (at the schema's bound) under the current served strategy.
    Exhausted,
    /// Blocked as out of scope three times: waits for a person.
    Escalated,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Active => "active",
            Status::Confirmed => "confirmed",
            Status::Refuted => "refuted",
            Status::Exhausted => "exhausted",
            Status::Escalated => "escalated",
        }
    }

    /// May the planner propose this direction?
    pub fn open(self) -> bool {
        matches!(self, Status::Active | Status::Confirmed)
    }
}

/// A frozen hypothesis node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hypothesis {
    pub key: String,
    pub path: String,
    pub direction: Direction,
    pub visits: u32,
    pub total_reward: f64,
    pub status: Status,
    /// Best paired accuracy delta seen (full test, or probe when that is all there was).
    pub best_delta: Option<f64>,
    pub evidence_for: u32,
    pub evidence_against: u32,
    /// Non-improving evaluations (delta <= 0) since the last confirmation.
    pub streak_against: u32,
    /// Evaluations not accepted since the last confirmation (the evolver halves its move for each).
    #[serde(default)]
    pub misses: u32,
    /// Times the direction was blocked as out of scope.
    pub blocked: u32,
}

pub fn key(path: &str, direction: Direction) -> String {
    format!("{path}::{}", direction.as_str())
}

impl Hypothesis {
    pub fn new(path: &str, direction: Direction) -> Hypothesis {
        Hypothesis {
            key: key(path, direction),
            path: path.to_string(),
            direction,
            visits: 0,
            total_reward: 0.0,
            status: Status::Active,
            best_delta: None,
            evidence_for: 0,
            evidence_against: 0,
            streak_against: 0,
            misses: 0,
            blocked: 0,
        }
    }

    pub fn mean_reward(&self) -> f64 {
        if self.visits == 0 { 0.0 } else { self.total_reward / self.visits as f64 }
    }

    /// The UCB1 score with `total_visits` = N over the tree. Unvisited nodes score infinity.
    pub fn ucb(&self, total_visits: u32, actionability: f64, c0: f64) -> f64 {
        if self.visits == 0 {
            return f64::INFINITY;
        }
        let c = c0 * (1.0 - actionability.clamp(0.0, 1.0) / 2.0);
        let n = f64::from(total_visits.max(1));
        self.mean_reward() + c * (n.ln() / f64::from(self.visits)).sqrt()
    }

    /// Records an evaluated candidate: its paired delta, and whether it was accepted.
    pub fn record(&mut self, delta: f64, accepted: bool) {
        self.visits += 1;
        self.total_reward += (delta / REWARD_SCALE).clamp(-1.0, 1.0);
        self.best_delta = Some(self.best_delta.map_or(delta, |b| b.max(delta)));
        if accepted {
            self.evidence_for += 1;
            self.streak_against = 0;
            self.misses = 0;
            self.status = Status::Confirmed;
        } else {
            self.misses += 1;
            if delta <= 0.0 {
                self.evidence_against += 1;
                self.streak_against += 1;
            }
            if self.streak_against >= REFUTE_AFTER && self.status != Status::Escalated {
                self.status = Status::Refuted;
            }
        }
    }

    /// Records an out-of-scope block; returns true when this block escalates the class.
    pub fn block(&mut self) -> bool {
        self.blocked += 1;
        if self.blocked >= ESCALATE_AFTER && self.status != Status::Escalated {
            self.status = Status::Escalated;
            return true;
        }
        false
    }

    /// No new candidate exists in this direction from the served strategy
    /// (every move was already judged, or another field's invariant binds).
    pub fn exhaust(&mut self) {
        if self.status.open() {
            self.status = Status::Exhausted;
        }
    }

    /// The served strategy changed: refutations, exhaustion and the shrinking
    /// move were relative to the old one, so the direction is open again.
    pub fn reopen(&mut self) -> bool {
        let was_closed = matches!(self.status, Status::Refuted | Status::Exhausted);
        if was_closed {
            self.status = if self.evidence_for > 0 { Status::Confirmed } else { Status::Active };
        }
        let changed = was_closed || self.streak_against != 0 || self.misses != 0;
        self.streak_against = 0;
        self.misses = 0;
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unvisited_first_then_mean_plus_exploration() {
        let mut a = Hypothesis::new("retrieve.top_k", Direction::Increase);
        assert_eq!(a.ucb(10, 0.5, 1.0), f64::INFINITY);
        a.record(0.05, true);
        // mean 1.0 + c(0.5)=0.75 * sqrt(ln 4 / 1)
        let expected = 1.0 + 0.75 * (4f64.ln()).sqrt();
        assert!((a.ucb(4, 0.5, 1.0) - expected).abs() < 1e-12);
    }

    #[test]
    fn exploration_shrinks_as_actionability_grows() {
        let mut a = Hypothesis::new("x", Direction::Increase);
        a.record(0.0, false);
        assert!(a.ucb(10, 0.9, 1.0) < a.ucb(10, 0.1, 1.0));
    }

    #[test]
    fn two_non_improving_tries_refute_and_a_new_base_reopens() {
        let mut a = Hypothesis::new("x", Direction::Decrease);
        a.record(-0.01, false);
        assert_eq!(a.status, Status::Active);
        // A gain too small to accept shrinks the move but does not refute.
        a.record(0.01, false);
        assert_eq!((a.status, a.misses, a.streak_against), (Status::Active, 2, 1));
        a.record(0.0, false);
        assert_eq!(a.status, Status::Refuted);
        assert_eq!(a.evidence_against, 2);
        assert!(a.reopen());
        assert_eq!(a.status, Status::Active);
    }

    #[test]
    fn third_block_escalates_once() {
        let mut a = Hypothesis::new("answer.prompt", Direction::Rewrite);
        assert!(!a.block());
        assert!(!a.block());
        assert!(a.block());
        assert_eq!(a.status, Status::Escalated);
        assert!(!a.block());
        assert!(!a.reopen());
    }

    #[test]
    fn rewards_are_scaled_and_clipped() {
        let mut a = Hypothesis::new("x", Direction::Increase);
        a.record(0.5, true);
        assert_eq!(a.total_reward, 1.0);
        a.record(-0.025, false);
        assert_eq!(a.total_reward, 0.5);
    }
}
