//! Request and response extensions shared by the layers.

use crate::retry::Verdict;
use std::{
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc,
    },
    time::Duration,
};
use tokio::time::Instant;

/// `now + duration`, clamped to about thirty years ahead when the sum does not
/// fit an `Instant`: no call outlives that horizon.
pub(crate) fn saturating_after(now: Instant, duration: Duration) -> Instant {
    const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);
    now.checked_add(duration)
        .unwrap_or_else(|| now + FAR_FUTURE)
}

/// The instant by which a whole call must be complete, stored in the request
/// extensions.
///
/// [`DeadlineLayer`](crate::deadline::DeadlineLayer) inserts it; an earlier
/// `RequestDeadline` already present (for example one inherited from an inbound
/// request) is kept. Inner layers read it to learn the remaining budget:
/// [`AttemptTimeout`](crate::attempt_timeout::AttemptTimeout) never lets an
/// attempt outlive it.
///
/// The instant is tokio's, so it follows `tokio::time::pause()`.
///
/// # Example
///
/// ```
/// use http_resilience::RequestDeadline;
/// use std::time::Duration;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let mut request = http::Request::new(());
/// let deadline = RequestDeadline::after(Duration::from_secs(2));
/// request.extensions_mut().insert(deadline);
///
/// let found = RequestDeadline::of(&request).expect("set above");
/// assert!(found.remaining() <= Duration::from_secs(2));
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestDeadline {
    instant: Instant,
    budget: Duration,
}

// ===== impl RequestDeadline =====

impl RequestDeadline {
    /// A deadline at `instant`; its budget is the time left until then.
    pub fn at(instant: Instant) -> Self {
        Self {
            instant,
            budget: instant.saturating_duration_since(Instant::now()),
        }
    }

    /// A deadline `budget` from now (tokio's clock).
    ///
    /// A budget too large to represent as an instant is clamped to about
    /// thirty years, which no call outlives.
    pub fn after(budget: Duration) -> Self {
        Self {
            instant: saturating_after(Instant::now(), budget),
            budget,
        }
    }

    /// The instant itself.
    pub const fn instant(&self) -> Instant {
        self.instant
    }

    /// The whole budget this deadline was created with; it is what
    /// [`DeadlineExceeded`](crate::deadline::error::DeadlineExceeded) reports.
    pub const fn budget(&self) -> Duration {
        self.budget
    }

    /// The time left before the deadline, zero once it has passed.
    pub fn remaining(&self) -> Duration {
        self.instant.saturating_duration_since(Instant::now())
    }

    /// Whether the deadline has passed.
    pub fn is_expired(&self) -> bool {
        Instant::now() >= self.instant
    }

    /// The earlier of two deadlines.
    #[must_use]
    pub fn min(self, other: Self) -> Self {
        if other.instant < self.instant {
            other
        } else {
            self
        }
    }

    /// The deadline carried by `request`, if any.
    pub fn of<B>(request: &http::Request<B>) -> Option<Self> {
        request.extensions().get::<Self>().copied()
    }
}

/// How many attempts produced a response, and the decoder's verdict on the
/// last one, stored in the response extensions by
/// [`StatusRetry`](crate::retry::StatusRetry).
///
/// The count includes the attempt that produced the response: `1` when the first
/// attempt was accepted, `3` when the seed policy's two retries were used. The
/// verdict tells why the retrying stopped there: `Accept`, `Fail`, or a `Retry`
/// that the retryer (or a missing replayable body, or the deadline) refused.
///
/// # Example
///
/// ```
/// use http::StatusCode;
/// use http_resilience::{retry::Verdict, Attempts};
///
/// let mut response = http::Response::new(());
/// let last = Verdict::retry(StatusCode::SERVICE_UNAVAILABLE);
/// response.extensions_mut().insert(Attempts::new(3).with_verdict(last));
/// assert_eq!(Attempts::of(&response), Some(3));
/// let attempts = response.extensions().get::<Attempts>().unwrap();
/// assert!(attempts.verdict().is_retry(), "retries were used up");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Attempts {
    count: u32,
    verdict: Verdict,
}

// ===== impl Attempts =====

impl Attempts {
    /// A count of `n` attempts, the last one accepted.
    pub const fn new(n: u32) -> Self {
        Self {
            count: n,
            verdict: Verdict::Accept,
        }
    }

    /// The same count with the verdict on the last attempt.
    #[must_use]
    pub const fn with_verdict(mut self, verdict: Verdict) -> Self {
        self.verdict = verdict;
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

    /// The attempt count recorded on `response`, if a retry layer saw it.
    pub fn of<B>(response: &http::Response<B>) -> Option<u32> {
        response.extensions().get::<Self>().map(Self::get)
    }
}

/// A counter of attempts that the caller keeps, for the outcomes that carry no
/// [`Attempts`] extension: errors.
///
/// Put a clone in the request extensions before the call;
/// [`StatusRetry`](crate::retry::StatusRetry) sets it to the number of
/// attempts made so far as each one starts. Since the last error is returned
/// unchanged, this is how a caller learns how many attempts led to it.
///
/// # Example
///
/// ```
/// use http::Request;
/// use http_resilience::AttemptCounter;
///
/// let counter = AttemptCounter::new();
/// let mut request = Request::new(());
/// request.extensions_mut().insert(counter.clone());
/// // ... call the stack with `request`; afterwards:
/// assert_eq!(counter.get(), 0, "no attempt was made in this example");
/// ```
#[derive(Debug, Clone, Default)]
pub struct AttemptCounter(Arc<AtomicU32>);

// ===== impl AttemptCounter =====

impl AttemptCounter {
    /// A counter at zero.
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of attempts started so far.
    pub fn get(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }

    /// Records that attempt number `n` has started.
    pub(crate) fn record(&self, n: u32) {
        self.0.store(n, Ordering::Relaxed);
    }

    /// Records attempt `n` on the counter carried by `request`, if any.
    pub(crate) fn record_on<B>(request: &http::Request<B>, n: u32) {
        if let Some(counter) = request.extensions().get::<Self>() {
            counter.record(n);
        }
    }
}
