//! One circuit: its state read from atomics, its changes made under a lock.

mod ramp;

use self::ramp::{Admission, Ramping};
use super::{
    error::CircuitOpen,
    events::{emit, heard, BreakerEvent, BreakerListener, BreakerListeners, TripReason},
    rules::{judge_timed, Judged, Ramp, Settings},
    window::{Window, BUCKETS},
    CircuitState,
};
use crate::key::{Clock, UpstreamKey};
use crate::limits;
use crate::policy::{Seeds, Verdict};
use std::{
    sync::{
        atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering},
        Mutex, MutexGuard, PoisonError,
    },
    time::Duration,
};
use tokio::time::Instant;

const CLOSED: u64 = 0;
const OPEN: u64 = 1;
const HALF_OPEN: u64 = 2;
const RAMP: u64 = 3;

/// A state word: the generation (bumped on every change of state) and the
/// phase, in one atomic, so that one load says both.
const fn word(generation: u64, phase: u64) -> u64 {
    (generation << 2) | phase
}

const fn phase(word: u64) -> u64 {
    word & 3
}

const fn next(word: u64, phase: u64) -> u64 {
    ((word >> 2).wrapping_add(1) << 2) | phase
}

/// What the circuits of one policy read: its settings, clock base, jitter
/// and listeners, which every clone of the policy shares.
pub(crate) struct Rules {
    /// NOTE: kept as made, for `bucket` is worked out from it.
    settings: Settings,
    /// The instant the circuits count their time from.
    pub(crate) clock: Clock,
    pub(crate) seeds: Seeds,
    pub(crate) listeners: BreakerListeners,
    /// The length of one of the window's buckets, in nanoseconds (at least
    /// one).
    bucket: u64,
}

/// The rules a circuit is read and changed by.
///
/// NOTE: one pointer to what the policy keeps, so that handing it to a
/// circuit builds nothing on a call's path.
pub(crate) type Ctx<'a> = &'a Rules;

impl Rules {
    /// The rules of `settings`, on a clock that starts now.
    pub(crate) fn new(settings: Settings, seeds: Seeds, listeners: BreakerListeners) -> Self {
        Self {
            settings,
            clock: Clock::start(),
            seeds,
            listeners,
            bucket: (nanos(settings.window) / BUCKETS).max(1),
        }
    }

    /// The settings, as the policy was made with them.
    pub(crate) const fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The listener to tell of an event, if anyone listens.
    ///
    /// NOTE: asked only when there is an event to tell, so that a call that
    /// changes nothing never asks.
    fn listener(&self) -> Option<&BreakerListener> {
        heard(&self.listeners)
    }

    /// `now` in nanoseconds since the base.
    pub(crate) fn nanos(&self, now: Instant) -> u64 {
        self.clock.nanos(now)
    }
}

pub(crate) use crate::key::nanos;

/// The circuit of one key.
///
/// NOTE: a closed circuit's call reads `state` once to be admitted and, at
/// its outcome, updates `consecutive`, one bucket of `window` and
/// `last_used`: atomics only. `recovery` is locked only to change state
/// (trip, half-open, ramp, close), to admit a call while not closed, for a
/// probe's outcome and to read a ramp's share; never across an await.
pub(crate) struct Circuit {
    key: UpstreamKey,
    state: AtomicU64,
    consecutive: AtomicU32,
    window: Window,
    /// While open: the end of the break, in nanoseconds since the base.
    open_until: AtomicU64,
    /// The last call or outcome, in nanoseconds since the base.
    last_used: AtomicU64,
    evicted: AtomicBool,
    recovery: Mutex<Recovery>,
}

/// What only changes of state read and write.
#[derive(Debug, Default)]
struct Recovery {
    /// Trips since the circuit last closed.
    trips: u32,
    /// Probes in flight while half-open.
    in_flight: u32,
    /// Probes that succeeded while half-open.
    successes: u32,
    /// While ramping up: the ramp and the calls of its step.
    ramp: Ramping,
}

/// A call's place in a circuit: admitted while closed, as a probe, or
/// during the ramp. It ends in one of two ways, each given the circuit it
/// was admitted by: its outcome goes back through [`Ticket::settle`], or,
/// with none to count, [`Ticket::release`] gives a probe's place back.
///
/// NOTE: the ticket does not hold its circuit, whose holder (a call's pass)
/// already does; that holder releases a ticket it drops unsettled.
#[must_use = "a ticket ends in `settle` or `release`, or a probe's place is lost"]
pub(crate) struct Ticket {
    word: u64,
    /// The admission, kept only when slow calls count.
    started: Option<Instant>,
}

// ===== impl Circuit =====

impl Circuit {
    pub(crate) fn new(key: UpstreamKey, now: u64) -> Self {
        Self {
            key,
            state: AtomicU64::new(word(0, CLOSED)),
            consecutive: AtomicU32::new(0),
            window: Window::default(),
            open_until: AtomicU64::new(0),
            last_used: AtomicU64::new(now),
            evicted: AtomicBool::new(false),
            recovery: Mutex::new(Recovery::default()),
        }
    }

    pub(crate) fn key(&self) -> &UpstreamKey {
        &self.key
    }

    /// Set once the circuit is evicted from its map.
    pub(crate) const fn evicted(&self) -> &AtomicBool {
        &self.evicted
    }

    pub(crate) fn last_used(&self) -> u64 {
        self.last_used.load(Ordering::Relaxed)
    }

    pub(crate) fn is_closed(&self) -> bool {
        phase(self.state.load(Ordering::Acquire)) == CLOSED
    }

    fn lock(&self) -> MutexGuard<'_, Recovery> {
        self.recovery.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The state, for a readout.
    pub(crate) fn state(&self, base: Instant) -> CircuitState {
        match phase(self.state.load(Ordering::Acquire)) {
            CLOSED => CircuitState::Closed,
            HALF_OPEN => CircuitState::HalfOpen,
            RAMP => self.ramp_state(base),
            _ => CircuitState::Open {
                until: base + Duration::from_nanos(self.open_until.load(Ordering::Acquire)),
            },
        }
    }

    /// The state of a circuit that was ramping up, read under the lock.
    fn ramp_state(&self, base: Instant) -> CircuitState {
        let recovery = self.lock();
        if phase(self.state.load(Ordering::Acquire)) != RAMP {
            drop(recovery);
            return self.state(base);
        }
        let now = Instant::now().saturating_duration_since(base);
        let (admitted, of) = recovery.ramp.share_at(nanos(now));
        CircuitState::Ramp {
            admitted,
            of,
            until: base + Duration::from_nanos(recovery.ramp.end()),
        }
    }

    /// Admits a call, or turns it away while open (or half-open with every
    /// probe out, or ramping up beyond the share).
    #[inline]
    pub(crate) fn admit(&self, ctx: Ctx<'_>) -> Result<Ticket, CircuitOpen> {
        let word = self.state.load(Ordering::Acquire);
        if phase(word) == CLOSED {
            // NOTE: the clock is read for the call's start only when slow
            // calls count.
            let started = ctx.settings.slow.map(|_| Instant::now());
            return Ok(Ticket { word, started });
        }
        self.admit_slow(ctx)
    }

    /// [`admit`](Self::admit) for a circuit that was not closed: the end of
    /// a break makes it half-open, the end of a ramp closes it, a probe's
    /// place or a share of the ramp is taken, or the call is turned away.
    fn admit_slow(&self, ctx: Ctx<'_>) -> Result<Ticket, CircuitOpen> {
        let clock = Instant::now();
        let now = ctx.nanos(clock);
        self.last_used.store(now, Ordering::Relaxed);
        let (admitted, change) = self.admit_locked(ctx, now);
        if let Some(change) = change {
            emit(ctx.listener(), &change);
        }
        match admitted {
            Ok(word) => {
                let started = ctx.settings.slow.map(|_| clock);
                Ok(Ticket { word, started })
            }
            Err(retry_at) => Err(self.reject(ctx, retry_at)),
        }
    }

    /// Under the lock, what [`admit_slow`](Self::admit_slow) decides: the
    /// state word the call goes in, or the time (since the base) it may
    /// come back; and the change of state it made, if any.
    fn admit_locked(&self, ctx: Ctx<'_>, now: u64) -> (Result<u64, u64>, Option<BreakerEvent<'_>>) {
        let mut recovery = self.lock();
        let word = self.state.load(Ordering::Acquire);
        let until = self.open_until.load(Ordering::Acquire);
        match phase(word) {
            CLOSED => (Ok(word), None),
            OPEN if now < until => (Err(until), None),
            OPEN => {
                let half = next(word, HALF_OPEN);
                self.state.store(half, Ordering::Release);
                *recovery = Recovery {
                    trips: recovery.trips,
                    in_flight: 1,
                    ..Recovery::default()
                };
                (Ok(half), Some(BreakerEvent::HalfOpen { key: &self.key }))
            }
            HALF_OPEN if recovery.in_flight < ctx.settings.probes => {
                recovery.in_flight += 1;
                (Ok(word), None)
            }
            HALF_OPEN => (Err(until), None),
            _ => match recovery.ramp.admit(now) {
                Admission::Admit => (Ok(word), None),
                Admission::Reject { retry_at } => (Err(retry_at), None),
                Admission::Over => {
                    let closed = self.close(&mut recovery, word);
                    (Ok(closed), Some(BreakerEvent::Closed { key: &self.key }))
                }
            },
        }
    }

    /// The error for a call turned away, which may come back at `retry_at`
    /// (since the base), told.
    fn reject(&self, ctx: Ctx<'_>, retry_at: u64) -> CircuitOpen {
        let until = ctx.clock.base() + Duration::from_nanos(retry_at);
        emit(
            ctx.listener(),
            &BreakerEvent::Rejected {
                key: &self.key,
                retry_at: until,
            },
        );
        CircuitOpen::new(self.key.clone(), until)
    }

    /// Counts the outcome, at `now`, of a call admitted while closed (in
    /// state `word`).
    fn closed_outcome(&self, ctx: Ctx<'_>, word: u64, judged: Judged, now: Instant) {
        // NOTE: a call admitted before the circuit changed state tells
        // nothing about the circuit as it is now.
        if judged == Judged::Ignored || self.state.load(Ordering::Acquire) != word {
            return;
        }
        let at = ctx.nanos(now);
        self.last_used.store(at, Ordering::Relaxed);
        let bucket = ctx.bucket;
        let verdict = match judged {
            Judged::Failure(verdict) => verdict,
            _ => {
                self.consecutive.store(0, Ordering::Relaxed);
                self.window.record(at / bucket, false);
                return;
            }
        };
        let count = self
            .consecutive
            .fetch_add(1, Ordering::AcqRel)
            .saturating_add(1);
        // NOTE: only a failure can trip the circuit, so only a failure reads
        // the window's tally.
        self.window.record(at / bucket, true);
        let tally = self.window.tally(at / bucket);
        let settings = ctx.settings;
        let why = if count >= settings.consecutive {
            TripReason::ConsecutiveFailures { count }
        } else if tally.calls >= settings.min_throughput
            && f64::from(tally.failures) >= settings.ratio * f64::from(tally.calls)
        {
            TripReason::FailureRatio {
                failures: tally.failures,
                calls: tally.calls,
            }
        } else {
            return;
        };
        self.trip(ctx, word, why, verdict, now);
    }

    /// Opens the circuit, if it is still in state `word`, for a break that
    /// grows with its trips and lasts at least what `verdict` asked for.
    fn trip(&self, ctx: Ctx<'_>, word: u64, why: TripReason, verdict: Verdict, now: Instant) {
        let (trips, duration) = {
            let mut recovery = self.lock();
            if self.state.load(Ordering::Acquire) != word {
                return;
            }
            let trips = recovery.trips.saturating_add(1);
            *recovery = Recovery {
                trips,
                ..Recovery::default()
            };
            let duration = break_duration(ctx, trips, verdict.server_delay());
            let until = ctx.nanos(now).saturating_add(nanos(duration));
            self.open_until.store(until, Ordering::Release);
            self.consecutive.store(0, Ordering::Relaxed);
            self.window.clear();
            self.state.store(next(word, OPEN), Ordering::Release);
            (trips, duration)
        };
        emit(
            ctx.listener(),
            &BreakerEvent::Opened {
                key: &self.key,
                why,
                last: verdict,
                duration,
                trips,
            },
        );
    }

    /// Counts the outcome, at `now`, of a probe admitted in state `word`: a
    /// failure opens the circuit again, enough successes close it (or start
    /// the ramp).
    fn probe_outcome(&self, ctx: Ctx<'_>, word: u64, judged: Judged, now: Instant) {
        match judged {
            Judged::Failure(verdict) => {
                let why = TripReason::ProbeFailed;
                return self.trip(ctx, word, why, verdict, now);
            }
            Judged::Ignored => return self.release(word),
            Judged::Success => {}
        }
        let change = {
            let mut recovery = self.lock();
            if self.state.load(Ordering::Acquire) != word {
                return;
            }
            recovery.in_flight = recovery.in_flight.saturating_sub(1);
            recovery.successes += 1;
            if recovery.successes < ctx.settings.successes {
                return;
            }
            match ctx.settings.ramp {
                Some(ramp) => self.ramp_up(&mut recovery, word, ramp, ctx.nanos(now)),
                None => {
                    self.close(&mut recovery, word);
                    BreakerEvent::Closed { key: &self.key }
                }
            }
        };
        emit(ctx.listener(), &change);
    }

    /// Starts the ramp at `now` (since the base), from state `word`; the
    /// trips are kept, for the break should a call of the ramp fail.
    fn ramp_up(
        &self,
        recovery: &mut Recovery,
        word: u64,
        ramp: Ramp,
        now: u64,
    ) -> BreakerEvent<'_> {
        *recovery = Recovery {
            trips: recovery.trips,
            ramp: Ramping::new(now, ramp),
            ..Recovery::default()
        };
        self.state.store(next(word, RAMP), Ordering::Release);
        BreakerEvent::RampingUp {
            key: &self.key,
            duration: ramp.duration,
            steps: ramp.steps,
        }
    }

    /// Closes the circuit from state `word`, forgetting its trips and
    /// counts; returns the new state word.
    fn close(&self, recovery: &mut Recovery, word: u64) -> u64 {
        *recovery = Recovery::default();
        self.consecutive.store(0, Ordering::Relaxed);
        self.window.clear();
        let closed = next(word, CLOSED);
        self.state.store(closed, Ordering::Release);
        closed
    }

    /// Counts the outcome, at `now`, of a call admitted during the ramp in
    /// state `word`: a failure opens the circuit again; a success tells
    /// nothing the ramp's clock does not.
    fn ramp_outcome(&self, ctx: Ctx<'_>, word: u64, judged: Judged, now: Instant) {
        if let Judged::Failure(verdict) = judged {
            self.trip(ctx, word, TripReason::RampFailed, verdict, now);
        }
    }

    /// Gives back the place of a probe admitted in state `word` that ended
    /// with no outcome to count.
    fn release(&self, word: u64) {
        let mut recovery = self.lock();
        if self.state.load(Ordering::Acquire) == word {
            recovery.in_flight = recovery.in_flight.saturating_sub(1);
        }
    }

    /// The probes in flight (for the tests' invariants).
    #[cfg(test)]
    pub(crate) fn probes_in_flight(&self) -> u32 {
        self.lock().in_flight
    }

    /// The state word (for the tests' invariants).
    #[cfg(test)]
    pub(crate) fn word(&self) -> u64 {
        self.state.load(Ordering::Acquire)
    }
}

/// The break after `trips` trips: the base, grown and jittered, at most the
/// cap; at least the `server`'s delay, capped too.
fn break_duration(ctx: Ctx<'_>, trips: u32, server: Option<Duration>) -> Duration {
    let settings = ctx.settings;
    let max = settings.break_max;
    let mut grown = limits::grown(settings.break_base, settings.multiplier, trips, max);
    if settings.jitter > 0.0 {
        let factor = 1.0 + settings.jitter * ctx.seeds.next_rng().next_unit();
        grown = limits::scale(grown, factor, max);
    }
    match server {
        Some(asked) => grown.max(limits::capped(asked, max)),
        None => grown,
    }
}

impl std::fmt::Debug for Circuit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Circuit")
            .field("key", &self.key)
            .field("phase", &phase(self.state.load(Ordering::Relaxed)))
            .finish_non_exhaustive()
    }
}

// ===== impl Ticket =====

impl Ticket {
    /// Counts the call's outcome in `circuit`, the one that admitted it,
    /// judged (and timed, when slow calls count).
    pub(crate) fn settle(self, circuit: &Circuit, ctx: Ctx<'_>, judged: Judged) {
        let now = Instant::now();
        let judged = match (self.started, ctx.settings.slow) {
            (Some(started), Some(threshold)) => {
                judge_timed(judged, now.saturating_duration_since(started), threshold)
            }
            _ => judged,
        };
        let word = self.word;
        match phase(word) {
            CLOSED => circuit.closed_outcome(ctx, word, judged, now),
            HALF_OPEN => circuit.probe_outcome(ctx, word, judged, now),
            _ => circuit.ramp_outcome(ctx, word, judged, now),
        }
    }

    /// Ends the call in `circuit`, the one that admitted it, with no outcome
    /// to count: a call dropped before its outcome counts for nothing, but a
    /// probe's place must come back, or the circuit would stay half-open
    /// with no place left.
    pub(crate) fn release(self, circuit: &Circuit) {
        if phase(self.word) == HALF_OPEN {
            circuit.release(self.word);
        }
    }

    /// Whether the call went as a probe of `circuit` (the one that admitted
    /// it) as it is now.
    #[cfg(test)]
    pub(crate) fn is_current_probe(&self, circuit: &Circuit) -> bool {
        phase(self.word) == HALF_OPEN && circuit.word() == self.word
    }

    /// Whether the call went during the ramp of `circuit` (the one that
    /// admitted it) as it is now.
    #[cfg(test)]
    pub(crate) fn is_current_ramp(&self, circuit: &Circuit) -> bool {
        phase(self.word) == RAMP && circuit.word() == self.word
    }

    /// When the call was admitted, if kept.
    #[cfg(test)]
    pub(crate) fn started(&self) -> Option<Instant> {
        self.started
    }
}
