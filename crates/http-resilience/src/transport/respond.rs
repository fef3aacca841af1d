//! Naming the upstream that closed the connection without a response.

use super::error::NoResponse;
use crate::{BoxError, FailureKind};
use pin_project_lite::pin_project;
use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};
use tower_service::Service;

/// A client whose failure "the connection closed before any response" is a
/// [`NoResponse`] naming the upstream, as Apache HttpClient reports it
/// ("HOST failed to respond"), with the client's own error as its source.
/// Every other outcome is the client's, unchanged.
///
/// [`Builder`](super::Builder) puts it around hyper-util's client.
#[derive(Debug, Clone)]
pub(crate) struct NamesNoResponse<S> {
    inner: S,
}

impl<S> NamesNoResponse<S> {
    /// Wraps `inner`.
    pub(crate) const fn new(inner: S) -> Self {
        Self { inner }
    }
}

impl<S, B> Service<http::Request<B>> for NamesNoResponse<S>
where
    S: Service<http::Request<B>>,
    S::Error: Into<BoxError>,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = NamesNoResponseFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let authority = request.uri().authority().cloned();
        NamesNoResponseFuture {
            future: self.inner.call(request),
            authority,
        }
    }
}

pin_project! {
    /// Response future of [`NamesNoResponse`].
    pub(crate) struct NamesNoResponseFuture<F> {
        #[pin]
        future: F,
        authority: Option<http::uri::Authority>,
    }
}

impl<F, T, E> Future for NamesNoResponseFuture<F>
where
    F: Future<Output = Result<T, E>>,
    E: Into<BoxError>,
{
    type Output = Result<T, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        this.future.poll(cx).map_err(|error| {
            let error = error.into();
            match this.authority {
                Some(authority) if FailureKind::of(&*error) == FailureKind::ConnectionClosed => {
                    NoResponse::new(authority.to_string(), error).into()
                }
                _ => error,
            }
        })
    }
}

impl<F> fmt::Debug for NamesNoResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NamesNoResponseFuture")
            .field("authority", &self.authority)
            .finish_non_exhaustive()
    }
}
