//! Metrics in OpenTelemetry's terms (feature `otel`): the instruments of
//! `otel::Metrics`, read back through the SDK's in-memory
//! exporter, for every form of the stack, on tokio's paused clock; and the
//! spans, through `tracing-opentelemetry` and the SDK's in-memory span
//! exporter (`spans`).

mod spans;
mod wiring;

use http::{Request, Response};
use http_resilience::{
    breaker::BreakerPolicy,
    guard::GuardLayer,
    hedge::{HedgeDelay, HedgeLayer, HedgePolicy},
    otel::{Metrics, Observed},
    policy::{FixedDelay, RetryBudget, StatusDecoder, TransientDecoder},
    retry::{RetryPolicy, StatusRetryLayer},
    AttemptTimeoutLayer, BoxError, DeadlineLayer, FailureKind, ResiliencePolicy,
};
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry_sdk::metrics::{
    data::{AggregatedMetrics, MetricData},
    InMemoryMetricExporter, PeriodicReader, SdkMeterProvider,
};
use std::{
    collections::BTreeMap,
    convert::Infallible,
    future::Future,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};
use tower::{Service, ServiceBuilder, ServiceExt};

const MS: fn(u64) -> Duration = Duration::from_millis;
const URI: &str = "http://api.test:8080/items";
/// The guard on every call: far above every limit under test.
const GUARD: Duration = Duration::from_secs(60);

/// One test of this binary at a time. `tracing` caches per call site whether
/// any subscriber listens, for the whole process; a call site first reached
/// by a test with no subscriber (the metrics tests) while another installs
/// one (the span tests) can stay cached as heard by no one.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `call`, or a panic at the guard (on the paused clock, at once).
async fn guarded<F: Future>(call: F) -> F::Output {
    tokio::time::timeout(GUARD, call)
        .await
        .expect("the call ends before the guard")
}

/// A meter provider whose metrics are read back on demand.
struct Reader {
    provider: SdkMeterProvider,
    exporter: InMemoryMetricExporter,
}

/// One data point: its instrument, attributes, and value (a counter's or a
/// gauge's value, a histogram's sum) and count (a histogram's; 1 otherwise).
#[derive(Debug, Clone, PartialEq)]
struct Point {
    name: String,
    attributes: BTreeMap<String, String>,
    value: f64,
    count: u64,
}

impl Reader {
    fn new() -> (Self, Metrics) {
        let exporter = InMemoryMetricExporter::default();
        let provider = SdkMeterProvider::builder()
            .with_reader(PeriodicReader::builder(exporter.clone()).build())
            .build();
        let metrics = Metrics::new(&provider.meter("tests"));
        (Self { provider, exporter }, metrics)
    }

    /// Every point collected now.
    fn collect(&self) -> Vec<Point> {
        self.exporter.reset();
        self.provider.force_flush().unwrap();
        let exported = self.exporter.get_finished_metrics().unwrap();
        let mut points = Vec::new();
        for scope in exported
            .iter()
            .flat_map(|resource| resource.scope_metrics())
        {
            for metric in scope.metrics() {
                points.extend(flatten(metric.name(), metric.data()));
            }
        }
        points
    }
}

/// The points of one metric.
fn flatten(name: &str, data: &AggregatedMetrics) -> Vec<Point> {
    let point = |attributes: Vec<&opentelemetry::KeyValue>, value: f64, count: u64| Point {
        name: name.to_owned(),
        attributes: attributes
            .into_iter()
            .map(|kv| (kv.key.to_string(), kv.value.to_string()))
            .collect(),
        value,
        count,
    };
    match data {
        AggregatedMetrics::U64(MetricData::Sum(sum)) => sum
            .data_points()
            .map(|p| point(p.attributes().collect(), p.value() as f64, 1))
            .collect(),
        AggregatedMetrics::U64(MetricData::Gauge(gauge)) => gauge
            .data_points()
            .map(|p| point(p.attributes().collect(), p.value() as f64, 1))
            .collect(),
        AggregatedMetrics::F64(MetricData::Gauge(gauge)) => gauge
            .data_points()
            .map(|p| point(p.attributes().collect(), p.value(), 1))
            .collect(),
        AggregatedMetrics::U64(MetricData::Histogram(histogram)) => histogram
            .data_points()
            .map(|p| point(p.attributes().collect(), p.sum() as f64, p.count()))
            .collect(),
        AggregatedMetrics::F64(MetricData::Histogram(histogram)) => histogram
            .data_points()
            .map(|p| point(p.attributes().collect(), p.sum(), p.count()))
            .collect(),
        other => panic!("{name}: unexpected data {other:?}"),
    }
}

/// The points of `name`.
fn of<'a>(points: &'a [Point], name: &str) -> Vec<&'a Point> {
    points.iter().filter(|p| p.name == name).collect()
}

/// The attributes `pairs`, as a point has them.
fn attributes(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// An upstream answering `statuses` in turn, then the last one again.
fn upstream(
    statuses: &'static [u16],
) -> impl Service<Request<String>, Response = Response<String>, Error = Infallible> + Clone {
    let calls = Arc::new(AtomicUsize::new(0));
    tower::service_fn(move |_: Request<String>| {
        let n = calls.fetch_add(1, Ordering::Relaxed);
        let status = statuses[n.min(statuses.len() - 1)];
        async move {
            Ok::<_, Infallible>(
                Response::builder()
                    .status(status)
                    .body(String::new())
                    .unwrap(),
            )
        }
    })
}

/// An upstream that never answers.
fn silent() -> impl Service<Request<String>, Response = Response<String>, Error = Infallible> + Clone
{
    tower::service_fn(|_: Request<String>| std::future::pending())
}

/// Reactor's retry: 503 only, twice, 10 ms apart; heard by `metrics`.
fn retry(metrics: &Metrics) -> RetryPolicy<StatusDecoder, FixedDelay> {
    RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(MS(10), 2),
    )
    .map_options(|o| o.with_listener(metrics.clone()))
}

fn get() -> Request<String> {
    Request::get(URI).body(String::new()).unwrap()
}

/// The three layers, with the call layer outermost.
fn three_layers<S>(
    metrics: &Metrics,
    policy: RetryPolicy<StatusDecoder, FixedDelay>,
    total: Duration,
    upstream: S,
) -> impl Service<Request<String>, Response = Response<impl std::fmt::Debug>, Error = BoxError>
where
    S: Service<Request<String>, Response = Response<String>, Error = Infallible> + Clone,
{
    ServiceBuilder::new()
        .layer(metrics.layer())
        .layer(DeadlineLayer::new(total))
        .layer(StatusRetryLayer::new(policy))
        .layer(AttemptTimeoutLayer::new(Duration::from_secs(3)))
        .service(upstream)
}

/// The combined service, with the call layer around it.
fn combined<S>(
    metrics: &Metrics,
    policy: RetryPolicy<StatusDecoder, FixedDelay>,
    total: Duration,
    upstream: S,
) -> impl Service<Request<String>, Response = Response<impl std::fmt::Debug>, Error = BoxError>
where
    S: Service<Request<String>, Response = Response<String>, Error = Infallible> + Clone,
{
    let policy = ResiliencePolicy::new(total, Duration::from_secs(3), policy).unwrap();
    ServiceBuilder::new()
        .layer(metrics.layer())
        .layer(policy.layer())
        .service(upstream)
}

/// What a call retried 503, 503, 200 leaves, whatever the form.
fn assert_retried_twice(points: &[Point]) {
    let request = [
        ("http.request.method", "GET"),
        ("server.address", "api.test"),
        ("server.port", "8080"),
        ("url.scheme", "http"),
    ];
    let failed = [
        &request[..],
        &[
            ("http.response.status_code", "503"),
            ("network.protocol.version", "1.1"),
            ("error.type", "503"),
        ],
    ]
    .concat();
    let ok = [
        &request[..],
        &[
            ("http.response.status_code", "200"),
            ("network.protocol.version", "1.1"),
        ],
    ]
    .concat();
    let mut durations = of(points, "http.client.request.duration");
    durations.sort_by_key(|p| p.count);
    let seen: Vec<_> = durations.iter().map(|p| (&p.attributes, p.count)).collect();
    assert_eq!(seen, [(&attributes(&ok), 1), (&attributes(&failed), 2)]);

    let retries = of(points, "http_resilience.retries");
    let reason = [
        ("server.address", "api.test"),
        ("http_resilience.reason", "503"),
        ("http_resilience.wait_source", "backoff"),
    ];
    assert_eq!(retries.len(), 1, "{retries:?}");
    assert_eq!(
        (&retries[0].attributes, retries[0].value),
        (&attributes(&reason), 2.0)
    );
    let delays = of(points, "http_resilience.retry.delay");
    assert_eq!((delays[0].count, delays[0].value), (2, 0.02));

    let calls = of(points, "http_resilience.calls");
    let accepted = [
        ("http.request.method", "GET"),
        ("server.address", "api.test"),
        ("http_resilience.stop", "accepted"),
    ];
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(
        (&calls[0].attributes, calls[0].value),
        (&attributes(&accepted), 1.0)
    );
    let attempts = of(points, "http_resilience.call.attempts");
    assert_eq!((attempts[0].count, attempts[0].value), (1, 3.0));

    let whole = of(points, "http_resilience.call.duration");
    assert_eq!(
        (&whole[0].attributes, whole[0].count),
        (&attributes(&ok), 1)
    );
    assert!(of(points, "http_resilience.deadline.overruns").is_empty());
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_retried_call_through_the_three_layers() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    let (reader, metrics) = Reader::new();
    let svc = three_layers(
        &metrics,
        retry(&metrics),
        Duration::from_secs(8),
        upstream(&[503, 503, 200]),
    );
    let response = guarded(svc.oneshot(get())).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_retried_twice(&reader.collect());
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_retried_call_through_the_combined_service() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    let (reader, metrics) = Reader::new();
    let svc = combined(
        &metrics,
        retry(&metrics),
        Duration::from_secs(8),
        upstream(&[503, 503, 200]),
    );
    let response = guarded(svc.oneshot(get())).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_retried_twice(&reader.collect());
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_hedged_call_counts_its_hedge() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    let (reader, metrics) = Reader::new();
    let policy = HedgePolicy::new(TransientDecoder::new(), HedgeDelay::fixed(MS(50)), 2)
        .unwrap()
        .with_metrics(&metrics);
    let calls = Arc::new(AtomicUsize::new(0));
    let svc = ServiceBuilder::new()
        .layer(metrics.layer())
        .layer(HedgeLayer::new(policy))
        .service_fn(move |_: Request<String>| {
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
        });
    guarded(svc.oneshot(get())).await.unwrap();

    let points = reader.collect();
    let hedges = of(&points, "http_resilience.hedges");
    let delay = [
        ("server.address", "api.test"),
        ("http_resilience.trigger", "delay"),
    ];
    assert_eq!(hedges.len(), 1, "{hedges:?}");
    assert_eq!(
        (&hedges[0].attributes, hedges[0].value),
        (&attributes(&delay), 1.0)
    );
    // The copy that lost was dropped: only the winner has a duration.
    let durations = of(&points, "http.client.request.duration");
    assert_eq!(durations.iter().map(|p| p.count).sum::<u64>(), 1);
    let attempts = of(&points, "http_resilience.call.attempts");
    assert_eq!((attempts[0].count, attempts[0].value), (1, 2.0));
    let calls = of(&points, "http_resilience.calls");
    assert_eq!(calls[0].attributes["http_resilience.stop"], "accepted");
    let whole = of(&points, "http_resilience.call.duration");
    assert_eq!((whole[0].count, whole[0].value), (1, 0.05));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_breaker_trip_counts_its_transitions_and_rejections_and_its_gauge_reads_open() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    let (reader, metrics) = Reader::new();
    let breaker = BreakerPolicy::default()
        .consecutive_failures(2)
        .unwrap()
        .break_duration(Duration::from_secs(1), Duration::from_secs(1))
        .unwrap()
        .with_seed(7)
        .with_metrics(&metrics);
    let status = Arc::new(AtomicUsize::new(503));
    let answer = Arc::clone(&status);
    let svc = ServiceBuilder::new()
        .layer(GuardLayer::new(breaker))
        .service_fn(move |_: Request<String>| {
            let status = answer.load(Ordering::Relaxed) as u16;
            async move {
                Ok::<_, Infallible>(
                    Response::builder()
                        .status(status)
                        .body(String::new())
                        .unwrap(),
                )
            }
        });
    for _ in 0..2 {
        assert_eq!(
            guarded(svc.clone().oneshot(get())).await.unwrap().status(),
            503
        );
    }
    for _ in 0..3 {
        let err = guarded(svc.clone().oneshot(get())).await.unwrap_err();
        assert_eq!(FailureKind::of(&*err), FailureKind::CircuitOpen);
    }

    let key = ("http_resilience.breaker.key", "http://api.test:8080");
    let points = reader.collect();
    let transitions = of(&points, "http_resilience.breaker.transitions");
    let opened = [
        key,
        ("http_resilience.breaker.state", "opened"),
        (
            "http_resilience.breaker.trip_reason",
            "consecutive_failures",
        ),
    ];
    assert_eq!(transitions.len(), 1, "{transitions:?}");
    assert_eq!(
        (&transitions[0].attributes, transitions[0].value),
        (&attributes(&opened), 1.0)
    );
    let rejections = of(&points, "http_resilience.breaker.rejections");
    assert_eq!(
        (&rejections[0].attributes, rejections[0].value),
        (&attributes(&[key]), 3.0)
    );
    let state = of(&points, "http_resilience.breaker.state");
    assert_eq!(state.len(), 1, "{state:?}");
    assert_eq!(
        (&state[0].attributes, state[0].value),
        (&attributes(&[key]), 1.0)
    );

    // After the break, a good probe closes the circuit: half-open, then closed.
    status.store(200, Ordering::Relaxed);
    tokio::time::advance(Duration::from_secs(2)).await;
    guarded(svc.clone().oneshot(get())).await.unwrap();
    let points = reader.collect();
    let changes: BTreeMap<_, _> = of(&points, "http_resilience.breaker.transitions")
        .into_iter()
        .map(|p| {
            (
                p.attributes["http_resilience.breaker.state"].clone(),
                p.value,
            )
        })
        .collect();
    let expected = [("closed", 1.0), ("half_open", 1.0), ("opened", 1.0)];
    assert_eq!(changes, expected.map(|(s, n)| (s.to_owned(), n)).into());
    assert_eq!(of(&points, "http_resilience.breaker.state")[0].value, 0.0);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_budget_gauge_reads_the_tokens_while_its_policy_lives() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    let (reader, metrics) = Reader::new();
    let metrics = metrics.with_budget_name("api");
    let budget = Arc::new(RetryBudget::new(10, 0.1).unwrap());
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(MS(10), 2),
    )
    .map_options(|o| o.with_budget(budget))
    .with_metrics(&metrics);
    let kept = policy.clone();
    let svc = three_layers(
        &metrics,
        policy,
        Duration::from_secs(8),
        upstream(&[503, 503, 200]),
    );
    guarded(svc.oneshot(get())).await.unwrap();

    // Two retryable failures took a token each; the success put 0.1 back.
    let points = reader.collect();
    let gauge = of(&points, "http_resilience.budget.tokens");
    let name = attributes(&[("http_resilience.budget.name", "api")]);
    assert_eq!(gauge.len(), 1, "{gauge:?}");
    assert_eq!((&gauge[0].attributes, gauge[0].value), (&name, 8.1));

    drop(kept);
    let points = reader.collect();
    assert!(of(&points, "http_resilience.budget.tokens").is_empty());
}

/// What a call its deadline (1 s) ended leaves, whatever the form: an
/// overrun and a call duration from the layer, no end of call from the
/// retry.
fn assert_overrun(points: &[Point]) {
    let call = [
        ("http.request.method", "GET"),
        ("server.address", "api.test"),
    ];
    let overruns = of(points, "http_resilience.deadline.overruns");
    assert_eq!(overruns.len(), 1, "{overruns:?}");
    assert_eq!(
        (&overruns[0].attributes, overruns[0].value),
        (&attributes(&call), 1.0)
    );
    let whole = of(points, "http_resilience.call.duration");
    assert_eq!(whole[0].attributes["error.type"], "deadline");
    assert_eq!((whole[0].count, whole[0].value), (1, 1.0));
    assert!(of(points, "http_resilience.calls").is_empty());
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_deadline_overrun_is_counted_through_the_three_layers() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    let (reader, metrics) = Reader::new();
    let svc = three_layers(&metrics, retry(&metrics), Duration::from_secs(1), silent());
    let err = guarded(svc.oneshot(get())).await.unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::Deadline);
    assert_overrun(&reader.collect());
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_deadline_overrun_is_counted_through_the_combined_service() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    let (reader, metrics) = Reader::new();
    let svc = combined(&metrics, retry(&metrics), Duration::from_secs(1), silent());
    let err = guarded(svc.oneshot(get())).await.unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::Deadline);
    assert_overrun(&reader.collect());
}

/// Polls `future` once: its output, if it had one.
async fn futures_poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> Option<F::Output> {
    let mut future = Some(future);
    std::future::poll_fn(move |cx| {
        let polled = future.take().expect("polled once").poll(cx);
        std::task::Poll::Ready(match polled {
            std::task::Poll::Ready(output) => Some(output),
            std::task::Poll::Pending => None,
        })
    })
    .await
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn overload_control_counts_its_rejections_and_its_gauges_read_the_slots() {
    use http_resilience::overload::OverloadPolicy;
    let _one = crate::ONE_AT_A_TIME.lock().await;
    let (reader, metrics) = Reader::new();
    let overload = OverloadPolicy::bulkhead(1).unwrap().with_metrics(&metrics);
    let svc = ServiceBuilder::new()
        .layer(GuardLayer::new(overload))
        .service(silent());
    // One call holds the only slot; two more are turned away.
    let mut held = Box::pin(svc.clone().oneshot(get()));
    assert!(futures_poll_once(held.as_mut()).await.is_none());
    for _ in 0..2 {
        let err = guarded(svc.clone().oneshot(get())).await.unwrap_err();
        assert_eq!(FailureKind::of(&*err), FailureKind::Overloaded);
    }

    let key = ("http_resilience.overload.key", "http://api.test:8080");
    let points = reader.collect();
    let rejections = of(&points, "http_resilience.overload.rejections");
    let full = attributes(&[key, ("http_resilience.overload.reason", "queue_full")]);
    assert_eq!(rejections.len(), 1, "{rejections:?}");
    assert_eq!(
        (&rejections[0].attributes, rejections[0].value),
        (&full, 2.0)
    );
    for (gauge, value) in [
        ("http_resilience.overload.limit", 1.0),
        ("http_resilience.overload.in_flight", 1.0),
        ("http_resilience.overload.queued", 0.0),
        ("http_resilience.overload.rejection_probability", 0.0),
    ] {
        let read = of(&points, gauge);
        assert_eq!(read.len(), 1, "{gauge}: {read:?}");
        assert_eq!(
            (&read[0].attributes, read[0].value),
            (&attributes(&[key]), value),
            "{gauge}"
        );
    }

    drop(held);
    drop(svc);
    let points = reader.collect();
    assert!(of(&points, "http_resilience.overload.in_flight").is_empty());
}
