//! Apache HttpClient's retry handler.

use super::{Decoder, Verdict};
use crate::{errors::AsError, FailureKind};

/// Apache HttpClient's `DefaultHttpRequestRetryHandler`: responses are never
/// retried, failures are, except the kinds it never retries.
///
/// Never retried by default, as in Apache: timeouts (`InterruptedIOException`:
/// the attempt, read and connect timeouts), an unknown host
/// (`UnknownHostException`: [`FailureKind::Dns`]), a refused or failed connect
/// (`ConnectException`), and TLS failures (`SSLException`); the deadline is
/// never retried either, nor is an open circuit
/// ([`FailureKind::CircuitOpen`]) or a request body that could not be
/// produced as announced ([`FailureKind::RequestBody`]). What remains is retried: a connection reset or closed
/// without a response, a request that was never written, or one an HTTP/2
/// upstream refused unprocessed ([`FailureKind::Unprocessed`]; Apache 5
/// retries such a stream too). Whether a sent
/// request may be repeated is then up to its idempotency (see
/// [`RetryPolicy::retry_sent_requests`](crate::retry::RetryPolicy::retry_sent_requests)).
///
/// # Example
///
/// ```
/// use http_resilience::{policy::{ApacheDecoder, Decoder}, BoxError, FailureKind};
///
/// let apache = ApacheDecoder::new();
/// let reset: BoxError = std::io::Error::from(std::io::ErrorKind::ConnectionReset).into();
/// assert!(Decoder::<(), BoxError>::decode(&apache, &Err(reset)).is_retry());
///
/// let refused: BoxError = std::io::Error::from(std::io::ErrorKind::ConnectionRefused).into();
/// assert!(!Decoder::<(), BoxError>::decode(&apache, &Err(refused)).is_retry());
///
/// // The never-retried kinds are configurable.
/// let lenient = ApacheDecoder::never_retrying([FailureKind::Tls]);
/// let refused: BoxError = std::io::Error::from(std::io::ErrorKind::ConnectionRefused).into();
/// assert!(Decoder::<(), BoxError>::decode(&lenient, &Err(refused)).is_retry());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApacheDecoder {
    // One bit per `FailureKind` that is never retried.
    never: u64,
}

// ===== impl ApacheDecoder =====

impl ApacheDecoder {
    /// The kinds Apache never retries.
    pub(crate) const NEVER_RETRIED: [FailureKind; 7] = [
        FailureKind::AttemptTimeout,
        FailureKind::ReadTimeout,
        FailureKind::ConnectTimeout,
        FailureKind::Dns,
        FailureKind::ConnectRefused,
        FailureKind::Connect,
        FailureKind::Tls,
    ];

    /// Apache's default.
    pub fn new() -> Self {
        Self::never_retrying(Self::NEVER_RETRIED)
    }

    /// Never retries `kinds` (nor the deadline, an open circuit or a request
    /// body that could not be produced); retries every other failure.
    pub fn never_retrying(kinds: impl IntoIterator<Item = FailureKind>) -> Self {
        let never = kinds.into_iter().fold(0, |bits, kind| bits | bit(kind));
        Self { never }
    }

    /// Whether failures of `kind` are retried.
    pub fn retries(&self, kind: FailureKind) -> bool {
        !matches!(
            kind,
            FailureKind::Deadline | FailureKind::Other | FailureKind::RequestBody
        ) && !kind.is_turned_away()
            && self.never & bit(kind) == 0
    }
}

/// The bit of `kind` in a set of kinds.
fn bit(kind: FailureKind) -> u64 {
    1 << (kind as u64 % 64)
}

impl Default for ApacheDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl<B, E: AsError> Decoder<B, E> for ApacheDecoder {
    fn decode(&self, outcome: &Result<http::Response<B>, E>) -> Verdict {
        match outcome {
            Ok(_) => Verdict::Accept,
            Err(err) => match FailureKind::of(err.as_error()) {
                kind if self.retries(kind) => Verdict::retry(kind),
                kind => Verdict::fail(kind),
            },
        }
    }
}
