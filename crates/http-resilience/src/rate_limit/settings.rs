//! What a policy is set to, and what a key's bucket reads as: the public
//! vocabulary of the rate limit, below every part that uses it.

use super::{gcra::Pace, learn::ServerSignals};
use crate::key::nanos;
use std::time::Duration;

/// What a call over the limit does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RateLimitMode {
    /// It waits for its slot, when the wait (plus the least useful attempt)
    /// fits before its deadline and within the longest wait; otherwise it is
    /// turned away at once.
    #[default]
    Wait,
    /// It is turned away at once.
    TurnAway,
}

/// The rate limit's settings, as
/// [`RateLimitPolicy::settings`](super::RateLimitPolicy::settings) reads them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RateLimitSettings {
    /// The calls allowed per [`per`](Self::per), per key.
    pub(crate) calls: u32,
    /// The period of [`calls`](Self::calls).
    pub(crate) per: Duration,
    /// The calls that may go at once after a quiet spell.
    pub(crate) burst: u32,
    /// What a call over the limit does.
    pub(crate) mode: RateLimitMode,
    /// The longest a call waits for its slot, if bounded otherwise than by
    /// its deadline.
    pub(crate) max_wait: Option<Duration>,
    /// The least time a call needs after its wait to be useful: a wait that
    /// would leave less before the call's deadline is not made.
    pub(crate) min_attempt: Duration,
    /// The server signals the limit learns from.
    pub(crate) signals: ServerSignals,
    /// The longest pause or pace a server's signal sets.
    pub(crate) max_pause: Duration,
    /// The keys kept at most.
    pub(crate) max_keys: usize,
    /// How long a key with no call counts as idle, the first evicted when
    /// room is made.
    pub(crate) idle_key_timeout: Duration,
}

pub(crate) type Settings = RateLimitSettings;

/// What a key's bucket is now, as
/// [`RateLimitPolicy::state`](crate::key::PerKey::state) reads it.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct RateLimitState {
    /// How long a call asking now would wait for its slot (zero when one is
    /// free).
    pub delay: Duration,
    /// How long the pause the server asked for still lasts, if any.
    pub paused_for: Option<Duration>,
    /// The time between calls the server's quota sets, while it holds.
    pub paced_at: Option<Duration>,
    /// The calls waiting for their slot.
    pub waiting: u32,
    /// The fleet's tokens this process holds for the key (feature `redis`).
    pub leased: u32,
    /// Whether the key's calls fall back on the local share (or fail
    /// closed) because Redis could not be reached (feature `redis`).
    pub fleet_fallback: bool,
}

/// The pace of `settings`: the interval between calls, at least 1 ns, and
/// the burst's tolerance.
pub(crate) fn pace_of(settings: &Settings) -> Pace {
    let interval = (nanos(settings.per) / u64::from(settings.calls)).max(1);
    Pace::with_burst(interval, settings.burst)
}
