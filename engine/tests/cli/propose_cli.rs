//! `emend propose`: a person's change with a falsifiable prediction, end to
//! end on the embedded dataset. On it, `retrieve.top_k` 5 -> 50 with
//! `assemble.token_budget` 300 -> 1900 passes the confirm test; on the
//! confirm part single-hop rises by +12.7 pp (95% CI [+6.3, +20.3]) and
//! temporal by +9.1 pp with an interval reaching 0, so "single-hop +3pp"
//! holds and "temporal +3pp" fails.

use std::path::{Path, PathBuf};

use emend_core::events::{EngineProjector, Event};
use emend_journal::EventLog;
use serde_json::Value;

use crate::support;
use support::{emend, ok, served};

const GAIN: [&str; 4] = ["--field", "retrieve.top_k=50", "--field", "assemble.token_budget=1900"];

fn project(tmp: &Path) -> PathBuf {
    ok(tmp, &["init", "p", "--tasks", "builtin"]);
    tmp.join("p")
}

/// `emend propose FIELDS --predict PREDICTION EXTRA --json --quiet`: exit code and JSON.
fn propose(dir: &Path, fields: &[&str], prediction: &str, extra: &[&str]) -> (i32, Value) {
    let mut args = vec!["propose"];
    args.extend_from_slice(fields);
    args.extend_from_slice(&["--predict", prediction, "--json", "--quiet"]);
    args.extend_from_slice(extra);
    let (code, out, err) = emend(dir, &args);
    let v = serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}\n{err}"));
    (code, v)
}

#[test]
fn a_proposal_whose_prediction_holds_is_served_and_its_verdict_is_shown() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path());
    let (code, v) = propose(&dir, &GAIN, "single-hop +3pp, temporal >= 0", &[]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["served"], true, "{v}");
    assert_eq!(v["accepted_version"], 2);
    assert_eq!(v["prediction"]["held"], true);
    let single = &v["prediction"]["verdicts"][0];
    assert_eq!(single["category"], "single-hop");
    assert!(single["low"].as_f64().unwrap() > 0.0 && single["high"].as_f64().unwrap() >= 0.03, "{single}");
    assert_eq!(served(&dir), 2);
    let log = ok(&dir, &["log"]);
    assert!(log.contains("prediction \"single-hop +3pp, temporal >= 0\" held"), "{log}");
    assert!(log.contains("single-hop +3pp: held (+12.7 pp, 95% CI"), "{log}");
    for what in ["v2", "r1c1"] {
        let show = ok(&dir, &["show", what]);
        assert!(show.contains("prediction: prediction \"single-hop +3pp, temporal >= 0\" held"), "{show}");
        assert!(show.contains("pass prediction"), "{show}");
    }
    let report = tmp.path().join("r.html");
    ok(&dir, &["report", "--out", report.to_str().unwrap()]);
    let html = std::fs::read_to_string(report).unwrap();
    assert!(html.contains("single-hop +3pp: held"), "the report shows the verdict");
}

#[test]
fn a_failed_prediction_is_not_served_unless_accepted_unpredicted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path());
    let (code, v) = propose(&dir, &GAIN, "temporal +3pp, single-hop >= 0", &[]);
    assert_eq!(code, 1, "tested and not served: {v}");
    assert_eq!(v["served"], false);
    assert_eq!(v["rejected_by"], "full:prediction", "the accuracy test passed; the prediction stopped it: {v}");
    assert_eq!(v["prediction"]["held"], false);
    assert_eq!(v["prediction"]["verdicts"][0]["held"], false);
    assert_eq!(v["prediction"]["verdicts"][1]["held"], true);
    assert_eq!(served(&dir), 1);
    assert!(ok(&dir, &["log"]).contains("prediction \"temporal +3pp, single-hop >= 0\" failed"));
    // The report lists the proposal that was not served, with its verdict.
    let report = tmp.path().join("r.html");
    ok(&dir, &["report", "--out", report.to_str().unwrap()]);
    let html = std::fs::read_to_string(&report).unwrap();
    let proposals = html.split("id=\"proposals\"").nth(1).expect("a proposals section");
    assert!(
        proposals.contains("r1c1 retrieve.top_k 5 -&gt; 50")
            && proposals.contains("rejected by full:prediction")
            && proposals.contains("temporal +3pp: failed"),
        "{proposals}"
    );
    // The same claim, accepted unpredicted (another strategy: the first one was evaluated).
    let nearby = ["--field", "retrieve.top_k=40", "--field", "assemble.token_budget=1800"];
    let (code, v) = propose(&dir, &nearby, "temporal +3pp, single-hop >= 0", &["--accept-unpredicted"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["served"], true, "{v}");
    assert_eq!(v["prediction"]["held"], false);
    assert_eq!(v["prediction"]["accepted_unpredicted"], true);
    assert_eq!(served(&dir), 2);
    let log = ok(&dir, &["log"]);
    assert!(log.contains("failed, accepted anyway (--accept-unpredicted)"), "{log}");
    let show = ok(&dir, &["show", "v2"]);
    assert!(show.contains("temporal +3pp: failed"), "{show}");
    assert!(!show.contains(" prediction   "), "no prediction rule decided it: {show}");
}

#[test]
fn bad_fields_categories_and_predictions_are_one_line_and_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path());
    let cases: [(&[&str], &str, &str); 5] = [
        (
            &["--field", "retrieve.top_kk=9"],
            "temporal >= 0",
            "--field retrieve.top_kk: the strategy schema declares no field",
        ),
        (&["--field", "retrieve.top_k=900"], "temporal >= 0", "--field retrieve.top_k: the result breaks the schema"),
        (
            &["--field", "retrieve.top_k=9"],
            "temporals +1pp",
            "unknown category temporals in --predict (the dataset's categories: multi-hop, open-domain, single-hop, temporal)",
        ),
        (&["--field", "retrieve.top_k=9"], "temporal 3pp", "prediction item \"temporal 3pp\": expected CATEGORY +Npp"),
        (&["--field", "top_k"], "temporal >= 0", "--field \"top_k\": expected PATH=VALUE"),
    ];
    for (fields, prediction, message) in cases {
        let mut args = vec!["propose"];
        args.extend_from_slice(fields);
        args.extend_from_slice(&["--predict", prediction]);
        let (code, out, err) = emend(&dir, &args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.starts_with(&format!("error: {message}")), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
    // Nothing was tested.
    assert!(!ok(&dir, &["log"]).contains("round 1"));
    let (code, _, _) = emend(&dir, &["propose", "--field", "retrieve.top_k=9"]);
    assert_eq!(code, 2, "--predict is required");
}

/// Journals an open escalation of `retrieve.top_k::increase` (its node
/// blocked three times) and returns its key.
fn escalate(dir: &Path) -> &'static str {
    let key = "retrieve.top_k::increase";
    let mut log = emend_journal::open_writer(dir.join(".emend/journal"), EngineProjector).unwrap();
    let mut node = emend_core::hypothesis::Hypothesis::new("retrieve.top_k", emend_core::schema::Direction::Increase);
    for _ in 0..3 {
        node.block();
    }
    let evs = [
        Event::HypothesisUpdated { node },
        Event::Escalated { class: key.into(), round: 1, reasons: vec!["needs a larger context".into()] },
    ];
    log.append(evs.iter().map(Event::to_new).collect()).unwrap();
    key
}

/// A field a rollback froze is refused in the proposal before the
/// escalation is resolved, as `emend propose` would refuse it.
#[test]
fn a_resolution_proposal_of_a_frozen_field_is_refused_before_resolving() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path());
    let (code, v) = propose(&dir, &GAIN, "single-hop +3pp", &[]);
    assert_eq!(code, 0, "{v}");
    ok(&dir, &["rollback", "--to", "v1", "--reason", "context cost"]);
    let key = escalate(&dir);
    let (code, _, err) = emend(
        &dir,
        &[
            "escalations",
            "resolve",
            key,
            "--reason",
            "r",
            "--propose",
            "retrieve.top_k=40",
            "--predict",
            "single-hop +1pp",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.starts_with(
            "error: --field retrieve.top_k: the field is frozen at its served value by the rollback from v2, which \
             changed it, until `emend unquarantine v2`"
        ),
        "{err}"
    );
    assert!(ok(&dir, &["escalations"]).contains("[open]"));
    let (code, _, err) = emend(&dir, &["propose", "--field", "retrieve.top_k=40", "--predict", "single-hop +1pp"]);
    assert_eq!(code, 2, "`emend propose` refuses it the same way: {err}");
    assert!(!ok(&dir, &["log"]).contains("round 2"), "nothing was tested");
    // A field the schema locks outright is refused the same way.
    let (code, _, err) = emend(&dir, &["propose", "--field", "judge.kind=f1", "--predict", "single-hop +1pp"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.starts_with(
            "error: --field judge.kind: the field is locked: x-evolvable is false for it in \
             schemas/strategy.schema.json (built in)"
        ),
        "{err}"
    );
}

#[test]
fn resolving_an_escalation_can_carry_a_proposal() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = project(tmp.path());
    let key = escalate(&dir);
    // A bad proposal is refused before the escalation is resolved.
    let (code, _, err) = emend(
        &dir,
        &["escalations", "resolve", key, "--reason", "r", "--propose", "retrieve.top_k=50", "--predict", "x +1"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(ok(&dir, &["escalations"]).contains("[open]"));
    let (code, out, err) = emend(
        &dir,
        &[
            "escalations",
            "resolve",
            key,
            "--reason",
            "a larger context",
            "--propose",
            "retrieve.top_k=50",
            "--propose",
            "assemble.token_budget=1900",
            "--predict",
            "single-hop +3pp",
        ],
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("escalation retrieve.top_k::increase resolved"), "{out}");
    assert!(out.contains("single-hop +3pp: held"), "{out}");
    assert_eq!(served(&dir), 2);
    assert!(ok(&dir, &["escalations"]).contains("[resolved]"));
}
