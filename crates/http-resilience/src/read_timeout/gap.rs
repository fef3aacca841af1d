use crate::extensions::saturating_after;
use pin_project_lite::pin_project;
use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};
use tokio::time::{Instant, Sleep};

pin_project! {
    /// A timer that measures one wait for data: armed when a read finds
    /// nothing ready, disarmed when data arrives.
    ///
    /// NOTE: arming on the first `Pending` (not when the previous frame was
    /// returned) means that time the reader spends elsewhere, between two
    /// reads, never counts as a gap.
    pub(crate) struct Gap {
        #[pin]
        sleep: Sleep,
        limit: Duration,
        armed: bool,
    }
}

impl Gap {
    pub(crate) fn new(limit: Duration) -> Self {
        Self {
            // An unarmed timer is never polled, so its instant does not matter.
            sleep: tokio::time::sleep_until(saturating_after(Instant::now(), limit)),
            limit,
            armed: false,
        }
    }

    /// Called after a read found nothing ready: arms the timer if needed and
    /// reports whether the gap has exceeded the limit.
    pub(crate) fn poll_expired(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut this = self.project();
        if !*this.armed {
            *this.armed = true;
            let end = saturating_after(Instant::now(), *this.limit);
            this.sleep.as_mut().reset(end);
        }
        this.sleep.poll(cx)
    }

    /// Called when data arrived: the next wait starts afresh.
    pub(crate) fn disarm(self: Pin<&mut Self>) {
        *self.project().armed = false;
    }

    pub(crate) fn limit(&self) -> Duration {
        self.limit
    }
}
