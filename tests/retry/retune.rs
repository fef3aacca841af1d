//! A preset retuned in one line keeps every other setting: the backoff
//! replaced and the decoder replaced (through `map_retry`), the attempts
//! bounded (`with_max_attempts`), on tokio's paused clock, through the
//! combined service a preset makes.

use http::{Request, Response, StatusCode};
use http_resilience::{
    policy::{AnyRetryer, FeignRetryer, FixedDelay, StatusDecoder},
    presets, Attempts, BoxError,
};
use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};
use tokio::time::Instant;
use tower::{Layer, ServiceExt};

/// An upstream answering `statuses` in turn (the last one from then on),
/// counting its calls.
fn upstream(
    statuses: &'static [u16],
    calls: Arc<AtomicUsize>,
) -> impl tower::Service<Request<String>, Response = Response<String>, Error = BoxError> + Clone {
    tower::service_fn(move |_: Request<String>| {
        let n = calls.fetch_add(1, Ordering::SeqCst);
        let status = statuses[n.min(statuses.len() - 1)];
        let response = Response::builder().status(status).body(String::new());
        std::future::ready(response.map_err(BoxError::from))
    })
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_preset_with_another_backoff_waits_as_that_backoff_says() {
    let calls = Arc::new(AtomicUsize::new(0));
    let policy = presets::standard()
        .map_retry(|retry| retry.with_retryer(FixedDelay::new(Duration::from_millis(10), 2)));
    assert!(
        format!("{:?}", policy.retry()).contains("deadline_margin: Some("),
        "deadline-aware stays"
    );
    let svc = policy
        .layer()
        .layer(upstream(&[503, 503, 200], Arc::clone(&calls)));
    let start = Instant::now();
    let response = svc.oneshot(Request::new(String::new())).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        start.elapsed(),
        Duration::from_millis(20),
        "two waits of 10 ms, not the preset's seconds"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_preset_with_fewer_attempts_stops_there() {
    let calls = Arc::new(AtomicUsize::new(0));
    let policy = presets::reactor().with_max_attempts(2).unwrap();
    let two_attempts = FixedDelay::new(Duration::from_millis(10), 1);
    assert!(
        format!("{:?}", policy.retry()).contains(&format!("{two_attempts:?}")),
        "the delay stays"
    );
    let svc = policy.layer().layer(upstream(&[503], Arc::clone(&calls)));
    let response = svc.oneshot(Request::new(String::new())).await.unwrap();
    assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(Attempts::of(&response), 2);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_preset_with_another_decoder_retries_what_that_decoder_says() {
    let calls = Arc::new(AtomicUsize::new(0));
    let policy = presets::reactor()
        .map_retry(|retry| retry.with_decoder(StatusDecoder::new([500]).unwrap()));
    let svc = policy
        .layer()
        .layer(upstream(&[500, 200], Arc::clone(&calls)));
    let response = svc.oneshot(Request::new(String::new())).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK, "500 is retried now");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[test]
fn settings_that_do_not_fit_are_refused_by_field() {
    assert_eq!(
        presets::grpc().with_max_attempts(1).unwrap_err().field(),
        "max_attempts"
    );
    assert_eq!(
        presets::standard()
            .with_max_attempts(0)
            .unwrap_err()
            .field(),
        "max_attempts"
    );
    let erased = presets::feign().erase().with_max_attempts(7).unwrap();
    let seven = FeignRetryer::new(Duration::from_millis(100), Duration::from_secs(1), 7);
    assert!(
        format!("{:?}", erased.retry()).contains(&format!("{:?}", AnyRetryer::Feign(seven))),
        "{erased:?}"
    );
}
