//! A request body that is opened again for every attempt, from a factory:
//! nothing is buffered, whatever its size (Go's `Request.GetBody`).

mod error;
#[cfg(feature = "fs")]
mod file;

pub use self::error::{BodyChanged, FactoryPanicked, ReopenFailed};
#[cfg(feature = "fs")]
pub use self::file::{FileBody, FileSource};

use super::TryCloneBody;
use crate::BoxError;
use bytes::Buf;
use http_body::{Body, Frame, SizeHint};
use std::{
    any::Any,
    fmt,
    future::Future,
    panic::{catch_unwind, AssertUnwindSafe},
    pin::Pin,
    sync::{Arc, OnceLock},
    task::{ready, Context, Poll},
};

/// What opens a request body, once for every attempt that sends it: a
/// closure `Fn() -> impl Future<Output = Result<B, E>>`, or a type of one's
/// own.
///
/// Each call must open the same bytes from the start: a file opened again,
/// an object fetched again from storage, a generator started again from its
/// seed. [`ReopenBody`] checks the length of every opening against the first
/// one's; it cannot check the bytes themselves.
///
/// A synchronous factory is a closure that returns
/// [`std::future::ready`]`(result)`.
///
/// # Example
///
/// A type of one's own, opening a body of `len` zeros:
///
/// ```
/// use bytes::Bytes;
/// use http_body_util::Full;
/// use http_resilience::body::{Reopen, ReopenBody};
/// use std::{convert::Infallible, future::{ready, Ready}};
///
/// struct Zeros {
///     len: usize,
/// }
///
/// impl Reopen for Zeros {
///     type Body = Full<Bytes>;
///     type Error = Infallible;
///     type Future = Ready<Result<Full<Bytes>, Infallible>>;
///
///     fn reopen(&self) -> Self::Future {
///         ready(Ok(Full::new(Bytes::from(vec![0; self.len]))))
///     }
/// }
///
/// let body = ReopenBody::new(Zeros { len: 3 });
/// # let _ = body;
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot open a request body",
    label = "a factory of request bodies is needed here",
    note = "a closure `Fn() -> impl Future<Output = Result<B, E>>` is one, where `B` is an `http_body::Body` and `E: Into<BoxError>`",
    note = "a synchronous factory returns `std::future::ready(result)`"
)]
pub trait Reopen {
    /// The body each opening gives.
    type Body: Body;
    /// Why an opening failed.
    type Error: Into<BoxError>;
    /// Opens the body.
    type Future: Future<Output = Result<Self::Body, Self::Error>>;

    /// Opens the body from its start.
    fn reopen(&self) -> Self::Future;
}

impl<F, Fut, B, E> Reopen for F
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<B, E>>,
    B: Body,
    E: Into<BoxError>,
{
    type Body = B;
    type Error = E;
    type Future = Fut;

    fn reopen(&self) -> Fut {
        self()
    }
}

/// A request body opened from a factory ([`Reopen`]) for every attempt that
/// sends it, so that a retry or a hedge sends it again without keeping any of
/// it: an upload larger than memory is sent again in full.
///
/// The copies that [`TryCloneBody`] makes for other attempts share the
/// factory (behind an `Arc`) and nothing else: each starts unopened, and is
/// opened when its attempt first reads it. So a copy for an attempt that is
/// never sent is never opened, and every layer that sends a request again
/// (status and failure retries, hedges, HTTP/2 refusals) uses this body as
/// it is. It is deliberately not `Clone`.
///
/// # Length
///
/// An attempt never sends another length than it announced. The body's
/// length is the one given to [`with_length`](Self::with_length), or else
/// the exact size hint of the first opening that has one, or else the length
/// of the first copy read to its end. Once it is known, every copy reports
/// it as its exact [`size_hint`](Body::size_hint) (so hyper sends it as the
/// `Content-Length`), and a copy whose opening announces another length, or
/// that yields fewer or more bytes, fails with [`BodyChanged`] as its error:
/// it stops before the first byte too many, and instead of ending short.
/// A factory that fails ends the attempt with [`ReopenFailed`], its error as
/// the source; one that panics, when it is called or while its future is
/// polled, ends it with a [`ReopenFailed`] whose source is
/// [`FactoryPanicked`], which keeps the panic's message, so that the panic
/// neither takes down the connection task that polls the body nor comes
/// back as a transport error. All are
/// [`FailureKind::RequestBody`](crate::FailureKind::RequestBody),
/// which the ready-made decoders never retry: opening the body again would
/// not mend it. Errors of an opened body pass through as they are (a panic
/// of the opened body itself is not caught, nor one in
/// [`open`](Self::open), which runs in the caller's task).
///
/// # When to use it
///
/// - a body that can be opened again (a file, an object in storage, generated
///   data) and is large: a factory, so that nothing is kept;
/// - a small stream that cannot be opened again (an inbound body):
///   [`ReplayBody`](super::ReplayBody), which keeps what was sent, up to a cap;
/// - a body already in memory: a `Clone` body (`Full<Bytes>`), copied for
///   free.
///
/// A factory may open any [`Body`]: a `reqwest::Body`
/// (`reqwest::Body::wrap(body)` makes one of any body), a tonic body
/// (`tonic::body::Body::new(body)`), a body of one's own. Through
/// [`ReqwestService`](crate::reqwest_client::ReqwestService), which needs a
/// `Sync` body, the factory must be `Send + Sync`, and its future and the
/// body it opens `Sync` (as an `async` block over `Sync` values is).
///
/// # Example
///
/// A file ([`ReopenBody::file`], feature `fs`), opened again from its start
/// for every attempt and read in blocks of 64 KiB, so that no attempt holds
/// more than a block of it. Its length comes from the file's metadata, so
/// the first attempt announces it too: an upload endpoint that refuses a
/// body without a `Content-Length` (`411 Length Required`) takes every
/// attempt.
///
/// Besides the crates the README's "Use" section lists, the example needs
/// `http-body = "1"` (for `Body::size_hint`) and `http-resilience-mock =
/// "0.1"`, the loopback test server.
///
/// ```
/// use http_body::Body;
/// use http_resilience::{
///     body::{FileSource, ReopenBody},
///     policy::{FixedDelay, StatusDecoder},
///     retry::RetryPolicy,
///     transport, Attempts, ResiliencePolicy,
/// };
/// use http_resilience_mock::{MockResponse, MockServer};
/// use std::time::Duration;
/// use tower::{Layer, ServiceExt};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), http_resilience::BoxError> {
/// # let path = std::env::temp_dir().join(format!("reopen-doc-{}", std::process::id()));
/// # std::fs::write(&path, "the upload")?;
/// // An upstream that answers 503, then 200.
/// let upstream = MockServer::start().await?;
/// upstream.enqueue(MockResponse::new(503));
/// upstream.enqueue(MockResponse::ok("stored"));
///
/// let client = transport::Builder::new().build_http::<ReopenBody<FileSource>>()?;
/// let retry = RetryPolicy::new(StatusDecoder::new([503])?, FixedDelay::new(Duration::from_millis(10), 2));
/// let svc = ResiliencePolicy::new(Duration::from_secs(30), Duration::from_secs(10), retry)?
///     .layer()
///     .layer(client);
///
/// let body = ReopenBody::file(&path).await?;
/// assert_eq!(body.size_hint().exact(), Some(10), "known before the first attempt");
/// let request = http::Request::put(upstream.uri("/objects/7")).body(body)?;
/// let response = svc.oneshot(request).await?;
/// assert_eq!(Attempts::of(&response), 2);
/// for sent in upstream.requests() {
///     assert_eq!(sent.headers["content-length"], "10");
///     assert_eq!(sent.body, "the upload");
/// }
/// # std::fs::remove_file(path)?;
/// # Ok(())
/// # }
/// ```
///
/// A synchronous factory, and a copy that yields fewer bytes than the first:
///
/// ```
/// use bytes::Bytes;
/// use http_body_util::{BodyExt, Full};
/// use http_resilience::{body::{BodyChanged, ReopenBody, TryCloneBody}, FailureKind};
/// use std::{convert::Infallible, future::ready, sync::atomic::{AtomicUsize, Ordering}};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let opened = AtomicUsize::new(0);
/// let body = ReopenBody::with_length(
///     move || {
///         let text: &'static str = if opened.fetch_add(1, Ordering::Relaxed) == 0 { "four" } else { "two" };
///         ready(Ok::<_, Infallible>(Full::new(Bytes::from(text))))
///     },
///     4,
/// );
/// let copy = body.try_clone_body().unwrap();
/// assert_eq!(body.collect().await.unwrap().to_bytes(), "four");
///
/// let err = copy.collect().await.unwrap_err();
/// let changed = err.downcast_ref::<BodyChanged>().unwrap();
/// assert_eq!((changed.expected(), changed.got()), (4, 3));
/// assert_eq!(FailureKind::of(&*err), FailureKind::RequestBody);
/// # }
/// ```
pub struct ReopenBody<R: Reopen> {
    shared: Arc<Shared<R>>,
    state: State<R>,
    // The data bytes this copy has yielded.
    sent: u64,
}

/// What the original and its copies share.
struct Shared<R> {
    factory: R,
    // The length every copy must send, once known.
    length: OnceLock<u64>,
}

enum State<R: Reopen> {
    /// Not opened yet.
    Unopened,
    // NOTE: the opening and the body are boxed, so that the body is `Unpin`
    // whatever the factory's future and body are (hyper-util's client needs
    // an `Unpin` body): two allocations per attempt, for bodies worth
    // opening again.
    Opening(Pin<Box<R::Future>>),
    Open(Pin<Box<R::Body>>),
    /// Ended, failed or found changed: nothing more is yielded.
    Done,
}

/// What polling a frame gives.
type Polled<D> = Poll<Option<Result<Frame<D>, BoxError>>>;

// ===== impl ReopenBody =====

impl<R: Reopen> ReopenBody<R> {
    /// A body opened by `factory` when an attempt first reads it, and again
    /// for every copy. Its length is learned from the first opening that
    /// announces it, or from the first copy read to its end; until then it
    /// goes out with no length (chunked, over HTTP/1.1).
    pub fn new(factory: R) -> Self {
        Self::from_parts(factory, OnceLock::new())
    }

    /// A body of `length` bytes, opened by `factory` when an attempt first
    /// reads it, and again for every copy: every attempt announces `length`
    /// (as its `Content-Length`) and must send exactly that.
    ///
    /// # Example
    ///
    /// ```
    /// use bytes::Bytes;
    /// use http_body::Body;
    /// use http_body_util::Full;
    /// use http_resilience::body::ReopenBody;
    ///
    /// let body = ReopenBody::with_length(|| std::future::ready(Ok::<_, std::io::Error>(Full::new(Bytes::from("abc")))), 3);
    /// assert_eq!(body.size_hint().exact(), Some(3));
    /// ```
    pub fn with_length(factory: R, length: u64) -> Self {
        Self::from_parts(factory, OnceLock::from(length))
    }

    /// Opens the body at once: the first attempt sends this opening, and its
    /// exact size hint, if it has one, is the length every attempt
    /// announces, the first included.
    ///
    /// # Errors
    ///
    /// The factory's own error, when this first opening fails.
    ///
    /// # Example
    ///
    /// ```
    /// use bytes::Bytes;
    /// use http_body::Body;
    /// use http_body_util::Full;
    /// use http_resilience::body::ReopenBody;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), std::io::Error> {
    /// let body = ReopenBody::open(|| async { Ok::<_, std::io::Error>(Full::new(Bytes::from("abc"))) }).await?;
    /// assert_eq!(body.size_hint().exact(), Some(3));
    /// # Ok(())
    /// # }
    /// ```
    pub async fn open(factory: R) -> Result<Self, R::Error> {
        let first = factory.reopen().await?;
        let length = first
            .size_hint()
            .exact()
            .map_or_else(OnceLock::new, OnceLock::from);
        let mut body = Self::from_parts(factory, length);
        body.state = State::Open(Box::pin(first));
        Ok(body)
    }

    fn from_parts(factory: R, length: OnceLock<u64>) -> Self {
        Self {
            shared: Arc::new(Shared { factory, length }),
            state: State::Unopened,
            sent: 0,
        }
    }

    /// The factory.
    pub fn factory(&self) -> &R {
        &self.shared.factory
    }

    /// The length every attempt must send, once known (see the type's docs).
    pub(crate) fn length(&self) -> Option<u64> {
        self.shared.length.get().copied()
    }
}

// NOTE: `ReopenBody` is deliberately not `Clone`, which is what lets this
// impl stand beside the blanket one for `Clone` bodies (a derived `Clone`
// would not compile).
impl<R: Reopen> TryCloneBody for ReopenBody<R> {
    /// A copy that shares the factory, unopened: it opens the body again
    /// when it is read. Always `Some`.
    fn try_clone_body(&self) -> Option<Self> {
        Some(Self {
            shared: Arc::clone(&self.shared),
            state: State::Unopened,
            sent: 0,
        })
    }
}

impl<R: Reopen> ReopenBody<R> {
    /// Opens the body: calls the factory unless it was called already, and
    /// polls its opening. A panic of either fails the attempt.
    fn poll_open(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        // NOTE: a factory or an opening that panicked is never used again by
        // this copy (its state is `Done`), so what it left half-done is not
        // observed here; other copies call the factory anew.
        if let State::Unopened = self.state {
            let factory = &self.shared.factory;
            match catch_unwind(AssertUnwindSafe(|| factory.reopen())) {
                Ok(opening) => self.state = State::Opening(Box::pin(opening)),
                Err(payload) => return Poll::Ready(Err(self.panicked(&*payload))),
            }
        }
        let State::Opening(opening) = &mut self.state else {
            return Poll::Ready(Ok(()));
        };
        match catch_unwind(AssertUnwindSafe(|| opening.as_mut().poll(cx))) {
            Ok(Poll::Pending) => Poll::Pending,
            Ok(Poll::Ready(opened)) => Poll::Ready(self.opened(opened)),
            Err(payload) => Poll::Ready(Err(self.panicked(&*payload))),
        }
    }

    /// The error of a factory that panicked with `payload`; nothing more is
    /// yielded.
    fn panicked(&mut self, payload: &(dyn Any + Send)) -> BoxError {
        self.state = State::Done;
        ReopenFailed::new(FactoryPanicked::from_payload(payload)).into()
    }

    /// Takes the outcome of an opening: the body, checked against the known
    /// length, or the factory's error.
    fn opened(&mut self, opened: Result<R::Body, R::Error>) -> Result<(), BoxError> {
        self.state = State::Done;
        let body = opened.map_err(ReopenFailed::new)?;
        if let Some(announced) = body.size_hint().exact() {
            // NOTE: the first opening that announces a length sets it.
            let length = *self.shared.length.get_or_init(|| announced);
            if announced != length {
                return Err(BodyChanged::new(length, announced).into());
            }
        }
        self.state = State::Open(Box::pin(body));
        Ok(())
    }

    /// Counts a frame of the opened body, passing it on unless its data goes
    /// past the known length.
    fn count<D: Buf>(&mut self, frame: Frame<D>) -> Result<Frame<D>, BoxError> {
        let Some(data) = frame.data_ref() else {
            // NOTE: trailers come after all the data.
            self.check_complete()?;
            return Ok(frame);
        };
        self.sent = self.sent.saturating_add(data.remaining() as u64);
        match self.length() {
            Some(length) if self.sent > length => {
                self.state = State::Done;
                Err(BodyChanged::new(length, self.sent).into())
            }
            _ => Ok(frame),
        }
    }

    /// Whether the bytes yielded are the whole length, learning it when it
    /// was not known yet.
    fn is_complete(&self) -> bool {
        *self.shared.length.get_or_init(|| self.sent) == self.sent
    }

    fn check_complete(&mut self) -> Result<(), BoxError> {
        if self.is_complete() {
            return Ok(());
        }
        self.state = State::Done;
        let length = self.length().unwrap_or_default();
        Err(BodyChanged::new(length, self.sent).into())
    }

    /// The end of the opened body: `None`, or the error of a short one.
    fn end(&mut self) -> Option<Result<Frame<<R::Body as Body>::Data>, BoxError>> {
        let checked = self.check_complete();
        self.state = State::Done;
        checked.err().map(Err)
    }
}

impl<R> Body for ReopenBody<R>
where
    R: Reopen,
    <R::Body as Body>::Error: Into<BoxError>,
{
    type Data = <R::Body as Body>::Data;
    type Error = BoxError;

    fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Polled<Self::Data> {
        let this = &mut *self;
        loop {
            match &mut this.state {
                State::Done => return Poll::Ready(None),
                State::Unopened | State::Opening(_) => {
                    if let Err(err) = ready!(this.poll_open(cx)) {
                        return Poll::Ready(Some(Err(err)));
                    }
                }
                // NOTE: an opened body that reports its end is not polled
                // again, as hyper would not poll it.
                State::Open(body) if body.is_end_stream() => return Poll::Ready(this.end()),
                State::Open(body) => {
                    return Poll::Ready(match ready!(body.as_mut().poll_frame(cx)) {
                        None => this.end(),
                        Some(Ok(frame)) => Some(this.count(frame)),
                        Some(Err(err)) => {
                            this.state = State::Done;
                            Some(Err(err.into()))
                        }
                    });
                }
            }
        }
    }

    /// The end once the opened body has ended with the whole length; a body
    /// that ended short is not at its end, so that it is polled for its
    /// error (hyper stops polling a body that reports its end).
    fn is_end_stream(&self) -> bool {
        match &self.state {
            State::Done => true,
            State::Open(body) => body.is_end_stream() && self.is_complete(),
            State::Unopened | State::Opening(_) => false,
        }
    }

    /// Exact once the length is known: what this copy has left of it.
    fn size_hint(&self) -> SizeHint {
        let left = self.length().map(|length| length.saturating_sub(self.sent));
        match (&self.state, left) {
            (State::Done, _) => SizeHint::with_exact(0),
            (_, Some(left)) => SizeHint::with_exact(left),
            (State::Open(body), None) => body.size_hint(),
            (_, None) => SizeHint::new(),
        }
    }
}

impl<R: Reopen> fmt::Debug for ReopenBody<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match self.state {
            State::Unopened => "unopened",
            State::Opening(_) => "opening",
            State::Open(_) => "open",
            State::Done => "done",
        };
        f.debug_struct("ReopenBody")
            .field("state", &state)
            .field("length", &self.length())
            .field("sent", &self.sent)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
