//! A streamed body that an abandoned attempt (its 503 came back
//! early) keeps reading during the backoff, past the replay cap. On tokio's
//! paused clock.

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use http_resilience::{
    body::ReplayBody,
    policy::{FixedDelay, StatusDecoder},
    retry::{RetryPolicy, StatusRetryLayer},
    BoxError, RetryReport, Stop,
};
use http_resilience_mock::body::ScriptedBody;
use std::{
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc,
    },
    time::Duration,
};
use tower::{Layer, ServiceExt};

type Sent = Request<ReplayBody<ScriptedBody>>;

/// An upstream that sheds load at once on the first call, its connection
/// going on reading the body; then answers with what it read.
fn upstream(
    calls: Arc<AtomicU32>,
) -> impl tower::Service<Sent, Response = Response<Full<Bytes>>, Error = BoxError, Future: Send> + Clone
{
    let seen = calls;
    tower::service_fn(move |request: Request<ReplayBody<ScriptedBody>>| {
        let n = seen.fetch_add(1, Ordering::SeqCst);
        async move {
            if n == 0 {
                // An upstream shedding load answers at once; the connection
                // goes on sending the body (as hyper does), 100 bytes every
                // 10 ms.
                tokio::spawn(async move {
                    let mut body = request.into_body();
                    while let Some(Ok(_)) = body.frame().await {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                });
                let busy = Response::builder()
                    .status(503)
                    .body(Full::<Bytes>::from("busy"));
                return Ok::<_, BoxError>(busy.unwrap());
            }
            let body = request.into_body().collect().await?.to_bytes();
            Ok(Response::new(Full::new(body)))
        }
    })
}

/// 2,000 bytes of unknown length, four times the cap of 500.
fn put(report: &RetryReport) -> Sent {
    let mut script = ScriptedBody::new().without_size_hint();
    for _ in 0..20 {
        script = script.data(vec![b'x'; 100]);
    }
    Request::put("http://upstream.test/blob")
        .extension(report.clone())
        .body(ReplayBody::with_cap(script, 500))
        .unwrap()
}

/// Asserts that the call ended with the first attempt's 503, no other
/// attempt sent, its report saying why.
fn the_503_stands<T, E: std::fmt::Display>(
    outcome: Result<Response<T>, E>,
    calls: &AtomicU32,
    report: &RetryReport,
) {
    let sent = calls.load(Ordering::SeqCst);
    let stop = report.summary().map(|s| s.stop());
    match outcome {
        Ok(response) => {
            assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(sent, 1, "no attempt sent with a body known to be lost");
        }
        Err(err) => panic!(
            "{sent} attempts sent; the caller got an error instead of the 503: {err} \
             (stop: {stop:?})"
        ),
    }
    assert_eq!(stop, Some(Stop::NotReplayable));
}

#[tokio::test(start_paused = true)]
async fn a_body_that_went_past_the_cap_during_the_backoff_is_not_sent_again() {
    let calls = Arc::new(AtomicU32::new(0));
    let upstream = upstream(Arc::clone(&calls));
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(Duration::from_secs(1), 2),
    );
    let svc = StatusRetryLayer::new(policy).layer(upstream);
    let report = RetryReport::new();
    let outcome = svc.oneshot(put(&report)).await;
    the_503_stands(outcome, &calls, &report);
}

/// The same through the combined service (`ResiliencePolicy::layer`).
#[tokio::test(start_paused = true)]
async fn the_combined_service_does_not_send_a_body_lost_during_the_backoff() {
    let calls = Arc::new(AtomicU32::new(0));
    let retry = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(Duration::from_secs(1), 2),
    );
    let svc = http_resilience::ResiliencePolicy::new(
        Duration::from_secs(30),
        Duration::from_secs(10),
        retry,
    )
    .unwrap()
    .layer()
    .layer(upstream(Arc::clone(&calls)));
    let report = RetryReport::new();
    let outcome = svc.oneshot(put(&report)).await;
    the_503_stands(outcome, &calls, &report);
}
