//! The `emend` binary's library face: every layer's modules under one name,
//! so the binary, its tests and its benchmarks say `engine::config` or
//! `engine::evolve` wherever a module lives.
//!
//! The layers, each its own crate (ARCHITECTURE.md):
//! `emend-model` (contract, decisions, journal model) <- `emend-eval`
//! (backends, model roles) <- `emend-loop` (the round); `emend-report`
//! (views, HTML report) reads `emend-model`; this crate (the CLI) sits on
//! top and is the only one that prints.

pub use emend_eval::{backend, builtin, command, llm};
pub use emend_loop::{audit, evolve, hooks, init, jump, operate, progress, propose, screen, step_search};
pub use emend_model::{
    artifact, candidate, config, confirm, cost, decide, digest, events, exit, gates, hypothesis, layer_a, outcome,
    percent, planner, records, sanitize, schema, search, served, setup, stats, steps, stop, store, usage,
};
pub use emend_report::{report, texts, views};
