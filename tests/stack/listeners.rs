//! One listener for every policy: closures of one form given to a retry
//! policy, a breaker and overload control, in the combined service, over the
//! library's real client and a loopback server.

use http::StatusCode;
use http_resilience::{
    breaker::{BreakerEvent, BreakerPolicy},
    overload::{OverloadEvent, OverloadPolicy},
    policy::{CallEvent, FixedDelay, RetryEvent, StatusDecoder},
    retry::RetryPolicy,
    transport, FailureKind, ResiliencePolicy, Stop,
};
use http_resilience_mock::{MockResponse, MockServer};
use std::{
    sync::{Arc, Mutex},
    time::Duration,
};
use tower::{Layer, ServiceExt};

use crate::support::{get, guarded};

/// A break far longer than the test: the circuit stays open.
const LONG_BREAK: Duration = Duration::from_secs(600);

/// What one listener heard, in order.
type Heard<T> = Arc<Mutex<Vec<T>>>;

#[tokio::test]
async fn one_closure_form_hears_the_retry_the_breaker_and_overload_control() {
    let server = guarded(MockServer::start()).await.unwrap();
    let retries: Heard<(RetryEvent, String, u16)> = Heard::default();
    let circuits: Heard<String> = Heard::default();
    let slots: Heard<String> = Heard::default();

    let into = Arc::clone(&retries);
    let retry = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(Duration::from_millis(10), 2),
    )
    .map_options(|o| {
        o.with_listener(move |heard: &CallEvent<'_>| {
            let call = (
                heard.call.server_address().to_owned(),
                heard.call.server_port(),
            );
            into.lock().unwrap().push((heard.event, call.0, call.1));
        })
    });
    let into = Arc::clone(&circuits);
    let breaker = BreakerPolicy::new(StatusDecoder::new([503]).unwrap())
        .consecutive_failures(3)
        .and_then(|p| p.break_duration(LONG_BREAK, LONG_BREAK))
        .unwrap()
        .with_listener(move |event: &BreakerEvent<'_>| {
            into.lock().unwrap().push(event.to_string())
        });
    let into = Arc::clone(&slots);
    let overload = OverloadPolicy::bulkhead(1)
        .unwrap()
        .with_queue(0)
        .with_listener(move |event: &OverloadEvent<'_>| {
            into.lock().unwrap().push(event.to_string())
        });
    let policy = ResiliencePolicy::new(Duration::from_secs(10), Duration::from_secs(5), retry)
        .unwrap()
        .with_guard((overload, breaker));
    let client = transport::Builder::new()
        .connect_timeout(Duration::from_secs(1))
        .build_http()
        .unwrap();
    let svc = policy.layer().layer(client);

    // One call holds the only slot (the upstream never answers it); the
    // next is turned away by overload control, never sent.
    server.enqueue(MockResponse::no_response());
    let held = tokio::spawn(svc.clone().oneshot(get(server.uri("/items"))));
    guarded(async {
        while server.request_count() < 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
    let err = guarded(svc.clone().oneshot(get(server.uri("/items"))))
        .await
        .unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::Overloaded, "{err}");
    held.abort();
    let _ = held.await;

    // Three 503s trip the circuit; the next call is turned away by it.
    for _ in 0..3 {
        server.enqueue(MockResponse::new(503));
    }
    let response = guarded(svc.clone().oneshot(get(server.uri("/items"))))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let err = guarded(svc.clone().oneshot(get(server.uri("/items"))))
        .await
        .unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::CircuitOpen, "{err}");
    assert_eq!(
        server.request_count(),
        4,
        "the turned-away calls were not sent"
    );

    let slots = slots.lock().unwrap().clone();
    assert!(
        !slots.is_empty() && slots.iter().all(|line| line.contains("call turned away")),
        "{slots:?}"
    );
    let circuits = circuits.lock().unwrap().clone();
    assert_eq!(circuits.len(), 2, "{circuits:?}");
    assert!(circuits[0].contains(" opened for "), "{circuits:?}");
    assert!(circuits[1].ends_with("open: call rejected"), "{circuits:?}");

    let retries = retries.lock().unwrap().clone();
    let port = server.addr().port();
    assert!(
        retries
            .iter()
            .all(|(_, host, at)| host == "127.0.0.1" && *at == port),
        "every event carries its call: {retries:?}"
    );
    let events: Vec<RetryEvent> = retries.into_iter().map(|(event, ..)| event).collect();
    let unavailable = |event: &&RetryEvent| matches!(event, RetryEvent::AttemptEnd { status: Some(status), .. } if *status == 503);
    assert_eq!(events.iter().filter(unavailable).count(), 3, "{events:#?}");
    assert!(events.iter().any(|event| matches!(
        event,
        RetryEvent::Done {
            attempts: 3,
            stop: Stop::Exhausted,
            ..
        }
    )));
    let ends: Vec<_> = events
        .iter()
        .filter_map(|event| match event {
            RetryEvent::CallEnd {
                status, failure, ..
            } => Some((status.map(|s| s.as_u16()), *failure)),
            _ => None,
        })
        .collect();
    assert_eq!(
        ends,
        [
            (None, Some(FailureKind::Overloaded)),
            (Some(503), None),
            (None, Some(FailureKind::CircuitOpen)),
        ],
        "the end of every call the combined service finished: {events:#?}"
    );
}
