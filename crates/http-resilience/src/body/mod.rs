//! Request bodies that can be sent again, for every layer that sends a
//! request more than once (retries and hedges):
//!
//! - every `Clone` body ([`TryCloneBody`]: `Full`, `String`, `Bytes`, ...)
//!   is copied;
//! - a body that can be opened again (a file, an object in storage,
//!   generated data) goes through [`ReopenBody`], which opens it anew from a
//!   factory ([`Reopen`]) for every attempt and keeps none of it; a file is
//!   `ReopenBody::file(path)` (feature `fs`), whose length is known before
//!   the first attempt;
//! - a stream goes through [`ReplayBody`], which keeps what an attempt sends,
//!   up to a cap, and hands what it never read to the next one;
//! - or through [`SendOnce`], which is sent once and never again.
//!
//! And one trait for responses: [`AnswerBody`] (feature `fault`), the
//! response bodies a guard can make in the upstream's place.
//!
//! # Large bodies
//!
//! A body larger than a replay cap is sent again only if it can be opened
//! again: [`ReopenBody`] sends a 10 GiB upload twice holding no more than one
//! frame of it, where [`ReplayBody`] would have to keep all of it (past its
//! cap, the request is not repeatable). [`ReplayBody`] is for what cannot be
//! opened again: a small stream, such as an inbound body passed on by a
//! gateway. Every attempt of a [`ReopenBody`] sends the same length: one that
//! comes out different fails with [`BodyChanged`], and a factory that fails
//! with [`ReopenFailed`], both
//! [`FailureKind::RequestBody`](crate::FailureKind::RequestBody), which no
//! ready-made decoder retries.
//!
//! # Example
//!
//! ```
//! use bytes::Bytes;
//! use http_body_util::Full;
//! use http_resilience::body::{ReopenBody, SendOnce, TryCloneBody};
//!
//! // `Clone` bodies replay; a stream goes through `SendOnce` and does not.
//! assert!(Full::new(Bytes::from_static(b"{}")).try_clone_body().is_some());
//! assert!(SendOnce::new(Full::new(Bytes::new())).try_clone_body().is_none());
//!
//! // A factory opens the body again for every copy.
//! let reopened = ReopenBody::new(|| std::future::ready(Ok::<_, std::io::Error>(Full::new(Bytes::from("{}")))));
//! assert!(reopened.try_clone_body().is_some());
//! ```

#[cfg(feature = "fault")]
mod answer;
mod reopen;
mod replay;

#[cfg(feature = "fault")]
pub use self::answer::AnswerBody;

#[cfg(feature = "fs")]
pub use self::reopen::{FileBody, FileSource};
pub use self::{
    reopen::{BodyChanged, FactoryPanicked, Reopen, ReopenBody, ReopenFailed},
    replay::{NotReplayable, ReplayBody, DEFAULT_REPLAY_CAP},
};

use crate::RequestDeadline;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use std::{
    pin::Pin,
    task::{Context, Poll},
};

/// A request body that may be copied for another attempt.
///
/// [`StatusRetry`](crate::retry::StatusRetry) keeps a copy of the request for a retry
/// only when its body returns `Some` here.
///
/// Every `Clone` body is replayable: `Full`, `Empty`, `String`, `Bytes`,
/// `Vec<u8>` and any body of one's own that is `Clone` just work. A body that
/// cannot be copied (a stream, such as hyper's `Incoming` or axum's `Body`)
/// goes through the layer wrapped in [`ReplayBody`] (kept up to a cap while it
/// is sent), in [`ReopenBody`] if it can be opened again (opened anew for
/// every attempt), or in [`SendOnce`]: its request is then attempted once, and
/// that outcome is returned whatever the verdict.
///
/// # Example
///
/// ```
/// use bytes::Bytes;
/// use http_body_util::Full;
/// use http_resilience::body::{SendOnce, TryCloneBody};
///
/// let full = Full::new(Bytes::from_static(b"payload"));
/// assert!(full.try_clone_body().is_some());
///
/// let once = SendOnce::new(full);
/// assert!(once.try_clone_body().is_none());
/// ```
#[diagnostic::on_unimplemented(
    message = "the request body `{Self}` cannot be sent again by the retry layer",
    label = "a body the retry layer can copy for another attempt is needed here",
    note = "`Clone` bodies (`Full`, `String`, `Bytes`, ...) replay as they are",
    note = "wrap a streaming body (hyper's `Incoming`, axum's `Body`) in `ReplayBody::new(body)` to replay it, or in `SendOnce::new(body)` to send it once",
    note = "a body that can be opened again (a file) goes in `ReopenBody::new(factory)`, which opens it anew for every attempt"
)]
pub trait TryCloneBody: Sized {
    /// A copy of the body that sends the same bytes, or `None` when it cannot
    /// be replayed.
    fn try_clone_body(&self) -> Option<Self>;

    /// Whether a copy made earlier can still send the whole body. A copy of
    /// a lazily buffered body ([`ReplayBody`]) can, until
    /// part of the body has been sent and not kept (past its cap); a copy of a
    /// `Clone` body always can.
    fn is_replayable(&self) -> bool {
        true
    }
}

// NOTE: not recommended in errors, so that a body that is not `Clone` gets
// this trait's own message (which names `ReplayBody`), not "`Clone` is not
// implemented".
#[diagnostic::do_not_recommend]
impl<B: Clone> TryCloneBody for B {
    fn try_clone_body(&self) -> Option<Self> {
        Some(self.clone())
    }
}

pin_project! {
    /// A request body that is sent at most once: a request carrying it is
    /// never retried.
    ///
    /// Wraps a body that is not `Clone` (a stream) so that it can go through
    /// [`StatusRetry`](crate::retry::StatusRetry). The body itself is passed on
    /// untouched.
    ///
    /// See [`TryCloneBody`] for an example.
    #[derive(Debug, Default)]
    pub struct SendOnce<B> {
        #[pin]
        inner: B,
    }
}

// ===== impl SendOnce =====

impl<B> SendOnce<B> {
    /// Wraps `inner`.
    pub const fn new(inner: B) -> Self {
        Self { inner }
    }
}

// NOTE: `SendOnce` is deliberately not `Clone`, which is what lets this impl
// stand beside the blanket one for `Clone` bodies.
impl<B> TryCloneBody for SendOnce<B> {
    fn try_clone_body(&self) -> Option<Self> {
        None
    }
}

impl<B: Body> Body for SendOnce<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        self.project().inner.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A copy of `request` for another attempt, if its body can be replayed;
/// its extensions are copied only when `extensions` is set.
fn try_clone_request<B: TryCloneBody>(
    request: &http::Request<B>,
    extensions: bool,
) -> Option<http::Request<B>> {
    let body = request.body().try_clone_body()?;
    let mut copy = http::Request::new(body);
    *copy.method_mut() = request.method().clone();
    *copy.uri_mut() = request.uri().clone();
    *copy.version_mut() = request.version();
    // NOTE: the copy's own map is empty already: copying an empty one, and
    // dropping the map it replaces, would cost more than the rest of the copy.
    if !request.headers().is_empty() {
        *copy.headers_mut() = request.headers().clone();
    }
    // NOTE: a copied map of extensions costs a map, a table and a box per
    // value, even for an empty one.
    if extensions && !request.extensions().is_empty() {
        *copy.extensions_mut() = request.extensions().clone();
    }
    Some(copy)
}

/// The pristine copy of a request that [`StatusRetry`](crate::retry::StatusRetry)
/// keeps for the attempts after the first.
///
/// Most requests reach the retry layer with a single extension: the
/// [`RequestDeadline`] that [`Deadline`](crate::deadline::Deadline) recorded.
/// Copying that map would allocate a new map and a box per value on every
/// call, retried or not, so the copy then keeps the deadline by value and puts it back into
/// each attempt it makes. Any other extensions are copied as they are.
///
/// The last attempt the retryer allows takes the copy itself instead of a
/// copy of it; the deadline stays readable afterwards.
pub(crate) struct Pristine<B> {
    // The request, without its extensions when `deadline` holds them all;
    // `None` once the last attempt has taken it.
    request: Option<http::Request<B>>,
    // The deadline of the original: its only extension when the copy keeps
    // it by value, or read from the request once that is taken.
    deadline: Option<RequestDeadline>,
}

impl<B: TryCloneBody> Pristine<B> {
    /// A copy of `request`, if its body can be replayed.
    #[inline(always)]
    pub(crate) fn of(request: &http::Request<B>) -> Option<Self> {
        Self::with_lone(request, lone_deadline(request.extensions()))
    }

    /// A copy of `request`, whose [`lone_deadline`] the caller looked up
    /// already, if its body can be replayed.
    #[inline(always)]
    pub(crate) fn with_lone(
        request: &http::Request<B>,
        deadline: Option<RequestDeadline>,
    ) -> Option<Self> {
        let request = try_clone_request(request, deadline.is_none())?;
        Some(Self {
            request: Some(request),
            deadline,
        })
    }

    /// A request for the next attempt, keeping this copy for later ones.
    pub(crate) fn next_attempt(&self) -> Option<http::Request<B>> {
        let request = try_clone_request(self.request.as_ref()?, true)?;
        Some(restore(request, self.deadline))
    }
}

impl<B> Pristine<B> {
    /// The copy as kept, without the deadline when that is kept by value: for
    /// reading its method, headers and body, not for sending. `None` once the
    /// last attempt has taken it.
    pub(crate) fn kept(&self) -> Option<&http::Request<B>> {
        self.request.as_ref()
    }

    /// The deadline of the original request.
    pub(crate) fn deadline(&self) -> Option<RequestDeadline> {
        self.deadline
            .or_else(|| self.request.as_ref().and_then(RequestDeadline::of))
    }

    /// The copy itself, for the last attempt; `None` if already taken.
    pub(crate) fn take(&mut self) -> Option<http::Request<B>> {
        let request = self.request.take()?;
        Some(match self.deadline {
            Some(deadline) => restore(request, Some(deadline)),
            None => {
                // NOTE: the deadline in the map leaves with the request; a
                // copy of it stays for reading.
                self.deadline = RequestDeadline::of(&request);
                request
            }
        })
    }

    /// Whether the last attempt has taken the copy.
    pub(crate) fn is_taken(&self) -> bool {
        self.request.is_none()
    }
}

/// The [`RequestDeadline`] in `extensions` when it is their only value:
/// the one a [`Pristine`] keeps by value.
#[inline(always)]
pub(crate) fn lone_deadline(extensions: &http::Extensions) -> Option<RequestDeadline> {
    match extensions.len() {
        1 => extensions.get::<RequestDeadline>().copied(),
        _ => None,
    }
}

fn restore<B>(
    mut request: http::Request<B>,
    deadline: Option<RequestDeadline>,
) -> http::Request<B> {
    if let Some(deadline) = deadline {
        request.extensions_mut().insert(deadline);
    }
    request
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use http_body_util::Full;

    #[derive(Clone, Debug, PartialEq)]
    struct Marker(u8);

    #[test]
    fn copies_every_part_of_the_request() {
        let request = http::Request::builder()
            .method("PUT")
            .uri("http://example.test/a?b=c")
            .version(http::Version::HTTP_2)
            .header("x-one", "1")
            .extension(Marker(7))
            .body(Full::new(Bytes::from_static(b"payload")))
            .unwrap();
        let copy = Pristine::of(&request)
            .expect("a Full body is replayable")
            .next_attempt()
            .expect("and so is its copy");
        assert_eq!(copy.method(), "PUT");
        assert_eq!(copy.uri(), "http://example.test/a?b=c");
        assert_eq!(copy.version(), http::Version::HTTP_2);
        assert_eq!(copy.headers()["x-one"], "1");
        assert_eq!(copy.extensions().get::<Marker>(), Some(&Marker(7)));
    }

    #[test]
    fn send_once_bodies_are_not_replayed() {
        let request = http::Request::new(SendOnce::new(Full::new(Bytes::from_static(b"x"))));
        assert!(Pristine::of(&request).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_deadline_is_kept_by_value_and_restored() {
        let deadline = RequestDeadline::after(std::time::Duration::from_secs(1));
        let request = http::Request::builder()
            .extension(deadline)
            .body(Full::new(Bytes::from_static(b"x")))
            .unwrap();
        let mut pristine = Pristine::of(&request).expect("replayable");
        assert!(pristine.kept().expect("kept").extensions().is_empty());
        assert_eq!(pristine.deadline(), Some(deadline));
        let next = pristine.next_attempt().expect("replayable");
        assert_eq!(RequestDeadline::of(&next), Some(deadline));
        assert_eq!(next.extensions().len(), 1);
        let last = pristine.take().expect("not taken yet");
        assert_eq!(RequestDeadline::of(&last), Some(deadline));
        assert!(pristine.is_taken() && pristine.take().is_none());
        assert_eq!(pristine.deadline(), Some(deadline));
    }

    #[tokio::test(start_paused = true)]
    async fn a_deadline_with_other_extensions_is_copied_with_them() {
        let deadline = RequestDeadline::after(std::time::Duration::from_secs(1));
        let request = http::Request::builder()
            .extension(deadline)
            .extension(Marker(3))
            .body(Full::new(Bytes::from_static(b"x")))
            .unwrap();
        let mut pristine = Pristine::of(&request).expect("replayable");
        assert_eq!(pristine.deadline(), Some(deadline));
        let next = pristine.next_attempt().expect("replayable");
        assert_eq!(RequestDeadline::of(&next), Some(deadline));
        assert_eq!(next.extensions().get::<Marker>(), Some(&Marker(3)));
        assert_eq!(next.extensions().len(), 2);
        let last = pristine.take().expect("not taken yet");
        assert_eq!(last.extensions().get::<Marker>(), Some(&Marker(3)));
        assert_eq!(RequestDeadline::of(&last), Some(deadline));
        // The deadline stays readable once the request is gone.
        assert_eq!(pristine.deadline(), Some(deadline));
    }
}
