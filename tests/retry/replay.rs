//! Streamed request bodies over a real client and a loopback server: a
//! request that never reached the upstream is sent again in full, whatever
//! its method and size, and one whose body went out past the replay cap is
//! not. Every test checks what the server received: how many requests, and
//! their exact bytes.
//!
//! The never-sent cases point the client at a loopback port where nothing
//! listens, and start the server there a little later, as an upstream that
//! restarts. The retry schedule (50 ms apart, for 3 s) is far wider than the
//! restart, so the tests do not race it.

use crate::support;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    body::ReplayBody,
    deadline::DeadlineLayer,
    policy::{FixedDelay, TransientDecoder},
    retry::{RetryPolicy, StatusRetryLayer},
    transport, Attempts, BoxError, RetryReport, Stop,
};
use http_resilience_mock::{body::ScriptedBody, vacant_addr, MockResponse, MockServer};
use std::{net::SocketAddr, time::Duration};
use support::{guarded, text};
use tokio::task::JoinHandle;
use tower::{Service, ServiceBuilder, ServiceExt};

type Outbound = ReplayBody<ScriptedBody>;

/// How long the upstream stays down.
const RESTART: Duration = Duration::from_millis(300);

/// Ten MiB, far over the 64 KiB replay cap.
const BIG: usize = 10 * 1024 * 1024;

/// The stack: transient failures retried every 50 ms for 3 s, within a 10 s
/// deadline; attempts of at most 2 s.
fn stack(
    http2: bool,
) -> impl Service<
    Request<Outbound>,
    Response = http::Response<support::Body>,
    Error = BoxError,
    Future: Send,
> {
    let client = transport::Builder::new()
        .connect_timeout(Duration::from_secs(1))
        .http2_only(http2)
        .build_http::<Outbound>()
        .expect("valid transport");
    let policy = RetryPolicy::new(
        TransientDecoder::new(),
        FixedDelay::new(Duration::from_millis(50), 60),
    );
    ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_secs(10)))
        .layer(StatusRetryLayer::new(policy))
        .layer(AttemptTimeoutLayer::new(Duration::from_secs(2)))
        .service(client)
}

/// A streamed body of unknown length, and the bytes it sends.
fn streamed(chunks: usize, size: usize) -> (ScriptedBody, Bytes) {
    let mut script = ScriptedBody::new().without_size_hint();
    let mut whole = Vec::with_capacity(chunks * size);
    for n in 0..chunks {
        let chunk = vec![(n % 251) as u8; size];
        whole.extend_from_slice(&chunk);
        script = script.data(chunk);
    }
    (script, Bytes::from(whole))
}

/// A server that starts on `addr` after [`RESTART`], answering `answer`.
fn restarting(addr: SocketAddr, answer: MockResponse) -> JoinHandle<MockServer> {
    tokio::spawn(async move {
        tokio::time::sleep(RESTART).await;
        let server = MockServer::start_on(addr).await.expect("the port is free");
        server.enqueue(answer);
        server
    })
}

/// A POST of `body` to `addr` through the stack, with a report.
fn post(addr: SocketAddr, body: ScriptedBody, report: &RetryReport) -> Request<Outbound> {
    Request::post(format!("http://{addr}/orders"))
        .extension(report.clone())
        .body(ReplayBody::new(body))
        .unwrap()
}

#[tokio::test]
async fn a_streamed_post_to_an_upstream_that_restarts_arrives_once_intact() {
    let addr = vacant_addr().unwrap();
    let server = restarting(addr, MockResponse::new(201).with_body("created"));
    let (body, sent) = streamed(4, 1000);
    let report = RetryReport::new();
    let response = guarded(stack(false).oneshot(post(addr, body, &report)))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    assert!(Attempts::of(&response) > 1, "refused at least once first");
    assert_eq!(
        guarded(text(response.into_body())).await.unwrap(),
        "created"
    );
    let server = server.await.unwrap();
    let seen = server.requests();
    assert_eq!(seen.len(), 1, "arrived once");
    assert_eq!(seen[0].method, "POST");
    assert_eq!(seen[0].body, sent, "intact");
}

#[tokio::test]
async fn a_body_over_the_cap_that_was_never_sent_is_sent_once_in_full() {
    let addr = vacant_addr().unwrap();
    let server = restarting(addr, MockResponse::new(201));
    let (body, sent) = streamed(BIG / (64 * 1024), 64 * 1024);
    let report = RetryReport::new();
    let response = guarded(stack(false).oneshot(post(addr, body, &report)))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    assert!(report.attempts() > 1, "refused at least once first");
    let server = server.await.unwrap();
    let seen = server.requests();
    assert_eq!(seen.len(), 1, "arrived once");
    assert_eq!(seen[0].body.len(), BIG);
    assert!(seen[0].body == sent, "in full, in order");
}

#[tokio::test]
async fn a_streamed_body_refused_unprocessed_over_http2_is_sent_again_intact() {
    let server = guarded(MockServer::start_h2()).await.unwrap();
    server.enqueue(MockResponse::refuse_stream());
    server.enqueue(MockResponse::ok("stored"));
    let body = ScriptedBody::new()
        .data("first half, ")
        .wait(Duration::from_millis(20))
        .data("second half")
        .without_size_hint();
    let report = RetryReport::new();
    let request = post(server.addr(), body, &report);
    let response = guarded(stack(true).oneshot(request)).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(Attempts::of(&response), 2);
    assert_eq!(server.refused_count(), 1);
    let seen = server.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].body, "first half, second half");
}

#[tokio::test]
async fn a_body_sent_past_the_cap_is_not_sent_again() {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::new(503).with_body("busy"));
    server.enqueue(MockResponse::ok("must not be asked for"));
    let (body, sent) = streamed(BIG / (64 * 1024), 64 * 1024);
    let report = RetryReport::new();
    let request = Request::put(server.uri("/doc"))
        .extension(report.clone())
        .body(ReplayBody::new(body))
        .unwrap();
    let response = guarded(stack(false).oneshot(request)).await.unwrap();
    // The 503 as it is, and why it was not retried.
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let attempts = response.extensions().get::<Attempts>().copied().unwrap();
    assert_eq!((attempts.get(), attempts.stop()), (1, Stop::NotReplayable));
    assert_eq!(guarded(text(response.into_body())).await.unwrap(), "busy");
    let seen = server.requests();
    assert_eq!(seen.len(), 1);
    assert!(seen[0].body == sent, "sent in full once");
}
