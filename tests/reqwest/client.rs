//! `ResilientClient`: reqwest's own request builder and response, through the
//! combined service and through the three layers, over loopback. Real clock;
//! limits far apart.

use crate::support::guarded;
use bytes::Bytes;
use http_resilience::{
    deadline::error::DeadlineExceeded,
    errors,
    policy::{FixedDelay, Idempotency, StatusDecoder},
    read_timeout::ReadTimeoutLayer,
    reqwest_client::{self, RequestBody, ReqwestService, ResilientClient},
    retry::RetryPolicy,
    AttemptTimeoutLayer, Attempts, BoxError, DeadlineLayer, FailureKind, ResiliencePolicy,
    RetryReport, StatusRetryLayer, Stop,
};
use http_resilience_mock::{vacant_addr, MockResponse, MockServer};
use std::{collections::BTreeMap, error::Error as _, time::Duration};
use tokio::time::Instant;
use tower::{Service, ServiceBuilder};

const ATTEMPT: Duration = Duration::from_secs(3);
const TOTAL: Duration = Duration::from_secs(8);

/// A reqwest client with neither retries nor timeouts of its own.
fn reqwest() -> reqwest::Client {
    reqwest::Client::builder()
        .retry(reqwest::retry::never())
        .build()
        .expect("a client")
}

/// 503 retried twice, 10 ms apart.
fn retry_503() -> RetryPolicy<StatusDecoder, FixedDelay> {
    RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(Duration::from_millis(10), 2),
    )
}

/// The policy as the combined service (`ResilienceLayer`).
fn combined(
    total: Duration,
    attempt: Duration,
) -> ResilientClient<http_resilience::Resilience<ReqwestService, StatusDecoder, FixedDelay>> {
    let policy = ResiliencePolicy::new(total, attempt, retry_503()).unwrap();
    ResilientClient::new(reqwest(), policy.layer())
}

/// What both forms are: a stack over reqwest that answers with a body
/// reqwest can read.
trait Stack:
    Service<
        http::Request<RequestBody>,
        Response = http::Response<Self::Body>,
        Error = BoxError,
        Future: Send,
    > + Clone
    + Send
    + 'static
{
    type Body: http_body::Body<Data = Bytes, Error: Into<BoxError>> + Send + Sync + 'static;
}

impl<S, B> Stack for S
where
    S: Service<http::Request<RequestBody>, Response = http::Response<B>, Error = BoxError>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
    B: http_body::Body<Data = Bytes> + Send + Sync + 'static,
    B::Error: Into<BoxError>,
{
    type Body = B;
}

/// The policy as the three layers in a `ServiceBuilder`.
fn layered(total: Duration, attempt: Duration) -> ResilientClient<impl Stack> {
    let stack = ServiceBuilder::new()
        .layer(DeadlineLayer::new(total))
        .layer(StatusRetryLayer::new(retry_503()))
        .layer(AttemptTimeoutLayer::new(attempt));
    ResilientClient::new(reqwest(), stack)
}

/// A streamed body of 23 bytes in two chunks, with no size hint.
fn streamed() -> reqwest::Body {
    let chunks: Vec<Result<&'static str, std::io::Error>> =
        vec![Ok("first half, "), Ok("second half")];
    reqwest::Body::wrap_stream(tokio_stream::iter(chunks))
}

fn attempts(response: &reqwest::Response) -> Option<Attempts> {
    response.extensions().get::<Attempts>().copied()
}

async fn two_503s_then_200(client: ResilientClient<impl Stack>) {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::new(503));
    server.enqueue(MockResponse::new(503));
    server.enqueue(MockResponse::ok("ok"));
    let url = format!("http://{}/value", server.addr());
    let response = guarded(client.get(&url).send()).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.url().as_str(), url);
    assert_eq!(attempts(&response).map(|a| a.get()), Some(3));
    assert_eq!(guarded(response.text()).await.unwrap(), "ok");
    assert_eq!(server.request_count(), 3);
}

#[tokio::test]
async fn get_is_retried_past_two_503s_through_the_combined_service() {
    two_503s_then_200(combined(TOTAL, ATTEMPT)).await;
}

#[tokio::test]
async fn get_is_retried_past_two_503s_through_the_three_layers() {
    two_503s_then_200(layered(TOTAL, ATTEMPT)).await;
}

#[tokio::test]
async fn a_streamed_post_with_an_idempotency_key_is_replayed() {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::new(503));
    server.enqueue(MockResponse::new(201).with_body("created"));
    let request = combined(TOTAL, ATTEMPT)
        .post(server.uri("/orders").to_string())
        .header("idempotency-key", "order-7")
        .body(streamed());
    let response = guarded(request.send()).await.unwrap();
    assert_eq!(response.status(), 201);
    assert_eq!(guarded(response.text()).await.unwrap(), "created");
    let seen = server.requests();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|r| r.body == "first half, second half"));
}

#[tokio::test]
async fn a_streamed_post_marked_idempotent_is_replayed() {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::new(503));
    server.enqueue(MockResponse::new(201));
    let request = layered(TOTAL, ATTEMPT)
        .post(server.uri("/orders").to_string())
        .extension(Idempotency::Idempotent)
        .body(streamed());
    let response = guarded(request.send()).await.unwrap();
    assert_eq!(response.status(), 201);
    let seen = server.requests();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|r| r.body == "first half, second half"));
}

#[tokio::test]
async fn a_streamed_post_without_idempotency_is_sent_once() {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::new(503).with_body("busy"));
    server.enqueue(MockResponse::ok("must not be asked for"));
    let request = combined(TOTAL, ATTEMPT)
        .post(server.uri("/orders").to_string())
        .body(streamed());
    let response = guarded(request.send()).await.unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(
        attempts(&response).map(|a| a.stop()),
        Some(Stop::NotIdempotent)
    );
    assert_eq!(guarded(response.text()).await.unwrap(), "busy");
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn a_stream_past_the_replay_cap_is_sent_once() {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::new(503));
    server.enqueue(MockResponse::ok("must not be asked for"));
    let request = layered(TOTAL, ATTEMPT)
        .with_replay_cap(8)
        .put(server.uri("/objects/7").to_string())
        .body(streamed());
    let response = guarded(request.send()).await.unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(
        attempts(&response).map(|a| a.stop()),
        Some(Stop::NotReplayable)
    );
    let seen = server.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].body, "first half, second half");
}

#[tokio::test]
async fn a_json_put_is_sent_again_whole() {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::new(503));
    server.enqueue(MockResponse::ok("stored"));
    let order = BTreeMap::from([("id", 7), ("quantity", 2)]);
    let request = combined(TOTAL, ATTEMPT)
        .put(server.uri("/orders/7").to_string())
        .json(&order);
    let response = guarded(request.send()).await.unwrap();
    assert_eq!(response.status(), 200);
    let seen = server.requests();
    assert_eq!(seen.len(), 2);
    for request in &seen {
        assert_eq!(request.body, r#"{"id":7,"quantity":2}"#);
        assert_eq!(request.headers["content-type"], "application/json");
    }
}

#[tokio::test]
async fn query_auth_and_form_reach_the_server() {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::ok("found"));
    server.enqueue(MockResponse::ok("posted"));
    let client = layered(TOTAL, ATTEMPT);
    let search = client
        .get(server.uri("/search").to_string())
        .query(&[("q", "tower layers"), ("page", "2")])
        .bearer_auth("t0ken");
    let response = guarded(search.send()).await.unwrap();
    assert_eq!(response.url().query(), Some("q=tower+layers&page=2"));
    let form = client
        .post(server.uri("/login").to_string())
        .basic_auth("ada", Some("lovelace"))
        .form(&[("remember", "yes")]);
    guarded(form.send()).await.unwrap();
    let seen = server.requests();
    assert_eq!(seen[0].uri.path(), "/search");
    assert_eq!(seen[0].uri.query(), Some("q=tower+layers&page=2"));
    assert_eq!(seen[0].headers["authorization"], "Bearer t0ken");
    assert_eq!(seen[1].headers["authorization"], "Basic YWRhOmxvdmVsYWNl");
    assert_eq!(
        seen[1].headers["content-type"],
        "application/x-www-form-urlencoded"
    );
    assert_eq!(seen[1].body, "remember=yes");
}

#[tokio::test]
async fn the_response_keeps_its_url_status_headers_and_body() {
    let server = guarded(MockServer::start()).await.unwrap();
    for _ in 0..3 {
        server.enqueue(
            MockResponse::new(202)
                .with_header("x-served-by", "mock")
                .with_body("several words of body"),
        );
    }
    let client = combined(TOTAL, ATTEMPT);
    let url = format!("http://{}/reports/9?format=text", server.addr());

    let response = guarded(client.get(&url).send()).await.unwrap();
    assert_eq!(response.url().as_str(), url);
    assert_eq!(response.status(), 202);
    assert_eq!(response.headers()["x-served-by"], "mock");
    assert_eq!(
        attempts(&response),
        None,
        "accepted at once: nothing to report"
    );
    assert_eq!(
        guarded(response.bytes()).await.unwrap(),
        "several words of body"
    );

    let mut response = guarded(client.head(&url).send()).await.unwrap();
    assert_eq!(response.status(), 202);
    assert_eq!(guarded(response.chunk()).await.unwrap(), None);

    let mut response = guarded(client.get(&url).send()).await.unwrap();
    let mut body = Vec::new();
    while let Some(chunk) = guarded(response.chunk()).await.unwrap() {
        body.extend_from_slice(&chunk);
    }
    assert_eq!(body, b"several words of body");
}

#[tokio::test]
async fn a_refused_connection_is_reqwests_connect_error() {
    let addr = vacant_addr().unwrap();
    let url = format!("http://{addr}/value");
    let err = guarded(combined(TOTAL, ATTEMPT).get(&url).send())
        .await
        .unwrap_err();
    let reqwest = err.reqwest().expect("reqwest's own error");
    assert!(reqwest.is_connect(), "{reqwest:?}");
    assert!(err.is_connect() && !err.is_timeout() && err.kind() != FailureKind::Deadline);
    assert_eq!(FailureKind::of(&err), FailureKind::ConnectRefused);
    assert_eq!(err.url().map(|url| url.as_str()), Some(url.as_str()));
    assert_eq!(err.attempts(), 1);
    assert_eq!(err.summary().map(|a| a.stop()), Some(Stop::Failed));
    assert!(err.into_reqwest().unwrap().is_connect());
}

async fn a_deadline_after_a_retry(client: ResilientClient<impl Stack>) -> reqwest_client::Error {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::new(503));
    server.enqueue(MockResponse::no_response());
    let start = Instant::now();
    let url = server.uri("/value").to_string();
    let err = guarded(client.get(&url).send()).await.unwrap_err();
    assert!(start.elapsed() < ATTEMPT * 2, "{:?}", start.elapsed());
    assert_eq!(err.url().map(|url| url.as_str()), Some(url.as_str()));
    assert!(err.reqwest().is_none(), "{err:?}");
    assert!(err.kind() == FailureKind::Deadline && err.is_timeout() && !err.is_connect());
    assert_eq!(FailureKind::of(&err), FailureKind::Deadline);
    assert!(errors::find::<DeadlineExceeded>(&err).is_some());
    assert_eq!(err.attempts(), 2);
    assert_eq!(server.request_count(), 2);
    err
}

#[tokio::test]
async fn a_deadline_is_the_layers_error_with_the_attempt_count() {
    let total = Duration::from_millis(800);
    // The failure itself, the error's source, is the deadline's.
    let err = a_deadline_after_a_retry(combined(total, ATTEMPT * 4)).await;
    assert!(err.source().unwrap().is::<DeadlineExceeded>(), "{err:?}");
    let err = a_deadline_after_a_retry(layered(total, ATTEMPT * 4)).await;
    assert!(err.source().unwrap().is::<DeadlineExceeded>(), "{err:?}");
}

#[tokio::test]
async fn a_request_timeout_becomes_its_deadline() {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::no_response());
    let start = Instant::now();
    let request = layered(TOTAL, ATTEMPT)
        .get(server.uri("/value").to_string())
        .timeout(Duration::from_millis(300));
    let err = guarded(request.send()).await.unwrap_err();
    assert_eq!(err.kind(), FailureKind::Deadline, "{err:?}");
    assert!(start.elapsed() < ATTEMPT, "{:?}", start.elapsed());
}

#[tokio::test]
async fn a_read_gap_limit_ends_a_stalled_body() {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::stall_after_head(200));
    let policy = ResiliencePolicy::new(TOTAL, ATTEMPT, retry_503()).unwrap();
    let stack = ServiceBuilder::new()
        .layer(policy.layer())
        .layer(ReadTimeoutLayer::new(Duration::from_millis(250)));
    let client = ResilientClient::new(reqwest(), stack);
    let start = Instant::now();
    let response = guarded(client.get(server.uri("/slow").to_string()).send())
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let err = guarded(response.bytes()).await.unwrap_err();
    assert_eq!(FailureKind::of(&err), FailureKind::ReadTimeout, "{err:?}");
    assert!(start.elapsed() < ATTEMPT, "{:?}", start.elapsed());
}

#[tokio::test]
async fn a_reqwest_builder_goes_through_the_stack() {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::new(503));
    server.enqueue(MockResponse::ok("first"));
    server.enqueue(MockResponse::new(503));
    server.enqueue(MockResponse::ok("second"));
    let client = combined(TOTAL, ATTEMPT);
    let own = client
        .get(server.uri("/value").to_string())
        .map_reqwest(|builder| builder.header("x-built-by", "reqwest"));
    let response = guarded(own.send()).await.unwrap();
    assert_eq!(guarded(response.text()).await.unwrap(), "first");

    let request = client
        .client()
        .get(server.uri("/value").to_string())
        .build()
        .unwrap();
    let response = guarded(client.execute(request)).await.unwrap();
    assert_eq!(guarded(response.text()).await.unwrap(), "second");
    let seen = server.requests();
    assert_eq!(seen.len(), 4);
    assert_eq!(seen[1].headers["x-built-by"], "reqwest");
}

#[tokio::test]
async fn a_callers_retry_report_records_the_attempts() {
    let server = guarded(MockServer::start()).await.unwrap();
    for _ in 0..3 {
        server.enqueue(MockResponse::new(503));
    }
    let report = RetryReport::new();
    let request = layered(TOTAL, ATTEMPT)
        .get(server.uri("/value").to_string())
        .extension(report.clone());
    let response = guarded(request.send()).await.unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(report.attempts(), 3);
    assert_eq!(report.summary().map(|a| a.stop()), Some(Stop::Exhausted));
}

#[tokio::test]
async fn the_response_url_is_the_one_redirected_to() {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::new(302).with_header("location", "/final"));
    server.enqueue(MockResponse::ok("moved here"));
    let client = layered(TOTAL, ATTEMPT);
    let response = guarded(client.get(server.uri("/first").to_string()).send())
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.url().path(), "/final");
    assert_eq!(guarded(response.text()).await.unwrap(), "moved here");
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn a_stack_from_elsewhere_answers_with_the_requests_url() {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::ok("plain"));
    let reqwest = reqwest();
    // A stack that keeps no extensions of the transport's response.
    let service = ServiceBuilder::new()
        .map_response(|response: http::Response<reqwest::Body>| {
            let (mut parts, body) = response.into_parts();
            parts.extensions.clear();
            http::Response::from_parts(parts, body)
        })
        .service(ReqwestService::new(reqwest.clone()));
    let client = ResilientClient::from_service(reqwest, service);
    let url = format!("http://{}/plain?x=1", server.addr());
    let response = guarded(client.get(&url).send()).await.unwrap();
    assert_eq!(response.url().as_str(), url);
    assert_eq!(guarded(response.text()).await.unwrap(), "plain");
}

#[tokio::test]
async fn the_deadline_bounds_a_body_read_with_reqwest() {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::stall_after_head(200));
    let total = Duration::from_millis(500);
    let client = layered(total, ATTEMPT);
    let start = Instant::now();
    let response = guarded(client.get(server.uri("/slow").to_string()).send())
        .await
        .unwrap();
    let err = guarded(response.text()).await.unwrap_err();
    assert!(err.is_body() || err.is_decode(), "{err:?}");
    assert_eq!(FailureKind::of(&err), FailureKind::Deadline, "{err:?}");
    assert!(errors::find::<DeadlineExceeded>(&err).is_some());
    assert!(start.elapsed() >= total && start.elapsed() < ATTEMPT);
}

/// A body held in memory goes to reqwest as its own bytes, so that reqwest
/// follows a 307 (which sends the body again), as it does alone.
async fn a_json_put_follows_a_307(client: ResilientClient<impl Stack>) {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::new(307).with_header("location", "/moved"));
    server.enqueue(MockResponse::ok("stored"));
    let order = BTreeMap::from([("id", 7)]);
    let url = server.uri("/orders/7").to_string();
    let direct = guarded(reqwest().put(&url).json(&order).send())
        .await
        .unwrap();
    assert_eq!(direct.status(), 200, "reqwest alone");
    server.enqueue(MockResponse::new(307).with_header("location", "/moved"));
    server.enqueue(MockResponse::ok("stored"));
    let response = guarded(client.put(&url).json(&order).send()).await.unwrap();
    assert_eq!(
        response.status(),
        200,
        "through the stack: {:?}",
        response.headers()
    );
    let moved: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.uri == "/moved")
        .collect();
    assert_eq!(moved.len(), 2);
    assert_eq!(moved[1].body, moved[0].body, "the body went again");
}

#[tokio::test]
async fn a_307_is_followed_with_a_body_in_memory_through_the_combined_service() {
    a_json_put_follows_a_307(combined(TOTAL, ATTEMPT)).await;
}

#[tokio::test]
async fn a_307_is_followed_with_a_body_in_memory_through_the_three_layers() {
    a_json_put_follows_a_307(layered(TOTAL, ATTEMPT)).await;
}
