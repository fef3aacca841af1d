//! Hedging through the public API over loopback: a real hyper-util client,
//! the mock server, and what the server sees of the copies that lost.

mod percentile;
#[path = "../support/mod.rs"]
mod support;
mod unsent_body;
mod waits;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use http_resilience::{
    body::ReplayBody,
    hedge::{HedgeDelay, HedgeLayer, HedgePolicy},
    policy::TransientDecoder,
    transport, Attempts, DeadlineLayer,
};
use http_resilience_mock::{body::ScriptedBody, MockResponse, MockServer};
use std::time::Duration;
use tokio::time::Instant;
use tower::{Layer, ServiceBuilder, ServiceExt};

const MS: fn(u64) -> Duration = Duration::from_millis;

fn policy(delay: Duration, max: u32) -> HedgePolicy<TransientDecoder> {
    HedgePolicy::new(TransientDecoder::new(), HedgeDelay::fixed(delay), max).unwrap()
}

/// Waits, on the real clock, until `done` holds; false at the guard.
async fn eventually(mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < support::GUARD {
        if done() {
            return true;
        }
        tokio::time::sleep(MS(10)).await;
    }
    false
}

#[tokio::test]
async fn the_loser_connection_is_closed_and_nothing_is_left_behind() {
    let server = MockServer::start().await.unwrap();
    server.enqueue(MockResponse::no_response());
    server.enqueue(MockResponse::ok("fast"));
    let metrics = tokio::runtime::Handle::current().metrics();
    let tasks_before = metrics.num_alive_tasks();

    let client = transport::Builder::new()
        .build_http::<Full<Bytes>>()
        .unwrap();
    let svc = HedgeLayer::new(policy(MS(100), 2)).layer(client);
    let request = http::Request::get(server.uri("/"))
        .body(Full::default())
        .unwrap();
    let response = tokio::time::timeout(support::GUARD, svc.clone().oneshot(request))
        .await
        .unwrap()
        .unwrap();
    let attempts = *response.extensions().get::<Attempts>().unwrap();
    assert_eq!((attempts.get(), attempts.winner()), (2, 2));
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "fast");

    // The first copy's connection was closed by the client: the server sees
    // one connection left open, the winner's, idle in the pool.
    assert_eq!(server.connection_count(), 2);
    assert!(
        eventually(|| server.open_connections() == 1).await,
        "{} connections open",
        server.open_connections()
    );
    assert_eq!(server.request_count(), 2);
    // Dropping the client closes the last one, and its tasks end.
    drop(svc);
    assert!(
        eventually(|| server.open_connections() == 0).await,
        "{} connections open",
        server.open_connections()
    );
    assert!(
        eventually(|| metrics.num_alive_tasks() <= tasks_before).await,
        "{} tasks alive, {tasks_before} before",
        metrics.num_alive_tasks()
    );
}

/// An HTTP/2 server of its own: it never answers the first stream and
/// reports how the client ended it; it answers the others at once.
async fn h2_server() -> (
    std::net::SocketAddr,
    tokio::sync::oneshot::Receiver<h2::Reason>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (reset_tx, reset_rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (socket, _) = listener.accept().await.unwrap();
        let mut connection = h2::server::handshake(socket).await.unwrap();
        let mut reset_tx = Some(reset_tx);
        while let Some(Ok((_request, mut respond))) = connection.accept().await {
            match reset_tx.take() {
                Some(tx) => {
                    tokio::spawn(async move {
                        let reason = std::future::poll_fn(|cx| respond.poll_reset(cx)).await;
                        let _ = tx.send(reason.unwrap());
                    });
                }
                None => {
                    let response = http::Response::new(());
                    let mut body = respond.send_response(response, false).unwrap();
                    body.send_data(Bytes::from_static(b"fast"), true).unwrap();
                }
            }
        }
    });
    (addr, reset_rx)
}

#[tokio::test]
async fn the_loser_stream_is_reset_over_http2() {
    let (addr, reset) = h2_server().await;
    let client = transport::Builder::new()
        .http2_only(true)
        .build_http::<Full<Bytes>>()
        .unwrap();
    let svc = HedgeLayer::new(policy(MS(100), 2)).layer(client);
    let request = http::Request::get(format!("http://{addr}/"))
        .body(Full::default())
        .unwrap();
    let response = tokio::time::timeout(support::GUARD, svc.oneshot(request))
        .await
        .unwrap()
        .unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "fast");
    // The server sees the first copy's stream reset by the client.
    let reason = tokio::time::timeout(support::GUARD, reset)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(reason, h2::Reason::CANCEL);
}

#[tokio::test]
async fn a_post_without_an_idempotency_key_is_sent_exactly_once() {
    let server = MockServer::start().await.unwrap();
    server.enqueue(MockResponse::ok("slow").with_head_delay(MS(600)));
    let client = transport::Builder::new()
        .build_http::<Full<Bytes>>()
        .unwrap();
    let svc = HedgeLayer::new(policy(MS(50), 3)).layer(client);
    let post = http::Request::post(server.uri("/orders"))
        .body(Full::new(Bytes::from_static(b"{}")))
        .unwrap();
    let start = Instant::now();
    let response = tokio::time::timeout(support::GUARD, svc.oneshot(post))
        .await
        .unwrap()
        .unwrap();
    assert!(start.elapsed() >= MS(600));
    assert_eq!(response.status(), 200);
    assert_eq!(server.request_count(), 1);
}

#[tokio::test]
async fn a_streamed_body_reaches_each_copy_intact() {
    let server = MockServer::start().await.unwrap();
    server.enqueue(MockResponse::no_response());
    server.enqueue(MockResponse::ok("stored"));
    let client = transport::Builder::new()
        .build_http::<ReplayBody<ScriptedBody>>()
        .unwrap();
    // The deadline outside, as the docs order it; the hedge after 40 ms,
    // while the first copy is still sending its body.
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_secs(10)))
        .layer(HedgeLayer::new(policy(MS(40), 2)))
        .service(client);
    let body = ScriptedBody::new()
        .data("first part, ")
        .wait(MS(60))
        .data("second part, ")
        .wait(MS(60))
        .data("last part");
    // A PUT: idempotent, so it may be hedged.
    let put = http::Request::put(server.uri("/blob"))
        .body(ReplayBody::new(body))
        .unwrap();
    let response = tokio::time::timeout(support::GUARD, svc.oneshot(put))
        .await
        .unwrap()
        .unwrap();
    let stored = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(stored, "stored");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    for request in requests {
        assert_eq!(request.body, "first part, second part, last part");
    }
}
