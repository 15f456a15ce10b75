//! The `emend` binary's tests, one test binary: each module runs the binary
//! the way a user would (in a project made by `emend init`) and checks what it
//! printed, its exit code and the journal it left. The tests of the layers
//! below the CLI live in their own crates (model, eval, loop, report).

mod audit_docs;
mod cli_conventions;
mod collision_docs;
mod command_project;
mod compare;
mod config_behaviour;
mod config_schema;
mod cost;
mod eval;
mod evolve_cli;
mod figures;
mod golden;
mod hostile_text;
mod inert;
#[cfg(feature = "llm")]
mod llm_eval;
#[cfg(feature = "llm")]
mod llm_evolve;
#[cfg(feature = "llm")]
mod llm_logs;
#[cfg(feature = "llm")]
mod llm_support;
mod messages;
mod operator;
mod operator_matrix;
mod plain_output;
mod propose_cli;
mod protocols;
mod replay;
mod review;
mod robustness;
mod serving;
mod shards;
mod small_disk;
mod strict_json;
mod support;
mod tamper_matrix;
mod trials;
mod validate;
