//! What overload control is set to, and what a key's slots are now.

use super::{limit::Limit, throttle::Throttle};
use std::time::Duration;

/// Overload control's settings, as [`OverloadPolicy::settings`](super::OverloadPolicy::settings) reads them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct OverloadSettings {
    /// The limit of calls in flight per key.
    pub(crate) limit: Limit,
    /// The calls that may wait for a slot per key; 0 turns a call away at
    /// once when every slot is in use.
    pub(crate) max_queued: u32,
    /// The longest a call waits for a slot, if bounded otherwise than by its
    /// deadline.
    pub(crate) max_wait: Option<Duration>,
    /// The least time a call needs after a wait for a slot to be useful: a
    /// wait that would leave less before the call's deadline is not made.
    pub(crate) min_attempt: Duration,
    /// Client-side throttling, if on.
    pub(crate) throttle: Option<Throttle>,
    /// The keys kept at most.
    pub(crate) max_keys: usize,
    /// How long a key with no call counts as idle, the first evicted among
    /// those a new key examines for room
    /// ([`max_keys`](crate::key::PerKey::max_keys)).
    pub(crate) idle_key_timeout: Duration,
}

pub(crate) type Settings = OverloadSettings;

/// What a key's slots are now, as [`OverloadPolicy::state`](crate::key::PerKey::state) reads them.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct OverloadState {
    /// The calls that may be in flight; `None` without a limit.
    pub limit: Option<u32>,
    /// The calls in flight.
    pub in_flight: u32,
    /// The calls waiting for a slot.
    pub queued: u32,
    /// The probability that throttling turns the next call away.
    pub rejection_probability: f64,
}
