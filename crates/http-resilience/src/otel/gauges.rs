//! The gauges, read when the meter collects: a breaker's circuits, overload
//! control's slots and a budget's tokens. Each gauge is made once per
//! [`Metrics`], when it is first asked for, and reads every source given to
//! it since: a budget kept by an [`Observation`], or a guard's state it is
//! attached to, read for as long as the state lives.

use super::{attributes as attr, Metrics};
use crate::breaker::{self, CircuitState};
use crate::key::{Kept, UpstreamKey};
use crate::overload::{self, OverloadState};
use crate::policy::RetryBudget;
use crate::rate_limit::{self, RateLimitState};
use opentelemetry::{
    metrics::{AsyncInstrument, Meter},
    KeyValue,
};
use std::{
    any::Any,
    borrow::Cow,
    fmt,
    sync::{Arc, Mutex, OnceLock, PoisonError, Weak},
};

/// A gauge's name, unit and description.
type Spec = (&'static str, &'static str, &'static str);

const BREAKER_STATE: Spec = (
    "http_resilience.breaker.state",
    "{state}",
    "The state of each circuit: 0 closed, 1 open, 2 half-open, 3 ramping up.",
);
const BUDGET_TOKENS: Spec = (
    "http_resilience.budget.tokens",
    "{token}",
    "The tokens left in a retry budget.",
);
const OVERLOAD_LIMIT: Spec = (
    "http_resilience.overload.limit",
    "{call}",
    "The limit of calls in flight, per key.",
);
const OVERLOAD_IN_FLIGHT: Spec = (
    "http_resilience.overload.in_flight",
    "{call}",
    "The calls in flight, per key.",
);
const OVERLOAD_QUEUED: Spec = (
    "http_resilience.overload.queued",
    "{call}",
    "The calls waiting for a slot, per key.",
);
const OVERLOAD_PROBABILITY: Spec = (
    "http_resilience.overload.rejection_probability",
    "1",
    "The probability that throttling turns the next call away, per key.",
);

const RATE_LIMIT_DELAY: Spec = (
    "http_resilience.rate_limit.delay",
    "s",
    "How long a call asking now would wait for its slot, per key.",
);

/// What a gauge reads from one source at a collection: `false` once the
/// source is gone (the gauge then forgets it).
type Source<T> = Box<dyn Fn(&dyn AsyncInstrument<T>) -> bool + Send + Sync>;

/// One gauge of a [`Metrics`]: its sources, and the instrument, made on
/// first use, whose callback reads them.
pub(super) struct Gauge<T> {
    spec: Spec,
    sources: Arc<Mutex<Vec<Source<T>>>>,
    made: OnceLock<()>,
}

/// Every gauge of a [`Metrics`].
pub(super) struct Gauges {
    breaker_state: Gauge<u64>,
    budget_tokens: Gauge<f64>,
    overload_limit: Gauge<u64>,
    overload_in_flight: Gauge<u64>,
    overload_queued: Gauge<u64>,
    overload_probability: Gauge<f64>,
    rate_limit_delay: Gauge<f64>,
}

impl Gauges {
    pub(super) fn new() -> Self {
        Self {
            breaker_state: Gauge::new(BREAKER_STATE),
            budget_tokens: Gauge::new(BUDGET_TOKENS),
            overload_limit: Gauge::new(OVERLOAD_LIMIT),
            overload_in_flight: Gauge::new(OVERLOAD_IN_FLIGHT),
            overload_queued: Gauge::new(OVERLOAD_QUEUED),
            overload_probability: Gauge::new(OVERLOAD_PROBABILITY),
            rate_limit_delay: Gauge::new(RATE_LIMIT_DELAY),
        }
    }
}

// ===== impl Gauge =====

impl<T> Gauge<T> {
    fn new(spec: Spec) -> Self {
        Self {
            spec,
            sources: Arc::new(Mutex::new(Vec::new())),
            made: OnceLock::new(),
        }
    }

    /// Reads every source, forgetting those that are gone.
    fn read(sources: &Mutex<Vec<Source<T>>>, gauge: &dyn AsyncInstrument<T>) {
        let mut sources = sources.lock().unwrap_or_else(PoisonError::into_inner);
        sources.retain(|source| source(gauge));
    }

    /// Adds `source`, once the instrument is made (`make` makes it).
    fn add(&self, source: Source<T>, make: impl FnOnce(Spec, Arc<Mutex<Vec<Source<T>>>>)) {
        self.made
            .get_or_init(|| make(self.spec, Arc::clone(&self.sources)));
        let mut sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        sources.push(source);
    }
}

impl Gauge<u64> {
    /// Adds `source` to the gauge of `meter`.
    fn add_u64(&self, meter: &Meter, source: Source<u64>) {
        self.add(source, |(name, unit, description), sources| {
            let _gauge = meter
                .u64_observable_gauge(name)
                .with_unit(unit)
                .with_description(description)
                .with_callback(move |gauge| Self::read(&sources, gauge))
                .build();
        });
    }
}

impl Gauge<f64> {
    /// Adds `source` to the gauge of `meter`.
    fn add_f64(&self, meter: &Meter, source: Source<f64>) {
        self.add(source, |(name, unit, description), sources| {
            let _gauge = meter
                .f64_observable_gauge(name)
                .with_unit(unit)
                .with_description(description)
                .with_callback(move |gauge| Self::read(&sources, gauge))
                .build();
        });
    }
}

/// A source of a gauge, read while this handle is kept: the budget of a
/// policy wired with `with_metrics`, kept by the policy's listener.
#[must_use = "the gauge reads nothing once its `Observation` is dropped"]
pub(crate) struct Observation {
    _kept: Box<dyn Any + Send + Sync>,
}

impl fmt::Debug for Observation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observation").finish_non_exhaustive()
    }
}

/// `kept`, held by the [`Observation`] returned, and a weak hold on it for
/// the sources.
fn kept<K: Send + Sync + 'static>(kept: K) -> (Observation, Weak<K>) {
    let kept = Arc::new(kept);
    let weak = Arc::downgrade(&kept);
    (
        Observation {
            _kept: Box::new(kept),
        },
        weak,
    )
}

// ===== impl Metrics =====

impl Metrics {
    /// Observes `budget`: the gauge `http_resilience.budget.tokens`, the
    /// tokens left (in tokens, to the thousandth), with
    /// `http_resilience.budget.name` = `name`.
    pub(crate) fn observe_budget(
        &self,
        name: impl Into<Cow<'static, str>>,
        budget: Arc<RetryBudget>,
    ) -> Observation {
        let name = KeyValue::new(attr::BUDGET_NAME, name.into());
        let (observation, budget) = kept(budget);
        let source: Source<f64> = Box::new(move |gauge| {
            let Some(budget) = budget.upgrade() else {
                return false;
            };
            let tokens = budget.tokens_milli() as f64 / 1000.0;
            gauge.observe(tokens, std::slice::from_ref(&name));
            true
        });
        let gauges = &self.instruments.gauges;
        gauges
            .budget_tokens
            .add_f64(&self.instruments.meter, source);
        observation
    }

    /// Reads the circuits `states` gives, while it gives any, into the
    /// gauge `http_resilience.breaker.state`.
    fn read_circuits<F>(&self, states: F)
    where
        F: Fn() -> Option<Vec<(UpstreamKey, CircuitState)>> + Send + Sync + 'static,
    {
        let source: Source<u64> = Box::new(move |gauge| {
            let Some(states) = states() else {
                return false;
            };
            for (key, state) in states {
                let key = KeyValue::new(attr::BREAKER_KEY, key.to_string());
                gauge.observe(state_value(state), &[key]);
            }
            true
        });
        let gauges = &self.instruments.gauges;
        gauges
            .breaker_state
            .add_u64(&self.instruments.meter, source);
    }

    /// Reads the slots `states` gives, while it gives any, into the four
    /// gauges of overload control.
    fn read_slots<F>(&self, states: F)
    where
        F: Fn() -> Option<Vec<(UpstreamKey, OverloadState)>> + Send + Sync + 'static,
    {
        let (meter, gauges) = (&self.instruments.meter, &self.instruments.gauges);
        let states = Arc::new(states);
        let counts: [(&Gauge<u64>, SlotValue<u64>); 3] = [
            (&gauges.overload_limit, |s| s.limit.map(u64::from)),
            (&gauges.overload_in_flight, |s| Some(u64::from(s.in_flight))),
            (&gauges.overload_queued, |s| Some(u64::from(s.queued))),
        ];
        for (gauge, value) in counts {
            let states = Arc::clone(&states);
            gauge.add_u64(meter, slots_source(move || states(), value));
        }
        let probability = slots_source(move || states(), |s| Some(s.rejection_probability));
        gauges.overload_probability.add_f64(meter, probability);
    }
}

impl Metrics {
    /// Reads the buckets `states` gives, while it gives any, into the gauge
    /// `http_resilience.rate_limit.delay`.
    fn read_buckets<F>(&self, states: F)
    where
        F: Fn() -> Option<Vec<(UpstreamKey, RateLimitState)>> + Send + Sync + 'static,
    {
        let source: Source<f64> = Box::new(move |gauge| {
            let Some(states) = states() else {
                return false;
            };
            for (key, state) in states {
                let key = KeyValue::new(attr::RATE_LIMIT_KEY, key.to_string());
                gauge.observe(state.delay.as_secs_f64(), &[key]);
            }
            true
        });
        let gauges = &self.instruments.gauges;
        gauges
            .rate_limit_delay
            .add_f64(&self.instruments.meter, source);
    }
}

/// What a gauge of overload control reads of a key's state.
type SlotValue<T> = fn(&OverloadState) -> Option<T>;

/// A source reading `value` of every key's state that `states` gives.
fn slots_source<T: 'static, F>(states: F, value: SlotValue<T>) -> Source<T>
where
    F: Fn() -> Option<Vec<(UpstreamKey, OverloadState)>> + Send + Sync + 'static,
{
    Box::new(move |gauge| {
        let Some(states) = states() else {
            return false;
        };
        for (key, state) in states {
            if let Some(value) = value(&state) {
                gauge.observe(value, &[KeyValue::new(attr::OVERLOAD_KEY, key.to_string())]);
            }
        }
        true
    })
}

// ===== the guards' observer =====

impl breaker::Observer for Metrics {
    fn observe(&self, circuits: Kept<CircuitState>) {
        self.read_circuits(move || circuits.states());
    }
}

impl overload::Observer for Metrics {
    fn observe(&self, slots: Kept<OverloadState>) {
        self.read_slots(move || slots.states());
    }
}

impl rate_limit::Observer for Metrics {
    fn observe(&self, buckets: Kept<RateLimitState>) {
        self.read_buckets(move || buckets.states());
    }
}

/// The value of `state` on `http_resilience.breaker.state`.
pub(super) const fn state_value(state: CircuitState) -> u64 {
    match state {
        CircuitState::Closed => 0,
        CircuitState::Open { .. } => 1,
        CircuitState::HalfOpen => 2,
        CircuitState::Ramp { .. } => 3,
    }
}
