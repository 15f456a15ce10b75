//! `emend report`: the journal as one self-contained HTML file for a
//! reviewer (built by `emend_report::report`), written atomically.

use std::path::{Path, PathBuf};

use emend_core::exit;
use serde_json::json;

use super::CmdResult;
use super::common;

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// Output file (replaced atomically).
    #[arg(long, default_value = "report.html")]
    pub out: PathBuf,
    /// Print what was written as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &ReportArgs, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    common::check_output_dir("--out", &args.out)?;
    let log = common::reader(&project)?;
    let texts = emend_report::texts::question_texts(&project);
    let data = emend_report::report::gather(&log, &texts).map_err(common::store_failure)?;
    drop(log);
    let html = emend_report::report::render(&data);
    common::write_output("--out", &args.out, html.as_bytes())?;
    if args.json {
        common::print_json(&json!({
            "out": args.out.display().to_string(),
            "bytes": html.len(),
            "rounds": data.rounds,
            "versions": data.versions.len(),
            "journal_head": data.head_seq,
        }));
    } else {
        println!(
            "wrote {} ({} bytes): {} rounds, {} versions, journal up to event {}",
            args.out.display(),
            html.len(),
            data.rounds,
            data.versions.len(),
            data.head_seq
        );
    }
    Ok(exit::OK)
}
