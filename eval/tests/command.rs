//! The external harness protocol: a command that crashes, hangs, writes
//! malformed JSON, omits or duplicates questions, breaks the outcome schema or
//! cannot answer is an evaluation error naming the shard, line and field; a
//! flaky command passes thanks to the retry; a changed system changes the
//! harness hash. (The CLI against the Python reference adapter: the emend
//! crate's cli tests, command_project.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use emend_core::artifact::{self, Artifact};
use emend_core::schema::StrategySchema;
use emend_eval::backend::Backend;
use emend_eval::command::{CommandBackend, CommandSpec};
use serde_json::{Value, json};

/// Two conversations, five questions in categories 1-4 (and one adversarial, left out).
const FIXTURE: &str = r#"[
 {"sample_id": "c1", "conversation": {"speaker_a": "Ann", "speaker_b": "Bo",
   "session_1_date_time": "1:56 pm on 8 May, 2023",
   "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat named Miso last week."},
                 {"speaker": "Bo", "dia_id": "D1:2", "text": "Lovely, what does Miso eat?"},
                 {"speaker": "Ann", "dia_id": "D1:3", "text": "Mostly tuna, and she hates carrots."}],
   "session_2_date_time": "3:00 pm on 9 June, 2023",
   "session_2": [{"speaker": "Bo", "dia_id": "D2:1", "text": "I started painting lessons on Monday."},
                 {"speaker": "Ann", "dia_id": "D2:2", "text": "Painting is relaxing, I paint birds."}]},
  "qa": [{"question": "What is the name of Ann's cat?", "answer": "Miso", "evidence": ["D1:1"], "category": 4},
         {"question": "What does Miso eat?", "answer": "tuna", "evidence": ["D1:3"], "category": 4},
         {"question": "Is Miso a dog?", "adversarial_answer": "yes", "evidence": ["D1:1"], "category": 5},
         {"question": "When did Bo start painting lessons?", "answer": "June 2023", "evidence": ["D2:1"], "category": 2}]},
 {"sample_id": "c2", "conversation": {"speaker_a": "Cy", "speaker_b": "Di",
   "session_1_date_time": "10:00 am on 1 January, 2024",
   "session_1": [{"speaker": "Cy", "dia_id": "D1:1", "text": "My sister moved to Lisbon for work."},
                 {"speaker": "Di", "dia_id": "D1:2", "text": "Lisbon has great food and trams."}]},
  "qa": [{"question": "Where did Cy's sister move?", "answer": "Lisbon", "evidence": ["D1:1"], "category": 1},
         {"question": "What does Lisbon have?", "answer": "food", "evidence": ["D1:2"], "category": 3}]}
]"#;

/// Question ids and categories of FIXTURE (adversarial excluded), dataset order.
const QUESTIONS: [(&str, &str, &str); 5] = [
    ("c1#0", "c1", "single-hop"),
    ("c1#1", "c1", "single-hop"),
    ("c1#3", "c1", "temporal"),
    ("c2#0", "c2", "multi-hop"),
    ("c2#1", "c2", "open-domain"),
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn record(i: usize) -> Value {
    let (id, conv, cat) = QUESTIONS[i];
    json!({"id": id, "conversation": conv, "category": cat, "correct": i.is_multiple_of(2), "context_tokens": 10 + i})
}

fn lines(records: &[Value]) -> String {
    records.iter().map(|r| format!("{r}\n")).collect()
}

/// A test directory with a shell script that writes `body`'s outcomes.
struct Case {
    dir: tempfile::TempDir,
}

impl Case {
    fn new() -> Case {
        Case { dir: tempfile::tempdir().unwrap() }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// `sh script.sh {strategy} {tasks} {out}`: the script sees them as $1 $2 $3.
    fn sh(&self, script: &str) -> Vec<String> {
        let p = self.write("adapter.sh", script);
        vec!["sh".into(), p.display().to_string(), "{strategy}".into(), "{tasks}".into(), "{out}".into()]
    }

    /// A command that counts its runs in `runs` and then runs `script`.
    fn counted_sh(&self, script: &str) -> Vec<String> {
        let runs = self.path("runs");
        self.sh(&format!("echo run >> '{}'\n{script}", runs.display()))
    }

    fn runs(&self) -> usize {
        std::fs::read_to_string(self.path("runs")).map(|s| s.lines().count()).unwrap_or(0)
    }

    /// `cat` of prepared outcomes: the command always writes `records`.
    fn cat(&self, text: &str) -> Vec<String> {
        let out = self.write("prepared.jsonl", text);
        self.counted_sh(&format!("cat '{}' > \"$3\"", out.display()))
    }
}

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

fn schema() -> StrategySchema {
    StrategySchema::from_path(&workspace().join("examples/python-bm25/strategy.schema.json")).unwrap()
}

fn strategy() -> Artifact {
    let path = workspace().join("examples/python-bm25/default.yaml");
    artifact::load_file(&path, &schema()).unwrap()
}

fn backend(spec: CommandSpec) -> CommandBackend {
    let dataset = emend_harness::load_str("fixture.json", FIXTURE).unwrap();
    CommandBackend::new(&dataset, &emend_harness::Selection::default(), spec, schema().raw(), Some("test")).unwrap()
}

fn evaluate_err(spec: CommandSpec) -> String {
    match backend(spec).evaluate(&strategy(), None) {
        Ok(e) => panic!("expected an error, got {} outcomes", e.n()),
        Err(e) => e.to_string(),
    }
}

const ECHO_ADAPTER: &str = r#"
import json, os, sys
strategy, tasks, out = sys.argv[1:4]
shard = json.load(open(tasks))
s = json.load(open(strategy))
assert "version" not in s and "parent" not in s, "metadata reached the command"
mode = os.environ.get("MODE", "ok")
index = shard["shard"]["index"]
if mode == "crash-shard-2" and index == 2:
    print("shard two is cursed", file=sys.stderr)
    sys.exit(3)
with open(out, "w") as f:
    for sample in shard["samples"]:
        for qa in sample["qa"]:
            f.write(json.dumps({
                "id": qa["id"], "conversation": sample["sample_id"], "category": qa["category_name"],
                "correct": qa["resolved_evidence"] == ["D1:1"],
                "answer": "top_k=%d shard=%d/%d" % (s["retrieve"]["top_k"], index, shard["shard"]["count"]),
            }) + "\n")
"#;

fn python_echo(case: &Case) -> Vec<String> {
    let p = case.write("echo.py", ECHO_ADAPTER);
    vec!["python3".into(), p.display().to_string(), "{strategy}".into(), "{tasks}".into(), "{out}".into()]
}

#[test]
fn shards_run_concurrently_and_every_question_comes_back() {
    let case = Case::new();
    let b = backend(spec(python_echo(&case), 3, 2, 30.0));
    let ids: Vec<String> = b.questions().into_iter().map(|(id, _)| id).collect();
    assert_eq!(ids, ["c1#0", "c1#1", "c1#3", "c2#0", "c2#1"]);
    let eval = b.evaluate(&strategy(), None).unwrap();
    assert_eq!(eval.outcomes.iter().map(|o| o.id.as_str()).collect::<Vec<_>>(), ids);
    assert_eq!(eval.correct(), 2, "c1#0 and c2#0 have evidence D1:1");
    let answers: Vec<&str> = eval.outcomes.iter().map(|o| o.answer.as_deref().unwrap()).collect();
    assert_eq!(
        answers,
        ["top_k=3 shard=1/3", "top_k=3 shard=1/3", "top_k=3 shard=2/3", "top_k=3 shard=2/3", "top_k=3 shard=3/3"]
    );
    // A probe subset runs only its questions.
    let subset = vec!["c1#3".to_string(), "c2#1".to_string()];
    let probe = b.evaluate(&strategy(), Some(&subset)).unwrap();
    assert_eq!(probe.outcomes.iter().map(|o| o.id.as_str()).collect::<Vec<_>>(), ["c1#3", "c2#1"]);
    let err = b.evaluate(&strategy(), Some(&["c9#0".to_string()])).unwrap_err();
    assert_eq!(err.to_string(), "question c9#0 is not in the task set");
}

#[test]
fn a_crashing_command_is_retried_once_then_an_error_with_its_stderr() {
    let case = Case::new();
    let argv = case.counted_sh("echo 'loading index' >&2\necho 'boom: the index is corrupt' >&2\nexit 3");
    let err = evaluate_err(spec(argv, 1, 1, 30.0));
    assert_eq!(err, "shard 1/1: exit status 3 after retry; stderr: loading index | boom: the index is corrupt");
    assert_eq!(case.runs(), 2);
}

#[test]
fn a_crash_in_one_shard_names_that_shard() {
    let case = Case::new();
    let mut s = spec(python_echo(&case), 3, 3, 30.0);
    s.env.insert("MODE".into(), "crash-shard-2".into());
    let err = evaluate_err(s);
    assert_eq!(err, "shard 2/3: exit status 3 after retry; stderr: shard two is cursed");
}

#[test]
fn a_command_killed_by_a_signal_is_an_error() {
    let case = Case::new();
    let err = evaluate_err(spec(case.counted_sh("kill -9 $$"), 1, 1, 30.0));
    assert_eq!(err, "shard 1/1: killed by signal 9 (SIGKILL) after retry; stderr: (empty)");
    assert_eq!(case.runs(), 2);
}

#[test]
fn a_command_that_hangs_is_killed_at_its_timeout_and_retried_once() {
    let case = Case::new();
    let start = Instant::now();
    let err = evaluate_err(spec(case.counted_sh("echo 'thinking...' >&2\nexec sleep 30"), 1, 1, 1.0));
    assert_eq!(err, "shard 1/1: timed out after 1s (killed) after retry; stderr: thinking...");
    assert_eq!(case.runs(), 2);
    assert!(start.elapsed() < Duration::from_secs(10), "{:?}", start.elapsed());
}

#[test]
fn a_flaky_command_passes_thanks_to_the_retry() {
    let case = Case::new();
    let good = case.write("good.jsonl", &lines(&(0..5).map(record).collect::<Vec<_>>()));
    let marker = case.path("failed-once");
    let argv = case.counted_sh(&format!(
        "if [ ! -e '{m}' ]; then touch '{m}'; echo 'transient failure' >&2; exit 1; fi\ncat '{g}' > \"$3\"",
        m = marker.display(),
        g = good.display()
    ));
    let eval = backend(spec(argv, 1, 1, 30.0)).evaluate(&strategy(), None).unwrap();
    assert_eq!(eval.n(), 5);
    assert_eq!(eval.correct(), 3);
    assert_eq!(eval.mean_context_tokens(), Some(12.0));
    assert_eq!(case.runs(), 2);
}

#[test]
fn malformed_json_names_the_line_and_is_not_retried() {
    let case = Case::new();
    let mut text = lines(&(0..5).map(record).collect::<Vec<_>>());
    text = text.replacen("{\"id\":\"c1#1\"", "{\"id\":\"c1#1\",,", 1);
    let err = evaluate_err(spec(case.cat(&text), 1, 1, 30.0));
    assert!(err.starts_with("shard 1/1: out.jsonl:2: not valid JSON (column 14): "), "{err}");
    assert_eq!(case.runs(), 1, "broken output is a bug in the adapter, not bad luck");
}

#[test]
fn omitted_questions_are_an_error() {
    let case = Case::new();
    let text = lines(&[record(0), record(1), record(3)]);
    let err = evaluate_err(spec(case.cat(&text), 1, 1, 30.0));
    assert_eq!(err, "shard 1/1: out.jsonl: 2 of 5 questions missing: c1#3, c2#1");
}

#[test]
fn duplicated_ids_are_an_error() {
    let case = Case::new();
    let text = lines(&[record(0), record(1), record(2), record(3), record(1), record(4)]);
    let err = evaluate_err(spec(case.cat(&text), 1, 1, 30.0));
    assert_eq!(err, r#"shard 1/1: out.jsonl:5: field "id": duplicate "c1#1" (first on line 2)"#);
}

#[test]
fn a_record_breaking_the_outcome_schema_names_line_and_field() {
    let case = Case::new();
    let mut records: Vec<Value> = (0..5).map(record).collect();
    records[2]["correct"] = json!("yes");
    let err = evaluate_err(spec(case.cat(&lines(&records)), 1, 1, 30.0));
    assert_eq!(err, r#"shard 1/1: out.jsonl:3: field "correct": expected a boolean, got the string "yes""#);

    let mut records: Vec<Value> = (0..5).map(record).collect();
    records[4]["evidence_trace"] = json!([{"turn": "D1:2", "memory_ids": ["m1"], "retrieved": true}]);
    let case = Case::new();
    let err = evaluate_err(spec(case.cat(&lines(&records)), 1, 1, 30.0));
    assert_eq!(err, r#"shard 1/1: out.jsonl:5: field "evidence_trace[0].in_context": missing"#);
}

#[test]
fn questions_of_another_shard_or_a_wrong_category_are_errors() {
    let case = Case::new();
    // Two shards; the command writes all five questions into each.
    let err = evaluate_err(spec(case.cat(&lines(&(0..5).map(record).collect::<Vec<_>>())), 2, 1, 30.0));
    assert_eq!(
        err,
        r#"shard 1/2: out.jsonl:4: field "id": "c2#0" is not a question of this shard (and 1 more bad lines)"#
    );
    let mut records: Vec<Value> = (0..5).map(record).collect();
    records[0]["category"] = json!("temporal");
    let case = Case::new();
    let err = evaluate_err(spec(case.cat(&lines(&records)), 1, 1, 30.0));
    assert_eq!(
        err,
        r#"shard 1/1: out.jsonl:1: field "category": expected "single-hop" (the task's category), got "temporal""#
    );
}

#[test]
fn an_unanswered_question_is_retried_then_an_error() {
    let case = Case::new();
    let mut records: Vec<Value> = (0..5).map(record).collect();
    records[3]["error"] = json!("rate limited by the model");
    let err = evaluate_err(spec(case.cat(&lines(&records)), 1, 1, 30.0));
    assert_eq!(err, "shard 1/1: out.jsonl:4: question c2#0 not answered: rate limited by the model after retry");
    assert_eq!(case.runs(), 2);
}

#[test]
fn a_command_that_writes_nothing_or_cannot_start_is_an_error() {
    let case = Case::new();
    let err = evaluate_err(spec(case.counted_sh("exit 0"), 1, 1, 30.0));
    assert_eq!(err, "shard 1/1: the command exited 0 but wrote no out.jsonl (the {out} path)");
    let argv = vec!["/nonexistent/adapter".into(), "{strategy}".into(), "{tasks}".into(), "{out}".into()];
    let err = evaluate_err(spec(argv, 1, 1, 30.0));
    assert!(err.starts_with("shard 1/1: cannot start \"/nonexistent/adapter\" in "), "{err}");
    assert!(err.ends_with("after retry"), "{err}");
}

#[test]
fn the_configuration_is_checked_and_the_hashes_notice_a_changed_system() {
    let config = |argv: &[&str]| emend_core::config::CommandHarness {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        workdir: None,
        env: BTreeMap::new(),
        timeout_secs: 10.0,
        shards: 1,
        concurrency: 1,
    };
    let tmp = tempfile::tempdir().unwrap();
    let err = CommandSpec::from_config(&config(&["python3", "a.py", "{strategy}", "{tasks}"]), tmp.path()).unwrap_err();
    assert!(err.to_string().starts_with("harness.command.argv: must contain {out}"), "{err}");
    let mut c = config(&["x", "{strategy}", "{tasks}", "--out={out}"]);
    c.workdir = Some("missing".into());
    let err = CommandSpec::from_config(&c, tmp.path()).unwrap_err();
    assert!(err.to_string().starts_with("harness.command.workdir: "), "{err}");
    c.workdir = None;
    c.timeout_secs = 0.0;
    let err = CommandSpec::from_config(&c, tmp.path()).unwrap_err();
    assert!(err.to_string().starts_with("harness.command.timeout_secs: "), "{err}");

    let dataset = emend_harness::load_str("fixture.json", FIXTURE).unwrap();
    let sel = emend_harness::Selection::default();
    let raw = schema().raw().clone();
    let s = spec(vec!["a".into(), "{strategy}".into(), "{tasks}".into(), "{out}".into()], 1, 1, 1.0);
    let base = CommandBackend::new(&dataset, &sel, s.clone(), &raw, Some("1")).unwrap();
    let v2 = CommandBackend::new(&dataset, &sel, s.clone(), &raw, Some("2")).unwrap();
    let mut other = s.clone();
    other.argv[0] = "b".into();
    let argv2 = CommandBackend::new(&dataset, &sel, other, &raw, Some("1")).unwrap();
    let mut raw2 = raw.clone();
    raw2["properties"]["retrieve"]["properties"]["top_k"]["maximum"] = json!(60);
    let schema2 = CommandBackend::new(&dataset, &sel, s.clone(), &raw2, Some("1")).unwrap();
    let mut slower = s.clone();
    slower.timeout = Duration::from_secs(99);
    slower.shards = 4;
    let same = CommandBackend::new(&dataset, &sel, slower, &raw, Some("1")).unwrap();
    let h = base.harness_hash();
    assert_ne!(h, v2.harness_hash(), "the version string");
    assert_ne!(h, argv2.harness_hash(), "the argv");
    assert_ne!(h, schema2.harness_hash(), "the schema");
    assert_eq!(h, same.harness_hash(), "timeout and sharding do not change what is computed");
    let adversarial = emend_harness::Selection { include_adversarial: true, conversations: None };
    let wide = CommandBackend::new(&dataset, &adversarial, s, &raw, Some("1")).unwrap();
    assert_ne!(base.dataset_hash(), wide.dataset_hash());
    assert_eq!(wide.questions().len(), 6);
}
