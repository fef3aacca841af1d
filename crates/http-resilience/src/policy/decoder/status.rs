//! Retrying a set of statuses.

use super::{server_delay, Decoder, Reason, Verdict};
use http::StatusCode;
use std::{error::Error, fmt};

/// Retries responses whose status is in a set; every other outcome is
/// returned: a status below 400 is accepted, any other status and every error
/// fail.
///
/// `StatusDecoder::new([503])?` is the policy of Reactor WebClient's nested timeouts: only
/// `503 Service Unavailable` is retried; timeouts and other errors are returned
/// at once. That policy ignores `Retry-After`, and so does this decoder unless
/// [`with_retry_after`](Self::with_retry_after) is set.
///
/// # Example
///
/// ```
/// use http::Response;
/// use http_resilience::policy::{Decoder, StatusDecoder, Verdict};
///
/// let decoder = StatusDecoder::new([503])?;
/// let response = |status| Response::builder().status(status).body(());
///
/// let retry_503: &dyn Decoder<(), std::io::Error> = &decoder;
/// assert!(retry_503.decode(&Ok(response(503)?)).is_retry());
/// assert!(!retry_503.decode(&Ok(response(500)?)).is_retry());
/// assert!(retry_503.decode(&Ok(response(200)?)).is_accept());
/// # Ok::<(), http_resilience::BoxError>(())
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct StatusDecoder {
    // One bit for each status in 100..=599.
    bits: [u64; 8],
    retry_after: bool,
}

/// The first status a [`StatusDecoder`] can hold.
const FIRST: u16 = 100;
/// The last status a [`StatusDecoder`] can hold.
const LAST: u16 = 599;

// ===== impl StatusDecoder =====

impl StatusDecoder {
    /// A decoder that retries the given statuses.
    ///
    /// # Errors
    ///
    /// [`InvalidStatus::OutOfRange`] if a status is outside `100..=599`, and
    /// [`InvalidStatus::Empty`] if there is none: a decoder that retries no
    /// status is a mistake more often than a wish (and
    /// [`ApacheDecoder`](super::ApacheDecoder) says it on purpose).
    ///
    /// # Example
    ///
    /// ```
    /// use http_resilience::policy::{InvalidStatus, StatusDecoder};
    ///
    /// let decoder = StatusDecoder::new([502, 503])?;
    /// assert_eq!(format!("{decoder:?}"), "{502, 503}");
    ///
    /// assert_eq!(StatusDecoder::new([503, 99]).unwrap_err(), InvalidStatus::OutOfRange(99));
    /// assert_eq!(StatusDecoder::new([]).unwrap_err(), InvalidStatus::Empty);
    /// # Ok::<(), http_resilience::BoxError>(())
    /// ```
    pub fn new(statuses: impl IntoIterator<Item = u16>) -> Result<Self, InvalidStatus> {
        let mut decoder = Self::EMPTY;
        let mut any = false;
        for status in statuses {
            if !(FIRST..=LAST).contains(&status) {
                return Err(InvalidStatus::OutOfRange(status));
            }
            decoder.bits = with_status(decoder.bits, status);
            any = true;
        }
        if !any {
            return Err(InvalidStatus::Empty);
        }
        Ok(decoder)
    }

    /// The decoder of a fixed list known to pass [`new`](Self::new)'s
    /// checks, for the presets and [`TransientDecoder`]; their tests hold the
    /// lists valid. A code outside `100..=599` is skipped, never a panic.
    pub(crate) const fn known_good(statuses: &[u16]) -> Self {
        let mut bits = Self::EMPTY.bits;
        let mut rest = statuses;
        while let [status, tail @ ..] = rest {
            bits = with_status(bits, *status);
            rest = tail;
        }
        Self {
            bits,
            retry_after: false,
        }
    }

    /// The decoder with no status, before any is added.
    const EMPTY: Self = Self {
        bits: [0; 8],
        retry_after: false,
    };

    /// Also reads `Retry-After` on the retried statuses 429 and 503, and asks
    /// for the delay it gives. A malformed value is ignored (the retryer's
    /// backoff applies) and logged at debug level.
    #[must_use]
    pub const fn with_retry_after(mut self) -> Self {
        self.retry_after = true;
        self
    }

    /// Whether `Retry-After` is read ([`with_retry_after`](Self::with_retry_after)).
    pub(crate) const fn reads_retry_after(&self) -> bool {
        self.retry_after
    }

    /// Whether `status` is retried.
    pub fn contains(&self, status: StatusCode) -> bool {
        match slot(status.as_u16()) {
            Some((word, bit)) => self.bits[word] & bit != 0,
            None => false,
        }
    }

    /// The retried statuses, in ascending order.
    pub(crate) fn statuses(&self) -> impl Iterator<Item = StatusCode> + '_ {
        (FIRST..=LAST)
            .filter_map(|code| StatusCode::from_u16(code).ok())
            .filter(|status| self.contains(*status))
    }
}

/// The word of a [`StatusDecoder`]'s bits that holds `status`, and its bit in
/// that word; `None` outside `100..=599`.
const fn slot(status: u16) -> Option<(usize, u64)> {
    if status < FIRST || status > LAST {
        return None;
    }
    let index = (status - FIRST) as usize;
    // NOTE: `index` is below 500, so the word is below 8, the length of
    // `bits`, and the shift below 64.
    Some((index / 64, 1 << (index % 64)))
}

/// `bits` with `status` added; a status outside `100..=599` is left out.
const fn with_status(mut bits: [u64; 8], status: u16) -> [u64; 8] {
    if let Some((word, bit)) = slot(status) {
        bits[word] |= bit;
    }
    bits
}

impl StatusDecoder {
    /// The verdict on a response head.
    pub(super) fn decode_response<B>(&self, response: &http::Response<B>) -> Verdict {
        let status = response.status();
        if self.contains(status) {
            let verdict = Verdict::retry(status);
            let reads_header = self.retry_after
                && matches!(
                    status,
                    StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE
                );
            match reads_header.then(|| server_delay(response)).flatten() {
                Some(delay) => verdict.after(delay),
                None => verdict,
            }
        } else if status.as_u16() >= 400 {
            Verdict::fail(status)
        } else {
            Verdict::Accept
        }
    }
}

impl<B, E> Decoder<B, E> for StatusDecoder {
    fn decode(&self, outcome: &Result<http::Response<B>, E>) -> Verdict {
        match outcome {
            Ok(response) => self.decode_response(response),
            Err(_) => Verdict::fail(Reason::Error),
        }
    }
}

impl fmt::Debug for StatusDecoder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set()
            .entries(self.statuses().map(|status| status.as_u16()))
            .finish()?;
        if self.retry_after {
            f.write_str(" with Retry-After")?;
        }
        Ok(())
    }
}

/// The statuses given to [`StatusDecoder::new`] make no sense.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum InvalidStatus {
    /// A status code outside `100..=599`.
    OutOfRange(u16),
    /// No status at all.
    Empty,
}

// ===== impl InvalidStatus =====

impl InvalidStatus {
    /// The rejected code, if one was out of range.
    pub const fn code(&self) -> Option<u16> {
        match self {
            InvalidStatus::OutOfRange(code) => Some(*code),
            InvalidStatus::Empty => None,
        }
    }
}

impl fmt::Display for InvalidStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvalidStatus::OutOfRange(_) => f.pad("status code must be in 100..=599"),
            InvalidStatus::Empty => f.pad("statuses must list at least one status"),
        }
    }
}

impl Error for InvalidStatus {}
