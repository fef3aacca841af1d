//! A rate limit per authority (or per key of one's own) that learns from
//! the server, and, with the feature `redis`, one quota shared by a fleet.
//!
//! The retry budget bounds retries, overload control the calls in flight;
//! neither bounds **calls per unit of time**, which is what a third party's
//! quota is written in ("100 requests per second per API key"). A
//! [`RateLimitPolicy`] does, per key (by default the request's scheme and
//! authority, as the other guards key their state;
//! [`RateLimitPolicy::with_key`](crate::key::PerKey::with_key) for an API key, a tenant, a route):
//!
//! - **GCRA** (the generic cell rate algorithm, as governor keeps it), one
//!   atomic word per key: `calls` per `per`, evenly spaced, and a `burst`
//!   that may go at once after a quiet spell. No lock, no allocation on the
//!   way of a call under the limit;
//! - **a call over the limit waits for its slot**, bounded by its deadline
//!   ([`RequestDeadline`](crate::RequestDeadline)): when the wait plus the
//!   least useful attempt ([`with_min_attempt`](RateLimitPolicy::with_min_attempt))
//!   cannot fit, or the wait outlasts
//!   [`with_max_wait`](RateLimitPolicy::with_max_wait), it fails at once;
//!   or, with [`RateLimitMode::TurnAway`], it is turned away at once;
//! - **it learns from the server** (opt-in per policy,
//!   [`with_server_signals`](RateLimitPolicy::with_server_signals); each
//!   [`Signal`] documents its source): a 429 or 503 with `Retry-After`, or
//!   gRPC's `RESOURCE_EXHAUSTED` with pushback, pauses **every** call to the
//!   key until the instant named, never early; the IETF `RateLimit` /
//!   `RateLimit-Policy` fields and the common `X-RateLimit-*` ones pace it:
//!   nothing remaining pauses until the reset, some remaining spreads the
//!   calls over the time to it. Every such wait is capped
//!   ([`with_max_pause`](RateLimitPolicy::with_max_pause), 60 s by
//!   default); a value that does not parse is ignored;
//! - **one quota for a fleet** ([`fleet`], feature `redis`): the same limit
//!   kept in Redis by a Lua script and spent locally through leases.
//!
//! A call turned away is never sent: it fails at once with [`RateLimited`]
//! (its [`Limited`] says why, [`RateLimited::free_at`] when a slot frees),
//! which [`FailureKind::of`](crate::FailureKind::of) reads as
//! [`FailureKind::RateLimited`](crate::FailureKind::RateLimited); the
//! ready-made decoders do not retry it, and it costs no retry budget token.
//!
//! # Order
//!
//! The rate limit counts **attempts**, what the upstream sees: it goes below
//! the retry or the hedge, and **before** overload control and the breaker:
//!
//! ```text
//! DeadlineLayer -> StatusRetryLayer -> GuardLayer<RateLimitPolicy> -> [GuardLayer<OverloadPolicy>] -> [GuardLayer<BreakerPolicy>] -> AttemptTimeoutLayer -> client
//! DeadlineLayer -> HedgeLayer       -> GuardLayer<RateLimitPolicy> -> [GuardLayer<OverloadPolicy>] -> ...
//! ```
//!
//! - every attempt takes a slot: a retry, a hedged copy, as the upstream
//!   counts them; a retry's backoff and a server's `Retry-After` come first,
//!   then the wait for a slot, both within the deadline;
//! - a wait for a slot holds nothing else: put before overload control (a
//!   pair `(rate_limit, overload)`, as
//!   [`ClientGuards`](crate::config::ClientGuards) orders them), a call
//!   waits for its slot without holding a slot of the bulkhead; put after,
//!   it would hold one while it waits;
//! - a call dropped while it waits gives its slot back unless a later call
//!   took one after it.
//!
//! The combined service takes the same policy,
//! [`ResiliencePolicy::with_guard`](crate::ResiliencePolicy::with_guard),
//! and runs the same code. Clones of a policy share its buckets.
//!
//! # Events and metrics
//!
//! [`RateLimitPolicy::with_listener`] hears every [`RateLimitEvent`] (a call
//! turned away, a pause or a pace learned, a lease, a fallback), which also
//! go to `tracing` at debug level; [`RateLimitPolicy::states`](crate::key::PerKey::states) reads every
//! key's delay, pause and pace. With the feature `otel`,
//! [`Metrics`](crate::otel::Metrics) counts the rejections, the
//! pauses and the fallbacks and observes the delay as a gauge.
//!
//! # Example
//!
//! Five calls at once against a limit of 10 a second with a burst of 2: two
//! go at once, the others wait for their slots, 100 ms apart.
//!
//! ```
//! use http::{Request, Response};
//! use http_resilience::{
//!     guard::GuardLayer,
//!     rate_limit::RateLimitPolicy,
//!     DeadlineLayer,
//! };
//! use std::{convert::Infallible, sync::{Arc, Mutex}, time::Duration};
//! use tokio::time::Instant;
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), http_resilience::BoxError> {
//! let start = Instant::now();
//! let sent = Arc::new(Mutex::new(Vec::new()));
//! let record = Arc::clone(&sent);
//! let limit = RateLimitPolicy::new(10, Duration::from_secs(1))?.with_burst(2)?;
//! let svc = ServiceBuilder::new()
//!     .layer(DeadlineLayer::new(Duration::from_secs(2)))
//!     .layer(GuardLayer::new(limit))
//!     .service_fn(move |_: Request<String>| {
//!         // A stand-in for the network: it notes when each call is sent.
//!         record.lock().unwrap().push((Instant::now() - start).as_millis());
//!         async { Ok::<_, Infallible>(Response::new(String::new())) }
//!     });
//! let call = || svc.clone().oneshot(Request::get("http://api.test/").body(String::new()).unwrap());
//! let (a, b, c, d, e) = tokio::join!(call(), call(), call(), call(), call());
//! for result in [a, b, c, d, e] {
//!     result?;
//! }
//! assert_eq!(*sent.lock().unwrap(), [0, 0, 100, 200, 300]);
//! # Ok(())
//! # }
//! ```

mod admit;
mod bucket;
mod common;
pub mod error;
mod events;
#[cfg(feature = "redis")]
pub mod fleet;
mod gcra;
mod learn;
mod pass;
mod policy;
mod settings;

#[cfg(feature = "otel")]
pub(crate) use self::events::Observer;
#[cfg(test)]
pub(crate) use self::settings::RateLimitSettings;

pub use self::{
    error::{Limited, RateLimited},
    events::RateLimitEvent,
    learn::{ServerSignals, Signal},
    policy::RateLimitPolicy,
    settings::{RateLimitMode, RateLimitState},
};

#[cfg(test)]
mod tests;
