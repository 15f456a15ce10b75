//! `emend report` (being written).

use std::path::{Path, PathBuf};

use super::{CmdResult, Failure};

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// Output file.
    #[arg(long, default_value = "report.html")]
    pub out: PathBuf,
}

pub fn run(_args: &ReportArgs, _project_dir: Option<&Path>) -> CmdResult {
    Err(Failure::failed(anyhow::anyhow!("emend report is not built yet")))
}
