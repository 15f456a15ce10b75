//! `emend audit`: the mechanism-fidelity audit of the served strategy on the
//! project's task set (`emend_loop::audit`): per mechanism, its trace counts
//! (eligible, executed, produced, selected, included), its mechanistic
//! outcome (`contributing`, `unexercised`, `defective`, `never_isolated`) and
//! its quality attribution (`contributing`, `harmful`, `inconclusive`,
//! `not_tested`; the contrasts' p-values Holm-adjusted across mechanisms),
//! with its evidence. `--buildup`: the cumulative one-at-a-time buildup from
//! every switchable mechanism off back to the served strategy.

use std::path::Path;

use clap::Args;
use serde_json::json;

use emend_core::exit;
use emend_loop::audit::{Buildup, MechanismAudit};

use super::{CmdResult, Failure, common, inspect, term};

#[derive(Args, Debug)]
pub struct AuditArgs {
    /// Print JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// The cumulative buildup instead: every switchable mechanism off, then put back one at a time in pipeline order.
    #[arg(long)]
    pub buildup: bool,
}

pub fn run(args: &AuditArgs, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let schema = common::schema(&project)?;
    let backend = common::backend(&project, &schema)?;
    let served = inspect::served_artifact(&project, &schema)?;
    let head = format!("strategy {}{:.12}", served.version.map_or(String::new(), |v| format!("v{v} ")), served.hash);
    if args.buildup {
        let live = term::Live::start("buildup (one evaluation per step)", !args.json);
        let b = emend_loop::audit::buildup(&schema, backend.as_ref(), &served, None).map_err(Failure::failed)?;
        drop(live);
        if args.json {
            common::print_json(&json!({"strategy_hash": served.hash, "version": served.version, "buildup": b}));
        } else {
            print_buildup(&head, &b);
        }
        return Ok(exit::OK);
    }
    let harness = emend_loop::evolve::harness_facts(&project.config.harness);
    let live = term::Live::start("auditing mechanisms (one contrast evaluation each)", !args.json);
    let audits =
        emend_loop::audit::audit(&schema, backend.as_ref(), &served, None, &harness).map_err(Failure::failed)?;
    drop(live);
    if args.json {
        common::print_json(&json!({
            "strategy_hash": served.hash,
            "version": served.version,
            "correction": "holm",
            "alpha": emend_loop::audit::ALPHA,
            "mechanisms": audits,
        }));
        return Ok(exit::OK);
    }
    print_audit(&head, &audits);
    Ok(exit::OK)
}

fn sci(x: Option<f64>) -> String {
    x.map_or("-".to_string(), |v| format!("{v:.2e}"))
}

fn print_audit(head: &str, audits: &[MechanismAudit]) {
    println!("{head}: {} mechanisms", audits.len());
    let rows = audits
        .iter()
        .map(|a| {
            vec![
                a.mechanism.clone(),
                a.mechanistic.as_str().to_string(),
                a.quality.as_str().to_string(),
                a.trace.counts(),
                sci(a.p_value),
                sci(a.adjusted_p),
                a.evidence.clone(),
            ]
        })
        .collect();
    print!("{}", term::table(&["mechanism", "mechanistic", "quality", "trace", "p", "Holm p", "evidence"], rows, &[]));
    let unit = audits.iter().find_map(|a| a.contrast.as_ref()).map_or("questions", |c| c.unit.plural());
    let outcomes = if unit == "probes" { "observations" } else { "questions" };
    println!(
        "trace: {outcomes} eligible/executed/produced/selected/included of {}; mechanistic: from the trace alone; \
         quality: two-sided exact McNemar on {unit}, Holm-adjusted across the {} mechanistically contributing \
         mechanisms (alpha {})",
        audits.first().map_or(0, |a| a.trace.questions),
        audits.iter().filter(|a| a.adjusted_p.is_some()).count(),
        emend_loop::audit::ALPHA
    );
}

fn print_buildup(head: &str, b: &Buildup) {
    let unit = b.unit.plural();
    println!("{head}: buildup of {} mechanisms on {} {unit}", b.steps.len().saturating_sub(1), b.pairs);
    let list = |v: &[String]| if v.is_empty() { "none".to_string() } else { v.join(", ") };
    println!("base (no off-setting, on in every step): {}", list(&b.base));
    println!("off in the served strategy (off in every step): {}", list(&b.off));
    let pct = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{:.2}%", v * 100.0));
    let rows = b
        .steps
        .iter()
        .map(|s| {
            let delta = s.delta.map_or("-".to_string(), |d| format!("{:+.2} pp", d * 100.0));
            let versus = s.versus.filter(|&k| k + 1 != s.step).map_or(String::new(), |k| format!(" vs step {k}"));
            let counts = match (s.gained, s.lost) {
                (Some(g), Some(l)) => format!("+{g}/-{l}"),
                _ => "-".to_string(),
            };
            vec![
                s.step.to_string(),
                s.mechanism.clone().unwrap_or_else(|| "(base)".into()),
                s.illegal.as_ref().map_or_else(|| pct(s.accuracy), |why| format!("illegal: {why}")),
                format!("{delta}{versus}"),
                counts,
                sci(s.p_value),
                s.mean_context_tokens.map_or("-".to_string(), |t| format!("{t:.1}")),
                s.changes.join(", "),
            ]
        })
        .collect();
    print!("{}", term::table(&["step", "added", "accuracy", "delta", "+/-", "p", "tokens", "fields"], rows, &[]));
    println!(
        "accuracy over {unit}{}; delta vs the previous legal step; +/-: {unit} right only with / without the \
         mechanism; p two-sided exact McNemar on {unit}; tokens: mean context tokens per {}; the last step is the \
         served strategy ({:.2}%)",
        if unit == "probes" { " (each probe's last observation)" } else { "" },
        if unit == "probes" { "observation" } else { "question" },
        b.served_accuracy * 100.0
    );
}
