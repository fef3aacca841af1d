//! What every part of a policy reads: its settings and pace, the key
//! function, the listeners, and the clock its buckets keep time on.

use super::{
    events::{emit, RateLimitEvent, RateLimitListeners},
    gcra::Pace,
    settings::{pace_of, Settings},
};
use crate::key::{Clock, KeyFn, Room};
use std::{sync::Arc, time::Duration};
use tokio::time::Instant;

/// A policy's settings, key function, listeners and clock.
pub(crate) struct Core {
    pub(crate) settings: Settings,
    /// The policy's pace, in nanoseconds.
    pub(crate) pace: Pace,
    pub(crate) key_fn: Option<Arc<KeyFn>>,
    pub(super) listener: RateLimitListeners,
    clock: Clock,
}

// ===== impl Core =====

impl Core {
    pub(super) fn new(
        settings: Settings,
        key_fn: Option<Arc<KeyFn>>,
        listener: RateLimitListeners,
    ) -> Self {
        Self {
            pace: pace_of(&settings),
            settings,
            key_fn,
            listener,
            clock: Clock::start(),
        }
    }

    /// `now` in nanoseconds on the buckets' clock.
    #[inline]
    pub(crate) fn nanos(&self, now: Instant) -> u64 {
        self.clock.nanos(now)
    }

    /// The instant of `nanos` on the buckets' clock.
    pub(crate) fn instant(&self, nanos: u64) -> Instant {
        let base = self.clock.base();
        base.checked_add(Duration::from_nanos(nanos))
            .unwrap_or(base + Duration::from_secs(86_400 * 365 * 30))
    }

    /// The room the settings give the keys.
    pub(crate) fn room(&self) -> Room {
        Room {
            max_keys: self.settings.max_keys,
            idle: self.settings.idle_key_timeout,
        }
    }

    /// Logs `event` and tells the listeners.
    pub(crate) fn tell(&self, event: &RateLimitEvent<'_>) {
        emit(&self.listener, event);
    }

    /// Whether anyone hears the events beyond the log.
    pub(crate) fn is_heard(&self) -> bool {
        self.listener.any()
    }
}
