//! The model client against a real HTTP server: retries on 429 (honouring
//! Retry-After), 5xx and hanging replies, the deadline, one re-ask on a
//! malformed reply, fatal statuses, the reply cache, the concurrency bound,
//! and API keys that never show in an error.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use emend_core::config::RoleConfig;
use emend_eval::llm::advice::{SPLITS, parse_split};
use emend_eval::llm::{CallErrorKind, Models, Request, Role};
use emend_eval::test_server::{Reply, Server};
use serde_json::json;

fn role(server: &Server, f: impl FnOnce(&mut RoleConfig)) -> RoleConfig {
    let mut r = RoleConfig::new(&server.url, "test-model");
    r.backoff_secs = 0.01;
    r.timeout_secs = 5.0;
    f(&mut r);
    r
}

fn models(roles: &[(&str, RoleConfig)], dir: Option<&std::path::Path>) -> Models {
    let map: BTreeMap<String, RoleConfig> = roles.iter().map(|(n, r)| (n.to_string(), r.clone())).collect();
    Models::new(&map, dir).unwrap()
}

const OK: &str = r#"{"label": "source_only", "reason": "needs a date"}"#;

fn ask(m: &Models, n: usize) -> Result<String, emend_eval::llm::CallError> {
    m.call(Role::Classifier, Request::new("You diagnose why", format!("case {n}")), parse_split)
}

#[test]
fn a_rate_limit_is_retried_after_its_retry_after() {
    let server = Server::start(|_| Reply::Content(OK.into()));
    server.push([Reply::Status { code: 429, retry_after: Some("1".into()), body: "slow down".into() }]);
    let m = models(&[("classifier", role(&server, |_| {}))], None);
    let t = Instant::now();
    assert_eq!(ask(&m, 1).unwrap(), "source_only");
    assert!(t.elapsed() >= Duration::from_secs(1), "waited {:?}", t.elapsed());
    assert!(t.elapsed() < Duration::from_secs(4), "waited {:?}", t.elapsed());
    let u = m.usage()["classifier"];
    assert_eq!((u.requests, u.retries, u.errors), (2, 1, 0));
    assert_eq!(server.requests(), 2);
}

#[test]
fn server_errors_are_retried_then_given_up() {
    let server = Server::start(|_| Reply::Content(OK.into()));
    server.push([
        Reply::Status { code: 500, retry_after: None, body: "boom".into() },
        Reply::Status { code: 503, retry_after: None, body: "busy".into() },
        Reply::Raw("<html>bad gateway</html>".into()),
    ]);
    let m = models(&[("classifier", role(&server, |r| r.retries = 3))], None);
    assert_eq!(ask(&m, 1).unwrap(), "source_only");
    assert_eq!(server.requests(), 4);
    server.set_script(|_| Reply::Status { code: 500, retry_after: None, body: "still broken".into() });
    let e = ask(&m, 2).unwrap_err();
    assert!(matches!(e.kind, CallErrorKind::Exhausted { retries: 3, .. }), "{e}");
    assert_eq!(e.requests, 4);
    let text = e.to_string();
    assert!(text.contains("roles.classifier") && text.contains("HTTP 500") && text.contains("still broken"), "{text}");
    let u = m.usage()["classifier"];
    assert_eq!((u.requests, u.errors), (8, 1));
}

#[test]
fn a_hanging_reply_times_out_and_the_deadline_holds() {
    let server = Server::start(|_| Reply::Content(OK.into()));
    server.push([Reply::Hang(Duration::from_secs(30), OK.into())]);
    let m = models(&[("classifier", role(&server, |r| r.timeout_secs = 0.3))], None);
    let t = Instant::now();
    assert_eq!(ask(&m, 1).unwrap(), "source_only");
    assert!(t.elapsed() < Duration::from_secs(3), "took {:?}", t.elapsed());
    assert_eq!(server.requests(), 2);

    server.set_script(|_| Reply::Hang(Duration::from_secs(30), OK.into()));
    let m = models(
        &[(
            "classifier",
            role(&server, |r| {
                r.timeout_secs = 0.2;
                r.deadline_secs = 0.5;
                r.retries = 10;
            }),
        )],
        None,
    );
    let t = Instant::now();
    let e = ask(&m, 2).unwrap_err();
    assert!(matches!(e.kind, CallErrorKind::Deadline { .. }), "{e}");
    assert!(t.elapsed() < Duration::from_secs(2), "took {:?}", t.elapsed());
}

#[test]
fn a_malformed_reply_is_asked_again_once_with_the_parse_error() {
    let server = Server::start(|_| Reply::Content(OK.into()));
    server.push([Reply::Content("Sure! The label is source_only.".into())]);
    let m = models(&[("classifier", role(&server, |_| {}))], None);
    assert_eq!(ask(&m, 1).unwrap(), "source_only");
    let second = &server.seen()[1];
    let msgs = second.messages();
    assert_eq!(msgs.len(), 4, "{msgs:?}");
    assert_eq!(msgs[2], ("assistant".to_string(), "Sure! The label is source_only.".to_string()));
    assert!(msgs[3].1.contains("could not be used: not valid JSON"), "{}", msgs[3].1);

    server.set_script(|_| Reply::Content(r#"{"label": "both"}"#.into()));
    let e = ask(&m, 2).unwrap_err();
    assert!(matches!(e.kind, CallErrorKind::Malformed(_)), "{e}");
    assert!(e.to_string().contains("full_coverage or source_only"), "{e}");
    assert_eq!(e.requests, 2);
    assert_eq!(m.usage()["classifier"].errors, 1);
    assert_eq!(SPLITS.len(), 2);
}

#[test]
fn a_fatal_status_fails_at_once_and_never_shows_the_key() {
    let key = "sk-test-7f3a9c2e41d8b6";
    // SAFETY: the variable is unique to this test and set before any thread reads it.
    unsafe { std::env::set_var("EMEND_TEST_CLIENT_KEY", key) };
    let server = Server::start(|seen| Reply::Status {
        code: 401,
        retry_after: None,
        body: json!({"error": {"message": format!("invalid key {}", seen.authorization.clone().unwrap_or_default())}})
            .to_string(),
    });
    let m = models(&[("classifier", role(&server, |r| r.api_key_env = Some("EMEND_TEST_CLIENT_KEY".into())))], None);
    let e = ask(&m, 1).unwrap_err();
    assert_eq!(server.requests(), 1, "a 401 is not retried");
    assert_eq!(server.seen()[0].authorization.as_deref(), Some(format!("Bearer {key}").as_str()));
    let text = format!("{e} {e:?} {m:?}");
    assert!(text.contains("HTTP 401") && text.contains("[redacted]"), "{text}");
    assert!(!text.contains(key), "{text}");
}

#[test]
fn a_missing_key_variable_is_named_not_guessed() {
    let server = Server::start(|_| Reply::Content(OK.into()));
    let r = role(&server, |r| r.api_key_env = Some("EMEND_TEST_UNSET_VARIABLE".into()));
    let map: BTreeMap<String, RoleConfig> = [("judge".to_string(), r)].into();
    let e = Models::new(&map, None).unwrap_err();
    assert!(
        e.to_string()
            .contains("roles.judge.api_key_env: the environment variable EMEND_TEST_UNSET_VARIABLE is not set")
    );
}

#[test]
fn a_repeated_call_is_served_from_the_disk_cache() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(|_| Reply::Content(OK.into()));
    let m = models(&[("classifier", role(&server, |_| {}))], Some(dir.path()));
    ask(&m, 1).unwrap();
    ask(&m, 1).unwrap();
    assert_eq!(server.requests(), 1);
    assert_eq!(m.usage()["classifier"].cache_hits, 1);
    drop(m);
    // A new process (new models) reads the same file.
    let m = models(&[("classifier", role(&server, |_| {}))], Some(dir.path()));
    ask(&m, 1).unwrap();
    assert_eq!(server.requests(), 1);
    // Another model is another key.
    let other =
        models(&[("classifier", RoleConfig { model: "other".into(), ..role(&server, |_| {}) })], Some(dir.path()));
    ask(&other, 1).unwrap();
    assert_eq!(server.requests(), 2);
}

#[test]
fn concurrency_is_bounded_per_role() {
    let server = Server::start(|_| Reply::Hang(Duration::from_millis(60), OK.into()));
    let m = models(&[("classifier", role(&server, |r| r.concurrency = Some(3)))], None);
    let requests: Vec<Request> = (0..12).map(|i| Request::new("You diagnose why", format!("case {i}"))).collect();
    let t = Instant::now();
    let results = m.call_many(Role::Classifier, requests, parse_split);
    assert!(results.iter().all(|r| r.is_ok()));
    assert_eq!(server.requests(), 12);
    assert_eq!(server.max_in_flight(), 3);
    assert!(t.elapsed() >= Duration::from_millis(4 * 60), "{:?}", t.elapsed());
}
