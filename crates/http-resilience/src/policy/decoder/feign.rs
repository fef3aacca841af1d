//! OpenFeign's default decoding.

use super::{server_delay, Decoder, Verdict};
use crate::{errors::AsError, FailureKind};

/// OpenFeign's default decoding: an error status is retried only when it
/// carries a valid `Retry-After`, and then after the delay it asks for;
/// transport failures and timeouts of an attempt are retried.
///
/// This mirrors `ErrorDecoder.Default` and `RetryableException` in OpenFeign:
/// any status from 400 up with `Retry-After` is retryable, without it the
/// status is a failure, and an I/O error (Feign's `IOException`, here every
/// [`FailureKind`] of the transport, and the attempt, read and connect
/// timeouts) is retryable. A malformed `Retry-After` makes the status a plain
/// failure, as in Feign. The deadline of the whole call is never retried, nor
/// is an open circuit ([`FailureKind::CircuitOpen`]) or a request body that
/// could not be produced as announced ([`FailureKind::RequestBody`]).
///
/// # Example
///
/// ```
/// use http::Response;
/// use http_resilience::{policy::{Decoder, FeignDecoder, Verdict}, BoxError};
/// use std::time::Duration;
///
/// let decoder = FeignDecoder::new();
/// let decode = |response: Response<()>| Decoder::<(), BoxError>::decode(&decoder, &Ok(response));
///
/// let plain_503 = Response::builder().status(503).body(()).unwrap();
/// assert!(!decode(plain_503).is_retry());
///
/// let paced_503 = Response::builder().status(503).header("retry-after", "2").body(()).unwrap();
/// assert_eq!(decode(paced_503).server_delay(), Some(Duration::from_secs(2)));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct FeignDecoder {
    _private: (),
}

// ===== impl FeignDecoder =====

impl FeignDecoder {
    /// The decoder.
    pub const fn new() -> Self {
        Self { _private: () }
    }
}

impl<B, E: AsError> Decoder<B, E> for FeignDecoder {
    fn decode(&self, outcome: &Result<http::Response<B>, E>) -> Verdict {
        match outcome {
            Ok(response) if response.status().as_u16() >= 400 => {
                let status = response.status();
                match server_delay(response) {
                    Some(delay) => Verdict::retry(status).after(delay),
                    None => Verdict::fail(status),
                }
            }
            Ok(_) => Verdict::Accept,
            Err(err) => match FailureKind::of(err.as_error()) {
                kind @ (FailureKind::Deadline | FailureKind::Other | FailureKind::RequestBody) => {
                    Verdict::fail(kind)
                }
                kind if kind.is_turned_away() => Verdict::fail(kind),
                kind => Verdict::retry(kind),
            },
        }
    }
}
