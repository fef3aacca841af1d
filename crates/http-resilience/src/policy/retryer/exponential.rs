//! Exponential backoff with jitter.

use super::{
    rng::{Seeds, SplitMix64},
    Retryer,
};
use crate::{
    limits::{capped, grown, scale},
    InvalidSetting,
};
use std::{fmt, time::Duration};

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
/// arithmetic see [`FeignRetryer`](super::FeignRetryer).
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
/// use http_resilience::policy::{ExponentialBackoff, Retryer};
/// use std::time::Duration;
///
/// let ms = Duration::from_millis;
/// let mut retryer = ExponentialBackoff::default().for_request();
/// let waits: Vec<_> = (1..=5).map(|n| retryer.next_delay(n, None)).collect();
/// assert_eq!(waits, [Some(ms(100)), Some(ms(150)), Some(ms(225)), Some(Duration::from_micros(337_500)), None]);
/// ```
#[derive(Clone)]
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
    /// use http_resilience::policy::ExponentialBackoff;
    /// use std::time::Duration;
    ///
    /// let backoff = ExponentialBackoff::new(Duration::from_millis(50), 2.0, Duration::from_secs(2), 4)?;
    /// assert!(format!("{backoff:?}").contains("max_attempts: 4"));
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
            let err = InvalidSetting::new("multiplier", "must be at least 1.0");
            return Err(err.with_value(multiplier.to_string()));
        }
        if max_delay < initial {
            let err = InvalidSetting::new("max_delay", "must be at least the initial delay");
            return Err(err.with_value(format!("{max_delay:?}")));
        }
        if max_attempts == 0 {
            return Err(InvalidSetting::new("max_attempts", "must be at least 1").with_value("0"));
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
    pub(crate) const fn initial(&self) -> Duration {
        self.initial
    }

    /// The growth of each wait over the one before.
    pub(crate) const fn multiplier(&self) -> f64 {
        self.multiplier
    }

    /// The longest wait, also the cap on a delay the server asks for.
    pub(crate) const fn max_delay(&self) -> Duration {
        self.max_delay
    }

    /// The number of attempts in all, the first included.
    pub(crate) const fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The jitter.
    pub(crate) const fn jitter(&self) -> Jitter {
        self.jitter
    }

    /// The delay before jitter after attempt `attempts`: `initial ×
    /// multiplier^(attempts − 1)`, capped.
    fn base(&self, attempts: u32) -> Duration {
        grown(self.initial, self.multiplier, attempts, self.max_delay)
    }
}

/// Shows the settings; the random state of a request's jitter is left out.
impl fmt::Debug for ExponentialBackoff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExponentialBackoff")
            .field("initial", &self.initial)
            .field("multiplier", &self.multiplier)
            .field("max_delay", &self.max_delay)
            .field("max_attempts", &self.max_attempts)
            .field("jitter", &self.jitter)
            .finish_non_exhaustive()
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
            let delay = capped(asked, self.max_delay);
            self.previous = delay.max(self.initial);
            return Some(delay);
        }
        let base = self.base(attempts);
        let delay = match self.jitter {
            Jitter::None => base,
            Jitter::Full => scale(base, self.rng.next_unit(), base),
            Jitter::Equal => {
                let half = base / 2;
                half.saturating_add(scale(half, self.rng.next_unit(), half))
            }
            Jitter::Decorrelated => {
                let previous = self.previous.max(Duration::from_millis(1));
                let high = previous.saturating_mul(3).min(self.max_delay);
                let span = high.saturating_sub(self.initial);
                self.initial
                    .saturating_add(scale(span, self.rng.next_unit(), span))
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

    fn with_max_attempts(mut self, max: u32) -> Result<Self, InvalidSetting> {
        super::at_least_one_attempt(max)?;
        self.max_attempts = max;
        Ok(self)
    }
}
