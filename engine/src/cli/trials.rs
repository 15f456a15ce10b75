//! `emend trials`: every strategy the journal's searches scored, one row
//! each in journal order, like Optuna's trials table: as a text table, one
//! JSON document, or CSV. Read-only: it reads the published view and takes
//! no lock, so it works while `evolve` runs.

use std::path::Path;

use emend_core::exit;
use emend_report::views::{TrialRow, TrialState, TrialsView};
use serde::Serialize;
use serde_json::Value;

use super::common;
use super::term;
use super::{CmdResult, Failure};

#[derive(Debug, clap::Args)]
pub struct TrialsArgs {
    /// Print one JSON document: {"format": 1, "trials": [...]}, each trial's field values under "values".
    #[arg(long)]
    pub json: bool,
    /// Print CSV: a header row, then one row per trial with one column per field (RFC 4180 quoting).
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,
    /// Only the trials of the N-th search (1-based, in journal order); numbers stay those of the whole journal.
    #[arg(long, value_name = "N", value_parser = search_number)]
    pub search: Option<usize>,
    /// Only the accuracy-cost front: of each strategy scored on the whole search part, those no other
    /// is at least as accurate as with at most as many mean context tokens (strictly better in one), by tokens.
    #[arg(long)]
    pub front: bool,
}

/// `--search N`: a search's ordinal, 1 or more.
fn search_number(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err("expected a search number, 1 or more (see `emend trials`)".to_string()),
    }
}

/// The layout of `--json`; raised when a field is removed or changes meaning
/// (2: `questions` became `evaluated`, `complete` became `state`, `score`
/// is only a complete trial's and estimates moved to `estimate`).
const FORMAT: u32 = 2;

#[derive(Serialize)]
struct Document<'a> {
    format: u32,
    trials: &'a [TrialRow],
}

pub fn run(args: &TrialsArgs, project_dir: Option<&Path>) -> CmdResult {
    let project = common::project(project_dir)?;
    let log = common::reader(&project)?;
    let mut view = TrialsView::build(&log).map_err(common::store_failure)?;
    if let Some(n) = args.search {
        let total = view.searches.len();
        if !view.keep_search(n) {
            let has = match total {
                0 => "no search yet".to_string(),
                1 => "1 search".to_string(),
                t => format!("{t} searches"),
            };
            return Err(Failure::bad_input(anyhow::anyhow!("--search {n}: the journal has {has}")));
        }
    }
    if args.front {
        view.keep_front();
    }
    if args.json {
        let doc = Document { format: FORMAT, trials: &view.trials };
        common::print_json_text(&serde_json::to_string_pretty(&doc).expect("JSON renders"));
    } else if args.csv {
        print!("{}", render_csv(&view));
    } else if args.front {
        print!("{}", render_front(&view));
    } else {
        print!("{}", render_text(&view));
    }
    Ok(exit::OK)
}

/// The fixed columns of `--csv`, before one column per field path.
const CSV_COLUMNS: [&str; 15] = [
    "number",
    "search",
    "round",
    "stage",
    "state",
    "hash",
    "evaluated",
    "correct",
    "score",
    "estimate",
    "started",
    "duration_ms",
    "tokens",
    "proposed",
    "changed",
];

/// One CSV field, quoted as RFC 4180 says when it holds a comma, a quote or a line break.
fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) { format!("\"{}\"", text.replace('"', "\"\"")) } else { text.to_string() }
}

/// A JSON value as CSV text: strings as they are, null empty, the rest as JSON.
fn csv_value(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or(String::new(), |v| v.to_string())
}

/// A number as JSON writes it (the shortest text that reads back the same).
fn num(x: f64) -> String {
    csv_value(&Value::from(x))
}

/// `--csv`: a header row, then a row per trial; lines end with `\n`.
pub fn render_csv(view: &TrialsView) -> String {
    let fields = view.fields();
    let header: Vec<&str> = CSV_COLUMNS.iter().copied().chain(fields.iter().map(String::as_str)).collect();
    let mut out = header.iter().map(|h| csv_field(h)).collect::<Vec<_>>().join(",");
    out.push('\n');
    for t in &view.trials {
        let mut cells = vec![
            t.number.to_string(),
            t.search.to_string(),
            t.round.to_string(),
            t.stage.clone(),
            t.state.map_or(String::new(), |s| s.as_str().to_string()),
            t.hash.clone().unwrap_or_default(),
            opt(t.evaluated),
            opt(t.correct),
            t.score.map_or(String::new(), num),
            t.estimate.map_or(String::new(), num),
            t.started.clone().unwrap_or_default(),
            opt(t.duration_ms),
            t.tokens.map_or(String::new(), num),
            t.proposed.to_string(),
            opt(t.changed),
        ];
        cells.extend(fields.iter().map(|f| t.values.get(f).map_or(String::new(), csv_value)));
        out.push_str(&cells.iter().map(|c| csv_field(c)).collect::<Vec<_>>().join(","));
        out.push('\n');
    }
    out
}

/// The text table: a row per trial and a closing line on the searches.
pub fn render_text(view: &TrialsView) -> String {
    if view.searches.is_empty() {
        return "no searches journaled yet\n".to_string();
    }
    let mut out = table(view);
    out.push_str(&closing_line(view));
    out
}

/// `--front`: the front's rows (kept by [`TrialsView::keep_front`]) and what they are.
pub fn render_front(view: &TrialsView) -> String {
    if view.trials.is_empty() {
        return "no strategy was scored on the whole search part with its context tokens yet\n".to_string();
    }
    let mut out = table(view);
    out.push_str(&format!(
        "the accuracy-cost front: {} strateg{} scored on the whole search part that no other matches in accuracy \
         with fewer mean context tokens a question (or beats with as few), by tokens\n",
        view.trials.len(),
        if view.trials.len() == 1 { "y" } else { "ies" }
    ));
    out
}

/// A row per trial, as a table (empty without rows).
fn table(view: &TrialsView) -> String {
    let dash = || "-".to_string();
    let rows: Vec<Vec<String>> = view
        .trials
        .iter()
        .map(|t| {
            vec![
                t.number.to_string(),
                t.search.to_string(),
                t.round.to_string(),
                t.stage.clone(),
                t.state.map_or_else(dash, |s| s.as_str().to_string()),
                t.evaluated.map_or_else(dash, |q| q.to_string()),
                t.correct.map_or_else(dash, |q| q.to_string()),
                t.score.map_or_else(dash, |x| format!("{x:.4}")),
                t.estimate.map_or_else(dash, |x| format!("({x:.4})")),
                t.tokens.map_or_else(dash, |x| format!("{x:.0}")),
                t.hash.as_deref().map_or_else(dash, |h| h[..12.min(h.len())].to_string()),
                if t.proposed { "yes".to_string() } else { String::new() },
                t.changed.map_or_else(dash, |n| n.to_string()),
            ]
        })
        .collect();
    let header = [
        "number",
        "search",
        "round",
        "stage",
        "state",
        "evaluated",
        "correct",
        "score",
        "estimate",
        "tokens",
        "hash",
        "proposed",
        "changed",
    ];
    let right = [true, true, true, false, false, true, true, true, true, true, false, false, true];
    if rows.is_empty() { String::new() } else { term::table(&header, rows, &right) }
}

/// `33 strategies scored by 1 search (21 trials, 11 prune tests, 1 served
/// baseline); 15 raced out before the whole search part; 1 candidate
/// proposed`, and what `changed` counts.
fn closing_line(view: &TrialsView) -> String {
    let plural = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let trials: usize = view.searches.iter().map(|s| s.trials).sum();
    let prunes: usize = view.searches.iter().map(|s| s.prune_tests).sum();
    let served: usize = view.searches.iter().map(|s| s.served).sum();
    let served = if served == 0 {
        String::new()
    } else {
        format!(", {}", plural(served, "served baseline", "served baselines"))
    };
    let raced = view.trials.iter().filter(|t| t.state == Some(TrialState::RacedOut)).count();
    let proposed = view.searches.iter().filter(|s| s.proposed.is_some()).count();
    format!(
        "{} scored by {} ({}, {}{served}); {} raced out before the whole search part; {} proposed\n\
         score: accuracy on the whole search part (complete trials only); estimate: not a measurement, what the \
         sampler learned from a raced-out trial or a step point (search.raced_out)\n\
         tokens: mean context tokens a question on the questions it was evaluated on\n\
         changed: fields that differ from the strategy served when the search ran\n",
        plural(view.trials.len(), "strategy", "strategies"),
        plural(view.searches.len(), "search", "searches"),
        plural(trials, "trial", "trials"),
        plural(prunes, "prune test", "prune tests"),
        raced,
        plural(proposed, "candidate", "candidates"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use emend_core::events::{GlobalRecord, ScoredPoint, SearchRecord};
    use serde_json::json;
    use std::collections::BTreeMap;

    fn view() -> TrialsView {
        let point = |hash: &str, q: usize, score: f64, values: Value| {
            let mut p = ScoredPoint::new(serde_json::from_value(values).unwrap(), score);
            p.hash = Some(hash.into());
            p.questions = Some(q);
            p.correct = Some(if q == 24 { "ffff00" } else { "ffffffffffffffffff000000" }.into());
            p.stage = Some("trial".into());
            p
        };
        let record = SearchRecord {
            round: 1,
            served_hash: "s".into(),
            searches: 1,
            draws: 2,
            misses: 0,
            spent: 0.5,
            screened: vec![],
            scored: vec![
                point("aaaaaaaaaaaaaaaa", 24, 0.5, json!({"answer.prompt_note": "say \"hi\", then stop", "top_k": 10})),
                point("bbbbbbbbbbbbbbbb", 96, 0.75, json!({"top_k": 5})),
            ],
            proposed: Some("bbbbbbbbbbbbbbbb".into()),
            global: Some(GlobalRecord {
                part: "P".into(),
                trials: 2,
                since_best: 0,
                ended: "proposed".into(),
                prune: vec![],
                credits: vec![],
                raced_out: Some("rank".into()),
            }),
        };
        let served = BTreeMap::from([("s".to_string(), json!({"top_k": 5}))]);
        TrialsView::of(&[record], &served)
    }

    #[test]
    fn a_search_number_is_one_or_more() {
        assert_eq!(search_number("3"), Ok(3));
        assert!(search_number("0").is_err());
        assert!(search_number("-1").is_err());
        assert!(search_number("x").is_err());
    }

    #[test]
    fn csv_quotes_as_rfc_4180_says_and_has_a_column_per_field() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(csv_field("two\nlines"), "\"two\nlines\"");
        let csv = render_csv(&view());
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(
            lines,
            vec![
                "number,search,round,stage,state,hash,evaluated,correct,score,estimate,started,duration_ms,tokens,\
                 proposed,changed,answer.prompt_note,top_k",
                "0,1,1,trial,raced_out,aaaaaaaaaaaaaaaa,24,16,,,,,,false,1,\"say \"\"hi\"\", then stop\",10",
                "1,1,1,trial,complete,bbbbbbbbbbbbbbbb,96,72,0.75,,,,,true,0,,5",
            ]
        );
    }

    #[test]
    fn the_text_table_shortens_hashes_and_an_empty_journal_says_so() {
        let text = render_text(&view());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "number  search  round  stage  state      evaluated  correct   score  estimate  tokens  hash          proposed  \
             changed"
        );
        assert!(lines[1].contains("raced_out         24       16       -         -       -  aaaaaaaaaaaa"), "{text}");
        assert!(
            lines[2].contains("complete          96       72  0.7500         -       -  bbbbbbbbbbbb  yes"),
            "{text}"
        );
        assert!(text.contains("2 strategies scored by 1 search (2 trials, 0 prune tests); 1 raced out"), "{text}");
        assert_eq!(render_text(&TrialsView::default()), "no searches journaled yet\n");
        let empty = serde_json::to_string(&Document { format: FORMAT, trials: &[] }).unwrap();
        assert_eq!(empty, r#"{"format":2,"trials":[]}"#);
    }
}
