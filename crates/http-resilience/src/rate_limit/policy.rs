//! The policy: the rate, the burst, how a call over the limit is treated,
//! what is learned from the server, and the buckets kept per key, shared by
//! every clone.

use super::{
    bucket::Bucket,
    common::Core,
    events::{RateLimitEvent, RateLimitListeners},
    learn::ServerSignals,
    settings::{RateLimitMode, RateLimitSettings, RateLimitState, Settings},
};
use crate::{
    key::{Kept, Keyed, PerKey, Registry, Room, UpstreamKey},
    telemetry::Listener,
    InvalidSetting,
};
use std::{fmt, ops::Deref, sync::Arc, time::Duration};
use tokio::time::Instant;

/// What every clone of a policy shares: the core every part reads, the
/// buckets kept per key, and the fleet's quota when the limit is the
/// fleet's.
pub(crate) struct Shared {
    pub(crate) core: Core,
    pub(crate) registry: Registry<Bucket>,
    /// The fleet's quota in Redis, if the limit is the fleet's.
    #[cfg(feature = "redis")]
    pub(crate) fleet: Option<super::fleet::Fleet>,
}

/// A rate limit per key (by default the request's authority, as the other
/// guards key their state): GCRA with a rate and a burst, kept in one atomic
/// word per key. A call over the limit waits for its slot, within its
/// deadline, or is turned away at once ([`RateLimitMode`]); with
/// [`with_server_signals`](Self::with_server_signals) the server's
/// `Retry-After`, gRPC pushback and quota fields pause or pace every call to
/// the key. See the [module docs](super).
///
/// Clones share the state of every key.
///
/// # Defaults
///
/// | setting | default | method |
/// |---|---|---|
/// | burst | 1: no two calls closer than the interval | [`with_burst`](Self::with_burst) |
/// | over the limit | wait, within the deadline | [`with_mode`](Self::with_mode) |
/// | longest wait | the call's deadline | [`with_max_wait`](Self::with_max_wait) |
/// | least useful attempt after a wait | none | [`with_min_attempt`](Self::with_min_attempt) |
/// | server signals | none | [`with_server_signals`](Self::with_server_signals) |
/// | longest pause or pace learned | 60 s | [`with_max_pause`](Self::with_max_pause) |
/// | keys kept, idle after | 1024, 5 min | [`max_keys`](Self::max_keys) |
///
/// # Example
///
/// ```
/// use http_resilience::rate_limit::{RateLimitMode, RateLimitPolicy, ServerSignals};
/// use std::time::Duration;
///
/// // 100 calls a second per authority, 10 at once after a quiet spell,
/// // paused and paced by what the server says.
/// let limit = RateLimitPolicy::new(100, Duration::from_secs(1))?
///     .with_burst(10)?
///     .with_server_signals(ServerSignals::ALL);
/// assert!(format!("{limit:?}").contains("burst: 10"));
/// // Turned away at once rather than made to wait.
/// let strict = limit.with_mode(RateLimitMode::TurnAway);
/// # let _ = strict;
/// # Ok::<(), http_resilience::InvalidSetting>(())
/// ```
#[derive(Clone)]
pub struct RateLimitPolicy {
    pub(crate) shared: Arc<Shared>,
}

// ===== impl RateLimitPolicy =====

impl RateLimitPolicy {
    /// At most `calls` calls per `per`, per key, evenly spaced (a burst of
    /// 1, [`with_burst`](Self::with_burst) for more).
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] when `calls` (field `calls`) is 0 or `per` (field
    /// `per`) is zero.
    pub fn new(calls: u32, per: Duration) -> Result<Self, InvalidSetting> {
        if calls == 0 {
            return Err(InvalidSetting::new("calls", "must be at least 1").with_value("0"));
        }
        if per.is_zero() {
            return Err(InvalidSetting::new("per", "must be greater than zero").with_value("0s"));
        }
        let settings = Settings {
            calls,
            per,
            burst: 1,
            mode: RateLimitMode::Wait,
            max_wait: None,
            min_attempt: Duration::ZERO,
            signals: ServerSignals::NONE,
            max_pause: Duration::from_secs(60),
            max_keys: 1024,
            idle_key_timeout: Duration::from_secs(300),
        };
        Ok(Self::from_shared(Shared::new(
            settings,
            None,
            RateLimitListeners::none(),
        )))
    }

    /// The policy of `shared`, whose observer, carried from the policy it
    /// was made from, reads its new buckets too.
    fn from_shared(shared: Shared) -> Self {
        let shared = Arc::new(shared);
        if let Some(observer) = shared.listener.observer() {
            observer.observe(Kept::of(&shared, Shared::states));
        }
        Self { shared }
    }

    /// Attaches `observer` to this policy's buckets, in place; whether it
    /// was attached (not when one already is).
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
        let mut shared = Shared::new(settings, s.key_fn.clone(), s.listener.carried(None));
        #[cfg(feature = "redis")]
        {
            shared.fleet = s.fleet.as_ref().map(|fleet| fleet.remade(&shared.core));
        }
        #[cfg(not(feature = "redis"))]
        let _ = &mut shared;
        shared
    }

    fn with(self, change: impl FnOnce(&mut Settings)) -> Self {
        let mut settings = self.shared.settings;
        change(&mut settings);
        Self::from_shared(self.remade(settings))
    }

    /// Lets `burst` calls go at once after a quiet spell (GCRA's tolerance:
    /// a key idle for `burst` intervals has them all again). The rate over
    /// any span stays `calls` per `per`, plus `burst`.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] (field `burst`) when it is 0.
    pub fn with_burst(self, burst: u32) -> Result<Self, InvalidSetting> {
        if burst == 0 {
            return Err(InvalidSetting::new("burst", "must be at least 1").with_value("0"));
        }
        Ok(self.with(|s| s.burst = burst))
    }

    /// What a call over the limit does: waits for its slot (the default) or
    /// is turned away at once.
    #[must_use]
    pub fn with_mode(self, mode: RateLimitMode) -> Self {
        self.with(|s| s.mode = mode)
    }

    /// A call waits at most `max_wait` for its slot (and never past its
    /// deadline); one whose slot is further away is turned away at once.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] (field `max_wait`) when it is zero (turn calls
    /// away with [`RateLimitMode::TurnAway`] instead).
    pub fn with_max_wait(self, max_wait: Duration) -> Result<Self, InvalidSetting> {
        if max_wait.is_zero() {
            let problem = "must be greater than zero (mode \"turn_away\" turns calls away at once)";
            return Err(InvalidSetting::new("max_wait", problem).with_value("0s"));
        }
        Ok(self.with(|s| s.max_wait = Some(max_wait)))
    }

    /// A call whose slot would leave less than `min_attempt` before its
    /// deadline is turned away at once rather than wait for it. A free slot
    /// is taken whatever the time left.
    #[must_use]
    pub fn with_min_attempt(self, min_attempt: Duration) -> Self {
        self.with(|s| s.min_attempt = min_attempt)
    }

    /// Learns from the server: every response's `signals` pause the key
    /// (`Retry-After`, gRPC pushback, a quota with nothing remaining: no
    /// call to the key goes before the instant named) or pace it (a quota
    /// with some remaining: the calls spread over the time to its reset).
    /// See [`Signal`](super::Signal) for each source.
    #[must_use]
    pub fn with_server_signals(self, signals: ServerSignals) -> Self {
        self.with(|s| s.signals = signals)
    }

    /// Caps every pause and pace a server's signal sets at `max` (60 s by
    /// default): a hostile or broken server cannot stop the client for
    /// longer.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] (field `max_pause`) when it is zero.
    pub fn with_max_pause(self, max: Duration) -> Result<Self, InvalidSetting> {
        if max.is_zero() {
            let err = InvalidSetting::new("max_pause", "must be greater than zero");
            return Err(err.with_value("0s"));
        }
        Ok(self.with(|s| s.max_pause = max))
    }

    /// Tells `listener` of every [`RateLimitEvent`]; a closure
    /// `|event: &RateLimitEvent<'_>| ...` is one.
    #[must_use]
    pub fn with_listener(self, listener: impl for<'a> Listener<RateLimitEvent<'a>>) -> Self {
        let mut next = self.remade(self.shared.settings);
        next.core.listener = self.shared.listener.carried(Some(Arc::new(listener)));
        Self::from_shared(next)
    }

    /// The limit as the fleet's: one quota of `calls` per `per` shared by
    /// every process given the same Redis and key, kept by `fleet` (see
    /// [`fleet`](super::fleet)). Each process leases tokens of it and
    /// spends them locally; when Redis cannot be reached in time, the
    /// fleet's [`Fallback`](super::fleet::Fallback) holds.
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    #[must_use]
    pub fn with_fleet(self, fleet: super::fleet::FleetQuota) -> Self {
        let mut next = self.remade(self.shared.settings);
        next.fleet = Some(super::fleet::Fleet::new(fleet, &next.core));
        Self::from_shared(next)
    }

    /// The settings.
    pub(crate) fn settings(&self) -> RateLimitSettings {
        self.shared.settings
    }

    /// The fleet quota, if the limit is the fleet's: how a policy made from
    /// a configuration file hands out its quota, to connect it to Redis
    /// before the first call ([`FleetQuota::connect`](super::fleet::FleetQuota::connect)).
    #[cfg(feature = "redis")]
    #[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
    pub fn fleet(&self) -> Option<&super::fleet::FleetQuota> {
        self.shared.fleet.as_ref().map(super::fleet::Fleet::quota)
    }
}

impl PerKey for RateLimitPolicy {
    type State = RateLimitState;

    /// Keys the buckets by `key` instead of the request's authority: per
    /// API key, per tenant, per route. It sees the request's URI and
    /// headers.
    fn with_key<F>(self, key: F) -> Self
    where
        F: Fn(&http::Uri, &http::HeaderMap) -> UpstreamKey + Send + Sync + 'static,
    {
        let mut next = self.remade(self.shared.settings);
        next.core.key_fn = Some(Arc::new(key));
        Self::from_shared(next)
    }

    /// Keeps the buckets of at most `max` keys, evicting as every guard's
    /// key map does (see [`key`](crate::key)): a new key beyond `max`
    /// examines 16 keys and evicts those idle for `idle`, or the least
    /// recently used of them; a key with calls waiting is never evicted as
    /// idle, and one the server paused goes after quiet ones.
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

    /// The state of `key`'s bucket, if kept.
    fn state(&self, key: &UpstreamKey) -> Option<RateLimitState> {
        let shared = &*self.shared;
        let bucket = shared
            .registry
            .find(shared.registry.hash(key.as_ref()), key.as_ref())?;
        Some(bucket.read(shared, Instant::now()))
    }

    /// The state of every key kept, for a health endpoint or a gauge.
    fn states(&self) -> Vec<(UpstreamKey, RateLimitState)> {
        self.shared.states()
    }
}

impl fmt::Debug for RateLimitPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shared = &*self.shared;
        let mut debug = f.debug_struct("RateLimitPolicy");
        debug
            .field("settings", &shared.settings)
            .field("keyed_by_fn", &shared.key_fn.is_some())
            .field("listener", &shared.listener.given().is_some())
            .field("keys", &shared.registry.len());
        #[cfg(feature = "redis")]
        debug.field(
            "fleet",
            &shared.fleet.as_ref().map(super::fleet::Fleet::quota),
        );
        debug.finish()
    }
}

// ===== impl Shared =====

impl Shared {
    fn new(
        settings: Settings,
        key_fn: Option<Arc<crate::key::KeyFn>>,
        listener: RateLimitListeners,
    ) -> Self {
        Self {
            core: Core::new(settings, key_fn, listener),
            registry: Registry::default(),
            #[cfg(feature = "redis")]
            fleet: None,
        }
    }

    /// The bucket of a key first seen at `now`, with the fleet's leases
    /// when the limit is the fleet's.
    pub(crate) fn bucket(&self, key: UpstreamKey, now: u64) -> Bucket {
        #[allow(unused_mut)]
        let mut bucket = Bucket::new(key, now);
        #[cfg(feature = "redis")]
        {
            bucket.leases = self.fleet.as_ref().map(super::fleet::Fleet::leases);
        }
        bucket
    }
}

impl Deref for Shared {
    type Target = Core;

    #[inline]
    fn deref(&self) -> &Core {
        &self.core
    }
}

impl Shared {
    /// The state of every key kept, now.
    fn states(&self) -> Vec<(UpstreamKey, RateLimitState)> {
        let now = Instant::now();
        let all = self.registry.all();
        all.iter()
            .map(|bucket| (Keyed::key(&**bucket).clone(), bucket.read(self, now)))
            .collect()
    }
}

#[cfg(feature = "redis")]
impl super::fleet::Home for Shared {
    fn fleet(&self) -> Option<&super::fleet::Fleet> {
        self.fleet.as_ref()
    }

    fn core(&self) -> &Core {
        &self.core
    }
}
