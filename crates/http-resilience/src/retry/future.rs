//! Future types

use super::{
    body::Pristine, Decoder, Reason, RetryEvent, RetryPolicy, Retryer, TryCloneBody, Verdict,
    WaitSource,
};
use crate::{extensions::saturating_after, Attempts, RequestDeadline, RetryReport, Stop};
use pin_project_lite::pin_project;
use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{ready, Context, Poll},
    time::Duration,
};
use tokio::time::{Instant, Sleep};
use tower_service::Service;

pin_project! {
    /// Response future of [`StatusRetry`](super::StatusRetry).
    ///
    /// A state machine: an attempt is `Called`; a retryable outcome leads to
    /// `Backoff` (skipped for a zero wait), then `Readying` (the inner clone's
    /// `poll_ready`), then `Called` again.
    pub struct ResponseFuture<S, B, D, R>
    where
        S: Service<http::Request<B>>,
    {
        #[pin]
        state: State<S::Future, Result<S::Response, S::Error>>,
        // The clone that makes every attempt after the first.
        service: S,
        // A pristine copy of the request for the next attempt; `None` when the
        // body cannot be replayed.
        request: Option<Pristine<B>>,
        policy: Arc<RetryPolicy<D, R>>,
        retryer: R,
        // The caller's report, if the request carried one.
        report: Option<RetryReport>,
        // The span of the whole call, when a subscriber wants it: boxed, so
        // that a call nobody traces carries a pointer for it, not a span.
        span: Option<Box<tracing::Span>>,
        // Attempts made so far, the current one included.
        attempts: u32,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, O> {
        // An attempt is in flight.
        Called {
            #[pin]
            future: F,
        },
        // Waiting before the next attempt.
        Backoff {
            // Boxed: a wait is a slow path anyway, and an inline `Sleep`
            // would be the largest state around a client whose own future is
            // boxed.
            sleep: Pin<Box<Sleep>>,
            // The verdict on the attempt that led here, for the summary.
            verdict: Verdict,
        },
        // A wait that the request's deadline cuts short: at the deadline, the
        // outcome kept here is returned.
        Cut {
            sleep: Pin<Box<Sleep>>,
            // Boxed: the path is rare, and the outcome would otherwise widen
            // every state.
            outcome: Option<Box<O>>,
            verdict: Verdict,
        },
        // Waiting for the inner service to be ready for the next attempt.
        Readying {
            // The verdict on the attempt that led here, for the summary.
            verdict: Verdict,
        },
        // The outcome has been returned.
        Done,
    }
}

// ===== impl ResponseFuture =====

impl<S, B, D, R> ResponseFuture<S, B, D, R>
where
    S: Service<http::Request<B>>,
{
    #[inline]
    pub(crate) fn new(
        future: S::Future,
        service: S,
        request: Option<Pristine<B>>,
        policy: Arc<RetryPolicy<D, R>>,
        retryer: R,
        report: Option<RetryReport>,
        span: Option<Box<tracing::Span>>,
    ) -> Self {
        Self {
            state: State::Called { future },
            service,
            request,
            policy,
            retryer,
            report,
            span,
            attempts: 1,
        }
    }
}

impl<S, B, T, D, R> Future for ResponseFuture<S, B, D, R>
where
    S: Service<http::Request<B>, Response = http::Response<T>>,
    B: TryCloneBody,
    D: Decoder<T, S::Error>,
    R: Retryer,
{
    type Output = Result<http::Response<T>, S::Error>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let _entered = this.span.as_deref().map(tracing::Span::enter);
        loop {
            match this.state.as_mut().project() {
                StateProj::Called { future } => {
                    let outcome = ready!(future.poll(cx));
                    let verdict = this.policy.decode(&outcome);
                    if let Some(budget) = this.policy.budget() {
                        match verdict {
                            Verdict::Retry { .. } => budget.record_retryable_failure(),
                            Verdict::Accept => budget.record_success(),
                            _ => {}
                        }
                    }
                    let deadline = this.request.as_ref().and_then(Pristine::deadline);
                    let next = match verdict {
                        Verdict::Retry { after, reason } => {
                            let bound = this.retryer.max_attempts();
                            let spent = bound.is_some_and(|max| *this.attempts >= max);
                            decide(this.policy, this.request.as_ref(), deadline, reason, spent)
                                .and_then(|()| {
                                    this.retryer
                                        .next_delay(*this.attempts, after)
                                        .ok_or(Stop::Exhausted)
                                })
                                .and_then(|delay| {
                                    // NOTE: asked after the retryer, so that a
                                    // call out of retries reads `Exhausted`.
                                    match this.policy.budget() {
                                        Some(budget) if !budget.can_retry() => {
                                            Err(Stop::BudgetExhausted)
                                        }
                                        _ => Ok(delay),
                                    }
                                })
                                .and_then(|delay| fits(this.policy, deadline, delay))
                        }
                        Verdict::Fail { .. } => Err(Stop::Failed),
                        _ => Err(Stop::Accepted),
                    };
                    let delay = match next {
                        Ok(delay) => delay,
                        Err(stop) => {
                            this.state.set(State::Done);
                            let end = End::new(*this.attempts, verdict, stop, deadline);
                            return Poll::Ready(end.conclude(
                                this.policy,
                                this.report.as_ref(),
                                outcome,
                            ));
                        }
                    };
                    // NOTE: no wait outlasts the request's deadline, whatever
                    // layer recorded it (or none): a wait that would reach it
                    // ends there, with the outcome at hand. A `Deadline` layer
                    // outside, whose timer is due at the same instant, ends
                    // the call with its own error instead.
                    if let Some(at) = deadline.map(|d| d.instant()).filter(|&at| {
                        !delay.is_zero() && saturating_after(Instant::now(), delay) >= at
                    }) {
                        tracing::debug!(
                            attempt = *this.attempts,
                            %verdict,
                            wait_ms = whole_millis(delay),
                            "the wait would reach the deadline: the outcome is kept until then"
                        );
                        this.state.set(State::Cut {
                            sleep: Box::pin(tokio::time::sleep_until(at)),
                            outcome: Some(Box::new(outcome)),
                            verdict,
                        });
                        continue;
                    }
                    let remaining = deadline.map(|d| d.remaining());
                    let source = match verdict.server_delay() {
                        _ if delay.is_zero() => WaitSource::None,
                        Some(_) => WaitSource::Server,
                        None => WaitSource::Backoff,
                    };
                    tracing::debug!(
                        attempt = *this.attempts,
                        %verdict,
                        wait_ms = whole_millis(delay),
                        %source,
                        remaining_ms = remaining.map(whole_millis),
                        "retrying"
                    );
                    if let Some(listener) = this.policy.listener() {
                        listener.on_event(&RetryEvent::Retry {
                            attempt: *this.attempts,
                            verdict,
                            wait: delay,
                            source,
                            remaining,
                        });
                    }
                    // NOTE: the discarded response (and its unread body) is
                    // dropped here, before the next attempt.
                    drop(outcome);
                    if delay.is_zero() {
                        this.state.set(State::Readying { verdict });
                    } else {
                        this.state.set(State::Backoff {
                            sleep: Box::pin(tokio::time::sleep(delay)),
                            verdict,
                        });
                    }
                }
                StateProj::Backoff { sleep, verdict } => {
                    ready!(sleep.as_mut().poll(cx));
                    let verdict = *verdict;
                    this.state.set(State::Readying { verdict });
                }
                StateProj::Cut {
                    sleep,
                    outcome,
                    verdict,
                } => {
                    ready!(sleep.as_mut().poll(cx));
                    let end = End::new(*this.attempts, *verdict, Stop::DeadlinePassed, None);
                    let outcome = *outcome.take().expect("the outcome is kept until the cut");
                    this.state.set(State::Done);
                    return Poll::Ready(end.conclude(this.policy, this.report.as_ref(), outcome));
                }
                StateProj::Readying { verdict } => {
                    // NOTE: the clone is called only after it reported ready
                    // (tower-service: "Be careful when cloning inner services").
                    if let Err(error) = ready!(this.service.poll_ready(cx)) {
                        // NOTE: the summary tells what happened: the last
                        // attempt's verdict (a retryable one, since a retry
                        // was on its way), and that readiness failed.
                        let end = End::new(*this.attempts, *verdict, Stop::NotReady, None);
                        this.state.set(State::Done);
                        return Poll::Ready(end.conclude(
                            this.policy,
                            this.report.as_ref(),
                            Err(error),
                        ));
                    }
                    // Keep a pristine copy for a later attempt; the last
                    // attempt the retryer allows takes the copy itself, and so
                    // does this one should copying fail now.
                    // NOTE: the `expect` is an invariant of this state machine,
                    // not of any input: `Readying` is entered after `decide`
                    // found the copy present and not taken, and only a state
                    // that took it has moved to `Done` since.
                    let next = this.attempts.saturating_add(1);
                    let last = this.retryer.max_attempts() == Some(next);
                    let copy = match this.request.as_ref() {
                        Some(pristine) if !last => pristine.next_attempt(),
                        _ => None,
                    };
                    let mut request = match copy {
                        Some(copy) => copy,
                        None => this
                            .request
                            .as_mut()
                            .and_then(Pristine::take)
                            .expect("Readying is entered only with a request to replay"),
                    };
                    *this.attempts = next;
                    if last || this.request.as_ref().is_none_or(Pristine::is_taken) {
                        request.extensions_mut().insert(crate::FinalAttempt);
                    }
                    if let Some(name) = this.policy.attempt_header() {
                        super::set_attempt_header(&mut request, name, *this.attempts);
                    }
                    if let Some(report) = this.report.as_ref() {
                        report.record_attempt(*this.attempts);
                    }
                    let future = this.service.call(request);
                    this.state.set(State::Called { future });
                }
                StateProj::Done => panic!("ResponseFuture polled after completion"),
            }
        }
    }
}

/// How a call ends: the attempts made, the verdict on the last, why no
/// further attempt is made, and the deadline (for the log).
struct End {
    summary: Attempts,
    deadline: Option<RequestDeadline>,
}

impl End {
    fn new(attempts: u32, verdict: Verdict, stop: Stop, deadline: Option<RequestDeadline>) -> Self {
        Self {
            summary: Attempts::new(attempts)
                .with_verdict(verdict)
                .with_stop(stop),
            deadline,
        }
    }

    /// Logs the end, tells the listener and the caller's report, and puts
    /// the summary on a response that has news in it.
    fn conclude<T, E, D, R>(
        self,
        policy: &RetryPolicy<D, R>,
        report: Option<&RetryReport>,
        outcome: Result<http::Response<T>, E>,
    ) -> Result<http::Response<T>, E> {
        let summary = self.summary;
        // NOTE: the fields are evaluated only when the event is enabled, so
        // the clock is not read for nothing.
        tracing::debug!(
            attempts = summary.get(),
            verdict = %summary.verdict(),
            stop = %summary.stop(),
            remaining_ms = self.deadline.map(|d| whole_millis(d.remaining())),
            "done"
        );
        if let Some(listener) = policy.listener() {
            listener.on_event(&RetryEvent::GiveUp {
                attempts: summary.get(),
                verdict: summary.verdict(),
                stop: summary.stop(),
            });
        }
        if let Some(report) = report {
            report.record_summary(summary);
        }
        outcome.map(|mut response| {
            // NOTE: a first attempt accepted, the common case, has nothing to
            // report and costs nothing (an extension allocates the map and
            // the value when the map is empty).
            if summary.is_news() {
                response.extensions_mut().insert(summary);
            }
            response
        })
    }
}

impl<S, B, D, R> fmt::Debug for ResponseFuture<S, B, D, R>
where
    S: Service<http::Request<B>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Called { .. } => "called",
            State::Backoff { .. } => "backoff",
            State::Cut { .. } => "waiting for the deadline",
            State::Readying { .. } => "readying",
            State::Done => "done",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .field("attempts", &self.attempts)
            .field(
                "replayable",
                &self.request.as_ref().is_some_and(|p| !p.is_taken()),
            )
            .finish_non_exhaustive()
    }
}

/// Whether a retry asked for with `reason` may be made: the policy is on, the
/// retryer's bound on attempts is not `spent`, the request can be sent again,
/// its `deadline` has not passed, and it is safe to repeat.
fn decide<D, R, B: TryCloneBody>(
    policy: &RetryPolicy<D, R>,
    request: Option<&Pristine<B>>,
    deadline: Option<RequestDeadline>,
    reason: Reason,
    spent: bool,
) -> Result<(), Stop> {
    if !policy.is_enabled() {
        return Err(Stop::Disabled);
    }
    if spent {
        return Err(Stop::Exhausted);
    }
    let request = match request.and_then(Pristine::kept) {
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
    Ok(())
}

/// `duration` in whole milliseconds for the logs, at most `u64::MAX`.
fn whole_millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// With deadline-aware scheduling, whether a wait of `delay` and then a
/// useful attempt fit before the deadline.
fn fits<D, R>(
    policy: &RetryPolicy<D, R>,
    deadline: Option<RequestDeadline>,
    delay: Duration,
) -> Result<Duration, Stop> {
    match (policy.deadline_margin(), deadline) {
        (Some(min_attempt), Some(deadline))
            if deadline.remaining() < delay.saturating_add(min_attempt) =>
        {
            Err(Stop::WouldMissDeadline)
        }
        _ => Ok(delay),
    }
}
