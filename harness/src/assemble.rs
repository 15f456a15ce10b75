//! Stage 4, assemble: retrieved items are packed into the context budget.
//!
//! Reads `assemble.*` and the harness's budget ceiling. The budget is
//! `min(token_budget, token_budget_ceiling, harness ceiling)` in estimated
//! tokens ([`crate::text::estimate_tokens`]). Items are taken in rank order;
//! one that does not fit is skipped and later, smaller ones may still fit;
//! with `dedup`, an item whose turns are all in the context already is
//! skipped. Then, while the budget allows, neighbouring turns (up to
//! `backfill_window` on each side of each item, nearest first, same session)
//! are added, but only turns the memory still holds: a turn ingest dropped
//! stays lost. Context tokens are the sum of the estimates of the pieces.

use std::collections::BTreeSet;

use crate::dataset::Sample;
use crate::ingest::Memory;
use crate::retrieve::Retrieval;
use crate::strategy::{Assemble, ContextOrder};
use crate::text::estimate_tokens;

/// One item in the context, with the neighbouring turns backfilled around it.
#[derive(Debug, Clone, PartialEq)]
pub struct Block {
    /// Index into the memory's items.
    pub item: u32,
    /// Backfilled turn ordinals before and after the item, ascending.
    pub before: Vec<u32>,
    pub after: Vec<u32>,
}

/// The assembled context of one question.
#[derive(Debug, Clone, PartialEq)]
pub struct Context {
    /// In context order.
    pub blocks: Vec<Block>,
    /// Every turn the context covers (items and backfill).
    pub turns: BTreeSet<u32>,
    pub tokens: u32,
}

/// A line of context: one turn, or an item's date stamp or extracted fact.
#[derive(Debug, Clone, PartialEq)]
pub struct ContextLine {
    /// Position of the line's block in the context.
    pub block: u32,
    pub speaker: Option<String>,
    pub text: String,
}

impl Context {
    /// The context's lines in order, speakers split off.
    pub fn lines(&self, sample: &Sample, memory: &Memory) -> Vec<ContextLine> {
        let mut out = Vec::new();
        for (k, b) in self.blocks.iter().enumerate() {
            let block = k as u32;
            let turn_line = |o: u32| {
                let t = sample.turn(o);
                ContextLine { block, speaker: Some(t.speaker.clone()), text: t.content() }
            };
            out.extend(b.before.iter().map(|&o| turn_line(o)));
            let item = &memory.items[b.item as usize];
            for line in item.text.lines() {
                match line.split_once(": ") {
                    Some((sp, rest)) if !sp.is_empty() && !sp.starts_with('[') && sp.len() <= 40 => {
                        out.push(ContextLine { block, speaker: Some(sp.to_string()), text: rest.to_string() })
                    }
                    _ => out.push(ContextLine { block, speaker: None, text: line.to_string() }),
                }
            }
            out.extend(b.after.iter().map(|&o| turn_line(o)));
        }
        out
    }
}

/// The context as an answerer model sees it: `Speaker: text` lines, blocks
/// separated by a blank line.
pub fn render(lines: &[ContextLine]) -> String {
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        if i > 0 {
            out.push_str(if l.block != lines[i - 1].block { "\n\n" } else { "\n" });
        }
        if let Some(sp) = &l.speaker {
            out.push_str(sp);
            out.push_str(": ");
        }
        out.push_str(&l.text);
    }
    out
}

/// Runs the assemble stage for one question.
pub fn assemble(sample: &Sample, memory: &Memory, retrieval: &Retrieval, spec: &Assemble, ceiling: u32) -> Context {
    let budget = spec.token_budget.min(spec.token_budget_ceiling).min(ceiling);
    let mut used = 0u32;
    let mut turns = BTreeSet::new();
    let mut blocks = Vec::new();
    for hit in &retrieval.hits {
        let item = &memory.items[hit.item as usize];
        if spec.dedup && item.turns.iter().all(|t| turns.contains(t)) {
            continue;
        }
        if used + item.tokens > budget {
            continue;
        }
        used += item.tokens;
        turns.extend(item.turns.iter().copied());
        blocks.push(Block { item: hit.item, before: Vec::new(), after: Vec::new() });
    }

    for d in 1..=spec.backfill_window {
        for b in &mut blocks {
            let item = &memory.items[b.item as usize];
            let (Some(&first), Some(&last)) = (item.turns.first(), item.turns.last()) else { continue };
            let candidates = [first.checked_sub(d), last.checked_add(d)];
            for (side, cand) in candidates.into_iter().enumerate() {
                let Some(o) = cand else { continue };
                if o as usize >= sample.turn_count()
                    || sample.session_of(o) != item.session
                    || !memory.holds(o)
                    || turns.contains(&o)
                {
                    continue;
                }
                let cost = estimate_tokens(&sample.turn(o).line());
                if used + cost > budget {
                    continue;
                }
                used += cost;
                turns.insert(o);
                if side == 0 {
                    b.before.insert(0, o);
                } else {
                    b.after.push(o);
                }
            }
        }
    }

    if spec.order == ContextOrder::Chronological {
        blocks.sort_by_key(|b| {
            let item = &memory.items[b.item as usize];
            (item.turns.first().copied().unwrap_or(0), item.number)
        });
    }
    Context { blocks, turns, tokens: used }
}
