//! Future types

use super::{body::FallbackBody, FallbackPolicy};
use crate::BoxError;
use pin_project_lite::pin_project;
use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{ready, Context, Poll},
};

pin_project! {
    /// Response future of [`Fallback`](super::Fallback).
    pub struct ResponseFuture<F> {
        #[pin]
        inner: F,
        // The policy, for a request that opted in.
        policy: Option<FallbackPolicy>,
    }
}

impl<F> ResponseFuture<F> {
    pub(super) const fn new(inner: F, policy: Option<FallbackPolicy>) -> Self {
        Self { inner, policy }
    }
}

impl<F, T, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<http::Response<T>, E>>,
    E: Into<BoxError>,
{
    type Output = Result<http::Response<FallbackBody<T>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let outcome = ready!(this.inner.poll(cx)).map_err(Into::into);
        Poll::Ready(match this.policy.take() {
            Some(policy) => policy.judge(outcome),
            None => outcome.map(|response| response.map(FallbackBody::inner)),
        })
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("opted_in", &self.policy.is_some())
            .finish_non_exhaustive()
    }
}
