//! The fallback on the paused clock, outside both forms of the stack: each
//! failure it covers (a 503 after the last attempt, the deadline, an open
//! circuit, overload, a refused connection), the request that did not opt
//! in getting its failure, and the outcomes no one named passing as they
//! are.

use super::{AcceptFallback, FallbackLayer, FallbackPolicy, FellBack};
use crate::{
    breaker::BreakerPolicy,
    fault::{Fault, FaultPolicy, Latency},
    guard::{GuardLayer, Settle},
    key::PerKey,
    overload::OverloadPolicy,
    policy::{FixedDelay, TransientDecoder},
    retry::{RetryPolicy, StatusRetryLayer},
    AttemptTimeoutLayer, Attempts, BoxError, DeadlineLayer, FailureKind, ResiliencePolicy,
};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{combinators::UnsyncBoxBody, BodyExt, Full};
use std::{
    convert::Infallible,
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc,
    },
    time::Duration,
};
use tokio::time;
use tower::{util::BoxCloneService, ServiceBuilder, ServiceExt};

const MS: Duration = Duration::from_millis(1);
const DEADLINE: Duration = Duration::from_secs(2);
const ATTEMPT: Duration = Duration::from_secs(1);

type Body = UnsyncBoxBody<Bytes, BoxError>;
type Svc = BoxCloneService<Request<String>, Response<Body>, BoxError>;

#[derive(Debug, Clone, Copy)]
enum Form {
    ThreeLayers,
    Combined,
}

const FORMS: [Form; 2] = [Form::ThreeLayers, Form::Combined];

/// An upstream that answers `status` after `latency`, counting its calls.
#[derive(Clone)]
struct Upstream {
    status: u16,
    latency: Duration,
    calls: Arc<AtomicU32>,
}

impl Upstream {
    fn new(status: u16, latency: Duration) -> Self {
        Self {
            status,
            latency,
            calls: Arc::default(),
        }
    }

    fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }

    async fn serve(self, _: Request<String>) -> Result<Response<Body>, Infallible> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        time::sleep(self.latency).await;
        let body = Full::new(Bytes::from("upstream")).map_err(Into::into);
        let mut response = Response::new(body.boxed_unsync());
        *response.status_mut() = StatusCode::from_u16(self.status).unwrap();
        Ok(response)
    }
}

/// The cached body, for the failures `named` says.
fn cached(named: impl FnOnce(FallbackPolicy) -> FallbackPolicy) -> FallbackPolicy {
    named(FallbackPolicy::new(|failure| {
        let mut response = Response::new(Bytes::from("cached"));
        let header = format!("{failure:?}").parse().unwrap();
        response.headers_mut().insert("x-replaced", header);
        response
    }))
}

/// `fallback` outside a stack of `form` whose guard is `guard`: transient
/// failures retried twice, 10 ms apart.
fn stack<G>(form: Form, fallback: &FallbackPolicy, guard: G, upstream: &Upstream) -> Svc
where
    G: Settle<Body> + Send + Sync + 'static,
    G::Pass: Send + Sync,
    G::Local: Send + Sync,
{
    let retry = RetryPolicy::new(TransientDecoder::new(), FixedDelay::new(10 * MS, 2));
    let upstream = upstream.clone();
    let serve = tower::service_fn(move |request| upstream.clone().serve(request));
    let outer = ServiceBuilder::new().layer(FallbackLayer::new(fallback.clone()));
    match form {
        Form::ThreeLayers => ServiceBuilder::new()
            .boxed_clone()
            .map_response(boxed)
            .layer(outer.into_inner())
            .layer(DeadlineLayer::new(DEADLINE))
            .layer(StatusRetryLayer::new(retry))
            .layer(GuardLayer::new(guard))
            .layer(AttemptTimeoutLayer::new(ATTEMPT))
            .service(serve),
        Form::Combined => ServiceBuilder::new()
            .boxed_clone()
            .map_response(boxed)
            .layer(outer.into_inner())
            .layer(
                ResiliencePolicy::new(DEADLINE, ATTEMPT, retry)
                    .unwrap()
                    .with_guard(guard)
                    .layer(),
            )
            .service(serve),
    }
}

fn boxed<B>(response: Response<B>) -> Response<Body>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    response.map(|body| body.map_err(Into::into).boxed_unsync())
}

fn get(accepts: bool) -> Request<String> {
    let mut request = Request::get("http://api.test/items")
        .body(String::new())
        .unwrap();
    if accepts {
        request.extensions_mut().insert(AcceptFallback);
    }
    request
}

async fn call(svc: &Svc, accepts: bool) -> Result<Response<Body>, BoxError> {
    time::timeout(Duration::from_secs(60), svc.clone().oneshot(get(accepts)))
        .await
        .expect("the call ends")
}

/// Asserts that `response` is the fallback's, replacing what `replaced`
/// says, and reads its body.
async fn assert_fell_back(response: Response<Body>, replaced: &str, form: Form) {
    assert_eq!(response.status(), StatusCode::OK, "{form:?}");
    assert_eq!(response.headers()["x-replaced"], replaced, "{form:?}");
    assert!(
        response.extensions().get::<FellBack>().is_some(),
        "{form:?}"
    );
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "cached", "{form:?}");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_503_after_the_last_attempt_falls_back_and_only_for_a_request_that_accepts() {
    let fallback = cached(|p| p.on_status(StatusCode::SERVICE_UNAVAILABLE));
    for form in FORMS {
        let upstream = Upstream::new(503, Duration::ZERO);
        let svc = stack(form, &fallback, (), &upstream);
        let response = call(&svc, true).await.unwrap();
        let fell_back = response.extensions().get::<FellBack>().unwrap().clone();
        assert_eq!(fell_back.status(), Some(StatusCode::SERVICE_UNAVAILABLE));
        assert_eq!(
            (fell_back.kind(), fell_back.error().is_none()),
            (None, true)
        );
        assert_eq!(upstream.calls(), 3, "{form:?}: after the retries");
        assert_fell_back(response, "Failure(503)", form).await;

        let response = call(&svc, false).await.unwrap();
        let seen = (response.status().as_u16(), Attempts::of(&response));
        assert_eq!(
            seen,
            (503, 3),
            "{form:?}: not opted in, the last 503 itself"
        );
        assert!(response.extensions().get::<FellBack>().is_none());
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_deadline_falls_back() {
    let fallback = cached(|p| p.on(FailureKind::Deadline));
    for form in FORMS {
        // A guard that holds every attempt past the deadline.
        let stuck = FaultPolicy::every(1, Fault::latency(Latency::fixed(DEADLINE * 10))).unwrap();
        let upstream = Upstream::new(200, Duration::ZERO);
        let svc = stack(form, &fallback, stuck, &upstream);
        let response = call(&svc, true).await.unwrap();
        let fell_back = response.extensions().get::<FellBack>().unwrap();
        assert_eq!(fell_back.kind(), Some(FailureKind::Deadline), "{form:?}");
        assert_eq!(fell_back.error().unwrap().to_string(), "deadline exceeded");
        assert_fell_back(response, "Failure(Deadline)", form).await;
        let err = call(&svc, false).await.unwrap_err();
        assert_eq!(FailureKind::of(&err), FailureKind::Deadline, "{form:?}");
        assert_eq!(upstream.calls(), 0);
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_open_circuit_falls_back() {
    let fallback = cached(|p| p.on(FailureKind::CircuitOpen));
    for form in FORMS {
        let breaker = BreakerPolicy::new(TransientDecoder::new())
            .consecutive_failures(1)
            .unwrap();
        let upstream = Upstream::new(503, Duration::ZERO);
        let svc = stack(form, &fallback, breaker, &upstream);
        // The first 503 opens the circuit, which turns the retry away: a
        // request that did not opt in gets that error.
        let err = call(&svc, false).await.unwrap_err();
        assert_eq!(FailureKind::of(&err), FailureKind::CircuitOpen, "{form:?}");
        assert_eq!(upstream.calls(), 1, "{form:?}");
        let response = call(&svc, true).await.unwrap();
        assert_fell_back(response, "Failure(CircuitOpen)", form).await;
        assert_eq!(upstream.calls(), 1, "{form:?}: never sent");
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn overload_falls_back() {
    let fallback = cached(|p| p.on(FailureKind::Overloaded));
    for form in FORMS {
        let bulkhead = OverloadPolicy::bulkhead(1).unwrap();
        let upstream = Upstream::new(200, 500 * MS);
        let svc = stack(form, &fallback, bulkhead, &upstream);
        let holding = tokio::spawn(svc.clone().oneshot(get(false)));
        time::sleep(MS).await;
        let response = call(&svc, true).await.unwrap();
        assert_fell_back(response, "Failure(Overloaded)", form).await;
        let err = call(&svc, false).await.unwrap_err();
        assert_eq!(FailureKind::of(&err), FailureKind::Overloaded, "{form:?}");
        let held = holding.await.unwrap().unwrap();
        assert_eq!(
            held.status(),
            StatusCode::OK,
            "{form:?}: the call in flight"
        );
        assert_eq!(upstream.calls(), 1, "{form:?}");
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_refused_connection_falls_back_once_the_retries_are_spent() {
    let fallback = cached(|p| p.on(FailureKind::ConnectRefused));
    for form in FORMS {
        let refused = FaultPolicy::every(1, Fault::connect_refused()).unwrap();
        let upstream = Upstream::new(200, Duration::ZERO);
        let svc = stack(form, &fallback, refused.clone(), &upstream);
        let response = call(&svc, true).await.unwrap();
        assert_fell_back(response, "Failure(ConnectRefused)", form).await;
        let state = refused.states()[0].1;
        assert_eq!(state.injected, 3, "{form:?}: three attempts refused first");
        let err = call(&svc, false).await.unwrap_err();
        assert_eq!(
            FailureKind::of(&err),
            FailureKind::ConnectRefused,
            "{form:?}"
        );
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn what_no_one_named_passes_as_it_is() {
    let fallback = cached(|p| {
        p.on(FailureKind::Deadline)
            .when(|failure| failure.status() == Some(StatusCode::NOT_FOUND))
    });
    for form in FORMS {
        let upstream = Upstream::new(503, Duration::ZERO);
        let response = call(&stack(form, &fallback, (), &upstream), true)
            .await
            .unwrap();
        assert_eq!(response.status(), 503, "{form:?}: a 503 no one named");
        let refused = FaultPolicy::every(1, Fault::connect_refused()).unwrap();
        let err = call(&stack(form, &fallback, refused, &upstream), true)
            .await
            .unwrap_err();
        assert_eq!(
            FailureKind::of(&err),
            FailureKind::ConnectRefused,
            "{form:?}"
        );
        let ok = Upstream::new(200, Duration::ZERO);
        let response = call(&stack(form, &fallback, (), &ok), true).await.unwrap();
        assert!(
            response.extensions().get::<FellBack>().is_none(),
            "{form:?}"
        );
        // The predicate names a 404.
        let missing = Upstream::new(404, Duration::ZERO);
        let response = call(&stack(form, &fallback, (), &missing), true)
            .await
            .unwrap();
        assert_fell_back(response, "Failure(404)", form).await;
    }
}

#[test]
fn a_policy_shows_what_it_names() {
    let policy = cached(|p| {
        p.on(FailureKind::Deadline)
            .on_status(StatusCode::BAD_GATEWAY)
    });
    let debug = format!("{policy:?}");
    assert!(
        debug.contains("Deadline") && debug.contains("502"),
        "{debug}"
    );
    let layer = FallbackLayer::new(policy.clone());
    assert!(format!("{layer:?}").contains("FallbackLayer"));
}

/// The fallback answer to a 503 after three attempts says how many attempts
/// it replaced.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_fallback_answer_keeps_the_attempts_of_the_response_it_replaced() {
    let fallback = cached(|p| p.on_status(StatusCode::SERVICE_UNAVAILABLE));
    for form in FORMS {
        let upstream = Upstream::new(503, Duration::ZERO);
        let svc = stack(form, &fallback, (), &upstream);
        let response = call(&svc, true).await.unwrap();
        assert!(response.extensions().get::<FellBack>().is_some());
        assert_eq!(upstream.calls(), 3, "{form:?}");
        assert_eq!(
            Attempts::of(&response),
            3,
            "{form:?}: the fallback hides the retries"
        );
    }
}
