//! The deadline a request carries.

use crate::timer::saturating_after;
use std::time::Duration;
use tokio::time::Instant;

/// The instant by which a whole call must be complete, stored in the request
/// extensions.
///
/// [`DeadlineLayer`](crate::deadline::DeadlineLayer) inserts it; an earlier
/// `RequestDeadline` already present (for example one inherited from an inbound
/// request) is kept. Inner layers read it to learn the remaining budget:
/// [`AttemptTimeout`](crate::attempt_timeout::AttemptTimeout) never lets an
/// attempt outlive it.
///
/// The instant is tokio's, so it follows `tokio::time::pause()`.
///
/// # Copying it is safe
///
/// A `RequestDeadline` is a plain value: an instant and the budget it was made
/// with, nothing else. One copied from another request (the deadline an
/// inbound `DeadlineLayer` recorded, moved onto an outbound call) or built by
/// hand means exactly what it says, wherever it travels: it can shorten a
/// limit, never switch one off. Every layer that reads it keeps what it needs
/// to know about its own work (its timer, for one) in its own future.
///
/// # Example
///
/// ```
/// use http_resilience::RequestDeadline;
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let mut request = http::Request::new(());
/// let deadline = RequestDeadline::after(Duration::from_secs(2));
/// request.extensions_mut().insert(deadline);
///
/// let found = RequestDeadline::of(&request).expect("set above");
/// assert!(found.remaining() <= Duration::from_secs(2));
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestDeadline {
    instant: Instant,
    budget: Duration,
}

// ===== impl RequestDeadline =====

impl RequestDeadline {
    /// A deadline at `instant`; its budget is the time left until then.
    pub fn at(instant: Instant) -> Self {
        Self {
            instant,
            budget: instant.saturating_duration_since(Instant::now()),
        }
    }

    /// A deadline `budget` from now (tokio's clock).
    ///
    /// A budget too large to represent as an instant is clamped to about
    /// thirty years, which no call outlives.
    pub fn after(budget: Duration) -> Self {
        Self::after_from(Instant::now(), budget)
    }

    /// A deadline `budget` after `now`.
    pub(crate) fn after_from(now: Instant, budget: Duration) -> Self {
        Self {
            instant: saturating_after(now, budget),
            budget,
        }
    }

    /// The instant itself.
    pub const fn instant(&self) -> Instant {
        self.instant
    }

    /// The whole budget this deadline was created with; it is what
    /// [`DeadlineExceeded`](crate::deadline::error::DeadlineExceeded) reports.
    pub const fn budget(&self) -> Duration {
        self.budget
    }

    /// The time left before the deadline, zero once it has passed.
    pub fn remaining(&self) -> Duration {
        self.remaining_at(Instant::now())
    }

    /// The time left before the deadline at `now`, zero once it has passed.
    #[inline]
    pub(crate) fn remaining_at(&self, now: Instant) -> Duration {
        self.instant.saturating_duration_since(now)
    }

    /// Whether the deadline has passed.
    #[inline]
    pub(crate) fn is_expired(&self) -> bool {
        self.has_passed_at(Instant::now())
    }

    /// Whether the deadline has passed at `now`: at its very instant it has
    /// (the budget ran out), the one rule every layer applies.
    #[inline]
    pub(crate) fn has_passed_at(&self, now: Instant) -> bool {
        self.instant <= now
    }

    /// The earlier of two deadlines.
    #[must_use]
    pub fn min(self, other: Self) -> Self {
        if other.instant < self.instant {
            other
        } else {
            self
        }
    }

    /// The deadline carried by `request`, if any.
    #[inline]
    pub fn of<B>(request: &http::Request<B>) -> Option<Self> {
        request.extensions().get::<Self>().copied()
    }
}
