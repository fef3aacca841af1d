// A ready-made decoder right on a service whose error type it cannot classify.
use http::{Request, Response};
use http_resilience::{
    policy::{FixedDelay, TransientDecoder},
    retry::RetryPolicy,
    StatusRetryLayer,
};
use tower::{Layer, Service};

/// A service's own error type.
#[derive(Debug)]
struct Unavailable;

fn main() {
    let policy = RetryPolicy::new(TransientDecoder::new(), FixedDelay::never());
    let mut svc = StatusRetryLayer::new(policy).layer(tower::service_fn(|_: Request<String>| async {
        Err::<Response<()>, _>(Unavailable)
    }));
    let _ = Service::call(&mut svc, Request::new(String::new()));
}
