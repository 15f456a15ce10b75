//! Fitting into the shell and the tools around emend: the schema, completion
//! scripts, the man page, and the JSON error object every `--json` command
//! prints on stdout when it fails.

use std::io::Write;

use emend_model::exit;
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
    write_stdout(emend_model::schema::BUILTIN_SCHEMA.as_bytes())?;
    Ok(exit::OK)
}

pub fn completions(args: &CompletionsArgs, cmd: &mut clap::Command) -> CmdResult {
    let mut buf = Vec::new();
    clap_complete::generate(args.shell, cmd, "emend", &mut buf);
    write_stdout(&buf)?;
    Ok(exit::OK)
}

#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Write emend.1 and one page per subcommand (emend-evolve.1, ...) into this directory instead.
    #[arg(long, value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
}

/// The sections every page ends with: exit status, environment, files.
const MAN_TAIL: &str = r#".SH "EXIT STATUS"
.TP
\fB0\fR
The command did what it was asked (an evolve run that accepted nothing still succeeded).
.TP
\fB1\fR
The run failed: an evaluation of the served strategy, the journal, or I/O.
.TP
\fB2\fR
Bad input or usage: malformed YAML, a strategy that breaks the schema, a bad dataset, a bad flag,
a hand\-edited served file, a setting this binary is built without.
.TP
\fB3\fR
Another process holds the journal (the message names its pid, host and start time);
rollback, restore\-best and approve take \-\-wait or \-\-preempt instead.
.TP
\fB4\fR
evolve stopped because an operator's \-\-preempt asked for the journal (the round journaled as interrupted).
.TP
\fB5\fR
evolve ran, but every candidate errored (stopped: errored, the first error named): the harness
or a model role is broken; the served strategy itself was evaluated.
.TP
\fB130\fR, \fB141\fR, \fB143\fR
evolve stopped by SIGINT, a closed output or SIGTERM, cleanly (the round journaled as interrupted).
.SH ENVIRONMENT
.TP
\fBEMEND_ACTOR\fR
Who acts, as the caller declares it (as \-\-by): journaled as by, beside the OS account (who, uid).
.TP
\fBEMEND_MINILM_DIR\fR
The all\-MiniLM\-L6\-v2 model directory (wins over harness.minilm_dir; needs the minilm feature).
.TP
\fBNO_COLOR\fR, \fBCLICOLOR_FORCE\fR
Colour off, or on even when stdout is not a terminal.
.TP
\fBRUST_LOG\fR
Log filter for stderr (default warn).
.TP
\fBRAY_ADDRESS\fR
The Ray cluster address for harness.executor: ray when harness.ray.address is not set.
.TP
API keys
Each model role reads its key from the variable its roles.<role>.api_key_env names.
Hooks receive EMEND_PROJECT, EMEND_SERVED_FILE, EMEND_SERVED_VERSION, EMEND_SERVED_HASH,
EMEND_PREVIOUS_VERSION, EMEND_CHANGE and, for on_pending, EMEND_PENDING_VERSION,
EMEND_PENDING_HASH, EMEND_PENDING_PARENT and EMEND_PENDING_SUPERSEDES.
.SH FILES
.TP
\fBemend.yaml\fR
The project configuration (found in the current directory or the nearest parent, or \-\-project).
.TP
\fBstrategies/served.yaml\fR
The served strategy, rewritten from the journal on every change.
.TP
\fB.emend/\fR
The journal (sled store and its read view), the lock, a stop request (journal/STOP) and the caches.
"#;

/// One page: clap's sections, then [`MAN_TAIL`].
fn man_page(cmd: clap::Command) -> Result<Vec<u8>, Failure> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut buf).map_err(Failure::failed)?;
    buf.extend_from_slice(MAN_TAIL.as_bytes());
    Ok(buf)
}

pub fn man(args: &ManArgs, cmd: clap::Command) -> CmdResult {
    let Some(dir) = &args.dir else {
        write_stdout(&man_page(cmd)?)?;
        return Ok(exit::OK);
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| Failure::bad_input(anyhow::anyhow!("--dir {}: cannot create: {e}", dir.display())))?;
    let mut cmd = cmd;
    cmd.build();
    let mut pages = vec![("emend.1".to_string(), man_page(cmd.clone())?)];
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        let name = format!("emend-{}", sub.get_name());
        pages.push((format!("{name}.1"), man_page(sub.clone().display_name(name))?));
    }
    for (file, page) in &pages {
        let path = dir.join(file);
        emend_model::artifact::write_atomic(&path, page)
            .map_err(|e| Failure::failed(anyhow::anyhow!("{}: cannot write: {e}", path.display())))?;
    }
    println!("wrote {} man pages to {}", pages.len(), dir.display());
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
