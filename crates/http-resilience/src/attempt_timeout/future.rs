//! Future types

use crate::deadline::error::DeadlineExceeded;
use crate::limits::Expiry;
use crate::timer::{poll_until, LazySleep};
use crate::BoxError;
use pin_project_lite::pin_project;
use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{ready, Context, Poll},
    time::Duration,
};
use tokio::time::Instant;

pin_project! {
    /// Response future of [`AttemptTimeout`](super::AttemptTimeout).
    pub struct ResponseFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        // The attempt is running against its timer.
        Running {
            #[pin]
            response: F,
            // When the timer is due; it is made at the first poll that leaves
            // the attempt pending, so that an attempt answered at once never
            // touches the timer.
            end: Instant,
            sleep: LazySleep,
            expiry: Expiry,
        },
        // The request's deadline had already passed: the inner service was not called.
        Expired {
            budget: Duration,
        },
        // The error has been returned.
        Done,
    }
}

// ===== impl ResponseFuture =====

impl<F> ResponseFuture<F> {
    #[inline]
    pub(crate) fn new(response: F, end: Instant, expiry: Expiry) -> Self {
        Self {
            state: State::Running {
                response,
                end,
                sleep: None,
                expiry,
            },
        }
    }

    pub(crate) fn expired(budget: Duration) -> Self {
        Self {
            state: State::Expired { budget },
        }
    }
}

impl<F, T, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    #[inline]
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut state = self.project().state;
        match state.as_mut().project() {
            StateProj::Running {
                response,
                end,
                sleep,
                expiry,
            } => {
                // NOTE: the response is polled first, so a response that is ready
                // in the same poll as the timer counts as a success.
                if let Poll::Ready(result) = response.poll(cx) {
                    return Poll::Ready(result.map_err(Into::into));
                }
                ready!(poll_until(sleep, *end, cx));
                let error = expiry.into_error();
                // Drop the inner future (and the attempt) at once.
                state.set(State::Done);
                Poll::Ready(Err(error))
            }
            StateProj::Expired { budget } => {
                let error = DeadlineExceeded::new(*budget).into();
                state.set(State::Done);
                Poll::Ready(Err(error))
            }
            StateProj::Done => panic!("ResponseFuture polled after completion"),
        }
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Running { expiry, .. } => match expiry {
                Expiry::Attempt(_) => "running",
                Expiry::Deadline(_) => "running until the deadline",
            },
            State::Expired { .. } => "deadline already passed",
            State::Done => "done",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}
