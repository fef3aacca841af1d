use super::{Decoder, Retryer};
use std::{any::type_name, fmt};

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
/// The policy of seed 000: retry 503 only, at most twice, 10 ms apart.
///
/// ```
/// use http_resilience::retry::{FixedDelay, RetryPolicy, StatusDecoder};
/// use std::time::Duration;
///
/// let policy = RetryPolicy::new(
///     StatusDecoder::new([503]),
///     FixedDelay::new(Duration::from_millis(10), 2),
/// );
/// assert_eq!(policy.retryer().retries(), 2);
/// ```
#[derive(Clone, Copy)]
pub struct RetryPolicy<D, R> {
    decoder: D,
    retryer: R,
}

// ===== impl RetryPolicy =====

impl<D, R> RetryPolicy<D, R> {
    /// A policy from a decoder and a retryer prototype (cloned for every
    /// request).
    pub const fn new(decoder: D, retryer: R) -> Self {
        Self { decoder, retryer }
    }

    /// The decoder.
    pub const fn decoder(&self) -> &D {
        &self.decoder
    }

    /// The retryer prototype.
    pub const fn retryer(&self) -> &R {
        &self.retryer
    }

    /// The decoder and the retryer prototype.
    pub fn into_parts(self) -> (D, R) {
        (self.decoder, self.retryer)
    }

    /// A fresh retryer for one request.
    pub(crate) fn start(&self) -> R
    where
        R: Retryer,
    {
        self.retryer.for_request()
    }

    /// The decoder's verdict on one outcome.
    pub(crate) fn decode<B, E>(&self, outcome: &Result<http::Response<B>, E>) -> super::Verdict
    where
        D: Decoder<B, E>,
    {
        self.decoder.decode(outcome)
    }
}

impl<D, R> fmt::Debug for RetryPolicy<D, R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // NOTE: decoders are often closures, which have no `Debug`; type names
        // keep every policy printable.
        f.debug_struct("RetryPolicy")
            .field("decoder", &type_name::<D>())
            .field("retryer", &type_name::<R>())
            .finish()
    }
}
