//! Error types

use crate::BoxError;
use http::{HeaderValue, StatusCode};
use std::{error::Error, fmt};

/// A resumed response did not continue the body that failed, so the body was
/// not spliced: it fails with this error instead.
///
/// [`ResumeBody`](super::body::ResumeBody) yields it, boxed, as a frame error
/// when the answer to its ranged request is not the rest of the same
/// representation ([`Mismatch`] says how), or when the bytes of the body do
/// not add up to the length the first response announced.
///
/// Its [`source`](Error::source) is the failure that the resume was meant to
/// heal (the reset, the close or the read timeout), when there was one, so
/// [`FailureKind::of`](crate::FailureKind::of) classifies the error as that
/// failure, and [`errors::find`](crate::errors::find) finds this error above
/// it:
///
/// ```
/// use http::StatusCode;
/// use http_resilience::{
///     errors,
///     resume::error::{Mismatch, ResumeMismatch},
///     BoxError, FailureKind,
/// };
///
/// let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
/// let err: BoxError = ResumeMismatch::new(Mismatch::Status(StatusCode::OK), 4096)
///     .with_cause(reset)
///     .into();
/// assert_eq!(FailureKind::of(&*err), FailureKind::ConnectionReset);
/// let mismatch = errors::find::<ResumeMismatch>(&*err).unwrap();
/// assert_eq!(mismatch.received(), 4096);
/// assert_eq!(
///     err.to_string(),
///     "cannot resume the body after 4096 bytes: expected 206 Partial Content, got 200 OK"
/// );
/// ```
#[derive(Debug)]
pub struct ResumeMismatch {
    mismatch: Mismatch,
    received: u64,
    cause: Option<BoxError>,
}

/// How a resumed response (or the body as a whole) differs from what the first
/// response announced.
///
/// More kinds may be added: match with a wildcard arm.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Mismatch {
    /// The ranged request was answered with this status, not `206 Partial
    /// Content`. A `200` means the representation changed: the `If-Range`
    /// validator no longer matched, and the upstream sent all of the new one.
    Status(StatusCode),
    /// The `Content-Range` of the `206` is absent, unreadable, or not the rest
    /// of the body: it must start at the bytes received so far and run to the
    /// end of a representation as long as the first response announced.
    ContentRange {
        /// The first byte asked for: the bytes received so far.
        start: u64,
        /// The length of the whole representation, when it is known.
        total: Option<u64>,
        /// The `Content-Range` received, if any.
        got: Option<HeaderValue>,
    },
    /// The `206` carries another validator (`ETag`, or `Last-Modified` when
    /// the first response had no `ETag`) than the first response: another
    /// representation.
    Validator {
        /// The first response's validator, sent in `If-Range`.
        expected: HeaderValue,
        /// The partial response's.
        got: HeaderValue,
    },
    /// The `206` has a `Content-Encoding`, which the first response had not:
    /// its bytes are not those of the first response.
    ContentEncoding(HeaderValue),
    /// The body's bytes do not add up to its announced length: more bytes than
    /// announced, or an end before them.
    Length {
        /// The length the responses announced.
        expected: u64,
        /// The bytes the body carried.
        got: u64,
    },
}

// ===== impl ResumeMismatch =====

impl ResumeMismatch {
    /// An error for `mismatch`, met after `received` bytes of the body.
    ///
    /// Public so that tests and mocks can produce the same error the body does.
    pub const fn new(mismatch: Mismatch, received: u64) -> Self {
        Self {
            mismatch,
            received,
            cause: None,
        }
    }

    /// The same error, with the failure the resume was meant to heal as its
    /// [`source`](Error::source).
    #[must_use]
    pub fn with_cause(mut self, cause: impl Into<BoxError>) -> Self {
        self.cause = Some(cause.into());
        self
    }

    /// How the response differs.
    pub const fn mismatch(&self) -> &Mismatch {
        &self.mismatch
    }

    /// The bytes of the body the caller had read (and the resume asked to
    /// continue after).
    pub const fn received(&self) -> u64 {
        self.received
    }
}

impl fmt::Display for ResumeMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&format!(
            "cannot resume the body after {} bytes: {}",
            self.received, self.mismatch
        ))
    }
}

impl Error for ResumeMismatch {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.cause.as_ref().map(|cause| &**cause as _)
    }
}

// ===== impl Mismatch =====

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Mismatch::Status(status) => format!("expected 206 Partial Content, got {status}"),
            Mismatch::ContentRange { start, total, got } => {
                let total = total.map_or_else(|| "*".to_owned(), |total| total.to_string());
                let got = got.as_ref().map_or_else(|| "none".to_owned(), quoted);
                format!("expected Content-Range bytes {start}-.../{total}, got {got}")
            }
            Mismatch::Validator { expected, got } => format!(
                "expected the validator {}, got {}",
                quoted(expected),
                quoted(got)
            ),
            Mismatch::ContentEncoding(coding) => {
                format!("the partial response is encoded ({})", quoted(coding))
            }
            Mismatch::Length { expected, got } => {
                format!("expected {expected} bytes in all, got {got}")
            }
        };
        f.pad(&text)
    }
}

/// A header value for a message, as text where it is text.
fn quoted(value: &HeaderValue) -> String {
    value
        .to_str()
        .map_or_else(|_| format!("{value:?}"), str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_was_expected_and_got() {
        let message = |mismatch: Mismatch| ResumeMismatch::new(mismatch, 10).to_string();
        assert_eq!(
            message(Mismatch::Status(StatusCode::OK)),
            "cannot resume the body after 10 bytes: expected 206 Partial Content, got 200 OK"
        );
        assert_eq!(
            message(Mismatch::ContentRange {
                start: 10,
                total: Some(30),
                got: Some(HeaderValue::from_static("bytes 0-29/30")),
            }),
            "cannot resume the body after 10 bytes: \
             expected Content-Range bytes 10-.../30, got bytes 0-29/30"
        );
        assert_eq!(
            message(Mismatch::ContentRange {
                start: 10,
                total: None,
                got: None,
            }),
            "cannot resume the body after 10 bytes: expected Content-Range bytes 10-.../*, got none"
        );
        assert_eq!(
            message(Mismatch::Validator {
                expected: HeaderValue::from_static("\"v1\""),
                got: HeaderValue::from_static("\"v2\""),
            }),
            "cannot resume the body after 10 bytes: expected the validator \"v1\", got \"v2\""
        );
        assert_eq!(
            message(Mismatch::ContentEncoding(HeaderValue::from_static("gzip"))),
            "cannot resume the body after 10 bytes: the partial response is encoded (gzip)"
        );
        assert_eq!(
            message(Mismatch::Length {
                expected: 30,
                got: 31
            }),
            "cannot resume the body after 10 bytes: expected 30 bytes in all, got 31"
        );
    }

    #[test]
    fn the_cause_is_the_source() {
        let plain = ResumeMismatch::new(Mismatch::Status(StatusCode::OK), 1);
        assert!(plain.source().is_none());
        assert_eq!(plain.mismatch(), &Mismatch::Status(StatusCode::OK));
        let caused = plain.with_cause("reset");
        assert_eq!(caused.source().unwrap().to_string(), "reset");
    }
}
