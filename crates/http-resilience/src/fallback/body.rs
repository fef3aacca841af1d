//! The response body of a call that may have fallen back.
//!
//! # Example
//!
//! ```
//! use bytes::Bytes;
//! use http_body_util::{BodyExt, Full};
//! use http_resilience::fallback::body::FallbackBody;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let upstream = FallbackBody::inner(Full::new(Bytes::from("fresh")));
//! assert!(!upstream.is_fallback());
//! let fallback = FallbackBody::<Full<Bytes>>::fallback(Bytes::from("cached"));
//! assert!(fallback.is_fallback());
//! assert_eq!(fallback.collect().await.unwrap().to_bytes(), "cached");
//! # }
//! ```

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use std::{
    fmt,
    pin::Pin,
    task::{Context, Poll},
};

pin_project! {
    /// The response body of [`Fallback`](super::Fallback): the inner
    /// service's as it is, or the fallback's, made in memory (which never
    /// fails).
    pub struct FallbackBody<B> {
        #[pin]
        kind: Kind<B>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<B> {
        Inner { #[pin] body: B },
        Fallback { bytes: Option<Bytes> },
    }
}

// ===== impl FallbackBody =====

impl<B> FallbackBody<B> {
    /// The inner service's body, as it is.
    pub const fn inner(body: B) -> Self {
        Self {
            kind: Kind::Inner { body },
        }
    }

    /// A fallback's body of `bytes`.
    pub fn fallback(bytes: Bytes) -> Self {
        let bytes = (!bytes.is_empty()).then_some(bytes);
        Self {
            kind: Kind::Fallback { bytes },
        }
    }

    /// Whether it is a fallback's body.
    pub const fn is_fallback(&self) -> bool {
        matches!(self.kind, Kind::Fallback { .. })
    }
}

impl<B> Body for FallbackBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    #[inline]
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.project().kind.project() {
            KindProj::Inner { body } => body.poll_frame(cx),
            KindProj::Fallback { bytes } => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body } => body.is_end_stream(),
            Kind::Fallback { bytes } => bytes.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body } => body.size_hint(),
            Kind::Fallback { bytes } => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
        }
    }
}

impl<B: fmt::Debug> fmt::Debug for FallbackBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Inner { body } => f.debug_tuple("FallbackBody").field(body).finish(),
            Kind::Fallback { bytes } => f
                .debug_struct("FallbackBody")
                .field("fallback_bytes", &bytes.as_ref().map_or(0, Bytes::len))
                .finish(),
        }
    }
}
