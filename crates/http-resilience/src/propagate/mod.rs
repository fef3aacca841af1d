//! Deadline propagation: tell the upstream how much time each attempt has
//! left, and take a deadline over from an inbound request.
//!
//! Two halves, one for each side of a service that calls others:
//!
//! - outbound, [`PropagateDeadline`] writes the budget left for the attempt in
//!   a header (by default Envoy's `x-envoy-expected-rq-timeout-ms`, or
//!   `grpc-timeout`), so that the upstream can give up when the caller will no
//!   longer wait;
//! - inbound, [`inherit_deadline`] and [`InheritDeadline`] turn such a header
//!   into a [`RequestDeadline`] in the request extensions. A handler copies it
//!   onto the requests it sends, where [`Deadline`](crate::deadline::Deadline)
//!   keeps the earlier of it and its own.
//!
//! [`format_timeout`] and [`parse_timeout`] write and read the header values in
//! either [`TimeoutFormat`]; a value that does not match its format is an
//! [`InvalidTimeoutHeader`], never a panic.
//!
//! # Example
//!
//! A call of 2 s in all, with attempts of at most 3 s: the header says the
//! smaller budget.
//!
//! ```
//! use http::{Request, Response};
//! use http_resilience::{
//!     attempt_timeout::AttemptTimeoutLayer, deadline::DeadlineLayer,
//!     propagate::PropagateDeadlineLayer,
//! };
//! use std::{convert::Infallible, time::Duration};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let attempt = Duration::from_secs(3);
//! let svc = ServiceBuilder::new()
//!     .layer(DeadlineLayer::new(Duration::from_secs(2)))
//!     // (a `StatusRetryLayer` goes here)
//!     .layer(PropagateDeadlineLayer::envoy().with_attempt_limit(attempt))
//!     .layer(AttemptTimeoutLayer::new(attempt))
//!     .service_fn(|request: Request<()>| async move {
//!         // A stand-in for the upstream: it answers with the header it got.
//!         let sent = request.headers()["x-envoy-expected-rq-timeout-ms"].clone();
//!         Ok::<_, Infallible>(Response::new(sent))
//!     });
//!
//! let response = svc.oneshot(Request::new(())).await.unwrap();
//! assert_eq!(response.body().get_ref(), "2000");
//! # }
//! ```
//!
//! # Order
//!
//! [`PropagateDeadline`] belongs **inside** the retry, next to the attempt
//! timeout:
//!
//! ```text
//! DeadlineLayer -> StatusRetryLayer -> PropagateDeadlineLayer -> AttemptTimeoutLayer -> client
//! ```
//!
//! There it runs once per attempt, and each attempt carries the budget left
//! when it starts: a second attempt after 300 ms of first attempt and 100 ms of
//! backoff says 400 ms less than the first. It reads the [`RequestDeadline`]
//! that [`DeadlineLayer`](crate::deadline::DeadlineLayer) records, so it must
//! be inside that too. Outside the retry it would run once, and every attempt
//! would repeat the first attempt's figure. On either side of
//! [`AttemptTimeout`](crate::attempt_timeout::AttemptTimeout) it behaves the
//! same: neither changes what the other sees.
//!
//! # The value
//!
//! The budget of an attempt is the time left before the request's
//! [`RequestDeadline`], taken when [`call`](tower_service::Service::call)
//! runs, capped by the attempt limit the layer is given with
//! [`with_attempt_limit`](PropagateDeadlineLayer::with_attempt_limit) (set it
//! to the [`AttemptTimeoutLayer`](crate::attempt_timeout::AttemptTimeoutLayer)'s
//! limit, so the header says the smaller of the two). Then:
//!
//! - with a budget, the header is set, **replacing** any value already there;
//!   a budget under the format's smallest unit is written as that unit (`1`
//!   millisecond, `1n`), never as `0`, which Envoy reads as no timeout at all
//!   (see [`format_timeout`]);
//! - with neither a deadline nor a limit, the header is **left as it is**: not
//!   added, and a value the caller set is sent unchanged;
//! - a deadline already passed is not sent at all: the attempt ends at once
//!   with the deadline's error,
//!   [`DeadlineExceeded`](crate::deadline::error::DeadlineExceeded), and the
//!   inner service is not called.
//!
//! The time the client then spends connecting is not subtracted, so the
//! upstream may be told a little more than is left when the request arrives.
//! The clock is tokio's, so `tokio::time::pause()` applies.
//!
//! # Inheriting a deadline
//!
//! On a server, [`InheritDeadlineLayer`] reads the inbound header into a
//! [`RequestDeadline`] (see [`inherit_deadline`] for the rules: the earlier
//! deadline wins). A malformed header is ignored, logged with
//! `tracing::debug!`, and the request goes on without a deadline from it: a
//! bad hint from a client is no reason to refuse its request.
//!
//! The extensions of the inbound request are not those of the requests a
//! handler sends, so the handler moves the deadline across, and the outbound
//! stack's [`Deadline`](crate::deadline::Deadline) keeps it when it is the
//! earlier one. In an axum handler the deadline is the extractor
//! `Option<Extension<RequestDeadline>>`; with plain `http` types it is
//! [`RequestDeadline::of`]:
//!
//! ```
//! use http::{Request, Response};
//! use http_resilience::{
//!     deadline::DeadlineLayer,
//!     propagate::{InheritDeadlineLayer, PropagateDeadlineLayer},
//!     BoxError, RequestDeadline,
//! };
//! use std::{convert::Infallible, time::Duration};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! // The outbound client: 5 s of its own, the budget sent in Envoy's header.
//! let client = ServiceBuilder::new()
//!     .layer(DeadlineLayer::new(Duration::from_secs(5)))
//!     .layer(PropagateDeadlineLayer::envoy())
//!     .service_fn(|request: Request<()>| async move {
//!         let sent = request.headers()["x-envoy-expected-rq-timeout-ms"].clone();
//!         Ok::<_, Infallible>(Response::new(sent))
//!     });
//!
//! // The server: an inbound `grpc-timeout` becomes the request's deadline.
//! let server = ServiceBuilder::new()
//!     .layer(InheritDeadlineLayer::grpc())
//!     .service_fn(move |inbound: Request<()>| {
//!         let client = client.clone();
//!         async move {
//!             let mut outbound = Request::new(());
//!             // The handler moves the inbound deadline onto its own request.
//!             if let Some(deadline) = RequestDeadline::of(&inbound) {
//!                 outbound.extensions_mut().insert(deadline);
//!             }
//!             let response = client.oneshot(outbound).await?;
//!             Ok::<_, BoxError>(response.into_body().into_inner())
//!         }
//!     });
//!
//! let inbound = Request::builder().header("grpc-timeout", "1S").body(()).unwrap();
//! let sent = server.oneshot(inbound).await.unwrap();
//! assert_eq!(sent, "1000", "the inbound 1 s beat the client's own 5 s");
//! # }
//! ```
//!
//! [`InvalidTimeoutHeader`]: error::InvalidTimeoutHeader

pub mod error;
mod format;
pub mod future;
mod inherit;
mod layer;

pub use self::{
    format::{format_timeout, parse_timeout, TimeoutFormat, EXPECTED_RQ_TIMEOUT_MS, GRPC_TIMEOUT},
    inherit::{inherit_deadline, InheritDeadline},
    layer::{InheritDeadlineLayer, PropagateDeadlineLayer},
};

use self::future::ResponseFuture;
use crate::{limits, BoxError, RequestDeadline};
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
/// See the [module docs](self) for an example and the rules.
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

    /// On the final attempt (marked [`FinalAttempt`](crate::extensions::FinalAttempt)) of
    /// a request with a deadline, the attempt limit does not cap the budget
    /// sent: the setting to pair with
    /// [`AttemptTimeout::final_attempt_uses_deadline`](crate::attempt_timeout::AttemptTimeout::final_attempt_uses_deadline).
    #[must_use]
    pub const fn final_attempt_uses_deadline(mut self) -> Self {
        self.final_uses_deadline = true;
        self
    }

    /// The same service, with the budget also capped by `limit`.
    #[must_use]
    pub const fn with_attempt_limit(mut self, limit: Duration) -> Self {
        self.attempt_limit = Some(limit);
        self
    }

    /// The header the budget is written in.
    pub const fn header(&self) -> &HeaderName {
        &self.header
    }

    /// The format the budget is written in.
    pub const fn format(&self) -> TimeoutFormat {
        self.format
    }

    /// The attempt limit that caps the budget, if any.
    pub const fn attempt_limit(&self) -> Option<Duration> {
        self.attempt_limit
    }

    define_inner_service_accessors!();
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

/// The time left at `now` before `deadline`, as [`send_budget`] writes it:
/// `None` for a deadline made from a budget of `Duration::MAX`, which is no
/// limit.
pub(crate) fn time_left(deadline: RequestDeadline, now: Instant) -> Option<Duration> {
    (deadline.budget() != Duration::MAX).then(|| deadline.instant().saturating_duration_since(now))
}

/// The deadline of an attempt has already passed: [`send_budget`] wrote
/// nothing, and the attempt must not be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BudgetSpent;

/// Writes in `header` the smaller of the time `left` before the deadline and
/// the attempt `limit`, replacing any value there; with neither, leaves the
/// header as it is.
///
/// The rule of every writer of a budget (this module's layer and the combined
/// stack of [`ResiliencePolicy::propagating`](crate::ResiliencePolicy::propagating)): a
/// budget left is written rounded up to at least the format's smallest unit
/// ([`format_timeout`]); a deadline already passed (`left` of zero) is not
/// written, and the caller ends the attempt with the deadline's error instead
/// of sending it. A limit of `Duration::MAX` is no limit (a policy that has
/// none, as a gRPC service config's method without a timeout): none is
/// written for it, rather than a distant stand-in the upstream would take at
/// its word; [`time_left`] gives `None` for such a deadline.
///
/// # Errors
///
/// [`BudgetSpent`] when `left` is zero; the request is then left as it is.
pub(crate) fn send_budget<B>(
    request: &mut http::Request<B>,
    header: &HeaderName,
    format: TimeoutFormat,
    left: Option<Duration>,
    limit: Option<Duration>,
) -> Result<(), BudgetSpent> {
    if left.is_some_and(|left| left.is_zero()) {
        return Err(BudgetSpent);
    }
    let limit = limit.filter(|limit| *limit != Duration::MAX);
    let budget = match (left, limit) {
        (Some(left), Some(limit)) => Some(left.min(limit)),
        (left, limit) => left.or(limit),
    };
    if let Some(budget) = budget {
        // NOTE: a zero attempt limit (with a deadline still ahead, or none)
        // is written as the smallest unit: the attempt is still sent, as an
        // `AttemptTimeout` of zero sends it.
        let value = format_timeout(budget, format);
        // NOTE: `insert` would panic on a header map already at its largest
        // size; such a request goes on without the budget.
        if request.headers_mut().try_insert(header, value).is_err() {
            tracing::debug!(header = %header, "the header map is full: budget not sent");
        }
    }
    Ok(())
}

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
