//! emend's read side: what a reviewer sees of the journal.
//!
//! - [`views`]: the data behind `log`, `show`, `status`, `pending` and
//!   `trials`, as plain structures the binary prints.
//! - [`report`]: the HTML report (maud templates, SVG charts).
//! - [`texts`]: question texts and strategy diffs, shared by both.
//!
//! The rule: this crate depends on `emend-core` (and the crates below it)
//! only, and it only reads the journal.

pub mod report;
pub mod texts;
pub mod views;
