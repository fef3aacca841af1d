//! Future types

use crate::{deadline::error::DeadlineExceeded, BoxError};
use pin_project_lite::pin_project;
use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

pin_project! {
    /// Response future of [`PropagateDeadline`](super::PropagateDeadline).
    pub struct ResponseFuture<F> {
        #[pin]
        state: State<F>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F> {
        // The attempt was sent with its budget: the inner service's future.
        Called {
            #[pin]
            future: F,
        },
        // The request's deadline had already passed: the inner service was
        // not called.
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
    pub(crate) fn called(future: F) -> Self {
        Self {
            state: State::Called { future },
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
            StateProj::Called { future } => future.poll(cx).map_err(Into::into),
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
            State::Called { .. } => "called",
            State::Expired { .. } => "deadline already passed",
            State::Done => "done",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}
