//! The mechanisms the audit knows: each one's evolvable fields, how to tell
//! it is off in a strategy, and the field moves of its contrast (which turn
//! it off when it has an off-setting, or move it otherwise). The list is in
//! pipeline order (ingest, index, retrieve, assemble, answer), the order the
//! buildup adds mechanisms back in.

use serde_json::{Value, json};

use emend_core::outcome::{BackendOutcome, Evaluation};
use emend_core::schema::get_path;

/// One mechanism: its fields, how to tell it is off, and its contrast.
pub struct Mechanism {
    pub name: &'static str,
    pub fields: &'static [&'static str],
    pub switch: Option<&'static str>,
    /// Why it is off in `doc`, if it is.
    pub off: fn(&Value) -> Option<String>,
    /// The field moves of the contrast, from `doc`.
    pub contrast: fn(&Value) -> Vec<(&'static str, Value)>,
    /// What the served evaluation's trace says about its execution, when the
    /// trace records it (the built-in harness does; an external one may not,
    /// so this is evidence, never a status on its own).
    pub ran: Option<fn(&Value, &Evaluation) -> String>,
    /// Whether it applies to a question (None: whenever it is on).
    pub eligible: Option<fn(&Value, &BackendOutcome) -> bool>,
    /// Whether the trace shows its output on a question (None: the trace
    /// keeps none, and every execution counts as producing).
    pub output: Option<fn(&Value, &BackendOutcome) -> bool>,
    /// Its output is the answer prompt: part of the final prompt whenever
    /// the answer is computed, which the evidence judge never does.
    pub in_prompt: bool,
}

fn expansion_output(_: &Value, o: &BackendOutcome) -> bool {
    !o.expansion_terms.is_empty()
}

fn intent_eligible(doc: &Value, o: &BackendOutcome) -> bool {
    o.intent.as_deref().is_some_and(|i| num(doc, &format!("retrieve.intent_overrides.{i}.top_k_multiplier")) != 1.0)
}

fn expansion_ran(_: &Value, e: &Evaluation) -> String {
    let n = e.outcomes.iter().filter(|o| !o.expansion_terms.is_empty()).count();
    format!("trace: expansion added terms on {n} of {} questions", e.outcomes.len())
}

fn intent_ran(doc: &Value, e: &Evaluation) -> String {
    let n = e
        .outcomes
        .iter()
        .filter(|o| {
            o.intent
                .as_deref()
                .is_some_and(|i| num(doc, &format!("retrieve.intent_overrides.{i}.top_k_multiplier")) != 1.0)
        })
        .count();
    format!("trace: {n} of {} questions show an intent whose multiplier is not 1", e.outcomes.len())
}

pub fn num(doc: &Value, path: &str) -> f64 {
    get_path(doc, path).and_then(Value::as_f64).unwrap_or(0.0)
}

pub fn text<'a>(doc: &'a Value, path: &str) -> &'a str {
    get_path(doc, path).and_then(Value::as_str).unwrap_or("")
}

fn never(_: &Value) -> Option<String> {
    None
}

pub const MECHANISMS: &[Mechanism] = &[
    Mechanism {
        name: "windows",
        fields: &["ingest.window_size", "ingest.window_overlap"],
        switch: None,
        off: never,
        ran: None,
        eligible: None,
        output: None,
        in_prompt: false,
        contrast: |d| {
            let size = num(d, "ingest.window_size");
            vec![("ingest.window_size", json!(if size > 1.0 { 1 } else { 2 })), ("ingest.window_overlap", json!(0))]
        },
    },
    Mechanism {
        name: "ingest filters",
        fields: &["ingest.min_chars", "ingest.max_items_per_session"],
        switch: None,
        off: |d| (num(d, "ingest.min_chars") == 0.0).then(|| "ingest.min_chars is 0 (the session cap stays)".into()),
        ran: None,
        eligible: None,
        output: None,
        in_prompt: false,
        contrast: |_| vec![("ingest.min_chars", json!(0))],
    },
    Mechanism {
        name: "dedup",
        fields: &["ingest.dedup_threshold", "assemble.dedup"],
        switch: Some("assemble.dedup"),
        off: |d| {
            (num(d, "ingest.dedup_threshold") >= 1.0 && get_path(d, "assemble.dedup") == Some(&json!(false)))
                .then(|| "ingest.dedup_threshold is 1 and assemble.dedup is false".into())
        },
        ran: None,
        eligible: None,
        output: None,
        in_prompt: false,
        contrast: |_| vec![("ingest.dedup_threshold", json!(1.0)), ("assemble.dedup", json!(false))],
    },
    Mechanism {
        name: "date stamps",
        fields: &["ingest.stamp_date"],
        switch: Some("ingest.stamp_date"),
        off: |d| (get_path(d, "ingest.stamp_date") == Some(&json!(false))).then(|| "ingest.stamp_date is false".into()),
        ran: None,
        eligible: None,
        output: None,
        in_prompt: false,
        contrast: |_| vec![("ingest.stamp_date", json!(false))],
    },
    Mechanism {
        name: "extraction",
        fields: &["ingest.extraction_prompt"],
        switch: None,
        off: |d| {
            (text(d, "ingest.unit") != "fact")
                .then(|| format!("ingest.unit is {}: the extraction prompt is never sent", text(d, "ingest.unit")))
        },
        ran: None,
        eligible: None,
        output: None,
        in_prompt: false,
        contrast: |_| vec![("ingest.unit", json!("window"))],
    },
    Mechanism {
        name: "bm25",
        fields: &["index.bm25_k1", "index.bm25_b", "retrieve.weights.bm25"],
        switch: None,
        off: |d| (num(d, "retrieve.weights.bm25") == 0.0).then(|| "retrieve.weights.bm25 is 0".into()),
        ran: None,
        eligible: None,
        output: None,
        in_prompt: false,
        contrast: |_| vec![("retrieve.weights.bm25", json!(0.0))],
    },
    Mechanism {
        name: "dense channel",
        fields: &["index.dense_kind", "index.dense_dim", "retrieve.weights.dense"],
        switch: Some("index.dense_kind"),
        off: |d| {
            if text(d, "index.dense_kind") == "none" {
                Some("index.dense_kind is none".into())
            } else {
                (num(d, "retrieve.weights.dense") == 0.0).then(|| "retrieve.weights.dense is 0".into())
            }
        },
        ran: None,
        eligible: None,
        output: None,
        in_prompt: false,
        contrast: |_| vec![("retrieve.weights.dense", json!(0.0))],
    },
    Mechanism {
        name: "fusion",
        fields: &["retrieve.fusion", "retrieve.rrf_kappa"],
        switch: None,
        off: never,
        ran: None,
        eligible: None,
        output: None,
        in_prompt: false,
        contrast: |d| {
            vec![("retrieve.fusion", json!(if text(d, "retrieve.fusion") == "rrf" { "weighted_sum" } else { "rrf" }))]
        },
    },
    Mechanism {
        name: "expansion",
        fields: &["retrieve.expansion.enabled", "retrieve.expansion.terms", "retrieve.weights.expansion"],
        switch: Some("retrieve.expansion.enabled"),
        ran: Some(expansion_ran),
        eligible: None,
        output: Some(expansion_output),
        in_prompt: false,
        off: |d| {
            (get_path(d, "retrieve.expansion.enabled") == Some(&json!(false)))
                .then(|| "retrieve.expansion.enabled is false: its terms and weight change nothing".into())
        },
        contrast: |_| vec![("retrieve.expansion.enabled", json!(false))],
    },
    Mechanism {
        name: "recency decay",
        fields: &["retrieve.recency_half_life_days"],
        switch: Some("retrieve.recency_half_life_days"),
        off: |d| {
            (num(d, "retrieve.recency_half_life_days") == 0.0)
                .then(|| "retrieve.recency_half_life_days is 0 (no decay)".into())
        },
        ran: None,
        eligible: None,
        output: None,
        in_prompt: false,
        contrast: |_| vec![("retrieve.recency_half_life_days", json!(0))],
    },
    Mechanism {
        name: "intent overrides",
        ran: Some(intent_ran),
        eligible: Some(intent_eligible),
        output: None,
        in_prompt: false,
        fields: &[
            "retrieve.intent_overrides.temporal.top_k_multiplier",
            "retrieve.intent_overrides.quantity.top_k_multiplier",
            "retrieve.intent_overrides.reasoning.top_k_multiplier",
        ],
        switch: None,
        off: |d| {
            ["temporal", "quantity", "reasoning"]
                .iter()
                .all(|i| num(d, &format!("retrieve.intent_overrides.{i}.top_k_multiplier")) == 1.0)
                .then(|| "every intent's top_k_multiplier is 1".into())
        },
        contrast: |_| {
            vec![
                ("retrieve.intent_overrides.temporal.top_k_multiplier", json!(1.0)),
                ("retrieve.intent_overrides.quantity.top_k_multiplier", json!(1.0)),
                ("retrieve.intent_overrides.reasoning.top_k_multiplier", json!(1.0)),
            ]
        },
    },
    Mechanism {
        name: "rerank",
        fields: &["retrieve.rerank_top_n"],
        switch: Some("retrieve.rerank_top_n"),
        off: |d| (num(d, "retrieve.rerank_top_n") == 0.0).then(|| "retrieve.rerank_top_n is 0".into()),
        ran: None,
        eligible: None,
        output: None,
        in_prompt: false,
        contrast: |_| vec![("retrieve.rerank_top_n", json!(0))],
    },
    Mechanism {
        name: "retrieval depth",
        fields: &["retrieve.top_k", "retrieve.pool"],
        switch: None,
        off: never,
        ran: None,
        eligible: None,
        output: None,
        in_prompt: false,
        contrast: |d| {
            let k = num(d, "retrieve.top_k");
            vec![("retrieve.top_k", json!(((k / 2.0).floor() as u64).max(1)))]
        },
    },
    Mechanism {
        name: "context budget",
        fields: &["assemble.token_budget"],
        switch: None,
        off: never,
        ran: None,
        eligible: None,
        output: None,
        in_prompt: false,
        contrast: |d| vec![("assemble.token_budget", json!(((num(d, "assemble.token_budget") / 2.0) as u64).max(1)))],
    },
    Mechanism {
        name: "backfill",
        fields: &["assemble.backfill_window"],
        switch: Some("assemble.backfill_window"),
        off: |d| (num(d, "assemble.backfill_window") == 0.0).then(|| "assemble.backfill_window is 0".into()),
        ran: None,
        eligible: None,
        output: None,
        in_prompt: false,
        contrast: |_| vec![("assemble.backfill_window", json!(0))],
    },
    Mechanism {
        name: "ordering",
        fields: &["assemble.order"],
        switch: None,
        off: never,
        ran: None,
        eligible: None,
        output: None,
        in_prompt: false,
        contrast: |d| {
            vec![(
                "assemble.order",
                json!(if text(d, "assemble.order") == "score" { "chronological" } else { "score" }),
            )]
        },
    },
    Mechanism {
        name: "answer",
        fields: &["answer.prompt", "answer.format"],
        switch: None,
        off: never,
        ran: None,
        eligible: None,
        output: None,
        in_prompt: true,
        contrast: |d| {
            vec![("answer.format", json!(if text(d, "answer.format") == "short" { "sentence" } else { "short" }))]
        },
    },
];

/// The fields an audit covers, mechanism by mechanism (for the proposer and tests).
pub fn mechanism_fields() -> Vec<(&'static str, &'static [&'static str])> {
    MECHANISMS.iter().map(|m| (m.name, m.fields)).collect()
}

impl Mechanism {
    /// The contrast's field moves that change `doc` (`path: from -> to`) and
    /// the contrasted document.
    pub fn contrasted(&self, doc: &Value) -> (Vec<String>, Value) {
        let mut value = doc.clone();
        let mut changes = Vec::new();
        for (path, to) in (self.contrast)(doc) {
            let from = get_path(doc, path).cloned().unwrap_or(Value::Null);
            if from != to {
                changes.push(format!("{path}: {from} -> {to}"));
            }
            emend_core::schema::set_path(&mut value, path, to);
        }
        (changes, value)
    }

    /// Whether its contrast is an off-setting (the mechanism is off once it
    /// is applied), not a move of a mechanism that is always on.
    pub fn switchable(&self, doc: &Value) -> bool {
        (self.off)(&self.contrasted(doc).1).is_some()
    }

    /// Puts the fields its contrast moves back to their values in `served`.
    pub fn restore(&self, doc: &mut Value, served: &Value) {
        for (path, _) in (self.contrast)(served) {
            if let Some(v) = get_path(served, path) {
                emend_core::schema::set_path(doc, path, v.clone());
            }
        }
    }
}
