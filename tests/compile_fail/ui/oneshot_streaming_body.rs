// The same streaming body, sent with `oneshot` through the whole stack.
use http::{Request, Response};
use http_resilience::{
    policy::{FixedDelay, StatusDecoder},
    retry::RetryPolicy,
    AttemptTimeoutLayer, DeadlineLayer, StatusRetryLayer,
};
use std::time::Duration;
use tower::{ServiceBuilder, ServiceExt};

/// A body that cannot be copied, as a stream.
struct Stream;

fn main() {
    let policy = RetryPolicy::new(StatusDecoder::new([503]).unwrap(), FixedDelay::never());
    let svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_secs(8)))
        .layer(StatusRetryLayer::new(policy))
        .layer(AttemptTimeoutLayer::new(Duration::from_secs(3)))
        .service_fn(|_: Request<Stream>| async {
            Ok::<_, std::convert::Infallible>(Response::new(()))
        });
    let _ = svc.oneshot(Request::new(Stream));
}
