//! `Retry-After` (RFC 9110, section 10.2.3): how long the server asks the
//! client to wait.
//!
//! The value is either a number of seconds (`Retry-After: 120`) or an
//! HTTP-date (`Retry-After: Fri, 31 Dec 1999 23:59:59 GMT`). A date is turned
//! into a delay against the response's own `Date` header when it has a valid
//! one, so that a server whose clock is off from the client's still gets the
//! wait it meant; otherwise against the client's clock. A date already past
//! means "now". Anything else is malformed, and the caller falls back to its
//! backoff. The obsolete forms of the date (RFC 850's and asctime's) are read
//! too; RFC 850's two-digit year is read as 2000 to 2069 or 1970 to 1999, so a
//! date 44 years ahead or more, which RFC 9110 would read in this century, is
//! malformed (no retryer waits that long anyway).
//!
//! # Example
//!
//! ```
//! use http::HeaderMap;
//! use http_resilience::policy::retry_after;
//! use std::time::{Duration, SystemTime};
//!
//! let mut headers = HeaderMap::new();
//! headers.insert("retry-after", "120".parse().unwrap());
//! assert_eq!(retry_after::delay(&headers, SystemTime::now()), Some(Ok(Duration::from_secs(120))));
//!
//! // The server's clock is an hour ahead of the client's: its own `Date`
//! // header keeps the 30 s it meant.
//! headers.insert("retry-after", "Sun, 06 Nov 1994 09:49:07 GMT".parse().unwrap());
//! headers.insert("date", "Sun, 06 Nov 1994 09:48:37 GMT".parse().unwrap());
//! let client_now = httpdate::parse_http_date("Sun, 06 Nov 1994 08:48:37 GMT").unwrap();
//! assert_eq!(retry_after::delay(&headers, client_now), Some(Ok(Duration::from_secs(30))));
//! ```

use http::{header, HeaderMap, HeaderValue};
use std::{
    error::Error,
    fmt,
    time::{Duration, SystemTime},
};

/// A parsed `Retry-After` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RetryAfter {
    /// A number of seconds.
    Delay(Duration),
    /// An instant, by the server's clock.
    Date(SystemTime),
}

// ===== impl RetryAfter =====

impl RetryAfter {
    /// Parses one header value.
    ///
    /// # Errors
    ///
    /// [`InvalidRetryAfter`] when the value is neither a number of seconds
    /// nor an HTTP-date (a negative number, a fraction, garbage).
    pub(crate) fn parse(value: &HeaderValue) -> Result<Self, InvalidRetryAfter> {
        let text = value.to_str().map_err(|_| InvalidRetryAfter)?.trim();
        if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
            // NOTE: a value too large for u64 saturates; the retryer caps it.
            let seconds = text.parse::<u64>().unwrap_or(u64::MAX);
            return Ok(RetryAfter::Delay(Duration::from_secs(seconds)));
        }
        httpdate::parse_http_date(text)
            .map(RetryAfter::Date)
            .map_err(|_| InvalidRetryAfter)
    }

    /// The wait this value asks for, measured from `now`; a date in the
    /// past asks for no wait.
    pub(crate) fn delay_from(&self, now: SystemTime) -> Duration {
        match self {
            RetryAfter::Delay(delay) => *delay,
            RetryAfter::Date(at) => at.duration_since(now).unwrap_or(Duration::ZERO),
        }
    }
}

/// The wait asked for by the `Retry-After` header in `headers`, if there is
/// one.
///
/// A date is measured from the `Date` header of the same response when it is
/// valid (both instants are then on the server's clock), otherwise from
/// `now`. Returns `Some(Err(_))` for a malformed value.
pub fn delay(headers: &HeaderMap, now: SystemTime) -> Option<Result<Duration, InvalidRetryAfter>> {
    let value = headers.get(header::RETRY_AFTER)?;
    let parsed = match RetryAfter::parse(value) {
        Ok(parsed) => parsed,
        Err(err) => return Some(Err(err)),
    };
    let reference = match parsed {
        RetryAfter::Date(_) => headers
            .get(header::DATE)
            .and_then(|date| date.to_str().ok())
            .and_then(|date| httpdate::parse_http_date(date).ok())
            .unwrap_or(now),
        RetryAfter::Delay(_) => now,
    };
    Some(Ok(parsed.delay_from(reference)))
}

/// A `Retry-After` value that is neither a number of seconds nor an
/// HTTP-date.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InvalidRetryAfter;

impl fmt::Display for InvalidRetryAfter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("Retry-After is neither a number of seconds nor an HTTP-date")
    }
}

impl Error for InvalidRetryAfter {}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(date: &str) -> SystemTime {
        httpdate::parse_http_date(date).unwrap()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs
            .iter()
            .map(|(name, value)| {
                (
                    header::HeaderName::from_static(name),
                    HeaderValue::from_str(value).unwrap(),
                )
            })
            .collect()
    }

    const NOW: &str = "Sun, 06 Nov 1994 08:49:37 GMT";

    #[test]
    fn reads_seconds() {
        let h = headers(&[("retry-after", "  7 ")]);
        assert_eq!(delay(&h, at(NOW)), Some(Ok(Duration::from_secs(7))));
        let h = headers(&[("retry-after", "0")]);
        assert_eq!(delay(&h, at(NOW)), Some(Ok(Duration::ZERO)));
    }

    #[test]
    fn saturates_enormous_seconds() {
        let h = headers(&[("retry-after", "99999999999999999999999999")]);
        assert_eq!(delay(&h, at(NOW)), Some(Ok(Duration::from_secs(u64::MAX))));
    }

    #[test]
    fn reads_dates_against_the_clock() {
        let h = headers(&[("retry-after", "Sun, 06 Nov 1994 08:50:07 GMT")]);
        assert_eq!(delay(&h, at(NOW)), Some(Ok(Duration::from_secs(30))));
    }

    #[test]
    fn a_past_date_means_now() {
        let h = headers(&[("retry-after", "Sun, 06 Nov 1994 08:00:00 GMT")]);
        assert_eq!(delay(&h, at(NOW)), Some(Ok(Duration::ZERO)));
    }

    #[test]
    fn a_date_is_measured_against_the_servers_own_date() {
        // The server's clock runs 10 minutes behind the client's.
        let h = headers(&[
            ("retry-after", "Sun, 06 Nov 1994 08:40:07 GMT"),
            ("date", "Sun, 06 Nov 1994 08:39:37 GMT"),
        ]);
        assert_eq!(delay(&h, at(NOW)), Some(Ok(Duration::from_secs(30))));
        // A malformed Date header falls back to the client's clock.
        let h = headers(&[
            ("retry-after", "Sun, 06 Nov 1994 08:50:07 GMT"),
            ("date", "yesterday"),
        ]);
        assert_eq!(delay(&h, at(NOW)), Some(Ok(Duration::from_secs(30))));
    }

    #[test]
    fn rejects_malformed_values() {
        for bad in ["-5", "1.5", "soon", "", "12s", "Sun, 06 Nov 1994"] {
            let h = headers(&[("retry-after", bad)]);
            assert_eq!(delay(&h, at(NOW)), Some(Err(InvalidRetryAfter)), "{bad:?}");
        }
        let mut h = HeaderMap::new();
        h.insert(
            header::RETRY_AFTER,
            HeaderValue::from_bytes(b"\xff").unwrap(),
        );
        assert_eq!(delay(&h, at(NOW)), Some(Err(InvalidRetryAfter)));
        assert_eq!(
            InvalidRetryAfter.to_string(),
            "Retry-After is neither a number of seconds nor an HTTP-date"
        );
    }

    #[test]
    fn absent_is_none() {
        assert_eq!(delay(&HeaderMap::new(), at(NOW)), None);
    }

    // ===== nonsense refused =====

    use crate::policy::retry_after;
    use crate::propagate::TimeoutFormat;

    #[test]
    fn malformed_retry_after_is_refused() {
        for text in [
            "",
            "-1",
            "1.5",
            "soon",
            "Sun, 32 Foo 1994 99:99:99 GMT",
            "0x10",
        ] {
            let value = HeaderValue::from_str(text).unwrap();
            assert_eq!(
                RetryAfter::parse(&value),
                Err(retry_after::InvalidRetryAfter),
                "{text:?}"
            );
        }
        // A number too large for the clock asks for the longest wait; the
        // retryer caps it.
        let huge = HeaderValue::from_static("99999999999999999999999999");
        assert_eq!(
            RetryAfter::parse(&huge),
            Ok(RetryAfter::Delay(Duration::from_secs(u64::MAX)))
        );
    }

    #[test]
    fn header_parsers_answer_every_byte_string() {
        let values: [&[u8]; 8] = [
            b"",
            b" ",
            b"-1",
            b"1e9",
            b"\xff\xfe",
            b"99999999999999999999999999H",
            b"1.5S",
            b"Sun, 32 Foo 1994 99:99:99 GMT",
        ];
        for bytes in values {
            let value = HeaderValue::from_bytes(bytes).unwrap();
            let _ = TimeoutFormat::Millis.parse(&value);
            let _ = TimeoutFormat::Grpc.parse(&value);
            let mut headers = HeaderMap::new();
            headers.insert(http::header::RETRY_AFTER, value.clone());
            headers.insert(http::header::DATE, value);
            let _ = retry_after::delay(&headers, SystemTime::UNIX_EPOCH);
        }
    }
}
