//! Retryers: whether, and after how long, to try again.
//!
//! # Example
//!
//! ```
//! use http_resilience::retry::{FixedDelay, Retryer};
//! use std::time::Duration;
//!
//! // Reactor's retryer: two retries, 10 ms apart. Each request gets a clone.
//! let prototype = FixedDelay::new(Duration::from_millis(10), 2);
//! let mut for_one_request = prototype.clone();
//! let waits: Vec<_> = (1..=3).map(|n| for_one_request.next_delay(n, None)).collect();
//! assert_eq!(waits, [Some(Duration::from_millis(10)), Some(Duration::from_millis(10)), None]);
//! ```

use super::rng::{Seeds, SplitMix64};
use crate::InvalidSetting;
use std::time::Duration;

/// Decides whether another attempt is made, and after how long.
///
/// This is the role of OpenFeign's `Retryer`. A [`RetryPolicy`](super::RetryPolicy)
/// holds one retryer as a prototype and makes a fresh one for every request
/// with [`for_request`](Retryer::for_request) (a clone, by default), so each
/// call starts with fresh state (attempts used, the current backoff) and calls
/// never share it. That is why retryers are `Clone`.
///
/// # Example
///
/// A retryer that waits 50 ms, then 100 ms, then gives up:
///
/// ```
/// use http_resilience::retry::Retryer;
/// use std::time::Duration;
///
/// #[derive(Clone)]
/// struct Doubling {
///     next: Duration,
/// }
///
/// impl Retryer for Doubling {
///     fn next_delay(&mut self, attempts: u32, server_delay: Option<Duration>) -> Option<Duration> {
///         if attempts > 2 {
///             return None;
///         }
///         let delay = self.next;
///         self.next *= 2;
///         Some(server_delay.unwrap_or(delay))
///     }
/// }
///
/// let mut retryer = Doubling { next: Duration::from_millis(50) };
/// assert_eq!(retryer.next_delay(1, None), Some(Duration::from_millis(50)));
/// assert_eq!(retryer.next_delay(2, None), Some(Duration::from_millis(100)));
/// assert_eq!(retryer.next_delay(3, None), None);
/// ```
pub trait Retryer: Clone {
    /// Called when attempt number `attempts` (1 for the first) got a retry
    /// verdict. `server_delay` is the delay the server asked for, if the
    /// decoder found one.
    ///
    /// Returns the wait before the next attempt, or `None` to stop and return
    /// this attempt's outcome to the caller. A zero wait starts the next attempt
    /// without touching the timer.
    fn next_delay(&mut self, attempts: u32, server_delay: Option<Duration>) -> Option<Duration>;

    /// A retryer with fresh state for one new request, made from this one as
    /// a prototype. The default is a clone; a retryer with randomness
    /// overrides it so that requests do not share one sequence of jitter.
    fn for_request(&self) -> Self {
        self.clone()
    }

    /// The most attempts this retryer ever allows, the first included, if it
    /// has such a bound. [`StatusRetry`](super::StatusRetry) uses it to mark
    /// the last possible attempt with [`FinalAttempt`](crate::FinalAttempt).
    fn max_attempts(&self) -> Option<u32> {
        None
    }
}

/// A fixed wait between attempts, and a fixed number of retries.
///
/// `FixedDelay::new(Duration::from_millis(10), 2)` is the retry of Reactor WebClient's policy: at
/// most two retries (three attempts), 10 ms apart.
///
/// A delay the server asks for replaces the fixed delay, capped at
/// [`max_delay`](Self::max_delay) (by default the larger of one second and the
/// fixed delay; one second is OpenFeign's default maximum period).
///
/// # Example
///
/// ```
/// use http_resilience::retry::{FixedDelay, Retryer};
/// use std::time::Duration;
///
/// let mut retryer = FixedDelay::new(Duration::from_millis(10), 2);
/// assert_eq!(retryer.next_delay(1, None), Some(Duration::from_millis(10)));
/// assert_eq!(retryer.next_delay(2, Some(Duration::from_secs(5))), Some(Duration::from_secs(1)));
/// assert_eq!(retryer.next_delay(3, None), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedDelay {
    delay: Duration,
    retries: u32,
    max_delay: Duration,
}

// ===== impl FixedDelay =====

impl FixedDelay {
    /// Waits `delay` before each of at most `retries` retries.
    pub fn new(delay: Duration, retries: u32) -> Self {
        Self {
            delay,
            retries,
            max_delay: delay.max(Duration::from_secs(1)),
        }
    }

    /// Never retries: every outcome is returned as it is.
    pub const fn never() -> Self {
        Self {
            delay: Duration::ZERO,
            retries: 0,
            max_delay: Duration::ZERO,
        }
    }

    /// Caps a delay the server asks for at `max_delay`.
    #[must_use]
    pub const fn with_max_delay(mut self, max_delay: Duration) -> Self {
        self.max_delay = max_delay;
        self
    }

    /// The wait before each retry.
    pub const fn delay(&self) -> Duration {
        self.delay
    }

    /// The number of retries after the first attempt.
    pub const fn retries(&self) -> u32 {
        self.retries
    }

    /// The cap on a delay the server asks for.
    pub const fn max_delay(&self) -> Duration {
        self.max_delay
    }
}

impl Retryer for FixedDelay {
    fn next_delay(&mut self, attempts: u32, server_delay: Option<Duration>) -> Option<Duration> {
        if attempts > self.retries {
            return None;
        }
        Some(server_delay.map_or(self.delay, |asked| asked.min(self.max_delay)))
    }

    fn max_attempts(&self) -> Option<u32> {
        Some(self.retries.saturating_add(1))
    }
}

/// How a delay is spread at random, so that many clients retrying at once
/// do not come back in step.
///
/// With `base` the exponential delay of an attempt and `u` uniform in
/// `[0, 1]`:
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Jitter {
    /// `base`: no randomness.
    #[default]
    None,
    /// `u × base`: anywhere between zero and the full delay.
    Full,
    /// `base / 2 + u × base / 2`: at least half the delay.
    Equal,
    /// uniform in `[initial, min(max, 3 × previous)]`, where `previous` is the
    /// last delay (at first the initial delay, and never less than 1 ms): the
    /// "decorrelated jitter" of AWS's architecture blog, with the cap applied
    /// to the range rather than to the draw. It does not use the multiplier;
    /// every delay stays within `[initial, max]`.
    Decorrelated,
}

/// Exponential backoff: the first wait is `initial`, each next one
/// `multiplier` times longer, capped at `max_delay`, with optional
/// [`Jitter`], for at most `max_attempts` attempts in all.
///
/// The defaults are OpenFeign's numbers as documented: 100 ms, × 1.5, at most
/// 1 s, 5 attempts (waits of 100, 150, 225 and 337.5 ms). For Feign's exact
/// arithmetic see [`FeignRetryer`].
///
/// A delay the server asks for wins over the backoff, capped at `max_delay`.
///
/// Each request gets its own random sequence (see
/// [`for_request`](Retryer::for_request)); [`with_seed`](Self::with_seed)
/// makes the sequences repeat from run to run, for tests.
///
/// # Example
///
/// ```
/// use http_resilience::retry::{ExponentialBackoff, Retryer};
/// use std::time::Duration;
///
/// let ms = Duration::from_millis;
/// let mut retryer = ExponentialBackoff::default().for_request();
/// let waits: Vec<_> = (1..=5).map(|n| retryer.next_delay(n, None)).collect();
/// assert_eq!(waits, [Some(ms(100)), Some(ms(150)), Some(ms(225)), Some(Duration::from_micros(337_500)), None]);
/// ```
#[derive(Debug, Clone)]
pub struct ExponentialBackoff {
    initial: Duration,
    multiplier: f64,
    max_delay: Duration,
    max_attempts: u32,
    jitter: Jitter,
    seeds: Seeds,
    rng: SplitMix64,
    previous: Duration,
}

// ===== impl ExponentialBackoff =====

impl ExponentialBackoff {
    /// An exponential backoff: waits of `initial`, then `multiplier` times
    /// longer each, at most `max_delay`, for `max_attempts` attempts in all.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] when `multiplier` is below 1, infinite or not a
    /// number (field `multiplier`), `max_delay` is below `initial` (field
    /// `max_delay`), or `max_attempts` is zero (field `max_attempts`).
    ///
    /// # Example
    ///
    /// ```
    /// use http_resilience::retry::ExponentialBackoff;
    /// use std::time::Duration;
    ///
    /// let backoff = ExponentialBackoff::new(Duration::from_millis(50), 2.0, Duration::from_secs(2), 4)?;
    /// assert_eq!(backoff.max_attempts(), 4);
    ///
    /// let err = ExponentialBackoff::new(Duration::from_millis(50), f64::NAN, Duration::from_secs(2), 4)
    ///     .unwrap_err();
    /// assert_eq!(err.field(), "multiplier");
    /// # Ok::<(), http_resilience::BoxError>(())
    /// ```
    pub fn new(
        initial: Duration,
        multiplier: f64,
        max_delay: Duration,
        max_attempts: u32,
    ) -> Result<Self, InvalidSetting> {
        if multiplier.is_nan() || multiplier < 1.0 || multiplier.is_infinite() {
            return Err(InvalidSetting::new(
                "multiplier",
                format!("must be >= 1.0, got {multiplier}"),
            ));
        }
        if max_delay < initial {
            return Err(InvalidSetting::new(
                "max_delay",
                format!("must be >= the initial delay ({initial:?}), got {max_delay:?}"),
            ));
        }
        if max_attempts == 0 {
            return Err(InvalidSetting::new(
                "max_attempts",
                "must be at least 1, got 0",
            ));
        }
        Ok(Self::known_good(
            initial,
            multiplier,
            max_delay,
            max_attempts,
        ))
    }

    /// The backoff from settings known to pass [`new`](Self::new)'s checks:
    /// the fixed numbers of the default and of the presets, which their tests
    /// hold valid. Nothing is checked here.
    pub(crate) fn known_good(
        initial: Duration,
        multiplier: f64,
        max_delay: Duration,
        max_attempts: u32,
    ) -> Self {
        let seeds = Seeds::random();
        Self {
            initial,
            multiplier,
            max_delay,
            max_attempts,
            jitter: Jitter::None,
            rng: seeds.next_rng(),
            seeds,
            previous: initial,
        }
    }

    /// Spreads each delay with `jitter`.
    #[must_use]
    pub fn with_jitter(mut self, jitter: Jitter) -> Self {
        self.jitter = jitter;
        self
    }

    /// Draws the jitter of every request from a sequence fixed by `seed`, so
    /// that delays repeat from run to run.
    #[must_use]
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seeds = Seeds::fixed(seed);
        self.rng = self.seeds.next_rng();
        self
    }

    /// The first wait, before jitter.
    pub const fn initial(&self) -> Duration {
        self.initial
    }

    /// The growth of each wait over the one before.
    pub const fn multiplier(&self) -> f64 {
        self.multiplier
    }

    /// The longest wait, also the cap on a delay the server asks for.
    pub const fn max_delay(&self) -> Duration {
        self.max_delay
    }

    /// The number of attempts in all, the first included.
    pub const fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The jitter.
    pub const fn jitter(&self) -> Jitter {
        self.jitter
    }

    /// The delay before jitter after attempt `attempts`: `initial ×
    /// multiplier^(attempts − 1)`, capped.
    fn base(&self, attempts: u32) -> Duration {
        let exponent = i32::try_from(attempts.saturating_sub(1)).unwrap_or(i32::MAX);
        // NOTE: `u128 as f64` rounds to the nearest float; it cannot fail.
        let nanos = (self.initial.as_nanos() as f64 * self.multiplier.powi(exponent)).round();
        // NOTE: an overflow to infinity (or NaN) compares as not less.
        if nanos.partial_cmp(&(self.max_delay.as_nanos() as f64)) != Some(std::cmp::Ordering::Less)
        {
            return self.max_delay;
        }
        // NOTE: below 2^64 ns (some 584 years) the cast is exact; beyond, a
        // `u64` cannot hold the nanoseconds, so the delay goes through seconds.
        if nanos < u64::MAX as f64 {
            Duration::from_nanos(nanos as u64)
        } else {
            Duration::try_from_secs_f64(nanos / 1e9)
                .map_or(self.max_delay, |delay| delay.min(self.max_delay))
        }
    }
}

impl Default for ExponentialBackoff {
    /// OpenFeign's documented numbers: 100 ms, × 1.5, at most 1 s, 5 attempts.
    fn default() -> Self {
        Self::known_good(Duration::from_millis(100), 1.5, Duration::from_secs(1), 5)
    }
}

impl Retryer for ExponentialBackoff {
    fn next_delay(&mut self, attempts: u32, server_delay: Option<Duration>) -> Option<Duration> {
        if attempts >= self.max_attempts {
            return None;
        }
        if let Some(asked) = server_delay {
            let delay = asked.min(self.max_delay);
            self.previous = delay.max(self.initial);
            return Some(delay);
        }
        let base = self.base(attempts);
        let delay = match self.jitter {
            Jitter::None => base,
            Jitter::Full => scale(base, self.rng.next_unit()),
            Jitter::Equal => (base / 2).saturating_add(scale(base / 2, self.rng.next_unit())),
            Jitter::Decorrelated => {
                let previous = self.previous.max(Duration::from_millis(1));
                let high = previous.saturating_mul(3).min(self.max_delay);
                let span = high.saturating_sub(self.initial);
                self.initial
                    .saturating_add(scale(span, self.rng.next_unit()))
                    .min(self.max_delay)
            }
        };
        self.previous = delay;
        Some(delay)
    }

    fn for_request(&self) -> Self {
        Self {
            rng: self.seeds.next_rng(),
            previous: self.initial,
            ..self.clone()
        }
    }

    fn max_attempts(&self) -> Option<u32> {
        Some(self.max_attempts)
    }
}

/// `duration × u` for `u` in `[0, 1]`, never above `duration` and never
/// panicking, however large `duration` is.
fn scale(duration: Duration, u: f64) -> Duration {
    Duration::try_from_secs_f64(duration.as_secs_f64() * u)
        .unwrap_or(duration)
        .min(duration)
}

/// OpenFeign's `Retryer.Default`, to the millisecond.
///
/// Feign counts attempts from 1 and raises the count *before* computing the
/// wait, so its first wait is `period × 1.5` (150 ms with the defaults), then
/// × 1.5 per attempt, truncated to whole milliseconds and capped at
/// `max_period`: 150, 225, 337 and 506 ms for the defaults (100 ms, 1 s, 5
/// attempts in all). A delay the server asks for replaces the wait, capped at
/// `max_period`; a date already past means no wait.
///
/// (The often-quoted "first wait 100 ms" is the `period` parameter, not what
/// the code waits; [`ExponentialBackoff::default`] gives that schedule.)
///
/// # Example
///
/// ```
/// use http_resilience::retry::{FeignRetryer, Retryer};
/// use std::time::Duration;
///
/// let ms = Duration::from_millis;
/// let mut retryer = FeignRetryer::default();
/// let waits: Vec<_> = (1..=5).map(|n| retryer.next_delay(n, None)).collect();
/// assert_eq!(waits, [Some(ms(150)), Some(ms(225)), Some(ms(337)), Some(ms(506)), None]);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FeignRetryer {
    period: Duration,
    max_period: Duration,
    max_attempts: u32,
    attempt: u32,
}

// ===== impl FeignRetryer =====

impl FeignRetryer {
    /// Feign's retryer with its three parameters; `max_attempts` counts the
    /// first attempt too.
    ///
    /// Every value has a meaning, as in Feign, so nothing is refused: a
    /// `max_attempts` of 0 allows the first attempt only, as 1 does, and a
    /// `max_period` below `period` caps every wait at `max_period`.
    pub const fn new(period: Duration, max_period: Duration, max_attempts: u32) -> Self {
        Self {
            period,
            max_period,
            max_attempts,
            attempt: 1,
        }
    }

    /// `period × 1.5^(attempt − 1)` in whole milliseconds, capped, as Feign's
    /// `nextMaxInterval`.
    fn next_max_interval(&self) -> Duration {
        let exponent = i32::try_from(self.attempt.saturating_sub(1)).unwrap_or(i32::MAX);
        let millis = self.period.as_millis() as f64 * 1.5f64.powi(exponent);
        // NOTE: Java's `(long)` cast truncates, and saturates beyond range.
        let interval = Duration::from_millis(if millis >= u64::MAX as f64 {
            u64::MAX
        } else {
            millis as u64
        });
        interval.min(self.max_period)
    }
}

impl Default for FeignRetryer {
    /// `new(100 ms, 1 s, 5)`, Feign's `Retryer.Default()`.
    fn default() -> Self {
        Self::new(Duration::from_millis(100), Duration::from_secs(1), 5)
    }
}

impl Retryer for FeignRetryer {
    fn next_delay(&mut self, _attempts: u32, server_delay: Option<Duration>) -> Option<Duration> {
        if self.attempt >= self.max_attempts {
            return None;
        }
        self.attempt += 1;
        Some(match server_delay {
            Some(asked) => asked.min(self.max_period),
            None => self.next_max_interval(),
        })
    }

    fn for_request(&self) -> Self {
        Self {
            attempt: 1,
            ..*self
        }
    }

    fn max_attempts(&self) -> Option<u32> {
        // NOTE: Feign makes the first attempt even when `maxAttempts` is 0.
        Some(self.max_attempts.max(1))
    }
}

/// One of the ready-made retryers, chosen at run time (from a configuration
/// file, for example).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Backoff {
    /// A fixed delay.
    Fixed(FixedDelay),
    /// Exponential backoff with jitter.
    Exponential(ExponentialBackoff),
    /// OpenFeign's retryer.
    Feign(FeignRetryer),
}

impl Retryer for Backoff {
    fn next_delay(&mut self, attempts: u32, server_delay: Option<Duration>) -> Option<Duration> {
        match self {
            Backoff::Fixed(r) => r.next_delay(attempts, server_delay),
            Backoff::Exponential(r) => r.next_delay(attempts, server_delay),
            Backoff::Feign(r) => r.next_delay(attempts, server_delay),
        }
    }

    fn for_request(&self) -> Self {
        match self {
            Backoff::Fixed(r) => Backoff::Fixed(r.for_request()),
            Backoff::Exponential(r) => Backoff::Exponential(r.for_request()),
            Backoff::Feign(r) => Backoff::Feign(r.for_request()),
        }
    }

    fn max_attempts(&self) -> Option<u32> {
        match self {
            Backoff::Fixed(r) => r.max_attempts(),
            Backoff::Exponential(r) => Retryer::max_attempts(r),
            Backoff::Feign(r) => r.max_attempts(),
        }
    }
}

impl From<FixedDelay> for Backoff {
    fn from(retryer: FixedDelay) -> Self {
        Backoff::Fixed(retryer)
    }
}

impl From<ExponentialBackoff> for Backoff {
    fn from(retryer: ExponentialBackoff) -> Self {
        Backoff::Exponential(retryer)
    }
}

impl From<FeignRetryer> for Backoff {
    fn from(retryer: FeignRetryer) -> Self {
        Backoff::Feign(retryer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_delay_allows_exactly_its_retries() {
        let mut retryer = FixedDelay::new(Duration::from_millis(10), 2);
        let delays: Vec<_> = (1..=4).map(|n| retryer.next_delay(n, None)).collect();
        let ten = Some(Duration::from_millis(10));
        assert_eq!(delays, [ten, ten, None, None]);
    }

    #[test]
    fn server_delay_wins_but_is_capped() {
        let mut retryer =
            FixedDelay::new(Duration::from_millis(10), 3).with_max_delay(Duration::from_secs(2));
        assert_eq!(
            retryer.next_delay(1, Some(Duration::from_millis(1500))),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            retryer.next_delay(2, Some(Duration::from_secs(60))),
            Some(Duration::from_secs(2))
        );
    }

    #[test]
    fn never_does_not_retry() {
        assert_eq!(FixedDelay::never().next_delay(1, None), None);
    }

    fn schedule<R: Retryer>(prototype: &R, attempts: u32) -> Vec<Option<Duration>> {
        let mut retryer = prototype.for_request();
        (1..=attempts)
            .map(|n| retryer.next_delay(n, None))
            .collect()
    }

    #[test]
    fn exponential_grows_and_caps() {
        let ms = Duration::from_millis;
        let backoff = ExponentialBackoff::new(ms(100), 2.0, ms(500), 6).unwrap();
        assert_eq!(
            schedule(&backoff, 6),
            [
                Some(ms(100)),
                Some(ms(200)),
                Some(ms(400)),
                Some(ms(500)),
                Some(ms(500)),
                None
            ]
        );
        // A huge attempt number saturates at the cap instead of overflowing.
        let mut wide =
            ExponentialBackoff::new(ms(1), 10.0, Duration::from_secs(60), u32::MAX).unwrap();
        assert_eq!(
            wide.next_delay(u32::MAX - 1, None),
            Some(Duration::from_secs(60))
        );
    }

    #[test]
    fn delays_beyond_584_years_are_not_cut_short() {
        // 2^64 ns is some 584 years: a longer delay is counted in seconds.
        let millennium = Duration::from_secs(1000 * 365 * 86_400);
        let backoff = ExponentialBackoff::new(millennium, 1.0, Duration::MAX, 3).unwrap();
        assert_eq!(schedule(&backoff, 1), [Some(millennium)]);
        let backoff = ExponentialBackoff::new(Duration::MAX, 10.0, Duration::MAX, 3).unwrap();
        assert_eq!(
            schedule(&backoff, 3),
            [Some(Duration::MAX), Some(Duration::MAX), None]
        );
    }

    #[test]
    fn feign_with_zero_attempts_makes_the_first_only() {
        let mut feign = FeignRetryer::new(Duration::from_millis(100), Duration::ZERO, 0);
        assert_eq!(feign.max_attempts(), Some(1));
        assert_eq!(feign.next_delay(1, None), None);
    }

    #[test]
    fn server_delay_wins_and_is_capped_by_max_delay() {
        let mut backoff = ExponentialBackoff::default();
        let secs = Duration::from_secs;
        assert_eq!(backoff.next_delay(1, Some(secs(0))), Some(secs(0)));
        assert_eq!(backoff.next_delay(2, Some(secs(30))), Some(secs(1)));
    }

    #[test]
    fn jitter_stays_within_its_bounds_and_repeats_with_a_seed() {
        let ms = Duration::from_millis;
        for jitter in [Jitter::Full, Jitter::Equal, Jitter::Decorrelated] {
            let backoff = ExponentialBackoff::new(ms(100), 2.0, ms(2000), 8)
                .unwrap()
                .with_jitter(jitter)
                .with_seed(42);
            let first = schedule(&backoff, 7);
            let second = schedule(&backoff, 7);
            assert_ne!(first, second, "{jitter:?}: each request draws afresh");
            let again = schedule(
                &ExponentialBackoff::new(ms(100), 2.0, ms(2000), 8)
                    .unwrap()
                    .with_jitter(jitter)
                    .with_seed(42),
                7,
            );
            assert_eq!(first, again, "{jitter:?}: a seed repeats");
            for (n, delay) in first.iter().enumerate() {
                let delay = delay.unwrap();
                let base = ms(100 * (1 << n)).min(ms(2000));
                let (low, high) = match jitter {
                    Jitter::Full => (Duration::ZERO, base),
                    Jitter::Equal => (base / 2, base),
                    _ => (ms(100), ms(2000)),
                };
                assert!(low <= delay && delay <= high, "{jitter:?} #{n}: {delay:?}");
            }
        }
    }

    #[test]
    fn invalid_backoffs_are_rejected_by_name() {
        let ms = Duration::from_millis;
        let err = ExponentialBackoff::new(ms(100), 0.5, ms(1000), 5).unwrap_err();
        assert_eq!(err.to_string(), "multiplier must be >= 1.0, got 0.5");
        assert_eq!(err.field(), "multiplier");
        let err = ExponentialBackoff::new(ms(100), f64::NAN, ms(1000), 5).unwrap_err();
        assert_eq!(err.to_string(), "multiplier must be >= 1.0, got NaN");
        let err = ExponentialBackoff::new(ms(100), 1.5, ms(50), 5).unwrap_err();
        assert_eq!(
            err.to_string(),
            "max_delay must be >= the initial delay (100ms), got 50ms"
        );
        let err = ExponentialBackoff::new(ms(100), 1.5, ms(1000), 0).unwrap_err();
        assert_eq!(err.to_string(), "max_attempts must be at least 1, got 0");
        assert_eq!(err.problem(), "must be at least 1, got 0");
    }

    #[test]
    fn feign_follows_its_code_to_the_millisecond() {
        let ms = Duration::from_millis;
        let feign = FeignRetryer::default();
        assert_eq!(
            schedule(&feign, 5),
            [
                Some(ms(150)),
                Some(ms(225)),
                Some(ms(337)),
                Some(ms(506)),
                None
            ]
        );
        let capped = FeignRetryer::new(ms(400), ms(1000), 6);
        assert_eq!(
            schedule(&capped, 6),
            [
                Some(ms(600)),
                Some(ms(900)),
                Some(ms(1000)),
                Some(ms(1000)),
                Some(ms(1000)),
                None
            ]
        );
        let mut paced = feign.for_request();
        assert_eq!(
            paced.next_delay(1, Some(Duration::from_secs(30))),
            Some(ms(1000))
        );
        assert_eq!(
            paced.next_delay(2, Some(Duration::ZERO)),
            Some(Duration::ZERO)
        );
    }

    #[test]
    fn backoff_delegates() {
        let ms = Duration::from_millis;
        let fixed: Backoff = FixedDelay::new(ms(10), 1).into();
        assert_eq!(schedule(&fixed, 2), [Some(ms(10)), None]);
        let feign: Backoff = FeignRetryer::default().into();
        assert_eq!(schedule(&feign, 1), [Some(ms(150))]);
        let exp: Backoff = ExponentialBackoff::default().into();
        assert_eq!(schedule(&exp, 1), [Some(ms(100))]);
    }
}
