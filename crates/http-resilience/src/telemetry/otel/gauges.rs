//! The gauges, read when the meter collects: a breaker's circuits and a
//! budget's tokens.

use super::{attributes as attr, Metrics};
use crate::breaker::{BreakerPolicy, CircuitState};
use crate::overload::{OverloadPolicy, OverloadState};
use crate::policy::RetryBudget;
use opentelemetry::{metrics::AsyncInstrument, KeyValue};
use std::{
    any::Any,
    borrow::Cow,
    fmt,
    sync::{Arc, Weak},
};

/// What a gauge reads, as long as its [`Observation`] is kept.
type Reader<T> = dyn Fn(&dyn AsyncInstrument<T>) + Send + Sync;

/// A gauge's readings, kept while this handle is: once it is dropped, the
/// gauge reports nothing more, and what it read (the policy, the budget) is
/// let go.
///
/// OpenTelemetry's SDK keeps a gauge's callback until its meter provider
/// shuts down, and has no way to take one back; the callback holds a weak
/// reference to what this handle keeps, so that dropping the handle is what
/// ends the readings. Keep it as long as the thing it observes: beside the
/// client, in the application's state.
///
/// See the [module docs](super) for an example.
#[must_use = "the gauge reads nothing once its `Observation` is dropped"]
pub struct Observation {
    _reader: Box<dyn Any + Send + Sync>,
}

impl fmt::Debug for Observation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Observation").finish_non_exhaustive()
    }
}

// ===== impl Metrics =====

impl Metrics {
    /// Observes the circuits of `policy`: the gauge
    /// `http_resilience.breaker.state`, one reading per circuit kept, with
    /// its `http_resilience.breaker.key`: 0 closed, 1 open, 2 half-open,
    /// 3 ramping up. An open circuit reads 1 until a call after its break
    /// makes it half-open, as [`BreakerPolicy::states`] tells it.
    ///
    /// The readings come from the circuits `policy` shares with its clones:
    /// observe the policy as it is handed to the stack, after
    /// [`with_listener`](BreakerPolicy::with_listener) and every other
    /// setter, each of which makes circuits of its own.
    pub fn observe_breaker<D>(&self, policy: &BreakerPolicy<D>) -> Observation
    where
        D: Send + Sync + 'static,
    {
        let policy = policy.clone();
        let read = move |gauge: &dyn AsyncInstrument<u64>| {
            for (key, state) in policy.states() {
                let key = KeyValue::new(attr::BREAKER_KEY, key.to_string());
                gauge.observe(state_value(state), &[key]);
            }
        };
        let reader: Arc<Reader<u64>> = Arc::new(read);
        let weak = Arc::downgrade(&reader);
        let _gauge = self
            .instruments
            .meter
            .u64_observable_gauge("http_resilience.breaker.state")
            .with_unit("{state}")
            .with_description(
                "The state of each circuit: 0 closed, 1 open, 2 half-open, 3 ramping up.",
            )
            .with_callback(move |gauge| read_if_kept(&weak, gauge))
            .build();
        Observation {
            _reader: Box::new(reader),
        }
    }

    /// Observes `budget`: the gauge `http_resilience.budget.tokens`, the
    /// tokens left (in tokens, to the thousandth), with
    /// `http_resilience.budget.name` = `name`.
    pub fn observe_budget(
        &self,
        name: impl Into<Cow<'static, str>>,
        budget: Arc<RetryBudget>,
    ) -> Observation {
        let name = KeyValue::new(attr::BUDGET_NAME, name.into());
        let read = move |gauge: &dyn AsyncInstrument<f64>| {
            let tokens = budget.tokens_milli() as f64 / 1000.0;
            gauge.observe(tokens, std::slice::from_ref(&name));
        };
        let reader: Arc<Reader<f64>> = Arc::new(read);
        let weak = Arc::downgrade(&reader);
        let _gauge = self
            .instruments
            .meter
            .f64_observable_gauge("http_resilience.budget.tokens")
            .with_unit("{token}")
            .with_description("The tokens left in a retry budget.")
            .with_callback(move |gauge| read_if_kept(&weak, gauge))
            .build();
        Observation {
            _reader: Box::new(reader),
        }
    }
}

impl Metrics {
    /// Observes the slots of `policy`, one reading per key kept, with its
    /// `http_resilience.overload.key`: the gauges
    /// `http_resilience.overload.limit` (none for a policy without a
    /// limit), `.in_flight`, `.queued` and `.rejection_probability`.
    ///
    /// As for [`observe_breaker`](Self::observe_breaker): observe the
    /// policy as it is handed to the stack, after every setter.
    pub fn observe_overload(&self, policy: &OverloadPolicy) -> Observation {
        let counts: [CountGauge; 3] = [
            ("limit", "The limit of calls in flight, per key.", |s| {
                s.limit.map(u64::from)
            }),
            ("in_flight", "The calls in flight, per key.", |s| {
                Some(u64::from(s.in_flight))
            }),
            ("queued", "The calls waiting for a slot, per key.", |s| {
                Some(u64::from(s.queued))
            }),
        ];
        let mut readers: Vec<Box<dyn Any + Send + Sync>> = Vec::new();
        for (name, description, value) in counts {
            let policy = policy.clone();
            let read = move |gauge: &dyn AsyncInstrument<u64>| {
                for (key, state) in policy.states() {
                    if let Some(value) = value(&state) {
                        gauge.observe(value, &[KeyValue::new(attr::OVERLOAD_KEY, key.to_string())]);
                    }
                }
            };
            let reader: Arc<Reader<u64>> = Arc::new(read);
            let weak = Arc::downgrade(&reader);
            let _gauge = self
                .instruments
                .meter
                .u64_observable_gauge(format!("http_resilience.overload.{name}"))
                .with_unit("{call}")
                .with_description(description)
                .with_callback(move |gauge| read_if_kept(&weak, gauge))
                .build();
            readers.push(Box::new(reader));
        }
        readers.push(Box::new(self.observe_probability(policy.clone())));
        Observation {
            _reader: Box::new(readers),
        }
    }

    /// The gauge `http_resilience.overload.rejection_probability` of
    /// `policy`'s keys, and its reader.
    fn observe_probability(&self, policy: OverloadPolicy) -> Arc<Reader<f64>> {
        let read = move |gauge: &dyn AsyncInstrument<f64>| {
            for (key, state) in policy.states() {
                let key = KeyValue::new(attr::OVERLOAD_KEY, key.to_string());
                gauge.observe(state.rejection_probability, &[key]);
            }
        };
        let reader: Arc<Reader<f64>> = Arc::new(read);
        let weak = Arc::downgrade(&reader);
        let _gauge = self
            .instruments
            .meter
            .f64_observable_gauge("http_resilience.overload.rejection_probability")
            .with_unit("1")
            .with_description("The probability that throttling turns the next call away, per key.")
            .with_callback(move |gauge| read_if_kept(&weak, gauge))
            .build();
        reader
    }
}

/// A gauge of a key's slots: its name after `http_resilience.overload.`, its
/// description, and what it reads of the state.
type CountGauge = (
    &'static str,
    &'static str,
    fn(&OverloadState) -> Option<u64>,
);

/// Reads `gauge` with the reader, if its [`Observation`] is still kept.
fn read_if_kept<T>(reader: &Weak<Reader<T>>, gauge: &dyn AsyncInstrument<T>) {
    if let Some(read) = reader.upgrade() {
        read(gauge);
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
