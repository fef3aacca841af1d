//! Future types

use super::Metrics;
use crate::{
    errors::AsError,
    policy::{CallContext, RetryEvent},
};
use pin_project_lite::pin_project;
use std::{
    fmt,
    future::Future,
    pin::Pin,
    task::{ready, Context, Poll},
};
use tokio::time::Instant;

pin_project! {
    /// Response future of [`CallMetrics`](super::CallMetrics).
    pub struct ResponseFuture<F> {
        #[pin]
        response: F,
        // The call, until its outcome is recorded.
        watch: Option<Watch>,
    }
}

/// What the future keeps of its call, to record its end.
struct Watch {
    metrics: Metrics,
    call: CallContext,
    started: Instant,
}

// ===== impl ResponseFuture =====

impl<F> ResponseFuture<F> {
    pub(crate) fn new(response: F, metrics: Metrics, call: CallContext) -> Self {
        Self {
            response,
            watch: Some(Watch {
                metrics,
                call,
                started: Instant::now(),
            }),
        }
    }
}

impl<F, T, E> Future for ResponseFuture<F>
where
    F: Future<Output = Result<http::Response<T>, E>>,
    E: AsError,
{
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let outcome = ready!(this.response.poll(cx));
        if let Some(watch) = this.watch.take() {
            let end = RetryEvent::call_end(&outcome, watch.started.elapsed());
            watch.metrics.instruments.record(&watch.call, &end);
        }
        Poll::Ready(outcome)
    }
}

impl<F> fmt::Debug for ResponseFuture<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = if self.watch.is_some() {
            "running"
        } else {
            "done"
        };
        f.debug_struct("ResponseFuture")
            .field("state", &state)
            .finish_non_exhaustive()
    }
}
