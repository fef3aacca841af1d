//! How long an injected wait lasts: fixed, or drawn from a distribution.

use crate::InvalidSetting;
use std::time::Duration;

/// How long a [`Fault`](super::Fault)'s wait lasts: fixed, uniform between
/// two bounds, or exponential with a mean (capped), each drawn anew for
/// every attempt from the policy's seeded numbers.
///
/// # Example
///
/// ```
/// use http_resilience::fault::Latency;
/// use std::time::Duration;
///
/// let ms = Duration::from_millis;
/// let fixed = Latency::fixed(ms(200));
/// let uniform = Latency::uniform(ms(50), ms(150))?;
/// // Mostly short, now and then long: a mean of 100 ms, never above 2 s.
/// let exponential = Latency::exponential(ms(100), Duration::from_secs(2))?;
/// assert_eq!(format!("{fixed:?}"), "Latency(Fixed(200ms))");
/// assert_eq!(format!("{uniform:?}"), "Latency(Uniform { min: 50ms, max: 150ms })");
/// assert!(Latency::uniform(ms(150), ms(50)).is_err());
/// # let _ = exponential;
/// # Ok::<(), http_resilience::InvalidSetting>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Latency(Distribution);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Distribution {
    Fixed(Duration),
    Uniform { min: Duration, max: Duration },
    Exponential { mean: Duration, max: Duration },
}

// ===== impl Latency =====

impl Latency {
    /// Always `latency`.
    pub const fn fixed(latency: Duration) -> Self {
        Self(Distribution::Fixed(latency))
    }

    /// Uniform between `min` and `max`.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] (field `max`) when `max` is below `min`.
    pub fn uniform(min: Duration, max: Duration) -> Result<Self, InvalidSetting> {
        if max < min {
            let err = InvalidSetting::new("max", "must be at least the minimum");
            return Err(err.with_value(format!("{max:?}")));
        }
        Ok(Self(Distribution::Uniform { min, max }))
    }

    /// Exponential with `mean`, as the time between arrivals at random is,
    /// cut at `max` (a draw above it waits `max`).
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] when `mean` (field `mean`) is zero, or `max`
    /// (field `max`) is below it.
    pub fn exponential(mean: Duration, max: Duration) -> Result<Self, InvalidSetting> {
        if mean.is_zero() {
            let err = InvalidSetting::new("mean", "must be greater than zero");
            return Err(err.with_value("0s"));
        }
        if max < mean {
            let err = InvalidSetting::new("max", "must be at least the mean");
            return Err(err.with_value(format!("{max:?}")));
        }
        Ok(Self(Distribution::Exponential { mean, max }))
    }

    /// The mean of the distribution (for the exponential, before the cut).
    #[cfg(test)]
    pub(crate) fn mean(&self) -> Duration {
        match self.0 {
            Distribution::Fixed(latency) => latency,
            Distribution::Uniform { min, max } => min + (max - min) / 2,
            Distribution::Exponential { mean, .. } => mean,
        }
    }

    /// The latency for `unit`, a draw uniform in `[0, 1)`.
    pub(super) fn at(&self, unit: f64) -> Duration {
        match self.0 {
            Distribution::Fixed(latency) => latency,
            Distribution::Uniform { min, max } => min + (max - min).mul_f64(unit),
            Distribution::Exponential { mean, max } => {
                // NOTE: the inverse of the distribution function; `1 - unit`
                // is in `(0, 1]`, so the logarithm is finite.
                let scale = -(1.0 - unit).ln();
                let secs = mean.as_secs_f64() * scale;
                Duration::try_from_secs_f64(secs).map_or(max, |latency| latency.min(max))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn draws_stay_within_their_bounds_and_near_their_mean() {
        let uniform = Latency::uniform(50 * MS, 150 * MS).unwrap();
        let exponential = Latency::exponential(100 * MS, 2000 * MS).unwrap();
        let units = (0..10_000).map(|i| f64::from(i) / 10_000.0);
        let (mut u_sum, mut e_sum) = (Duration::ZERO, Duration::ZERO);
        for unit in units {
            let (u, e) = (uniform.at(unit), exponential.at(unit));
            assert!((50 * MS..=150 * MS).contains(&u), "{u:?}");
            assert!(e <= 2000 * MS, "{e:?}");
            (u_sum, e_sum) = (u_sum + u, e_sum + e);
        }
        let (u_mean, e_mean) = (u_sum / 10_000, e_sum / 10_000);
        assert!((95 * MS..=105 * MS).contains(&u_mean), "{u_mean:?}");
        // NOTE: the draws are evenly spread over [0, 1), so the mean is the
        // distribution's, less what the cut at 2 s and the last step take.
        assert!((90 * MS..=105 * MS).contains(&e_mean), "{e_mean:?}");
        assert_eq!(Latency::fixed(7 * MS).at(0.9), 7 * MS);
        assert_eq!(exponential.at(0.0), Duration::ZERO);
    }

    #[test]
    fn settings_that_make_no_sense_are_refused_by_name() {
        let err = Latency::uniform(2 * MS, MS).unwrap_err();
        assert_eq!(err.to_string(), "max must be at least the minimum");
        assert_eq!(err.value(), Some("1ms"));
        let err = Latency::exponential(Duration::ZERO, MS).unwrap_err();
        assert_eq!(err.to_string(), "mean must be greater than zero");
        let err = Latency::exponential(2 * MS, MS).unwrap_err();
        assert_eq!(err.to_string(), "max must be at least the mean");
        assert_eq!(Latency::uniform(MS, MS).unwrap().mean(), MS);
    }
}
