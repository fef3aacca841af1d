//! Fault injection over the library's real client and a loopback upstream
//! that counts what it serves: each kind of fault in the three layers'
//! form, below the combined service and among its guards, and below a
//! hedge, with the attempts the upstream never saw; the switch turned while
//! the client runs. And the fallback outside both forms (`fallback.rs`). On
//! the real clock, with limits far apart: counts and kinds, never tight
//! times.

#[path = "../support/mod.rs"]
mod support;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full};
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    deadline::DeadlineLayer,
    errors,
    fault::{Fault, FaultKind, FaultPolicy, FaultSwitch, InjectedFault, Latency},
    guard::GuardLayer,
    hedge::{HedgeDelay, HedgeLayer, HedgePolicy},
    key::PerKey,
    policy::{FixedDelay, TransientDecoder},
    retry::{RetryPolicy, StatusRetryLayer},
    transport, Attempts, BoxError, FailureKind, ResiliencePolicy,
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
use support::guarded;
use tokio::time::Instant;
use tower::{util::BoxCloneService, ServiceBuilder, ServiceExt};

/// An upstream that answers every request with a 200 and a body, counting
/// what it serves.
#[derive(Clone, Default)]
struct Upstream {
    served: Arc<AtomicUsize>,
}

impl Upstream {
    async fn start() -> (Self, SocketAddr) {
        let upstream = Self::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let served = Arc::clone(&upstream.served);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let served = Arc::clone(&served);
                let service = hyper::service::service_fn(move |_: Request<_>| {
                    served.fetch_add(1, Ordering::SeqCst);
                    let body = Full::new(Bytes::from("served by the upstream"));
                    std::future::ready(Ok::<_, Infallible>(Response::new(body)))
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service),
                );
            }
        });
        (upstream, addr)
    }

    fn served(&self) -> usize {
        self.served.load(Ordering::SeqCst)
    }
}

/// The response body of every form, as one type: the one a fault answers
/// with below the layers (the client's own body can only come from a
/// connection).
type Body = UnsyncBoxBody<Bytes, BoxError>;
type Svc = BoxCloneService<Request<Full<Bytes>>, Response<Body>, BoxError>;

fn boxed<B>(response: Response<B>) -> Response<Body>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    response.map(|body| body.map_err(Into::into).boxed_unsync())
}

/// The library's client, its body boxed so that a fault can answer in its
/// place.
fn client() -> BoxCloneService<Request<Full<Bytes>>, Response<Body>, BoxError> {
    let client = transport::Builder::new()
        .connect_timeout(Duration::from_secs(1))
        .read_timeout(Duration::from_secs(5))
        .build_http()
        .unwrap();
    ServiceBuilder::new()
        .boxed_clone()
        .map_err(Into::into)
        .map_response(boxed)
        .service(client)
}

/// Where the fault goes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Form {
    /// Standing for the upstream, below the three layers.
    ThreeLayers,
    /// Standing for the upstream, below the combined service.
    Combined,
    /// Among the combined service's guards.
    CombinedGuard,
    /// Standing for the upstream, below a hedge.
    Hedge,
}

const FORMS: [Form; 4] = [
    Form::ThreeLayers,
    Form::Combined,
    Form::CombinedGuard,
    Form::Hedge,
];

const DEADLINE: Duration = Duration::from_secs(10);
const ATTEMPT: Duration = Duration::from_secs(5);

/// Transient failures retried (or hedged) up to three attempts in all, in
/// `form`, with `faults`.
fn stack(form: Form, faults: &FaultPolicy) -> Svc {
    let retry = RetryPolicy::new(
        TransientDecoder::new(),
        FixedDelay::new(Duration::from_millis(10), 2),
    );
    let faults = GuardLayer::new(faults.clone());
    let combined = ResiliencePolicy::new(DEADLINE, ATTEMPT, retry.clone()).unwrap();
    match form {
        Form::ThreeLayers => ServiceBuilder::new()
            .boxed_clone()
            .map_response(boxed)
            .layer(DeadlineLayer::new(DEADLINE))
            .layer(StatusRetryLayer::new(retry))
            .layer(AttemptTimeoutLayer::new(ATTEMPT))
            .layer(faults)
            .service(client()),
        Form::Combined => ServiceBuilder::new()
            .boxed_clone()
            .map_response(boxed)
            .layer(combined.layer())
            .layer(faults)
            .service(client()),
        Form::CombinedGuard => ServiceBuilder::new()
            .boxed_clone()
            .map_response(boxed)
            .layer(combined.with_guard(faults.guard().clone()).layer())
            .service(client()),
        Form::Hedge => {
            let hedge = HedgePolicy::new(TransientDecoder::new(), HedgeDelay::fixed(ATTEMPT), 3);
            ServiceBuilder::new()
                .boxed_clone()
                .map_response(boxed)
                .layer(DeadlineLayer::new(DEADLINE))
                .layer(HedgeLayer::new(hedge.unwrap()))
                .layer(AttemptTimeoutLayer::new(ATTEMPT))
                .layer(faults)
                .service(client())
        }
    }
}

fn get(addr: SocketAddr) -> Request<Full<Bytes>> {
    Request::get(format!("http://{addr}/items"))
        .body(Full::default())
        .unwrap()
}

async fn call(svc: &Svc, addr: SocketAddr) -> Result<Response<Body>, BoxError> {
    guarded(svc.clone().oneshot(get(addr))).await
}

#[tokio::test]
async fn a_status_or_a_failure_before_sending_is_answered_in_the_upstreams_place_and_retried() {
    let faults = [
        Fault::unavailable(Duration::ZERO),
        Fault::too_many_requests(Duration::ZERO),
        Fault::connect_refused(),
        Fault::connect_timeout(),
        Fault::unsent(),
    ];
    let (upstream, addr) = Upstream::start().await;
    for form in FORMS {
        for fault in faults.clone() {
            let kind = format!("{fault:?}");
            let served = upstream.served();
            let policy = FaultPolicy::on_attempts([1], fault).unwrap();
            let response = call(&stack(form, &policy), addr).await.unwrap();
            let seen = (response.status(), Attempts::of(&response));
            assert_eq!(seen, (StatusCode::OK, 2), "{form:?} {kind}");
            let body = response.into_body().collect().await.unwrap().to_bytes();
            assert_eq!(body, "served by the upstream", "{form:?} {kind}");
            assert_eq!(
                upstream.served() - served,
                1,
                "{form:?} {kind}: the first never sent"
            );
        }
    }
}

#[tokio::test]
async fn a_reset_reads_as_the_transports_and_is_not_retried() {
    let (upstream, addr) = Upstream::start().await;
    for form in [Form::ThreeLayers, Form::Combined, Form::CombinedGuard] {
        let policy = FaultPolicy::every(1, Fault::connection_reset()).unwrap();
        let err = call(&stack(form, &policy), addr).await.unwrap_err();
        assert_eq!(
            FailureKind::of(&err),
            FailureKind::ConnectionReset,
            "{form:?}"
        );
        let injected = errors::find::<InjectedFault>(&*err).expect("its own error");
        assert_eq!(
            injected.key().port(),
            Some(addr.port()),
            "{form:?}: keyed by authority"
        );
        assert_eq!(
            policy.states()[0].1.injected,
            1,
            "{form:?}: one attempt, not retried"
        );
    }
    assert_eq!(upstream.served(), 0);
}

#[tokio::test]
async fn a_cut_body_fails_part_way_as_a_closed_connection() {
    let (upstream, addr) = Upstream::start().await;
    for form in FORMS {
        let whole = Response::new(Bytes::from("a body that breaks off"));
        let policy = FaultPolicy::every(1, Fault::cut_body(whole, 7)).unwrap();
        let response = call(&stack(form, &policy), addr).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{form:?}: the head came");
        assert_eq!(
            response.extensions().get(),
            Some(&FaultKind::CutBody),
            "{form:?}"
        );
        let mut body = response.into_body();
        let mut read = Vec::new();
        let err = loop {
            match body.frame().await.expect("an error before the end") {
                Ok(frame) => read.extend_from_slice(&frame.into_data().unwrap()),
                Err(err) => break err,
            }
        };
        assert_eq!(read, b"a body ", "{form:?}");
        assert_eq!(
            FailureKind::of(&err),
            FailureKind::ConnectionClosed,
            "{form:?}"
        );
    }
    assert_eq!(upstream.served(), 0);
}

#[tokio::test]
async fn latency_slows_every_attempt_down_before_the_upstream_sees_it() {
    let (upstream, addr) = Upstream::start().await;
    let latency = Duration::from_millis(100);
    for form in FORMS {
        let policy = FaultPolicy::every(1, Fault::latency(Latency::fixed(latency))).unwrap();
        let start = Instant::now();
        let response = call(&stack(form, &policy), addr).await.unwrap();
        let took = start.elapsed();
        assert_eq!(response.status(), StatusCode::OK, "{form:?}");
        assert!(took >= latency && took < ATTEMPT, "{form:?}: {took:?}");
    }
    assert_eq!(upstream.served(), FORMS.len());
}

#[tokio::test]
async fn the_switch_turns_injection_off_and_on_while_the_client_runs() {
    let (upstream, addr) = Upstream::start().await;
    let chaos = FaultSwitch::new(false);
    let policy = FaultPolicy::every(1, Fault::status(StatusCode::SERVICE_UNAVAILABLE))
        .unwrap()
        .with_switch(chaos.clone());
    for form in FORMS {
        let svc = stack(form, &policy);
        chaos.turn_off();
        let response = call(&svc, addr).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{form:?}: off");
        chaos.turn_on();
        let response = call(&svc, addr).await.unwrap();
        let seen = (response.status(), Attempts::of(&response));
        assert_eq!(
            seen,
            (StatusCode::SERVICE_UNAVAILABLE, 3),
            "{form:?}: on, every attempt"
        );
    }
    assert_eq!(upstream.served(), FORMS.len(), "one per form, while off");
}

mod fallback;
