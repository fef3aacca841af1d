//! When a request has been sent in full: the wait for the response head
//! starts then, as Reactor Netty's `responseTimeout` starts once the request
//! is written, so that a slow upload is never taken for a silent upstream.

use crate::flag::Flag;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use std::{
    pin::Pin,
    sync::Arc,
    task::{ready, Context, Poll},
};

/// The read timeout's side: whether the request's body is still being sent.
#[derive(Debug)]
pub(crate) struct Sending(Arc<Flag>);

/// The body's side: tells once, when the body has given its last frame,
/// failed, or been dropped before its end (the client gave up sending it).
#[derive(Debug)]
struct Teller(Option<Arc<Flag>>);

pin_project! {
    /// A request body that tells the read timeout when it has been sent.
    #[derive(Debug)]
    pub(crate) struct SentBody<B> {
        #[pin]
        inner: B,
        teller: Teller,
    }
}

/// `request` with a body that tells when it is sent, and what the read
/// timeout watches; nothing to watch when the body is empty (already sent).
pub(crate) fn watch<B: Body>(
    request: http::Request<B>,
) -> (http::Request<SentBody<B>>, Option<Sending>) {
    let shared = (!request.body().is_end_stream()).then(|| Arc::new(Flag::default()));
    let sending = shared.as_ref().map(|shared| Sending(Arc::clone(shared)));
    let request = request.map(|inner| SentBody {
        inner,
        teller: Teller(shared),
    });
    (request, sending)
}

// ===== impl Sending =====

impl Sending {
    /// Whether the body is sent.
    pub(crate) fn is_sent(&self) -> bool {
        self.0.is_set()
    }

    /// Whether the body is sent; if not, `cx` is woken once it is.
    pub(crate) fn poll_sent(&self, cx: &mut Context<'_>) -> bool {
        self.0.poll_set(cx.waker())
    }
}

// ===== impl Teller =====

impl Teller {
    fn tell(&self) {
        if let Some(flag) = &self.0 {
            flag.set();
        }
    }
}

impl Drop for Teller {
    fn drop(&mut self) {
        self.tell();
    }
}

// ===== impl SentBody =====

impl<B: Body> Body for SentBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let mut this = self.project();
        let polled = ready!(this.inner.as_mut().poll_frame(cx));
        // NOTE: a client may stop reading at `is_end_stream`, without asking
        // for the end; an error ends the sending too.
        if !matches!(polled, Some(Ok(_))) || this.inner.is_end_stream() {
            this.teller.tell();
        }
        Poll::Ready(polled)
    }

    fn is_end_stream(&self) -> bool {
        let end = self.inner.is_end_stream();
        if end {
            self.teller.tell();
        }
        end
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::counting_waker as waker;
    use bytes::Bytes;
    use http_body_util::{BodyExt, Full, StreamBody};
    use std::{convert::Infallible, task::Waker};

    #[test]
    fn an_empty_body_is_sent_from_the_start() {
        let (_, sending) = watch(http::Request::new(Full::new(Bytes::new())));
        assert!(sending.is_none());
    }

    #[tokio::test]
    async fn a_body_is_sent_at_its_last_frame_and_wakes_the_watcher() {
        let frames = ["a", "b"].map(|s| Ok::<_, Infallible>(Frame::data(Bytes::from(s))));
        let body = StreamBody::new(tokio_stream::iter(frames));
        let (request, sending) = watch(http::Request::new(body));
        let sending = sending.expect("a body to send");
        let (count, waker) = waker();
        let mut cx = Context::from_waker(&waker);
        let mut body = request.into_body();
        assert!(!sending.poll_sent(&mut cx));
        assert!(body.frame().await.is_some());
        assert!(!sending.poll_sent(&mut cx), "one frame is still to come");
        assert!(body.frame().await.is_some());
        assert!(body.frame().await.is_none());
        assert!(sending.poll_sent(&mut cx));
        assert_eq!(count.wakes(), 1, "woken once");
    }

    #[tokio::test]
    async fn a_body_that_says_it_ended_is_sent_without_being_asked_for_its_end() {
        let (request, sending) = watch(http::Request::new(Full::new(Bytes::from("abc"))));
        let sending = sending.expect("a body to send");
        let mut body = request.into_body();
        assert!(body.frame().await.is_some());
        assert!(sending.poll_sent(&mut Context::from_waker(Waker::noop())));
    }

    #[test]
    fn a_body_dropped_before_its_end_counts_as_sent() {
        let (request, sending) = watch(http::Request::new(Full::new(Bytes::from("abc"))));
        let sending = sending.expect("a body to send");
        let (count, waker) = waker();
        assert!(!sending.poll_sent(&mut Context::from_waker(&waker)));
        drop(request);
        assert_eq!(count.wakes(), 1);
        assert!(sending.poll_sent(&mut Context::from_waker(&waker)));
    }
}
