//! Nonsense and extremes through the layers: every limit of zero or of
//! `Duration::MAX` is taken without a panic and behaves as documented, and a
//! header map already full gets no header and no panic. (The constructors that
//! refuse nonsense with a typed error are tested in their modules.)

use crate::support;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Request, Response};
use http_body_util::{BodyExt, Full};
use http_resilience::{
    attempt_timeout::{error::AttemptTimedOut, AttemptTimeoutLayer},
    deadline::{error::DeadlineExceeded, DeadlineLayer},
    policy::{FixedDelay, StatusDecoder},
    propagate::{PropagateDeadlineLayer, EXPECTED_RQ_TIMEOUT_MS},
    read_timeout::{body::ReadTimeoutBody, error::ReadTimedOut, ReadTimeoutLayer},
    retry::{RetryPolicy, StatusRetryLayer},
    Attempts, RequestDeadline, Stop,
};
use http_resilience_mock::body::ScriptedBody;
use std::{
    convert::Infallible,
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};
use tokio::time::Instant;
use tower::{Layer, ServiceBuilder, ServiceExt};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_zero_deadline_fails_at_once_without_calling() {
    let calls = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&calls);
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::ZERO))
        .service_fn(move |_: Request<String>| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, Infallible>(support::empty(200)) }
        });
    let err = svc.oneshot(Request::new(String::new())).await.unwrap_err();
    let exceeded = err
        .downcast_ref::<DeadlineExceeded>()
        .expect("the deadline");
    assert_eq!(exceeded.duration(), Duration::ZERO);
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_deadline_of_duration_max_is_no_deadline_in_practice() {
    let seen = Arc::new(Mutex::new(None));
    let record = Arc::clone(&seen);
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::MAX))
        .service_fn(move |request: Request<String>| {
            *record.lock().unwrap() = RequestDeadline::of(&request);
            async {
                // An hour of (paused) time is nothing to this deadline.
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"late"))))
            }
        });
    let response = tokio::time::timeout(Duration::from_secs(7200), svc.oneshot(Request::default()))
        .await
        .expect("guard")
        .unwrap();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "late");
    let deadline = seen
        .lock()
        .unwrap()
        .expect("recorded for the layers inside");
    assert_eq!(deadline.budget(), Duration::MAX);
    assert!(deadline.remaining() > support::ALMOST_NEVER);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn attempt_timeouts_of_zero_and_duration_max() {
    // Zero: a response ready at once gets through, a wait does not.
    let ready = AttemptTimeoutLayer::new(Duration::ZERO).layer(tower::service_fn(
        |_: Request<String>| async { Ok::<_, Infallible>(support::empty(200)) },
    ));
    assert_eq!(
        ready.oneshot(Request::default()).await.unwrap().status(),
        200
    );
    let waiting = AttemptTimeoutLayer::new(Duration::ZERO).layer(tower::service_fn(
        |_: Request<String>| async {
            tokio::time::sleep(ms(1)).await;
            Ok::<_, Infallible>(support::empty(200))
        },
    ));
    let err = waiting.oneshot(Request::default()).await.unwrap_err();
    assert!(err.is::<AttemptTimedOut>(), "{err}");

    // `Duration::MAX`: an hour-long attempt is fine, with or without a deadline.
    let slow = || {
        tower::service_fn(|_: Request<String>| async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok::<_, Infallible>(support::empty(200))
        })
    };
    let alone = AttemptTimeoutLayer::new(Duration::MAX).layer(slow());
    let guarded =
        tokio::time::timeout(Duration::from_secs(7200), alone.oneshot(Request::default()));
    assert_eq!(guarded.await.expect("guard").unwrap().status(), 200);
    let stacked = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::MAX))
        .layer(AttemptTimeoutLayer::new(Duration::MAX).final_attempt_uses_deadline())
        .service(slow());
    let guarded = tokio::time::timeout(
        Duration::from_secs(7200),
        stacked.oneshot(Request::default()),
    );
    assert_eq!(guarded.await.expect("guard").unwrap().status(), 200);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn read_timeouts_of_zero_and_duration_max() {
    let hour = Duration::from_secs(3600);
    let patient = ReadTimeoutBody::new(
        ScriptedBody::new().data("a").wait(hour).data("b"),
        Duration::MAX,
    );
    let body = tokio::time::timeout(2 * hour, patient.collect())
        .await
        .expect("guard")
        .unwrap();
    assert_eq!(body.to_bytes(), "ab");

    let impatient = ReadTimeoutBody::new(
        ScriptedBody::new().data("a").wait(ms(1)).data("b"),
        Duration::ZERO,
    );
    let err = impatient.collect().await.unwrap_err();
    assert!(err.is::<ReadTimedOut>(), "{err}");

    // The layer: a head an hour late is in time for `Duration::MAX`.
    let svc = ReadTimeoutLayer::new(Duration::MAX).layer(tower::service_fn(
        move |_: Request<()>| async move {
            tokio::time::sleep(hour).await;
            Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
        },
    ));
    let guarded = tokio::time::timeout(2 * hour, svc.oneshot(Request::new(())));
    assert_eq!(guarded.await.expect("guard").unwrap().status(), 200);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_retry_wait_of_duration_max_is_cut_by_the_deadline() {
    let calls = Arc::new(AtomicU32::new(0));
    let counter = Arc::clone(&calls);
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(Duration::MAX, u32::MAX),
    )
    .map_options(|o| o.with_attempt_header(HeaderName::from_static("x-attempt")));
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_secs(1)))
        .layer(StatusRetryLayer::new(policy))
        .service_fn(move |_: Request<String>| {
            counter.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, Infallible>(support::empty(503)) }
        });
    let start = Instant::now();
    let outcome = tokio::time::timeout(support::GUARD, svc.oneshot(Request::default()))
        .await
        .expect("guard");
    let err = outcome.unwrap_err();
    assert!(err.is::<DeadlineExceeded>(), "{err}");
    assert_eq!(start.elapsed(), Duration::from_secs(1));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn deadline_awareness_of_duration_max_makes_no_retry() {
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(ms(10), 2),
    )
    .map_options(|o| o.deadline_aware(Duration::MAX));
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::MAX))
        .layer(StatusRetryLayer::new(policy))
        .service_fn(|_: Request<String>| async { Ok::<_, Infallible>(support::empty(503)) });
    let response = svc.oneshot(Request::default()).await.unwrap();
    let attempts = response.extensions().get::<Attempts>().copied().unwrap();
    assert_eq!(
        (attempts.get(), attempts.stop()),
        (1, Stop::WouldMissDeadline)
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_full_header_map_gets_no_extra_header_and_no_panic() {
    // Fill a header map until it takes no more names.
    let mut headers = HeaderMap::new();
    let mut n = 0u32;
    while headers
        .try_insert(
            HeaderName::try_from(format!("x-filler-{n}")).unwrap(),
            HeaderValue::from_static("1"),
        )
        .is_ok()
    {
        n += 1;
    }
    let attempt_header = HeaderName::from_static("x-attempt");
    let seen = Arc::new(Mutex::new(None));
    let record = Arc::clone(&seen);
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(ms(10), 1),
    )
    .map_options(|o| o.with_attempt_header(attempt_header.clone()));
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_secs(5)))
        .layer(StatusRetryLayer::new(policy))
        .layer(PropagateDeadlineLayer::envoy())
        .service_fn(move |request: Request<String>| {
            let headers = request.headers();
            *record.lock().unwrap() = Some((
                headers.len(),
                headers.contains_key(&attempt_header),
                headers.contains_key(EXPECTED_RQ_TIMEOUT_MS),
            ));
            async { Ok::<_, Infallible>(support::empty(200)) }
        });
    let mut request = Request::new(String::new());
    *request.headers_mut() = headers;
    let response = svc.oneshot(request).await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        *seen.lock().unwrap(),
        Some((n as usize, false, false)),
        "the request arrives as it was, without the two headers"
    );
}

/// An attempt limit longer than the deadline: both forms take it, and the
/// deadline wins, with its own error, at its own instant.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_attempt_limit_above_the_deadline_means_the_deadline_in_both_forms() {
    let (deadline, attempt) = (ms(1000), ms(3000));
    let hangs = tower::service_fn(|_: Request<String>| async {
        std::future::pending::<Result<Response<String>, Infallible>>().await
    });
    let retry = || {
        RetryPolicy::new(
            StatusDecoder::new([503]).unwrap(),
            FixedDelay::new(ms(10), 2),
        )
    };
    let layers = ServiceBuilder::new()
        .layer(DeadlineLayer::new(deadline))
        .layer(StatusRetryLayer::new(retry()))
        .layer(AttemptTimeoutLayer::new(attempt))
        .service(hangs);
    let resilience = http_resilience::ResiliencePolicy::new(deadline, attempt, retry())
        .expect("the deadline wins over a longer attempt limit");
    let combined = resilience.layer().layer(hangs);

    let start = Instant::now();
    let err = layers
        .oneshot(Request::new(String::new()))
        .await
        .unwrap_err();
    assert!(err.is::<DeadlineExceeded>(), "{err}");
    assert_eq!(start.elapsed(), deadline);

    let start = Instant::now();
    let err = combined
        .oneshot(Request::new(String::new()))
        .await
        .unwrap_err();
    assert!(err.is::<DeadlineExceeded>(), "{err}");
    assert_eq!(start.elapsed(), deadline);
}
