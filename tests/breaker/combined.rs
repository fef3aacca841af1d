//! The circuit breaker in the combined service
//! (`ResiliencePolicy::with_guard(breaker).layer()`) over the library's real
//! client and loopback servers: refusals trip it, an open circuit sends
//! nothing and fails at once, a probe after the break closes it, another
//! authority is untouched; a timed-out attempt counts as a failure, an
//! attempt the deadline ends counts for nothing; the break lasts what the
//! tripping `Retry-After` asked for, capped; a call turned away costs no
//! retry budget; and one `BreakerPolicy` given to the combined service and to
//! the three layers is one set of circuits. Where a rule holds for the
//! combined service as for the three layers, the test runs both forms.

use super::{
    assert_open, breaker, client, get, guarded, key, refused_calls, retry, stack, stack_with, uri,
    Form, SHORT_BREAK,
};
use http::StatusCode;
use http_resilience::{
    breaker::{BreakerPolicy, CircuitState},
    key::PerKey,
    policy::{RetryBudget, TransientDecoder},
    FailureKind, ResiliencePolicy,
};
use http_resilience_mock::{vacant_addr, MockResponse, MockServer};
use std::{sync::Arc, time::Duration};
use tokio::time::Instant;
use tower::{Layer, ServiceExt};

/// Calls made while the circuit is open, to average their cost over.
const OPEN_CALLS: u32 = 100;

/// The most an open circuit's call may take on average: the issue asks for
/// "well under a millisecond"; this bound only catches a call that waits.
const FAST: Duration = Duration::from_millis(20);

#[tokio::test]
async fn the_combined_service_trips_on_refusals_sends_nothing_while_open_and_closes_on_a_probe() {
    let down = vacant_addr().unwrap();
    let other = guarded(MockServer::start()).await.unwrap();
    let policy = ResiliencePolicy::new(Duration::from_secs(10), Duration::from_secs(2), retry())
        .unwrap()
        .with_guard(breaker(3, SHORT_BREAK));
    let svc = policy.clone().layer().layer(client());

    // Three refused attempts of one call trip the circuit; the caller gets
    // the last real outcome, not the circuit's error.
    let err = guarded(svc.clone().oneshot(get(uri(down))))
        .await
        .unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::ConnectRefused, "{err}");
    let Some(CircuitState::Open { until }) = policy.guard().state(&key(down)) else {
        panic!("open after three failures: {:?}", policy.guard().states());
    };
    assert_eq!(
        svc.guard().state(&key(down)),
        policy.guard().state(&key(down)),
        "the service reads the policy's circuits"
    );

    // The upstream comes up, but the circuit is open: nothing reaches it,
    // and every call fails at once with the typed error, not retried.
    let server = guarded(MockServer::start_on(down)).await.unwrap();
    let took = refused_calls(&svc, down, until, OPEN_CALLS).await;
    let each = took / OPEN_CALLS;
    assert!(
        each < FAST,
        "an open circuit's call took {each:?} on average"
    );
    assert_eq!(server.request_count(), 0, "no request while open");
    assert!(Instant::now() < until, "the checks ran within the break");

    // Another authority on the same client is untouched.
    other.enqueue(MockResponse::ok("fine"));
    let response = guarded(svc.clone().oneshot(get(uri(other.addr()))))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(other.request_count(), 1);
    let mut states = policy.guard().states();
    states.sort_by_key(|(key, _)| key.port());
    let mut expected = vec![
        (key(down), CircuitState::Open { until }),
        (key(other.addr()), CircuitState::Closed),
    ];
    expected.sort_by_key(|(key, _)| key.port());
    assert_eq!(states, expected);

    // After the break, one probe goes, succeeds, and closes the circuit.
    tokio::time::sleep_until(until + Duration::from_millis(100)).await;
    server.enqueue(MockResponse::ok("back"));
    let response = guarded(svc.clone().oneshot(get(uri(down)))).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(server.request_count(), 1, "exactly the probe");
    assert_eq!(policy.guard().state(&key(down)), Some(CircuitState::Closed));
    server.enqueue(MockResponse::ok("still"));
    let response = guarded(svc.oneshot(get(uri(down)))).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn an_attempt_that_times_out_counts_as_a_failure_in_both_forms() {
    for form in Form::ALL {
        let server = guarded(MockServer::start()).await.unwrap();
        // Longer than the attempt limit, far shorter than the deadline.
        server.enqueue(MockResponse::ok("late").with_head_delay(Duration::from_secs(5)));
        let breaker = breaker(1, SHORT_BREAK);
        let svc = stack(
            form,
            &breaker,
            Duration::from_secs(10),
            Duration::from_millis(600),
        );
        let addr = server.addr();

        // Timeouts are not retried: the caller gets the attempt's timeout,
        // and that one failure tripped the circuit.
        let err = guarded(svc.clone().oneshot(get(uri(addr))))
            .await
            .unwrap_err();
        assert_eq!(
            FailureKind::of(&*err),
            FailureKind::AttemptTimeout,
            "{form:?}: {err}"
        );
        assert_eq!(server.request_count(), 1, "{form:?}");
        assert!(
            matches!(breaker.state(&key(addr)), Some(CircuitState::Open { .. })),
            "{form:?}: {:?}",
            breaker.states()
        );

        server.enqueue(MockResponse::ok("unsent"));
        let err = guarded(svc.oneshot(get(uri(addr)))).await.unwrap_err();
        assert_open(&err, addr);
        assert_eq!(
            server.request_count(),
            1,
            "{form:?}: nothing sent while open"
        );
    }
}

#[tokio::test]
async fn an_attempt_the_deadline_ends_counts_for_nothing_in_both_forms() {
    for form in Form::ALL {
        let server = guarded(MockServer::start()).await.unwrap();
        let breaker = breaker(1, SHORT_BREAK);
        // The deadline is the limit that ends the attempt: it counts for
        // nothing, even with one failure to trip.
        let svc = stack(
            form,
            &breaker,
            Duration::from_millis(600),
            Duration::from_secs(5),
        );
        let addr = server.addr();
        for round in 1..=2 {
            server.enqueue(MockResponse::ok("late").with_head_delay(Duration::from_secs(5)));
            let err = guarded(svc.clone().oneshot(get(uri(addr))))
                .await
                .unwrap_err();
            assert_eq!(
                FailureKind::of(&*err),
                FailureKind::Deadline,
                "{form:?}: {err}"
            );
            assert_eq!(server.request_count(), round, "{form:?}");
            assert_eq!(
                breaker.state(&key(addr)),
                Some(CircuitState::Closed),
                "{form:?}, round {round}"
            );
        }
    }
}

#[tokio::test]
async fn one_breaker_policy_is_one_set_of_circuits_for_the_combined_service_and_the_three_layers() {
    let shared = breaker(3, SHORT_BREAK);
    let combined = stack(
        Form::Combined,
        &shared,
        Duration::from_secs(10),
        Duration::from_secs(2),
    );
    let layers = stack(
        Form::Layers,
        &shared,
        Duration::from_secs(10),
        Duration::from_secs(2),
    );

    // Tripped through the combined service, the three layers refuse...
    let first = vacant_addr().unwrap();
    let err = guarded(combined.clone().oneshot(get(uri(first))))
        .await
        .unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::ConnectRefused, "{err}");
    let first_server = guarded(MockServer::start_on(first)).await.unwrap();
    let err = guarded(layers.clone().oneshot(get(uri(first))))
        .await
        .unwrap_err();
    assert_open(&err, first);

    // ...and tripped through the three layers, the combined service does.
    let second = vacant_addr().unwrap();
    let err = guarded(layers.clone().oneshot(get(uri(second))))
        .await
        .unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::ConnectRefused, "{err}");
    let second_server = guarded(MockServer::start_on(second)).await.unwrap();
    let err = guarded(combined.clone().oneshot(get(uri(second))))
        .await
        .unwrap_err();
    assert_open(&err, second);
    assert_eq!(
        (first_server.request_count(), second_server.request_count()),
        (0, 0),
        "nothing sent while open, by either form"
    );

    // A probe through one form closes the circuit for the other.
    let Some(CircuitState::Open { until }) = shared.state(&key(second)) else {
        panic!("open: {:?}", shared.states());
    };
    tokio::time::sleep_until(until + Duration::from_millis(100)).await;
    for (probe, then, server, addr) in [
        (&combined, &layers, &first_server, first),
        (&layers, &combined, &second_server, second),
    ] {
        server.enqueue(MockResponse::ok("probe"));
        server.enqueue(MockResponse::ok("closed"));
        let response = guarded(probe.clone().oneshot(get(uri(addr))))
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(shared.state(&key(addr)), Some(CircuitState::Closed));
        let response = guarded(then.clone().oneshot(get(uri(addr)))).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(server.request_count(), 2);
    }
}

#[tokio::test]
async fn the_break_lasts_what_the_tripping_retry_after_asked_for_capped_in_both_forms() {
    for form in Form::ALL {
        // A short break of its own, a cap far above it; no retries, so the
        // tripping 503 is the caller's at once.
        let breaker = BreakerPolicy::new(TransientDecoder::new())
            .consecutive_failures(1)
            .and_then(|p| p.break_duration(Duration::from_millis(200), Duration::from_secs(10)))
            .and_then(|p| p.break_growth(1.0, 0.0))
            .unwrap();
        let svc = stack_with(
            form,
            &breaker,
            Duration::from_secs(10),
            Duration::from_secs(2),
            retry().disabled(),
        );
        for (asked, least, most) in [("3", 3, 4), ("3600", 10, 10)] {
            let server = guarded(MockServer::start()).await.unwrap();
            server.enqueue(MockResponse::new(503).with_header("retry-after", asked));
            let before = Instant::now();
            let response = guarded(svc.clone().oneshot(get(uri(server.addr()))))
                .await
                .unwrap();
            let after = Instant::now();
            assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
            let Some(CircuitState::Open { until }) = breaker.state(&key(server.addr())) else {
                panic!("{form:?}: open after a 503: {:?}", breaker.states());
            };
            let (least, most) = (Duration::from_secs(least), Duration::from_secs(most));
            assert!(
                until >= before + least && until <= after + most,
                "{form:?}, Retry-After {asked}: open for {:?}",
                until - before
            );
        }
    }
}

#[tokio::test]
async fn an_open_circuit_costs_no_retry_budget_in_both_forms() {
    for form in Form::ALL {
        let budget = Arc::new(RetryBudget::new(10, 0.1).unwrap());
        let breaker = breaker(3, SHORT_BREAK);
        let svc = stack_with(
            form,
            &breaker,
            Duration::from_secs(10),
            Duration::from_secs(2),
            retry().map_options(|o| o.with_budget(Arc::clone(&budget))),
        );
        let addr = vacant_addr().unwrap();

        // Three refused attempts trip the circuit; each retryable failure
        // took its token.
        let full = budget.tokens_milli();
        let err = guarded(svc.clone().oneshot(get(uri(addr))))
            .await
            .unwrap_err();
        assert_eq!(FailureKind::of(&*err), FailureKind::ConnectRefused, "{err}");
        let tripped = budget.tokens_milli();
        assert!(tripped < full, "{form:?}: {tripped} of {full}");
        // NOTE: the budget allows a retry while more than half the bucket,
        // full at first, is left.
        assert!(tripped > full / 2, "{form:?}: room for retries left");

        // Turned away: never sent, no token taken, none put back.
        for _ in 0..50 {
            let err = guarded(svc.clone().oneshot(get(uri(addr))))
                .await
                .unwrap_err();
            assert_open(&err, addr);
        }
        assert_eq!(budget.tokens_milli(), tripped, "{form:?}");
    }
}
