//! The fleet's quota while Redis is away.

use super::{Fallback, FleetQuota};
use crate::{guard::GuardLayer, rate_limit::RateLimitPolicy};
use std::{convert::Infallible, time::Duration};
use tokio::time::Instant;
use tower::{Layer, ServiceExt};

fn request() -> http::Request<()> {
    http::Request::get("http://upstream/").body(()).unwrap()
}

// NOTE: on the real clock: a call that asks again without end never lets the
// paused clock move, so the test would hang instead of failing.
#[tokio::test(flavor = "current_thread")]
async fn a_key_falls_back_while_redis_is_away_even_after_a_lease_of_no_token() {
    // Nothing listens on port 1 of the loopback: every lease fails at once.
    let fleet = FleetQuota::new("redis://127.0.0.1:1/")
        .unwrap()
        .with_fallback(Fallback::LocalShare(1.0))
        .unwrap();
    let policy = RateLimitPolicy::new(100, Duration::from_secs(1))
        .unwrap()
        .with_fleet(fleet);
    let svc =
        GuardLayer::new(policy.clone()).layer(tower::service_fn(|_: http::Request<()>| async {
            Ok::<_, Infallible>(http::Response::new(()))
        }));
    svc.clone()
        .oneshot(request())
        .await
        .expect("the fallback lets the first call through");

    // Before it went away, Redis had answered a lease with no token: the
    // fleet's quota is spent for the next 5 s.
    let buckets = policy.shared.registry.all();
    let leases = buckets[0].leases.as_ref().expect("a fleet's key leases");
    {
        let mut state = leases.lock();
        assert!(state.down, "the first call fell back");
        state.blocked_until = policy.shared.nanos(Instant::now()) + 5_000_000_000;
    }
    let started = Instant::now();
    svc.oneshot(request())
        .await
        .expect("the fallback lets the call through");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "the call waited {:?} for a quota Redis cannot lease",
        started.elapsed()
    );
}
