//! The request body a [`ResilientClient`](super::ResilientClient) sends: a
//! `reqwest::Body` made ready to be sent again.

use crate::{
    body::{ReplayBody, TryCloneBody, DEFAULT_REPLAY_CAP},
    BoxError,
};
use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use std::{
    fmt,
    pin::Pin,
    task::{Context, Poll},
};

/// A `reqwest::Body` that the retry layers can send again.
///
/// A body reqwest holds in memory (a `String`, a `Vec<u8>`, `Bytes`: what
/// `body`, `json` and `form` make of them) is sent again by every attempt,
/// whatever its size. A stream (`reqwest::Body::wrap_stream`,
/// `reqwest::Body::wrap`) goes through a [`ReplayBody`]: kept while the first
/// attempt sends it, up to a cap (64 KiB by default), so that an attempt
/// after it replays what was kept. Past the cap the request is
/// non-repeatable: it is sent once, and its outcome comes back as it is
/// ([`Stop::NotReplayable`](crate::Stop::NotReplayable)). A stream that was
/// never read (the connection was refused) is handed whole to the next
/// attempt, whatever its size.
///
/// [`ResilientClient`](super::ResilientClient) makes one for every request;
/// it is public so that a service given to
/// [`ResilientClient::from_service`](super::ResilientClient::from_service)
/// can name it.
///
/// # Example
///
/// ```
/// use http_resilience::{body::TryCloneBody, reqwest_client::RequestBody};
///
/// let in_memory = RequestBody::new(reqwest::Body::from("{\"id\": 7}"));
/// assert!(in_memory.try_clone_body().is_some());
/// ```
pub struct RequestBody {
    inner: Inner,
}

enum Inner {
    /// A body held in memory: what is left to send of it.
    Bytes(Option<Bytes>),
    Stream(ReplayBody<reqwest::Body>),
}

// ===== impl RequestBody =====

impl RequestBody {
    /// Whether the body is a stream (kept up to the cap), rather than bytes
    /// in memory.
    #[cfg(test)]
    pub(crate) const fn is_stream(&self) -> bool {
        matches!(self.inner, Inner::Stream(_))
    }

    /// Wraps `body`, keeping up to [`DEFAULT_REPLAY_CAP`] bytes of a stream.
    pub fn new(body: reqwest::Body) -> Self {
        Self::with_cap(body, DEFAULT_REPLAY_CAP)
    }

    /// Wraps `body`, keeping up to `cap` bytes of a stream; a body held in
    /// memory is copied whatever `cap` says.
    pub fn with_cap(body: reqwest::Body, cap: usize) -> Self {
        // NOTE: reqwest lends its in-memory bytes (`as_bytes`) but gives no
        // way to share them, so they are copied once here; every attempt
        // then shares that copy.
        let inner = match body.as_bytes() {
            Some(bytes) => Inner::Bytes(Some(Bytes::copy_from_slice(bytes))),
            None => Inner::Stream(ReplayBody::with_cap(body, cap)),
        };
        Self { inner }
    }

    /// An empty body.
    pub(crate) const fn empty() -> Self {
        Self {
            inner: Inner::Bytes(None),
        }
    }

    /// The body as reqwest takes it: bytes held in memory as reqwest's own
    /// (so that reqwest can copy them, to follow a 307 or 308), a stream as
    /// a stream.
    pub(crate) fn into_reqwest(self) -> reqwest::Body {
        match self.inner {
            Inner::Bytes(Some(bytes)) => reqwest::Body::from(bytes),
            Inner::Bytes(None) => reqwest::Body::from(Bytes::new()),
            Inner::Stream(replay) => reqwest::Body::wrap(replay),
        }
    }
}

impl Default for RequestBody {
    fn default() -> Self {
        Self::empty()
    }
}

impl fmt::Debug for RequestBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.inner {
            Inner::Bytes(bytes) => f
                .debug_tuple("RequestBody::Bytes")
                .field(&bytes.as_ref().map_or(0, Bytes::len))
                .finish(),
            Inner::Stream(replay) => f.debug_tuple("RequestBody::Stream").field(replay).finish(),
        }
    }
}

// NOTE: deliberately not `Clone`, so that this impl stands beside the
// blanket one for `Clone` bodies.
impl TryCloneBody for RequestBody {
    fn try_clone_body(&self) -> Option<Self> {
        let inner = match &self.inner {
            Inner::Bytes(bytes) => Inner::Bytes(bytes.clone()),
            Inner::Stream(replay) => Inner::Stream(replay.try_clone_body()?),
        };
        Some(Self { inner })
    }

    fn is_replayable(&self) -> bool {
        match &self.inner {
            Inner::Bytes(_) => true,
            Inner::Stream(replay) => replay.is_replayable(),
        }
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match &mut self.get_mut().inner {
            Inner::Bytes(bytes) => {
                let data = bytes.take().filter(|bytes| !bytes.is_empty());
                Poll::Ready(data.map(|data| Ok(Frame::data(data))))
            }
            Inner::Stream(replay) => Pin::new(replay).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.inner {
            Inner::Bytes(bytes) => bytes.as_ref().is_none_or(Bytes::is_empty),
            Inner::Stream(replay) => replay.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.inner {
            Inner::Bytes(bytes) => {
                SizeHint::with_exact(bytes.as_ref().map_or(0, |b| b.len() as u64))
            }
            Inner::Stream(replay) => replay.size_hint(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[tokio::test]
    async fn bytes_in_memory_are_sent_by_every_copy() {
        let body = RequestBody::with_cap(reqwest::Body::from("twelve bytes"), 4);
        assert!(!body.is_stream());
        assert_eq!(body.size_hint().exact(), Some(12));
        let copy = body.try_clone_body().unwrap();
        assert_eq!(body.collect().await.unwrap().to_bytes(), "twelve bytes");
        assert!(copy.is_replayable());
        assert_eq!(copy.collect().await.unwrap().to_bytes(), "twelve bytes");
    }

    #[tokio::test]
    async fn a_stream_is_replayed_within_its_cap() {
        let stream = http_body_util::Full::new(Bytes::from_static(b"streamed"));
        let body = RequestBody::new(reqwest::Body::wrap(stream));
        assert!(body.is_stream());
        let copy = body.try_clone_body().unwrap();
        assert_eq!(body.collect().await.unwrap().to_bytes(), "streamed");
        assert!(copy.is_replayable());
        assert_eq!(copy.collect().await.unwrap().to_bytes(), "streamed");
    }

    #[test]
    fn an_empty_body_ends_at_once() {
        assert!(RequestBody::empty().is_end_stream());
        assert!(RequestBody::new(reqwest::Body::from("")).is_end_stream());
        assert_eq!(
            format!("{:?}", RequestBody::empty()),
            "RequestBody::Bytes(0)"
        );
    }
}
