//! A real `reqwest::Client` under the layers, over loopback: Reactor
//! WebClient's contracts, a request retried after refused connections, and a
//! `Retry-After`; and `ResilientClient`, reqwest's own builder in front of the
//! layers (`client.rs`). Real clock; limits far apart.

#[path = "../support/mod.rs"]
mod support;

mod client;

use http::{Request, StatusCode};
use http_body_util::BodyExt;
use http_resilience::{
    body::ReplayBody,
    policy::{FixedDelay, StatusDecoder, TransientDecoder},
    reqwest_client::ReqwestService,
    retry::RetryPolicy,
    AttemptTimeoutLayer, Attempts, BoxError, DeadlineLayer, FailureKind, StatusRetryLayer,
};
use http_resilience_mock::{body::ScriptedBody, vacant_addr, MockResponse, MockServer};
use std::time::Duration;
use support::guarded;
use tokio::time::Instant;
use tower::{Service, ServiceBuilder, ServiceExt};

/// A client with neither retries nor timeouts of its own: the layers do both.
fn client() -> ReqwestService {
    ReqwestService::new(
        reqwest::Client::builder()
            .retry(reqwest::retry::never())
            .build()
            .expect("a client"),
    )
}

/// Reactor WebClient's stack over reqwest: 8 s in all, 503 retried twice
/// 10 ms apart, attempts of `attempt`.
fn reactor(
    attempt: Duration,
    total: Duration,
) -> impl Service<
    Request<String>,
    Response = http::Response<http_resilience::deadline::body::DeadlineBody<reqwest::Body>>,
    Error = BoxError,
> {
    ServiceBuilder::new()
        .layer(DeadlineLayer::new(total))
        .layer(StatusRetryLayer::new(RetryPolicy::new(
            StatusDecoder::new([503]).unwrap(),
            FixedDelay::new(Duration::from_millis(10), 2),
        )))
        .layer(AttemptTimeoutLayer::new(attempt))
        .service(client())
}

fn get(server: &MockServer) -> Request<String> {
    Request::get(server.uri("/value"))
        .body(String::new())
        .unwrap()
}

async fn text<B>(body: B) -> Result<String, BoxError>
where
    B: http_body::Body,
    B::Error: Into<BoxError>,
{
    let bytes = body.collect().await.map_err(Into::into)?.to_bytes();
    Ok(String::from_utf8(bytes.to_vec())?)
}

const ATTEMPT: Duration = Duration::from_secs(3);
const TOTAL: Duration = Duration::from_secs(8);

#[tokio::test]
async fn immediate_success() {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::ok("ok"));
    let response = guarded(reactor(ATTEMPT, TOTAL).oneshot(get(&server)))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(guarded(text(response.into_body())).await.unwrap(), "ok");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn two_503_then_200() {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::new(503));
    server.enqueue(MockResponse::new(503));
    server.enqueue(MockResponse::ok("ok"));
    let response = guarded(reactor(ATTEMPT, TOTAL).oneshot(get(&server)))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(Attempts::of(&response), 3);
    assert_eq!(guarded(text(response.into_body())).await.unwrap(), "ok");
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn exhausted_503_comes_back_unchanged() {
    let server = guarded(MockServer::start()).await.unwrap();
    for n in 1..=3 {
        server.enqueue(
            MockResponse::new(503)
                .with_header("x-attempt", &n.to_string())
                .with_body(format!("down {n}")),
        );
    }
    let response = guarded(reactor(ATTEMPT, TOTAL).oneshot(get(&server)))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(response.headers()["x-attempt"], "3");
    assert_eq!(guarded(text(response.into_body())).await.unwrap(), "down 3");
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn a_404_is_not_retried() {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::new(404).with_body("no such thing"));
    server.enqueue(MockResponse::ok("must not be asked for"));
    let response = guarded(reactor(ATTEMPT, TOTAL).oneshot(get(&server)))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn a_silent_upstream_ends_with_the_attempt_timeout() {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::no_response());
    let start = Instant::now();
    let err = guarded(reactor(Duration::from_millis(300), TOTAL).oneshot(get(&server)))
        .await
        .unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::AttemptTimeout, "{err}");
    assert!(start.elapsed() < TOTAL / 2);
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn the_deadline_bounds_the_body() {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::stall_after_head(200));
    let total = Duration::from_millis(500);
    let start = Instant::now();
    let response = guarded(reactor(Duration::from_millis(400), total).oneshot(get(&server)))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let err = guarded(text(response.into_body())).await.unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::Deadline, "{err}");
    assert!(start.elapsed() >= total);
}

#[tokio::test]
async fn a_streamed_post_is_sent_again_after_refused_connections() {
    let addr = vacant_addr().unwrap();
    let server = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let server = MockServer::start_on(addr).await.unwrap();
        server.enqueue(MockResponse::new(201).with_body("created"));
        server
    });
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_secs(10)))
        .layer(StatusRetryLayer::new(RetryPolicy::new(
            TransientDecoder::new(),
            FixedDelay::new(Duration::from_millis(50), 60),
        )))
        .layer(AttemptTimeoutLayer::new(Duration::from_secs(2)))
        .service(client());
    let body = ScriptedBody::new()
        .data("first half, ")
        .data("second half")
        .without_size_hint();
    let request = Request::post(format!("http://{addr}/orders"))
        .body(ReplayBody::new(body))
        .unwrap();
    let response = guarded(svc.oneshot(request)).await.unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    assert!(Attempts::of(&response) > 1, "refused at least once first");
    let seen = server.await.unwrap().requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].body, "first half, second half");
}

#[tokio::test]
async fn a_reopened_body_is_opened_again_for_the_retry() {
    use http_resilience::body::ReopenBody;
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::new(503));
    server.enqueue(MockResponse::ok("stored"));
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(TOTAL))
        .layer(StatusRetryLayer::new(RetryPolicy::new(
            StatusDecoder::new([503]).unwrap(),
            FixedDelay::new(Duration::from_millis(10), 2),
        )))
        .layer(AttemptTimeoutLayer::new(ATTEMPT))
        .service(client());
    // NOTE: reqwest needs a `Sync` body: an `async` block over `Sync`
    // values, opening a `Sync` body, makes one.
    let opened = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counted = opened.clone();
    let body = ReopenBody::new(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        async { Ok::<_, std::io::Error>(ScriptedBody::new().data("one ").data("upload")) }
    });
    let request = Request::put(server.uri("/objects/7")).body(body).unwrap();
    let response = guarded(svc.oneshot(request)).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(opened.load(std::sync::atomic::Ordering::Relaxed), 2);
    let seen = server.requests();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|request| request.body == "one upload"));
}

#[tokio::test]
async fn a_retry_after_is_honoured() {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::new(503).with_header("retry-after", "1"));
    server.enqueue(MockResponse::ok("ok"));
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(TOTAL))
        .layer(StatusRetryLayer::new(RetryPolicy::new(
            StatusDecoder::new([503]).unwrap().with_retry_after(),
            FixedDelay::new(Duration::from_millis(10), 2).with_max_delay(Duration::from_secs(5)),
        )))
        .layer(AttemptTimeoutLayer::new(ATTEMPT))
        .service(client());
    let start = Instant::now();
    let response = guarded(svc.oneshot(get(&server))).await.unwrap();
    let elapsed = start.elapsed();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(elapsed >= Duration::from_secs(1), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(4), "{elapsed:?}");
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn reqwests_failures_are_told_apart() {
    // Refused: nothing listens.
    let addr = vacant_addr().unwrap();
    let request = Request::get(format!("http://{addr}/"))
        .body(String::new())
        .unwrap();
    let err = guarded(client().oneshot(request)).await.unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::ConnectRefused, "{err}");
    assert!(FailureKind::of(&*err).is_before_send());

    // A connection closed before the response: a transport failure.
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::close_before_response());
    let err = guarded(client().oneshot(get(&server))).await.unwrap_err();
    let kind = FailureKind::of(&*err);
    assert!(
        matches!(kind, FailureKind::ConnectionClosed | FailureKind::Transport),
        "{kind}: {err}"
    );
    assert!(!kind.is_before_send());

    // reqwest's own timeout, when a client has one: a transport failure,
    // never taken for one of the layers' limits.
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::no_response());
    let impatient = ReqwestService::new(
        reqwest::Client::builder()
            .timeout(Duration::from_millis(100))
            .build()
            .unwrap(),
    );
    let err = guarded(impatient.oneshot(get(&server))).await.unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::Transport, "{err}");
}
