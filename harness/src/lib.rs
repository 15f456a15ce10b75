//! emend's harness: the locked evaluation framework. It evaluates one strategy
//! on one task set and says, for every question, where the gold evidence went.
//! It knows nothing of evolution.

pub mod strategy;

pub use strategy::Strategy;
