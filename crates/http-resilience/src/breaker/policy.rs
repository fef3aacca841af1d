//! What a breaker trips on, how long it stays open, and how it recovers.

use super::{
    circuit::{Ctx, Rules},
    events::BreakerListeners,
    registry::Registry,
    rules::{judge, Judged, Ramp, Settings},
    BreakerEvent, CircuitState,
};
use crate::key::{Kept, PerKey, Room, UpstreamKey};
use crate::policy::{AnyDecoder, Decoder, TransientDecoder};
use crate::{policy::Seeds, telemetry::Listener, InvalidSetting};
use std::{fmt, sync::Arc, time::Duration};

/// A key function of one's own.
pub(crate) use crate::key::KeyFn;

/// What every clone of a policy (and of its layer) shares: the settings,
/// the decoder and the circuits.
pub(crate) struct Shared<D> {
    /// What the circuits read: the settings, clock, jitter and listeners.
    pub(crate) rules: Rules,
    pub(crate) decoder: D,
    pub(crate) key_fn: Option<Arc<KeyFn>>,
    /// NOTE: in an `Arc` of its own, so that an observer holds the circuits
    /// weakly, whatever the decoder.
    pub(crate) registry: Arc<Registry>,
}

/// A circuit breaker's policy: what counts as a failure, when a circuit
/// trips, how long it stays open, and how it recovers.
///
/// # Defaults
///
/// | setting | default | method |
/// |---|---|---|
/// | failures in a row that trip | 5 | [`consecutive_failures`](Self::consecutive_failures) |
/// | failure ratio, window, minimum throughput | 10 %, 30 s, 100 calls (.NET's standard handler) | [`failure_ratio`](Self::failure_ratio) |
/// | break, and its cap | 5 s, 60 s | [`break_duration`](Self::break_duration) |
/// | growth of repeated breaks, jitter | x2 per trip, up to 10 % more | [`break_growth`](Self::break_growth) |
/// | probes at once when half-open, successes to close | 1, 1 | [`half_open`](Self::half_open) |
/// | a ramp after the probes: its duration and steps | off (the probes close the circuit) | [`ramp`](Self::ramp) |
/// | slow successes count as failures, from | off | [`slow_calls`](Self::slow_calls) |
/// | keys at most, idle time before eviction | 1024, 5 min | [`max_keys`](Self::max_keys) |
///
/// # What counts as a failure
///
/// The policy's [`Decoder`] judges every outcome (the breaker's own decoder,
/// which may differ from the retry's):
///
/// - [`Verdict::Retry`](crate::policy::Verdict::Retry) is a failure: a retryable status (503, and 429:
///   the upstream is shedding load) or a failure the decoder would retry;
/// - [`Verdict::Fail`](crate::policy::Verdict::Fail) on an **error** is a failure too: a timed-out attempt
///   ([`AttemptTimedOut`](crate::attempt_timeout::error::AttemptTimedOut)
///   below the breaker), a reset, a refused connection;
///   except another breaker's [`CircuitOpen`](super::error::CircuitOpen),
///   which counts for nothing;
/// - [`Verdict::Fail`](crate::policy::Verdict::Fail) on a **response** is a success: the upstream answered,
///   and a 404 is not an outage. A status that should count (500) is one the
///   breaker's decoder retries (`StatusDecoder::new([500, 503])`);
/// - [`Verdict::Accept`](crate::policy::Verdict::Accept) is a success;
/// - with [`slow_calls`](Self::slow_calls), a success that took at least the
///   threshold, from the call's admission to its outcome (the response head;
///   the body is not timed), is a failure, in the count of failures in a row
///   and in the ratio's window alike, and for a probe or a call of the ramp
///   too; its verdict, as an [`Opened`](super::BreakerEvent::Opened) event
///   tells it, is `Verdict::fail("slow call")`;
/// - a call whose future is dropped before its outcome counts for nothing
///   (a probe's place is given back).
///
/// # Tripping, breaking, recovering
///
/// A closed circuit trips when the failures in a row reach
/// [`consecutive_failures`](Self::consecutive_failures), or when, over the
/// sliding window (ten buckets of a tenth of it each), at least the minimum
/// throughput of calls ended and the share of failures reached the ratio.
/// It then stays open for the break: the configured one on the first trip,
/// multiplied on each trip that follows before the circuit closes, plus up to
/// the jitter's share more, at most the cap; and at least what the tripping
/// outcome asked for ([`Verdict::server_delay`](crate::policy::Verdict::server_delay): `Retry-After`, gRPC
/// pushback), capped too. Once it ends, the next call makes the circuit
/// half-open and goes as a probe; at most [`half_open`](Self::half_open)'s
/// `probes` go at once, the others are turned away. After `successes`
/// successful probes the circuit closes (and the trips are forgotten); any
/// failed probe opens it again, for a longer break.
///
/// With a [`ramp`](Self::ramp), the successful probes do not close the
/// circuit at once: it ramps up, letting a growing share of calls through
/// ([`CircuitState::Ramp`]) and turning the others away, and closes at the
/// ramp's end. Any failure during the ramp opens it again, for a longer
/// break, as a failed probe does.
///
/// # Clone
///
/// Cloning a policy shares its circuits (behind an `Arc`): every clone of
/// the policy and of its layer reads and writes the same circuits, and
/// [`state`](Self::state) on any clone reads them. A setter makes a policy
/// with circuits of its own: set everything before handing the policy out.
///
/// # Example
///
/// ```
/// use http_resilience::key::PerKey;
/// use http_resilience::{breaker::BreakerPolicy, policy::TransientDecoder};
/// use std::time::Duration;
///
/// let policy = BreakerPolicy::new(TransientDecoder::new())
///     .consecutive_failures(3)?
///     .break_duration(Duration::from_secs(2), Duration::from_secs(30))?
///     .half_open(2, 2)?
///     // Then a quarter of the calls for 5 s, half, three quarters, all.
///     .ramp(Duration::from_secs(20), 4)?
///     .slow_calls(Duration::from_secs(2))?;
/// assert!(policy.states().is_empty());
/// assert!(BreakerPolicy::default().consecutive_failures(0).is_err());
/// let refused = BreakerPolicy::default().ramp(Duration::ZERO, 4).unwrap_err();
/// assert_eq!(refused.field(), "ramp_duration");
/// # Ok::<(), http_resilience::BoxError>(())
/// ```
pub struct BreakerPolicy<D> {
    pub(crate) shared: Arc<Shared<D>>,
}

// ===== impl BreakerPolicy =====

impl<D> BreakerPolicy<D> {
    /// A policy that judges outcomes with `decoder`, with the defaults.
    pub fn new(decoder: D) -> Self {
        let listeners = BreakerListeners::none();
        Self::from_parts(
            decoder,
            Settings::default(),
            None,
            listeners,
            Seeds::random(),
        )
    }

    fn from_parts(
        decoder: D,
        settings: Settings,
        key_fn: Option<Arc<KeyFn>>,
        listener: BreakerListeners,
        seeds: Seeds,
    ) -> Self {
        Self::from_shared(Shared {
            rules: Rules::new(settings, seeds, listener),
            decoder,
            key_fn,
            registry: Arc::default(),
        })
    }

    /// The policy of `shared`, whose observer, carried from the policy it
    /// was made from, reads its new circuits too.
    fn from_shared(shared: Shared<D>) -> Self {
        if let Some(observer) = shared.rules.listeners.observer() {
            observer.observe(circuits(&shared));
        }
        Self {
            shared: Arc::new(shared),
        }
    }

    /// Attaches `observer` to this policy's circuits, in place: every clone
    /// of the policy and every policy made from it from now on tells it of
    /// their events. Whether it was attached (not when one already is).
    #[cfg(feature = "otel")]
    pub(crate) fn attach(&self, observer: Arc<dyn super::events::Observer>) -> bool {
        let shared = &*self.shared;
        if !shared.rules.listeners.attach(Arc::clone(&observer)) {
            return false;
        }
        observer.observe(circuits(shared));
        true
    }

    /// The decoder.
    pub(crate) fn decoder(&self) -> &D {
        &self.shared.decoder
    }
}

impl<D: Clone> BreakerPolicy<D> {
    /// The same policy with `change` made to its settings, once they pass
    /// `check`, and circuits of its own.
    fn with(
        self,
        change: impl FnOnce(&mut Settings),
        check: impl FnOnce(&Settings) -> Result<(), InvalidSetting>,
    ) -> Result<Self, InvalidSetting> {
        let mut settings = *self.shared.rules.settings();
        change(&mut settings);
        check(&settings)?;
        Ok(self.rebuilt(settings))
    }

    /// The parts of this policy with `settings`, and circuits of their own.
    fn rebuilt(&self, settings: Settings) -> Self {
        Self::from_shared(self.fresh(settings))
    }

    fn fresh(&self, settings: Settings) -> Shared<D> {
        let shared = &*self.shared;
        Shared {
            rules: Rules::new(
                settings,
                shared.rules.seeds.clone(),
                shared.rules.listeners.carried(None),
            ),
            decoder: shared.decoder.clone(),
            key_fn: shared.key_fn.clone(),
            registry: Arc::default(),
        }
    }

    /// Trips after `count` failures in a row.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] when `count` is zero.
    pub fn consecutive_failures(self, count: u32) -> Result<Self, InvalidSetting> {
        self.with(
            |s| s.consecutive = count,
            |_| at_least_one("consecutive_failures", u64::from(count)),
        )
    }

    /// Trips when, over the last `window`, at least `min_throughput` calls
    /// ended and a share of at least `ratio` of them failed.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] when `ratio` is not in `(0, 1]`, `window` is under
    /// 10 ms (a bucket is a tenth of it) or `min_throughput` is zero.
    pub fn failure_ratio(
        self,
        ratio: f64,
        window: Duration,
        min_throughput: u32,
    ) -> Result<Self, InvalidSetting> {
        let check = |_: &Settings| {
            if !(ratio > 0.0 && ratio <= 1.0) {
                let err = InvalidSetting::new("failure_ratio", "must be in (0, 1]");
                return Err(err.with_value(ratio.to_string()));
            }
            if window < Duration::from_millis(10) {
                let err = InvalidSetting::new("sampling_window", "must be at least 10ms");
                return Err(err.with_value(format!("{window:?}")));
            }
            at_least_one("minimum_throughput", u64::from(min_throughput))
        };
        self.with(
            |s| {
                s.ratio = ratio;
                s.window = window;
                s.min_throughput = min_throughput;
            },
            check,
        )
    }

    /// Opens the circuit for `base` on a first trip; repeated trips and a
    /// server's delay lengthen it up to `max`.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] when `base` is zero or `max` is below it.
    pub fn break_duration(self, base: Duration, max: Duration) -> Result<Self, InvalidSetting> {
        let check = |_: &Settings| {
            if base.is_zero() {
                let err = InvalidSetting::new("break_duration", "must be above zero");
                return Err(err.with_value("0s"));
            }
            if max < base {
                let err = InvalidSetting::new(
                    "max_break_duration",
                    "must be at least the break duration",
                );
                return Err(err.with_value(format!("{max:?}")));
            }
            Ok(())
        };
        self.with(
            |s| {
                s.break_base = base;
                s.break_max = max;
            },
            check,
        )
    }

    /// Multiplies the break by `multiplier` on each trip after the first
    /// (until the circuit closes), and adds up to `jitter` times it more, at
    /// random, so that clients part ways.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] when `multiplier` is below 1 (or not finite) or
    /// `jitter` is not in `[0, 1]`.
    pub fn break_growth(self, multiplier: f64, jitter: f64) -> Result<Self, InvalidSetting> {
        let check = |_: &Settings| {
            if !(multiplier.is_finite() && multiplier >= 1.0) {
                let err = InvalidSetting::new("break_multiplier", "must be at least 1.0");
                return Err(err.with_value(multiplier.to_string()));
            }
            if !(0.0..=1.0).contains(&jitter) {
                let err = InvalidSetting::new("break_jitter", "must be in [0, 1]");
                return Err(err.with_value(jitter.to_string()));
            }
            Ok(())
        };
        self.with(
            |s| {
                s.multiplier = multiplier;
                s.jitter = jitter;
            },
            check,
        )
    }

    /// When half-open, lets at most `probes` calls through at once, and
    /// closes after `successes` of them succeeded.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] when either is zero.
    pub fn half_open(self, probes: u32, successes: u32) -> Result<Self, InvalidSetting> {
        self.with(
            |s| {
                s.probes = probes;
                s.successes = successes;
            },
            |_| {
                at_least_one("half_open_probes", u64::from(probes))?;
                at_least_one("half_open_successes", u64::from(successes))
            },
        )
    }

    /// After the probes succeeded, ramps up over `duration` before closing:
    /// in `steps` steps of equal length, step `k` (from 1) lets `k` in
    /// `steps` calls through (4 steps: a quarter, a half, three quarters,
    /// then every call), and turns the others away with
    /// [`CircuitOpen`](super::error::CircuitOpen). The share is counted,
    /// not drawn: the first call of a step goes, then the calls that bring
    /// the admitted ones up to the share (with a quarter, one in four). The
    /// last step lets every call through, still on trial. The first call at
    /// or after the ramp's end closes the circuit; any failure during the
    /// ramp opens it again, for a longer break. Off by default: the probes
    /// close the circuit.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] when `duration` or `steps` is zero.
    pub fn ramp(self, duration: Duration, steps: u32) -> Result<Self, InvalidSetting> {
        self.with(
            |s| s.ramp = Some(Ramp { duration, steps }),
            |_| {
                if duration.is_zero() {
                    let err = InvalidSetting::new("ramp_duration", "must be above zero");
                    return Err(err.with_value("0s"));
                }
                at_least_one("ramp_steps", u64::from(steps))
            },
        )
    }

    /// Counts a call that would be a success as a failure when it took at
    /// least `threshold`, from its admission to its outcome: a slow upstream
    /// trips the circuit as a failing one does. Off by default: no call's
    /// start is then read from the clock; with it, admitting a call reads
    /// the clock once more, on the closed path too.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] when `threshold` is zero.
    pub fn slow_calls(self, threshold: Duration) -> Result<Self, InvalidSetting> {
        self.with(
            |s| s.slow = Some(threshold),
            |_| {
                if threshold.is_zero() {
                    let err = InvalidSetting::new("slow_call_threshold", "must be above zero");
                    return Err(err.with_value("0s"));
                }
                Ok(())
            },
        )
    }

    /// Tells `listener` of every [`BreakerEvent`]; a
    /// closure `|event: &BreakerEvent<'_>| ...` is one.
    #[must_use]
    pub fn with_listener(self, listener: impl for<'a> Listener<BreakerEvent<'a>>) -> Self {
        let mut next = self.fresh(*self.shared.rules.settings());
        next.rules.listeners = (self.shared.rules.listeners).carried(Some(Arc::new(listener)));
        Self::from_shared(next)
    }

    /// The same policy judging with `decoder`, and circuits of its own.
    pub fn with_decoder<D2>(self, decoder: D2) -> BreakerPolicy<D2> {
        let shared = &*self.shared;
        BreakerPolicy::from_parts(
            decoder,
            *shared.rules.settings(),
            shared.key_fn.clone(),
            shared.rules.listeners.carried(None),
            shared.rules.seeds.clone(),
        )
    }

    /// The same policy with its decoder turned into the run-time choice
    /// [`AnyDecoder`], and circuits of its own.
    pub fn erase(self) -> BreakerPolicy<AnyDecoder>
    where
        D: Into<AnyDecoder>,
    {
        let decoder = self.shared.decoder.clone().into();
        self.with_decoder(decoder)
    }

    /// Draws the jitter of the breaks from `seed`: the same breaks from run
    /// to run, for tests.
    #[must_use]
    pub fn with_seed(self, seed: u64) -> Self {
        let mut next = self.fresh(*self.shared.rules.settings());
        next.rules.seeds = Seeds::fixed(seed);
        Self::from_shared(next)
    }
}

impl<D: Clone> PerKey for BreakerPolicy<D> {
    type State = CircuitState;

    /// Keys the circuits by `key` instead of the request's authority: per
    /// route, per tenant. It sees the request's URI and headers.
    ///
    /// The key it makes is built for every call (an allocation); the
    /// authority key is not.
    fn with_key<F>(self, key: F) -> Self
    where
        F: Fn(&http::Uri, &http::HeaderMap) -> UpstreamKey + Send + Sync + 'static,
    {
        let mut next = self.fresh(*self.shared.rules.settings());
        next.key_fn = Some(Arc::new(key));
        Self::from_shared(next)
    }

    /// Keeps at most `max` circuits. A new key beyond it makes room by
    /// sampling (an approximate LRU, as Redis's): it examines the next 16
    /// circuits of a clock hand that sweeps them all in turn, and evicts
    /// those among them with no outcome for `idle`, or, if none is, the one
    /// used least recently among them, a closed one before any other.
    ///
    /// What holds whatever `max`: no more than `max` circuits are kept; a
    /// new key costs the same (it examines 16 circuits, never all of them);
    /// and a circuit that is not closed, with an outcome within `idle`, goes
    /// only when the 15 examined with it are not closed either. The circuit that goes is the least recently
    /// used of those examined, not always of all.
    ///
    /// # Errors
    ///
    /// [`InvalidSetting`] when `max` or `idle` is zero.
    fn max_keys(self, max: usize, idle: Duration) -> Result<Self, InvalidSetting> {
        self.with(
            |s| {
                s.max_keys = max;
                s.idle = idle;
            },
            |_| Room::check(max, idle),
        )
    }

    /// The state of the circuit of `key`, if one is kept.
    fn state(&self, key: &UpstreamKey) -> Option<CircuitState> {
        let shared = &*self.shared;
        shared
            .registry
            .find(shared.registry.hash(key.as_ref()), key.as_ref())
            .map(|circuit| circuit.state(shared.rules.clock.base()))
    }

    /// The state of every circuit kept, for a health endpoint.
    fn states(&self) -> Vec<(UpstreamKey, CircuitState)> {
        self.shared.registry.states(self.shared.rules.clock.base())
    }
}

impl Default for BreakerPolicy<TransientDecoder> {
    /// The defaults, judging with [`TransientDecoder`].
    fn default() -> Self {
        Self::new(TransientDecoder::new())
    }
}

impl<D> Clone for BreakerPolicy<D> {
    fn clone(&self) -> Self {
        Self {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl<D: fmt::Debug> fmt::Debug for BreakerPolicy<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shared = &*self.shared;
        f.debug_struct("BreakerPolicy")
            .field("decoder", &shared.decoder)
            .field("settings", &self.settings())
            .field("custom_key", &shared.key_fn.is_some())
            .field("listener", &shared.rules.listeners.given().is_some())
            .field("keys", &shared.registry.len())
            .finish()
    }
}

impl<D> Shared<D> {
    /// What the circuits of this policy read.
    pub(crate) fn ctx(&self) -> Ctx<'_> {
        &self.rules
    }

    /// What the circuit makes of `outcome`.
    pub(crate) fn judge<T, E>(&self, outcome: &Result<http::Response<T>, E>) -> Judged
    where
        D: Decoder<T, E>,
    {
        judge(self.decoder.decode(outcome), outcome.is_err())
    }
}

fn at_least_one(field: &str, value: u64) -> Result<(), InvalidSetting> {
    if value == 0 {
        Err(InvalidSetting::new(field, "must be at least 1").with_value("0"))
    } else {
        Ok(())
    }
}

/// The circuits of `shared`, read on its clock, for an observer.
fn circuits<D>(shared: &Shared<D>) -> Kept<CircuitState> {
    let base = shared.rules.clock.base();
    Kept::of(&shared.registry, move |registry| registry.states(base))
}
