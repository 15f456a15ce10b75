//! Plumbing shared by the project commands: finding the project, opening
//! the journal and the backend, mapping library errors to exit codes.

use std::path::Path;

use emend_core::config::Project;
use emend_core::events::EngineProjector;
use emend_core::schema::StrategySchema;
use emend_core::served::ServedError;
use emend_core::setup::SetupError;
use emend_core::store::StoreError;
use emend_eval::backend::Backend;
use emend_journal::{ErrorClass, JournalError, ReadView, SledJournal};
use emend_loop::evolve::EvolveError;

use super::Failure;

/// Finds the project: `--project DIR`, else the current directory or a parent.
pub fn project(dir: Option<&Path>) -> Result<Project, Failure> {
    let result = match dir {
        Some(d) => Project::open(d),
        None => {
            let cwd = std::env::current_dir().map_err(Failure::failed)?;
            Project::discover(&cwd)
        }
    };
    result.map_err(Failure::bad_input)
}

/// For the commands that also work without a project (`validate`, `eval`): the
/// project as [`project`] finds it, or None when there is none (no `--project`,
/// no emend.yaml here or above) or `--no-project` asks for none. A project that
/// is there but invalid is an error naming its emend.yaml, not "no project".
pub fn optional_project(dir: Option<&Path>, no_project: bool) -> Result<Option<Project>, Failure> {
    if no_project {
        if let Some(d) = dir {
            return Err(Failure::bad_input(anyhow::anyhow!(
                "--no-project and --project {} contradict each other; give one of them",
                d.display()
            )));
        }
        return Ok(None);
    }
    let found = match dir {
        Some(d) => Some(d.to_path_buf()),
        None => {
            let cwd = std::env::current_dir().map_err(Failure::failed)?;
            cwd.ancestors().find(|d| d.join(emend_core::config::CONFIG_FILE).is_file()).map(Path::to_path_buf)
        }
    };
    found.map(|d| Project::open(&d).map_err(Failure::bad_input)).transpose()
}

/// The project's strategy schema: `harness.schema`, resolved against the project, else the built-in one.
pub fn schema(project: &Project) -> Result<StrategySchema, Failure> {
    match &project.config.harness.schema {
        Some(p) => StrategySchema::from_path(&project.resolve(p)).map_err(Failure::bad_input),
        None => Ok(StrategySchema::builtin()),
    }
}

/// The project's backend (`harness.kind`), a setup error under the configuration file's name.
pub fn backend(project: &Project, schema: &StrategySchema) -> Result<Box<dyn Backend>, Failure> {
    emend_eval::open(project, schema).map_err(|e| setup_failure(project, e))
}

/// A setup error under the configuration file's name, with its sources.
pub fn setup_failure(project: &Project, e: SetupError) -> Failure {
    let class = e.exit_class();
    classified(class, anyhow::Error::new(e).context(project.config_path().display().to_string()))
}

/// The one place an error's class becomes an exit code.
pub fn classified(class: ErrorClass, error: impl Into<anyhow::Error>) -> Failure {
    let code = match class {
        ErrorClass::BadInput => emend_core::exit::BAD_INPUT,
        ErrorClass::Locked => emend_core::exit::LOCKED,
        ErrorClass::Failed => emend_core::exit::FAILED,
    };
    Failure { code, error: error.into() }
}

/// An error and its causes on one line, joined by `: ` as `{:#}` joins them, except that a
/// cause whose text is already in the line is not repeated: many errors keep their cause
/// as their source and also say it in their own message, because the loop journals that
/// one message (an errored candidate's reason) without its chain.
pub fn error_line(error: &anyhow::Error) -> String {
    let mut line = error.to_string();
    for cause in error.chain().skip(1) {
        let text = cause.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    if error.chain().any(|c| {
        matches!(c.downcast_ref::<emend_journal::ErrorKind>(), Some(emend_journal::ErrorKind::DiskFull { .. }))
    }) {
        line.push_str("; `emend cache clear` empties emend's caches (.emend/cache/), which are recomputed when needed");
    }
    line
}

pub fn journal_failure(e: JournalError) -> Failure {
    classified(e.exit_class(), e)
}

pub fn store_failure(e: StoreError) -> Failure {
    classified(e.exit_class(), e)
}

pub fn evolve_failure(e: EvolveError) -> Failure {
    classified(e.exit_class(), e)
}

pub fn served_failure(e: ServedError) -> Failure {
    classified(e.exit_class(), e)
}

pub fn writer(project: &Project) -> Result<SledJournal, Failure> {
    let dir = project.journal_dir();
    std::fs::create_dir_all(&dir).map_err(|e| Failure::failed(anyhow::anyhow!("{}: {e}", dir.display())))?;
    let log = emend_journal::open_writer(&dir, EngineProjector).map_err(journal_failure)?;
    if let Some(expected) = &project.config.journal.expect_head
        && !log.contains_hash(expected).map_err(journal_failure)?
    {
        return Err(Failure::failed(anyhow::anyhow!(
            "{}: journal.expect_head {expected} is not in the journal's chain (it was rewritten or cut since that \
             head was recorded); nothing was written: run `emend journal verify` for the full report",
            project.config_path().display()
        )));
    }
    Ok(log)
}

/// How an operator's command gets the journal when another process holds it.
#[derive(Debug, Clone, Copy, Default, clap::Args)]
pub struct Takeover {
    /// Ask a running `evolve` to stop (it journals its round as interrupted and exits 4), then go on;
    /// waits for the journal for up to --wait (default 2m).
    #[arg(long)]
    pub preempt: bool,
    /// Wait for the journal while another process holds it, for up to DURATION (`--wait=30m`; default 10m), instead of exiting 3.
    #[arg(long, value_name = "DURATION", num_args = 0..=1, require_equals = true, default_missing_value = "10m",
          value_parser = emend_core::config::parse_duration)]
    pub wait: Option<std::time::Duration>,
}

/// How long `--preempt` waits for the journal without `--wait`.
const PREEMPT_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Every refusal of an operator's command, run on a view of the journal
/// before anything is written: the read view before `--preempt` asks a
/// running `evolve` to stop (or `--wait` waits), the writer's view after.
pub type Refusals<'a> = &'a dyn Fn(&dyn emend_journal::EventLog) -> Result<(), Failure>;

/// Opens the journal for an operator's command (`rollback`, `restore-best`,
/// `approve`): at once, or after asking a running `evolve` to stop
/// (`--preempt`), or after waiting for the lock (`--wait`). `command` is
/// named in the stop request. `refuse` runs on the read view before a stop
/// request is written or any waiting starts, and again on the writer's view
/// (the state may have moved meanwhile): a request it refuses stops no run.
pub fn operator_writer(
    project: &Project,
    how: Takeover,
    command: &str,
    refuse: Refusals<'_>,
) -> Result<SledJournal, Failure> {
    let log = takeover_writer(project, how, command, refuse)?;
    refuse(&log)?;
    Ok(log)
}

fn takeover_writer(
    project: &Project,
    how: Takeover,
    command: &str,
    refuse: Refusals<'_>,
) -> Result<SledJournal, Failure> {
    let dir = project.journal_dir();
    let patience = how.wait.or(how.preempt.then_some(PREEMPT_WAIT));
    let Some(patience) = patience else { return writer(project) };
    refuse(&reader(project)?)?;
    let deadline = std::time::Instant::now() + patience;
    let mut asked: Option<u32> = None;
    loop {
        match emend_journal::open_writer(&dir, EngineProjector) {
            Ok(log) => {
                if let Some(pid) = asked {
                    emend_core::stop::clear_request(&dir, pid);
                }
                return Ok(log);
            }
            Err(e) => {
                let emend_journal::ErrorKind::Locked { pid, .. } = e.kind() else { return Err(journal_failure(e)) };
                let pid = *pid;
                if how.preempt && pid != 0 && asked != Some(pid) {
                    let request = emend_core::stop::StopRequest {
                        pid,
                        by_pid: std::process::id(),
                        who: emend_core::events::who(),
                        command: command.to_string(),
                        at: emend_core::events::now_rfc3339(),
                    };
                    emend_core::stop::write_request(&dir, &request).map_err(|e| {
                        Failure::failed(anyhow::anyhow!("{}: writing the stop request: {e}", dir.display()))
                    })?;
                    eprintln!("asked pid {pid}, which holds the journal, to stop; waiting for it");
                    asked = Some(pid);
                }
                if std::time::Instant::now() >= deadline {
                    if let Some(pid) = asked {
                        emend_core::stop::clear_request(&dir, pid);
                    }
                    let mut failure = journal_failure(e);
                    failure.error = failure.error.context(format!("waited {}s for the journal", patience.as_secs()));
                    return Err(failure);
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
    }
}

/// Opens the journal for a read command: the view the writer publishes after each
/// committed batch, read without the journal's lock (a running `evolve` is never disturbed,
/// and a read-only project directory is enough).
pub fn reader(project: &Project) -> Result<ReadView, Failure> {
    emend_journal::open_view(project.journal_dir(), EngineProjector).map_err(|e| {
        if matches!(e.kind(), emend_journal::ErrorKind::NotFound { .. }) {
            Failure::bad_input(anyhow::anyhow!(
                "{}: no journal yet (run `emend evolve` or `emend init` first)",
                project.journal_dir().display()
            ))
        } else {
            journal_failure(e)
        }
    })
}

/// Whether this process has printed its JSON result: a command that fails after
/// printing it (an `eval` with unanswered questions) prints no error object after
/// it, so stdout stays one JSON document.
static JSON_PRINTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Reports each hook failure the library returned on stderr (the change
/// itself stands and the exit code does not move).
pub fn warn_hook_failures<'a>(failures: impl IntoIterator<Item = &'a String>) {
    for message in failures {
        eprintln!("warning: {}", emend_core::sanitize::escape_controls(message));
    }
}

pub fn json_printed() -> bool {
    JSON_PRINTED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Prints a value as pretty JSON on stdout.
pub fn print_json(v: &serde_json::Value) {
    print_json_text(&serde_json::to_string_pretty(v).expect("JSON renders"));
}

/// Notes that the command's JSON result is being printed (by the caller).
pub fn mark_json_printed() {
    JSON_PRINTED.store(true, std::sync::atomic::Ordering::SeqCst);
}

/// Prints an already rendered JSON document on stdout.
pub fn print_json_text(text: &str) {
    JSON_PRINTED.store(true, std::sync::atomic::Ordering::SeqCst);
    println!("{text}");
}

/// The rule for every output path a command writes (`--out`, `--outcomes`, the
/// worker's OUT): a parent directory that does not exist is bad input (exit 2),
/// checked before any work; a write that fails in an existing directory is a
/// failed run (exit 1, [`write_output`]).
pub fn check_output_dir(flag: &str, path: &Path) -> Result<(), Failure> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if dir.is_dir() {
        return Ok(());
    }
    Err(Failure::bad_input(anyhow::anyhow!("{flag} {}: no directory {}", path.display(), dir.display())))
}

/// Writes an output file atomically under [`check_output_dir`]'s rule.
pub fn write_output(flag: &str, path: &Path, bytes: &[u8]) -> Result<(), Failure> {
    check_output_dir(flag, path)?;
    emend_core::artifact::write_atomic(path, bytes)
        .map_err(|e| Failure::failed(anyhow::anyhow!("{flag} {}: cannot write: {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("evaluating v1 failed: {source}")]
    struct Says {
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("reading the journal")]
    struct Keeps {
        #[source]
        source: std::io::Error,
    }

    #[test]
    fn a_cause_is_printed_once_whether_or_not_its_error_says_it() {
        let io = || std::io::Error::other("disk on fire");
        let said = anyhow::Error::new(Says { source: io() }).context("emend.yaml");
        assert_eq!(format!("{said:#}"), "emend.yaml: evaluating v1 failed: disk on fire: disk on fire");
        assert_eq!(error_line(&said), "emend.yaml: evaluating v1 failed: disk on fire");
        let kept = anyhow::Error::new(Keeps { source: io() });
        assert_eq!(error_line(&kept), "reading the journal: disk on fire");
    }
}
