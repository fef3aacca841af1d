//! Future types

use super::{
    body::ReadTimeoutBody,
    error::{Phase, ReadTimedOut},
    gap::Gap,
};
use crate::BoxError;
use pin_project_lite::pin_project;
use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{ready, Context, Poll},
};

pin_project! {
    /// Response future of [`ReadTimeout`](super::ReadTimeout).
    pub struct ResponseFuture<F> {
        #[pin]
        response: F,
        gap: Gap,
    }
}

// ===== impl ResponseFuture =====

impl<F> ResponseFuture<F> {
    pub(crate) fn new(response: F, gap: Gap) -> Self {
        Self { response, gap }
    }
}

impl<F, B, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<http::Response<B>, E>>,
    E: Into<BoxError>,
{
    type Output = Result<http::Response<ReadTimeoutBody<B>>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        // NOTE: the response is polled first, so a head that arrives in the
        // same poll as the timer is taken.
        if let Poll::Ready(result) = this.response.poll(cx) {
            let limit = this.gap.limit();
            return Poll::Ready(
                result
                    .map(|response| response.map(|body| ReadTimeoutBody::new(body, limit)))
                    .map_err(Into::into),
            );
        }
        let limit = this.gap.limit();
        ready!(this.gap.poll_expired(cx));
        Poll::Ready(Err(ReadTimedOut::new(limit, Phase::Head).into()))
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponseFuture")
            .field("limit", &self.gap.limit())
            .finish_non_exhaustive()
    }
}
