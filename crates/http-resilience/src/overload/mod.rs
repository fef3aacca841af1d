//! Overload control per authority: a bulkhead, an adaptive concurrency
//! limit, and client-side throttling.
//!
//! The retry budget bounds retries and hedges, but not first attempts: a
//! client goes on sending at full rate into an upstream that is drowning,
//! and its callers queue without bound behind the connection pool. An
//! [`OverloadPolicy`] acts before the upstream falls over, per key (by
//! default the request's scheme and authority, as the circuit breaker keys
//! its circuits; [`OverloadPolicy::with_key`](crate::key::PerKey::with_key) for another):
//!
//! - **a limit of calls in flight**: fixed ([`OverloadPolicy::bulkhead`]),
//!   or adaptive ([`OverloadPolicy::adaptive`], see [`AdaptiveLimit`] for
//!   the algorithm and its sources): it grows while the upstream answers as
//!   fast as it does unloaded and shrinks when its latency rises or it sheds
//!   load (a 429 or 503, a gRPC `RESOURCE_EXHAUSTED`, an attempt that timed
//!   out);
//! - **a bounded queue** ([`OverloadPolicy::with_queue`]) for the calls that
//!   find every slot taken, served in order. A wait never outlasts the
//!   call's deadline ([`RequestDeadline`](crate::RequestDeadline)): at the
//!   deadline the call ends with the deadline's error; with
//!   [`with_max_wait`](OverloadPolicy::with_max_wait) or
//!   [`with_min_attempt`](OverloadPolicy::with_min_attempt) it ends sooner,
//!   and a call whose turn would likely come too late (the calls ahead of
//!   it, at the latency the key's calls take while at least half its slots
//!   are taken) gives up at once;
//! - **client-side throttling** ([`OverloadPolicy::with_throttle`], see
//!   [`Throttle`]): while the upstream rejects most of what it is sent, the
//!   client turns calls away itself, with the Google SRE book's probability.
//!
//! Each is optional; [`OverloadPolicy::throttling`] has no limit at all. A
//! call turned away is never sent: it fails at once with
//! [`Overloaded`] (its [`Rejection`] says why), which
//! [`FailureKind::of`](crate::FailureKind::of) reads as
//! [`FailureKind::Overloaded`](crate::FailureKind::Overloaded); the
//! ready-made decoders do not retry it, and it costs no retry budget token.
//!
//! # Order
//!
//! Overload control counts **attempts**, what the upstream sees: it goes
//! below the retry or the hedge, above the circuit breaker and the attempt
//! timeout:
//!
//! ```text
//! DeadlineLayer -> StatusRetryLayer -> GuardLayer<OverloadPolicy> -> [GuardLayer<BreakerPolicy>] -> AttemptTimeoutLayer -> client
//! DeadlineLayer -> HedgeLayer       -> GuardLayer<OverloadPolicy> -> [GuardLayer<BreakerPolicy>] -> AttemptTimeoutLayer -> client
//! ```
//!
//! - every attempt takes a slot, and holds it until its response head (or
//!   its error) comes; a retry's wait holds none, and the retry takes a slot
//!   again, waiting for one if need be;
//! - every copy of a hedged call takes a slot; a copy dropped because
//!   another won gives its slot back and counts for nothing. A queue holds a
//!   hedge back until a slot is free; give a hedging stack a policy without
//!   one if a hedge should rather not go at all;
//! - the deadline outside bounds every wait for a slot; the attempt timeout
//!   inside starts when the attempt is sent, so a wait for a slot is not
//!   taken from the attempt's limit, and an attempt that times out is an
//!   overload signal;
//! - a circuit breaker inside turns an attempt away after it has its slot,
//!   which comes back at once, counting for nothing; one outside sees the
//!   calls turned away here as nothing too. The breaker handles an upstream
//!   that is down; overload control one that is slow or shedding load.
//!
//! The combined service takes the same policy,
//! [`ResiliencePolicy::with_guard`](crate::ResiliencePolicy::with_guard),
//! in the same place (between its retry and its breaker), and runs the same
//! code: a call's attempts take their slots through one type in both
//! forms. Clones of a policy share its state: the stacks of one client
//! given clones of one policy count their calls in the same slots.
//!
//! # Events and metrics
//!
//! [`OverloadPolicy::with_listener`] hears every [`OverloadEvent`] (a limit
//! that moved, a call turned away, with its key), which also go to
//! `tracing` at debug level; [`OverloadPolicy::states`](crate::key::PerKey::states) reads every key's
//! limit, calls in flight and queued, and throttling probability. With the
//! feature `otel`, [`Metrics`](crate::otel::Metrics) counts the
//! rejections and observes the rest as gauges.
//!
//! # Example
//!
//! A bulkhead of one call in flight and one waiting: a second call waits
//! for the first, a third is turned away at once.
//!
//! ```
//! use http::{Request, Response};
//! use http_resilience::{
//!     guard::GuardLayer,
//!     overload::{OverloadPolicy, Rejection},
//!     DeadlineLayer, FailureKind, StatusRetryLayer,
//! };
//! use std::{convert::Infallible, time::Duration};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let bulkhead = OverloadPolicy::bulkhead(1).unwrap().with_queue(1);
//! let svc = ServiceBuilder::new()
//!     .layer(DeadlineLayer::new(Duration::from_secs(2)))
//!     .layer(GuardLayer::new(bulkhead.clone()))
//!     .service_fn(|_: Request<String>| async {
//!         // A stand-in for the network: a slow upstream.
//!         tokio::time::sleep(Duration::from_millis(100)).await;
//!         Ok::<_, Infallible>(Response::new(String::new()))
//!     });
//! let call = || svc.clone().oneshot(Request::get("http://api.test/").body(String::new()).unwrap());
//!
//! let (first, second, third) = tokio::join!(call(), call(), call());
//! assert!(first.is_ok() && second.is_ok(), "the second waited its turn");
//! let err = third.unwrap_err();
//! assert_eq!(FailureKind::of(&err), FailureKind::Overloaded);
//! # }
//! ```

mod admit;
pub mod error;
mod events;
mod limit;
mod pass;
mod policy;
mod settings;
mod slots;
mod throttle;

#[cfg(feature = "otel")]
pub(crate) use self::events::Observer;
#[cfg(test)]
pub(crate) use self::{limit::Limit, settings::OverloadSettings};

pub use self::{
    error::{Overloaded, Rejection},
    events::OverloadEvent,
    limit::AdaptiveLimit,
    policy::OverloadPolicy,
    settings::OverloadState,
    throttle::Throttle,
};

#[cfg(test)]
mod tests;
