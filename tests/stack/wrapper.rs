//! A stack taken apart with `Wrapper`: after calls through it, each layer
//! reaches the one inside it, and the upstream comes back with its state,
//! from the three layers and from the combined service; the gRPC stacks
//! reach the service they were given.

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::Full;
use http_resilience::{
    attempt_timeout::AttemptTimeout,
    policy::{FixedDelay, StatusDecoder},
    retry::{RetryPolicy, StatusRetry},
    AttemptTimeoutLayer, DeadlineLayer, ResiliencePolicy, StatusRetryLayer, Wrapper,
};
use std::{
    convert::Infallible,
    future::{ready, Ready},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    task::{Context, Poll},
    time::Duration,
};
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

/// An upstream that answers 503 to its first two calls and 200 after, its
/// calls counted across its clones.
#[derive(Debug, Clone)]
struct Upstream {
    name: &'static str,
    calls: Arc<AtomicUsize>,
}

impl Service<Request<Full<Bytes>>> for Upstream {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = Ready<Result<Response<String>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<Full<Bytes>>) -> Self::Future {
        let before = self.calls.fetch_add(1, Ordering::SeqCst);
        let status = if before < 2 { 503 } else { 200 };
        let response = Response::builder().status(status).body(String::new());
        ready(Ok(response.expect("a valid response")))
    }
}

fn retry() -> RetryPolicy<StatusDecoder, FixedDelay> {
    RetryPolicy::new(
        StatusDecoder::new([503]).unwrap(),
        FixedDelay::new(Duration::from_millis(10), 2),
    )
}

/// One call through `svc`, which must end in a 200 after two retries.
async fn call_once<S, T>(svc: &mut S)
where
    S: Service<Request<Full<Bytes>>, Response = Response<T>>,
    S::Error: std::fmt::Debug,
{
    let request = Request::new(Full::new(Bytes::from_static(b"ping")));
    let response = svc.ready().await.unwrap().call(request).await.unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test(start_paused = true)]
async fn the_three_layers_give_their_inner_services_back() {
    let calls = Arc::new(AtomicUsize::new(0));
    let upstream = Upstream {
        name: "upstream",
        calls: Arc::clone(&calls),
    };
    let mut svc = ServiceBuilder::new()
        .layer(DeadlineLayer::new(Duration::from_secs(8)))
        .layer(StatusRetryLayer::new(retry()))
        .layer(AttemptTimeoutLayer::new(Duration::from_secs(3)))
        .service(upstream);
    call_once(&mut svc).await;

    // Reached by reference, layer by layer, outermost first.
    let retrying: &StatusRetry<_, _, _> = svc.get_ref();
    let attempt: &AttemptTimeout<Upstream> = retrying.get_ref();
    assert_eq!(attempt.get_ref().name, "upstream");
    assert!(Arc::ptr_eq(&attempt.get_ref().calls, &calls));

    // Taken back: the upstream the stack was built on, which saw the three
    // attempts of the call.
    let back: Upstream = svc.into_inner().into_inner().into_inner();
    assert_eq!(back.name, "upstream");
    assert!(Arc::ptr_eq(&back.calls, &calls));
    assert_eq!(back.calls.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn the_combined_service_gives_its_inner_service_back() {
    let calls = Arc::new(AtomicUsize::new(0));
    let upstream = Upstream {
        name: "combined",
        calls: Arc::clone(&calls),
    };
    let policy =
        ResiliencePolicy::new(Duration::from_secs(8), Duration::from_secs(3), retry()).unwrap();
    let mut svc = policy.layer().layer(upstream);
    call_once(&mut svc).await;

    assert_eq!(svc.get_ref().name, "combined");
    let back: Upstream = svc.into_inner();
    assert!(Arc::ptr_eq(&back.calls, &calls));
    assert_eq!(back.calls.load(Ordering::SeqCst), 3);
}

/// The gRPC stacks (feature `tonic`) reach through their layers to the
/// service they were given, a tonic `Channel` in use.
#[test]
fn the_grpc_stacks_give_the_service_they_were_given_back() {
    use http_resilience::{
        grpc::{GrpcHedgeLayer, GrpcLayer},
        hedge::{HedgeDelay, HedgePolicy},
        policy::GrpcDecoder,
    };
    let calls = Arc::new(AtomicUsize::new(0));
    let upstream = Upstream {
        name: "channel",
        calls: Arc::clone(&calls),
    };

    let retry = RetryPolicy::new(GrpcDecoder::default(), FixedDelay::never());
    let policy = ResiliencePolicy::new(Duration::from_secs(8), Duration::from_secs(3), retry);
    let grpc = GrpcLayer::new(policy.unwrap()).layer(upstream.clone());
    assert_eq!(grpc.get_ref().name, "channel");
    assert!(Arc::ptr_eq(&grpc.into_inner().calls, &calls));

    let delay = HedgeDelay::fixed(Duration::from_millis(50));
    let policy = HedgePolicy::new(GrpcDecoder::default(), delay, 2).unwrap();
    let hedged = GrpcHedgeLayer::new(policy).layer(upstream);
    assert_eq!(hedged.get_ref().name, "channel");
    assert!(Arc::ptr_eq(&hedged.into_inner().calls, &calls));
}
