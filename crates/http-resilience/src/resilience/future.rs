//! The response future of the one-piece stack, [`Resilient`](super::Resilient).

use crate::{
    attempt_timeout::error::AttemptTimedOut,
    deadline::{body::DeadlineBody, error::DeadlineExceeded},
    propagate::send_budget,
    retry::{Decision, Decoder, RetryState, Retryer, TryCloneBody},
    timer::saturating_after,
    BoxError, RequestDeadline,
};
use pin_project_lite::pin_project;
use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{ready, Context, Poll},
    time::Duration,
};
use tokio::time::{Instant, Sleep};
use tower_service::Service;

pin_project! {
    /// Response future of [`Resilient`](super::Resilient): the deadline, the
    /// retries and the limit of each attempt in one state machine, with one
    /// timer for the call.
    ///
    /// The timer is due at what ends the current step: an attempt's limit
    /// (never past the deadline), a wait before the next attempt, or the
    /// deadline. It is made at the first step that must wait, inline, and
    /// moved (not made again) for every later step.
    pub struct ResponseFuture<S, B, D, R>
    where
        S: Service<http::Request<B>>,
    {
        #[pin]
        state: State<S::Future>,
        #[pin]
        sleep: Option<Sleep>,
        // The clone that makes every attempt after the first.
        service: S,
        retry: RetryState<B, D, R>,
        deadline: RequestDeadline,
        limit: Duration,
        span: Option<Box<tracing::Span>>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        // An attempt is in flight until its end, its limit or the deadline:
        // `at` is its start until it first waits, and from then its end
        // (`ended` says which), so that an attempt answered at once never
        // works its end out.
        Called {
            #[pin]
            future: F,
            at: Instant,
            ended: bool,
        },
        // Waiting until `until` before the next attempt; a wait that reaches
        // the deadline ends the call there.
        Waiting {
            until: Instant,
        },
        // Waiting for the inner service to be ready for the next attempt.
        Readying,
        // The deadline had passed before the call: the inner service was not
        // called.
        Expired,
        // The output has been returned.
        Done,
    }
}

impl<S, B, D, R> ResponseFuture<S, B, D, R>
where
    S: Service<http::Request<B>>,
{
    #[inline(always)]
    pub(super) fn new(
        future: S::Future,
        started: Instant,
        service: S,
        retry: RetryState<B, D, R>,
        deadline: RequestDeadline,
        limit: Duration,
        span: Option<Box<tracing::Span>>,
    ) -> Self {
        Self {
            state: State::Called {
                future,
                at: started,
                ended: false,
            },
            sleep: None,
            service,
            retry,
            deadline,
            limit,
            span,
        }
    }

    pub(super) fn expired(
        service: S,
        retry: RetryState<B, D, R>,
        deadline: RequestDeadline,
        limit: Duration,
    ) -> Self {
        Self {
            state: State::Expired,
            sleep: None,
            service,
            retry,
            deadline,
            limit,
            span: None,
        }
    }
}

/// Polls the call's timer, due at `at`: made on first use, moved when it is
/// due at another instant.
fn poll_timer(mut sleep: Pin<&mut Option<Sleep>>, at: Instant, cx: &mut Context<'_>) -> Poll<()> {
    match sleep.as_mut().as_pin_mut() {
        Some(mut timer) => {
            if timer.deadline() != at {
                timer.as_mut().reset(at);
            }
        }
        None => sleep.set(Some(tokio::time::sleep_until(at))),
    }
    sleep
        .as_pin_mut()
        .expect("the timer was made above")
        .poll(cx)
}

/// Whether the call's timer has fired at the deadline: the deadline then
/// wins over an outcome that is ready at the same instant, as a
/// `DeadlineLayer` outside a retry does.
fn deadline_fired(sleep: Pin<&mut Option<Sleep>>, deadline: Instant) -> bool {
    sleep
        .as_ref()
        .get_ref()
        .as_ref()
        .is_some_and(|timer| timer.deadline() == deadline && timer.is_elapsed())
}

impl<S, B, T, D, R> Future for ResponseFuture<S, B, D, R>
where
    S: Service<http::Request<B>, Response = http::Response<T>>,
    S::Error: Into<BoxError>,
    B: TryCloneBody,
    D: Decoder<T, BoxError>,
    R: Retryer,
{
    type Output = Result<http::Response<DeadlineBody<T>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let _entered = this.span.as_deref().map(tracing::Span::enter);
        let deadline = *this.deadline;
        let exceeded = || -> BoxError { DeadlineExceeded::new(deadline.budget()).into() };
        loop {
            let outcome = match this.state.as_mut().project() {
                StateProj::Called { future, at, ended } => {
                    if deadline_fired(this.sleep.as_mut(), deadline.instant()) {
                        this.state.set(State::Done);
                        return Poll::Ready(Err(exceeded()));
                    }
                    // NOTE: the response is polled first, so a response ready
                    // in the same poll as an attempt's limit counts.
                    match future.poll(cx) {
                        Poll::Ready(outcome) => outcome.map_err(Into::into),
                        Poll::Pending => {
                            if !*ended {
                                *at = attempt_end(*at, *this.limit, deadline);
                                *ended = true;
                            }
                            let end = *at;
                            ready!(poll_timer(this.sleep.as_mut(), end, cx));
                            if end >= deadline.instant() {
                                this.state.set(State::Done);
                                return Poll::Ready(Err(exceeded()));
                            }
                            Err(AttemptTimedOut::new(*this.limit).into())
                        }
                    }
                }
                StateProj::Waiting { until } => {
                    let until = *until;
                    ready!(poll_timer(this.sleep.as_mut(), until, cx));
                    if until >= deadline.instant() {
                        this.state.set(State::Done);
                        return Poll::Ready(Err(exceeded()));
                    }
                    this.state.set(State::Readying);
                    continue;
                }
                StateProj::Readying => {
                    if deadline_fired(this.sleep.as_mut(), deadline.instant()) {
                        this.state.set(State::Done);
                        return Poll::Ready(Err(exceeded()));
                    }
                    let ready = match this.service.poll_ready(cx) {
                        Poll::Ready(ready) => ready,
                        Poll::Pending => {
                            // NOTE: a service that never gets ready is still
                            // bounded by the deadline.
                            ready!(poll_timer(this.sleep.as_mut(), deadline.instant(), cx));
                            this.state.set(State::Done);
                            return Poll::Ready(Err(exceeded()));
                        }
                    };
                    if let Err(error) = ready {
                        this.state.set(State::Done);
                        let outcome = this.retry.not_ready(error.into());
                        return Poll::Ready(outcome.map(|r| with_deadline(r, deadline)));
                    }
                    let now = Instant::now();
                    if deadline.instant() <= now {
                        this.state.set(State::Done);
                        return Poll::Ready(Err(exceeded()));
                    }
                    let mut request = this.retry.next_request();
                    if let Some((header, format)) = this.retry.policy().budget_header() {
                        let left = deadline.instant().saturating_duration_since(now);
                        let limit = Some(*this.limit);
                        if send_budget(&mut request, header, format, Some(left), limit).is_err() {
                            this.state.set(State::Done);
                            return Poll::Ready(Err(exceeded()));
                        }
                    }
                    let future = this.service.call(request);
                    this.state.set(State::Called {
                        future,
                        at: now,
                        ended: false,
                    });
                    continue;
                }
                StateProj::Expired => {
                    this.state.set(State::Done);
                    return Poll::Ready(Err(exceeded()));
                }
                StateProj::Done => panic!("ResponseFuture polled after completion"),
            };
            let mut outcome = outcome;
            match this.retry.decide(&mut outcome, Some(deadline)) {
                Decision::Return => {
                    this.state.set(State::Done);
                    return Poll::Ready(outcome.map(|r| with_deadline(r, deadline)));
                }
                Decision::Retry(wait) if wait.is_zero() => this.state.set(State::Readying),
                Decision::Retry(wait) => this.state.set(State::Waiting {
                    until: saturating_after(Instant::now(), wait),
                }),
                // NOTE: the wait reaches the deadline, which ends the call
                // there; the outcome in hand is dropped now rather than held.
                Decision::Cut(until) => this.state.set(State::Waiting { until }),
            }
            // NOTE: the discarded outcome (and its unread body) is dropped
            // before the next attempt.
            drop(outcome);
        }
    }
}

/// The end of an attempt started at `now`: its limit, or the deadline when
/// that comes first (or at the same instant: the deadline wins a tie).
fn attempt_end(now: Instant, limit: Duration, deadline: RequestDeadline) -> Instant {
    saturating_after(now, limit).min(deadline.instant())
}

fn with_deadline<T>(
    response: http::Response<T>,
    deadline: RequestDeadline,
) -> http::Response<DeadlineBody<T>> {
    response.map(|body| DeadlineBody::new(body, deadline))
}

impl<S, B, D, R> fmt::Debug for ResponseFuture<S, B, D, R>
where
    S: Service<http::Request<B>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Called { .. } => "called",
            State::Waiting { .. } => "waiting",
            State::Readying => "readying",
            State::Expired => "deadline already passed",
            State::Done => "done",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .field("attempts", &self.retry.attempts())
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}
