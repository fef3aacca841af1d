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
//! [`TimeoutFormat::format`] and [`TimeoutFormat::parse`] write and read the header values in
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
//!   (see [`TimeoutFormat::format`]);
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
//! [`RequestDeadline::of`](crate::RequestDeadline::of):
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
//!             Ok::<_, BoxError>(response.body().get_ref().clone())
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
//! [`RequestDeadline`]: crate::RequestDeadline

#[cfg(feature = "propagate")]
pub mod error;
mod format;
#[cfg(feature = "propagate")]
pub mod future;
#[cfg(feature = "propagate")]
mod inherit;
#[cfg(feature = "propagate")]
mod layer;
#[cfg(feature = "propagate")]
mod parse;
#[cfg(feature = "propagate")]
mod service;
mod wire;

pub use self::format::{TimeoutFormat, EXPECTED_RQ_TIMEOUT_MS, GRPC_TIMEOUT};
#[cfg(feature = "propagate")]
pub use self::{
    inherit::{inherit_deadline, InheritDeadline},
    layer::{InheritDeadlineLayer, PropagateDeadlineLayer},
    service::PropagateDeadline,
};

pub(crate) use self::wire::{send_budget, time_left};

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
