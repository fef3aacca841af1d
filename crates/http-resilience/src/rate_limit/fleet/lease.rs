//! The leases one process holds of one key's fleet quota, spent locally:
//! tokens whose slots Redis gave, a lease asked ahead, whether Redis is
//! away, and the calls waiting for a lease.

use super::link::Reply;
use std::{
    collections::VecDeque,
    sync::{Mutex, MutexGuard, PoisonError},
    task::{Context, Waker},
};

/// How long a lease's unspent tokens live past its last slot.
pub(super) const LEASE_LIFE: u64 = 1_000_000_000;

/// The span the demand is counted over.
const DEMAND_WINDOW: u64 = 100_000_000;

/// The weight of the last window in the smoothed demand.
const DEMAND_SMOOTHING: f64 = 0.3;

/// The leases of one key.
#[derive(Debug, Default)]
pub(crate) struct Leases {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
pub(super) struct State {
    /// The leases held, oldest first: the one spent, the one asked ahead.
    held: VecDeque<Lease>,
    /// Whether a lease is asked for now, and since when.
    pub(super) asking: Option<u64>,
    /// Whether the calls fall back (Redis away or slow), and when Redis was
    /// last asked in vain.
    pub(super) down: bool,
    pub(super) failed_at: u64,
    /// No token before this instant: the fleet's quota had none to lease
    /// within the horizon.
    pub(super) blocked_until: u64,
    /// The calls let through by the fallback while a lease was asked for:
    /// the lease's first tokens, which cover the same time, are theirs.
    pub(super) debt: u32,
    /// The last slot the fallback gave: the next lease's tokens before it
    /// are spent already, by the calls waiting for the fallback's slots.
    pub(super) fallback_until: u64,
    demand: Demand,
    wakers: Vec<Waker>,
}

/// Tokens of the fleet's quota: token `j` may be spent from
/// `max(base, first + j * interval)` until `expires`, in nanoseconds of the
/// policy's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Lease {
    base: u64,
    first: u64,
    interval: u64,
    count: u32,
    next: u32,
    expires: u64,
}

/// The calls asking per second, smoothed over windows.
#[derive(Debug, Default)]
struct Demand {
    started: bool,
    start: u64,
    count: u32,
    rate: f64,
}

// ===== impl Leases =====

impl Leases {
    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a waiting call may ask again: a lease holds tokens, or Redis
    /// counts as away; else the call's waker is kept for the lease.
    pub(crate) fn poll_arrived(&self, cx: &mut Context<'_>) -> bool {
        let mut state = self.lock();
        if state.down || state.held.iter().any(Lease::has_tokens) {
            return true;
        }
        if !state.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            state.wakers.push(cx.waker().clone());
        }
        false
    }

    /// The tokens held at `now`, and whether the calls fall back.
    pub(crate) fn read(&self, now: u64) -> (u32, bool) {
        let state = self.lock();
        let held = state
            .held
            .iter()
            .filter(|lease| lease.expires > now)
            .map(Lease::left)
            .sum();
        (held, state.down)
    }
}

// ===== impl State =====

impl State {
    /// Counts a call asking at `now`; the demand per second.
    pub(super) fn count(&mut self, now: u64) -> f64 {
        let demand = &mut self.demand;
        if !demand.started {
            demand.started = true;
            demand.start = now;
        }
        demand.count += 1;
        let span = now.saturating_sub(demand.start);
        if span >= DEMAND_WINDOW {
            let rate = f64::from(demand.count) * 1e9 / span as f64;
            demand.rate = if demand.rate == 0.0 {
                rate
            } else {
                demand.rate + DEMAND_SMOOTHING * (rate - demand.rate)
            };
            demand.start = now;
            demand.count = 0;
        }
        demand.rate
    }

    /// Takes the next token whose slot comes no later than `latest`: `Ok`
    /// with its slot, `Err` with the slot of the next one when it comes
    /// later, `None` with no token held at `now`.
    pub(super) fn take(&mut self, now: u64, latest: u64) -> Option<Result<u64, u64>> {
        while self
            .held
            .front()
            .is_some_and(|lease| !lease.has_tokens() || lease.expires <= now)
        {
            self.held.pop_front();
        }
        let lease = self.held.front_mut()?;
        let at = lease.slot(lease.next);
        if at > latest {
            return Some(Err(at));
        }
        lease.next += 1;
        Some(Ok(at))
    }

    /// The tokens left in every lease held.
    pub(super) fn left(&self) -> u32 {
        self.held.iter().map(Lease::left).sum()
    }

    /// Keeps the lease Redis gave (`reply`, asked at `sent` and answered at
    /// `received` on the policy's clock), with the fleet's `interval` and
    /// `tau` in nanoseconds; the wakers to wake, and the end of the fleet's
    /// pause on the policy's clock, if one holds.
    pub(super) fn arrive(
        &mut self,
        reply: Reply,
        sent: u64,
        received: u64,
        pace: (u64, u64),
    ) -> Arrived {
        let (interval, tau) = pace;
        // NOTE: Redis's now is taken half-way through the round trip; every
        // instant of the reply moves by the same offset, so that the slots
        // are as far apart as Redis spaced them.
        let mid = sent + (received - sent) / 2;
        let local = |micros: u64| {
            let since = micros.saturating_sub(reply.now).saturating_mul(1_000);
            mid.saturating_add(since)
        };
        let (base, m) = (local(reply.base), local(reply.m));
        let fallback = std::mem::take(&mut self.fallback_until);
        self.asking = None;
        self.down = false;
        let debt = std::mem::take(&mut self.debt);
        let pause = (reply.base > reply.now).then_some(base);
        if reply.count == 0 {
            self.blocked_until = base.max(m.saturating_sub(tau));
        } else {
            let lease = Lease::granted(base, m.saturating_sub(tau), interval, reply.count);
            let lease = lease.spent_before(debt, fallback);
            if lease.has_tokens() {
                self.held.push_back(lease);
            }
            self.blocked_until = 0;
        }
        Arrived {
            wakers: std::mem::take(&mut self.wakers),
            pause,
        }
    }

    /// Redis was asked in vain at `now`: the calls fall back; whether they
    /// did not already.
    pub(super) fn fail(&mut self, now: u64) -> (bool, Vec<Waker>) {
        self.asking = None;
        self.debt = 0;
        self.failed_at = now;
        let fell = !self.down;
        self.down = true;
        (fell, std::mem::take(&mut self.wakers))
    }
}

/// What a lease's arrival leaves to do once the lock is let go.
pub(super) struct Arrived {
    pub(super) wakers: Vec<Waker>,
    pub(super) pause: Option<u64>,
}

// ===== impl Lease =====

impl Lease {
    /// The `count` tokens Redis granted, the first at `first`, one every
    /// `interval` after it, on a bucket whose base is `base`.
    fn granted(base: u64, first: u64, interval: u64, count: u32) -> Self {
        let mut lease = Self {
            base,
            first,
            interval,
            count,
            next: 0,
            expires: 0,
        };
        lease.expires = lease.slot(count - 1).saturating_add(LEASE_LIFE);
        lease
    }

    /// The same lease with its first `debt` tokens spent, and those whose
    /// slots come before `fallback`.
    fn spent_before(mut self, debt: u32, fallback: u64) -> Self {
        // NOTE: the calls the fallback let through while Redis was slow
        // spent the time this lease's first tokens stand for: they are not
        // spent twice. Nor are the tokens whose slots come before the
        // fallback's last one: the calls waiting for the fallback's slots
        // stand for them (pushed later instead, they would go all at once).
        self.next = debt.min(self.count);
        while self.has_tokens() && self.slot(self.next) < fallback {
            self.next += 1;
        }
        self
    }

    /// The slot of token `j`.
    fn slot(&self, j: u32) -> u64 {
        let offset = u64::from(j).saturating_mul(self.interval);
        self.base.max(self.first.saturating_add(offset))
    }

    fn has_tokens(&self) -> bool {
        self.next < self.count
    }

    fn left(&self) -> u32 {
        self.count - self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn reply(now: u64, m: u64, base: u64, count: u32) -> Reply {
        Reply {
            now,
            m,
            base,
            count,
        }
    }

    #[test]
    fn a_lease_spaces_its_tokens_as_redis_did_from_the_burst_on() {
        let mut state = State::default();
        // Redis: now 1,000,000 µs; the quota idle (m = now), a burst of 3 at
        // 2 ms: tau = 4 ms. Asked at 10 ms, answered at 12 ms of the policy.
        let arrived = state.arrive(
            reply(1_000_000, 1_000_000, 1_000_000, 5),
            10 * MS,
            12 * MS,
            (2 * MS, 4 * MS),
        );
        assert!(arrived.pause.is_none() && arrived.wakers.is_empty());
        let slots: Vec<u64> = (0..5)
            .map(|_| state.take(11 * MS, u64::MAX).unwrap().unwrap())
            .collect();
        assert_eq!(slots, [11 * MS, 11 * MS, 11 * MS, 13 * MS, 15 * MS]);
        assert_eq!(state.take(11 * MS, u64::MAX), None, "spent");
    }

    #[test]
    fn a_token_past_the_latest_stays_and_an_expired_lease_goes() {
        let mut state = State::default();
        state.arrive(reply(0, 10_000, 0, 2), 0, 0, (MS, 0));
        assert_eq!(state.take(0, 5 * MS), Some(Err(10 * MS)));
        assert_eq!(state.left(), 2);
        assert_eq!(state.take(0, 10 * MS), Some(Ok(10 * MS)));
        let expired = 11 * MS + LEASE_LIFE;
        assert_eq!(state.take(expired, u64::MAX), None);
    }

    #[test]
    fn a_pause_in_redis_holds_the_tokens_and_comes_back() {
        let mut state = State::default();
        let arrived = state.arrive(reply(0, 500_000, 500_000, 1), 0, 0, (MS, 0));
        assert_eq!(arrived.pause, Some(500 * MS));
        assert_eq!(state.take(0, u64::MAX), Some(Ok(500 * MS)));
    }

    #[test]
    fn no_token_in_the_horizon_blocks_until_the_first_would_be() {
        let mut state = State::default();
        state.arrive(reply(0, 900_000, 0, 0), 0, 0, (MS, 100 * MS));
        assert_eq!(state.blocked_until, 800 * MS);
        assert_eq!(state.take(0, u64::MAX), None);
    }

    #[test]
    fn the_calls_let_through_while_a_lease_was_asked_for_spend_its_first_tokens() {
        let mut state = State {
            asking: Some(0),
            debt: 3,
            ..State::default()
        };
        state.arrive(reply(0, 0, 0, 5), 0, 0, (MS, 0));
        assert_eq!(state.left(), 2);
        assert_eq!(state.take(0, u64::MAX), Some(Ok(3 * MS)));
        assert_eq!(state.debt, 0);
        state.debt = 9;
        state.arrive(reply(0, 0, 0, 5), 0, 0, (MS, 0));
        assert_eq!(
            state.left(),
            1,
            "a debt larger than the lease spends it all"
        );
        state.debt = 2;
        state.fail(0);
        assert_eq!(state.debt, 0, "a failed ask reserved nothing");
        let mut state = State {
            fallback_until: 3 * MS,
            ..State::default()
        };
        state.arrive(reply(0, 0, 0, 5), 0, 0, (MS, 0));
        assert_eq!(
            state.left(),
            2,
            "the fallback's calls spent the tokens before its last slot"
        );
        assert_eq!(state.take(0, u64::MAX), Some(Ok(3 * MS)));
    }

    #[test]
    fn the_demand_is_counted_per_window() {
        let mut state = State::default();
        let mut rate = 0.0;
        for n in 0..=100u64 {
            rate = state.count(n * 2 * MS);
        }
        assert!((400.0..=600.0).contains(&rate), "{rate}");
    }
}
