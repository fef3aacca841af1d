//! Retryers: whether, and after how long, to try again.
//!
//! # Example
//!
//! ```
//! use http_resilience::retry::{FixedDelay, Retryer};
//! use std::time::Duration;
//!
//! // The seed's retryer: two retries, 10 ms apart. Each request gets a clone.
//! let prototype = FixedDelay::new(Duration::from_millis(10), 2);
//! let mut for_one_request = prototype.clone();
//! let waits: Vec<_> = (1..=3).map(|n| for_one_request.next_delay(n, None)).collect();
//! assert_eq!(waits, [Some(Duration::from_millis(10)), Some(Duration::from_millis(10)), None]);
//! ```

use std::time::Duration;

/// Decides whether another attempt is made, and after how long.
///
/// This is the role of OpenFeign's `Retryer`. A [`RetryPolicy`](super::RetryPolicy)
/// holds one retryer as a prototype and clones it for every request, so each
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
}

/// A fixed wait between attempts, and a fixed number of retries.
///
/// `FixedDelay::new(Duration::from_millis(10), 2)` is the retry of seed 000: at
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
}
