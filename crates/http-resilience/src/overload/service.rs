//! The layer and the service of the three-layer form.

use super::{
    pass::{Admission, OverloadAtHand, OverloadPass},
    OverloadPolicy,
};
use crate::{coop, BoxError, RequestDeadline};
use pin_project_lite::pin_project;
use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{ready, Context, Poll},
};
use tower_layer::Layer;
use tower_service::Service;

/// Wraps the inner service in an [`Overload`] whose state every clone of
/// this layer (and of its policy) shares.
///
/// See the [module docs](super) for its place and an example.
#[derive(Clone, Debug)]
pub struct OverloadLayer {
    policy: OverloadPolicy,
}

impl OverloadLayer {
    /// A layer that controls load as `policy` says.
    pub const fn new(policy: OverloadPolicy) -> Self {
        Self { policy }
    }

    /// The policy, whose [`states`](OverloadPolicy::states) read the keys.
    pub const fn policy(&self) -> &OverloadPolicy {
        &self.policy
    }
}

impl<S> Layer<S> for OverloadLayer {
    type Service = Overload<S>;

    fn layer(&self, inner: S) -> Self::Service {
        Overload {
            inner,
            policy: self.policy.clone(),
            at_hand: OverloadAtHand::EMPTY,
        }
    }
}

/// Overload control in front of an inner service: every call takes a slot
/// of its key, waits for one within its deadline, or is turned away with
/// [`Overloaded`](super::error::Overloaded), never sent.
pub struct Overload<S> {
    inner: S,
    policy: OverloadPolicy,
    // The slots of this clone's last key.
    at_hand: OverloadAtHand,
}

impl<S: Clone> Clone for Overload<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            policy: self.policy.clone(),
            at_hand: self.at_hand.clone(),
        }
    }
}

impl<S: fmt::Debug> fmt::Debug for Overload<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Overload")
            .field("inner", &self.inner)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl<S> Overload<S> {
    /// The policy.
    pub const fn policy(&self) -> &OverloadPolicy {
        &self.policy
    }

    define_inner_service_accessors!();
}

impl<S, B, T> Service<http::Request<B>> for Overload<S>
where
    S: Service<http::Request<B>, Response = http::Response<T>> + Clone,
    S::Error: Into<BoxError>,
{
    type Response = http::Response<T>;
    type Error = BoxError;
    type Future = ResponseFuture<S, B>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let mut pass = OverloadPass::new(&self.policy, &mut self.at_hand, &request);
        let deadline = RequestDeadline::of(&request);
        let state = match pass.try_admit(deadline) {
            Admission::Now => State::Called {
                future: self.inner.call(request),
            },
            Admission::Queued => {
                // NOTE: the clone that was made ready goes with the call,
                // which sends once it has its slot.
                let clone = self.inner.clone();
                let ready = std::mem::replace(&mut self.inner, clone);
                State::Waiting {
                    parked: Some(Box::new((ready, request))),
                }
            }
            Admission::Refused(error) => State::Refused { error: Some(error) },
        };
        ResponseFuture {
            state,
            pass,
            deadline,
        }
    }
}

pin_project! {
    /// The response future of [`Overload`].
    pub struct ResponseFuture<S, B>
    where
        S: Service<http::Request<B>>,
    {
        #[pin]
        state: State<S, B>,
        pass: OverloadPass,
        deadline: Option<RequestDeadline>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<S, B>
    where
        S: Service<http::Request<B>>,
    {
        // Waiting for a slot, with the ready service and the request.
        Waiting { parked: Option<Box<(S, http::Request<B>)>> },
        // Sent.
        Called { #[pin] future: S::Future },
        // Turned away.
        Refused { error: Option<BoxError> },
    }
}

impl<S, B> fmt::Debug for ResponseFuture<S, B>
where
    S: Service<http::Request<B>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::Waiting { .. } => "waiting for a slot",
            State::Called { .. } => "called",
            State::Refused { .. } => "turned away",
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .field("key", self.pass.key())
            .finish()
    }
}

impl<S, B, T> Future for ResponseFuture<S, B>
where
    S: Service<http::Request<B>, Response = http::Response<T>>,
    S::Error: Into<BoxError>,
{
    type Output = Result<http::Response<T>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        loop {
            match this.state.as_mut().project() {
                StateProj::Waiting { parked } => {
                    ready!(this.pass.poll_admit(*this.deadline, cx))?;
                    let (mut service, request) = *parked.take().expect("polled after completion");
                    let future = service.call(request);
                    this.state.set(State::Called { future });
                }
                StateProj::Called { future } => {
                    let outcome = ready!(future.poll(cx)).map_err(Into::into);
                    this.pass.settle(&outcome);
                    return Poll::Ready(outcome);
                }
                StateProj::Refused { error } => {
                    return coop::poll_turned_away(error, cx).map(Err);
                }
            }
        }
    }
}
