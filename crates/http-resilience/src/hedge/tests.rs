//! Hedging on tokio's paused clock, over scripted services.

use super::*;
use crate::{
    body::ReplayBody,
    deadline::DeadlineLayer,
    policy::{CallEvent, RetryBudget, RetryEvent, StatusDecoder, TransientDecoder},
    Attempts, BoxError,
};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use std::{
    sync::{
        atomic::{AtomicU32, Ordering},
        Mutex,
    },
    time::Duration,
};
use tower::{ServiceBuilder, ServiceExt};

const MS: fn(u64) -> Duration = Duration::from_millis;

/// What a scripted copy does: answer `status` after `latency`, or fail.
#[derive(Debug, Clone, Copy)]
pub(super) enum Step {
    Answer(Duration, u16),
    Fail(Duration),
}

#[tokio::test(start_paused = true)]
async fn a_failed_copy_does_not_end_the_call_while_another_is_in_flight() {
    let counters = Arc::new(Counters::default());
    let svc = HedgeLayer::new(policy(MS(100), 2)).layer(scripted(
        vec![Step::Answer(MS(1000), 200), Step::Fail(MS(5))],
        counters.clone(),
    ));
    let start = Instant::now();
    let response = svc.oneshot(get()).await.unwrap();
    assert_eq!(start.elapsed(), MS(1000));
    assert_eq!(response.body(), "copy 1");
}

#[tokio::test(start_paused = true)]
async fn the_last_copy_failing_returns_its_failure() {
    let counters = Arc::new(Counters::default());
    let svc = HedgeLayer::new(policy(MS(100), 2)).layer(scripted(
        vec![Step::Fail(MS(300)), Step::Fail(MS(5))],
        counters.clone(),
    ));
    let start = Instant::now();
    let err = svc.oneshot(get()).await.unwrap_err();
    assert_eq!(
        crate::FailureKind::of(&*err),
        crate::FailureKind::ConnectionReset
    );
    assert_eq!(start.elapsed(), MS(300));
    assert_eq!(counters.alive.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn the_callers_report_counts_the_copies_of_a_failed_call() {
    let counters = Arc::new(Counters::default());
    let svc = HedgeLayer::new(policy(MS(100), 2)).layer(scripted(
        vec![Step::Fail(MS(300)), Step::Fail(MS(5))],
        counters,
    ));
    let report = crate::RetryReport::new();
    let mut request = get();
    request.extensions_mut().insert(report.clone());
    svc.oneshot(request).await.unwrap_err();
    assert_eq!(report.attempts(), 2);
    let summary = report.summary().expect("a summary");
    assert_eq!((summary.get(), summary.winner()), (2, 1));
}

#[tokio::test(start_paused = true)]
async fn in_the_documented_order_an_attempt_timeout_inside_ends_one_copy_only() {
    let counters = Arc::new(Counters::default());
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(MS(1000)))
        .layer(HedgeLayer::new(policy(MS(100), 3)))
        .layer(crate::AttemptTimeoutLayer::new(MS(250)))
        .service(scripted(
            vec![
                Step::Answer(MS(10_000), 200),
                Step::Answer(MS(10_000), 200),
                Step::Answer(MS(120), 200),
            ],
            counters.clone(),
        ));
    let start = Instant::now();
    let response = svc.oneshot(get()).await.unwrap();
    // Copies at 0, 100 and 200 ms; the first times out at 250 ms and the call
    // goes on; the third answers at 320 ms.
    assert_eq!(start.elapsed(), MS(320));
    let body = response.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, "copy 3");
    assert_eq!(counters.alive.load(Ordering::SeqCst), 0);
}

/// Counts the copies sent, alive (not yet ended or dropped), and the most
/// alive at once.
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) calls: AtomicU32,
    pub(super) alive: AtomicU32,
    pub(super) most_alive: AtomicU32,
}

struct Alive(Arc<Counters>);

impl Alive {
    fn new(counters: &Arc<Counters>) -> Self {
        let now = counters.alive.fetch_add(1, Ordering::SeqCst) + 1;
        counters.most_alive.fetch_max(now, Ordering::SeqCst);
        Self(Arc::clone(counters))
    }
}

impl Drop for Alive {
    fn drop(&mut self) {
        self.0.alive.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A service whose n-th call follows `steps[n]` (the last step repeats);
/// each answer's body names its copy.
pub(super) fn scripted(
    steps: Vec<Step>,
    counters: Arc<Counters>,
) -> impl Service<
    http::Request<Full<Bytes>>,
    Response = http::Response<String>,
    Error = BoxError,
    Future: Send,
> + Clone {
    tower::service_fn(move |_request: http::Request<Full<Bytes>>| {
        let n = counters.calls.fetch_add(1, Ordering::SeqCst) as usize;
        let step = steps[n.min(steps.len() - 1)];
        let alive = Alive::new(&counters);
        async move {
            let _alive = alive;
            match step {
                Step::Answer(latency, status) => {
                    tokio::time::sleep(latency).await;
                    Ok(http::Response::builder()
                        .status(status)
                        .body(format!("copy {}", n + 1))
                        .unwrap())
                }
                Step::Fail(latency) => {
                    tokio::time::sleep(latency).await;
                    Err(BoxError::from(std::io::Error::from(
                        std::io::ErrorKind::ConnectionReset,
                    )))
                }
            }
        }
    })
}

fn get() -> http::Request<Full<Bytes>> {
    http::Request::get("http://upstream.test/")
        .body(Full::default())
        .unwrap()
}

fn policy(delay: Duration, max: u32) -> HedgePolicy<TransientDecoder> {
    HedgePolicy::new(TransientDecoder::new(), HedgeDelay::fixed(delay), max).unwrap()
}

#[test]
fn copies_are_counted_from_one_to_ten() {
    let new = |n| HedgePolicy::new(TransientDecoder::new(), HedgeDelay::fixed(MS(0)), n);
    for (n, problem) in [(0, "must be at least 1"), (11, "must be at most 10")] {
        let err = new(n).unwrap_err();
        assert_eq!((err.field(), err.problem()), ("max_attempts", problem));
        assert_eq!(err.value(), Some(n.to_string().as_str()));
    }
    assert!(new(1).is_ok() && new(10).is_ok());
    let in_flight = |n| policy(MS(0), 10).with_max_in_flight(n);
    assert_eq!(in_flight(11).unwrap_err().field(), "max_in_flight");
    assert_eq!(in_flight(0).unwrap_err().field(), "max_in_flight");
    assert!(in_flight(10).is_ok());
}

fn report(response: &http::Response<String>) -> Attempts {
    *response.extensions().get::<Attempts>().expect("a report")
}

#[tokio::test(start_paused = true)]
async fn a_slow_first_copy_and_a_fast_hedge_end_at_delay_plus_fast_latency() {
    let counters = Arc::new(Counters::default());
    let svc = HedgeLayer::new(policy(MS(100), 3)).layer(scripted(
        vec![Step::Answer(MS(10_000), 200), Step::Answer(MS(20), 200)],
        counters.clone(),
    ));
    let start = Instant::now();
    let response = svc.oneshot(get()).await.unwrap();
    assert_eq!(start.elapsed(), MS(120));
    assert_eq!(response.body(), "copy 2", "the winner's body, whole");
    let attempts = report(&response);
    assert_eq!((attempts.get(), attempts.winner()), (2, 2));
    assert_eq!(
        counters.alive.load(Ordering::SeqCst),
        0,
        "the loser is cancelled"
    );
    assert_eq!(counters.calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn a_fast_first_copy_sends_no_hedge_and_reports_nothing() {
    let counters = Arc::new(Counters::default());
    let svc = HedgeLayer::new(policy(MS(100), 3))
        .layer(scripted(vec![Step::Answer(MS(30), 200)], counters.clone()));
    let response = svc.oneshot(get()).await.unwrap();
    assert!(response.extensions().get::<Attempts>().is_none());
    assert_eq!(counters.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_non_fatal_status_sends_the_next_copy_at_once() {
    let counters = Arc::new(Counters::default());
    let svc = HedgeLayer::new(policy(MS(100), 3)).layer(scripted(
        vec![Step::Answer(MS(10), 503), Step::Answer(MS(5), 200)],
        counters.clone(),
    ));
    let start = Instant::now();
    let response = svc.oneshot(get()).await.unwrap();
    assert_eq!(start.elapsed(), MS(15), "not at the 100 ms delay");
    assert_eq!(response.status(), 200);
    assert_eq!(report(&response).winner(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_fatal_outcome_ends_the_call_and_cancels_the_others() {
    let counters = Arc::new(Counters::default());
    let svc = HedgeLayer::new(policy(MS(100), 3)).layer(scripted(
        vec![Step::Answer(MS(10_000), 200), Step::Answer(MS(5), 404)],
        counters.clone(),
    ));
    let start = Instant::now();
    let response = svc.oneshot(get()).await.unwrap();
    assert_eq!(start.elapsed(), MS(105));
    assert_eq!(response.status(), 404);
    let attempts = report(&response);
    assert_eq!((attempts.stop(), attempts.winner()), (Stop::Failed, 2));
    assert_eq!(counters.alive.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn when_every_copy_is_non_fatal_the_last_outcome_returns() {
    let counters = Arc::new(Counters::default());
    let svc = HedgeLayer::new(policy(MS(100), 3))
        .layer(scripted(vec![Step::Answer(MS(10), 503)], counters.clone()));
    let response = svc.oneshot(get()).await.unwrap();
    assert_eq!(response.status(), 503);
    assert_eq!(response.body(), "copy 3");
    let attempts = report(&response);
    assert_eq!((attempts.get(), attempts.stop()), (3, Stop::Exhausted));
}

#[tokio::test(start_paused = true)]
async fn the_budget_stops_hedges() {
    let budget = Arc::new(RetryBudget::new(4, 0.1).unwrap());
    for _ in 0..2 {
        budget.record_retryable_failure();
    }
    assert!(!budget.can_retry());
    let counters = Arc::new(Counters::default());
    let svc =
        HedgeLayer::new(policy(MS(100), 3).map_options(|o| o.with_budget(budget))).layer(scripted(
            vec![Step::Answer(MS(1000), 200), Step::Answer(MS(5), 200)],
            counters.clone(),
        ));
    let start = Instant::now();
    let response = svc.oneshot(get()).await.unwrap();
    assert_eq!(start.elapsed(), MS(1000), "no hedge: the first copy's time");
    assert_eq!(response.body(), "copy 1");
    assert_eq!(counters.calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn each_hedge_takes_a_token_and_an_answer_puts_some_back() {
    let budget = Arc::new(RetryBudget::new(10, 0.5).unwrap());
    let counters = Arc::new(Counters::default());
    let svc =
        HedgeLayer::new(policy(MS(100), 3).map_options(|o| o.with_budget(budget.clone()))).layer(
            scripted(vec![Step::Answer(MS(1000), 200)], counters.clone()),
        );
    svc.oneshot(get()).await.unwrap();
    // Two hedges taken, one answer put back.
    assert_eq!(budget.tokens_milli(), 10_000 - 2_000 + 500);
}

#[tokio::test(start_paused = true)]
async fn the_deadline_ends_every_copy() {
    let counters = Arc::new(Counters::default());
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(MS(300)))
        .layer(HedgeLayer::new(policy(MS(100), 5)))
        .service(scripted(
            vec![Step::Answer(MS(10_000), 200)],
            counters.clone(),
        ));
    let start = Instant::now();
    let err = svc.oneshot(get()).await.unwrap_err();
    assert!(crate::errors::find::<crate::deadline::error::DeadlineExceeded>(&*err).is_some());
    assert_eq!(start.elapsed(), MS(300));
    assert_eq!(
        counters.alive.load(Ordering::SeqCst),
        0,
        "every copy dropped"
    );
    // Copies at 0, 100 and 200 ms; none at the deadline.
    assert_eq!(counters.calls.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn no_copy_is_sent_at_or_after_the_request_deadline() {
    let counters = Arc::new(Counters::default());
    let svc = HedgeLayer::new(policy(MS(100), 5)).layer(scripted(
        vec![Step::Answer(MS(1000), 200)],
        counters.clone(),
    ));
    let mut request = get();
    request
        .extensions_mut()
        .insert(crate::RequestDeadline::after(MS(150)));
    svc.oneshot(request).await.unwrap();
    assert_eq!(
        counters.calls.load(Ordering::SeqCst),
        2,
        "at 0 and 100 ms only"
    );
}

#[tokio::test(start_paused = true)]
async fn a_request_not_safe_to_repeat_is_sent_once() {
    let counters = Arc::new(Counters::default());
    let svc = HedgeLayer::new(policy(MS(10), 3)).layer(scripted(
        vec![Step::Answer(MS(1000), 503)],
        counters.clone(),
    ));
    let post = http::Request::post("http://upstream.test/")
        .body(Full::default())
        .unwrap();
    let response = svc.oneshot(post).await.unwrap();
    assert_eq!(counters.calls.load(Ordering::SeqCst), 1);
    let attempts = report(&response);
    assert_eq!((attempts.get(), attempts.stop()), (1, Stop::NotIdempotent));
}

#[tokio::test(start_paused = true)]
async fn at_most_max_in_flight_copies_at_once() {
    let counters = Arc::new(Counters::default());
    let policy = policy(MS(10), 5).with_max_in_flight(2).unwrap();
    let svc = HedgeLayer::new(policy).layer(scripted(
        vec![
            Step::Answer(MS(100), 503),
            Step::Answer(MS(100), 503),
            Step::Answer(MS(100), 503),
            Step::Answer(MS(5), 200),
        ],
        counters.clone(),
    ));
    let start = Instant::now();
    let response = svc.oneshot(get()).await.unwrap();
    assert_eq!(counters.most_alive.load(Ordering::SeqCst), 2);
    // Copies 1 and 2 at 0 and 10 ms; 3 when 1 ends (100 ms); 4 when 2 ends
    // (110 ms), answering at 115 ms.
    assert_eq!(start.elapsed(), MS(115));
    assert_eq!(report(&response).winner(), 4);
}

#[tokio::test(start_paused = true)]
async fn an_attempt_past_its_limit_starts_a_hedge_and_goes_on() {
    let counters = Arc::new(Counters::default());
    let policy = HedgePolicy::new(TransientDecoder::new(), HedgeDelay::never(), 2)
        .unwrap()
        .hedge_on_attempt_timeout(MS(200));
    let svc = HedgeLayer::new(policy).layer(scripted(
        vec![Step::Answer(MS(250), 200), Step::Answer(MS(500), 200)],
        counters.clone(),
    ));
    let start = Instant::now();
    let response = svc.oneshot(get()).await.unwrap();
    assert_eq!(start.elapsed(), MS(250), "the first copy was not cancelled");
    assert_eq!(response.body(), "copy 1");
    assert_eq!(counters.calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn an_attempt_past_its_limit_while_copies_are_at_their_most_hedges_when_one_ends() {
    let counters = Arc::new(Counters::default());
    let policy = HedgePolicy::new(TransientDecoder::new(), HedgeDelay::never(), 3)
        .unwrap()
        .with_max_in_flight(2)
        .unwrap()
        .hedge_on_attempt_timeout(MS(100));
    let svc = HedgeLayer::new(policy).layer(scripted(
        vec![
            Step::Fail(MS(300)),
            Step::Answer(MS(1_000), 200),
            Step::Answer(MS(50), 200),
        ],
        counters.clone(),
    ));
    let start = Instant::now();
    let response = svc.oneshot(get()).await.unwrap();
    // Copy 2 at 100 ms (copy 1 past its limit); at 200 ms copy 2 is past its
    // own with two in flight: its hedge goes when copy 1 fails (300 ms), and
    // answers at 350 ms.
    assert_eq!(start.elapsed(), MS(350));
    assert_eq!(response.body(), "copy 3");
    assert_eq!(counters.calls.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn every_hedge_is_told_with_its_number_and_trigger() {
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let counters = Arc::new(Counters::default());
    let policy = policy(MS(100), 3).map_options(|o| {
        o.with_listener(move |heard: &CallEvent<'_>| {
            if !matches!(heard.event, RetryEvent::AttemptEnd { .. }) {
                seen.lock().unwrap().push(heard.event);
            }
        })
    });
    let svc = HedgeLayer::new(policy).layer(scripted(
        vec![
            Step::Answer(MS(10_000), 200),
            Step::Answer(MS(10), 503),
            Step::Answer(MS(5), 200),
        ],
        counters,
    ));
    svc.oneshot(get()).await.unwrap();
    let lines: Vec<String> = events
        .lock()
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        lines,
        [
            "hedge: attempt 2 sent (no outcome after 100ms), 2 in flight",
            "hedge: attempt 3 sent (an attempt ended: retry (503 Service Unavailable)), 2 in flight",
            "done after 3 attempts: accepted (last: accept)",
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_server_delay_sets_the_next_copy() {
    let counters = Arc::new(Counters::default());
    let decoder = StatusDecoder::new([503]).unwrap().with_retry_after();
    // NOTE: above the default cap of 1 s, which would shorten the wait.
    let policy = HedgePolicy::new(decoder, HedgeDelay::fixed(MS(1000)), 2)
        .unwrap()
        .with_max_server_delay(MS(5000));
    let svc = HedgeLayer::new(policy).layer(tower::service_fn({
        let counters = counters.clone();
        move |_: http::Request<Full<Bytes>>| {
            let n = counters.calls.fetch_add(1, Ordering::SeqCst);
            async move {
                let response = if n == 0 {
                    http::Response::builder()
                        .status(503)
                        .header("retry-after", "2")
                        .body(String::new())
                } else {
                    http::Response::builder().body(String::new())
                };
                Ok::<_, BoxError>(response.unwrap())
            }
        }
    }));
    let start = Instant::now();
    svc.oneshot(get()).await.unwrap();
    assert_eq!(start.elapsed(), MS(2000));
}

#[tokio::test(start_paused = true)]
async fn a_percentile_delay_hedges_only_the_slow_tail() {
    let delay = HedgeDelay::percentile(90.0, 10, Duration::from_secs(1)).unwrap();
    let policy = HedgePolicy::new(TransientDecoder::new(), delay, 2).unwrap();
    let layer = HedgeLayer::new(policy);
    // A window of 20 calls at 10 ms: the 90th percentile is about 10 ms.
    let counters = Arc::new(Counters::default());
    let warm = layer.layer(scripted(vec![Step::Answer(MS(10), 200)], counters.clone()));
    for _ in 0..20 {
        warm.clone().oneshot(get()).await.unwrap();
    }
    assert_eq!(
        counters.calls.load(Ordering::SeqCst),
        20,
        "no delay yet: no hedge"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    // A slow call now gets a hedge near 10 ms.
    let counters = Arc::new(Counters::default());
    let svc = layer.layer(scripted(
        vec![Step::Answer(MS(10_000), 200), Step::Answer(MS(1), 200)],
        counters.clone(),
    ));
    let start = Instant::now();
    let response = svc.oneshot(get()).await.unwrap();
    let elapsed = start.elapsed();
    assert!(elapsed >= MS(10) && elapsed <= MS(13), "{elapsed:?}");
    assert_eq!(report(&response).winner(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_streamed_body_reaches_every_copy_whole_while_the_first_still_sends() {
    use http_resilience_mock::body::ScriptedBody;
    // The body takes 60 ms to send; a hedge starts after 20 ms.
    let body = ScriptedBody::new()
        .data("one ")
        .wait(MS(30))
        .data("two ")
        .wait(MS(30))
        .data("three");
    let received = Arc::new(Mutex::new(Vec::new()));
    let calls = Arc::new(AtomicU32::new(0));
    let svc = HedgeLayer::new(policy(MS(20), 2)).layer(tower::service_fn({
        let received = received.clone();
        move |request: http::Request<ReplayBody<ScriptedBody>>| {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            let received = received.clone();
            async move {
                let bytes = request.into_body().collect().await?.to_bytes();
                received.lock().unwrap().push((n + 1, bytes));
                if n == 0 {
                    tokio::time::sleep(MS(10_000)).await;
                }
                Ok::<_, BoxError>(http::Response::new(format!("copy {}", n + 1)))
            }
        }
    }));
    let request = http::Request::get("http://upstream.test/")
        .body(ReplayBody::new(body))
        .unwrap();
    let response = svc.oneshot(request).await.unwrap();
    assert_eq!(response.body(), "copy 2");
    let received = received.lock().unwrap().clone();
    assert_eq!(received.len(), 2, "{received:?}");
    for (copy, bytes) in received {
        assert_eq!(bytes, "one two three", "copy {copy}");
    }
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// One copy's script: its latency and what it ends with (0 and 1 an
    /// answer, 2 a non-fatal 503, 3 a fatal 404, 4 a failure).
    fn step() -> impl Strategy<Value = Step> {
        (0_u64..300, 0_u8..5).prop_map(|(ms, kind)| match kind {
            0 | 1 => Step::Answer(MS(ms), 200),
            2 => Step::Answer(MS(ms), 503),
            3 => Step::Answer(MS(ms), 404),
            _ => Step::Fail(MS(ms)),
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever the timings: at most `max_in_flight` copies at once, at
        /// most `max` in all, every loser cancelled, and one outcome whose
        /// report matches the copies sent.
        #[test]
        fn whatever_the_timings_the_limits_hold_and_losers_are_cancelled(
            steps in proptest::collection::vec(step(), 1..6),
            delay in 1_u64..200,
            max in 1_u32..5,
            in_flight in 1_u32..5,
            on_limit in proptest::option::of(1_u64..300),
        ) {
            let runtime = crate::test_support::paused();
            let counters = Arc::new(Counters::default());
            let mut policy = policy(MS(delay), max).with_max_in_flight(in_flight).unwrap();
            if let Some(limit) = on_limit {
                policy = policy.hedge_on_attempt_timeout(MS(limit));
            }
            let svc = HedgeLayer::new(policy).layer(scripted(steps, counters.clone()));
            let outcome = runtime.block_on(async {
                tokio::time::timeout(Duration::from_secs(60), svc.oneshot(get())).await
            });
            let outcome = outcome.expect("the call ends");
            let calls = counters.calls.load(Ordering::SeqCst);
            prop_assert!(counters.most_alive.load(Ordering::SeqCst) <= in_flight.min(max));
            prop_assert!(calls <= max, "{calls} copies, at most {max}");
            prop_assert_eq!(counters.alive.load(Ordering::SeqCst), 0, "a copy outlived the call");
            if let Ok(response) = outcome {
                let attempts = response.extensions().get::<Attempts>().copied();
                let sent = attempts.map_or(1, |a| a.get());
                prop_assert_eq!(sent, calls);
                let winner = attempts.map_or(1, |a| a.winner());
                prop_assert!(winner >= 1 && winner <= sent);
                prop_assert_eq!(response.body(), &format!("copy {winner}"));
            }
        }
    }
}

/// One answer of a scripted copy: after how long, its status, and the
/// `Retry-After` it carries.
type Answer = (Duration, u16, Option<&'static str>);

/// When each copy of one call under `policy` was sent, copy `n` answering
/// as `script[n]` says (the ones past the script: 200 at once).
async fn copies_sent_at(policy: HedgePolicy<StatusDecoder>, script: &[Answer]) -> Vec<Duration> {
    let calls = Arc::new(AtomicU32::new(0));
    let sent_at = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let svc = HedgeLayer::new(policy).layer(tower::service_fn({
        let sent_at = sent_at.clone();
        move |_: http::Request<Full<Bytes>>| {
            let n = calls.fetch_add(1, Ordering::SeqCst) as usize;
            sent_at.lock().unwrap().push(start.elapsed());
            let (after, status, retry_after) = script.get(n).copied().unwrap_or((MS(0), 200, None));
            async move {
                tokio::time::sleep(after).await;
                let mut response = http::Response::builder().status(status);
                if let Some(seconds) = retry_after {
                    response = response.header("retry-after", seconds);
                }
                Ok::<_, BoxError>(response.body(String::new()).unwrap())
            }
        }
    }));
    svc.oneshot(get()).await.unwrap();
    let sent_at = sent_at.lock().unwrap().clone();
    sent_at
}

/// Two copies end in the same poll: the first non-fatal without a server
/// delay, the second with `Retry-After: 2`. The server's wait holds the
/// third copy, whatever the order the two ended in.
#[tokio::test(start_paused = true)]
async fn a_servers_wait_holds_a_copy_another_outcome_asked_for_at_once() {
    let decoder = StatusDecoder::new([503]).unwrap().with_retry_after();
    let policy = HedgePolicy::new(decoder, HedgeDelay::fixed(MS(10)), 3)
        .unwrap()
        .with_max_in_flight(2)
        .unwrap()
        .with_max_server_delay(MS(5000));
    // Copy 1: sent at 0, a plain 503 at 20 ms; copy 2: sent at 10 ms, a 503
    // asking for 2 s at 20 ms.
    let sent_at = copies_sent_at(policy, &[(MS(20), 503, None), (MS(10), 503, Some("2"))]).await;
    assert_eq!(sent_at.len(), 3, "{sent_at:?}");
    assert!(
        sent_at[2] >= MS(2020),
        "the third copy went at {:?}, before the 2 s the server asked for: {sent_at:?}",
        sent_at[2]
    );
}

/// A copy past its age limit starts no hedge while the server's wait runs.
#[tokio::test(start_paused = true)]
async fn an_aged_copy_starts_no_hedge_while_the_servers_wait_runs() {
    let decoder = StatusDecoder::new([503]).unwrap().with_retry_after();
    let policy = HedgePolicy::new(decoder, HedgeDelay::never(), 3)
        .unwrap()
        .hedge_on_attempt_timeout(MS(100))
        .with_max_server_delay(MS(5000));
    let script = &[(MS(150), 503, Some("2")), (MS(10_000), 200, None)];
    let sent_at = copies_sent_at(policy, script).await;
    assert_eq!(sent_at.len(), 3, "{sent_at:?}");
    assert_eq!(sent_at[2], MS(2150), "held until the server's wait ended");
}
