//! OpenFeign's `Retryer.Default`.

use super::Retryer;
use crate::{limits::capped, InvalidSetting};
use std::time::Duration;

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
/// the code waits; [`ExponentialBackoff::default`](super::ExponentialBackoff::default) gives that schedule.)
///
/// # Example
///
/// ```
/// use http_resilience::policy::{FeignRetryer, Retryer};
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

    /// The first wait's base, before Feign's × 1.5 growth.
    pub(crate) const fn period(&self) -> Duration {
        self.period
    }

    /// The longest wait.
    pub(crate) const fn max_period(&self) -> Duration {
        self.max_period
    }

    /// `max_attempts` as given to [`new`](Self::new) (a 0 still allows the
    /// first attempt: see [`Retryer::max_attempts`]).
    pub(crate) const fn configured_max_attempts(&self) -> u32 {
        self.max_attempts
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
            Some(asked) => capped(asked, self.max_period),
            None => self.next_max_interval(),
        })
    }

    fn for_request(&self) -> Self {
        Self {
            attempt: 1,
            ..*self
        }
    }

    fn with_max_attempts(mut self, max: u32) -> Result<Self, InvalidSetting> {
        super::at_least_one_attempt(max)?;
        self.max_attempts = max;
        Ok(self)
    }

    fn max_attempts(&self) -> Option<u32> {
        // NOTE: Feign makes the first attempt even when `maxAttempts` is 0.
        Some(self.max_attempts.max(1))
    }
}
