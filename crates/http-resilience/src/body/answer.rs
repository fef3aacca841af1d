//! Response bodies a guard makes in the upstream's place.

use crate::{deadline::body::DeadlineBody, BoxError, RequestDeadline};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::{
    combinators::{BoxBody, UnsyncBoxBody},
    BodyExt, Empty, Full,
};
use std::{
    convert::Infallible,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

/// A response body that a guard can make in the upstream's place: the
/// answer of a fault injector ([`fault`](crate::fault)), made as the body
/// type the service's responses already have.
///
/// Implemented for `Full<Bytes>`, `String`, `Empty<Bytes>`,
/// `BoxBody<Bytes, BoxError>` and `UnsyncBoxBody<Bytes, BoxError>`
/// (`http_body_util`), for tonic's `Body` (feature `tonic`), and for a
/// [`DeadlineBody`] of any of them (the body the three layers and the
/// combined service give). A body that can only come from a connection
/// (hyper's `Incoming`, and so the [`transport`](crate::transport)
/// client's) cannot be made: box it below the layer that answers
/// (`ServiceBuilder::map_response(|r: http::Response<_>|
/// r.map(BodyExt::boxed_unsync))` for the transport's, whose error is a
/// `BoxError` already). A body type of one's own implements it in a few
/// lines.
///
/// # Example
///
/// ```
/// use bytes::Bytes;
/// use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full};
/// use http_resilience::{body::AnswerBody, BoxError};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let whole = Full::<Bytes>::whole(Bytes::from("cached"));
/// assert_eq!(whole.collect().await.unwrap().to_bytes(), "cached");
///
/// // Two bytes, then the error, as a connection that broke part-way.
/// let cut = UnsyncBoxBody::<Bytes, BoxError>::cut(Bytes::from("ca"), "closed".into());
/// assert_eq!(cut.collect().await.unwrap_err().to_string(), "closed");
/// # }
/// ```
#[diagnostic::on_unimplemented(
    message = "a response body of type `{Self}` cannot be made in the upstream's place",
    label = "the response body of the service a fault answers for must be one this crate can make",
    note = "`Full<Bytes>`, `String`, `Empty<Bytes>`, `BoxBody<Bytes, BoxError>`, `UnsyncBoxBody<Bytes, BoxError>` (and a `DeadlineBody` of one of them) can",
    note = "box a client's body (one that only a connection can make, as the transport's) below the layer: `ServiceBuilder::map_response(|r: http::Response<_>| r.map(BodyExt::boxed_unsync))`"
)]
pub trait AnswerBody: Sized {
    /// A body of `bytes`, whole.
    fn whole(bytes: Bytes) -> Self;

    /// A body that yields `bytes` and then fails with `error`, as a body
    /// whose connection broke part-way. A type whose reads cannot fail
    /// (`Full`, `String`, `Empty`) ends after `bytes` instead, as a body
    /// delimited by the close of its connection does when it closes early.
    fn cut(bytes: Bytes, error: BoxError) -> Self;
}

impl AnswerBody for Full<Bytes> {
    fn whole(bytes: Bytes) -> Self {
        Full::new(bytes)
    }

    fn cut(bytes: Bytes, _: BoxError) -> Self {
        Full::new(bytes)
    }
}

impl AnswerBody for String {
    fn whole(bytes: Bytes) -> Self {
        String::from_utf8_lossy(&bytes).into_owned()
    }

    fn cut(bytes: Bytes, _: BoxError) -> Self {
        Self::whole(bytes)
    }
}

impl AnswerBody for Empty<Bytes> {
    fn whole(_: Bytes) -> Self {
        Empty::new()
    }

    fn cut(_: Bytes, _: BoxError) -> Self {
        Empty::new()
    }
}

impl AnswerBody for BoxBody<Bytes, BoxError> {
    fn whole(bytes: Bytes) -> Self {
        Full::new(bytes).map_err(never).boxed()
    }

    fn cut(bytes: Bytes, error: BoxError) -> Self {
        Cut::new(bytes, error).boxed()
    }
}

impl AnswerBody for UnsyncBoxBody<Bytes, BoxError> {
    fn whole(bytes: Bytes) -> Self {
        Full::new(bytes).map_err(never).boxed_unsync()
    }

    fn cut(bytes: Bytes, error: BoxError) -> Self {
        Cut::new(bytes, error).boxed_unsync()
    }
}

#[cfg(feature = "tonic")]
impl AnswerBody for tonic::body::Body {
    fn whole(bytes: Bytes) -> Self {
        tonic::body::Body::new(Full::new(bytes))
    }

    fn cut(bytes: Bytes, error: BoxError) -> Self {
        tonic::body::Body::new(Cut::new(bytes, error))
    }
}

/// NOTE: the body is made in memory and read at once: it is bounded by no
/// deadline (one about thirty years away, the crate's "never").
impl<B: AnswerBody> AnswerBody for DeadlineBody<B> {
    fn whole(bytes: Bytes) -> Self {
        DeadlineBody::new(B::whole(bytes), RequestDeadline::after(Duration::MAX))
    }

    fn cut(bytes: Bytes, error: BoxError) -> Self {
        DeadlineBody::new(B::cut(bytes, error), RequestDeadline::after(Duration::MAX))
    }
}

fn never(never: Infallible) -> BoxError {
    match never {}
}

/// A body of some bytes, then an error.
struct Cut {
    bytes: Option<Bytes>,
    error: Option<BoxError>,
}

impl Cut {
    fn new(bytes: Bytes, error: BoxError) -> Self {
        Self {
            bytes: (!bytes.is_empty()).then_some(bytes),
            error: Some(error),
        }
    }
}

impl Body for Cut {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(bytes) = self.bytes.take() {
            return Poll::Ready(Some(Ok(Frame::data(bytes))));
        }
        Poll::Ready(self.error.take().map(Err))
    }

    fn is_end_stream(&self) -> bool {
        self.bytes.is_none() && self.error.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        // NOTE: the length the body announces is unknown, as a stream's:
        // at least what it still yields.
        let mut hint = SizeHint::new();
        hint.set_lower(self.bytes.as_ref().map_or(0, |b| b.len() as u64));
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read<B>(body: B) -> (Vec<u8>, Option<String>)
    where
        B: Body<Data = Bytes> + Unpin,
        B::Error: std::fmt::Display,
    {
        let mut body = body;
        let mut bytes = Vec::new();
        while let Some(frame) = body.frame().await {
            match frame {
                Ok(frame) => bytes.extend_from_slice(&frame.into_data().unwrap_or_default()),
                Err(err) => return (bytes, Some(err.to_string())),
            }
        }
        (bytes, None)
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_cut_body_fails_after_its_bytes_where_its_type_can_fail() {
        let cut = || (Bytes::from("abc"), BoxError::from("cut"));
        let (b, e) = read(BoxBody::<Bytes, BoxError>::cut(cut().0, cut().1)).await;
        assert_eq!((&b[..], e.as_deref()), (&b"abc"[..], Some("cut")));
        let (b, e) = read(UnsyncBoxBody::<Bytes, BoxError>::cut(cut().0, cut().1)).await;
        assert_eq!((&b[..], e.as_deref()), (&b"abc"[..], Some("cut")));
        let deadline = DeadlineBody::<UnsyncBoxBody<Bytes, BoxError>>::cut(cut().0, cut().1);
        let (b, e) = read(deadline).await;
        assert_eq!((&b[..], e.as_deref()), (&b"abc"[..], Some("cut")));
        let (b, e) = read(Full::<Bytes>::cut(cut().0, cut().1)).await;
        assert_eq!(
            (&b[..], e),
            (&b"abc"[..], None),
            "ends where it cannot fail"
        );
        assert_eq!(String::cut(cut().0, cut().1), "abc");
        let (b, e) = read(UnsyncBoxBody::<Bytes, BoxError>::cut(
            Bytes::new(),
            "at once".into(),
        ))
        .await;
        assert_eq!((&b[..], e.as_deref()), (&b""[..], Some("at once")));
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_whole_body_is_its_bytes_in_every_type() {
        let bytes = || Bytes::from("whole");
        assert_eq!(read(Full::<Bytes>::whole(bytes())).await.0, b"whole");
        assert_eq!(
            read(BoxBody::<Bytes, BoxError>::whole(bytes())).await.0,
            b"whole"
        );
        assert_eq!(
            read(UnsyncBoxBody::<Bytes, BoxError>::whole(bytes()))
                .await
                .0,
            b"whole"
        );
        assert_eq!(
            read(DeadlineBody::<Full<Bytes>>::whole(bytes())).await.0,
            b"whole"
        );
        assert_eq!(read(Empty::<Bytes>::whole(bytes())).await.0, b"");
        assert_eq!(String::whole(bytes()), "whole");
        // NOTE: a day later, the body made in memory is still no deadline's.
        let late = DeadlineBody::<Full<Bytes>>::whole(bytes());
        tokio::time::advance(Duration::from_secs(86_400)).await;
        assert_eq!(read(late).await, (b"whole".to_vec(), None));
    }

    #[cfg(feature = "tonic")]
    #[tokio::test(flavor = "current_thread")]
    async fn tonic_bodies_are_made_too() {
        let whole = tonic::body::Body::whole(Bytes::from("grpc"));
        assert_eq!(read(whole).await, (b"grpc".to_vec(), None));
        let cut = tonic::body::Body::cut(Bytes::from("gr"), "cut".into());
        let (bytes, error) = read(cut).await;
        assert_eq!(bytes, b"gr");
        assert!(error.is_some());
    }
}
