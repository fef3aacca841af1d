//! Waiting for an open circuit's probe (`WaitForProbe`), on tokio's paused
//! clock, through the three layers and the combined service alike: an
//! attempt the circuit turns away is sent again at the end of the break when
//! that fits before the deadline, takes no retry-budget token, and ends the
//! call at once when it does not fit.

use http::{Request, Response, StatusCode};
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    breaker::{error::CircuitOpen, BreakerPolicy, WaitForProbe},
    deadline::DeadlineLayer,
    guard::GuardLayer,
    policy::{FixedDelay, RetryBudget, TransientDecoder},
    retry::{RetryPolicy, StatusRetryLayer},
    BoxError, FailureKind, ResiliencePolicy, RetryReport, Stop,
};
use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};
use tokio::time::Instant;
use tower::{util::BoxCloneService, Layer, ServiceExt};

const BREAK: Duration = Duration::from_secs(2);
const MARGIN: Duration = Duration::from_millis(100);

type Svc = BoxCloneService<Request<String>, Response<String>, BoxError>;

/// An upstream that answers 503 first, then 200, and notes when each
/// request came.
fn upstream(seen: Arc<Mutex<Vec<Duration>>>, start: Instant) -> Svc {
    let calls = Arc::new(AtomicUsize::new(0));
    BoxCloneService::new(tower::service_fn(move |_: Request<String>| {
        seen.lock().unwrap().push(start.elapsed());
        let status = if calls.fetch_add(1, Ordering::SeqCst) == 0 {
            503
        } else {
            200
        };
        let response = Response::builder().status(status).body(String::new());
        std::future::ready(response.map_err(BoxError::from))
    }))
}

/// The stack under test: the three layers with the breaker between the retry
/// and the attempt timeout, or the combined service with the same breaker.
fn stack(combined: bool, deadline: Duration, budget: Arc<RetryBudget>, inner: Svc) -> Svc {
    let breaker = BreakerPolicy::new(TransientDecoder::new())
        .consecutive_failures(1)
        .and_then(|p| p.break_growth(1.0, 0.0))
        .and_then(|p| p.break_duration(BREAK, BREAK))
        .unwrap();
    let retry = RetryPolicy::new(
        WaitForProbe::new(TransientDecoder::new()),
        FixedDelay::new(Duration::from_millis(10), 3),
    )
    .map_options(|o| o.deadline_aware(MARGIN).with_budget(budget));
    let attempt = Duration::from_secs(1);
    if combined {
        let policy = ResiliencePolicy::new(deadline, attempt, retry)
            .unwrap()
            .with_guard(breaker);
        return BoxCloneService::new(
            policy
                .layer()
                .layer(inner)
                .map_response(|r| r.map(|_| String::new())),
        );
    }
    let attempts = AttemptTimeoutLayer::new(attempt).layer(inner);
    let broken = GuardLayer::new(breaker).layer(attempts);
    let retried = StatusRetryLayer::new(retry).layer(broken);
    BoxCloneService::new(
        DeadlineLayer::new(deadline)
            .layer(retried)
            .map_response(|r| r.map(|_| String::new())),
    )
}

fn request(report: &RetryReport) -> Request<String> {
    let mut request = Request::get("http://upstream.test/")
        .body(String::new())
        .unwrap();
    request.extensions_mut().insert(report.clone());
    request
}

async fn waits_for_the_probe(combined: bool) {
    let start = Instant::now();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let budget = Arc::new(RetryBudget::new(10, 0.1).unwrap());
    let svc = stack(
        combined,
        Duration::from_secs(10),
        Arc::clone(&budget),
        upstream(Arc::clone(&seen), start),
    );
    let report = RetryReport::new();
    let response = svc.oneshot(request(&report)).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    // The 503 tripped the circuit; the retry 10 ms later was turned away;
    // the attempt after it went at the end of the break, as the probe.
    assert_eq!(
        *seen.lock().unwrap(),
        [Duration::ZERO, BREAK],
        "combined: {combined}"
    );
    let summary = report.summary().unwrap();
    assert_eq!((summary.get(), summary.stop()), (3, Stop::Accepted));
    // The 503 took a token; the turned-away attempt took none, and the
    // success put a tenth of one back.
    assert_eq!(budget.tokens_milli(), 9_100, "combined: {combined}");
}

async fn gives_up_when_the_probe_comes_too_late(combined: bool) {
    let start = Instant::now();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let budget = Arc::new(RetryBudget::new(10, 0.1).unwrap());
    let deadline = BREAK + MARGIN / 2;
    let svc = stack(
        combined,
        deadline,
        budget,
        upstream(Arc::clone(&seen), start),
    );
    let report = RetryReport::new();
    let err = svc.oneshot(request(&report)).await.unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::CircuitOpen, "{err}");
    assert!(err.downcast_ref::<CircuitOpen>().is_some());
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(10),
        "at once, not at the deadline"
    );
    assert_eq!(
        seen.lock().unwrap().len(),
        1,
        "only the first attempt was sent"
    );
    let summary = report.summary().unwrap();
    assert_eq!(
        (summary.get(), summary.stop()),
        (2, Stop::WouldMissDeadline)
    );
}

#[tokio::test(start_paused = true)]
async fn the_three_layers_wait_for_the_probe_when_it_fits() {
    waits_for_the_probe(false).await;
}

#[tokio::test(start_paused = true)]
async fn the_combined_service_waits_for_the_probe_when_it_fits() {
    waits_for_the_probe(true).await;
}

#[tokio::test(start_paused = true)]
async fn the_three_layers_give_up_at_once_when_the_probe_would_miss_the_deadline() {
    gives_up_when_the_probe_comes_too_late(false).await;
}

#[tokio::test(start_paused = true)]
async fn the_combined_service_gives_up_at_once_when_the_probe_would_miss_the_deadline() {
    gives_up_when_the_probe_comes_too_late(true).await;
}
