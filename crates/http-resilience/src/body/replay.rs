//! A streaming request body that can be sent again: buffered lazily, up to a
//! cap, while an attempt sends it; what no attempt has read yet passes on,
//! untouched, to the next.

use super::TryCloneBody;
use crate::BoxError;
use bytes::{Buf, Bytes, BytesMut};
use http::HeaderMap;
use http_body::{Body, Frame, SizeHint};
use std::{
    error::Error,
    fmt, mem,
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    task::{Context, Poll, Waker},
};

/// The default cap of a [`ReplayBody`]'s buffer: 64 KiB, as linkerd's.
pub const DEFAULT_REPLAY_CAP: usize = 64 * 1024;

/// The size of the blocks small data frames are copied into, and the size
/// from which a frame is kept as it came, without a copy.
const BLOCK: usize = 4 * 1024;

/// A request body that [`StatusRetry`](crate::retry::StatusRetry) can send again,
/// although the body it wraps is a stream (hyper's `Incoming`, axum's `Body`,
/// tonic's body).
///
/// The original and the copies made for retries share one state: what has
/// been read of the wrapped body so far (kept in a buffer, up to a cap of
/// 64 KiB by default), and the unread rest of it. Whichever of them is sent
/// plays the buffer first and then reads on from the rest, keeping what it
/// reads. When it is dropped before the end (its attempt failed, or was never
/// sent at all), it hands the unread rest back, and the next copy continues
/// from there. So:
///
/// - a request that was **never sent** (a refused connection, an HTTP/2
///   stream refused unprocessed) is sent again in full, whatever its size:
///   nothing was read, so nothing was lost;
/// - a body sent **in part or in full within the cap** is replayed from the
///   buffer, then from the rest;
/// - once any part of the body has been read and **not kept** (it went past
///   the cap), or the body failed, it cannot be produced again: the request is
///   non-repeatable and is not retried, and the caller gets the outcome as it
///   is, with [`Stop::NotReplayable`](crate::Stop::NotReplayable) in its
///   report. A body whose size hint is already over the cap keeps nothing at
///   all, and one with no copy to keep it for keeps nothing either.
///
/// A copy read while another is still reading the body (one that is still
/// being sent) follows it: it plays what the other has buffered, then waits
/// for more, or for the rest to be handed back. It ends with a
/// [`NotReplayable`] error if the other goes past the cap.
///
/// # Memory
///
/// The buffer keeps at most the cap in data, and its bookkeeping is bounded
/// with it, whatever the sizes of the frames:
///
/// - a data frame of 4 KiB or more is kept as the `Bytes` it came in, without
///   a copy;
/// - smaller frames are copied, one after another, into blocks of at most
///   4 KiB (and never past the cap), so that a body trickled one byte per
///   frame takes about the room the same bytes take in large frames; only
///   the block being filled has room left, less than 4 KiB;
/// - empty frames are not kept;
/// - so the buffer has at most `2 * (cap / 4096) + 1` chunks: one per large
///   frame, one per full block, and one per run of small frames cut short by
///   a large frame or by the end.
///
/// Each chunk costs an entry of `size_of::<Bytes>()` bytes (32 on 64-bit
/// targets) in a `Vec`, which grows by doubling from 4 entries, and at most
/// one reference count that `bytes` allocates (40 bytes at most). In all, data, room,
/// list and reference counts come to at most `cap + cap / 16 + 4352` bytes
/// on 64-bit targets: 73,984 bytes (72.25 KiB) for the default cap. The
/// trailers, if any, are kept besides. Once the body is known not to be
/// replayable, all of it is freed.
///
/// A frame kept without a copy keeps alive the storage it came in, which it
/// may share with the body that produced it (hyper's frames are slices of its
/// read buffer). Copying the small frames is what keeps a trickled body from
/// holding such storage for every few bytes it sends.
///
/// # `Unpin`
///
/// The wrapped body moves between the original and its copies, so it must be
/// `Unpin`, as hyper requires of request bodies anyway. Wrap one that is not
/// in `Box::pin` first.
///
/// # Example
///
/// ```
/// use http_body_util::BodyExt;
/// use http_resilience::body::{ReplayBody, TryCloneBody};
/// use http_resilience_mock::body::ScriptedBody;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let stream = ScriptedBody::new().data("hello ").data("again");
/// let original = ReplayBody::new(stream);
/// let copy = original.try_clone_body().unwrap();
///
/// // An attempt that was never sent: the copy gets the body untouched.
/// drop(original);
/// assert!(copy.is_replayable());
/// let again = copy.try_clone_body().unwrap();
/// let sent = copy.collect().await.unwrap().to_bytes();
/// assert_eq!(sent, "hello again");
///
/// // An attempt that sent it all: the next copy replays the buffer.
/// assert_eq!(again.collect().await.unwrap().to_bytes(), sent);
/// # }
/// ```
///
/// # Panics
///
/// Never: a copy that cannot produce the body yields a [`NotReplayable`]
/// error frame instead.
pub struct ReplayBody<B> {
    // The wrapped body, while this handle is the one reading it.
    rest: Option<B>,
    // Where this handle is in the buffer: what it plays next.
    next: Cursor,
    // Whether this handle has played the trailers.
    trailers_sent: bool,
    // Whether this handle read the wrapped body to its end: it has nothing
    // more to yield, whatever became of the buffer.
    ended: bool,
    // The bytes this handle has yielded, for its size hint.
    played: u64,
    copy: bool,
    shared: Arc<Mutex<Shared<B>>>,
}

/// What the original and its copies share.
struct Shared<B> {
    // What was kept, in order: large frames as they came, and closed runs of
    // small frames copied together.
    chunks: Vec<Bytes>,
    // The block small frames are being copied into: it follows `chunks`.
    open: BytesMut,
    trailers: Option<HeaderMap>,
    // The data bytes kept, in `chunks` and `open`.
    len: usize,
    cap: usize,
    // The size hint says the body is over the cap: nothing is kept.
    over_cap: bool,
    // The size hint of the whole body, as it was when wrapped.
    hint: SizeHint,
    state: Fill,
    // The unread rest of the body, while no handle holds it.
    parked: Option<B>,
    // Copies waiting for another handle to read on or hand the rest back.
    waiting: Vec<Waker>,
}

/// A place in the buffer: a chunk, and how much of it was played. The chunk
/// after the last one in `chunks` is the open block.
#[derive(Debug, Clone, Copy, Default)]
struct Cursor {
    chunk: usize,
    offset: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fill {
    /// Everything read so far is in the buffer; the rest may still be read.
    Intact,
    /// The body was read to its end, and all of it is in the buffer.
    Complete,
    /// Part of the body was read and not kept, or it failed: it cannot be
    /// produced again.
    Lost(Loss),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Loss {
    OverCap,
    Failed,
    NoCopy,
}

// ===== impl ReplayBody =====

impl<B: Body> ReplayBody<B> {
    /// Wraps `body`, buffering up to [`DEFAULT_REPLAY_CAP`] bytes.
    pub fn new(body: B) -> Self {
        Self::with_cap(body, DEFAULT_REPLAY_CAP)
    }

    /// Wraps `body`, buffering up to `cap` bytes.
    pub fn with_cap(body: B, cap: usize) -> Self {
        let hint = body.size_hint();
        let shared = Shared {
            chunks: Vec::new(),
            open: BytesMut::new(),
            trailers: None,
            len: 0,
            cap,
            over_cap: hint.lower() > cap as u64,
            hint,
            state: Fill::Intact,
            parked: None,
            waiting: Vec::new(),
        };
        Self {
            rest: Some(body),
            next: Cursor::default(),
            trailers_sent: false,
            ended: false,
            played: 0,
            copy: false,
            shared: Arc::new(Mutex::new(shared)),
        }
    }
}

impl<B> ReplayBody<B> {
    fn shared(&self) -> MutexGuard<'_, Shared<B>> {
        lock(&self.shared)
    }
}

fn lock<B>(shared: &Mutex<Shared<B>>) -> MutexGuard<'_, Shared<B>> {
    // NOTE: every change to the state is made whole under the lock, so a
    // panic elsewhere cannot leave it half-done.
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<B> TryCloneBody for ReplayBody<B> {
    /// A copy that shares the state; `None` once the body is known not to be
    /// replayable (part of it read and not kept, or failed).
    fn try_clone_body(&self) -> Option<Self> {
        if matches!(self.shared().state, Fill::Lost(_)) {
            return None;
        }
        Some(Self {
            rest: None,
            next: Cursor::default(),
            trailers_sent: false,
            ended: false,
            played: 0,
            copy: true,
            shared: Arc::clone(&self.shared),
        })
    }

    /// Whether a copy can still produce the whole body: nothing read so far
    /// has been lost. The unread rest may still be held by an attempt that is
    /// ending; the copy then waits for it (see the type's docs).
    fn is_replayable(&self) -> bool {
        !matches!(self.shared().state, Fill::Lost(_))
    }
}

impl<B> ReplayBody<B>
where
    B: Body + Unpin,
    B::Error: Into<BoxError>,
{
    /// Plays what the buffer holds for this handle, the end or the loss, or
    /// waits for the handle reading the body; `None` once this handle has
    /// taken over the unread rest of the body.
    fn play_buffered(&mut self, cx: &mut Context<'_>) -> Option<Polled> {
        let mut shared = lock(&self.shared);
        if let Some(chunk) = shared.play(&mut self.next) {
            self.played += chunk.len() as u64;
            return Some(Poll::Ready(Some(Ok(Frame::data(chunk)))));
        }
        match shared.state {
            Fill::Complete => Some(Poll::Ready(match &shared.trailers {
                Some(trailers) if !self.trailers_sent => {
                    self.trailers_sent = true;
                    Some(Ok(Frame::trailers(trailers.clone())))
                }
                _ => None,
            })),
            Fill::Lost(loss) => Some(Poll::Ready(Some(Err(NotReplayable::lost(loss))))),
            Fill::Intact => match shared.parked.take() {
                // NOTE: this handle has played the whole buffer, so it goes
                // on exactly where the last reader stopped.
                Some(rest) => {
                    self.rest = Some(rest);
                    None
                }
                None => {
                    // Another handle is reading the body: follow it.
                    if !shared.waiting.iter().any(|w| w.will_wake(cx.waker())) {
                        shared.waiting.push(cx.waker().clone());
                    }
                    Some(Poll::Pending)
                }
            },
        }
    }

    /// Reads the next frame of the wrapped body, keeps it, and wakes the
    /// copies following this handle.
    fn poll_rest(&mut self, cx: &mut Context<'_>) -> Polled {
        let Some(rest) = self.rest.as_mut() else {
            unreachable!("a handle reads the body only once it holds the rest")
        };
        let polled = std::task::ready!(Pin::new(&mut *rest).poll_frame(cx));
        let alone = Arc::strong_count(&self.shared) == 1;
        let ended = rest.is_end_stream();
        let mut shared = lock(&self.shared);
        let output = match polled {
            None => {
                self.rest = None;
                self.ended = true;
                shared.finish();
                None
            }
            Some(Err(err)) => {
                self.rest = None;
                shared.lose(Loss::Failed);
                Some(Err(err.into()))
            }
            Some(Ok(frame)) => match frame.into_data() {
                Ok(mut data) => {
                    let bytes = data.copy_to_bytes(data.remaining());
                    shared.take(&bytes, alone);
                    self.next = shared.end();
                    self.played += bytes.len() as u64;
                    // NOTE: hyper stops polling a body that reports its end,
                    // so the end is noted here too, not only on `None`.
                    if ended {
                        self.rest = None;
                        self.ended = true;
                        shared.finish();
                    }
                    Some(Ok(Frame::data(bytes)))
                }
                Err(frame) => {
                    // NOTE: either frame ends what this handle sends.
                    self.rest = None;
                    let last = shared.take_last(frame);
                    self.ended = last.is_ok();
                    self.trailers_sent = last.is_ok();
                    Some(last.map(Frame::trailers))
                }
            },
        };
        let waiting = mem::take(&mut shared.waiting);
        drop(shared);
        waiting.into_iter().for_each(Waker::wake);
        Poll::Ready(output)
    }
}

/// What polling a frame gives.
type Polled = Poll<Option<Result<Frame<Bytes>, BoxError>>>;

impl<B> Body for ReplayBody<B>
where
    B: Body + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        if this.ended {
            return Poll::Ready(None);
        }
        if this.rest.is_none() {
            if let Some(played) = this.play_buffered(cx) {
                return played;
            }
        }
        this.poll_rest(cx)
    }

    fn is_end_stream(&self) -> bool {
        if self.ended {
            return true;
        }
        if let Some(rest) = &self.rest {
            let ended = rest.is_end_stream();
            if ended {
                // NOTE: a body may end without ever being polled (an empty
                // one): what was read, all of it, is then complete.
                self.shared().finish();
            }
            return ended;
        }
        let shared = self.shared();
        if shared.unplayed(self.next) > 0 {
            return false;
        }
        match shared.state {
            Fill::Complete => shared.trailers.is_none() || self.trailers_sent,
            Fill::Intact => shared.parked.as_ref().is_some_and(B::is_end_stream),
            Fill::Lost(_) => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        if self.ended {
            return SizeHint::with_exact(0);
        }
        if let Some(rest) = &self.rest {
            return rest.size_hint();
        }
        let shared = self.shared();
        let buffered = shared.unplayed(self.next);
        match (&shared.state, &shared.parked) {
            (Fill::Complete, _) => SizeHint::with_exact(buffered),
            (Fill::Intact, Some(rest)) => plus(rest.size_hint(), buffered),
            // NOTE: the rest is being read elsewhere: the whole body's hint,
            // less what this handle has already yielded.
            _ => less(&shared.hint, self.played),
        }
    }
}

/// `hint` plus `n` bytes known to come first.
fn plus(hint: SizeHint, n: u64) -> SizeHint {
    let mut sum = SizeHint::new();
    sum.set_lower(hint.lower().saturating_add(n));
    if let Some(upper) = hint.upper() {
        sum.set_upper(upper.saturating_add(n));
    }
    sum
}

/// `hint` less `n` bytes already yielded.
fn less(hint: &SizeHint, n: u64) -> SizeHint {
    let mut left = SizeHint::new();
    left.set_lower(hint.lower().saturating_sub(n));
    if let Some(upper) = hint.upper() {
        // NOTE: at least the lower bound, which `set_upper` requires.
        left.set_upper(upper.saturating_sub(n).max(left.lower()));
    }
    left
}

impl<B> Drop for ReplayBody<B> {
    fn drop(&mut self) {
        let Some(rest) = self.rest.take() else {
            return;
        };
        let mut shared = self.shared();
        // NOTE: the rest is handed back only while nothing has been lost:
        // after a loss no copy can use it, and it is dropped.
        let unused = if shared.state == Fill::Intact {
            shared.parked = Some(rest);
            None
        } else {
            Some(rest)
        };
        let waiting = mem::take(&mut shared.waiting);
        drop(shared);
        drop(unused);
        waiting.into_iter().for_each(Waker::wake);
    }
}

impl<B> fmt::Debug for ReplayBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shared = self.shared();
        f.debug_struct("ReplayBody")
            .field("copy", &self.copy)
            .field("reading", &self.rest.is_some())
            .field("buffered", &shared.len)
            .field("cap", &shared.cap)
            .field("state", &shared.state)
            .finish()
    }
}

// ===== impl Shared =====

impl<B> Shared<B> {
    /// Keeps a data frame just read, unless it breaks the cap: a large one as
    /// it came, a small one copied into the open block.
    /// Takes a data frame just read: kept, unless no copy can ever want it.
    fn take(&mut self, bytes: &Bytes, alone: bool) {
        if alone {
            // NOTE: no copy exists, and none can be made from a body already
            // being read, so keeping the frames would only cost memory.
            self.lose(Loss::NoCopy);
        } else {
            self.keep(bytes);
        }
    }

    /// Takes a frame that is not data: trailers, the last frame, kept for the
    /// copies; anything else, which cannot be sent on, loses the body.
    fn take_last<D>(&mut self, frame: Frame<D>) -> Result<HeaderMap, BoxError> {
        match frame.into_trailers() {
            Ok(trailers) => {
                if self.state == Fill::Intact {
                    self.trailers = Some(trailers.clone());
                }
                self.finish();
                Ok(trailers)
            }
            Err(_) => {
                self.lose(Loss::Failed);
                Err(NotReplayable::unknown_frame())
            }
        }
    }

    fn keep(&mut self, bytes: &Bytes) {
        if self.state != Fill::Intact {
            return;
        }
        if self.over_cap || self.len.saturating_add(bytes.len()) > self.cap {
            self.lose(Loss::OverCap);
        } else if bytes.len() < BLOCK {
            self.copy_in(bytes);
        } else {
            // NOTE: the open block's bytes came first, so they are closed
            // into a chunk before this one; its room stays open.
            self.seal();
            self.len += bytes.len();
            self.chunks.push(bytes.clone());
        }
    }

    /// Copies a small frame into the open block, opening a new one whenever
    /// it is full. An empty frame keeps nothing.
    fn copy_in(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.open.len() == self.open.capacity() {
                self.seal();
                // NOTE: the caller checked the cap, so `len < cap` here, and
                // no block has room past the cap.
                self.open = BytesMut::with_capacity(BLOCK.min(self.cap - self.len));
            }
            let n = bytes.len().min(self.open.capacity() - self.open.len());
            self.open.extend_from_slice(&bytes[..n]);
            self.len += n;
            bytes = &bytes[n..];
        }
    }

    /// Closes what the open block holds into a chunk. The room left in the
    /// block (the same allocation) stays open for the next small frames.
    fn seal(&mut self) {
        if !self.open.is_empty() {
            self.chunks.push(self.open.split().freeze());
        }
    }

    /// The next piece of the buffer at `at`, moving `at` past it.
    fn play(&self, at: &mut Cursor) -> Option<Bytes> {
        while let Some(chunk) = self.chunks.get(at.chunk) {
            let offset = mem::take(&mut at.offset);
            at.chunk += 1;
            // NOTE: a chunk closed from the open block after a handle played
            // part of it: the handle goes on from where it stopped.
            if offset < chunk.len() {
                return Some(chunk.slice(offset..));
            }
        }
        // NOTE: the open block is still being filled, so what this handle
        // has not played of it is copied out; the block keeps its bytes.
        let piece = self.open.get(at.offset..).filter(|rest| !rest.is_empty())?;
        at.offset = self.open.len();
        Some(Bytes::copy_from_slice(piece))
    }

    /// Where a handle that has played everything kept so far is.
    fn end(&self) -> Cursor {
        Cursor {
            chunk: self.chunks.len(),
            offset: self.open.len(),
        }
    }

    /// The bytes kept after `at`.
    fn unplayed(&self, at: Cursor) -> u64 {
        let closed: usize = self.chunks.iter().skip(at.chunk).map(Bytes::len).sum();
        // NOTE: saturating, since a loss empties the buffer under the
        // handles' cursors.
        (closed + self.open.len()).saturating_sub(at.offset) as u64
    }

    /// Notes that the body was read to its end.
    fn finish(&mut self) {
        if self.state == Fill::Intact {
            self.state = Fill::Complete;
            // NOTE: nothing more is kept: the open block is closed into a
            // chunk, so replays play it without a copy.
            self.seal();
            self.open = BytesMut::new();
        }
    }

    /// Gives up replaying, and frees what was kept.
    fn lose(&mut self, why: Loss) {
        if self.state == Fill::Complete {
            return;
        }
        self.state = Fill::Lost(why);
        self.chunks = Vec::new();
        self.open = BytesMut::new();
        self.trailers = None;
        self.len = 0;
    }
}

/// A copy of a [`ReplayBody`] could not produce the body: part of it was sent
/// by an earlier attempt and not kept (it went past the replay cap, or no copy
/// existed to keep it for), or it failed (Apache's "non-repeatable request").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotReplayable {
    why: Loss,
    unknown_frame: bool,
}

impl NotReplayable {
    fn lost(why: Loss) -> BoxError {
        Self {
            why,
            unknown_frame: false,
        }
        .into()
    }

    fn unknown_frame() -> BoxError {
        Self {
            why: Loss::Failed,
            unknown_frame: true,
        }
        .into()
    }
}

impl fmt::Display for NotReplayable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(match (self.unknown_frame, self.why) {
            (true, _) => {
                "non-repeatable request: the body sent a frame that is neither data nor trailers"
            }
            (_, Loss::OverCap) => {
                "non-repeatable request: part of the body was sent and not kept (over the replay cap)"
            }
            (_, Loss::NoCopy) => {
                "non-repeatable request: the body was sent when no copy of it was kept"
            }
            (_, Loss::Failed) => "non-repeatable request: the body failed while it was sent",
        })
    }
}

impl Error for NotReplayable {}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, Empty, Full};
    use http_resilience_mock::body::ScriptedBody;
    use std::time::Duration;
    use tokio_test::{assert_pending, assert_ready};

    fn script() -> ScriptedBody {
        ScriptedBody::new().data("ab").data("cd").data("ef")
    }

    async fn text<B>(body: ReplayBody<B>) -> Result<Bytes, BoxError>
    where
        B: Body + Unpin,
        B::Error: Into<BoxError>,
    {
        Ok(body.collect().await?.to_bytes())
    }

    #[tokio::test]
    async fn a_copy_replays_what_the_original_sent() {
        let original = ReplayBody::new(script());
        let copy = original.try_clone_body().unwrap();
        let second = copy.try_clone_body().unwrap();
        assert_eq!(text(original).await.unwrap(), "abcdef");
        assert!(copy.is_replayable() && second.is_replayable());
        assert_eq!(copy.size_hint().exact(), Some(6));
        assert_eq!(text(copy).await.unwrap(), "abcdef");
        assert_eq!(text(second).await.unwrap(), "abcdef");
    }

    #[tokio::test]
    async fn an_original_dropped_unread_hands_the_whole_body_on() {
        let original = ReplayBody::new(script());
        let copy = original.try_clone_body().unwrap();
        drop(original);
        assert!(copy.is_replayable());
        assert_eq!(copy.size_hint().exact(), Some(6), "the body's own hint");
        let again = copy.try_clone_body().unwrap();
        assert_eq!(text(copy).await.unwrap(), "abcdef");
        assert_eq!(text(again).await.unwrap(), "abcdef", "and kept it");
    }

    #[tokio::test]
    async fn a_body_over_the_cap_never_read_is_handed_on_in_full() {
        let big = Bytes::from(vec![7u8; 1000]);
        let original = ReplayBody::with_cap(Full::new(big.clone()), 64);
        let copy = original
            .try_clone_body()
            .expect("nothing read, nothing lost");
        drop(original);
        assert!(copy.is_replayable());
        assert_eq!(copy.size_hint().exact(), Some(1000));
        let again = copy.try_clone_body().unwrap();
        assert_eq!(text(copy).await.unwrap(), big, "sent once, in full");
        assert!(!again.is_replayable(), "and, over the cap, kept nowhere");
        assert_eq!(again.shared().len, 0);
    }

    #[tokio::test]
    async fn a_partly_sent_original_hands_on_its_buffer_then_the_rest() {
        let mut original = ReplayBody::new(script().without_size_hint());
        let copy = original.try_clone_body().unwrap();
        let first = original.frame().await.unwrap().unwrap();
        assert_eq!(first.into_data().unwrap(), "ab");
        drop(original);
        assert!(copy.is_replayable());
        assert_eq!(text(copy).await.unwrap(), "abcdef", "in order");
    }

    #[tokio::test]
    async fn a_partly_sent_original_past_the_cap_is_not_replayable() {
        let mut original = ReplayBody::with_cap(script().without_size_hint(), 3);
        let copy = original.try_clone_body().unwrap();
        assert!(original.frame().await.is_some());
        assert!(copy.is_replayable(), "2 bytes read, all kept");
        assert!(original.frame().await.is_some());
        assert!(!copy.is_replayable(), "4 bytes read, 2 of them lost");
        drop(original);
        assert!(copy.try_clone_body().is_none());
        let err = text(copy).await.unwrap_err();
        assert!(err.is::<NotReplayable>());
        assert_eq!(
            err.to_string(),
            "non-repeatable request: part of the body was sent and not kept (over the replay cap)"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_copy_read_while_the_original_sends_follows_it() {
        let original = ReplayBody::new(
            ScriptedBody::new()
                .data("ab")
                .wait(Duration::from_secs(1))
                .data("cd"),
        );
        let copy = original.try_clone_body().unwrap();
        let mut follower = tokio_test::task::spawn(text(copy));
        assert_pending!(follower.poll(), "nothing read yet");
        let mut original = tokio_test::task::spawn(text(original));
        assert_pending!(original.poll(), "the original waits inside its body");
        assert!(follower.is_woken(), "woken by the first chunk");
        assert_pending!(follower.poll(), "played it, waits for more");
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(assert_ready!(original.poll()).unwrap(), "abcd");
        assert!(follower.is_woken());
        assert_eq!(assert_ready!(follower.poll()).unwrap(), "abcd");
    }

    #[tokio::test]
    async fn a_body_over_the_cap_sent_in_full_is_not_replayable_and_frees_its_buffer() {
        let original = ReplayBody::with_cap(script().without_size_hint(), 4);
        let copy = original.try_clone_body().unwrap();
        // Everything still reaches the upstream.
        assert_eq!(text(original).await.unwrap(), "abcdef");
        assert!(!copy.is_replayable());
        assert!(copy.try_clone_body().is_none());
        assert_eq!(copy.shared().len, 0);
    }

    #[tokio::test]
    async fn a_size_hint_over_the_cap_is_never_buffered() {
        let original = ReplayBody::with_cap(Full::new(Bytes::from(vec![0u8; 100])), 64);
        let copy = original.try_clone_body().unwrap();
        let mut original = original;
        assert_eq!(
            original
                .frame()
                .await
                .unwrap()
                .unwrap()
                .into_data()
                .unwrap()
                .len(),
            100
        );
        assert_eq!(copy.shared().len, 0);
        assert!(!copy.is_replayable());
    }

    #[tokio::test]
    async fn an_original_with_no_copy_keeps_nothing() {
        let mut original = ReplayBody::new(script());
        assert!(original.frame().await.is_some());
        assert_eq!(original.shared().len, 0);
        assert!(original.try_clone_body().is_none(), "too late for a copy");
        assert_eq!(
            text(original).await.unwrap(),
            "cdef",
            "the rest still goes out"
        );
    }

    #[tokio::test]
    async fn trailers_are_replayed_too() {
        let mut trailers = HeaderMap::new();
        trailers.insert("x-checksum", "42".parse().unwrap());
        let body =
            Full::new(Bytes::from_static(b"data")).with_trailers(async move { Some(Ok(trailers)) });
        // NOTE: pinned, since an async block is not `Unpin`.
        let original = ReplayBody::new(Box::pin(body));
        let copy = original.try_clone_body().unwrap();
        let sent = original.collect().await.unwrap();
        assert_eq!(sent.trailers().unwrap()["x-checksum"], "42");
        let replayed = copy.collect().await.unwrap();
        assert_eq!(replayed.trailers().unwrap()["x-checksum"], "42");
        assert_eq!(replayed.to_bytes(), "data");
    }

    #[tokio::test]
    async fn an_empty_body_ends_for_every_copy_without_being_polled() {
        let original = ReplayBody::new(Empty::<Bytes>::new());
        let copy = original.try_clone_body().unwrap();
        assert!(original.is_end_stream());
        drop(original);
        assert!(copy.is_replayable());
        assert!(copy.is_end_stream());
        assert_eq!(copy.size_hint().exact(), Some(0));
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
        assert_eq!(
            text(copy).await.unwrap_err().to_string(),
            "non-repeatable request: the body failed while it was sent"
        );
    }

    // ===== memory =====

    /// The most chunks a buffer of `cap` holds, as the type's docs state.
    fn most_chunks(cap: usize) -> usize {
        2 * (cap / BLOCK) + 1
    }

    /// `frames` of the given sizes, each of bytes counting on from the last,
    /// and all of them together.
    fn frames(sizes: &[usize]) -> (ScriptedBody, Bytes) {
        let mut script = ScriptedBody::new().without_size_hint();
        let mut whole = Vec::new();
        for &size in sizes {
            let frame: Vec<u8> = (whole.len()..whole.len() + size)
                .map(|n| (n % 251) as u8)
                .collect();
            whole.extend_from_slice(&frame);
            script = script.data(frame);
        }
        (script, Bytes::from(whole))
    }

    /// Polls `body` once, with a waker that does nothing: its next data frame,
    /// its end, or `Pending`.
    fn poll_data<B>(body: &mut ReplayBody<B>) -> Poll<Option<Result<Bytes, BoxError>>>
    where
        B: Body + Unpin,
        B::Error: Into<BoxError>,
    {
        let mut cx = Context::from_waker(Waker::noop());
        Pin::new(body)
            .poll_frame(&mut cx)
            .map(|frame| frame.map(|frame| frame.map(|f| f.into_data().unwrap())))
    }

    #[tokio::test]
    async fn one_byte_frames_are_copied_into_a_few_blocks() {
        let (body, whole) = frames(&[1; 10_000]);
        let original = ReplayBody::new(body);
        let copy = original.try_clone_body().unwrap();
        assert_eq!(text(original).await.unwrap(), whole);
        assert_eq!(copy.shared().len, 10_000);
        assert_eq!(copy.shared().chunks.len(), 3, "4096, 4096 and 1808 bytes");
        assert_eq!(text(copy).await.unwrap(), whole);
    }

    #[tokio::test]
    async fn a_large_frame_is_kept_without_a_copy() {
        let frame = Bytes::from(vec![7u8; BLOCK]);
        let original = ReplayBody::new(ScriptedBody::new().data(frame.clone()));
        let mut copy = original.try_clone_body().unwrap();
        assert_eq!(text(original).await.unwrap(), frame);
        let replayed = copy.frame().await.unwrap().unwrap().into_data().unwrap();
        assert_eq!(replayed.as_ptr(), frame.as_ptr(), "the same storage");
        assert_eq!(replayed, frame);
    }

    #[tokio::test]
    async fn small_and_large_frames_in_turn_stay_within_the_chunk_bound() {
        let sizes: Vec<usize> = [1, BLOCK]
            .into_iter()
            .cycle()
            .scan(0, |total, size| {
                *total += size;
                (*total <= DEFAULT_REPLAY_CAP).then_some(size)
            })
            .collect();
        let (body, whole) = frames(&sizes);
        let original = ReplayBody::new(body);
        let copy = original.try_clone_body().unwrap();
        assert_eq!(text(original).await.unwrap(), whole);
        let chunks = copy.shared().chunks.len();
        assert!(chunks <= most_chunks(DEFAULT_REPLAY_CAP), "{chunks} chunks");
        assert_eq!(text(copy).await.unwrap(), whole);
    }

    #[test]
    fn a_copy_following_the_original_across_a_closed_block_plays_each_byte_once() {
        let (body, whole) = frames(&[2, BLOCK, 3]);
        let mut original = ReplayBody::new(body);
        let mut follower = original.try_clone_body().unwrap();
        let mut followed = Vec::new();
        let mut follow = |follower: &mut ReplayBody<_>| {
            while let Poll::Ready(Some(data)) = poll_data(follower) {
                followed.extend_from_slice(&data.unwrap());
            }
        };
        for _ in 0..3 {
            assert!(matches!(poll_data(&mut original), Poll::Ready(Some(Ok(_)))));
            // The first and last frames are played from the open block.
            follow(&mut follower);
        }
        assert!(matches!(poll_data(&mut original), Poll::Ready(None)));
        follow(&mut follower);
        assert_eq!(followed, whole);
        assert!(matches!(poll_data(&mut follower), Poll::Ready(None)));
    }

    proptest::proptest! {
        #[test]
        fn any_frames_replay_exactly_within_the_chunk_bound(
            sizes in proptest::collection::vec(
                proptest::prop_oneof![0..32usize, BLOCK - 2..BLOCK + 2, 0..3 * BLOCK],
                0..40,
            ),
            cap in 0..20 * BLOCK,
            follow in proptest::collection::vec(proptest::bool::ANY, 40),
        ) {
            let (body, whole) = frames(&sizes);
            let mut original = ReplayBody::with_cap(body, cap);
            let mut follower = original.try_clone_body().unwrap();
            let (mut sent, mut followed) = (Vec::new(), Vec::new());
            let mut failed = false;
            for n in 0.. {
                match poll_data(&mut original) {
                    Poll::Ready(Some(data)) => sent.extend_from_slice(&data.unwrap()),
                    Poll::Ready(None) => break,
                    Poll::Pending => unreachable!("the script never waits"),
                }
                while follow.get(n).copied().unwrap_or(false) {
                    match poll_data(&mut follower) {
                        Poll::Ready(Some(Ok(data))) => followed.extend_from_slice(&data),
                        Poll::Ready(Some(Err(_))) => failed = true,
                        _ => {}
                    }
                    if failed || followed.len() == sent.len() {
                        break;
                    }
                }
                let chunks = follower.shared().chunks.len();
                proptest::prop_assert!(chunks <= most_chunks(cap), "{} chunks", chunks);
            }
            proptest::prop_assert_eq!(&sent[..], &whole[..], "the original sends it all");
            let again = follower.try_clone_body();
            let rest = ready_now(text(follower));
            if whole.len() <= cap {
                followed.extend_from_slice(&rest.unwrap());
                proptest::prop_assert_eq!(&followed[..], &whole[..]);
                proptest::prop_assert_eq!(ready_now(text(again.unwrap())).unwrap(), whole);
            } else {
                proptest::prop_assert!(failed || rest.is_err());
            }
        }
    }

    /// Runs a future that is ready at once, with a waker that does nothing.
    fn ready_now<F: std::future::Future>(future: F) -> F::Output {
        let mut future = std::pin::pin!(future);
        match future
            .as_mut()
            .poll(&mut Context::from_waker(Waker::noop()))
        {
            Poll::Ready(output) => output,
            Poll::Pending => unreachable!("nothing here waits"),
        }
    }

    // ===== extremes =====

    #[tokio::test(flavor = "current_thread")]
    async fn replay_caps_of_zero_and_usize_max() {
        let nothing_kept = ReplayBody::with_cap(Full::new(Bytes::from_static(b"abc")), 0);
        let copy = nothing_kept
            .try_clone_body()
            .expect("nothing read yet, so nothing lost");
        assert_eq!(
            nothing_kept.collect().await.unwrap().to_bytes(),
            "abc",
            "the original is still sent"
        );
        assert!(!copy.is_replayable(), "but none of it was kept");

        let everything = ReplayBody::with_cap(ScriptedBody::new().data("ab").data("c"), usize::MAX);
        let copy = everything.try_clone_body().expect("nothing spoiled yet");
        assert_eq!(everything.collect().await.unwrap().to_bytes(), "abc");
        assert_eq!(copy.collect().await.unwrap().to_bytes(), "abc");
    }
}
