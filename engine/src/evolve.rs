//! The evolution loop: Observe -> Improve -> Verify -> Decide, one round at a
//! time. A round asks the proposers for candidates (`propose`), screens each
//! (`screen`: gates, critic, probe, critic model), gives the best probes the
//! full test and the paired statistics, decides from those frozen records
//! (`decide`), then applies the decision in one journal batch followed by the
//! atomic rewrite of the served file. A round is all or nothing: a process
//! killed mid-round leaves the journal as it was after the previous round,
//! and the next run redoes the round identically.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use journal::{ErrorClass, EventLog, JournalError};
use serde::Serialize;

use crate::artifact::{Artifact, ArtifactError};
use crate::backend::{Backend, BackendError};
use crate::candidate::{FullRecord, Outcome, Rule, RuleRecord, StoppedBy};
use crate::config::{ClusterMode, Project, ProtocolChoice};
use crate::confirm::{ConfirmState, Parts};
use crate::decide::{self, Applied, Decision, Policy, Serving, Stamp, Tested, Verdict};
use crate::events::{CandidateRecord, EvalSummary, Event, QuestionResult, RoundRecord, SplitRecord, now_rfc3339, who};
use crate::gates::{self, CriticLabel, Gate, Replay};
use crate::hypothesis::Hypothesis;
use crate::layer_a::{self, Diagnosis};
use crate::llm;
use crate::planner::{self, DimensionEffect, Plan, PlannerSettings};
use crate::progress::{Accepted, Step};
use crate::propose::{Ask, ModelRewrite, Proposed, Proposer, RuleEvolver, Told};
use crate::records::{evaluated_event, question_results, summarize};
use crate::schema::StrategySchema;
use crate::screen::{self, Screen, Screened, Stage, Stop};
use crate::searcher::{SearchProposer, SearchSettings};
use crate::served::missing;
use crate::stats;
use crate::store::{Best, Recorded, Store, StoreError};

pub use crate::progress::Progress;
pub use crate::served::{
    FileState, apply_rollback, artifact_of, initialize, journal_hand_edit, reconcile_served_file, served_file_state,
    served_header, strip_metadata, write_served,
};

/// Why a run (or an operation on the served strategy) could not go on.
#[derive(Debug, thiserror::Error)]
pub enum EvolveError {
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The served strategy itself could not be evaluated.
    #[error("evaluating the served strategy v{version} failed: {source}")]
    Served { version: u64, source: BackendError },
    /// The served file differs from what the journal serves and is no version it knows.
    #[error(
        "{file}: edited by hand (content hash {file_hash:.12}, but the journal serves v{version}, hash {served_hash:.12}); \
         it is not adopted. See the edit with `emend diff served {file}`; `emend rollback --to v{version} --force` journals \
         the edited content as a new version and serves v{version} again"
    )]
    HandEdited { file: String, file_hash: String, version: u64, served_hash: String },
    /// The served file cannot be read, so whether it was edited by hand is unknown.
    #[error(
        "{}: cannot be read, so emend cannot tell whether it was edited by hand (the journal serves v{version}); \
         fix its permissions, or replace it with `emend rollback --to v{version} --force`",
        file.display()
    )]
    Unreadable {
        file: PathBuf,
        version: u64,
        #[source]
        source: std::io::Error,
    },
    /// A hand edit of the served file is no valid strategy; its bytes were kept.
    #[error("the edited file is not a valid strategy; it was kept as {}", kept.display())]
    InvalidHandEdit {
        kept: PathBuf,
        #[source]
        source: ArtifactError,
    },
    /// A journaled document no longer passes the schema.
    #[error("journal strategy {hash:.12} is not a valid strategy")]
    Journaled {
        hash: String,
        #[source]
        source: ArtifactError,
    },
    #[error("the journal has no served strategy")]
    NothingServed,
    /// The task set cannot be split into search and confirm parts.
    #[error("emend.yaml: {0}")]
    Split(#[from] stats::SplitError),
    /// The winner's search part could not be evaluated.
    #[error("evaluating the accepted candidate on the search part failed: {0}")]
    Winner(BackendError),
    #[error("no version v{version} in the journal (it has v1..v{max})")]
    UnknownVersion { version: u64, max: u64 },
    #[error("{}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl EvolveError {
    /// How the CLI should exit on this error.
    pub fn exit_class(&self) -> ErrorClass {
        match self {
            EvolveError::Journal(j) => j.exit_class(),
            EvolveError::Store(s) => s.exit_class(),
            EvolveError::HandEdited { .. }
            | EvolveError::Unreadable { .. }
            | EvolveError::InvalidHandEdit { .. }
            | EvolveError::Journaled { .. }
            | EvolveError::NothingServed
            | EvolveError::Split(_)
            | EvolveError::UnknownVersion { .. } => ErrorClass::BadInput,
            EvolveError::Served { .. } | EvolveError::Winner(_) | EvolveError::Io { .. } => ErrorClass::Failed,
        }
    }
}

pub type Result<T> = std::result::Result<T, EvolveError>;

/// What a run did, for people and schedulers.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RunSummary {
    pub rounds: u64,
    pub first_round: u64,
    pub last_round: u64,
    pub accepted: u64,
    pub accepted_versions: Vec<u64>,
    pub rejected_by: BTreeMap<String, u64>,
    pub candidates: u64,
    pub full_evaluations: u64,
    pub probe_evaluations: u64,
    pub start_accuracy: f64,
    pub served_accuracy: f64,
    pub best_accuracy: f64,
    pub served_version: u64,
    pub best_version: u64,
    pub rollbacks: u64,
    pub escalations: u64,
    pub elapsed_ms: u64,
    /// Full-evaluation equivalents spent by this run (k of n questions cost
    /// k/n; results reused from the journal cost 0).
    pub evaluations_used: f64,
    /// Why the run stopped.
    pub stopped: Stopped,
    /// Mean context tokens of the strategy served at the start and at the end.
    pub start_mean_tokens: Option<f64>,
    pub served_mean_tokens: Option<f64>,
    /// Versions that passed every gate and wait for approval (serve.approval: manual).
    pub pending_versions: Vec<u64>,
    /// Hooks that failed after a change was committed (journaled as `hook_failed`).
    pub hook_failures: Vec<String>,
}

/// Why a run stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stopped {
    /// It ran the rounds it was asked for.
    #[default]
    Rounds,
    /// `--max-evals` was reached.
    MaxEvals,
    /// `--max-time` passed.
    MaxTime,
    /// A round found nothing to propose; it was not run and spent no alpha.
    Exhausted,
}

impl Stopped {
    pub fn as_str(self) -> &'static str {
        match self {
            Stopped::Rounds => "rounds",
            Stopped::MaxEvals => "max_evals",
            Stopped::MaxTime => "max_time",
            Stopped::Exhausted => "exhausted",
        }
    }
}

/// A recorded evaluation's summary, for status and reports.
pub fn recorded_accuracy(r: &Recorded) -> f64 {
    r.summary.accuracy
}

/// Settings of a run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub rounds: u32,
    pub candidates: usize,
    /// Stop before a round once this many full-evaluation equivalents are spent.
    pub max_evals: Option<f64>,
    /// Stop before a round once this much time has passed (the round in flight finishes).
    pub max_time: Option<Duration>,
}

impl RunOptions {
    /// `rounds` rounds of `candidates` candidates, without budgets.
    pub fn rounds(rounds: u32, candidates: usize) -> RunOptions {
        RunOptions { rounds, candidates, max_evals: None, max_time: None }
    }
}

/// One evolution run over a journal.
pub struct Evolution<'a, L: EventLog + ?Sized> {
    pub project: &'a Project,
    pub schema: &'a StrategySchema,
    pub backend: &'a dyn Backend,
    pub log: &'a mut L,
}

struct Observed {
    version: u64,
    artifact: Artifact,
    results: Vec<QuestionResult>,
    summary: EvalSummary,
    reused: bool,
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
}

/// One candidate of a round.
struct Trial {
    record: CandidateRecord,
    /// Kept while the candidate may still reach the full test.
    artifact: Option<Artifact>,
    /// The candidate's results on the confirm part.
    full: Option<Vec<QuestionResult>>,
    /// Its results on the whole search part, when its proposer evaluated them.
    known: Option<Vec<QuestionResult>>,
    node: Hypothesis,
    /// The number fed back into the search (UCB reward): the probe's
    /// search-part delta, or after an accept the holdout's answer.
    feedback: Option<f64>,
}

impl Trial {
    fn stopped(
        mut record: CandidateRecord,
        node: Hypothesis,
        outcome: Outcome,
        by: StoppedBy,
        reason: String,
    ) -> Trial {
        record.outcome = outcome;
        record.rejected_by = Some(by);
        record.reason = reason;
        Trial { record, artifact: None, full: None, known: None, node, feedback: None }
    }

    fn error(&mut self, reason: String) {
        self.record.outcome = Outcome::Errored;
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

struct RoundOutcome {
    candidates: u64,
    probes: u64,
    full: u64,
    accepted: Option<u64>,
    pending: Option<u64>,
    restored: bool,
    hook_failures: Vec<String>,
    rejected_by: BTreeMap<String, u64>,
    escalations: u64,
    evaluations_used: f64,
}

impl RoundOutcome {
    /// A round that journaled nothing but spent evaluations looking.
    fn empty(evaluations_used: f64) -> RoundOutcome {
        RoundOutcome {
            candidates: 0,
            probes: 0,
            full: 0,
            accepted: None,
            pending: None,
            restored: false,
            hook_failures: Vec::new(),
            rejected_by: BTreeMap::new(),
            escalations: 0,
            evaluations_used,
        }
    }
}

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

/// No category may end more than its floor ([`stats::category_floor`]:
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
            let floor = stats::category_floor(*n, epsilon);
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

/// The gate rule: the one-sided exact test on the confirm part.
fn confirm_rule(t: &stats::BetterTest) -> RuleRecord {
    RuleRecord {
        name: Rule::ConfirmBetter,
        category: None,
        value: t.p_value,
        threshold: t.alpha,
        pass: t.better,
        detail: format!(
            "one-sided exact p = {:.4} vs alpha {:.3e} ({} improved, {} regressed of {}; lower bound {:+.4})",
            t.p_value, t.alpha, t.improved, t.regressed, t.questions, t.lower_bound
        ),
    }
}

/// The cluster check as a rule (`gates.cluster_check: require`): too few
/// clusters to tell fails it.
fn cluster_rule(c: &stats::ClusterCheck) -> RuleRecord {
    let (value, threshold, detail) = match c {
        stats::ClusterCheck::TooFewClusters { clusters, needed } => {
            (f64::NAN, f64::NAN, format!("{clusters} conversation(s): too few to tell (needs {needed})"))
        }
        stats::ClusterCheck::Tested { clusters, p_value, alpha, t, df, .. } => {
            (*p_value, *alpha, format!("CR2 t = {t:.3} on {df} df over {clusters} conversations: p = {p_value:.4}"))
        }
    };
    RuleRecord { name: Rule::ClusterCheck, category: None, value, threshold, pass: c.better(), detail }
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

/// Writes what a tested candidate was told into its record.
fn apply_verdict(record: &mut CandidateRecord, verdict: &Verdict) {
    match verdict {
        Verdict::Accepted { version } => {
            let delta = record.full.as_ref().map_or(0.0, |f| f.delta);
            record.outcome = Outcome::Accepted;
            record.rejected_by = None;
            record.accepted_version = Some(*version);
            record.reason = match record.full.as_ref().and_then(|f| f.lord) {
                Some(l) => format!(
                    "accepted as v{version}: confirm-part delta {delta:+.4}, tested at alpha {:.3e} \
                     (LORD++ test {}), wealth left {:.3e}",
                    l.alpha, l.index, l.wealth
                ),
                None => format!("accepted as v{version}: paired delta {delta:+.4}"),
            };
        }
        Verdict::Pending { version } => {
            let delta = record.full.as_ref().map_or(0.0, |f| f.delta);
            // It passed every gate: accepted as a candidate, served only once a person approves it.
            record.outcome = Outcome::Accepted;
            record.rejected_by = None;
            record.accepted_version = Some(*version);
            record.reason = format!(
                "pending approval as v{version} (serve.approval: manual): confirm-part delta {delta:+.4}{}",
                record
                    .full
                    .as_ref()
                    .and_then(|f| f.lord)
                    .map_or(String::new(), |l| format!(", tested at alpha {:.3e} (LORD++ test {})", l.alpha, l.index))
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

impl<'a, L: EventLog + ?Sized> Evolution<'a, L> {
    fn store(&self) -> Store<'_, L> {
        Store::new(&*self.log)
    }

    /// The recorded evaluation of a strategy under the current harness and
    /// dataset, evaluating (and journaling) it when there is none.
    fn ensure_evaluated(&mut self, artifact: &Artifact, version: u64) -> Result<(Vec<QuestionResult>, bool)> {
        let (h, d) = (self.backend.harness_hash(), self.backend.dataset_hash());
        if let Some(rec) = self.store().evaluation(&artifact.hash, &h, &d)? {
            return Ok((rec.questions, true));
        }
        let eval = self.backend.evaluate(artifact, None).map_err(|source| EvolveError::Served { version, source })?;
        if eval.outcomes.iter().any(|o| o.error.is_some()) {
            let source = BackendError::incomplete(&eval, eval.n());
            return Err(EvolveError::Served { version, source });
        }
        let results = question_results(&eval);
        self.log.append(vec![evaluated_event(&artifact.hash, &h, &d, &results).to_new()])?;
        Ok((results, false))
    }

    fn load_version(&self, version: u64) -> Result<(Artifact, Option<u64>)> {
        let store = self.store();
        let info = store.version(version)?.ok_or_else(|| missing(version))?;
        let doc = store.document(&info.hash)?.ok_or_else(|| missing(version))?;
        let mut a = artifact_of(self.schema, &info.hash, doc)?;
        a.version = Some(version);
        Ok((a, info.parent))
    }

    fn observe(&mut self) -> Result<Observed> {
        let served = self.store().served()?.ok_or(EvolveError::NothingServed)?;
        let (artifact, _) = self.load_version(served.version)?;
        let (results, reused) = self.ensure_evaluated(&artifact, served.version)?;
        let summary = summarize(&results);
        Ok(Observed { version: served.version, artifact, results, summary, reused })
    }

    /// Re-evaluates the served strategy on a seeded probe-sized sample of the
    /// search part and compares with its record. Returns the replay and the
    /// questions it evaluated.
    fn replay(&self, observed: &Observed, parts: &Parts) -> Result<(Replay, usize)> {
        let cfg = &self.project.config;
        let search: Vec<(String, String)> =
            self.backend.questions().into_iter().filter(|(id, _)| parts.search.contains(id)).collect();
        let ids = gates::probe_sample(&search, cfg.gates.probe_size, cfg.loop_.seed ^ 0x5EED_0F2E_91A7);
        let eval = self
            .backend
            .evaluate(&observed.artifact, Some(&ids))
            .map_err(|source| EvolveError::Served { version: observed.version, source })?;
        let fresh = question_results(&eval);
        let wanted: BTreeSet<&str> = ids.iter().map(String::as_str).collect();
        let recorded: BTreeMap<&str, bool> = observed
            .results
            .iter()
            .filter(|q| wanted.contains(q.id.as_str()))
            .map(|q| (q.id.as_str(), q.correct))
            .collect();
        let mut mismatches = 0;
        let mut example = None;
        for q in &fresh {
            if recorded.get(q.id.as_str()) != Some(&q.correct) {
                mismatches += 1;
                example.get_or_insert_with(|| q.id.clone());
            }
        }
        if fresh.len() != recorded.len() {
            mismatches = mismatches.max(fresh.len().abs_diff(recorded.len()));
        }
        Ok((Replay { mismatches, n: fresh.len(), example }, ids.len()))
    }

    /// The best-ever pointer under the current harness and dataset; when they
    /// changed, every version is re-scored first (cheap with the stage cache).
    fn ensure_best(&mut self, observed: &Observed, used: &mut f64) -> Result<(Best, Vec<Event>)> {
        let (h, d) = (self.backend.harness_hash(), self.backend.dataset_hash());
        // Quarantined, pending and rejected versions are never the best-ever.
        let ineligible = self.store().ineligible()?;
        if let Some(best) = self.store().best()?
            && best.harness_hash == h
            && best.dataset_hash == d
            && !ineligible.contains(&best.version)
        {
            return Ok((best, vec![]));
        }
        let mut best: Option<(u64, String, f64)> = None;
        for info in self.store().versions()?.into_iter().filter(|v| !ineligible.contains(&v.version)) {
            let accuracy = if info.hash == observed.artifact.hash {
                observed.summary.accuracy
            } else {
                let (a, _) = self.load_version(info.version)?;
                let (results, reused) = self.ensure_evaluated(&a, info.version)?;
                if !reused {
                    *used += 1.0;
                }
                summarize(&results).accuracy
            };
            if best.as_ref().is_none_or(|b| accuracy > b.2) {
                best = Some((info.version, info.hash.clone(), accuracy));
            }
        }
        let (version, hash, accuracy) = best.ok_or_else(|| missing(observed.version))?;
        let event = Event::BestChanged {
            version,
            hash: hash.clone(),
            accuracy,
            harness_hash: h.clone(),
            dataset_hash: d.clone(),
        };
        Ok((Best { version, hash, accuracy, harness_hash: h, dataset_hash: d }, vec![event]))
    }

    /// Runs `opts.rounds` rounds, or fewer: it stops before a round once
    /// `opts.max_evals` full-evaluation equivalents are spent or `opts.max_time`
    /// has passed, and when a round finds nothing to propose (that round is not
    /// journaled and spends no alpha).
    pub fn run(&mut self, opts: &RunOptions, progress: &mut dyn FnMut(Progress)) -> Result<RunSummary> {
        let started = Instant::now();
        reconcile_served_file(self.project, self.schema, &*self.log)?;
        let mut summary = RunSummary::default();
        let mut start: Option<EvalSummary> = None;
        let mut parts: Option<Parts> = None;
        let mut replay: Option<Replay> = None;
        // The model's rewrite first, when it handles a direction; the schema's moves otherwise.
        let mut proposers: Vec<Box<dyn Proposer>> = vec![Box::new(ModelRewrite)];
        let cfg = &self.project.config;
        let search = cfg.loop_.search && cfg.harness.protocol == ProtocolChoice::Endpoint;
        if search {
            proposers.push(Box::new(SearchProposer::new(SearchSettings {
                seed: cfg.loop_.seed,
                cost_bound: cfg.gates.cost_bound,
                epsilon_c: cfg.gates.epsilon_c,
                ..SearchSettings::default()
            })));
        }
        proposers.push(Box::new(RuleEvolver { candidates: !search }));
        let mut used = 0.0;
        let cfg_probe_size = self.project.config.gates.probe_size;
        for _ in 0..opts.rounds {
            if opts.max_evals.is_some_and(|m| used >= m) {
                summary.stopped = Stopped::MaxEvals;
                break;
            }
            if opts.max_time.is_some_and(|t| started.elapsed() >= t) {
                summary.stopped = Stopped::MaxTime;
                break;
            }
            let usage_before = self.backend.models().map(|m| m.usage());
            let round = self.store().last_round()? + 1;
            let observed = self.observe()?;
            if !observed.reused {
                used += 1.0;
            }
            progress(Progress::Observed {
                round,
                version: observed.version,
                accuracy: observed.summary.accuracy,
                reused: observed.reused,
            });
            if parts.is_none() {
                parts = Some(Parts::of(&observed.results, &self.project.config.harness.split)?);
            }
            let p = parts.as_ref().expect("set above");
            if start.is_none() {
                summary.first_round = round;
                summary.start_accuracy = observed.summary.accuracy;
                summary.start_mean_tokens = observed.summary.mean_context_tokens;
                // The anchor of the per-category floor is the journal's first
                // version, not this invocation's start, so that a resumed run
                // decides exactly as an uninterrupted one.
                let (root, _) = self.load_version(1)?;
                let (root_results, reused) = self.ensure_evaluated(&root, 1)?;
                if !reused {
                    used += 1.0;
                }
                start = Some(summarize(&p.confirm_of(&root_results)));
            }
            if replay.is_none() {
                let (r, k) = self.replay(&observed, p)?;
                used += p.cost(k);
                replay = Some(r);
            }
            // A round needs at least one probe and one confirm test.
            let least = p.cost(cfg_probe_size.min(p.search.len())) + p.cost(p.confirm_ids.len());
            if opts.max_evals.is_some_and(|m| m - used < least - 1e-9) {
                summary.stopped = Stopped::MaxEvals;
                break;
            }
            let input = RoundInput {
                round,
                observed: &observed,
                start: start.as_ref().expect("set above"),
                parts: p,
                replay: replay.as_ref().expect("set above"),
                opts,
                usage_before: usage_before.as_ref(),
            };
            let Some(outcome) = self.round(&input, &mut proposers, opts.max_evals.map(|m| m - used), progress)? else {
                summary.stopped = Stopped::Exhausted;
                break;
            };
            used += outcome.evaluations_used;
            if outcome.candidates == 0 {
                // A search that found nothing worth testing journals no round
                // and spends no alpha; the searcher tries again until its
                // patience runs out, and then spends nothing: exhausted.
                if outcome.evaluations_used > 0.0 {
                    progress(Progress::Searched { round, evaluations_used: outcome.evaluations_used });
                    continue;
                }
                summary.stopped = Stopped::Exhausted;
                break;
            }
            summary.rounds += 1;
            summary.last_round = round;
            summary.candidates += outcome.candidates;
            summary.full_evaluations += outcome.full;
            summary.probe_evaluations += outcome.probes;
            summary.escalations += outcome.escalations;
            for (k, v) in outcome.rejected_by {
                *summary.rejected_by.entry(k).or_default() += v;
            }
            summary.pending_versions.extend(outcome.pending);
            summary.hook_failures.extend(outcome.hook_failures);
            if let Some(v) = outcome.accepted {
                summary.accepted += 1;
                summary.accepted_versions.push(v);
                // A new served strategy: the replay check must hold for it too.
                replay = None;
            }
            if outcome.restored {
                summary.rollbacks += 1;
                replay = None;
            }
        }
        summary.evaluations_used = used;
        self.finish(summary, started)
    }

    fn finish(&self, mut summary: RunSummary, started: Instant) -> Result<RunSummary> {
        let store = self.store();
        let served = store.served()?.ok_or_else(|| missing(0))?;
        summary.served_version = served.version;
        let (h, d) = (self.backend.harness_hash(), self.backend.dataset_hash());
        let served_eval = store.evaluation(&served.hash, &h, &d)?;
        summary.served_accuracy = served_eval.as_ref().map_or(0.0, |r| r.summary.accuracy);
        summary.served_mean_tokens = served_eval.as_ref().and_then(|r| r.summary.mean_context_tokens);
        if let Some(best) = store.best()? {
            summary.best_version = best.version;
            summary.best_accuracy = best.accuracy;
        }
        if summary.rounds == 0 {
            summary.start_accuracy = summary.served_accuracy;
            summary.start_mean_tokens = summary.served_mean_tokens;
        }
        summary.elapsed_ms = started.elapsed().as_millis() as u64;
        Ok(summary)
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
        let mut confirm = ConfirmState::replay(&cfg.gates, cfg.loop_.seed, &store.candidates()?);
        let past = Past {
            effects: store.effects()?,
            rejected_moves: store.rejected_moves()?,
            next_alpha: confirm.lord.next_alpha(),
        };
        let search_results = input.parts.search_of(&input.observed.results);
        let diagnosis = layer_a::diagnose(&search_results, 5);
        let mut screening = self.screen_round(
            input,
            &search_results,
            &diagnosis,
            &past,
            &mut history,
            proposers,
            budget_left,
            progress,
        );
        let proposed = screening
            .trials
            .iter()
            .any(|t| t.record.hash.is_some() && t.record.rejected_by != Some(StoppedBy::Gate(Gate::Novelty)));
        // What the proposers spent screening counts even when nothing came of it.
        let spent: f64 = proposers.iter_mut().map(|p| p.spent()).sum();
        if !proposed {
            return Ok(if spent > 0.0 { Some(RoundOutcome::empty(spent)) } else { None });
        }
        used += spent;
        used += input.parts.cost(screening.probe_size) * (screening.probes - screening.free_probes) as f64;
        self.full_tests(input, &mut screening, &mut confirm, progress);
        used += input.parts.cost(input.parts.confirm_ids.len())
            * screening.trials.iter().filter(|t| t.full.is_some()).count() as f64;
        let next_version = self.store().max_version()? + 1;
        let served = Serving { version: input.observed.version, accuracy: input.observed.summary.accuracy, pinned };
        // What flows back into the search after a test: the probe's search-part
        // delta, or for a candidate that passed every rule the holdout's answer.
        for t in screening.trials.iter_mut() {
            t.feedback = t.record.probe.as_ref().map(|p| p.delta).or(t.record.delta);
            let Some(full) = t.record.full.as_mut().filter(|f| f.accept) else { continue };
            let search = t.record.probe.as_ref().map_or(0.0, |p| p.delta);
            let answer = confirm.holdout.query(search, full.delta);
            full.holdout = Some(answer);
            t.feedback = Some(match answer {
                stats::HoldoutAnswer::Search { value } | stats::HoldoutAnswer::Confirm { value } => value,
                stats::HoldoutAnswer::Exhausted => search,
            });
        }
        let trials = &mut screening.trials;
        let tested: Vec<Tested<'_>> = trials
            .iter()
            .enumerate()
            .filter_map(|(i, t)| {
                let full = t.record.full.as_ref()?;
                t.full.as_ref()?;
                Some(Tested { trial: i, full, accuracy: served.accuracy + t.feedback.unwrap_or(0.0) })
            })
            .collect();
        let ineligible = self.store().ineligible()?;
        let policy =
            Policy { tau_rollback: cfg.gates.tau_rollback, approval: cfg.serve.approval, quarantined: &ineligible };
        let decision = decide::decide(&tested, served, &best, next_version, &policy);
        let rejected_by = learn(trials, &decision, &mut history.tree);
        let told: Vec<Told> = trials.iter().map(|t| Told::from(&t.record)).collect();
        for p in proposers.iter_mut() {
            p.tell(&told);
        }
        // The winner becomes the served strategy: its search part is evaluated
        // so that the journal holds its full evaluation.
        let completed = match decision.winner {
            Some(w) => {
                let t = &screening.trials[w.trial];
                if t.known.as_ref().is_none_or(|k| k.len() != input.parts.search.len()) {
                    used += input.parts.cost(input.parts.search.len());
                }
                let c = self.complete(input.parts, t)?;
                Some((w.trial, c))
            }
            None => None,
        };
        self.batch(&mut events, &screening, completed.as_ref(), &history.tree)?;
        let split = SplitRecord {
            confirm_fraction: cfg.harness.split.confirm_fraction,
            seed: cfg.harness.split.seed,
            search: input.parts.search.len(),
            confirm: input.parts.confirm.len(),
            confirm_hash: crate::artifact::sha256_hex(input.parts.confirm_ids.join("\n").as_bytes()),
        };
        let (applied, hook_failures) =
            self.apply(input, events, &screening, &decision, &best, &rejected_by, split, used)?;
        let trials = &screening.trials;
        let (_, served_accuracy) = decision.served_after(served);
        progress(Progress::Decided {
            round: input.round,
            accepted: decision.winner.filter(|_| !decision.pending).map(|w| Accepted {
                id: trials[w.trial].record.id.clone(),
                version: w.version,
                delta: trials[w.trial].record.delta.unwrap_or(0.0),
            }),
            restored: decision.restore.map(|r| r.to),
            served_accuracy,
            candidates: trials.len(),
        });
        Ok(Some(RoundOutcome {
            candidates: trials.len() as u64,
            probes: screening.probes,
            full: applied,
            accepted: decision.winner.filter(|_| !decision.pending).map(|w| w.version),
            pending: decision.winner.filter(|_| decision.pending).map(|w| w.version),
            restored: decision.restore.is_some(),
            hook_failures,
            rejected_by,
            escalations: screening.escalations.len() as u64,
            evaluations_used: used,
        }))
    }

    /// The winner's results on the whole task set: its confirm-part results
    /// and a fresh evaluation of the search part, sorted by id.
    fn complete(&self, parts: &Parts, t: &Trial) -> Result<Vec<QuestionResult>> {
        let artifact = t.artifact.as_ref().expect("the winner keeps its artifact");
        let ids: Vec<String> = parts.search.iter().cloned().collect();
        if let Some(known) = t.known.as_ref().filter(|k| k.len() == ids.len()) {
            let mut all = known.clone();
            all.extend(t.full.as_ref().expect("the winner was tested").iter().cloned());
            all.sort_by(|a, b| a.id.cmp(&b.id));
            return Ok(all);
        }
        let eval = self.backend.evaluate(artifact, Some(&ids)).map_err(EvolveError::Winner)?;
        if eval.outcomes.iter().any(|o| o.error.is_some()) || eval.n() != ids.len() {
            return Err(EvolveError::Winner(BackendError::incomplete(&eval, ids.len())));
        }
        let mut all = question_results(&eval);
        all.extend(t.full.as_ref().expect("the winner was tested").iter().cloned());
        all.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(all)
    }

    /// Stage 1: asks the proposers along each planned direction and screens
    /// what they propose, until the round has its candidates.
    #[allow(clippy::too_many_arguments)]
    fn screen_round(
        &self,
        input: &RoundInput<'_>,
        search_results: &[QuestionResult],
        diagnosis: &Diagnosis,
        past: &Past,
        history: &mut History,
        proposers: &mut [Box<dyn Proposer>],
        budget_left: Option<f64>,
        progress: &mut dyn FnMut(Progress),
    ) -> Screening {
        let cfg = &self.project.config;
        let (round, observed) = (input.round, input.observed);
        let plans = planner::plan(
            self.schema,
            diagnosis,
            &history.tree,
            &past.effects,
            PlannerSettings { ucb_c: cfg.loop_.ucb_c, ..PlannerSettings::default() },
        );
        let roles = self.backend.roles();
        // The probe (rung 0) reads the search part only.
        let search_questions: Vec<(String, String)> =
            self.backend.questions().into_iter().filter(|(id, _)| input.parts.search.contains(id)).collect();
        let probe_ids = gates::probe_sample(
            &search_questions,
            cfg.gates.probe_size,
            cfg.loop_.seed ^ round.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        let served_on_probe = {
            let probe: BTreeSet<&str> = probe_ids.iter().map(String::as_str).collect();
            search_results.iter().filter(|q| probe.contains(q.id.as_str()) && q.correct).count()
        };
        let probe_cost = input.parts.cost(probe_ids.len());
        let mut out = Screening { probe_size: probe_ids.len(), ..Screening::default() };
        for p in proposers.iter_mut() {
            p.start_round();
        }
        let (mut produced, mut blocked, mut attempts) = (0usize, 0usize, 0usize);
        for plan in &plans {
            if produced >= input.opts.candidates {
                break;
            }
            // The budget: the next probe and one confirm test must fit in what is left.
            let confirm_cost = input.parts.cost(input.parts.confirm_ids.len());
            if budget_left
                .is_some_and(|b| (out.probes - out.free_probes + 1) as f64 * probe_cost + confirm_cost > b + 1e-9)
                && !out.trials.is_empty()
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
                    // What is left once the probes so far and one confirm test are paid.
                    budget_left: budget_left.map(|b| {
                        b - (out.probes - out.free_probes) as f64 * probe_cost
                            - input.parts.cost(input.parts.confirm_ids.len())
                    }),
                };
                let Some(proposed) = proposers.iter_mut().find_map(|p| p.ask(&ask, plan, &node)) else {
                    continue;
                };
                proposed
            };
            // A searched candidate is the round's one candidate.
            let searched = matches!(proposed, Proposed::Candidate { known: Some(_), .. });
            if matches!(proposed, Proposed::Blocked { .. }) {
                if blocked >= input.opts.candidates {
                    continue;
                }
                blocked += 1;
            }
            if matches!(proposed, Proposed::Candidate { .. }) {
                attempts += 1;
                if attempts > 3 * input.opts.candidates {
                    break;
                }
            }
            let screen = Screen {
                round,
                schema: self.schema,
                backend: self.backend,
                served: &observed.artifact,
                served_results: search_results,
                replay: input.replay,
                effects: &past.effects,
                rejected_moves: &past.rejected_moves,
                delta1: cfg.gates.delta1,
                probe_ids: &probe_ids,
                served_on_probe,
            };
            let produces = self.trial(plan, proposed, &screen, history, &mut out, progress);
            produced += usize::from(produces);
            if searched {
                break;
            }
        }
        out
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
        let (value, mut changes, data, known) = match proposed {
            Proposed::Failed { reason } => {
                say(&id, None, Step::Errored { reason: reason.clone() });
                let reason = format!("the evolver failed: {reason}");
                out.trials.push(Trial::stopped(base, node, Outcome::Errored, StoppedBy::Errored, reason));
                return false;
            }
            Proposed::Blocked { reason } => {
                let verdict = gates::critic_blocked(&plan.path, &reason);
                out.escalations.extend(escalate(&mut node, round, verdict.reason.clone()));
                say(&id, None, Step::Blocked { reason });
                let record = CandidateRecord { critic: Some(verdict.clone()), ..base };
                history.tree.insert(node.key.clone(), node.clone());
                let by = StoppedBy::Critic(CriticLabel::OutOfScope);
                out.trials.push(Trial::stopped(record, node, Outcome::Blocked, by, verdict.reason));
                return false;
            }
            Proposed::Exhausted { reason } => {
                node.exhaust();
                say(&format!("r{round}"), None, Step::Exhausted { reason });
                history.tree.insert(node.key.clone(), node);
                return false;
            }
            Proposed::Candidate { value, changes, data, known } => (value, changes, data, known),
        };
        let change = changes.remove(0);
        let more = changes.len();
        let hash = crate::artifact::content_hash(&value);
        let mut record = CandidateRecord {
            hash: Some(hash.clone()),
            change: Some(change.clone()),
            document: Some(value.clone()),
            more_changes: changes,
            ..base
        };
        let candidate = screen::Candidate {
            id: &id,
            value: &value,
            hash: &hash,
            change: &change,
            motivation: &plan.motivation,
            hypothesis: history.tree.get(&plan.key),
            data: data.as_ref(),
        };
        let searched = known.is_some();
        let screened = screen::screen(screen, &candidate, &mut record, &mut history.seen);
        let stop = match screened {
            Screened::Passed { candidate, probe_delta } => {
                say(&id, Some((&change, more)), Step::Passed { probe_delta });
                out.passed.push((out.trials.len(), probe_delta));
                out.trials.push(Trial { record, artifact: Some(*candidate), full: None, known, node, feedback: None });
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

    /// Stage 2: the confirm part for the best probes only (largest probe
    /// delta, then the earliest; at most `gates.full_tests_per_round`, fixed
    /// before the probe ran), each one LORD++ test at the alpha it is given.
    fn full_tests(
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
        let base: Vec<stats::Outcome> = base_results.iter().map(stats::Outcome::from).collect();
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
    fn compare(
        &self,
        input: &RoundInput<'_>,
        base: &[stats::Outcome],
        base_summary: &EvalSummary,
        t: &mut Trial,
        confirm: &mut ConfirmState,
    ) {
        let gates = &self.project.config.gates;
        let full = t.full.as_ref().expect("fully evaluated");
        let cand: Vec<stats::Outcome> = full.iter().map(stats::Outcome::from).collect();
        let alpha = confirm.lord.next_alpha();
        let config = stats::CompareConfig {
            thresholds: stats::Thresholds { alpha, epsilon_c: gates.epsilon_c, cost_bound: gates.cost_bound },
            bootstrap: stats::BootstrapConfig {
                unit: stats::BootstrapUnit::Question,
                resamples: gates.bootstrap_resamples as u32,
                seed: self.project.config.loop_.seed.wrapping_add(input.round),
                // Two-sided at 1 - 2 alpha: its lower end is the one-sided 1 - alpha bound.
                level: (1.0 - 2.0 * alpha).clamp(0.5, 0.999_999),
            },
        };
        let cand_summary = summarize(full);
        let cost = match (base_summary.mean_context_tokens, cand_summary.mean_context_tokens) {
            (Some(b), Some(c)) => Some(stats::Cost { baseline_mean_tokens: b, candidate_mean_tokens: c }),
            _ => None,
        };
        let cmp = match stats::compare(base, &cand, &config, cost.as_ref()) {
            Ok(cmp) => cmp,
            Err(e) => return t.error(format!("paired comparison failed: {e}")),
        };
        let (improved, regressed) = (cmp.paired.improved().len() as u64, cmp.paired.regressed().len() as u64);
        let n = cmp.paired.n() as u64;
        let test = stats::better_test(improved, regressed, n, alpha);
        let lord = confirm.lord.test(test.p_value);
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
        let cluster = stats::cluster_check(diffs, alpha);
        let mut extra = vec![confirm_rule(&test)];
        if gates.cluster_check == ClusterMode::Require {
            extra.push(cluster_rule(&cluster));
        }
        extra.extend(start_rules(input.start, &cand_summary, gates.epsilon_c));
        if let (Some(bound), Some(v1), Some(c)) =
            (gates.cost_bound_v1, input.start.mean_context_tokens, cand_summary.mean_context_tokens)
        {
            extra.push(cost_v1_rule(v1, c, bound));
        }
        t.record.delta = Some(cmp.paired.delta());
        t.record.alpha = Some(alpha);
        t.record.full = Some(FullRecord::confirm(&cmp, &extra, test, lord, cluster));
    }

    /// The round's records before the decision's own events: evaluations of
    /// fully evaluated candidates, the touched hypotheses, escalations and
    /// every gate record.
    fn batch(
        &self,
        events: &mut Vec<Event>,
        s: &Screening,
        completed: Option<&(usize, Vec<QuestionResult>)>,
        tree: &BTreeMap<String, Hypothesis>,
    ) -> Result<()> {
        let (h, d) = (self.backend.harness_hash(), self.backend.dataset_hash());
        // Only a whole-task-set evaluation is journaled as an evaluation: the winner's.
        if let Some((i, results)) = completed
            && let Some(hash) = &s.trials[*i].record.hash
        {
            events.push(evaluated_event(hash, &h, &d, results));
        }
        let touched: BTreeSet<&str> = s.trials.iter().map(|t| t.node.key.as_str()).collect();
        let before = self.store().tree()?;
        for (k, node) in tree {
            if touched.contains(k.as_str()) || before.get(k) != Some(node) {
                events.push(Event::HypothesisUpdated { node: node.clone() });
            }
        }
        events.extend(s.escalations.iter().cloned());
        events.extend(s.trials.iter().map(|t| Event::CandidateJudged(Box::new(t.record.clone()))));
        Ok(())
    }

    /// Appends the round (its records, the decision's events and the round
    /// summary) in one batch, then rewrites the served file when it changed.
    /// Returns the number of full evaluations and the hooks that failed.
    #[allow(clippy::too_many_arguments)]
    fn apply(
        &mut self,
        input: &RoundInput<'_>,
        mut events: Vec<Event>,
        s: &Screening,
        decision: &Decision,
        best: &Best,
        rejected_by: &BTreeMap<String, u64>,
        split: SplitRecord,
        evaluations_used: f64,
    ) -> Result<(u64, Vec<String>)> {
        let observed = input.observed;
        let winner = decision.winner.map(|w| {
            let t = &s.trials[w.trial];
            let a = t.artifact.as_ref().expect("the winner keeps its artifact");
            (a.hash.clone(), strip_metadata(&a.value), t.record.reason.clone())
        });
        let stamp = Stamp { who: who(), at: now_rfc3339() };
        events.extend(decide::events(
            decision,
            input.round,
            observed.version,
            winner.as_ref().map(|(hash, doc, note)| (Applied { hash, document: doc }, note.as_str())),
            best,
            &stamp,
        ));
        let serving = Serving { version: observed.version, accuracy: observed.summary.accuracy, pinned: false };
        let (served_version, served_accuracy) = decision.served_after(serving);
        let full_evals = s.trials.iter().filter(|t| t.full.is_some()).count() as u64;
        events.push(Event::RoundFinished(Box::new(RoundRecord {
            round: input.round,
            served_version_before: observed.version,
            served_version_after: served_version,
            served_accuracy,
            best_version: Some(decision.best.version),
            best_accuracy: Some(decision.best.accuracy),
            // A pending winner is not served: the round accepted nothing into service.
            accepted: decision.winner.filter(|_| !decision.pending).map(|w| s.trials[w.trial].record.id.clone()),
            candidates: s.trials.len(),
            probe_evaluations: s.probes as usize,
            full_evaluations: full_evals as usize,
            rejected_by: rejected_by.iter().map(|(k, v)| (k.clone(), *v as usize)).collect(),
            diagnosis: layer_a::diagnose(&input.parts.search_of(&observed.results), 0).counts,
            alpha: s.alpha,
            at: stamp.at.clone(),
            llm: match (self.backend.models(), input.usage_before) {
                (Some(m), Some(before)) => llm::usage_since(&m.usage(), before),
                _ => llm::Usage::new(),
            },
            split: Some(split),
            evaluations_used,
        })));
        self.log.append(events.iter().map(Event::to_new).collect())?;
        // One hook run per round for the net change of the served version.
        let mut hook_failures = Vec::new();
        if let Some(r) = &decision.restore {
            let (a, parent) = self.load_version(r.to)?;
            write_served(self.project, r.to, parent, &best.hash, &strip_metadata(&a.value))?;
            let change = crate::hooks::Change::AutoRestore;
            hook_failures.extend(crate::hooks::on_served(
                self.project,
                &mut *self.log,
                Some(observed.version),
                r.to,
                &best.hash,
                change,
            ));
        } else if let (Some(w), Some((hash, doc, _)), false) = (&decision.winner, &winner, decision.pending) {
            write_served(self.project, w.version, Some(observed.version), hash, doc)?;
            let change = crate::hooks::Change::Accepted;
            hook_failures.extend(crate::hooks::on_served(
                self.project,
                &mut *self.log,
                Some(observed.version),
                w.version,
                hash,
                change,
            ));
        }
        if let (Some(w), Some((hash, _, _)), true) = (&decision.winner, &winner, decision.pending) {
            let (served_now, _) = decision.served_after(serving);
            hook_failures.extend(crate::hooks::on_pending(
                self.project,
                &mut *self.log,
                w.version,
                observed.version,
                hash,
                served_now,
            ));
        }
        Ok((full_evals, hook_failures))
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

/// Writes the decision into the candidates' records and teaches the tree:
/// every evaluated candidate's hypothesis learns its delta, and an acceptance
/// reopens every other direction. Returns the round's counts by stage.
fn learn(trials: &mut [Trial], decision: &Decision, tree: &mut BTreeMap<String, Hypothesis>) -> BTreeMap<String, u64> {
    for (i, verdict) in &decision.verdicts {
        apply_verdict(&mut trials[*i].record, verdict);
    }
    let mut rejected_by: BTreeMap<String, u64> = BTreeMap::new();
    for t in trials.iter_mut() {
        if let Some(r) = &t.record.rejected_by {
            *rejected_by.entry(r.to_string()).or_default() += 1;
        }
        if let Some(delta) = t.feedback.or(t.record.delta) {
            t.node.record(delta, t.record.outcome == Outcome::Accepted);
        }
        tree.insert(t.node.key.clone(), t.node.clone());
    }
    if let Some(w) = decision.winner {
        let accepted_key = trials[w.trial].node.key.clone();
        for (k, node) in tree.iter_mut() {
            if *k != accepted_key {
                node.reopen();
            }
        }
    }
    rejected_by
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_confirm_rule_is_the_exact_test_at_its_alpha() {
        let pass = confirm_rule(&stats::better_test(9, 0, 170, 0.0152));
        assert!(pass.pass && pass.name == Rule::ConfirmBetter && pass.value < 0.0152);
        // 7 improved, 0 regressed: p = 1/128 = 0.0078 passes at 0.0152 but not at 0.005.
        assert!(confirm_rule(&stats::better_test(7, 0, 170, 0.0152)).pass);
        assert!(!confirm_rule(&stats::better_test(7, 0, 170, 0.005)).pass);
        assert!(!confirm_rule(&stats::better_test(5, 5, 170, 0.2)).pass);
    }

    #[test]
    fn too_few_clusters_fail_a_required_cluster_check() {
        let diffs: Vec<(&str, i8)> = (0..60).map(|i| (["a", "b", "c"][i % 3], 1)).collect();
        let r = cluster_rule(&stats::cluster_check(diffs, 0.05));
        assert!(!r.pass && r.detail.contains("too few"), "{r:?}");
    }

    #[test]
    fn the_cost_bound_against_v1_is_relative_growth() {
        assert!(cost_v1_rule(100.0, 150.0, 0.5).pass);
        assert!(!cost_v1_rule(100.0, 151.0, 0.5).pass);
        assert!(cost_v1_rule(100.0, 80.0, 0.0).pass);
    }
}
