//! Decoders: what one attempt's outcome means for the call.
//!
//! # Example
//!
//! ```
//! use http::Response;
//! use http_resilience::retry::{Decoder, StatusDecoder, Verdict};
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

use super::retry_after;
pub use super::verdict::{Reason, Verdict};
use crate::{failure::AsError, FailureKind};
use http::{HeaderName, HeaderValue, StatusCode};
use std::{error::Error, fmt, time::SystemTime};

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
/// use http_resilience::retry::{Decoder, StatusDecoder, Verdict};
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
    /// [`ApacheDecoder`] says it on purpose).
    ///
    /// # Example
    ///
    /// ```
    /// use http_resilience::retry::{InvalidStatus, StatusDecoder};
    ///
    /// let decoder = StatusDecoder::new([502, 503])?;
    /// assert_eq!(decoder.statuses().count(), 2);
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

    /// Whether `status` is retried.
    pub fn contains(&self, status: StatusCode) -> bool {
        match slot(status.as_u16()) {
            Some((word, bit)) => self.bits[word] & bit != 0,
            None => false,
        }
    }

    /// The retried statuses, in ascending order.
    pub fn statuses(&self) -> impl Iterator<Item = StatusCode> + '_ {
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
    fn decode_response<B>(&self, response: &http::Response<B>) -> Verdict {
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

/// The delay asked for by a valid `Retry-After` on `response`; a malformed
/// value is logged and ignored.
fn server_delay<B>(response: &http::Response<B>) -> Option<std::time::Duration> {
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

/// OpenFeign's default decoding: an error status is retried only when it
/// carries a valid `Retry-After`, and then after the delay it asks for;
/// transport failures and timeouts of an attempt are retried.
///
/// This mirrors `ErrorDecoder.Default` and `RetryableException` in OpenFeign:
/// any status from 400 up with `Retry-After` is retryable, without it the
/// status is a failure, and an I/O error (Feign's `IOException`, here every
/// [`FailureKind`] of the transport, and the attempt, read and connect
/// timeouts) is retryable. A malformed `Retry-After` makes the status a plain
/// failure, as in Feign. The deadline of the whole call is never retried.
///
/// # Example
///
/// ```
/// use http::Response;
/// use http_resilience::{retry::{Decoder, FeignDecoder, Verdict}, BoxError};
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
                kind @ (FailureKind::Deadline | FailureKind::Other) => Verdict::fail(kind),
                kind => Verdict::retry(kind),
            },
        }
    }
}

/// Retries what the resilience libraries agree is transient: the statuses
/// 408, 429, 500, 502, 503 and 504, and the failures the upstream cannot have
/// acted on ([`FailureKind::is_before_send`]): failures to connect (the
/// request was never sent) and HTTP/2 refusals ([`FailureKind::Unprocessed`]).
/// `Retry-After` is read on 429 and 503.
///
/// This is the consensus of Polly's standard handler, Envoy's `5xx` plus
/// `retriable-status-codes`, and gRPC's `UNAVAILABLE`. Timeouts and failures
/// after the request was sent are *not* retried: the upstream may have acted
/// on the request.
///
/// # Example
///
/// ```
/// use http::Response;
/// use http_resilience::{retry::{Decoder, TransientDecoder}, BoxError};
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
    pub const STATUSES: [u16; 6] = [408, 429, 500, 502, 503, 504];

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
                kind if kind.is_before_send() => Verdict::retry(kind),
                kind => Verdict::fail(kind),
            },
        }
    }
}

/// Apache HttpClient's `DefaultHttpRequestRetryHandler`: responses are never
/// retried, failures are, except the kinds it never retries.
///
/// Never retried by default, as in Apache: timeouts (`InterruptedIOException`:
/// the attempt, read and connect timeouts), an unknown host
/// (`UnknownHostException`: [`FailureKind::Dns`]), a refused or failed connect
/// (`ConnectException`), and TLS failures (`SSLException`); the deadline is
/// never retried either. What remains is retried: a connection reset or closed
/// without a response, a request that was never written, or one an HTTP/2
/// upstream refused unprocessed ([`FailureKind::Unprocessed`]; Apache 5
/// retries such a stream too). Whether a sent
/// request may be repeated is then up to its idempotency (see
/// [`RetryPolicy::retry_sent_requests`](super::RetryPolicy::retry_sent_requests)).
///
/// # Example
///
/// ```
/// use http_resilience::{retry::{ApacheDecoder, Decoder}, BoxError, FailureKind};
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
    pub const NEVER_RETRIED: [FailureKind; 7] = [
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

    /// Never retries `kinds` (and the deadline); retries every other failure.
    pub fn never_retrying(kinds: impl IntoIterator<Item = FailureKind>) -> Self {
        let never = kinds.into_iter().fold(0, |bits, kind| bits | bit(kind));
        Self { never }
    }

    /// Whether failures of `kind` are retried.
    pub fn retries(&self, kind: FailureKind) -> bool {
        !matches!(kind, FailureKind::Deadline | FailureKind::Other) && self.never & bit(kind) == 0
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

/// Retries a response that carries a header with a given value, as in
/// `x-should-retry: true`; any other outcome is accepted, so that it combines
/// with other decoders through [`Or`].
///
/// # Example
///
/// ```
/// use http::Response;
/// use http_resilience::retry::{Decoder, RetryOnHeader};
///
/// let decoder = RetryOnHeader::new("x-should-retry", "true")?;
/// let asked = Response::builder().header("x-should-retry", "TRUE").body(())?;
/// assert!(Decoder::<(), ()>::decode(&decoder, &Ok(asked)).is_retry());
///
/// let err = RetryOnHeader::new("X-Should-Retry", "true").unwrap_err();
/// assert_eq!(err.part(), http_resilience::retry::HeaderPart::Name);
/// # Ok::<(), http_resilience::BoxError>(())
/// ```
#[derive(Debug, Clone)]
pub struct RetryOnHeader {
    name: HeaderName,
    reason: &'static str,
    value: HeaderValue,
}

// ===== impl RetryOnHeader =====

impl RetryOnHeader {
    /// Retries responses whose header `name` equals `value`, ignoring ASCII
    /// case.
    ///
    /// # Errors
    ///
    /// [`InvalidHeader`] if `name` is not a valid lowercase header name
    /// ([`HeaderPart::Name`]) or `value` not a valid header value
    /// ([`HeaderPart::Value`]).
    pub fn new(name: &'static str, value: &str) -> Result<Self, InvalidHeader> {
        let invalid = |part| InvalidHeader {
            name,
            value: value.to_owned(),
            part,
        };
        let header = match HeaderName::from_bytes(name.as_bytes()) {
            Ok(header) if header.as_str() == name => header,
            _ => return Err(invalid(HeaderPart::Name)),
        };
        let value = HeaderValue::from_str(value).map_err(|_| invalid(HeaderPart::Value))?;
        Ok(Self {
            name: header,
            reason: name,
            value,
        })
    }
}

impl<B, E> Decoder<B, E> for RetryOnHeader {
    fn decode(&self, outcome: &Result<http::Response<B>, E>) -> Verdict {
        match outcome {
            Ok(response)
                if response.headers().get(&self.name).is_some_and(|found| {
                    found.as_bytes().eq_ignore_ascii_case(self.value.as_bytes())
                }) =>
            {
                Verdict::retry(Reason::Header(self.reason))
            }
            _ => Verdict::Accept,
        }
    }
}

/// A header name or value given to [`RetryOnHeader::new`] is not valid.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidHeader {
    name: &'static str,
    value: String,
    part: HeaderPart,
}

/// The part of a header that [`InvalidHeader`] rejects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HeaderPart {
    /// The name: it must be a lowercase token (`x-should-retry`).
    Name,
    /// The value: it must hold no control character other than a tab (no
    /// line break, no NUL, no DEL).
    Value,
}

// ===== impl InvalidHeader =====

impl InvalidHeader {
    /// The header name as given.
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The header value as given.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// Which of the two is not valid.
    pub const fn part(&self) -> HeaderPart {
        self.part
    }
}

impl fmt::Display for InvalidHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self.part {
            HeaderPart::Name => {
                format!("header name must be a lowercase token, got {:?}", self.name)
            }
            HeaderPart::Value => format!(
                "value of header {} must hold no control characters, got {:?}",
                self.name, self.value
            ),
        };
        f.pad(&text)
    }
}

impl Error for InvalidHeader {}

/// One of the ready-made decoders, chosen at run time (from a configuration
/// file, for example).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum AnyDecoder {
    /// Retries a set of statuses.
    Statuses(StatusDecoder),
    /// OpenFeign's default.
    Feign(FeignDecoder),
    /// The transient outcomes.
    Transient(TransientDecoder),
    /// Apache HttpClient's default.
    Apache(ApacheDecoder),
}

impl<B, E: AsError> Decoder<B, E> for AnyDecoder {
    fn decode(&self, outcome: &Result<http::Response<B>, E>) -> Verdict {
        match self {
            AnyDecoder::Statuses(d) => d.decode(outcome),
            AnyDecoder::Feign(d) => d.decode(outcome),
            AnyDecoder::Transient(d) => d.decode(outcome),
            AnyDecoder::Apache(d) => d.decode(outcome),
        }
    }
}

impl From<StatusDecoder> for AnyDecoder {
    fn from(decoder: StatusDecoder) -> Self {
        AnyDecoder::Statuses(decoder)
    }
}

impl From<FeignDecoder> for AnyDecoder {
    fn from(decoder: FeignDecoder) -> Self {
        AnyDecoder::Feign(decoder)
    }
}

impl From<ApacheDecoder> for AnyDecoder {
    fn from(decoder: ApacheDecoder) -> Self {
        AnyDecoder::Apache(decoder)
    }
}

impl From<TransientDecoder> for AnyDecoder {
    fn from(decoder: TransientDecoder) -> Self {
        AnyDecoder::Transient(decoder)
    }
}

/// Adds `or` to the ready-made decoders.
macro_rules! decoder_or {
    ($($ty:ident $(<$($param:ident),*>)?),* $(,)?) => {
        $(
            impl $(<$($param),*>)? $ty $(<$($param),*>)? {
                /// A decoder that retries when either `self` or `other` does;
                /// see [`Or`].
                pub fn or<Next>(self, other: Next) -> Or<Self, Next> {
                    Or::new(self, other)
                }
            }
        )*
    };
}

decoder_or!(StatusDecoder, FeignDecoder, TransientDecoder, ApacheDecoder, RetryOnHeader, Or<A, O>);

/// A decoder that retries when either of two does.
///
/// `first` is asked first; when it does not ask for a retry, `second` is
/// asked; when neither does, a failure from either stands over an accept. The ready-made decoders
/// have an `or` method that builds one; closures use [`Or::new`].
///
/// # Example
///
/// ```
/// use http::Response;
/// use http_resilience::retry::{Decoder, Or, RetryOnHeader, StatusDecoder, Verdict};
///
/// let decoder = StatusDecoder::new([503])?.or(RetryOnHeader::new("x-should-retry", "true")?);
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
            InvalidStatus::OutOfRange(code) => {
                f.pad(&format!("status code must be in 100..=599, got {code}"))
            }
            InvalidStatus::Empty => f.pad("statuses must list at least one status, got none"),
        }
    }
}

impl Error for InvalidStatus {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        attempt_timeout::error::AttemptTimedOut, deadline::error::DeadlineExceeded, BoxError,
    };
    use std::{io, time::Duration};

    type Outcome = Result<http::Response<()>, BoxError>;

    fn response(status: u16) -> Outcome {
        Ok(http::Response::builder().status(status).body(()).unwrap())
    }

    fn with_header(status: u16, name: &str, value: &str) -> Outcome {
        Ok(http::Response::builder()
            .status(status)
            .header(name, value)
            .body(())
            .unwrap())
    }

    fn error(err: impl Into<BoxError>) -> Outcome {
        Err(err.into())
    }

    fn status(code: u16) -> StatusCode {
        StatusCode::from_u16(code).unwrap()
    }

    #[test]
    fn status_decoder_retries_only_listed_statuses() {
        let decoder = StatusDecoder::new([503, 429]).unwrap();
        assert_eq!(decoder.decode(&response(503)), Verdict::retry(status(503)));
        assert_eq!(decoder.decode(&response(429)), Verdict::retry(status(429)));
        for code in [100, 200, 204, 302] {
            assert_eq!(decoder.decode(&response(code)), Verdict::Accept, "{code}");
        }
        for code in [400, 404, 500, 502, 504, 599] {
            assert_eq!(
                decoder.decode(&response(code)),
                Verdict::fail(status(code)),
                "{code}"
            );
        }
    }

    #[test]
    fn status_decoder_fails_errors() {
        let decoder = StatusDecoder::new([503]).unwrap();
        let verdict = decoder.decode(&error(io::Error::from(io::ErrorKind::ConnectionRefused)));
        assert_eq!(verdict, Verdict::fail(Reason::Error));
    }

    #[test]
    fn status_decoder_ignores_retry_after_unless_asked() {
        let paced = with_header(503, "retry-after", "3");
        let only_503 = StatusDecoder::new([503]).unwrap();
        assert_eq!(only_503.decode(&paced).server_delay(), None);
        let reading = only_503.with_retry_after();
        assert_eq!(
            reading.decode(&paced).server_delay(),
            Some(Duration::from_secs(3))
        );
        // A malformed value falls back to the backoff: a retry without delay.
        let garbage = reading.decode(&with_header(503, "retry-after", "soon"));
        assert_eq!(garbage, Verdict::retry(status(503)));
        // Only 429 and 503 are read.
        let other = StatusDecoder::new([500]).unwrap().with_retry_after();
        assert_eq!(
            other
                .decode(&with_header(500, "retry-after", "3"))
                .server_delay(),
            None
        );
    }

    #[test]
    fn holds_both_ends_of_the_range() {
        let decoder = StatusDecoder::new([100, 599]).unwrap();
        let listed: Vec<u16> = decoder.statuses().map(|s| s.as_u16()).collect();
        assert_eq!(listed, [100, 599]);
        assert_eq!(format!("{decoder:?}"), "{100, 599}");
        assert_eq!(
            format!("{:?}", decoder.with_retry_after()),
            "{100, 599} with Retry-After"
        );
    }

    #[test]
    fn rejects_codes_out_of_range() {
        assert_eq!(StatusDecoder::new([99]), Err(InvalidStatus::OutOfRange(99)));
        assert_eq!(
            StatusDecoder::new([503, 600]),
            Err(InvalidStatus::OutOfRange(600))
        );
        assert_eq!(
            InvalidStatus::OutOfRange(600).to_string(),
            "status code must be in 100..=599, got 600"
        );
        assert_eq!(InvalidStatus::OutOfRange(0).code(), Some(0));
    }

    #[test]
    fn rejects_an_empty_set() {
        assert_eq!(StatusDecoder::new([]), Err(InvalidStatus::Empty));
        assert_eq!(InvalidStatus::Empty.code(), None);
        assert_eq!(
            InvalidStatus::Empty.to_string(),
            "statuses must list at least one status, got none"
        );
    }

    #[test]
    fn known_good_lists_match_the_checked_constructor() {
        assert_eq!(
            StatusDecoder::known_good(&TransientDecoder::STATUSES),
            StatusDecoder::new(TransientDecoder::STATUSES).unwrap()
        );
        assert_eq!(
            StatusDecoder::known_good(&[503]),
            StatusDecoder::new([503]).unwrap()
        );
    }

    #[test]
    fn feign_retries_error_statuses_only_with_retry_after() {
        let feign = FeignDecoder::new();
        assert_eq!(feign.decode(&response(503)), Verdict::fail(status(503)));
        assert_eq!(
            feign.decode(&with_header(500, "retry-after", "1")),
            Verdict::retry(status(500)).after(Duration::from_secs(1))
        );
        assert_eq!(
            feign.decode(&with_header(404, "retry-after", "0")),
            Verdict::retry(status(404)).after(Duration::ZERO)
        );
        assert_eq!(
            feign.decode(&with_header(503, "retry-after", "later")),
            Verdict::fail(status(503))
        );
        assert_eq!(feign.decode(&response(200)), Verdict::Accept);
    }

    #[test]
    fn feign_retries_io_errors_but_never_the_deadline() {
        let feign = FeignDecoder::new();
        let second = Duration::from_secs(1);
        assert_eq!(
            feign.decode(&error(io::Error::from(io::ErrorKind::ConnectionReset))),
            Verdict::retry(FailureKind::ConnectionReset)
        );
        assert_eq!(
            feign.decode(&error(AttemptTimedOut::new(second))),
            Verdict::retry(FailureKind::AttemptTimeout)
        );
        assert_eq!(
            feign.decode(&error(DeadlineExceeded::new(second))),
            Verdict::fail(FailureKind::Deadline)
        );
        assert_eq!(
            feign.decode(&error("not io")),
            Verdict::fail(FailureKind::Other)
        );
    }

    #[test]
    fn transient_retries_the_consensus_statuses_and_connect_failures() {
        let transient = TransientDecoder::new();
        for code in TransientDecoder::STATUSES {
            assert!(transient.decode(&response(code)).is_retry(), "{code}");
        }
        for code in [400, 401, 404, 409, 501, 505] {
            assert_eq!(
                transient.decode(&response(code)),
                Verdict::fail(status(code))
            );
        }
        assert_eq!(
            transient
                .decode(&with_header(429, "retry-after", "4"))
                .server_delay(),
            Some(Duration::from_secs(4))
        );
        assert_eq!(
            transient.decode(&error(io::Error::from(io::ErrorKind::ConnectionRefused))),
            Verdict::retry(FailureKind::ConnectRefused)
        );
        // Sent, then failed: the upstream may have acted on it.
        assert_eq!(
            transient.decode(&error(io::Error::from(io::ErrorKind::ConnectionReset))),
            Verdict::fail(FailureKind::ConnectionReset)
        );
        assert_eq!(
            transient.decode(&error(AttemptTimedOut::new(Duration::from_secs(1)))),
            Verdict::fail(FailureKind::AttemptTimeout)
        );
    }

    #[test]
    fn apache_retries_resets_and_closes_but_never_its_listed_kinds() {
        let apache = ApacheDecoder::new();
        assert_eq!(apache.decode(&response(503)), Verdict::Accept);
        assert_eq!(
            apache.decode(&error(io::Error::from(io::ErrorKind::ConnectionReset))),
            Verdict::retry(FailureKind::ConnectionReset)
        );
        assert_eq!(
            apache.decode(&error(io::Error::from(io::ErrorKind::UnexpectedEof))),
            Verdict::retry(FailureKind::ConnectionClosed)
        );
        for kind in ApacheDecoder::NEVER_RETRIED {
            assert!(!apache.retries(kind), "{kind}");
        }
        assert_eq!(
            apache.decode(&error(AttemptTimedOut::new(Duration::from_secs(1)))),
            Verdict::fail(FailureKind::AttemptTimeout)
        );
        assert!(!apache.retries(FailureKind::Deadline));
        let everything = ApacheDecoder::never_retrying([]);
        assert!(everything.retries(FailureKind::ReadTimeout));
        assert!(!everything.retries(FailureKind::Deadline));
    }

    #[test]
    fn header_decoder_matches_ignoring_case() {
        let decoder = RetryOnHeader::new("x-should-retry", "true").unwrap();
        assert_eq!(
            decoder.decode(&with_header(500, "x-should-retry", "True")),
            Verdict::retry(Reason::Header("x-should-retry"))
        );
        assert_eq!(
            decoder.decode(&with_header(500, "x-should-retry", "false")),
            Verdict::Accept
        );
        assert_eq!(decoder.decode(&response(500)), Verdict::Accept);
        let err = RetryOnHeader::new("X-Upper", "true").unwrap_err();
        assert_eq!((err.part(), err.name()), (HeaderPart::Name, "X-Upper"));
        assert_eq!(
            err.to_string(),
            "header name must be a lowercase token, got \"X-Upper\""
        );
        let err = RetryOnHeader::new("bad name", "true").unwrap_err();
        assert_eq!(err.part(), HeaderPart::Name);
        let err = RetryOnHeader::new("x-ok", "two\nlines").unwrap_err();
        assert_eq!((err.part(), err.value()), (HeaderPart::Value, "two\nlines"));
        assert_eq!(
            err.to_string(),
            "value of header x-ok must hold no control characters, got \"two\\nlines\""
        );
    }

    #[test]
    fn or_takes_the_first_retry() {
        let decoder =
            StatusDecoder::new([503])
                .unwrap()
                .or(RetryOnHeader::new("x-should-retry", "true").unwrap());
        assert_eq!(decoder.decode(&response(503)), Verdict::retry(status(503)));
        assert_eq!(
            decoder.decode(&with_header(500, "x-should-retry", "true")),
            Verdict::retry(Reason::Header("x-should-retry"))
        );
        // Neither retries: the first verdict stands.
        assert_eq!(decoder.decode(&response(500)), Verdict::fail(status(500)));
        assert_eq!(decoder.decode(&response(200)), Verdict::Accept);
        // A failure from the second stands over the first's accept.
        let apache_first = ApacheDecoder::new().or(TransientDecoder::new());
        assert_eq!(
            apache_first.decode(&response(501)),
            Verdict::fail(status(501))
        );
    }
}
