//! The key maps of the circuit breaker and overload control under churn:
//! thousands of distinct hosts pass through a map of 64 keys, in both stack
//! forms (the combined service, and the three layers around the guard's
//! layer). The map never keeps more than its bound; an open circuit of a
//! host still called, a host called between every new one, and a host with
//! a call in flight all keep their state while the others come and go.
//!
//! The upstream is a `service_fn` in process that answers at once (but for
//! the host whose call it holds), on tokio's paused clock, one millisecond
//! between calls so that every key has its own last use.

#[path = "../support/mod.rs"]
mod support;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    breaker::{error::CircuitOpen, BreakerPolicy, CircuitState},
    deadline::DeadlineLayer,
    guard::GuardLayer,
    key::{PerKey, UpstreamKey},
    overload::{
        error::{Overloaded, Rejection},
        OverloadPolicy,
    },
    policy::{FixedDelay, TransientDecoder},
    retry::{RetryPolicy, StatusRetryLayer},
    BoxError, FailureKind, ResiliencePolicy,
};
use std::{
    collections::HashMap,
    convert::Infallible,
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
    time::Duration,
};
use support::guarded;
use tokio::{sync::Notify, time};
use tower::{util::BoxCloneService, Layer, ServiceBuilder, ServiceExt};

/// The bound of every map under test.
const MAX_KEYS: usize = 64;
/// The new hosts each test sends calls to: many times the bound.
const NEW_HOSTS: usize = 3_000;
/// The host whose upstream answers 503.
const DOWN: &str = "down.test";
/// The host whose first call the upstream holds until told.
const HELD: &str = "held.test";
/// The host called between every two new ones.
const HOT: &str = "hot.test";

/// The deadline of every call: far beyond the paused time a test spends.
const DEADLINE: Duration = Duration::from_secs(600);
const ATTEMPT: Duration = Duration::from_secs(300);

type Answer = Pin<Box<dyn Future<Output = Result<Response<Full<Bytes>>, Infallible>> + Send>>;

/// A stack that answers with the response's status.
type Svc = BoxCloneService<Request<Full<Bytes>>, StatusCode, BoxError>;

/// An upstream in process that counts the requests of each host: 503 for
/// [`DOWN`], the first request of [`HELD`] held until [`release`]d, 200
/// for any other.
///
/// [`release`]: Upstream::release
#[derive(Clone, Default)]
struct Upstream {
    calls: Arc<Mutex<HashMap<String, usize>>>,
    held: Arc<Notify>,
}

impl Upstream {
    fn serve(&self, request: Request<Full<Bytes>>) -> Answer {
        let host = request.uri().host().unwrap_or_default().to_owned();
        let nth = {
            let mut calls = self.calls.lock().unwrap();
            let count = calls.entry(host.clone()).or_default();
            *count += 1;
            *count
        };
        let held = Arc::clone(&self.held);
        Box::pin(async move {
            let status = match host.as_str() {
                DOWN => StatusCode::SERVICE_UNAVAILABLE,
                HELD if nth == 1 => {
                    held.notified().await;
                    StatusCode::OK
                }
                _ => StatusCode::OK,
            };
            let mut response = Response::new(Full::default());
            *response.status_mut() = status;
            Ok(response)
        })
    }

    fn calls(&self, host: &str) -> usize {
        self.calls.lock().unwrap().get(host).copied().unwrap_or(0)
    }

    fn release(&self) {
        self.held.notify_one();
    }
}

/// The two forms a guard takes between the retry and the attempt timeout.
#[derive(Debug, Clone, Copy)]
enum Form {
    /// `ResiliencePolicy::with_guard` with a breaker or overload control, then `layer()`.
    Combined,
    /// `DeadlineLayer -> StatusRetryLayer -> (the guard's layer) ->
    /// AttemptTimeoutLayer -> upstream`.
    Layers,
}

impl Form {
    const ALL: [Self; 2] = [Self::Combined, Self::Layers];
}

/// The guard under test.
enum Guard<'a> {
    Breaker(&'a BreakerPolicy<TransientDecoder>),
    Overload(&'a OverloadPolicy),
}

/// What `TransientDecoder` retries, twice, at once.
fn retry() -> RetryPolicy<TransientDecoder, FixedDelay> {
    RetryPolicy::new(TransientDecoder::new(), FixedDelay::new(Duration::ZERO, 2))
}

/// `form` with `guard`, over `upstream`.
fn stack(form: Form, guard: Guard<'_>, upstream: &Upstream) -> Svc {
    let upstream = upstream.clone();
    let inner = tower::service_fn(move |request| upstream.serve(request));
    let status = |response: Response<_>| response.status();
    let combined = || ResiliencePolicy::new(DEADLINE, ATTEMPT, retry()).unwrap();
    let layers = || {
        ServiceBuilder::new()
            .layer(DeadlineLayer::new(DEADLINE))
            .layer(StatusRetryLayer::new(retry()))
    };
    let attempt = AttemptTimeoutLayer::new(ATTEMPT);
    match (form, guard) {
        (Form::Combined, Guard::Breaker(breaker)) => {
            let policy = combined().with_guard(breaker.clone());
            BoxCloneService::new(policy.layer().layer(inner).map_response(status))
        }
        (Form::Combined, Guard::Overload(overload)) => {
            let policy = combined().with_guard(overload.clone());
            BoxCloneService::new(policy.layer().layer(inner).map_response(status))
        }
        (Form::Layers, Guard::Breaker(breaker)) => BoxCloneService::new(
            layers()
                .layer(GuardLayer::new(breaker.clone()))
                .layer(attempt)
                .service(inner)
                .map_response(status),
        ),
        (Form::Layers, Guard::Overload(overload)) => BoxCloneService::new(
            layers()
                .layer(GuardLayer::new(overload.clone()))
                .layer(attempt)
                .service(inner)
                .map_response(status),
        ),
    }
}

fn get(host: &str) -> Request<Full<Bytes>> {
    let uri = format!("http://{host}/items");
    Request::get(uri).body(Full::default()).unwrap()
}

fn key(host: &str) -> UpstreamKey {
    UpstreamKey::authority("http", host, 80)
}

/// One call through `svc` to `host`, a millisecond after the last.
async fn call(svc: &Svc, host: &str) -> Result<StatusCode, BoxError> {
    time::advance(Duration::from_millis(1)).await;
    guarded(svc.clone().oneshot(get(host))).await
}

/// A breaker that opens on the first failure and stays open for an hour.
fn breaker() -> BreakerPolicy<TransientDecoder> {
    let hour = Duration::from_secs(3600);
    BreakerPolicy::new(TransientDecoder::new())
        .consecutive_failures(1)
        .and_then(|p| p.break_duration(hour, hour))
        .and_then(|p| p.max_keys(MAX_KEYS, Duration::from_secs(300)))
        .unwrap()
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_open_circuit_and_a_hot_host_outlast_thousands_of_new_hosts() {
    for form in Form::ALL {
        let upstream = Upstream::default();
        let breaker = breaker();
        let svc = stack(form, Guard::Breaker(&breaker), &upstream);

        // The first attempt's 503 opens the circuit; the retry is turned away.
        match call(&svc, DOWN).await {
            Ok(status) => assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{form:?}"),
            Err(err) => assert_eq!(FailureKind::of(&*err), FailureKind::CircuitOpen, "{err}"),
        }
        assert!(matches!(
            breaker.state(&key(DOWN)),
            Some(CircuitState::Open { .. })
        ));

        for n in 0..NEW_HOSTS {
            assert_eq!(
                call(&svc, &format!("host-{n}.test")).await.unwrap(),
                StatusCode::OK
            );
            let kept = breaker.states().len();
            assert!(
                kept <= MAX_KEYS,
                "{form:?}: {kept} circuits kept, over {MAX_KEYS}"
            );
            if n > 0 {
                // The host called before the new one is still kept.
                let hot = breaker.state(&key(HOT));
                assert_eq!(hot, Some(CircuitState::Closed), "{form:?}: host {n}");
            }
            assert_eq!(call(&svc, HOT).await.unwrap(), StatusCode::OK);
            if n % 100 == 0 {
                // A host still called keeps its open circuit: turned away,
                // never sent.
                let err = call(&svc, DOWN).await.unwrap_err();
                assert_eq!(
                    FailureKind::of(&*err),
                    FailureKind::CircuitOpen,
                    "{form:?}: {err}"
                );
                let open = err.downcast_ref::<CircuitOpen>().expect("the typed error");
                assert_eq!(open.key(), &key(DOWN));
                assert_eq!(
                    upstream.calls(DOWN),
                    1,
                    "{form:?}: host {n}: sent while open"
                );
            }
        }
        assert_eq!(
            breaker.states().len(),
            MAX_KEYS,
            "{form:?}: the map is full"
        );
        assert!(
            breaker.state(&key("host-0.test")).is_none(),
            "{form:?}: old hosts went"
        );
        assert_eq!(upstream.calls(HOT), NEW_HOSTS, "{form:?}");
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_host_with_a_call_in_flight_keeps_its_slots_through_thousands_of_new_hosts() {
    for form in Form::ALL {
        let upstream = Upstream::default();
        let overload = OverloadPolicy::bulkhead(1)
            .and_then(|p| p.max_keys(MAX_KEYS, Duration::from_secs(1)))
            .unwrap();
        let svc = stack(form, Guard::Overload(&overload), &upstream);

        // The held call takes the host's one slot, and keeps it.
        let held = tokio::spawn(svc.clone().oneshot(get(HELD)));
        while upstream.calls(HELD) == 0 {
            tokio::task::yield_now().await;
        }

        // NOTE: the new hosts are idle (no call, none for a second) long
        // before the last of them: the held host is not, whatever its age.
        for n in 0..NEW_HOSTS {
            assert_eq!(
                call(&svc, &format!("host-{n}.test")).await.unwrap(),
                StatusCode::OK
            );
            let kept = overload.states().len();
            assert!(
                kept <= MAX_KEYS,
                "{form:?}: {kept} keys kept, over {MAX_KEYS}"
            );
        }
        let state = overload.state(&key(HELD)).expect("the held host is kept");
        assert_eq!(state.in_flight, 1, "{form:?}");

        // Its slot is still taken: a second call is turned away, never sent.
        let err = call(&svc, HELD).await.unwrap_err();
        assert_eq!(
            FailureKind::of(&*err),
            FailureKind::Overloaded,
            "{form:?}: {err}"
        );
        let overloaded = err.downcast_ref::<Overloaded>().expect("the typed error");
        assert!(matches!(
            overloaded.reason(),
            Rejection::QueueFull { limit: 1 }
        ));
        assert_eq!(upstream.calls(HELD), 1, "{form:?}");

        upstream.release();
        assert_eq!(guarded(held).await.unwrap().unwrap(), StatusCode::OK);
        assert_eq!(call(&svc, HELD).await.unwrap(), StatusCode::OK, "{form:?}");
        assert!(overload.states().len() <= MAX_KEYS);
    }
}
