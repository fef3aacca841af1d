//! The local rate limit over loopback, on the real clock: a hyper-util
//! client through the layers, against counting upstreams.

use super::{
    support::{get, guarded},
    upstream::{busiest, Upstream},
};
use bytes::Bytes;
use http::Request;
use http_body_util::Full;
use http_resilience::retry::{RetryPolicy, StatusRetryLayer};
use http_resilience::{
    guard::GuardLayer,
    policy::{FixedDelay, RetryBudget, TransientDecoder},
    presets,
    rate_limit::{Limited, RateLimitMode, RateLimitPolicy, RateLimited, ServerSignals},
    reqwest_client::ResilientClient,
    transport, AttemptTimeoutLayer, BoxError, DeadlineLayer, FailureKind, ResiliencePolicy,
    RetryReport, Stop,
};
use std::time::Duration;
use tokio::time::Instant;
use tower::{util::BoxCloneService, Layer, Service, ServiceBuilder, ServiceExt};

fn per_second(calls: u32, burst: u32) -> RateLimitPolicy {
    RateLimitPolicy::new(calls, Duration::from_secs(1))
        .unwrap()
        .with_burst(burst)
        .unwrap()
}

/// The three layers' form with `limit` between the deadline and the attempt
/// timeout, over a hyper-util client.
fn stack(
    limit: RateLimitPolicy,
    deadline: Duration,
) -> impl Service<
    Request<Full<Bytes>>,
    Response = http::Response<impl Send + std::fmt::Debug>,
    Error = BoxError,
    Future: Send,
> + Clone
       + Send
       + 'static {
    let client = transport::Builder::new()
        .build_http::<Full<Bytes>>()
        .expect("a client");
    ServiceBuilder::new()
        .layer(DeadlineLayer::new(deadline))
        .layer(GuardLayer::new(limit))
        .layer(AttemptTimeoutLayer::new(Duration::from_secs(5)))
        .service(client)
}

/// The calls of the burst: three full windows of the limit.
///
/// NOTE: 300 calls at 100/s take 2.9 s rather than the 10 s of 1,000, and
/// every window of one second that starts at an arrival is checked (some
/// 300 of them), so that the check still covers the burst at the start and
/// the steady pace after it.
const BURST_CALLS: usize = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_reaches_the_upstream_at_the_rate_in_every_window() {
    let _turn = super::ONE_AT_A_TIME.lock().await;
    let upstream = Upstream::start().await;
    let svc = stack(per_second(100, 10), Duration::from_secs(30));
    let calls: Vec<_> = (0..BURST_CALLS)
        .map(|_| tokio::spawn(svc.clone().oneshot(get(upstream.uri("/")))))
        .collect();
    for call in calls {
        guarded(call).await.unwrap().unwrap();
    }
    let arrivals: Vec<Instant> = upstream.arrivals().iter().map(|a| a.at).collect();
    assert_eq!(arrivals.len(), BURST_CALLS);
    let span = *arrivals.iter().max().unwrap() - *arrivals.iter().min().unwrap();
    assert!(span >= Duration::from_millis(2_850), "paced: {span:?}");
    // NOTE: 100 a second plus the burst of 10, as the client sends them;
    // measured at the server, where a loaded machine may bunch a few
    // arrivals that left 10 ms apart, the bound is the same plus 5.
    let most = busiest(&arrivals, Duration::from_secs(1));
    assert!(most <= 110 + 5, "{most} calls in one second");
}

#[tokio::test]
async fn a_waiting_call_whose_deadline_cannot_fit_fails_at_once() {
    let upstream = Upstream::start().await;
    let svc = stack(per_second(1, 1), Duration::from_millis(500));
    guarded(svc.clone().oneshot(get(upstream.uri("/"))))
        .await
        .unwrap();
    let start = Instant::now();
    let err = guarded(svc.clone().oneshot(get(upstream.uri("/"))))
        .await
        .unwrap_err();
    assert!(
        start.elapsed() < Duration::from_millis(250),
        "at once: {:?}",
        start.elapsed()
    );
    assert_eq!(FailureKind::of(&err), FailureKind::RateLimited, "{err}");
    let limited = err.downcast_ref::<RateLimited>().unwrap();
    assert_eq!(limited.reason(), Limited::WaitTooLong);
    assert_eq!(upstream.arrivals().len(), 1, "never sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retry_after_pauses_every_caller_of_the_authority_until_the_instant_named() {
    let paused = Upstream::start().await;
    let other = Upstream::start().await;
    let limit = per_second(100, 10).with_server_signals(ServerSignals::ALL);
    let svc = stack(limit, Duration::from_secs(10));
    let response = guarded(svc.clone().oneshot(get(paused.uri("/429"))))
        .await
        .unwrap();
    assert_eq!(response.status(), 429);
    let named = paused.arrivals()[0].at + Duration::from_secs(2);

    let callers: Vec<_> = (0..8)
        .map(|_| tokio::spawn(svc.clone().oneshot(get(paused.uri("/")))))
        .collect();
    let untouched = Instant::now();
    guarded(svc.clone().oneshot(get(other.uri("/"))))
        .await
        .unwrap();
    assert!(
        untouched.elapsed() < Duration::from_millis(500),
        "another authority waits for nothing"
    );
    for caller in callers {
        guarded(caller).await.unwrap().unwrap();
    }
    let after: Vec<Instant> = paused.arrivals()[1..].iter().map(|a| a.at).collect();
    assert_eq!(after.len(), 8);
    for at in after {
        // NOTE: measured at the server, with a tolerance of 0 ms early.
        assert!(at >= named, "{:?} early", named - at);
    }
}

#[tokio::test]
async fn reqwest_reports_a_call_the_limit_turned_away() {
    let upstream = Upstream::start().await;
    let limit = RateLimitPolicy::new(1, Duration::from_secs(60))
        .unwrap()
        .with_mode(RateLimitMode::TurnAway);
    let client = ResilientClient::new(
        reqwest::Client::builder().build().unwrap(),
        presets::reactor().with_guard(limit).layer(),
    );
    let url = upstream.uri("/").to_string();
    guarded(client.get(&url).send()).await.unwrap();
    let err = guarded(client.get(&url).send()).await.unwrap_err();
    assert_eq!(err.kind(), FailureKind::RateLimited, "{err}");
    assert!(FailureKind::RateLimited.is_turned_away());
    assert_eq!(err.attempts(), 1, "not retried");
    assert_eq!(upstream.arrivals().len(), 1);
}

/// The two forms, each with a retry policy that spends `budget` and the
/// rate limit turning calls away at once, over a hyper-util client.
fn turning_away(
    combined: bool,
    budget: &std::sync::Arc<RetryBudget>,
) -> BoxCloneService<Request<Full<Bytes>>, http::StatusCode, BoxError> {
    // One call per minute: the first goes, the next are over the limit.
    let limit = RateLimitPolicy::new(1, Duration::from_secs(60))
        .unwrap()
        .with_mode(RateLimitMode::TurnAway);
    let retry = RetryPolicy::new(
        TransientDecoder::new(),
        FixedDelay::new(Duration::from_millis(10), 3),
    )
    .map_options(|o| o.with_budget(std::sync::Arc::clone(budget)));
    let (deadline, attempt) = (Duration::from_secs(10), Duration::from_secs(2));
    let client = transport::Builder::new()
        .build_http::<Full<Bytes>>()
        .expect("a client");
    if combined {
        let policy = ResiliencePolicy::new(deadline, attempt, retry)
            .unwrap()
            .with_guard(limit);
        let svc = policy.layer().layer(client);
        return BoxCloneService::new(svc.map_response(|r| r.status()));
    }
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(deadline))
        .layer(StatusRetryLayer::new(retry))
        .layer(GuardLayer::new(limit))
        .layer(AttemptTimeoutLayer::new(attempt))
        .service(client);
    BoxCloneService::new(svc.map_response(|r| r.status()))
}

#[tokio::test]
async fn a_call_the_limit_turned_away_is_not_sent_not_retried_and_costs_no_retry_budget() {
    for combined in [false, true] {
        let upstream = Upstream::start().await;
        let budget = std::sync::Arc::new(RetryBudget::new(10, 0.1).unwrap());
        let svc = turning_away(combined, &budget);
        let first = guarded(svc.clone().oneshot(get(upstream.uri("/"))))
            .await
            .unwrap();
        assert_eq!(first, 200);
        let full = budget.tokens_milli();
        for _ in 0..20 {
            let report = RetryReport::new();
            let mut request = get(upstream.uri("/"));
            request.extensions_mut().insert(report.clone());
            let err = guarded(svc.clone().oneshot(request)).await.unwrap_err();
            assert_eq!(FailureKind::of(&*err), FailureKind::RateLimited, "{err}");
            assert!(err.downcast_ref::<RateLimited>().is_some(), "{err}");
            let summary = report.summary().unwrap();
            assert_eq!(
                (summary.get(), summary.stop()),
                (1, Stop::Failed),
                "not retried; combined: {combined}"
            );
        }
        assert_eq!(upstream.arrivals().len(), 1, "combined: {combined}");
        assert_eq!(budget.tokens_milli(), full, "combined: {combined}");
    }
}
