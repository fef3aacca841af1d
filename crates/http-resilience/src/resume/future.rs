//! Future types

use super::{body::ResumeBody, session::Origin};
use pin_project_lite::pin_project;
use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{ready, Context, Poll},
};
use tower_service::Service;

pin_project! {
    /// Response future of [`Resume`](super::Resume).
    ///
    /// It resolves with the inner service's response, its body wrapped in a
    /// [`ResumeBody`] (resumable when the response allows it), or with the
    /// inner service's error, unchanged.
    pub struct ResponseFuture<S, B>
    where
        S: Service<http::Request<B>>,
    {
        #[pin]
        inner: S::Future,
        origin: Option<Origin<S, B>>,
    }
}

// ===== impl ResponseFuture =====

impl<S, B> ResponseFuture<S, B>
where
    S: Service<http::Request<B>>,
{
    pub(crate) fn new(inner: S::Future, origin: Option<Origin<S, B>>) -> Self {
        Self { inner, origin }
    }
}

impl<S, B, T> Future for ResponseFuture<S, B>
where
    S: Service<http::Request<B>, Response = http::Response<T>>,
{
    type Output = Result<http::Response<ResumeBody<S, B, T>>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let response = ready!(this.inner.poll(cx))?;
        // NOTE: the response head decides, once: a response that cannot be
        // resumed drops what was kept for a resume here, and its body passes
        // through.
        let session = this
            .origin
            .take()
            .and_then(|origin| origin.session(&response));
        Poll::Ready(Ok(response.map(|body| match session {
            Some(session) => ResumeBody::resumable(body, session),
            None => ResumeBody::passthrough(body),
        })))
    }
}

impl<S, B> fmt::Debug for ResponseFuture<S, B>
where
    S: Service<http::Request<B>>,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("inner", &"...")
            .field("may_resume", &self.origin.is_some())
            .finish()
    }
}
