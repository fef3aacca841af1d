//! Error types

use crate::{
    errors::{
        classified::{self, Classified},
        AsError,
    },
    key::UpstreamKey,
    FailureKind,
};
use std::{error::Error, fmt, sync::Once};

/// Overload control turned the call away: the request was never sent.
///
/// Its message is the same for the same [`Rejection`] whatever the key and
/// the limit at that moment (`overload control turned the call away: every
/// slot taken and the queue full`), so that one failure groups as one in
/// logs; the key is [`key`](Self::key), the limit and the probability are
/// in the [`reason`](Self::reason).
///
/// Its [`GuardLayer<OverloadPolicy>`](crate::guard::GuardLayer) and the combined service return it, boxed.
/// [`FailureKind::of`] reads it as [`FailureKind::Overloaded`], wherever it
/// is in the chain (its constructor makes the type known to it, so every
/// value is); the ready-made decoders never retry it, and it
/// costs no retry budget token.
#[derive(Debug, Clone, PartialEq)]
pub struct Overloaded {
    key: UpstreamKey,
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
    pub fn new(key: UpstreamKey, reason: Rejection) -> Self {
        static CLASSIFIED: Once = Once::new();
        classified::classify::<Self>(&CLASSIFIED);
        Self { key, reason }
    }

    /// The key whose limit turned the call away: by default the request's
    /// authority.
    pub const fn key(&self) -> &UpstreamKey {
        &self.key
    }

    /// Why.
    pub const fn reason(&self) -> Rejection {
        self.reason
    }
}

impl fmt::Display for Overloaded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&format!(
            "overload control turned the call away: {}",
            self.reason
        ))
    }
}

impl Error for Overloaded {}

impl Classified for Overloaded {
    const KIND: FailureKind = FailureKind::Overloaded;
}

impl AsError for Overloaded {
    fn as_error(&self) -> &(dyn Error + 'static) {
        self
    }
}

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
        // NOTE: the limit and the probability move from call to call; they
        // are the variants' fields, not words of the message.
        f.pad(match self {
            Rejection::QueueFull { .. } => "every slot taken and the queue full",
            Rejection::WaitTooLong => "no slot in time",
            Rejection::Throttled { .. } => "throttled",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{errors, BoxError};
    use std::io;

    #[test]
    fn an_error_made_by_the_constructor_is_classified_and_stays_itself() {
        let key = UpstreamKey::custom("a");
        let full = Overloaded::new(key, Rejection::QueueFull { limit: 4 });
        assert_eq!(FailureKind::of(&full), FailureKind::Overloaded);
        let boxed: BoxError = io::Error::other(full.clone()).into();
        assert_eq!(FailureKind::of(&boxed), FailureKind::Overloaded);
        assert_eq!(errors::find::<Overloaded>(&*boxed), Some(&full));
        let boxed: BoxError = full.clone().into();
        assert_eq!(boxed.downcast_ref::<Overloaded>(), Some(&full));
        assert!(boxed.source().is_none());
        assert!(FailureKind::of(&boxed).is_turned_away());
    }

    #[test]
    fn the_message_names_the_reason_and_holds_no_value() {
        let key = UpstreamKey::authority("http", "127.0.0.1", 8080);
        let other = UpstreamKey::authority("http", "127.0.0.1", 9090);
        let full = |limit| Overloaded::new(key.clone(), Rejection::QueueFull { limit });
        assert_eq!(
            full(8).to_string(),
            "overload control turned the call away: every slot taken and the queue full"
        );
        assert_eq!(full(8).to_string(), full(20).to_string());
        assert_eq!(
            full(8).to_string(),
            Overloaded::new(other, Rejection::QueueFull { limit: 8 }).to_string()
        );
        assert_eq!(full(20).key(), &key);
        assert_eq!(full(20).reason(), Rejection::QueueFull { limit: 20 });
        let throttled = Overloaded::new(key, Rejection::Throttled { probability: 0.25 });
        assert_eq!(
            throttled.to_string(),
            "overload control turned the call away: throttled"
        );
        assert_eq!(throttled.reason().name(), "throttled");
        assert_eq!(Rejection::WaitTooLong.to_string(), "no slot in time");
        assert_eq!(format!("{:>12}", Rejection::WaitTooLong), "no slot in time");
        assert_eq!(
            format!("{:>11}", Rejection::Throttled { probability: 0.5 }),
            "  throttled"
        );
    }
}
