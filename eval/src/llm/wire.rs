//! What crosses the transport: the messages of a call, and what a failed
//! attempt means for the retry policy ([`super::client`]). Both transports
//! (with and without the `llm` feature) and the client use these.

use std::time::Duration;

use serde::Serialize;

/// How much of an error body is kept in a message.
pub const BODY_EXCERPT: usize = 300;

/// One chat message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Message {
    System(String),
    User(String),
    Assistant(String),
}

/// `Retry-After` in seconds (HTTP dates are not honoured: the backoff applies).
pub fn parse_retry_after(v: &str) -> Option<Duration> {
    let secs: f64 = v.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs.min(86_400.0)))
}

/// What to do about a failed attempt.
#[derive(Debug, Clone, PartialEq)]
pub enum Attempt {
    Retry { message: String, retry_after: Option<Duration> },
    Fail(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_read_in_seconds() {
        assert_eq!(parse_retry_after("2"), Some(Duration::from_secs(2)));
        assert_eq!(parse_retry_after(" 0.5 "), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
        assert_eq!(parse_retry_after("-1"), None);
    }
}
