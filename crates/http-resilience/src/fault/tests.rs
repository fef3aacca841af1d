//! Fault injection on the paused clock, in every place a guard goes: each
//! kind of fault in the three layers' form, below the combined service and
//! among its guards, below a hedge and outermost; the rate over 10,000
//! calls with a seed; schedules per key; the switch turned live.

use super::{Fault, FaultKind, FaultPolicy, FaultSwitch, InjectedFault, Latency};
use crate::{
    breaker::{error::CircuitOpen, BreakerPolicy},
    errors,
    guard::GuardLayer,
    hedge::{HedgeDelay, HedgeLayer, HedgePolicy},
    key::{PerKey, UpstreamKey},
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
use tokio::time::{self, Instant};
use tower::{util::BoxCloneService, ServiceBuilder, ServiceExt};

const MS: Duration = Duration::from_millis(1);
const DEADLINE: Duration = Duration::from_secs(8);
const ATTEMPT: Duration = Duration::from_secs(1);

type Body = UnsyncBoxBody<Bytes, BoxError>;
type Svc = BoxCloneService<Request<String>, Response<Body>, BoxError>;

/// Where the fault goes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Form {
    /// A layer below the three layers, standing for the upstream.
    ThreeLayers,
    /// A layer below the combined service, standing for the upstream.
    Combined,
    /// Among the combined service's guards.
    CombinedGuard,
}

const FORMS: [Form; 3] = [Form::ThreeLayers, Form::Combined, Form::CombinedGuard];

/// An upstream that answers 200 with a body, counting its calls.
fn upstream(
    calls: &Arc<AtomicU32>,
) -> impl Fn(Request<String>) -> std::future::Ready<Result<Response<Body>, Infallible>> + Clone {
    let calls = Arc::clone(calls);
    move |_| {
        calls.fetch_add(1, Ordering::SeqCst);
        let body = Full::new(Bytes::from("upstream")).map_err(Into::into);
        std::future::ready(Ok(Response::new(body.boxed_unsync())))
    }
}

fn boxed<B>(response: Response<B>) -> Response<Body>
where
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    response.map(|body| body.map_err(Into::into).boxed_unsync())
}

/// Transient failures retried twice, 10 ms apart, in `form` with `fault`.
fn stack(form: Form, fault: &FaultPolicy, calls: &Arc<AtomicU32>) -> Svc {
    let retry = RetryPolicy::new(TransientDecoder::new(), FixedDelay::new(10 * MS, 2));
    let policy = ResiliencePolicy::new(DEADLINE, ATTEMPT, retry.clone()).unwrap();
    match form {
        Form::ThreeLayers => ServiceBuilder::new()
            .boxed_clone()
            .map_response(boxed)
            .layer(DeadlineLayer::new(DEADLINE))
            .layer(StatusRetryLayer::new(retry))
            .layer(AttemptTimeoutLayer::new(ATTEMPT))
            .layer(GuardLayer::new(fault.clone()))
            .service_fn(upstream(calls)),
        Form::Combined => ServiceBuilder::new()
            .boxed_clone()
            .map_response(boxed)
            .layer(policy.layer())
            .layer(GuardLayer::new(fault.clone()))
            .service_fn(upstream(calls)),
        Form::CombinedGuard => ServiceBuilder::new()
            .boxed_clone()
            .map_response(boxed)
            .layer(policy.with_guard(fault.clone()).layer())
            .service_fn(upstream(calls)),
    }
}

fn get(path: &str) -> Request<String> {
    Request::get(format!("http://api.test{path}"))
        .body(String::new())
        .unwrap()
}

async fn call(svc: &Svc, path: &str) -> Result<Response<Body>, BoxError> {
    time::timeout(Duration::from_secs(60), svc.clone().oneshot(get(path)))
        .await
        .expect("the call ends")
}

fn first(fault: Fault) -> FaultPolicy {
    FaultPolicy::on_attempts([1], fault).unwrap()
}

fn always(fault: Fault) -> FaultPolicy {
    FaultPolicy::every(1, fault).unwrap()
}

fn key() -> UpstreamKey {
    UpstreamKey::authority("http", "api.test", 80)
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_status_answered_in_the_upstreams_place_is_retried_as_the_upstreams() {
    for form in FORMS {
        let calls = Arc::new(AtomicU32::new(0));
        let faults = first(Fault::unavailable(Duration::ZERO));
        let response = call(&stack(form, &faults, &calls), "/").await.unwrap();
        let seen = (response.status(), Attempts::of(&response));
        assert_eq!(seen, (StatusCode::OK, 2), "{form:?}");
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "{form:?}: the first never sent"
        );
        let state = faults.state(&key()).unwrap();
        assert_eq!((state.attempts, state.injected), (2, 1), "{form:?}");
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn every_status_comes_with_its_headers_and_is_returned_as_the_last_outcome() {
    let cases = [
        (Fault::unavailable(1500 * MS), 503, Some("2")),
        (Fault::too_many_requests(ATTEMPT), 429, Some("1")),
        (Fault::status(StatusCode::BAD_GATEWAY), 502, None),
    ];
    for form in FORMS {
        for (fault, status, retry_after) in cases.clone() {
            let calls = Arc::new(AtomicU32::new(0));
            let response = call(&stack(form, &always(fault), &calls), "/")
                .await
                .unwrap();
            let header = response.headers().get(http::header::RETRY_AFTER);
            let seen = (
                response.status().as_u16(),
                header.map(|v| v.to_str().unwrap()),
            );
            assert_eq!(seen, (status, retry_after), "{form:?}");
            assert_eq!(
                Attempts::of(&response),
                3,
                "{form:?}: retried, then returned"
            );
            let marker = response.extensions().get::<FaultKind>();
            assert_eq!(marker, Some(&FaultKind::Answered), "{form:?}");
            assert_eq!(calls.load(Ordering::SeqCst), 0, "{form:?}");
        }
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn grpc_unavailable_is_a_trailers_only_response_whose_pushback_the_decoder_follows() {
    use crate::policy::GrpcDecoder;
    let calls = Arc::new(AtomicU32::new(0));
    let faults = first(Fault::grpc_unavailable(Some(250 * MS)));
    let retry = RetryPolicy::new(GrpcDecoder::default(), FixedDelay::new(10 * MS, 2));
    let svc = ServiceBuilder::new()
        .layer(
            ResiliencePolicy::new(DEADLINE, ATTEMPT, retry)
                .unwrap()
                .layer(),
        )
        .layer(GuardLayer::new(faults))
        .service_fn(upstream(&calls));
    let start = Instant::now();
    let response = svc
        .oneshot(get("/grpc.health.v1.Health/Check"))
        .await
        .unwrap();
    assert_eq!(
        (response.status(), Attempts::of(&response)),
        (StatusCode::OK, 2)
    );
    assert_eq!(start.elapsed(), 250 * MS, "the pushback, not the backoff");

    let answer = ServiceBuilder::new()
        .layer(GuardLayer::new(always(Fault::grpc_unavailable(Some(
            250 * MS,
        )))))
        .service_fn(upstream(&calls));
    let response = answer.oneshot(get("/")).await.unwrap();
    let header = |name: &str| response.headers()[name].to_str().unwrap().to_owned();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(header("content-type"), "application/grpc");
    assert_eq!(header("grpc-status"), "14");
    assert_eq!(header("grpc-retry-pushback-ms"), "250");
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert!(body.is_empty(), "trailers-only");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn transport_failures_read_as_the_real_ones_and_are_retried_as_they_would_be() {
    let cases = [
        (Fault::connect_refused(), FailureKind::ConnectRefused, true),
        (Fault::connect_timeout(), FailureKind::ConnectTimeout, true),
        (Fault::unsent(), FailureKind::Unsent, true),
        (
            Fault::connection_reset(),
            FailureKind::ConnectionReset,
            false,
        ),
    ];
    for form in FORMS {
        for (fault, kind, retried) in cases.clone() {
            let calls = Arc::new(AtomicU32::new(0));
            let outcome = call(&stack(form, &first(fault), &calls), "/").await;
            if retried {
                let response = outcome.unwrap();
                assert_eq!(
                    Attempts::of(&response),
                    2,
                    "{form:?} {kind}: never sent, retried"
                );
                assert_eq!(calls.load(Ordering::SeqCst), 1, "{form:?} {kind}");
                continue;
            }
            let err = outcome.unwrap_err();
            assert_eq!(FailureKind::of(&err), kind, "{form:?}");
            let injected = errors::find::<InjectedFault>(&*err).expect("the injected fault");
            assert_eq!(injected.key(), &key(), "{form:?}");
            assert_eq!(
                calls.load(Ordering::SeqCst),
                0,
                "{form:?} {kind}: not retried"
            );
        }
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_streamed_body_never_sent_goes_whole_with_the_next_attempt() {
    use crate::body::ReplayBody;
    use http_resilience_mock::body::ScriptedBody;
    type Streamed = ReplayBody<ScriptedBody>;
    // An upstream that reads the whole request body and answers it back.
    let echo = |request: Request<Streamed>| async move {
        let body = request.into_body().collect().await?.to_bytes();
        Ok::<_, BoxError>(Response::new(Full::new(body)))
    };
    let streamed = || {
        let body = ScriptedBody::new().data("part one, ").data("part two");
        Request::post("http://api.test/upload")
            .body(ReplayBody::new(body))
            .unwrap()
    };
    let retry = || RetryPolicy::new(TransientDecoder::new(), FixedDelay::new(10 * MS, 2));
    let refused = || first(Fault::connect_refused());
    let layers = ServiceBuilder::new()
        .layer(StatusRetryLayer::new(retry()))
        .layer(GuardLayer::new(refused()))
        .service_fn(echo);
    let policy = ResiliencePolicy::new(DEADLINE, ATTEMPT, retry()).unwrap();
    let combined = ServiceBuilder::new()
        .layer(policy.with_guard(refused()).layer())
        .service_fn(echo);
    let response = layers.oneshot(streamed()).await.unwrap();
    assert_eq!(
        Attempts::of(&response),
        2,
        "three layers: a POST never sent, retried"
    );
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "part one, part two", "three layers");
    let response = combined.oneshot(streamed()).await.unwrap();
    assert_eq!(Attempts::of(&response), 2, "combined");
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "part one, part two", "combined");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_cut_body_fails_after_its_bytes_as_a_closed_connection() {
    for form in FORMS {
        let calls = Arc::new(AtomicU32::new(0));
        let whole = Response::new(Bytes::from("0123456789"));
        let svc = stack(form, &first(Fault::cut_body(whole, 4)), &calls);
        let response = call(&svc, "/").await.unwrap();
        assert_eq!(
            response.status(),
            StatusCode::OK,
            "{form:?}: the head is committed"
        );
        assert_eq!(response.extensions().get(), Some(&FaultKind::CutBody));
        let mut body = response.into_body();
        let frame = body.frame().await.unwrap().unwrap();
        assert_eq!(frame.into_data().unwrap(), "0123", "{form:?}");
        let err = body.frame().await.unwrap().unwrap_err();
        assert_eq!(
            FailureKind::of(&err),
            FailureKind::ConnectionClosed,
            "{form:?}"
        );
        assert!(errors::find::<InjectedFault>(&*err).is_some(), "{form:?}");
        assert_eq!(calls.load(Ordering::SeqCst), 0, "{form:?}");
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn latency_waits_and_the_attempts_limit_or_the_deadline_cut_it_where_it_stands() {
    for form in FORMS {
        let calls = Arc::new(AtomicU32::new(0));
        let slow = always(Fault::latency(Latency::fixed(300 * MS)));
        let start = Instant::now();
        let response = call(&stack(form, &slow, &calls), "/").await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{form:?}");
        assert_eq!(start.elapsed(), 300 * MS, "{form:?}");

        // Longer than an attempt's limit: below the limit, the attempt times
        // out as a slow upstream's would; among the guards, the wait is not
        // the attempt's, and only the deadline ends it.
        let stuck = always(Fault::latency(Latency::fixed(Duration::from_secs(20))));
        let start = Instant::now();
        let err = call(&stack(form, &stuck, &calls), "/").await.unwrap_err();
        let expected = match form {
            Form::ThreeLayers | Form::Combined => (FailureKind::AttemptTimeout, ATTEMPT),
            Form::CombinedGuard => (FailureKind::Deadline, DEADLINE),
        };
        assert_eq!(
            (FailureKind::of(&err), start.elapsed()),
            expected,
            "{form:?}"
        );
        assert_eq!(
            calls.load(Ordering::SeqCst),
            1,
            "{form:?}: none sent after a wait"
        );
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_wait_ends_at_the_deadline_the_request_carries_with_the_deadlines_error() {
    let calls = Arc::new(AtomicU32::new(0));
    let stuck = always(Fault::latency(Latency::fixed(Duration::from_secs(20))));
    let svc = ServiceBuilder::new()
        .layer(GuardLayer::new(stuck))
        .service_fn(upstream(&calls));
    let mut request = get("/");
    // NOTE: no deadline layer outside: the guard's own wait must end there.
    request
        .extensions_mut()
        .insert(crate::RequestDeadline::after(ATTEMPT));
    let start = Instant::now();
    let err = svc.oneshot(request).await.unwrap_err();
    assert_eq!(
        (FailureKind::of(&err), start.elapsed()),
        (FailureKind::Deadline, ATTEMPT)
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_fault_after_a_drawn_wait_comes_within_its_bounds() {
    let latency = Latency::uniform(100 * MS, 200 * MS).unwrap();
    let faults = always(Fault::connect_timeout().after(latency)).with_seed(3);
    let svc = ServiceBuilder::new()
        .layer(GuardLayer::new(faults))
        .service_fn(upstream(&Arc::default()));
    let mut waits = Vec::new();
    for _ in 0..20 {
        let start = Instant::now();
        let err = svc.clone().oneshot(get("/")).await.unwrap_err();
        assert_eq!(FailureKind::of(&err), FailureKind::ConnectTimeout);
        waits.push(start.elapsed());
    }
    assert!(
        waits.iter().all(|w| (100 * MS..=200 * MS).contains(w)),
        "{waits:?}"
    );
    waits.dedup();
    assert!(waits.len() > 10, "drawn anew for every attempt: {waits:?}");
}

/// Which of `calls` calls `policy` answered with a 503, through a layer
/// of its own in process.
async fn picked(policy: &FaultPolicy, calls: usize) -> Vec<bool> {
    let svc = ServiceBuilder::new()
        .layer(GuardLayer::new(policy.clone()))
        .service_fn(upstream(&Arc::default()));
    let mut picked = Vec::with_capacity(calls);
    for _ in 0..calls {
        let response = svc.clone().oneshot(get("/")).await.unwrap();
        picked.push(response.status() == StatusCode::SERVICE_UNAVAILABLE);
    }
    picked
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_rate_holds_within_a_percent_over_ten_thousand_calls_and_repeats_with_its_seed() {
    let policy = |seed| {
        FaultPolicy::at_rate(0.1, Fault::status(StatusCode::SERVICE_UNAVAILABLE))
            .unwrap()
            .with_seed(seed)
    };
    let seeded = policy(42);
    let first = picked(&seeded, 10_000).await;
    let injected = first.iter().filter(|&&p| p).count();
    assert!(
        (900..=1_100).contains(&injected),
        "{injected} of 10,000 at 10 %"
    );
    let state = seeded.state(&key()).unwrap();
    assert_eq!((state.attempts, state.injected), (10_000, injected as u64));
    assert_eq!(
        picked(&policy(42), 10_000).await,
        first,
        "the same seed, the same calls"
    );
    assert_ne!(
        picked(&policy(43), 10_000).await,
        first,
        "another seed, others"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn schedules_pick_the_attempts_they_name_per_key() {
    let every_third =
        FaultPolicy::every(3, Fault::status(StatusCode::SERVICE_UNAVAILABLE)).unwrap();
    let picks: Vec<usize> = (picked(&every_third, 9).await.iter().enumerate())
        .filter_map(|(i, &p)| p.then_some(i + 1))
        .collect();
    assert_eq!(picks, [3, 6, 9]);

    // Counted per key: the authority by default, or a key of one's own.
    let listed = first(Fault::status(StatusCode::SERVICE_UNAVAILABLE))
        .with_key(|uri, _| UpstreamKey::custom(uri.path()));
    let svc = ServiceBuilder::new()
        .layer(GuardLayer::new(listed.clone()))
        .service_fn(upstream(&Arc::default()));
    let mut statuses = Vec::new();
    for path in ["/a", "/a", "/b", "/b", "/a"] {
        statuses.push(
            svc.clone()
                .oneshot(get(path))
                .await
                .unwrap()
                .status()
                .as_u16(),
        );
    }
    assert_eq!(statuses, [503, 200, 503, 200, 200]);
    let mut states: Vec<_> = listed
        .states()
        .into_iter()
        .map(|(k, s)| (k.to_string(), s.injected))
        .collect();
    states.sort();
    assert_eq!(states, [("/a".to_owned(), 1), ("/b".to_owned(), 1)]);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_switch_turns_injection_off_and_on_while_the_service_runs() {
    let chaos = FaultSwitch::new(true);
    let faults = always(Fault::status(StatusCode::SERVICE_UNAVAILABLE)).with_switch(chaos.clone());
    assert!(picked(&faults, 3).await.iter().all(|&p| p), "on");
    chaos.turn_off();
    assert!(picked(&faults, 3).await.iter().all(|&p| !p), "off");
    assert_eq!(
        faults.state(&key()).unwrap().attempts,
        3,
        "off, nothing is counted"
    );
    chaos.turn_on();
    assert!(picked(&faults, 3).await.iter().all(|&p| p), "on again");

    // Turned off between two attempts of one call of the combined service:
    // the retry goes through untouched.
    let calls = Arc::new(AtomicU32::new(0));
    let svc = stack(Form::CombinedGuard, &faults, &calls);
    let pending = tokio::spawn(svc.oneshot(get("/")));
    time::sleep(5 * MS).await;
    chaos.turn_off();
    let response = pending.await.unwrap().unwrap();
    assert_eq!(
        (response.status(), Attempts::of(&response)),
        (StatusCode::OK, 2)
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_fault_below_a_hedge_answers_a_copy() {
    let calls = Arc::new(AtomicU32::new(0));
    let policy = HedgePolicy::new(TransientDecoder::new(), HedgeDelay::fixed(50 * MS), 2).unwrap();
    let svc = ServiceBuilder::new()
        .layer(HedgeLayer::new(policy))
        .layer(GuardLayer::new(first(Fault::unavailable(Duration::ZERO))))
        .service_fn(upstream(&calls));
    let response = svc.oneshot(get("/")).await.unwrap();
    assert_eq!(
        (response.status(), Attempts::of(&response)),
        (StatusCode::OK, 2)
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        1,
        "the first copy was answered"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_fault_outermost_stands_for_the_whole_dependency() {
    let calls = Arc::new(AtomicU32::new(0));
    let retry = RetryPolicy::new(TransientDecoder::new(), FixedDelay::new(10 * MS, 2));
    let svc = ServiceBuilder::new()
        .layer(GuardLayer::new(always(Fault::status(
            StatusCode::SERVICE_UNAVAILABLE,
        ))))
        .layer(
            ResiliencePolicy::new(DEADLINE, ATTEMPT, retry)
                .unwrap()
                .layer(),
        )
        .service_fn(upstream(&calls));
    let response = svc.oneshot(get("/")).await.unwrap();
    assert_eq!(
        response.status(),
        StatusCode::SERVICE_UNAVAILABLE,
        "no retry outside it"
    );
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert!(body.is_empty());
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_breaker_before_the_fault_hears_its_answers_and_opens() {
    let calls = Arc::new(AtomicU32::new(0));
    let breaker = BreakerPolicy::new(TransientDecoder::new())
        .consecutive_failures(3)
        .unwrap();
    let refused = always(Fault::connect_refused());
    let retry = RetryPolicy::new(TransientDecoder::new(), FixedDelay::new(10 * MS, 2));
    let policy = ResiliencePolicy::new(DEADLINE, ATTEMPT, retry)
        .unwrap()
        .with_guard((breaker.clone(), refused));
    let svc = ServiceBuilder::new()
        .layer(policy.layer())
        .service_fn(upstream(&calls));
    let first = svc.clone().oneshot(get("/")).await.unwrap_err();
    assert_eq!(
        FailureKind::of(&first),
        FailureKind::ConnectRefused,
        "three refusals"
    );
    let second = svc.oneshot(get("/")).await.unwrap_err();
    assert!(errors::find::<CircuitOpen>(&*second).is_some(), "{second}");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[test]
fn a_policy_reads_its_settings_and_refuses_those_that_make_no_sense() {
    let err = FaultPolicy::at_rate(-0.1, Fault::unsent()).unwrap_err();
    assert_eq!((err.field(), err.value()), ("rate", Some("-0.1")));
    assert_eq!(
        FaultPolicy::every(0, Fault::unsent()).unwrap_err().field(),
        "every"
    );
    let err = FaultPolicy::on_attempts([2, 0], Fault::unsent()).unwrap_err();
    assert_eq!(err.field(), "attempts");
    let policy = first(Fault::unsent());
    assert_eq!(
        policy.clone().max_keys(0, MS).unwrap_err().to_string(),
        "max_keys must be at least 1"
    );
    assert_eq!(
        policy
            .clone()
            .max_keys(1, Duration::ZERO)
            .unwrap_err()
            .field(),
        "idle_key_timeout"
    );
    assert_eq!(policy.fault().kind(), FaultKind::Unsent);
    assert!(policy.switch().is_on(), "on unless told otherwise");
    let debug = format!("{policy:?}");
    assert!(
        debug.contains("Unsent") && debug.contains("on: true"),
        "{debug}"
    );
    assert_eq!(FaultKind::CutBody.to_string(), "cut_body");
    assert_eq!(FaultKind::Latency.reads_as(), None);
}

#[cfg(feature = "otel")]
#[test]
fn a_policy_with_fault_injection_among_its_guards_takes_the_metrics() {
    use crate::otel::{Metrics, Observed};
    use opentelemetry::metrics::MeterProvider as _;
    let provider = opentelemetry_sdk::metrics::SdkMeterProvider::builder().build();
    let metrics = Metrics::new(&provider.meter("test"));
    let retry = RetryPolicy::new(TransientDecoder::new(), FixedDelay::new(10 * MS, 2));
    let breaker = BreakerPolicy::new(TransientDecoder::new());
    let policy = ResiliencePolicy::new(DEADLINE, ATTEMPT, retry)
        .unwrap()
        .with_guard((breaker, always(Fault::unsent())))
        .with_metrics(&metrics);
    assert_eq!(policy.guard().1.fault().kind(), FaultKind::Unsent);
}
