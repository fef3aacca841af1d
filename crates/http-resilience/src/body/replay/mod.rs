//! A streaming request body that can be sent again: buffered lazily, up to a
//! cap, while an attempt sends it; what no attempt has read yet passes on,
//! untouched, to the next.

mod buffer;

pub use self::buffer::NotReplayable;

use self::buffer::{lock, Cursor, Fill, Loss, Shared};
use super::TryCloneBody;
use crate::BoxError;
use bytes::{Buf, Bytes, BytesMut};
use http_body::{Body, Frame, SizeHint};
use std::{
    fmt, mem,
    pin::Pin,
    sync::{Arc, Mutex, MutexGuard},
    task::{Context, Poll, Waker},
};

/// The default cap of a [`ReplayBody`]'s buffer: 64 KiB, as linkerd's.
pub const DEFAULT_REPLAY_CAP: usize = 64 * 1024;

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
/// Besides the crates the README's "Use" section lists, the example needs
/// `http-resilience-mock = "0.1"`, for its scripted body.
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
            // NOTE: parked, not held: whichever handle is read first takes
            // it, so a copy is never held back by an original that is not
            // being read (an attempt still connecting).
            parked: Some(body),
            waiting: Vec::new(),
        };
        Self {
            rest: None,
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
                // one): what was read, all of it, is then complete, and the
                // copies following this handle can end too.
                let mut shared = self.shared();
                shared.finish();
                let waiting = mem::take(&mut shared.waiting);
                drop(shared);
                waiting.into_iter().for_each(Waker::wake);
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

#[cfg(test)]
mod tests;
