//! The `emend` binary: parses arguments, runs one command, prints the error
//! chain and returns a documented exit code (see `engine::exit`).

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
