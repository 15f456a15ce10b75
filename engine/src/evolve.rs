//! The evolution loop: Observe -> Improve -> Verify -> Decide, one round at a
//! time. A round computes a decision from frozen records (the pure modules:
//! Layer A, planner, gates, critic, statistics), then applies it in one
//! journal batch followed by the atomic rewrite of the served file. A round
//! is all or nothing: a process killed mid-round leaves the journal as it was
//! after the previous round, and the next run redoes the round identically.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use journal::{EventLog, JournalError};
use serde::Serialize;
use serde_json::{Value, json};

use crate::artifact::{self, Artifact};
use crate::backend::{Backend, BackendError};
use crate::config::Project;
use crate::events::{CandidateRecord, EvalSummary, Event, QuestionResult, RoundRecord, now_rfc3339, who};
use crate::gates::{self, CriticInput, DataText, GateInput, Replay};
use crate::hypothesis::Hypothesis;
use crate::layer_a::{self, Diagnosis};
use crate::llm::{self, Role, advice};
use crate::outcome::Evaluation;
use crate::planner::{self, PlannerSettings, Proposal};
use crate::schema::StrategySchema;
use crate::stats;
use crate::store::{Best, Recorded, Store, StoreError};

/// Why a run could not go on.
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
    #[error("{0}")]
    BadInput(String),
    #[error("{0}")]
    Io(String),
}

pub type Result<T> = std::result::Result<T, EvolveError>;

/// A line of progress for the terminal.
#[derive(Debug, Clone)]
pub enum Progress {
    Observed { round: u64, version: u64, accuracy: f64, reused: bool },
    Candidate { round: u64, id: String, summary: String },
    Decided { round: u64, line: String },
}

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
}

/// Per-question results of an evaluation, with Layer A labels.
pub fn question_results(eval: &Evaluation) -> Vec<QuestionResult> {
    eval.outcomes
        .iter()
        .map(|o| QuestionResult {
            id: o.id.clone(),
            category: o.category.clone(),
            conversation: o.conversation.clone(),
            correct: o.correct,
            label: layer_a::label(o).map(|l| l.as_str().to_string()),
            tokens: o.context_tokens,
            split: eval.splits.get(&o.id).cloned(),
        })
        .collect()
}

pub fn summarize(results: &[QuestionResult]) -> EvalSummary {
    let n = results.len();
    let correct = results.iter().filter(|q| q.correct).count();
    let mut per_category: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for q in results {
        let e = per_category.entry(q.category.clone()).or_default();
        e.0 += 1;
        e.1 += usize::from(q.correct);
    }
    let tokens: Option<Vec<f64>> = results.iter().map(|q| q.tokens).collect();
    let mean_context_tokens = tokens.filter(|t| !t.is_empty()).map(|t| t.iter().sum::<f64>() / t.len() as f64);
    EvalSummary {
        n,
        correct,
        accuracy: if n == 0 { 0.0 } else { correct as f64 / n as f64 },
        per_category,
        mean_context_tokens,
    }
}

/// The diagnosis of recorded results (labels only; examples by id order).
pub fn diagnose_results(results: &[QuestionResult], examples: usize) -> Diagnosis {
    let mut d = Diagnosis { n: results.len(), ..Diagnosis::default() };
    for q in results {
        let Some(l) = &q.label else { continue };
        d.failures += 1;
        *d.counts.entry(l.clone()).or_default() += 1;
        *d.by_category.entry(q.category.clone()).or_default().entry(l.clone()).or_default() += 1;
        let ex = d.examples.entry(l.clone()).or_default();
        if ex.len() < examples {
            ex.push(q.id.clone());
        }
        if let Some(split) = &q.split {
            *d.splits.entry(split.clone()).or_default() += 1;
        }
    }
    d
}

fn stats_outcomes(results: &[QuestionResult]) -> Vec<stats::Outcome> {
    results
        .iter()
        .map(|q| stats::Outcome {
            id: q.id.clone(),
            conversation: q.conversation.clone(),
            category: q.category.clone(),
            correct: q.correct,
        })
        .collect()
}

/// Header written above the served strategy.
pub fn served_header(version: u64, hash: &str) -> String {
    format!(
        "emend served strategy v{version} (content hash {hash}).\n\
         Written by emend from its journal. Do not edit by hand: use `emend rollback`,\n\
         `emend restore-best` or `emend evolve`; a hand edit is detected and refused."
    )
}

/// Loads a journaled document as an artifact.
pub fn artifact_of(schema: &StrategySchema, hash: &str, doc: Value) -> Result<Artifact> {
    artifact::from_value(&format!("journal strategy {:.12}", hash), doc, schema)
        .map_err(|e| EvolveError::BadInput(e.to_string()))
}

/// Writes the served file for `version`.
pub fn write_served(project: &Project, version: u64, parent: Option<u64>, hash: &str, doc: &Value) -> Result<()> {
    let path = project.strategy_path();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| EvolveError::Io(format!("{}: {e}", dir.display())))?;
    }
    let text = artifact::render_yaml(doc, Some(version), parent, &served_header(version, hash));
    artifact::write_atomic(&path, text.as_bytes()).map_err(|e| EvolveError::Io(format!("{}: {e}", path.display())))
}

/// What the served file holds compared with the journal.
#[derive(Debug, Clone, PartialEq)]
pub enum FileState {
    Consistent,
    Missing,
    /// It holds another journaled version (a crash between journal and file write leaves this).
    Stale {
        holds: u64,
    },
    HandEdited {
        file_hash: String,
    },
    Unreadable {
        reason: String,
    },
}

pub fn served_file_state<L: EventLog + ?Sized>(
    project: &Project,
    schema: &StrategySchema,
    log: &L,
) -> Result<FileState> {
    let store = Store::new(log);
    let Some(served) = store.served()? else { return Ok(FileState::Consistent) };
    let path = project.strategy_path();
    if !path.exists() {
        return Ok(FileState::Missing);
    }
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => return Ok(FileState::Unreadable { reason: e.to_string() }),
    };
    let value = match artifact::parse_yaml(&text) {
        Ok(v) => v,
        Err(_) => {
            return Ok(FileState::HandEdited { file_hash: artifact::sha256_hex(text.as_bytes()) });
        }
    };
    let _ = schema;
    let file_hash = artifact::content_hash(&value);
    if file_hash == served.hash {
        return Ok(FileState::Consistent);
    }
    if let Some(v) = store.versions()?.into_iter().find(|v| v.hash == file_hash) {
        return Ok(FileState::Stale { holds: v.version });
    }
    Ok(FileState::HandEdited { file_hash })
}

/// Makes the served file agree with the journal, or refuses a hand edit.
pub fn reconcile_served_file<L: EventLog + ?Sized>(project: &Project, schema: &StrategySchema, log: &L) -> Result<()> {
    let store = Store::new(log);
    let Some(served) = store.served()? else { return Ok(()) };
    match served_file_state(project, schema, log)? {
        FileState::Consistent => Ok(()),
        FileState::Missing | FileState::Stale { .. } => {
            let state = served_file_state(project, schema, log)?;
            tracing::warn!(
                "{}: {:?}; rewriting it from the journal (v{})",
                project.strategy_path().display(),
                state,
                served.version
            );
            let info = store.version(served.version)?.ok_or_else(|| missing(served.version))?;
            let doc = store.document(&served.hash)?.ok_or_else(|| missing(served.version))?;
            write_served(project, served.version, info.parent, &served.hash, &doc)
        }
        FileState::HandEdited { file_hash } | FileState::Unreadable { reason: file_hash } => {
            Err(EvolveError::HandEdited {
                file: project.strategy_path().display().to_string(),
                file_hash,
                version: served.version,
                served_hash: served.hash,
            })
        }
    }
}

fn missing(version: u64) -> EvolveError {
    EvolveError::Store(StoreError::Corrupt(format!("version v{version} has no stored document")))
}

/// Creates the journal's first version from `artifact` when the journal is empty.
pub fn initialize<L: EventLog + ?Sized>(log: &mut L, artifact: &Artifact, note: &str) -> Result<bool> {
    if Store::new(log).served()?.is_some() {
        return Ok(false);
    }
    let doc = strip_metadata(&artifact.value);
    let events = [
        Event::StrategyVersioned {
            version: 1,
            parent: None,
            hash: artifact.hash.clone(),
            document: doc,
            origin: "init".into(),
            round: None,
            note: note.to_string(),
        },
        Event::ServedChanged {
            from: None,
            to: 1,
            hash: artifact.hash.clone(),
            cause: "init".into(),
            reason: note.to_string(),
            who: who(),
            pinned: false,
            best_version: None,
            best_accuracy: None,
            at: now_rfc3339(),
        },
    ];
    log.append(events.iter().map(Event::to_new).collect())?;
    Ok(true)
}

pub fn strip_metadata(v: &Value) -> Value {
    let mut doc = v.clone();
    if let Some(m) = doc.as_object_mut() {
        for k in artifact::METADATA_KEYS {
            m.remove(k);
        }
    }
    doc
}

/// Settings of a run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub rounds: u32,
    pub candidates: usize,
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
    parent: Option<u64>,
    artifact: Artifact,
    results: Vec<QuestionResult>,
    summary: EvalSummary,
    reused: bool,
}

struct Trial {
    record: CandidateRecord,
    artifact: Option<Artifact>,
    full: Option<Vec<QuestionResult>>,
    node: Hypothesis,
    /// Stats of the full test, filled after all probes of the round.
    comparison: Option<stats::Comparison>,
    extra_rules: Vec<Value>,
}

/// Records a critic's rejection; an out-of-scope one counts toward escalation.
fn critic_rejection(
    record: &mut CandidateRecord,
    node: &mut Hypothesis,
    verdict: &gates::CriticVerdict,
    round: u64,
    escalations: &mut Vec<Event>,
) {
    record.rejected_by = Some(format!("critic:{}", verdict.label.as_str()));
    record.reason = verdict.reason.clone();
    if verdict.label == gates::CriticLabel::OutOfScope && node.block() {
        escalations.push(Event::Escalated { class: node.key.clone(), round, reasons: vec![verdict.reason.clone()] });
    }
}

impl Trial {
    /// A candidate stopped before the full test (or never proposed).
    fn stopped(record: CandidateRecord, node: Hypothesis) -> Trial {
        Trial { record, artifact: None, full: None, node, comparison: None, extra_rules: vec![] }
    }
}

impl<'a, L: EventLog + ?Sized> Evolution<'a, L> {
    fn store(&self) -> Store<'_, L> {
        Store::new(&*self.log)
    }

    /// The recorded evaluation of a strategy under the current harness and
    /// dataset, evaluating (and journaling) it when there is none.
    fn ensure_evaluated(
        &mut self,
        artifact: &Artifact,
    ) -> std::result::Result<(Vec<QuestionResult>, bool), EvolveError> {
        let (h, d) = (self.backend.harness_hash(), self.backend.dataset_hash());
        if let Some(rec) = self.store().evaluation(&artifact.hash, &h, &d)? {
            return Ok((rec.questions, true));
        }
        let eval = self
            .backend
            .evaluate(artifact, None)
            .map_err(|source| EvolveError::Served { version: artifact.version.unwrap_or(0), source })?;
        if let Some(o) = eval.outcomes.iter().find(|o| o.error.is_some()) {
            let source = BackendError(format!(
                "{} of {} questions could not be evaluated (first: {}: {})",
                eval.errors(),
                eval.n(),
                o.id,
                o.error.as_deref().unwrap_or("")
            ));
            return Err(EvolveError::Served { version: artifact.version.unwrap_or(0), source });
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

    fn observe(&mut self, round: u64) -> Result<Observed> {
        let served =
            self.store().served()?.ok_or_else(|| EvolveError::BadInput("the journal has no served strategy".into()))?;
        let (artifact, parent) = self.load_version(served.version)?;
        let (results, reused) = self.ensure_evaluated(&artifact).map_err(|e| match e {
            EvolveError::Served { source, .. } => EvolveError::Served { version: served.version, source },
            other => other,
        })?;
        let _ = round;
        let summary = summarize(&results);
        Ok(Observed { version: served.version, parent, artifact, results, summary, reused })
    }

    /// Re-evaluates the served strategy and compares with its record.
    fn replay(&self, observed: &Observed) -> Result<Replay> {
        let eval = self
            .backend
            .evaluate(&observed.artifact, None)
            .map_err(|source| EvolveError::Served { version: observed.version, source })?;
        let fresh = question_results(&eval);
        let recorded: BTreeMap<&str, bool> = observed.results.iter().map(|q| (q.id.as_str(), q.correct)).collect();
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
        Ok(Replay { mismatches, n: fresh.len(), example })
    }

    /// The best-ever pointer under the current harness and dataset; when they
    /// changed, every version is re-scored first (cheap with the stage cache).
    fn ensure_best(&mut self, observed: &Observed) -> Result<(Best, Vec<Event>)> {
        let (h, d) = (self.backend.harness_hash(), self.backend.dataset_hash());
        if let Some(best) = self.store().best()?
            && best.harness_hash == h
            && best.dataset_hash == d
        {
            return Ok((best, vec![]));
        }
        let mut best: Option<(u64, String, f64)> = None;
        for info in self.store().versions()? {
            let accuracy = if info.hash == observed.artifact.hash {
                observed.summary.accuracy
            } else {
                let (a, _) = self.load_version(info.version)?;
                let (results, _) = self.ensure_evaluated(&a).map_err(|e| match e {
                    EvolveError::Served { source, .. } => EvolveError::Served { version: info.version, source },
                    other => other,
                })?;
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

    /// Runs `opts.rounds` rounds (or fewer when nothing is left to try).
    pub fn run(&mut self, opts: &RunOptions, progress: &mut dyn FnMut(Progress)) -> Result<RunSummary> {
        let started = Instant::now();
        reconcile_served_file(self.project, self.schema, &*self.log)?;
        let mut summary = RunSummary::default();
        let mut start: Option<EvalSummary> = None;
        let mut replay: Option<Replay> = None;
        for _ in 0..opts.rounds {
            let usage_before = self.backend.models().map(|m| m.usage());
            let round = self.store().last_round()? + 1;
            let observed = self.observe(round)?;
            progress(Progress::Observed {
                round,
                version: observed.version,
                accuracy: observed.summary.accuracy,
                reused: observed.reused,
            });
            if start.is_none() {
                summary.first_round = round;
                summary.start_accuracy = observed.summary.accuracy;
                // The anchor of the per-category floor is the journal's first
                // version, not this invocation's start, so that a resumed run
                // decides exactly as an uninterrupted one.
                let (root, _) = self.load_version(1)?;
                let (results, _) = self.ensure_evaluated(&root)?;
                start = Some(summarize(&results));
            }
            if replay.is_none() {
                replay = Some(self.replay(&observed)?);
            }
            let outcome = self.round(
                round,
                &observed,
                start.as_ref().expect("set above"),
                replay.as_ref().expect("set above"),
                opts,
                usage_before.as_ref(),
                progress,
            )?;
            summary.rounds += 1;
            summary.last_round = round;
            summary.candidates += outcome.candidates;
            summary.full_evaluations += outcome.full;
            summary.probe_evaluations += outcome.probes;
            summary.escalations += outcome.escalations;
            for (k, v) in outcome.rejected_by {
                *summary.rejected_by.entry(k).or_default() += v;
            }
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
        let store = self.store();
        let served = store.served()?.ok_or_else(|| missing(0))?;
        summary.served_version = served.version;
        let (h, d) = (self.backend.harness_hash(), self.backend.dataset_hash());
        summary.served_accuracy = store.evaluation(&served.hash, &h, &d)?.map_or(0.0, |r| r.summary.accuracy);
        if let Some(best) = store.best()? {
            summary.best_version = best.version;
            summary.best_accuracy = best.accuracy;
        }
        if summary.rounds == 0 {
            summary.start_accuracy = summary.served_accuracy;
        }
        summary.elapsed_ms = started.elapsed().as_millis() as u64;
        Ok(summary)
    }

    #[allow(clippy::too_many_arguments)]
    fn round(
        &mut self,
        round: u64,
        observed: &Observed,
        start: &EvalSummary,
        replay: &Replay,
        opts: &RunOptions,
        usage_before: Option<&llm::Usage>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<RoundOutcome> {
        let cfg = &self.project.config;
        let (best, mut events) = self.ensure_best(observed)?;
        let store = self.store();
        let mut tree = store.tree()?;
        let effects = store.effects()?;
        let mut seen = store.seen_hashes()?;
        let rejected_moves = store.rejected_moves()?;
        let served_pointer = store.served()?.ok_or_else(|| missing(observed.version))?;

        let diagnosis = diagnose_results(&observed.results, 5);
        let plans = planner::plan(
            self.schema,
            &diagnosis,
            &tree,
            &effects,
            PlannerSettings { ucb_c: cfg.loop_.ucb_c, ..PlannerSettings::default() },
        );
        let roles = self.backend.roles();
        let questions = self.backend.questions();
        let seed = cfg.loop_.seed;
        let probe_ids =
            gates::probe_sample(&questions, cfg.gates.probe_size, seed ^ round.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let served_on_probe: usize = {
            let probe: BTreeSet<&str> = probe_ids.iter().map(String::as_str).collect();
            observed.results.iter().filter(|q| probe.contains(q.id.as_str()) && q.correct).count()
        };

        let mut trials: Vec<Trial> = Vec::new();
        let mut probe_passed: Vec<(usize, f64)> = Vec::new();
        let mut escalations: Vec<Event> = Vec::new();
        let mut probes = 0u64;
        let (mut produced, mut blocked, mut attempts) = (0usize, 0usize, 0usize);
        for plan in &plans {
            if produced >= opts.candidates {
                break;
            }
            let mut node = tree.get(&plan.key).cloned().unwrap_or_else(|| Hypothesis::new(&plan.path, plan.direction));
            let id = format!("r{round}c{}", trials.len() + 1);
            let base = CandidateRecord {
                id: id.clone(),
                round,
                hash: None,
                parent_version: observed.version,
                parent_hash: observed.artifact.hash.clone(),
                hypothesis: plan.key.clone(),
                change: None,
                document: None,
                motivation: plan.motivation.clone(),
                actionability: plan.actionability,
                ucb: if plan.ucb.is_finite() { plan.ucb } else { -1.0 },
                gates: vec![],
                critic: None,
                probe: None,
                full: None,
                outcome: "rejected".into(),
                rejected_by: None,
                reason: String::new(),
                delta: None,
                alpha: None,
                accepted_version: None,
            };
            // A rewrite goes to the evolver model when there is one; its patch is
            // judged like any candidate (`data`: the dataset text it saw).
            let (proposal, data) = match self.model_rewrite(plan, observed, &node, &roles) {
                None => {
                    (planner::evolve(self.schema, &observed.artifact.value, plan, tree.get(&plan.key), &roles), None)
                }
                Some(Ok((proposal, data))) => (proposal, Some(data)),
                Some(Err(reason)) => {
                    progress(Progress::Candidate {
                        round,
                        id: id.clone(),
                        summary: format!("{}: errored ({reason})", plan.key),
                    });
                    let record = CandidateRecord {
                        outcome: "errored".into(),
                        rejected_by: Some("errored".into()),
                        reason: format!("the evolver failed: {reason}"),
                        ..base
                    };
                    trials.push(Trial::stopped(record, node));
                    continue;
                }
            };
            let (value, change) = match proposal {
                Proposal::Blocked { reason } => {
                    if blocked >= opts.candidates {
                        continue;
                    }
                    blocked += 1;
                    let verdict = gates::critic_blocked(&plan.path, &reason);
                    if node.block() {
                        escalations.push(Event::Escalated {
                            class: plan.key.clone(),
                            round,
                            reasons: vec![verdict.reason.clone()],
                        });
                    }
                    progress(Progress::Candidate {
                        round,
                        id: id.clone(),
                        summary: format!("{}: blocked, out of scope ({reason})", plan.key),
                    });
                    let record = CandidateRecord {
                        outcome: "blocked".into(),
                        rejected_by: Some("critic:out_of_scope".into()),
                        reason: verdict.reason.clone(),
                        critic: Some(verdict),
                        ..base
                    };
                    tree.insert(node.key.clone(), node.clone());
                    trials.push(Trial::stopped(record, node));
                    continue;
                }
                Proposal::Exhausted { reason } => {
                    node.exhaust();
                    progress(Progress::Candidate {
                        round,
                        id: format!("r{round}"),
                        summary: format!("{}: exhausted ({reason})", plan.key),
                    });
                    tree.insert(node.key.clone(), node);
                    continue;
                }
                Proposal::Candidate { value, change } => (*value, change),
            };
            attempts += 1;
            if attempts > 3 * opts.candidates {
                break;
            }
            let hash = artifact::content_hash(&value);
            let mut record = CandidateRecord {
                hash: Some(hash.clone()),
                change: Some(change.clone()),
                document: Some(value.clone()),
                ..base
            };
            let gate_results = gates::run_gates(&GateInput {
                schema: self.schema,
                served: &observed.artifact.value,
                candidate: &value,
                candidate_hash: &hash,
                seen: &seen,
                hypothesis: tree.get(&plan.key),
                replay,
                data: data.as_ref(),
            });
            seen.insert(hash.clone());
            let failed = gate_results.iter().find(|g| !g.pass).cloned();
            record.gates = gate_results;
            let line = format!("{} {} -> {}", change.path, change.from, change.to);
            if let Some(g) = &failed
                && g.gate == gates::Gate::Novelty
            {
                // Nothing new in this direction from the served strategy: do not
                // spend a candidate slot on it, and do not propose it again.
                node.exhaust();
                tree.insert(node.key.clone(), node.clone());
            } else {
                produced += 1;
            }
            if let Some(g) = failed {
                record.rejected_by = Some(format!("gate:{}", g.gate.as_str()));
                record.reason = g.detail.clone();
                // A model's proposal stopped by a gate counts toward escalation.
                if data.is_some() && g.gate != gates::Gate::Novelty && node.block() {
                    escalations.push(Event::Escalated {
                        class: plan.key.clone(),
                        round,
                        reasons: vec![format!("the evolver's proposal failed gate {}: {}", g.gate.as_str(), g.detail)],
                    });
                }
                progress(Progress::Candidate {
                    round,
                    id: id.clone(),
                    summary: format!("{line}: rejected at gate {}", g.gate.as_str()),
                });
                trials.push(Trial::stopped(record, node));
                continue;
            }
            let field = self.schema.field(&change.path);
            let verdict = gates::critic(&CriticInput {
                change: &change,
                max_delta: field.and_then(|f| f.max_delta),
                effect: effects.get(&change.path),
                rejected_moves: &rejected_moves,
                motivation: &plan.motivation,
                delta1: cfg.gates.delta1,
            });
            let tolerance = verdict.probe_tolerance;
            let critic_rejects = verdict.reject;
            record.critic = Some(verdict.clone());
            if critic_rejects {
                critic_rejection(&mut record, &mut node, &verdict, round, &mut escalations);
                progress(Progress::Candidate {
                    round,
                    id: id.clone(),
                    summary: format!("{line}: rejected by the critic ({})", verdict.label.as_str()),
                });
                tree.insert(node.key.clone(), node.clone());
                trials.push(Trial::stopped(record, node));
                continue;
            }
            let candidate = match artifact::from_value(&id, value.clone(), self.schema) {
                Ok(a) => a,
                Err(e) => {
                    record.outcome = "errored".into();
                    record.rejected_by = Some("errored".into());
                    record.reason = e.to_string();
                    trials.push(Trial::stopped(record, node));
                    continue;
                }
            };
            // Stage 1: the probe.
            probes += 1;
            let probe = match self.backend.evaluate(&candidate, Some(&probe_ids)) {
                Ok(eval) => eval,
                Err(e) => {
                    record.outcome = "errored".into();
                    record.rejected_by = Some("errored".into());
                    record.reason = format!("probe evaluation failed: {e}");
                    progress(Progress::Candidate { round, id: id.clone(), summary: format!("{line}: errored ({e})") });
                    trials.push(Trial::stopped(record, node));
                    continue;
                }
            };
            if probe.outcomes.iter().any(|o| o.error.is_some()) || probe.n() != probe_ids.len() {
                record.outcome = "errored".into();
                record.rejected_by = Some("errored".into());
                record.reason = format!(
                    "probe evaluation incomplete: {} of {} questions answered",
                    probe.outcomes.iter().filter(|o| o.error.is_none()).count(),
                    probe_ids.len()
                );
                trials.push(Trial::stopped(record, node));
                continue;
            }
            let pv = gates::probe_verdict(served_on_probe, probe.correct(), probe_ids.len(), tolerance);
            record.delta = Some(pv.delta);
            let pass = pv.pass;
            record.probe = Some(pv.clone());
            if !pass {
                record.rejected_by = Some("probe".into());
                record.reason = format!(
                    "probe accuracy {:.3} vs served {:.3} on {} questions: below the tolerance {:.3}",
                    pv.candidate_accuracy, pv.served_accuracy, pv.n, pv.tolerance
                );
                progress(Progress::Candidate {
                    round,
                    id: id.clone(),
                    summary: format!("{line}: rejected by the probe ({:+.3})", pv.delta),
                });
                trials.push(Trial::stopped(record, node));
                continue;
            }
            // The critic model's second opinion, now that the probe is known: it may only reject.
            if let Some(models) = self.backend.models().filter(|m| m.has(Role::Critic)) {
                let (improved, regressed) = probe_examples(&observed.results, &probe);
                let input = advice::ReviewInput {
                    change: &change,
                    field,
                    effect: effects.get(&change.path),
                    motivation: &plan.motivation,
                    probe: &pv,
                    improved: &improved,
                    regressed: &regressed,
                    rules: &verdict,
                };
                match advice::review(models, &input) {
                    Ok(v) => {
                        let reject = v.reject;
                        record.critic = Some(v.clone());
                        if reject {
                            critic_rejection(&mut record, &mut node, &v, round, &mut escalations);
                            progress(Progress::Candidate {
                                round,
                                id: id.clone(),
                                summary: format!("{line}: rejected by the critic model ({})", v.label.as_str()),
                            });
                            trials.push(Trial::stopped(record, node));
                            continue;
                        }
                    }
                    Err(e) => {
                        record.outcome = "errored".into();
                        record.rejected_by = Some("errored".into());
                        record.reason = format!("the critic failed: {e}");
                        trials.push(Trial::stopped(record, node));
                        continue;
                    }
                }
            }
            // Stage 2 comes after every probe of the round: only the best
            // probes spend the round's alpha on a full test.
            progress(Progress::Candidate {
                round,
                id: id.clone(),
                summary: format!("{line}: probe {:+.3}, passed", pv.delta),
            });
            probe_passed.push((trials.len(), pv.delta));
            trials.push(Trial {
                record,
                artifact: Some(candidate),
                full: None,
                node,
                comparison: None,
                extra_rules: vec![],
            });
        }

        // Stage 2: the full set, for the best probes only (largest probe delta, then the earliest).
        probe_passed.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let limit = cfg.gates.full_tests_per_round.max(1);
        for (rank, &(i, delta)) in probe_passed.iter().enumerate() {
            let t = &mut trials[i];
            if rank >= limit {
                t.record.rejected_by = Some("probe:not_selected".into());
                t.record.reason = format!(
                    "the probe passed ({delta:+.3}) but {limit} other candidate(s) of the round probed better; \
                     only the best {limit} reach the full test (gates.full_tests_per_round)"
                );
                t.artifact = None;
                continue;
            }
            let candidate = t.artifact.as_ref().expect("probe-passed trials keep their artifact");
            match self.backend.evaluate(candidate, None) {
                Ok(eval) if eval.outcomes.iter().all(|o| o.error.is_none()) && eval.n() == observed.results.len() => {
                    t.full = Some(question_results(&eval));
                    progress(Progress::Candidate {
                        round,
                        id: t.record.id.clone(),
                        summary: "full evaluation done".to_string(),
                    });
                }
                Ok(eval) => {
                    t.record.outcome = "errored".into();
                    t.record.rejected_by = Some("errored".into());
                    t.record.reason = format!(
                        "full evaluation incomplete: {} of {} questions answered",
                        eval.outcomes.iter().filter(|o| o.error.is_none()).count(),
                        observed.results.len()
                    );
                    t.artifact = None;
                }
                Err(e) => {
                    t.record.outcome = "errored".into();
                    t.record.rejected_by = Some("errored".into());
                    t.record.reason = format!("full evaluation failed: {e}");
                    t.artifact = None;
                }
            }
        }

        // Stage 2 statistics: the round's alpha split over the candidates that reached it.
        let full_count = trials.iter().filter(|t| t.full.is_some()).count() as u64;
        let alpha = cfg.gates.alpha_schedule.alpha_per_candidate(
            cfg.gates.alpha,
            round.min(u64::from(u32::MAX)) as u32,
            full_count.max(1) as u32,
        );
        let base = stats_outcomes(&observed.results);
        let served_tokens = observed.summary.mean_context_tokens;
        for t in trials.iter_mut().filter(|t| t.full.is_some()) {
            let full = t.full.as_ref().expect("filtered");
            let cand = stats_outcomes(full);
            let config = stats::CompareConfig {
                thresholds: stats::Thresholds {
                    alpha,
                    epsilon_c: cfg.gates.epsilon_c,
                    cost_bound: cfg.gates.cost_bound,
                },
                bootstrap: stats::BootstrapConfig {
                    unit: cfg.gates.bootstrap_unit,
                    resamples: cfg.gates.bootstrap_resamples as u32,
                    seed: seed.wrapping_add(round),
                    level: 0.95,
                },
            };
            let cand_summary = summarize(full);
            let cost = match (served_tokens, cand_summary.mean_context_tokens) {
                (Some(b), Some(c)) => Some(stats::Cost { baseline_mean_tokens: b, candidate_mean_tokens: c }),
                _ => None,
            };
            match stats::compare(&base, &cand, &config, cost.as_ref()) {
                Ok(cmp) => {
                    t.extra_rules = start_rules(start, &cand_summary, cfg.gates.epsilon_c);
                    t.record.delta = Some(cmp.paired.delta());
                    t.record.alpha = Some(alpha);
                    t.comparison = Some(cmp);
                }
                Err(e) => {
                    t.record.outcome = "errored".into();
                    t.record.rejected_by = Some("errored".into());
                    t.record.reason = format!("paired comparison failed: {e}");
                    t.full = None;
                }
            }
        }
        // Decide: the passing candidate with the largest paired delta (then the earliest).
        let mut winner: Option<usize> = None;
        for (i, t) in trials.iter().enumerate() {
            let Some(cmp) = &t.comparison else { continue };
            let extra_ok = t.extra_rules.iter().all(|r| r["pass"] == json!(true));
            if cmp.verdict.accept && extra_ok {
                let better = winner.is_none_or(|w| {
                    cmp.paired.delta() > trials[w].comparison.as_ref().expect("winner compared").paired.delta()
                });
                if better {
                    winner = Some(i);
                }
            }
        }
        let next_version = self.store().max_version()? + 1;
        let mut rejected_by: BTreeMap<String, u64> = BTreeMap::new();
        for (i, t) in trials.iter_mut().enumerate() {
            if let Some(cmp) = &t.comparison {
                t.record.full = Some(full_json(cmp, &t.extra_rules, alpha));
                if Some(i) == winner {
                    t.record.outcome = "accepted".into();
                    t.record.rejected_by = None;
                    t.record.accepted_version = Some(next_version);
                    t.record.reason = format!("accepted as v{next_version}: paired delta {:+.4}", cmp.paired.delta());
                } else if cmp.verdict.accept && t.extra_rules.iter().all(|r| r["pass"] == json!(true)) {
                    t.record.rejected_by = Some("full:not_best".into());
                    t.record.reason = "passed every rule, but another candidate of the round gained more".into();
                } else {
                    let mut failed: Vec<String> = cmp.verdict.failed().map(|r| r.name.name().to_string()).collect();
                    failed.extend(
                        t.extra_rules
                            .iter()
                            .filter(|r| r["pass"] != json!(true))
                            .map(|r| r["name"].as_str().unwrap_or("rule").to_string()),
                    );
                    failed.dedup();
                    t.record.rejected_by = Some(format!("full:{}", failed.first().cloned().unwrap_or_default()));
                    t.record.reason = format!("failed rule(s): {}", failed.join(", "));
                }
            }
            if let Some(r) = &t.record.rejected_by {
                *rejected_by.entry(r.clone()).or_default() += 1;
            }
            // The hypothesis learns from every evaluated candidate.
            if let Some(delta) = t.record.delta {
                t.node.record(delta, t.record.outcome == "accepted");
            }
            tree.insert(t.node.key.clone(), t.node.clone());
        }
        let accepted = winner.map(|_| next_version);
        if let Some(w) = winner {
            let accepted_key = trials[w].node.key.clone();
            for (k, node) in tree.iter_mut() {
                if *k != accepted_key {
                    node.reopen();
                }
            }
        }

        // The batch: evaluations of fully evaluated candidates, every gate
        // record, the touched hypotheses, escalations, the new version.
        let (h, d) = (self.backend.harness_hash(), self.backend.dataset_hash());
        for t in &trials {
            if let (Some(full), Some(hash)) = (&t.full, &t.record.hash) {
                events.push(evaluated_event(hash, &h, &d, full));
            }
        }
        let full_evals = trials.iter().filter(|t| t.full.is_some()).count() as u64;
        let touched: BTreeSet<String> = trials.iter().map(|t| t.node.key.clone()).collect();
        let before = self.store().tree()?;
        for (k, node) in &tree {
            if touched.contains(k) || before.get(k) != Some(node) {
                events.push(Event::HypothesisUpdated { node: node.clone() });
            }
        }
        let escalation_count = escalations.len() as u64;
        events.extend(escalations);
        for t in &trials {
            events.push(Event::CandidateJudged(Box::new(t.record.clone())));
        }
        let mut served_after = (
            observed.version,
            observed.summary.accuracy,
            observed.artifact.hash.clone(),
            observed.artifact.value.clone(),
            observed.parent,
        );
        let mut best_after = best.clone();
        if let Some(w) = winner {
            let t = &trials[w];
            let a = t.artifact.as_ref().expect("winner has an artifact");
            let acc = summarize(t.full.as_ref().expect("winner evaluated")).accuracy;
            let doc = strip_metadata(&a.value);
            events.push(Event::StrategyVersioned {
                version: next_version,
                parent: Some(observed.version),
                hash: a.hash.clone(),
                document: doc.clone(),
                origin: "accepted".into(),
                round: Some(round),
                note: t.record.reason.clone(),
            });
            if acc > best.accuracy {
                best_after = Best {
                    version: next_version,
                    hash: a.hash.clone(),
                    accuracy: acc,
                    harness_hash: h.clone(),
                    dataset_hash: d.clone(),
                };
                events.push(Event::BestChanged {
                    version: next_version,
                    hash: a.hash.clone(),
                    accuracy: acc,
                    harness_hash: h.clone(),
                    dataset_hash: d.clone(),
                });
            }
            events.push(Event::ServedChanged {
                from: Some(observed.version),
                to: next_version,
                hash: a.hash.clone(),
                cause: "accept".into(),
                reason: format!("round {round}: {}", t.record.reason),
                who: who(),
                pinned: false,
                best_version: Some(best_after.version),
                best_accuracy: Some(best_after.accuracy),
                at: now_rfc3339(),
            });
            served_after = (next_version, acc, a.hash.clone(), doc, Some(observed.version));
        }
        // Best-ever auto-restore, whatever the round decided (not while an operator pinned the served version).
        let mut restored = false;
        let pinned = served_pointer.pinned && winner.is_none();
        if !pinned
            && served_after.1 < best_after.accuracy - cfg.gates.tau_rollback
            && best_after.version != served_after.0
        {
            let (best_art, best_parent) = self.load_version(best_after.version)?;
            events.push(Event::ServedChanged {
                from: Some(served_after.0),
                to: best_after.version,
                hash: best_after.hash.clone(),
                cause: "auto_restore".into(),
                reason: format!(
                    "served v{} scores {:.4}, more than tau {} below the best-ever v{} ({:.4})",
                    served_after.0, served_after.1, cfg.gates.tau_rollback, best_after.version, best_after.accuracy
                ),
                who: who(),
                pinned: false,
                best_version: Some(best_after.version),
                best_accuracy: Some(best_after.accuracy),
                at: now_rfc3339(),
            });
            served_after = (
                best_after.version,
                best_after.accuracy,
                best_after.hash.clone(),
                strip_metadata(&best_art.value),
                best_parent,
            );
            restored = true;
        }
        let diag_counts = diagnosis.counts.clone();
        events.push(Event::RoundFinished(Box::new(RoundRecord {
            round,
            served_version_before: observed.version,
            served_version_after: served_after.0,
            served_accuracy: served_after.1,
            best_version: Some(best_after.version),
            best_accuracy: Some(best_after.accuracy),
            accepted: winner.map(|w| trials[w].record.id.clone()),
            candidates: trials.len(),
            probe_evaluations: probes as usize,
            full_evaluations: full_evals as usize,
            rejected_by: rejected_by.iter().map(|(k, v)| (k.clone(), *v as usize)).collect(),
            diagnosis: diag_counts,
            alpha,
            at: now_rfc3339(),
            llm: match (self.backend.models(), usage_before) {
                (Some(m), Some(before)) => llm::usage_since(&m.usage(), before),
                _ => llm::Usage::new(),
            },
        })));
        self.log.append(events.iter().map(Event::to_new).collect())?;
        if winner.is_some() || restored {
            write_served(self.project, served_after.0, served_after.4, &served_after.2, &served_after.3)?;
        }
        let line = match (winner, restored) {
            (Some(w), _) => format!(
                "round {round}: accepted {} as v{} ({:+.4}), served accuracy {:.4}",
                trials[w].record.id,
                next_version,
                trials[w].record.delta.unwrap_or(0.0),
                served_after.1
            ),
            (None, true) => format!("round {round}: nothing accepted; restored best-ever v{}", served_after.0),
            (None, false) => format!("round {round}: nothing accepted ({} candidates)", trials.len()),
        };
        progress(Progress::Decided { round, line });
        Ok(RoundOutcome {
            candidates: trials.len() as u64,
            probes,
            full: full_evals,
            accepted,
            restored,
            rejected_by,
            escalations: escalation_count,
        })
    }
}

/// Up to three improved and three regressed questions of a probe, for the critic.
fn probe_examples(served: &[QuestionResult], probe: &Evaluation) -> (Vec<advice::Example>, Vec<advice::Example>) {
    let was: BTreeMap<&str, bool> = served.iter().map(|q| (q.id.as_str(), q.correct)).collect();
    let pick = |want: bool| {
        probe
            .outcomes
            .iter()
            .filter(|o| was.get(o.id.as_str()).is_some_and(|&w| w != want) && o.correct == want)
            .take(3)
            .map(advice::Example::of)
            .collect::<Vec<_>>()
    };
    (pick(true), pick(false))
}

/// Sets `path` in a copy of `doc`, creating the objects on the way, so that
/// even a patch to a path the schema does not know reaches the gates.
fn apply_patch(doc: &Value, path: &str, value: Value) -> Value {
    let mut out = doc.clone();
    let mut slot = &mut out;
    for key in path.split('.') {
        if !slot.is_object() {
            *slot = Value::Object(Default::default());
        }
        slot = slot.as_object_mut().expect("an object").entry(key.to_string()).or_insert(Value::Null);
    }
    *slot = value;
    out
}

impl<L: EventLog + ?Sized> Evolution<'_, L> {
    /// Asks the evolver model to rewrite a text field, when the direction is a
    /// rewrite, roles.evolver is configured and the field's own role exists.
    /// The examples are failed questions of the served strategy (re-evaluated
    /// on just those ids, cheap with the caches); their text is what the gates
    /// later check the proposal against. None: the planner's own evolver moves.
    fn model_rewrite(
        &self,
        plan: &planner::Plan,
        observed: &Observed,
        node: &Hypothesis,
        roles: &[String],
    ) -> Option<std::result::Result<(Proposal, DataText), String>> {
        let models = self.backend.models().filter(|m| m.has(Role::Evolver))?;
        let field = self.schema.field(&plan.path).filter(|f| f.kind == crate::schema::FieldKind::Text)?;
        if plan.direction != crate::schema::Direction::Rewrite
            || field.needs_role.as_ref().is_some_and(|r| !roles.contains(r))
        {
            return None;
        }
        let current = crate::schema::get_path(&observed.artifact.value, &plan.path).and_then(Value::as_str)?;
        let mut ids: Vec<String> = observed
            .results
            .iter()
            .filter(|q| q.label.as_ref().is_some_and(|l| plan.motivation.contains_key(l)))
            .map(|q| (q.split.as_deref() != Some("full_coverage"), q.id.clone()))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(|(_, id)| id)
            .take(6)
            .collect();
        ids.sort();
        let examples: Vec<advice::Example> = if ids.is_empty() {
            Vec::new()
        } else {
            match self.backend.evaluate(&observed.artifact, Some(&ids)) {
                Ok(eval) => eval.outcomes.iter().map(advice::Example::of).collect(),
                Err(e) => return Some(Err(format!("cannot collect examples: {e}"))),
            }
        };
        let splits = diagnose_results(&observed.results, 0).splits;
        let input = advice::RewriteInput {
            field,
            current,
            motivation: &plan.motivation,
            splits: &splits,
            examples: &examples,
            attempt: node.visits + node.blocked,
        };
        let patch = match advice::rewrite(models, &input) {
            Ok(p) => p,
            Err(e) => return Some(Err(e.to_string())),
        };
        let mut data = DataText::new();
        for e in &examples {
            for t in e.texts() {
                data.add(&t);
            }
        }
        let value = apply_patch(&observed.artifact.value, &patch.path, patch.value.clone());
        let from = crate::schema::get_path(&observed.artifact.value, &patch.path).cloned().unwrap_or(Value::Null);
        let change = planner::Change { path: patch.path, from, to: patch.value };
        Some(Ok((Proposal::Candidate { value: Box::new(value), change }, data)))
    }
}

struct RoundOutcome {
    candidates: u64,
    probes: u64,
    full: u64,
    accepted: Option<u64>,
    restored: bool,
    rejected_by: BTreeMap<String, u64>,
    escalations: u64,
}

/// The Evaluated event of a full evaluation.
pub fn evaluated_event(hash: &str, harness: &str, dataset: &str, results: &[QuestionResult]) -> Event {
    Event::Evaluated {
        strategy_hash: hash.to_string(),
        harness_hash: harness.to_string(),
        dataset_hash: dataset.to_string(),
        summary: summarize(results),
        diagnosis: diagnose_results(results, 5),
        questions: results.to_vec(),
    }
}

/// No category may end more than epsilon below the journal's first version.
fn start_rules(start: &EvalSummary, cand: &EvalSummary, epsilon: f64) -> Vec<Value> {
    start
        .per_category
        .iter()
        .map(|(cat, (n, c))| {
            let start_acc = if *n == 0 { 0.0 } else { *c as f64 / *n as f64 };
            let (cn, cc) = cand.per_category.get(cat).copied().unwrap_or((0, 0));
            let cand_acc = if cn == 0 { 0.0 } else { cc as f64 / cn as f64 };
            let delta = cand_acc - start_acc;
            json!({
                "name": "category_vs_first_version",
                "category": cat,
                "value": delta,
                "threshold": -epsilon,
                "pass": delta >= -epsilon - 1e-12,
                "detail": format!("{cat}: {cand_acc:.4} vs {start_acc:.4} for v1 (needs >= -{:.2} pp)", epsilon * 100.0),
            })
        })
        .collect()
}

/// The compact JSON of a full paired comparison kept in the gate record.
fn full_json(cmp: &stats::Comparison, extra: &[Value], alpha: f64) -> Value {
    let p = &cmp.paired;
    let ex = |ids: &[String]| ids.iter().take(20).cloned().collect::<Vec<_>>();
    let mut rules: Vec<Value> =
        cmp.verdict.rules.iter().map(|r| serde_json::to_value(r).expect("rules serialize")).collect();
    rules.extend(extra.iter().cloned());
    let accept = cmp.verdict.accept && extra.iter().all(|r| r["pass"] == json!(true));
    json!({
        "n": p.n(),
        "improved": p.improved().len(),
        "regressed": p.regressed().len(),
        "both_correct": p.both_correct().len(),
        "both_wrong": p.both_wrong().len(),
        "improved_examples": ex(p.improved()),
        "regressed_examples": ex(p.regressed()),
        "base_accuracy": p.base_accuracy(),
        "cand_accuracy": p.cand_accuracy(),
        "delta": p.delta(),
        "ci_low": cmp.bootstrap.low,
        "ci_high": cmp.bootstrap.high,
        "unit": cmp.bootstrap.unit.name(),
        "resamples": cmp.bootstrap.resamples,
        "mcnemar_test": cmp.mcnemar.test,
        "mcnemar_p": cmp.mcnemar.p_value,
        "alpha": alpha,
        "per_category": p.per_category(),
        "rules": rules,
        "accept": accept,
    })
}

/// Applies an operator's rollback (or restore-best) to `target`: journal
/// first, then the file. Returns the record written.
pub fn apply_rollback<L: EventLog + ?Sized>(
    project: &Project,
    schema: &StrategySchema,
    log: &mut L,
    target: u64,
    cause: &str,
    reason: &str,
    pin: bool,
) -> Result<Event> {
    let store = Store::new(&*log);
    let served = store.served()?.ok_or_else(|| EvolveError::BadInput("the journal has no served strategy".into()))?;
    let info = store.version(target)?.ok_or_else(|| {
        EvolveError::BadInput(format!(
            "no version v{target} in the journal (it has v1..v{})",
            store.max_version().unwrap_or(0)
        ))
    })?;
    let doc = store.document(&info.hash)?.ok_or_else(|| missing(target))?;
    let best = store.best()?;
    let event = Event::ServedChanged {
        from: Some(served.version),
        to: target,
        hash: info.hash.clone(),
        cause: cause.to_string(),
        reason: reason.to_string(),
        who: who(),
        pinned: pin,
        best_version: best.as_ref().map(|b| b.version),
        best_accuracy: best.as_ref().map(|b| b.accuracy),
        at: now_rfc3339(),
    };
    let _ = artifact_of(schema, &info.hash, doc.clone())?;
    log.append(vec![event.to_new()])?;
    write_served(project, target, info.parent, &info.hash, &doc)?;
    Ok(event)
}

/// Journals the hand-edited served file as a new version (so nothing is lost).
pub fn journal_hand_edit<L: EventLog + ?Sized>(
    project: &Project,
    schema: &StrategySchema,
    log: &mut L,
) -> Result<Option<u64>> {
    let path = project.strategy_path();
    let a = match artifact::load_file(&path, schema) {
        Ok(a) => a,
        Err(e) => {
            // Keep even an invalid edit, byte for byte, beside the journal.
            let text = std::fs::read(&path).unwrap_or_default();
            let keep = project
                .dir
                .join(crate::config::STATE_DIR)
                .join(format!("hand-edit-{}.yaml", artifact::sha256_hex(&text)));
            artifact::write_atomic(&keep, &text).map_err(|e| EvolveError::Io(format!("{}: {e}", keep.display())))?;
            return Err(EvolveError::BadInput(format!(
                "{e}\nthe edited file is not a valid strategy; it was kept as {}",
                keep.display()
            )));
        }
    };
    let store = Store::new(&*log);
    if store.versions()?.iter().any(|v| v.hash == a.hash) {
        return Ok(None);
    }
    let served = store.served()?.ok_or_else(|| EvolveError::BadInput("the journal has no served strategy".into()))?;
    let version = store.max_version()? + 1;
    let event = Event::StrategyVersioned {
        version,
        parent: Some(served.version),
        hash: a.hash.clone(),
        document: strip_metadata(&a.value),
        origin: "hand_edit".into(),
        round: None,
        note: format!("hand edit of {} found by {}, journaled before it was replaced", path.display(), who()),
    };
    log.append(vec![event.to_new()])?;
    Ok(Some(version))
}

/// A recorded evaluation's summary, for status and reports.
pub fn recorded_accuracy(r: &Recorded) -> f64 {
    r.summary.accuracy
}
