//! Retry events (see [`RetryListener`]).

use super::Verdict;
use crate::{FailureKind, Stop};
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

/// Something the retry layer (or the hedge layer) did.
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
    /// The call is over: the outcome of attempt `attempts` goes to the
    /// caller, accepted or not ([`Stop::Accepted`] for a success). A retry the
    /// budget refused ends the call with [`Stop::BudgetExhausted`].
    Done {
        /// The attempts made.
        attempts: u32,
        /// The decoder's verdict on the last one.
        verdict: Verdict,
        /// Why no further attempt was made.
        stop: Stop,
    },
}

impl fmt::Display for RetryEvent {
    /// One line per event, for a log or a timeline:
    /// `attempt 1: retry (503 Service Unavailable); waiting 10ms (backoff) before attempt 2, 7.99s left`
    /// or `done after 3 attempts: retries exhausted (last: retry (503 Service Unavailable))`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RetryEvent::Retry {
                attempt,
                verdict,
                wait,
                source,
                remaining,
            } => {
                write!(f, "attempt {attempt}: {verdict}; ")?;
                if wait.is_zero() {
                    write!(f, "attempt {} at once", attempt.saturating_add(1))?;
                } else {
                    write!(
                        f,
                        "waiting {wait:?} ({source}) before attempt {}",
                        attempt.saturating_add(1)
                    )?;
                }
                match remaining {
                    // NOTE: to the millisecond, as a person reads a timeline.
                    Some(left) => {
                        let millis = u64::try_from(left.as_millis()).unwrap_or(u64::MAX);
                        write!(f, ", {:?} left", Duration::from_millis(millis))
                    }
                    None => Ok(()),
                }
            }
            RetryEvent::Hedge {
                attempt,
                trigger,
                in_flight,
            } => write!(
                f,
                "hedge: attempt {attempt} sent ({trigger}), {in_flight} in flight"
            ),
            RetryEvent::Done {
                attempts,
                verdict,
                stop,
            } => {
                let plural = if *attempts == 1 { "" } else { "s" };
                write!(
                    f,
                    "done after {attempts} attempt{plural}: {stop} (last: {verdict})"
                )
            }
        }
    }
}

/// Hears [`RetryEvent`]s; closures `Fn(&RetryEvent)` are listeners.
///
/// A listener set on a [`RetryPolicy`](crate::retry::RetryPolicy) hears
/// every retry and the end of every call, including a retry the budget refused,
/// so that counters can be fed without parsing logs. (Every event is also
/// logged with `tracing` at debug level.)
///
/// A call ended from outside the retry layer makes no `Done`: the caller
/// dropped it, or a [`DeadlineLayer`](crate::DeadlineLayer) around the retry
/// layer ran out, during a wait or during an attempt (its timer wins a tie
/// with the attempt's own limit). The retry layer sees no outcome then; the
/// caller gets `DeadlineExceeded` from the deadline itself.
///
/// # Example
///
/// ```
/// use http_resilience::{policy::{FixedDelay, RetryEvent, StatusDecoder}, retry::RetryPolicy};
/// use std::sync::{atomic::{AtomicU32, Ordering}, Arc};
///
/// let retries = Arc::new(AtomicU32::new(0));
/// let counter = retries.clone();
/// let policy = RetryPolicy::new(StatusDecoder::new([503])?, FixedDelay::new(Default::default(), 2))
///     .with_listener(move |event: &RetryEvent| {
///         if let RetryEvent::Retry { .. } = event {
///             counter.fetch_add(1, Ordering::Relaxed);
///         }
///     });
/// # let _ = policy;
/// # Ok::<(), http_resilience::BoxError>(())
/// ```
pub trait RetryListener: Send + Sync + 'static {
    /// Called for every event, on the task driving the call; it should be
    /// quick (bump a counter, record a histogram).
    fn on_event(&self, event: &RetryEvent);

    /// Called for every event in place of [`on_event`](Self::on_event), with
    /// the call it belongs to; by default, `on_event`.
    fn on_call_event(&self, event: &RetryEvent, call: &CallContext) {
        let _ = call;
        self.on_event(event);
    }

    /// Called at the end of every attempt and every hedged copy that ended
    /// with an outcome (not one dropped), with the call it belongs to; by
    /// default, nothing. What OpenTelemetry's `http.client.request.duration`
    /// is made of.
    fn on_attempt(&self, attempt: &AttemptEnd, call: &CallContext) {
        let _ = (attempt, call);
    }

    /// Called once a call the combined service
    /// ([`Resilience`](crate::Resilience), and so the gRPC layers) drives
    /// has its output, whatever ended it: an outcome the retry returned, the
    /// deadline, a service that could not get ready; by default, nothing.
    /// What `http_resilience.call.duration` is made of.
    ///
    /// Under the three layers and hedging, the deadline is a layer outside
    /// the retry that drops it when it runs out: the retry never sees such
    /// an end, and this is not called; a layer outside the deadline sees
    /// every end (as `telemetry::otel::Metrics::layer` does).
    fn on_call_end(&self, end: &CallEnd, call: &CallContext) {
        let _ = (end, call);
    }
}

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
    pub fn of<B>(request: &http::Request<B>) -> Self {
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

/// The end of one attempt (or hedged copy), as
/// [`RetryListener::on_attempt`] hears it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct AttemptEnd {
    /// The attempt's number (1 for the first).
    pub attempt: u32,
    /// The decoder's verdict on its outcome.
    pub verdict: Verdict,
    /// The response's status, when it got one.
    pub status: Option<http::StatusCode>,
    /// From the attempt's start to its outcome (the response head, or the
    /// error).
    pub duration: Duration,
    /// The response's protocol version, when it got one (OpenTelemetry's
    /// `network.protocol.version`).
    pub version: Option<http::Version>,
}

impl AttemptEnd {
    /// OpenTelemetry's `error.type` of the outcome: the status code for a
    /// 4xx or 5xx response; for an error, the
    /// [`FailureKind::name`](crate::FailureKind::name) of the kind the
    /// decoder's verdict gives (`_OTHER` when it gives none, as
    /// [`StatusDecoder`](crate::policy::StatusDecoder)'s does); none for a
    /// success.
    pub fn error_type(&self) -> Option<&str> {
        crate::telemetry::error_type(self.verdict, self.status.as_ref())
    }
}

/// The end of a whole call, as [`RetryListener::on_call_end`] hears it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallEnd {
    /// The response's status, when the call's output is a response.
    pub status: Option<http::StatusCode>,
    /// The response's protocol version, likewise.
    pub version: Option<http::Version>,
    /// The kind of the call's error, when its output is one
    /// ([`FailureKind::Deadline`] for a call its deadline ended).
    pub failure: Option<FailureKind>,
    /// From the call to its output (the response head, or the error), every
    /// attempt and wait included.
    pub duration: Duration,
}

impl CallEnd {
    /// OpenTelemetry's `error.type` of the output, as
    /// [`AttemptEnd::error_type`] says it: the status code for a 4xx or 5xx
    /// response, the [`FailureKind::name`] of an error, none for a success.
    pub fn error_type(&self) -> Option<&str> {
        let verdict = self.failure.map_or(Verdict::Accept, Verdict::fail);
        crate::telemetry::error_type(verdict, self.status.as_ref())
    }
}

impl<F> RetryListener for F
where
    F: Fn(&RetryEvent) + Send + Sync + 'static,
{
    fn on_event(&self, event: &RetryEvent) {
        self(event)
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
