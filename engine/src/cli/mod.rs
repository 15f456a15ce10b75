//! Command-line glue: argument structs, dispatch, error-to-exit-code mapping.

mod compare;
mod eval;
mod validate;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use engine::exit;

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
    /// Another process holds the journal (exit 3).
    pub fn locked(error: impl Into<anyhow::Error>) -> Self {
        Failure { code: exit::LOCKED, error: error.into() }
    }
}

/// Result of a command: `Ok(code)` is printed nothing more; `Err` is printed as `error: {:#}`.
pub type CmdResult = Result<u8, Failure>;

#[derive(Debug, Parser)]
#[command(name = "emend", version, about = "Strategy-evolution engine with gates for AI memory and retrieval systems")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Compare two evaluation runs question by question (paired statistics and the acceptance verdict).
    Compare(compare::CompareArgs),
    /// Evaluate one strategy on a task set and print accuracy, per-category figures and traces.
    Eval(eval::EvalArgs),
    /// Check strategy files: YAML syntax, the schema, unknown fields, invariants and prompt markers.
    Validate(validate::ValidateArgs),
}

pub fn main() -> ExitCode {
    init_tracing();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { exit::BAD_INPUT } else { exit::OK };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let result = match cli.command {
        Command::Compare(args) => compare::run(&args),
        Command::Eval(args) => eval::run(&args),
        Command::Validate(args) => validate::run(&args),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            eprintln!("error: {:#}", failure.error);
            ExitCode::from(failure.code)
        }
    }
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("RUST_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ =
        tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_target(false).try_init();
}
