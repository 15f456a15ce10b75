//! `emend compare BASE.jsonl CAND.jsonl`: the paired comparison of two
//! evaluation runs and the confirm test's verdict, from outcome files.
//!
//! Each line of an outcome file is a JSON object with `id` (string),
//! `category` (string, or an integer taken as its decimal string) and
//! `correct` (boolean); `conversation` (string) is needed with
//! `--unit conversation`; `context_tokens` (number) feeds the cost rule when
//! every line of both files has it. Other fields are ignored; blank lines are
//! skipped. Bad input exits 2 and names the file and line; a rejected
//! candidate is a result, not an error, and exits 0.
//!
//! The verdict is the gate's: the confirm test's one-sided exact McNemar
//! (binomial) test of "better" at `--alpha` (`confirm_better`, the same
//! p-value the gate records for the same counts), with the per-category and
//! cost rules. The two-sided McNemar test and the bootstrap interval are
//! shown for information and decide nothing.
//!
//! `--unit trajectory` is for the outcomes of a longitudinal replay (`emend
//! eval --protocol replay --outcomes`): ids are `<question>@<checkpoint>`, and
//! the bootstrap draws every observation of a question together. Runs whose
//! observation ids differ are refused, as runs whose question ids differ are.
//! On such outcomes (whatever `--unit`) the gate test takes the probe as its
//! unit, as the gate does under replay (`emend_stats::better_test_by_probe`).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow};
use emend_core::exit;
use emend_core::percent::{percent, points};
use emend_stats::{
    self, BootstrapConfig, BootstrapUnit, CategoryDelta, CompareConfig, Comparison, Cost, Outcome, Thresholds,
};
use serde::Serialize;
use serde_json::Value;

use super::{CmdResult, Failure, term};

#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// Outcomes of the baseline (served) strategy, JSONL.
    base: PathBuf,
    /// Outcomes of the candidate strategy on the same questions, JSONL.
    cand: PathBuf,
    /// Significance level of the gate's one-sided exact test (for a confirm test the
    /// gate recorded, the alpha it was tested at).
    #[arg(long, default_value_t = 0.05)]
    alpha: f64,
    /// Largest allowed accuracy drop in any category, a fraction (0.02 = 2pp).
    /// (`--epsilon`, the papers' epsilon_c, still works.)
    #[arg(long, default_value_t = 0.02, alias = "epsilon")]
    category_drop_max: f64,
    /// Largest allowed growth of mean context tokens, a fraction (0.10 = +10%); needs `context_tokens` on every line.
    #[arg(long)]
    cost_bound: Option<f64>,
    /// Bootstrap resampling unit: single questions, whole conversations when questions share one, or whole
    /// probe trajectories (all observations of a question under replay, ids `<question>@<checkpoint>`).
    #[arg(long, value_enum, default_value_t = Unit::Question)]
    unit: Unit,
    /// Bootstrap resamples.
    #[arg(long, default_value_t = 10_000)]
    resamples: u32,
    /// Bootstrap seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Confidence level of the bootstrap interval.
    #[arg(long, default_value_t = 0.95)]
    level: f64,
    /// Print one JSON object instead of the report.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Unit {
    Question,
    Conversation,
    Trajectory,
}

impl From<Unit> for BootstrapUnit {
    fn from(unit: Unit) -> Self {
        match unit {
            Unit::Question => BootstrapUnit::Question,
            Unit::Conversation => BootstrapUnit::Conversation,
            Unit::Trajectory => BootstrapUnit::Trajectory,
        }
    }
}

pub fn run(args: &CompareArgs) -> CmdResult {
    let config = resolve(args).map_err(Failure::bad_input)?;
    let needs_conversation = config.bootstrap.unit == BootstrapUnit::Conversation;
    let base = read_run(&args.base, needs_conversation).map_err(Failure::bad_input)?;
    let cand = read_run(&args.cand, needs_conversation).map_err(Failure::bad_input)?;
    let cost = cost(&base, &cand, args.cost_bound.is_some()).map_err(Failure::bad_input)?;
    let comparison = emend_stats::compare(&base.outcomes, &cand.outcomes, &config, cost.as_ref())
        .with_context(|| format!("comparing {} (baseline) with {} (candidate)", base.name, cand.name))
        .map_err(Failure::bad_input)?;
    let gate = GateVerdict::of(&comparison, args.alpha);
    if args.json {
        let report = Report::new(&base.name, &cand.name, &comparison, &gate, &config.thresholds, cost.as_ref());
        let json = serde_json::to_string_pretty(&report).map_err(|e| Failure::failed(anyhow!(e)))?;
        super::common::print_json_text(&json);
    } else {
        print!("{}", human(&base.name, &cand.name, &comparison, &gate, &config.thresholds, cost.as_ref()));
    }
    Ok(exit::OK)
}

/// Checks the flags that clap cannot, and turns them into the library's configuration.
fn resolve(args: &CompareArgs) -> anyhow::Result<CompareConfig> {
    let thresholds =
        Thresholds { alpha: args.alpha, category_drop_max: args.category_drop_max, cost_bound: args.cost_bound };
    if !(args.alpha > 0.0 && args.alpha < 1.0) {
        return Err(anyhow!("--alpha must be strictly between 0 and 1, got {}", args.alpha));
    }
    if !(args.category_drop_max >= 0.0 && args.category_drop_max.is_finite()) {
        return Err(anyhow!("--category-drop-max must be a non-negative fraction, got {}", args.category_drop_max));
    }
    if let Some(b) = args.cost_bound
        && !(b >= 0.0 && b.is_finite())
    {
        return Err(anyhow!("--cost-bound must be a non-negative fraction, got {b}"));
    }
    if args.resamples == 0 {
        return Err(anyhow!("--resamples must be at least 1"));
    }
    if !(args.level > 0.0 && args.level < 1.0) {
        return Err(anyhow!("--level must be strictly between 0 and 1, got {}", args.level));
    }
    thresholds.validate()?;
    let bootstrap =
        BootstrapConfig { unit: args.unit.into(), resamples: args.resamples, seed: args.seed, level: args.level };
    Ok(CompareConfig { thresholds, bootstrap })
}

/// One outcome file, read.
struct Run {
    /// The path as given, for messages.
    name: String,
    outcomes: Vec<Outcome>,
    /// Mean `context_tokens`, if every line has it; otherwise the first line without it.
    tokens: Result<f64, usize>,
}

fn read_run(path: &Path, needs_conversation: bool) -> anyhow::Result<Run> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).with_context(|| format!("{name}: cannot read"))?;
    let mut outcomes = Vec::new();
    let mut first_line: HashMap<String, usize> = HashMap::new();
    let mut tokens_sum = 0.0;
    let mut line_without_tokens = None;
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        if line.trim().is_empty() {
            continue;
        }
        let record = parse_line(line).map_err(|e| anyhow!("{name}:{number}: {e}"))?;
        if needs_conversation && record.outcome.conversation.is_none() {
            return Err(anyhow!("{name}:{number}: field \"conversation\" is required with --unit conversation"));
        }
        if let Some(first) = first_line.insert(record.outcome.id.clone(), number) {
            return Err(anyhow!(
                "{name}:{number}: duplicate id {id:?} (first on line {first})",
                id = record.outcome.id
            ));
        }
        match record.context_tokens {
            Some(t) => tokens_sum += t,
            None => {
                line_without_tokens.get_or_insert(number);
            }
        }
        outcomes.push(record.outcome);
    }
    if outcomes.is_empty() {
        return Err(anyhow!("{name}: no outcome records (the file is empty)"));
    }
    let tokens = match line_without_tokens {
        None => Ok(tokens_sum / outcomes.len() as f64),
        Some(line) => Err(line),
    };
    Ok(Run { name, outcomes, tokens })
}

struct Record {
    outcome: Outcome,
    context_tokens: Option<f64>,
}

fn parse_line(line: &str) -> anyhow::Result<Record> {
    let value: Value = emend_harness::strict_json::from_str(line).map_err(|e| anyhow!("not valid JSON: {e}"))?;
    let Value::Object(fields) = value else {
        return Err(anyhow!("expected a JSON object, got {}", shown(&value)));
    };
    let field = |key: &str| fields.get(key).filter(|v| !v.is_null());
    let required = |key: &str| field(key).ok_or_else(|| anyhow!("missing field {key:?}"));
    let id = match required("id")? {
        Value::String(s) => s.clone(),
        other => return Err(expected("id", "a string", other)),
    };
    let category = match required("category")? {
        Value::String(s) => s.clone(),
        Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
        other => return Err(expected("category", "a string or an integer", other)),
    };
    let correct = match required("correct")? {
        Value::Bool(b) => *b,
        other => return Err(expected("correct", "a boolean", other)),
    };
    let conversation = match field("conversation") {
        None => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Number(n)) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        Some(other) => return Err(expected("conversation", "a string or an integer", other)),
    };
    let context_tokens = match field("context_tokens") {
        None => None,
        Some(Value::Number(n)) if n.as_f64().is_some_and(|t| t >= 0.0) => n.as_f64(),
        Some(other) => return Err(expected("context_tokens", "a non-negative number", other)),
    };
    Ok(Record { outcome: Outcome { id, conversation, category, correct }, context_tokens })
}

fn expected(field: &str, what: &str, got: &Value) -> anyhow::Error {
    anyhow!("field {field:?}: expected {what}, got {}", shown(got))
}

/// A JSON value as written, cut short if long.
fn shown(value: &Value) -> String {
    const MAX: usize = 40;
    let text = value.to_string();
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

/// The runs' mean context tokens, when both files have them on every line.
/// Asking for a cost bound without them is an error, not a skipped rule.
fn cost(base: &Run, cand: &Run, required: bool) -> anyhow::Result<Option<Cost>> {
    match (base.tokens, cand.tokens) {
        (Ok(b), Ok(c)) => Ok(Some(Cost { baseline_mean_tokens: b, candidate_mean_tokens: c })),
        (Err(line), _) if required => Err(no_tokens(&base.name, line)),
        (_, Err(line)) if required => Err(no_tokens(&cand.name, line)),
        _ => Ok(None),
    }
}

fn no_tokens(name: &str, line: usize) -> anyhow::Error {
    anyhow!("--cost-bound needs \"context_tokens\" on every line of both files; {name}:{line} has none")
}

/// The gate's verdict on a comparison: its one-sided exact test of "better"
/// in place of the two-sided McNemar and the bootstrap interval, then the
/// comparison's category and cost rules.
struct GateVerdict {
    test: emend_stats::BetterTest,
    rules: Vec<RuleRow>,
    accept: bool,
}

/// One rule of the verdict, as the gate names it.
#[derive(Serialize)]
struct RuleRow {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    category: Option<String>,
    value: f64,
    threshold: f64,
    pass: bool,
    detail: String,
}

impl GateVerdict {
    fn of(c: &Comparison, alpha: f64) -> GateVerdict {
        let p = &c.paired;
        // Outcomes of a replay (ids `<question>@<checkpoint>`) are tested by probe, as the gate does.
        let test = emend_stats::gate_test(p, alpha, emend_stats::has_observation_ids(p));
        let detail = match &test.probe {
            None => format!(
                "one-sided exact p = {} vs alpha {alpha} ({} improved, {} regressed of {}; lower bound {:+.4})",
                p_value(test.p_value),
                test.improved,
                test.regressed,
                test.questions,
                test.lower_bound
            ),
            Some(d) => format!(
                "unit probe: p = {} vs alpha {alpha}, the larger of the final checkpoint's one-sided exact p = {} \
                 ({} improved, {} regressed of {} probes) and the CR2 p = {} clustered by probe across {} observations",
                p_value(test.p_value),
                p_value(d.final_p),
                test.improved,
                test.regressed,
                test.questions,
                p_value(d.clustered_p),
                d.observations
            ),
        };
        let mut rules = vec![RuleRow {
            name: "confirm_better".into(),
            category: None,
            value: test.p_value,
            threshold: alpha,
            pass: test.better,
            detail,
        }];
        let kept = c.verdict.rules.iter().filter(|r| {
            !matches!(r.name, emend_stats::RuleKind::McnemarPBelowAlpha | emend_stats::RuleKind::CiExcludesZero)
        });
        rules.extend(kept.map(|r| RuleRow {
            name: r.name.name().to_string(),
            category: r.category.clone(),
            value: r.value,
            threshold: r.threshold,
            pass: r.pass,
            detail: r.detail.clone(),
        }));
        let accept = rules.iter().all(|r| r.pass);
        GateVerdict { test, rules, accept }
    }
}

/// The `--json` output: one object, fields in a fixed order, maps sorted.
#[derive(Serialize)]
struct Report<'a> {
    baseline: &'a str,
    candidate: &'a str,
    n: usize,
    improved: usize,
    regressed: usize,
    both_correct: usize,
    both_wrong: usize,
    baseline_accuracy: f64,
    candidate_accuracy: f64,
    delta: f64,
    ci_low: f64,
    ci_high: f64,
    ci_level: f64,
    unit: BootstrapUnit,
    resampling_units: usize,
    resamples: u32,
    seed: u64,
    /// The gate's one-sided exact test of "better" (decides).
    confirm_better: emend_stats::BetterTest,
    /// The two-sided McNemar test, for information (decides nothing).
    mcnemar_test: emend_stats::McNemarTest,
    mcnemar_p: f64,
    mcnemar_exact_p: f64,
    mcnemar_chi_square_p: Option<f64>,
    per_category: &'a std::collections::BTreeMap<String, CategoryDelta>,
    cost: Option<CostReport>,
    thresholds: &'a Thresholds,
    accept: bool,
    rules: &'a [RuleRow],
    improved_ids: &'a [String],
    regressed_ids: &'a [String],
}

#[derive(Serialize)]
struct CostReport {
    baseline_mean_tokens: f64,
    candidate_mean_tokens: f64,
    growth: f64,
}

impl<'a> Report<'a> {
    fn new(
        baseline: &'a str,
        candidate: &'a str,
        c: &'a Comparison,
        gate: &'a GateVerdict,
        thresholds: &'a Thresholds,
        cost: Option<&Cost>,
    ) -> Self {
        let p = &c.paired;
        Report {
            baseline,
            candidate,
            n: p.n(),
            improved: p.improved().len(),
            regressed: p.regressed().len(),
            both_correct: p.both_correct().len(),
            both_wrong: p.both_wrong().len(),
            baseline_accuracy: p.base_accuracy(),
            candidate_accuracy: p.cand_accuracy(),
            delta: p.delta(),
            ci_low: c.bootstrap.low,
            ci_high: c.bootstrap.high,
            ci_level: c.bootstrap.level,
            unit: c.bootstrap.unit,
            resampling_units: c.bootstrap.units,
            resamples: c.bootstrap.resamples,
            seed: c.bootstrap.seed,
            confirm_better: gate.test,
            mcnemar_test: c.mcnemar.test,
            mcnemar_p: c.mcnemar.p_value,
            mcnemar_exact_p: c.mcnemar.exact_p,
            mcnemar_chi_square_p: c.mcnemar.chi_square_p,
            per_category: p.per_category(),
            cost: cost.map(|k| CostReport {
                baseline_mean_tokens: k.baseline_mean_tokens,
                candidate_mean_tokens: k.candidate_mean_tokens,
                growth: k.growth(),
            }),
            thresholds,
            accept: gate.accept,
            rules: &gate.rules,
            improved_ids: p.improved(),
            regressed_ids: p.regressed(),
        }
    }
}

/// The human report.
fn human(
    base: &str,
    cand: &str,
    c: &Comparison,
    gate: &GateVerdict,
    thresholds: &Thresholds,
    cost: Option<&Cost>,
) -> String {
    let p = &c.paired;
    let ci = &c.bootstrap;
    let m = &c.mcnemar;
    let mut out = String::new();
    let w = &mut out;
    // Writing to a String cannot fail.
    let _ = writeln!(w, "baseline   {base}");
    let _ = writeln!(w, "candidate  {cand}");
    let _ = writeln!(w, "paired questions  {}", p.n());
    let _ = writeln!(w);
    let _ = writeln!(w, "  improved      {:>6}  (baseline wrong, candidate right)", p.improved().len());
    let _ = writeln!(w, "  regressed     {:>6}  (baseline right, candidate wrong)", p.regressed().len());
    let _ = writeln!(w, "  both correct  {:>6}", p.both_correct().len());
    let _ = writeln!(w, "  both wrong    {:>6}", p.both_wrong().len());
    let _ = writeln!(w);
    let _ = writeln!(
        w,
        "accuracy  baseline {}  candidate {}  delta {} pp",
        percent(p.base_accuracy(), 2),
        percent(p.cand_accuracy(), 2),
        points(p.delta(), 2)
    );
    let _ = writeln!(
        w,
        "{}% CI    [{}, {}] pp  (paired bootstrap by {}: {} units, {} resamples, seed {})",
        (ci.level * 1e4).round() / 1e2,
        points(ci.low, 2),
        points(ci.high, 2),
        ci.unit,
        ci.units,
        ci.resamples,
        ci.seed
    );
    let t = &gate.test;
    let _ = writeln!(
        w,
        "gate test {}, one-sided (the confirm test's): p = {} at alpha {}",
        if t.probe.is_some() {
            "by probe (final checkpoint exact binomial, and CR2 clustered by probe across checkpoints)"
        } else {
            "exact binomial"
        },
        p_value(t.p_value),
        t.alpha
    );
    let _ = writeln!(w, "{}", mcnemar_line(m));
    if let Some(k) = cost {
        let _ = writeln!(
            w,
            "cost      mean context tokens {:.1} -> {:.1} ({:+.2}%)",
            k.baseline_mean_tokens,
            k.candidate_mean_tokens,
            k.growth() * 100.0
        );
    }
    let _ = writeln!(w);
    let _ = write!(w, "{}", category_table(p));
    let _ = writeln!(w);
    let _ = write!(w, "{}", verdict_section(gate, thresholds));
    out
}

/// Which McNemar test decided (exact below [`emend_stats::EXACT_BELOW`] discordant pairs), its
/// p-value, and the other test's for comparison.
fn mcnemar_line(m: &emend_stats::McNemar) -> String {
    let discordant = m.improved + m.regressed;
    let test = match m.test {
        emend_stats::McNemarTest::Exact => {
            format!("exact binomial ({discordant} discordant < {})", emend_stats::EXACT_BELOW)
        }
        emend_stats::McNemarTest::ChiSquare => {
            format!("chi-square, continuity-corrected ({discordant} discordant >= {})", emend_stats::EXACT_BELOW)
        }
    };
    let other = match (m.test, m.chi_square_p) {
        (emend_stats::McNemarTest::ChiSquare, _) => format!("  (exact p = {})", p_value(m.exact_p)),
        (emend_stats::McNemarTest::Exact, Some(chi)) => format!("  (chi-square p = {})", p_value(chi)),
        (emend_stats::McNemarTest::Exact, None) => String::new(),
    };
    format!("McNemar   {test}, two-sided, for information: p = {}{other}", p_value(m.p_value))
}

/// Accuracy per category, baseline against candidate.
fn category_table(p: &emend_stats::Paired) -> String {
    let rows = p
        .per_category()
        .iter()
        .map(|(name, k)| {
            vec![
                name.clone(),
                k.n.to_string(),
                percent(k.base_correct as f64 / k.n as f64, 2),
                percent(k.cand_correct as f64 / k.n as f64, 2),
                format!("{} pp", points(k.delta, 2)),
            ]
        })
        .collect();
    term::table(&["category", "n", "baseline", "candidate", "delta"], rows, &[false, true, true, true, true])
}

/// The gate's decision and every rule with its verdict.
fn verdict_section(gate: &GateVerdict, thresholds: &Thresholds) -> String {
    let mut out = String::new();
    let w = &mut out;
    let failed = gate.rules.iter().filter(|r| !r.pass).count();
    let decision = if gate.accept {
        format!("ACCEPT (all {} rules pass", gate.rules.len())
    } else {
        format!("REJECT ({failed} of {} rules fail", gate.rules.len())
    };
    let _ = writeln!(
        w,
        "verdict: {decision}; alpha {}, category drop max {})",
        thresholds.alpha, thresholds.category_drop_max
    );
    let rows = gate
        .rules
        .iter()
        .map(|rule| {
            vec![format!("  {}", if rule.pass { "PASS" } else { "FAIL" }), rule.name.clone(), rule.detail.clone()]
        })
        .collect();
    let _ = write!(w, "{}", term::table(&[], rows, &[]));
    out
}

fn p_value(p: f64) -> String {
    if p < 1e-4 { format!("{p:.3e}") } else { format!("{p:.6}") }
}
