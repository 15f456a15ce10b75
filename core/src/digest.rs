//! The digester (seed 002's Digester -> Planner -> Evolver): a round's
//! evidence condensed into what the planner reads. Pure and deterministic
//! (every map is a `BTreeMap`, every list in journal order).
//!
//! From the served strategy's Layer A results on the search part, the
//! previous served version's results on the same questions (the served
//! version's parent), the question history of the older versions of the
//! lineage and the journal's candidate records, [`digest`] builds a
//! [`Digest`]:
//! - what failed where: per Layer A label its count now;
//! - what changed since the previous version: per label its count then, per
//!   category the search-part accuracy then and now, and the accepted change
//!   that made the served version;
//! - which failures are new and which persist, per label: of the failures
//!   with the label now, how many were answered correctly under the previous
//!   version (`new`), failed there with the same label (`persist`) or with
//!   another (`moved_in`), and how many failed under every evaluated version
//!   of the lineage (`chronic`); and how many of the previous version's
//!   failures with the label are answered correctly now (`fixed`);
//! - recent effects: the candidates of the last [`RECENT_ROUNDS`] rounds,
//!   each with its outcome and its probe delta (a search-part figure: a
//!   confirm-part delta is read once, by its test, and never reaches the
//!   planner).
//!
//! How the planner weighs it is documented in [`crate::planner`]; the
//! digest itself decides nothing.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::outcome::{Label, LabeledOutcome};

/// How many rounds back [`Digest::recent`] reaches (the digested round included).
pub const RECENT_ROUNDS: u64 = 3;

/// A round's evidence, digested. Without a previous version (the first
/// version, or a parent with no evaluation under the current harness and
/// dataset) only the counts now are filled.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Digest {
    /// The served version the round digested.
    pub version: u64,
    /// The version it is compared with: the served version's parent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<u64>,
    /// Search-part questions digested, and how many failed.
    pub questions: usize,
    pub failures: usize,
    /// Layer A label -> what became of its failures (labels either version has).
    pub labels: BTreeMap<String, LabelDigest>,
    /// Category -> its search-part accuracy now and under the previous version.
    pub categories: BTreeMap<String, CategoryDigest>,
    /// Older versions of the lineage whose results `chronic` also reads.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub lineage: usize,
    /// The accepted change that made the served version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_accepted: Option<RecentChange>,
    /// The candidates of the last [`RECENT_ROUNDS`] rounds, in journal order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent: Vec<RecentChange>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// One Layer A label's failures now, against the previous version.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LabelDigest {
    /// Failures with this label now.
    pub count: usize,
    /// Failures with this label under the previous version (on the same questions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<usize>,
    /// Of `count`: answered correctly under the previous version.
    pub new: usize,
    /// Of `count`: failed under the previous version with the same label.
    pub persist: usize,
    /// Of `count`: failed under the previous version with another label.
    pub moved_in: usize,
    /// Of `count`: failed under the previous version and every older
    /// evaluated version of the lineage (the question history).
    pub chronic: usize,
    /// Failed with this label under the previous version, correct now.
    pub fixed: usize,
}

impl LabelDigest {
    /// The count's change since the previous version (None without one).
    pub fn rise(&self) -> Option<i64> {
        self.previous.map(|p| self.count as i64 - p as i64)
    }
}

/// One category's search-part accuracy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CategoryDigest {
    pub n: usize,
    pub accuracy: f64,
    /// Under the previous version, on the same questions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<f64>,
    /// `accuracy - previous`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<f64>,
}

/// A candidate of a recent round, as the digest keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecentChange {
    pub round: u64,
    pub id: String,
    /// Its hypothesis node (`path::direction`).
    pub hypothesis: String,
    /// The fields it changes.
    pub paths: Vec<String>,
    /// `accepted`, `rejected`, `errored` or `blocked`.
    pub outcome: String,
    /// What stopped it (`gate:novelty`, `probe`, `full:...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by: Option<String>,
    /// Its probe delta on the search part, when it had the probe.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_delta: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_version: Option<u64>,
}

/// What [`digest`] reads.
#[derive(Debug, Clone, Copy)]
pub struct Evidence<'a> {
    /// The round being digested (its `recent` window ends here).
    pub round: u64,
    /// The served version and its results on the search part.
    pub version: u64,
    pub results: &'a [LabeledOutcome],
    /// The previous served version and its results (any part: only the
    /// questions `results` has are read).
    pub previous: Option<(u64, &'a [LabeledOutcome])>,
    /// Results of older versions of the lineage, newest first (for `chronic`).
    pub older: &'a [&'a [LabeledOutcome]],
    /// The journal's candidate records, in journal order
    /// (`CandidateRecord::recent_change`).
    pub candidates: &'a [RecentChange],
}

/// Digests a round's evidence (see the module comment).
pub fn digest(e: &Evidence<'_>) -> Digest {
    let mut d = Digest {
        version: e.version,
        previous: e.previous.map(|(v, _)| v),
        questions: e.results.len(),
        failures: e.results.iter().filter(|q| q.label.is_some()).count(),
        lineage: if e.previous.is_some() { e.older.len() } else { 0 },
        ..Digest::default()
    };
    d.labels = labels(e);
    d.categories = categories(e);
    d.last_accepted =
        e.candidates.iter().rev().find(|c| c.accepted_version == Some(e.version) && e.version > 1).cloned();
    let since = e.round.saturating_sub(RECENT_ROUNDS - 1);
    d.recent = e.candidates.iter().filter(|c| c.round >= since && c.round <= e.round).cloned().collect();
    d
}

fn by_id(results: &[LabeledOutcome]) -> BTreeMap<&str, &LabeledOutcome> {
    results.iter().map(|q| (q.id.as_str(), q)).collect()
}

fn labels(e: &Evidence<'_>) -> BTreeMap<String, LabelDigest> {
    let mut out: BTreeMap<Label, LabelDigest> = BTreeMap::new();
    let before = e.previous.map(|(_, r)| by_id(r));
    let older: Vec<BTreeMap<&str, &LabeledOutcome>> = e.older.iter().map(|r| by_id(r)).collect();
    // Failed under every older version that evaluated the question (a question none evaluated counts as failed).
    let failed_before = |id: &str| older.iter().all(|o| o.get(id).is_none_or(|q| !q.correct));
    for q in e.results {
        let then = before.as_ref().map(|b| b.get(q.id.as_str()).copied());
        if let Some(l) = q.label {
            let entry = out.entry(l).or_default();
            entry.count += 1;
            match then.flatten().map(|p| p.label) {
                Some(None) => entry.new += 1,
                Some(Some(pl)) => {
                    if pl == l {
                        entry.persist += 1;
                    } else {
                        entry.moved_in += 1;
                    }
                    if failed_before(&q.id) {
                        entry.chronic += 1;
                    }
                }
                None => {}
            }
        }
        if let Some(Some(p)) = then
            && let Some(pl) = p.label
        {
            let entry = out.entry(pl).or_default();
            *entry.previous.get_or_insert(0) += 1;
            if q.correct {
                entry.fixed += 1;
            }
        }
    }
    if before.is_some() {
        for entry in out.values_mut() {
            entry.previous.get_or_insert(0);
        }
    }
    out.into_iter().map(|(l, d)| (l.as_str().to_string(), d)).collect()
}

fn categories(e: &Evidence<'_>) -> BTreeMap<String, CategoryDigest> {
    let before = e.previous.map(|(_, r)| by_id(r));
    // category -> (n, correct now, correct then)
    let mut tally: BTreeMap<&str, (usize, usize, usize)> = BTreeMap::new();
    for q in e.results {
        let then = match &before {
            Some(b) => match b.get(q.id.as_str()) {
                Some(p) => Some(p.correct),
                // Compared on the questions both versions answered.
                None => continue,
            },
            None => None,
        };
        let t = tally.entry(q.category.as_str()).or_default();
        t.0 += 1;
        t.1 += usize::from(q.correct);
        t.2 += usize::from(then == Some(true));
    }
    let compared = before.is_some();
    tally
        .into_iter()
        .map(|(c, (n, now, then))| {
            let accuracy = now as f64 / n as f64;
            let previous = compared.then(|| then as f64 / n as f64);
            (c.to_string(), CategoryDigest { n, accuracy, previous, delta: previous.map(|p| accuracy - p) })
        })
        .collect()
}

impl Digest {
    /// Whether there is a previous version to compare with.
    pub fn compared(&self) -> bool {
        self.previous.is_some()
    }

    /// The labels whose count rose since the previous version, in label order.
    pub fn rising(&self) -> BTreeSet<&str> {
        self.labels.iter().filter(|(_, l)| l.rise().is_some_and(|r| r > 0)).map(|(k, _)| k.as_str()).collect()
    }

    /// The lines `emend show rN` and the report print: what failed where,
    /// what changed, which failures are new and which persist, recent effects.
    pub fn describe(&self) -> Vec<String> {
        let mut lines = Vec::new();
        let failed: Vec<String> =
            self.labels.iter().filter(|(_, l)| l.count > 0).map(|(k, l)| format!("{k} {}", l.count)).collect();
        lines.push(format!(
            "v{}: {} of {} search questions failed{}{}",
            self.version,
            self.failures,
            self.questions,
            if failed.is_empty() { "" } else { ": " },
            failed.join(", ")
        ));
        if let Some(previous) = self.previous {
            lines.extend(self.describe_shift(previous));
        } else {
            lines.push("no previous version to compare with".to_string());
        }
        if let Some(a) = &self.last_accepted {
            lines.push(format!("last accepted change: {} ({}) in round {}", a.id, a.paths.join(", "), a.round));
        }
        if !self.recent.is_empty() {
            let mut by: BTreeMap<&str, usize> = BTreeMap::new();
            for r in &self.recent {
                *by.entry(r.outcome.as_str()).or_default() += 1;
            }
            let parts: Vec<String> = by.iter().map(|(o, n)| format!("{n} {o}")).collect();
            lines.push(format!("recent candidates (last {RECENT_ROUNDS} rounds): {}", parts.join(", ")));
        }
        lines
    }

    fn describe_shift(&self, previous: u64) -> Vec<String> {
        let shifts: Vec<String> = self
            .labels
            .iter()
            .map(|(k, l)| {
                format!(
                    "{k} {}->{} ({} new, {} persist, {} moved in, {} fixed)",
                    l.previous.unwrap_or(0),
                    l.count,
                    l.new,
                    l.persist,
                    l.moved_in,
                    l.fixed
                )
            })
            .collect();
        let chronic: usize = self.labels.values().map(|l| l.chronic).sum();
        let cats: Vec<String> = self
            .categories
            .iter()
            .filter_map(|(c, d)| d.delta.map(|x| format!("{c} {} pp", crate::percent::points(x, 1))))
            .collect();
        vec![
            format!("since v{previous}: {}", if shifts.is_empty() { "no failures".into() } else { shifts.join("; ") }),
            format!("failing under every version of the lineage ({} compared): {chronic}", self.lineage + 1),
            format!("category accuracy since v{previous}: {}", cats.join(", ")),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(id: &str, category: &str, label: Option<Label>) -> LabeledOutcome {
        LabeledOutcome {
            id: id.into(),
            category: category.into(),
            conversation: None,
            correct: label.is_none(),
            label,
            tokens: None,
            split: None,
        }
    }

    use Label::{KfFiltered as Kf, RetrievalGap as Rg};

    /// v1 -> v2 on six questions: a fixed, b new, c persists, d moves Rg -> Kf, e stays correct, f persists.
    fn versions() -> (Vec<LabeledOutcome>, Vec<LabeledOutcome>) {
        let v1 = vec![
            q("a", "x", Some(Rg)),
            q("b", "x", None),
            q("c", "x", Some(Kf)),
            q("d", "y", Some(Rg)),
            q("e", "y", None),
            q("f", "y", Some(Rg)),
        ];
        let v2 = vec![
            q("a", "x", None),
            q("b", "x", Some(Rg)),
            q("c", "x", Some(Kf)),
            q("d", "y", Some(Kf)),
            q("e", "y", None),
            q("f", "y", Some(Rg)),
        ];
        (v1, v2)
    }

    fn evidence<'a>(
        results: &'a [LabeledOutcome],
        previous: Option<(u64, &'a [LabeledOutcome])>,
        older: &'a [&'a [LabeledOutcome]],
    ) -> Evidence<'a> {
        Evidence { round: 4, version: 2, results, previous, older, candidates: &[] }
    }

    #[test]
    fn labels_count_new_persisting_moved_and_fixed_failures() {
        let (v1, v2) = versions();
        let d = digest(&evidence(&v2, Some((1, &v1)), &[]));
        assert_eq!((d.questions, d.failures, d.previous), (6, 4, Some(1)));
        let rg = &d.labels["retrieval_gap"];
        let kf = &d.labels["kf_filtered"];
        // Rg: b new, f persists; a fixed; three under v1 (a, d, f).
        assert_eq!((rg.count, rg.previous, rg.new, rg.persist, rg.moved_in, rg.fixed), (2, Some(3), 1, 1, 0, 1));
        // Kf: c persists, d moved in from Rg; nothing fixed.
        assert_eq!((kf.count, kf.previous, kf.new, kf.persist, kf.moved_in, kf.fixed), (2, Some(1), 0, 1, 1, 0));
        assert_eq!((rg.rise(), kf.rise()), (Some(-1), Some(1)));
        assert_eq!(d.rising().into_iter().collect::<Vec<_>>(), vec!["kf_filtered"]);
        // The totals agree with Layer A's shift.
        let s = crate::layer_a::shift(&v1, &v2);
        let sum = |f: fn(&LabelDigest) -> usize| d.labels.values().map(f).sum::<usize>();
        assert_eq!(
            (sum(|l| l.new), sum(|l| l.persist), sum(|l| l.moved_in), sum(|l| l.fixed)),
            (s.new, s.persist, s.moved, s.fixed)
        );
    }

    #[test]
    fn category_deltas_compare_the_same_questions() {
        let (v1, v2) = versions();
        let d = digest(&evidence(&v2, Some((1, &v1[..5])), &[]));
        // f is missing from v1's results: category y is compared on d and e.
        let y = &d.categories["y"];
        assert_eq!((y.n, y.accuracy, y.previous, y.delta), (2, 0.5, Some(0.5), Some(0.0)));
        let x = &d.categories["x"];
        assert_eq!(x.n, 3);
        assert!((x.delta.unwrap() - 0.0).abs() < 1e-12, "a fixed, b broken: {x:?}");
        let alone = digest(&evidence(&v2, None, &[]));
        assert_eq!(alone.categories["y"], CategoryDigest { n: 3, accuracy: 1.0 / 3.0, previous: None, delta: None });
        assert!(alone.labels.values().all(|l| l.previous.is_none() && l.new + l.persist + l.moved_in + l.fixed == 0));
        assert!(!alone.compared() && alone.rising().is_empty());
    }

    #[test]
    fn chronic_failures_failed_under_every_version_of_the_lineage() {
        let (v1, v2) = versions();
        // v0 answered c, failed f: only f failed under v0, v1 and v2.
        let v0 = vec![q("c", "x", None), q("f", "y", Some(Kf)), q("d", "y", None)];
        let older: Vec<&[LabeledOutcome]> = vec![&v0];
        let d = digest(&evidence(&v2, Some((1, &v1)), &older));
        assert_eq!((d.labels["retrieval_gap"].chronic, d.labels["kf_filtered"].chronic, d.lineage), (1, 0, 1));
        let d = digest(&evidence(&v2, Some((1, &v1)), &[]));
        assert_eq!((d.labels["retrieval_gap"].chronic, d.labels["kf_filtered"].chronic), (1, 2));
    }

    #[test]
    fn recent_changes_and_the_last_accepted_come_from_the_candidate_records() {
        let (v1, v2) = versions();
        let record = |round: u64, id: &str, accepted: Option<u64>| -> RecentChange {
            let mut c: crate::events::CandidateRecord = serde_json::from_value(serde_json::json!({
                "id": id, "round": round, "hash": null, "parent_version": 1, "parent_hash": "h",
                "hypothesis": "retrieve.top_k::increase",
                "change": {"path": "retrieve.top_k", "from": 5, "to": 15},
                "document": null, "motivation": {}, "actionability": 0.5, "ucb": 1.0, "gates": [],
                "critic": null, "probe": null, "full": null, "outcome": "rejected", "rejected_by": "probe",
                "reason": "", "delta": 0.04, "alpha": null, "accepted_version": null
            }))
            .unwrap();
            if accepted.is_some() {
                c.outcome = crate::candidate::Resolution::Accepted;
                c.rejected_by = None;
                c.accepted_version = accepted;
            }
            c.recent_change()
        };
        let candidates = vec![record(1, "r1c1", None), record(2, "r2c1", Some(2)), record(4, "r4c1", None)];
        let e = Evidence { candidates: &candidates, ..evidence(&v2, Some((1, &v1)), &[]) };
        let d = digest(&e);
        let ids: Vec<&str> = d.recent.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(ids, vec!["r2c1", "r4c1"], "rounds 2..=4");
        let last = d.last_accepted.as_ref().unwrap();
        assert_eq!(
            (last.id.as_str(), last.paths.clone(), last.outcome.as_str()),
            ("r2c1", vec!["retrieve.top_k".to_string()], "accepted")
        );
        // The confirm-part delta is not kept: only the probe's, which these records lack.
        assert_eq!((d.recent[1].stopped_by.as_deref(), d.recent[1].probe_delta), (Some("probe"), None));
        let lines = d.describe();
        assert!(
            lines[0].starts_with("v2: 4 of 6 search questions failed: kf_filtered 2, retrieval_gap 2"),
            "{lines:?}"
        );
        assert!(
            lines.iter().any(|l| l.contains("retrieval_gap 3->2 (1 new, 1 persist, 0 moved in, 1 fixed)")),
            "{lines:?}"
        );
        assert!(lines.iter().any(|l| l == "last accepted change: r2c1 (retrieve.top_k) in round 2"), "{lines:?}");
        let round_trip: Digest = serde_json::from_value(serde_json::to_value(&d).unwrap()).unwrap();
        assert_eq!(round_trip, d);
    }
}
