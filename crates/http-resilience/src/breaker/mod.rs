//! Fail fast while an upstream is down: a circuit per authority that opens
//! after failures, turns calls away without sending them, and lets a few
//! probes through to find out when the upstream is back.
//!
//! A [`BreakerPolicy`] keeps one circuit per key (by default the request's
//! authority: scheme, host and port) in a bounded map shared by every clone
//! of its [`GuardLayer<BreakerPolicy>`](crate::guard::GuardLayer) and [`BreakerPolicy`]. Each outcome is
//! judged by the policy's [`Decoder`](crate::policy::Decoder) (see
//! [`BreakerPolicy`] for what counts as a failure). A closed circuit trips
//! on failures in a row or on a failure ratio over a sliding window; while
//! open, calls fail at once with [`CircuitOpen`](error::CircuitOpen), the
//! request never sent; after the break, a bounded number of probes decides
//! whether it closes or opens again for a longer break. With a
//! [`ramp`](BreakerPolicy::ramp), successful probes do not close it at once:
//! it lets a growing share of calls through first, and any failure among
//! them opens it again.
//!
//! # Example
//!
//! ```
//! use http_resilience::key::PerKey;
//! use http::{Request, Response, StatusCode};
//! use http_resilience::{
//!     breaker::{error::CircuitOpen, BreakerPolicy, CircuitState}, guard::GuardLayer, key::UpstreamKey,
//!     policy::TransientDecoder,
//!     FailureKind,
//! };
//! use std::{convert::Infallible, time::Duration};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), http_resilience::BoxError> {
//! let policy = BreakerPolicy::new(TransientDecoder::new()).consecutive_failures(2)?;
//! let svc = ServiceBuilder::new()
//!     .layer(GuardLayer::new(policy.clone()))
//!     .service_fn(|_: Request<()>| async {
//!         // A stand-in for the network: always unavailable.
//!         Ok::<_, Infallible>(Response::builder().status(503).body(()).unwrap())
//!     });
//!
//! let call = || Request::get("http://upstream.test/").body(()).unwrap();
//! for _ in 0..2 {
//!     let response = svc.clone().oneshot(call()).await?;
//!     assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
//! }
//! // Two failures in a row: the circuit is open, the third call is not sent.
//! let err = svc.clone().oneshot(call()).await.unwrap_err();
//! assert_eq!(FailureKind::of(&*err), FailureKind::CircuitOpen);
//! let open = err.downcast_ref::<CircuitOpen>().unwrap();
//! assert_eq!(open.key().to_string(), "http://upstream.test:80");
//! let key = UpstreamKey::authority("http", "upstream.test", 80);
//! assert!(matches!(policy.state(&key), Some(CircuitState::Open { .. })));
//! # Ok(())
//! # }
//! ```
//!
//! # Order
//!
//! The breaker goes between the retry and the attempt timeout:
//!
//! ```text
//! DeadlineLayer  ->  StatusRetryLayer  ->  GuardLayer<BreakerPolicy>  ->  AttemptTimeoutLayer  ->  client
//! ```
//!
//! - **inside the retry**, every attempt is one call of the breaker: each
//!   attempt's outcome counts, and a retry never reaches an open circuit's
//!   upstream (it fails at once);
//! - **outside the attempt timeout**, a timed-out attempt is an error the
//!   breaker sees, and counts as a failure.
//!
//! Stacked elsewhere, it means something else:
//!
//! - **outside the retry**, the breaker sees one outcome per call, after all
//!   its attempts: a failing upstream trips it only after whole calls fail,
//!   and the retries inside keep hammering it until then;
//! - **inside the attempt timeout**, an attempt that times out is dropped
//!   before its outcome and counts for nothing: a hanging upstream never
//!   trips the circuit.
//!
//! # Inside a retry
//!
//! [`CircuitOpen`](error::CircuitOpen) is
//! [`FailureKind::CircuitOpen`](crate::FailureKind::CircuitOpen), which every
//! ready-made decoder judges [`Verdict::fail`](crate::policy::Verdict::fail):
//! it is not retried, and it takes no token of a
//! [`RetryBudget`](crate::policy::RetryBudget). When the circuit opens
//! between two attempts of one call (the first attempt's failure tripped
//! it), the next attempt fails at once and its error is the call's last
//! outcome: the caller gets the `CircuitOpen` error, with
//! [`Stop::Failed`](crate::Stop::Failed) in a
//! [`RetryReport`](crate::RetryReport) it put in the request (or, with
//! [`WaitForProbe`], the attempt after the break's end). The first
//! attempt's response is dropped, as any outcome a retry discards.
//!
//! # Readiness
//!
//! The breaker reports the inner service's readiness as its own: the key is
//! not known before the request is. A call turned away leaves that readiness
//! unused, for the next call.
//!
//! # The closed path
//!
//! A call through a closed circuit for a key already kept allocates nothing
//! and holds no lock across an await:
//!
//! - the service keeps the circuit of its last key at hand, and its clones
//!   inherit it (the retry layer's clone for later attempts does), so
//!   admitting a call for that key is one atomic load and a reference count;
//! - a service that has not called that key yet (a fresh clone of one that
//!   never called) looks the key up in the map without building it: the map's
//!   read lock is taken for the lookup only (uncontended, an atomic
//!   read-modify-write to take it and one to give it back); a new key takes
//!   the write lock once;
//! - the outcome updates a few atomics and one bucket of the window with a
//!   compare-and-swap, and reads the clock once; with
//!   [`slow_calls`](BreakerPolicy::slow_calls) on, admission reads it too.
//!
//! A circuit that is not closed takes a short lock of its own to admit a
//! call, as do the changes of state and a probe's outcome.
//!
//! # Keys and memory
//!
//! At most [`max_keys`](crate::key::PerKey::max_keys) circuits are kept (1024 by
//! default): a new key beyond that examines 16 of them, and evicts those
//! idle longer than the idle time (5 minutes), else the least recently used
//! of the 16, a closed one first; its cost does not grow with the bound.
//! A circuit is about 200 bytes plus its key, so the default bound is
//! about a quarter of a megabyte, however many hosts callers name. An
//! evicted circuit's state is forgotten: its key starts closed again.
//!
//! # The combined service and hedging
//!
//! [`ResiliencePolicy::with_guard`](crate::ResiliencePolicy::with_guard)
//! gives the combined service ([`Resilience`](crate::Resilience)) the same
//! breaker, in the same place: every attempt passes the circuit of its
//! call's key, a refused attempt is never sent, an attempt its limit ends
//! counts as a failure, one the deadline ends counts for nothing. A property
//! test in the repository holds the two forms to the same outcomes, events
//! and reports, breakers included. [`presets::standard`](crate::presets::standard)
//! carries one, with .NET's settings; the configuration file has a `breaker`
//! section.
//!
//! Hedging takes it below: `HedgeLayer -> GuardLayer<BreakerPolicy> -> client`.
//! Every copy passes the circuit; the copies that lose the race are dropped
//! and count for nothing, so hedging never trips a circuit by itself; a copy
//! the circuit turns away is not sent.
//!
//! A policy's clones share its circuits: a three-layer stack, a combined
//! service and a hedging stack given clones of one [`BreakerPolicy`] trip and
//! recover together.
//!
//! # Waiting for the probe
//!
//! [`WaitForProbe`] around the retry's decoder makes the retry wait for the
//! end of the break instead of returning the open-circuit error, when the
//! wait and a useful attempt fit before the deadline (deadline-aware
//! scheduling only); the turned-away attempt takes no retry-budget token.

mod circuit;
pub mod error;
mod events;
mod gate;
#[cfg(feature = "grpc")]
mod grpc;
mod policy;
mod probe;
mod registry;
mod rules;
mod settings;
mod window;

pub use self::{
    events::{BreakerEvent, TripReason},
    policy::BreakerPolicy,
    probe::WaitForProbe,
};

pub(crate) use self::settings::BreakerSettings;

#[cfg(feature = "otel")]
pub(crate) use self::events::Observer;

use tokio::time::Instant;

/// The state of one circuit, as [`BreakerPolicy::state`](crate::key::PerKey::state) reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CircuitState {
    /// Calls go through; outcomes are counted.
    Closed,
    /// Calls are turned away until `until`; the first call after it makes
    /// the circuit half-open.
    Open {
        /// The end of the break.
        until: Instant,
    },
    /// Probes go through, a bounded number at once.
    HalfOpen,
    /// The probes succeeded and the circuit ramps up (see
    /// [`BreakerPolicy::ramp`]): `admitted` calls in every `of` go through
    /// now, the others are turned away; the first call at or after `until`
    /// closes the circuit, and any failure before opens it again.
    Ramp {
        /// The calls let through, per `of` calls: the share is
        /// `admitted / of`. It is the step (from 1) the ramp is in, and
        /// reaches `of` in the last step.
        admitted: u32,
        /// The ramp's steps.
        of: u32,
        /// The end of the ramp.
        until: Instant,
    },
}

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
