//! The rule-based critic: it reads a candidate's whole diff before any
//! evaluation of it, labels every changed field and the candidate as a
//! whole (`actionable`, `risky`, `duplicate`, `out_of_scope`), and sets how
//! strict the probe is.
//!
//! What it reads, per field: the move, the contribution the global search
//! measured for it on the search part (when it measured one), the Layer A
//! labels of this round's failures the move targets (the schema's
//! `x-symptoms` links for that field in that direction) and the field's
//! history (reputation, rejected moves). For the candidate: the mean context
//! tokens a question, served and candidate, when the candidate was already
//! evaluated on the search part.
//!
//! A field is `duplicate` when that exact move was evaluated and rejected
//! before, `risky` when its measured contribution is negative or its
//! dimension was reverted at least three times and never accepted,
//! `out_of_scope` when it targets none of this round's failures and no
//! positive contribution was measured for it, and `actionable` otherwise
//! (a measured gain counts even where the schema links the field to none of
//! this round's failure labels).
//!
//! The candidate is `out_of_scope` (rejected) when the failures motivating it
//! are all ones no strategy can fix; `duplicate` (rejected) when it is one
//! move that was rejected before (a jump of several fields is new by the
//! novelty gate, and a `cheaper` claim is not the claim that was rejected);
//! `risky` when a field is risky or the lead field makes its largest allowed
//! move on a dimension with negative reputation: the probe must then not
//! drop at all; otherwise `actionable`. Strictness follows actionability:
//! an actionable candidate's probe tolerates losing `probe_drop_max` times
//! the share of this round's failures its fields target, so a change aimed
//! at few failures may lose little before its confirm test.
//!
//! The critic runs after every hard gate passed and can never let through
//! what a gate stopped; it may reject or tighten the probe, never loosen it
//! beyond `probe_drop_max`.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::layer_a::Diagnosis;
use crate::percent::tokens_from_to;
use crate::planner::{Change, DimensionEffect, symptom_counts};
use crate::schema::{Direction, StrategySchema};

/// The critic's four labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CriticLabel {
    Actionable,
    Risky,
    Duplicate,
    OutOfScope,
}

impl CriticLabel {
    pub const ALL: [CriticLabel; 4] =
        [CriticLabel::Actionable, CriticLabel::Risky, CriticLabel::Duplicate, CriticLabel::OutOfScope];

    pub fn as_str(self) -> &'static str {
        match self {
            CriticLabel::Actionable => "actionable",
            CriticLabel::Risky => "risky",
            CriticLabel::Duplicate => "duplicate",
            CriticLabel::OutOfScope => "out_of_scope",
        }
    }
}

/// The critic's judgement of a candidate. It may reject (duplicate, out of
/// scope) or tighten the probe (risky, or an actionable change aimed at few
/// failures), but it runs only after every hard gate passed and can never
/// let through what a gate stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CriticVerdict {
    pub label: CriticLabel,
    pub reason: String,
    pub reject: bool,
    /// Largest probe accuracy drop tolerated for this candidate.
    pub probe_tolerance: f64,
    /// Each changed field's label, the lead field first (absent in older journals).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fields: Vec<FieldVerdict>,
    /// Share of the round's failures the changed fields target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actionability: Option<f64>,
    /// Mean context tokens a question on the search part, served and
    /// candidate, when the candidate was evaluated there before screening.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<(f64, f64)>,
}

impl CriticVerdict {
    /// One line per field: `retrieve.top_k 5 -> 40: actionable (targets retrieval_gap x360; +6.2 pp measured)`.
    pub fn field_lines(&self) -> Vec<String> {
        self.fields
            .iter()
            .map(|f| format!("{} {} -> {}: {} ({})", f.path, f.from, f.to, f.label.as_str(), f.reason))
            .collect()
    }

    /// What a reviewer reads under the critic's label: the tokens it read
    /// (`read on the search part: tokens 1,865 -> 2,310 (+24%)`) and, for a
    /// candidate of several fields, one line per field.
    pub fn detail_lines(&self) -> Vec<String> {
        let cost = self.cost_line().map(|c| format!("read on the search part: {c}"));
        let fields = if self.fields.len() > 1 { self.field_lines() } else { Vec::new() };
        cost.into_iter().chain(fields).collect()
    }

    /// `tokens 1,865 -> 2,310 (+24%)`, when the critic saw the cost.
    pub fn cost_line(&self) -> Option<String> {
        self.tokens.map(|(a, b)| tokens_from_to(a, b))
    }
}

/// The critic's label for one field of the diff.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FieldVerdict {
    pub path: String,
    pub from: Value,
    pub to: Value,
    pub label: CriticLabel,
    pub reason: String,
    /// Its contribution measured on the search part, when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contribution: Option<f64>,
    /// The Layer A labels of this round's failures the move targets, with counts.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub targets: BTreeMap<String, usize>,
}

/// What the critic reads about one candidate.
pub struct CriticInput<'a> {
    pub schema: &'a StrategySchema,
    /// The round's diagnosis of the served strategy (search part).
    pub diagnosis: &'a Diagnosis,
    /// The lead change (the largest measured contribution, or the planned field).
    pub change: &'a Change,
    /// The rest of the diff.
    pub more: &'a [Change],
    /// Measured contributions by path (the global search's pruning).
    pub contributions: &'a BTreeMap<String, f64>,
    /// Numbers stay within their `x-max-delta` (`search.method: steps`).
    pub bounded: bool,
    pub effects: &'a BTreeMap<String, DimensionEffect>,
    /// `(path, from, to)` moves that were evaluated and rejected before.
    pub rejected_moves: &'a BTreeSet<(String, String, String)>,
    /// A one-move candidate that was rejected before is a duplicate (false for
    /// a `cheaper` claim, which is not the claim that was rejected).
    pub duplicates_reject: bool,
    /// Label -> count of the failures motivating the direction.
    pub motivation: &'a BTreeMap<String, usize>,
    /// Mean context tokens, served and candidate, when known.
    pub tokens: Option<(f64, f64)>,
    pub probe_drop_max: f64,
}

/// Labels that no strategy field can address.
const UNFIXABLE: [&str; 2] = ["unresolved_evidence", "no_trace"];

/// Labels the candidate and each field of its diff (see the module doc).
pub fn critic(input: &CriticInput<'_>) -> CriticVerdict {
    let c = input.change;
    let counts = symptom_counts(input.schema, input.diagnosis);
    let fields: Vec<FieldVerdict> =
        std::iter::once(c).chain(input.more).map(|ch| field_verdict(input, ch, &counts)).collect();
    let targeted: BTreeSet<&String> = fields.iter().flat_map(|f| f.targets.keys()).collect();
    let explained: usize = targeted.iter().map(|l| counts.get(*l).copied().unwrap_or(0)).sum();
    let actionability = (explained as f64 / input.diagnosis.failures.max(1) as f64).min(1.0);
    let verdict = |label, reason: String, reject, probe_tolerance| CriticVerdict {
        label,
        reason,
        reject,
        probe_tolerance,
        fields: fields.clone(),
        actionability: Some(actionability),
        tokens: input.tokens,
    };
    if !input.motivation.is_empty() && input.motivation.keys().all(|l| UNFIXABLE.contains(&l.as_str())) {
        let why = format!("{} is motivated only by failures no strategy can fix ({})", c.path, keys(input.motivation));
        return verdict(CriticLabel::OutOfScope, why, true, 0.0);
    }
    let one_move = input.more.is_empty() || input.bounded;
    if input.duplicates_reject && one_move && fields[0].label == CriticLabel::Duplicate {
        let why = format!("{} {} -> {} was evaluated and rejected before", c.path, c.from, c.to);
        return verdict(CriticLabel::Duplicate, why, true, 0.0);
    }
    if let Some(why) = lead_risk(input) {
        return verdict(CriticLabel::Risky, format!("{why}; the probe must not drop at all"), false, 0.0);
    }
    if let Some(f) = fields.iter().find(|f| f.label == CriticLabel::Risky) {
        let why = format!("{} is risky ({}); the probe must not drop at all", f.path, f.reason);
        return verdict(CriticLabel::Risky, why, false, 0.0);
    }
    let tolerance = input.probe_drop_max * actionability;
    let what = if input.more.is_empty() {
        format!("{} {} -> {}", c.path, c.from, c.to)
    } else {
        let aimed = fields.iter().filter(|f| f.label == CriticLabel::Actionable).count();
        format!("{} fields ({aimed} actionable)", fields.len())
    };
    let targets: BTreeMap<String, usize> =
        targeted.iter().map(|l| ((*l).clone(), counts.get(*l).copied().unwrap_or(0))).collect();
    let why = format!(
        "{what} addresses {} ({:.0}% of {} failures); the probe tolerates {:.1} pp",
        if targets.is_empty() { "none of this round's failures".to_string() } else { keys(&targets) },
        100.0 * actionability,
        input.diagnosis.failures,
        100.0 * tolerance
    );
    verdict(CriticLabel::Actionable, why, false, tolerance)
}

/// The lead field's own risk: its largest allowed move on a dimension with
/// negative reputation.
fn lead_risk(input: &CriticInput<'_>) -> Option<String> {
    let c = input.change;
    let effect = input.effects.get(&c.path)?;
    let max_delta = input.schema.field(&c.path).and_then(|f| f.max_delta).filter(|_| input.bounded);
    let full_move = match (c.from.as_f64(), c.to.as_f64(), max_delta) {
        (Some(a), Some(b), Some(m)) => ((b - a).abs() - m).abs() < 1e-9,
        _ => false,
    };
    (full_move && effect.reputation() < 0.0).then(|| {
        format!(
            "{} has reputation {:.1} ({} reverted) and this is its largest allowed move",
            c.path,
            effect.reputation(),
            effect.reverted
        )
    })
}

fn field_verdict(input: &CriticInput<'_>, c: &Change, counts: &BTreeMap<String, usize>) -> FieldVerdict {
    let targets = targets(input.schema, c, counts);
    let contribution = input.contributions.get(&c.path).copied();
    let effect = input.effects.get(&c.path);
    let (label, reason) = if input.rejected_moves.contains(&(c.path.clone(), c.from.to_string(), c.to.to_string())) {
        (CriticLabel::Duplicate, "this move was evaluated and rejected before".to_string())
    } else if let Some(d) = contribution.filter(|d| *d < 0.0) {
        (CriticLabel::Risky, format!("its measured contribution is {:+.1} pp", 100.0 * d))
    } else if let Some(e) = effect.filter(|e| e.reverted >= 3 && e.accepted == 0) {
        (CriticLabel::Risky, format!("reverted {} times and never accepted", e.reverted))
    } else if targets.is_empty() {
        match contribution.filter(|d| *d > 0.0) {
            Some(d) => (
                CriticLabel::Actionable,
                format!("{:+.1} pp measured, though it targets none of this round's failures", 100.0 * d),
            ),
            None => (CriticLabel::OutOfScope, "targets none of this round's failures".to_string()),
        }
    } else {
        let measured = contribution.map_or(String::new(), |d| format!("; {:+.1} pp measured", 100.0 * d));
        (CriticLabel::Actionable, format!("targets {}{measured}", keys(&targets)))
    };
    FieldVerdict { path: c.path.clone(), from: c.from.clone(), to: c.to.clone(), label, reason, contribution, targets }
}

/// The labels with failures this round whose schema links name the field in
/// the direction it moves (any link of the field for a non-numeric move).
fn targets(schema: &StrategySchema, c: &Change, counts: &BTreeMap<String, usize>) -> BTreeMap<String, usize> {
    let direction = Direction::of_move(&c.from, &c.to);
    schema
        .symptoms()
        .iter()
        .filter(|(label, links)| {
            counts.get(*label).is_some_and(|&n| n > 0)
                && links
                    .iter()
                    .any(|l| l.path == c.path && (direction == Direction::Toggle || l.direction == direction))
        })
        .map(|(label, _)| (label.clone(), counts[label]))
        .collect()
}

fn keys(m: &BTreeMap<String, usize>) -> String {
    m.iter().map(|(k, v)| format!("{k} x{v}")).collect::<Vec<_>>().join(", ")
}

/// The critic's label for a direction the evolver could not move.
pub fn critic_blocked(path: &str, reason: &str) -> CriticVerdict {
    CriticVerdict {
        label: CriticLabel::OutOfScope,
        reason: format!("{path}: {reason}"),
        reject: true,
        probe_tolerance: 0.0,
        fields: Vec::new(),
        actionability: None,
        tokens: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn change(path: &str, from: Value, to: Value) -> Change {
        Change { path: path.into(), from, to }
    }

    /// 100 failures: 60 retrieval gaps, 30 filtered by the token budget, 10 unresolved.
    fn diagnosis() -> Diagnosis {
        let counts = [("retrieval_gap", 60), ("kf_filtered", 30), ("unresolved_evidence", 10)];
        Diagnosis {
            failures: 100,
            n: 300,
            counts: counts.iter().map(|(l, n)| (l.to_string(), *n)).collect(),
            ..Diagnosis::default()
        }
    }

    struct Case {
        schema: StrategySchema,
        diagnosis: Diagnosis,
        effects: BTreeMap<String, DimensionEffect>,
        rejected: BTreeSet<(String, String, String)>,
        contributions: BTreeMap<String, f64>,
        motivation: BTreeMap<String, usize>,
    }

    impl Case {
        fn new() -> Case {
            Case {
                schema: StrategySchema::builtin(),
                diagnosis: diagnosis(),
                effects: BTreeMap::new(),
                rejected: BTreeSet::new(),
                contributions: BTreeMap::new(),
                motivation: [("retrieval_gap".to_string(), 60)].into(),
            }
        }

        fn judge(&self, lead: &Change, more: &[Change]) -> CriticVerdict {
            critic(&CriticInput {
                schema: &self.schema,
                diagnosis: &self.diagnosis,
                change: lead,
                more,
                contributions: &self.contributions,
                bounded: false,
                effects: &self.effects,
                rejected_moves: &self.rejected,
                duplicates_reject: true,
                motivation: &self.motivation,
                tokens: Some((1865.0, 2310.0)),
                probe_drop_max: 0.02,
            })
        }
    }

    #[test]
    fn one_field_aimed_at_most_failures_gets_most_of_the_tolerance() {
        let case = Case::new();
        let v = case.judge(&change("retrieve.top_k", json!(5), json!(15)), &[]);
        assert_eq!((v.label, v.reject), (CriticLabel::Actionable, false));
        assert_eq!(v.actionability, Some(0.6));
        assert!((v.probe_tolerance - 0.012).abs() < 1e-12, "{}", v.probe_tolerance);
        assert_eq!(v.fields.len(), 1);
        assert_eq!(v.fields[0].targets, BTreeMap::from([("retrieval_gap".to_string(), 60)]));
        assert_eq!(v.cost_line().as_deref(), Some("tokens 1,865 -> 2,310 (+24%)"));
    }

    #[test]
    fn a_move_against_the_symptom_targets_nothing() {
        // Fewer results retrieved does not address a retrieval gap.
        let case = Case::new();
        let v = case.judge(&change("retrieve.top_k", json!(15), json!(5)), &[]);
        assert_eq!(v.fields[0].label, CriticLabel::OutOfScope);
        assert_eq!((v.label, v.reject, v.probe_tolerance), (CriticLabel::Actionable, false, 0.0));
    }

    #[test]
    fn every_field_of_a_jump_is_labelled_and_the_targets_add_up() {
        let mut case = Case::new();
        case.contributions =
            [("retrieve.top_k".to_string(), 0.031), ("assemble.token_budget".to_string(), 0.012)].into();
        let lead = change("retrieve.top_k", json!(5), json!(40));
        let more = [
            change("assemble.token_budget", json!(1200), json!(3000)),
            change("retrieve.rrf_kappa", json!(60), json!(20)),
        ];
        let v = case.judge(&lead, &more);
        let labels: Vec<CriticLabel> = v.fields.iter().map(|f| f.label).collect();
        assert_eq!(labels, [CriticLabel::Actionable, CriticLabel::Actionable, CriticLabel::OutOfScope]);
        assert_eq!(v.fields[0].contribution, Some(0.031));
        assert_eq!(v.fields[2].contribution, None);
        // retrieval_gap (60) and kf_filtered (30), each counted once.
        assert_eq!(v.actionability, Some(0.9));
        assert!((v.probe_tolerance - 0.018).abs() < 1e-12);
        assert!(v.reason.starts_with("3 fields (2 actionable)"), "{}", v.reason);
        assert_eq!(
            v.field_lines()[1],
            "assemble.token_budget 1200 -> 3000: actionable (targets kf_filtered x30; +1.2 pp measured)"
        );
    }

    #[test]
    fn a_measured_gain_is_actionable_without_a_symptom_link() {
        let mut case = Case::new();
        case.contributions = [("retrieve.rrf_kappa".to_string(), 0.02)].into();
        let lead = change("retrieve.top_k", json!(5), json!(40));
        let v = case.judge(&lead, &[change("retrieve.rrf_kappa", json!(60), json!(20))]);
        assert_eq!(v.fields[1].label, CriticLabel::Actionable);
        assert_eq!(v.fields[1].reason, "+2.0 pp measured, though it targets none of this round's failures");
        // The share of failures targeted counts symptom links only.
        assert_eq!(v.actionability, Some(0.6));
    }

    #[test]
    fn a_field_that_measured_negative_makes_the_jump_risky() {
        let mut case = Case::new();
        case.contributions = [("retrieve.rrf_kappa".to_string(), -0.004)].into();
        let lead = change("retrieve.top_k", json!(5), json!(40));
        let v = case.judge(&lead, &[change("retrieve.rrf_kappa", json!(20), json!(60))]);
        assert_eq!(v.fields[1].label, CriticLabel::Risky);
        assert_eq!((v.label, v.reject, v.probe_tolerance), (CriticLabel::Risky, false, 0.0));
        assert!(
            v.reason.contains("retrieve.rrf_kappa is risky (its measured contribution is -0.4 pp)"),
            "{}",
            v.reason
        );
    }

    #[test]
    fn a_dimension_reverted_three_times_and_never_accepted_is_risky() {
        let mut case = Case::new();
        case.effects.insert(
            "retrieve.top_k".into(),
            DimensionEffect { tried: 3, accepted: 0, reverted: 3, total_delta: -0.03 },
        );
        let v = case.judge(&change("retrieve.top_k", json!(5), json!(15)), &[]);
        assert_eq!((v.label, v.reject, v.probe_tolerance), (CriticLabel::Risky, false, 0.0));
    }

    #[test]
    fn a_rejected_move_alone_is_a_duplicate_but_not_inside_a_jump() {
        let mut case = Case::new();
        case.rejected.insert(("retrieve.top_k".into(), "5".into(), "15".into()));
        let lead = change("retrieve.top_k", json!(5), json!(15));
        let v = case.judge(&lead, &[]);
        assert_eq!((v.label, v.reject), (CriticLabel::Duplicate, true));
        let v = case.judge(&lead, &[change("assemble.token_budget", json!(1200), json!(3000))]);
        assert_eq!(v.fields[0].label, CriticLabel::Duplicate);
        assert_eq!((v.label, v.reject), (CriticLabel::Actionable, false));
    }

    #[test]
    fn failures_no_strategy_can_fix_put_the_candidate_out_of_scope() {
        let mut case = Case::new();
        case.motivation = [("unresolved_evidence".to_string(), 10)].into();
        let v = case.judge(&change("retrieve.top_k", json!(5), json!(15)), &[]);
        assert_eq!((v.label, v.reject), (CriticLabel::OutOfScope, true));
    }

    #[test]
    fn a_verdict_from_an_older_journal_reads_without_fields() {
        let old = r#"{"label":"actionable","reason":"r","reject":false,"probe_tolerance":0.02}"#;
        let v: CriticVerdict = serde_json::from_str(old).unwrap();
        assert!(v.fields.is_empty() && v.actionability.is_none() && v.tokens.is_none());
        assert_eq!(serde_json::to_string(&v).unwrap(), old);
    }
}
