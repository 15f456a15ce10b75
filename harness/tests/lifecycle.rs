//! Replay's lifecycle: the consolidation job (`ingest.consolidate`) at each
//! checkpoint, and the temporal judge on revised references.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::*;
use emend_harness::judge::{EvidenceJudge, Judge, JudgeCase, TemporalJudge, superseded_evidence};
use emend_harness::replay::{self, Protocol};
use emend_harness::strategy::{Consolidate, JudgeKind};
use emend_harness::{Dataset, Evaluator, HarnessSettings, PipelineEvaluation, PipelineOutcome, Strategy};

fn settings(protocol: Protocol, judge: Option<JudgeKind>) -> HarnessSettings {
    HarnessSettings { protocol, judge, ..HarnessSettings::default() }
}

fn replay1(judge: Option<JudgeKind>) -> HarnessSettings {
    settings(Protocol::Replay { every_sessions: 1 }, judge)
}

fn consolidating(threshold: f64) -> Strategy {
    let mut s = default_strategy();
    s.ingest.consolidate = Consolidate { enabled: true, threshold };
    s
}

fn example() -> Arc<Dataset> {
    Arc::new(emend_harness::load_path(&repo_file("examples/evolving-references/locomo-evolving.json")).unwrap())
}

/// A conversation whose revision retells the old fact with a detail changed
/// (a near-duplicate of it), as the builtin dataset's routines are.
fn retold() -> Arc<Dataset> {
    let json = r#"[{"sample_id": "r", "conversation": {"speaker_a": "Ann", "speaker_b": "Bo",
        "session_1_date_time": "1:00 pm on 1 May, 2023",
        "session_1": [
          {"speaker": "Ann", "dia_id": "D1:1", "text": "These days I work as a baker at the Alfama bakery in Lisbon."},
          {"speaker": "Bo", "dia_id": "D1:2", "text": "Do you still walk to work along the river every morning?"},
          {"speaker": "Bo", "dia_id": "D1:3", "text": "My sister adopted a grey kitten named Pixel last spring."}],
        "session_2_date_time": "1:00 pm on 11 June, 2023",
        "session_2": [
          {"speaker": "Ann", "dia_id": "D2:1", "text": "These days I work as a potter at the Alfama studio in Lisbon."},
          {"speaker": "Bo", "dia_id": "D2:2", "text": "Do you still walk to work along the river every morning?"},
          {"speaker": "Bo", "dia_id": "D2:3", "text": "We watched a long film about volcanoes on Sunday night."}]},
        "qa": [{"question": "Where does Ann work now?", "category": 4, "answer": "the Alfama studio",
                "evidence": ["D2:1"],
                "reference_versions": [{"from_session": 1, "answer": "the Alfama bakery", "evidence": ["D1:1"]},
                                       {"from_session": 2, "answer": "the Alfama studio", "evidence": ["D2:1"]}]},
               {"question": "What is the kitten called?", "category": 4, "answer": "Pixel", "evidence": ["D1:3"]}]}]"#;
    Arc::new(emend_harness::load_str("retold.json", json).unwrap())
}

fn run(d: &Arc<Dataset>, s: HarnessSettings, strategy: &Strategy) -> PipelineEvaluation {
    Evaluator::new(d.clone(), s).unwrap().evaluate(strategy).unwrap()
}

fn by_id(e: &PipelineEvaluation) -> BTreeMap<&str, &PipelineOutcome> {
    e.outcomes.iter().map(|o| (o.id.as_str(), o)).collect()
}

/// The example's probes as asked at each checkpoint: a context that holds
/// only the superseded version's evidence is wrong under both deterministic
/// judges; one that holds both is credited by `evidence` and not by `temporal`.
#[test]
fn a_superseded_only_context_is_wrong_where_the_reference_moved() {
    let d = example();
    let sample = &d.samples()[0];
    let asked = |q: usize, k: u32| {
        replay::observations(sample, &sample.questions[q], 1).into_iter().find(|o| o.checkpoint == k).unwrap().question
    };
    let verdicts = |q: &emend_harness::dataset::Question, turns: &[&str]| {
        let turns: Vec<String> = turns.iter().map(|t| t.to_string()).collect();
        let case = JudgeCase { question: q, answer: None, context_turns: &turns };
        (EvidenceJudge.judge(&case).unwrap().correct, TemporalJudge.judge(&case).unwrap().correct)
    };
    // "Which city does Ana live in now?" moves to Porto (D3:1) at checkpoint 3.
    let city3 = asked(0, 3);
    assert_eq!(superseded_evidence(&city3), vec!["D1:1"]);
    assert_eq!(verdicts(&city3, &["D1:1", "D1:2"]), (false, false), "superseded only");
    assert_eq!(verdicts(&city3, &["D1:1", "D3:1"]), (true, false), "both");
    assert_eq!(verdicts(&city3, &["D3:1", "D3:2"]), (true, true), "valid only");
    // Before the move nothing is superseded: Lisbon's turn is the valid evidence.
    let city2 = asked(0, 2);
    assert!(superseded_evidence(&city2).is_empty());
    assert_eq!(verdicts(&city2, &["D1:1"]), (true, true));
    // The job: version 2 keeps D1:3 as evidence, so it is not superseded at 2; at 3 both earlier turns are.
    assert!(superseded_evidence(&asked(1, 2)).is_empty());
    assert_eq!(superseded_evidence(&asked(1, 3)), vec!["D1:3", "D2:2"]);
    assert_eq!(verdicts(&asked(1, 3), &["D2:2", "D3:1", "D3:3"]), (true, false));
    assert_eq!(verdicts(&asked(1, 3), &["D1:3", "D2:2"]), (false, false));
    // The anchored question has no versions: the two judges agree.
    let anchored = asked(2, 3);
    assert_eq!(verdicts(&anchored, &["D1:1", "D3:1"]), (true, true));
}

/// End to end on the example with the default strategy: its memory fits the
/// context, so every context holds the old turns too. `evidence` credits all
/// nine observations; `temporal` fails the two moved probes at checkpoint 3.
#[test]
fn the_temporal_judge_fails_the_example_where_stale_turns_reach_the_context() {
    let d = example();
    let evidence = run(&d, replay1(None), &default_strategy());
    let temporal = run(&d, replay1(Some(JudgeKind::Temporal)), &default_strategy());
    assert_eq!(evidence.summary.correct, 9);
    let wrong: Vec<&str> = temporal.outcomes.iter().filter(|o| !o.correct).map(|o| o.id.as_str()).collect();
    assert_eq!(wrong, vec!["evolving-1#0@3", "evolving-1#1@3"]);
    for id in &wrong {
        assert!(by_id(&temporal)[id].context_turns.iter().any(|t| t == "D1:1" || t == "D1:3"));
    }
    // Endpoint: the last version is valid, and the temporal judge fails the same two probes.
    let endpoint = run(&d, settings(Protocol::Endpoint, Some(JudgeKind::Temporal)), &default_strategy());
    assert_eq!(endpoint.summary.correct, 1);
}

/// Where the revision retells the old fact, consolidation retires the older
/// item at the checkpoint that brings the newer one: the temporal judge's
/// observation turns correct, and the retired turn is lost (not merged).
#[test]
fn consolidation_retires_the_superseded_item_at_the_checkpoint() {
    let d = retold();
    let judge = Some(JudgeKind::Temporal);
    let off = run(&d, replay1(judge), &default_strategy());
    let on = run(&d, replay1(judge), &consolidating(0.6));
    let (off_ids, on_ids) = (by_id(&off), by_id(&on));
    assert!(on_ids["r#0@1"].correct && off_ids["r#0@1"].correct, "before the revision, nothing to retire");
    assert!(!off_ids["r#0@2"].correct, "off: the stale bakery turn sits next to the studio");
    assert!(on_ids["r#0@2"].correct, "on: the bakery item is retired at checkpoint 2");
    assert!(!on_ids["r#0@2"].context_turns.iter().any(|t| t == "D1:1"));
    assert_eq!(on.memory.retired, 1);
    assert_eq!(off.memory.retired, 0);
    // The unrelated probe keeps its evidence.
    assert!(on_ids["r#1@2"].correct);
    // The retired turn is gone from the trace: nothing holds D1:1 any more.
    let endpoint = run(&d, settings(Protocol::Endpoint, None), &consolidating(0.6));
    assert!(endpoint.outcomes.iter().all(|o| !o.evidence_memory_ids.iter().any(|m| m == "r/m0000")));
    // A threshold the pair does not reach retires nothing.
    assert_eq!(run(&d, replay1(judge), &consolidating(0.95)).memory.retired, 0);
}

/// The measured effect on the example: its revisions are new sentences, not
/// retellings, so no threshold down to 0.4 retires anything; at 0.3 two
/// items go, and they are the wrong ones (newer items about the same topic
/// retire the valid evidence D1:3 at checkpoint 2 and D3:1 at 3).
#[test]
fn on_the_example_consolidation_retires_nothing_above_0_3_and_hurts_at_0_3() {
    let d = example();
    let base = run(&d, replay1(None), &default_strategy());
    for t in [0.4, 0.6, 0.8] {
        let e = run(&d, replay1(None), &consolidating(t));
        assert_eq!(e.memory.retired, 0, "threshold {t}");
        assert_eq!(jsonl(&e.outcomes), jsonl(&base.outcomes), "threshold {t}");
    }
    let low = run(&d, replay1(None), &consolidating(0.3));
    assert_eq!(low.memory.retired, 2);
    let wrong: Vec<&str> = low.outcomes.iter().filter(|o| !o.correct).map(|o| o.id.as_str()).collect();
    assert_eq!(wrong, vec!["evolving-1#0@3", "evolving-1#1@2", "evolving-1#1@3"]);
}

/// Off (absent, or present with enabled: false) is the strategy it always
/// was: the same serialized strategy, stage keys and outcomes, byte for byte.
#[test]
fn consolidation_off_changes_nothing() {
    let plain = default_strategy();
    let mut off = default_strategy();
    off.ingest.consolidate = Consolidate { enabled: false, threshold: 0.4 };
    assert_eq!(serde_json::to_string(&off).unwrap(), serde_json::to_string(&plain).unwrap());
    assert_eq!(off.ingest_fields(), plain.ingest_fields());
    assert!(off.consolidate_fields().is_empty());
    assert!(!serde_json::to_string(&plain).unwrap().contains("consolidate"));
    for s in [replay1(None), settings(Protocol::Endpoint, None)] {
        let a = builtin_evaluator(s.clone()).evaluate(&plain).unwrap();
        let b = builtin_evaluator(s).evaluate(&off).unwrap();
        assert_eq!(jsonl(&a.outcomes), jsonl(&b.outcomes));
        assert_eq!(a.memory, b.memory);
    }
    // With consolidation on, the ingest key is unchanged (ingest does not read it).
    assert_eq!(consolidating(0.6).ingest_fields(), plain.ingest_fields());
}

/// With consolidation on, the last observations are still the endpoint
/// outcomes, byte for byte (endpoint consolidates over the whole history,
/// which is the last checkpoint's), and the temporal judge keeps that too.
#[test]
fn endpoint_equals_the_final_checkpoint_with_consolidation_on() {
    let mut sets: Vec<(&str, Arc<Dataset>)> =
        vec![("builtin", Arc::new(Dataset::builtin())), ("example", example()), ("retold", retold())];
    if let Some(p) = locomo_path() {
        sets.push(("locomo10-dev", Arc::new(emend_harness::load_path(&p).unwrap())));
    }
    for (name, d) in sets {
        for (t, judge) in [(0.6, None), (0.8, Some(JudgeKind::Temporal))] {
            let s = consolidating(t);
            let endpoint = run(&d, settings(Protocol::Endpoint, judge), &s);
            let replayed = run(&d, replay1(judge), &s);
            let mut last: BTreeMap<String, PipelineOutcome> = BTreeMap::new();
            for o in &replayed.outcomes {
                let mut o = o.clone();
                o.id = replay::probe_of(&o.id).to_string();
                o.checkpoint = None;
                last.insert(o.id.clone(), o);
            }
            let mut ends = endpoint.outcomes.clone();
            ends.sort_by(|a, b| a.id.cmp(&b.id));
            let last: Vec<PipelineOutcome> = last.into_values().collect();
            assert_eq!(jsonl(&last), jsonl(&ends), "{name} at {t}");
            assert_eq!(replayed.memory, endpoint.memory, "{name} at {t}");
            assert_eq!(replayed.final_accuracy(), Some(endpoint.summary.accuracy), "{name} at {t}");
        }
    }
}
