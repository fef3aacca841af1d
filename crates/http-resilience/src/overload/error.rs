//! Error types

use crate::breaker::BreakerKey;
use std::{error::Error, fmt};

/// Overload control turned the call away: the request was never sent.
///
/// [`Overload`](super::Overload) and the combined service return it, boxed.
/// [`FailureKind::of`](crate::FailureKind::of) reads it as
/// [`FailureKind::Overloaded`](crate::FailureKind::Overloaded), which the
/// ready-made decoders never retry and which costs no retry budget token.
#[derive(Debug, Clone, PartialEq)]
pub struct Overloaded {
    key: BreakerKey,
    reason: Rejection,
}

/// Why overload control turned a call away.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Rejection {
    /// Every slot of the key was in use and its queue was full (or it has
    /// none).
    QueueFull {
        /// The limit of calls in flight when the call came.
        limit: u32,
    },
    /// The call could not get a slot in time: its wait would have outlasted
    /// the longest wait allowed, or left less than the least useful attempt
    /// before the call's deadline.
    WaitTooLong,
    /// Client-side throttling turned it away, with this probability.
    Throttled {
        /// The probability of rejection when the call came, in `[0, 1)`.
        probability: f64,
    },
}

// ===== impl Overloaded =====

impl Overloaded {
    /// An error for a call to `key` turned away for `reason`.
    ///
    /// Public so that tests and mocks can produce the same error the layer does.
    pub const fn new(key: BreakerKey, reason: Rejection) -> Self {
        Self { key, reason }
    }

    /// The key whose limit turned the call away: by default the request's
    /// authority.
    pub const fn key(&self) -> &BreakerKey {
        &self.key
    }

    /// Why.
    pub const fn reason(&self) -> Rejection {
        self.reason
    }
}

impl fmt::Display for Overloaded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&format!("{} turned away: {}", self.key, self.reason))
    }
}

impl Error for Overloaded {}

// ===== impl Rejection =====

impl Rejection {
    /// A short name, for metrics and logs: `queue_full`, `wait_too_long`,
    /// `throttled`.
    pub const fn name(&self) -> &'static str {
        match self {
            Rejection::QueueFull { .. } => "queue_full",
            Rejection::WaitTooLong => "wait_too_long",
            Rejection::Throttled { .. } => "throttled",
        }
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejection::QueueFull { limit } => {
                f.pad(&format!("{limit} calls in flight and the queue full"))
            }
            Rejection::WaitTooLong => f.pad("no slot in time"),
            Rejection::Throttled { probability } => f.pad(&format!(
                "throttled, rejecting {:.0} % of calls",
                probability * 100.0
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_names_the_key_and_the_reason() {
        let key = BreakerKey::authority("http", "127.0.0.1", 8080);
        let full = Overloaded::new(key.clone(), Rejection::QueueFull { limit: 8 });
        assert_eq!(
            full.to_string(),
            "http://127.0.0.1:8080 turned away: 8 calls in flight and the queue full"
        );
        let throttled = Overloaded::new(key, Rejection::Throttled { probability: 0.25 });
        assert_eq!(
            throttled.to_string(),
            "http://127.0.0.1:8080 turned away: throttled, rejecting 25 % of calls"
        );
        assert_eq!(throttled.reason().name(), "throttled");
        assert_eq!(Rejection::WaitTooLong.to_string(), "no slot in time");
    }
}
