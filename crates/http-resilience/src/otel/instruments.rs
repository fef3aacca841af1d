//! The instruments, made once per [`Metrics`](super::Metrics), and what each
//! records.

use super::{attributes as attr, gauges::Gauges};
use crate::breaker::BreakerEvent;
use crate::overload::OverloadEvent;
use crate::policy::{CallContext, RetryEvent};
use crate::rate_limit::RateLimitEvent;
use crate::{FailureKind, Stop};
use opentelemetry::{
    metrics::{Counter, Histogram, Meter},
    KeyValue,
};

/// The bucket boundaries, in seconds, that OpenTelemetry's HTTP semantic
/// conventions advise for `http.client.request.duration`; every histogram of
/// seconds here uses them.
pub(super) const SECONDS_BOUNDARIES: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
];

/// The bucket boundaries of the attempts per call: one bucket per count up
/// to gRPC's most (5), then up to 10.
pub(super) const ATTEMPT_BOUNDARIES: [f64; 6] = [1.0, 2.0, 3.0, 4.0, 5.0, 10.0];

/// An instrument's name, unit and description.
#[derive(Debug, Clone, Copy)]
struct Spec(&'static str, &'static str, &'static str);

const REQUEST_DURATION: Spec = Spec(
    "http.client.request.duration",
    "s",
    "Duration of HTTP client requests: every attempt and hedged copy.",
);
const RETRIES: Spec = Spec("http_resilience.retries", "{retry}", "Retries made.");
const RETRY_DELAY: Spec = Spec(
    "http_resilience.retry.delay",
    "s",
    "The wait before each retry.",
);
const HEDGES: Spec = Spec("http_resilience.hedges", "{hedge}", "Hedged copies sent.");
const CALLS: Spec = Spec(
    "http_resilience.calls",
    "{call}",
    "Calls ended by the retry or the hedge, by why no further attempt was made.",
);
const CALL_ATTEMPTS: Spec = Spec(
    "http_resilience.call.attempts",
    "{attempt}",
    "Attempts per call, the first included.",
);
const CALL_DURATION: Spec = Spec(
    "http_resilience.call.duration",
    "s",
    "Duration of whole calls, every attempt and wait included, to the response head.",
);
const OVERRUNS: Spec = Spec(
    "http_resilience.deadline.overruns",
    "{call}",
    "Calls their deadline ended.",
);
const TRANSITIONS: Spec = Spec(
    "http_resilience.breaker.transitions",
    "{transition}",
    "Changes of state of the circuits.",
);
const REJECTIONS: Spec = Spec(
    "http_resilience.breaker.rejections",
    "{call}",
    "Calls an open circuit turned away, never sent.",
);

const OVERLOAD_REJECTIONS: Spec = Spec(
    "http_resilience.overload.rejections",
    "{call}",
    "Calls overload control turned away, never sent.",
);
const LIMIT_CHANGES: Spec = Spec(
    "http_resilience.overload.limit_changes",
    "{change}",
    "Moves of the adaptive concurrency limits.",
);

const RATE_LIMIT_REJECTIONS: Spec = Spec(
    "http_resilience.rate_limit.rejections",
    "{call}",
    "Calls the rate limit turned away, never sent.",
);
const RATE_LIMIT_PAUSES: Spec = Spec(
    "http_resilience.rate_limit.pauses",
    "{pause}",
    "Pauses of every call to a key that a server asked for.",
);
const FLEET_FALLBACKS: Spec = Spec(
    "http_resilience.rate_limit.fleet.fallbacks",
    "{fallback}",
    "Times a key of a fleet quota fell back because Redis was away or slow.",
);
const FLEET_LEASES: Spec = Spec(
    "http_resilience.rate_limit.fleet.leases",
    "{lease}",
    "Leases of a fleet quota's tokens: one Redis round trip each.",
);

/// Every instrument a [`Metrics`](super::Metrics) records to, and the meter,
/// for the gauges made on demand.
pub(super) struct Instruments {
    pub(super) meter: Meter,
    pub(super) gauges: Gauges,
    request_duration: Histogram<f64>,
    retries: Counter<u64>,
    retry_delay: Histogram<f64>,
    hedges: Counter<u64>,
    calls: Counter<u64>,
    call_attempts: Histogram<u64>,
    call_duration: Histogram<f64>,
    overruns: Counter<u64>,
    transitions: Counter<u64>,
    rejections: Counter<u64>,
    overload_rejections: Counter<u64>,
    limit_changes: Counter<u64>,
    rate_limit_rejections: Counter<u64>,
    rate_limit_pauses: Counter<u64>,
    fleet_fallbacks: Counter<u64>,
    fleet_leases: Counter<u64>,
}

// ===== impl Instruments =====

impl Instruments {
    /// The instruments of `meter`.
    pub(super) fn new(meter: &Meter) -> Self {
        Self {
            meter: meter.clone(),
            gauges: Gauges::new(),
            request_duration: seconds(meter, REQUEST_DURATION),
            retries: counter(meter, RETRIES),
            retry_delay: seconds(meter, RETRY_DELAY),
            hedges: counter(meter, HEDGES),
            calls: counter(meter, CALLS),
            call_attempts: attempts(meter, CALL_ATTEMPTS),
            call_duration: seconds(meter, CALL_DURATION),
            overruns: counter(meter, OVERRUNS),
            transitions: counter(meter, TRANSITIONS),
            rejections: counter(meter, REJECTIONS),
            overload_rejections: counter(meter, OVERLOAD_REJECTIONS),
            limit_changes: counter(meter, LIMIT_CHANGES),
            rate_limit_rejections: counter(meter, RATE_LIMIT_REJECTIONS),
            rate_limit_pauses: counter(meter, RATE_LIMIT_PAUSES),
            fleet_fallbacks: counter(meter, FLEET_FALLBACKS),
            fleet_leases: counter(meter, FLEET_LEASES),
        }
    }

    /// Records `event` of `call`.
    pub(super) fn record(&self, call: &CallContext, event: &RetryEvent) {
        match *event {
            RetryEvent::Retry {
                verdict,
                wait,
                source,
                ..
            } => {
                let mut attributes = Vec::with_capacity(3);
                attributes.push(address(call));
                attributes.push(KeyValue::new(attr::WAIT_SOURCE, attr::wait_source(source)));
                self.retry_delay.record(wait.as_secs_f64(), &attributes);
                attributes.push(KeyValue::new(attr::REASON, attr::reason(verdict.reason())));
                self.retries.add(1, &attributes);
            }
            RetryEvent::Hedge { trigger, .. } => {
                let trigger = KeyValue::new(attr::TRIGGER, attr::trigger(trigger));
                self.hedges.add(1, &[address(call), trigger]);
            }
            RetryEvent::AttemptEnd {
                status,
                duration,
                version,
                ..
            } => {
                let mut attributes = attr::request(call);
                attr::outcome(&mut attributes, status, version, event.error_type());
                self.request_duration
                    .record(duration.as_secs_f64(), &attributes);
            }
            RetryEvent::Done { attempts, stop, .. } => self.done(attempts, stop, call),
            RetryEvent::CallEnd { .. } => self.call_end(call, event),
        }
    }

    /// Records the end of `call` after `attempts`, for `stop`.
    fn done(&self, attempts: u32, stop: Stop, call: &CallContext) {
        let mut attributes = attr::call(call).to_vec();
        self.call_attempts.record(u64::from(attempts), &attributes);
        attributes.push(KeyValue::new(attr::STOP, stop.name()));
        self.calls.add(1, &attributes);
    }

    /// Records `end`, the end of a whole `call`, as the layer outside the
    /// deadline or the combined service sees it.
    fn call_end(&self, call: &CallContext, end: &RetryEvent) {
        let RetryEvent::CallEnd {
            status,
            version,
            failure,
            duration,
        } = *end
        else {
            return;
        };
        let mut attributes = attr::request(call);
        attr::outcome(&mut attributes, status, version, end.error_type());
        if failure == Some(FailureKind::Deadline) {
            self.overruns.add(1, &attr::call(call));
        }
        self.call_duration
            .record(duration.as_secs_f64(), &attributes);
    }

    /// Records a circuit's `event`.
    pub(super) fn breaker(&self, event: &BreakerEvent<'_>) {
        let (key, why) = match event {
            BreakerEvent::Opened { key, why, .. } => (key, Some(*why)),
            BreakerEvent::HalfOpen { key }
            | BreakerEvent::RampingUp { key, .. }
            | BreakerEvent::Closed { key }
            | BreakerEvent::Rejected { key, .. } => (key, None),
        };
        let key = KeyValue::new(attr::BREAKER_KEY, key.to_string());
        let Some(state) = attr::transition(event) else {
            self.rejections.add(1, &[key]);
            return;
        };
        let mut attributes = vec![key, KeyValue::new(attr::BREAKER_STATE, state)];
        if let Some(why) = why {
            attributes.push(KeyValue::new(attr::TRIP_REASON, attr::trip_reason(why)));
        }
        self.transitions.add(1, &attributes);
    }

    /// Records overload control's `event`.
    pub(super) fn overload(&self, event: &OverloadEvent<'_>) {
        match event {
            OverloadEvent::Rejected { key, reason } => {
                let attributes = [
                    KeyValue::new(attr::OVERLOAD_KEY, key.to_string()),
                    KeyValue::new(attr::OVERLOAD_REASON, reason.name()),
                ];
                self.overload_rejections.add(1, &attributes);
            }
            OverloadEvent::LimitChanged { key, .. } => {
                let key = KeyValue::new(attr::OVERLOAD_KEY, key.to_string());
                self.limit_changes.add(1, &[key]);
            }
        }
    }
}

impl Instruments {
    /// Records the rate limit's `event`.
    pub(super) fn rate_limit(&self, event: &RateLimitEvent<'_>) {
        let key =
            |key: &crate::key::UpstreamKey| KeyValue::new(attr::RATE_LIMIT_KEY, key.to_string());
        match event {
            RateLimitEvent::Rejected { key: k, reason, .. } => {
                let reason = KeyValue::new(attr::RATE_LIMIT_REASON, reason.name());
                self.rate_limit_rejections.add(1, &[key(k), reason]);
            }
            RateLimitEvent::Paused { key: k, source, .. } => {
                let signal = KeyValue::new(attr::RATE_LIMIT_SIGNAL, source.name());
                self.rate_limit_pauses.add(1, &[key(k), signal]);
            }
            RateLimitEvent::FleetFallback { key: k } => self.fleet_fallbacks.add(1, &[key(k)]),
            RateLimitEvent::Leased { key: k, .. } => self.fleet_leases.add(1, &[key(k)]),
            _ => {}
        }
    }
}

/// The `server.address` of `call`.
fn address(call: &CallContext) -> KeyValue {
    KeyValue::new(attr::SERVER_ADDRESS, call.server_address().to_owned())
}

/// A histogram of seconds, with [`SECONDS_BOUNDARIES`].
fn seconds(meter: &Meter, Spec(name, unit, description): Spec) -> Histogram<f64> {
    meter
        .f64_histogram(name)
        .with_unit(unit)
        .with_description(description)
        .with_boundaries(SECONDS_BOUNDARIES.to_vec())
        .build()
}

/// The histogram of attempts per call, with [`ATTEMPT_BOUNDARIES`].
fn attempts(meter: &Meter, Spec(name, unit, description): Spec) -> Histogram<u64> {
    meter
        .u64_histogram(name)
        .with_unit(unit)
        .with_description(description)
        .with_boundaries(ATTEMPT_BOUNDARIES.to_vec())
        .build()
}

/// A counter.
fn counter(meter: &Meter, Spec(name, unit, description): Spec) -> Counter<u64> {
    meter
        .u64_counter(name)
        .with_unit(unit)
        .with_description(description)
        .build()
}
