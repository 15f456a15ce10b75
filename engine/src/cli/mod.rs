//! Command-line glue: argument structs, dispatch, error-to-exit-code mapping.

mod audit;
mod cache;
mod collision;
mod common;
mod compare;
mod diagnose;
mod eval;
mod evolve;
mod inspect;
mod journal_repair;
mod propose;
mod report;
mod review;
mod round;
mod serve;
mod shell;
mod term;
mod trials;
mod validate;
mod worker;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use emend_model::exit;

/// A command's failure, carrying the exit code the scheduler sees.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub error: anyhow::Error,
}

impl Failure {
    /// Bad input or usage (exit 2).
    pub fn bad_input(error: impl Into<anyhow::Error>) -> Self {
        Failure { code: exit::BAD_INPUT, error: error.into() }
    }
    /// The run failed (exit 1).
    pub fn failed(error: impl Into<anyhow::Error>) -> Self {
        Failure { code: exit::FAILED, error: error.into() }
    }
}

/// Result of a command: `Ok(code)` is printed nothing more; `Err` is printed as `error: ` and
/// its chain on one line ([`common::error_line`]).
pub type CmdResult = Result<u8, Failure>;

#[derive(Debug, Parser)]
#[command(name = "emend", version, about = "Strategy-evolution engine with gates for AI memory and retrieval systems")]
struct Cli {
    /// The project directory (default: the current directory or the nearest parent with an emend.yaml).
    #[arg(long, global = true)]
    project: Option<std::path::PathBuf>,
    /// Who is acting, as the caller declares it (default: $EMEND_ACTOR). Journaled as `by`, beside `who`
    /// (the OS account of the process, which emend reads itself) and `uid`.
    #[arg(long, global = true, value_name = "NAME")]
    by: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create a project: emend.yaml, strategies/served.yaml (v1) and the journal under .emend/
    /// (a --harness-command is first run once, on one question, and refused if that fails).
    Init(evolve::InitArgs),
    /// Run the Observe -> Improve -> Verify loop for some rounds (the unattended main job).
    #[command(after_help = evolve::stopped_help())]
    Evolve(evolve::EvolveArgs),
    /// Test a person's change with a falsifiable prediction: the fields set on the served strategy go through the
    /// gates, the critic, the probe and the confirm test like an evolve candidate, and the predicted per-category
    /// movement is checked on the confirm part; a change whose prediction failed is not served (unless
    /// --accept-unpredicted).
    #[command(after_help = propose_help())]
    Propose(propose::ProposeArgs),
    /// Served and best-ever versions with scores and hashes, the last round, pending escalations.
    Status(inspect::JsonArg),
    /// Layer A: label every failure of the served strategy by the stage that lost its evidence
    /// (`--compare v1 v2`: how the labels moved from one version to another).
    Diagnose(diagnose::DiagnoseArgs),
    /// The UCB1 hypothesis tree: visits, mean reward, UCB score, status.
    Hypotheses(inspect::JsonArg),
    /// Candidate classes blocked three times as out of scope, waiting for a person; `resolve` / `reopen` one.
    Escalations(serve::EscalationsArgs),
    /// Versions that passed every gate and wait for approval (serve.approval: manual), with their evidence.
    Pending(serve::PendingArgs),
    /// Serve a pending version (journaled; runs hooks.on_served).
    Approve(serve::ApproveArgs),
    /// Close a pending version without serving it (--reason required).
    Reject(serve::ReviewArgs),
    /// Mark a version as bad: never served automatically, never the best-ever (--reason required).
    Quarantine(serve::ReviewArgs),
    /// Lift a version's quarantine.
    Unquarantine(serve::ReviewArgs),
    /// Readable history: rounds, acceptances, rejections with reasons, rollbacks.
    Log(inspect::LogArgs),
    /// Every strategy the journal's searches scored, one row each (like Optuna's trials table): stage, state (complete or raced out), questions evaluated and correct, score, hash, field values.
    Trials(trials::TrialsArgs),
    /// What changed and why: a version's or candidate's diff, motivation, gates and statistics.
    Show(review::ShowArgs),
    /// Unified diff of two versions (or a version and a file).
    Diff(review::DiffArgs),
    /// Serve an earlier version again, journaling who, when and why.
    ///
    /// What a rollback to vN does: it quarantines the served version and every version served since vN was
    /// last served (never served automatically again, never the best-ever), pins vN (best-ever auto-restore
    /// is suspended until `emend restore-best` or an accepted change), and freezes the fields the version rolled back
    /// from changed (from its parent) at the served values: later runs search with those fields locked, so the
    /// rolled-back change is never proposed again, until `emend unquarantine` of the version rolled back from
    /// lifts its quarantine and the freeze. vN must be a version that may be served: never a quarantined one (unquarantine
    /// it first), nor one that never passed serving (pending, superseded or rejected at review: only `emend
    /// approve` serves a pending version, under its tested-pair rules). Every refusal (exit 2) comes before
    /// anything is journaled, and with --preempt before a running evolve is asked to stop.
    Rollback(review::RollbackArgs),
    /// Serve the best-ever version again.
    RestoreBest(review::RestoreBestArgs),
    /// A self-contained HTML report of the run: trajectory, gate funnel, hypotheses, diffs.
    Report(report::ReportArgs),
    /// The journal itself: verify the chain and projections, export events.
    #[command(subcommand)]
    Journal(inspect::JournalCommand),
    /// Compare two evaluation runs question by question (paired statistics and the acceptance verdict).
    Compare(compare::CompareArgs),
    /// Evaluate one strategy on a task set and print accuracy, per-category figures and traces
    /// (in a project with a command harness: with that command, on the project's task set).
    Eval(eval::EvalArgs),
    /// Check strategy files (YAML syntax, the schema, unknown fields, invariants, prompt markers) or an emend.yaml;
    /// in a project, against its strategy schema (harness.schema).
    Validate(validate::ValidateArgs),
    /// Mechanism fidelity: per mechanism of the served strategy, its mechanistic outcome and quality attribution (--buildup: the cumulative buildup).
    Audit(audit::AuditArgs),
    /// Entity collision: hit@1 of the strategy's retrieval against its BM25 channel alone (1/K by construction), per tag and K.
    Collision(collision::CollisionArgs),
    /// Evaluate one task shard with the built-in pipeline (a shard command: local or on Ray).
    Worker(worker::WorkerArgs),
    /// The project's caches (.emend/cache/): `clear` empties them (every entry is recomputed when needed).
    Cache(cache::CacheArgs),
    /// Print the built-in strategy schema (JSON Schema), the one `init` copies to schema/strategy.schema.json.
    Schema,
    /// Print a shell completion script: `emend completions bash > ~/.local/share/bash-completion/completions/emend`.
    Completions(shell::CompletionsArgs),
    /// Print the man page emend(1) (roff) on stdout (`emend man | man -l -`), or write every page with --dir.
    Man(shell::ManArgs),
}

/// `propose --help`'s verdict rule and exit codes.
fn propose_help() -> &'static str {
    "Verdict, per predicted category, on its confirm-part questions: d = candidate minus served accuracy, with its \
     95% paired percentile bootstrap interval [low, high]. +Npp holds when low > 0 and high >= N; -Npp when \
     high < 0 and low <= -N; >= X (>= 0, >= -Npp) when d >= X. A category with no confirm question fails.\n\n\
     Exit codes: 0 served (or pending approval under serve.approval: manual); 1 tested and not served (a gate, the \
     critic, the probe, the confirm test or the prediction stopped it; the record is journaled); 2 bad input \
     (a field the schema does not declare or a value it refuses, an unknown category, a malformed prediction, a \
     strategy evaluated before: nothing is evaluated); 3 another process holds the journal; 5 the candidate's \
     evaluation errored."
}

pub fn main() -> ExitCode {
    use clap::{CommandFactory, FromArgMatches};
    init_tracing();
    let parsed = Cli::command().try_get_matches().and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, m)));
    let (cli, matches) = match parsed {
        Ok(parsed) => parsed,
        Err(e) => {
            let code = if e.use_stderr() { exit::BAD_INPUT } else { exit::OK };
            let _ = e.print();
            // A usage error of a `--json` command is still one JSON line on stdout.
            if e.use_stderr() && std::env::args_os().any(|a| a == "--json") {
                let first = e.render().to_string();
                let first = first.lines().next().unwrap_or("usage error").trim_start_matches("error: ");
                shell::print_json_error(first, code);
            }
            return ExitCode::from(code);
        }
    };
    let json = shell::wants_json(&matches);
    if let Some(by) = cli.by.clone().or_else(|| std::env::var("EMEND_ACTOR").ok()) {
        emend_model::events::declare_actor(&by);
    }
    let project = cli.project.as_deref();
    let result = match cli.command {
        Command::Init(args) => evolve::init(&args),
        Command::Evolve(args) => evolve::run(&args, project),
        Command::Propose(args) => propose::run(&args, project),
        Command::Status(args) => inspect::status(&args, project),
        Command::Diagnose(args) => match &args.compare {
            Some(specs) => diagnose::compare(specs, args.json, project),
            None => diagnose::diagnose(args.json, args.seed_order, project),
        },
        Command::Hypotheses(args) => inspect::hypotheses(&args, project),
        Command::Escalations(args) => match &args.action {
            None => inspect::escalations(&inspect::JsonArg { json: args.json }, project),
            Some(action) => serve::escalation(action, project),
        },
        Command::Pending(args) => serve::pending(&args, project),
        Command::Approve(args) => serve::approve(&args, project),
        Command::Reject(args) => serve::reject(&args, project),
        Command::Quarantine(args) => serve::quarantine(&args, project),
        Command::Unquarantine(args) => serve::unquarantine(&args, project),
        Command::Log(args) => inspect::log(&args, project),
        Command::Trials(args) => trials::run(&args, project),
        Command::Show(args) => review::show(&args, project),
        Command::Diff(args) => review::diff(&args, project),
        Command::Rollback(args) => review::rollback(&args, project),
        Command::RestoreBest(args) => review::restore_best(&args, project),
        Command::Report(args) => report::run(&args, project),
        Command::Journal(cmd) => inspect::journal(&cmd, project),
        Command::Compare(args) => compare::run(&args),
        Command::Eval(args) => eval::run(&args, project),
        Command::Validate(args) => validate::run(&args, project),
        Command::Worker(args) => worker::run(&args),
        Command::Schema => shell::schema(),
        Command::Completions(args) => shell::completions(&args, &mut Cli::command()),
        Command::Man(args) => shell::man(&args, Cli::command()),
        Command::Collision(args) => collision::run(&args),
        Command::Audit(args) => audit::run(&args, project),
        Command::Cache(args) => cache::run(&args, project),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            let message = common::error_line(&failure.error);
            // A refusal can quote journaled text (a quarantine's reason): through the one sanitizer.
            eprintln!("error: {}", emend_model::sanitize::escape_controls(&message));
            if json && !common::json_printed() {
                shell::print_json_error(&message, failure.code);
            }
            ExitCode::from(failure.code)
        }
    }
}

/// Logs go to stderr, `warn` and above unless `RUST_LOG` says otherwise. The OpenAI client
/// library logs a reply it cannot parse verbatim (at error level), which would put model
/// output, and any key echoed in it, on stderr: its logs stay off unless `RUST_LOG` names it.
fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    // The OpenAI client library logs unparseable replies verbatim (they may echo a key): off unless asked for.
    let spec = std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".to_string());
    let spec = if spec.contains("async_openai") { spec } else { format!("{spec},async_openai=off") };
    let filter = EnvFilter::try_new(&spec).unwrap_or_else(|_| EnvFilter::new("warn,async_openai=off"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(term::stderr_colour())
        .with_target(false)
        .try_init();
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// Every argument of every subcommand says what it does in `--help`.
    #[test]
    fn every_argument_has_help() {
        fn walk(cmd: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in cmd.get_arguments() {
                let id = arg.get_id().as_str();
                if id == "help" || id == "version" {
                    continue;
                }
                if arg.get_help().is_none() && arg.get_long_help().is_none() {
                    missing.push(format!("{path} {id}"));
                }
            }
            for sub in cmd.get_subcommands() {
                if cmd.get_name() != sub.get_name() {
                    walk(sub, &format!("{path} {}", sub.get_name()), missing);
                }
            }
        }
        let mut missing = Vec::new();
        walk(&super::Cli::command(), "emend", &mut missing);
        assert!(missing.is_empty(), "arguments without help: {missing:#?}");
    }
}
