//! What every form of the stack keeps for one call, and the parts of a policy
//! that retrying and hedging share: the retry future, the combined service
//! and the hedge future all drive one [`Session`] with one [`Parts`], so the
//! numbering of attempts, the gates, the caller's report and the end of a
//! call exist once.

use crate::{
    extensions::FinalAttempt,
    retry::{AttemptHeader, RetryBudget, RetryEvent, RetryListener, Verdict},
    Attempts, RequestDeadline, RetryReport, Stop,
};
use std::{fmt, sync::Arc, time::Duration};
use tokio::time::Instant;

/// The parts of a policy that the retry and the hedging policies share.
#[derive(Clone)]
pub(crate) struct Parts<D> {
    pub(crate) decoder: D,
    pub(crate) budget: Option<Arc<RetryBudget>>,
    pub(crate) listener: Option<Arc<dyn RetryListener>>,
    pub(crate) attempt_header: Option<AttemptHeader>,
    /// The least time a useful attempt needs (deadline-aware scheduling).
    pub(crate) deadline_margin: Option<Duration>,
}

// ===== impl Parts =====

impl<D> Parts<D> {
    pub(crate) const fn new(decoder: D) -> Self {
        Self {
            decoder,
            budget: None,
            listener: None,
            attempt_header: None,
            deadline_margin: None,
        }
    }

    /// The same parts with another decoder.
    pub(crate) fn map<D2>(self, decoder: impl FnOnce(D) -> D2) -> Parts<D2> {
        Parts {
            decoder: decoder(self.decoder),
            budget: self.budget,
            listener: self.listener,
            attempt_header: self.attempt_header,
            deadline_margin: self.deadline_margin,
        }
    }

    /// Writes the attempt header, if there is one, for attempt `n` (1 for
    /// the first).
    #[inline(always)]
    pub(crate) fn number_attempt<B>(&self, request: &mut http::Request<B>, n: u32) {
        if let Some(header) = &self.attempt_header {
            header.write(request, n);
        }
    }

    /// Tells the listener, if there is one.
    pub(crate) fn tell(&self, event: &RetryEvent) {
        if let Some(listener) = &self.listener {
            listener.on_event(event);
        }
    }

    /// Whether the budget, if there is one, allows another attempt.
    pub(crate) fn budget_allows(&self) -> Result<(), Stop> {
        match &self.budget {
            Some(budget) if !budget.can_retry() => Err(Stop::BudgetExhausted),
            _ => Ok(()),
        }
    }

    /// Takes a token from the budget, if there is one, for an attempt sent
    /// while others are in flight (a hedge).
    pub(crate) fn spend(&self) {
        if let Some(budget) = &self.budget {
            budget.record_retryable_failure();
        }
    }

    /// Tells the budget of a verdict: a retryable one takes a token, an
    /// accepted one puts a fraction back.
    pub(crate) fn record(&self, verdict: Verdict) {
        if let Some(budget) = &self.budget {
            match verdict {
                Verdict::Retry { .. } => budget.record_retryable_failure(),
                Verdict::Accept => budget.record_success(),
                _ => {}
            }
        }
    }
}

impl<D: fmt::Debug> fmt::Debug for Parts<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Parts")
            .field("decoder", &self.decoder)
            .field("budget", &self.budget)
            .field("listener", &self.listener.is_some())
            .field("attempt_header", &self.attempt_header)
            .field("deadline_margin", &self.deadline_margin)
            .finish()
    }
}

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
pub(crate) fn deadline_open(deadline: Option<Instant>, now: Instant) -> Result<(), Stop> {
    match deadline {
        Some(deadline) if now >= deadline => Err(Stop::DeadlinePassed),
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

/// Calls `call` with the first attempt's `request` inside the call's span,
/// and returns its future with the span, kept only when a subscriber wants it
/// (boxed, so that a call nobody traces carries a pointer for it).
#[inline(always)]
pub(crate) fn call_in_span<B, F>(
    form: Form,
    request: http::Request<B>,
    call: impl FnOnce(http::Request<B>) -> F,
) -> (F, Option<Box<tracing::Span>>) {
    let (method, path) = (request.method(), request.uri().path());
    let span = match form {
        Form::Retry => tracing::debug_span!("retry", %method, path),
        Form::Hedge => tracing::debug_span!("hedge", %method, path),
    };
    let future = {
        let _entered = span.enter();
        call(request)
    };
    (future, (!span.is_disabled()).then(|| Box::new(span)))
}
