//! The bucket of one key: its GCRA, the pause and the pace the server set,
//! and the calls waiting, in atomics (no lock on the way of a call).

use super::{
    common::Core,
    error::Limited,
    events::RateLimitEvent,
    gcra::{Gcra, Pace, Taken},
    learn::{Heard, Spread},
    settings::{RateLimitMode, RateLimitState},
};
use crate::key::{nanos, Keyed, UpstreamKey};
use std::{
    sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering},
    time::Duration,
};
use tokio::time::Instant;

/// The bucket of one key.
#[derive(Debug)]
pub(crate) struct Bucket {
    key: UpstreamKey,
    last_used: AtomicU64,
    evicted: AtomicBool,
    pub(super) gcra: Gcra,
    /// The end of the pause the server asked for, on the policy's clock;
    /// 0 for none.
    pub(super) paused_until: AtomicU64,
    /// The interval between calls the server's quota set, in nanoseconds,
    /// and until when it holds.
    ///
    /// NOTE: two words, written interval first and read end first; a reader
    /// racing a writer may pair a new end with the interval before, for one
    /// call, which the next response sets right. No call goes faster than
    /// the policy's own pace whatever it reads.
    paced_at: AtomicU64,
    paced_until: AtomicU64,
    /// The calls waiting for their slot.
    pub(super) waiting: AtomicU32,
    /// The fleet's leases for this key, if the limit is the fleet's.
    #[cfg(feature = "redis")]
    pub(super) leases: Option<super::fleet::lease::Leases>,
}

/// What the bucket (or the fleet's lease) gave a call asking for a slot.
pub(crate) enum Granted {
    /// Its slot, now.
    Now,
    /// Its slot, at this instant: the call waits for it; the GCRA's slot to
    /// give back if it is dropped first.
    At(u64, Option<(Taken, u64)>),
    /// No slot yet: the call waits for a lease until this instant.
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    Lease(u64),
    /// Turned away: a slot frees at this instant.
    Refused(u64, Limited),
}

// ===== impl Bucket =====

impl Bucket {
    /// The bucket of a key first seen at `now` (with no leases of the
    /// fleet's quota: the policy gives them).
    pub(crate) fn new(key: UpstreamKey, now: u64) -> Self {
        Self {
            key,
            last_used: AtomicU64::new(now),
            evicted: AtomicBool::new(false),
            gcra: Gcra::default(),
            paused_until: AtomicU64::new(0),
            paced_at: AtomicU64::new(0),
            paced_until: AtomicU64::new(0),
            waiting: AtomicU32::new(0),
            #[cfg(feature = "redis")]
            leases: None,
        }
    }

    /// Marks the bucket used at `now`.
    #[inline]
    pub(super) fn touch(&self, now: u64) {
        self.last_used.store(now, Ordering::Relaxed);
    }

    /// The pace at `now`: the policy's, or the server's while it holds and
    /// is slower.
    #[inline]
    pub(super) fn pace(&self, shared: &Core, now: u64) -> Pace {
        if self.paced_until.load(Ordering::Acquire) <= now {
            return shared.pace;
        }
        let interval = self.paced_at.load(Ordering::Relaxed);
        if interval <= shared.pace.interval {
            return shared.pace;
        }
        Pace::with_burst(interval, 1)
    }

    /// The end of the pause, 0 when none was asked for.
    #[inline]
    pub(super) fn floor(&self) -> u64 {
        self.paused_until.load(Ordering::Acquire)
    }

    /// A slot for a call asking at `now` at `pace`, no later than `latest`,
    /// from the key's own GCRA.
    #[inline]
    pub(super) fn grant(&self, core: &Core, now: u64, latest: u64, pace: Pace) -> Granted {
        let floor = self.floor();
        match self.gcra.take(now, pace, floor, latest) {
            Ok(taken) if taken.at <= now => Granted::Now,
            Ok(taken) => Granted::At(taken.at, Some((taken, pace.interval))),
            Err(at) => Granted::Refused(at, self.why(core, at, floor)),
        }
    }

    /// Why a call whose slot would be at `at` is turned away, the pause
    /// ending at `floor`.
    pub(super) fn why(&self, core: &Core, at: u64, floor: u64) -> Limited {
        if at <= floor {
            Limited::Paused
        } else if core.settings.mode == RateLimitMode::TurnAway {
            Limited::OverLimit
        } else {
            Limited::WaitTooLong
        }
    }

    /// Applies what a response said, at `now`: the pause (never shortened
    /// by a shorter one) and the pace. Returns a pause that lasts longer
    /// than the one held before, for the fleet to share.
    pub(super) fn learn(&self, shared: &Core, heard: Heard, now: u64) -> Option<Duration> {
        let mut longer = None;
        if let Some((pause, source)) = heard.pause {
            let until = now.saturating_add(nanos(pause));
            let before = self.paused_until.fetch_max(until, Ordering::AcqRel);
            if until > before {
                shared.tell(&RateLimitEvent::Paused {
                    key: &self.key,
                    pause,
                    source,
                });
                longer = Some(pause);
            }
        }
        if let Some(spread) = heard.pace {
            self.pace_by(shared, spread, now);
        }
        longer
    }

    /// Paces the key by `spread`, from `now`.
    fn pace_by(&self, shared: &Core, spread: Spread, now: u64) {
        let interval = nanos(spread.interval);
        let before = self.paced_at.swap(interval, Ordering::Relaxed);
        let until = now.saturating_add(nanos(spread.lasts));
        self.paced_until.store(until, Ordering::Release);
        if before != interval && interval > shared.pace.interval {
            shared.tell(&RateLimitEvent::Paced {
                key: &self.key,
                interval: spread.interval,
                lasts: spread.lasts,
                source: spread.source,
            });
        }
    }

    /// The state at `now`.
    pub(super) fn read(&self, shared: &Core, now: Instant) -> RateLimitState {
        let at = shared.nanos(now);
        let pace = self.pace(shared, at);
        let floor = self.floor();
        let delay = self.gcra.peek(at, pace, floor).saturating_sub(at);
        let paced =
            (pace.interval > shared.pace.interval).then(|| Duration::from_nanos(pace.interval));
        #[allow(unused_mut)]
        let mut state = RateLimitState {
            delay: Duration::from_nanos(delay),
            paused_for: (floor > at).then(|| Duration::from_nanos(floor - at)),
            paced_at: paced,
            waiting: self.waiting.load(Ordering::Relaxed),
            leased: 0,
            fleet_fallback: false,
        };
        #[cfg(feature = "redis")]
        if let Some(leases) = &self.leases {
            (state.leased, state.fleet_fallback) = leases.read(at);
        }
        state
    }
}

impl Keyed for Bucket {
    fn key(&self) -> &UpstreamKey {
        &self.key
    }

    fn last_used(&self) -> u64 {
        self.last_used.load(Ordering::Relaxed)
    }

    fn evicted(&self) -> &AtomicBool {
        &self.evicted
    }

    /// A key the server paused until after `now`, or with calls waiting, is
    /// kept over a quiet one: evicting it would forget the pause. A pause
    /// that is over holds nothing to forget.
    fn is_busy(&self, now: u64) -> bool {
        self.waiting.load(Ordering::Relaxed) > 0 || self.floor() > now
    }

    fn in_use(&self) -> bool {
        self.waiting.load(Ordering::Relaxed) > 0
    }
}
