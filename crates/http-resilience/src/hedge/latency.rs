//! The latencies a client observes, for a hedging delay at a percentile.

use std::{
    sync::{
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
        Mutex, PoisonError,
    },
    time::Duration,
};
use tokio::time::Instant;

/// Sub-buckets per power of two: each bucket is at most 1/8 (12.5 %) wide.
const SUB: u32 = 8;
/// Powers of two of microseconds covered: up to 2^40 µs, about 12 days.
const POWERS: u32 = 40;
const BUCKETS: usize = (SUB * POWERS) as usize;

/// The latencies of one client's attempts over a rolling window: recorded
/// into the current window, read from the last full one, as tower's `hedge`
/// and Finagle's backup requests do, so that the delay in use moves once per
/// window and costs nothing to read.
///
/// While the last full window had too few samples (at first, say), the delay
/// comes from the current window instead: computed once it holds
/// `min_samples` latencies, and again each time their count doubles, so a
/// client that starts under load hedges from its `min_samples`-th call on.
///
/// Buckets are logarithmic, 8 per power of two, so a percentile is read
/// within 12.5 % of the truth, from 1 µs to about 12 days; recording is one
/// atomic increment. Under concurrency the counts are approximate at the
/// moment a window rolls over, which a percentile does not notice.
pub(crate) struct Histogram {
    window: Duration,
    percentile: f64,
    min_samples: u64,
    windows: [Window; 2],
    /// Which of `windows` is being written.
    current: AtomicUsize,
    /// The delay read from the last full window, in microseconds; `u64::MAX`
    /// for none (too few samples).
    delay_micros: AtomicU64,
    /// Latencies recorded in the current window.
    recorded: AtomicU64,
    /// Whether the last full window had too few samples, so that the delay
    /// is read from the current one as it fills.
    warming: AtomicBool,
    /// When the current window ends.
    ends: Mutex<Instant>,
}

struct Window {
    counts: Box<[AtomicU64]>,
}

impl Window {
    fn new() -> Self {
        Self {
            counts: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl Histogram {
    pub(crate) fn new(percentile: f64, min_samples: u64, window: Duration) -> Self {
        Self {
            window,
            percentile,
            min_samples,
            windows: [Window::new(), Window::new()],
            current: AtomicUsize::new(0),
            delay_micros: AtomicU64::new(u64::MAX),
            recorded: AtomicU64::new(0),
            warming: AtomicBool::new(true),
            ends: Mutex::new(crate::timer::saturating_after(Instant::now(), window)),
        }
    }

    /// Records one latency.
    pub(crate) fn record(&self, latency: Duration, now: Instant) {
        self.roll(now);
        let bucket = bucket_of(latency);
        let current = &self.windows[self.current.load(Ordering::Relaxed)];
        current.counts[bucket].fetch_add(1, Ordering::Relaxed);
        let recorded = self.recorded.fetch_add(1, Ordering::Relaxed) + 1;
        if self.warming.load(Ordering::Relaxed) && self.is_recount(recorded) {
            if let Some(delay) = self.read(current) {
                self.delay_micros.store(delay, Ordering::Relaxed);
            }
        }
    }

    /// Whether the `recorded`-th latency of a window is one at which a
    /// warming delay is computed again: `min_samples` (at least 1) times a
    /// power of two.
    fn is_recount(&self, recorded: u64) -> bool {
        let first = self.min_samples.max(1);
        recorded % first == 0 && (recorded / first).is_power_of_two()
    }

    /// The delay at the percentile over the last full window, if it had
    /// enough samples.
    pub(crate) fn delay(&self, now: Instant) -> Option<Duration> {
        self.roll(now);
        match self.delay_micros.load(Ordering::Relaxed) {
            u64::MAX => None,
            micros => Some(Duration::from_micros(micros)),
        }
    }

    pub(crate) fn percentile(&self) -> f64 {
        self.percentile
    }

    pub(crate) fn min_samples(&self) -> u64 {
        self.min_samples
    }

    pub(crate) fn window(&self) -> Duration {
        self.window
    }

    /// Ends the current window when its time is up: its percentile becomes
    /// the delay, and the other window, cleared, is written next.
    fn roll(&self, now: Instant) {
        let mut ends = self.ends.lock().unwrap_or_else(PoisonError::into_inner);
        if now < *ends {
            return;
        }
        let full = self.current.load(Ordering::Relaxed);
        let next = 1 - full;
        for count in self.windows[next].counts.iter() {
            count.store(0, Ordering::Relaxed);
        }
        self.current.store(next, Ordering::Relaxed);
        self.recorded.store(0, Ordering::Relaxed);
        let delay = self.read(&self.windows[full]);
        self.warming.store(delay.is_none(), Ordering::Relaxed);
        self.delay_micros
            .store(delay.unwrap_or(u64::MAX), Ordering::Relaxed);
        // NOTE: a window with no call in it ends at once; the next one starts
        // now, not at a multiple of the window.
        *ends = crate::timer::saturating_after(now, self.window);
    }

    /// The percentile of `window`, in microseconds (the upper end of its
    /// bucket).
    fn read(&self, window: &Window) -> Option<u64> {
        let count = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let total: u64 = window.counts.iter().map(count).sum();
        if total == 0 || total < self.min_samples {
            return None;
        }
        let rank = ((total as f64) * self.percentile / 100.0).ceil().max(1.0) as u64;
        let mut seen = 0;
        for (bucket, n) in window.counts.iter().map(count).enumerate() {
            seen += n;
            if seen >= rank {
                return Some(upper_of(bucket));
            }
        }
        // NOTE: counts recorded while this loop ran can leave `seen` short.
        Some(upper_of(BUCKETS - 1))
    }
}

/// The bucket of a latency: 8 per power of two of microseconds.
fn bucket_of(latency: Duration) -> usize {
    let micros = u64::try_from(latency.as_micros())
        .unwrap_or(u64::MAX)
        .max(1);
    let power = 63 - micros.leading_zeros();
    // NOTE: the three bits below the leading one pick the sub-bucket.
    let sub = if power >= 3 {
        (micros >> (power - 3)) & 0b111
    } else {
        (micros << (3 - power)) & 0b111
    };
    ((power * SUB) as usize + sub as usize).min(BUCKETS - 1)
}

/// The largest latency, in microseconds, of a bucket.
fn upper_of(bucket: usize) -> u64 {
    let power = (bucket as u32) / SUB;
    let sub = (bucket as u32 % SUB) as u64;
    let base = 1_u64 << power;
    // NOTE: below 8 µs the buckets are narrower than 1 µs; their upper end
    // rounds up.
    (base + (base * (sub + 1)).div_ceil(u64::from(SUB)))
        .saturating_sub(1)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_hold_their_values_within_an_eighth() {
        for micros in [
            1_u64, 2, 7, 8, 9, 15, 16, 100, 999, 1000, 1001, 123_456, 10_000_000,
        ] {
            let bucket = bucket_of(Duration::from_micros(micros));
            let upper = upper_of(bucket);
            assert!(upper >= micros, "{micros}: bucket {bucket} ends at {upper}");
            assert!(
                upper as f64 <= micros as f64 * 1.125 + 1.0,
                "{micros}: bucket {bucket} ends at {upper}"
            );
        }
        assert_eq!(bucket_of(Duration::MAX), BUCKETS - 1);
        assert_eq!(bucket_of(Duration::ZERO), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn the_delay_is_the_percentile_of_the_last_full_window() {
        let window = Duration::from_secs(1);
        let histogram = Histogram::new(95.0, 20, window);
        let now = Instant::now();
        // 95 fast, 5 slow.
        for i in 0..100 {
            let latency = if i % 20 == 0 {
                Duration::from_millis(100)
            } else {
                Duration::from_millis(1)
            };
            histogram.record(latency, now);
        }
        let warming = histogram
            .delay(now)
            .expect("20 samples seen in the first window");
        assert!(warming <= Duration::from_micros(1125), "{warming:?}");
        let later = now + window;
        let delay = histogram.delay(later).expect("a full window");
        assert!(
            delay >= Duration::from_millis(1) && delay <= Duration::from_micros(1125),
            "{delay:?}"
        );
        // A window with too few samples gives no delay.
        histogram.record(Duration::from_millis(5), later);
        assert_eq!(histogram.delay(later + window), None);
    }
}
