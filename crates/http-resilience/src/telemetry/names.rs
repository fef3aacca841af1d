//! The name of every span and span field the library records: OpenTelemetry's
//! names where its conventions have one, and the library's own under
//! `http_resilience.`, the namespace of its metrics too. The metrics take the
//! names they share with the spans from here; their own attributes and
//! instruments are named beside their definitions, in `otel`.

// ===== spans =====

/// The span of a logical call.
pub(crate) const CALL_SPAN: &str = "http_resilience.call";
/// The span of one attempt or hedged copy.
pub(crate) const ATTEMPT_SPAN: &str = "http_resilience.attempt";

// ===== what `tracing-opentelemetry` turns into a span's name, kind, status =====

pub(crate) const OTEL_NAME: &str = "otel.name";
pub(crate) const OTEL_KIND: &str = "otel.kind";
pub(crate) const OTEL_STATUS_CODE: &str = "otel.status_code";

// ===== OpenTelemetry's HTTP client conventions =====

pub(crate) const HTTP_REQUEST_METHOD: &str = "http.request.method";
pub(crate) const SERVER_ADDRESS: &str = "server.address";
pub(crate) const SERVER_PORT: &str = "server.port";
pub(crate) const URL_FULL: &str = "url.full";
pub(crate) const HTTP_REQUEST_RESEND_COUNT: &str = "http.request.resend_count";
pub(crate) const HTTP_RESPONSE_STATUS_CODE: &str = "http.response.status_code";
pub(crate) const NETWORK_PROTOCOL_VERSION: &str = "network.protocol.version";
pub(crate) const ERROR_TYPE: &str = "error.type";

// ===== the library's own, on the call's span =====

/// `retry` or `hedge`.
pub(crate) const FORM: &str = "http_resilience.form";
/// The attempts a call made, the first included.
pub(crate) const ATTEMPTS: &str = "http_resilience.attempts";
/// Why a call made no further attempt ([`Stop::name`](crate::Stop::name));
/// also an attribute of `http_resilience.calls`.
pub(crate) const STOP: &str = "http_resilience.stop";
/// The call's budget, in milliseconds.
pub(crate) const DEADLINE_MS: &str = "http_resilience.deadline_ms";
/// The hedged copy that answered.
pub(crate) const HEDGE_WINNER: &str = "http_resilience.hedge.winner";
/// The kind of failure of a guard that turned the last attempt away
/// (`circuit_open`, `overloaded`).
pub(crate) const TURNED_AWAY: &str = "http_resilience.turned_away";
