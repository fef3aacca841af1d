//! The fallback outside both forms of the stack, over the library's real
//! client: a loopback upstream still shedding load after the retries, one
//! that never answers before the deadline, and a port that refuses the
//! connection. A request that accepts a fallback gets the cached body, one
//! that does not gets its failure. On the real clock, with limits far
//! apart: kinds and counts, never tight times.

use super::support::{self, guarded};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    deadline::DeadlineLayer,
    fallback::{body::FallbackBody, AcceptFallback, FallbackLayer, FallbackPolicy, FellBack},
    policy::{FixedDelay, TransientDecoder},
    retry::{RetryPolicy, StatusRetryLayer},
    transport, BoxError, FailureKind, ResiliencePolicy,
};
use hyper_util::rt::TokioIo;
use std::{
    convert::Infallible,
    net::SocketAddr,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};
use tower::{util::BoxCloneService, ServiceBuilder, ServiceExt};

/// An upstream that answers `/503` with a 503 at once and `/silent` after
/// 10 s, counting what it serves.
async fn upstream() -> (Arc<AtomicUsize>, SocketAddr) {
    let served = Arc::new(AtomicUsize::new(0));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let counted = Arc::clone(&served);
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let served = Arc::clone(&counted);
            let service = hyper::service::service_fn(move |request: Request<_>| {
                served.fetch_add(1, Ordering::SeqCst);
                let silent = request.uri().path() == "/silent";
                async move {
                    if silent {
                        tokio::time::sleep(Duration::from_secs(10)).await;
                    }
                    let response = Response::builder()
                        .status(503)
                        .body(Full::new(Bytes::new()));
                    Ok::<_, Infallible>(response.unwrap())
                }
            });
            tokio::spawn(
                hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service),
            );
        }
    });
    (served, addr)
}

/// A port nothing listens on: its connections are refused.
async fn closed_port() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}

/// The client's own body (the deadline's over the transport's), or the
/// fallback's: the same in both forms.
type Body = FallbackBody<support::Body>;
type Svc = BoxCloneService<Request<Full<Bytes>>, Response<Body>, BoxError>;

#[derive(Debug, Clone, Copy)]
enum Form {
    ThreeLayers,
    Combined,
}

const DEADLINE: Duration = Duration::from_millis(250);

/// A cached body for the deadline, a refused connection and a 503 after
/// the retries, outside a stack of `form` over the library's client.
fn stack(form: Form) -> Svc {
    let fallback = FallbackPolicy::new(|_| Response::new(Bytes::from("cached")))
        .on(FailureKind::Deadline)
        .on(FailureKind::ConnectRefused)
        .on_status(StatusCode::SERVICE_UNAVAILABLE);
    let client = transport::Builder::new()
        .connect_timeout(Duration::from_secs(5))
        .build_http()
        .unwrap();
    let retry = RetryPolicy::new(
        TransientDecoder::new(),
        FixedDelay::new(Duration::from_millis(10), 2),
    );
    let outer = ServiceBuilder::new().layer(FallbackLayer::new(fallback));
    match form {
        Form::ThreeLayers => ServiceBuilder::new()
            .boxed_clone()
            .layer(outer.into_inner())
            .layer(DeadlineLayer::new(DEADLINE))
            .layer(StatusRetryLayer::new(retry))
            .layer(AttemptTimeoutLayer::new(Duration::from_secs(5)))
            .service(client),
        Form::Combined => ServiceBuilder::new()
            .boxed_clone()
            .layer(outer.into_inner())
            .layer(
                ResiliencePolicy::new(DEADLINE, DEADLINE, retry)
                    .unwrap()
                    .layer(),
            )
            .service(client),
    }
}

fn get(addr: SocketAddr, path: &str, accepts: bool) -> Request<Full<Bytes>> {
    let mut request = Request::get(format!("http://{addr}{path}"))
        .body(Full::default())
        .unwrap();
    if accepts {
        request.extensions_mut().insert(AcceptFallback);
    }
    request
}

/// The fallback's response: what it replaced, and its body.
async fn fell_back(response: Response<Body>) -> (FellBack, Bytes) {
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.body().is_fallback());
    let fell_back = response.extensions().get::<FellBack>().unwrap().clone();
    (
        fell_back,
        response.into_body().collect().await.unwrap().to_bytes(),
    )
}

#[tokio::test]
async fn a_503_after_the_retries_falls_back_for_a_request_that_accepts_it() {
    let (served, addr) = upstream().await;
    for form in [Form::ThreeLayers, Form::Combined] {
        let svc = stack(form);
        let response = guarded(svc.clone().oneshot(get(addr, "/503", true)))
            .await
            .unwrap();
        let (replaced, body) = fell_back(response).await;
        assert_eq!(
            (replaced.status(), &body[..]),
            (Some(StatusCode::SERVICE_UNAVAILABLE), &b"cached"[..]),
            "{form:?}"
        );
        let response = guarded(svc.oneshot(get(addr, "/503", false)))
            .await
            .unwrap();
        assert_eq!(
            response.status(),
            StatusCode::SERVICE_UNAVAILABLE,
            "{form:?}"
        );
        assert!(!response.body().is_fallback(), "{form:?}");
    }
    assert_eq!(served.load(Ordering::SeqCst), 12, "three attempts a call");
}

#[tokio::test]
async fn the_deadline_falls_back_for_a_request_that_accepts_it() {
    let (_, addr) = upstream().await;
    for form in [Form::ThreeLayers, Form::Combined] {
        let svc = stack(form);
        let response = guarded(svc.clone().oneshot(get(addr, "/silent", true)))
            .await
            .unwrap();
        let (replaced, body) = fell_back(response).await;
        assert_eq!(
            (replaced.kind(), &body[..]),
            (Some(FailureKind::Deadline), &b"cached"[..]),
            "{form:?}"
        );
        let err = guarded(svc.oneshot(get(addr, "/silent", false)))
            .await
            .unwrap_err();
        assert_eq!(FailureKind::of(&err), FailureKind::Deadline, "{form:?}");
    }
}

#[tokio::test]
async fn a_refused_connection_falls_back_for_a_request_that_accepts_it() {
    let addr = closed_port().await;
    for form in [Form::ThreeLayers, Form::Combined] {
        let svc = stack(form);
        let response = guarded(svc.clone().oneshot(get(addr, "/", true)))
            .await
            .unwrap();
        let (replaced, _) = fell_back(response).await;
        assert_eq!(
            replaced.kind(),
            Some(FailureKind::ConnectRefused),
            "{form:?}"
        );
        assert!(replaced.error().is_some(), "{form:?}: the error kept");
        let err = guarded(svc.oneshot(get(addr, "/", false)))
            .await
            .unwrap_err();
        assert_eq!(
            FailureKind::of(&err),
            FailureKind::ConnectRefused,
            "{form:?}"
        );
    }
}
