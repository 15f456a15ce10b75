//! `emend worker STRATEGY TASKS OUT`: the built-in pipeline as a shard
//! command of the external harness protocol (`emend-command/1`), so that the
//! built-in harness shards like any command: on local processes or as Ray
//! tasks (`harness.executor: ray`).
//!
//! It reads the strategy (JSON, as the command backend writes it) and a task
//! shard (`schemas/shard.schema.json`), evaluates the shard's questions with
//! the model-free pipeline and writes one outcome per question to OUT, the
//! records `emend eval --outcomes` writes, under the shard's question ids.
//! A shard holds whole conversations, and every stage up to retrieval works
//! per conversation or per question, so the outcomes are those of an
//! in-process evaluation of the whole task set.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context as _, anyhow};
use emend_harness::strategy::JudgeKind;
use emend_harness::{Evaluator, HarnessSettings};
use serde_json::{Value, json};

use super::{CmdResult, Failure};

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum WorkerJudge {
    Evidence,
    F1,
    Temporal,
}

#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// The strategy as JSON (without `version` and `parent` is fine).
    strategy: PathBuf,
    /// A task shard (emend-command/1).
    tasks: PathBuf,
    /// The outcomes file to write (JSONL).
    out: PathBuf,
    /// The locked judge (harness.judge of the project).
    #[arg(long, value_enum, default_value = "evidence")]
    judge: WorkerJudge,
    /// The locked F1 threshold (harness.f1_threshold).
    #[arg(long, default_value_t = 0.5)]
    f1_threshold: f64,
    /// The locked context ceiling (harness.budget_ceiling).
    #[arg(long, default_value_t = emend_harness::DEFAULT_BUDGET_CEILING)]
    budget_ceiling: u32,
}

/// The shard as a LoCoMo document, and the shard's question id of each
/// loaded question id (`<sample_id>#<position in the shard's qa list>`).
fn shard_to_locomo(shard: &Value) -> Result<(String, HashMap<String, String>), String> {
    let protocol = shard.get("protocol").and_then(Value::as_str);
    if protocol != Some(emend_eval::command::PROTOCOL) {
        return Err(format!(
            "field \"protocol\": expected {expected:?}, got {protocol:?}",
            expected = emend_eval::command::PROTOCOL
        ));
    }
    let samples = shard.get("samples").and_then(Value::as_array).ok_or("field \"samples\": expected a list")?;
    let mut ids = HashMap::new();
    let mut docs = Vec::with_capacity(samples.len());
    for (i, s) in samples.iter().enumerate() {
        let sid =
            s.get("sample_id").and_then(Value::as_str).ok_or(format!("samples[{i}].sample_id: expected a string"))?;
        let qa = s.get("qa").and_then(Value::as_array).ok_or(format!("samples[{i}].qa: expected a list"))?;
        for (k, q) in qa.iter().enumerate() {
            let id =
                q.get("id").and_then(Value::as_str).ok_or(format!("samples[{i}].qa[{k}].id: expected a string"))?;
            ids.insert(format!("{sid}#{k}"), id.to_string());
        }
        docs.push(json!({"sample_id": sid, "conversation": s.get("conversation"), "qa": qa}));
    }
    Ok((Value::Array(docs).to_string(), ids))
}

pub fn run(args: &WorkerArgs) -> CmdResult {
    super::common::check_output_dir("OUT", &args.out)?;
    let text = std::fs::read_to_string(&args.strategy)
        .with_context(|| format!("{}: cannot read", args.strategy.display()))
        .map_err(Failure::bad_input)?;
    let strategy: emend_harness::Strategy = emend_harness::strict_json::from_str(&text)
        .map_err(|e| Failure::bad_input(anyhow!("{}: not a built-in strategy: {e}", args.strategy.display())))?;
    let shard_text = std::fs::read_to_string(&args.tasks)
        .with_context(|| format!("{}: cannot read", args.tasks.display()))
        .map_err(Failure::bad_input)?;
    let shard: Value = emend_harness::strict_json::from_str(&shard_text)
        .map_err(|e| Failure::bad_input(anyhow!("{}: not JSON: {e}", args.tasks.display())))?;
    let (locomo, ids) =
        shard_to_locomo(&shard).map_err(|e| Failure::bad_input(anyhow!("{}: {e}", args.tasks.display())))?;
    let dataset = emend_harness::load_str(&args.tasks.display().to_string(), &locomo).map_err(Failure::bad_input)?;
    let settings = HarnessSettings {
        budget_ceiling: args.budget_ceiling,
        judge: Some(match args.judge {
            WorkerJudge::Evidence => JudgeKind::Evidence,
            WorkerJudge::F1 => JudgeKind::F1,
            WorkerJudge::Temporal => JudgeKind::Temporal,
        }),
        f1_threshold: Some(args.f1_threshold),
        // The shard holds only the questions to answer.
        include_adversarial: true,
        conversations: None,
        protocol: emend_harness::Protocol::Endpoint,
    };
    let evaluator = Evaluator::new(Arc::new(dataset), settings).map_err(Failure::bad_input)?;
    // A worker has no project: the model comes from EMEND_MINILM_DIR.
    let evaluator = emend_core::setup::with_minilm(evaluator, None).map_err(Failure::bad_input)?;
    let eval =
        evaluator.evaluate(&strategy).map_err(|e| Failure::bad_input(anyhow!("{}: {e}", args.strategy.display())))?;
    let mut outcomes = eval.outcomes;
    for o in &mut outcomes {
        o.id =
            ids.get(&o.id).cloned().ok_or_else(|| Failure::failed(anyhow!("question {} is not in the shard", o.id)))?;
    }
    let text = emend_harness::outcome::to_jsonl(&outcomes);
    super::common::write_output("OUT", &args.out, text.as_bytes())?;
    Ok(emend_core::exit::OK)
}
