//! The limit of calls in flight per key: none, a fixed one (a bulkhead), or
//! one that moves with the upstream's latency and its overload signals.

use crate::InvalidSetting;
use std::time::Duration;

/// How many calls to one key may be in flight at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Limit {
    /// No limit: only throttling, if any, turns calls away.
    Unbounded,
    /// At most this many (a bulkhead).
    Fixed(u32),
    /// A limit that moves with the latency and the overload signals of the
    /// upstream (see [`AdaptiveLimit`]).
    Adaptive(AdaptiveLimit),
}

/// An adaptive concurrency limit: it grows while the upstream answers as
/// fast as it does unloaded, and shrinks when its latency rises or it sheds
/// load.
///
/// # The algorithm
///
/// The limit follows the ratio of the upstream's latency now to its latency
/// unloaded, as the gradient limits of Netflix's `concurrency-limits`
/// library (`Gradient2`) and of Envoy's adaptive concurrency filter do,
/// after TCP Vegas:
///
/// - the latency unloaded is the least latency of a successful call over
///   the last five to ten seconds (kept as two windows of five seconds, the
///   older one forgotten as a new one starts), as Vegas and Envoy take a
///   minimum rather than an average: an average comes to follow a queue
///   that lasts, and stops seeing it;
/// - each successful call's latency is a sample, and the gradient
///   `tolerance × unloaded / sample`, kept within `[0.5, 1]`, says whether a
///   queue is building at the upstream;
/// - at 1 (latency within the tolerance, 1.5 times the unloaded by
///   default) the limit moves toward `limit + 2`, so that a little headroom
///   probes for more capacity; below 1 it moves toward
///   `limit × gradient + 2`, at most halving it;
/// - the move is smoothed: the limit goes `smoothing` (0.2) of the way to
///   the new value on every sample;
/// - the limit does not grow while fewer than half of it are in flight (the
///   client, not the upstream, sets the pace then).
///
/// An overload signal (a 429 or 503 response, a gRPC `RESOURCE_EXHAUSTED`,
/// an attempt that timed out) cuts the limit at once, as AIMD does:
/// `limit × backoff_ratio` (0.9). The limit always stays within
/// `[min, max]`.
///
/// # Example
///
/// ```
/// use http_resilience::overload::AdaptiveLimit;
///
/// // Start at 10, never below 2 nor above 100.
/// let limit = AdaptiveLimit::new(10, 2, 100)?.with_backoff_ratio(0.8)?;
/// assert!(format!("{limit:?}").starts_with("AdaptiveLimit { initial: 10, min: 2, max: 100,"));
/// # Ok::<(), http_resilience::InvalidSetting>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdaptiveLimit {
    initial: u32,
    min: u32,
    max: u32,
    smoothing: f64,
    tolerance: f64,
    backoff_ratio: f64,
}

/// The headroom the limit probes with: calls beyond the latency's estimate.
const HEADROOM: f64 = 2.0;

/// How long each of the two windows of the least latency lasts, in
/// nanoseconds: the unloaded latency is the least of the last five to ten
/// seconds.
const MIN_WINDOW: u64 = 5_000_000_000;

impl Default for AdaptiveLimit {
    /// From 20, within `[1, 1000]`; smoothing 0.2, tolerance 1.5, backoff
    /// ratio 0.9 (`Gradient2`'s and AIMD's defaults).
    fn default() -> Self {
        Self {
            initial: 20,
            min: 1,
            max: 1000,
            smoothing: 0.2,
            tolerance: 1.5,
            backoff_ratio: 0.9,
        }
    }
}

// ===== impl AdaptiveLimit =====

impl AdaptiveLimit {
    /// A limit that starts at `initial` and stays within `[min, max]`, with
    /// the other settings as [`Default`] has them.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] when `min` is 0 (field `min`), `max` is below
    /// `min` (field `max`), or `initial` is outside `[min, max]` (field
    /// `initial`).
    pub fn new(initial: u32, min: u32, max: u32) -> Result<Self, InvalidSetting> {
        if min == 0 {
            return Err(InvalidSetting::new("min", "must be at least 1").with_value("0"));
        }
        if max < min {
            let err = InvalidSetting::new("max", "must be at least min");
            return Err(err.with_value(max.to_string()));
        }
        if !(min..=max).contains(&initial) {
            let err = InvalidSetting::new("initial", "must be within [min, max]");
            return Err(err.with_value(initial.to_string()));
        }
        Ok(Self {
            initial,
            min,
            max,
            ..Self::default()
        })
    }

    /// How far the limit goes toward each new estimate, in `(0, 1]`.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] (field `smoothing`) outside `(0, 1]`.
    pub fn with_smoothing(mut self, smoothing: f64) -> Result<Self, InvalidSetting> {
        self.smoothing = within("smoothing", smoothing, 0.0, 1.0)?;
        Ok(self)
    }

    /// How much slower than its long-term latency the upstream may answer
    /// before the limit shrinks: at least 1 (1.5 by default).
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] (field `tolerance`) below 1 or not finite.
    pub fn with_tolerance(mut self, tolerance: f64) -> Result<Self, InvalidSetting> {
        if !(tolerance.is_finite() && tolerance >= 1.0) {
            let err = InvalidSetting::new("tolerance", "must be a number of at least 1.0");
            return Err(err.with_value(tolerance.to_string()));
        }
        self.tolerance = tolerance;
        Ok(self)
    }

    /// What an overload signal multiplies the limit by, in `(0, 1)`.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] (field `backoff_ratio`) outside `(0, 1)`.
    pub fn with_backoff_ratio(mut self, ratio: f64) -> Result<Self, InvalidSetting> {
        if !(ratio > 0.0 && ratio < 1.0) {
            let err = InvalidSetting::new("backoff_ratio", "must be within (0, 1)");
            return Err(err.with_value(ratio.to_string()));
        }
        self.backoff_ratio = ratio;
        Ok(self)
    }

    /// The limit at first.
    pub(crate) const fn initial(&self) -> u32 {
        self.initial
    }

    /// The least limit.
    pub(crate) const fn min(&self) -> u32 {
        self.min
    }

    /// The greatest limit.
    pub(crate) const fn max(&self) -> u32 {
        self.max
    }
}

/// `value` if within `(low, high]`.
fn within(field: &str, value: f64, low: f64, high: f64) -> Result<f64, InvalidSetting> {
    if value > low && value <= high {
        Ok(value)
    } else {
        let problem = format!("must be within ({low}, {high}]");
        Err(InvalidSetting::new(field, problem).with_value(value.to_string()))
    }
}

/// The limit of one key as it is now.
#[derive(Debug, Clone)]
pub(crate) enum LimitState {
    Unbounded,
    Fixed(u32),
    Adaptive(Adaptive),
}

/// An adaptive limit's state.
#[derive(Debug, Clone)]
pub(crate) struct Adaptive {
    settings: AdaptiveLimit,
    limit: f64,
    /// The least latency of the window that started at `since`, and of the
    /// one before it, in nanoseconds; 0 for none yet.
    least: f64,
    least_before: f64,
    since: u64,
}

// ===== impl LimitState =====

impl LimitState {
    pub(crate) fn new(limit: Limit) -> Self {
        match limit {
            Limit::Unbounded => LimitState::Unbounded,
            Limit::Fixed(n) => LimitState::Fixed(n),
            Limit::Adaptive(settings) => LimitState::Adaptive(Adaptive::new(settings)),
        }
    }

    /// The calls that may be in flight now.
    #[inline]
    pub(crate) fn get(&self) -> u32 {
        match self {
            LimitState::Unbounded => u32::MAX,
            LimitState::Fixed(n) => *n,
            LimitState::Adaptive(adaptive) => adaptive.get(),
        }
    }
}

// ===== impl Adaptive =====

impl Adaptive {
    pub(crate) fn new(settings: AdaptiveLimit) -> Self {
        Self {
            settings,
            limit: f64::from(settings.initial),
            least: 0.0,
            least_before: 0.0,
            since: 0,
        }
    }

    pub(crate) fn get(&self) -> u32 {
        // NOTE: the limit is kept within [min, max], so the cast is exact.
        self.limit.floor() as u32
    }

    /// Applies `change`: the limit before and after it, if it moved.
    pub(crate) fn moved(&mut self, change: impl FnOnce(&mut Self)) -> Option<(u32, u32)> {
        let before = self.get();
        change(self);
        let after = self.get();
        (before != after).then_some((before, after))
    }

    fn clamp(&mut self, limit: f64) {
        let s = &self.settings;
        self.limit = limit.clamp(f64::from(s.min), f64::from(s.max));
    }

    /// The least latency of the last five to ten seconds at `now`, with
    /// `sample` counted.
    fn unloaded(&mut self, sample: f64, now: u64) -> f64 {
        if now.saturating_sub(self.since) >= MIN_WINDOW {
            self.least_before = self.least;
            self.least = 0.0;
            self.since = now;
        }
        if self.least == 0.0 || sample < self.least {
            self.least = sample;
        }
        if self.least_before == 0.0 {
            self.least
        } else {
            self.least.min(self.least_before)
        }
    }

    /// Learns from a call the upstream accepted in `latency`, admitted with
    /// `in_flight` calls in flight (itself included), ended at `now`
    /// (nanoseconds on the slots' clock).
    pub(crate) fn on_success(&mut self, latency: Duration, in_flight: u32, now: u64) {
        // NOTE: a zero latency (a clock that did not move) reads as one
        // nanosecond, so that the ratio stays finite.
        let sample = nanos_f64(latency).max(1.0);
        let unloaded = self.unloaded(sample, now);
        if f64::from(in_flight) < self.limit / 2.0 {
            return;
        }
        let s = self.settings;
        let gradient = (s.tolerance * unloaded / sample).clamp(0.5, 1.0);
        let estimate = self.limit * gradient + HEADROOM;
        self.clamp(self.limit + (estimate - self.limit) * s.smoothing);
    }

    pub(crate) fn on_overload(&mut self) {
        self.clamp(self.limit * self.settings.backoff_ratio);
    }
}

/// `duration` in nanoseconds, as a float: exact below 2^53 ns (104 days).
///
/// NOTE: `as_nanos() as f64` converts a 128-bit integer, which takes a
/// call into the compiler's runtime on every outcome a limit learns from.
pub(crate) fn nanos_f64(duration: Duration) -> f64 {
    duration.as_secs() as f64 * 1e9 + f64::from(duration.subsec_nanos())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn adaptive(initial: u32, min: u32, max: u32) -> Adaptive {
        Adaptive::new(AdaptiveLimit::new(initial, min, max).unwrap())
    }

    /// Samples `latency` `n` times, 1 ms apart from `at` (nanoseconds), each
    /// with the limit in flight; the instant after.
    fn full(limit: &mut Adaptive, latency: Duration, n: u64, at: u64) -> u64 {
        for i in 0..n {
            let in_flight = limit.get();
            limit.on_success(latency, in_flight, at + i * 1_000_000);
        }
        at + n * 1_000_000
    }

    #[test]
    fn the_limit_grows_while_latency_holds_and_the_calls_fill_it() {
        let mut limit = adaptive(10, 1, 40);
        let mut seen = vec![limit.get()];
        for i in 0..200 {
            let in_flight = limit.get();
            limit.on_success(20 * MS, in_flight, i);
            seen.push(limit.get());
        }
        assert!(
            seen.windows(2).all(|w| w[1] >= w[0]),
            "never shrinks: {seen:?}"
        );
        assert_eq!(limit.get(), 40, "up to the max");
    }

    #[test]
    fn the_limit_does_not_grow_while_the_client_sets_the_pace() {
        let mut limit = adaptive(20, 1, 100);
        for i in 0..100 {
            limit.on_success(20 * MS, 9, i);
        }
        assert_eq!(limit.get(), 20);
    }

    #[test]
    fn the_limit_shrinks_when_latency_rises_at_most_halving_per_estimate() {
        let mut limit = adaptive(100, 1, 100);
        let at = full(&mut limit, 20 * MS, 50, 0);
        assert_eq!(limit.get(), 100);
        // Ten times slower: the gradient is at its floor, 0.5.
        limit.on_success(200 * MS, 100, at);
        // 100 + (100 * 0.5 + 2 - 100) * 0.2
        assert_eq!(limit.get(), 90);
        // Toward the point where halving and the headroom balance: 4.
        full(&mut limit, 200 * MS, 60, at);
        assert!((4..=5).contains(&limit.get()), "{}", limit.get());
    }

    #[test]
    fn a_queue_that_lasts_keeps_the_limit_down() {
        // Unloaded 20 ms; then three times slower for eight seconds: the
        // least latency remembered keeps seeing the queue.
        let mut limit = adaptive(40, 1, 40);
        let mut at = full(&mut limit, 20 * MS, 100, 0);
        for _ in 0..8 {
            at = full(&mut limit, 60 * MS, 1000, at);
            assert!(limit.get() <= 5, "{} at {at}", limit.get());
        }
    }

    #[test]
    fn within_the_tolerance_a_slower_upstream_keeps_its_limit() {
        let mut limit = adaptive(50, 1, 50);
        let at = full(&mut limit, 20 * MS, 100, 0);
        full(&mut limit, 28 * MS, 100, at);
        assert_eq!(limit.get(), 50, "1.4 times slower, under the 1.5 tolerance");
    }

    #[test]
    fn an_overload_signal_cuts_the_limit_down_to_its_min() {
        let mut limit = adaptive(100, 5, 100);
        limit.on_overload();
        assert_eq!(limit.get(), 90);
        for _ in 0..100 {
            limit.on_overload();
        }
        assert_eq!(limit.get(), 5);
    }

    #[test]
    fn the_limit_recovers_once_the_load_is_gone() {
        let mut limit = adaptive(40, 1, 40);
        let at = full(&mut limit, 20 * MS, 100, 0);
        let at = full(&mut limit, 400 * MS, 30, at);
        let low = limit.get();
        assert!(low < 10, "{low}");
        full(&mut limit, 20 * MS, 100, at);
        assert_eq!(limit.get(), 40, "back to the max from {low}");
    }

    #[test]
    fn an_upstream_slower_for_good_is_the_new_unloaded_within_ten_seconds() {
        let mut limit = adaptive(40, 1, 40);
        let at = full(&mut limit, 20 * MS, 100, 0);
        // Slower for good (another region, say): once both windows have
        // forgotten 20 ms, 60 ms is the unloaded latency and the limit
        // grows back.
        let at = full(&mut limit, 60 * MS, 11_000, at);
        assert!(limit.get() > 30, "{}", limit.get());
        full(&mut limit, 60 * MS, 100, at);
        assert_eq!(limit.get(), 40);
    }

    #[test]
    fn nonsense_settings_are_refused_by_field() {
        let field = |r: Result<AdaptiveLimit, InvalidSetting>| r.unwrap_err().field().to_owned();
        assert_eq!(field(AdaptiveLimit::new(1, 0, 10)), "min");
        assert_eq!(field(AdaptiveLimit::new(5, 6, 5)), "max");
        assert_eq!(field(AdaptiveLimit::new(11, 1, 10)), "initial");
        let ok = AdaptiveLimit::default();
        assert_eq!(field(ok.with_smoothing(0.0)), "smoothing");
        assert_eq!(field(ok.with_smoothing(f64::NAN)), "smoothing");
        assert_eq!(field(ok.with_tolerance(0.9)), "tolerance");
        assert_eq!(field(ok.with_tolerance(f64::INFINITY)), "tolerance");
        assert_eq!(field(ok.with_backoff_ratio(1.0)), "backoff_ratio");
        assert_eq!(field(ok.with_backoff_ratio(0.0)), "backoff_ratio");
        assert_eq!(
            AdaptiveLimit::new(5, 6, 5).unwrap_err().to_string(),
            "max must be at least min"
        );
    }
}
