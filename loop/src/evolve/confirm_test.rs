//! The confirm test of a round: the confirm test of the best probes on the confirm
//! part (the paired exact test at the LORD++ alpha, the category, cost and
//! cluster rules, the floors against v1), then the decision written back
//! into the candidates' records and the hypothesis tree.

use std::collections::BTreeMap;

use emend_journal::EventLog;

use super::{Evolution, RoundInput, Screening, Trial};
use crate::progress::{Progress, Step};
use emend_core::candidate::{FullRecord, Resolution, Rule, RuleRecord, StoppedBy};
use emend_core::config::ClusterMode;
use emend_core::confirm::ConfirmState;
use emend_core::decide::{Decision, Verdict};
use emend_core::events::{CandidateRecord, ChangeKind, EvalSummary, LabeledOutcome};
use emend_core::hypothesis::Hypothesis;
use emend_core::records::{question_results, summarize};
use emend_stats;

/// No category may end more than its floor ([`emend_stats::category_floor`]:
/// epsilon, or one question of a small category) below the journal's first
/// version, on the same confirm questions.
fn start_rules(start: &EvalSummary, cand: &EvalSummary, epsilon: f64) -> Vec<RuleRecord> {
    start
        .per_category
        .iter()
        .map(|(cat, (n, c))| {
            let start_acc = if *n == 0 { 0.0 } else { *c as f64 / *n as f64 };
            let (cn, cc) = cand.per_category.get(cat).copied().unwrap_or((0, 0));
            let cand_acc = if cn == 0 { 0.0 } else { cc as f64 / cn as f64 };
            let floor = emend_stats::category_floor(*n, epsilon);
            RuleRecord {
                name: Rule::CategoryVsFirstVersion,
                category: Some(cat.clone()),
                value: cand_acc - start_acc,
                threshold: -floor,
                pass: cand_acc - start_acc >= -floor - 1e-12,
                detail: format!("{cat}: {cand_acc:.4} vs {start_acc:.4} for v1 (needs >= -{:.2} pp)", floor * 100.0),
            }
        })
        .collect()
}

/// The gate rule: the one-sided exact test on the confirm part (under
/// replay, by probe: the final checkpoint's exact test and the
/// probe-clustered test across checkpoints, the larger p deciding).
fn confirm_rule(t: &emend_stats::BetterTest) -> RuleRecord {
    let detail = match &t.probe {
        None if t.unit == emend_stats::TestUnit::Conversation => format!(
            "unit conversation: exact sign-flip p = {:.4} vs alpha {:.3e} over {} conversations ({} improved, {} \
             regressed of {} questions; lower bound {:+.4})",
            t.p_value,
            t.alpha,
            t.conversations.unwrap_or(0),
            t.improved,
            t.regressed,
            t.questions,
            t.lower_bound
        ),
        None => format!(
            "one-sided exact p = {:.4} vs alpha {:.3e} ({} improved, {} regressed of {}; lower bound {:+.4})",
            t.p_value, t.alpha, t.improved, t.regressed, t.questions, t.lower_bound
        ),
        Some(d) => format!(
            "unit probe: p = {:.4} vs alpha {:.3e}, the larger of the final checkpoint's one-sided exact p = {:.4} \
             ({} improved, {} regressed of {} probes; lower bound {:+.4}) and the CR2 p = {:.4} clustered by probe \
             across {} observations (t = {:.3} on {:.2} df; {} improved, {} regressed)",
            t.p_value,
            t.alpha,
            d.final_p,
            t.improved,
            t.regressed,
            t.questions,
            t.lower_bound,
            d.clustered_p,
            d.observations,
            d.t,
            d.df,
            d.improved,
            d.regressed
        ),
    };
    RuleRecord {
        name: Rule::ConfirmBetter,
        category: None,
        value: t.p_value,
        threshold: t.alpha,
        pass: t.better,
        detail,
    }
}

/// The cluster check as a rule (`gates.cluster_check: require`): too few
/// clusters to tell fails it.
fn cluster_rule(c: &emend_stats::ClusterCheck) -> RuleRecord {
    let (value, threshold, detail) = match c {
        emend_stats::ClusterCheck::TooFewClusters { clusters, needed } => {
            (f64::NAN, f64::NAN, format!("{clusters} conversation(s): too few to tell (needs {needed})"))
        }
        emend_stats::ClusterCheck::Tested { clusters, p_value, alpha, t, df, .. } => (
            *p_value,
            *alpha,
            format!("CR2 t = {t:.3} on {df:.2} Bell-McCaffrey df over {clusters} conversations: p = {p_value:.4}"),
        ),
    };
    RuleRecord { name: Rule::ClusterCheck, category: None, value, threshold, pass: c.better(), detail }
}

/// Mean context tokens within the operator's hard budget (`cost.max_tokens`), on the confirm part.
/// A candidate whose outcomes report no context tokens fails it: the budget cannot be checked.
fn cost_max_rule(cand: Option<f64>, max_tokens: u32) -> RuleRecord {
    let cap = f64::from(max_tokens);
    let (value, pass, detail) = match cand {
        Some(c) => (c, c <= cap + 1e-9, format!("mean context tokens {c:.1} (budget cost.max_tokens {max_tokens})")),
        None => (
            f64::NAN,
            false,
            format!("the outcomes report no context_tokens: the budget cost.max_tokens {max_tokens} cannot be checked"),
        ),
    };
    RuleRecord { name: Rule::CostMaxTokens, category: None, value, threshold: cap, pass, detail }
}

/// Mean context tokens against v1's, on the confirm part.
fn cost_v1_rule(v1: f64, cand: f64, bound: f64) -> RuleRecord {
    let growth = if v1 > 0.0 { cand / v1 - 1.0 } else { 0.0 };
    RuleRecord {
        name: Rule::CostVsFirstVersion,
        category: None,
        value: growth,
        threshold: bound,
        pass: growth <= bound + 1e-12,
        detail: format!("mean context tokens {cand:.1} vs {v1:.1} for v1 (bound +{:.0}%)", bound * 100.0),
    }
}

/// ` (selection-adjusted +5.1 pp)` beside an accepted candidate's raw delta.
fn adjusted_note(record: &CandidateRecord) -> String {
    record.full.as_ref().and_then(|f| f.adjusted_gain()).map_or(String::new(), |a| format!(" ({})", a.describe()))
}

/// `; context tokens 259 -> 1573 a question (6.07x) on the confirm part`: the cost change a record accepts.
/// A priced or cheaper claim says what it showed instead.
fn cost_note(record: &CandidateRecord) -> String {
    if let Some(claim) = record.full.as_ref().and_then(|f| f.claim_summary()) {
        return format!("; {claim} on the confirm part");
    }
    let cost = record.full.as_ref().and_then(|f| f.cost);
    cost.map_or(String::new(), |c| format!("; {} on the confirm part", emend_core::cost::describe_change(&c)))
}

/// Writes what a tested candidate was told into its record.
fn apply_verdict(record: &mut CandidateRecord, verdict: &Verdict) {
    match verdict {
        Verdict::Accepted { version } => {
            let delta = record.full.as_ref().map_or(0.0, |f| f.delta);
            record.outcome = Resolution::Accepted;
            record.rejected_by = None;
            record.accepted_version = Some(*version);
            let adjusted = adjusted_note(record);
            record.reason = match record.full.as_ref().and_then(|f| f.lord) {
                Some(l) => format!(
                    "accepted as v{version}: confirm-part delta {delta:+.4}{adjusted}, tested at alpha {:.3e} \
                     (LORD++ test {}), wealth left {:.3e} before this deployment earns{}",
                    l.alpha,
                    l.index,
                    l.wealth,
                    cost_note(record)
                ),
                None => format!("accepted as v{version}: paired delta {delta:+.4}{}", cost_note(record)),
            };
        }
        Verdict::Pending { version } => {
            let delta = record.full.as_ref().map_or(0.0, |f| f.delta);
            // It passed every gate: accepted as a candidate, served only once a person approves it.
            record.outcome = Resolution::Accepted;
            record.rejected_by = None;
            record.accepted_version = Some(*version);
            let adjusted = adjusted_note(record);
            record.reason = format!(
                "pending approval as v{version} (serve.approval: manual): confirm-part delta {delta:+.4}{adjusted}{}{}",
                record
                    .full
                    .as_ref()
                    .and_then(|f| f.lord)
                    .map_or(String::new(), |l| format!(", tested at alpha {:.3e} (LORD++ test {})", l.alpha, l.index)),
                cost_note(record)
            );
        }
        Verdict::NotBest => {
            record.rejected_by = Some(StoppedBy::NotBest);
            record.reason = "passed every rule, but another candidate of the round gained more".into();
        }
        Verdict::Failed(rules) => {
            let first = *rules.first().expect("a rejected full test names the rules it failed");
            record.rejected_by = Some(StoppedBy::FullRule(first));
            let names: Vec<&str> = rules.iter().map(|r| r.as_str()).collect();
            record.reason = format!("failed rule(s): {}", names.join(", "));
        }
    }
}

impl<L: EventLog + ?Sized> Evolution<'_, L> {
    /// The confirm test: the confirm part for the best probes only (largest probe
    /// delta, then the earliest; at most `gates.full_tests_per_round`, fixed
    /// before the probe ran), each one LORD++ test at the alpha it is given.
    pub(super) fn full_tests(
        &self,
        input: &RoundInput<'_>,
        s: &mut Screening,
        confirm: &mut ConfirmState,
        progress: &mut dyn FnMut(Progress),
    ) {
        let cfg = &self.project.config;
        let parts = input.parts;
        s.passed.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let limit = cfg.gates.full_tests_per_round.max(1);
        for (rank, &(i, delta)) in s.passed.iter().enumerate() {
            let t = &mut s.trials[i];
            if rank >= limit {
                t.record.rejected_by = Some(StoppedBy::NotSelected);
                t.record.reason = format!(
                    "the probe passed ({delta:+.3}) but {limit} other candidate(s) of the round probed better; \
                     only the best {limit} reach the confirm test (gates.full_tests_per_round)"
                );
                t.artifact = None;
                continue;
            }
            let candidate = t.artifact.as_ref().expect("probe-passed trials keep their artifact");
            match self.backend.evaluate(candidate, Some(&parts.confirm_ids)) {
                Ok(eval) if eval.outcomes.iter().all(|o| o.error.is_none()) && eval.n() == parts.confirm_ids.len() => {
                    t.full = Some(question_results(&eval));
                    progress(Progress::Candidate {
                        round: input.round,
                        id: t.record.id.clone(),
                        hypothesis: t.record.hypothesis.clone(),
                        change: t.record.change.clone(),
                        more: t.record.more_changes.len(),
                        step: Step::FullEvaluated,
                    });
                }
                Ok(eval) => t.error(format!(
                    "confirm evaluation incomplete: {} of {} questions answered",
                    eval.outcomes.iter().filter(|o| o.error.is_none()).count(),
                    parts.confirm_ids.len()
                )),
                Err(e) => t.error(format!("confirm evaluation failed: {e}")),
            }
        }
        let base_results = parts.confirm_of(&input.observed.results);
        let base: Vec<emend_stats::Outcome> = base_results.iter().map(emend_stats::Outcome::from).collect();
        let base_summary = summarize(&base_results);
        let mut first_alpha = None;
        for t in s.trials.iter_mut().filter(|t| t.full.is_some()) {
            let alpha = confirm.lord.next_alpha();
            first_alpha.get_or_insert(alpha);
            self.compare(input, &base, &base_summary, t, confirm);
        }
        s.alpha = first_alpha.unwrap_or(0.0);
    }

    /// The confirm test of a candidate against the served strategy on the
    /// confirm part, paired by question id: the one-sided exact test at the
    /// next LORD++ alpha (the LORD++ state advances whatever the verdict), the
    /// category and cost rules, the floors against v1, and the cluster check
    /// (a rule only with `gates.cluster_check: require`).
    pub(super) fn compare(
        &self,
        input: &RoundInput<'_>,
        base: &[emend_stats::Outcome],
        base_summary: &EvalSummary,
        t: &mut Trial,
        confirm: &mut ConfirmState,
    ) {
        let gates = &self.project.config.gates;
        let full = t.full.as_ref().expect("fully evaluated");
        let cand: Vec<emend_stats::Outcome> = full.iter().map(emend_stats::Outcome::from).collect();
        let alpha = confirm.lord.next_alpha();
        let config = emend_stats::CompareConfig {
            thresholds: emend_stats::Thresholds {
                alpha,
                category_drop_max: gates.category_drop_max,
                cost_bound: gates.cost_bound,
            },
            bootstrap: emend_stats::BootstrapConfig {
                unit: if self.project.config.harness.protocol().is_endpoint() {
                    emend_stats::BootstrapUnit::Question
                } else {
                    emend_stats::BootstrapUnit::Trajectory
                },
                resamples: gates.bootstrap_resamples as u32,
                seed: self.project.config.loop_.seed.wrapping_add(input.round),
                // Two-sided at 1 - 2 alpha: its lower end is the one-sided 1 - alpha bound.
                level: (1.0 - 2.0 * alpha).clamp(0.5, 0.999_999),
            },
        };
        let cand_summary = summarize(full);
        let cost = match (base_summary.mean_context_tokens, cand_summary.mean_context_tokens) {
            (Some(b), Some(c)) => Some(emend_stats::Cost { baseline_mean_tokens: b, candidate_mean_tokens: c }),
            _ => None,
        };
        let mut cmp = match emend_stats::compare(base, &cand, &config, cost.as_ref()) {
            Ok(cmp) => cmp,
            Err(e) => return t.error(format!("paired comparison failed: {e}")),
        };
        // Under replay the unit is the probe: its observations are not independent pairs.
        let by_probe = !self.project.config.harness.protocol().is_endpoint();
        if by_probe {
            cmp.mcnemar = emend_stats::mcnemar_by_probe(&cmp.paired);
        }
        let conv: BTreeMap<&str, &str> =
            full.iter().map(|q| (q.id.as_str(), q.conversation.as_deref().unwrap_or(""))).collect();
        let was: BTreeMap<&str, bool> = base.iter().map(|o| (o.id.as_str(), o.correct)).collect();
        let diffs: Vec<(&str, i8)> = full
            .iter()
            .map(|q| {
                let w = was.get(q.id.as_str()).copied().unwrap_or(false);
                (conv[q.id.as_str()], i8::from(q.correct) - i8::from(w))
            })
            .collect();
        // Split by conversation, the test over conversations decides: its
        // guarantee covers new conversations, the question-level one's does not.
        let by_conversation = input.parts.design.unit == emend_stats::SplitUnit::Conversation && !by_probe;
        let test = if by_conversation {
            emend_stats::better_test_by_conversation(&cmp.paired, diffs.iter().copied(), alpha)
        } else {
            emend_stats::gate_test(&cmp.paired, alpha, by_probe)
        };
        let base_results = input.parts.confirm_of(&input.observed.results);
        let claim = self.claim(t.record.change_kind, &test, &base_results, full, by_conversation);
        let lord = confirm.lord.test(claim.p_value.unwrap_or(test.p_value));
        let cluster = emend_stats::cluster_check(diffs, alpha);
        let mut extra = claim.rules.clone();
        if gates.cluster_check == ClusterMode::Require {
            extra.push(cluster_rule(&cluster));
        }
        extra.extend(start_rules(input.start, &cand_summary, gates.category_drop_max));
        if let (Some(bound), Some(v1), Some(c)) =
            (gates.cost_bound_v1, input.start.mean_context_tokens, cand_summary.mean_context_tokens)
        {
            extra.push(cost_v1_rule(v1, c, bound));
        }
        match self.max_tokens() {
            Ok(Some(cap)) => extra.push(cost_max_rule(cand_summary.mean_context_tokens, cap)),
            Ok(None) => {}
            Err(e) => return t.error(format!("reading the token budget: {e}")),
        }
        t.record.delta = Some(cmp.paired.delta());
        t.record.alpha = Some(alpha);
        let mut record = FullRecord::confirm(&cmp, &extra, test, lord, cluster);
        record.cost = cost;
        if claim.p_value.is_some() {
            // A priced or cheaper claim may regress more questions than it improves: its own test decides.
            record.rules.retain(|r| r.name != Rule::Stats(emend_stats::RuleKind::MoreImprovedThanRegressed));
            record.accept = record.rules.iter().all(|r| r.pass);
        }
        record.utility = claim.utility;
        record.noninferior = claim.noninferior;
        t.record.full = Some(record);
    }

    /// The rules that decide what a candidate claims on the confirm part: a
    /// gain in accuracy (the exact test, `confirm_better`), a gain in
    /// utility under a price (`confirm_utility`), or for a `cheaper`
    /// candidate non-inferiority at the margin and the token saving
    /// (`confirm_noninferior`, `cost_saving`).
    fn claim(
        &self,
        kind: ChangeKind,
        test: &emend_stats::BetterTest,
        base: &[LabeledOutcome],
        cand: &[LabeledOutcome],
        by_conversation: bool,
    ) -> Claim {
        let cost = &self.project.config.cost;
        let alpha = test.alpha;
        match (kind, cost.noninferiority_margin, cost.per_1k_tokens.filter(|_| cost.price_per_token().is_some())) {
            (ChangeKind::Cheaper, Some(margin), _) => {
                let ni = emend_stats::noninferiority_test(test.improved, test.regressed, test.questions, margin, alpha);
                let saving = saving_rule(base, cand, cost.min_saving);
                Claim {
                    rules: vec![noninferior_rule(&ni, by_conversation), saving],
                    p_value: Some(ni.p_value),
                    utility: None,
                    noninferior: Some(ni),
                }
            }
            (ChangeKind::Cheaper, None, _) => Claim {
                rules: vec![RuleRecord {
                    name: Rule::ConfirmNonInferior,
                    category: None,
                    value: f64::NAN,
                    threshold: f64::NAN,
                    pass: false,
                    detail: "a cheaper candidate needs cost.noninferiority_margin, which is not set".into(),
                }],
                p_value: Some(1.0),
                utility: None,
                noninferior: None,
            },
            (ChangeKind::Better, _, Some(per_1k)) => {
                let by_id: BTreeMap<&str, &LabeledOutcome> = base.iter().map(|q| (q.id.as_str(), q)).collect();
                let pairs: Option<Vec<emend_stats::UtilityPair<'_>>> = cand
                    .iter()
                    .map(|c| {
                        let b = by_id.get(c.id.as_str())?;
                        Some(emend_stats::UtilityPair {
                            conversation: c.conversation.as_deref().unwrap_or(""),
                            base_correct: b.correct,
                            cand_correct: c.correct,
                            base_tokens: b.tokens?,
                            cand_tokens: c.tokens?,
                        })
                    })
                    .collect();
                match pairs {
                    Some(pairs) if by_conversation => {
                        let u = emend_stats::utility_test(&pairs, per_1k, alpha, true);
                        Claim {
                            rules: vec![utility_rule(&u, None)],
                            p_value: Some(u.p_value),
                            utility: Some(u),
                            noninferior: None,
                        }
                    }
                    Some(pairs) => {
                        // By question: the exact test of the accuracy difference against what the
                        // token difference is worth (docs/price.md: the sign-flip test is liberal here).
                        let u = emend_stats::utility_test(&pairs, per_1k, alpha, false);
                        let worth = (per_1k / 100.0 * (u.base_tokens - u.cand_tokens) / 1000.0).clamp(-0.99, 0.99);
                        let exact =
                            emend_stats::noninferiority_test(u.improved, u.regressed, u.questions, worth, alpha);
                        Claim {
                            rules: vec![utility_rule(&u, Some(&exact))],
                            p_value: Some(exact.p_value),
                            utility: Some(u),
                            noninferior: Some(exact),
                        }
                    }
                    None => Claim {
                        rules: vec![RuleRecord {
                            name: Rule::ConfirmUtility,
                            category: None,
                            value: f64::NAN,
                            threshold: alpha,
                            pass: false,
                            detail: format!(
                                "the outcomes report no context_tokens for every confirm question: the price \
                                 cost.per_1k_tokens {per_1k} cannot be charged"
                            ),
                        }],
                        p_value: Some(1.0),
                        utility: None,
                        noninferior: None,
                    },
                }
            }
            (ChangeKind::Better, _, None) => {
                Claim { rules: vec![confirm_rule(test)], p_value: None, utility: None, noninferior: None }
            }
        }
    }
}

/// What decides a candidate's claim ([`Evolution::claim`]): its rules, and
/// the p-value its LORD++ test takes (None: the accuracy test's).
struct Claim {
    rules: Vec<RuleRecord>,
    p_value: Option<f64>,
    utility: Option<emend_stats::UtilityTest>,
    noninferior: Option<emend_stats::NonInferiorTest>,
}

/// The utility test as a rule: by question, the exact test of the accuracy
/// difference against the worth of the token difference (`exact`); by
/// conversation, the sign-flip test of the utility difference.
fn utility_rule(u: &emend_stats::UtilityTest, exact: Option<&emend_stats::NonInferiorTest>) -> RuleRecord {
    let (unit, p_value, pass) = match (exact, u.conversations) {
        (Some(t), _) => (
            format!(
                "exact test of accuracy {:+.2} pp against {:+.2} pp, the worth of the token difference, over {} \
                 questions",
                t.delta * 100.0,
                -t.margin * 100.0,
                t.n
            ),
            t.p_value,
            t.noninferior,
        ),
        (None, Some(g)) => (format!("sign-flip over {g} conversations"), u.p_value, u.better),
        (None, None) => (format!("sign-flip over {} questions", u.questions), u.p_value, u.better),
    };
    RuleRecord {
        name: Rule::ConfirmUtility,
        category: None,
        value: p_value,
        threshold: u.alpha,
        pass,
        detail: format!(
            "utility {:+.4} (accuracy {:+.2} pp, context tokens {:.0} -> {:.0} at {} pp per 1,000): {unit}, p = {:.4} \
             vs alpha {:.3e}",
            u.delta,
            u.accuracy_delta * 100.0,
            u.base_tokens,
            u.cand_tokens,
            u.per_1k_tokens,
            p_value,
            u.alpha
        ),
    }
}

/// The non-inferiority test as a rule.
fn noninferior_rule(t: &emend_stats::NonInferiorTest, by_conversation: bool) -> RuleRecord {
    let scope = if by_conversation { " (by question: covers new questions of these conversations only)" } else { "" };
    RuleRecord {
        name: Rule::ConfirmNonInferior,
        category: None,
        value: t.p_value,
        threshold: t.alpha,
        pass: t.noninferior,
        detail: format!(
            "accuracy {:+.2} pp, non-inferior at {:.1} pp: exact p = {:.4} vs alpha {:.3e} ({} improved, {} \
             regressed of {}){scope}",
            t.delta * 100.0,
            t.margin * 100.0,
            t.p_value,
            t.alpha,
            t.improved,
            t.regressed,
            t.n
        ),
    }
}

/// A cheaper candidate's saving of mean context tokens on the confirm part, at least `min_saving`.
/// Outcomes without context tokens fail it: the saving cannot be shown.
fn saving_rule(base: &[LabeledOutcome], cand: &[LabeledOutcome], min_saving: f64) -> RuleRecord {
    let mean = |r: &[LabeledOutcome]| -> Option<f64> {
        let t: Option<Vec<f64>> = r.iter().map(|q| q.tokens).collect();
        t.filter(|t| !t.is_empty()).map(|t| t.iter().sum::<f64>() / t.len() as f64)
    };
    let (value, pass, detail) = match (mean(base), mean(cand)) {
        (Some(b), Some(c)) if b > 0.0 => {
            let saving = 1.0 - c / b;
            (
                saving,
                saving >= min_saving - 1e-12,
                format!(
                    "context tokens {b:.0} -> {c:.0} a question ({:+.0}%; needs at least -{:.0}%)",
                    -saving * 100.0,
                    min_saving * 100.0
                ),
            )
        }
        _ => (f64::NAN, false, "the outcomes report no context_tokens: the saving cannot be shown".to_string()),
    };
    RuleRecord { name: Rule::CostSaving, category: None, value, threshold: min_saving, pass, detail }
}

/// Writes the decision into the candidates' records and teaches the tree:
/// every probed candidate's hypothesis learns its search-part delta (the
/// probe's, whatever the confirm test said: of the confirm part only each
/// test's verdict reaches the search), and an acceptance reopens every other
/// direction. Returns the round's counts by stage.
pub(super) fn learn(
    trials: &mut [Trial],
    decision: &Decision,
    tree: &mut BTreeMap<String, Hypothesis>,
) -> BTreeMap<String, u64> {
    for (i, verdict) in &decision.verdicts {
        apply_verdict(&mut trials[*i].record, verdict);
    }
    let mut rejected_by: BTreeMap<String, u64> = BTreeMap::new();
    for t in trials.iter_mut() {
        if let Some(r) = &t.record.rejected_by {
            *rejected_by.entry(r.to_string()).or_default() += 1;
        }
        if !t.record.credits.is_empty() {
            // A strayed proposal's node is the direction asked: its gate
            // stops are kept, its measurement goes to the fields changed.
            if t.record.asked.is_some() {
                tree.insert(t.node.key.clone(), t.node.clone());
            }
            credit(&t.record, tree);
            continue;
        }
        if let Some(delta) = t.record.search_delta() {
            t.node.record(delta, t.record.outcome == Resolution::Accepted);
        }
        tree.insert(t.node.key.clone(), t.node.clone());
    }
    if let Some(w) = decision.winner {
        let accepted = &trials[w.trial];
        let keys: Vec<&str> = if accepted.record.credits.is_empty() {
            vec![accepted.node.key.as_str()]
        } else {
            accepted.record.credits.iter().map(|c| c.key.as_str()).collect()
        };
        for (k, node) in tree.iter_mut() {
            if !keys.contains(&k.as_str()) {
                node.reopen();
            }
        }
    }
    rejected_by
}

/// Credits each field a candidate changes to its own node (`path::direction`)
/// with that field's measured search-part contribution (for a candidate that
/// changes one field, its probe delta is that contribution); a field whose
/// contribution was not measured is credited nothing, and no node is
/// credited for a field the candidate does not change.
fn credit(record: &CandidateRecord, tree: &mut BTreeMap<String, Hypothesis>) {
    let accepted = record.outcome == Resolution::Accepted;
    for (c, delta) in record.credit_deltas() {
        let Some(delta) = delta else { continue };
        let mut node = c.node(tree);
        node.record(delta, accepted);
        tree.insert(node.key.clone(), node);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rejected_confirm_test_teaches_the_tree_its_probe_delta_only() {
        // Probed at +0.06 on the search part, then rejected by the confirm test at -0.20.
        let mut rejected = crate::evolve::tests::trial(Some("b"), None);
        rejected.record.probe = Some(emend_core::gates::probe_verdict(30, 33, 50, 0.02));
        rejected.record.full = Some(emend_core::candidate::sample_full(-0.2, false, &[Rule::ConfirmBetter]));
        rejected.record.delta = Some(-0.2);
        let decision = Decision {
            winner: None,
            pending: false,
            held_by_quarantine: None,
            verdicts: vec![(0, emend_core::decide::Verdict::Failed(vec![Rule::ConfirmBetter]))],
            best: emend_core::decide::BestAfter { version: 1, accuracy: 0.5, moved: false },
            restore: None,
            pinned: false,
            supersedes: vec![],
        };
        let mut tree = BTreeMap::new();
        learn(&mut [rejected], &decision, &mut tree);
        let node = &tree["retrieve.top_k::increase"];
        assert_eq!(node.visits, 1);
        assert!((node.best_delta.unwrap() - 0.06).abs() < 1e-12, "{node:?}");
        assert!(node.total_reward > 0.0, "{node:?}");
    }

    #[test]
    fn the_confirm_rule_is_the_exact_test_at_its_alpha() {
        let pass = confirm_rule(&emend_stats::better_test(9, 0, 170, 0.0152));
        assert!(pass.pass && pass.name == Rule::ConfirmBetter && pass.value < 0.0152);
        // 7 improved, 0 regressed: p = 1/128 = 0.0078 passes at 0.0152 but not at 0.005.
        assert!(confirm_rule(&emend_stats::better_test(7, 0, 170, 0.0152)).pass);
        assert!(!confirm_rule(&emend_stats::better_test(7, 0, 170, 0.005)).pass);
        assert!(!confirm_rule(&emend_stats::better_test(5, 5, 170, 0.2)).pass);
    }

    #[test]
    fn too_few_clusters_fail_a_required_cluster_check() {
        let diffs: Vec<(&str, i8)> = (0..60).map(|i| (["a", "b", "c"][i % 3], 1)).collect();
        let r = cluster_rule(&emend_stats::cluster_check(diffs, 0.05));
        assert!(!r.pass && r.detail.contains("too few"), "{r:?}");
    }

    #[test]
    fn the_token_budget_is_a_ceiling() {
        assert!(cost_max_rule(Some(600.0), 600).pass);
        assert!(!cost_max_rule(Some(600.5), 600).pass);
        assert!(!cost_max_rule(None, 600).pass, "an unreported cost cannot pass a budget");
    }

    fn results(tokens: &[Option<f64>]) -> Vec<LabeledOutcome> {
        tokens
            .iter()
            .enumerate()
            .map(|(i, t)| LabeledOutcome {
                id: format!("q{i}"),
                category: "c".into(),
                conversation: None,
                correct: true,
                label: None,
                tokens: *t,
                split: None,
            })
            .collect()
    }

    #[test]
    fn a_cheaper_candidate_must_save_at_least_min_saving() {
        let base = results(&[Some(1000.0), Some(1000.0)]);
        assert!(saving_rule(&base, &results(&[Some(800.0), Some(800.0)]), 0.2).pass);
        let short = saving_rule(&base, &results(&[Some(810.0), Some(800.0)]), 0.2);
        assert!(!short.pass && short.detail.contains("-20%"), "{short:?}");
        assert!(!saving_rule(&base, &results(&[Some(500.0), None]), 0.2).pass, "an unreported saving cannot pass");
    }

    #[test]
    fn the_priced_rule_decides_by_the_exact_test_against_the_saving_worth() {
        let pairs: Vec<emend_stats::UtilityPair<'_>> = (0..300)
            .map(|i| emend_stats::UtilityPair {
                conversation: "a",
                base_correct: i % 10 != 0,
                cand_correct: i % 10 != 0 || i % 20 == 0,
                base_tokens: 1500.0,
                cand_tokens: 1000.0,
            })
            .collect();
        let u = emend_stats::utility_test(&pairs, 2.0, 0.05, false);
        // 500 tokens saved at 2 points per 1,000: the accuracy may be 1 point lower.
        let exact = emend_stats::noninferiority_test(u.improved, u.regressed, u.questions, 0.01, 0.05);
        let r = utility_rule(&u, Some(&exact));
        assert_eq!((r.pass, r.value), (exact.noninferior, exact.p_value));
        assert!(r.detail.contains("against -1.00 pp, the worth of the token difference"), "{}", r.detail);
        let by_conversation = noninferior_rule(&exact, true);
        assert!(by_conversation.detail.contains("covers new questions of these conversations only"));
    }

    #[test]
    fn the_cost_bound_against_v1_is_relative_growth() {
        assert!(cost_v1_rule(100.0, 150.0, 0.5).pass);
        assert!(!cost_v1_rule(100.0, 151.0, 0.5).pass);
        assert!(cost_v1_rule(100.0, 80.0, 0.0).pass);
    }
}
