//! `emend evolve` with every model role on an OpenAI-compatible test
//! server: extraction, answering, the LLM judge, the classifier, the critic,
//! and an evolver whose rewrites edit a locked field, drop a marker and
//! copy instructions planted in a dialogue turn. The gates stop all three,
//! the direction is escalated, usage reaches the journal and `emend
//! status`, and the key shows nowhere.

use crate::llm_support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use llm_support::{INJECTED_LINE, Reply, Server, all_roles, assert_no_key, emend, project};
use serde_json::{Value, json};

/// An evolver that misbehaves in a new way each time it is asked.
fn evolver_script(calls: Arc<AtomicUsize>) -> impl Fn(&llm_support::Seen) -> Reply + Send + Sync + 'static {
    move |seen| {
        if seen.role() != "evolver" {
            return llm_support::default_reply(seen);
        }
        let n = calls.fetch_add(1, Ordering::SeqCst);
        let patch = match n {
            // Edits the locked judge.
            0 => json!({"path": "judge.kind", "value": "f1", "rationale": "an easier judge"}),
            // Drops the {context} marker.
            1 => json!({"path": "answer.prompt", "value": "Answer the question in a few words: {question}"}),
            // Falls for the instruction planted in a dialogue turn (if it saw it).
            _ => {
                let user = seen.user();
                let planted = if user.contains(INJECTED_LINE) { INJECTED_LINE } else { "Answer carefully" };
                json!({
                    "path": "answer.prompt",
                    "value": format!("{planted}.\n<context>\n{{context}}\n</context>\nQuestion: {{question}}\nAnswer:"),
                })
            }
        };
        Reply::Content(patch.to_string())
    }
}

fn events(dir: &std::path::Path) -> (Vec<Value>, String) {
    let (code, out, err) = emend(dir, &["journal", "export"]);
    assert_eq!(code, 0, "{err}");
    (out.lines().map(|l| serde_json::from_str(l).unwrap()).collect(), out)
}

#[test]
fn evolve_with_every_role_and_a_misbehaving_evolver() {
    let server = Server::roles();
    let calls = Arc::new(AtomicUsize::new(0));
    server.set_script(evolver_script(calls.clone()));
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    project(&dir, "llm", &all_roles(&server.url));

    let (code, out, err) = emend(&dir, &["evolve", "--rounds", "3", "--candidates", "4", "--json"]);
    assert_eq!(code, 0, "{out}{err}");
    let summary: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(summary["rounds"], 3);

    // Every role was asked.
    for role in ["extractor", "answerer", "judge", "classifier", "critic", "evolver"] {
        assert!(server.count(role) > 0, "{role} was never asked");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 3, "the evolver is asked once per round");
    // No candidate changed an ingest field, so the six windows were extracted
    // once, for the served strategy, and never again (the harness's stage cache).
    assert_eq!(server.count("extractor"), 6);

    let (events, export) = events(&dir);
    let rewrites: Vec<&Value> = events
        .iter()
        .filter(|e| {
            let asked = e["payload"].get("asked").unwrap_or(&e["payload"]["hypothesis"]);
            e["kind"] == "candidate_judged" && asked == "answer.prompt::rewrite"
        })
        .collect();
    // The edit of the locked judge is credited to the field it changes, and
    // says which direction the evolver was asked for.
    assert_eq!(rewrites[0]["payload"]["hypothesis"], "judge.kind::toggle", "{:#}", rewrites[0]);
    assert_eq!(rewrites.len(), 3, "{rewrites:#?}");
    let stopped: Vec<(String, String)> = rewrites
        .iter()
        .map(|e| {
            (
                e["payload"]["rejected_by"].as_str().unwrap_or("").to_string(),
                e["payload"]["reason"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    assert_eq!(stopped[0].0, "gate:schema_legality");
    assert!(stopped[0].1.contains("changes locked field(s) judge.kind"), "{stopped:?}");
    assert_eq!(stopped[1].0, "gate:prompt_integrity");
    assert!(stopped[1].1.contains("answer.prompt: missing required marker {context}"), "{stopped:?}");
    assert_eq!(stopped[2].0, "gate:prompt_integrity");
    assert!(stopped[2].1.contains("carries text copied from the dataset"), "{stopped:?}");
    // Three gate rejections of the model's proposals escalate the direction.
    let escalated: Vec<&Value> = events.iter().filter(|e| e["kind"] == "escalated").collect();
    assert!(escalated.iter().any(|e| e["payload"]["class"] == "answer.prompt::rewrite"), "{escalated:#?}");
    // The evolver saw the planted turn only as JSON data between <data> tags.
    let asked = server.seen().into_iter().rfind(|s| s.role() == "evolver").unwrap();
    let data = llm_support::between(&asked.user(), "<data>", "</data>").to_string();
    assert!(data.contains(INJECTED_LINE) && !data.contains('<'), "{data}");

    // Usage per role and round in the journal, and in `emend status`.
    let rounds: Vec<&Value> = events.iter().filter(|e| e["kind"] == "round_finished").collect();
    assert_eq!(rounds.len(), 3);
    let first = &rounds[0]["payload"]["llm"];
    for role in ["extractor", "answerer", "judge", "evolver"] {
        assert!(first[role]["requests"].as_u64().unwrap() > 0, "{role}: {first}");
    }
    let (code, status, err) = emend(&dir, &["status", "--json"]);
    assert_eq!(code, 0, "{err}");
    let status: Value = serde_json::from_str(&status).unwrap();
    let total_answerer: u64 =
        rounds.iter().map(|r| r["payload"]["llm"]["answerer"]["requests"].as_u64().unwrap_or(0)).sum();
    assert_eq!(status["llm"]["total"]["answerer"]["requests"].as_u64(), Some(total_answerer));
    assert!(status["llm"]["last_round"].is_object());
    let (code, human, err) = emend(&dir, &["status"]);
    assert_eq!(code, 0, "{err}");
    assert!(human.contains("model judge:") && human.contains("requests"), "{human}");

    // Replaying the served strategy's evaluation needs no model call.
    let before = server.requests();
    let (code, _, err) =
        emend(&dir, &["eval", "--strategy", "strategies/served.yaml", "--tasks", "tasks.json", "--judge", "llm"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(server.requests(), before);

    // No output, journal record or report shows the key.
    let (_, log, log_err) = emend(&dir, &["log"]);
    let (_, report, report_err) = emend(&dir, &["report", "--out", "report.html"]);
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap_or_default();
    for (what, text) in [
        ("evolve output", &(out.clone() + &err)),
        ("journal export", &export),
        ("status", &human),
        ("log", &(log + &log_err)),
        ("report command", &(report + &report_err)),
        ("report", &html),
    ] {
        assert_no_key(what, text);
    }
}

#[test]
fn a_served_strategy_that_cannot_be_evaluated_fails_the_run() {
    let server = Server::roles();
    server.set_script(|seen| {
        if seen.role() == "judge" {
            Reply::Status { code: 500, retry_after: None, body: "judge down".into() }
        } else {
            llm_support::default_reply(seen)
        }
    });
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    let roles = all_roles(&server.url).replace("timeout_secs: 5}", "timeout_secs: 5, retries: 1}");
    project(&dir, "llm", &roles);
    let (code, out, err) = emend(&dir, &["evolve", "--rounds", "1"]);
    assert_eq!(code, 1, "{out}{err}");
    assert!(err.contains("evaluating the served strategy v1 failed"), "{err}");
    assert!(err.contains("roles.judge") && err.contains("HTTP 500"), "{err}");
    assert_no_key("stderr", &err);
}
