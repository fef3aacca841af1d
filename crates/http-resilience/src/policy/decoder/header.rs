//! Retrying on a response header.

use super::{Decoder, Reason, Verdict};
use http::{HeaderName, HeaderValue};
use std::{error::Error, fmt};

/// Retries a response that carries a header with a given value, as in
/// `x-should-retry: true`; any other outcome is accepted, so that it combines
/// with other decoders through [`Or`](super::Or).
///
/// # Example
///
/// ```
/// use http::Response;
/// use http_resilience::policy::{Decoder, RetryOnHeader};
///
/// let decoder = RetryOnHeader::new("x-should-retry", "true")?;
/// let asked = Response::builder().header("x-should-retry", "TRUE").body(())?;
/// assert!(Decoder::<(), ()>::decode(&decoder, &Ok(asked)).is_retry());
///
/// let err = RetryOnHeader::new("X-Should-Retry", "true").unwrap_err();
/// assert_eq!(err.to_string(), "header name must be a lowercase token");
/// assert_eq!(err.name(), "X-Should-Retry");
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
    /// or `value` not a valid header value.
    pub fn new(name: &'static str, value: &str) -> Result<Self, InvalidHeader> {
        let invalid = |part| InvalidHeader {
            name,
            value: value.to_owned(),
            part,
        };
        let header = match HeaderName::from_bytes(name.as_bytes()) {
            Ok(header) if header.as_str() == name => header,
            _ => return Err(invalid(Part::Name)),
        };
        let value = HeaderValue::from_str(value).map_err(|_| invalid(Part::Value))?;
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
    pub(super) part: Part,
}

/// The part of a header that [`InvalidHeader`] rejects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part {
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
}

impl fmt::Display for InvalidHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // NOTE: the name and the value are the accessors'; the message is
        // the same whatever they are.
        f.pad(match self.part {
            Part::Name => "header name must be a lowercase token",
            Part::Value => "header value must hold no control characters",
        })
    }
}

impl Error for InvalidHeader {}
