//! `emend audit`: the mechanism-fidelity audit of the served strategy on the
//! project's task set (`engine::audit`): per mechanism, its trace counts
//! (eligible, executed, produced, selected, included) and `contributing`,
//! `harmful`, `inconclusive`, `unexercised` or `defective`, with its
//! evidence; the contrasts' p-values Holm-adjusted across mechanisms.

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
            "correction": "holm",
            "alpha": engine::audit::ALPHA,
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
    let p = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.2e}"));
    let rows = audits
        .iter()
        .map(|a| {
            vec![
                a.mechanism.clone(),
                a.status.as_str().to_string(),
                a.trace.counts(),
                p(a.p_value),
                p(a.adjusted_p),
                a.evidence.clone(),
            ]
        })
        .collect();
    print!("{}", term::table(&["mechanism", "status", "trace", "p", "Holm p", "evidence"], rows, &[]));
    println!(
        "trace: questions eligible/executed/produced/selected/included of {}; contrast p two-sided exact McNemar, \
         Holm-adjusted across the {} mechanisms whose output reached a context (alpha {})",
        audits.first().map_or(0, |a| a.trace.questions),
        audits.iter().filter(|a| a.adjusted_p.is_some()).count(),
        engine::audit::ALPHA
    );
    Ok(exit::OK)
}
