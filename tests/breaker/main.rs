//! The circuit breaker over a real client and loopback servers, inside the
//! retry: an upstream that refuses trips its circuit; while it is open no
//! request is sent (the upstream, started meanwhile, sees none) and calls fail
//! with the open-circuit error; after the break one probe goes through and
//! the circuit closes. Another authority on the same client is untouched.
//!
//! On the real clock, with limits far apart: a 3 s break against calls that
//! fail at once, and counts of requests rather than times.
//!
//! The modules below take the breaker through its other forms, over the same
//! real parts: the combined service (`ResiliencePolicy::with_guard(breaker)`), a
//! burst of callers at the end of a break, and hedging above the breaker.

mod combined;
mod half_open;
mod hedge;
mod probe;
#[path = "../support/mod.rs"]
mod support;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    breaker::{error::CircuitOpen, BreakerPolicy, CircuitState},
    deadline::DeadlineLayer,
    guard::GuardLayer,
    key::{PerKey, UpstreamKey},
    policy::{FixedDelay, TransientDecoder},
    retry::{RetryPolicy, StatusRetryLayer},
    transport, BoxError, FailureKind, ResiliencePolicy, RetryReport, Stop,
};
use http_resilience_mock::{vacant_addr, MockResponse, MockServer};
use std::{net::SocketAddr, time::Duration};
use support::{get, guarded, Body};
use tower::{util::BoxCloneService, Layer, ServiceBuilder, ServiceExt};

/// How long a circuit stays open on its first trip.
const BREAK: Duration = Duration::from_secs(3);

/// The break of the other modules' circuits: still far longer than the
/// calls that fail at once while it lasts.
const SHORT_BREAK: Duration = Duration::from_millis(1500);

fn uri(addr: SocketAddr) -> http::Uri {
    format!("http://{addr}/value").parse().unwrap()
}

fn key(addr: SocketAddr) -> UpstreamKey {
    UpstreamKey::authority("http", &addr.ip().to_string(), addr.port())
}

/// A breaker that trips after `failures` in a row and stays open for
/// `pause` exactly (no growth, no jitter), judging as the retry does.
fn breaker(failures: u32, pause: Duration) -> BreakerPolicy<TransientDecoder> {
    BreakerPolicy::new(TransientDecoder::new())
        .consecutive_failures(failures)
        .and_then(|p| p.break_duration(pause, pause))
        .and_then(|p| p.break_growth(1.0, 0.0))
        .unwrap()
}

/// The retry of every form: what `TransientDecoder` retries (a refused
/// connection, a 503), twice, 10 ms apart.
fn retry() -> RetryPolicy<TransientDecoder, FixedDelay> {
    RetryPolicy::new(
        TransientDecoder::new(),
        FixedDelay::new(Duration::from_millis(10), 2),
    )
}

/// A real client: hyper-util's, as the library's transport builds it.
fn client() -> transport::HttpClient<Full<Bytes>> {
    transport::Builder::new()
        .connect_timeout(Duration::from_secs(1))
        .build_http()
        .unwrap()
}

/// A stack of either form, boxed so that a test runs the same steps on both.
type Svc = BoxCloneService<Request<Full<Bytes>>, Response<Body>, BoxError>;

/// The two forms a breaker takes between the retry and the attempt timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    /// `ResiliencePolicy::with_guard(breaker).layer()`.
    Combined,
    /// `DeadlineLayer -> StatusRetryLayer -> GuardLayer<BreakerPolicy> ->
    /// AttemptTimeoutLayer -> client`.
    Layers,
}

impl Form {
    const ALL: [Self; 2] = [Self::Combined, Self::Layers];
}

/// `form` over a fresh client: a deadline of `deadline`, every attempt
/// limited to `attempt`, [`retry`]'s retries, and `breaker`'s circuits.
fn stack(
    form: Form,
    breaker: &BreakerPolicy<TransientDecoder>,
    deadline: Duration,
    attempt: Duration,
) -> Svc {
    stack_with(form, breaker, deadline, attempt, retry())
}

/// [`stack`] with `retry` as its retry policy.
fn stack_with(
    form: Form,
    breaker: &BreakerPolicy<TransientDecoder>,
    deadline: Duration,
    attempt: Duration,
    retry: RetryPolicy<TransientDecoder, FixedDelay>,
) -> Svc {
    match form {
        Form::Combined => {
            let policy = ResiliencePolicy::new(deadline, attempt, retry)
                .unwrap()
                .with_guard(breaker.clone());
            BoxCloneService::new(policy.layer().layer(client()))
        }
        Form::Layers => BoxCloneService::new(
            ServiceBuilder::new()
                .layer(DeadlineLayer::new(deadline))
                .layer(StatusRetryLayer::new(retry))
                .layer(GuardLayer::new(breaker.clone()))
                .layer(AttemptTimeoutLayer::new(attempt))
                .service(client()),
        ),
    }
}

/// The error of a call the circuit of `addr` turned away, checked to be the
/// typed open-circuit error for that key.
#[track_caller]
fn assert_open(err: &BoxError, addr: SocketAddr) -> &CircuitOpen {
    assert_eq!(FailureKind::of(&**err), FailureKind::CircuitOpen, "{err}");
    let open = err.downcast_ref::<CircuitOpen>().expect("the typed error");
    assert_eq!(open.key(), &key(addr));
    open
}

/// Makes `count` calls through `svc` to `down`, whose circuit is open until
/// `until`: each fails with the typed error, not retried. The time they took.
async fn refused_calls<S, B: std::fmt::Debug>(
    svc: &S,
    down: SocketAddr,
    until: tokio::time::Instant,
    count: u32,
) -> Duration
where
    S: tower::Service<Request<Full<Bytes>>, Response = Response<B>, Error = BoxError> + Clone,
{
    let start = tokio::time::Instant::now();
    for _ in 0..count {
        let report = RetryReport::new();
        let mut request = get(uri(down));
        request.extensions_mut().insert(report.clone());
        let err = guarded(svc.clone().oneshot(request)).await.unwrap_err();
        assert_eq!(assert_open(&err, down).retry_at(), until);
        let summary = report.summary().unwrap();
        assert_eq!(
            (summary.get(), summary.stop()),
            (1, Stop::Failed),
            "not retried"
        );
    }
    start.elapsed()
}

#[tokio::test]
async fn an_open_circuit_sends_nothing_until_a_probe_finds_the_upstream_back() {
    let down = vacant_addr().unwrap();
    let other = guarded(MockServer::start()).await.unwrap();
    let breaker = breaker(3, BREAK);
    let svc = stack(
        Form::Layers,
        &breaker,
        Duration::from_secs(10),
        Duration::from_secs(2),
    );

    // Three refused attempts of one call trip the circuit; the caller gets
    // the last real outcome.
    let err: BoxError = guarded(svc.clone().oneshot(get(uri(down))))
        .await
        .unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::ConnectRefused, "{err}");
    let Some(CircuitState::Open { until }) = breaker.state(&key(down)) else {
        panic!("open after three failures: {:?}", breaker.states());
    };

    // The upstream comes up, but the circuit is open: nothing reaches it.
    let server = guarded(MockServer::start_on(down)).await.unwrap();
    refused_calls(&svc, down, until, 5).await;
    assert_eq!(server.request_count(), 0, "no request while open");

    // Another authority on the same client is untouched.
    other.enqueue(MockResponse::ok("fine"));
    let response = guarded(svc.clone().oneshot(get(uri(other.addr()))))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(other.request_count(), 1);
    assert_eq!(
        breaker.state(&key(other.addr())),
        Some(CircuitState::Closed)
    );

    // After the break, one probe goes, succeeds, and closes the circuit.
    tokio::time::sleep_until(until + Duration::from_millis(100)).await;
    server.enqueue(MockResponse::ok("back"));
    let response = guarded(svc.clone().oneshot(get(uri(down)))).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(server.request_count(), 1, "exactly the probe");
    assert_eq!(breaker.state(&key(down)), Some(CircuitState::Closed));
    server.enqueue(MockResponse::ok("still"));
    let response = guarded(svc.oneshot(get(uri(down)))).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(server.request_count(), 2);
}
