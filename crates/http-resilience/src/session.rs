//! What every form of the stack keeps for one call: the retry future, the
//! combined service and the hedge future all drive one [`Session`] with one
//! [`Parts`], so the numbering of attempts, the gates, the caller's report
//! and the end of a call exist once.

use crate::{
    extensions::FinalAttempt,
    policy::{Parts, RetryEvent},
    Attempts, RequestDeadline, RetryReport, Stop,
};
use std::time::Duration;
use tokio::time::Instant;

/// One call's bookkeeping: the attempts sent and the caller's report.
#[derive(Debug)]
pub(crate) struct Session {
    // Attempts sent so far, the current one included.
    attempts: u32,
    // The caller's report, if the request carried one.
    report: Option<RetryReport>,
}

// ===== impl Session =====

impl Session {
    /// The session of a call whose first attempt is `request`: a
    /// [`FinalAttempt`] marker it brings is removed (only the layer that
    /// decides the attempts knows which one is the last; one copied with the
    /// extensions of another request must not stretch every attempt), the
    /// attempt header is written for attempt 1, and the caller's report, if
    /// the request carries one, is told of it.
    #[inline(always)]
    pub(crate) fn begin<B, D>(parts: &Parts<D>, request: &mut http::Request<B>) -> Self {
        // NOTE: most requests bring no extensions; the map's own lookups are
        // not inlined, so the empty case is told apart first.
        let report = if request.extensions().is_empty() {
            None
        } else {
            request.extensions_mut().remove::<FinalAttempt>();
            request.extensions().get::<RetryReport>().cloned()
        };
        parts.number_attempt(request, 1);
        if let Some(report) = &report {
            report.record_attempt(1);
        }
        Self {
            attempts: 1,
            report,
        }
    }

    /// The session of a call that sends nothing (its deadline had passed).
    pub(crate) const fn unsent() -> Self {
        Self {
            attempts: 1,
            report: None,
        }
    }

    /// The number of attempts sent so far.
    pub(crate) const fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Counts `request` as the next attempt: numbered, and told to the
    /// caller's report. Returns its number.
    pub(crate) fn next<B, D>(&mut self, parts: &Parts<D>, request: &mut http::Request<B>) -> u32 {
        self.attempts = self.attempts.saturating_add(1);
        parts.number_attempt(request, self.attempts);
        if let Some(report) = &self.report {
            report.record_attempt(self.attempts);
        }
        self.attempts
    }

    /// Whether another attempt is within `max` (if there is a most).
    pub(crate) fn attempts_left(&self, max: Option<u32>) -> Result<(), Stop> {
        match max {
            Some(max) if self.attempts >= max => Err(Stop::Exhausted),
            _ => Ok(()),
        }
    }

    /// Ends the call with `summary`: logs it, tells the listener and the
    /// caller's report, and puts it on a response that has news in it.
    ///
    /// NOTE: the outcome is changed in place: it is the largest value of the
    /// call, and every move of it is a copy.
    pub(crate) fn end<T, E, D>(
        &self,
        parts: &Parts<D>,
        summary: Attempts,
        deadline: Option<RequestDeadline>,
        outcome: &mut Result<http::Response<T>, E>,
    ) {
        // NOTE: the fields are evaluated only when the event is enabled, so
        // the clock is not read for nothing.
        tracing::debug!(
            attempts = summary.get(),
            verdict = %summary.verdict(),
            stop = %summary.stop(),
            remaining_ms = deadline.map(|d| whole_millis(d.remaining())),
            "done"
        );
        parts.tell(&RetryEvent::Done {
            attempts: summary.get(),
            verdict: summary.verdict(),
            stop: summary.stop(),
        });
        if let Some(report) = &self.report {
            report.record_summary(summary);
        }
        // NOTE: a first attempt accepted, the common case, has nothing to
        // report and costs nothing (an extension allocates the map and the
        // value when the map is empty).
        if let Ok(response) = outcome {
            if summary.is_news() {
                response.extensions_mut().insert(summary);
            }
        }
    }
}

/// Whether the request's `deadline`, if it has one, is still ahead at `now`.
pub(crate) fn deadline_open(deadline: Option<RequestDeadline>, now: Instant) -> Result<(), Stop> {
    match deadline {
        Some(deadline) if deadline.has_passed_at(now) => Err(Stop::DeadlinePassed),
        _ => Ok(()),
    }
}

/// `duration` in whole milliseconds for the logs, at most `u64::MAX`.
pub(crate) fn whole_millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Which form a call's span is named for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Form {
    Retry,
    Hedge,
}

/// The span of a call: made from its first request, entered while the first
/// attempt is called, then kept with the call's future only when a
/// subscriber wants it (boxed, so that a call nobody traces carries a pointer
/// for it).
pub(crate) struct CallSpan(tracing::Span);

impl CallSpan {
    /// The span of a call of `form` whose first attempt is `request`.
    #[inline(always)]
    pub(crate) fn new<B>(form: Form, request: &http::Request<B>) -> Self {
        let (method, path) = (request.method(), request.uri().path());
        Self(match form {
            Form::Retry => tracing::debug_span!("retry", %method, path),
            Form::Hedge => tracing::debug_span!("hedge", %method, path),
        })
    }

    /// Enters the span, until the guard is dropped.
    #[inline(always)]
    pub(crate) fn enter(&self) -> tracing::span::Entered<'_> {
        self.0.enter()
    }

    /// The span to keep with the call's future, if anyone wants it.
    #[inline(always)]
    pub(crate) fn keep(self) -> Option<Box<tracing::Span>> {
        (!self.0.is_disabled()).then(|| Box::new(self.0))
    }
}
