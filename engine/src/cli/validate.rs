//! `emend validate FILE...`: is each file a legal strategy (or, for a file
//! named emend.yaml, a legal project configuration)? Inside a project the
//! strategy schema is the project's (`harness.schema`), as for every other
//! command; `--schema` wins over it, `--no-project` falls back to the built-in one.

use std::path::{Path, PathBuf};

use emend_core::artifact;
use emend_core::exit;
use emend_core::schema::StrategySchema;
use serde_json::json;

use super::{CmdResult, Failure, common};

#[derive(Debug, clap::Args)]
pub struct ValidateArgs {
    /// Strategy files to check; a file named emend.yaml is checked as a project configuration.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Check against this schema instead of the project's (`harness.schema`) or the built-in one.
    #[arg(long)]
    pub schema: Option<PathBuf>,
    /// Ignore the project (--project, or an emend.yaml here or above): check against the built-in schema.
    #[arg(long)]
    pub no_project: bool,
    /// Print one JSON object instead of lines.
    #[arg(long)]
    pub json: bool,
}

/// The schema strategy files are checked against, and its file (None for the built-in one).
struct UsedSchema {
    schema: StrategySchema,
    path: Option<PathBuf>,
}

impl UsedSchema {
    fn builtin() -> Self {
        UsedSchema { schema: StrategySchema::builtin(), path: None }
    }

    fn from_path(path: &Path) -> Result<Self, Failure> {
        let schema = StrategySchema::from_path(path).map_err(Failure::bad_input)?;
        Ok(UsedSchema { schema, path: Some(path.to_path_buf()) })
    }

    /// As the JSON output names it: `builtin` or the file.
    fn name(&self) -> String {
        self.path.as_ref().map_or_else(|| "builtin".to_string(), |p| p.display().to_string())
    }
}

fn is_config(file: &Path) -> bool {
    file.file_name().is_some_and(|n| n == emend_core::config::CONFIG_FILE)
}

/// `--schema`; else, unless `--no-project`, the project's schema; else the built-in one.
/// None when every file is an emend.yaml: a configuration is checked without
/// any strategy schema, and without loading the project it may belong to.
fn used_schema(args: &ValidateArgs, project_dir: Option<&Path>) -> Result<Option<UsedSchema>, Failure> {
    if let Some(path) = &args.schema {
        return UsedSchema::from_path(path).map(Some);
    }
    if args.files.iter().all(|f| is_config(f)) {
        return Ok(None);
    }
    let project = common::optional_project(project_dir, args.no_project)?;
    match project.as_ref().and_then(|p| p.config.harness.schema.as_deref().map(|s| p.resolve(s))) {
        Some(path) => UsedSchema::from_path(&path).map(Some),
        None => Ok(Some(UsedSchema::builtin())),
    }
}

pub fn run(args: &ValidateArgs, project_dir: Option<&Path>) -> CmdResult {
    let used = used_schema(args, project_dir)?;
    let mut all_ok = true;
    let mut reports = Vec::new();
    for file in &args.files {
        if is_config(file) {
            let report = check_config(file, args.json);
            all_ok &= report["ok"] == true;
            reports.push(report);
            continue;
        }
        let used = used.as_ref().expect("a strategy file among the files, so a schema (used_schema)");
        match artifact::load_file(file, &used.schema) {
            Ok(a) => {
                if !args.json {
                    match &used.path {
                        None => println!("ok {}  {}", a.hash, file.display()),
                        Some(p) => println!("ok {}  {}  (schema {})", a.hash, file.display(), p.display()),
                    }
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
        let schema = used.map(|u| u.name());
        let doc = json!({"ok": all_ok, "schema": schema, "files": reports});
        println!("{}", serde_json::to_string_pretty(&doc).expect("JSON renders"));
    }
    Ok(if all_ok { exit::OK } else { exit::BAD_INPUT })
}

/// A project configuration, read by emend's own checker: every problem of
/// the file (unknown keys with a suggestion, types, ranges, consistency), each
/// at `file:line:column` and naming its key.
fn check_config(file: &Path, json: bool) -> serde_json::Value {
    let name = file.display().to_string();
    let problems = match std::fs::read_to_string(file) {
        Ok(text) => emend_core::config::check_config(&text).problems,
        Err(e) => vec![emend_core::config::ConfigProblem {
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
