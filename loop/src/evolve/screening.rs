//! Screening, the first part of a round: ask the proposers along each planned direction and
//! screen what they propose (gates, critic, probe, critic model) until the
//! round has its candidates; a screening stop teaches the direction.

use std::collections::{BTreeMap, BTreeSet};

use emend_journal::EventLog;

mod stages;

use super::{Evolution, History, Past, RoundInput, Screening, Trial};
use crate::progress::{Progress, Step};
use crate::propose::{Ask, Proposed, Proposer};
use emend_core::artifact::Artifact;
use emend_core::candidate::{Resolution, StoppedBy};
use emend_core::critic::{self, CriticLabel};
use emend_core::events::{CandidateRecord, Event, LabeledOutcome};
use emend_core::gates::{self, Gate};
use emend_core::hypothesis::Hypothesis;
use emend_core::layer_a::Diagnosis;
use emend_core::planner::{self, Plan, PlannerSettings};
use stages::{Screen, Screened, Stage, Stop};

/// The escalation a blocked hypothesis raises (None until it is blocked often enough).
fn escalate(node: &mut Hypothesis, round: u64, reason: String) -> Option<Event> {
    node.block().then(|| Event::Escalated { class: node.key.clone(), round, reasons: vec![reason] })
}

/// The progress step of a screening stop.
fn stop_step(stop: &Stop, record: &CandidateRecord) -> Step {
    match (stop.stage, stop.by) {
        (Stage::Gates, StoppedBy::Gate(g)) => Step::Gate(g),
        (Stage::Critic, StoppedBy::Critic(l)) => Step::Critic(l),
        (Stage::CriticModel, StoppedBy::Critic(l)) => Step::CriticModel(l),
        (Stage::Probe, StoppedBy::Probe) => Step::Probe { delta: record.delta.unwrap_or(0.0) },
        _ => Step::Errored { reason: stop.reason.clone() },
    }
}

impl<L: EventLog + ?Sized> Evolution<'_, L> {
    /// The round's directions: a person's proposal's own, else the planner's
    /// ranking, the round's digest weighing the diagnosis (logged at debug
    /// level with their actionability).
    fn plans(&self, input: &RoundInput<'_>, diagnosis: &Diagnosis, past: &Past, history: &History) -> Vec<Plan> {
        if let Some(plans) = self.proposal_plans(input, diagnosis) {
            return plans;
        }
        let exploration = self.project.config.loop_.exploration;
        let settings = PlannerSettings { exploration, ..PlannerSettings::default() };
        let plans = planner::plan(self.schema, diagnosis, Some(&past.digest), &history.tree, &past.effects, settings);
        let ranked: Vec<String> = plans.iter().map(|p| format!("{} a={:.3}", p.key, p.actionability)).collect();
        tracing::debug!(round = input.round, version = input.observed.version, ?ranked, "planned");
        plans
    }

    /// Screening: asks the proposers along each planned direction and screens
    /// what they propose, until the round has its candidates.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn screen_round(
        &self,
        input: &RoundInput<'_>,
        search_results: &[LabeledOutcome],
        diagnosis: &Diagnosis,
        past: &Past,
        history: &mut History,
        proposers: &mut [Box<dyn Proposer>],
        budget_left: Option<f64>,
        progress: &mut dyn FnMut(Progress),
    ) -> Screening {
        let cfg = &self.project.config;
        let (round, observed) = (input.round, input.observed);
        let plans = self.plans(input, diagnosis, past, history);
        let roles = self.backend.roles();
        let harness = harness_facts(&cfg.harness);
        let (probe_ids, served_on_probe) = self.probe_sample(input, search_results);
        let probe_cost = input.parts.cost(probe_ids.len());
        let mut out = Screening { probe_size: probe_ids.len(), ..Screening::default() };
        for p in proposers.iter_mut() {
            p.start_round();
        }
        let screen = Screen {
            round,
            schema: self.schema,
            backend: self.backend,
            served: &observed.artifact,
            served_results: search_results,
            diagnosis,
            replay: input.replay,
            effects: &past.effects,
            rejected_moves: &past.rejected_moves,
            probe_drop_max: cfg.gates.probe_drop_max,
            probe_ids: &probe_ids,
            served_on_probe,
            bounded: cfg.search_method() == emend_core::config::SearchMethod::Steps,
            cost: &cfg.cost,
        };
        let mut slots = Slots::default();
        for plan in &plans {
            if slots.produced >= input.opts.candidates {
                break;
            }
            let confirm_cost = input.parts.cost(input.parts.confirm_ids.len());
            if !out.trials.is_empty()
                && !affords_probe(budget_left, out.probes - out.free_probes, probe_cost, confirm_cost)
            {
                break;
            }
            let proposed = {
                let node =
                    history.tree.get(&plan.key).cloned().unwrap_or_else(|| Hypothesis::new(&plan.path, plan.direction));
                let ask = Ask {
                    round,
                    schema: self.schema,
                    served: &observed.artifact,
                    results: search_results,
                    diagnosis,
                    tree: &history.tree,
                    effects: &past.effects,
                    seen: &history.seen,
                    rejected_moves: &past.rejected_moves,
                    roles: &roles,
                    backend: self.backend,
                    plans: &plans,
                    total_questions: input.parts.n,
                    next_alpha: past.next_alpha,
                    parent: past.parent.as_ref(),
                    // What is left once the probes so far and one confirm test are paid.
                    budget_left: budget_left.map(|b| {
                        b - (out.probes - out.free_probes) as f64 * probe_cost
                            - input.parts.cost(input.parts.confirm_ids.len())
                    }),
                    harness: &harness,
                };
                let Some(proposed) = proposers.iter_mut().find_map(|p| p.ask(&ask, plan, &node)) else {
                    continue;
                };
                proposed
            };
            // A searched candidate is the round's one candidate.
            let searched = matches!(proposed, Proposed::Candidate { known: Some(_), .. });
            match slots.admit(&proposed, input.opts.candidates) {
                Admit::Screen => {}
                Admit::Skip => continue,
                Admit::Stop => break,
            }
            let produces = self.trial(plan, proposed, &screen, history, &mut out, progress);
            slots.produced += usize::from(produces);
            if searched {
                break;
            }
        }
        out
    }

    /// The round's probe sample (rung 0, seeded by the round; it reads the
    /// search part only) and how many of it the served strategy answers.
    fn probe_sample(&self, input: &RoundInput<'_>, search_results: &[LabeledOutcome]) -> (Vec<String>, usize) {
        let cfg = &self.project.config;
        let search_questions: Vec<(String, String)> =
            self.backend.questions().into_iter().filter(|(id, _)| input.parts.search.contains(id)).collect();
        let probe_ids = gates::probe_sample(
            &search_questions,
            cfg.gates.probe_size,
            cfg.loop_.seed ^ input.round.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        let served_on_probe = {
            let probe: BTreeSet<&str> = probe_ids.iter().map(String::as_str).collect();
            search_results.iter().filter(|q| probe.contains(q.id.as_str()) && q.correct).count()
        };
        (probe_ids, served_on_probe)
    }

    /// Screens one proposal and records it in `out`; true when it spends a candidate slot.
    fn trial(
        &self,
        plan: &Plan,
        proposed: Proposed,
        screen: &Screen<'_>,
        history: &mut History,
        out: &mut Screening,
        progress: &mut dyn FnMut(Progress),
    ) -> bool {
        let round = screen.round;
        let mut node =
            history.tree.get(&plan.key).cloned().unwrap_or_else(|| Hypothesis::new(&plan.path, plan.direction));
        let id = format!("r{round}c{}", out.trials.len() + 1);
        let mut say = |id: &str, change: Option<(&planner::Change, usize)>, step: Step| {
            progress(Progress::Candidate {
                round,
                id: id.to_string(),
                hypothesis: plan.key.clone(),
                change: change.map(|c| c.0.clone()),
                more: change.map_or(0, |c| c.1),
                step,
            })
        };
        let base = base_record(&id, round, plan, screen.served);
        let (value, mut changes, data, known, (credits, asked, hypothesis), kind) = match proposed {
            Proposed::Failed { reason } => {
                say(&id, None, Step::Errored { reason: reason.clone() });
                let reason = format!("the evolver failed: {reason}");
                out.trials.push(Trial::stopped(base, node, Resolution::Errored, StoppedBy::Errored, reason));
                return false;
            }
            Proposed::Blocked { reason } => {
                let verdict = critic::critic_blocked(&plan.path, &reason);
                out.escalations.extend(escalate(&mut node, round, verdict.reason.clone()));
                say(&id, None, Step::Blocked { reason });
                let record = CandidateRecord { critic: Some(verdict.clone()), ..base };
                history.tree.insert(node.key.clone(), node.clone());
                let by = StoppedBy::Critic(CriticLabel::OutOfScope);
                out.trials.push(Trial::stopped(record, node, Resolution::Blocked, by, verdict.reason));
                return false;
            }
            Proposed::Exhausted { reason } => {
                node.exhaust();
                say(&format!("r{round}"), None, Step::Exhausted { reason });
                history.tree.insert(node.key.clone(), node);
                return false;
            }
            Proposed::Candidate { value, changes, data, known, credits, kind } => {
                let credited = Credited::of(plan, node, &changes, credits, &history.tree);
                node = credited.node;
                (value, changes, data, known, (credited.credits, credited.asked, credited.hypothesis), kind)
            }
        };
        let change = changes.remove(0);
        let more = changes.len();
        let hash = emend_core::artifact::content_hash(&value);
        let mut record = CandidateRecord {
            hash: Some(hash.clone()),
            change: Some(change.clone()),
            document: Some(value.clone()),
            more_changes: changes,
            credits,
            hypothesis,
            asked,
            change_kind: kind,
            ..base
        };
        let candidate = stages::Candidate {
            id: &id,
            value: &value,
            hash: &hash,
            change: &change,
            motivation: &plan.motivation,
            hypothesis: history.tree.get(&node.key),
            data: data.as_ref(),
            known: known.as_deref(),
        };
        let searched = known.is_some();
        let screened = stages::screen(screen, &candidate, &mut record, &mut history.seen);
        let stop = match screened {
            Screened::Passed { candidate, probe_delta } => {
                say(&id, Some((&change, more)), Step::Passed { probe_delta });
                out.passed.push((out.trials.len(), probe_delta));
                out.trials.push(Trial { record, artifact: Some(*candidate), full: None, known, node });
                out.probes += 1;
                out.free_probes += u64::from(searched);
                return true;
            }
            Screened::Stopped(stop) => stop,
        };
        if matches!(stop.stage, Stage::Probe | Stage::CriticModel) {
            out.probes += 1;
            out.free_probes += u64::from(searched);
        }
        say(&id, Some((&change, more)), stop_step(&stop, &record));
        after_stop(&stop, &mut node, data.is_some(), round, history, out);
        let produces = stop.by != StoppedBy::Gate(Gate::Novelty);
        out.trials.push(Trial::stopped(record, node, stop.outcome, stop.by, stop.reason));
        produces
    }
}

/// Whom a proposed candidate is credited to: its credits (one per field a
/// searched candidate keeps, or [`diff_credits`]), the node its gate stops
/// count against, the direction asked when the proposal strayed from it, and
/// the key journaled as its hypothesis.
struct Credited {
    node: Hypothesis,
    credits: Vec<emend_core::events::Credit>,
    asked: Option<String>,
    hypothesis: String,
}

impl Credited {
    /// A searched candidate's node is its largest contributor's, never a
    /// direction it did not take; one that changes the planned field keeps
    /// the planned node. A proposal that does not change the planned field
    /// (an evolver asked to rewrite one field that edits another) is
    /// credited to the fields it changes, and keeps the planned node for its
    /// gate stops (escalation, the next attempt).
    fn of(
        plan: &Plan,
        planned: Hypothesis,
        changes: &[planner::Change],
        credits: Vec<emend_core::events::Credit>,
        tree: &BTreeMap<String, Hypothesis>,
    ) -> Credited {
        let strayed = credits.is_empty() && !changes.iter().any(|c| c.path == plan.path);
        let credits = if credits.is_empty() { diff_credits(plan, changes) } else { credits };
        let asked = strayed.then(|| plan.key.clone());
        let node = if strayed { planned } else { credits.first().map_or(planned, |top| top.node(tree)) };
        let hypothesis = credits.first().map_or_else(|| plan.key.clone(), |top| top.key.clone());
        Credited { node, credits, asked, hypothesis }
    }
}

/// The credits of a candidate proposed without any: none when it changes
/// exactly the planned field (its node is the planned one), else one per
/// field it changes, on that field's own node and unmeasured, so that no
/// node is credited for a field the candidate does not change.
fn diff_credits(plan: &Plan, changes: &[planner::Change]) -> Vec<emend_core::events::Credit> {
    if let [only] = changes
        && only.path == plan.path
    {
        return Vec::new();
    }
    changes
        .iter()
        .map(|c| emend_core::events::Credit {
            key: emend_core::hypothesis::key(&c.path, emend_core::schema::Direction::of_move(&c.from, &c.to)),
            path: c.path.clone(),
            from: c.from.clone(),
            to: c.to.clone(),
            delta: None,
            questions: 0,
            discordant: None,
            earlier: false,
        })
        .collect()
}

/// The harness settings `x-inert-when` conditions may name (`harness.judge`):
/// the built-in harness's judge; an external harness judges by itself.
pub fn harness_facts(h: &emend_core::config::HarnessConfig) -> serde_json::Value {
    match h.kind {
        emend_core::config::HarnessKind::Builtin => serde_json::json!({"judge": h.judge}),
        emend_core::config::HarnessKind::Command => serde_json::json!({"kind": "command"}),
    }
}

/// Whether the next probe and one confirm test fit in what is left of
/// `--max-evals` (`paid` probes so far); always, without a budget.
fn affords_probe(budget_left: Option<f64>, paid: u64, probe_cost: f64, confirm_cost: f64) -> bool {
    !budget_left.is_some_and(|b| (paid + 1) as f64 * probe_cost + confirm_cost > b + 1e-9)
}

/// The round's candidate slots: the candidates screened, the blocked
/// directions reported and the candidates proposed.
#[derive(Debug, Default)]
struct Slots {
    produced: usize,
    blocked: usize,
    attempts: usize,
}

/// What to do with a proposal.
#[derive(Debug, PartialEq)]
enum Admit {
    Screen,
    /// A blocked direction beyond the round's share of them.
    Skip,
    /// Proposals keep failing to produce a candidate: the round ends.
    Stop,
}

impl Slots {
    /// At most `candidates` blocked directions are reported, and at most
    /// `3 * candidates` candidates proposed.
    fn admit(&mut self, proposed: &Proposed, candidates: usize) -> Admit {
        if matches!(proposed, Proposed::Blocked { .. }) {
            if self.blocked >= candidates {
                return Admit::Skip;
            }
            self.blocked += 1;
        }
        if matches!(proposed, Proposed::Candidate { .. }) {
            self.attempts += 1;
            if self.attempts > 3 * candidates {
                return Admit::Stop;
            }
        }
        Admit::Screen
    }
}

impl Screening {
    /// Whether the round proposed anything: a candidate with a document that
    /// is not one evaluated before, or one that errored (a failed proposal or
    /// evaluation is journaled, never dropped). A round that did not journals
    /// nothing.
    pub(super) fn proposed(&self) -> bool {
        self.trials.iter().any(|t| {
            (t.record.hash.is_some() && t.record.rejected_by != Some(StoppedBy::Gate(Gate::Novelty)))
                || t.record.outcome == Resolution::Errored
        })
    }
}

/// What a screening stop means for the direction: a novelty stop exhausts
/// it; a model's proposal stopped by a gate, and an out-of-scope verdict of
/// either critic, count toward escalating it.
fn after_stop(
    stop: &Stop,
    node: &mut Hypothesis,
    by_model: bool,
    round: u64,
    history: &mut History,
    out: &mut Screening,
) {
    match stop.by {
        // Nothing new in this direction from the served strategy: do not
        // spend a candidate slot on it, and do not propose it again.
        StoppedBy::Gate(Gate::Novelty) => {
            node.exhaust();
            history.tree.insert(node.key.clone(), node.clone());
        }
        // A model's proposal stopped by a gate counts toward escalation.
        StoppedBy::Gate(g) if by_model => {
            let reason = format!("the evolver's proposal failed gate {}: {}", g.as_str(), stop.reason);
            out.escalations.extend(escalate(node, round, reason));
        }
        // An out-of-scope verdict of either critic counts toward escalation.
        StoppedBy::Critic(label) => {
            if label == CriticLabel::OutOfScope {
                out.escalations.extend(escalate(node, round, stop.reason.clone()));
            }
            if stop.stage == Stage::Critic {
                history.tree.insert(node.key.clone(), node.clone());
            }
        }
        _ => {}
    }
}
/// A candidate's gate record before anything is known about it.
fn base_record(id: &str, round: u64, plan: &Plan, served: &Artifact) -> CandidateRecord {
    let version = served.version.expect("the served artifact carries its version");
    CandidateRecord {
        motivation: plan.motivation.clone(),
        actionability: plan.actionability,
        ucb: if plan.ucb.is_finite() { plan.ucb } else { -1.0 },
        ..CandidateRecord::new(id, round, version, &served.hash, &plan.key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::evolve::tests::trial;

    #[test]
    fn the_next_probe_and_one_confirm_test_must_fit_the_budget() {
        assert!(affords_probe(None, 100, 1.0, 1.0));
        // Two probes of 0.1 and a confirm test of 0.3 fit in 0.5; three do not.
        assert!(affords_probe(Some(0.5), 1, 0.1, 0.3));
        assert!(!affords_probe(Some(0.5), 2, 0.1, 0.3));
    }

    #[test]
    fn blocked_directions_and_proposed_candidates_are_capped() {
        let blocked = Proposed::Blocked { reason: "needs a schema change".into() };
        let failed = Proposed::Failed { reason: "the model failed".into() };
        let candidate = Proposed::Candidate {
            value: serde_json::Value::Null,
            changes: Vec::new(),
            data: None,
            known: None,
            credits: Vec::new(),
            kind: emend_core::events::ChangeKind::Better,
        };
        let mut slots = Slots::default();
        assert_eq!(slots.admit(&blocked, 1), Admit::Screen);
        assert_eq!(slots.admit(&blocked, 1), Admit::Skip);
        assert_eq!(slots.admit(&failed, 1), Admit::Screen);
        for _ in 0..3 {
            assert_eq!(slots.admit(&candidate, 1), Admit::Screen);
        }
        assert_eq!(slots.admit(&candidate, 1), Admit::Stop);
    }

    #[test]
    fn novelty_stops_and_failed_proposals_propose_nothing() {
        let nothing = Screening {
            trials: vec![trial(None, Some(StoppedBy::Errored)), trial(Some("a"), Some(StoppedBy::Gate(Gate::Novelty)))],
            ..Screening::default()
        };
        assert!(!nothing.proposed());
        let probed = Screening { trials: vec![trial(Some("b"), Some(StoppedBy::Probe))], ..Screening::default() };
        assert!(probed.proposed());
    }
}
