//! A model endpoint's malformed 200 replies never reach the logs verbatim, and a key echoed
//! in them is never shown: only the parse error is reported.

use crate::llm_support;

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
    let out = std::process::Command::new(crate::support::bin())
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

/// Every file under `dir`, recursively.
fn files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().is_dir() {
            out.extend(files(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

#[test]
fn a_key_echoed_in_replies_is_redacted_before_anything_is_written() {
    use llm_support::{default_reply, role_yaml};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("p");
    // The answerer echoes the request's Authorization header, an api-key field and an
    // internal token; the judge's reason echoes the header too.
    let server = Server::start(|seen| match (seen.role(), default_reply(seen)) {
        ("answerer", Reply::Content(answer)) => Reply::Content(format!(
            "{answer} (Authorization: {}; \"api-key\": \"{KEY}\"; ticket internal-token-ABC123)",
            seen.authorization.clone().unwrap_or_default()
        )),
        ("judge", Reply::Content(verdict)) => Reply::Content(verdict.replace(
            "word overlap",
            &format!("word overlap; Authorization: {}", seen.authorization.clone().unwrap_or_default()),
        )),
        (_, reply) => reply,
    });
    let roles: String = ["extractor", "answerer", "judge", "critic", "evolver", "classifier"]
        .iter()
        .map(|r| role_yaml(r, &server.url, &format!("{r}-model"), ", redact: ['internal-token-[A-Z0-9]+']"))
        .collect();
    project(&dir, "llm", &roles);
    let eval = [
        "eval",
        "--strategy",
        "initial.yaml",
        "--tasks",
        "tasks.json",
        "--judge",
        "llm",
        "--json",
        "--outcomes",
        "out.jsonl",
    ];
    let (code, out, err) = emend(&dir, &eval);
    assert_eq!(code, 0, "{out}{err}");
    let roles: Vec<String> = server.seen().iter().map(|s| s.role().to_string()).collect();
    assert!(server.count("answerer") > 0, "{roles:?} {out}");
    let (code, evolved, err2) = emend(&dir, &["evolve", "--rounds", "1", "--max-evals", "1", "--quiet"]);
    assert_eq!(code, 0, "{evolved}{err2}");
    let (code, journal, _) = emend(&dir, &["journal", "export"]);
    assert_eq!(code, 0);
    for (what, text) in [("stdout", &out), ("stderr", &err), ("evolve", &err2), ("journal export", &journal)] {
        assert_no_key(what, text);
        assert!(!text.contains("internal-token-ABC123"), "{what} shows a configured secret");
    }
    let cache = std::fs::read_to_string(dir.join(".emend/cache/llm/replies.jsonl")).unwrap();
    assert!(
        cache.contains("Authorization: [redacted]") && cache.contains("\\\"api-key\\\": \\\"[redacted]"),
        "{cache}"
    );
    assert!(cache.contains("ticket [redacted]"), "{cache}");
    let mut checked = 0;
    for path in files(&dir) {
        let bytes = std::fs::read(&path).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert_no_key(&path.display().to_string(), &text);
        assert!(!text.contains("internal-token-ABC123"), "{} holds a configured secret", path.display());
        checked += 1;
    }
    assert!(checked > 5, "{checked} files");
}
