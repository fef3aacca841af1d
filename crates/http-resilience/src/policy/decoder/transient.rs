//! The transient outcomes the resilience libraries agree on.

use super::{Decoder, StatusDecoder, Verdict};
use crate::{errors::AsError, FailureKind};

/// Retries what the resilience libraries agree is transient: the statuses
/// 408, 429, 500, 502, 503 and 504, and the failures the upstream cannot have
/// acted on ([`FailureKind::is_before_send`]): failures to connect (the
/// request was never sent) and HTTP/2 refusals ([`FailureKind::Unprocessed`]).
/// `Retry-After` is read on 429 and 503.
///
/// This is the consensus of Polly's standard handler, Envoy's `5xx` plus
/// `retriable-status-codes`, and gRPC's `UNAVAILABLE`. Timeouts and failures
/// after the request was sent are *not* retried: the upstream may have acted
/// on the request. An open circuit ([`FailureKind::CircuitOpen`]) is not
/// retried either: the circuit would turn the retry away too; nor is a
/// request body that could not be produced as announced
/// ([`FailureKind::RequestBody`]).
///
/// # Example
///
/// ```
/// use http::Response;
/// use http_resilience::{policy::{Decoder, TransientDecoder}, BoxError};
///
/// let decoder = TransientDecoder::new();
/// let refused: BoxError = std::io::Error::from(std::io::ErrorKind::ConnectionRefused).into();
/// assert!(Decoder::<(), BoxError>::decode(&decoder, &Err(refused)).is_retry());
///
/// let bad_gateway = Response::builder().status(502).body(()).unwrap();
/// assert!(Decoder::<(), BoxError>::decode(&decoder, &Ok(bad_gateway)).is_retry());
/// ```
#[derive(Debug, Clone, Copy)]
pub struct TransientDecoder {
    statuses: StatusDecoder,
}

// ===== impl TransientDecoder =====

impl TransientDecoder {
    /// The statuses retried: 408, 429, 500, 502, 503, 504.
    pub(crate) const STATUSES: [u16; 6] = [408, 429, 500, 502, 503, 504];

    /// The decoder.
    pub fn new() -> Self {
        Self {
            statuses: StatusDecoder::known_good(&Self::STATUSES).with_retry_after(),
        }
    }
}

impl Default for TransientDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl<B, E: AsError> Decoder<B, E> for TransientDecoder {
    fn decode(&self, outcome: &Result<http::Response<B>, E>) -> Verdict {
        match outcome {
            Ok(response) => self.statuses.decode_response(response),
            Err(err) => match FailureKind::of(err.as_error()) {
                // NOTE: never sent, but the circuit would turn a retry away
                // too: failing here costs no budget token.
                kind if kind.is_turned_away() => Verdict::fail(kind),
                kind if kind.is_before_send() => Verdict::retry(kind),
                kind => Verdict::fail(kind),
            },
        }
    }
}
