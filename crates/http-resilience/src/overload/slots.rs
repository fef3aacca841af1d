//! The slots of one key: the calls in flight, the queue of those waiting
//! for one, the limit and the throttle's counts, under one lock.

use super::{
    error::Rejection,
    events::{emit, OverloadEvent, OverloadListeners},
    limit::{Adaptive, LimitState},
    settings::Settings,
    throttle::ThrottleState,
};
use crate::{
    key::{Clock, Keyed, UpstreamKey},
    policy::SplitMix64,
};
use std::{
    collections::VecDeque,
    sync::{
        atomic::{AtomicBool, AtomicU32, Ordering},
        Arc, Mutex, MutexGuard, PoisonError, TryLockError,
    },
    time::Duration,
};
use tokio::time::Instant;

/// The slots of one key.
#[derive(Debug)]
pub(crate) struct Slots {
    key: UpstreamKey,
    /// The policy's clock, which the limit's and the throttle's times and
    /// the last use are read on in nanoseconds.
    clock: Clock,
    evicted: AtomicBool,
    /// The calls in flight and queued, for eviction to tell a busy key from
    /// a quiet one without the lock.
    busy: AtomicU32,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// When a call last asked for a slot.
    ///
    /// NOTE: an instant, stamped under the lock the call takes anyway, so
    /// that asking for a slot reads the clock without turning it into
    /// nanoseconds; eviction, rare, turns it into them.
    last_used: Instant,
    in_flight: u32,
    limit: LimitState,
    queue: VecDeque<Arc<Waiter>>,
    throttle: Option<ThrottleState>,
    rng: SplitMix64,
    /// The smoothed latency of the accepted calls the wait estimate learns
    /// from ([`State::learns_from`]), in nanoseconds; 0 before the first.
    latency: f64,
}

/// A call waiting for a slot: set, under the slots' lock, when a slot is
/// handed to it.
pub(crate) type Waiter = crate::flag::Flag;

/// What a call asking for a slot got.
#[derive(Debug)]
pub(crate) enum Entry {
    /// A slot, with this many calls in flight (itself included), and what
    /// its release learns from the call's outcome ([`State::learns_from`]).
    Admitted { in_flight: u32, learns: Learns },
    /// A place in the queue.
    Queued(Arc<Waiter>),
    /// Neither.
    Rejected(Rejection),
}

/// What the release of an admitted call learns from its outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Learns {
    /// The adaptive limit or the throttle, which learn from every call.
    pub(crate) load: bool,
    /// The wait estimate, which counts the latency of calls made under load.
    pub(crate) wait: bool,
}

impl Learns {
    /// What a call that waited for its slot teaches: it got its slot with
    /// every slot taken.
    pub(crate) const FROM_QUEUE: Self = Self {
        load: true,
        wait: true,
    };

    /// Whether the release reads the outcome and the clock at all.
    pub(crate) const fn anything(self) -> bool {
        self.load || self.wait
    }
}

/// How a call that held a slot ended, for the limit and the throttle.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Signal {
    /// The upstream accepted it; it was given its slot at this instant.
    Accepted(Instant),
    /// An overload signal: a 429, a 503, `RESOURCE_EXHAUSTED`, a timeout.
    Overload,
    /// Another failure: no accept, and nothing learnt about the load.
    Failed,
    /// Counts for nothing: the call was dropped, ended by its deadline, or
    /// turned away below (an open circuit).
    Nothing,
}

/// The smoothing of the latency the wait estimate uses.
const LATENCY_SMOOTHING: f64 = 0.1;

// ===== impl Slots =====

impl Slots {
    pub(crate) fn new(
        key: UpstreamKey,
        clock: Clock,
        now: Instant,
        settings: &Settings,
        rng: SplitMix64,
    ) -> Self {
        Self {
            key,
            clock,
            evicted: AtomicBool::new(false),
            busy: AtomicU32::new(0),
            state: Mutex::new(State {
                last_used: now,
                in_flight: 0,
                limit: LimitState::new(settings.limit),
                queue: VecDeque::new(),
                throttle: settings.throttle.map(ThrottleState::new),
                rng,
                latency: 0.0,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Asks for a slot at `now`: one at once while the limit allows and no
    /// call waits before it, else a place in the queue unless it is full or
    /// the wait it would likely take does not fit in what `room` gives (the
    /// time it may wait, if bounded; asked only of a call that would queue).
    ///
    /// NOTE: inlined into its one caller, the pass asking for a slot, so
    /// that the entry it returns is matched where it is made.
    #[inline(always)]
    pub(crate) fn enter(
        &self,
        max_queued: u32,
        listeners: &OverloadListeners,
        now: Instant,
        room: impl FnOnce() -> Option<Duration>,
    ) -> Entry {
        let mut state = self.lock();
        state.last_used = now;
        let entry = state.entry(max_queued, || self.clock.nanos(now), room);
        self.busy.store(state.busy(), Ordering::Relaxed);
        drop(state);
        if let Entry::Rejected(reason) = entry {
            emit(
                listeners,
                &OverloadEvent::Rejected {
                    key: &self.key,
                    reason,
                },
            );
        }
        entry
    }

    /// Gives a slot back, after a call admitted with `in_flight` calls in
    /// flight that ended with `outcome`'s signal at its instant (none when
    /// nothing is learnt from it; its latency counted in the wait estimate
    /// when `times_wait`), and hands the slots the limit allows to the calls
    /// waiting first.
    pub(crate) fn leave(
        &self,
        listeners: &OverloadListeners,
        outcome: Option<(Signal, Instant)>,
        times_wait: bool,
        in_flight: u32,
    ) {
        let mut state = self.lock();
        state.in_flight = state.in_flight.saturating_sub(1);
        let moved = match outcome {
            Some((signal, now)) => state.learn(signal, in_flight, now, times_wait, &self.clock),
            None => None,
        };
        state.hand_on();
        self.busy.store(state.busy(), Ordering::Relaxed);
        drop(state);
        if let Some((from, to)) = moved {
            emit(
                listeners,
                &OverloadEvent::LimitChanged {
                    key: &self.key,
                    from,
                    to,
                },
            );
        }
    }

    /// Takes a waiting call out of the queue; one handed a slot meanwhile
    /// gives it back, counting for nothing. Returns whether it had one.
    pub(crate) fn cancel(&self, waiter: &Arc<Waiter>) -> bool {
        let mut state = self.lock();
        let granted = waiter.is_set();
        if granted {
            state.in_flight = state.in_flight.saturating_sub(1);
            state.hand_on();
        } else {
            state.queue.retain(|queued| !Arc::ptr_eq(queued, waiter));
        }
        self.busy.store(state.busy(), Ordering::Relaxed);
        granted
    }

    /// The limit, the calls in flight and queued, and the throttle's
    /// probability at `now`.
    pub(crate) fn read(&self, now: Instant) -> (u32, u32, u32, f64) {
        let state = self.lock();
        let p = (state.throttle.as_ref()).map_or(0.0, |t| t.probability(self.clock.nanos(now)));
        let queued = u32::try_from(state.queue.len()).unwrap_or(u32::MAX);
        (state.limit.get(), state.in_flight, queued, p)
    }
}

impl Keyed for Slots {
    fn key(&self) -> &UpstreamKey {
        &self.key
    }

    /// When a call last asked for a slot: the slots are idle once none has
    /// for the policy's idle time and none is in flight or waiting.
    ///
    /// NOTE: a lock held by a call means a call is here now: the slots read
    /// as used this instant, and eviction does not wait for the call.
    fn last_used(&self) -> u64 {
        match self.state.try_lock() {
            Ok(state) => self.clock.nanos(state.last_used),
            Err(TryLockError::Poisoned(poisoned)) => {
                self.clock.nanos(poisoned.into_inner().last_used)
            }
            Err(TryLockError::WouldBlock) => u64::MAX,
        }
    }

    fn evicted(&self) -> &AtomicBool {
        &self.evicted
    }

    /// Slots with calls in flight or waiting are kept over quiet ones.
    fn is_busy(&self, _: u64) -> bool {
        self.in_use()
    }

    /// Slots with calls in flight or waiting are not idle: evicted, they
    /// would let the next call count from zero.
    fn in_use(&self) -> bool {
        self.busy.load(Ordering::Relaxed) > 0
    }
}

// ===== impl State =====

impl State {
    fn busy(&self) -> u32 {
        let queued = u32::try_from(self.queue.len()).unwrap_or(u32::MAX);
        self.in_flight.saturating_add(queued)
    }

    /// The rejection of a call the throttle turns away at `now`, counted as
    /// a request the upstream did not accept.
    fn throttled(&mut self, now: impl FnOnce() -> u64) -> Option<Rejection> {
        let throttle = self.throttle.as_mut()?;
        let now = now();
        let probability = throttle.probability(now);
        if probability == 0.0 || self.rng.next_unit() >= probability {
            return None;
        }
        throttle.record(now, false);
        Some(Rejection::Throttled { probability })
    }

    /// What a call asking for a slot gets: turned away by the throttle (its
    /// time read with `now`, in nanoseconds, only when there is one), a free
    /// slot, a place in the queue, or neither.
    #[inline(always)]
    fn entry(
        &mut self,
        max_queued: u32,
        now: impl FnOnce() -> u64,
        room: impl FnOnce() -> Option<Duration>,
    ) -> Entry {
        let limit = self.limit.get();
        if let Some(rejection) = self.throttled(now) {
            Entry::Rejected(rejection)
        } else if self.in_flight < limit && self.queue.is_empty() {
            self.in_flight += 1;
            let learns = self.learns_from(self.in_flight, max_queued);
            Entry::Admitted {
                in_flight: self.in_flight,
                learns,
            }
        } else if self.queue.len() >= max_queued as usize {
            Entry::Rejected(Rejection::QueueFull { limit })
        } else if !self.wait_fits(room(), limit) {
            Entry::Rejected(Rejection::WaitTooLong)
        } else {
            let waiter = Arc::new(Waiter::default());
            self.queue.push_back(Arc::clone(&waiter));
            Entry::Queued(waiter)
        }
    }

    /// What the release of a call admitted with `in_flight` calls in flight
    /// learns from its outcome: an adaptive limit and the throttle learn
    /// from every call; the wait estimate of a limit with a queue counts the
    /// call's latency only while it is unknown or at least half the slots
    /// are taken.
    ///
    /// NOTE: a queue forms only once every slot is taken, so the latency that
    /// predicts its wait is the one of calls made under load; a call made
    /// while most slots are free says little of it. A release that learns
    /// nothing reads neither the outcome nor the clock.
    fn learns_from(&self, in_flight: u32, max_queued: u32) -> Learns {
        let load = matches!(self.limit, LimitState::Adaptive(_)) || self.throttle.is_some();
        let wait = max_queued > 0
            && !matches!(self.limit, LimitState::Unbounded)
            && (self.latency == 0.0 || in_flight.saturating_mul(2) >= self.limit.get());
        Learns { load, wait }
    }

    /// Whether the likely wait of a call joining the queue fits in `room`:
    /// the calls before it, and itself, each take the latency of a slot
    /// (as calls under load take it) shared among `limit`. Unknown before
    /// the first accepted call.
    fn wait_fits(&self, room: Option<Duration>, limit: u32) -> bool {
        let Some(room) = room else {
            return true;
        };
        if room.is_zero() {
            return false;
        }
        let ahead = self.queue.len() as f64 + 1.0;
        let likely = ahead * self.latency / f64::from(limit.max(1));
        likely <= super::limit::nanos_f64(room)
    }

    /// Learns from a call that ended with `signal` at `now` (its latency
    /// counted in the wait estimate when `times_wait`), read on `clock` in
    /// nanoseconds only by what keeps time in them (an adaptive limit, the
    /// throttle), and once. Returns the limit before and after, if it moved.
    fn learn(
        &mut self,
        signal: Signal,
        in_flight: u32,
        now: Instant,
        times_wait: bool,
        clock: &Clock,
    ) -> Option<(u32, u32)> {
        let mut nanos = None;
        let mut nanos = || *nanos.get_or_insert_with(|| clock.nanos(now));
        let moved = match signal {
            // NOTE: without a limit no call ever waits, so the latency,
            // which only the wait estimate and an adaptive limit use, is
            // not worked out.
            Signal::Accepted(since) if !matches!(self.limit, LimitState::Unbounded) => {
                let latency = now.saturating_duration_since(since);
                if times_wait {
                    self.sample(latency);
                }
                match &mut self.limit {
                    LimitState::Adaptive(adaptive) => {
                        adaptive.moved(|a| a.on_success(latency, in_flight, nanos()))
                    }
                    _ => None,
                }
            }
            Signal::Overload => match &mut self.limit {
                LimitState::Adaptive(adaptive) => adaptive.moved(Adaptive::on_overload),
                _ => None,
            },
            Signal::Accepted(_) | Signal::Failed | Signal::Nothing => None,
        };
        if let Some(throttle) = &mut self.throttle {
            match signal {
                Signal::Accepted(_) => throttle.record(nanos(), true),
                Signal::Overload | Signal::Failed => throttle.record(nanos(), false),
                Signal::Nothing => {}
            }
        }
        moved
    }

    /// Counts `latency` in the smoothed latency of accepted calls.
    fn sample(&mut self, latency: Duration) {
        let sample = super::limit::nanos_f64(latency);
        self.latency = if self.latency == 0.0 {
            sample
        } else {
            self.latency + (sample - self.latency) * LATENCY_SMOOTHING
        };
    }

    /// Hands free slots to the calls waiting first.
    ///
    /// NOTE: inlined, so that a call that leaves no one waiting pays no
    /// call for it.
    #[inline(always)]
    fn hand_on(&mut self) {
        let limit = self.limit.get();
        while self.in_flight < limit {
            let Some(waiter) = self.queue.pop_front() else {
                break;
            };
            self.in_flight += 1;
            waiter.set();
        }
    }
}
