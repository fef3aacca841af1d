//! The response body with a limit on every wait for a frame.
//!
//! # Example
//!
//! Besides the crates the README's "Use" section lists, the example needs
//! `http-resilience-mock = "0.1"`, for its scripted body.
//!
//! ```
//! use http_body_util::BodyExt;
//! use http_resilience::read_timeout::{body::ReadTimeoutBody, error::ReadTimedOut};
//! use http_resilience_mock::body::ScriptedBody;
//! use std::time::Duration;
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! // A frame, then a silence of 2 s against a limit of 250 ms.
//! let script = ScriptedBody::new().data("a").wait(Duration::from_secs(2)).data("b");
//! let err = ReadTimeoutBody::new(script, Duration::from_millis(250))
//!     .collect()
//!     .await
//!     .unwrap_err();
//! assert!(err.is::<ReadTimedOut>());
//! # }
//! ```

use super::{
    error::{Phase, ReadTimedOut},
    gap::Gap,
};
use crate::BoxError;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use std::{
    fmt,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

pin_project! {
    /// A response body that fails with [`ReadTimedOut`] when a wait for its next
    /// frame lasts longer than the limit.
    ///
    /// Only waits count: the clock starts when a read finds no frame ready and
    /// stops when one arrives. After the error the body reports its end. A body that keeps delivering frames may take any
    /// time in all; bound the whole call with
    /// [`Deadline`](crate::deadline::Deadline).
    pub struct ReadTimeoutBody<B> {
        #[pin]
        inner: B,
        gap: Gap,
        timed_out: bool,
    }
}

// ===== impl ReadTimeoutBody =====

impl<B> ReadTimeoutBody<B> {
    /// Wraps `inner`, allowing waits of at most `limit` for each frame.
    pub fn new(inner: B, limit: Duration) -> Self {
        Self {
            inner,
            gap: Gap::new(limit),
            timed_out: false,
        }
    }
}

impl<B> Body for ReadTimeoutBody<B>
where
    B: Body,
    B::Error: Into<BoxError>,
{
    type Data = B::Data;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = self.project();
        if *this.timed_out {
            return Poll::Ready(None);
        }
        if let Poll::Ready(frame) = this.inner.poll_frame(cx) {
            this.gap.disarm();
            return Poll::Ready(frame.map(|result| result.map_err(Into::into)));
        }
        let limit = this.gap.limit();
        match this.gap.poll_expired(cx) {
            Poll::Ready(()) => {
                *this.timed_out = true;
                Poll::Ready(Some(Err(ReadTimedOut::new(limit, Phase::Body).into())))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.timed_out || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        if self.timed_out {
            SizeHint::with_exact(0)
        } else {
            self.inner.size_hint()
        }
    }
}

impl<B: fmt::Debug> fmt::Debug for ReadTimeoutBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReadTimeoutBody")
            .field("inner", &self.inner)
            .field("limit", &self.gap.limit())
            .field("timed_out", &self.timed_out)
            .finish()
    }
}
