//! Resumable response bodies: a download that fails part-way continues with a
//! ranged request (`Range: bytes=N-`, `If-Range`), under the call's deadline,
//! and the caller reads one seamless body.
//!
//! The retry layers decide at the response head; once the head is returned the
//! call is committed, and a body that then fails (the connection reset or
//! closed, no data within the read timeout) is lost. [`Resume`] heals such a
//! body when it is safe: it asks the upstream for the rest of the *same*
//! representation, and checks that what comes back is exactly that before it
//! splices it in.
//!
//! # When a body is resumed
//!
//! Only when every condition holds; otherwise the body passes through
//! untouched, and costs a check of the response's headers:
//!
//! - the request is a `GET` without a body (for it, [`Resume`] keeps a clone of
//!   the inner service and of the request's URI, version, headers and
//!   extensions: the parts of the ranged request);
//! - the first response is a `200` with `Accept-Ranges: bytes`, a strong
//!   validator (an `ETag` not marked `W/`; with no `ETag` at all, a
//!   `Last-Modified` at least a second before the response's `Date`, which RFC
//!   9110 calls strong), and no `Content-Encoding` (a range of an encoded
//!   representation counts encoded bytes);
//! - the body fails with an error of the transport: a reset, a close before the
//!   end, a [read timeout](crate::read_timeout), another transport failure
//!   such as an HTTP/2 stream reset. The deadline, an error of the caller's own
//!   service or body, and this module's own errors end the body as they are;
//! - resumes are left ([`ResumePolicy::new`]; each ranged request
//!   counts), and the call's deadline, the [`RequestDeadline`] in the request,
//!   has not passed and leaves at least [`ResumePolicy::with_min_remaining`].
//!
//! A failure that is not resumed is returned as it is.
//!
//! # What is checked
//!
//! The ranged request is the first one again with `Range: bytes=N-` (`N` the
//! bytes received so far) and `If-Range` carrying the validator, sent on the
//! clone of the inner service once it is ready. Its answer must be a `206` with
//! `Content-Range: bytes N-END/TOTAL`, `TOTAL` the first response's
//! `Content-Length` (when it had one) and `END` the last byte, no
//! `Content-Encoding`, and the same validator if it carries one. A `200` (the
//! representation changed, so the upstream ignored the range and sent all of
//! it) or any other difference fails the body with
//! [`ResumeMismatch`](error::ResumeMismatch), whose [`Mismatch`](error::Mismatch)
//! says what was expected and what came: a body is never spliced from two
//! representations. The body's bytes are counted against the announced length
//! too. An error of the ranged request itself (its head) ends the body with
//! that error.
//!
//! [`FailureKind::of`](crate::FailureKind::of) classifies a
//! [`ResumeMismatch`](error::ResumeMismatch) as the failure it could not heal
//! (its `source()`), and [`errors::find`](crate::errors::find) finds it.
//!
//! # Order
//!
//! ```text
//! DeadlineLayer  ->  ResumeLayer  ->  StatusRetryLayer  ->  AttemptTimeoutLayer  ->  client
//! ```
//!
//! - **inside the deadline**: the request carries the [`RequestDeadline`], and
//!   the ranged requests carry it too (they copy the request's extensions), so
//!   no resume starts past it and the attempt timeout below caps each by it;
//!   the [`DeadlineBody`](crate::deadline::body::DeadlineBody) outside bounds
//!   the whole seamless body, resumed parts included: a resume still under way
//!   at the deadline ends the body with
//!   [`DeadlineExceeded`](crate::deadline::error::DeadlineExceeded).
//! - **outside the retry** (as above): every ranged request is a call of the
//!   retry layer, so its head is judged and retried by the policy (a `503`, a
//!   refused connection) and each of its attempts gets a fresh attempt timeout;
//!   the retry's commit point is unchanged, the first head still commits the
//!   call.
//! - **inside the retry** (`DeadlineLayer -> StatusRetryLayer -> ResumeLayer ->
//!   AttemptTimeoutLayer -> client`): the retry sees the first head only, and
//!   every ranged request is sent once, straight to the layers below; a ranged
//!   request that fails ends the body with its error.
//! - **outside the deadline** it would be wrong: the requests carry no deadline
//!   (unless the caller put one there), and every ranged request would pass
//!   through the deadline layer again and get a fresh budget, so nothing would
//!   bound the download as a whole.
//!
//! With the combined service ([`Resilience`](crate::Resilience)), which keeps
//! its deadline in its own future, a [`DeadlineLayer`](crate::DeadlineLayer)
//! outside the `ResumeLayer` gives the requests the deadline the combined
//! service then honours (the earlier deadline wins).
//!
//! # Example
//!
//! A download whose connection is reset after 4 bytes, resumed on the mock
//! server:
//!
//! Besides the crates the README's "Use" section lists, the example needs
//! `http-resilience-mock = "0.1"`, the loopback test server.
//!
//! ```
//! use bytes::Bytes;
//! use http_body_util::{BodyExt, Full};
//! use http_resilience::{
//!     deadline::DeadlineLayer,
//!     resume::{ResumeLayer, ResumePolicy},
//!     transport, BoxError,
//! };
//! use http_resilience_mock::{MockResponse, MockServer};
//! use std::time::Duration;
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), BoxError> {
//! let server = MockServer::start().await?;
//! let file = || MockResponse::ok("0123456789").with_etag("\"v1\"").with_ranges();
//! server.enqueue(file().reset_after(4));
//! server.enqueue(file());
//!
//! let client = transport::Builder::new().build_http::<Full<Bytes>>()?;
//! let svc = ServiceBuilder::new()
//!     .layer(DeadlineLayer::new(Duration::from_secs(5)))
//!     .layer(ResumeLayer::new(ResumePolicy::new(2)))
//!     .service(client);
//!
//! let request = http::Request::get(server.uri("/file")).body(Full::default())?;
//! let response = svc.oneshot(request).await?;
//! assert!(response.body().get_ref().is_resumable());
//! let body = response.into_body().collect().await?.to_bytes();
//! assert_eq!(body, "0123456789");
//!
//! let ranged = &server.requests()[1];
//! assert_eq!(ranged.headers["range"], "bytes=4-");
//! assert_eq!(ranged.headers["if-range"], "\"v1\"");
//! # Ok(())
//! # }
//! ```
//!
//! # Clone
//!
//! The inner service must be `Clone`: the clone kept for a `GET` sends its
//! ranged requests, each after its `poll_ready`. The ranged request's body is
//! `B::default()` (empty for `Full`, `Empty`, `String`, ...), hence the bound
//! `B: Default`.
//!
//! [`RequestDeadline`]: crate::RequestDeadline

pub mod body;
pub mod error;
pub mod future;
mod layer;
mod policy;
mod session;

pub use self::{layer::ResumeLayer, policy::ResumePolicy};

use self::{body::ResumeBody, future::ResponseFuture, session::Origin};
use crate::{BoxError, Wrapper};
use std::task::{Context, Poll};
use tower_service::Service;

/// Resumes response bodies that fail part-way, with ranged requests.
///
/// See the [module docs](self) for an example.
#[derive(Debug, Clone, Copy)]
pub struct Resume<S> {
    inner: S,
    policy: ResumePolicy,
}

// ===== impl Resume =====

impl<S> Resume<S> {
    /// Wraps `inner`, resuming bodies as `policy` allows.
    pub const fn new(inner: S, policy: ResumePolicy) -> Self {
        Self { inner, policy }
    }
}

impl<S> Wrapper for Resume<S> {
    type Inner = S;

    fn get_ref(&self) -> &S {
        &self.inner
    }

    fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B, T> Service<http::Request<B>> for Resume<S>
where
    S: Service<http::Request<B>, Response = http::Response<T>> + Clone,
    S::Error: Into<BoxError>,
    B: http_body::Body + Default,
{
    type Response = http::Response<ResumeBody<S, B, T>>;
    type Error = S::Error;
    type Future = ResponseFuture<S, B>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        // NOTE: the ready service sends this request; the clone kept for the
        // ranged requests is made ready before each of them.
        let origin = Origin::of(&request, || self.inner.clone(), self.policy);
        ResponseFuture::new(self.inner.call(request), origin)
    }
}

#[cfg(test)]
mod tests;
