//! Budgets at their extremes, propagated and inherited.

use crate::support;
use http::Request;
use http_resilience::{
    deadline::DeadlineLayer,
    propagate::{
        format_timeout, parse_timeout, InheritDeadlineLayer, PropagateDeadlineLayer, TimeoutFormat,
        EXPECTED_RQ_TIMEOUT_MS, GRPC_TIMEOUT,
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
    assert_eq!(
        format_timeout(Duration::MAX, TimeoutFormat::Grpc),
        "99999999H"
    );
    assert_eq!(
        format_timeout(Duration::MAX, TimeoutFormat::Millis),
        u64::MAX.to_string().as_str()
    );

    // Sent: a deadline of `Duration::MAX` and an attempt limit of
    // `Duration::MAX` give a header that reads back as thirty years or so.
    let seen = Arc::new(Mutex::new(None));
    let record = Arc::clone(&seen);
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::MAX))
        .layer(PropagateDeadlineLayer::grpc().with_attempt_limit(Duration::MAX))
        .service_fn(move |request: Request<String>| {
            *record.lock().unwrap() = request.headers().get(GRPC_TIMEOUT).cloned();
            async { Ok::<_, Infallible>(support::empty(200)) }
        });
    svc.oneshot(Request::default()).await.unwrap();
    let sent = seen.lock().unwrap().clone().expect("the header is written");
    let budget = parse_timeout(&sent, TimeoutFormat::Grpc).unwrap();
    assert!(budget > support::ALMOST_NEVER, "{sent:?}");

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
