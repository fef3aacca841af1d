//! Fault injection: attempts slowed down, answered with a status or a body
//! cut short, or failed as the transport would, at a rate or on a schedule,
//! from seeded numbers, switched on and off at run time.
//!
//! A [`FaultPolicy`] gives one [`Fault`] to the attempts it picks, per key
//! (by default the request's authority; [`FaultPolicy::with_key`](crate::key::PerKey::with_key) for
//! another):
//!
//! - **at a rate** ([`FaultPolicy::at_rate`]: each attempt with a
//!   probability) or **on a schedule** ([`FaultPolicy::every`]: every `n`th
//!   attempt; [`FaultPolicy::on_attempts`]: a list), with a seed
//!   ([`FaultPolicy::with_seed`]) that picks the same attempts on every run;
//! - **latency**: a wait before the attempt goes on, fixed or drawn from a
//!   distribution ([`Latency`]), ended by the call's deadline; any other
//!   fault may come after a wait too ([`Fault::after`]);
//! - **a status with its headers** in the upstream's place:
//!   [`Fault::unavailable`] (503 and `Retry-After`),
//!   [`Fault::too_many_requests`] (429), [`Fault::grpc_unavailable`] (gRPC's
//!   `UNAVAILABLE` as a trailers-only response, with pushback), or any
//!   response ([`Fault::respond`]);
//! - **a transport failure** of each kind the library tells apart: a
//!   refused connection, a reset before any byte of the response, a connect
//!   timeout, a request closed before it was sent ([`InjectedFault`]);
//!   [`FailureKind::of`](crate::FailureKind::of) reads each as the failure
//!   it stands for, so the ready-made decoders retry it exactly as they
//!   would the real one;
//! - **a body cut short** ([`Fault::cut_body`]): a response whose body fails
//!   after its first bytes, as one whose connection closed.
//!
//! A shared [`FaultSwitch`] turns injection on and off while the service
//! runs; off, the policy costs one atomic load per attempt.
//!
//! # Where it goes
//!
//! The policy is a [guard](crate::guard), so it goes wherever the other
//! guards go, and a response or failure it gives in the upstream's place is
//! judged as the upstream's would be: retried, counted by a circuit breaker
//! before it, returned as the last outcome.
//!
//! - **Standing for the upstream**, every attempt: a [`GuardLayer<FaultPolicy>`](crate::guard::GuardLayer) right
//!   above the client, below the three layers, the combined service or a
//!   hedge. There the attempt's limit and the deadline cut an injected
//!   wait as they would a slow upstream:
//!
//!   ```text
//!   DeadlineLayer -> StatusRetryLayer -> AttemptTimeoutLayer -> GuardLayer<FaultPolicy> -> client
//!   ResiliencePolicy::layer()                                -> GuardLayer<FaultPolicy> -> client
//!   DeadlineLayer -> HedgeLayer       -> AttemptTimeoutLayer -> GuardLayer<FaultPolicy> -> client
//!   ```
//!
//!   [`ResiliencePolicy::with_guard`](crate::ResiliencePolicy::with_guard)
//!   takes it too, among the guards between the retry and the attempt's
//!   limit: a wait is then made before the attempt, as a queue's, and not
//!   taken from its limit.
//! - **Standing for a dependency of one's own service**: a [`GuardLayer<FaultPolicy>`](crate::guard::GuardLayer)
//!   outermost, around the whole client stack, where a call fails, waits or
//!   is answered as the stack would answer it.
//!
//! An answer is made as the response body type of the service below
//! ([`AnswerBody`](crate::body::AnswerBody): `Full<Bytes>`, `String`,
//! boxed bodies, tonic's body, and the `DeadlineBody` of any of them). The
//! [`transport`](crate::transport) client's body can only come from a
//! connection: box it below the layer
//! (`.map_response(|r: http::Response<_>| r.map(BodyExt::boxed_unsync))`).
//! A response
//! answered in the upstream's place carries its [`FaultKind`] in its
//! extensions.
//!
//! # Example
//!
//! A service's own test made flaky: one attempt in four of its client
//! answered with a 503, retried by the client's policy.
//!
//! ```
//! use http_resilience::key::PerKey;
//! use http::{Request, Response, StatusCode};
//! use http_resilience::{
//!     fault::{Fault, FaultKind, FaultPolicy},
//!     guard::GuardLayer,
//!     policy::{FixedDelay, StatusDecoder},
//!     retry::RetryPolicy,
//!     Attempts, ResiliencePolicy,
//! };
//! use std::{convert::Infallible, time::Duration};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), http_resilience::BoxError> {
//! let switch = http_resilience::fault::FaultSwitch::new(true);
//! let faults = FaultPolicy::on_attempts([1], Fault::status(StatusCode::SERVICE_UNAVAILABLE))?
//!     .with_switch(switch.clone());
//! let retry = RetryPolicy::new(StatusDecoder::new([503])?, FixedDelay::new(Duration::from_millis(10), 2));
//! let svc = ServiceBuilder::new()
//!     .layer(ResiliencePolicy::new(Duration::from_secs(8), Duration::from_secs(1), retry)?.layer())
//!     .layer(GuardLayer::new(faults.clone()))
//!     .service_fn(|_: Request<String>| async {
//!         // A stand-in for the network.
//!         Ok::<_, Infallible>(Response::new(String::from("ok")))
//!     });
//! let response = svc.oneshot(Request::get("http://api.test/").body(String::new())?).await?;
//! assert_eq!((response.status(), Attempts::of(&response)), (StatusCode::OK, 2));
//! assert_eq!(faults.states()[0].1.injected, 1);
//!
//! // Off at run time: nothing is injected.
//! switch.turn_off();
//! # Ok(())
//! # }
//! ```

mod admit;
pub mod error;
mod inject;
mod latency;
mod pass;
mod policy;
mod switch;
mod trigger;

pub use self::{
    error::InjectedFault,
    inject::{Fault, FaultKind},
    latency::Latency,
    policy::{FaultPolicy, FaultState},
    switch::FaultSwitch,
};

#[cfg(test)]
mod tests;
