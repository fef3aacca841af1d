//! Error types

use std::{error::Error, fmt, time::Duration};

/// The deadline of the whole call passed.
///
/// [`Deadline`](super::Deadline) returns it, boxed, when the call (every
/// attempt and every wait between attempts) or the reading of the response
/// body is still going on at the deadline. An inner
/// [`AttemptTimeout`](crate::attempt_timeout::AttemptTimeout) whose attempt is
/// cut short by the deadline rather than by its own limit returns it too.
///
/// Its message, `deadline exceeded`, is the same whatever the budget; the
/// budget is [`duration`](Self::duration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeadlineExceeded {
    budget: Duration,
}

// ===== impl DeadlineExceeded =====

impl DeadlineExceeded {
    /// An error for a call whose budget of `budget` ran out.
    ///
    /// Public so that tests and mocks can produce the same error the layer does.
    pub const fn new(budget: Duration) -> Self {
        Self { budget }
    }

    /// The budget of the whole call.
    pub const fn duration(&self) -> Duration {
        self.budget
    }
}

impl fmt::Display for DeadlineExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("deadline exceeded")
    }
}

impl Error for DeadlineExceeded {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_message_is_the_same_whatever_the_budget() {
        let err = DeadlineExceeded::new(Duration::from_millis(1500));
        assert_eq!(err.to_string(), "deadline exceeded");
        assert_eq!(
            err.to_string(),
            DeadlineExceeded::new(Duration::MAX).to_string()
        );
        assert_eq!(err.duration(), Duration::from_millis(1500));
        assert_eq!(format!("{err:>18}"), " deadline exceeded");
    }
}
