//! Clients from a file over the library's real client and a loopback server:
//! a client that hedges, stacked as the configuration's docs show, and the
//! attempt header a file turns off. On the real clock, with limits far apart.

use crate::support::{get, guarded, text};
use bytes::Bytes;
use http_body_util::Full;
use http_resilience::{
    breaker::CircuitBreakerLayer, config::ClientsConfig, hedge::HedgeLayer, transport,
    AttemptTimeoutLayer, Attempts, DeadlineLayer,
};
use http_resilience_mock::{MockResponse, MockServer};
use std::time::Duration;
use tokio::time::Instant;
use tower::Layer;
use tower::{ServiceBuilder, ServiceExt};

fn client() -> transport::HttpClient<Full<Bytes>> {
    transport::Builder::new()
        .connect_timeout(Duration::from_secs(1))
        .build_http()
        .unwrap()
}

const FILE: &str = r#"
[default]
deadline = "10s"
attempt_timeout = "8s"
retry.attempt_header = "x-attempt"

[clients.search.hedge]
delay = "200ms"
max_attempts = 2

[clients.grpc-quiet]
preset = "grpc"
retry.previous_attempts_header = "off"

[clients.grpc]
preset = "grpc"
"#;

#[tokio::test]
async fn a_client_that_hedges_in_the_file_takes_the_copy_that_answers() {
    let config = ClientsConfig::from_toml_str(FILE).unwrap();
    let policy = config.policy("search").unwrap();
    let hedge = config.hedge("search").unwrap().expect("search hedges");
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(policy.deadline()))
        .layer(HedgeLayer::new(hedge))
        .option_layer(
            policy
                .breaker()
                .policy()
                .cloned()
                .map(CircuitBreakerLayer::new),
        )
        .layer(AttemptTimeoutLayer::new(policy.attempt_timeout()))
        .service(client());
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::ok("slow").with_head_delay(Duration::from_secs(6)));
    server.enqueue(MockResponse::ok("fast"));

    let start = Instant::now();
    let response = guarded(svc.oneshot(get(server.uri("/search"))))
        .await
        .unwrap();

    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
    let attempts = *response.extensions().get::<Attempts>().unwrap();
    assert_eq!((attempts.get(), attempts.winner()), (2, 2));
    assert_eq!(text(response.into_body()).await.unwrap(), "fast");
    let numbers: Vec<_> = server
        .requests()
        .iter()
        .map(|r| {
            r.headers
                .get("x-attempt")
                .map(|v| v.to_str().unwrap().to_owned())
        })
        .collect();
    assert_eq!(
        numbers,
        [Some("1".to_owned()), Some("2".to_owned())],
        "the file's attempt header"
    );
}

/// The header every request to a server whose first answer is a 503 (gRPC's
/// `UNAVAILABLE`, retried) carries, for the client `name`.
async fn previous_attempts_sent_by(config: &ClientsConfig, name: &str) -> Vec<Option<String>> {
    let svc = config.layer(name).unwrap().layer(client());
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::new(503));
    server.enqueue(MockResponse::ok("back"));
    let response = guarded(svc.oneshot(get(server.uri("/v1/items"))))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    server
        .requests()
        .iter()
        .map(|r| {
            r.headers
                .get("grpc-previous-rpc-attempts")
                .map(|v| v.to_str().unwrap().to_owned())
        })
        .collect()
}

#[tokio::test]
async fn off_in_the_file_sends_no_attempt_header_the_grpc_decoders_included() {
    let config = ClientsConfig::from_toml_str(FILE).unwrap();
    assert_eq!(
        previous_attempts_sent_by(&config, "grpc").await,
        [None, Some("1".to_owned())]
    );
    assert_eq!(
        previous_attempts_sent_by(&config, "grpc-quiet").await,
        [None, None]
    );
}

#[tokio::test]
async fn a_bulkhead_in_the_file_turns_away_the_call_beyond_it() {
    let config = ClientsConfig::from_toml_str(
        "[clients.api]\ndeadline = \"10s\"\nattempt_timeout = \"8s\"\noverload.max_in_flight = 1",
    )
    .unwrap();
    let svc = config.layer("api").unwrap().layer(client());
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::ok("slow").with_head_delay(Duration::from_secs(1)));
    let held = tokio::spawn(svc.clone().oneshot(get(server.uri("/a"))));
    assert!(server.wait_for_requests(1, Duration::from_secs(5)).await);

    let err = guarded(svc.clone().oneshot(get(server.uri("/b"))))
        .await
        .unwrap_err();

    assert_eq!(
        http_resilience::FailureKind::of(&*err),
        http_resilience::FailureKind::Overloaded,
        "{err}"
    );
    assert_eq!(server.request_count(), 1, "never sent");
    let response = guarded(held).await.unwrap().unwrap();
    assert_eq!(text(response.into_body()).await.unwrap(), "slow");
}
