//! A server's pushback against the deadline and against a cap, through
//! `presets::grpc()`: the combined service (`policy.layer()`), the `GrpcLayer` and
//! the three layers, on tower-test mocks and the paused clock; and once over a
//! real tonic channel, on the real clock.

use super::{check, server, Script, Step};
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    deadline::DeadlineLayer,
    grpc::GrpcLayer,
    policy::{GrpcBackoff, GrpcDecoder},
    presets,
    retry::StatusRetryLayer,
    Attempts, ResiliencePolicy, Stop,
};
use std::{future::Future, time::Duration};
use tokio::time::Instant;
use tonic::Code;
use tonic_health::pb::health_client::HealthClient;
use tower::{Layer, ServiceBuilder, ServiceExt};
use tower_test::mock;

/// The preset's deadline, and a pushback twice as long.
const DEADLINE: Duration = Duration::from_secs(30);
const PUSHBACK: &str = "60000";
/// The cap of the tests without a deadline.
const CAP: Duration = Duration::from_secs(2);

async fn guarded<F: Future>(future: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(600), future)
        .await
        .expect("the call ended before the guard")
}

/// A trailers-only `UNAVAILABLE` with `grpc-retry-pushback-ms`.
fn pushed_back<B: Default>() -> Response<B> {
    Response::builder()
        .header("content-type", "application/grpc")
        .header("grpc-status", "14")
        .header("grpc-message", "overloaded")
        .header("grpc-retry-pushback-ms", PUSHBACK)
        .body(B::default())
        .unwrap()
}

fn ok<B: Default>() -> Response<B> {
    Response::builder()
        .header("grpc-status", "0")
        .body(B::default())
        .unwrap()
}

/// The server's response reached the caller as it came, at once, with the
/// retry's summary saying why it stopped.
fn assert_unavailable_at_once<B>(response: &Response<B>, start: Instant, form: &str) {
    assert_eq!(start.elapsed(), Duration::ZERO, "{form}: no wait at all");
    assert_eq!(response.headers()["grpc-status"], "14", "{form}");
    assert_eq!(response.headers()["grpc-message"], "overloaded", "{form}");
    let attempts = response.extensions().get::<Attempts>().expect("a summary");
    assert_eq!(attempts.get(), 1, "{form}");
    assert_eq!(attempts.stop(), Stop::WouldMissDeadline, "{form}");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_pushback_past_the_deadline_returns_the_unavailable_at_once_from_the_combined_service() {
    let (upstream, mut handle) = mock::pair::<Request<String>, Response<String>>();
    let policy = presets::grpc();
    assert_eq!(policy.deadline(), DEADLINE);
    let svc = policy.layer().layer(upstream);
    let start = Instant::now();
    let call = tokio::spawn(svc.oneshot(Request::new(String::new())));

    let (_, respond) = guarded(handle.next_request()).await.unwrap();
    respond.send_response(pushed_back());

    let response = guarded(call).await.unwrap().unwrap();
    assert_unavailable_at_once(&response, start, "policy.layer()");
    assert!(guarded(handle.next_request()).await.is_none(), "no retry");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_pushback_past_the_deadline_returns_the_unavailable_at_once_from_the_grpc_layer() {
    let (upstream, mut handle) =
        mock::pair::<Request<tonic::body::Body>, Response<tonic::body::Body>>();
    let svc = GrpcLayer::new(presets::grpc()).layer(upstream);
    let start = Instant::now();
    let call = tokio::spawn(svc.oneshot(Request::new(Full::<Bytes>::default())));

    let (_, respond) = guarded(handle.next_request()).await.unwrap();
    respond.send_response(pushed_back::<tonic::body::Body>());

    let response = guarded(call).await.unwrap().unwrap();
    assert_unavailable_at_once(&response, start, "GrpcLayer");
    assert!(guarded(handle.next_request()).await.is_none(), "no retry");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_pushback_past_the_deadline_returns_the_unavailable_at_once_from_the_three_layers() {
    let (upstream, mut handle) = mock::pair::<Request<String>, Response<String>>();
    let policy = presets::grpc();
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(policy.deadline()))
        .layer(StatusRetryLayer::new(policy.retry().clone()))
        .layer(AttemptTimeoutLayer::new(policy.attempt_timeout()))
        .service(upstream);
    let start = Instant::now();
    let call = tokio::spawn(svc.oneshot(Request::new(String::new())));

    let (_, respond) = guarded(handle.next_request()).await.unwrap();
    respond.send_response(pushed_back());

    let response = guarded(call).await.unwrap().unwrap();
    assert_unavailable_at_once(&response, start, "three layers");
    assert!(guarded(handle.next_request()).await.is_none(), "no retry");
}

/// The preset with the cap, and no deadline to speak of (`Duration::MAX` is
/// held to some thirty years).
fn capped_without_deadline() -> ResiliencePolicy<GrpcDecoder, GrpcBackoff> {
    presets::grpc()
        .with_deadline(Duration::MAX)
        .and_then(|policy| policy.with_attempt_timeout(Duration::MAX))
        .unwrap()
        .map_retry(|retry| retry.map(|decoder| decoder, |backoff| backoff.with_max_pushback(CAP)))
}

/// Answers the first request with the pushback and the second with OK;
/// returns the virtual time between the two.
async fn wait_between<Rq, B: Default>(handle: &mut mock::Handle<Rq, Response<B>>) -> Duration {
    let (_, respond) = guarded(handle.next_request()).await.unwrap();
    let first = Instant::now();
    respond.send_response(pushed_back());
    let (_, respond) = guarded(handle.next_request()).await.unwrap();
    let waited = first.elapsed();
    respond.send_response(ok());
    waited
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn without_a_deadline_the_cap_is_the_wait() {
    // The combined service.
    let (upstream, mut handle) = mock::pair::<Request<String>, Response<String>>();
    let svc = capped_without_deadline().layer().layer(upstream);
    let call = tokio::spawn(svc.oneshot(Request::new(String::new())));
    assert_eq!(wait_between(&mut handle).await, CAP, "policy.layer()");
    let response = guarded(call).await.unwrap().unwrap();
    assert_eq!(Attempts::of(&response), 2);

    // The `GrpcLayer`.
    let (upstream, mut handle) =
        mock::pair::<Request<tonic::body::Body>, Response<tonic::body::Body>>();
    let svc = GrpcLayer::new(capped_without_deadline()).layer(upstream);
    let call = tokio::spawn(svc.oneshot(Request::new(Full::<Bytes>::default())));
    assert_eq!(wait_between(&mut handle).await, CAP, "GrpcLayer");
    let response = guarded(call).await.unwrap().unwrap();
    assert_eq!(Attempts::of(&response), 2);

    // The retry layer alone: no deadline at all.
    let (upstream, mut handle) = mock::pair::<Request<String>, Response<String>>();
    let retry = capped_without_deadline().retry().clone();
    let svc = StatusRetryLayer::new(retry).layer(upstream);
    let call = tokio::spawn(svc.oneshot(Request::new(String::new())));
    assert_eq!(wait_between(&mut handle).await, CAP, "StatusRetryLayer");
    let response = guarded(call).await.unwrap().unwrap();
    assert_eq!(Attempts::of(&response), 2);
}

/// Over a real channel and the real clock: the server's `UNAVAILABLE` with a
/// pushback of a minute comes back well before the 30 s deadline.
#[tokio::test]
async fn a_pushback_past_the_deadline_ends_a_tonic_call_at_once() {
    let script = Script::new([Step::Status(14, Some(PUSHBACK))]);
    let channel = server(&script).await;
    let mut client = HealthClient::new(GrpcLayer::new(presets::grpc()).layer(channel));

    let start = Instant::now();
    let outcome = tokio::time::timeout(Duration::from_secs(5), client.check(check())).await;
    let elapsed = start.elapsed();

    let status = outcome
        .expect("the call ends well before the 30 s deadline")
        .unwrap_err();
    assert_eq!(status.code(), Code::Unavailable, "{status:?}");
    assert_eq!(status.message(), "scripted");
    assert!(elapsed < Duration::from_secs(5), "{elapsed:?}");
    assert_eq!(script.seen().len(), 1, "no retry");
}
