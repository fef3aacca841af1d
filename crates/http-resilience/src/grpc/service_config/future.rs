//! Future types

use pin_project_lite::pin_project;
use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

pin_project! {
    /// The response future of
    /// [`ServiceConfigured`](super::ServiceConfigured): the future of the
    /// stack the call's method selected.
    pub struct ResponseFuture<R, H> {
        #[pin]
        kind: Kind<R, H>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<R, H> {
        // The retrying stack (which also serves methods with no policy).
        Retry { #[pin] future: R },
        // The hedging stack.
        Hedge { #[pin] future: H },
    }
}

impl<R, H> ResponseFuture<R, H> {
    pub(super) fn retry(future: R) -> Self {
        Self {
            kind: Kind::Retry { future },
        }
    }

    pub(super) fn hedge(future: H) -> Self {
        Self {
            kind: Kind::Hedge { future },
        }
    }
}

impl<R, H> fmt::Debug for ResponseFuture<R, H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let form = match self.kind {
            Kind::Retry { .. } => "retry",
            Kind::Hedge { .. } => "hedge",
        };
        f.debug_struct("ResponseFuture")
            .field("form", &form)
            .finish_non_exhaustive()
    }
}

impl<R, H> Future for ResponseFuture<R, H>
where
    R: Future,
    H: Future<Output = R::Output>,
{
    type Output = R::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Retry { future } => future.poll(cx),
            KindProj::Hedge { future } => future.poll(cx),
        }
    }
}
