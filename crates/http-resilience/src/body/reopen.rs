//! A request body that is opened again for every attempt, from a factory:
//! nothing is buffered, whatever its size (Go's `Request.GetBody`).

use super::TryCloneBody;
use crate::BoxError;
use bytes::Buf;
use http_body::{Body, Frame, SizeHint};
use std::{
    error::Error,
    fmt,
    future::Future,
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
/// the source. Both are [`FailureKind::RequestBody`](crate::FailureKind::RequestBody),
/// which the ready-made decoders never retry: opening the body again would
/// not mend it. Errors of an opened body pass through as they are.
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
/// A file, opened again with tokio's `fs` for every attempt and read in
/// blocks of 64 KiB, so that no attempt holds more than a block of it:
///
/// ```
/// use bytes::Bytes;
/// use http_body::{Body, Frame, SizeHint};
/// use http_body_util::BodyExt;
/// use http_resilience::body::{ReopenBody, TryCloneBody};
/// use std::{io, pin::Pin, task::{ready, Context, Poll}};
/// use tokio::io::{AsyncRead, ReadBuf};
///
/// /// The `left` bytes of a file that follow where it was opened.
/// struct FileBody {
///     file: tokio::fs::File,
///     left: u64,
/// }
///
/// impl Body for FileBody {
///     type Data = Bytes;
///     type Error = io::Error;
///
///     fn poll_frame(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<io::Result<Frame<Bytes>>>> {
///         let mut block = vec![0; self.left.min(64 * 1024) as usize];
///         let mut read = ReadBuf::new(&mut block);
///         ready!(Pin::new(&mut self.file).poll_read(cx, &mut read))?;
///         let n = read.filled().len();
///         // NOTE: a file that got shorter ends early, and `ReopenBody` fails it.
///         if n == 0 {
///             return Poll::Ready(None);
///         }
///         self.left -= n as u64;
///         block.truncate(n);
///         Poll::Ready(Some(Ok(Frame::data(Bytes::from(block)))))
///     }
///
///     fn size_hint(&self) -> SizeHint {
///         SizeHint::with_exact(self.left)
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), http_resilience::BoxError> {
/// # let path = std::env::temp_dir().join(format!("reopen-doc-{}", std::process::id()));
/// # std::fs::write(&path, "the upload")?;
/// let file = path.clone();
/// let body = ReopenBody::new(move || {
///     let path = file.clone();
///     async move {
///         let file = tokio::fs::File::open(&path).await?;
///         let left = file.metadata().await?.len();
///         Ok::<_, io::Error>(FileBody { file, left })
///     }
/// });
/// let copy = body.try_clone_body().expect("a factory opens it again");
/// assert_eq!(body.collect().await?.to_bytes(), "the upload");
/// // The first opening knew its length: every copy announces it.
/// assert_eq!(copy.size_hint().exact(), Some(10));
/// assert_eq!(copy.collect().await?.to_bytes(), "the upload");
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
    pub fn length(&self) -> Option<u64> {
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
                State::Unopened => {
                    this.state = State::Opening(Box::pin(this.shared.factory.reopen()));
                }
                State::Opening(opening) => {
                    let opened = ready!(opening.as_mut().poll(cx));
                    if let Err(err) = this.opened(opened) {
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

// ===== errors =====

/// A [`ReopenBody`] opened to another length than the one announced, or
/// yielded fewer or more bytes than it.
///
/// Its attempt fails with this error as the body's, so the upstream never
/// receives a body of another length than the request announced. It is
/// [`FailureKind::RequestBody`](crate::FailureKind::RequestBody), which the
/// ready-made decoders never retry.
///
/// # Example
///
/// ```
/// use http_resilience::body::BodyChanged;
///
/// let err = BodyChanged::new(1024, 1000);
/// assert_eq!(err.to_string(), "request body changed: 1000 bytes where 1024 were announced");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyChanged {
    expected: u64,
    got: u64,
}

impl BodyChanged {
    /// A body of `got` bytes where `expected` were announced.
    ///
    /// Public so that tests and mocks can produce the same error the body
    /// does.
    pub const fn new(expected: u64, got: u64) -> Self {
        Self { expected, got }
    }

    /// The length announced: the one every attempt must send.
    pub const fn expected(&self) -> u64 {
        self.expected
    }

    /// The length found: what the opening announced, what the copy had
    /// yielded when it ended short, or, when it went past the length, what
    /// it had yielded with the frame that went past (which was not sent).
    pub const fn got(&self) -> u64 {
        self.got
    }
}

impl fmt::Display for BodyChanged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&format!(
            "request body changed: {} bytes where {} were announced",
            self.got, self.expected
        ))
    }
}

impl Error for BodyChanged {}

/// The factory of a [`ReopenBody`] failed to open it; the factory's error is
/// the [`source`](Error::source).
///
/// Its attempt fails with this error as the body's: never a silent empty
/// body. It is [`FailureKind::RequestBody`](crate::FailureKind::RequestBody),
/// which the ready-made decoders never retry.
///
/// # Example
///
/// ```
/// use http_resilience::{body::ReopenFailed, FailureKind};
/// use std::error::Error;
///
/// let err = ReopenFailed::new(std::io::Error::from(std::io::ErrorKind::NotFound));
/// assert_eq!(err.to_string(), "the request body could not be opened");
/// assert!(err.source().unwrap().is::<std::io::Error>());
/// assert_eq!(FailureKind::of(&err), FailureKind::RequestBody);
/// ```
#[derive(Debug)]
pub struct ReopenFailed {
    source: BoxError,
}

impl ReopenFailed {
    /// The error of a factory that failed with `source`.
    ///
    /// Public so that tests and mocks can produce the same error the body
    /// does.
    pub fn new(source: impl Into<BoxError>) -> Self {
        Self {
            source: source.into(),
        }
    }

    /// The factory's error.
    pub fn get_ref(&self) -> &(dyn Error + Send + Sync + 'static) {
        &*self.source
    }

    /// Consumes `self`, returning the factory's error.
    pub fn into_source(self) -> BoxError {
        self.source
    }
}

impl fmt::Display for ReopenFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad("the request body could not be opened")
    }
}

impl Error for ReopenFailed {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        Some(&*self.source)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{body::Pristine, FailureKind};
    use bytes::Bytes;
    use http_body_util::BodyExt;
    use http_resilience_mock::body::ScriptedBody;
    use std::{
        convert::Infallible,
        future::{ready, Ready},
        io,
        sync::atomic::{AtomicUsize, Ordering},
    };

    /// A factory whose `n`th opening plays `openings[n]` (the last one over
    /// and over), counting its openings.
    #[derive(Clone)]
    struct Script {
        openings: Arc<Vec<ScriptedBody>>,
        opened: Arc<AtomicUsize>,
    }

    impl Script {
        fn new(openings: impl IntoIterator<Item = ScriptedBody>) -> Self {
            Self {
                openings: Arc::new(openings.into_iter().collect()),
                opened: Arc::default(),
            }
        }

        fn opened(&self) -> usize {
            self.opened.load(Ordering::Relaxed)
        }
    }

    impl Reopen for Script {
        type Body = ScriptedBody;
        type Error = Infallible;
        type Future = Ready<Result<ScriptedBody, Infallible>>;

        fn reopen(&self) -> Self::Future {
            let n = self.opened.fetch_add(1, Ordering::Relaxed);
            ready(Ok(self.openings[n.min(self.openings.len() - 1)].clone()))
        }
    }

    fn abcd() -> ScriptedBody {
        ScriptedBody::new().data("ab").data("cd")
    }

    async fn text<R>(body: ReopenBody<R>) -> Result<Bytes, BoxError>
    where
        R: Reopen,
        <R::Body as Body>::Error: Into<BoxError>,
        <R::Body as Body>::Data: Send,
    {
        Ok(body.collect().await?.to_bytes())
    }

    #[tokio::test]
    async fn every_copy_opens_the_body_again_when_read_and_not_before() {
        let script = Script::new([abcd()]);
        let original = ReopenBody::new(script.clone());
        let copy = original.try_clone_body().expect("always a copy");
        let unread = copy.try_clone_body().expect("of a copy too");
        assert!(original.is_replayable() && copy.is_replayable());
        assert_eq!(script.opened(), 0, "nothing opened before it is read");
        assert_eq!(text(original).await.unwrap(), "abcd");
        assert_eq!(text(copy).await.unwrap(), "abcd");
        drop(unread);
        assert_eq!(script.opened(), 2, "the copy never read was never opened");
    }

    #[tokio::test]
    async fn the_first_opening_that_knows_its_length_sets_every_copys_size_hint() {
        let original = ReopenBody::new(Script::new([abcd()]));
        let copy = original.try_clone_body().unwrap();
        assert_eq!(original.size_hint().exact(), None, "unknown before opening");
        assert!(!original.is_end_stream());
        let mut original = original;
        let first = original.frame().await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap(), "ab");
        assert_eq!(original.size_hint().exact(), Some(2), "what is left of it");
        assert_eq!(original.length(), Some(4));
        assert_eq!(copy.size_hint().exact(), Some(4), "known before it opens");
        assert_eq!(text(original).await.unwrap(), "cd");
        assert_eq!(text(copy).await.unwrap(), "abcd");
    }

    #[tokio::test]
    async fn a_given_length_is_announced_before_the_first_opening() {
        let body = ReopenBody::with_length(Script::new([abcd()]), 4);
        assert_eq!(body.size_hint().exact(), Some(4));
        assert_eq!(body.try_clone_body().unwrap().size_hint().exact(), Some(4));
        assert_eq!(text(body).await.unwrap(), "abcd");
    }

    #[tokio::test]
    async fn open_opens_the_first_body_at_once_and_copies_open_their_own() {
        let script = Script::new([abcd()]);
        let original = ReopenBody::open(script.clone()).await.unwrap();
        assert_eq!(script.opened(), 1);
        assert_eq!(original.size_hint().exact(), Some(4));
        let copy = original.try_clone_body().unwrap();
        assert_eq!(text(original).await.unwrap(), "abcd");
        assert_eq!(
            script.opened(),
            1,
            "the first attempt sent the first opening"
        );
        assert_eq!(text(copy).await.unwrap(), "abcd");
        assert_eq!(script.opened(), 2);
    }

    #[tokio::test]
    async fn a_length_unknown_is_learned_from_the_first_copy_read_to_its_end() {
        let unknown = |text: &'static str| ScriptedBody::new().data(text).without_size_hint();
        let original = ReopenBody::new(Script::new([unknown("abcd"), unknown("abc")]));
        let copy = original.try_clone_body().unwrap();
        assert_eq!(text(original).await.unwrap(), "abcd");
        assert_eq!(copy.size_hint().exact(), Some(4), "learned at the end");
        let err = text(copy).await.unwrap_err();
        assert_eq!(err.downcast_ref(), Some(&BodyChanged::new(4, 3)));
    }

    #[tokio::test]
    async fn a_shorter_opening_fails_with_the_typed_error_instead_of_ending() {
        let short = ScriptedBody::new().data("ab").without_size_hint();
        let original = ReopenBody::new(Script::new([abcd(), short]));
        let mut copy = original.try_clone_body().unwrap();
        assert_eq!(text(original).await.unwrap(), "abcd");
        let first = copy.frame().await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap(), "ab");
        assert!(!copy.is_end_stream(), "short: polled again for its error");
        let err = copy.frame().await.unwrap().unwrap_err();
        assert_eq!(err.downcast_ref(), Some(&BodyChanged::new(4, 2)));
        assert_eq!(FailureKind::of(&*err), FailureKind::RequestBody);
        assert!(copy.frame().await.is_none(), "and then ends");
        assert!(copy.is_end_stream());
    }

    #[tokio::test]
    async fn a_longer_opening_fails_before_the_frame_that_goes_past_the_length() {
        let long = ScriptedBody::new()
            .data("ab")
            .data("cde")
            .without_size_hint();
        let mut body = ReopenBody::with_length(Script::new([long]), 4);
        let first = body.frame().await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap(), "ab");
        let err = body.frame().await.unwrap().unwrap_err();
        assert_eq!(err.downcast_ref(), Some(&BodyChanged::new(4, 5)));
        assert_eq!(body.size_hint().exact(), Some(0));
        assert!(body.frame().await.is_none());
    }

    #[tokio::test]
    async fn an_opening_announcing_another_length_fails_before_any_byte() {
        let longer = ScriptedBody::new().data("ab").data("cde");
        let original = ReopenBody::new(Script::new([abcd(), longer]));
        let mut copy = original.try_clone_body().unwrap();
        assert_eq!(text(original).await.unwrap(), "abcd");
        let err = copy.frame().await.unwrap().unwrap_err();
        assert_eq!(err.downcast_ref(), Some(&BodyChanged::new(4, 5)));
        assert!(copy.frame().await.is_none());
    }

    #[tokio::test]
    async fn a_body_ending_with_the_whole_length_reports_its_end_at_once() {
        let mut body = ReopenBody::with_length(Script::new([abcd()]), 4);
        assert!(body.frame().await.is_some());
        assert!(!body.is_end_stream());
        assert!(body.frame().await.is_some());
        assert!(body.is_end_stream(), "hyper stops here");
        assert_eq!(body.size_hint().exact(), Some(0));
    }

    #[tokio::test]
    async fn a_failed_opening_is_a_typed_error_with_the_factorys_as_its_source() {
        let opened = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&opened);
        let mut body = ReopenBody::new(move || {
            counted.fetch_add(1, Ordering::Relaxed);
            ready(Err::<ScriptedBody, _>(io::Error::from(
                io::ErrorKind::NotFound,
            )))
        });
        let err = body.frame().await.unwrap().unwrap_err();
        let failed = err.downcast_ref::<ReopenFailed>().expect("the typed error");
        let source = failed.get_ref().downcast_ref::<io::Error>().unwrap();
        assert_eq!(source.kind(), io::ErrorKind::NotFound);
        assert_eq!(FailureKind::of(&*err), FailureKind::RequestBody);
        assert!(body.frame().await.is_none(), "never an empty body after it");
        assert_eq!(opened.load(Ordering::Relaxed), 1, "and not opened again");
    }

    /// A body whose first poll fails.
    struct Broken;

    impl Body for Broken {
        type Data = Bytes;
        type Error = io::Error;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
            Poll::Ready(Some(Err(io::Error::other("disk"))))
        }
    }

    #[tokio::test]
    async fn the_errors_of_an_opened_body_pass_through() {
        let mut body = ReopenBody::new(|| ready(Ok::<_, Infallible>(Broken)));
        let err = body.frame().await.unwrap().unwrap_err();
        assert_eq!(err.to_string(), "disk");
        assert!(err.is::<io::Error>());
        assert!(body.frame().await.is_none());
    }

    #[tokio::test]
    async fn trailers_pass_once_the_whole_length_is_sent() {
        let mut trailers = http::HeaderMap::new();
        trailers.insert("x-sum", "1".parse().unwrap());
        let with = move || {
            let body = http_body_util::Full::new(Bytes::from("abcd"))
                .with_trailers(ready(Some(Ok::<_, Infallible>(trailers.clone()))));
            ready(Ok::<_, Infallible>(body))
        };
        let body = ReopenBody::new(with);
        let copy = body.try_clone_body().unwrap();
        let sent = body.collect().await.unwrap();
        assert_eq!(sent.trailers().unwrap()["x-sum"], "1");
        assert_eq!(copy.collect().await.unwrap().to_bytes(), "abcd");
    }

    #[tokio::test]
    async fn a_kept_request_copies_to_unopened_bodies() {
        let script = Script::new([abcd()]);
        let request = http::Request::put("http://upstream.test/")
            .body(ReopenBody::new(script.clone()))
            .unwrap();
        let pristine = Pristine::of(&request).expect("replayable");
        let next = pristine.next_attempt().expect("and again");
        assert_eq!(script.opened(), 0);
        assert_eq!(text(next.into_body()).await.unwrap(), "abcd");
        assert_eq!(text(request.into_body()).await.unwrap(), "abcd");
        assert_eq!(script.opened(), 2);
    }

    #[test]
    fn messages_name_both_lengths_and_the_failure() {
        let changed = BodyChanged::new(1024, 1000);
        assert_eq!(
            changed.to_string(),
            "request body changed: 1000 bytes where 1024 were announced"
        );
        assert_eq!((changed.expected(), changed.got()), (1024, 1000));
        let failed = ReopenFailed::new("gone");
        assert_eq!(failed.to_string(), "the request body could not be opened");
        assert_eq!(failed.source().unwrap().to_string(), "gone");
        assert_eq!(failed.into_source().to_string(), "gone");
    }

    #[test]
    fn debug_shows_the_state_and_the_length() {
        let body = ReopenBody::with_length(Script::new([abcd()]), 4);
        assert_eq!(
            format!("{body:?}"),
            "ReopenBody { state: \"unopened\", length: Some(4), sent: 0, .. }"
        );
    }
}
