//! Future types

use super::{body::DeadlineBody, error::DeadlineExceeded};
use crate::timer::{deadline_fired, poll_until, LazySleep};
use crate::{BoxError, RequestDeadline};
use pin_project_lite::pin_project;
use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{ready, Context, Poll},
};

pin_project! {
    /// Response future of [`Deadline`](super::Deadline).
    pub struct ResponseFuture<F> {
        #[pin]
        state: State<F>,
        deadline: RequestDeadline,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        // The call is running against the deadline.
        Running {
            #[pin]
            response: F,
            // Made at the first poll that leaves the call pending, so that a
            // call answered at once never touches the timer.
            sleep: LazySleep,
        },
        // The deadline had passed before the call: the inner service was not called.
        Expired,
        // The output has been returned.
        Done,
    }
}

// ===== impl ResponseFuture =====

impl<F> ResponseFuture<F> {
    #[inline]
    pub(crate) fn new(response: F, deadline: RequestDeadline) -> Self {
        Self {
            state: State::Running {
                response,
                sleep: None,
            },
            deadline,
        }
    }

    pub(crate) fn expired(deadline: RequestDeadline) -> Self {
        Self {
            state: State::Expired,
            deadline,
        }
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<http::Response<B>, E>>,
    E: Into<BoxError>,
{
    type Output = Result<http::Response<DeadlineBody<B>>, BoxError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let deadline = *this.deadline;
        let mut state = this.state;
        let output = match state.as_mut().project() {
            StateProj::Running { response, sleep } => {
                // NOTE: a head returned once the deadline fired could not
                // have its body read anyway: the body checks the deadline
                // first.
                if deadline_fired(sleep.as_deref(), deadline.instant()) {
                    Err(DeadlineExceeded::new(deadline.budget()).into())
                } else if let Poll::Ready(result) = response.poll(cx) {
                    // NOTE: the timer, if the call armed one, is due at the
                    // same instant: the body takes it over.
                    let timer = sleep.take();
                    result
                        .map(|response| {
                            response.map(|body| DeadlineBody::with_timer(body, deadline, timer))
                        })
                        .map_err(Into::into)
                } else {
                    ready!(poll_until(sleep, deadline.instant(), cx));
                    Err(DeadlineExceeded::new(deadline.budget()).into())
                }
            }
            StateProj::Expired => Err(DeadlineExceeded::new(deadline.budget()).into()),
            StateProj::Done => panic!("ResponseFuture polled after completion"),
        };
        // Drops the inner future and the timer as soon as there is an outcome.
        state.set(State::Done);
        Poll::Ready(output)
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Running { .. } => "running",
            State::Expired => "deadline already passed",
            State::Done => "done",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .field("deadline", &self.deadline)
            .finish_non_exhaustive()
    }
}
