//! A streaming request body that can be sent again: buffered lazily, up to a
//! cap, while the first attempt sends it.

use super::TryCloneBody;
use crate::BoxError;
use bytes::{Buf, Bytes};
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use std::{
    error::Error,
    fmt,
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    task::{Context, Poll},
};

/// The default replay cap: 64 KiB, as linkerd's.
pub const DEFAULT_CAP: usize = 64 * 1024;

pin_project! {
    /// A request body that [`StatusRetry`](super::StatusRetry) can send
    /// again, although the body it wraps is a stream (hyper's `Incoming`,
    /// axum's `Body`).
    ///
    /// The first attempt sends the wrapped body and keeps what it sends in a
    /// buffer shared with the copies made for retries. A copy can be sent once
    /// the original was sent in full and fit in the cap (64 KiB by default);
    /// otherwise the request is non-repeatable and is not retried: the caller
    /// gets the outcome as it is, with [`Stop::NotReplayable`](crate::Stop::NotReplayable)
    /// in its report. A body whose size hint is already over the cap is never
    /// buffered.
    ///
    /// Data frames are kept as `Bytes`: for bodies whose data already is
    /// `Bytes` (hyper's and axum's), buffering copies no bytes.
    ///
    /// # Example
    ///
    /// ```
    /// use http_body_util::BodyExt;
    /// use http_resilience::retry::{ReplayBody, TryCloneBody};
    /// use http_resilience_mock::body::ScriptedBody;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let stream = ScriptedBody::new().data("hello ").data("again");
    /// let original = ReplayBody::new(stream);
    /// let copy = original.try_clone_body().unwrap();
    /// assert!(!copy.is_replayable(), "nothing sent yet");
    ///
    /// let sent = original.collect().await.unwrap().to_bytes();
    /// assert!(copy.is_replayable());
    /// assert_eq!(copy.collect().await.unwrap().to_bytes(), sent);
    /// # }
    /// ```
    ///
    /// # Panics
    ///
    /// Never; polling a copy before the original finished yields a
    /// [`NotReplayable`] error frame instead.
    pub struct ReplayBody<B> {
        #[pin]
        source: Source<B>,
        shared: Arc<Mutex<Buffer>>,
    }
}

pin_project! {
    #[project = SourceProj]
    enum Source<B> {
        // The original: it sends the wrapped body and fills the buffer.
        Live {
            #[pin]
            body: B,
        },
        // A copy: it plays the buffer, from the frame at `next`.
        Replay {
            next: usize,
            trailers_sent: bool,
        },
    }
}

/// What the original has sent so far.
#[derive(Debug)]
struct Buffer {
    chunks: Vec<Bytes>,
    trailers: Option<HeaderMap>,
    len: usize,
    cap: usize,
    state: Fill,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fill {
    /// The original is being sent.
    Filling,
    /// The original was sent in full and fits: copies can be sent.
    Complete,
    /// The original did not fit, or failed: copies cannot be sent.
    Spoiled(Spoiled),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spoiled {
    OverCap,
    Failed,
    NoCopy,
}

// ===== impl ReplayBody =====

impl<B: Body> ReplayBody<B> {
    /// Wraps `body`, buffering up to [`DEFAULT_CAP`] bytes.
    pub fn new(body: B) -> Self {
        Self::with_cap(body, DEFAULT_CAP)
    }

    /// Wraps `body`, buffering up to `cap` bytes.
    pub fn with_cap(body: B, cap: usize) -> Self {
        let over = body.size_hint().lower() > cap as u64;
        let buffer = Buffer {
            chunks: Vec::new(),
            trailers: None,
            len: 0,
            cap,
            state: if over {
                Fill::Spoiled(Spoiled::OverCap)
            } else {
                Fill::Filling
            },
        };
        Self {
            source: Source::Live { body },
            shared: Arc::new(Mutex::new(buffer)),
        }
    }
}

impl<B> ReplayBody<B> {
    fn buffer(&self) -> MutexGuard<'_, Buffer> {
        lock(&self.shared)
    }

    /// Whether this is a copy (and not the original).
    pub fn is_copy(&self) -> bool {
        matches!(self.source, Source::Replay { .. })
    }
}

fn lock(shared: &Mutex<Buffer>) -> MutexGuard<'_, Buffer> {
    // NOTE: the buffer holds no invariant that a panic elsewhere could break.
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<B> TryCloneBody for ReplayBody<B> {
    /// A copy that shares the buffer; `None` once the body is known not to be
    /// replayable (over the cap, or failed).
    fn try_clone_body(&self) -> Option<Self> {
        if matches!(self.buffer().state, Fill::Spoiled(_)) {
            return None;
        }
        Some(Self {
            source: Source::Replay {
                next: 0,
                trailers_sent: false,
            },
            shared: Arc::clone(&self.shared),
        })
    }

    fn is_replayable(&self) -> bool {
        self.buffer().state == Fill::Complete
    }
}

impl<B> Body for ReplayBody<B>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.project();
        match this.source.project() {
            SourceProj::Live { body } => {
                let mut body = body;
                let polled = std::task::ready!(body.as_mut().poll_frame(cx));
                let alone = Arc::strong_count(this.shared) == 1;
                let mut buffer = lock(this.shared);
                if alone && buffer.state == Fill::Filling {
                    // NOTE: no copy exists, and none can be made while the
                    // original is being sent (copies are made before it is),
                    // so keeping the frames would only cost memory.
                    buffer.spoil(Spoiled::NoCopy);
                }
                Poll::Ready(match polled {
                    None => {
                        buffer.finish();
                        None
                    }
                    Some(Err(err)) => {
                        buffer.spoil(Spoiled::Failed);
                        Some(Err(err.into()))
                    }
                    Some(Ok(frame)) => Some(Ok(match frame.into_data() {
                        Ok(mut data) => {
                            let bytes = data.copy_to_bytes(data.remaining());
                            buffer.keep(&bytes);
                            // NOTE: hyper stops polling a body that reports its
                            // end, so the end is noted here too, not only on `None`.
                            if body.is_end_stream() {
                                buffer.finish();
                            }
                            Frame::data(bytes)
                        }
                        Err(frame) => match frame.into_trailers() {
                            Ok(trailers) => {
                                if buffer.state == Fill::Filling {
                                    buffer.trailers = Some(trailers.clone());
                                    // Trailers are the last frame.
                                    buffer.finish();
                                }
                                Frame::trailers(trailers)
                            }
                            // NOTE: a frame is data or trailers; nothing else
                            // can be sent on, so it is dropped.
                            Err(_) => {
                                return Poll::Ready(Some(Err(NotReplayable::unknown_frame())))
                            }
                        },
                    })),
                })
            }
            SourceProj::Replay {
                next,
                trailers_sent,
            } => {
                let buffer = lock(this.shared);
                if buffer.state != Fill::Complete {
                    return Poll::Ready(Some(Err(NotReplayable::not_ready())));
                }
                if let Some(chunk) = buffer.chunks.get(*next) {
                    *next += 1;
                    return Poll::Ready(Some(Ok(Frame::data(chunk.clone()))));
                }
                match &buffer.trailers {
                    Some(trailers) if !*trailers_sent => {
                        *trailers_sent = true;
                        Poll::Ready(Some(Ok(Frame::trailers(trailers.clone()))))
                    }
                    _ => Poll::Ready(None),
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.source {
            Source::Live { body } => {
                let ended = body.is_end_stream();
                if ended {
                    // NOTE: a body may end without ever being polled (an empty
                    // one): what was sent, nothing, is then complete.
                    self.buffer().finish();
                }
                ended
            }
            Source::Replay {
                next,
                trailers_sent,
            } => {
                let buffer = self.buffer();
                buffer.state == Fill::Complete
                    && *next >= buffer.chunks.len()
                    && (buffer.trailers.is_none() || *trailers_sent)
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.source {
            Source::Live { body } => body.size_hint(),
            Source::Replay { next, .. } => {
                let buffer = self.buffer();
                let left: usize = buffer.chunks.iter().skip(*next).map(Bytes::len).sum();
                SizeHint::with_exact(left as u64)
            }
        }
    }
}

impl<B> fmt::Debug for ReplayBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let buffer = self.buffer();
        f.debug_struct("ReplayBody")
            .field("copy", &self.is_copy())
            .field("buffered", &buffer.len)
            .field("cap", &buffer.cap)
            .field("state", &buffer.state)
            .finish()
    }
}

// ===== impl Buffer =====

impl Buffer {
    /// Keeps a data frame the original sent, unless it breaks the cap.
    fn keep(&mut self, bytes: &Bytes) {
        if self.state != Fill::Filling {
            return;
        }
        if self.len.saturating_add(bytes.len()) > self.cap {
            self.spoil(Spoiled::OverCap);
        } else {
            self.len += bytes.len();
            self.chunks.push(bytes.clone());
        }
    }

    /// Notes that the original was sent in full.
    fn finish(&mut self) {
        if self.state == Fill::Filling {
            self.state = Fill::Complete;
        }
    }

    /// Gives up buffering, and frees what was kept.
    fn spoil(&mut self, why: Spoiled) {
        self.state = Fill::Spoiled(why);
        self.chunks = Vec::new();
        self.trailers = None;
        self.len = 0;
    }
}

/// A copy of a [`ReplayBody`] was read although the original had not been
/// sent in full: the request cannot be sent again (Apache's "non-repeatable
/// request").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotReplayable {
    unknown_frame: bool,
}

impl NotReplayable {
    fn not_ready() -> BoxError {
        Self {
            unknown_frame: false,
        }
        .into()
    }

    fn unknown_frame() -> BoxError {
        Self {
            unknown_frame: true,
        }
        .into()
    }
}

impl fmt::Display for NotReplayable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(if self.unknown_frame {
            "non-repeatable request: the body sent a frame that is neither data nor trailers"
        } else {
            "non-repeatable request: the original body was not sent in full"
        })
    }
}

impl Error for NotReplayable {}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Full};
    use http_resilience_mock::body::ScriptedBody;
    use std::time::Duration;

    fn script() -> ScriptedBody {
        ScriptedBody::new().data("ab").data("cd").data("ef")
    }

    #[tokio::test]
    async fn a_copy_replays_what_the_original_sent() {
        let original = ReplayBody::new(script());
        let copy = original.try_clone_body().unwrap();
        let second = copy.try_clone_body().unwrap();
        assert_eq!(original.collect().await.unwrap().to_bytes(), "abcdef");
        assert!(copy.is_replayable() && second.is_replayable());
        assert_eq!(copy.size_hint().exact(), Some(6));
        assert_eq!(copy.collect().await.unwrap().to_bytes(), "abcdef");
        assert_eq!(second.collect().await.unwrap().to_bytes(), "abcdef");
    }

    #[tokio::test]
    async fn a_copy_read_too_early_fails_without_panicking() {
        let original = ReplayBody::new(script());
        let copy = original.try_clone_body().unwrap();
        let err = copy.collect().await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "non-repeatable request: the original body was not sent in full"
        );
        assert!(err.is::<NotReplayable>());
    }

    #[tokio::test(start_paused = true)]
    async fn a_partly_sent_original_is_not_replayable() {
        let mut original = ReplayBody::new(script().wait(Duration::from_secs(1)).data("gh"));
        let copy = original.try_clone_body().unwrap();
        assert!(original.frame().await.is_some());
        assert!(!copy.is_replayable());
    }

    /// A stream whose length is not known in advance.
    struct Unsized(ScriptedBody);

    impl Body for Unsized {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            mut self: Pin<&mut Self>,
            cx: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
            Pin::new(&mut self.0).poll_frame(cx)
        }
    }

    #[tokio::test]
    async fn a_body_over_the_cap_is_not_replayable_and_frees_its_buffer() {
        let original = ReplayBody::with_cap(Unsized(script()), 4);
        let copy = original.try_clone_body().unwrap();
        // Everything still reaches the upstream.
        assert_eq!(original.collect().await.unwrap().to_bytes(), "abcdef");
        assert!(!copy.is_replayable());
        assert!(copy.try_clone_body().is_none());
        assert_eq!(copy.buffer().len, 0);
    }

    #[tokio::test]
    async fn a_size_hint_over_the_cap_is_never_buffered() {
        let big = Full::new(Bytes::from(vec![0u8; 100]));
        let original = ReplayBody::with_cap(big, 64);
        assert!(original.try_clone_body().is_none());
        assert_eq!(original.collect().await.unwrap().to_bytes().len(), 100);
    }

    #[tokio::test]
    async fn trailers_are_replayed_too() {
        let mut trailers = HeaderMap::new();
        trailers.insert("x-checksum", "42".parse().unwrap());
        let body =
            Full::new(Bytes::from_static(b"data")).with_trailers(async move { Some(Ok(trailers)) });
        let original = ReplayBody::new(body);
        let copy = original.try_clone_body().unwrap();
        let sent = original.collect().await.unwrap();
        assert_eq!(sent.trailers().unwrap()["x-checksum"], "42");
        let replayed = copy.collect().await.unwrap();
        assert_eq!(replayed.trailers().unwrap()["x-checksum"], "42");
        assert_eq!(replayed.to_bytes(), "data");
    }

    #[tokio::test]
    async fn a_failed_original_is_not_replayable() {
        #[derive(Debug)]
        struct Broken;
        impl Body for Broken {
            type Data = Bytes;
            type Error = std::io::Error;
            fn poll_frame(
                self: Pin<&mut Self>,
                _: &mut Context<'_>,
            ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
                Poll::Ready(Some(Err(std::io::Error::other("broken pipe"))))
            }
        }
        let original = ReplayBody::new(Broken);
        let copy = original.try_clone_body().unwrap();
        assert!(original.collect().await.is_err());
        assert!(!copy.is_replayable());
    }
}
