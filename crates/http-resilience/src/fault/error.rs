//! Error types

use super::FaultKind;
use crate::{
    errors::{
        classified::{self, Reading},
        AsError,
    },
    key::UpstreamKey,
    FailureKind,
};
use std::{error::Error, fmt, sync::Once};

/// A transport failure that a [`FaultPolicy`](super::FaultPolicy) made in
/// the upstream's place: a refused connection, a reset before any byte of
/// the response, a connect timeout, a request closed before it was sent,
/// or a response body cut short.
///
/// [`FailureKind::of`] reads it as the failure it stands for
/// ([`FailureKind::ConnectRefused`], [`FailureKind::ConnectionReset`],
/// [`FailureKind::ConnectTimeout`], [`FailureKind::Unsent`],
/// [`FailureKind::ConnectionClosed`]), wherever it is in the chain, so the
/// ready-made decoders retry it exactly as they would the real one; that it
/// was injected is [`errors::find::<InjectedFault>`](crate::errors::find).
///
/// Its message is the same for the same kind whatever the key
/// (`injected fault: connection refused`); the key is [`key`](Self::key).
///
/// # Example
///
/// ```
/// use http_resilience::{fault::{FaultKind, InjectedFault}, key::UpstreamKey, FailureKind};
///
/// let err = InjectedFault::new(FaultKind::ConnectRefused, UpstreamKey::custom("search"));
/// assert_eq!(err.to_string(), "injected fault: connection refused");
/// assert_eq!(FailureKind::of(&err), FailureKind::ConnectRefused);
/// assert!(FailureKind::of(&err).is_before_send());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct InjectedFault {
    kind: FaultKind,
    key: UpstreamKey,
}

// ===== impl InjectedFault =====

impl InjectedFault {
    /// The failure `kind` stands for, injected in a call to `key`.
    ///
    /// Public so that tests and mocks can produce the same error the policy
    /// does.
    ///
    /// # Panics
    ///
    /// When `kind` is not a failure ([`FaultKind::Latency`],
    /// [`FaultKind::Answered`]).
    pub fn new(kind: FaultKind, key: UpstreamKey) -> Self {
        assert!(
            kind.reads_as().is_some(),
            "{} is not a failure",
            kind.name()
        );
        static CLASSIFIED: Once = Once::new();
        classified::register::<Self>(&CLASSIFIED, read);
        Self { kind, key }
    }

    /// The kind of fault.
    pub const fn kind(&self) -> FaultKind {
        self.kind
    }

    /// The key of the call it was injected in: by default the request's
    /// authority.
    pub const fn key(&self) -> &UpstreamKey {
        &self.key
    }

    /// The kind of failure it stands for.
    fn reads_as(&self) -> FailureKind {
        self.kind.reads_as().unwrap_or(FailureKind::Other)
    }
}

impl fmt::Display for InjectedFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self.kind {
            FaultKind::ConnectRefused => "injected fault: connection refused",
            FaultKind::ConnectionReset => "injected fault: connection reset",
            FaultKind::ConnectTimeout => "injected fault: connect timeout",
            FaultKind::Unsent => "injected fault: closed before the request was sent",
            FaultKind::CutBody => "injected fault: connection closed",
            FaultKind::Latency | FaultKind::Answered => "injected fault",
        })
    }
}

impl Error for InjectedFault {}

impl AsError for InjectedFault {
    fn as_error(&self) -> &(dyn Error + 'static) {
        self
    }
}

/// The probe [`FailureKind::of`] reads an injected fault with: the kind of
/// failure it stands for.
fn read(err: &(dyn Error + 'static)) -> Option<Reading> {
    let fault = err.downcast_ref::<InjectedFault>()?;
    Some(Reading::Kind(fault.reads_as()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{errors, BoxError};
    use std::io;

    const FAILURES: [(FaultKind, FailureKind, &str); 5] = [
        (
            FaultKind::ConnectRefused,
            FailureKind::ConnectRefused,
            "injected fault: connection refused",
        ),
        (
            FaultKind::ConnectionReset,
            FailureKind::ConnectionReset,
            "injected fault: connection reset",
        ),
        (
            FaultKind::ConnectTimeout,
            FailureKind::ConnectTimeout,
            "injected fault: connect timeout",
        ),
        (
            FaultKind::Unsent,
            FailureKind::Unsent,
            "injected fault: closed before the request was sent",
        ),
        (
            FaultKind::CutBody,
            FailureKind::ConnectionClosed,
            "injected fault: connection closed",
        ),
    ];

    #[test]
    fn every_injected_failure_reads_as_the_one_it_stands_for_below_wrappers() {
        for (kind, reads_as, message) in FAILURES {
            let err = InjectedFault::new(kind, UpstreamKey::custom("a"));
            assert_eq!(FailureKind::of(&err), reads_as, "{message}");
            let boxed: BoxError = io::Error::other(err.clone()).into();
            assert_eq!(FailureKind::of(&boxed), reads_as, "{message}");
            assert_eq!(errors::find::<InjectedFault>(&*boxed), Some(&err));
        }
    }

    #[test]
    fn the_message_names_the_failure_and_holds_no_key() {
        for (kind, _, message) in FAILURES {
            let a = InjectedFault::new(kind, UpstreamKey::custom("a"));
            let b = InjectedFault::new(kind, UpstreamKey::authority("http", "b.test", 80));
            assert_eq!(a.to_string(), message);
            assert_eq!(a.to_string(), b.to_string());
            assert_eq!(a.kind(), kind);
        }
        let err = InjectedFault::new(FaultKind::Unsent, UpstreamKey::custom("tenant"));
        assert_eq!(err.key(), &UpstreamKey::custom("tenant"));
        assert_eq!(
            format!(
                "{:>34}",
                InjectedFault::new(FaultKind::ConnectionReset, UpstreamKey::custom("a"))
            ),
            "  injected fault: connection reset"
        );
    }

    #[test]
    #[should_panic(expected = "latency is not a failure")]
    fn latency_is_not_a_failure() {
        let _ = InjectedFault::new(FaultKind::Latency, UpstreamKey::custom("a"));
    }
}
