//! No setting that loads and does nothing, checked by behaviour: every leaf
//! key of emend.yaml's schema (`emend_core::config::leaf_keys`, the walk
//! core/tests/config_keys.rs shares) has a row in [`ROWS`], and each row's
//! changed value changes what some emend command does.
//!
//! A row names the key, a legal value other than the one `emend init --tasks
//! builtin` writes, an [`Observe`] (the commands run and what is compared:
//! exit codes, stdout and stderr, the project's own paths and clocks taken
//! out) and a [`Setup`] both of its runs get (a command harness, a hook, a
//! price...) so that the key has something to act on. The test runs the
//! observation on a project with the setup alone and on one with the setup
//! and the key changed, and fails when the two are the same. A row may
//! instead expect the value to be refused at load (exit 2, the key named).
//! The setup-alone runs are shared by the rows that have the same setup and
//! observation, and each is run twice: an observation that differs between
//! two identical projects proves nothing and fails the test.
//!
//! What it guarantees: a key added to the schema without a row fails
//! ([`the_table_has_a_row_for_every_key_of_the_schema`]), and each key's
//! changed value changes some observed output or is refused at load (the
//! roles' keys with the `llm` feature only: they need the test server).
//! What it does not: that
//! the change is the right one, that every value of a key matters, or that
//! the key matters in every setup; config_keys.rs's reading check and the
//! modules that test each feature say more of that.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use serde_json::Value;
use serde_yaml::Value as Yaml;

use crate::support::{self, copy_dir, emend_env, strip_clock};

/// Settings (YAML at a dotted path) both runs of a row get, and files
/// written into the project before either.
#[derive(Debug)]
pub struct Setup {
    pub name: &'static str,
    pub config: &'static [(&'static str, &'static str)],
    pub prepare: fn(&Path),
}

/// The commands a row runs in the project, all of whose output is compared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Observe {
    /// A command that loads the configuration: `emend status --json`.
    Load,
    /// `emend diagnose --json`: the served strategy evaluated with the
    /// project's harness; then the logs the setup's scripts wrote.
    Diagnose,
    /// `emend evolve --rounds 1 --max-evals 5 --json --quiet`, then the
    /// journal (`emend journal export`: each event's kind and payload).
    Evolve,
    /// `emend evolve --rounds 1 --candidates 1 --max-evals 15 --json
    /// --quiet`, then every scored strategy (`emend trials --json`).
    Search,
    /// `emend evolve --max-evals 8 --json --quiet`: as many rounds as
    /// loop.rounds says, within the budget.
    Budget,
    /// `emend evolve --rounds 1 --json --quiet`: a whole round, then every
    /// pending version (`emend pending --all --json`) and the directions
    /// the planner ranks for the next round (`emend hypotheses --json`).
    Round,
    /// `emend evolve --rounds 1 --json --quiet` (every model role asked:
    /// extractor, answerer and judge evaluate, the classifier labels the
    /// served strategy's generation errors, the critic and the evolver
    /// propose), then the journal, then what the test servers saw of each
    /// role: its requests, each request's model, temperature, max_tokens
    /// and API key, and (under [`Serve::Slow`]) whether two were in flight
    /// at once. The setup's `{url}` and `{url2}` are the two servers'.
    Models(Serve),
}

/// How the test servers of [`Observe::Models`] answer (plausible replies,
/// `llm_support::default_reply`, in each case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Serve {
    /// At once.
    Plain,
    /// The first time a request is seen, status 500; then at once.
    Flaky,
    /// After 150 ms (`models::SLOW_REPLY`).
    Slow,
}

/// What a row expects of its changed value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Some observed output differs from the setup-alone run's.
    Differs,
    /// Refused at load: exit 2, the key named on stderr.
    Refused,
}

/// One key of the schema: a changed value, what shows it, and the setup.
#[derive(Debug)]
pub struct Row {
    pub key: &'static str,
    pub value: &'static str,
    pub observe: Observe,
    pub setup: &'static Setup,
    pub expect: Expect,
}

/// The name a `*` segment of a key takes (a map's key).
const STAR: &str = "EMEND_PROBE";

/// The command harness of [`COMMAND`]: it logs each shard's start (with
/// `EMEND_PROBE` from harness.command.env, a fourth argument and its working
/// directory) and end, sleeps under `SLOW`, and runs `emend worker`.
fn harness_script(dir: &Path) {
    let script = format!(
        "#!/bin/sh\necho \"start ${{EMEND_PROBE:-unset}} $4 $(basename \"$PWD\")\" >> harness.log\n\
         if [ -n \"$SLOW\" ]; then sleep 2; fi\nsleep 0.2\n{} worker \"$1\" \"$2\" \"$3\"\necho end >> harness.log\n",
        support::bin().display()
    );
    std::fs::write(dir.join("h.sh"), &script).unwrap();
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/h.sh"), &script).unwrap();
}

/// A fake Ray driver (run by `sh`): it logs its name, command line and
/// shell, then each request (without its id and paths), and answers each
/// that the command exited 3, until emend closes its input (a driver that
/// stops at once races emend's writes to it). As driver.sh, and as
/// emend_ray in the project: what `sh -m emend_ray` runs when no driver is
/// configured.
fn ray_driver(dir: &Path) {
    for name in ["driver.sh", "emend_ray"] {
        let driver = format!(
            "#!/bin/sh\necho \"{name} ${{BASH_VERSION:+bash}} $*\" >> ray.log\nwhile read -r line; do\n\
             echo \"$line\" | sed -e 's/\"id\":[0-9]*//' -e 's|/tmp/[^\"]*|<tmp>|g' >> ray.log\n\
             id=$(echo \"$line\" | sed -n 's/^.*\"id\":\\([0-9]*\\).*$/\\1/p')\n\
             if [ -n \"$id\" ]; then echo \"{{\\\"id\\\": $id, \\\"exit\\\": 3}}\"; fi\ndone\n"
        );
        std::fs::write(dir.join(name), driver).unwrap();
    }
}

/// A fake Ray driver that runs what it is asked (the command, with its
/// paths), each request in the background after half a second, so that no
/// attempt fails and none is cancelled; it logs only how many other requests
/// were in flight when each arrived (one in flight from its arrival until
/// just before its answer).
fn running_ray_driver(dir: &Path) {
    let driver = r#"#!/bin/sh
echo "driver.sh $*" >> ray.log
mkdir -p flight
field() { echo "$1" | sed -n "s/^.*\"$2\":\"\([^\"]*\)\".*\$/\1/p"; }
while read -r line; do
  id=$(echo "$line" | sed -n 's/^.*"id":\([0-9]*\).*$/\1/p')
  [ -n "$id" ] || continue
  echo "request; others in flight: $(ls flight | wc -l)" >> ray.log
  touch "flight/$id"
  (
    strategy=$(field "$line" strategy); tasks=$(field "$line" tasks)
    out=$(field "$line" out); err=$(field "$line" stderr)
    args=$(echo "$line" | sed -n 's/^.*"argv":\[\(.*\)\].*$/\1/p' | sed -e 's/^"//' -e 's/"$//' -e 's/","/\
/g' -e "s|{strategy}|$strategy|g" -e "s|{tasks}|$tasks|g" -e "s|{out}|$out|g")
    IFS='
'
    set -- $args
    sleep 0.5
    "$@" 2> "$err"
    code=$?
    rm -f "flight/$id"
    echo "{\"id\": $id, \"exit\": $code}"
  ) &
done
wait
"#;
    std::fs::write(dir.join("driver.sh"), driver).unwrap();
}

/// One ordinary round first (`emend evolve --rounds 1` at the defaults): it
/// serves v2, which reads about ten times v1's context tokens, so that a
/// later search has cheaper strategies to offer.
fn served_round(dir: &Path) {
    let (code, out, err) = emend_env(dir, &["evolve", "--rounds", "1", "--quiet"], &[]);
    assert_eq!(code, 0, "emend evolve: {out}{err}");
}

/// Hooks that log what they were told, and one that outlasts a short timeout.
fn hook_scripts(dir: &Path) {
    let hook = "#!/bin/sh\necho \"hook $EMEND_CHANGE $EMEND_SERVED_VERSION $EMEND_PENDING_VERSION\" >> hook.log\n";
    std::fs::write(dir.join("hook.sh"), hook).unwrap();
    std::fs::write(dir.join("slow.sh"), "#!/bin/sh\nsleep 2\necho slow done >> hook.log\n").unwrap();
}

/// A small LoCoMo-format task set (with an adversarial question) as
/// tasks.json, and the same padded past one megabyte as big.json.
fn task_files(dir: &Path) {
    let turn = |id: &str, text: &str| serde_json::json!({"speaker": "Ann", "dia_id": id, "text": text});
    let q = |question: &str, answer: &str, evidence: &str, category: u8| serde_json::json!({"question": question, "answer": answer, "evidence": [evidence], "category": category, "adversarial_answer": answer});
    let tasks = serde_json::json!([{
        "sample_id": "chat-1",
        "conversation": {
            "speaker_a": "Ann", "speaker_b": "Bo",
            "session_1_date_time": "1:00 pm on 8 May, 2023",
            "session_1": [
                turn("D1:1", "I adopted a beagle named Biscuit last week."),
                turn("D1:2", "My sister Clara moved to Lisbon for her new job."),
                turn("D1:3", "We painted the kitchen a bright yellow colour."),
            ],
        },
        "qa": [
            q("What is the name of Ann's beagle?", "Biscuit", "D1:1", 4),
            q("Where did Ann's sister move?", "Lisbon", "D1:2", 4),
            q("What colour did Ann paint the kitchen?", "bright yellow", "D1:3", 4),
            q("What colour did Ann paint the garage?", "bright yellow", "D1:3", 5),
        ],
    }]);
    let mut two = tasks.clone();
    let mut second = tasks[0].clone();
    second["sample_id"] = "chat-2".into();
    two.as_array_mut().unwrap().push(second);
    let text = serde_json::to_string_pretty(&two).unwrap();
    std::fs::write(dir.join("tasks.json"), &text).unwrap();
    std::fs::write(dir.join("big.json"), format!("{text}{}", " ".repeat(1 << 20))).unwrap();
}

/// A copy of the strategy schema with its first evolvable field locked.
fn custom_schema(dir: &Path) {
    let schema = std::fs::read_to_string(dir.join("schema/strategy.schema.json")).unwrap();
    let locked = schema.replacen("\"x-evolvable\": true", "\"x-evolvable\": false", 1);
    assert_ne!(schema, locked);
    std::fs::write(dir.join("custom.schema.json"), locked).unwrap();
}

/// A project without a journal or served file, and initial.yaml to start from.
fn no_journal(dir: &Path) {
    std::fs::rename(dir.join("strategies/served.yaml"), dir.join("initial.yaml")).unwrap();
    std::fs::remove_dir_all(dir.join(".emend")).unwrap();
}

fn nothing(_: &Path) {}

/// The settings of [`STALE_PENDING`].
const MANUAL_RULES: &[(&str, &str)] = &[
    ("serve.approval", "manual"),
    ("search.method", "rules"),
    // The rule evolver's steps on the built-in set need a confirm part of
    // 0.5 to be accepted (as in operator.rs).
    ("harness.split.confirm_fraction", "0.5"),
    ("harness.split.seed", "4"),
];

/// A pending version that waits against a version no longer served: one
/// round under manual approval (v2 pending against v1), then the served file
/// edited by hand, journaled by a forced rollback, and served by a rollback.
fn stale_pending(dir: &Path) {
    configure(dir, MANUAL_RULES);
    let run = |args: &[&str]| {
        let (code, out, err) = emend_env(dir, args, &[]);
        assert_eq!(code, 0, "emend {args:?}: {out}{err}");
        out
    };
    run(&["evolve", "--rounds", "1", "--quiet"]);
    let file = dir.join("strategies/served.yaml");
    let text = std::fs::read_to_string(&file).unwrap();
    let edited = text.replacen("rrf_kappa: 60", "rrf_kappa: 61", 1);
    assert_ne!(text, edited);
    std::fs::write(&file, edited).unwrap();
    run(&["rollback", "--to", "v1", "--force", "--reason", "journal the edit"]);
    let log: Value = serde_json::from_str(&run(&["log", "--json"])).unwrap();
    let edit = log["entries"].as_array().unwrap().iter().rev().find(|e| e["kind"] == "hand_edit").unwrap();
    run(&["rollback", "--to", &format!("v{}", edit["version"]), "--reason", "serve the edit"]);
    let pending: Value = serde_json::from_str(&run(&["pending", "--all", "--json"])).unwrap();
    assert!(pending["pending"].as_array().is_some_and(|p| !p.is_empty()), "no pending version: {pending}");
}

const NONE: Setup = Setup { name: "none", config: &[], prepare: nothing };
const COMMAND: Setup = Setup {
    name: "command harness",
    config: &[
        ("harness.kind", "command"),
        ("harness.command", "{argv: [sh, h.sh, '{strategy}', '{tasks}', '{out}'], shards: 2, concurrency: 1}"),
    ],
    prepare: harness_script,
};
const SLOW_COMMAND: Setup = Setup {
    name: "slow command harness",
    config: &[
        ("harness.kind", "command"),
        ("harness.command", "{argv: [sh, h.sh, '{strategy}', '{tasks}', '{out}'], env: {SLOW: '1'}}"),
    ],
    prepare: harness_script,
};
const COMMAND_UNUSED: Setup = Setup {
    name: "command configured, builtin harness",
    config: &[("harness.command", "{argv: [sh, h.sh, '{strategy}', '{tasks}', '{out}']}")],
    prepare: harness_script,
};
/// One shard (as [`RAY_NO_DRIVER`]).
const RAY: Setup = Setup {
    name: "ray",
    config: &[
        ("harness.executor", "ray"),
        ("harness.ray.shards", "1"),
        ("harness.ray.address", "x:1"),
        ("harness.ray.python", "sh"),
        ("harness.ray.driver", "driver.sh"),
    ],
    prepare: ray_driver,
};
/// One shard: one attempt in flight, so that one shard's failure does not
/// race another's (the first to fail cancels the others).
const RAY_NO_DRIVER: Setup = Setup {
    name: "ray without a driver",
    config: &[
        ("harness.executor", "ray"),
        ("harness.ray.address", "x:1"),
        ("harness.ray.python", "sh"),
        ("harness.ray.shards", "1"),
    ],
    prepare: ray_driver,
};
const F1: Setup = Setup { name: "f1 judge", config: &[("harness.judge", "f1")], prepare: nothing };
const REPLAY: Setup = Setup { name: "replay", config: &[("harness.protocol", "replay")], prepare: nothing };
const TASKS: Setup = Setup { name: "task files", config: &[], prepare: task_files };
const OWN_TASKS: Setup =
    Setup { name: "a LoCoMo file", config: &[("harness.tasks", "tasks.json")], prepare: task_files };
const BIG_TASKS: Setup =
    Setup { name: "a task file over 1 MB", config: &[("harness.tasks", "big.json")], prepare: task_files };
const MINILM_DIR: Setup = Setup {
    name: "a model directory",
    config: &[],
    prepare: |dir| std::fs::create_dir_all(dir.join("models")).unwrap(),
};
const SCHEMA: Setup = Setup { name: "a custom schema", config: &[], prepare: custom_schema };
const HOOKS: Setup = Setup { name: "hook scripts", config: &[], prepare: hook_scripts };
const MANUAL: Setup = Setup { name: "manual approval", config: &[("serve.approval", "manual")], prepare: hook_scripts };
const SLOW_HOOK: Setup =
    Setup { name: "a slow hook", config: &[("hooks.on_served", "[sh, slow.sh]")], prepare: hook_scripts };
const NO_JOURNAL: Setup = Setup { name: "no journal", config: &[], prepare: no_journal };
const STALL_1: Setup = Setup { name: "stall 1", config: &[("search.stall", "1")], prepare: nothing };
/// Round 2 of a project whose v2 is dear: its search starts with a cheaper
/// step, which finds a strategy from round 1 saving 8% of the tokens, prunes
/// it, and its non-inferiority test at 0.2 accepts it as v3; v3 is more than
/// restore_below_best under the best-ever v2, which is served again.
const CHEAPER: Setup = Setup {
    name: "a cheaper step after a dear round",
    config: &[("cost.min_saving", "0.05"), ("cost.noninferiority_margin", "0.2"), ("gates.category_drop_max", "0.5")],
    prepare: served_round,
};
/// Two shards at the default concurrency, each run by the driver.
const RAY_RUNS: Setup = Setup {
    name: "ray that runs the shards",
    config: &[
        ("harness.executor", "ray"),
        ("harness.ray.shards", "2"),
        ("harness.ray.address", "x:1"),
        ("harness.ray.python", "sh"),
        ("harness.ray.driver", "driver.sh"),
    ],
    prepare: running_ray_driver,
};
const RULES: Setup = Setup { name: "rules", config: &[("search.method", "rules")], prepare: nothing };
const ACCEPTING: Setup =
    Setup { name: "rules that get accepted", config: MANUAL_RULES.split_at(1).1, prepare: nothing };
const STALE_PENDING: Setup =
    Setup { name: "a pending version against an older served one", config: MANUAL_RULES, prepare: stale_pending };

use Expect::{Differs, Refused};
use Observe::{Budget, Diagnose, Evolve, Load, Models, Round, Search};

/// One row.
const fn row(key: &'static str, value: &'static str, observe: Observe, setup: &'static Setup, expect: Expect) -> Row {
    Row { key, value, observe, setup, expect }
}

/// Every key of the schema but the model roles' ([`role_rows`]).
pub const ROWS: &[Row] = &[
    row("cost.max_tokens", "100", Evolve, &NONE, Differs),
    row("cost.min_saving", "0.9", Search, &CHEAPER, Differs),
    row("cost.noninferiority_margin", "0.05", Search, &CHEAPER, Differs),
    row("cost.per_1k_tokens", "2.0", Evolve, &NONE, Differs),
    row("gates.alpha", "0.001", Evolve, &NONE, Differs),
    row("gates.bootstrap_resamples", "200", Evolve, &NONE, Differs),
    row("gates.category_drop_max", "0.0", Evolve, &NONE, Differs),
    row("gates.cluster_check", "require", Evolve, &NONE, Differs),
    row("gates.cost_bound", "0.1", Evolve, &NONE, Differs),
    row("gates.cost_bound_v1", "0.1", Evolve, &NONE, Differs),
    row("gates.full_tests_per_round", "2", Round, &ACCEPTING, Differs),
    row("gates.lord_initial_wealth", "0.1", Evolve, &NONE, Differs),
    row("gates.probe_drop_max", "0.5", Evolve, &NONE, Differs),
    row("gates.probe_size", "20", Evolve, &NONE, Differs),
    row("gates.restore_below_best", "0.5", Search, &CHEAPER, Differs),
    row("harness.budget_ceiling", "100", Diagnose, &NONE, Differs),
    row("harness.command.argv", "[sh, h.sh, '{strategy}', '{tasks}', '{out}', extra]", Diagnose, &COMMAND, Differs),
    row("harness.command.concurrency", "2", Diagnose, &COMMAND, Differs),
    row("harness.command.env.*", "changed", Diagnose, &COMMAND, Differs),
    row("harness.command.shards", "3", Diagnose, &COMMAND, Differs),
    row("harness.command.timeout_secs", "1", Diagnose, &SLOW_COMMAND, Differs),
    row("harness.command.workdir", "sub", Diagnose, &COMMAND, Differs),
    row("harness.conversations", "[chat-1]", Diagnose, &OWN_TASKS, Differs),
    row("harness.executor", "ray", Diagnose, &NONE, Differs),
    row("harness.f1_threshold", "0.9", Diagnose, &F1, Differs),
    row("harness.include_adversarial", "true", Diagnose, &OWN_TASKS, Differs),
    row("harness.judge", "f1", Diagnose, &NONE, Differs),
    row("harness.kind", "command", Diagnose, &COMMAND_UNUSED, Differs),
    row("harness.max_dataset_mb", "1", Diagnose, &BIG_TASKS, Differs),
    row("harness.minilm_dir", "models", Diagnose, &MINILM_DIR, Differs),
    row("harness.protocol", "replay", Diagnose, &NONE, Differs),
    row("harness.ray.address", "y:2", Diagnose, &RAY, Differs),
    row("harness.ray.concurrency", "1", Diagnose, &RAY_RUNS, Differs),
    // Without it `sh -m emend_ray` runs the project's emend_ray.
    row("harness.ray.driver", "driver.sh", Diagnose, &RAY_NO_DRIVER, Differs),
    row("harness.ray.emend", "/opt/emend", Diagnose, &RAY, Differs),
    row("harness.ray.python", "bash", Diagnose, &RAY, Differs),
    row("harness.ray.shards", "3", Diagnose, &RAY, Differs),
    row("harness.ray.timeout_secs", "30", Diagnose, &RAY, Differs),
    row("harness.replay.every_sessions", "3", Diagnose, &REPLAY, Differs),
    row("harness.schema", "custom.schema.json", Evolve, &SCHEMA, Differs),
    row("harness.split.confirm_fraction", "0.5", Evolve, &NONE, Differs),
    row("harness.split.seed", "7", Evolve, &NONE, Differs),
    row("harness.split.unit", "conversation", Evolve, &NONE, Differs),
    // No stage results kept on disk for the next command.
    row("harness.stage_cache_mb", "0", Diagnose, &NONE, Differs),
    row("harness.tasks", "tasks.json", Diagnose, &TASKS, Differs),
    row("harness.version", "'2'", Evolve, &NONE, Differs),
    row("hooks.on_pending", "[sh, hook.sh]", Evolve, &MANUAL, Differs),
    row("hooks.on_served", "[sh, hook.sh]", Evolve, &HOOKS, Differs),
    row("hooks.timeout", "1s", Evolve, &SLOW_HOOK, Differs),
    row("initial_strategy", "initial.yaml", Evolve, &NO_JOURNAL, Differs),
    row(
        "journal.expect_head",
        "'0000000000000000000000000000000000000000000000000000000000000000'",
        Evolve,
        &NONE,
        Differs,
    ),
    // The default search proposes one candidate a round whatever the number.
    row("loop.candidates", "1", Round, &RULES, Differs),
    // The upper confidence bounds the planner ranks the directions by, once
    // a round has visited some (not what the round tried: it visits
    // unvisited directions first whatever the constant).
    row("loop.exploration", "5.0", Round, &RULES, Differs),
    row("loop.rounds", "1", Budget, &NONE, Differs),
    row("loop.seed", "3", Evolve, &NONE, Differs),
    // One round's search scores four strategies on the whole search part:
    // the default 8 never has enough to agree.
    row("search.consensus", "2", Search, &NONE, Differs),
    row("search.converge", "1", Search, &STALL_1, Differs),
    row("search.first_look", "10", Search, &NONE, Differs),
    row("search.method", "steps", Evolve, &NONE, Differs),
    row("search.multivariate", "true", Search, &NONE, Differs),
    row("search.prune_tolerance", "5", Search, &NONE, Differs),
    row("search.race_level", "0.3", Search, &NONE, Differs),
    row("search.raced_out", "deficit", Search, &NONE, Differs),
    row("search.sampler", "forest", Search, &NONE, Differs),
    row("search.stall", "5", Search, &NONE, Differs),
    row("search.startup", "2", Search, &NONE, Differs),
    row("serve.approval", "manual", Evolve, &NONE, Differs),
    // The round's new pending version leaves one live (the cap): the stale one is superseded.
    row("serve.max_pending", "1", Round, &STALE_PENDING, Differs),
    row("strategy", "other.yaml", Evolve, &NONE, Differs),
];

/// The roles' keys and what each needs.
const ROLES: [&str; 6] = ["answerer", "classifier", "critic", "evolver", "extractor", "judge"];
const ROLE_KEYS: [&str; 12] = [
    "allow_shared_with_judge",
    "api_key_env",
    "backoff_secs",
    "base_url",
    "concurrency",
    "deadline_secs",
    "max_tokens",
    "model",
    "redact",
    "retries",
    "temperature",
    "timeout_secs",
];

/// The judge and the answerer on one endpoint and model: refused unless
/// the judge allows it.
const SHARED_JUDGE: Setup = Setup {
    name: "a judge sharing the answerer's model",
    config: &[(
        "roles",
        "{answerer: {base_url: 'http://127.0.0.1:9/v1', model: m}, judge: {base_url: 'http://127.0.0.1:9/v1', model: m}}",
    )],
    prepare: nothing,
};

/// One role on the first test server, with its own model and the test key;
/// short backoffs, a deadline of 10 s.
macro_rules! on_server {
    ($role:literal) => {
        concat!(
            $role,
            ": {base_url: '{url}', model: ",
            $role,
            "-model, api_key_env: EMEND_TEST_KEY, backoff_secs: 0.01, timeout_secs: 5, deadline_secs: 10}"
        )
    };
}

/// The model roles' test project: llm_support's dialogue and fact-extracting
/// strategy (no journal yet), the LLM judge, the rule evolver, every role on
/// the test server.
const MODELS: Setup = Setup {
    name: "every role on the test server",
    config: &[
        ("harness.tasks", "tasks.json"),
        ("harness.judge", "llm"),
        ("harness.split.confirm_fraction", "0.1"),
        ("harness.split.seed", "0"),
        ("gates.probe_size", "10"),
        ("gates.bootstrap_resamples", "200"),
        ("search.method", "rules"),
        ("initial_strategy", "initial.yaml"),
        (
            "roles",
            concat!(
                "{",
                on_server!("extractor"),
                ", ",
                on_server!("answerer"),
                ", ",
                on_server!("judge"),
                ", ",
                on_server!("critic"),
                ", ",
                on_server!("evolver"),
                ", ",
                on_server!("classifier"),
                "}"
            ),
        ),
    ],
    prepare: models_project,
};

/// Writes the model roles' test project ([`MODELS`]).
fn models_project(dir: &Path) {
    #[cfg(feature = "llm")]
    models::project(dir);
    #[cfg(not(feature = "llm"))]
    unreachable!("the roles' rows need the llm feature: {}", dir.display());
}

/// The changed value of a role's key, and the test server's behaviour under
/// which it shows.
fn role_change(key: &str) -> (&'static str, Serve) {
    match key {
        // Another variable, holding another key: the Authorization header.
        "api_key_env" => ("EMEND_OTHER_KEY", Serve::Plain),
        // At least 15 s before the retry of a failed request: past the 10 s
        // deadline, so the call fails at its first 500.
        "backoff_secs" => ("60", Serve::Flaky),
        // The second server gets the role's requests.
        "base_url" => ("'{url2}'", Serve::Plain),
        // One request at a time: none in flight beside another.
        "concurrency" => ("1", Serve::Slow),
        // No time to retry the first 500.
        "deadline_secs" => ("0.002", Serve::Flaky),
        "max_tokens" => ("100", Serve::Plain),
        "model" => ("other-model", Serve::Plain),
        // Every word of four letters or more in a reply: the JSON replies no
        // longer parse, the answers are no longer the dialogue's words.
        "redact" => ("['[a-z]{4,}']", Serve::Plain),
        // The first 500 fails the call.
        "retries" => ("0", Serve::Flaky),
        "temperature" => ("0.5", Serve::Plain),
        // Every reply comes too late.
        "timeout_secs" => ("0.05", Serve::Slow),
        _ => unreachable!("{key}"),
    }
}

/// The role `role` alone, configured with an endpoint nothing listens on
/// (what a refusal at load needs).
fn role_setup(role: &'static str) -> &'static Setup {
    let config = format!("{{base_url: 'http://127.0.0.1:9/v1', model: {role}-model}}");
    let config: &'static [(&str, &str)] =
        Box::leak(Box::new([(&*Box::leak(format!("roles.{role}").into_boxed_str()), &*config.leak())]));
    Box::leak(Box::new(Setup { name: role, config, prepare: nothing }))
}

/// A rows for every key of every role (`roles.<role>.<key>`).
pub fn role_rows() -> Vec<Row> {
    let mut out = Vec::new();
    for role in ROLES {
        for key in ROLE_KEYS {
            let name: &'static str = Box::leak(format!("roles.{role}.{key}").into_boxed_str());
            out.push(match (role, key) {
                ("judge", "allow_shared_with_judge") => row(name, "true", Load, &SHARED_JUDGE, Differs),
                (_, "allow_shared_with_judge") => row(name, "true", Load, role_setup(role), Refused),
                // emend asks these roles one call at a time: the bound is refused.
                ("critic" | "evolver", "concurrency") => row(name, "1", Load, role_setup(role), Refused),
                _ => {
                    let (value, serve) = role_change(key);
                    row(name, value, Models(serve), &MODELS, Differs)
                }
            });
        }
    }
    out
}

/// Every row: [`ROWS`] and the roles'.
fn all_rows() -> Vec<&'static Row> {
    static ROLE_ROWS: OnceLock<Vec<Row>> = OnceLock::new();
    ROWS.iter().chain(ROLE_ROWS.get_or_init(role_rows)).collect()
}

/// A fresh project (`emend init --tasks builtin`) copied from one made once.
fn fresh_project() -> (tempfile::TempDir, PathBuf) {
    static TEMPLATE: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    let (_, template) = TEMPLATE.get_or_init(|| {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("p");
        let (code, out, err) = emend_env(tmp.path(), &["init", "p", "--tasks", "builtin"], &[]);
        assert_eq!(code, 0, "{out}{err}");
        (tmp, dir)
    });
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    copy_dir(template, &dir);
    (tmp, dir)
}

/// Sets the dotted `path` of `doc` to the YAML `value`, making the maps on the way.
fn set(doc: &mut Yaml, path: &str, value: &str) {
    let value: Yaml = serde_yaml::from_str(value).unwrap_or_else(|e| panic!("{path}: {value:?}: {e}"));
    let mut node = doc;
    for segment in path.split('.') {
        if !node.is_mapping() {
            *node = Yaml::Mapping(Default::default());
        }
        let map = node.as_mapping_mut().unwrap();
        node = map.entry(Yaml::String(segment.to_string())).or_insert(Yaml::Null);
    }
    *node = value;
}

/// `dir`'s emend.yaml with `settings` applied.
fn configure(dir: &Path, settings: &[(&str, &str)]) {
    let file = dir.join("emend.yaml");
    let mut doc: Yaml = serde_yaml::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    for (path, value) in settings {
        set(&mut doc, &path.replace('*', STAR), value);
    }
    std::fs::write(&file, serde_yaml::to_string(&doc).unwrap()).unwrap();
}

/// Removes what differs between two runs of one project: wall clocks,
/// who ran it, the journal's hash chain (it hashes the clocks).
fn normalize(v: &mut Value) {
    strip_clock(v);
    match v {
        Value::Object(m) => {
            for k in ["at", "who", "uid", "elapsed_ms"] {
                m.remove(k);
            }
            m.values_mut().for_each(normalize);
        }
        Value::Array(a) => a.iter_mut().for_each(normalize),
        _ => {}
    }
}

/// `text` with RFC 3339 times (as logs and messages print them) replaced.
fn without_times(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        let looks = b.len() - i >= 20
            && b[i..i + 4].iter().all(u8::is_ascii_digit)
            && b[i + 4] == b'-'
            && b[i + 10] == b'T'
            && b[i + 13] == b':';
        if looks {
            let end = (i + 19..b.len()).find(|&j| b[j] == b'Z').map_or(i + 19, |j| j + 1);
            out.push_str("<time>");
            i = end;
        } else {
            let c = text[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

/// A command's stdout, JSON or JSON lines normalized.
fn stdout_view(args: &[&str], out: &str) -> String {
    if let Ok(mut v) = serde_json::from_str::<Value>(out) {
        normalize(&mut v);
        return serde_json::to_string_pretty(&v).unwrap();
    }
    let lines: Option<Vec<Value>> = out.lines().map(|l| serde_json::from_str::<Value>(l).ok()).collect();
    match lines {
        Some(lines) if !lines.is_empty() => lines
            .into_iter()
            .map(|mut e| {
                if args == ["journal", "export"] {
                    e = serde_json::json!({"seq": e["seq"], "kind": e["kind"], "payload": e["payload"]});
                }
                normalize(&mut e);
                serde_json::to_string(&e).unwrap()
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => out.to_string(),
    }
}

/// The lines of `text`, sorted.
fn sorted_lines(text: &str) -> String {
    let mut lines: Vec<&str> = text.lines().collect();
    lines.sort_unstable();
    lines.join("\n")
}

/// The commands of an observation.
fn commands(observe: Observe) -> &'static [&'static [&'static str]] {
    match observe {
        Load => &[&["status", "--json"]],
        Diagnose => &[&["diagnose", "--json"]],
        Evolve => &[&["evolve", "--rounds", "1", "--max-evals", "5", "--json", "--quiet"], &["journal", "export"]],
        Search => &[
            &["evolve", "--rounds", "1", "--candidates", "1", "--max-evals", "15", "--json", "--quiet"],
            &["trials", "--json"],
        ],
        Budget => &[&["evolve", "--max-evals", "8", "--json", "--quiet"]],
        Round => &[
            &["evolve", "--rounds", "1", "--json", "--quiet"],
            &["pending", "--all", "--json"],
            &["hypotheses", "--json"],
        ],
        Models(_) => &[&["evolve", "--rounds", "1", "--json", "--quiet"], &["journal", "export"]],
    }
}

/// What `observe` shows on a fresh project with `setup` and `settings`:
/// each command's exit code, stdout and stderr, then the logs the setup's
/// scripts wrote, the project's path and clocks taken out.
fn observe(observe: Observe, setup: &Setup, settings: &[(&str, &str)]) -> String {
    let (_tmp, dir) = fresh_project();
    (setup.prepare)(&dir);
    #[cfg(feature = "llm")]
    let servers = match observe {
        Models(serve) => Some(models::Servers::start(serve)),
        _ => None,
    };
    let settings: Vec<(&str, String)> = [setup.config, settings]
        .concat()
        .into_iter()
        .map(|(k, v)| {
            #[cfg(feature = "llm")]
            if let Some(s) = &servers {
                return (k, s.locate(v));
            }
            (k, v.to_string())
        })
        .collect();
    configure(&dir, &settings.iter().map(|(k, v)| (*k, v.as_str())).collect::<Vec<_>>());
    let mut seen = String::new();
    for args in commands(observe) {
        let mut cmd = support::command(&dir, args);
        #[cfg(feature = "llm")]
        cmd.envs(models::KEYS).env_remove("OPENAI_API_KEY");
        let out = cmd.env_remove("EMEND_MINILM_DIR").env_remove("RAY_ADDRESS").output().expect("emend runs");
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        // Shards run at once log in any order: the lines, sorted.
        let stderr = sorted_lines(&without_times(&stderr));
        seen.push_str(&format!(
            "$ emend {}\nexit {:?}\n{}\n{stderr}\n",
            args.join(" "),
            out.status.code(),
            stdout_view(args, &stdout)
        ));
    }
    for log in ["harness.log", "ray.log", "hook.log"] {
        if let Ok(text) = std::fs::read_to_string(dir.join(log)) {
            seen.push_str(&format!("{log}:\n{}", if log == "ray.log" { sorted_lines(&text) } else { text }));
        }
    }
    if dir.join(".emend/cache").is_dir() {
        // Each cache and how many files it keeps (their names hold hashes of paths).
        let mut names: Vec<String> = std::fs::read_dir(dir.join(".emend/cache"))
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                format!("{} ({} files)", e.file_name().to_string_lossy(), files_in(&e.path()))
            })
            .collect();
        names.sort();
        seen.push_str(&format!("caches: {names:?}\n"));
    }
    #[cfg(feature = "llm")]
    if let Some(s) = &servers {
        seen.push_str(&s.summary());
        seen = s.scrub(&seen);
    }
    without_times(&seen.replace(&dir.display().to_string(), "<project>"))
}

/// The test servers of [`Observe::Models`] and what they saw.
#[cfg(feature = "llm")]
mod models {
    use std::collections::{BTreeSet, HashSet};
    use std::path::Path;
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    use super::{ROLES, Serve};
    use crate::llm_support::{self, Reply, Seen, Server};

    /// How long a [`Serve::Slow`] reply takes.
    const SLOW_REPLY: std::time::Duration = std::time::Duration::from_millis(150);

    /// The API keys in the environment of every run: the setup's roles
    /// read the first, `api_key_env`'s changed value names the second.
    pub const KEYS: [(&str, &str); 2] =
        [("EMEND_TEST_KEY", "sk-behaviour-first-5d1e0c"), ("EMEND_OTHER_KEY", "sk-behaviour-second-9a7c4b")];

    /// The dialogue and the fact-extracting strategy of llm_support, no journal.
    pub fn project(dir: &Path) {
        std::fs::remove_file(dir.join("strategies/served.yaml")).unwrap();
        std::fs::remove_dir_all(dir.join(".emend")).unwrap();
        let tasks = serde_json::to_string_pretty(&llm_support::fixture()).unwrap();
        std::fs::write(dir.join("tasks.json"), tasks).unwrap();
        std::fs::write(dir.join("initial.yaml"), llm_support::strategy()).unwrap();
    }

    /// When each request arrived, and from which role.
    type Arrivals = Arc<Mutex<Vec<(&'static str, Instant)>>>;

    /// Plausible replies, served as `serve` says; arrivals recorded.
    fn script(serve: Serve, arrivals: Arrivals) -> impl Fn(&Seen) -> Reply + Send + Sync + 'static {
        let failed = Mutex::new(HashSet::new());
        move |seen| {
            arrivals.lock().unwrap().push((seen.role(), Instant::now()));
            match (serve, llm_support::default_reply(seen)) {
                (Serve::Flaky, reply) => {
                    if failed.lock().unwrap().insert(seen.body.to_string()) {
                        Reply::Status { code: 500, retry_after: None, body: "{\"error\": \"busy\"}".into() }
                    } else {
                        reply
                    }
                }
                (Serve::Slow, Reply::Content(c)) => Reply::Hang(SLOW_REPLY, c),
                (_, reply) => reply,
            }
        }
    }

    /// Two servers that answer alike (`{url}` and `{url2}`).
    pub struct Servers {
        serve: Serve,
        servers: [(Server, Arrivals); 2],
    }

    impl Servers {
        pub fn start(serve: Serve) -> Servers {
            let one = || {
                let arrivals = Arrivals::default();
                (Server::start(script(serve, arrivals.clone())), arrivals)
            };
            Servers { serve, servers: [one(), one()] }
        }

        /// A setting's value with the servers' addresses in.
        pub fn locate(&self, value: &str) -> String {
            value.replace("{url}", &self.servers[0].0.url).replace("{url2}", &self.servers[1].0.url)
        }

        /// `text` without the servers' ports, and without the hashes they
        /// enter (a role's endpoint is part of the harness's identity).
        pub fn scrub(&self, text: &str) -> String {
            let text = text.replace(&self.servers[0].0.url, "<url>").replace(&self.servers[1].0.url, "<url2>");
            let mut out = String::with_capacity(text.len());
            let mut run = String::new();
            for c in text.chars().chain(std::iter::once(' ')) {
                if c.is_ascii_hexdigit() && !c.is_ascii_uppercase() {
                    run.push(c);
                    continue;
                }
                out.push_str(if run.len() >= 32 { "<hash>" } else { &run });
                run.clear();
                out.push(c);
            }
            out.pop();
            out
        }

        /// Per server and role: the requests, what they sent, and (slow
        /// replies) whether two were in flight at once.
        pub fn summary(&self) -> String {
            let mut out = String::new();
            for ((server, arrivals), name) in self.servers.iter().zip(["url", "url2"]) {
                let seen = server.seen();
                for role in ROLES {
                    let mine: Vec<&Seen> = seen.iter().filter(|s| s.role() == role).collect();
                    if mine.is_empty() {
                        continue;
                    }
                    let sent: BTreeSet<String> = mine
                        .iter()
                        .map(|s| {
                            let key = KEYS
                                .iter()
                                .find(|(_, k)| s.authorization.as_deref() == Some(&format!("Bearer {k}")))
                                .map_or("no key", |(name, _)| name);
                            format!(
                                "model {} temperature {} max_tokens {} key {key}",
                                s.model(),
                                s.body["temperature"],
                                s.body["max_tokens"]
                            )
                        })
                        .collect();
                    out.push_str(&format!("{name} {role}: {} requests, {sent:?}", mine.len()));
                    if self.serve == Serve::Slow {
                        out.push_str(&format!(", two at once: {}", at_once(arrivals, role)));
                    }
                    out.push('\n');
                }
            }
            out
        }
    }

    /// Whether two of `role`'s requests arrived within a reply's time: in
    /// flight at once.
    fn at_once(arrivals: &Arrivals, role: &str) -> bool {
        let mut times: Vec<Instant> = arrivals.lock().unwrap().iter().filter(|a| a.0 == role).map(|a| a.1).collect();
        times.sort();
        times.windows(2).any(|w| w[1] - w[0] < SLOW_REPLY)
    }
}

/// How many files `path` is or holds.
fn files_in(path: &Path) -> usize {
    match std::fs::read_dir(path) {
        Ok(entries) => entries.map(|e| files_in(&e.unwrap().path())).sum(),
        Err(_) => 1,
    }
}

/// The settings of a row's changed run.
fn change(row: &Row) -> [(&'static str, &'static str); 1] {
    [(row.key, row.value)]
}

/// Whether the row's key shows: None, or why not. `default` is the
/// setup-alone run's observation, `changed` the one with the key changed.
fn verdict(row: &Row, default: &str, changed: &str) -> Option<String> {
    let key = row.key.replace('*', STAR);
    match row.expect {
        Differs if default == changed => Some(format!(
            "{} = {}: no effect on `{}` (setup: {}); make it change something or refuse it in \
             core/src/config/retired.rs\n{changed}",
            row.key,
            row.value,
            commands(row.observe).iter().map(|c| c.join(" ")).collect::<Vec<_>>().join("; "),
            row.setup.name
        )),
        Refused if !(changed.contains("exit Some(2)") && changed.contains(&key)) => {
            Some(format!("{} = {}: not refused at load naming the key:\n{changed}", row.key, row.value))
        }
        _ => None,
    }
}

/// One run: the observation, the setup, the settings changed beyond it.
type Job = (Observe, &'static Setup, Vec<(&'static str, &'static str)>);

/// Runs `jobs` on a few threads: each job's observation, in order.
fn run_all(jobs: Vec<Job>) -> Vec<String> {
    let queue = Mutex::new(jobs.into_iter().enumerate().collect::<Vec<_>>());
    let done = Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 4);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let Some((i, (obs, setup, settings))) = queue.lock().unwrap().pop() else { break };
                    let seen = observe(obs, setup, &settings);
                    done.lock().unwrap().push((i, seen));
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap();
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, seen)| seen).collect()
}

/// Checks `rows`: the setup-alone runs twice each (they must agree), each
/// row's changed run once. The problems found.
fn check(rows: &[&'static Row]) -> Vec<String> {
    let mut defaults: Vec<(Observe, &'static Setup)> = Vec::new();
    for r in rows.iter().filter(|r| r.expect == Differs) {
        if !defaults.iter().any(|(o, s)| *o == r.observe && s.name == r.setup.name) {
            defaults.push((r.observe, r.setup));
        }
    }
    let mut jobs = Vec::new();
    for (o, s) in &defaults {
        jobs.push((*o, *s, vec![]));
        jobs.push((*o, *s, vec![]));
    }
    jobs.extend(rows.iter().map(|r| (r.observe, r.setup, change(r).to_vec())));
    let seen = run_all(jobs);
    let (base, changed) = seen.split_at(defaults.len() * 2);
    let mut problems = Vec::new();
    let mut default_of = HashMap::new();
    for (i, (o, s)) in defaults.iter().enumerate() {
        let (a, b) = (&base[2 * i], &base[2 * i + 1]);
        if a != b {
            problems
                .push(format!("{o:?} with setup {:?} differs between two identical projects:\n{a}\n----\n{b}", s.name));
        }
        default_of.insert((*o, s.name), a.clone());
    }
    for (r, changed) in rows.iter().zip(changed) {
        let default = default_of.get(&(r.observe, r.setup.name)).map_or("", String::as_str);
        problems.extend(verdict(r, default, changed));
    }
    problems
}

#[test]
fn the_table_has_a_row_for_every_key_of_the_schema() {
    let keys = emend_core::config::leaf_keys();
    assert!(keys.len() > 100, "the walk found only {keys:?}");
    let rows: Vec<&str> = all_rows().iter().map(|r| r.key).collect();
    let missing: Vec<&String> = keys.iter().filter(|k| !rows.contains(&k.as_str())).collect();
    let extra: Vec<&&str> = rows.iter().filter(|r| !keys.iter().any(|k| k == *r)).collect();
    let mut twice: Vec<&&str> = rows.iter().filter(|r| rows.iter().filter(|x| x == r).count() > 1).collect();
    twice.dedup();
    assert!(
        missing.is_empty() && extra.is_empty() && twice.is_empty(),
        "engine/tests/cli/config_behaviour.rs: add a row (key, a changed value, what shows it) for each key of \
         the schema without one: {missing:?}; remove the rows of keys the schema no longer has: {extra:?}; \
         keys with more than one row: {twice:?}"
    );
}

#[test]
fn every_key_of_the_schema_changes_what_emend_does() {
    // The roles' keys need the test server (feature llm).
    let rows: Vec<&'static Row> =
        all_rows().into_iter().filter(|r| cfg!(feature = "llm") || !r.key.starts_with("roles.")).collect();
    let problems = check(&rows);
    assert!(problems.is_empty(), "{} problems:\n{}", problems.len(), problems.join("\n\n"));
}

#[test]
fn a_key_set_to_its_default_is_reported_as_no_effect() {
    static SAME: Row = row("loop.seed", "0", Evolve, &NONE, Differs);
    static COMMENT: Row = row("harness.version", "null", Diagnose, &NONE, Differs);
    let problems = check(&[&SAME, &COMMENT]);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(problems.iter().all(|p| p.contains(": no effect on `")), "{problems:?}");
}
