//! Which attempts a policy picks: at a rate, every `n`th, or a list; and the
//! seeded numbers it picks them with.

use crate::{policy::SplitMix64, InvalidSetting};
use std::sync::Arc;

/// Which of a key's attempts get the fault, counted from 1 per key.
#[derive(Debug, Clone)]
pub(super) enum Trigger {
    /// Each attempt with this probability.
    Rate(f64),
    /// Attempts `n`, `2n`, `3n`, ...
    Every(u64),
    /// These attempts, in order.
    Attempts(Arc<[u64]>),
}

// ===== impl Trigger =====

impl Trigger {
    pub(super) fn rate(rate: f64) -> Result<Self, InvalidSetting> {
        if !(0.0..=1.0).contains(&rate) {
            let err = InvalidSetting::new("rate", "must be between 0 and 1");
            return Err(err.with_value(rate.to_string()));
        }
        Ok(Self::Rate(rate))
    }

    pub(super) fn every(n: u64) -> Result<Self, InvalidSetting> {
        if n == 0 {
            return Err(InvalidSetting::new("every", "must be at least 1").with_value("0"));
        }
        Ok(Self::Every(n))
    }

    pub(super) fn attempts(
        attempts: impl IntoIterator<Item = u64>,
    ) -> Result<Self, InvalidSetting> {
        let mut attempts: Vec<u64> = attempts.into_iter().collect();
        if attempts.contains(&0) {
            let err = InvalidSetting::new("attempts", "are counted from 1");
            return Err(err.with_value("0"));
        }
        attempts.sort_unstable();
        attempts.dedup();
        Ok(Self::Attempts(attempts.into()))
    }

    /// Whether the key's attempt `n` gets the fault, given its draw `unit`
    /// in `[0, 1)`.
    pub(super) fn fires(&self, n: u64, unit: f64) -> bool {
        match self {
            Trigger::Rate(rate) => unit < *rate,
            Trigger::Every(every) => n % every == 0,
            Trigger::Attempts(attempts) => attempts.binary_search(&n).is_ok(),
        }
    }
}

/// The two draws of a key's attempt `n`, each uniform in `[0, 1)`: one that
/// picks the attempt, one for its wait.
///
/// NOTE: the draws of attempt `n` are the outputs `2n` and `2n + 1` of the
/// SplitMix64 stream of the key's seed, computed where they lie: the same
/// numbers for the same attempt of the same key, in whatever order
/// concurrent calls take their attempt numbers.
pub(super) fn draws(seed: u64, n: u64) -> (f64, f64) {
    const GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut stream = SplitMix64::new(seed.wrapping_add(n.wrapping_mul(2).wrapping_mul(GAMMA)));
    (unit(stream.next_u64()), unit(stream.next_u64()))
}

/// 53 random bits as a number in `[0, 1)`.
fn unit(bits: u64) -> f64 {
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedules_pick_what_they_say() {
        let every = Trigger::every(3).unwrap();
        let picked: Vec<u64> = (1..=10).filter(|&n| every.fires(n, 0.0)).collect();
        assert_eq!(picked, [3, 6, 9]);
        let listed = Trigger::attempts([5, 1, 5, 2]).unwrap();
        let picked: Vec<u64> = (1..=10).filter(|&n| listed.fires(n, 0.0)).collect();
        assert_eq!(picked, [1, 2, 5]);
        let (never, always) = (Trigger::rate(0.0).unwrap(), Trigger::rate(1.0).unwrap());
        assert!((1..1000).all(|n| !never.fires(n, draws(7, n).0)));
        assert!((1..1000).all(|n| always.fires(n, draws(7, n).0)));
    }

    #[test]
    fn draws_are_the_same_for_the_same_attempt_and_spread_evenly() {
        assert_eq!(draws(42, 17), draws(42, 17));
        assert_ne!(draws(42, 17), draws(43, 17));
        let below = (1..=10_000).filter(|&n| draws(42, n).0 < 0.25).count();
        assert!((2_400..=2_600).contains(&below), "{below}");
    }

    #[test]
    fn settings_that_make_no_sense_are_refused_by_name() {
        let err = Trigger::rate(1.5).unwrap_err();
        assert_eq!(err.to_string(), "rate must be between 0 and 1");
        assert_eq!(err.value(), Some("1.5"));
        assert!(Trigger::rate(f64::NAN).is_err());
        assert_eq!(
            Trigger::every(0).unwrap_err().to_string(),
            "every must be at least 1"
        );
        let err = Trigger::attempts([0, 1]).unwrap_err();
        assert_eq!(err.to_string(), "attempts are counted from 1");
    }
}
