//! `emend eval`: evaluates one strategy on a task set with the built-in
//! harness and prints accuracy, per-category figures, context cost and the
//! unresolved evidence; `--outcomes` writes the per-question traces (JSONL).
//! `--protocol replay` replays conversations with checkpoints (see
//! `emend_harness::replay`): outcomes are then per observation (`<question>@<checkpoint>`),
//! and the report adds accuracy and context tokens by checkpoint and the final accuracy.
//!
//! Standalone (no project, or `--no-project`): no journal is needed, and the
//! harness's model-free components run (extractive answers; a strategy that
//! needs an LLM role is refused as bad input). Inside a project (`--project
//! DIR`, or an `emend.yaml` here or above) the strategy is checked against the
//! project's schema (`harness.schema`), what the flags leave out is the
//! project's harness (its task set, conversations, adversarial questions,
//! judge, F1 threshold, budget ceiling and protocol: the figures the journal
//! records), and its model roles plug in: the extractor, the answerer and the
//! judge (`--judge llm`), with the project's reply cache. It evaluates in
//! process even under `harness.executor: ray` (the same outcomes, without the
//! cluster). A project whose harness is a command evaluates with that command
//! on its own task set ([`command`]).

mod command;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::anyhow;
use emend_harness::strategy::JudgeKind;
use emend_harness::{Category, CategoryScore, Dataset, EvalError, Evaluator, HarnessSettings, PipelineEvaluation};
use serde_json::{Value, json};

use emend_core::config::{HarnessKind, Project};
use emend_eval::llm::{Models, Usage};

use super::{CmdResult, Failure, common, term};
use emend_core::percent::percent;

/// `--judge`: the harness's own judge type, with a line of help per value.
fn judge_parser() -> impl clap::builder::TypedValueParser<Value = JudgeKind> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    let help = |k: JudgeKind| match k {
        JudgeKind::Evidence => "Every resolvable gold evidence turn is in the context (deterministic)",
        JudgeKind::F1 => "Token F1 of the answer against the gold answer, at the strategy's threshold",
        JudgeKind::Llm => "The project's judge model (roles.judge of emend.yaml)",
        JudgeKind::Temporal => {
            "The evidence rule; a context holding a superseded reference version's evidence is wrong"
        }
    };
    PossibleValuesParser::new(JudgeKind::ALL.map(|k| PossibleValue::new(k.as_str()).help(help(k))))
        .map(|s| JudgeKind::parse(&s).expect("one of the possible values"))
}

#[derive(Debug, Clone, clap::Args)]
pub struct EvalArgs {
    /// The strategy file (YAML), checked against the project's schema (`harness.schema`) or the built-in one.
    #[arg(long, value_name = "PATH")]
    strategy: PathBuf,
    /// A LoCoMo-format JSON file, or `builtin` for the embedded synthetic dataset (default: the
    /// project's task set, else builtin). Refused in a project whose harness is a command: it
    /// evaluates on its own task set.
    #[arg(long, value_name = "PATH|builtin")]
    tasks: Option<String>,
    /// Ignore the project (--project, or an emend.yaml here or above): the built-in harness and
    /// schema, without the project's model roles and caches.
    #[arg(long)]
    no_project: bool,
    /// The judge (default: the project's `harness.judge`, else the strategy's `judge.kind`; not with a
    /// command harness, which judges its own answers).
    #[arg(long, value_parser = judge_parser())]
    judge: Option<JudgeKind>,
    /// Keep category 5 (adversarial) questions, excluded by default.
    #[arg(long)]
    include_adversarial: bool,
    /// Only these conversations (sample ids, comma-separated).
    #[arg(long, value_delimiter = ',', value_name = "ID,...")]
    conversations: Option<Vec<String>>,
    /// Write one outcome record per question (JSONL) to this file, atomically.
    #[arg(long, value_name = "OUT.jsonl")]
    outcomes: Option<PathBuf>,
    /// endpoint: every question once, after whole conversations; replay:
    /// longitudinal, a checkpoint after every --every-sessions sessions (built-in harness only).
    /// Default: the project's `harness.protocol`, else endpoint.
    #[arg(long, value_enum)]
    protocol: Option<ProtocolArg>,
    /// Under --protocol replay: sessions between checkpoints (default: the
    /// project's `harness.replay.every_sessions`, else 1).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    every_sessions: Option<u32>,
    /// Print one JSON object instead of the report.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ProtocolArg {
    Endpoint,
    Replay,
}

impl EvalArgs {
    /// Whether the evaluation replays (`--protocol replay`).
    fn replay(&self) -> bool {
        self.protocol == Some(ProtocolArg::Replay)
    }

    /// Sessions between checkpoints under replay.
    fn every(&self) -> u32 {
        self.every_sessions.unwrap_or(1)
    }

    /// These arguments with what they leave out taken from the project's
    /// harness (task set, conversations, adversarial questions, judge,
    /// protocol), so that inside a project `emend eval` measures what the
    /// journal measures. Standalone, they are as given.
    fn with_project_defaults(&self, project: Option<&Project>) -> EvalArgs {
        let mut a = self.clone();
        let Some(p) = project else { return a };
        let h = &p.config.harness;
        if a.tasks.is_none() {
            a.tasks = Some(match h.tasks.as_str() {
                builtin @ emend_harness::dataset::BUILTIN_NAME => builtin.to_string(),
                file => p.dir.join(file).display().to_string(),
            });
            if a.conversations.is_none() {
                a.conversations.clone_from(&h.conversations);
            }
            a.include_adversarial |= h.include_adversarial;
        }
        a.judge = a.judge.or(Some(h.judge));
        if a.protocol.is_none() && h.protocol == emend_core::config::ProtocolChoice::Replay {
            a.protocol = Some(ProtocolArg::Replay);
            a.every_sessions = a.every_sessions.or(Some(h.replay.every_sessions));
        }
        a
    }
}

/// What the arguments resolve to: files read and checked, and the project.
struct Resolved {
    strategy: emend_harness::Strategy,
    strategy_hash: String,
    dataset: Dataset,
    settings: HarnessSettings,
    project: Option<WithModels>,
}

fn resolve(args: &EvalArgs, project: Option<Project>) -> Result<Resolved, Failure> {
    let schema = match &project {
        Some(p) => common::schema(p)?,
        None => emend_core::schema::StrategySchema::builtin(),
    };
    let artifact = emend_core::artifact::load_file(&args.strategy, &schema).map_err(Failure::bad_input)?;
    let strategy = artifact.typed().map_err(Failure::bad_input)?.clone();
    let project = project.map(with_models).transpose()?;
    let tasks = args.tasks.as_deref().unwrap_or(emend_harness::dataset::BUILTIN_NAME);
    let dataset = if tasks == emend_harness::dataset::BUILTIN_NAME {
        Dataset::builtin()
    } else {
        let path = Path::new(tasks);
        // Inside a project, a task set already parsed is decoded from its cache.
        let cache = match &project {
            Some((p, _)) => emend_core::setup::dataset_cache(p).map_err(Failure::failed)?,
            None => None,
        };
        match &cache {
            Some(c) => {
                let limit = project.as_ref().map_or(emend_harness::dataset::DEFAULT_MAX_DATASET_BYTES, |(p, _)| {
                    p.config.harness.max_dataset_bytes()
                });
                emend_harness::dataset::load_path_cached(path, limit, c)
            }
            None => emend_harness::load_path(path),
        }
        .map_err(Failure::bad_input)?
    };
    if let Some(out) = &args.outcomes {
        super::common::check_output_dir("--outcomes", out)?;
    }
    let h = project.as_ref().map(|(p, _)| &p.config.harness);
    let settings = HarnessSettings {
        // A project's locked harness settings are what its journal measured with.
        budget_ceiling: h.map_or(HarnessSettings::default().budget_ceiling, |h| h.budget_ceiling),
        f1_threshold: h.map(|h| h.f1_threshold),
        judge: args.judge,
        include_adversarial: args.include_adversarial,
        conversations: args.conversations.clone(),
        protocol: if args.replay() {
            emend_harness::Protocol::Replay { every_sessions: args.every() }
        } else {
            emend_harness::Protocol::Endpoint
        },
    };
    Ok(Resolved { strategy, strategy_hash: artifact.hash, dataset, settings, project })
}

/// A project and its model roles.
type WithModels = (Project, Option<Arc<Models>>);

/// The project and its model roles.
fn with_models(project: Project) -> Result<WithModels, Failure> {
    let models = Models::from_project(&project).map_err(|e| common::setup_failure(&project, e))?;
    Ok((project, models))
}

/// The project, if there is one (`--project DIR`, or the nearest `emend.yaml`
/// from here up; none with `--no-project`): a command harness evaluates with
/// its command, anything else with the built-in harness.
pub fn run(args: &EvalArgs, project_dir: Option<&Path>) -> CmdResult {
    let start = Instant::now();
    match common::optional_project(project_dir, args.no_project)? {
        Some(p) if p.config.harness.kind == HarnessKind::Command => command::run(args, p, start),
        project => run_builtin(args, project, start),
    }
}

fn run_builtin(args: &EvalArgs, project: Option<Project>, start: Instant) -> CmdResult {
    let args = &args.with_project_defaults(project.as_ref());
    let mut r = resolve(args, project)?;
    let project = r.project.take();
    let models = project.as_ref().and_then(|p| p.1.clone());
    let dataset_hash = r.dataset.hash().to_string();
    let tasks_name = r.dataset.name().to_string();
    let mut evaluator = Evaluator::new(Arc::new(r.dataset), r.settings).map_err(Failure::bad_input)?;
    if let Some(m) = &models {
        evaluator = emend_eval::llm::pipeline::plug(evaluator, m);
    }
    // Inside a project, ingest and index outputs persist in its stage cache.
    if let Some((p, _)) = &project {
        evaluator = emend_core::setup::with_stage_cache(evaluator, p).map_err(Failure::failed)?;
    }
    let base = evaluator.harness_hash();
    evaluator =
        emend_core::setup::with_minilm(evaluator, project.as_ref().map(|p| &p.0)).map_err(Failure::bad_input)?;
    // Inside a project, the hash its journal records for the same harness.
    let harness_hash = match &project {
        Some((p, _)) => emend_eval::builtin::project_harness_hash(
            base,
            models.as_deref(),
            p.config.harness.version.as_deref(),
            evaluator.minilm().map(|m| m.id()).as_deref(),
        ),
        None => evaluator.harness_hash(),
    };
    let live = term::Live::start(
        &format!(
            "evaluating {} on {tasks_name} ({} {})",
            args.strategy.display(),
            evaluator.questions().len(),
            if args.replay() { "observations" } else { "questions" }
        ),
        true,
    );
    let eval = evaluator.evaluate(&r.strategy);
    live.finish();
    let eval = eval.map_err(|e| match e {
        EvalError::NeedsRole { .. }
        | EvalError::NeedsModel { .. }
        | EvalError::Strategy { .. }
        | EvalError::UnknownConversation(_) => Failure::bad_input(anyhow!("{}: {e}", args.strategy.display())),
        other => Failure::failed(other),
    })?;
    if let Some(out) = &args.outcomes {
        let text = emend_harness::outcome::to_jsonl(&eval.outcomes);
        super::common::write_output("--outcomes", out, text.as_bytes())?;
    }
    let elapsed_ms = start.elapsed().as_millis() as u64;
    let hashes = Hashes { strategy: &r.strategy_hash, dataset: &dataset_hash, harness: &harness_hash };
    let usage = models.as_ref().map(|m| m.usage()).unwrap_or_default();
    let lifecycle = args.replay().then(|| {
        let held: std::collections::BTreeSet<&str> = eval.outcomes.iter().map(|o| o.conversation.as_str()).collect();
        let samples: Vec<emend_harness::dataset::Sample> =
            evaluator.dataset().samples().iter().filter(|s| held.contains(s.id.as_str())).cloned().collect();
        emend_harness::replay::Lifecycle::new(args.every(), r.strategy.retrieve.recency_half_life_days, &samples)
            .with_maintenance(&r.strategy.ingest.consolidate)
    });
    if args.json {
        let mut doc = json_report(args, &tasks_name, &eval, &hashes, &usage, elapsed_ms);
        if let Some(l) = &lifecycle {
            doc["lifecycle"] = json!(l);
        }
        super::common::print_json_text(&serde_json::to_string(&doc).expect("a report serializes"));
    } else {
        let mut text = human_report(args, &tasks_name, evaluator.dataset(), &eval, &hashes, &usage, elapsed_ms);
        if let Some(l) = &lifecycle {
            // After the replay line, before the final accuracy.
            let at = text.find("final accuracy").unwrap_or(text.len());
            text.insert_str(at, &format!("lifecycle  {}\n", l.line()));
        }
        print!("{text}");
    }
    let (errors, n) = (eval.summary.errors, eval.summary.n);
    // The process ends here: freeing the dataset, the stage outputs and the
    // traces one allocation at a time would add milliseconds to every run
    // (nothing in them needs a drop: the disk cache was swept by `evaluate`).
    std::mem::forget(eval);
    std::mem::forget(evaluator);
    if errors > 0 {
        // The report is printed; a scheduler still learns that the evaluation is incomplete.
        return Err(Failure::failed(anyhow!(
            "{errors} of {n} questions have no verdict (model calls failed; see `error` in the outcomes)"
        )));
    }
    Ok(emend_core::exit::OK)
}

struct Hashes<'a> {
    strategy: &'a str,
    dataset: &'a str,
    harness: &'a str,
}

fn json_report(
    args: &EvalArgs,
    tasks: &str,
    e: &PipelineEvaluation,
    h: &Hashes<'_>,
    usage: &Usage,
    elapsed_ms: u64,
) -> Value {
    let s = &e.summary;
    let doc = json!({
        "strategy": args.strategy.display().to_string(),
        "tasks": tasks,
        "n": s.n,
        "correct": s.correct,
        "accuracy": s.accuracy,
        "per_category": s.per_category,
        "mean_context_tokens": s.mean_context_tokens,
        "unresolved_evidence": s.unresolved_evidence,
        "unresolved_evidence_ids": s.unresolved_evidence_ids,
        "without_evidence": s.without_evidence,
        "errors": s.errors,
        "strategy_hash": h.strategy,
        "dataset_hash": h.dataset,
        "harness_hash": h.harness,
        "harness_version": emend_harness::HARNESS_VERSION,
        "memory": e.memory,
        "cache": e.cache,
        "outcomes": args.outcomes.as_ref().map(|p| p.display().to_string()),
        "llm": usage,
        "elapsed_ms": elapsed_ms,
    });
    let mut doc = doc;
    if args.replay() {
        // Under replay, n, correct and accuracy count observations.
        doc["protocol"] = json!("replay");
        doc["every_sessions"] = json!(args.every());
        doc["checkpoints"] = json!(e.checkpoints());
        doc["final_accuracy"] = json!(e.final_accuracy());
        doc["probes"] = json!(probes(e));
    } else {
        doc["protocol"] = json!("endpoint");
    }
    doc
}

/// The questions a replay observed.
fn probes(e: &PipelineEvaluation) -> usize {
    e.outcomes.iter().map(|o| emend_harness::replay::probe_of(&o.id)).collect::<std::collections::BTreeSet<_>>().len()
}

fn human_report(
    args: &EvalArgs,
    tasks: &str,
    dataset: &Dataset,
    e: &PipelineEvaluation,
    h: &Hashes<'_>,
    usage: &Usage,
    elapsed_ms: u64,
) -> String {
    let s = &e.summary;
    let conversations: std::collections::BTreeSet<&str> = e.outcomes.iter().map(|o| o.conversation.as_str()).collect();
    let mut out = String::new();
    out += &format!("strategy   {}  (sha256 {})\n", args.strategy.display(), &h.strategy[..12]);
    out += &format!(
        "tasks      {tasks}: {} {} in {} of {} conversations  (sha256 {})\n",
        s.n,
        if args.replay() { "observations" } else { "questions" },
        conversations.len(),
        dataset.samples().len(),
        &h.dataset[..12]
    );
    out += &format!("harness    {}  (sha256 {})\n\n", emend_harness::HARNESS_VERSION, &h.harness[..12]);
    if args.replay() {
        let cps = e.checkpoints();
        out += &format!(
            "replay     {} checkpoints (every {} sessions), {} probes, {} observations\n",
            cps.len(),
            args.every(),
            probes(e),
            s.n
        );
        out += &format!(
            "final accuracy   {}  (each probe's last observation)\n\n",
            percent(e.final_accuracy().unwrap_or(0.0), 1)
        );
        let rows = cps
            .iter()
            .map(|c| {
                vec![
                    c.checkpoint.to_string(),
                    c.probes.to_string(),
                    c.correct.to_string(),
                    percent(c.accuracy, 1),
                    format!("{:.1}", c.mean_context_tokens),
                ]
            })
            .collect();
        out += &term::table(
            &["checkpoint", "probes", "correct", "accuracy", "context tokens"],
            rows,
            &[true, true, true, true, true],
        );
        out += "\n(below: over all observations)\n";
    }
    out += &figures(s.accuracy, s.correct, s.n, &s.per_category);
    out += &format!("mean context tokens   {:.1}\n", s.mean_context_tokens);
    out += &format!(
        "unresolved evidence   {} questions ({} ids); {} without any resolvable evidence\n",
        s.unresolved_evidence, s.unresolved_evidence_ids, s.without_evidence
    );
    let m = &e.memory;
    out += &format!(
        "memory items          {} ({} too short, {} near-duplicates, {} over the session cap)\n",
        m.items, m.too_short, m.duplicates, m.over_cap
    );
    if m.retired > 0 {
        out += &format!(
            "retired               {} items (ingest.consolidate, over the whole history)
",
            m.retired
        );
    }
    if s.errors > 0 {
        out += &format!("errors                {} questions (model calls failed)\n", s.errors);
    }
    for (role, u) in usage {
        out += &format!(
            "model {role:<15} {} requests, {} cache hits, {} prompt + {} completion tokens, {} errors\n",
            u.requests, u.cache_hits, u.prompt_tokens, u.completion_tokens, u.errors
        );
    }
    out += &format!("time                  {:.2} s\n", elapsed_ms as f64 / 1000.0);
    if let Some(p) = &args.outcomes {
        out += &format!("outcomes              {}\n", p.display());
    }
    out
}

/// The accuracy line and the per-category table (LoCoMo's order, 1 to 5, not
/// the map's alphabetical one), each followed by a blank line.
fn figures(accuracy: f64, correct: usize, n: usize, per_category: &BTreeMap<String, CategoryScore>) -> String {
    let mut out = format!("accuracy   {}  ({correct}/{n})\n\n", percent(accuracy, 1));
    let rows = Category::ALL
        .iter()
        .filter_map(|c| per_category.get(c.name()).map(|cs| (c, cs)))
        .map(|(c, cs)| vec![c.name().to_string(), cs.n.to_string(), cs.correct.to_string(), percent(cs.accuracy, 1)])
        .collect();
    out += &term::table(&["category", "n", "correct", "accuracy"], rows, &[false, true, true, true]);
    out += "\n";
    out
}
