//! `emend diagnose --compare FROM TO`: how the Layer A labels moved from one
//! version to another (seed 002's root-cause shift), each version evaluated
//! on the whole task set (from the evaluation cache when it has them).

use std::path::Path;

use engine::exit;
use engine::layer_a::{self, Shift};
use engine::served;
use engine::store::Store;
use serde_json::json;

use super::common;
use super::{CmdResult, Failure};

#[derive(Debug, clap::Args)]
pub struct DiagnoseArgs {
    /// Compare two versions instead: each label's count under FROM and TO, and what became
    /// of each failure (fixed, new, persisting, lost at another stage).
    #[arg(long, num_args = 2, value_names = ["FROM", "TO"])]
    pub compare: Option<Vec<String>>,
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

fn version_arg(spec: &str) -> Result<u64, Failure> {
    spec.strip_prefix('v')
        .unwrap_or(spec)
        .parse::<u64>()
        .map_err(|_| Failure::bad_input(anyhow::anyhow!("--compare {spec}: expected a version like v3")))
}

/// The per-question results of version `v` on the whole task set.
fn results_of(
    project: &engine::config::Project,
    schema: &engine::schema::StrategySchema,
    backend: &dyn engine::backend::Backend,
    v: u64,
) -> Result<Vec<engine::events::QuestionResult>, Failure> {
    let log = common::reader(project)?;
    let store = Store::new(&log);
    let info = store.version(v).map_err(common::store_failure)?;
    let info = info.ok_or_else(|| Failure::bad_input(anyhow::anyhow!("--compare v{v}: no such version")))?;
    let doc = store.document(&info.hash).map_err(common::store_failure)?;
    let doc = doc.ok_or_else(|| Failure::failed(anyhow::anyhow!("v{v}: the journal holds no document")))?;
    let artifact = served::artifact_of(schema, &info.hash, doc).map_err(common::served_failure)?;
    let eval = backend.evaluate(&artifact, None).map_err(Failure::failed)?;
    Ok(engine::records::question_results(&eval))
}

pub fn compare(specs: &[String], json_out: bool, project_dir: Option<&Path>) -> CmdResult {
    let (from, to) = (version_arg(&specs[0])?, version_arg(&specs[1])?);
    let project = common::project(project_dir)?;
    let schema = common::schema(&project)?;
    let backend = common::backend(&project, &schema)?;
    let (a, b) = (results_of(&project, &schema, &*backend, from)?, results_of(&project, &schema, &*backend, to)?);
    let s = layer_a::shift(&a, &b);
    if json_out {
        let labels: Vec<_> = s
            .labels
            .iter()
            .map(|(l, f, t)| json!({"label": l.as_str(), "from": f, "to": t, "change": *t as i64 - *f as i64}))
            .collect();
        common::print_json(&json!({
            "from": from, "to": to, "questions": s.questions, "labels": labels,
            "fixed": s.fixed, "new": s.new, "persist": s.persist, "moved": s.moved, "moves": s.moves,
        }));
    } else {
        print!("{}", render(from, to, &s));
    }
    Ok(exit::OK)
}

fn render(from: u64, to: u64, s: &Shift) -> String {
    let mut out = format!("Layer A labels, v{from} -> v{to} on {} questions:\n", s.questions);
    out.push_str(&format!("{:<20} {:>6} {:>6} {:>7}\n", "label", format!("v{from}"), format!("v{to}"), "change"));
    for (l, f, t) in &s.labels {
        out.push_str(&format!("{:<20} {f:>6} {t:>6} {:>+7}\n", l.as_str(), *t as i64 - *f as i64));
    }
    out.push_str(&format!(
        "fixed {}, new failures {}, same stage {}, another stage {}\n",
        s.fixed, s.new, s.persist, s.moved
    ));
    for (m, n) in &s.moves {
        out.push_str(&format!("  {m}: {n}\n"));
    }
    out
}
