//! Deadline propagation over a real client: every attempt tells the upstream
//! the budget it has left. Loopback server, real clock: the values are checked
//! against bounds and against each other, never to the millisecond.
//!
//! And a deadline copied from one request to another, as a gateway handler
//! copies its inbound deadline onto the calls it makes: it ends those calls,
//! on the paused clock and over loopback, whatever stack recorded it.

#[path = "../support/mod.rs"]
mod support;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    deadline::{error::DeadlineExceeded, DeadlineLayer},
    policy::{FixedDelay, StatusDecoder},
    propagate::PropagateDeadlineLayer,
    retry::{RetryPolicy, StatusRetryLayer},
    transport, Attempts, BoxError, FailureKind, RequestDeadline,
};
use http_resilience_mock::{MockResponse, MockServer};
use std::{convert::Infallible, time::Duration};
use support::{get, guarded, text};
use tokio::time::Instant;
use tower::{Service, ServiceBuilder, ServiceExt};

const TOTAL: Duration = Duration::from_secs(2);
const ATTEMPT: Duration = Duration::from_secs(5);
const DELAY_MS: u64 = 50;
const DELAY: Duration = Duration::from_millis(DELAY_MS);

#[tokio::test]
async fn each_attempt_sends_the_budget_it_has_left() {
    let server = MockServer::start().await.unwrap();
    server.enqueue(MockResponse::new(503));
    server.enqueue(MockResponse::ok("ok"));

    let client = transport::Builder::new()
        .build_http::<http_body_util::Full<bytes::Bytes>>()
        .expect("valid transport");
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(DELAY, 1),
    );
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(TOTAL))
        .layer(StatusRetryLayer::new(policy))
        .layer(PropagateDeadlineLayer::envoy().with_attempt_limit(ATTEMPT))
        .layer(AttemptTimeoutLayer::new(ATTEMPT))
        .service(client);

    let response = guarded(svc.oneshot(get(server.uri("/value"))))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(Attempts::of(&response), 2);
    assert_eq!(guarded(text(response.into_body())).await.unwrap(), "ok");

    let sent: Vec<u64> = server
        .requests()
        .iter()
        .map(|request| {
            request.headers["x-envoy-expected-rq-timeout-ms"]
                .to_str()
                .expect("ASCII")
                .parse()
                .expect("an integer of milliseconds")
        })
        .collect();
    assert_eq!(sent.len(), 2);
    // The 2 s deadline, not the 5 s attempt limit, is the smaller budget.
    assert!(sent.iter().all(|&ms| ms <= 2000), "{sent:?}");
    // At least the backoff passed between the two attempts.
    assert!(sent[1] < sent[0], "{sent:?}");
    assert!(sent[0] - sent[1] >= DELAY_MS, "{sent:?}");
}

/// The inbound side of a gateway: a `DeadlineLayer` of `budget` around a
/// handler that copies the deadline it finds onto `outbound` and sends it
/// through `client` in a task of its own (a call that outlives the inbound
/// one, as a fan-out or a notification does). Returns that task.
async fn copy_and_send<S>(
    budget: Duration,
    client: S,
    outbound: Request<Full<Bytes>>,
) -> tokio::task::JoinHandle<Result<S::Response, BoxError>>
where
    S: Service<Request<Full<Bytes>>, Error = BoxError> + Send + 'static,
    S::Future: Send,
    S::Response: Send + 'static,
{
    let (sent, task) = tokio::sync::oneshot::channel();
    let mut parts = Some((client, outbound, sent));
    let inbound = ServiceBuilder::new()
        .layer(DeadlineLayer::new(budget))
        .service_fn(move |inbound: Request<()>| {
            let (client, mut outbound, sent) = parts.take().expect("one inbound request");
            // The copy the propagation docs show.
            if let Some(deadline) = RequestDeadline::of(&inbound) {
                outbound.extensions_mut().insert(deadline);
            }
            let _ = sent.send(tokio::spawn(client.oneshot(outbound)));
            std::future::ready(Ok::<_, Infallible>(Response::new(Full::<Bytes>::default())))
        });
    let response = inbound.oneshot(Request::new(())).await.unwrap();
    assert_eq!(
        response.status(),
        StatusCode::OK,
        "the inbound call is over"
    );
    task.await.expect("the handler ran")
}

/// The outbound policy of the gateway: 503 retried twice. Its stack has a
/// 10 s attempt limit and no `DeadlineLayer` of its own.
fn policy() -> RetryPolicy<StatusDecoder, FixedDelay> {
    RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(DELAY, 2),
    )
}

const COPIED: Duration = Duration::from_millis(1500);
const ATTEMPT_LIMIT: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_copied_deadline_ends_an_outbound_call_with_no_deadline_layer() {
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = calls.clone();
    let client = ServiceBuilder::new()
        .layer(StatusRetryLayer::new(policy()))
        .layer(AttemptTimeoutLayer::new(ATTEMPT_LIMIT))
        .service_fn(move |_: Request<Full<Bytes>>| {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            // A silent upstream.
            std::future::pending::<Result<Response<Full<Bytes>>, Infallible>>()
        });
    let start = Instant::now();
    let task = copy_and_send(COPIED, client, Request::new(Full::default())).await;
    let err = guarded(task).await.unwrap().unwrap_err();
    assert_eq!(start.elapsed(), COPIED, "ended at the copied deadline");
    assert_eq!(
        err.downcast_ref::<DeadlineExceeded>()
            .map(DeadlineExceeded::duration),
        Some(COPIED),
        "with the deadline's error: {err}"
    );
    assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_copied_deadline_ends_an_outbound_call_over_loopback() {
    let server = MockServer::start().await.unwrap();
    server.enqueue(MockResponse::no_response());
    let client = transport::Builder::new()
        .build_http::<Full<Bytes>>()
        .expect("valid transport");
    let client = ServiceBuilder::new()
        .layer(StatusRetryLayer::new(policy()))
        .layer(AttemptTimeoutLayer::new(ATTEMPT_LIMIT))
        .service(client);
    let start = Instant::now();
    let task = copy_and_send(COPIED, client, get(server.uri("/value"))).await;
    let err = guarded(task).await.unwrap().unwrap_err();
    let elapsed = start.elapsed();
    assert_eq!(FailureKind::of(&*err), FailureKind::Deadline, "{err}");
    // Limits far apart: the copied 1.5 s, not the 10 s attempt limit.
    assert!(elapsed >= COPIED, "{elapsed:?}");
    assert!(elapsed < ATTEMPT_LIMIT / 2, "{elapsed:?}");
    assert_eq!(server.request_count(), 1);
}

mod limits;
mod rounding;
