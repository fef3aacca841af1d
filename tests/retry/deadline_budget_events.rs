//! Beyond the anchors: deadline-aware scheduling, a shared retry budget,
//! retry events and the attempt-number header. Timing on tokio's paused
//! clock with tower-test mocks; the budget's amplification bound over the
//! loopback mock server.

use crate::support;

use http::{HeaderName, Request, Response, StatusCode};
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    deadline::{error::DeadlineExceeded, DeadlineLayer},
    policy::{
        CallEvent, ExponentialBackoff, FixedDelay, RetryBudget, RetryEvent, StatusDecoder, Verdict,
        WaitSource,
    },
    retry::{RetryPolicy, StatusRetryLayer},
    Attempts, Stop,
};
use http_resilience_mock::{MockResponse, MockServer};
use std::{
    sync::{Arc, Mutex},
    time::Duration,
};
use support::{get, guarded, text};
use tokio::time::Instant;
use tower::{Layer, ServiceBuilder, ServiceExt};
use tower_test::mock;

type Req = Request<String>;
type Resp = Response<String>;

fn reply(status: u16) -> Resp {
    Response::builder()
        .status(status)
        .header("retry-after", "5")
        .body(format!("status {status}"))
        .unwrap()
}

/// An upstream that answers every request at once with `status`, and counts.
fn always(status: u16, mut handle: mock::Handle<Req, Resp>) -> tokio::task::JoinHandle<usize> {
    tokio::spawn(async move {
        let mut seen = 0;
        while let Some((_request, send)) = handle.next_request().await {
            seen += 1;
            send.send_response(reply(status));
        }
        seen
    })
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn deadline_aware_retries_return_the_last_outcome_instead_of_timing_out() {
    // Reactor's second timing contract, with deadline-aware scheduling on:
    // total 1.5 s, delay 1 s, instant 503s. The second wait cannot fit, so the
    // second 503 comes back at once, at 1 s, not a deadline error at 1.5 s.
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(Duration::from_secs(1), 2),
    )
    .map_options(|o| o.deadline_aware(Duration::from_millis(100)));
    let (upstream, handle) = mock::pair::<Req, Resp>();
    let server = always(503, handle);
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_millis(1500)))
        .layer(StatusRetryLayer::new(policy))
        .layer(AttemptTimeoutLayer::new(Duration::from_secs(1)))
        .service(upstream);
    let start = Instant::now();
    let response = guarded(svc.oneshot(Request::new(String::new())))
        .await
        .unwrap();
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    let attempts = *response.extensions().get::<Attempts>().unwrap();
    assert_eq!(
        (attempts.get(), attempts.stop()),
        (2, Stop::WouldMissDeadline)
    );
    assert_eq!(server.await.unwrap(), 2);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn without_the_switch_the_deadline_cuts_the_wait() {
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(Duration::from_secs(1), 2),
    );
    let (upstream, handle) = mock::pair::<Req, Resp>();
    let server = always(503, handle);
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_millis(1500)))
        .layer(StatusRetryLayer::new(policy))
        .service(upstream);
    let start = Instant::now();
    let err = guarded(svc.oneshot(Request::new(String::new())))
        .await
        .unwrap_err();
    assert!(err.is::<DeadlineExceeded>());
    assert_eq!(start.elapsed(), Duration::from_millis(1500));
    assert_eq!(server.await.unwrap(), 2);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_retry_after_longer_than_the_budget_is_not_slept_through() {
    // The server asks for 5 s; 2 s are left. .NET's standard handler sleeps
    // into its timeout here (dotnet/extensions#7701); this returns at once.
    let backoff =
        ExponentialBackoff::new(Duration::from_millis(100), 2.0, Duration::from_secs(10), 4)
            .unwrap();
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap().with_retry_after(),
        backoff,
    )
    .map_options(|o| o.deadline_aware(Duration::from_millis(100)));
    let (upstream, handle) = mock::pair::<Req, Resp>();
    let server = always(503, handle);
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_secs(2)))
        .layer(StatusRetryLayer::new(policy))
        .service(upstream);
    let start = Instant::now();
    let response = guarded(svc.oneshot(Request::new(String::new())))
        .await
        .unwrap();
    assert_eq!(start.elapsed(), Duration::ZERO);
    let attempts = *response.extensions().get::<Attempts>().unwrap();
    assert_eq!(attempts.stop(), Stop::WouldMissDeadline);
    assert_eq!(
        attempts.verdict().server_delay(),
        Some(Duration::from_secs(5))
    );
    assert_eq!(
        support::text(response.into_body()).await.unwrap(),
        "status 503"
    );
    assert_eq!(server.await.unwrap(), 1);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn listeners_hear_every_retry_and_the_give_up() {
    let events = Arc::new(Mutex::new(Vec::new()));
    let heard = events.clone();
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(Duration::from_millis(10), 1),
    )
    .map_options(|o| {
        o.with_listener(move |told: &CallEvent<'_>| {
            if !matches!(told.event, RetryEvent::AttemptEnd { .. }) {
                heard.lock().unwrap().push(told.event);
            }
        })
    });
    let (upstream, handle) = mock::pair::<Req, Resp>();
    let server = always(503, handle);
    let svc = StatusRetryLayer::new(policy).layer(upstream);
    let response = guarded(svc.oneshot(Request::new(String::new())))
        .await
        .unwrap();
    assert_eq!(response.status(), 503);
    drop(server);
    let unavailable = Verdict::retry(StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        *events.lock().unwrap(),
        [
            RetryEvent::Retry {
                attempt: 1,
                verdict: unavailable,
                wait: Duration::from_millis(10),
                source: WaitSource::Backoff,
                remaining: None,
            },
            RetryEvent::Done {
                attempts: 2,
                verdict: unavailable,
                stop: Stop::Exhausted,
            },
        ]
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn each_attempt_carries_its_number_in_a_header() {
    let name = HeaderName::from_static("x-attempt");
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(Duration::ZERO, 2),
    )
    .map_options(|o| o.with_attempt_header(name.clone()));
    let (upstream, mut handle) = mock::pair::<Req, Resp>();
    let svc = StatusRetryLayer::new(policy).layer(upstream);
    let server = tokio::spawn(async move {
        let mut numbers = Vec::new();
        while let Some((request, send)) = handle.next_request().await {
            numbers.push(request.headers()["x-attempt"].to_str().unwrap().to_owned());
            send.send_response(reply(503));
        }
        numbers
    });
    let _ = guarded(svc.oneshot(Request::new(String::new())))
        .await
        .unwrap();
    assert_eq!(server.await.unwrap(), ["1", "2", "3"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_budget_bounds_the_retries_of_many_callers() {
    // 20 callers, 3 retries each, against an upstream that always fails.
    // Without a budget the upstream would see 80 requests; with a bucket of
    // 10 tokens it sees at most 20 + 10 / 2.
    const CALLERS: usize = 20;
    let server = MockServer::start().await.unwrap();
    for _ in 0..4 * CALLERS {
        server.enqueue(MockResponse::new(503));
    }
    let budget = Arc::new(RetryBudget::new(10, 0.1).unwrap());
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(Duration::ZERO, 3),
    )
    .map_options(|o| o.with_budget(budget.clone()));
    let client = http_resilience::transport::Builder::new()
        .build_http::<http_body_util::Full<bytes::Bytes>>()
        .unwrap();
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_secs(10)))
        .layer(StatusRetryLayer::new(policy))
        .service(client);
    let calls: Vec<_> = (0..CALLERS)
        .map(|_| tokio::spawn(svc.clone().oneshot(get(server.uri("/busy")))))
        .collect();
    let mut refused = 0;
    for call in calls {
        let response = guarded(call).await.unwrap().unwrap();
        assert_eq!(response.status(), 503);
        let stop = response.extensions().get::<Attempts>().unwrap().stop();
        if stop == Stop::BudgetExhausted {
            refused += 1;
        }
        let _ = text(response.into_body()).await;
    }
    let seen = server.request_count();
    assert!(seen >= CALLERS, "every caller tried once");
    assert!(seen <= CALLERS + 5, "amplification bound: {seen} requests");
    assert!(
        refused >= CALLERS - 5,
        "the budget refused the rest: {refused}"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_final_attempt_may_use_the_whole_remaining_budget() {
    // Attempt 1: a 503 at once. Attempt 2 (the last one the retryer allows)
    // needs 1 s, twice its 500 ms limit, and 2 s are left.
    for (unbounded, expected) in [(false, "attempt"), (true, "ok")] {
        let policy = RetryPolicy::new(
            StatusDecoder::new([503]).unwrap(),
            FixedDelay::new(Duration::ZERO, 1),
        );
        let mut attempt = AttemptTimeoutLayer::new(Duration::from_millis(500));
        if unbounded {
            attempt = attempt.final_attempt_uses_deadline();
        }
        let (upstream, mut handle) = mock::pair::<Req, Resp>();
        let svc = ServiceBuilder::new()
            .layer(DeadlineLayer::new(Duration::from_secs(2)))
            .layer(StatusRetryLayer::new(policy))
            .layer(attempt)
            .service(upstream);
        let server = tokio::spawn(async move {
            let mut marks = Vec::new();
            let mut n = 0;
            while let Some((request, send)) = handle.next_request().await {
                n += 1;
                marks.push(
                    request
                        .extensions()
                        .get::<http_resilience::extensions::FinalAttempt>()
                        .is_some(),
                );
                if n == 2 {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    send.send_response(Response::new("ok".to_owned()));
                } else {
                    send.send_response(reply(503));
                }
            }
            marks
        });
        let outcome = guarded(svc.oneshot(Request::new(String::new()))).await;
        match outcome {
            Ok(response) => {
                assert_eq!(expected, "ok");
                assert_eq!(text(response.into_body()).await.unwrap(), "ok");
            }
            Err(err) => {
                assert_eq!(expected, "attempt", "{err}");
                assert_eq!(
                    http_resilience::FailureKind::of(&*err),
                    http_resilience::FailureKind::AttemptTimeout
                );
            }
        }
        assert_eq!(
            server.await.unwrap(),
            [false, true],
            "only the last is marked"
        );
    }
}

/// A preset adjusted with a listener, as a user adds metrics to it: every
/// event is heard, and reads as one line.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_preset_with_a_listener_hears_every_event() {
    use http_resilience::presets;

    let heard = Arc::new(Mutex::new(Vec::new()));
    let lines = Arc::clone(&heard);
    let policy = presets::reactor().map_retry(|retry| {
        retry.map_options(|o| {
            o.with_listener(move |heard: &CallEvent<'_>| {
                // NOTE: the retries and the end of the retry, as a timeline of
                // its decisions reads them.
                if let event @ (RetryEvent::Retry { .. } | RetryEvent::Done { .. }) = heard.event {
                    lines.lock().unwrap().push(event.to_string());
                }
            })
        })
    });
    let svc = policy
        .layer()
        .layer(tower::service_fn(|_: Request<String>| async {
            Ok::<_, std::convert::Infallible>(
                Response::builder().status(503).body(String::new()).unwrap(),
            )
        }));
    let response = svc.oneshot(Request::new(String::new())).await.unwrap();
    assert_eq!(response.status(), 503);
    let heard = heard.lock().unwrap().clone();
    assert_eq!(heard.len(), 3, "{heard:?}");
    assert!(
        heard[0].starts_with(
            "attempt 1: retry (503 Service Unavailable); waiting 10ms (backoff) before attempt 2, "
        ),
        "{heard:?}"
    );
    assert!(heard[1].starts_with("attempt 2: retry"), "{heard:?}");
    assert_eq!(
        heard[2],
        "done after 3 attempts: retries exhausted (last: retry (503 Service Unavailable))"
    );
}
