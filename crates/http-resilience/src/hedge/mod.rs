//! Hedging: another copy of a slow request, and the first good answer wins.
//!
//! [`HedgeLayer`] sends a request, and while no copy has answered, sends
//! another:
//!
//! - when a delay passes with no outcome ([`HedgeDelay`]: a fixed one, as
//!   gRPC's `hedgingDelay`, or a percentile of the latencies the client
//!   observed, as tower's `hedge` and Finagle's backup requests);
//! - when an attempt reaches an age limit
//!   ([`HedgePolicy::hedge_on_attempt_timeout`]), **without cancelling it**,
//!   as Envoy's `hedge_on_per_try_timeout`;
//! - at once when a copy ends with an outcome that is not fatal (gRPC's
//!   `nonFatalStatusCodes`: the decoder's `Retry` verdict), or after the
//!   delay the server asked for.
//!
//! The first acceptable outcome wins; a fatal response (the decoder's `Fail`
//! on a response, a 404 say) ends the call. Either way every other copy is
//! dropped, which cancels it:
//! hyper closes an HTTP/1.1 connection that was mid-request and resets an
//! HTTP/2 stream. A copy that *failed* (an error rather than a response: its
//! own time limit, a reset) ends nothing while other copies are in flight,
//! since they may still answer. When every copy ended without an answer and
//! no more may be sent, the caller gets the last outcome. [`Attempts`] on the
//! response says how many copies were sent and which one won
//! ([`Attempts::winner`]); a [`RetryReport`] the request
//! carries records the same for an error; the listener hears a
//! [`RetryEvent::Hedge`] for every copy after the first, with its number and
//! what started it.
//!
//! # Limits
//!
//! - at most `max_attempts` copies in all ([`HedgePolicy::new`]), and
//!   at most [`with_max_in_flight`](HedgePolicy::with_max_in_flight) at once;
//! - a [`RetryBudget`] shared with the retries: a copy is sent only while the
//!   budget allows a retry, and takes a token;
//! - no copy is sent at or after the request's deadline
//!   ([`RequestDeadline`]), and a [`DeadlineLayer`](crate::DeadlineLayer)
//!   outside ends every copy with the call;
//! - a delay the server asks for (`Retry-After`, gRPC's pushback) is capped
//!   ([`HedgePolicy::with_max_server_delay`], 1 s by default) and never
//!   outlasts the request's deadline: a wait that would reach it ends the
//!   call there with the outcome in hand, and with deadline-aware scheduling
//!   ([`CallOptions::deadline_aware`](crate::policy::CallOptions::deadline_aware)) a wait that leaves no time for a
//!   useful copy ends it at once; these are the retry's rules, applied by
//!   the same code; while it runs no copy is sent, whatever would start one
//!   (another copy's failure, a copy's age), as gRPC's hedging waits for a
//!   pushback;
//! - a request that is not safe to repeat is **never hedged** (the library's
//!   rule: an idempotent method, an `Idempotency-Key`, or the caller's
//!   [`Idempotency`](crate::policy::Idempotency)); it is sent once, as it
//!   is. A gRPC method the service owner knows to be safe is marked
//!   `Idempotency::Idempotent` in the tonic request's extensions.
//!
//! # Streaming bodies
//!
//! Copies of a streaming body come from [`ReplayBody`]. While the first copy
//! is still sending its body, a hedge plays what was buffered and then
//! **follows** it: both send the same bytes as the source yields them, the
//! source read once. When the copy that reads the source is cancelled (it
//! lost), it hands the unread rest to the others, which go on. A body longer
//! than the replay cap cannot be copied once its start is gone: no hedge is
//! sent then, and a hedge already following it ends (its failure is not
//! counted against the call; the first copy goes on alone). A
//! [`ReopenBody`] has no such limit: each copy opens the body anew and sends
//! it whole, however large.
//!
//! # A layer of its own
//!
//! Hedging is a layer, not a mode of [`StatusRetryLayer`]: gRPC's design lets
//! a method have a retry policy or a hedging policy, not both, and a hedge
//! needs several attempts in flight in one call where a retry has one at a
//! time. It takes the same parts as a retry policy: a [`Decoder`], a
//! [`RetryBudget`] (the same `Arc` may serve both), a [`Listener`] of
//! [`CallEvent`]s, and
//! the same rules for what may be repeated. The order:
//!
//! ```text
//! DeadlineLayer -> HedgeLayer -> [GuardLayer<BreakerPolicy>] -> [PropagateDeadlineLayer] -> [AttemptTimeoutLayer] -> client
//! ```
//!
//! - the deadline **outside** covers every copy and ends them all;
//! - an [`AttemptTimeoutLayer`](crate::AttemptTimeoutLayer) **inside**
//!   cancels a copy at its limit (a failure of that copy only, as above); to
//!   hedge at an age and let the copy go on, use
//!   [`HedgePolicy::hedge_on_attempt_timeout`] and leave the attempt timeout
//!   out, or give it a longer limit as a hard stop;
//! - a [`StatusRetryLayer`] outside the hedge retries a whole hedged round;
//!   inside, it retries each copy on its own. Either works; most calls want
//!   one of the two;
//! - a [`GuardLayer<BreakerPolicy>`](crate::guard::GuardLayer) **inside** sees every copy: a copy the circuit
//!   turns away is not sent (its error is a failed copy, as above), and the
//!   copies that lose the race are dropped and count for nothing, so hedging
//!   alone never trips a circuit. Clones of one
//!   [`BreakerPolicy`](crate::breaker::BreakerPolicy) share its circuits with
//!   the other stacks of a client.
//!
//! [`GuardLayer<BreakerPolicy>`]: crate::guard::GuardLayer
//! [`Attempts`]: crate::Attempts
//! [`Attempts::winner`]: crate::Attempts::winner
//! [`RetryEvent::Hedge`]: crate::policy::RetryEvent::Hedge
//! [`RetryBudget`]: crate::policy::RetryBudget
//! [`RetryReport`]: crate::RetryReport
//! [`RequestDeadline`]: crate::RequestDeadline
//! [`ReplayBody`]: crate::body::ReplayBody
//! [`ReopenBody`]: crate::body::ReopenBody
//! [`StatusRetryLayer`]: crate::StatusRetryLayer
//! [`Decoder`]: crate::policy::Decoder
//! [`Listener`]: crate::telemetry::Listener
//! [`CallEvent`]: crate::policy::CallEvent
//!
//! # Example
//!
//! A slow first copy, and a second one 50 ms later that answers at once:
//! the call ends at 50 ms with the second copy's answer.
//!
//! ```
//! use http::{Request, Response};
//! use http_resilience::{
//!     hedge::{HedgeDelay, HedgeLayer, HedgePolicy},
//!     policy::TransientDecoder,
//!     Attempts,
//! };
//! use std::{convert::Infallible, sync::{atomic::{AtomicU32, Ordering}, Arc}, time::Duration};
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let policy = HedgePolicy::new(TransientDecoder::new(), HedgeDelay::fixed(Duration::from_millis(50)), 2)
//!     .unwrap();
//! let calls = Arc::new(AtomicU32::new(0));
//! let svc = ServiceBuilder::new()
//!     .layer(HedgeLayer::new(policy))
//!     .service_fn(move |_: Request<String>| {
//!         let first = calls.fetch_add(1, Ordering::Relaxed) == 0;
//!         async move {
//!             let latency = if first { Duration::from_secs(10) } else { Duration::ZERO };
//!             tokio::time::sleep(latency).await;
//!             Ok::<_, Infallible>(Response::new(if first { "slow" } else { "fast" }))
//!         }
//!     });
//!
//! let start = tokio::time::Instant::now();
//! let response = svc.oneshot(Request::new(String::new())).await.unwrap();
//! assert_eq!(*response.body(), "fast");
//! assert_eq!(start.elapsed(), Duration::from_millis(50));
//! let attempts = response.extensions().get::<Attempts>().unwrap();
//! assert_eq!((attempts.get(), attempts.winner()), (2, 2));
//! # }
//! ```

mod future;
mod latency;
mod policy;

#[cfg(test)]
mod tests;

pub use self::{
    future::ResponseFuture,
    policy::{HedgeDelay, HedgePolicy, DEFAULT_MAX_SERVER_DELAY},
};
pub use crate::policy::HedgeTrigger;

pub(crate) use self::policy::MAX_COPIES;

use self::future::Hedging;
use crate::{
    body::{Pristine, TryCloneBody},
    errors::AsError,
    policy::{is_idempotent, Decoder},
    session::Session,
    telemetry::{self, CallSpan, Form},
    Stop, Wrapper,
};
use std::{
    fmt,
    sync::Arc,
    task::{Context, Poll},
};
use tokio::time::Instant;
use tower_layer::Layer;
use tower_service::Service;

/// Hedges the calls of the inner service as a [`HedgePolicy`] says; see the
/// [module docs](self).
pub struct HedgeLayer<D> {
    policy: Arc<HedgePolicy<D>>,
}

impl<D> HedgeLayer<D> {
    /// The layer for `policy`, shared by every service it makes.
    pub fn new(policy: HedgePolicy<D>) -> Self {
        Self {
            policy: Arc::new(policy),
        }
    }
}

impl<D> Clone for HedgeLayer<D> {
    fn clone(&self) -> Self {
        Self {
            policy: Arc::clone(&self.policy),
        }
    }
}

impl<D: fmt::Debug> fmt::Debug for HedgeLayer<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HedgeLayer")
            .field("policy", &self.policy)
            .finish()
    }
}

impl<S, D> Layer<S> for HedgeLayer<D> {
    type Service = Hedge<S, D>;

    fn layer(&self, inner: S) -> Self::Service {
        Hedge {
            inner,
            policy: Arc::clone(&self.policy),
        }
    }
}

/// The service [`HedgeLayer`] makes.
///
/// # Clone
///
/// Every copy after the first is sent on a clone of the inner service, so
/// `S: Clone` is required; the policy is shared behind an `Arc`.
pub struct Hedge<S, D> {
    inner: S,
    policy: Arc<HedgePolicy<D>>,
}

impl<S: Clone, D> Clone for Hedge<S, D> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            policy: Arc::clone(&self.policy),
        }
    }
}

impl<S: fmt::Debug, D: fmt::Debug> fmt::Debug for Hedge<S, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hedge")
            .field("inner", &self.inner)
            .field("policy", &self.policy)
            .finish()
    }
}

impl<S, D> Wrapper for Hedge<S, D> {
    type Inner = S;

    fn get_ref(&self) -> &S {
        &self.inner
    }

    fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B, D, T> Service<http::Request<B>> for Hedge<S, D>
where
    S: Service<http::Request<B>, Response = http::Response<T>> + Clone,
    S::Error: AsError,
    B: TryCloneBody,
    D: Decoder<T, S::Error>,
{
    type Response = http::Response<T>;
    type Error = S::Error;
    type Future = ResponseFuture<S, B, D>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        // NOTE: begun before the copy is kept, so that a `FinalAttempt`
        // marker copied from another request stretches no copy.
        let span = CallSpan::new(Form::Hedge, self.policy.parts().options.telemetry, &request);
        let mut session = Session::begin(self.policy.parts(), &mut request, &span);
        let (hedging, stop) = match self.hedging_for(&request) {
            Ok(hedging) => (Some(hedging), None),
            Err(stop) => (None, Some(stop)),
        };
        let first_span = session.take_attempt_span();
        let first = {
            let _call = span.enter();
            let _attempt = telemetry::enter(first_span.as_deref());
            self.inner.call(request)
        };
        let span = span.keep();
        let policy = Arc::clone(&self.policy);
        let first = (first, first_span);
        ResponseFuture::new(first, hedging, policy, session, stop, span)
    }
}

impl<S: Clone, D> Hedge<S, D> {
    /// What a call that may hedge keeps, or why it may not.
    fn hedging_for<B: TryCloneBody>(
        &self,
        request: &http::Request<B>,
    ) -> Result<Box<Hedging<S, B>>, Stop> {
        if self.policy.max_attempts() < 2 {
            return Err(Stop::Exhausted);
        }
        if !is_idempotent(request) {
            return Err(Stop::NotIdempotent);
        }
        let pristine = Pristine::of(request).ok_or(Stop::NotReplayable)?;
        let now = Instant::now();
        let next_at = self
            .policy
            .delay()
            .get(now)
            .map(|delay| (crate::timer::saturating_after(now, delay), delay));
        let deadline = pristine.deadline();
        Ok(Box::new(Hedging {
            service: self.inner.clone(),
            pristine,
            next_at,
            at_once: None,
            held: None,
            deadline,
            sleep: None,
        }))
    }
}
