//! The nine contracts of Reactor WebClient's nested timeouts, one test
//! per row of the table in DESIGN.md.
//!
//! Rows 1 to 7 run a real hyper-util client against the loopback mock server on
//! the real clock (tokio's paused clock fires timeouts falsely with real
//! sockets); they assert outcomes and request counts, never milliseconds. Rows
//! 8 and 9 run on tower-test mocks with tokio's paused clock, where time is
//! exact.

use crate::support;

use http::{Request, Response, StatusCode};
use http_resilience::{
    attempt_timeout::{error::AttemptTimedOut, AttemptTimeoutLayer},
    deadline::{error::DeadlineExceeded, DeadlineLayer},
    errors,
    policy::{FixedDelay, StatusDecoder},
    read_timeout::error::{Phase, ReadTimedOut},
    retry::{RetryPolicy, StatusRetryLayer},
    Attempts, FailureKind,
};
use http_resilience_mock::{MockResponse, MockServer};
use std::time::Duration;
use support::{get, guarded, reactor_stack, text, Reactor};
use tokio::time::Instant;
use tower::{ServiceBuilder, ServiceExt};
use tower_test::mock;

// ===== rows 1-7: real client, loopback server, real clock =====

#[tokio::test]
async fn immediate_success_uses_one_request() {
    let server = MockServer::start().await.unwrap();
    server.enqueue(MockResponse::ok("ok"));
    let response = guarded(reactor_stack(Reactor::default()).oneshot(get(server.uri("/value"))))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(Attempts::of(&response), 1);
    assert_eq!(guarded(text(response.into_body())).await.unwrap(), "ok");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn two_503_then_success_uses_three_requests() {
    let server = MockServer::start().await.unwrap();
    server.enqueue(MockResponse::new(503));
    server.enqueue(MockResponse::new(503));
    server.enqueue(MockResponse::ok("ok"));
    let response = guarded(reactor_stack(Reactor::default()).oneshot(get(server.uri("/value"))))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(Attempts::of(&response), 3);
    assert_eq!(guarded(text(response.into_body())).await.unwrap(), "ok");
    assert_eq!(server.request_count(), 3);
    assert!(server
        .requests()
        .iter()
        .all(|r| r.method == "GET" && r.uri == "/value"));
}

#[tokio::test]
async fn exhausted_503_returns_the_last_response_unwrapped_after_three_requests() {
    let server = MockServer::start().await.unwrap();
    for n in 1..=3 {
        server.enqueue(
            MockResponse::new(503)
                .with_header("x-attempt", &n.to_string())
                .with_body(format!("unavailable {n}")),
        );
    }
    // A fourth response that must never be asked for.
    server.enqueue(MockResponse::ok("too many"));
    let response = guarded(reactor_stack(Reactor::default()).oneshot(get(server.uri("/value"))))
        .await
        .expect("the last 503 is a response, not an error");
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()["x-attempt"], "3");
    assert_eq!(Attempts::of(&response), 3);
    assert_eq!(
        guarded(text(response.into_body())).await.unwrap(),
        "unavailable 3"
    );
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn not_found_is_not_retried() {
    status_is_preserved_after_one_request(404).await;
}

#[tokio::test]
async fn other_server_errors_are_not_retried() {
    status_is_preserved_after_one_request(500).await;
}

async fn status_is_preserved_after_one_request(status: u16) {
    let server = MockServer::start().await.unwrap();
    server.enqueue(MockResponse::new(status).with_body("nope"));
    server.enqueue(MockResponse::ok("must not be asked for"));
    let response = guarded(reactor_stack(Reactor::default()).oneshot(get(server.uri("/value"))))
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), status);
    assert_eq!(Attempts::of(&response), 1);
    assert_eq!(guarded(text(response.into_body())).await.unwrap(), "nope");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn attempt_timeout_is_not_retried() {
    let server = MockServer::start().await.unwrap();
    server.enqueue(MockResponse::no_response());
    server.enqueue(MockResponse::ok("must not be asked for"));
    let seed = Reactor {
        attempt: Duration::from_secs(1),
        ..Reactor::default()
    };
    let err = guarded(reactor_stack(seed).oneshot(get(server.uri("/value"))))
        .await
        .unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::AttemptTimeout, "{err}");
    let timed_out = errors::find::<AttemptTimedOut>(&*err).unwrap();
    assert_eq!(timed_out.duration(), Duration::from_secs(1));
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn read_timeout_is_distinct_from_the_attempt_timeout_and_not_retried() {
    let server = MockServer::start().await.unwrap();
    server.enqueue(MockResponse::no_response());
    server.enqueue(MockResponse::ok("must not be asked for"));
    let seed = Reactor {
        read: Duration::from_millis(250),
        ..Reactor::default()
    };
    let err = guarded(reactor_stack(seed).oneshot(get(server.uri("/value"))))
        .await
        .unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::ReadTimeout, "{err}");
    assert!(errors::find::<AttemptTimedOut>(&*err).is_none());
    let timed_out = errors::find::<ReadTimedOut>(&*err).unwrap();
    assert_eq!(timed_out.phase(), Phase::Head);
    assert_eq!(timed_out.duration(), Duration::from_millis(250));
    assert_eq!(server.request_count(), 1);
}

// ===== rows 8-9: tower-test mocks, paused clock =====

type Req = Request<String>;
type Resp = Response<String>;

fn reply(status: u16, body: &str) -> Resp {
    Response::builder()
        .status(status)
        .body(body.to_owned())
        .unwrap()
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn total_budget_includes_the_retry_delay() {
    // Total 1.5 s, delay 1 s, attempt limit 1 s, instant 503s.
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(Duration::from_secs(1), 2),
    );
    let (upstream, mut handle) = mock::pair::<Req, Resp>();
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_millis(1500)))
        .layer(StatusRetryLayer::new(policy))
        .layer(AttemptTimeoutLayer::new(Duration::from_secs(1)))
        .service(upstream);

    let start = Instant::now();
    let server = tokio::spawn(async move {
        let mut attempts = Vec::new();
        while let Some((_request, send)) = handle.next_request().await {
            attempts.push(start.elapsed());
            send.send_response(reply(503, ""));
        }
        attempts
    });
    let err = guarded(svc.oneshot(Request::new(String::new())))
        .await
        .unwrap_err();
    assert_eq!(
        err.downcast_ref::<DeadlineExceeded>().unwrap().duration(),
        Duration::from_millis(1500)
    );
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(1500),
        "cut at the deadline, mid-delay"
    );
    let attempts = server.await.unwrap();
    assert_eq!(
        attempts,
        [Duration::ZERO, Duration::from_secs(1)],
        "no third attempt"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn attempt_budget_restarts_after_a_retry() {
    // Attempt 400 ms (503), delay 200 ms, attempt 400 ms (200); attempt limit
    // 500 ms, total 2 s.
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(Duration::from_millis(200), 2),
    );
    let (upstream, mut handle) = mock::pair::<Req, Resp>();
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_secs(2)))
        .layer(StatusRetryLayer::new(policy))
        .layer(AttemptTimeoutLayer::new(Duration::from_millis(500)))
        .service(upstream);

    let start = Instant::now();
    let server = tokio::spawn(async move {
        let mut attempts = Vec::new();
        let mut n = 0;
        while let Some((_request, send)) = handle.next_request().await {
            n += 1;
            let begun = start.elapsed();
            tokio::time::sleep(Duration::from_millis(400)).await;
            attempts.push((begun, start.elapsed()));
            send.send_response(if n == 1 {
                reply(503, "")
            } else {
                reply(200, "ok")
            });
        }
        attempts
    });
    let response = guarded(svc.oneshot(Request::new(String::new())))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(Attempts::of(&response), 2);
    assert_eq!(support::text(response.into_body()).await.unwrap(), "ok");
    assert_eq!(
        start.elapsed(),
        Duration::from_secs(1),
        "success after 1 s of virtual time"
    );
    let attempts = server.await.unwrap();
    let ms = Duration::from_millis;
    assert_eq!(attempts, [(ms(0), ms(400)), (ms(600), ms(1000))]);
    for (begun, ended) in attempts {
        assert!(
            ended - begun < ms(500),
            "each attempt within its own 500 ms"
        );
    }
}
