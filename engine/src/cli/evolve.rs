//! `emend init` and `emend evolve`: create a project, run the loop.

use std::path::{Path, PathBuf};

use engine::artifact;
use engine::config::{self, Project};
use engine::evolve::{self, Evolution, Progress, RunOptions};
use engine::exit;
use engine::schema::StrategySchema;
use serde_json::json;

use super::{CmdResult, Failure};
use super::{common, term};

/// The built-in default strategy, for `emend init` without `--strategy`.
const DEFAULT_STRATEGY: &str = include_str!("../../../strategies/default.yaml");

#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// Directory of the new project (created if missing).
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// The locked task set: `builtin` or a LoCoMo-format JSON file.
    #[arg(long)]
    pub tasks: String,
    /// Starting strategy (default: emend's built-in default strategy).
    #[arg(long)]
    pub strategy: Option<PathBuf>,
    /// Only these conversations (comma-separated sample ids) form the task set.
    #[arg(long, value_delimiter = ',')]
    pub conversations: Option<Vec<String>>,
    /// Evaluate with an external command instead of the built-in harness
    /// (argv after `--harness-command`, e.g. `--harness-command python3 adapter.py {strategy} {tasks} {out}`).
    #[arg(long, num_args = 1.., allow_hyphen_values = true)]
    pub harness_command: Option<Vec<String>>,
    /// The strategy schema of an external system.
    #[arg(long)]
    pub schema: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

fn absolute(p: &Path) -> PathBuf {
    std::fs::canonicalize(p)
        .unwrap_or_else(|_| std::env::current_dir().map(|c| c.join(p)).unwrap_or_else(|_| p.to_path_buf()))
}

pub fn init(args: &InitArgs) -> CmdResult {
    let dir = &args.dir;
    if dir.join(config::CONFIG_FILE).exists() {
        return Err(Failure::bad_input(anyhow::anyhow!(
            "{}: already exists; refusing to overwrite a project",
            dir.join(config::CONFIG_FILE).display()
        )));
    }
    // Paths given on the command line are relative to where the user stands.
    let tasks = if args.tasks == "builtin" {
        args.tasks.clone()
    } else {
        absolute(Path::new(&args.tasks)).display().to_string()
    };
    if tasks != "builtin" && !Path::new(&tasks).is_file() {
        return Err(Failure::bad_input(anyhow::anyhow!("--tasks {}: no such file", args.tasks)));
    }
    let schema_path = args.schema.as_deref().map(absolute);
    let schema = match &schema_path {
        Some(p) => StrategySchema::from_path(p).map_err(Failure::bad_input)?,
        None => StrategySchema::builtin(),
    };
    // Read with the strategy size and depth bounds.
    let (origin, start) = match &args.strategy {
        Some(p) => (p.display().to_string(), artifact::load_file(p, &schema).map_err(Failure::bad_input)?),
        None => {
            let origin = "strategies/default.yaml (built in)".to_string();
            let start = artifact::from_yaml(&origin, DEFAULT_STRATEGY, &schema).map_err(Failure::bad_input)?;
            (origin, start)
        }
    };
    let strategy_rel = PathBuf::from("strategies/served.yaml");
    let mut rendered =
        config::render_config(&tasks, &strategy_rel, args.harness_command.as_deref(), schema_path.as_deref());
    if let Some(convs) = &args.conversations {
        let list =
            convs.iter().map(|c| serde_json::to_string(c).expect("string renders")).collect::<Vec<_>>().join(", ");
        rendered = rendered.replacen("  conversations: null\n", &format!("  conversations: [{list}]\n"), 1);
    }
    // Check the configuration and the task set before writing anything.
    let parsed = config::parse_config(&rendered)
        .map_err(|m| Failure::failed(anyhow::anyhow!("generated emend.yaml is invalid: {m}")))?;
    let project = Project { dir: dir.clone(), config: parsed };
    // From here on a failure removes what this command created.
    let created = Created::new(dir);
    std::fs::create_dir_all(dir).map_err(|e| Failure::failed(anyhow::anyhow!("{}: {e}", dir.display())))?;
    let written = (|| -> Result<Box<dyn engine::backend::Backend>, Failure> {
        // The task set and harness are checked before anything is written into the directory.
        let backend = init_backend(&project, &schema, args)?;
        artifact::write_atomic(&project.config_path(), rendered.as_bytes()).map_err(Failure::failed)?;
        let mut log = common::writer(&project)?;
        evolve::initialize(&mut log, &start, &format!("initialized from {origin}")).map_err(common::evolve_failure)?;
        evolve::write_served(&project, 1, None, &start.hash, &evolve::strip_metadata(&start.value))
            .map_err(common::evolve_failure)?;
        Ok(backend)
    })();
    let backend = match written {
        Ok(backend) => backend,
        Err(failure) => {
            created.undo(&project);
            return Err(failure);
        }
    };
    let n = backend.questions().len();
    if args.json {
        common::print_json(&json!({
            "project": dir.display().to_string(),
            "config": project.config_path().display().to_string(),
            "strategy": project.strategy_path().display().to_string(),
            "journal": project.journal_dir().display().to_string(),
            "served_version": 1,
            "served_hash": start.hash,
            "questions": n,
        }));
    } else {
        println!("initialized emend project in {}", dir.display());
        println!("  {}  (settings, every one commented)", project.config_path().display());
        println!("  {}  (v1, hash {:.12}, from {origin})", project.strategy_path().display(), start.hash);
        println!("  {}  (journal)", project.journal_dir().display());
        println!("  task set: {tasks} ({n} questions)");
        println!("next: cd {} && emend evolve", dir.display());
    }
    Ok(exit::OK)
}

/// The backend a new project would use; its errors name the flag that gave the bad input.
fn init_backend(
    project: &Project,
    schema: &StrategySchema,
    args: &InitArgs,
) -> Result<Box<dyn engine::backend::Backend>, Failure> {
    use engine::backend::BuiltinBackend;
    use engine::command::CommandBackend;
    match project.config.harness.kind {
        config::HarnessKind::Builtin => Ok(Box::new(
            BuiltinBackend::from_project(project)
                .map_err(|e| Failure::bad_input(anyhow::anyhow!("--tasks {}: {e}", args.tasks)))?,
        )),
        config::HarnessKind::Command => Ok(Box::new(
            CommandBackend::from_project(project, schema)
                .map_err(|e| Failure::bad_input(anyhow::anyhow!("--tasks {} / --harness-command: {e}", args.tasks)))?,
        )),
    }
}

/// What `emend init` created, so that a failure leaves nothing behind: the whole directory
/// when it did not exist before, else only the files and directories init adds.
struct Created {
    dir_existed: bool,
    dir: PathBuf,
}

impl Created {
    fn new(dir: &Path) -> Self {
        Created { dir_existed: dir.exists(), dir: dir.to_path_buf() }
    }

    fn undo(self, project: &Project) {
        if !self.dir_existed {
            let _ = std::fs::remove_dir_all(&self.dir);
            return;
        }
        let _ = std::fs::remove_file(project.config_path());
        let _ = std::fs::remove_dir_all(self.dir.join(config::STATE_DIR));
        let strategy = project.strategy_path();
        if std::fs::remove_file(&strategy).is_ok()
            && let Some(parent) = strategy.parent()
        {
            // Only if init's own strategies/ directory is now empty.
            let _ = std::fs::remove_dir(parent);
        }
    }
}

#[derive(Debug, clap::Args)]
pub struct EvolveArgs {
    /// Rounds to run (default: loop.rounds of emend.yaml).
    #[arg(long)]
    pub rounds: Option<u32>,
    /// Candidates per round (default: loop.candidates of emend.yaml).
    #[arg(long)]
    pub candidates: Option<usize>,
    /// Stop once this many full-evaluation equivalents are spent (an evaluation
    /// of k of the task set's n questions costs k/n; reused results cost 0).
    #[arg(long, value_parser = parse_max_evals)]
    pub max_evals: Option<f64>,
    /// Stop once this much time has passed (e.g. `90s`, `15m`, `2h`): the round
    /// in flight finishes and the summary is printed.
    #[arg(long, value_parser = parse_duration)]
    pub max_time: Option<std::time::Duration>,
    /// Print the run's summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// No progress lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

fn parse_max_evals(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("expected a positive number of full-evaluation equivalents, got {s:?}")),
    }
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let d: jiff::SignedDuration =
        s.parse().map_err(|e| format!("expected a duration such as 90s, 15m or 2h, got {s:?}: {e}"))?;
    std::time::Duration::try_from(d)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("expected a positive duration, got {s:?}"))
}

/// Opens the journal for writing, creating the first version when it is empty.
pub fn open_initialized(project: &Project, schema: &StrategySchema) -> Result<journal::SledJournal, Failure> {
    let mut log = common::writer(project)?;
    let store = engine::store::Store::new(&log);
    if store.served().map_err(common::store_failure)?.is_none() {
        let path = project.strategy_path();
        let source = if path.exists() {
            path.clone()
        } else if let Some(initial) = &project.config.initial_strategy {
            project.resolve(initial)
        } else {
            return Err(Failure::bad_input(anyhow::anyhow!(
                "{}: no served strategy and no journal (set initial_strategy in emend.yaml or run `emend init`)",
                path.display()
            )));
        };
        let a = artifact::load_file(&source, schema).map_err(Failure::bad_input)?;
        evolve::initialize(&mut log, &a, &format!("initialized from {}", source.display()))
            .map_err(common::evolve_failure)?;
        evolve::write_served(project, 1, None, &a.hash, &evolve::strip_metadata(&a.value))
            .map_err(common::evolve_failure)?;
    }
    Ok(log)
}

pub fn run(args: &EvolveArgs, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let schema = common::schema(&project)?;
    let backend = common::backend(&project, &schema)?;
    let opts = RunOptions {
        rounds: args.rounds.unwrap_or(project.config.loop_.rounds),
        candidates: args.candidates.unwrap_or(project.config.loop_.candidates),
        max_evals: args.max_evals,
        max_time: args.max_time,
    };
    // One limit for the flag and the setting.
    config::check_candidates("--candidates", opts.candidates).map_err(|m| Failure::bad_input(anyhow::anyhow!(m)))?;
    config::check_rounds("--rounds", opts.rounds).map_err(|m| Failure::bad_input(anyhow::anyhow!(m)))?;
    let mut log = open_initialized(&project, &schema)?;
    let live = term::Live::start("observing the served strategy", !args.quiet);
    let mut progress = |p: Progress| {
        if args.quiet {
            return;
        }
        let (style, line, status) = render(&p);
        live.println(style, &line);
        live.status(status);
    };
    let mut evolution = Evolution { project: &project, schema: &schema, backend: backend.as_ref(), log: &mut log };
    let summary = evolution.run(&opts, &mut progress).map_err(common::evolve_failure)?;
    live.finish();
    if args.json {
        common::print_json(&serde_json::to_value(&summary).expect("summary serializes"));
    } else {
        println!(
            "{} rounds ({}..{}): {} accepted, {} candidates, {} probes, {} full evaluations, {} rollbacks, {} escalations",
            summary.rounds,
            summary.first_round,
            summary.last_round,
            summary.accepted,
            summary.candidates,
            summary.probe_evaluations,
            summary.full_evaluations,
            summary.rollbacks,
            summary.escalations
        );
        println!(
            "accuracy: start {:.4}, served v{} {:.4}, best-ever v{} {:.4} ({} ms)",
            summary.start_accuracy,
            summary.served_version,
            summary.served_accuracy,
            summary.best_version,
            summary.best_accuracy,
            summary.elapsed_ms
        );
        if !summary.pending_versions.is_empty() {
            let names: Vec<String> = summary.pending_versions.iter().map(|v| format!("v{v}")).collect();
            println!("pending approval: {} (see `emend pending`; serve one with `emend approve vN`)", names.join(", "));
        }
        let tokens = |t: Option<f64>| t.map_or("n/a".to_string(), |t| format!("{t:.1}"));
        println!(
            "mean context tokens: start {}, served {}; {:.2} full-evaluation equivalents used; stopped: {}",
            tokens(summary.start_mean_tokens),
            tokens(summary.served_mean_tokens),
            summary.evaluations_used,
            summary.stopped.as_str()
        );
        if !summary.rejected_by.is_empty() {
            let parts: Vec<String> = summary.rejected_by.iter().map(|(k, v)| format!("{k} {v}")).collect();
            println!("rejected by: {}", parts.join(", "));
        }
    }
    Ok(exit::OK)
}

/// One progress event as a line for stderr (with its style) and the live
/// line's status that follows it.
fn render(p: &Progress) -> (anstyle::Style, String, String) {
    let plain = anstyle::Style::new();
    match p {
        Progress::Observed { round, .. } => {
            (plain, p.to_string(), format!("round {round}: screening and testing candidates"))
        }
        Progress::Candidate { round, id, .. } => {
            (plain, p.to_string(), format!("round {round}: working (last reported: {id})"))
        }
        Progress::Decided { round, .. } => {
            (term::DECISION, p.to_string(), format!("round {round} decided; observing the served strategy"))
        }
    }
}
