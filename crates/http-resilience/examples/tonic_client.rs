//! A tonic client with gRPC's retries: a loopback tonic-health server that is
//! overloaded for its first two calls, the `grpc` preset around the client's
//! `Channel`, and a call whose timeout the server would never meet.
//!
//! ```text
//! cargo run -p http-resilience --example tonic_client
//! ```
//!
//! Copied into a project of its own (as `src/main.rs`), it needs, besides
//! the crates the README's "Use" section lists:
//!
//! ```toml
//! tokio-stream = { version = "0.1", features = ["net"] }
//! tonic = { version = "0.14", features = ["transport", "router"] }
//! tonic-health = "0.14"
//! ```

use http_resilience::{grpc::GrpcLayer, policy::CallEvent, presets, Attempts, BoxError};
use std::{
    convert::Infallible,
    future::Future,
    pin::Pin,
    sync::{
        atomic::{AtomicU32, Ordering},
        Arc,
    },
    task::{Context, Poll},
    time::Duration,
};
use tokio::net::TcpListener;
use tonic::{transport::Channel, Code};
use tonic_health::pb::{health_client::HealthClient, HealthCheckRequest};
use tower::{Layer, Service};

#[tokio::main]
async fn main() -> Result<(), BoxError> {
    let addr = overloaded_server().await?;

    // The client side: a channel, the layers, the generated client. The
    // layer is told the channel's endpoint: a client made with `new` sends
    // its calls with the path alone.
    let endpoint = Channel::from_shared(format!("http://{addr}"))?;
    let policy = presets::grpc().map_retry(|retry| {
        retry
            .map_options(|o| o.with_listener(|heard: &CallEvent<'_>| println!("  {}", heard.event)))
    });
    let layer = GrpcLayer::new(policy).with_authority(endpoint.uri())?;
    let mut client = HealthClient::new(layer.layer(endpoint.connect_lazy()));

    println!("Check at {addr} (the server is overloaded for two calls)");
    let (_, reply, extensions) = client.check(check()).await?.into_parts();
    let attempts = extensions.get::<Attempts>().map_or(1, Attempts::get);
    println!("{:?} after {attempts} attempts", reply.status());

    println!("Check with a 200 ms timeout, which the server never answers");
    let mut request = check();
    request.set_timeout(Duration::from_millis(200)); // sent as grpc-timeout, and enforced
    request.metadata_mut().insert("x-hang", "1".parse()?);
    match client.check(request).await {
        Err(status) if status.code() == Code::DeadlineExceeded => {
            println!("{:?}: {}", status.code(), status.message());
        }
        other => println!("unexpected: {other:?}"),
    }
    Ok(())
}

fn check() -> tonic::Request<HealthCheckRequest> {
    tonic::Request::new(HealthCheckRequest {
        service: String::new(),
    })
}

/// tonic-health's service on a loopback port, behind a layer that ends the
/// first two calls with `UNAVAILABLE` (the second with a pushback of 150 ms)
/// and never answers a call marked `x-hang`.
async fn overloaded_server() -> Result<std::net::SocketAddr, BoxError> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let (_reporter, health) = tonic_health::server::health_reporter();
    let calls = Arc::new(AtomicU32::new(0));
    let overloaded = tower::layer::layer_fn(move |inner| Overloaded {
        inner,
        calls: calls.clone(),
    });
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    tokio::spawn(
        tonic::transport::Server::builder()
            .layer(overloaded)
            .add_service(health)
            .serve_with_incoming(incoming),
    );
    Ok(addr)
}

#[derive(Clone)]
struct Overloaded<S> {
    inner: S,
    calls: Arc<AtomicU32>,
}

type Reply = Result<http::Response<tonic::body::Body>, Infallible>;

impl<S> Service<http::Request<tonic::body::Body>> for Overloaded<S>
where
    S: Service<http::Request<tonic::body::Body>, Response = http::Response<tonic::body::Body>>,
    S: Service<http::Request<tonic::body::Body>, Error = Infallible>,
    S::Future: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Reply> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        if request.headers().contains_key("x-hang") {
            return Box::pin(std::future::pending());
        }
        let call = self.calls.fetch_add(1, Ordering::Relaxed);
        if call < 2 {
            // A trailers-only response: the status in the head, no body.
            let mut response = http::Response::builder()
                .header("content-type", "application/grpc")
                .header("grpc-status", "14")
                .header("grpc-message", "overloaded");
            if call == 1 {
                response = response.header("grpc-retry-pushback-ms", "150");
            }
            let response = response.body(tonic::body::Body::empty()).unwrap();
            return Box::pin(async move { Ok(response) });
        }
        Box::pin(self.inner.call(request))
    }
}
