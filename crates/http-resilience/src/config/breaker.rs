//! The `breaker` table: applied over its base field by field, and built with
//! the [`BreakerPolicy`] setters, so that their checks are the file's.

use super::{
    decoder::DecoderFields,
    fields::{BreakerFields, Fields},
    origin::Origin,
    validate::{
        count_at_most, is_client, keys_at_most, number_at_most, MAX_FAILURES, MAX_MULTIPLIER,
        MAX_STEPS, MAX_THROUGHPUT,
    },
    written::{turns_on, BreakerSection, Written},
};
use crate::{
    breaker::{BreakerPolicy, BreakerSettings},
    key::PerKey,
    policy::AnyDecoder,
    InvalidSetting,
};
use std::time::Duration;

// ===== impl BreakerFields =====

impl BreakerFields {
    /// The fields of `breaker`, in a policy whose retry judges with `retry`.
    pub(super) fn of(breaker: Option<&BreakerPolicy<AnyDecoder>>, retry: &DecoderFields) -> Self {
        let Some(policy) = breaker else {
            return Self::off();
        };
        let own = DecoderFields::of(policy.decoder());
        Self {
            enabled: true,
            settings: policy.settings(),
            // NOTE: a breaker that judges as the retry does follows the
            // retry's decoder, so that a section that changes the retry's
            // changes what the breaker counts too.
            decoder: (own != *retry).then_some(own),
            seed: None,
        }
    }

    /// No breaker, with the settings of [`BreakerPolicy::default`] for a
    /// section that turns one on.
    fn off() -> Self {
        Self {
            enabled: false,
            settings: BreakerPolicy::default().settings(),
            decoder: None,
            seed: None,
        }
    }
}

// ===== impl BreakerSection =====

impl BreakerSection {
    /// `base` with this breaker table over it; `path` ends in `.breaker`.
    ///
    /// A table that writes any field but `enabled` (a value `"off"` apart)
    /// turns the breaker on, unless it writes `enabled = false`; beside
    /// `enabled = false`, another field is an error in a client's section,
    /// where it would have no effect (in `[default]` it is kept for the
    /// clients that turn the breaker on).
    pub(super) fn apply(&self, mut base: Fields, path: &str) -> Result<Fields, InvalidSetting> {
        if let (Some(false), Some(field)) = (self.enabled, self.first_setting()) {
            if is_client(path) {
                let problem = "applies only to a breaker, got enabled = false";
                return Err(InvalidSetting::new(field, problem).within(path));
            }
        }
        self.apply_settings(&mut base, path)?;
        self.apply_ramp(&mut base, path)?;
        if let Some(threshold) = &self.slow_call_threshold {
            let threshold = threshold.get("slow_call_threshold", path)?.0;
            base.breaker.settings.slow_call_threshold = threshold;
        }
        let written = self.written_decoder();
        if !written.is_empty() {
            // NOTE: a decoder of its own starts from the one it followed.
            let mut own = match base.breaker.decoder.take() {
                Some(own) => own,
                None => base.decoder.clone(),
            };
            own.apply(&written, path)?;
            base.breaker.decoder = Some(own);
        }
        if let Some(seed) = self.seed {
            base.breaker.seed = Some(seed);
        }
        let on = base.breaker.enabled || self.first_setting().is_some();
        base.breaker.enabled = self.enabled.unwrap_or(on);
        Ok(base)
    }

    /// The settings written, over `fields`' breaker, each within its range
    /// (the setters check the other end).
    fn apply_settings(&self, fields: &mut Fields, path: &str) -> Result<(), InvalidSetting> {
        self.apply_numbers(&mut fields.breaker.settings)
            .map_err(|err| err.within(path))?;
        self.apply_durations(fields, path)
    }

    /// The counts and factors written, over `s`, each within its range.
    fn apply_numbers(&self, s: &mut BreakerSettings) -> Result<(), InvalidSetting> {
        let count = |field: &str, value: Option<u32>, max: u64| {
            value
                .map(|value| count_at_most(field, value, max))
                .transpose()
        };
        let failures = self.consecutive_failures;
        set(
            &mut s.consecutive_failures,
            count("consecutive_failures", failures, MAX_FAILURES)?,
        );
        set(&mut s.failure_ratio, self.failure_ratio);
        let throughput = self.minimum_throughput;
        set(
            &mut s.minimum_throughput,
            count("minimum_throughput", throughput, MAX_THROUGHPUT)?,
        );
        let multiplier = self
            .break_multiplier
            .map(|m| number_at_most("break_multiplier", m, MAX_MULTIPLIER))
            .transpose()?;
        set(&mut s.break_multiplier, multiplier);
        set(&mut s.break_jitter, self.break_jitter);
        set(
            &mut s.half_open_probes,
            count("half_open_probes", self.half_open_probes, MAX_STEPS)?,
        );
        let successes = self.half_open_successes;
        set(
            &mut s.half_open_successes,
            count("half_open_successes", successes, MAX_STEPS)?,
        );
        let keys = self
            .max_keys
            .map(|max| keys_at_most("max_keys", max))
            .transpose()?;
        set(&mut s.max_keys, keys);
        Ok(())
    }

    /// The durations written, over `fields`' breaker; where the break and
    /// its cap came from, for the messages of the checks that combine them.
    fn apply_durations(&self, fields: &mut Fields, path: &str) -> Result<(), InvalidSetting> {
        let s = &mut fields.breaker.settings;
        let duration = |slot: &mut Duration, written: &Option<Written<Duration>>, field| {
            written
                .as_ref()
                .map(|written| written.get(field, path).map(|value| *slot = value))
                .transpose()
                .map(|set| set.is_some())
        };
        duration(
            &mut s.sampling_window,
            &self.sampling_window,
            "sampling_window",
        )?;
        duration(
            &mut s.idle_key_timeout,
            &self.idle_key_timeout,
            "idle_key_timeout",
        )?;
        if duration(
            &mut s.break_duration,
            &self.break_duration,
            "break_duration",
        )? {
            fields.origins.break_duration = Origin::Here;
        }
        let max = &self.max_break_duration;
        if duration(&mut s.max_break_duration, max, "max_break_duration")? {
            fields.origins.max_break_duration = Origin::Here;
        }
        Ok(())
    }

    /// The ramp written, over `fields`' breaker: `ramp_duration` and
    /// `ramp_steps` make one ramp, and one written alone takes the other
    /// from the ramp of the base; `ramp_duration = "off"` turns it off.
    fn apply_ramp(&self, fields: &mut Fields, path: &str) -> Result<(), InvalidSetting> {
        let duration = match &self.ramp_duration {
            Some(written) => Some(written.get("ramp_duration", path)?.0),
            None => None,
        };
        let base = fields.breaker.settings.ramp;
        let origin = fields.origins.ramp;
        let missing = |field: &str, with: &str| {
            let whose = origin.whose("the breaker's default");
            let problem = format!("must be given with {with}: {whose} has no ramp to take it from");
            InvalidSetting::new(field, problem).within(path)
        };
        let ramp = match (duration, self.ramp_steps) {
            (None, None) => return Ok(()),
            (Some(None), None) => None,
            (Some(None), Some(_)) => {
                let problem = "applies only to a ramp, got ramp_duration = \"off\"";
                return Err(InvalidSetting::new("ramp_steps", problem).within(path));
            }
            (Some(Some(duration)), Some(steps)) => Some((duration, ramp_steps(steps, path)?)),
            (Some(Some(duration)), None) => {
                let (_, steps) = base.ok_or_else(|| missing("ramp_steps", "ramp_duration"))?;
                Some((duration, steps))
            }
            (None, Some(steps)) => {
                let (duration, _) = base.ok_or_else(|| missing("ramp_duration", "ramp_steps"))?;
                Some((duration, ramp_steps(steps, path)?))
            }
        };
        fields.breaker.settings.ramp = ramp;
        fields.origins.ramp = Origin::Here;
        Ok(())
    }

    /// The first field other than `enabled` written, `"off"` apart.
    fn first_setting(&self) -> Option<&'static str> {
        let Self {
            enabled: _,
            consecutive_failures,
            failure_ratio,
            sampling_window,
            minimum_throughput,
            break_duration,
            max_break_duration,
            break_multiplier,
            break_jitter,
            half_open_probes,
            half_open_successes,
            ramp_duration,
            ramp_steps,
            slow_call_threshold,
            max_keys,
            idle_key_timeout,
            decoder,
            statuses,
            retry_after,
            codes,
            seed,
        } = self;
        // NOTE: every field is named above, so that a new one cannot be
        // left out of this list.
        [
            ("consecutive_failures", consecutive_failures.is_some()),
            ("failure_ratio", failure_ratio.is_some()),
            ("sampling_window", sampling_window.is_some()),
            ("minimum_throughput", minimum_throughput.is_some()),
            ("break_duration", break_duration.is_some()),
            ("max_break_duration", max_break_duration.is_some()),
            ("break_multiplier", break_multiplier.is_some()),
            ("break_jitter", break_jitter.is_some()),
            ("half_open_probes", half_open_probes.is_some()),
            ("half_open_successes", half_open_successes.is_some()),
            ("ramp_duration", turns_on(ramp_duration)),
            ("ramp_steps", ramp_steps.is_some()),
            ("slow_call_threshold", turns_on(slow_call_threshold)),
            ("max_keys", max_keys.is_some()),
            ("idle_key_timeout", idle_key_timeout.is_some()),
            ("decoder", decoder.is_some()),
            ("statuses", statuses.is_some()),
            ("retry_after", retry_after.is_some()),
            ("codes", codes.is_some()),
            ("seed", seed.is_some()),
        ]
        .into_iter()
        .find_map(|(field, written)| written.then_some(field))
    }
}

/// `steps` if within the range of `ramp_steps`; `path` ends in `.breaker`.
fn ramp_steps(steps: u32, path: &str) -> Result<u32, InvalidSetting> {
    count_at_most("ramp_steps", steps, MAX_STEPS).map_err(|err| err.within(path))
}

/// `value` into `slot`, if written.
fn set<T>(slot: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *slot = value;
    }
}

// ===== impl Fields =====

impl Fields {
    /// The breaker, checked under `path.breaker`; it judges with `retry`
    /// (the retry's decoder) unless it has a decoder of its own. It is built
    /// when off too, so that what a client would inherit is checked.
    pub(super) fn breaker(
        &self,
        retry: &AnyDecoder,
        path: &str,
    ) -> Result<Option<BreakerPolicy<AnyDecoder>>, InvalidSetting> {
        let path = format!("{path}.breaker");
        let breaker = &self.breaker;
        let decoder = match &breaker.decoder {
            Some(own) => own.build().map_err(|err| err.within(&path))?,
            None => retry.clone(),
        };
        let s = breaker.settings;
        let policy = BreakerPolicy::new(decoder)
            .consecutive_failures(s.consecutive_failures)
            .and_then(|p| p.failure_ratio(s.failure_ratio, s.sampling_window, s.minimum_throughput))
            .and_then(|p| p.break_duration(s.break_duration, s.max_break_duration))
            .and_then(|p| p.break_growth(s.break_multiplier, s.break_jitter))
            .and_then(|p| p.half_open(s.half_open_probes, s.half_open_successes))
            .and_then(|p| match s.ramp {
                Some((duration, steps)) => p.ramp(duration, steps),
                None => Ok(p),
            })
            .and_then(|p| match s.slow_call_threshold {
                Some(threshold) => p.slow_calls(threshold),
                None => Ok(p),
            })
            .and_then(|p| p.max_keys(s.max_keys, s.idle_key_timeout))
            .map_err(|err| self.with_origins(err).within(&path))?;
        let policy = match breaker.seed {
            Some(seed) => policy.with_seed(seed),
            None => policy,
        };
        Ok(breaker.enabled.then_some(policy))
    }

    /// `err`, from a setter, said again with where the values its check
    /// combined came from when one was inherited; the setter's own words
    /// when both were set in the section.
    fn with_origins(&self, err: InvalidSetting) -> InvalidSetting {
        let o = self.origins;
        let here = o.break_duration == Origin::Here && o.max_break_duration == Origin::Here;
        if err.field() != "max_break_duration" || here {
            return err;
        }
        let s = self.breaker.settings;
        let problem = format!(
            "{} is below the break_duration{}",
            o.max_break_duration.inherited(),
            o.break_duration
        );
        InvalidSetting::new("max_break_duration", problem.trim_start())
            .with_value(format!("{:?}", s.max_break_duration))
    }
}
