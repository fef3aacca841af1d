// A streaming body (not `Clone`) given to the retry layer as it is.
use http::{Request, Response};
use http_resilience::{
    policy::{FixedDelay, StatusDecoder},
    retry::RetryPolicy,
    StatusRetryLayer,
};
use tower::{Layer, Service};

/// A body that cannot be copied, as a stream.
struct Stream;

fn main() {
    let policy = RetryPolicy::new(StatusDecoder::new([503]).unwrap(), FixedDelay::never());
    let mut svc = StatusRetryLayer::new(policy).layer(tower::service_fn(|_: Request<Stream>| async {
        Ok::<_, std::convert::Infallible>(Response::new(()))
    }));
    let _ = Service::call(&mut svc, Request::new(Stream));
}
