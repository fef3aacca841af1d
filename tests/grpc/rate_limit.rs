//! The rate limit in front of a real tonic channel, against a real tonic
//! server: a `RESOURCE_EXHAUSTED` with pushback pauses every call to the
//! server for the time it names, and a call the limit turns away reaches the
//! tonic caller as `RESOURCE_EXHAUSTED`, never sent, its source the
//! library's `RateLimited`.

use super::{check, guarded, quick, server, Script, Step};
use http_resilience::{
    grpc::GrpcLayer,
    rate_limit::{RateLimitMode, RateLimitPolicy, RateLimited, ServerSignals, Signal},
};
use std::{error::Error as _, time::Duration};
use tonic::Code;
use tonic_health::pb::health_client::HealthClient;
use tower::Layer;

#[tokio::test]
async fn a_call_over_the_limit_is_resource_exhausted_and_never_sent() {
    let script = Script::new([Step::Pass, Step::Pass]);
    let channel = server(&script).await;
    let limit = RateLimitPolicy::new(1, Duration::from_secs(60))
        .unwrap()
        .with_mode(RateLimitMode::TurnAway);
    let layer = GrpcLayer::new(quick().with_guard(limit));
    let mut client = HealthClient::new(layer.layer(channel));
    guarded(client.check(check())).await.unwrap();

    let status = guarded(client.check(check())).await.unwrap_err();

    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
    let source = status.source().expect("the library's error");
    let limited = source.downcast_ref::<RateLimited>().expect("RateLimited");
    assert!(
        limited.retry_after() > Duration::from_secs(50),
        "{limited:?}"
    );
    assert_eq!(script.seen().len(), 1, "the second call was never sent");
}

#[tokio::test]
async fn pushback_on_resource_exhausted_pauses_every_call_to_the_server() {
    // The first call is told to push back 600 ms; the next one waits for it.
    let script = Script::new([Step::Status(8, Some("600")), Step::Pass]);
    let channel = server(&script).await;
    let limit = RateLimitPolicy::new(1_000, Duration::from_secs(1))
        .unwrap()
        .with_server_signals(ServerSignals::NONE.with(Signal::GrpcPushback));
    let layer = GrpcLayer::new(quick().with_guard(limit));
    let mut client = HealthClient::new(layer.layer(channel));
    let status = guarded(client.check(check())).await.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "the server's own");

    guarded(client.check(check())).await.unwrap();

    let seen = script.seen();
    assert_eq!(seen.len(), 2);
    let gap = seen[1].at - seen[0].at;
    assert!(gap >= Duration::from_millis(600), "never early: {gap:?}");
}
