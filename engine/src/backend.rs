//! Evaluation backends: what the loop asks to evaluate a strategy. The
//! built-in harness runs in process; an external system runs as a command
//! (see `command.rs`). The loop sees only this trait (ask/tell), so the
//! evaluator is swappable.

use std::path::Path;
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
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The artifact is not a strategy the built-in harness can run.
    #[error(transparent)]
    Strategy(#[from] crate::artifact::ArtifactError),
    /// The built-in harness could not run the evaluation.
    #[error(transparent)]
    Harness(#[from] harness::EvalError),
    /// An external harness or a question-level failure, as reported.
    #[error("{0}")]
    Failed(String),
}

/// Evaluates strategies on a locked task set.
pub trait Backend: Send + Sync {
    /// Identity of the evaluation framework and its locked settings.
    fn harness_hash(&self) -> String;
    /// Identity of the task set.
    fn dataset_hash(&self) -> String;
    /// `(id, category)` of every question of the task set, sorted by id.
    fn questions(&self) -> Vec<(String, String)>;
    /// LLM roles available to strategies (fields with `x-needs-role`).
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
}

impl BackendError {
    /// An evaluation that could not complete is a failed run (exit 1), never bad input.
    pub fn exit_class(&self) -> journal::ErrorClass {
        journal::ErrorClass::Failed
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
        let dataset = load_tasks(&h.tasks, &project.dir)?;
        let settings = harness::HarnessSettings {
            budget_ceiling: h.budget_ceiling,
            judge: Some(h.judge),
            f1_threshold: Some(h.f1_threshold),
            include_adversarial: h.include_adversarial,
            conversations: h.conversations.clone(),
        };
        let backend = BuiltinBackend::new(Arc::new(dataset), settings, h.version.as_deref())?;
        match Models::from_project(project)? {
            Some(models) => Ok(backend.with_models(models)),
            None => Ok(backend),
        }
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
        Ok(BuiltinBackend { evaluator, harness_hash, questions, version: version.map(str::to_string), models: None })
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

/// `builtin` or a LoCoMo-format file (relative paths against `base`).
pub fn load_tasks(tasks: &str, base: &Path) -> Result<harness::Dataset, SetupError> {
    if tasks == "builtin" {
        return Ok(harness::Dataset::builtin());
    }
    let path = base.join(tasks);
    harness::load_path(&path).map_err(|e| SetupError::new(format!("harness.tasks: {e}")))
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
        self.models.as_ref().map(|m| m.names()).unwrap_or_default()
    }

    fn models(&self) -> Option<&Arc<Models>> {
        self.models.as_ref()
    }

    fn evaluate(&self, artifact: &Artifact, subset: Option<&[String]>) -> Result<Evaluation, BackendError> {
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
