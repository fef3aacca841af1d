//! Bound every attempt with its own time limit.
//!
//! [`AttemptTimeout`] fails a call of the inner service that has not produced a
//! response head within the limit, with an [`AttemptTimedOut`] error. Placed
//! *inside* [`StatusRetry`](crate::retry::StatusRetry), every attempt gets a
//! fresh limit: a slow attempt is cut, and the retry policy decides whether to
//! try again.
//!
//! # Example
//!
//! ```
//! use http::{Request, Response};
//! use http_resilience::attempt_timeout::{error::AttemptTimedOut, AttemptTimeoutLayer};
//! use std::{convert::Infallible, time::Duration};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let svc = ServiceBuilder::new()
//!     .layer(AttemptTimeoutLayer::new(Duration::from_millis(500)))
//!     .service_fn(|_: Request<()>| async {
//!         // An upstream that needs a whole second.
//!         tokio::time::sleep(Duration::from_secs(1)).await;
//!         Ok::<_, Infallible>(Response::new("late"))
//!     });
//!
//! let err = svc.oneshot(Request::new(())).await.unwrap_err();
//! let timed_out = err.downcast_ref::<AttemptTimedOut>().unwrap();
//! assert_eq!(timed_out.duration(), Duration::from_millis(500));
//! # }
//! ```
//!
//! # What the limit covers
//!
//! The limit runs from [`call`](tower_service::Service::call) to the response
//! *head*. Reading the body is not bounded here: once the head is returned the
//! call is committed (a retry layer makes no further attempt), so a second
//! timer on the body would only repeat the call's deadline. The body is bounded
//! by [`Deadline`](crate::deadline::Deadline) as a whole and, at the transport,
//! by the read timeout between frames.
//!
//! # Ties
//!
//! The inner future is polled before the timer. A response that is ready in the
//! same poll in which the limit expires counts as a success: the work is done,
//! and throwing it away would only cause a retry. This matches
//! `tower::timeout::Timeout` (and not tower-http's `Timeout`, which polls the
//! timer first).
//!
//! # Deadlines
//!
//! When the request carries a [`RequestDeadline`]
//! (set by [`DeadlineLayer`](crate::deadline::DeadlineLayer) further out) that
//! comes before the attempt's own limit, the attempt ends at the deadline and
//! the error is [`DeadlineExceeded`](crate::deadline::error::DeadlineExceeded),
//! not [`AttemptTimedOut`]: the caller learns which budget ran out. A request
//! whose deadline has already passed is not sent at all.
//!
//! The attempt always keeps a timer of its own, even when a `DeadlineLayer`
//! outside would end the call at the same instant: the deadline in the request
//! is a value anyone can copy (a handler moving an inbound deadline onto its
//! outbound calls does), so its presence proves nothing about which timers are
//! running. Whatever deadline it reads, the attempt ends by it.
//!
//! By default every attempt keeps its own limit, the last one included.
//! [`final_attempt_uses_deadline`](AttemptTimeoutLayer::final_attempt_uses_deadline)
//! lets the last attempt a retry layer can make, marked with [`FinalAttempt`], run
//! until the deadline instead, as linkerd does: with no retry left, cutting it
//! short only turns a slow success into a failure.
//!
//! # Differences from `tower::timeout`
//!
//! - the error is a distinct type carrying the limit, so an attempt timeout is
//!   never confused with the deadline or a transport timeout;
//! - the request deadline caps the limit, as above.
//!
//! [`AttemptTimedOut`]: error::AttemptTimedOut

pub mod error;
pub mod future;
mod layer;

pub use self::layer::AttemptTimeoutLayer;

use self::future::ResponseFuture;
use crate::{extensions::FinalAttempt, limits, BoxError, RequestDeadline, Wrapper};
use std::{
    task::{Context, Poll},
    time::Duration,
};
use tokio::time::Instant;
use tower_service::Service;

/// Fails an attempt that produces no response head within a time limit.
///
/// See the [module docs](self) for an example.
#[derive(Debug, Clone, Copy)]
pub struct AttemptTimeout<S> {
    inner: S,
    limit: Duration,
    final_uses_deadline: bool,
}

// ===== impl AttemptTimeout =====

impl<S> AttemptTimeout<S> {
    /// Wraps `inner`, bounding each call by `limit`.
    ///
    /// Every limit is accepted. With a zero limit only a response that is
    /// ready at once gets through (the response is polled before the timer);
    /// a limit too long to count from now (`Duration::MAX`) is held to about
    /// thirty years, which is no limit in practice.
    pub const fn new(inner: S, limit: Duration) -> Self {
        Self {
            inner,
            limit,
            final_uses_deadline: false,
        }
    }

    /// Lets the last attempt a retry layer can make run until the request's
    /// deadline instead of its own limit (set through
    /// [`AttemptTimeoutLayer::final_attempt_uses_deadline`]).
    pub(crate) const fn final_attempt_uses_deadline(mut self) -> Self {
        self.final_uses_deadline = true;
        self
    }
}

impl<S> Wrapper for AttemptTimeout<S> {
    type Inner = S;

    fn get_ref(&self) -> &S {
        &self.inner
    }

    fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B, T> Service<http::Request<B>> for AttemptTimeout<S>
where
    S: Service<http::Request<B>, Response = http::Response<T>>,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    #[inline]
    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let deadline = RequestDeadline::of(&request);
        // NOTE: the marker is looked up only when it can change the end: a
        // lookup in a map that holds the deadline is not free.
        let on_final =
            self.final_uses_deadline && request.extensions().get::<FinalAttempt>().is_some();
        let to_deadline = limits::runs_to_deadline(self.final_uses_deadline, on_final, deadline);
        let (end, expiry) =
            match limits::attempt_end(Instant::now(), self.limit, deadline, to_deadline) {
                Ok(end) => end,
                Err(budget) => return ResponseFuture::expired(budget),
            };
        let response = self.inner.call(request);
        ResponseFuture::new(response, end, expiry)
    }
}

#[cfg(test)]
mod tests;
