//! The clock a guard's entries are stamped on: nanoseconds since the guard
//! was made, so that an entry may keep an instant in one atomic word.

use std::time::Duration;
use tokio::time::Instant;

/// A guard's clock: nanoseconds since its base.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    base: Instant,
}

impl Clock {
    /// A clock whose base is now.
    pub(crate) fn start() -> Self {
        Self {
            base: Instant::now(),
        }
    }

    /// The base, the instant that reads 0.
    pub(crate) const fn base(&self) -> Instant {
        self.base
    }

    /// `now` in nanoseconds since the base (0 before it).
    #[inline]
    pub(crate) fn nanos(&self, now: Instant) -> u64 {
        nanos(now.saturating_duration_since(self.base))
    }

    /// The instant `nanos` after the base.
    pub(crate) fn instant(&self, nanos: u64) -> Instant {
        crate::timer::saturating_after(self.base, Duration::from_nanos(nanos))
    }
}

/// `duration` in nanoseconds, at most `u64::MAX`.
#[inline]
pub(crate) fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}
