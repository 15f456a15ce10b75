//! `emend audit`: the mechanism-fidelity audit of the served strategy on the
//! project's task set (`engine::audit`): per mechanism, `contributing`,
//! `unexercised`, `defective` or `inconclusive`, with its evidence.

use std::path::Path;

use serde_json::json;

use engine::exit;

use super::{CmdResult, Failure, common, inspect, term};

pub fn run(args: &inspect::JsonArg, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let schema = common::schema(&project)?;
    let backend = common::backend(&project, &schema)?;
    let served = inspect::served_artifact(&project, &schema)?;
    let live = term::Live::start("auditing mechanisms (one contrast evaluation each)", !args.json);
    let audits = engine::audit::audit(&schema, backend.as_ref(), &served, None).map_err(Failure::failed)?;
    drop(live);
    if args.json {
        common::print_json(&json!({
            "strategy_hash": served.hash,
            "version": served.version,
            "mechanisms": audits,
        }));
        return Ok(exit::OK);
    }
    println!(
        "strategy {}{:.12}: {} mechanisms",
        served.version.map_or(String::new(), |v| format!("v{v} ")),
        served.hash,
        audits.len()
    );
    let rows =
        audits.iter().map(|a| vec![a.mechanism.clone(), a.status.as_str().to_string(), a.evidence.clone()]).collect();
    print!("{}", term::table(&["mechanism", "status", "evidence"], rows, &[]));
    Ok(exit::OK)
}
