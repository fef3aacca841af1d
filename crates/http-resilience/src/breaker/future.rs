//! Future types

use super::{
    circuit::{Ctx, Ticket},
    error::CircuitOpen,
    policy::Shared,
};
use crate::{coop, policy::Decoder, BoxError};
use pin_project_lite::pin_project;
use std::{
    fmt,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{ready, Context, Poll},
};

pin_project! {
    /// Response future of [`CircuitBreaker`](super::CircuitBreaker).
    pub struct ResponseFuture<F, D> {
        #[pin]
        state: State<F, D>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, D> {
        // The call was admitted and is in flight; its outcome goes back
        // through the ticket (dropped with the future, it counts for
        // nothing).
        Called {
            #[pin]
            response: F,
            ticket: Option<Ticket>,
            shared: Arc<Shared<D>>,
        },
        // The circuit turned the call away; the request was never sent.
        Rejected {
            error: Option<CircuitOpen>,
        },
    }
}

// ===== impl ResponseFuture =====

impl<F, D> ResponseFuture<F, D> {
    pub(crate) fn called(response: F, ticket: Ticket, shared: Arc<Shared<D>>) -> Self {
        Self {
            state: State::Called {
                response,
                ticket: Some(ticket),
                shared,
            },
        }
    }

    pub(crate) fn rejected(error: CircuitOpen) -> Self {
        Self {
            state: State::Rejected { error: Some(error) },
        }
    }
}

impl<F, D, T, E> Future for ResponseFuture<F, D>
where
    F: Future<Output = Result<http::Response<T>, E>>,
    E: Into<BoxError>,
    D: Decoder<T, E>,
{
    type Output = Result<http::Response<T>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().state.project() {
            StateProj::Called {
                response,
                ticket,
                shared,
            } => {
                let outcome = ready!(response.poll(cx));
                if let Some(ticket) = ticket.take() {
                    ticket.settle(Ctx::of(shared), shared.judge(&outcome));
                }
                Poll::Ready(outcome.map_err(Into::into))
            }
            StateProj::Rejected { error } => {
                let error = ready!(coop::poll_turned_away(error, cx));
                Poll::Ready(Err(error.into()))
            }
        }
    }
}

impl<F, D> fmt::Debug for ResponseFuture<F, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Called { .. } => "called",
            State::Rejected { .. } => "rejected",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}
