//! `emend compare` (being written).

use super::{CmdResult, Failure};

#[derive(Debug, clap::Args)]
pub struct CompareArgs {}

pub fn run(_args: &CompareArgs) -> CmdResult {
    Err(Failure::failed(anyhow::anyhow!("emend compare is not built yet")))
}
