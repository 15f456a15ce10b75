//! The evolution loop: Observe -> Improve -> Verify -> Decide, one round at a
//! time. A round asks the proposers for candidates (`propose`), screens each
//! (`screening`: gates, critic, probe, critic model), gives the best probes the
//! full test and the paired statistics, decides from those frozen records
//! (`decide`), then applies the decision in one journal batch followed by the
//! atomic rewrite of the served file. A round is all or nothing: a process
//! killed mid-round leaves the journal as it was after the previous round,
//! and the next run redoes the round identically.
//!
//! This module holds the loop itself; its steps live beside it:
//! `observe` (the served strategy's evaluation, replay check and best-ever
//! pointer), `screening` (asking and screening), `confirming` (the confirm tests and
//! the verdicts written back), `apply` (the journal batch and the served
//! file), `summary` (what a run did) and `error`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use emend_journal::EventLog;

use crate::jump::{JumpProposer, JumpSettings};
use crate::progress::Accepted;
use crate::propose::{ModelRewrite, Proposer, RuleEvolver, StopCause, Told};
use crate::step_search::{StepProposer, StepSettings};
use emend_core::artifact::Artifact;
use emend_core::candidate::{Resolution, StoppedBy};
use emend_core::config::{Project, SearchMethod};
use emend_core::confirm::{ConfirmState, Parts};
use emend_core::decide::{self, Decision, Policy, Serving, Tested};
use emend_core::digest::Digest;
use emend_core::events::{CandidateRecord, EvalSummary, Event, LabeledOutcome};
use emend_core::gates::Replay;
use emend_core::hypothesis::Hypothesis;
use emend_core::layer_a;
use emend_core::planner::DimensionEffect;
use emend_core::records::summarize;
use emend_core::schema::StrategySchema;
use emend_core::served::{missing, reconcile_served_file};
use emend_core::stop;
use emend_core::store::{Best, Store};
use emend_eval::backend::Backend;
use emend_eval::llm;

pub use crate::progress::Progress;

mod apply;
mod confirm_test;
mod error;
mod observe;
mod proposal;
mod retest;
mod screening;
mod summary;

pub use error::{EvolveError, Result};
pub use proposal::{Proposal, Proposed as ProposalOutcome, parse_field};
pub use retest::{RETEST, Retested, judged as retest_judged};
pub use screening::harness_facts;
pub use summary::{RunSummary, Stopped, recorded_accuracy};

use apply::{RoundExtras, split_record};
use confirm_test::learn;
use observe::Observed;
use summary::RoundOutcome;

/// Settings of a run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub rounds: u32,
    pub candidates: usize,
    /// Stop before a round once this many full-evaluation equivalents are spent.
    pub max_evals: Option<f64>,
    /// Stop before a round once this much time has passed (the round in flight finishes).
    pub max_time: Option<Duration>,
    /// Start a new LORD++ sequence when the split changed since the journal's
    /// last round (`evolve --new-split`); without it such a run is refused.
    pub new_split: bool,
    /// A person's change (`emend propose`): the round's one candidate, with its prediction.
    pub proposal: Option<Proposal>,
}

impl RunOptions {
    /// `rounds` rounds of `candidates` candidates, without budgets.
    pub fn rounds(rounds: u32, candidates: usize) -> RunOptions {
        RunOptions { rounds, candidates, max_evals: None, max_time: None, new_split: false, proposal: None }
    }
}

/// One evolution run over a journal.
pub struct Evolution<'a, L: EventLog + ?Sized> {
    pub project: &'a Project,
    pub schema: &'a StrategySchema,
    pub backend: &'a dyn Backend,
    pub log: &'a mut L,
}

/// What every evolution over a project's journal starts from (`emend
/// evolve`, `emend propose`, the proposal of `escalations resolve`): the
/// backend, and the project's schema with each field a rollback froze locked
/// at its served value, so neither a search nor a person's proposal brings
/// back a rolled-back change until `emend unquarantine` lifts it.
pub struct Setup {
    /// The schema the run searches: the project's, with the frozen fields locked.
    pub schema: StrategySchema,
    /// The fields a rollback froze, each with the version whose change it undid.
    pub frozen: BTreeMap<String, u64>,
    pub backend: Box<dyn Backend>,
}

impl Setup {
    /// The setup of a run over `log` with `schema` (the project's) and `backend`.
    pub fn new<L: EventLog + ?Sized>(
        log: &L,
        schema: &StrategySchema,
        backend: Box<dyn Backend>,
    ) -> std::result::Result<Setup, emend_core::served::ServedError> {
        let frozen = emend_core::served::frozen_by_rollback(log, schema)?;
        Ok(Setup { schema: schema.with_frozen(&frozen), frozen, backend })
    }

    /// The evolution of `project` over `log` with this setup.
    pub fn evolution<'a, L: EventLog + ?Sized>(&'a self, project: &'a Project, log: &'a mut L) -> Evolution<'a, L> {
        Evolution { project, schema: &self.schema, backend: self.backend.as_ref(), log }
    }
}

/// What a round starts from.
struct RoundInput<'r> {
    round: u64,
    observed: &'r Observed,
    /// The journal's first version's summary on the confirm part (the per-category floor).
    start: &'r EvalSummary,
    /// The search/confirm split.
    parts: &'r Parts,
    replay: &'r Replay,
    opts: &'r RunOptions,
    usage_before: Option<&'r llm::Usage>,
    /// The first round of the LORD++ sequence (see [`RunState::lord_from`]).
    lord_from: u64,
}

/// What the round updates as it goes: the hypothesis tree and the hashes seen.
struct History {
    tree: BTreeMap<String, Hypothesis>,
    seen: BTreeSet<String>,
}

/// The journal's record of past changes, as the round found it.
struct Past {
    effects: BTreeMap<String, DimensionEffect>,
    rejected_moves: BTreeSet<(String, String, String)>,
    /// The LORD++ alpha the round's first confirm test will run at.
    next_alpha: f64,
    /// The served version's parent document: where the last accepted step started.
    parent: Option<serde_json::Value>,
    /// The round's evidence digested for the planner (and the round record).
    digest: Digest,
}

/// One candidate of a round.
struct Trial {
    record: CandidateRecord,
    /// Kept while the candidate may still reach the full test.
    artifact: Option<Artifact>,
    /// The candidate's results on the confirm part.
    full: Option<Vec<LabeledOutcome>>,
    /// Its results on the whole search part, when its proposer evaluated them.
    known: Option<Vec<LabeledOutcome>>,
    node: Hypothesis,
}

impl Trial {
    fn stopped(
        mut record: CandidateRecord,
        node: Hypothesis,
        outcome: Resolution,
        by: StoppedBy,
        reason: String,
    ) -> Trial {
        record.outcome = outcome;
        record.rejected_by = Some(by);
        record.reason = reason;
        Trial { record, artifact: None, full: None, known: None, node }
    }

    fn error(&mut self, reason: String) {
        self.record.outcome = Resolution::Errored;
        self.record.rejected_by = Some(StoppedBy::Errored);
        self.record.reason = reason;
        self.artifact = None;
        self.full = None;
    }
}

/// The first stage's result: every candidate, and which passed the probe.
#[derive(Default)]
struct Screening {
    trials: Vec<Trial>,
    /// (trial index, probe delta) of the candidates that passed every screen.
    passed: Vec<(usize, f64)>,
    escalations: Vec<Event>,
    probes: u64,
    /// Probes whose results the proposer already held (they cost nothing).
    free_probes: u64,
    /// Questions in the round's probe sample.
    probe_size: usize,
    /// The alpha of the round's first confirm test (0 when none ran).
    alpha: f64,
}

/// What a run carries from round to round.
#[derive(Default)]
struct RunState {
    /// Full-evaluation equivalents spent so far.
    used: f64,
    /// The journal's first version's summary on the confirm part, once known.
    start: Option<EvalSummary>,
    /// The search/confirm split, once known.
    parts: Option<Parts>,
    /// The served strategy's replay check; `None` once the served strategy changed.
    replay: Option<Replay>,
    /// The first round of the LORD++ sequence the run's confirm tests belong to.
    lord_from: u64,
}

/// Why the run stops before a round: `--max-evals` spent, or `--max-time` passed.
fn over_budget(opts: &RunOptions, used: f64, elapsed: Duration) -> Option<Stopped> {
    if opts.max_evals.is_some_and(|m| used >= m) {
        return Some(Stopped::MaxEvals);
    }
    if opts.max_time.is_some_and(|t| elapsed >= t) {
        return Some(Stopped::MaxTime);
    }
    None
}

/// Why a run whose round proposed nothing stops: the budget or the search's
/// convergence when a proposer says so, else the directions are exhausted.
fn stopped_by(proposers: &[Box<dyn Proposer>]) -> Stopped {
    match proposers.iter().find_map(|p| p.stop_cause()) {
        Some(StopCause::Budget) => Stopped::MaxEvals,
        Some(StopCause::Converged) => Stopped::Converged,
        None => Stopped::Exhausted,
    }
}

/// `Err(Interrupted)` once a stop was requested.
fn if_stopped() -> Result<()> {
    match stop::requested() {
        Some(cause) => Err(EvolveError::Interrupted { cause: cause.as_str() }),
        None => Ok(()),
    }
}

/// Whether `cost` more full-evaluation equivalents fit under `--max-evals`.
fn affords(max_evals: Option<f64>, used: f64, cost: f64) -> bool {
    !max_evals.is_some_and(|m| m - used < cost - 1e-9)
}

/// What the run does after a round.
enum AfterRound {
    /// The round was journaled: count it.
    Count(RoundOutcome),
    /// A search found nothing worth testing but spent this much looking: it
    /// journals no round and spends no alpha, and the searcher tries again.
    SearchAgain(f64),
    /// Nothing was proposed and nothing spent: the run is exhausted.
    Exhausted,
}

fn after_round(outcome: Option<RoundOutcome>) -> AfterRound {
    match outcome {
        Some(o) if o.candidates > 0 || o.restored => AfterRound::Count(o),
        // The searcher tries again until its patience runs out, and then spends nothing.
        Some(o) if o.evaluations_used > 0.0 => AfterRound::SearchAgain(o.evaluations_used),
        _ => AfterRound::Exhausted,
    }
}

impl<'a, L: EventLog + ?Sized> Evolution<'a, L> {
    /// The token budget this run keeps: the smaller of `cost.max_tokens` and
    /// the operator's journaled one (`rollback --max-tokens`).
    pub(super) fn max_tokens(&self) -> Result<Option<u32>> {
        Ok(self.store().max_tokens(self.project.config.cost.max_tokens)?)
    }

    fn store(&self) -> Store<'_, L> {
        Store::new(&*self.log)
    }

    /// Runs `opts.rounds` rounds, or fewer: it stops before a round once
    /// `opts.max_evals` full-evaluation equivalents are spent or `opts.max_time`
    /// has passed, and when a round finds nothing to propose (that round is not
    /// journaled and spends no alpha).
    pub fn run(&mut self, opts: &RunOptions, progress: &mut dyn FnMut(Progress)) -> Result<RunSummary> {
        let started = Instant::now();
        reconcile_served_file(self.project, self.schema, &*self.log)?;
        let mut summary = RunSummary::default();
        let mut state = RunState::default();
        let mut proposers = self.proposers()?;
        // `opts.rounds` counts journaled rounds; a search that finds nothing is
        // not one (its searcher's patience bounds how often that happens).
        while summary.rounds < u64::from(opts.rounds) {
            // A stop request (a signal, `--preempt`, a closed output) is read
            // between evaluations; the round in progress journals nothing.
            let step = match stop::requested() {
                Some(_) => Ok(None),
                None => self.step(opts, started, &mut state, &mut summary, &mut proposers, progress),
            };
            match (step, stop::requested()) {
                (Ok(Some(stopped)), _) => {
                    summary.stopped = stopped;
                    break;
                }
                (Err(e), None) => return Err(e),
                (_, Some(cause)) => {
                    self.interrupted(cause, &mut summary)?;
                    break;
                }
                (Ok(None), None) => {}
            }
        }
        summary.evaluations_used = state.used;
        // A run whose every candidate errored learnt nothing: a scheduler must hear it.
        if summary.stopped != Stopped::Interrupted && summary.candidates > 0 && summary.errored == summary.candidates {
            summary.stopped = Stopped::Errored;
        }
        self.finish(summary, started)
    }

    /// In manual approval, the live pending version tested against the served
    /// version, if there is one: while it waits, a run neither searches nor
    /// spends a confirm test (a new pending version would supersede it, better
    /// or not). A pending version tested against another version (stale) does not hold runs back.
    fn waiting_for_approval(&self) -> Result<Option<u64>> {
        if self.project.config.serve.approval != emend_core::config::Approval::Manual {
            return Ok(None);
        }
        let store = self.store();
        let Some(served) = store.served()? else { return Ok(None) };
        Ok(store.live_pending()?.into_iter().find(|(_, tested)| *tested == served.version).map(|(v, _)| v))
    }

    /// Journals that the run stopped on `cause` before its next round finished.
    fn interrupted(&mut self, cause: stop::Cause, summary: &mut RunSummary) -> Result<()> {
        let round = self.store().last_round()? + 1;
        let requested_by = stop::preempted_by().map(|r| format!("{} (pid {}, {})", r.command, r.by_pid, r.who));
        let event = Event::Interrupted {
            round,
            cause: cause.as_str().into(),
            requested_by,
            who: emend_core::events::who(),
            at: emend_core::events::now_rfc3339(),
        };
        self.log.append(vec![event.to_new()])?;
        summary.stopped = Stopped::Interrupted;
        summary.interrupted_round = Some(round);
        Ok(())
    }

    /// One round of the run, or why the run stops before it (`Some`).
    fn step(
        &mut self,
        opts: &RunOptions,
        started: Instant,
        state: &mut RunState,
        summary: &mut RunSummary,
        proposers: &mut [Box<dyn Proposer>],
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Option<Stopped>> {
        if let Some(stopped) = over_budget(opts, state.used, started.elapsed()) {
            return Ok(Some(stopped));
        }
        // A version waiting for approval against the served one is not replaced by a later search.
        if let Some(waiting) = self.waiting_for_approval()? {
            summary.waiting = Some(waiting);
            return Ok(Some(Stopped::Pending));
        }
        let usage_before = self.backend.models().map(|m| m.usage());
        let round = self.store().last_round()? + 1;
        let observed = self.observe()?;
        if !observed.reused {
            state.used += 1.0;
        }
        progress(Progress::Observed {
            round,
            version: observed.version,
            accuracy: observed.summary.accuracy,
            reused: observed.reused,
        });
        self.prepare(round, &observed, state, summary, opts.new_split)?;
        // A round needs at least one probe and one confirm test, and a
        // new served strategy its replay check: nothing is spent on a
        // round that cannot be paid for.
        let least = {
            let p = state.parts.as_ref().expect("set by prepare");
            let probe = p.cost(self.project.config.gates.probe_size.min(p.search.len()));
            let check = if state.replay.is_none() { probe } else { 0.0 };
            check + probe + p.cost(p.confirm_ids.len())
        };
        if !affords(opts.max_evals, state.used, least) {
            return Ok(Some(Stopped::MaxEvals));
        }
        self.check_replay(&observed, state)?;
        let p = state.parts.as_ref().expect("set by prepare");
        let input = RoundInput {
            round,
            observed: &observed,
            start: state.start.as_ref().expect("set by prepare"),
            parts: p,
            replay: state.replay.as_ref().expect("set by prepare"),
            opts,
            usage_before: usage_before.as_ref(),
            lord_from: state.lord_from,
        };
        let outcome = self.round(&input, proposers, opts.max_evals.map(|m| m - state.used), progress)?;
        if let Some(o) = &outcome {
            state.used += o.evaluations_used;
            for message in &o.hook_failures {
                progress(Progress::HookFailed { round, message: message.clone() });
            }
        }
        match after_round(outcome) {
            AfterRound::Count(outcome) => {
                if summary.count(round, outcome) {
                    // A new served strategy: the replay check must hold for it too.
                    state.replay = None;
                }
            }
            AfterRound::SearchAgain(evaluations_used) => progress(Progress::Searched { round, evaluations_used }),
            AfterRound::Exhausted => return Ok(Some(stopped_by(proposers))),
        }
        Ok(None)
    }

    /// The run's proposers, in the order they are asked: the model's rewrite
    /// first, when it handles a direction; then `search.method`'s: the global
    /// search (`jump`), the step search (`steps`), or the rule evolver's
    /// candidates (`rules`). The rule evolver is always asked last; under
    /// `jump` and `steps` it proposes no candidate of its own.
    fn proposers(&self) -> Result<Vec<Box<dyn Proposer>>> {
        let mut proposers: Vec<Box<dyn Proposer>> = vec![Box::new(ModelRewrite)];
        let cfg = &self.project.config;
        let method = cfg.search_method();
        let max_tokens = self.max_tokens()?.map(f64::from);
        if method == SearchMethod::Jump {
            let settings = JumpSettings { max_tokens, ..JumpSettings::from_config(cfg) };
            proposers.push(Box::new(JumpProposer::new(settings)));
        } else if method == SearchMethod::Steps {
            proposers.push(Box::new(StepProposer::new(StepSettings {
                seed: cfg.loop_.seed,
                cost_bound: cfg.gates.cost_bound,
                max_tokens,
                category_drop_max: cfg.gates.category_drop_max,
                ..StepSettings::default()
            })));
        }
        proposers.push(Box::new(RuleEvolver { candidates: method == SearchMethod::Rules }));
        let store = self.store();
        let (searches, candidates) = (store.searches()?, store.candidates()?);
        for p in proposers.iter_mut() {
            p.restore(&searches, &candidates);
        }
        Ok(proposers)
    }

    /// What a run establishes once, at its first round: the split and the
    /// per-category floor's anchor. Their evaluations count in `state.used`.
    fn prepare(
        &mut self,
        round: u64,
        observed: &Observed,
        state: &mut RunState,
        summary: &mut RunSummary,
        new_split: bool,
    ) -> Result<()> {
        if state.parts.is_none() {
            let parts = Parts::of(&observed.results, &self.project.config.harness.split)?;
            state.lord_from = self.lord_sequence(round, &parts, new_split)?;
            state.parts = Some(parts);
        }
        let p = state.parts.as_ref().expect("set above");
        if state.start.is_none() {
            summary.first_round = Some(round);
            summary.start_accuracy = observed.summary.accuracy;
            summary.start_mean_tokens = observed.summary.mean_context_tokens;
            // The anchor of the per-category floor is the journal's first
            // version, not this invocation's start, so that a resumed run
            // decides exactly as an uninterrupted one.
            let (root, _) = self.load_version(1)?;
            let (root_results, reused) = self.ensure_evaluated(&root, 1)?;
            if !reused {
                state.used += 1.0;
            }
            state.start = Some(summarize(&p.confirm_of(&root_results)));
        }
        Ok(())
    }

    /// The first round of the LORD++ sequence this run's confirm tests join:
    /// the last round's when the split is the one it recorded; this round's
    /// when the split changed and the operator asked for a new sequence
    /// (`new_split`); otherwise the run is refused, since questions the
    /// search has read would be tested as fresh.
    fn lord_sequence(&self, round: u64, parts: &Parts, new_split: bool) -> Result<u64> {
        let now = split_record(&self.project.config.harness.split, parts, 0);
        match self.store().last_split()? {
            None => Ok(0),
            Some((_, last)) if last.same_design(&now) => Ok(last.lord_from_round.unwrap_or(0)),
            Some(_) if new_split => Ok(round),
            Some((round, last)) => {
                Err(EvolveError::SplitChanged { round, was: last.describe_design(), now: now.describe_design() })
            }
        }
    }

    /// The served strategy's replay check, once per served strategy; its
    /// evaluations count in `state.used`.
    fn check_replay(&mut self, observed: &Observed, state: &mut RunState) -> Result<()> {
        if state.replay.is_none() {
            let p = state.parts.as_ref().expect("set by prepare");
            let (r, k) = self.replay(observed, p)?;
            state.used += p.cost(k);
            state.replay = Some(r);
        }
        Ok(())
    }

    /// One round: screen, test, decide, apply. `None` when the round found
    /// nothing to propose: then nothing is journaled and no alpha is spent.
    fn round(
        &mut self,
        input: &RoundInput<'_>,
        proposers: &mut [Box<dyn Proposer>],
        budget_left: Option<f64>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Option<RoundOutcome>> {
        let mut used = 0.0;
        let (best, mut events) = self.ensure_best(input.observed, &mut used)?;
        let store = self.store();
        let mut history = History { tree: store.tree()?, seen: store.seen_hashes()? };
        let pinned = store.served()?.ok_or_else(|| missing(input.observed.version))?.pinned;
        let cfg = &self.project.config;
        let mut confirm = ConfirmState::replay_from(&cfg.gates, &store.candidates()?, input.lord_from);
        let search_results = input.parts.search_of(&input.observed.results);
        let past = Past {
            digest: self.digest(input, &search_results)?,
            effects: store.effects()?,
            rejected_moves: store.rejected_moves()?,
            next_alpha: confirm.lord.next_alpha(),
            parent: match store.version(input.observed.version)?.and_then(|v| v.parent) {
                Some(p) => match store.version(p)? {
                    Some(v) => store.document(&v.hash)?,
                    None => None,
                },
                None => None,
            },
        };
        let diagnosis = layer_a::diagnose(&search_results, 5);
        let served = Serving { version: input.observed.version, accuracy: input.observed.summary.accuracy, pinned };
        // A served strategy due for the best-ever restore is restored first: nothing is searched around it.
        let restore_due = self.decide(&[], served, &best, 0, None)?.restore.is_some();
        let mut screening = if restore_due {
            Screening::default()
        } else {
            self.screen_round(input, &search_results, &diagnosis, &past, &mut history, proposers, budget_left, progress)
        };
        // Evaluations cut short by a stop request are no results: nothing of the round is journaled.
        if_stopped()?;
        let proposed = screening.proposed() || restore_due;
        // What the proposers spent screening counts even when nothing came of it.
        let spent: f64 = proposers.iter_mut().map(|p| p.spent()).sum();
        // Their own records go with the round, or alone when it journals nothing.
        let searched: Vec<Event> = proposers.iter_mut().flat_map(|p| p.journal()).collect();
        if !proposed {
            // A re-scored best-ever pointer is journaled even when nothing is proposed.
            events.extend(searched);
            if !events.is_empty() {
                self.log.append(events.iter().map(Event::to_new).collect())?;
            }
            return Ok(if spent > 0.0 { Some(RoundOutcome::empty(spent)) } else { None });
        }
        events.extend(searched);
        used += spent;
        used += input.parts.cost(screening.probe_size) * (screening.probes - screening.free_probes) as f64;
        self.full_tests(input, &mut screening, &mut confirm, progress);
        self.judge_prediction(input, &mut screening);
        if_stopped()?;
        used += input.parts.cost(input.parts.confirm_ids.len())
            * screening.trials.iter().filter(|t| t.full.is_some()).count() as f64;
        let next_version = self.store().max_version()? + 1;
        // The winner is evaluated on the whole task set before the decision,
        // so best-ever and auto-restore compare measured accuracies only.
        let pick = tested(&screening.trials, None);
        let winner = decide::winner_of(&pick).map(|i| pick[i].trial);
        let completed = self.completed(input.parts, &screening.trials, winner, &mut used)?;
        let measured = completed.as_ref().map(|(i, results)| (*i, summarize(results).accuracy));
        let decision = self.decide(&screening.trials, served, &best, next_version, measured)?;
        let rejected_by = learn(&mut screening.trials, &decision, &mut history.tree);
        proposal::note_predictions(&mut screening);
        let told: Vec<Told> = screening.trials.iter().map(|t| Told::from(&t.record)).collect();
        for p in proposers.iter_mut() {
            p.tell(&told);
        }
        self.batch(&mut events, &screening, completed.as_ref(), &history.tree)?;
        let split = split_record(&cfg.harness.split, input.parts, input.lord_from);
        let record = RoundExtras { split, digest: past.digest, evaluations_used: used };
        let (applied, hook_failures) = self.apply(input, events, &screening, &decision, &best, &rejected_by, record)?;
        progress(decided(input.round, &screening.trials, &decision, served));
        Ok(Some(RoundOutcome::of(&screening, &decision, applied, hook_failures, rejected_by, used)))
    }

    /// The round's decision, from the frozen records of the candidates that
    /// had the confirm test and the winner's measured whole-set accuracy
    /// (`measured`: trial index and accuracy).
    fn decide(
        &self,
        trials: &[Trial],
        served: Serving,
        best: &Best,
        next_version: u64,
        measured: Option<(usize, f64)>,
    ) -> Result<Decision> {
        let tested = tested(trials, measured);
        let ineligible = self.store().ineligible()?;
        let cfg = &self.project.config;
        let pending = self.store().live_pending()?;
        let policy = Policy {
            restore_below_best: cfg.gates.restore_below_best,
            approval: cfg.serve.approval,
            quarantined: &ineligible,
            pending: &pending,
            max_pending: cfg.serve.max_pending,
        };
        Ok(decide::decide(&tested, served, best, next_version, &policy))
    }
}

/// The candidates that had the confirm test, with the measured whole-set
/// accuracy of the one `measured` names (trial index and accuracy).
fn tested(trials: &[Trial], measured: Option<(usize, f64)>) -> Vec<Tested<'_>> {
    trials
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let full = t.record.full.as_ref()?;
            t.full.as_ref()?;
            let accuracy = measured.filter(|(m, _)| *m == i).map(|(_, a)| a);
            Some(Tested { trial: i, full, accuracy })
        })
        .collect()
}

/// The progress line of a decided round.
fn decided(round: u64, trials: &[Trial], decision: &Decision, served: Serving) -> Progress {
    let (_, served_accuracy) = decision.served_after(served);
    Progress::Decided {
        round,
        accepted: decision.winner.filter(|_| !decision.pending).map(|w| Accepted {
            id: trials[w.trial].record.id.clone(),
            version: w.version,
            delta: trials[w.trial].record.delta.unwrap_or(0.0),
        }),
        restored: decision.restore.map(|r| r.to),
        served_accuracy,
        candidates: trials.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use emend_core::schema::Direction;

    /// A candidate of round 1 with the given document hash and stop.
    pub(super) fn trial(hash: Option<&str>, by: Option<StoppedBy>) -> Trial {
        let mut record = CandidateRecord::new("r1c1", 1, 1, "served", "retrieve.top_k::increase");
        record.hash = hash.map(str::to_string);
        record.rejected_by = by;
        let node = Hypothesis::new("retrieve.top_k", Direction::Increase);
        Trial { record, artifact: None, full: None, known: None, node }
    }

    #[test]
    fn budgets_stop_a_run_before_a_round() {
        let mut opts = RunOptions::rounds(8, 3);
        assert_eq!(over_budget(&opts, 1e9, Duration::from_secs(1_000_000)), None);
        opts.max_evals = Some(5.0);
        assert_eq!(over_budget(&opts, 4.9, Duration::ZERO), None);
        assert_eq!(over_budget(&opts, 5.0, Duration::ZERO), Some(Stopped::MaxEvals));
        opts.max_time = Some(Duration::from_secs(10));
        assert_eq!(over_budget(&opts, 0.0, Duration::from_secs(10)), Some(Stopped::MaxTime));
        // Both spent: the evaluations are named.
        assert_eq!(over_budget(&opts, 6.0, Duration::from_secs(10)), Some(Stopped::MaxEvals));
    }

    #[test]
    fn a_round_must_fit_in_what_is_left_of_max_evals() {
        assert!(affords(None, 1e9, 1.0));
        assert!(affords(Some(3.0), 1.0, 2.0));
        assert!(!affords(Some(3.0), 1.5, 2.0));
    }

    #[test]
    fn an_unjournaled_round_searches_again_only_when_it_spent() {
        assert!(matches!(after_round(None), AfterRound::Exhausted));
        assert!(matches!(after_round(Some(RoundOutcome::empty(0.0))), AfterRound::Exhausted));
        assert!(matches!(after_round(Some(RoundOutcome::empty(0.4))), AfterRound::SearchAgain(s) if s == 0.4));
        let journaled = RoundOutcome { candidates: 1, ..RoundOutcome::empty(0.0) };
        assert!(matches!(after_round(Some(journaled)), AfterRound::Count(_)));
    }
}
