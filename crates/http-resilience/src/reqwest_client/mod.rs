//! reqwest under the layers (feature `reqwest`): [`ResilientClient`], which
//! keeps reqwest's request builder and response, and [`ReqwestService`], a
//! `reqwest::Client` as a tower service.
//!
//! # `ResilientClient`
//!
//! A `reqwest::Client` behind a stack of the layers, used as reqwest is:
//! `client.get(url).query(..).bearer_auth(..).send().await` gives a
//! `reqwest::Response` (its status, headers, `url()`, and a body read with
//! `bytes()`, `text()` or `chunk()`), or an [`Error`] that keeps the
//! `reqwest::Error` when reqwest failed and the layers' error otherwise,
//! with the number of attempts.
//!
//! The stack is either form of the layers: the combined service
//! (`presets::standard().layer()`, a [`ResilienceLayer`](crate::ResilienceLayer)),
//! or the three layers in a `tower::ServiceBuilder`
//! (`DeadlineLayer -> StatusRetryLayer -> AttemptTimeoutLayer`); any
//! `Layer<ReqwestService>` goes to [`ResilientClient::new`], and a service
//! built otherwise to [`ResilientClient::from_service`].
//!
//! Besides the crates the README's "Use" section lists, the example needs
//! `reqwest = { version = "0.13", features = ["json"] }` and `serde = {
//! version = "1", features = ["derive"] }`.
//!
//! ```no_run
//! use http_resilience::{presets, reqwest_client::ResilientClient, Attempts};
//!
//! #[derive(serde::Serialize)]
//! struct Order {
//!     id: u32,
//! }
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // No timeout and no retries in reqwest: the layers do both.
//! let reqwest = reqwest::Client::builder()
//!     .retry(reqwest::retry::never())
//!     .build()?;
//! let client = ResilientClient::new(reqwest, presets::standard().layer());
//!
//! let response = client
//!     .post("http://127.0.0.1:8080/orders")
//!     .header("idempotency-key", "order-7") // a POST is sent again only with a key
//!     .json(&Order { id: 7 })
//!     .send()
//!     .await?;
//! let attempts = response.extensions().get::<Attempts>().map_or(1, Attempts::get);
//! println!("{} after {attempts} attempt(s): {}", response.status(), response.text().await?);
//! # Ok(())
//! # }
//! ```
//!
//! The three layers, composed:
//!
//! ```no_run
//! use http_resilience::{
//!     policy::{FixedDelay, StatusDecoder},
//!     reqwest_client::ResilientClient,
//!     retry::RetryPolicy,
//!     AttemptTimeoutLayer, DeadlineLayer, StatusRetryLayer,
//! };
//! use std::time::Duration;
//! use tower::ServiceBuilder;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let policy = RetryPolicy::new(StatusDecoder::new([503])?, FixedDelay::new(Duration::from_millis(10), 2));
//! let stack = ServiceBuilder::new()
//!     .layer(DeadlineLayer::new(Duration::from_secs(8)))
//!     .layer(StatusRetryLayer::new(policy))
//!     .layer(AttemptTimeoutLayer::new(Duration::from_secs(3)));
//! let client = ResilientClient::new(reqwest::Client::new(), stack);
//! # let _ = client;
//! # Ok(())
//! # }
//! ```
//!
//! # Request bodies
//!
//! A body in memory (`body(String)`, `body(Vec<u8>)`, `json`, `form`) is sent
//! again by every attempt. A stream (`reqwest::Body::wrap_stream`) is kept
//! while the first attempt sends it, up to the replay cap (64 KiB, or
//! [`ResilientClient::with_replay_cap`]): a retry replays what was kept; a
//! stream that went past the cap makes the request non-repeatable, and it is
//! sent once. A stream never read (the connection was refused) passes whole
//! to the next attempt. Which requests are sent again after they reached the
//! upstream is the retry policy's rule: by default only idempotent ones
//! (GET, HEAD, PUT, DELETE, ..., a request with an `Idempotency-Key` header,
//! or one marked with the [`Idempotency`](crate::policy::Idempotency)
//! extension through [`ResilientRequestBuilder::extension`]).
//!
//! A body in memory reaches reqwest as its own bytes, so that reqwest follows
//! a 307 or a 308 (which sends the body again) as it does alone. A stream
//! with a replay cap larger than the socket's buffers can wait behind an
//! attempt its upstream stopped reading: the abandoned connection holds the
//! rest of the stream until hyper closes it, and the retry follows it, up to
//! its own attempt timeout. Keep the cap small for uploads to upstreams that
//! may stall, or send large bodies as a
//! [`ReopenBody`](crate::body::ReopenBody) through [`ReqwestService`].
//!
//! # What reaches the caller
//!
//! - **The response** is the stack's, converted with reqwest's own
//!   `From<http::Response<_>>`: status, version, headers and extensions are
//!   kept, so the retry layer's [`Attempts`](crate::Attempts) is in
//!   `response.extensions()` (a response accepted at its first attempt carries
//!   none: count 1). Its `url()` is the one the transport answered from (after
//!   redirects), recorded by [`ReqwestService`]. Reading the body runs under
//!   the call's deadline and the read timeout; a body that fails gives a
//!   `reqwest::Error` (`is_body` or `is_decode`) whose `source()` chain holds
//!   the layers' error, which [`FailureKind::of`](crate::FailureKind::of) finds.
//! - **An error** is an [`Error`]: [`Error::reqwest`] when reqwest failed,
//!   [`Error::kind`] for every failure, [`Error::attempts`] for the count
//!   (read from a [`RetryReport`](crate::RetryReport) the client puts in each
//!   request; one the caller put there with
//!   [`extension`](ResilientRequestBuilder::extension) is used instead and
//!   keeps the record too).
//!
//! # A limit on the gaps between reads
//!
//! reqwest's `ClientBuilder::read_timeout` bounds each read, but its error is
//! reqwest's timeout, which [`FailureKind`](crate::FailureKind) cannot tell
//! from another transport failure. The layers' own read timeout goes under
//! the stack instead, around the [`ReqwestService`]:
//! [`ReadTimeoutLayer`](crate::read_timeout::ReadTimeoutLayer) bounds the
//! wait for the response head (counted from the first poll: connecting
//! included, since reqwest reports no connection) and every gap between body
//! frames, and fails with
//! [`ReadTimedOut`](crate::read_timeout::error::ReadTimedOut),
//! [`FailureKind::ReadTimeout`](crate::FailureKind::ReadTimeout).
//!
//! ```no_run
//! use http_resilience::{presets, read_timeout::ReadTimeoutLayer, reqwest_client::ResilientClient};
//! use std::time::Duration;
//! use tower::ServiceBuilder;
//!
//! let stack = ServiceBuilder::new()
//!     .layer(presets::standard().layer())
//!     .layer(ReadTimeoutLayer::new(Duration::from_secs(5))); // the longest gap between reads
//! let client = ResilientClient::new(reqwest::Client::new(), stack);
//! # let _ = client;
//! ```
//!
//! # `ReqwestService`
//!
//! [`ReqwestService`] takes an `http::Request<B>` of any `Sync` body `B` (a
//! [`ReplayBody`](crate::body::ReplayBody), a
//! [`ReopenBody`](crate::body::ReopenBody) or a [`RequestBody`] included), sends it with the
//! client, and answers an `http::Response<reqwest::Body>` or a
//! [`BoxError`] whose source is the `reqwest::Error`. The response carries
//! the URL it came from where `reqwest::Response::from` finds it. The decoders and
//! [`FailureKind::of`](crate::FailureKind::of) read reqwest's failures: a
//! connect failure is a connect kind (refused, timed out), a failure while
//! sending or reading is a transport kind.
//!
//! Credentials in a request's URI (`http://user:password@host/`) go as
//! `Authorization: Basic`, unless the request already has an `Authorization`
//! header, and the URI reaches reqwest without them. reqwest's request
//! builder does the same (so [`ResilientClient`] hands over URIs without
//! them already), but its `Client::execute` of an `http::Request` does not:
//! it would send no credentials and keep them in its pool's keys, which its
//! connection pool logs in `tracing` events inside the layers' spans. They
//! are taken out as [`transport`](crate::transport)'s client takes them out
//! (the user and the password percent-decoded, a missing password as an
//! empty one, the header marked sensitive).
//!
//! ```no_run
//! use http_resilience::{presets, reqwest_client::ReqwestService, BoxError};
//! use tower::{Layer, ServiceExt};
//!
//! # #[tokio::main]
//! # async fn main() -> Result<(), BoxError> {
//! let client = reqwest::Client::builder().retry(reqwest::retry::never()).build()?;
//! let svc = presets::standard().layer().layer(ReqwestService::new(client));
//! let request = http::Request::get("http://127.0.0.1:8080/value").body(String::new())?;
//! let response = svc.oneshot(request).await?;
//! println!("{}", response.status());
//! # Ok(())
//! # }
//! ```
//!
//! # How it differs from reqwest's own retries
//!
//! reqwest's `retry` module retries without backoff or `Retry-After`, and
//! reqwest-retry ignores `Retry-After` and idempotency, refuses streamed
//! bodies, and has no deadline over the waits and the body. Under these layers the client should do neither:
//! build it with no timeout of its own (the layers' deadline and attempt
//! timeout bound the call, the body included) and with its retries off
//! (`reqwest::retry::never()`), so that every attempt is one the retry layer
//! counts.

mod body;
mod builder;
mod client;
mod error;

pub use self::{
    body::RequestBody, builder::ResilientRequestBuilder, client::ResilientClient, error::Error,
};

use crate::{BoxError, Wrapper};
use bytes::Bytes;
use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};
use tower_service::Service;

/// A `reqwest::Client` as a `Service<http::Request<B>>`; see the
/// [module docs](self).
#[derive(Clone)]
pub struct ReqwestService {
    client: reqwest::Client,
}

impl ReqwestService {
    /// Sends requests with `client`.
    pub const fn new(client: reqwest::Client) -> Self {
        Self { client }
    }
}

/// The inner service is the `reqwest::Client` the requests are sent with.
impl Wrapper for ReqwestService {
    type Inner = reqwest::Client;

    fn get_ref(&self) -> &reqwest::Client {
        &self.client
    }

    fn into_inner(self) -> reqwest::Client {
        self.client
    }
}

impl fmt::Debug for ReqwestService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReqwestService").finish_non_exhaustive()
    }
}

/// `body` as reqwest takes it: a [`RequestBody`] as its bytes or its stream
/// ([`RequestBody::into_reqwest`]), any other body as a stream.
fn into_reqwest_body<B>(body: B) -> reqwest::Body
where
    B: http_body::Body + Send + Sync + 'static,
    B::Data: Into<Bytes>,
    B::Error: Into<BoxError>,
{
    let mut slot = Some(body);
    if let Some(ours) = (&mut slot as &mut dyn std::any::Any).downcast_mut::<Option<RequestBody>>()
    {
        return ours.take().expect("the body is there").into_reqwest();
    }
    reqwest::Body::wrap(slot.take().expect("the body is there"))
}

impl<B> Service<http::Request<B>> for ReqwestService
where
    B: http_body::Body + Send + Sync + 'static,
    B::Data: Into<Bytes>,
    B::Error: Into<BoxError>,
{
    type Response = http::Response<reqwest::Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // NOTE: reqwest's client is always ready: it queues inside.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        error::classify_reqwest();
        let client = self.client.clone();
        let moved = crate::userinfo::move_to_authorization(&mut request);
        let request = request.map(into_reqwest_body);
        Box::pin(async move {
            moved?;
            let request = reqwest::Request::try_from(request)?;
            let response = client.execute(request).await?;
            let url = client::url_extension(response.url().clone());
            let mut response = http::Response::from(response);
            response.extensions_mut().extend(url);
            Ok(response)
        })
    }
}
