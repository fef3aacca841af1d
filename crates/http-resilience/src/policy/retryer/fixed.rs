//! The same wait before every retry.

use super::Retryer;
use crate::{limits::capped, InvalidSetting};
use std::time::Duration;

/// A fixed wait between attempts, and a fixed number of retries.
///
/// `FixedDelay::new(Duration::from_millis(10), 2)` is the retry of Reactor WebClient's policy: at
/// most two retries (three attempts), 10 ms apart.
///
/// A delay the server asks for replaces the fixed delay, capped at
/// [`with_max_delay`](Self::with_max_delay) (by default the larger of one
/// second and the fixed delay; one second is OpenFeign's default maximum
/// period).
///
/// # Example
///
/// ```
/// use http_resilience::policy::{FixedDelay, Retryer};
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
    pub(crate) const fn delay(&self) -> Duration {
        self.delay
    }

    /// The number of retries after the first attempt.
    pub(crate) const fn retries(&self) -> u32 {
        self.retries
    }

    /// The cap on a delay the server asks for.
    pub(crate) const fn max_delay(&self) -> Duration {
        self.max_delay
    }
}

impl Retryer for FixedDelay {
    fn next_delay(&mut self, attempts: u32, server_delay: Option<Duration>) -> Option<Duration> {
        if attempts > self.retries {
            return None;
        }
        Some(server_delay.map_or(self.delay, |asked| capped(asked, self.max_delay)))
    }

    fn max_attempts(&self) -> Option<u32> {
        Some(self.retries.saturating_add(1))
    }

    fn with_max_attempts(mut self, max: u32) -> Result<Self, InvalidSetting> {
        super::at_least_one_attempt(max)?;
        self.retries = max - 1;
        Ok(self)
    }
}
