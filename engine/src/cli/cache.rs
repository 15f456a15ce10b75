//! `emend cache clear`: empties the project's caches (`.emend/cache/`: the
//! stage, dataset and embedding caches and the model reply cache). Nothing in
//! them is needed: every entry is recomputed (or re-requested) when missing.

use std::path::Path;

use serde_json::json;

use emend_core::exit;

use super::{CmdResult, Failure, common};

#[derive(clap::Args, Debug)]
pub struct CacheArgs {
    #[command(subcommand)]
    action: CacheAction,
}

#[derive(clap::Subcommand, Debug)]
enum CacheAction {
    /// Delete everything under .emend/cache/ and print the bytes freed.
    Clear {
        /// Print a JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(args: &CacheArgs, project_dir: Option<&Path>) -> CmdResult {
    let CacheAction::Clear { json } = &args.action;
    let project = common::project(project_dir)?;
    let dir = project.cache_dir();
    let (files, bytes) = tally(&dir);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .map_err(|e| Failure::failed(anyhow::anyhow!("{}: cannot remove the cache: {e}", dir.display())))?;
    }
    if *json {
        common::print_json(&json!({"dir": dir.display().to_string(), "files": files, "bytes": bytes}));
    } else {
        println!("removed {files} cache files ({:.1} MB) under {}", bytes as f64 / 1e6, dir.display());
    }
    Ok(exit::OK)
}

/// Files and bytes under `dir` (0, 0 when it does not exist).
pub fn tally(dir: &Path) -> (u64, u64) {
    let Ok(rd) = std::fs::read_dir(dir) else { return (0, 0) };
    let mut out = (0, 0);
    for e in rd.flatten() {
        match e.metadata() {
            Ok(m) if m.is_dir() => {
                let (f, b) = tally(&e.path());
                out = (out.0 + f, out.1 + b);
            }
            Ok(m) => out = (out.0 + 1, out.1 + m.len()),
            Err(_) => {}
        }
    }
    out
}
