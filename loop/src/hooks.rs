//! Telling the serving system: `hooks.on_served` runs after every change of
//! the served version (whatever caused it), `hooks.on_pending` after a
//! version becomes pending. A hook runs without a shell, in the project
//! directory, with its facts in `EMEND_*` variables, and is killed (with its
//! process group) at `hooks.timeout`. The change it reports is already
//! committed, so a failure does not undo it: the failure is journaled as a
//! `hook_failed` event and returned as a message for the caller to report
//! (the binary prints it on stderr), never passed over.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use emend_journal::EventLog;

use emend_core::config::Project;
use emend_core::events::{Event, now_rfc3339};

/// Why the served version changed, as a hook sees it (`EMEND_CHANGE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Accepted,
    Approved,
    Rollback,
    RestoreBest,
    AutoRestore,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Accepted => "accepted",
            Change::Approved => "approved",
            Change::Rollback => "rollback",
            Change::RestoreBest => "restore-best",
            Change::AutoRestore => "auto-restore",
        }
    }
}

/// Runs `argv` in `dir` with `env` added, killing it (and its process group)
/// after `timeout`. `Err` says what went wrong: spawn error, exit status or timeout.
pub fn run(argv: &[String], env: &[(String, String)], dir: &Path, timeout: Duration) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let Some(program) = argv.first() else { return Err("empty argv".into()) };
    // A relative program path with a slash is relative to the project, as every path of emend.yaml.
    let resolved: PathBuf =
        if program.contains('/') && Path::new(program).is_relative() { dir.join(program) } else { program.into() };
    let mut cmd = Command::new(&resolved);
    cmd.args(&argv[1..]).current_dir(dir).envs(env.iter().cloned()).stdin(Stdio::null()).process_group(0);
    // The hook's output goes to stderr: stdout belongs to emend's own (perhaps JSON) output.
    if let Ok(fd) = std::os::fd::AsFd::as_fd(&std::io::stderr()).try_clone_to_owned() {
        cmd.stdout(Stdio::from(fd));
    }
    let mut child = cmd.spawn().map_err(|e| format!("cannot start {}: {e}", resolved.display()))?;
    let started = Instant::now();
    let mut pause = Duration::from_millis(5);
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => return Err(format!("{} {status}", resolved.display())),
            Ok(None) => {}
            Err(e) => return Err(format!("waiting for {}: {e}", resolved.display())),
        }
        // A signal that stops emend (SIGINT, SIGTERM) stops the hook too: no process is left behind.
        let signalled = emend_core::stop::signalled();
        if signalled || started.elapsed() >= timeout {
            let pgid = child.id() as libc::pid_t;
            // SAFETY: kill has no memory effects; the group is the hook's own (process_group(0)).
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            let _ = child.kill();
            let _ = child.wait();
            return Err(match signalled {
                true => format!("{} killed: emend was stopped by a signal", resolved.display()),
                false => format!("{} still running after {timeout:?}; killed", resolved.display()),
            });
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// Journals a failed hook. Returns the message to report (which says so when
/// the failure itself could not be journaled).
fn failed<L: EventLog + ?Sized>(log: &mut L, hook: &str, version: u64, change: &str, error: String) -> String {
    let message = format!("hooks.{hook} failed for v{version} ({change}): {error}; the change itself stands");
    let event = Event::HookFailed { hook: hook.into(), version, change: change.into(), error, at: now_rfc3339() };
    match log.append(vec![event.to_new()]) {
        Ok(_) => message,
        Err(e) => format!("{message} (the failure could not be journaled: {e})"),
    }
}

fn base_env(project: &Project) -> Vec<(String, String)> {
    let dir = std::path::absolute(&project.dir).unwrap_or_else(|_| project.dir.clone());
    let file = std::path::absolute(project.strategy_path()).unwrap_or_else(|_| project.strategy_path());
    vec![("EMEND_PROJECT".into(), dir.display().to_string()), ("EMEND_SERVED_FILE".into(), file.display().to_string())]
}

/// Runs `hooks.on_served` after the served version moved from `from` to `to`.
/// `Some(message)` when it failed (journaled and reported on stderr).
pub fn on_served<L: EventLog + ?Sized>(
    project: &Project,
    log: &mut L,
    from: Option<u64>,
    to: u64,
    hash: &str,
    change: Change,
) -> Option<String> {
    let argv = project.config.hooks.on_served.as_ref()?;
    let mut env = base_env(project);
    env.extend([
        ("EMEND_SERVED_VERSION".into(), to.to_string()),
        ("EMEND_PREVIOUS_VERSION".into(), from.map_or(String::new(), |v| v.to_string())),
        ("EMEND_SERVED_HASH".into(), hash.to_string()),
        ("EMEND_CHANGE".into(), change.as_str().to_string()),
    ]);
    let result = run(argv, &env, &project.dir, project.config.hooks.timeout);
    result.err().map(|e| failed(log, "on_served", to, change.as_str(), e))
}

/// Runs `hooks.on_pending` after `version` (child of `parent`) became pending
/// while `served` stays served, superseding `supersedes`. `Some(message)` when it failed.
pub fn on_pending<L: EventLog + ?Sized>(
    project: &Project,
    log: &mut L,
    version: u64,
    parent: u64,
    hash: &str,
    served: u64,
    supersedes: &[u64],
) -> Option<String> {
    let argv = project.config.hooks.on_pending.as_ref()?;
    let superseded: Vec<String> = supersedes.iter().map(u64::to_string).collect();
    let mut env = base_env(project);
    env.extend([
        ("EMEND_PENDING_VERSION".into(), version.to_string()),
        ("EMEND_PENDING_PARENT".into(), parent.to_string()),
        ("EMEND_PENDING_HASH".into(), hash.to_string()),
        ("EMEND_SERVED_VERSION".into(), served.to_string()),
        ("EMEND_PENDING_SUPERSEDES".into(), superseded.join(" ")),
        ("EMEND_CHANGE".into(), "pending".into()),
    ]);
    let result = run(argv, &env, &project.dir, project.config.hooks.timeout);
    result.err().map(|e| failed(log, "on_pending", version, "pending", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Vec<String> {
        vec!["/bin/sh".into(), "-c".into(), script.into()]
    }

    #[test]
    fn a_hook_sees_its_environment_and_runs_in_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let env = [("EMEND_CHANGE".to_string(), "accepted".to_string())];
        run(&sh("printf '%s' \"$EMEND_CHANGE\" > out"), &env, dir.path(), Duration::from_secs(10)).unwrap();
        assert_eq!(std::fs::read_to_string(dir.path().join("out")).unwrap(), "accepted");
    }

    #[test]
    fn non_zero_exit_spawn_error_and_timeout_are_failures() {
        let dir = tempfile::tempdir().unwrap();
        let e = run(&sh("exit 3"), &[], dir.path(), Duration::from_secs(10)).unwrap_err();
        assert!(e.contains("exit status: 3"), "{e}");
        let e = run(&["./no-such-hook".into()], &[], dir.path(), Duration::from_secs(10)).unwrap_err();
        assert!(e.contains("cannot start") && e.contains("no-such-hook"), "{e}");
        let started = Instant::now();
        // The child sleep is in the hook's process group: it is killed too.
        let e = run(&sh("sleep 30; true"), &[], dir.path(), Duration::from_millis(200)).unwrap_err();
        assert!(e.contains("killed"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(20));
    }
}
