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

pub mod future;

use self::future::{Call, Limits, ResponseFuture};

use crate::propagate::TimeoutFormat;
use crate::{
    body::TryCloneBody,
    breaker::{AnyBreaker, Gate, Judges, NoBreaker},
    deadline::body::DeadlineBody,
    limits,
    overload::{Admission, Admit, AnyOverload, NoOverload},
    policy::{AnyDecoder, AnyRetryer, Decoder, Retryer},
    retry::{RetryPolicy, RetryState},
    telemetry::{self, CallSpan, Form},
    BoxError, InvalidSetting, RequestDeadline,
};
use std::{
    fmt,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};
use tokio::time::Instant;
use tower_layer::Layer;
use tower_service::Service;

/// A deadline, an attempt timeout and a retry policy, checked to fit
/// together.
///
/// [`layer`](Self::layer) makes the combined [`Resilience`] service, with the
/// semantics of the three layers stacked outermost first: [`Deadline`] →
/// [`StatusRetry`] → [`AttemptTimeout`]. The three stay usable on their own.
///
/// [`Deadline`]: crate::deadline::Deadline
/// [`StatusRetry`]: crate::retry::StatusRetry
/// [`AttemptTimeout`]: crate::attempt_timeout::AttemptTimeout
///
/// # Example
///
/// ```
/// use http::{Request, Response};
/// use http_resilience::{presets, Attempts};
/// use std::convert::Infallible;
/// use tower::{ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() {
/// let svc = ServiceBuilder::new()
///     .layer(presets::reactor().layer())
///     .service_fn(|_: Request<String>| async {
///         Ok::<_, Infallible>(Response::builder().status(503).body(String::new()).unwrap())
///     });
/// let response = svc.oneshot(Request::new(String::new())).await.unwrap();
/// assert_eq!(Attempts::of(&response), 3);
/// # }
/// ```
///
#[derive(Clone)]
pub struct ResiliencePolicy<D, R, G = NoBreaker, O = NoOverload> {
    deadline: Duration,
    attempt_timeout: Duration,
    final_uses_deadline: bool,
    // The header and format every attempt's budget is sent in, if it is.
    budget_header: Option<(http::HeaderName, TimeoutFormat)>,
    retry: RetryPolicy<D, R>,
    breaker: G,
    overload: O,
}

// ===== impl ResiliencePolicy =====

impl<D, R> ResiliencePolicy<D, R> {
    /// A policy: every call gets `deadline` in all, every attempt
    /// `attempt_timeout`, and `retry` decides on retries.
    ///
    /// An attempt timeout longer than the deadline means what it means in the
    /// three layers: an attempt ends at the earlier of its limit and the
    /// deadline, so the deadline wins (and its error is the one returned).
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] when a limit is zero (field `deadline` or
    /// `attempt_timeout`).
    ///
    /// # Example
    ///
    /// ```
    /// use http_resilience::{
    ///     policy::{FixedDelay, StatusDecoder}, retry::RetryPolicy,
    ///     ResiliencePolicy,
    /// };
    /// use std::time::Duration;
    ///
    /// let retry = RetryPolicy::new(StatusDecoder::new([503])?, FixedDelay::never());
    /// let policy = ResiliencePolicy::new(Duration::from_secs(8), Duration::from_secs(3), retry.clone())?;
    /// assert_eq!(policy.attempt_timeout(), Duration::from_secs(3));
    ///
    /// // The deadline wins over a longer attempt limit, as in the three layers.
    /// let short = ResiliencePolicy::new(Duration::from_secs(1), Duration::from_secs(3), retry.clone())?;
    /// assert_eq!(short.deadline(), Duration::from_secs(1));
    ///
    /// let err = ResiliencePolicy::new(Duration::ZERO, Duration::from_secs(3), retry).unwrap_err();
    /// assert_eq!(err.field(), "deadline");
    /// # Ok::<(), http_resilience::BoxError>(())
    /// ```
    pub fn new(
        deadline: Duration,
        attempt_timeout: Duration,
        retry: RetryPolicy<D, R>,
    ) -> Result<Self, InvalidSetting> {
        positive("deadline", deadline)?;
        positive("attempt_timeout", attempt_timeout)?;
        Ok(Self::known_good(deadline, attempt_timeout, retry))
    }

    /// The policy from limits known to pass [`new`](Self::new)'s checks: the
    /// fixed numbers of the presets, which their tests hold valid. Nothing is
    /// checked here.
    pub(crate) const fn known_good(
        deadline: Duration,
        attempt_timeout: Duration,
        retry: RetryPolicy<D, R>,
    ) -> Self {
        Self {
            deadline,
            attempt_timeout,
            final_uses_deadline: false,
            budget_header: None,
            retry,
            breaker: NoBreaker,
            overload: NoOverload,
        }
    }
}

impl<D, R, G, O> ResiliencePolicy<D, R, G, O> {
    /// The same policy with every attempt passing the circuits of `breaker`
    /// (a [`BreakerPolicy`](crate::breaker::BreakerPolicy)), as a
    /// [`CircuitBreakerLayer`](crate::breaker::CircuitBreakerLayer) between
    /// the retry and the attempt timeout of the three layers would: an
    /// attempt the circuit turns away is never sent, and fails with
    /// [`CircuitOpen`](crate::breaker::error::CircuitOpen); an attempt that
    /// times out counts as a failure. Every attempt of a call passes the
    /// circuit of its first attempt's key. [`NoBreaker`] takes it away.
    ///
    /// The breaker's circuits are shared with every clone of `breaker`: a
    /// three-layer stack or a hedging stack given a clone of it trips and
    /// recovers with this one.
    ///
    /// # Example
    ///
    /// ```
    /// use http_resilience::{breaker::BreakerPolicy, presets};
    ///
    /// let breaker = BreakerPolicy::default();
    /// let policy = presets::reactor().with_breaker(breaker.clone());
    /// assert_eq!(policy.breaker().key_limit(), breaker.key_limit());
    /// ```
    pub fn with_breaker<G2: Gate>(self, breaker: G2) -> ResiliencePolicy<D, R, G2, O> {
        ResiliencePolicy {
            deadline: self.deadline,
            attempt_timeout: self.attempt_timeout,
            final_uses_deadline: self.final_uses_deadline,
            budget_header: self.budget_header,
            retry: self.retry,
            breaker,
            overload: self.overload,
        }
    }

    /// The same policy with every attempt asking `overload` (an
    /// [`OverloadPolicy`](crate::overload::OverloadPolicy)) for a slot of its
    /// key, as an [`OverloadLayer`](crate::overload::OverloadLayer) between
    /// the retry and the circuit breaker (or the attempt timeout) of the
    /// three layers would: an attempt waits for a slot within the call's
    /// deadline, or is turned away, never sent, with
    /// [`Overloaded`](crate::overload::error::Overloaded), which the
    /// ready-made decoders do not retry and which costs no budget token.
    /// Every attempt of a call takes a slot of its first attempt's key, and
    /// holds it until its response head (or its error) comes. [`NoOverload`]
    /// takes it away.
    ///
    /// The policy's state is shared with every clone of `overload`: a
    /// three-layer or hedging stack given a clone of it counts its calls in
    /// the same slots.
    ///
    /// # Example
    ///
    /// ```
    /// use http_resilience::{overload::OverloadPolicy, presets};
    ///
    /// let bulkhead = OverloadPolicy::bulkhead(32)?.with_queue(32);
    /// let policy = presets::standard().with_overload(bulkhead);
    /// assert_eq!(policy.overload().settings().max_queued, 32);
    /// # Ok::<(), http_resilience::InvalidSetting>(())
    /// ```
    pub fn with_overload<O2: Admit>(self, overload: O2) -> ResiliencePolicy<D, R, G, O2> {
        ResiliencePolicy {
            deadline: self.deadline,
            attempt_timeout: self.attempt_timeout,
            final_uses_deadline: self.final_uses_deadline,
            budget_header: self.budget_header,
            retry: self.retry,
            breaker: self.breaker,
            overload,
        }
    }

    /// The overload control every attempt passes: [`NoOverload`] unless
    /// [`with_overload`](Self::with_overload) set one.
    pub const fn overload(&self) -> &O {
        &self.overload
    }

    /// The circuit breaker every attempt passes: [`NoBreaker`] unless
    /// [`with_breaker`](Self::with_breaker) set one.
    pub const fn breaker(&self) -> &G {
        &self.breaker
    }

    /// The same policy with another budget for every call.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new): [`InvalidSetting`] when `deadline` is zero. A
    /// deadline shorter than the attempt timeout is the one that holds.
    ///
    /// # Example
    ///
    /// ```
    /// use http_resilience::presets;
    /// use std::time::Duration;
    ///
    /// let tighter = presets::standard().with_deadline(Duration::from_secs(12))?;
    /// assert_eq!(tighter.deadline(), Duration::from_secs(12));
    ///
    /// // Below the preset's 10 s attempt timeout: every attempt ends by 5 s.
    /// let quick = presets::standard().with_deadline(Duration::from_secs(5))?;
    /// assert_eq!(quick.deadline(), Duration::from_secs(5));
    ///
    /// let err = presets::standard().with_deadline(Duration::ZERO).unwrap_err();
    /// assert_eq!(err.to_string(), "deadline must be greater than zero");
    /// assert_eq!(err.value(), Some("0s"));
    /// # Ok::<(), http_resilience::BoxError>(())
    /// ```
    pub fn with_deadline(mut self, deadline: Duration) -> Result<Self, InvalidSetting> {
        positive("deadline", deadline)?;
        self.deadline = deadline;
        Ok(self)
    }

    /// The same policy with another limit for every attempt.
    ///
    /// # Errors
    ///
    /// As [`new`](Self::new): [`InvalidSetting`] when `attempt_timeout` is
    /// zero.
    pub fn with_attempt_timeout(
        mut self,
        attempt_timeout: Duration,
    ) -> Result<Self, InvalidSetting> {
        positive("attempt_timeout", attempt_timeout)?;
        self.attempt_timeout = attempt_timeout;
        Ok(self)
    }

    /// The same policy, sending every attempt's budget upstream: the time
    /// left before the deadline when the attempt starts, capped by the
    /// attempt timeout, in `header` in `format` (Envoy's
    /// `x-envoy-expected-rq-timeout-ms`, gRPC's `grpc-timeout`). It is what
    /// a [`PropagateDeadlineLayer`](crate::propagate::PropagateDeadlineLayer)
    /// with the attempt limit does between the retry and the attempt timeout
    /// of the three separate layers, which the combined service cannot hold
    /// below its retry.
    ///
    /// # Example
    ///
    /// ```
    /// use http_resilience::{presets, propagate::{TimeoutFormat, EXPECTED_RQ_TIMEOUT_MS}};
    ///
    /// let policy = presets::standard().propagating(EXPECTED_RQ_TIMEOUT_MS, TimeoutFormat::Millis);
    /// # let _ = policy;
    /// ```
    #[must_use]
    pub fn propagating(mut self, header: http::HeaderName, format: TimeoutFormat) -> Self {
        self.budget_header = Some((header, format));
        self
    }

    /// The header and the format of the budget sent on every attempt, if
    /// any ([`propagating`](Self::propagating)).
    #[cfg(any(test, feature = "serde"))]
    pub(crate) const fn budget_header(&self) -> Option<&(http::HeaderName, TimeoutFormat)> {
        self.budget_header.as_ref()
    }

    /// The same limits with the retry policy `f` makes of this one: a
    /// listener, a budget, another retryer. It cannot make the limits invalid,
    /// so it cannot fail.
    ///
    /// # Example
    ///
    /// ```
    /// use http_resilience::{presets, policy::CallEvent};
    ///
    /// let policy = presets::standard()
    ///     .map_retry(|retry| retry.with_listener(|heard: &CallEvent<'_>| println!("{}", heard.event)));
    /// assert!(policy.retry().deadline_margin().is_some(), "the preset's settings stay");
    /// ```
    pub fn map_retry<D2, R2>(
        self,
        f: impl FnOnce(RetryPolicy<D, R>) -> RetryPolicy<D2, R2>,
    ) -> ResiliencePolicy<D2, R2, G, O> {
        ResiliencePolicy {
            deadline: self.deadline,
            attempt_timeout: self.attempt_timeout,
            final_uses_deadline: self.final_uses_deadline,
            budget_header: self.budget_header,
            retry: f(self.retry),
            breaker: self.breaker,
            overload: self.overload,
        }
    }

    /// The same policy judging with `decoder`, every other part kept.
    pub fn with_decoder<D2>(self, decoder: D2) -> ResiliencePolicy<D2, R, G, O> {
        self.map_retry(|retry| retry.with_decoder(decoder))
    }

    /// The same policy waiting as `retryer` says, every other part kept: the
    /// one line that retunes a preset's backoff.
    ///
    /// # Example
    ///
    /// ```
    /// use http_resilience::{policy::ExponentialBackoff, presets};
    /// use std::time::Duration;
    ///
    /// let quick = presets::standard().with_retryer(ExponentialBackoff::new(
    ///     Duration::from_millis(100),
    ///     2.0,
    ///     Duration::from_secs(2),
    ///     3,
    /// )?);
    /// assert_eq!(quick.retry().retryer().max_attempts(), 3);
    /// assert!(quick.retry().deadline_margin().is_some(), "the preset's other settings stay");
    /// # Ok::<(), http_resilience::BoxError>(())
    /// ```
    pub fn with_retryer<R2>(self, retryer: R2) -> ResiliencePolicy<D, R2, G, O> {
        self.map_retry(|retry| retry.with_retryer(retryer))
    }

    /// The same policy allowing at most `max` attempts in all (the first
    /// included), every other setting kept
    /// ([`RetryPolicy::with_max_attempts`]).
    ///
    /// # Errors
    ///
    /// As [`RetryPolicy::with_max_attempts`].
    ///
    /// # Example
    ///
    /// ```
    /// use http_resilience::presets;
    ///
    /// let two = presets::standard().with_max_attempts(2)?;
    /// assert_eq!(two.retry().retryer().max_attempts(), 2);
    /// assert_eq!(presets::grpc().with_max_attempts(1).unwrap_err().field(), "max_attempts");
    /// # Ok::<(), http_resilience::BoxError>(())
    /// ```
    pub fn with_max_attempts(mut self, max: u32) -> Result<Self, InvalidSetting>
    where
        R: Retryer,
    {
        self.retry = self.retry.with_max_attempts(max)?;
        Ok(self)
    }

    /// The same policy, with the last attempt the retry can make (its
    /// retryer allows no more, or the request cannot be sent again) running
    /// until the deadline instead of its attempt timeout, as
    /// [`AttemptTimeoutLayer::final_attempt_uses_deadline`](crate::AttemptTimeoutLayer::final_attempt_uses_deadline)
    /// does under the three layers (linkerd drops the per-try timeout of the
    /// last retry the same way).
    #[must_use]
    pub const fn final_attempt_uses_deadline(mut self) -> Self {
        self.final_uses_deadline = true;
        self
    }

    /// The budget of every call.
    pub const fn deadline(&self) -> Duration {
        self.deadline
    }

    /// The limit of every attempt.
    pub const fn attempt_timeout(&self) -> Duration {
        self.attempt_timeout
    }

    /// The retry policy.
    pub const fn retry(&self) -> &RetryPolicy<D, R> {
        &self.retry
    }

    /// The same policy with its decoder, retryer, breaker and overload
    /// control turned into the run-time choices [`AnyDecoder`],
    /// [`AnyRetryer`], [`AnyBreaker`] and [`AnyOverload`], so that policies
    /// built in different ways (presets, a configuration file) have one type.
    /// A breaker's policy is erased too, with circuits of its own: erase
    /// before handing the breaker out.
    pub fn erase(self) -> ResiliencePolicy<AnyDecoder, AnyRetryer, AnyBreaker, AnyOverload>
    where
        D: Into<AnyDecoder>,
        R: Into<AnyRetryer>,
        G: Into<AnyBreaker>,
        O: Into<AnyOverload>,
    {
        ResiliencePolicy {
            deadline: self.deadline,
            attempt_timeout: self.attempt_timeout,
            final_uses_deadline: self.final_uses_deadline,
            budget_header: self.budget_header,
            retry: self.retry.map(Into::into, Into::into),
            breaker: self.breaker.into(),
            overload: self.overload.into(),
        }
    }

    /// The layer that makes the combined [`Resilience`] service.
    pub fn layer(self) -> ResilienceLayer<D, R, G, O> {
        ResilienceLayer {
            deadline: self.deadline,
            limits: Limits {
                attempt: self.attempt_timeout,
                final_uses_deadline: self.final_uses_deadline,
                budget_header: self.budget_header.map(Arc::new),
            },
            policy: Arc::new(self.retry),
            breaker: self.breaker,
            overload: self.overload,
        }
    }
}

impl<D: fmt::Debug, R: fmt::Debug, G: fmt::Debug, O: fmt::Debug> fmt::Debug
    for ResiliencePolicy<D, R, G, O>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResiliencePolicy")
            .field("deadline", &self.deadline)
            .field("attempt_timeout", &self.attempt_timeout)
            .field("retry", &self.retry)
            .field("breaker", &self.breaker)
            .field("overload", &self.overload)
            .finish()
    }
}

/// An error for a zero `value` of `field`.
fn positive(field: &str, value: Duration) -> Result<(), InvalidSetting> {
    if value.is_zero() {
        return Err(InvalidSetting::new(field, "must be greater than zero").with_value("0s"));
    }
    Ok(())
}

/// Makes [`Resilience`] around a service: the semantics of
/// [`DeadlineLayer`](crate::DeadlineLayer) →
/// [`StatusRetryLayer`](crate::StatusRetryLayer) →
/// [`AttemptTimeoutLayer`](crate::AttemptTimeoutLayer) in one service.
///
/// See [`ResiliencePolicy`] for an example.
pub struct ResilienceLayer<D, R, G = NoBreaker, O = NoOverload> {
    deadline: Duration,
    limits: Limits,
    policy: Arc<RetryPolicy<D, R>>,
    breaker: G,
    overload: O,
}

impl<D, R, G: Clone, O: Clone> Clone for ResilienceLayer<D, R, G, O> {
    fn clone(&self) -> Self {
        Self {
            deadline: self.deadline,
            limits: self.limits.clone(),
            policy: Arc::clone(&self.policy),
            breaker: self.breaker.clone(),
            overload: self.overload.clone(),
        }
    }
}

impl<D: fmt::Debug, R: fmt::Debug, G: fmt::Debug, O: fmt::Debug> fmt::Debug
    for ResilienceLayer<D, R, G, O>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResilienceLayer")
            .field("deadline", &self.deadline)
            .field("attempt_timeout", &self.limits.attempt)
            .field("final_uses_deadline", &self.limits.final_uses_deadline)
            .field("retry", &self.policy)
            .field("breaker", &self.breaker)
            .field("overload", &self.overload)
            .finish()
    }
}

impl<S, D, R, G: Gate, O: Admit> Layer<S> for ResilienceLayer<D, R, G, O> {
    type Service = Resilience<S, D, R, G, O>;

    fn layer(&self, inner: S) -> Self::Service {
        Resilience {
            inner,
            deadline: self.deadline,
            limits: self.limits.clone(),
            policy: Arc::clone(&self.policy),
            breaker: self.breaker.clone(),
            at_hand: G::Local::default(),
            overload: self.overload.clone(),
            slots_at_hand: O::Local::default(),
        }
    }
}

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
/// ```
/// use http_resilience::{
///     body::ReplayBody,
///     breaker::AnyBreaker,
///     overload::AnyOverload,
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
///         AnyBreaker,
///         AnyOverload,
///     >,
/// }
///
/// # fn main() -> Result<(), BoxError> {
/// let client = transport::Builder::new().build_http()?;
/// let state = AppState {
///     upstream: http_resilience::presets::standard().erase().layer().layer(client),
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
pub struct Resilience<S, D, R, G: Gate = NoBreaker, O: Admit = NoOverload> {
    inner: S,
    deadline: Duration,
    limits: Limits,
    policy: Arc<RetryPolicy<D, R>>,
    breaker: G,
    // The circuit of this clone's last key, when there is a breaker.
    at_hand: G::Local,
    overload: O,
    // The slots of this clone's last key, when there is overload control.
    slots_at_hand: O::Local,
}

impl<S: Clone, D, R, G: Gate, O: Admit> Clone for Resilience<S, D, R, G, O> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            deadline: self.deadline,
            limits: self.limits.clone(),
            policy: Arc::clone(&self.policy),
            breaker: self.breaker.clone(),
            at_hand: self.at_hand.clone(),
            overload: self.overload.clone(),
            slots_at_hand: self.slots_at_hand.clone(),
        }
    }
}

impl<S: fmt::Debug, D: fmt::Debug, R: fmt::Debug, G: Gate + fmt::Debug, O: Admit + fmt::Debug>
    fmt::Debug for Resilience<S, D, R, G, O>
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resilience")
            .field("inner", &self.inner)
            .field("deadline", &self.deadline)
            .field("attempt_timeout", &self.limits.attempt)
            .field("final_uses_deadline", &self.limits.final_uses_deadline)
            .field("retry", &self.policy)
            .field("breaker", &self.breaker)
            .field("overload", &self.overload)
            .finish_non_exhaustive()
    }
}

impl<S, D, R, G: Gate, O: Admit> Resilience<S, D, R, G, O> {
    /// The circuit breaker every attempt passes.
    pub const fn breaker(&self) -> &G {
        &self.breaker
    }

    /// The overload control every attempt passes.
    pub const fn overload(&self) -> &O {
        &self.overload
    }

    /// The budget of every call.
    pub const fn deadline(&self) -> Duration {
        self.deadline
    }

    /// The limit of every attempt.
    pub const fn attempt_timeout(&self) -> Duration {
        self.limits.attempt
    }

    /// The retry policy.
    pub fn retry(&self) -> &RetryPolicy<D, R> {
        &self.policy
    }

    define_inner_service_accessors!();
}

impl<S, B, T, D, R, G, O> Service<http::Request<B>> for Resilience<S, D, R, G, O>
where
    S: Service<http::Request<B>, Response = http::Response<T>> + Clone,
    S::Error: Into<BoxError>,
    B: TryCloneBody,
    D: Decoder<T, BoxError>,
    R: Retryer,
    G: Judges<T>,
    O: Admit,
{
    type Response = http::Response<DeadlineBody<T>>;
    type Error = BoxError;
    type Future = ResponseFuture<S, B, D, R, G, O>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    #[inline]
    fn call(&mut self, mut request: http::Request<B>) -> Self::Future {
        let now = Instant::now();
        let deadline = limits::call_deadline(now, self.deadline, RequestDeadline::of(&request));
        let passes = (
            self.breaker.pass_for(&mut self.at_hand, &request),
            self.overload.pass_for(&mut self.slots_at_hand, &request),
        );
        if deadline.has_passed_at(now) {
            let retry = RetryState::unsent(Arc::clone(&self.policy), &request);
            return ResponseFuture::expired(self.call_with(retry, deadline, passes));
        }
        let span = CallSpan::new(Form::Retry, self.policy.parts().telemetry, &request);
        let retry = RetryState::begin(Arc::clone(&self.policy), &mut request, false, &span);
        let mut call = self.call_with(retry, deadline, passes);
        match O::try_admit(&mut call.slot, deadline) {
            Admission::Now => {}
            Admission::Queued => {
                // NOTE: the service made ready for this call goes with it, to
                // send it once it has its slot; the clone is made ready for
                // the next call, as tower's rule for a cloned service says.
                call.swap_service(&mut self.inner);
                return ResponseFuture::queued(request, call, span.keep());
            }
            Admission::Refused(error) => return ResponseFuture::refused(error, call, span.keep()),
        }
        // NOTE: the deadline is ahead (checked above), so the budget is sent;
        // were it spent, the attempt would end as an expired call.
        if call.stamp_budget(&mut request, now).is_err() {
            return ResponseFuture::expired(call);
        }
        if let Err(open) = G::enter(&mut call.pass) {
            return ResponseFuture::refused(open.into(), call, span.keep());
        }
        let future = {
            let _entered = span.enter();
            telemetry::send_in(call.retry.attempt_span(), || self.inner.call(request))
        };
        ResponseFuture::new(future, now, call, span.keep())
    }
}

impl<S: Clone, D, R, G: Gate, O: Admit> Resilience<S, D, R, G, O> {
    /// What one call keeps, on a clone of the inner service.
    #[inline(always)]
    fn call_with<B>(
        &self,
        retry: RetryState<B, D, R>,
        deadline: RequestDeadline,
        passes: (G::Pass, O::Pass),
    ) -> Call<S, B, D, R, G, O> {
        Call::new(
            self.inner.clone(),
            retry,
            deadline,
            self.limits.clone(),
            passes,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{FixedDelay, StatusDecoder};

    fn retry() -> RetryPolicy<StatusDecoder, FixedDelay> {
        RetryPolicy::new(
            StatusDecoder::new([503]).unwrap(),
            FixedDelay::new(Duration::ZERO, 1),
        )
    }

    #[test]
    fn rejects_limits_that_do_not_fit() {
        let secs = Duration::from_secs;
        let err = ResiliencePolicy::new(secs(8), Duration::ZERO, retry()).unwrap_err();
        assert_eq!(err.to_string(), "attempt_timeout must be greater than zero");
        let err = ResiliencePolicy::new(Duration::ZERO, secs(1), retry()).unwrap_err();
        assert_eq!(err.to_string(), "deadline must be greater than zero");
        let err = ResiliencePolicy::new(secs(1), Duration::ZERO, retry()).unwrap_err();
        assert_eq!(err.to_string(), "attempt_timeout must be greater than zero");
        assert!(ResiliencePolicy::new(secs(3), secs(3), retry()).is_ok());
        assert!(ResiliencePolicy::new(secs(1), secs(3), retry()).is_ok());
    }

    // ===== nonsense refused =====

    fn policy() -> RetryPolicy<StatusDecoder, FixedDelay> {
        RetryPolicy::new(StatusDecoder::new([503]).unwrap(), FixedDelay::never())
    }

    #[test]
    fn changing_a_limit_keeps_every_other_setting() {
        let secs = Duration::from_secs;
        let policy = ResiliencePolicy::new(secs(8), secs(3), retry())
            .unwrap()
            .propagating(
                crate::propagate::EXPECTED_RQ_TIMEOUT_MS,
                TimeoutFormat::Millis,
            )
            .final_attempt_uses_deadline()
            .with_deadline(secs(5))
            .unwrap()
            .with_attempt_timeout(secs(2))
            .unwrap();
        assert_eq!(
            (policy.deadline, policy.attempt_timeout),
            (secs(5), secs(2))
        );
        assert!(policy.final_uses_deadline);
        assert!(policy.budget_header.is_some());
    }

    #[test]
    fn limits_that_do_not_fit_are_refused_by_field() {
        let secs = Duration::from_secs;
        for (deadline, attempt, field) in [
            (Duration::ZERO, secs(1), "deadline"),
            (Duration::ZERO, Duration::ZERO, "deadline"),
            (secs(1), Duration::ZERO, "attempt_timeout"),
        ] {
            let err = ResiliencePolicy::new(deadline, attempt, policy()).unwrap_err();
            assert_eq!(err.field(), field, "{err}");
        }
        // An attempt limit above the deadline is taken: the deadline wins.
        for (deadline, attempt) in [
            (secs(1), secs(2)),
            (secs(1), Duration::MAX),
            (Duration::from_nanos(1), Duration::from_nanos(2)),
        ] {
            assert!(ResiliencePolicy::new(deadline, attempt, policy()).is_ok());
        }
        // The largest limits fit, and make a layer.
        let largest = ResiliencePolicy::new(Duration::MAX, Duration::MAX, policy()).unwrap();
        let _layer = largest.layer();
    }
}
