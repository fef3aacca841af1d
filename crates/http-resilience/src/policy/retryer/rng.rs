//! A small, seedable source of randomness for jitter.

use std::{
    collections::hash_map::RandomState,
    hash::{BuildHasher, Hasher},
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
};

/// SplitMix64: tiny, fast and good enough to spread retries apart; not for
/// anything secret.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64(u64);

impl SplitMix64 {
    pub(crate) const fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `[0, 1]`.
    pub(crate) fn next_unit(&mut self) -> f64 {
        // 53 random bits over 2^53 - 1 reach both ends of the interval.
        (self.next_u64() >> 11) as f64 / ((1u64 << 53) - 1) as f64
    }
}

/// Hands out a different seed to every request, from one base seed shared by
/// every clone of a retryer.
///
/// With a fixed base the sequence of seeds (and so every jittered delay) is
/// the same from run to run, which makes tests deterministic; without one the
/// base comes from the process's hash randomness.
#[derive(Debug, Clone)]
pub(crate) struct Seeds {
    base: u64,
    next: Arc<AtomicU64>,
}

impl Seeds {
    pub(crate) fn fixed(base: u64) -> Self {
        Self {
            base,
            next: Arc::new(AtomicU64::new(0)),
        }
    }

    pub(crate) fn random() -> Self {
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u64(0x5EED);
        Self::fixed(hasher.finish())
    }

    /// The generator for the next request.
    pub(crate) fn next_rng(&self) -> SplitMix64 {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut mixer = SplitMix64::new(self.base ^ n.wrapping_mul(0xD1B5_4A32_D192_ED03));
        SplitMix64::new(mixer.next_u64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_base_repeats_and_requests_differ() {
        let a = Seeds::fixed(7);
        let b = Seeds::fixed(7);
        let first: Vec<u64> = (0..3).map(|_| a.next_rng().next_u64()).collect();
        let again: Vec<u64> = (0..3).map(|_| b.next_rng().next_u64()).collect();
        assert_eq!(first, again);
        assert_ne!(first[0], first[1]);
    }

    #[test]
    fn units_stay_in_range() {
        let mut rng = SplitMix64::new(1);
        for _ in 0..10_000 {
            let u = rng.next_unit();
            assert!((0.0..=1.0).contains(&u));
        }
    }
}
