//! A decoder that names neither the body nor the error type, on a real stack:
//! hyper-util's client from `transport::Builder`, behind an attempt timeout,
//! over loopback.

use crate::support::{get, guarded, text};
use http::StatusCode;
use http_resilience::{
    policy::{FixedDelay, Outcome, OutcomeDecoder, Verdict},
    retry::RetryPolicy,
    transport, AttemptTimeoutLayer, Attempts, FailureKind, StatusRetryLayer,
};
use http_resilience_mock::{MockResponse, MockServer};
use std::time::Duration;
use tower::{ServiceBuilder, ServiceExt};

#[tokio::test]
async fn an_outcome_decoder_judges_a_real_stacks_heads() {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::new(503).with_header("x-overloaded", "1"));
    server.enqueue(MockResponse::new(503));
    let decoder = OutcomeDecoder::new(|outcome: Outcome<'_>| match outcome {
        Outcome::Head { status, headers } if headers.contains_key("x-overloaded") => {
            Verdict::retry(status)
        }
        Outcome::Error(err) if FailureKind::of(err).is_before_send() => {
            Verdict::retry(FailureKind::of(err))
        }
        _ => Verdict::Accept,
    });
    let client = transport::Builder::new()
        .build_http::<http_body_util::Full<bytes::Bytes>>()
        .unwrap();
    let svc = ServiceBuilder::new()
        .layer(StatusRetryLayer::new(RetryPolicy::new(
            decoder,
            FixedDelay::new(Duration::from_millis(10), 3),
        )))
        .layer(AttemptTimeoutLayer::new(Duration::from_secs(5)))
        .service(client);
    let response = guarded(svc.oneshot(get(server.uri("/value"))))
        .await
        .unwrap();
    // The overloaded 503 was retried; the plain one the decoder accepted.
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(Attempts::of(&response), 2);
    assert_eq!(guarded(text(response.into_body())).await.unwrap(), "");
    assert_eq!(server.request_count(), 2);
}
