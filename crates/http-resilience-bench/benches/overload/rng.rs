//! A seeded sequence, so that every variant meets the same arrivals and the
//! same service times.

/// SplitMix64: one well-spread 64-bit value per position of a seeded sequence.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SplitMix64(u64);

// ===== impl SplitMix64 =====

impl SplitMix64 {
    /// The value at position `n` of the sequence of `seed`.
    pub(crate) fn at(seed: u64, n: u64) -> Self {
        let mut z = seed
            .wrapping_add(n.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Self(z ^ (z >> 31))
    }

    /// The value as a share in `[0, 1)` (its top 53 bits).
    pub(crate) fn unit(self) -> f64 {
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}
