//! One quota shared by a fleet of processes, kept in Redis (feature
//! `redis`).
//!
//! A quota is usually the fleet's, not one process's: twelve replicas with a
//! local limit of 100/s send 1,200/s. [`RateLimitPolicy::with_fleet`] makes
//! a policy's `calls` per `per` the quota of every process given the same
//! Redis, prefix and key:
//!
//! - **kept atomically in Redis** by a Lua script: GCRA, as the local limit
//!   keeps it, in microseconds of Redis's own clock (`TIME`), so that the
//!   processes' clocks do not matter; its keys expire once the quota is
//!   idle;
//! - **spent locally**: the hot path makes no round trip. Each process
//!   **leases** tokens, their slots spaced by the quota's interval, sized
//!   to the calls it saw lately (at most
//!   [`with_max_lease`](FleetQuota::with_max_lease), by default a
//!   twentieth of the quota), and asks for the next lease in the background
//!   when half of the one it holds is spent. A lease's unspent tokens
//!   expire a second after its last slot;
//! - **the bound**: a token is spent no earlier than the slot Redis gave
//!   it, so over any span the fleet sends at most the quota over that span
//!   plus its burst, **plus the tokens held and not yet spent when the span
//!   starts**: at most two leases per process (the one spent, the one asked
//!   ahead), `2 × max_lease × processes`. Under load the tokens are spent as
//!   their slots come and the excess is near none; a process that leased
//!   and then went quiet holds at most that many for a second. Each slot is
//!   placed on the local clock from Redis's at half the round trip, so a
//!   slot may come early by at most half a round trip;
//! - **Redis slow or away**: a call that finds no token waits for the lease
//!   asked for at most [`with_lease_wait`](FleetQuota::with_lease_wait) (5
//!   ms by default), then the key **falls back** ([`Fallback`]): on a local
//!   share of the quota, or failing closed
//!   ([`Limited::FleetUnavailable`]),
//!   with a [`RateLimitEvent::FleetFallback`]
//!   and, with the feature `otel`, a metric. While the key falls back no
//!   call waits for Redis, and a lease is asked again every 200 ms; the
//!   first that comes ends the fallback
//!   ([`RateLimitEvent::FleetRecovered`]).
//!   Reconnecting is redis-rs's (its `ConnectionManager`). The calls the
//!   fallback lets through while a lease is asked for spend that lease's
//!   first tokens when it comes, as do its tokens whose slots come before
//!   the fallback's last one, so that a slow Redis does not let a process
//!   spend its share twice;
//! - **a pause learned from the server is the fleet's**: written to Redis
//!   (one round trip), every lease given until it ends starts after it, and
//!   every process that gets one pauses its own calls too; until its next
//!   lease, a process spends at most the tokens it holds.
//!
//! Every lease is one round trip (a [`RateLimitEvent::Leased`]):
//! under load, one per `max_lease / 2` calls or fewer. The leases run on
//! the tokio runtime of the calls that ask for them.
//!
//! # Example
//!
//! ```no_run
//! use http_resilience::rate_limit::{
//!     fleet::{Fallback, FleetQuota},
//!     RateLimitPolicy,
//! };
//! use std::time::Duration;
//!
//! // 500 calls a second to the API, for the whole fleet; a quarter of it
//! // each while Redis is away (a fleet of four).
//! let fleet = FleetQuota::new("redis://127.0.0.1:6379/")?
//!     .with_prefix("billing-api")
//!     .with_fallback(Fallback::LocalShare(0.25))?;
//! let quota = RateLimitPolicy::new(500, Duration::from_secs(1))?.with_fleet(fleet);
//! # let _ = quota;
//! # Ok::<(), http_resilience::InvalidSetting>(())
//! ```
//!
//! `examples/quota.rs` runs two processes sharing one quota through a local
//! Redis (`cargo run -p http-resilience --example quota`).
//!
//! [`RateLimitPolicy::with_fleet`]: super::RateLimitPolicy::with_fleet

pub(super) mod lease;
mod link;
#[cfg(test)]
mod tests;

use self::{
    lease::{Leases, State},
    link::{Ask, Link, Reply},
};
use super::{
    bucket::{Bucket, Granted},
    common::Core,
    error::Limited,
    gcra::Pace,
    RateLimitEvent,
};
use crate::{
    key::{Keyed, UpstreamKey},
    InvalidSetting,
};
use std::{fmt, sync::Arc, time::Duration};
use tokio::time::Instant;

/// What a key's calls do while Redis cannot be reached in time.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Fallback {
    /// They take this share of the quota (in `(0, 1]`), locally: with `n`
    /// processes, `1 / n` keeps the fleet within its quota.
    LocalShare(f64),
    /// They are turned away
    /// ([`Limited::FleetUnavailable`]).
    FailClosed,
}

/// Where the fleet's quota is kept, and how this process spends it: given to
/// [`RateLimitPolicy::with_fleet`](super::RateLimitPolicy::with_fleet). See
/// the [module docs](self).
///
/// # Defaults
///
/// | setting | default | method |
/// |---|---|---|
/// | prefix of the Redis keys | `http-resilience` | [`with_prefix`](Self::with_prefix) |
/// | longest wait for a lease | 5 ms | [`with_lease_wait`](Self::with_lease_wait) |
/// | largest lease | a twentieth of the quota | [`with_max_lease`](Self::with_max_lease) |
/// | fallback | a tenth of the quota, locally | [`with_fallback`](Self::with_fallback) |
#[derive(Clone)]
pub struct FleetQuota {
    link: Arc<Link>,
    prefix: Arc<str>,
    lease_wait: Duration,
    max_lease: Option<u32>,
    fallback: Fallback,
}

/// A policy's fleet: its quota, and the pace the leases are asked at.
pub(crate) struct Fleet {
    quota: FleetQuota,
    /// The fleet's interval and tolerance, in nanoseconds.
    pace: Pace,
    /// The local pace while falling back on a share.
    fallback: Option<Pace>,
    max_lease: u32,
}

/// How far ahead of Redis's now a lease's tokens may be.
const HORIZON: Duration = Duration::from_secs(1);

/// How often a key that falls back asks Redis again.
const RETRY: u64 = 200_000_000;

/// How long a lease may take before it counts as failed.
const ASK_TIMEOUT: Duration = Duration::from_secs(1);

/// The span of calls a lease is sized to.
const REFILL: f64 = 0.2;

// ===== impl FleetQuota =====

impl FleetQuota {
    /// The quota kept in the Redis at `url` (`redis://host:port/db`, as
    /// redis-rs reads it). Nothing connects until a call needs a lease.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] (field `redis_url`) when redis-rs cannot read the
    /// URL.
    pub fn new(url: &str) -> Result<Self, InvalidSetting> {
        let client = redis::Client::open(url).map_err(|_| {
            InvalidSetting::new(
                "redis_url",
                "must be a Redis URL such as \"redis://127.0.0.1:6379/\"",
            )
            .with_value(format!("{url:?}"))
        })?;
        Ok(Self {
            link: Arc::new(Link::new(client)),
            prefix: Arc::from("http-resilience"),
            lease_wait: Duration::from_millis(5),
            max_lease: None,
            fallback: Fallback::LocalShare(0.1),
        })
    }

    /// Names the quota's keys in Redis `<prefix>:{<key>}:tat` and
    /// `...:pause`: the processes that share a quota share its prefix.
    #[must_use]
    pub fn with_prefix(mut self, prefix: &str) -> Self {
        self.prefix = Arc::from(prefix);
        self
    }

    /// A call with no token waits at most `wait` for the lease asked for,
    /// then the key falls back.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] (field `lease_wait`) when it is zero or more than
    /// a second.
    pub fn with_lease_wait(mut self, wait: Duration) -> Result<Self, InvalidSetting> {
        if wait.is_zero() || wait > Duration::from_secs(1) {
            let err = InvalidSetting::new("lease_wait", "must be in (0, 1s]");
            return Err(err.with_value(format!("{wait:?}")));
        }
        self.lease_wait = wait;
        Ok(self)
    }

    /// Leases at most `max` tokens at once (by default a twentieth of the
    /// quota, at least 1): the bound on what each process holds unspent.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] (field `max_lease`) when it is 0.
    pub fn with_max_lease(mut self, max: u32) -> Result<Self, InvalidSetting> {
        if max == 0 {
            return Err(InvalidSetting::new("max_lease", "must be at least 1").with_value("0"));
        }
        self.max_lease = Some(max);
        Ok(self)
    }

    /// What the calls do while Redis is away.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] (field `fallback`) when a share is not in
    /// `(0, 1]`.
    pub fn with_fallback(mut self, fallback: Fallback) -> Result<Self, InvalidSetting> {
        if let Fallback::LocalShare(share) = fallback {
            if !(share > 0.0 && share <= 1.0) {
                let err = InvalidSetting::new("fallback", "a local share must be in (0, 1]");
                return Err(err.with_value(format!("{share:?}")));
            }
        }
        self.fallback = fallback;
        Ok(self)
    }

    /// Connects to Redis now, rather than when the first call needs a
    /// lease, and loads the scripts: the first calls then wait for one round
    /// trip at most, rather than for a connection too (which may outlast
    /// the [lease wait](Self::with_lease_wait) and make the key fall back
    /// at once). Redis-rs reconnects by itself afterwards.
    ///
    /// # Errors
    ///
    /// Redis-rs's error when Redis cannot be reached; the quota works all
    /// the same, falling back until it can.
    pub async fn connect(&self) -> Result<(), crate::BoxError> {
        self.link.connect().await.map_err(Into::into)
    }

    /// The prefix of the quota's keys.
    #[cfg(test)]
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The longest wait for a lease.
    #[cfg(test)]
    pub(crate) const fn lease_wait(&self) -> Duration {
        self.lease_wait
    }

    /// The fallback.
    #[cfg(test)]
    pub(crate) const fn fallback(&self) -> Fallback {
        self.fallback
    }
}

impl fmt::Debug for FleetQuota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FleetQuota")
            .field("prefix", &self.prefix)
            .field("lease_wait", &self.lease_wait)
            .field("max_lease", &self.max_lease)
            .field("fallback", &self.fallback)
            .finish_non_exhaustive()
    }
}

// ===== impl Fleet =====

impl Fleet {
    /// The fleet of the policy of `core`.
    pub(crate) fn new(quota: FleetQuota, core: &Core) -> Self {
        let settings = &core.settings;
        let share = match quota.fallback {
            Fallback::LocalShare(share) => Some(share),
            Fallback::FailClosed => None,
        };
        // NOTE: the share's burst is the share of the burst: the processes
        // that fall back together stay within the quota's burst too.
        let fallback = share.map(|share| {
            let interval = (core.pace.interval as f64 / share).min(u64::MAX as f64) as u64;
            let burst = (f64::from(settings.burst) * share).ceil() as u32;
            Pace::with_burst(interval, burst.max(1))
        });
        let max_lease = quota
            .max_lease
            .unwrap_or_else(|| settings.calls.div_ceil(20).max(1));
        Self {
            quota,
            pace: core.pace,
            fallback,
            max_lease,
        }
    }

    /// The same quota, for the policy of `core` remade.
    pub(crate) fn remade(&self, core: &Core) -> Self {
        Self::new(self.quota.clone(), core)
    }

    pub(crate) fn quota(&self) -> &FleetQuota {
        &self.quota
    }

    /// The leases of a new key.
    pub(crate) fn leases(&self) -> Leases {
        Leases::default()
    }

    /// What a call asking at `now`, whose slot may come no later than
    /// `latest`, gets of the fleet's quota: a leased token, a wait for a
    /// lease, or the fallback.
    pub(crate) fn grant<H: Home>(
        &self,
        (home, bucket): Asker<'_, H>,
        leases: &Leases,
        now: u64,
        latest: u64,
    ) -> Granted {
        let floor = bucket.floor();
        let mut state = leases.lock();
        let demand = state.count(now);
        match state.take(now, latest.max(now)) {
            Some(Ok(at)) => {
                let at = at.max(floor);
                self.ask_ahead((home, bucket), &mut state, demand, now);
                return if at <= now {
                    Granted::Now
                } else {
                    Granted::At(at, None)
                };
            }
            Some(Err(at)) => return Granted::Refused(at, bucket.why(home.core(), at, floor)),
            None => {}
        }
        // NOTE: a spent quota Redis named is waited for only while Redis is
        // there to lease it: once the key falls back, a wait for it would end
        // at once (no lease is coming) and ask again, without end.
        if state.blocked_until > now && !state.down {
            let at = state.blocked_until;
            return match at <= latest {
                true => Granted::Lease(at),
                false => Granted::Refused(at, bucket.why(home.core(), at, floor)),
            };
        }
        self.no_token((home, bucket), leases, state, demand, now, latest)
    }

    /// A call that found no token: it waits for the lease asked for, or
    /// falls back once Redis is away or slower than the wait allowed.
    fn no_token<H: Home>(
        &self,
        (home, bucket): Asker<'_, H>,
        leases: &Leases,
        mut state: std::sync::MutexGuard<'_, State>,
        demand: f64,
        now: u64,
        latest: u64,
    ) -> Granted {
        let wait = crate::key::nanos(self.quota.lease_wait);
        if !state.down {
            let asked = *state.asking.get_or_insert(now);
            if asked == now {
                self.spawn_ask((home, bucket), self.want(demand));
            }
            if now < asked.saturating_add(wait) {
                return Granted::Lease(asked + wait);
            }
            state.down = true;
            drop(state);
            home.core().tell(&RateLimitEvent::FleetFallback {
                key: Keyed::key(&**bucket),
            });
        } else {
            if state.asking.is_none() && now.saturating_sub(state.failed_at) >= RETRY {
                state.asking = Some(now);
                self.spawn_ask((home, bucket), self.want(demand));
            }
            drop(state);
        }
        self.fall_back((home, bucket), leases, now, latest)
    }

    /// The fallback's answer to a call asking at `now`; a call it lets
    /// through while a lease is asked for is that lease's debt.
    fn fall_back<H: Home>(
        &self,
        (home, bucket): Asker<'_, H>,
        leases: &Leases,
        now: u64,
        latest: u64,
    ) -> Granted {
        let Some(pace) = self.fallback else {
            return Granted::Refused(now.saturating_add(RETRY), Limited::FleetUnavailable);
        };
        let granted = bucket.grant(home.core(), now, latest, pace);
        let at = match granted {
            Granted::Now => now,
            Granted::At(at, _) => at,
            _ => return granted,
        };
        let mut state = leases.lock();
        state.fallback_until = state.fallback_until.max(at);
        if state.asking.is_some() {
            state.debt = state.debt.saturating_add(1);
        }
        drop(state);
        granted
    }

    /// Asks for the next lease when half of what is held is spent.
    fn ask_ahead<H: Home>(&self, asker: Asker<'_, H>, state: &mut State, demand: f64, now: u64) {
        let want = self.want(demand);
        if state.asking.is_none() && !state.down && state.left() <= want / 2 {
            state.asking = Some(now);
            self.spawn_ask(asker, want);
        }
    }

    /// The tokens to lease for a demand of `demand` calls per second: the
    /// largest lease while the demand is not known yet (no window of calls
    /// counted), so that a busy start does not ask for many small ones.
    fn want(&self, demand: f64) -> u32 {
        if demand == 0.0 {
            return self.max_lease;
        }
        let sized = (demand * REFILL).ceil().min(f64::from(self.max_lease)) as u32;
        sized.clamp(self.max_lease.min(4), self.max_lease)
    }

    /// Asks Redis for `want` tokens in the background, on the runtime of
    /// the call; with no runtime, the ask fails at once.
    fn spawn_ask<H: Home>(&self, (home, bucket): Asker<'_, H>, want: u32) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            let now = home.core().nanos(Instant::now());
            return failed(home.core(), bucket, now);
        };
        drop(runtime.spawn(ask(Arc::clone(home), Arc::clone(bucket), want)));
    }

    /// Writes a pause of `pause` for `key` to Redis, in the background.
    pub(crate) fn share_pause(&self, key: &UpstreamKey, pause: Duration) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let link = Arc::clone(&self.quota.link);
        let name = self.name(key);
        drop(runtime.spawn(async move {
            let written = tokio::time::timeout(ASK_TIMEOUT, link.pause(&name, pause)).await;
            if !matches!(written, Ok(Ok(()))) {
                tracing::debug!(%name, "rate limit: the pause could not be written to Redis");
            }
        }));
    }

    /// The name of `key`'s quota in Redis.
    fn name(&self, key: &UpstreamKey) -> String {
        format!("{}:{{{key}}}", self.quota.prefix)
    }

    /// What a lease of `want` tokens asks Redis for.
    fn ask_of(&self, want: u32) -> Ask {
        let micros = |nanos: u64| nanos / 1_000;
        Ask {
            interval: micros(self.pace.interval).max(1),
            tau: micros(self.pace.tau),
            want,
            horizon: u64::try_from(HORIZON.as_micros()).unwrap_or(u64::MAX),
        }
    }
}

/// What the policy a lease is asked for holds: its fleet, and the settings,
/// clock and listeners of its buckets. A lease asked in the background
/// keeps it alive until the answer.
pub(crate) trait Home: Send + Sync + 'static {
    /// The fleet, if the limit is the fleet's.
    fn fleet(&self) -> Option<&Fleet>;
    /// The settings, clock and listeners.
    fn core(&self) -> &Core;
}

/// A call asking the fleet: its policy's home and its key's bucket.
type Asker<'a, H> = (&'a Arc<H>, &'a Arc<Bucket>);

/// One lease asked of Redis for `bucket`'s key, and what its answer does.
async fn ask<H: Home>(home: Arc<H>, bucket: Arc<Bucket>, want: u32) {
    let (Some(fleet), Some(_)) = (home.fleet(), &bucket.leases) else {
        return;
    };
    let shared = home.core();
    let name = fleet.name(Keyed::key(&*bucket));
    let sent = shared.nanos(Instant::now());
    let asked = tokio::time::timeout(
        ASK_TIMEOUT,
        fleet.quota.link.lease(&name, fleet.ask_of(want)),
    );
    let reply = asked.await;
    let received = shared.nanos(Instant::now());
    match reply {
        Ok(Ok(reply)) => arrived((shared, fleet), &bucket, reply, (sent, received)),
        Ok(Err(err)) => {
            tracing::debug!(%name, %err, "rate limit: no lease from Redis");
            failed(shared, &bucket, received);
        }
        Err(_) => failed(shared, &bucket, received),
    }
}

/// Keeps the lease Redis gave, wakes the calls waiting for it, and pauses
/// the key while the fleet's pause holds.
fn arrived(
    (shared, fleet): (&Core, &Fleet),
    bucket: &Bucket,
    reply: Reply,
    (sent, received): (u64, u64),
) {
    let Some(leases) = &bucket.leases else {
        return;
    };
    let (was_down, arrived) = {
        let mut state = leases.lock();
        let was_down = state.down;
        let pace = (fleet.pace.interval, fleet.pace.tau);
        (was_down, state.arrive(reply, sent, received, pace))
    };
    if let Some(until) = arrived.pause {
        bucket
            .paused_until
            .fetch_max(until, std::sync::atomic::Ordering::AcqRel);
    }
    let key = Keyed::key(bucket);
    shared.tell(&RateLimitEvent::Leased {
        key,
        tokens: reply.count,
    });
    if was_down {
        shared.tell(&RateLimitEvent::FleetRecovered { key });
    }
    arrived.wakers.into_iter().for_each(std::task::Waker::wake);
}

/// Redis was asked in vain at `now`: the key falls back, and the calls
/// waiting for the lease go on.
fn failed(shared: &Core, bucket: &Bucket, now: u64) {
    let Some(leases) = &bucket.leases else {
        return;
    };
    let (fell, wakers) = leases.lock().fail(now);
    if fell {
        shared.tell(&RateLimitEvent::FleetFallback {
            key: Keyed::key(bucket),
        });
    }
    wakers.into_iter().for_each(std::task::Waker::wake);
}
