//! What a caller reads of a retried call in `Attempts`: the count, the winner
//! and what `Debug` prints agree.

use http::{Request, Response, StatusCode};
use http_resilience::{
    policy::{FixedDelay, StatusDecoder},
    retry::{RetryPolicy, StatusRetryLayer},
    Attempts, Stop,
};
use std::{
    convert::Infallible,
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc,
    },
    time::Duration,
};
use tower::{Layer, ServiceExt};

#[tokio::test(start_paused = true)]
async fn attempts_print_the_winner_they_report() {
    let calls = Arc::new(AtomicU32::new(0));
    let seen = Arc::clone(&calls);
    let upstream = tower::service_fn(move |_: Request<String>| {
        let n = seen.fetch_add(1, Ordering::SeqCst);
        async move {
            let status = if n < 3 { 503 } else { 200 };
            let response = Response::builder().status(status).body(String::new());
            Ok::<_, Infallible>(response.unwrap())
        }
    });
    let policy = RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(Duration::from_millis(10), 3),
    );
    let svc = StatusRetryLayer::new(policy).layer(upstream);
    let response = svc.oneshot(Request::new(String::new())).await.unwrap();

    assert_eq!(response.status(), StatusCode::OK);
    let attempts = *response.extensions().get::<Attempts>().unwrap();
    assert_eq!((attempts.get(), attempts.winner()), (4, 4));
    assert_eq!(attempts.stop(), Stop::Accepted);
    let printed = format!("{attempts:?}");
    assert!(printed.contains("winner: 4"), "{printed}");
}
