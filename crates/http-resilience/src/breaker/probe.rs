//! A retry that waits for an open circuit's probe, when that fits.

use super::error::CircuitOpen;
use crate::{
    errors::AsError,
    policy::{Decoder, Reason, Verdict},
    FailureKind,
};
use tokio::time::Instant;

/// A decoder that retries an attempt an open circuit turned away, at the end
/// of its break, and judges every other outcome as `D` does.
///
/// By default a [`CircuitOpen`] error is not retried (every ready-made
/// decoder judges it a failure). With this decoder in the retry policy, the
/// retry waits for the instant the circuit lets a probe through, and sends
/// the attempt then, under these rules:
///
/// - only with deadline-aware scheduling
///   ([`CallOptions::deadline_aware`](crate::policy::CallOptions::deadline_aware)):
///   the wait plus the policy's margin must fit before the call's deadline,
///   or the call ends at once with the open-circuit error
///   ([`Stop::WouldMissDeadline`](crate::Stop::WouldMissDeadline)); without
///   it, the open-circuit error is returned, as with `D`;
/// - the turned-away attempt counts as an attempt (the retryer's maximum
///   bounds how many times a call waits), but takes no token of a
///   [`RetryBudget`](crate::policy::RetryBudget): it was never sent, and its
///   wait is the break's, not the retryer's backoff;
/// - the attempt after the wait may itself be turned away (another caller
///   took the probe's place): it waits again, within the same bounds.
///
/// # Example
///
/// ```
/// use http_resilience::{
///     breaker::WaitForProbe,
///     policy::{FixedDelay, TransientDecoder},
///     retry::RetryPolicy,
/// };
/// use std::time::Duration;
///
/// let retry = RetryPolicy::new(
///     WaitForProbe::new(TransientDecoder::new()),
///     FixedDelay::new(Duration::from_millis(100), 3),
/// )
/// .map_options(|options| options.deadline_aware(Duration::from_millis(500)));
/// # let _ = retry;
/// ```
#[derive(Debug, Clone, Default)]
pub struct WaitForProbe<D> {
    inner: D,
}

impl<D> WaitForProbe<D> {
    /// Judges as `inner` does, and retries an open circuit's error at the
    /// end of its break.
    pub const fn new(inner: D) -> Self {
        Self { inner }
    }
}

impl<B, E: AsError, D: Decoder<B, E>> Decoder<B, E> for WaitForProbe<D> {
    fn decode(&self, outcome: &Result<http::Response<B>, E>) -> Verdict {
        let open = outcome
            .as_ref()
            .err()
            .and_then(|e| crate::errors::find::<CircuitOpen>(e.as_error()));
        match open {
            Some(open) => Verdict::Retry {
                after: Some(open.retry_at().saturating_duration_since(Instant::now())),
                reason: Reason::Failure(FailureKind::CircuitOpen),
            },
            None => self.inner.decode(outcome),
        }
    }
}
