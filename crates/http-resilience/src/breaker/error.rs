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
use tokio::time::Instant;

/// The circuit of the request's key is open: the call failed at once, and
/// the request was never sent.
///
/// Its message, `circuit open`, is the same whatever the key, so that the
/// failure groups as one in logs; the key is [`key`](Self::key).
///
/// Its [`GuardLayer<BreakerPolicy>`](crate::guard::GuardLayer) and the combined service return it, boxed.
/// [`FailureKind::of`] reads it as [`FailureKind::CircuitOpen`], wherever it
/// is in the chain (its constructor makes the type known to it, so every
/// value is); the ready-made decoders never retry it (the
/// circuit would refuse the retry too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CircuitOpen {
    key: UpstreamKey,
    retry_at: Instant,
}

// ===== impl CircuitOpen =====

impl CircuitOpen {
    /// An error for the open circuit of `key`, which lets a probe through
    /// from `retry_at` on.
    ///
    /// Public so that tests and mocks can produce the same error the layer does.
    pub fn new(key: UpstreamKey, retry_at: Instant) -> Self {
        static CLASSIFIED: Once = Once::new();
        classified::classify::<Self>(&CLASSIFIED);
        Self { key, retry_at }
    }

    /// The key of the circuit: by default the request's authority.
    pub const fn key(&self) -> &UpstreamKey {
        &self.key
    }

    /// The instant from which the circuit lets a probe through. While the
    /// circuit is half-open with every probe taken, it has passed: a probe
    /// may go as soon as one in flight ends. While the circuit ramps up (see
    /// [`BreakerPolicy::ramp`](super::BreakerPolicy::ramp)), it is the start
    /// of the ramp's next step, which lets a larger share of calls through
    /// (a later call may go before it, within the share of the step).
    pub const fn retry_at(&self) -> Instant {
        self.retry_at
    }
}

impl fmt::Display for CircuitOpen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("circuit open")
    }
}

impl Error for CircuitOpen {}

impl Classified for CircuitOpen {
    const KIND: FailureKind = FailureKind::CircuitOpen;
}

impl AsError for CircuitOpen {
    fn as_error(&self) -> &(dyn Error + 'static) {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{errors, BoxError};
    use std::io;

    #[derive(Debug)]
    struct Wrapper(BoxError);

    impl fmt::Display for Wrapper {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.pad("wrapper")
        }
    }

    impl Error for Wrapper {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&*self.0)
        }
    }

    fn kind(err: impl Into<BoxError>) -> FailureKind {
        let err: BoxError = Wrapper(err.into()).into();
        FailureKind::of(&*err)
    }

    #[test]
    fn an_open_circuit_is_found_below_wrappers() {
        let open = CircuitOpen::new(UpstreamKey::custom("a"), tokio::time::Instant::now());
        assert_eq!(kind(open.clone()), FailureKind::CircuitOpen);
        assert_eq!(kind(io::Error::other(open)), FailureKind::CircuitOpen);
        assert!(FailureKind::CircuitOpen.is_before_send());
        assert!(!FailureKind::CircuitOpen.is_timeout());
        assert_eq!(FailureKind::CircuitOpen.to_string(), "circuit open");
    }

    #[test]
    fn an_error_made_by_the_constructor_is_classified_and_stays_itself() {
        let open = CircuitOpen::new(UpstreamKey::custom("b"), Instant::now());
        assert_eq!(FailureKind::of(&open), FailureKind::CircuitOpen);
        let boxed: BoxError = open.clone().into();
        assert_eq!(FailureKind::of(&boxed), FailureKind::CircuitOpen);
        assert_eq!(boxed.downcast_ref::<CircuitOpen>(), Some(&open));
        assert!(boxed.source().is_none());
        assert_eq!(errors::find::<CircuitOpen>(&*boxed), Some(&open));
    }

    #[test]
    fn the_message_is_the_same_whatever_the_key() {
        let at = Instant::now();
        let err = CircuitOpen::new(UpstreamKey::authority("http", "127.0.0.1", 8080), at);
        assert_eq!(err.to_string(), "circuit open");
        assert_eq!(err.retry_at(), at);
        assert_eq!(err.key().port(), Some(8080));
        let custom = CircuitOpen::new(UpstreamKey::custom("tenant-7"), at);
        assert_eq!(custom.key(), &UpstreamKey::custom("tenant-7"));
        assert_eq!(format!("{custom:>14}"), "  circuit open");
    }
}
