//! Fitting into the shell and the tools around emend: the schema, completion
//! scripts, the man page, and the JSON error object every `--json` command
//! prints on stdout when it fails.

use std::io::Write;

use engine::exit;
use serde_json::json;

use super::{CmdResult, Failure};

#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell to complete emend for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// The exit code's class as the error object names it.
pub fn kind_of(code: u8) -> &'static str {
    match code {
        exit::BAD_INPUT => "bad_input",
        exit::LOCKED => "locked",
        _ => "failed",
    }
}

/// The error object of a `--json` command, one line on stdout:
/// `{"error": {"message": ..., "exit_code": ..., "kind": ...}}`.
pub fn error_object(message: &str, code: u8) -> serde_json::Value {
    json!({"error": {"message": message, "exit_code": code, "kind": kind_of(code)}})
}

pub fn print_json_error(message: &str, code: u8) {
    let line = serde_json::to_string(&error_object(message, code)).expect("JSON renders");
    let mut out = std::io::stdout().lock();
    // stdout may be a closed pipe: the stderr line and the exit code still tell.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Whether the command that was parsed asked for `--json` (at any subcommand depth).
pub fn wants_json(matches: &clap::ArgMatches) -> bool {
    let mut m = matches;
    loop {
        if let Ok(Some(true)) = m.try_get_one::<bool>("json") {
            return true;
        }
        match m.subcommand() {
            Some((_, sub)) => m = sub,
            None => return false,
        }
    }
}

pub fn schema() -> CmdResult {
    write_stdout(engine::schema::BUILTIN_SCHEMA.as_bytes())?;
    Ok(exit::OK)
}

pub fn completions(args: &CompletionsArgs, cmd: &mut clap::Command) -> CmdResult {
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, cmd, "emend", &mut buf);
    write_stdout(&buf)?;
    Ok(exit::OK)
}

pub fn man(cmd: clap::Command) -> CmdResult {
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut buf).map_err(Failure::failed)?;
    write_stdout(&buf)?;
    Ok(exit::OK)
}

/// Writes all of `bytes` to stdout; a closed pipe (`emend man | head`) is no failure.
fn write_stdout(bytes: &[u8]) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(Failure::failed(e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_object_names_the_exit_class() {
        let v = error_object("emend.yaml: line 3: bad", exit::BAD_INPUT);
        assert_eq!(v["error"]["kind"], "bad_input");
        assert_eq!(v["error"]["exit_code"], 2);
        assert_eq!(error_object("x", exit::LOCKED)["error"]["kind"], "locked");
        assert_eq!(error_object("x", exit::FAILED)["error"]["kind"], "failed");
    }
}
