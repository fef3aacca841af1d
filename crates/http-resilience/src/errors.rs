//! Looking at errors: as a trait object, and along their `source()` chain.
//!
//! # Example
//!
//! ```
//! use http_resilience::{deadline::error::DeadlineExceeded, errors, BoxError};
//! use std::time::Duration;
//!
//! let err: BoxError = std::io::Error::other(DeadlineExceeded::new(Duration::from_secs(8))).into();
//! assert!(errors::is_caused_by::<DeadlineExceeded>(&*err));
//! assert_eq!(errors::chain(&*err).count(), 2);
//! ```

use std::{error::Error, io};

/// Errors that can be looked at as a `dyn Error`, so that decoders can
/// classify them with [`FailureKind::of`](crate::FailureKind::of).
///
/// Implemented for [`BoxError`](crate::BoxError) (what the layers of this
/// crate return), `std::io::Error`, `Infallible` and, with the `transport`
/// feature, the errors of hyper and hyper-util's client.
pub trait AsError {
    /// The error as a trait object.
    fn as_error(&self) -> &(dyn Error + 'static);
}

impl AsError for crate::BoxError {
    fn as_error(&self) -> &(dyn Error + 'static) {
        &**self
    }
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

/// Whether an error of type `E` is in the chain of `error`.
pub fn is_caused_by<E: Error + 'static>(error: &(dyn Error + 'static)) -> bool {
    find::<E>(error).is_some()
}
