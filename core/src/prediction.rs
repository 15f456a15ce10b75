//! A person's falsifiable hypothesis (`emend propose --predict`): a change
//! proposed with a predicted per-category movement, checked on the confirm
//! part before the change may be served.
//!
//! The grammar is a comma-separated list of items, each naming a category of
//! the dataset (`temporal`, `single-hop`, ...):
//!
//! - `CATEGORY +Npp`: the category's accuracy rises by at least N points;
//! - `CATEGORY -Npp`: it falls by at least N points;
//! - `CATEGORY >= 0`: it does not regress;
//! - `CATEGORY >= -Npp`: it falls by at most N points.
//!
//! The verdict rule ([`holds`]), on the paired per-category difference d
//! (candidate minus served on that category's confirm-part questions) with
//! its 95% paired percentile bootstrap interval [low, high]:
//!
//! - `+Npp` held when low > 0 (a rise is shown) and high >= N (a rise of N
//!   is inside the interval); it fails when the interval reaches zero or
//!   stays below N;
//! - `-Npp` held when high < 0 and low <= -N (the mirror image);
//! - `>= X` (a floor: `>= 0`, `>= -1pp`) held when the estimate d >= X,
//!   failed when the observed difference is below the floor. A claim of no
//!   regression cannot ask the interval to exclude zero when nothing moved,
//!   so the interval is reported beside it but does not decide it.
//!
//! A category with no confirm-part question fails its item (nothing was
//! measured that could hold it).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// The two-sided level of every prediction's interval.
pub const LEVEL: f64 = 0.95;

/// What one item claims about a category's accuracy difference (fractions: 0.03 = 3pp).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "points", rename_all = "snake_case")]
pub enum Claim {
    /// `+Npp`: rises by at least N.
    Rise(f64),
    /// `-Npp`: falls by at least N.
    Fall(f64),
    /// `>= X` (X <= 0): ends no lower than X.
    AtLeast(f64),
}

impl Claim {
    /// The claim as it is written (`+3pp`, `-2pp`, `>= 0`, `>= -1pp`).
    pub fn describe(self) -> String {
        match self {
            Claim::Rise(n) => format!("+{}pp", crate::schema::fmt_num(n * 100.0)),
            Claim::Fall(n) => format!("-{}pp", crate::schema::fmt_num(n * 100.0)),
            Claim::AtLeast(0.0) => ">= 0".into(),
            Claim::AtLeast(x) => format!(">= {}pp", crate::schema::fmt_num(x * 100.0)),
        }
    }
}

/// One item of a prediction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Predicted {
    pub category: String,
    pub claim: Claim,
}

const FORM: &str = "expected CATEGORY +Npp, CATEGORY -Npp, CATEGORY >= 0 or CATEGORY >= -Npp";

/// Parses `temporal +3pp, single-hop >= 0`. An error is one line naming the offending item.
pub fn parse(text: &str) -> Result<Vec<Predicted>, String> {
    let mut out: Vec<Predicted> = Vec::new();
    for raw in text.split(',') {
        let s = raw.trim();
        let bad = || format!("prediction item {s:?}: {FORM}");
        if s.is_empty() {
            return Err(format!("prediction {text:?} has an empty item: {FORM}"));
        }
        let (category, claim) = match s.split_once(">=") {
            Some((cat, rest)) => (cat.trim(), floor(rest.trim()).ok_or_else(bad)?),
            None => {
                let (cat, amount) = s.rsplit_once(char::is_whitespace).ok_or_else(bad)?;
                (cat.trim(), signed(amount.trim()).ok_or_else(bad)?)
            }
        };
        if category.is_empty() || category.contains(char::is_whitespace) {
            return Err(bad());
        }
        if out.iter().any(|p| p.category == category) {
            return Err(format!("prediction item {s:?}: category {category} is predicted twice"));
        }
        out.push(Predicted { category: category.to_string(), claim });
    }
    Ok(out)
}

/// `+3pp` / `-2.5pp`: a directional claim of at least N > 0 points.
fn signed(s: &str) -> Option<Claim> {
    let (rise, rest) = match s.as_bytes().first()? {
        b'+' => (true, &s[1..]),
        b'-' => (false, &s[1..]),
        _ => return None,
    };
    let n = points(rest)?;
    if n <= 0.0 {
        return None;
    }
    Some(if rise { Claim::Rise(n) } else { Claim::Fall(n) })
}

/// `0` / `-1pp`: a floor at or below zero.
fn floor(s: &str) -> Option<Claim> {
    if s == "0" || s == "0pp" || s == "+0pp" || s == "-0pp" {
        return Some(Claim::AtLeast(0.0));
    }
    let n = points(s.strip_prefix('-')?)?;
    (n > 0.0).then_some(Claim::AtLeast(-n))
}

/// `3pp` as 0.03 (a finite number of points up to 100).
fn points(s: &str) -> Option<f64> {
    let n: f64 = s.strip_suffix("pp")?.parse().ok()?;
    (n.is_finite() && n <= 100.0 && !s.starts_with(['+', '-'])).then_some(n / 100.0)
}

/// Refuses a category the dataset does not have, naming the known ones.
pub fn check_categories(items: &[Predicted], known: &BTreeSet<String>) -> Result<(), String> {
    for p in items {
        if !known.contains(&p.category) {
            let list: Vec<&str> = known.iter().map(String::as_str).collect();
            return Err(format!(
                "unknown category {} in --predict (the dataset's categories: {})",
                p.category,
                list.join(", ")
            ));
        }
    }
    Ok(())
}

/// Whether `claim` holds for a difference `estimate` with interval [low, high] (the module's rule).
pub fn holds(claim: Claim, estimate: f64, low: f64, high: f64) -> bool {
    const EPS: f64 = 1e-12;
    match claim {
        Claim::Rise(n) => low > EPS && high >= n - EPS,
        Claim::Fall(n) => high < -EPS && low <= -n + EPS,
        Claim::AtLeast(x) => estimate >= x - EPS,
    }
}

/// One category's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CategoryVerdict {
    pub category: String,
    pub claim: Claim,
    /// Confirm-part questions of the category.
    pub n: usize,
    /// Candidate minus served accuracy on them (a fraction).
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
    pub held: bool,
}

impl CategoryVerdict {
    /// `temporal +3pp: held (+4.2 pp, 95% CI [+1.1, +7.5], 48 questions)`.
    pub fn line(&self) -> String {
        format!(
            "{} {}: {} ({:+.1} pp, {:.0}% CI [{:+.1}, {:+.1}], {} question(s))",
            self.category,
            self.claim.describe(),
            if self.held { "held" } else { "failed" },
            self.estimate * 100.0,
            LEVEL * 100.0,
            self.low * 100.0,
            self.high * 100.0,
            self.n
        )
    }
}

/// A proposal's prediction and its verdict on the confirm part, journaled in its candidate record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PredictionRecord {
    /// The prediction as the person wrote it.
    pub text: String,
    pub verdicts: Vec<CategoryVerdict>,
    /// Every item held.
    pub held: bool,
    /// The prediction failed and the change was let through anyway (`--accept-unpredicted`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub accepted_unpredicted: bool,
    /// Bootstrap resamples and seed of the intervals.
    pub resamples: u32,
    pub seed: u64,
}

impl PredictionRecord {
    /// `prediction "temporal +3pp" held` (or `failed`, `failed, accepted anyway (--accept-unpredicted)`).
    pub fn heading(&self) -> String {
        let text = &self.text;
        format!(
            "prediction {text:?} {}{}",
            if self.held { "held" } else { "failed" },
            if self.accepted_unpredicted { ", accepted anyway (--accept-unpredicted)" } else { "" },
        )
    }

    /// The heading and every category's verdict on one line.
    pub fn describe(&self) -> String {
        let lines: Vec<String> = self.verdicts.iter().map(CategoryVerdict::line).collect();
        format!("{}: {}", self.heading(), lines.join("; "))
    }
}

/// Judges `items` on paired confirm-part outcomes: per category, the
/// difference and its paired percentile bootstrap interval at [`LEVEL`]
/// (question unit, `resamples` draws, `seed`).
pub fn judge(
    text: &str,
    items: &[Predicted],
    base: &[emend_stats::Outcome],
    cand: &[emend_stats::Outcome],
    resamples: u32,
    seed: u64,
) -> PredictionRecord {
    let verdicts = items
        .iter()
        .map(|p| {
            let of = |o: &[emend_stats::Outcome]| -> Vec<emend_stats::Outcome> {
                o.iter().filter(|q| q.category == p.category).cloned().collect()
            };
            let ci = emend_stats::pair(&of(base), &of(cand)).ok().and_then(|paired| {
                let config = emend_stats::BootstrapConfig {
                    unit: emend_stats::BootstrapUnit::Question,
                    resamples: resamples.max(1),
                    seed,
                    level: LEVEL,
                };
                emend_stats::paired_bootstrap(&paired, &config).ok().map(|ci| (paired.n(), ci))
            });
            match ci {
                Some((n, ci)) => CategoryVerdict {
                    category: p.category.clone(),
                    claim: p.claim,
                    n,
                    estimate: ci.delta,
                    low: ci.low,
                    high: ci.high,
                    held: holds(p.claim, ci.delta, ci.low, ci.high),
                },
                None => CategoryVerdict {
                    category: p.category.clone(),
                    claim: p.claim,
                    n: 0,
                    estimate: 0.0,
                    low: 0.0,
                    high: 0.0,
                    held: false,
                },
            }
        })
        .collect::<Vec<_>>();
    let held = verdicts.iter().all(|v| v.held);
    PredictionRecord { text: text.to_string(), verdicts, held, accepted_unpredicted: false, resamples, seed }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grammar_reads_every_form() {
        let p = parse("temporal +3pp, single-hop >= 0, multi-hop -2.5pp, open-domain >= -1pp").unwrap();
        assert_eq!(p[0], Predicted { category: "temporal".into(), claim: Claim::Rise(0.03) });
        assert_eq!(p[1].claim, Claim::AtLeast(0.0));
        assert_eq!(p[2].claim, Claim::Fall(0.025));
        assert_eq!(p[3].claim, Claim::AtLeast(-0.01));
        assert_eq!(p[3].claim.describe(), ">= -1pp");
        assert_eq!(p[0].claim.describe(), "+3pp");
    }

    #[test]
    fn a_bad_item_is_named_with_the_expected_form() {
        for bad in
            ["temporal 3pp", "temporal +3", "temporal >= 2pp", "+3pp", "temporal up", "temporal +0pp", "a b +1pp"]
        {
            let e = parse(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
            assert!(e.contains("expected CATEGORY +Npp"), "{e}");
            assert!(!e.contains('\n'));
        }
        assert!(parse("temporal +1pp,").unwrap_err().contains("empty item"));
        assert!(parse("temporal +1pp, temporal >= 0").unwrap_err().contains("predicted twice"));
    }

    #[test]
    fn an_unknown_category_lists_the_known_ones() {
        let known: BTreeSet<String> = ["temporal".to_string(), "single-hop".to_string()].into();
        let e = check_categories(&parse("temporall +1pp").unwrap(), &known).unwrap_err();
        assert_eq!(e, "unknown category temporall in --predict (the dataset's categories: single-hop, temporal)");
        assert!(check_categories(&parse("temporal +1pp").unwrap(), &known).is_ok());
    }

    #[test]
    fn a_rise_holds_only_when_the_interval_excludes_zero_and_reaches_the_claim() {
        let rise = Claim::Rise(0.03);
        assert!(holds(rise, 0.05, 0.01, 0.09));
        // Shown to rise, but the interval stays below the claimed 3 points: failed.
        assert!(!holds(rise, 0.015, 0.005, 0.025));
        // Reaches 3 points but does not exclude zero: failed.
        assert!(!holds(rise, 0.04, -0.01, 0.09));
        assert!(!holds(rise, 0.04, 0.0, 0.09));
        let fall = Claim::Fall(0.02);
        assert!(holds(fall, -0.04, -0.07, -0.01));
        assert!(!holds(fall, -0.04, -0.07, 0.01));
        assert!(!holds(fall, -0.01, -0.015, -0.005));
    }

    #[test]
    fn a_floor_holds_when_the_estimate_is_at_or_above_it() {
        assert!(holds(Claim::AtLeast(0.0), 0.0, 0.0, 0.0));
        assert!(holds(Claim::AtLeast(0.0), 0.01, -0.02, 0.04));
        assert!(!holds(Claim::AtLeast(0.0), -0.01, -0.04, 0.02));
        assert!(holds(Claim::AtLeast(-0.02), -0.01, -0.04, 0.02));
        assert!(!holds(Claim::AtLeast(-0.02), -0.03, -0.06, 0.0));
    }

    fn outcomes(category: &str, correct: &[bool]) -> Vec<emend_stats::Outcome> {
        correct
            .iter()
            .enumerate()
            .map(|(i, &c)| emend_stats::Outcome {
                id: format!("{category}{i}"),
                conversation: None,
                category: category.into(),
                correct: c,
            })
            .collect()
    }

    #[test]
    fn the_verdict_pairs_each_category_on_its_own_questions() {
        // temporal: 20 questions, the candidate fixes 10 and breaks none (+50pp);
        // single-hop: 10 questions, the candidate breaks 3 (-30pp).
        let mut base = outcomes("temporal", &[false; 20]);
        let mut cand = outcomes("temporal", &[vec![true; 10], vec![false; 10]].concat());
        base.extend(outcomes("single-hop", &[true; 10]));
        cand.extend(outcomes("single-hop", &[vec![false; 3], vec![true; 7]].concat()));
        let items = parse("temporal +3pp, single-hop >= 0, multi-hop >= 0").unwrap();
        let r = judge("t", &items, &base, &cand, 2000, 7);
        let t = &r.verdicts[0];
        assert_eq!((t.n, t.held), (20, true));
        assert!((t.estimate - 0.5).abs() < 1e-12 && t.low > 0.0 && t.high >= 0.03);
        let s = &r.verdicts[1];
        assert_eq!((s.n, s.held), (10, false));
        assert!((s.estimate + 0.3).abs() < 1e-12);
        // A category without confirm questions holds nothing.
        assert_eq!((r.verdicts[2].n, r.verdicts[2].held), (0, false));
        assert!(!r.held);
        assert!(r.describe().contains("single-hop >= 0: failed (-30.0 pp"), "{}", r.describe());
    }
}
