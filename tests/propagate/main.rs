//! Deadline propagation over a real client: every attempt tells the upstream
//! the budget it has left. Loopback server, real clock: the values are checked
//! against bounds and against each other, never to the millisecond.

#[path = "../support/mod.rs"]
mod support;

use http::StatusCode;
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    deadline::DeadlineLayer,
    propagate::PropagateDeadlineLayer,
    retry::{FixedDelay, RetryPolicy, StatusDecoder, StatusRetryLayer},
    transport, Attempts,
};
use http_resilience_mock::{MockResponse, MockServer};
use std::time::Duration;
use support::{get, guarded, text};
use tower::{ServiceBuilder, ServiceExt};

const TOTAL: Duration = Duration::from_secs(2);
const ATTEMPT: Duration = Duration::from_secs(5);
const DELAY_MS: u64 = 50;
const DELAY: Duration = Duration::from_millis(DELAY_MS);

#[tokio::test]
async fn each_attempt_sends_the_budget_it_has_left() {
    let server = MockServer::start().await.unwrap();
    server.enqueue(MockResponse::new(503));
    server.enqueue(MockResponse::ok("ok"));

    let client = transport::Builder::new()
        .build_http::<http_body_util::Full<bytes::Bytes>>()
        .expect("valid transport");
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(DELAY, 1),
    );
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(TOTAL))
        .layer(StatusRetryLayer::new(policy))
        .layer(PropagateDeadlineLayer::envoy().with_attempt_limit(ATTEMPT))
        .layer(AttemptTimeoutLayer::new(ATTEMPT))
        .service(client);

    let response = guarded(svc.oneshot(get(server.uri("/value"))))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(Attempts::of(&response), 2);
    assert_eq!(guarded(text(response.into_body())).await.unwrap(), "ok");

    let sent: Vec<u64> = server
        .requests()
        .iter()
        .map(|request| {
            request.headers["x-envoy-expected-rq-timeout-ms"]
                .to_str()
                .expect("ASCII")
                .parse()
                .expect("an integer of milliseconds")
        })
        .collect();
    assert_eq!(sent.len(), 2);
    // The 2 s deadline, not the 5 s attempt limit, is the smaller budget.
    assert!(sent.iter().all(|&ms| ms <= 2000), "{sent:?}");
    // At least the backoff passed between the two attempts.
    assert!(sent[1] < sent[0], "{sent:?}");
    assert!(sent[0] - sent[1] >= DELAY_MS, "{sent:?}");
}
