//! `emend validate FILE...`: is each file a legal strategy (or, for a file
//! named emend.yaml, a legal project configuration)?

use std::path::PathBuf;

use engine::artifact;
use engine::exit;
use engine::schema::StrategySchema;
use serde_json::json;

use super::{CmdResult, Failure};

#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// Strategy files to check; a file named emend.yaml is checked as a project configuration.
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
        if file.file_name().is_some_and(|n| n == engine::config::CONFIG_FILE) {
            let report = check_config(file, args.json);
            all_ok &= report["ok"] == true;
            reports.push(report);
            continue;
        }
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

/// A project configuration, read by emend's own checker: every problem of
/// the file (unknown keys with a suggestion, types, ranges, consistency), each
/// at `file:line:column` and naming its key.
fn check_config(file: &std::path::Path, json: bool) -> serde_json::Value {
    let name = file.display().to_string();
    let problems = match std::fs::read_to_string(file) {
        Ok(text) => {
            let checked = engine::config::check_config(&text);
            for r in &checked.renamed {
                tracing::warn!("{}", r.warning(file));
            }
            checked.problems
        }
        Err(e) => vec![engine::config::ConfigProblem {
            path: String::new(),
            line: None,
            column: None,
            message: format!("cannot read: {e}"),
        }],
    };
    if problems.is_empty() {
        if !json {
            println!("ok configuration  {name}");
        }
        return json!({"file": name, "ok": true, "kind": "configuration", "hash": null, "problems": []});
    }
    if !json {
        for p in &problems {
            let at = match (p.line, p.column) {
                (Some(l), Some(c)) => format!("{name}:{l}:{c}"),
                _ => name.clone(),
            };
            let key = if p.path.is_empty() { String::new() } else { format!("{}: ", p.path) };
            println!("{at}: {key}{}", p.message);
        }
    }
    json!({"file": name, "ok": false, "kind": "configuration", "hash": null, "problems": problems})
}
