//! The response body bounded by the call's deadline.
//!
//! # Example
//!
//! ```
//! use http_body_util::{BodyExt, Full};
//! use http_resilience::{deadline::body::DeadlineBody, RequestDeadline};
//! use std::time::Duration;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! let deadline = RequestDeadline::after(Duration::from_secs(1));
//! let body = DeadlineBody::new(Full::new(&b"in time"[..]), deadline);
//! assert_eq!(body.collect().await.unwrap().to_bytes(), "in time");
//!
//! let body = DeadlineBody::new(Full::new(&b"too late"[..]), deadline);
//! tokio::time::sleep(Duration::from_secs(1)).await;
//! assert!(body.collect().await.is_err());
//! # }
//! ```

use super::error::DeadlineExceeded;
use crate::timer::{poll_until, LazySleep};
use crate::{BoxError, RequestDeadline};
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use std::{
    fmt,
    pin::Pin,
    task::{Context, Poll},
};

pin_project! {
    /// A response body that fails with [`DeadlineExceeded`] when it is still
    /// being read at the call's deadline.
    ///
    /// [`Deadline`](super::Deadline) wraps every response body in it, so the one
    /// budget covers the head and the body alike.
    ///
    /// Every frame is checked against the deadline when it is read: a body
    /// whose frames are always ready (an in-memory or very fast stream) still
    /// stops at the deadline, and a frame read at or after it is dropped for
    /// the error. The end of the body is reported whenever it is read: when
    /// every frame came in time, nothing is late. After the error the body
    /// reports its end.
    ///
    /// A timer is allocated only when the inner body first has to wait for a
    /// frame; a body that is always ready costs a clock read per frame. The
    /// wrapper is `Unpin` when the inner body is.
    pub struct DeadlineBody<B> {
        #[pin]
        inner: B,
        sleep: LazySleep,
        deadline: RequestDeadline,
        expired: bool,
    }
}

// ===== impl DeadlineBody =====

impl<B> DeadlineBody<B> {
    /// Wraps `inner`, bounding its reading by `deadline`.
    pub fn new(inner: B, deadline: RequestDeadline) -> Self {
        Self::with_timer(inner, deadline, None)
    }

    /// Wraps `inner` with the timer the call already armed for the same
    /// deadline, if any, so that reading the body sets no second one.
    pub(crate) fn with_timer(inner: B, deadline: RequestDeadline, sleep: LazySleep) -> Self {
        Self {
            inner,
            sleep,
            deadline,
            expired: false,
        }
    }

    /// Returns a reference to the inner body.
    ///
    /// With the deadline outermost, this is how a caller reaches what the
    /// body below tells of itself, such as `ResumeBody::is_resumable` (feature
    /// `resume`). The body is read through this wrapper alone, so that no
    /// frame escapes the deadline: there is no `get_mut` or `into_inner`, and
    /// the body is not a [`Wrapper`](crate::Wrapper).
    pub fn get_ref(&self) -> &B {
        &self.inner
    }
}

impl<B> Body for DeadlineBody<B>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = BoxError;

    #[inline]
    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        if *this.expired {
            return Poll::Ready(None);
        }
        let deadline = this.deadline;
        match this.inner.poll_frame(cx) {
            // NOTE: the end carries nothing that could be late, so it needs no
            // clock read; a frame needs one, since a body whose frames are
            // always ready never makes the timer below fire.
            Poll::Ready(None) => return Poll::Ready(None),
            Poll::Ready(Some(frame)) if !deadline.is_expired() => {
                return Poll::Ready(Some(frame.map_err(Into::into)));
            }
            // A frame read at or after the deadline is dropped for the error.
            Poll::Ready(Some(_)) => {}
            Poll::Pending => {
                if poll_until(this.sleep, deadline.instant(), cx).is_pending() {
                    return Poll::Pending;
                }
            }
        }
        *this.expired = true;
        Poll::Ready(Some(Err(DeadlineExceeded::new(deadline.budget()).into())))
    }

    fn is_end_stream(&self) -> bool {
        self.expired || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        if self.expired {
            SizeHint::with_exact(0)
        } else {
            self.inner.size_hint()
        }
    }
}

impl<B: fmt::Debug> fmt::Debug for DeadlineBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeadlineBody")
            .field("inner", &self.inner)
            .field("deadline", &self.deadline)
            .field("expired", &self.expired)
            .finish_non_exhaustive()
    }
}
