//! What both benches share: the inner services, the three variants and the
//! calls that drive them.
//!
//! The variants carry the same semantics, outermost first:
//!
//! - tower's nesting: `Timeout(8 s)` → `Retry(503, at most 2 retries)` →
//!   `Timeout(3 s)`;
//! - ours: `DeadlineLayer(8 s)` → `StatusRetryLayer(503, FixedDelay(0, 2))` →
//!   `AttemptTimeoutLayer(3 s)`;
//! - ours combined: the same policy as `ResiliencePolicy::layer()`, one
//!   service with the semantics of the three.
//!
//! The inner service answers at once (a ready future), so what is measured is
//! the layers' own work per call.

use bytes::Bytes;
use http::{HeaderValue, Request, Response, StatusCode};
use http_body_util::Full;
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    breaker::BreakerPolicy,
    deadline::{body::DeadlineBody, DeadlineLayer},
    fault::{Fault, FaultPolicy, FaultSwitch},
    guard::{GuardLayer, Settle},
    overload::OverloadPolicy,
    policy::{FixedDelay, StatusDecoder},
    retry::{RetryPolicy, StatusRetryLayer},
    RequestDeadline, ResiliencePolicy,
};
use std::{
    convert::Infallible,
    future::{ready, Ready},
    sync::{
        atomic::{AtomicBool, AtomicU32, Ordering},
        Arc,
    },
    time::Duration,
};
use tower::{retry::Policy, Service, ServiceBuilder, ServiceExt};
use tower_resilience::circuitbreaker::{
    CircuitBreakerError, CircuitBreakerLayer as TowerResilienceBreakerLayer,
};

/// The request body: `Full<Bytes>` is `Clone`, so both retry layers replay it.
pub(crate) type Body = Full<Bytes>;
pub(crate) type Req = Request<Body>;
/// What the inner services return: an answer that is ready at once.
type Answer = Ready<Result<Response<Body>, Infallible>>;

/// The budget of the whole call (the outer timeout, or the deadline).
pub(crate) const CALL_LIMIT: Duration = Duration::from_secs(8);
/// The limit of each attempt (the inner timeout, or the attempt timeout).
pub(crate) const ATTEMPT_LIMIT: Duration = Duration::from_secs(3);
/// Retries after the first attempt: three attempts in all.
pub(crate) const RETRIES: u32 = 2;

/// A request as a caller builds it: a URI with an authority (a circuit
/// breaker keys on it), a static body, an empty header map and no
/// extensions: building it allocates nothing.
pub(crate) fn request() -> Req {
    let mut request = Request::new(Full::new(Bytes::from_static(b"{}")));
    *request.uri_mut() = http::Uri::from_static("http://upstream.test:8080/v1/items");
    if WITH_HEADERS.load(Ordering::Relaxed) {
        let headers = request.headers_mut();
        headers.insert(
            http::header::ACCEPT,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(
            http::header::USER_AGENT,
            HeaderValue::from_static("bench/1"),
        );
        headers.insert("x-request-id", HeaderValue::from_static("4bf92f3577b34da6"));
    }
    request
}

/// Whether every [`request`] carries three headers, as a caller's often
/// does (a variant of the `instructions` bench ending in `-headers`); the
/// request copy a retry keeps then copies them.
pub(crate) static WITH_HEADERS: AtomicBool = AtomicBool::new(false);

fn response(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from_static(b"ok")));
    *response.status_mut() = status;
    response
}

/// The current-thread runtime that drives every call, with the timer on (both
/// timeouts need it).
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime")
}

// ===== inner services =====

/// An inner service that answers 200 at once.
pub(crate) fn ok_service(
) -> impl Service<Req, Response = Response<Body>, Error = Infallible, Future = Answer> + Clone {
    tower::service_fn(|_: Req| ready(Ok(response(StatusCode::OK))))
}

/// An inner service that answers 503, 503, then 200, counting its calls in
/// `calls`; the caller resets `calls` to 0 before every request.
pub(crate) fn flaky_service(
    calls: Arc<AtomicU32>,
) -> impl Service<Req, Response = Response<Body>, Error = Infallible, Future = Answer> + Clone {
    tower::service_fn(move |_: Req| {
        let status = match calls.fetch_add(1, Ordering::Relaxed) {
            0 | 1 => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::OK,
        };
        ready(Ok(response(status)))
    })
}

// ===== the variants =====

/// tower's own parts: `Timeout` outside `Retry` (with [`Retry503`]) outside
/// another `Timeout`. Generic over the inner service, so that the loopback
/// bench can put a real client inside.
pub(crate) fn tower_nesting<S, T>(
    inner: S,
) -> impl Service<Req, Response = Response<T>, Error = tower::BoxError> + Clone
where
    S: Service<Req, Response = Response<T>> + Clone,
    S::Error: Into<tower::BoxError>,
{
    ServiceBuilder::new()
        .timeout(CALL_LIMIT)
        .retry(Retry503::new(RETRIES))
        .timeout(ATTEMPT_LIMIT)
        .service(inner)
}

/// Our policy equivalent to [`Retry503`]: 503 only, at most `RETRIES`
/// retries, no wait.
pub(crate) fn retry_503() -> RetryPolicy<StatusDecoder, FixedDelay> {
    RetryPolicy::new(
        StatusDecoder::new([503]).expect("503 is a status code"),
        FixedDelay::new(Duration::ZERO, RETRIES),
    )
}

/// Our three layers in the canonical order, with the equivalent policy.
pub(crate) fn ours<S, T>(
    inner: S,
) -> impl Service<Req, Response = Response<DeadlineBody<T>>, Error = tower::BoxError> + Clone
where
    S: Service<Req, Response = Response<T>> + Clone,
    S::Error: Into<tower::BoxError>,
{
    ServiceBuilder::new()
        .layer(DeadlineLayer::new(CALL_LIMIT))
        .layer(StatusRetryLayer::new(retry_503()))
        .layer(AttemptTimeoutLayer::new(ATTEMPT_LIMIT))
        .service(inner)
}

/// Our stack combined (`ResiliencePolicy::layer()`), with the same policy.
pub(crate) fn ours_fused<S, T>(
    inner: S,
) -> impl Service<Req, Response = Response<DeadlineBody<T>>, Error = tower::BoxError> + Clone
where
    S: Service<Req, Response = Response<T>> + Clone,
    S::Error: Into<tower::BoxError>,
{
    fused_with(inner, ())
}

/// [`ours_fused`] with a circuit breaker of the default policy on every
/// attempt (`ResiliencePolicy::with_guard`): the whole stack with it.
pub(crate) fn ours_fused_breaker<S, T>(
    inner: S,
) -> impl Service<Req, Response = Response<DeadlineBody<T>>, Error = tower::BoxError> + Clone
where
    S: Service<Req, Response = Response<T>> + Clone,
    S::Error: Into<tower::BoxError>,
{
    fused_with(inner, BreakerPolicy::default())
}

/// [`ours_fused`] with a bulkhead on every attempt
/// (`ResiliencePolicy::with_guard`), far from full: a slot taken and given
/// back per call.
pub(crate) fn ours_fused_bulkhead<S, T>(
    inner: S,
) -> impl Service<Req, Response = Response<DeadlineBody<T>>, Error = tower::BoxError> + Clone
where
    S: Service<Req, Response = Response<T>> + Clone,
    S::Error: Into<tower::BoxError>,
{
    let bulkhead = OverloadPolicy::bulkhead(1024)
        .expect("a limit")
        .with_queue(1024);
    let resilience = ResiliencePolicy::new(CALL_LIMIT, ATTEMPT_LIMIT, retry_503())
        .expect("the limits fit together")
        .with_guard(bulkhead);
    tower::Layer::layer(&resilience.layer(), inner)
}

/// Our stack combined, every attempt passing `breaker`.
fn fused_with<S, T, G>(
    inner: S,
    breaker: G,
) -> impl Service<Req, Response = Response<DeadlineBody<T>>, Error = tower::BoxError> + Clone
where
    S: Service<Req, Response = Response<T>> + Clone,
    S::Error: Into<tower::BoxError>,
    G: Settle<T>,
{
    let resilience = ResiliencePolicy::new(CALL_LIMIT, ATTEMPT_LIMIT, retry_503())
        .expect("the limits fit together")
        .with_guard(breaker);
    tower::Layer::layer(&resilience.layer(), inner)
}

/// `inner` behind overload control with `policy`, far from its limit: a
/// slot taken and given back per call.
pub(crate) fn with_overload<S, T>(
    inner: S,
    policy: OverloadPolicy,
) -> impl Service<Req, Response = Response<T>, Error = tower::BoxError> + Clone
where
    S: Service<Req, Response = Response<T>, Error = Infallible> + Clone,
{
    tower::Layer::layer(&GuardLayer::new(policy), inner)
}

/// Fault injection that would answer half the attempts with a 503, its
/// switch `on` or off; `rate` 0 when on, so that every attempt is counted
/// and drawn for and none is answered (what the work of a policy that
/// picks costs, apart from the fault itself).
pub(crate) fn faults(on: bool) -> FaultPolicy {
    let rate = if on { 0.0 } else { 0.5 };
    FaultPolicy::at_rate(rate, Fault::status(StatusCode::SERVICE_UNAVAILABLE))
        .expect("a rate")
        .with_switch(FaultSwitch::new(on))
}

/// `inner` behind fault injection with `policy`, standing for the upstream;
/// `None` is the same layer with no policy at run time.
///
/// NOTE: an `Option` either way, so that with and without a policy the code
/// is the same, and the figures differ by what the policy does alone (the
/// compiler inlines a caller of another type otherwise, which moves the
/// count by more than the policy's work).
pub(crate) fn with_faults<S>(
    inner: S,
    policy: Option<FaultPolicy>,
) -> impl Service<Req, Response = Response<Body>, Error = tower::BoxError> + Clone
where
    S: Service<Req, Response = Response<Body>, Error = Infallible> + Clone,
{
    tower::Layer::layer(&GuardLayer::new(policy), inner)
}

/// [`ours_fused`] with fault injection among its guards, `policy` (switched
/// off) or none at run time.
pub(crate) fn ours_fused_faults<S>(
    inner: S,
    policy: Option<FaultPolicy>,
) -> impl Service<Req, Response = Response<DeadlineBody<Body>>, Error = tower::BoxError> + Clone
where
    S: Service<Req, Response = Response<Body>> + Clone,
    S::Error: Into<tower::BoxError>,
{
    fused_with(inner, policy)
}

/// `inner` behind a guard layer of no guard (`()`): what the layer itself
/// costs, the floor of every guard's own layer.
pub(crate) fn with_no_guard<S>(
    inner: S,
) -> impl Service<Req, Response = Response<Body>, Error = tower::BoxError> + Clone
where
    S: Service<Req, Response = Response<Body>, Error = Infallible> + Clone,
{
    tower::Layer::layer(&GuardLayer::new(()), inner)
}

/// `inner` behind a circuit breaker with the default policy: a closed
/// circuit's path, the one every call takes while the upstream is well.
pub(crate) fn with_breaker<S, T>(
    inner: S,
) -> impl Service<Req, Response = Response<T>, Error = tower::BoxError> + Clone
where
    S: Service<Req, Response = Response<T>, Error = Infallible> + Clone,
{
    tower::Layer::layer(&GuardLayer::new(BreakerPolicy::default()), inner)
}

/// `inner` behind tower-resilience's circuit breaker, set like ours where
/// it can be: a failure ratio of 10 % over a count-based window of 100 calls,
/// a 5 s break, and the statuses our default policy counts as failures (408,
/// 429, 500, 502, 503, 504). Its circuit is one for the whole service, not one
/// per authority. A closed circuit's path, as [`with_breaker`]'s.
pub(crate) fn with_tower_resilience_breaker<S, T>(
    inner: S,
) -> impl Service<Req, Response = Response<T>, Error = CircuitBreakerError<Infallible>> + Clone
where
    S: Service<Req, Response = Response<T>, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
    T: Send + 'static,
{
    let layer = TowerResilienceBreakerLayer::builder()
        .failure_rate_threshold(0.1)
        .sliding_window_size(100)
        .wait_duration_in_open(Duration::from_secs(5))
        .classify_response(|response: &Response<T>| {
            matches!(
                response.status().as_u16(),
                408 | 429 | 500 | 502 | 503 | 504
            )
        })
        .build()
        .expect("the settings are valid");
    tower::Layer::layer(&layer, inner)
}

/// The part of our cost that the design fixes: `inner` behind a step that
/// does what [`DeadlineLayer`] must do to every request, read the clock and
/// record a [`RequestDeadline`] in the request's (empty) extensions, and
/// nothing else.
pub(crate) fn with_deadline_extension<S>(
    inner: S,
) -> impl Service<Req, Response = S::Response, Error = S::Error> + Clone
where
    S: Service<Req> + Clone,
{
    ServiceBuilder::new()
        .map_request(|mut request: Req| {
            request
                .extensions_mut()
                .insert(RequestDeadline::after(CALL_LIMIT));
            request
        })
        .service(inner)
}

/// `inner` behind the copy of each request that any retrying stack makes
/// before the first attempt, dropped at once: the floor of the retry's own work, with no code of ours.
pub(crate) fn with_request_copy<S>(
    inner: S,
) -> impl Service<Req, Response = S::Response, Error = S::Error> + Clone
where
    S: Service<Req> + Clone,
{
    ServiceBuilder::new()
        .map_request(|request: Req| {
            drop(std::hint::black_box(copy_request(&request)));
            request
        })
        .service(inner)
}

/// The smallest `tower::retry::Policy` with our semantics: retry a 503 at
/// once, at most `left` times, replaying a `Clone` body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Retry503 {
    left: u32,
}

impl Retry503 {
    /// At most `retries` retries.
    pub(crate) const fn new(retries: u32) -> Self {
        Self { left: retries }
    }
}

impl<B: Clone, T, E> Policy<Request<B>, Response<T>, E> for Retry503 {
    type Future = Ready<()>;

    fn retry(
        &mut self,
        _request: &mut Request<B>,
        result: &mut Result<Response<T>, E>,
    ) -> Option<Self::Future> {
        match result {
            Ok(response)
                if response.status() == StatusCode::SERVICE_UNAVAILABLE && self.left > 0 =>
            {
                self.left -= 1;
                Some(ready(()))
            }
            _ => None,
        }
    }

    fn clone_request(&mut self, request: &Request<B>) -> Option<Request<B>> {
        Some(copy_request(request))
    }
}

/// The copy of `request` that a retry keeps: what `StatusRetry` copies
/// (method, URI, version, headers, extensions, body), so that every stack
/// does the same work per attempt.
pub(crate) fn copy_request<B: Clone>(request: &Request<B>) -> Request<B> {
    let mut copy = Request::new(request.body().clone());
    *copy.method_mut() = request.method().clone();
    *copy.uri_mut() = request.uri().clone();
    *copy.version_mut() = request.version();
    *copy.headers_mut() = request.headers().clone();
    *copy.extensions_mut() = request.extensions().clone();
    copy
}

// ===== calls =====

/// One call: wait for readiness, then send a fresh request.
pub(crate) async fn call<S: Service<Req>>(svc: &mut S) -> Result<S::Response, S::Error> {
    svc.ready().await?.call(request()).await
}

/// The hand-written loop the retry path is compared with: up to three calls,
/// straight on the inner service, with no timers.
pub(crate) async fn hand_loop<S>(svc: &mut S) -> Result<Response<Body>, S::Error>
where
    S: Service<Req, Response = Response<Body>>,
{
    let mut retries = 0;
    loop {
        let response = call(svc).await?;
        if response.status() != StatusCode::SERVICE_UNAVAILABLE || retries == RETRIES {
            return Ok(response);
        }
        retries += 1;
    }
}
