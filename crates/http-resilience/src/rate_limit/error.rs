//! Error types

use crate::{
    errors::{
        classified::{self, Classified},
        AsError,
    },
    key::UpstreamKey,
    FailureKind,
};
use std::{error::Error, fmt, sync::Once, time::Duration};
use tokio::time::Instant;

/// The rate limit turned the call away: the request was never sent.
///
/// Its message is the same for the same [`Limited`] reason whatever the key
/// and the wait (`rate limit turned the call away: over the limit`), so that
/// one failure groups as one in logs; the key is [`key`](Self::key), and the
/// instant a call to the key could go again is [`free_at`](Self::free_at)
/// ([`retry_after`](Self::retry_after) from when the call was turned away).
///
/// Its [`GuardLayer<RateLimitPolicy>`](crate::guard::GuardLayer) and the combined service
/// return it, boxed. [`FailureKind::of`] reads it as
/// [`FailureKind::RateLimited`], wherever it is in the chain (its
/// constructor makes the type known to it); the ready-made decoders never
/// retry it, and it costs no retry budget token.
#[derive(Debug, Clone, PartialEq)]
pub struct RateLimited {
    key: UpstreamKey,
    reason: Limited,
    free_at: Instant,
    retry_after: Duration,
}

/// Why the rate limit turned a call away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Limited {
    /// The key's rate was spent, and the policy turns calls away at once
    /// rather than make them wait.
    OverLimit,
    /// The call would have had to wait for its slot longer than its
    /// deadline (less the least useful attempt) or the longest wait allows.
    WaitTooLong,
    /// The server asked for a pause (`Retry-After`, gRPC pushback, a quota
    /// with nothing remaining) that outlasts what the call may wait.
    Paused,
    /// The fleet's quota could not be reached in time and the policy fails
    /// closed rather than fall back on a local share.
    FleetUnavailable,
}

// ===== impl RateLimited =====

impl RateLimited {
    /// An error for a call to `key` turned away for `reason`, whose key has
    /// a slot free again at `free_at`, `retry_after` from now.
    ///
    /// Public so that tests and mocks can produce the same error the layer
    /// does.
    pub fn new(key: UpstreamKey, reason: Limited, free_at: Instant, retry_after: Duration) -> Self {
        static CLASSIFIED: Once = Once::new();
        classified::classify::<Self>(&CLASSIFIED);
        Self {
            key,
            reason,
            free_at,
            retry_after,
        }
    }

    /// The key whose rate limit turned the call away: by default the
    /// request's authority.
    pub const fn key(&self) -> &UpstreamKey {
        &self.key
    }

    /// Why.
    pub const fn reason(&self) -> Limited {
        self.reason
    }

    /// The instant (tokio's clock) from which a call to the key could go,
    /// as the limit stood when this one was turned away.
    pub const fn free_at(&self) -> Instant {
        self.free_at
    }

    /// How long after this call was turned away a slot frees:
    /// [`free_at`](Self::free_at) as a wait.
    pub const fn retry_after(&self) -> Duration {
        self.retry_after
    }
}

impl fmt::Display for RateLimited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&format!("rate limit turned the call away: {}", self.reason))
    }
}

impl Error for RateLimited {}

impl Classified for RateLimited {
    const KIND: FailureKind = FailureKind::RateLimited;
}

impl AsError for RateLimited {
    fn as_error(&self) -> &(dyn Error + 'static) {
        self
    }
}

// ===== impl Limited =====

impl Limited {
    /// A short name, for metrics and logs: `over_limit`, `wait_too_long`,
    /// `paused`, `fleet_unavailable`.
    pub const fn name(&self) -> &'static str {
        match self {
            Limited::OverLimit => "over_limit",
            Limited::WaitTooLong => "wait_too_long",
            Limited::Paused => "paused",
            Limited::FleetUnavailable => "fleet_unavailable",
        }
    }
}

impl fmt::Display for Limited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // NOTE: the wait moves from call to call; it is a field, not words
        // of the message.
        f.pad(match self {
            Limited::OverLimit => "over the limit",
            Limited::WaitTooLong => "no slot in time",
            Limited::Paused => "paused by the server",
            Limited::FleetUnavailable => "fleet quota unavailable",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{errors, BoxError};
    use std::io;

    fn limited(reason: Limited, wait: u64) -> RateLimited {
        let key = UpstreamKey::authority("http", "127.0.0.1", 8080);
        let wait = Duration::from_millis(wait);
        RateLimited::new(key, reason, Instant::now() + wait, wait)
    }

    #[test]
    fn an_error_made_by_the_constructor_is_classified_and_stays_itself() {
        let err = limited(Limited::OverLimit, 10);
        assert_eq!(FailureKind::of(&err), FailureKind::RateLimited);
        let boxed: BoxError = io::Error::other(err.clone()).into();
        assert_eq!(FailureKind::of(&boxed), FailureKind::RateLimited);
        assert_eq!(errors::find::<RateLimited>(&*boxed), Some(&err));
        let boxed: BoxError = err.clone().into();
        assert!(boxed.source().is_none());
        assert!(FailureKind::of(&boxed).is_turned_away());
        assert!(FailureKind::of(&boxed).is_before_send());
    }

    #[test]
    fn the_message_names_the_reason_and_holds_no_value() {
        assert_eq!(
            limited(Limited::OverLimit, 10).to_string(),
            "rate limit turned the call away: over the limit"
        );
        assert_eq!(
            limited(Limited::OverLimit, 10).to_string(),
            limited(Limited::OverLimit, 900).to_string()
        );
        assert_eq!(
            limited(Limited::WaitTooLong, 1).to_string(),
            "rate limit turned the call away: no slot in time"
        );
        assert_eq!(
            limited(Limited::Paused, 1).to_string(),
            "rate limit turned the call away: paused by the server"
        );
        assert_eq!(
            limited(Limited::FleetUnavailable, 1).to_string(),
            "rate limit turned the call away: fleet quota unavailable"
        );
        let err = limited(Limited::Paused, 250);
        assert_eq!(err.retry_after(), Duration::from_millis(250));
        assert_eq!(err.reason().name(), "paused");
        assert_eq!(format!("{:>16}", Limited::OverLimit), "  over the limit");
    }
}
