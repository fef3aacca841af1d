//! Overload control in front of a real tonic channel, against a real tonic
//! server: the server's `RESOURCE_EXHAUSTED` shrinks an adaptive limit, and a
//! call the bulkhead turns away reaches the tonic caller as `UNAVAILABLE`,
//! never sent, its source the library's `Overloaded`.

use super::{check, guarded, quick, server, Script, Step};
use http_resilience::{
    grpc::GrpcLayer,
    key::PerKey,
    overload::{error::Overloaded, AdaptiveLimit, OverloadPolicy},
};
use std::error::Error as _;
use tonic::Code;
use tonic_health::pb::health_client::HealthClient;
use tower::Layer;

#[tokio::test]
async fn a_call_the_bulkhead_turns_away_is_unavailable_and_never_sent() {
    let script = Script::new([Step::Silent]);
    let channel = server(&script).await;
    let overload = OverloadPolicy::bulkhead(1).unwrap();
    let layer = GrpcLayer::new(quick().with_guard(overload.clone()));
    let mut held = HealthClient::new(layer.layer(channel.clone()));
    let mut turned_away = HealthClient::new(layer.layer(channel));
    let silent = tokio::spawn(async move { held.check(check()).await });
    while script.seen().is_empty() {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }

    let status = guarded(turned_away.check(check())).await.unwrap_err();

    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    let source = status.source().expect("the library's error");
    assert!(source.downcast_ref::<Overloaded>().is_some(), "{source}");
    assert_eq!(script.seen().len(), 1, "the second call was never sent");
    silent.abort();
}

#[tokio::test]
async fn resource_exhausted_shrinks_an_adaptive_limit() {
    // Every check is answered RESOURCE_EXHAUSTED, which the preset does not
    // retry: each call is one attempt and one overload signal.
    let script = Script::new(std::iter::repeat_n(Step::Status(8, None), 5));
    let channel = server(&script).await;
    let overload = OverloadPolicy::adaptive(AdaptiveLimit::new(20, 2, 20).unwrap());
    let layer = GrpcLayer::new(quick().with_guard(overload.clone()));
    let mut client = HealthClient::new(layer.layer(channel));
    for _ in 0..5 {
        let status = guarded(client.check(check())).await.unwrap_err();
        assert_eq!(
            status.code(),
            Code::ResourceExhausted,
            "the server's own, not turned away"
        );
    }
    // A client made with `new` sends path-only URIs: the empty authority.
    let states = overload.states();
    assert_eq!(states.len(), 1);
    let (_, state) = &states[0];
    // 20 × 0.9^5 is about 11.8.
    assert_eq!(state.limit, Some(11), "{state:?}");
}
