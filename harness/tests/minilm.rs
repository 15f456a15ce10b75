//! The MiniLM embedder against reference vectors (scripts/minilm-reference.py,
//! an independent numpy forward pass over the same weights): within 1e-4
//! cosine distance. Needs the model (`EMEND_MINILM_DIR`); skips, saying why,
//! when it is absent, unless `EMEND_MINILM_REQUIRED=1` (CI), where a missing
//! model fails.

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use emend_harness::HarnessSettings;
use emend_harness::cache::DiskCache;
use emend_harness::minilm::MiniLm;
use serde_json::json;

use common::{builtin_evaluator, default_strategy, with};

fn model() -> Option<MiniLm> {
    let dir = std::env::var_os(emend_harness::minilm::ENV_DIR).filter(|v| !v.is_empty()).map(PathBuf::from);
    let required = std::env::var("EMEND_MINILM_REQUIRED").is_ok_and(|v| v == "1");
    let Some(dir) = dir else {
        assert!(!required, "EMEND_MINILM_REQUIRED=1 but EMEND_MINILM_DIR is not set");
        eprintln!("skipped: EMEND_MINILM_DIR is not set (install: scripts/install-minilm.sh DIR)");
        return None;
    };
    match MiniLm::load(&dir) {
        Ok(m) => Some(m),
        Err(e) if !required && !dir.exists() => {
            eprintln!("skipped: {e}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

fn reference() -> Vec<(String, usize, Vec<f32>)> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/minilm_reference.json");
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    doc["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let v = s["embedding"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
            (s["text"].as_str().unwrap().to_string(), s["tokens"].as_u64().unwrap() as usize, v)
        })
        .collect()
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a.iter().zip(b).map(|(x, y)| f64::from(*x) * f64::from(*y)).sum();
    let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

#[test]
fn embeddings_match_the_reference_vectors() {
    let Some(m) = model() else { return };
    let refs = reference();
    assert!(refs.len() >= 5);
    let texts: Vec<&str> = refs.iter().map(|r| r.0.as_str()).collect();
    let got = m.embed(&texts).unwrap();
    let mut worst = 0f64;
    for ((text, tokens, want), v) in refs.iter().zip(&got) {
        assert_eq!(m.token_ids(text).unwrap().len(), *tokens, "{text:?}: word pieces");
        assert_eq!(v.len(), 384);
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-5, "{text:?}: norm {norm}");
        let d = 1.0 - cosine(v, want);
        assert!(d < 1e-4, "{text:?}: cosine distance {d}");
        worst = worst.max(d);
    }
    eprintln!("largest cosine distance to the reference: {worst:.2e}");
}

#[test]
fn a_text_embeds_the_same_alone_or_in_a_batch() {
    let Some(m) = model() else { return };
    let refs = reference();
    let texts: Vec<&str> = refs.iter().map(|r| r.0.as_str()).collect();
    let together = m.embed(&texts).unwrap();
    // Same-length texts share a batch: a batch of one gives the same bits.
    let twice: Vec<&str> = vec![texts[1], "Another sentence of some length here.", texts[1]];
    let batch = m.embed(&twice).unwrap();
    for (i, t) in texts.iter().enumerate() {
        let alone = m.embed(&[t]).unwrap();
        assert_eq!(alone[0], together[i], "{t:?}");
    }
    assert_eq!(batch[0], together[1]);
    assert_eq!(batch[2], together[1]);
}

#[test]
fn similar_sentences_are_closer_than_unrelated_ones() {
    let Some(m) = model() else { return };
    let v =
        m.embed(&["I adopted a puppy last month.", "We got a new dog recently.", "The stock market fell."]).unwrap();
    assert!(cosine(&v[0], &v[1]) > cosine(&v[0], &v[2]) + 0.2);
}

#[test]
fn a_missing_or_malformed_model_names_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    let e = MiniLm::load(&tmp.path().join("absent")).unwrap_err().to_string();
    assert!(e.contains("absent") && e.contains("not a directory"), "{e}");
    let e = MiniLm::load(tmp.path()).unwrap_err().to_string();
    assert!(e.contains("model.safetensors") && e.contains("cannot read"), "{e}");
    for f in emend_harness::minilm::FILES {
        let p = tmp.path().join(f);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "{}").unwrap();
    }
    let e = MiniLm::load(tmp.path()).unwrap_err().to_string();
    assert!(e.contains("config.json") && e.contains("not a BERT config"), "{e}");
}

#[test]
fn a_minilm_strategy_without_the_model_is_refused_naming_the_setting() {
    let ev = builtin_evaluator(HarnessSettings::default());
    let s = with(&default_strategy(), "index.dense_kind", json!("minilm"));
    let e = ev.evaluate(&s).unwrap_err().to_string();
    assert!(e.contains("index.dense_kind: minilm") && e.contains("EMEND_MINILM_DIR"), "{e}");
}

#[test]
fn the_pipeline_runs_on_minilm_and_the_cache_spares_the_model() {
    let Some(_) = model() else { return };
    let dir = PathBuf::from(std::env::var_os(emend_harness::minilm::ENV_DIR).unwrap());
    let tmp = tempfile::tempdir().unwrap();
    let open = || {
        let m = MiniLm::load(&dir).unwrap();
        let name = format!("minilm-{}", &m.hash()[..16]);
        Arc::new(m.with_cache(DiskCache::open_named(tmp.path(), &name, 1 << 30).unwrap()))
    };
    let settings = HarnessSettings { conversations: Some(vec!["syn-1".into()]), ..HarnessSettings::default() };
    let s = with(&default_strategy(), "index.dense_kind", json!("minilm"));
    let first = open();
    let ev = builtin_evaluator(settings.clone()).with_minilm(first.clone());
    let a = ev.evaluate(&s).unwrap();
    assert!(first.computed() > 0);
    let trigram = ev.evaluate(&default_strategy()).unwrap();
    assert_ne!(
        a.outcomes.iter().map(|o| &o.retrieved).collect::<Vec<_>>(),
        trigram.outcomes.iter().map(|o| &o.retrieved).collect::<Vec<_>>(),
        "the dense channel changed retrieval"
    );
    // A second process: every embedding comes from disk, outcomes are identical.
    let second = open();
    let b = builtin_evaluator(settings.clone()).with_minilm(second.clone()).evaluate(&s).unwrap();
    assert_eq!(second.computed(), 0);
    assert_eq!(a.outcomes, b.outcomes);
    // A new windowing of the same turns embeds only the texts not seen before.
    let overlapped = with(&s, "ingest.window_overlap", json!(1));
    let third = open();
    let c = builtin_evaluator(settings).with_minilm(third.clone()).evaluate(&overlapped).unwrap();
    let items = c.memory.items as u64;
    assert!(third.computed() > 0 && third.computed() < items, "{} of {items}", third.computed());
}
