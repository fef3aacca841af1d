//! Future types

use super::Settle;
use crate::{coop, BoxError, RequestDeadline};
use pin_project_lite::pin_project;
use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{ready, Context, Poll},
};
use tower_service::Service;

pin_project! {
    /// Response future of [`Guarded`](super::Guarded).
    pub struct ResponseFuture<S, B, G>
    where
        S: Service<http::Request<B>>,
        G: super::Guard,
    {
        #[pin]
        state: State<S, B>,
        pass: G::Pass,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, B>
    where
        S: Service<http::Request<B>>,
    {
        // Waiting for the guard, with the service made ready, the request and
        // its deadline (read only while waiting: kept here, so that a call
        // sent at once carries none).
        Waiting {
            parked: Option<Box<(S, http::Request<B>)>>,
            deadline: Option<RequestDeadline>,
        },
        // Sent.
        Called { #[pin] future: S::Future },
        // Kept from the upstream: turned away, or answered by the guard.
        Refused { error: Option<BoxError> },
    }
}

impl<S, B, G> ResponseFuture<S, B, G>
where
    S: Service<http::Request<B>>,
    G: super::Guard,
{
    pub(super) fn called(future: S::Future, pass: G::Pass) -> Self {
        Self {
            state: State::Called { future },
            pass,
        }
    }

    pub(super) fn refused(error: BoxError, pass: G::Pass) -> Self {
        Self {
            state: State::Refused { error: Some(error) },
            pass,
        }
    }

    pub(super) fn waiting(
        service: S,
        request: http::Request<B>,
        pass: G::Pass,
        deadline: Option<RequestDeadline>,
    ) -> Self {
        let parked = Some(Box::new((service, request)));
        Self {
            state: State::Waiting { parked, deadline },
            pass,
        }
    }
}

impl<S, B, T, G> Future for ResponseFuture<S, B, G>
where
    S: Service<http::Request<B>, Response = http::Response<T>>,
    S::Error: Into<BoxError>,
    G: Settle<T>,
{
    type Output = Result<http::Response<T>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Waiting { parked, deadline } => {
                    if let Err(kept) = ready!(G::poll_admit(this.pass, *deadline, cx)) {
                        return Poll::Ready(kept_outcome::<G, T>(this.pass, kept));
                    }
                    let (mut service, request) = *parked.take().expect("polled after completion");
                    let future = service.call(request);
                    this.state.set(State::Called { future });
                }
                StateProj::Called { future } => {
                    // NOTE: the outcome is heard where it lies, in what the
                    // poll returns, rather than moved out and back.
                    let polled = future.poll(cx).map_err(Into::into);
                    if let Poll::Ready(outcome) = &polled {
                        G::settle(this.pass, outcome);
                    }
                    return polled;
                }
                StateProj::Refused { error } => {
                    let kept = ready!(coop::poll_turned_away(error, cx));
                    return Poll::Ready(kept_outcome::<G, T>(this.pass, kept));
                }
            }
        }
    }
}

/// The outcome of an attempt the guard kept from the upstream with `kept`:
/// its refusal, or the answer it gives in the upstream's place, which every
/// guard of `G` then hears as it would the upstream's.
fn kept_outcome<G: Settle<T>, T>(
    pass: &mut G::Pass,
    kept: BoxError,
) -> Result<http::Response<T>, BoxError> {
    let outcome = G::answer(pass, kept);
    G::settle(pass, &outcome);
    outcome
}

impl<S, B, G> fmt::Debug for ResponseFuture<S, B, G>
where
    S: Service<http::Request<B>>,
    G: super::Guard,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Waiting { .. } => "waiting",
            State::Called { .. } => "called",
            State::Refused { .. } => "kept from the upstream",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}
