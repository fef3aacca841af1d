//! Future types

use super::call::{Call, Output, State, StateProj, Step};
use crate::{
    body::TryCloneBody,
    coop,
    guard::{Guard, Settle},
    policy::{Decoder, Retryer},
    timer::poll_timer,
    BoxError,
};
use pin_project_lite::pin_project;
use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{ready, Context, Poll},
};
use tokio::time::Sleep;
use tower_service::Service;

pub(crate) use super::call::Limits;

pin_project! {
    /// Response future of [`Resilience`](super::Resilience): the deadline, the
    /// retries, the guard and the limit of each attempt in one state machine,
    /// with one timer for the call.
    ///
    /// The timer is due at what ends the current step: an attempt's limit
    /// (never past the deadline), a wait before the next attempt, or the
    /// deadline. It is made at the first step that must wait, inline, and
    /// moved (not made again) for every later step.
    pub struct ResponseFuture<S, B, D, R, G = ()>
    where
        S: Service<http::Request<B>>,
        G: Guard,
    {
        // NOTE: the fields are the parent's to fill: `Resilience::call`
        // assembles the future once its first attempt is admitted, each part
        // moved in once.
        #[pin]
        pub(super) state: State<S::Future, B, Result<S::Response, BoxError>>,
        #[pin]
        pub(super) sleep: Option<Sleep>,
        pub(super) call: Call<S, B, D, R, G>,
        pub(super) span: Option<Box<tracing::Span>>,
    }
}

impl<S, B, D, R, G> ResponseFuture<S, B, D, R, G>
where
    S: Service<http::Request<B>>,
    G: Guard,
{
    /// The future of a call that sent nothing: its deadline had passed.
    #[inline(always)]
    pub(super) fn expired(call: Call<S, B, D, R, G>) -> Self {
        Self {
            state: State::Expired,
            sleep: None,
            call,
            span: None,
        }
    }
}

impl<S, B, T, D, R, G> Future for ResponseFuture<S, B, D, R, G>
where
    S: Service<http::Request<B>, Response = http::Response<T>>,
    S::Error: Into<BoxError>,
    B: TryCloneBody,
    D: Decoder<T, BoxError>,
    R: Retryer,
    G: Settle<T>,
{
    type Output = Output<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let _entered = this.span.as_deref().map(tracing::Span::enter);
        let call = this.call;
        loop {
            let step = match this.state.as_mut().project() {
                StateProj::Called { future, at, ended } => {
                    ready!(call.poll_attempt(future, at, ended, this.sleep.as_mut(), cx))
                }
                StateProj::Waiting { until, outcome } => {
                    let until = *until;
                    ready!(poll_timer(this.sleep.as_mut(), until, cx));
                    let kept = outcome.take();
                    call.after_wait(until, kept, this.state.as_mut())
                }
                StateProj::Readying => {
                    ready!(call.poll_send(this.state.as_mut(), this.sleep.as_mut(), cx))
                }
                StateProj::Queued { request } => {
                    match ready!(call.poll_queued(this.sleep.as_mut(), cx)) {
                        Some(step) => step,
                        None => {
                            let request = *request
                                .take()
                                .expect("ResponseFuture polled after completion");
                            call.send_parked(request, this.state.as_mut())
                        }
                    }
                }
                StateProj::Refused { error } => {
                    Step::Judge(call.kept(ready!(coop::poll_turned_away(error, cx))))
                }
                StateProj::Expired => Step::End(Err(call.exceeded())),
                StateProj::Done => panic!("ResponseFuture polled after completion"),
            };
            let output = match step {
                Step::Again => continue,
                Step::End(output) => output,
                Step::Judge(outcome) => match call.judge(outcome, this.state.as_mut()) {
                    Some(output) => output,
                    None => continue,
                },
            };
            call.end(&output, this.span.as_deref());
            this.state.set(State::Done);
            return Poll::Ready(output);
        }
    }
}

impl<S, B, D, R, G> fmt::Debug for ResponseFuture<S, B, D, R, G>
where
    S: Service<http::Request<B>>,
    G: Guard,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Called { .. } => "called",
            State::Waiting { .. } => "waiting",
            State::Readying => "readying",
            State::Queued { .. } => "waiting for the guard",
            State::Refused { .. } => "turned away",
            State::Expired => "deadline passed",
            State::Done => "done",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .field("attempts", &self.call.attempts())
            .field("deadline", &self.call.deadline())
            .finish_non_exhaustive()
    }
}
