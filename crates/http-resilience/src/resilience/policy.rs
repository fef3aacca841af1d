//! The policy of the combined service: the limits and the retry policy,
//! checked to fit together, and the guard every attempt passes.

use super::{future::Limits, ResilienceLayer};
use crate::{
    guard::Guard,
    policy::{AnyDecoder, AnyRetryer, Retryer},
    propagate::TimeoutFormat,
    retry::RetryPolicy,
    InvalidSetting,
};
use std::{fmt, sync::Arc, time::Duration};

/// A deadline, an attempt timeout and a retry policy, checked to fit
/// together.
///
/// [`layer`](Self::layer) makes the combined [`Resilience`](super::Resilience) service, with the
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
pub struct ResiliencePolicy<D, R, G = ()> {
    deadline: Duration,
    attempt_timeout: Duration,
    final_uses_deadline: bool,
    // The header and format every attempt's budget is sent in, if it is.
    budget_header: Option<(http::HeaderName, TimeoutFormat)>,
    retry: RetryPolicy<D, R>,
    guard: G,
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
            guard: (),
        }
    }
}

impl<D, R, G> ResiliencePolicy<D, R, G> {
    /// The same policy with every attempt passing `guard` (a
    /// [`BreakerPolicy`](crate::breaker::BreakerPolicy), an
    /// [`OverloadPolicy`](crate::overload::OverloadPolicy), a pair of guards
    /// for two, asked in that order, or `()` for none), as a
    /// [`GuardLayer`](crate::guard::GuardLayer) of it between the retry and
    /// the attempt timeout of the three layers would: an attempt it turns
    /// away is never sent, and fails with the guard's error, which the
    /// ready-made decoders do not retry and which costs no budget token; an
    /// attempt it makes wait waits within the call's deadline. Every attempt
    /// of a call passes the guard's state of its first attempt's key.
    ///
    /// A guard's state is shared with every clone of it: a three-layer or
    /// hedging stack given a clone trips, recovers and counts its calls with
    /// this one.
    ///
    /// # Example
    ///
    /// ```
    /// use http_resilience::key::PerKey;
    /// use http_resilience::{breaker::BreakerPolicy, overload::OverloadPolicy, presets, BoxError};
    /// use tower::{service_fn, Layer, ServiceExt};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), BoxError> {
    /// let breaker = BreakerPolicy::default();
    /// let bulkhead = OverloadPolicy::bulkhead(32)?.with_queue(32);
    /// // The bulkhead first: a call waits for a slot, then passes the circuit.
    /// let policy = presets::standard().with_guard((bulkhead, breaker.clone()));
    /// let svc = policy.layer().layer(service_fn(|_: http::Request<String>| async {
    ///     Ok::<_, BoxError>(http::Response::new(String::new()))
    /// }));
    /// let request = http::Request::get("http://api.test/").body(String::new())?;
    /// svc.oneshot(request).await?;
    /// // The clone kept here shares the circuits of the one in the stack.
    /// assert_eq!(breaker.states().len(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_guard<G2: Guard>(self, guard: G2) -> ResiliencePolicy<D, R, G2> {
        ResiliencePolicy {
            deadline: self.deadline,
            attempt_timeout: self.attempt_timeout,
            final_uses_deadline: self.final_uses_deadline,
            budget_header: self.budget_header,
            retry: self.retry,
            guard,
        }
    }

    /// The same policy with `f` applied to its guard.
    #[cfg(feature = "otel")]
    pub(crate) fn map_guard(mut self, f: impl FnOnce(G) -> G) -> Self {
        self.guard = f(self.guard);
        self
    }

    /// The guard every attempt passes: `()` unless
    /// [`with_guard`](Self::with_guard) set one.
    pub const fn guard(&self) -> &G {
        &self.guard
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
    ///     .map_retry(|retry| retry.map_options(|options| options.with_listener(|heard: &CallEvent<'_>| println!("{}", heard.event))));
    /// assert!(format!("{policy:?}").contains("deadline_margin: Some("), "the preset's settings stay");
    /// ```
    pub fn map_retry<D2, R2>(
        self,
        f: impl FnOnce(RetryPolicy<D, R>) -> RetryPolicy<D2, R2>,
    ) -> ResiliencePolicy<D2, R2, G> {
        ResiliencePolicy {
            deadline: self.deadline,
            attempt_timeout: self.attempt_timeout,
            final_uses_deadline: self.final_uses_deadline,
            budget_header: self.budget_header,
            retry: f(self.retry),
            guard: self.guard,
        }
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
    /// assert!(format!("{two:?}").contains("max_attempts: 2"));
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

    /// The same policy with its decoder and retryer turned into the
    /// run-time choices [`AnyDecoder`] and [`AnyRetryer`], so that policies
    /// built in different ways (presets, a configuration file) have one
    /// type. The guard stays as it is; an `Option` of a guard is the
    /// run-time choice of one.
    pub fn erase(self) -> ResiliencePolicy<AnyDecoder, AnyRetryer, G>
    where
        D: Into<AnyDecoder>,
        R: Into<AnyRetryer>,
    {
        ResiliencePolicy {
            deadline: self.deadline,
            attempt_timeout: self.attempt_timeout,
            final_uses_deadline: self.final_uses_deadline,
            budget_header: self.budget_header,
            retry: self.retry.map(Into::into, Into::into),
            guard: self.guard,
        }
    }

    /// The layer that makes the combined [`Resilience`](super::Resilience) service.
    pub fn layer(self) -> ResilienceLayer<D, R, G> {
        ResilienceLayer {
            limits: Arc::new(Limits {
                deadline: self.deadline,
                attempt: self.attempt_timeout,
                final_uses_deadline: self.final_uses_deadline,
                budget_header: self.budget_header,
            }),
            policy: Arc::new(self.retry),
            guard: self.guard,
        }
    }
}

impl<D: fmt::Debug, R: fmt::Debug, G: fmt::Debug> fmt::Debug for ResiliencePolicy<D, R, G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResiliencePolicy")
            .field("deadline", &self.deadline)
            .field("attempt_timeout", &self.attempt_timeout)
            .field("retry", &self.retry)
            .field("guard", &self.guard)
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
