//! Callers that loop on a rejection do not starve their runtime: 50 tasks
//! call again at once whenever the circuit breaker or overload control turns
//! them away, on one current-thread runtime, while calls that are admitted
//! must reach a loopback upstream and complete. A turned-away call spends
//! the task's cooperative budget, so the spinning tasks yield now and then,
//! and the client's connection tasks (and the admitted calls) run.
//!
//! Every form that turns calls away is taken: the breaker's layer, alone and
//! under hedging, and the combined service with a breaker; overload control's
//! layer and the combined service with a bulkhead.
//!
//! The client side runs on a runtime of its own thread: a starved runtime
//! fires no timer, so the guard runs on the test's runtime, which also
//! serves the upstream. Real clock; counts of requests, not times.

#[path = "../support/mod.rs"]
mod support;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    breaker::{BreakerPolicy, CircuitState},
    deadline::DeadlineLayer,
    guard::GuardLayer,
    hedge::{HedgeDelay, HedgeLayer, HedgePolicy},
    key::{PerKey, UpstreamKey},
    overload::OverloadPolicy,
    policy::{FixedDelay, TransientDecoder},
    retry::{RetryPolicy, StatusRetryLayer},
    transport, BoxError, FailureKind, ResiliencePolicy,
};
use hyper_util::rt::TokioIo;
use std::{
    convert::Infallible,
    future::Future,
    net::SocketAddr,
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};
use support::GUARD;
use tower::{util::BoxCloneService, Layer, ServiceBuilder, ServiceExt};

/// The tasks that call again at once when turned away.
const SPINNERS: usize = 50;
/// The calls that must complete while they spin.
///
/// NOTE: few, for every turn of the runtime takes each spinning task's 128
/// rejections (tokio's budget per poll) before an admitted call moves on.
const ADMITTED: usize = 8;

/// A loopback upstream: `/down` answers 503, anything else 200, after a
/// millisecond (so that a call holds its slot while others spin); it counts
/// the requests of each, and the most it serves at once.
#[derive(Clone, Default)]
struct Upstream {
    ok: Arc<AtomicUsize>,
    down: Arc<AtomicUsize>,
    now: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
}

impl Upstream {
    /// Serves on 127.0.0.1, on the runtime of the caller.
    async fn start() -> (Self, SocketAddr) {
        let upstream = Self::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let serving = upstream.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
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
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        let status = if request.uri().path() == "/down" {
            self.down.fetch_add(1, Ordering::SeqCst);
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            self.ok.fetch_add(1, Ordering::SeqCst);
            StatusCode::OK
        };
        tokio::time::sleep(Duration::from_millis(1)).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        let mut response = Response::new(Full::default());
        *response.status_mut() = status;
        Ok(response)
    }
}

/// A stack that answers with the response's status.
type Svc = BoxCloneService<Request<Full<Bytes>>, StatusCode, BoxError>;

/// The forms a guard takes.
#[derive(Debug, Clone, Copy)]
enum Form {
    /// `DeadlineLayer -> StatusRetryLayer -> (the guard's layer) ->
    /// AttemptTimeoutLayer -> client`.
    Layers,
    /// `DeadlineLayer -> HedgeLayer -> GuardLayer<BreakerPolicy> ->
    /// AttemptTimeoutLayer -> client`.
    Hedged,
    /// `ResiliencePolicy::with_guard` with a breaker or overload control, then `layer()`.
    Combined,
}

const DEADLINE: Duration = Duration::from_secs(30);
const ATTEMPT: Duration = Duration::from_secs(20);

fn client() -> transport::HttpClient<Full<Bytes>> {
    transport::Builder::new()
        .connect_timeout(Duration::from_secs(5))
        .build_http()
        .unwrap()
}

fn retry() -> RetryPolicy<TransientDecoder, FixedDelay> {
    RetryPolicy::new(TransientDecoder::new(), FixedDelay::new(Duration::ZERO, 2))
}

/// `form` around `breaker`, over a new client made on the caller's runtime.
fn with_breaker(form: Form, breaker: &BreakerPolicy<TransientDecoder>) -> Svc {
    let status = |response: Response<_>| response.status();
    let breaker_layer = GuardLayer::new(breaker.clone());
    let attempt = AttemptTimeoutLayer::new(ATTEMPT);
    match form {
        Form::Layers => BoxCloneService::new(
            ServiceBuilder::new()
                .layer(DeadlineLayer::new(DEADLINE))
                .layer(StatusRetryLayer::new(retry()))
                .layer(breaker_layer)
                .layer(attempt)
                .service(client())
                .map_response(status),
        ),
        Form::Hedged => {
            let delay = HedgeDelay::fixed(Duration::from_secs(10));
            let hedge = HedgePolicy::new(TransientDecoder::new(), delay, 2).unwrap();
            BoxCloneService::new(
                ServiceBuilder::new()
                    .layer(DeadlineLayer::new(DEADLINE))
                    .layer(HedgeLayer::new(hedge))
                    .layer(breaker_layer)
                    .layer(attempt)
                    .service(client())
                    .map_response(status),
            )
        }
        Form::Combined => {
            let policy = ResiliencePolicy::new(DEADLINE, ATTEMPT, retry())
                .unwrap()
                .with_guard(breaker.clone());
            BoxCloneService::new(policy.layer().layer(client()).map_response(status))
        }
    }
}

/// `form` around `overload`, over a new client made on the caller's runtime.
fn with_overload(form: Form, overload: &OverloadPolicy) -> Svc {
    let status = |response: Response<_>| response.status();
    match form {
        Form::Layers | Form::Hedged => BoxCloneService::new(
            ServiceBuilder::new()
                .layer(DeadlineLayer::new(DEADLINE))
                .layer(StatusRetryLayer::new(retry()))
                .layer(GuardLayer::new(overload.clone()))
                .layer(AttemptTimeoutLayer::new(ATTEMPT))
                .service(client())
                .map_response(status),
        ),
        Form::Combined => {
            let policy = ResiliencePolicy::new(DEADLINE, ATTEMPT, retry())
                .unwrap()
                .with_guard(overload.clone());
            BoxCloneService::new(policy.layer().layer(client()).map_response(status))
        }
    }
}

fn get(addr: SocketAddr, path: &str) -> Request<Full<Bytes>> {
    let uri = format!("http://{addr}{path}");
    Request::get(uri).body(Full::default()).unwrap()
}

/// Runs `scenario` on a current-thread runtime of a thread of its own, and
/// waits for its end under [`GUARD`] on the caller's runtime, which the
/// scenario's cannot starve.
async fn on_own_runtime<F, Fut>(scenario: F) -> Fut::Output
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future,
    Fut::Output: Send + 'static,
{
    let (done, outcome) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let _ = done.send(runtime.block_on(scenario()));
    });
    tokio::time::timeout(GUARD, outcome)
        .await
        .expect("the admitted calls never completed: the spinning callers starved their runtime")
        .expect("the scenario ended")
}

/// Calls `request()` through `svc` at once again whenever it is turned away
/// (`FailureKind::is_turned_away`), until `stop`: the rejections it met.
async fn spin(svc: Svc, request: impl Fn() -> Request<Full<Bytes>>, stop: &AtomicBool) -> usize {
    let mut rejections = 0;
    while !stop.load(Ordering::Relaxed) {
        match svc.clone().oneshot(request()).await {
            Err(err) if FailureKind::of(&*err).is_turned_away() => rejections += 1,
            Err(err) => panic!("a call failed otherwise than turned away: {err}"),
            Ok(_) => {}
        }
    }
    rejections
}

#[tokio::test]
async fn callers_spinning_on_an_open_circuit_let_admitted_calls_complete_through_the_layers() {
    spin_on_an_open_circuit(Form::Layers).await;
}

#[tokio::test]
async fn callers_spinning_on_an_open_circuit_let_admitted_calls_complete_under_hedging() {
    spin_on_an_open_circuit(Form::Hedged).await;
}

#[tokio::test]
async fn callers_spinning_on_an_open_circuit_let_admitted_calls_complete_in_the_combined_service() {
    spin_on_an_open_circuit(Form::Combined).await;
}

#[tokio::test]
async fn callers_spinning_on_a_full_bulkhead_get_their_calls_through_the_layers() {
    spin_on_a_full_bulkhead(Form::Layers).await;
}

#[tokio::test]
async fn callers_spinning_on_a_full_bulkhead_get_their_calls_through_the_combined_service() {
    spin_on_a_full_bulkhead(Form::Combined).await;
}

/// [`SPINNERS`] tasks call an upstream whose circuit is open, again at once
/// whenever turned away, while [`ADMITTED`] calls go one after another to
/// another upstream on the same client: they complete, and nothing reaches
/// the first.
async fn spin_on_an_open_circuit(form: Form) {
    let (upstream, addr) = Upstream::start().await;
    let breaker = BreakerPolicy::new(TransientDecoder::new())
        .consecutive_failures(1)
        .and_then(|p| p.break_duration(Duration::from_secs(600), Duration::from_secs(600)))
        .unwrap();
    let probe = breaker.clone();
    let (healthy, healthy_addr) = Upstream::start().await;
    let (rejections, admitted) = on_own_runtime(move || async move {
        let svc = with_breaker(form, &breaker);
        // The upstream's 503 opens the circuit of its authority.
        let _ = svc.clone().oneshot(get(addr, "/down")).await;
        let stop = Arc::new(AtomicBool::new(false));
        let spinners: Vec<_> = (0..SPINNERS)
            .map(|_| {
                let (svc, stop) = (svc.clone(), Arc::clone(&stop));
                tokio::spawn(async move { spin(svc, || get(addr, "/down"), &stop).await })
            })
            .collect();
        // Another upstream on the same client, whose circuit is closed.
        let mut admitted = 0;
        for _ in 0..ADMITTED {
            let status = svc.clone().oneshot(get(healthy_addr, "/ok")).await;
            assert_eq!(status.unwrap(), StatusCode::OK);
            admitted += 1;
        }
        stop.store(true, Ordering::Relaxed);
        let mut rejections = 0;
        for spinner in spinners {
            rejections += spinner.await.unwrap();
        }
        (rejections, admitted)
    })
    .await;
    assert_eq!(admitted, ADMITTED, "{form:?}");
    assert_eq!(healthy.ok.load(Ordering::SeqCst), ADMITTED, "{form:?}");
    assert_eq!(
        upstream.down.load(Ordering::SeqCst),
        1,
        "{form:?}: sent while open"
    );
    assert!(rejections >= SPINNERS, "{form:?}: {rejections} rejections");
    let down = UpstreamKey::authority("http", "127.0.0.1", addr.port());
    let state = probe.state(&down);
    assert!(
        matches!(state, Some(CircuitState::Open { .. })),
        "{form:?}: {state:?}"
    );
}

/// [`SPINNERS`] tasks call one upstream through a bulkhead of two slots,
/// again at once whenever turned away, until [`ADMITTED`] calls were
/// admitted among them: they are, and never more than two at once.
async fn spin_on_a_full_bulkhead(form: Form) {
    let (upstream, addr) = Upstream::start().await;
    let overload = OverloadPolicy::bulkhead(2).unwrap();
    let served = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&served);
    let rejections = on_own_runtime(move || async move {
        let svc = with_overload(form, &overload);
        let stop = Arc::new(AtomicBool::new(false));
        // NOTE: every task spins until the calls admitted, among all of
        // them, reach `ADMITTED`.
        let spinners: Vec<_> = (0..SPINNERS)
            .map(|_| {
                let (svc, stop, served) = (svc.clone(), Arc::clone(&stop), Arc::clone(&counted));
                tokio::spawn(async move {
                    let mut rejections = 0;
                    while !stop.load(Ordering::Relaxed) {
                        match svc.clone().oneshot(get(addr, "/ok")).await {
                            Ok(status) => {
                                assert_eq!(status, StatusCode::OK);
                                if served.fetch_add(1, Ordering::SeqCst) + 1 >= ADMITTED {
                                    stop.store(true, Ordering::Relaxed);
                                }
                            }
                            Err(err) => {
                                assert_eq!(
                                    FailureKind::of(&*err),
                                    FailureKind::Overloaded,
                                    "{err}"
                                );
                                rejections += 1;
                            }
                        }
                    }
                    rejections
                })
            })
            .collect();
        let mut rejections = 0;
        for spinner in spinners {
            rejections += spinner.await.unwrap();
        }
        rejections
    })
    .await;
    let served = served.load(Ordering::SeqCst);
    assert!(served >= ADMITTED, "{form:?}: {served} calls admitted");
    assert_eq!(upstream.ok.load(Ordering::SeqCst), served, "{form:?}");
    assert!(
        upstream.most.load(Ordering::SeqCst) <= 2,
        "{form:?}: over the bulkhead"
    );
    assert!(rejections > 0, "{form:?}: nothing was turned away");
}
