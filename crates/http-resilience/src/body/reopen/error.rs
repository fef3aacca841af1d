//! Error types of [`ReopenBody`](super::ReopenBody).

use crate::BoxError;
use std::{any::Any, error::Error, fmt};

/// A [`ReopenBody`](super::ReopenBody) opened to another length than the one announced, or
/// yielded fewer or more bytes than it.
///
/// Its attempt fails with this error as the body's, so the upstream never
/// receives a body of another length than the request announced. It is
/// [`FailureKind::RequestBody`](crate::FailureKind::RequestBody), which the
/// ready-made decoders never retry.
///
/// # Example
///
/// ```
/// use http_resilience::body::BodyChanged;
///
/// let err = BodyChanged::new(1024, 1000);
/// assert_eq!(err.to_string(), "request body changed from the length announced");
/// assert_eq!((err.expected(), err.got()), (1024, 1000));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyChanged {
    expected: u64,
    got: u64,
}

impl BodyChanged {
    /// A body of `got` bytes where `expected` were announced.
    ///
    /// Public so that tests and mocks can produce the same error the body
    /// does.
    pub const fn new(expected: u64, got: u64) -> Self {
        Self { expected, got }
    }

    /// The length announced: the one every attempt must send.
    pub const fn expected(&self) -> u64 {
        self.expected
    }

    /// The length found: what the opening announced, what the copy had
    /// yielded when it ended short, or, when it went past the length, what
    /// it had yielded with the frame that went past (which was not sent).
    pub const fn got(&self) -> u64 {
        self.got
    }
}

impl fmt::Display for BodyChanged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("request body changed from the length announced")
    }
}

impl Error for BodyChanged {}

/// The factory of a [`ReopenBody`](super::ReopenBody) failed to open it; the factory's error is
/// the [`source`](Error::source).
///
/// Its attempt fails with this error as the body's: never a silent empty
/// body. It is [`FailureKind::RequestBody`](crate::FailureKind::RequestBody),
/// which the ready-made decoders never retry.
///
/// # Example
///
/// ```
/// use http_resilience::{body::ReopenFailed, FailureKind};
/// use std::error::Error;
///
/// let err = ReopenFailed::new(std::io::Error::from(std::io::ErrorKind::NotFound));
/// assert_eq!(err.to_string(), "the request body could not be opened");
/// assert!(err.source().unwrap().is::<std::io::Error>());
/// assert_eq!(FailureKind::of(&err), FailureKind::RequestBody);
/// ```
#[derive(Debug)]
pub struct ReopenFailed {
    source: BoxError,
}

impl ReopenFailed {
    /// The error of a factory that failed with `source`.
    ///
    /// Public so that tests and mocks can produce the same error the body
    /// does.
    pub fn new(source: impl Into<BoxError>) -> Self {
        Self {
            source: source.into(),
        }
    }
}

impl fmt::Display for ReopenFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("the request body could not be opened")
    }
}

impl Error for ReopenFailed {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&*self.source)
    }
}

/// The factory of a [`ReopenBody`](super::ReopenBody) panicked, when it was
/// called or while its future was polled: the source of the
/// [`ReopenFailed`] its attempt fails with.
///
/// The panic's message (a `&str` or a `String`, as `panic!` gives one) is
/// [`message`](Self::message), and the [`source`](Error::source) of this
/// error, so that a report of the error's chain shows it:
/// `the request body could not be opened: the body factory panicked: <message>`.
///
/// # Example
///
/// ```
/// use http_resilience::{body::{FactoryPanicked, ReopenFailed}, FailureKind};
/// use std::error::Error;
///
/// let err = ReopenFailed::new(FactoryPanicked::new("no such bucket"));
/// let panicked = err.source().unwrap().downcast_ref::<FactoryPanicked>().unwrap();
/// assert_eq!(panicked.to_string(), "the body factory panicked");
/// assert_eq!(panicked.message(), Some("no such bucket"));
/// assert_eq!(panicked.source().unwrap().to_string(), "no such bucket");
/// assert_eq!(FailureKind::of(&err), FailureKind::RequestBody);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FactoryPanicked {
    message: Option<PanicMessage>,
}

/// A panic's message, as an error: the source of [`FactoryPanicked`].
#[derive(Debug, Clone, PartialEq, Eq)]
struct PanicMessage(String);

impl FactoryPanicked {
    /// The error of a factory that panicked with `message`.
    ///
    /// Public so that tests and mocks can produce the same error the body
    /// does.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: Some(PanicMessage(message.into())),
        }
    }

    /// The error of a factory that panicked with `payload`, as
    /// `std::panic::catch_unwind` gives it: its message when it is a `&str`
    /// or a `String`, none otherwise.
    pub(crate) fn from_payload(payload: &(dyn Any + Send)) -> Self {
        let message = match payload.downcast_ref::<&'static str>() {
            Some(text) => Some((*text).to_owned()),
            None => payload.downcast_ref::<String>().cloned(),
        };
        Self {
            message: message.map(PanicMessage),
        }
    }

    /// The panic's message, when it had one that is text.
    pub fn message(&self) -> Option<&str> {
        self.message.as_ref().map(|message| message.0.as_str())
    }
}

impl fmt::Display for FactoryPanicked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("the body factory panicked")
    }
}

impl Error for FactoryPanicked {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.message.as_ref().map(|message| message as _)
    }
}

impl fmt::Display for PanicMessage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

impl Error for PanicMessage {}
