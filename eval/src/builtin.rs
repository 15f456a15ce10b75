//! The built-in memory QA harness as a [`Backend`]: in process, or sharded
//! as `emend worker` commands on Ray (`harness.executor: ray`), with the
//! model roles plugged in and Layer A's labels on every failure.

use std::sync::Arc;

use crate::backend::{Backend, BackendError};
use crate::llm::advice::{self, SplitCase};
use crate::llm::pipeline;
use crate::llm::{Models, Role};
use emend_core::artifact::{Artifact, sha256_hex};
use emend_core::config::Project;
use emend_core::layer_a::{self, Label};
use emend_core::outcome::{BackendOutcome, Evaluation};
use emend_core::setup::{SetupError, load_tasks_limited, with_minilm, with_stage_cache};

/// The harness hash a project's journal records for the built-in harness:
/// `base` (the evaluator's own, its model roles plugged in, before MiniLM is
/// installed), then the classifier's identity, the configured
/// `harness.version` (so a changed system is noticed even when the locked
/// settings are the same) and the MiniLM model's id, each when there is one.
/// `emend eval` inside a project prints the same.
pub fn project_harness_hash(
    base: String,
    models: Option<&Models>,
    version: Option<&str>,
    minilm: Option<&str>,
) -> String {
    let classifier = models.and_then(|m| m.identity(Role::Classifier)).map(|c| format!("classifier {c}"));
    [classifier.as_deref(), version, minilm]
        .into_iter()
        .flatten()
        .fold(base, |hash, part| sha256_hex(format!("{hash}\n{part}").as_bytes()))
}

/// The built-in memory QA harness.
pub struct BuiltinBackend {
    evaluator: emend_harness::Evaluator,
    harness_hash: String,
    questions: Vec<(String, String)>,
    version: Option<String>,
    models: Option<Arc<Models>>,
    /// `harness.executor: ray`: shards run `emend worker` as Ray tasks.
    shards: Option<crate::command::CommandBackend>,
}

impl BuiltinBackend {
    pub fn from_project(project: &Project) -> Result<BuiltinBackend, SetupError> {
        let h = &project.config.harness;
        let dataset = load_tasks_limited(&h.tasks, &project.dir, h.max_dataset_bytes())?;
        let settings = emend_harness::HarnessSettings {
            budget_ceiling: h.budget_ceiling,
            judge: Some(h.judge),
            f1_threshold: Some(h.f1_threshold),
            include_adversarial: h.include_adversarial,
            conversations: h.conversations.clone(),
            protocol: h.protocol(),
        };
        let shards = match h.executor {
            emend_core::config::ExecutorChoice::Local => None,
            emend_core::config::ExecutorChoice::Ray => Some(ray_shards(project, &dataset)?),
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
            backend.harness_hash = project_harness_hash(backend.harness_hash, None, None, Some(&m.id()));
        }
        Ok(backend)
    }

    /// Plugs the configured roles into the harness: the extractor, the
    /// answerer (instead of the extractive one) and the LLM judge; the
    /// classifier labels generation errors of full evaluations. Their
    /// identities enter the harness hash.
    pub fn with_models(self, models: Arc<Models>) -> BuiltinBackend {
        let evaluator = pipeline::plug(self.evaluator, &models);
        let harness_hash = project_harness_hash(evaluator.harness_hash(), Some(&models), self.version.as_deref(), None);
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
        dataset: Arc<emend_harness::Dataset>,
        settings: emend_harness::HarnessSettings,
        version: Option<&str>,
    ) -> Result<BuiltinBackend, SetupError> {
        let evaluator = emend_harness::Evaluator::new(dataset, settings)
            .map_err(|e| SetupError::new(format!("harness.conversations: {e}")))?;
        let harness_hash = project_harness_hash(evaluator.harness_hash(), None, version, None);
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

    pub fn evaluator(&self) -> &emend_harness::Evaluator {
        &self.evaluator
    }
}

/// The built-in pipeline as a sharded command (`emend worker`) on Ray.
fn ray_shards(
    project: &Project,
    dataset: &emend_harness::Dataset,
) -> Result<crate::command::CommandBackend, SetupError> {
    let h = &project.config.harness;
    let judge = match h.judge {
        emend_harness::strategy::JudgeKind::Evidence => "evidence",
        emend_harness::strategy::JudgeKind::F1 => "f1",
        emend_harness::strategy::JudgeKind::Temporal => "temporal",
        emend_harness::strategy::JudgeKind::Llm => {
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
    let c = emend_core::config::CommandHarness {
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
        emend_harness::Selection { include_adversarial: h.include_adversarial, conversations: h.conversations.clone() };
    let executor = crate::command::executor_of(project, None)?;
    Ok(crate::command::CommandBackend::new(dataset, &selection, spec, &serde_json::Value::Null, None)?
        .with_executor(executor))
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
        let outcomes = eval.outcomes.iter().map(BackendOutcome::from).collect();
        let mut eval = Evaluation::new(outcomes);
        if subset.is_none() {
            self.classify(&mut eval);
        }
        Ok(eval)
    }
}
