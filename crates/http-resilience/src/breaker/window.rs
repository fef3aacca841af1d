//! The sliding window of outcomes: ten buckets of atomics, no lock.

use std::sync::atomic::{AtomicU64, Ordering};

/// The number of buckets a window is cut into.
pub(crate) const BUCKETS: u64 = 10;

const COUNT_BITS: u32 = 20;
const COUNT_MASK: u64 = (1 << COUNT_BITS) - 1;
const EPOCH_BITS: u32 = 24;
const EPOCH_MASK: u64 = (1 << EPOCH_BITS) - 1;

/// Failures and calls over the last `BUCKETS` buckets of time.
///
/// NOTE: each bucket is one `AtomicU64` holding the bucket's epoch (24 bits),
/// its failures and its calls (20 bits each, saturating at about a million),
/// so that counting an outcome, and turning a stale bucket over, is one
/// compare-and-swap: no count is lost to a race. Epochs compare modulo 2^24:
/// a bucket left alone for exactly 2^24 bucket lengths (with a 30 s window,
/// over a year) would be read as current; idle keys are evicted long before.
#[derive(Debug, Default)]
pub(crate) struct Window {
    buckets: [AtomicU64; BUCKETS as usize],
}

/// What a window holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Tally {
    pub(crate) failures: u32,
    pub(crate) calls: u32,
}

// ===== impl Window =====

impl Window {
    /// Counts one outcome in the bucket of `epoch` (the time in bucket
    /// lengths).
    pub(crate) fn record(&self, epoch: u64, failed: bool) {
        let bucket = &self.buckets[(epoch % BUCKETS) as usize];
        let mut current = bucket.load(Ordering::Relaxed);
        loop {
            let next = counted(current, epoch, failed);
            match bucket.compare_exchange_weak(current, next, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => break,
                Err(seen) => current = seen,
            }
        }
    }

    /// The failures and calls of the buckets within the window that ends in
    /// the bucket of `epoch`.
    pub(crate) fn tally(&self, epoch: u64) -> Tally {
        let mut tally = Tally::default();
        for bucket in &self.buckets {
            let value = bucket.load(Ordering::Acquire);
            let age = (epoch.wrapping_sub(value >> (2 * COUNT_BITS))) & EPOCH_MASK;
            if age < BUCKETS {
                tally.failures += ((value >> COUNT_BITS) & COUNT_MASK) as u32;
                tally.calls += (value & COUNT_MASK) as u32;
            }
        }
        tally
    }

    /// Forgets every outcome.
    pub(crate) fn clear(&self) {
        for bucket in &self.buckets {
            bucket.store(0, Ordering::Release);
        }
    }
}

/// `value` (a bucket) with one more outcome of `epoch`: a bucket of another
/// epoch starts over.
fn counted(value: u64, epoch: u64, failed: bool) -> u64 {
    let epoch = epoch & EPOCH_MASK;
    let (mut failures, mut calls) = if value >> (2 * COUNT_BITS) == epoch {
        ((value >> COUNT_BITS) & COUNT_MASK, value & COUNT_MASK)
    } else {
        (0, 0)
    };
    calls = (calls + 1).min(COUNT_MASK);
    if failed {
        failures = (failures + 1).min(COUNT_MASK);
    }
    (epoch << (2 * COUNT_BITS)) | (failures << COUNT_BITS) | calls
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_within_the_window_and_forgets_older_buckets() {
        let window = Window::default();
        window.record(5, true);
        window.record(5, false);
        window.record(9, true);
        assert_eq!(
            window.tally(9),
            Tally {
                failures: 2,
                calls: 3
            }
        );
        // Bucket 5 is out of the window that ends in bucket 15; 9 is in.
        window.record(15, false);
        assert_eq!(
            window.tally(15),
            Tally {
                failures: 1,
                calls: 2
            }
        );
        // Bucket 15 took over bucket 5's slot; 25 takes it over again.
        assert_eq!(window.tally(25), Tally::default());
        window.clear();
        assert_eq!(window.tally(15), Tally::default());
    }

    #[test]
    fn counts_saturate() {
        let full = counted((3 << 40) | (COUNT_MASK << 20) | COUNT_MASK, 3, true);
        assert_eq!(full & COUNT_MASK, COUNT_MASK);
        assert_eq!((full >> 20) & COUNT_MASK, COUNT_MASK);
    }
}
