//! A decoder that sees neither the body type nor the error type.

use super::{Decoder, Verdict};
use crate::errors::AsError;
use http::{HeaderMap, StatusCode};
use std::{error::Error, fmt};

/// One attempt's outcome as [`OutcomeDecoder`] shows it: the response head,
/// or the error as a trait object (classify it with
/// [`FailureKind::of`](crate::FailureKind::of)).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Outcome<'a> {
    /// A response head: its status and headers (the body is not read yet).
    Head {
        /// The status.
        status: StatusCode,
        /// The header fields.
        headers: &'a HeaderMap,
    },
    /// A failure.
    Error(&'a (dyn Error + 'static)),
}

/// A decoder made of a closure over an [`Outcome`]: it fits any stack,
/// whatever the body type and the error type behind the retry layer.
///
/// A closure over `&Result<http::Response<B>, E>` must name `B` and `E`, the
/// types of the service inside the retry layer (see [`Decoder`] for what they
/// are in a real stack); this one names neither.
///
/// # Example
///
/// ```
/// use http_resilience::{
///     policy::{Decoder, Outcome, OutcomeDecoder, Verdict},
///     BoxError, FailureKind,
/// };
///
/// let decoder = OutcomeDecoder::new(|outcome: Outcome<'_>| match outcome {
///     Outcome::Head { status, headers } if status == 503 && headers.contains_key("x-overloaded") => {
///         Verdict::retry(status)
///     }
///     Outcome::Error(err) if FailureKind::of(err).is_before_send() => {
///         Verdict::retry(FailureKind::of(err))
///     }
///     Outcome::Error(err) => Verdict::fail(FailureKind::of(err)),
///     _ => Verdict::Accept,
/// });
///
/// // The same decoder judges any body and error type.
/// let overloaded = http::Response::builder().status(503).header("x-overloaded", "1").body(())?;
/// assert!(Decoder::<(), BoxError>::decode(&decoder, &Ok(overloaded)).is_retry());
/// let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
/// assert!(Decoder::<String, std::io::Error>::decode(&decoder, &Err(refused)).is_retry());
/// # Ok::<(), BoxError>(())
/// ```
#[derive(Clone, Copy)]
pub struct OutcomeDecoder<F> {
    judge: F,
}

impl<F> OutcomeDecoder<F> {
    /// A decoder that asks `judge`.
    pub const fn new(judge: F) -> Self {
        Self { judge }
    }
}

impl<F> fmt::Debug for OutcomeDecoder<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OutcomeDecoder").finish_non_exhaustive()
    }
}

impl<B, E, F> Decoder<B, E> for OutcomeDecoder<F>
where
    E: AsError,
    F: Fn(Outcome<'_>) -> Verdict,
{
    fn decode(&self, outcome: &Result<http::Response<B>, E>) -> Verdict {
        (self.judge)(match outcome {
            Ok(response) => Outcome::Head {
                status: response.status(),
                headers: response.headers(),
            },
            Err(err) => Outcome::Error(err.as_error()),
        })
    }
}
