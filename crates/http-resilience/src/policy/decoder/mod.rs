//! Decoders: what one attempt's outcome means for the call.
//!
//! # Example
//!
//! ```
//! use http::Response;
//! use http_resilience::policy::{Decoder, StatusDecoder, Verdict};
//!
//! // Reactor's decoder, and a closure that also retries every error.
//! let only_503 = StatusDecoder::new([503])?;
//! let with_errors = move |outcome: &Result<Response<()>, std::io::Error>| match outcome {
//!     Err(_) => Verdict::retry("transport error"),
//!     ok => only_503.decode(ok),
//! };
//! let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
//! assert!(with_errors.decode(&Err(refused)).is_retry());
//! # Ok::<(), http_resilience::BoxError>(())
//! ```

mod any;
mod apache;
mod feign;
#[cfg(feature = "grpc")]
mod grpc;
mod header;
mod outcome;
mod status;
mod transient;

#[cfg(feature = "grpc")]
pub use self::grpc::GrpcDecoder;
pub use self::{
    any::AnyDecoder,
    apache::ApacheDecoder,
    feign::FeignDecoder,
    header::{InvalidHeader, RetryOnHeader},
    outcome::{Outcome, OutcomeDecoder},
    status::{InvalidStatus, StatusDecoder},
    transient::TransientDecoder,
};
pub use super::verdict::{Reason, Verdict};

use super::retry_after;
use std::time::SystemTime;

/// Decides what one attempt's outcome means: accept it, or ask for a retry.
///
/// This is the role of OpenFeign's `ErrorDecoder`: it looks at the response head
/// (the body has not been read yet) or at the error of one attempt. It keeps no
/// state; per-request state belongs to the [`Retryer`](super::Retryer).
///
/// Closures of the right shape are decoders, so a policy is a few lines:
///
/// ```
/// use http::{Response, StatusCode};
/// use http_resilience::policy::{Decoder, Verdict};
///
/// // Retry 502 and 503, and every transport error.
/// let decoder = |outcome: &Result<Response<()>, std::io::Error>| match outcome {
///     Ok(response) if matches!(response.status().as_u16(), 502 | 503) => {
///         Verdict::retry(response.status())
///     }
///     Ok(_) => Verdict::Accept,
///     Err(_) => Verdict::retry("transport error"),
/// };
///
/// let unavailable = Response::builder().status(503).body(()).unwrap();
/// assert!(decoder.decode(&Ok(unavailable)).is_retry());
/// ```
///
/// # The types a decoder sees
///
/// `B` and `E` are the body and error types of the service *inside* the retry
/// layer, not those the caller gets:
///
/// - the error is [`BoxError`](crate::BoxError) behind an
///   [`AttemptTimeoutLayer`](crate::AttemptTimeoutLayer) (or any layer of this
///   crate that creates failures), and the client's own error type when the
///   retry layer sits right on the client (`hyper_util::client::legacy::Error`
///   for hyper-util's);
/// - the body is [`ReadTimeoutBody<Incoming>`](crate::read_timeout::body::ReadTimeoutBody)
///   behind [`transport::Builder`](crate::transport::Builder)'s client, and
///   hyper's `Incoming` behind hyper-util's client.
///
/// The ready-made decoders take any body and any error that is
/// [`AsError`](crate::errors::AsError) (every error type above), so they fit
/// every stack. A closure must name the types, as above; an
/// [`OutcomeDecoder`] sees the head and the error as a trait object, and fits
/// every stack too.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot judge an outcome of type `Result<http::Response<{B}>, {E}>`",
    label = "the retry layer's decoder must take the inner service's response body and error",
    note = "behind `AttemptTimeoutLayer` the error is `BoxError`; behind `transport::Builder`'s client the body is `ReadTimeoutBody<Incoming>`",
    note = "a closure decoder must name those types; `OutcomeDecoder::new(|outcome: Outcome<'_>| ...)` sees neither and fits every stack"
)]
pub trait Decoder<B, E> {
    /// The verdict on one attempt's outcome.
    fn decode(&self, outcome: &Result<http::Response<B>, E>) -> Verdict;
}

// NOTE: not recommended in errors, so that a closure of the wrong argument
// type gets this trait's own message (the types a decoder sees), not a bare
// "type mismatch in closure arguments".
#[diagnostic::do_not_recommend]
impl<F, B, E> Decoder<B, E> for F
where
    F: Fn(&Result<http::Response<B>, E>) -> Verdict,
{
    fn decode(&self, outcome: &Result<http::Response<B>, E>) -> Verdict {
        self(outcome)
    }
}

/// The delay asked for by a valid `Retry-After` on `response`; a malformed
/// value is logged and ignored.
pub(super) fn server_delay<B>(response: &http::Response<B>) -> Option<std::time::Duration> {
    match retry_after::delay(response.headers(), SystemTime::now())? {
        Ok(delay) => Some(delay),
        Err(err) => {
            tracing::debug!(
                value = ?response.headers().get(http::header::RETRY_AFTER),
                "{err}: falling back to the retryer's backoff"
            );
            None
        }
    }
}

/// A decoder that retries when either of two does.
///
/// `first` is asked first; when it does not ask for a retry, `second` is
/// asked; when neither does, a failure from either stands over an accept.
/// [`Or::new`] builds one from any two decoders, closures included; nest it
/// for more.
///
/// # Example
///
/// ```
/// use http::Response;
/// use http_resilience::policy::{Decoder, Or, RetryOnHeader, StatusDecoder, Verdict};
///
/// let decoder = Or::new(StatusDecoder::new([503])?, RetryOnHeader::new("x-should-retry", "true")?);
/// let asked = Response::builder().status(500).header("x-should-retry", "true").body(())?;
/// assert!(Decoder::<(), ()>::decode(&decoder, &Ok(asked)).is_retry());
///
/// let teapot = |outcome: &Result<Response<()>, ()>| match outcome {
///     Ok(r) if r.status() == 418 => Verdict::retry("teapot"),
///     _ => Verdict::Accept,
/// };
/// let decoder = Or::new(teapot, StatusDecoder::new([503])?);
/// let brewing = Response::builder().status(418).body(())?;
/// assert!(decoder.decode(&Ok(brewing)).is_retry());
/// # Ok::<(), http_resilience::BoxError>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Or<A, B> {
    first: A,
    second: B,
}

// ===== impl Or =====

impl<A, B> Or<A, B> {
    /// Asks `first`, then `second`.
    pub const fn new(first: A, second: B) -> Self {
        Self { first, second }
    }
}

impl<A, O, B, E> Decoder<B, E> for Or<A, O>
where
    A: Decoder<B, E>,
    O: Decoder<B, E>,
{
    fn decode(&self, outcome: &Result<http::Response<B>, E>) -> Verdict {
        let first = self.first.decode(outcome);
        if first.is_retry() {
            return first;
        }
        let second = self.second.decode(outcome);
        // NOTE: a retry wins, then a failure: one decoder's "accept" must not
        // hide the other's judgement that the outcome failed.
        if second.is_retry() || (first.is_accept() && !second.is_accept()) {
            second
        } else {
            first
        }
    }
}

#[cfg(test)]
mod tests;
