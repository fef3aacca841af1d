//! What the retry decides for one request, apart from the future that polls.

use super::{
    body::Pristine, Decoder, Reason, RetryEvent, RetryPolicy, Retryer, TryCloneBody, Verdict,
    WaitSource,
};
use super::{Attempts, FinalAttempt, RetryReport, Stop};
use crate::{
    limits::{self, Scheduled},
    RequestDeadline,
};
use std::{sync::Arc, time::Duration};
use tokio::time::Instant;

/// The retry's state for one request: the retryer, the attempts made, the
/// kept copy of the request and the caller's report. After each attempt,
/// [`after`](Self::after) says what comes next.
pub(crate) struct RetryState<B, D, R> {
    policy: Arc<RetryPolicy<D, R>>,
    retryer: R,
    // A pristine copy of the request for the next attempt; `None` when the
    // body cannot be replayed.
    request: Option<Pristine<B>>,
    // The caller's report, if the request carried one.
    report: Option<RetryReport>,
    // Attempts made so far, the current one included.
    attempts: u32,
    // The verdict on the last attempt, once there is one.
    verdict: Verdict,
    // Whether the last attempt's request is marked `FinalAttempt` for the
    // layers below.
    marks_final: bool,
}

/// What comes after an attempt, the outcome left with the caller.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Decision {
    /// Wait this long (not at all when zero), then retry; the outcome is
    /// dropped.
    Retry(Duration),
    /// The wait would reach the request's deadline: the outcome is kept until
    /// that instant.
    Cut(Instant),
    /// The call is over: the outcome, with its report, goes to the caller.
    Return,
}

/// What comes after an attempt.
#[derive(Debug)]
pub(crate) enum Next<O> {
    /// Wait this long (not at all when zero), then send
    /// [`next_request`](RetryState::next_request) on a ready service.
    Retry(Duration),
    /// Keep the outcome until the request's deadline, then hand it to
    /// [`at_deadline`](RetryState::at_deadline): the wait the retryer asked
    /// for would outlast the deadline.
    Cut { until: Instant, outcome: O },
    /// The call is over: return this outcome.
    Return(O),
}

impl<B, D, R> RetryState<B, D, R> {
    /// The state of a call whose first attempt is on its way.
    #[cfg(test)]
    pub(crate) fn new(
        policy: Arc<RetryPolicy<D, R>>,
        retryer: R,
        request: Option<Pristine<B>>,
        report: Option<RetryReport>,
    ) -> Self {
        Self::with_marks(policy, retryer, request, report, true)
    }

    /// The state of a call whose deadline the caller holds and passes to
    /// [`decide`](Self::decide) (no layer below reads a marker or an
    /// extension): the one-piece stack.
    #[inline(always)]
    pub(crate) fn owned(
        policy: Arc<RetryPolicy<D, R>>,
        retryer: R,
        request: Option<Pristine<B>>,
        report: Option<RetryReport>,
    ) -> Self {
        Self::with_marks(policy, retryer, request, report, false)
    }

    #[inline(always)]
    pub(crate) fn with_marks(
        policy: Arc<RetryPolicy<D, R>>,
        retryer: R,
        request: Option<Pristine<B>>,
        report: Option<RetryReport>,
        marks_final: bool,
    ) -> Self {
        Self {
            policy,
            retryer,
            request,
            report,
            attempts: 1,
            verdict: Verdict::Accept,
            marks_final,
        }
    }

    /// The policy.
    pub(crate) fn policy(&self) -> &RetryPolicy<D, R> {
        &self.policy
    }

    /// The number of attempts made so far.
    pub(crate) const fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Whether a copy of the request is still kept for another attempt.
    pub(crate) fn can_replay(&self) -> bool {
        self.request.as_ref().is_some_and(|p| !p.is_taken())
    }

    /// The outcome of a call that the inner service's failure to get ready
    /// for the next attempt ends.
    pub(crate) fn not_ready<T, E>(&mut self, error: E) -> Result<http::Response<T>, E> {
        let mut outcome = Err(error);
        self.end(Stop::NotReady, None, &mut outcome);
        outcome
    }

    /// The outcome kept through a wait the request's deadline cut short.
    pub(crate) fn at_deadline<T, E>(
        &mut self,
        mut outcome: Result<http::Response<T>, E>,
    ) -> Result<http::Response<T>, E> {
        self.end(Stop::DeadlinePassed, None, &mut outcome);
        outcome
    }

    /// Logs the end, tells the listener and the caller's report, and puts
    /// the summary on a response that has news in it.
    ///
    /// NOTE: the outcome is changed in place: it is the largest value of the
    /// call, and every move of it is a copy.
    fn end<T, E>(
        &mut self,
        stop: Stop,
        deadline: Option<RequestDeadline>,
        outcome: &mut Result<http::Response<T>, E>,
    ) {
        let summary = Attempts::new(self.attempts)
            .with_verdict(self.verdict)
            .with_stop(stop);
        // NOTE: the fields are evaluated only when the event is enabled, so
        // the clock is not read for nothing.
        tracing::debug!(
            attempts = summary.get(),
            verdict = %summary.verdict(),
            %stop,
            remaining_ms = deadline.map(|d| whole_millis(d.remaining())),
            "done"
        );
        if let Some(listener) = self.policy.listener() {
            listener.on_event(&RetryEvent::Done {
                attempts: summary.get(),
                verdict: summary.verdict(),
                stop,
            });
        }
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

impl<B: TryCloneBody, D, R: Retryer> RetryState<B, D, R> {
    /// Judges the outcome of the attempt just made and says what comes next.
    pub(crate) fn after<T, E>(
        &mut self,
        mut outcome: Result<http::Response<T>, E>,
    ) -> Next<Result<http::Response<T>, E>>
    where
        D: Decoder<T, E>,
    {
        let deadline = self.request.as_ref().and_then(Pristine::deadline);
        match self.decide(&mut outcome, deadline) {
            Decision::Return => Next::Return(outcome),
            Decision::Cut(until) => Next::Cut { until, outcome },
            Decision::Retry(wait) => {
                // NOTE: the discarded response (and its unread body) is
                // dropped here, before the next attempt.
                drop(outcome);
                Next::Retry(wait)
            }
        }
    }

    /// What [`after`](Self::after) decides, with the outcome left where it
    /// is: on `Return` it carries its report; otherwise the caller drops it
    /// (a `Cut` keeps it until the deadline, or drops it when a deadline of
    /// its own ends the call there). `deadline` is the request's.
    pub(crate) fn decide<T, E>(
        &mut self,
        outcome: &mut Result<http::Response<T>, E>,
        deadline: Option<RequestDeadline>,
    ) -> Decision
    where
        D: Decoder<T, E>,
    {
        let verdict = self.policy.decode(outcome);
        self.verdict = verdict;
        if let Some(budget) = self.policy.budget() {
            match verdict {
                Verdict::Retry { .. } => budget.record_retryable_failure(),
                Verdict::Accept => budget.record_success(),
                _ => {}
            }
        }
        let wait = match verdict {
            Verdict::Retry { after, reason } => self.wait(after, reason, deadline),
            Verdict::Fail { .. } => Err(Stop::Failed),
            _ => Err(Stop::Accepted),
        };
        let wait = match wait {
            Ok(wait) => wait,
            Err(stop) => {
                self.end(stop, deadline, outcome);
                return Decision::Return;
            }
        };
        // NOTE: no wait outlasts the request's deadline, whatever layer
        // recorded it (or none): a wait that would reach it ends there, with
        // the outcome at hand. A `Deadline` layer outside, whose timer is due
        // at the same instant, ends the call with its own error instead.
        let wait = match wait {
            Scheduled::After(wait) => wait,
            Scheduled::Cut(until) => {
                tracing::debug!(
                    attempt = self.attempts,
                    %verdict,
                    "the wait would reach the deadline: the outcome is kept until then"
                );
                return Decision::Cut(until);
            }
        };
        let remaining = deadline.map(|d| d.remaining());
        let source = match verdict.server_delay() {
            _ if wait.is_zero() => WaitSource::None,
            Some(_) => WaitSource::Server,
            None => WaitSource::Backoff,
        };
        tracing::debug!(
            attempt = self.attempts,
            %verdict,
            wait_ms = whole_millis(wait),
            %source,
            remaining_ms = remaining.map(whole_millis),
            "retrying"
        );
        if let Some(listener) = self.policy.listener() {
            listener.on_event(&RetryEvent::Retry {
                attempt: self.attempts,
                verdict,
                wait,
                source,
                remaining,
            });
        }
        Decision::Retry(wait)
    }

    /// The wait before a retry asked for with `reason` (and the server's
    /// `after`), or why none is made: the policy is on, the retryer has an
    /// attempt left, the request can be sent again, its `deadline` has not
    /// passed, it is safe to repeat, the retryer gives a delay, the budget
    /// allows it, and with deadline-aware scheduling the wait and a useful
    /// attempt fit; a wait that would reach the deadline is cut there
    /// ([`limits::schedule`]).
    fn wait(
        &mut self,
        after: Option<Duration>,
        reason: Reason,
        deadline: Option<RequestDeadline>,
    ) -> Result<Scheduled, Stop> {
        let policy = &*self.policy;
        if !policy.is_enabled() {
            return Err(Stop::Disabled);
        }
        if self
            .retryer
            .max_attempts()
            .is_some_and(|max| self.attempts >= max)
        {
            return Err(Stop::Exhausted);
        }
        let request = match self.request.as_ref().and_then(Pristine::kept) {
            Some(request) if request.body().is_replayable() => request,
            _ => return Err(Stop::NotReplayable),
        };
        if deadline.is_some_and(|d| d.is_expired()) {
            return Err(Stop::DeadlinePassed);
        }
        // NOTE: what `allows` reads (method, headers, the `Idempotency`
        // extension) is all in the kept copy.
        if !policy.allows(request, reason) {
            return Err(Stop::NotIdempotent);
        }
        let wait = self
            .retryer
            .next_delay(self.attempts, after)
            .ok_or(Stop::Exhausted)?;
        // NOTE: asked after the retryer, so that a call out of retries reads
        // `Exhausted`.
        if policy.budget().is_some_and(|budget| !budget.can_retry()) {
            return Err(Stop::BudgetExhausted);
        }
        limits::schedule(
            wait,
            deadline.map(|d| d.instant()),
            policy.deadline_margin(),
            Instant::now(),
        )
    }

    /// The request for the next attempt, counted: a copy of the kept one, or
    /// the kept one itself for the last attempt the retryer allows (and
    /// whenever copying fails now), marked [`FinalAttempt`] when it is the
    /// last.
    ///
    /// # Panics
    ///
    /// When no copy is kept: an invariant of the retry, which asks for a
    /// request only after [`after`](Self::after) said [`Next::Retry`], and
    /// that checked the copy was there.
    pub(crate) fn next_request(&mut self) -> http::Request<B> {
        let next = self.attempts.saturating_add(1);
        let last = self.retryer.max_attempts() == Some(next);
        let copy = match self.request.as_ref() {
            Some(pristine) if !last => pristine.next_attempt(),
            _ => None,
        };
        let mut request = match copy {
            Some(copy) => copy,
            None => self
                .request
                .as_mut()
                .and_then(Pristine::take)
                .expect("a retry is decided only with a request to replay"),
        };
        self.attempts = next;
        if self.marks_final && (last || !self.can_replay()) {
            request.extensions_mut().insert(FinalAttempt);
        }
        self.policy.number_attempt(&mut request, self.attempts);
        if let Some(report) = &self.report {
            report.record_attempt(self.attempts);
        }
        request
    }
}

/// `duration` in whole milliseconds for the logs, at most `u64::MAX`.
fn whole_millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
