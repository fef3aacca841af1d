//! Fault injection in front of a real tonic channel, against a real tonic
//! server: gRPC's `UNAVAILABLE`, answered in the server's place as a
//! trailers-only response with pushback, is retried after the pushback as
//! the server's own would be; a refused connection the fault makes reaches
//! the tonic caller as the real one would.

use super::{attempts, check, guarded, quick, server, Script, Step};
use http_resilience::{
    fault::{Fault, FaultPolicy, InjectedFault},
    grpc::GrpcLayer,
    key::PerKey,
};
use std::{error::Error as _, time::Duration};
use tokio::time::Instant;
use tonic::Code;
use tonic_health::pb::{health_check_response::ServingStatus, health_client::HealthClient};
use tower::Layer;

#[tokio::test]
async fn an_injected_unavailable_is_retried_after_its_pushback_and_never_reaches_the_server() {
    let script = Script::new([Step::Pass]);
    let channel = server(&script).await;
    let pushback = Duration::from_millis(300);
    let faults = FaultPolicy::on_attempts([1], Fault::grpc_unavailable(Some(pushback))).unwrap();
    let layer = GrpcLayer::new(quick().with_guard(faults.clone()));
    let mut client = HealthClient::new(layer.layer(channel));

    let start = Instant::now();
    let response = guarded(client.check(check())).await.unwrap();

    assert!(start.elapsed() >= pushback, "{:?}", start.elapsed());
    assert_eq!(attempts(response.extensions()), 2);
    assert_eq!(response.into_inner().status(), ServingStatus::Serving);
    assert_eq!(
        script.seen().len(),
        1,
        "the first attempt was answered in its place"
    );
    assert_eq!(faults.states()[0].1.injected, 1);
}

#[tokio::test]
async fn an_injected_failure_reaches_the_tonic_caller_as_the_real_one_would() {
    // Refused: never sent, `UNAVAILABLE` as tonic gives its own connection
    // errors; reset: `UNKNOWN` as tonic gives a reset connection's.
    let cases = [
        (Fault::connect_refused(), Code::Unavailable),
        (Fault::connection_reset(), Code::Unknown),
    ];
    for (fault, code) in cases {
        let script = Script::new([]);
        let channel = server(&script).await;
        let faults = FaultPolicy::every(1, fault).unwrap();
        let layer = GrpcLayer::new(quick().with_guard(faults.clone()));
        let mut client = HealthClient::new(layer.layer(channel));

        let status = guarded(client.check(check())).await.unwrap_err();

        assert_eq!(status.code(), code, "{status:?}");
        let source = status.source().expect("the library's error");
        assert!(source.downcast_ref::<InjectedFault>().is_some(), "{source}");
        assert!(script.seen().is_empty(), "never sent");
        let attempts = faults.states()[0].1.attempts;
        let expected = if code == Code::Unavailable { 5 } else { 1 };
        assert_eq!(attempts, expected, "{code:?}: retried only when never sent");
    }
}
