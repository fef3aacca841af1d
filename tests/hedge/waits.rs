//! The same waits through a retry and through a hedge: a delay the server asks
//! for is capped, cut at the request's deadline, and given up at once when
//! deadline-aware scheduling says the next attempt cannot fit. The deadline
//! is one the request carries (copied or inherited), with no `DeadlineLayer`
//! around either layer. On tokio's paused clock.

use http::{Request, Response, StatusCode};
use http_resilience::{
    hedge::{HedgeDelay, HedgeLayer, HedgePolicy, DEFAULT_MAX_SERVER_DELAY},
    policy::{Decoder, FixedDelay, GrpcDecoder, StatusDecoder},
    retry::{RetryPolicy, StatusRetryLayer},
    Attempts, RequestDeadline, Stop,
};
use std::{
    convert::Infallible,
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc,
    },
    time::Duration,
};
use tokio::time::Instant;
use tower::{util::BoxCloneSyncService, Layer, ServiceExt};

const MS: fn(u64) -> Duration = Duration::from_millis;
const SECS: fn(u64) -> Duration = Duration::from_secs;
/// Far past every wait under test, on the paused clock: a call still pending
/// then waits for good.
const GUARD: Duration = Duration::from_secs(86_400 * 10);

type Upstream = BoxCloneSyncService<Request<String>, Response<String>, Infallible>;

/// An upstream that answers `first` once, then 200s; and how many calls it got.
fn upstream(first: fn() -> Response<String>) -> (Upstream, Arc<AtomicU32>) {
    let calls = Arc::new(AtomicU32::new(0));
    let seen = Arc::clone(&calls);
    let svc = tower::service_fn(move |_: Request<String>| {
        let n = seen.fetch_add(1, Ordering::SeqCst);
        async move {
            Ok::<_, Infallible>(if n == 0 {
                first()
            } else {
                Response::new("ok".to_owned())
            })
        }
    });
    (BoxCloneSyncService::new(svc), calls)
}

fn retry_after(value: &'static str) -> Response<String> {
    Response::builder()
        .status(StatusCode::SERVICE_UNAVAILABLE)
        .header(http::header::RETRY_AFTER, value)
        .body("busy".to_owned())
        .unwrap()
}

/// A trailers-only `UNAVAILABLE` with the longest pushback gRPC allows.
fn pushback_max() -> Response<String> {
    Response::builder()
        .header("grpc-status", "14")
        .header("grpc-retry-pushback-ms", "2147483647")
        .body(String::new())
        .unwrap()
}

/// One scenario: the upstream's first answer, the limits, and what the caller
/// must see, whichever layer made the wait.
struct Scenario {
    name: &'static str,
    first: fn() -> Response<String>,
    deadline: Option<Duration>,
    cap: Duration,
    min_attempt: Option<Duration>,
    elapsed: Duration,
    calls: u32,
    stop: Stop,
    status: StatusCode,
}

/// What a caller saw: when the call ended, the upstream's calls, the status
/// and why the call stopped.
#[derive(Debug, PartialEq)]
struct Seen {
    elapsed: Duration,
    calls: u32,
    status: StatusCode,
    stop: Stop,
}

#[derive(Clone, Copy, Debug)]
enum Form {
    Retry,
    Hedge,
}

fn stack<D>(form: Form, decoder: D, scenario: &Scenario, inner: Upstream) -> Upstream
where
    D: Decoder<String, Infallible> + Clone + Send + Sync + 'static,
{
    match form {
        Form::Retry => {
            let retryer = FixedDelay::new(MS(10), 3).with_max_delay(scenario.cap);
            let mut policy = RetryPolicy::new(decoder, retryer);
            if let Some(min) = scenario.min_attempt {
                policy = policy.map_options(|o| o.deadline_aware(min));
            }
            BoxCloneSyncService::new(StatusRetryLayer::new(policy).layer(inner))
        }
        Form::Hedge => {
            let mut policy = HedgePolicy::new(decoder, HedgeDelay::never(), 4)
                .unwrap()
                .with_max_server_delay(scenario.cap);
            if let Some(min) = scenario.min_attempt {
                policy = policy.map_options(|o| o.deadline_aware(min));
            }
            BoxCloneSyncService::new(HedgeLayer::new(policy).layer(inner))
        }
    }
}

async fn run<D>(form: Form, decoder: D, scenario: &Scenario) -> Seen
where
    D: Decoder<String, Infallible> + Clone + Send + Sync + 'static,
{
    let (inner, calls) = upstream(scenario.first);
    let svc = stack(form, decoder, scenario, inner);
    let mut request = Request::get("http://upstream.test/")
        .body(String::new())
        .unwrap();
    if let Some(budget) = scenario.deadline {
        request
            .extensions_mut()
            .insert(RequestDeadline::after(budget));
    }
    let start = Instant::now();
    let response = tokio::time::timeout(GUARD, svc.oneshot(request))
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{} ({form:?}): still waiting after {GUARD:?}",
                scenario.name
            )
        })
        .unwrap();
    let stop = response
        .extensions()
        .get::<Attempts>()
        .map_or(Stop::Accepted, Attempts::stop);
    Seen {
        elapsed: start.elapsed(),
        calls: calls.load(Ordering::SeqCst),
        status: response.status(),
        stop,
    }
}

fn status_scenarios() -> Vec<Scenario> {
    let hour = SECS(3600);
    vec![
        Scenario {
            name: "a Retry-After past the deadline ends the call at the deadline",
            first: || retry_after("3600"),
            deadline: Some(SECS(2)),
            cap: hour,
            min_attempt: None,
            elapsed: SECS(2),
            calls: 1,
            stop: Stop::DeadlinePassed,
            status: StatusCode::SERVICE_UNAVAILABLE,
        },
        Scenario {
            name: "a wait that ends at the deadline is cut there",
            first: || retry_after("2"),
            deadline: Some(SECS(2)),
            cap: hour,
            min_attempt: None,
            elapsed: SECS(2),
            calls: 1,
            stop: Stop::DeadlinePassed,
            status: StatusCode::SERVICE_UNAVAILABLE,
        },
        Scenario {
            name: "a wait within the deadline is made",
            first: || retry_after("2"),
            deadline: Some(SECS(10)),
            cap: hour,
            min_attempt: None,
            elapsed: SECS(2),
            calls: 2,
            stop: Stop::Accepted,
            status: StatusCode::OK,
        },
        Scenario {
            name: "with no deadline, an endless Retry-After is capped",
            first: || retry_after("99999999999"),
            deadline: None,
            cap: SECS(1),
            min_attempt: None,
            elapsed: SECS(1),
            calls: 2,
            stop: Stop::Accepted,
            status: StatusCode::OK,
        },
        Scenario {
            name: "the cap also holds under a deadline",
            first: || retry_after("3600"),
            deadline: Some(SECS(30)),
            cap: SECS(5),
            min_attempt: None,
            elapsed: SECS(5),
            calls: 2,
            stop: Stop::Accepted,
            status: StatusCode::OK,
        },
        Scenario {
            name: "deadline-aware: a wait that leaves no useful attempt gives up at once",
            first: || retry_after("60"),
            deadline: Some(SECS(10)),
            cap: hour,
            min_attempt: Some(MS(500)),
            elapsed: Duration::ZERO,
            calls: 1,
            stop: Stop::WouldMissDeadline,
            status: StatusCode::SERVICE_UNAVAILABLE,
        },
        Scenario {
            name: "deadline-aware: a wait and an attempt that fit are made",
            first: || retry_after("2"),
            deadline: Some(SECS(10)),
            cap: hour,
            min_attempt: Some(MS(500)),
            elapsed: SECS(2),
            calls: 2,
            stop: Stop::Accepted,
            status: StatusCode::OK,
        },
    ]
}

fn check(scenario: &Scenario, form: Form, seen: Seen) {
    let expected = Seen {
        elapsed: scenario.elapsed,
        calls: scenario.calls,
        status: scenario.status,
        stop: scenario.stop,
    };
    assert_eq!(seen, expected, "{} ({form:?})", scenario.name);
}

#[tokio::test(start_paused = true)]
async fn a_retry_and_a_hedge_make_the_same_wait_for_retry_after() {
    let decoder = StatusDecoder::new([503]).unwrap().with_retry_after();
    for scenario in status_scenarios() {
        for form in [Form::Retry, Form::Hedge] {
            check(&scenario, form, run(form, decoder, &scenario).await);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_retry_and_a_hedge_make_the_same_wait_for_grpc_pushback() {
    let decoder = GrpcDecoder::new().with_codes([14]).unwrap();
    let scenarios = [
        Scenario {
            name: "the longest pushback ends the call at the deadline",
            first: pushback_max,
            deadline: Some(SECS(3)),
            cap: Duration::MAX,
            min_attempt: None,
            elapsed: SECS(3),
            calls: 1,
            stop: Stop::DeadlinePassed,
            status: StatusCode::OK,
        },
        Scenario {
            name: "with no deadline, the longest pushback is capped",
            first: pushback_max,
            deadline: None,
            cap: SECS(1),
            min_attempt: None,
            elapsed: SECS(1),
            calls: 2,
            stop: Stop::Accepted,
            status: StatusCode::OK,
        },
        Scenario {
            name: "deadline-aware: the longest pushback gives up at once",
            first: pushback_max,
            deadline: Some(SECS(30)),
            cap: Duration::MAX,
            min_attempt: Some(MS(500)),
            elapsed: Duration::ZERO,
            calls: 1,
            stop: Stop::WouldMissDeadline,
            status: StatusCode::OK,
        },
    ];
    for scenario in &scenarios {
        for form in [Form::Retry, Form::Hedge] {
            check(scenario, form, run(form, decoder, scenario).await);
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_hedge_caps_a_server_delay_by_default() {
    assert_eq!(DEFAULT_MAX_SERVER_DELAY, SECS(1));
    let (inner, calls) = upstream(|| retry_after("99999999999"));
    let policy = HedgePolicy::new(
        StatusDecoder::new([503]).unwrap().with_retry_after(),
        HedgeDelay::never(),
        2,
    )
    .unwrap();
    let svc = HedgeLayer::new(policy).layer(inner);
    let start = Instant::now();
    let request = Request::get("http://upstream.test/")
        .body(String::new())
        .unwrap();
    let response = tokio::time::timeout(GUARD, svc.oneshot(request))
        .await
        .expect("a capped wait ends")
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(start.elapsed(), DEFAULT_MAX_SERVER_DELAY);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

mod property {
    //! Any server delay, deadline, cap and margin: a retry and a hedge make
    //! the same wait, with the same outcome.

    use super::*;
    use crate::support::on_paused_clock;
    use proptest::prelude::*;

    fn scenario() -> impl Strategy<Value = (u64, Option<u64>, u64, Option<u64>)> {
        (
            0_u64..120,
            proptest::option::of(1_u64..60),
            1_u64..90,
            proptest::option::of(0_u64..5_000),
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn a_retry_and_a_hedge_agree_on_every_wait(
            (asked, deadline, cap, margin) in scenario()
        ) {
            // NOTE: `first` must be a plain function; the delays it can ask
            // for are the ones below, chosen by `asked`.
            const FIRSTS: [fn() -> Response<String>; 6] = [
                || retry_after("0"),
                || retry_after("1"),
                || retry_after("7"),
                || retry_after("45"),
                || retry_after("3600"),
                || retry_after("99999999999"),
            ];
            let scenario = Scenario {
                name: "generated",
                first: FIRSTS[(asked % 6) as usize],
                deadline: deadline.map(SECS),
                cap: SECS(cap),
                min_attempt: margin.map(MS),
                elapsed: Duration::ZERO,
                calls: 0,
                stop: Stop::Accepted,
                status: StatusCode::OK,
            };
            let decoder = StatusDecoder::new([503]).unwrap().with_retry_after();
            let retried = on_paused_clock(run(Form::Retry, decoder, &scenario));
            let hedged = on_paused_clock(run(Form::Hedge, decoder, &scenario));
            prop_assert_eq!(retried, hedged);
        }
    }
}
