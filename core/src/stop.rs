//! Stopping a run cleanly: one process-wide stop request, set by a signal
//! (SIGINT, SIGTERM), by a closed output pipe, or by an operator's command
//! (`rollback`, `approve`, `restore-best` with `--preempt`) that writes a stop
//! request file for the journal's writer.
//!
//! The loop reads [`requested`] between evaluations. A round in progress is
//! abandoned before anything of it is journaled (a round's events are one
//! batch, written at its end), the run journals an `interrupted` event, and the
//! binary exits with [`Cause::exit_code`]. A second SIGINT or SIGTERM exits at
//! once (the journal's batches are atomic, so what is on disk stays whole).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Why a run was asked to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// An operator's command asked for the journal (`--preempt`).
    Preempted,
    /// SIGINT (Ctrl-C).
    Interrupt,
    /// SIGTERM.
    Terminate,
    /// The reader of stdout or stderr went away (a broken pipe).
    OutputClosed,
}

impl Cause {
    /// The exit code of a run that stopped for this cause: `exit::PREEMPTED`, or 128 plus the signal.
    pub fn exit_code(self) -> u8 {
        match self {
            Cause::Preempted => crate::exit::PREEMPTED,
            Cause::Interrupt => 130,
            Cause::Terminate => 143,
            Cause::OutputClosed => 141,
        }
    }

    /// The word journaled and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Preempted => "preempted",
            Cause::Interrupt => "SIGINT",
            Cause::Terminate => "SIGTERM",
            Cause::OutputClosed => "output closed",
        }
    }

    fn code(self) -> u8 {
        match self {
            Cause::Preempted => 1,
            Cause::Interrupt => 2,
            Cause::Terminate => 3,
            Cause::OutputClosed => 4,
        }
    }

    fn of_code(code: u8) -> Option<Cause> {
        match code {
            1 => Some(Cause::Preempted),
            2 => Some(Cause::Interrupt),
            3 => Some(Cause::Terminate),
            4 => Some(Cause::OutputClosed),
            _ => None,
        }
    }
}

/// The first cause asked for (0: none).
static CAUSE: AtomicU8 = AtomicU8::new(0);
/// Set by the signal handlers (a handler may only store to an atomic).
static SIGNALS: OnceLock<(Arc<AtomicBool>, Arc<AtomicBool>)> = OnceLock::new();
/// The stop request that preempted this run, once read.
static REQUEST: OnceLock<StopRequest> = OnceLock::new();

/// Asks the run to stop; the first cause asked for is the one kept.
pub fn request(cause: Cause) {
    let _ = CAUSE.compare_exchange(0, cause.code(), Ordering::SeqCst, Ordering::SeqCst);
}

/// Whether (and why) the run was asked to stop.
pub fn requested() -> Option<Cause> {
    if let Some((int, term)) = SIGNALS.get() {
        if int.load(Ordering::SeqCst) {
            request(Cause::Interrupt);
        } else if term.load(Ordering::SeqCst) {
            request(Cause::Terminate);
        }
    }
    Cause::of_code(CAUSE.load(Ordering::SeqCst))
}

/// Whether a signal asked the run to stop (a running hook is then killed too).
pub fn signalled() -> bool {
    matches!(requested(), Some(Cause::Interrupt | Cause::Terminate))
}

/// The operator's request that preempted this run, when one did.
pub fn preempted_by() -> Option<&'static StopRequest> {
    REQUEST.get()
}

/// Catches SIGINT and SIGTERM: the first asks the run to stop, the second
/// exits at once with 130 or 143.
pub fn catch_signals() -> std::io::Result<()> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    use signal_hook::flag;
    let int = Arc::new(AtomicBool::new(false));
    let term = Arc::new(AtomicBool::new(false));
    // A second signal of either kind: the conditional shutdown is registered first,
    // so it sees the flag the first signal set.
    for (sig, code) in [(SIGINT, 130), (SIGTERM, 143)] {
        flag::register_conditional_shutdown(sig, code, Arc::clone(&int))?;
        flag::register_conditional_shutdown(sig, code, Arc::clone(&term))?;
    }
    flag::register(SIGINT, Arc::clone(&int))?;
    flag::register(SIGTERM, Arc::clone(&term))?;
    let _ = SIGNALS.set((int, term));
    Ok(())
}

/// Name of the stop request file, beside the journal's LOCK file.
pub const REQUEST_FILE: &str = "STOP";

/// An operator's request that the journal's writer stop: the writer's pid (as
/// its LOCK file named it), and who asked, with which command, when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StopRequest {
    /// The process asked to stop.
    pub pid: u32,
    /// The asking process.
    pub by_pid: u32,
    /// `user@host` of the asking process.
    pub who: String,
    /// The asking command (`rollback --to v3`).
    pub command: String,
    pub at: String,
}

pub fn request_path(journal_dir: &Path) -> PathBuf {
    journal_dir.join(REQUEST_FILE)
}

/// Writes a stop request for the writer `pid` (atomically: a temporary file renamed).
pub fn write_request(journal_dir: &Path, request: &StopRequest) -> std::io::Result<()> {
    let path = request_path(journal_dir);
    let tmp = journal_dir.join(format!("{REQUEST_FILE}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, serde_json::to_vec(request).expect("a stop request serializes"))?;
    std::fs::rename(&tmp, &path)
}

/// Removes the stop request file when it is addressed to `pid` (or unreadable).
pub fn clear_request(journal_dir: &Path, pid: u32) {
    let path = request_path(journal_dir);
    match read_request(&path) {
        Some(r) if r.pid != pid => {}
        _ => {
            let _ = std::fs::remove_file(&path);
        }
    }
}

fn read_request(path: &Path) -> Option<StopRequest> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// Watches `journal_dir` for a stop request addressed to this process, every
/// `every`, for as long as the process runs; a request found asks the run to stop.
pub fn watch_requests(journal_dir: PathBuf, every: Duration) {
    let me = std::process::id();
    // A request left for an earlier writer of this pid's predecessors is not ours.
    clear_request(&journal_dir, me);
    let path = request_path(&journal_dir);
    std::thread::Builder::new()
        .name("emend-stop-watch".into())
        .spawn(move || {
            loop {
                if let Some(r) = read_request(&path)
                    && r.pid == me
                {
                    let _ = REQUEST.set(r);
                    request(Cause::Preempted);
                    return;
                }
                std::thread::sleep(every);
            }
        })
        .expect("a thread can be started");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_are_128_plus_the_signal_and_the_preemption_code() {
        assert_eq!(Cause::Interrupt.exit_code(), 130);
        assert_eq!(Cause::Terminate.exit_code(), 143);
        assert_eq!(Cause::OutputClosed.exit_code(), 141);
        assert_eq!(Cause::Preempted.exit_code(), crate::exit::PREEMPTED);
        for c in [Cause::Preempted, Cause::Interrupt, Cause::Terminate, Cause::OutputClosed] {
            assert_eq!(Cause::of_code(c.code()), Some(c));
        }
    }

    #[test]
    fn a_request_for_another_writer_is_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let r = StopRequest { pid: 7, by_pid: 8, who: "a@b".into(), command: "rollback".into(), at: "t".into() };
        write_request(dir.path(), &r).unwrap();
        clear_request(dir.path(), 9);
        assert_eq!(read_request(&request_path(dir.path())), Some(r));
        clear_request(dir.path(), 7);
        assert!(!request_path(dir.path()).exists());
    }
}
