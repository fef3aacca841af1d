//! Clients from a file over the library's real client and a loopback server:
//! a client that hedges, stacked as the configuration's docs show, the
//! attempt header a file turns off, and one client's state shared by every
//! stack built for it. On the real clock, with limits far apart.

use crate::support::{get, guarded, text};
use bytes::Bytes;
use http_body_util::Full;
use http_resilience::{
    breaker::{error::CircuitOpen, CircuitState},
    config::ClientsConfig,
    errors,
    guard::GuardLayer,
    hedge::HedgeLayer,
    key::{PerKey, UpstreamKey},
    overload::{Overloaded, Rejection},
    transport, AttemptTimeoutLayer, Attempts, BoxError, DeadlineLayer, FailureKind,
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
                .guard()
                .breaker
                .as_ref()
                .cloned()
                .map(GuardLayer::new),
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

    assert_eq!(FailureKind::of(&*err), FailureKind::Overloaded, "{err}");
    assert_eq!(server.request_count(), 1, "never sent");
    let response = guarded(held).await.unwrap().unwrap();
    assert_eq!(text(response.into_body()).await.unwrap(), "slow");
}

/// A client that trips at the first 503 and makes no retry, and another
/// with the same settings.
const TRIPPING: &str = r#"
[default]
deadline = "10s"
attempt_timeout = "8s"
retry.max_attempts = 1
breaker.consecutive_failures = 1
breaker.break_duration = "1m"

[clients.api]
[clients.other]
"#;

/// The states of the circuits of client `name`'s breaker, through its policy.
fn circuits(config: &ClientsConfig, name: &str) -> Vec<(UpstreamKey, CircuitState)> {
    let policy = config.policy(name).unwrap();
    policy.guard().breaker.as_ref().expect("a breaker").states()
}

#[tokio::test]
async fn a_circuit_tripped_through_a_clients_layer_is_open_in_its_policy_and_its_other_layers() {
    let config = ClientsConfig::from_toml_str(TRIPPING).unwrap();
    let before = config.policy("api").unwrap();
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::new(503));
    let key = UpstreamKey::authority("http", "127.0.0.1", server.addr().port());

    let svc = config.layer("api").unwrap().layer(client());
    let response = guarded(svc.oneshot(get(server.uri("/a")))).await.unwrap();
    assert_eq!(response.status(), 503);

    // The policies built for the client, before and after, and through a
    // clone of the configuration, all see the circuit the layer tripped.
    let open = |states: Vec<(UpstreamKey, CircuitState)>| matches!(&states[..], [(k, CircuitState::Open { .. })] if *k == key);
    assert!(open(before.guard().breaker.as_ref().unwrap().states()));
    assert!(
        open(circuits(&config, "api")),
        "{:?}",
        circuits(&config, "api")
    );
    assert!(open(circuits(&config.clone(), "api")));
    // Another layer for the same client turns the next call away, unsent.
    let again = config.layer("api").unwrap().layer(client());
    let err = guarded(again.oneshot(get(server.uri("/b"))))
        .await
        .unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::CircuitOpen, "{err}");
    assert_eq!(server.request_count(), 1, "never sent");

    // Another client has circuits of its own, and so has a configuration
    // read again from the same text.
    assert!(circuits(&config, "other").is_empty());
    let reread = ClientsConfig::from_toml_str(TRIPPING).unwrap();
    assert!(circuits(&reread, "api").is_empty());
    server.enqueue(MockResponse::ok("fine"));
    let other = config.layer("other").unwrap().layer(client());
    let response = guarded(other.oneshot(get(server.uri("/c")))).await.unwrap();
    assert_eq!(text(response.into_body()).await.unwrap(), "fine");
    assert_eq!(server.request_count(), 2);
}

#[tokio::test]
async fn the_calls_in_flight_through_one_of_a_clients_stacks_count_in_all_of_them() {
    let config = ClientsConfig::from_toml_str(
        "[clients.api]\ndeadline = \"10s\"\nattempt_timeout = \"8s\"\noverload.max_in_flight = 1",
    )
    .unwrap();
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::ok("slow").with_head_delay(Duration::from_secs(1)));
    let first = config.layer("api").unwrap().layer(client());
    let held = tokio::spawn(first.oneshot(get(server.uri("/a"))));
    assert!(server.wait_for_requests(1, Duration::from_secs(5)).await);

    // The policy built apart counts the call in flight through the layer.
    let in_flight = || {
        let policy = config.policy("api").unwrap();
        let states = policy
            .guard()
            .overload
            .as_ref()
            .expect("overload control")
            .states();
        states.iter().map(|(_, state)| state.in_flight).sum::<u32>()
    };
    assert_eq!(in_flight(), 1);
    // A second stack for the same client is at the limit already.
    let second = config.layer("api").unwrap().layer(client());
    let err = guarded(second.oneshot(get(server.uri("/b"))))
        .await
        .unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::Overloaded, "{err}");
    assert_eq!(server.request_count(), 1, "never sent");

    let response = guarded(held).await.unwrap().unwrap();
    assert_eq!(text(response.into_body()).await.unwrap(), "slow");
    assert_eq!(in_flight(), 0);
}

#[tokio::test]
async fn a_turned_away_call_reads_the_same_whatever_the_limit_or_the_upstream() {
    let config = ClientsConfig::from_toml_str(
        r#"
        [default]
        deadline = "10s"
        attempt_timeout = "8s"
        retry.max_attempts = 1
        breaker.consecutive_failures = 1
        breaker.break_duration = "1m"

        [clients.one]
        overload.max_in_flight = 1
        [clients.two]
        overload.max_in_flight = 2
        "#,
    )
    .unwrap();
    // Overload control at two limits: the limit is the reason's field, not
    // a word of the message.
    let server = guarded(MockServer::start()).await.unwrap();
    for _ in 0..3 {
        server.enqueue(MockResponse::ok("slow").with_head_delay(Duration::from_secs(1)));
    }
    let one = config.layer("one").unwrap().layer(client());
    let two = config.layer("two").unwrap().layer(client());
    let held = [
        tokio::spawn(one.clone().oneshot(get(server.uri("/1")))),
        tokio::spawn(two.clone().oneshot(get(server.uri("/2")))),
        tokio::spawn(two.clone().oneshot(get(server.uri("/3")))),
    ];
    assert!(server.wait_for_requests(3, Duration::from_secs(5)).await);
    let full_one = guarded(one.oneshot(get(server.uri("/4"))))
        .await
        .unwrap_err();
    let full_two = guarded(two.oneshot(get(server.uri("/5"))))
        .await
        .unwrap_err();
    assert_eq!(full_one.to_string(), full_two.to_string());
    assert_eq!(
        full_one.to_string(),
        "overload control turned the call away: every slot taken and the queue full"
    );
    let limit = |err: &BoxError| match errors::find::<Overloaded>(&**err).map(Overloaded::reason) {
        Some(Rejection::QueueFull { limit }) => limit,
        other => panic!("{other:?}: {err}"),
    };
    assert_eq!((limit(&full_one), limit(&full_two)), (1, 2));
    for call in held {
        guarded(call).await.unwrap().unwrap();
    }

    // Two open circuits: the key is the error's, not a word of the message.
    let (a, b) = (
        guarded(MockServer::start()).await.unwrap(),
        guarded(MockServer::start()).await.unwrap(),
    );
    a.enqueue(MockResponse::new(503));
    b.enqueue(MockResponse::new(503));
    let svc = config.layer("api").unwrap().layer(client());
    for server in [&a, &b] {
        let response = guarded(svc.clone().oneshot(get(server.uri("/"))))
            .await
            .unwrap();
        assert_eq!(response.status(), 503);
    }
    let open_a = guarded(svc.clone().oneshot(get(a.uri("/"))))
        .await
        .unwrap_err();
    let open_b = guarded(svc.oneshot(get(b.uri("/")))).await.unwrap_err();
    assert_eq!(open_a.to_string(), "circuit open");
    assert_eq!(open_a.to_string(), open_b.to_string());
    let port = |err: &BoxError| errors::find::<CircuitOpen>(&**err).unwrap().key().port();
    assert_eq!(port(&open_a), Some(a.addr().port()));
    assert_eq!(port(&open_b), Some(b.addr().port()));
}
