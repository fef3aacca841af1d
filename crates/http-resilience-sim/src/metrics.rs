//! What a run records, second by second: the calls offered, the attempts
//! that reached the upstream, how calls ended and how long they took.

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};
use tokio::time::Instant;

/// How a call ended, as its caller saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// A 2xx response.
    Good,
    /// Another response: the upstream's 503, after whatever retries.
    Rejected,
    /// Turned away by the client itself, never sent: an open circuit or
    /// client-side throttling.
    TurnedAway,
    /// An error: the deadline or an attempt's time limit.
    Failed,
}

/// The counts of one second (one bucket) of a run.
#[derive(Debug, Clone, Default)]
pub(crate) struct Bucket {
    /// Calls the callers started.
    pub(crate) offered: u32,
    /// Attempts that reached the upstream (its load).
    pub(crate) arrivals: u32,
    /// Attempts that reached the upstream for calls started in this bucket,
    /// whenever they arrived.
    pub(crate) caused: u32,
    /// Calls started in this bucket that ended well, whenever they ended.
    pub(crate) started_good: u32,
    /// Calls that ended, by how.
    pub(crate) good: u32,
    pub(crate) rejected: u32,
    pub(crate) turned_away: u32,
    pub(crate) failed: u32,
    /// The duration of every call that ended here, in milliseconds.
    pub(crate) latencies_ms: Vec<f64>,
}

impl Bucket {
    /// One bucket of the counts of `buckets` together.
    pub(crate) fn merged(buckets: &[Bucket]) -> Self {
        let mut all = Self::default();
        for b in buckets {
            all.offered += b.offered;
            all.arrivals += b.arrivals;
            all.caused += b.caused;
            all.started_good += b.started_good;
            all.good += b.good;
            all.rejected += b.rejected;
            all.turned_away += b.turned_away;
            all.failed += b.failed;
            all.latencies_ms.extend_from_slice(&b.latencies_ms);
        }
        all
    }
}

/// The record of a run, shared by the callers and the upstream. Its clones
/// write the same buckets.
#[derive(Debug, Clone)]
pub(crate) struct Recorder {
    start: Instant,
    width: Duration,
    buckets: Arc<Mutex<Vec<Bucket>>>,
}

impl Recorder {
    /// A record in buckets of `width`, starting now.
    pub(crate) fn new(width: Duration) -> Self {
        Self {
            start: Instant::now(),
            width,
            buckets: Arc::default(),
        }
    }

    /// The instant the run started.
    pub(crate) const fn start(&self) -> Instant {
        self.start
    }

    /// The index of the bucket `at` falls in.
    pub(crate) fn index(&self, at: Instant) -> usize {
        let since = at.saturating_duration_since(self.start);
        (since.as_nanos() / self.width.as_nanos().max(1)) as usize
    }

    fn with(&self, at: Instant, f: impl FnOnce(&mut Bucket)) {
        let index = self.index(at);
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        if buckets.len() <= index {
            buckets.resize_with(index + 1, Bucket::default);
        }
        f(&mut buckets[index]);
    }

    /// A caller started a call now.
    pub(crate) fn offered(&self) {
        self.with(Instant::now(), |b| b.offered += 1);
    }

    /// An attempt reached the upstream now, for a call started at `call`.
    pub(crate) fn arrival(&self, call: Option<Instant>) {
        self.with(Instant::now(), |b| b.arrivals += 1);
        if let Some(call) = call {
            self.with(call, |b| b.caused += 1);
        }
    }

    /// A call started at `started` ended now, as `ended` says.
    pub(crate) fn ended(&self, started: Instant, ended: Ended) {
        let now = Instant::now();
        let ms = now.saturating_duration_since(started).as_secs_f64() * 1e3;
        self.with(now, |b| {
            match ended {
                Ended::Good => b.good += 1,
                Ended::Rejected => b.rejected += 1,
                Ended::TurnedAway => b.turned_away += 1,
                Ended::Failed => b.failed += 1,
            }
            b.latencies_ms.push(ms);
        });
        if ended == Ended::Good {
            self.with(started, |b| b.started_good += 1);
        }
    }

    /// The buckets recorded so far.
    pub(crate) fn buckets(&self) -> Vec<Bucket> {
        self.buckets
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The `q`-quantile (0 to 1) of `values`, by the nearest rank; `None` when
/// there are none. Sorts `values`.
pub(crate) fn quantile(values: &mut [f64], q: f64) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let rank = (q * values.len() as f64).ceil() as usize;
    Some(values[rank.clamp(1, values.len()) - 1])
}

/// The sum of `field` over the buckets `from..until` (in buckets).
pub(crate) fn sum(buckets: &[Bucket], from: usize, until: usize, field: fn(&Bucket) -> u32) -> u64 {
    buckets
        .iter()
        .skip(from)
        .take(until.saturating_sub(from))
        .map(|b| u64::from(field(b)))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_by_nearest_rank() {
        let mut values: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!(quantile(&mut values, 0.5), Some(500.0));
        assert_eq!(quantile(&mut values, 0.999), Some(999.0));
        assert_eq!(quantile(&mut values, 1.0), Some(1000.0));
        assert_eq!(quantile(&mut [], 0.5), None);
    }

    #[test]
    fn sums_cover_the_range_asked() {
        let buckets: Vec<Bucket> = (0..5)
            .map(|i| Bucket {
                offered: i,
                ..Bucket::default()
            })
            .collect();
        assert_eq!(sum(&buckets, 1, 3, |b| b.offered), 3);
        assert_eq!(sum(&buckets, 3, 10, |b| b.offered), 7);
    }
}
