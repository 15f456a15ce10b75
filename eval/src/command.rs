//! The external harness protocol (`harness.kind: command`, protocol
//! `emend-command/1`): emend evaluates a strategy by running the user's own
//! system as a command, once per task shard, and reads back one outcome
//! record per question. docs/external-harness.md is the user's description.
//!
//! Per evaluation the strategy goes to a JSON file, the questions are split
//! into contiguous shards, each shard's conversations and questions go to a
//! LoCoMo-format task file (`schemas/shard.schema.json`), and `argv` runs with
//! `{strategy}`, `{tasks}` and `{out}` replaced by those paths, at most
//! `concurrency` at a time. A shard whose process fails (non-zero exit, a
//! signal, the timeout) or that reports an `error` for a question runs once
//! more; output that breaks the protocol is a bug, not bad luck, and is not
//! retried. Every record is checked against `schemas/outcome.schema.json` and
//! the shard's question ids, and a problem names the shard, the line and the
//! field. An evaluation either has an outcome for every question or is an
//! error: a strategy is never judged on partial outcomes.

mod check;
mod ray;
mod tasks;

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::backend::shard::{MAX_OUTPUT_BYTES, OUT_FILE};
use crate::backend::{
    Backend, BackendError, FieldProblem, FileAction, FileError, LineProblem, OutcomeFileError, ShardFailed,
    ShardFailure,
};
use emend_core::artifact::{self, Artifact};
use emend_core::config::{CommandHarness, Project};
use emend_core::outcome::{BackendOutcome, Evaluation};
use emend_core::schema::{self, Dialect, StrategySchema};
use emend_core::setup::SetupError;

pub use check::{Checked, outcome_validator};
use check::{check_outcomes, read_output};
pub use ray::{RAY_GRACE, RaySpec};
use tasks::{Task, TaskSet};

/// The protocol version: in every task shard, and part of the harness hash.
pub const PROTOCOL: &str = "emend-command/1";

/// What one outcome line must look like.
pub const OUTCOME_SCHEMA: &str = include_str!("../../schemas/outcome.schema.json");

/// The placeholders `argv` must use.
pub const PLACEHOLDERS: [&str; 3] = ["{strategy}", "{tasks}", "{out}"];

/// How much of a failed command's stderr goes into the error message.
const STDERR_TAIL_BYTES: u64 = 2048;

/// The command as configured, its paths resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct CommandSpec {
    pub argv: Vec<String>,
    /// Absolute; the project directory unless configured otherwise.
    pub workdir: PathBuf,
    pub env: BTreeMap<String, String>,
    pub timeout: Duration,
    pub shards: usize,
    pub concurrency: usize,
}

impl CommandSpec {
    /// Checks `harness.command` and resolves `workdir` against `base`.
    pub fn from_config(c: &CommandHarness, base: &Path) -> Result<CommandSpec, SetupError> {
        let bad = |field: &str, msg: String| SetupError::new(format!("harness.command.{field}: {msg}"));
        if c.argv.is_empty() || c.argv[0].trim().is_empty() {
            return Err(bad("argv", "must name a program to run".into()));
        }
        for p in PLACEHOLDERS {
            if !c.argv.iter().any(|a| a.contains(p)) {
                return Err(bad(
                    "argv",
                    format!(
                        "must contain {p} (the command needs the paths of the strategy, the task shard and the outcomes file: {})",
                        PLACEHOLDERS.join(", ")
                    ),
                ));
            }
        }
        if !(c.timeout_secs.is_finite() && c.timeout_secs > 0.0 && c.timeout_secs <= 7.0 * 86_400.0) {
            return Err(bad("timeout_secs", format!("must be above 0 and at most 604800, got {}", c.timeout_secs)));
        }
        if c.shards == 0 || c.shards > 10_000 {
            return Err(bad("shards", format!("must be between 1 and 10000, got {}", c.shards)));
        }
        if c.concurrency == 0 || c.concurrency > 256 {
            return Err(bad("concurrency", format!("must be between 1 and 256, got {}", c.concurrency)));
        }
        let workdir = match &c.workdir {
            Some(w) if w.is_absolute() => w.clone(),
            Some(w) => base.join(w),
            None => base.to_path_buf(),
        };
        if !workdir.is_dir() {
            return Err(bad("workdir", format!("{}: no such directory", workdir.display())));
        }
        let workdir = std::path::absolute(&workdir).unwrap_or(workdir);
        Ok(CommandSpec {
            argv: c.argv.clone(),
            workdir,
            env: c.env.clone(),
            timeout: Duration::from_secs_f64(c.timeout_secs),
            shards: c.shards,
            concurrency: c.concurrency,
        })
    }

    fn argv_for(&self, strategy: &Path, tasks: &Path, out: &Path) -> Vec<String> {
        let (s, t, o) = (strategy.display().to_string(), tasks.display().to_string(), out.display().to_string());
        self.argv.iter().map(|a| a.replace("{strategy}", &s).replace("{tasks}", &t).replace("{out}", &o)).collect()
    }
}

/// Where a shard attempt runs.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Executor {
    /// A process on this machine.
    #[default]
    Local,
    /// A task on a Ray cluster, through the `emend_ray` driver (examples/ray).
    Ray(RaySpec),
}

/// An external system evaluated through a command.
pub struct CommandBackend {
    spec: CommandSpec,
    /// The Ray driver of `Executor::Ray`, started on first use.
    ray: Option<ray::RaySession>,
    tasks: TaskSet,
    harness_hash: String,
    dataset_hash: String,
    questions: Vec<(String, String)>,
    validator: jsonschema::Validator,
}

impl std::fmt::Debug for CommandBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommandBackend").field("spec", &self.spec).field("questions", &self.questions.len()).finish()
    }
}

impl CommandBackend {
    /// The backend of a project with `harness.kind: command`.
    pub fn from_project(project: &Project, schema: &StrategySchema) -> Result<CommandBackend, SetupError> {
        let h = &project.config.harness;
        let c = h
            .command
            .as_ref()
            .ok_or_else(|| SetupError::new("harness.command: required when harness.kind is command"))?;
        let spec = CommandSpec::from_config(c, &project.dir)?;
        let executor = executor_of(project, c.workdir.as_deref())?;
        let dataset = emend_core::setup::load_tasks_limited(&h.tasks, &project.dir, h.max_dataset_bytes())
            .map_err(|e| SetupError::new(format!("harness.tasks: {e}")))?;
        let selection = emend_harness::Selection {
            include_adversarial: h.include_adversarial,
            conversations: h.conversations.clone(),
        };
        Ok(CommandBackend::new(&dataset, &selection, spec, schema.raw(), h.version.as_deref())?.with_executor(executor))
    }

    /// Runs shard attempts with `executor` (local processes by default). The
    /// executor says how shards run, not what they compute: it is not part of
    /// the harness hash.
    pub fn with_executor(mut self, executor: Executor) -> Self {
        self.ray = match executor {
            Executor::Local => None,
            Executor::Ray(spec) => Some(ray::RaySession::new(spec)),
        };
        self
    }

    /// `schema` is the strategy schema document of the system, `version` the
    /// configured harness version string: both are part of the harness hash.
    pub fn new(
        dataset: &emend_harness::Dataset,
        selection: &emend_harness::Selection,
        spec: CommandSpec,
        schema: &Value,
        version: Option<&str>,
    ) -> Result<CommandBackend, SetupError> {
        let tasks = TaskSet::new(dataset, selection)?;
        // What the system is: the protocol, the command and its environment,
        // the declared version, and the strategy contract. Timeout, sharding
        // and the working directory say how it runs, not what it computes.
        let harness_hash = artifact::sha256_hex(
            artifact::canonical_json(&json!({
                "protocol": PROTOCOL,
                "argv": spec.argv,
                "env": spec.env,
                "version": version,
                "schema": schema,
            }))
            .as_bytes(),
        );
        let dataset_hash = artifact::sha256_hex(
            artifact::canonical_json(&json!({
                "dataset": dataset.hash(),
                "include_adversarial": selection.include_adversarial,
                "conversations": selection.conversations,
            }))
            .as_bytes(),
        );
        let mut questions: Vec<(String, String)> =
            tasks.tasks.iter().map(|t| (t.id.clone(), t.category.to_string())).collect();
        questions.sort();
        Ok(CommandBackend {
            spec,
            ray: None,
            tasks,
            harness_hash,
            dataset_hash,
            questions,
            validator: outcome_validator(),
        })
    }

    pub fn spec(&self) -> &CommandSpec {
        &self.spec
    }

    /// The task shard files an evaluation of `subset` (or everything) writes,
    /// without running anything: for adapters' authors and tests.
    pub fn shard_files(&self, subset: Option<&[String]>) -> Result<Vec<String>, BackendError> {
        let positions = self.positions(subset)?;
        let shards = split(&positions, self.spec.shards);
        Ok(shards.iter().enumerate().map(|(i, s)| self.tasks.render_shard(i + 1, shards.len(), s)).collect())
    }

    /// Task positions of `subset` in dataset order.
    fn positions(&self, subset: Option<&[String]>) -> Result<Vec<usize>, BackendError> {
        match subset {
            None => Ok((0..self.tasks.tasks.len()).collect()),
            Some(ids) => {
                let mut p = ids
                    .iter()
                    .map(|id| {
                        self.tasks
                            .position
                            .get(id)
                            .copied()
                            .ok_or_else(|| BackendError::UnknownQuestion { id: id.clone() })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                p.sort_unstable();
                p.dedup();
                Ok(p)
            }
        }
    }

    fn run(&self, artifact: &Artifact, positions: &[usize]) -> Result<Vec<BackendOutcome>, BackendError> {
        if positions.is_empty() {
            return Ok(Vec::new());
        }
        let dir = tempfile::Builder::new().prefix("emend-eval-").tempdir().map_err(|source| {
            BackendError::Io(FileError { path: std::env::temp_dir(), action: FileAction::CreateTempDir, source })
        })?;
        let strategy = dir.path().join("strategy.json");
        let mut doc = artifact.value.clone();
        if let Some(m) = doc.as_object_mut() {
            for k in artifact::METADATA_KEYS {
                m.remove(k);
            }
        }
        let text = serde_json::to_string_pretty(&doc).expect("a strategy serializes");
        std::fs::write(&strategy, text).map_err(|source| {
            BackendError::Io(FileError { path: strategy.clone(), action: FileAction::Write, source })
        })?;

        let shards = split(positions, self.spec.shards);
        let count = shards.len();
        let next = AtomicUsize::new(0);
        let cancel = AtomicBool::new(false);
        let results: Vec<Mutex<Option<ShardResult>>> = (0..count).map(|_| Mutex::new(None)).collect();
        let workers = self.spec.concurrency.min(count);
        std::thread::scope(|scope| {
            for _ in 0..workers {
                scope.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::SeqCst);
                        if i >= count || cancel.load(Ordering::SeqCst) {
                            break;
                        }
                        let job = ShardJob {
                            index: i + 1,
                            count,
                            positions: &shards[i],
                            dir: dir.path(),
                            strategy: &strategy,
                        };
                        let r = self.run_shard(&job, &cancel);
                        if r.is_err() {
                            // One failed shard fails the evaluation: start no more.
                            cancel.store(true, Ordering::SeqCst);
                        }
                        *results[i].lock().expect("no worker panics holding the lock") = Some(r);
                    }
                });
            }
        });
        let mut outcomes = Vec::with_capacity(positions.len());
        let mut failures = Vec::new();
        for slot in results {
            match slot.into_inner().expect("no worker panics holding the lock") {
                Some(Ok(records)) => outcomes.extend(records),
                Some(Err(ShardError::Failed(failed))) => failures.push(failed),
                Some(Err(ShardError::Cancelled)) | None => {}
            }
        }
        let others = failures.len().saturating_sub(1);
        match failures.into_iter().next() {
            None => Ok(outcomes),
            Some(failed) => Err(BackendError::Shard { failed: Box::new(failed), others }),
        }
    }

    /// One shard: an attempt, and one retry when the failure may be bad luck
    /// ([`ShardFailure::is_retried`]).
    fn run_shard(&self, job: &ShardJob<'_>, cancel: &AtomicBool) -> ShardResult {
        let failed = |first_attempt: Option<ShardFailure>, kind| {
            ShardError::Failed(ShardFailed {
                shard: job.index,
                count: job.count,
                first_attempt: first_attempt.map(Box::new),
                kind,
            })
        };
        let tasks = job.dir.join(format!("shard-{}.json", job.index));
        std::fs::write(&tasks, self.tasks.render_shard(job.index, job.count, job.positions)).map_err(|source| {
            failed(None, ShardFailure::Io(FileError { path: tasks.clone(), action: FileAction::Write, source }))
        })?;
        let first = match self.attempt(job, &tasks, 1, cancel) {
            Ok(records) => return Ok(records),
            Err(Attempt::Cancelled) => return Err(ShardError::Cancelled),
            Err(Attempt::Failed(kind)) if !kind.is_retried() => return Err(failed(None, kind)),
            Err(Attempt::Failed(kind)) => kind,
        };
        tracing::warn!("shard {}/{}: {first}; retrying once", job.index, job.count);
        match self.attempt(job, &tasks, 2, cancel) {
            Ok(records) => Ok(records),
            Err(Attempt::Cancelled) => Err(ShardError::Cancelled),
            Err(Attempt::Failed(kind)) => Err(failed(Some(first), kind)),
        }
    }

    fn attempt(
        &self,
        job: &ShardJob<'_>,
        tasks: &Path,
        attempt: u32,
        cancel: &AtomicBool,
    ) -> Result<Vec<BackendOutcome>, Attempt> {
        // Each attempt gets its own directory, so a retry never reads what a
        // killed first attempt (or a process it left behind) wrote.
        let adir = job.dir.join(format!("shard-{}-attempt-{attempt}", job.index));
        let io = |path: &Path, action, source| {
            Attempt::Failed(ShardFailure::Io(FileError { path: path.into(), action, source }))
        };
        std::fs::create_dir(&adir).map_err(|e| io(&adir, FileAction::CreateDir, e))?;
        let out = adir.join(OUT_FILE);
        let stderr_path = adir.join("stderr.log");
        let stderr = std::fs::File::create(&stderr_path).map_err(|e| io(&stderr_path, FileAction::Create, e))?;
        let started = Instant::now();
        let failed = |kind| Err(Attempt::Failed(kind));
        let (program, run, timeout) = match &self.ray {
            None => {
                let argv = self.spec.argv_for(job.strategy, tasks, &out);
                let mut cmd = Command::new(&argv[0]);
                cmd.args(&argv[1..])
                    .current_dir(&self.spec.workdir)
                    .envs(&self.spec.env)
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::from(stderr));
                (argv[0].clone(), run_with_timeout(&mut cmd, self.spec.timeout, cancel), self.spec.timeout)
            }
            Some(session) => {
                drop(stderr);
                let files = ray::AttemptFiles { strategy: job.strategy, tasks, out: &out, stderr: &stderr_path };
                let timeout = self.spec.timeout + RAY_GRACE;
                (session.program(), session.run(&self.spec, &files, timeout, cancel), timeout)
            }
        };
        let status = match run {
            Ok(status) => status,
            Err(RunError::Cancelled) => return Err(Attempt::Cancelled),
            Err(RunError::Spawn(source)) => {
                let workdir = self.spec.workdir.clone();
                return failed(ShardFailure::Spawn { program, workdir, source });
            }
            Err(RunError::TimedOut) => {
                return failed(ShardFailure::TimedOut { after: timeout, stderr: stderr_tail(&stderr_path) });
            }
        };
        if !status.success() {
            return failed(ShardFailure::Exited { status, stderr: stderr_tail(&stderr_path) });
        }
        let ran = started.elapsed();
        let output = |e: OutcomeFileError| Attempt::Failed(e.into());
        let text = read_output(&out).map_err(output)?;
        let checked = check_outcomes(&self.validator, &self.tasks, job.positions, &text).map_err(output)?;
        tracing::debug!(
            "shard {}/{} attempt {attempt}: command {:.1} ms, reading and checking {} records {:.1} ms",
            job.index,
            job.count,
            ran.as_secs_f64() * 1e3,
            checked.records.len(),
            (started.elapsed() - ran).as_secs_f64() * 1e3
        );
        if let Some(unanswered) = checked.unanswered {
            return failed(unanswered);
        }
        Ok(checked.records)
    }
}

impl Backend for CommandBackend {
    fn harness_hash(&self) -> String {
        self.harness_hash.clone()
    }

    fn dataset_hash(&self) -> String {
        self.dataset_hash.clone()
    }

    fn questions(&self) -> Vec<(String, String)> {
        self.questions.clone()
    }

    fn roles(&self) -> Vec<String> {
        Vec::new()
    }

    fn evaluate(&self, artifact: &Artifact, subset: Option<&[String]>) -> Result<Evaluation, BackendError> {
        BackendError::unless_stopped()?;
        let positions = self.positions(subset)?;
        Ok(Evaluation::new(self.run(artifact, &positions)?))
    }
}

/// The executor `harness.executor` names; `command_workdir` is
/// `harness.command.workdir` as configured (None for the built-in pipeline).
pub fn executor_of(project: &Project, command_workdir: Option<&Path>) -> Result<Executor, SetupError> {
    let h = &project.config.harness;
    match h.executor {
        emend_core::config::ExecutorChoice::Local => Ok(Executor::Local),
        emend_core::config::ExecutorChoice::Ray => Ok(Executor::Ray(RaySpec::from_config(
            &h.ray,
            command_workdir,
            &project.dir,
            std::env::var("RAY_ADDRESS").ok(),
        )?)),
    }
}

/// `positions` cut into at most `shards` contiguous runs of near-equal size.
fn split(positions: &[usize], shards: usize) -> Vec<Vec<usize>> {
    let n = positions.len();
    let k = shards.clamp(1, n.max(1));
    let (base, extra) = (n / k, n % k);
    let mut out = Vec::with_capacity(k);
    let mut start = 0;
    for i in 0..k {
        let len = base + usize::from(i < extra);
        out.push(positions[start..start + len].to_vec());
        start += len;
    }
    out
}

struct ShardJob<'a> {
    /// 1-based.
    index: usize,
    count: usize,
    positions: &'a [usize],
    dir: &'a Path,
    strategy: &'a Path,
}

type ShardResult = Result<Vec<BackendOutcome>, ShardError>;

enum ShardError {
    Failed(ShardFailed),
    /// Another shard failed first; this one stopped.
    Cancelled,
}

enum Attempt {
    Failed(ShardFailure),
    Cancelled,
}

pub(crate) enum RunError {
    Spawn(std::io::Error),
    TimedOut,
    Cancelled,
}

/// Runs `cmd`, killing it after `timeout` or when `cancel` is set.
fn run_with_timeout(cmd: &mut Command, timeout: Duration, cancel: &AtomicBool) -> Result<ExitStatus, RunError> {
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(RunError::Spawn)?;
    // Poll: std has no wait-with-timeout. Start fine (a quick command should
    // not wait for a coarse tick) and back off to 2 ms: at most 2 ms of
    // latency, about 500 wake-ups a second of a long run.
    let mut pause = Duration::from_micros(100);
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) => {}
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(RunError::Spawn(e));
            }
        }
        let elapsed = start.elapsed();
        let stop = if cancel.load(Ordering::SeqCst) {
            Some(RunError::Cancelled)
        } else if elapsed >= timeout {
            Some(RunError::TimedOut)
        } else {
            None
        };
        if let Some(why) = stop {
            let _ = child.kill();
            let _ = child.wait();
            return Err(why);
        }
        std::thread::sleep(pause.min(timeout - elapsed));
        pause = (pause * 2).min(Duration::from_millis(2));
    }
}

/// The last few KiB of a stderr file, on one line (lines joined by ` | `).
fn stderr_tail(path: &Path) -> String {
    let Ok(mut f) = std::fs::File::open(path) else { return String::new() };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let skip = len.saturating_sub(STDERR_TAIL_BYTES);
    if f.seek(SeekFrom::Start(skip)).is_err() {
        return String::new();
    }
    let mut bytes = Vec::new();
    let _ = f.read_to_end(&mut bytes);
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<&str> = text.lines().map(str::trim_end).filter(|l| !l.trim().is_empty()).collect();
    if skip > 0 && !lines.is_empty() {
        // The first line is probably cut: say so.
        lines[0] = lines[0].trim_start();
        return format!("...{}", lines.join(" | "));
    }
    lines.join(" | ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a task shard looks like (emend writes these; a test checks they agree).
    const SHARD_SCHEMA: &str = include_str!("../../schemas/shard.schema.json");

    const FIXTURE: &str = r#"[{"sample_id": "c1", "conversation": {"speaker_a": "Ann", "speaker_b": "Bo",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat named Miso."},
                      {"speaker": "Bo", "dia_id": "D1:2", "text": "Nice!", "blip_caption": "a cat"}],
        "session_2_date_time": null,
        "session_2": [{"speaker": "Ann", "dia_id": "D2:01", "text": "Miso likes tuna."}]},
      "qa": [{"question": "What is the cat's name?", "answer": "Miso", "evidence": ["D1:1"], "category": 4},
             {"question": "Who?", "adversarial_answer": "x", "evidence": ["D"], "category": 5},
             {"question": "When?", "answer": 2023, "evidence": ["D1:1; D2:1", "D9:9"], "category": 2}]},
     {"sample_id": "c2", "conversation": {"speaker_a": "Cy", "speaker_b": "Di",
        "session_1": [{"speaker": "Cy", "dia_id": "D1:1", "text": "hello"}]},
      "qa": [{"question": "What did Cy say?", "answer": "hello", "evidence": ["D1:1"], "category": 1}]}]"#;

    fn tasks(adversarial: bool) -> TaskSet {
        let d = emend_harness::load_str("fixture.json", FIXTURE).unwrap();
        TaskSet::new(&d, &emend_harness::Selection { include_adversarial: adversarial, conversations: None }).unwrap()
    }

    fn shard_validator() -> jsonschema::Validator {
        let schema: Value = serde_json::from_str(SHARD_SCHEMA).unwrap();
        jsonschema::options().with_draft(jsonschema::Draft::Draft202012).build(&schema).unwrap()
    }

    #[test]
    fn schemas_compile() {
        let _ = outcome_validator();
        let _ = shard_validator();
    }

    #[test]
    fn shard_files_follow_the_shard_schema_and_keep_only_their_questions() {
        let t = tasks(true);
        let v = shard_validator();
        let all: Vec<usize> = (0..t.tasks.len()).collect();
        for (k, shard) in split(&all, 3).iter().enumerate() {
            let text = t.render_shard(k + 1, 3, shard);
            let doc: Value = serde_json::from_str(&text).unwrap();
            let errors: Vec<String> = v.iter_errors(&doc).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{errors:?}\n{text}");
            let ids: Vec<&str> = doc["question_ids"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
            let qa_ids: Vec<&str> = doc["samples"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|s| s["qa"].as_array().unwrap().iter().map(|q| q["id"].as_str().unwrap()))
                .collect();
            assert_eq!(ids, qa_ids);
        }
        let doc: Value = serde_json::from_str(&t.render_shard(1, 1, &all)).unwrap();
        let q = &doc["samples"][0]["qa"][2];
        assert_eq!(q["id"], "c1#2");
        assert_eq!(q["answer"], "2023");
        assert_eq!(q["category_name"], "temporal");
        assert_eq!(q["resolved_evidence"], json!(["D1:1", "D2:1"]));
        assert_eq!(q["unresolved_evidence"], json!(["D9:9"]));
        let conv = &doc["samples"][0]["conversation"];
        assert_eq!(conv["session_2"][0]["dia_id"], "D2:1");
        assert_eq!(conv["session_1"][1]["blip_caption"], "a cat");
        assert_eq!(doc["samples"][1]["sample_id"], "c2");
    }

    #[test]
    fn split_is_contiguous_and_balanced() {
        let p: Vec<usize> = (0..10).collect();
        let s = split(&p, 4);
        assert_eq!(s.iter().map(Vec::len).collect::<Vec<_>>(), vec![3, 3, 2, 2]);
        assert_eq!(s.concat(), p);
        assert_eq!(split(&p[..2], 5).len(), 2);
        assert_eq!(split(&p[..1], 1), vec![vec![0]]);
    }

    fn line(id: &str, conv: &str, cat: &str) -> String {
        json!({"id": id, "conversation": conv, "category": cat, "correct": true}).to_string()
    }

    #[test]
    fn outcome_lines_are_checked_by_line_and_field() {
        let t = tasks(false);
        let v = outcome_validator();
        let all: Vec<usize> = (0..t.tasks.len()).collect();
        let good = [line("c1#0", "c1", "single-hop"), line("c1#2", "c1", "temporal"), line("c2#0", "c2", "multi-hop")];
        let ok = check_outcomes(&v, &t, &all, &format!("{}\n\n{}\n{}\n", good[0], good[1], good[2])).unwrap();
        assert_eq!(ok.records.len(), 3);
        assert!(ok.unanswered.is_none());

        let check = |lines: &[String]| check_outcomes(&v, &t, &all, &lines.join("\n")).unwrap_err().to_string();
        let bad = r#"{"id": "c1#2", "conversation": "c1", "category": "temporal", "correct": "yes"}"#.to_string();
        assert_eq!(
            check(&[good[0].clone(), bad]),
            r#"out.jsonl:2: field "correct": expected a boolean, got the string "yes""#
        );
        let no_cat = r#"{"id": "c1#2", "conversation": "c1", "correct": true}"#.to_string();
        assert_eq!(check(&[no_cat]), r#"out.jsonl:1: field "category": missing"#);
        let trace = r#"{"id": "c1#0", "conversation": "c1", "category": "single-hop", "correct": false,
            "evidence_trace": [{"turn": "D1:1", "memory_ids": [], "retrieved": 1, "in_context": false}]}"#
            .replace('\n', "");
        assert_eq!(
            check(&[trace]),
            r#"out.jsonl:1: field "evidence_trace[0].retrieved": expected a boolean, got a number (1)"#
        );
        assert_eq!(check(&["[1]".into()]), "out.jsonl:1: expected an object, got a list");
        assert!(check(&["{\"id\": ".into()]).starts_with("out.jsonl:1: not valid JSON (column 7): "));
        assert_eq!(
            check(&[good[0].clone(), good[0].clone()]),
            r#"out.jsonl:2: field "id": duplicate "c1#0" (first on line 1)"#
        );
        assert_eq!(
            check(&[line("c1#1", "c1", "adversarial")]),
            r#"out.jsonl:1: field "id": "c1#1" is not a question of this shard"#
        );
        assert_eq!(
            check(&[line("c1#0", "c1", "temporal")]),
            r#"out.jsonl:1: field "category": expected "single-hop" (the task's category), got "temporal""#
        );
        assert_eq!(
            check(&[line("c1#0", "c2", "single-hop")]),
            r#"out.jsonl:1: field "conversation": expected "c1" (the question's sample_id), got "c2""#
        );
        assert_eq!(check(&[good[0].clone()]), "out.jsonl: 2 of 3 questions missing: c1#2, c2#0");
        let typed = check_outcomes(&v, &t, &all, &[good[1].clone(), good[0].clone(), good[1].clone()].join("\n"));
        assert!(
            matches!(
                typed,
                Err(OutcomeFileError::BadLine {
                    line: 3,
                    problem: LineProblem::Duplicate { first_line: 1, .. },
                    others: 0
                })
            ),
            "{typed:?}"
        );
        assert_eq!(check(&["x".into(), good[0].clone(), "y".into()]).split(" (and").nth(1), Some(" 1 more bad lines)"));

        let err = json!({"id": "c1#2", "conversation": "c1", "category": "temporal", "correct": false, "error": "model timed out"});
        let r = check_outcomes(&v, &t, &all, &[good[0].clone(), err.to_string(), good[2].clone()].join("\n")).unwrap();
        let unanswered = r.unanswered.expect("one question is unanswered");
        assert!(unanswered.is_retried());
        assert_eq!(unanswered.to_string(), "out.jsonl:2: question c1#2 not answered: model timed out");
    }

    #[test]
    fn the_builtin_harness_outcomes_follow_the_outcome_schema() {
        // The protocol pins the shape `emend eval` writes: a built-in outcome must validate.
        let dataset = std::sync::Arc::new(emend_harness::Dataset::builtin());
        let evaluator = emend_harness::Evaluator::new(dataset, emend_harness::HarnessSettings::default()).unwrap();
        let default = emend_core::artifact::DEFAULT_STRATEGY;
        let a = artifact::from_yaml("default.yaml", default, &StrategySchema::builtin()).unwrap();
        let eval = evaluator.evaluate(a.typed().unwrap()).unwrap();
        let v = outcome_validator();
        for o in eval.outcomes.iter().take(50) {
            let doc = serde_json::to_value(o).unwrap();
            let errors: Vec<String> = v.iter_errors(&doc).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{}: {errors:?}", o.id);
            serde_json::from_value::<BackendOutcome>(doc).unwrap();
        }
    }
}
