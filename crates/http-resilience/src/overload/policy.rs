//! The policy: the limit, the queue, the throttle, and the state they keep
//! per key, shared by every clone.

use super::{
    events::{OverloadEvent, OverloadListeners},
    limit::{AdaptiveLimit, Limit},
    settings::{OverloadSettings, OverloadState, Settings},
    slots::Slots,
    throttle::Throttle,
};
use crate::{
    key::{Clock, Kept, KeyFn, Registry, Room},
    key::{PerKey, UpstreamKey},
    policy::Seeds,
    telemetry::Listener,
    InvalidSetting,
};
use std::{fmt, sync::Arc, time::Duration};
use tokio::time::Instant;

/// What every clone of a policy shares.
pub(crate) struct Shared {
    pub(crate) settings: Settings,
    pub(crate) key_fn: Option<Arc<KeyFn>>,
    pub(crate) listener: OverloadListeners,
    seeds: Seeds,
    /// The instant the slots count their time from.
    clock: Clock,
    pub(crate) registry: Registry<Slots>,
}

/// Overload control per key (by default the request's authority, as the
/// circuit breaker keys its circuits): a limit of calls in flight (fixed, a
/// bulkhead, or adaptive), a bounded queue whose wait never outlasts the
/// call's deadline, and client-side throttling. See the
/// [module docs](super).
///
/// Clones share the state of every key.
///
/// # Defaults
///
/// | setting | default | method |
/// |---|---|---|
/// | queue | none: a call with no slot is turned away at once | [`with_queue`](Self::with_queue) |
/// | longest wait | the call's deadline | [`with_max_wait`](Self::with_max_wait) |
/// | least useful attempt after a wait | none | [`with_min_attempt`](Self::with_min_attempt) |
/// | throttling | off | [`with_throttle`](Self::with_throttle) |
/// | keys kept, idle after | 1024, 5 min | [`max_keys`](Self::max_keys) |
///
/// # Example
///
/// ```
/// use http_resilience::overload::{AdaptiveLimit, OverloadPolicy, Throttle};
/// use std::time::Duration;
///
/// // At most 64 calls in flight per authority, 64 more waiting.
/// let bulkhead = OverloadPolicy::bulkhead(64)?.with_queue(64);
/// // A limit that follows the upstream's latency, and throttling.
/// let adaptive = OverloadPolicy::adaptive(AdaptiveLimit::default())
///     .with_queue(32)
///     .with_max_wait(Duration::from_millis(500))?
///     .with_throttle(Throttle::default());
/// assert!(format!("{adaptive:?}").contains("max_queued: 32"));
/// # Ok::<(), http_resilience::InvalidSetting>(())
/// ```
#[derive(Clone)]
pub struct OverloadPolicy {
    pub(crate) shared: Arc<Shared>,
}

// ===== impl OverloadPolicy =====

impl OverloadPolicy {
    /// A bulkhead: at most `max_in_flight` calls in flight per key.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] (field `max_in_flight`) when it is 0.
    pub fn bulkhead(max_in_flight: u32) -> Result<Self, InvalidSetting> {
        if max_in_flight == 0 {
            return Err(InvalidSetting::new("max_in_flight", "must be at least 1").with_value("0"));
        }
        Ok(Self::with_limit(Limit::Fixed(max_in_flight)))
    }

    /// An adaptive concurrency limit per key.
    pub fn adaptive(limit: AdaptiveLimit) -> Self {
        Self::with_limit(Limit::Adaptive(limit))
    }

    /// Throttling alone, with no limit of calls in flight.
    pub fn throttling(throttle: Throttle) -> Self {
        Self::with_limit(Limit::Unbounded).with_throttle(throttle)
    }

    fn with_limit(limit: Limit) -> Self {
        let settings = Settings {
            limit,
            max_queued: 0,
            max_wait: None,
            min_attempt: Duration::ZERO,
            throttle: None,
            max_keys: 1024,
            idle_key_timeout: Duration::from_secs(300),
        };
        let listeners = OverloadListeners::none();
        Self::from_shared(Shared::new(settings, None, listeners, Seeds::random()))
    }

    /// The policy of `shared`, whose observer, carried from the policy it
    /// was made from, reads its new slots too.
    fn from_shared(shared: Shared) -> Self {
        let shared = Arc::new(shared);
        if let Some(observer) = shared.listener.observer() {
            observer.observe(Kept::of(&shared, Shared::states));
        }
        Self { shared }
    }

    /// Attaches `observer` to this policy's slots, in place: every clone of
    /// the policy and every policy made from it from now on tells it of
    /// their events. Whether it was attached (not when one already is).
    #[cfg(feature = "otel")]
    pub(crate) fn attach(&self, observer: Arc<dyn super::events::Observer>) -> bool {
        if !self.shared.listener.attach(Arc::clone(&observer)) {
            return false;
        }
        observer.observe(Kept::of(&self.shared, Shared::states));
        true
    }

    /// The same parts with `settings`, and a state of its own.
    fn remade(&self, settings: Settings) -> Shared {
        let s = &*self.shared;
        Shared::new(
            settings,
            s.key_fn.clone(),
            s.listener.carried(None),
            s.seeds.clone(),
        )
    }

    fn with(self, change: impl FnOnce(&mut Settings)) -> Self {
        let mut settings = self.shared.settings;
        change(&mut settings);
        Self::from_shared(self.remade(settings))
    }

    /// Lets up to `max_queued` calls per key wait for a slot, in the order
    /// they came; a call beyond is turned away at once
    /// ([`Rejection::QueueFull`](super::Rejection::QueueFull)).
    #[must_use]
    pub fn with_queue(self, max_queued: u32) -> Self {
        self.with(|s| s.max_queued = max_queued)
    }

    /// A call waits at most `max_wait` for a slot (and never past its
    /// deadline), then is turned away
    /// ([`Rejection::WaitTooLong`](super::Rejection::WaitTooLong)).
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] (field `max_wait`) when it is zero.
    pub fn with_max_wait(self, max_wait: Duration) -> Result<Self, InvalidSetting> {
        if max_wait.is_zero() {
            return Err(InvalidSetting::new(
                "max_wait",
                "must be greater than zero (a queue of 0 turns calls away at once)",
            )
            .with_value("0s"));
        }
        Ok(self.with(|s| s.max_wait = Some(max_wait)))
    }

    /// A call that must wait for a slot stops waiting `min_attempt` before
    /// its deadline, and gives up at once when less is left already, or when
    /// the queue ahead of it, at the latency the key's calls have taken
    /// while at least half its slots were in use (or the first call's, until
    /// one was), would leave less. A free slot is taken whatever the time
    /// left: whether an attempt is still worth sending is the retry's
    /// deadline-aware scheduling's to say.
    #[must_use]
    pub fn with_min_attempt(self, min_attempt: Duration) -> Self {
        self.with(|s| s.min_attempt = min_attempt)
    }

    /// Throttles calls per key as the Google SRE book says (see
    /// [`Throttle`]).
    #[must_use]
    pub fn with_throttle(self, throttle: Throttle) -> Self {
        self.with(|s| s.throttle = Some(throttle))
    }

    /// Tells `listener` of every [`OverloadEvent`]; a closure
    /// `|event: &OverloadEvent<'_>| ...` is one.
    #[must_use]
    pub fn with_listener(self, listener: impl for<'a> Listener<OverloadEvent<'a>>) -> Self {
        let mut next = self.remade(self.shared.settings);
        next.listener = self.shared.listener.carried(Some(Arc::new(listener)));
        Self::from_shared(next)
    }

    /// Draws the throttle's rejections from `seed`: the same ones from run
    /// to run, for tests.
    #[must_use]
    pub fn with_seed(self, seed: u64) -> Self {
        let mut next = self.remade(self.shared.settings);
        next.seeds = Seeds::fixed(seed);
        Self::from_shared(next)
    }

    /// The settings.
    pub(crate) fn settings(&self) -> OverloadSettings {
        self.shared.settings
    }
}

impl PerKey for OverloadPolicy {
    type State = OverloadState;

    /// Keys the slots by `key` instead of the request's authority: per
    /// route, per tenant. It sees the request's URI and headers.
    fn with_key<F>(self, key: F) -> Self
    where
        F: Fn(&http::Uri, &http::HeaderMap) -> UpstreamKey + Send + Sync + 'static,
    {
        let mut next = self.remade(self.shared.settings);
        next.key_fn = Some(Arc::new(key));
        Self::from_shared(next)
    }

    /// Keeps the state of at most `max` keys. A new key beyond it makes room
    /// by sampling (an approximate LRU, as Redis's): it examines the next 16
    /// keys of a clock hand that sweeps them all in turn, and evicts those
    /// among them with no call for `idle` and none in flight, or, if none
    /// is, the one used least recently among them, one with no call in
    /// flight or waiting before any other.
    ///
    /// What holds whatever `max`: no more than `max` keys are kept; a new key
    /// costs the same (it examines 16 keys, never all of them); a key with a
    /// call in flight is never evicted as idle, and goes only when the 15
    /// examined with it have calls too. The key that goes is the least
    /// recently used of those examined, not always of all.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] when `max` (field `max_keys`) or `idle` (field
    /// `idle_key_timeout`) is zero.
    fn max_keys(self, max: usize, idle: Duration) -> Result<Self, InvalidSetting> {
        Room::check(max, idle)?;
        Ok(self.with(|s| {
            s.max_keys = max;
            s.idle_key_timeout = idle;
        }))
    }

    /// The state of `key`'s slots, if kept.
    fn state(&self, key: &UpstreamKey) -> Option<OverloadState> {
        let shared = &*self.shared;
        let slots = shared
            .registry
            .find(shared.registry.hash(key.as_ref()), key.as_ref())?;
        Some(shared.read(&slots))
    }

    /// The state of every key kept, for a health endpoint or a gauge.
    fn states(&self) -> Vec<(UpstreamKey, OverloadState)> {
        self.shared.states()
    }
}

impl fmt::Debug for OverloadPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shared = &*self.shared;
        f.debug_struct("OverloadPolicy")
            .field("settings", &shared.settings)
            .field("keyed_by_fn", &shared.key_fn.is_some())
            .field("listener", &shared.listener.given().is_some())
            .field("keys", &shared.registry.len())
            .finish()
    }
}

// ===== impl Shared =====

impl Shared {
    fn new(
        settings: Settings,
        key_fn: Option<Arc<KeyFn>>,
        listener: OverloadListeners,
        seeds: Seeds,
    ) -> Self {
        Self {
            settings,
            key_fn,
            listener,
            seeds,
            clock: Clock::start(),
            registry: Registry::default(),
        }
    }

    /// `now` in nanoseconds on the slots' clock.
    #[inline]
    pub(crate) fn nanos(&self, now: Instant) -> u64 {
        self.clock.nanos(now)
    }

    /// The room the settings give the keys.
    pub(crate) fn room(&self) -> Room {
        Room {
            max_keys: self.settings.max_keys,
            idle: self.settings.idle_key_timeout,
        }
    }

    /// The slots of a key first seen at `now` (nanoseconds on the slots'
    /// clock).
    pub(crate) fn make(&self, key: UpstreamKey, now: u64) -> Slots {
        let now = self.clock.instant(now);
        Slots::new(key, self.clock, now, &self.settings, self.seeds.next_rng())
    }

    fn read(&self, slots: &Slots) -> OverloadState {
        let (limit, in_flight, queued, p) = slots.read(Instant::now());
        OverloadState {
            limit: (limit != u32::MAX).then_some(limit),
            in_flight,
            queued,
            rejection_probability: p,
        }
    }
}

impl Shared {
    /// The state of every key kept.
    fn states(&self) -> Vec<(UpstreamKey, OverloadState)> {
        let all = self.registry.all();
        all.iter()
            .map(|slots| (crate::key::Keyed::key(&**slots).clone(), self.read(slots)))
            .collect()
    }
}
