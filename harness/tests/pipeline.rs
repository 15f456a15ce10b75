//! The evaluator end to end on the embedded dataset: determinism, the stage
//! cache, subsets, threads, trace invariants and plug-in errors.

mod common;

use std::sync::Arc;

use common::*;
use emend_harness::strategy::{IngestUnit, JudgeKind};
use emend_harness::{EvalError, HarnessSettings, PipelineOutcome, Strategy};
use proptest::prelude::*;
use proptest::strategy::Strategy as _;

fn one_conversation() -> HarnessSettings {
    HarnessSettings { conversations: Some(vec!["syn-2".into()]), ..HarnessSettings::default() }
}

#[test]
fn two_evaluators_give_byte_identical_outcomes() {
    let s = default_strategy();
    let a = builtin_evaluator(HarnessSettings::default()).evaluate(&s).unwrap();
    let b = builtin_evaluator(HarnessSettings::default()).evaluate(&s).unwrap();
    assert_eq!(jsonl(&a.outcomes), jsonl(&b.outcomes));
    assert_eq!(a.summary, b.summary);
    let ids: Vec<&str> = a.outcomes.iter().map(|o| o.id.as_str()).collect();
    let mut sorted = ids.clone();
    sorted.sort_by_key(|id| {
        let (c, i) = id.split_once('#').unwrap();
        (c.to_string(), i.parse::<usize>().unwrap())
    });
    assert_eq!(ids, sorted, "outcomes come sorted by conversation, then qa index");
}

#[test]
fn cached_and_uncached_evaluations_are_byte_identical() {
    let s = default_strategy();
    let cold = jsonl(&builtin_evaluator(HarnessSettings::default()).evaluate(&s).unwrap().outcomes);
    let ev = builtin_evaluator(HarnessSettings::default());
    // Warm the caches with neighbours sharing some stages, then the strategy itself twice.
    for (path, v) in [("retrieve.top_k", 7.into()), ("assemble.token_budget", 500.into()), ("index.bm25_b", 0.5.into())]
    {
        ev.evaluate(&with(&s, path, v)).unwrap();
    }
    let partly = ev.evaluate(&s).unwrap();
    let fully = ev.evaluate(&s).unwrap();
    assert!(partly.cache.ingest.hits > 0 && partly.cache.ingest.misses == 0, "{:?}", partly.cache);
    assert_eq!(fully.cache.retrieve.misses, 0, "{:?}", fully.cache);
    assert_eq!(jsonl(&partly.outcomes), cold);
    assert_eq!(jsonl(&fully.outcomes), cold);
}

#[test]
fn a_retrieval_only_change_neither_reingests_nor_reindexes() {
    let s = default_strategy();
    let ev = builtin_evaluator(HarnessSettings::default());
    let first = ev.evaluate(&s).unwrap();
    let convs = first.memory.conversations as u64;
    assert_eq!(first.cache.ingest.misses, convs);
    assert_eq!(first.cache.index.misses, convs);
    let mut t = s.clone();
    t.retrieve.top_k += 1;
    t.retrieve.rrf_kappa += 10.0;
    let second = ev.evaluate(&t).unwrap();
    assert_eq!((second.cache.ingest.hits, second.cache.ingest.misses), (convs, 0));
    assert_eq!((second.cache.index.hits, second.cache.index.misses), (convs, 0));
    assert_eq!(second.cache.retrieve.misses, second.summary.n as u64);
    // An index change re-indexes but does not re-ingest; an assembly change reuses retrieval.
    let third = ev.evaluate(&with(&s, "index.bm25_k1", 0.8.into())).unwrap();
    assert_eq!((third.cache.ingest.misses, third.cache.index.misses), (0, convs));
    let fourth = ev.evaluate(&with(&s, "assemble.token_budget", 700.into())).unwrap();
    assert_eq!(fourth.cache.retrieve.misses, 0);
    let totals = ev.cache_stats();
    assert_eq!(totals.ingest.misses, convs);
    // A field the stage does not read under this strategy does not invalidate it.
    let fifth = ev.evaluate(&with(&s, "retrieve.expansion.terms", 9.into())).unwrap();
    assert_eq!(fifth.cache.retrieve.misses, 0, "expansion is off: its terms are not read");
    ev.clear_cache();
    assert_eq!(ev.evaluate(&s).unwrap().cache.ingest.misses, convs);
}

#[test]
fn subsets_match_the_full_evaluation() {
    let s = default_strategy();
    let ev = builtin_evaluator(HarnessSettings::default());
    let full = ev.evaluate(&s).unwrap();
    let ids: Vec<String> = full.outcomes.iter().step_by(7).rev().map(|o| o.id.clone()).collect();
    let sub = ev.evaluate_subset(&s, &ids).unwrap();
    assert_eq!(sub.outcomes.len(), ids.len());
    let expected: Vec<PipelineOutcome> = full.outcomes.iter().step_by(7).cloned().collect();
    assert_eq!(jsonl(&sub.outcomes), jsonl(&expected));
    let fresh = builtin_evaluator(HarnessSettings::default()).evaluate_subset(&s, &ids).unwrap();
    assert_eq!(jsonl(&fresh.outcomes), jsonl(&expected));
    match ev.evaluate_subset(&s, &["syn-1#9999".to_string()]) {
        Err(EvalError::UnknownQuestion(id)) => assert_eq!(id, "syn-1#9999"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn conversations_restrict_the_task_set() {
    let ev = builtin_evaluator(one_conversation());
    let e = ev.evaluate(&default_strategy()).unwrap();
    assert!(e.outcomes.iter().all(|o| o.conversation == "syn-2"));
    assert_eq!(e.memory.conversations, 1);
    assert_eq!(ev.questions().len(), e.summary.n);
    let bad = HarnessSettings { conversations: Some(vec!["conv-404".into()]), ..HarnessSettings::default() };
    let err = emend_harness::Evaluator::new(Arc::new(emend_harness::Dataset::builtin()), bad).unwrap_err();
    assert!(err.to_string().contains("no conversation \"conv-404\""), "{err}");
}

#[test]
fn threads_share_one_evaluator() {
    let ev = Arc::new(builtin_evaluator(one_conversation()));
    let s = default_strategy();
    let variants: Vec<Strategy> = (0..3)
        .map(|k| with(&s, "retrieve.top_k", serde_json::json!(3 + 2 * k)))
        .chain([s.clone(), s.clone()])
        .collect();
    let expected: Vec<String> =
        variants.iter().map(|v| jsonl(&builtin_evaluator(one_conversation()).evaluate(v).unwrap().outcomes)).collect();
    let handles: Vec<_> = variants
        .into_iter()
        .map(|v| {
            let ev = Arc::clone(&ev);
            std::thread::spawn(move || jsonl(&ev.evaluate(&v).unwrap().outcomes))
        })
        .collect();
    let got: Vec<String> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(got, expected);
}

#[test]
fn roles_that_do_not_exist_yet_are_clear_errors() {
    let ev = builtin_evaluator(one_conversation());
    let mut s = default_strategy();
    s.ingest.unit = IngestUnit::Fact;
    assert_eq!(ev.evaluate(&s).unwrap_err().to_string(), "ingest.unit: fact needs roles.extractor");
    let mut s = default_strategy();
    s.judge.kind = JudgeKind::Llm;
    assert_eq!(ev.evaluate(&s).unwrap_err().to_string(), "judge.kind: llm needs roles.judge");
    let mut s = default_strategy();
    s.ingest.window_overlap = s.ingest.window_size;
    assert!(ev.evaluate(&s).unwrap_err().to_string().starts_with("ingest.window_overlap: "));
}

#[test]
fn the_f1_judge_scores_answers() {
    let s = default_strategy();
    let settings = HarnessSettings { judge: Some(JudgeKind::F1), ..one_conversation() };
    let e = builtin_evaluator(settings.clone()).evaluate(&s).unwrap();
    assert!(e.outcomes.iter().all(|o| o.judge_score.is_some()));
    assert!(e.summary.correct > 0, "some extractive answers match");
    assert!(e.outcomes.iter().all(|o| o.correct == (o.judge_score.unwrap() >= s.judge.f1_threshold)));
    let strict = HarnessSettings { f1_threshold: Some(1.0), ..settings };
    let e2 = builtin_evaluator(strict).evaluate(&s).unwrap();
    assert!(e2.summary.correct < e.summary.correct);
    assert_ne!(
        emend_harness::harness_hash(&HarnessSettings::default()),
        builtin_evaluator(one_conversation()).harness_hash()
    );
}

#[test]
fn outcomes_round_trip_through_json() {
    let e = builtin_evaluator(one_conversation()).evaluate(&default_strategy()).unwrap();
    for line in jsonl(&e.outcomes).lines() {
        let o: PipelineOutcome = serde_json::from_str(line).unwrap();
        assert_eq!(serde_json::to_string(&o).unwrap(), line);
    }
    let v: serde_json::Value = serde_json::from_str(jsonl(&e.outcomes).lines().next().unwrap()).unwrap();
    for key in [
        "id",
        "conversation",
        "category",
        "question",
        "gold_answer",
        "correct",
        "evidence",
        "unresolved_evidence",
        "evidence_memory_ids",
        "retrieved",
        "context_ids",
        "context_turns",
        "context_tokens",
        "answer",
        "evidence_trace",
    ] {
        assert!(v.get(key).is_some(), "outcome lacks {key}");
    }
}

/// Invariants every trace must satisfy, whatever the strategy.
fn check_invariants(s: &Strategy, outcomes: &[PipelineOutcome]) {
    let budget = s.assemble.token_budget.min(s.assemble.token_budget_ceiling).min(2000);
    for o in outcomes {
        assert_eq!(o.evidence_trace.iter().map(|t| t.turn.as_str()).collect::<Vec<_>>(), o.evidence, "{}", o.id);
        let retrieved: Vec<&str> = o.retrieved.iter().map(|r| r.id.as_str()).collect();
        let mut union: Vec<&str> = Vec::new();
        for t in &o.evidence_trace {
            assert_eq!(t.retrieved, t.memory_ids.iter().any(|m| retrieved.contains(&m.as_str())), "{}", o.id);
            assert_eq!(t.in_context, o.context_turns.contains(&t.turn), "{}", o.id);
            assert!(
                !t.in_context || !t.memory_ids.is_empty(),
                "{}: a turn no item holds cannot reach the context",
                o.id
            );
            union.extend(t.memory_ids.iter().map(String::as_str));
        }
        union.sort_unstable();
        union.dedup();
        let mut emi: Vec<&str> = o.evidence_memory_ids.iter().map(String::as_str).collect();
        emi.sort_unstable();
        assert_eq!(emi, union, "{}", o.id);
        assert_eq!(o.correct, !o.evidence.is_empty() && o.evidence_trace.iter().all(|t| t.in_context), "{}", o.id);
        assert!(o.context_tokens <= budget, "{}", o.id);
        assert!(o.context_ids.iter().all(|c| retrieved.contains(&c.as_str())), "{}", o.id);
        assert!(o.retrieved.iter().enumerate().all(|(i, r)| r.rank as usize == i + 1));
        assert!(o.retrieved.len() <= s.retrieve.pool as usize);
        assert!(o.retrieved.iter().all(|r| r.score > 0.0 && r.id.starts_with(&format!("{}/m", o.conversation))));
    }
}

fn arb_strategy() -> impl proptest::strategy::Strategy<Value = emend_harness::Strategy> {
    (
        (1u32..=6, 0u32..=3, 0u32..=80, 0.5f64..=1.0, 1u32..=30, any::<bool>()),
        (0.0f64..=3.0, 0.0f64..=1.0, prop_oneof![Just(32u32), Just(256), Just(1024)]),
        (any::<bool>(), 1.0f64..=120.0, 0.0f64..=3.0, 0.0f64..=3.0, 0.0f64..=3.0, 1u32..=40, 1u32..=30),
        (0.0f64..=400.0, any::<bool>(), 1u32..=8, 0.5f64..=4.0, 0u32..=30),
        (50u32..=2500, 0u32..=3, any::<bool>(), any::<bool>()),
    )
        .prop_map(|(i, x, r, r2, a)| {
            let mut s = default_strategy();
            s.ingest.window_size = i.0;
            s.ingest.window_overlap = i.1.min(i.0 - 1);
            s.ingest.min_chars = i.2;
            s.ingest.dedup_threshold = i.3;
            s.ingest.max_items_per_session = i.4;
            s.ingest.stamp_date = i.5;
            (s.index.bm25_k1, s.index.bm25_b, s.index.dense_dim) = x;
            s.retrieve.fusion =
                if r.0 { emend_harness::strategy::Fusion::Rrf } else { emend_harness::strategy::Fusion::WeightedSum };
            s.retrieve.rrf_kappa = r.1;
            (s.retrieve.weights.bm25, s.retrieve.weights.dense, s.retrieve.weights.expansion) = (r.2, r.3, r.4);
            s.retrieve.pool = r.5.max(r.6);
            s.retrieve.top_k = r.6;
            s.retrieve.recency_half_life_days = r2.0;
            s.retrieve.expansion.enabled = r2.1;
            s.retrieve.expansion.terms = r2.2;
            s.retrieve.intent_overrides.temporal.top_k_multiplier = r2.3;
            s.retrieve.rerank_top_n = r2.4.min(s.retrieve.top_k);
            s.assemble.token_budget = a.0;
            s.assemble.backfill_window = a.1;
            s.assemble.order = if a.2 {
                emend_harness::strategy::ContextOrder::Score
            } else {
                emend_harness::strategy::ContextOrder::Chronological
            };
            s.assemble.dedup = a.3;
            s
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, ..ProptestConfig::default() })]

    #[test]
    fn traces_are_consistent_for_any_strategy(s in arb_strategy()) {
        let ev = builtin_evaluator(one_conversation());
        let e = ev.evaluate(&s).unwrap();
        check_invariants(&s, &e.outcomes);
        let again = builtin_evaluator(one_conversation()).evaluate(&s).unwrap();
        prop_assert_eq!(jsonl(&e.outcomes), jsonl(&again.outcomes));
    }
}

/// An extractor that keeps the window's first word of each turn only: the
/// fact it stores has lost most of what the source said.
struct Lossy;

impl emend_harness::ingest::Extractor for Lossy {
    fn id(&self) -> String {
        "lossy".into()
    }
    fn extract(
        &self,
        _: &str,
        window: &[&emend_harness::dataset::Turn],
    ) -> Result<Vec<emend_harness::ingest::Fact>, emend_harness::ingest::ExtractError> {
        Ok(window
            .iter()
            .map(|t| emend_harness::ingest::Fact {
                text: format!("{} spoke about {}", t.speaker, t.text.split_whitespace().next().unwrap_or("")),
                turns: vec![t.id.clone()],
            })
            .collect())
    }
}

/// The answer coverage compares the source turns with the memory that reached
/// the context: windows keep every answer term their turns state; a lossy
/// extractor drops them, and the trace shows it.
#[test]
fn answer_coverage_tells_what_the_memory_kept_of_the_source() {
    let s = default_strategy();
    let windows = builtin_evaluator(HarnessSettings::default()).evaluate(&s).unwrap();
    let mut measured = 0;
    for o in &windows.outcomes {
        let Some(c) = &o.answer_coverage else {
            assert!(o.gold_answer.is_none() || o.evidence.is_empty(), "{}", o.id);
            continue;
        };
        if o.evidence_trace.iter().all(|t| t.in_context && !t.memory_ids.is_empty()) {
            assert_eq!(c.kept, c.source, "{}: a window holds its turns verbatim", o.id);
            measured += usize::from(!c.source.is_empty());
        }
        assert!(c.kept.iter().all(|t| c.source.contains(t)));
    }
    assert!(measured > 10, "{measured}");

    let facts = with(&s, "ingest.unit", serde_json::json!("fact"));
    let lossy = builtin_evaluator(HarnessSettings::default()).with_extractor(Arc::new(Lossy)).evaluate(&facts).unwrap();
    let lost = lossy
        .outcomes
        .iter()
        .filter(|o| o.evidence_trace.iter().all(|t| t.in_context))
        .filter_map(|o| o.answer_coverage.as_ref())
        .filter(|c| c.kept.len() < c.source.len())
        .count();
    assert!(lost > 0, "the lossy extractor's facts must lose answer terms");
    for o in &lossy.outcomes {
        if let Some(c) = &o.answer_coverage {
            assert!(c.memory.iter().all(|m| m.contains(" spoke about ")), "{:?}", c.memory);
        }
    }
}

/// The answer coverage as first written (every term of every text collected
/// in sets): the reference for the measurement that scans texts instead.
fn coverage_reference(
    sample: &emend_harness::dataset::Sample,
    memory: &emend_harness::ingest::Memory,
    q: &emend_harness::dataset::Question,
    ctx: &emend_harness::assemble::Context,
) -> Option<emend_harness::outcome::AnswerCoverage> {
    use std::collections::BTreeSet;
    let terms = emend_harness::text::terms;
    let answer = q.answer.as_deref()?;
    let gold: Vec<u32> = q.evidence.iter().filter_map(|t| sample.ordinal(t)).collect();
    if gold.is_empty() {
        return None;
    }
    let answer_terms: BTreeSet<String> = terms(answer).into_iter().collect();
    let source_terms: BTreeSet<String> = gold.iter().flat_map(|&o| terms(&sample.turn(o).content())).collect();
    let source: Vec<String> = answer_terms.intersection(&source_terms).cloned().collect();
    let mut reached: BTreeSet<String> = BTreeSet::new();
    let mut texts = Vec::new();
    for b in &ctx.blocks {
        let item = &memory.items[b.item as usize];
        if item.turns.iter().any(|t| gold.contains(t)) {
            reached.extend(terms(&item.text));
            texts.push(item.text.clone());
        }
        for &o in b.before.iter().chain(&b.after) {
            if gold.contains(&o) {
                reached.extend(terms(&sample.turn(o).content()));
            }
        }
    }
    let kept = source.iter().filter(|t| reached.contains(*t)).cloned().collect();
    Some(emend_harness::outcome::AnswerCoverage { source, kept, memory: texts })
}

/// The coverage the evaluator measures is the reference's, question by
/// question, under strategies with windows, backfill and tight budgets.
#[test]
fn answer_coverage_equals_its_reference() {
    let d = default_strategy();
    let strategies = [
        d.clone(),
        with(&with(&d, "ingest.window_size", serde_json::json!(3)), "ingest.window_overlap", serde_json::json!(1)),
        with(&with(&d, "assemble.backfill_window", serde_json::json!(2)), "retrieve.top_k", serde_json::json!(10)),
        with(&d, "assemble.token_budget", serde_json::json!(120)),
    ];
    let dataset = emend_harness::Dataset::builtin();
    let (mut compared, mut kept_some, mut lost_some) = (0, 0, 0);
    for s in &strategies {
        let ev = builtin_evaluator(HarnessSettings::default());
        let by_id: std::collections::HashMap<String, PipelineOutcome> =
            ev.evaluate(s).unwrap().outcomes.into_iter().map(|o| (o.id.clone(), o)).collect();
        for sample in dataset.samples() {
            let memory = emend_harness::ingest::ingest(sample, &s.ingest, None).unwrap();
            let index = emend_harness::index::build(&memory, &s.index, None).unwrap();
            for q in &sample.questions {
                let Some(o) = by_id.get(&q.id) else { continue };
                let ret = emend_harness::retrieve::retrieve(&q.question, None, &memory, &index, &s.retrieve);
                let ctx = emend_harness::assemble::assemble(
                    sample,
                    &memory,
                    &ret,
                    &s.assemble,
                    emend_harness::DEFAULT_BUDGET_CEILING,
                );
                let want = coverage_reference(sample, &memory, q, &ctx);
                assert_eq!(o.answer_coverage, want, "{}", q.id);
                compared += 1;
                if let Some(c) = &want {
                    kept_some += usize::from(!c.kept.is_empty());
                    lost_some += usize::from(c.kept.len() < c.source.len());
                }
            }
        }
    }
    assert!(compared > 100 && kept_some > 10 && lost_some > 0, "{compared} {kept_some} {lost_some}");
}
