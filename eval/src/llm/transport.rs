//! The HTTP transport of a role: async-openai's chat API (the `llm` feature).
//!
//! The library's built-in retry layer is replaced by [`StatusService`],
//! which turns every non-2xx response into an error that keeps the status
//! and `Retry-After`; [`classify`] turns every failure into an [`Attempt`]
//! for [`super::client::RoleClient::call`]'s retry policy.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use async_openai::Client;
use async_openai::config::OpenAIConfig;
use async_openai::error::OpenAIError;
use async_openai::middleware::{HttpRequestFactory, ReqwestService};
use async_openai::types::chat::{
    ChatCompletionRequestAssistantMessage, ChatCompletionRequestMessage, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestUserMessage, CreateChatCompletionRequest,
};
use tower_service::Service;

use super::wire::{Attempt, BODY_EXCERPT, Message, parse_retry_after};
use emend_core::config::RoleConfig;

/// Whether this binary can call a model endpoint.
pub const BUILT: bool = true;

fn to_openai(message: &Message) -> ChatCompletionRequestMessage {
    match message {
        Message::System(t) => ChatCompletionRequestSystemMessage::from(t.clone()).into(),
        Message::User(t) => ChatCompletionRequestUserMessage::from(t.clone()).into(),
        Message::Assistant(t) => ChatCompletionRequestAssistantMessage::from(t.clone()).into(),
    }
}

/// A non-2xx response, as [`StatusService`] reports it.
#[derive(Debug, thiserror::Error)]
#[error("HTTP {status}: {body}")]
struct HttpStatus {
    status: u16,
    retry_after: Option<Duration>,
    body: String,
}

/// The HTTP transport installed in async-openai's client instead of its
/// default stack (which retries by itself and drops response headers on
/// errors): plain reqwest, non-2xx responses turned into [`HttpStatus`].
#[derive(Clone, Default)]
struct StatusService {
    inner: ReqwestService,
}

type Response = <ReqwestService as Service<HttpRequestFactory>>::Response;

impl Service<HttpRequestFactory> for StatusService {
    type Response = Response;
    type Error = OpenAIError;
    type Future = Pin<Box<dyn Future<Output = Result<Response, OpenAIError>> + Send + 'static>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), OpenAIError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: HttpRequestFactory) -> Self::Future {
        let mut inner = self.inner.clone();
        Box::pin(async move {
            let response = inner.call(request).await?;
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            let retry_after =
                response.headers().get("retry-after").and_then(|v| v.to_str().ok()).and_then(parse_retry_after);
            let body = response.text().await.unwrap_or_default();
            let body: String = body.chars().take(BODY_EXCERPT).collect();
            Err(OpenAIError::Boxed(Box::new(HttpStatus { status: status.as_u16(), retry_after, body })))
        })
    }
}

fn classify(e: &OpenAIError) -> Attempt {
    let retry = |message: String, retry_after| Attempt::Retry { message, retry_after };
    match e {
        OpenAIError::Boxed(b) => match b.downcast_ref::<HttpStatus>() {
            Some(h) if h.status == 429 || h.status == 408 || h.status >= 500 => retry(h.to_string(), h.retry_after),
            Some(h) => Attempt::Fail(h.to_string()),
            None => retry(b.to_string(), None),
        },
        OpenAIError::ApiError(a) => {
            let s = a.status_code.as_u16();
            if s == 429 || s == 408 || s >= 500 { retry(a.to_string(), None) } else { Attempt::Fail(a.to_string()) }
        }
        OpenAIError::Reqwest(r) => retry(format!("transport error: {r}"), None),
        OpenAIError::JSONDeserialize(err, _) => retry(format!("unreadable response body: {err}"), None),
        other => Attempt::Fail(other.to_string()),
    }
}

/// One role's connection to its endpoint.
pub struct Transport {
    client: Client<OpenAIConfig>,
}

impl Transport {
    pub fn new(endpoint: &str, key: &str) -> Transport {
        // Everything explicit: nothing is taken from OPENAI_* variables.
        let config = OpenAIConfig::new().with_api_base(endpoint).with_api_key(key).with_org_id("").with_project_id("");
        Transport { client: Client::with_config(config).with_http_service(StatusService::default()) }
    }

    #[allow(deprecated)] // max_tokens: what OpenAI-compatible servers (vLLM, llama.cpp, Ollama) all accept
    pub(super) async fn send(
        &self,
        settings: &RoleConfig,
        messages: &[Message],
    ) -> Result<(String, u64, u64), Attempt> {
        let request = CreateChatCompletionRequest {
            messages: messages.iter().map(to_openai).collect(),
            model: settings.model.trim().to_string(),
            temperature: Some(settings.temperature as f32),
            max_tokens: Some(settings.max_tokens),
            ..Default::default()
        };
        let response = self.client.chat().create(request).await.map_err(|e| classify(&e))?;
        let (p, c) =
            response.usage.as_ref().map_or((0, 0), |u| (u64::from(u.prompt_tokens), u64::from(u.completion_tokens)));
        let text = response.choices.into_iter().next().and_then(|c| c.message.content).unwrap_or_default();
        Ok((text, p, c))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_are_classified() {
        let status = |s: u16| {
            classify(&OpenAIError::Boxed(Box::new(HttpStatus { status: s, retry_after: None, body: "x".into() })))
        };
        assert!(matches!(status(429), Attempt::Retry { .. }));
        assert!(matches!(status(503), Attempt::Retry { .. }));
        assert!(matches!(status(408), Attempt::Retry { .. }));
        assert_eq!(status(401), Attempt::Fail("HTTP 401: x".into()));
        assert!(matches!(status(404), Attempt::Fail(_)));
    }
}
