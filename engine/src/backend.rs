//! Evaluation backends: what the loop asks to evaluate a strategy. The
//! built-in harness runs in process; an external system runs as a command
//! (see `command.rs`). The loop sees only this trait (ask/tell), so the
//! evaluator is swappable.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::artifact::{Artifact, sha256_hex};
use crate::config::Project;
use crate::layer_a::{self, Label};
use crate::llm::advice::{self, SplitCase};
use crate::llm::pipeline;
use crate::llm::{Models, Role};
use crate::outcome::{Evaluation, OutcomeRecord};

/// Why an evaluation could not complete. The candidate is rejected as
/// `errored`; for the served strategy the run fails.
///
/// Each message is one line that carries its cause's text as well as keeping
/// the cause as its source: the loop journals an errored candidate's reason as
/// that one line.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The artifact is not a strategy the built-in harness can run.
    #[error(transparent)]
    Strategy(#[from] crate::artifact::ArtifactError),
    /// The built-in harness could not run the evaluation.
    #[error(transparent)]
    Harness(#[from] harness::EvalError),
    /// A subset named a question the task set does not have.
    #[error("question {id} is not in the task set")]
    UnknownQuestion { id: String },
    /// A file of the evaluation's working directory could not be made.
    #[error("{}: {action}: {source}", path.display())]
    Io {
        path: PathBuf,
        action: FileAction,
        #[source]
        source: std::io::Error,
    },
    /// A shard of the external harness failed: the first by shard index; the
    /// others that failed are counted.
    #[error("{failed}{}", crate::command::more_failed_shards(*others))]
    Shard {
        #[source]
        failed: Box<crate::command::ShardFailed>,
        others: usize,
    },
    /// An evaluation returned questions in error, or not one outcome per question asked.
    #[error("{}", incomplete_message(*expected, *got, *answered, first_error.as_ref()))]
    Incomplete {
        /// Questions asked.
        expected: usize,
        /// Outcomes returned.
        got: usize,
        /// Outcomes without an error.
        answered: usize,
        /// The first outcome with an error, in outcome order.
        first_error: Option<QuestionError>,
    },
    /// A stop was requested (a signal, `--preempt`, a closed output) before this evaluation began.
    #[error("not evaluated: the run was asked to stop ({cause})")]
    Interrupted { cause: &'static str },
}

impl BackendError {
    /// `Err(Interrupted)` once the run was asked to stop: backends check it
    /// before each evaluation, so a stop request waits for at most one.
    pub fn unless_stopped() -> Result<(), BackendError> {
        match crate::stop::requested() {
            Some(cause) => Err(BackendError::Interrupted { cause: cause.as_str() }),
            None => Ok(()),
        }
    }
}

fn incomplete_message(expected: usize, got: usize, answered: usize, first_error: Option<&QuestionError>) -> String {
    let mut m = format!("{answered} of {expected} questions answered");
    if got != expected {
        m.push_str(&format!(" ({got} outcomes returned)"));
    }
    if let Some(q) = first_error {
        m.push_str(&format!("; {} could not be evaluated (first: {}: {})", got - answered, q.id, q.error));
    }
    m
}

/// A question whose outcome carries an error, and that error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuestionError {
    pub id: String,
    pub error: String,
}

/// What emend was doing to a file when the file system refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileAction {
    CreateTempDir,
    CreateDir,
    Create,
    Write,
}

impl std::fmt::Display for FileAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FileAction::CreateTempDir => "cannot create a temporary directory",
            FileAction::CreateDir => "cannot create the directory",
            FileAction::Create => "cannot create",
            FileAction::Write => "cannot write",
        })
    }
}

/// Evaluates strategies on a locked task set.
pub trait Backend: Send + Sync {
    /// Identity of the evaluation framework and its locked settings.
    fn harness_hash(&self) -> String;
    /// Identity of the task set.
    fn dataset_hash(&self) -> String;
    /// `(id, category)` of every question of the task set, sorted by id.
    fn questions(&self) -> Vec<(String, String)>;
    /// LLM roles available to strategies (fields with `x-needs-role`), and the
    /// installed models (`minilm`, fields with `x-needs-model`).
    fn roles(&self) -> Vec<String>;
    /// The configured model roles (the loop's critic and evolver live here too).
    fn models(&self) -> Option<&Arc<Models>> {
        None
    }
    /// Evaluates on every question, or on `subset` (sorted ids) for a probe.
    fn evaluate(&self, artifact: &Artifact, subset: Option<&[String]>) -> Result<Evaluation, BackendError>;
}

/// The built-in memory QA harness.
pub struct BuiltinBackend {
    evaluator: harness::Evaluator,
    harness_hash: String,
    questions: Vec<(String, String)>,
    version: Option<String>,
    models: Option<Arc<Models>>,
    /// `harness.executor: ray`: shards run `emend worker` as Ray tasks.
    shards: Option<crate::command::CommandBackend>,
}

impl BackendError {
    /// Describes `eval`, returned for `expected` questions, as incomplete. Whether it
    /// is (an outcome in error, or not one outcome per question) is the caller's test.
    pub fn incomplete(eval: &Evaluation, expected: usize) -> BackendError {
        let first_error = eval
            .outcomes
            .iter()
            .find_map(|o| o.error.as_ref().map(|e| QuestionError { id: o.id.clone(), error: e.clone() }));
        BackendError::Incomplete { expected, got: eval.n(), answered: eval.n() - eval.errors(), first_error }
    }

    /// An evaluation that could not complete is a failed run (exit 1), never bad input:
    /// even an unknown question id is the engine's own subset, not the user's.
    pub fn exit_class(&self) -> journal::ErrorClass {
        match self {
            BackendError::Strategy(_)
            | BackendError::Harness(_)
            | BackendError::UnknownQuestion { .. }
            | BackendError::Io { .. }
            | BackendError::Shard { .. }
            | BackendError::Incomplete { .. }
            | BackendError::Interrupted { .. } => journal::ErrorClass::Failed,
        }
    }
}

/// Why a backend or the model roles could not be set up from the project's
/// configuration: what was wrong (naming the field), and the error beneath
/// it when there is one. Bad input (exit 2).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct SetupError {
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl SetupError {
    pub fn new(message: impl Into<String>) -> SetupError {
        SetupError { message: message.into(), source: None }
    }

    /// `message` says what could not be done; `source` says why.
    pub fn caused(message: impl Into<String>, source: impl std::error::Error + Send + Sync + 'static) -> SetupError {
        SetupError { message: message.into(), source: Some(Box::new(source)) }
    }

    pub fn exit_class(&self) -> journal::ErrorClass {
        journal::ErrorClass::BadInput
    }
}

impl BuiltinBackend {
    pub fn from_project(project: &Project) -> Result<BuiltinBackend, SetupError> {
        let h = &project.config.harness;
        let dataset = load_tasks_limited(&h.tasks, &project.dir, h.max_dataset_bytes())?;
        let settings = harness::HarnessSettings {
            budget_ceiling: h.budget_ceiling,
            judge: Some(h.judge),
            f1_threshold: Some(h.f1_threshold),
            include_adversarial: h.include_adversarial,
            conversations: h.conversations.clone(),
            protocol: h.protocol(),
        };
        let shards = match h.executor {
            crate::config::ExecutorChoice::Local => None,
            crate::config::ExecutorChoice::Ray => Some(ray_shards(project, &dataset)?),
        };
        let backend = BuiltinBackend::new(Arc::new(dataset), settings, h.version.as_deref())?;
        let mut backend: BuiltinBackend = match Models::from_project(project)? {
            Some(models) => {
                if shards.is_some()
                    && let Some(role) =
                        [Role::Extractor, Role::Answerer, Role::Judge].into_iter().find(|r| models.has(*r))
                {
                    return Err(SetupError::new(format!(
                        "harness.executor: ray runs the built-in pipeline without model roles; roles.{} is configured",
                        role.as_str()
                    )));
                }
                backend.with_models(models)
            }
            None => backend,
        };
        backend.shards = shards;
        backend.evaluator = with_stage_cache(backend.evaluator, project)?;
        backend.evaluator = with_minilm(backend.evaluator, Some(project))?;
        // The model's identity is part of the harness's.
        if let Some(m) = backend.evaluator.minilm() {
            backend.harness_hash = sha256_hex(format!("{}\n{}", backend.harness_hash, m.id()).as_bytes());
        }
        Ok(backend)
    }

    /// Plugs the configured roles into the harness: the extractor, the
    /// answerer (instead of the extractive one) and the LLM judge; the
    /// classifier labels generation errors of full evaluations. Their
    /// identities enter the harness hash.
    pub fn with_models(self, models: Arc<Models>) -> BuiltinBackend {
        let evaluator = pipeline::plug(self.evaluator, &models);
        let mut base = evaluator.harness_hash();
        if let Some(classifier) = models.identity(Role::Classifier) {
            base = sha256_hex(format!("{base}\nclassifier {classifier}").as_bytes());
        }
        let harness_hash = match &self.version {
            Some(v) => sha256_hex(format!("{base}\n{v}").as_bytes()),
            None => base,
        };
        BuiltinBackend {
            evaluator,
            harness_hash,
            questions: self.questions,
            version: self.version,
            models: Some(models),
            shards: self.shards,
        }
    }

    pub fn new(
        dataset: Arc<harness::Dataset>,
        settings: harness::HarnessSettings,
        version: Option<&str>,
    ) -> Result<BuiltinBackend, SetupError> {
        let evaluator = harness::Evaluator::new(dataset, settings)
            .map_err(|e| SetupError::new(format!("harness.conversations: {e}")))?;
        let base = evaluator.harness_hash();
        // The configured version string is part of the identity, so a changed
        // system is noticed even when the locked settings are the same.
        let harness_hash = match version {
            Some(v) => sha256_hex(format!("{base}\n{v}").as_bytes()),
            None => base,
        };
        let mut questions: Vec<(String, String)> =
            evaluator.questions().iter().map(|q| (q.id.clone(), q.category.name().to_string())).collect();
        questions.sort();
        Ok(BuiltinBackend {
            evaluator,
            harness_hash,
            questions,
            version: version.map(str::to_string),
            models: None,
            shards: None,
        })
    }

    /// Labels the generation errors of a full evaluation with the classifier;
    /// a failed classification is that question's error.
    fn classify(&self, eval: &mut Evaluation) {
        let Some(models) = self.models.as_ref().filter(|m| m.has(Role::Classifier)) else { return };
        let dataset = self.evaluator.dataset();
        let targets: Vec<usize> = (0..eval.outcomes.len())
            .filter(|&i| {
                eval.outcomes[i].error.is_none() && layer_a::label(&eval.outcomes[i]) == Some(Label::GenerationError)
            })
            .collect();
        let cases: Vec<SplitCase> = targets
            .iter()
            .map(|&i| {
                let o = &eval.outcomes[i];
                let sample = o.conversation.as_deref().and_then(|c| dataset.sample(c));
                let evidence_turns = o
                    .evidence
                    .iter()
                    .flatten()
                    .filter_map(|id| {
                        let s = sample?;
                        let t = s.turn(s.ordinal(id)?);
                        Some(format!("[{}] {}", t.id, t.line()))
                    })
                    .collect();
                SplitCase {
                    question: o.question.clone(),
                    gold_answer: o.gold_answer.clone(),
                    answer: o.answer.clone(),
                    evidence_turns,
                    memory_items: o.answer_coverage.as_ref().map(|c| c.memory.clone()).unwrap_or_default(),
                }
            })
            .collect();
        if cases.is_empty() {
            return;
        }
        for (i, r) in targets.into_iter().zip(advice::classify(models, &cases)) {
            match r {
                Ok(split) => {
                    eval.splits.insert(eval.outcomes[i].id.clone(), split);
                }
                Err(e) => eval.outcomes[i].error = Some(e.to_string()),
            }
        }
    }

    pub fn evaluator(&self) -> &harness::Evaluator {
        &self.evaluator
    }
}

/// Free bytes the caches leave on their file system: the journal's reserve
/// ([`journal::DEFAULT_MIN_FREE_BYTES`], below which it refuses to write) plus
/// [`CACHE_MARGIN_BYTES`] for the journal's own growth, so a cache never locks
/// the project. The one figure every cache (stage, dataset, embedding, model
/// reply) uses.
pub const CACHE_FLOOR_BYTES: u64 = journal::DEFAULT_MIN_FREE_BYTES + CACHE_MARGIN_BYTES;
/// What the caches leave free above the journal's reserve.
pub const CACHE_MARGIN_BYTES: u64 = 8 * 1024 * 1024;

/// The floor every project cache keeps ([`CACHE_FLOOR_BYTES`], by `statvfs`).
pub fn cache_floor() -> harness::space::Floor {
    harness::space::Floor::statvfs(CACHE_FLOOR_BYTES)
}

/// Adds the project's persistent stage cache (`.emend/cache/stages/`, at most
/// `harness.stage_cache_mb`; none when that is 0). Call after plugging in models.
pub fn with_stage_cache(evaluator: harness::Evaluator, project: &Project) -> Result<harness::Evaluator, SetupError> {
    let mb = project.config.harness.stage_cache_mb;
    if mb == 0 {
        return Ok(evaluator);
    }
    let root = project.cache_dir().join("stages");
    evaluator
        .with_disk_cache_floor(&root, mb.saturating_mul(1024 * 1024), cache_floor())
        .map_err(|e| SetupError::new(format!("{}: cannot create the stage cache: {e}", root.display())))
}

/// The project's cache of parsed task sets (`.emend/cache/stages/datasets/`,
/// under the same `harness.stage_cache_mb` bound as the stage cache; none
/// when that is 0): see [`harness::dataset::load_path_cached`].
pub fn dataset_cache(project: &Project) -> Result<Option<harness::cache::DiskCache>, SetupError> {
    let mb = project.config.harness.stage_cache_mb;
    if mb == 0 {
        return Ok(None);
    }
    let root = project.cache_dir().join("stages");
    harness::cache::DiskCache::open_named(&root, "datasets", mb.saturating_mul(1024 * 1024))
        .map(|c| Some(c.with_floor(cache_floor())))
        .map_err(|e| SetupError::new(format!("{}: cannot create the dataset cache: {e}", root.display())))
}

/// Plugs in the MiniLM embedder when a model directory is given:
/// `EMEND_MINILM_DIR` (it wins), else the project's `harness.minilm_dir`
/// (relative to emend.yaml). Inside a project its embeddings are kept in the
/// stage cache's directory (`.emend/cache/stages/minilm-<model hash>/`,
/// under the same size bound); outside one they are not kept. A directory
/// that is given but missing or malformed is bad input, naming the setting
/// and the file. Call after [`with_stage_cache`] or before: they are independent.
pub fn with_minilm(evaluator: harness::Evaluator, project: Option<&Project>) -> Result<harness::Evaluator, SetupError> {
    let configured = project.and_then(|p| p.config.harness.minilm_dir.as_ref().map(|d| p.dir.join(d)));
    let Some((dir, setting)) = harness::minilm::locate(configured) else { return Ok(evaluator) };
    let mut model = harness::minilm::MiniLm::load(&dir).map_err(|e| SetupError::new(format!("{setting}: {e}")))?;
    if let Some(p) = project.filter(|p| p.config.harness.stage_cache_mb > 0) {
        let root = p.cache_dir().join("stages");
        let name = format!("minilm-{}", &model.hash()[..16]);
        let cache = harness::cache::DiskCache::open_named(
            &root,
            &name,
            p.config.harness.stage_cache_mb.saturating_mul(1024 * 1024),
        )
        .map_err(|e| SetupError::new(format!("{}: cannot create the embedding cache: {e}", root.display())))?;
        model = model.with_cache(cache.with_floor(cache_floor()));
    }
    Ok(evaluator.with_minilm(Arc::new(model)))
}

/// The built-in pipeline as a sharded command (`emend worker`) on Ray.
fn ray_shards(project: &Project, dataset: &harness::Dataset) -> Result<crate::command::CommandBackend, SetupError> {
    let h = &project.config.harness;
    let judge = match h.judge {
        harness::strategy::JudgeKind::Evidence => "evidence",
        harness::strategy::JudgeKind::F1 => "f1",
        harness::strategy::JudgeKind::Llm => {
            return Err(SetupError::new("harness.executor: ray runs the built-in pipeline without the llm judge"));
        }
    };
    let emend = match &h.ray.emend {
        Some(e) => e.clone(),
        None => std::env::current_exe()
            .map_err(|e| SetupError::new(format!("harness.ray.emend: cannot find this executable: {e}")))?
            .display()
            .to_string(),
    };
    let argv = [
        &emend,
        "worker",
        "--judge",
        judge,
        "--f1-threshold",
        &h.f1_threshold.to_string(),
        "--budget-ceiling",
        &h.budget_ceiling.to_string(),
        "{strategy}",
        "{tasks}",
        "{out}",
    ];
    let c = crate::config::CommandHarness {
        argv: argv.iter().map(|a| a.to_string()).collect(),
        workdir: None,
        env: Default::default(),
        timeout_secs: h.ray.timeout_secs,
        shards: h.ray.shards,
        concurrency: h.ray.concurrency,
    };
    let spec = crate::command::CommandSpec::from_config(&c, &project.dir)
        .map_err(|e| SetupError::new(e.to_string().replace("harness.command.", "harness.ray.")))?;
    let selection =
        harness::Selection { include_adversarial: h.include_adversarial, conversations: h.conversations.clone() };
    let executor = crate::command::executor_of(project, None)?;
    Ok(crate::command::CommandBackend::new(dataset, &selection, spec, &serde_json::Value::Null, None)?
        .with_executor(executor))
}

/// `builtin` or a LoCoMo-format file (relative paths against `base`).
pub fn load_tasks(tasks: &str, base: &Path) -> Result<harness::Dataset, SetupError> {
    load_tasks_limited(tasks, base, harness::dataset::DEFAULT_MAX_DATASET_BYTES)
}

/// [`load_tasks`] with the size limit of `harness.max_dataset_mb`.
pub fn load_tasks_limited(tasks: &str, base: &Path, limit: u64) -> Result<harness::Dataset, SetupError> {
    if tasks == "builtin" {
        return Ok(harness::Dataset::builtin());
    }
    let path = base.join(tasks);
    harness::dataset::load_path_limited(&path, limit).map_err(|e| SetupError::new(format!("harness.tasks: {e}")))
}

impl Backend for BuiltinBackend {
    fn harness_hash(&self) -> String {
        self.harness_hash.clone()
    }

    fn dataset_hash(&self) -> String {
        self.evaluator.dataset().hash().to_string()
    }

    fn questions(&self) -> Vec<(String, String)> {
        self.questions.clone()
    }

    fn roles(&self) -> Vec<String> {
        let mut roles = self.models.as_ref().map(|m| m.names()).unwrap_or_default();
        // An installed model counts as available like a role (`x-needs-model`).
        if self.evaluator.minilm().is_some() {
            roles.push("minilm".to_string());
        }
        roles
    }

    fn models(&self) -> Option<&Arc<Models>> {
        self.models.as_ref()
    }

    fn evaluate(&self, artifact: &Artifact, subset: Option<&[String]>) -> Result<Evaluation, BackendError> {
        BackendError::unless_stopped()?;
        if let Some(shards) = &self.shards {
            let mut eval = shards.evaluate(artifact, subset)?;
            if subset.is_none() {
                self.classify(&mut eval);
            }
            return Ok(eval);
        }
        let strategy = artifact.typed()?;
        let eval = match subset {
            None => self.evaluator.evaluate(strategy),
            Some(ids) => self.evaluator.evaluate_subset(strategy, ids),
        }?;
        let outcomes = eval.outcomes.iter().map(OutcomeRecord::from).collect();
        let mut eval = Evaluation::new(outcomes);
        if subset.is_none() {
            self.classify(&mut eval);
        }
        Ok(eval)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(id: &str, error: Option<&str>) -> OutcomeRecord {
        let mut o: OutcomeRecord = serde_json::from_value(serde_json::json!({
            "id": id, "conversation": "c", "category": "single-hop", "correct": false
        }))
        .expect("a minimal outcome record");
        o.error = error.map(str::to_string);
        o
    }

    #[test]
    fn an_incomplete_evaluation_says_what_came_back_and_the_first_error() {
        let eval = Evaluation::new(vec![
            outcome("q1", None),
            outcome("q3", Some("roles.judge: HTTP 500")),
            outcome("q2", Some("timeout")),
        ]);
        let e = BackendError::incomplete(&eval, 3);
        assert_eq!(e.to_string(), "1 of 3 questions answered; 2 could not be evaluated (first: q2: timeout)");
        assert_eq!(e.exit_class(), journal::ErrorClass::Failed);
        let short = BackendError::incomplete(&Evaluation::new(vec![outcome("q1", None)]), 2);
        assert_eq!(short.to_string(), "1 of 2 questions answered (1 outcomes returned)");
    }
}
