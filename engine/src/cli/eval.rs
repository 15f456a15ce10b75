//! `emend eval` (being written).

use super::{CmdResult, Failure};

#[derive(Debug, clap::Args)]
pub struct EvalArgs {}

pub fn run(_args: &EvalArgs) -> CmdResult {
    Err(Failure::failed(anyhow::anyhow!("emend eval is not built yet")))
}
