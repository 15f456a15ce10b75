//! An OpenAI-compatible test server: a small HTTP/1.1 server on
//! 127.0.0.1 (tokio, keep-alive) that answers `POST /v1/chat/completions`
//! with whatever a script says, and records every request. For the tests
//! and benchmarks of the model roles (feature `test-support`), never a release build.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A scripted reply.
#[derive(Debug, Clone)]
pub enum Reply {
    /// 200 with this assistant message content.
    Content(String),
    /// Another status, with an optional Retry-After header and a body.
    Status { code: u16, retry_after: Option<String>, body: String },
    /// Wait this long, then answer with the content (the client gives up first).
    Hang(Duration, String),
    /// 200 with a body that is not a chat completion.
    Raw(String),
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub authorization: Option<String>,
    pub body: Value,
}

impl Seen {
    pub fn model(&self) -> &str {
        self.body["model"].as_str().unwrap_or("")
    }
    /// The messages as (role, content).
    pub fn messages(&self) -> Vec<(String, String)> {
        self.body["messages"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|m| {
                        (m["role"].as_str().unwrap_or("").to_string(), m["content"].as_str().unwrap_or("").to_string())
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
    pub fn system(&self) -> String {
        self.messages().into_iter().find(|m| m.0 == "system").map(|m| m.1).unwrap_or_default()
    }
    pub fn user(&self) -> String {
        self.messages().into_iter().find(|m| m.0 == "user").map(|m| m.1).unwrap_or_default()
    }
    /// Which emend role sent it, from the engine's system prompt.
    pub fn role(&self) -> &'static str {
        let s = self.system();
        if s.starts_with("You extract facts") {
            "extractor"
        } else if s.starts_with("You answer questions") {
            "answerer"
        } else if s.starts_with("You grade answers") {
            "judge"
        } else if s.starts_with("You are the critic") {
            "critic"
        } else if s.starts_with("You improve one text field") {
            "evolver"
        } else if s.starts_with("You diagnose why") {
            "classifier"
        } else {
            "unknown"
        }
    }
}

type Script = Box<dyn Fn(&Seen) -> Reply + Send + Sync>;

struct State {
    script: Mutex<Script>,
    /// Replies served first, in order, before the script.
    queue: Mutex<VecDeque<Reply>>,
    seen: Mutex<Vec<Seen>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

pub struct Server {
    /// `http://127.0.0.1:PORT/v1`
    pub url: String,
    state: Arc<State>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Server {
    pub fn start(script: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Server {
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).expect("bind");
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(State {
            script: Mutex::new(Box::new(script)),
            queue: Mutex::new(VecDeque::new()),
            seen: Mutex::new(Vec::new()),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
        });
        let st = state.clone();
        runtime.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let st = st.clone();
                tokio::spawn(async move {
                    let _ = serve(stream, st).await;
                });
            }
        });
        Server { url: format!("http://127.0.0.1:{port}/v1"), state, runtime: Some(runtime) }
    }

    /// The default script: plausible replies for every emend role.
    pub fn roles() -> Server {
        Server::start(default_reply)
    }

    pub fn set_script(&self, script: impl Fn(&Seen) -> Reply + Send + Sync + 'static) {
        *self.state.script.lock().unwrap() = Box::new(script);
    }

    /// Serves these replies first, one per request, in order.
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        self.state.queue.lock().unwrap().extend(replies);
    }

    pub fn requests(&self) -> usize {
        self.state.seen.lock().unwrap().len()
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    pub fn count(&self, role: &str) -> usize {
        self.seen().iter().filter(|s| s.role() == role).count()
    }

    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(Ordering::SeqCst)
    }
}

/// Plausible replies: facts that quote each turn, the context's first line
/// as the answer, CORRECT when the answer shares a word with the gold
/// answer, `actionable` from the critic, a marker-keeping rewrite from the
/// evolver, `full_coverage` from the classifier.
pub fn default_reply(seen: &Seen) -> Reply {
    let user = seen.user();
    Reply::Content(match seen.role() {
        "extractor" => {
            let facts: Vec<Value> = user
                .lines()
                .filter_map(|l| {
                    let l = l.trim();
                    let rest = l.strip_prefix('[')?;
                    let (id, text) = rest.split_once("] ")?;
                    Some(json!({"fact": text, "turns": [id]}))
                })
                .collect();
            json!({ "facts": facts }).to_string()
        }
        "answerer" => {
            let ctx = user.split("<context>").nth(1).unwrap_or("").trim_start();
            let line = ctx.lines().next().unwrap_or("").to_string();
            let line = line.split_once(": ").map_or(line.clone(), |(_, t)| t.to_string());
            if line.is_empty() || line.starts_with("</context>") { "unknown".to_string() } else { line }
        }
        "judge" => {
            let data = between(&user, "<data>", "</data>");
            let v: Value = serde_json::from_str(data.trim()).unwrap_or(Value::Null);
            let words = |s: &str| {
                s.to_lowercase()
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| w.len() > 2)
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            };
            let gold = words(v["gold_answer"].as_str().unwrap_or(""));
            let answer = words(v["generated_answer"].as_str().unwrap_or(""));
            let ok = gold.iter().any(|g| answer.contains(g));
            json!({"label": if ok { "CORRECT" } else { "WRONG" }, "reason": "word overlap"}).to_string()
        }
        "critic" => json!({"label": "actionable", "reason": "plausible"}).to_string(),
        "evolver" => json!({
            "path": "answer.prompt",
            "value": "Use the memories below to answer briefly.\n<context>\n{context}\n</context>\nQuestion: {question}\nShort answer:",
            "rationale": "shorter",
        })
        .to_string(),
        "classifier" => json!({"label": "full_coverage", "reason": "stated"}).to_string(),
        _ => "?".to_string(),
    })
}

pub fn between<'a>(s: &'a str, a: &str, b: &str) -> &'a str {
    let start = s.find(a).map_or(0, |i| i + a.len());
    let end = s[start..].find(b).map_or(s.len(), |i| start + i);
    &s[start..end]
}

async fn serve(mut stream: TcpStream, st: Arc<State>) -> std::io::Result<()> {
    let mut buf: Vec<u8> = Vec::new();
    loop {
        // Headers.
        let header_end = loop {
            if let Some(i) = find(&buf, b"\r\n\r\n") {
                break i;
            }
            let mut chunk = [0u8; 8192];
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..header_end]).to_string();
        let mut length = 0usize;
        let mut authorization = None;
        for line in head.lines().skip(1) {
            if let Some((k, v)) = line.split_once(':') {
                match k.trim().to_ascii_lowercase().as_str() {
                    "content-length" => length = v.trim().parse().unwrap_or(0),
                    "authorization" => authorization = Some(v.trim().to_string()),
                    _ => {}
                }
            }
        }
        while buf.len() < header_end + 4 + length {
            let mut chunk = [0u8; 8192];
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let body: Value = serde_json::from_slice(&buf[header_end + 4..header_end + 4 + length]).unwrap_or(Value::Null);
        buf.drain(..header_end + 4 + length);
        let seen = Seen { authorization, body };
        st.seen.lock().unwrap().push(seen.clone());
        let now = st.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        st.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let reply = st.queue.lock().unwrap().pop_front().unwrap_or_else(|| (st.script.lock().unwrap())(&seen));
        let (status, extra, body) = match reply {
            Reply::Content(c) => (200, String::new(), completion(&seen, &c)),
            Reply::Status { code, retry_after, body } => {
                (code, retry_after.map(|r| format!("Retry-After: {r}\r\n")).unwrap_or_default(), body)
            }
            Reply::Hang(d, c) => {
                tokio::time::sleep(d).await;
                (200, String::new(), completion(&seen, &c))
            }
            Reply::Raw(b) => (200, String::new(), b),
        };
        st.in_flight.fetch_sub(1, Ordering::SeqCst);
        let response = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}Connection: keep-alive\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(response.as_bytes()).await?;
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn completion(seen: &Seen, content: &str) -> String {
    let prompt_tokens = seen.messages().iter().map(|m| m.1.split_whitespace().count()).sum::<usize>();
    let completion_tokens = content.split_whitespace().count();
    json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": seen.model(),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens, "total_tokens": prompt_tokens + completion_tokens},
    })
    .to_string()
}
