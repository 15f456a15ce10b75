//! `emend validate FILE...`: is each file a legal strategy?

use std::path::PathBuf;

use engine::artifact;
use engine::exit;
use engine::schema::StrategySchema;
use serde_json::json;

use super::{CmdResult, Failure};

#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// Strategy files to check.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Check against this schema instead of the built-in one.
    #[arg(long)]
    pub schema: Option<PathBuf>,
    /// Print one JSON object instead of lines.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &ValidateArgs) -> CmdResult {
    let schema = match &args.schema {
        Some(path) => StrategySchema::from_path(path).map_err(Failure::bad_input)?,
        None => StrategySchema::builtin(),
    };
    let mut all_ok = true;
    let mut reports = Vec::new();
    for file in &args.files {
        match artifact::load_file(file, &schema) {
            Ok(a) => {
                if !args.json {
                    println!("ok {}  {}", a.hash, file.display());
                }
                reports.push(json!({"file": file.display().to_string(), "ok": true, "hash": a.hash, "problems": []}));
            }
            Err(e) => {
                all_ok = false;
                if !args.json {
                    for line in e.lines() {
                        println!("{line}");
                    }
                }
                reports.push(
                    json!({"file": file.display().to_string(), "ok": false, "hash": null, "problems": e.problems()}),
                );
            }
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&json!({"ok": all_ok, "files": reports})).expect("JSON renders"));
    }
    Ok(if all_ok { exit::OK } else { exit::BAD_INPUT })
}
