//! What a version costs: the mean context tokens its answerer reads a
//! question on the whole task set, from its recorded whole-set evaluation,
//! with the ratio to its parent's and to v1's. Every view that names a version
//! (`status`, `show`, `log`, `pending`, `diff`, `evolve`'s summary, the report)
//! prints this one figure, so none can disagree with another.

use emend_journal::EventLog;
use serde::{Deserialize, Serialize};

use crate::store::{Best, Result, Store};
use emend_stats::Cost;

/// Another version's mean context tokens and the ratio of this one's to them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Relative {
    pub version: u64,
    pub mean_context_tokens: f64,
    /// This version's tokens over that version's; None when that version's are 0.
    pub ratio: Option<f64>,
}

impl Relative {
    fn of(version: u64, tokens: f64, ours: f64) -> Relative {
        Relative { version, mean_context_tokens: tokens, ratio: (tokens > 0.0).then(|| ours / tokens) }
    }

    /// `6.07x v1's 259`.
    fn describe(&self, whose: &str) -> String {
        match self.ratio {
            Some(r) => format!("{r:.2}x {whose}v{}'s {:.0}", self.version, self.mean_context_tokens),
            None => format!("{whose}v{} used 0", self.version),
        }
    }
}

/// A version's mean context tokens a question on the whole task set, with
/// its parent's and v1's (each from their own recorded evaluations).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct VersionCost {
    pub version: u64,
    pub mean_context_tokens: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent: Option<Relative>,
    /// v1's (absent for v1 itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first: Option<Relative>,
}

impl VersionCost {
    /// The cost of `version` (child of `parent`) from a lookup of each
    /// version's mean context tokens; None when its own are not recorded.
    pub fn of(version: u64, parent: Option<u64>, tokens: impl Fn(u64) -> Option<f64>) -> Option<VersionCost> {
        let ours = tokens(version)?;
        let relative = |v: u64| (v != version).then(|| tokens(v).map(|t| Relative::of(v, t, ours))).flatten();
        Some(VersionCost { version, mean_context_tokens: ours, parent: parent.and_then(relative), first: relative(1) })
    }

    /// `1573 context tokens a question (6.07x v1's 259)`, or with a parent other than v1
    /// `(1.20x its parent v3's 1311, 6.07x v1's 259)`.
    pub fn describe(&self) -> String {
        let mut rel = Vec::new();
        if let Some(p) = self.parent.filter(|p| p.version != 1) {
            rel.push(p.describe("its parent "));
        }
        if let Some(f) = self.first {
            rel.push(f.describe(""));
        }
        let tail = if rel.is_empty() { String::new() } else { format!(" ({})", rel.join(", ")) };
        format!("{:.0} context tokens a question{tail}", self.mean_context_tokens)
    }
}

/// A gate record's cost change: `context tokens 259 -> 1573 a question (6.07x)`.
pub fn describe_change(cost: &Cost) -> String {
    let (b, c) = (cost.baseline_mean_tokens, cost.candidate_mean_tokens);
    let ratio = if b > 0.0 { format!(" ({:.2}x)", c / b) } else { String::new() };
    format!("context tokens {b:.0} -> {c:.0} a question{ratio}")
}

impl<L: EventLog + ?Sized> Store<'_, L> {
    /// The operator's journaled token budget (`rollback --max-tokens`): max_tokens, reason, who, at, seq.
    pub fn budget(&self) -> Result<Option<serde_json::Value>> {
        self.pointer("budget")
    }

    /// The budget the next run keeps: the smaller of `configured` (`cost.max_tokens`) and the journaled one.
    pub fn max_tokens(&self, configured: Option<u32>) -> Result<Option<u32>> {
        let journaled =
            self.budget()?.and_then(|b| b["max_tokens"].as_u64()).map(|n| n.min(u64::from(u32::MAX)) as u32);
        Ok(match (configured, journaled) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        })
    }

    /// A journaled version's mean context tokens a question, from the
    /// evaluation [`Store::recorded_evaluation`] reads.
    pub fn version_tokens(&self, version: u64, best: Option<&Best>) -> Result<Option<f64>> {
        let Some(info) = self.version(version)? else { return Ok(None) };
        Ok(self.recorded_evaluation(&info.hash, best)?.and_then(|(_, s)| s.mean_context_tokens))
    }

    /// What journaled version `version` costs, beside its parent and v1.
    pub fn version_cost(&self, version: u64) -> Result<Option<VersionCost>> {
        let Some(info) = self.version(version)? else { return Ok(None) };
        let best = self.best()?;
        let mut tokens = std::collections::BTreeMap::new();
        for v in [Some(version), info.parent, Some(1)].into_iter().flatten() {
            tokens.insert(v, self.version_tokens(v, best.as_ref())?);
        }
        Ok(VersionCost::of(version, info.parent, |v| tokens.get(&v).copied().flatten()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratios_to_the_parent_and_to_v1() {
        let t = |v: u64| match v {
            1 => Some(259.0),
            3 => Some(1311.0),
            4 => Some(1573.0),
            5 => Some(0.0),
            _ => None,
        };
        let c = VersionCost::of(4, Some(3), t).unwrap();
        assert_eq!(c.describe(), "1573 context tokens a question (1.20x its parent v3's 1311, 6.07x v1's 259)");
        let c = VersionCost::of(4, Some(1), t).unwrap();
        assert_eq!(c.describe(), "1573 context tokens a question (6.07x v1's 259)");
        assert_eq!(VersionCost::of(1, None, t).unwrap().describe(), "259 context tokens a question");
        // A version without a recorded evaluation has no cost; a parent without one is left out.
        assert_eq!(VersionCost::of(2, Some(1), t), None);
        assert_eq!(VersionCost::of(4, Some(2), t).unwrap().parent, None);
        assert_eq!(VersionCost::of(4, Some(5), t).unwrap().parent.unwrap().ratio, None);
    }

    #[test]
    fn a_gate_records_cost_change() {
        let c = Cost { baseline_mean_tokens: 259.0, candidate_mean_tokens: 1573.0 };
        assert_eq!(describe_change(&c), "context tokens 259 -> 1573 a question (6.07x)");
    }
}
