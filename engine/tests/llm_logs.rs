//! A model endpoint's malformed 200 replies never reach the logs verbatim, and a key echoed
//! in them is never shown: only the parse error is reported.

mod llm_support;

use llm_support::{KEY, Reply, Server, all_roles, assert_no_key, emend, project};

#[test]
fn a_malformed_reply_echoing_the_key_is_never_logged_verbatim() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    // Every reply: HTTP 200 with a body that is not a chat completion, echoing the key.
    let body = format!("{{\"echo\": \"Authorization: Bearer {KEY}\", \"padding\": \"MARKER-{}\"", "z".repeat(2000));
    let server = Server::start(move |_| Reply::Raw(body.clone()));
    project(&dir, "llm", &all_roles(&server.url));
    let (code, out, err) = emend(&dir, &["evolve", "--rounds", "1", "--quiet"]);
    assert!(server.requests() > 0, "no model was called: {code} {out}{err}");
    assert_ne!(code, 0, "every reply is malformed, so the served evaluation fails: {out}{err}");
    assert_no_key("stderr", &err);
    assert_no_key("stdout", &out);
    assert!(!err.contains("MARKER-"), "a reply body reached stderr: {}", &err[..err.len().min(2000)]);
    assert!(err.len() < 20_000, "stderr is {} bytes", err.len());
    // Even at RUST_LOG=info the client library's verbatim dump stays off.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_emend"))
        .current_dir(&dir)
        .env("EMEND_TEST_KEY", KEY)
        .env("RUST_LOG", "info")
        .args(["eval", "--strategy", "initial.yaml", "--tasks", "tasks.json", "--judge", "llm", "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_no_key("stderr at info", &err);
    assert!(!err.contains("MARKER-"), "a reply body reached stderr at info level");
}
