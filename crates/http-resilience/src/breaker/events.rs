//! Breaker events (see [`BreakerEvent`]).

use super::CircuitState;
use crate::{
    key::{Kept, UpstreamKey},
    policy::Verdict,
    telemetry::{listeners::Listeners, Listener},
};
use std::{fmt, time::Duration};
use tokio::time::Instant;

/// Why a circuit opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TripReason {
    /// This many failures came in a row.
    ConsecutiveFailures {
        /// The failures in a row.
        count: u32,
    },
    /// The share of failures over the sliding window reached the ratio,
    /// with at least the minimum throughput.
    FailureRatio {
        /// The failures in the window.
        failures: u32,
        /// The calls in the window.
        calls: u32,
    },
    /// A probe of the half-open circuit failed.
    ProbeFailed,
    /// A call let through while the circuit ramped up failed.
    RampFailed,
}

impl fmt::Display for TripReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TripReason::ConsecutiveFailures { count } => {
                f.pad(&format!("{count} failures in a row"))
            }
            TripReason::FailureRatio { failures, calls } => {
                f.pad(&format!("{failures} failures in {calls} calls"))
            }
            TripReason::ProbeFailed => f.pad("a probe failed"),
            TripReason::RampFailed => f.pad("a call failed during the ramp"),
        }
    }
}

/// Something a circuit did; a [`Listener`] given with
/// [`BreakerPolicy::with_listener`](super::BreakerPolicy::with_listener)
/// hears it, and closures `Fn(&BreakerEvent<'_>)` are such listeners.
///
/// Every event is also logged with `tracing`: the changes of state at info
/// level, a rejected call at debug level.
///
/// # Example
///
/// ```
/// use http_resilience::breaker::{BreakerEvent, BreakerPolicy};
/// use std::sync::{atomic::{AtomicU32, Ordering}, Arc};
///
/// let opened = Arc::new(AtomicU32::new(0));
/// let counter = opened.clone();
/// let policy = BreakerPolicy::default().with_listener(move |event: &BreakerEvent<'_>| {
///     if let BreakerEvent::Opened { .. } = event {
///         counter.fetch_add(1, Ordering::Relaxed);
///     }
/// });
/// # let _ = policy;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum BreakerEvent<'a> {
    /// The circuit opened: calls are turned away until `until`.
    Opened {
        /// The circuit's key.
        key: &'a UpstreamKey,
        /// Why it opened.
        why: TripReason,
        /// The decoder's verdict on the outcome that tripped it.
        last: Verdict,
        /// How long it stays open.
        duration: Duration,
        /// The trips since it last closed, this one included (the break
        /// grows with them).
        trips: u32,
    },
    /// The break is over: the circuit lets probes through.
    HalfOpen {
        /// The circuit's key.
        key: &'a UpstreamKey,
    },
    /// Enough probes succeeded, with a [ramp](super::BreakerPolicy::ramp):
    /// the circuit lets a growing share of calls through for `duration`,
    /// then closes.
    RampingUp {
        /// The circuit's key.
        key: &'a UpstreamKey,
        /// How long the ramp lasts.
        duration: Duration,
        /// Its steps: the first lets one in `steps` calls through.
        steps: u32,
    },
    /// Enough probes succeeded (and the ramp ended, if there is one): the
    /// circuit closed.
    Closed {
        /// The circuit's key.
        key: &'a UpstreamKey,
    },
    /// A call was turned away, never sent.
    Rejected {
        /// The circuit's key.
        key: &'a UpstreamKey,
        /// From when a probe may go; while the circuit ramps up, the start of
        /// the next step, which lets a larger share through.
        retry_at: Instant,
    },
}

impl fmt::Display for BreakerEvent<'_> {
    /// One line per event: `circuit http://a:80 opened for 5s (5 failures in
    /// a row, last: retry (503 Service Unavailable)), trip 1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BreakerEvent::Opened {
                key,
                why,
                last,
                duration,
                trips,
            } => write!(
                f,
                "circuit {key} opened for {duration:?} ({why}, last: {last}), trip {trips}"
            ),
            BreakerEvent::HalfOpen { key } => write!(f, "circuit {key} half-open"),
            BreakerEvent::RampingUp {
                key,
                duration,
                steps,
            } => write!(
                f,
                "circuit {key} ramping up over {duration:?} in {steps} steps"
            ),
            BreakerEvent::Closed { key } => write!(f, "circuit {key} closed"),
            BreakerEvent::Rejected { key, .. } => write!(f, "circuit {key} open: call rejected"),
        }
    }
}

/// The listener of a policy's circuits, as it is given.
pub(crate) type BreakerListener = dyn for<'a> Listener<BreakerEvent<'a>>;

/// What watches a policy's circuits from outside the breaker, attached to
/// them in place (the metrics of `otel`): it hears every event, as
/// a listener does, and reads the states of the circuits it is attached to,
/// and of those of every policy made from that one.
pub(crate) trait Observer: for<'a> Listener<BreakerEvent<'a>> {
    /// Reads the states of `circuits` from now on, for as long as they are
    /// kept.
    fn observe(&self, circuits: Kept<CircuitState>);
}

/// The listeners of a policy's circuits.
pub(crate) type BreakerListeners = Listeners<BreakerListener, dyn Observer>;

/// The listener to tell of the circuits' events: `listeners`, unless no one
/// listens.
pub(crate) fn heard(listeners: &BreakerListeners) -> Option<&BreakerListener> {
    listeners.any().then_some(listeners as &BreakerListener)
}

/// Logs `event` and tells `listener`, if any.
pub(crate) fn emit(listener: Option<&BreakerListener>, event: &BreakerEvent<'_>) {
    match event {
        BreakerEvent::Rejected { .. } => tracing::debug!(%event, "circuit breaker"),
        _ => tracing::info!(%event, "circuit breaker"),
    }
    if let Some(listener) = listener {
        listener.on_event(event);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::StatusCode;

    #[test]
    fn every_event_reads_as_one_line() {
        let key = UpstreamKey::authority("http", "a", 80);
        let opened = BreakerEvent::Opened {
            key: &key,
            why: TripReason::ConsecutiveFailures { count: 5 },
            last: Verdict::retry(StatusCode::SERVICE_UNAVAILABLE),
            duration: Duration::from_secs(5),
            trips: 1,
        };
        assert_eq!(
            opened.to_string(),
            "circuit http://a:80 opened for 5s (5 failures in a row, last: retry (503 Service Unavailable)), trip 1"
        );
        let ratio = TripReason::FailureRatio {
            failures: 10,
            calls: 100,
        };
        assert_eq!(ratio.to_string(), "10 failures in 100 calls");
        assert_eq!(TripReason::ProbeFailed.to_string(), "a probe failed");
        assert_eq!(
            TripReason::RampFailed.to_string(),
            "a call failed during the ramp"
        );
        let ramping = BreakerEvent::RampingUp {
            key: &key,
            duration: Duration::from_secs(4),
            steps: 4,
        };
        assert_eq!(
            ramping.to_string(),
            "circuit http://a:80 ramping up over 4s in 4 steps"
        );
        assert_eq!(
            BreakerEvent::HalfOpen { key: &key }.to_string(),
            "circuit http://a:80 half-open"
        );
        assert_eq!(
            BreakerEvent::Closed { key: &key }.to_string(),
            "circuit http://a:80 closed"
        );
        let rejected = BreakerEvent::Rejected {
            key: &key,
            retry_at: Instant::now(),
        };
        assert_eq!(
            rejected.to_string(),
            "circuit http://a:80 open: call rejected"
        );
    }
}
