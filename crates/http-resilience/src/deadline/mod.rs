//! One budget for a whole call: every attempt, every wait between attempts,
//! and the reading of the response body.
//!
//! [`Deadline`] turns its budget into an instant when the call starts, records
//! it in the request extensions as a [`RequestDeadline`], and fails the call
//! with [`DeadlineExceeded`] when the instant passes. The response body is
//! wrapped in a [`DeadlineBody`], so reading it past the same instant fails with
//! the same error.
//!
//! Placed *outside* [`StatusRetry`](crate::retry::StatusRetry), the deadline
//! covers all attempts and the backoff between them: a wait that would end
//! after the deadline is cut short by it.
//!
//! # Example
//!
//! ```
//! use http::{Request, Response};
//! use http_resilience::deadline::{error::DeadlineExceeded, DeadlineLayer};
//! use http_body_util::BodyExt;
//! use std::{convert::Infallible, time::Duration};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let svc = ServiceBuilder::new()
//!     .layer(DeadlineLayer::new(Duration::from_secs(2)))
//!     .service_fn(|_: Request<()>| async {
//!         tokio::time::sleep(Duration::from_secs(3)).await;
//!         Ok::<_, Infallible>(Response::new(http_body_util::Full::new(&b"late"[..])))
//!     });
//!
//! let err = svc.oneshot(Request::new(())).await.unwrap_err();
//! assert!(err.is::<DeadlineExceeded>());
//! # }
//! ```
//!
//! # Inherited deadlines
//!
//! When the request already carries a [`RequestDeadline`] (for example one
//! derived from an inbound request that this call serves), the earlier of the
//! two wins, and that is the one recorded. A deadline that has already passed
//! fails the call at once, without calling the inner service.
//!
//! # Ties
//!
//! Until the deadline's timer fires, the inner future is polled first: a
//! response head that is ready is returned, and its body checks the deadline
//! with every frame it reads. Once the timer has fired, the call ends with
//! [`DeadlineExceeded`] without polling the inner future again. Layers inside
//! may have timers due at the same instant, an attempt timeout capped by the
//! deadline or a retry's wait cut short by it, and the caller learns which
//! budget ran out whichever of them the runtime wakes first.
//!
//! # Differences from `tower::timeout`
//!
//! `tower::timeout::Timeout` bounds the future that yields the head; the body a
//! caller reads afterwards is not bounded. `Deadline` bounds both, and shares
//! its instant with the layers inside it.
//!
//! [`DeadlineExceeded`]: error::DeadlineExceeded
//! [`DeadlineBody`]: body::DeadlineBody

pub mod body;
pub mod error;
pub mod future;
mod layer;

pub use self::layer::DeadlineLayer;

use self::future::ResponseFuture;
use crate::{limits, BoxError, RequestDeadline, Wrapper};
use std::{
    task::{Context, Poll},
    time::Duration,
};
use tower_service::Service;

/// Bounds a whole call, and the reading of its response body, by one budget.
///
/// See the [module docs](self) for an example.
#[derive(Debug, Clone, Copy)]
pub struct Deadline<S> {
    inner: S,
    budget: Duration,
}

// ===== impl Deadline =====

impl<S> Deadline<S> {
    /// Wraps `inner`, giving every call `budget` in all.
    ///
    /// Every budget is accepted. A zero budget fails every call at once with
    /// [`DeadlineExceeded`](crate::deadline::error::DeadlineExceeded), without
    /// calling the inner service; a budget too long to count from now
    /// (`Duration::MAX`) is held to about thirty years, which is no deadline
    /// in practice.
    pub const fn new(inner: S, budget: Duration) -> Self {
        Self { inner, budget }
    }
}

impl<S> Wrapper for Deadline<S> {
    type Inner = S;

    fn get_ref(&self) -> &S {
        &self.inner
    }

    fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B, T> Service<http::Request<B>> for Deadline<S>
where
    S: Service<http::Request<B>, Response = http::Response<T>>,
    S::Error: Into<BoxError>,
{
    type Response = http::Response<body::DeadlineBody<T>>;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    #[inline]
    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        // NOTE: one clock read serves both the new deadline and the check.
        let now = tokio::time::Instant::now();
        let deadline = limits::call_deadline(now, self.budget, RequestDeadline::of(&request));
        if deadline.has_passed_at(now) {
            return ResponseFuture::expired(deadline);
        }
        request.extensions_mut().insert(deadline);
        ResponseFuture::new(self.inner.call(request), deadline)
    }
}

#[cfg(test)]
mod tests;
