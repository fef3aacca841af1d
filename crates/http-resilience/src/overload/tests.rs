//! Overload control on the paused clock: the slots, the queue and its
//! time limits, the throttle and the adaptive limit, through the
//! three-layer form's service.

use super::*;
use crate::{
    guard::GuardLayer, guard::Guarded, key::PerKey, key::UpstreamKey, FailureKind, RequestDeadline,
};
use http::{Request, Response};
use std::{
    collections::VecDeque,
    convert::Infallible,
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc, Mutex,
    },
    time::Duration,
};
use tokio::time::{self, Instant};
use tower::{Layer, Service, ServiceExt};

const MS: Duration = Duration::from_millis(1);
const A: &str = "http://a.test/";

/// An upstream that answers each call after the delay and with the status
/// its script says (200 at once when the script is empty), counting calls.
#[derive(Clone, Default)]
struct Upstream {
    script: Arc<Mutex<VecDeque<(Duration, u16)>>>,
    calls: Arc<AtomicU32>,
}

impl Upstream {
    fn answering(script: impl IntoIterator<Item = (Duration, u16)>) -> Self {
        let upstream = Self::default();
        upstream.script.lock().unwrap().extend(script);
        upstream
    }

    fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Service<Request<()>> for Upstream {
    type Response = Response<()>;
    type Error = Infallible;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Response<()>, Infallible>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<()>) -> Self::Future {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let (delay, status) = self
            .script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or((Duration::ZERO, 200));
        Box::pin(async move {
            time::sleep(delay).await;
            Ok(Response::builder().status(status).body(()).unwrap())
        })
    }
}

fn request(uri: &str, deadline: Option<Duration>) -> Request<()> {
    let mut request = Request::get(uri).body(()).unwrap();
    if let Some(budget) = deadline {
        request
            .extensions_mut()
            .insert(RequestDeadline::after(budget));
    }
    request
}

fn key(uri: &str) -> UpstreamKey {
    UpstreamKey::of_uri(&uri.parse().unwrap())
}

type Call = tokio::task::JoinHandle<(Result<Response<()>, crate::BoxError>, Instant)>;

/// Sends a request through a clone of `svc` on a task of its own.
fn spawn(svc: &Guarded<Upstream, OverloadPolicy>, request: Request<()>) -> Call {
    let svc = svc.clone();
    tokio::spawn(async move {
        let outcome = svc.oneshot(request).await;
        (outcome, Instant::now())
    })
}

fn rejection(outcome: &Result<Response<()>, crate::BoxError>) -> Rejection {
    let err = outcome.as_ref().expect_err("turned away");
    assert_eq!(FailureKind::of(err), FailureKind::Overloaded, "{err}");
    err.downcast_ref::<Overloaded>().unwrap().reason()
}

/// Lets the spawned calls run until they wait.
async fn settle() {
    for _ in 0..10 {
        tokio::task::yield_now().await;
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_bulkhead_admits_its_limit_queues_in_order_and_turns_away_the_rest() {
    let upstream = Upstream::answering([(100 * MS, 200), (100 * MS, 200), (10 * MS, 200)]);
    let policy = OverloadPolicy::bulkhead(2).unwrap().with_queue(1);
    let svc = GuardLayer::new(policy.clone()).layer(upstream.clone());
    let start = Instant::now();
    let first = spawn(&svc, request(A, None));
    let second = spawn(&svc, request(A, None));
    let queued = spawn(&svc, request(A, None));
    settle().await;
    let state = policy.state(&key(A)).unwrap();
    assert_eq!(
        (state.limit, state.in_flight, state.queued),
        (Some(2), 2, 1)
    );

    let turned_away = svc.clone().oneshot(request(A, None)).await;
    assert_eq!(rejection(&turned_away), Rejection::QueueFull { limit: 2 });
    assert_eq!(
        upstream.calls(),
        2,
        "neither the queued nor the rejected call was sent"
    );

    for call in [first, second] {
        let (outcome, at) = call.await.unwrap();
        assert_eq!(outcome.unwrap().status(), 200);
        assert_eq!(at - start, 100 * MS);
    }
    let (outcome, at) = queued.await.unwrap();
    assert_eq!(outcome.unwrap().status(), 200);
    assert_eq!(at - start, 110 * MS, "sent when the first slot came back");
    let state = policy.state(&key(A)).unwrap();
    assert_eq!((state.in_flight, state.queued), (0, 0));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_queued_call_ends_at_its_deadline_with_the_deadline_error() {
    let upstream = Upstream::answering([(time::Duration::from_secs(5), 200)]);
    let policy = OverloadPolicy::bulkhead(1).unwrap().with_queue(8);
    let svc = GuardLayer::new(policy.clone()).layer(upstream.clone());
    let _busy = spawn(&svc, request(A, None));
    settle().await;
    let start = Instant::now();
    let outcome = svc.clone().oneshot(request(A, Some(300 * MS))).await;
    assert_eq!(start.elapsed(), 300 * MS);
    let err = outcome.unwrap_err();
    assert_eq!(FailureKind::of(&err), FailureKind::Deadline, "{err}");
    assert_eq!(upstream.calls(), 1);
    assert_eq!(
        policy.state(&key(A)).unwrap().queued,
        0,
        "it left the queue"
    );
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_wait_ends_before_the_deadline_by_the_least_useful_attempt_or_the_longest_wait() {
    for (policy, gives_up_at) in [
        (
            OverloadPolicy::bulkhead(1)
                .unwrap()
                .with_queue(8)
                .with_min_attempt(100 * MS),
            200 * MS,
        ),
        (
            OverloadPolicy::bulkhead(1)
                .unwrap()
                .with_queue(8)
                .with_max_wait(50 * MS)
                .unwrap(),
            50 * MS,
        ),
    ] {
        let upstream = Upstream::answering([(time::Duration::from_secs(5), 200)]);
        let svc = GuardLayer::new(policy).layer(upstream);
        let busy = spawn(&svc, request(A, None));
        settle().await;
        let start = Instant::now();
        let outcome = svc.clone().oneshot(request(A, Some(300 * MS))).await;
        assert_eq!(start.elapsed(), gives_up_at);
        assert_eq!(rejection(&outcome), Rejection::WaitTooLong);
        busy.abort();
    }
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_call_that_cannot_get_a_slot_in_time_gives_up_at_once() {
    // Calls take 100 ms, one at a time.
    let upstream = Upstream::answering((0..10).map(|_| (100 * MS, 200)));
    let policy = OverloadPolicy::bulkhead(1).unwrap().with_queue(8);
    let svc = GuardLayer::new(policy.clone()).layer(upstream);
    svc.clone().oneshot(request(A, None)).await.unwrap();
    let _busy = spawn(&svc, request(A, None));
    let _waiting = spawn(&svc, request(A, None));
    settle().await;
    // Two ahead of it at 100 ms each, with 150 ms left: it would not make it.
    let start = Instant::now();
    let outcome = svc.clone().oneshot(request(A, Some(150 * MS))).await;
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(rejection(&outcome), Rejection::WaitTooLong);
    // With time enough, it waits its turn.
    let outcome = svc
        .clone()
        .oneshot(request(A, Some(Duration::from_secs(1))))
        .await;
    assert_eq!(outcome.unwrap().status(), 200);
    assert_eq!(start.elapsed(), 300 * MS);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn the_wait_estimate_learns_from_calls_made_under_load_only() {
    learns_under_load_only(OverloadPolicy::bulkhead(4).unwrap().with_queue(8)).await;
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn a_throttle_beside_the_limit_leaves_the_wait_estimate_to_calls_under_load() {
    let throttle = Throttle::new(2.0).unwrap();
    let policy = OverloadPolicy::bulkhead(4)
        .unwrap()
        .with_queue(8)
        .with_throttle(throttle);
    learns_under_load_only(policy).await;
}

/// Under `policy` (4 slots, a queue): a call made alone after the first
/// does not move the wait estimate; calls made with the slots taken do.
async fn learns_under_load_only(policy: OverloadPolicy) {
    // 100 ms alone (the first: learnt), 900 ms alone (a quarter of the
    // slots taken: not learnt), then 1 s each under load.
    let script = [(100 * MS, 200), (900 * MS, 200)];
    let upstream = Upstream::answering(script.into_iter().chain((0..8).map(|_| (1000 * MS, 200))));
    let svc = GuardLayer::new(policy.clone()).layer(upstream);
    svc.clone().oneshot(request(A, None)).await.unwrap();
    svc.clone().oneshot(request(A, None)).await.unwrap();
    let full: Vec<_> = (0..4).map(|_| spawn(&svc, request(A, None))).collect();
    settle().await;
    // First in line at 100 ms shared among 4 slots: 25 ms, within 35 ms, so
    // it waits, and its deadline ends the wait. Had the 900 ms call counted
    // (180 ms smoothed, 45 ms likely), it would have given up at once.
    let start = Instant::now();
    let outcome = svc.clone().oneshot(request(A, Some(35 * MS))).await;
    let err = outcome.expect_err("ended by its deadline");
    assert_eq!(FailureKind::of(&err), FailureKind::Deadline, "{err}");
    assert_eq!(start.elapsed(), 35 * MS);
    for call in full {
        call.await.unwrap().0.unwrap();
    }
    // The calls that held a slot with half or more taken counted: the wait
    // now likely takes more than 35 ms, and the call gives up at once.
    let _full: Vec<_> = (0..4).map(|_| spawn(&svc, request(A, None))).collect();
    settle().await;
    let start = Instant::now();
    let outcome = svc.clone().oneshot(request(A, Some(35 * MS))).await;
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(rejection(&outcome), Rejection::WaitTooLong);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn dropped_calls_give_their_slot_and_their_place_back() {
    let upstream = Upstream::answering([(time::Duration::from_secs(60), 200)]);
    let policy = OverloadPolicy::bulkhead(1).unwrap().with_queue(1);
    let svc = GuardLayer::new(policy.clone()).layer(upstream.clone());
    let busy = spawn(&svc, request(A, None));
    let queued = spawn(&svc, request(A, None));
    settle().await;
    assert_eq!(policy.state(&key(A)).unwrap().queued, 1);
    queued.abort();
    settle().await;
    assert_eq!(
        policy.state(&key(A)).unwrap().queued,
        0,
        "the place came back"
    );
    busy.abort();
    settle().await;
    assert_eq!(
        policy.state(&key(A)).unwrap().in_flight,
        0,
        "the slot came back"
    );
    let outcome = svc.clone().oneshot(request(A, None)).await;
    assert_eq!(outcome.unwrap().status(), 200);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn keys_have_slots_of_their_own() {
    let upstream = Upstream::answering([(time::Duration::from_secs(60), 200)]);
    let policy = OverloadPolicy::bulkhead(1).unwrap();
    let svc = GuardLayer::new(policy.clone()).layer(upstream);
    let _busy = spawn(&svc, request(A, None));
    settle().await;
    let b = "http://b.test/";
    assert_eq!(
        svc.clone()
            .oneshot(request(b, None))
            .await
            .unwrap()
            .status(),
        200
    );
    let outcome = svc.clone().oneshot(request(A, None)).await;
    assert_eq!(rejection(&outcome), Rejection::QueueFull { limit: 1 });
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn throttling_turns_away_the_share_the_sre_formula_gives() {
    let calls = 1000;
    let upstream = Upstream::answering((0..calls).map(|_| (MS, 503)));
    let policy = OverloadPolicy::throttling(Throttle::default()).with_seed(7);
    let svc = GuardLayer::new(policy.clone()).layer(upstream.clone());
    let mut throttled = 0;
    for _ in 0..calls {
        match svc.clone().oneshot(request(A, None)).await {
            Ok(response) => assert_eq!(response.status(), 503),
            Err(err) => {
                assert_eq!(FailureKind::of(&err), FailureKind::Overloaded);
                throttled += 1;
            }
        }
    }
    // Nothing accepted: the probability nears 1, and only a trickle is sent.
    assert!(upstream.calls() < 20, "{} sent", upstream.calls());
    assert_eq!(throttled + upstream.calls(), calls);
    let p = policy.state(&key(A)).unwrap().rejection_probability;
    assert!(p > 0.99, "{p}");
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn throttling_leaves_a_healthy_upstream_alone_and_recovers() {
    let upstream = Upstream::answering((0..50).map(|_| (MS, 503)));
    let throttle = Throttle::default()
        .with_window(Duration::from_secs(10))
        .unwrap();
    let policy = OverloadPolicy::throttling(throttle).with_seed(1);
    let svc = GuardLayer::new(policy.clone()).layer(upstream.clone());
    for _ in 0..50 {
        let _ = svc.clone().oneshot(request(A, None)).await;
    }
    assert!(policy.state(&key(A)).unwrap().rejection_probability > 0.5);
    // What the throttled calls left of the script is never sent.
    upstream.script.lock().unwrap().clear();
    // The rejections leave the window; the upstream is healthy again.
    time::sleep(Duration::from_secs(11)).await;
    for _ in 0..200 {
        let response = svc.clone().oneshot(request(A, None)).await.unwrap();
        assert_eq!(response.status(), 200);
    }
    assert_eq!(policy.state(&key(A)).unwrap().rejection_probability, 0.0);
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_adaptive_limit_shrinks_on_overload_signals_and_says_so() {
    let changes = Arc::new(Mutex::new(Vec::new()));
    let heard = Arc::clone(&changes);
    let policy = OverloadPolicy::adaptive(AdaptiveLimit::new(20, 2, 50).unwrap()).with_listener(
        move |event: &OverloadEvent<'_>| {
            if let OverloadEvent::LimitChanged { from, to, .. } = event {
                heard.lock().unwrap().push((*from, *to));
            }
        },
    );
    let upstream = Upstream::answering((0..10).map(|_| (10 * MS, 503)));
    let svc = GuardLayer::new(policy.clone()).layer(upstream);
    for _ in 0..10 {
        let _ = svc.clone().oneshot(request(A, None)).await;
    }
    let limit = policy.state(&key(A)).unwrap().limit.unwrap();
    // 20 × 0.9^10, floored at every step's reading.
    assert_eq!(limit, 6);
    let changes = changes.lock().unwrap();
    assert_eq!(changes.first(), Some(&(20, 18)));
    assert_eq!(changes.last().map(|c| c.1), Some(6));
}

#[tokio::test(flavor = "current_thread", start_paused = true)]
async fn an_attempt_timeout_below_counts_as_an_overload_signal_and_a_deadline_as_nothing() {
    use crate::AttemptTimeoutLayer;
    let policy = OverloadPolicy::adaptive(AdaptiveLimit::new(10, 1, 10).unwrap());
    let upstream =
        Upstream::answering([(Duration::from_secs(5), 200), (Duration::from_secs(5), 200)]);
    let svc = tower::ServiceBuilder::new()
        .layer(GuardLayer::new(policy.clone()))
        .layer(AttemptTimeoutLayer::new(100 * MS))
        .service(upstream);
    let err = svc.clone().oneshot(request(A, None)).await.unwrap_err();
    assert_eq!(FailureKind::of(&err), FailureKind::AttemptTimeout);
    assert_eq!(policy.state(&key(A)).unwrap().limit, Some(9));
    // The deadline below ends the next one: it says nothing of the upstream.
    let err = svc
        .clone()
        .oneshot(request(A, Some(50 * MS)))
        .await
        .unwrap_err();
    assert_eq!(FailureKind::of(&err), FailureKind::Deadline);
    assert_eq!(policy.state(&key(A)).unwrap().limit, Some(9));
}

#[test]
fn nonsense_settings_are_refused_by_field() {
    assert_eq!(
        OverloadPolicy::bulkhead(0).unwrap_err().field(),
        "max_in_flight"
    );
    let bulkhead = || OverloadPolicy::bulkhead(1).unwrap();
    assert_eq!(
        bulkhead()
            .with_max_wait(Duration::ZERO)
            .unwrap_err()
            .field(),
        "max_wait"
    );
    assert_eq!(bulkhead().max_keys(0, MS).unwrap_err().field(), "max_keys");
    assert_eq!(
        bulkhead().max_keys(1, Duration::ZERO).unwrap_err().field(),
        "idle_key_timeout"
    );
}

// ===== the combined service =====

mod combined {
    use super::*;
    use crate::{
        policy::{FixedDelay, RetryBudget, TransientDecoder},
        retry::RetryPolicy,
        Resilience, ResiliencePolicy,
    };

    type Combined = Resilience<Upstream, TransientDecoder, FixedDelay, OverloadPolicy>;

    fn combined(
        upstream: &Upstream,
        overload: &OverloadPolicy,
        budget: Option<Arc<RetryBudget>>,
    ) -> Combined {
        let mut retry = RetryPolicy::new(TransientDecoder::new(), FixedDelay::new(50 * MS, 2));
        if let Some(budget) = budget {
            retry = retry.map_options(|o| o.with_budget(budget));
        }
        ResiliencePolicy::new(Duration::from_secs(1), Duration::from_secs(1), retry)
            .unwrap()
            .with_guard(overload.clone())
            .layer()
            .layer(upstream.clone())
    }

    fn spawn(svc: &Combined, request: Request<()>) -> tokio::task::JoinHandle<(u16, Instant)> {
        let svc = svc.clone();
        tokio::spawn(async move {
            let response = svc.oneshot(request).await.unwrap();
            (response.status().as_u16(), Instant::now())
        })
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn the_first_attempt_waits_for_a_slot_and_is_sent_when_one_comes() {
        let upstream = Upstream::answering([(100 * MS, 200), (10 * MS, 200)]);
        let overload = OverloadPolicy::bulkhead(1).unwrap().with_queue(1);
        let svc = combined(&upstream, &overload, None);
        let start = Instant::now();
        let first = spawn(&svc, request(A, None));
        let second = spawn(&svc, request(A, None));
        settle().await;
        assert_eq!(overload.state(&key(A)).unwrap().queued, 1);
        assert_eq!(upstream.calls(), 1);
        assert_eq!(first.await.unwrap(), (200, start + 100 * MS));
        assert_eq!(second.await.unwrap(), (200, start + 110 * MS));
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_retry_gives_its_slot_back_while_it_waits_and_takes_one_again() {
        // The first call: 503 at once, a 50 ms wait, then 200. Meanwhile a
        // second call takes the only slot for 100 ms.
        let upstream = Upstream::answering([
            (Duration::ZERO, 503),
            (100 * MS, 200),
            (Duration::ZERO, 200),
        ]);
        let overload = OverloadPolicy::bulkhead(1).unwrap().with_queue(4);
        let svc = combined(&upstream, &overload, None);
        let start = Instant::now();
        let retried = spawn(&svc, request(A, None));
        settle().await;
        let other = spawn(&svc, request(A, None));
        settle().await;
        assert_eq!(
            overload.state(&key(A)).unwrap().in_flight,
            1,
            "the other call has the slot"
        );
        assert_eq!(other.await.unwrap(), (200, start + 100 * MS));
        // The retry was due at 50 ms; it waited for the slot until 100 ms.
        assert_eq!(retried.await.unwrap(), (200, start + 100 * MS));
        assert_eq!(upstream.calls(), 3);
        assert_eq!(overload.state(&key(A)).unwrap().in_flight, 0);
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_call_turned_away_is_not_retried_and_costs_no_token() {
        let upstream = Upstream::answering([(Duration::from_secs(5), 200)]);
        let overload = OverloadPolicy::bulkhead(1).unwrap();
        let budget = Arc::new(RetryBudget::new(10, 0.1).unwrap());
        let svc = combined(&upstream, &overload, Some(Arc::clone(&budget)));
        let _busy = spawn(&svc, request(A, None));
        settle().await;
        let tokens = budget.tokens_milli();
        let start = Instant::now();
        let err = svc.clone().oneshot(request(A, None)).await.unwrap_err();
        assert_eq!(FailureKind::of(&err), FailureKind::Overloaded, "{err}");
        assert_eq!(start.elapsed(), Duration::ZERO, "no retry, no wait");
        assert_eq!(budget.tokens_milli(), tokens);
        assert_eq!(upstream.calls(), 1);
        let report = err.to_string();
        assert!(report.contains("turned the call away"), "{report}");
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_wait_for_a_slot_ends_at_the_deadline() {
        let upstream = Upstream::answering([(Duration::from_secs(5), 200)]);
        let overload = OverloadPolicy::bulkhead(1).unwrap().with_queue(4);
        let svc = combined(&upstream, &overload, None);
        let _busy = spawn(&svc, request(A, None));
        settle().await;
        let start = Instant::now();
        let err = svc.clone().oneshot(request(A, None)).await.unwrap_err();
        assert_eq!(FailureKind::of(&err), FailureKind::Deadline, "{err}");
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        assert_eq!(overload.state(&key(A)).unwrap().queued, 0);
    }
}

// ===== every path gives back what it holds =====

/// What a call holds goes back on every path, in both forms: the service made
/// ready for it, its place in the queue and its slot when its deadline ends
/// it (even with its finished future kept), and a key with calls in flight
/// is never idle.
mod edges {
    use super::*;
    use crate::{
        deadline::DeadlineLayer,
        policy::{FixedDelay, TransientDecoder},
        retry::RetryPolicy,
        ResiliencePolicy,
    };

    const SEC: Duration = Duration::from_secs(1);

    fn retry() -> RetryPolicy<TransientDecoder, FixedDelay> {
        RetryPolicy::new(TransientDecoder::new(), FixedDelay::new(50 * MS, 2))
    }

    // ----- a queued call is sent on the service made ready for it

    type Req = Request<()>;
    type Resp = Response<()>;

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn three_layer_queued_call_is_sent_on_the_ready_service() {
        let (mock, mut handle) = tower_test::mock::pair::<Req, Resp>();
        let overload = OverloadPolicy::bulkhead(1).unwrap().with_queue(1);
        let svc = GuardLayer::new(overload.clone()).layer(mock);
        let first = tokio::spawn(svc.clone().oneshot(request(A, Some(SEC))));
        let second = tokio::spawn(svc.clone().oneshot(request(A, Some(SEC))));
        settle().await;
        assert_eq!(overload.state(&key(A)).unwrap().queued, 1);
        let (_, send) = handle.next_request().await.unwrap();
        send.send_response(Response::new(()));
        assert!(first.await.unwrap().is_ok());
        settle().await;
        let (_, send) = handle.next_request().await.unwrap();
        send.send_response(Response::new(()));
        let second = second.await;
        assert!(matches!(second, Ok(Ok(_))), "{second:?}");
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn combined_queued_call_is_sent_on_the_ready_service() {
        let (mock, mut handle) = tower_test::mock::pair::<Req, Resp>();
        let overload = OverloadPolicy::bulkhead(1).unwrap().with_queue(1);
        let svc = ResiliencePolicy::new(SEC, SEC, retry())
            .unwrap()
            .with_guard(overload.clone())
            .layer()
            .layer(mock);
        let first = tokio::spawn(svc.clone().oneshot(request(A, None)));
        let second = tokio::spawn(svc.clone().oneshot(request(A, None)));
        settle().await;
        assert_eq!(overload.state(&key(A)).unwrap().queued, 1);
        let (_, send) = handle.next_request().await.unwrap();
        send.send_response(Response::new(()));
        assert!(first.await.unwrap().is_ok());
        settle().await;
        // The queued call has its slot now: it is sent.
        let mut second = second;
        let second = tokio::select! {
            next = handle.next_request() => {
                let (_, send) = next.unwrap();
                send.send_response(Response::new(()));
                (&mut second).await
            }
            joined = &mut second => joined,
        };
        assert!(matches!(second, Ok(Ok(_))), "{second:?}");
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn combined_queued_call_over_a_tower_buffer() {
        // What a tonic `Channel` is: a `Buffer`.
        let upstream = Upstream::answering([(100 * MS, 200), (10 * MS, 200)]);
        let buffered = tower::buffer::Buffer::new(upstream.clone(), 8);
        let overload = OverloadPolicy::bulkhead(1).unwrap().with_queue(1);
        let svc = ResiliencePolicy::new(SEC, SEC, retry())
            .unwrap()
            .with_guard(overload.clone())
            .layer()
            .layer(buffered);
        let first = tokio::spawn(svc.clone().oneshot(request(A, None)));
        let second = tokio::spawn(svc.clone().oneshot(request(A, None)));
        let first = first.await;
        assert!(matches!(first, Ok(Ok(_))), "{first:?}");
        let second = second.await;
        assert!(matches!(second, Ok(Ok(_))), "{second:?}");
    }

    // ----- a call its deadline ended holds nothing, its future kept or not

    /// Holds `fut` after it completed (as `select!` on `&mut fut` does).
    async fn finish_but_keep<F: std::future::Future + Unpin>(fut: &mut F) -> F::Output {
        fut.await
    }

    type Stack = tower::util::BoxCloneService<
        Request<()>,
        Response<crate::deadline::body::DeadlineBody<()>>,
        crate::BoxError,
    >;

    /// The two forms, a deadline of a second: the three layers' deadline and
    /// overload layers, and the combined service.
    const FORMS: [&str; 2] = ["three layers", "combined"];

    /// `form` over `upstream` with `overload`.
    fn stack(form: &str, upstream: &Upstream, overload: &OverloadPolicy) -> Stack {
        if form == FORMS[0] {
            Stack::new(
                DeadlineLayer::new(SEC)
                    .layer(GuardLayer::new(overload.clone()).layer(upstream.clone())),
            )
        } else {
            Stack::new(
                ResiliencePolicy::new(SEC, SEC, retry())
                    .unwrap()
                    .with_guard(overload.clone())
                    .layer()
                    .layer(upstream.clone()),
            )
        }
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_wait_ended_by_the_deadline_leaves_the_queue_at_once_in_both_forms() {
        for form in FORMS {
            let upstream = Upstream::answering([(5 * SEC, 200)]);
            let overload = OverloadPolicy::bulkhead(1).unwrap().with_queue(1);
            let svc = stack(form, &upstream, &overload);
            let _busy = tokio::spawn(svc.clone().oneshot(request(A, None)));
            settle().await;
            let mut queued = Box::pin(svc.clone().oneshot(request(A, None)));
            let err = finish_but_keep(&mut queued).await.unwrap_err();
            assert_eq!(
                FailureKind::of(&err),
                FailureKind::Deadline,
                "{form}: {err}"
            );
            let state = overload.state(&key(A)).unwrap();
            assert_eq!((state.in_flight, state.queued), (1, 0), "{form}: {state:?}");
            // Once the busy call is over, no call holds a slot.
            time::sleep(5 * SEC).await;
            let state = overload.state(&key(A)).unwrap();
            assert_eq!((state.in_flight, state.queued), (0, 0), "{form}: {state:?}");
            assert!(
                svc.clone().oneshot(request(A, None)).await.is_ok(),
                "{form}"
            );
            drop(queued);
        }
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn an_attempt_ended_by_the_deadline_gives_its_slot_back_at_once_in_both_forms() {
        for form in FORMS {
            let upstream = Upstream::answering([(5 * SEC, 200)]);
            let overload = OverloadPolicy::bulkhead(1).unwrap();
            let svc = stack(form, &upstream, &overload);
            let mut slow = Box::pin(svc.clone().oneshot(request(A, None)));
            let err = finish_but_keep(&mut slow).await.unwrap_err();
            assert_eq!(
                FailureKind::of(&err),
                FailureKind::Deadline,
                "{form}: {err}"
            );
            assert_eq!(overload.state(&key(A)).unwrap().in_flight, 0, "{form}");
            let next = svc.clone().oneshot(request(A, None)).await;
            assert!(next.is_ok(), "{form}: {next:?}");
            drop(slow);
        }
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn combined_a_call_over_but_kept_takes_the_slot_from_a_live_one() {
        let upstream = Upstream::answering([(5 * SEC, 200)]);
        let overload = OverloadPolicy::bulkhead(1).unwrap().with_queue(1);
        let svc = ResiliencePolicy::new(SEC, SEC, retry())
            .unwrap()
            .with_guard(overload.clone())
            .layer()
            .layer(upstream.clone());
        let _busy = tokio::spawn(svc.clone().oneshot(request(A, None)));
        settle().await;
        let mut over = Box::pin(svc.clone().oneshot(request(A, None)));
        let err = finish_but_keep(&mut over).await.unwrap_err();
        assert_eq!(FailureKind::of(&err), FailureKind::Deadline, "{err}");
        // The busy call ends at 5 s; its slot goes to the call that is over.
        time::sleep(5 * SEC).await;
        let start = Instant::now();
        let live = svc.clone().oneshot(request(A, None)).await;
        let state = overload.state(&key(A)).unwrap();
        assert!(
            live.is_ok(),
            "no call in flight, yet after {:?}: {:?}; {state:?}; upstream calls {}",
            start.elapsed(),
            live.map(|_| ()),
            upstream.calls()
        );
        drop(over);
    }

    // ----- a slot handed to a call dropped before it polls comes back

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn combined_a_call_granted_then_dropped_unpolled_gives_its_slot_back() {
        let upstream = Upstream::answering([(100 * MS, 200)]);
        let overload = OverloadPolicy::bulkhead(1).unwrap().with_queue(1);
        let svc = ResiliencePolicy::new(SEC, SEC, retry())
            .unwrap()
            .with_guard(overload.clone())
            .layer()
            .layer(upstream.clone());
        let busy = tokio::spawn(svc.clone().oneshot(request(A, None)));
        settle().await;
        let mut queued = Box::pin(svc.clone().oneshot(request(A, None)));
        assert!(futures_poll(&mut queued).is_none());
        assert_eq!(overload.state(&key(A)).unwrap().queued, 1);
        busy.await.unwrap().unwrap();
        let state = overload.state(&key(A)).unwrap();
        assert_eq!((state.in_flight, state.queued), (1, 0), "handed over");
        drop(queued);
        let state = overload.state(&key(A)).unwrap();
        assert_eq!((state.in_flight, state.queued), (0, 0), "{state:?}");
    }

    fn futures_poll<F: std::future::Future + Unpin>(fut: &mut F) -> Option<F::Output> {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        match std::pin::Pin::new(fut).poll(&mut cx) {
            std::task::Poll::Ready(out) => Some(out),
            std::task::Poll::Pending => None,
        }
    }

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_free_slot_is_taken_whatever_the_time_left_and_a_wait_is_not() {
        let upstream = Upstream::answering([(SEC, 200)]);
        let overload = OverloadPolicy::bulkhead(1)
            .unwrap()
            .with_queue(1)
            .with_min_attempt(500 * MS);
        let svc = GuardLayer::new(overload.clone()).layer(upstream.clone());
        let busy = spawn(&svc, request(A, Some(100 * MS)));
        settle().await;
        assert_eq!(
            upstream.calls(),
            1,
            "sent with 100 ms left: the slot was free"
        );
        let outcome = svc.clone().oneshot(request(A, Some(300 * MS))).await;
        assert_eq!(rejection(&outcome), Rejection::WaitTooLong);
        busy.abort();
    }

    // ----- a key with calls in flight is not idle

    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_key_with_a_call_in_flight_is_not_evicted_as_idle() {
        const B: &str = "http://b.test/";
        const C: &str = "http://c.test/";
        let upstream = Upstream::answering([
            (10 * SEC, 200),
            (Duration::ZERO, 200),
            (Duration::ZERO, 200),
            (10 * SEC, 200),
        ]);
        let overload = OverloadPolicy::bulkhead(1)
            .unwrap()
            .max_keys(2, SEC)
            .unwrap();
        let svc = GuardLayer::new(overload.clone()).layer(upstream.clone());
        let _a1 = spawn(&svc, request(A, None));
        settle().await;
        time::sleep(2 * SEC).await;
        assert!(svc.clone().oneshot(request(C, None)).await.is_ok());
        // A third key: A (a call in flight) or C (quiet) must go.
        assert!(svc.clone().oneshot(request(B, None)).await.is_ok());
        let a2 = spawn(&svc, request(A, None));
        settle().await;
        let (a2, _) = a2.await.unwrap();
        assert!(
            a2.is_err(),
            "a second call to A was sent: {} calls",
            upstream.calls()
        );
        assert!(matches!(rejection(&a2), Rejection::QueueFull { .. }));
    }
}
