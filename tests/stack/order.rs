//! The order of the layers is the semantics: the same parts stacked in another
//! order behave as the crate docs' `# Order` section says. Paused clock,
//! tower-test mocks.

use crate::support;

use http::{Request, Response, StatusCode};
use http_resilience::{
    attempt_timeout::{error::AttemptTimedOut, AttemptTimeoutLayer},
    deadline::{error::DeadlineExceeded, DeadlineLayer},
    policy::{FixedDelay, StatusDecoder},
    retry::{RetryPolicy, StatusRetryLayer},
    Attempts, RequestDeadline,
};
use std::time::Duration;
use support::guarded;
use tokio::{task::JoinHandle, time::Instant};
use tower::{ServiceBuilder, ServiceExt};
use tower_test::mock;

type Req = Request<String>;
type Resp = Response<String>;

const ATTEMPT: Duration = Duration::from_millis(500);
const DELAY: Duration = Duration::from_millis(200);
const SLOW: Duration = Duration::from_millis(400);

fn retry_503() -> StatusRetryLayer<StatusDecoder, FixedDelay> {
    StatusRetryLayer::new(RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(DELAY, 2),
    ))
}

/// An upstream that answers every request with a 503 after 400 ms, and records
/// when each attempt began and the deadline it carried.
fn slow_unavailable(
    start: Instant,
    mut handle: mock::Handle<Req, Resp>,
) -> JoinHandle<Vec<(Duration, Option<RequestDeadline>)>> {
    tokio::spawn(async move {
        let mut attempts = Vec::new();
        while let Some((request, send)) = handle.next_request().await {
            attempts.push((start.elapsed(), RequestDeadline::of(&request)));
            tokio::time::sleep(SLOW).await;
            send.send_response(Response::builder().status(503).body(String::new()).unwrap());
        }
        attempts
    })
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn attempt_timeout_inside_the_retry_restarts_for_every_attempt() {
    let (upstream, handle) = mock::pair::<Req, Resp>();
    let start = Instant::now();
    let server = slow_unavailable(start, handle);
    let svc = ServiceBuilder::new()
        .layer(retry_503())
        .layer(AttemptTimeoutLayer::new(ATTEMPT))
        .service(upstream);
    let response = guarded(svc.oneshot(Request::new(String::new())))
        .await
        .unwrap();
    // Three attempts of 400 ms, each under its own 500 ms, and two waits.
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(Attempts::of(&response), 3);
    assert_eq!(start.elapsed(), 3 * SLOW + 2 * DELAY);
    assert_eq!(server.await.unwrap().len(), 3);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn attempt_timeout_outside_the_retry_never_restarts() {
    let (upstream, handle) = mock::pair::<Req, Resp>();
    let start = Instant::now();
    let server = slow_unavailable(start, handle);
    let svc = ServiceBuilder::new()
        .layer(AttemptTimeoutLayer::new(ATTEMPT))
        .layer(retry_503())
        .service(upstream);
    let err = guarded(svc.oneshot(Request::new(String::new())))
        .await
        .unwrap_err();
    // One timer for everything: it fires during the first wait.
    assert!(err.is::<AttemptTimedOut>(), "{err}");
    assert_eq!(start.elapsed(), ATTEMPT);
    assert_eq!(
        server.await.unwrap().len(),
        1,
        "the retry never got to try again"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn deadline_outside_the_retry_bounds_the_whole_call() {
    let (upstream, handle) = mock::pair::<Req, Resp>();
    let start = Instant::now();
    let server = slow_unavailable(start, handle);
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(ATTEMPT))
        .layer(retry_503())
        .service(upstream);
    let err = guarded(svc.oneshot(Request::new(String::new())))
        .await
        .unwrap_err();
    assert!(err.is::<DeadlineExceeded>(), "{err}");
    assert_eq!(start.elapsed(), ATTEMPT);
    let attempts = server.await.unwrap();
    assert_eq!(attempts.len(), 1);
    let deadline = attempts[0]
        .1
        .expect("the deadline is recorded for inner layers");
    assert_eq!(deadline.instant(), start + ATTEMPT);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn deadline_inside_the_retry_restarts_for_every_attempt() {
    let (upstream, handle) = mock::pair::<Req, Resp>();
    let start = Instant::now();
    let server = slow_unavailable(start, handle);
    let svc = ServiceBuilder::new()
        .layer(retry_503())
        .layer(DeadlineLayer::new(ATTEMPT))
        .service(upstream);
    let response = guarded(svc.oneshot(Request::new(String::new())))
        .await
        .unwrap();
    // Each attempt gets a fresh 500 ms; nothing bounds the call as a whole,
    // which runs 1.6 s, more than three times the "deadline".
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(Attempts::of(&response), 3);
    assert_eq!(start.elapsed(), 3 * SLOW + 2 * DELAY);
    let attempts = server.await.unwrap();
    let deadlines: Vec<_> = attempts
        .iter()
        .map(|(begun, deadline)| deadline.unwrap().instant() - (start + *begun))
        .collect();
    assert_eq!(deadlines, [ATTEMPT; 3], "a new deadline for every attempt");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_deadline_that_ends_an_attempt_is_the_deadline_layers_alone() {
    // The deadline (300 ms) comes before the attempt's limit (500 ms): the
    // attempt sets no timer, the deadline layer ends the call, and the retry
    // layer, cut off mid-attempt, reports no outcome.
    let (upstream, handle) = mock::pair::<Req, Resp>();
    let start = Instant::now();
    let server = slow_unavailable(start, handle);
    let events = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let heard = events.clone();
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(DELAY, 2),
    )
    .map_options(|o| {
        o.with_listener(move |event: &http_resilience::policy::CallEvent<'_>| {
            heard.lock().unwrap().push(format!("{event:?}"));
        })
    });
    let report = http_resilience::RetryReport::new();
    let mut request = Request::new(String::new());
    request.extensions_mut().insert(report.clone());
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_millis(300)))
        .layer(StatusRetryLayer::new(policy))
        .layer(AttemptTimeoutLayer::new(ATTEMPT))
        .service(upstream);
    let err = guarded(svc.oneshot(request)).await.unwrap_err();
    assert!(err.is::<DeadlineExceeded>(), "{err}");
    assert_eq!(start.elapsed(), Duration::from_millis(300));
    assert_eq!(report.attempts(), 1);
    assert_eq!(report.summary(), None);
    assert!(
        events.lock().unwrap().is_empty(),
        "{:?}",
        events.lock().unwrap()
    );
    drop(server);
}
