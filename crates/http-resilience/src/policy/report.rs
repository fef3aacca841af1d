//! The retry's report: how many attempts, the last verdict, and why it
//! stopped, on a response or in a report the caller keeps; and the marker of
//! the last attempt.

use super::Verdict;
use std::sync::{Arc, Mutex};

/// Why a [`StatusRetry`](crate::retry::StatusRetry) made no further attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Stop {
    /// The decoder accepted the outcome.
    Accepted,
    /// The decoder judged the outcome a failure not worth retrying.
    Failed,
    /// The retryer allowed no more attempts.
    Exhausted,
    /// The request could not be sent again: its body cannot be copied, or
    /// part of it was sent by an earlier attempt and not kept (past the
    /// replay cap), or it failed (Apache's "non-repeatable request"). A body
    /// that was never sent is always sent again.
    NotReplayable,
    /// The request may have reached the upstream and is not idempotent.
    NotIdempotent,
    /// The request's deadline had passed, or the wait before the next attempt
    /// would have outlasted it (the wait is cut at the deadline, and the last
    /// outcome returned then).
    DeadlinePassed,
    /// Retries are turned off.
    Disabled,
    /// The wait plus a useful attempt would not fit before the deadline
    /// (deadline-aware scheduling).
    WouldMissDeadline,
    /// The shared retry budget refused the retry.
    BudgetExhausted,
    /// The inner service failed while getting ready for a retry; its error is
    /// what the caller gets.
    NotReady,
}

impl Stop {
    /// A short, stable, snake-case name of the reason, for a metric's or a
    /// span's attribute: `accepted`, `exhausted`, `budget_exhausted`, ...
    pub const fn name(&self) -> &'static str {
        match self {
            Stop::Accepted => "accepted",
            Stop::Failed => "failed",
            Stop::Exhausted => "exhausted",
            Stop::NotReplayable => "not_replayable",
            Stop::NotIdempotent => "not_idempotent",
            Stop::DeadlinePassed => "deadline_passed",
            Stop::Disabled => "disabled",
            Stop::WouldMissDeadline => "would_miss_deadline",
            Stop::BudgetExhausted => "budget_exhausted",
            Stop::NotReady => "not_ready",
        }
    }
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(match self {
            Stop::Accepted => "accepted",
            Stop::Failed => "failed, not retryable",
            Stop::Exhausted => "retries exhausted",
            Stop::NotReplayable => "non-repeatable request",
            Stop::NotIdempotent => "sent and not idempotent",
            Stop::DeadlinePassed => "deadline passed",
            Stop::Disabled => "retries disabled",
            Stop::WouldMissDeadline => "the next attempt would miss the deadline",
            Stop::BudgetExhausted => "retry budget exhausted",
            Stop::NotReady => "the service failed to get ready for a retry",
        })
    }
}

/// How many attempts produced a response, the decoder's verdict on the last
/// one, and why no further attempt was made; stored in the response
/// extensions by [`StatusRetry`](crate::retry::StatusRetry) when there is
/// something to report.
///
/// The count includes the attempt that produced the response: `3` when the
/// Reactor policy's two retries were used. A response whose first attempt was
/// accepted, the common case, carries no `Attempts`: there is nothing to
/// report, and an extension allocates the map and the value. (gRPC
/// reports previous attempts the same way, only when there were some.) So
/// [`Attempts::of`] reads 1 for it, as it does for a response that passed no
/// retry layer: it took one attempt. Any other outcome carries one: more than
/// one attempt, or a first attempt that was not accepted (a failure not worth
/// retrying, retries switched off, a body that cannot be sent again, ...).
///
/// # Example
///
/// ```
/// use http::{Request, Response, StatusCode};
/// use http_resilience::{
///     policy::{FixedDelay, Reason, StatusDecoder, Verdict},
///     retry::RetryPolicy,
///     Attempts, StatusRetryLayer, Stop,
/// };
/// use std::{convert::Infallible, time::Duration};
/// use tower::{Layer, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let overloaded = tower::service_fn(|_: Request<()>| async {
///     let mut response = Response::new(());
///     *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
///     Ok::<_, Infallible>(response)
/// });
/// let two_retries = FixedDelay::new(Duration::from_millis(10), 2);
/// let policy = RetryPolicy::new(StatusDecoder::new([503])?, two_retries);
/// let retrying = StatusRetryLayer::new(policy).layer(overloaded);
/// let response = retrying.oneshot(Request::new(())).await?;
///
/// assert_eq!(Attempts::of(&response), 3);
/// let attempts = response.extensions().get::<Attempts>().unwrap();
/// let unavailable = Reason::Status(StatusCode::SERVICE_UNAVAILABLE);
/// assert!(matches!(attempts.verdict(), Verdict::Retry { reason, .. } if reason == unavailable));
/// assert_eq!(attempts.stop(), Stop::Exhausted);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Attempts {
    count: u32,
    verdict: Verdict,
    stop: Stop,
    /// The attempt whose outcome this is: the last one unless
    /// `with_winner` says otherwise.
    winner: u32,
}

// ===== impl Attempts =====

impl Attempts {
    /// A count of `n` attempts, the last one accepted.
    pub(crate) const fn new(n: u32) -> Self {
        Self {
            count: n,
            verdict: Verdict::Accept,
            stop: Stop::Accepted,
            winner: n,
        }
    }

    /// The same count with the number of the attempt whose outcome the
    /// caller got: with [`hedge`](crate::hedge), the first acceptable one,
    /// which need not be the last sent.
    #[must_use]
    pub(crate) const fn with_winner(mut self, attempt: u32) -> Self {
        self.winner = attempt;
        self
    }

    /// The number of the attempt whose outcome the caller got (1 for the
    /// first): the last one for retries, the first acceptable one for hedges.
    pub const fn winner(&self) -> u32 {
        if self.winner == 0 {
            self.count
        } else {
            self.winner
        }
    }

    /// The same count with the verdict on the last attempt.
    #[must_use]
    pub(crate) const fn with_verdict(mut self, verdict: Verdict) -> Self {
        self.verdict = verdict;
        self
    }

    /// The same count with the reason no further attempt was made.
    #[must_use]
    pub(crate) const fn with_stop(mut self, stop: Stop) -> Self {
        self.stop = stop;
        self
    }

    /// The number of attempts.
    pub const fn get(&self) -> u32 {
        self.count
    }

    /// The decoder's verdict on the last attempt.
    pub const fn verdict(&self) -> Verdict {
        self.verdict
    }

    /// Why no further attempt was made.
    pub const fn stop(&self) -> Stop {
        self.stop
    }

    /// The number of attempts that produced `response`: the count recorded
    /// on it, or 1 when it carries none (its first attempt was accepted, or
    /// no retry layer saw it).
    pub fn of<B>(response: &http::Response<B>) -> u32 {
        response.extensions().get::<Self>().map_or(1, Self::get)
    }

    /// Whether this summary says more than "one attempt, accepted", and so is
    /// recorded on the response.
    pub(crate) fn is_news(&self) -> bool {
        self.count > 1 || !matches!(self.stop, Stop::Accepted)
    }
}

/// A report of the retrying that the caller keeps, for the outcomes that carry
/// no [`Attempts`] extension: errors.
///
/// Put a clone in the request extensions before the call;
/// [`StatusRetry`](crate::retry::StatusRetry) counts the attempts as they
/// start, and when it returns it records the same [`Attempts`] summary that
/// a response carries. Since the last error is returned unchanged, this is how
/// a caller learns how many attempts led to it, and why they stopped (a
/// non-repeatable body, for example).
///
/// A report records one call. Its clones share it, so a report copied onto
/// another request (with the rest of the extensions) records that call too,
/// over the first; it changes nothing in how either call is made.
///
/// # Example
///
/// ```
/// use http::Request;
/// use http_resilience::RetryReport;
///
/// let report = RetryReport::new();
/// let mut request = Request::new(());
/// request.extensions_mut().insert(report.clone());
/// // ... call the stack with `request`; afterwards:
/// assert_eq!(report.attempts(), 0, "no attempt was made in this example");
/// assert_eq!(report.summary(), None);
/// ```
#[derive(Debug, Clone, Default)]
pub struct RetryReport(Arc<Mutex<(u32, Option<Attempts>)>>);

// ===== impl RetryReport =====

impl RetryReport {
    /// An empty report.
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of attempts started so far.
    pub fn attempts(&self) -> u32 {
        self.lock().0
    }

    /// The summary of the finished call: attempts, last verdict, and why it
    /// stopped; `None` while the call runs, and for a call ended from outside
    /// the retry layer (dropped, or cut by a `DeadlineLayer` around it), which
    /// the retry layer never saw finish.
    pub fn summary(&self) -> Option<Attempts> {
        self.lock().1
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (u32, Option<Attempts>)> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records that attempt `n` started.
    pub(crate) fn record_attempt(&self, n: u32) {
        self.lock().0 = n;
    }

    /// Records the summary of the finished call.
    pub(crate) fn record_summary(&self, summary: Attempts) {
        *self.lock() = (summary.get(), Some(summary));
    }
}
