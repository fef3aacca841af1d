//! Two guards in a row that each make a call wait: the second wait wakes the
//! call as the first did, in both forms.
//!
//! Paused clock, over an upstream that answers after 100 ms.

use http::{Request, Response};
use http_resilience::{
    guard::GuardLayer,
    overload::OverloadPolicy,
    policy::{FixedDelay, StatusDecoder},
    rate_limit::RateLimitPolicy,
    retry::RetryPolicy,
    BoxError, ResiliencePolicy,
};
use std::{convert::Infallible, time::Duration};
use tokio::time::{self, Instant};
use tower::{Service, ServiceBuilder, ServiceExt};

const MS: Duration = Duration::from_millis(1);

fn get() -> Request<String> {
    Request::get("http://api.test/")
        .body(String::new())
        .unwrap()
}

async fn upstream(_: Request<String>) -> Result<Response<String>, Infallible> {
    time::sleep(100 * MS).await;
    Ok(Response::new(String::from("ok")))
}

/// A bulkhead of one slot with a queue, then a rate limit of one call a
/// second: a second call queues for the slot until the first ends (100 ms),
/// then waits for the rate limit's next slot (1 s).
fn bulkhead_then_rate_limit() -> (OverloadPolicy, RateLimitPolicy) {
    let bulkhead = OverloadPolicy::bulkhead(1).unwrap().with_queue(10);
    (
        bulkhead,
        RateLimitPolicy::new(1, Duration::from_secs(1)).unwrap(),
    )
}

/// Two calls of `svc`, the second sent while the first is in flight; when
/// each ended, from the start.
async fn two_calls<S>(svc: S) -> [Duration; 2]
where
    S: Service<Request<String>, Error = BoxError> + Clone + Send + 'static,
    S::Future: Send,
    S::Response: Send,
{
    let start = Instant::now();
    let call = |svc: S| {
        tokio::spawn(async move {
            let ended = svc.oneshot(get()).await.map(|_| start.elapsed());
            ended.map_err(|err| err.to_string())
        })
    };
    let first = call(svc.clone());
    tokio::task::yield_now().await;
    let second = call(svc);
    let guard = Duration::from_secs(30);
    let ended = |joined| time::timeout(guard, joined);
    let first = ended(first).await.expect("the first call ends").unwrap();
    let second = ended(second)
        .await
        .expect("the second call is woken")
        .unwrap();
    [first.unwrap(), second.unwrap()]
}

#[tokio::test(start_paused = true)]
async fn a_call_waiting_for_one_guard_then_another_is_woken_by_the_guard_layer() {
    let svc = ServiceBuilder::new()
        .layer(GuardLayer::new(bulkhead_then_rate_limit()))
        .service_fn(upstream)
        .map_err(BoxError::from);
    assert_eq!(two_calls(svc).await, [100 * MS, 1_100 * MS]);
}

#[tokio::test(start_paused = true)]
async fn a_call_waiting_for_one_guard_then_another_is_woken_in_the_combined_service() {
    let retry = RetryPolicy::new(StatusDecoder::new([503]).unwrap(), FixedDelay::new(MS, 2));
    let policy = ResiliencePolicy::new(Duration::from_secs(8), Duration::from_secs(3), retry)
        .unwrap()
        .with_guard(bulkhead_then_rate_limit());
    let svc = ServiceBuilder::new()
        .layer(policy.layer())
        .service_fn(upstream);
    assert_eq!(two_calls(svc).await, [100 * MS, 1_100 * MS]);
}
