//! Overload control over the library's real client and a loopback upstream
//! that counts the requests it serves at once: how many reach it, slots
//! given back by calls that are dropped, retries and hedges taking a slot
//! per attempt, in both stack forms. On the real clock, with limits far
//! apart: counts and states, never tight times.

#[path = "../support/mod.rs"]
mod support;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full};
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    deadline::DeadlineLayer,
    guard::GuardLayer,
    hedge::{HedgeDelay, HedgeLayer, HedgePolicy},
    key::{PerKey, UpstreamKey},
    overload::{AdaptiveLimit, OverloadPolicy, OverloadState},
    policy::{ExponentialBackoff, TransientDecoder},
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
use tower::{util::BoxCloneService, Layer, ServiceBuilder, ServiceExt};

/// An upstream that serves `/wait/<ms>/<status>` after `ms` milliseconds
/// with `status` (`/first/<ms>/<status>`: the first request it serves after
/// `ms`, the others at once), and counts the requests it holds at once.
#[derive(Clone, Default)]
struct Upstream {
    now: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    served: Arc<AtomicUsize>,
}

impl Upstream {
    async fn start() -> (Self, SocketAddr) {
        let upstream = Self::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let serving = upstream.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let upstream = serving.clone();
                let service =
                    hyper::service::service_fn(move |request| upstream.clone().serve(request));
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service),
                );
            }
        });
        (upstream, addr)
    }

    async fn serve<B>(self, request: Request<B>) -> Result<Response<Full<Bytes>>, Infallible> {
        let parts: Vec<&str> = request.uri().path().split('/').collect();
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        let nth = self.served.fetch_add(1, Ordering::SeqCst);
        let (millis, status) = match parts.as_slice() {
            [_, "wait", ms, status] => (ms.parse().unwrap_or(0), status.parse().unwrap_or(500)),
            [_, "first", ms, status] if nth == 0 => {
                (ms.parse().unwrap_or(0), status.parse().unwrap_or(500))
            }
            [_, "first", _, status] => (0, status.parse().unwrap_or(500)),
            _ => (0, 404),
        };
        tokio::time::sleep(Duration::from_millis(millis)).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        let response = Response::builder()
            .status(StatusCode::from_u16(status).unwrap())
            .body(Full::new(Bytes::new()))
            .unwrap();
        Ok(response)
    }

    fn most(&self) -> usize {
        self.most.load(Ordering::SeqCst)
    }

    fn served(&self) -> usize {
        self.served.load(Ordering::SeqCst)
    }
}

fn client() -> transport::HttpClient<Full<Bytes>> {
    transport::Builder::new()
        .connect_timeout(Duration::from_secs(1))
        .build_http()
        .unwrap()
}

fn get(addr: SocketAddr, millis: u64, status: u16) -> Request<Full<Bytes>> {
    Request::get(format!("http://{addr}/wait/{millis}/{status}"))
        .body(Full::new(Bytes::new()))
        .unwrap()
}

/// The response body of either form, as one type.
type Body = UnsyncBoxBody<Bytes, BoxError>;

fn boxed<B>(response: Response<B>) -> Response<Body>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    response.map(|body| body.map_err(Into::into).boxed_unsync())
}

fn key(addr: SocketAddr) -> UpstreamKey {
    UpstreamKey::authority("http", &addr.ip().to_string(), addr.port())
}

fn state(policy: &OverloadPolicy, addr: SocketAddr) -> OverloadState {
    policy.state(&key(addr)).expect("a key seen")
}

type Svc = BoxCloneService<Request<Full<Bytes>>, Response<Body>, BoxError>;

/// The two forms overload control takes between the retry and the attempt
/// timeout.
#[derive(Debug, Clone, Copy)]
enum Form {
    ThreeLayers,
    Combined,
}

const FORMS: [Form; 2] = [Form::ThreeLayers, Form::Combined];

/// A retry of 503s (three attempts, 50 ms apart at first) over `overload`, in `form`.
fn stack(form: Form, overload: &OverloadPolicy) -> Svc {
    let backoff =
        ExponentialBackoff::new(Duration::from_millis(50), 2.0, Duration::from_secs(1), 3).unwrap();
    let retry = RetryPolicy::new(TransientDecoder::new(), backoff);
    let (deadline, attempt) = (Duration::from_secs(20), Duration::from_secs(10));
    match form {
        Form::ThreeLayers => Svc::new(
            ServiceBuilder::new()
                .layer(DeadlineLayer::new(deadline))
                .layer(StatusRetryLayer::new(retry))
                .layer(GuardLayer::new(overload.clone()))
                .layer(AttemptTimeoutLayer::new(attempt))
                .service(client())
                .map_response(boxed),
        ),
        Form::Combined => Svc::new(
            ResiliencePolicy::new(deadline, attempt, retry)
                .unwrap()
                .with_guard(overload.clone())
                .layer()
                .layer(client())
                .map_response(boxed),
        ),
    }
}

#[tokio::test]
async fn at_most_the_limit_of_calls_reaches_the_upstream_at_once_in_both_forms() {
    for form in FORMS {
        let (upstream, addr) = Upstream::start().await;
        let overload = OverloadPolicy::bulkhead(3).unwrap().with_queue(100);
        let svc = stack(form, &overload);
        let calls: Vec<_> = (0..20)
            .map(|_| tokio::spawn(svc.clone().oneshot(get(addr, 50, 200))))
            .collect();
        for call in calls {
            let response = guarded(call).await.unwrap().unwrap();
            assert_eq!(response.status(), 200, "{form:?}");
        }
        assert_eq!(upstream.served(), 20, "{form:?}");
        assert!(
            upstream.most() <= 3,
            "{form:?}: {} at once",
            upstream.most()
        );
        let left = state(&overload, addr);
        assert_eq!((left.in_flight, left.queued), (0, 0), "{form:?}");
    }
}

#[tokio::test]
async fn calls_dropped_while_sent_or_waiting_leak_no_slot_in_both_forms() {
    for form in FORMS {
        let (upstream, addr) = Upstream::start().await;
        let overload = OverloadPolicy::bulkhead(2).unwrap().with_queue(2);
        let svc = stack(form, &overload);
        let calls: Vec<_> = (0..4)
            .map(|_| tokio::spawn(svc.clone().oneshot(get(addr, 30_000, 200))))
            .collect();
        while upstream.served() < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let held = state(&overload, addr);
        assert_eq!((held.in_flight, held.queued), (2, 2), "{form:?}");
        for call in &calls {
            call.abort();
        }
        for call in calls {
            assert!(guarded(call).await.unwrap_err().is_cancelled());
        }
        let left = state(&overload, addr);
        assert_eq!((left.in_flight, left.queued), (0, 0), "{form:?}");
        // The slots are there for the next calls.
        let (a, b) = tokio::join!(
            svc.clone().oneshot(get(addr, 10, 200)),
            svc.clone().oneshot(get(addr, 10, 200))
        );
        assert_eq!(
            (a.unwrap().status(), b.unwrap().status()),
            (StatusCode::OK, StatusCode::OK),
            "{form:?}"
        );
        assert_eq!(
            upstream.served(),
            4,
            "{form:?}: the queued two were never sent"
        );
    }
}

#[tokio::test]
async fn a_retry_takes_a_slot_for_each_attempt_and_none_while_it_waits_in_both_forms() {
    for form in FORMS {
        let (upstream, addr) = Upstream::start().await;
        let overload = OverloadPolicy::bulkhead(1).unwrap().with_queue(10);
        let svc = stack(form, &overload);
        // Every call gets 503 twice, then gives up with the third 503:
        // three attempts each, one at a time at the upstream.
        let calls: Vec<_> = (0..4)
            .map(|_| tokio::spawn(svc.clone().oneshot(get(addr, 20, 503))))
            .collect();
        for call in calls {
            let response = guarded(call).await.unwrap().unwrap();
            assert_eq!(response.status(), 503, "{form:?}");
            assert_eq!(Attempts::of(&response), 3, "{form:?}");
        }
        assert_eq!(upstream.served(), 12, "{form:?}");
        assert_eq!(upstream.most(), 1, "{form:?}");
        assert_eq!(state(&overload, addr).in_flight, 0, "{form:?}");
    }
}

/// Up to `copies` copies of a call, 100 ms apart, each taking a slot of
/// `overload`, each bounded by 10 s, under a deadline of 20 s.
fn hedged(
    overload: &OverloadPolicy,
    copies: u32,
) -> impl tower::Service<
    Request<Full<Bytes>>,
    Response = Response<impl http_body::Body>,
    Error = BoxError,
    Future = impl Send,
> + Clone {
    let delay = HedgeDelay::fixed(Duration::from_millis(100));
    let hedge = HedgePolicy::new(TransientDecoder::new(), delay, copies).unwrap();
    ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_secs(20)))
        .layer(HedgeLayer::new(hedge))
        .layer(GuardLayer::new(overload.clone()))
        .layer(AttemptTimeoutLayer::new(Duration::from_secs(10)))
        .service(client())
}

#[tokio::test]
async fn hedged_copies_take_a_slot_each_and_the_loser_gives_its_back() {
    let (upstream, addr) = Upstream::start().await;
    let overload = OverloadPolicy::bulkhead(2).unwrap();
    let svc = hedged(&overload, 3);
    // The first copy waits 10 s at the upstream; the hedge, 100 ms later,
    // is answered at once and wins.
    let first = Request::get(format!("http://{addr}/first/10000/200"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let response = guarded(svc.clone().oneshot(first)).await.unwrap();
    assert_eq!(response.status(), 200);
    let attempts = *response.extensions().get::<Attempts>().unwrap();
    assert_eq!((attempts.get(), attempts.winner()), (2, 2));
    assert_eq!(upstream.most(), 2, "both copies were in flight at once");
    assert_eq!(
        state(&overload, addr).in_flight,
        0,
        "the loser gave its slot back"
    );

    // With the second slot taken by another caller, a hedge finds none and
    // is not sent: the call waits for its first copy.
    let (upstream, addr) = Upstream::start().await;
    let overload = OverloadPolicy::bulkhead(2).unwrap();
    let svc = hedged(&overload, 2);
    let holder = tokio::spawn(svc.clone().oneshot(get(addr, 1_000, 200)));
    while upstream.served() < 1 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let response = guarded(svc.clone().oneshot(get(addr, 500, 200)))
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let attempts = *response.extensions().get::<Attempts>().unwrap();
    assert_eq!(attempts.winner(), 1, "the first copy answered");
    assert_eq!(
        upstream.served(),
        2,
        "the hedge was turned away, never sent"
    );
    guarded(holder).await.unwrap().unwrap();
    assert_eq!(state(&overload, addr).in_flight, 0);
}

#[tokio::test]
async fn an_upstream_that_sheds_load_brings_the_adaptive_limit_down_in_both_forms() {
    for form in FORMS {
        let (_upstream, addr) = Upstream::start().await;
        let overload = OverloadPolicy::adaptive(AdaptiveLimit::new(20, 2, 100).unwrap());
        let svc = stack(form, &overload);
        for _ in 0..5 {
            let response = guarded(svc.clone().oneshot(get(addr, 0, 503)))
                .await
                .unwrap();
            assert_eq!(response.status(), 503);
        }
        // Fifteen 503s: 20 × 0.9^15 is about 4.
        let limit = state(&overload, addr).limit.unwrap();
        assert!(limit <= 5, "{form:?}: {limit}");
        // A call turned away is the crate's typed error, never sent.
        let full = OverloadPolicy::bulkhead(1).unwrap();
        let svc = stack(form, &full);
        let held = tokio::spawn(svc.clone().oneshot(get(addr, 30_000, 200)));
        while full.state(&key(addr)).is_none_or(|s| s.in_flight == 0) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let err = guarded(svc.clone().oneshot(get(addr, 0, 200)))
            .await
            .unwrap_err();
        assert_eq!(
            FailureKind::of(&err),
            FailureKind::Overloaded,
            "{form:?}: {err}"
        );
        held.abort();
    }
}
