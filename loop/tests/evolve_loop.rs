//! The evolution loop against a scripted backend: every behaviour of a
//! round (acceptance, rejection, escalation, best-ever restore after a
//! harness change, errored candidates, determinism) checked in milliseconds.

use std::collections::BTreeMap;
use std::path::Path;

use emend_core::artifact::{self, Artifact};
use emend_core::config::{Project, parse_config, render_config};
use emend_core::events::{EngineProjector, Event};
use emend_core::outcome::{BackendOutcome, EvidenceStep};
use emend_core::schema::{StrategySchema, get_path};
use emend_core::served;
use emend_core::store::Store;
use emend_eval::backend::{Backend, BackendError};
use emend_eval::fake::FakeBackend;
use emend_journal::{EventLog, MemoryJournal};
use emend_loop::evolve::{self, Evolution, RunOptions, RunSummary};

const DEFAULT: &str = emend_core::artifact::DEFAULT_STRATEGY;
const CATEGORIES: [&str; 4] = ["multi-hop", "temporal", "open-domain", "single-hop"];
const N: usize = 400;

/// How a scripted backend scores a strategy: the share of questions it answers.
type Capacity = fn(&serde_json::Value) -> f64;

/// Answers question i when its difficulty is below the strategy's capacity.
/// Failures carry a retrieval-gap trace, so the planner has symptoms to follow.
fn scripted(capacity: Capacity, harness: &str) -> FakeBackend {
    scripted_failing(capacity, harness, None)
}

/// As [`scripted`], failing every strategy whose field `path` holds `value`
/// (as the built-in harness refuses a strategy value it cannot run).
fn scripted_failing(
    capacity: Capacity,
    harness: &str,
    fail_when: Option<(&'static str, serde_json::Value)>,
) -> FakeBackend {
    let questions = (0..N).map(|i| (format!("q{i:04}"), CATEGORIES[i % 4].to_string())).collect();
    FakeBackend::new(questions, move |a, ids| {
        if let Some((path, value)) = &fail_when
            && get_path(&a.value, path) == Some(value)
        {
            let refused =
                emend_harness::EvalError::Strategy { field: path, message: format!("scripted failure at {value}") };
            return Err(BackendError::Harness(refused));
        }
        let cap = capacity(&a.value);
        Ok((0..N)
            .map(|i| (i, format!("q{i:04}")))
            .filter(|(_, id)| ids.contains(id))
            .map(|(i, id)| {
                let correct = difficulty(i) < cap;
                BackendOutcome {
                    conversation: Some(format!("conv-{}", i % 8)),
                    evidence: Some(vec!["D1:1".into()]),
                    unresolved_evidence: Some(vec![]),
                    evidence_trace: Some(vec![EvidenceStep {
                        turn: "D1:1".into(),
                        memory_ids: vec!["m1".into()],
                        retrieved: correct,
                        in_context: correct,
                    }]),
                    context_tokens: Some(100.0),
                    ..BackendOutcome::new(&id, CATEGORIES[i % 4], correct)
                }
            })
            .collect())
    })
    .with_harness(harness)
}

fn difficulty(i: usize) -> f64 {
    ((i * 37) % 100) as f64 / 100.0 + (i % 7) as f64 * 1e-4
}

fn by_top_k(v: &serde_json::Value) -> f64 {
    let k = get_path(v, "retrieve.top_k").and_then(|x| x.as_f64()).unwrap_or(0.0);
    let pool = get_path(v, "retrieve.pool").and_then(|x| x.as_f64()).unwrap_or(0.0);
    (k / 40.0 + pool / 1000.0).min(0.95)
}

/// A "judge change": the same strategies, scored the other way round.
fn inverse_top_k(v: &serde_json::Value) -> f64 {
    let k = get_path(v, "retrieve.top_k").and_then(|x| x.as_f64()).unwrap_or(0.0);
    (0.7 - k / 40.0).max(0.05)
}

/// Nothing any strategy does matters.
fn flat(_: &serde_json::Value) -> f64 {
    0.3
}

fn project(dir: &Path, edit: impl Fn(&str) -> String) -> Project {
    let text = edit(&render_config("builtin", Path::new("strategies/served.yaml"), None, None));
    std::fs::write(dir.join("emend.yaml"), &text).unwrap();
    Project { dir: dir.to_path_buf(), config: parse_config(&text).unwrap() }
}

/// The config with `search.method: rules`: for tests that pin the rule
/// evolver's one-field candidates (which field moves, which move errors).
fn rule_evolver(config: &str) -> String {
    assert!(config.contains("\n  method: null\n"), "{config}");
    config.replace("\n  method: null\n", "\n  method: rules\n")
}

fn start(project: &Project, log: &mut MemoryJournal, yaml: &str) -> Artifact {
    let schema = StrategySchema::builtin();
    let a = artifact::from_yaml("start.yaml", yaml, &schema).unwrap();
    served::initialize(log, &a, "test").unwrap();
    served::write_served(project, 1, None, &a.hash, &served::strip_metadata(&a.value)).unwrap();
    a
}

fn run(
    project: &Project,
    log: &mut MemoryJournal,
    backend: &dyn Backend,
    rounds: u32,
    candidates: usize,
) -> RunSummary {
    let schema = StrategySchema::builtin();
    let mut evo = Evolution { project, schema: &schema, backend, log };
    evo.run(&RunOptions::rounds(rounds, candidates), &mut |_| {}).unwrap()
}

/// Three rounds of four candidates on the default project, where a larger
/// `retrieve.top_k` answers more: at least one version is accepted.
fn improving_run() -> (tempfile::TempDir, Project, MemoryJournal, RunSummary) {
    let dir = tempfile::tempdir().unwrap();
    let p = project(dir.path(), |s| s.to_string());
    let mut log = MemoryJournal::new(EngineProjector);
    start(&p, &mut log, DEFAULT);
    let backend = scripted(by_top_k, "h1");
    let summary = run(&p, &mut log, &backend, 3, 4);
    assert!(summary.accepted >= 1, "{summary:?}");
    (dir, p, log, summary)
}

fn events(log: &MemoryJournal) -> Vec<Event> {
    log.read_from(1).unwrap().iter().map(|r| Event::from_record(r).unwrap()).collect()
}

#[test]
fn a_real_improvement_is_accepted_with_a_complete_gate_record() {
    let (_dir, p, log, summary) = improving_run();
    assert!(summary.served_accuracy > summary.start_accuracy + 0.1, "{summary:?}");
    // Every accepted version has its gate record: five passing gates, the
    // critic, a passing probe and a full comparison whose rules all pass.
    let store = Store::new(&log);
    for c in store.candidates().unwrap().iter().map(|c| serde_json::to_value(c).unwrap()) {
        if c["outcome"] == "accepted" {
            let gates = c["gates"].as_array().unwrap();
            assert_eq!(gates.len(), 5);
            assert!(gates.iter().all(|g| g["pass"] == true));
            assert!(c["critic"].is_object());
            assert_eq!(c["probe"]["pass"], true);
            assert_eq!(c["full"]["accept"], true);
            assert!(c["full"]["rules"].as_array().unwrap().iter().all(|r| r["pass"] == true));
            let v = c["accepted_version"].as_u64().unwrap();
            assert_eq!(store.version(v).unwrap().unwrap().origin, "accepted");
        }
    }
    // The served file is the served version.
    let file = artifact::load_strategy_file(&p.strategy_path()).unwrap();
    assert_eq!(file.hash, store.served().unwrap().unwrap().hash);
    assert_eq!(file.version, Some(summary.served_version));
    assert!(log.verify().unwrap().is_ok());
}

/// Best-ever decides on measured figures only: every best-ever move carries
/// the version's recorded whole-set accuracy, and a pointer holding anything
/// else (an older journal's estimate) is re-scored from the records.
#[test]
fn the_best_ever_pointer_holds_measured_accuracies_only() {
    let (_dir, p, mut log, _) = improving_run();
    let recorded = |log: &MemoryJournal, hash: &str| {
        Store::new(log).latest_evaluation(hash).unwrap().map(|(_, s)| s.accuracy).expect("evaluated")
    };
    let mut moves = 0;
    for e in events(&log) {
        if let Event::BestChanged { hash, accuracy, .. } = e {
            assert_eq!(accuracy, recorded(&log, &hash), "best-ever move to {hash}");
            moves += 1;
        }
    }
    assert!(moves >= 2, "{moves}");
    // A pointer with an estimate in it is re-scored at the next round.
    let best = Store::new(&log).best().unwrap().unwrap();
    let stale = Event::BestChanged {
        version: best.version,
        hash: best.hash.clone(),
        accuracy: best.accuracy + 0.03,
        harness_hash: best.harness_hash.clone(),
        dataset_hash: best.dataset_hash.clone(),
    };
    log.append(vec![stale.to_new()]).unwrap();
    run(&p, &mut log, &scripted(by_top_k, "h1"), 1, 4);
    let after = Store::new(&log).best().unwrap().unwrap();
    assert_eq!(after.accuracy, recorded(&log, &after.hash), "{after:?}");
}

#[test]
fn nothing_is_accepted_when_no_strategy_matters() {
    let dir = tempfile::tempdir().unwrap();
    let p = project(dir.path(), rule_evolver);
    let mut log = MemoryJournal::new(EngineProjector);
    start(&p, &mut log, DEFAULT);
    let summary = run(&p, &mut log, &scripted(flat, "h1"), 3, 4);
    assert_eq!(summary.accepted, 0, "{summary:?}");
    assert_eq!(summary.served_version, 1);
    assert!(summary.full_evaluations > 0, "the full test must have been reached and refused: {summary:?}");
    assert!(summary.rejected_by.keys().any(|k| k.starts_with("full:")), "{summary:?}");
}

#[test]
fn same_seed_and_inputs_give_the_same_journal_events() {
    let journal_of = || {
        let dir = tempfile::tempdir().unwrap();
        let p = project(dir.path(), |s| s.to_string());
        let mut log = MemoryJournal::new(EngineProjector);
        start(&p, &mut log, DEFAULT);
        run(&p, &mut log, &scripted(by_top_k, "h1"), 4, 3);
        // Wall-clock fields are the only ones allowed to differ: an event's
        // `at` and `who`, a search trial's `started` and `duration_ms`.
        events(&log)
            .into_iter()
            .map(|e| {
                let mut v = serde_json::to_value(&e).unwrap();
                for k in ["at", "who"] {
                    v.as_object_mut().unwrap().remove(k);
                }
                strip_clock(&mut v);
                v
            })
            .collect::<Vec<_>>()
    };
    let (a, b) = (journal_of(), journal_of());
    assert!(a.len() > 10);
    assert_eq!(a, b);
}

/// Until issue 13 a move past 0 on the recency half-life (0 already means "no
/// decay", the schema's `x-off`) was blocked every round and escalated at round
/// 3. It is now an exhausted direction: never a candidate, never escalated.
#[test]
fn a_move_past_the_off_value_is_never_proposed_nor_escalated() {
    let dir = tempfile::tempdir().unwrap();
    let p = project(dir.path(), rule_evolver);
    let mut log = MemoryJournal::new(EngineProjector);
    start(&p, &mut log, DEFAULT);
    let backend = scripted(flat, "h1");
    run(&p, &mut log, &backend, 4, 40);
    let class = "retrieve.recency_half_life_days::decrease";
    let escalated: Vec<Event> = events(&log).into_iter().filter(|e| matches!(e, Event::Escalated { .. })).collect();
    assert!(!escalated.iter().any(|e| matches!(e, Event::Escalated { class: c, .. } if c == class)), "{escalated:?}");
    let store = Store::new(&log);
    assert!(store.candidates().unwrap().iter().all(|c| c.hypothesis != class));
    assert!(store.last_round().unwrap() >= 1);
}

#[test]
fn a_harness_change_that_drops_the_served_score_restores_the_best_version() {
    let dir = tempfile::tempdir().unwrap();
    let p = project(dir.path(), |s| s.to_string());
    let mut log = MemoryJournal::new(EngineProjector);
    start(&p, &mut log, DEFAULT);
    let first = run(&p, &mut log, &scripted(by_top_k, "judge-a"), 3, 4);
    assert!(first.served_version > 1, "{first:?}");
    // The judge changes (a new harness hash): under it larger top_k is worse,
    // so v1 now beats the served version by more than tau.
    let second = run(&p, &mut log, &scripted(inverse_top_k, "judge-b"), 1, 4);
    assert_eq!(second.rollbacks, 1, "{second:?}");
    let store = Store::new(&log);
    let served = store.served().unwrap().unwrap();
    let best = store.best().unwrap().unwrap();
    assert_eq!(served.version, best.version);
    assert_eq!(served.cause, "auto_restore");
    let restore = events(&log)
        .into_iter()
        .rev()
        .find_map(|e| match e {
            Event::ServedChanged { cause, reason, from, to, .. } if cause == "auto_restore" => Some((reason, from, to)),
            _ => None,
        })
        .unwrap();
    assert!(restore.0.contains("more than tau"), "{restore:?}");
    assert_eq!(restore.1, Some(first.served_version));
    // The served file followed.
    let file = artifact::load_strategy_file(&p.strategy_path()).unwrap();
    assert_eq!(file.hash, served.hash);
}

#[test]
fn a_candidate_whose_evaluation_fails_is_errored_never_accepted() {
    let dir = tempfile::tempdir().unwrap();
    let p = project(dir.path(), rule_evolver);
    let mut log = MemoryJournal::new(EngineProjector);
    start(&p, &mut log, DEFAULT);
    let backend = scripted_failing(by_top_k, "h1", Some(("retrieve.top_k", serde_json::json!(15))));
    run(&p, &mut log, &backend, 2, 4);
    let cands: BTreeMap<String, serde_json::Value> = Store::new(&log)
        .candidates()
        .unwrap()
        .into_iter()
        .map(|c| (format!("{:010}/{}", c.round, c.id), serde_json::to_value(&c).unwrap()))
        .collect();
    let errored: Vec<&serde_json::Value> =
        cands.values().filter(|c| c["change"]["path"] == "retrieve.top_k" && c["change"]["to"] == 15).collect();
    assert!(!errored.is_empty());
    for c in errored {
        assert_eq!(c["outcome"], "errored");
        assert!(c["reason"].as_str().unwrap().contains("scripted failure"), "{c}");
        assert!(c["accepted_version"].is_null());
    }
}

#[test]
fn a_hand_edited_served_file_stops_the_run_and_a_stale_one_is_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let p = project(dir.path(), rule_evolver);
    let mut log = MemoryJournal::new(EngineProjector);
    start(&p, &mut log, DEFAULT);
    let backend = scripted(by_top_k, "h1");
    run(&p, &mut log, &backend, 2, 4);
    let served_text = std::fs::read_to_string(p.strategy_path()).unwrap();
    // Hand edit: refused, named, nothing changed.
    std::fs::write(p.strategy_path(), served_text.replace("bm25_k1: 1.2", "bm25_k1: 1.3")).unwrap();
    let schema = StrategySchema::builtin();
    let before = log.head();
    let err = Evolution { project: &p, schema: &schema, backend: &backend, log: &mut log }
        .run(&RunOptions::rounds(1, 4), &mut |_| {})
        .unwrap_err();
    assert!(err.to_string().contains("edited by hand"), "{err}");
    assert_eq!(log.head(), before);
    // A file that holds an older journaled version (a crash between the
    // journal and the file write) is rewritten from the journal.
    served::write_served(&p, 1, None, &artifact::from_yaml("d", DEFAULT, &schema).unwrap().hash, &{
        let a = artifact::from_yaml("d", DEFAULT, &schema).unwrap();
        served::strip_metadata(&a.value)
    })
    .unwrap();
    run(&p, &mut log, &backend, 1, 4);
    let file = artifact::load_strategy_file(&p.strategy_path()).unwrap();
    assert_eq!(file.hash, Store::new(&log).served().unwrap().unwrap().hash);
}

#[test]
fn no_category_ends_below_the_first_version_by_more_than_the_category_drop_max() {
    let dir = tempfile::tempdir().unwrap();
    let p = project(dir.path(), |s| s.to_string());
    let mut log = MemoryJournal::new(EngineProjector);
    start(&p, &mut log, DEFAULT);
    let backend = scripted(by_top_k, "h1");
    run(&p, &mut log, &backend, 4, 4);
    let store = Store::new(&log);
    let (h, d) = (backend.harness_hash(), backend.dataset_hash());
    let v1 = store.version(1).unwrap().unwrap();
    let served = store.served().unwrap().unwrap();
    let a = store.evaluation(&v1.hash, &h, &d).unwrap().unwrap().summary;
    let b = store.evaluation(&served.hash, &h, &d).unwrap().unwrap().summary;
    for (cat, (n, c)) in &a.per_category {
        let (m, e) = b.per_category[cat];
        assert!(e as f64 / m as f64 >= *c as f64 / *n as f64 - 0.02, "{cat}");
    }
}

/// Three fields matter (top_k, pool, window_size); no other field changes
/// anything, so a pruned jump moves only those.
fn three_fields(v: &serde_json::Value) -> f64 {
    let num = |p: &str| get_path(v, p).and_then(|x| x.as_f64()).unwrap_or(0.0);
    let k = (num("retrieve.top_k") / 60.0).min(1.0);
    let window = if num("ingest.window_size") >= 4.0 { 0.2 } else { 0.0 };
    let pool = if num("retrieve.pool") >= 150.0 { 0.15 } else { 0.0 };
    (0.2 + 0.4 * k + window + pool).min(0.97)
}

fn run_with(project: &Project, log: &mut MemoryJournal, backend: &dyn Backend, opts: &RunOptions) -> RunSummary {
    let schema = StrategySchema::builtin();
    let mut evo = Evolution { project, schema: &schema, backend, log };
    evo.run(opts, &mut |_| {}).unwrap()
}

fn budget(max_evals: f64) -> RunOptions {
    RunOptions { max_evals: Some(max_evals), ..RunOptions::rounds(60, 4) }
}

#[test]
fn one_confirmed_jump_moves_the_fields_that_matter_and_credits_only_fields_it_changed() {
    let dir = tempfile::tempdir().unwrap();
    let p = project(dir.path(), |s| s.to_string());
    let mut log = MemoryJournal::new(EngineProjector);
    start(&p, &mut log, DEFAULT);
    let summary = run_with(&p, &mut log, &scripted(three_fields, "h1"), &budget(45.0));
    assert!(summary.accepted >= 1, "{summary:?}");
    assert!(summary.served_accuracy > summary.start_accuracy + 0.3, "{summary:?}");
    assert!(summary.evaluations_used <= 45.0 + 1e-9, "{summary:?}");
    let schema = StrategySchema::builtin();
    let store = Store::new(&log);
    let mut changed_any = std::collections::BTreeSet::new();
    let mut credited = 0;
    for c in store.candidates().unwrap() {
        let parent = store.document(&c.parent_hash).unwrap().unwrap();
        let changed = emend_loop::jump::changed_fields(&schema, &parent, c.document.as_ref().unwrap());
        for credit in &c.credits {
            assert!(changed.contains(&credit.path), "{} credited to {}, which it does not change", c.id, credit.path);
            assert!(credit.key.starts_with(&format!("{}::", credit.path)), "{credit:?}");
            credited += 1;
        }
        if c.outcome == emend_core::candidate::Resolution::Accepted {
            // Pruning put every field that does nothing back.
            let extra: Vec<&String> = changed
                .iter()
                .filter(|p| {
                    !["retrieve.top_k", "retrieve.pool", "ingest.window_size", "ingest.window_overlap"]
                        .contains(&p.as_str())
                })
                .collect();
            assert!(extra.is_empty(), "{} keeps fields that change nothing: {extra:?}", c.id);
        }
        changed_any.extend(changed);
    }
    assert!(credited > 0, "the searched candidates carry credits");
    // No hypothesis node and no dimension's reputation for a field no candidate changed.
    for e in events(&log) {
        if let Event::HypothesisUpdated { node } = e
            && node.visits > 0
        {
            assert!(changed_any.contains(&node.path), "node {} credited without a change", node.key);
        }
    }
    for path in store.effects().unwrap().keys() {
        assert!(changed_any.contains(path), "reputation of {path} without a change");
    }
}

/// As [`three_fields`], except that a strategy storing nothing (`ingest.min_chars`
/// 250 or more) answers nothing: a catastrophe a race drops at its first look.
fn catastrophe_below_250(v: &serde_json::Value) -> f64 {
    let min_chars = get_path(v, "ingest.min_chars").and_then(|x| x.as_f64()).unwrap_or(0.0);
    if min_chars >= 250.0 { 0.0 } else { three_fields(v) }
}

#[test]
fn a_raced_out_trial_is_recorded_as_measured_and_never_above_what_it_lost_to() {
    use emend_core::search::{Trial, ranked};
    for rule in ["rank", "deficit", "shrunk"] {
        let dir = tempfile::tempdir().unwrap();
        let p = project(dir.path(), |s| s.replace("  raced_out: rank\n", &format!("  raced_out: {rule}\n")));
        assert_eq!(p.config.search.raced_out.as_str(), rule);
        let mut log = MemoryJournal::new(EngineProjector);
        start(&p, &mut log, DEFAULT);
        run_with(&p, &mut log, &scripted(catastrophe_below_250, "h1"), &budget(20.0));
        let searches = Store::new(&log).searches().unwrap();
        let points: Vec<_> = searches.iter().flat_map(|s| s.scored.iter()).collect();
        let n = points.iter().filter_map(|p| p.questions).max().unwrap();
        let complete: Vec<f64> = points.iter().filter(|p| p.questions == Some(n)).map(|p| p.score).collect();
        let nothing: Vec<_> = points
            .iter()
            .filter(|p| p.values.get("ingest.min_chars").and_then(|v| v.as_f64()).is_some_and(|m| m >= 250.0))
            .collect();
        assert!(!nothing.is_empty(), "{rule}: the sampler drew some strategy that answers nothing");
        for q in &nothing {
            assert_eq!(q.score, 0.0, "{rule}: a raced-out score is its accuracy on the questions it was evaluated on");
        }
        for q in points.iter().filter(|p| p.questions < Some(n)) {
            let k = q.questions.unwrap();
            assert!(k < n && q.score <= 1.0, "{rule}");
            // Dropped means significantly worse than the incumbent: never recorded above it,
            // and with rank never above any complete trial.
            match rule {
                "rank" => assert_eq!(q.estimate, None),
                _ => {
                    let e = q.estimate.expect("deficit and shrunk record an estimate");
                    let best = complete.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    assert!(e < best, "{rule}: estimate {e} of a raced-out trial above the best complete {best}");
                }
            }
        }
        if rule == "rank" {
            let history: Vec<Trial> = points
                .iter()
                .map(|p| Trial {
                    point: vec![],
                    score: p.score,
                    stopped_at: p.questions.filter(|k| *k < n),
                    violation: 0.0,
                })
                .collect();
            let order = ranked(&history);
            let first_stopped = order.iter().position(|&i| history[i].stopped_at.is_some()).unwrap();
            assert!(order[first_stopped..].iter().all(|&i| history[i].stopped_at.is_some()), "{rule}: {order:?}");
            assert_eq!(first_stopped, complete.len(), "every complete trial ranks above every raced-out one");
        }
    }
}

#[test]
fn the_budget_is_never_exceeded_and_stops_a_run_as_max_evals() {
    for max in [2.0, 4.0, 10.0, 20.0] {
        let dir = tempfile::tempdir().unwrap();
        let p = project(dir.path(), |s| s.to_string());
        let mut log = MemoryJournal::new(EngineProjector);
        start(&p, &mut log, DEFAULT);
        let summary = run_with(&p, &mut log, &scripted(three_fields, "h1"), &budget(max));
        assert!(summary.evaluations_used <= max + 1e-9, "--max-evals {max}: {summary:?}");
        assert_eq!(summary.stopped, evolve::Stopped::MaxEvals, "--max-evals {max}: {summary:?}");
    }
}

#[test]
fn a_search_that_finds_nothing_stops_converged_by_its_rule() {
    let dir = tempfile::tempdir().unwrap();
    let p = project(dir.path(), |s| {
        s.replace("  stall: 40\n", "  stall: 10\n").replace("  converge: 80\n", "  converge: 30\n")
    });
    assert_eq!((p.config.search.stall, p.config.search.converge), (10, 30));
    let mut log = MemoryJournal::new(EngineProjector);
    start(&p, &mut log, DEFAULT);
    let summary = run_with(&p, &mut log, &scripted(flat, "h1"), &RunOptions::rounds(5, 4));
    assert_eq!(summary.stopped, evolve::Stopped::Converged, "{summary:?}");
    assert_eq!(summary.accepted, 0);
    let searches = Store::new(&log).searches().unwrap();
    let last = searches.last().and_then(|s| s.global.as_ref()).unwrap();
    assert_eq!(last.ended, "converged");
    assert!(last.since_best >= 30, "{last:?}");
}

#[test]
fn bounded_steps_keep_the_step_search_within_x_max_delta() {
    let dir = tempfile::tempdir().unwrap();
    let p = project(dir.path(), |s| s.replace("  method: null\n", "  method: steps\n"));
    assert_eq!(p.config.search_method(), emend_core::config::SearchMethod::Steps);
    let mut log = MemoryJournal::new(EngineProjector);
    start(&p, &mut log, DEFAULT);
    let summary = run_with(&p, &mut log, &scripted(three_fields, "h1"), &budget(30.0));
    assert!(summary.accepted >= 1, "{summary:?}");
    let schema = StrategySchema::builtin();
    let store = Store::new(&log);
    assert!(store.searches().unwrap().iter().all(|s| s.global.is_none()), "the step search, not the global one");
    for c in store.candidates().unwrap() {
        let parent = store.document(&c.parent_hash).unwrap().unwrap();
        let doc = c.document.as_ref().unwrap();
        for path in emend_loop::jump::changed_fields(&schema, &parent, doc) {
            let (a, b) = (get_path(&parent, &path).unwrap(), get_path(doc, &path).unwrap());
            if let (Some(a), Some(b), Some(max)) = (a.as_f64(), b.as_f64(), schema.field(&path).unwrap().max_delta) {
                assert!((b - a).abs() <= max + 1e-9, "{}: {path} moves {a} -> {b}, x-max-delta {max}", c.id);
            }
        }
    }
}

/// Removes a search trial's clock (`started`, `duration_ms`) at any depth of
/// a journaled event: wall-clock fields, like an event's `at`.
fn strip_clock(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            m.remove("started");
            m.remove("duration_ms");
            m.values_mut().for_each(strip_clock);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(strip_clock),
        _ => {}
    }
}
