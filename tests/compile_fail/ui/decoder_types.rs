// A closure decoder written for `io::Error`, on a stack whose error is `BoxError`.
use http::{Request, Response};
use http_resilience::{
    policy::{FixedDelay, Verdict},
    retry::RetryPolicy,
    AttemptTimeoutLayer, StatusRetryLayer,
};
use std::time::Duration;
use tower::{Layer, Service};

fn main() {
    let decoder = |outcome: &Result<Response<()>, std::io::Error>| match outcome {
        Ok(_) => Verdict::Accept,
        Err(_) => Verdict::retry("transport error"),
    };
    let policy = RetryPolicy::new(decoder, FixedDelay::never());
    let inner = AttemptTimeoutLayer::new(Duration::from_secs(1)).layer(tower::service_fn(
        |_: Request<String>| async { Ok::<_, std::io::Error>(Response::new(())) },
    ));
    let mut svc = StatusRetryLayer::new(policy).layer(inner);
    let _ = Service::call(&mut svc, Request::new(String::new()));
}
