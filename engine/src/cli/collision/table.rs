//! The tables of `emend collision`, plain (for terminals) or Markdown (as
//! docs/collision.md shows them, byte for byte): one run's cells in full;
//! several seeds' cells summarized (mean delta, seeds CI-positive and
//! CI-negative); or one column per value of the list axis. Each table ends
//! with a line that states the settings every cell shares.

use serde_json::{Value, json};

use emend_core::percent::{percent, points};

use crate::cli::term;
use emend_eval::collision::{Axis, Grid, HashRow, Plan, RESAMPLES, fusion_label};

/// A table as text: `term::table` or a Markdown table (`right`: right-aligned columns).
fn layout(header: &[&str], rows: Vec<Vec<String>>, right: &[bool], markdown: bool) -> String {
    if !markdown {
        return term::table(header, rows, right);
    }
    let line = |cells: Vec<String>| format!("| {} |\n", cells.join(" | ")).replace("|  |", "| |");
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    let rule: Vec<&str> =
        (0..header.len()).map(|i| if right.get(i).copied().unwrap_or(false) { "--:" } else { "---" }).collect();
    out.push_str(&format!("|{}|\n", rule.join("|")));
    for r in rows {
        out.push_str(&line(r));
    }
    out
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

fn s(v: &Value) -> String {
    v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string())
}

/// The tag, class, K and n of a cell.
fn key(c: &Value) -> Vec<String> {
    vec![s(&c["tag"]), s(&c["class"]), c["k"].to_string(), c["n"].to_string()]
}

fn mean(xs: impl Iterator<Item = f64>) -> f64 {
    let v: Vec<f64> = xs.collect();
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// One run: every cell with its rates, delta and interval.
fn single(cells: &[Value], markdown: bool) -> String {
    let rows = cells
        .iter()
        .map(|r| {
            let mut row = key(r);
            row.extend([
                percent(f(&r["chance"]), 1),
                percent(f(&r["bm25_hit1"]), 1),
                percent(f(&r["hit1"]), 1),
                points(f(&r["delta"]), 1),
                format!("[{}, {}]", points(f(&r["ci_low"]), 1), points(f(&r["ci_high"]), 1)),
                s(&r["mark"]),
            ]);
            row
        })
        .collect();
    layout(
        &["tag", "class", "k", "n", "1/k", "bm25 hit@1", "hit@1", "delta pp", "95% CI pp", ""],
        rows,
        &[false, false, true, true, true, true, true, true, false, false],
        markdown,
    )
}

/// The seeds whose interval lies above 0 and below 0.
fn counts(runs: &[&Value]) -> (usize, usize) {
    (runs.iter().filter(|c| c["mark"] == "*").count(), runs.iter().filter(|c| c["mark"] == "-").count())
}

/// A cell over several seeds: `+11.6 4/5 *`, `-3.3 2/5 -`, `+0.4 1/5 * 1/5 -`, `+0.2 0/5`.
fn seeds_cell(runs: &[&Value]) -> String {
    let n = runs.len();
    let (pos, neg) = counts(runs);
    let mut out = points(mean(runs.iter().map(|c| f(&c["delta"]))), 1);
    if pos > 0 {
        out.push_str(&format!(" {pos}/{n} *"));
    }
    if neg > 0 {
        out.push_str(&format!(" {neg}/{n} -"));
    }
    if pos + neg == 0 {
        out.push_str(&format!(" 0/{n}"));
    }
    out
}

/// Several seeds, one column: mean rates and delta, the range of the delta, the counts.
fn seed_summary(per_seed: &[Vec<Value>], markdown: bool) -> String {
    let n = per_seed.len();
    let rows = (0..per_seed[0].len())
        .map(|i| {
            let runs: Vec<&Value> = per_seed.iter().map(|cells| &cells[i]).collect();
            let deltas: Vec<f64> = runs.iter().map(|c| f(&c["delta"])).collect();
            let (lo, hi) = deltas.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &d| (a.min(d), b.max(d)));
            let (pos, neg) = counts(&runs);
            let mut row = key(runs[0]);
            row.extend([
                percent(mean(runs.iter().map(|c| f(&c["bm25_hit1"]))), 1),
                percent(mean(runs.iter().map(|c| f(&c["hit1"]))), 1),
                points(mean(deltas.iter().copied()), 1),
                format!("[{}, {}]", points(lo, 1), points(hi, 1)),
                format!("{pos}/{n}"),
                format!("{neg}/{n}"),
            ]);
            row
        })
        .collect();
    layout(
        &["tag", "class", "k", "n", "bm25 hit@1", "hit@1", "delta pp", "delta range pp", "CI > 0", "CI < 0"],
        rows,
        &[false, false, true, true, true, true, true, false, true, true],
        markdown,
    )
}

/// One column per axis value: `+6.2 n.s.` (one seed) or [`seeds_cell`].
fn columns(plan: &Plan, grid: &Grid, markdown: bool) -> String {
    let first = &grid.cells[0][0];
    let rows = (0..first.len())
        .map(|i| {
            let mut row = key(&first[i]);
            for per_seed in &grid.cells {
                let runs: Vec<&Value> = per_seed.iter().map(|cells| &cells[i]).collect();
                row.push(if runs.len() == 1 {
                    format!("{} {}", points(f(&runs[0]["delta"]), 1), s(&runs[0]["mark"]))
                } else {
                    seeds_cell(&runs)
                });
            }
            row
        })
        .collect();
    let mut header = vec!["tag", "class", "k", "n"];
    header.extend(plan.columns.iter().map(|c| c.label.as_str()));
    let right: Vec<bool> = (0..header.len()).map(|i| i >= 2).collect();
    layout(&header, rows, &right, markdown)
}

/// The settings every cell shares (the axis's say `per column`).
fn footer(plan: &Plan) -> String {
    let c = &plan.columns[0];
    let per = |a: Axis| plan.axis == Some(a);
    let column = "per column".to_string();
    let channel = match plan.base.index.dense_kind {
        emend_harness::strategy::DenseKind::Trigram => format!(
            "trigram ({}, bucket idf {})",
            if per(Axis::DenseDim) { column.clone() } else { format!("{}-d", c.dense_dim.unwrap_or(0)) },
            if per(Axis::HashIdf) {
                column.clone()
            } else if c.hash_idf {
                "on".into()
            } else {
                "off".into()
            }
        ),
        k => serde_json::to_value(k).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default(),
    };
    let pick = |a: Axis, v: String| if per(a) { column.clone() } else { v };
    let fusion = pick(Axis::Fusion, fusion_label(c.fusion, &plan.base).into());
    let vocab = pick(Axis::Vocab, c.vocab.name().into());
    let paraphrase = pick(Axis::Paraphrase, format!("{} template(s) per fact", c.paraphrase));
    let seeds = if plan.seeds.len() == 1 {
        format!("seed {} (tasks, tie-break and bootstrap)", plan.seeds[0])
    } else {
        format!("seeds {} (each: tasks, tie-break and bootstrap)", plan.seeds_label())
    };
    let marks = if plan.seeds.len() == 1 {
        "* 95% CI above 0, n.s. CI contains 0, - CI below 0".to_string()
    } else {
        format!(
            "cells: mean delta pp over the {} seeds; P/{n} * the seeds whose 95% CI lies above 0, P/{n} - below 0",
            plan.seeds.len(),
            n = plan.seeds.len()
        )
    };
    format!(
        "dense channel: {channel}; fusion: {fusion}; vocabulary: {vocab}; paraphrase: {paraphrase}; {seeds}; \
         paired percentile bootstrap, {RESAMPLES} resamples; {marks}\n"
    )
}

/// The cells' table and its footer line.
pub fn render(plan: &Plan, grid: &Grid, markdown: bool) -> String {
    let table = if plan.columns.len() > 1 {
        columns(plan, grid, markdown)
    } else if plan.seeds.len() > 1 {
        seed_summary(&grid.cells[0], markdown)
    } else {
        single(&grid.cells[0][0], markdown)
    };
    let gap = if markdown { "\n" } else { "" };
    format!("{table}{gap}{}", footer(plan))
}

/// The first column of the hash statistics: the dimension, or the axis value.
fn hash_label(plan: &Plan, r: &HashRow) -> String {
    match plan.axis {
        None | Some(Axis::DenseDim) | Some(Axis::Fusion) | Some(Axis::HashIdf) => format!("{}-d", r.stats.dim),
        Some(_) => plan.columns[r.column].label.clone(),
    }
}

/// The hash statistics table and its footer line.
pub fn render_hash(plan: &Plan, rows: &[HashRow], markdown: bool) -> String {
    let two = |x: f64| format!("{x:.2}");
    let body = rows
        .iter()
        .map(|r| {
            let (ge, gs) = r.stats.gold_means();
            let (de, ds) = r.stats.distractor_means();
            vec![
                hash_label(plan, r),
                r.tag.clone(),
                r.stats.tasks.to_string(),
                percent(r.stats.shared_rate(), 1),
                two(ge),
                two(gs),
                two(de),
                two(ds),
            ]
        })
        .collect();
    let first = match plan.axis {
        Some(Axis::Vocab) => "vocabulary",
        Some(Axis::Paraphrase) => "paraphrase",
        _ => "dim",
    };
    let table = layout(
        &[
            first,
            "tag",
            "tasks",
            "pairs sharing a bucket",
            "gold exact",
            "gold spurious",
            "other exact",
            "other spurious",
        ],
        body,
        &[false, false, true, true, true, true, true, true],
        markdown,
    );
    let gap = if markdown { "\n" } else { "" };
    let seeds = if plan.seeds.len() == 1 { "seed" } else { "seeds" };
    format!(
        "{table}{gap}hash statistics of the trigram channel over the tasks with K >= 2 ({seeds} {}): pairs sharing a \
         bucket: memory pairs of a task whose own trigrams share a bucket; exact / spurious: per memory (gold, other: \
         the distractors), the mean number of its discriminating trigrams (not in every memory of its task) that the \
         query has / that the query lacks but whose bucket holds one of the query's trigrams (a collision); signs \
         ignored\n",
        plan.seeds_label()
    )
}

pub fn hash_json(plan: &Plan, rows: &[HashRow]) -> Value {
    rows.iter()
        .map(|r| {
            let (ge, gs) = r.stats.gold_means();
            let (de, ds) = r.stats.distractor_means();
            json!({
                "column": plan.columns[r.column].label,
                "dim": r.stats.dim,
                "tag": r.tag,
                "tasks": r.stats.tasks,
                "pairs": r.stats.pairs,
                "shared_pairs": r.stats.shared_pairs,
                "shared_rate": r.stats.shared_rate(),
                "gold_exact": ge,
                "gold_spurious": gs,
                "distractor_exact": de,
                "distractor_spurious": ds,
            })
        })
        .collect()
}
