//! Future types

use super::{body::try_clone_request, Decoder, RetryPolicy, Retryer, TryCloneBody, Verdict};
use crate::{AttemptCounter, Attempts, RequestDeadline};
use pin_project_lite::pin_project;
use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{ready, Context, Poll},
};
use tokio::time::Sleep;
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
        state: State<S::Future>,
        // The clone that makes every attempt after the first.
        service: S,
        // A pristine copy of the request for the next attempt; `None` when the
        // body cannot be replayed.
        request: Option<http::Request<B>>,
        policy: Arc<RetryPolicy<D, R>>,
        retryer: R,
        // Attempts made so far, the current one included.
        attempts: u32,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        // An attempt is in flight.
        Called {
            #[pin]
            future: F,
        },
        // Waiting before the next attempt.
        Backoff {
            #[pin]
            sleep: Sleep,
        },
        // Waiting for the inner service to be ready for the next attempt.
        Readying,
        // The outcome has been returned.
        Done,
    }
}

// ===== impl ResponseFuture =====

impl<S, B, D, R> ResponseFuture<S, B, D, R>
where
    S: Service<http::Request<B>>,
{
    pub(crate) fn new(
        future: S::Future,
        service: S,
        request: Option<http::Request<B>>,
        policy: Arc<RetryPolicy<D, R>>,
        retryer: R,
    ) -> Self {
        Self {
            state: State::Called { future },
            service,
            request,
            policy,
            retryer,
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

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Called { future } => {
                    let outcome = ready!(future.poll(cx));
                    let verdict = this.policy.decode(&outcome);
                    let delay = match (verdict, this.request.as_ref()) {
                        // NOTE: without a replayable copy of the request no
                        // retry is possible, and past the request's deadline
                        // none is useful: the retryer is not consulted.
                        (Verdict::Retry { after, .. }, Some(request))
                            if !RequestDeadline::of(request).is_some_and(|d| d.is_expired()) =>
                        {
                            this.retryer.next_delay(*this.attempts, after)
                        }
                        _ => None,
                    };
                    match delay {
                        // The discarded response (and its unread body) is dropped
                        // here, before the next attempt starts.
                        Some(delay) if delay.is_zero() => this.state.set(State::Readying),
                        Some(delay) => this.state.set(State::Backoff {
                            sleep: tokio::time::sleep(delay),
                        }),
                        None => {
                            this.state.set(State::Done);
                            let attempts = Attempts::new(*this.attempts).with_verdict(verdict);
                            return Poll::Ready(outcome.map(|mut response| {
                                response.extensions_mut().insert(attempts);
                                response
                            }));
                        }
                    }
                }
                StateProj::Backoff { sleep } => {
                    ready!(sleep.poll(cx));
                    this.state.set(State::Readying);
                }
                StateProj::Readying => {
                    // NOTE: the clone is called only after it reported ready
                    // (tower-service: "Be careful when cloning inner services").
                    if let Err(error) = ready!(this.service.poll_ready(cx)) {
                        this.state.set(State::Done);
                        return Poll::Ready(Err(error));
                    }
                    // Keep a pristine copy for a later attempt; should copying
                    // fail now, this attempt is the last.
                    let request = match this.request.as_ref().and_then(try_clone_request) {
                        Some(copy) => copy,
                        None => this
                            .request
                            .take()
                            .expect("Readying is entered only with a request to replay"),
                    };
                    *this.attempts += 1;
                    AttemptCounter::record_on(&request, *this.attempts);
                    let future = this.service.call(request);
                    this.state.set(State::Called { future });
                }
                StateProj::Done => panic!("ResponseFuture polled after completion"),
            }
        }
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
            State::Readying => "readying",
            State::Done => "done",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .field("attempts", &self.attempts)
            .field("replayable", &self.request.is_some())
            .finish_non_exhaustive()
    }
}
