//! emend's model: what a strategy is, what the engine decides about it, and
//! what the journal records.
//!
//! - The contract: the strategy schema and its artifacts ([`schema`],
//!   [`artifact`]), the project's configuration ([`config`]), a question's
//!   outcome ([`outcome`]), hypotheses ([`hypothesis`]), exit codes
//!   ([`exit`]), what an evaluation is set up from ([`setup`]), the stop
//!   request ([`stop`]).
//! - The pure decisions: the search space and samplers ([`search`]), moves
//!   of at most one step ([`steps`]), Layer A
//!   ([`layer_a`]), planning ([`planner`]), gates ([`gates`]), candidates
//!   ([`candidate`]), what a version costs ([`cost`]), the accept/reject decision ([`decide`]), the confirm
//!   part and its tests ([`confirm`]).
//! - The journal model: events and their projections ([`events`]), records
//!   ([`records`]), reading state back ([`store`]), the served file and
//!   pointer ([`served`]).
//!
//! Everything here that decides is pure: thresholds, seeds and clocks come
//! in as arguments, verdicts carry their reasons.
//!
//! The rule: this crate depends on the statistics, journal and harness crates
//! only, never on another emend crate, and it prints nothing.

pub mod artifact;
pub mod candidate;
pub mod config;
pub mod confirm;
pub mod cost;
pub mod critic;
pub mod decide;
pub mod digest;
pub mod events;
pub mod exit;
pub mod gates;
pub mod hypothesis;
pub mod layer_a;
pub mod outcome;
pub mod percent;
pub mod planner;
pub mod prediction;
pub mod records;
pub mod sanitize;
pub mod schema;
pub mod search;
pub mod served;
pub mod setup;
pub mod steps;
pub mod stop;
pub mod store;
pub mod usage;
