//! `emend eval` in a project whose harness is a command (`harness.kind:
//! command`): the strategy, checked against the project's schema, is
//! evaluated by the project's backend, every question of the project's task
//! set once, as `emend evolve` evaluates the served strategy.
//!
//! The command reads its own task set and judges its own answers, so
//! `--tasks`, `--judge` and `--protocol replay` are refused, never ignored;
//! `--conversations` and `--include-adversarial` narrow or widen the task set
//! as `harness.conversations` and `harness.include_adversarial` would.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use anyhow::anyhow;
use emend_core::config::Project;
use emend_core::outcome::Evaluation;
use emend_harness::CategoryScore;
use serde_json::{Value, json};

use super::{EvalArgs, figures};
use crate::cli::{CmdResult, Failure, common, term};

pub(super) fn run(args: &EvalArgs, project: Project, start: Instant) -> CmdResult {
    refuse_unhonoured(args, &project)?;
    let project = with_selection(project, args);
    let schema = common::schema(&project)?;
    let artifact = emend_core::artifact::load_file(&args.strategy, &schema).map_err(Failure::bad_input)?;
    if let Some(out) = &args.outcomes {
        common::check_output_dir("--outcomes", out)?;
    }
    let backend = emend_eval::open(&project, &schema).map_err(|e| {
        let class = e.exit_class();
        let context = match &args.conversations {
            Some(c) => format!("{} with --conversations {}", project.config_path().display(), c.join(",")),
            None => project.config_path().display().to_string(),
        };
        common::classified(class, anyhow::Error::new(e).context(context))
    })?;
    let argv = project.config.harness.command.as_ref().map(|c| c.argv.join(" ")).unwrap_or_default();
    let live = term::Live::start(
        &format!("evaluating {} with `{argv}` ({} questions)", args.strategy.display(), backend.questions().len()),
        true,
    );
    let eval = backend.evaluate(&artifact, None);
    live.finish();
    let eval = eval.map_err(|e| {
        let class = e.exit_class();
        common::classified(class, anyhow::Error::new(e).context(format!("evaluating {}", args.strategy.display())))
    })?;
    if let Some(out) = &args.outcomes {
        let text: String =
            eval.outcomes.iter().map(|o| serde_json::to_string(o).expect("an outcome serializes") + "\n").collect();
        common::write_output("--outcomes", out, text.as_bytes())?;
    }
    let report = Report {
        args,
        tasks: &project.config.harness.tasks,
        argv: &argv,
        strategy_hash: &artifact.hash,
        dataset_hash: &backend.dataset_hash(),
        harness_hash: &backend.harness_hash(),
        eval: &eval,
        elapsed_ms: start.elapsed().as_millis() as u64,
    };
    if args.json {
        common::print_json_text(&serde_json::to_string(&report.json()).expect("a report serializes"));
    } else {
        print!("{}", report.human());
    }
    Ok(emend_core::exit::OK)
}

/// Refuses (exit 2, one line) what the command cannot do as asked.
fn refuse_unhonoured(args: &EvalArgs, project: &Project) -> Result<(), Failure> {
    let config = project.config_path();
    let why = if let Some(tasks) = &args.tasks {
        format!(
            "--tasks {tasks}: this project's harness is a command, which evaluates on its own task set \
             (harness.tasks in {}); drop --tasks, or add --no-project for the built-in harness",
            config.display()
        )
    } else if let Some(judge) = args.judge {
        format!(
            "--judge {}: this project's harness is a command, which judges its own answers (`correct` in its \
             outcome records)",
            judge.as_str()
        )
    } else if args.replay() {
        "--protocol replay: longitudinal replay runs on the built-in harness only; this project's harness is a command"
            .to_string()
    } else {
        return Ok(());
    };
    Err(Failure::bad_input(anyhow!(why)))
}

/// The project with `--conversations` and `--include-adversarial` applied to its
/// task set: the backend selects the questions it shards from these settings.
fn with_selection(mut project: Project, args: &EvalArgs) -> Project {
    let h = &mut project.config.harness;
    if let Some(c) = &args.conversations {
        h.conversations = Some(c.clone());
    }
    h.include_adversarial |= args.include_adversarial;
    project
}

/// Accuracy per category, as the built-in harness's summary holds it.
fn per_category(e: &Evaluation) -> BTreeMap<String, CategoryScore> {
    e.per_category()
        .into_iter()
        .map(|(name, (n, correct))| {
            let accuracy = if n == 0 { 0.0 } else { correct as f64 / n as f64 };
            (name, CategoryScore { n, correct, accuracy })
        })
        .collect()
}

/// What `emend eval` prints of a command's evaluation.
struct Report<'a> {
    args: &'a EvalArgs,
    /// `harness.tasks` as emend.yaml holds it.
    tasks: &'a str,
    /// `harness.command.argv`, joined by spaces.
    argv: &'a str,
    strategy_hash: &'a str,
    dataset_hash: &'a str,
    harness_hash: &'a str,
    eval: &'a Evaluation,
    elapsed_ms: u64,
}

impl Report<'_> {
    fn json(&self) -> Value {
        let e = self.eval;
        json!({
            "strategy": self.args.strategy.display().to_string(),
            "tasks": self.tasks,
            "harness_kind": "command",
            "command": self.argv,
            "n": e.n(),
            "correct": e.correct(),
            "accuracy": e.accuracy(),
            "per_category": per_category(e),
            "mean_context_tokens": e.mean_context_tokens(),
            "errors": e.errors(),
            "strategy_hash": self.strategy_hash,
            "dataset_hash": self.dataset_hash,
            "harness_hash": self.harness_hash,
            "protocol": "endpoint",
            "outcomes": self.args.outcomes.as_ref().map(|p| p.display().to_string()),
            "elapsed_ms": self.elapsed_ms,
        })
    }

    fn human(&self) -> String {
        let e = self.eval;
        let conversations: BTreeSet<&str> = e.outcomes.iter().filter_map(|o| o.conversation.as_deref()).collect();
        let mut out = String::new();
        out += &format!("strategy   {}  (sha256 {:.12})\n", self.args.strategy.display(), self.strategy_hash);
        out += &format!(
            "tasks      {}: {} questions in {} conversations  (sha256 {:.12})\n",
            self.tasks,
            e.n(),
            conversations.len(),
            self.dataset_hash
        );
        out += &format!("harness    command `{}`  (sha256 {:.12})\n\n", self.argv, self.harness_hash);
        out += &figures(e.accuracy(), e.correct(), e.n(), &per_category(e));
        match e.mean_context_tokens() {
            Some(t) => out += &format!("mean context tokens   {t:.1}\n"),
            None => out += "mean context tokens   (not reported by every outcome record)\n",
        }
        out += &format!("time                  {:.2} s\n", self.elapsed_ms as f64 / 1000.0);
        if let Some(p) = &self.args.outcomes {
            out += &format!("outcomes              {}\n", p.display());
        }
        out
    }
}
