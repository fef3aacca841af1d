//! The `hedge` table: hedging instead of retries, applied over its base
//! field by field, and built with the [`HedgePolicy`] setters, so that their
//! checks are the file's.

use super::{
    fields::{DelayFields, Fields, HedgeFields},
    validate::{count_at_most, is_client, MAX_HEDGED_ATTEMPTS, MAX_SAMPLES},
    written::{turns_on, HedgeSection},
};
use crate::{
    hedge::{HedgeDelay, HedgePolicy, DEFAULT_MAX_SERVER_DELAY},
    policy::{AnyDecoder, Parts},
    InvalidSetting,
};
use std::time::Duration;

/// The fewest latencies a percentile delay needs before it is used, when a
/// section writes none.
const DEFAULT_MIN_SAMPLES: u64 = 100;

/// The window of a percentile delay's latencies, when a section writes none.
const DEFAULT_WINDOW: Duration = Duration::from_secs(10);

// ===== impl HedgeFields =====

impl HedgeFields {
    /// No hedging: what every preset has.
    pub(super) const fn off() -> Self {
        Self {
            enabled: false,
            delay: None,
            max_attempts: 2,
            max_in_flight: None,
            on_attempt_timeout: None,
            max_server_delay: DEFAULT_MAX_SERVER_DELAY,
        }
    }

    /// The hedge policy, judged by `parts` (the retry's decoder, budget,
    /// attempt header and deadline-aware margin), or `None` when off; its
    /// errors are under `path`, which ends in `.hedge`.
    pub(super) fn build(
        &self,
        parts: &Parts<AnyDecoder>,
        path: &str,
    ) -> Result<Option<HedgePolicy<AnyDecoder>>, InvalidSetting> {
        // NOTE: a hedge turned off is still checked (with no delay when it
        // has none), so that a bad value in `[default]` is refused there.
        let delay = match (self.delay, self.enabled) {
            (Some(delay), _) => delay,
            (None, false) => DelayFields::Never,
            (None, true) => {
                let problem = "must be given to hedge (or percentile): nothing inherited has one";
                return Err(InvalidSetting::new("delay", problem).within(path));
            }
        };
        let delay = match delay {
            DelayFields::Never => HedgeDelay::never(),
            DelayFields::Fixed(delay) => HedgeDelay::fixed(delay),
            DelayFields::Percentile {
                percentile,
                min_samples,
                window,
            } => HedgeDelay::percentile(percentile, min_samples, window)
                .map_err(|err| err.within(path))?,
        };
        let mut policy = HedgePolicy::new(parts.decoder.clone(), delay, self.max_attempts)
            .and_then(|p| p.with_max_in_flight(self.max_in_flight.unwrap_or(self.max_attempts)))
            .map_err(|err| err.within(path))?
            .with_max_server_delay(self.max_server_delay);
        if let Some(limit) = self.on_attempt_timeout {
            policy = policy.hedge_on_attempt_timeout(limit);
        }
        *policy.parts_mut() = parts.clone();
        Ok(self.enabled.then_some(policy))
    }
}

// ===== impl HedgeSection =====

impl HedgeSection {
    /// `base` with this hedge table over it; `path` ends in `.hedge`.
    ///
    /// A table that writes any field but `enabled` (a value `"off"` apart)
    /// turns hedging on, unless it writes `enabled = false`; beside
    /// `enabled = false`, another field is an error in a client's section,
    /// where it would have no effect.
    pub(super) fn apply(&self, mut base: Fields, path: &str) -> Result<Fields, InvalidSetting> {
        let within = |err: InvalidSetting| err.within(path);
        if let (Some(false), Some(field)) = (self.enabled, self.first_setting()) {
            if is_client(path) {
                let problem = "applies only to hedging, got enabled = false";
                return Err(within(InvalidSetting::new(field, problem)));
            }
        }
        let hedge = &mut base.hedge;
        hedge.delay = self.delay(hedge.delay, path)?;
        let copies = |field: &str, n: u32| count_at_most(field, n, MAX_HEDGED_ATTEMPTS);
        if let Some(n) = self.max_attempts {
            hedge.max_attempts = copies("max_attempts", n).map_err(within)?;
        }
        if let Some(n) = self.max_in_flight {
            hedge.max_in_flight = Some(copies("max_in_flight", n).map_err(within)?);
        }
        if let Some(limit) = &self.on_attempt_timeout {
            hedge.on_attempt_timeout = limit.get("on_attempt_timeout", path)?.0;
        }
        if let Some(max) = &self.max_server_delay {
            hedge.max_server_delay = max.get("max_server_delay", path)?;
        }
        let on = hedge.enabled || self.first_setting().is_some();
        hedge.enabled = self.enabled.unwrap_or(on);
        Ok(base)
    }

    /// The delay written over `base`: `delay` or `percentile` (not both)
    /// replaces the base's; `min_samples` and `window` apply to a percentile,
    /// written here or inherited.
    fn delay(
        &self,
        base: Option<DelayFields>,
        path: &str,
    ) -> Result<Option<DelayFields>, InvalidSetting> {
        let fixed = match &self.delay {
            Some(written) => Some(written.get("delay", path)?),
            None => None,
        };
        let delay = match (fixed, self.percentile) {
            (Some(_), Some(_)) => {
                let problem = "must not be given with delay: a hedge waits one or the other";
                return Err(InvalidSetting::new("percentile", problem).within(path));
            }
            (Some(delay), None) => Some(DelayFields::Fixed(delay)),
            (None, Some(percentile)) => Some(DelayFields::Percentile {
                percentile,
                min_samples: DEFAULT_MIN_SAMPLES,
                window: DEFAULT_WINDOW,
            }),
            (None, None) => base,
        };
        self.percentile_settings(delay, path)
    }

    /// `delay` with the percentile's `min_samples` and `window` written over
    /// it, which apply to nothing else.
    fn percentile_settings(
        &self,
        mut delay: Option<DelayFields>,
        path: &str,
    ) -> Result<Option<DelayFields>, InvalidSetting> {
        let window = match &self.window {
            Some(written) => Some(written.get("window", path)?),
            None => None,
        };
        if self.min_samples.is_none() && window.is_none() {
            return Ok(delay);
        }
        let Some(DelayFields::Percentile {
            min_samples,
            window: kept,
            ..
        }) = &mut delay
        else {
            let field = if self.min_samples.is_some() {
                "min_samples"
            } else {
                "window"
            };
            let problem = "applies only to a percentile delay (percentile = ...)";
            return Err(InvalidSetting::new(field, problem).within(path));
        };
        if let Some(n) = self.min_samples {
            *min_samples =
                count_at_most("min_samples", n, MAX_SAMPLES).map_err(|err| err.within(path))?;
        }
        if let Some(window) = window {
            *kept = window;
        }
        Ok(delay)
    }

    /// The first field other than `enabled` written, `"off"` apart.
    fn first_setting(&self) -> Option<&'static str> {
        let Self {
            enabled: _,
            delay,
            percentile,
            min_samples,
            window,
            max_attempts,
            max_in_flight,
            on_attempt_timeout,
            max_server_delay,
        } = self;
        // NOTE: every field is named above, so that a new one cannot be
        // left out of this list.
        [
            ("delay", delay.is_some()),
            ("percentile", percentile.is_some()),
            ("min_samples", min_samples.is_some()),
            ("window", window.is_some()),
            ("max_attempts", max_attempts.is_some()),
            ("max_in_flight", max_in_flight.is_some()),
            ("on_attempt_timeout", turns_on(on_attempt_timeout)),
            ("max_server_delay", max_server_delay.is_some()),
        ]
        .into_iter()
        .find_map(|(field, written)| written.then_some(field))
    }
}
