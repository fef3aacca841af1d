//! Writing and reading a remaining budget as a header value.

use http::{HeaderName, HeaderValue};
use std::time::Duration;

/// `x-envoy-expected-rq-timeout-ms`: the budget in whole milliseconds
/// ([`TimeoutFormat::Millis`]), as Envoy sends it to an upstream.
pub const EXPECTED_RQ_TIMEOUT_MS: HeaderName =
    HeaderName::from_static("x-envoy-expected-rq-timeout-ms");

/// `grpc-timeout`: the budget in gRPC's format ([`TimeoutFormat::Grpc`]).
pub const GRPC_TIMEOUT: HeaderName = HeaderName::from_static("grpc-timeout");

/// How a remaining budget is written in a header value.
///
/// # Example
///
/// ```
/// use http_resilience::propagate::{TimeoutFormat};
/// use std::time::Duration;
///
/// let budget = Duration::from_millis(1500);
/// assert_eq!(TimeoutFormat::Millis.format(budget), "1500");
/// assert_eq!(TimeoutFormat::Grpc.format(budget), "1500000u");
///
/// let value = TimeoutFormat::Grpc.format(budget);
/// assert_eq!(TimeoutFormat::Grpc.parse(&value), Ok(budget));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TimeoutFormat {
    /// A decimal integer of milliseconds, as Envoy's
    /// `x-envoy-expected-rq-timeout-ms`.
    ///
    /// Written rounded down to the millisecond, except that a budget under
    /// one millisecond is written `1`, never `0`: Envoy reads `0` as no
    /// timeout at all. At most `u64::MAX` (some 584 million years), so that
    /// every value written fits the 64-bit integer that readers such as Envoy
    /// parse. Read as ASCII digits only: no sign, no fraction, no inner
    /// whitespace, and a value above `u64::MAX` is an error.
    Millis,
    /// gRPC's `grpc-timeout`: an ASCII integer of one to eight digits followed
    /// by a unit, `H` (hours), `M` (minutes), `S` (seconds), `m`
    /// (milliseconds), `u` (microseconds) or `n` (nanoseconds).
    ///
    /// Written in the **finest unit whose value fits in eight digits**, with
    /// the value rounded down in that unit. The units are each a multiple of
    /// the next finer one, so this is the most exact value the format can
    /// carry, and it never promises the server more time than is left:
    ///
    /// - a budget under 100 ms is written exactly, in nanoseconds
    ///   (`250µs` is `250000n`, `1ns` is `1n`);
    /// - a longer one loses less than one part in 100 000
    ///   (`1500ms` is `1500000u`, two hours `7200000m`), and its value has at
    ///   least six digits, so it is never rounded down to `0`;
    /// - a budget beyond `99999999H` (some 11 400 years) is written as
    ///   `99999999H`.
    ///
    /// As with [`Millis`](Self::Millis), `0` is never written: Envoy reads a
    /// `grpc-timeout` of `0` as no timeout (and rounds `1n` up to 1 ms).
    ///
    /// This is the rule of grpc-go's `encodeTimeout`, except that grpc-go rounds
    /// up and this rounds down. Read strictly: one to eight digits, one of the
    /// six units, nothing else.
    Grpc,
}

// ===== impl TimeoutFormat =====

impl TimeoutFormat {
    /// The smallest budget the format can carry: 1 ms for
    /// [`Millis`](Self::Millis), 1 ns for [`Grpc`](Self::Grpc).
    /// [`format`](Self::format) writes no budget as less.
    ///
    /// # Example
    ///
    /// ```
    /// use http_resilience::propagate::TimeoutFormat;
    /// use std::time::Duration;
    ///
    /// assert_eq!(TimeoutFormat::Millis.smallest_unit(), Duration::from_millis(1));
    /// assert_eq!(TimeoutFormat::Grpc.smallest_unit(), Duration::from_nanos(1));
    /// ```
    pub const fn smallest_unit(self) -> Duration {
        match self {
            TimeoutFormat::Millis => Duration::from_millis(1),
            TimeoutFormat::Grpc => Duration::from_nanos(1),
        }
    }

    /// Writes `remaining` in this format, rounded down as [`TimeoutFormat`] describes,
    /// but never below the format's [smallest unit](TimeoutFormat::smallest_unit).
    ///
    /// Never fails, and never writes `0`, which upstreams such as Envoy read as
    /// no timeout at all: a budget under the smallest unit is written as that
    /// unit (`1` millisecond, `1n`), and so is a zero budget. A budget too large
    /// for the format is written as the largest value the format allows.
    ///
    /// The layers that send a budget
    /// ([`PropagateDeadline`](super::PropagateDeadline),
    /// [`ResiliencePolicy::propagating`](crate::ResiliencePolicy::propagating)) write it with
    /// this function, and never send a budget whose deadline has passed: that
    /// attempt ends with the deadline's error instead.
    ///
    /// # Example
    ///
    /// ```
    /// use http_resilience::propagate::{TimeoutFormat};
    /// use std::time::Duration;
    ///
    /// let two_hours = Duration::from_secs(7200);
    /// assert_eq!(TimeoutFormat::Millis.format(two_hours), "7200000");
    /// assert_eq!(TimeoutFormat::Grpc.format(two_hours), "7200000m");
    ///
    /// // Under one unit, rounded up to it.
    /// let tiny = Duration::from_micros(999);
    /// assert_eq!(TimeoutFormat::Millis.format(tiny), "1");
    /// assert_eq!(TimeoutFormat::Grpc.format(tiny), "999000n");
    /// assert_eq!(TimeoutFormat::Grpc.format(Duration::ZERO), "1n");
    /// ```
    pub fn format(self, remaining: Duration) -> HeaderValue {
        // NOTE: the one rounding rule of every budget the crate writes: `0` reads
        // as "no limit" upstream, so nothing is written below one unit.
        let remaining = remaining.max(self.smallest_unit());
        match self {
            TimeoutFormat::Millis => {
                let millis = u64::try_from(remaining.as_millis()).unwrap_or(u64::MAX);
                HeaderValue::from(millis)
            }
            TimeoutFormat::Grpc => {
                let nanos = remaining.as_nanos();
                let (value, unit) = GRPC_UNITS
                    .iter()
                    .map(|&(unit, length)| (nanos / length, unit))
                    .find(|&(value, _)| value <= u128::from(GRPC_MAX_VALUE))
                    .unwrap_or((u128::from(GRPC_MAX_VALUE), b'H'));
                let mut text = value.to_string();
                text.push(char::from(unit));
                // NOTE: digits and an ASCII letter are always a valid header
                // value, so the fallback is never taken; it spares a panic path.
                HeaderValue::from_str(&text).unwrap_or(GRPC_MAX)
            }
        }
    }
}

/// The largest value gRPC allows before the unit: eight digits.
const GRPC_MAX_VALUE: u64 = 99_999_999;

/// The largest value gRPC allows, in its coarsest unit.
const GRPC_MAX: HeaderValue = HeaderValue::from_static("99999999H");

/// gRPC's units, finest first, with their length in nanoseconds.
pub(super) const GRPC_UNITS: [(u8, u128); 6] = [
    (b'n', 1),
    (b'u', 1_000),
    (b'm', 1_000_000),
    (b'S', 1_000_000_000),
    (b'M', 60 * 1_000_000_000),
    (b'H', 3_600 * 1_000_000_000),
];
