//! Retries: an outcome worth another attempt is followed by one, after a
//! wait, while the policy allows: a decoder says whether an outcome is worth
//! it, a retryer whether another attempt is made and when (OpenFeign's
//! split).
//!
//! [`StatusRetry`] calls the inner service, hands the outcome (response head or
//! error) to the policy's [`Decoder`], and on a [`Verdict::Retry`] asks the
//! request's own [`Retryer`] for a wait. When the retryer says stop, or the
//! decoder accepts, the caller gets **that outcome unchanged**: the last 503 with
//! its headers and body, or the last error. The number of attempts is recorded
//! on the response as an [`Attempts`] extension, with the
//! last verdict and the [`Stop`] reason; for errors, a caller
//! that wants them puts a [`RetryReport`] in the request.
//!
//! # Example
//!
//! Reactor WebClient's policy: only 503 is retried, at most twice, 10 ms apart.
//!
//! ```
//! use http::{Request, Response, StatusCode};
//! use http_resilience::{
//!     policy::{FixedDelay, StatusDecoder},
//!     retry::{RetryPolicy, StatusRetryLayer},
//!     Attempts,
//! };
//! use std::{
//!     convert::Infallible,
//!     sync::{atomic::{AtomicU32, Ordering}, Arc},
//!     time::Duration,
//! };
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), http_resilience::BoxError> {
//! let policy = RetryPolicy::new(
//!     StatusDecoder::new([503])?,
//!     FixedDelay::new(Duration::from_millis(10), 2),
//! );
//! let calls = Arc::new(AtomicU32::new(0));
//! let counter = calls.clone();
//! let svc = ServiceBuilder::new()
//!     .layer(StatusRetryLayer::new(policy))
//!     .service_fn(move |_: Request<String>| {
//!         // A stand-in for the network: always unavailable.
//!         counter.fetch_add(1, Ordering::SeqCst);
//!         async { Ok::<_, Infallible>(Response::builder().status(503).body(String::new()).unwrap()) }
//!     });
//!
//! let response = svc.oneshot(Request::new(String::new())).await?;
//! assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
//! assert_eq!(Attempts::of(&response), 3);
//! assert_eq!(calls.load(Ordering::SeqCst), 3);
//! # Ok(())
//! # }
//! ```
//!
//! # Testing a policy
//!
//! A decoder and a retryer are tested without a network: a tower-test mock
//! stands in for the upstream, and tokio's paused clock makes every wait
//! exact. This whole test is the example, as it goes in a test file; tokio's
//! paused clock needs its `test-util` feature in the dev-dependencies
//! (`tokio = { version = "1", features = ["macros", "rt", "test-util"] }`), and
//! tower-test as one too:
//!
//! ```
//! use http::{Request, Response};
//! use http_resilience::{
//!     policy::{ExponentialBackoff, TransientDecoder},
//!     retry::{RetryPolicy, StatusRetryLayer},
//! };
//! use std::time::Duration;
//! use tokio::time::Instant;
//! use tower::{Layer, ServiceExt};
//! use tower_test::mock;
//!
//! #[tokio::main(flavor = "current_thread", start_paused = true)] // `#[tokio::test(start_paused = true)]` in a test
//! async fn main() {
//! let policy = RetryPolicy::new(TransientDecoder::new(), ExponentialBackoff::default());
//! let (mock, mut upstream) = mock::pair::<Request<()>, Response<String>>();
//! let svc = StatusRetryLayer::new(policy).layer(mock);
//! let start = Instant::now();
//! let call = tokio::spawn(svc.oneshot(Request::new(())));
//! for (status, at) in [(503, 0), (502, 100), (200, 250)] {
//!     let (_request, send) = upstream.next_request().await.unwrap();
//!     assert_eq!(start.elapsed(), Duration::from_millis(at)); // the backoff, exactly
//!     send.send_response(Response::builder().status(status).body(String::new()).unwrap());
//! }
//! assert_eq!(call.await.unwrap().unwrap().status(), 200);
//! }
//! ```
//!
//! # The committed point
//!
//! The decision is made on the response *head*. Once a head is returned to the
//! caller, the call is committed: no further attempt is made, whatever happens
//! while the body is read. A retryable response that is discarded is dropped
//! (with its unread body) before the next attempt starts.
//!
//! # Request bodies
//!
//! Every attempt needs the request again. A `Clone` body (the in-memory
//! bodies: `Full`, `Empty`, `String`, `Bytes`, ...) is replayed; see
//! [`TryCloneBody`]. A stream (hyper's `Incoming`, axum's `Body`, tonic's
//! body) goes through wrapped in [`ReplayBody`]: what an attempt sends is kept
//! up to a cap, with bookkeeping bounded by the cap too whatever the frame
//! sizes (see its `# Memory`), and what it never read passes on to the next
//! attempt, so a request that never reached the upstream is sent again in
//! full, whatever its size. A body that can be opened again (a file, a large
//! upload) goes through [`ReopenBody`] instead: every attempt opens it anew,
//! and nothing is kept. Wrapped in [`SendOnce`] instead, it is sent once: its first
//! outcome is returned, whatever the verdict.
//!
//! # Readiness
//!
//! The first attempt is sent on the service that reported ready to the caller;
//! a clone takes its place in the `StatusRetry`. Every later attempt waits for
//! the clone's `poll_ready` first. No attempt is ever sent on a clone that has
//! not reported ready.
//!
//! # Deadlines
//!
//! When the request carries a [`RequestDeadline`](crate::RequestDeadline),
//! whoever recorded it (a [`Deadline`](crate::deadline::Deadline) outside, or
//! a handler that copied an inbound deadline), no attempt starts after it and
//! no wait outlasts it:
//!
//! - once it has passed, no further attempt is made: the outcome in hand is
//!   returned, with [`Stop::DeadlinePassed`];
//! - a wait that would end at or after it is cut there, and the outcome in
//!   hand is returned then, with the same stop. A `Deadline` outside, whose
//!   timer is due at the same instant, ends the call with its own error
//!   instead.
//!
//! The attempts themselves are bounded by the deadline only through an
//! [`AttemptTimeout`](crate::attempt_timeout::AttemptTimeout) (or a
//! `Deadline`) inside, so a retry layer under an inherited deadline wants one.
//! With [`deadline_aware`](crate::policy::CallOptions::deadline_aware) a wait that leaves no
//! room for a useful attempt is not begun at all: the outcome comes back at
//! once.
//!
//! # Errors
//!
//! The error type is the inner service's, unchanged. An error from the inner
//! clone's `poll_ready` before a retry ends the call with that error.
//!
//! # Timers
//!
//! The wait between attempts is a tokio timer, so `tokio::time::pause()`
//! applies; a zero wait does not touch the timer at all. Dropping the response
//! future drops the wait and any attempt in flight: nothing more is sent.
//!
//! [`Verdict::Retry`]: crate::policy::Verdict::Retry
//! [`Attempts`]: crate::Attempts
//! [`Stop`]: crate::Stop
//! [`Stop::DeadlinePassed`]: crate::Stop::DeadlinePassed
//! [`RetryReport`]: crate::RetryReport
//! [`ReplayBody`]: crate::body::ReplayBody
//! [`ReopenBody`]: crate::body::ReopenBody
//! [`SendOnce`]: crate::body::SendOnce

pub mod future;
mod layer;
mod policy;
mod state;

pub use self::{layer::StatusRetryLayer, policy::RetryPolicy};

use self::future::ResponseFuture;
pub(crate) use self::state::{Decision, Kept, RetryState};
use crate::telemetry::{self, CallSpan, Form};
use crate::{
    body::TryCloneBody,
    policy::{Decoder, Retryer},
    Wrapper,
};
use std::{
    fmt,
    sync::Arc,
    task::{Context, Poll},
};
use tower_service::Service;

/// Retries calls of the inner service as a [`RetryPolicy`] says.
///
/// See the [module docs](self) for an example.
///
/// # Clone
///
/// Every attempt after the first is made on a clone of the inner service, so
/// `S: Clone` is required. The policy is shared behind an `Arc`: cloning a
/// `StatusRetry` copies no policy state. The retryer is cloned once per request
/// (its state belongs to that request alone); the decoder is never cloned.
pub struct StatusRetry<S, D, R> {
    inner: S,
    policy: Arc<RetryPolicy<D, R>>,
}

// ===== impl StatusRetry =====

impl<S, D, R> StatusRetry<S, D, R> {
    /// Wraps `inner`, retrying as `policy` says.
    pub fn new(inner: S, policy: RetryPolicy<D, R>) -> Self {
        Self::from_shared(inner, Arc::new(policy))
    }

    pub(crate) fn from_shared(inner: S, policy: Arc<RetryPolicy<D, R>>) -> Self {
        Self { inner, policy }
    }
}

impl<S, D, R> Wrapper for StatusRetry<S, D, R> {
    type Inner = S;

    fn get_ref(&self) -> &S {
        &self.inner
    }

    fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: Clone, D, R> Clone for StatusRetry<S, D, R> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            policy: Arc::clone(&self.policy),
        }
    }
}

impl<S: fmt::Debug, D: fmt::Debug, R: fmt::Debug> fmt::Debug for StatusRetry<S, D, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StatusRetry")
            .field("inner", &self.inner)
            .field("policy", &self.policy)
            .finish()
    }
}

impl<S, B, T, D, R> Service<http::Request<B>> for StatusRetry<S, D, R>
where
    S: Service<http::Request<B>, Response = http::Response<T>> + Clone,
    B: TryCloneBody,
    D: Decoder<T, S::Error>,
    R: Retryer,
{
    type Response = http::Response<T>;
    type Error = S::Error;
    type Future = ResponseFuture<S, B, D, R>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    #[inline]
    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let span = CallSpan::new(Form::Retry, self.policy.parts().options.telemetry, &request);
        let retry = RetryState::begin(Arc::clone(&self.policy), &mut request, true, &span);
        // NOTE: `self.inner` reported ready, its clone did not. The ready one
        // sends this attempt (and is readied again by the next `poll_ready`);
        // the clone goes with the future, which readies it before any retry.
        // Cloning into the future, rather than swapping the two, spares two
        // moves of the service, which can be large (a pooled client).
        let future = {
            let _call = span.enter();
            let _attempt = telemetry::enter(retry.attempt_span());
            self.inner.call(request)
        };
        let span = span.keep();
        ResponseFuture::new(future, self.inner.clone(), retry, span)
    }
}

#[cfg(test)]
mod tests;
