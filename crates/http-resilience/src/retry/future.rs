//! Future types

use super::{
    state::{Decision, Kept, RetryState},
    Decoder, Retryer, TryCloneBody,
};
use crate::{telemetry, timer::saturating_after};
use pin_project_lite::pin_project;

use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{ready, Context, Poll},
};
use tokio::time::{Instant, Sleep};
use tower_service::Service;

pin_project! {
    /// Response future of [`StatusRetry`](super::StatusRetry).
    ///
    /// A state machine that only polls: an attempt is `Called`; what comes
    /// after it is decided by the request's retry state, and leads to
    /// `Backoff` (skipped for a zero wait), then `Readying` (the inner clone's
    /// `poll_ready`), then `Called` again; or to `Cut`, a wait that ends at the
    /// request's deadline with the outcome kept.
    pub struct ResponseFuture<S, B, D, R>
    where
        S: Service<http::Request<B>>,
    {
        #[pin]
        state: State<S::Future, Result<S::Response, S::Error>>,
        // The clone that makes every attempt after the first.
        service: S,
        retry: RetryState<B, D, R>,
        // The span of the whole call, when a subscriber wants it: boxed, so
        // that a call nobody traces carries a pointer for it, not a span.
        span: Option<Box<tracing::Span>>,
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
        // Waiting before the next attempt, with the outcome that asked for
        // it: returned if the body is lost meanwhile, or, when the
        // request's deadline cuts the wait short (`cut`), at the deadline.
        // Boxed: a wait is a slow path, and an inline `Sleep` and outcome
        // would be the largest state around a client whose own future is
        // boxed.
        Waiting {
            sleep: Pin<Box<Sleep>>,
            outcome: Option<Kept<O>>,
            cut: bool,
        },
        // Waiting for the inner service to be ready for the next attempt.
        Readying,
        // The outcome has been returned.
        Done,
    }
}

impl<F, O> State<F, O> {
    /// A wait until `until`, with `outcome` kept through it; `cut` when the
    /// deadline ends it.
    fn waiting(until: Instant, outcome: O, cut: bool) -> Self {
        State::Waiting {
            sleep: Box::pin(tokio::time::sleep_until(until)),
            outcome: Some(Kept::new(outcome)),
            cut,
        }
    }
}

// ===== impl ResponseFuture =====

impl<S, B, D, R> ResponseFuture<S, B, D, R>
where
    S: Service<http::Request<B>>,
{
    #[inline(always)]
    pub(crate) fn new(
        future: S::Future,
        service: S,
        retry: RetryState<B, D, R>,
        span: Option<Box<tracing::Span>>,
    ) -> Self {
        Self {
            state: State::Called { future },
            service,
            retry,
            span,
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
            let output = match this.state.as_mut().project() {
                StateProj::Called { future } => {
                    let span = this.retry.attempt_span();
                    let outcome = ready!(telemetry::poll_in(span, future, cx));
                    judge(this.retry, outcome, this.state.as_mut())
                }
                StateProj::Waiting {
                    sleep,
                    outcome,
                    cut,
                } => {
                    ready!(sleep.as_mut().poll(cx));
                    let kept = outcome
                        .take()
                        .expect("the outcome is kept through the wait");
                    let cut = *cut;
                    after_wait(this.retry, kept.into_inner(), cut, this.state.as_mut())
                }
                StateProj::Readying => {
                    // NOTE: the clone is called only after it reported ready
                    // (tower-service: "Be careful when cloning inner services").
                    match ready!(this.service.poll_ready(cx)) {
                        Err(error) => Some(this.retry.not_ready(error)),
                        Ok(()) => {
                            let future = send_next(this.service, this.retry);
                            this.state.set(State::Called { future });
                            None
                        }
                    }
                }
                StateProj::Done => panic!("ResponseFuture polled after completion"),
            };
            if let Some(output) = output {
                this.state.set(State::Done);
                this.retry.record_end_on(this.span.as_deref());
                return Poll::Ready(output);
            }
        }
    }
}

/// Judges an attempt's `outcome`: the call's output, or `None` with the next
/// state set.
#[inline(always)]
fn judge<F, B, T, E, D, R>(
    retry: &mut RetryState<B, D, R>,
    mut outcome: Result<http::Response<T>, E>,
    mut state: Pin<&mut State<F, Result<http::Response<T>, E>>>,
) -> Option<Result<http::Response<T>, E>>
where
    B: TryCloneBody,
    D: Decoder<T, E>,
    R: Retryer,
{
    let deadline = retry.request_deadline();
    match retry.decide(&mut outcome, deadline) {
        Decision::Return => return Some(outcome),
        // NOTE: the discarded response (and its unread body) is dropped
        // before the next attempt.
        Decision::Retry(wait) if wait.is_zero() => state.set(State::Readying),
        Decision::Retry(wait) => {
            let until = saturating_after(Instant::now(), wait);
            state.set(State::waiting(until, outcome, false));
        }
        Decision::Cut(until) => state.set(State::waiting(until, outcome, true)),
    }
    None
}

/// After a wait with the outcome `kept` through it: the call's output when
/// the wait was `cut` by the deadline or the body was lost meanwhile, or
/// `None` with the service to be readied for the next attempt.
fn after_wait<F, B, T, E, D, R>(
    retry: &mut RetryState<B, D, R>,
    kept: Result<http::Response<T>, E>,
    cut: bool,
    mut state: Pin<&mut State<F, Result<http::Response<T>, E>>>,
) -> Option<Result<http::Response<T>, E>>
where
    B: TryCloneBody,
    R: Retryer,
{
    let ended = match cut {
        true => Some(retry.at_deadline(kept)),
        false => retry.after_wait(kept),
    };
    if ended.is_none() {
        state.set(State::Readying);
    }
    ended
}

/// Sends the next attempt's request on `service` (ready), within the
/// attempt's span.
#[inline(always)]
fn send_next<S, B, D, R>(service: &mut S, retry: &mut RetryState<B, D, R>) -> S::Future
where
    S: Service<http::Request<B>>,
    B: TryCloneBody,
    R: Retryer,
{
    let request = retry.next_request();
    let _entered = telemetry::enter(retry.attempt_span());
    service.call(request)
}

impl<S, B, D, R> fmt::Debug for ResponseFuture<S, B, D, R>
where
    S: Service<http::Request<B>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Called { .. } => "called",
            State::Waiting { cut: false, .. } => "backoff",
            State::Waiting { cut: true, .. } => "waiting for the deadline",
            State::Readying => "readying",
            State::Done => "done",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .field("attempts", &self.retry.attempts())
            .field("replayable", &self.retry.can_replay())
            .finish_non_exhaustive()
    }
}
