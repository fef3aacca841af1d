//! Telemetry in OpenTelemetry's terms: a `tracing` span for every call and
//! one for every attempt, named and attributed as OpenTelemetry's HTTP
//! client conventions say, so that `tracing-opentelemetry` exports them as
//! they are; and events a listener reads with the call's context.
//!
//! # Spans
//!
//! Every form of the stack (the three layers' retry, the combined service,
//! hedging) makes the same spans, from the same code:
//!
//! - **`http_resilience.call`**, the logical call, `otel.kind = "internal"`,
//!   `otel.name` the method; made from the first request, entered while the
//!   call runs, with `http_resilience.form` (`retry` or `hedge`). When the
//!   call ends it records `http_resilience.attempts`,
//!   `http_resilience.stop` ([`Stop::name`](crate::Stop::name)), the final
//!   `http.response.status_code` or `error.type`,
//!   `http_resilience.deadline_ms` (the call's budget, when it had a
//!   deadline), `http_resilience.hedge.winner` (the copy that answered, for
//!   a hedge) and `http_resilience.turned_away` (when a guard turned the last
//!   attempt away, as the decoder's verdict names it: the
//!   [`FailureKind::name`](crate::FailureKind::name) of its error,
//!   `circuit_open` for an open circuit, `overloaded` for overload control).
//! - **`http_resilience.attempt`**, one per attempt and per hedged copy, a
//!   child of the call's, `otel.kind = "client"`, `otel.name` the method:
//!   `http.request.method`, `server.address`, `server.port`, `url.full`,
//!   `http.request.resend_count` on every attempt after the first (1 for the
//!   second), and when the attempt ends `http.response.status_code` and
//!   `network.protocol.version` (the response's HTTP version: `1.0`, `1.1`,
//!   `2`, `3`), or `error.type` (the status code for 4xx and 5xx; for an
//!   error, the
//!   [`FailureKind::name`](crate::FailureKind::name) of the kind the
//!   decoder's verdict gives, `_OTHER` when it gives none) with
//!   `otel.status_code = "ERROR"`. Under the decoders that classify errors
//!   ([`TransientDecoder`](crate::policy::TransientDecoder), the gRPC, Apache
//!   and Feign ones), an attempt its time limit ends records
//!   `attempt_timeout`; [`StatusDecoder`](crate::policy::StatusDecoder)
//!   judges every error alike, and its attempts record `_OTHER`. An attempt
//!   the caller or the deadline drops records nothing.
//!
//! A call the deadline (or the caller) ends records no outcome on its span
//! in either form: under the three layers the retry is dropped from outside
//! and cannot tell why, and the combined service does the same, so that the
//! two forms trace alike. The caller's error (`DeadlineExceeded`) says it.
//!
//! Both have the request attributes `http.request.method`, `server.address`
//! and `server.port` (the URI's, or the scheme's default port), and
//! `url.full`: the URI with any user and password replaced by
//! `REDACTED:REDACTED`, and without its query unless the policy allows it
//! ([`with_url_query_in_spans`](crate::policy::CallOptions::with_url_query_in_spans)):
//! a query often carries keys and signatures.
//!
//! The names are OpenTelemetry's where its HTTP client conventions have one,
//! and the library's own are under `http_resilience.`, the namespace of its
//! metrics too (`otel`, feature `otel`).
//!
//! Every integer field (`server.port`, `http.request.resend_count`,
//! `http.response.status_code`, `http_resilience.attempts`,
//! `http_resilience.deadline_ms`, `http_resilience.hedge.winner`) is recorded as an
//! `i64`, OpenTelemetry's integer type: `tracing-opentelemetry` exports a
//! `u64` field as a string. Through it, the `otel.*` fields become the span's
//! name, kind and status and no attribute; every other field is an attribute
//! of the same name (`tests/otel/spans.rs` in the repository reads them back
//! from the SDK).
//!
//! # Levels
//!
//! Both spans are made at `DEBUG` by default, and at the level
//! [`with_span_level`](crate::policy::CallOptions::with_span_level) sets.
//! So at `RUST_LOG=info` a user sees nothing of the library but a breaker's
//! changes of state (opened, half-open, ramping up, closed: `INFO` events);
//! the retry decisions, the end of a call, a breaker's rejections and what an
//! upstream sent malformed (a `Retry-After`, a timeout header) are `DEBUG`
//! events, inside the spans: an upstream's mistakes are not the caller's to
//! be warned of on every call. With no subscriber, or one that wants none of
//! this, a call makes no span and keeps nothing for telemetry: the cost is
//! one check of the level.
//!
//! # The attempt number, below
//!
//! With [`CallOptions::with_attempt_number`](crate::policy::CallOptions::with_attempt_number),
//! every attempt after the first carries an
//! [`AttemptNumber`](crate::extensions::AttemptNumber) in its request
//! extensions, so that a layer of one's own below (tower-http's
//! `TraceLayer`, a metrics layer) reads it without a header; the first
//! attempt carries none, and reads as 1
//! ([`AttemptNumber::of`](crate::extensions::AttemptNumber::of)).
//!
//! # Events
//!
//! Every policy tells a [`Listener`] of its events, one type per feature:
//! a retry or hedging policy a [`CallEvent`](crate::policy::CallEvent), the
//! [`RetryEvent`](crate::policy::RetryEvent) (every retry, hedge, end of an
//! attempt or hedged copy, and end of a call) with the call's
//! [`CallContext`](crate::policy::CallContext) (method, scheme, authority);
//! a circuit breaker a [`BreakerEvent`](crate::breaker::BreakerEvent);
//! overload control an [`OverloadEvent`](crate::overload::OverloadEvent).
//! The combined service also tells of the end of every call, whatever ended
//! it, the deadline included
//! ([`RetryEvent::CallEnd`](crate::policy::RetryEvent::CallEnd)).
//! With a listener, a call keeps its context (one allocation) and reads the
//! clock when each attempt starts; every event borrows it.
//!
//! # Metrics
//!
//! With the feature `otel`, `otel::Metrics` records the attempts,
//! retries, hedges, ends of calls and the guards' events and states to
//! OpenTelemetry instruments (`http.client.request.duration` and the
//! `http_resilience.*` namespace), wired into a policy in one call
//! (`ResiliencePolicy::with_metrics`). The crate's example `examples/otel.rs`
//! prints the metrics and the spans of a retried call and a hedged call
//! (`cargo run -p http-resilience --example otel`).
//!
//! # Example
//!
//! ```
//! use http::{Request, Response};
//! use http_resilience::{
//!     policy::{CallEvent, FixedDelay, RetryEvent, StatusDecoder},
//!     retry::{RetryPolicy, StatusRetryLayer},
//!     telemetry::Listener,
//! };
//! use std::{
//!     convert::Infallible,
//!     sync::{Arc, Mutex},
//!     time::Duration,
//! };
//! use tower::{ServiceBuilder, ServiceExt};
//!
//! /// Writes one line per attempt, with the call's method and authority.
//! struct Lines(Arc<Mutex<Vec<String>>>);
//!
//! impl Listener<CallEvent<'_>> for Lines {
//!     fn on_event(&self, CallEvent { call, event }: &CallEvent<'_>) {
//!         if let RetryEvent::AttemptEnd { attempt, .. } = event {
//!             let line = format!(
//!                 "{} {}:{} #{attempt}: {}",
//!                 call.method(),
//!                 call.server_address(),
//!                 call.server_port(),
//!                 event.error_type().unwrap_or("ok"),
//!             );
//!             self.0.lock().unwrap().push(line);
//!         }
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() -> Result<(), http_resilience::BoxError> {
//! let lines = Arc::new(Mutex::new(Vec::new()));
//! let policy = RetryPolicy::new(StatusDecoder::new([503])?, FixedDelay::new(Duration::from_millis(10), 1))
//!     .map_options(|options| options.with_listener(Lines(Arc::clone(&lines))));
//! let svc = ServiceBuilder::new()
//!     .layer(StatusRetryLayer::new(policy))
//!     .service_fn(|_: Request<String>| async {
//!         Ok::<_, Infallible>(Response::builder().status(503).body(String::new()).unwrap())
//!     });
//! let request = Request::get("http://api.test/items").body(String::new())?;
//! svc.oneshot(request).await?;
//! assert_eq!(*lines.lock().unwrap(), ["GET api.test:80 #1: 503", "GET api.test:80 #2: 503"]);
//! # Ok(())
//! # }
//! ```

pub(crate) mod listeners;
pub(crate) mod names;

pub use self::listeners::Listener;

use crate::policy::{Reason, Verdict};
use crate::FailureKind;
use http::StatusCode;
use tracing::{field::Empty, Level, Span};

/// How a policy's spans are made: their level, and whether `url.full`
/// keeps the query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Telemetry {
    pub(crate) level: Level,
    pub(crate) url_query: bool,
}

impl Telemetry {
    /// Spans at `DEBUG`, without the query.
    pub(crate) const DEFAULT: Self = Self {
        level: Level::DEBUG,
        url_query: false,
    };
}

/// A span at a level chosen at run time: one call site per level, as
/// `tracing` needs the level of a call site to be a constant.
macro_rules! span_at {
    ($level:expr, $($rest:tt)+) => {
        match $level {
            Level::TRACE => tracing::trace_span!($($rest)+),
            Level::DEBUG => tracing::debug_span!($($rest)+),
            Level::INFO => tracing::info_span!($($rest)+),
            Level::WARN => tracing::warn_span!($($rest)+),
            _ => tracing::error_span!($($rest)+),
        }
    };
}

/// Which form a call's span is made for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Form {
    Retry,
    Hedge,
}

impl Form {
    const fn name(self) -> &'static str {
        match self {
            Form::Retry => "retry",
            Form::Hedge => "hedge",
        }
    }
}

/// The span of a call: made from its first request, entered while the first
/// attempt is called, then kept with the call's future only when a
/// subscriber wants it (boxed, so that a call nobody traces carries a pointer
/// for it).
pub(crate) struct CallSpan(Span, Form);

impl CallSpan {
    /// The span of a call of `form` whose first attempt is `request`.
    #[inline(always)]
    pub(crate) fn new<B>(form: Form, telemetry: Telemetry, request: &http::Request<B>) -> Self {
        // NOTE: one check of the level for a call no subscriber wants, rather
        // than the interest of the call site of each level.
        if !tracing::level_enabled!(telemetry.level) {
            return Self(Span::none(), form);
        }
        let (method, uri) = (request.method(), request.uri());
        let (host, port) = server(uri);
        // NOTE: the fields recorded later come first, those of both spans in
        // the same places: a record looks its field up by name, from the
        // first field on.
        let span = span_at!(
            telemetry.level,
            names::CALL_SPAN,
            { names::HTTP_RESPONSE_STATUS_CODE } = Empty,
            { names::ERROR_TYPE } = Empty,
            { names::OTEL_STATUS_CODE } = Empty,
            { names::ATTEMPTS } = Empty,
            { names::STOP } = Empty,
            { names::DEADLINE_MS } = Empty,
            { names::HEDGE_WINNER } = Empty,
            { names::TURNED_AWAY } = Empty,
            { names::OTEL_NAME } = %method,
            { names::OTEL_KIND } = "internal",
            { names::FORM } = form.name(),
            { names::HTTP_REQUEST_METHOD } = %method,
            { names::SERVER_ADDRESS } = host,
            { names::SERVER_PORT } = i64::from(port),
            { names::URL_FULL } = %UrlFull::new(uri, telemetry.url_query),
        );
        Self(span, form)
    }

    /// Whether the call hedges.
    pub(crate) const fn is_hedge(&self) -> bool {
        matches!(self.1, Form::Hedge)
    }

    /// Enters the span, until the guard is dropped.
    #[inline(always)]
    pub(crate) fn enter(&self) -> tracing::span::Entered<'_> {
        self.0.enter()
    }

    /// The span, if anyone wants it.
    #[inline(always)]
    pub(crate) fn wanted(&self) -> Option<&Span> {
        (!self.0.is_disabled()).then_some(&self.0)
    }

    /// The span to keep with the call's future, if anyone wants it.
    #[inline(always)]
    pub(crate) fn keep(self) -> Option<Box<Span>> {
        (!self.0.is_disabled()).then(|| Box::new(self.0))
    }
}

/// The span of attempt `number` (1 for the first), a child of the span
/// entered now, if anyone wants it.
#[inline(always)]
pub(crate) fn attempt_span<B>(
    telemetry: Telemetry,
    request: &http::Request<B>,
    number: u32,
) -> Option<Span> {
    if !tracing::level_enabled!(telemetry.level) {
        return None;
    }
    let (method, uri) = (request.method(), request.uri());
    let (host, port) = server(uri);
    // NOTE: every value is given as the span is made, none recorded after:
    // a value set later is looked up by its field's name.
    let resend = (number > 1).then(|| i64::from(number - 1));
    // NOTE: the fields recorded later come first, as in the call's span.
    let span = span_at!(
        telemetry.level,
        names::ATTEMPT_SPAN,
        { names::HTTP_RESPONSE_STATUS_CODE } = Empty,
        { names::ERROR_TYPE } = Empty,
        { names::OTEL_STATUS_CODE } = Empty,
        { names::NETWORK_PROTOCOL_VERSION } = Empty,
        { names::OTEL_NAME } = %method,
        { names::OTEL_KIND } = "client",
        { names::HTTP_REQUEST_METHOD } = %method,
        { names::SERVER_ADDRESS } = host,
        { names::SERVER_PORT } = i64::from(port),
        { names::URL_FULL } = %UrlFull::new(uri, telemetry.url_query),
        { names::HTTP_REQUEST_RESEND_COUNT } = resend,
    );
    (!span.is_disabled()).then_some(span)
}

/// Polls an attempt's `future` inside its `span`, if it has one, so that
/// what the layers below do runs within it.
#[inline(always)]
pub(crate) fn poll_in<F: std::future::Future>(
    span: Option<&Span>,
    future: std::pin::Pin<&mut F>,
    cx: &mut std::task::Context<'_>,
) -> std::task::Poll<F::Output> {
    let _entered = span.map(Span::enter);
    future.poll(cx)
}

/// Enters an attempt's `span`, if it has one, for the inner service's call
/// made while the guard lives.
///
/// NOTE: a guard rather than a closure around the call, so that the request
/// goes straight into the call and is not moved into a closure first.
#[inline(always)]
pub(crate) fn enter(span: Option<&Span>) -> Option<tracing::span::Entered<'_>> {
    span.map(Span::enter)
}

/// `value` as a span's integer field: an `i64`, OpenTelemetry's one integer
/// type, `i64::MAX` past it. (`tracing` hands a `u16`, `u32` or `u64` to a
/// subscriber as a `u64`, which `tracing-opentelemetry` 0.34 exports as a
/// string; every integer field of the spans is recorded as an `i64`.)
pub(crate) fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Records an attempt's or a call's outcome on `span`: the response's
/// status, or the error's type, from the `verdict` on it.
pub(crate) fn record_outcome(span: &Span, verdict: Verdict, status: Option<StatusCode>) {
    if let Some(status) = status {
        span.record(names::HTTP_RESPONSE_STATUS_CODE, i64::from(status.as_u16()));
    }
    if let Some(error) = error_type(verdict, status.as_ref()) {
        span.record(names::ERROR_TYPE, error);
        span.record(names::OTEL_STATUS_CODE, "ERROR");
    }
}

/// Records on an attempt's `span` the protocol `version` of its response
/// (`network.protocol.version`).
pub(crate) fn record_version(span: &Span, version: http::Version) {
    if let Some(version) = protocol_version(version) {
        span.record(names::NETWORK_PROTOCOL_VERSION, version);
    }
}

/// OpenTelemetry's `network.protocol.version` of an HTTP `version`: `1.0`,
/// `1.1`, `2`, `3` (`0.9` for HTTP/0.9); none for a version `http` may add.
pub(crate) fn protocol_version(version: http::Version) -> Option<&'static str> {
    use http::Version;
    [
        (Version::HTTP_09, "0.9"),
        (Version::HTTP_10, "1.0"),
        (Version::HTTP_11, "1.1"),
        (Version::HTTP_2, "2"),
        (Version::HTTP_3, "3"),
    ]
    .into_iter()
    .find_map(|(known, name)| (known == version).then_some(name))
}

/// The `error.type` of an outcome: a 4xx or 5xx status, or the kind of the
/// failure; none for a success.
pub(crate) fn error_type(verdict: Verdict, status: Option<&StatusCode>) -> Option<&str> {
    match status {
        Some(status) if status.is_client_error() || status.is_server_error() => {
            Some(status.as_str())
        }
        Some(_) => None,
        None => Some(match verdict.reason() {
            Some(Reason::Failure(kind)) => kind.name(),
            _ => FailureKind::Other.name(),
        }),
    }
}

/// The host of `uri` (an IPv6 address in its brackets) and its port, or its
/// scheme's default: `server.address` and `server.port`.
///
/// NOTE: read from the authority's bytes from the end, rather than through
/// `Uri::host` and `Uri::port_u16`, which each search the authority again;
/// it is read for every span, and a host is a few bytes, for which a plain
/// loop is cheaper than the setup of a `memrchr`. A port is the digits after
/// the last `:` (a bracketed IPv6 host ends in `]`, never in a digit after a
/// `:`); the host is what lies between it and the last `@`, whose user or
/// password is never read.
fn server(uri: &http::Uri) -> (&str, u16) {
    let Some(authority) = uri.authority() else {
        return ("", server_port(uri.scheme_str(), None));
    };
    let text = authority.as_str();
    let bytes = text.as_bytes();
    let digits = bytes
        .iter()
        .rev()
        .take_while(|b| b.is_ascii_digit())
        .count();
    let (end, explicit) = match bytes.len().checked_sub(digits + 1) {
        Some(colon) if bytes[colon] == b':' => (colon, port(&bytes[colon + 1..])),
        _ => (bytes.len(), None),
    };
    let start = bytes[..end]
        .iter()
        .rposition(|&b| b == b'@')
        .map_or(0, |at| at + 1);
    (&text[start..end], server_port(uri.scheme_str(), explicit))
}

/// The port written in `digits` (ASCII digits only), as `str::parse::<u16>`
/// reads it: `None` when there is none or it is above 65535.
fn port(digits: &[u8]) -> Option<u16> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u16, |port, digit| {
        port.checked_mul(10)?.checked_add(u16::from(digit - b'0'))
    })
}

/// OpenTelemetry's `server.port`: the `explicit` port, or the `scheme`'s
/// default (443 for https, else 80).
pub(crate) fn server_port(scheme: Option<&str>, explicit: Option<u16>) -> u16 {
    explicit.unwrap_or(match scheme {
        Some("https") => 443,
        _ => 80,
    })
}

/// `uri` as `url.full`, written only when a subscriber reads the field: any
/// user and password redacted, the query kept only when `query` says so.
struct UrlFull<'a> {
    uri: &'a http::Uri,
    query: bool,
}

impl<'a> UrlFull<'a> {
    const fn new(uri: &'a http::Uri, query: bool) -> Self {
        Self { uri, query }
    }
}

impl std::fmt::Display for UrlFull<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let uri = self.uri;
        if let Some(scheme) = uri.scheme_str() {
            write!(f, "{scheme}://")?;
        }
        if let Some(authority) = uri.authority() {
            if authority.as_str().contains('@') {
                f.write_str("REDACTED:REDACTED@")?;
            }
            f.write_str(authority.host())?;
            if let Some(port) = authority.port_u16() {
                write!(f, ":{port}")?;
            }
        }
        f.write_str(uri.path())?;
        match (self.query, uri.query()) {
            (true, Some(query)) => write!(f, "?{query}"),
            _ => Ok(()),
        }
    }
}

/// `uri` as `url.full`, as the spans write it.
#[cfg(test)]
fn url_full(uri: &http::Uri, query: bool) -> String {
    UrlFull::new(uri, query).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_reads_as_the_standard_parse_reads_it() {
        for digits in [
            "",
            "0",
            "80",
            "00080",
            "8443",
            "65535",
            "65536",
            "99999",
            "123456",
            "0000000000443",
        ] {
            assert_eq!(
                port(digits.as_bytes()),
                digits.parse::<u16>().ok(),
                "{digits:?}"
            );
        }
    }

    #[test]
    fn the_server_is_the_host_and_port_http_reads() {
        for authority in [
            "api.test",
            "api.test:8080",
            "api.test:00080",
            "me:secret@api.test:8443",
            "u:123@api.test",
            "a@b@api.test:1",
            "[::1]",
            "u@[::1]:9000",
            "127.0.0.1:65535",
        ] {
            let uri: http::Uri = format!("http://{authority}/").parse().unwrap();
            let expected = (uri.host().unwrap(), uri.port_u16().unwrap_or(80));
            assert_eq!(server(&uri), expected, "{authority}");
        }
    }

    #[test]
    fn url_full_redacts_credentials_and_drops_the_query() {
        let uri: http::Uri = "https://me:secret@api.test:8443/v1/items?sig=abc"
            .parse()
            .unwrap();
        assert_eq!(
            url_full(&uri, false),
            "https://REDACTED:REDACTED@api.test:8443/v1/items"
        );
        assert_eq!(
            url_full(&uri, true),
            "https://REDACTED:REDACTED@api.test:8443/v1/items?sig=abc"
        );
        let plain: http::Uri = "http://api.test/".parse().unwrap();
        assert_eq!(url_full(&plain, false), "http://api.test/");
        assert_eq!(server(&plain), ("api.test", 80));
        assert_eq!(server(&"https://a.test/".parse().unwrap()), ("a.test", 443));
        assert_eq!(server(&uri), ("api.test", 8443));
        let v6: http::Uri = "http://u@[::1]:9000/".parse().unwrap();
        assert_eq!(server(&v6), ("[::1]", 9000));
        let v6_default: http::Uri = "https://[::1]/".parse().unwrap();
        assert_eq!(server(&v6_default), ("[::1]", 443));
        let digits_in_password: http::Uri = "http://u:123@api.test/".parse().unwrap();
        assert_eq!(server(&digits_in_password), ("api.test", 80));
        let v6_bare: http::Uri = "http://[::1]/".parse().unwrap();
        assert_eq!(server(&v6_bare), ("[::1]", 80));
        assert_eq!(
            url_full(&"/only/a/path".parse().unwrap(), false),
            "/only/a/path"
        );
    }

    #[test]
    fn error_types_are_the_status_or_the_failure() {
        let retry = Verdict::retry(Reason::Status(StatusCode::SERVICE_UNAVAILABLE));
        let unavailable = StatusCode::SERVICE_UNAVAILABLE;
        assert_eq!(error_type(retry, Some(&unavailable)), Some("503"));
        assert_eq!(error_type(Verdict::Accept, Some(&StatusCode::OK)), None);
        let refused = Verdict::retry(FailureKind::ConnectRefused);
        assert_eq!(error_type(refused, None), Some("connect_refused"));
        assert_eq!(
            error_type(Verdict::fail(Reason::Error), None),
            Some("_OTHER")
        );
    }

    #[test]
    fn protocol_versions_are_named_as_the_conventions_say() {
        use http::Version;
        let named = [
            Version::HTTP_10,
            Version::HTTP_11,
            Version::HTTP_2,
            Version::HTTP_3,
        ]
        .map(protocol_version);
        assert_eq!(named, [Some("1.0"), Some("1.1"), Some("2"), Some("3")]);
        assert_eq!(protocol_version(Version::HTTP_09), Some("0.9"));
    }
}
