//! Verdicts: what a decoder makes of one attempt's outcome, and why.

use crate::FailureKind;
use http::StatusCode;
use std::{fmt, time::Duration};

/// What a [`Decoder`](super::Decoder) makes of one attempt's outcome.
///
/// Whatever the verdict, the outcome itself is never changed: `Accept` and
/// `Fail` both return it to the caller as it is. They differ in meaning (a
/// good outcome, or a failure not worth retrying), which logs, metrics and
/// retry budgets see. `Retry` only *asks* for another attempt: the policy's
/// [`Retryer`](super::Retryer) decides whether one is made and when.
///
/// # Example
///
/// ```
/// use http::StatusCode;
/// use http_resilience::policy::{Reason, Verdict};
/// use std::time::Duration;
///
/// let verdict = Verdict::retry(StatusCode::SERVICE_UNAVAILABLE).after(Duration::from_secs(2));
/// assert!(verdict.is_retry());
/// assert_eq!(verdict.server_delay(), Some(Duration::from_secs(2)));
/// assert_eq!(verdict.reason(), Some(Reason::Status(StatusCode::SERVICE_UNAVAILABLE)));
/// assert_eq!(verdict.to_string(), "retry (503 Service Unavailable), the server asked for 2s");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Verdict {
    /// A good outcome: return it to the caller.
    Accept,
    /// Try again if the retryer allows it.
    Retry {
        /// A delay the server asked for (for example with `Retry-After`); it
        /// wins over the retryer's backoff, capped at the retryer's maximum.
        after: Option<Duration>,
        /// Why the outcome is worth another attempt.
        reason: Reason,
    },
    /// A failure not worth retrying: return it to the caller as it is.
    Fail {
        /// Why the outcome is a failure.
        reason: Reason,
    },
}

// ===== impl Verdict =====

impl Verdict {
    /// Ask for another attempt, for `reason`, after the retryer's backoff.
    pub fn retry(reason: impl Into<Reason>) -> Self {
        Verdict::Retry {
            after: None,
            reason: reason.into(),
        }
    }

    /// A failure not worth retrying, for `reason`.
    pub fn fail(reason: impl Into<Reason>) -> Self {
        Verdict::Fail {
            reason: reason.into(),
        }
    }

    /// The same verdict with a delay the server asked for; only a `Retry`
    /// carries one, other verdicts are returned unchanged.
    #[must_use]
    pub fn after(self, delay: Duration) -> Self {
        match self {
            Verdict::Retry { reason, .. } => Verdict::Retry {
                after: Some(delay),
                reason,
            },
            other => other,
        }
    }

    /// Whether this verdict asks for another attempt.
    pub const fn is_retry(&self) -> bool {
        matches!(self, Verdict::Retry { .. })
    }

    /// Whether this verdict accepts the outcome as a good one.
    pub const fn is_accept(&self) -> bool {
        matches!(self, Verdict::Accept)
    }

    /// The delay the server asked for, if any.
    pub const fn server_delay(&self) -> Option<Duration> {
        match self {
            Verdict::Retry { after, .. } => *after,
            _ => None,
        }
    }

    /// Whether this retries an attempt a guard turned away (a decoder such as
    /// [`WaitForProbe`](crate::breaker::WaitForProbe) asks for it): one that
    /// was never sent, whose wait is the guard's (`after`), not a backoff, and
    /// which costs no retry-budget token.
    pub(crate) const fn resends_unsent(&self) -> bool {
        matches!(self, Verdict::Retry { reason: Reason::Failure(kind), .. } if kind.is_turned_away())
    }

    /// Why the decoder judged so; `None` for `Accept`.
    pub const fn reason(&self) -> Option<Reason> {
        match self {
            Verdict::Accept => None,
            Verdict::Retry { reason, .. } | Verdict::Fail { reason } => Some(*reason),
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Verdict::Accept => "accept".to_owned(),
            Verdict::Retry {
                after: None,
                reason,
            } => format!("retry ({reason})"),
            Verdict::Retry {
                after: Some(delay),
                reason,
            } => format!("retry ({reason}), the server asked for {delay:?}"),
            Verdict::Fail { reason } => format!("fail ({reason})"),
        };
        f.pad(&text)
    }
}

/// Why a decoder judged an outcome as it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// The response status.
    Status(StatusCode),
    /// A failure of this kind (see [`FailureKind::of`]).
    Failure(FailureKind),
    /// An error the decoder does not classify.
    Error,
    /// A response header, named here, said so.
    Header(&'static str),
    /// The gRPC status of a response (see
    /// [`GrpcDecoder`](super::GrpcDecoder)): its `grpc-status`, or the code
    /// gRPC reads from an HTTP status that came without one.
    GrpcStatus(i32),
    /// A reason given by a decoder of one's own.
    Custom(&'static str),
}

impl From<StatusCode> for Reason {
    fn from(status: StatusCode) -> Self {
        Reason::Status(status)
    }
}

impl From<FailureKind> for Reason {
    fn from(kind: FailureKind) -> Self {
        Reason::Failure(kind)
    }
}

impl From<&'static str> for Reason {
    fn from(text: &'static str) -> Self {
        Reason::Custom(text)
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Status(status) => f.pad(&status.to_string()),
            Reason::Failure(kind) => fmt::Display::fmt(kind, f),
            Reason::Error => f.pad("error"),
            Reason::Header(name) => f.pad(&format!("header {name}")),
            Reason::GrpcStatus(code) => match super::grpc_wire::grpc_code_name(*code) {
                Some(name) => f.pad(&format!("grpc-status {code} {name}")),
                None => f.pad(&format!("grpc-status {code}")),
            },
            Reason::Custom(text) => f.pad(text),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_display_their_reason() {
        let cases = [
            (Verdict::Accept, "accept"),
            (
                Verdict::retry(StatusCode::TOO_MANY_REQUESTS),
                "retry (429 Too Many Requests)",
            ),
            (
                Verdict::retry(FailureKind::ConnectRefused).after(Duration::from_millis(1500)),
                "retry (connection refused), the server asked for 1.5s",
            ),
            (Verdict::fail(StatusCode::NOT_FOUND), "fail (404 Not Found)"),
            (Verdict::fail(Reason::Error), "fail (error)"),
            (
                Verdict::retry(Reason::Header("x-should-retry")),
                "retry (header x-should-retry)",
            ),
            (Verdict::fail("business rule"), "fail (business rule)"),
            (
                Verdict::retry(Reason::GrpcStatus(14)),
                "retry (grpc-status 14 UNAVAILABLE)",
            ),
            (
                Verdict::fail(Reason::GrpcStatus(99)),
                "fail (grpc-status 99)",
            ),
        ];
        for (verdict, text) in cases {
            assert_eq!(verdict.to_string(), text);
        }
    }

    #[test]
    fn only_a_retry_carries_a_delay() {
        let second = Duration::from_secs(1);
        assert_eq!(Verdict::Accept.after(second), Verdict::Accept);
        assert_eq!(Verdict::fail("x").after(second).server_delay(), None);
        assert_eq!(
            Verdict::retry("x").after(second).server_delay(),
            Some(second)
        );
        assert_eq!(Verdict::Accept.reason(), None);
        assert!(Verdict::Accept.is_accept() && !Verdict::Accept.is_retry());
    }
}
