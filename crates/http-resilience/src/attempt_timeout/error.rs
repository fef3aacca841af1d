//! Error types

use std::{error::Error, fmt, time::Duration};

/// An attempt took longer than its limit.
///
/// [`AttemptTimeout`](super::AttemptTimeout) returns it, boxed, when the inner
/// service did not produce a response head within the limit.
///
/// Its message, `attempt timed out`, is the same whatever the limit; the
/// limit is [`duration`](Self::duration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptTimedOut {
    limit: Duration,
}

// ===== impl AttemptTimedOut =====

impl AttemptTimedOut {
    /// An error for an attempt that exceeded `limit`.
    ///
    /// Public so that tests and mocks can produce the same error the layer does.
    pub const fn new(limit: Duration) -> Self {
        Self { limit }
    }

    /// The limit the attempt exceeded.
    pub const fn duration(&self) -> Duration {
        self.limit
    }
}

impl fmt::Display for AttemptTimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("attempt timed out")
    }
}

impl Error for AttemptTimedOut {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_is_the_same_whatever_the_limit() {
        let err = AttemptTimedOut::new(Duration::from_millis(500));
        assert_eq!(err.to_string(), "attempt timed out");
        assert_eq!(
            err.to_string(),
            AttemptTimedOut::new(Duration::from_secs(3)).to_string()
        );
        assert_eq!(err.duration(), Duration::from_millis(500));
        assert_eq!(format!("{err:<18}|"), "attempt timed out |");
    }
}
