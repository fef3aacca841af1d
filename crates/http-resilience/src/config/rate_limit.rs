//! The `rate_limit` table: applied over its base field by field, and built
//! with the [`RateLimitPolicy`] setters (and, for a fleet, the
//! `FleetQuota` ones), so that their checks are the file's.

use super::{
    validate::{count_at_most, is_client, keys_at_most},
    written::{turns_on, FallbackName, RateLimitSection},
};
use crate::{
    key::PerKey,
    rate_limit::{RateLimitMode, RateLimitPolicy, ServerSignals},
    InvalidSetting,
};
use std::time::Duration;

/// The largest `calls`, `burst` and `max_lease`.
const MAX_RATE: u64 = 1_000_000;

/// The rate limit of a section, with a value for every field.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct RateLimitFields {
    /// Whether attempts pass the rate limit. When off, the other fields are
    /// kept (and checked), for a client that turns it on.
    pub(super) enabled: bool,
    pub(super) calls: Option<u32>,
    pub(super) per: Duration,
    pub(super) burst: u32,
    pub(super) mode: RateLimitMode,
    pub(super) max_wait: Option<Duration>,
    pub(super) min_attempt: Option<Duration>,
    pub(super) signals: ServerSignals,
    pub(super) max_pause: Option<Duration>,
    pub(super) max_keys: Option<usize>,
    pub(super) idle_key_timeout: Option<Duration>,
    pub(super) redis: RedisFields,
}

/// The fleet's Redis, when the quota is the fleet's.
#[derive(Debug, Clone, PartialEq, Default)]
pub(super) struct RedisFields {
    pub(super) url: Option<String>,
    pub(super) prefix: Option<String>,
    pub(super) lease_wait: Option<Duration>,
    pub(super) max_lease: Option<u32>,
    pub(super) fallback: Option<FallbackName>,
    pub(super) local_share: Option<f64>,
}

// ===== impl RateLimitFields =====

impl RateLimitFields {
    /// No rate limit: what every preset has.
    pub(super) fn off() -> Self {
        Self {
            enabled: false,
            calls: None,
            per: Duration::from_secs(1),
            burst: 1,
            mode: RateLimitMode::Wait,
            max_wait: None,
            min_attempt: None,
            signals: ServerSignals::NONE,
            max_pause: None,
            max_keys: None,
            idle_key_timeout: None,
            redis: RedisFields::default(),
        }
    }

    /// The rate limit, checked under `path` (which ends in `.rate_limit`);
    /// built when off too (if it has a rate), so that what a client would
    /// inherit is checked.
    pub(super) fn build(&self, path: &str) -> Result<Option<RateLimitPolicy>, InvalidSetting> {
        let within = |err: InvalidSetting| err.within(path);
        // NOTE: turned off with no rate, the other fields are still checked,
        // on a stand-in rate.
        let calls = match (self.calls, self.enabled) {
            (Some(calls), _) => calls,
            (None, false) => 1,
            (None, true) => {
                let problem = "must be given: a rate limit needs its rate";
                return Err(within(InvalidSetting::new("calls", problem)));
            }
        };
        let mut policy = RateLimitPolicy::new(calls, self.per)
            .and_then(|p| p.with_burst(self.burst))
            .map_err(within)?
            .with_mode(self.mode)
            .with_server_signals(self.signals);
        if let Some(wait) = self.max_wait {
            policy = policy.with_max_wait(wait).map_err(within)?;
        }
        if let Some(min_attempt) = self.min_attempt {
            policy = policy.with_min_attempt(min_attempt);
        }
        if let Some(max) = self.max_pause {
            policy = policy.with_max_pause(max).map_err(within)?;
        }
        if self.max_keys.is_some() || self.idle_key_timeout.is_some() {
            let settings = policy.settings();
            let max = self.max_keys.unwrap_or(settings.max_keys);
            let idle = self.idle_key_timeout.unwrap_or(settings.idle_key_timeout);
            policy = policy.max_keys(max, idle).map_err(within)?;
        }
        let policy = self.redis.onto(policy).map_err(within)?;
        Ok(self.enabled.then_some(policy))
    }
}

// ===== impl RedisFields =====

impl RedisFields {
    /// `policy` as the fleet's, when a Redis URL is given.
    #[cfg(feature = "redis")]
    fn onto(&self, policy: RateLimitPolicy) -> Result<RateLimitPolicy, InvalidSetting> {
        use crate::rate_limit::fleet::{Fallback, FleetQuota};
        let Some(url) = &self.url else {
            return self.none_without_url().map(|()| policy);
        };
        let mut fleet = FleetQuota::new(url)?;
        if let Some(prefix) = &self.prefix {
            fleet = fleet.with_prefix(prefix);
        }
        if let Some(wait) = self.lease_wait {
            fleet = fleet.with_lease_wait(wait)?;
        }
        if let Some(max) = self.max_lease {
            fleet = fleet.with_max_lease(max)?;
        }
        let share = self.local_share;
        fleet = match (self.fallback, share) {
            (Some(FallbackName::FailClosed), Some(_)) => {
                let problem = "applies only to fallback = \"local\"";
                return Err(InvalidSetting::new("local_share", problem));
            }
            (Some(FallbackName::FailClosed), None) => fleet.with_fallback(Fallback::FailClosed)?,
            (_, Some(share)) => {
                fleet
                    .with_fallback(Fallback::LocalShare(share))
                    .map_err(|err| {
                        InvalidSetting::new("local_share", "must be in (0, 1]")
                            .with_value(err.value().unwrap_or_default())
                    })?
            }
            (_, None) => fleet,
        };
        Ok(policy.with_fleet(fleet))
    }

    /// Without the feature `redis`, a Redis URL is refused, naming it.
    #[cfg(not(feature = "redis"))]
    fn onto(&self, policy: RateLimitPolicy) -> Result<RateLimitPolicy, InvalidSetting> {
        if self.url.is_some() {
            let problem = "needs the library's feature `redis` (a fleet quota kept in Redis)";
            return Err(InvalidSetting::new("redis_url", problem));
        }
        self.none_without_url().map(|()| policy)
    }

    /// An error when a fleet's field is written with no URL to use it.
    fn none_without_url(&self) -> Result<(), InvalidSetting> {
        let fields = [
            ("redis_prefix", self.prefix.is_some()),
            ("lease_wait", self.lease_wait.is_some()),
            ("max_lease", self.max_lease.is_some()),
            ("fallback", self.fallback.is_some()),
            ("local_share", self.local_share.is_some()),
        ];
        match fields.into_iter().find(|(_, written)| *written) {
            Some((field, _)) => Err(InvalidSetting::new(
                field,
                "applies only to a fleet quota: give redis_url too",
            )),
            None => Ok(()),
        }
    }
}

// ===== impl RateLimitSection =====

impl RateLimitSection {
    /// `fields` with this table over them; `path` ends in `.rate_limit`.
    ///
    /// A table that writes any field but `enabled` (a value `"off"` apart)
    /// turns the rate limit on, unless it writes `enabled = false`; beside
    /// `enabled = false`, another field is an error in a client's section.
    pub(super) fn apply(
        &self,
        fields: &mut RateLimitFields,
        path: &str,
    ) -> Result<(), InvalidSetting> {
        let within = |err: InvalidSetting| err.within(path);
        if let (Some(false), Some(field)) = (self.enabled, self.first_setting()) {
            if is_client(path) {
                let problem = "applies only to the rate limit, got enabled = false";
                return Err(within(InvalidSetting::new(field, problem)));
            }
        }
        let count = |field: &str, value: Option<u32>| {
            value
                .map(|n| count_at_most(field, n, MAX_RATE).map_err(within))
                .transpose()
        };
        fields.calls = count("calls", self.calls)?.or(fields.calls);
        fields.burst = count("burst", self.burst)?.unwrap_or(fields.burst);
        if let Some(per) = &self.per {
            fields.per = per.get("per", path)?;
        }
        if let Some(mode) = &self.mode {
            fields.mode = mode.get("mode", path)?.0;
        }
        if let Some(wait) = &self.max_wait {
            fields.max_wait = wait.get("max_wait", path)?.0;
        }
        if let Some(min_attempt) = &self.min_attempt {
            fields.min_attempt = min_attempt.get("min_attempt", path)?.0;
        }
        self.apply_signals_and_keys(fields, path)?;
        self.apply_redis(&mut fields.redis, path)?;
        let on = fields.enabled || self.first_setting().is_some();
        fields.enabled = self.enabled.unwrap_or(on);
        Ok(())
    }

    /// The server signals, the pause's cap and the keys written over
    /// `fields`'.
    fn apply_signals_and_keys(
        &self,
        fields: &mut RateLimitFields,
        path: &str,
    ) -> Result<(), InvalidSetting> {
        if let Some(signals) = &self.server_signals {
            fields.signals = ServerSignals::NONE;
            for signal in signals {
                fields.signals = fields.signals.with(signal.get("server_signals", path)?.0);
            }
        }
        if let Some(max) = &self.max_pause {
            fields.max_pause = Some(max.get("max_pause", path)?);
        }
        if let Some(max) = self.max_keys {
            let max = keys_at_most("max_keys", max).map_err(|err| err.within(path))?;
            fields.max_keys = Some(max);
        }
        if let Some(idle) = &self.idle_key_timeout {
            fields.idle_key_timeout = Some(idle.get("idle_key_timeout", path)?);
        }
        Ok(())
    }

    /// The fleet's fields written over `redis`'.
    fn apply_redis(&self, redis: &mut RedisFields, path: &str) -> Result<(), InvalidSetting> {
        if let Some(url) = &self.redis_url {
            redis.url = Some(url.clone());
        }
        if let Some(prefix) = &self.redis_prefix {
            redis.prefix = Some(prefix.clone());
        }
        if let Some(wait) = &self.lease_wait {
            redis.lease_wait = Some(wait.get("lease_wait", path)?);
        }
        if let Some(max) = self.max_lease {
            let max = count_at_most("max_lease", max, MAX_RATE).map_err(|e| e.within(path))?;
            redis.max_lease = Some(max);
        }
        if let Some(fallback) = &self.fallback {
            redis.fallback = Some(fallback.get("fallback", path)?);
        }
        redis.local_share = self.local_share.or(redis.local_share);
        Ok(())
    }

    /// The first field other than `enabled` written, `"off"` apart.
    fn first_setting(&self) -> Option<&'static str> {
        let Self {
            enabled: _,
            calls,
            per,
            burst,
            mode,
            max_wait,
            min_attempt,
            server_signals,
            max_pause,
            max_keys,
            idle_key_timeout,
            redis_url,
            redis_prefix,
            lease_wait,
            max_lease,
            fallback,
            local_share,
        } = self;
        // NOTE: every field is named above, so that a new one cannot be
        // left out of this list.
        [
            ("calls", calls.is_some()),
            ("per", per.is_some()),
            ("burst", burst.is_some()),
            ("mode", mode.is_some()),
            ("max_wait", turns_on(max_wait)),
            ("min_attempt", turns_on(min_attempt)),
            ("server_signals", server_signals.is_some()),
            ("max_pause", max_pause.is_some()),
            ("max_keys", max_keys.is_some()),
            ("idle_key_timeout", idle_key_timeout.is_some()),
            ("redis_url", redis_url.is_some()),
            ("redis_prefix", redis_prefix.is_some()),
            ("lease_wait", lease_wait.is_some()),
            ("max_lease", max_lease.is_some()),
            ("fallback", fallback.is_some()),
            ("local_share", local_share.is_some()),
        ]
        .into_iter()
        .find_map(|(field, written)| written.then_some(field))
    }
}
