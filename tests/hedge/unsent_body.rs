//! A hedge of a streamed body whose first copy has not begun to send
//! it (its connection is still being set up). On tokio's paused clock.

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use http_resilience::{
    body::ReplayBody,
    hedge::{HedgeDelay, HedgeLayer, HedgePolicy},
    policy::TransientDecoder,
    Attempts, BoxError,
};
use http_resilience_mock::body::ScriptedBody;
use std::{
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc,
    },
    time::Duration,
};
use tokio::time::Instant;
use tower::{Layer, ServiceExt};

#[tokio::test(start_paused = true)]
async fn a_hedge_is_not_held_back_by_a_first_copy_that_has_not_sent_its_body() {
    let calls = Arc::new(AtomicU32::new(0));
    let upstream = tower::service_fn(move |request: Request<ReplayBody<ScriptedBody>>| {
        let n = calls.fetch_add(1, Ordering::SeqCst);
        async move {
            if n == 0 {
                // The first copy's connection takes 10 s to set up: its body
                // is not read until then.
                tokio::time::sleep(Duration::from_secs(10)).await;
            }
            let body = request.into_body().collect().await?.to_bytes();
            Ok::<_, BoxError>(Response::new(Full::<Bytes>::new(body)))
        }
    });
    let policy = HedgePolicy::new(
        TransientDecoder::new(),
        HedgeDelay::fixed(Duration::from_millis(100)),
        2,
    )
    .unwrap();
    let svc = HedgeLayer::new(policy).layer(upstream);
    let put = Request::put("http://upstream.test/blob")
        .body(ReplayBody::new(ScriptedBody::new().data("abc").data("def")))
        .unwrap();
    let start = Instant::now();
    let response = svc.oneshot(put).await.unwrap();
    let took = start.elapsed();
    let winner = response.extensions().get::<Attempts>().unwrap().winner();
    assert_eq!(
        response.into_body().collect().await.unwrap().to_bytes(),
        "abcdef"
    );
    assert!(
        took < Duration::from_secs(1),
        "the hedge sent at 100 ms answered only after {took:?} (winner: copy {winner})"
    );
    assert_eq!(winner, 2);
}

/// The same over a real hyper-util client and the loopback mock server, on
/// the real clock: the first copy's connection takes 3 s to establish (a
/// lost SYN, a slow TLS handshake), the hedge's is at once.
#[tokio::test]
async fn over_loopback_a_hedge_is_not_held_back_by_a_slow_first_connection() {
    use http_resilience_mock::{MockResponse, MockServer};
    use hyper_util::{
        client::legacy::Client,
        rt::{TokioExecutor, TokioIo},
    };

    let server = MockServer::start().await.unwrap();
    server.enqueue(MockResponse::ok("first"));
    server.enqueue(MockResponse::ok("second"));
    let addr = server.addr();
    let connects = Arc::new(AtomicU32::new(0));
    let connector = tower::service_fn(move |_: http::Uri| {
        let n = connects.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            if n == 0 {
                tokio::time::sleep(Duration::from_secs(3)).await;
            }
            let stream = tokio::net::TcpStream::connect(addr).await?;
            Ok::<_, std::io::Error>(TokioIo::new(stream))
        })
    });
    let client =
        Client::builder(TokioExecutor::new()).build::<_, ReplayBody<ScriptedBody>>(connector);
    let policy = HedgePolicy::new(
        TransientDecoder::new(),
        HedgeDelay::fixed(Duration::from_millis(100)),
        2,
    )
    .unwrap();
    let svc = HedgeLayer::new(policy).layer(client);
    let put = Request::put(server.uri("/blob"))
        .body(ReplayBody::new(ScriptedBody::new().data("abc").data("def")))
        .unwrap();
    let start = Instant::now();
    let response = tokio::time::timeout(Duration::from_secs(10), svc.oneshot(put))
        .await
        .unwrap()
        .unwrap();
    let took = start.elapsed();
    let winner = response.extensions().get::<Attempts>().unwrap().winner();
    assert!(
        took < Duration::from_secs(2),
        "the hedge sent at 100 ms answered only after {took:?} (winner: copy {winner})"
    );
    assert_eq!(winner, 2);
    assert_eq!(server.requests()[0].body, "abcdef");
}
