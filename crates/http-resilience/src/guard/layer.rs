//! A guard as a layer of its own: the three layers' form, and hedging's.

use super::{future::ResponseFuture, Ask, Guard, Settle};
use crate::{BoxError, RequestDeadline, Wrapper};
use std::{
    fmt,
    task::{Context, Poll},
};
use tower_layer::Layer;
use tower_service::Service;

/// Puts a guard in front of the inner service: [`Guarded`], whose state
/// every clone of this layer (and of its guard) shares.
///
/// Between the three layers' retry and attempt timeout it sees every
/// attempt; below a hedge, every copy. See the [module docs](super) for an
/// example.
#[derive(Clone, Debug)]
pub struct GuardLayer<G> {
    guard: G,
}

impl<G> GuardLayer<G> {
    /// A layer that passes every call through `guard`.
    pub const fn new(guard: G) -> Self {
        Self { guard }
    }

    /// The guard, whose state (`states()`) reads what it keeps.
    pub const fn guard(&self) -> &G {
        &self.guard
    }
}

impl<S, G: Guard> Layer<S> for GuardLayer<G> {
    type Service = Guarded<S, G>;

    fn layer(&self, inner: S) -> Self::Service {
        Guarded {
            inner,
            guard: self.guard.clone(),
            local: G::Local::default(),
        }
    }
}

/// Every call passes `G` first: it goes at once, waits (within its
/// deadline) with the service made ready for it, or is kept from the inner
/// service, turned away with the guard's error or answered by the guard.
/// Its outcome goes back to the guard.
///
/// # Clone
///
/// A call that must wait takes the service made ready for it and leaves a
/// clone in its place, as tower's rule for cloned services says; clones
/// share the guard's state.
pub struct Guarded<S, G: Guard> {
    inner: S,
    guard: G,
    // The state of this clone's last key.
    local: G::Local,
}

impl<S, G: Guard> Guarded<S, G> {
    /// The guard.
    pub const fn guard(&self) -> &G {
        &self.guard
    }
}

impl<S, G: Guard> Wrapper for Guarded<S, G> {
    type Inner = S;

    fn get_ref(&self) -> &S {
        &self.inner
    }

    fn into_inner(self) -> S {
        self.inner
    }
}

impl<S: Clone, G: Guard> Clone for Guarded<S, G> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            guard: self.guard.clone(),
            local: self.local.clone(),
        }
    }
}

impl<S: fmt::Debug, G: Guard + fmt::Debug> fmt::Debug for Guarded<S, G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guarded")
            .field("inner", &self.inner)
            .field("guard", &self.guard)
            .finish_non_exhaustive()
    }
}

impl<S, B, T, G> Service<http::Request<B>> for Guarded<S, G>
where
    S: Service<http::Request<B>, Response = http::Response<T>> + Clone,
    S::Error: Into<BoxError>,
    G: Settle<T>,
{
    type Response = http::Response<T>;
    type Error = BoxError;
    type Future = ResponseFuture<S, B, G>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    #[inline]
    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let mut pass = self.guard.pass_for(&mut self.local, &request);
        let deadline = RequestDeadline::of(&request);
        match G::admit(&mut pass, &mut Ask::new(deadline, None)) {
            Poll::Ready(Ok(())) => ResponseFuture::called(self.inner.call(request), pass),
            Poll::Ready(Err(error)) => ResponseFuture::refused(error, pass),
            Poll::Pending => {
                // NOTE: the service made ready for this call goes with it, to
                // send it once the guard lets it through.
                let clone = self.inner.clone();
                let ready = std::mem::replace(&mut self.inner, clone);
                ResponseFuture::waiting(ready, request, pass, deadline)
            }
        }
    }
}
