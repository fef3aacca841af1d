//! Retry events (see [`CallEvent`]).

use super::Verdict;
use crate::{errors::AsError, telemetry::Listener, FailureKind, Stop};
use std::{fmt, time::Duration};

/// Where the wait before a retry came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WaitSource {
    /// The retryer's own backoff.
    Backoff,
    /// A delay the server asked for (`Retry-After`, gRPC's pushback), as the
    /// retryer allows it.
    Server,
    /// No wait: the next attempt starts at once.
    None,
}

impl fmt::Display for WaitSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            WaitSource::Backoff => "backoff",
            WaitSource::Server => "asked by the server",
            WaitSource::None => "none",
        })
    }
}

/// What made a hedge start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HedgeTrigger {
    /// The hedging delay passed with no outcome.
    Delay(Duration),
    /// An attempt reached its attempt limit; it goes on.
    AttemptTimeout(Duration),
    /// An attempt ended with an outcome that is not fatal (the decoder's
    /// retry verdict, given here).
    NonFatal(Verdict),
}

impl fmt::Display for HedgeTrigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HedgeTrigger::Delay(delay) => write!(f, "no outcome after {delay:?}"),
            HedgeTrigger::AttemptTimeout(limit) => {
                write!(f, "an attempt passed its limit of {limit:?}")
            }
            HedgeTrigger::NonFatal(verdict) => write!(f, "an attempt ended: {verdict}"),
        }
    }
}

/// Something the retry layer (or the hedge layer, or the combined service)
/// did in a call; a listener hears it as a [`CallEvent`], with the call's
/// context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum RetryEvent {
    /// Attempt `attempt` got a retryable outcome, and another attempt will be
    /// made after `wait`.
    Retry {
        /// The attempt that was judged (1 for the first).
        attempt: u32,
        /// The decoder's verdict on it.
        verdict: Verdict,
        /// The wait before the next attempt.
        wait: Duration,
        /// Where the wait came from.
        source: WaitSource,
        /// The time left before the request's deadline, if it has one.
        remaining: Option<Duration>,
    },
    /// A hedge: another copy of the request was sent while earlier ones are
    /// still in flight (see [`hedge`](crate::hedge)).
    Hedge {
        /// The number of the copy sent (2 for the first hedge).
        attempt: u32,
        /// What made it start.
        trigger: HedgeTrigger,
        /// The attempts in flight, this one included.
        in_flight: u32,
    },
    /// An attempt (or a hedged copy) ended with an outcome; one the caller
    /// or the deadline dropped makes none. What OpenTelemetry's
    /// `http.client.request.duration` is made of.
    AttemptEnd {
        /// The attempt's number (1 for the first).
        attempt: u32,
        /// The decoder's verdict on its outcome.
        verdict: Verdict,
        /// The response's status, when it got one.
        status: Option<http::StatusCode>,
        /// From the attempt's start to its outcome (the response head, or
        /// the error).
        duration: Duration,
        /// The response's protocol version, when it got one (OpenTelemetry's
        /// `network.protocol.version`).
        version: Option<http::Version>,
    },
    /// The retry (or the hedge) is over: the outcome of attempt `attempts`
    /// goes to the caller, accepted or not ([`Stop::Accepted`] for a
    /// success). A retry the budget refused ends the call with
    /// [`Stop::BudgetExhausted`].
    Done {
        /// The attempts made.
        attempts: u32,
        /// The decoder's verdict on the last one.
        verdict: Verdict,
        /// Why no further attempt was made.
        stop: Stop,
    },
    /// A call the combined service ([`Resilience`](crate::Resilience), and so
    /// the gRPC layers) drives has its output, whatever ended it: an
    /// outcome the retry returned, the deadline, a service that could not
    /// get ready. What `http_resilience.call.duration` is made of.
    ///
    /// Under the three layers and hedging, the deadline is a layer outside
    /// the retry that drops it when it runs out: the retry never sees such
    /// an end, and tells of none; a layer outside the deadline sees every
    /// end (as `otel::Metrics::layer` does).
    CallEnd {
        /// The response's status, when the call's output is a response.
        status: Option<http::StatusCode>,
        /// The response's protocol version, likewise.
        version: Option<http::Version>,
        /// The kind of the call's error, when its output is one
        /// ([`FailureKind::Deadline`] for a call its deadline ended).
        failure: Option<FailureKind>,
        /// From the call to its output (the response head, or the error),
        /// every attempt and wait included.
        duration: Duration,
    },
}

// ===== impl RetryEvent =====

impl RetryEvent {
    /// OpenTelemetry's `error.type` of the outcome an
    /// [`AttemptEnd`](Self::AttemptEnd) or a [`CallEnd`](Self::CallEnd)
    /// tells of: the status code for a 4xx or 5xx response; for an error,
    /// the [`FailureKind::name`] of its kind (for an attempt, the kind the
    /// decoder's verdict gives, `_OTHER` when it gives none, as
    /// [`StatusDecoder`](crate::policy::StatusDecoder)'s does). None for a
    /// success, and for the other events.
    pub fn error_type(&self) -> Option<&str> {
        let (verdict, status) = match self {
            RetryEvent::AttemptEnd {
                verdict, status, ..
            } => (*verdict, status.as_ref()),
            RetryEvent::CallEnd {
                status, failure, ..
            } => (
                failure.map_or(Verdict::Accept, Verdict::fail),
                status.as_ref(),
            ),
            _ => return None,
        };
        crate::telemetry::error_type(verdict, status)
    }

    /// The end of a call whose output is `output`, `duration` after it
    /// started.
    pub(crate) fn call_end<T, E: AsError>(
        output: &Result<http::Response<T>, E>,
        duration: Duration,
    ) -> Self {
        let (status, version, failure) = match output {
            Ok(response) => (Some(response.status()), Some(response.version()), None),
            Err(error) => (None, None, Some(FailureKind::of(error))),
        };
        RetryEvent::CallEnd {
            status,
            version,
            failure,
            duration,
        }
    }
}

impl fmt::Display for RetryEvent {
    /// One line per event, for a log or a timeline:
    /// `attempt 1: retry (503 Service Unavailable); waiting 10ms (backoff) before attempt 2, 7.99s left`
    /// or `done after 3 attempts: retries exhausted (last: retry (503 Service Unavailable))`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RetryEvent::Retry {
                attempt,
                verdict,
                wait,
                source,
                remaining,
            } => {
                write!(f, "attempt {attempt}: {verdict}; ")?;
                write_wait(f, attempt.saturating_add(1), wait, source, remaining)
            }
            RetryEvent::Hedge {
                attempt,
                trigger,
                in_flight,
            } => write!(
                f,
                "hedge: attempt {attempt} sent ({trigger}), {in_flight} in flight"
            ),
            RetryEvent::AttemptEnd {
                attempt,
                verdict,
                duration,
                ..
            } => {
                let took = to_the_millisecond(duration);
                write!(f, "attempt {attempt} ended after {took:?}: {verdict}")
            }
            RetryEvent::Done {
                attempts,
                verdict,
                stop,
            } => {
                let plural = if attempts == 1 { "" } else { "s" };
                write!(
                    f,
                    "done after {attempts} attempt{plural}: {stop} (last: {verdict})"
                )
            }
            RetryEvent::CallEnd {
                status,
                failure,
                duration,
                ..
            } => write_call_end(f, status, failure, duration),
        }
    }
}

/// How a call ended: its status, else its failure, after `duration`.
fn write_call_end(
    f: &mut fmt::Formatter<'_>,
    status: Option<http::StatusCode>,
    failure: Option<FailureKind>,
    duration: Duration,
) -> fmt::Result {
    write!(f, "call ended after {:?}: ", to_the_millisecond(duration))?;
    match (status, failure) {
        (Some(status), _) => write!(f, "{status}"),
        (None, Some(failure)) => write!(f, "{failure}"),
        (None, None) => f.write_str("no output"),
    }
}

/// The wait before attempt `next`, and the time left if known.
fn write_wait(
    f: &mut fmt::Formatter<'_>,
    next: u32,
    wait: Duration,
    source: WaitSource,
    remaining: Option<Duration>,
) -> fmt::Result {
    if wait.is_zero() {
        write!(f, "attempt {next} at once")?;
    } else {
        write!(f, "waiting {wait:?} ({source}) before attempt {next}")?;
    }
    match remaining {
        Some(left) => write!(f, ", {:?} left", to_the_millisecond(left)),
        None => Ok(()),
    }
}

/// `duration` to the millisecond below, as a person reads a timeline.
fn to_the_millisecond(duration: Duration) -> Duration {
    Duration::from_millis(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
}

/// A [`RetryEvent`] and the call it belongs to: what the listener of a
/// retry or hedging policy hears, as a [`Listener<CallEvent<'_>>`](Listener);
/// closures `Fn(&CallEvent<'_>)` are such listeners.
///
/// A listener set on a [`RetryPolicy`](crate::retry::RetryPolicy) (or a
/// [`HedgePolicy`](crate::hedge::HedgePolicy)) hears every retry, every end
/// of an attempt with an outcome, and the end of every call, including a
/// retry the budget refused, so that counters can be fed without parsing
/// logs. (Every retry and end is also logged with `tracing` at debug level.)
///
/// A call ended from outside the retry layer makes no `Done`: the caller
/// dropped it, or a [`DeadlineLayer`](crate::DeadlineLayer) around the retry
/// layer ran out, during a wait or during an attempt (its timer wins a tie
/// with the attempt's own limit). The retry layer sees no outcome then; the
/// caller gets `DeadlineExceeded` from the deadline itself. The combined
/// service, which holds the deadline, tells of that end too
/// ([`RetryEvent::CallEnd`]).
///
/// The event borrows the call's context, kept once per call: no listener
/// pays for a copy of it per event.
///
/// # Example
///
/// ```
/// use http_resilience::{policy::{CallEvent, FixedDelay, RetryEvent, StatusDecoder}, retry::RetryPolicy};
/// use std::sync::{atomic::{AtomicU32, Ordering}, Arc};
///
/// let retries = Arc::new(AtomicU32::new(0));
/// let counter = retries.clone();
/// let policy = RetryPolicy::new(StatusDecoder::new([503])?, FixedDelay::new(Default::default(), 2))
///     .map_options(|options| {
///         options.with_listener(move |heard: &CallEvent<'_>| {
///             if let RetryEvent::Retry { .. } = heard.event {
///                 counter.fetch_add(1, Ordering::Relaxed);
///             }
///         })
///     });
/// # let _ = policy;
/// # Ok::<(), http_resilience::BoxError>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct CallEvent<'a> {
    /// The call the event belongs to.
    pub call: &'a CallContext,
    /// What happened.
    pub event: RetryEvent,
}

/// The listener of a retry or hedging policy, as its parts keep it.
pub(crate) type CallListener = dyn for<'a> Listener<CallEvent<'a>>;

/// The call a listener hears of: its method, and the scheme and authority of
/// its first request.
///
/// A call whose policy has a listener keeps one (made once per call; the
/// method and the URI's parts are reference-counted or inline). Its `Debug`
/// shows the method, scheme, host and port, never a user or password the URI
/// carried.
#[derive(Clone)]
pub struct CallContext {
    method: http::Method,
    scheme: Option<http::uri::Scheme>,
    authority: Option<http::uri::Authority>,
}

impl fmt::Debug for CallContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallContext")
            .field("method", &self.method)
            .field("scheme", &self.scheme())
            .field("server_address", &self.server_address())
            .field("server_port", &self.server_port())
            .finish()
    }
}

impl CallContext {
    /// The context of a call whose first attempt is `request`.
    pub(crate) fn of<B>(request: &http::Request<B>) -> Self {
        let uri = request.uri();
        Self {
            method: request.method().clone(),
            scheme: uri.scheme().cloned(),
            authority: uri.authority().cloned(),
        }
    }

    /// The request's method.
    pub const fn method(&self) -> &http::Method {
        &self.method
    }

    /// The URI's scheme, if it has one.
    pub fn scheme(&self) -> Option<&str> {
        self.scheme.as_ref().map(http::uri::Scheme::as_str)
    }

    /// The host of the URI (OpenTelemetry's `server.address`), or `""` for a
    /// URI with none (a path alone, as a tonic client made with `new` sends).
    pub fn server_address(&self) -> &str {
        self.authority
            .as_ref()
            .map_or("", http::uri::Authority::host)
    }

    /// The port of the URI, or its scheme's default (OpenTelemetry's
    /// `server.port`).
    pub fn server_port(&self) -> u16 {
        let explicit = self
            .authority
            .as_ref()
            .and_then(http::uri::Authority::port_u16);
        crate::telemetry::server_port(self.scheme(), explicit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::StatusCode;

    #[test]
    fn every_event_reads_as_one_line() {
        let unavailable = Verdict::retry(StatusCode::SERVICE_UNAVAILABLE);
        let retry = RetryEvent::Retry {
            attempt: 1,
            verdict: unavailable,
            wait: Duration::from_millis(10),
            source: WaitSource::Backoff,
            remaining: Some(Duration::from_millis(7990)),
        };
        assert_eq!(
            retry.to_string(),
            "attempt 1: retry (503 Service Unavailable); waiting 10ms (backoff) before attempt 2, 7.99s left"
        );
        let at_once = RetryEvent::Retry {
            attempt: 2,
            verdict: unavailable,
            wait: Duration::ZERO,
            source: WaitSource::None,
            remaining: None,
        };
        assert_eq!(
            at_once.to_string(),
            "attempt 2: retry (503 Service Unavailable); attempt 3 at once"
        );
        let exhausted = RetryEvent::Done {
            attempts: 3,
            verdict: unavailable,
            stop: Stop::Exhausted,
        };
        assert_eq!(
            exhausted.to_string(),
            "done after 3 attempts: retries exhausted (last: retry (503 Service Unavailable))"
        );
        let accepted = RetryEvent::Done {
            attempts: 1,
            verdict: Verdict::Accept,
            stop: Stop::Accepted,
        };
        assert_eq!(
            accepted.to_string(),
            "done after 1 attempt: accepted (last: accept)"
        );
        let ended = RetryEvent::AttemptEnd {
            attempt: 2,
            verdict: unavailable,
            status: Some(StatusCode::SERVICE_UNAVAILABLE),
            duration: Duration::from_micros(10_400),
            version: Some(http::Version::HTTP_11),
        };
        assert_eq!(
            ended.to_string(),
            "attempt 2 ended after 10ms: retry (503 Service Unavailable)"
        );
        let answered = RetryEvent::CallEnd {
            status: Some(StatusCode::OK),
            version: Some(http::Version::HTTP_2),
            failure: None,
            duration: Duration::from_millis(1200),
        };
        assert_eq!(answered.to_string(), "call ended after 1.2s: 200 OK");
        let overrun = RetryEvent::CallEnd {
            status: None,
            version: None,
            failure: Some(FailureKind::Deadline),
            duration: Duration::from_secs(8),
        };
        assert_eq!(
            overrun.to_string(),
            "call ended after 8s: deadline exceeded"
        );
    }

    #[test]
    fn the_error_type_is_told_for_the_ends_alone() {
        let ended = |status: u16, verdict| RetryEvent::AttemptEnd {
            attempt: 1,
            verdict,
            status: Some(StatusCode::from_u16(status).unwrap()),
            duration: Duration::ZERO,
            version: None,
        };
        let unavailable = Verdict::retry(StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(ended(503, unavailable).error_type(), Some("503"));
        assert_eq!(ended(200, Verdict::Accept).error_type(), None);
        let overrun = RetryEvent::CallEnd {
            status: None,
            version: None,
            failure: Some(FailureKind::Deadline),
            duration: Duration::ZERO,
        };
        assert_eq!(overrun.error_type(), Some("deadline"));
        let done = RetryEvent::Done {
            attempts: 3,
            verdict: unavailable,
            stop: Stop::Exhausted,
        };
        assert_eq!(done.error_type(), None);
    }

    #[test]
    fn a_call_context_shows_no_credentials() {
        let request = http::Request::get("http://user:s3cret@api.test:8080/x")
            .body(())
            .unwrap();
        let shown = format!("{:?}", CallContext::of(&request));
        assert!(
            !shown.contains("s3cret") && !shown.contains("user"),
            "{shown}"
        );
        assert!(
            shown.contains("api.test") && shown.contains("8080"),
            "{shown}"
        );
    }
}
