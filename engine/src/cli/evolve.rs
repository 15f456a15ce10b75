//! `emend init` and `emend evolve`: create a project, run the loop.
//!
//! A project is created by `emend_loop::init::init` (checked before anything is
//! written, undone on failure); this module builds its request, prints what
//! it created and maps its errors to exit codes.

use std::path::{Path, PathBuf};

use emend_core::artifact;
use emend_core::config::{self, Project};
use emend_core::exit;
use emend_core::schema::StrategySchema;
use emend_loop::evolve::{Progress, RunOptions, Setup};
use emend_loop::init::{InitError, InitRequest, Initialized};
use serde_json::json;

use super::{CmdResult, Failure};
use super::{common, term};

#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// Directory of the new project (created if missing).
    #[arg(default_value = ".")]
    pub dir: PathBuf,
    /// The locked task set: `builtin` or a LoCoMo-format JSON file.
    #[arg(long)]
    pub tasks: String,
    /// Starting strategy (default: emend's built-in default strategy).
    #[arg(long)]
    pub strategy: Option<PathBuf>,
    /// Only these conversations (comma-separated sample ids) form the task set.
    #[arg(long, value_delimiter = ',')]
    pub conversations: Option<Vec<String>>,
    /// Evaluate with an external command instead of the built-in harness
    /// (argv after `--harness-command`, e.g. `--harness-command python3 adapter.py {strategy} {tasks} {out}`);
    /// it is run once, on the starting strategy and one question, before anything is written.
    #[arg(long, num_args = 1.., allow_hyphen_values = true)]
    pub harness_command: Option<Vec<String>>,
    /// The strategy schema of an external system.
    #[arg(long)]
    pub schema: Option<PathBuf>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

pub fn init(args: &InitArgs) -> CmdResult {
    let request = InitRequest {
        dir: args.dir.clone(),
        tasks: args.tasks.clone(),
        schema: args.schema.clone(),
        strategy: args.strategy.clone(),
        harness_command: args.harness_command.clone(),
        conversations: args.conversations.clone(),
    };
    let done = emend_loop::init::init(&request).map_err(init_failure)?;
    print_initialized(&done, args.json);
    Ok(exit::OK)
}

/// An init error's exit code: refused input 2, a failure 1, the journal's and the served file's by their class.
fn init_failure(e: InitError) -> Failure {
    match e {
        InitError::BadInput(msg) => Failure::bad_input(anyhow::anyhow!(msg)),
        InitError::Schema(e) => Failure::bad_input(e),
        InitError::Strategy(e) => Failure::bad_input(e),
        InitError::Failed(msg) => Failure::failed(anyhow::anyhow!(msg)),
        InitError::Io(e) => Failure::failed(e),
        InitError::Journal(e) => common::journal_failure(e),
        InitError::Served(e) => common::served_failure(e),
        InitError::Store(e) => common::store_failure(e),
    }
}

/// What `emend init` reports: the files it wrote and the size of the task set.
fn print_initialized(done: &Initialized, json: bool) {
    if json {
        common::print_json(&json!({
            "project": done.dir.display().to_string(),
            "config": done.config.display().to_string(),
            "strategy": done.strategy.display().to_string(),
            "journal": done.journal.display().to_string(),
            "schema": done.schema.display().to_string(),
            "config_schema": done.config_schema.display().to_string(),
            "served_version": 1,
            "served_hash": done.served_hash,
            "questions": done.questions,
        }));
        return;
    }
    println!("initialized emend project in {}", done.dir.display());
    println!("  {}  (settings, every one commented)", done.config.display());
    println!("  {}  (the schema of emend.yaml, for editors)", done.config_schema.display());
    println!("  {}  (v1, hash {:.12}, from {})", done.strategy.display(), done.served_hash, done.origin);
    println!("  {}  (journal; .emend/ ignores itself for git)", done.journal.display());
    match done.schema_rel {
        Some(_) => println!("  {}  (strategy schema, named in the served file)", done.schema.display()),
        None => println!("  {}  (a copy of the built-in strategy schema, for editors)", done.schema.display()),
    }
    println!("  task set: {} ({} questions)", done.tasks, done.questions);
    println!("next: cd {} && emend evolve", done.dir.display());
}

#[derive(Debug, clap::Args)]
pub struct EvolveArgs {
    /// Rounds to run (default: loop.rounds of emend.yaml).
    #[arg(long)]
    pub rounds: Option<u32>,
    /// Candidates per round (default: loop.candidates of emend.yaml).
    #[arg(long)]
    pub candidates: Option<usize>,
    /// Stop once this many full-evaluation equivalents are spent (an evaluation
    /// of k of the task set's n questions costs k/n; reused results cost 0).
    #[arg(long, value_parser = parse_max_evals)]
    pub max_evals: Option<f64>,
    /// Stop once this much time has passed (e.g. `90s`, `15m`, `2h`): the round
    /// in flight finishes and the summary is printed.
    #[arg(long, value_parser = emend_core::config::parse_duration)]
    pub max_time: Option<std::time::Duration>,
    /// The split changed since the journal's last round (harness.split, or
    /// the unit `auto` resolved to): start a new LORD++ sequence on it, whose
    /// confirm tests start again at W0. Without it such a run is refused (exit 2).
    #[arg(long)]
    pub new_split: bool,
    /// Print the run's summary as JSON on stdout.
    #[arg(long)]
    pub json: bool,
    /// No progress lines on stderr.
    #[arg(long, short)]
    pub quiet: bool,
}

fn parse_max_evals(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        _ => Err(format!("expected a positive number of full-evaluation equivalents, got {s:?}")),
    }
}

/// Opens the journal for writing, creating the first version when it is empty.
pub fn open_initialized(project: &Project, schema: &StrategySchema) -> Result<emend_journal::SledJournal, Failure> {
    let mut log = common::writer(project)?;
    emend_loop::init::ensure_first_version(project, schema, &mut log).map_err(init_failure)?;
    Ok(log)
}

/// Under replay, the lifecycle schedule the run evaluated with (the served
/// strategy's recency half-life says whether it ages).
fn replay_lifecycle(project: &Project, log: &emend_journal::SledJournal) -> Option<emend_harness::replay::Lifecycle> {
    let emend_harness::Protocol::Replay { every_sessions } = project.config.harness.protocol() else { return None };
    let store = emend_core::store::Store::new(log);
    let served = store.served().ok().flatten().and_then(|s| store.document(&s.hash).ok().flatten());
    let half_life = served
        .as_ref()
        .and_then(|d| d.pointer("/retrieve/recency_half_life_days").and_then(serde_json::Value::as_f64))
        .unwrap_or(0.0);
    let consolidate: emend_harness::strategy::Consolidate = served
        .as_ref()
        .and_then(|d| d.pointer("/ingest/consolidate"))
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default();
    Some(emend_harness::replay::Lifecycle::new(every_sessions, half_life, &[]).with_maintenance(&consolidate))
}

pub fn run(args: &EvolveArgs, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let schema = common::schema(&project)?;
    let backend = common::backend(&project, &schema)?;
    let opts = RunOptions {
        rounds: args.rounds.unwrap_or(project.config.loop_.rounds),
        candidates: args.candidates.unwrap_or(project.config.loop_.candidates),
        max_evals: args.max_evals,
        max_time: args.max_time,
        new_split: args.new_split,
        proposal: None,
    };
    // One limit for the flag and the setting.
    config::check_candidates("--candidates", opts.candidates).map_err(|m| Failure::bad_input(anyhow::anyhow!(m)))?;
    config::check_rounds("--rounds", opts.rounds).map_err(|m| Failure::bad_input(anyhow::anyhow!(m)))?;
    let mut log = open_initialized(&project, &schema)?;
    catch_stops(&project)?;
    let live = term::Live::start("observing the served strategy", !args.quiet);
    // A direction blocked for the same reason (a model not installed, a role
    // not configured) is reported once per run, not once per searched segment.
    let mut notices = std::collections::BTreeSet::new();
    let mut progress = |p: Progress| {
        if let Progress::HookFailed { message, .. } = &p {
            // The change stands and the exit code does not move, so a quiet run says it too.
            let line = format!("warning: {}", emend_core::sanitize::escape_controls(message));
            live.println(anstyle::Style::new(), &line);
            return;
        }
        if args.quiet {
            return;
        }
        if let Progress::Candidate { hypothesis, step: emend_loop::progress::Step::Blocked { reason }, .. } = &p
            && !notices.insert((hypothesis.clone(), reason.clone()))
        {
            return;
        }
        let (style, line, status) = render(&p);
        live.println(style, &line);
        live.status(status);
    };
    let first_seq = emend_journal::EventLog::head(&log).seq + 1;
    // A rollback's changes stay rolled back: their fields are searched as locked at the served values.
    let setup = Setup::new(&log, &schema, backend).map_err(common::served_failure)?;
    let frozen = &setup.frozen;
    if !frozen.is_empty() && !args.quiet {
        let list: Vec<String> = frozen.iter().map(|(path, v)| format!("{path} (v{v})")).collect();
        eprintln!(
            "frozen at the served values by a rollback, until `emend unquarantine vN` lifts it: {}",
            list.join(", ")
        );
    }
    let summary = setup.evolution(&project, &mut log).run(&opts, &mut progress).map_err(common::evolve_failure)?;
    live.finish();
    let stopped = summary.interrupted_round.and(emend_core::stop::requested());
    let lifecycle = replay_lifecycle(&project, &log);
    if args.json {
        let changes = served_changes(&log, first_seq)?;
        let served_file = std::path::absolute(project.strategy_path()).map_err(Failure::failed)?;
        let mut out = serde_json::Map::new();
        out.insert("format".into(), json!(SUMMARY_FORMAT));
        if let serde_json::Value::Object(fields) = serde_json::to_value(&summary).expect("summary serializes") {
            out.extend(fields);
        }
        out.insert("served_file".into(), json!(served_file.display().to_string()));
        out.insert("frozen".into(), json!(frozen));
        out.insert("changes".into(), serde_json::Value::Array(changes));
        if let Some(l) = &lifecycle {
            out.insert("lifecycle".into(), json!(l));
        }
        if let Some(cause) = stopped {
            out.insert("interrupted_by".into(), json!(cause.as_str()));
        }
        common::mark_json_printed();
        term::out(&format!(
            "{}\n",
            serde_json::to_string_pretty(&serde_json::Value::Object(out)).expect("JSON renders")
        ));
    } else {
        if let Some(l) = &lifecycle {
            term::out(&format!(
                "replay: a checkpoint every {} sessions; {}; the confirm test's unit is the probe\n",
                l.every_sessions,
                l.line()
            ));
        }
        term::out(&render_summary(&summary));
    }
    Ok(exit_code(&summary, stopped))
}

/// The run's exit code: 5 when every candidate errored, the stop's code when it was stopped, else 0;
/// each with its line on stderr.
fn exit_code(summary: &emend_loop::evolve::RunSummary, stopped: Option<emend_core::stop::Cause>) -> u8 {
    if summary.stopped == emend_loop::evolve::Stopped::Errored {
        let mut err = std::io::stderr().lock();
        term::write_or_stop(
            &mut err,
            &format!(
                "stopped: errored: every one of the run's {} candidates errored; the first: {}\n",
                summary.candidates,
                emend_core::sanitize::escape_controls(summary.first_error.as_deref().unwrap_or("?"))
            ),
        );
        return exit::ERRORED;
    }
    match stopped {
        Some(cause) => {
            let mut err = std::io::stderr().lock();
            term::write_or_stop(
                &mut err,
                &format!(
                    "stopped ({}) before round {} finished: the round is journaled as interrupted and nothing of it \
                     was applied; the next `emend evolve` runs it again\n",
                    cause.as_str(),
                    summary.interrupted_round.unwrap_or(0)
                ),
            );
            cause.exit_code()
        }
        None => exit::OK,
    }
}

/// SIGINT and SIGTERM ask the run to stop (a second one exits at once); a
/// closed output is an error the run handles, not a SIGPIPE that kills it;
/// an operator's `--preempt` request for this process is watched for.
pub(super) fn catch_stops(project: &Project) -> Result<(), Failure> {
    emend_core::stop::catch_signals()
        .map_err(|e| Failure::failed(anyhow::anyhow!("installing signal handlers: {e}")))?;
    // SAFETY: setting a signal's disposition to ignore has no memory effects.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
    emend_core::stop::watch_requests(project.journal_dir(), std::time::Duration::from_millis(100));
    Ok(())
}

/// The run summary as people read it.
fn render_summary(summary: &emend_loop::evolve::RunSummary) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    // Which rounds: none, one, or a range (an interrupted first round ran none).
    let round = |r: Option<u64>| r.map_or("?".to_string(), |r| r.to_string());
    let rounds = match summary.rounds {
        0 => "0 rounds".to_string(),
        1 => format!("1 round ({})", round(summary.last_round)),
        n => format!("{n} rounds ({}..{})", round(summary.first_round), round(summary.last_round)),
    };
    let _ = writeln!(
        out,
        "{rounds}: {} accepted, {} candidates, {} probes, {} full evaluations, {} rollbacks, {} escalations",
        summary.accepted,
        summary.candidates,
        summary.probe_evaluations,
        summary.full_evaluations,
        summary.rollbacks,
        summary.escalations
    );
    let _ = writeln!(
        out,
        "accuracy: start {:.4}, served v{} {:.4}, best-ever {} ({} ms)",
        summary.start_accuracy,
        summary.served_version,
        summary.served_accuracy,
        match (summary.best_version, summary.best_accuracy) {
            (Some(v), Some(a)) => format!("v{v} {a:.4}"),
            (Some(v), None) => format!("v{v} (not evaluated)"),
            (None, _) => "none yet (no round has run)".to_string(),
        },
        summary.elapsed_ms
    );
    if !summary.pending_versions.is_empty() {
        let names: Vec<String> = summary.pending_versions.iter().map(|v| format!("v{v}")).collect();
        let _ = writeln!(
            out,
            "pending approval: {} (see `emend pending`; serve one with `emend approve vN`)",
            names.join(", ")
        );
    }
    // The served version's cost once, as `status` and `show` print it (beside v1's and its parent's).
    let served = match &summary.served_cost {
        Some(c) => format!("served v{} {}", c.version, c.describe()),
        None => "served n/a".to_string(),
    };
    let start = summary.start_mean_tokens.map_or("n/a".to_string(), |t| format!("{t:.0}"));
    let _ = writeln!(
        out,
        "mean context tokens: start {start}, {served}; {:.2} full-evaluation equivalents used; stopped: {}",
        summary.evaluations_used,
        summary.stopped.as_str()
    );
    if !summary.rejected_by.is_empty() {
        let parts: Vec<String> = summary.rejected_by.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(out, "rejected by: {}", parts.join(", "));
    }
    if let Some(w) = summary.waiting {
        let _ = writeln!(out, "waiting for approval: v{w} (tested against the served v{})", summary.served_version);
    }
    let _ = writeln!(out, "next: {}", summary.stopped.next_run());
    out
}

/// `evolve --help`'s list of every value `stopped` takes, with what the next run does
/// (docs/how-a-round-decides.md, "Why a run stopped", says the same).
pub fn stopped_help() -> String {
    let mut out =
        String::from("Why a run stops (`stopped:` in the summary and in --json), and what the next run does:\n");
    for s in emend_loop::evolve::Stopped::ALL {
        out.push_str(&format!("  {:<12} {}\n", s.as_str(), s.next_run()));
    }
    out.push_str(
        "Exit codes: 0 for rounds, max_evals, max_time, converged, exhausted and pending; 5 for errored; 4, 130, 143 or 141 \
         for interrupted (preempted, SIGINT, SIGTERM, a closed output); 1 when the served strategy itself could not \
         be evaluated (no summary).",
    );
    out
}

/// Version of the layout of `emend evolve --json` (docs/how-a-round-decides.md, "The run summary"):
/// raised when a field is removed or changes meaning, not when one is added.
pub const SUMMARY_FORMAT: u64 = 1;

/// Every change of the served version journaled from `first_seq` on, in order:
/// the version served, the one it replaced, its parent and the fields that
/// differ from the parent, and for an accepted candidate its confirmed delta
/// and the alpha of its confirm test.
fn served_changes(log: &emend_journal::SledJournal, first_seq: u64) -> Result<Vec<serde_json::Value>, Failure> {
    use emend_core::events::Event;
    use emend_journal::EventLog;
    let store = emend_core::store::Store::new(log);
    let records = log.read_from(first_seq).map_err(common::journal_failure)?;
    let mut candidates = None;
    let mut out = Vec::new();
    for record in records.iter().filter(|r| r.kind == "served_changed") {
        let event = Event::from_record(record).map_err(|e| Failure::failed(anyhow::anyhow!("journal: {e}")))?;
        let Event::ServedChanged { from, to, cause, .. } = event else { unreachable!("filtered by kind") };
        let info = store.version(to).map_err(common::store_failure)?.ok_or_else(|| unknown(to))?;
        let document = store.document(&info.hash).map_err(common::store_failure)?.ok_or_else(|| unknown(to))?;
        let fields = match info.parent {
            Some(p) => {
                let parent = store.version(p).map_err(common::store_failure)?.ok_or_else(|| unknown(p))?;
                let before = store.document(&parent.hash).map_err(common::store_failure)?.ok_or_else(|| unknown(p))?;
                field_changes(&before, &document)
            }
            None => vec![],
        };
        if candidates.is_none() {
            candidates = Some(store.candidates().map_err(common::store_failure)?);
        }
        let accepted = candidates.as_deref().unwrap_or_default().iter().find(|c| c.accepted_version == Some(to));
        let full = accepted.and_then(|c| c.full.as_ref());
        out.push(json!({
            "status": "served",
            "version": to,
            "previous": from,
            "cause": cause,
            "hash": info.hash,
            "parent": info.parent,
            "round": info.round,
            "candidate": accepted.map(|c| c.id.clone()),
            "fields": fields,
            "delta": full.map(|f| f.delta),
            "ci": full.map(|f| [f.ci_low, f.ci_high]),
            "alpha": full.map(|f| f.alpha),
        }));
    }
    Ok(out)
}

fn unknown(version: u64) -> Failure {
    Failure::failed(anyhow::anyhow!("journal: version v{version} has no stored document"))
}

/// The leaves that differ between two strategy documents, by dotted path in
/// sorted order; a list is one leaf. Metadata (`version`, `parent`) is left out.
fn field_changes(from: &serde_json::Value, to: &serde_json::Value) -> Vec<serde_json::Value> {
    fn walk(
        path: &str,
        a: Option<&serde_json::Value>,
        b: Option<&serde_json::Value>,
        out: &mut Vec<serde_json::Value>,
    ) {
        match (a, b) {
            (Some(serde_json::Value::Object(x)), Some(serde_json::Value::Object(y))) => {
                let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                for k in keys {
                    if path.is_empty() && artifact::METADATA_KEYS.contains(&k.as_str()) {
                        continue;
                    }
                    let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                    walk(&p, x.get(k), y.get(k), out);
                }
            }
            (a, b) if a != b => out.push(json!({"path": path, "from": a, "to": b})),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk("", Some(from), Some(to), &mut out);
    out
}

/// One progress event as a line for stderr (with its style) and the live
/// line's status that follows it.
pub(super) fn render(p: &Progress) -> (anstyle::Style, String, String) {
    let plain = anstyle::Style::new();
    match p {
        Progress::Observed { round, .. } => {
            (plain, p.to_string(), format!("round {round}: screening and testing candidates"))
        }
        Progress::Candidate { round, id, .. } => {
            (plain, p.to_string(), format!("round {round}: working (last reported: {id})"))
        }
        Progress::Decided { round, .. } => {
            (term::DECISION, p.to_string(), format!("round {round} decided; observing the served strategy"))
        }
        Progress::Searched { round, .. } => (plain, p.to_string(), format!("round {round}: searching again")),
        Progress::HookFailed { round, .. } => (plain, p.to_string(), format!("round {round}: decided")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_changes_lists_changed_leaves_by_path() {
        let a = json!({"version": 1, "retrieve": {"top_k": 5, "pool": 20}, "prompt": "x", "stop": ["a"]});
        let b =
            json!({"version": 2, "retrieve": {"top_k": 8, "pool": 20}, "prompt": "x", "stop": ["a", "b"], "new": 1});
        assert_eq!(
            field_changes(&a, &b),
            vec![
                json!({"path": "new", "from": null, "to": 1}),
                json!({"path": "retrieve.top_k", "from": 5, "to": 8}),
                json!({"path": "stop", "from": ["a"], "to": ["a", "b"]}),
            ]
        );
        assert!(field_changes(&a, &a).is_empty());
    }
}
