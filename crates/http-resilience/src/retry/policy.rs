use crate::policy::{
    is_idempotent, CallOptions, Decoder, Idempotency, Parts, Reason, Retryer, Verdict,
};
use std::fmt;

/// A retry policy in two parts: a [`Decoder`] that says whether an outcome is
/// worth another attempt, and a [`Retryer`] that says whether one is made and
/// after how long.
///
/// This is OpenFeign's split between `ErrorDecoder` and `Retryer`. Neither part
/// implements `tower::retry::Policy`; [`StatusRetry`](super::StatusRetry) does
/// the plumbing (copying requests, waiting, readiness).
///
/// # Example
///
/// Reactor WebClient's policy: retry 503 only, at most twice, 10 ms apart.
///
/// ```
/// use http_resilience::{policy::{FixedDelay, StatusDecoder}, retry::RetryPolicy};
/// use std::time::Duration;
///
/// let policy = RetryPolicy::new(
///     StatusDecoder::new([503])?,
///     FixedDelay::new(Duration::from_millis(10), 2),
/// );
/// assert!(format!("{policy:?}").contains("retries: 2"));
/// # Ok::<(), http_resilience::BoxError>(())
/// ```
#[derive(Clone)]
pub struct RetryPolicy<D, R> {
    // The decoder, the budget, the listener, the attempt header and the
    // deadline-aware margin, as a hedging policy has them.
    parts: Parts<D>,
    retryer: R,
    retry_sent_requests: bool,
    statuses_need_idempotency: bool,
    enabled: bool,
}

// ===== impl RetryPolicy =====

impl<D, R> RetryPolicy<D, R> {
    /// A policy from a decoder and a retryer prototype (cloned for every
    /// request).
    ///
    /// By default a request that may have reached the upstream is retried
    /// only if it is idempotent (see [`is_idempotent`](is_idempotent)),
    /// whether the verdict came from a status or from a failure; a request
    /// the upstream cannot have acted on (never sent, or refused unprocessed
    /// over HTTP/2: [`FailureKind::is_before_send`](crate::FailureKind::is_before_send))
    /// is retried whatever its method.
    pub const fn new(decoder: D, retryer: R) -> Self {
        Self {
            parts: Parts::new(decoder),
            retryer,
            retry_sent_requests: false,
            statuses_need_idempotency: true,
            enabled: true,
        }
    }

    /// The options this policy sets as a hedging (or retry) policy would:
    /// deadline-aware scheduling, the budget, the listener, the attempt
    /// header and the spans.
    pub(crate) const fn options(&self) -> &CallOptions {
        &self.parts.options
    }

    /// The options `f` makes of this policy's (see [`CallOptions`]).
    #[must_use]
    pub fn map_options(mut self, f: impl FnOnce(CallOptions) -> CallOptions) -> Self {
        self.parts.options = f(self.parts.options);
        self
    }

    /// The decoder.
    pub(crate) const fn decoder(&self) -> &D {
        &self.parts.decoder
    }

    /// The parts the retry and the hedging policies share.
    pub(crate) const fn parts(&self) -> &Parts<D> {
        &self.parts
    }

    #[cfg(any(test, feature = "serde"))]
    pub(crate) fn budget(&self) -> Option<&crate::policy::RetryBudget> {
        self.parts.options.budget.as_deref()
    }

    /// Retries requests that were sent even when they are not idempotent:
    /// Apache HttpClient's `requestSentRetryEnabled`. Off by default; turn it
    /// on only for an upstream known to deduplicate.
    #[must_use]
    pub const fn retry_sent_requests(mut self, enabled: bool) -> Self {
        self.retry_sent_requests = enabled;
        self
    }

    /// Whether a retry asked for by a *response* (a 503, say) also needs an
    /// idempotent request. On by default: a POST that got a 503 may have been
    /// half processed by some upstreams. Turn it off for upstreams that
    /// promise that such statuses mean "not processed".
    #[must_use]
    pub const fn statuses_need_idempotency(mut self, needed: bool) -> Self {
        self.statuses_need_idempotency = needed;
        self
    }

    /// Turns retries off entirely (Apache's `disableAutomaticRetries`): every
    /// first outcome is returned, and requests are not even copied.
    #[must_use]
    pub const fn disabled(mut self) -> Self {
        self.enabled = false;
        self
    }

    /// Whether retries are on.
    pub(crate) const fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Tells the budget of an attempt's verdict. With retries off, a
    /// retryable failure takes no token: no retry of it will be made (A6
    /// counts the failures a method retries); a success still puts a share
    /// back.
    pub(crate) fn record(&self, verdict: Verdict) {
        if self.enabled || !verdict.is_retry() {
            self.parts.record(verdict);
        }
    }

    /// Whether a retry asked for with `verdict` may be made for `request`.
    pub(crate) fn allows<B>(&self, request: &http::Request<B>, reason: Reason) -> bool {
        let said_not =
            request.extensions().get::<Idempotency>() == Some(&Idempotency::NotIdempotent);
        match reason {
            Reason::Failure(kind) if kind.is_before_send() => true,
            // NOTE: the caller's explicit word beats every switch.
            _ if said_not => false,
            // NOTE: gRPC calls are all POST. A gRPC code is retried only when
            // the decoder was configured to retry it, and configuring a code
            // is the service owner's word that the server sends it for calls
            // it did not process (gRPC's retry design).
            Reason::GrpcStatus(_) => true,
            _ if self.retry_sent_requests || is_idempotent(request) => true,
            Reason::Status(_) | Reason::Header(_) => !self.statuses_need_idempotency,
            _ => false,
        }
    }

    /// The retryer prototype.
    pub(crate) const fn retryer(&self) -> &R {
        &self.retryer
    }

    /// The same policy, switches included, with its decoder and retryer
    /// converted.
    pub fn map<D2, R2>(
        self,
        decoder: impl FnOnce(D) -> D2,
        retryer: impl FnOnce(R) -> R2,
    ) -> RetryPolicy<D2, R2> {
        RetryPolicy {
            parts: self.parts.map(decoder),
            retryer: retryer(self.retryer),
            retry_sent_requests: self.retry_sent_requests,
            statuses_need_idempotency: self.statuses_need_idempotency,
            enabled: self.enabled,
        }
    }

    /// The same policy judging with `decoder`, every other part kept.
    ///
    /// # Example
    ///
    /// ```
    /// use http_resilience::{policy::{FixedDelay, StatusDecoder, TransientDecoder}, retry::RetryPolicy};
    ///
    /// let policy = RetryPolicy::new(TransientDecoder::new(), FixedDelay::never())
    ///     .with_decoder(StatusDecoder::new([503])?);
    /// assert!(format!("{policy:?}").contains("decoder: {503}"));
    /// # Ok::<(), http_resilience::BoxError>(())
    /// ```
    pub fn with_decoder<D2>(self, decoder: D2) -> RetryPolicy<D2, R> {
        self.map(|_| decoder, |retryer| retryer)
    }

    /// The same policy waiting as `retryer` says, every other part kept.
    pub fn with_retryer<R2>(self, retryer: R2) -> RetryPolicy<D, R2> {
        self.map(|decoder| decoder, |_| retryer)
    }

    /// The same policy allowing at most `max` attempts in all (the first
    /// included), every other setting of its retryer kept
    /// ([`Retryer::with_max_attempts`]).
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`](crate::InvalidSetting) (field `max_attempts`) when
    /// `max` is zero, below 2 for gRPC's schedule, or the retryer (one of
    /// one's own) has no bound to change.
    ///
    /// # Example
    ///
    /// ```
    /// use http_resilience::{policy::{FixedDelay, Retryer, StatusDecoder}, retry::RetryPolicy};
    /// use std::time::Duration;
    ///
    /// let policy = RetryPolicy::new(StatusDecoder::new([503])?, FixedDelay::new(Duration::from_millis(10), 2))
    ///     .with_max_attempts(5)?;
    /// assert!(format!("{policy:?}").contains("FixedDelay { delay: 10ms, retries: 4,"), "the delay stays");
    /// assert!(policy.with_max_attempts(0).is_err());
    /// # Ok::<(), http_resilience::BoxError>(())
    /// ```
    pub fn with_max_attempts(mut self, max: u32) -> Result<Self, crate::InvalidSetting>
    where
        R: Retryer,
    {
        self.retryer = self.retryer.with_max_attempts(max)?;
        Ok(self)
    }

    /// A fresh retryer for one request.
    pub(crate) fn start(&self) -> R
    where
        R: Retryer,
    {
        self.retryer.for_request()
    }

    /// The decoder's verdict on one outcome.
    pub(crate) fn decode<B, E>(&self, outcome: &Result<http::Response<B>, E>) -> Verdict
    where
        D: Decoder<B, E>,
    {
        self.parts.decoder.decode(outcome)
    }
}

/// Shows the decoder's and the retryer's settings. A policy whose decoder is
/// a closure (which has no `Debug`) is not `Debug`; name the decoder's type
/// with a struct of one's own, or print the policy's other settings.
impl<D: fmt::Debug, R: fmt::Debug> fmt::Debug for RetryPolicy<D, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryPolicy")
            .field("decoder", &self.parts.decoder)
            .field("retryer", &self.retryer)
            .field("retry_sent_requests", &self.retry_sent_requests)
            .field("statuses_need_idempotency", &self.statuses_need_idempotency)
            .field("enabled", &self.enabled)
            .field("deadline_margin", &self.parts.options.deadline_margin)
            .field("budget", &self.parts.options.budget)
            .field("listener", &self.parts.options.listener.is_some())
            .field("attempt_header", &self.parts.options.attempt_header)
            .finish()
    }
}
