//! The attributes of the instruments: their names, and the values made from
//! the library's types, each a short, stable, low-cardinality string.

use crate::breaker::{BreakerEvent, TripReason};
use crate::policy::{CallContext, HedgeTrigger, Reason, WaitSource};
use http::Method;
use opentelemetry::KeyValue;
use std::borrow::Cow;

// OpenTelemetry's HTTP client conventions, named as the spans name them.
pub(super) use crate::telemetry::names::{
    ERROR_TYPE, HTTP_REQUEST_METHOD as METHOD, HTTP_RESPONSE_STATUS_CODE as STATUS_CODE,
    NETWORK_PROTOCOL_VERSION, SERVER_ADDRESS, SERVER_PORT, STOP,
};
pub(super) const URL_SCHEME: &str = "url.scheme";

// The library's namespace, the spans' too.
pub(super) const REASON: &str = "http_resilience.reason";
pub(super) const WAIT_SOURCE: &str = "http_resilience.wait_source";
pub(super) const TRIGGER: &str = "http_resilience.trigger";
pub(super) const BREAKER_KEY: &str = "http_resilience.breaker.key";
pub(super) const BREAKER_STATE: &str = "http_resilience.breaker.state";
pub(super) const TRIP_REASON: &str = "http_resilience.breaker.trip_reason";
pub(super) const BUDGET_NAME: &str = "http_resilience.budget.name";
pub(super) const OVERLOAD_KEY: &str = "http_resilience.overload.key";
pub(super) const OVERLOAD_REASON: &str = "http_resilience.overload.reason";
pub(super) const RATE_LIMIT_KEY: &str = "http_resilience.rate_limit.key";
pub(super) const RATE_LIMIT_REASON: &str = "http_resilience.rate_limit.reason";
pub(super) const RATE_LIMIT_SIGNAL: &str = "http_resilience.rate_limit.signal";

/// The methods the conventions know; any other is `_OTHER`, so that a
/// caller's made-up methods cannot grow the number of series.
static KNOWN_METHODS: [Method; 9] = [
    Method::GET,
    Method::HEAD,
    Method::POST,
    Method::PUT,
    Method::DELETE,
    Method::CONNECT,
    Method::OPTIONS,
    Method::TRACE,
    Method::PATCH,
];

/// `http.request.method`: the method, or `_OTHER` for one the conventions
/// do not know.
pub(super) fn method(method: &Method) -> &'static str {
    KNOWN_METHODS
        .iter()
        .find(|known| *known == method)
        .map_or("_OTHER", Method::as_str)
}

/// The call's `http.request.method` and `server.address`.
pub(super) fn call(call: &CallContext) -> [KeyValue; 2] {
    [
        KeyValue::new(METHOD, method(call.method())),
        KeyValue::new(SERVER_ADDRESS, call.server_address().to_owned()),
    ]
}

/// The call's `http.request.method`, `server.address`, `server.port` and,
/// when the URI has one, `url.scheme`: the request attributes of
/// `http.client.request.duration`.
pub(super) fn request(call: &CallContext) -> Vec<KeyValue> {
    let mut attributes = Vec::with_capacity(8);
    attributes.extend(self::call(call));
    attributes.push(KeyValue::new(SERVER_PORT, i64::from(call.server_port())));
    if let Some(scheme) = call.scheme() {
        attributes.push(KeyValue::new(URL_SCHEME, scheme.to_owned()));
    }
    attributes
}

/// The attributes of an outcome, after the request's: its
/// `http.response.status_code` and `network.protocol.version` with a
/// response, its `error.type` when it failed (as the spans record them).
pub(super) fn outcome(
    attributes: &mut Vec<KeyValue>,
    status: Option<http::StatusCode>,
    version: Option<http::Version>,
    error_type: Option<&str>,
) {
    if let Some(status) = status {
        attributes.push(KeyValue::new(STATUS_CODE, i64::from(status.as_u16())));
    }
    if let Some(version) = version.and_then(crate::telemetry::protocol_version) {
        attributes.push(KeyValue::new(NETWORK_PROTOCOL_VERSION, version));
    }
    if let Some(error) = error_type {
        attributes.push(KeyValue::new(ERROR_TYPE, error.to_owned()));
    }
}

/// `http_resilience.reason`: why the decoder judged so. A status is its
/// code (`503`), a failure its [`FailureKind::name`](crate::FailureKind::name)
/// (`connect_refused`), a gRPC status its code's name (`UNAVAILABLE`), a
/// header its name, a reason of one's own its text; an unclassified error is
/// `error`.
pub(super) fn reason(reason: Option<Reason>) -> Cow<'static, str> {
    match reason {
        Some(Reason::Status(status)) => Cow::Owned(status.as_str().to_owned()),
        Some(Reason::Failure(kind)) => Cow::Borrowed(kind.name()),
        Some(Reason::Error) => Cow::Borrowed("error"),
        Some(Reason::Header(name) | Reason::Custom(name)) => Cow::Borrowed(name),
        Some(Reason::GrpcStatus(code)) => match crate::policy::grpc_code_name(code) {
            Some(name) => Cow::Borrowed(name),
            None => Cow::Owned(code.to_string()),
        },
        None => Cow::Borrowed("accept"),
    }
}

/// `http_resilience.wait_source`: `backoff`, `server` or `none`.
pub(super) const fn wait_source(source: WaitSource) -> &'static str {
    match source {
        WaitSource::Backoff => "backoff",
        WaitSource::Server => "server",
        WaitSource::None => "none",
    }
}

/// `http_resilience.trigger`: `delay`, `attempt_timeout` or `non_fatal`.
pub(super) const fn trigger(trigger: HedgeTrigger) -> &'static str {
    match trigger {
        HedgeTrigger::Delay(_) => "delay",
        HedgeTrigger::AttemptTimeout(_) => "attempt_timeout",
        HedgeTrigger::NonFatal(_) => "non_fatal",
    }
}

/// `http_resilience.breaker.state` of a change of state: `opened`,
/// `half_open`, `ramping_up` or `closed`; none for a rejection.
pub(super) const fn transition(event: &BreakerEvent<'_>) -> Option<&'static str> {
    match event {
        BreakerEvent::Opened { .. } => Some("opened"),
        BreakerEvent::HalfOpen { .. } => Some("half_open"),
        BreakerEvent::RampingUp { .. } => Some("ramping_up"),
        BreakerEvent::Closed { .. } => Some("closed"),
        BreakerEvent::Rejected { .. } => None,
    }
}

/// `http_resilience.breaker.trip_reason`: `consecutive_failures`,
/// `failure_ratio`, `probe_failed` or `ramp_failed`.
pub(super) const fn trip_reason(why: TripReason) -> &'static str {
    match why {
        TripReason::ConsecutiveFailures { .. } => "consecutive_failures",
        TripReason::FailureRatio { .. } => "failure_ratio",
        TripReason::ProbeFailed => "probe_failed",
        TripReason::RampFailed => "ramp_failed",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FailureKind;
    use http::StatusCode;
    use std::time::Duration;

    #[test]
    fn methods_beyond_the_conventions_are_other() {
        assert_eq!(method(&Method::GET), "GET");
        assert_eq!(method(&Method::PATCH), "PATCH");
        let made_up = Method::from_bytes(b"PURGE").unwrap();
        assert_eq!(method(&made_up), "_OTHER");
    }

    #[test]
    fn reasons_are_short_and_stable() {
        let cases = [
            (Some(Reason::Status(StatusCode::SERVICE_UNAVAILABLE)), "503"),
            (
                Some(Reason::Failure(FailureKind::ConnectRefused)),
                "connect_refused",
            ),
            (Some(Reason::Error), "error"),
            (Some(Reason::Header("x-should-retry")), "x-should-retry"),
            (Some(Reason::Custom("business rule")), "business rule"),
            (Some(Reason::GrpcStatus(14)), "UNAVAILABLE"),
            (Some(Reason::GrpcStatus(99)), "99"),
            (None, "accept"),
        ];
        for (given, name) in cases {
            assert_eq!(reason(given), name);
        }
        assert_eq!(wait_source(WaitSource::Server), "server");
        let second = Duration::from_secs(1);
        assert_eq!(
            trigger(HedgeTrigger::AttemptTimeout(second)),
            "attempt_timeout"
        );
        assert_eq!(trip_reason(TripReason::RampFailed), "ramp_failed");
    }
}
