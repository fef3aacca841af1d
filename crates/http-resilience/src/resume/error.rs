//! Error types

use crate::{errors::AsError, BoxError};
use http::{HeaderValue, StatusCode};
use std::{error::Error, fmt};

/// A resumed response did not continue the body that failed, so the body was
/// not spliced: it fails with this error instead.
///
/// Its message says what differs in a phrase that is the same whatever the
/// values: the bytes received are [`received`](Self::received), and what was
/// expected and got are the fields of the [`mismatch`](Self::mismatch).
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
///     "cannot resume the body: the upstream did not answer 206 Partial Content"
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
        f.pad(&format!("cannot resume the body: {}", self.mismatch))
    }
}

impl Error for ResumeMismatch {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        self.cause.as_ref().map(|cause| &**cause as _)
    }
}

impl AsError for ResumeMismatch {
    fn as_error(&self) -> &(dyn Error + 'static) {
        self
    }
}

// ===== impl Mismatch =====

impl fmt::Display for Mismatch {
    /// What differs, the same phrase whatever the values (which are the
    /// variant's fields).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            Mismatch::Status(_) => "the upstream did not answer 206 Partial Content",
            Mismatch::ContentRange { .. } => "the Content-Range is not the rest of the body",
            Mismatch::Validator { .. } => "the partial response has another validator",
            Mismatch::ContentEncoding(_) => "the partial response is encoded",
            Mismatch::Length { .. } => "the body's bytes do not add up to its announced length",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_differs_whatever_the_values() {
        let message =
            |mismatch: Mismatch, received| ResumeMismatch::new(mismatch, received).to_string();
        let range = |start, got: &'static str| Mismatch::ContentRange {
            start,
            total: Some(30),
            got: Some(HeaderValue::from_static(got)),
        };
        let validator = |got: &'static str| Mismatch::Validator {
            expected: HeaderValue::from_static("\"v1\""),
            got: HeaderValue::from_static(got),
        };
        let cases = [
            (
                Mismatch::Status(StatusCode::OK),
                Mismatch::Status(StatusCode::NOT_FOUND),
                "the upstream did not answer 206 Partial Content",
            ),
            (
                range(10, "bytes 0-29/30"),
                Mismatch::ContentRange {
                    start: 20,
                    total: None,
                    got: None,
                },
                "the Content-Range is not the rest of the body",
            ),
            (
                validator("\"v2\""),
                validator("\"v3\""),
                "the partial response has another validator",
            ),
            (
                Mismatch::ContentEncoding(HeaderValue::from_static("gzip")),
                Mismatch::ContentEncoding(HeaderValue::from_static("br")),
                "the partial response is encoded",
            ),
            (
                Mismatch::Length {
                    expected: 30,
                    got: 31,
                },
                Mismatch::Length {
                    expected: 4096,
                    got: 12,
                },
                "the body's bytes do not add up to its announced length",
            ),
        ];
        for (one, other, text) in cases {
            assert_eq!(one.to_string(), text);
            assert_eq!(
                message(one.clone(), 10),
                format!("cannot resume the body: {text}")
            );
            assert_eq!(message(one, 10), message(other, 4096));
        }
        let err = ResumeMismatch::new(range(10, "bytes 0-29/30"), 10);
        assert_eq!(err.received(), 10);
        assert!(matches!(
            err.mismatch(),
            Mismatch::ContentRange { start: 10, .. }
        ));
        assert_eq!(
            format!(
                "{:>32}",
                Mismatch::ContentEncoding(HeaderValue::from_static("br"))
            ),
            " the partial response is encoded"
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
