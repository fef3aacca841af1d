//! The library's spans as OpenTelemetry exports them: `tracing-opentelemetry`
//! turns `otel.name`, `otel.kind` and `otel.status_code` into the span's
//! name, kind and status, and every other field into an attribute under the
//! field's own name, so the spans need no renaming. Read back through the
//! trace SDK's in-memory exporter, on tokio's paused clock.

use super::{guarded, upstream, MS};
use http::{Request, Response};
use http_resilience::{
    hedge::{HedgeDelay, HedgeLayer, HedgePolicy},
    policy::{FixedDelay, StatusDecoder},
    retry::{RetryPolicy, StatusRetryLayer},
    AttemptTimeoutLayer, DeadlineLayer, ResiliencePolicy,
};
use opentelemetry::{
    trace::{SpanId, SpanKind, Status, TracerProvider as _},
    Value,
};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use std::{
    collections::BTreeMap,
    convert::Infallible,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};
use tower::{ServiceBuilder, ServiceExt};
use tracing::subscriber::DefaultGuard;
use tracing_subscriber::{filter::LevelFilter, layer::SubscriberExt as _};

/// Credentials and a query, for `url.full` to leave out.
const URI: &str = "http://me:secret@api.test:8080/v1/items?sig=abc";
const URL_FULL: &str = "http://REDACTED:REDACTED@api.test:8080/v1/items";
/// The call's budget.
const TOTAL: Duration = Duration::from_secs(8);

/// What `tracing-opentelemetry` adds to every span of its own accord (the
/// call site's location and target, the thread, the busy and idle times):
/// not the library's, set apart before the library's are compared.
const ADDED_BY_THE_LAYER: [&str; 8] = [
    "busy_ns",
    "code.file.path",
    "code.line.number",
    "code.module.name",
    "idle_ns",
    "target",
    "thread.id",
    "thread.name",
];

/// A tracer provider exporting every span as it ends, under a subscriber
/// that is this thread's default (and enables `DEBUG`, the spans' level)
/// while this is kept.
struct Traces {
    exporter: InMemorySpanExporter,
    _provider: SdkTracerProvider,
    _default: DefaultGuard,
}

impl Traces {
    fn install() -> Self {
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder()
            .with_simple_exporter(exporter.clone())
            .build();
        let subscriber = tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("tests")))
            .with(LevelFilter::DEBUG);
        let default = tracing::subscriber::set_default(subscriber);
        // NOTE: a call site first reached by another test's thread while
        // this subscriber was being installed can be left cached as heard by
        // no one; asking again makes every call site ask this one too.
        tracing::callsite::rebuild_interest_cache();
        Self {
            exporter,
            _provider: provider,
            _default: default,
        }
    }

    /// The call's span and its attempts' (in the order they were sent),
    /// after checking that they are all there are, in one trace.
    fn call_and_attempts(&self) -> (SpanData, Vec<SpanData>) {
        let spans = self.exporter.get_finished_spans().unwrap();
        let (mut roots, mut attempts): (Vec<_>, Vec<_>) = spans
            .into_iter()
            .partition(|span| span.parent_span_id == SpanId::INVALID);
        assert_eq!(roots.len(), 1, "one call span: {roots:#?}");
        let call = roots.remove(0);
        for attempt in &attempts {
            assert_eq!(
                attempt.parent_span_id,
                call.span_context.span_id(),
                "the call span is the parent: {attempt:#?}"
            );
            assert_eq!(
                attempt.span_context.trace_id(),
                call.span_context.trace_id(),
                "one trace"
            );
        }
        // In the order they started; the resend count breaks a tie.
        attempts.sort_by_key(|span| (span.start_time, resend_count(span)));
        (call, attempts)
    }
}

/// The attempt's `http.request.resend_count`, 0 when it has none.
fn resend_count(span: &SpanData) -> i64 {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == "http.request.resend_count")
        .map_or(0, |kv| match kv.value {
            Value::I64(n) => n,
            _ => -1,
        })
}

/// The library's attributes of `span`, after checking that the rest are the
/// layer's own additions and that no `otel.*` field was left as one.
fn attributes(span: &SpanData) -> BTreeMap<String, Value> {
    let all: BTreeMap<String, Value> = span
        .attributes
        .iter()
        .map(|kv| (kv.key.to_string(), kv.value.clone()))
        .collect();
    assert_eq!(all.len(), span.attributes.len(), "no attribute twice");
    assert!(
        all.keys().all(|key| !key.starts_with("otel.")),
        "the otel.* fields are the span's name, kind and status: {all:?}"
    );
    for added in ADDED_BY_THE_LAYER {
        assert!(all.contains_key(added), "{added} in {all:?}");
    }
    all.into_iter()
        .filter(|(key, _)| !ADDED_BY_THE_LAYER.contains(&key.as_str()))
        .collect()
}

fn string(value: &str) -> Value {
    Value::String(value.to_owned().into())
}

/// The attributes both spans have from the request.
fn request() -> Vec<(&'static str, Value)> {
    vec![
        ("http.request.method", string("GET")),
        ("server.address", string("api.test")),
        ("server.port", Value::I64(8080)),
        ("url.full", string(URL_FULL)),
    ]
}

fn expected(pairs: Vec<(&'static str, Value)>) -> BTreeMap<String, Value> {
    pairs
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value))
        .collect()
}

/// An attempt's span: a `GET` client span with `request()` and `extra`.
fn assert_attempt(span: &SpanData, extra: Vec<(&'static str, Value)>, status: Status) {
    assert_eq!(span.name, "GET", "otel.name");
    assert_eq!(span.span_kind, SpanKind::Client, "otel.kind");
    assert_eq!(span.status, status, "otel.status_code");
    assert_eq!(
        attributes(span),
        expected([request(), extra].concat()),
        "the attempt span {span:#?}"
    );
}

/// The call span: a `GET` internal span with `request()` and `extra`.
fn assert_call(span: &SpanData, extra: Vec<(&'static str, Value)>) {
    assert_eq!(span.name, "GET", "otel.name");
    assert_eq!(span.span_kind, SpanKind::Internal, "otel.kind");
    assert_eq!(span.status, Status::Unset, "no error");
    assert_eq!(
        attributes(span),
        expected([request(), extra].concat()),
        "the call span {span:#?}"
    );
}

/// 503 only, twice, 10 ms apart.
fn retry() -> RetryPolicy<StatusDecoder, FixedDelay> {
    RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(MS(10), 2),
    )
}

fn get() -> Request<String> {
    Request::get(URI).body(String::new()).unwrap()
}

/// What a call retried 503, 503, 200 exports, whatever the form.
fn assert_retried_twice(traces: &Traces) {
    let (call, attempts) = traces.call_and_attempts();
    assert_eq!(attempts.len(), 3, "{attempts:#?}");
    let failed = |n: i64| {
        vec![
            ("http.request.resend_count", Value::I64(n)),
            ("http.response.status_code", Value::I64(503)),
            ("network.protocol.version", string("1.1")),
            ("error.type", string("503")),
        ]
    };
    let error = Status::error("");
    let mut first = failed(0);
    first.remove(0);
    assert_attempt(&attempts[0], first, error.clone());
    assert_attempt(&attempts[1], failed(1), error);
    let ok = vec![
        ("http.request.resend_count", Value::I64(2)),
        ("http.response.status_code", Value::I64(200)),
        ("network.protocol.version", string("1.1")),
    ];
    assert_attempt(&attempts[2], ok, Status::Unset);
    // The library's events are the call span's (the attempts have none).
    let events: Vec<_> = call.events.iter().map(|e| e.name.as_ref()).collect();
    assert_eq!(events, ["retrying", "retrying", "done"]);
    assert!(attempts.iter().all(|span| span.events.is_empty()));
    assert_call(
        &call,
        vec![
            ("http_resilience.form", string("retry")),
            ("http_resilience.attempts", Value::I64(3)),
            ("http_resilience.stop", string("accepted")),
            (
                "http_resilience.deadline_ms",
                Value::I64(TOTAL.as_millis() as i64),
            ),
            ("http.response.status_code", Value::I64(200)),
        ],
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_retried_call_through_the_three_layers_exports_a_call_span_and_three_client_spans() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    let traces = Traces::install();
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(TOTAL))
        .layer(StatusRetryLayer::new(retry()))
        .layer(AttemptTimeoutLayer::new(Duration::from_secs(3)))
        .service(upstream(&[503, 503, 200]));
    let response = guarded(svc.oneshot(get())).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_retried_twice(&traces);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_retried_call_through_the_combined_service_exports_the_same_spans() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    let traces = Traces::install();
    let policy = ResiliencePolicy::new(TOTAL, Duration::from_secs(3), retry()).unwrap();
    let svc = ServiceBuilder::new()
        .layer(policy.layer())
        .service(upstream(&[503, 503, 200]));
    let response = guarded(svc.oneshot(get())).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_retried_twice(&traces);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_hedged_call_exports_two_client_spans_under_one_call_span() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    let traces = Traces::install();
    let policy = HedgePolicy::new(
        StatusDecoder::new([503]).unwrap(),
        HedgeDelay::fixed(MS(50)),
        2,
    )
    .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(TOTAL))
        .layer(HedgeLayer::new(policy))
        .service(tower::service_fn(move |_: Request<String>| {
            let first = calls.fetch_add(1, Ordering::Relaxed) == 0;
            async move {
                // The first copy is slow; the hedge answers at once.
                tokio::time::sleep(if first {
                    Duration::from_secs(10)
                } else {
                    Duration::ZERO
                })
                .await;
                Ok::<_, Infallible>(Response::new(String::new()))
            }
        }));
    let start = tokio::time::Instant::now();
    guarded(svc.oneshot(get())).await.unwrap();
    assert_eq!(start.elapsed(), MS(50), "the hedge won");

    let (call, attempts) = traces.call_and_attempts();
    assert_eq!(attempts.len(), 2, "{attempts:#?}");
    // The first copy was dropped when the hedge won: no outcome, no error.
    assert_attempt(&attempts[0], vec![], Status::Unset);
    let winner = vec![
        ("http.request.resend_count", Value::I64(1)),
        ("http.response.status_code", Value::I64(200)),
        ("network.protocol.version", string("1.1")),
    ];
    assert_attempt(&attempts[1], winner, Status::Unset);
    assert_call(
        &call,
        vec![
            ("http_resilience.form", string("hedge")),
            ("http_resilience.attempts", Value::I64(2)),
            ("http_resilience.stop", string("accepted")),
            (
                "http_resilience.deadline_ms",
                Value::I64(TOTAL.as_millis() as i64),
            ),
            ("http_resilience.hedge.winner", Value::I64(2)),
            ("http.response.status_code", Value::I64(200)),
        ],
    );
}

/// The attribute names of OpenTelemetry's conventions the spans use; every
/// other name of the library's is under `http_resilience.`.
const CONVENTIONS: [&str; 8] = [
    "http.request.method",
    "server.address",
    "server.port",
    "url.full",
    "http.request.resend_count",
    "http.response.status_code",
    "network.protocol.version",
    "error.type",
];

#[tokio::test]
async fn spans_over_loopback_name_every_field_of_the_library_under_http_resilience() {
    use super::wiring::{client, get, guarded, LONG_BREAK};
    use http_resilience::{breaker::BreakerPolicy, policy::TransientDecoder, FailureKind};
    use http_resilience_mock::{MockResponse, MockServer};
    use tower::Layer;

    let _one = crate::ONE_AT_A_TIME.lock().await;
    let traces = Traces::install();
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::new(503));
    let breaker = BreakerPolicy::new(StatusDecoder::new([503]).unwrap())
        .consecutive_failures(1)
        .and_then(|p| p.break_duration(LONG_BREAK, LONG_BREAK))
        .unwrap();
    let retry = RetryPolicy::new(TransientDecoder::new(), FixedDelay::never());
    let policy = ResiliencePolicy::new(TOTAL, Duration::from_secs(3), retry)
        .unwrap()
        .with_guard(breaker);
    let svc = policy.layer().layer(client(false));
    // One 503 trips the circuit; the next call is turned away.
    let first = guarded(svc.clone().oneshot(get(&server))).await.unwrap();
    assert_eq!(first.status(), 503);
    let err = guarded(svc.oneshot(get(&server))).await.unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::CircuitOpen);

    let spans: Vec<_> = traces
        .exporter
        .get_finished_spans()
        .unwrap()
        .into_iter()
        .filter(|span| span.name == "GET")
        .collect();
    assert_eq!(spans.len(), 4, "two calls, two attempts: {spans:#?}");
    for span in &spans {
        for name in attributes(span).keys() {
            assert!(
                CONVENTIONS.contains(&name.as_str()) || name.starts_with("http_resilience."),
                "{name} is neither the conventions' nor under http_resilience."
            );
        }
    }
    let sent = spans
        .iter()
        .find(|span| span.span_kind == SpanKind::Client && resend_count(span) == 0)
        .map(attributes)
        .filter(|attributes| attributes.contains_key("http.response.status_code"))
        .expect("the attempt that was sent");
    assert_eq!(sent["network.protocol.version"], string("1.1"));
    let rejected = spans
        .iter()
        .filter(|span| span.span_kind == SpanKind::Internal)
        .map(attributes)
        .find(|attributes| attributes.contains_key("http_resilience.turned_away"))
        .expect("the call the circuit turned away");
    assert_eq!(
        rejected["http_resilience.turned_away"],
        string("circuit_open")
    );
    assert_eq!(rejected["http_resilience.stop"], string("failed"));
}
