//! The confirm test's acceptance verdict: every rule, its number, its threshold and
//! whether it passed. A candidate is accepted only if all rules pass; the
//! verdict lists them all (not just the first failure) so a rejection says
//! everything that was wrong and by how much.
//!
//! Rules, in order:
//! - `more_improved_than_regressed`: |I| > |R|;
//! - `mcnemar_p_below_alpha`: McNemar p < alpha (the level the caller
//!   spends on this test, e.g. LORD++'s);
//! - `ci_excludes_zero`: the bootstrap interval's lower end > 0;
//! - `category_non_regression`, one per category: delta >= -max(epsilon_c,
//!   1 / n_c) (see [`category_floor`]);
//! - `cost_within_bound`, when a cost bound is set: mean context tokens grow by
//!   at most the bound. A bound without measurements fails (a check that was
//!   asked for and could not run is not a pass).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::bootstrap::BootstrapCi;
use super::mcnemar::McNemar;
use super::pairing::Paired;

/// The largest accuracy drop a category of `n` questions may show: `epsilon_c`,
/// or one question when one question is more than that (`1 / n`). A category
/// of 11 questions cannot drop by less than 9.1 pp, so a floor of 2 pp would
/// veto any change that costs it a single question however much it gains
/// elsewhere: that is noise, not a regression. Two questions lost net are
/// never within the floor when `2 / n > epsilon_c`.
pub fn category_floor(n: usize, drop_max: f64) -> f64 {
    if n == 0 { drop_max } else { drop_max.max(1.0 / n as f64) }
}

/// True when a category of `n` questions going from `base` to `cand` correct
/// stays within [`category_floor`].
pub fn keeps_category(base: usize, cand: usize, n: usize, drop_max: f64) -> bool {
    if n == 0 {
        return true;
    }
    let delta = (cand as f64 - base as f64) / n as f64;
    delta >= -category_floor(n, drop_max) - 1e-12
}

/// The gate's thresholds for one comparison.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// Significance level for McNemar's test, in (0, 1).
    pub alpha: f64,
    /// Largest allowed per-category accuracy drop, a fraction (0.02 = 2pp).
    pub category_drop_max: f64,
    /// Largest allowed relative growth of mean context tokens (0.10 = +10%); `None`: no cost rule.
    pub cost_bound: Option<f64>,
}

impl Default for Thresholds {
    /// alpha 0.05, category_drop_max 0.02, no cost bound.
    fn default() -> Self {
        Thresholds { alpha: 0.05, category_drop_max: 0.02, cost_bound: None }
    }
}

/// Thresholds that cannot mean anything.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum ThresholdError {
    #[error("alpha {0} is not strictly between 0 and 1")]
    Alpha(f64),
    #[error("category_drop_max {0} is not a non-negative fraction")]
    CategoryDropMax(f64),
    #[error("cost bound {0} is not a non-negative fraction")]
    CostBound(f64),
}

impl Thresholds {
    pub fn validate(&self) -> Result<(), ThresholdError> {
        if !(self.alpha > 0.0 && self.alpha < 1.0) {
            return Err(ThresholdError::Alpha(self.alpha));
        }
        if !(self.category_drop_max >= 0.0 && self.category_drop_max.is_finite()) {
            return Err(ThresholdError::CategoryDropMax(self.category_drop_max));
        }
        match self.cost_bound {
            Some(b) if !(b >= 0.0 && b.is_finite()) => Err(ThresholdError::CostBound(b)),
            _ => Ok(()),
        }
    }
}

/// Mean context tokens per question of the two runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    pub baseline_mean_tokens: f64,
    pub candidate_mean_tokens: f64,
}

impl Cost {
    /// Relative growth `(cand - base) / base`; 0 when both are 0, infinite when only the baseline is.
    pub fn growth(&self) -> f64 {
        let (b, c) = (self.baseline_mean_tokens, self.candidate_mean_tokens);
        if b == 0.0 { if c == 0.0 { 0.0 } else { f64::INFINITY } } else { (c - b) / b }
    }
}

/// Which rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleKind {
    MoreImprovedThanRegressed,
    McnemarPBelowAlpha,
    CiExcludesZero,
    CategoryNonRegression,
    CostWithinBound,
}

impl RuleKind {
    /// The serialized name, e.g. `mcnemar_p_below_alpha`.
    pub fn name(self) -> &'static str {
        match self {
            RuleKind::MoreImprovedThanRegressed => "more_improved_than_regressed",
            RuleKind::McnemarPBelowAlpha => "mcnemar_p_below_alpha",
            RuleKind::CiExcludesZero => "ci_excludes_zero",
            RuleKind::CategoryNonRegression => "category_non_regression",
            RuleKind::CostWithinBound => "cost_within_bound",
        }
    }
}

impl fmt::Display for RuleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One rule's outcome. `value` and `threshold` are in the rule's own units
/// (counts, a p-value, fractions); `detail` says the comparison in words.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    pub name: RuleKind,
    /// The category, for `category_non_regression`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    pub value: f64,
    pub threshold: f64,
    pub pass: bool,
    pub detail: String,
}

/// All rules and the decision they imply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// True exactly when every rule passed.
    pub accept: bool,
    pub rules: Vec<Rule>,
}

impl Verdict {
    pub fn failed(&self) -> impl Iterator<Item = &Rule> {
        self.rules.iter().filter(|r| !r.pass)
    }
}

/// Applies every rule. `mcnemar` and `ci` must come from `paired`;
/// `cost` is needed only when `thresholds.cost_bound` is set.
pub fn verdict(
    paired: &Paired,
    mcnemar: &McNemar,
    ci: &BootstrapCi,
    thresholds: &Thresholds,
    cost: Option<&Cost>,
) -> Verdict {
    let improved = paired.improved().len();
    let regressed = paired.regressed().len();
    debug_assert_eq!((mcnemar.improved, mcnemar.regressed), (improved as u64, regressed as u64));
    let mut rules = vec![
        Rule {
            name: RuleKind::MoreImprovedThanRegressed,
            category: None,
            value: improved as f64,
            threshold: regressed as f64,
            pass: improved > regressed,
            detail: format!("{improved} improved vs {regressed} regressed (needs improved > regressed)"),
        },
        Rule {
            name: RuleKind::McnemarPBelowAlpha,
            category: None,
            value: mcnemar.p_value,
            threshold: thresholds.alpha,
            pass: mcnemar.p_value < thresholds.alpha,
            detail: format!(
                "{} McNemar p = {} on {improved}+{regressed} discordant (needs p < alpha {})",
                mcnemar.test.name(),
                p_value(mcnemar.p_value),
                thresholds.alpha
            ),
        },
        Rule {
            name: RuleKind::CiExcludesZero,
            category: None,
            value: ci.low,
            threshold: 0.0,
            pass: ci.low > 0.0,
            detail: format!(
                "{}% CI [{}, {}] pp by {}, {} resamples, seed {} (needs low > 0)",
                percent_level(ci.level),
                pp(ci.low),
                pp(ci.high),
                ci.unit,
                ci.resamples,
                ci.seed
            ),
        },
    ];
    for (category, c) in paired.per_category() {
        let floor = category_floor(c.n, thresholds.category_drop_max);
        rules.push(Rule {
            name: RuleKind::CategoryNonRegression,
            category: Some(category.clone()),
            value: c.delta,
            threshold: -floor,
            pass: keeps_category(c.base_correct, c.cand_correct, c.n, thresholds.category_drop_max),
            detail: format!(
                "category {category:?}: {} -> {} of {} correct, delta {} pp (needs >= {} pp)",
                c.base_correct,
                c.cand_correct,
                c.n,
                pp(c.delta),
                pp(-floor)
            ),
        });
    }
    if let Some(bound) = thresholds.cost_bound {
        rules.push(match cost {
            Some(cost) => {
                let growth = cost.growth();
                Rule {
                    name: RuleKind::CostWithinBound,
                    category: None,
                    value: growth,
                    threshold: bound,
                    pass: growth <= bound,
                    detail: format!(
                        "mean context tokens {:.1} -> {:.1}, {:+.2}% (needs <= +{:.2}%)",
                        cost.baseline_mean_tokens,
                        cost.candidate_mean_tokens,
                        growth * 100.0,
                        bound * 100.0
                    ),
                }
            }
            None => Rule {
                name: RuleKind::CostWithinBound,
                category: None,
                value: f64::NAN,
                threshold: bound,
                pass: false,
                detail: "no context-token measurements: the cost bound cannot be checked".into(),
            },
        });
    }
    Verdict { accept: rules.iter().all(|r| r.pass), rules }
}

/// A confidence level as a percentage without float noise (0.9 -> 90, not 90.00000000000001).
fn percent_level(level: f64) -> f64 {
    (level * 1e4).round() / 1e2
}

/// A p-value with six decimals, or in scientific notation when tiny.
fn p_value(p: f64) -> String {
    if p < 1e-4 { format!("{p:.3e}") } else { format!("{p:.6}") }
}

/// A fraction as signed percentage points with two decimals, e.g. `+1.25`.
fn pp(x: f64) -> String {
    format!("{:+.2}", x * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::{BootstrapCi, BootstrapUnit};
    use crate::mcnemar::mcnemar;
    use crate::pairing::{Outcome, pair};

    /// Builds a paired set from per-category (improved, regressed, both-correct, both-wrong) counts.
    fn paired(categories: &[(&str, [usize; 4])]) -> Paired {
        let mut base = Vec::new();
        let mut cand = Vec::new();
        for (category, counts) in categories {
            let kinds = [(false, true), (true, false), (true, true), (false, false)];
            for (k, &count) in counts.iter().enumerate() {
                for i in 0..count {
                    let o = Outcome {
                        id: format!("{category}-{k}-{i}"),
                        conversation: None,
                        category: category.to_string(),
                        correct: kinds[k].0,
                    };
                    cand.push(Outcome { correct: kinds[k].1, ..o.clone() });
                    base.push(o);
                }
            }
        }
        pair(&base, &cand).unwrap()
    }

    fn ci(low: f64, high: f64) -> BootstrapCi {
        BootstrapCi {
            unit: BootstrapUnit::Question,
            resamples: 1000,
            seed: 0,
            level: 0.95,
            units: 0,
            delta: (low + high) / 2.0,
            low,
            high,
        }
    }

    const T: Thresholds = Thresholds { alpha: 0.05, category_drop_max: 0.02, cost_bound: Some(0.10) };
    const CHEAP: Cost = Cost { baseline_mean_tokens: 1000.0, candidate_mean_tokens: 1050.0 };

    /// A clear win in two categories: 60 improved, 20 regressed.
    fn good() -> Paired {
        paired(&[("a", [30, 10, 100, 60]), ("b", [30, 10, 100, 60])])
    }

    fn run(p: &Paired, ci: &BootstrapCi, t: &Thresholds, cost: Option<&Cost>) -> Verdict {
        verdict(p, &mcnemar(p.improved().len() as u64, p.regressed().len() as u64), ci, t, cost)
    }

    fn failing(v: &Verdict) -> Vec<String> {
        v.failed()
            .map(|r| format!("{}{}", r.name, r.category.as_deref().map(|c| format!(":{c}")).unwrap_or_default()))
            .collect()
    }

    #[test]
    fn accepts_when_every_rule_passes_and_lists_them_all() {
        let v = run(&good(), &ci(0.03, 0.07), &T, Some(&CHEAP));
        assert!(v.accept, "{v:#?}");
        let names: Vec<_> = v.rules.iter().map(|r| r.name.name()).collect();
        assert_eq!(
            names,
            [
                "more_improved_than_regressed",
                "mcnemar_p_below_alpha",
                "ci_excludes_zero",
                "category_non_regression",
                "category_non_regression",
                "cost_within_bound"
            ]
        );
        assert_eq!(v.rules[0].value, 60.0);
        assert_eq!(v.rules[0].threshold, 20.0);
        assert_eq!(v.rules[3].category.as_deref(), Some("a"));
        assert_eq!(v.rules[3].threshold, -0.02);
        assert!((v.rules[5].value - 0.05).abs() < 1e-12);
    }

    #[test]
    fn a_small_category_may_lose_one_question_but_not_two() {
        // 11 questions: one lost is the smallest measurable drop (9.1 pp), two is a regression.
        assert!(keeps_category(2, 1, 11, 0.02));
        assert!(!keeps_category(3, 1, 11, 0.02));
        // 200 questions: the floor is epsilon_c itself (4 questions), one question is within it.
        assert!(keeps_category(100, 96, 200, 0.02));
        assert!(!keeps_category(100, 95, 200, 0.02));
        assert!((category_floor(11, 0.02) - 1.0 / 11.0).abs() < 1e-12);
        assert_eq!(category_floor(200, 0.02), 0.02);
        // In the verdict: a big gain with one question lost in an 11-question category is kept.
        let p = paired(&[("big", [40, 2, 100, 40]), ("small", [0, 1, 1, 9])]);
        let v = run(&p, &ci(0.05, 0.2), &T, Some(&CHEAP));
        assert!(failing(&v).is_empty(), "{:?}", failing(&v));
        let p = paired(&[("big", [40, 2, 100, 40]), ("small", [0, 2, 1, 8])]);
        let v = run(&p, &ci(0.05, 0.2), &T, Some(&CHEAP));
        assert_eq!(failing(&v), ["category_non_regression:small"]);
    }

    #[test]
    fn more_improved_than_regressed_fails_alone() {
        // I = R: McNemar p would be 1, so give alpha 1 - tiny to isolate the rule.
        let p = paired(&[("a", [20, 20, 100, 60])]);
        let t = Thresholds { alpha: 1.0 - 1e-12, ..T };
        let v = run(&p, &ci(0.01, 0.02), &t, Some(&CHEAP));
        assert_eq!(failing(&v), ["more_improved_than_regressed"]);
        assert!(!v.accept);
    }

    #[test]
    fn mcnemar_fails_alone() {
        // 14 vs 8 discordant: I > R but exact p ~ 0.29.
        let p = paired(&[("a", [14, 8, 100, 60])]);
        let v = run(&p, &ci(0.01, 0.05), &T, Some(&CHEAP));
        assert_eq!(failing(&v), ["mcnemar_p_below_alpha"]);
        assert!(!v.accept);
    }

    #[test]
    fn ci_fails_alone() {
        let v = run(&good(), &ci(-0.001, 0.07), &T, Some(&CHEAP));
        assert_eq!(failing(&v), ["ci_excludes_zero"]);
        // Zero itself is not excluded.
        let v = run(&good(), &ci(0.0, 0.07), &T, Some(&CHEAP));
        assert_eq!(failing(&v), ["ci_excludes_zero"]);
    }

    #[test]
    fn one_category_fails_alone() {
        // Category b loses 3 of 100 (-3pp) while the whole run wins clearly.
        let p = paired(&[("a", [60, 5, 100, 60]), ("b", [0, 3, 60, 37]), ("c", [10, 2, 50, 38])]);
        let v = run(&p, &ci(0.03, 0.1), &T, Some(&CHEAP));
        assert_eq!(failing(&v), ["category_non_regression:b"]);
        let b = v.rules.iter().find(|r| r.category.as_deref() == Some("b")).unwrap();
        assert!((b.value + 0.03).abs() < 1e-12, "{b:?}");
        assert!(b.detail.contains("-3.00 pp"), "{}", b.detail);
    }

    #[test]
    fn category_drop_of_exactly_epsilon_passes() {
        // -1/50 = -0.02 exactly at the threshold.
        let p = paired(&[("a", [60, 5, 100, 60]), ("b", [0, 1, 30, 19])]);
        let v = run(&p, &ci(0.03, 0.1), &T, Some(&CHEAP));
        assert!(v.accept, "{:?}", failing(&v));
    }

    #[test]
    fn cost_fails_alone() {
        let costly = Cost { baseline_mean_tokens: 1000.0, candidate_mean_tokens: 1100.5 };
        let v = run(&good(), &ci(0.03, 0.07), &T, Some(&costly));
        assert_eq!(failing(&v), ["cost_within_bound"]);
        // A bound without measurements fails rather than passing silently.
        let v = run(&good(), &ci(0.03, 0.07), &T, None);
        assert_eq!(failing(&v), ["cost_within_bound"]);
        // No bound, no cost rule, whatever the measurements.
        let v = run(&good(), &ci(0.03, 0.07), &Thresholds { cost_bound: None, ..T }, Some(&costly));
        assert!(v.accept && v.rules.iter().all(|r| r.name != RuleKind::CostWithinBound));
    }

    #[test]
    fn every_failure_is_listed() {
        let p = paired(&[("a", [5, 6, 100, 60]), ("b", [0, 3, 60, 37])]);
        let costly = Cost { baseline_mean_tokens: 10.0, candidate_mean_tokens: 20.0 };
        let v = run(&p, &ci(-0.05, 0.01), &T, Some(&costly));
        assert_eq!(
            failing(&v),
            [
                "more_improved_than_regressed",
                "mcnemar_p_below_alpha",
                "ci_excludes_zero",
                "category_non_regression:b",
                "cost_within_bound"
            ]
        );
    }

    #[test]
    fn thresholds_are_validated() {
        assert!(T.validate().is_ok());
        assert_eq!(Thresholds { alpha: 0.0, ..T }.validate(), Err(ThresholdError::Alpha(0.0)));
        assert_eq!(Thresholds { alpha: 1.0, ..T }.validate(), Err(ThresholdError::Alpha(1.0)));
        assert_eq!(Thresholds { category_drop_max: -0.1, ..T }.validate(), Err(ThresholdError::CategoryDropMax(-0.1)));
        assert_eq!(Thresholds { cost_bound: Some(-1.0), ..T }.validate(), Err(ThresholdError::CostBound(-1.0)));
    }

    #[test]
    fn serializes_rule_names_in_snake_case() {
        let v = run(&good(), &ci(0.03, 0.07), &T, Some(&CHEAP));
        let json = serde_json::to_value(&v).unwrap();
        assert_eq!(json["rules"][1]["name"], "mcnemar_p_below_alpha");
        assert_eq!(json["rules"][3]["category"], "a");
        assert!(json["rules"][0].get("category").is_none());
    }
}
