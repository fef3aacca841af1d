//! Error types

use crate::{
    errors::{
        classified::{self, Classified},
        AsError,
    },
    FailureKind,
};
use std::{error::Error, fmt, sync::Once, time::Duration};

/// Nothing was read from the upstream for longer than the read timeout: no
/// response head, or no next body frame.
///
/// [`ReadTimeout`](super::ReadTimeout) returns it boxed, and its body yields it
/// as a frame error. It is a transport fault, distinct from
/// [`AttemptTimedOut`](crate::attempt_timeout::error::AttemptTimedOut) (a limit
/// on the whole attempt) and
/// [`DeadlineExceeded`](crate::deadline::error::DeadlineExceeded) (a limit on
/// the whole call).
///
/// Its message names what was awaited and is the same whatever the limit
/// (`read timed out awaiting the response head`); the limit is
/// [`duration`](Self::duration).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadTimedOut {
    limit: Duration,
    phase: Phase,
}

/// What was awaited when a [`ReadTimedOut`] happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Phase {
    /// The response head.
    Head,
    /// The next frame of the response body.
    Body,
}

// ===== impl ReadTimedOut =====

impl ReadTimedOut {
    /// An error for a wait longer than `limit` while awaiting `phase`.
    ///
    /// Public so that tests and mocks can produce the same error the layer does.
    pub fn new(limit: Duration, phase: Phase) -> Self {
        static CLASSIFIED: Once = Once::new();
        classified::classify::<Self>(&CLASSIFIED);
        Self { limit, phase }
    }

    /// The longest wait allowed.
    pub const fn duration(&self) -> Duration {
        self.limit
    }

    /// What was awaited.
    pub const fn phase(&self) -> Phase {
        self.phase
    }
}

impl fmt::Display for ReadTimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let awaited = match self.phase {
            Phase::Head => "the response head",
            Phase::Body => "the next body frame",
        };
        f.pad(&format!("read timed out awaiting {awaited}"))
    }
}

impl Error for ReadTimedOut {}

impl Classified for ReadTimedOut {
    const KIND: FailureKind = FailureKind::ReadTimeout;
}

impl AsError for ReadTimedOut {
    fn as_error(&self) -> &(dyn Error + 'static) {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_phase_whatever_the_limit() {
        let head = ReadTimedOut::new(Duration::from_millis(250), Phase::Head);
        assert_eq!(
            head.to_string(),
            "read timed out awaiting the response head"
        );
        let body = ReadTimedOut::new(Duration::from_secs(5), Phase::Body);
        assert_eq!(
            body.to_string(),
            "read timed out awaiting the next body frame"
        );
        let longer = ReadTimedOut::new(Duration::from_secs(60), Phase::Body);
        assert_eq!(body.to_string(), longer.to_string());
        assert_eq!(body.duration(), Duration::from_secs(5));
        assert_eq!(body.phase(), Phase::Body);
    }

    #[test]
    fn a_read_timeout_below_wrappers_is_a_read_timeout() {
        let err: crate::BoxError =
            std::io::Error::other(ReadTimedOut::new(Duration::from_secs(1), Phase::Head)).into();
        assert_eq!(FailureKind::of(&*err), FailureKind::ReadTimeout);
    }
}
