//! Retry events (see [`RetryListener`]).

use super::Verdict;
use crate::Stop;
use std::{fmt, time::Duration};

/// Where the wait before a retry came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WaitSource {
    /// The retryer's own backoff.
    Backoff,
    /// A delay the server asked for (`Retry-After`), capped by the retryer.
    Server,
    /// No wait: the next attempt starts at once.
    None,
}

impl fmt::Display for WaitSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match self {
            WaitSource::Backoff => "backoff",
            WaitSource::Server => "retry-after",
            WaitSource::None => "none",
        })
    }
}

/// Something the retry layer did.
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
    /// No further attempt: the outcome of attempt `attempts` goes to the
    /// caller. A retry the budget refused is a give-up with
    /// [`Stop::BudgetExhausted`].
    GiveUp {
        /// The attempts made.
        attempts: u32,
        /// The decoder's verdict on the last one.
        verdict: Verdict,
        /// Why no further attempt was made.
        stop: Stop,
    },
}

/// Hears [`RetryEvent`]s; closures `Fn(&RetryEvent)` are listeners.
///
/// A listener set on a [`RetryPolicy`](crate::retry::RetryPolicy) hears
/// every retry and every give-up, including the ones the retry budget refused,
/// so that counters can be fed without parsing logs. (Every event is also
/// logged with `tracing` at debug level.)
///
/// A call ended from outside the retry layer makes no give-up: the caller
/// dropped it, or a [`DeadlineLayer`](crate::DeadlineLayer) around the retry
/// layer ran out, during a wait or during an attempt (its timer wins a tie
/// with the attempt's own limit). The retry layer sees no outcome then; the
/// caller gets `DeadlineExceeded` from the deadline itself.
///
/// # Example
///
/// ```
/// use http_resilience::retry::{FixedDelay, RetryEvent, RetryPolicy, StatusDecoder};
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
}

impl<F> RetryListener for F
where
    F: Fn(&RetryEvent) + Send + Sync + 'static,
{
    fn on_event(&self, event: &RetryEvent) {
        self(event)
    }
}
