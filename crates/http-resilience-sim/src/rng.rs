//! Seeded random numbers: the same seed gives the same run.
//!
//! SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
//! generators", OOPSLA 2014): one 64-bit word of state, good enough for a
//! simulation's draws, and trivially forked into independent streams, one
//! per caller and one per upstream.

/// A seeded stream of random numbers.
#[derive(Debug, Clone)]
pub(crate) struct Rng {
    state: u64,
}

/// SplitMix64's increment, the golden ratio in 64 bits.
const GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

impl Rng {
    /// A stream fixed by `seed`.
    pub(crate) const fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GAMMA);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Another stream, independent of this one for a simulation's purposes,
    /// seeded from it.
    pub(crate) fn fork(&mut self) -> Self {
        Self::new(self.next_u64())
    }

    /// Uniform in `[0, 1)`, with 53 bits of precision.
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Whether an event of probability `p` happens.
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// Exponentially distributed with the given mean (inverse transform).
    pub(crate) fn exponential(&mut self, mean: f64) -> f64 {
        // NOTE: `1 - unit` is in (0, 1], so the logarithm is finite.
        -mean * (1.0 - self.unit()).ln()
    }

    /// A standard normal draw (Box-Muller; the second value is dropped, so
    /// that every draw costs the same and a stream stays easy to follow).
    pub(crate) fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.unit();
        let u2 = self.unit();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_stream() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        let first: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        let second: Vec<u64> = (0..5).map(|_| b.next_u64()).collect();
        assert_eq!(first, second);
        assert_ne!(
            first,
            (0..5).map(|_| Rng::new(8).next_u64()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn draws_have_their_means() {
        let mut rng = Rng::new(1);
        let n = 100_000;
        let unit: f64 = (0..n).map(|_| rng.unit()).sum::<f64>() / f64::from(n);
        let exp: f64 = (0..n).map(|_| rng.exponential(3.0)).sum::<f64>() / f64::from(n);
        let normal: f64 = (0..n).map(|_| rng.normal()).sum::<f64>() / f64::from(n);
        assert!((unit - 0.5).abs() < 0.01, "{unit}");
        assert!((exp - 3.0).abs() < 0.05, "{exp}");
        assert!(normal.abs() < 0.02, "{normal}");
    }
}
