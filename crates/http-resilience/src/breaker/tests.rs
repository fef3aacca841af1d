//! The breaker's state machine, on tokio's paused clock.

use super::{
    error::CircuitOpen, rules::judge, rules::Judged, BreakerEvent, BreakerPolicy, CircuitState,
    TripReason,
};
use crate::key::{KeyRef, UpstreamKey};
use crate::{
    guard::GuardLayer,
    key::PerKey,
    policy::{FixedDelay, Reason, RetryBudget, TransientDecoder, Verdict},
    retry::{RetryPolicy, StatusRetryLayer},
    BoxError, FailureKind, RetryReport, Stop,
};
use http::{Request, Response, StatusCode};
use std::{
    future::Future,
    pin::Pin,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};
use tokio::time::{self, Instant};
use tower::{Layer, Service, ServiceExt};

const SECOND: Duration = Duration::from_secs(1);

/// What the stand-in upstream does with every call.
#[derive(Debug, Clone, Copy)]
enum Mode {
    Status(u16),
    RetryAfter(u16, u64),
    Refused,
    /// Answers 200 after this long.
    Slow(Duration),
}

/// A stand-in upstream whose answer the test changes, counting its calls.
#[derive(Clone)]
struct Upstream {
    mode: Arc<Mutex<Mode>>,
    calls: Arc<AtomicUsize>,
}

type Outcome = Result<Response<()>, BoxError>;
type Call = Pin<Box<dyn Future<Output = Outcome> + Send>>;

impl Upstream {
    fn new(mode: Mode) -> Self {
        Self {
            mode: Arc::new(Mutex::new(mode)),
            calls: Arc::new(AtomicUsize::new(0)),
        }
    }

    fn set(&self, mode: Mode) {
        *self.mode.lock().unwrap() = mode;
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }

    fn service(
        &self,
    ) -> impl Service<Request<()>, Response = Response<()>, Error = BoxError, Future = Call> + Clone
    {
        let upstream = self.clone();
        tower::service_fn(move |_: Request<()>| -> Call {
            upstream.calls.fetch_add(1, Ordering::SeqCst);
            let mode = *upstream.mode.lock().unwrap();
            Box::pin(async move {
                let status = match mode {
                    Mode::Status(status) => status,
                    Mode::RetryAfter(status, secs) => {
                        return Ok(Response::builder()
                            .status(status)
                            .header("retry-after", secs.to_string())
                            .body(())
                            .unwrap())
                    }
                    Mode::Refused => {
                        return Err(
                            std::io::Error::from(std::io::ErrorKind::ConnectionRefused).into()
                        )
                    }
                    Mode::Slow(delay) => {
                        time::sleep(delay).await;
                        200
                    }
                };
                Ok(Response::builder().status(status).body(()).unwrap())
            })
        })
    }
}

/// The defaults without jitter, so that every break is exact.
fn policy() -> BreakerPolicy<TransientDecoder> {
    BreakerPolicy::default().break_growth(2.0, 0.0).unwrap()
}

fn request(uri: &str) -> Request<()> {
    Request::get(uri).body(()).unwrap()
}

async fn call<S>(svc: &mut S, uri: &str) -> Outcome
where
    S: Service<Request<()>, Response = Response<()>, Error = BoxError>,
{
    svc.ready().await?.call(request(uri)).await
}

/// The open-circuit error of an outcome, or a panic.
fn open_error(outcome: Outcome) -> CircuitOpen {
    let err = outcome.expect_err("the circuit should be open");
    assert_eq!(FailureKind::of(&*err), FailureKind::CircuitOpen, "{err}");
    err.downcast_ref::<CircuitOpen>().unwrap().clone()
}

fn key(host: &str) -> UpstreamKey {
    UpstreamKey::authority("http", host, 80)
}

const A: &str = "http://a.test/";
const B: &str = "http://b.test/";

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn trips_after_consecutive_failures() {
    let upstream = Upstream::new(Mode::Status(503));
    let policy = policy().consecutive_failures(3).unwrap();
    let mut svc = breaker_around(upstream.service(), policy.clone());
    for _ in 0..2 {
        assert_eq!(call(&mut svc, A).await.unwrap().status(), 503);
    }
    // A success in between starts the count over.
    upstream.set(Mode::Status(200));
    call(&mut svc, A).await.unwrap();
    upstream.set(Mode::Status(503));
    for _ in 0..3 {
        assert_eq!(call(&mut svc, A).await.unwrap().status(), 503);
    }
    assert_eq!(upstream.calls(), 6);
    let start = Instant::now();
    let open = open_error(call(&mut svc, A).await);
    assert_eq!(upstream.calls(), 6, "an open circuit sends nothing");
    assert_eq!(open.key(), &key("a.test"));
    assert_eq!(open.retry_at(), start + 5 * SECOND);
    assert_eq!(
        policy.state(&key("a.test")),
        Some(CircuitState::Open {
            until: start + 5 * SECOND
        })
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn errors_and_timeouts_count_as_failures() {
    let upstream = Upstream::new(Mode::Refused);
    let policy = policy().consecutive_failures(2).unwrap();
    let mut svc = breaker_around(upstream.service(), policy);
    call(&mut svc, A).await.unwrap_err();
    call(&mut svc, A).await.unwrap_err();
    open_error(call(&mut svc, A).await);
    assert_eq!(upstream.calls(), 2);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn trips_on_the_failure_ratio_once_the_throughput_is_reached() {
    let upstream = Upstream::new(Mode::Status(200));
    let policy = policy()
        .consecutive_failures(1000)
        .unwrap()
        .failure_ratio(0.5, 10 * SECOND, 10)
        .unwrap();
    let mut svc = breaker_around(upstream.service(), policy.clone());
    // Success, failure, ...: half of them fail, from the start.
    for n in 0..10 {
        assert_eq!(
            policy.state(&key("a.test")).unwrap_or(CircuitState::Closed),
            CircuitState::Closed,
            "call {n}"
        );
        upstream.set(Mode::Status(if n % 2 == 0 { 200 } else { 503 }));
        call(&mut svc, A).await.unwrap();
    }
    assert!(matches!(
        policy.state(&key("a.test")),
        Some(CircuitState::Open { .. })
    ));
    open_error(call(&mut svc, A).await);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_ratio_needs_the_minimum_throughput_within_the_window() {
    let upstream = Upstream::new(Mode::Status(503));
    let policy = policy()
        .consecutive_failures(1000)
        .unwrap()
        .failure_ratio(0.5, 10 * SECOND, 10)
        .unwrap();
    let mut svc = breaker_around(upstream.service(), policy.clone());
    for _ in 0..9 {
        call(&mut svc, A).await.unwrap();
    }
    assert_eq!(
        policy.state(&key("a.test")),
        Some(CircuitState::Closed),
        "9 calls are below 10"
    );
    // The nine leave the window: one more failure is one call in it.
    time::advance(11 * SECOND).await;
    call(&mut svc, A).await.unwrap();
    assert_eq!(policy.state(&key("a.test")), Some(CircuitState::Closed));
    for _ in 0..9 {
        call(&mut svc, A).await.unwrap();
    }
    open_error(call(&mut svc, A).await);
    assert_eq!(upstream.calls(), 19);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_break_lasts_what_retry_after_asked_for_capped() {
    let upstream = Upstream::new(Mode::RetryAfter(503, 20));
    let policy = policy().consecutive_failures(1).unwrap();
    let mut svc = breaker_around(upstream.service(), policy);
    let start = Instant::now();
    call(&mut svc, A).await.unwrap();
    assert_eq!(
        open_error(call(&mut svc, A).await).retry_at(),
        start + 20 * SECOND
    );
    time::advance(19 * SECOND).await;
    open_error(call(&mut svc, A).await);
    time::advance(SECOND).await;
    // The probe: it asks for ten minutes, which the cap holds to one.
    upstream.set(Mode::RetryAfter(429, 600));
    assert_eq!(call(&mut svc, A).await.unwrap().status(), 429);
    let reopened = Instant::now();
    assert_eq!(
        open_error(call(&mut svc, A).await).retry_at(),
        reopened + 60 * SECOND
    );
    assert_eq!(upstream.calls(), 2);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn repeated_trips_back_off_to_the_cap_and_a_close_forgets_them() {
    let upstream = Upstream::new(Mode::Status(503));
    let policy = policy()
        .consecutive_failures(1)
        .unwrap()
        .break_duration(5 * SECOND, 30 * SECOND)
        .unwrap();
    let mut svc = breaker_around(upstream.service(), policy);
    call(&mut svc, A).await.unwrap();
    for expected in [5, 10, 20, 30, 30] {
        let now = Instant::now();
        let open = open_error(call(&mut svc, A).await);
        assert_eq!(open.retry_at(), now + expected * SECOND);
        time::advance(expected * SECOND).await;
        // The probe fails: open again, for longer.
        assert_eq!(call(&mut svc, A).await.unwrap().status(), 503);
    }
    time::advance(30 * SECOND).await;
    upstream.set(Mode::Status(200));
    call(&mut svc, A).await.unwrap();
    upstream.set(Mode::Status(503));
    call(&mut svc, A).await.unwrap();
    let now = Instant::now();
    assert_eq!(
        open_error(call(&mut svc, A).await).retry_at(),
        now + 5 * SECOND
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn jitter_lengthens_the_break_within_its_share() {
    for seed in 0..20 {
        let upstream = Upstream::new(Mode::Status(503));
        let policy = BreakerPolicy::default()
            .consecutive_failures(1)
            .unwrap()
            .break_growth(2.0, 0.5)
            .unwrap()
            .with_seed(seed);
        let mut svc = breaker_around(upstream.service(), policy);
        call(&mut svc, A).await.unwrap();
        let now = Instant::now();
        let wait = open_error(call(&mut svc, A).await).retry_at() - now;
        assert!(
            wait >= 5 * SECOND && wait <= 7500 * Duration::from_millis(1),
            "{wait:?}"
        );
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn half_open_lets_a_bounded_number_of_probes_through_then_closes() {
    let upstream = Upstream::new(Mode::Status(503));
    let policy = policy()
        .consecutive_failures(1)
        .unwrap()
        .half_open(2, 2)
        .unwrap();
    let svc = breaker_around(upstream.service(), policy.clone());
    call(&mut svc.clone(), A).await.unwrap();
    time::advance(5 * SECOND).await;
    upstream.set(Mode::Slow(SECOND));
    let probes: Vec<_> = (0..2)
        .map(|_| tokio::spawn(svc.clone().oneshot(request(A))))
        .collect();
    tokio::task::yield_now().await;
    assert_eq!(policy.state(&key("a.test")), Some(CircuitState::HalfOpen));
    assert_eq!(upstream.calls(), 3);
    // Every probe's place is taken: turned away.
    open_error(call(&mut svc.clone(), A).await);
    assert_eq!(upstream.calls(), 3);
    for probe in probes {
        assert_eq!(probe.await.unwrap().unwrap().status(), 200);
    }
    assert_eq!(policy.state(&key("a.test")), Some(CircuitState::Closed));
    upstream.set(Mode::Status(200));
    call(&mut svc.clone(), A).await.unwrap();
    assert_eq!(upstream.calls(), 4);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_hundred_callers_at_the_end_of_the_break_make_only_the_allowed_probes() {
    let upstream = Upstream::new(Mode::Status(503));
    let policy = policy()
        .consecutive_failures(1)
        .unwrap()
        .half_open(3, 3)
        .unwrap();
    let svc = breaker_around(upstream.service(), policy.clone());
    call(&mut svc.clone(), A).await.unwrap();
    time::advance(5 * SECOND).await;
    upstream.set(Mode::Slow(SECOND));
    let callers: Vec<_> = (0..100)
        .map(|_| tokio::spawn(svc.clone().oneshot(request(A))))
        .collect();
    let mut rejected = 0;
    for caller in callers {
        match caller.await.unwrap() {
            Ok(response) => assert_eq!(response.status(), 200),
            Err(err) => {
                assert_eq!(FailureKind::of(&*err), FailureKind::CircuitOpen);
                rejected += 1;
            }
        }
    }
    assert_eq!(
        upstream.calls(),
        1 + 3,
        "the tripping call and three probes"
    );
    assert_eq!(rejected, 97);
    assert_eq!(policy.state(&key("a.test")), Some(CircuitState::Closed));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn any_failed_probe_opens_the_circuit_again() {
    let upstream = Upstream::new(Mode::Status(503));
    let policy = policy()
        .consecutive_failures(1)
        .unwrap()
        .half_open(1, 3)
        .unwrap();
    let mut svc = breaker_around(upstream.service(), policy.clone());
    call(&mut svc, A).await.unwrap();
    time::advance(5 * SECOND).await;
    upstream.set(Mode::Status(200));
    call(&mut svc, A).await.unwrap();
    call(&mut svc, A).await.unwrap();
    assert_eq!(
        policy.state(&key("a.test")),
        Some(CircuitState::HalfOpen),
        "2 of 3 successes"
    );
    upstream.set(Mode::Status(503));
    call(&mut svc, A).await.unwrap();
    assert!(matches!(
        policy.state(&key("a.test")),
        Some(CircuitState::Open { .. })
    ));
    open_error(call(&mut svc, A).await);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_dropped_call_counts_for_nothing_and_a_dropped_probe_gives_its_place_back() {
    let upstream = Upstream::new(Mode::Slow(10 * SECOND));
    let policy = policy().consecutive_failures(1).unwrap();
    let mut svc = breaker_around(upstream.service(), policy.clone());
    // A closed call dropped before its outcome.
    drop(svc.ready().await.unwrap().call(request(A)));
    assert_eq!(policy.state(&key("a.test")), Some(CircuitState::Closed));
    upstream.set(Mode::Status(503));
    call(&mut svc, A).await.unwrap();
    time::advance(5 * SECOND).await;
    // The probe is dropped: its place comes back for the next call.
    upstream.set(Mode::Slow(10 * SECOND));
    drop(svc.ready().await.unwrap().call(request(A)));
    upstream.set(Mode::Status(200));
    assert_eq!(call(&mut svc, A).await.unwrap().status(), 200);
    assert_eq!(policy.state(&key("a.test")), Some(CircuitState::Closed));
    assert_eq!(upstream.calls(), 4);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_probe_whose_decoder_panics_gives_its_place_back() {
    // A decoder of one's own that panics on 418 and retries a 503.
    let decoder = |outcome: &Result<Response<()>, BoxError>| match outcome {
        Ok(response) if response.status() == 418 => panic!("a decoder that panics"),
        Ok(response) if response.status() == 503 => Verdict::retry(StatusCode::SERVICE_UNAVAILABLE),
        _ => Verdict::Accept,
    };
    let upstream = Upstream::new(Mode::Status(503));
    let policy = BreakerPolicy::new(decoder)
        .break_growth(2.0, 0.0)
        .unwrap()
        .consecutive_failures(1)
        .unwrap()
        .half_open(1, 1)
        .unwrap();
    let mut svc = breaker_around(upstream.service(), policy.clone());
    call(&mut svc, A).await.unwrap();
    time::advance(5 * SECOND).await;
    // The only probe's outcome makes the decoder panic.
    upstream.set(Mode::Status(418));
    let probe = svc.ready().await.unwrap().call(request(A));
    let panicked = tokio::spawn(probe).await.unwrap_err();
    assert!(panicked.is_panic());
    // Its place came back: the next call is the probe that closes the circuit.
    upstream.set(Mode::Status(200));
    assert_eq!(call(&mut svc, A).await.unwrap().status(), 200);
    assert_eq!(policy.state(&key("a.test")), Some(CircuitState::Closed));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn keys_are_isolated() {
    let upstream = Upstream::new(Mode::Status(503));
    let policy = policy().consecutive_failures(1).unwrap();
    let mut svc = breaker_around(upstream.service(), policy.clone());
    call(&mut svc, A).await.unwrap();
    open_error(call(&mut svc, A).await);
    upstream.set(Mode::Status(200));
    assert_eq!(call(&mut svc, B).await.unwrap().status(), 200);
    assert_eq!(
        call(&mut svc, "http://a.test:8080/")
            .await
            .unwrap()
            .status(),
        200,
        "another port"
    );
    open_error(call(&mut svc, "http://A.TEST:80/other").await);
    assert_eq!(policy.state(&key("b.test")), Some(CircuitState::Closed));
    assert_eq!(policy.states().len(), 3);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_circuit_at_hand_serves_only_its_own_scheme_and_authority() {
    let upstream = Upstream::new(Mode::Status(503));
    let policy = policy().consecutive_failures(1).unwrap();
    let mut svc = breaker_around(upstream.service(), policy.clone());
    call(&mut svc, A).await.unwrap();
    open_error(call(&mut svc, A).await);
    upstream.set(Mode::Status(200));
    // The same authority under another scheme is another key.
    let other = call(&mut svc, "https://a.test/").await.unwrap();
    assert_eq!(other.status(), 200, "https is not http's circuit");
    // Written otherwise, the same key: its port, its case, its user.
    for same in [
        "http://a.test/",
        "http://a.test:80/x",
        "http://A.Test/",
        "http://me@a.test/",
    ] {
        open_error(call(&mut svc, same).await);
    }
    assert_eq!(upstream.calls(), 2);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_key_of_ones_own_keys_the_circuits() {
    let upstream = Upstream::new(Mode::Status(503));
    let policy = policy().consecutive_failures(1).unwrap().with_key(
        |_: &http::Uri, headers: &http::HeaderMap| {
            let tenant = headers.get("x-tenant").and_then(|v| v.to_str().ok());
            UpstreamKey::custom(tenant.unwrap_or("none"))
        },
    );
    let svc = breaker_around(upstream.service(), policy.clone());
    let tenant = |name: &str| Request::get(A).header("x-tenant", name).body(()).unwrap();
    svc.clone().oneshot(tenant("one")).await.unwrap();
    open_error(svc.clone().oneshot(tenant("one")).await);
    upstream.set(Mode::Status(200));
    svc.clone().oneshot(tenant("two")).await.unwrap();
    assert_eq!(
        policy.state(&UpstreamKey::custom("two")),
        Some(CircuitState::Closed)
    );
    assert!(policy.state(&key("a.test")).is_none());
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_key_map_is_bounded() {
    let upstream = Upstream::new(Mode::Status(200));
    let policy = policy().max_keys(2, 10 * SECOND).unwrap();
    let mut svc = breaker_around(upstream.service(), policy.clone());
    for uri in [A, B, A] {
        call(&mut svc, uri).await.unwrap();
        time::advance(Duration::from_millis(1)).await;
    }
    // Full: the least recently used (b) goes.
    call(&mut svc, "http://c.test/").await.unwrap();
    assert_eq!(policy.states().len(), 2);
    assert!(policy.state(&key("b.test")).is_none());
    assert!(policy.state(&key("a.test")).is_some());
    // Both idle: both go for the next new key.
    time::advance(11 * SECOND).await;
    call(&mut svc, "http://d.test/").await.unwrap();
    assert_eq!(policy.states().len(), 1);
    for n in 0..50 {
        call(&mut svc, &format!("http://host-{n}.test/"))
            .await
            .unwrap();
        assert!(policy.states().len() <= 2);
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_evicted_open_circuit_at_hand_is_not_used_again() {
    let upstream = Upstream::new(Mode::Status(503));
    let policy = policy()
        .consecutive_failures(1)
        .unwrap()
        .max_keys(1, 60 * SECOND)
        .unwrap();
    let mut svc = breaker_around(upstream.service(), policy.clone());
    call(&mut svc, A).await.unwrap();
    open_error(call(&mut svc, A).await);
    // Another clone brings a new key, which evicts a's circuit.
    upstream.set(Mode::Status(200));
    call(&mut svc.clone(), B).await.unwrap();
    assert!(policy.state(&key("a.test")).is_none());
    assert_eq!(
        call(&mut svc, A).await.unwrap().status(),
        200,
        "a starts closed again"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_listener_hears_every_change_and_rejection() {
    let heard = Arc::new(Mutex::new(Vec::new()));
    let log = heard.clone();
    let upstream = Upstream::new(Mode::Status(503));
    let policy =
        policy()
            .consecutive_failures(2)
            .unwrap()
            .with_listener(move |event: &BreakerEvent<'_>| {
                log.lock().unwrap().push(event.to_string());
                if let BreakerEvent::Opened { why, .. } = event {
                    assert_eq!(*why, TripReason::ConsecutiveFailures { count: 2 });
                }
            });
    let mut svc = breaker_around(upstream.service(), policy);
    call(&mut svc, A).await.unwrap();
    call(&mut svc, A).await.unwrap();
    open_error(call(&mut svc, A).await);
    time::advance(5 * SECOND).await;
    upstream.set(Mode::Status(200));
    call(&mut svc, A).await.unwrap();
    assert_eq!(
        *heard.lock().unwrap(),
        [
            "circuit http://a.test:80 opened for 5s (2 failures in a row, last: retry (503 Service Unavailable)), trip 1",
            "circuit http://a.test:80 open: call rejected",
            "circuit http://a.test:80 half-open",
            "circuit http://a.test:80 closed",
        ]
    );
}

/// The events a policy's listener heard, as lines.
type Heard = Arc<Mutex<Vec<String>>>;

/// `policy`, telling its events to the lines returned.
fn heard(policy: BreakerPolicy<TransientDecoder>) -> (BreakerPolicy<TransientDecoder>, Heard) {
    let heard = Heard::default();
    let log = heard.clone();
    let policy = policy.with_listener(move |event: &BreakerEvent<'_>| {
        log.lock().unwrap().push(event.to_string());
    });
    (policy, heard)
}

/// Trips the circuit of `a.test` with one 503, waits out the break and
/// sends a good probe: the policy must trip on one failure, break for 5 s
/// and close after one probe. Returns the instant the probe ended.
async fn trip_and_probe<S>(svc: &mut S, upstream: &Upstream) -> Instant
where
    S: Service<Request<()>, Response = Response<()>, Error = BoxError>,
{
    upstream.set(Mode::Status(503));
    assert_eq!(call(svc, A).await.unwrap().status(), 503);
    time::advance(5 * SECOND).await;
    upstream.set(Mode::Status(200));
    assert_eq!(call(svc, A).await.unwrap().status(), 200);
    Instant::now()
}

/// Which of `calls` calls go (`x`) and which are turned away (`.`, told to
/// come back at `retry_at`).
async fn admissions<S>(svc: &mut S, calls: usize, retry_at: Instant) -> String
where
    S: Service<Request<()>, Response = Response<()>, Error = BoxError>,
{
    let mut pattern = String::new();
    for _ in 0..calls {
        let outcome = call(svc, A).await;
        if outcome.is_ok() {
            pattern.push('x');
        } else {
            let open = open_error(outcome);
            assert_eq!(open.retry_at(), retry_at, "turned away after {pattern:?}");
            pattern.push('.');
        }
    }
    pattern
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_ramp_lets_a_growing_share_through_then_closes() {
    let upstream = Upstream::new(Mode::Status(200));
    let policy = policy()
        .consecutive_failures(1)
        .unwrap()
        .ramp(4 * SECOND, 4)
        .unwrap();
    let mut svc = breaker_around(upstream.service(), policy.clone());
    let start = trip_and_probe(&mut svc, &upstream).await;
    let end = start + 4 * SECOND;
    let steps = ["x...x...", "x.x.x.x.", "xxx.xxx.", "xxxxxxxx"];
    for (step, expected) in (1..).zip(steps) {
        let ramp = CircuitState::Ramp {
            admitted: step,
            of: 4,
            until: end,
        };
        assert_eq!(policy.state(&key("a.test")), Some(ramp), "step {step}");
        let next = start + step * SECOND;
        assert_eq!(admissions(&mut svc, 8, next).await, expected, "step {step}");
        time::advance(SECOND).await;
    }
    assert_eq!(
        policy.state(&key("a.test")),
        Some(CircuitState::Ramp {
            admitted: 4,
            of: 4,
            until: end
        }),
        "over, until the next call"
    );
    assert_eq!(upstream.calls(), 2 + 2 + 4 + 6 + 8);
    assert_eq!(admissions(&mut svc, 8, end).await, "xxxxxxxx");
    assert_eq!(policy.state(&key("a.test")), Some(CircuitState::Closed));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_failure_during_the_ramp_opens_the_circuit_for_a_longer_break() {
    let upstream = Upstream::new(Mode::Status(200));
    let (policy, heard) = heard(
        policy()
            .consecutive_failures(1)
            .unwrap()
            .ramp(4 * SECOND, 4)
            .unwrap(),
    );
    let mut svc = breaker_around(upstream.service(), policy.clone());
    trip_and_probe(&mut svc, &upstream).await;
    // Three quarters go in the third step: two good calls, then a 503.
    time::advance(2 * SECOND).await;
    call(&mut svc, A).await.unwrap();
    call(&mut svc, A).await.unwrap();
    upstream.set(Mode::Status(503));
    assert_eq!(call(&mut svc, A).await.unwrap().status(), 503);
    let reopened = Instant::now();
    assert_eq!(
        policy.state(&key("a.test")),
        Some(CircuitState::Open {
            until: reopened + 10 * SECOND
        }),
        "the second trip's break"
    );
    open_error(call(&mut svc, A).await);
    // The next probe ramps up again, and this ramp closes the circuit.
    time::advance(10 * SECOND).await;
    upstream.set(Mode::Status(200));
    call(&mut svc, A).await.unwrap();
    time::advance(4 * SECOND).await;
    call(&mut svc, A).await.unwrap();
    assert_eq!(policy.state(&key("a.test")), Some(CircuitState::Closed));
    let a = "circuit http://a.test:80";
    assert_eq!(
        *heard.lock().unwrap(),
        [
            format!("{a} opened for 5s (1 failures in a row, last: retry (503 Service Unavailable)), trip 1"),
            format!("{a} half-open"),
            format!("{a} ramping up over 4s in 4 steps"),
            format!("{a} opened for 10s (a call failed during the ramp, last: retry (503 Service Unavailable)), trip 2"),
            format!("{a} open: call rejected"),
            format!("{a} half-open"),
            format!("{a} ramping up over 4s in 4 steps"),
            format!("{a} closed"),
        ]
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_call_dropped_during_the_ramp_counts_for_nothing_and_keeps_its_share() {
    let upstream = Upstream::new(Mode::Status(200));
    let policy = policy()
        .consecutive_failures(1)
        .unwrap()
        .ramp(4 * SECOND, 4)
        .unwrap();
    let mut svc = breaker_around(upstream.service(), policy.clone());
    let start = trip_and_probe(&mut svc, &upstream).await;
    // The step's first call goes, and is dropped before its outcome.
    upstream.set(Mode::Refused);
    drop(svc.ready().await.unwrap().call(request(A)));
    assert_eq!(upstream.calls(), 3, "it went");
    assert_eq!(admissions(&mut svc, 3, start + SECOND).await, "...");
    // In the last step, every call goes; a dropped one is still nothing.
    time::advance(3 * SECOND).await;
    drop(svc.ready().await.unwrap().call(request(A)));
    assert!(matches!(
        policy.state(&key("a.test")),
        Some(CircuitState::Ramp { admitted: 4, .. })
    ));
    time::advance(SECOND).await;
    upstream.set(Mode::Status(200));
    call(&mut svc, A).await.unwrap();
    assert_eq!(policy.state(&key("a.test")), Some(CircuitState::Closed));
    assert_eq!(upstream.calls(), 5);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn slow_calls_count_as_failures_in_a_row_and_as_probes() {
    let upstream = Upstream::new(Mode::Slow(Duration::from_millis(500)));
    let (policy, heard) = heard(
        policy()
            .consecutive_failures(2)
            .unwrap()
            .slow_calls(SECOND)
            .unwrap(),
    );
    let mut svc = breaker_around(upstream.service(), policy.clone());
    for delay in [500, 1000, 999, 2000] {
        upstream.set(Mode::Slow(Duration::from_millis(delay)));
        call(&mut svc, A).await.unwrap();
        assert_eq!(policy.state(&key("a.test")), Some(CircuitState::Closed));
    }
    // The second slow one in a row (the threshold itself is slow).
    upstream.set(Mode::Slow(SECOND));
    assert_eq!(call(&mut svc, A).await.unwrap().status(), 200);
    open_error(call(&mut svc, A).await);
    // A slow probe opens the circuit again.
    time::advance(5 * SECOND).await;
    call(&mut svc, A).await.unwrap();
    assert!(matches!(
        policy.state(&key("a.test")),
        Some(CircuitState::Open { .. })
    ));
    let a = "circuit http://a.test:80";
    assert_eq!(
        heard.lock().unwrap()[..],
        [
            format!("{a} opened for 5s (2 failures in a row, last: fail (slow call)), trip 1"),
            format!("{a} open: call rejected"),
            format!("{a} half-open"),
            format!("{a} opened for 10s (a probe failed, last: fail (slow call)), trip 2"),
        ]
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn slow_calls_count_in_the_failure_ratio() {
    let upstream = Upstream::new(Mode::Status(200));
    let policy = policy()
        .consecutive_failures(1000)
        .unwrap()
        .failure_ratio(0.5, 60 * SECOND, 4)
        .unwrap()
        .slow_calls(SECOND)
        .unwrap();
    let mut svc = breaker_around(upstream.service(), policy.clone());
    for n in 0..4 {
        assert_eq!(
            policy.state(&key("a.test")).unwrap_or(CircuitState::Closed),
            CircuitState::Closed,
            "call {n}"
        );
        let slow = Mode::Slow(Duration::from_millis(1500));
        upstream.set(if n % 2 == 0 { Mode::Status(200) } else { slow });
        call(&mut svc, A).await.unwrap();
    }
    open_error(call(&mut svc, A).await);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_call_start_is_kept_only_when_slow_calls_count() {
    for (policy, kept) in [
        (policy(), false),
        (policy().slow_calls(SECOND).unwrap(), true),
    ] {
        let shared = &*policy.shared;
        let ctx = shared.ctx();
        let uri = http::Uri::from_static(A);
        let circuit = shared.registry.get_or_insert(KeyRef::of_uri(&uri), ctx);
        let ticket = circuit.admit(ctx).unwrap();
        assert_eq!(ticket.started().is_some(), kept);
        ticket.settle(&circuit, ctx, Judged::Success);
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn inside_a_retry_an_open_circuit_ends_the_call_and_costs_no_token() {
    let upstream = Upstream::new(Mode::Status(503));
    let budget = Arc::new(RetryBudget::new(10, 0.1).unwrap());
    let retry = RetryPolicy::new(TransientDecoder::new(), FixedDelay::new(SECOND, 3))
        .map_options(|o| o.with_budget(budget.clone()));
    let breaker = GuardLayer::new(policy().consecutive_failures(1).unwrap());
    let svc = StatusRetryLayer::new(retry).layer(breaker.layer(upstream.service()));
    let report = RetryReport::new();
    let mut req = request(A);
    req.extensions_mut().insert(report.clone());
    let err = svc.oneshot(req).await.unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::CircuitOpen);
    assert_eq!(upstream.calls(), 1, "the retry was turned away unsent");
    let summary = report.summary().unwrap();
    assert_eq!((summary.get(), summary.stop()), (2, Stop::Failed));
    assert_eq!(summary.verdict(), Verdict::fail(FailureKind::CircuitOpen));
    assert_eq!(budget.tokens_milli(), 9000, "one token, for the 503 alone");
}

#[test]
fn outcomes_are_judged_as_documented() {
    let unavailable = Verdict::retry(StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(judge(unavailable, false), Judged::Failure(unavailable));
    let timed_out = Verdict::fail(FailureKind::AttemptTimeout);
    assert_eq!(judge(timed_out, true), Judged::Failure(timed_out));
    assert_eq!(
        judge(Verdict::fail(StatusCode::NOT_FOUND), false),
        Judged::Success
    );
    assert_eq!(judge(Verdict::Accept, false), Judged::Success);
    assert_eq!(
        judge(Verdict::fail(FailureKind::CircuitOpen), true),
        Judged::Ignored
    );
    assert_eq!(
        judge(Verdict::fail(Reason::Error), true),
        Judged::Failure(Verdict::fail(Reason::Error))
    );
}

#[test]
fn nonsense_settings_are_refused() {
    let fields = [
        BreakerPolicy::default()
            .consecutive_failures(0)
            .unwrap_err(),
        BreakerPolicy::default()
            .failure_ratio(0.0, 30 * SECOND, 100)
            .unwrap_err(),
        BreakerPolicy::default()
            .failure_ratio(1.5, 30 * SECOND, 100)
            .unwrap_err(),
        BreakerPolicy::default()
            .failure_ratio(f64::NAN, 30 * SECOND, 100)
            .unwrap_err(),
        BreakerPolicy::default()
            .failure_ratio(0.1, Duration::from_millis(5), 100)
            .unwrap_err(),
        BreakerPolicy::default()
            .failure_ratio(0.1, 30 * SECOND, 0)
            .unwrap_err(),
        BreakerPolicy::default()
            .break_duration(Duration::ZERO, SECOND)
            .unwrap_err(),
        BreakerPolicy::default()
            .break_duration(5 * SECOND, SECOND)
            .unwrap_err(),
        BreakerPolicy::default().break_growth(0.5, 0.0).unwrap_err(),
        BreakerPolicy::default().break_growth(2.0, 1.5).unwrap_err(),
        BreakerPolicy::default().half_open(0, 1).unwrap_err(),
        BreakerPolicy::default().half_open(1, 0).unwrap_err(),
        BreakerPolicy::default().max_keys(0, SECOND).unwrap_err(),
        BreakerPolicy::default()
            .max_keys(10, Duration::ZERO)
            .unwrap_err(),
        BreakerPolicy::default()
            .ramp(Duration::ZERO, 4)
            .unwrap_err(),
        BreakerPolicy::default().ramp(SECOND, 0).unwrap_err(),
        BreakerPolicy::default()
            .slow_calls(Duration::ZERO)
            .unwrap_err(),
    ]
    .map(|err| err.field().to_owned());
    assert_eq!(
        fields,
        [
            "consecutive_failures",
            "failure_ratio",
            "failure_ratio",
            "failure_ratio",
            "sampling_window",
            "minimum_throughput",
            "break_duration",
            "max_break_duration",
            "break_multiplier",
            "break_jitter",
            "half_open_probes",
            "half_open_successes",
            "max_keys",
            "idle_key_timeout",
            "ramp_duration",
            "ramp_steps",
            "slow_call_threshold",
        ]
    );
    assert_eq!(
        BreakerPolicy::default()
            .consecutive_failures(0)
            .unwrap_err()
            .to_string(),
        "consecutive_failures must be at least 1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn outcomes_counted_from_many_threads_are_all_counted() {
    let why = Arc::new(Mutex::new(Vec::new()));
    let heard = why.clone();
    let upstream = Upstream::new(Mode::Status(503));
    let policy = policy()
        .consecutive_failures(1_000_000)
        .unwrap()
        .failure_ratio(1.0, 60 * SECOND, 4001)
        .unwrap()
        .with_listener(move |event: &BreakerEvent<'_>| {
            if let BreakerEvent::Opened { why, .. } = event {
                heard.lock().unwrap().push(*why);
            }
        });
    let svc = breaker_around(upstream.service(), policy.clone());
    let tasks: Vec<_> = (0..4)
        .map(|_| {
            let mut svc = svc.clone();
            tokio::spawn(async move {
                for _ in 0..1000 {
                    call(&mut svc, A).await.unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(policy.state(&key("a.test")), Some(CircuitState::Closed));
    call(&mut svc.clone(), A).await.unwrap();
    assert_eq!(
        *why.lock().unwrap(),
        [TripReason::FailureRatio {
            failures: 4001,
            calls: 4001
        }],
        "not one count lost"
    );
}

/// The combined service gives a probe's place back when its deadline ends
/// it, even while its finished future is kept (as `select!` on `&mut fut`
/// keeps one): the next call may probe.
#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_probe_the_deadline_ended_gives_its_place_back_with_its_future_kept() {
    use crate::{policy::FixedDelay, retry::RetryPolicy, ResiliencePolicy};
    let upstream = Upstream::new(Mode::Status(503));
    let policy = policy().consecutive_failures(1).unwrap();
    let retry = RetryPolicy::new(TransientDecoder::new(), FixedDelay::never());
    let svc = ResiliencePolicy::new(SECOND, SECOND, retry)
        .unwrap()
        .with_guard(policy.clone())
        .layer()
        .layer(upstream.service());
    assert_eq!(svc.clone().oneshot(request(A)).await.unwrap().status(), 503);
    time::advance(5 * SECOND).await;
    // The probe: slow past the deadline, its future kept after it ended.
    upstream.set(Mode::Slow(10 * SECOND));
    let mut probe = Box::pin(svc.clone().oneshot(request(A)));
    let err = (&mut probe).await.unwrap_err();
    assert_eq!(FailureKind::of(&*err), FailureKind::Deadline, "{err}");
    upstream.set(Mode::Status(200));
    let next = svc.clone().oneshot(request(A)).await;
    assert_eq!(next.unwrap().status(), 200, "the next call probed");
    assert_eq!(policy.state(&key("a.test")), Some(CircuitState::Closed));
    drop(probe);
}

/// `inner` behind a circuit breaker of `policy`, as its layer makes it.
fn breaker_around<S, D>(
    inner: S,
    policy: BreakerPolicy<D>,
) -> crate::guard::Guarded<S, BreakerPolicy<D>> {
    tower_layer::Layer::layer(&GuardLayer::new(policy), inner)
}
