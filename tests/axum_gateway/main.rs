//! The axum gateway of `crates/http-resilience/examples/axum_gateway.rs`, served on loopback and
//! driven by a real hyper-util client, in front of the scripted mock upstream.
//!
//! Everything runs on the real clock over real sockets (tokio's paused clock
//! fires timeouts falsely with them): the tests assert statuses, bodies and
//! request counts, never milliseconds, and every limit under test is far from
//! the guard.

#[path = "../../crates/http-resilience/examples/axum_gateway.rs"]
pub mod gateway;

use bytes::Bytes;
use http::{HeaderMap, Request, StatusCode};
use http_body::{Body, Frame, SizeHint};
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use http_resilience::policy::FixedDelay;
use http_resilience_mock::{body::ScriptedBody, vacant_addr, MockResponse, MockServer};
use hyper_util::{
    client::legacy::{connect::HttpConnector, Client},
    rt::TokioExecutor,
};
use std::{
    convert::Infallible,
    future::Future,
    net::SocketAddr,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

/// The guard on every await that could hang: far above every limit under test.
const GUARD: Duration = Duration::from_secs(20);

type ClientBody = BoxBody<Bytes, Infallible>;

/// An upstream and a gateway in front of it, with the example's limits.
async fn start() -> (MockServer, SocketAddr) {
    start_with(gateway::ATTEMPT, gateway::DEADLINE).await
}

/// An upstream and a gateway in front of it, with other limits.
async fn start_with(attempt: Duration, deadline: Duration) -> (MockServer, SocketAddr) {
    let upstream = guarded(MockServer::start()).await.unwrap();
    let router = gateway::gateway_with(upstream.uri("/"), attempt, deadline).unwrap();
    let addr = guarded(gateway::spawn(router)).await.unwrap();
    (upstream, addr)
}

/// Sends `request` to the gateway with a plain hyper-util client; the status,
/// headers and whole body that come back.
async fn send(request: Request<ClientBody>) -> (StatusCode, HeaderMap, String) {
    let client: Client<HttpConnector, ClientBody> =
        Client::builder(TokioExecutor::new()).build_http();
    let response = guarded(client.request(request)).await.unwrap();
    let (parts, body) = response.into_parts();
    let body = guarded(body.collect()).await.unwrap().to_bytes();
    (
        parts.status,
        parts.headers,
        String::from_utf8(body.to_vec()).unwrap(),
    )
}

fn get(gateway: SocketAddr, path: &str) -> Request<ClientBody> {
    Request::get(format!("http://{gateway}{path}"))
        .body(Full::default().boxed())
        .unwrap()
}

/// Awaits `future` under [`GUARD`], failing the test if it hangs.
async fn guarded<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(GUARD, future)
        .await
        .expect("the call hung past the test guard")
}

/// A body of unknown length, so that it goes out chunked and reaches the
/// gateway as a stream: `chunks` pieces of `size` bytes, 5 ms apart.
fn stream(chunks: usize, size: usize) -> (ClientBody, Bytes) {
    let mut script = ScriptedBody::new();
    let mut whole = Vec::new();
    for n in 0..chunks {
        let chunk = vec![b'a' + (n % 26) as u8; size];
        whole.extend_from_slice(&chunk);
        script = script.wait(Duration::from_millis(5)).data(chunk);
    }
    (Unsized(script).boxed(), Bytes::from(whole))
}

/// Hides the size of the body it wraps.
struct Unsized(ScriptedBody);

impl Body for Unsized {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.0).poll_frame(cx)
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::new()
    }
}

// ===== responses =====

#[tokio::test]
async fn two_503_then_success_reach_the_client_as_200_after_three_upstream_requests() {
    let (upstream, gateway) = start().await;
    upstream.enqueue(MockResponse::new(503));
    upstream.enqueue(MockResponse::new(503));
    upstream.enqueue(MockResponse::ok("ok"));
    let (status, _, body) = send(get(gateway, "/value?id=7")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, "ok");
    assert_eq!(upstream.request_count(), 3);
    assert!(upstream
        .requests()
        .iter()
        .all(|r| r.method == "GET" && r.uri == "/value?id=7"));
}

#[tokio::test]
async fn exhausted_503_passes_through_with_the_upstream_headers_and_body() {
    let (upstream, gateway) = start().await;
    for n in 1..=3 {
        upstream.enqueue(
            MockResponse::new(503)
                .with_header("x-attempt", &n.to_string())
                .with_body(format!("unavailable {n}")),
        );
    }
    upstream.enqueue(MockResponse::ok("must not be asked for"));
    let (status, headers, body) = send(get(gateway, "/value")).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(headers["x-attempt"], "3");
    assert_eq!(body, "unavailable 3");
    assert_eq!(upstream.request_count(), 3);
}

#[tokio::test]
async fn other_statuses_pass_through_after_one_request() {
    let (upstream, gateway) = start().await;
    upstream.enqueue(MockResponse::new(404).with_body("no such thing"));
    upstream.enqueue(MockResponse::ok("must not be asked for"));
    let (status, _, body) = send(get(gateway, "/missing")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body, "no such thing");
    assert_eq!(upstream.request_count(), 1);
}

// ===== failures =====

#[tokio::test]
async fn attempt_timeout_maps_to_502_and_is_not_retried() {
    // Attempt 1 s, deadline 2 s: the attempt runs out first.
    let (upstream, gateway) = start().await;
    upstream.enqueue(MockResponse::no_response());
    upstream.enqueue(MockResponse::ok("must not be asked for"));
    let (status, _, body) = send(get(gateway, "/silent")).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    assert!(body.contains("attempt timeout"), "{body}");
    assert_eq!(upstream.request_count(), 1);
}

#[tokio::test]
async fn deadline_maps_to_504() {
    // The attempt limit equals the deadline: the deadline, started first,
    // caps the attempt and ends it with its own error.
    let limit = Duration::from_millis(500);
    let (upstream, gateway) = start_with(limit, limit).await;
    upstream.enqueue(MockResponse::no_response());
    let (status, _, body) = send(get(gateway, "/silent")).await;
    assert_eq!(status, StatusCode::GATEWAY_TIMEOUT);
    assert!(body.contains("deadline exceeded"), "{body}");
    assert_eq!(upstream.request_count(), 1);
}

#[tokio::test]
async fn refused_upstream_maps_to_502() {
    // A port that was just bound and released: nothing listens there.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let closed = listener.local_addr().unwrap();
    drop(listener);
    let uri = format!("http://{closed}/").parse().unwrap();
    let router = gateway::gateway(uri).unwrap();
    let gateway = guarded(gateway::spawn(router)).await.unwrap();
    let (status, _, body) = send(get(gateway, "/value")).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    assert!(body.contains("connection refused"), "{body}");
}

// ===== request bodies =====

#[tokio::test]
async fn streamed_post_body_arrives_intact() {
    let (upstream, gateway) = start().await;
    upstream.enqueue(MockResponse::new(201).with_body("created"));
    let (body, sent) = stream(8, 512);
    let request = Request::post(format!("http://{gateway}/orders"))
        .body(body)
        .unwrap();
    let (status, _, answer) = send(request).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(answer, "created");
    let seen = upstream.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, "POST");
    // Streamed on, not collected first: the length is still unknown upstream.
    assert_eq!(seen[0].headers["transfer-encoding"], "chunked");
    assert!(!seen[0].headers.contains_key("content-length"));
    assert_eq!(seen[0].body.len(), 4096);
    assert_eq!(seen[0].body, sent);
}

#[tokio::test]
async fn streamed_post_to_an_upstream_that_restarts_arrives_once_intact() {
    // Nothing listens at the upstream's address until 300 ms in; the gateway
    // retries the refused connection every 50 ms.
    let addr = vacant_addr().unwrap();
    let router = gateway::gateway_with_retries(
        format!("http://{addr}/").parse().unwrap(),
        gateway::ATTEMPT,
        Duration::from_secs(5),
        FixedDelay::new(Duration::from_millis(50), 60),
    )
    .unwrap();
    let gateway = guarded(gateway::spawn(router)).await.unwrap();
    let upstream = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let upstream = MockServer::start_on(addr).await.unwrap();
        upstream.enqueue(MockResponse::new(201).with_body("created"));
        upstream
    });
    let (body, sent) = stream(8, 512);
    let request = Request::post(format!("http://{gateway}/orders"))
        .body(body)
        .unwrap();
    let (status, _, answer) = send(request).await;
    assert_eq!(status, StatusCode::CREATED, "{answer}");
    assert_eq!(answer, "created");
    let seen = guarded(upstream).await.unwrap().requests();
    assert_eq!(seen.len(), 1, "arrived once");
    assert_eq!(seen[0].method, "POST");
    assert_eq!(seen[0].body, sent, "intact");
}

#[tokio::test]
async fn streamed_put_after_503_is_retried_with_the_same_body() {
    let (upstream, gateway) = start().await;
    upstream.enqueue(MockResponse::new(503));
    upstream.enqueue(MockResponse::ok("updated"));
    let (body, sent) = stream(4, 1024);
    let request = Request::put(format!("http://{gateway}/orders/7"))
        .body(body)
        .unwrap();
    let (status, _, answer) = send(request).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(answer, "updated");
    let seen = upstream.requests();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|r| r.method == "PUT" && r.body == sent));
}

#[tokio::test]
async fn sized_put_after_503_is_retried_with_the_same_body() {
    let (upstream, gateway) = start().await;
    upstream.enqueue(MockResponse::new(503));
    upstream.enqueue(MockResponse::ok("updated"));
    let sent = Bytes::from_static(br#"{"item":"tea","count":3}"#);
    let request = Request::put(format!("http://{gateway}/orders/7"))
        .body(Full::new(sent.clone()).boxed())
        .unwrap();
    let (status, _, _) = send(request).await;
    assert_eq!(status, StatusCode::OK);
    let seen = upstream.requests();
    assert_eq!(seen.len(), 2);
    assert!(seen.iter().all(|r| r.body == sent));
}

#[tokio::test]
async fn post_after_503_is_not_retried() {
    let (upstream, gateway) = start().await;
    upstream.enqueue(MockResponse::new(503).with_body("busy"));
    upstream.enqueue(MockResponse::ok("must not be asked for"));
    let (body, sent) = stream(2, 256);
    let request = Request::post(format!("http://{gateway}/orders"))
        .body(body)
        .unwrap();
    let (status, _, answer) = send(request).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(answer, "busy");
    let seen = upstream.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].body, sent);
}

// ===== headers =====

#[tokio::test]
async fn hop_by_hop_headers_are_dropped_and_the_rest_forwarded() {
    let (upstream, gateway) = start().await;
    upstream.enqueue(MockResponse::ok("ok").with_header("x-upstream", "yes"));
    let request = Request::get(format!("http://{gateway}/search?q=tea"))
        .header("connection", "keep-alive, x-hop")
        .header("x-hop", "for this connection only")
        .header("keep-alive", "timeout=5")
        .header("x-request-id", "r-17")
        .body(Full::default().boxed())
        .unwrap();
    let (status, headers, _) = send(request).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["x-upstream"], "yes");
    let seen = upstream.requests();
    assert_eq!(seen.len(), 1);
    let request = &seen[0];
    assert_eq!(request.uri, "/search?q=tea");
    assert_eq!(request.headers["x-request-id"], "r-17");
    assert_eq!(
        request.headers["host"],
        upstream.addr().to_string(),
        "host names the upstream, not the gateway"
    );
    for name in ["connection", "keep-alive", "x-hop"] {
        assert!(!request.headers.contains_key(name), "{name} was forwarded");
    }
}

#[tokio::test]
async fn a_request_id_is_set_once_and_carried_by_every_attempt() {
    let (upstream, gateway) = start().await;
    upstream.enqueue(MockResponse::new(503));
    upstream.enqueue(MockResponse::ok("ok"));
    let (status, headers, body) = send(get(gateway, "/value")).await;
    assert_eq!((status, body.as_str()), (StatusCode::OK, "ok"));
    let id = headers[gateway::REQUEST_ID].clone();
    assert!(!id.is_empty());
    let seen = upstream.requests();
    assert_eq!(seen.len(), 2);
    assert!(
        seen.iter()
            .all(|request| request.headers[gateway::REQUEST_ID] == id),
        "the same id on both attempts, and on the response"
    );

    // An id the client sends is kept.
    upstream.enqueue(MockResponse::ok("ok"));
    let mut request = get(gateway, "/value");
    request
        .headers_mut()
        .insert(gateway::REQUEST_ID, "client-17".parse().unwrap());
    let (_, headers, _) = send(request).await;
    assert_eq!(headers[gateway::REQUEST_ID], "client-17");
    assert_eq!(
        upstream.requests()[2].headers[gateway::REQUEST_ID],
        "client-17"
    );
}
