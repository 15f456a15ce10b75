//! The Ray executor: shard attempts as Ray tasks, through one long-lived
//! driver process (`python3 -m emend_ray serve`, examples/ray) per backend.
//!
//! The driver connects to the cluster once, when the first attempt needs it,
//! and then runs every attempt emend sends it: a JSON request per line on its
//! standard input, an answer per line on its standard output saying what the
//! command did on the worker (its exit status or its signal), with the
//! outcomes and the stderr tail written to the attempt's files, as a local
//! process would have left them. So the rules for local shards (timeout,
//! one retry, outcome validation) apply unchanged. Connecting and starting
//! Ray workers cost seconds; paying them once per run instead of once per
//! attempt is what makes a search through Ray usable.
//!
//! A driver that stops (it could not connect, it crashed, it wrote something
//! that is not an answer, it exited before it read a request) fails the
//! attempts it had with exit status 75, naming the driver, with its exit
//! status and its own stderr tail; the retry starts a new driver. Writing a
//! request to a driver that is gone is an error emend handles (EPIPE), never
//! a SIGPIPE that kills it.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{CommandSpec, RunError};
use emend_core::setup::SetupError;

/// How emend reaches a Ray cluster.
#[derive(Debug, Clone, PartialEq)]
pub struct RaySpec {
    /// The cluster address given to the driver.
    pub address: String,
    /// The Python that runs the driver.
    pub python: String,
    /// The driver script; None: the installed module (`python -m emend_ray`).
    pub driver: Option<PathBuf>,
    /// `harness.command.workdir` as configured: the command's directory on the
    /// worker. None: a fresh temporary directory there.
    pub workdir: Option<PathBuf>,
}

/// Time an attempt gets beyond the command's own timeout (starting the
/// driver and connecting it to the cluster, scheduling, moving the shard's
/// bytes). The command itself is killed on the worker after `timeout_secs`.
pub const RAY_GRACE: Duration = Duration::from_secs(120);

/// The exit status of an attempt whose Ray task or driver was lost (the
/// driver's own code for it, EX_TEMPFAIL): retried like any failed command.
const EXIT_TASK_LOST: i32 = 75;

/// The driver's stderr kept for messages.
const DRIVER_LOG_BYTES: usize = 4096;

/// How long a lost attempt waits for the stopped driver's stderr to end.
const LAST_WORDS_WAIT: Duration = Duration::from_secs(2);

/// How long a driver gets to cancel its tasks and disconnect when emend is done with it.
const DRIVER_EXIT_WAIT: Duration = Duration::from_secs(10);

impl RaySpec {
    /// From `harness.ray` (paths against `base`); the address falls back to `RAY_ADDRESS`.
    pub fn from_config(
        c: &emend_core::config::RayConfig,
        command_workdir: Option<&Path>,
        base: &Path,
        ray_address_env: Option<String>,
    ) -> Result<RaySpec, SetupError> {
        let address = c.address.clone().or(ray_address_env).filter(|a| !a.trim().is_empty()).ok_or_else(|| {
            SetupError::new(
                "harness.executor: ray needs a cluster address: set harness.ray.address or the RAY_ADDRESS variable",
            )
        })?;
        if c.python.trim().is_empty() {
            return Err(SetupError::new("harness.ray.python: must name a program"));
        }
        let driver = match &c.driver {
            Some(d) => {
                let p = if d.is_absolute() { d.clone() } else { base.join(d) };
                if !p.is_file() {
                    return Err(SetupError::new(format!("harness.ray.driver: {}: no such file", p.display())));
                }
                Some(std::path::absolute(&p).unwrap_or(p))
            }
            None => None,
        };
        let workdir = command_workdir.map(|w| if w.is_absolute() { w.to_path_buf() } else { base.join(w) });
        Ok(RaySpec { address, python: c.python.clone(), driver, workdir })
    }

    /// The driver as messages name it: its Python and script (or module).
    fn driver_name(&self) -> String {
        match &self.driver {
            Some(d) => format!("{} {}", self.python, d.display()),
            None => format!("{} -m emend_ray", self.python),
        }
    }

    /// The driver's command line.
    fn driver_argv(&self) -> Vec<String> {
        let mut a = vec![self.python.clone()];
        match &self.driver {
            Some(d) => a.push(d.display().to_string()),
            None => a.extend(["-m".to_string(), "emend_ray".to_string()]),
        }
        a.extend(["serve".to_string(), "--address".to_string(), self.address.clone()]);
        a
    }

    /// The request line of one attempt (without its newline).
    fn request(&self, id: u64, spec: &CommandSpec, files: &AttemptFiles<'_>) -> String {
        let path = |p: &Path| p.display().to_string();
        json!({
            "id": id,
            "strategy": path(files.strategy),
            "tasks": path(files.tasks),
            "out": path(files.out),
            "stderr": path(files.stderr),
            "timeout": spec.timeout.as_secs_f64(),
            "workdir": self.workdir.as_deref().map(path),
            "env": spec.env,
            "argv": spec.argv.iter().map(|arg| self.worker_arg(spec, arg)).collect::<Vec<_>>(),
        })
        .to_string()
    }

    /// A command argument as the worker sees it. Without a configured workdir
    /// the command runs in a fresh directory on the worker, so an argument
    /// naming a file relative to the project (as `init` writes them, e.g.
    /// `examples/adapter.py`) is made absolute; other arguments travel as they are.
    fn worker_arg(&self, spec: &CommandSpec, arg: &str) -> String {
        let path = Path::new(arg);
        if self.workdir.is_some() || arg.contains('{') || arg.starts_with('-') || path.is_absolute() {
            return arg.to_string();
        }
        let joined = spec.workdir.join(path);
        if joined.is_file() {
            std::path::absolute(&joined).unwrap_or(joined).display().to_string()
        } else {
            arg.to_string()
        }
    }
}

/// The files of one attempt, on this machine.
pub(super) struct AttemptFiles<'a> {
    pub strategy: &'a Path,
    pub tasks: &'a Path,
    pub out: &'a Path,
    pub stderr: &'a Path,
}

/// A backend's way to its cluster: the driver, started on first use and
/// again after it stopped.
pub(super) struct RaySession {
    spec: RaySpec,
    driver: Mutex<Option<Arc<Driver>>>,
    next_id: AtomicU64,
}

impl std::fmt::Debug for RaySession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaySession").field("spec", &self.spec).finish()
    }
}

/// What the driver said of an attempt.
enum Answer {
    Finished(ExitStatus),
    /// The driver stopped before it answered.
    Lost,
}

impl RaySession {
    pub fn new(spec: RaySpec) -> RaySession {
        RaySession { spec, driver: Mutex::new(None), next_id: AtomicU64::new(1) }
    }

    /// The program that runs the driver, as an error message names it.
    pub fn program(&self) -> String {
        self.spec.python.clone()
    }

    /// Runs one attempt on the cluster: what the command did there, as
    /// [`super::run_with_timeout`] reports a local process.
    pub fn run(
        &self,
        spec: &CommandSpec,
        files: &AttemptFiles<'_>,
        timeout: Duration,
        cancel: &AtomicBool,
    ) -> Result<ExitStatus, RunError> {
        let start = Instant::now();
        let driver = self.driver(spec)?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        driver.waiting.lock().expect("no panics holding the lock").insert(id, tx);
        if !driver.alive.load(Ordering::SeqCst) || driver.send(&self.spec.request(id, spec, files)).is_err() {
            driver.waiting.lock().expect("no panics holding the lock").remove(&id);
            return Ok(lost(&driver, files.stderr));
        }
        loop {
            match rx.recv_timeout(Duration::from_millis(20)) {
                Ok(Answer::Finished(status)) => return Ok(status),
                Ok(Answer::Lost) | Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(lost(&driver, files.stderr)),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            let why = if cancel.load(Ordering::SeqCst) {
                RunError::Cancelled
            } else if start.elapsed() >= timeout {
                RunError::TimedOut
            } else {
                continue;
            };
            driver.waiting.lock().expect("no panics holding the lock").remove(&id);
            let _ = driver.send(&json!({ "cancel": id }).to_string());
            return Err(why);
        }
    }

    /// The running driver, or a new one.
    fn driver(&self, spec: &CommandSpec) -> Result<Arc<Driver>, RunError> {
        let mut slot = self.driver.lock().expect("no panics holding the lock");
        if let Some(d) = slot.as_ref().filter(|d| d.alive.load(Ordering::SeqCst)) {
            return Ok(Arc::clone(d));
        }
        let d = Arc::new(
            Driver::start(&self.spec.driver_argv(), self.spec.driver_name(), &spec.workdir).map_err(RunError::Spawn)?,
        );
        *slot = Some(Arc::clone(&d));
        Ok(d)
    }
}

/// Says in the attempt's stderr file that the driver stopped, naming it,
/// with its exit status and its own last words, and reports the attempt as lost.
fn lost(driver: &Driver, stderr: &Path) -> ExitStatus {
    driver.alive.store(false, Ordering::SeqCst);
    // Its last words may still be on their way: give the driver a moment to
    // exit and its stderr to be read to the end.
    let start = Instant::now();
    let mut exited = None;
    while start.elapsed() < LAST_WORDS_WAIT {
        exited = exited.or_else(|| driver.child.lock().expect("no panics holding the lock").try_wait().ok().flatten());
        if exited.is_some() && driver.log_closed.load(Ordering::SeqCst) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let how = match exited {
        Some(status) => match (status.code(), status.signal()) {
            (Some(code), _) => format!("exit status {code}"),
            (None, Some(sig)) => format!("killed by signal {sig}"),
            _ => status.to_string(),
        },
        None => "still running, its input or output closed".to_string(),
    };
    let log = driver.log.lock().expect("no panics holding the lock");
    let said = String::from_utf8_lossy(&log);
    let said = said.trim();
    let name = &driver.name;
    let text = if said.is_empty() {
        format!("emend-ray: the Ray driver stopped before it answered ({name}: {how}); it printed nothing\n")
    } else {
        format!("emend-ray: the Ray driver stopped before it answered ({name}: {how}); it said:\n{said}\n")
    };
    let _ = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(stderr)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    ExitStatus::from_raw(EXIT_TASK_LOST << 8)
}

/// One `emend_ray serve` process and the attempts waiting for its answers.
struct Driver {
    /// What messages call it ([`RaySpec::driver_name`]).
    name: String,
    child: Mutex<Child>,
    stdin: Mutex<Option<ChildStdin>>,
    waiting: Arc<Mutex<HashMap<u64, mpsc::Sender<Answer>>>>,
    alive: Arc<AtomicBool>,
    /// The last [`DRIVER_LOG_BYTES`] of its stderr.
    log: Arc<Mutex<Vec<u8>>>,
    /// Its stderr has ended.
    log_closed: Arc<AtomicBool>,
}

impl Driver {
    fn start(argv: &[String], name: String, dir: &Path) -> std::io::Result<Driver> {
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        tracing::info!("Ray driver started (pid {}): {}", child.id(), argv.join(" "));
        let stdin = child.stdin.take();
        let (stdout, stderr) = (child.stdout.take().expect("piped"), child.stderr.take().expect("piped"));
        let waiting: Arc<Mutex<HashMap<u64, mpsc::Sender<Answer>>>> = Arc::default();
        let alive = Arc::new(AtomicBool::new(true));
        let log: Arc<Mutex<Vec<u8>>> = Arc::default();
        let log_closed = Arc::new(AtomicBool::new(false));
        {
            let (log, closed) = (Arc::clone(&log), Arc::clone(&log_closed));
            std::thread::spawn(move || {
                keep_tail(stderr, &log);
                closed.store(true, Ordering::SeqCst);
            });
        }
        {
            let (waiting, alive, log) = (Arc::clone(&waiting), Arc::clone(&alive), Arc::clone(&log));
            std::thread::spawn(move || read_answers(stdout, &waiting, &alive, &log));
        }
        Ok(Driver { name, child: Mutex::new(child), stdin: Mutex::new(stdin), waiting, alive, log, log_closed })
    }

    /// Writes a line to the driver. A driver that exited (or closed its
    /// input) makes this an error, EPIPE, never the SIGPIPE that would kill
    /// emend: the caller reports the attempt as lost, with the driver's stderr.
    fn send(&self, line: &str) -> std::io::Result<()> {
        let mut stdin = self.stdin.lock().expect("no panics holding the lock");
        let w = stdin.as_mut().ok_or_else(|| std::io::Error::from(std::io::ErrorKind::BrokenPipe))?;
        without_sigpipe(|| {
            w.write_all(line.as_bytes())?;
            w.write_all(b"\n")?;
            w.flush()
        })
    }
}

impl Drop for Driver {
    /// Ends the driver's input (it cancels what still runs and disconnects),
    /// waits for it a little, then kills it.
    fn drop(&mut self) {
        drop(self.stdin.lock().map(|mut s| s.take()));
        let Ok(mut child) = self.child.lock() else { return };
        let start = Instant::now();
        while start.elapsed() < DRIVER_EXIT_WAIT {
            if !matches!(child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// Runs `write` with SIGPIPE blocked on this thread, and takes back a SIGPIPE
/// the write raised, so a write to a pipe whose reader is gone fails with
/// EPIPE instead of killing the process. The binary keeps SIGPIPE's default
/// action (a closed stdout ends `emend log | head` quietly), so the driver's
/// pipe cannot rely on it being ignored. The signal of a write to a pipe is
/// sent to the writing thread, which is why blocking it here is enough.
fn without_sigpipe(write: impl FnOnce() -> std::io::Result<()>) -> std::io::Result<()> {
    // SAFETY: the sigset_t values are initialised by sigemptyset before use,
    // every pointer is valid for its call, and the thread's signal mask is
    // restored before returning.
    unsafe {
        let mut pipe: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut pipe);
        libc::sigaddset(&mut pipe, libc::SIGPIPE);
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, &pipe, &mut old);
        let pending_before = sigpipe_pending();
        let result = write();
        if !pending_before && sigpipe_pending() {
            let mut sig = 0;
            libc::sigwait(&pipe, &mut sig);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        result
    }
}

/// Whether a SIGPIPE is pending for this thread (or the process).
fn sigpipe_pending() -> bool {
    // SAFETY: `set` is filled by sigpending before sigismember reads it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigpending(&mut set) == 0 && libc::sigismember(&set, libc::SIGPIPE) == 1
    }
}

/// Keeps the last bytes of the driver's stderr.
fn keep_tail(mut stderr: impl Read, log: &Mutex<Vec<u8>>) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = stderr.read(&mut buf) {
        if n == 0 {
            return;
        }
        let mut log = log.lock().expect("no panics holding the lock");
        log.extend_from_slice(&buf[..n]);
        let excess = log.len().saturating_sub(DRIVER_LOG_BYTES);
        log.drain(..excess);
    }
}

/// Hands each answer to the attempt waiting for it; at the end of the
/// driver's output, or at a line that is not an answer, the driver is done
/// and every attempt still waiting is lost.
fn read_answers(
    stdout: impl Read,
    waiting: &Mutex<HashMap<u64, mpsc::Sender<Answer>>>,
    alive: &AtomicBool,
    log: &Mutex<Vec<u8>>,
) {
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        if line.trim().is_empty() {
            continue;
        }
        match parse_answer(&line) {
            Some((id, status)) => {
                if let Some(tx) = waiting.lock().expect("no panics holding the lock").remove(&id) {
                    let _ = tx.send(Answer::Finished(status));
                }
            }
            None => {
                let mut log = log.lock().expect("no panics holding the lock");
                log.extend_from_slice(
                    format!("emend: not an answer of the driver's protocol: {line:.200}\n").as_bytes(),
                );
                break;
            }
        }
    }
    alive.store(false, Ordering::SeqCst);
    for (_, tx) in waiting.lock().expect("no panics holding the lock").drain() {
        let _ = tx.send(Answer::Lost);
    }
}

/// `{"id": N, "exit": STATUS}` or `{"id": N, "signal": SIGNAL}`.
fn parse_answer(line: &str) -> Option<(u64, ExitStatus)> {
    let v: Value = serde_json::from_str(line).ok()?;
    let id = v.get("id")?.as_u64()?;
    let small = |x: &Value| x.as_i64().and_then(|n| i32::try_from(n).ok());
    let status = match (v.get("exit").and_then(small), v.get("signal").and_then(small)) {
        (Some(code), None) if (0..=255).contains(&code) => ExitStatus::from_raw(code << 8),
        (None, Some(sig)) if (1..=127).contains(&sig) => ExitStatus::from_raw(sig),
        _ => return None,
    };
    Some((id, status))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_exit_statuses_or_signals_and_nothing_else() {
        let (id, s) = parse_answer(r#"{"id": 3, "exit": 0}"#).unwrap();
        assert_eq!((id, s.code()), (3, Some(0)));
        let (_, s) = parse_answer(r#"{"id": 4, "exit": 75}"#).unwrap();
        assert_eq!(s.code(), Some(75));
        let (_, s) = parse_answer(r#"{"id": 5, "signal": 9}"#).unwrap();
        assert_eq!((s.code(), s.signal()), (None, Some(9)));
        for bad in [
            "ready",
            r#"{"exit": 0}"#,
            r#"{"id": -1, "exit": 0}"#,
            r#"{"id": 1, "exit": 256}"#,
            r#"{"id": 1, "signal": 0}"#,
            r#"{"id": 1, "exit": 0, "signal": 9}"#,
        ] {
            assert!(parse_answer(bad).is_none(), "{bad}");
        }
    }

    fn spec(dir: &Path) -> CommandSpec {
        CommandSpec {
            argv: vec!["python3".into(), "a.py".into(), "{strategy}".into(), "{tasks}".into(), "{out}".into()],
            workdir: dir.to_path_buf(),
            env: [("K".to_string(), "v".to_string())].into(),
            timeout: Duration::from_secs(30),
            shards: 1,
            concurrency: 1,
        }
    }

    #[test]
    fn the_ray_executor_needs_an_address_and_sends_the_command_as_configured() {
        let base = std::env::temp_dir();
        let c = emend_core::config::RayConfig::default();
        let e = RaySpec::from_config(&c, None, &base, None).unwrap_err();
        assert!(e.to_string().starts_with("harness.executor: ray needs a cluster address"), "{}", e.to_string());
        let r = RaySpec::from_config(&c, None, &base, Some("127.0.0.1:6399".into())).unwrap();
        assert_eq!(r.driver_argv().join(" "), "python3 -m emend_ray serve --address 127.0.0.1:6399");
        let files = AttemptFiles {
            strategy: Path::new("/s.json"),
            tasks: Path::new("/t.json"),
            out: Path::new("/o.jsonl"),
            stderr: Path::new("/e.log"),
        };
        let req: Value = serde_json::from_str(&r.request(7, &spec(&base), &files)).unwrap();
        assert_eq!(
            req,
            json!({"id": 7, "strategy": "/s.json", "tasks": "/t.json", "out": "/o.jsonl", "stderr": "/e.log",
                   "timeout": 30.0, "workdir": null, "env": {"K": "v"},
                   "argv": ["python3", "a.py", "{strategy}", "{tasks}", "{out}"]})
        );
        let configured = emend_core::config::RayConfig { address: Some("ray://h:10001".into()), ..c };
        let r = RaySpec::from_config(&configured, Some(Path::new("/srv")), &base, Some("ignored".into())).unwrap();
        assert_eq!(r.address, "ray://h:10001");
        assert_eq!(r.workdir.as_deref(), Some(Path::new("/srv")));
        let missing = emend_core::config::RayConfig { driver: Some("no/such/driver.py".into()), ..configured };
        let e = RaySpec::from_config(&missing, None, &base, None).unwrap_err();
        assert!(e.to_string().starts_with("harness.ray.driver: "), "{}", e.to_string());
    }

    /// A stand-in driver (a shell script speaking the protocol) shows the
    /// session's side of it: answers reach their attempts, one driver serves
    /// many attempts, and a driver that stops fails what it had and is
    /// replaced on the next attempt.
    #[test]
    fn one_driver_serves_many_attempts_and_a_stopped_one_is_replaced() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        // Answers each request with exit 0 after writing "ok" to its out file;
        // a request whose tasks path ends in "stop" makes it say why and exit.
        let script = dir.join("driver.sh");
        std::fs::write(
            &script,
            "echo started >> starts.log\n\
             while IFS= read -r line; do\n\
               id=$(printf '%s' \"$line\" | sed 's/.*\"id\": *\\([0-9]*\\).*/\\1/')\n\
               case \"$line\" in *stop.json*) echo 'cannot reach the cluster' >&2; exit 3;; esac\n\
               out=$(printf '%s' \"$line\" | sed 's/.*\"out\": *\"\\([^\"]*\\)\".*/\\1/')\n\
               echo ok > \"$out\"\n\
               echo \"{\\\"id\\\": $id, \\\"exit\\\": 0}\"\n\
             done\n",
        )
        .unwrap();
        let ray = RaySpec {
            address: "unused".into(),
            python: "sh".into(),
            driver: Some(script),
            workdir: Some(dir.to_path_buf()),
        };
        let session = RaySession::new(ray);
        let cmd = spec(dir);
        let cancel = AtomicBool::new(false);
        let attempt = |name: &str| {
            let (out, err) = (dir.join(format!("{name}.out")), dir.join(format!("{name}.err")));
            let tasks = dir.join(format!("{name}.json"));
            let files = AttemptFiles { strategy: &tasks, tasks: &tasks, out: &out, stderr: &err };
            let status = session.run(&cmd, &files, Duration::from_secs(20), &cancel).map_err(|_| "run error").unwrap();
            (status.code(), std::fs::read_to_string(&out).ok(), std::fs::read_to_string(&err).unwrap_or_default())
        };
        for i in 0..3 {
            let (code, out, _) = attempt(&format!("a{i}"));
            assert_eq!((code, out.as_deref()), (Some(0), Some("ok\n")));
        }
        let starts = || std::fs::read_to_string(dir.join("starts.log")).unwrap().lines().count();
        assert_eq!(starts(), 1, "one driver for three attempts");
        let (code, out, err) = attempt("stop");
        assert_eq!((code, out), (Some(EXIT_TASK_LOST), None));
        assert!(
            err.contains("the Ray driver stopped before it answered")
                && err.contains(&format!("(sh {}: exit status 3)", dir.join("driver.sh").display()))
                && err.contains("cannot reach the cluster"),
            "{err}"
        );
        let (code, _, _) = attempt("after");
        assert_eq!(code, Some(0));
        assert_eq!(starts(), 2, "a new driver after the first stopped");
    }
}
