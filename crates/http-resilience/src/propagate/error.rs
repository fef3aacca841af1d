//! Error types

use std::{error::Error, fmt};

/// A timeout header value that does not match its format.
///
/// [`TimeoutFormat::parse`](super::TimeoutFormat::parse) and
/// [`inherit_deadline`](super::inherit_deadline) return it. It keeps the value
/// (escaped, and cut after 64 bytes) and what is wrong with it; the message
/// says what is wrong in a phrase that is the same whatever the value
/// (`invalid timeout: unknown unit, expected H, M, S, m, u or n`), and the
/// value is [`value`](Self::value).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidTimeoutHeader {
    value: String,
    problem: TimeoutProblem,
}

/// What is wrong with a timeout header value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TimeoutProblem {
    /// Nothing but optional whitespace.
    Empty,
    /// Bytes outside ASCII.
    NotAscii,
    /// Whitespace inside the value.
    Whitespace,
    /// A minus sign.
    Negative,
    /// Something other than decimal digits where the number belongs.
    NotANumber,
    /// A number of milliseconds above `u64::MAX`.
    OutOfRange,
    /// A gRPC value of more than eight digits.
    TooManyDigits,
    /// A gRPC unit with no number before it.
    NoDigits,
    /// A gRPC number with no unit after it.
    MissingUnit,
    /// A gRPC unit other than `H`, `M`, `S`, `m`, `u` and `n`.
    UnknownUnit(char),
}

// ===== impl InvalidTimeoutHeader =====

impl InvalidTimeoutHeader {
    /// The most bytes of the value kept for the message.
    const KEPT: usize = 64;

    /// An error for the header value `value`, with `problem`.
    ///
    /// Public so that tests and mocks can produce the same error the parser
    /// does.
    pub(crate) fn new(value: &[u8], problem: TimeoutProblem) -> Self {
        let mut kept = value
            .get(..Self::KEPT)
            .unwrap_or(value)
            .escape_ascii()
            .to_string();
        if value.len() > Self::KEPT {
            kept.push_str("...");
        }
        Self {
            value: kept,
            problem,
        }
    }

    /// The value, escaped as in the message (non-printable bytes as `\xNN`)
    /// and cut after 64 bytes.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// What is wrong with the value.
    pub const fn problem(&self) -> TimeoutProblem {
        self.problem
    }
}

impl fmt::Display for InvalidTimeoutHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&format!("invalid timeout: {}", self.problem))
    }
}

impl Error for InvalidTimeoutHeader {}

// ===== impl TimeoutProblem =====

impl fmt::Display for TimeoutProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimeoutProblem::Empty => f.pad("empty"),
            TimeoutProblem::NotAscii => f.pad("not ASCII"),
            TimeoutProblem::Whitespace => f.pad("whitespace inside the value"),
            TimeoutProblem::Negative => f.pad("negative"),
            TimeoutProblem::NotANumber => f.pad("not a decimal integer"),
            TimeoutProblem::OutOfRange => f.pad("more milliseconds than a u64 holds"),
            TimeoutProblem::TooManyDigits => f.pad("more than 8 digits"),
            TimeoutProblem::NoDigits => f.pad("no digits before the unit"),
            TimeoutProblem::MissingUnit => f.pad("missing unit, expected H, M, S, m, u or n"),
            TimeoutProblem::UnknownUnit(_) => f.pad("unknown unit, expected H, M, S, m, u or n"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_has_its_message() {
        let cases = [
            (TimeoutProblem::Empty, "empty"),
            (TimeoutProblem::NotAscii, "not ASCII"),
            (TimeoutProblem::Whitespace, "whitespace inside the value"),
            (TimeoutProblem::Negative, "negative"),
            (TimeoutProblem::NotANumber, "not a decimal integer"),
            (
                TimeoutProblem::OutOfRange,
                "more milliseconds than a u64 holds",
            ),
            (TimeoutProblem::TooManyDigits, "more than 8 digits"),
            (TimeoutProblem::NoDigits, "no digits before the unit"),
            (
                TimeoutProblem::MissingUnit,
                "missing unit, expected H, M, S, m, u or n",
            ),
            (
                TimeoutProblem::UnknownUnit('x'),
                "unknown unit, expected H, M, S, m, u or n",
            ),
        ];
        for (problem, message) in cases {
            assert_eq!(problem.to_string(), message);
            let err = InvalidTimeoutHeader::new(b"v", problem);
            assert_eq!(err.to_string(), format!("invalid timeout: {message}"));
            let other = InvalidTimeoutHeader::new(b"another value", problem);
            assert_eq!(other.to_string(), err.to_string());
            assert_eq!(err.problem(), problem);
        }
    }

    #[test]
    fn the_value_is_escaped_and_cut() {
        let err = InvalidTimeoutHeader::new("é\"1".as_bytes(), TimeoutProblem::NotAscii);
        assert_eq!(err.value(), r#"\xc3\xa9\"1"#);
        assert_eq!(err.to_string(), "invalid timeout: not ASCII");

        let long = [b'7'; 100];
        let err = InvalidTimeoutHeader::new(&long, TimeoutProblem::OutOfRange);
        assert_eq!(err.value(), format!("{}...", "7".repeat(64)));
    }
}
