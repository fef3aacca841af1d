//! The three layers from one validated policy, in the canonical order, as
//! one service.
//!
//! [`ResiliencePolicy`] bundles a deadline, an attempt timeout and a
//! [`RetryPolicy`]; [`ResilienceLayer`] makes [`Resilience`] from it: the
//! semantics of [`Deadline`] → [`StatusRetry`] → [`AttemptTimeout`] in one
//! service, so the order cannot be got wrong and the call pays for one future
//! and one timer. The three layers stay usable on their own, and are the
//! composable form.
//!
//! # Example
//!
//! Reactor WebClient's limits as one service: every 503 retried twice, the
//! last one returned as it is.
//!
//! ```
//! use http::{Request, Response};
//! use http_resilience::{presets, Attempts};
//! use std::convert::Infallible;
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let svc = ServiceBuilder::new()
//!     .layer(presets::reactor().layer())
//!     .service_fn(|_: Request<String>| async {
//!         Ok::<_, Infallible>(Response::builder().status(503).body(String::new()).unwrap())
//!     });
//! let response = svc.oneshot(Request::new(String::new())).await.unwrap();
//! assert_eq!((response.status().as_u16(), Attempts::of(&response)), (503, 3));
//! # }
//! ```
//!
//! [`Deadline`]: crate::deadline::Deadline
//! [`StatusRetry`]: crate::retry::StatusRetry
//! [`AttemptTimeout`]: crate::attempt_timeout::AttemptTimeout

mod call;
pub mod future;
mod layer;
mod policy;

pub use self::{layer::ResilienceLayer, policy::ResiliencePolicy};

pub(crate) use self::future::Limits;
use self::{call::Call, future::ResponseFuture};

use crate::{
    body::TryCloneBody,
    deadline::body::DeadlineBody,
    guard::{Guard, Settle},
    limits,
    policy::{Decoder, Retryer},
    retry::{RetryPolicy, RetryState},
    telemetry::{CallSpan, Form},
    BoxError, RequestDeadline, Wrapper,
};
use std::{
    fmt,
    sync::Arc,
    task::{Context, Poll},
};
use tokio::time::Instant;
use tower_service::Service;

/// The combined service around `S`, with the decoder `D` and the retryer `R`:
/// what [`ResilienceLayer`] makes.
///
/// It behaves as [`Deadline`] → [`StatusRetry`] → [`AttemptTimeout`] with
/// the same settings: the same attempts, at the same instants, with the same
/// outcome, errors, events and reports (a property test in the repository
/// runs both over scripted upstreams on the paused clock and compares them).
/// One thing differs, by design: the deadline stays in the call's own future,
/// so the request the inner service gets carries no [`RequestDeadline`] and
/// no [`FinalAttempt`](crate::extensions::FinalAttempt) marker. A service below that reads them (a
/// [`PropagateDeadlineLayer`](crate::propagate::PropagateDeadlineLayer), a
/// client of one's own) goes inside the three separate layers instead; to send
/// each attempt's budget upstream, [`ResiliencePolicy::propagating`] does it from the
/// combined service.
///
/// What that buys: one future and one timer per call instead of three and
/// two, and no request extension (three allocations) for the deadline.
///
/// A name for the stack's type, for a field of a handler's state (axum's
/// `State` holds it the same way; the gateway example does):
///
/// Besides the crates the README's "Use" section lists, the example needs
/// `hyper = "1"`, for the body type of an inbound request.
///
/// ```
/// use http_resilience::{
///     body::ReplayBody,
///     breaker::BreakerPolicy,
///     policy::{AnyDecoder, AnyRetryer},
///     transport::{self, HttpClient},
///     BoxError, Resilience,
/// };
/// use hyper::body::Incoming;
/// use tower::Layer;
///
/// /// What every handler of a gateway shares.
/// #[derive(Clone)]
/// struct AppState {
///     upstream: Resilience<
///         HttpClient<ReplayBody<Incoming>>,
///         AnyDecoder,
///         AnyRetryer,
///         Option<BreakerPolicy<AnyDecoder>>,
///     >,
/// }
///
/// # fn main() -> Result<(), BoxError> {
/// let client = transport::Builder::new().build_http()?;
/// let state = AppState {
///     upstream: http_resilience::presets::standard()
///         .erase()
///         .with_guard(Some(BreakerPolicy::default().erase()))
///         .layer()
///         .layer(client),
/// };
/// # let _ = state;
/// # Ok(())
/// # }
/// ```
///
/// [`Deadline`]: crate::deadline::Deadline
/// [`StatusRetry`]: crate::retry::StatusRetry
/// [`AttemptTimeout`]: crate::attempt_timeout::AttemptTimeout
///
/// # Clone
///
/// Every attempt after the first is made on a clone of the inner service, as
/// with [`StatusRetry`]; the policy is shared behind an `Arc`.
pub struct Resilience<S, D, R, G: Guard = ()> {
    pub(super) inner: S,
    pub(super) limits: Arc<Limits>,
    pub(super) policy: Arc<RetryPolicy<D, R>>,
    pub(super) guard: G,
    // The guard's state of this clone's last key.
    pub(super) local: G::Local,
}

impl<S: Clone, D, R, G: Guard> Clone for Resilience<S, D, R, G> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            limits: Arc::clone(&self.limits),
            policy: Arc::clone(&self.policy),
            guard: self.guard.clone(),
            local: self.local.clone(),
        }
    }
}

impl<S: fmt::Debug, D: fmt::Debug, R: fmt::Debug, G: Guard + fmt::Debug> fmt::Debug
    for Resilience<S, D, R, G>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resilience")
            .field("inner", &self.inner)
            .field("deadline", &self.limits.deadline)
            .field("attempt_timeout", &self.limits.attempt)
            .field("final_uses_deadline", &self.limits.final_uses_deadline)
            .field("retry", &self.policy)
            .field("guard", &self.guard)
            .finish_non_exhaustive()
    }
}

impl<S, D, R, G: Guard> Resilience<S, D, R, G> {
    /// The guard every attempt passes, whose state (`states()`) reads what
    /// it keeps.
    pub const fn guard(&self) -> &G {
        &self.guard
    }
}

impl<S, D, R, G: Guard> Wrapper for Resilience<S, D, R, G> {
    type Inner = S;

    fn get_ref(&self) -> &S {
        &self.inner
    }

    fn into_inner(self) -> S {
        self.inner
    }
}

impl<S, B, T, D, R, G> Service<http::Request<B>> for Resilience<S, D, R, G>
where
    S: Service<http::Request<B>, Response = http::Response<T>> + Clone,
    S::Error: Into<BoxError>,
    B: TryCloneBody,
    D: Decoder<T, BoxError>,
    R: Retryer,
    G: Settle<T>,
{
    type Response = http::Response<DeadlineBody<T>>;
    type Error = BoxError;
    type Future = ResponseFuture<S, B, D, R, G>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    #[inline]
    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let now = Instant::now();
        let deadline =
            limits::call_deadline(now, self.limits.deadline, RequestDeadline::of(&request));
        let pass = self.guard.pass_for(&mut self.local, &request);
        // NOTE: the service made ready for this call sends its first attempt
        // (or goes with the call, when the guard makes that attempt wait);
        // the clone sends the later ones, made ready before each, as tower's
        // rule for a cloned service says. Sending on the ready one, rather
        // than swapping the two, spares two moves of the service, which can
        // be large (a pooled client).
        let service = self.inner.clone();
        let policy = Arc::clone(&self.policy);
        if deadline.has_passed_at(now) {
            let retry = RetryState::unsent(policy, &request);
            let call = Call::new(service, retry, deadline, Arc::clone(&self.limits), pass);
            return ResponseFuture::expired(call);
        }
        let span = CallSpan::new(Form::Retry, self.policy.parts().options.telemetry, &request);
        let retry = RetryState::begin(policy, &mut request, false, &span);
        let mut call = Call::new(service, retry, deadline, Arc::clone(&self.limits), pass);
        // NOTE: the first attempt is admitted by the path of every later one,
        // and the future is assembled from its parts afterwards, so that
        // none is built inside it and then copied out with it.
        let state = {
            let _entered = span.enter();
            call.admit(request, now, Some(&mut self.inner))
        };
        let span = span.keep();
        ResponseFuture {
            state,
            sleep: None,
            call,
            span,
        }
    }
}
