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
use emend_core::exit;

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

/// The commands: each one's doc comment is its one-line about (its NAME line); its description, examples and
/// group in `emend --help` are in pages.txt and [`shell::GROUPS`] ([`shell::teach`]).
#[derive(Debug, Subcommand)]
enum Command {
    /// Create a project: emend.yaml, the served strategy (v1) and the journal.
    Init(evolve::InitArgs),
    /// Run the Observe -> Improve -> Verify loop for some rounds (the unattended main job).
    #[command(after_help = evolve::stopped_help())]
    Evolve(evolve::EvolveArgs),
    /// Test a person's change to the served strategy, with a prediction of what it moves, as evolve tests its own.
    #[command(after_help = propose_help())]
    Propose(propose::ProposeArgs),
    /// Served and best-ever versions with scores and hashes, the last round, pending escalations.
    Status(inspect::JsonArg),
    /// Label every failure of the served strategy by the pipeline stage that lost its evidence (Layer A).
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
    /// Every strategy the journal's searches scored, one row each (like Optuna's trials table).
    Trials(trials::TrialsArgs),
    /// What changed and why: a version's or candidate's diff, motivation, gates and statistics.
    Show(review::ShowArgs),
    /// Unified diff of two versions, candidates or strategy files.
    Diff(review::DiffArgs),
    /// Serve an earlier version again, journaling who, when and why.
    Rollback(review::RollbackArgs),
    /// Serve the best-ever version again.
    RestoreBest(review::RestoreBestArgs),
    /// A self-contained HTML report of the run: trajectory, gate funnel, hypotheses, diffs.
    Report(report::ReportArgs),
    /// The journal itself: verify its chain and projections, print its head, export or repair it.
    #[command(subcommand)]
    Journal(inspect::JournalCommand),
    /// Compare two evaluation runs question by question (paired statistics and the acceptance verdict).
    Compare(compare::CompareArgs),
    /// Evaluate one strategy on a task set: accuracy, per-category figures and traces.
    Eval(eval::EvalArgs),
    /// Check strategy files or an emend.yaml against their schema, every problem in one run.
    Validate(validate::ValidateArgs),
    /// Mechanism fidelity: whether each mechanism of the served strategy runs, and whether it helps.
    Audit(audit::AuditArgs),
    /// Entity collision: hit@1 of a strategy's retrieval against BM25 alone, per tag and K.
    Collision(collision::CollisionArgs),
    /// Evaluate one task shard with the built-in pipeline (a shard command: local or on Ray).
    Worker(worker::WorkerArgs),
    /// The project's caches (.emend/cache/): `clear` empties them (every entry is recomputed when needed).
    Cache(cache::CacheArgs),
    /// Print the built-in strategy schema (JSON Schema).
    Schema,
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(shell::CompletionsArgs),
    /// Print a man page (roff): emend(1) or a command's, or write every page into a directory.
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
    let parsed =
        shell::teach(Cli::command()).try_get_matches().and_then(|m| Cli::from_arg_matches(&m).map(|cli| (cli, m)));
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
        emend_core::events::declare_actor(&by);
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
        Command::Man(args) => shell::man(&args, shell::teach(Cli::command())),
        Command::Collision(args) => collision::run(&args),
        Command::Audit(args) => audit::run(&args, project),
        Command::Cache(args) => cache::run(&args, project),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            let message = common::error_line(&failure.error);
            // A refusal can quote journaled text (a quarantine's reason): through the one sanitizer.
            eprintln!("error: {}", emend_core::sanitize::escape_controls(&message));
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

    fn subcommand_names() -> Vec<String> {
        super::Cli::command().get_subcommands().map(|s| s.get_name().to_string()).collect()
    }

    /// `emend --help` lists every command in exactly one group, and no group names a command that is not one.
    #[test]
    fn every_command_is_in_exactly_one_group() {
        let grouped: Vec<&str> = super::shell::GROUPS.iter().flat_map(|(_, names)| names.iter().copied()).collect();
        for name in subcommand_names() {
            let n = grouped.iter().filter(|g| **g == name).count();
            assert_eq!(n, 1, "{name} is in {n} groups of shell::GROUPS");
        }
        for name in grouped {
            assert!(subcommand_names().iter().any(|s| s == name), "shell::GROUPS names {name}, no command");
        }
    }

    /// Every command has a page: a description that is more than its one-line about, and 1-3 examples that run emend.
    #[test]
    fn every_command_has_a_description_and_examples() {
        let cmd = super::Cli::command();
        let pages = super::shell::pages();
        let mut names: Vec<&str> = pages.iter().map(|p| p.name).collect();
        names.sort();
        let mut expected = subcommand_names();
        expected.push("emend".to_string());
        expected.sort();
        assert_eq!(names, expected, "pages.txt has one page per command, and emend's");
        for page in &pages {
            let about = match page.name {
                "emend" => cmd.get_about(),
                name => cmd.find_subcommand(name).and_then(|s| s.get_about()),
            };
            let about = about.map(|a| a.to_string()).unwrap_or_default();
            let about = about.trim_end_matches('.');
            assert!(!page.description.starts_with(about), "{}: the description repeats the about", page.name);
            assert!(page.description.len() > 2 * about.len(), "{}: a description says more than the about", page.name);
            assert!((1..=3).contains(&page.examples.len()), "{}: {} examples", page.name, page.examples.len());
            for example in &page.examples {
                assert!(!example.caption.is_empty(), "{}: an example without a caption", page.name);
                assert!(
                    example.lines.first().is_some_and(|l| l.starts_with("$ ")),
                    "{}: {}",
                    page.name,
                    example.caption
                );
                assert!(example.lines.iter().any(|l| l.contains("emend ")), "{}: {}", page.name, example.caption);
            }
        }
    }

    /// `emend --help` is generated from the commands: every about, under its group's heading, in the groups' order.
    #[test]
    fn the_top_level_help_lists_the_groups_with_every_about() {
        let mut cmd = super::shell::teach(super::Cli::command());
        let help = cmd.render_long_help().to_string();
        let mut at = 0;
        for (group, names) in super::shell::GROUPS {
            at += help[at..].find(&format!("{group}:")).unwrap_or_else(|| panic!("no {group} after {at}:\n{help}"));
            for name in *names {
                let about = cmd.find_subcommand(name).and_then(|s| s.get_about()).unwrap().to_string();
                let line = help[at..].lines().find(|l| l.trim_start().starts_with(&format!("{name} "))).unwrap();
                assert!(line.ends_with(&about), "{line}");
            }
        }
        assert!(help.contains("Options:") && help.contains("--project"), "{help}");
    }
}
