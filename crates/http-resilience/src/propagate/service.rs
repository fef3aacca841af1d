//! The service that writes each attempt's budget in a request header.

use super::{
    future::ResponseFuture,
    wire::{send_budget, time_left, BudgetSpent},
    TimeoutFormat,
};
use crate::{limits, BoxError, RequestDeadline, Wrapper};
use http::HeaderName;
use std::{
    task::{Context, Poll},
    time::Duration,
};
use tokio::time::Instant;
use tower_service::Service;

/// Writes the budget left for each attempt in a request header.
///
/// It creates one failure: a request whose deadline has already passed is not
/// sent (no value in any format tells the upstream "no time left" without some
/// reading it as "no limit"), and the call ends with
/// [`DeadlineExceeded`](crate::deadline::error::DeadlineExceeded), boxed.
/// Otherwise the response and the error are the inner service's.
///
/// See the [module docs](super) for an example and the rules.
#[derive(Debug, Clone)]
pub struct PropagateDeadline<S> {
    inner: S,
    header: HeaderName,
    format: TimeoutFormat,
    attempt_limit: Option<Duration>,
    final_uses_deadline: bool,
}

// ===== impl PropagateDeadline =====

impl<S> PropagateDeadline<S> {
    /// Wraps `inner`, writing the budget in `header` in `format`, with no
    /// attempt limit.
    pub const fn new(inner: S, header: HeaderName, format: TimeoutFormat) -> Self {
        Self {
            inner,
            header,
            format,
            attempt_limit: None,
            final_uses_deadline: false,
        }
    }

    /// On the final attempt of a request with a deadline, the attempt limit
    /// does not cap the budget sent (set through
    /// [`PropagateDeadlineLayer::final_attempt_uses_deadline`](super::PropagateDeadlineLayer::final_attempt_uses_deadline)).
    pub(crate) const fn final_attempt_uses_deadline(mut self) -> Self {
        self.final_uses_deadline = true;
        self
    }

    /// The same service, with the budget also capped by `limit` (set through
    /// [`PropagateDeadlineLayer::with_attempt_limit`](super::PropagateDeadlineLayer::with_attempt_limit)).
    pub(crate) const fn with_attempt_limit(mut self, limit: Duration) -> Self {
        self.attempt_limit = Some(limit);
        self
    }
}

impl<S> Wrapper for PropagateDeadline<S> {
    type Inner = S;

    fn get_ref(&self) -> &S {
        &self.inner
    }

    fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B> Service<http::Request<B>> for PropagateDeadline<S>
where
    S: Service<http::Request<B>>,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = ResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let deadline = RequestDeadline::of(&request);
        let left = deadline.and_then(|deadline| time_left(deadline, Instant::now()));
        let on_final = request
            .extensions()
            .get::<crate::extensions::FinalAttempt>()
            .is_some();
        // NOTE: a deadline of no limit (`left` is `None`) has no instant to
        // run until, so its final attempt keeps its own limit.
        let limited = deadline.filter(|_| left.is_some());
        let stretched = limits::runs_to_deadline(self.final_uses_deadline, on_final, limited);
        let limit = if stretched { None } else { self.attempt_limit };
        match send_budget(&mut request, &self.header, self.format, left, limit) {
            Ok(()) => ResponseFuture::called(self.inner.call(request)),
            // NOTE: refused only for a `left` of zero, so there is a deadline.
            Err(BudgetSpent) => {
                ResponseFuture::expired(deadline.map_or(Duration::ZERO, |d| d.budget()))
            }
        }
    }
}
