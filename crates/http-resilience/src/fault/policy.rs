//! The policy: the fault, which attempts get it, and the count it keeps per
//! key, shared by every clone.

use super::{trigger::Trigger, Fault, FaultSwitch};
use crate::{
    key::{Clock, KeyFn, Keyed, PerKey, Registry, Room, UpstreamKey},
    policy::Seeds,
    InvalidSetting,
};
use std::{
    fmt,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};
use tokio::time::Instant;

/// Fault injection per key (by default the request's authority, as the
/// circuit breaker keys its circuits): one [`Fault`], given to the
/// attempts a rate or a schedule picks, from seeded numbers, while its
/// [`FaultSwitch`] is on. See the [module docs](super) for where it goes.
///
/// A key's attempts are counted from 1, from the first one this policy
/// sees (while its switch is on); a schedule names them by that count, and
/// the draws of a rate are the same for the same attempt of the same key
/// from run to run with [`with_seed`](Self::with_seed). Several faults
/// together are several policies, a pair of guards
/// (`(latency, errors)`) or a layer each.
///
/// Clones share the count of every key and the switch.
///
/// # Defaults
///
/// | setting | default | method |
/// |---|---|---|
/// | switch | one of its own, on | [`with_switch`](Self::with_switch) |
/// | seed | random | [`with_seed`](Self::with_seed) |
/// | key | the request's authority | [`with_key`](Self::with_key) |
/// | keys kept, idle after | 1024, 5 min | [`max_keys`](Self::max_keys) |
///
/// # Example
///
/// ```
/// use http_resilience::fault::{Fault, FaultPolicy, Latency};
/// use std::time::Duration;
///
/// // One attempt in ten answered with a 503, the same ones on every run.
/// let shedding = FaultPolicy::at_rate(0.1, Fault::unavailable(Duration::from_secs(1)))?.with_seed(7);
/// // Every third attempt refused, and the first two slowed down.
/// let refusing = FaultPolicy::every(3, Fault::connect_refused())?;
/// let slow_start = FaultPolicy::on_attempts([1, 2], Fault::latency(Latency::fixed(Duration::from_millis(500))))?;
/// # let _ = (shedding, refusing, slow_start);
/// # Ok::<(), http_resilience::InvalidSetting>(())
/// ```
#[derive(Clone)]
pub struct FaultPolicy {
    // NOTE: the switch is read before anything else, once per attempt: it
    // sits here, not behind `shared`, to spare a pointer's load.
    pub(super) switch: FaultSwitch,
    pub(super) shared: Arc<Shared>,
}

/// What every clone of a policy shares.
pub(crate) struct Shared {
    pub(super) fault: Fault,
    pub(super) trigger: Trigger,
    pub(super) switch: FaultSwitch,
    pub(super) key_fn: Option<Arc<KeyFn>>,
    seeds: Seeds,
    room: Room,
    clock: Clock,
    pub(super) registry: Registry<Entry>,
}

/// What a policy keeps per key.
pub(crate) struct Entry {
    key: UpstreamKey,
    /// The seed of the key's draws.
    pub(super) seed: u64,
    /// The attempts counted so far.
    pub(super) attempts: AtomicU64,
    /// The attempts given the fault.
    pub(super) injected: AtomicU64,
    last_used: AtomicU64,
    evicted: AtomicBool,
}

/// What a policy has done to a key's attempts, as
/// [`FaultPolicy::state`](crate::key::PerKey::state) reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct FaultState {
    /// The attempts counted (those made while the switch was on).
    pub attempts: u64,
    /// The attempts given the fault.
    pub injected: u64,
}

// ===== impl FaultPolicy =====

impl FaultPolicy {
    /// Gives `fault` to each attempt with probability `rate`.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] (field `rate`) when `rate` is not in `[0, 1]`.
    pub fn at_rate(rate: f64, fault: Fault) -> Result<Self, InvalidSetting> {
        Ok(Self::new(fault, Trigger::rate(rate)?))
    }

    /// Gives `fault` to every `n`th attempt of each key: `n`, `2n`, ...
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] (field `every`) when `n` is 0.
    pub fn every(n: u64, fault: Fault) -> Result<Self, InvalidSetting> {
        Ok(Self::new(fault, Trigger::every(n)?))
    }

    /// Gives `fault` to the listed attempts of each key (counted from 1),
    /// and to no other.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] (field `attempts`) when one of them is 0.
    pub fn on_attempts(
        attempts: impl IntoIterator<Item = u64>,
        fault: Fault,
    ) -> Result<Self, InvalidSetting> {
        Ok(Self::new(fault, Trigger::attempts(attempts)?))
    }

    fn new(fault: Fault, trigger: Trigger) -> Self {
        let switch = FaultSwitch::new(true);
        let room = Room {
            max_keys: 1024,
            idle: Duration::from_secs(300),
        };
        let shared = Shared {
            fault,
            trigger,
            switch: switch.clone(),
            key_fn: None,
            seeds: Seeds::random(),
            room,
            clock: Clock::start(),
            registry: Registry::default(),
        };
        Self {
            switch,
            shared: Arc::new(shared),
        }
    }

    /// The same settings, with `change` made, and a state of its own.
    fn remade(&self, change: impl FnOnce(&mut Shared)) -> Self {
        let s = &*self.shared;
        let mut shared = Shared {
            fault: s.fault.clone(),
            trigger: s.trigger.clone(),
            switch: s.switch.clone(),
            key_fn: s.key_fn.clone(),
            seeds: s.seeds.clone(),
            room: s.room,
            clock: Clock::start(),
            registry: Registry::default(),
        };
        change(&mut shared);
        Self {
            switch: shared.switch.clone(),
            shared: Arc::new(shared),
        }
    }

    /// Turns injection on and off with `switch`, which other policies may
    /// share (see [`FaultSwitch`]).
    #[must_use]
    pub fn with_switch(self, switch: FaultSwitch) -> Self {
        self.remade(|s| s.switch = switch)
    }

    /// The switch, to turn injection on and off at run time.
    #[cfg(test)]
    pub(crate) const fn switch(&self) -> &FaultSwitch {
        &self.switch
    }

    /// Draws from `seed`: the same attempts picked, and the same waits,
    /// from run to run (for a key's attempts; keys first seen in the same
    /// order get the same draws).
    #[must_use]
    pub fn with_seed(self, seed: u64) -> Self {
        self.remade(|s| s.seeds = Seeds::fixed(seed))
    }

    /// The fault.
    #[cfg(test)]
    pub(crate) fn fault(&self) -> &Fault {
        &self.shared.fault
    }
}

impl PerKey for FaultPolicy {
    type State = FaultState;

    /// Keys the counts by `key` instead of the request's authority: per
    /// route, per tenant. It sees the request's URI and headers.
    fn with_key<F>(self, key: F) -> Self
    where
        F: Fn(&http::Uri, &http::HeaderMap) -> UpstreamKey + Send + Sync + 'static,
    {
        self.remade(|s| s.key_fn = Some(Arc::new(key)))
    }

    /// Keeps the counts of at most `max` keys; a new key beyond makes room
    /// by sampling, as every guard's [key map](crate::key) does, first
    /// evicting keys with no attempt for `idle`. A key evicted and seen
    /// again counts its attempts from 1.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] when `max` (field `max_keys`) or `idle` (field
    /// `idle_key_timeout`) is zero.
    fn max_keys(self, max: usize, idle: Duration) -> Result<Self, InvalidSetting> {
        Room::check(max, idle)?;
        let room = Room {
            max_keys: max,
            idle,
        };
        Ok(self.remade(|s| s.room = room))
    }

    /// What the policy has done to `key`'s attempts, if it has seen any.
    fn state(&self, key: &UpstreamKey) -> Option<FaultState> {
        let registry = &self.shared.registry;
        let entry = registry.find(registry.hash(key.as_ref()), key.as_ref())?;
        Some(entry.state())
    }

    /// What the policy has done to every key kept.
    fn states(&self) -> Vec<(UpstreamKey, FaultState)> {
        let all = self.shared.registry.all();
        all.iter()
            .map(|entry| (entry.key.clone(), entry.state()))
            .collect()
    }
}

impl fmt::Debug for FaultPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shared = &*self.shared;
        f.debug_struct("FaultPolicy")
            .field("fault", &shared.fault)
            .field("trigger", &shared.trigger)
            .field("on", &self.switch.is_on())
            .field("keyed_by_fn", &shared.key_fn.is_some())
            .field("keys", &shared.registry.len())
            .finish()
    }
}

// ===== impl Shared =====

impl Shared {
    /// The room the settings give the keys.
    pub(super) const fn room(&self) -> Room {
        self.room
    }

    /// `now` in nanoseconds on the policy's clock.
    pub(super) fn nanos(&self, now: Instant) -> u64 {
        self.clock.nanos(now)
    }

    /// The entry of a key first seen at `now`.
    pub(super) fn make(&self, key: UpstreamKey, now: u64) -> Entry {
        Entry {
            key,
            seed: self.seeds.next_rng().next_u64(),
            attempts: AtomicU64::new(0),
            injected: AtomicU64::new(0),
            last_used: AtomicU64::new(now),
            evicted: AtomicBool::new(false),
        }
    }
}

// ===== impl Entry =====

impl Entry {
    /// Counts an attempt at `now` (on the policy's clock): its number.
    pub(super) fn count(&self, now: u64) -> u64 {
        self.last_used.store(now, Ordering::Relaxed);
        self.attempts.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn state(&self) -> FaultState {
        FaultState {
            attempts: self.attempts.load(Ordering::Relaxed),
            injected: self.injected.load(Ordering::Relaxed),
        }
    }
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("key", &self.key)
            .field("state", &self.state())
            .finish_non_exhaustive()
    }
}

impl Keyed for Entry {
    fn key(&self) -> &UpstreamKey {
        &self.key
    }

    fn last_used(&self) -> u64 {
        self.last_used.load(Ordering::Relaxed)
    }

    fn evicted(&self) -> &AtomicBool {
        &self.evicted
    }

    /// NOTE: a count is worth no more than another: the least recently
    /// used of those examined goes.
    fn is_busy(&self, _: u64) -> bool {
        false
    }
}
