//! The retry budget (see [`RetryBudget`]).

use crate::InvalidSetting;
use std::{
    fmt,
    sync::atomic::{AtomicU64, Ordering},
};

/// Thousandths of a token per token.
const SCALE: u64 = 1000;

/// A retry budget shared by every caller of one client: gRPC's retry
/// throttling token bucket.
///
/// Retries multiply load exactly when an upstream is struggling. The budget
/// caps that multiplication across all the calls that share it (every clone of
/// a [`StatusRetryLayer`](crate::StatusRetryLayer) built with the same
/// [`RetryPolicy`](crate::retry::RetryPolicy)).
///
/// # Which budget, and why
///
/// This is gRPC's retry throttling (proposal A6): a bucket of `max_tokens`
/// tokens, full at first. Every attempt whose outcome the decoder wanted to
/// retry takes one token away; every accepted outcome puts `token_ratio` back
/// (never above `max_tokens`). A retry is allowed only while more than half the
/// bucket is left. Outcomes the decoder judges plain failures (a 404) count for
/// nothing: only *retryable* failures drain it.
///
/// tower's `TpsBudget` (a floor of retries per second plus a ratio of retries
/// to requests over a sliding window) needs a clock and a window; the token
/// bucket needs neither, so it behaves the same on tokio's paused clock and in
/// production, and its bound is simple: once the bucket is down to half, an
/// upstream that always fails sees no retries at all until successes refill
/// it. Against such an upstream, callers together make at most
/// `max_tokens / 2` retries (plus, under concurrency, one per caller already
/// past its check), whatever their number. The arithmetic is in thousandths of
/// a token, as in gRPC, so a ratio like 0.1 is exact (tower#857 lost
/// fractional percentages to integer division).
///
/// # Example
///
/// ```
/// use http::{Request, Response};
/// use http_resilience::{
///     policy::{FixedDelay, RetryBudget, StatusDecoder},
///     retry::RetryPolicy,
///     Attempts, StatusRetryLayer, Stop,
/// };
/// use std::{convert::Infallible, sync::Arc, time::Duration};
/// use tower::{ServiceBuilder, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), http_resilience::BoxError> {
/// let budget = Arc::new(RetryBudget::new(10, 0.1)?);
/// let retry = RetryPolicy::new(StatusDecoder::new([503])?, FixedDelay::new(Duration::ZERO, 9))
///     .map_options(|options| options.with_budget(Arc::clone(&budget)));
/// let svc = ServiceBuilder::new()
///     .layer(StatusRetryLayer::new(retry))
///     .service_fn(|_: Request<String>| async {
///         // An upstream that is down.
///         Ok::<_, Infallible>(Response::builder().status(503).body(String::new()).unwrap())
///     });
/// let response = svc.oneshot(Request::new(String::new())).await?;
/// // Each 503 took a token; once half the bucket was gone, no more retries,
/// // though the retryer allowed ten attempts.
/// let attempts = response.extensions().get::<Attempts>().expect("retried");
/// assert_eq!((attempts.get(), attempts.stop()), (5, Stop::BudgetExhausted));
/// assert_eq!(budget.tokens_milli(), 5_000);
/// # Ok(())
/// # }
/// ```
///
/// # Clone
///
/// A policy holds its budget in an `Arc`, so every clone of the layer shares
/// one bucket.
pub struct RetryBudget {
    /// Tokens left, in thousandths.
    tokens: AtomicU64,
    max: u64,
    ratio: u64,
}

// ===== impl RetryBudget =====

impl RetryBudget {
    /// A full bucket of `max_tokens`, refilled by `token_ratio` per success
    /// (gRPC's defaults are up to 1000 tokens and a ratio in `(0, 1]`, kept
    /// to three decimals).
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] when `max_tokens` is outside `1..=1000` or
    /// `token_ratio` outside `(0, 1]`.
    pub fn new(max_tokens: u32, token_ratio: f64) -> Result<Self, InvalidSetting> {
        if !(1..=1000).contains(&max_tokens) {
            let err = InvalidSetting::new("max_tokens", "must be in 1..=1000");
            return Err(err.with_value(max_tokens.to_string()));
        }
        let ratio = (token_ratio * SCALE as f64).round();
        // NOTE: the range is checked before the rounding, which would take
        // 0.0005 up to 0.001.
        let in_range = (1.0 / SCALE as f64..=1.0).contains(&token_ratio);
        if !in_range || !(1.0..=SCALE as f64).contains(&ratio) {
            let err = InvalidSetting::new("token_ratio", "must be in 0.001..=1");
            return Err(err.with_value(token_ratio.to_string()));
        }
        let max = u64::from(max_tokens) * SCALE;
        Ok(Self {
            tokens: AtomicU64::new(max),
            max,
            ratio: ratio as u64,
        })
    }

    /// A full bucket from numbers known to pass [`new`](Self::new)'s checks
    /// (a preset's): `max_tokens` tokens, `ratio_milli` thousandths of a
    /// token per success.
    pub(crate) const fn known_good(max_tokens: u32, ratio_milli: u64) -> Self {
        let max = max_tokens as u64 * SCALE;
        Self {
            tokens: AtomicU64::new(max),
            max,
            ratio: ratio_milli,
        }
    }

    /// A full bucket of `max_milli` thousandths of a token, refilled by
    /// `ratio_milli` thousandths per success (a service config's
    /// `retryThrottling`, which gRPC keeps in thousandths). A ratio above the
    /// bucket fills it, as the bucket's cap makes it anyway.
    #[cfg(feature = "grpc")]
    pub(crate) fn from_milli(max_milli: u64, ratio_milli: u64) -> Self {
        Self {
            tokens: AtomicU64::new(max_milli),
            max: max_milli,
            ratio: ratio_milli.min(max_milli),
        }
    }

    /// Whether a retry may be made now: more than half the bucket is left.
    pub(crate) fn can_retry(&self) -> bool {
        self.tokens.load(Ordering::Relaxed) > self.max / 2
    }

    /// Records an outcome the decoder wanted to retry: one token less.
    pub(crate) fn record_retryable_failure(&self) {
        let _ = self
            .tokens
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                Some(t.saturating_sub(SCALE))
            });
    }

    /// Records an accepted outcome: `token_ratio` tokens more, up to the
    /// maximum.
    pub(crate) fn record_success(&self) {
        let _ = self
            .tokens
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                Some((t + self.ratio).min(self.max))
            });
    }

    /// The tokens left, in thousandths.
    pub fn tokens_milli(&self) -> u64 {
        self.tokens.load(Ordering::Relaxed)
    }

    /// The size of the bucket, in tokens.
    pub(crate) fn max_tokens(&self) -> u32 {
        u32::try_from(self.max / SCALE).unwrap_or(u32::MAX)
    }

    /// The tokens each success puts back.
    pub(crate) fn token_ratio(&self) -> f64 {
        self.ratio as f64 / SCALE as f64
    }
}

impl fmt::Debug for RetryBudget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RetryBudget")
            .field("tokens_milli", &self.tokens_milli())
            .field("max_milli", &self.max)
            .field("ratio_milli", &self.ratio)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_are_exact() {
        let budget = RetryBudget::new(4, 0.1).unwrap();
        for _ in 0..3 {
            budget.record_retryable_failure();
        }
        assert_eq!(budget.tokens_milli(), 1000);
        assert!(!budget.can_retry());
        for _ in 0..10 {
            budget.record_success();
        }
        // 1.0 + 10 x 0.1 = 2.0 exactly: still not above half (2.0).
        assert_eq!(budget.tokens_milli(), 2000);
        assert!(!budget.can_retry());
        budget.record_success();
        assert!(budget.can_retry());
    }

    #[test]
    fn the_bucket_stays_within_its_bounds() {
        let budget = RetryBudget::new(2, 1.0).unwrap();
        for _ in 0..10 {
            budget.record_success();
        }
        assert_eq!(budget.tokens_milli(), 2000);
        for _ in 0..10 {
            budget.record_retryable_failure();
        }
        assert_eq!(budget.tokens_milli(), 0);
    }

    #[test]
    fn nonsense_settings_are_rejected() {
        assert_eq!(
            RetryBudget::new(0, 0.1).unwrap_err().to_string(),
            "max_tokens must be in 1..=1000"
        );
        assert_eq!(
            RetryBudget::new(10, 0.0).unwrap_err().to_string(),
            "token_ratio must be in 0.001..=1"
        );
        assert!(RetryBudget::new(10, f64::NAN).is_err());
        assert!(RetryBudget::new(10, 1.5).is_err());
        assert!(RetryBudget::new(10, 1.0004).is_err());
        assert!(RetryBudget::new(1000, 1.0).is_ok());
    }

    // ===== nonsense refused =====

    #[test]
    fn nonsense_budgets_are_refused_by_field() {
        for (tokens, ratio, field) in [
            (0, 0.5, "max_tokens"),
            (1001, 0.5, "max_tokens"),
            (u32::MAX, 0.5, "max_tokens"),
            (10, 0.0, "token_ratio"),
            (10, -0.0, "token_ratio"),
            (10, -1.0, "token_ratio"),
            (10, 0.0004, "token_ratio"),
            (10, 1.01, "token_ratio"),
            (10, f64::NAN, "token_ratio"),
            (10, f64::INFINITY, "token_ratio"),
            (10, f64::NEG_INFINITY, "token_ratio"),
        ] {
            let err = RetryBudget::new(tokens, ratio).unwrap_err();
            assert_eq!(err.field(), field, "{tokens} {ratio}: {err}");
        }
    }
}
