//! The circuit breaker over a real client and loopback servers, inside the
//! retry: an upstream that refuses trips its circuit; while it is open no
//! request is sent (the upstream, started meanwhile, sees none) and calls fail
//! with the open-circuit error; after the break one probe goes through and
//! the circuit closes. Another authority on the same client is untouched.
//!
//! On the real clock, with limits far apart: a 3 s break against calls that
//! fail at once, and counts of requests rather than times.

#[path = "../support/mod.rs"]
mod support;

mod probe;

use http::StatusCode;
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    breaker::{error::CircuitOpen, BreakerKey, BreakerPolicy, CircuitBreakerLayer, CircuitState},
    deadline::DeadlineLayer,
    policy::{FixedDelay, TransientDecoder},
    retry::{RetryPolicy, StatusRetryLayer},
    transport, BoxError, FailureKind, RetryReport, Stop,
};
use http_resilience_mock::{vacant_addr, MockResponse, MockServer};
use std::{net::SocketAddr, time::Duration};
use support::{get, guarded};
use tower::{ServiceBuilder, ServiceExt};

/// How long a circuit stays open on its first trip.
const BREAK: Duration = Duration::from_secs(3);

fn uri(addr: SocketAddr) -> http::Uri {
    format!("http://{addr}/value").parse().unwrap()
}

fn key(addr: SocketAddr) -> BreakerKey {
    BreakerKey::authority("http", &addr.ip().to_string(), addr.port())
}

#[tokio::test]
async fn an_open_circuit_sends_nothing_until_a_probe_finds_the_upstream_back() {
    let down = vacant_addr().unwrap();
    let other = guarded(MockServer::start()).await.unwrap();
    let client = transport::Builder::new()
        .connect_timeout(Duration::from_secs(1))
        .build_http()
        .unwrap();
    let breaker = BreakerPolicy::new(TransientDecoder::new())
        .consecutive_failures(3)
        .and_then(|p| p.break_duration(BREAK, BREAK))
        .and_then(|p| p.break_growth(1.0, 0.0))
        .unwrap();
    let retry = RetryPolicy::new(
        TransientDecoder::new(),
        FixedDelay::new(Duration::from_millis(10), 2),
    );
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_secs(10)))
        .layer(StatusRetryLayer::new(retry))
        .layer(CircuitBreakerLayer::new(breaker.clone()))
        .layer(AttemptTimeoutLayer::new(Duration::from_secs(2)))
        .service(client);

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
    for _ in 0..5 {
        let report = RetryReport::new();
        let mut request = get(uri(down));
        request.extensions_mut().insert(report.clone());
        let err = guarded(svc.clone().oneshot(request)).await.unwrap_err();
        assert_eq!(FailureKind::of(&*err), FailureKind::CircuitOpen, "{err}");
        let open = err.downcast_ref::<CircuitOpen>().expect("the typed error");
        assert_eq!(open.key(), &key(down));
        assert_eq!(open.retry_at(), until);
        let summary = report.summary().unwrap();
        assert_eq!(
            (summary.get(), summary.stop()),
            (1, Stop::Failed),
            "not retried"
        );
    }
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
