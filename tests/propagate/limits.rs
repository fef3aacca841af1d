//! Budgets at their extremes, propagated and inherited.

use crate::support;
use http::Request;
use http_resilience::{
    deadline::DeadlineLayer,
    propagate::{
        InheritDeadlineLayer, PropagateDeadlineLayer, TimeoutFormat, EXPECTED_RQ_TIMEOUT_MS,
        GRPC_TIMEOUT,
    },
    RequestDeadline,
};
use std::{
    convert::Infallible,
    sync::{Arc, Mutex},
    time::Duration,
};
use tower::{Layer, ServiceBuilder, ServiceExt};

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn extreme_budgets_are_propagated_and_inherited() {
    assert_eq!(TimeoutFormat::Grpc.format(Duration::MAX), "99999999H");
    assert_eq!(
        TimeoutFormat::Millis.format(Duration::MAX),
        u64::MAX.to_string().as_str()
    );

    // Sent: a deadline of `Duration::MAX` and an attempt limit of
    // `Duration::MAX` are no limit, so no header is written; a budget of
    // ten years, the largest a caller means, is written as it is.
    let sent = |deadline: Duration, limit: Duration| {
        let seen = Arc::new(Mutex::new(None));
        let record = Arc::clone(&seen);
        let svc = ServiceBuilder::new()
            .layer(DeadlineLayer::new(deadline))
            .layer(PropagateDeadlineLayer::grpc().with_attempt_limit(limit))
            .service_fn(move |request: Request<String>| {
                *record.lock().unwrap() = request.headers().get(GRPC_TIMEOUT).cloned();
                async { Ok::<_, Infallible>(support::empty(200)) }
            });
        async move {
            svc.oneshot(Request::default()).await.unwrap();
            let header = seen.lock().unwrap().clone();
            header
        }
    };
    assert_eq!(sent(Duration::MAX, Duration::MAX).await, None);
    let ten_years = Duration::from_secs(10 * 365 * 86_400);
    let header = sent(Duration::MAX, ten_years)
        .await
        .expect("the limit is written");
    assert_eq!(TimeoutFormat::Grpc.parse(&header).unwrap(), ten_years);
    let header = sent(ten_years, Duration::MAX)
        .await
        .expect("the time left is written");
    assert_eq!(TimeoutFormat::Grpc.parse(&header).unwrap(), ten_years);

    // Received: the largest values of both formats are held to the horizon.
    for (header, format, value) in [
        (
            EXPECTED_RQ_TIMEOUT_MS,
            TimeoutFormat::Millis,
            "18446744073709551615",
        ),
        (GRPC_TIMEOUT, TimeoutFormat::Grpc, "99999999H"),
    ] {
        let seen = Arc::new(Mutex::new(None));
        let record = Arc::clone(&seen);
        let svc = InheritDeadlineLayer::new(header.clone(), format).layer(tower::service_fn(
            move |request: Request<()>| {
                *record.lock().unwrap() = RequestDeadline::of(&request);
                async { Ok::<_, Infallible>(()) }
            },
        ));
        let request = Request::builder().header(header, value).body(()).unwrap();
        svc.oneshot(request).await.unwrap();
        let deadline = seen.lock().unwrap().expect("inherited");
        assert!(deadline.remaining() > support::ALMOST_NEVER, "{value}");
    }
}
