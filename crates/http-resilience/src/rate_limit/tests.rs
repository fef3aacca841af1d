//! The rate limit on the paused clock: the pace, the burst, the waits and
//! their bounds, and what the server's signals pause and pace.

use super::*;
use crate::{
    guard::GuardLayer,
    key::PerKey,
    policy::{FixedDelay, StatusDecoder},
    retry::RetryPolicy,
    BoxError, DeadlineLayer, FailureKind, RequestDeadline, ResiliencePolicy, StatusRetryLayer,
};
use http::{Request, Response};
use std::{
    convert::Infallible,
    sync::{Arc, Mutex},
    time::Duration,
};
use tokio::time::Instant;
use tower::{util::BoxCloneService, Layer, ServiceBuilder, ServiceExt};

/// What the upstream saw: the instant and the authority of every request.
type Seen = Arc<Mutex<Vec<(Duration, String)>>>;

type Svc = BoxCloneService<
    Request<String>,
    Response<crate::deadline::body::DeadlineBody<String>>,
    BoxError,
>;

/// An upstream that records every request and answers with `answer`.
fn upstream(
    seen: &Seen,
    start: Instant,
    answer: fn(&Request<String>) -> Response<String>,
) -> impl tower::Service<
    Request<String>,
    Response = Response<String>,
    Error = Infallible,
    Future = std::future::Ready<Result<Response<String>, Infallible>>,
> + Clone {
    let seen = Arc::clone(seen);
    tower::service_fn(move |request: Request<String>| {
        let host = request.uri().host().unwrap_or("").to_owned();
        seen.lock().unwrap().push((start.elapsed(), host));
        std::future::ready(Ok(answer(&request)))
    })
}

fn ok(_: &Request<String>) -> Response<String> {
    Response::new(String::new())
}

/// The three layers' form: a deadline of `deadline`, the limit, `answer`.
fn layered(
    limit: RateLimitPolicy,
    deadline: Duration,
    answer: fn(&Request<String>) -> Response<String>,
) -> (Svc, Seen) {
    let seen = Seen::default();
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(deadline))
        .layer(GuardLayer::new(limit))
        .service(upstream(&seen, Instant::now(), answer));
    (BoxCloneService::new(svc), seen)
}

fn get(uri: &str) -> Request<String> {
    Request::get(uri).body(String::new()).unwrap()
}

fn per_second(calls: u32, burst: u32) -> RateLimitPolicy {
    RateLimitPolicy::new(calls, Duration::from_secs(1))
        .unwrap()
        .with_burst(burst)
        .unwrap()
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn instants(seen: &Seen) -> Vec<Duration> {
    seen.lock().unwrap().iter().map(|(at, _)| *at).collect()
}

fn limited(err: &BoxError) -> &RateLimited {
    assert_eq!(FailureKind::of(err), FailureKind::RateLimited, "{err}");
    err.downcast_ref::<RateLimited>().expect("the typed error")
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_burst_goes_at_once_then_one_call_per_interval() {
    let (svc, seen) = layered(per_second(100, 10), Duration::from_secs(10), ok);
    let calls = (0..13).map(|_| svc.clone().oneshot(get("http://a.test/")));
    for result in futures_join(calls).await {
        result.unwrap();
    }
    let mut sent = instants(&seen);
    sent.sort();
    assert_eq!(&sent[..10], &[Duration::ZERO; 10]);
    assert_eq!(&sent[10..], &[ms(10), ms(20), ms(30)]);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_wait_that_cannot_fit_the_deadline_fails_at_once() {
    let (svc, seen) = layered(per_second(1, 1), ms(500), ok);
    svc.clone().oneshot(get("http://a.test/")).await.unwrap();
    let start = Instant::now();
    let err = svc
        .clone()
        .oneshot(get("http://a.test/"))
        .await
        .unwrap_err();
    assert_eq!(start.elapsed(), Duration::ZERO, "at once");
    let err = limited(&err);
    assert_eq!(err.reason(), Limited::WaitTooLong);
    assert_eq!(err.retry_after(), Duration::from_secs(1));
    assert_eq!(seen.lock().unwrap().len(), 1, "never sent");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_least_useful_attempt_is_kept_before_the_deadline() {
    let limit = per_second(1, 1).with_min_attempt(ms(100));
    let (svc, _) = layered(limit, ms(1_050), ok);
    svc.clone().oneshot(get("http://a.test/")).await.unwrap();
    let err = svc
        .clone()
        .oneshot(get("http://a.test/"))
        .await
        .unwrap_err();
    assert_eq!(limited(&err).reason(), Limited::WaitTooLong);
    let (svc, seen) = layered(per_second(1, 1).with_min_attempt(ms(100)), ms(1_100), ok);
    svc.clone().oneshot(get("http://a.test/")).await.unwrap();
    svc.clone().oneshot(get("http://a.test/")).await.unwrap();
    assert_eq!(instants(&seen), [Duration::ZERO, Duration::from_secs(1)]);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn turned_away_at_once_with_the_instant_a_slot_frees() {
    let limit = per_second(2, 1).with_mode(RateLimitMode::TurnAway);
    let (svc, _) = layered(limit, Duration::from_secs(10), ok);
    svc.clone().oneshot(get("http://a.test/")).await.unwrap();
    tokio::time::advance(ms(100)).await;
    let err = svc
        .clone()
        .oneshot(get("http://a.test/"))
        .await
        .unwrap_err();
    let err = limited(&err);
    assert_eq!(err.reason(), Limited::OverLimit);
    assert_eq!(err.retry_after(), ms(400));
    assert_eq!(err.free_at(), Instant::now() + ms(400));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_longest_wait_bounds_a_wait_without_deadline() {
    let limit = per_second(1, 1).with_max_wait(ms(500)).unwrap();
    let svc = GuardLayer::new(limit).layer(upstream(&Seen::default(), Instant::now(), ok));
    svc.clone().oneshot(get("http://a.test/")).await.unwrap();
    let err = svc
        .clone()
        .oneshot(get("http://a.test/"))
        .await
        .unwrap_err();
    assert_eq!(limited(&err).reason(), Limited::WaitTooLong);
}

fn too_many(request: &Request<String>) -> Response<String> {
    let status = if request.uri().path() == "/429" {
        429
    } else {
        200
    };
    Response::builder()
        .status(status)
        .header("retry-after", "2")
        .body(String::new())
        .unwrap()
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn retry_after_pauses_every_call_to_the_authority_and_no_other() {
    let limit = per_second(100, 10).with_server_signals(ServerSignals::ALL);
    let (svc, seen) = layered(limit.clone(), Duration::from_secs(10), too_many);
    let response = svc.clone().oneshot(get("http://a.test/429")).await.unwrap();
    assert_eq!(response.status(), 429);
    let other = svc.clone().oneshot(get("http://b.test/"));
    let paused = (0..3).map(|_| svc.clone().oneshot(get("http://a.test/")));
    let (other, paused) = tokio::join!(other, futures_join(paused));
    other.unwrap();
    paused.into_iter().for_each(|r| drop(r.unwrap()));
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen[1], (Duration::ZERO, "b.test".to_owned()), "untouched");
    for (at, host) in &seen[2..] {
        assert_eq!(host, "a.test");
        assert!(*at >= Duration::from_secs(2), "never early: {at:?}");
    }
    let key = crate::key::UpstreamKey::authority("http", "a.test", 80);
    assert_eq!(limit.state(&key).unwrap().paused_for, None, "over");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_pause_that_outlasts_the_deadline_turns_the_call_away_at_once() {
    let limit = per_second(100, 10).with_server_signals(ServerSignals::ALL);
    let (svc, seen) = layered(limit, Duration::from_secs(1), too_many);
    svc.clone().oneshot(get("http://a.test/429")).await.unwrap();
    let start = Instant::now();
    let err = svc
        .clone()
        .oneshot(get("http://a.test/"))
        .await
        .unwrap_err();
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(limited(&err).reason(), Limited::Paused);
    assert_eq!(limited(&err).retry_after(), Duration::from_secs(2));
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_pause_learned_while_a_call_waits_holds_it_too() {
    let limit = per_second(1, 1).with_server_signals(ServerSignals::ALL);
    let (svc, seen) = layered(limit, Duration::from_secs(10), too_many);
    // The first call takes the slot at 0; the second waits for the one at 1 s.
    let first = svc.clone().oneshot(get("http://a.test/429"));
    let second = svc.clone().oneshot(get("http://a.test/"));
    let (first, second) = tokio::join!(first, second);
    assert_eq!(first.unwrap().status(), 429);
    second.unwrap();
    assert_eq!(instants(&seen), [Duration::ZERO, Duration::from_secs(2)]);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_pause_is_capped() {
    let limit = per_second(100, 1)
        .with_server_signals(ServerSignals::ALL)
        .with_max_pause(ms(500))
        .unwrap();
    let (svc, seen) = layered(limit, Duration::from_secs(10), too_many);
    svc.clone().oneshot(get("http://a.test/429")).await.unwrap();
    svc.clone().oneshot(get("http://a.test/")).await.unwrap();
    assert_eq!(instants(&seen), [Duration::ZERO, ms(500)]);
}

fn pushback(_: &Request<String>) -> Response<String> {
    Response::builder()
        .header("grpc-status", "8")
        .header("grpc-retry-pushback-ms", "750")
        .body(String::new())
        .unwrap()
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn grpc_pushback_pauses_the_key() {
    let signals = ServerSignals::NONE.with(Signal::GrpcPushback);
    let limit = per_second(100, 10).with_server_signals(signals);
    let (svc, seen) = layered(limit, Duration::from_secs(10), pushback);
    svc.clone().oneshot(get("http://a.test/")).await.unwrap();
    svc.clone().oneshot(get("http://a.test/")).await.unwrap();
    assert_eq!(instants(&seen), [Duration::ZERO, ms(750)]);
}

fn quota_of_four(_: &Request<String>) -> Response<String> {
    Response::builder()
        .header("x-ratelimit-remaining", "4")
        .header("x-ratelimit-reset", "2")
        .body(String::new())
        .unwrap()
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_quota_with_some_remaining_spreads_the_calls_to_its_reset() {
    let limit = per_second(100, 1).with_server_signals(ServerSignals::ALL);
    let (svc, seen) = layered(limit.clone(), Duration::from_secs(10), quota_of_four);
    for _ in 0..3 {
        svc.clone().oneshot(get("http://a.test/")).await.unwrap();
    }
    // The policy's pace for the first, then one every 2 s / 4.
    assert_eq!(instants(&seen), [Duration::ZERO, ms(10), ms(510)]);
    let key = crate::key::UpstreamKey::authority("http", "a.test", 80);
    assert_eq!(limit.state(&key).unwrap().paced_at, Some(ms(500)));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn signals_are_opt_in() {
    let (svc, seen) = layered(per_second(100, 10), Duration::from_secs(10), too_many);
    svc.clone().oneshot(get("http://a.test/429")).await.unwrap();
    svc.clone().oneshot(get("http://a.test/")).await.unwrap();
    assert_eq!(instants(&seen), [Duration::ZERO, Duration::ZERO]);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_call_dropped_while_it_waits_gives_its_slot_back() {
    let limit = per_second(1, 1);
    let (svc, seen) = layered(limit.clone(), Duration::from_secs(10), ok);
    svc.clone().oneshot(get("http://a.test/")).await.unwrap();
    let waiting = svc.clone().oneshot(get("http://a.test/"));
    assert!(
        tokio::time::timeout(ms(100), waiting).await.is_err(),
        "it waits"
    );
    let key = crate::key::UpstreamKey::authority("http", "a.test", 80);
    assert_eq!(limit.state(&key).unwrap().waiting, 0);
    svc.clone().oneshot(get("http://a.test/")).await.unwrap();
    assert_eq!(instants(&seen), [Duration::ZERO, Duration::from_secs(1)]);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_retry_takes_a_slot_in_both_forms() {
    let retry = || {
        RetryPolicy::new(
            StatusDecoder::new([503]).unwrap(),
            FixedDelay::new(ms(10), 1),
        )
    };
    // The three layers: the retry's attempt waits for its slot, 1 s on.
    let seen = Seen::default();
    let calls = Arc::new(Mutex::new(0));
    let count = Arc::clone(&calls);
    let start = Instant::now();
    let record = Arc::clone(&seen);
    let upstream = tower::service_fn(move |_: Request<String>| {
        record
            .lock()
            .unwrap()
            .push((start.elapsed(), String::new()));
        let mut n = count.lock().unwrap();
        *n += 1;
        let status = if *n % 2 == 1 { 503 } else { 200 };
        std::future::ready(Ok::<_, Infallible>(
            Response::builder()
                .status(status)
                .body(String::new())
                .unwrap(),
        ))
    });
    let layered = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_secs(10)))
        .layer(StatusRetryLayer::new(retry()))
        .layer(GuardLayer::new(per_second(1, 1)))
        .service(upstream.clone());
    assert_eq!(
        layered
            .oneshot(get("http://a.test/"))
            .await
            .unwrap()
            .status(),
        200
    );
    let combined = ResiliencePolicy::new(Duration::from_secs(10), Duration::from_secs(5), retry())
        .unwrap()
        .with_guard(per_second(1, 1))
        .layer()
        .layer(upstream);
    assert_eq!(
        combined
            .oneshot(get("http://a.test/"))
            .await
            .unwrap()
            .status(),
        200
    );
    let sent = instants(&seen);
    assert_eq!(sent[1] - sent[0], Duration::from_secs(1), "three layers");
    assert_eq!(sent[3] - sent[2], Duration::from_secs(1), "combined");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_key_of_ones_own_shares_one_bucket_across_authorities() {
    let limit = per_second(1, 1)
        .with_mode(RateLimitMode::TurnAway)
        .with_key(|_, headers| {
            let tenant = headers.get("x-tenant").and_then(|v| v.to_str().ok());
            crate::key::UpstreamKey::custom(tenant.unwrap_or("none"))
        });
    let (svc, _) = layered(limit, Duration::from_secs(10), ok);
    let tenant = |uri: &str| {
        Request::get(uri)
            .header("x-tenant", "t1")
            .body(String::new())
            .unwrap()
    };
    svc.clone().oneshot(tenant("http://a.test/")).await.unwrap();
    let err = svc
        .clone()
        .oneshot(tenant("http://b.test/"))
        .await
        .unwrap_err();
    assert_eq!(limited(&err).key(), &crate::key::UpstreamKey::custom("t1"));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_request_deadline_of_its_own_bounds_the_wait() {
    let svc =
        GuardLayer::new(per_second(1, 1)).layer(upstream(&Seen::default(), Instant::now(), ok));
    svc.clone().oneshot(get("http://a.test/")).await.unwrap();
    let mut request = get("http://a.test/");
    request
        .extensions_mut()
        .insert(RequestDeadline::after(ms(999)));
    let err = svc.clone().oneshot(request).await.unwrap_err();
    assert_eq!(limited(&err).reason(), Limited::WaitTooLong);
    let mut request = get("http://a.test/");
    request
        .extensions_mut()
        .insert(RequestDeadline::after(Duration::from_secs(1)));
    svc.clone().oneshot(request).await.unwrap();
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_hedged_copy_takes_a_slot() {
    use crate::{
        hedge::{HedgeDelay, HedgeLayer, HedgePolicy},
        policy::TransientDecoder,
    };
    let seen = Seen::default();
    let start = Instant::now();
    let record = Arc::clone(&seen);
    let slow = tower::service_fn(move |_: Request<String>| {
        record
            .lock()
            .unwrap()
            .push((start.elapsed(), String::new()));
        async {
            tokio::time::sleep(ms(300)).await;
            Ok::<_, Infallible>(Response::new(String::new()))
        }
    });
    let hedge = HedgePolicy::new(TransientDecoder::new(), HedgeDelay::fixed(ms(50)), 2).unwrap();
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_secs(10)))
        .layer(HedgeLayer::new(hedge))
        .layer(GuardLayer::new(per_second(10, 1)))
        .service(slow);
    svc.oneshot(get("http://a.test/")).await.unwrap();
    // The copy, due at 50 ms, waits for its slot at 100 ms.
    assert_eq!(instants(&seen), [Duration::ZERO, ms(100)]);
}

#[test]
fn settings_out_of_range_name_their_field() {
    let field = |err: crate::InvalidSetting| err.field().to_owned();
    assert_eq!(field(RateLimitPolicy::new(0, ms(1)).unwrap_err()), "calls");
    assert_eq!(
        field(RateLimitPolicy::new(1, Duration::ZERO).unwrap_err()),
        "per"
    );
    let limit = per_second(1, 1);
    assert_eq!(field(limit.clone().with_burst(0).unwrap_err()), "burst");
    assert_eq!(
        field(limit.clone().with_max_wait(Duration::ZERO).unwrap_err()),
        "max_wait"
    );
    assert_eq!(
        field(limit.clone().with_max_pause(Duration::ZERO).unwrap_err()),
        "max_pause"
    );
    assert_eq!(field(limit.max_keys(0, ms(1)).unwrap_err()), "max_keys");
}

/// Every future of `futures`, polled together, in order.
async fn futures_join<F: std::future::Future>(
    futures: impl IntoIterator<Item = F>,
) -> Vec<F::Output> {
    let mut handles: Vec<_> = futures.into_iter().map(Box::pin).map(Some).collect();
    let mut outputs: Vec<Option<F::Output>> = handles.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (slot, out) in handles.iter_mut().zip(outputs.iter_mut()) {
            if let Some(future) = slot {
                match future.as_mut().poll(cx) {
                    std::task::Poll::Ready(value) => {
                        *out = Some(value);
                        *slot = None;
                    }
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    outputs.into_iter().map(Option::unwrap).collect()
}

// ===== a server's pace is its own: no burst =====

fn quota_of_two_in_ten_seconds(_: &Request<String>) -> Response<String> {
    Response::builder()
        .header("x-ratelimit-remaining", "2")
        .header("x-ratelimit-reset", "10")
        .body(String::new())
        .unwrap()
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_pace_the_server_asks_for_is_not_multiplied_by_the_burst() {
    // 100/s with a burst of 10; the server then says: 2 calls left for the
    // next 10 s, so calls are to be spread 5 s apart ("some remaining
    // spreads the calls over the time to it").
    let limit = per_second(100, 10).with_server_signals(ServerSignals::ALL);
    let (svc, seen) = layered(
        limit.clone(),
        Duration::from_secs(60),
        quota_of_two_in_ten_seconds,
    );
    svc.clone().oneshot(get("http://a.test/")).await.unwrap();
    let key = crate::key::UpstreamKey::authority("http", "a.test", 80);
    assert_eq!(
        limit.state(&key).unwrap().paced_at,
        Some(Duration::from_secs(5))
    );
    let calls = (0..5).map(|_| svc.clone().oneshot(get("http://a.test/")));
    for result in futures_join(calls).await {
        result.unwrap();
    }
    let sent = instants(&seen);
    let within_reset = sent
        .iter()
        .filter(|at| **at < Duration::from_secs(10))
        .count();
    assert!(
        within_reset <= 3,
        "the server allowed 2 more calls in 10 s, the client sent {within_reset} calls in that window: {sent:?}"
    );
}

// ===== a pause that is over keeps nothing =====

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_pause_that_is_over_does_not_keep_a_key_over_a_newer_one() {
    let limit = per_second(100, 1)
        .with_server_signals(ServerSignals::ALL)
        .max_keys(2, Duration::from_secs(300))
        .unwrap();
    let (svc, _) = layered(limit.clone(), Duration::from_secs(10), too_many);
    // a.test is paused for 2 s, then used at 3 s, the pause long over.
    svc.clone().oneshot(get("http://a.test/429")).await.unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    svc.clone().oneshot(get("http://a.test/")).await.unwrap();
    let a = crate::key::UpstreamKey::authority("http", "a.test", 80);
    assert_eq!(
        limit.state(&a).unwrap().paused_for,
        None,
        "a.test's pause is over"
    );
    // b.test is used after a.test.
    tokio::time::sleep(Duration::from_secs(1)).await;
    svc.clone().oneshot(get("http://b.test/")).await.unwrap();
    // A third key makes room: neither is idle, neither is paused, so the
    // least recently used (a.test) should go.
    tokio::time::sleep(Duration::from_secs(1)).await;
    svc.clone().oneshot(get("http://c.test/")).await.unwrap();
    let b = crate::key::UpstreamKey::authority("http", "b.test", 80);
    assert!(
        limit.state(&b).is_some(),
        "b.test (used last, never paused) was evicted; a.test (used first, pause over) kept: {:?}",
        limit
            .states()
            .into_iter()
            .map(|(k, _)| k.to_string())
            .collect::<Vec<_>>()
    );
}
