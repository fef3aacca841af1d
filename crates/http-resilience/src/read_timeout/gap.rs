use crate::timer::saturating_after;
use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};
use tokio::time::{Instant, Sleep};

/// A timer that measures one wait for data: armed when a read finds nothing
/// ready, disarmed when data arrives.
///
/// NOTE: arming on the first `Pending` (not when the previous frame was
/// returned) means that time the reader spends elsewhere, between two reads,
/// never counts as a gap. The timer is allocated on the first wait only and
/// reset after that, so reads that are always ready cost no timer at all, and
/// the holder stays `Unpin`.
pub(crate) struct Gap {
    sleep: Option<Pin<Box<Sleep>>>,
    limit: Duration,
    armed: bool,
}

impl Gap {
    pub(crate) fn new(limit: Duration) -> Self {
        Self {
            sleep: None,
            limit,
            armed: false,
        }
    }

    /// Called after a read found nothing ready: arms the timer if needed and
    /// reports whether the gap has exceeded the limit.
    pub(crate) fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let limit = self.limit;
        let end = || saturating_after(Instant::now(), limit);
        let was_armed = std::mem::replace(&mut self.armed, true);
        let mut fresh = false;
        let sleep = self.sleep.get_or_insert_with(|| {
            fresh = true;
            Box::pin(tokio::time::sleep_until(end()))
        });
        if !was_armed && !fresh {
            sleep.as_mut().reset(end());
        }
        sleep.as_mut().poll(cx)
    }

    /// Called when data arrived: the next wait starts afresh.
    pub(crate) fn disarm(&mut self) {
        self.armed = false;
    }

    pub(crate) fn limit(&self) -> Duration {
        self.limit
    }
}
