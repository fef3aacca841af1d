//! Reading a budget a request brought, in the formats the budget is sent in.

use super::{
    error::{InvalidTimeoutHeader, TimeoutProblem},
    format::GRPC_UNITS,
    TimeoutFormat,
};
use http::HeaderValue;
use std::time::Duration;

impl TimeoutFormat {
    /// Reads a budget written in this format.
    ///
    /// Spaces and tabs around the value are ignored (they are optional whitespace
    /// in HTTP, not part of the value); anything else that does not match the
    /// format exactly is an error. Never panics, whatever the bytes.
    ///
    /// # Errors
    ///
    /// [`InvalidTimeoutHeader`] when the value is empty, not ASCII, holds inner
    /// whitespace, is negative, is not a decimal integer, is out of range
    /// ([`Millis`](TimeoutFormat::Millis) above `u64::MAX`), or, for
    /// [`Grpc`](TimeoutFormat::Grpc), has more than eight digits, no digits, or a
    /// missing or unknown unit.
    ///
    /// # Example
    ///
    /// ```
    /// use http::HeaderValue;
    /// use http_resilience::propagate::{TimeoutFormat};
    /// use std::time::Duration;
    ///
    /// let value = HeaderValue::from_static("2S");
    /// assert_eq!(TimeoutFormat::Grpc.parse(&value), Ok(Duration::from_secs(2)));
    ///
    /// let err = TimeoutFormat::Grpc.parse(&HeaderValue::from_static("2s")).unwrap_err();
    /// assert_eq!(err.to_string(), "invalid timeout: unknown unit, expected H, M, S, m, u or n");
    /// assert_eq!(err.value(), "2s");
    /// ```
    pub fn parse(self, value: &HeaderValue) -> Result<Duration, InvalidTimeoutHeader> {
        let raw = value.as_bytes();
        let fail = |problem| Err(InvalidTimeoutHeader::new(raw, problem));
        let text = trim_whitespace(raw);
        if text.is_empty() {
            return fail(TimeoutProblem::Empty);
        }
        if !text.is_ascii() {
            return fail(TimeoutProblem::NotAscii);
        }
        if text.iter().any(|b| b.is_ascii_whitespace()) {
            return fail(TimeoutProblem::Whitespace);
        }
        if text.first() == Some(&b'-') {
            return fail(TimeoutProblem::Negative);
        }
        match self {
            TimeoutFormat::Millis => match parse_digits(text) {
                Ok(millis) => Ok(Duration::from_millis(millis)),
                Err(problem) => fail(problem),
            },
            TimeoutFormat::Grpc => {
                let Some((&unit, digits)) = text.split_last() else {
                    return fail(TimeoutProblem::Empty);
                };
                if unit.is_ascii_digit() {
                    return fail(TimeoutProblem::MissingUnit);
                }
                let Some(&(_, length)) = GRPC_UNITS.iter().find(|&&(u, _)| u == unit) else {
                    return fail(TimeoutProblem::UnknownUnit(char::from(unit)));
                };
                if digits.is_empty() {
                    return fail(TimeoutProblem::NoDigits);
                }
                let value = match parse_digits(digits) {
                    Ok(value) if digits.len() <= 8 => value,
                    Ok(_) => return fail(TimeoutProblem::TooManyDigits),
                    Err(TimeoutProblem::OutOfRange) => return fail(TimeoutProblem::TooManyDigits),
                    Err(problem) => return fail(problem),
                };
                // NOTE: at most 99 999 999 hours, about 3.6e23 ns: no overflow in a
                // u128, and the seconds (3.6e11) fit a u64.
                let nanos = u128::from(value) * length;
                let secs = u64::try_from(nanos / 1_000_000_000).unwrap_or(u64::MAX);
                let subsec = u32::try_from(nanos % 1_000_000_000).unwrap_or(0);
                Ok(Duration::new(secs, subsec))
            }
        }
    }
}

/// `bytes` without the spaces and tabs around them.
fn trim_whitespace(bytes: &[u8]) -> &[u8] {
    let is_ows = |b: &u8| *b == b' ' || *b == b'\t';
    let start = bytes.iter().position(|b| !is_ows(b)).unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !is_ows(b))
        .map_or(start, |i| i + 1);
    // NOTE: `start <= end <= bytes.len()`: the last byte kept is at or after
    // the first, and when none is kept both are `start`.
    bytes.get(start..end).unwrap_or_default()
}

/// A non-empty run of ASCII digits as a `u64`.
fn parse_digits(digits: &[u8]) -> Result<u64, TimeoutProblem> {
    if digits.is_empty() {
        return Err(TimeoutProblem::NoDigits);
    }
    if !digits.iter().all(u8::is_ascii_digit) {
        return Err(TimeoutProblem::NotANumber);
    }
    digits
        .iter()
        .try_fold(0u64, |acc, &b| {
            acc.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        })
        .ok_or(TimeoutProblem::OutOfRange)
}
