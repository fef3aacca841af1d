//! One quota shared by a fleet through a real Redis: processes of this test
//! binary run again as the fleet (`child_process`), against one counting
//! upstream in the test's own process.
//!
//! The full ten-second run is the `quota` bench's
//! (`cargo bench -p http-resilience-bench --bench quota`); these runs last a
//! few seconds and assert the same bounds.

use super::{
    fleet_run::{self, collect, figures, spawn, start_instant, Plan, PLAN},
    redis::Redis,
    upstream::Upstream,
};
use std::time::Duration;
use tokio::time::Instant;

/// A child of the fleet tests: does nothing unless [`PLAN`] is set.
#[test]
fn child_process() {
    if let Ok(plan) = std::env::var(PLAN) {
        fleet_run::child_main(&plan);
    }
}

/// The arguments that make this binary run [`child_process`] alone.
const CHILD: [&str; 5] = [
    "--exact",
    "fleet::child_process",
    "--nocapture",
    "--test-threads",
    "1",
];

fn plan(redis: &Redis, upstream: &Upstream, prefix: &str, millis: u64) -> Plan {
    Plan {
        redis: redis.url(),
        prefix: prefix.to_owned(),
        upstream: upstream.addr,
        rate: 500,
        callers: 16,
        start_ms: Plan::starting_in(Duration::from_millis(1_500)),
        millis,
        share: 0.25,
        lease_wait_ms: 5,
        turn_away: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_processes_share_one_quota_within_its_bounds() {
    let _turn = super::ONE_AT_A_TIME.lock().await;
    let Some(redis) = Redis::start_or_skip().await else {
        return;
    };
    let upstream = Upstream::start().await;
    let plan = plan(&redis, &upstream, "four", 4_000);
    let start = start_instant(&plan);
    let exe = std::env::current_exe().unwrap();
    let children = spawn(&exe, &CHILD, &vec![plan.clone(); 4]);
    let counts = tokio::task::spawn_blocking(move || collect(children))
        .await
        .unwrap();
    let arrivals: Vec<Instant> = upstream.arrivals().iter().map(|a| a.at).collect();
    let figures = figures(&plan, &arrivals, start, &counts);

    // NOTE: the documented bound: the burst (10) and the tokens leased and
    // not spent when the run starts or ends, two leases of 25 per process.
    let bound = (10.0 + 2.0 * 25.0 * 4.0) / (500.0 * 4.0);
    assert!(
        (0.95..=1.0 + bound).contains(&figures.aggregate),
        "{figures:?} {counts:?}"
    );
    assert!(figures.busiest <= 1.05, "{figures:?} {counts:?}");
    assert!(
        figures.round_trips_per_call <= 0.05,
        "{figures:?} {counts:?}"
    );
}

/// Sends `signal` to the Redis server's process (`STOP` freezes it: its
/// socket accepts, nothing answers; `CONT` thaws it).
fn signal(redis: &Redis, signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(redis.pid().to_string())
        .status()
        .unwrap();
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_stopped_mid_run_falls_back_within_the_wait_and_leases_resume() {
    let _turn = super::ONE_AT_A_TIME.lock().await;
    let Some(redis) = Redis::start_or_skip().await else {
        return;
    };
    let upstream = Upstream::start().await;
    let mut plan = plan(&redis, &upstream, "stopped", 4_000);
    plan.rate = 200;
    plan.callers = 8;
    plan.lease_wait_ms = 20;
    plan.turn_away = true;
    plan.start_ms = Plan::starting_in(Duration::from_millis(200));
    let start = start_instant(&plan);
    let running = {
        let plan = plan.clone();
        tokio::spawn(async move { fleet_run::run(&plan).await })
    };
    tokio::time::sleep_until(start + Duration::from_secs(1)).await;
    signal(&redis, "STOP");
    let stopped = Instant::now();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    signal(&redis, "CONT");
    let resumed = Instant::now();
    let counts = running.await.unwrap();

    assert!(counts.fallbacks >= 1, "{counts:?}");
    // No call waited for Redis longer than the lease wait, far below the
    // second a lease may take before it counts as failed.
    assert!(counts.slowest_ms < 300, "{counts:?}");
    let resumed_ms = (resumed - start).as_millis() as u64;
    let recovered = counts.recovered_ms.expect("leases came back");
    assert!(
        recovered <= resumed_ms + 1_000,
        "resumed at {resumed_ms} ms, leased again at {recovered} ms"
    );
    // The fallback held: a quarter of the quota while Redis was away, plus
    // the burst and the tokens leased before (two leases of 10).
    let away: Vec<Instant> = upstream
        .arrivals()
        .iter()
        .map(|a| a.at)
        .filter(|at| *at >= stopped && *at < resumed)
        .collect();
    let span = (resumed - stopped).as_secs_f64();
    let most = 0.25 * 200.0 * span + 10.0 + 20.0;
    assert!((away.len() as f64) <= most, "{} > {most}", away.len());
    assert!(
        away.len() as f64 >= 0.5 * 0.25 * 200.0 * span,
        "the fallback let calls through: {}",
        away.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_429_heard_by_one_process_pauses_another_through_redis() {
    use http_resilience::{
        presets,
        rate_limit::{fleet::FleetQuota, RateLimitPolicy, ServerSignals},
    };
    use tower::{Layer, ServiceExt};
    let _turn = super::ONE_AT_A_TIME.lock().await;
    let Some(redis) = Redis::start_or_skip().await else {
        return;
    };
    let upstream = Upstream::start().await;
    // Two policies with buckets of their own: two processes of one fleet.
    let process = || async {
        let fleet = FleetQuota::new(&redis.url()).unwrap().with_prefix("paused");
        fleet.connect().await.unwrap();
        let limit = RateLimitPolicy::new(100, Duration::from_secs(1))
            .unwrap()
            .with_server_signals(ServerSignals::ALL)
            .with_fleet(fleet);
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http::<http_body_util::Full<bytes::Bytes>>();
        presets::reactor().with_guard(limit).layer().layer(client)
    };
    let (first, second) = (process().await, process().await);
    let told = first
        .oneshot(super::support::get(upstream.uri("/429")))
        .await
        .unwrap();
    assert_eq!(told.status(), 429);
    // The pause reaches Redis in the background: one round trip.
    tokio::time::sleep(Duration::from_millis(200)).await;

    second
        .oneshot(super::support::get(upstream.uri("/")))
        .await
        .unwrap();

    let arrivals = upstream.arrivals();
    let named = arrivals[0].at + Duration::from_secs(2);
    assert!(
        arrivals[1].at >= named,
        "{:?} early",
        named - arrivals[1].at
    );
}
