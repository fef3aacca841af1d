//! When a failed request is safe to send again (Apache HttpClient;
//! RFC 9110 section 9.2.2), over a real client and the loopback mock server,
//! with the requests the server saw counted: GET, POST and POST with an
//! `Idempotency-Key` against refused connections, resets after the request
//! was written, closes before any response, and 503; replayable bodies under
//! and over the cap; cancellation during an attempt and during a wait.

use crate::support;

use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use http_resilience::policy::{CallEvent, Or, RetryEvent};
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    body::ReplayBody,
    deadline::DeadlineLayer,
    policy::{ApacheDecoder, FixedDelay, TransientDecoder, IDEMPOTENCY_KEY},
    retry::{RetryPolicy, StatusRetryLayer},
    transport, BoxError, FailureKind, RetryReport, Stop,
};
use http_resilience_mock::{body::ScriptedBody, MockResponse, MockServer};
use std::{sync::Arc, time::Duration};
use support::guarded;
use tower::{Service, ServiceBuilder, ServiceExt};

/// The transient statuses and connect failures, and Apache's retryable
/// failures (resets, closes): two retries, no wait.
fn policy() -> RetryPolicy<Or<TransientDecoder, ApacheDecoder>, FixedDelay> {
    RetryPolicy::new(
        Or::new(TransientDecoder::new(), ApacheDecoder::new()),
        FixedDelay::new(Duration::ZERO, 2),
    )
}

/// The three layers over a real client, for request bodies of type `B`.
fn stack<B>(
    retry: RetryPolicy<http_resilience::policy::Or<TransientDecoder, ApacheDecoder>, FixedDelay>,
) -> impl Service<Request<B>, Response = http::Response<support::Body>, Error = BoxError, Future: Send>
       + Clone
where
    B: http_body::Body<Data = bytes::Bytes>
        + http_resilience::body::TryCloneBody
        + Send
        + Unpin
        + 'static,
    B::Error: Into<BoxError>,
{
    let client = transport::Builder::new()
        .pool_max_idle_per_host(0)
        .build_http::<B>()
        .unwrap();
    ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_secs(10)))
        .layer(StatusRetryLayer::new(retry))
        .layer(AttemptTimeoutLayer::new(Duration::from_secs(5)))
        .service(client)
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Get,
    Post,
    PostWithKey,
}

const KINDS: [Kind; 3] = [Kind::Get, Kind::Post, Kind::PostWithKey];

fn request(kind: Kind, uri: http::Uri, report: &RetryReport) -> Request<Full<bytes::Bytes>> {
    let mut builder = Request::builder().uri(uri);
    builder = match kind {
        Kind::Get => builder.method(Method::GET),
        Kind::Post => builder.method(Method::POST),
        Kind::PostWithKey => builder
            .method(Method::POST)
            .header(IDEMPOTENCY_KEY, "order-42"),
    };
    builder
        .extension(report.clone())
        .body(Full::from("{\"amount\":1}"))
        .unwrap()
}

/// Runs one call of `kind` against a fresh server scripted with `fault` on
/// every attempt, and returns the outcome's kind or status, the requests the
/// server saw, and the caller's report.
async fn against(kind: Kind, fault: fn() -> MockResponse) -> (String, usize, RetryReport) {
    let server = MockServer::start().await.unwrap();
    for _ in 0..5 {
        server.enqueue(fault());
    }
    let report = RetryReport::new();
    let outcome =
        guarded(stack(policy()).oneshot(request(kind, server.uri("/orders"), &report))).await;
    let outcome = match outcome {
        Ok(response) => response.status().as_u16().to_string(),
        Err(err) => FailureKind::of(&*err).to_string(),
    };
    // Time for any stray request to show up.
    tokio::time::sleep(Duration::from_millis(100)).await;
    (outcome, server.request_count(), report)
}

#[tokio::test]
async fn a_503_is_retried_only_for_idempotent_requests() {
    for (kind, sent) in KINDS.into_iter().zip([3, 1, 3]) {
        let (outcome, seen, report) = against(kind, || MockResponse::new(503)).await;
        assert_eq!((outcome.as_str(), seen), ("503", sent), "{kind:?}");
        let stop = report.summary().unwrap().stop();
        let expected = if sent == 1 {
            Stop::NotIdempotent
        } else {
            Stop::Exhausted
        };
        assert_eq!(stop, expected, "{kind:?}");
    }
}

#[tokio::test]
async fn a_reset_after_the_request_was_written_is_retried_only_for_idempotent_requests() {
    for (kind, sent) in KINDS.into_iter().zip([3, 1, 3]) {
        let (outcome, seen, _) = against(kind, MockResponse::reset_before_response).await;
        assert_eq!(
            (outcome.as_str(), seen),
            ("connection reset", sent),
            "{kind:?}"
        );
    }
}

#[tokio::test]
async fn a_close_before_any_response_is_retried_only_for_idempotent_requests() {
    for (kind, sent) in KINDS.into_iter().zip([3, 1, 3]) {
        let (outcome, seen, report) = against(kind, MockResponse::close_before_response).await;
        assert_eq!(
            (outcome.as_str(), seen),
            ("connection closed", sent),
            "{kind:?}"
        );
        assert_eq!(report.attempts(), sent as u32);
    }
}

#[tokio::test]
async fn a_refused_connection_is_retried_for_every_method() {
    // Nothing listens: the request is never sent, so even a POST is safe.
    let addr = http_resilience_mock::vacant_addr().unwrap();
    for kind in KINDS {
        let report = RetryReport::new();
        let uri: http::Uri = format!("http://{addr}/orders").parse().unwrap();
        let err = guarded(stack(policy()).oneshot(request(kind, uri, &report)))
            .await
            .unwrap_err();
        assert_eq!(FailureKind::of(&*err), FailureKind::ConnectRefused);
        assert_eq!(report.attempts(), 3, "{kind:?}");
        assert_eq!(report.summary().unwrap().stop(), Stop::Exhausted);
    }
}

#[tokio::test]
async fn a_streamed_body_under_the_cap_is_sent_again_in_full() {
    let server = MockServer::start().await.unwrap();
    server.enqueue(MockResponse::new(503));
    server.enqueue(MockResponse::ok("stored"));
    let chunks = ScriptedBody::new()
        .data("first half, ")
        .wait(Duration::from_millis(20))
        .data("second half")
        .without_size_hint();
    let request = Request::put(server.uri("/doc"))
        .body(ReplayBody::new(chunks))
        .unwrap();
    let response = guarded(stack(policy()).oneshot(request)).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let bodies: Vec<_> = server.requests().into_iter().map(|r| r.body).collect();
    assert_eq!(bodies, ["first half, second half"; 2]);
}

#[tokio::test]
async fn a_streamed_body_over_the_cap_is_not_repeated() {
    let server = MockServer::start().await.unwrap();
    server.enqueue(MockResponse::new(503).with_body("busy"));
    server.enqueue(MockResponse::ok("must not be asked for"));
    let chunks = ScriptedBody::new()
        .data("0123456789")
        .data("0123456789")
        .without_size_hint();
    let report = RetryReport::new();
    let request = Request::put(server.uri("/doc"))
        .extension(report.clone())
        .body(ReplayBody::with_cap(chunks, 16))
        .unwrap();
    let response = guarded(stack(policy()).oneshot(request)).await.unwrap();
    // The caller gets the 503 as it is, and is told why it was not retried.
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let attempts = response
        .extensions()
        .get::<http_resilience::Attempts>()
        .copied()
        .unwrap();
    assert_eq!(attempts.stop(), Stop::NotReplayable);
    assert_eq!(report.summary(), Some(attempts));
    assert_eq!(
        guarded(response.into_body().collect())
            .await
            .unwrap()
            .to_bytes(),
        "busy"
    );
    assert_eq!(server.request_count(), 1);
    assert_eq!(
        server.requests()[0].body,
        "01234567890123456789",
        "sent in full once"
    );
}

/// Counts the tasks alive on the runtime.
fn alive_tasks() -> usize {
    tokio::runtime::Handle::current()
        .metrics()
        .num_alive_tasks()
}

/// Waits until the runtime is back to `count` tasks, for at most 5 s.
async fn tasks_settle_at(count: usize) -> bool {
    for _ in 0..100 {
        if alive_tasks() == count {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// Waits until the server has no open connection, for at most 5 s.
async fn connections_close(server: &MockServer) -> bool {
    for _ in 0..100 {
        if server.open_connections() == 0 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test]
async fn dropping_the_call_during_an_attempt_sends_nothing_more() {
    let server = MockServer::start().await.unwrap();
    for _ in 0..5 {
        server.enqueue(MockResponse::no_response());
    }
    let before = alive_tasks();
    let report = RetryReport::new();
    let call =
        tokio::spawn(stack(policy()).oneshot(request(Kind::Get, server.uri("/slow"), &report)));
    assert!(server.wait_for_requests(1, Duration::from_secs(5)).await);
    call.abort();
    let _ = call.await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.request_count(), 1, "no request after the drop");
    assert!(
        connections_close(&server).await,
        "the connection was closed"
    );
    assert!(tasks_settle_at(before).await, "no task left behind");
}

#[tokio::test]
async fn dropping_the_call_during_a_wait_sends_nothing_more() {
    let server = MockServer::start().await.unwrap();
    for _ in 0..5 {
        server.enqueue(MockResponse::new(503));
    }
    let before = alive_tasks();
    // The call is dropped once the retry layer has decided to wait: a
    // listener hears the decision. The wait (5 s) is far longer than the test.
    let waiting = Arc::new(tokio::sync::Notify::new());
    let heard = waiting.clone();
    let slow = RetryPolicy::new(
        Or::new(TransientDecoder::new(), ApacheDecoder::new()),
        FixedDelay::new(Duration::from_secs(5), 2),
    )
    .map_options(|o| {
        o.with_listener(move |told: &CallEvent<'_>| {
            if matches!(told.event, RetryEvent::Retry { .. }) {
                heard.notify_one();
            }
        })
    });
    let report = RetryReport::new();
    let call = tokio::spawn(stack(slow).oneshot(request(Kind::Get, server.uri("/busy"), &report)));
    guarded(waiting.notified()).await;
    call.abort();
    let _ = call.await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(server.request_count(), 1, "the wait ended with the call");
    assert_eq!(report.attempts(), 1);
    assert!(connections_close(&server).await);
    assert!(tasks_settle_at(before).await, "no task left behind");
}
