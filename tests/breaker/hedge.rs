//! Hedging above the circuit breaker, over the library's real client and
//! loopback servers, in the order the hedge's docs give (the attempt timeout
//! inside, the deadline outside, the breaker judging every copy):
//!
//! ```text
//! DeadlineLayer -> HedgeLayer -> GuardLayer<BreakerPolicy> -> AttemptTimeoutLayer -> client
//! ```
//!
//! A copy that loses the race is dropped, and a dropped call counts for
//! nothing, so a circuit that trips on one failure stays closed however many
//! losers are dropped; an upstream that refuses trips it, and later hedged
//! calls send nothing; a hedge turned away while the probe is in flight
//! leaves the probe to answer.

use super::{assert_open, breaker, client, get, guarded, key, uri, SHORT_BREAK};
use http::StatusCode;
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    breaker::{BreakerPolicy, CircuitState},
    guard::GuardLayer,
    hedge::{HedgeDelay, HedgeLayer, HedgePolicy},
    key::PerKey,
    policy::TransientDecoder,
    Attempts, DeadlineLayer, FailureKind,
};
use http_resilience_mock::{vacant_addr, MockResponse, MockServer};
use std::time::Duration;
use tokio::time::Instant;
use tower::{ServiceBuilder, ServiceExt};

/// The hedges' stack over a fresh client: two copies at most, the second
/// `delay` after the first.
fn hedged(breaker: &BreakerPolicy<TransientDecoder>, delay: Duration) -> super::Svc {
    let policy = HedgePolicy::new(TransientDecoder::new(), HedgeDelay::fixed(delay), 2).unwrap();
    super::Svc::new(
        ServiceBuilder::new()
            .layer(DeadlineLayer::new(Duration::from_secs(10)))
            .layer(HedgeLayer::new(policy))
            .layer(GuardLayer::new(breaker.clone()))
            .layer(AttemptTimeoutLayer::new(Duration::from_secs(5)))
            .service(client()),
    )
}

#[tokio::test]
async fn a_dropped_hedge_loser_counts_for_nothing() {
    let server = guarded(MockServer::start()).await.unwrap();
    let addr = server.addr();
    let breaker = breaker(1, SHORT_BREAK);
    let svc = hedged(&breaker, Duration::from_millis(300));

    for call in 1..=5 {
        // The first copy would answer in 3 s (within its attempt limit); the
        // hedge, 300 ms later, answers at once and wins.
        server.enqueue(MockResponse::ok("slow").with_head_delay(Duration::from_secs(3)));
        server.enqueue(MockResponse::ok("fast"));
        let start = Instant::now();
        let response = guarded(svc.clone().oneshot(get(uri(addr)))).await.unwrap();
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
        let attempts = *response.extensions().get::<Attempts>().unwrap();
        assert_eq!((attempts.get(), attempts.winner()), (2, 2), "call {call}");
        assert_eq!(
            super::support::text(response.into_body()).await.unwrap(),
            "fast"
        );
        assert_eq!(server.request_count(), 2 * call, "both copies were sent");
        assert_eq!(
            breaker.state(&key(addr)),
            Some(CircuitState::Closed),
            "call {call}: the dropped loser counted"
        );
    }
}

#[tokio::test]
async fn a_refusing_upstream_trips_the_breaker_below_the_hedge_and_later_hedged_calls_send_nothing()
{
    let addr = vacant_addr().unwrap();
    let breaker = breaker(2, SHORT_BREAK);
    // A delay far longer than a refusal: the second copy goes because the
    // first failed with an outcome worth another copy, at once.
    let svc = hedged(&breaker, Duration::from_secs(2));

    let start = Instant::now();
    let err = guarded(svc.clone().oneshot(get(uri(addr))))
        .await
        .unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::ConnectRefused, "{err}");
    assert!(
        start.elapsed() < Duration::from_secs(1),
        "{:?}",
        start.elapsed()
    );
    let Some(CircuitState::Open { until }) = breaker.state(&key(addr)) else {
        panic!(
            "two refused copies trip the circuit: {:?}",
            breaker.states()
        );
    };

    // The upstream comes up; hedged calls fail at once, sending no copy.
    let server = guarded(MockServer::start_on(addr)).await.unwrap();
    let start = Instant::now();
    for _ in 0..20 {
        let err = guarded(svc.clone().oneshot(get(uri(addr))))
            .await
            .unwrap_err();
        assert_eq!(assert_open(&err, addr).retry_at(), until);
    }
    let each = start.elapsed() / 20;
    assert!(
        each < Duration::from_millis(20),
        "{each:?} per refused call"
    );
    assert_eq!(server.request_count(), 0, "no copy reached the upstream");
}

#[tokio::test]
async fn a_hedge_turned_away_while_the_probe_is_in_flight_leaves_the_probe_to_answer() {
    let addr = vacant_addr().unwrap();
    let breaker = breaker(1, SHORT_BREAK);
    let svc = hedged(&breaker, Duration::from_millis(50));

    guarded(svc.clone().oneshot(get(uri(addr))))
        .await
        .unwrap_err();
    let server = guarded(MockServer::start_on(addr)).await.unwrap();
    let Some(CircuitState::Open { until }) = breaker.state(&key(addr)) else {
        panic!("open: {:?}", breaker.states());
    };
    tokio::time::sleep_until(until + Duration::from_millis(50)).await;

    // The probe takes 500 ms; the hedge 50 ms in finds the circuit
    // half-open with its one probe out, and is turned away. The call waits
    // for the probe, which answers and closes the circuit.
    server.enqueue(MockResponse::ok("probe").with_head_delay(Duration::from_millis(500)));
    let response = guarded(svc.clone().oneshot(get(uri(addr)))).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let attempts = *response.extensions().get::<Attempts>().unwrap();
    // The copy turned away counts as sent, as a refused attempt does in a
    // retry's report; the probe won.
    assert_eq!((attempts.get(), attempts.winner()), (2, 1), "{attempts:?}");
    assert_eq!(server.request_count(), 1, "the probe alone was sent");
    assert_eq!(breaker.state(&key(addr)), Some(CircuitState::Closed));
}
