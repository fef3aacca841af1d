//! Telling failures apart: [`FailureKind`] for any error of the stack, the
//! helpers that walk an error's `source()` chain, and the transport's error
//! types, each a type of its own.
//!
//! # Example
//!
//! ```
//! use http_resilience::{deadline::error::DeadlineExceeded, errors, BoxError};
//! use std::time::Duration;
//!
//! let err: BoxError = std::io::Error::other(DeadlineExceeded::new(Duration::from_secs(8))).into();
//! assert!(errors::find::<DeadlineExceeded>(&*err).is_some());
//! assert_eq!(errors::chain(&*err).count(), 2);
//!
//! // For a log line: the kind of failure, then every cause.
//! assert_eq!(
//!     errors::report(&*err).to_string(),
//!     "deadline exceeded"
//! );
//! ```

pub(crate) mod classified;
mod failure;

pub use self::failure::FailureKind;
use std::{error::Error, fmt, io};

/// Errors that can be looked at as a `dyn Error`, so that decoders can
/// classify them with [`FailureKind::of`](crate::FailureKind::of).
///
/// Implemented for [`BoxError`](crate::BoxError) (what the layers of this
/// crate return), the `dyn Error` trait objects (`&*err`), this crate's own
/// error types, `std::io::Error`, `Infallible` and, with the `transport`
/// feature, the errors of hyper and hyper-util's client. Each of the crate's
/// features implements it for its own errors, and for the errors of the
/// crate it brings (the `reqwest` feature, for `reqwest::Error`). An error
/// type of one's own is looked at as `&err as &dyn Error`, or implements it
/// in one line.
#[diagnostic::on_unimplemented(
    message = "the ready-made decoders cannot look at the error type `{Self}`",
    label = "the inner service's error must be one the decoders can classify",
    note = "put an `AttemptTimeoutLayer` (or another layer of this crate) inside the retry layer: its error is `BoxError`",
    note = "or map the error into a `BoxError` with `tower::ServiceBuilder::map_err(Into::into)` below the retry layer"
)]
pub trait AsError {
    /// The error as a trait object.
    fn as_error(&self) -> &(dyn Error + 'static);
}

impl AsError for io::Error {
    fn as_error(&self) -> &(dyn Error + 'static) {
        self
    }
}

impl AsError for std::convert::Infallible {
    fn as_error(&self) -> &(dyn Error + 'static) {
        match *self {}
    }
}

#[cfg(feature = "transport")]
impl AsError for hyper::Error {
    fn as_error(&self) -> &(dyn Error + 'static) {
        self
    }
}

#[cfg(feature = "transport")]
impl AsError for hyper_util::client::legacy::Error {
    fn as_error(&self) -> &(dyn Error + 'static) {
        self
    }
}

impl AsError for crate::BoxError {
    fn as_error(&self) -> &(dyn Error + 'static) {
        &**self
    }
}

/// `AsError` for error types that are `Error`, each looked at as itself.
macro_rules! as_error_itself {
    ($($error:ty),+ $(,)?) => {
        $(
            impl AsError for $error {
                fn as_error(&self) -> &(dyn Error + 'static) {
                    self
                }
            }
        )+
    };
}

as_error_itself!(
    crate::deadline::error::DeadlineExceeded,
    crate::attempt_timeout::error::AttemptTimedOut,
    crate::body::BodyChanged,
    crate::body::ReopenFailed,
    crate::body::NotReplayable,
);

impl AsError for dyn Error + 'static {
    fn as_error(&self) -> &(dyn Error + 'static) {
        self
    }
}

impl AsError for dyn Error + Send + Sync + 'static {
    fn as_error(&self) -> &(dyn Error + 'static) {
        self
    }
}

/// The error and its causes, outermost first.
///
/// Unlike a plain walk of `source()`, an `io::Error` that wraps another error is
/// followed into that error (`io::Error::source` skips it).
pub fn chain<'a>(
    error: &'a (dyn Error + 'static),
) -> impl Iterator<Item = &'a (dyn Error + 'static)> {
    std::iter::successors(Some(error), |&err: &&'a (dyn Error + 'static)| match err
        .downcast_ref::<io::Error>()
    {
        Some(io) => io.get_ref().map(|inner| inner as &(dyn Error + 'static)),
        None => err.source(),
    })
}

/// The first error of type `E` in the chain of `error`, if any.
///
/// ```
/// use http_resilience::{deadline::error::DeadlineExceeded, errors, BoxError};
/// use std::time::Duration;
///
/// let err: BoxError = std::io::Error::other(DeadlineExceeded::new(Duration::from_secs(8))).into();
/// let found = errors::find::<DeadlineExceeded>(&*err).unwrap();
/// assert_eq!(found.duration(), Duration::from_secs(8));
/// ```
pub fn find<'a, E: Error + 'static>(error: &'a (dyn Error + 'static)) -> Option<&'a E> {
    chain(error).find_map(|err| err.downcast_ref::<E>())
}

/// Displays `error` for a log: its [`FailureKind`], then every message of its
/// `source()` chain, outermost first, as in
/// `connection refused: client error (Connect): tcp connect failed: Connection refused (os error 111)`.
///
/// A plain `{err}` prints only the outermost message, which for a client's
/// error is often no more than "client error (Connect)". A message that only
/// repeats the one before it (an `io::Error` wrapping an error shows that
/// error's message, or the kind's) is written once.
pub fn report<'a>(error: &'a (dyn Error + 'static)) -> Report<'a> {
    Report(error)
}

/// The display of [`report`].
#[derive(Debug, Clone, Copy)]
pub struct Report<'a>(&'a (dyn Error + 'static));

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // NOTE: a message that only repeats the kind (`deadline exceeded`)
        // is not written again after it.
        let mut previous = FailureKind::of(self.0).to_string();
        f.write_str(&previous)?;
        for cause in chain(self.0) {
            let message = cause.to_string();
            if message != previous {
                write!(f, ": {message}")?;
            }
            previous = message;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{attempt_timeout::error::AttemptTimedOut, BoxError};
    use std::time::Duration;

    #[derive(Debug)]
    struct Outer(BoxError);

    impl fmt::Display for Outer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("client error (Connect)")
        }
    }

    impl Error for Outer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(&*self.0)
        }
    }

    #[test]
    fn a_report_names_the_kind_and_every_cause_once() {
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        let err = Outer(io::Error::other(refused).into());
        let line = report(&err).to_string();
        assert_eq!(
            line,
            format!(
                "connection refused: client error (Connect): {}",
                io::Error::from(io::ErrorKind::ConnectionRefused)
            )
        );
        let timed_out: BoxError = AttemptTimedOut::new(Duration::from_secs(3)).into();
        assert_eq!(
            report(&*timed_out).to_string(),
            "attempt timeout: attempt timed out"
        );
        let deadline: BoxError =
            crate::deadline::error::DeadlineExceeded::new(Duration::from_secs(3)).into();
        assert_eq!(report(&*deadline).to_string(), "deadline exceeded");
    }
}
