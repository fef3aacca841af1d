//! One call wires the metrics: `with_metrics` on the policy and nothing
//! else (no listener given the metrics, no `Metrics::layer`), over the
//! library's real client and a loopback server; the three layers with their
//! parts each wired once; and a guard wired in place, read while it lives.

use super::{attributes, of, Point, Reader};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use http_resilience::{
    breaker::{BreakerEvent, BreakerPolicy},
    guard::GuardLayer,
    otel::Observed,
    policy::{CallEvent, FixedDelay, RetryBudget, RetryEvent, StatusDecoder},
    retry::{RetryPolicy, StatusRetryLayer},
    transport, AttemptTimeoutLayer, BoxError, DeadlineLayer, FailureKind, ResiliencePolicy,
};
use http_resilience_mock::{MockResponse, MockServer};
use std::{
    convert::Infallible,
    future::Future,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

/// The guard on every await over loopback (the real clock): far above every
/// limit under test.
const GUARD: Duration = Duration::from_secs(20);

/// A break far longer than any test: the circuit stays open.
pub(super) const LONG_BREAK: Duration = Duration::from_secs(600);

pub(super) async fn guarded<F: Future>(call: F) -> F::Output {
    tokio::time::timeout(GUARD, call)
        .await
        .expect("the call ends before the guard")
}

pub(super) fn client(http2: bool) -> transport::HttpClient<Full<Bytes>> {
    transport::Builder::new()
        .connect_timeout(Duration::from_secs(1))
        .http2_only(http2)
        .build_http()
        .unwrap()
}

pub(super) fn get(server: &MockServer) -> Request<Full<Bytes>> {
    Request::get(server.uri("/items"))
        .body(Full::default())
        .unwrap()
}

/// The circuit key of `server`, as the metrics name it.
fn key(server: &MockServer) -> (&'static str, String) {
    (
        "http_resilience.breaker.key",
        format!("http://{}", server.addr()),
    )
}

/// Counts what a listener of one's own hears.
#[derive(Clone, Default)]
struct Heard(Arc<AtomicUsize>);

impl Heard {
    fn count(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    fn bump(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// 503 only, twice, 10 ms apart, with a budget and a listener of one's own
/// that counts the retries.
fn retry(retries: &Heard) -> RetryPolicy<StatusDecoder, FixedDelay> {
    let retries = retries.clone();
    RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(Duration::from_millis(10), 2),
    )
    .map_options(|o| {
        o.with_budget(Arc::new(RetryBudget::new(10, 0.1).unwrap()))
            .with_listener(move |heard: &CallEvent<'_>| {
                if let RetryEvent::Retry { .. } = heard.event {
                    retries.bump();
                }
            })
    })
}

/// Trips after three 503s in a row, stays open; a listener of one's own
/// counts its events.
fn breaker(events: &Heard) -> BreakerPolicy<StatusDecoder> {
    let events = events.clone();
    BreakerPolicy::new(StatusDecoder::new([503]).unwrap())
        .consecutive_failures(3)
        .and_then(|p| p.break_duration(LONG_BREAK, LONG_BREAK))
        .unwrap()
        .with_listener(move |_: &BreakerEvent<'_>| events.bump())
}

/// Three calls: 503, 503, 200 (two retries); 503 three times (exhausted,
/// the circuit trips); one the open circuit turns away, never sent. The
/// service is kept (and its circuits with it).
async fn three_calls<S, T: std::fmt::Debug>(server: &MockServer, svc: &S)
where
    S: Service<Request<Full<Bytes>>, Response = Response<T>, Error = BoxError> + Clone,
{
    for status in [503, 503, 200, 503, 503, 503] {
        server.enqueue(MockResponse::new(status));
    }
    let first = guarded(svc.clone().oneshot(get(server))).await.unwrap();
    assert_eq!(first.status(), StatusCode::OK);
    let second = guarded(svc.clone().oneshot(get(server))).await.unwrap();
    assert_eq!(second.status(), StatusCode::SERVICE_UNAVAILABLE);
    let err = guarded(svc.clone().oneshot(get(server))).await.unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::CircuitOpen, "{err}");
    assert_eq!(
        server.request_count(),
        6,
        "the turned-away call was not sent"
    );
}

/// The points of `http.client.request.duration` with `status`: their
/// attempts, after checking they carry the protocol `version`.
fn attempts_with(points: &[Point], status: &str, version: &str) -> u64 {
    of(points, "http.client.request.duration")
        .into_iter()
        .filter(|p| {
            p.attributes
                .get("http.response.status_code")
                .map(String::as_str)
                == Some(status)
        })
        .inspect(|p| {
            assert_eq!(
                p.attributes
                    .get("network.protocol.version")
                    .map(String::as_str),
                Some(version),
                "{p:?}"
            );
        })
        .map(|p| p.count)
        .sum()
}

/// The sum of the counter `name` over its points.
fn total(points: &[Point], name: &str) -> f64 {
    of(points, name).iter().map(|p| p.value).sum()
}

/// What [`three_calls`] leaves in the metrics, whatever the form.
fn assert_three_calls(points: &[Point], server: &MockServer, version: &str) {
    assert_eq!(attempts_with(points, "503", version), 5, "{points:#?}");
    assert_eq!(attempts_with(points, "200", version), 1);
    assert_eq!(total(points, "http_resilience.retries"), 4.0);
    let opened = attributes(&[
        (key(server).0, key(server).1.as_str()),
        ("http_resilience.breaker.state", "opened"),
        (
            "http_resilience.breaker.trip_reason",
            "consecutive_failures",
        ),
    ]);
    let transitions = of(points, "http_resilience.breaker.transitions");
    assert_eq!(transitions.len(), 1, "{transitions:?}");
    assert_eq!(
        (&transitions[0].attributes, transitions[0].value),
        (&opened, 1.0)
    );
    assert_eq!(total(points, "http_resilience.breaker.rejections"), 1.0);
    let state = of(points, "http_resilience.breaker.state");
    let circuit = attributes(&[(key(server).0, key(server).1.as_str())]);
    assert_eq!(state.len(), 1, "{state:?}");
    assert_eq!(
        (&state[0].attributes, state[0].value),
        (&circuit, 1.0),
        "open"
    );
    let whole: u64 = of(points, "http_resilience.call.duration")
        .iter()
        .map(|p| p.count)
        .sum();
    assert_eq!(whole, 3, "every call timed once");
}

#[tokio::test]
async fn one_call_wires_the_combined_service_its_breaker_and_its_budget() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    let (reader, metrics) = Reader::new();
    let server = guarded(MockServer::start()).await.unwrap();
    let (retries, events) = (Heard::default(), Heard::default());
    let policy = ResiliencePolicy::new(
        Duration::from_secs(10),
        Duration::from_secs(2),
        retry(&retries),
    )
    .unwrap()
    .with_guard(breaker(&events))
    .with_metrics(&metrics.clone().with_budget_name("api"));
    let svc = policy.layer().layer(client(false));
    three_calls(&server, &svc).await;

    let points = reader.collect();
    assert_three_calls(&points, &server, "1.1");
    let budget = of(&points, "http_resilience.budget.tokens");
    assert_eq!(budget.len(), 1, "{budget:?}");
    assert_eq!(
        budget[0].attributes,
        attributes(&[("http_resilience.budget.name", "api")])
    );
    // The listeners the policies had still hear everything, beside the metrics.
    assert_eq!(retries.count(), 4, "the retry's own listener");
    assert_eq!(
        events.count(),
        2,
        "the breaker's own listener: opened, rejected"
    );
}

#[tokio::test]
async fn the_protocol_version_is_the_responses() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    for http2 in [false, true] {
        let (reader, metrics) = Reader::new();
        let server = if http2 {
            guarded(MockServer::start_h2()).await.unwrap()
        } else {
            guarded(MockServer::start()).await.unwrap()
        };
        server.enqueue(MockResponse::ok("fine"));
        let retry = RetryPolicy::new(StatusDecoder::new([503]).unwrap(), FixedDelay::never());
        let policy = ResiliencePolicy::new(Duration::from_secs(10), Duration::from_secs(2), retry)
            .unwrap()
            .with_metrics(&metrics);
        let svc = policy.layer().layer(client(http2));
        guarded(svc.oneshot(get(&server))).await.unwrap();
        let version = if http2 { "2" } else { "1.1" };
        let points = reader.collect();
        assert_eq!(attempts_with(&points, "200", version), 1, "{points:#?}");
        let whole = of(&points, "http_resilience.call.duration");
        assert_eq!(whole[0].attributes["network.protocol.version"], version);
    }
}

#[tokio::test]
async fn the_three_layers_need_the_call_layer_and_each_part_wired_once() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    let (reader, metrics) = Reader::new();
    let server = guarded(MockServer::start()).await.unwrap();
    let (retries, events) = (Heard::default(), Heard::default());
    let svc = ServiceBuilder::new()
        .layer(metrics.layer())
        .layer(DeadlineLayer::new(Duration::from_secs(10)))
        .layer(StatusRetryLayer::new(
            retry(&retries).with_metrics(&metrics),
        ))
        .layer(GuardLayer::new(breaker(&events).with_metrics(&metrics)))
        .layer(AttemptTimeoutLayer::new(Duration::from_secs(2)))
        .service(client(false));
    three_calls(&server, &svc).await;

    let points = reader.collect();
    assert_three_calls(&points, &server, "1.1");
    assert_eq!((retries.count(), events.count()), (4, 2));
}

/// An upstream answering 503 to every call.
fn unavailable(
) -> impl Service<Request<String>, Response = Response<String>, Error = Infallible> + Clone {
    tower::service_fn(|_: Request<String>| async {
        Ok::<_, Infallible>(Response::builder().status(503).body(String::new()).unwrap())
    })
}

fn plain_get() -> Request<String> {
    Request::get("http://api.test:8080/items")
        .body(String::new())
        .unwrap()
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_breaker_wired_in_place_is_read_while_it_lives_through_its_setters_and_erase() {
    let _one = crate::ONE_AT_A_TIME.lock().await;
    let (reader, metrics) = Reader::new();
    // A clone handed out before the wiring reports too: the circuits are one.
    let unwired = BreakerPolicy::new(StatusDecoder::new([503]).unwrap());
    let handed_out = unwired.clone();
    let wired = unwired
        .with_metrics(&metrics)
        .consecutive_failures(1)
        .and_then(|p| p.break_duration(LONG_BREAK, LONG_BREAK))
        .unwrap();
    drop(handed_out);
    // Wired twice (the same circuits in two stacks): counted once.
    let twice = wired.clone().with_metrics(&metrics);
    let retry = RetryPolicy::new(StatusDecoder::new([503]).unwrap(), FixedDelay::never());
    let policy = ResiliencePolicy::new(Duration::from_secs(8), Duration::from_secs(3), retry)
        .unwrap()
        .with_guard(twice)
        .erase();
    let svc = ServiceBuilder::new()
        .layer(policy.layer())
        .service(unavailable());
    assert_eq!(
        guarded(svc.clone().oneshot(plain_get()))
            .await
            .unwrap()
            .status(),
        503
    );
    let err = guarded(svc.clone().oneshot(plain_get())).await.unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::CircuitOpen);

    let points = reader.collect();
    let circuit = attributes(&[("http_resilience.breaker.key", "http://api.test:8080")]);
    assert_eq!(total(&points, "http_resilience.breaker.transitions"), 1.0);
    assert_eq!(total(&points, "http_resilience.breaker.rejections"), 1.0);
    let state = of(&points, "http_resilience.breaker.state");
    assert_eq!(state.len(), 1, "{state:?}");
    assert_eq!((&state[0].attributes, state[0].value), (&circuit, 1.0));

    // Once nothing keeps the circuits, the gauge reads nothing of them.
    drop((svc, wired));
    let points = reader.collect();
    assert!(
        of(&points, "http_resilience.breaker.state").is_empty(),
        "{points:#?}"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn overload_control_wired_with_the_policy_counts_its_rejections_and_reads_its_slots() {
    use http_resilience::overload::OverloadPolicy;
    let _one = crate::ONE_AT_A_TIME.lock().await;
    let (reader, metrics) = Reader::new();
    let retry = RetryPolicy::new(StatusDecoder::new([503]).unwrap(), FixedDelay::never());
    let policy = ResiliencePolicy::new(Duration::from_secs(8), Duration::from_secs(3), retry)
        .unwrap()
        .with_guard(OverloadPolicy::bulkhead(1).unwrap())
        .with_metrics(&metrics);
    let svc = ServiceBuilder::new()
        .layer(policy.layer())
        .service(super::silent());
    // One call holds the only slot; the next is turned away.
    let mut held = Box::pin(svc.clone().oneshot(plain_get()));
    assert!(super::futures_poll_once(held.as_mut()).await.is_none());
    let err = guarded(svc.clone().oneshot(plain_get())).await.unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::Overloaded);

    let key = ("http_resilience.overload.key", "http://api.test:8080");
    let points = reader.collect();
    let rejections = of(&points, "http_resilience.overload.rejections");
    let full = attributes(&[key, ("http_resilience.overload.reason", "queue_full")]);
    assert_eq!(rejections.len(), 1, "{rejections:?}");
    assert_eq!(
        (&rejections[0].attributes, rejections[0].value),
        (&full, 1.0)
    );
    let in_flight = of(&points, "http_resilience.overload.in_flight");
    assert_eq!(in_flight.len(), 1, "{in_flight:?}");
    assert_eq!(
        (&in_flight[0].attributes, in_flight[0].value),
        (&attributes(&[key]), 1.0)
    );
    drop(held);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_rate_limit_wired_with_the_policy_counts_its_rejections_and_pauses_and_reads_its_delay()
{
    use http_resilience::rate_limit::{RateLimitMode, RateLimitPolicy, ServerSignals};
    let _one = crate::ONE_AT_A_TIME.lock().await;
    let (reader, metrics) = Reader::new();
    let retry = RetryPolicy::new(StatusDecoder::new([503]).unwrap(), FixedDelay::never());
    let limit = RateLimitPolicy::new(100, Duration::from_secs(1))
        .unwrap()
        .with_mode(RateLimitMode::TurnAway)
        .with_server_signals(ServerSignals::ALL);
    let policy = ResiliencePolicy::new(Duration::from_secs(8), Duration::from_secs(3), retry)
        .unwrap()
        .with_guard(limit)
        .with_metrics(&metrics);
    // A 429 asking for 2 s: a pause; the next call, whose slot would be 10
    // ms on, is turned away for it.
    let svc = ServiceBuilder::new()
        .layer(policy.layer())
        .service(tower::service_fn(|_: Request<String>| async {
            let response = Response::builder()
                .status(429)
                .header("retry-after", "2")
                .body(String::new())
                .unwrap();
            Ok::<_, Infallible>(response)
        }));
    guarded(svc.clone().oneshot(plain_get())).await.unwrap();
    let err = guarded(svc.clone().oneshot(plain_get())).await.unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::RateLimited);

    let key = ("http_resilience.rate_limit.key", "http://api.test:8080");
    let points = reader.collect();
    let rejections = of(&points, "http_resilience.rate_limit.rejections");
    let paused = attributes(&[key, ("http_resilience.rate_limit.reason", "paused")]);
    assert_eq!(rejections.len(), 1, "{rejections:?}");
    assert_eq!(
        (&rejections[0].attributes, rejections[0].value),
        (&paused, 1.0)
    );
    let pauses = of(&points, "http_resilience.rate_limit.pauses");
    let by = attributes(&[key, ("http_resilience.rate_limit.signal", "retry_after")]);
    assert_eq!((&pauses[0].attributes, pauses[0].value), (&by, 1.0));
    let delay = of(&points, "http_resilience.rate_limit.delay");
    assert_eq!(delay.len(), 1, "{delay:?}");
    assert_eq!(delay[0].attributes, attributes(&[key]));
    // NOTE: the pause, less what the paused clock moved while it was read.
    assert!((1.9..=2.0).contains(&delay[0].value), "{delay:?}");
}
