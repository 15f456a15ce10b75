//! `emend diagnose`: Layer A's label of every failure of the served strategy,
//! and with `--compare FROM TO` how the labels moved from one version to
//! another (seed 002's root-cause shift), each version evaluated on the whole
//! task set (from the evaluation cache when it has them).

use std::collections::BTreeMap;
use std::path::Path;

use emend_core::exit;
use emend_core::layer_a::{self, Shift};
use emend_core::served;
use emend_core::store::Store;
use serde_json::{Value, json};

use super::common;
use super::{CmdResult, Failure};

#[derive(Debug, clap::Args)]
pub struct DiagnoseArgs {
    /// Compare two versions instead: each label's count under FROM and TO, and what became
    /// of each failure (fixed, new, persisting, lost at another stage).
    #[arg(long, num_args = 2, value_names = ["FROM", "TO"])]
    pub compare: Option<Vec<String>>,
    /// Also label every failure in seed 002's order (whole question: ingestion, then retrieval,
    /// then one class for generation or lossy ingestion) and print how the two labellings meet.
    #[arg(long, conflicts_with = "compare")]
    pub seed_order: bool,
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// A label the configured judge rules out, and why: under the built-in
/// harness's evidence judge an answer is correct exactly when every resolved
/// evidence turn reached the context, which is what `generation_error`
/// (every evidence turn in the context, the answer wrong) would need.
fn cannot_occur(config: &emend_core::config::ProjectConfig) -> Option<(&'static str, &'static str)> {
    let builtin = config.harness.kind == emend_core::config::HarnessKind::Builtin;
    (builtin && config.harness.judge == emend_core::config::JudgeKind::Evidence).then_some((
        "generation_error",
        "under harness.judge: evidence an answer is correct exactly when every resolved evidence turn reached the \
         context, so no failure has all its evidence in the context (its split is empty too)",
    ))
}

/// The per-question results of version `v` on the whole task set.
fn results_of(
    project: &emend_core::config::Project,
    schema: &emend_core::schema::StrategySchema,
    backend: &dyn emend_eval::backend::Backend,
    v: u64,
) -> Result<Vec<emend_core::events::LabeledOutcome>, Failure> {
    let log = common::reader(project)?;
    let store = Store::new(&log);
    let info = store.version(v).map_err(common::store_failure)?;
    let info = info.ok_or_else(|| Failure::bad_input(anyhow::anyhow!("--compare v{v}: no such version")))?;
    let doc = store.document(&info.hash).map_err(common::store_failure)?;
    let doc = doc.ok_or_else(|| Failure::failed(anyhow::anyhow!("v{v}: the journal holds no document")))?;
    let artifact = served::artifact_of(schema, &info.hash, doc).map_err(common::served_failure)?;
    let eval = backend.evaluate(&artifact, None).map_err(Failure::failed)?;
    Ok(emend_core::records::question_results(&eval))
}

/// The source-only / full-coverage split of the generation errors, with the
/// ones no split could be made for (no gold answer, or no coverage in the trace).
fn generation_split(d: &emend_core::layer_a::Diagnosis) -> Value {
    let source_only = d.splits.get(emend_core::layer_a::SOURCE_ONLY).copied().unwrap_or(0);
    let full_coverage = d.splits.get(emend_core::layer_a::FULL_COVERAGE).copied().unwrap_or(0);
    let total = d.count(emend_core::layer_a::Label::GenerationError);
    json!({
        "source_only": source_only,
        "full_coverage": full_coverage,
        "unsplit": total.saturating_sub(source_only + full_coverage),
    })
}

/// The failures' labels in emend's order against seed 002's
/// ([`layer_a::order_table`]), as rows `emend label`, `seed label`, `count`.
fn order_rows(outcomes: &[emend_core::outcome::BackendOutcome]) -> Vec<(String, String, usize)> {
    let rank = |l: &str| emend_core::layer_a::Label::ALL.iter().position(|x| x.as_str() == l).unwrap_or(usize::MAX);
    let mut rows: Vec<_> = layer_a::order_table(outcomes).into_iter().map(|((e, s), n)| (e, s, n)).collect();
    rows.sort_by(|a, b| (rank(&a.0), &a.1).cmp(&(rank(&b.0), &b.1)));
    rows
}

fn print_order(rows: &[(String, String, usize)]) {
    let agree: usize = rows.iter().filter(|(e, s, _)| layer_a::same_stage(e, s)).map(|r| r.2).sum();
    let total: usize = rows.iter().map(|r| r.2).sum();
    println!("\nseed 002's order (whole question: ingestion, retrieval, then generation or lossy ingestion):");
    println!("{:<20} {:<30} {:>6}", "emend label", "seed order label", "count");
    for (e, s, n) in rows {
        println!("{e:<20} {s:<30} {n:>6}");
    }
    println!("the same stage for {agree} of {total} failures (generation_error is the seed's generation class)");
}

pub fn diagnose(json_out: bool, seed_order: bool, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let schema = common::schema(&project)?;
    let backend = common::backend(&project, &schema)?;
    let artifact = super::inspect::served_artifact(&project, &schema)?;
    let eval = backend.evaluate(&artifact, None).map_err(Failure::failed)?;
    let d = emend_core::layer_a::diagnose(&emend_core::records::question_results(&eval), 3);
    let texts: BTreeMap<&str, &emend_core::outcome::BackendOutcome> =
        eval.outcomes.iter().map(|o| (o.id.as_str(), o)).collect();
    if json_out {
        let examples: BTreeMap<&String, Vec<Value>> = d
            .examples
            .iter()
            .map(|(l, ids)| {
                (l, ids.iter().map(|id| {
                    let o = texts[id.as_str()];
                    json!({"id": id, "category": o.category, "question": o.question, "gold_answer": o.gold_answer, "evidence": o.evidence})
                }).collect())
            })
            .collect();
        common::print_json(&json!({
            "strategy_hash": artifact.hash,
            "version": artifact.version,
            "n": d.n,
            "accuracy": eval.accuracy(),
            "failures": d.failures,
            "counts": d.counts,
            "by_category": d.by_category,
            "splits": generation_split(&d),
            "cannot_occur": cannot_occur(&project.config).map(|(l, why)| json!({"label": l, "why": why})),
            "examples": examples,
            "seed_order": seed_order.then(|| order_rows(&eval.outcomes).into_iter()
                .map(|(e, s, n)| json!({"emend": e, "seed": s, "count": n})).collect::<Vec<_>>()),
        }));
        return Ok(exit::OK);
    }
    println!(
        "strategy {}{:.12}: accuracy {:.4} ({} of {}), {} failures",
        artifact.version.map_or(String::new(), |v| format!("v{v} ")),
        artifact.hash,
        eval.accuracy(),
        eval.correct(),
        eval.n(),
        d.failures
    );
    let cats: Vec<&String> = d.by_category.keys().collect();
    print!("{:<20} {:>6}", "label", "total");
    for c in &cats {
        print!(" {:>12}", c);
    }
    println!();
    for label in emend_core::layer_a::Label::ALL {
        let total = d.count(label);
        if total == 0 {
            continue;
        }
        print!("{:<20} {:>6}", label.as_str(), total);
        for c in &cats {
            print!(" {:>12}", d.by_category[*c].get(label.as_str()).copied().unwrap_or(0));
        }
        println!();
    }
    let split = generation_split(&d);
    println!(
        "generation_error split: source_only {}, full_coverage {}, unsplit {}",
        split["source_only"], split["full_coverage"], split["unsplit"]
    );
    if let Some((label, why)) = cannot_occur(&project.config) {
        println!("{label} cannot occur here: {why}");
    }
    if seed_order {
        print_order(&order_rows(&eval.outcomes));
    }
    for (label, ids) in &d.examples {
        println!("\n{label}, e.g.:");
        for id in ids {
            let o = texts[id.as_str()];
            println!(
                "  {id} [{}] {}  (gold: {}; evidence {})",
                o.category,
                o.question.as_deref().unwrap_or("?"),
                o.gold_answer.as_ref().map_or("-".to_string(), |g| g.as_str().map_or(g.to_string(), str::to_string)),
                o.evidence.as_ref().map_or("-".to_string(), |e| e.join(", "))
            );
        }
    }
    Ok(exit::OK)
}

pub fn compare(specs: &[String], json_out: bool, project_dir: Option<&Path>) -> CmdResult {
    let (from, to) = (super::serve::version_arg(&specs[0])?, super::serve::version_arg(&specs[1])?);
    let project = common::project(project_dir)?;
    let schema = common::schema(&project)?;
    let backend = common::backend(&project, &schema)?;
    let (a, b) = (results_of(&project, &schema, &*backend, from)?, results_of(&project, &schema, &*backend, to)?);
    let s = layer_a::shift(&a, &b);
    if json_out {
        let labels: Vec<_> = s
            .labels
            .iter()
            .map(|(l, f, t)| json!({"label": l.as_str(), "from": f, "to": t, "change": *t as i64 - *f as i64}))
            .collect();
        common::print_json(&json!({
            "from": from, "to": to, "questions": s.questions, "labels": labels,
            "fixed": s.fixed, "new": s.new, "persist": s.persist, "moved": s.moved, "moves": s.moves,
        }));
    } else {
        print!("{}", render(from, to, &s));
    }
    Ok(exit::OK)
}

fn render(from: u64, to: u64, s: &Shift) -> String {
    let mut out = format!("Layer A labels, v{from} -> v{to} on {} questions:\n", s.questions);
    out.push_str(&format!("{:<20} {:>6} {:>6} {:>7}\n", "label", format!("v{from}"), format!("v{to}"), "change"));
    for (l, f, t) in &s.labels {
        out.push_str(&format!("{:<20} {f:>6} {t:>6} {:>+7}\n", l.as_str(), *t as i64 - *f as i64));
    }
    out.push_str(&format!(
        "fixed {}, new failures {}, same stage {}, another stage {}\n",
        s.fixed, s.new, s.persist, s.moved
    ));
    for (m, n) in &s.moves {
        out.push_str(&format!("  {m}: {n}\n"));
    }
    out
}
