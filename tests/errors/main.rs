//! `FailureKind` reads the errors of the library's features from outside the
//! crate: the error of a call that an open circuit or a full bulkhead turned
//! away, over a `service_fn`, and reqwest's errors through `ReqwestService`
//! over loopback. No test here makes a feature's error itself: each reads the
//! one the feature returned, boxed as it comes, with its type and its
//! `source()` chain as the feature made them.
//!
//! The turned-away calls run on tokio's paused clock; the reqwest calls on
//! the real clock, with limits far apart.

#[path = "../support/mod.rs"]
mod support;

use http::{Request, Response, StatusCode};
use http_resilience::{
    breaker::{error::CircuitOpen, BreakerPolicy},
    errors,
    guard::GuardLayer,
    overload::{error::Overloaded, OverloadPolicy, Rejection},
    policy::{FixedDelay, TransientDecoder},
    reqwest_client::ReqwestService,
    retry::RetryPolicy,
    BoxError, DeadlineLayer, FailureKind, StatusRetryLayer,
};
use http_resilience_mock::{vacant_addr, MockResponse, MockServer};
use std::{
    convert::Infallible,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};
use support::guarded;
use tower::{ServiceBuilder, ServiceExt};

const TOTAL: Duration = Duration::from_secs(8);

fn call() -> Request<String> {
    Request::get("http://upstream.test/orders")
        .body(String::new())
        .unwrap()
}

/// A retry of what `TransientDecoder` retries, twice, 10 ms apart.
fn retry() -> StatusRetryLayer<TransientDecoder, FixedDelay> {
    StatusRetryLayer::new(RetryPolicy::new(
        TransientDecoder::new(),
        FixedDelay::new(Duration::from_millis(10), 2),
    ))
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_error_of_an_open_circuit_is_circuit_open() {
    let sent = Arc::new(AtomicUsize::new(0));
    let counted = sent.clone();
    let breaker = BreakerPolicy::new(TransientDecoder::new())
        .consecutive_failures(1)
        .unwrap();
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(TOTAL))
        .layer(retry())
        .layer(GuardLayer::new(breaker))
        .service_fn(move |_: Request<String>| {
            counted.fetch_add(1, Ordering::SeqCst);
            // A stand-in for the network: an upstream that is down.
            async { Ok::<_, Infallible>(Response::builder().status(503).body(()).unwrap()) }
        });

    // The first 503 trips the circuit: the retries meet it open.
    let err: BoxError = guarded(svc.clone().oneshot(call())).await.unwrap_err();
    assert_eq!(sent.load(Ordering::SeqCst), 1);
    let kind = FailureKind::of(&err);
    assert_eq!(kind, FailureKind::CircuitOpen, "{err}");
    assert!(kind.is_turned_away() && kind.is_before_send());
    let open = err
        .downcast_ref::<CircuitOpen>()
        .expect("the breaker's own error");
    assert_eq!(open.key().to_string(), "http://upstream.test:80");
    assert!(err.source().is_none());
    assert_eq!(errors::report(&*err).to_string(), "circuit open");

    // A later call is turned away before it is sent, with the same kind.
    let err = guarded(svc.oneshot(call())).await.unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::CircuitOpen, "{err}");
    assert_eq!(sent.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_error_of_a_full_bulkhead_is_overloaded() {
    let sent = Arc::new(AtomicUsize::new(0));
    let counted = sent.clone();
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(TOTAL))
        .layer(GuardLayer::new(OverloadPolicy::bulkhead(1).unwrap()))
        .service_fn(move |_: Request<String>| {
            counted.fetch_add(1, Ordering::SeqCst);
            async {
                // A stand-in for the network: a slow upstream.
                tokio::time::sleep(Duration::from_millis(100)).await;
                Ok::<_, Infallible>(Response::new(String::new()))
            }
        });

    let (first, second) =
        guarded(async { tokio::join!(svc.clone().oneshot(call()), svc.clone().oneshot(call())) })
            .await;
    assert_eq!(first.unwrap().status(), StatusCode::OK);
    let err = second.unwrap_err();
    assert_eq!(sent.load(Ordering::SeqCst), 1);
    let kind = FailureKind::of(&err);
    assert_eq!(kind, FailureKind::Overloaded, "{err}");
    assert!(kind.is_turned_away() && kind.is_before_send());
    let overloaded = err
        .downcast_ref::<Overloaded>()
        .expect("overload's own error");
    assert_eq!(overloaded.reason(), Rejection::QueueFull { limit: 1 });
    assert!(err.source().is_none());
}

/// A reqwest client with neither retries nor a timeout of its own.
fn reqwest_service() -> ReqwestService {
    ReqwestService::new(
        reqwest::Client::builder()
            .retry(reqwest::retry::never())
            .build()
            .unwrap(),
    )
}

#[tokio::test]
async fn a_refused_reqwest_connection_is_connect_refused() {
    let addr = vacant_addr().unwrap();
    let request = || {
        Request::get(format!("http://{addr}/orders"))
            .body(String::new())
            .unwrap()
    };

    let err = guarded(reqwest_service().oneshot(request()))
        .await
        .unwrap_err();
    let kind = FailureKind::of(&*err);
    assert_eq!(kind, FailureKind::ConnectRefused, "{err}");
    assert!(kind.is_before_send() && !kind.is_turned_away());
    let reqwest = err
        .downcast_ref::<reqwest::Error>()
        .expect("reqwest's own error");
    assert!(reqwest.is_connect(), "{reqwest:?}");
    assert_eq!(FailureKind::of(reqwest), FailureKind::ConnectRefused);

    // Under the layers, the same kind.
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(TOTAL))
        .layer(retry())
        .service(reqwest_service());
    let err = guarded(svc.oneshot(request())).await.unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::ConnectRefused, "{err}");
}

#[tokio::test]
async fn reqwests_own_timeout_is_a_transport_failure() {
    let server = guarded(MockServer::start()).await.unwrap();
    server.enqueue(MockResponse::no_response());
    let impatient = ReqwestService::new(
        reqwest::Client::builder()
            .retry(reqwest::retry::never())
            .timeout(Duration::from_millis(100))
            .build()
            .unwrap(),
    );
    let request = Request::get(server.uri("/orders"))
        .body(String::new())
        .unwrap();
    let err = guarded(impatient.oneshot(request)).await.unwrap_err();
    let reqwest = err
        .downcast_ref::<reqwest::Error>()
        .expect("reqwest's own error");
    assert!(reqwest.is_timeout(), "{reqwest:?}");
    // reqwest's timeout is none of the layers' limits, and nothing of the
    // transport beneath it says more: reqwest's error decides.
    assert_eq!(FailureKind::of(&*err), FailureKind::Transport, "{err}");
    assert!(!FailureKind::of(&*err).is_timeout());
}
