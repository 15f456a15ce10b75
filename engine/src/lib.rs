//! emend's engine: the strategy contract (schema, identity), paired statistics,
//! gates, Layer A diagnosis, planning and the evolution loop.
//!
//! Everything here that decides (statistics, gates, Layer A, UCB1, planning) is
//! pure: thresholds, seeds and clocks come in as arguments, verdicts carry
//! their reasons. I/O lives at the edges (the CLI in `main.rs`, the journal).

pub mod artifact;
pub mod audit;
pub mod backend;
pub mod builtin;
pub mod candidate;
pub mod command;
pub mod config;
pub mod confirm;
pub mod decide;
pub mod events;
pub mod evolve;
pub mod exit;
pub mod gates;
pub mod hooks;
pub mod hypothesis;
pub mod jump;
pub mod layer_a;
pub mod llm;
pub mod outcome;
pub mod planner;
pub mod progress;
pub mod propose;
pub mod records;
pub mod report;
pub mod sanitize;
pub mod schema;
pub mod screen;
pub mod search;
pub mod searcher;
pub mod served;
pub mod setup;
pub mod stop;
pub mod store;
pub mod texts;
pub mod usage;
pub mod views;

/// The paired statistics live in their own crate (`emend-stats`), which knows
/// nothing of the engine; `engine::stats::...` paths keep working.
pub use stats;
