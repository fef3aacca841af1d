//! The combined service (`ResiliencePolicy::layer()`) is the three layers: a
//! property on tokio's paused clock, over the scripted upstream of the
//! compositions property.
//!
//! A case is a deadline, an attempt limit (within it, or in some cases above it), whether the last attempt runs
//! until the deadline, a retry policy (Feign's
//! decoder or the transient one, a fixed delay, up to 3 retries), whether
//! every attempt's budget is sent upstream (`ResiliencePolicy::propagating`, against
//! a `PropagateDeadlineLayer` with the attempt limit between the retry and the
//! attempt timeout), the deadline the request brings, and an upstream script. Both stacks run the case on a
//! fresh paused clock; what each observes must be the same:
//!
//! - the outcome (status and body, read to its end, or the error's kind and
//!   message) and when the head and the end came;
//! - the attempts the upstream saw, with their instants, attempt numbers and
//!   budget headers;
//! - the listener's events and the caller's `RetryReport`;
//! - with calls that overlap, the attempts and events of each instant and the
//!   calls' outcomes as sets: tokio wakes calls due at one instant in an order
//!   neither form promises, and it decides which of them gets a last slot. So
//!   that such ties stay rare, these calls start and wait off the grid the
//!   script is drawn on, and each call's upstream answers a few milliseconds
//!   later than the one before's (`Case::off_grid`).
//!
//! Some cases put a circuit breaker in both (`ResiliencePolicy::with_guard(breaker)`
//! against a `GuardLayer<BreakerPolicy>` between the retry and the attempt timeout)
//! and make several calls in a row, a gap apart, so that circuits trip, turn
//! attempts away and recover between and within calls; the breaker's events
//! are observed too. Some put overload control in both
//! (`ResiliencePolicy::with_guard(overload)` against an `GuardLayer<OverloadPolicy>` between the
//! retry and the breaker): a bulkhead of one or two slots with a short queue,
//! throttling in some, and the calls then overlap (each starts a gap after
//! the one before, without waiting for it), so that attempts wait for slots,
//! give up at their deadline, or are turned away; its events are observed
//! too.

use super::compositions::{
    boxed, limit, recorded, step, wait, Answer, Step, Svc, Upstream, LAG_MS,
};
use http::{Request, Response};
use http_body_util::BodyExt;
use http_resilience::{
    attempt_timeout::AttemptTimeoutLayer,
    breaker::{BreakerEvent, BreakerPolicy},
    deadline::DeadlineLayer,
    guard::GuardLayer,
    overload::{OverloadEvent, OverloadPolicy, Throttle},
    policy::{AnyDecoder, CallEvent, FeignDecoder, FixedDelay, RetryEvent, TransientDecoder},
    propagate::{PropagateDeadlineLayer, TimeoutFormat, EXPECTED_RQ_TIMEOUT_MS},
    retry::{RetryPolicy, StatusRetryLayer},
    BoxError, FailureKind, RequestDeadline, ResiliencePolicy, RetryReport,
};
use proptest::{collection::vec, prelude::*};
use std::{
    sync::{Arc, Mutex},
    time::Duration,
};
use tokio::time::Instant;
use tower::{util::BoxCloneService, Layer, ServiceExt};

const HORIZON: Duration = Duration::from_secs(3600);

/// How far off the grid the script is drawn on each call that overlaps
/// starts after the one before it.
const GAP_OFF: Duration = Duration::from_millis(1);

/// How far off that grid calls that overlap wait before a retry.
const DELAY_OFF: Duration = Duration::from_millis(2);

/// How much later than the script says the first call that overlaps has its
/// upstream's answers, and each call after it than the one before it: no
/// call answers at once, so a call let in when another frees its slot fails
/// later than the other did.
const LAG: Duration = Duration::from_millis(3);

#[derive(Debug, Clone, Copy)]
enum Given {
    None,
    Inherited(Duration),
    Copied(Duration),
    Expired,
}

#[derive(Debug, Clone)]
struct Case {
    deadline: Duration,
    attempt: Duration,
    feign: bool,
    delay: Duration,
    retries: u32,
    propagate: bool,
    // Whether the last attempt runs until the deadline.
    last_to_deadline: bool,
    given: Given,
    script: Vec<Step>,
    // A breaker's failures in a row and break, the calls made and the gap
    // between them.
    breaker: Option<(u32, Duration)>,
    // Overload control's slots and queue, and whether it throttles; the
    // calls overlap when it is on.
    overload: Option<(u32, u32, bool)>,
    calls: usize,
    gap: Duration,
}

fn case() -> impl Strategy<Value = Case> {
    let given = prop_oneof![
        2 => Just(Given::None),
        1 => limit(1..3000).prop_map(Given::Inherited),
        1 => limit(1..3000).prop_map(Given::Copied),
        1 => Just(Given::Expired),
    ];
    (
        limit(1..3000),
        limit(0..3000),
        any::<bool>(),
        wait(1500),
        0_u32..4,
        any::<bool>(),
        given,
        vec(step(), 1..5),
        proptest::option::weighted(0.25, limit(1..3000)),
        any::<bool>(),
        (
            proptest::option::weighted(0.5, (1_u32..3, limit(1..3000))),
            (1_usize..4, wait(2500)),
            proptest::option::weighted(0.3, (1_u32..3, 0_u32..3, any::<bool>())),
        ),
    )
        .prop_map(
            |(
                attempt,
                extra,
                feign,
                delay,
                retries,
                propagate,
                given,
                script,
                short,
                last,
                (breaker, (calls, gap), overload),
            )| Case {
                // NOTE: a quarter of the cases have a deadline of their own,
                // which may be shorter than the attempt limit.
                deadline: short.unwrap_or(attempt + extra),
                attempt,
                feign,
                delay,
                retries,
                propagate,
                last_to_deadline: last,
                given,
                script,
                breaker,
                overload,
                calls: if breaker.is_some() || overload.is_some() {
                    calls
                } else {
                    1
                },
                gap,
            },
        )
}

impl Case {
    /// Whether the calls overlap: each starts a gap after the one before,
    /// without waiting for it.
    fn overlaps(&self) -> bool {
        self.overload.is_some()
    }

    /// The case as it runs: calls that overlap have their starts and their
    /// retries' waits moved off the grid (and each its answers, in
    /// `overlapping`). Calls due at one instant are woken in an order neither
    /// form promises, and with a shared slot, throttle or probe that order
    /// decides who is let through; a call let in when another frees its slot
    /// runs on the other's instants, so without this a retry of one would
    /// often ask for the slot at the instant the other's answer or attempt
    /// limit frees it.
    fn off_grid(mut self) -> Self {
        if self.overlaps() {
            self.gap += GAP_OFF;
            self.delay += DELAY_OFF;
        }
        self
    }
}

/// What one stack did with a case.
#[derive(Debug, PartialEq)]
struct Observed {
    calls: Vec<Outcome>,
    attempts: Vec<(Duration, String, String)>,
    events: Vec<String>,
}

/// What one call of a case came to.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Outcome {
    outcome: String,
    head_at: Option<Duration>,
    end_at: Option<Duration>,
    report: Option<String>,
}

/// What the listeners of a case heard, each with its instant.
type Events = Arc<Mutex<Vec<(Instant, String)>>>;

/// Keeps `event`, heard now.
fn hear(events: &Events, event: String) {
    events.lock().unwrap().push((Instant::now(), event));
}

/// The breaker of a case, telling its events to `events`.
fn breaker((failures, pause): (u32, Duration), events: Events) -> BreakerPolicy<TransientDecoder> {
    BreakerPolicy::new(TransientDecoder::new())
        .consecutive_failures(failures)
        .unwrap()
        .break_duration(pause, pause * 4)
        .unwrap()
        .with_seed(7)
        .with_listener(move |event: &BreakerEvent<'_>| hear(&events, event.to_string()))
}

/// The overload control of a case, telling its events to `events`.
fn overload((slots, queue, throttle): (u32, u32, bool), events: Events) -> OverloadPolicy {
    let policy = OverloadPolicy::bulkhead(slots).unwrap().with_queue(queue);
    let policy = if throttle {
        policy.with_throttle(Throttle::default())
    } else {
        policy
    };
    policy
        .with_seed(11)
        .with_listener(move |event: &OverloadEvent<'_>| hear(&events, event.to_string()))
}

fn policy(case: &Case, events: Events) -> RetryPolicy<AnyDecoder, FixedDelay> {
    let decoder: AnyDecoder = if case.feign {
        FeignDecoder::new().into()
    } else {
        TransientDecoder::new().into()
    };
    RetryPolicy::new(decoder, FixedDelay::new(case.delay, case.retries)).map_options(|o| {
        o.with_attempt_header(http::HeaderName::from_static("x-attempt"))
            .with_listener(move |heard: &CallEvent<'_>| {
                // NOTE: the end of a whole call is the combined service's alone.
                if !matches!(heard.event, RetryEvent::CallEnd { .. }) {
                    hear(&events, heard.event.to_string());
                }
            })
    })
}

async fn observe(case: Case, fused: bool) -> Observed {
    let case = case.off_grid();
    let upstream = Upstream {
        script: Arc::new(case.script.clone()),
        books: Arc::default(),
    };
    let start = Instant::now();
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&attempts);
    let recording: Svc = BoxCloneService::new(
        tower::ServiceBuilder::new()
            .map_request(move |request: Request<String>| {
                let header = |name: &str| {
                    request
                        .headers()
                        .get(name)
                        .map(|v| v.to_str().unwrap().to_owned())
                        .unwrap_or_default()
                };
                let seen_now = (
                    start.elapsed(),
                    header("x-attempt"),
                    header(EXPECTED_RQ_TIMEOUT_MS.as_str()),
                );
                seen.lock().unwrap().push(seen_now);
                request
            })
            .service(upstream),
    );
    let events = Arc::new(Mutex::new(Vec::new()));
    let policy = policy(&case, Arc::clone(&events));
    let breaker = case.breaker.map(|b| breaker(b, Arc::clone(&events)));
    let svc: Svc = if fused {
        let mut resilience = ResiliencePolicy::new(case.deadline, case.attempt, policy).unwrap();
        if case.propagate {
            resilience = resilience.propagating(EXPECTED_RQ_TIMEOUT_MS, TimeoutFormat::Millis);
        }
        if case.last_to_deadline {
            resilience = resilience.final_attempt_uses_deadline();
        }
        let overload = case.overload.map(|o| overload(o, Arc::clone(&events)));
        match (breaker, overload) {
            (Some(breaker), Some(overload)) => boxed(
                resilience
                    .with_guard((overload, breaker))
                    .layer()
                    .layer(recording),
            ),
            (Some(breaker), None) => boxed(resilience.with_guard(breaker).layer().layer(recording)),
            (None, Some(overload)) => {
                boxed(resilience.with_guard(overload).layer().layer(recording))
            }
            (None, None) => boxed(resilience.layer().layer(recording)),
        }
    } else {
        let mut timeout = AttemptTimeoutLayer::new(case.attempt);
        let mut propagate = PropagateDeadlineLayer::envoy().with_attempt_limit(case.attempt);
        if case.last_to_deadline {
            timeout = timeout.final_attempt_uses_deadline();
            propagate = propagate.final_attempt_uses_deadline();
        }
        let mut attempt = boxed(timeout.layer(recording));
        if case.propagate {
            attempt = boxed(propagate.layer(attempt));
        }
        if let Some(breaker) = breaker {
            attempt = boxed(GuardLayer::new(breaker).layer(attempt));
        }
        if let Some(o) = case.overload {
            attempt = boxed(GuardLayer::new(overload(o, Arc::clone(&events))).layer(attempt));
        }
        let retried = StatusRetryLayer::new(policy).layer(attempt);
        boxed(DeadlineLayer::new(case.deadline).layer(boxed(retried)))
    };

    let mut calls = if case.overlaps() {
        overlapping(&case, &svc, start).await
    } else {
        let mut calls = Vec::new();
        for n in 0..case.calls {
            if n > 0 {
                tokio::time::sleep(case.gap).await;
            }
            calls.push(call_once(case.given, Duration::ZERO, svc.clone(), start).await);
        }
        calls
    };
    let mut attempts = attempts.lock().unwrap().clone();
    let mut events: Vec<(Duration, String)> = events
        .lock()
        .unwrap()
        .iter()
        .map(|(at, event)| (at.duration_since(start), event.clone()))
        .collect();
    if case.overlaps() {
        // NOTE: calls that overlap can be due at one instant (two waits that
        // end together); the order tokio wakes them in then is neither form's
        // to promise, and with one slot or one probe left it decides which of
        // them gets it. So what the upstream saw and the listeners heard at
        // each instant is compared as a set, the instants in order, and the
        // calls' outcomes as a set.
        calls.sort();
        attempts.sort();
        events.sort();
    }
    let events = events.into_iter().map(|(_, event)| event).collect();
    Observed {
        calls,
        attempts,
        events,
    }
}

/// The calls of `case` through `svc`, each started a gap after the one
/// before, without waiting for it.
async fn overlapping(case: &Case, svc: &Svc, start: Instant) -> Vec<Outcome> {
    let local = tokio::task::LocalSet::new();
    local
        .run_until(async {
            let mut running = Vec::new();
            for n in 0..case.calls {
                if n > 0 {
                    tokio::time::sleep(case.gap).await;
                }
                let lag = LAG * u32::try_from(n + 1).expect("a few calls");
                let call = call_once(case.given, lag, svc.clone(), start);
                running.push(tokio::task::spawn_local(call));
            }
            let mut calls = Vec::new();
            for call in running {
                calls.push(call.await.expect("the call ran"));
            }
            calls
        })
        .await
}

/// One call through `svc` with the deadline `given`, its upstream answering
/// `lag` later than the script says, its instants counted from `start`.
async fn call_once(given: Given, lag: Duration, svc: Svc, start: Instant) -> Outcome {
    let report = RetryReport::new();
    let mut request = Request::new("payload".to_owned());
    if !lag.is_zero() {
        let ms = lag.as_millis().to_string();
        let value = http::HeaderValue::from_str(&ms).expect("digits");
        request.headers_mut().insert(LAG_MS, value);
    }
    request.extensions_mut().insert(report.clone());
    match given {
        Given::None => {}
        Given::Inherited(d) => {
            request.extensions_mut().insert(RequestDeadline::after(d));
        }
        Given::Copied(d) => {
            request.extensions_mut().insert(recorded(d).await);
        }
        Given::Expired => {
            request
                .extensions_mut()
                .insert(RequestDeadline::at(Instant::now()));
        }
    }

    let head_at = Arc::new(Mutex::new(None));
    let head = Arc::clone(&head_at);
    let call = async move {
        let response: Response<_> = svc.oneshot(request).await?;
        *head.lock().unwrap() = Some(start.elapsed());
        let status = response.status();
        let body = response.into_body().collect().await?.to_bytes();
        Ok::<_, BoxError>(format!("{status} {body:?}"))
    };
    let outcome = tokio::select! {
        biased;
        outcome = call => Some(outcome),
        () = tokio::time::sleep(HORIZON) => None,
    };
    let end_at = outcome.as_ref().map(|_| start.elapsed());
    let outcome = match outcome {
        None => "still running".to_owned(),
        Some(Ok(text)) => text,
        Some(Err(err)) => format!("{}: {err}", FailureKind::of(&*err)),
    };
    let head_at = *head_at.lock().unwrap();
    Outcome {
        outcome,
        head_at,
        end_at,
        report: report
            .summary()
            .map(|s| format!("{} {:?}", report.attempts(), s)),
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 1024,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_combined_stack_is_the_three_layers(case in case()) {
        let separate = crate::support::on_paused_clock(observe(case.clone(), false));
        let fused = crate::support::on_paused_clock(observe(case, true));
        prop_assert_eq!(fused, separate);
    }
}

/// What a user who moves from the three layers to the combined service must know: a
/// layer below it sees no `RequestDeadline`, so a `PropagateDeadlineLayer`
/// there sends nothing; `ResiliencePolicy::propagating` sends each attempt's budget
/// itself.
#[test]
fn below_the_combined_no_deadline_is_seen_and_propagating_sends_the_budget() {
    crate::support::on_paused_clock(async {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let upstream = {
            let seen = Arc::clone(&seen);
            tower::service_fn(move |request: Request<String>| {
                seen.lock().unwrap().push((
                    RequestDeadline::of(&request).is_some(),
                    request.headers().get(EXPECTED_RQ_TIMEOUT_MS).cloned(),
                ));
                std::future::ready(Ok::<_, BoxError>(Response::new(String::new())))
            })
        };
        let policy = || {
            let decoder: AnyDecoder = TransientDecoder::new().into();
            RetryPolicy::new(decoder, FixedDelay::never())
        };
        let second = Duration::from_secs(1);
        let three = Duration::from_secs(3);

        let below = ResiliencePolicy::new(three, second, policy())
            .unwrap()
            .layer()
            .layer(PropagateDeadlineLayer::envoy().layer(upstream.clone()));
        below.oneshot(Request::new(String::new())).await.unwrap();
        let itself = ResiliencePolicy::new(three, second, policy())
            .unwrap()
            .propagating(EXPECTED_RQ_TIMEOUT_MS, TimeoutFormat::Millis)
            .layer()
            .layer(upstream);
        itself.oneshot(Request::new(String::new())).await.unwrap();

        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen[0], (false, None), "below the combined service");
        assert!(!seen[1].0, "no deadline below either");
        assert_eq!(
            seen[1].1.as_ref().unwrap(),
            "1000",
            "the attempt limit caps the 3 s left"
        );
    });
}

/// Two calls that overlap under a bulkhead fail at one instant (one's attempt
/// limit, the other's refused connection, the second call started so that
/// its start and answer moved off the grid meet the first's limit), wait
/// alike and both find the service not ready: their ends come at one instant,
/// in whichever order tokio wakes them, and are the same set in both forms.
#[test]
fn overlapping_calls_that_end_at_one_instant_end_alike_in_both_forms() {
    let ms = Duration::from_millis;
    let case = Case {
        deadline: ms(2250),
        attempt: ms(1250),
        feign: true,
        delay: ms(750),
        retries: 1,
        propagate: false,
        last_to_deadline: false,
        given: Given::None,
        script: vec![
            Step {
                latency: ms(0),
                answer: Answer::Never,
            },
            Step {
                latency: ms(500),
                answer: Answer::Refused,
            },
            Step {
                latency: ms(0),
                answer: Answer::NotReady,
            },
        ],
        breaker: None,
        overload: Some((2, 0, false)),
        calls: 2,
        gap: ms(750) - GAP_OFF - LAG * 2,
    };
    let separate = crate::support::on_paused_clock(observe(case.clone(), false));
    let fused = crate::support::on_paused_clock(observe(case, true));
    let ends = separate
        .events
        .iter()
        .filter(|event| event.starts_with("done"))
        .count();
    assert_eq!(ends, 2, "both calls end: {:?}", separate.events);
    assert_eq!(fused, separate);
}

/// Calls that overlap, where one is let in when another lets go of its slot
/// and so runs on the other's instants: on the grid, one call's retry would
/// ask for the slot at the instant the other's answer or attempt limit frees
/// it, and which comes first would decide who gets it. Moved off the grid
/// (`Case::off_grid`, and each call's answers later than the one before's),
/// both forms agree. Each case ended differently in the two with part of
/// that alone: the first, second and fourth with only the starts moved, the
/// third with the starts moved and the answers' lag but the waits on the
/// grid, the second without the lag, the fifth with no lag on the first
/// call's answers.
#[test]
fn calls_let_in_on_each_others_release_end_alike_in_both_forms() {
    let ms = Duration::from_millis;
    let step = |latency, answer| Step {
        latency: ms(latency),
        answer,
    };
    let status = |code| Answer::Status {
        code,
        stall_body: false,
    };
    let case = |deadline, attempt, delay, script, breaker, overload, calls| Case {
        deadline: ms(deadline),
        attempt: ms(attempt),
        feign: false,
        delay: ms(delay),
        retries: 1,
        propagate: false,
        last_to_deadline: false,
        given: Given::None,
        script,
        breaker,
        overload: Some(overload),
        calls,
        gap: ms(0),
    };
    let cases = [
        // A retry after 500 ms, the other call's answer 500 ms after it was
        // let in; throttling judges whoever asks first.
        case(
            1250,
            501,
            500,
            vec![step(500, status(503))],
            None,
            (1, 1, true),
            2,
        ),
        // Two calls fail at one instant and wait alike.
        case(
            2500,
            1500,
            500,
            vec![
                step(1036, Answer::Refused),
                step(0, Answer::Refused),
                step(964, status(200)),
            ],
            None,
            (1, 1, false),
            2,
        ),
        // An attempt limit of 1 s after one call is let in, a backoff of 1 s
        // for the other.
        case(
            1500,
            1000,
            1000,
            vec![step(250, Answer::Refused), step(1000, status(200))],
            None,
            (1, 1, true),
            2,
        ),
        // A breaker's probe, a deadline and a retry at one instant.
        case(
            2500,
            1750,
            1000,
            vec![step(750, Answer::Refused)],
            Some((2, ms(250))),
            (2, 1, false),
            3,
        ),
        // A call let in when the other's answer frees its slot would fail at
        // once, the other at the same instant, and both wait alike.
        Case {
            feign: true,
            retries: 2,
            gap: ms(750),
            ..case(
                1750,
                4,
                750,
                vec![step(0, Answer::Refused)],
                None,
                (1, 1, false),
                2,
            )
        },
    ];
    for case in cases {
        let separate = crate::support::on_paused_clock(observe(case.clone(), false));
        let fused = crate::support::on_paused_clock(observe(case.clone(), true));
        assert_eq!(fused, separate, "{case:?}");
    }
}
