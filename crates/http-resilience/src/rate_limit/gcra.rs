//! GCRA, the generic cell rate algorithm (ITU-T I.371, as ATM switches and
//! governor use it), kept in one atomic word: the theoretical arrival time
//! of the next call, in nanoseconds of the key's clock.
//!
//! A call asking at `now` may go at `max(now, tat - tau, floor)`: `tau` is
//! the burst's tolerance (`(burst - 1)` intervals) and `floor` the instant
//! a pause learned from the server ends. Taking that slot moves the arrival
//! time to `max(tat, slot) + interval`. A run of calls asking at once so
//! gets `burst` slots at `now`, then one every `interval`; a key left idle
//! has its whole burst again after `burst` intervals.

use std::sync::atomic::{AtomicU64, Ordering};

/// A key's theoretical arrival time, in nanoseconds of the key's clock.
#[derive(Debug, Default)]
pub(crate) struct Gcra {
    tat: AtomicU64,
}

/// The pace a call is asked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pace {
    /// Nanoseconds between calls.
    pub(crate) interval: u64,
    /// The burst's tolerance: how far ahead of `now` the arrival time may
    /// be and a call still go at once, in nanoseconds.
    pub(crate) tau: u64,
}

// ===== impl Pace =====

impl Pace {
    /// One call every `interval` nanoseconds, `burst` at once.
    pub(crate) const fn with_burst(interval: u64, burst: u32) -> Self {
        Self {
            interval,
            tau: interval.saturating_mul(burst.saturating_sub(1) as u64),
        }
    }
}

/// A slot taken: the instant the call may go, and the arrival time it left,
/// for [`Gcra::give_back`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Taken {
    pub(crate) at: u64,
    pub(crate) tat: u64,
}

// ===== impl Gcra =====

impl Gcra {
    /// The slot of a call asking at `now`, taken if it comes no later than
    /// `latest`; `Err` with the slot it would have had otherwise, nothing
    /// taken.
    #[inline]
    pub(crate) fn take(&self, now: u64, pace: Pace, floor: u64, latest: u64) -> Result<Taken, u64> {
        let mut tat = self.tat.load(Ordering::Acquire);
        loop {
            let at = slot(tat, now, pace.tau, floor);
            if at > latest {
                return Err(at);
            }
            let next = tat.max(at).saturating_add(pace.interval);
            match self
                .tat
                .compare_exchange_weak(tat, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Ok(Taken { at, tat: next }),
                Err(seen) => tat = seen,
            }
        }
    }

    /// The slot a call asking at `now` would get, nothing taken.
    pub(crate) fn peek(&self, now: u64, pace: Pace, floor: u64) -> u64 {
        slot(self.tat.load(Ordering::Acquire), now, pace.tau, floor)
    }

    /// Gives back the slot `taken`, `interval` long, when no call took one
    /// after it (a waiting call dropped); a slot taken since stays taken, so
    /// a drop never lets a later call go early.
    pub(crate) fn give_back(&self, taken: Taken, interval: u64) {
        let before = taken.tat.saturating_sub(interval);
        let _ = self
            .tat
            .compare_exchange(taken.tat, before, Ordering::AcqRel, Ordering::Relaxed);
    }
}

/// The instant a call asking at `now` may go.
#[inline]
fn slot(tat: u64, now: u64, tau: u64, floor: u64) -> u64 {
    now.max(tat.saturating_sub(tau)).max(floor)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// 100 per second, a burst of 10.
    const PACE: Pace = Pace {
        interval: 10 * MS,
        tau: 9 * 10 * MS,
    };

    #[test]
    fn a_burst_goes_at_once_then_one_per_interval() {
        let gcra = Gcra::default();
        let now = 1_000 * MS;
        let slots: Vec<u64> = (0..13)
            .map(|_| gcra.take(now, PACE, 0, u64::MAX).unwrap().at - now)
            .collect();
        assert_eq!(&slots[..10], &[0; 10]);
        assert_eq!(&slots[10..], &[10 * MS, 20 * MS, 30 * MS]);
    }

    #[test]
    fn a_slot_past_the_latest_is_not_taken() {
        let gcra = Gcra::default();
        for _ in 0..10 {
            gcra.take(0, PACE, 0, 0).unwrap();
        }
        assert_eq!(gcra.take(0, PACE, 0, 0), Err(10 * MS));
        assert_eq!(gcra.take(0, PACE, 0, 5 * MS), Err(10 * MS));
        assert_eq!(gcra.take(0, PACE, 0, 10 * MS).unwrap().at, 10 * MS);
        assert_eq!(gcra.peek(0, PACE, 0), 20 * MS);
    }

    #[test]
    fn an_idle_key_has_its_burst_again() {
        let gcra = Gcra::default();
        for _ in 0..15 {
            gcra.take(0, PACE, 0, u64::MAX).unwrap();
        }
        assert_eq!(
            gcra.peek(0, PACE, 0),
            150 * MS - PACE.tau,
            "the 16th call's slot"
        );
        let later = 150 * MS + 100 * MS;
        let at_once = (0..12)
            .filter(|_| gcra.take(later, PACE, 0, later).is_ok())
            .count();
        assert_eq!(at_once, 10);
    }

    #[test]
    fn a_pause_holds_every_slot_until_it_ends_then_the_burst_goes() {
        let gcra = Gcra::default();
        let end = 2_000 * MS;
        let slots: Vec<u64> = (0..12)
            .map(|_| gcra.take(0, PACE, end, u64::MAX).unwrap().at)
            .collect();
        assert!(slots.iter().all(|&at| at >= end), "never early");
        assert_eq!(&slots[..10], &[end; 10]);
        assert_eq!(slots[10], end + 10 * MS);
    }

    #[test]
    fn a_slot_given_back_is_the_next_one_unless_another_came_after() {
        let gcra = Gcra::default();
        for _ in 0..10 {
            gcra.take(0, PACE, 0, 0).unwrap();
        }
        let first = gcra.take(0, PACE, 0, u64::MAX).unwrap();
        gcra.give_back(first, PACE.interval);
        assert_eq!(gcra.take(0, PACE, 0, u64::MAX).unwrap().at, first.at);
        let second = gcra.take(0, PACE, 0, u64::MAX).unwrap();
        gcra.give_back(first, PACE.interval);
        assert_eq!(gcra.peek(0, PACE, 0), second.at + PACE.interval);
    }

    #[test]
    fn racing_threads_share_the_slots_without_losing_one() {
        let gcra = std::sync::Arc::new(Gcra::default());
        let pace = Pace {
            interval: MS,
            tau: 0,
        };
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let gcra = std::sync::Arc::clone(&gcra);
                std::thread::spawn(move || {
                    (0..1_000)
                        .map(|_| gcra.take(0, pace, 0, u64::MAX).unwrap().at)
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<u64> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        all.sort_unstable();
        let expected: Vec<u64> = (0..4_000).map(|n| n * MS).collect();
        assert_eq!(all, expected, "every slot taken once");
    }
}
