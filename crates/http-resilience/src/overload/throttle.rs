//! Client-side throttling, as the Google SRE book's "Handling Overload"
//! chapter describes it.

use crate::InvalidSetting;
use std::time::Duration;

/// Client-side throttling per key: while the upstream rejects much of what
/// it is sent, the client turns part of its calls away itself, so that the
/// rejected calls cost the upstream nothing.
///
/// Over a sliding window the client counts the calls it made (`requests`,
/// those it turned away included) and those the upstream accepted
/// (`accepts`: any response but an overload signal — a 429, a 503, a gRPC
/// `RESOURCE_EXHAUSTED` — while errors and attempt timeouts are no accept).
/// A call is turned away with probability
///
/// ```text
/// max(0, (requests − K × accepts) / (requests + 1))
/// ```
///
/// With `K` = 2 (the default) the client sends up to twice what the
/// upstream accepts: a healthy upstream is never throttled, and one that
/// accepts nothing receives a trickle that notices its recovery. The window
/// (two minutes by default, as the book has it) is kept as ten buckets, so
/// that old counts leave it a tenth at a time.
///
/// # Example
///
/// ```
/// use http_resilience::overload::Throttle;
/// use std::time::Duration;
///
/// let throttle = Throttle::new(1.5)?.with_window(Duration::from_secs(60))?;
/// assert_eq!(format!("{throttle:?}"), "Throttle { k: 1.5, window: 60s }");
/// # Ok::<(), http_resilience::InvalidSetting>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Throttle {
    k: f64,
    window: Duration,
}

/// The buckets of a window.
const BUCKETS: usize = 10;

impl Default for Throttle {
    /// `K` = 2 over two minutes.
    fn default() -> Self {
        Self {
            k: 2.0,
            window: Duration::from_secs(120),
        }
    }
}

// ===== impl Throttle =====

impl Throttle {
    /// Throttling with multiplier `k` over two minutes.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] (field `k`) when `k` is below 1 or not finite: with
    /// `k` below 1 a client would turn calls away from an upstream that
    /// accepts them all.
    pub fn new(k: f64) -> Result<Self, InvalidSetting> {
        if !(k.is_finite() && k >= 1.0) {
            let err = InvalidSetting::new("k", "must be a number of at least 1.0");
            return Err(err.with_value(k.to_string()));
        }
        Ok(Self {
            k,
            ..Self::default()
        })
    }

    /// Counts over `window` instead of two minutes.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] (field `window`) when `window` is under 10 ms (a
    /// bucket under a millisecond).
    pub fn with_window(mut self, window: Duration) -> Result<Self, InvalidSetting> {
        if window < Duration::from_millis(10) {
            let err = InvalidSetting::new("window", "must be at least 10ms");
            return Err(err.with_value(format!("{window:?}")));
        }
        self.window = window;
        Ok(self)
    }

    /// The multiplier `K`.
    pub(crate) const fn k(&self) -> f64 {
        self.k
    }

    /// The window.
    pub(crate) const fn window(&self) -> Duration {
        self.window
    }
}

/// The counts of one key over the window.
#[derive(Debug, Clone)]
pub(crate) struct ThrottleState {
    k: f64,
    /// The width of a bucket, in nanoseconds.
    width: u64,
    buckets: [Bucket; BUCKETS],
}

#[derive(Debug, Clone, Copy, Default)]
struct Bucket {
    /// The number of the bucket's span of time (`now / width`).
    epoch: u64,
    requests: u32,
    accepts: u32,
}

// ===== impl ThrottleState =====

impl ThrottleState {
    pub(crate) fn new(throttle: Throttle) -> Self {
        let window = u64::try_from(throttle.window.as_nanos()).unwrap_or(u64::MAX);
        Self {
            k: throttle.k,
            width: (window / BUCKETS as u64).max(1),
            buckets: [Bucket::default(); BUCKETS],
        }
    }

    /// The probability that a call at `now` (nanoseconds on the policy's
    /// clock) is turned away.
    pub(crate) fn probability(&self, now: u64) -> f64 {
        let (requests, accepts) = self.counts(now);
        let excess = f64::from(requests) - self.k * f64::from(accepts);
        (excess / (f64::from(requests) + 1.0)).max(0.0)
    }

    /// Counts a call made at `now`, accepted by the upstream or not.
    pub(crate) fn record(&mut self, now: u64, accepted: bool) {
        let bucket = self.bucket(now);
        bucket.requests = bucket.requests.saturating_add(1);
        if accepted {
            bucket.accepts = bucket.accepts.saturating_add(1);
        }
    }

    /// The bucket of `now`, emptied first if it held an older span.
    fn bucket(&mut self, now: u64) -> &mut Bucket {
        let epoch = now / self.width;
        let bucket = &mut self.buckets[(epoch % BUCKETS as u64) as usize];
        if bucket.epoch != epoch {
            *bucket = Bucket {
                epoch,
                ..Bucket::default()
            };
        }
        bucket
    }

    /// The requests and accepts within the window that ends at `now`.
    fn counts(&self, now: u64) -> (u32, u32) {
        let epoch = now / self.width;
        self.buckets
            .iter()
            .filter(|b| epoch.saturating_sub(b.epoch) < BUCKETS as u64 && b.epoch <= epoch)
            .fold((0u32, 0u32), |(r, a), b| {
                (r.saturating_add(b.requests), a.saturating_add(b.accepts))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: u64 = 1_000_000_000;

    fn state() -> ThrottleState {
        ThrottleState::new(Throttle::default())
    }

    #[test]
    fn a_healthy_upstream_is_never_throttled() {
        let mut s = state();
        for i in 0..1000 {
            s.record(i * SEC / 10, true);
        }
        assert_eq!(s.probability(100 * SEC), 0.0);
    }

    #[test]
    fn the_probability_is_the_sre_books_formula() {
        let mut s = state();
        // 100 requests, 20 accepted: (100 - 2 * 20) / 101.
        for i in 0..100 {
            s.record(i * SEC / 10, i < 20);
        }
        let expected = (100.0 - 40.0) / 101.0;
        assert!((s.probability(10 * SEC) - expected).abs() < 1e-12);
        // Half accepted is exactly K = 2's threshold: nothing turned away.
        let mut s = state();
        for i in 0..100 {
            s.record(i, i % 2 == 0);
        }
        assert_eq!(s.probability(100), 0.0);
    }

    #[test]
    fn an_upstream_that_accepts_nothing_is_sent_a_trickle() {
        let mut s = state();
        for i in 0..1000 {
            s.record(i, false);
        }
        let p = s.probability(1000);
        assert!(p > 0.99 && p < 1.0, "{p}");
    }

    #[test]
    fn counts_leave_the_window_a_bucket_at_a_time() {
        let mut s = state();
        // 100 rejections in the first 12 s bucket.
        for i in 0..100 {
            s.record(i, false);
        }
        assert!(s.probability(SEC) > 0.9);
        // Still within two minutes: counted.
        assert!(s.probability(119 * SEC) > 0.9);
        // Their bucket has left the window.
        assert_eq!(s.probability(121 * SEC), 0.0);
        // A bucket reused for a later span starts empty.
        s.record(125 * SEC, true);
        assert_eq!(s.counts(125 * SEC), (1, 1));
    }

    #[test]
    fn nonsense_settings_are_refused_by_field() {
        assert_eq!(Throttle::new(0.5).unwrap_err().field(), "k");
        assert_eq!(Throttle::new(f64::NAN).unwrap_err().field(), "k");
        let err = Throttle::default()
            .with_window(Duration::from_millis(5))
            .unwrap_err();
        assert_eq!(err.to_string(), "window must be at least 10ms");
    }
}
