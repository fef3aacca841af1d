//! A percentile delay hedges from its `min_samples`-th latency on, within
//! the first window, and stays quiet before. On tokio's paused clock.

use http::{Request, Response};
use http_resilience::{
    hedge::{HedgeDelay, HedgeLayer, HedgePolicy},
    policy::TransientDecoder,
    Attempts,
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
use tower::{Layer, Service, ServiceExt};

const MS: fn(u64) -> Duration = Duration::from_millis;

/// Every call answers in 10 ms but the ones `slow` picks, which take 10 s.
fn upstream(
    slow: fn(u32) -> bool,
) -> impl Service<Request<String>, Response = Response<String>, Error = Infallible, Future: Send> + Clone
{
    let calls = Arc::new(AtomicU32::new(0));
    tower::service_fn(move |_: Request<String>| {
        let n = calls.fetch_add(1, Ordering::SeqCst);
        async move {
            let latency = if slow(n) {
                Duration::from_secs(10)
            } else {
                MS(10)
            };
            tokio::time::sleep(latency).await;
            Ok::<_, Infallible>(Response::new(n.to_string()))
        }
    })
}

async fn call<S>(svc: &mut S) -> (Duration, u32, u32)
where
    S: Service<Request<String>, Response = Response<String>, Error = Infallible>,
{
    let start = Instant::now();
    let response = svc
        .ready()
        .await
        .unwrap()
        .call(Request::new(String::new()))
        .await
        .unwrap();
    // A response accepted at its first attempt carries no report: one
    // attempt, which won.
    let winner = response
        .extensions()
        .get::<Attempts>()
        .map_or(1, Attempts::winner);
    (start.elapsed(), Attempts::of(&response), winner)
}

#[tokio::test(start_paused = true)]
async fn a_percentile_delay_hedges_once_min_samples_are_seen_in_the_first_window() {
    // One window of a minute holds every call below (about 20 s in all).
    let delay = HedgeDelay::percentile(90.0, 20, Duration::from_secs(60)).unwrap();
    let policy = HedgePolicy::new(TransientDecoder::new(), delay, 2).unwrap();
    // The 20th call (n = 19) and the 22nd (n = 21) are slow.
    let mut svc = HedgeLayer::new(policy).layer(upstream(|n| n == 19 || n == 21));

    for _ in 0..19 {
        assert_eq!(call(&mut svc).await.1, 1);
    }
    // Only 19 latencies are known: no delay yet, so the slow call is not
    // hedged.
    let (elapsed, attempts, _) = call(&mut svc).await;
    assert_eq!((elapsed, attempts), (Duration::from_secs(10), 1));
    // The 20th latency came in with it: its copy is hedged at the 90th
    // percentile (10 ms, within a bucket's 12.5 %), still in the first window.
    let (elapsed, attempts, _) = call(&mut svc).await;
    assert_eq!(attempts, 1, "a fast call is not hedged");
    assert_eq!(elapsed, MS(10));
    let (elapsed, attempts, winner) = call(&mut svc).await;
    assert_eq!((attempts, winner), (2, 2), "{elapsed:?}");
    assert!(elapsed > MS(10) && elapsed <= MS(22), "{elapsed:?}");
}
