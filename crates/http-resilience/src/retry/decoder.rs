//! Decoders: what one attempt's outcome means for the call.
//!
//! # Example
//!
//! ```
//! use http::Response;
//! use http_resilience::retry::{Decoder, StatusDecoder, Verdict};
//!
//! // The seed's decoder, and a closure that also retries every error.
//! let seed = StatusDecoder::new([503]);
//! let with_errors = move |outcome: &Result<Response<()>, std::io::Error>| match outcome {
//!     Err(_) => Verdict::retry(),
//!     ok => seed.decode(ok),
//! };
//! let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
//! assert_eq!(with_errors.decode(&Err(refused)), Verdict::retry());
//! ```

use http::StatusCode;
use std::{error::Error, fmt, time::Duration};

/// What a [`Decoder`] makes of one attempt's outcome.
///
/// `Retry` only *asks* for another attempt: the policy's
/// [`Retryer`](super::Retryer) decides whether one is made and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Verdict {
    /// Return this outcome to the caller as it is.
    Accept,
    /// Try again if the retryer allows it.
    Retry {
        /// A delay the server asked for (for example with `Retry-After`); the
        /// retryer may honour it in place of its own backoff.
        after: Option<Duration>,
    },
}

// ===== impl Verdict =====

impl Verdict {
    /// Ask for another attempt after the retryer's own backoff.
    pub const fn retry() -> Self {
        Verdict::Retry { after: None }
    }

    /// Ask for another attempt after `delay`, a delay the server asked for.
    pub const fn retry_after(delay: Duration) -> Self {
        Verdict::Retry { after: Some(delay) }
    }

    /// Whether this verdict asks for another attempt.
    pub const fn is_retry(&self) -> bool {
        matches!(self, Verdict::Retry { .. })
    }
}

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
/// use http_resilience::retry::{Decoder, Verdict};
///
/// // Retry 502 and 503, and every transport error.
/// let decoder = |outcome: &Result<Response<()>, std::io::Error>| match outcome {
///     Ok(response) if matches!(response.status().as_u16(), 502 | 503) => Verdict::retry(),
///     Ok(_) => Verdict::Accept,
///     Err(_) => Verdict::retry(),
/// };
///
/// let unavailable = Response::builder().status(503).body(()).unwrap();
/// assert_eq!(decoder.decode(&Ok(unavailable)), Verdict::retry());
/// ```
pub trait Decoder<B, E> {
    /// The verdict on one attempt's outcome.
    fn decode(&self, outcome: &Result<http::Response<B>, E>) -> Verdict;
}

impl<F, B, E> Decoder<B, E> for F
where
    F: Fn(&Result<http::Response<B>, E>) -> Verdict,
{
    fn decode(&self, outcome: &Result<http::Response<B>, E>) -> Verdict {
        self(outcome)
    }
}

/// Retries responses whose status is in a set; accepts everything else,
/// errors included.
///
/// `StatusDecoder::new([503])` is the policy of seed 000: only
/// `503 Service Unavailable` is retried; timeouts and other errors are returned
/// at once.
///
/// # Example
///
/// ```
/// use http::Response;
/// use http_resilience::retry::{Decoder, StatusDecoder, Verdict};
///
/// let decoder = StatusDecoder::new([503]);
/// let response = |status| Response::builder().status(status).body(()).unwrap();
///
/// let retry_503: &dyn Decoder<(), std::io::Error> = &decoder;
/// assert_eq!(retry_503.decode(&Ok(response(503))), Verdict::retry());
/// assert_eq!(retry_503.decode(&Ok(response(500))), Verdict::Accept);
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct StatusDecoder {
    // One bit for each status in 100..=599.
    bits: [u64; 8],
}

/// The first status a [`StatusDecoder`] can hold.
const FIRST: u16 = 100;
/// The last status a [`StatusDecoder`] can hold.
const LAST: u16 = 599;

// ===== impl StatusDecoder =====

impl StatusDecoder {
    /// A decoder that retries the given statuses.
    ///
    /// # Panics
    ///
    /// Panics if a status is outside `100..=599`; [`try_new`](Self::try_new)
    /// returns an error instead.
    #[track_caller]
    pub fn new(statuses: impl IntoIterator<Item = u16>) -> Self {
        match Self::try_new(statuses) {
            Ok(decoder) => decoder,
            Err(err) => panic!("{err}"),
        }
    }

    /// A decoder that retries the given statuses.
    ///
    /// # Errors
    ///
    /// [`InvalidStatus`] if a status is outside `100..=599`.
    pub fn try_new(statuses: impl IntoIterator<Item = u16>) -> Result<Self, InvalidStatus> {
        let mut bits = [0; 8];
        for status in statuses {
            if !(FIRST..=LAST).contains(&status) {
                return Err(InvalidStatus(status));
            }
            let index = usize::from(status - FIRST);
            bits[index / 64] |= 1 << (index % 64);
        }
        Ok(Self { bits })
    }

    /// Whether `status` is retried.
    pub fn contains(&self, status: StatusCode) -> bool {
        let status = status.as_u16();
        if !(FIRST..=LAST).contains(&status) {
            return false;
        }
        let index = usize::from(status - FIRST);
        self.bits[index / 64] & (1 << (index % 64)) != 0
    }

    /// The retried statuses, in ascending order.
    pub fn statuses(&self) -> impl Iterator<Item = StatusCode> + '_ {
        (FIRST..=LAST)
            .filter_map(|code| StatusCode::from_u16(code).ok())
            .filter(|status| self.contains(*status))
    }
}

impl<B, E> Decoder<B, E> for StatusDecoder {
    fn decode(&self, outcome: &Result<http::Response<B>, E>) -> Verdict {
        match outcome {
            Ok(response) if self.contains(response.status()) => Verdict::retry(),
            _ => Verdict::Accept,
        }
    }
}

impl fmt::Debug for StatusDecoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(self.statuses().map(|status| status.as_u16()))
            .finish()
    }
}

/// A status code outside `100..=599` was given to [`StatusDecoder`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidStatus(u16);

// ===== impl InvalidStatus =====

impl InvalidStatus {
    /// The rejected code.
    pub const fn code(&self) -> u16 {
        self.0
    }
}

impl fmt::Display for InvalidStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&format!("status code must be in 100..=599, got {}", self.0))
    }
}

impl Error for InvalidStatus {}

#[cfg(test)]
mod tests {
    use super::*;

    fn response(status: u16) -> Result<http::Response<()>, ()> {
        Ok(http::Response::builder().status(status).body(()).unwrap())
    }

    #[test]
    fn retries_only_listed_statuses() {
        let decoder = StatusDecoder::new([503, 429]);
        assert_eq!(decoder.decode(&response(503)), Verdict::retry());
        assert_eq!(decoder.decode(&response(429)), Verdict::retry());
        for status in [100, 200, 404, 500, 502, 504, 599] {
            assert_eq!(
                decoder.decode(&response(status)),
                Verdict::Accept,
                "{status}"
            );
        }
    }

    #[test]
    fn accepts_errors() {
        let decoder = StatusDecoder::new([503]);
        assert_eq!(
            decoder.decode(&Err::<http::Response<()>, _>(())),
            Verdict::Accept
        );
    }

    #[test]
    fn holds_both_ends_of_the_range() {
        let decoder = StatusDecoder::new([100, 599]);
        let listed: Vec<u16> = decoder.statuses().map(|s| s.as_u16()).collect();
        assert_eq!(listed, [100, 599]);
        assert_eq!(format!("{decoder:?}"), "{100, 599}");
    }

    #[test]
    fn rejects_codes_out_of_range() {
        assert_eq!(StatusDecoder::try_new([99]), Err(InvalidStatus(99)));
        assert_eq!(StatusDecoder::try_new([503, 600]), Err(InvalidStatus(600)));
        assert_eq!(
            InvalidStatus(600).to_string(),
            "status code must be in 100..=599, got 600"
        );
    }

    #[test]
    #[should_panic(expected = "status code must be in 100..=599, got 0")]
    fn new_panics_on_codes_out_of_range() {
        let _ = StatusDecoder::new([0]);
    }
}
