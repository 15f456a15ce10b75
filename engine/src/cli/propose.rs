//! `emend propose`: a person's change with a falsifiable prediction, tested
//! like an evolve candidate (the loop's `Evolution::propose`); this module
//! parses the arguments and prints what became of it.

use std::path::Path;

use emend_core::candidate::Resolution;
use emend_core::events::CandidateRecord;
use emend_core::exit;
use emend_loop::evolve::{Progress, Proposal, ProposalOutcome, Setup};
use serde_json::json;

use super::{CmdResult, Failure};
use super::{common, evolve, term};

/// The change and its prediction (shared by `propose` and `escalations resolve --propose`).
#[derive(Debug, Clone, clap::Args)]
pub struct ChangeArgs {
    /// A field set on the served strategy, PATH=VALUE (repeatable; VALUE is read as JSON, else as a string).
    #[arg(long = "field", value_name = "PATH=VALUE", required = true)]
    pub fields: Vec<String>,
    /// The predicted per-category movement on the confirm part, e.g. "temporal +3pp, single-hop >= 0"
    /// (items: CATEGORY +Npp, CATEGORY -Npp, CATEGORY >= 0, CATEGORY >= -Npp).
    #[arg(long, value_name = "PREDICTION", required = true)]
    pub predict: String,
    /// Serve the change when every other rule passes though its prediction failed (journaled as such).
    #[arg(long)]
    pub accept_unpredicted: bool,
}

#[derive(Debug, clap::Args)]
pub struct ProposeArgs {
    #[command(flatten)]
    pub change: ChangeArgs,
    /// Print JSON on stdout (the candidate record, its prediction verdict and whether it was served).
    #[arg(long)]
    pub json: bool,
    /// No progress lines on stderr.
    #[arg(long)]
    pub quiet: bool,
}

impl ChangeArgs {
    /// The proposal, or a one-line bad-input error (a malformed field or prediction).
    pub fn proposal(&self) -> Result<Proposal, Failure> {
        let bad = |m: String| Failure::bad_input(anyhow::anyhow!(m));
        let fields = self.fields.iter().map(|f| emend_loop::evolve::parse_field(f)).collect::<Result<Vec<_>, _>>();
        Proposal::new(fields.map_err(bad)?, &self.predict, self.accept_unpredicted).map_err(bad)
    }
}

pub fn run(args: &ProposeArgs, project_dir: Option<&Path>) -> CmdResult {
    let proposal = args.change.proposal()?;
    let project = common::project(project_dir)?;
    let outcome = test(&project, &proposal, args.quiet)?;
    print(&outcome, args.json)
}

/// Tests `proposal` in `project` (the journal's writer lock held meanwhile).
pub fn test(
    project: &emend_core::config::Project,
    proposal: &Proposal,
    quiet: bool,
) -> Result<ProposalOutcome, Failure> {
    let schema = common::schema(project)?;
    let backend = common::backend(project, &schema)?;
    let mut log = evolve::open_initialized(project, &schema)?;
    evolve::catch_stops(project)?;
    // A rollback's frozen fields stay locked for a person's change too (the schema gate stops it).
    let setup = Setup::new(&log, &schema, backend).map_err(common::served_failure)?;
    let live = term::Live::start("observing the served strategy", !quiet);
    let mut progress = |p: Progress| {
        if !quiet {
            let (style, line, status) = evolve::render(&p);
            live.println(style, &line);
            live.status(status);
        }
    };
    let outcome =
        setup.evolution(project, &mut log).propose(proposal, &mut progress).map_err(common::evolve_failure)?;
    live.finish();
    Ok(outcome)
}

/// Whether the record's change was served (or made pending, in manual approval).
fn served_version(record: &CandidateRecord) -> Option<u64> {
    (record.outcome == Resolution::Accepted).then_some(record.accepted_version).flatten()
}

/// Prints what became of the proposal. Exit 0 when it was served (or is
/// pending approval), 1 when it was tested and not served (a gate, the
/// critic, the probe, the confirm test or its prediction stopped it; the
/// record is journaled), 5 when its evaluation errored.
pub fn print(outcome: &ProposalOutcome, as_json: bool) -> CmdResult {
    let Some(record) = &outcome.record else {
        return Err(Failure::failed(anyhow::anyhow!(
            "the proposal was not tested: the run stopped ({}) before its round",
            outcome.summary.stopped.as_str()
        )));
    };
    let version = served_version(record);
    if as_json {
        common::print_json(&json!({
            "candidate": record.id,
            "outcome": record.outcome,
            "rejected_by": record.rejected_by,
            "reason": record.reason,
            "delta": record.delta,
            "prediction": record.prediction,
            "accepted_version": version,
            "served_version": outcome.summary.served_version,
            "served": version.is_some_and(|v| v == outcome.summary.served_version),
        }));
    } else {
        let mut text = format!("{}: {}\n", record.id, emend_core::sanitize::escape_controls(&record.reason));
        if let Some(p) = &record.prediction {
            for v in &p.verdicts {
                text.push_str(&format!("  {}\n", v.line()));
            }
        }
        text.push_str(&format!("served: v{}\n", outcome.summary.served_version));
        term::out(&text);
    }
    if version.is_none() {
        let by = record.rejected_by.map_or_else(|| "errored".to_string(), |b| b.to_string());
        eprintln!("not served: stopped by {by} (journaled as {})", record.id);
    }
    Ok(match (record.outcome, version) {
        (_, Some(_)) => exit::OK,
        (Resolution::Errored, _) => exit::ERRORED,
        _ => exit::FAILED,
    })
}
