//! Sharded evaluation beyond local processes: the built-in pipeline as a
//! shard command (`emend worker`) gives the in-process outcomes, and the Ray
//! executor gives the local executor's outcomes, also when a Ray worker is
//! killed in the middle of a shard (the shard is retried).
//!
//! The Ray tests need a running cluster (`RAY_ADDRESS`, e.g. from
//! `ray start --head`) and Python with Ray 2.60; without `RAY_ADDRESS` they
//! say so and pass, unless `EMEND_REQUIRE_RAY=1` (scripts/check-ray.sh sets
//! it), which makes a missing cluster a failure.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::support::{command, edit_config, ok, workspace};
use emend_core::artifact::{self, Artifact};
use emend_core::schema::StrategySchema;
use emend_eval::backend::Backend;
use emend_eval::builtin::BuiltinBackend;
use emend_eval::command::{CommandBackend, CommandSpec, Executor, RaySpec};

fn spec(argv: Vec<String>, shards: usize, concurrency: usize, timeout: f64) -> CommandSpec {
    CommandSpec {
        argv,
        workdir: std::env::temp_dir(),
        env: BTreeMap::new(),
        timeout: Duration::from_secs_f64(timeout),
        shards,
        concurrency,
    }
}

fn worker_argv() -> Vec<String> {
    let bin = crate::support::bin().display().to_string();
    [bin.as_str(), "worker", "{strategy}", "{tasks}", "{out}"].iter().map(|s| s.to_string()).collect()
}

fn builtin_strategy() -> Artifact {
    let text = std::fs::read_to_string(workspace().join("strategies/default.yaml")).unwrap();
    artifact::from_yaml("default.yaml", &text, &StrategySchema::builtin()).unwrap()
}

fn builtin_command(executor: Executor, shards: usize) -> CommandBackend {
    let dataset = emend_harness::Dataset::builtin();
    CommandBackend::new(
        &dataset,
        &emend_harness::Selection::default(),
        spec(worker_argv(), shards, 2, 120.0),
        &serde_json::Value::Null,
        None,
    )
    .unwrap()
    .with_executor(executor)
}

fn in_process() -> emend_core::outcome::Evaluation {
    let b = BuiltinBackend::new(
        Arc::new(emend_harness::Dataset::builtin()),
        emend_harness::HarnessSettings::default(),
        None,
    )
    .unwrap();
    b.evaluate(&builtin_strategy(), None).unwrap()
}

#[test]
fn the_builtin_worker_in_shards_gives_the_in_process_outcomes() {
    let want = in_process();
    for shards in [1, 3] {
        let got = builtin_command(Executor::Local, shards).evaluate(&builtin_strategy(), None).unwrap();
        assert_eq!(got.outcomes, want.outcomes, "{shards} shards");
    }
    // A probe's subset too.
    let ids: Vec<String> = want.outcomes.iter().step_by(7).map(|o| o.id.clone()).collect();
    let got = builtin_command(Executor::Local, 2).evaluate(&builtin_strategy(), Some(&ids)).unwrap();
    let sub: Vec<_> = want.outcomes.iter().filter(|o| ids.contains(&o.id)).cloned().collect();
    assert_eq!(got.outcomes, sub);
}

#[test]
fn the_worker_refuses_a_file_that_is_not_a_shard() {
    let tmp = tempfile::tempdir().unwrap();
    let s = tmp.path().join("s.json");
    std::fs::write(&s, "{}").unwrap();
    let t = tmp.path().join("t.json");
    std::fs::write(&t, r#"{"protocol": "other/1", "samples": []}"#).unwrap();
    let out = std::process::Command::new(crate::support::bin())
        .args(["worker"])
        .arg(&s)
        .arg(&t)
        .arg(tmp.path().join("o.jsonl"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("s.json: not a built-in strategy"), "{err}");
}

/// The Ray cluster to use, or None (the test then passes with a note) unless Ray is required.
fn ray() -> Option<RaySpec> {
    match std::env::var("RAY_ADDRESS") {
        Ok(address) if !address.is_empty() => Some(RaySpec {
            address,
            python: std::env::var("EMEND_RAY_PYTHON").unwrap_or_else(|_| "python3".into()),
            driver: Some(workspace().join("examples/ray/emend_ray.py")),
            workdir: None,
        }),
        _ => {
            assert!(
                std::env::var("EMEND_REQUIRE_RAY").as_deref() != Ok("1"),
                "EMEND_REQUIRE_RAY=1 but RAY_ADDRESS is not set (start a head node: ray start --head)"
            );
            eprintln!("skipped: RAY_ADDRESS is not set (start a Ray head node to run this test)");
            None
        }
    }
}

#[test]
fn the_builtin_pipeline_on_ray_gives_the_in_process_outcomes() {
    let Some(ray) = ray() else { return };
    let got = builtin_command(Executor::Ray(ray), 2).evaluate(&builtin_strategy(), None).unwrap();
    assert_eq!(got.outcomes, in_process().outcomes);
}

#[test]
fn a_ray_worker_killed_mid_shard_is_retried() {
    let Some(ray) = ray() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let mark = tmp.path().join("worker.pid");
    // First attempt: report the Ray worker's pid and wait to be killed; the
    // retry finds the mark and runs the reference adapter.
    let adapter = workspace().join("examples/python-bm25/adapter.py");
    let script = format!(
        "if [ ! -e '{m}' ]; then echo \"$EMEND_RAY_WORKER_PID\" > '{m}.tmp' && mv '{m}.tmp' '{m}'; sleep 20; exit 3; fi\n\
         exec python3 '{a}' \"$1\" \"$2\" \"$3\"\n",
        m = mark.display(),
        a = adapter.display()
    );
    let sh = tmp.path().join("flaky.sh");
    std::fs::write(&sh, script).unwrap();
    let argv: Vec<String> =
        ["sh", &sh.display().to_string(), "{strategy}", "{tasks}", "{out}"].iter().map(|s| s.to_string()).collect();
    let schema = StrategySchema::from_path(&workspace().join("examples/python-bm25/strategy.schema.json")).unwrap();
    let strategy = artifact::load_file(&workspace().join("examples/python-bm25/default.yaml"), &schema).unwrap();
    let dataset = emend_harness::Dataset::builtin();
    let make = |argv: Vec<String>, executor: Executor| {
        CommandBackend::new(&dataset, &emend_harness::Selection::default(), spec(argv, 1, 1, 120.0), schema.raw(), None)
            .unwrap()
            .with_executor(executor)
    };
    let backend = make(argv, Executor::Ray(ray));
    let killer = std::thread::spawn(move || {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(90) {
            if let Ok(pid) = std::fs::read_to_string(&mark)
                && let Ok(pid) = pid.trim().parse::<i32>()
            {
                // SAFETY: sends a signal to the Ray worker process running the shard.
                assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0, "cannot kill the Ray worker {pid}");
                return pid;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the first attempt never reported its Ray worker");
    });
    let got = backend.evaluate(&strategy, None).expect("the retry completes the shard");
    let killed = killer.join().unwrap();
    assert!(killed > 0);
    let local = make(
        vec!["python3".into(), adapter.display().to_string(), "{strategy}".into(), "{tasks}".into(), "{out}".into()],
        Executor::Local,
    )
    .evaluate(&strategy, None)
    .unwrap();
    assert_eq!(got.outcomes, local.outcomes);
}

#[test]
fn a_failed_ray_shard_fails_like_a_local_one() {
    let Some(ray) = ray() else { return };
    let argv: Vec<String> = ["sh", "-c", "echo broken >&2; exit 3", "{strategy}", "{tasks}", "{out}"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let dataset = emend_harness::Dataset::builtin();
    let backend = CommandBackend::new(
        &dataset,
        &emend_harness::Selection::default(),
        spec(argv, 1, 1, 60.0),
        &serde_json::Value::Null,
        None,
    )
    .unwrap()
    .with_executor(Executor::Ray(ray));
    let e = backend.evaluate(&builtin_strategy(), None).unwrap_err().to_string();
    assert!(e.starts_with("shard 1/1: exit status 3 after retry; stderr: broken"), "{e}");
}

/// A project whose harness command (the built-in worker) runs its shards on
/// Ray through the driver `script` (run by `sh`); the address is never reached.
/// Returns the project and the driver as emend's messages name it.
fn ray_project(tmp: &std::path::Path, script: &str) -> (std::path::PathBuf, String) {
    let dir = tmp.join("p");
    let bin = crate::support::bin();
    let bin = bin.to_str().unwrap();
    let init = ["init", dir.to_str().unwrap(), "--tasks", "builtin", "--harness-command", bin, "worker"];
    ok(tmp, &[&init[..], &["{strategy}", "{tasks}", "{out}"]].concat());
    let driver = dir.join("driver.sh");
    std::fs::write(&driver, script).unwrap();
    edit_config(
        &dir,
        "  kind: command\n",
        "  kind: command\n  executor: ray\n  ray:\n    address: 127.0.0.1:1\n    python: sh\n    driver: driver.sh\n",
    );
    (dir, format!("sh {}", driver.display()))
}

/// A Ray driver that is gone before emend writes its request (it exited at
/// once, or closed its input) fails every command that runs shards with
/// exit 1 and one error line naming the driver and its exit status, every
/// time: the write's broken pipe is an error, never a SIGPIPE that kills
/// emend (a cron job must get the documented code).
#[test]
fn a_ray_driver_gone_before_the_request_fails_each_command_with_exit_1_never_a_signal() {
    let drivers = [("exits at once", "exit 1\n"), ("closes its input", "exec 0<&-\nsleep 0.2\nexit 1\n")];
    let commands: [&[&str]; 4] =
        [&["diagnose"], &["audit"], &["eval", "--strategy", "strategies/served.yaml"], &["evolve", "--rounds", "1"]];
    for (what, script) in drivers {
        let tmp = tempfile::tempdir().unwrap();
        let (dir, driver) = ray_project(tmp.path(), script);
        let want = format!("the Ray driver stopped before it answered ({driver}: exit status 1); it printed nothing");
        for args in commands {
            for run in 1..=10 {
                let out = command(&dir, args).output().unwrap();
                let err = String::from_utf8_lossy(&out.stderr);
                let said = format!("a driver that {what}, emend {args:?}, run {run}: {:?}\n{err}", out.status);
                assert_eq!(out.status.code(), Some(1), "{said}");
                let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error: ")).collect();
                assert_eq!(errors.len(), 1, "{said}");
                assert!(errors[0].contains(&want), "{said}");
            }
        }
    }
}
