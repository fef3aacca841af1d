//! The transport's limits at their extremes.

use crate::support;
use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use http_resilience::{transport, BoxError};
use http_resilience_mock::{MockResponse, MockServer};
use std::time::Duration;
use tower::ServiceExt;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[tokio::test]
async fn a_pool_idle_timeout_of_duration_max_is_held_to_thirty_years() {
    support::record_panics();
    let upstream = MockServer::start().await.unwrap();
    upstream.enqueue(MockResponse::ok("first"));
    upstream.enqueue(MockResponse::ok("second"));
    let client = transport::Builder::new()
        .connect_timeout(Duration::MAX)
        .read_timeout(Duration::MAX)
        .pool_idle_timeout(Some(Duration::MAX))
        .build_http::<Full<Bytes>>()
        .unwrap();
    for expected in ["first", "second"] {
        let request = Request::get(upstream.uri("/"))
            .body(Full::default())
            .unwrap();
        let call = async {
            let response = client.clone().oneshot(request).await?;
            Ok::<_, BoxError>(response.into_body().collect().await?.to_bytes())
        };
        let body = tokio::time::timeout(support::GUARD, call)
            .await
            .expect("guard")
            .unwrap();
        assert_eq!(body, expected);
        // NOTE: the pool's idle timer starts once a connection is back in the
        // pool, in a task of its own; this gives it time to run.
        tokio::time::sleep(ms(50)).await;
    }
    assert_eq!(upstream.connection_count(), 1, "the connection was pooled");
    let panics = support::panics();
    assert!(
        !panics.iter().any(|panic| panic.contains("overflow")),
        "{panics:?}"
    );
}
