//! A candidate's typed states: how it ended ([`Resolution`]), what stopped it
//! ([`StoppedBy`]) and the record of its full test ([`FullRecord`]).
//!
//! They serialize to the strings and JSON the journal has always held
//! (`"gate:novelty"`, `"full:not_best"`, `{"rules": [...], "accept": ...}`), so
//! existing journals load unchanged; nothing in the engine compares these
//! states as strings.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize};

use crate::critic::CriticLabel;
use crate::gates::Gate;
use emend_stats::{self, CategoryDelta, McNemarTest, RuleKind};

/// The hypothesis of a candidate record that retests a pending version
/// against the version served now (`emend approve --retest`).
pub const RETEST: &str = "retest";

/// How a candidate ended: accepted, rejected, errored or blocked. (An
/// *outcome* in emend is a question's result; the candidate record's journal
/// field keeps its name `outcome`, so journals load unchanged.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    Accepted,
    Rejected,
    Errored,
    /// Stopped before a change existed (the evolver found the move out of scope).
    Blocked,
}

impl Resolution {
    pub fn as_str(self) -> &'static str {
        match self {
            Resolution::Accepted => "accepted",
            Resolution::Rejected => "rejected",
            Resolution::Errored => "errored",
            Resolution::Blocked => "blocked",
        }
    }
}

impl fmt::Display for Resolution {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A rule of the full test: the paired statistics' own, or the engine's floor
/// against the journal's first version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    Stats(RuleKind),
    /// No category may end more than epsilon below v1.
    CategoryVsFirstVersion,
    /// The one-sided exact test on the confirm part passes at the LORD++ alpha.
    ConfirmBetter,
    /// The CR2 cluster check (Bell-McCaffrey degrees of freedom) says better (only with `gates.cluster_check: require`).
    ClusterCheck,
    /// Mean context tokens within `gates.cost_bound_v1` of v1's.
    CostVsFirstVersion,
    /// Mean context tokens at most `cost.max_tokens`.
    CostMaxTokens,
    /// Under a price (`cost.per_1k_tokens`): the candidate's utility (accuracy
    /// less the price of its context) is higher, by the paired sign-flip test
    /// at the LORD++ alpha. It replaces `confirm_better`.
    ConfirmUtility,
    /// A `cheaper` candidate: not worse than the served strategy by the
    /// margin, by the exact non-inferiority test at the LORD++ alpha. It
    /// replaces `confirm_better`.
    ConfirmNonInferior,
    /// A `cheaper` candidate reads at least `cost.min_saving` fewer context tokens.
    CostSaving,
    /// A person's proposal: its predicted per-category movement held on the
    /// confirm part (`emend propose --predict`; waived, and journaled as
    /// failed, with `--accept-unpredicted`).
    Prediction,
}

impl Rule {
    /// Every rule in the order the full test checks them (the report's order).
    pub const ALL: [Rule; 14] = [
        Rule::Stats(RuleKind::MoreImprovedThanRegressed),
        Rule::Stats(RuleKind::McnemarPBelowAlpha),
        Rule::Stats(RuleKind::CiExcludesZero),
        Rule::Stats(RuleKind::CategoryNonRegression),
        Rule::Stats(RuleKind::CostWithinBound),
        Rule::CategoryVsFirstVersion,
        Rule::ConfirmBetter,
        Rule::ClusterCheck,
        Rule::CostVsFirstVersion,
        Rule::CostMaxTokens,
        Rule::ConfirmUtility,
        Rule::ConfirmNonInferior,
        Rule::CostSaving,
        Rule::Prediction,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Rule::Stats(k) => k.name(),
            Rule::CategoryVsFirstVersion => "category_vs_first_version",
            Rule::ConfirmBetter => "confirm_better",
            Rule::ClusterCheck => "cluster_check",
            Rule::CostVsFirstVersion => "cost_vs_first_version",
            Rule::CostMaxTokens => "cost_max_tokens",
            Rule::ConfirmUtility => "confirm_utility",
            Rule::ConfirmNonInferior => "confirm_noninferior",
            Rule::CostSaving => "cost_saving",
            Rule::Prediction => "prediction",
        }
    }

    pub fn parse(s: &str) -> Option<Rule> {
        Rule::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Rule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Rule {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Rule::parse(&s).ok_or_else(|| serde::de::Error::custom(format!("unknown full-test rule {s:?}")))
    }
}

/// What stopped a candidate, in the order a candidate meets them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoppedBy {
    /// A gate failed (`gate:<name>`).
    Gate(Gate),
    /// The heuristic critic or the critic model rejected it (`critic:<label>`).
    Critic(CriticLabel),
    /// The evolver, an evaluation or the comparison failed (`errored`).
    Errored,
    /// The probe fell below the tolerance (`probe`).
    Probe,
    /// The probe passed, but others of the round probed better (`probe:not_selected`).
    NotSelected,
    /// A rule of the full test failed (`full:<rule>`).
    FullRule(Rule),
    /// Passed every rule, but another candidate gained more (`full:not_best`).
    NotBest,
}

impl fmt::Display for StoppedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoppedBy::Gate(g) => write!(f, "gate:{}", g.as_str()),
            StoppedBy::Critic(l) => write!(f, "critic:{}", l.as_str()),
            StoppedBy::Errored => f.write_str("errored"),
            StoppedBy::Probe => f.write_str("probe"),
            StoppedBy::NotSelected => f.write_str("probe:not_selected"),
            StoppedBy::FullRule(r) => write!(f, "full:{}", r.as_str()),
            StoppedBy::NotBest => f.write_str("full:not_best"),
        }
    }
}

impl FromStr for StoppedBy {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let unknown = || {
            format!(
                "unknown stage {s:?} (expected gate:<gate>, critic:<label>, probe, probe:not_selected, full:<rule>, full:not_best or errored)"
            )
        };
        match s {
            "errored" => return Ok(StoppedBy::Errored),
            "probe" => return Ok(StoppedBy::Probe),
            "probe:not_selected" => return Ok(StoppedBy::NotSelected),
            "full:not_best" => return Ok(StoppedBy::NotBest),
            _ => {}
        }
        if let Some(g) = s.strip_prefix("gate:") {
            return Gate::ALL.into_iter().find(|x| x.as_str() == g).map(StoppedBy::Gate).ok_or_else(unknown);
        }
        if let Some(l) = s.strip_prefix("critic:") {
            return CriticLabel::ALL.into_iter().find(|x| x.as_str() == l).map(StoppedBy::Critic).ok_or_else(unknown);
        }
        if let Some(r) = s.strip_prefix("full:") {
            return Rule::parse(r).map(StoppedBy::FullRule).ok_or_else(unknown);
        }
        Err(unknown())
    }
}

impl Serialize for StoppedBy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for StoppedBy {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?.parse().map_err(serde::de::Error::custom)
    }
}

/// `null` (how JSON writes a NaN) reads back as NaN.
fn nullable_f64<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

/// One rule's outcome in a full test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuleRecord {
    pub name: Rule,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    #[serde(deserialize_with = "nullable_f64")]
    pub value: f64,
    #[serde(deserialize_with = "nullable_f64")]
    pub threshold: f64,
    pub pass: bool,
    pub detail: String,
}

impl From<&emend_stats::Rule> for RuleRecord {
    fn from(r: &emend_stats::Rule) -> Self {
        RuleRecord {
            name: Rule::Stats(r.name),
            category: r.category.clone(),
            value: r.value,
            threshold: r.threshold,
            pass: r.pass,
            detail: r.detail.clone(),
        }
    }
}

/// The compact record of a full paired comparison kept in the gate record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FullRecord {
    pub n: usize,
    pub improved: usize,
    pub regressed: usize,
    pub both_correct: usize,
    pub both_wrong: usize,
    /// Up to 20 ids each.
    pub improved_examples: Vec<String>,
    pub regressed_examples: Vec<String>,
    pub base_accuracy: f64,
    pub cand_accuracy: f64,
    pub delta: f64,
    #[serde(deserialize_with = "nullable_f64")]
    pub ci_low: f64,
    #[serde(deserialize_with = "nullable_f64")]
    pub ci_high: f64,
    /// The bootstrap's resampling unit (`question` or `conversation`).
    pub unit: String,
    pub resamples: usize,
    pub mcnemar_test: McNemarTest,
    #[serde(deserialize_with = "nullable_f64")]
    pub mcnemar_p: f64,
    pub alpha: f64,
    pub per_category: BTreeMap<String, CategoryDelta>,
    pub rules: Vec<RuleRecord>,
    /// Every rule passed.
    pub accept: bool,
    /// The one-sided exact test on the confirm part (absent in pre-split journals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirm: Option<emend_stats::BetterTest>,
    /// The LORD++ test this confirm test was (index, alpha, wealth after).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lord: Option<emend_stats::LordTest>,
    /// The CR2 cluster check by conversation, reported whether or not it is required.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<emend_stats::ClusterCheck>,
    /// Older runs only: what Thresholdout let flow back into the search after
    /// an accept. Never written now and never read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holdout: Option<HoldoutAnswer>,
    /// Mean context tokens a question of the baseline and the candidate on
    /// the confirm part: the cost change the record accepted or refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<emend_stats::Cost>,
    /// Under a price (`cost.per_1k_tokens`), the utility test that decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utility: Option<emend_stats::UtilityTest>,
    /// For a `cheaper` candidate, the non-inferiority test that decided; under
    /// a price split by question, the exact test of the accuracy
    /// difference against the worth of the token difference (its margin).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noninferior: Option<emend_stats::NonInferiorTest>,
}

/// An accepted candidate's confirm-part gain adjusted for the winner's
/// curse: it is reported because its test accepted, and the raw delta of an
/// accepted test overstates the true gain (at 193 questions and a true
/// +2 pp, by about +6 to +8 pp: `stats/src/sim_curse.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct AdjustedGain {
    pub estimate: f64,
    /// `median_unbiased` (the question-level exact test's conditional
    /// median-unbiased estimate, [`emend_stats::adjusted_gain`]) or `lower_bound`
    /// (the test's own one-sided lower confidence bound, for the probe and
    /// conversation units, which have no adjusted estimate).
    pub method: &'static str,
}

impl AdjustedGain {
    /// `selection-adjusted +5.1 pp` / `lower bound +1.2 pp`.
    pub fn describe(&self) -> String {
        let label = if self.method == "median_unbiased" { "selection-adjusted" } else { "lower bound" };
        format!("{label} {:+.1} pp", self.estimate * 100.0)
    }
}

impl FullRecord {
    /// What a priced or cheaper claim showed on the confirm part, in one
    /// phrase: `cheaper: tokens 1,573 -> 610 (-61%), accuracy -0.4 pp
    /// (non-inferior at 5 pp, p = 0.0031)` or `utility +0.0123 at 2 pp per
    /// 1,000 tokens (accuracy -0.4 pp, tokens 1,573 -> 610 (-61%); p = 0.0041)`.
    /// None for a plain accuracy claim.
    pub fn claim_summary(&self) -> Option<String> {
        let tokens = crate::percent::tokens_from_to;
        if let Some(u) = &self.utility {
            let p = self.noninferior.map_or(u.p_value, |t| t.p_value);
            return Some(format!(
                "utility {:+.4} at {} pp per 1,000 tokens (accuracy {:+.1} pp, {}; p = {p:.4})",
                u.delta,
                u.per_1k_tokens,
                u.accuracy_delta * 100.0,
                tokens(u.base_tokens, u.cand_tokens),
            ));
        }
        if let Some(t) = &self.noninferior {
            let cost = self
                .cost
                .map_or(String::new(), |c| format!("{}, ", tokens(c.baseline_mean_tokens, c.candidate_mean_tokens)));
            let verdict = if t.noninferior { "non-inferior" } else { "not shown non-inferior" };
            return Some(format!(
                "cheaper: {cost}accuracy {:+.1} pp ({verdict} at {} pp, p = {:.4})",
                t.delta * 100.0,
                t.margin * 100.0,
                t.p_value
            ));
        }
        None
    }

    /// The selection-adjusted gain of a candidate that passed its confirm
    /// test; None when it did not pass (nothing was selected) or the record
    /// predates the confirm test.
    pub fn adjusted_gain(&self) -> Option<AdjustedGain> {
        let c = self.confirm.as_ref().filter(|c| c.better)?;
        Some(if c.unit == emend_stats::TestUnit::Question {
            AdjustedGain {
                estimate: emend_stats::adjusted_gain(c.improved, c.regressed, c.questions, c.alpha),
                method: "median_unbiased",
            }
        } else {
            AdjustedGain { estimate: c.lower_bound, method: "lower_bound" }
        })
    }

    /// The level of the bootstrap interval shown: two-sided at `1 - 2 alpha`
    /// since the confirm test (its lower end is the one-sided `1 - alpha`
    /// bound); 95% in journals from before the search/confirm split.
    pub fn ci_level(&self) -> f64 {
        if self.confirm.is_some() { (1.0 - 2.0 * self.alpha).clamp(0.5, 0.999_999) } else { 0.95 }
    }

    /// The record of `cmp` with the engine's own rules (`extra`) appended.
    pub fn new(cmp: &emend_stats::Comparison, extra: &[RuleRecord], alpha: f64) -> FullRecord {
        let p = &cmp.paired;
        let ex = |ids: &[String]| ids.iter().take(20).cloned().collect::<Vec<_>>();
        let mut rules: Vec<RuleRecord> = cmp.verdict.rules.iter().map(RuleRecord::from).collect();
        rules.extend(extra.iter().cloned());
        FullRecord {
            n: p.n(),
            improved: p.improved().len(),
            regressed: p.regressed().len(),
            both_correct: p.both_correct().len(),
            both_wrong: p.both_wrong().len(),
            improved_examples: ex(p.improved()),
            regressed_examples: ex(p.regressed()),
            base_accuracy: p.base_accuracy(),
            cand_accuracy: p.cand_accuracy(),
            delta: p.delta(),
            ci_low: cmp.bootstrap.low,
            ci_high: cmp.bootstrap.high,
            unit: cmp.bootstrap.unit.name().to_string(),
            resamples: cmp.bootstrap.resamples as usize,
            mcnemar_test: cmp.mcnemar.test,
            mcnemar_p: cmp.mcnemar.p_value,
            alpha,
            per_category: p.per_category().clone(),
            accept: cmp.verdict.accept && extra.iter().all(|r| r.pass),
            rules,
            confirm: None,
            lord: None,
            cluster: None,
            holdout: None,
            cost: None,
            utility: None,
            noninferior: None,
        }
    }

    /// The confirm-part record: the paired comparison's category and cost
    /// rules (its bootstrap-interval and two-sided McNemar rules are shown but
    /// no longer gate), then `extra` (the exact test at the LORD++ alpha, the
    /// cluster check when required, the floors against v1). Accepts only when
    /// every kept rule passes.
    pub fn confirm(
        cmp: &emend_stats::Comparison,
        extra: &[RuleRecord],
        test: emend_stats::BetterTest,
        lord: emend_stats::LordTest,
        cluster: emend_stats::ClusterCheck,
    ) -> FullRecord {
        let mut r = FullRecord::new(cmp, &[], test.alpha);
        r.rules.retain(|x| {
            !matches!(x.name, Rule::Stats(RuleKind::McnemarPBelowAlpha) | Rule::Stats(RuleKind::CiExcludesZero))
        });
        r.rules.extend(extra.iter().cloned());
        r.accept = r.rules.iter().all(|x| x.pass);
        r.confirm = Some(test);
        r.lord = Some(lord);
        r.cluster = Some(cluster);
        r
    }

    /// The rules that failed, in order, each once.
    pub fn failed(&self) -> Vec<Rule> {
        let mut out: Vec<Rule> = Vec::new();
        for r in self.rules.iter().filter(|r| !r.pass) {
            if !out.contains(&r.name) {
                out.push(r.name);
            }
        }
        out
    }
}

/// A full-test record for tests: `failed` rules fail, nothing else is recorded.
/// Other crates' tests reach it through the `test-support` feature.
#[cfg(any(test, feature = "test-support"))]
pub fn sample_full(delta: f64, accept: bool, failed: &[Rule]) -> FullRecord {
    FullRecord {
        n: 10,
        improved: 0,
        regressed: 0,
        both_correct: 0,
        both_wrong: 0,
        improved_examples: vec![],
        regressed_examples: vec![],
        base_accuracy: 0.5,
        cand_accuracy: 0.5 + delta,
        delta,
        ci_low: 0.0,
        ci_high: 0.0,
        unit: "question".into(),
        resamples: 10,
        mcnemar_test: McNemarTest::Exact,
        mcnemar_p: 0.5,
        alpha: 0.05,
        per_category: BTreeMap::new(),
        rules: failed
            .iter()
            .map(|r| RuleRecord {
                name: *r,
                category: None,
                value: 0.0,
                threshold: 0.0,
                pass: false,
                detail: String::new(),
            })
            .collect(),
        accept,
        confirm: None,
        lord: None,
        cluster: None,
        holdout: None,
        cost: None,
        utility: None,
        noninferior: None,
    }
}

/// What Thresholdout let flow back into the search after an accept, as
/// older runs recorded it ([`FullRecord::holdout`]); kept so their journals
/// read, never written now.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum HoldoutAnswer {
    /// The two parts agreed: the search-part value.
    Search { value: f64 },
    /// They disagreed: the confirm value with noise.
    Confirm { value: f64 },
    /// The budget was spent.
    Exhausted,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stages_read_and_write_the_journal_strings() {
        for s in [
            "gate:novelty",
            "gate:schema_legality",
            "critic:duplicate",
            "critic:out_of_scope",
            "probe",
            "probe:not_selected",
            "full:mcnemar_p_below_alpha",
            "full:category_vs_first_version",
            "full:not_best",
            "errored",
        ] {
            let stage: StoppedBy = s.parse().unwrap();
            assert_eq!(stage.to_string(), s);
            assert_eq!(serde_json::to_value(stage).unwrap(), serde_json::json!(s));
        }
        assert_eq!("full:not_best".parse::<StoppedBy>(), Ok(StoppedBy::NotBest));
        assert_eq!("gate:novelty".parse::<StoppedBy>(), Ok(StoppedBy::Gate(Gate::Novelty)));
    }

    #[test]
    fn unknown_stages_and_rules_are_refused() {
        for s in ["gate:nope", "critic:", "full:category_vs_run_start", "accepted", ""] {
            let err = s.parse::<StoppedBy>().unwrap_err();
            assert!(err.contains("unknown stage"), "{err}");
        }
        assert!(serde_json::from_value::<Rule>(serde_json::json!("nope")).is_err());
    }

    #[test]
    fn outcomes_are_snake_case_strings() {
        for o in [Resolution::Accepted, Resolution::Rejected, Resolution::Errored, Resolution::Blocked] {
            assert_eq!(serde_json::to_value(o).unwrap(), serde_json::json!(o.as_str()));
        }
    }

    #[test]
    fn a_null_number_reads_back_as_nan() {
        let r: RuleRecord = serde_json::from_value(serde_json::json!({
            "name": "ci_excludes_zero", "value": null, "threshold": 0.0, "pass": false, "detail": "d"
        }))
        .unwrap();
        assert!(r.value.is_nan());
        assert_eq!(r.name, Rule::Stats(RuleKind::CiExcludesZero));
    }
}
