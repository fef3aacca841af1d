//! The `overload` table: applied over its base field by field, and built
//! with the [`OverloadPolicy`] setters, so that their checks are the file's.

use super::{
    fields::{AdaptiveFields, Fields, LimitFields, OverloadFields},
    validate::{count_at_most, is_client, keys_at_most, number_at_most, MAX_CALLS, MAX_FACTOR},
    written::{turns_on, AdaptiveSection, OverloadSection, ThrottleSection},
};
use crate::{
    key::PerKey,
    overload::{AdaptiveLimit, OverloadPolicy, Throttle},
    InvalidSetting,
};

impl AdaptiveFields {
    fn default_limit() -> Self {
        let limit = AdaptiveLimit::default();
        Self {
            initial: limit.initial(),
            min: limit.min(),
            max: limit.max(),
            smoothing: None,
            tolerance: None,
            backoff_ratio: None,
        }
    }
}

// ===== impl OverloadFields =====

impl OverloadFields {
    /// No overload control: what every preset has, with the policy's
    /// defaults for a section that turns it on.
    pub(super) fn off() -> Self {
        let settings = OverloadPolicy::throttling(Throttle::default()).settings();
        Self {
            enabled: false,
            limit: LimitFields::Unbounded,
            queue: 0,
            max_wait: None,
            min_attempt: None,
            throttle: None,
            max_keys: settings.max_keys,
            idle_key_timeout: settings.idle_key_timeout,
            seed: None,
        }
    }

    /// The overload control, checked under `path` (which ends in
    /// `.overload`); built when off too (if it has anything to build), so
    /// that what a client would inherit is checked.
    pub(super) fn build(&self, path: &str) -> Result<Option<OverloadPolicy>, InvalidSetting> {
        let within = |err: InvalidSetting| err.within(path);
        let throttle = match self.throttle {
            Some((k, window)) => Some(
                Throttle::new(k)
                    .and_then(|t| t.with_window(window))
                    .map_err(|err| err.within(&format!("{path}.throttle")))?,
            ),
            None => None,
        };
        let policy = match (self.limit, throttle) {
            // NOTE: turned off with no limit: the other fields are still
            // checked, on a stand-in limit.
            (LimitFields::Unbounded, None) if !self.enabled => {
                OverloadPolicy::bulkhead(1).map_err(within)?
            }
            (LimitFields::Unbounded, None) => {
                let problem = "or an adaptive or a throttle table must be given: \
                               overload control with no limit and no throttling does nothing";
                return Err(within(InvalidSetting::new("max_in_flight", problem)));
            }
            (LimitFields::Unbounded, Some(throttle)) => OverloadPolicy::throttling(throttle),
            (LimitFields::Fixed(n), throttle) => {
                throttled(OverloadPolicy::bulkhead(n).map_err(within)?, throttle)
            }
            (LimitFields::Adaptive(fields), throttle) => {
                let limit = fields.build().map_err(within)?;
                throttled(OverloadPolicy::adaptive(limit), throttle)
            }
        };
        let mut policy = policy.with_queue(self.queue);
        if let Some(wait) = self.max_wait {
            policy = policy.with_max_wait(wait).map_err(within)?;
        }
        if let Some(min_attempt) = self.min_attempt {
            policy = policy.with_min_attempt(min_attempt);
        }
        policy = policy
            .max_keys(self.max_keys, self.idle_key_timeout)
            .map_err(within)?;
        if let Some(seed) = self.seed {
            policy = policy.with_seed(seed);
        }
        Ok(self.enabled.then_some(policy))
    }
}

/// `policy`, throttling if `throttle` is given.
fn throttled(policy: OverloadPolicy, throttle: Option<Throttle>) -> OverloadPolicy {
    match throttle {
        Some(throttle) => policy.with_throttle(throttle),
        None => policy,
    }
}

impl AdaptiveFields {
    fn build(&self) -> Result<AdaptiveLimit, InvalidSetting> {
        let within = |err: InvalidSetting| err.within("adaptive");
        let mut limit = AdaptiveLimit::new(self.initial, self.min, self.max).map_err(within)?;
        if let Some(smoothing) = self.smoothing {
            limit = limit.with_smoothing(smoothing).map_err(within)?;
        }
        if let Some(tolerance) = self.tolerance {
            limit = limit.with_tolerance(tolerance).map_err(within)?;
        }
        if let Some(ratio) = self.backoff_ratio {
            limit = limit.with_backoff_ratio(ratio).map_err(within)?;
        }
        Ok(limit)
    }
}

// ===== impl OverloadSection =====

impl OverloadSection {
    /// `base` with this overload table over it; `path` ends in `.overload`.
    ///
    /// A table that writes any field but `enabled` (a value `"off"` apart)
    /// turns overload control on, unless it writes `enabled = false`; beside
    /// `enabled = false`, another field is an error in a client's section,
    /// where it would have no effect.
    pub(super) fn apply(&self, mut base: Fields, path: &str) -> Result<Fields, InvalidSetting> {
        let within = |err: InvalidSetting| err.within(path);
        if let (Some(false), Some(field)) = (self.enabled, self.first_setting()) {
            if is_client(path) {
                let problem = "applies only to overload control, got enabled = false";
                return Err(within(InvalidSetting::new(field, problem)));
            }
        }
        self.apply_limit(&mut base.overload, path)?;
        let o = &mut base.overload;
        if let Some(queue) = self.queue {
            o.queue = count_at_most("queue", queue, MAX_CALLS).map_err(within)?;
        }
        if let Some(wait) = &self.max_wait {
            o.max_wait = wait.get("max_wait", path)?.0;
        }
        if let Some(min_attempt) = &self.min_attempt {
            o.min_attempt = min_attempt.get("min_attempt", path)?.0;
        }
        self.throttle.apply(o, &format!("{path}.throttle"))?;
        if let Some(max) = self.max_keys {
            o.max_keys = keys_at_most("max_keys", max).map_err(within)?;
        }
        if let Some(idle) = &self.idle_key_timeout {
            o.idle_key_timeout = idle.get("idle_key_timeout", path)?;
        }
        if let Some(seed) = self.seed {
            o.seed = Some(seed);
        }
        let on = o.enabled || self.first_setting().is_some();
        o.enabled = self.enabled.unwrap_or(on);
        Ok(base)
    }

    /// The limit written over `fields`': `max_in_flight` (a bulkhead) or an
    /// `adaptive` table (an adaptive limit), not both; an adaptive table
    /// over an inherited adaptive limit changes only what it writes.
    fn apply_limit(&self, fields: &mut OverloadFields, path: &str) -> Result<(), InvalidSetting> {
        match (self.max_in_flight, self.adaptive.is_written()) {
            (Some(_), true) => {
                let problem =
                    "must not be given with an adaptive table: a limit is fixed or adaptive";
                Err(InvalidSetting::new("max_in_flight", problem).within(path))
            }
            (Some(n), false) => {
                let n = count_at_most("max_in_flight", n, MAX_CALLS).map_err(|e| e.within(path))?;
                fields.limit = LimitFields::Fixed(n);
                Ok(())
            }
            (None, true) => {
                let mut adaptive = match fields.limit {
                    LimitFields::Adaptive(inherited) => inherited,
                    _ => AdaptiveFields::default_limit(),
                };
                self.adaptive
                    .apply(&mut adaptive)
                    .map_err(|err| err.within(&format!("{path}.adaptive")))?;
                fields.limit = LimitFields::Adaptive(adaptive);
                Ok(())
            }
            (None, false) => Ok(()),
        }
    }

    /// The first field other than `enabled` written, `"off"` apart.
    fn first_setting(&self) -> Option<&'static str> {
        let Self {
            enabled: _,
            max_in_flight,
            adaptive,
            queue,
            max_wait,
            min_attempt,
            throttle,
            max_keys,
            idle_key_timeout,
            seed,
        } = self;
        // NOTE: every field is named above, so that a new one cannot be
        // left out of this list.
        [
            ("max_in_flight", max_in_flight.is_some()),
            ("adaptive", adaptive.is_written()),
            ("queue", queue.is_some()),
            ("max_wait", turns_on(max_wait)),
            ("min_attempt", turns_on(min_attempt)),
            ("throttle", throttle.turns_on()),
            ("max_keys", max_keys.is_some()),
            ("idle_key_timeout", idle_key_timeout.is_some()),
            ("seed", seed.is_some()),
        ]
        .into_iter()
        .find_map(|(field, written)| written.then_some(field))
    }
}

// ===== impl AdaptiveSection =====

impl AdaptiveSection {
    fn is_written(&self) -> bool {
        let Self {
            initial,
            min,
            max,
            smoothing,
            tolerance,
            backoff_ratio,
        } = self;
        [
            initial.is_some(),
            min.is_some(),
            max.is_some(),
            smoothing.is_some(),
            tolerance.is_some(),
            backoff_ratio.is_some(),
        ]
        .contains(&true)
    }

    /// This table over `fields`, each value within its range (the setters
    /// check the other end); errors name the field alone.
    fn apply(&self, fields: &mut AdaptiveFields) -> Result<(), InvalidSetting> {
        let set = |field: &str, slot: &mut u32, value: Option<u32>| {
            if let Some(value) = value {
                *slot = count_at_most(field, value, MAX_CALLS)?;
            }
            Ok::<_, InvalidSetting>(())
        };
        set("initial", &mut fields.initial, self.initial)?;
        set("min", &mut fields.min, self.min)?;
        set("max", &mut fields.max, self.max)?;
        fields.smoothing = self.smoothing.or(fields.smoothing);
        if let Some(tolerance) = self.tolerance {
            fields.tolerance = Some(number_at_most("tolerance", tolerance, MAX_FACTOR)?);
        }
        fields.backoff_ratio = self.backoff_ratio.or(fields.backoff_ratio);
        Ok(())
    }
}

// ===== impl ThrottleSection =====

impl ThrottleSection {
    /// Whether the table turns throttling on.
    fn turns_on(&self) -> bool {
        self.enabled != Some(false)
            && (self.k.is_some() || self.window.is_some() || self.enabled == Some(true))
    }

    /// This throttle table over `fields`'; `path` ends in `.throttle`.
    fn apply(&self, fields: &mut OverloadFields, path: &str) -> Result<(), InvalidSetting> {
        let window = match &self.window {
            Some(written) => Some(written.get("window", path)?),
            None => None,
        };
        if self.enabled == Some(false) {
            if self.k.is_some() || window.is_some() {
                let field = if self.k.is_some() { "k" } else { "window" };
                let problem = "applies only to throttling, got enabled = false";
                return Err(InvalidSetting::new(field, problem).within(path));
            }
            fields.throttle = None;
            return Ok(());
        }
        if !self.turns_on() {
            return Ok(());
        }
        if let Some(k) = self.k {
            number_at_most("k", k, MAX_FACTOR).map_err(|err| err.within(path))?;
        }
        let default = Throttle::default();
        let (k, kept) = fields.throttle.unwrap_or((default.k(), default.window()));
        fields.throttle = Some((self.k.unwrap_or(k), window.unwrap_or(kept)));
        Ok(())
    }
}
