//! What a replayed body and its copies share: the frames kept, in order,
//! the state of the fill, and the rest of the body while no handle reads it.

use super::BoxError;
use bytes::{Bytes, BytesMut};
use http::HeaderMap;
use http_body::{Frame, SizeHint};
use std::{
    error::Error,
    fmt, mem,
    sync::{Mutex, MutexGuard, PoisonError},
    task::Waker,
};

/// The size of the blocks small data frames are copied into, and the size
/// from which a frame is kept as it came, without a copy.
pub(super) const BLOCK: usize = 4 * 1024;

/// What the original and its copies share.
pub(super) struct Shared<B> {
    // What was kept, in order: large frames as they came, and closed runs of
    // small frames copied together.
    pub(super) chunks: Vec<Bytes>,
    // The block small frames are being copied into: it follows `chunks`.
    pub(super) open: BytesMut,
    pub(super) trailers: Option<HeaderMap>,
    // The data bytes kept, in `chunks` and `open`.
    pub(super) len: usize,
    pub(super) cap: usize,
    // The size hint says the body is over the cap: nothing is kept.
    pub(super) over_cap: bool,
    // The size hint of the whole body, as it was when wrapped.
    pub(super) hint: SizeHint,
    pub(super) state: Fill,
    // The unread rest of the body, while no handle holds it.
    pub(super) parked: Option<B>,
    // Copies waiting for another handle to read on or hand the rest back.
    pub(super) waiting: Vec<Waker>,
}

/// A place in the buffer: a chunk, and how much of it was played. The chunk
/// after the last one in `chunks` is the open block.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Cursor {
    pub(super) chunk: usize,
    pub(super) offset: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fill {
    /// Everything read so far is in the buffer; the rest may still be read.
    Intact,
    /// The body was read to its end, and all of it is in the buffer.
    Complete,
    /// Part of the body was read and not kept, or it failed: it cannot be
    /// produced again.
    Lost(Loss),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Loss {
    OverCap,
    Failed,
    NoCopy,
}

pub(super) fn lock<B>(shared: &Mutex<Shared<B>>) -> MutexGuard<'_, Shared<B>> {
    // NOTE: every change to the state is made whole under the lock, so a
    // panic elsewhere cannot leave it half-done.
    shared.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A copy of a [`ReplayBody`](super::ReplayBody) could not produce the body: part of it was sent
/// by an earlier attempt and not kept (it went past the replay cap, or no copy
/// existed to keep it for), or it failed (Apache's "non-repeatable request").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotReplayable {
    why: Loss,
    unknown_frame: bool,
}

// ===== impl Shared =====

impl<B> Shared<B> {
    /// Takes a data frame just read: kept, unless no copy can ever want it.
    pub(super) fn take(&mut self, bytes: &Bytes, alone: bool) {
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
    pub(super) fn take_last<D>(&mut self, frame: Frame<D>) -> Result<HeaderMap, BoxError> {
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

    /// Keeps a data frame, unless it breaks the cap: a large one as it came,
    /// a small one copied into the open block.
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
    pub(super) fn play(&self, at: &mut Cursor) -> Option<Bytes> {
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
    pub(super) fn end(&self) -> Cursor {
        Cursor {
            chunk: self.chunks.len(),
            offset: self.open.len(),
        }
    }

    /// The bytes kept after `at`.
    pub(super) fn unplayed(&self, at: Cursor) -> u64 {
        let closed: usize = self.chunks.iter().skip(at.chunk).map(Bytes::len).sum();
        // NOTE: saturating, since a loss empties the buffer under the
        // handles' cursors.
        (closed + self.open.len()).saturating_sub(at.offset) as u64
    }

    /// Notes that the body was read to its end.
    pub(super) fn finish(&mut self) {
        if self.state == Fill::Intact {
            self.state = Fill::Complete;
            // NOTE: nothing more is kept: the open block is closed into a
            // chunk, so replays play it without a copy.
            self.seal();
            self.open = BytesMut::new();
        }
    }

    /// Gives up replaying, and frees what was kept.
    pub(super) fn lose(&mut self, why: Loss) {
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

impl NotReplayable {
    pub(super) fn lost(why: Loss) -> BoxError {
        Self {
            why,
            unknown_frame: false,
        }
        .into()
    }

    pub(super) fn unknown_frame() -> BoxError {
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
