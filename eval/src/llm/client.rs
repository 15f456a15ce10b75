//! One role's client: a chat endpoint (the transport, with the `llm`
//! feature) with emend's own retry policy instead of the library's.
//!
//! The transport turns every non-2xx response into an error that keeps the
//! status and `Retry-After`, so that [`RoleClient::call`] decides: 429, 408, 5xx,
//! timeouts, connection errors and unreadable bodies are retried with
//! exponential backoff and jitter (Retry-After wins when the server sends
//! it) up to `retries` times and within `deadline_secs`; other statuses
//! fail at once. Each request is bounded by `timeout_secs`, and a role
//! never has more than `concurrency` calls in flight (a tokio semaphore,
//! held across backoff waits so a rate-limited role slows down as a whole).
//! A reply that does not parse is answered once with the parse error; a
//! second bad reply fails the call.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::cache::ReplyCache;
use super::transport::Transport;
use super::wire::{Attempt, BODY_EXCERPT, Message};
use super::{PROMPTS_VERSION, Role, RoleUsage};
use emend_core::config::RoleConfig;

/// Longest backoff between two attempts when the server sends no Retry-After.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A call's messages (the role's settings add model, temperature and max tokens).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Request {
    pub messages: Vec<Message>,
}

impl Request {
    pub fn new(system: impl Into<String>, user: impl Into<String>) -> Request {
        Request { messages: vec![Message::System(system.into()), Message::User(user.into())] }
    }
}

/// A call that failed after its retries.
#[derive(Debug, Clone, thiserror::Error)]
#[error("roles.{role}: {kind} ({requests} request(s))")]
pub struct CallError {
    pub role: Role,
    /// Requests sent for this call.
    pub requests: u32,
    #[source]
    pub kind: CallErrorKind,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum CallErrorKind {
    /// Retries exhausted on retryable failures; the last one.
    #[error("gave up after {retries} retries: {last}")]
    Exhausted { retries: u32, last: String },
    /// The call's deadline passed (or the next wait would pass it).
    #[error("deadline of {deadline_secs} s passed: {last}")]
    Deadline { deadline_secs: f64, last: String },
    /// The reply did not have the expected form, twice.
    #[error("malformed reply, also after quoting the parse error back: {0}")]
    Malformed(String),
    /// A failure that retrying cannot fix (401, 404, 400...).
    #[error("{0}")]
    Fatal(String),
}

/// What may be kept of a model endpoint's text in an error or a log line: never the text
/// verbatim. Secrets are redacted ([`redact_secrets`]), and the rest is cut to
/// [`BODY_EXCERPT`] characters.
pub fn redact(text: &str, key: &str) -> String {
    excerpt(redact_secrets(text, key, &[]))
}

/// Header values that are secrets whatever the key: `Authorization`, `api-key` and the like,
/// as an echoed header (`Authorization: ...`) or a JSON or query field (`"api-key": "..."`).
static SECRET_HEADERS: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    regex::Regex::new(r#"(?i)\b((?:proxy-)?authorization|x-api-key|api[-_]key)("?\s*[:=]\s*"?)([^"\r\n,;&]+)"#)
        .expect("the header pattern compiles")
});

/// `text` with every secret replaced by `[redacted]`: the configured key (and its first
/// half, which a truncated echo may hold), any `Bearer` token, `Authorization` and
/// `api-key` values, and the matches of `patterns` (`roles.<role>.redact`). Applied to a
/// reply before it is cached, parsed, journaled or logged.
pub fn redact_secrets(text: &str, key: &str, patterns: &[regex::Regex]) -> String {
    let mut out = text.to_string();
    let key = key.trim();
    if key.len() >= 4 {
        out = out.replace(key, "[redacted]");
        let half: String = key.chars().take(key.chars().count() / 2).collect();
        if half.len() >= 8 {
            out = out.replace(&half, "[redacted]");
        }
    }
    let mut rest = out.as_str();
    let mut clean = String::with_capacity(out.len());
    while let Some(i) = rest.find("Bearer ") {
        clean.push_str(&rest[..i + 7]);
        let after = &rest[i + 7..];
        let end = after.find(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == ',').unwrap_or(after.len());
        if end > 0 {
            clean.push_str("[redacted]");
        }
        rest = &after[end..];
    }
    clean.push_str(rest);
    let mut clean = SECRET_HEADERS.replace_all(&clean, "${1}${2}[redacted]").into_owned();
    for p in patterns {
        clean = p.replace_all(&clean, "[redacted]").into_owned();
    }
    clean
}

/// `clean` cut to [`BODY_EXCERPT`] characters.
fn excerpt(clean: String) -> String {
    let total = clean.chars().count();
    if total > BODY_EXCERPT {
        let mut cut: String = clean.chars().take(BODY_EXCERPT).collect();
        cut.push_str(&format!("... ({} more characters not shown)", total - BODY_EXCERPT));
        cut
    } else {
        clean
    }
}

/// The wait before retry number `retry` (0-based): Retry-After when given,
/// else `base * 2^retry` capped at [`MAX_BACKOFF`], scaled into [1/2, 1] by
/// `jitter` (in [0, 1)) so that concurrent callers spread out.
pub fn backoff(retry: u32, base: Duration, retry_after: Option<Duration>, jitter: f64) -> Duration {
    if let Some(d) = retry_after {
        return d;
    }
    let full = base.saturating_mul(1u32 << retry.min(20)).min(MAX_BACKOFF);
    full.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    prompt_tokens: AtomicU64,
    completion_tokens: AtomicU64,
    cache_hits: AtomicU64,
    errors: AtomicU64,
    retries: AtomicU64,
}

fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// One configured role.
pub struct RoleClient {
    role: Role,
    endpoint: String,
    settings: RoleConfig,
    transport: Transport,
    /// Only to scrub it from error text and replies a server might echo.
    key: String,
    /// `roles.<role>.redact`, compiled.
    patterns: Vec<regex::Regex>,
    permits: tokio::sync::Semaphore,
    cache: Arc<ReplyCache>,
    counters: Counters,
}

impl RoleClient {
    pub fn new(role: Role, settings: &RoleConfig, key: String, cache: Arc<ReplyCache>) -> RoleClient {
        let endpoint = settings.base_url.trim().trim_end_matches('/').to_string();
        let transport = Transport::new(&endpoint, &key);
        RoleClient {
            role,
            endpoint,
            settings: settings.clone(),
            transport,
            key,
            // check_roles refused a pattern that does not compile.
            patterns: settings.redact.iter().filter_map(|p| regex::Regex::new(p).ok()).collect(),
            permits: tokio::sync::Semaphore::new(settings.in_flight()),
            cache,
            counters: Counters::default(),
        }
    }

    /// What determines a reply besides the request: part of cache keys and harness hashes.
    pub fn identity(&self) -> String {
        format!(
            "{}/{PROMPTS_VERSION} {} {} temperature={} max_tokens={}",
            self.role,
            self.endpoint,
            self.settings.model.trim(),
            self.settings.temperature,
            self.settings.max_tokens
        )
    }

    pub fn usage(&self) -> RoleUsage {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let c = &self.counters;
        RoleUsage {
            requests: g(&c.requests),
            prompt_tokens: g(&c.prompt_tokens),
            completion_tokens: g(&c.completion_tokens),
            cache_hits: g(&c.cache_hits),
            errors: g(&c.errors),
            retries: g(&c.retries),
        }
    }

    fn cache_key(&self, request: &Request) -> String {
        let doc = serde_json::json!({
            "role": self.role.as_str(),
            "identity": self.identity(),
            "messages": request.messages,
        });
        hex::encode(Sha256::digest(serde_json::to_vec(&doc).expect("a request serializes")))
    }

    fn scrub(&self, text: String) -> String {
        excerpt(redact_secrets(&text, &self.key, &self.patterns))
    }

    fn fail<T>(&self, requests: u32, kind: CallErrorKind) -> Result<T, CallError> {
        bump(&self.counters.errors, 1);
        let kind = match kind {
            CallErrorKind::Exhausted { retries, last } => CallErrorKind::Exhausted { retries, last: self.scrub(last) },
            CallErrorKind::Deadline { deadline_secs, last } => {
                CallErrorKind::Deadline { deadline_secs, last: self.scrub(last) }
            }
            CallErrorKind::Malformed(m) => CallErrorKind::Malformed(self.scrub(m)),
            CallErrorKind::Fatal(m) => CallErrorKind::Fatal(self.scrub(m)),
        };
        Err(CallError { role: self.role, requests, kind })
    }

    /// One call: the cached reply when there is one, else requests with
    /// retries until `parse` accepts a reply.
    pub async fn call<T>(&self, request: &Request, parse: fn(&str) -> Result<T, String>) -> Result<T, CallError> {
        let key = self.cache_key(request);
        if let Some(text) = self.cache.get(&key)
            && let Ok(v) = parse(&text)
        {
            bump(&self.counters.cache_hits, 1);
            return Ok(v);
        }
        let _permit = self.permits.acquire().await.expect("the semaphore is never closed");
        let timeout = Duration::from_secs_f64(self.settings.timeout_secs);
        let deadline_secs = self.settings.deadline_secs;
        let deadline = Instant::now() + Duration::from_secs_f64(deadline_secs);
        let base = Duration::from_secs_f64(self.settings.backoff_secs);
        let mut messages = request.messages.clone();
        let (mut requests, mut retries, mut reparsed) = (0u32, 0u32, false);
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return self.fail(requests, CallErrorKind::Deadline { deadline_secs, last: "no time left".into() });
            }
            requests += 1;
            bump(&self.counters.requests, 1);
            let per_try = timeout.min(remaining);
            let attempt = match tokio::time::timeout(per_try, self.transport.send(&self.settings, &messages)).await {
                Ok(Ok((text, prompt_tokens, completion_tokens))) => {
                    // Nothing downstream (the cache, the journal, a log) sees a secret the server echoed.
                    let text = redact_secrets(&text, &self.key, &self.patterns);
                    bump(&self.counters.prompt_tokens, prompt_tokens);
                    bump(&self.counters.completion_tokens, completion_tokens);
                    match parse(&text) {
                        Ok(v) => {
                            self.cache.put(&key, self.role.as_str(), &text);
                            return Ok(v);
                        }
                        Err(e) if !reparsed => {
                            reparsed = true;
                            messages.push(Message::Assistant(text));
                            messages.push(Message::User(format!(
                                "Your reply could not be used: {e}. Reply again with only what was asked for, in the exact format described."
                            )));
                            continue;
                        }
                        Err(e) => return self.fail(requests, CallErrorKind::Malformed(e)),
                    }
                }
                Ok(Err(attempt)) => attempt,
                Err(_) if per_try < timeout => {
                    return self.fail(
                        requests,
                        CallErrorKind::Deadline {
                            deadline_secs,
                            last: format!("no reply within {:.1} s", per_try.as_secs_f64()),
                        },
                    );
                }
                Err(_) => Attempt::Retry {
                    message: format!("no reply within {} s", self.settings.timeout_secs),
                    retry_after: None,
                },
            };
            match attempt {
                Attempt::Fail(m) => return self.fail(requests, CallErrorKind::Fatal(m)),
                Attempt::Retry { message, retry_after } => {
                    if retries >= self.settings.retries {
                        return self.fail(requests, CallErrorKind::Exhausted { retries, last: message });
                    }
                    let wait = backoff(retries, base, retry_after, jitter(&key, retries));
                    if Instant::now() + wait >= deadline {
                        let last =
                            format!("{message}; the next attempt (in {:.1} s) would pass it", wait.as_secs_f64());
                        return self.fail(requests, CallErrorKind::Deadline { deadline_secs, last });
                    }
                    retries += 1;
                    bump(&self.counters.retries, 1);
                    tokio::time::sleep(wait).await;
                }
            }
        }
    }
}

/// A jitter fraction in [0, 1) derived from the call and the retry number:
/// concurrent calls spread out, and a rerun waits the same.
fn jitter(key: &str, retry: u32) -> f64 {
    let h = Sha256::digest(format!("{key}/{retry}").as_bytes());
    let n = u64::from_le_bytes(h[..8].try_into().expect("8 bytes"));
    (n >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_retry_after_wins() {
        let base = Duration::from_millis(500);
        assert_eq!(backoff(0, base, None, 1.0), Duration::from_millis(500));
        assert_eq!(backoff(0, base, None, 0.0), Duration::from_millis(250));
        assert_eq!(backoff(2, base, None, 1.0), Duration::from_secs(2));
        assert_eq!(backoff(30, base, None, 1.0), MAX_BACKOFF);
        assert_eq!(backoff(3, base, Some(Duration::from_secs(7)), 0.3), Duration::from_secs(7));
        let j = jitter("k", 0);
        assert!((0.0..1.0).contains(&j));
        assert_eq!(j, jitter("k", 0));
        assert_ne!(j, jitter("k", 1));
    }
}
