//! A read-out of a breaker policy's settings.

use super::BreakerPolicy;
use std::time::Duration;

/// The settings of a [`BreakerPolicy`], as its setters left them: what
/// [`BreakerPolicy::settings`] reads, and the policy's `Debug` shows.
///
/// Each field is named as the setting is in the errors of the setters
/// ([`InvalidSetting::field`](crate::InvalidSetting::field)) and in the
/// `breaker` section of a configuration file (module `config`, feature
/// `serde`), but for [`ramp`](Self::ramp), whose two values are
/// `ramp_duration` and `ramp_steps` there. It is a read-out: a policy is
/// made with its setters, which check every value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct BreakerSettings {
    /// Failures in a row that trip a closed circuit
    /// ([`consecutive_failures`](BreakerPolicy::consecutive_failures)).
    pub(crate) consecutive_failures: u32,
    /// The share of failed calls over the window that trips a closed circuit
    /// ([`failure_ratio`](BreakerPolicy::failure_ratio)).
    pub(crate) failure_ratio: f64,
    /// The sliding window the failure ratio is taken over.
    pub(crate) sampling_window: Duration,
    /// The fewest calls ended in the window for the ratio to trip.
    pub(crate) minimum_throughput: u32,
    /// The break of a first trip
    /// ([`break_duration`](BreakerPolicy::break_duration)).
    pub(crate) break_duration: Duration,
    /// The cap of a break, grown or asked for by the upstream.
    pub(crate) max_break_duration: Duration,
    /// The growth of the break on each trip that follows before the circuit
    /// closes ([`break_growth`](BreakerPolicy::break_growth)).
    pub(crate) break_multiplier: f64,
    /// The largest share of the break added at random.
    pub(crate) break_jitter: f64,
    /// Probes let through at once while half-open
    /// ([`half_open`](BreakerPolicy::half_open)).
    pub(crate) half_open_probes: u32,
    /// Successful probes that close the circuit.
    pub(crate) half_open_successes: u32,
    /// The ramp after the probes, as its duration and its number of steps
    /// ([`ramp`](BreakerPolicy::ramp)); `None` when off, the default: the
    /// probes close the circuit.
    pub(crate) ramp: Option<(Duration, u32)>,
    /// A success that took at least this long counts as a failure
    /// ([`slow_calls`](BreakerPolicy::slow_calls)); `None` when off, the
    /// default.
    pub(crate) slow_call_threshold: Option<Duration>,
    /// Circuits kept at most ([`max_keys`](crate::key::PerKey::max_keys)).
    pub(crate) max_keys: usize,
    /// How long a circuit with no outcome is kept before it is the first
    /// evicted among those a new key examines for room.
    pub(crate) idle_key_timeout: Duration,
}

// ===== impl BreakerPolicy =====

impl<D> BreakerPolicy<D> {
    /// The settings, as the setters left them.
    pub(crate) fn settings(&self) -> BreakerSettings {
        let s = self.shared.rules.settings();
        BreakerSettings {
            consecutive_failures: s.consecutive,
            failure_ratio: s.ratio,
            sampling_window: s.window,
            minimum_throughput: s.min_throughput,
            break_duration: s.break_base,
            max_break_duration: s.break_max,
            break_multiplier: s.multiplier,
            break_jitter: s.jitter,
            half_open_probes: s.probes,
            half_open_successes: s.successes,
            ramp: s.ramp.map(|ramp| (ramp.duration, ramp.steps)),
            slow_call_threshold: s.slow,
            max_keys: s.max_keys,
            idle_key_timeout: s.idle,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::PerKey;

    #[test]
    fn reads_every_setter() {
        let secs = Duration::from_secs;
        let settings = BreakerPolicy::default()
            .consecutive_failures(7)
            .and_then(|p| p.failure_ratio(0.25, secs(20), 40))
            .and_then(|p| p.break_duration(secs(3), secs(40)))
            .and_then(|p| p.break_growth(1.5, 0.2))
            .and_then(|p| p.half_open(3, 2))
            .and_then(|p| p.ramp(secs(20), 4))
            .and_then(|p| p.slow_calls(Duration::from_millis(1500)))
            .and_then(|p| p.max_keys(16, secs(60)))
            .unwrap()
            .settings();
        assert_eq!(
            settings,
            BreakerSettings {
                consecutive_failures: 7,
                failure_ratio: 0.25,
                sampling_window: secs(20),
                minimum_throughput: 40,
                break_duration: secs(3),
                max_break_duration: secs(40),
                break_multiplier: 1.5,
                break_jitter: 0.2,
                half_open_probes: 3,
                half_open_successes: 2,
                ramp: Some((secs(20), 4)),
                slow_call_threshold: Some(Duration::from_millis(1500)),
                max_keys: 16,
                idle_key_timeout: secs(60),
            }
        );
    }
}
