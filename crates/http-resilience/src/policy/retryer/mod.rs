//! Retryers: whether, and after how long, to try again.
//!
//! # Example
//!
//! ```
//! use http_resilience::policy::{FixedDelay, Retryer};
//! use std::time::Duration;
//!
//! // Reactor's retryer: two retries, 10 ms apart. Each request gets a clone.
//! let prototype = FixedDelay::new(Duration::from_millis(10), 2);
//! let mut for_one_request = prototype.clone();
//! let waits: Vec<_> = (1..=3).map(|n| for_one_request.next_delay(n, None)).collect();
//! assert_eq!(waits, [Some(Duration::from_millis(10)), Some(Duration::from_millis(10)), None]);
//! ```

mod any;
mod exponential;
mod feign;
mod fixed;
#[cfg(feature = "grpc")]
mod grpc;
mod rng;

pub use self::{
    any::AnyRetryer,
    exponential::{ExponentialBackoff, Jitter},
    feign::FeignRetryer,
    fixed::FixedDelay,
};

#[cfg(feature = "grpc")]
pub use self::grpc::GrpcBackoff;
pub(crate) use self::rng::{Seeds, SplitMix64};

use crate::InvalidSetting;
use std::time::Duration;

/// Decides whether another attempt is made, and after how long.
///
/// This is the role of OpenFeign's `Retryer`. A [`RetryPolicy`](crate::retry::RetryPolicy)
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
/// use http_resilience::policy::Retryer;
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
    /// has such a bound. [`StatusRetry`](crate::retry::StatusRetry) uses it to mark
    /// the last possible attempt with [`FinalAttempt`](crate::extensions::FinalAttempt).
    fn max_attempts(&self) -> Option<u32> {
        None
    }

    /// The same retryer, allowing at most `max` attempts in all (the first
    /// included), every other setting kept: what
    /// [`RetryPolicy::with_max_attempts`](crate::retry::RetryPolicy::with_max_attempts)
    /// calls. Every ready-made retryer can; by default a retryer of one's own
    /// refuses.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] (field `max_attempts`) when the retryer has no
    /// bound to change, or `max` breaks its rules (zero; below 2 for
    /// [`GrpcBackoff`](super::GrpcBackoff), as A6 says).
    fn with_max_attempts(self, max: u32) -> Result<Self, InvalidSetting> {
        let _ = max;
        Err(InvalidSetting::new(
            "max_attempts",
            "this retryer has no bound on attempts to change",
        ))
    }
}

/// An error unless `max` allows the first attempt.
pub(super) fn at_least_one_attempt(max: u32) -> Result<(), InvalidSetting> {
    if max == 0 {
        let err = InvalidSetting::new("max_attempts", "must be at least 1 (the first attempt)");
        return Err(err.with_value("0"));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
